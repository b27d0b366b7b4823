//! The kernel library, part I: the memory-bound kernels of an LLM decoder.
//!
//! | module | kernels |
//! |---|---|
//! | [`elementwise`] | scale, add, mul, div, relu, silu, gelu, sigmoid, exp, log (scalar, 4-wide, and 8 packed f16/bf16 per 16-byte access); broadcast add/mul/div over `[rows, inner]` |
//! | [`reduce`] | sum / max / min over a vector of any length (two passes), over rows, and over a middle axis by blocks of columns (the axis split over threadgroups where the blocks are few); argmax / argmin; pooling |
//! | [`scan`] | inclusive and exclusive prefix sums of any length (block scan, scan of block totals, add-back); running sums and products along rows, a threadgroup per row |
//! | [`softmax`] | row softmax: register-cached rows, or an online-maximum pass plus a normalisation pass |
//! | [`norm`] | RMSNorm and LayerNorm over rows, with weight (and bias) and `eps` by value: a threadgroup per long row, or lanes of a SIMD group per short row (several rows to a SIMD group or threadgroup, shuffle reductions, 16-byte words of f16/bf16) |
//! | [`gemv`] | `y = W·x` with f32/f16/bf16 weights and f32 accumulation, R rows per SIMD group |
//! | [`attention`] | attention decode: scores, softmax, weighted sum (seed 000's geometry) and a fused kernel |
//! | [`attention_prefill`] | attention over a whole sequence (FlashAttention-2 structure): Q blocks of 64 rows, K/V blocks staged by asynchronous copies, an online softmax, causal masks, grouped-query attention; its selection (`select_prefill`) |
//! | [`attention_prefill_cooperative`] | the same on cooperative tensors (`matmul2d`: `wgmma` on Hopper), P kept in the accumulator as the left operand of P·V |
//! | [`sgemm`] | `C = alpha·op(A)·op(B) + beta·C` for f32 inputs on scalar `fma`s: 128×128 tiles (fewer rows for small M), 8×8 outputs per thread in registers, slices staged as `float4`s |
//! | [`qmatmul`] | `C = A · dequant(B)` for decode sizes (M ≤ 8 per threadgroup): f16 `A`, FP4/INT4 `B`, K split over SIMD groups and, with an f32 workspace summed by the GEMM's split-K reduction, over threadgroups |
//! | [`qgemm_cooperative`] | `C = A · dequant(B)` on cooperative tensors (`matmul2d`: `wgmma` on Hopper), computed transposed: A and B's FP4/INT4 words and scales staged by asynchronous copies, the words decoded by the threads into a cooperative tensor of weights, the product's left operand (registers on `wgmma`) |
//! | [`qgemm_fused`] | `C = A · dequant(B)` on SIMD-group matrices with seed 002's *fused* dequantization: A's slice in threadgroup memory, B dequantized per SIMD group through one 8×8 f16 staging fragment |
//! | [`qmatmul_fragments`] | `C = A · dequant(B)` for decode sizes on fragment-ordered FP4/INT4 weights: B tiles decoded from 16-byte loads straight into the tensor cores' registers, K split over SIMD groups and threadgroups |
//! | [`qmatmul_affine`] | `C = A · dequant(B)` for MLX's affine 4-bit format (`[N][K/8]` words, scale and bias per group): a SIMD group per 1, 2 or 4 columns, lanes striding along K with `uint4` loads, `simd_sum` |
//! | [`conv`] | 2-D convolution over NCHW: the direct kernel, the unfoldings (im2col) a batched GEMM multiplies, depthwise convolutions by rows of 16-byte words and by tiles |
//! | [`conv_implicit`] | dense half-precision convolution as an implicit GEMM on cooperative tensors (`matmul2d`: `wgmma` on Hopper): the weights by tap, the input channels-last, the unfolding's slices staged by 16-byte asynchronous copies; its selection |
//! | [`quant`] | 4-bit weight formats (FP4 E2M1, INT4 U4B8 in seed 002's layout; MLX's affine format): quantize / dequantize on the host |
//!
//! Every kernel is a Rust function returning a [`Kernel`], generic over the
//! element type ([`DType`]) and the vector width (1, or 4 for `float4` /
//! `half4` / `bfloat4` loads) through its Rust parameters. Arithmetic is in
//! f32; an f16/bf16 result is rounded once, on the store. Each module also
//! computes the [`Dispatch`] for a problem shape and a threadgroup size
//! (which `enigma-ops` defaults to seed 004's table) and gives a plain-Rust
//! reference with f64 accumulation. The kernels hold no runtime dependency: `enigma-ops`
//! binds and runs them.
//!
//! # How the kernels are written
//! * Coalesced: consecutive lanes read consecutive elements (or `float4`s).
//! * Vectorised where alignment allows: a `float4` kernel takes the data
//!   through a vector view (`x4`); flat kernels also take the scalar view of
//!   the *same* buffer (`x`) for the tail of at most three elements. Row
//!   kernels use the vector view only when the row length is a multiple of 4.
//! * Reductions are SIMD-group reductions (`simd_sum`, `simd_max`) with one
//!   threadgroup barrier per stage: each SIMD group writes one partial, and
//!   after the barrier *every* SIMD group reduces the partials itself, so no
//!   second barrier is needed to broadcast the total.
//! * Few passes over memory: a row that fits in registers (up to
//!   [`MAX_CACHED_ITEMS`] loads per thread) is read once.
//! * Threadgroup sizes must be multiples of 32 (seed 004: "always use
//!   multiples of 32"); the cross-SIMD-group reductions assume full SIMD
//!   groups, and [`check_threads`] rejects other sizes.

use enigma_ir::builder::*;
use enigma_ir::{Kernel, MemFlags, Scalar, Type};
use std::fmt;

pub mod args;
pub mod attention;
pub mod attention_prefill;
mod attention_prefill_common;
pub mod attention_prefill_cooperative;
pub mod conv;
pub mod conv_implicit;
pub mod elementwise;
pub mod gemm;
pub mod gemv;
pub mod norm;
pub mod qgemm_cooperative;
pub mod qgemm_fused;
pub mod qmatmul;
pub mod qmatmul_affine;
pub mod qmatmul_fragments;
pub mod quant;
pub mod reduce;
pub mod scan;
pub mod select;
pub mod sgemm;
pub mod softmax;
pub mod split;
pub mod tile;
pub mod variants;

pub use enigma_ir::limits::{
    MAX_THREADGROUP_MEMORY_BYTES, MAX_THREADS_PER_THREADGROUP, SIMD_WIDTH,
};
/// The most vector loads a row kernel keeps in registers per thread before
/// it switches to streaming the row twice (32 floats per thread with `float4`).
pub const MAX_CACHED_ITEMS: u32 = 8;

/// The element type a kernel reads and writes. Arithmetic is always f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
}

impl DType {
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    pub fn scalar(self) -> Scalar {
        match self {
            DType::F32 => Scalar::F32,
            DType::F16 => Scalar::F16,
            DType::BF16 => Scalar::BF16,
        }
    }

    /// The element type of a view of `width` lanes (`half4` for F16, 4).
    pub fn ty(self, width: u8) -> Type {
        Type::vector(self.scalar(), width)
    }

    pub fn size_bytes(self) -> u32 {
        self.scalar().size_bytes()
    }

    pub fn name(self) -> &'static str {
        self.scalar().name()
    }

    pub fn from_scalar(s: Scalar) -> Option<DType> {
        match s {
            Scalar::F32 => Some(DType::F32),
            Scalar::F16 => Some(DType::F16),
            Scalar::BF16 => Some(DType::BF16),
            _ => None,
        }
    }

    /// Unit roundoff of the type (half an ulp at 1.0): the relative error of
    /// one rounding to it.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::F32 => f32::EPSILON as f64 / 2.0,
            DType::F16 => 1.0 / 2048.0,
            DType::BF16 => 1.0 / 256.0,
        }
    }

    /// Half the smallest subnormal of the type: the absolute error of one
    /// rounding of a value below the normal range (where the relative bound
    /// of [`DType::unit_roundoff`] does not hold).
    pub fn underflow_error(self) -> f64 {
        match self {
            DType::F32 => 2f64.powi(-150),
            DType::F16 => 2f64.powi(-25),
            DType::BF16 => 2f64.powi(-134),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Metal's two dispatch modes: the one type the planner, the backends and
/// the runtime share.
pub use enigma_analysis::geometry::DispatchMode;

/// How to dispatch a kernel: the mode, the grid size in that mode's unit,
/// and the threads per threadgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dispatch {
    pub mode: DispatchMode,
    pub size: [u32; 3],
    pub threads: [u32; 3],
}

impl Dispatch {
    /// `dispatchThreadgroups(size, threads)` with a 1-D threadgroup.
    pub fn threadgroups(size: [u32; 3], threads: u32) -> Dispatch {
        Dispatch { mode: DispatchMode::Threadgroups, size, threads: [threads, 1, 1] }
    }
}

/// A problem shape a kernel cannot run, or an override it cannot take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError {
    pub kernel: String,
    pub message: String,
}

impl ShapeError {
    pub fn new(kernel: impl Into<String>, message: impl Into<String>) -> ShapeError {
        ShapeError { kernel: kernel.into(), message: message.into() }
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kernel, self.message)
    }
}

impl std::error::Error for ShapeError {}

/// Checks a threadgroup size: a multiple of 32 between 32 and 1024.
///
/// The plans take the threadgroup size from their caller; `enigma-ops`
/// defaults it to seed 004's table (through `enigma-analysis`), seed 000's
/// geometry for GEMV and attention.
pub fn check_threads(kernel: &str, threads: u32) -> Result<u32, ShapeError> {
    if threads == 0 || threads > MAX_THREADS_PER_THREADGROUP || !threads.is_multiple_of(SIMD_WIDTH) {
        return Err(ShapeError::new(
            kernel,
            format!("threadgroup size {threads} is not a multiple of 32 between 32 and {MAX_THREADS_PER_THREADGROUP} (the library's reductions need whole SIMD groups)"),
        ));
    }
    Ok(threads)
}

/// A count that must fit the u32 by-value parameters of the kernels.
pub fn to_u32(kernel: &str, what: &str, v: usize) -> Result<u32, ShapeError> {
    u32::try_from(v).map_err(|_| ShapeError::new(kernel, format!("{what} = {v} does not fit in 32 bits")))
}

/// Rejects an empty dimension.
pub fn nonzero(kernel: &str, what: &str, v: usize) -> Result<(), ShapeError> {
    if v == 0 {
        return Err(ShapeError::new(kernel, format!("{what} must be at least 1")));
    }
    Ok(())
}

/// Asserts a vector width of 1 or 4 in a kernel builder (the plans check
/// widths with [`check_vec`] and return an error instead).
pub(crate) fn assert_vec(vec: u8) {
    assert!(vec == 1 || vec == 4, "vector width must be 1 or 4, got {vec}");
}

/// Checks a vector width (1 or 4) asked of a plan.
pub fn check_vec(kernel: &str, vec: u8) -> Result<(), ShapeError> {
    if vec == 1 || vec == 4 {
        Ok(())
    } else {
        Err(ShapeError::new(kernel, format!("vector width {vec} is not 1 or 4")))
    }
}

/// `ceil(n / 4)` in the kernel, without overflow for any `n`: the vectors
/// a flat vector kernel processes, the last one possibly partial.
pub(crate) fn vec_units(k: &mut KernelBuilder, n: Ex) -> Ex {
    k.let_("n4", n / 4u32 + select(lit(Scalar::U32, 0.0), lit(Scalar::U32, 1.0), (n % 4u32).ne(0u32)))
}

/// The suffix kernel names carry for a vector width.
pub(crate) fn vec_suffix(vec: u8) -> &'static str {
    if vec == 4 {
        "_vec4"
    } else {
        ""
    }
}

pub(crate) fn finish(k: KernelBuilder) -> Kernel {
    k.finish().expect("library kernels use only expressions of their own builder")
}

/// An f32 literal.
pub(crate) fn f(v: f64) -> Ex {
    lit(Scalar::F32, v)
}

/// An f32 value splatted to `width` lanes.
pub(crate) fn splat(v: f64, width: u8) -> Ex {
    if width == 1 {
        f(v)
    } else {
        vector(Type::vector(Scalar::F32, width), &[f(v)])
    }
}

/// `-INFINITY` as f32.
pub(crate) fn neg_inf() -> Ex {
    f(f64::NEG_INFINITY)
}

/// Loads `mem[index]` converted to f32 (or a float vector).
pub(crate) fn load_f32(mem: Mem, index: impl Into<Ex>) -> Ex {
    let v = mem.get(index);
    to_f32(v)
}

/// Converts to f32 lanes (no cast when already f32).
pub(crate) fn to_f32(v: Ex) -> Ex {
    if v.ty().elem() == Scalar::F32 {
        v
    } else {
        v.cast(v.ty().with_elem(Scalar::F32))
    }
}

/// Stores an f32 value (or float vector) into `mem[index]`, rounding once to
/// the memory's element type.
#[track_caller]
pub(crate) fn store_f32(k: &mut KernelBuilder, mem: Mem, index: impl Into<Ex>, v: Ex) {
    let ty = mem.elem();
    let v = if ty.elem() == Scalar::F32 { v } else { v.cast(ty) };
    k.store(mem.at(index), v);
}

/// The sum of a vector's lanes (the value itself for a scalar).
pub(crate) fn hsum(v: Ex) -> Ex {
    match v.ty().width() {
        1 => v,
        2 => v.x() + v.y(),
        3 => v.x() + v.y() + v.z(),
        _ => (v.x() + v.y()) + (v.z() + v.w()),
    }
}

/// The maximum of a vector's lanes.
pub(crate) fn hmax(v: Ex) -> Ex {
    match v.ty().width() {
        1 => v,
        _ => max(max(v.x(), v.y()), max(v.z(), v.w())),
    }
}

/// The minimum of a vector's lanes.
pub(crate) fn hmin(v: Ex) -> Ex {
    match v.ty().width() {
        1 => v,
        _ => min(min(v.x(), v.y()), min(v.z(), v.w())),
    }
}

/// `x` where `x` is not `-inf`, else 0: the shift that keeps
/// `exp2(a - shift)` from computing `-inf - -inf`.
pub(crate) fn finite_or_zero(x: Ex) -> Ex {
    select(x, f(0.0), x.eq(neg_inf()))
}

/// A reduction operator: the IR's (`enigma_ir::cooperative::ReduceOp`), the
/// one the cooperative tensors' row and column reductions take too.
pub use enigma_ir::cooperative::ReduceOp;

/// What each reduction operator is in the library's kernels: the builder
/// expressions that combine two values, reduce a SIMD group, and reduce a
/// vector's lanes.
pub(crate) trait ReduceExprs {
    fn combine(self, a: Ex, b: Ex) -> Ex;
    fn simd(self, x: Ex) -> Ex;
    /// Reduces a vector's lanes to a scalar.
    fn horizontal(self, v: Ex) -> Ex;
}

impl ReduceExprs for ReduceOp {
    fn combine(self, a: Ex, b: Ex) -> Ex {
        match self {
            ReduceOp::Sum => a + b,
            ReduceOp::Max => max(a, b),
            ReduceOp::Min => min(a, b),
        }
    }

    fn simd(self, x: Ex) -> Ex {
        match self {
            ReduceOp::Sum => simd_sum(x),
            ReduceOp::Max => simd_max(x),
            ReduceOp::Min => simd_min(x),
        }
    }

    fn horizontal(self, v: Ex) -> Ex {
        match self {
            ReduceOp::Sum => hsum(v),
            ReduceOp::Max => hmax(v),
            ReduceOp::Min => hmin(v),
        }
    }
}

/// The cross-SIMD-group reduction of several f32 values at once, with one
/// threadgroup barrier: every SIMD group reduces its lanes (`simd_sum` /
/// `simd_max`), lane 0 writes the group's partial, and after the barrier
/// every SIMD group reduces all partials itself, so every thread holds the
/// totals. Each call declares its own threadgroup arrays (32 floats per
/// value), so consecutive reductions never overwrite partials another SIMD
/// group may still be reading.
pub(crate) fn threadgroup_reduce(k: &mut KernelBuilder, name: &str, values: &[(ReduceOp, Ex)]) -> Vec<Ex> {
    let lane = thread_index_in_simdgroup();
    let sg = simdgroup_index_in_threadgroup();
    let mut arrays = vec![];
    for (i, &(op, v)) in values.iter().enumerate() {
        let partials = k.threadgroup_array(&format!("{name}{i}_partials"), Type::F32, SIMD_WIDTH);
        let s = k.let_(&format!("{name}{i}_simd"), op.simd(v));
        arrays.push((op, partials, s));
    }
    k.if_(lane.eq(0u32), |k| {
        for &(_, partials, s) in &arrays {
            k.store(partials.at(sg), s);
        }
    });
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let nsg = simdgroups_per_threadgroup();
    let mut out = vec![];
    for (i, &(op, partials, _)) in arrays.iter().enumerate() {
        let p = k.var(&format!("{name}{i}_part"), f(op.identity()));
        k.if_(lane.lt(nsg), |k| k.assign(p, partials.get(lane)));
        out.push(k.let_(&format!("{name}{i}_total"), op.simd(p.get())));
    }
    out
}

/// The threadgroup-wide `(max, sum of exp)` pair of softmax, one barrier:
/// each thread holds a running maximum `m` and `l = Σ exp(x - m)` over its
/// elements (exponentials as [`exp_shifted`]); SIMD groups and then the
/// threadgroup combine the pairs, rescaling each sum to the common maximum.
/// Threads with no elements hold `(-inf, 0)`.
pub(crate) fn threadgroup_max_sumexp(k: &mut KernelBuilder, name: &str, m: Ex, l: Ex) -> (Ex, Ex) {
    let lane = thread_index_in_simdgroup();
    let sg = simdgroup_index_in_threadgroup();
    let pm = k.threadgroup_array(&format!("{name}_max_partials"), Type::F32, SIMD_WIDTH);
    let pl = k.threadgroup_array(&format!("{name}_sum_partials"), Type::F32, SIMD_WIDTH);
    let ms = k.let_(&format!("{name}_simd_max"), simd_max(m));
    let shift = k.let_(&format!("{name}_simd_shift"), finite_or_zero(ms));
    let ls = k.let_(&format!("{name}_simd_sum"), simd_sum(l * exp_shifted(m, shift)));
    k.if_(lane.eq(0u32), |k| {
        k.store(pm.at(sg), ms);
        k.store(pl.at(sg), ls);
    });
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let pmv = k.var(&format!("{name}_part_max"), neg_inf());
    let plv = k.var(&format!("{name}_part_sum"), f(0.0));
    k.if_(lane.lt(simdgroups_per_threadgroup()), |k| {
        k.assign(pmv, pm.get(lane));
        k.assign(plv, pl.get(lane));
    });
    let total_max = k.let_(&format!("{name}_max"), simd_max(pmv.get()));
    let total_shift = k.let_(&format!("{name}_shift"), finite_or_zero(total_max));
    let total_sum = k.let_(&format!("{name}_sum"), simd_sum(plv.get() * exp_shifted(pmv.get(), total_shift)));
    (total_max, total_sum)
}

/// `log2(e)`: exponentials are `exp2` (`exp(x) = exp2(x·log2 e)`).
pub const LOG2E: f64 = std::f64::consts::LOG2_E;

/// `exp(x - shift)` as `exp2((x - shift)·log2 e)`: the shift comes off
/// first, so the rounding of the product is relative to `x - shift`, not
/// to `x` (at `x = 1000`, `x·log2 e` in f32 is off by 6e-5 absolute, which
/// the exponential turns into a 4e-5 relative error).
pub(crate) fn exp_shifted(x: Ex, shift: Ex) -> Ex {
    exp2((x - shift) * LOG2E)
}
