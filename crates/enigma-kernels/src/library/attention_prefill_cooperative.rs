//! Attention over a whole sequence (prefill) on cooperative tensors
//! (`matmul2d`), FlashAttention-2's structure: the same operation, masks,
//! grouped-query heads, log-sum-exp and parameters ([`PrefillArgs`](super::attention_prefill_common::PrefillArgs)) as
//! [`super::attention_prefill`]'s kernel on SIMD-group matrices, which
//! [`super::attention_prefill::select_prefill`] runs where this one does not.
//!
//! **Geometry** ([`CoopPrefillConfig`]). One threadgroup per block of
//! `block_q` query rows (64 or 128: one or two warpgroups of four SIMD
//! groups, each owning 64 rows; the selection's blocks are
//! [`CoopPrefillConfig::preferred`]) of one head; grid
//! `(ceil(S_q / block_q), H, B)`, the last query block first so that the
//! longest causal blocks start early. The Q block is copied once into
//! threadgroup memory; K and V are read in blocks of `block_kv` keys (64 or
//! 128), `stages` of each in threadgroup memory (two by default). Every
//! staged array has the head dimension as its pitch, so on CUDA for
//! `sm_90a` every product is a warpgroup matrix multiply (`wgmma`, the
//! arrays in its swizzled layout). Two ways to fill them
//! ([`CoopPrefillConfig::tile_copies`]):
//! * **each thread's 16-byte asynchronous copies** (zeros past `S_kv`, two
//!   stages): after each block's barrier the copies of the next block start
//!   into the other stage, then the block's products;
//! * **tile copies** (`_tiles`; on CUDA the tensor copy engine, one thread
//!   issuing each box): Q, K and V as whole `[B·H·S, D]` matrices (the
//!   batch size is an argument), one box per block, each stage's on its
//!   own barrier, the copies `stages − 1` blocks ahead and issued after the
//!   block's `S` product. A box of a head's last block reaches into the
//!   next head's rows (or zeros past the matrix): those keys are masked
//!   like any past `S_kv`, and their values set to zero after the wait, so
//!   a non-finite value of another head cannot reach `P·V`.
//!
//! **Per K/V block**, with `S` and `O` cooperative tensors and the row
//! state (running maximum `m` of `t`, sum `l`, factor `α`) in m×1
//! cooperative tensors, all over the threadgroup's SIMD groups:
//! 1. `S = Q·Kᵀ` (f32, `block_q × block_kv`): the K block as the right
//!    operand with the transpose flag.
//! 2. `t = s·scale·log2 e` over `S`'s slots, or `−∞` where the mask hides
//!    the key (tested only in blocks that reach past `S_kv` or the causal
//!    diagonal, by each element's row and column).
//! 3. `reduce_rows(S, max)`; `α = m`, `m = max(m, rowmax)`, `α = 2^(α − m)`
//!    (`combine`s of the m×1 tensors; `m` starts at a finite value below
//!    every `t`, so no `−∞ − (−∞)`).
//! 4. `p = 2^(t − m_row)` (a `combine` along the rows, then an element
//!    map), `O = O·α_row`, `reduce_rows(S, sum)`, `l = l·α + Σp`.
//! 5. `O += P·V` with `S` itself as the left operand (relaxed precision:
//!    on `wgmma` the weights go from the accumulator's registers to the
//!    product's, rounded to the input type, never through memory).
//!
//! On CUDA the m×1 tensors take the accumulator's rows' layout, so the
//! reductions and combinations are quad shuffles in registers: the only
//! barrier of a block is the copies' (none in the softmax).
//!
//! At the end each output element is `o / l_row` (zero for a row that saw no
//! key), rounded to the input type, and the log-sum-exp `(m + log2 l)·ln 2`
//! (`−∞` for such a row). The kernel reads no K/V block past the block's
//! last visible key.

use super::attention_prefill_common::{Heads, PrefillParams, QueryBlock, HEAD_DIMS};
use super::gemm::cooperative::zero_rows_past;
use super::*;
use enigma_ir::builder::{CoopTensor, Matmul2d, Tensor, TileSource};
use enigma_ir::limits::TILE_BARRIERS;
use enigma_ir::{CombineOp, ExecutionScope, Kernel, Matmul2dDescriptor, Matmul2dMode, MemFlags, ReduceAxis};

/// Query rows of one warpgroup (four SIMD groups).
pub const WARPGROUP_ROWS: u32 = 64;
/// K/V stages in threadgroup memory by default (and always with each
/// thread's copies).
pub const STAGES: u32 = 2;
/// Elements per asynchronous copy (16 bytes of a 16-bit type).
const COPY: u32 = 8;
/// The running maximum of a row before its first visible key: below every
/// finite `t`, and finite, so that `m_old − m` is never `−∞ − (−∞)`.
const NO_MAXIMUM: f64 = -1.0e30;

/// One prefill kernel on cooperative tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopPrefillConfig {
    pub dtype: DType,
    pub d: u32,
    pub causal: bool,
    pub lse: bool,
    /// Query rows per threadgroup: 64 or 128 (one or two warpgroups).
    pub block_q: u32,
    /// Keys per K/V block: 64 or 128.
    pub block_kv: u32,
    /// Stage Q, K and V by tile copies (`tile_copy`; on CUDA `sm_90` the
    /// tensor copy engine) rather than by every thread's asynchronous
    /// copies (a variant of its own, `_tiles`).
    pub tile_copies: bool,
    /// K/V stages in threadgroup memory: [`STAGES`], or with tile copies
    /// up to [`TILE_BARRIERS`] (the copies run `stages − 1` blocks ahead).
    pub stages: u32,
}

impl CoopPrefillConfig {
    /// The blocks [`CoopPrefillConfig::for_memory`] tries for head
    /// dimension `d`, staged by tile copies or not, best first, as
    /// `(block_q, block_kv)` (BENCHMARKS.md, attention forward).
    ///
    /// Staged by each thread's copies, one warpgroup of 64 rows first: on
    /// an H200 it beat two warpgroups (128 rows) by 10–35 %, the smaller
    /// threadgroups sharing each multiprocessor so that one's softmax runs
    /// under another's products; against 128 keys at D = 64 (10 % faster
    /// than 64 keys there) and 64 at D = 128. Staged by tile copies, which
    /// cost the threads nothing, two warpgroups sharing each K/V block win
    /// at D = 128 (2133 against 2476 µs at B4 H32 S4096, 1.16×); at D = 64
    /// the order stands (209 against 216 µs for 128 × 128).
    pub fn preferred(d: u32, tile_copies: bool) -> &'static [(u32, u32)] {
        match (d, tile_copies) {
            (64, _) => &[(64, 128), (64, 64), (128, 128), (128, 64)],
            (_, false) => &[(64, 64), (128, 64)],
            (_, true) => &[(128, 64), (64, 64)],
        }
    }

    /// The first of [`CoopPrefillConfig::preferred`] whose threadgroup
    /// memory fits `max_memory_bytes`, in [`STAGES`] stages.
    pub fn for_memory(dtype: DType, d: u32, causal: bool, lse: bool, tile_copies: bool, max_memory_bytes: u64) -> Option<CoopPrefillConfig> {
        CoopPrefillConfig::preferred(d, tile_copies)
            .iter()
            .map(|&(block_q, block_kv)| CoopPrefillConfig { dtype, d, causal, lse, block_q, block_kv, tile_copies, stages: STAGES })
            .find(|c| c.memory_bytes() <= max_memory_bytes)
    }

    /// `attention_prefill_coop_{dtype}_d{d}[_causal][_lse]_q{block_q}_kv{block_kv}[_s{stages}][_tiles]`
    /// (`_s{stages}` where not [`STAGES`]).
    pub fn name(&self) -> String {
        format!(
            "attention_prefill_coop_{}_d{}{}{}_q{}_kv{}{}{}",
            self.dtype,
            self.d,
            if self.causal { "_causal" } else { "" },
            if self.lse { "_lse" } else { "" },
            self.block_q,
            self.block_kv,
            if self.stages == STAGES { String::new() } else { format!("_s{}", self.stages) },
            if self.tile_copies { "_tiles" } else { "" }
        )
    }

    /// SIMD groups per threadgroup: four per 64 query rows.
    pub fn simdgroups(&self) -> u32 {
        self.block_q / WARPGROUP_ROWS * 4
    }

    pub fn threads(&self) -> u32 {
        self.simdgroups() * SIMD_WIDTH
    }

    /// Threadgroup memory: the Q block and the stages of K and of V (the
    /// row state is in cooperative tensors).
    pub fn memory_bytes(&self) -> u64 {
        let e = u64::from(self.dtype.size_bytes());
        let staged = u64::from(self.block_q * self.d) + 2 * u64::from(self.stages * self.block_kv * self.d);
        staged * e
    }

    /// Whether the kernel is built for it: f16 or bf16, `d` one of
    /// [`HEAD_DIMS`], `block_q` 64 or 128, `block_kv` 64 or 128, [`STAGES`]
    /// stages (with tile copies 2 to [`TILE_BARRIERS`]).
    pub fn check(&self) -> Result<(), ShapeError> {
        let err = |m: String| Err(ShapeError::new(self.name(), m));
        if !matches!(self.dtype, DType::F16 | DType::BF16) {
            return err(format!("cooperative products take f16 or bf16 inputs, not {}", self.dtype));
        }
        if !HEAD_DIMS.contains(&self.d) {
            return err(format!("head dimension {} (the kernel is built for {HEAD_DIMS:?})", self.d));
        }
        if !matches!(self.block_q, 64 | 128) || !matches!(self.block_kv, 64 | 128) {
            return err(format!("blocks of {} rows and {} keys; each 64 or 128", self.block_q, self.block_kv));
        }
        let most = if self.tile_copies { TILE_BARRIERS } else { STAGES };
        if !(STAGES..=most).contains(&self.stages) {
            let staged = if self.tile_copies { "tile copies" } else { "each thread's copies" };
            return err(format!("{} K/V stages staged by {staged}; {STAGES} to {most}", self.stages));
        }
        Ok(())
    }

    /// `(ceil(S_q / block_q), heads, batch)` threadgroups of
    /// [`CoopPrefillConfig::threads`].
    pub fn dispatch(&self, s_q: usize, heads: usize, batch: usize) -> Dispatch {
        Dispatch::threadgroups([s_q.div_ceil(self.block_q as usize) as u32, heads as u32, batch as u32], self.threads())
    }
}

/// Starts copying `rows` rows of `d` elements of `src` (row `first` on,
/// from element `base`) into rows `at ..` of `dst` (pitch `d`), zeros for
/// rows at or past `limit`; thread `lid` of `threads` takes every
/// `threads`-th 16-byte copy.
#[allow(clippy::too_many_arguments)]
fn copy_rows(k: &mut KernelBuilder, tag: &str, (src, dst): (Mem, Mem), base: Ex, first: Ex, limit: Ex, at: Ex, rows: u32, d: u32, (lid, threads): (Ex, u32)) {
    let per_row = d / COPY;
    for c in 0..rows * per_row / threads {
        let idx = k.let_(&format!("{tag}_idx{c}"), lid + c * threads);
        let row = k.let_(&format!("{tag}_row{c}"), idx / per_row);
        let col = k.let_(&format!("{tag}_col{c}"), idx % per_row * COPY);
        let valid = k.let_(&format!("{tag}_valid{c}"), (first + row).lt(limit));
        // An invalid copy reads nothing; its index stays in bounds anyway.
        let src_row = select(Ex::from(0u32), first + row, valid);
        k.async_copy(dst.at((at + row) * d + col), src.at(base + src_row * d + col), COPY, valid);
    }
}

/// Runs `body(slot, name)` for every slot of `t`: the tile's elements per
/// thread (`per_thread`) in a loop unrolled at compile time (on CUDA the
/// register array stays in registers), then any slots past them that the
/// backend's capacity has.
fn each_slot(k: &mut KernelBuilder, t: CoopTensor, per_thread: u32, name: &str, body: &dyn Fn(&mut KernelBuilder, Ex, &str)) {
    k.for_unrolled(name, 0u32, per_thread, 1u32, |k, i| body(k, i, name));
    let rest = format!("{name}_rest");
    k.for_range(&rest, per_thread, t.get_capacity(), 1u32, |k, i| body(k, i, &rest));
}

/// The prefill kernel of `cfg` (see the module doc). Parameters as
/// [`super::attention_prefill::prefill`]'s: `q, k, v, out, [lse], s_q,
/// s_kv, heads, group, scale_log2, [diag]`.
///
/// # Panics
/// When `cfg.check()` fails ([`super::attention_prefill::select_prefill`] plans
/// only configurations that pass).
pub fn prefill_cooperative(cfg: &CoopPrefillConfig) -> Kernel {
    if let Err(e) = cfg.check() {
        panic!("{e}");
    }
    let CoopPrefillConfig { d, block_q, block_kv, .. } = *cfg;
    let threads = cfg.threads();
    let elem = cfg.dtype.ty(1);
    let mut kb = KernelBuilder::new(cfg.name());
    let k = &mut kb;
    let PrefillParams { q, keys, values, out, lse, s_q, s_kv, heads, group, scale_log2, diag, batch_size: batches } =
        PrefillParams::declare(k, elem, cfg.lse, cfg.causal, cfg.tile_copies);
    let q_staged = k.threadgroup_array("q_staged", elem, block_q * d);
    let stages = cfg.stages;
    let k_stages = k.threadgroup_array("k_stages", elem, stages * block_kv * d);
    let v_stages = k.threadgroup_array("v_stages", elem, stages * block_kv * d);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let QueryBlock { q0, head, batch, q_row, q_base, kv_row, kv_base, blocks } =
        QueryBlock::new(k, Heads { heads, group }, (s_q, s_kv, Ex::from(d)), diag, (block_q, block_kv));

    let scope = ExecutionScope::Simdgroups(cfg.simdgroups());
    let scores_op = Matmul2d::new(
        Matmul2dDescriptor { transpose_right: true, mode: Matmul2dMode::Multiply, ..Matmul2dDescriptor::new(block_q, block_kv, Some(d)) },
        scope,
    );
    let values_op = Matmul2d::new(
        Matmul2dDescriptor { relaxed_precision: true, mode: Matmul2dMode::MultiplyAccumulate, ..Matmul2dDescriptor::new(block_q, d, Some(block_kv)) },
        scope,
    );
    let s = k.destination_cooperative_tensor(&scores_op, "scores", Scalar::F32);
    let o = k.destination_cooperative_tensor(&values_op, "acc", Scalar::F32);
    // One value per query row: the running maximum `m` of `t` and sum `l`,
    // the block's maximum (then the log-sum-exp), the block's sum (then
    // `1 / l`), and the rescale factor `α`.
    let row = |k: &mut KernelBuilder, name: &str| k.cooperative_tensor(name, Scalar::F32, block_q, 1, scope);
    let (run_max, run_sum) = (row(k, "row_max"), row(k, "row_sum"));
    let (block_max, block_sum, alpha) = (row(k, "block_max"), row(k, "block_sum"), row(k, "row_scale"));
    let s_per_thread = block_q * block_kv / threads;
    let o_per_thread = block_q * d / threads;

    let stage_elements = block_kv * d;
    let threads_of = (lid, threads);
    // Block `block`'s K and V into stage `stage`: each thread's 16-byte
    // copies (zeros past `S_kv`), or with tile copies two boxes on the
    // stage's barrier, which past the head's last key hold the next head's
    // rows (or zeros past the matrices' ends).
    let issue = |k: &mut KernelBuilder, tag: &str, block: Ex, stage: Ex| {
        let first = k.let_(&format!("{tag}_first_key"), block * block_kv);
        let at = k.let_(&format!("{tag}_at"), stage * block_kv);
        match batches {
            Some(batches) => {
                // K and V as matrices of `d` columns, one row per key of
                // every batch and K/V head (the extents are arguments).
                let rows = batches * (heads / group) * s_kv;
                let origin = [(kv_row + first).cast(Scalar::I32), Ex::from(0i32)];
                for (mem, stages) in [(keys, k_stages), (values, v_stages)] {
                    let matrix = TileSource { mem, extents: [rows, Ex::from(d)], pitch: Ex::from(d) };
                    k.tile_copy(stage, stages.at(at * d), matrix, origin, (block_kv, d));
                }
            }
            None => {
                copy_rows(k, &format!("{tag}_k"), (keys, k_stages), kv_base, first, s_kv, at, block_kv, d, threads_of);
                copy_rows(k, &format!("{tag}_v"), (values, v_stages), kv_base, first, s_kv, at, block_kv, d, threads_of);
            }
        }
    };
    // The Q block; the first block's K/V copies join its group (its
    // barrier's phase). With tile copies the first `stages − 1` blocks.
    match batches {
        Some(batches) => {
            k.if_(blocks.gt(0u32), |k| {
                let matrix = TileSource { mem: q, extents: [batches * heads * s_q, Ex::from(d)], pitch: Ex::from(d) };
                k.tile_copy(0u32, q_staged.at(0u32), matrix, [(q_row + q0).cast(Scalar::I32), Ex::from(0i32)], (block_q, d));
                issue(k, "first", Ex::from(0u32), Ex::from(0u32));
            });
            for b in 1..stages - 1 {
                k.if_(blocks.gt(b), |k| issue(k, &format!("first{b}"), Ex::from(b), Ex::from(b)));
            }
        }
        None => {
            copy_rows(k, "q", (q, q_staged), q_base, q0, s_q, Ex::from(0u32), block_q, d, threads_of);
            k.if_(blocks.gt(0u32), |k| issue(k, "first", Ex::from(0u32), Ex::from(0u32)));
            k.async_commit();
        }
    }
    each_slot(k, run_max, 1, "init_max", &|k, i, _| k.cooperative_set(run_max, i, f(NO_MAXIMUM)));
    each_slot(k, run_sum, 1, "init_sum", &|k, i, _| k.cooperative_set(run_sum, i, 0.0f32));
    each_slot(k, o, o_per_thread, "zero", &|k, i, _| k.cooperative_set(o, i, 0.0f32));
    let q_view = Tensor::new(q_staged, [d, block_q]);
    let stage_view = |mem: Mem, stage: Ex| Tensor::new(mem, [d, stages * block_kv]).slice(0u32, stage * block_kv);

    k.for_range("block", 0u32, blocks, 1u32, |k, block| {
        let stage = k.let_("stage", block % stages);
        let kv0 = k.let_("kv0", block * block_kv);
        let next = k.let_("next", block + (stages - 1));
        if batches.is_some() {
            k.tile_wait(stage);
            // A block past `S_kv` holds other keys' values (finite or
            // not) where its weights are 0: zeros, as the threads' copies
            // leave.
            zero_rows_past(k, "past_keys", (v_stages, cfg.dtype.scalar(), stage * stage_elements), (block_kv, d), kv0, s_kv, threads_of);
            // Every thread's view holds the block, and every product of
            // the block before is done: the stage the copies below fill
            // (that block's, and its barrier, waited on then) is free.
            // Q·Kᵀ is issued before them.
            k.threadgroup_barrier(MemFlags::Threadgroup);
            k.matmul2d_run(&scores_op, &q_view, &stage_view(k_stages, stage), s);
            k.if_(next.lt(blocks), |k| issue(k, "ahead", next, next % stages));
        } else {
            // Block `block`'s K and V are in, and every product of the
            // block before is done: the stage the copies below fill (that
            // block's neighbour's) is free.
            k.async_wait(0);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            k.if_(next.lt(blocks), |k| issue(k, "ahead", next, next % stages));
            k.async_commit();
            k.matmul2d_run(&scores_op, &q_view, &stage_view(k_stages, stage), s);
        }
        // Whether any key of the block is hidden from any row of it.
        let last_key = kv0 + (block_kv - 1);
        let mut partial = (kv0 + block_kv).gt(s_kv);
        if let Some(diag) = diag {
            partial = partial.or((last_key + s_q).gt(q0 + diag));
        }
        let partial = k.let_("partial", partial);
        // `t = s·scale·log2 e`, or `−∞` where the mask hides the key (only
        // blocks the mask reaches test it).
        k.if_else(
            partial,
            |k| {
                each_slot(k, s, s_per_thread, "masked", &|k, i, tag| {
                    let [col, row] = s.get_multidimensional_index(i);
                    let key = k.let_(&format!("{tag}_key"), kv0 + col);
                    let mut visible = key.lt(s_kv);
                    if let Some(diag) = diag {
                        visible = visible.and((key + s_q).le(q0 + row + diag));
                    }
                    k.cooperative_set(s, i, select(neg_inf(), s.get(i) * scale_log2, visible));
                });
            },
            |k| each_slot(k, s, s_per_thread, "scaled", &|k, i, _| k.cooperative_set(s, i, s.get(i) * scale_log2)),
        );
        // The new running maximum and `α = 2^(m_old − m)` per row.
        k.cooperative_reduce(s, block_max, ReduceAxis::Rows, ReduceOp::Max);
        k.cooperative_combine(alpha, run_max, CombineOp::Assign);
        k.cooperative_combine(run_max, block_max, CombineOp::Max);
        k.cooperative_combine(alpha, run_max, CombineOp::Sub);
        each_slot(k, alpha, 1, "factor", &|k, i, _| k.cooperative_set(alpha, i, exp2(alpha.get(i))));
        // `p = 2^(t − m_row)`, `o·α_row`, `l = l·α + Σp`.
        k.cooperative_combine(s, run_max, CombineOp::Sub);
        each_slot(k, s, s_per_thread, "weight", &|k, i, _| k.cooperative_set(s, i, exp2(s.get(i))));
        k.cooperative_combine(o, alpha, CombineOp::Mul);
        k.cooperative_reduce(s, block_sum, ReduceAxis::Rows, ReduceOp::Sum);
        k.cooperative_combine(run_sum, alpha, CombineOp::Mul);
        k.cooperative_combine(run_sum, block_sum, CombineOp::Add);
        k.matmul2d_run(&values_op, s, &stage_view(v_stages, stage), o);
    });
    if batches.is_none() {
        // Nothing in flight (the Q block's copies where no key is visible).
        k.async_wait(0);
    }

    // `o / l` per row (0 for a row that saw no key).
    k.cooperative_combine(block_sum, run_sum, CombineOp::Assign);
    each_slot(k, block_sum, 1, "inverse", &|k, i, _| {
        let l = block_sum.get(i);
        k.cooperative_set(block_sum, i, select(f(0.0), 1.0f32 / l, l.gt(0.0f32)));
    });
    k.cooperative_combine(o, block_sum, CombineOp::Mul);
    each_slot(k, o, o_per_thread, "store", &|k, i, tag| {
        let [col, row] = o.get_multidimensional_index(i);
        let at_row = k.let_(&format!("{tag}_row"), q0 + row);
        k.if_(at_row.lt(s_q), |k| store_f32(k, out, q_base + at_row * d + col, o.get(i)));
    });
    // The log-sum-exp `(m + log2 l)·ln 2` (`−∞` for a row that saw no key).
    if let Some(lse) = lse {
        k.cooperative_combine(block_max, run_sum, CombineOp::Assign);
        each_slot(k, block_max, 1, "log_sum", &|k, i, _| {
            let l = block_max.get(i);
            k.cooperative_set(block_max, i, select(neg_inf(), log2(l), l.gt(0.0f32)));
        });
        k.cooperative_combine(block_max, run_max, CombineOp::Add);
        each_slot(k, block_max, 1, "lse_slot", &|k, i, tag| {
            let q_row = k.let_(&format!("{tag}_row"), q0 + block_max.get_multidimensional_index(i)[1]);
            k.if_(block_max.is_valid_element(i).and(q_row.lt(s_q)), |k| {
                k.store(lse.at((batch * heads + head) * s_q + q_row), block_max.get(i) * std::f64::consts::LN_2);
            });
        });
    }
    finish(kb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_configuration_validates_and_counts_its_memory() {
        for dtype in [DType::F16, DType::BF16] {
            for d in HEAD_DIMS {
                for (causal, lse, block_q, block_kv, tile_copies) in [(false, false, 128, 64, false), (true, true, 64, 64, true), (true, false, 128, 128, false), (false, true, 64, 128, true)] {
                    let stages = if tile_copies { 3 } else { STAGES };
                    let cfg = CoopPrefillConfig { dtype, d, causal, lse, block_q, block_kv, tile_copies, stages };
                    let kernel = prefill_cooperative(&cfg);
                    let options = enigma_ir::ValidationOptions { max_threadgroup_memory_bytes: cfg.memory_bytes(), ..Default::default() };
                    let info = enigma_ir::validate(&kernel, &options).unwrap_or_else(|e| panic!("{}: {e:?}", kernel.name));
                    assert_eq!(info.threadgroup_memory_bytes, cfg.memory_bytes(), "{}", kernel.name);
                }
            }
        }
        // 64 rows of 128 (f16), two stages of 64 keys of K and of V.
        let cfg = CoopPrefillConfig::for_memory(DType::F16, 128, false, false, false, 227 * 1024).unwrap();
        assert_eq!((cfg.block_q, cfg.block_kv, cfg.memory_bytes()), (64, 64, (64 * 128 + 4 * 64 * 128) * 2));
        let cfg = CoopPrefillConfig::for_memory(DType::BF16, 64, true, true, false, 227 * 1024).unwrap();
        assert_eq!((cfg.block_q, cfg.block_kv, cfg.threads()), (64, 128, 128));
        let two = CoopPrefillConfig { block_q: 128, block_kv: 128, ..cfg };
        assert_eq!((two.simdgroups(), two.dispatch(300, 4, 2)), (8, Dispatch::threadgroups([3, 4, 2], 256)));
        assert_eq!(CoopPrefillConfig::for_memory(DType::F16, 128, false, false, false, 32 * 1024), None);
        // Tile copies: two warpgroups at D = 128.
        let tiles = CoopPrefillConfig::for_memory(DType::F16, 128, false, false, true, 227 * 1024).unwrap();
        assert_eq!((tiles.block_q, tiles.block_kv, tiles.name()), (128, 64, "attention_prefill_coop_f16_d128_q128_kv64_tiles".to_string()));
        let bad = CoopPrefillConfig { dtype: DType::F16, d: 96, causal: false, lse: false, block_q: 64, block_kv: 64, tile_copies: false, stages: STAGES };
        assert!(bad.check().unwrap_err().to_string().contains("head dimension 96"));
        let deep = CoopPrefillConfig { d: 64, stages: 3, ..bad };
        assert_eq!(deep.check().unwrap_err().to_string(), "attention_prefill_coop_f16_d64_q64_kv64_s3: 3 K/V stages staged by each thread's copies; 2 to 2");
        assert!(CoopPrefillConfig { tile_copies: true, ..deep }.check().is_ok());
        let err = CoopPrefillConfig { tile_copies: true, stages: 9, ..deep }.check().unwrap_err();
        assert_eq!(err.to_string(), "attention_prefill_coop_f16_d64_q64_kv64_s9_tiles: 9 K/V stages staged by tile copies; 2 to 8");
    }
}
