//! The quantized GEMM on cooperative tensors (`qgemm_cooperative`) on the
//! simulator, under its sanitizer, posing as a device of 227 KiB of
//! threadgroup memory (where every tile and depth fits):
//! `enigma_testing::cooperative_qgemm`'s checks against the f64 product
//! (awkward M, N and K, every group size, FP4 and INT4, K split, words in
//! fragment order, MLX's affine weights, every
//! tile and depth, every walk over the tiles), and that `qmatmul` does not take
//! it unasked on the simulator (its products are not `wgmma`).

use enigma_ir::Scalar;
use enigma_kernels::library::quant::{self, Format};
use enigma_ops::{upload, DType, Ops, Options, QuantizedWeights};
use enigma_runtime::{Device, Runtime};
use enigma_testing::cooperative_qgemm::{check_fragment_order, check_k_splits, check_mlx_affine, check_pipeline_depths, check_rasterisation, check_shapes, cooperative};
use std::sync::Arc;

fn device_of_227_kib() -> Runtime {
    Runtime::with_backend(Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)))
}

#[test]
fn qmatmul_asked_for_it_matches_the_f64_product_at_awkward_shapes() {
    check_shapes(&device_of_227_kib(), true);
}

#[test]
fn qmatmul_on_fragment_ordered_words_matches_the_f64_product() {
    check_fragment_order(&device_of_227_kib(), true);
}

#[test]
fn qmatmul_on_mlx_affine_weights_matches_the_f64_product() {
    check_mlx_affine(&device_of_227_kib(), true);
}

#[test]
fn qmatmul_with_k_split_matches_the_f64_product() {
    check_k_splits(&device_of_227_kib(), true);
}

#[test]
fn every_tile_and_pipeline_depth_matches_the_f64_product_race_free() {
    check_pipeline_depths(&device_of_227_kib(), true);
}

#[test]
fn every_walk_over_the_tiles_computes_each_tile_once() {
    // The 64 × 64 tile in two stages fits the simulator's own 32 KiB.
    check_rasterisation(&Runtime::new(Device::Sim).unwrap(), true);
}

#[test]
fn qmatmul_takes_it_only_when_asked_and_names_what_it_refuses() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let (m, n, k) = (16, 64, 128);
    let q = quant::quantize(Format::Int4, &enigma_kernels::test_data(k * n, 3), k, n, 64).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, Scalar::F16, &vec![0.5; m * k]).unwrap();
    let plain = Ops::new(&rt);
    plain.qmatmul(&a, &w, m, DType::F16).unwrap();
    let kernel = plain.take_launches().remove(0).kernel;
    assert!(!kernel.starts_with("qgemm_coop"), "{kernel}");
    let asked = Ops::new(&rt).with_options(cooperative(false));
    asked.qmatmul(&a, &w, m, DType::F16).unwrap();
    assert_eq!(asked.take_launches().remove(0).kernel, "qgemm_coop_int4_f16_16x64x128_s3_r8_whole");
    let err = asked.qmatmul(&a, &w, m, DType::BF16).unwrap_err().to_string();
    assert!(err.contains("the output is f32 or f16") || err.contains("f16 or f32, not bf16"), "{err}");
    let narrow = quant::quantize(Format::Int4, &enigma_kernels::test_data(k * 60, 3), k, 60, 64).unwrap();
    let err = asked.qmatmul(&a, &QuantizedWeights::upload(&rt, &narrow).unwrap(), m, DType::F16).unwrap_err().to_string();
    assert!(err.contains("N = 60 must be a multiple of 8"), "{err}");
    let threads = Ops::new(&rt).with_options(Options { threads: Some(256), ..cooperative(false) });
    let err = threads.qmatmul(&a, &w, m, DType::F16).unwrap_err().to_string();
    assert!(err.contains("a thread count is an option of the SIMD-group kernels"), "{err}");
}
