//! The kernel library on CUDA GPU 0 against its f64 references: every
//! registry entry (every operation × element type: softmax, RMSNorm,
//! LayerNorm, reductions, scans, GEMV, matrix multiply, quantized matmul,
//! attention, …) at the awkward shapes the simulator checks it at
//! (`enigma_testing::library`), with scalar kernels, with the entry's own
//! choice and, for the quantized matmul, with K split over threadgroups;
//! and the quantized GEMM on cooperative tensors, which no entry chooses by
//! itself (`enigma_testing::cooperative_qgemm`: asked for through
//! `Ops::qmatmul` at awkward shapes, every tile and depth that fits, every
//! walk over the tiles; `wgmma` on sm_90a); and `log` of every finite
//! positive f16 and bf16 value (`enigma_testing::half_log`).
//! `cargo test -p enigma-cuda --test library`; `ENIGMA_LIBRARY_FILTER` (comma-separated
//! substrings of entry names) checks only the entries it names.
//!
//! Without a CUDA driver, NVRTC or GPU the test prints `skipped: <reason>`
//! and passes (recorded by `enigma_conformance::skip`, so `scripts/test.sh`
//! counts it).

use enigma_cuda::CudaBackend;
use enigma_ops::registry;
use enigma_runtime::Runtime;
use enigma_testing::cooperative_qgemm;
use enigma_testing::library::{check, option_sets, shapes};
use std::sync::Arc;

#[test]
fn every_library_kernel_matches_its_reference_on_the_gpu() {
    let rt = match CudaBackend::new() {
        Ok(b) => Runtime::with_backend(Arc::new(b)),
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    let filter: Option<Vec<String>> = std::env::var("ENIGMA_LIBRARY_FILTER").ok().map(|f| f.split(',').map(str::to_string).collect());
    let mut runs = 0;
    for entry in registry() {
        if filter.as_ref().is_some_and(|f| !f.iter().any(|part| entry.name.contains(part.as_str()))) {
            continue;
        }
        eprintln!("{}", entry.name);
        for shape in shapes(&entry) {
            for options in option_sets(&entry, &shape) {
                check(&rt, &entry, &shape, &options);
                runs += 1;
            }
        }
    }
    if filter.is_none() {
        assert!(runs > 600, "{runs} runs");
    } else {
        assert!(runs > 0, "ENIGMA_LIBRARY_FILTER matched no entry");
    }
}

/// The quantized GEMM on cooperative tensors, one test per part of
/// `enigma_testing::cooperative_qgemm` (each filterable by name, and run
/// side by side).
fn on_the_gpu(check: fn(&Runtime, bool)) {
    let rt = match CudaBackend::new() {
        Ok(b) => Runtime::with_backend(Arc::new(b)),
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    check(&rt, false);
}

#[test]
fn the_quantized_gemm_on_cooperative_tensors_matches_its_reference_at_awkward_shapes_on_the_gpu() {
    on_the_gpu(cooperative_qgemm::check_shapes);
}

#[test]
fn the_quantized_gemm_on_cooperative_tensors_matches_its_reference_with_k_split_on_the_gpu() {
    on_the_gpu(cooperative_qgemm::check_k_splits);
}

#[test]
fn the_quantized_gemm_on_cooperative_tensors_matches_its_reference_in_fragment_order_on_the_gpu() {
    on_the_gpu(cooperative_qgemm::check_fragment_order);
}

#[test]
fn the_quantized_gemm_on_cooperative_tensors_matches_its_reference_on_mlx_affine_weights_on_the_gpu() {
    on_the_gpu(cooperative_qgemm::check_mlx_affine);
}

#[test]
fn the_quantized_gemm_on_cooperative_tensors_matches_its_reference_at_every_pipeline_depth_on_the_gpu() {
    on_the_gpu(cooperative_qgemm::check_pipeline_depths);
}

#[test]
fn the_quantized_gemm_on_cooperative_tensors_matches_its_reference_in_every_walk_on_the_gpu() {
    on_the_gpu(cooperative_qgemm::check_rasterisation);
}

#[test]
fn log_of_every_half_value_is_within_the_bound_on_the_gpu() {
    let rt = match CudaBackend::new() {
        Ok(b) => Runtime::with_backend(Arc::new(b)),
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    enigma_testing::half_log::check_log_of_every_half_value(&rt, false);
}
