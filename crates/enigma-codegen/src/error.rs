//! The error type of code generation.

use enigma_ir::{Scalar, StmtPath, Type};
use std::fmt;
use thiserror::Error;

/// The language a generator writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Msl,
    Cuda,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Msl => "MSL",
            Target::Cuda => "CUDA",
        })
    }
}

/// Code generation failed: which kernel, for which target, where, and why.
///
/// A kernel that passed [`enigma_ir::validate()`] only fails for reasons of
/// the target or the options ([`CodegenErrorKind::LanguageVersion`],
/// [`CodegenErrorKind::SharedMemoryLimit`], the specialisation errors);
/// [`CodegenErrorKind::Malformed`] means the kernel was not validated.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("kernel `{kernel}`: {target} code generation failed{}: {kind}", fmt_location(.location))]
pub struct CodegenError {
    pub kernel: String,
    pub target: Target,
    /// The statement being written, when the error is about one.
    pub location: Option<StmtPath>,
    pub kind: CodegenErrorKind,
}

fn fmt_location(location: &Option<StmtPath>) -> String {
    match location {
        Some(path) => format!(" at {path}"),
        None => String::new(),
    }
}

#[derive(Clone, Debug, Error, PartialEq)]
pub enum CodegenErrorKind {
    /// The kernel breaks an invariant that validation establishes.
    #[error("the kernel is malformed ({detail}); run enigma_ir::validate first")]
    Malformed { detail: String },
    /// The requested MSL version lacks a feature the kernel uses.
    #[error("{feature} needs MSL {}.{} or later, but the options ask for MSL {}.{}", .needed.0, .needed.1, .requested.0, .requested.1)]
    LanguageVersion { feature: String, needed: (u8, u8), requested: (u8, u8) },
    /// No CUDA GPU allows a block more than 227 KiB of shared memory
    /// ([`crate::cuda::MAX_SHARED_LIMIT`]).
    #[error("the threadgroup arrays need {bytes} bytes of shared memory; no CUDA GPU allows a block more than {limit} bytes")]
    SharedMemoryLimit { bytes: u64, limit: u64 },
    #[error("the options give {found} specialisation value(s), but the kernel has {expected} specialisation constant(s)")]
    SpecializationCount { expected: usize, found: usize },
    #[error("specialisation constant `{name}` is {expected}, but the options give {found}")]
    SpecializationType { name: String, expected: Scalar, found: Scalar },
    #[error("the value given for specialisation constant `{name}` does not fit in {ty}")]
    SpecializationRange { name: String, ty: Scalar },
    /// CUDA binds a texture object per (texture, sampler) in the texture's argument.
    #[error("texture `{texture}` is sampled with {count} different samplers; the CUDA texture argument holds at most {limit} texture objects")]
    TooManySamplers { texture: String, count: usize, limit: usize },
    #[error("{what} is not supported for {ty} on this target")]
    Unsupported { what: String, ty: Type },
    /// A cooperative tensor operation this generator does not write yet.
    #[error("cooperative tensor operations (`{what}`) are not generated for this target yet; run the kernel on the simulator")]
    CooperativeNotGenerated { what: &'static str },
}
