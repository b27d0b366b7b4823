//! Per-call choices: the fields every operation reads (threads, element
//! type, vector loads, the sanitizer) and one struct per kernel family for
//! the choices only that family has (the matrix families' are the
//! kernel library's own, which their selections read). Every field has a default (`None`:
//! the library's choice for the shape and the device).

use enigma_ir::Scalar;
use enigma_kernels::library::attention_prefill::PrefillTile;
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

    /// What the matrix families' selections (`gemm::select`,
    /// `qmatmul::select`) read of these options.
    pub fn overrides(&self) -> Overrides {
        Overrides { threads: self.threads, vectorize: self.vectorize, gemm: self.gemm, qmatmul: self.qmatmul }
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
}

/// Choices of the attention kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttentionOptions {
    /// Fused decode: how many ways each head's keys are split over
    /// threadgroups (default: enough for about four threadgroups per
    /// compute unit; 1 = one threadgroup per head).
    pub splits: Option<u32>,
    /// Prefill: the query and key blocks of a threadgroup (default: the
    /// first of `PrefillTile::preferred(d)` that fits the device's
    /// threadgroup memory).
    pub prefill_tile: Option<PrefillTile>,
    /// Prefill on cooperative tensors: `Some(true)` asks for that kernel
    /// (an error where it cannot run), `Some(false)` refuses it; default:
    /// where the device's cooperative products run on `wgmma`
    /// (`attention_prefill::select_prefill`).
    pub prefill_cooperative: Option<bool>,
    /// Keys each key group (the lanes that share a key) loads per step
    /// (default: `attention::DEFAULT_KEYS_PER_STEP`).
    pub keys_per_step: Option<u32>,
    /// Lanes of the fused decode that share one key, a power of two up to
    /// 32 (default: `attention::default_lanes_per_key`).
    pub lanes_per_key: Option<u32>,
    /// Steps of the fused decode staged ahead by asynchronous copies (0:
    /// loads into registers; default: `attention::default_stages`).
    pub stages: Option<u32>,
    /// Query heads per threadgroup, a divisor of the query heads per K/V
    /// head (default: `attention::default_heads_per_threadgroup`).
    pub heads_per_threadgroup: Option<u32>,
    /// Whether each SIMD group loads its next step while using this one
    /// (default: `attention::DEFAULT_PREFETCH`).
    pub prefetch: Option<bool>,
}
