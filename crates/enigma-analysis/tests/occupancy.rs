//! Occupancy bounds and seed 004's threadgroup-size recommendations.

use enigma_analysis::catalog::{self, DeviceSpec};
use enigma_analysis::occupancy::{
    autotune_candidates, occupancy, recommended_threadgroup_size, KernelKind, OccupancyError, OccupancyLimiter,
};

#[test]
fn seed002_occupancy_by_threadgroup_memory() {
    let dev = catalog::find("m4-max").unwrap();
    // (bytes, floor(32768 / bytes), × 128 threads) — seed 002 §4.1.
    for (bytes, tgs, threads) in [(16_384u32, 2u32, 256u64), (4_608, 7, 896), (12_288, 2, 256), (2_560, 12, 1_536)] {
        assert_eq!(32_768 / bytes, tgs);
        let o = occupancy(&dev, 128, bytes).unwrap();
        assert_eq!(o.by_threadgroup_memory, Some(tgs), "{bytes}");
        assert_eq!(o.threadgroups_per_core, Some(tgs));
        assert_eq!(o.limiter, Some(OccupancyLimiter::ThreadgroupMemory));
        assert_eq!(o.threads_per_core, Some(threads));
        assert_eq!(o.simdgroups_per_core, Some(u64::from(tgs) * 4));
        assert_eq!(o.concurrent_threadgroups, Some(u64::from(tgs) * 40));
        // Apple publishes no per-core thread limit: the bound is not invented.
        assert_eq!(o.by_threads, None);
        assert!(o.notes.iter().any(|n| n.contains("publishes no per-core")));
    }
}

#[test]
fn seed004_occupancy_impact() {
    let dev = catalog::find("m1").unwrap();
    for (kb, tgs) in [(4u32, 8u32), (8, 4), (16, 2), (32, 1)] {
        let o = occupancy(&dev, 256, kb * 1024).unwrap();
        assert_eq!(o.threadgroups_per_core, Some(tgs), "{kb} KB");
    }
    let full = occupancy(&dev, 256, 32_768).unwrap();
    assert!(full.notes.iter().any(|n| n.contains("no headroom")));
    assert_eq!(full.memory_percent, 100.0);
}

#[test]
fn no_threadgroup_memory_on_apple_has_no_known_bound() {
    let dev = catalog::find("m4-max").unwrap();
    let o = occupancy(&dev, 256, 0).unwrap();
    assert_eq!(o.by_threadgroup_memory, None);
    assert_eq!(o.threadgroups_per_core, None);
    assert_eq!(o.limiter, None);
    assert!(o.notes.iter().any(|n| n.contains("unknown")));
}

fn h100_like() -> DeviceSpec {
    // The shape of what the CUDA runtime fills in from the driver.
    let mut d = DeviceSpec::custom("NVIDIA H100", 132);
    d.threadgroup_memory_bytes = 48 * 1024;
    d.threadgroup_memory_per_core_bytes = 228 * 1024;
    d.max_threads_per_core = Some(2048);
    d.max_simdgroups_per_core = Some(64);
    d.max_threadgroups_per_core = Some(32);
    d
}

#[test]
fn thread_simdgroup_and_slot_bounds_apply_when_known() {
    let d = h100_like();
    // 1024 threads, no shared memory: floor(2048/1024) = 2 by threads, floor(64/32) = 2 by warps.
    let o = occupancy(&d, 1024, 0).unwrap();
    assert_eq!(o.by_threads, Some(2));
    assert_eq!(o.by_simdgroups, Some(2));
    assert_eq!(o.threadgroups_per_core, Some(2));
    // 32 threads: threads allow 64, warps 64, slots 32 → slots limit.
    let o = occupancy(&d, 32, 0).unwrap();
    assert_eq!(o.threadgroups_per_core, Some(32));
    assert_eq!(o.limiter, Some(OccupancyLimiter::ThreadgroupSlots));
    // 100 threads = 4 warps: threads floor(2048/100) = 20, warps floor(64/4) = 16 → warps.
    let o = occupancy(&d, 100, 0).unwrap();
    assert_eq!(o.by_threads, Some(20));
    assert_eq!(o.by_simdgroups, Some(16));
    assert_eq!(o.limiter, Some(OccupancyLimiter::Simdgroups));
    // 40 KiB of shared memory: floor(228/40) = 5 → memory.
    let o = occupancy(&d, 128, 40 * 1024).unwrap();
    assert_eq!(o.threadgroups_per_core, Some(5));
    assert_eq!(o.limiter, Some(OccupancyLimiter::ThreadgroupMemory));
}

#[test]
fn errors() {
    let dev = catalog::find("m4-max").unwrap();
    assert_eq!(occupancy(&dev, 0, 1024), Err(OccupancyError::ZeroThreads));
    assert_eq!(occupancy(&dev, 2048, 0), Err(OccupancyError::ThreadgroupTooLarge { threads: 2048, max: 1024 }));
    let e = occupancy(&dev, 128, 40_000).unwrap_err();
    assert_eq!(e, OccupancyError::ThreadgroupMemoryTooLarge { bytes: 40_000, max: 32_768, device: "Apple M4 Max".to_string() });
    assert!(e.to_string().contains("40000") && e.to_string().contains("32768"), "{e}");
    let mut bad = dev;
    bad.simd_width = 0;
    assert!(matches!(occupancy(&bad, 128, 0), Err(OccupancyError::Device(_))));
}

#[test]
fn seed004_threadgroup_size_recommendations() {
    let r = recommended_threadgroup_size(KernelKind::ElementWise);
    assert_eq!((r.min, r.max, r.default), (256, 512, 256));
    for d in [0, 1, 32] {
        let r = recommended_threadgroup_size(KernelKind::RowReduction { row_len: d });
        assert_eq!((r.min, r.max, r.default), (32, 32, 32), "D = {d}");
    }
    for d in [33, 512, 1024] {
        let r = recommended_threadgroup_size(KernelKind::RowReduction { row_len: d });
        assert_eq!((r.min, r.max, r.default), (256, 256, 256), "D = {d}");
        assert_eq!(r.default / 32, 8); // "8 simdgroups with cross-group reduction"
    }
    for d in [1025, 4096, u32::MAX] {
        let r = recommended_threadgroup_size(KernelKind::RowReduction { row_len: d });
        assert_eq!((r.min, r.max, r.default), (256, 512, 256), "D = {d}");
    }
    let r = recommended_threadgroup_size(KernelKind::MatrixMultiply);
    assert_eq!((r.min, r.max, r.default), (64, 128, 128));
    assert_eq!(r.rationale, "Tile-based, register pressure");
    // Every recommendation is a multiple of the SIMD width.
    for kind in [KernelKind::ElementWise, KernelKind::MatrixMultiply, KernelKind::RowReduction { row_len: 7 }] {
        let r = recommended_threadgroup_size(kind);
        assert!(r.min % 32 == 0 && r.max % 32 == 0 && r.default % 32 == 0);
    }
}

#[test]
fn seed004_autotune_candidates_skip_wider_than_grid() {
    assert_eq!(autotune_candidates(4096), vec![32, 64, 128, 256, 512, 1024]);
    assert_eq!(autotune_candidates(200), vec![32, 64, 128]);
    assert_eq!(autotune_candidates(16), Vec::<u32>::new());
}
