//! Dispatch geometry: every dispatch number of seeds 000 and 003, the errors,
//! and properties of threads-mode dispatches.

use enigma_analysis::catalog;
use enigma_analysis::geometry::{
    self, cover_with_threadgroups, elements_per_thread, pipeline_threadgroup_shape, plan_dispatch, threadgroup_targets,
    threadgroups_to_cover, waves, Axis, DispatchArgument, DispatchMode, GeometryError,
};
use proptest::prelude::*;

use DispatchMode::{Threadgroups, Threads};

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

// ------------------------------------------------------------ seed 000 ---

#[test]
fn seed000_dispatch_threads_4000x3000_with_16x16() {
    let g = plan_dispatch(Threads, [4000, 3000, 1], [16, 16, 1], None).unwrap();
    // "Metal launches 250 x 188 threadgroups (250·16 = 4000, 188·16 = 3008)"
    assert_eq!(g.threadgroups, [250, 188, 1]);
    assert_eq!(g.total_threadgroups, 250 * 188);
    assert_eq!(g.grid, [4000, 3000, 1]);
    assert_eq!(g.total_threads, 12_000_000);
    assert_eq!(g.launched_threads, 250 * 188 * 256);
    // "the extra 8 rows of threads simply do not execute": the last row of
    // threadgroups is 16 wide and 3000 − 187·16 = 8 tall.
    assert_eq!(g.edge_threadgroup, Some([16, 8, 1]));
    assert_eq!(u64::from(g.threadgroups[1]) * 16 - 3000, 8);
    assert_eq!(g.launched_threads - g.total_threads, 4000 * 8);
    assert_eq!(g.simdgroups_per_threadgroup, 8);
    assert_eq!(g.idle_lanes_per_threadgroup, 0);
    // Edge threadgroups of 16×8 = 128 threads form 4 full SIMD groups: no waste.
    assert_eq!(g.waste_percent, 0.0);
    assert!(g.warnings.iter().any(|w| w.contains("16×8×1")), "{:?}", g.warnings);
}

#[test]
fn seed000_dispatch_threadgroups_16x8_of_256() {
    let g = plan_dispatch(Threadgroups, [16, 8, 1], [256, 1, 1], None).unwrap();
    assert_eq!(g.total_threads, 32_768); // "Total threads = 16 * 8 * 256 = 32,768"
    assert_eq!(g.launched_threads, 32_768);
    assert_eq!(g.total_threadgroups, 128);
    assert_eq!(g.grid, [4096, 8, 1]);
    assert_eq!(g.edge_threadgroup, None);
    assert!(g.warnings.is_empty(), "{:?}", g.warnings);
}

#[test]
fn seed000_elementwise_half4_scale() {
    // N = 4096 halves, one thread per half4: 1024 threads, 4 threadgroups of 256.
    let n = 4096u32;
    let threads_needed = n / 4;
    assert_eq!(threads_needed, 1024);
    assert_eq!(threadgroups_to_cover([threads_needed, 1, 1], [256, 1, 1]), [4, 1, 1]);
    let g = plan_dispatch(Threadgroups, [4, 1, 1], [256, 1, 1], None).unwrap();
    assert_eq!(g.total_threads, 1024);
    let t = plan_dispatch(Threads, [threads_needed, 1, 1], [256, 1, 1], None).unwrap();
    assert_eq!(t.threadgroups, [4, 1, 1]);
    assert_eq!(t.total_threads, 1024);
    assert_eq!(t.edge_threadgroup, None);
}

#[test]
fn seed000_row_wise_softmax() {
    // M = 32 rows of N = 4096: 32 threadgroups of 256, 16 elements per thread.
    let g = plan_dispatch(Threadgroups, [32, 1, 1], [256, 1, 1], None).unwrap();
    assert_eq!(g.total_threadgroups, 32);
    assert_eq!(g.total_threads, 32 * 256);
    assert_eq!(elements_per_thread(4096, 256), 16);
    assert_eq!(elements_per_thread(4097, 256), 17);
    assert_eq!(elements_per_thread(10, 0), 0);
}

#[test]
fn seed000_gemm_4096_cubed() {
    let (m, n, tm, tn) = (4096u32, 4096u32, 32u32, 64u32);
    // Grid: (ceil(N/TN), ceil(M/TM), 1) threadgroups of 128 threads.
    let grid = threadgroups_to_cover([n, m, 1], [tn, tm, 1]);
    assert_eq!(grid, [64, 128, 1]);
    let g = plan_dispatch(Threadgroups, grid, [128, 1, 1], None).unwrap();
    assert_eq!(g.total_threadgroups, 8_192);
    assert_eq!(g.total_threads, 1_048_576);
    assert_eq!(g.simdgroups_per_threadgroup, 4);
}

#[test]
fn seed000_batched_softmax_uses_third_dimension() {
    // Grid (M, B, 1) threadgroups of 256; e.g. M = 128 rows, B = 4 batches.
    let g = plan_dispatch(Threadgroups, [128, 4, 1], [256, 1, 1], None).unwrap();
    assert_eq!(g.total_threadgroups, 512);
}

#[test]
fn seed000_attention_decode() {
    let (h, s, d) = (32u32, 2048u32, 128u32);
    let dev = catalog::find("m4-max").unwrap();
    // Step 1: Grid (ceil(S/256), H, 1).
    let scores = [s.div_ceil(256), h, 1];
    assert_eq!(scores, [8, 32, 1]);
    let g1 = plan_dispatch(Threadgroups, scores, [256, 1, 1], Some(&dev)).unwrap();
    assert_eq!(g1.total_threadgroups, 256);
    assert_eq!(g1.total_threads, 65_536);
    // Step 2: Grid (H, 1, 1) — the seed's text; DESIGN.md's acceptance list
    // writes (1, 32), which is the same 32 threadgroups transposed.
    let softmax = [h, 1, 1];
    assert_eq!(softmax, [32, 1, 1]);
    let g2 = plan_dispatch(Threadgroups, softmax, [256, 1, 1], Some(&dev)).unwrap();
    assert_eq!(g2.total_threadgroups, 32);
    // 32 threadgroups on the 40 cores of an M4 Max leave 8 idle.
    assert!(g2.warnings.iter().any(|w| w.contains("32 threadgroups") && w.contains("8 cores idle")), "{:?}", g2.warnings);
    // Step 3: Grid (ceil(D/32), H, 1).
    let weighted = [d.div_ceil(32), h, 1];
    assert_eq!(weighted, [4, 32, 1]);
    let g3 = plan_dispatch(Threadgroups, weighted, [256, 1, 1], Some(&dev)).unwrap();
    assert_eq!(g3.total_threadgroups, 128);
}

#[test]
fn seed000_threadgroup_of_100_threads_wastes_28_lanes() {
    let g = plan_dispatch(Threadgroups, [10, 1, 1], [100, 1, 1], None).unwrap();
    assert_eq!(g.simdgroups_per_threadgroup, 4);
    assert_eq!(g.idle_lanes_per_threadgroup, 28);
    let expected = 28.0 / 128.0 * 100.0; // 21.875 %, the seed's "22%"
    assert!((g.waste_percent - expected).abs() < 1e-12);
    assert_eq!(format!("{:.1}", g.waste_percent), "21.9");
    assert_eq!(format!("{:.0}", g.waste_percent), "22");
    let w = g.warnings.iter().find(|w| w.contains("not a multiple of the SIMD width")).expect("warning");
    assert!(w.contains("4 SIMD groups") && w.contains("28 idle lanes") && w.contains("21.9 %"), "{w}");
    // 128 is the fix: no warning, no waste.
    let good = plan_dispatch(Threadgroups, [10, 1, 1], [128, 1, 1], None).unwrap();
    assert_eq!(good.waste_percent, 0.0);
    assert!(good.warnings.is_empty());
}

#[test]
fn seed000_rule2_simdgroups_per_common_size() {
    for (size, sgs) in [(32, 1), (64, 2), (128, 4), (256, 8), (512, 16), (1024, 32)] {
        let g = plan_dispatch(Threadgroups, [1, 1, 1], [size, 1, 1], None).unwrap();
        assert_eq!(g.simdgroups_per_threadgroup, sgs, "size {size}");
        assert_eq!(g.idle_lanes_per_threadgroup, 0);
    }
}

#[test]
fn seed000_pitfall2_too_few_threadgroups() {
    // "2 threadgroups on a GPU with 10 compute units, 8 compute units sit idle"
    let dev = catalog::find("m4").unwrap();
    assert_eq!(dev.gpu_cores, 10);
    let g = plan_dispatch(Threadgroups, [2, 1, 1], [256, 1, 1], Some(&dev)).unwrap();
    let w = g.warnings.iter().find(|w| w.contains("idle")).expect("too-few warning");
    assert!(w.contains("2 threadgroups") && w.contains("10 cores") && w.contains("8 cores idle"), "{w}");
    assert!(w.contains("at least 10") && w.contains("40+"), "{w}");
    // Enough threadgroups: no warning.
    let ok = plan_dispatch(Threadgroups, [10, 1, 1], [256, 1, 1], Some(&dev)).unwrap();
    assert!(ok.warnings.is_empty(), "{:?}", ok.warnings);
    // Without a device nothing is known about cores.
    let none = plan_dispatch(Threadgroups, [2, 1, 1], [256, 1, 1], None).unwrap();
    assert!(none.warnings.is_empty());
}

#[test]
fn seed000_m2_ultra_targets() {
    let ultra = catalog::find("M2 Ultra").unwrap();
    assert_eq!(ultra.gpu_cores, 76);
    let t = threadgroup_targets(&ultra);
    assert_eq!(t.minimum, 76);
    assert_eq!(t.better, 76 * 4);
    assert_eq!(t.better, 304);
}

#[test]
fn seed000_m1_pro_four_waves() {
    // 64 threadgroups of 128 on the 16 compute units of an M1 Pro, one at a time: 4 waves.
    let pro = catalog::find("m1-pro").unwrap();
    assert_eq!(pro.gpu_cores, 16);
    let w = waves(64, &pro, 1).unwrap();
    assert_eq!(w.waves, 4);
    assert_eq!(w.waves_exact, 4.0);
    assert_eq!(w.concurrent_threadgroups, 16);
    assert_eq!(w.last_wave_threadgroups, 16);
    assert_eq!(w.last_wave_fill_percent, 100.0);
}

#[test]
fn waves_round_up_and_report_last_wave() {
    let dev = catalog::find("m4-max").unwrap();
    let w = waves(4096, &dev, 2).unwrap(); // seed 002 §4.3: 80 slots
    assert_eq!(w.concurrent_threadgroups, 80);
    assert!((w.waves_exact - 51.2).abs() < 1e-12);
    assert_eq!(w.waves, 52);
    assert_eq!(w.last_wave_threadgroups, 4096 - 51 * 80);
    assert_eq!(waves(0, &dev, 2).unwrap().waves, 0);
    assert_eq!(waves(10, &dev, 0), Err(GeometryError::ZeroThreadgroupsPerCore));
}

// ------------------------------------------------------------ seed 003 ---

#[test]
fn seed003_listing1_pipeline_shape() {
    assert_eq!(pipeline_threadgroup_shape(32, 512).unwrap(), [32, 16, 1]);
    assert_eq!(pipeline_threadgroup_shape(32, 1024).unwrap(), [32, 32, 1]);
    assert!(matches!(pipeline_threadgroup_shape(0, 512), Err(GeometryError::BadPipelineLimits { width: 0, max_total: 512, .. })));
    assert!(matches!(pipeline_threadgroup_shape(32, 16), Err(GeometryError::BadPipelineLimits { width: 32, max_total: 16, .. })));
}

#[test]
fn seed003_1024x768_is_covered_exactly() {
    let p = cover_with_threadgroups([1024, 768, 1], [32, 16, 1], None).unwrap();
    assert_eq!(p.geometry.threadgroups, [32, 48, 1]);
    assert_eq!(p.geometry.total_threadgroups, 1_536);
    assert_eq!(p.geometry.total_threads, 786_432);
    assert_eq!(p.data_elements, 1024 * 768);
    assert!(!p.needs_bounds_check);
    assert_eq!(p.out_of_bounds_threads, 0);
    assert!(p.geometry.warnings.iter().all(|w| !w.contains("bounds-check")));
}

#[test]
fn seed003_1920x1080_needs_the_bounds_check() {
    let p = cover_with_threadgroups([1920, 1080, 1], [32, 16, 1], None).unwrap();
    assert_eq!(p.geometry.threadgroups, [60, 68, 1]); // 1080 / 16 = 67.5 → 68
    assert_eq!(p.geometry.total_threads, 60 * 68 * 512);
    assert!(p.geometry.total_threads > 1920 * 1080);
    assert!(p.needs_bounds_check);
    assert_eq!(p.out_of_bounds_threads, 60 * 68 * 512 - 1920 * 1080);
    let w = p.geometry.warnings.iter().find(|w| w.contains("bounds-check")).expect("bounds-check warning");
    assert!(w.contains("position.y >= 1080") && !w.contains("position.x"), "{w}");
    // dispatch_threads covers exactly the grid with non-uniform edges.
    let t = plan_dispatch(Threads, [1920, 1080, 1], [32, 16, 1], None).unwrap();
    assert_eq!(t.total_threads, 1920 * 1080);
    assert_eq!(t.threadgroups, [60, 68, 1]);
    assert_eq!(t.edge_threadgroup, Some([32, 8, 1]));
    assert_eq!(t.launched_threads, 60 * 68 * 512);
}

#[test]
fn threadgroups_to_cover_is_ceil_div_and_zero_safe() {
    assert_eq!(threadgroups_to_cover([4000, 3000, 1], [16, 16, 1]), [250, 188, 1]);
    assert_eq!(threadgroups_to_cover([u32::MAX, 1, 1], [1024, 1, 1]), [4_194_304, 1, 1]);
    assert_eq!(threadgroups_to_cover([10, 10, 1], [0, 4, 1]), [0, 3, 1]);
}

// --------------------------------------------------------------- errors ---

#[test]
fn error_zero_axis_names_argument_and_axis() {
    let e = plan_dispatch(Threads, [64, 0, 1], [32, 1, 1], None).unwrap_err();
    assert_eq!(e, GeometryError::ZeroAxis { argument: DispatchArgument::Grid, axis: Axis::Y, value: [64, 0, 1] });
    assert!(e.to_string().contains("grid size") && e.to_string().contains("y axis is 0"), "{e}");
    let e = plan_dispatch(Threadgroups, [4, 1, 0], [32, 1, 1], None).unwrap_err();
    assert_eq!(e, GeometryError::ZeroAxis { argument: DispatchArgument::ThreadgroupsPerGrid, axis: Axis::Z, value: [4, 1, 0] });
    let e = plan_dispatch(Threads, [64, 1, 1], [0, 1, 1], None).unwrap_err();
    assert_eq!(e, GeometryError::ZeroAxis { argument: DispatchArgument::ThreadsPerThreadgroup, axis: Axis::X, value: [0, 1, 1] });
    assert!(e.to_string().contains("threadgroup size"), "{e}");
    let e = cover_with_threadgroups([0, 1, 1], [32, 1, 1], None).unwrap_err();
    assert_eq!(e, GeometryError::ZeroAxis { argument: DispatchArgument::Data, axis: Axis::X, value: [0, 1, 1] });
}

#[test]
fn error_threadgroup_over_1024_threads() {
    // Seed 001's second pass asks for threads = (4096, 1, 1).
    let e = plan_dispatch(Threads, [4096, 1, 1], [4096, 1, 1], None).unwrap_err();
    assert_eq!(e, GeometryError::ThreadgroupTooLarge { threads: 4096, shape: [4096, 1, 1], max: 1024 });
    assert_eq!(e.to_string(), "threadgroup of 4096 threads (4096×1×1) exceeds the maximum of 1024");
    let e = plan_dispatch(Threadgroups, [1, 1, 1], [64, 32, 1], None).unwrap_err();
    assert!(matches!(e, GeometryError::ThreadgroupTooLarge { threads: 2048, max: 1024, .. }));
    // Exactly 1024 is fine.
    assert!(plan_dispatch(Threads, [1024, 1, 1], [32, 32, 1], None).is_ok());
}

#[test]
fn error_device_limits() {
    let mut dev = catalog::DeviceSpec::custom("small", 4);
    dev.max_threads_per_threadgroup = 512;
    dev.max_threadgroup_size_per_axis = [512, 512, 64];
    dev.max_threadgroups_per_grid_axis = Some([1000, 10, 10]);
    let e = plan_dispatch(Threads, [1024, 1, 1], [1024, 1, 1], Some(&dev)).unwrap_err();
    assert!(matches!(e, GeometryError::ThreadgroupTooLarge { threads: 1024, max: 512, .. }));
    let e = plan_dispatch(Threads, [1, 1, 128], [1, 1, 128], Some(&dev)).unwrap_err();
    assert_eq!(e, GeometryError::ThreadgroupAxisTooLarge { axis: Axis::Z, size: 128, max: 64, shape: [1, 1, 128] });
    let e = plan_dispatch(Threadgroups, [1, 11, 1], [32, 1, 1], Some(&dev)).unwrap_err();
    assert_eq!(e, GeometryError::TooManyThreadgroups { axis: Axis::Y, count: 11, max: 10 });
    dev.gpu_cores = 0;
    let e = plan_dispatch(Threads, [32, 1, 1], [32, 1, 1], Some(&dev)).unwrap_err();
    assert!(matches!(e, GeometryError::Device(catalog::CatalogError::InvalidSpec { field: "gpu_cores", .. })), "{e}");
}

#[test]
fn error_overflow_of_totals() {
    // Threadgroups mode: the grid in threads must fit the 32-bit position builtins.
    let e = plan_dispatch(Threadgroups, [u32::MAX, 1, 1], [2, 1, 1], None).unwrap_err();
    match &e {
        GeometryError::Overflow { what, detail } => {
            assert_eq!(*what, "grid size in threads");
            assert!(detail.contains("8,589,934,590"), "{detail}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Three huge axes overflow the 64-bit totals.
    let e = plan_dispatch(Threads, [u32::MAX, u32::MAX, u32::MAX], [1, 1, 1], None).unwrap_err();
    assert!(matches!(e, GeometryError::Overflow { what: "total threadgroup count", .. }), "{e}");
}

#[test]
fn json_fields_match_the_runtime_contract() {
    let g = plan_dispatch(Threads, [100, 1, 1], [64, 1, 1], None).unwrap();
    let v = serde_json::to_value(&g).unwrap();
    for key in [
        "mode",
        "grid",
        "threads_per_threadgroup",
        "threadgroups",
        "total_threadgroups",
        "total_threads",
        "launched_threads",
        "simdgroups_per_threadgroup",
        "idle_lanes_per_threadgroup",
        "waste_percent",
        "edge_threadgroup",
        "warnings",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["mode"], "threads");
    assert_eq!(v["edge_threadgroup"], serde_json::json!([36, 1, 1]));
    let back: geometry::DispatchGeometry = serde_json::from_value(v).unwrap();
    assert_eq!(back, g);
    assert_eq!(serde_json::to_value(DispatchMode::Threadgroups).unwrap(), "threadgroups");
}

#[test]
fn partial_edge_threadgroups_count_their_own_simd_groups() {
    // 100 threads with 64-thread groups: one full group (2 SIMD groups) and an
    // edge of 36 threads (2 SIMD groups, 28 idle lanes): 28 idle of 128.
    let g = plan_dispatch(Threads, [100, 1, 1], [64, 1, 1], None).unwrap();
    assert_eq!(g.threadgroups, [2, 1, 1]);
    assert_eq!(g.total_threads, 100);
    assert_eq!(g.launched_threads, 128);
    assert!((g.waste_percent - 28.0 / 128.0 * 100.0).abs() < 1e-12);
    // 2-D edges: 40×40 with 32×32 → corner edge 8×8 = 64 threads (2 SIMD groups).
    let g = plan_dispatch(Threads, [40, 40, 1], [32, 32, 1], None).unwrap();
    let lanes = 1024 + 2 * (8 * 32) + 64; // full + two side edges (256 each) + corner
    assert!((g.waste_percent - (lanes - 1600) as f64 / lanes as f64 * 100.0).abs() < 1e-12);
    assert_eq!(g.waste_percent, 0.0); // every edge is a multiple of 32 threads here
}

// ----------------------------------------------------------- properties ---

proptest! {
    #[test]
    fn threads_mode_covers_exactly_the_grid(
        gx in 1u32..5000, gy in 1u32..300, gz in 1u32..20,
        tx in 1u32..=64, ty in 1u32..=4, tz in 1u32..=4,
    ) {
        let g = plan_dispatch(Threads, [gx, gy, gz], [tx, ty, tz], None).unwrap();
        let grid = [gx, gy, gz];
        let tg = [tx, ty, tz];
        prop_assert_eq!(g.grid, grid);
        prop_assert_eq!(g.total_threads, u64::from(gx) * u64::from(gy) * u64::from(gz));
        prop_assert!(g.launched_threads >= g.total_threads);
        for a in 0..3 {
            let n = u64::from(g.threadgroups[a]);
            prop_assert_eq!(n, ceil_div(u64::from(grid[a]), u64::from(tg[a])));
            // Enough threadgroups, and not one too many.
            prop_assert!(n * u64::from(tg[a]) >= u64::from(grid[a]));
            prop_assert!((n - 1) * u64::from(tg[a]) < u64::from(grid[a]));
        }
        match g.edge_threadgroup {
            None => prop_assert_eq!(g.launched_threads, g.total_threads),
            Some(e) => {
                prop_assert!(g.launched_threads > g.total_threads);
                for a in 0..3 {
                    // Full threadgroups plus the edge reach exactly the grid.
                    prop_assert_eq!((g.threadgroups[a] - 1) * tg[a] + e[a], grid[a]);
                }
            }
        }
        prop_assert!(g.waste_percent >= 0.0 && g.waste_percent < 100.0);
    }

    #[test]
    fn threadgroups_mode_runs_every_launched_thread(
        nx in 1u32..1000, ny in 1u32..100, t in 1u32..=1024,
    ) {
        let g = plan_dispatch(Threadgroups, [nx, ny, 1], [t, 1, 1], None).unwrap();
        prop_assert_eq!(g.total_threads, g.launched_threads);
        prop_assert_eq!(g.total_threadgroups, u64::from(nx) * u64::from(ny));
        prop_assert_eq!(g.simdgroups_per_threadgroup, t.div_ceil(32));
        prop_assert_eq!(g.idle_lanes_per_threadgroup, t.div_ceil(32) * 32 - t);
        let expected = f64::from(g.idle_lanes_per_threadgroup) / f64::from(t.div_ceil(32) * 32) * 100.0;
        prop_assert!((g.waste_percent - expected).abs() < 1e-9);
        prop_assert_eq!(g.warnings.is_empty(), t % 32 == 0);
    }

    #[test]
    fn cover_is_minimal_and_flags_overhang(dx in 1u32..4000, dy in 1u32..4000, tx in 1u32..=32, ty in 1u32..=32) {
        let p = cover_with_threadgroups([dx, dy, 1], [tx, ty, 1], None).unwrap();
        prop_assert!(p.geometry.total_threads >= p.data_elements);
        prop_assert_eq!(p.needs_bounds_check, dx % tx != 0 || dy % ty != 0);
        prop_assert_eq!(p.out_of_bounds_threads == 0, !p.needs_bounds_check);
    }
}
