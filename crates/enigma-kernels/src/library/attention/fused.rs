//! The fused decode kernel ([`fused`]): its configuration, its name, its
//! threadgroup memory and the threads that fit it.

use super::args::FusedDecodeArgs;
use super::matrices::{fused_matrices, MatrixDecode};
use super::shape::chunks_for;
use crate::library::*;
use enigma_ir::{Access, AtomicOp, Kernel, MemFlags, Scalar, Type};

/// What one fused decode kernel is built for (its name says all of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FusedConfig {
    pub dtype: DType,
    /// Elements per load: 1, 4 (`float4`-style), or 8 (16-byte words of
    /// eight f16/bf16 values, bound as `uint4`: `q8, k8, v8`).
    pub vec: u8,
    /// Register slots per lane ([`fused_chunks`]).
    pub chunks: u32,
    /// Threads per threadgroup (the threadgroup arrays are sized for it).
    pub threads: u32,
    /// Query heads per threadgroup, all reading one K/V head (a divisor of
    /// the shape's query heads per K/V head; all of them: each key and
    /// value row is read once).
    pub heads: u32,
    /// Lanes that share one key (a power of two up to 32): lane `l` holds
    /// the slots `l % lanes + lanes · i` of the key's `D / vec` loads, and
    /// the key's dot product finishes with `log2(lanes)` shuffles. A SIMD
    /// group scores `32 / lanes` keys at once.
    pub lanes: u32,
    /// Keys each group of `lanes` lanes takes per loop step: their `K` and
    /// `V` loads are issued together, before any of them is used.
    pub keys_per_step: u32,
    /// Writes partial states for [`combine`](super::combine()) instead of `out`.
    pub split: bool,
    /// Loads the next step's keys and values into registers while this
    /// step's are used (two steps' loads in flight per SIMD group; not
    /// with `stages`).
    pub prefetch: bool,
    /// With `stages ≥ 1`, each lane copies its own words of the next
    /// `stages` steps' `K` and `V` rows into its part of threadgroup memory
    /// by asynchronous copies (no registers held, no barrier: a lane reads
    /// only what it copied) and reads a step's words back when its copies
    /// are complete; 0 loads straight into registers. Needs loads of 4, 8
    /// or 16 bytes.
    pub stages: u32,
    /// Reads each sequence's key count from `seq_lens` (clamped to
    /// `s_len`) instead of using `s_len` for all.
    pub ragged: bool,
    /// Writes each row's natural log-sum-exp of the scaled scores to `lse`
    /// (the whole-row form and the merged split form; otherwise
    /// [`combine`](super::combine()) writes it).
    pub lse: bool,
    /// With `split`: the last threadgroup of each head block to finish
    /// merges the splits' partial states into `out` (and `lse`), one
    /// dispatch in all, instead of leaving them to [`combine`](super::combine())
    /// ([`SplitSum::LastThreadgroup`](crate::library::split::SplitSum::LastThreadgroup): a ticket per head block in
    /// `tickets`, zero before the dispatch and after it; needs
    /// [`enigma_ir::Feature::DeviceFence`]).
    pub merge: bool,
    /// The form on SIMD-group matrices ([`fused_matrices`]), of this head
    /// dimension and keys per step; `vec`, `chunks`, `lanes`,
    /// `keys_per_step` and `prefetch` then do not apply (its copies move
    /// 16 bytes; `stages` is at least 1).
    pub matrices: Option<MatrixDecode>,
}

/// The suffix of a fused kernel's name for its load width.
pub(super) fn fused_vec_suffix(vec: u8) -> &'static str {
    if vec == 8 {
        "_wide"
    } else {
        vec_suffix(vec)
    }
}

impl FusedConfig {
    /// The kernel's name.
    pub fn name(&self) -> String {
        let form = match (self.split, self.merge) {
            (false, _) => "fused",
            (true, false) => "fused_split",
            (true, true) => "fused_merged",
        };
        let ragged = if self.ragged { "_ragged" } else { "" };
        let lse = if self.lse && self.writes_out() { "_lse" } else { "" };
        if let Some(m) = self.matrices {
            return format!("attention_{form}_mma_{}_d{}_t{}_h{}_b{}_s{}{ragged}{lse}", self.dtype, m.d, self.threads, self.heads, m.block, self.stages);
        }
        let prefetch = if self.prefetch { "_p" } else { "" };
        let stages = if self.stages > 0 { format!("_s{}", self.stages) } else { String::new() };
        format!(
            "attention_{form}_{}{}_c{}_t{}_h{}_l{}_k{}{prefetch}{stages}{ragged}{lse}",
            self.dtype,
            fused_vec_suffix(self.vec),
            self.chunks,
            self.threads,
            self.heads,
            self.lanes,
            self.keys_per_step
        )
    }

    /// Whether the kernel writes `out` (and `lse`): unsplit, or split with
    /// the merge of its splits.
    pub fn writes_out(&self) -> bool {
        !self.split || self.merge
    }

    /// Keys a SIMD group takes per loop step.
    pub fn keys_per_simdgroup_step(&self) -> u32 {
        match self.matrices {
            Some(m) => m.block,
            None => SIMD_WIDTH / self.lanes * self.keys_per_step,
        }
    }

    /// Words (loads of `vec` elements) each lane copies per step when
    /// staged: its slots of `K` and `V` for each of its keys.
    pub fn staged_words(&self) -> u32 {
        self.keys_per_step * self.chunks * 2
    }

    /// Threadgroup memory: per SIMD group and query head of the group, its
    /// maximum, its sum and its `D`-vector accumulator (whole slots); with
    /// `stages`, each thread's staged words of every stage (the matrix
    /// form: [`MatrixDecode::threadgroup_memory`]).
    pub fn threadgroup_memory(&self) -> u64 {
        if let Some(m) = self.matrices {
            return m.threadgroup_memory(self);
        }
        let groups = self.threads.div_ceil(SIMD_WIDTH) as u64;
        let states = 4 * groups * self.heads as u64 * (2 + (self.chunks * self.lanes * self.vec as u32) as u64);
        let word_bytes = (self.vec as u32 * self.dtype.scalar().size_bytes()) as u64;
        let merge_flag = if self.split && self.merge { 4 } else { 0 };
        states + (self.stages * self.staged_words() * self.threads) as u64 * word_bytes + merge_flag
    }
}

/// Register slots per lane of the fused kernel: `ceil(D / vec / lanes)`.
pub fn fused_chunks(d: u32, vec: u8, lanes: u32) -> u32 {
    (d / vec as u32).div_ceil(lanes.max(1)).max(1)
}

/// The f32 values of one loaded element: itself (a scalar or a `float4`),
/// or the two `float4`s of a 16-byte word of eight 16-bit values.
fn widen(k: &mut KernelBuilder, dtype: DType, vec: u8, x: Ex, name: &str) -> Vec<Ex> {
    if vec != 8 {
        return vec![to_f32(x)];
    }
    let pair = Type::vector(dtype.scalar(), 2);
    let f32x2 = Type::vector(Scalar::F32, 2);
    let f32x4 = Type::vector(Scalar::F32, 4);
    let h: Vec<Ex> = (0..4u8).map(|c| k.let_(&format!("{name}_{c}"), x.component(c).bitcast(pair).cast(f32x2))).collect();
    vec![vector(f32x4, &[h[0].x(), h[0].y(), h[1].x(), h[1].y()]), vector(f32x4, &[h[2].x(), h[2].y(), h[3].x(), h[3].y()])]
}

/// A scalar as an f32 value of `width` lanes (for `fma` with vectors).
fn lanes_of(x: Ex, width: u8) -> Ex {
    if width == 1 {
        x
    } else {
        vector(Type::vector(Scalar::F32, width), &[x])
    }
}

/// `simd_shuffle_xor` of an f32 scalar or vector, component by component.
fn shuffle_xor(x: Ex, mask: u32) -> Ex {
    let width = x.ty().width();
    if width == 1 {
        return simd_shuffle_xor(x, mask);
    }
    let comps: Vec<Ex> = (0..width).map(|c| simd_shuffle_xor(x.component(c), mask)).collect();
    vector(Type::vector(Scalar::F32, width), &comps)
}

/// `attention_fused…` ([`FusedConfig::name`]): the whole decode step of
/// `heads` consecutive query heads (block `y`) of one sequence (`z`), all
/// reading one K/V head (query row `r` reads K/V sequence `r / group`),
/// grid `(1, q_heads / heads, batch)`; the split form (grid `(splits,
/// q_heads / heads, batch)`) takes the `split_len` keys of split `x`.
///
/// Lanes own keys: a SIMD group splits into `32 / lanes` key groups of
/// `lanes` lanes, and each key group scores its own keys (`keys_per_step`
/// of them per step, their `K` and `V` loads issued together), each lane
/// multiplying its slots of the key with the query slots it keeps in
/// registers, the key's dot product finishing with `log2(lanes)` shuffles.
/// Every lane keeps, per query head, a running maximum, a rescaled sum and
/// a rescaled accumulator of its slots of `V` (online softmax, scores in
/// the log2 domain); after the last key the key groups of a SIMD group
/// merge their states with shuffles, and the SIMD groups theirs in
/// threadgroup memory after one barrier.
///
/// The whole-row form writes `out` (and `lse`); an empty sequence gives
/// zeros (and `-inf`). The split form writes, for query row `r` (`b ·
/// q_heads + h`) and split `x`, `i = r · splits + x`: `partial_ml[2i]` the
/// log2-domain shift its sums are relative to, `partial_ml[2i + 1]` its sum
/// of weights (0 when the split saw no key), `partial_acc[i·d ..]` its
/// weighted sum of `V` rows. Parameters: `q, k, v` (`q4, k4, v4` for
/// `float4`s, `q8, k8, v8` for 16-byte words), `out` (`lse`) or
/// `partial_ml, partial_acc`, `seq_lens` when ragged, then `s_len, d,
/// scale, group` (query heads per K/V head; and `split_len`).
///
/// # Panics
/// When `vec` is not 1, 4 or 8 (8 with an f32 type), `lanes` is not a
/// power of two up to 32, `heads` or `keys_per_step` is 0, or `stages` is
/// not 0 with `prefetch` or with loads of fewer than 4 bytes; the matrix
/// form ([`FusedConfig::matrices`]) as [`fused_matrices`] says.
pub fn fused(c: &FusedConfig) -> Kernel {
    if let Some(m) = c.matrices {
        return fused_matrices(c, m);
    }
    assert!(c.vec == 1 || c.vec == 4 || (c.vec == 8 && c.dtype != DType::F32), "vector width must be 1, 4 or (16-bit types) 8, got {}", c.vec);
    assert!(c.lanes.is_power_of_two() && c.lanes <= SIMD_WIDTH, "lanes per key must be a power of two up to 32, got {}", c.lanes);
    assert!(c.heads >= 1 && c.keys_per_step >= 1, "heads and keys_per_step must be at least 1");
    assert!(c.stages == 0 || !c.prefetch, "staged loads and register prefetch exclude each other");
    assert!(c.stages == 0 || c.vec as u32 * c.dtype.scalar().size_bytes() >= 4, "staged copies move 4, 8 or 16 bytes");
    let (vec, group, steps, lanes) = (c.vec, c.heads, c.keys_per_step, c.lanes);
    let key_groups = SIMD_WIDTH / lanes;
    let mut kb = KernelBuilder::new(c.name());
    let k = &mut kb;
    type P = FusedDecodeArgs;
    let ([qn, kn, vn], elem) = match vec {
        8 => ([P::Q8, P::K8, P::V8], Type::vector(Scalar::U32, 4)),
        4 => ([P::Q4, P::K4, P::V4], c.dtype.ty(4)),
        _ => ([P::Q, P::K, P::V], c.dtype.ty(1)),
    };
    let row_len = c.chunks * lanes * vec as u32;
    let fr = frame(k, c, [qn, kn, vn], elem, row_len, None);
    let Frame { q, keys, values, d, scale, s_len, row0, kv_seq, tid, lane, sg, nsg, first_key, end_key, .. } = fr;
    let GroupStates { max: tg_max, sum: tg_sum, acc: tg_acc, max_groups, .. } = fr.states;
    let sub = k.let_("sub", lane % lanes);
    let key_group = k.let_("key_group", lane / lanes);
    let dv = k.let_("dv", d / vec as u32);
    // Slot `i` of this lane: load column `sub + lanes · i` of a row,
    // clamped into the row so loads stay in bounds.
    let slots: Vec<(Ex, Ex)> = (0..c.chunks)
        .map(|i| {
            let col = k.let_(&format!("col{i}"), sub + lanes * i);
            let valid = k.let_(&format!("valid{i}"), col.lt(dv));
            (k.let_(&format!("ccol{i}"), min(col, dv - 1u32)), valid)
        })
        .collect();
    // Scores in the log2 domain: q pre-multiplied by scale · log2(e).
    let qscale = k.let_("qscale", scale * LOG2E);
    let qs: Vec<Vec<Vec<Ex>>> = (0..group)
        .map(|g| {
            let row = k.let_(&format!("qrow{g}"), row0 + g);
            slots
                .iter()
                .enumerate()
                .map(|(i, &(col, valid))| {
                    let raw = q.get(row * dv + col);
                    widen(k, c.dtype, vec, raw, &format!("qw{g}_{i}"))
                        .into_iter()
                        .enumerate()
                        .map(|(p, x)| k.let_(&format!("q{g}_{i}_{p}"), select(splat(0.0, x.ty().width()), x * qscale, valid)))
                        .collect()
                })
                .collect()
        })
        .collect();
    let part_width = if vec == 1 { 1 } else { 4 };
    let parts = if vec == 8 { 2 } else { 1 };
    let ms: Vec<Var> = (0..group).map(|g| k.var(&format!("m{g}"), neg_inf())).collect();
    let ls: Vec<Var> = (0..group).map(|g| k.var(&format!("l{g}"), f(0.0))).collect();
    let accs: Vec<Vec<Vec<Var>>> = (0..group)
        .map(|g| (0..c.chunks).map(|i| (0..parts).map(|p| k.var(&format!("acc{g}_{i}_{p}"), splat(0.0, part_width))).collect()).collect())
        .collect();
    // Keys past the end re-read the last key (or key 0 of an empty range:
    // in bounds) and are masked out of the softmax.
    let last_key = k.let_("last_key", max(end_key, 1u32) - 1u32);
    // Key `u` of this lane's key group in the step that starts at `at`:
    // `at + u · key_groups + key_group`, so each load instruction of the
    // SIMD group reads `key_groups` consecutive rows.
    let load_step = |k: &mut KernelBuilder, at: Ex, tag: &str| -> Vec<(Vec<Ex>, Vec<Ex>)> {
        (0..steps)
            .map(|u| {
                let key = min(at + u * key_groups + key_group, last_key);
                let base = k.let_(&format!("{tag}base{u}"), (kv_seq * s_len + key) * dv);
                let kr = slots.iter().enumerate().map(|(i, &(col, _))| k.let_(&format!("{tag}k{u}_{i}"), keys.get(base + col))).collect();
                let vr = slots.iter().enumerate().map(|(i, &(col, _))| k.let_(&format!("{tag}v{u}_{i}"), values.get(base + col))).collect();
                (kr, vr)
            })
            .collect()
    };
    let step_keys = key_groups * steps;
    let first_step = k.let_("first_step", first_key + sg * step_keys);
    let stride = k.let_("stride", nsg * step_keys);
    // Staged: word `w` of stage `t` of this thread at `(t · words + w) ·
    // threads + tid`, so a SIMD group's accesses to one word are contiguous.
    let words = c.staged_words();
    let staging = (c.stages > 0).then(|| k.threadgroup_array("staged", elem, c.stages * words * c.threads));
    let staged_at = |stage: Ex, w: u32| (stage * words + w) * c.threads + tid;
    // Starts the copies of the step at `at` into stage `stage`, one group.
    // A step at or past the end is never read: its group stays empty.
    let issue = |k: &mut KernelBuilder, at: Ex, stage: Ex, tag: &str| {
        let staging = staging.expect("staged");
        k.if_(at.lt(end_key), |k| {
            for u in 0..steps {
                let key = k.let_(&format!("{tag}key{u}"), at + u * key_groups + key_group);
                let live = k.let_(&format!("{tag}in{u}"), key.lt(end_key));
                let base = k.let_(&format!("{tag}base{u}"), (kv_seq * s_len + min(key, last_key)) * dv);
                for (i, &(col, _)) in slots.iter().enumerate() {
                    let w = (u * c.chunks + i as u32) * 2;
                    k.async_copy(staging.at(staged_at(stage, w)), keys.at(base + col), 1, live);
                    k.async_copy(staging.at(staged_at(stage, w + 1)), values.at(base + col), 1, live);
                }
            }
        });
        k.async_commit();
    };
    let iteration = (c.stages > 0).then(|| {
        for t in 0..c.stages {
            issue(k, first_step + stride * t, Ex::from(t), &format!("first{t}_"));
        }
        k.var("iteration", Ex::from(0u32))
    });
    // With prefetch, the registers that hold the next step's rows.
    let ahead: Option<Vec<(Vec<Var>, Vec<Var>)>> = c.prefetch.then(|| {
        load_step(k, first_step, "first_")
            .into_iter()
            .enumerate()
            .map(|(u, (kr, vr))| {
                let kv: Vec<Var> = kr.into_iter().enumerate().map(|(i, x)| k.var(&format!("next_k{u}_{i}"), x)).collect();
                let vv: Vec<Var> = vr.into_iter().enumerate().map(|(i, x)| k.var(&format!("next_v{u}_{i}"), x)).collect();
                (kv, vv)
            })
            .collect()
    });
    // `s` is the same in every lane of a SIMD group: the shuffles inside
    // run with all 32 lanes.
    k.for_range("s", first_step, end_key, stride, |k, s| {
        let stage = iteration.map(|it| k.let_("stage", it.get() % c.stages));
        let rows: Vec<(Vec<Ex>, Vec<Ex>)> = match (&ahead, staging, stage) {
            (_, Some(staging), Some(stage)) => {
                // This step's group is complete when at most `stages - 1`
                // newer ones are pending.
                k.async_wait(c.stages - 1);
                (0..steps)
                    .map(|u| {
                        let word = |k: &mut KernelBuilder, i: u32, side: u32, name: &str| {
                            k.let_(&format!("{name}{u}_{i}"), staging.get(staged_at(stage, (u * c.chunks + i) * 2 + side)))
                        };
                        let kr = (0..c.chunks).map(|i| word(k, i, 0, "k")).collect();
                        let vr = (0..c.chunks).map(|i| word(k, i, 1, "v")).collect();
                        (kr, vr)
                    })
                    .collect()
            }
            (Some(ahead), _, _) => {
                let current: Vec<(Vec<Ex>, Vec<Ex>)> = ahead
                    .iter()
                    .enumerate()
                    .map(|(u, (kv, vv))| {
                        let kr = kv.iter().enumerate().map(|(i, x)| k.let_(&format!("k{u}_{i}"), x.get())).collect();
                        let vr = vv.iter().enumerate().map(|(i, x)| k.let_(&format!("v{u}_{i}"), x.get())).collect();
                        (kr, vr)
                    })
                    .collect();
                let next = k.let_("next_s", s + stride);
                for ((kv, vv), (kr, vr)) in ahead.iter().zip(load_step(k, next, "n")) {
                    for (var, x) in kv.iter().zip(kr).chain(vv.iter().zip(vr)) {
                        k.assign(*var, x);
                    }
                }
                current
            }
            _ => load_step(k, s, ""),
        };
        let live: Vec<Ex> = (0..steps).map(|u| k.let_(&format!("live{u}"), (s + u * key_groups + key_group).lt(end_key))).collect();
        let krows: Vec<Vec<Vec<Ex>>> =
            rows.iter().enumerate().map(|(u, (kr, _))| kr.iter().enumerate().map(|(i, &x)| widen(k, c.dtype, vec, x, &format!("kw{u}_{i}"))).collect()).collect();
        let vrows: Vec<Vec<Vec<Ex>>> =
            rows.iter().enumerate().map(|(u, (_, vr))| vr.iter().enumerate().map(|(i, &x)| widen(k, c.dtype, vec, x, &format!("vw{u}_{i}"))).collect()).collect();
        for g in 0..group as usize {
            let ts: Vec<Ex> = (0..steps as usize)
                .map(|u| {
                    let dot = krows[u]
                        .iter()
                        .zip(&qs[g])
                        .flat_map(|(kp, qp)| kp.iter().zip(qp).map(|(&kv, &qv)| hsum(qv * kv)))
                        .reduce(|a, b| a + b)
                        .expect("at least one slot");
                    let mut dot = k.let_(&format!("dot{g}_{u}"), dot);
                    let mut mask = 1;
                    while mask < lanes {
                        dot = k.let_(&format!("dot{g}_{u}_{mask}"), dot + simd_shuffle_xor(dot, mask));
                        mask *= 2;
                    }
                    k.let_(&format!("t{g}_{u}"), select(neg_inf(), dot, live[u]))
                })
                .collect();
            let m_new = k.let_(&format!("m_new{g}"), ts.iter().fold(ms[g].get(), |a, &t| max(a, t)));
            let shift = k.let_(&format!("shift{g}"), finite_or_zero(m_new));
            let alpha = k.let_(&format!("alpha{g}"), exp2(ms[g].get() - shift));
            let ps: Vec<Ex> = ts.iter().enumerate().map(|(u, &t)| k.let_(&format!("p{g}_{u}"), exp2(t - shift))).collect();
            let p_sum = ps.iter().copied().reduce(|a, b| a + b).expect("at least one key");
            k.assign(ls[g], fma(ls[g].get(), alpha, p_sum));
            for (i, slot) in accs[g].iter().enumerate() {
                for (p, acc) in slot.iter().enumerate() {
                    let mut sum = acc.get() * lanes_of(alpha, part_width);
                    for (u, &pu) in ps.iter().enumerate() {
                        sum = fma(vrows[u][i][p], lanes_of(pu, part_width), sum);
                    }
                    k.assign(*acc, sum);
                }
            }
            k.assign(ms[g], m_new);
        }
        if let (Some(it), Some(stage)) = (iteration, stage) {
            // The stage just read takes the step `stages` ahead.
            issue(k, s + stride * c.stages, stage, "ahead_");
            k.assign(it, it.get() + 1u32);
        }
    });
    // The key groups of each SIMD group merge their states: after the
    // butterfly every lane holds its SIMD group's state of its slots.
    let mut mask = lanes;
    while mask < SIMD_WIDTH {
        for g in 0..group as usize {
            let m_other = k.let_(&format!("m_other{g}_{mask}"), simd_shuffle_xor(ms[g].get(), mask));
            let l_other = k.let_(&format!("l_other{g}_{mask}"), simd_shuffle_xor(ls[g].get(), mask));
            let others: Vec<Vec<Ex>> = accs[g]
                .iter()
                .enumerate()
                .map(|(i, slot)| slot.iter().enumerate().map(|(p, acc)| k.let_(&format!("acc_other{g}_{i}_{p}_{mask}"), shuffle_xor(acc.get(), mask))).collect())
                .collect();
            let m_new = k.let_(&format!("m_merged{g}_{mask}"), max(ms[g].get(), m_other));
            let shift = k.let_(&format!("merge_shift{g}_{mask}"), finite_or_zero(m_new));
            let mine = k.let_(&format!("w_mine{g}_{mask}"), exp2(ms[g].get() - shift));
            let theirs = k.let_(&format!("w_theirs{g}_{mask}"), exp2(m_other - shift));
            k.assign(ls[g], fma(ls[g].get(), mine, l_other * theirs));
            for (slot, other) in accs[g].iter().zip(&others) {
                for (acc, &o) in slot.iter().zip(other) {
                    k.assign(*acc, fma(acc.get(), lanes_of(mine, part_width), o * lanes_of(theirs, part_width)));
                }
            }
            k.assign(ms[g], m_new);
        }
        mask *= 2;
    }
    for g in 0..group {
        let at = k.let_(&format!("state{g}"), (g * max_groups) + sg);
        k.if_(lane.eq(0u32), |k| {
            k.store(tg_max.at(at), ms[g as usize].get());
            k.store(tg_sum.at(at), ls[g as usize].get());
        });
        for (i, ((_, valid), slot)) in slots.iter().zip(&accs[g as usize]).enumerate() {
            k.if_(key_group.eq(0u32).and(*valid), |k| {
                let at = at * row_len + (sub + lanes * i as u32) * vec as u32;
                for (p, acc) in slot.iter().enumerate() {
                    if part_width == 1 {
                        k.store(tg_acc.at(at), acc.get());
                    } else {
                        for comp in 0..4u8 {
                            k.store(tg_acc.at(at + (4 * p as u32 + comp as u32)), acc.get().component(comp));
                        }
                    }
                }
            });
        }
    }
    write_results(k, &fr);
    finish(kb)
}

/// What both fused kernels declare and compute before their loops: the
/// parameters ([`FusedDecodeArgs`]; `q`, `K` and `V` under `names`, of
/// element type `elem`), the per-SIMD-group states of `row_len` elements
/// per row in threadgroup memory, this threadgroup's query rows, K/V
/// sequence and keys.
#[derive(Clone, Copy)]
pub(super) struct Frame {
    pub q: Mem,
    pub keys: Mem,
    pub values: Mem,
    pub out: Option<Mem>,
    pub lse: Option<Mem>,
    /// `partial_ml`, `partial_acc` of the split forms.
    pub partials: Option<(Mem, Mem)>,
    pub tickets: Option<Mem>,
    pub s_len: Ex,
    /// The head dimension: `fixed_d` where the kernel is built for one,
    /// else the parameter `d`.
    pub d: Ex,
    /// The head dimension the kernel is built for (the matrix form), if any.
    pub fixed_d: Option<u32>,
    /// Threads per threadgroup (the kernel's own).
    pub threads: u32,
    pub scale: Ex,
    pub head_block: Ex,
    pub batch: Ex,
    /// The first query row of this threadgroup.
    pub row0: Ex,
    /// The K/V sequence its rows read (`batch · kv_heads + kv_head`).
    pub kv_seq: Ex,
    pub tid: Ex,
    pub lane: Ex,
    pub sg: Ex,
    /// SIMD groups per threadgroup (a constant).
    pub nsg: Ex,
    /// The keys of this threadgroup: all of its sequence's, or its split's.
    pub first_key: Ex,
    pub end_key: Ex,
    pub states: GroupStates,
}

/// Declares the parameters and the states of the fused kernel `c` and
/// computes its [`Frame`]. The SIMD groups per threadgroup are the
/// kernel's own (`c.threads`, which its arrays are sized for), a constant;
/// so is the head dimension where the kernel is built for one
/// (`fixed_d`: the matrix form), the parameter `d` otherwise.
pub(super) fn frame(k: &mut KernelBuilder, c: &FusedConfig, names: [&str; 3], elem: Type, row_len: u32, fixed_d: Option<u32>) -> Frame {
    type P = FusedDecodeArgs;
    let group = c.heads;
    let q = k.buffer(names[0], elem, Access::Read);
    let keys = k.buffer(names[1], elem, Access::Read);
    let values = k.buffer(names[2], elem, Access::Read);
    let partials = c.split.then(|| (k.buffer(P::PARTIAL_ML, Type::F32, Access::ReadWrite), k.buffer(P::PARTIAL_ACC, Type::F32, Access::ReadWrite)));
    let tickets = (c.split && c.merge).then(|| k.buffer(P::TICKETS, Type::U32, Access::ReadWrite));
    let (out, lse) = if c.writes_out() {
        let out = k.buffer(P::OUT, c.dtype.ty(1), Access::ReadWrite);
        (Some(out), c.lse.then(|| k.buffer(P::LSE, Type::F32, Access::ReadWrite)))
    } else {
        (None, None)
    };
    let seq_lens = c.ragged.then(|| k.buffer(P::SEQ_LENS, Type::U32, Access::Read));
    let s_len = k.value(P::S_LEN, Type::U32);
    // Declared in every form (the arguments bind it by name).
    let d_param = k.value(P::D, Type::U32);
    let d = fixed_d.map_or(d_param, Ex::from);
    let scale = k.value(P::SCALE, Type::F32);
    let kv_group = k.value(P::GROUP, Type::U32);
    let split_len = if c.split { Some(k.value(P::SPLIT_LEN, Type::U32)) } else { None };
    let max_groups = c.threads.div_ceil(SIMD_WIDTH);
    let states = GroupStates {
        max: k.threadgroup_array("group_max", Type::F32, max_groups * group),
        sum: k.threadgroup_array("group_sum", Type::F32, max_groups * group),
        acc: k.threadgroup_array("group_acc", Type::F32, max_groups * group * row_len),
        max_groups,
        row_len,
        group,
    };
    let head_block = k.let_("head_block", threadgroup_position_in_grid().y());
    let batch = k.let_("batch", threadgroup_position_in_grid().z());
    // The first query row of this threadgroup and the K/V sequence it reads.
    let row0 = k.let_("row0", (batch * threadgroups_per_grid().y() + head_block) * group);
    let kv_seq = k.let_("kv_seq", row0 / kv_group);
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let nsg = Ex::from(max_groups);
    let seq_len = match seq_lens {
        Some(lens) => k.let_("seq_len", min(lens.get(batch), s_len)),
        None => s_len,
    };
    let (first_key, end_key) = match split_len {
        Some(len) => {
            let first = k.let_("first_key", threadgroup_position_in_grid().x() * len);
            (first, k.let_("end_key", min(seq_len, first + len)))
        }
        None => (k.let_("first_key", 0u32), seq_len),
    };
    Frame { q, keys, values, out, lse, partials, tickets, s_len, d, fixed_d, threads: c.threads, scale, head_block, batch, row0, kv_seq, tid, lane, sg, nsg, first_key, end_key, states }
}

/// Writes the results from the SIMD groups' states (every thread calls it
/// after storing its own): the merged rows to `out` (and `lse`), or the
/// split's partial state; where the kernel merges its splits, the last
/// threadgroup of the head block merges them all into `out`.
pub(super) fn write_results(k: &mut KernelBuilder, fr: &Frame) {
    let Frame { out, lse, partials, tickets, d, row0, batch, head_block, tid, lane, sg, nsg, states, .. } = *fr;
    let outputs = Outputs { row0, tid, threads: fr.threads, d, fixed_d: fr.fixed_d };
    k.threadgroup_barrier(MemFlags::Threadgroup);
    // The finished rows: `out` (and `lse`) from a row's merged state.
    let write_out = |k: &mut KernelBuilder, tag: &str, row: Ex, dim: Ex, state: Merged| {
        let out = out.expect("a form that writes out");
        let inv = k.let_(&format!("{tag}inv"), select(f(0.0), 1.0f32 / state.sum, state.sum.gt(0.0f32)));
        store_f32(k, out, row * d + dim, state.acc * inv);
        if let Some(lse) = lse {
            k.if_(dim.eq(0u32), |k| k.store(lse.at(row), (state.shift + log2(state.sum)) * std::f64::consts::LN_2 as f32));
        }
    };
    match partials {
        None => merge_group_states(k, &states, &outputs, "", &write_out),
        Some((partial_ml, partial_acc)) => merge_group_states(k, &states, &outputs, "", &|k: &mut KernelBuilder, tag: &str, row: Ex, dim: Ex, state: Merged| {
            let part = k.let_(&format!("{tag}part"), row * threadgroups_per_grid().x() + threadgroup_position_in_grid().x());
            k.if_(dim.eq(0u32), |k| {
                k.store(partial_ml.at(part * 2u32), state.shift);
                k.store(partial_ml.at(part * 2u32 + 1u32), state.sum);
            });
            k.store(partial_acc.at(part * d + dim), state.acc);
        }),
    }
    if let (Some(tickets), Some((partial_ml, partial_acc))) = (tickets, partials) {
        // Every thread fences its stores of partials before the ticket, and
        // every thread of the last threadgroup fences before it reads the
        // others' (one fencing thread orders only itself).
        k.device_fence();
        k.threadgroup_barrier(MemFlags::Device);
        let last_flag = k.threadgroup_array("last_flag", Type::U32, 1);
        let splits = k.let_("splits", threadgroups_per_grid().x());
        let ticket_at = k.let_("ticket_at", batch * threadgroups_per_grid().y() + head_block);
        k.if_(tid.eq(0u32), |k| {
            let ticket = k.atomic_fetch(AtomicOp::Add, tickets.at(ticket_at), 1u32);
            let last = k.let_("split_last", ticket.eq(splits - 1u32));
            k.if_(last, |k| k.atomic(AtomicOp::Exchange, tickets.at(ticket_at), 0u32));
            k.store(last_flag.at(0u32), select(0u32, 1u32, last));
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let merging = k.let_("merging", last_flag.get(0u32).ne(0u32));
        k.if_(merging, |k| {
            k.device_fence();
            merge_splits(k, &states, partial_ml, partial_acc, row0, splits, lane, sg, nsg, d);
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.if_(merging, |k| merge_group_states(k, &states, &outputs, "final_", &write_out));
    }
}

/// The fused kernel's per-SIMD-group states in threadgroup memory: for
/// query head `g` of the block and SIMD group `j`, at `g · max_groups +
/// j`, the maximum (log2 domain), the sum of weights and an accumulator
/// row of `row_len` (≥ `d`) elements.
#[derive(Clone, Copy)]
pub(super) struct GroupStates {
    pub max: Mem,
    pub sum: Mem,
    pub acc: Mem,
    pub max_groups: u32,
    pub row_len: u32,
    pub group: u32,
}

/// One output element's merged state: the shift its sums are relative
/// to, the sum of weights and the weighted sum of `V`.
#[derive(Clone, Copy)]
struct Merged {
    shift: Ex,
    sum: Ex,
    acc: Ex,
}

/// Who finishes which of a head block's `group · d` outputs: thread `tid`
/// of `threads` takes elements `tid, tid + threads, …`; with `fixed_d` (a
/// head dimension known when the kernel is built) their loop is unrolled.
#[derive(Clone, Copy)]
struct Outputs {
    row0: Ex,
    tid: Ex,
    threads: u32,
    d: Ex,
    fixed_d: Option<u32>,
}

/// Merges the SIMD groups' states of `states`: each element of `outputs`
/// reads the states of all `max_groups` SIMD groups at once (their loads
/// issued before the math) and goes to `emit` with the prefix of its
/// names, its row (`row0 + g`) and its dimension.
fn merge_group_states(k: &mut KernelBuilder, states: &GroupStates, outputs: &Outputs, tag: &str, emit: &dyn Fn(&mut KernelBuilder, &str, Ex, Ex, Merged)) {
    let s = *states;
    let Outputs { row0, tid, threads, d, fixed_d } = *outputs;
    let merge = |k: &mut KernelBuilder, e: Ex, tag: &str| {
        let g = k.let_(&format!("{tag}g"), e / d);
        let dim = k.let_(&format!("{tag}dim"), e % d);
        let state0 = k.let_(&format!("{tag}merge_base"), g * s.max_groups);
        let maxes: Vec<Ex> = (0..s.max_groups).map(|j| k.let_(&format!("{tag}group_max{j}"), s.max.get(state0 + j))).collect();
        let big_m = k.let_(&format!("{tag}big_m"), maxes.iter().copied().reduce(max).expect("at least one SIMD group"));
        let shift = k.let_(&format!("{tag}merge_shift"), finite_or_zero(big_m));
        let weighted: Vec<(Ex, Ex)> = maxes
            .iter()
            .enumerate()
            .map(|(j, &m)| {
                let w = k.let_(&format!("{tag}group_w{j}"), exp2(m - shift));
                let at = state0 + j as u32;
                (s.sum.get(at) * w, s.acc.get(at * s.row_len + dim) * w)
            })
            .collect();
        let big_l = k.let_(&format!("{tag}big_l"), weighted.iter().map(|p| p.0).reduce(|a, b| a + b).expect("at least one SIMD group"));
        let o = k.let_(&format!("{tag}o"), weighted.iter().map(|p| p.1).reduce(|a, b| a + b).expect("at least one SIMD group"));
        let row = k.let_(&format!("{tag}row"), row0 + g);
        emit(k, tag, row, dim, Merged { shift, sum: big_l, acc: o });
    };
    match fixed_d {
        Some(fixed) => {
            let total = fixed * s.group;
            for i in 0..total.div_ceil(threads) {
                let e = k.let_(&format!("{tag}e{i}"), tid + i * threads);
                let tag = format!("{tag}e{i}_");
                if (i + 1) * threads <= total {
                    merge(k, e, &tag);
                } else {
                    k.if_(e.lt(total), |k| merge(k, e, &tag));
                }
            }
        }
        None => k.for_range(&format!("{tag}e"), tid, d * s.group, threads, |k, e| merge(k, e, tag)),
    }
}

/// Loads per lane the merge of the splits aims to have in flight: the
/// splits a SIMD group loads before it merges them are this over the
/// lane's accumulator slots of all its query heads (1 to 4).
pub const MERGE_LOADS_PER_LANE: u32 = 32;

/// The last threadgroup's merge of the splits of its block's query rows
/// into `states`: SIMD group `sg` takes splits `sg, sg + nsg, …` a few at
/// a time (all their loads issued before they are merged) and lane `l`
/// dimensions `l, l + 32, …`, keeping a running maximum, sum and
/// accumulator per query head (a split that saw no key weighs nothing);
/// each SIMD group's state goes to threadgroup memory for
/// [`merge_group_states`].
#[allow(clippy::too_many_arguments)]
fn merge_splits(k: &mut KernelBuilder, states: &GroupStates, partial_ml: Mem, partial_acc: Mem, row0: Ex, splits: Ex, lane: Ex, sg: Ex, nsg: Ex, d: Ex) {
    let s = *states;
    let slots = s.row_len.div_ceil(SIMD_WIDTH);
    let batch = (MERGE_LOADS_PER_LANE / (slots * s.group)).clamp(1, 4);
    let dims: Vec<(Ex, Ex)> = (0..slots)
        .map(|c| {
            let dim = k.let_(&format!("merge_dim{c}"), lane + SIMD_WIDTH * c);
            (k.let_(&format!("merge_col{c}"), min(dim, d - 1u32)), dim.lt(d))
        })
        .collect();
    let ms: Vec<Var> = (0..s.group).map(|g| k.var(&format!("split_m{g}"), neg_inf())).collect();
    let ls: Vec<Var> = (0..s.group).map(|g| k.var(&format!("split_l{g}"), f(0.0))).collect();
    let accs: Vec<Vec<Var>> = (0..s.group).map(|g| (0..slots).map(|c| k.var(&format!("split_acc{g}_{c}"), f(0.0))).collect()).collect();
    k.for_range("first_split", sg * batch, splits, nsg * batch, |k, first| {
        // Every load of the batch first; a split past the end re-reads the
        // last one and weighs nothing.
        let loaded: Vec<Vec<(Ex, Ex, Vec<Ex>)>> = (0..batch)
            .map(|b| {
                let i = k.let_(&format!("split{b}"), first + b);
                let seen_split = k.let_(&format!("in_range{b}"), i.lt(splits));
                let at = min(i, splits - 1u32);
                (0..s.group)
                    .map(|g| {
                        let part = k.let_(&format!("merge_part{b}_{g}"), (row0 + g) * splits + at);
                        let m = k.let_(&format!("mi{b}_{g}"), partial_ml.get(part * 2u32));
                        let l = k.let_(&format!("li{b}_{g}"), partial_ml.get(part * 2u32 + 1u32));
                        let acc = dims.iter().enumerate().map(|(c, &(col, _))| k.let_(&format!("ai{b}_{g}_{c}"), partial_acc.get(part * d + col))).collect();
                        let m = k.let_(&format!("mk{b}_{g}"), select(neg_inf(), m, seen_split.and(l.gt(0.0f32))));
                        (m, l, acc)
                    })
                    .collect()
            })
            .collect();
        for g in 0..s.group as usize {
            let m_new = k.let_(&format!("split_m_new{g}"), loaded.iter().fold(ms[g].get(), |a, parts| max(a, parts[g].0)));
            let shift = k.let_(&format!("split_shift{g}"), finite_or_zero(m_new));
            let mine = k.let_(&format!("split_mine{g}"), exp2(ms[g].get() - shift));
            let ws: Vec<Ex> = loaded.iter().enumerate().map(|(b, parts)| k.let_(&format!("split_w{b}_{g}"), exp2(parts[g].0 - shift))).collect();
            let l = loaded.iter().zip(&ws).fold(ls[g].get() * mine, |a, (parts, &w)| fma(parts[g].1, w, a));
            k.assign(ls[g], l);
            for (c, acc) in accs[g].iter().enumerate() {
                let sum = loaded.iter().zip(&ws).fold(acc.get() * mine, |a, (parts, &w)| fma(parts[g].2[c], w, a));
                k.assign(*acc, sum);
            }
            k.assign(ms[g], m_new);
        }
    });
    for g in 0..s.group {
        let at = k.let_(&format!("split_state{g}"), g * s.max_groups + sg);
        k.if_(lane.eq(0u32), |k| {
            k.store(s.max.at(at), ms[g as usize].get());
            k.store(s.sum.at(at), ls[g as usize].get());
        });
        for (c, &(col, valid)) in dims.iter().enumerate() {
            k.if_(valid, |k| k.store(s.acc.at(at * s.row_len + col), accs[g as usize][c].get()));
        }
    }
}

/// The largest threadgroup (a multiple of 32, at most 1024) whose fused
/// kernel keeps its per-SIMD-group state for head dimension `d` and `group`
/// query heads within [`MAX_THREADGROUP_MEMORY_BYTES`]. The accumulators are
/// whole register slots (32 elements, or 128 with `float4`): with one query
/// head, 1024 threads fit up to D = 224 (128 with `float4`), 256 up to
/// D = 992 (896); D = 1024 needs `8 · (2 + 1024) · 4 = 32832` bytes at 256
/// threads, so 224. The slots of 32 lanes bound those of any lanes per key
/// (fewer lanes round `D` up less); staged words take more memory per
/// thread ([`AttentionPlan::fitting_threads`](super::AttentionPlan::fitting_threads)).
pub fn fused_threads_that_fit(d: u32, vec: u8, group: u32) -> u32 {
    let per_group = 4 * group.max(1) as u64 * (2 + (chunks_for(d, vec) * SIMD_WIDTH * vec as u32) as u64);
    let groups = (MAX_THREADGROUP_MEMORY_BYTES / per_group).clamp(1, (MAX_THREADS_PER_THREADGROUP / SIMD_WIDTH) as u64);
    groups as u32 * SIMD_WIDTH
}
