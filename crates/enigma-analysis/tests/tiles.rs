//! The tile planner against seed 002: each test computes the figure from the
//! formula here, compares it with the seed's printed value (transcribed in
//! the test), and checks `plan_tile` gives the same. Where the seed is wrong
//! the test asserts the right value.

use enigma_analysis::catalog::{self, DeviceSpec};
use enigma_analysis::tiles::{
    partition, plan_tile, select_tile, threadgroup_memory, Bound, ProblemSize, TileConfig, TileError, TileShape,
    TileVariant, WeightFormat, FLOPS_PER_MMA, FMA_PER_MMA,
};
use proptest::prelude::*;

use TileVariant::{Fused, Separate};

fn m4_max() -> DeviceSpec {
    catalog::find("m4-max").unwrap()
}

fn cfg(m: u32, n: u32, k: u32, variant: TileVariant, weights: WeightFormat) -> TileConfig {
    TileConfig::new(TileShape::new(m, n, k), variant, weights)
}

/// Rounds like the seed's tables: half away from zero at `decimals`.
fn round(x: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (x * p).round() / p
}

/// (M, N, K, variant, A bytes, B bytes, total, budget %) as seed 002 prints them.
type BudgetRow = (u32, u32, u32, TileVariant, u64, u64, u64, f64);

#[test]
fn seed002_memory_budget_table() {
    let dev = m4_max();
    // Seed 002 §2.3, as printed: (M, N, K, variant, A, B, total, budget %).
    let seed: [BudgetRow; 9] = [
        (64, 64, 32, Separate, 8_192, 8_192, 16_384, 50.0),
        (64, 64, 32, Fused, 4_096, 512, 4_608, 14.0),
        (128, 64, 16, Separate, 8_192, 4_096, 12_288, 38.0),
        (128, 64, 16, Fused, 4_096, 512, 4_608, 14.0),
        (32, 128, 32, Separate, 4_096, 16_384, 20_480, 63.0),
        (32, 128, 32, Fused, 2_048, 512, 2_560, 8.0),
        (128, 128, 16, Separate, 8_192, 8_192, 16_384, 50.0),
        (128, 128, 16, Fused, 4_096, 512, 4_608, 14.0),
        (64, 64, 64, Separate, 16_384, 16_384, 32_768, 100.0),
    ];
    for (m, n, k, variant, a, b, total, pct) in seed {
        let (m64, n64, k64) = (u64::from(m), u64::from(n), u64::from(k));
        let (fa, fb) = match variant {
            Separate => (2 * m64 * k64 * 2, 2 * k64 * n64 * 2),
            Fused => (m64 * k64 * 2, 4 * 64 * 2),
            TileVariant::Staged => unreachable!("seed 002 has no staged rows"),
        };
        let ft = fa + fb;
        if variant == Separate {
            assert_eq!(ft, 4 * k64 * (m64 + n64), "DESIGN.md's 4·K·(M+N)");
        } else {
            assert_eq!(ft, 2 * m64 * k64 + 4 * 128, "DESIGN.md's 2·M·K + SG·128");
        }
        assert_eq!((fa, fb, ft), (a, b, total), "{m}x{n}x{k} {variant:?} formula vs seed");
        let pct_formula = ft as f64 / 32_768.0 * 100.0;
        // Half-up rounding of 37.5 and 62.5 gives the seed's 38 and 63.
        assert_eq!((pct_formula + 0.5).floor(), pct, "{m}x{n}x{k} {variant:?} budget");

        let r = plan_tile(&cfg(m, n, k, variant, WeightFormat::Fp4E2M1), &dev, None).unwrap();
        assert_eq!((r.a_bytes, r.b_bytes, r.tg_memory_bytes), (fa, fb, ft));
        assert!((r.budget_percent - pct_formula).abs() < 1e-12);
        assert_eq!(r.fits, ft < 32_768);
        assert_eq!(threadgroup_memory(TileShape::new(m, n, k), variant, WeightFormat::Fp4E2M1, 4, 1), (fa, fb));
    }
}

#[test]
fn seed002_64x64x64_separate_is_rejected_at_100_percent() {
    let r = plan_tile(&cfg(64, 64, 64, Separate, WeightFormat::Fp4E2M1), &m4_max(), None).unwrap();
    assert_eq!(r.tg_memory_bytes, 32_768);
    assert_eq!(r.budget_percent, 100.0);
    assert!(!r.fits);
    let reason = r.rejection.clone().expect("a reason");
    assert!(reason.contains("32,768") && reason.contains("100 %") && reason.contains("headroom"), "{reason}");
    match r.ensure_fits() {
        Err(TileError::DoesNotFit { bytes: 32_768, budget: 32_768, percent, .. }) => assert_eq!(percent, 100.0),
        other => panic!("unexpected {other:?}"),
    }
    // Over budget: 128x128x32 separate = 4·32·256 = 32,768; 128x128x64 = 65,536 (200 %).
    let r = plan_tile(&cfg(128, 128, 64, Separate, WeightFormat::Fp4E2M1), &m4_max(), None).unwrap();
    assert_eq!(r.tg_memory_bytes, 65_536);
    assert!(!r.fits);
    assert_eq!(r.tgs_per_core, 0);
    assert!(r.rejection.unwrap().contains("200 %"));
    // Just under: fits.
    let r = plan_tile(&cfg(64, 64, 56, Separate, WeightFormat::Fp4E2M1), &m4_max(), None).unwrap();
    assert!(r.fits && r.ensure_fits().is_ok());
}

#[test]
fn seed002_fused_reduction_factor() {
    // "This 3.5x reduction": 16,384 / 4,608 = 3.56 (the seed truncates).
    let ratio: f64 = 16_384.0 / 4_608.0;
    assert!((ratio - 3.5556).abs() < 1e-4);
    assert_eq!((ratio * 10.0).floor() / 10.0, 3.5);
}

#[test]
fn seed002_partition_and_accumulators() {
    let dev = m4_max();
    // Seed 002 §3.2 and §3.4: (M, N, grid, SG_M, SG_N, accumulators, B/thread fp16, fp32).
    for (m, n, grid, sg_m, sg_n, acc, b16, b32) in [
        (64, 64, [2, 2], 4, 4, 16, 64, 128),
        (128, 64, [4, 1], 4, 8, 32, 128, 256),
        (32, 128, [1, 4], 4, 4, 16, 64, 128),
    ] {
        assert_eq!(sg_m * sg_n, acc);
        assert_eq!((acc * 4, acc * 8), (b16, b32)); // 4 bytes per fragment per thread with half, 8 with float
        let r = plan_tile(&cfg(m, n, 32, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap();
        assert_eq!(r.partition.grid, grid, "{m}x{n}");
        assert_eq!((r.partition.sg_m_tiles, r.partition.sg_n_tiles), (sg_m, sg_n));
        assert_eq!(r.accumulators_per_simdgroup, acc);
        assert_eq!((r.accumulator_bytes_per_thread_fp16, r.accumulator_bytes_per_thread_fp32), (b16, b32));
    }
    // "64x64 (current: 2x4)", SG_M=2, SG_N=4, 8 accumulators: takes 8 SIMD groups in a 4x2 grid.
    let mut c = cfg(64, 64, 32, Separate, WeightFormat::Fp4E2M1);
    c.simdgroups = 8;
    c.sg_grid = Some([4, 2]);
    let r = plan_tile(&c, &dev, None).unwrap();
    assert_eq!((r.partition.sg_m_tiles, r.partition.sg_n_tiles, r.accumulators_per_simdgroup), (2, 4, 8));
    assert_eq!((r.accumulator_bytes_per_thread_fp16, r.accumulator_bytes_per_thread_fp32), (32, 64));
    assert_eq!(r.threads_per_threadgroup, 256);
    // With the seed's four SIMD groups such a split cannot cover the tile.
    assert!(partition(64, 64, 4, Some([2, 4])).is_err());
    assert!(partition(64, 64, 4, Some([4, 2])).is_err());
}

#[test]
fn seed002_section_6_4_is_64x64_per_simdgroup() {
    // 128x128 with 4 SIMD groups: a 2x2 grid of 64x64 → SG_M = SG_N = 8, 64
    // accumulators, 512 bytes/thread with float accumulators, 8·8·2 = 128 MMA
    // per iteration. The seed prints "64x32", "SG_N=4", "128 accumulators" and
    // "8*4 = 32 accumulators"; only the 512 bytes and 128 MMAs are right.
    let r = plan_tile(&cfg(128, 128, 16, Separate, WeightFormat::Fp4E2M1), &m4_max(), None).unwrap();
    assert_eq!(r.partition.grid, [2, 2]);
    assert_eq!(r.partition.sg_tile, [64, 64]);
    assert_eq!((r.partition.sg_m_tiles, r.partition.sg_n_tiles), (8, 8));
    assert_eq!(r.accumulators_per_simdgroup, 64);
    assert_ne!(r.accumulators_per_simdgroup, 128);
    assert_ne!(r.accumulators_per_simdgroup, 32);
    assert_eq!(r.accumulator_bytes_per_thread_fp32, 512);
    assert_eq!(r.mma_per_simdgroup_per_iteration, 8 * 8 * 2);
    // 4 SIMD groups × 64x32 would cover only half the tile.
    assert_eq!(4 * 64 * 32 * 2, 128 * 128);
}

#[test]
fn seed002_section_3_1_mma_flops() {
    // An 8x8x8 multiply-accumulate: 64 outputs × 8 products = 512 FMAs = 1,024 FLOPs
    // (the seed says 128 FMAs / 256 FLOPs).
    assert_eq!(FMA_PER_MMA, 8 * 8 * 8);
    assert_eq!(FLOPS_PER_MMA, 1_024);
    // Consistency with §5.1: 4 SIMD groups × 64 MMAs × 1,024 = 2·64·64·32.
    let r = plan_tile(&cfg(64, 64, 32, Separate, WeightFormat::Fp4E2M1), &m4_max(), None).unwrap();
    assert_eq!(u64::from(r.mma_per_simdgroup_per_iteration), 64);
    assert_eq!(r.mma_per_threadgroup_per_iteration, 256);
    assert_eq!(r.mma_per_threadgroup_per_iteration * FLOPS_PER_MMA, r.flops_per_iteration);
    assert_eq!(r.flops_per_iteration, 262_144);
    // §8.1's per-SIMD-group FLOPs: 64 × 1,024 = 65,536 (the seed prints 16,384).
    assert_eq!(u64::from(r.mma_per_simdgroup_per_iteration) * FLOPS_PER_MMA, 65_536);
}

#[test]
fn seed002_occupancy_and_gpu_wide_tables() {
    let dev = m4_max();
    // §4.1: (M, N, K, variant, bytes, TGs/core, threads/core); §4.3: × 40 cores.
    for (m, n, k, variant, bytes, tgs, threads) in [
        (64, 64, 32, Separate, 16_384u64, 2u32, 256u64),
        (64, 64, 32, Fused, 4_608, 7, 896),
        (128, 64, 16, Separate, 12_288, 2, 256),
        (128, 64, 16, Fused, 4_608, 7, 896),
        (32, 128, 32, Fused, 2_560, 12, 1_536),
    ] {
        assert_eq!(32_768 / bytes, u64::from(tgs));
        assert_eq!(u64::from(tgs) * 128, threads);
        let r = plan_tile(&cfg(m, n, k, variant, WeightFormat::Fp4E2M1), &dev, None).unwrap();
        assert_eq!(r.tg_memory_bytes, bytes);
        assert_eq!(r.tgs_per_core, tgs);
        assert_eq!(r.threads_per_core, threads);
        assert_eq!(r.concurrent_threadgroups, u64::from(tgs) * 40);
    }
    // §6.3: 32x128x32 separate = 20,480 bytes → 1 TG/core.
    let r = plan_tile(&cfg(32, 128, 32, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap();
    assert_eq!(r.tgs_per_core, 1);
}

#[test]
fn seed002_waves_for_4096_squared() {
    let dev = m4_max();
    let problem = Some(ProblemSize { m: 4096, n: 4096, k: 4096 });
    let sep = plan_tile(&cfg(64, 64, 32, Separate, WeightFormat::Fp4E2M1), &dev, problem).unwrap();
    let p = sep.problem.unwrap();
    assert_eq!(p.output_tiles, [64, 64]);
    assert_eq!(p.total_output_tiles, 4_096);
    assert_eq!(p.k_iterations, 128);
    assert_eq!(p.total_flops, 2 * 4096u128.pow(3));
    assert_eq!(p.edge_waste_percent, 0.0);
    // "With 80 active TGs, ~51 waves": 4096 / 80 = 51.2 → 52 waves.
    assert_eq!(p.waves.concurrent_threadgroups, 80);
    assert!((p.waves.waves_exact - 51.2).abs() < 1e-12);
    assert_eq!(round(p.waves.waves_exact, 0), 51.0);
    assert_eq!(p.waves.waves, 52);
    // "With 280 active TGs, ~15 waves": 14.63 → 15.
    let fused = plan_tile(&cfg(64, 64, 32, Fused, WeightFormat::Fp4E2M1), &dev, problem).unwrap();
    let p = fused.problem.unwrap();
    assert_eq!(p.waves.concurrent_threadgroups, 280);
    assert_eq!(round(p.waves.waves_exact, 0), 15.0);
    assert_eq!(p.waves.waves, 15);
    // Edge waste for a ragged problem: M = 100 with 64-row tiles computes 128 rows.
    let r = plan_tile(&cfg(64, 64, 32, Separate, WeightFormat::Fp4E2M1), &dev, Some(ProblemSize { m: 100, n: 64, k: 32 }))
        .unwrap();
    let p = r.problem.unwrap();
    assert_eq!(p.output_tiles, [1, 2]);
    assert!((p.edge_waste_percent - 28.0 / 128.0 * 100.0).abs() < 1e-12);
}

#[test]
fn seed002_arithmetic_intensity_fp4() {
    let dev = m4_max();
    let balance = 32e12 / 546e9;
    // §5.1 as printed: (M, N, K, FLOPs, A bytes, B bytes, AI).
    for (m, n, k, flops, a, b, ai) in [
        (64u32, 64u32, 32u32, 262_144u64, 4_096u64, 1_024u64, 51.2),
        (128, 64, 16, 262_144, 4_096, 512, 56.9),
        (32, 128, 32, 262_144, 2_048, 2_048, 64.0),
        (128, 128, 16, 524_288, 4_096, 1_024, 102.4),
        (64, 64, 64, 524_288, 8_192, 2_048, 51.2),
    ] {
        let (m64, n64, k64) = (u64::from(m), u64::from(n), u64::from(k));
        let f = 2 * m64 * n64 * k64;
        let fa = m64 * k64 * 2;
        let fb = k64 * n64 / 2;
        let fai = f as f64 / (fa + fb) as f64;
        assert_eq!((f, fa, fb), (flops, a, b), "{m}x{n}x{k}");
        assert_eq!(round(fai, 1), ai, "{m}x{n}x{k}");
        let r = plan_tile(&cfg(m, n, k, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap();
        assert_eq!(r.flops_per_iteration, f);
        assert_eq!((r.a_load_bytes, r.b_load_bytes), (fa as f64, fb as f64));
        assert!((r.arithmetic_intensity - fai).abs() < 1e-12);
        // Scales, group 128: (K/128)·N·2 bytes more.
        let scales = k64 as f64 / 128.0 * n64 as f64 * 2.0;
        assert!((r.scale_load_bytes - scales).abs() < 1e-12);
        assert!((r.arithmetic_intensity_with_scales - f as f64 / (fa as f64 + fb as f64 + scales)).abs() < 1e-12);
        assert!(r.arithmetic_intensity_with_scales < r.arithmetic_intensity);
        assert!((r.machine_balance.unwrap() - balance).abs() < 1e-9);
        // 51.2 and 56.9 are below 58.6 (memory-bound); 64.0 and 102.4 above.
        let expected = if fai < balance { Bound::Memory } else { Bound::Compute };
        assert_eq!(r.bound, expected, "{m}x{n}x{k}");
    }
    assert_eq!(round(balance, 0), 59.0); // "roughly 59 FLOPs/byte"
    // The seed says larger tiles are "more comfortably compute-bound"; 128x64x16 is not.
    let r = plan_tile(&cfg(128, 64, 16, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap();
    assert_eq!(r.bound, Bound::Memory);
}

#[test]
fn seed002_fp16_comparison() {
    let dev = m4_max();
    // §5.2 as printed: (M, N, K, AI fp16, AI fp4, speedup); the last row is wrong.
    for (m, n, k, ai16_seed, ai4_seed, speedup_seed) in
        [(64u32, 64u32, 32u32, 32.0, 51.2, 1.6), (128, 64, 16, 42.7, 56.9, 1.3), (32, 128, 32, 32.0, 64.0, 2.0)]
    {
        let (m64, n64, k64) = (m as f64, n as f64, k as f64);
        let flops = 2.0 * m64 * n64 * k64;
        let ai16 = flops / (m64 * k64 * 2.0 + k64 * n64 * 2.0);
        let ai4 = flops / (m64 * k64 * 2.0 + k64 * n64 * 0.5);
        let r16 = plan_tile(&cfg(m, n, k, Separate, WeightFormat::Fp16), &dev, None).unwrap();
        let r4 = plan_tile(&cfg(m, n, k, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap();
        assert!((r16.arithmetic_intensity - ai16).abs() < 1e-12);
        assert!((r4.arithmetic_intensity - ai4).abs() < 1e-12);
        assert_eq!(round(ai4, 1), ai4_seed);
        if (m, n, k) == (32, 128, 32) {
            // 262,144 / (2,048 + 8,192) = 25.6, and 64.0 / 25.6 = 2.5.
            assert_eq!(round(ai16, 1), 25.6);
            assert_ne!(round(ai16, 1), ai16_seed);
            assert_eq!(round(ai4 / ai16, 1), 2.5);
            assert_ne!(round(ai4 / ai16, 1), speedup_seed);
        } else {
            assert_eq!(round(ai16, 1), ai16_seed);
            assert_eq!(round(ai4 / ai16, 1), speedup_seed);
        }
    }
}

#[test]
fn seed002_dequant_overhead() {
    let dev = m4_max();
    let fp4 = plan_tile(&cfg(64, 64, 32, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap();
    let int4 = plan_tile(&cfg(64, 64, 32, Separate, WeightFormat::Int4U4B8), &dev, None).unwrap();
    let fp16 = plan_tile(&cfg(64, 64, 32, Separate, WeightFormat::Fp16), &dev, None).unwrap();
    assert_eq!(fp4.dequant_ops_per_iteration, 32 * 64 * 8); // 16,384
    assert_eq!(int4.dequant_ops_per_iteration, 32 * 64 * 4); // 8,192
    assert_eq!(fp16.dequant_ops_per_iteration, 0);
    assert_eq!(fp4.dequant_overhead_percent, 6.25);
    assert_eq!(int4.dequant_overhead_percent, 3.125); // "3.1%"
    assert_eq!(round(int4.dequant_overhead_percent, 1), 3.1);
    assert_eq!(fp16.scale_load_bytes, 0.0);
}

#[test]
fn seed002_recommended_configurations() {
    let dev = m4_max();
    // §6.1–6.4: (tile, sep bytes, fused bytes, SG tile, K sub-tiles, MMA/iter, occ sep, occ fused).
    for ((m, n, k), sep_b, fused_b, sg_tile, ksub, mma, occ_s, occ_f) in [
        ((64, 64, 32), 16_384, 4_608, [32, 32], 4, 64, 2, 7),
        ((128, 64, 16), 12_288, 4_608, [32, 64], 2, 64, 2, 7),
        ((32, 128, 32), 20_480, 2_560, [32, 32], 4, 64, 1, 12),
        ((128, 128, 16), 16_384, 4_608, [64, 64], 2, 128, 2, 7),
    ] {
        let s = plan_tile(&cfg(m, n, k, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap();
        let f = plan_tile(&cfg(m, n, k, Fused, WeightFormat::Fp4E2M1), &dev, None).unwrap();
        assert_eq!((s.tg_memory_bytes, f.tg_memory_bytes), (sep_b, fused_b), "{m}x{n}x{k}");
        assert_eq!(s.partition.sg_tile, sg_tile);
        assert_eq!(s.k_subtiles, ksub);
        assert_eq!(s.k_subtiles, k / 8);
        assert_eq!(s.mma_per_simdgroup_per_iteration, mma);
        assert_eq!((s.tgs_per_core, f.tgs_per_core), (occ_s, occ_f));
        assert_eq!(s.threads_per_threadgroup, 128);
    }
}

#[test]
fn seed002_select_tile_is_section_9_1() {
    let t = |m| select_tile(m, 4096, 4096);
    for m in [0, 1, 8, 16] {
        assert_eq!(t(m), TileShape::new(32, 128, 32), "M = {m}");
    }
    for m in [17, 32, 64] {
        assert_eq!(t(m), TileShape::new(64, 64, 32), "M = {m}");
    }
    for m in [65, 128, 256] {
        assert_eq!(t(m), TileShape::new(128, 64, 16), "M = {m}");
    }
    for m in [257, 512, 4096, u32::MAX] {
        assert_eq!(t(m), TileShape::new(128, 128, 16), "M = {m}");
    }
    // N and K do not take part.
    assert_eq!(select_tile(1, 1, 1), select_tile(1, 65_536, 65_536));
}

#[test]
fn report_json_has_the_documented_fields() {
    let r = plan_tile(&cfg(64, 64, 32, Fused, WeightFormat::Int4U4B8), &m4_max(), None).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    for key in [
        "tg_memory_bytes",
        "budget_percent",
        "fits",
        "tgs_per_core",
        "threads_per_core",
        "accumulators_per_simdgroup",
        "arithmetic_intensity",
        "arithmetic_intensity_with_scales",
        "machine_balance",
        "bound",
        "dequant_overhead_percent",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["tg_memory_bytes"], 4_608);
    assert_eq!(v["tgs_per_core"], 7);
    assert_eq!(v["bound"], "memory");
    assert_eq!(v["weights"], "int4_u4_b8");
    assert_eq!(v["variant"], "fused");
}

#[test]
fn unknown_balance_gives_unknown_bound() {
    let m1 = catalog::find("m1").unwrap();
    let r = plan_tile(&cfg(64, 64, 32, Separate, WeightFormat::Fp4E2M1), &m1, None).unwrap();
    assert_eq!(r.machine_balance, None);
    assert_eq!(r.bound, Bound::Unknown);
    assert!(r.notes.iter().any(|n| n.contains("--tflops")));
}

#[test]
fn errors() {
    let dev = m4_max();
    let e = plan_tile(&cfg(0, 64, 32, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap_err();
    assert!(matches!(e, TileError::ZeroDimension { dim: "M", .. }), "{e}");
    let e = plan_tile(&cfg(64, 60, 32, Separate, WeightFormat::Fp4E2M1), &dev, None).unwrap_err();
    assert!(matches!(e, TileError::NotFragmentMultiple { dim: "N", value: 60, .. }), "{e}");
    assert!(e.to_string().contains("60") && e.to_string().contains("multiple"), "{e}");
    let mut c = cfg(64, 64, 32, Separate, WeightFormat::Fp4E2M1);
    c.simdgroups = 0;
    assert_eq!(plan_tile(&c, &dev, None).unwrap_err(), TileError::ZeroSimdgroups);
    c.simdgroups = 33;
    let e = plan_tile(&c, &dev, None).unwrap_err();
    assert_eq!(e, TileError::TooManyThreads { simdgroups: 33, simd_width: 32, threads: 1056, max: 1024 });
    c.simdgroups = 3;
    let e = plan_tile(&c, &dev, None).unwrap_err();
    assert_eq!(e, TileError::NoPartition { m: 64, n: 64, simdgroups: 3 });
    assert!(e.to_string().contains("8 × 8 fragments"), "{e}");
    c.simdgroups = 4;
    c.sg_grid = Some([1, 3]);
    assert!(matches!(plan_tile(&c, &dev, None), Err(TileError::BadSimdgroupGrid { rows: 1, cols: 3, .. })));
    c.sg_grid = Some([0, 4]);
    assert!(matches!(plan_tile(&c, &dev, None), Err(TileError::BadSimdgroupGrid { rows: 0, .. })));
    c.sg_grid = None;
    c.group_size = 0;
    assert_eq!(plan_tile(&c, &dev, None).unwrap_err(), TileError::ZeroGroupSize);
    c.group_size = 128;
    let e = plan_tile(&c, &dev, Some(ProblemSize { m: 0, n: 4096, k: 4096 })).unwrap_err();
    assert_eq!(e, TileError::ZeroProblem { m: 0, n: 4096, k: 4096 });
    let mut bad = dev;
    bad.gpu_cores = 0;
    assert!(matches!(plan_tile(&c, &bad, None), Err(TileError::Device(_))));
}

proptest! {
    #[test]
    fn memory_formulas_and_fit(mf in 1u32..=32, nf in 1u32..=32, kf in 1u32..=16, fused in any::<bool>()) {
        let (m, n, k) = (mf * 8, nf * 8, kf * 8);
        let variant = if fused { Fused } else { Separate };
        let c = cfg(m, n, k, variant, WeightFormat::Fp4E2M1);
        match plan_tile(&c, &m4_max(), None) {
            Ok(r) => {
                let expected = if fused {
                    2 * u64::from(m) * u64::from(k) + 4 * 128
                } else {
                    4 * u64::from(k) * u64::from(m + n)
                };
                prop_assert_eq!(r.tg_memory_bytes, expected);
                prop_assert_eq!(r.fits, expected < 32_768);
                prop_assert_eq!(u64::from(r.tgs_per_core), 32_768 / expected);
                // The partition covers the tile exactly.
                let p = r.partition;
                prop_assert_eq!(p.grid[0] * p.grid[1], 4);
                prop_assert_eq!(p.sg_tile[0] * p.grid[0], m);
                prop_assert_eq!(p.sg_tile[1] * p.grid[1], n);
                prop_assert_eq!(u64::from(r.accumulators_per_simdgroup) * 4, u64::from(mf) * u64::from(nf));
            }
            Err(TileError::NoPartition { .. }) => {
                // Only when no r×c = 4 split divides the fragment counts.
                prop_assert!(!(mf % 4 == 0 || nf % 4 == 0 || (mf % 2 == 0 && nf % 2 == 0)));
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

/// The staged variant (the library GEMM's slices): `M·(K+8)·2 + K·(N+8)·2`.
#[test]
fn staged_slices_are_padded_by_eight_elements() {
    let dev = enigma_analysis::catalog::find("m4-max").unwrap();
    let r = plan_tile(&cfg(128, 128, 32, TileVariant::Staged, WeightFormat::Fp16), &dev, None).unwrap();
    assert_eq!((r.a_bytes, r.b_bytes, r.tg_memory_bytes), (128 * 40 * 2, 32 * 136 * 2, 18_944));
    assert!(r.fits);
    let too_big = plan_tile(&cfg(128, 128, 64, TileVariant::Staged, WeightFormat::Fp16), &dev, None).unwrap();
    assert_eq!(too_big.tg_memory_bytes, 128 * 72 * 2 + 64 * 136 * 2);
    assert!(!too_big.fits);
}

/// The roofline prediction: MMA time (all tiles' FLOPs at peak, stretched
/// by the partial last wave) against DRAM time (every tile's slices read),
/// the larger one; none for a device without figures.
#[test]
fn the_prediction_is_the_larger_roof() {
    let dev = enigma_analysis::catalog::find("m4-max").unwrap();
    let (tflops, gb_s) = (dev.fp16_tflops.unwrap(), dev.memory_bandwidth_gb_s.unwrap());
    let problem = ProblemSize { m: 4096, n: 4096, k: 4096 };
    let r = plan_tile(&cfg(128, 128, 32, TileVariant::Staged, WeightFormat::Fp16), &dev, Some(problem)).unwrap();
    let pr = r.problem.unwrap();
    let p = pr.predicted.unwrap();
    let iterations = 32.0 * 32.0 * 128.0;
    let compute = iterations * (2.0 * 128.0 * 128.0 * 32.0) / (tflops * 1e12) * (pr.waves.waves as f64 / pr.waves.waves_exact);
    let memory = iterations * (128.0 * 32.0 * 2.0 + 32.0 * 128.0 * 2.0) / (gb_s * 1e9);
    assert!((p.compute_seconds - compute).abs() < 1e-12 && (p.memory_seconds - memory).abs() < 1e-12, "{p:?}");
    assert_eq!(p.seconds, compute.max(memory));
    let mut unknown = dev.clone();
    unknown.fp16_tflops = None;
    assert!(plan_tile(&cfg(128, 128, 32, TileVariant::Staged, WeightFormat::Fp16), &unknown, Some(problem)).unwrap().problem.unwrap().predicted.is_none());
}
