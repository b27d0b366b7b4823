//! The quantized matmul family `C = A · dequant(B)` for 4-bit weights: the
//! decode kernel on FP4/INT4 in their row layout ([`decode`], re-exported
//! here: [`qmatmul()`], …), the plan its three decode kernels share
//! ([`DecodePlan`]) and the family's one selection
//! ([`select`]: which of the decode kernel, the fragment decode row
//! (`qmatmul_fragments`), the affine kernel (`qmatmul_affine`), the
//! tensor-core GEMM (`gemm::qgemm`), the fused kernel (`qgemm_fused`) or
//! the GEMM on cooperative tensors (`qgemm_cooperative`) runs, and how).

pub mod decode;
mod plan;
mod select;

pub use decode::*;
pub use plan::{BlockingOptions, DecodePlan};
pub use select::{kernel_for, select, select_kernel, QmatmulKernel, QmatmulProblem, QmatmulSelection, cooperative_rows};
