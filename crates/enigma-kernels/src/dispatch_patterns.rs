//! The kernels of seed 000 ("Threadgroups, SIMD Groups, and Dispatch"),
//! written with the builder DSL so they read close to their MSL. Where the
//! seed elides code ("two-stage reduction as before") it is completed here.

use enigma_ir::builder::*;
use enigma_ir::{Access, Kernel, MemFlags, Scalar, Type};

fn finish(k: KernelBuilder) -> Kernel {
    k.finish().expect("seed kernels use only expressions of their own builder")
}

/// Pattern A: `data[tid] = half(float(data[tid]) * factor);`
pub fn scale() -> Kernel {
    let mut k = KernelBuilder::new("scale");
    let data = k.buffer("data", Type::F16, Access::ReadWrite);
    let factor = k.value("factor", Type::F32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(data.at(tid), (data.get(tid).cast(Type::F32) * factor).cast(Type::F16));
    finish(k)
}

/// Pattern B: `half4 v = data[tid]; data[tid] = half4(float4(v) * factor);`
pub fn scale_vec4() -> Kernel {
    let half4 = Type::vector(Scalar::F16, 4);
    let float4 = Type::vector(Scalar::F32, 4);
    let mut k = KernelBuilder::new("scale_vec4");
    let data = k.buffer("data", half4, Access::ReadWrite);
    let factor = k.value("factor", Type::F32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let v = k.let_("v", data.get(tid));
    k.store(data.at(tid), (v.cast(float4) * factor).cast(half4));
    finish(k)
}

/// The two-stage cross-SIMD-group sum of `value` over the threadgroup
/// (seed 000, Pattern 5), leaving the total in every thread. `partials` needs
/// one slot per SIMD group; `shared_total` one slot.
fn threadgroup_sum(k: &mut KernelBuilder, value: Ex, partials: Mem, shared_total: Mem) -> Ex {
    let lane = thread_index_in_simdgroup();
    let simd_id = simdgroup_index_in_threadgroup();
    let lid = thread_index_in_threadgroup();
    // Stage 1: each SIMD group reduces its 32 values.
    let local_sum = k.let_("local_sum", simd_sum(value));
    k.if_(lane.eq(0u32), |k| k.store(partials.at(simd_id), local_sum));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    // Stage 2: the first SIMD group reduces the partial sums. (The seed leaves
    // `total` unassigned in the other threads; enigma requires a value.)
    let total = k.var("total", 0.0f32);
    k.if_(simd_id.eq(0u32).and(lane.lt(simdgroups_per_threadgroup())), |k| {
        k.assign(total, simd_sum(partials.get(lane)));
    });
    k.if_(lid.eq(0u32), |k| k.store(shared_total.at(0u32), total));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.let_("tg_total", shared_total.get(0u32))
}

/// Pattern C: one threadgroup per row; threads stride through the columns,
/// then the two-stage reduction. Dispatch: threadgroups = rows, 256 threads.
pub fn row_sum() -> Kernel {
    let mut k = KernelBuilder::new("row_sum");
    let matrix = k.buffer("matrix", Type::F32, Access::Read);
    let sums = k.buffer("sums", Type::F32, Access::ReadWrite);
    let cols = k.value("cols", Type::U32);
    let partials = k.threadgroup_array("partials", Type::F32, 32);
    let shared_total = k.threadgroup_array("shared_total", Type::F32, 1);
    let row = k.let_("row", threadgroup_position_in_grid().x());
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let sum = k.var("sum", 0.0f32);
    k.for_range("col", lid, cols, threads_per_threadgroup().x(), |k, col| {
        k.assign(sum, sum + matrix.get(row * cols + col));
    });
    let total = threadgroup_sum(&mut k, sum.get(), partials, shared_total);
    k.if_(lid.eq(0u32), |k| k.store(sums.at(row), total));
    finish(k)
}

/// Pattern 5 as a kernel: every thread writes its threadgroup's total.
pub fn two_stage_reduction() -> Kernel {
    let mut k = KernelBuilder::new("two_stage_reduction");
    let data = k.buffer("data", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let partials = k.threadgroup_array("partials", Type::F32, 32);
    let shared_total = k.threadgroup_array("shared_total", Type::F32, 1);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let my_value = k.let_("my_value", data.get(tid));
    let total = threadgroup_sum(&mut k, my_value, partials, shared_total);
    k.store(out.at(tid), total);
    finish(k)
}

/// Pattern 2: lane 0 computes a value, every lane receives it through
/// `simd_broadcast_first`; and `simd_shuffle` from a chosen lane.
pub fn simd_broadcast_pattern() -> Kernel {
    let mut k = KernelBuilder::new("simd_broadcast_pattern");
    let data = k.buffer("data", Type::F32, Access::Read);
    let first = k.buffer("first", Type::F32, Access::ReadWrite);
    let from_lane = k.buffer("from_lane", Type::F32, Access::ReadWrite);
    let source_lane = k.value("source_lane", Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let lane = k.let_("simd_lane", thread_index_in_simdgroup());
    let value = k.var("value", 0.0f32);
    k.if_(lane.eq(0u32), |k| k.assign(value, exp(data.get(tid))));
    k.store(first.at(tid), simd_broadcast_first(value.get()));
    k.store(from_lane.at(tid), simd_shuffle(data.get(tid), source_lane));
    finish(k)
}

/// Pattern 3: `prefix = simd_prefix_inclusive_sum(data[tid])`.
pub fn prefix_sum() -> Kernel {
    let mut k = KernelBuilder::new("prefix_sum");
    let data = k.buffer("data", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let val = k.let_("val", data.get(tid));
    k.store(out.at(tid), simd_prefix_inclusive_sum(val));
    finish(k)
}

/// Pattern 4: the 1-D stencil [0.25, 0.5, 0.25] through SIMD-group
/// shuffles. At the SIMD group's edges a lane takes its own value (as
/// `simd_shuffle_up` gives lane 0). The left neighbour is
/// `simd_shuffle_up(x, 1)`: its delta is the same in every lane, as MSL
/// requires, and the lane before an active lane is always active. The right
/// neighbour is `simd_shuffle(x, lane)` from a per-lane source lane — the
/// lane itself at lane 31 and at the grid's last thread, where the next lane
/// of a partial SIMD group is inactive and reading it would be undefined;
/// `simd_shuffle_down` cannot say that, because its delta must be uniform.
pub fn shuffle_stencil() -> Kernel {
    let mut k = KernelBuilder::new("shuffle_stencil");
    let data = k.buffer("data", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let my_val = k.let_("my_val", data.get(tid));
    let left = k.let_("left", simd_shuffle_up(my_val, 1u32));
    let at_edge = lane.eq(31u32).or((tid + 1u32).ge(threads_per_grid().x()));
    let right_lane = k.let_("right_lane", select(lane + 1u32, lane, at_edge));
    let right = k.let_("right", simd_shuffle(my_val, right_lane));
    k.store(out.at(tid), 0.25f32 * left + 0.5f32 * my_val + 0.25f32 * right);
    finish(k)
}

/// Tile sizes of [`gemm_tiled`]: each 128-thread threadgroup computes a
/// `TM × TN` tile of C, staging `TK`-wide slices of A and B in threadgroup memory.
pub const GEMM_TM: u32 = 32;
pub const GEMM_TN: u32 = 64;
pub const GEMM_TK: u32 = 16;
pub const GEMM_THREADS: u32 = 128;

/// Pattern D: `C[M,N] = A[M,K]·B[K,N]` in half with float accumulation. The grid
/// is `(ceil(N/TN), ceil(M/TM))` threadgroups of 128 threads; `gid.y` is the
/// tile row, `gid.x` the tile column. Each thread owns column `lid % 64` of
/// rows `lid / 64 + 2·j` (16 accumulators, unrolled by the Rust loop).
pub fn gemm_tiled() -> Kernel {
    let (tm, tn, tk, threads) = (GEMM_TM, GEMM_TN, GEMM_TK, GEMM_THREADS);
    let rows_per_thread = tm * tn / threads;
    let mut k = KernelBuilder::new("gemm_tiled");
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let c = k.buffer("C", Type::F16, Access::ReadWrite);
    let m = k.value("M", Type::U32);
    let n = k.value("N", Type::U32);
    let kk = k.value("K", Type::U32);
    let a_tile = k.threadgroup_array("a_tile", Type::F16, tm * tk);
    let b_tile = k.threadgroup_array("b_tile", Type::F16, tk * tn);
    let gid = threadgroup_position_in_grid();
    let tile_row = k.let_("tile_row", gid.y() * tm);
    let tile_col = k.let_("tile_col", gid.x() * tn);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let col = k.let_("col", lid % tn);
    let row0 = k.let_("row0", lid / tn);
    let acc: Vec<Var> = (0..rows_per_thread).map(|j| k.var(&format!("acc{j}"), 0.0f32)).collect();
    k.for_range("k0", 0u32, kk, tk, |k, k0| {
        // Stage A[tile_row.., k0..k0+TK] and B[k0.., tile_col..], zero-padded.
        k.for_range("ia", lid, tm * tk, threads, |k, i| {
            let (r, kc) = (tile_row + i / tk, k0 + i % tk);
            let v = k.var("a_val", 0.0f32);
            k.if_(r.lt(m).and(kc.lt(kk)), |k| k.assign(v, a.get(r * kk + kc).cast(Type::F32)));
            k.store(a_tile.at(i), v.get().cast(Type::F16));
        });
        k.for_range("ib", lid, tk * tn, threads, |k, i| {
            let (kr, cc) = (k0 + i / tn, tile_col + i % tn);
            let v = k.var("b_val", 0.0f32);
            k.if_(kr.lt(kk).and(cc.lt(n)), |k| k.assign(v, b.get(kr * n + cc).cast(Type::F32)));
            k.store(b_tile.at(i), v.get().cast(Type::F16));
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.for_range("kk", 0u32, tk, 1u32, |k, kx| {
            let bv = k.let_("b_k", b_tile.get(kx * tn + col).cast(Type::F32));
            for (j, accj) in acc.iter().enumerate() {
                let r = row0 + (j as u32) * (threads / tn);
                k.assign(*accj, fma(a_tile.get(r * tk + kx).cast(Type::F32), bv, *accj));
            }
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
    });
    for (j, accj) in acc.iter().enumerate() {
        let r = k.let_(&format!("r{j}"), tile_row + row0 + (j as u32) * (threads / tn));
        let cc = tile_col + col;
        k.if_(r.lt(m).and(cc.lt(n)), |k| k.store(c.at(r * n + cc), accj.get().cast(Type::F16)));
    }
    finish(k)
}

/// Pitfall 3: `if (tid >= count) return;` before the work.
pub fn safe_scale() -> Kernel {
    let mut k = KernelBuilder::new("safe_scale");
    let data = k.buffer("data", Type::F16, Access::ReadWrite);
    let count = k.value("count", Type::U32);
    let factor = k.value("factor", Type::F32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.ge(count), |k| k.return_());
    k.store(data.at(tid), (data.get(tid).cast(Type::F32) * factor).cast(Type::F16));
    finish(k)
}

/// Every seed-000 kernel, for tests that run them all.
pub fn all() -> Vec<Kernel> {
    vec![
        scale(),
        scale_vec4(),
        row_sum(),
        two_stage_reduction(),
        simd_broadcast_pattern(),
        prefix_sum(),
        shuffle_stencil(),
        gemm_tiled(),
        safe_scale(),
    ]
}
