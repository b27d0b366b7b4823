//! Unit tests of the GEMM configurations and kernels.

use super::config::*;
use super::kernel::*;
use crate::library::quant::Format;
use crate::library::tile::GemmTile;
use crate::library::*;
use enigma_ir::QuantLayout;

#[test]
fn configurations_are_checked_with_the_numbers() {
    assert!(GemmConfig::new(DType::F16, DType::F32).check(MAX_THREADGROUP_MEMORY_BYTES).is_ok());
    let too_big = GemmConfig { tile: GemmTile::new(128, 128, 64, 2, 2), ..GemmConfig::new(DType::F32, DType::F32) };
    let err = too_big.check(MAX_THREADGROUP_MEMORY_BYTES).unwrap_err().to_string();
    // (128 × (64 + 8) + 64 × (128 + 8)) f32 elements.
    assert!(err.contains("needs 71680 bytes of threadgroup memory (limit 32768)"), "{err}");
    let odd = GemmConfig { tile: GemmTile::new(128, 128, 32, 3, 2), ..GemmConfig::new(DType::F16, DType::F16) };
    assert!(odd.check(MAX_THREADGROUP_MEMORY_BYTES).unwrap_err().to_string().contains("3×2 SIMD groups do not divide a 128×128 tile"));
    let cfg = GemmConfig::new(DType::F16, DType::F32);
    // 128 × (32 + 8) + 32 × (128 + 8) halves; a 64×64 f32 tile per SIMD group.
    assert_eq!((cfg.threads(), cfg.threadgroup_memory_bytes(), cfg.accumulators_per_lane()), (128, 18944, 128));
    assert_eq!(cfg.dispatch(100, 33, 2).size, [1, 1, 2]);
    let split = |t| cfg.with_threads(t).map(|c| (c.tile.sg_rows, c.tile.sg_cols));
    assert_eq!((split(128), split(256), split(1024)), (Ok((2, 2)), Ok((4, 2)), Ok((8, 4))));
    // One SIMD group holds at most a 64×64 tile.
    assert_eq!(cfg.with_threads(32).map(|c| (c.tile.shape.m, c.tile.shape.n)), Ok((64, 64)));
    assert!(split(96).unwrap_err().to_string().contains("96 threads are 3 SIMD groups"));
}

/// The quantized GEMM splits K above the GEMM's 32 rows only where its
/// tiles leave most compute units idle, at most four ways.
#[test]
fn qgemm_splits_narrow_grids_up_to_128_rows() {
    let at = |m: u32, n: u32, k: u32| QgemmConfig::for_rows(Format::Int4, DType::F16, m).splits_for(m, n, k, 264);
    assert_eq!(at(16, 11008, 4096), QgemmConfig::for_rows(Format::Int4, DType::F16, 16).gemm.splits_for(16, 11008, 4096, 264));
    assert_eq!(at(64, 4096, 4096), 4);
    assert_eq!(at(128, 4096, 11008), 4);
    assert_eq!(at(64, 11008, 4096), 1);
    assert_eq!(at(256, 4096, 4096), 1);
}

/// Fragment order keeps each SIMD group's tile within its register
/// budget and narrows the tile to divide N.
#[test]
fn fragment_order_narrows_tiles_to_fit_n_and_its_registers() {
    let wide = QgemmConfig::for_rows(Format::Int4, DType::F16, 128).in_layout(QuantLayout::Fragments, 11008);
    assert_eq!(wide.tile(), GemmTile::new(128, 128, 64, 2, 4));
    let narrow = QgemmConfig::for_rows(Format::Int4, DType::F16, 16).in_layout(QuantLayout::Fragments, 48);
    assert_eq!((narrow.tile().shape.n, narrow.tile().sg_cols), (16, 1));
}

/// The quantized GEMM declares the threadgroup memory its configuration
/// reports, with and without the raw stages of the pipelined form.
#[test]
fn qgemm_memory_is_what_the_kernel_declares() {
    for (rows, stages) in [(16, 1), (16, 2), (64, 2), (128, 1)] {
        let cfg = QgemmConfig::for_rows(Format::Int4, DType::F16, rows).with_stages(stages);
        for cfg in [cfg, cfg.whole_tiles_for(rows, 128, 128), cfg.in_layout(QuantLayout::Fragments, 128).whole_tiles_for(rows, 128, 128)] {
            if cfg.check(u64::MAX).is_err() {
                continue;
            }
            let declared: u64 = qgemm(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
            assert_eq!(cfg.threadgroup_memory_bytes(), declared, "{}", cfg.name());
        }
    }
    // The whole-tile kernel has no dequantized slice: 64 rows, two
    // stages of A (64 × 40 halves), words and scales.
    let whole = QgemmConfig::for_rows(Format::Fp4, DType::F16, 64).with_stages(2).whole_tiles_for(64, 128, 128);
    assert_eq!(whole.gemm.edges, Edges::WholeTiles);
    assert_eq!(whole.threadgroup_memory_bytes(), 2 * 64 * 40 * 2 + 2 * (512 * 4 + 128 * 2));
    // 64 rows, two stages: A 2 × 64 × 40 halves, B 128 × 40 halves, and
    // per stage 4 × 128 words and 128 scales.
    let cfg = QgemmConfig::for_rows(Format::Fp4, DType::F16, 64).with_stages(2);
    assert_eq!(cfg.threadgroup_memory_bytes(), 2 * 64 * 40 * 2 + 128 * 40 * 2 + 2 * (512 * 4 + 128 * 2));
    assert!(cfg.check(32 * 1024).is_ok());
    let big = QgemmConfig::for_rows(Format::Fp4, DType::F16, 128).with_stages(2);
    assert!(big.check(32 * 1024).unwrap_err().to_string().contains("bytes of threadgroup memory (limit 32768)"));
    assert_eq!(QgemmConfig::for_rows(Format::Fp4, DType::F16, 128).pipelined_for(32 * 1024).gemm.stages, 1);
}

/// The quantized GEMM stages through f16 A untransposed and B transposed:
/// a staging GEMM of other operands is refused with what it has; the
/// names mark each kind of edge handling.
#[test]
fn qgemm_staging_and_edges_are_checked_and_named() {
    let cfg = QgemmConfig::for_rows(Format::Int4, DType::F16, 64).with_stages(2);
    assert!(cfg.check(u64::MAX).is_ok());
    let untransposed = cfg.with_gemm(|g| GemmConfig { trans_b: false, ..g });
    let err = untransposed.check(u64::MAX).unwrap_err().to_string();
    assert!(err.contains("stages f16 A untransposed and B transposed (not f16 A, B untransposed)"), "{err}");
    let f32_a = cfg.with_gemm(|g| GemmConfig { input: DType::F32, ..g });
    assert!(f32_a.check(u64::MAX).unwrap_err().to_string().contains("(not f32 A, B transposed)"));
    let names: Vec<String> = [Edges::Checked, Edges::WholeTiles, Edges::RaggedRows].into_iter().map(|edges| cfg.with_gemm(|g| GemmConfig { edges, ..g }).name()).collect();
    assert_eq!(names, ["qgemm_int4_f16_64x128_sg2x2_s2", "qgemm_int4_f16_64x128_sg2x2_s2_whole", "qgemm_int4_f16_64x128_sg2x2_s2_whole_ragged"]);
}

/// The cooperative GEMM declares the threadgroup memory its configuration
/// reports (what the selection checks against the device), at every tile,
/// depth and walk.
#[test]
fn cooperative_memory_is_what_the_kernel_declares() {
    use super::cooperative::{CoopGemmConfig, COOP_TILES};
    for &(tm, tn, tk) in &COOP_TILES {
        for stages in 2..=MAX_STAGES {
            for raster in [1, 8] {
                let cfg = CoopGemmConfig { input: DType::BF16, output: DType::F16, tm, tn, tk, stages, raster, persistent: false, row_bias: false, staged: false, tile_copies: false };
                if cfg.check(u64::MAX).is_err() {
                    continue;
                }
                let declared: u64 = super::gemm_cooperative(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
                assert_eq!(cfg.memory_bytes(), declared, "{}", cfg.name());
            }
        }
    }
}

/// A tile whose slice rows do not divide the threads' copies is refused
/// (its staging would give some rows two copies and others none): 192
/// columns are 24 copies a row, which neither 128 nor 256 threads divide.
#[test]
fn cooperative_tiles_must_split_their_copies_in_whole_rows() {
    use super::cooperative::CoopGemmConfig;
    for tm in [64, 128] {
        let cfg = CoopGemmConfig { input: DType::F16, output: DType::F16, tm, tn: 192, tk: 64, stages: 3, raster: 1, persistent: false, row_bias: false, staged: true, tile_copies: false };
        let e = cfg.check(u64::MAX).unwrap_err().to_string();
        assert!(e.contains("in whole rows"), "{e}");
        for tn in [64, 128, 256] {
            assert!(CoopGemmConfig { tn, ..cfg }.check(u64::MAX).is_ok(), "{tm}x{tn}");
        }
    }
}

/// The persistent cooperative kernel: one threadgroup per compute unit up
/// to the tiles of every product, on the grid's x alone; a threadgroup
/// per tile keeps its grid of tiles by products.
#[test]
fn the_persistent_cooperative_kernel_covers_the_compute_units_once() {
    use super::cooperative::CoopGemmConfig;
    let cfg = CoopGemmConfig { persistent: true, ..CoopGemmConfig::new(DType::F16, DType::F16, (128, 256, 64), 4) };
    assert!(cfg.check(u64::MAX).is_ok());
    // 4096² has 32 × 16 tiles; 3 products of 300 × 520 have 3 × 3 × 3.
    assert_eq!(cfg.dispatch(4096, 4096, 1, 132).size, [132, 1, 1]);
    assert_eq!(cfg.dispatch(300, 520, 3, 132).size, [27, 1, 1]);
    assert_eq!(CoopGemmConfig { persistent: false, ..cfg }.dispatch(300, 520, 3, 132).size, [3, 3, 3]);
}

/// C is staged through its own array of 64 padded rows (two rounds for a
/// 128-row tile) only in the inputs' type; the 128 × 256 tile in four
/// stages fits the H200's 227 KiB with it, and where a device's memory
/// does not hold the array beside the stages the selection stores C where
/// it lies.
#[test]
fn the_staging_of_c_is_counted_and_dropped_where_it_does_not_fit() {
    use super::cooperative::{CoopGemmConfig, STAGING_PAD, STAGING_ROWS};
    let big = CoopGemmConfig::new(DType::F16, DType::F16, (128, 256, 64), 4);
    assert_eq!(big.memory_bytes(), 4 * (128 * 64 + 64 * 256) * 2 + u64::from(STAGING_ROWS * (256 + STAGING_PAD)) * 2);
    assert!(big.check(227 * 1024).is_ok());
    let e = CoopGemmConfig { output: DType::F32, ..big }.check(u64::MAX).unwrap_err().to_string();
    assert!(e.contains("staged through threadgroup memory in the inputs' type"), "{e}");
    let small = CoopGemmConfig::for_memory(DType::F16, DType::F16, None, 32 * 1024).expect("a tile in 32 KiB");
    assert!(!small.staged && small.name().ends_with("_direct"), "{}", small.name());
    let roomy = CoopGemmConfig::for_memory(DType::F16, DType::F16, None, 227 * 1024).unwrap();
    assert!(roomy.staged && (roomy.tm, roomy.tn, roomy.stages) == (128, 256, 4), "{}", roomy.name());
}
