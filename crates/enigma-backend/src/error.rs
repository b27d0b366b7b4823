//! The runtime's error type: every failure of allocation, compilation and
//! dispatch, with the kernel name and the numbers involved.

use enigma_analysis::geometry::GeometryError;
use enigma_ir::{Type, ValidationError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Validation(#[from] ValidationError),
    #[error("kernel `{kernel}`: {source}")]
    Geometry { kernel: String, source: GeometryError },
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
    #[error("kernel `{kernel}`: specialisation constant `{name}` {problem}")]
    SpecConstant { kernel: String, name: String, problem: String },
    #[error("buffer access of {len} bytes at offset {offset} is outside the buffer of {size} bytes")]
    BufferRange { offset: usize, len: usize, size: usize },
    #[error("kernel `{kernel}`: {message}")]
    Execution { kernel: String, message: String },
    #[error("kernel `{kernel}` uses {feature}; device `{device}` {supported}")]
    Unsupported { kernel: String, feature: enigma_ir::Feature, device: String, supported: String },
    #[error("device `{device}` is not available: {reason}")]
    Unavailable { device: String, reason: String },
    #[error("kernel `{kernel}`: the sanitizer found {} problem(s):\n{}", findings.len(), findings.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n"))]
    Sanitizer { kernel: String, findings: Vec<crate::Finding> },
    #[error("{backend} backend: {message}")]
    Backend { backend: &'static str, message: String },
}
