//! Per-thread arrays (`thread T name[N]`): each thread fills its own arrays
//! — scalars, vectors, a two-dimensional one through checked subscripts —
//! and reads them back at indices that differ per thread, so a backend that
//! shared one array between threads, or lost a write, gives other numbers.
//! Integer-valued data, so exact.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Scalar, Type};
use enigma_runtime::{Arg, Runtime};
use rand::Rng;

/// Thread `g` of `n`: `acc[i] = x[8g + i]·(i + 1)` in a `u32[8]`;
/// `vecs[j] = float4(acc[j] + acc[j + 4])` in an `f32x4[4]`;
/// `grid[r, c] = acc[(4r + c) % 8] - r·c` in an `i32[3][4]`. It writes
/// `Σ_i acc[(3i + g) % 8]·(i + 1)`, `vecs[g % 4] + vecs[(g + 1) % 4]` with
/// its lanes scaled by 1, 2, 3, 4, and `grid[g % 3, (g / 3) % 4]`.
pub fn thread_arrays(rt: &Runtime) -> CaseResult {
    seeded("thread_arrays", |rng| {
        let mut k = KernelBuilder::new("thread_arrays");
        let x = k.buffer("x", Type::U32, Access::Read);
        let sums = k.buffer("sums", Type::U32, Access::ReadWrite);
        let pairs = k.buffer("pairs", Type::vector(Scalar::F32, 4), Access::ReadWrite);
        let picks = k.buffer("picks", Type::I32, Access::ReadWrite);
        let n = k.value("n", Type::U32);
        let acc = k.thread_array("acc", Type::U32, 8);
        let vecs = k.thread_array("vecs", Type::vector(Scalar::F32, 4), 4);
        let grid = k.thread_array("grid", Type::I32, 12);
        let g = k.let_("g", thread_position_in_grid().x());
        k.if_(g.ge(n), |k| k.return_());
        k.for_range("i", 0u32, 8u32, 1u32, |k, i| k.store(acc.at(i), x.get(g * 8u32 + i) * (i + 1u32)));
        k.for_range("j", 0u32, 4u32, 1u32, |k, j| {
            let s = (acc.get(j) + acc.get(j + 4u32)).cast(Scalar::F32);
            k.store(vecs.at(j), vector(Type::vector(Scalar::F32, 4), &[s]));
        });
        k.for_range("r", 0u32, 3u32, 1u32, |k, r| {
            k.for_range("c", 0u32, 4u32, 1u32, |k, c| {
                let v = acc.get((r * 4u32 + c) % 8u32).cast(Scalar::I32) - (r * c).cast(Scalar::I32);
                k.store(grid.at_dims([r, c], [3u32.into(), 4u32.into()]), v);
            });
        });
        let s = k.var("s", 0u32);
        k.for_range("t", 0u32, 8u32, 1u32, |k, i| k.assign(s, s.get() + acc.get((i * 3u32 + g) % 8u32) * (i + 1u32)));
        k.store(sums.at(g), s.get());
        let scale = vector(Type::vector(Scalar::F32, 4), &[1.0f32.into(), 2.0f32.into(), 3.0f32.into(), 4.0f32.into()]);
        k.store(pairs.at(g), (vecs.get(g % 4u32) + vecs.get((g + 1u32) % 4u32)) * scale);
        k.store(picks.at(g), grid.at_dims([g % 3u32, (g / 3u32) % 4u32], [3u32.into(), 4u32.into()]).load());
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 301usize;
        let xs: Vec<u32> = (0..n * 8).map(|_| rng.gen_range(0..1000)).collect();
        let pb = rt.buffer_from_bytes(Type::vector(Scalar::F32, 4), &vec![0u8; n * 16]).ctx("allocating")?;
        let (xb, sb, kb) = (upload(rt, &xs)?, filled(rt, n, 0u32)?, filled(rt, n, 0i32)?);
        threads(rt, &p, &[Arg::from(&xb), Arg::from(&sb), Arg::from(&pb), Arg::from(&kb), Arg::u32(n as u32)], [n as u32 + 19, 1, 1], [64, 1, 1])?;
        let accs: Vec<[u32; 8]> = (0..n).map(|g| std::array::from_fn(|i| xs[g * 8 + i] * (i as u32 + 1))).collect();
        let want_sums: Vec<u32> =
            (0..n).map(|g| (0..8).map(|i| accs[g][(i * 3 + g) % 8] * (i as u32 + 1)).sum()).collect();
        let want_pairs: Vec<f32> = (0..n)
            .flat_map(|g| {
                let v = |j: usize| (accs[g][j] + accs[g][j + 4]) as f32;
                let s = v(g % 4) + v((g + 1) % 4);
                [s, 2.0 * s, 3.0 * s, 4.0 * s]
            })
            .collect();
        let want_picks: Vec<i32> = (0..n)
            .map(|g| {
                let (r, c) = (g % 3, (g / 3) % 4);
                accs[g][(r * 4 + c) % 8] as i32 - (r * c) as i32
            })
            .collect();
        check_eq("thread_arrays sums", &download::<u32>(&sb)?, &want_sums, |i| format!("thread {i}"))?;
        check_f32_exact("thread_arrays pairs", &download::<f32>(&pb)?, &want_pairs, |i| format!("thread {}, lane {}", i / 4, i % 4))?;
        check_eq("thread_arrays picks", &download::<i32>(&kb)?, &want_picks, |i| format!("thread {i}"))
    })
}
