//! The GEMM on cooperative tensors (`gemm::cooperative`) on the simulator,
//! under its sanitizer: `enigma_testing::cooperative_gemm`'s checks against
//! an f64 loop (partial tiles along M, N and K, batches, alpha, beta,
//! 16-bit outputs), the default choice there, and the options it refuses.

use enigma_ir::Scalar;
use enigma_ops::{upload, DType, Error, GemmOptions, Ops, Options};
use enigma_runtime::{Device, Runtime};
use enigma_testing::cooperative_gemm::{check_epilogue, check_matmul, check_persistence, check_pipeline_depths, check_rasterisation, check_shared_a_and_bias, check_tile_copies, cooperative};

#[test]
fn matmul_on_cooperative_tensors_matches_an_f64_loop() {
    check_matmul(&Runtime::new(Device::Sim).unwrap(), true);
}

#[test]
fn the_epilogue_scales_adds_c_and_rounds_to_the_output_type() {
    check_epilogue(&Runtime::new(Device::Sim).unwrap(), true);
    let rt = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    check_epilogue(&rt, true);
}

#[test]
fn products_sharing_one_a_add_the_row_bias_before_rounding() {
    // In 32 KiB (C stored where it lies) and posing as a device of 227
    // KiB (C staged in two rounds of 64 rows).
    check_shared_a_and_bias(&Runtime::new(Device::Sim).unwrap(), true);
    let rt = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    check_shared_a_and_bias(&rt, true);
}

#[test]
fn every_pipeline_depth_matches_an_f64_loop_and_overlapped_products_are_race_free() {
    // Posing as a device of 227 KiB, where the 128 × 256 tile's three and
    // four stages (overlapped products) fit.
    let rt = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    check_pipeline_depths(&rt, true);
}

#[test]
fn every_walk_over_the_tiles_computes_each_tile_once() {
    check_rasterisation(&Runtime::new(Device::Sim).unwrap(), true);
}

#[test]
fn the_persistent_kernel_computes_every_tile_once_and_its_prefetch_is_race_free() {
    // Posing as a device of 227 KiB, where four stages of 128 rows fit.
    let rt = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    check_persistence(&rt, true);
}

#[test]
fn tile_copies_match_an_f64_loop_and_read_nothing_of_the_next_product() {
    // Posing as a device of 227 KiB, where the 128 × 256 tile's stages fit.
    let rt = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    check_tile_copies(&rt, true);
}

#[test]
fn the_simulator_runs_the_simdgroup_kernel_unless_asked_and_refuses_what_the_kernel_cannot_take() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ones = upload(&rt, Scalar::F16, &vec![1.0; 64 * 64]).unwrap();
    let ops = Ops::new(&rt).with_options(Options { elem: Some(Scalar::F16), ..Options::default() });
    ops.matmul(&ones, &ones, 64, 64, 64, DType::F32).unwrap();
    let kernel = ops.take_launches().remove(0).kernel;
    assert!(kernel.starts_with("gemm_f16"), "{kernel}");
    let forced = Ops::new(&rt).with_options(Options { elem: Some(Scalar::F16), ..cooperative(false) });
    // N = 60 is not whole 16-byte copies.
    let err = forced.matmul(&ones, &ones, 64, 60, 64, DType::F32).unwrap_err();
    assert!(matches!(err, Error::Argument { .. }) && err.to_string().contains("N = 60 and K = 64 must be multiples of 8"), "{err}");
    let split = Ops::new(&rt).with_options(Options { elem: Some(Scalar::F16), gemm: GemmOptions { k_splits: Some(2), cooperative: Some(true), ..GemmOptions::default() }, ..Options::default() });
    let err = split.matmul(&ones, &ones, 64, 64, 64, DType::F32).unwrap_err();
    assert!(err.to_string().contains("options of the SIMD-group kernel"), "{err}");
}
