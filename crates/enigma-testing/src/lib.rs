//! enigma's test support, never published: what the tests of several crates,
//! the `enigma check` command and the benchmarks share.
//!
//! * [`corpus`]: the sanitizer corpus — buggy kernels, their fixes, their
//!   dispatches and the findings the sanitizer must report — and the seed
//!   kernels with the clean dispatch each must pass.
//! * [`harness`]: a corpus [`Launch`](corpus::Launch) made into buffers and
//!   arguments and dispatched through a runtime, or — for kernels validation
//!   rejects only for a divergent barrier — on the simulator directly
//!   ([`harness::run_unvalidated`]).
//! * [`library`]: the kernel library's checked runs against their f64
//!   references (`enigma_ops::Entry::run_with`) on awkward shapes, for the
//!   simulator (`enigma-ops/tests/registry_sizes.rs`) and a CUDA GPU
//!   (`enigma-cuda/tests/library.rs`).
//! * [`cooperative_gemm`]: the GEMM on cooperative tensors checked on a
//!   runtime (the simulator's and a CUDA GPU's tests).
//! * [`cooperative_qgemm`]: the quantized GEMM on cooperative tensors
//!   checked on a runtime (the simulator's and a CUDA GPU's tests).
//! * [`half_log`]: `log` of every finite positive f16 and bf16 value
//!   against f64 `ln` (the simulator's and a CUDA GPU's tests).
//! * [`attention_prefill`]: attention prefill checked on a runtime against
//!   its f64 reference at awkward sizes (the simulator's and a CUDA GPU's
//!   tests).
//!
//! The one data generator (`enigma_kernels::test_data`,
//! `enigma_kernels::TestRng`) and the one tolerance rule for sums
//! (`enigma_kernels::sum_tolerance`, `enigma_ops::Tolerance`) live in the
//! library crates, because `enigma run`, `enigma bench` and the Python
//! package's checked runs use them too.
//!
//! It is a dev-dependency of every library crate that uses it
//! (`enigma-kernels`, `enigma-runtime`, `enigma-ops`, `enigma-cuda`), so no
//! library's normal dependency graph contains it; the `enigma` crate (for its CLI) and
//! `enigma-bench` depend on it normally, because `enigma check` and
//! `corpus_cuda` run the corpus. Nothing the simulator depends on depends on
//! it.

pub mod attention_prefill;
pub mod cooperative_gemm;
pub mod cooperative_qgemm;
pub mod corpus;
pub mod half_log;
pub mod harness;
pub mod library;
