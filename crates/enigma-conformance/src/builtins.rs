//! Builtins: all eleven thread-position attributes, as `uint3` values and
//! as scalar components, in 1-, 2- and 3-D grids, in both dispatch modes,
//! with non-uniform edge threadgroups in `dispatch_threads`; and every
//! threadgroup size class (1, 7, 31, 32, 33, 100, 1024 threads, so the last
//! SIMD group is partial).
//!
//! Reference semantics: in `dispatch_threads` the edge threadgroups have the
//! partial size along each axis, and that partial size is what
//! `threads_per_threadgroup` reports and what the linear
//! `thread_index_in_threadgroup` (x fastest) is computed with; SIMD groups are
//! formed from consecutive linear indices, so a partial threadgroup has
//! `ceil(threads / 32)` SIMD groups, the last possibly partial.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, AtomicOp, Builtin, MemFlags, Type};
use enigma_runtime::{Arg, DispatchMode, Runtime};

/// Slots per thread in the scalar record: 6 `uint3` builtins × 3 + 5 scalars.
const SLOTS: usize = 23;
const UNWRITTEN: u32 = 0xFFFF_FFFF;

fn slot_name(slot: usize) -> String {
    if slot < 18 {
        format!(
            "{}.{}",
            Builtin::ALL[slot / 3].name(),
            ["x", "y", "z"][slot % 3]
        )
    } else {
        Builtin::ALL[6 + slot - 18].name().to_string()
    }
}

/// Every thread counts itself at its linear grid position (atomically, so a
/// position run twice shows), and records every builtin.
fn builtins_kernel() -> Result<enigma_ir::Kernel, String> {
    let mut k = KernelBuilder::new("all_builtins");
    let rec = k.buffer("rec", Type::U32, Access::ReadWrite);
    let vecs = k.buffer("vecs", Type::UINT3, Access::ReadWrite);
    let count = k.buffer("count", Type::U32, Access::ReadWrite);
    let gx = k.value("gx", Type::U32);
    let gy = k.value("gy", Type::U32);
    let p = thread_position_in_grid();
    let lin = k.let_("lin", p.x() + p.y() * gx + p.z() * gx * gy);
    k.atomic(AtomicOp::Add, count.at(lin), 1u32);
    let base = k.let_("base", lin * SLOTS as u32);
    let mut slot = 0u32;
    for (i, b) in Builtin::ALL.into_iter().enumerate() {
        if b.is_vector() {
            let v = k.let_(&format!("v{i}"), builtin(b));
            k.store(vecs.at(lin * 6u32 + i as u32), v);
            for c in 0..3 {
                k.store(rec.at(base + slot), v.component(c));
                slot += 1;
            }
        } else {
            k.store(rec.at(base + slot), builtin(b));
            slot += 1;
        }
    }
    finish(k)
}

/// The expected record of every thread of a dispatch, by linear position in
/// the launched grid; and the launched grid's size.
fn expected_records(mode: DispatchMode, size: [u32; 3], tg: [u32; 3]) -> ([u32; 3], Vec<[u32; SLOTS]>) {
    let (grid, tgs) = match mode {
        DispatchMode::Threads => (size, [0, 1, 2].map(|a| size[a].div_ceil(tg[a]))),
        DispatchMode::Threadgroups => ([0, 1, 2].map(|a| size[a] * tg[a]), size),
    };
    let n = (grid[0] * grid[1] * grid[2]) as usize;
    let mut out = vec![[0u32; SLOTS]; n];
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for x in 0..grid[0] {
                let p = [x, y, z];
                let group = [0, 1, 2].map(|a| p[a] / tg[a]);
                let local = [0, 1, 2].map(|a| p[a] % tg[a]);
                let actual = match mode {
                    DispatchMode::Threads => [0, 1, 2].map(|a| tg[a].min(grid[a] - group[a] * tg[a])),
                    DispatchMode::Threadgroups => tg,
                };
                let threads = actual[0] * actual[1] * actual[2];
                let linear = local[0] + local[1] * actual[0] + local[2] * actual[0] * actual[1];
                let vectors = [p, local, group, actual, grid, tgs];
                let mut r = [0u32; SLOTS];
                for (i, v) in vectors.iter().enumerate() {
                    r[i * 3..i * 3 + 3].copy_from_slice(v);
                }
                r[18..].copy_from_slice(&[
                    linear,
                    linear % 32,
                    linear / 32,
                    threads.div_ceil(32),
                    32,
                ]);
                out[(x + y * grid[0] + z * grid[0] * grid[1]) as usize] = r;
            }
        }
    }
    (grid, out)
}

fn check_builtins(rt: &Runtime, mode: DispatchMode, geometries: &[([u32; 3], [u32; 3])]) -> CaseResult {
    let kernel = builtins_kernel()?;
    let p = pipeline(rt, &kernel)?;
    for &(size, tg) in geometries {
        let (grid, want) = expected_records(mode, size, tg);
        let n = want.len();
        let rec = filled(rt, n * SLOTS, UNWRITTEN)?;
        let vecs = rt
            .buffer_of_type(Type::UINT3, n * 6)
            .ctx("allocating a uint3 buffer")?;
        let count = rt.buffer_zeroed::<u32>(n).ctx("allocating")?;
        let args = [
            Arg::from(&rec),
            Arg::from(&vecs),
            Arg::from(&count),
            Arg::u32(grid[0]),
            Arg::u32(grid[1]),
        ];
        match mode {
            DispatchMode::Threads => threads(rt, &p, &args, size, tg)?,
            DispatchMode::Threadgroups => groups(rt, &p, &args, size, tg)?,
        }
        let what = format!("{mode:?} dispatch of {size:?} with threadgroup {tg:?}");
        let pos = |i: usize| {
            let (x, y, z) = (
                i as u32 % grid[0],
                (i as u32 / grid[0]) % grid[1],
                i as u32 / (grid[0] * grid[1]),
            );
            format!("thread ({x},{y},{z})")
        };
        check_eq(
            &format!("{what}: times each grid position ran"),
            &download::<u32>(&count)?,
            &vec![1u32; n],
            pos,
        )?;
        let got = download::<u32>(&rec)?;
        let flat: Vec<u32> = want.iter().flatten().copied().collect();
        check_eq(&format!("{what}: builtin values"), &got, &flat, |i| {
            format!("{}, {}", pos(i / SLOTS), slot_name(i % SLOTS))
        })?;
        // The uint3 values as stored whole: 4 words each, the 4th is padding.
        let words = download::<u32>(&vecs)?;
        let got3: Vec<u32> = words
            .chunks_exact(4)
            .flat_map(|c| [c[0], c[1], c[2]])
            .collect();
        let want3: Vec<u32> = want.iter().flat_map(|r| r[..18].iter().copied()).collect();
        check_eq(
            &format!("{what}: builtins stored as uint3"),
            &got3,
            &want3,
            |i| format!("{}, {} stored as uint3", pos(i / 18), slot_name(i % 18)),
        )?;
    }
    Ok(())
}

/// 1-D grids with partial last threadgroups (1000 = 15·64 + 40; 250 = 2·100 + 50;
/// a grid smaller than one threadgroup).
pub fn builtins_1d_threads(rt: &Runtime) -> CaseResult {
    check_builtins(
        rt,
        DispatchMode::Threads,
        &[
            ([1000, 1, 1], [64, 1, 1]),
            ([250, 1, 1], [100, 1, 1]),
            ([5, 1, 1], [32, 1, 1]),
        ],
    )
}

/// 2-D grids: 100×7 with 32×4 threadgroups (edge threadgroups 4 wide and 3
/// high), and others whose SIMD groups span several rows.
pub fn builtins_2d_threads(rt: &Runtime) -> CaseResult {
    check_builtins(
        rt,
        DispatchMode::Threads,
        &[
            ([100, 7, 1], [32, 4, 1]),
            ([37, 19, 1], [8, 8, 1]),
            ([33, 3, 1], [16, 16, 1]),
        ],
    )
}

pub fn builtins_3d_threads(rt: &Runtime) -> CaseResult {
    check_builtins(
        rt,
        DispatchMode::Threads,
        &[
            ([10, 9, 7], [4, 4, 4]),
            ([5, 6, 7], [2, 3, 4]),
            ([3, 40, 2], [1, 33, 2]),
        ],
    )
}

pub fn builtins_1d_threadgroups(rt: &Runtime) -> CaseResult {
    check_builtins(
        rt,
        DispatchMode::Threadgroups,
        &[([3, 1, 1], [100, 1, 1]), ([2, 1, 1], [1024, 1, 1])],
    )
}

pub fn builtins_2d_threadgroups(rt: &Runtime) -> CaseResult {
    check_builtins(
        rt,
        DispatchMode::Threadgroups,
        &[([4, 3, 1], [8, 4, 1]), ([2, 5, 1], [7, 9, 1])],
    )
}

pub fn builtins_3d_threadgroups(rt: &Runtime) -> CaseResult {
    check_builtins(
        rt,
        DispatchMode::Threadgroups,
        &[([2, 3, 2], [4, 2, 3]), ([3, 2, 2], [5, 5, 5])],
    )
}

/// Threadgroups of 1, 7, 31, 32, 33, 100 and 1024 threads, each dispatched
/// with a partial last threadgroup and in threadgroups mode. Every thread
/// reports the lanes of its SIMD group (`simd_sum(1)`), the lanes that exist
/// (`simd_ballot(true)`), the threads of its threadgroup counted through a
/// threadgroup-memory atomic between two barriers, and
/// `threads_per_threadgroup.x`.
pub fn threadgroup_sizes(rt: &Runtime) -> CaseResult {
    let mut k = KernelBuilder::new("threadgroup_sizes");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let counter = k.threadgroup_array("counter", Type::U32, 1);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.if_(lid.eq(0u32), |k| k.store(counter.at(0u32), 0u32));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.atomic(AtomicOp::Add, counter.at(0u32), 1u32);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let ballot = k.let_("ballot", simd_ballot(true));
    k.store(out.at(gid * 5u32), simd_sum(1u32));
    k.store(out.at(gid * 5u32 + 1u32), counter.get(0u32));
    k.store(out.at(gid * 5u32 + 2u32), ballot.cast(Type::U32));
    k.store(out.at(gid * 5u32 + 3u32), (ballot >> 32u64).cast(Type::U32));
    k.store(out.at(gid * 5u32 + 4u32), threads_per_threadgroup().x());
    let kernel = finish(k)?;
    let p = pipeline(rt, &kernel)?;
    for size in [1u32, 7, 31, 32, 33, 100, 1024] {
        for mode in [DispatchMode::Threads, DispatchMode::Threadgroups] {
            let (grid, groups_n) = match mode {
                DispatchMode::Threads => (2 * size + size / 2 + 1, 0),
                DispatchMode::Threadgroups => (2 * size, 2),
            };
            let buf = filled(rt, grid as usize * 5, UNWRITTEN)?;
            match mode {
                DispatchMode::Threads => threads(rt, &p, &[Arg::from(&buf)], [grid, 1, 1], [size, 1, 1])?,
                DispatchMode::Threadgroups => {
                    groups(rt, &p, &[Arg::from(&buf)], [groups_n, 1, 1], [size, 1, 1])?
                }
            }
            let mut want = Vec::with_capacity(grid as usize * 5);
            for t in 0..grid {
                let first = t / size * size;
                let actual = size.min(grid - first);
                let lid = t - first;
                let sg_first = lid / 32 * 32;
                let lanes = 32.min(actual - sg_first);
                let ballot = if lanes == 32 {
                    u32::MAX
                } else {
                    (1u32 << lanes) - 1
                };
                want.extend_from_slice(&[lanes, actual, ballot, 0, actual]);
            }
            let names = [
                "simd_sum(1)",
                "threadgroup count",
                "simd_ballot low",
                "simd_ballot high",
                "threads_per_threadgroup.x",
            ];
            check_eq(
                &format!("{mode:?} dispatch with {size}-thread threadgroups over {grid} threads"),
                &download::<u32>(&buf)?,
                &want,
                |i| format!("thread {}, {}", i / 5, names[i % 5]),
            )?;
        }
    }
    Ok(())
}
