//! The kernel library on CUDA GPU 0 against its f64 references: every
//! registry entry (every operation × element type: softmax, RMSNorm,
//! LayerNorm, reductions, scans, GEMV, matrix multiply, quantized matmul,
//! attention, …) at the awkward shapes the simulator checks it at
//! (`enigma_testing::library`), with scalar kernels, with the entry's own
//! choice and, for the quantized matmul, with K split over threadgroups.
//! `cargo test -p enigma-cuda --test library`.
//!
//! Without a CUDA driver, NVRTC or GPU the test prints `skipped: <reason>`
//! and passes (recorded by `enigma_conformance::skip`, so `scripts/test.sh`
//! counts it).

use enigma_cuda::CudaBackend;
use enigma_ops::registry;
use enigma_runtime::Runtime;
use enigma_testing::library::{check, option_sets, shapes};
use std::sync::Arc;

#[test]
fn every_library_kernel_matches_its_reference_on_the_gpu() {
    let rt = match CudaBackend::new() {
        Ok(b) => Runtime::with_backend(Arc::new(b)),
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    let mut runs = 0;
    for entry in registry() {
        for shape in shapes(&entry) {
            for options in option_sets(&entry, &shape) {
                check(&rt, &entry, &shape, &options);
                runs += 1;
            }
        }
    }
    assert!(runs > 600, "{runs} runs");
}
