//! Attention decode (one query token): `out[h] = softmax(q[h]·K[h]ᵀ · scale) · V[h]`
//! for `H` heads, `S` keys and head dimension `D`; `q` is `[H, D]`, `K` and
//! `V` are `[H, S, D]`, all of one element type; `scale` is by value
//! (usually `1/√D`); scores and weights are f32; `out` is `[H, D]` in the
//! element type.
//!
//! **Three dispatches, seed 000's geometry** (H = 32, S = 2048, D = 128:
//! scores `(8, 32)`, softmax `(32, 1)`, weighted sum `(4, 32)` threadgroups
//! of 256):
//! 1. [`scores`], grid `(ceil(S/256), H)`: each threadgroup scores 256 keys
//!    of one head; each SIMD group takes 32 of them, one key at a time: the
//!    32 lanes read the key's `D` elements together (one `float4` each when
//!    D = 128 — 512 contiguous bytes), multiply by the `q` they keep in
//!    registers and `simd_sum`; lane `j` keeps key `j`'s score and the SIMD
//!    group stores its 32 scores in one coalesced store.
//! 2. [`super::softmax::softmax`] over the `[H, S]` scores, grid `(H, 1)`,
//!    in place.
//! 3. [`weighted_sum`], grid `(ceil(D/32), H)`: each threadgroup owns 32
//!    output dimensions of one head; lane `l` owns dimension `l`, the SIMD
//!    groups split the keys, and the partial sums meet in threadgroup
//!    memory (one barrier).
//!
//! **Fused** ([`fused`], grid `(H, 1)`, one threadgroup per head): SIMD
//! groups split the keys; each keeps a running maximum, a rescaled sum and
//! a rescaled `D`-vector accumulator (online softmax), with `q` and the
//! accumulator in registers, so scores never reach memory; the SIMD groups'
//! states merge in threadgroup memory after one barrier.
//!
//! `D` is fixed when the kernel is built (`chunks = ceil(D / vec / 32)`
//! register slots per lane, like a kernel templated on the head dimension);
//! the vector forms need `D % 4 == 0`.

use super::*;
use enigma_ir::{Access, Kernel, MemFlags, Scalar, Type};

/// Register slots per lane for a head dimension `d` at vector width `vec`.
pub fn chunks_for(d: u32, vec: u8) -> u32 {
    (d / vec as u32).div_ceil(SIMD_WIDTH).max(1)
}

/// Lane `lane`'s column of slot `c` (in vectors), clamped into the row so
/// loads stay in bounds; `valid` says whether it is a real column.
fn slot(k: &mut KernelBuilder, lane: Ex, c: u32, dv: Ex) -> (Ex, Ex) {
    let col = k.let_(&format!("col{c}"), lane + SIMD_WIDTH * c);
    let valid = k.let_(&format!("valid{c}"), col.lt(dv));
    let clamped = k.let_(&format!("ccol{c}"), min(col, dv - 1u32));
    (clamped, valid)
}

/// Loads `q[head]` into `chunks` registers per lane (0 past the row's end),
/// multiplied by `factor`.
fn load_q(k: &mut KernelBuilder, q: Mem, head: Ex, slots: &[(Ex, Ex)], dv: Ex, vec: u8, factor: Ex) -> Vec<Ex> {
    slots
        .iter()
        .enumerate()
        .map(|(c, &(col, valid))| {
            let v = load_f32(q, head * dv + col) * factor;
            k.let_(&format!("qv{c}"), select(splat(0.0, vec), v, valid))
        })
        .collect()
}

/// The dot product of this lane's slots of `q` with row `row_base` of `K`.
fn lane_dot(k_mem: Mem, row_base: Ex, slots: &[(Ex, Ex)], qs: &[Ex]) -> Ex {
    let mut dot: Option<Ex> = None;
    for (&(col, _), &qc) in slots.iter().zip(qs) {
        let term = hsum(qc * load_f32(k_mem, row_base + col));
        dot = Some(dot.map_or(term, |d| d + term));
    }
    dot.expect("at least one slot")
}

/// `attention_scores_{dtype}[_vec4]_c{chunks}`: `scores[h, s] = scale · q[h]·K[h, s]`.
/// Parameters: `q, k, scores, s_len, d, scale` (`q4, k4` for vectors).
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn scores(dtype: DType, vec: u8, chunks: u32) -> Kernel {
    assert_vec(vec);
    let mut kb = KernelBuilder::new(format!("attention_scores_{}{}_c{}", dtype, vec_suffix(vec), chunks));
    let k = &mut kb;
    let sfx = if vec == 4 { "4" } else { "" };
    let q = k.buffer(&format!("q{sfx}"), dtype.ty(vec), Access::Read);
    let keys = k.buffer(&format!("k{sfx}"), dtype.ty(vec), Access::Read);
    let scores = k.buffer("scores", Type::F32, Access::ReadWrite);
    let s_len = k.value("s_len", Type::U32);
    let d = k.value("d", Type::U32);
    let scale = k.value("scale", Type::F32);
    let head = k.let_("head", threadgroup_position_in_grid().y());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let dv = k.let_("dv", if vec == 4 { d / 4u32 } else { d });
    let slots: Vec<(Ex, Ex)> = (0..chunks).map(|c| slot(k, lane, c, dv)).collect();
    let qs = load_q(k, q, head, &slots, dv, vec, scale);
    let key0 = k.let_("key0", threadgroup_position_in_grid().x() * threads_per_threadgroup().x() + sg * SIMD_WIDTH);
    let mine = k.var("mine", f(0.0));
    k.for_range("j", 0u32, SIMD_WIDTH, 1u32, |k, j| {
        let key = k.let_("key", key0 + j);
        // The same key for the whole SIMD group: uniform there.
        k.if_(key.lt(s_len), |k| {
            let row_base = k.let_("row_base", (head * s_len + key) * dv);
            let score = k.let_("score", simd_sum(lane_dot(keys, row_base, &slots, &qs)));
            k.if_(lane.eq(j), |k| k.assign(mine, score));
        });
    });
    let my_key = k.let_("my_key", key0 + lane);
    k.if_(my_key.lt(s_len), |k| k.store(scores.at(head * s_len + my_key), mine.get()));
    finish(kb)
}

/// `attention_weighted_sum_{dtype}`: `out[h, d] = Σ_s w[h, s] · V[h, s, d]`.
/// Parameters: `w (f32), v, out, s_len, d`.
pub fn weighted_sum(dtype: DType) -> Kernel {
    let mut kb = KernelBuilder::new(format!("attention_weighted_sum_{dtype}"));
    let k = &mut kb;
    let w = k.buffer("w", Type::F32, Access::Read);
    let v = k.buffer("v", dtype.ty(1), Access::Read);
    let out = k.buffer("out", dtype.ty(1), Access::ReadWrite);
    let s_len = k.value("s_len", Type::U32);
    let d = k.value("d", Type::U32);
    let partial = k.threadgroup_array("partial", Type::F32, SIMD_WIDTH * SIMD_WIDTH);
    let head = k.let_("head", threadgroup_position_in_grid().y());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let nsg = k.let_("nsg", simdgroups_per_threadgroup());
    let dim = k.let_("dim", threadgroup_position_in_grid().x() * SIMD_WIDTH + lane);
    let col = k.let_("col", min(dim, d - 1u32));
    let acc = k.var("acc", f(0.0));
    k.for_range("s", sg, s_len, nsg, |k, s| {
        let row = k.let_("row", head * s_len + s);
        k.assign(acc, fma(w.get(row), load_f32(v, row * d + col), acc.get()));
    });
    k.store(partial.at(sg * SIMD_WIDTH + lane), acc.get());
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(sg.eq(0u32), |k| {
        let total = k.var("total", f(0.0));
        k.for_range("g", 0u32, nsg, 1u32, |k, g| k.assign(total, total + partial.get(g * SIMD_WIDTH + lane)));
        k.if_(dim.lt(d), |k| store_f32(k, out, head * d + dim, total.get()));
    });
    finish(kb)
}

/// `attention_fused_{dtype}[_vec4]_c{chunks}_t{threads}`: the whole decode
/// step for one head per threadgroup of `threads` threads (the threadgroup
/// arrays are sized for it). Parameters: `q, k, v, out, s_len, d, scale`
/// (`q4, k4, v4` for vectors).
///
/// With `split` (`attention_fused_split_…`, grid `(splits, H)`), each
/// threadgroup takes the `split_len` keys of its split (`x`) of one head
/// (`y`) and writes its unnormalised state instead of `out`: `partial_ml[2i]`
/// the log2-domain shift its sums are relative to, `partial_ml[2i + 1]` its
/// sum of weights, `partial_acc[i·d ..]` its weighted sum of `V` rows, for
/// `i = head · splits + split`; [`combine`] merges them. Parameters: `q, k,
/// v, partial_ml, partial_acc, s_len, d, scale, split_len`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn fused(dtype: DType, vec: u8, chunks: u32, threads: u32, split: bool) -> Kernel {
    assert_vec(vec);
    let form = if split { "fused_split" } else { "fused" };
    let mut kb = KernelBuilder::new(format!("attention_{form}_{}{}_c{}_t{}", dtype, vec_suffix(vec), chunks, threads));
    let k = &mut kb;
    let sfx = if vec == 4 { "4" } else { "" };
    let q = k.buffer(&format!("q{sfx}"), dtype.ty(vec), Access::Read);
    let keys = k.buffer(&format!("k{sfx}"), dtype.ty(vec), Access::Read);
    let values = k.buffer(&format!("v{sfx}"), dtype.ty(vec), Access::Read);
    let (out, partials) = if split {
        (None, Some((k.buffer("partial_ml", Type::F32, Access::ReadWrite), k.buffer("partial_acc", Type::F32, Access::ReadWrite))))
    } else {
        (Some(k.buffer("out", dtype.ty(1), Access::ReadWrite)), None)
    };
    let s_len = k.value("s_len", Type::U32);
    let d = k.value("d", Type::U32);
    let scale = k.value("scale", Type::F32);
    let split_len = if split { Some(k.value("split_len", Type::U32)) } else { None };
    let max_groups = threads.div_ceil(SIMD_WIDTH);
    let row_len = chunks * SIMD_WIDTH * vec as u32;
    let tg_max = k.threadgroup_array("group_max", Type::F32, max_groups);
    let tg_sum = k.threadgroup_array("group_sum", Type::F32, max_groups);
    let tg_acc = k.threadgroup_array("group_acc", Type::F32, max_groups * row_len);
    let head = k.let_("head", if split { threadgroup_position_in_grid().y() } else { threadgroup_position_in_grid().x() });
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let nsg = k.let_("nsg", simdgroups_per_threadgroup());
    let dv = k.let_("dv", if vec == 4 { d / 4u32 } else { d });
    // The keys of this threadgroup: all of them, or its split's.
    let (first_key, end_key) = match split_len {
        Some(len) => {
            let first = k.let_("first_key", threadgroup_position_in_grid().x() * len);
            (first, k.let_("end_key", min(s_len, first + len)))
        }
        None => (k.let_("first_key", 0u32), s_len),
    };
    let slots: Vec<(Ex, Ex)> = (0..chunks).map(|c| slot(k, lane, c, dv)).collect();
    // Scores in the log2 domain: q pre-multiplied by scale · log2(e).
    let qscale = k.let_("qscale", scale * LOG2E);
    let qs = load_q(k, q, head, &slots, dv, vec, qscale);
    let m = k.var("m", neg_inf());
    let l = k.var("l", f(0.0));
    let accs: Vec<Var> = (0..chunks).map(|c| k.var(&format!("acc{c}"), splat(0.0, vec))).collect();
    k.for_range("s", first_key + sg, end_key, nsg, |k, s| {
        let row_base = k.let_("row_base", (head * s_len + s) * dv);
        let t = k.let_("t", simd_sum(lane_dot(keys, row_base, &slots, &qs)));
        let m_new = k.let_("m_new", max(m.get(), t));
        let shift = k.let_("shift", finite_or_zero(m_new));
        let alpha = k.let_("alpha", exp2(m.get() - shift));
        let p = k.let_("p", exp2(t - shift));
        k.assign(l, fma(l.get(), alpha, p));
        let alpha_lanes = if vec == 1 { alpha } else { vector(Type::vector(Scalar::F32, vec), &[alpha]) };
        for (&(col, _), acc) in slots.iter().zip(&accs) {
            k.assign(*acc, fma(acc.get(), alpha_lanes, p * load_f32(values, row_base + col)));
        }
        k.assign(m, m_new);
    });
    k.if_(lane.eq(0u32), |k| {
        k.store(tg_max.at(sg), m.get());
        k.store(tg_sum.at(sg), l.get());
    });
    for (c, ((_, valid), acc)) in slots.iter().zip(&accs).enumerate() {
        k.if_(*valid, |k| {
            let at = sg * row_len + (lane + SIMD_WIDTH * c as u32) * vec as u32;
            if vec == 1 {
                k.store(tg_acc.at(at), acc.get());
            } else {
                for comp in 0..vec {
                    k.store(tg_acc.at(at + comp as u32), acc.get().component(comp));
                }
            }
        });
    }
    k.threadgroup_barrier(MemFlags::Threadgroup);
    // Merge the SIMD groups' states; thread `tid` finishes dimensions tid, tid + T, ….
    let big_m = k.var("big_m", neg_inf());
    k.for_range("g", 0u32, nsg, 1u32, |k, g| k.assign(big_m, max(big_m.get(), tg_max.get(g))));
    let shift = k.let_("merge_shift", finite_or_zero(big_m.get()));
    let big_l = k.var("big_l", f(0.0));
    k.for_range("g2", 0u32, nsg, 1u32, |k, g| k.assign(big_l, fma(tg_sum.get(g), exp2(tg_max.get(g) - shift), big_l.get())));
    let merged = |k: &mut KernelBuilder, dim: Ex| -> Var {
        let o = k.var("o", f(0.0));
        k.for_range("g3", 0u32, nsg, 1u32, |k, g| {
            k.assign(o, fma(tg_acc.get(g * row_len + dim), exp2(tg_max.get(g) - shift), o.get()));
        });
        o
    };
    match (out, partials) {
        (Some(out), _) => {
            let inv = k.let_("inv", 1.0f32 / big_l.get());
            k.for_range("dim", tid, d, threads_per_threadgroup().x(), |k, dim| {
                let o = merged(k, dim);
                store_f32(k, out, head * d + dim, o.get() * inv);
            });
        }
        (None, Some((partial_ml, partial_acc))) => {
            let part = k.let_("part", head * threadgroups_per_grid().x() + threadgroup_position_in_grid().x());
            k.if_(tid.eq(0u32), |k| {
                k.store(partial_ml.at(part * 2u32), shift);
                k.store(partial_ml.at(part * 2u32 + 1u32), big_l.get());
            });
            k.for_range("dim", tid, d, threads_per_threadgroup().x(), |k, dim| {
                let o = merged(k, dim);
                k.store(partial_acc.at(part * d + dim), o.get());
            });
        }
        (None, None) => unreachable!("the fused kernel writes its output or its partials"),
    }
    finish(kb)
}

/// `attention_combine_{dtype}`: merges the partial states of
/// [`fused`]'s split form into `out[h, :]`, one threadgroup per head
/// (grid `(H, 1)`): with `M` the largest shift among the splits that saw
/// keys, `out = Σ acc_i · 2^(m_i − M) / Σ l_i · 2^(m_i − M)`.
/// Parameters: `partial_ml, partial_acc, out, d, splits`.
pub fn combine(dtype: DType) -> Kernel {
    let mut kb = KernelBuilder::new(format!("attention_combine_{dtype}"));
    let k = &mut kb;
    let partial_ml = k.buffer("partial_ml", Type::F32, Access::Read);
    let partial_acc = k.buffer("partial_acc", Type::F32, Access::Read);
    let out = k.buffer("out", dtype.ty(1), Access::ReadWrite);
    let d = k.value("d", Type::U32);
    let splits = k.value("splits", Type::U32);
    let head = k.let_("head", threadgroup_position_in_grid().x());
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let base = k.let_("base", head * splits);
    let big_m = k.var("big_m", neg_inf());
    k.for_range("i", 0u32, splits, 1u32, |k, i| {
        let seen = k.let_("seen", partial_ml.get((base + i) * 2u32 + 1u32).gt(0.0f32));
        k.if_(seen, |k| k.assign(big_m, max(big_m.get(), partial_ml.get((base + i) * 2u32))));
    });
    let big_l = k.var("big_l", f(0.0));
    k.for_range("i2", 0u32, splits, 1u32, |k, i| {
        let l = k.let_("l", partial_ml.get((base + i) * 2u32 + 1u32));
        k.if_(l.gt(0.0f32), |k| k.assign(big_l, fma(l, exp2(partial_ml.get((base + i) * 2u32) - big_m.get()), big_l.get())));
    });
    let inv = k.let_("inv", 1.0f32 / big_l.get());
    k.for_range("dim", tid, d, threads_per_threadgroup().x(), |k, dim| {
        let o = k.var("o", f(0.0));
        k.for_range("i3", 0u32, splits, 1u32, |k, i| {
            let l = k.let_("li", partial_ml.get((base + i) * 2u32 + 1u32));
            k.if_(l.gt(0.0f32), |k| {
                let w = exp2(partial_ml.get((base + i) * 2u32) - big_m.get());
                k.assign(o, fma(partial_acc.get((base + i) * d + dim), w, o.get()));
            });
        });
        store_f32(k, out, head * d + dim, o.get() * inv);
    });
    finish(kb)
}

/// The largest threadgroup (a multiple of 32, at most 1024) whose fused
/// kernel keeps its per-SIMD-group state for head dimension `d` within
/// [`MAX_THREADGROUP_MEMORY`]. The accumulators are whole register slots
/// (32 elements, or 128 with `float4`): 1024 threads fit up to D = 224
/// (128 with `float4`), 256 up to D = 992 (896); D = 1024 needs
/// `8 · (2 + 1024) · 4 = 32832` bytes at 256 threads, so 224.
pub fn fused_threads_that_fit(d: u32, vec: u8) -> u32 {
    let per_group = 4 * (2 + (chunks_for(d, vec) * SIMD_WIDTH * vec as u32) as u64);
    let groups = (MAX_THREADGROUP_MEMORY / per_group).clamp(1, (MAX_THREADS / SIMD_WIDTH) as u64);
    groups as u32 * SIMD_WIDTH
}

/// The three-dispatch decode, or the fused one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionPlan {
    pub dtype: DType,
    pub vec: u8,
    pub chunks: u32,
    pub heads: u32,
    pub s_len: u32,
    pub d: u32,
    /// Scores: `(ceil(S/T), H)` threadgroups.
    pub scores: Dispatch,
    /// Softmax over the `[H, S]` scores: `(H, 1)`.
    pub softmax: super::softmax::RowPlan,
    /// Weighted sum: `(ceil(D/32), H)`.
    pub weighted_sum: Dispatch,
    /// Fused: `(H, 1)`, or `(splits, H)` when the keys are split.
    pub fused: Dispatch,
    /// Key splits of the fused form (1: one threadgroup per head).
    pub splits: u32,
    /// Keys per split.
    pub split_len: u32,
    /// Merging the splits: `(H, 1)` (used when `splits > 1`).
    pub combine: Dispatch,
}

impl AttentionPlan {
    pub fn scores_kernel(&self) -> Kernel {
        scores(self.dtype, self.vec, self.chunks)
    }
    pub fn softmax_kernel(&self) -> Kernel {
        let c = self.softmax.config;
        super::softmax::softmax(c.dtype, c.vec, c.items)
    }
    pub fn weighted_sum_kernel(&self) -> Kernel {
        weighted_sum(self.dtype)
    }
    pub fn fused_kernel(&self) -> Kernel {
        fused(self.dtype, self.vec, self.chunks, self.fused.threads[0], self.splits > 1)
    }
    pub fn combine_kernel(&self) -> Kernel {
        combine(self.dtype)
    }

    /// This plan with the fused form's keys split `splits` ways (at most
    /// one split per key): `(splits, H)` threadgroups, then a combine.
    pub fn with_splits(mut self, splits: u32) -> AttentionPlan {
        let splits = splits.clamp(1, self.s_len);
        self.split_len = self.s_len.div_ceil(splits);
        // Splits of that length; trailing ones would be empty.
        self.splits = self.s_len.div_ceil(self.split_len);
        let t = self.fused.threads[0];
        self.fused = if self.splits > 1 {
            Dispatch::threadgroups([self.splits, self.heads, 1], t)
        } else {
            Dispatch::threadgroups([self.heads, 1, 1], t)
        };
        self
    }

    /// Threadgroup memory of the fused kernel: per SIMD group, its maximum,
    /// its sum and its `D`-vector accumulator (padded to whole slots).
    pub fn fused_threadgroup_memory(&self) -> u64 {
        let groups = self.fused.threads[0].div_ceil(SIMD_WIDTH) as u64;
        4 * groups * (2 + (self.chunks * SIMD_WIDTH * self.vec as u32) as u64)
    }

    /// Checks that the fused kernel fits the 32 KiB of threadgroup memory
    /// (the three-dispatch form has no such limit).
    pub fn check_fused(&self) -> Result<(), ShapeError> {
        let bytes = self.fused_threadgroup_memory();
        if bytes > MAX_THREADGROUP_MEMORY {
            let name = format!("attention_fused_{}{}", self.dtype, vec_suffix(self.vec));
            let t = self.fused.threads[0];
            return Err(ShapeError::new(name, format!("needs {bytes} bytes of threadgroup memory for {t} threads and d = {} (limit {MAX_THREADGROUP_MEMORY})", self.d)));
        }
        Ok(())
    }
}

/// Seed 000's threadgroup size for all three dispatches of the decode.
pub const SEED_000_THREADS: u32 = 256;

/// Plans the decode of `heads` heads over `s_len` keys of dimension `d`
/// with threadgroups of `threads` for every dispatch (seed 000:
/// [`SEED_000_THREADS`]); `vec` 4 needs `d % 4 == 0`.
pub fn plan(dtype: DType, heads: usize, s_len: usize, d: usize, vec: u8, threads: u32) -> Result<AttentionPlan, ShapeError> {
    let name = format!("attention_{dtype}{}", vec_suffix(vec));
    check_vec(&name, vec)?;
    nonzero(&name, "heads", heads)?;
    nonzero(&name, "s_len", s_len)?;
    nonzero(&name, "d", d)?;
    if vec == 4 && !d.is_multiple_of(4) {
        return Err(ShapeError::new(name, format!("vector loads need d % 4 == 0, d = {d}")));
    }
    let h = to_u32(&name, "heads", heads)?;
    let s = to_u32(&name, "s_len", s_len)?;
    let d32 = to_u32(&name, "d", d)?;
    to_u32(&name, "heads × s_len × d", heads.saturating_mul(s_len).saturating_mul(d))?;
    if d32 > 1024 {
        return Err(ShapeError::new(name, format!("head dimension {d} is above the library's 1024")));
    }
    let t = check_threads(&name, threads)?;
    let chunks = chunks_for(d32, vec);
    let softmax = super::softmax::plan_rows(
        "softmax",
        DType::F32,
        heads,
        s_len,
        if s_len.is_multiple_of(4) { 4 } else { 1 },
        super::softmax::RowOptions::threads(t),
    )?;
    Ok(AttentionPlan {
        dtype,
        vec,
        chunks,
        heads: h,
        s_len: s,
        d: d32,
        scores: Dispatch::threadgroups([s.div_ceil(t), h, 1], t),
        softmax,
        weighted_sum: Dispatch::threadgroups([d32.div_ceil(SIMD_WIDTH), h, 1], t),
        fused: Dispatch::threadgroups([h, 1, 1], t),
        splits: 1,
        split_len: s,
        combine: Dispatch::threadgroups([h, 1, 1], d32.next_multiple_of(SIMD_WIDTH).min(256)),
    })
}

/// The f64 reference: `out[h, :]` for every head.
pub fn reference(q: &[f32], k: &[f32], v: &[f32], heads: usize, s_len: usize, d: usize, scale: f32) -> Vec<f64> {
    let mut out = vec![0.0; heads * d];
    for h in 0..heads {
        let qh = &q[h * d..(h + 1) * d];
        let scores: Vec<f64> = (0..s_len)
            .map(|s| {
                let kr = &k[(h * s_len + s) * d..(h * s_len + s + 1) * d];
                qh.iter().zip(kr).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * scale as f64
            })
            .collect();
        let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
        let total: f64 = e.iter().sum();
        for (s, &p) in e.iter().enumerate() {
            let vr = &v[(h * s_len + s) * d..(h * s_len + s + 1) * d];
            for (o, &vv) in out[h * d..(h + 1) * d].iter_mut().zip(vr) {
                *o += p / total * vv as f64;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_000_geometry() {
        let p = plan(DType::F32, 32, 2048, 128, 4, SEED_000_THREADS).unwrap();
        assert_eq!(p.scores, Dispatch::threadgroups([8, 32, 1], 256));
        assert_eq!(p.softmax.dispatch, Dispatch::threadgroups([32, 1, 1], 256));
        assert_eq!(p.weighted_sum, Dispatch::threadgroups([4, 32, 1], 256));
        assert_eq!(p.fused, Dispatch::threadgroups([32, 1, 1], 256));
        assert_eq!(p.chunks, 1);
        assert_eq!(chunks_for(128, 1), 4);
        assert_eq!(chunks_for(129, 1), 5);
        assert!(plan(DType::F32, 1, 1, 130, 4, 256).is_err());
        // 32 SIMD groups × 1024 accumulators of 4 bytes: over 32 KiB for
        // the fused kernel only.
        let p = plan(DType::F32, 1, 1, 1024, 1, 1024).unwrap();
        assert_eq!(p.fused_threadgroup_memory(), 4 * 32 * (2 + 1024));
        assert_eq!(
            p.check_fused().unwrap_err().to_string(),
            "attention_fused_f32: needs 131328 bytes of threadgroup memory for 1024 threads and d = 1024 (limit 32768)"
        );
        assert_eq!(plan(DType::F32, 1, 1, 128, 4, 256).unwrap().fused_threadgroup_memory(), 4 * 8 * 130);
        assert_eq!(fused_threads_that_fit(1024, 4), 224);
        assert_eq!(fused_threads_that_fit(1024, 1), 224);
        assert_eq!((fused_threads_that_fit(992, 1), fused_threads_that_fit(993, 1)), (256, 224));
        assert_eq!((fused_threads_that_fit(896, 4), fused_threads_that_fit(900, 4)), (288, 224));
        assert_eq!((fused_threads_that_fit(224, 1), fused_threads_that_fit(225, 1)), (1024, 992));
        assert_eq!(fused_threads_that_fit(128, 4), 1024);
        for (d, vec) in [(1024, 4), (1000, 1), (128, 4), (33, 1)] {
            let t = fused_threads_that_fit(d, vec);
            assert!(plan(DType::F32, 1, 1, d as usize, vec, t).unwrap().check_fused().is_ok());
            if t < 1024 {
                assert!(plan(DType::F32, 1, 1, d as usize, vec, t + 32).unwrap().check_fused().is_err());
            }
        }
    }
}
