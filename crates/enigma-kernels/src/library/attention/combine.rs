//! The merge of the fused kernel's splits ([`combine`]).

use super::args::CombineArgs;
use crate::library::*;
use enigma_ir::{Access, Kernel, MemFlags, Type};

/// Threads per threadgroup of [`combine`]: 8 SIMD groups share the splits.
pub const COMBINE_THREADS: u32 = 256;

/// `attention_combine_{dtype}[_lse]`: merges the partial states of
/// [`fused`](super::fused())'s split form into `out[r, :]`, grid `(rows, ceil(d / 32))`
/// (threadgroup `(r, y)` finishes dimensions `32y ..` of row `r`): with
/// `M` the largest shift among the splits that saw keys, `out = Σ acc_i ·
/// 2^(m_i − M) / Σ l_i · 2^(m_i − M)` (zeros when none did), and with
/// `lse`, `lse[r] = ln 2 · (M + log2 Σ l_i · 2^(m_i − M))`. The SIMD groups
/// take every `nsg`-th split (lane `l` its dimension), so each thread's
/// loads are few and independent; their sums meet in threadgroup memory.
/// Parameters: `partial_ml, partial_acc, out` (`lse`), `d, splits`.
pub fn combine(dtype: DType, with_lse: bool) -> Kernel {
    let mut kb = KernelBuilder::new(format!("attention_combine_{dtype}{}", if with_lse { "_lse" } else { "" }));
    let k = &mut kb;
    type P = CombineArgs;
    let partial_ml = k.buffer(P::PARTIAL_ML, Type::F32, Access::Read);
    let partial_acc = k.buffer(P::PARTIAL_ACC, Type::F32, Access::Read);
    let out = k.buffer(P::OUT, dtype.ty(1), Access::ReadWrite);
    let lse = with_lse.then(|| k.buffer(P::LSE, Type::F32, Access::ReadWrite));
    let d = k.value(P::D, Type::U32);
    let splits = k.value(P::SPLITS, Type::U32);
    let max_groups = MAX_THREADS_PER_THREADGROUP / SIMD_WIDTH;
    let tg_o = k.threadgroup_array("group_o", Type::F32, max_groups * SIMD_WIDTH);
    let tg_l = k.threadgroup_array("group_l", Type::F32, max_groups);
    let row = k.let_("row", threadgroup_position_in_grid().x());
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let nsg = k.let_("nsg", simdgroups_per_threadgroup());
    let dim = k.let_("dim", threadgroup_position_in_grid().y() * SIMD_WIDTH + lane);
    let col = k.let_("col", min(dim, d - 1u32));
    let base = k.let_("base", row * splits);
    let local_m = k.var("local_m", neg_inf());
    k.for_range("i", tid, splits, threads_per_threadgroup().x(), |k, i| {
        let seen = k.let_("seen", partial_ml.get((base + i) * 2u32 + 1u32).gt(0.0f32));
        k.if_(seen, |k| k.assign(local_m, max(local_m.get(), partial_ml.get((base + i) * 2u32))));
    });
    let big_m = threadgroup_reduce(k, "split_max", &[(ReduceOp::Max, local_m.get())])[0];
    let o = k.var("o", f(0.0));
    let l = k.var("l", f(0.0));
    k.for_range("i2", sg, splits, nsg, |k, i| {
        let li = k.let_("li", partial_ml.get((base + i) * 2u32 + 1u32));
        let w = k.let_("w", select(f(0.0), exp2(partial_ml.get((base + i) * 2u32) - big_m), li.gt(0.0f32)));
        k.assign(l, fma(li, w, l.get()));
        k.assign(o, fma(partial_acc.get((base + i) * d + col), w, o.get()));
    });
    k.store(tg_o.at(sg * SIMD_WIDTH + lane), o.get());
    k.if_(lane.eq(0u32), |k| k.store(tg_l.at(sg), l.get()));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(sg.eq(0u32), |k| {
        let total_o = k.var("total_o", f(0.0));
        let big_l = k.var("big_l", f(0.0));
        k.for_range("j", 0u32, nsg, 1u32, |k, j| {
            k.assign(total_o, total_o + tg_o.get(j * SIMD_WIDTH + lane));
            k.assign(big_l, big_l + tg_l.get(j));
        });
        let inv = k.let_("inv", select(f(0.0), 1.0f32 / big_l.get(), big_l.get().gt(0.0f32)));
        k.if_(dim.lt(d), |k| store_f32(k, out, row * d + dim, total_o.get() * inv));
        if let Some(lse) = lse {
            k.if_(dim.eq(0u32), |k| k.store(lse.at(row), (big_m + log2(big_l.get())) * std::f64::consts::LN_2 as f32));
        }
    });
    finish(kb)
}
