//! The three-dispatch decode's own kernels: [`scores`] and
//! [`weighted_sum`] (the softmax between them is the library's).

use super::args::{ScoresArgs, WeightedSumArgs};
use crate::library::*;
use enigma_ir::{Access, Kernel, MemFlags, Type};

/// Lane `lane`'s column of slot `c` (in vectors), clamped into the row so
/// loads stay in bounds; `valid` says whether it is a real column.
fn slot(k: &mut KernelBuilder, lane: Ex, c: u32, dv: Ex) -> (Ex, Ex) {
    let col = k.let_(&format!("col{c}"), lane + SIMD_WIDTH * c);
    let valid = k.let_(&format!("valid{c}"), col.lt(dv));
    let clamped = k.let_(&format!("ccol{c}"), min(col, dv - 1u32));
    (clamped, valid)
}

/// Loads row `row` of `q` into `chunks` registers per lane (0 past the
/// row's end), multiplied by `factor`, as locals `{name}{c}`.
fn load_q(k: &mut KernelBuilder, name: &str, q: Mem, row: Ex, slots: &[(Ex, Ex)], dv: Ex, factor: Ex) -> Vec<Ex> {
    slots
        .iter()
        .enumerate()
        .map(|(c, &(col, valid))| {
            let v = load_f32(q, row * dv + col) * factor;
            let width = v.ty().width();
            k.let_(&format!("{name}{c}"), select(splat(0.0, width), v, valid))
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
    type P = ScoresArgs;
    let (qn, kn) = if vec == 4 { (P::Q4, P::K4) } else { (P::Q, P::K) };
    let q = k.buffer(qn, dtype.ty(vec), Access::Read);
    let keys = k.buffer(kn, dtype.ty(vec), Access::Read);
    let scores = k.buffer(P::SCORES, Type::F32, Access::ReadWrite);
    let s_len = k.value(P::S_LEN, Type::U32);
    let d = k.value(P::D, Type::U32);
    let scale = k.value(P::SCALE, Type::F32);
    let head = k.let_("head", threadgroup_position_in_grid().y());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let dv = k.let_("dv", if vec == 4 { d / 4u32 } else { d });
    let slots: Vec<(Ex, Ex)> = (0..chunks).map(|c| slot(k, lane, c, dv)).collect();
    let qs = load_q(k, "qv", q, head, &slots, dv, scale);
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
    type P = WeightedSumArgs;
    let w = k.buffer(P::W, Type::F32, Access::Read);
    let v = k.buffer(P::V, dtype.ty(1), Access::Read);
    let out = k.buffer(P::OUT, dtype.ty(1), Access::ReadWrite);
    let s_len = k.value(P::S_LEN, Type::U32);
    let d = k.value(P::D, Type::U32);
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
