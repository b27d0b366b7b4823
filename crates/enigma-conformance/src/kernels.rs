//! The kernels of `enigma_kernels` (seed 000's teaching kernels and seed
//! 001's two-pass reduction) against plain-Rust references.
//!
//! Sums whose order is unspecified use inputs that make every order exact
//! (multiples of 1/4, or for GEMM products of multiples of 1/8) so they are
//! compared exactly; the seed-001 reduction and a random-float row sum use
//! `enigma_kernels::sum_tolerance` (a few ulps per summation level on Σ|x|).

use crate::util::*;
use enigma_kernels::{two_pass_sum, dispatch_patterns};
use enigma_runtime::{Arg, Runtime};
use rand::Rng;

/// `scale`: `data[tid] = half(float(data[tid]) * factor)` — the product
/// rounded to f32, then to half; and `safe_scale` with `count` below the
/// dispatched threads (threadgroups mode): elements past `count` untouched.
pub fn seed000_scale(rt: &Runtime) -> CaseResult {
    seeded("seed000_scale", |rng| {
        let n = 1000usize;
        let data: Vec<u16> = (0..n).map(|_| f32_to_f16(normal_f32(rng, -8, 8))).collect();
        let factor = 1.7f32;
        let want: Vec<u16> = data
            .iter()
            .map(|&h| f32_to_f16(f16_to_f32(h) * factor))
            .collect();
        let buf = upload_f16(rt, &data)?;
        let p = pipeline(rt, &dispatch_patterns::scale())?;
        threads(
            rt,
            &p,
            &[Arg::from(&buf), Arg::f32(factor)],
            [n as u32, 1, 1],
            [256, 1, 1],
        )?;
        check_eq("scale", &download_u16_bits(&buf)?, &want, |i| {
            format!("half {:#06x}", data[i])
        })?;

        let buf = upload_f16(rt, &data)?;
        let p = pipeline(rt, &dispatch_patterns::safe_scale())?;
        let count = 900u32;
        groups(
            rt,
            &p,
            &[Arg::from(&buf), Arg::u32(count), Arg::f32(factor)],
            [4, 1, 1],
            [256, 1, 1],
        )?;
        let want: Vec<u16> = (0..n)
            .map(|i| if i < count as usize { want[i] } else { data[i] })
            .collect();
        check_eq(
            "safe_scale with count 900 of 1024 threads",
            &download_u16_bits(&buf)?,
            &want,
            |i| format!("half {:#06x}", data[i]),
        )
    })
}

/// `scale_vec4` on `half4` elements.
pub fn seed000_scale_vec4(rt: &Runtime) -> CaseResult {
    seeded("seed000_scale_vec4", |rng| {
        let n = 300usize;
        let data: Vec<u16> = (0..4 * n)
            .map(|_| f32_to_f16(normal_f32(rng, -8, 8)))
            .collect();
        let factor = -0.3f32;
        let want: Vec<u16> = data
            .iter()
            .map(|&h| f32_to_f16(f16_to_f32(h) * factor))
            .collect();
        let half4 = enigma_ir::Type::vector(enigma_ir::Scalar::F16, 4);
        let bytes: Vec<u8> = data.iter().flat_map(|h| h.to_le_bytes()).collect();
        let buf = rt.buffer_from_bytes(half4, &bytes).ctx("allocating")?;
        let p = pipeline(rt, &dispatch_patterns::scale_vec4())?;
        threads(
            rt,
            &p,
            &[Arg::from(&buf), Arg::f32(factor)],
            [n as u32, 1, 1],
            [64, 1, 1],
        )?;
        check_eq("scale_vec4", &download_u16_bits(&buf)?, &want, |i| {
            format!("element {}, component {}", i / 4, i % 4)
        })
    })
}

/// `two_stage_reduction`: every thread gets its threadgroup's total, with
/// 256-thread threadgroups and with 100-thread ones (a partial SIMD group
/// in every threadgroup, a partial last threadgroup).
pub fn seed000_two_stage_reduction(rt: &Runtime) -> CaseResult {
    seeded("seed000_two_stage_reduction", |rng| {
        let p = pipeline(rt, &dispatch_patterns::two_stage_reduction())?;
        for (n, tg) in [(1024usize, 256u32), (250, 100), (96, 96)] {
            let data: Vec<f32> = (0..n).map(|_| quarter(rng, 400)).collect();
            let db = upload(rt, &data)?;
            let ob = filled(rt, n, -1.0f32)?;
            threads(
                rt,
                &p,
                &[Arg::from(&db), Arg::from(&ob)],
                [n as u32, 1, 1],
                [tg, 1, 1],
            )?;
            let want: Vec<f32> = (0..n)
                .map(|i| {
                    let g = i / tg as usize * tg as usize;
                    data[g..(g + tg as usize).min(n)]
                        .iter()
                        .fold(0.0, |a, b| a + b)
                })
                .collect();
            check_f32_exact(
                &format!("two_stage_reduction, {n} threads in threadgroups of {tg}"),
                &download::<f32>(&ob)?,
                &want,
                |i| format!("thread {i}"),
            )?;
        }
        Ok(())
    })
}

/// `row_sum`: one 256-thread threadgroup per row, threads striding over the
/// columns (more, fewer and as many columns as threads); exact with
/// quarter-multiples, then within `enigma_kernels::sum_tolerance` with random floats.
pub fn seed000_row_sum(rt: &Runtime) -> CaseResult {
    seeded("seed000_row_sum", |rng| {
        let p = pipeline(rt, &dispatch_patterns::row_sum())?;
        for (rows, cols, exact) in [
            (5usize, 1000usize, true),
            (3, 37, true),
            (2, 1, true),
            (4, 256, true),
            (6, 777, false),
        ] {
            let m: Vec<f32> = (0..rows * cols)
                .map(|_| {
                    if exact {
                        quarter(rng, 200)
                    } else {
                        normal_f32(rng, -4, 4)
                    }
                })
                .collect();
            let mb = upload(rt, &m)?;
            let sb = filled(rt, rows, -1.0f32)?;
            groups(
                rt,
                &p,
                &[Arg::from(&mb), Arg::from(&sb), Arg::u32(cols as u32)],
                [rows as u32, 1, 1],
                [256, 1, 1],
            )?;
            let got: Vec<f32> = download(&sb)?;
            for r in 0..rows {
                let row = &m[r * cols..(r + 1) * cols];
                if exact {
                    let want = row.iter().fold(0.0f32, |a, b| a + b);
                    ensure!(
                        same_f32(got[r], want),
                        "row_sum {rows}×{cols}, row {r}: got {}, expected {want} (exact)",
                        got[r]
                    );
                } else {
                    let (want, tol) = (two_pass_sum::reference_sum(row), enigma_kernels::sum_tolerance(row));
                    ensure!(
                        (got[r] as f64 - want).abs() <= tol,
                        "row_sum {rows}×{cols}, row {r}: got {}, reference {want}, tolerance {tol:e}",
                        got[r]
                    );
                }
            }
        }
        Ok(())
    })
}

/// `simd_broadcast_pattern`: `simd_broadcast_first` of a value only lane 0
/// computed (`exp`, within 4 ulp), and `simd_shuffle` from lane 13 (exact).
pub fn seed000_simd_broadcast(rt: &Runtime) -> CaseResult {
    seeded("seed000_simd_broadcast", |rng| {
        let n = 256usize;
        let data: Vec<f32> = (0..n).map(|_| rng.gen_range(-10.0..10.0)).collect();
        let db = upload(rt, &data)?;
        let first = filled(rt, n, 0.0f32)?;
        let from_lane = filled(rt, n, 0.0f32)?;
        let p = pipeline(rt, &dispatch_patterns::simd_broadcast_pattern())?;
        threads(
            rt,
            &p,
            &[
                Arg::from(&db),
                Arg::from(&first),
                Arg::from(&from_lane),
                Arg::u32(13),
            ],
            [n as u32, 1, 1],
            [64, 1, 1],
        )?;
        let got_first: Vec<f32> = download(&first)?;
        for (i, &g) in got_first.iter().enumerate() {
            let x = data[i / 32 * 32];
            let r = (x as f64).exp();
            ensure!(
                ulp_error(g, r) <= 4.0,
                "simd_broadcast_first(exp(data[lane 0])) at thread {i}: got {g}, exp({x}) = {r}"
            );
        }
        let want: Vec<f32> = (0..n).map(|i| data[i / 32 * 32 + 13]).collect();
        check_f32_exact(
            "simd_shuffle(data, 13)",
            &download::<f32>(&from_lane)?,
            &want,
            |i| format!("thread {i}"),
        )
    })
}

/// `prefix_sum` (`simd_prefix_inclusive_sum`), with full SIMD groups and
/// with a partial last threadgroup (8 lanes).
pub fn seed000_prefix_sum(rt: &Runtime) -> CaseResult {
    seeded("seed000_prefix_sum", |rng| {
        let p = pipeline(rt, &dispatch_patterns::prefix_sum())?;
        for (n, tg) in [(256usize, 128u32), (200, 64)] {
            let data: Vec<f32> = (0..n).map(|_| quarter(rng, 400)).collect();
            let db = upload(rt, &data)?;
            let ob = filled(rt, n, -1.0f32)?;
            threads(
                rt,
                &p,
                &[Arg::from(&db), Arg::from(&ob)],
                [n as u32, 1, 1],
                [tg, 1, 1],
            )?;
            let want: Vec<f32> = (0..n)
                .map(|i| {
                    let local = i % tg as usize;
                    let first = i - local % 32;
                    data[first..=i].iter().fold(0.0, |a, b| a + b)
                })
                .collect();
            check_f32_exact(
                &format!("prefix_sum over {n} threads, threadgroups of {tg}"),
                &download::<f32>(&ob)?,
                &want,
                |i| format!("thread {i}"),
            )?;
        }
        Ok(())
    })
}

/// `shuffle_stencil`: `0.25·left + 0.5·x + 0.25·right` through
/// `simd_shuffle_up/down(…, 1)`, edge lanes using their own value. Exact:
/// the products are by powers of two.
pub fn seed000_shuffle_stencil(rt: &Runtime) -> CaseResult {
    seeded("seed000_shuffle_stencil", |rng| {
        let n = 256usize;
        let data: Vec<f32> = (0..n).map(|_| normal_f32(rng, -10, 10)).collect();
        let db = upload(rt, &data)?;
        let ob = filled(rt, n, 0.0f32)?;
        let p = pipeline(rt, &dispatch_patterns::shuffle_stencil())?;
        threads(
            rt,
            &p,
            &[Arg::from(&db), Arg::from(&ob)],
            [n as u32, 1, 1],
            [64, 1, 1],
        )?;
        let want: Vec<f32> = (0..n)
            .map(|i| {
                let lane = i % 32;
                let left = if lane > 0 { data[i - 1] } else { data[i] };
                let right = if lane < 31 { data[i + 1] } else { data[i] };
                0.25 * left + 0.5 * data[i] + 0.25 * right
            })
            .collect();
        check_f32_exact("shuffle_stencil", &download::<f32>(&ob)?, &want, |i| {
            format!("thread {i} (lane {})", i % 32)
        })
    })
}

/// `gemm_tiled` (half inputs, float accumulation, half output) for small
/// shapes, including ones that are not multiples of the 32×64×16 tile.
/// Inputs are multiples of 1/8 in [-1, 1], so the f32 accumulation is exact
/// and the result is the exact product rounded once to half.
pub fn seed000_gemm_tiled(rt: &Runtime) -> CaseResult {
    seeded("seed000_gemm_tiled", |rng| {
        let p = pipeline(rt, &dispatch_patterns::gemm_tiled())?;
        for (m, n, k) in [
            (1usize, 1usize, 1usize),
            (5, 7, 3),
            (32, 64, 16),
            (33, 65, 17),
            (40, 70, 35),
            (64, 128, 48),
        ] {
            let a: Vec<f32> = (0..m * k)
                .map(|_| rng.gen_range(-8..=8) as f32 / 8.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|_| rng.gen_range(-8..=8) as f32 / 8.0)
                .collect();
            let ab = upload_f16(rt, &a.iter().map(|&v| f32_to_f16(v)).collect::<Vec<_>>())?;
            let bb = upload_f16(rt, &b.iter().map(|&v| f32_to_f16(v)).collect::<Vec<_>>())?;
            let cb = upload_f16(rt, &vec![0x7e00; m * n])?;
            let tgs = [
                (n as u32).div_ceil(dispatch_patterns::GEMM_TN),
                (m as u32).div_ceil(dispatch_patterns::GEMM_TM),
                1,
            ];
            let args = [
                Arg::from(&ab),
                Arg::from(&bb),
                Arg::from(&cb),
                Arg::u32(m as u32),
                Arg::u32(n as u32),
                Arg::u32(k as u32),
            ];
            groups(rt, &p, &args, tgs, [dispatch_patterns::GEMM_THREADS, 1, 1])?;
            let want: Vec<u16> = (0..m * n)
                .map(|idx| {
                    let (r, c) = (idx / n, idx % n);
                    let exact: f64 = (0..k)
                        .map(|j| a[r * k + j] as f64 * b[j * n + c] as f64)
                        .sum();
                    f32_to_f16(exact as f32)
                })
                .collect();
            check_eq(
                &format!("gemm_tiled M={m} N={n} K={k}"),
                &download_u16_bits(&cb)?,
                &want,
                |i| format!("C[{}][{}]", i / n, i % n),
            )?;
        }
        Ok(())
    })
}

/// Seed 001's two-pass sum: pass 1 (`reduce_threadgroup`) with
/// `dispatch_threads` over n elements in 256-thread threadgroups (the last
/// one partial), pass 2 (`reduce_final`) as one 1024-thread threadgroup with
/// the partial count as a value argument; for n = 1, 31, 33, 1000, 4097 and
/// 2^20, against `two_pass_sum::reference_sum` within `enigma_kernels::sum_tolerance`. Each
/// partial is checked too.
pub fn seed001_reduction(rt: &Runtime) -> CaseResult {
    seeded("seed001_reduction", |rng| {
        let pass1 = pipeline(rt, &two_pass_sum::reduce_threadgroup())?;
        let pass2 = pipeline(rt, &two_pass_sum::reduce_final())?;
        for n in [1usize, 31, 33, 1000, 4097, 1 << 20] {
            let data: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
            let groups_n = two_pass_sum::pass1_threadgroups(n as u32);
            let ab = upload(rt, &data)?;
            let partial = filled(rt, groups_n as usize, f32::NAN)?;
            let result = filled(rt, 1, f32::NAN)?;
            threads(
                rt,
                &pass1,
                &[Arg::from(&ab), Arg::from(&partial)],
                [n as u32, 1, 1],
                [two_pass_sum::PASS1_THREADS, 1, 1],
            )?;
            let partials: Vec<f32> = download(&partial)?;
            for (g, &got) in partials.iter().enumerate() {
                let chunk = &data[g * 256..((g + 1) * 256).min(n)];
                let (want, tol) = (two_pass_sum::reference_sum(chunk), enigma_kernels::sum_tolerance(chunk));
                ensure!(
                    (got as f64 - want).abs() <= tol,
                    "n = {n}: partial {g}: got {got}, reference {want}, tolerance {tol:e}"
                );
            }
            groups(
                rt,
                &pass2,
                &[Arg::from(&partial), Arg::from(&result), Arg::u32(groups_n)],
                [1, 1, 1],
                [two_pass_sum::PASS2_THREADS, 1, 1],
            )?;
            let got = download::<f32>(&result)?[0] as f64;
            let (want, tol) = (two_pass_sum::reference_sum(&data), enigma_kernels::sum_tolerance(&data));
            ensure!(
                (got - want).abs() <= tol,
                "n = {n}: sum {got}, reference {want}, tolerance {tol:e}"
            );
        }
        Ok(())
    })
}
