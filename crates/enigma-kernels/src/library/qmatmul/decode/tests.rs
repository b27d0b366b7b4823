//! Tests of the row decode: every variant validates, plans per shape and device.

use super::plan::threadgroup_bytes;
use super::*;
use crate::library::qmatmul::plan::{BlockingOptions, DecodePlan};
use crate::library::quant::{Format, MAX_ROWS_PER_THREADGROUP};
use crate::library::split::SplitSum;
use crate::library::*;
use enigma_ir::{validate, ValidationOptions};

#[test]
fn every_variant_validates() {
    for format in [Format::Fp4, Format::Int4] {
        for out in [DType::F32, DType::F16] {
            for rows in 1..=MAX_ROWS_PER_THREADGROUP {
                for (cols, words) in [(1, 4), (2, 8), (4, 16)] {
                    let staged = qmatmul_staged(format, out, rows, 1, 4, 64, 2, Some(SplitSum::LastThreadgroup));
                    for kernel in [qmatmul(format, out, rows, cols, words, 64), qmatmul_splitk(format, rows, cols, words, 64), qmatmul_splitk_sum(format, out, rows, cols, words, 64), staged] {
                        if let Err(e) = validate(&kernel, &ValidationOptions::default()) {
                            panic!("{}: {e}", kernel.name);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn llama_mlp_shapes() {
    let p = plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 256, DecodeOptions::default()).unwrap();
    // 4 columns per thread, 128 per threadgroup: 86 tiles.
    assert_eq!((p.blocking.rows, p.blocking.cols, p.blocking.words), (1, 4, 8));
    assert_eq!(p.dispatch, Dispatch::threadgroups([86, 1, 1], 256));
    // At least 264 tiles (two per compute unit of a 132-unit GPU): one column per thread.
    let gpu = DecodeOptions { blocking: BlockingOptions { min_tiles: 264, ..BlockingOptions::default() }, ..DecodeOptions::default() };
    let p = plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 256, gpu).unwrap();
    assert_eq!(p.dispatch, Dispatch::threadgroups([344, 1, 1], 256));
    let gpu = DecodeOptions { blocking: BlockingOptions { min_tiles: 160, ..BlockingOptions::default() }, ..DecodeOptions::default() };
    assert_eq!(plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 256, gpu).unwrap().blocking.cols, 2);
    assert_eq!(p.bytes(), 4096 * 2 + 4096 * 11008 / 2 + 32 * 11008 * 2 + 11008 * 2);
    let p = plan(Format::Fp4, DType::F32, 16, 11008, 4096, 128, 256, DecodeOptions::default()).unwrap();
    assert_eq!((p.blocking.rows, p.blocking.cols), (8, 1));
    assert_eq!(p.dispatch, Dispatch::threadgroups([344, 2, 1], 256));
    let p = plan(Format::Fp4, DType::F32, 3, 33, 64, 32, 256, DecodeOptions::default()).unwrap();
    assert_eq!((p.blocking.rows, p.blocking.cols, p.blocking.words), (3, 1, 4));
    assert_eq!(p.dispatch, Dispatch::threadgroups([2, 1, 1], 256));
}

#[test]
fn k_splits_over_threadgroups() {
    // On a 132-unit GPU at N = 11008, K = 4096, group 128, M = 1: 344
    // one-column tiles already give every unit work, so no split; at
    // N = 2048, 64 tiles want 3 splits for 192 threadgroups.
    let gpu = DecodeOptions { blocking: BlockingOptions { min_tiles: 264, ..BlockingOptions::default() }, compute_units: 132, ..DecodeOptions::default() };
    let p = plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 256, gpu).unwrap();
    assert_eq!((p.blocking.cols, p.splits), (1, 1));
    let p = plan(Format::Int4, DType::F16, 1, 2048, 4096, 128, 256, gpu).unwrap();
    assert_eq!((p.blocking.cols, p.splits), (1, 3));
    assert_eq!(p.dispatch, Dispatch::threadgroups([64, 1, 3], 256));
    // The first pass writes the f32 workspace whatever C's type.
    let kernel = p.kernel();
    assert_eq!(kernel.name, "qmatmul_int4_f32_r1_c1_u8_t256_splitk");
    let c = kernel.params.iter().find(|q| q.name == "c").map(|q| q.kind);
    assert!(matches!(c, Some(enigma_ir::ParamKind::Buffer { elem: Type::F32, .. })), "{c:?}");
    // 86 tiles on 132 units: 2 splits, capped at groups / SIMD groups.
    assert_eq!((default_splits(86, 32, 8, 132), default_splits(20, 16, 8, 132)), (2, 2));
    // Enough threadgroups already, too few groups, or no compute units: 1.
    assert_eq!((default_splits(600, 32, 8, 132), default_splits(10, 7, 8, 132), default_splits(10, 32, 8, 0)), (1, 1, 1));
    assert_eq!(default_splits(1, 4096, 1, 132), crate::library::split::MAX_SPLITS);
    // 128 threadgroups of 16 SIMD groups: 15.5 warps per unit, no split.
    assert_eq!(default_splits(128, 32, 16, 132), 1);
}

#[test]
fn the_plan_counts_the_threadgroup_memory_the_kernel_declares() {
    for format in [Format::Int4, Format::Fp4] {
        for (rows, cols, words, threads) in [(1, 1, 8, 256), (4, 2, 16, 512), (8, 1, 4, 128)] {
            for stages in [0, 3] {
                let declared: u64 = qmatmul_staged(format, DType::F16, rows, cols, words, threads, stages, None).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
                assert_eq!(threadgroup_bytes(threads, rows, cols, words, stages), declared, "{format} r{rows} c{cols} u{words} t{threads} s{stages}");
            }
        }
    }
}

#[test]
fn narrow_grids_take_more_simdgroups_per_threadgroup() {
    // N = 4096: 128 column tiles, under two per unit of an H100.
    assert_eq!(default_threads(4096, 1, 132), 512);
    // N = 11008: 344 tiles.
    assert_eq!(default_threads(11008, 4, 132), DEFAULT_THREADS);
    // The simulator (no compute units) keeps the default.
    assert_eq!(default_threads(64, 1, 0), DEFAULT_THREADS);
    // One row: 512 threads and, at N = 11008 on 132 units, 4 columns
    // per thread (86 tiles, at least 66); at N = 4096 one (128 tiles:
    // 4 and 2 columns leave 32 and 64).
    assert_eq!((default_threads(11008, 1, 132), default_min_tiles(1, 132), default_min_tiles(2, 132)), (512, 66, 264));
    let one_row = DecodeOptions { blocking: BlockingOptions { min_tiles: default_min_tiles(1, 132), ..BlockingOptions::default() }, compute_units: 132, ..DecodeOptions::default() };
    let p = plan(Format::Int4, DType::F16, 1, 11008, 4096, 128, 512, one_row).unwrap();
    // 86 tiles of 16 SIMD groups: 10.4 warps per unit, no split.
    assert_eq!((p.blocking.cols, p.splits), (4, 1));
    assert_eq!(plan(Format::Int4, DType::F16, 1, 4096, 4096, 128, 512, one_row).unwrap().blocking.cols, 1);
    // Unsplit (the simulator's default): today's kernel, no workspace.
    let p = plan(Format::Fp4, DType::F32, 3, 33, 96, 32, 64, DecodeOptions::default()).unwrap();
    assert_eq!(p.splits, 1);
    assert_eq!(p.kernel(), qmatmul(Format::Fp4, DType::F32, 3, 1, 4, 64));
    // Asked for: any count up to the groups, dividing them or not.
    let split = |s| plan(Format::Fp4, DType::F16, 3, 33, 96, 32, 64, DecodeOptions { splits: Some(s), ..DecodeOptions::default() });
    assert_eq!(split(2).unwrap().dispatch, Dispatch::threadgroups([2, 1, 2], 64));
    assert_eq!(split(3).unwrap().splits, 3);
    assert_eq!(split(0).unwrap_err().to_string(), "qmatmul_fp4_f16: 0 K splits; between 1 and 3 (the 3 quantization groups of k = 96, at most 64)");
    assert!(split(4).unwrap_err().to_string().contains("4 K splits; between 1 and 3"));
}

#[test]
fn bad_shapes_are_errors_with_the_numbers() {
    let e = |r: Result<DecodePlan<RowBlocking>, ShapeError>| r.unwrap_err().to_string();
    let o = DecodeOptions::default();
    assert_eq!(e(plan(Format::Int4, DType::F32, 1, 8, 96, 64, 256, o)), "qmatmul_int4_f32: k = 96 is not a multiple of the group size 64");
    assert_eq!(e(plan(Format::Int4, DType::F32, 1, 8, 96, 48, 256, o)), "qmatmul_int4_f32: group size 48 is not 32, 64 or 128");
    assert_eq!(e(plan(Format::Fp4, DType::F32, 0, 8, 64, 64, 256, o)), "qmatmul_fp4_f32: m must be at least 1");
    assert!(e(plan(Format::MlxAffine, DType::F32, 1, 8, 64, 64, 256, o)).contains("not mlx_affine"));
    let cols = DecodeOptions { blocking: BlockingOptions { cols: Some(4), ..o.blocking }, ..o };
    assert_eq!(e(plan(Format::Fp4, DType::F32, 1, 10, 64, 64, 256, cols)), "qmatmul_fp4_f32: 4 columns per thread need n % 4 == 0, n = 10");
    let words = DecodeOptions { blocking: BlockingOptions { words: Some(16), ..o.blocking }, ..o };
    assert_eq!(e(plan(Format::Fp4, DType::F32, 1, 10, 64, 64, 256, words)), "qmatmul_fp4_f32: 16 packed words per iteration must be 4, 8 or 16 and divide the group's 8 words");
    let big = DecodeOptions { blocking: BlockingOptions { cols: Some(4), rows: Some(8), ..o.blocking }, ..o };
    assert!(e(plan(Format::Fp4, DType::F32, 8, 16, 64, 64, 1024, big)).contains("163840 bytes of threadgroup memory (partial sums, staged A)"));
    // Default rows shrink to fit: per row and SIMD group, 128 bytes of
    // partial sums and, for 8 words, 128 of staged A as f16 pairs, FP4 and
    // INT4 alike: 8 rows at 512 threads (32 KiB), 4 at 1024.
    assert_eq!(plan(Format::Fp4, DType::F32, 16, 16, 64, 64, 512, o).unwrap().blocking.rows, 8);
    for format in [Format::Fp4, Format::Int4] {
        assert_eq!(plan(format, DType::F32, 16, 16, 64, 64, 1024, o).unwrap().blocking.rows, 4);
    }
}
