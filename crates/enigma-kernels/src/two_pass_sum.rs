//! The seed-001 two-pass sum: pass 1 reduces each threadgroup to one partial
//! sum; pass 2 sums the partials.
//!
//! The seed's own pass 2 dispatches one threadgroup of `n / 256` threads —
//! 4096 for 2^20 floats — which exceeds the 1024-thread limit, and then sums
//! only 8 SIMD-group totals. [`reduce_final_seed`] keeps it as written so the
//! runtime's error can be shown; [`reduce_final`] is the valid pass 2: one
//! 1024-thread threadgroup striding over any number of partials.

use enigma_ir::builder::*;
use enigma_ir::{Access, Kernel, MemFlags, Type};

/// Threads per threadgroup of pass 1 (the seed's choice).
pub const PASS1_THREADS: u32 = 256;
/// Threads of the single threadgroup of the valid pass 2.
pub const PASS2_THREADS: u32 = 1024;

/// Pass 1, as in the seed, with two corrections that only matter for sizes
/// that are not a multiple of 256 (dispatched with `dispatch_threads`, whose
/// last threadgroup is partial): the number of SIMD groups is
/// `simdgroups_per_threadgroup` (the seed's `tg_size / 32` drops a partial
/// SIMD group), and the partial sums are indexed by threadgroup.
pub fn reduce_threadgroup() -> Kernel {
    let mut k = KernelBuilder::new("reduce_threadgroup");
    let a = k.buffer("A", Type::F32, Access::Read);
    let partial_out = k.buffer("PartialOut", Type::F32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let local_id = k.let_("local_id", thread_position_in_threadgroup().x());
    let simd_idx = k.let_("simd_idx", thread_index_in_simdgroup());
    let simd_gid = k.let_("simd_gid", simdgroup_index_in_threadgroup());
    let scratch = k.threadgroup_array("scratch", Type::F32, 32);
    let val = k.let_("val", a.get(tid));
    let simd_total = k.let_("simd_total", simd_sum(val));
    k.if_(simd_idx.eq(0u32), |k| k.store(scratch.at(simd_gid), simd_total));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let n_simd_groups = k.let_("n_simd_groups", simdgroups_per_threadgroup());
    k.if_(local_id.lt(n_simd_groups), |k| {
        let sub = k.let_("sub", scratch.get(local_id));
        let tg_sum = k.let_("tg_sum", simd_sum(sub));
        k.if_(local_id.eq(0u32), |k| {
            let group_id = k.let_("group_id", threadgroup_position_in_grid().x());
            k.store(partial_out.at(group_id), tg_sum);
        });
    });
    k.finish().expect("expressions belong to this builder")
}

/// The valid pass 2: one threadgroup of [`PASS2_THREADS`] threads; thread
/// `i` sums partials `i, i + 1024, …`, then the two-stage threadgroup sum.
pub fn reduce_final() -> Kernel {
    let mut k = KernelBuilder::new("reduce_final");
    let partial = k.buffer("Partial", Type::F32, Access::Read);
    let result = k.buffer("Result", Type::F32, Access::ReadWrite);
    let count = k.value("count", Type::U32);
    let scratch = k.threadgroup_array("scratch", Type::F32, 32);
    let local_id = k.let_("local_id", thread_index_in_threadgroup());
    let simd_idx = k.let_("simd_idx", thread_index_in_simdgroup());
    let simd_gid = k.let_("simd_gid", simdgroup_index_in_threadgroup());
    let sum = k.var("sum", 0.0f32);
    k.for_range("i", local_id, count, threads_per_threadgroup().x(), |k, i| {
        k.assign(sum, sum + partial.get(i));
    });
    let simd_total = k.let_("simd_total", simd_sum(sum.get()));
    k.if_(simd_idx.eq(0u32), |k| k.store(scratch.at(simd_gid), simd_total));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(simd_gid.eq(0u32), |k| {
        let sub = k.var("sub", 0.0f32);
        k.if_(simd_idx.lt(simdgroups_per_threadgroup()), |k| k.assign(sub, scratch.get(simd_idx)));
        let total = k.let_("total", simd_sum(sub.get()));
        k.if_(simd_idx.eq(0u32), |k| k.store(result.at(0u32), total));
    });
    k.finish().expect("expressions belong to this builder")
}

/// The seed's pass 2 as written (one threadgroup of `n_threadgroups`
/// threads, a serial sum of 8 SIMD-group totals). Dispatching it with 4096
/// threads fails: the threadgroup exceeds the 1024-thread maximum.
pub fn reduce_final_seed() -> Kernel {
    let mut k = KernelBuilder::new("reduce_final");
    let partial = k.buffer("Partial", Type::F32, Access::Read);
    let result = k.buffer("Result", Type::F32, Access::ReadWrite);
    let local_id = k.let_("local_id", thread_position_in_threadgroup().x());
    let simd_idx = k.let_("simd_idx", thread_index_in_simdgroup());
    let simd_gid = k.let_("simd_gid", simdgroup_index_in_threadgroup());
    let scratch = k.threadgroup_array("scratch", Type::F32, 32);
    let val = k.let_("val", partial.get(local_id));
    let simd_total = k.let_("simd_total", simd_sum(val));
    k.if_(simd_idx.eq(0u32), |k| k.store(scratch.at(simd_gid), simd_total));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(local_id.eq(0u32), |k| {
        let fin = k.var("final", 0.0f32);
        k.for_range("i", 0u32, 8u32, 1u32, |k, i| k.assign(fin, fin + scratch.get(i)));
        k.store(result.at(0u32), fin);
    });
    k.finish().expect("expressions belong to this builder")
}

/// Threadgroups of pass 1 for `n` elements (the last one partial when `n`
/// is not a multiple of [`PASS1_THREADS`]).
pub fn pass1_threadgroups(n: u32) -> u32 {
    n.div_ceil(PASS1_THREADS)
}

/// The f64 reference sum.
pub fn reference_sum(data: &[f32]) -> f64 {
    data.iter().map(|&x| x as f64).sum()
}

/// A bandwidth-oriented pass 1 for large inputs: each thread strides over
/// `float4` elements (`n4` of them) with a grid-stride loop, so a few
/// threadgroups per core cover any size; then the same two-stage
/// threadgroup sum. Launch about `cores × threadgroups per core`
/// threadgroups of [`PASS1_THREADS`]; pass 2 ([`reduce_final`]) sums their
/// partials.
pub fn reduce_threadgroup_vec4() -> Kernel {
    use enigma_ir::Scalar;
    let mut k = KernelBuilder::new("reduce_threadgroup_vec4");
    let a = k.buffer("A", Type::vector(Scalar::F32, 4), Access::Read);
    let partial_out = k.buffer("PartialOut", Type::F32, Access::ReadWrite);
    let n4 = k.value("n4", Type::U32);
    let scratch = k.threadgroup_array("scratch", Type::F32, 32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let stride = k.let_("stride", threads_per_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let simd_gid = k.let_("simd_gid", simdgroup_index_in_threadgroup());
    let sum = k.var("sum", 0.0f32);
    k.for_range("i", tid, n4, stride, |k, i| {
        let v = k.let_("v", a.get(i));
        k.assign(sum, sum + ((v.x() + v.y()) + (v.z() + v.w())));
    });
    let simd_total = k.let_("simd_total", simd_sum(sum.get()));
    k.if_(lane.eq(0u32), |k| k.store(scratch.at(simd_gid), simd_total));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(simd_gid.eq(0u32), |k| {
        let sub = k.var("sub", 0.0f32);
        k.if_(lane.lt(simdgroups_per_threadgroup()), |k| k.assign(sub, scratch.get(lane)));
        let total = k.let_("total", simd_sum(sub.get()));
        k.if_(lane.eq(0u32), |k| k.store(partial_out.at(threadgroup_position_in_grid().x()), total));
    });
    k.finish().expect("expressions belong to this builder")
}
