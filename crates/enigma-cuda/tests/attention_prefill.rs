//! Attention prefill on CUDA GPU 0 against the f64 reference at awkward
//! sizes (`enigma_testing::attention_prefill`): the kernel the selection
//! gives (on cooperative tensors where the GPU runs them on `wgmma`, sm_90a,
//! staged by tile copies), the same staged by each thread's copies, and the
//! kernel on SIMD-group matrices.
//! `cargo test -p enigma-cuda --test attention_prefill`.
//!
//! Without a CUDA driver, NVRTC or GPU the test prints `skipped: <reason>`
//! and passes.

use enigma_cuda::CudaBackend;
use enigma_ops::AttentionOptions;
use enigma_runtime::Runtime;
use enigma_testing::attention_prefill::check_awkward_sizes;
use std::sync::Arc;

#[test]
fn both_prefill_kernels_match_the_f64_reference_on_the_gpu() {
    let rt = match CudaBackend::new() {
        Ok(b) => Runtime::with_backend(Arc::new(b)),
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    let default = if rt.device().wgmma() { "attention_prefill_coop_" } else { "attention_prefill_" };
    check_awkward_sizes(&rt, AttentionOptions::default(), default, false);
    if rt.device().wgmma() {
        let threads_copies = AttentionOptions { prefill_tile_copies: Some(false), ..Default::default() };
        check_awkward_sizes(&rt, threads_copies, "attention_prefill_coop_", false);
    }
    let matrices = AttentionOptions { prefill_cooperative: Some(false), ..Default::default() };
    check_awkward_sizes(&rt, matrices, "attention_prefill_", false);
}
