//! The GEMM on cooperative tensors on CUDA GPU 0 (`wgmma` on sm_90a, the
//! scalar path elsewhere): `enigma_testing::cooperative_gemm`'s checks
//! against an f64 loop. `cargo test -p enigma-cuda --test gemm_cooperative`.
//!
//! Without a CUDA driver, NVRTC or GPU the test prints `skipped: <reason>`
//! and passes.

use enigma_cuda::CudaBackend;
use enigma_runtime::Runtime;
use enigma_testing::cooperative_gemm::{check_epilogue, check_matmul, check_persistence, check_pipeline_depths, check_rasterisation, check_shared_a_and_bias, check_tile_copies};
use std::sync::Arc;

#[test]
fn the_cooperative_gemm_matches_an_f64_loop_on_the_gpu() {
    let rt = match CudaBackend::new() {
        Ok(b) => Runtime::with_backend(Arc::new(b)),
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    check_matmul(&rt, false);
    check_epilogue(&rt, false);
    check_shared_a_and_bias(&rt, false);
    check_pipeline_depths(&rt, false);
    check_rasterisation(&rt, false);
    check_persistence(&rt, false);
    check_tile_copies(&rt, false);
}
