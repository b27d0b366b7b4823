//! Quantized matmul for decode sizes: `C[M, N] = A[M, K] · dequant(B)`,
//! `A` in f16, `B` 4-bit
//! ([`Format::Fp4`](crate::library::quant::Format::Fp4) or
//! [`Format::Int4`](crate::library::quant::Format::Int4) in seed 002's
//! `[K/8][N]` layout with f16 scales per group, see [`crate::library::quant`]), `C`
//! in f32 or f16, products summed in f16 pairs a few words at a time and
//! those sums in f32. M = 1 … 8 is seed 002's "decode" row.
//!
//! At these sizes the kernel is bound by reading `B` once, so it is built
//! for bandwidth:
//! * **Coalesced weights.** Each thread owns `cols` consecutive columns
//!   (1, 2 or 4: one `uint` / `uint2` / `uint4` load per packed row, and the
//!   same width of `half` scales); the 32 lanes of a SIMD group own
//!   `32 · cols` consecutive columns, so each packed row of the tile is one
//!   contiguous stretch of `128 · cols` bytes.
//! * **Dequantised on the fly into f16 pairs, summed in f16 pairs.** Both
//!   formats decode a word into four f16 pairs in eighths of their values
//!   (pair `i`: nibbles `i` and `i + 4`, so one mask serves both halves of
//!   a 32-bit word): INT4 (`int4_eighths`) by the exponent trick, the
//!   nibble masked into the mantissa of 1024.0 and one pair fma giving
//!   `(nibble − 8) / 8` exactly (one `LOP3` and one `HFMA2` a pair on
//!   CUDA); FP4 E2M1 (`fp4_eighths`) by moving each nibble's `e1 e0 m` to
//!   f16 bits 11 … 9 and its sign to bit 15 (shifts and logic operations)
//!   and one pair multiply by 2¹¹, no table. A word's eight products are
//!   four pair fmas with A staged as matching pairs; each row's and
//!   column's pair sums [`WORDS_PER_F16_SUM`] words in one f16 fma chain
//!   ([`F16_SUM_TERMS`] products per half: the rounding
//!   [`f16_product_error`] bounds, finite for |a| ≤ [`MAX_ABS_A`]) before
//!   it is widened to f32; each group's f32 sum is multiplied by the
//!   group's scale (times 8) once.
//! * **The next chunk's loads before this chunk's math.** A SIMD group
//!   walks its chunks of `words` packed rows with the next chunk's weight
//!   words and A values already loading into registers, so two chunks'
//!   loads are in flight; the last prefetch re-reads the last chunk (every
//!   split has at least one group, so it is in bounds). Scales are read
//!   once per group, the next group's while this one is summed.
//!   [`qmatmul_staged`] instead keeps `stages` chunks in flight by
//!   asynchronous copies into each lane's own slots of threadgroup memory
//!   (no registers held, no barrier: only the copying lane reads a slot);
//!   the kernel is bound by its instructions rather than by loads in
//!   flight, so that ran slower on an H200 and is not the default.
//! * **K split over SIMD groups.** The threadgroup's SIMD groups share one
//!   column tile and take the quantization groups round-robin (SIMD group
//!   `s` takes groups `s, s + S, …`), so a wide-N matrix still gives the GPU
//!   `S` times more threads than columns; the partial sums meet in
//!   threadgroup memory (one barrier), laid out `[S][rows][cols][32 lanes]`
//!   so that consecutive lanes write consecutive words.
//! * **K split over threadgroups** ([`qmatmul_splitk`], `splits` > 1 in
//!   the plan). A narrow grid (N = 11008 is 172 tiles of 64 columns for an
//!   H100's 132 compute units) leaves few bytes in flight per unit; with K
//!   split the grid's z dimension numbers the splits, and split `z` takes
//!   its own contiguous run of whole quantization groups (the first
//!   `groups % splits` one group more), shared by its SIMD groups as above.
//!   Each writes its f32 partial product to slice `z` of a workspace
//!   `[splits][M][N]`, and the GEMM's reduction kernel
//!   (`split::splitk_reduce`, alpha 1, beta 0) sums the slices in order into
//!   `C` in f32 or f16: the result does not depend on scheduling. Or
//!   ([`qmatmul_splitk_sum`], where the device has device-scope fences)
//!   the last threadgroup of each column tile to take its ticket sums the
//!   slices in the same order itself: one dispatch, the same `C`.
//!   [`default_splits`] is the default count; `splits = 1` is the single
//!   dispatch of [`qmatmul()`], with no workspace.
//! * `words` packed words (4, 8 or 16, dividing the group's) per chunk.
//!   The chunk's `rows × 8·words` values of `A` are regrouped into the
//!   decoded weights' pairs once per SIMD group (one `uint4` per row and
//!   word) into the SIMD group's own staging area in
//!   threadgroup memory (`simdgroup_barrier` before and after the reads),
//!   and every lane reads them back at uniform addresses (broadcasts):
//!   without it each lane would convert every value itself, 32 times the
//!   conversions.
//!
//! A threadgroup computes `rows` rows of `C` (`rows` = M up to 8; more rows
//! take more threadgroups along y, each reading `B` again, mostly from L2).
//! Edge columns (N not a multiple of `32 · cols`) and edge rows are clamped
//! for the loads, which stay in bounds, and never stored.
//!
//! Parameters: `a4` (`half4` view of `A`), `b` / `b2` / `b4` (packed
//! words), `scales` / `scales2` / `scales4`, `c` (with K split summed by
//! the reduction, the f32 workspace), with K split summed in the kernel
//! `ws` (the workspace) and `tickets`, and `m`, `n`, `k`, `group_words`
//! (= group / 8) by value.

mod kernel;
mod plan;
#[cfg(test)]
mod tests;

pub use kernel::{
    f16_product_error, kernel_product_error, qmatmul, qmatmul_splitk, qmatmul_splitk_sum, qmatmul_staged, reference, DecodeArgs, F16_SUM_TERMS, MAX_ABS_A, MAX_STAGES,
    WORDS_PER_F16_SUM, WORDS_PER_ITERATION,
};
pub(crate) use plan::plan;
pub use plan::{default_min_tiles, default_splits, default_threads, DecodeOptions, RowBlocking, DECODE_ROWS, DEFAULT_THREADS, DEFAULT_WORDS, MIN_WARPS_PER_UNIT};
