//! The kernel library on CUDA GPU 0 against its f64 references: every
//! registry entry (every operation × element type: softmax, RMSNorm,
//! LayerNorm, reductions, scans, GEMV, matrix multiply, quantized matmul,
//! attention, …) at the awkward shapes the simulator checks it at
//! (`enigma_testing::library`), with scalar kernels, with the entry's own
//! choice and, for the quantized matmul, with K split over threadgroups.
//! `cargo test -p enigma-cuda --test library`; `ENIGMA_LIBRARY_FILTER` (comma-separated
//! substrings of entry names) checks only the entries it names.
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
