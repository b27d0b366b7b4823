//! Tiled GEMM on SIMD-group matrices: `C = alpha·op(A)·op(B) + beta·C`,
//! row-major, `op` the identity or the transpose, f16/bf16/f32 inputs with
//! f32 accumulation, C in the input type or f32, batched over the grid's
//! third dimension (seed 000's "Batched Operations").
//!
//! A threadgroup computes a `tm × tn` tile of C; its SIMD groups form a
//! `sg_rows × sg_cols` grid (seed 002 §3.2's partition), each owning a
//! `(tm / sg_rows) × (tn / sg_cols)` accumulator tile. Per step of `tk` along
//! K the threadgroup holds the `tm × tk` slice of A and the `tk × tn` slice
//! of B in threadgroup memory, as they are stored (a transposed operand is
//! read back with a transposed matrix load), each row padded by
//! [`PAD`] elements so that the 8 rows of a fragment fall in different
//! memory banks. While the SIMD groups multiply one slice, every thread
//! already holds its share of the next one in registers (4-element vector
//! loads where the slice lies inside the matrix and its rows are 4-aligned,
//! bounds-checked scalar loads with zeros past the edges otherwise), written
//! to threadgroup memory between two barriers: the global-memory latency of
//! step `i + 1` overlaps the multiplies of step `i` with one slice of
//! threadgroup memory. With [`GemmConfig::stages`] of 2 or more, a
//! threadgroup whose slices lie inside the matrices with rows of whole
//! 16-byte copies stages them with asynchronous copies instead (`cp.async`
//! on CUDA): `stages` slices of threadgroup memory, the copies of slice
//! `i + stages − 1` in flight while slice `i` is multiplied, one barrier per
//! slice (`Stages::pipeline`); packed weights ([`QgemmConfig`]) arrive as
//! raw words and scales, which each B tile's load decodes
//! (`matrix_load_quantized`: on CUDA straight into the registers the
//! tensor cores read, no dequantized slice, no second barrier). The
//! epilogue writes each lane's elements through the per-lane view, skipping
//! those past M or N. Any M, N, K work.
//!
//! Where the tile divides the shape, [`Edges::WholeTiles`] builds a
//! second kernel that is the pipeline alone: no edge paths, no register
//! staging, its tile stored whole by one matrix store (alpha 1, beta 0, f32
//! C) or element by element without bounds tests; where only M is not
//! divided, its variant [`Edges::RaggedRows`] (A's rows past M
//! copied as zeros, the last row of tiles stored row by row). The edge
//! paths' code slows the same pipeline down even where it never runs (the
//! CUDA compiler schedules and allocates the whole kernel at once;
//! `BENCHMARKS.md`, whole tiles).
//!
//! Parameters: `a, b, c, m, n, k, alpha, beta, a_stride, a4, b4` — `a4`
//! and `b4` are 4-element vector views of the same buffers as `a` and `b`;
//! `a_stride` is A's batch stride (`m·k` for consecutive matrices, 0 where
//! every product takes one A, as a convolution's weights), B's and C's
//! come from the shapes (`k·n`, `m·n` elements).
//!
//! On devices whose cooperative products run on warpgroup matrix
//! instructions, [`select`] takes the GEMM on cooperative tensors instead
//! ([`cooperative`]; the same parameters but `a4` and `b4`).

mod args;
mod config;
pub mod cooperative;
mod kernel;
mod operand;
mod select;
#[cfg(test)]
mod tests;

pub use args::{MatrixArgs, PackedArgs, PlainArgs};
pub(crate) use config::{asked_or_fitting_stages, simdgroup_tiles};
pub use config::{
    reference, Edges, GemmConfig, QgemmConfig, DEFAULT_STAGES, DOUBLE_BUFFER_REGISTERS, FRAGMENT_ORDER_SIMDGROUP_TILE, MAX_STAGES, PAD, QGEMM_SLICE_DEPTHS,
    QGEMM_SPLIT_K_MAX_ROWS, QGEMM_WIDE_SPLITS, SPLIT_K_MAX_ROWS,
};
pub use kernel::{gemm, qgemm};
pub use crate::library::tile::select_tile;
pub use cooperative::{gemm_cooperative, CoopGemmConfig};
pub use select::{select, GemmPlan, GemmProblem};
