//! Threadgroup memory and barriers: a write phase, `threadgroup_barrier`,
//! then reads of other threads' slots (neighbour, mirror, SIMD partner after
//! a `simdgroup_barrier`); a scan with barriers inside a uniform loop; a
//! tiled transpose with bounds checks in threadgroups mode, also written
//! with multi-dimensional subscripts. Integer data, so exact.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, MemFlags, Scalar, Type};
use enigma_runtime::{Arg, DispatchMode, Runtime};
use rand::Rng;

/// Geometry helper: for a dispatch, the threads of each threadgroup by
/// linear index, as grid positions, and each thread's (group, linear index,
/// group size).
struct Layout {
    grid: [u32; 3],
    /// Per linear grid position: (threadgroup number, linear index in it, its thread count).
    place: Vec<(usize, u32, u32)>,
    /// Per threadgroup: linear grid position of each thread, by linear index.
    members: Vec<Vec<usize>>,
}

fn layout(mode: DispatchMode, size: [u32; 3], tg: [u32; 3]) -> Layout {
    let (grid, tgs) = match mode {
        DispatchMode::Threads => (size, [0, 1, 2].map(|a| size[a].div_ceil(tg[a]))),
        DispatchMode::Threadgroups => ([0, 1, 2].map(|a| size[a] * tg[a]), size),
    };
    let n = (grid[0] * grid[1] * grid[2]) as usize;
    let groups = (tgs[0] * tgs[1] * tgs[2]) as usize;
    let mut place = vec![(0, 0, 0); n];
    let mut members = vec![vec![]; groups];
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for x in 0..grid[0] {
                let p = [x, y, z];
                let g = [0, 1, 2].map(|a| p[a] / tg[a]);
                let l = [0, 1, 2].map(|a| p[a] % tg[a]);
                let actual = [0, 1, 2].map(|a| tg[a].min(grid[a] - g[a] * tg[a]));
                let gi = (g[0] + g[1] * tgs[0] + g[2] * tgs[0] * tgs[1]) as usize;
                let li = l[0] + l[1] * actual[0] + l[2] * actual[0] * actual[1];
                let pi = (x + y * grid[0] + z * grid[0] * grid[1]) as usize;
                place[pi] = (gi, li, actual[0] * actual[1] * actual[2]);
                let m = &mut members[gi];
                if m.len() <= li as usize {
                    m.resize(li as usize + 1, usize::MAX);
                }
                m[li as usize] = pi;
            }
        }
    }
    Layout {
        grid,
        place,
        members,
    }
}

/// Each thread writes `x * 2 + 1` to its slot and `half(lid)` to a half
/// array; after a barrier it reads its neighbour's slot (`(lid + 1) % size`),
/// the mirrored slot (`size - 1 - lid`) and the mirrored half; after a
/// `simdgroup_barrier`, its SIMD partner's (`lid ^ 1`) slot of a second
/// array, when the partner exists.
pub fn threadgroup_memory_neighbours(rt: &Runtime) -> CaseResult {
    seeded("threadgroup_memory_neighbours", |rng| {
        let mut k = KernelBuilder::new("neighbours");
        let input = k.buffer("input", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let gx = k.value("gx", Type::U32);
        let slots = k.threadgroup_array("slots", Type::U32, 1024);
        let halves = k.threadgroup_array("halves", Type::F16, 1024);
        let pair = k.threadgroup_array("pair", Type::U32, 1024);
        let p = thread_position_in_grid();
        let gid = k.let_("gid", p.x() + p.y() * gx);
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let t = threads_per_threadgroup();
        let size = k.let_("size", t.x() * t.y() * t.z());
        let x = k.let_("x", input.get(gid));
        k.store(slots.at(lid), x * 2u32 + 1u32);
        k.store(halves.at(lid), lid.cast(Scalar::F16));
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.store(out.at(gid * 4u32), slots.get((lid + 1u32) % size));
        k.store(out.at(gid * 4u32 + 1u32), slots.get(size - 1u32 - lid));
        k.store(
            out.at(gid * 4u32 + 2u32),
            halves.get(size - 1u32 - lid).cast(Type::U32),
        );
        k.store(pair.at(lid), x ^ 0x5555u32);
        k.simdgroup_barrier(MemFlags::Threadgroup);
        let partner = k.let_("partner", lid ^ 1u32);
        let r = k.var("r", x);
        k.if_(partner.lt(size), |k| k.assign(r, pair.get(partner)));
        k.store(out.at(gid * 4u32 + 3u32), r);
        let kernel = finish(k)?;
        let pl = pipeline(rt, &kernel)?;
        let cases: [(DispatchMode, [u32; 3], [u32; 3]); 4] = [
            (DispatchMode::Threads, [250, 1, 1], [100, 1, 1]),
            (DispatchMode::Threads, [37, 9, 1], [16, 4, 1]),
            (DispatchMode::Threadgroups, [3, 1, 1], [64, 1, 1]),
            (DispatchMode::Threadgroups, [2, 2, 1], [7, 5, 1]),
        ];
        for (mode, size, tg) in cases {
            let lay = layout(mode, size, tg);
            let n = lay.place.len();
            let xs: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1 << 30)).collect();
            let ib = upload(rt, &xs)?;
            let ob = filled(rt, n * 4, 0xDEAD_BEEFu32)?;
            let args = [Arg::from(&ib), Arg::from(&ob), Arg::u32(lay.grid[0])];
            match mode {
                DispatchMode::Threads => threads(rt, &pl, &args, size, tg)?,
                DispatchMode::Threadgroups => groups(rt, &pl, &args, size, tg)?,
            }
            let mut want = Vec::with_capacity(n * 4);
            for pi in 0..n {
                let (g, li, sz) = lay.place[pi];
                let m = &lay.members[g];
                let partner = li ^ 1;
                want.extend([
                    xs[m[((li + 1) % sz) as usize]] * 2 + 1,
                    xs[m[(sz - 1 - li) as usize]] * 2 + 1,
                    sz - 1 - li,
                    if partner < sz {
                        xs[m[partner as usize]] ^ 0x5555
                    } else {
                        xs[pi]
                    },
                ]);
            }
            let names = [
                "neighbour slot",
                "mirrored slot",
                "mirrored half slot",
                "SIMD partner after simdgroup_barrier",
            ];
            check_eq(
                &format!("{mode:?} dispatch {size:?} with threadgroup {tg:?}"),
                &download::<u32>(&ob)?,
                &want,
                |i| {
                    let (g, li, sz) = lay.place[i / 4];
                    format!(
                        "thread {} (threadgroup {g}, index {li} of {sz}), {}",
                        i / 4,
                        names[i % 4]
                    )
                },
            )?;
        }
        Ok(())
    })
}

/// An inclusive Hillis–Steele scan in threadgroup memory: `while (offset <
/// size)` with two barriers per iteration, a divergent read inside; 256-thread
/// threadgroups and a partial last one.
pub fn threadgroup_memory_scan(rt: &Runtime) -> CaseResult {
    seeded("threadgroup_memory_scan", |rng| {
        let mut k = KernelBuilder::new("scan");
        let input = k.buffer("input", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let buf = k.threadgroup_array("buf", Type::U32, 256);
        let gid = k.let_("gid", thread_position_in_grid().x());
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let size = k.let_("size", threads_per_threadgroup().x());
        k.store(buf.at(lid), input.get(gid));
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let offset = k.var("offset", 1u32);
        k.while_(offset.get().lt(size), |k| {
            let v = k.var("v", buf.get(lid));
            k.if_(lid.ge(offset), |k| k.assign(v, v + buf.get(lid - offset)));
            k.threadgroup_barrier(MemFlags::Threadgroup);
            k.store(buf.at(lid), v);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            k.assign(offset, offset * 2u32);
        });
        k.store(out.at(gid), buf.get(lid));
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 1000usize;
        let xs: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let ib = upload(rt, &xs)?;
        let ob = rt.buffer_zeroed::<u32>(n).ctx("allocating")?;
        threads(
            rt,
            &p,
            &[Arg::from(&ib), Arg::from(&ob)],
            [n as u32, 1, 1],
            [256, 1, 1],
        )?;
        let mut want = vec![0u32; n];
        for g in (0..n).step_by(256) {
            let mut acc = 0u32;
            for i in g..(g + 256).min(n) {
                acc = acc.wrapping_add(xs[i]);
                want[i] = acc;
            }
        }
        check_eq(
            "inclusive scan per 256-thread threadgroup",
            &download::<u32>(&ob)?,
            &want,
            |i| format!("element {i}"),
        )
    })
}

/// A 16×16 tiled transpose through threadgroup memory, dispatched as whole
/// threadgroups over a 37×29 matrix: out-of-range threads stage zeros, every
/// thread reaches the barrier, and only in-range threads write.
pub fn threadgroup_memory_transpose(rt: &Runtime) -> CaseResult {
    seeded("threadgroup_memory_transpose", |rng| {
        const T: u32 = 16;
        let mut k = KernelBuilder::new("transpose");
        let input = k.buffer("input", Type::F32, Access::Read);
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let rows = k.value("rows", Type::U32);
        let cols = k.value("cols", Type::U32);
        let tile = k.threadgroup_array("tile", Type::F32, T * T);
        let g = threadgroup_position_in_grid();
        let l = thread_position_in_threadgroup();
        let (lx, ly) = (k.let_("lx", l.x()), k.let_("ly", l.y()));
        let r = k.let_("r", g.y() * T + ly);
        let c = k.let_("c", g.x() * T + lx);
        let v = k.var("v", 0.0f32);
        k.if_(r.lt(rows).and(c.lt(cols)), |k| {
            k.assign(v, input.get(r * cols + c))
        });
        k.store(tile.at(ly * T + lx), v);
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let orow = k.let_("orow", g.x() * T + ly);
        let ocol = k.let_("ocol", g.y() * T + lx);
        k.if_(orow.lt(cols).and(ocol.lt(rows)), |k| {
            k.store(out.at(orow * rows + ocol), tile.get(lx * T + ly))
        });
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let (rows_n, cols_n) = (37u32, 29u32);
        let xs: Vec<f32> = (0..rows_n * cols_n)
            .map(|_| normal_f32(rng, -10, 10))
            .collect();
        let ib = upload(rt, &xs)?;
        let ob = filled(rt, xs.len(), -1.0f32)?;
        let tgs = [cols_n.div_ceil(T), rows_n.div_ceil(T), 1];
        groups(
            rt,
            &p,
            &[
                Arg::from(&ib),
                Arg::from(&ob),
                Arg::u32(rows_n),
                Arg::u32(cols_n),
            ],
            tgs,
            [T, T, 1],
        )?;
        let want: Vec<f32> = (0..cols_n)
            .flat_map(|c| (0..rows_n).map(move |r| (r, c)))
            .map(|(r, c)| xs[(r * cols_n + c) as usize])
            .collect();
        check_f32_exact("transpose", &download::<f32>(&ob)?, &want, |i| {
            format!("out[{}][{}]", i / rows_n as usize, i % rows_n as usize)
        })
    })
}

/// The tiled transpose written with multi-dimensional subscripts
/// (`Mem::at_dims`): `input[r, c]` of a `[rows, cols]` buffer into a
/// `[T, T + 1]` threadgroup tile, out as `out[c, r]` of `[cols, rows]`.
/// Every subscript carries its dimension check, which GPUs leave out.
pub fn multi_dim_transpose(rt: &Runtime) -> CaseResult {
    seeded("multi_dim_transpose", |rng| {
        const T: u32 = 16;
        let mut k = KernelBuilder::new("transpose_2d");
        let input = k.buffer("input", Type::F32, Access::Read);
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let rows = k.value("rows", Type::U32);
        let cols = k.value("cols", Type::U32);
        let tile = k.threadgroup_array("tile", Type::F32, T * (T + 1));
        let tile_shape = || [Ex::from(T), Ex::from(T + 1)];
        let g = threadgroup_position_in_grid();
        let l = thread_position_in_threadgroup();
        let (lx, ly) = (k.let_("lx", l.x()), k.let_("ly", l.y()));
        let r = k.let_("r", g.y() * T + ly);
        let c = k.let_("c", g.x() * T + lx);
        let v = k.var("v", 0.0f32);
        k.if_(r.lt(rows).and(c.lt(cols)), |k| k.assign(v, input.at_dims([r, c], [rows, cols]).load()));
        k.store(tile.at_dims([ly, lx], tile_shape()), v);
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let orow = k.let_("orow", g.x() * T + ly);
        let ocol = k.let_("ocol", g.y() * T + lx);
        k.if_(orow.lt(cols).and(ocol.lt(rows)), |k| {
            k.store(out.at_dims([orow, ocol], [cols, rows]), tile.at_dims([lx, ly], tile_shape()).load())
        });
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let (rows_n, cols_n) = (37u32, 29u32);
        let xs: Vec<f32> = (0..rows_n * cols_n).map(|_| normal_f32(rng, -10, 10)).collect();
        let ib = upload(rt, &xs)?;
        let ob = filled(rt, xs.len(), -1.0f32)?;
        let tgs = [cols_n.div_ceil(T), rows_n.div_ceil(T), 1];
        groups(rt, &p, &[Arg::from(&ib), Arg::from(&ob), Arg::u32(rows_n), Arg::u32(cols_n)], tgs, [T, T, 1])?;
        let want: Vec<f32> =
            (0..cols_n).flat_map(|c| (0..rows_n).map(move |r| (r, c))).map(|(r, c)| xs[(r * cols_n + c) as usize]).collect();
        check_f32_exact("transpose_2d", &download::<f32>(&ob)?, &want, |i| format!("out[{}, {}]", i / rows_n as usize, i % rows_n as usize))
    })
}

/// Device memory shared within a threadgroup: each thread writes its slot of
/// a device buffer, `threadgroup_barrier(mem_device)` (and
/// `mem_device | mem_threadgroup`) orders the writes, then each reads its
/// neighbour's slot.
pub fn device_memory_barrier(rt: &Runtime) -> CaseResult {
    seeded("device_memory_barrier", |rng| {
        let mut k = KernelBuilder::new("device_barrier");
        let input = k.buffer("input", Type::U32, Access::Read);
        let scratch = k.buffer("scratch", Type::U32, Access::ReadWrite);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let gid = k.let_("gid", thread_position_in_grid().x());
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let size = k.let_("size", threads_per_threadgroup().x());
        let base = k.let_("base", gid - lid);
        k.store(scratch.at(gid), input.get(gid) + 1u32);
        k.threadgroup_barrier(MemFlags::Device);
        let first = k.let_("first", scratch.get(base + (lid + 1u32) % size));
        k.threadgroup_barrier(MemFlags::DeviceAndThreadgroup);
        k.store(scratch.at(gid), first * 2u32);
        k.threadgroup_barrier(MemFlags::DeviceAndThreadgroup);
        k.store(out.at(gid), scratch.get(base + size - 1u32 - lid));
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let (n, tg) = (300usize, 128usize);
        let xs: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1 << 28)).collect();
        let ib = upload(rt, &xs)?;
        let sb = filled(rt, n, 0u32)?;
        let ob = filled(rt, n, 0u32)?;
        threads(
            rt,
            &p,
            &[Arg::from(&ib), Arg::from(&sb), Arg::from(&ob)],
            [n as u32, 1, 1],
            [tg as u32, 1, 1],
        )?;
        let want: Vec<u32> = (0..n)
            .map(|g| {
                let base = g / tg * tg;
                let size = tg.min(n - base);
                let lid = g - base;
                let m = base + size - 1 - lid; // whose second value we read
                let ml = m - base;
                (xs[base + (ml + 1) % size] + 1) * 2
            })
            .collect();
        check_eq(
            "exchange through device memory and threadgroup_barrier(mem_device)",
            &download::<u32>(&ob)?,
            &want,
            |i| format!("thread {i}"),
        )
    })
}
