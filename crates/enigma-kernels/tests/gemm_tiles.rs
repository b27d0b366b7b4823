//! The library GEMM's tile set and its default per shape: the autotuner's
//! 108 configurations, their text form, and `select_tile`'s rules and
//! fallbacks (that the kernel accepts its choices is tested in
//! `enigma-ops/tests/gemm_select.rs`, beside the kernel's own check).

use enigma_analysis::tiles::staged_slice_bytes;
use enigma_kernels::library::gemm::select_tile;
use enigma_kernels::library::tile::{gemm_tiles, GemmTile, ThreadgroupLimits};

const METAL: ThreadgroupLimits = ThreadgroupLimits::PORTABLE;
const CUDA: ThreadgroupLimits = ThreadgroupLimits { max_threads: 1024, max_memory_bytes: 48 * 1024 };

#[test]
fn the_tuners_tiles_are_108_distinct_configurations_of_32_or_64_per_simdgroup() {
    let tiles = gemm_tiles();
    assert_eq!(tiles.len(), 108);
    let distinct: std::collections::HashSet<GemmTile> = tiles.iter().copied().collect();
    assert_eq!(distinct.len(), 108);
    for t in &tiles {
        assert!([64, 128, 256].contains(&t.shape.m) && [64, 128, 256].contains(&t.shape.n) && [16, 32, 64].contains(&t.shape.k), "{t}");
        for side in [t.shape.m / t.sg_rows, t.shape.n / t.sg_cols] {
            assert!(side == 32 || side == 64, "{t}");
        }
        assert_eq!(t.threads(), 32 * t.sg_rows * t.sg_cols);
    }
}

#[test]
fn threadgroup_memory_is_the_staged_rule() {
    // 128 × (32 + 8) + 32 × (128 + 8) halves.
    let t = GemmTile::new(128, 128, 32, 2, 2);
    assert_eq!(t.threadgroup_memory_bytes(2), 18944);
    assert_eq!(t.threadgroup_memory_bytes(4), staged_slice_bytes(128, 32, 4) + staged_slice_bytes(32, 128, 4));
    // 128×128×64 halves: 35840 bytes, over Metal's 32 KiB, within CUDA's 48.
    let deep = GemmTile::new(128, 128, 64, 2, 2);
    assert!(!deep.fits(2, &METAL) && deep.fits(2, &CUDA));
    // 256×256 over 8×8 SIMD groups is 2048 threads.
    assert!(!GemmTile::new(256, 256, 16, 8, 8).fits(2, &CUDA));
}

#[test]
fn tiles_print_and_parse_as_tm_x_tn_x_tk_over_the_grid() {
    let t = GemmTile::new(128, 64, 32, 2, 2);
    assert_eq!(t.to_string(), "128x64x32/2x2");
    assert_eq!("128x64x32/2x2".parse::<GemmTile>(), Ok(t));
    for bad in ["128x64x32", "128x64/2x2", "128x64x32/2", "axbxc/1x1", ""] {
        let err = bad.parse::<GemmTile>().unwrap_err();
        assert!(err.to_string().contains("TMxTNxTK/ROWSxCOLS"), "{bad}: {err}");
    }
}

#[test]
fn the_default_tile_follows_m_and_the_input_width() {
    let pick = |m, n, bytes| select_tile(m, n, 4096, bytes, &CUDA).to_string();
    // Measured on the H100 (BENCHMARKS.md): 16-bit 128×128×32 over 2×2;
    // f32 at 4096³ 128×64×32 over 2×2.
    assert_eq!(pick(4096, 4096, 2), "128x128x32/2x2");
    assert_eq!(pick(4096, 4096, 4), "128x64x32/2x2");
    // Small M (measured with split-K at M = 16 and 64; 32 between them).
    assert_eq!(pick(1, 11008, 2), "16x128x32/1x4");
    assert_eq!(pick(16, 11008, 2), "16x128x32/1x4");
    assert_eq!(pick(32, 11008, 2), "32x128x32/1x4");
    assert_eq!(pick(64, 11008, 4), "64x128x32/2x2");
    // f32 below the measured size keeps 64×64×32.
    assert_eq!(pick(1000, 1000, 4), "64x64x32/2x2");
}

#[test]
fn every_default_fits_its_device_and_small_devices_fall_back() {
    let shapes = [1, 7, 33, 100, 1000, 4097];
    for limits in [METAL, CUDA] {
        for &m in &shapes {
            for &n in &shapes {
                for bytes in [2, 4] {
                    let t = select_tile(m, n, 33, bytes, &limits);
                    assert!(t.fits(bytes, &limits), "{m}x{n} with {bytes}-byte inputs: {t}");
                }
            }
        }
    }
    // A device with 16 KiB and 128 threads: the 16-bit 128×128×32
    // (18944 bytes) gives way to 64×64×32 over 2×2 (9728 bytes).
    let small = ThreadgroupLimits { max_threads: 128, max_memory_bytes: 16 * 1024 };
    assert_eq!(select_tile(4096, 4096, 4096, 2, &small).to_string(), "64x64x32/2x2");
    // 64 threads: only one SIMD group fits, 32×32×16.
    let tiny = ThreadgroupLimits { max_threads: 64, max_memory_bytes: 16 * 1024 };
    assert_eq!(select_tile(4096, 4096, 4096, 4, &tiny).to_string(), "32x32x16/1x1");
    // Nothing fits: the smallest is returned for the kernel's check to refuse.
    let none = ThreadgroupLimits { max_threads: 16, max_memory_bytes: 1024 };
    assert_eq!(select_tile(5, 5, 5, 2, &none).to_string(), "32x32x16/1x1");
}
