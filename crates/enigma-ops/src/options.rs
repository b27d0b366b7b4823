//! Per-call choices: the fields every operation reads (threads, element
//! type, vector loads, the sanitizer) and one struct per kernel family for
//! the choices only that family has. Every field has a default (`None`:
//! the library's choice for the shape and the device).

use enigma_analysis::tiles::GemmTile;
use enigma_ir::Scalar;
use enigma_kernels::library::gemm::SplitSum;

/// Per-call choices; every field has a default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Threads per threadgroup (default: the occupancy table's size for the
    /// kernel, [`crate::default_threads`]).
    pub threads: Option<u32>,
    /// Element type of untyped input buffers (default f32).
    pub elem: Option<Scalar>,
    /// `Some(true)`: use vector loads or fail; `Some(false)`: scalar
    /// kernels (for the quantized decode kernels: one column per thread,
    /// one packed word per load); `None`: vector loads when the buffers
    /// and shape allow.
    pub vectorize: Option<bool>,
    /// Run every dispatch under the simulator's sanitizer (races,
    /// uninitialised reads, …): error findings fail the dispatch
    /// ([`crate::Error::Runtime`]), warnings are kept in the
    /// [`crate::Launch`] log.
    pub sanitize: bool,
    /// Softmax and the norms.
    pub rows: RowOptions,
    /// The flat reductions (sum, max, min).
    pub reduce: ReduceOptions,
    /// The prefix sums.
    pub scan: ScanOptions,
    /// GEMV.
    pub gemv: GemvOptions,
    /// Every matrix product: the GEMMs, and the quantized matmul's kernels
    /// for what they share with them (K splits; tiles and stages for its
    /// tensor-core kernels).
    pub gemm: GemmOptions,
    /// The quantized matmul's decode kernels (FP4/INT4 in their own layout,
    /// MLX's affine format).
    pub qmatmul: QmatmulOptions,
    /// Fused attention decode.
    pub attention: AttentionOptions,
}

impl Options {
    pub fn threads(threads: u32) -> Options {
        Options { threads: Some(threads), ..Options::default() }
    }
}

/// Choices of the row kernels (softmax, RMSNorm, LayerNorm).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowOptions {
    /// Keep rows that fit in registers (default `true`).
    pub cache: Option<bool>,
}

/// Choices of the flat reductions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceOptions {
    /// Vector reductions: cap on pass-1 threadgroups.
    pub max_threadgroups: Option<u32>,
    /// Vector reductions: loads in flight per thread.
    pub loads: Option<u32>,
}

/// Choices of the prefix sums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// Elements (or vectors) each thread scans (default
    /// `enigma_kernels::library::scan::DEFAULT_ITEMS`).
    pub items: Option<u32>,
}

/// Choices of GEMV.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemvOptions {
    /// Rows per SIMD group.
    pub rows_per_simdgroup: Option<u32>,
    /// Loads in flight per thread.
    pub loads: Option<u32>,
}

/// Choices every matrix product shares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemmOptions {
    /// The GEMM tile and its SIMD-group grid (default: the GEMM selection's
    /// tile for the shape and the device, unless [`Options::threads`] is
    /// set; the autotuner's choice in the registry). With
    /// [`Options::threads`] too, the two must agree. For f32 inputs off
    /// Metal a tile also chooses the SIMD-group kernel over the default
    /// SIMT one ([`crate::Ops::matmul`]). [`crate::Ops::qmatmul_fused`]
    /// takes its tile from here too (default: the fused kernel's tile for
    /// M), and so does [`crate::Ops::qmatmul_tiled`] (and `qmatmul` above
    /// the decode kernel's rows; slices of 32 or 64 K values, dividing the
    /// group).
    pub tile: Option<GemmTile>,
    /// GEMM and the quantized tensor-core kernel: slices of K in flight in
    /// threadgroup memory, filled by asynchronous copies (1: staged through
    /// registers; default: 3 where they fit, else 2 where those fit, none on
    /// Metal).
    pub stages: Option<u32>,
    /// GEMM and every quantized matmul kernel: how many ways K is split
    /// over threadgroups (partial products in an f32 workspace, summed by a
    /// second kernel in a fixed order; 1: one dispatch, no workspace).
    /// Default: 1 on the simulator; on a GPU, for GEMM and the tensor-core
    /// kernel enough for two threadgroups per compute unit where the output
    /// has too few tiles, each split keeping at least 4 slices of K; for the
    /// decode kernel `qmatmul::default_splits` (a split only where the grid
    /// leaves compute units with fewer than 8 warps, whole quantization
    /// groups per split). The decode kernel takes 1 up to K / group (at
    /// most 64), dividing the groups or not; the kernel for MLX's affine
    /// format only 1.
    pub k_splits: Option<u32>,
    /// The tensor-core GEMMs (matrix multiply, the quantized GEMM) with K
    /// split: who sums the partial tiles. `Reduction`: a second dispatch.
    /// `LastThreadgroup`: each tile's last threadgroup, in the kernel (one
    /// dispatch; needs device-scope fences, an [`crate::Error::Argument`]
    /// on a device without them). Default: the quantized GEMM's kernel at
    /// one row where the device has the fences, the reduction otherwise
    /// (`BENCHMARKS.md`, the quantized GEMM's split-K sums).
    pub split_sum: Option<SplitSum>,
}

/// Choices of the quantized matmul's decode kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QmatmulOptions {
    /// Both decode kernels: rows of `C` per threadgroup (1 … 8; default
    /// `min(M, 8)`).
    pub rows_per_threadgroup: Option<u32>,
    /// FP4/INT4 decode kernel: columns per thread (1, 2 or 4: `uint`,
    /// `uint2`, `uint4` weight loads; default the widest that divides N
    /// with `rows · columns ≤ 8` and, on a GPU, leaves at least two column
    /// tiles per compute unit; [`Options::vectorize`] `Some(false)` means
    /// 1).
    pub columns_per_thread: Option<u32>,
    /// FP4/INT4 decode kernel: packed words per loop iteration (4, 8 or 16).
    pub words_per_iteration: Option<u32>,
    /// MLX's affine format: the columns of each SIMD group, whose lanes all
    /// work on each of them (1, 2 or 4; default as for
    /// `columns_per_thread`).
    pub columns_per_simdgroup: Option<u32>,
    /// MLX's affine format: packed words per lane and load (1, 2 or 4;
    /// [`Options::vectorize`] `Some(false)` means 1).
    pub words_per_load: Option<u32>,
}

/// Choices of fused attention decode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttentionOptions {
    /// How many ways each head's keys are split over threadgroups (default:
    /// enough for about four threadgroups per compute unit; 1 = one
    /// threadgroup per head).
    pub splits: Option<u32>,
}
