//! The fused decode on SIMD-group matrices ([`fused_matrices`]): the
//! fused kernel's grid, splits, states and merge, with the scores and the
//! weighted sum of each block of keys as products of SIMD-group matrices
//! instead of per-lane dot products.
//!
//! A threadgroup serves `heads` (up to 8) query heads that read one K/V
//! head. Its query rows, padded with zero rows to [`QUERY_COLUMNS`], stay
//! in registers as the right operand `Qᵀ` (`D × 8`). Each SIMD group takes
//! blocks of `block` keys (16 or 32) in turn and stages each block's `K`
//! and `V` rows in its own part of threadgroup memory by asynchronous
//! copies, `stages` blocks ahead. Per block: `Sᵀ = K·Qᵀ` (`block × 8`, f32),
//! through threadgroup memory to the lanes, four per query, which keep the
//! query's running maximum and sum (online softmax, scores in the log2
//! domain) and write the weights back in the input type; then
//! `(P·V)ᵀ = Vᵀ·Pᵀ` (`D × 8`) is added to the accumulator after it is
//! rescaled by each query's factor. A query's weights meet its `V` rows in
//! one product, and every K/V row is read once per threadgroup however
//! many query heads share it; on CUDA a block of 16 keys is 16 `mma.sync`
//! instructions per SIMD group at `D = 128`.
//!
//! The weights are rounded to the input type before `Vᵀ·Pᵀ` (at most one
//! unit roundoff of the output; their sum is kept in f32), as in the
//! prefill kernel. The SIMD groups' states then go through
//! [`super::fused`]'s merge, split partials and ticket unchanged.

use super::args::FusedDecodeArgs;
use super::fused::{frame, write_results, Frame, FusedConfig};
use crate::library::*;
use enigma_ir::{Kernel, MatrixType, MemFlags, Scalar, Type};

/// The matrix form's own choices: its head dimension (fixed when the
/// kernel is built: tile shapes and threadgroup memory depend on it) and
/// the keys each SIMD group takes per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixDecode {
    /// Head dimension: a multiple of 16 up to [`MAX_MATRIX_HEAD_DIM`].
    pub d: u32,
    /// Keys per SIMD group and step: 16 or 32.
    pub block: u32,
}

/// Columns of the score and output tiles: the query heads of a
/// threadgroup, padded with zero rows of `Q`.
pub const QUERY_COLUMNS: u32 = 8;

/// The largest head dimension of the matrix form (its accumulator is `D /
/// 4` registers per lane).
pub const MAX_MATRIX_HEAD_DIM: u32 = 256;

/// The widest tile along the head dimension (the IR's largest tile side).
const CHUNK: u32 = MatrixType::MAX_SIDE as u32;

/// Elements of padding after each staged row (16 bytes): rows that are
/// read together start in different banks.
const PAD: u32 = 8;

/// Elements per asynchronous copy (16 bytes of f16/bf16).
const COPY: u32 = 8;

impl MatrixDecode {
    /// Whether a decode of `dtype` at head dimension `d` can take this form
    /// (16-bit types, `d` a multiple of 16 up to [`MAX_MATRIX_HEAD_DIM`]).
    pub fn fits(dtype: DType, d: u32) -> bool {
        dtype != DType::F32 && d > 0 && d.is_multiple_of(16) && d <= MAX_MATRIX_HEAD_DIM
    }

    /// Elements between consecutive staged rows.
    pub fn row_stride(&self) -> u32 {
        self.d + PAD
    }

    /// Elements of one stage of one SIMD group: `block` rows of `K`, then
    /// `block` of `V`.
    pub fn stage_len(&self) -> u32 {
        2 * self.block * self.row_stride()
    }

    /// The chunks of the head dimension the tiles take: `(offset, width)`,
    /// each at most [`CHUNK`] wide.
    fn chunks(&self) -> Vec<(u32, u32)> {
        (0..self.d.div_ceil(CHUNK)).map(|c| (c * CHUNK, (self.d - c * CHUNK).min(CHUNK))).collect()
    }

    /// Threadgroup memory of the kernel `c` of this form: the stages of
    /// every SIMD group, each SIMD group's scores, weights (the query block
    /// before the loop) and factors, the states of the merge (and its
    /// flag).
    pub fn threadgroup_memory(&self, c: &FusedConfig) -> u64 {
        let warps = c.threads.div_ceil(SIMD_WIDTH) as u64;
        let elem = c.dtype.scalar().size_bytes() as u64;
        let staged = warps * c.stages as u64 * self.stage_len() as u64 * elem;
        let scores = warps * (self.block * QUERY_COLUMNS) as u64 * 4;
        let probs = self.probs_len(warps as u32) as u64 * elem;
        let alphas = warps * QUERY_COLUMNS as u64 * 4;
        let states = 4 * warps * c.heads as u64 * (2 + self.d as u64);
        let merge_flag = if c.split && c.merge { 4 } else { 0 };
        staged + scores + probs + alphas + states + merge_flag
    }

    /// Elements of the weights' array for `warps` SIMD groups: a `block ×
    /// 8` tile each, and room for the query block (`8 × d`) it holds
    /// before the loop.
    fn probs_len(&self, warps: u32) -> u32 {
        (warps * self.block * QUERY_COLUMNS).max(QUERY_COLUMNS * self.d)
    }
}

/// The fused decode `c` on SIMD-group matrices of `m` (see the module
/// doc); its parameters are [`super::fused()`]'s with `q`, `k`, `v` bound
/// as scalars of the input type (rows 16-byte aligned: `d % 8 == 0`).
///
/// # Panics
/// When the type is f32, `m` does not [`MatrixDecode::fits`], `block` is
/// not 16 or 32, `heads` is not 1 to [`QUERY_COLUMNS`] or `stages` is 0.
pub fn fused_matrices(c: &FusedConfig, m: MatrixDecode) -> Kernel {
    assert!(MatrixDecode::fits(c.dtype, m.d), "the matrix decode takes f16/bf16 with d a multiple of 16 up to {MAX_MATRIX_HEAD_DIM}, got {} d = {}", c.dtype, m.d);
    assert!(m.block == 16 || m.block == 32, "keys per SIMD group and step must be 16 or 32, got {}", m.block);
    assert!((1..=QUERY_COLUMNS).contains(&c.heads) && c.stages >= 1, "1 to {QUERY_COLUMNS} heads and at least one stage");
    let mut kb = KernelBuilder::new(c.name());
    let k = &mut kb;
    type P = FusedDecodeArgs;
    let elem = c.dtype.scalar();
    let fr = frame(k, c, [P::Q, P::K, P::V], c.dtype.ty(1), m.d, Some(m.d));
    let Frame { q, keys, values, s_len, scale, row0, kv_seq, tid, lane, sg, nsg, first_key, end_key, states, .. } = fr;
    let (d, ld, block, stages, heads) = (m.d, m.row_stride(), m.block, c.stages, c.heads);
    let warps = c.threads.div_ceil(SIMD_WIDTH);
    let cols = QUERY_COLUMNS;
    let staged = k.threadgroup_array("staged", c.dtype.ty(1), warps * stages * m.stage_len());
    let scores = k.threadgroup_array("scores", Type::F32, warps * block * cols);
    let probs = k.threadgroup_array("probs", c.dtype.ty(1), m.probs_len(warps));
    let alphas = k.threadgroup_array("alphas", Type::F32, warps * cols);
    let chunks = m.chunks();

    // The query block, in the weights' array until the loop: rows past
    // `heads` are zeros.
    let queries = probs;
    let per_row = d / COPY;
    k.for_range("qcopy", tid, cols * per_row, c.threads, |k, e| {
        let row = k.let_("qcopy_row", e / per_row);
        let col = k.let_("qcopy_col", e % per_row * COPY);
        let valid = k.let_("qcopy_valid", row.lt(heads));
        let src_row = select(Ex::from(0u32), row, valid);
        k.async_copy(queries.at(row * d + col), q.at((row0 + src_row) * d + col), COPY, valid);
    });
    k.async_commit();

    // Block `at` of this SIMD group's keys into stage `stage`: lane `l`
    // copies 16-byte words `l, l + 32, …` of the block's `K` and `V`
    // rows, zeros for keys past the end. A word's row and its offsets in
    // the block and in the stage depend on the lane only: they are
    // computed once, before the loop; a block adds its start to them.
    let my_stages = k.let_("my_stages", sg * (stages * m.stage_len()));
    let kv_start = k.let_("kv_start", kv_seq * s_len * d);
    let words: Vec<(Ex, Ex, Ex)> = (0..block * per_row / SIMD_WIDTH)
        .map(|i| {
            let idx = lane + i * SIMD_WIDTH;
            let row = k.let_(&format!("word_row{i}"), idx / per_row);
            let col = k.let_(&format!("word_col{i}"), idx % per_row * COPY);
            (row, k.let_(&format!("word_src{i}"), row * d + col), k.let_(&format!("word_dst{i}"), row * ld + col))
        })
        .collect();
    // A block at or past the end is never read: no copies, an empty group
    // (`at` is the same in every lane of a SIMD group).
    let issue = |k: &mut KernelBuilder, at: Ex, stage: Ex, tag: &str| {
        k.if_(at.lt(end_key), |k| {
            let base = k.let_(&format!("{tag}stage_at"), my_stages + stage * m.stage_len());
            let block_src = k.let_(&format!("{tag}block_src"), kv_start + at * d);
            for (i, &(row, src_off, dst_off)) in words.iter().enumerate() {
                // Rows past the end of the last block: zeros, nothing read
                // (the index stays in bounds anyway).
                let valid = k.let_(&format!("{tag}live{i}"), (at + row).lt(end_key));
                let src = k.let_(&format!("{tag}src{i}"), select(kv_start, block_src + src_off, valid));
                let dst = k.let_(&format!("{tag}dst{i}"), base + dst_off);
                k.async_copy(staged.at(dst), keys.at(src), COPY, valid);
                k.async_copy(staged.at(dst + block * ld), values.at(src), COPY, valid);
            }
        });
        k.async_commit();
    };
    let first_step = k.let_("first_step", first_key + sg * block);
    let stride = k.let_("stride", nsg * block);
    for t in 0..stages {
        issue(k, first_step + stride * t, Ex::from(t), &format!("first{t}_"));
    }
    // The query block's group is the oldest.
    k.async_wait(stages);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let q_tiles: Vec<Ex> = chunks
        .iter()
        .enumerate()
        .map(|(i, &(off, w))| k.let_(&format!("q_tile{i}"), matrix_load(MatrixType::new(elem, w as u8, cols as u8), queries, off, d, true)))
        .collect();
    // Every SIMD group has its query tiles before any writes weights there.
    k.threadgroup_barrier(MemFlags::Threadgroup);

    // Lane `4j + part` keeps query `j`'s state and takes keys `part, part
    // + 4, …` of each block in the softmax (32 lanes, 32 banks).
    let query = k.let_("query", lane / 4u32);
    let part = k.let_("key_part", lane % 4u32);
    let o_tiles: Vec<MatrixType> = chunks.iter().map(|&(_, w)| MatrixType::new(Scalar::F32, w as u8, cols as u8)).collect();
    let acc: Vec<Vec<Var>> =
        o_tiles.iter().enumerate().map(|(c, t)| (0..t.per_lane()).map(|i| k.var(&format!("o{c}_{i}"), f(0.0))).collect()).collect();
    let m_run = k.var("m", neg_inf());
    let l_run = k.var("l", f(0.0));
    let scale_log2 = k.let_("scale_log2", scale * LOG2E);
    let my_block = k.let_("my_block", sg * (block * cols));
    let iteration = k.var("iteration", Ex::from(0u32));
    // `s` is the same in every lane of a SIMD group: the products and
    // shuffles inside run with all 32 lanes.
    k.for_range("s", first_step, end_key, stride, |k, s| {
        let stage = k.let_("stage", iteration.get() % stages);
        k.async_wait(stages - 1);
        k.simdgroup_barrier(MemFlags::Threadgroup);
        let k_at = k.let_("k_at", my_stages + stage * m.stage_len());
        let v_at = k.let_("v_at", k_at + block * ld);
        // Sᵀ = K·Qᵀ.
        let mut st = matrix_fill(MatrixType::new(Scalar::F32, block as u8, cols as u8), 0.0f32);
        for (&(off, w), &qt) in chunks.iter().zip(&q_tiles) {
            st = matrix_multiply_accumulate(matrix_load(MatrixType::new(elem, block as u8, w as u8), staged, k_at + off, ld, false), qt, st);
        }
        let st = k.let_("st", st);
        k.matrix_store(st, scores, my_block, cols, false);
        k.simdgroup_barrier(MemFlags::Threadgroup);
        let ts: Vec<Ex> = (0..block / 4)
            .map(|j| {
                let key = part + 4 * j;
                let t = scores.get(my_block + key * cols + query) * scale_log2;
                k.let_(&format!("t{j}"), select(neg_inf(), t, (s + key).lt(end_key)))
            })
            .collect();
        let mut block_max = k.let_("block_max", ts.iter().copied().reduce(max).expect("keys"));
        for mask in [1u32, 2] {
            block_max = k.let_(&format!("block_max{mask}"), max(block_max, simd_shuffle_xor(block_max, mask)));
        }
        let m_new = k.let_("m_new", max(m_run.get(), block_max));
        let shift = k.let_("shift", finite_or_zero(m_new));
        let alpha = k.let_("alpha", exp2(m_run.get() - shift));
        let ps: Vec<Ex> = ts.iter().enumerate().map(|(j, &t)| k.let_(&format!("p{j}"), exp2(t - shift))).collect();
        for (j, &p) in ps.iter().enumerate() {
            store_f32(k, probs, my_block + (part + 4 * j as u32) * cols + query, p);
        }
        let mut sum = k.let_("block_sum", ps.iter().copied().reduce(|a, b| a + b).expect("keys"));
        for mask in [1u32, 2] {
            sum = k.let_(&format!("block_sum{mask}"), sum + simd_shuffle_xor(sum, mask));
        }
        k.assign(l_run, fma(l_run.get(), alpha, sum));
        k.assign(m_run, m_new);
        k.if_(part.eq(0u32), |k| k.store(alphas.at(sg * cols + query), alpha));
        k.simdgroup_barrier(MemFlags::Threadgroup);
        // (P·V)ᵀ = Vᵀ·Pᵀ, added to the rescaled accumulator.
        let pt = k.let_("pt", matrix_load(MatrixType::new(elem, block as u8, cols as u8), probs, my_block, cols, false));
        for (c, ((&(off, w), vars), &ot)) in chunks.iter().zip(&acc).zip(&o_tiles).enumerate() {
            let vt = matrix_load(MatrixType::new(elem, w as u8, block as u8), staged, v_at + off, ld, true);
            let pv = k.let_(&format!("pv{c}"), matrix_multiply_accumulate(vt, pt, matrix_fill(ot, 0.0f32)));
            for (i, var) in vars.iter().enumerate() {
                let a = alphas.get(sg * cols + matrix_coord(ot, i as u8, true));
                k.assign(*var, fma(var.get(), a, thread_element(pv, i as u8)));
            }
        }
        // Every lane is done with this stage, the scores and the weights.
        k.simdgroup_barrier(MemFlags::Threadgroup);
        issue(k, s + stride * stages, stage, "ahead_");
        k.assign(iteration, iteration.get() + 1u32);
    });
    k.async_wait(0);

    // This SIMD group's state of each of the threadgroup's query heads.
    let at = k.let_("state_at", query * states.max_groups + sg);
    k.if_(part.eq(0u32).and(query.lt(heads)), |k| {
        k.store(states.max.at(at), m_run.get());
        k.store(states.sum.at(at), l_run.get());
    });
    for ((&(off, _), vars), &ot) in chunks.iter().zip(&acc).zip(&o_tiles) {
        for (i, var) in vars.iter().enumerate() {
            let col = matrix_coord(ot, i as u8, true);
            k.if_(col.lt(heads), |k| {
                let row = matrix_coord(ot, i as u8, false);
                k.store(states.acc.at((col * states.max_groups + sg) * d + off + row), var.get());
            });
        }
    }
    write_results(k, &fr);
    finish(kb)
}
