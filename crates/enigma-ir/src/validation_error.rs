//! The errors validation reports: where in a kernel ([`Location`]), and
//! what ([`ValidationErrorKind`], one variant per rule, with its message).
//! Kept apart from the checks so that the type rules (`typing`) name their
//! errors without depending on validation.

use crate::ir::{Literal, SourceLoc, StmtPath, TextureAccess};
use crate::types::{Scalar, Type};
use serde::Serialize;
use std::fmt;
use thiserror::Error;

/// Where in a kernel an error was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Location {
    /// `None` for errors about the kernel's declarations.
    pub path: Option<StmtPath>,
    pub source: Option<SourceLoc>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{p}")?,
            None => f.write_str("declarations")?,
        }
        if let Some(src) = &self.source {
            write!(f, " ({src})")?;
        }
        Ok(())
    }
}

/// A validation error: the kernel, where, and what.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("kernel `{kernel}`, at {location}: {kind}")]
pub struct ValidationError {
    pub kernel: String,
    /// Boxed, so that results carrying the error stay small.
    pub location: Box<Location>,
    pub kind: ValidationErrorKind,
}

#[derive(Clone, Debug, Error, PartialEq)]
pub enum ValidationErrorKind {
    #[error("operands of `{op}` have types {lhs} and {rhs}; they must match (or be a vector and a scalar of its element type)")]
    OperandTypes { op: &'static str, lhs: Type, rhs: Type },
    #[error("`{op}` compares {lhs} with {rhs}, one signed and one unsigned; C would convert the signed side to unsigned, so a negative value compares as a huge one (`-1 < n` is false). Convert one side explicitly: to the signed type where the unsigned value fits in it (`i32(n)`), or to the unsigned type where the signed value is never negative (`u32(i)`)")]
    MixedSignComparison { op: &'static str, lhs: Type, rhs: Type },
    #[error("`{op}` is not defined for {ty}")]
    InvalidOperand { op: String, ty: Type },
    #[error("`{func}` takes {expected} argument(s), {found} given")]
    ArgumentCount { func: &'static str, expected: usize, found: usize },
    #[error("argument {index} of `{func}` must be {expected}, found {found}")]
    ArgumentType { func: &'static str, index: usize, expected: String, found: Type },
    #[error("`{namespace}::{func}` does not exist: {problem}; call `{func}`")]
    PrecisionVariant { func: &'static str, namespace: &'static str, problem: String },
    #[error("index into `{memory}` must be a scalar integer, found {found}")]
    IndexType { memory: String, found: Type },
    #[error("`{target}` has type {expected} but the value assigned is {found}")]
    AssignType { target: String, expected: Type, found: Type },
    #[error("condition must be bool, found {found}")]
    ConditionType { found: Type },
    #[error("cannot convert {from} to {to}")]
    InvalidCast { from: Type, to: Type },
    #[error("bitcast from {from} ({from_bytes} bytes) to {to} ({to_bytes} bytes): sizes differ")]
    BitcastSize { from: Type, from_bytes: u32, to: Type, to_bytes: u32 },
    #[error("component {index} of a {ty} does not exist")]
    ComponentOutOfRange { index: u8, ty: Type },
    #[error("{ty} needs {expected} component(s) (or 1 to splat), {found} given")]
    VectorComponents { ty: Type, expected: u8, found: usize },
    #[error("vector width {width} is not 2, 3 or 4")]
    VectorWidth { width: u8 },
    #[error("the kernel has {count} buffer and by-value parameters; Metal's argument table binds at most {limit} (`[[buffer(0)]]` … `[[buffer({last})]]`)", last = limit - 1)]
    TooManyParameters { count: usize, limit: u32 },
    #[error("the kernel has {count} texture parameters; Metal's texture table binds at most {limit} on every Apple GPU (`[[texture(0)]]` … `[[texture({last})]]`)", last = limit - 1)]
    TooManyTextures { count: usize, limit: u32 },
    #[error("texture `{texture}` has texels of {texel}; texture2d takes f32, f16, i32 or u32")]
    TextureTexel { texture: String, texel: Scalar },
    #[error("texture `{texture}` is declared access::{access}; it cannot be {}", match *op { "read" => "read (declare it read, read_write or sample)", "sample" => "sampled (declare it sample)", "fence" => "fenced (fence() orders a read_write texture's writes before its reads)", _ => "written (declare it write or read_write)" })]
    TextureAccess { texture: String, access: TextureAccess, op: &'static str },
    #[error("a coordinate of texture `{texture}` must be u32x2 (uint2: x the column, y the row), found {found}")]
    TextureCoord { texture: String, found: Type },
    #[error("texture `{texture}` has texels of {texel}; only f32 and f16 textures can be sampled (integer formats cannot be filtered)")]
    TextureSampleTexel { texture: String, texel: Scalar },
    #[error("a sample coordinate of texture `{texture}` must be f32x2 (float2: u across, v down), found {found}")]
    TextureSampleCoord { texture: String, found: Type },
    #[error("texture `{texture}`: {sampler} repeats the texture, which needs normalized coordinates (as in Metal: pixel coordinates take clamp_to_edge or clamp_to_zero)")]
    SamplerPixelRepeat { texture: String, sampler: crate::ir::Sampler },
    #[error("`{name}` is not a texture; only texture2d parameters can be read, written or sized as textures")]
    NotATexture { name: String },
    #[error("{ty} is not a SIMD-group matrix enigma supports: rows and columns must be multiples of 8 up to 64, the element f16, bf16 or f32")]
    MatrixShape { ty: Type },
    #[error("{what} cannot hold a SIMD-group matrix ({ty}); matrices live in locals")]
    MatrixPlace { what: String, ty: Type },
    #[error("`{op}`: {problem}")]
    MatrixOperands { op: &'static str, problem: String },
    #[error("`async_copy` {problem}")]
    AsyncCopy { problem: String },
    #[error("`tile_copy` {problem}")]
    TileCopy { problem: String },
    #[error("`{op}` is issued by every thread of the threadgroup together, but {cause}")]
    NonUniformTileCopy { op: &'static str, cause: String },
    #[error("`{op}` needs every lane of the SIMD group, but it sits in control flow that depends on {cause}")]
    NonUniformMatrix { op: &'static str, cause: String },
    #[error("`{op}`: {problem}")]
    Cooperative { op: &'static str, problem: String },
    #[error("`{op}` is issued by every thread of its scope ({scope}) together, but {cause}")]
    NonUniformCooperative { op: &'static str, scope: crate::cooperative::ExecutionScope, cause: String },
    #[error("literal {value} does not fit in {ty}")]
    LiteralRange { value: String, ty: Scalar },
    #[error("local `{var}` may be read before it is assigned")]
    UseBeforeAssign { var: String },
    #[error("`{what}` outside a loop")]
    OutsideLoop { what: &'static str },
    #[error("{what} {index} does not exist (the kernel has {count})")]
    DanglingId { what: &'static str, index: u32, count: usize },
    #[error("`{name}` is {what}, not a buffer; it cannot be indexed")]
    NotAMemory { name: String, what: &'static str },
    #[error("buffer `{buffer}` is read-only; it cannot be written")]
    WriteToReadOnly { buffer: String },
    #[error("atomic operations need i32 or u32 elements (f32 for add/sub/exchange); `{memory}` holds {elem}")]
    AtomicType { memory: String, elem: Type },
    #[error("the {operand} of `{func}` must be the same in every lane of the SIMD group (MSL spec, Table 6.14), but it depends on {cause}; {fix}")]
    NonUniformOperand { func: &'static str, operand: &'static str, cause: String, fix: &'static str },
    #[error("{barrier} is not reached by every thread of its {group}: it sits in control flow that depends on {cause}")]
    NonUniformBarrier { barrier: &'static str, group: &'static str, cause: String },
    #[error("threadgroup memory of {bytes} bytes exceeds the device limit of {limit} bytes")]
    ThreadgroupMemoryLimit { bytes: u64, limit: u64 },
    #[error("threadgroup array `{name}` has length 0")]
    EmptyThreadgroupArray { name: String },
    #[error("per-thread array `{name}` has length 0")]
    EmptyThreadArray { name: String },
    #[error("per-thread arrays of {bytes} bytes exceed the limit of {limit} bytes per thread (large per-thread arrays spill out of registers; stage data in threadgroup memory instead)")]
    ThreadArrayLimit { bytes: u64, limit: u64 },
    #[error("per-thread array `{array}` cannot be used by {op}: {op} takes device or threadgroup memory")]
    ThreadArrayUse { array: String, op: &'static str },
    #[error("unknown builtin `{name}`")]
    UnknownBuiltin { name: String },
    #[error("unknown function `{name}`")]
    UnknownFunction { name: String },
    #[error("the name `{name}` is declared twice")]
    DuplicateName { name: String },
    #[error("`{name}` is not a valid identifier")]
    InvalidName { name: String },
    #[error("specialisation constant `{name}` is {ty} but its default is {default:?}")]
    SpecDefault { name: String, ty: Scalar, default: Literal },
    #[error("the loop over `{var}` is unrolled at compile time (static_range), so {problem}; write an ordinary loop (range) where the bounds are known only at run time")]
    UnrollBound { var: String, problem: String },
    #[error("print({format:?}, ...): {problem}")]
    PrintFormat { format: String, problem: String },
    #[error("the for-loop variable `{var}` must be a scalar integer, found {ty}")]
    LoopVariable { var: String, ty: Type },
    #[error("the for loop over `{var}` has the constant step 0: it never ends once it starts (loops count up: `{var} < end`)")]
    LoopStep { var: String },
}
