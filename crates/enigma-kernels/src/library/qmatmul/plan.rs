//! The plan the family's three decode kernels share ([`DecodePlan`]): the
//! problem, the threads, the K splits (and who sums them) and the dispatch, with the kernel's
//! own blocking beside them (the row decode's [`super::RowBlocking`], the
//! fragment decode's `qmatmul_fragments::FragmentBlocking`, the affine
//! kernel's `qmatmul_affine::AffineBlocking`); and the options the decode
//! and affine kernels' blocking defaults take ([`BlockingOptions`]).

use crate::library::quant::{Format, VALUES_PER_WORD};
use crate::library::split::SplitSum;
use crate::library::{DType, Dispatch};

/// A planned decode-size quantized matmul `C[M, N] = A[M, K] · dequant(B)`
/// on one of the family's decode kernels: `blocking` is that kernel's, the
/// rest the same for all three. Each kernel module plans its own
/// (reached through `qmatmul::select`) and builds it (`kernel()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodePlan<B> {
    pub format: Format,
    /// C's element type (f32 or f16; f32 where K is split).
    pub out: DType,
    /// How the kernel blocks C and K.
    pub blocking: B,
    pub threads: u32,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// K values per scale (and bias).
    pub group: u32,
    /// K split over this many threadgroups (grid z); above 1 the kernel
    /// writes `splits · M · N` f32 partial sums, which `split_sum` says who
    /// sums into C. The affine kernel is never split.
    pub splits: u32,
    /// Who sums the K splits (when `splits` > 1): the reduction's second
    /// dispatch (`split::splitk_reduce`), or for the row decode, where the
    /// plan says so, the kernel's last threadgroup of each column tile.
    pub split_sum: SplitSum,
    pub dispatch: Dispatch,
}

impl<B> DecodePlan<B> {
    /// `group / 8`, the row decode's `group_words`.
    pub fn group_words(&self) -> u32 {
        self.group / VALUES_PER_WORD as u32
    }

    /// log2 of the group, the affine kernel's `group_shift`.
    pub fn group_shift(&self) -> u32 {
        self.group.trailing_zeros()
    }

    /// Bytes the kernel must move at least: `A` and `B` (codes, scales and,
    /// for MLX's affine format, biases) read once, `C` written once.
    pub fn bytes(&self) -> u64 {
        let (m, n, k) = (self.m as u64, self.n as u64, self.k as u64);
        let per_group = if self.format.has_biases() { 2 } else { 1 };
        m * k * 2 + k * n / 2 + per_group * (k / self.group as u64 * n * 2) + m * n * self.out.size_bytes() as u64
    }
}

/// The blocking a caller asks of the row decode or the affine kernel (each
/// `None` for the kernel's default): rows of C per threadgroup (1 … 8;
/// default `min(M, 8)`, fewer where the row decode's threadgroup memory
/// would not fit), columns (per thread in the row decode, per SIMD group
/// in the affine kernel: 1, 2, 4; default the widest with `rows · cols ≤ 8`
/// that still gives `min_tiles` threadgroups along N), packed words per
/// load (the row decode's words per iteration, 4, 8 or 16 dividing the
/// group's; the affine kernel's words per lane and load, 1, 2 or 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockingOptions {
    pub rows: Option<u32>,
    pub cols: Option<u32>,
    pub words: Option<u32>,
    /// Threadgroups along N the default `cols` keeps to: on a GPU about two
    /// per compute unit, so that a narrow N still fills the GPU; 0 for no
    /// minimum.
    pub min_tiles: u32,
}
