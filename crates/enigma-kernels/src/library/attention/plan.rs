//! The decode's plan: which form runs (three dispatches or fused), its
//! threadgroup size, load width, lanes per key, keys per step, heads per
//! threadgroup and the split of the keys over threadgroups, checked against
//! the shape and the device.

use super::combine::{combine, COMBINE_THREADS};
use super::fused::{fused, fused_chunks, fused_vec_suffix, FusedConfig};
use super::matrices::{MatrixDecode, QUERY_COLUMNS};
use super::shape::{chunks_for, DecodeShape};
use super::three_dispatch::{scores, weighted_sum};
use crate::library::split::SplitSum;
use crate::library::*;
use enigma_ir::Kernel;

/// The three-dispatch decode, or the fused one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionPlan {
    pub dtype: DType,
    pub vec: u8,
    pub chunks: u32,
    pub shape: DecodeShape,
    /// Scores: `(ceil(S/T), rows)` threadgroups (one K/V head per query
    /// head, whole sequences).
    pub scores: Dispatch,
    /// Softmax over the `[rows, S]` scores: `(rows, 1)`.
    pub softmax: crate::library::softmax::RowPlan,
    /// Weighted sum: `(ceil(D/32), rows)`.
    pub weighted_sum: Dispatch,
    /// Fused: `(splits, kv_heads, batch)`.
    pub fused: Dispatch,
    /// Elements per load of the fused kernel: the plan's `vec`, or 8 (16-byte
    /// words) for f16/bf16 with `vec` 4 and `D % 8 == 0`.
    pub fused_vec: u8,
    /// Lanes of the fused kernel that share one key ([`FusedConfig::lanes`]).
    pub lanes_per_key: u32,
    /// Keys each key group of the fused kernel loads per step.
    pub keys_per_step: u32,
    /// Query heads per threadgroup of the fused kernel (a divisor of the
    /// shape's query heads per K/V head).
    pub heads_per_threadgroup: u32,
    /// Whether the fused kernel loads the next step while using this one.
    pub prefetch: bool,
    /// Steps of the fused kernel staged ahead by asynchronous copies
    /// ([`FusedConfig::stages`]; 0: loads into registers).
    pub stages: u32,
    /// Whether the fused kernel reads per-sequence lengths.
    pub ragged: bool,
    /// Whether the fused form writes the log-sum-exp of each row.
    pub lse: bool,
    /// Key splits of the fused form (1: one threadgroup per K/V head).
    pub splits: u32,
    /// Keys per split.
    pub split_len: u32,
    /// Who merges the splits (with `splits > 1`): [`combine`]'s second
    /// dispatch (`Reduction`), or the last threadgroup of each head block
    /// in the fused kernel (`LastThreadgroup`, [`FusedConfig::merge`]).
    pub split_sum: SplitSum,
    /// Merging the splits: `(rows, ceil(d / 32))` (used when `splits > 1`
    /// and `split_sum` is `Reduction`).
    pub combine: Dispatch,
    /// The fused kernel on SIMD-group matrices ([`FusedConfig::matrices`]),
    /// or on lanes that own keys (`None`).
    pub matrices: Option<MatrixDecode>,
}

impl AttentionPlan {
    pub fn scores_kernel(&self) -> Kernel {
        scores(self.dtype, self.vec, self.chunks)
    }
    pub fn softmax_kernel(&self) -> Kernel {
        let c = self.softmax.config;
        crate::library::softmax::softmax(c.dtype, c.vec, c.items)
    }
    pub fn weighted_sum_kernel(&self) -> Kernel {
        weighted_sum(self.dtype)
    }
    /// What the fused kernel is built for.
    pub fn fused_config(&self) -> FusedConfig {
        FusedConfig {
            dtype: self.dtype,
            vec: self.fused_vec,
            chunks: fused_chunks(self.shape.d, self.fused_vec, self.lanes_per_key),
            threads: self.fused.threads[0],
            heads: self.heads_per_threadgroup,
            lanes: self.lanes_per_key,
            keys_per_step: self.keys_per_step,
            prefetch: self.prefetch && self.stages == 0,
            stages: self.stages,
            split: self.splits > 1,
            ragged: self.ragged,
            lse: self.lse,
            merge: self.splits > 1 && self.split_sum == SplitSum::LastThreadgroup,
            matrices: self.matrices,
        }
    }
    pub fn fused_kernel(&self) -> Kernel {
        fused(&self.fused_config())
    }
    pub fn combine_kernel(&self) -> Kernel {
        combine(self.dtype, self.lse)
    }

    /// This plan with the fused form's keys split `splits` ways (at most
    /// one split per key): `(splits, q_heads / heads_per_threadgroup,
    /// batch)` threadgroups, then a combine.
    pub fn with_splits(mut self, splits: u32) -> AttentionPlan {
        let s_len = self.shape.s_len;
        let splits = splits.clamp(1, s_len);
        self.split_len = s_len.div_ceil(splits);
        // Splits of that length; trailing ones would be empty.
        self.splits = s_len.div_ceil(self.split_len);
        let t = self.fused.threads[0];
        self.fused = Dispatch::threadgroups([self.splits, self.shape.q_heads / self.heads_per_threadgroup, self.shape.batch], t);
        self
    }

    /// This plan with its splits merged as `sum` says.
    pub fn with_split_sum(mut self, sum: SplitSum) -> AttentionPlan {
        self.split_sum = sum;
        self
    }

    /// Head blocks of the fused kernel's grid (`q_heads / heads ·
    /// batch`): one ticket each when the kernel merges its splits.
    pub fn head_blocks(&self) -> u32 {
        self.fused.size[1] * self.fused.size[2]
    }

    /// This plan's fused kernel with `heads` query heads per threadgroup
    /// (fewer than the query heads per K/V head: more threadgroups and
    /// fewer registers, each K/V row read once per threadgroup that needs
    /// it) and, with `prefetch`, the next step's loads issued before this
    /// step's math. Call before [`AttentionPlan::with_splits`].
    pub fn with_heads_per_threadgroup(mut self, heads: u32, prefetch: bool) -> Result<AttentionPlan, ShapeError> {
        let group = self.shape.group();
        if heads == 0 || !group.is_multiple_of(heads) {
            let name = format!("attention_fused_{}{}", self.dtype, vec_suffix(self.vec));
            return Err(ShapeError::new(name, format!("{heads} query heads per threadgroup do not divide the {group} query heads per K/V head")));
        }
        self.heads_per_threadgroup = heads;
        self.prefetch = prefetch;
        let t = self.fused.threads[0];
        self.fused = Dispatch::threadgroups([self.splits, self.shape.q_heads / heads, self.shape.batch], t);
        Ok(self)
    }

    /// This plan's fused kernel with `keys` keys per key group and step.
    pub fn with_keys_per_step(mut self, keys: u32) -> AttentionPlan {
        self.keys_per_step = keys.max(1);
        self
    }

    /// This plan's fused kernel with `lanes` lanes per key (a power of two
    /// up to 32).
    pub fn with_lanes_per_key(mut self, lanes: u32) -> Result<AttentionPlan, ShapeError> {
        if !lanes.is_power_of_two() || lanes > SIMD_WIDTH {
            let name = format!("attention_fused_{}{}", self.dtype, fused_vec_suffix(self.fused_vec));
            return Err(ShapeError::new(name, format!("{lanes} lanes per key is not a power of two up to 32")));
        }
        self.lanes_per_key = lanes;
        Ok(self)
    }

    /// This plan's fused kernel with `stages` steps staged ahead by
    /// asynchronous copies (0: loads into registers, with or without the
    /// plan's prefetch); the copies need loads of 4, 8 or 16 bytes.
    pub fn with_stages(mut self, stages: u32) -> Result<AttentionPlan, ShapeError> {
        let bytes = self.fused_vec as u32 * self.dtype.scalar().size_bytes();
        if stages > 0 && bytes < 4 {
            let name = format!("attention_fused_{}{}", self.dtype, fused_vec_suffix(self.fused_vec));
            return Err(ShapeError::new(name, format!("staged loads copy 4, 8 or 16 bytes; a load of this kernel is {bytes} (d = {} is no multiple of 4)", self.shape.d)));
        }
        self.stages = stages;
        Ok(self)
    }

    /// This plan's fused kernel on SIMD-group matrices, each SIMD group
    /// taking `block` keys per step (16 or 32; see [`MatrixDecode`]): f16
    /// or bf16 with `d` a multiple of 16 up to 256 and at most
    /// [`QUERY_COLUMNS`] query heads per threadgroup. Call after
    /// [`AttentionPlan::with_heads_per_threadgroup`].
    pub fn with_matrices(mut self, block: u32) -> Result<AttentionPlan, ShapeError> {
        let name = format!("attention_fused_mma_{}", self.dtype);
        if !MatrixDecode::fits(self.dtype, self.shape.d) {
            return Err(ShapeError::new(name, format!("SIMD-group matrices take f16 or bf16 with d a multiple of 16 up to 256, not {} with d = {}", self.dtype, self.shape.d)));
        }
        if self.heads_per_threadgroup > QUERY_COLUMNS || !(block == 16 || block == 32) {
            return Err(ShapeError::new(name, format!("{} query heads per threadgroup (at most {QUERY_COLUMNS}) and {block} keys per step (16 or 32)", self.heads_per_threadgroup)));
        }
        self.matrices = Some(MatrixDecode { d: self.shape.d, block });
        self.fused_vec = 8;
        Ok(self)
    }

    /// This plan's fused kernel with threadgroups of `threads`. Call before
    /// [`AttentionPlan::with_splits`].
    pub fn with_fused_threads(mut self, threads: u32) -> AttentionPlan {
        self.fused = Dispatch::threadgroups(self.fused.size, threads);
        self
    }

    /// This plan's fused kernel on loads of the plan's `vec` only, not on
    /// 16-byte words (for buffers whose sizes are no multiple of 16
    /// bytes); the lanes per key follow the narrower loads' default.
    pub fn without_wide_words(mut self) -> AttentionPlan {
        if self.fused_vec == 8 {
            self.fused_vec = self.vec;
            self.lanes_per_key = default_lanes_per_key(self.shape.d, self.vec);
        }
        self
    }

    /// This plan's fused kernel reading per-sequence lengths (`ragged`)
    /// and writing the log-sum-exp (`lse`).
    pub fn with_outputs(mut self, ragged: bool, lse: bool) -> AttentionPlan {
        self.ragged = ragged;
        self.lse = lse;
        self
    }

    /// This plan's fused kernel with the most threads, up to its own, whose
    /// threadgroup memory fits [`MAX_THREADGROUP_MEMORY_BYTES`] (staged words
    /// take memory per thread), at least 32. Call before
    /// [`AttentionPlan::with_splits`].
    pub fn fitting_threads(mut self) -> AttentionPlan {
        let mut t = self.fused.threads[0];
        while t > SIMD_WIDTH && self.fused_threadgroup_memory() > MAX_THREADGROUP_MEMORY_BYTES {
            t -= SIMD_WIDTH;
            self.fused = Dispatch::threadgroups(self.fused.size, t);
        }
        self
    }

    /// Threadgroup memory of the fused kernel ([`FusedConfig::threadgroup_memory`]).
    pub fn fused_threadgroup_memory(&self) -> u64 {
        self.fused_config().threadgroup_memory()
    }

    /// Checks that the fused kernel fits the 32 KiB of threadgroup memory
    /// (the three-dispatch form has no such limit).
    pub fn check_fused(&self) -> Result<(), ShapeError> {
        let bytes = self.fused_threadgroup_memory();
        if bytes > MAX_THREADGROUP_MEMORY_BYTES {
            let name = format!("attention_fused_{}{}", self.dtype, vec_suffix(self.vec));
            let t = self.fused.threads[0];
            let h = self.heads_per_threadgroup;
            return Err(ShapeError::new(
                name,
                format!("needs {bytes} bytes of threadgroup memory for {t} threads and d = {} ({h} query heads per threadgroup; limit {MAX_THREADGROUP_MEMORY_BYTES})", self.shape.d),
            ));
        }
        Ok(())
    }

    /// Checks that the three-dispatch form can run this shape: one K/V head
    /// per query head (it has no grouped or ragged form).
    pub fn check_three_dispatch(&self) -> Result<(), ShapeError> {
        if self.shape.group() != 1 || self.ragged {
            let name = format!("attention_{}{}", self.dtype, vec_suffix(self.vec));
            return Err(ShapeError::new(name, "the three-dispatch decode needs one K/V head per query head and whole sequences; the fused form takes grouped heads and sequence lengths"));
        }
        Ok(())
    }
}

/// Seed 000's threadgroup size for all three dispatches of the decode.
pub const SEED_000_THREADS: u32 = 256;

/// The fused kernel's default keys per key group and step: with f16 K/V,
/// D = 128 and 8 lanes per key, one key is 64 bytes of `K` and `V` words
/// per lane and step (2 KiB per SIMD group).
pub const DEFAULT_KEYS_PER_STEP: u32 = 1;

/// The most register slots per lane (loads of one `K` row) the default
/// lanes per key leave to each lane.
pub const DEFAULT_SLOTS_PER_LANE: u32 = 2;

/// The default lanes per key of the fused kernel for head dimension `d`
/// at load width `vec`: the fewest (a power of two up to 32) that leave
/// each lane at most [`DEFAULT_SLOTS_PER_LANE`] loads of a row — 8 for
/// f16 at D = 128 in 16-byte words, 16 for f32 in `float4`s, 32 (one key
/// per SIMD group) from D = 64 · vec up.
pub fn default_lanes_per_key(d: u32, vec: u8) -> u32 {
    let loads = (d / vec as u32).max(1);
    loads.div_ceil(DEFAULT_SLOTS_PER_LANE).next_power_of_two().min(SIMD_WIDTH)
}

/// The fused kernel's load width for a plan of `vec` (1 or 4): 16-byte
/// words of 8 elements for f16/bf16 with `vec` 4 and `d % 8 == 0`.
pub fn fused_vec_for(dtype: DType, d: u32, vec: u8) -> u8 {
    if vec == 4 && dtype != DType::F32 && d.is_multiple_of(8) {
        8
    } else {
        vec
    }
}

/// Steps the fused kernel stages ahead by asynchronous copies by default
/// (0: loads into registers): with the defaults above at D = 128 in f16,
/// 4 stages are 256 bytes per lane (96 threads fit 32 KiB) and keep up to
/// 4 steps' loads in flight per SIMD group without holding registers.
/// Measured on an H200 (f16, D = 128, 32 query heads over 8 K/V heads):
/// 4 stages ran 8192 keys in 25.8 µs, 32768 in 58.9 and batch 8 × 4096 in
/// 74.9, against 30.4, 77.4 and 65.9 with 3, 28.5, 65.3 and 76.2 with 2,
/// and 33.9, 72.8 and 75.3 loading into registers with prefetch
/// (BENCHMARKS.md, "Attention decode").
pub const DEFAULT_STAGES: u32 = 4;

/// The fewest threads per threadgroup the default staging keeps: where
/// [`DEFAULT_STAGES`] would not fit that many, the kernel loads into
/// registers.
pub const MIN_STAGED_THREADS: u32 = 64;

/// The default stages of `plan`'s fused kernel: [`DEFAULT_STAGES`] where
/// its loads are 4 bytes or more and that many stages fit
/// [`MIN_STAGED_THREADS`] threads in [`MAX_THREADGROUP_MEMORY_BYTES`] (the plan's
/// own threads when `keep_threads`: a threadgroup size the caller chose),
/// else 0.
pub fn default_stages(plan: &AttentionPlan, keep_threads: bool) -> u32 {
    let Ok(staged) = plan.with_stages(DEFAULT_STAGES) else { return 0 };
    let mut config = staged.fused_config();
    if !keep_threads {
        config.threads = config.threads.min(MIN_STAGED_THREADS);
    }
    if config.threadgroup_memory() <= MAX_THREADGROUP_MEMORY_BYTES {
        DEFAULT_STAGES
    } else {
        0
    }
}

/// Whether the fused kernel prefetches its next step by default.
pub const DEFAULT_PREFETCH: bool = true;

/// The most query heads a threadgroup of the fused kernel serves by
/// default. Measured on an H200 (f16, D = 128, 32 query heads over 8 K/V
/// heads, prefetch on): 2 heads per threadgroup ran batch 8 × 4096 keys in
/// 94.6 µs and one sequence of 32768 in 110.1 µs, against 126.9 and 120.4
/// with all 4 (whose registers allow two threadgroups per multiprocessor),
/// and 102.7 and 126.4 with one (BENCHMARKS.md, "Attention decode"). With
/// lanes that own keys, 4 heads (loading into registers: their states and
/// 3 stages do not fit 128 threads) ran 8192 keys in 40.8 µs against 30.4
/// with 2 heads and 3 stages.
pub const DEFAULT_MAX_HEADS_PER_THREADGROUP: u32 = 2;

/// The default query heads per threadgroup for `group` query heads per K/V
/// head: the largest divisor of `group` up to
/// [`DEFAULT_MAX_HEADS_PER_THREADGROUP`].
pub fn default_heads_per_threadgroup(group: u32) -> u32 {
    (1..=DEFAULT_MAX_HEADS_PER_THREADGROUP.min(group.max(1))).rev().find(|h| group.is_multiple_of(*h)).unwrap_or(1)
}

/// Plans the decode of `shape` with threadgroups of `threads` for every
/// dispatch (seed 000: [`SEED_000_THREADS`]); `vec` 4 needs `d % 4 == 0`.
/// The fused form starts whole-row (no split), on [`fused_vec_for`]'s
/// loads, [`default_lanes_per_key`], [`DEFAULT_KEYS_PER_STEP`],
/// [`default_heads_per_threadgroup`], [`DEFAULT_PREFETCH`], no sequence
/// lengths, no log-sum-exp, splits merged by [`combine`].
pub fn plan(dtype: DType, shape: &DecodeShape, vec: u8, threads: u32) -> Result<AttentionPlan, ShapeError> {
    let name = format!("attention_{dtype}{}", vec_suffix(vec));
    check_vec(&name, vec)?;
    let DecodeShape { batch, q_heads, kv_heads, s_len, d } = *shape;
    for (what, v) in [("batch", batch), ("q_heads", q_heads), ("kv_heads", kv_heads), ("s_len", s_len), ("d", d)] {
        nonzero(&name, what, v as usize)?;
    }
    if !q_heads.is_multiple_of(kv_heads) {
        return Err(ShapeError::new(name, format!("q_heads = {q_heads} is not a multiple of kv_heads = {kv_heads}")));
    }
    if vec == 4 && !d.is_multiple_of(4) {
        return Err(ShapeError::new(name, format!("vector loads need d % 4 == 0, d = {d}")));
    }
    let rows = to_u32(&name, "batch × q_heads", batch as usize * q_heads as usize)?;
    to_u32(&name, "batch × kv_heads × s_len × d", (batch as usize * kv_heads as usize).saturating_mul(s_len as usize).saturating_mul(d as usize))?;
    to_u32(&name, "batch × q_heads × s_len", (rows as usize).saturating_mul(s_len as usize))?;
    if d > 1024 {
        return Err(ShapeError::new(name, format!("head dimension {d} is above the library's 1024")));
    }
    let t = check_threads(&name, threads)?;
    let chunks = chunks_for(d, vec);
    let fused_vec = fused_vec_for(dtype, d, vec);
    let softmax = crate::library::softmax::plan_rows(
        "softmax",
        DType::F32,
        rows as usize,
        s_len as usize,
        if s_len.is_multiple_of(4) { 4 } else { 1 },
        crate::library::softmax::RowOptions::threads(t),
    )?;
    Ok(AttentionPlan {
        dtype,
        vec,
        chunks,
        shape: *shape,
        scores: Dispatch::threadgroups([s_len.div_ceil(t), rows, 1], t),
        softmax,
        weighted_sum: Dispatch::threadgroups([d.div_ceil(SIMD_WIDTH), rows, 1], t),
        fused: Dispatch::threadgroups([1, q_heads / default_heads_per_threadgroup(q_heads / kv_heads), batch], t),
        fused_vec,
        lanes_per_key: default_lanes_per_key(d, fused_vec),
        keys_per_step: DEFAULT_KEYS_PER_STEP,
        heads_per_threadgroup: default_heads_per_threadgroup(q_heads / kv_heads),
        prefetch: DEFAULT_PREFETCH,
        stages: 0,
        ragged: false,
        lse: false,
        splits: 1,
        split_len: s_len,
        split_sum: SplitSum::Reduction,
        combine: Dispatch::threadgroups([rows, d.div_ceil(SIMD_WIDTH), 1], COMBINE_THREADS),
        matrices: None,
    })
}

/// Threadgroups per multiprocessor in one wave of the fused decode's
/// split grid: the staged kernel's 96-thread threadgroups (f16, D = 128)
/// run four at a time on an H200 multiprocessor, so its 132 take 528.
pub const SPLIT_THREADGROUPS_PER_COMPUTE_UNIT: u32 = 4;

/// The most threadgroups of the matrix form [`threadgroups_per_compute_unit`]
/// counts on one multiprocessor (an H200's registers hold four of 128
/// threads).
pub const MAX_MATRIX_THREADGROUPS_PER_COMPUTE_UNIT: u32 = 4;

/// Threadgroups of `plan`'s fused kernel that run at once on a
/// multiprocessor offering `memory` bytes of threadgroup memory: the
/// lane form's [`SPLIT_THREADGROUPS_PER_COMPUTE_UNIT`]; the matrix form's as
/// many as its threadgroup memory allows, 1 to
/// [`MAX_MATRIX_THREADGROUPS_PER_COMPUTE_UNIT`] (one of the default 164 KiB
/// at D = 128 in f16 in an H200's 227 KiB).
pub fn threadgroups_per_compute_unit(plan: &AttentionPlan, memory: u64) -> u32 {
    match plan.matrices {
        None => SPLIT_THREADGROUPS_PER_COMPUTE_UNIT,
        Some(_) => (memory / plan.fused_threadgroup_memory().max(1)).clamp(1, MAX_MATRIX_THREADGROUPS_PER_COMPUTE_UNIT as u64) as u32,
    }
}

/// The matrix form's default threadgroup: 8 SIMD groups. Measured on an
/// H200 (f16, D = 128, 2 stages; 32 heads × 2048 keys, 32 query heads
/// over 8 K/V heads at 8192 keys and 8 × 4096): 8 SIMD groups (one
/// threadgroup per multiprocessor) ran 13.2, 17.9 and 41.4 µs, 4 (two per
/// multiprocessor) 13.4, 21.0 and 43.4; 4 with 3 stages 13.8, 19.4 and
/// 42.5, 3 and 2 with 3 stages 15.1, 24.1, 46.3 and 15.2, 29.7, 48.7
/// (BENCHMARKS.md, "Attention decode"): fewer, fatter threadgroups split
/// the keys fewer ways and spend less in their fixed start and merge.
pub const DEFAULT_MATRIX_THREADS: u32 = 256;

/// The matrix form's default stages per SIMD group (fewer where the
/// device's threadgroup memory does not hold them): 2 blocks of 16 keys
/// of `K` and `V` ahead, 17 KiB per SIMD group at D = 128 in f16 (164 KiB
/// in all with [`DEFAULT_MATRIX_THREADS`]). Measured on an H200 (the
/// shapes above and one sequence of 32768 keys, 8 SIMD groups): 2 stages
/// ran 13.0, 17.8, 42.1 and 41.8 µs, 3 (226 KiB) 14.0, 18.4, 42.0 and
/// 42.0.
pub const DEFAULT_MATRIX_STAGES: u32 = 2;

/// The matrix form's default keys per SIMD group and step. Measured on an
/// H200 (f16, D = 128; µs for 32 heads × 2048 keys, 32 query heads over 8
/// K/V heads at 8192 and 32768 keys, 8 × 4096 and 512 keys): 16 keys with 8
/// SIMD groups and 2 stages ran 12.9, 17.8, 41.5, 41.0 and 10.2; 32 keys
/// (whose stages of 8 SIMD groups do not fit) with 4 SIMD groups 13.3,
/// 19.0, 42.7, 42.2 and 11.5, with 4 and 3 stages 14.4, 19.3, 43.3, 42.7
/// and 11.7, with 6 14.4, 20.1, 44.9, 44.2 and 12.1: a block of 32 takes
/// fewer instructions per key but leaves fewer SIMD groups to hide the
/// copies' latency.
pub const DEFAULT_MATRIX_BLOCK: u32 = 16;

/// The default query heads per threadgroup of the matrix form: the
/// largest divisor of `group` up to [`QUERY_COLUMNS`] (each K/V row read
/// once when the group has at most 8 query heads).
pub fn default_matrix_heads(group: u32) -> u32 {
    (1..=QUERY_COLUMNS.min(group.max(1))).rev().find(|h| group.is_multiple_of(*h)).unwrap_or(1)
}

/// The fewest loop steps each SIMD group of a split takes where a second
/// dispatch merges the splits ([`splits_for`]).
pub const MIN_STEPS_PER_COMBINED_SPLIT: u32 = 4;

/// The fewest SIMD-group steps of keys (blocks of 16 or 32) in a split of
/// the matrix form where the kernel merges its splits ([`splits_for`]): at
/// 512 keys, 32 query heads over 8 K/V heads, f16, D = 128 (8 head
/// blocks) that is 8 splits of 64 keys, which ran 8.19 µs on an H200
/// against 8.58 with 16 splits of 32 keys (two SIMD groups of 8 with keys)
/// and 8.48 with 4, in one call (8.51 against 8.8 in a call before the
/// kernel stopped copying past its keys; BENCHMARKS.md, "Attention
/// decode"): twice the splits add more to the last threadgroup's merge
/// than their shorter loops save.
pub const MIN_MATRIX_STEPS_PER_MERGED_SPLIT: u32 = 4;

/// How many ways the fused decode splits each K/V head's keys on a GPU of
/// `compute_units` multiprocessors: the most that keep the grid within one
/// wave of `per_unit` threadgroups per multiprocessor
/// ([`threadgroups_per_compute_unit`]) (at least 1), each split holding at
/// least one step of one SIMD group's keys (the matrix form:
/// [`MIN_MATRIX_STEPS_PER_MERGED_SPLIT`] steps) where the kernel merges its
/// splits (`merged`), else [`MIN_STEPS_PER_COMBINED_SPLIT`] steps of every
/// SIMD group (a short sequence stays whole rather than pay for the
/// combine's dispatch). A grid just past a whole wave leaves a tail that
/// costs more than the shorter splits gain: on an H200 (f16, D = 128, 4
/// stages) 32 heads × 2048 keys ran in 13.6 µs with 16 splits (512
/// threadgroups) against 15.3 with 17 (544), and 8 sequences × 4096 keys
/// in 64.2 µs with 8 splits (1024 threadgroups, two waves) against 76.8
/// with 5 (640) (BENCHMARKS.md, "Attention decode"). Within the wave short
/// contexts take more, shorter splits rather than leaving multiprocessors
/// idle: 32 query heads over 8 K/V heads at 512 keys are 8 splits of 64
/// keys (64 threadgroups; see [`MIN_MATRIX_STEPS_PER_MERGED_SPLIT`]).
pub fn splits_for(plan: &AttentionPlan, compute_units: u32, per_unit: u32, merged: bool) -> u32 {
    let wave = per_unit.max(1) * compute_units.max(1);
    let threadgroups = plan.shape.q_heads / plan.heads_per_threadgroup * plan.shape.batch;
    let by_occupancy = (wave / threadgroups.max(1)).max(1);
    let step = plan.fused_config().keys_per_simdgroup_step().max(1);
    let least = match (merged, plan.matrices) {
        (true, Some(_)) => step * MIN_MATRIX_STEPS_PER_MERGED_SPLIT,
        (true, None) => step,
        (false, _) => plan.fused.threads[0].div_ceil(SIMD_WIDTH).max(1) * step * MIN_STEPS_PER_COMBINED_SPLIT,
    };
    let by_keys = (plan.shape.s_len / least).max(1);
    by_occupancy.min(by_keys)
}
