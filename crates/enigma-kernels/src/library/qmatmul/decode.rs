//! Quantized matmul for decode sizes: `C[M, N] = A[M, K] · dequant(B)`,
//! `A` in f16, `B` 4-bit ([`Format::Fp4`] or [`Format::Int4`] in seed 002's
//! `[K/8][N]` layout with f16 scales per group, see [`crate::library::quant`]), `C`
//! in f32 or f16, f32 accumulation. M = 1 … 8 is seed 002's "decode" row.
//!
//! At these sizes the kernel is bound by reading `B` once, so it is built
//! for bandwidth:
//! * **Coalesced weights.** Each thread owns `cols` consecutive columns
//!   (1, 2 or 4: one `uint` / `uint2` / `uint4` load per packed row, and the
//!   same width of `half` scales); the 32 lanes of a SIMD group own
//!   `32 · cols` consecutive columns, so each packed row of the tile is one
//!   contiguous stretch of `128 · cols` bytes.
//! * **Dequantised on the fly.** INT4 works in f16 pairs (`int4_eighths`):
//!   the mask `0x000F000F` takes two nibbles of a word at once (nibbles `i`
//!   and `i + 4`) into the mantissas of an f16 pair under the exponent of
//!   1024, and one pair fma gives `(nibble − 8) / 8` exactly, so a pair of
//!   weights costs one `LOP3` and one `HFMA2` on CUDA; a word's eight
//!   products are four pair fmas with A staged as matching pairs, summed
//!   in f16 four at a time ([`INT4_F16_TERMS`]: the rounding
//!   [`f16_product_error`] bounds) and widened to f32 once per word. The
//!   eighths keep those f16 sums finite for |a| ≤ 16376. FP4: a 16-entry
//!   f32 table in threadgroup memory (filled once per threadgroup by bit
//!   arithmetic that never forms a subnormal, which GPUs may flush); 16
//!   entries in 16 banks, so a SIMD group's lookups never conflict, each
//!   product exact in f32. Each group's products are summed unscaled, then
//!   multiplied by the group's scale once.
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
//!   The chunk's `rows × 8·words` values of `A` are converted from f16 once
//!   per SIMD group (INT4: regrouped into pairs, one `uint4` per row and
//!   word; FP4: to f32) into the SIMD group's own staging area in
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

use crate::library::quant::{check_problem, fp4_code_value, nibble, Format, MAX_ROWS_PER_THREADGROUP, VALUES_PER_WORD};
use super::plan::{BlockingOptions, DecodePlan};
use crate::library::split::{check_k_splits, split_run, SplitArgs, SplitSum, MAX_SPLITS};
use crate::library::*;
use enigma_ir::{Access, AtomicOp, Kernel, Type};


/// The packed words per loop iteration a kernel may take.
pub const WORDS_PER_ITERATION: [u32; 3] = [4, 8, 16];
/// Default packed words per loop iteration (fewer when a group has fewer).
pub const DEFAULT_WORDS: u32 = 8;
/// Above this many rows `enigma_ops::Ops::qmatmul` takes the tensor-core
/// kernel (`gemm::qgemm`, its B tiles decoded from staged words, K split
/// over threadgroups), measured the faster above it over seed 002's four
/// shapes (`BENCHMARKS.md`, the quantized matmul over M).
pub const DECODE_ROWS: u32 = 4;
/// The most chunks [`qmatmul_staged`] stages ahead.
pub const MAX_STAGES: u32 = 8;
/// Default threads per threadgroup (8 SIMD groups splitting K).
pub const DEFAULT_THREADS: u32 = 256;
/// `rows · cols` the default keeps to (accumulators per thread, twice).
const DEFAULT_REGISTER_TILE: u32 = 8;

/// Bytes of the FP4 decoding table in threadgroup memory.
pub const FP4_TABLE_BYTES: u64 = 16 * 4;

/// Products per f16 partial sum in the INT4 kernel (a word's eight
/// values, four per half of an f16 pair).
pub const INT4_F16_TERMS: u32 = 4;

/// The kernel's rounding beyond f32 summation, relative to Σ|a · w|: INT4
/// forms and sums [`INT4_F16_TERMS`] products in f16 before widening them
/// (γ₄ = 4u / (1 − 4u), u = f16's unit roundoff); FP4 forms each product
/// exactly in f32 (0).
pub fn f16_product_error(format: Format) -> f64 {
    match format {
        Format::Int4 => {
            let nu = INT4_F16_TERMS as f64 * DType::F16.unit_roundoff();
            nu / (1.0 - nu)
        }
        _ => 0.0,
    }
}

/// The rounding the quantized matmul kernel named `kernel` adds beyond f32
/// summation, relative to Σ|a · w|: the tensor-core kernels (`qgemm_*`,
/// and `qmatmul_*_fragments_*`, [`crate::library::qmatmul_fragments`]) round each
/// weight times its scale to f16 (f16's unit roundoff), this decode kernel
/// [`f16_product_error`].
pub fn kernel_product_error(kernel: &str, format: Format) -> f64 {
    if kernel.starts_with("qgemm") || kernel.contains("_fragments") {
        DType::F16.unit_roundoff()
    } else {
        f16_product_error(format)
    }
}

/// One SIMD group's staged A for a chunk: its 16-byte vectors and their
/// type. INT4 stages f16 pairs, one `uint4` per row and word; FP4 f32, two
/// `float4`s per row and word.
fn stage_layout(format: Format, rows: u32, words: u32) -> (u32, Type) {
    if format == Format::Int4 {
        (rows * words, Type::vector(Scalar::U32, 4))
    } else {
        (rows * words * 2, Type::vector(Scalar::F32, 4))
    }
}

/// An f16 pair.
const HALF2: Type = Type::vector(Scalar::F16, 2);

/// The eight INT4 values of `q` (u32) as four f16 pairs in eighths,
/// `(nibble − 8) / 8` exactly: pair `i` holds nibbles `i` and `i + 4`, so
/// one mask serves both halves. A pair costs one and-or (each nibble left
/// in place under the f16 exponent of 1024: `1024 + n` for nibbles 0 and 2,
/// `1024 + 16n` for 1 and 3) and one fma (`x / 8 − 129`, `x / 128 − 9`);
/// nibbles 2, 3, 6 and 7 come from `q >> 8`. Eighths keep four products
/// of an f16 `a` summed in f16 finite up to |a| = 16376.
fn int4_eighths(k: &mut KernelBuilder, q: Ex, name: &str) -> [Ex; 4] {
    let shifted = k.let_(&format!("qs{name}"), q >> 8u32);
    let pair = |bits: u32| Ex::from(bits).bitcast(HALF2);
    let decode = |k: &mut KernelBuilder, word: Ex, upper: bool, i: usize| {
        let (mask, step, offset) = if upper { (0x00F0_00F0u32, 0x2000_2000u32, 0xC880_C880u32) } else { (0x000F_000Fu32, 0x3000_3000, 0xD808_D808) };
        let x = ((word & mask) | 0x6400_6400u32).bitcast(HALF2);
        k.let_(&format!("v{name}_{i}"), fma(x, pair(step), pair(offset)))
    };
    [decode(k, q, false, 0), decode(k, q, true, 1), decode(k, shifted, false, 2), decode(k, shifted, true, 3)]
}

/// `qmatmul_{format}_{out}_r{rows}_c{cols}_u{words}_t{threads}`; the
/// group's packed words (`group_words`, by value) must be a multiple of
/// `words`. Loads one chunk ahead into registers; [`qmatmul_staged`]
/// stages several.
///
/// # Panics
/// When `format` is MLX's affine format (not in seed 002's layout), `rows`
/// is not 1 … 8, `cols` not 1, 2 or 4, `words` not 4, 8 or 16, or
/// `threads` not a multiple of 32 between 32 and 1024.
pub fn qmatmul(format: Format, out: DType, rows: u32, cols: u32, words: u32, threads: u32) -> Kernel {
    build(format, out, rows, cols, words, threads, None, 0)
}

/// The first pass of the kernel with K split over threadgroups:
/// `qmatmul_{format}_f32_r{rows}_c{cols}_u{words}_t{threads}_splitk`.
/// Threadgroup `z` of the grid's `splits` (`threadgroups_per_grid.z`)
/// takes its own contiguous run of quantization groups and writes its f32
/// partial product to slice `z` of `c`, the workspace `[splits][M][N]`;
/// `split::splitk_reduce` sums the slices in order. Panics as [`qmatmul()`].
pub fn qmatmul_splitk(format: Format, rows: u32, cols: u32, words: u32, threads: u32) -> Kernel {
    build(format, DType::F32, rows, cols, words, threads, Some(SplitSum::Reduction), 0)
}

crate::kernel_args! {
    /// The arguments of the row decode's kernels beside
    /// `split::SplitArgs` (C, and with the splits summed in the kernel
    /// the workspace and the tickets): A's `half4` view, the packed words and
    /// scales read as vectors of `cols` (`b`, `b2`, `b4` and `scales`,
    /// `scales2`, `scales4` for 1, 2, 4 columns per thread: views of one
    /// buffer each), the shape, and `group_words` words per group.
    pub struct DecodeArgs {
        A4 a4: buffer,
        B b: buffer,
        B2 b2: buffer,
        B4 b4: buffer,
        SCALES scales: buffer,
        SCALES2 scales2: buffer,
        SCALES4 scales4: buffer,
        M m: u32,
        N n: u32,
        K k: u32,
        GROUP_WORDS group_words: u32,
    }
}

/// The kernel with K split over threadgroups that sums its splits itself
/// ([`SplitSum::LastThreadgroup`]):
/// `qmatmul_{format}_{out}_r{rows}_c{cols}_u{words}_t{threads}_splitk_sum`.
/// Each threadgroup writes its partial product to slice `z` of the f32
/// workspace `ws` (`[splits][M][N]`) as [`qmatmul_splitk`] does, fences,
/// and takes its column tile's ticket (`tickets`, one u32 per threadgroup
/// of a split, zero before and after the dispatch); the last of a tile's
/// splits fences again, sums the tile's slices in split order into `c` of
/// `out` with `split::splitk_reduce`'s arithmetic (so the same C) and
/// resets the ticket: one dispatch. Needs device-scope fences. Panics as
/// [`qmatmul()`].
pub fn qmatmul_splitk_sum(format: Format, out: DType, rows: u32, cols: u32, words: u32, threads: u32) -> Kernel {
    build(format, out, rows, cols, words, threads, Some(SplitSum::LastThreadgroup), 0)
}

/// [`qmatmul()`] (or with `split`, the K-split kernel whose splits `split`
/// sums) with `stages` chunks staged ahead by asynchronous copies (named
/// `…_s{stages}`): each lane copies its own weight words and A vectors of
/// the chunk `stages` ahead into its own slots of threadgroup memory, so
/// `stages` chunks' loads are in flight without holding registers; 0 is
/// [`qmatmul()`]'s register prefetch. Panics as [`qmatmul()`], or when
/// `stages` is above [`MAX_STAGES`].
#[allow(clippy::too_many_arguments)]
pub fn qmatmul_staged(format: Format, out: DType, rows: u32, cols: u32, words: u32, threads: u32, stages: u32, split: Option<SplitSum>) -> Kernel {
    let out = if split == Some(SplitSum::Reduction) { DType::F32 } else { out };
    build(format, out, rows, cols, words, threads, split, stages)
}

/// The kernel; with `split`, [`qmatmul_splitk`]'s (`out` is then f32) or
/// [`qmatmul_splitk_sum`]'s; with `stages`, [`qmatmul_staged`]'s.
#[allow(clippy::too_many_arguments)]
fn build(format: Format, out: DType, rows: u32, cols: u32, words: u32, threads: u32, split: Option<SplitSum>, stages: u32) -> Kernel {
    assert!(matches!(format, Format::Fp4 | Format::Int4), "qmatmul takes fp4 or int4, not {format}");
    assert!((1..=MAX_ROWS_PER_THREADGROUP).contains(&rows), "rows must be 1 ..= 8, got {rows}");
    assert!(matches!(cols, 1 | 2 | 4), "cols must be 1, 2 or 4, got {cols}");
    assert!(WORDS_PER_ITERATION.contains(&words), "words must be 4, 8 or 16, got {words}");
    assert!(check_threads("qmatmul", threads).is_ok(), "bad threadgroup size {threads}");
    assert!(stages <= MAX_STAGES, "stages must be 0 ..= {MAX_STAGES}, got {stages}");
    let simdgroups = threads / SIMD_WIDTH;
    let cols_n = cols as usize;
    let staged_suffix = if stages > 0 { format!("_s{stages}") } else { String::new() };
    let split_suffix = match split {
        None => "",
        Some(SplitSum::Reduction) => "_splitk",
        Some(SplitSum::LastThreadgroup) => "_splitk_sum",
    };
    let mut k = KernelBuilder::new(format!("qmatmul_{format}_{out}_r{rows}_c{cols}_u{words}_t{threads}{split_suffix}{staged_suffix}"));
    type P = DecodeArgs;
    let (bn, sn) = match cols {
        1 => (P::B, P::SCALES),
        2 => (P::B2, P::SCALES2),
        _ => (P::B4, P::SCALES4),
    };
    let a4 = k.buffer(P::A4, Type::vector(Scalar::F16, 4), Access::Read);
    let b = k.buffer(bn, Type::vector(Scalar::U32, cols as u8), Access::Read);
    let scales = k.buffer(sn, Type::vector(Scalar::F16, cols as u8), Access::Read);
    let c = k.buffer(SplitArgs::C, out.ty(1), Access::ReadWrite);
    // Splits summed here: the workspace of partial products and the tickets.
    let summed = (split == Some(SplitSum::LastThreadgroup)).then(|| (k.buffer(SplitArgs::WS, Type::F32, Access::ReadWrite), k.buffer(SplitArgs::TICKETS, Type::U32, Access::ReadWrite)));
    let m = k.value(P::M, Type::U32);
    let n = k.value(P::N, Type::U32);
    let kk = k.value(P::K, Type::U32);
    let group_words = k.value(P::GROUP_WORDS, Type::U32);
    let partials = k.threadgroup_array("partials", Type::F32, simdgroups * rows * cols * SIMD_WIDTH);
    let pairs = format == Format::Int4;
    let (stage_vecs, stage_elem) = stage_layout(format, rows, words);
    let stage = k.threadgroup_array("a_stage", stage_elem, simdgroups * stage_vecs);
    let table = (format == Format::Fp4).then(|| k.threadgroup_array("fp4_table", Type::F32, 16));
    if let Some(table) = table {
        let t = k.let_("t", thread_index_in_threadgroup());
        k.if_(t.lt(16u32), |k| k.store(table.at(t), fp4_code_value(t)));
        k.threadgroup_barrier(MemFlags::Threadgroup);
    }

    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let tile = k.let_("tile", threadgroup_position_in_grid().x());
    let row0 = k.let_("row0", threadgroup_position_in_grid().y() * rows);
    let nv = k.let_("nv", n / cols);
    // This lane's column vector, clamped for the loads.
    let colv = k.let_("colv", min(tile * SIMD_WIDTH + lane, nv - 1u32));
    let k4 = k.let_("k4", kk / 4u32);
    let groups = k.let_("groups", kk / (group_words * VALUES_PER_WORD as u32));
    let last_row = k.let_("last_row", m - 1u32);
    // This SIMD group's staging area for A: [rows][words · 8] values.
    let stage_base = k.let_("stage_base", sg * stage_vecs);
    let acc: Vec<Vec<Var>> = (0..rows).map(|r| (0..cols).map(|cc| k.var(&format!("acc{r}_{cc}"), f(0.0))).collect()).collect();
    // The SIMD group's first group and the end: with K split, split `z`'s
    // run of groups.
    let (split_index, g_start, g_end) = if split.is_some() {
        let (z, begin, end) = split_run(&mut k, groups, "g");
        (Some(z), begin + sg, end)
    } else {
        (None, sg, groups)
    };

    // The SIMD group walks its chunks of `words` packed rows: its groups
    // g_start, g_start + S, … below g_end, `group_words / words` chunks to
    // a group. Without stages the next chunk's weights and A values are
    // loaded into registers before the current chunk's math, so that two
    // chunks' loads are in flight; with stages, the copies of the chunk
    // `stages` ahead are started after each chunk's math. A load past the
    // last chunk re-reads it (in bounds); a copy past it is not made. The
    // scales are read once per group, one group ahead.
    let per_group = k.let_("chunks_per_group", group_words / words);
    let last_chunk = k.let_("last_chunk", g_end * group_words - words);
    let last_group = k.let_("last_group", g_end - 1u32);
    let g = k.var("g", g_start);
    let pos = k.var("pos", 0u32);
    let w = k.var("w", g_start * group_words);
    let passes = stage_vecs.div_ceil(SIMD_WIDTH);
    let stage_idx: Vec<Ex> = (0..passes).map(|i| k.let_(&format!("stage_idx{i}"), lane + i * SIMD_WIDTH)).collect();
    // The A vectors (half4, their indices in `a4`) lane `idx` of the SIMD
    // group stages for the chunk at packed row `row`: INT4 two (word
    // idx % words of row idx / words), FP4 one (float4 idx of the
    // [rows][words · 2] area).
    let a_sources = |idx: Ex, row: Ex| -> Vec<Ex> {
        if pairs {
            let src = min(row0 + idx / words, last_row) * k4 + (row + idx % words) * 2u32;
            vec![src, src + 1u32]
        } else {
            vec![min(row0 + idx / (words * 2), last_row) * k4 + row * 2u32 + idx % (words * 2)]
        }
    };
    let a_per_pass = if pairs { 2 } else { 1 };
    // Moves chunk position (g, pos, w) to the SIMD group's next chunk: the
    // next of this group, or the next group's first; true when the group
    // is done.
    let advance = |k: &mut KernelBuilder, g: Var, pos: Var, w: Var, tag: &str| -> Ex {
        let pos1 = k.let_(&format!("{tag}pos1"), pos.get() + 1u32);
        let group_done = k.let_(&format!("{tag}group_done"), pos1.eq(per_group));
        k.assign(pos, enigma_ir::builder::select(pos1, 0u32, group_done));
        k.assign(g, enigma_ir::builder::select(g.get(), g.get() + simdgroups, group_done));
        k.assign(w, enigma_ir::builder::select(w.get() + words, g.get() * group_words, group_done));
        group_done
    };
    // Staged: slot `j` of stage `t` of this thread at `(t · slots + j) ·
    // threads + tid`, so that a SIMD group's accesses to one slot are
    // contiguous; only the thread that copies a slot reads it.
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let b_staged = (stages > 0).then(|| k.threadgroup_array("b_staged", Type::vector(Scalar::U32, cols as u8), stages * words * threads));
    let a_slots = passes * a_per_pass;
    let a_staged = (stages > 0).then(|| k.threadgroup_array("a_staged", Type::vector(Scalar::F16, 4), stages * a_slots * threads));
    let slot = move |stage: Ex, j: u32, slots: u32| (stage * slots + j) * threads + tid;
    // The copy side's position: `stages` chunks ahead of the math's.
    let copy_position = (stages > 0).then(|| (k.var("copy_g", g_start), k.var("copy_pos", 0u32), k.var("copy_w", g_start * group_words)));
    // Starts the copies of the copy side's chunk into stage `stage` (one
    // group of copies, empty past the last chunk) and moves the copy side on.
    let issue = |k: &mut KernelBuilder, stage: Ex, tag: &str| {
        let (b_staged, a_staged) = (b_staged.expect("staged"), a_staged.expect("staged"));
        let (cg, cpos, cw) = copy_position.expect("staged");
        let live = k.let_(&format!("{tag}live"), cg.get().lt(g_end));
        let row = k.let_(&format!("{tag}row"), min(cw.get(), last_chunk));
        for u in 0..words {
            k.async_copy(b_staged.at(slot(stage, u, words)), b.at((row + u) * nv + colv), 1, live);
        }
        for (i, &idx) in stage_idx.iter().enumerate() {
            let needed = if (i as u32 + 1) * SIMD_WIDTH <= stage_vecs { live } else { k.let_(&format!("{tag}needed{i}"), live.and(idx.lt(stage_vecs))) };
            for (j, src) in a_sources(idx, row).into_iter().enumerate() {
                k.async_copy(a_staged.at(slot(stage, i as u32 * a_per_pass + j as u32, a_slots)), a4.at(src), 1, needed);
            }
        }
        k.async_commit();
        advance(k, cg, cpos, cw, tag);
    };
    let ring = (stages > 0).then(|| {
        for t in 0..stages {
            issue(&mut k, Ex::from(t), &format!("first{t}_"));
        }
        k.var("stage", 0u32)
    });
    // Without stages, the registers that hold the next chunk.
    let registers = (stages == 0).then(|| {
        let first = k.let_("first_row", min(w.get(), last_chunk));
        let q_next: Vec<Var> = (0..words).map(|u| k.var(&format!("q_next{u}"), b.get((first + u) * nv + colv))).collect();
        let a_next: Vec<Vec<Var>> = stage_idx
            .iter()
            .enumerate()
            .map(|(i, &idx)| a_sources(idx, first).into_iter().enumerate().map(|(j, src)| k.var(&format!("a_next{i}_{j}"), a4.get(src))).collect())
            .collect();
        (q_next, a_next)
    });
    let scale_at = |g: Ex| min(g, last_group) * nv + colv;
    let s_now = k.var("s_now", scales.get(scale_at(g.get())));
    let s_next = k.var("s_next", scales.get(scale_at(g.get() + simdgroups)));
    let part: Vec<Vec<Var>> = (0..rows).map(|r| (0..cols).map(|cc| k.var(&format!("part{r}_{cc}"), f(0.0))).collect()).collect();

    k.while_(g.get().lt(g_end), |k| {
        let (qs, a_now): (Vec<Ex>, Vec<Vec<Ex>>) = match (&registers, ring) {
            (Some((q_next, a_next)), _) => {
                let qs: Vec<Ex> = q_next.iter().enumerate().map(|(u, q)| k.let_(&format!("q{u}"), q.get())).collect();
                let a_now = a_next
                    .iter()
                    .enumerate()
                    .map(|(i, vs)| vs.iter().enumerate().map(|(j, v)| k.let_(&format!("a_now{i}_{j}"), v.get())).collect())
                    .collect();
                (qs, a_now)
            }
            (None, Some(stage)) => {
                let (b_staged, a_staged) = (b_staged.expect("staged"), a_staged.expect("staged"));
                // This chunk's group of copies is complete when at most
                // `stages - 1` newer ones are pending.
                k.async_wait(stages - 1);
                let qs = (0..words).map(|u| k.let_(&format!("q{u}"), b_staged.get(slot(stage.get(), u, words)))).collect();
                let a_now = (0..passes)
                    .map(|i| (0..a_per_pass).map(|j| k.let_(&format!("a_now{i}_{j}"), a_staged.get(slot(stage.get(), i * a_per_pass + j, a_slots)))).collect())
                    .collect();
                (qs, a_now)
            }
            (None, None) => unreachable!("registers or stages"),
        };
        let group_done = advance(k, g, pos, w, "");
        if let Some((q_next, a_next)) = &registers {
            let next = k.let_("next_row", min(w.get(), last_chunk));
            for (u, q) in q_next.iter().enumerate() {
                k.assign(*q, b.get((next + u as u32) * nv + colv));
            }
            for (vars, &idx) in a_next.iter().zip(&stage_idx) {
                for (var, src) in vars.iter().zip(a_sources(idx, next)) {
                    k.assign(*var, a4.get(src));
                }
            }
        }
        // The SIMD group converts the chunk's A values once, one vector per
        // lane and pass, instead of every lane converting all of them.
        for (i, (&idx, a)) in stage_idx.iter().zip(&a_now).enumerate() {
            let convert = |k: &mut KernelBuilder| {
                if pairs {
                    // Word u's eight values as the pairs its decoded
                    // weights come in: (a0, a4), (a1, a5), (a2, a6), (a3, a7).
                    let lo = k.let_(&format!("a_lo{i}"), a[0].bitcast(Type::vector(Scalar::U32, 2)));
                    let hi = k.let_(&format!("a_hi{i}"), a[1].bitcast(Type::vector(Scalar::U32, 2)));
                    let pair = |lo: Ex, hi: Ex, upper: bool| {
                        if upper {
                            (lo >> 16u32) | (hi & 0xFFFF_0000u32)
                        } else {
                            (lo & 0xFFFFu32) | (hi << 16u32)
                        }
                    };
                    let four = [pair(lo.x(), hi.x(), false), pair(lo.x(), hi.x(), true), pair(lo.y(), hi.y(), false), pair(lo.y(), hi.y(), true)];
                    k.store(stage.at(stage_base + idx), vector(Type::vector(Scalar::U32, 4), &four));
                } else {
                    k.store(stage.at(stage_base + idx), a[0].cast(Type::vector(Scalar::F32, 4)));
                }
            };
            if (i as u32 + 1) * SIMD_WIDTH <= stage_vecs {
                convert(k);
            } else {
                k.if_(idx.lt(stage_vecs), convert);
            }
        }
        k.simdgroup_barrier(MemFlags::Threadgroup);
        for (u, &q) in qs.iter().enumerate() {
            let word_index = u as u32;
            for cc in 0..cols_n {
                let word = if cols == 1 { q } else { k.let_(&format!("q{u}_{cc}"), q.component(cc as u8)) };
                if pairs {
                    // Uniform addresses: one broadcast read per row and word.
                    let a: Vec<Ex> = (0..rows).map(|r| stage.get(stage_base + (r * words + word_index))).collect();
                    let v = int4_eighths(k, word, &format!("{u}_{cc}"));
                    for (r, (a_row, part_row)) in a.into_iter().zip(&part).enumerate() {
                        let a_row = k.let_(&format!("a{u}_{cc}_{r}"), a_row);
                        let half2 = |i: u8| a_row.component(i).bitcast(HALF2);
                        // Four products per half, summed in f16, then widened.
                        let mut sum = half2(0) * v[0];
                        for (i, &vi) in v.iter().enumerate().skip(1) {
                            sum = fma(half2(i as u8), vi, sum);
                        }
                        let sum = k.let_(&format!("s{u}_{cc}_{r}"), sum.cast(Type::vector(Scalar::F32, 2)));
                        k.assign(part_row[cc], part_row[cc].get() + sum.x() + sum.y());
                    }
                    continue;
                }
                let table = table.expect("fp4 has its table");
                // Uniform addresses: one broadcast read per float4.
                let a: Vec<[Ex; 2]> = (0..rows)
                    .map(|r| {
                        let at = stage_base + (r * words * 2 + word_index * 2);
                        let lo = k.let_(&format!("a{u}_{cc}_{r}_lo"), stage.get(at));
                        let hi = k.let_(&format!("a{u}_{cc}_{r}_hi"), stage.get(at + 1u32));
                        [lo, hi]
                    })
                    .collect();
                for j in 0..VALUES_PER_WORD as u32 {
                    let v = k.let_(&format!("v{u}_{cc}_{j}"), table.get(nibble(word, j)));
                    for (a_row, part_row) in a.iter().zip(&part) {
                        let aj = a_row[(j / 4) as usize].component((j % 4) as u8);
                        k.assign(part_row[cc], fma(aj, v, part_row[cc].get()));
                    }
                }
            }
        }
        // Every lane has read the staged A before the next iteration overwrites it.
        k.simdgroup_barrier(MemFlags::Threadgroup);
        k.if_(group_done, |k| {
            let s = k.let_("s", to_f32(s_now.get()));
            for cc in 0..cols_n {
                let sc = if cols == 1 { s } else { s.component(cc as u8) };
                // INT4's partial sums are in eighths of the codes' values.
                let sc = if pairs { sc * f(8.0) } else { sc };
                for (acc_row, part_row) in acc.iter().zip(&part) {
                    k.assign(acc_row[cc], fma(part_row[cc].get(), sc, acc_row[cc].get()));
                    k.assign(part_row[cc], f(0.0));
                }
            }
            // `g` is now the next group, whose scale `s_next` holds.
            k.assign(s_now, s_next.get());
            k.assign(s_next, scales.get(scale_at(g.get() + simdgroups)));
        });
        if let Some(stage) = ring {
            // The stage just read takes the chunk `stages` ahead.
            issue(k, stage.get(), "ahead_");
            k.assign(stage, enigma_ir::builder::select(stage.get() + 1u32, 0u32, (stage.get() + 1u32).eq(stages)));
        }
    });

    // Partials: [simdgroup][row][col][lane].
    for (r, acc_row) in acc.iter().enumerate() {
        for (cc, v) in acc_row.iter().enumerate() {
            let slot = (sg * rows + r as u32) * cols + cc as u32;
            k.store(partials.at(slot * SIMD_WIDTH + lane), v.get());
        }
    }
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let per_group = rows * cols * SIMD_WIDTH;
    k.for_range("o", thread_index_in_threadgroup(), per_group, threads, |k, o| {
        let total = k.var("total", f(0.0));
        for s in 0..simdgroups {
            k.assign(total, total.get() + partials.get(o + s * per_group));
        }
        let rc = k.let_("rc", o / SIMD_WIDTH);
        let row = k.let_("row", row0 + rc / cols);
        let col = k.let_("col", (tile * SIMD_WIDTH + o % SIMD_WIDTH) * cols + rc % cols);
        // With K split, slice `split` of the [splits][M][N] workspace.
        let at = match split_index {
            Some(z) => (z * m + row) * n + col,
            None => row * n + col,
        };
        let dest = summed.map_or(c, |(ws, _)| ws);
        k.if_(row.lt(m).and(col.lt(n)), |k| store_f32(k, dest, at, total.get()));
    });
    if let Some((ws, tickets)) = summed {
        // Every thread fences its stores to the workspace before the
        // ticket, and every thread of the last threadgroup fences before it
        // reads the others' (one fencing thread orders only itself).
        k.device_fence();
        k.threadgroup_barrier(MemFlags::Device);
        let grid = threadgroups_per_grid();
        let splits = grid.z();
        let ticket_at = k.let_("ticket_at", threadgroup_position_in_grid().y() * grid.x() + tile);
        // The partial sums are read: slot 0 tells the threadgroup whether
        // it drew the last ticket.
        k.if_(thread_index_in_threadgroup().eq(0u32), |k| {
            let ticket = k.atomic_fetch(AtomicOp::Add, tickets.at(ticket_at), 1u32);
            let last = k.let_("split_last", ticket.eq(splits - 1u32));
            k.if_(last, |k| k.atomic(AtomicOp::Exchange, tickets.at(ticket_at), 0u32));
            k.store(partials.at(0u32), enigma_ir::builder::select(0.0f32, 1.0f32, last));
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.if_(partials.get(0u32).ne(0.0f32), |k| {
            k.device_fence();
            k.for_range("e", thread_index_in_threadgroup(), per_group, threads, |k, e| {
                let rc = k.let_("sum_rc", e / SIMD_WIDTH);
                let row = k.let_("sum_row", row0 + rc / cols);
                let col = k.let_("sum_col", (tile * SIMD_WIDTH + e % SIMD_WIDTH) * cols + rc % cols);
                k.if_(row.lt(m).and(col.lt(n)), |k| {
                    let mn = k.let_("mn", m * n);
                    let at = k.let_("sum_at", row * n + col);
                    // The splits in order, as `split::splitk_reduce` sums them.
                    let sum = k.var("split_sum", ws.get(at));
                    k.for_range("sum_split", 1u32, splits, 1u32, |k, s| k.assign(sum, sum.get() + ws.get(s * mn + at)));
                    store_f32(k, c, at, sum.get());
                });
            });
        });
    }
    finish(k)
}

/// The row decode's blocking: `rows` of C per threadgroup, `cols` columns
/// per thread, `words` packed words per loop iteration, `stages` chunks
/// staged ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowBlocking {
    pub rows: u32,
    pub cols: u32,
    pub words: u32,
    /// Chunks staged ahead by asynchronous copies ([`qmatmul_staged`]; 0:
    /// the register prefetch of [`qmatmul()`]).
    pub stages: u32,
}

impl DecodePlan<RowBlocking> {
    /// The kernel: [`qmatmul()`], with K split [`qmatmul_splitk`] or
    /// [`qmatmul_splitk_sum`] (as `split_sum` says), any of them staged
    /// ([`qmatmul_staged`]) with stages.
    pub fn kernel(&self) -> Kernel {
        let RowBlocking { rows, cols, words, stages } = self.blocking;
        qmatmul_staged(self.format, self.out, rows, cols, words, self.threads, stages, (self.splits > 1).then_some(self.split_sum))
    }
}

/// Options of the row decode's plan (`plan`, reached through
/// `qmatmul::select`): the blocking ([`BlockingOptions`]; words per
/// iteration default to [`DEFAULT_WORDS`] or the group's words if fewer)
/// and K splits over threadgroups (1 up to the quantization groups, at
/// most `split::MAX_SPLITS`; default [`default_splits`] for
/// `compute_units`), who sums them (default the reduction) and chunks
/// staged ahead (0 … [`MAX_STAGES`]; default 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    pub blocking: BlockingOptions,
    /// How many ways K is split over threadgroups (1: one dispatch, no
    /// workspace); `None` for [`default_splits`].
    pub splits: Option<u32>,
    /// The device's compute units, for [`default_splits`]; 0 (unknown, or
    /// the simulator, which gains nothing from splitting) for no split.
    pub compute_units: u32,
    /// Chunks staged ahead by asynchronous copies ([`qmatmul_staged`]);
    /// `None` for 0, the register prefetch, which ran faster on an H200 in
    /// every configuration measured (`BENCHMARKS.md`, the quantized
    /// matmul).
    pub stages: Option<u32>,
    /// Who sums the K splits: `None` for the reduction's second dispatch.
    pub split_sum: Option<SplitSum>,
    /// The threadgroup memory a staged kernel may use (the device's; below
    /// `MAX_THREADGROUP_MEMORY_BYTES`, that limit, which every kernel keeps
    /// without stages).
    pub stage_memory: u64,
}

impl DecodeOptions {
    /// The threadgroup memory a kernel with `stages` may use.
    fn memory_limit(&self, stages: u32) -> u64 {
        if stages > 0 {
            self.stage_memory.max(MAX_THREADGROUP_MEMORY_BYTES)
        } else {
            MAX_THREADGROUP_MEMORY_BYTES
        }
    }
}

/// Warps per compute unit below which [`default_splits`] splits K over
/// threadgroups: eight. A split costs a workspace and a second dispatch (the
/// reduction) or the last threadgroup's sum, which outweighed what it gave
/// wherever the grid already had a few warps per unit, summed in the kernel
/// too (`BENCHMARKS.md`, the decode kernel's grid and the quantized matmul
/// on the H200).
pub const MIN_WARPS_PER_UNIT: u32 = 8;

/// The decode kernel's default threads per threadgroup for `m` rows and
/// `n` columns on a device of `compute_units`: 512 (16 SIMD groups sharing
/// a column tile's K) at one row, or where one column per thread leaves
/// fewer than two threadgroups per unit, else [`DEFAULT_THREADS`]. More
/// SIMD groups per column tile give a narrow grid more warps without a K
/// split; a wide grid of several rows stays faster at 256, one row (with
/// [`default_min_tiles`]' wider columns) at 512 (`BENCHMARKS.md`, the
/// decode kernel's grid).
pub fn default_threads(n: usize, m: usize, compute_units: u32) -> u32 {
    let tiles = n.div_ceil(SIMD_WIDTH as usize).saturating_mul(m.div_ceil(MAX_ROWS_PER_THREADGROUP as usize));
    if compute_units > 0 && (m == 1 || tiles < 2 * compute_units as usize) {
        2 * DEFAULT_THREADS
    } else {
        DEFAULT_THREADS
    }
}

/// The column tiles the decode kernel's default columns per thread keep
/// to ([`BlockingOptions::min_tiles`]) at `m` rows on a device of
/// `compute_units`: at one row half a tile per unit (so 4 columns per
/// thread, 16-byte weight loads, from N = 64 · units up: the fewer
/// instructions per weight outweigh the idle units on an H200), at more
/// rows two per unit (`BENCHMARKS.md`, the decode kernel's grid).
pub fn default_min_tiles(m: usize, compute_units: u32) -> u32 {
    if m == 1 {
        compute_units / 2
    } else {
        2 * compute_units
    }
}

/// The default K split of the decode kernel, for a grid of `threadgroups`
/// (column tiles × row blocks) over `groups` quantization groups, with
/// `simdgroups` SIMD groups per threadgroup, on a device of
/// `compute_units`: the fewest splits that give the grid at least
/// [`MIN_WARPS_PER_UNIT`] warps per compute unit. At most
/// `groups / simdgroups` splits, so that every SIMD group of a split keeps
/// at least one whole group (a split of fewer groups than SIMD groups
/// leaves some idle and still pays for the workspace), and at most
/// `split::MAX_SPLITS`; 1 when `compute_units` is 0.
pub fn default_splits(threadgroups: u32, groups: u32, simdgroups: u32, compute_units: u32) -> u32 {
    if compute_units == 0 {
        return 1;
    }
    let wanted = (MIN_WARPS_PER_UNIT * compute_units).div_ceil(threadgroups.saturating_mul(simdgroups).max(1));
    wanted.min(groups / simdgroups.max(1)).clamp(1, MAX_SPLITS)
}

/// Plans `C[M, N] = A[M, K] · dequant(B)` with `group` K values per scale
/// in threadgroups of `threads` ([`DEFAULT_THREADS`] is the library's
/// choice).
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan(format: Format, out: DType, m: usize, n: usize, k: usize, group: usize, threads: u32, options: DecodeOptions) -> Result<DecodePlan<RowBlocking>, ShapeError> {
    let blocking = options.blocking;
    let name = format!("qmatmul_{format}_{out}");
    if !matches!(format, Format::Fp4 | Format::Int4) {
        return Err(ShapeError::new(name, format!("the kernel reads fp4 or int4 in seed 002's layout, not {format}")));
    }
    let [m32, n32, k32] = check_problem(&name, out, m, n, k, group)?;
    let t = check_threads(&name, threads)?;
    let group_words = (group / VALUES_PER_WORD) as u32;
    let words = match blocking.words {
        Some(w) if !WORDS_PER_ITERATION.contains(&w) || !group_words.is_multiple_of(w) => {
            return Err(ShapeError::new(name, format!("{w} packed words per iteration must be 4, 8 or 16 and divide the group's {group_words} words")))
        }
        Some(w) => w,
        None => DEFAULT_WORDS.min(group_words),
    };
    // Default rows: up to 8, fewer where the partial sums (of one column
    // per thread) and the staged A would not fit threadgroup memory.
    if let Some(stages) = options.stages.filter(|&s| s > MAX_STAGES) {
        return Err(ShapeError::new(name, format!("{stages} stages; between 0 and {MAX_STAGES}")));
    }
    let asked_stages = options.stages.unwrap_or(0);
    let fits = |rows: u32, cols: u32| threadgroup_bytes(format, t, rows, cols, words, asked_stages) <= options.memory_limit(asked_stages);
    let rows = blocking.rows.unwrap_or_else(|| (1..=m32.min(MAX_ROWS_PER_THREADGROUP)).rev().find(|&r| fits(r, 1)).unwrap_or(1));
    if !(1..=MAX_ROWS_PER_THREADGROUP).contains(&rows) {
        return Err(ShapeError::new(name, format!("rows per threadgroup ({rows}) must be between 1 and {MAX_ROWS_PER_THREADGROUP}")));
    }
    let cols = match blocking.cols {
        Some(c) if !matches!(c, 1 | 2 | 4) => return Err(ShapeError::new(name, format!("columns per thread ({c}) must be 1, 2 or 4"))),
        Some(c) if n32 % c != 0 => return Err(ShapeError::new(name, format!("{c} columns per thread need n % {c} == 0, n = {n}"))),
        Some(c) => c,
        None => [4, 2, 1]
            .into_iter()
            .find(|&c| n32 % c == 0 && rows * c <= DEFAULT_REGISTER_TILE && fits(rows, c) && (n32 / c).div_ceil(SIMD_WIDTH) >= blocking.min_tiles)
            .unwrap_or(1),
    };
    let stages = asked_stages;
    let bytes = threadgroup_bytes(format, t, rows, cols, words, stages);
    let limit = options.memory_limit(stages);
    if bytes > limit {
        return Err(ShapeError::new(
            name,
            format!(
                "{t} threads × {rows} rows × {cols} columns × {words} words{} need {bytes} bytes of threadgroup memory (partial sums, staged A{}{}), over {limit}",
                if stages > 0 { format!(" × {stages} stages") } else { String::new() },
                if stages > 0 { ", stages" } else { "" },
                if format == Format::Fp4 { ", FP4 table" } else { "" },
            ),
        ));
    }
    let tiles = (n32 / cols).div_ceil(SIMD_WIDTH);
    let row_blocks = m32.div_ceil(rows);
    let groups = k32 / group as u32;
    let splits = match options.splits {
        Some(s) => check_k_splits(&name, s, groups, &format!("quantization groups of k = {k}"), m, n)?,
        None => default_splits(tiles * row_blocks, groups, t / SIMD_WIDTH, options.compute_units),
    };
    Ok(DecodePlan {
        format,
        out,
        blocking: RowBlocking { rows, cols, words, stages },
        threads: t,
        m: m32,
        n: n32,
        k: k32,
        group: group as u32,
        splits,
        split_sum: options.split_sum.unwrap_or_default(),
        dispatch: Dispatch::threadgroups([tiles, row_blocks, splits], t),
    })
}

/// Threadgroup memory of a kernel: the partial sums (`[S][rows][cols][32]`
/// f32), the converted A (`[S][rows][8·words]` f32 or f16 pairs), for FP4
/// the decoding table and with `stages` each thread's slots of every
/// stage (`words` weight vectors of `4 · cols` bytes and the A vectors it
/// copies, 8 bytes each).
fn threadgroup_bytes(format: Format, threads: u32, rows: u32, cols: u32, words: u32, stages: u32) -> u64 {
    let simdgroups = (threads / SIMD_WIDTH) as u64;
    let partials = simdgroups * (rows * cols * SIMD_WIDTH) as u64 * 4;
    let (vecs, elem) = stage_layout(format, rows, words);
    let stage = simdgroups * vecs as u64 * elem.size_bytes() as u64;
    let a_slots = vecs.div_ceil(SIMD_WIDTH) * if format == Format::Int4 { 2 } else { 1 };
    let staged = stages as u64 * threads as u64 * (words as u64 * 4 * cols as u64 + a_slots as u64 * 8);
    partials + stage + staged + if format == Format::Fp4 { FP4_TABLE_BYTES } else { 0 }
}

/// The f64 reference: `C = A · W` for `A` `[m, k]` and the dequantised
/// weights `W` `[k, n]`, both row-major.
pub fn reference(a: &[f32], w: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for r in 0..m {
        for kk in 0..k {
            let av = a[r * k + kk] as f64;
            for col in 0..n {
                c[r * n + col] += av * w[kk * n + col] as f64;
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::{validate, ValidationOptions};

    #[test]
    fn every_variant_validates() {
        for format in [Format::Fp4, Format::Int4] {
            for out in [DType::F32, DType::F16] {
                for rows in 1..=MAX_ROWS_PER_THREADGROUP {
                    for (cols, words) in [(1, 4), (2, 8), (4, 16)] {
                        let staged = qmatmul_staged(format, out, rows, 1, 4, 64, 2, Some(SplitSum::LastThreadgroup));
                        for kernel in [qmatmul(format, out, rows, cols, words, 64), qmatmul_splitk(format, rows, cols, words, 64), qmatmul_splitk_sum(format, out, rows, cols, words, 64), staged] {
                            if let Err(e) = validate(&kernel, &ValidationOptions::default()) {
                                panic!("{}: {e}", kernel.name);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn llama_mlp_shapes() {
        let p = plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 256, DecodeOptions::default()).unwrap();
        // 4 columns per thread, 128 per threadgroup: 86 tiles.
        assert_eq!((p.blocking.rows, p.blocking.cols, p.blocking.words), (1, 4, 8));
        assert_eq!(p.dispatch, Dispatch::threadgroups([86, 1, 1], 256));
        // At least 264 tiles (two per compute unit of a 132-unit GPU): one column per thread.
        let gpu = DecodeOptions { blocking: BlockingOptions { min_tiles: 264, ..BlockingOptions::default() }, ..DecodeOptions::default() };
        let p = plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 256, gpu).unwrap();
        assert_eq!(p.dispatch, Dispatch::threadgroups([344, 1, 1], 256));
        let gpu = DecodeOptions { blocking: BlockingOptions { min_tiles: 160, ..BlockingOptions::default() }, ..DecodeOptions::default() };
        assert_eq!(plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 256, gpu).unwrap().blocking.cols, 2);
        assert_eq!(p.bytes(), 4096 * 2 + 4096 * 11008 / 2 + 32 * 11008 * 2 + 11008 * 2);
        let p = plan(Format::Fp4, DType::F32, 16, 11008, 4096, 128, 256, DecodeOptions::default()).unwrap();
        assert_eq!((p.blocking.rows, p.blocking.cols), (8, 1));
        assert_eq!(p.dispatch, Dispatch::threadgroups([344, 2, 1], 256));
        let p = plan(Format::Fp4, DType::F32, 3, 33, 64, 32, 256, DecodeOptions::default()).unwrap();
        assert_eq!((p.blocking.rows, p.blocking.cols, p.blocking.words), (3, 1, 4));
        assert_eq!(p.dispatch, Dispatch::threadgroups([2, 1, 1], 256));
    }

    #[test]
    fn k_splits_over_threadgroups() {
        // On a 132-unit GPU at N = 11008, K = 4096, group 128, M = 1: 344
        // one-column tiles already give every unit work, so no split; at
        // N = 2048, 64 tiles want 3 splits for 192 threadgroups.
        let gpu = DecodeOptions { blocking: BlockingOptions { min_tiles: 264, ..BlockingOptions::default() }, compute_units: 132, ..DecodeOptions::default() };
        let p = plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 256, gpu).unwrap();
        assert_eq!((p.blocking.cols, p.splits), (1, 1));
        let p = plan(Format::Int4, DType::F16, 1, 2048, 4096, 128, 256, gpu).unwrap();
        assert_eq!((p.blocking.cols, p.splits), (1, 3));
        assert_eq!(p.dispatch, Dispatch::threadgroups([64, 1, 3], 256));
        // The first pass writes the f32 workspace whatever C's type.
        let kernel = p.kernel();
        assert_eq!(kernel.name, "qmatmul_int4_f32_r1_c1_u8_t256_splitk");
        let c = kernel.params.iter().find(|q| q.name == "c").map(|q| q.kind);
        assert!(matches!(c, Some(enigma_ir::ParamKind::Buffer { elem: Type::F32, .. })), "{c:?}");
        // 86 tiles on 132 units: 2 splits, capped at groups / SIMD groups.
        assert_eq!((default_splits(86, 32, 8, 132), default_splits(20, 16, 8, 132)), (2, 2));
        // Enough threadgroups already, too few groups, or no compute units: 1.
        assert_eq!((default_splits(600, 32, 8, 132), default_splits(10, 7, 8, 132), default_splits(10, 32, 8, 0)), (1, 1, 1));
        assert_eq!(default_splits(1, 4096, 1, 132), crate::library::split::MAX_SPLITS);
        // 128 threadgroups of 16 SIMD groups: 15.5 warps per unit, no split.
        assert_eq!(default_splits(128, 32, 16, 132), 1);
    }

    #[test]
    fn the_plan_counts_the_threadgroup_memory_the_kernel_declares() {
        for format in [Format::Int4, Format::Fp4] {
            for (rows, cols, words, threads) in [(1, 1, 8, 256), (4, 2, 16, 512), (8, 1, 4, 128)] {
                for stages in [0, 3] {
                    let declared: u64 = qmatmul_staged(format, DType::F16, rows, cols, words, threads, stages, None).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
                    assert_eq!(threadgroup_bytes(format, threads, rows, cols, words, stages), declared, "{format} r{rows} c{cols} u{words} t{threads} s{stages}");
                }
            }
        }
    }

    #[test]
    fn narrow_grids_take_more_simdgroups_per_threadgroup() {
        // N = 4096: 128 column tiles, under two per unit of an H100.
        assert_eq!(default_threads(4096, 1, 132), 512);
        // N = 11008: 344 tiles.
        assert_eq!(default_threads(11008, 4, 132), DEFAULT_THREADS);
        // The simulator (no compute units) keeps the default.
        assert_eq!(default_threads(64, 1, 0), DEFAULT_THREADS);
        // One row: 512 threads and, at N = 11008 on 132 units, 4 columns
        // per thread (86 tiles, at least 66); at N = 4096 one (128 tiles:
        // 4 and 2 columns leave 32 and 64).
        assert_eq!((default_threads(11008, 1, 132), default_min_tiles(1, 132), default_min_tiles(2, 132)), (512, 66, 264));
        let one_row = DecodeOptions { blocking: BlockingOptions { min_tiles: default_min_tiles(1, 132), ..BlockingOptions::default() }, compute_units: 132, ..DecodeOptions::default() };
        let p = plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 512, one_row).unwrap();
        // 86 tiles of 16 SIMD groups: 10.4 warps per unit, no split.
        assert_eq!((p.blocking.cols, p.splits), (4, 1));
        assert_eq!(plan(Format::Int4, DType::F16, 1, 4096, 4096, 128, 512, one_row).unwrap().blocking.cols, 1);
        // Unsplit (the simulator's default): today's kernel, no workspace.
        let p = plan(Format::Fp4, DType::F32, 3, 33, 96, 32, 64, DecodeOptions::default()).unwrap();
        assert_eq!(p.splits, 1);
        assert_eq!(p.kernel(), qmatmul(Format::Fp4, DType::F32, 3, 1, 4, 64));
        // Asked for: any count up to the groups, dividing them or not.
        let split = |s| plan(Format::Fp4, DType::F16, 3, 33, 96, 32, 64, DecodeOptions { splits: Some(s), ..DecodeOptions::default() });
        assert_eq!(split(2).unwrap().dispatch, Dispatch::threadgroups([2, 1, 2], 64));
        assert_eq!(split(3).unwrap().splits, 3);
        assert_eq!(split(0).unwrap_err().to_string(), "qmatmul_fp4_f16: 0 K splits; between 1 and 3 (the 3 quantization groups of k = 96, at most 64)");
        assert!(split(4).unwrap_err().to_string().contains("4 K splits; between 1 and 3"));
    }

    #[test]
    fn bad_shapes_are_errors_with_the_numbers() {
        let e = |r: Result<DecodePlan<RowBlocking>, ShapeError>| r.unwrap_err().to_string();
        let o = DecodeOptions::default();
        assert_eq!(e(plan(Format::Int4, DType::F32, 1, 8, 96, 64, 256, o)), "qmatmul_int4_f32: k = 96 is not a multiple of the group size 64");
        assert_eq!(e(plan(Format::Int4, DType::F32, 1, 8, 96, 48, 256, o)), "qmatmul_int4_f32: group size 48 is not 32, 64 or 128");
        assert_eq!(e(plan(Format::Fp4, DType::F32, 0, 8, 64, 64, 256, o)), "qmatmul_fp4_f32: m must be at least 1");
        assert!(e(plan(Format::MlxAffine, DType::F32, 1, 8, 64, 64, 256, o)).contains("not mlx_affine"));
        let cols = DecodeOptions { blocking: BlockingOptions { cols: Some(4), ..o.blocking }, ..o };
        assert_eq!(e(plan(Format::Fp4, DType::F32, 1, 10, 64, 64, 256, cols)), "qmatmul_fp4_f32: 4 columns per thread need n % 4 == 0, n = 10");
        let words = DecodeOptions { blocking: BlockingOptions { words: Some(16), ..o.blocking }, ..o };
        assert_eq!(e(plan(Format::Fp4, DType::F32, 1, 10, 64, 64, 256, words)), "qmatmul_fp4_f32: 16 packed words per iteration must be 4, 8 or 16 and divide the group's 8 words");
        let big = DecodeOptions { blocking: BlockingOptions { cols: Some(4), rows: Some(8), ..o.blocking }, ..o };
        assert!(e(plan(Format::Fp4, DType::F32, 8, 16, 64, 64, 1024, big)).contains("196672 bytes of threadgroup memory (partial sums, staged A, FP4 table)"));
        // Default rows shrink to fit: per row and SIMD group, 128 bytes of
        // partial sums and, for 8 words, 256 of staged A as f32 (FP4) or 128
        // as f16 pairs (INT4): FP4 5 rows at 512 threads, INT4 4 at 1024.
        assert_eq!(plan(Format::Fp4, DType::F32, 16, 16, 64, 64, 512, o).unwrap().blocking.rows, 5);
        assert_eq!(plan(Format::Int4, DType::F32, 16, 16, 64, 64, 1024, o).unwrap().blocking.rows, 4);
    }
}
