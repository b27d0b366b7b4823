//! The quantized GEMM on cooperative tensors: `C[M, N] = A[M, K] ·
//! dequant(B)`, A f16 (row-major), B FP4 or INT4 in seed 002's `[K/8][N]`
//! layout with an f16 scale per group of K values (`[K/group][N]`), f32
//! accumulation, C f16 or f32. Any M; N a multiple of 8 (16-byte copies of
//! the scales); K a multiple of the group, as every quantized matmul.
//!
//! It is [`super::gemm::cooperative`]'s GEMM with B arriving as packed
//! words: a threadgroup of `tm / 64` warpgroups computes a `tm × tn` tile of
//! C into one cooperative tensor by one `matmul2d(tm, tn, tk)` per slice of
//! `tk` K values. Per slice, 16-byte asynchronous copies bring A's
//! `tm × tk` values (as the cooperative GEMM stages them: zeros past M and
//! K), the slice's `tk / 8 × tn` packed words (as they lie in memory: a
//! row of words is `tn` consecutive words) and the `tk / 32 × tn` scales
//! of the groups the slice can touch into `stages` stages of threadgroup
//! memory (zeros past N and K). The threads then decode the slice's words
//! into an f16 `tk × tn` slice, each value times its group's scale rounded
//! to f16 as the other quantized GEMMs do, in the layout the cooperative
//! GEMM stages B (row k, column n: what `wgmma` reads, in its swizzle on
//! CUDA), and after a barrier the product multiplies it.
//!
//! **The row layout, not fragment order.** The words are decoded by
//! threads into threadgroup memory, not loaded into a SIMD group's
//! registers, so the order the tensor cores' fragments want buys nothing:
//! the `[K/8][N]` rows give each slice one contiguous row of words per 8 K
//! values, copied whole, and consecutive threads decode consecutive
//! columns (conflict-free reads of the staged words and writes of the
//! decoded values). Weights in fragment order take `gemm::qgemm`.
//!
//! **The pipeline** ([`CoopQgemmConfig::lag`]). With three or more stages
//! there are two decoded slices: in the iteration of slice `t`, after the
//! barrier, the product of slice `t − 1` starts (on CUDA `wgmma` runs
//! asynchronously), the copies of slice `t + stages − 2` start into the
//! stage slice `t − 2` used, and the threads decode slice `t` into the
//! decoded slice that product `t − 2` released at that barrier, so the
//! decoding overlaps the tensor cores. A last iteration multiplies the
//! last slice. With two stages (a device with little threadgroup memory)
//! one decoded slice: decode slice `t`, barrier, product `t`, the copies
//! of slice `t + 1` having started before the decoding. The loop is
//! unrolled over the decoded slices, so that each is a constant (the
//! stores into it are a constant apart from a few swizzled bases); the
//! stages are values (the copies into a stage and the product's view of it
//! computed once per slice), as a loop unrolled over them too outgrows the
//! instruction cache.
//!
//! The walk over C's tiles and the epilogue are the cooperative GEMM's
//! ([`super::gemm::cooperative`]: bands of `raster` rows of tiles; the
//! accumulator's slots by their coordinates, elements past M or N
//! skipped). K splits over the grid's z ([`CoopQgemmConfig::splits`]),
//! each split's partial product f32 in a workspace that
//! [`super::split::splitk_reduce`] sums.
//!
//! **Not chosen by default.** The family's selection runs it only when
//! asked for ([`crate::library::select::GemmOptions::cooperative`]
//! `Some(true)`): on the H200 it is slower than the SIMD-group-matrix
//! quantized GEMM (`gemm::qgemm`) at M = 16 and 128 and level with it at
//! M = 64 (`BENCHMARKS.md`, the quantized matmul on cooperative tensors).
//! Its time hardly moves with the K split or the stages: it is bound by
//! the threads' work per slice (the decoding and the staging of each
//! slice, about as many instructions again), which one warpgroup per
//! threadgroup and three threadgroups per compute unit do not hide.
//!
//! Parameters: `a, b, c, m, n, k, group, scales` (`b` the packed words,
//! `group` K values per scale: 32, 64 or 128).

use super::gemm::cooperative::{for_each_slot, overlap_lag, raster_walk, store_tile_direct, Staging, TileTarget, COPY_ELEMENTS, DEFAULT_RASTER, WARPGROUP_ROWS};
use super::gemm::{asked_or_fitting_stages, MatrixArgs, PackedArgs, MAX_STAGES};
use super::quant::{dequantized_halves, Format, GROUPS, VALUES_PER_WORD};
use super::split::{check_splits_and_memory, k_splits_for, split_range, SplitArgs};
use super::tile::TileShape;
use super::*;
use enigma_ir::builder::{Matmul2d, Tensor};
use enigma_ir::{Access, ExecutionScope, Matmul2dDescriptor, Matmul2dMode, Scalar};
use std::collections::{BTreeMap, BTreeSet};

/// Packed words per 16-byte copy.
pub const WORDS_PER_COPY: u32 = 4;

/// K values of every slice: a multiple of 64 (the staged A's pitch, which
/// `wgmma` needs) dividing or divided by each group.
pub const SLICE_DEPTH: u32 = 64;

/// The tiles [`CoopQgemmConfig::for_problem`] tries, `(tm, tn)`, best
/// first: the widest that still gives every compute unit a tile.
pub const COOP_QGEMM_TILES: [(u32, u32); 5] = [(128, 256), (128, 128), (64, 256), (64, 128), (64, 64)];

/// The most rows of C for which [`CoopQgemmConfig::splits_for`] splits K:
/// above them the f32 workspace's traffic costs more than the threadgroups
/// gain (on the H200 at M = 128, 128 × 128 tiles: 98 µs split 2 ways, 81
/// unsplit; `BENCHMARKS.md`, the quantized matmul on cooperative tensors).
pub const COOP_SPLIT_K_MAX_ROWS: u32 = 64;

/// Rows of scales a stage holds: the groups a slice can touch, at the
/// smallest group.
fn scale_rows(tk: u32) -> u32 {
    tk / GROUPS[0] as u32
}

/// One kernel: the weights' format, C's type, the tile, the stages and the
/// walk over C's tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopQgemmConfig {
    pub format: Format,
    pub output: DType,
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub stages: u32,
    /// Rows of tiles per band of the walk over C's tiles (1: row-major).
    pub raster: u32,
    /// K split over this many threadgroups along the grid's z (1: none):
    /// split `z` takes its run of whole slices (`split::split_range`) and writes
    /// its f32 partial product to slice `z` of `c`, the `splits · M · N`
    /// workspace that [`super::split::splitk_reduce`] sums into C.
    pub splits: u32,
}

impl CoopQgemmConfig {
    /// The configuration for `m × n` outputs on a device of
    /// `compute_units` (0: no minimum) and `max_threadgroup_memory_bytes`:
    /// the first of [`COOP_QGEMM_TILES`] no taller than needed (128 rows
    /// only above 64) whose tiles number at least the compute units (half
    /// of them for 128 rows, whose two warpgroups share each decoded slice:
    /// at M = 128 on the H200, 128 × 128 takes 81 µs where 64 × 128 takes
    /// 91–115 µs), or failing that the last, each with the most stages (from
    /// [`super::gemm::DEFAULT_STAGES`] down to 2, or `stages` where asked)
    /// that fit; a narrower tile where none fit; `None` where nothing fits.
    /// `tile` (`(tm, tn)`, one of [`COOP_QGEMM_TILES`]) where asked: that
    /// tile only.
    pub fn for_problem(format: Format, output: DType, (m, n): (u32, u32), compute_units: u32, (tile, stages): (Option<(u32, u32)>, Option<u32>), max_threadgroup_memory_bytes: u64) -> Option<CoopQgemmConfig> {
        let tiles: Vec<(u32, u32)> = match tile {
            Some(tile) => vec![tile],
            None => COOP_QGEMM_TILES.iter().copied().filter(|&(tm, _)| tm == WARPGROUP_ROWS || m > WARPGROUP_ROWS).collect(),
        };
        let fills = |&(tm, tn): &(u32, u32)| {
            let wanted = if tm > WARPGROUP_ROWS { compute_units.div_ceil(2) } else { compute_units };
            u64::from(m.div_ceil(tm)) * u64::from(n.div_ceil(tn)) >= u64::from(wanted)
        };
        let first = tiles.iter().position(fills).unwrap_or(tiles.len() - 1);
        tiles[first..].iter().find_map(|&(tm, tn)| {
            let base = CoopQgemmConfig { format, output, tm, tn, tk: SLICE_DEPTH, stages: 2, raster: DEFAULT_RASTER, splits: 1 };
            let bytes = |stages: u32| CoopQgemmConfig { stages, ..base }.memory_bytes();
            asked_or_fitting_stages(stages, bytes, max_threadgroup_memory_bytes).map(|stages| CoopQgemmConfig { stages, ..base })
        })
    }

    /// Barriers between a stage's use and its refill, and the decoded
    /// slices: 2 with three or more stages (two decoded slices, each
    /// product overlapping the next slice's decoding), else 1. The copies
    /// run `stages − lag` slices ahead.
    pub fn lag(&self) -> u32 {
        overlap_lag(self.stages)
    }

    /// SIMD groups per threadgroup: four per warpgroup of 64 rows.
    pub fn simdgroups(&self) -> u32 {
        self.tm / WARPGROUP_ROWS * 4
    }

    pub fn threads(&self) -> u32 {
        self.simdgroups() * SIMD_WIDTH
    }

    /// Threadgroup memory: per stage A's `tm × tk` f16 values, the
    /// `tk / 8 × tn` packed words and `tk / 32 × tn` f16 scales; and
    /// [`CoopQgemmConfig::lag`] decoded `tk × tn` f16 slices.
    pub fn memory_bytes(&self) -> u64 {
        let (tm, tn, tk) = (u64::from(self.tm), u64::from(self.tn), u64::from(self.tk));
        let stage = tm * tk * 2 + tk / VALUES_PER_WORD as u64 * tn * 4 + u64::from(scale_rows(self.tk)) * tn * 2;
        u64::from(self.stages) * stage + u64::from(self.lag()) * tk * tn * 2
    }

    /// K splits for an `m × n × k` product on this tile that give at least
    /// `threadgroups` threadgroups, for M up to [`COOP_SPLIT_K_MAX_ROWS`]
    /// (the GEMM's rule, [`k_splits_for`]).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, threadgroups: u32) -> u32 {
        k_splits_for(TileShape { m: self.tm, n: self.tn, k: self.tk }, m, n, k, threadgroups, COOP_SPLIT_K_MAX_ROWS)
    }

    /// `qgemm_coop_{format}_{out}_{tm}x{tn}x{tk}_s{stages}[_r{raster}][_splitk{splits}]`.
    pub fn name(&self) -> String {
        let raster = if self.raster == 1 { String::new() } else { format!("_r{}", self.raster) };
        let split = if self.splits > 1 { format!("_splitk{}", self.splits) } else { String::new() };
        format!("qgemm_coop_{}_{}_{}x{}x{}_s{}{raster}{split}", self.format, self.output, self.tm, self.tn, self.tk, self.stages)
    }

    /// Whether the tile and stages make a kernel: FP4 or INT4, C f16 or
    /// f32; `tm` 64 or 128, `tn` 64, 128 or 256, `tk` [`SLICE_DEPTH`];
    /// every copy of A's slice and of the words split evenly over the
    /// threads in whole rows, the scales' too or at most one each
    /// (`Staging::splits_evenly`); 2 to [`MAX_STAGES`] stages;
    /// all within `max_threadgroup_memory_bytes`.
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        let err = |message: String| Err(ShapeError::new(&name, message));
        if !matches!(self.format, Format::Fp4 | Format::Int4) {
            return err(format!("takes fp4 or int4 weights in seed 002's [K/8][N] layout, not {}", self.format));
        }
        if !matches!(self.output, DType::F16 | DType::F32) {
            return err(format!("writes C in f16 or f32, not {}", self.output));
        }
        if !matches!(self.tm, 64 | 128) || !matches!(self.tn, 64 | 128 | 256) || self.tk != SLICE_DEPTH {
            return err(format!("a {}×{}×{} tile; tm 64 or 128, tn 64, 128 or 256, tk {SLICE_DEPTH}", self.tm, self.tn, self.tk));
        }
        if self.raster == 0 {
            return err("a walk over bands of 0 rows of tiles; raster is at least 1".to_string());
        }
        if !(2..=MAX_STAGES).contains(&self.stages) {
            return err(format!("{} stages; between 2 and {MAX_STAGES}", self.stages));
        }
        let threads = self.threads();
        let a_copies = self.tm * self.tk / COPY_ELEMENTS;
        let word_copies = self.tk / VALUES_PER_WORD as u32 * self.tn / WORDS_PER_COPY;
        let scale_copies = scale_rows(self.tk) * self.tn / COPY_ELEMENTS;
        let whole = Staging::splits_evenly((self.tm, self.tk), COPY_ELEMENTS, threads)
            && Staging::splits_evenly((self.tk / VALUES_PER_WORD as u32, self.tn), WORDS_PER_COPY, threads)
            && Staging::splits_evenly((scale_rows(self.tk), self.tn), COPY_ELEMENTS, threads);
        if !whole || (a_copies < threads) || (word_copies < threads) {
            return err(format!("the slices' {a_copies} copies of A, {word_copies} of words and {scale_copies} of scales do not split evenly over {threads} threads"));
        }
        if self.memory_bytes() > max_threadgroup_memory_bytes {
            return err(format!("{} stages take {} bytes of threadgroup memory; the device has {max_threadgroup_memory_bytes}", self.stages, self.memory_bytes()));
        }
        check_splits_and_memory(&name, self.splits, self.memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// Whether the kernel takes N columns: whole 16-byte copies of scales.
    pub fn takes(n: u32) -> bool {
        n.is_multiple_of(COPY_ELEMENTS)
    }

    pub fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        Dispatch::threadgroups([n.div_ceil(self.tn), m.div_ceil(self.tm), self.splits.max(1)], self.threads())
    }
}

/// The quantized GEMM kernel of `cfg` (see the module doc).
///
/// # Panics
/// When `cfg.check(u64::MAX)` fails: plan through `qmatmul::select` (the
/// threadgroup memory is the device's to check).
pub fn qgemm_cooperative(cfg: &CoopQgemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    let CoopQgemmConfig { format, tm, tn, tk, stages, splits, .. } = *cfg;
    let threads = cfg.threads();
    let lag = cfg.lag();
    let word_rows = tk / VALUES_PER_WORD as u32;
    let mut k = KernelBuilder::new(cfg.name());
    let a = k.buffer(MatrixArgs::A, Type::F16, Access::Read);
    let b = k.buffer(MatrixArgs::B, Type::U32, Access::Read);
    // With K split, `c` is the f32 workspace of partial products.
    let c = k.buffer(SplitArgs::C, if splits > 1 { Type::F32 } else { cfg.output.ty(1) }, Access::ReadWrite);
    let m = k.value(MatrixArgs::M, Type::U32);
    let n = k.value(MatrixArgs::N, Type::U32);
    let kk = k.value(MatrixArgs::K, Type::U32);
    let group = k.value(PackedArgs::GROUP, Type::U32);
    let scales = k.buffer(PackedArgs::SCALES, Type::F16, Access::Read);
    let a_slices = k.threadgroup_array("a_slices", Type::F16, stages * tm * tk);
    let word_slices = k.threadgroup_array("word_slices", Type::U32, stages * word_rows * tn);
    let scale_slices = k.threadgroup_array("scale_slices", Type::F16, stages * scale_rows(tk) * tn);
    let b_slices = k.threadgroup_array("b_slices", Type::F16, lag * tk * tn);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let a_ops = Staging::new(&mut k, "a", (a, a_slices), (tm, tk), COPY_ELEMENTS, lid, threads);
    let word_ops = Staging::new(&mut k, "w", (b, word_slices), (word_rows, tn), WORDS_PER_COPY, lid, threads);
    let scale_ops = Staging::new(&mut k, "s", (scales, scale_slices), (scale_rows(tk), tn), COPY_ELEMENTS, lid, threads);
    let (tile_row, tile_col) = raster_walk(&mut k, cfg.raster);
    let m0 = k.let_("m0", tile_row * tm);
    let n0 = k.let_("n0", tile_col * tn);
    // This threadgroup's slices of K: `slices` of them from `first_slice`.
    let (c_base, first_slice, slices) = if splits > 1 {
        let split = k.let_("split", threadgroup_position_in_grid().z());
        let c_base = k.let_("c_base", split * m * n);
        let (k_begin, k_end) = split_range(&mut k, kk, split, splits, tk);
        let first_slice = k.let_("first_slice", k_begin / tk);
        (c_base, first_slice, k.let_("slices", (k_end - k_begin + (tk - 1)) / tk))
    } else {
        (Ex::from(0u32), Ex::from(0u32), k.let_("slices", (kk + (tk - 1)) / tk))
    };
    let group_shift = k.let_("group_shift", ctz(group));
    let groups = k.let_("groups", kk >> group_shift);
    let words_k = k.let_("words_k", kk / VALUES_PER_WORD as u32);
    // This thread decodes words `lid + i·threads` of each slice's
    // `word_rows × tn`: row `dq_row + i·threads / tn`, column
    // `dq_col + i·threads % tn` (both powers of two, one dividing the other).
    let dq_row = k.let_("dq_row", lid / tn);
    let dq_col = k.let_("dq_col", lid % tn);
    let dq_lane = k.let_("dq_lane", dq_row * (VALUES_PER_WORD as u32 * tn) + dq_col);
    // Where value `j` of this thread's words lands in the decoded slice,
    // per column step of its words (`i·threads % tn`): the 8 values of a
    // word lie in 8 rows whose swizzles differ, while its words' rows, the
    // stages and the decoded slices differ by whole swizzle atoms (8 rows),
    // so every store is one of these bases plus a constant (one swizzle per
    // base on CUDA, not one per store).
    let words_per_thread = word_rows * tn / threads;
    let col_steps: BTreeSet<u32> = (0..words_per_thread).map(|i| i * threads % tn).collect();
    let dq_at: Vec<BTreeMap<u32, Ex>> = (0..VALUES_PER_WORD as u32)
        .map(|j| col_steps.iter().map(|&cs| (cs, k.let_(&format!("dq_at{j}_{cs}"), dq_lane + (j * tn + cs)))).collect())
        .collect();

    let desc = Matmul2dDescriptor { mode: Matmul2dMode::MultiplyAccumulate, ..Matmul2dDescriptor::new(tm, tn, Some(tk)) };
    let op = Matmul2d::new(desc, ExecutionScope::Simdgroups(cfg.simdgroups()));
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    let per_thread = tm * tn / threads;
    for_each_slot(&mut k, acc, per_thread, "i", &|k, i, _| k.cooperative_set(acc, i, 0.0f32));

    // Slice `t`'s copies (of this threadgroup's run of K) into stage
    // `stage` (a value).
    let issue = |k: &mut KernelBuilder, tag: &str, t: Ex, stage: Ex| {
        let t = k.let_(&format!("{tag}_slice"), first_slice + t);
        let k0 = k.let_(&format!("{tag}_k0"), t * tk);
        a_ops.issue_into(k, &format!("{tag}_a"), stage, m0 * kk + k0, kk, |r, c| (m0 + r).lt(m).and((k0 + c).lt(kk)));
        let w0 = k.let_(&format!("{tag}_w0"), t * word_rows);
        word_ops.issue_into(k, &format!("{tag}_w"), stage, w0 * n + n0, n, |r, c| (w0 + r).lt(words_k).and((n0 + c).lt(n)));
        let g0 = k.let_(&format!("{tag}_g0"), k0 >> group_shift);
        scale_ops.issue_into(k, &format!("{tag}_s"), stage, g0 * n + n0, n, |r, c| (g0 + r).lt(groups).and((n0 + c).lt(n)));
    };
    // Decodes the words of the slice in stage `stage` (a value) into
    // decoded slice `slot` (a constant): each word's 8 values down its
    // column.
    let decode = |k: &mut KernelBuilder, tag: &str, stage: Ex, slot: u32| {
        let words_at = k.let_(&format!("{tag}_words"), lid + stage * (word_rows * tn));
        let scales_at = k.let_(&format!("{tag}_scales"), dq_col + stage * (scale_rows(tk) * tn));
        for i in 0..words_per_thread {
            let (row_step, col_step) = (i * threads / tn, i * threads % tn);
            let word = k.let_(&format!("{tag}_word{i}"), word_slices.get(words_at + i * threads));
            // The word's 8 K values lie in one group (8 divides every
            // group); its scale row within the stage, relative to the
            // slice's first group (`tk` is a multiple of a smaller group and
            // divides a larger one).
            let scale_row = ((dq_row + row_step) * VALUES_PER_WORD as u32) >> group_shift;
            let scale = k.let_(&format!("{tag}_scale{i}"), scale_slices.get(scale_row * tn + scales_at + col_step).cast(Type::F32));
            let values = dequantized_halves(k, &format!("{tag}_{i}"), format, word, scale);
            let offset = slot * tk * tn + row_step * VALUES_PER_WORD as u32 * tn;
            for (bases, v) in dq_at.iter().zip(values) {
                k.store(b_slices.at(bases[&col_step] + offset), v);
            }
        }
    };
    let left = |stage: Ex| a_ops.view(stages, stage);
    let right = |slot: u32| Tensor::new(b_slices, [tn, lag * tk]).slice(0u32, slot * tk);

    // The copies run `ahead` slices ahead. Every iteration commits one
    // group (empty past the last slice), so waiting for all but
    // `ahead − 1` leaves slice t complete.
    let ahead = stages - lag;
    for t in 0..ahead {
        k.if_(Ex::from(t).lt(slices), |k| issue(k, &format!("first{t}"), Ex::from(t), Ex::from(t)));
        k.async_commit();
    }
    // Slices plus, with two decoded slices, the last product's iteration;
    // unrolled by the decoded slices, so that each is a constant (the
    // stages are values: unrolled over them too, the loop's code outgrows
    // the instruction cache).
    let iterations = k.let_("iterations", slices + (lag - 1));
    k.for_range("round", 0u32, iterations, lag, |k, round| {
        for s in 0..lag {
            let t = k.let_(&format!("t{s}"), round + s);
            k.if_(t.lt(iterations), |k| {
                k.async_wait(ahead - 1);
                k.threadgroup_barrier(MemFlags::Threadgroup);
                let stage = k.let_(&format!("stage{s}"), t % stages);
                if lag == 2 {
                    // Slice t − 1, decoded before the barrier above.
                    let (previous, slot) = (k.let_(&format!("previous{s}"), (t + (stages - 1)) % stages), (s + 1) % 2);
                    k.if_(t.ge(1u32), |k| k.matmul2d_run(&op, &left(previous), &right(slot), acc));
                }
                // Into the stage slice t − lag used, released at the barrier
                // above (its product and its decoding both done by then).
                let next = k.let_(&format!("ahead{s}"), t + ahead);
                k.if_(next.lt(slices), |k| issue(k, &format!("ahead{s}"), next, next % stages));
                k.async_commit();
                let slot = s % lag;
                k.if_(t.lt(slices), |k| decode(k, &format!("dq{s}"), stage, slot));
                if lag == 1 {
                    k.threadgroup_barrier(MemFlags::Threadgroup);
                    k.matmul2d_run(&op, &left(stage), &right(slot), acc);
                }
            });
        }
    });

    let output = if splits > 1 { DType::F32 } else { cfg.output };
    let target = TileTarget { c, output, base: c_base, origin: (m0, n0), size: (m, n), alpha: Ex::from(1.0f32), beta: Ex::from(0.0f32), bias: None };
    store_tile_direct(&mut k, acc, per_thread, &target);
    finish(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel declares the threadgroup memory its configuration reports
    /// (what the selection checks against the device), at every tile and
    /// depth.
    #[test]
    fn memory_is_what_the_kernel_declares() {
        for &(tm, tn) in &COOP_QGEMM_TILES {
            for stages in 2..=MAX_STAGES {
                let cfg = CoopQgemmConfig { format: Format::Int4, output: DType::F16, tm, tn, tk: SLICE_DEPTH, stages, raster: DEFAULT_RASTER, splits: 1 };
                if cfg.check(u64::MAX).is_err() {
                    continue;
                }
                let declared: u64 = qgemm_cooperative(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
                assert_eq!(cfg.memory_bytes(), declared, "{}", cfg.name());
            }
        }
    }

    /// The tile and stages each device gets: the H200's 132 compute units
    /// and 227 KiB at M = 16, 64, 100 and 128 of N = 11008 (128 rows where
    /// their tiles give half the compute units one, 64 where not); 32 KiB (Metal) takes
    /// the 64 × 64 tile in two stages; what does not fit is refused.
    #[test]
    fn tiles_fill_the_compute_units_and_fit_the_memory() {
        let plan = |m: u32, units: u32, memory: u64| CoopQgemmConfig::for_problem(Format::Fp4, DType::F16, (m, 11008), units, (None, None), memory).map(|c| (c.tm, c.tn, c.stages));
        let h200 = 227 * 1024;
        let plan_tile = |m: u32, tile: (u32, u32)| CoopQgemmConfig::for_problem(Format::Int4, DType::F16, (m, 11008), 132, (Some(tile), None), h200).map(|c| (c.tm, c.tn, c.stages));
        assert_eq!(plan(16, 132, h200), Some((64, 64, 4)));
        assert_eq!(plan(64, 132, h200), Some((64, 64, 4)));
        assert_eq!(plan(128, 132, h200), Some((128, 128, 4)));
        assert_eq!(plan(100, 132, h200), Some((128, 128, 4)));
        assert_eq!(plan(128, 264, h200), Some((64, 64, 4)));
        assert_eq!(plan(4096, 132, h200), Some((128, 256, 4)));
        assert_eq!(plan(16, 0, h200), Some((64, 256, 4)));
        assert_eq!(plan(128, 0, 32 * 1024), Some((64, 64, 2)));
        assert_eq!(CoopQgemmConfig::for_problem(Format::Int4, DType::F16, (16, 64), 0, (None, Some(3)), 32 * 1024), None);
        assert_eq!(plan_tile(16, (128, 128)), Some((128, 128, 4)));
        let cfg = CoopQgemmConfig { format: Format::Int4, output: DType::F16, tm: 64, tn: 64, tk: 64, stages: 2, raster: 1, splits: 1 };
        assert_eq!(cfg.memory_bytes(), 2 * (64 * 64 * 2 + 8 * 64 * 4 + 2 * 64 * 2) + 64 * 64 * 2);
        let wide = CoopQgemmConfig { tm: 128, ..cfg };
        assert!(wide.check(u64::MAX).unwrap_err().to_string().contains("do not split evenly over 256 threads"));
        let affine = CoopQgemmConfig { format: Format::MlxAffine, ..cfg };
        assert!(affine.check(u64::MAX).unwrap_err().to_string().contains("not mlx_affine"));
        assert!(cfg.check(28 * 1024).unwrap_err().to_string().contains("29184 bytes"));
    }
}
