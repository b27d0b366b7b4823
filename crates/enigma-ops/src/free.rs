//! One free function per operation (`enigma_ops::softmax(&rt, …)`) and its
//! `_with` form taking [`Options`]: a fresh [`Ops`] for one call.

use crate::{AxisReduction, AxisScan, DType, Error, LossReduction, Mask, Ops, Options, PrefillShape, QuantizedWeights, ReduceOp, ScanKind};
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
    /// `r` over the middle axis of `[outer, axis, inner]` (`outer · inner` results).
    reduce_axis / reduce_axis_with(r: AxisReduction, x: &Buffer, outer: usize, axis: usize, inner: usize);
    /// The mean over the middle axis of `[outer, axis, inner]`.
    mean_axis / mean_axis_with(x: &Buffer, outer: usize, axis: usize, inner: usize);
    /// Cumulative sum or product over the middle axis of `[outer, axis, inner]`.
    scan_axis / scan_axis_with(op: AxisScan, x: &Buffer, outer: usize, axis: usize, inner: usize);
    /// Softmax or log-softmax over the middle axis of `[outer, axis, inner]`.
    softmax_axis / softmax_axis_with(x: &Buffer, outer: usize, axis: usize, inner: usize, log_form: bool);
    /// Cross-entropy of `[outer, classes, inner]` logits against i32 targets.
    cross_entropy / cross_entropy_with(x: &Buffer, target: &Buffer, outer: usize, classes: usize, inner: usize, ignore_index: i32, reduction: Option<LossReduction>);
    /// Row log-softmax.
    log_softmax / log_softmax_with(x: &Buffer, rows: usize, d: usize);
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
    /// `C[i] = A[i] · B[i]` over `batch` matrices, one dispatch.
    matmul_batched / matmul_batched_with(a: &Buffer, b: &Buffer, batch: usize, m: usize, n: usize, k: usize, out: DType);
    /// `C[i] = A · B[i]`: one A for every one of `batch` matrices B.
    matmul_shared_a / matmul_shared_a_with(a: &Buffer, b: &Buffer, batch: usize, m: usize, n: usize, k: usize, out: DType);
    /// `C = A · dequant(B)` for 4-bit weights.
    qmatmul / qmatmul_with(a: &Buffer, w: &QuantizedWeights, m: usize, out: DType);
}
