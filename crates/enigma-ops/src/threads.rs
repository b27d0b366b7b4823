//! Default threadgroup sizes of the library's kernels: seed 004's
//! "Threadgroup Sizing Guidelines" as `enigma-analysis` encodes them
//! ([`recommended_threadgroup_size`]), and seed 000's geometry for the two
//! kernel types that table has no row for (GEMV and attention decode, both
//! 256 threads in seed 000). [`crate::Options::threads`] overrides them.

use enigma_analysis::occupancy::{recommended_threadgroup_size, KernelKind};
use enigma_kernels::library::attention::SEED_000_THREADS;

/// The kernel types the defaults distinguish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelType {
    /// One thread per element or `float4` (scale, add, …): seed 004's
    /// element-wise row.
    Elementwise,
    /// One threadgroup per row of `d` elements (row reductions, softmax,
    /// norms): seed 004's row-reduction rows.
    RowReduction { d: usize },
    /// A reduction of a vector of `n` elements: threads loop over it as
    /// over a long row, so the row-reduction rows with `D = n`.
    VectorReduction { n: usize },
    /// `y = W·x`: seed 000's GEMV threadgroup of 256.
    MatVec,
    /// Attention decode (all its dispatches): seed 000's 256. The fused
    /// kernel takes fewer where its state would not fit threadgroup memory
    /// (224 for head dimensions above 992, or 896 with vector loads).
    Attention,
}

/// The default threadgroup size of a kernel type.
pub fn default_threads(kind: KernelType) -> u32 {
    let row = |len: usize| recommended_threadgroup_size(KernelKind::RowReduction { row_len: u32::try_from(len).unwrap_or(u32::MAX) }).default;
    match kind {
        KernelType::Elementwise => recommended_threadgroup_size(KernelKind::ElementWise).default,
        KernelType::RowReduction { d } => row(d),
        KernelType::VectorReduction { n } => row(n),
        KernelType::MatVec | KernelType::Attention => SEED_000_THREADS,
    }
}
