//! One free function per operation (`enigma_ops::softmax(&rt, …)`) and its
//! `_with` form taking [`Options`]: a fresh [`Ops`] for one call.

use crate::{DType, Error, Mask, Ops, Options, PrefillShape, QuantizedWeights, ReduceOp, ScanKind};
use enigma_runtime::{Buffer, Runtime};

macro_rules! free_fns {
    ($($(#[$doc:meta])* $name:ident / $with:ident ($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name(rt: &Runtime, $($arg: $ty),*) -> Result<Buffer, Error> {
            Ops::new(rt).$name($($arg),*)
        }
        #[doc = concat!("[`", stringify!($name), "()`] with [`Options`].")]
        #[allow(clippy::too_many_arguments)]
        pub fn $with(rt: &Runtime, $($arg: $ty,)* options: &Options) -> Result<Buffer, Error> {
            Ops::new(rt).with_options(options.clone()).$name($($arg),*)
        }
    )*};
}

free_fns! {
    /// `y = x · factor`.
    scale / scale_with(x: &Buffer, n: usize, factor: f32);
    /// `y = a + b`.
    add / add_with(a: &Buffer, b: &Buffer, n: usize);
    /// `y = a · b`.
    mul / mul_with(a: &Buffer, b: &Buffer, n: usize);
    /// `y = max(x, 0)`.
    relu / relu_with(x: &Buffer, n: usize);
    /// `y = x · sigmoid(x)`.
    silu / silu_with(x: &Buffer, n: usize);
    /// GELU, tanh form.
    gelu / gelu_with(x: &Buffer, n: usize);
    /// Sum of `n` elements (one f32).
    sum / sum_with(x: &Buffer, n: usize);
    /// Maximum of `n` elements (one f32).
    max / max_with(x: &Buffer, n: usize);
    /// Minimum of `n` elements (one f32).
    min / min_with(x: &Buffer, n: usize);
    /// `op` over each row (`rows` f32).
    reduce_rows / reduce_rows_with(op: ReduceOp, x: &Buffer, rows: usize, d: usize);
    /// Inclusive or exclusive prefix sum.
    prefix_sum / prefix_sum_with(x: &Buffer, n: usize, kind: ScanKind);
    /// Row softmax.
    softmax / softmax_with(x: &Buffer, rows: usize, d: usize);
    /// Row RMSNorm.
    rms_norm / rms_norm_with(x: &Buffer, w: &Buffer, rows: usize, d: usize, eps: f32);
    /// Row LayerNorm.
    layer_norm / layer_norm_with(x: &Buffer, w: &Buffer, b: &Buffer, rows: usize, d: usize, eps: f32);
    /// `y = W·x`.
    gemv / gemv_with(w: &Buffer, x: &Buffer, m: usize, k: usize);
    /// Attention decode, three dispatches.
    attention_decode / attention_decode_with(q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32);
    /// Attention decode, fused.
    attention_decode_fused / attention_decode_fused_with(q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32);
    /// Attention over a whole sequence (`softmax(Q·Kᵀ·scale + mask)·V`).
    attention_prefill / attention_prefill_with(q: &Buffer, k: &Buffer, v: &Buffer, shape: PrefillShape, mask: Mask, scale: Option<f32>);
    /// `C = A · B`, tiled on SIMD-group matrices.
    matmul / matmul_with(a: &Buffer, b: &Buffer, m: usize, n: usize, k: usize, out: DType);
    /// `C = A · dequant(B)` for 4-bit weights.
    qmatmul / qmatmul_with(a: &Buffer, w: &QuantizedWeights, m: usize, out: DType);
}
