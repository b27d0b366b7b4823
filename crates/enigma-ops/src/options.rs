//! Per-call choices: the fields every operation reads (threads, element
//! type, vector loads, the sanitizer) and one struct per kernel family for
//! the choices only that family has (the matrix families' and the
//! attention's are the kernel library's own, which their selections read). Every field has a default (`None`:
//! the library's choice for the shape and the device).

use enigma_ir::Scalar;
pub use enigma_kernels::library::select::AttentionOptions;
use enigma_kernels::library::select::{GemmOptions, Overrides, QmatmulOptions};

/// Per-call choices; every field has a default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Threads per threadgroup (default: the occupancy table's size for the
    /// kernel, [`crate::default_threads`]).
    pub threads: Option<u32>,
    /// Element type of untyped input buffers (default f32).
    pub elem: Option<Scalar>,
    /// `Some(true)`: use vector loads or fail; `Some(false)`: scalar
    /// kernels (for the quantized decode kernels: one column per thread,
    /// one packed word per load); `None`: vector loads when the buffers
    /// and shape allow.
    pub vectorize: Option<bool>,
    /// Run every dispatch under the simulator's sanitizer (races,
    /// uninitialised reads, …): error findings fail the dispatch
    /// ([`crate::Error::Runtime`]), warnings are kept in the
    /// [`crate::Launch`] log.
    pub sanitize: bool,
    /// Softmax and the norms.
    pub rows: RowOptions,
    /// The flat reductions (sum, max, min).
    pub reduce: ReduceOptions,
    /// The prefix sums.
    pub scan: ScanOptions,
    /// GEMV.
    pub gemv: GemvOptions,
    /// Every matrix product: the GEMMs, and the quantized matmul's kernels
    /// for what they share with them (K splits; tiles and stages for its
    /// tensor-core kernels).
    pub gemm: GemmOptions,
    /// The quantized matmul's decode kernels (FP4/INT4 in their own layout,
    /// MLX's affine format).
    pub qmatmul: QmatmulOptions,
    /// Fused attention decode.
    pub attention: AttentionOptions,
}

impl Options {
    pub fn threads(threads: u32) -> Options {
        Options { threads: Some(threads), ..Options::default() }
    }

    /// What the families' selections (`gemm::select`, `qmatmul::select`,
    /// `attention::select`) read of these options.
    pub fn overrides(&self) -> Overrides {
        Overrides { threads: self.threads, vectorize: self.vectorize, gemm: self.gemm, qmatmul: self.qmatmul, attention: self.attention }
    }
}

/// Choices of the row kernels (softmax, RMSNorm, LayerNorm).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowOptions {
    /// Keep rows that fit in registers (default `true`).
    pub cache: Option<bool>,
}

/// Choices of the flat reductions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceOptions {
    /// Vector reductions: cap on pass-1 threadgroups.
    pub max_threadgroups: Option<u32>,
    /// Vector reductions: loads in flight per thread.
    pub loads: Option<u32>,
}

/// Choices of the prefix sums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// Elements (or vectors) each thread scans (default
    /// `enigma_kernels::library::scan::DEFAULT_ITEMS`).
    pub items: Option<u32>,
}

/// Choices of GEMV.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemvOptions {
    /// Rows per SIMD group.
    pub rows_per_simdgroup: Option<u32>,
    /// Loads in flight per thread.
    pub loads: Option<u32>,
    /// Each SIMD group starts its rows at its own column (`gemv::gemv`'s
    /// `stagger`; default: the forms that load 16 bytes per lane, f16/bf16
    /// words of eight and f32 `float4`s, `gemv::WIDE_STAGGER`).
    pub stagger: Option<bool>,
}

