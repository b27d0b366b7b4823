//! The row decode's kernels ([`qmatmul()`], [`qmatmul_splitk`],
//! [`qmatmul_splitk_sum`], [`qmatmul_staged`]; module docs of `decode`),
//! the limits they are built within, the rounding they add beyond f32
//! summation and their f64 reference.

use crate::library::quant::{Format, MAX_ROWS_PER_THREADGROUP, VALUES_PER_WORD};
use crate::library::split::{split_run, SplitArgs, SplitSum};
use crate::library::*;
use enigma_ir::{Access, AtomicOp, Kernel, Type};

/// The packed words per loop iteration a kernel may take.
pub const WORDS_PER_ITERATION: [u32; 3] = [4, 8, 16];
/// The most chunks [`qmatmul_staged`] stages ahead.
pub const MAX_STAGES: u32 = 8;

/// Packed words whose products one f16 pair sums before it is widened to
/// f32: each half of the pair takes [`F16_SUM_TERMS`] products in one fma
/// chain.
pub const WORDS_PER_F16_SUM: u32 = 4;
/// Products per f16 partial sum in the kernel (four per half of a pair and
/// word, over [`WORDS_PER_F16_SUM`] words).
pub const F16_SUM_TERMS: u32 = 4 * WORDS_PER_F16_SUM;
/// The largest |a| for which the kernel's f16 partial sums stay finite:
/// each sums [`F16_SUM_TERMS`] products of weights decoded in eighths
/// (|w| ≤ 1), below f16's largest finite value 65504.
pub const MAX_ABS_A: f64 = 65504.0 / F16_SUM_TERMS as f64;

/// The kernel's rounding beyond f32 summation, relative to Σ|a · w|, for
/// FP4 and INT4 alike: each product of an f16 `a` and a weight decoded
/// exactly in f16 eighths is formed and summed in f16, [`F16_SUM_TERMS`]
/// to a sum, before the sum is widened (γ₁₆ = 16u / (1 − 16u), u = f16's
/// unit roundoff); the widened sums, the scale and the rest are f32. 0 for
/// formats the kernel does not read.
pub fn f16_product_error(format: Format) -> f64 {
    match format {
        Format::Int4 | Format::Fp4 => {
            let nu = F16_SUM_TERMS as f64 * DType::F16.unit_roundoff();
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

/// One SIMD group's staged A for a chunk: `rows · words` 16-byte vectors,
/// each a row's eight values of one word as the four f16 pairs the decoded
/// weights come in.
pub(super) fn stage_layout(rows: u32, words: u32) -> (u32, Type) {
    (rows * words, Type::vector(Scalar::U32, 4))
}

/// An f16 pair.
const HALF2: Type = Type::vector(Scalar::F16, 2);

/// An f16 pair of constant bits.
fn half2_bits(bits: u32) -> Ex {
    Ex::from(bits).bitcast(HALF2)
}

/// The eight INT4 values of `q` (u32) as four f16 pairs in eighths,
/// `(nibble − 8) / 8` exactly: pair `i` holds nibbles `i` and `i + 4`, so
/// one mask serves both halves. A pair costs one and-or (each nibble left
/// in place under the f16 exponent of 1024: `1024 + n` for nibbles 0 and 2,
/// `1024 + 16n` for 1 and 3) and one fma (`x / 8 − 129`, `x / 128 − 9`);
/// nibbles 2, 3, 6 and 7 come from `q >> 8`.
fn int4_eighths(k: &mut KernelBuilder, q: Ex, name: &str) -> [Ex; 4] {
    let shifted = k.let_(&format!("qs{name}"), q >> 8u32);
    let decode = |k: &mut KernelBuilder, word: Ex, upper: bool, i: usize| {
        let (mask, step, offset) = if upper { (0x00F0_00F0u32, 0x2000_2000u32, 0xC880_C880u32) } else { (0x000F_000Fu32, 0x3000_3000, 0xD808_D808) };
        let x = ((word & mask) | 0x6400_6400u32).bitcast(HALF2);
        k.let_(&format!("v{name}_{i}"), fma(x, half2_bits(step), half2_bits(offset)))
    };
    [decode(k, q, false, 0), decode(k, q, true, 1), decode(k, shifted, false, 2), decode(k, shifted, true, 3)]
}

/// The eight FP4 (E2M1) values of `q` (u32) as four f16 pairs in eighths,
/// exactly, in [`int4_eighths`]' order (pair `i`: nibbles `i` and
/// `i + 4`). Each nibble `s e1 e0 m` is moved into f16 bits: `e1 e0 m` to
/// bits 11 … 9 (the exponent's two low bits and the mantissa's top bit),
/// `s` to bit 15, in both halves at once (two shifts and two logic
/// operations a pair; nibbles 3 and 7 need one shift). That f16 is the
/// value times 2⁻¹⁴ (for `e = 0` a subnormal, as E2M1's own `e = 0` codes
/// are), so one pair multiply by 2¹¹ gives the value in eighths
/// (0 … 0.75, all normal). This relies on the f16 pair multiply keeping
/// subnormal inputs, as CUDA's half arithmetic does.
fn fp4_eighths(k: &mut KernelBuilder, q: Ex, name: &str) -> [Ex; 4] {
    // 2^11 as an f16 pair.
    let to_eighths = half2_bits(0x6800_6800);
    std::array::from_fn(|i| {
        // Nibble i at bits 4i: `e1 e0 m` to 9 … 11 and the sign to 15.
        let magnitude = match i {
            3 => q >> 3u32,
            _ => q << (9 - 4 * i as u32),
        };
        let sign = if i == 3 { q } else { q << (12 - 4 * i as u32) };
        let bits = (magnitude & 0x0E00_0E00u32) | (sign & 0x8000_8000u32);
        k.let_(&format!("v{name}_{i}"), bits.bitcast(HALF2) * to_eighths)
    })
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
    let (stage_vecs, stage_elem) = stage_layout(rows, words);
    let stage = k.threadgroup_array("a_stage", stage_elem, simdgroups * stage_vecs);

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
    // The two A vectors (half4, their indices in `a4`) lane `idx` of the
    // SIMD group stages for the chunk at packed row `row`: word
    // idx % words of row idx / words.
    let a_sources = |idx: Ex, row: Ex| -> Vec<Ex> {
        let src = min(row0 + idx / words, last_row) * k4 + (row + idx % words) * 2u32;
        vec![src, src + 1u32]
    };
    let a_per_pass = 2;
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
                // Word u's eight values as the pairs its decoded weights
                // come in: (a0, a4), (a1, a5), (a2, a6), (a3, a7).
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
            };
            if (i as u32 + 1) * SIMD_WIDTH <= stage_vecs {
                convert(k);
            } else {
                k.if_(idx.lt(stage_vecs), convert);
            }
        }
        k.simdgroup_barrier(MemFlags::Threadgroup);
        // Each row's and column's products, summed in an f16 pair over
        // WORDS_PER_F16_SUM words (one fma chain), then widened into `part`.
        let mut sums: Vec<Vec<Option<Ex>>> = vec![vec![None; cols_n]; rows as usize];
        for (u, &q) in qs.iter().enumerate() {
            let word_index = u as u32;
            // Uniform addresses: one broadcast read per row and word,
            // shared by the columns.
            let a: Vec<Ex> = (0..rows).map(|r| k.let_(&format!("a{u}_{r}"), stage.get(stage_base + (r * words + word_index)))).collect();
            for cc in 0..cols_n {
                let word = if cols == 1 { q } else { k.let_(&format!("q{u}_{cc}"), q.component(cc as u8)) };
                let v = match format {
                    Format::Int4 => int4_eighths(k, word, &format!("{u}_{cc}")),
                    _ => fp4_eighths(k, word, &format!("{u}_{cc}")),
                };
                for (r, (&a_row, part_row)) in a.iter().zip(&part).enumerate() {
                    let half2 = |i: u8| a_row.component(i).bitcast(HALF2);
                    let mut sum = match sums[r][cc] {
                        Some(s) => fma(half2(0), v[0], s),
                        None => half2(0) * v[0],
                    };
                    for (i, &vi) in v.iter().enumerate().skip(1) {
                        sum = fma(half2(i as u8), vi, sum);
                    }
                    let sum = k.let_(&format!("s{u}_{cc}_{r}"), sum);
                    if (word_index + 1).is_multiple_of(WORDS_PER_F16_SUM) {
                        let wide = k.let_(&format!("w{u}_{cc}_{r}"), sum.cast(Type::vector(Scalar::F32, 2)));
                        k.assign(part_row[cc], part_row[cc].get() + wide.x() + wide.y());
                        sums[r][cc] = None;
                    } else {
                        sums[r][cc] = Some(sum);
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
                // The partial sums are in eighths of the codes' values.
                let sc = sc * f(8.0);
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
