//! The runtime's error type: every failure of allocation, compilation and
//! dispatch, with the kernel name and the numbers involved.

use enigma_analysis::geometry::GeometryError;
use enigma_ir::{Type, ValidationError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Validation(#[from] ValidationError),
    #[error("kernel `{kernel}`: {error}")]
    Geometry { kernel: String, error: GeometryError },
    #[error("kernel `{kernel}`: threadgroup of {threads} threads ({x}×{y}×{z}) exceeds this pipeline's maximum of {max} threads per threadgroup")]
    ThreadgroupTooLarge { kernel: String, threads: u64, x: u32, y: u32, z: u32, max: u32 },
    #[error("kernel `{kernel}`: threadgroup memory of {bytes} bytes exceeds the device's limit of {limit} bytes")]
    ThreadgroupMemory { kernel: String, bytes: u64, limit: u64 },
    #[error("kernel `{kernel}` takes {expected} argument(s), {found} given")]
    ArgumentCount { kernel: String, expected: usize, found: usize },
    #[error("kernel `{kernel}`, argument {index} (`{param}`): expected {expected}, got {found}")]
    ArgumentKind { kernel: String, index: usize, param: String, expected: String, found: String },
    #[error("kernel `{kernel}`, argument {index} (`{param}`): buffer of {bytes} bytes is not a whole number of {elem} elements ({elem_bytes} bytes each)")]
    BufferSize { kernel: String, index: usize, param: String, bytes: usize, elem: Type, elem_bytes: u32 },
    #[error("kernel `{kernel}`, argument {index} (`{param}`): a {found} texture cannot be viewed as texture2d<{texel}>: its format holds {allowed} texels")]
    TextureFormat { kernel: String, index: usize, param: String, found: crate::TextureDesc, texel: enigma_ir::Scalar, allowed: &'static str },
    #[error("kernel `{kernel}`, argument {index} (`{param}`): the kernel samples it with a linear filter, but a {found} texture cannot be filtered (integer formats are sampled with filter::nearest only)")]
    TextureNotFilterable { kernel: String, index: usize, param: String, found: crate::TextureDesc },
    /// A `read_write` texture parameter bound to a texture whose format the
    /// device's [`crate::ReadWriteTier`] does not allow read_write.
    #[error("kernel `{kernel}`, argument {index} (`{param}`): device `{device}` cannot bind a {found} texture as access::read_write: it has {tier}, which allows read_write textures of {} (read one texture and write another instead)", .tier.format_names())]
    TextureReadWrite { kernel: String, index: usize, param: String, found: crate::TextureDesc, tier: crate::ReadWriteTier, device: String },
    #[error("texture of {desc}: {problem}")]
    TextureSize { desc: crate::TextureDesc, problem: String },
    #[error("kernel `{kernel}`: specialisation constant `{name}` {problem}")]
    SpecConstant { kernel: String, name: String, problem: String },
    #[error("buffer access of {len} bytes at offset {offset} is outside the buffer of {size} bytes")]
    BufferRange { offset: usize, len: usize, size: usize },
    #[error("kernel `{kernel}`: {message}")]
    Execution { kernel: String, message: String },
    #[error("kernel `{kernel}` uses SIMD-group matrices, which need whole SIMD groups, but this dispatch has a threadgroup of {threads} threads, not a multiple of {simd_width}")]
    PartialSimdgroup { kernel: String, threads: u64, simd_width: u32 },
    #[error("kernel `{kernel}` runs cooperative operations at execution_simdgroups({scope}), which needs threadgroups of exactly {scope} SIMD groups ({needed} threads), but this dispatch has a threadgroup of {threads} threads ({simdgroups} SIMD groups of {simd_width})")]
    CooperativeScope { kernel: String, scope: u32, needed: u64, threads: u64, simdgroups: u64, simd_width: u32 },
    #[error("kernel `{kernel}` uses {feature}; device `{device}` {supported}")]
    Unsupported { kernel: String, feature: enigma_ir::Feature, device: String, supported: String },
    #[error("device `{device}` is not available: {reason}")]
    Unavailable { device: String, reason: String },
    #[error("kernel `{kernel}`: the sanitizer found {} problem(s):\n{}", findings.len(), findings.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n"))]
    Sanitizer { kernel: String, findings: Vec<crate::Finding> },
    #[error("{backend} backend: {message}")]
    Backend { backend: &'static str, message: String },
    /// An allocation whose size the caller chose could not be made.
    #[error("cannot allocate {what} of {bytes} bytes: {reason}")]
    Allocation { what: String, bytes: u128, reason: String },
    /// A dispatch stopped before it finished: its step budget ran out, its
    /// timeout passed, or it was interrupted (Ctrl-C).
    #[error("kernel `{kernel}`: stopped at {location}: {reason}")]
    Stopped { kernel: String, location: String, reason: StopReason },
}

/// Why a dispatch was stopped before it finished.
#[derive(Clone, Debug, PartialEq)]
pub enum StopReason {
    /// A SIMD group ran more loop iterations than the dispatch's budget.
    StepBudget { budget: u64 },
    /// The dispatch ran longer than its timeout.
    Timeout { seconds: f64 },
    /// The dispatch's cancel flag was raised (Ctrl-C in the front ends).
    Interrupted,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::StepBudget { budget } => write!(
                f,
                "the dispatch ran out of its step budget of {budget} loop iterations per SIMD group; a loop that never ends? (raise the budget if the work is real)"
            ),
            StopReason::Timeout { seconds } => write!(f, "the dispatch ran past its timeout of {seconds} s; a loop that never ends?"),
            StopReason::Interrupted => write!(f, "the dispatch was interrupted"),
        }
    }
}

impl RuntimeError {
    /// The error for an allocation of `bytes` (as asked for, possibly more
    /// than `usize` holds) that could not be made.
    pub fn allocation(what: impl Into<String>, bytes: u128) -> RuntimeError {
        let reason = if bytes > usize::MAX as u128 { "more than this machine's address space" } else { "out of memory" };
        RuntimeError::Allocation { what: what.into(), bytes, reason: reason.into() }
    }
}
