//! The kernel IR as plain data: parameters, threadgroup arrays, per-thread
//! arrays, locals,
//! specialisation constants, expression trees and structured statements.
//!
//! Expressions are trees evaluated left to right, each sub-expression exactly
//! once; they may read memory (`Load`) and call SIMD-group functions, but never
//! write. Every write is a statement. Control flow is structured: `If`, `For`,
//! `While`, `Break`, `Continue`, `Return` — there are no gotos, so every
//! backend prints it directly.

use crate::cooperative::{CombineOp, CoopId, CooperativeTensor, ExecutionScope, Matmul2dDescriptor, OperandRelease, ReduceAxis, ReduceOp};
use crate::types::{MatrixType, QuantCode, QuantLayout, Scalar, Type};
use serde::{Deserialize, Serialize};

/// Index of a kernel parameter. Its binding is [`Kernel::binding`]: the
/// `[[buffer(n)]]` slot among buffer and by-value parameters, or the
/// `[[texture(n)]]` slot among textures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ParamId(pub u32);
/// Index of a local variable in [`Kernel::locals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VarId(pub u32);
/// Index of a threadgroup array in [`Kernel::threadgroup_arrays`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TgArrayId(pub u32);
/// Index of a per-thread array in [`Kernel::thread_arrays`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ThreadArrayId(pub u32);
/// Index of a specialisation constant in [`Kernel::spec_constants`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SpecId(pub u32);

/// A compute kernel: the unit every backend compiles and every runtime dispatches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    pub spec_constants: Vec<SpecConstant>,
    pub threadgroup_arrays: Vec<ThreadgroupArray>,
    /// Arrays in the `thread` address space: each thread has its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_arrays: Vec<ThreadArray>,
    pub locals: Vec<Local>,
    /// Cooperative tensors (accumulators of [`StmtKind::Matmul2d`]); see
    /// [`crate::cooperative`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cooperative_tensors: Vec<CooperativeTensor>,
    pub body: Block,
}

/// Whether a device buffer may be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    ReadWrite,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// `device T*` (or `device const T*` when read-only).
    Buffer { elem: Type, access: Access },
    /// A by-value constant: `constant T& name [[buffer(n)]]`.
    Value { ty: Type },
    /// `texture2d<T, access> name [[texture(n)]]`: a 2D texture, a resource
    /// of its own (not a buffer). `texel` (f32, f16, i32 or u32) is the
    /// type its reads return and its writes take, four at a time; the
    /// pixel format the texels are stored in belongs to the texture object
    /// given at dispatch, not to the kernel.
    Texture { texel: Scalar, access: TextureAccess },
}

impl ParamKind {
    /// Whether the parameter binds in the buffer argument table (buffers and
    /// by-value constants) rather than the texture table.
    pub fn is_buffer_slot(self) -> bool {
        !matches!(self, ParamKind::Texture { .. })
    }
}

/// The access a kernel has to a texture: MSL's `access::read`, `write`,
/// `read_write` and `sample`. `read()` needs read, read_write or sample;
/// `write()` needs write or read_write; `sample()` needs sample; `fence()`
/// needs read_write; the size queries need nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextureAccess {
    Read,
    Write,
    ReadWrite,
    Sample,
}

impl TextureAccess {
    pub const ALL: [TextureAccess; 4] = [TextureAccess::Read, TextureAccess::Write, TextureAccess::ReadWrite, TextureAccess::Sample];

    /// The IR name, also MSL's after `access::` (`read_write`).
    pub fn name(self) -> &'static str {
        match self {
            TextureAccess::Read => "read",
            TextureAccess::Write => "write",
            TextureAccess::ReadWrite => "read_write",
            TextureAccess::Sample => "sample",
        }
    }

    pub fn from_name(name: &str) -> Option<TextureAccess> {
        TextureAccess::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether `read()` is allowed.
    pub fn can_read(self) -> bool {
        self != TextureAccess::Write
    }

    /// Whether `write()` is allowed.
    pub fn can_write(self) -> bool {
        matches!(self, TextureAccess::Write | TextureAccess::ReadWrite)
    }
}

impl std::fmt::Display for TextureAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A sampler, written into the kernel as a constant (MSL's
/// `constexpr sampler s(coord::…, filter::…, address::…)`): how
/// [`Expr::TextureSample`] maps a coordinate to texels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Sampler {
    pub coord: SamplerCoord,
    pub filter: SamplerFilter,
    pub address: SamplerAddress,
}

/// Whether sample coordinates are normalised (0 to 1 across the texture) or
/// in pixels (0 to the width or height; texel `i`'s centre at `i + 0.5`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerCoord {
    Normalized,
    Pixel,
}

/// `nearest`: the texel the coordinate falls in; `linear`: the bilinear
/// blend of the four texels whose centres surround it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerFilter {
    Nearest,
    Linear,
}

/// What a texel index outside the texture (`i < 0` or `i >= n`) reads:
/// `clamp_to_edge` the nearest edge texel; `clamp_to_zero` a texel of zeros
/// (read as the format reads stored zeros: (0, 0, 0, 0) with four channels,
/// (0, 0, 0, 1) with one); `repeat` texel `i mod n`; `mirrored_repeat`
/// texel `t` or `2n - 1 - t` for `t = i mod 2n` below or from `n`. The
/// repeating modes need normalised coordinates (as in Metal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerAddress {
    ClampToEdge,
    ClampToZero,
    Repeat,
    MirroredRepeat,
}

impl SamplerCoord {
    pub const ALL: [SamplerCoord; 2] = [SamplerCoord::Normalized, SamplerCoord::Pixel];
    /// The IR name, also MSL's after `coord::`.
    pub fn name(self) -> &'static str {
        match self {
            SamplerCoord::Normalized => "normalized",
            SamplerCoord::Pixel => "pixel",
        }
    }
    pub fn from_name(name: &str) -> Option<SamplerCoord> {
        SamplerCoord::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl SamplerFilter {
    pub const ALL: [SamplerFilter; 2] = [SamplerFilter::Nearest, SamplerFilter::Linear];
    /// The IR name, also MSL's after `filter::`.
    pub fn name(self) -> &'static str {
        match self {
            SamplerFilter::Nearest => "nearest",
            SamplerFilter::Linear => "linear",
        }
    }
    pub fn from_name(name: &str) -> Option<SamplerFilter> {
        SamplerFilter::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl SamplerAddress {
    pub const ALL: [SamplerAddress; 4] =
        [SamplerAddress::ClampToEdge, SamplerAddress::ClampToZero, SamplerAddress::Repeat, SamplerAddress::MirroredRepeat];
    /// The IR name, also MSL's after `address::`.
    pub fn name(self) -> &'static str {
        match self {
            SamplerAddress::ClampToEdge => "clamp_to_edge",
            SamplerAddress::ClampToZero => "clamp_to_zero",
            SamplerAddress::Repeat => "repeat",
            SamplerAddress::MirroredRepeat => "mirrored_repeat",
        }
    }
    pub fn from_name(name: &str) -> Option<SamplerAddress> {
        SamplerAddress::ALL.into_iter().find(|a| a.name() == name)
    }
    /// Whether the mode repeats the texture (and so needs normalised coordinates).
    pub fn repeats(self) -> bool {
        matches!(self, SamplerAddress::Repeat | SamplerAddress::MirroredRepeat)
    }
}

impl std::fmt::Display for Sampler {
    /// `sampler(normalized, linear, clamp_to_edge)`, the text form.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sampler({}, {}, {})", self.coord.name(), self.filter.name(), self.address.name())
    }
}

/// Which size of a texture a query returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextureDim {
    Width,
    Height,
}

impl TextureDim {
    /// The MSL method (`get_width`), also the IR name.
    pub fn method(self) -> &'static str {
        match self {
            TextureDim::Width => "get_width",
            TextureDim::Height => "get_height",
        }
    }
}

/// A Metal function constant: fixed when the pipeline is created.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecConstant {
    pub name: String,
    pub ty: Scalar,
    pub default: Literal,
}

/// `threadgroup T name[len];`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadgroupArray {
    pub name: String,
    pub elem: Type,
    pub len: u32,
}

impl ThreadgroupArray {
    pub fn size_bytes(&self) -> u64 {
        self.elem.size_bytes() as u64 * self.len as u64
    }
}

/// `thread T name[len];`: an array every thread has its own copy of (MSL's
/// `thread` address space, a CUDA local array). Its elements start
/// uninitialised: reading one the thread has not written is undefined on a
/// GPU, and the sanitizer reports it. Indexed by `Load` and `Store` like any
/// memory; atomics, matrix loads and stores and asynchronous copies do not
/// take it. Indexed only by constants (or by unrolled loop variables), a
/// GPU compiler keeps it in registers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadArray {
    pub name: String,
    pub elem: Type,
    pub len: u32,
}

impl ThreadArray {
    pub fn size_bytes(&self) -> u64 {
        self.elem.size_bytes() as u64 * self.len as u64
    }
}

/// A thread-private variable. Locals are assigned before they are read
/// (validation checks this on every path).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Local {
    pub name: String,
    pub ty: Type,
}

/// A constant of a scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Literal {
    pub ty: Scalar,
    pub value: LiteralValue,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiteralValue {
    Bool(bool),
    Int(i64),
    UInt(u64),
    /// In JSON a finite value is a number; NaN and the infinities, which JSON
    /// cannot write, are the strings `"nan"`, `"inf"` and `"-inf"` (a NaN
    /// other than `f64::NAN` as `"nan:0x<its 16 hex digits of f64 bits>"`).
    Float(#[serde(with = "json_float")] f64),
}

/// Serde for [`LiteralValue::Float`]: numbers, plus strings for the values
/// JSON has no numbers for (serde_json would otherwise write `null` and fail
/// to read it back).
mod json_float {
    use serde::{de, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else if *v == f64::INFINITY {
            s.serialize_str("inf")
        } else if *v == f64::NEG_INFINITY {
            s.serialize_str("-inf")
        } else if v.to_bits() == f64::NAN.to_bits() {
            s.serialize_str("nan")
        } else {
            s.serialize_str(&format!("nan:{:#018x}", v.to_bits()))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = f64;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number, or one of the strings \"nan\", \"inf\", \"-inf\", \"nan:0x…\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
                Ok(v)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
                Ok(v as f64)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
                let bits = v.strip_prefix("nan:0x").and_then(|h| u64::from_str_radix(h, 16).ok());
                match (v, bits) {
                    ("nan", _) => Ok(f64::NAN),
                    ("inf", _) => Ok(f64::INFINITY),
                    ("-inf", _) => Ok(f64::NEG_INFINITY),
                    (_, Some(bits)) if f64::from_bits(bits).is_nan() => Ok(f64::from_bits(bits)),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Literal {
    pub fn bool(v: bool) -> Literal {
        Literal { ty: Scalar::Bool, value: LiteralValue::Bool(v) }
    }
    pub fn u32(v: u32) -> Literal {
        Literal { ty: Scalar::U32, value: LiteralValue::UInt(v as u64) }
    }
    pub fn i32(v: i32) -> Literal {
        Literal { ty: Scalar::I32, value: LiteralValue::Int(v as i64) }
    }
    pub fn f32(v: f32) -> Literal {
        Literal { ty: Scalar::F32, value: LiteralValue::Float(v as f64) }
    }

    /// Converts a numeric value to a literal of `ty`, as a C cast would.
    pub fn convert(self, ty: Scalar) -> Literal {
        let value = match (self.value, ty) {
            (v, Scalar::Bool) => LiteralValue::Bool(match v {
                LiteralValue::Bool(b) => b,
                LiteralValue::Int(i) => i != 0,
                LiteralValue::UInt(u) => u != 0,
                LiteralValue::Float(f) => f != 0.0,
            }),
            (v, t) if t.is_float() => LiteralValue::Float(v.as_f64()),
            (v, t) if t.is_signed_int() => LiteralValue::Int(v.as_i64()),
            (v, _) => LiteralValue::UInt(v.as_i64() as u64),
        };
        Literal { ty, value }
    }
}

impl LiteralValue {
    pub fn as_f64(self) -> f64 {
        match self {
            LiteralValue::Bool(b) => b as u8 as f64,
            LiteralValue::Int(i) => i as f64,
            LiteralValue::UInt(u) => u as f64,
            LiteralValue::Float(f) => f,
        }
    }
    pub fn as_i64(self) -> i64 {
        match self {
            LiteralValue::Bool(b) => b as i64,
            LiteralValue::Int(i) => i,
            LiteralValue::UInt(u) => u as i64,
            LiteralValue::Float(f) => f as i64,
        }
    }
}

/// A thread-position attribute, named as in MSL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Builtin {
    ThreadPositionInGrid,
    ThreadPositionInThreadgroup,
    ThreadgroupPositionInGrid,
    ThreadsPerThreadgroup,
    ThreadsPerGrid,
    ThreadgroupsPerGrid,
    ThreadIndexInThreadgroup,
    ThreadIndexInSimdgroup,
    SimdgroupIndexInThreadgroup,
    SimdgroupsPerThreadgroup,
    ThreadsPerSimdgroup,
}

impl Builtin {
    pub const ALL: [Builtin; 11] = [
        Builtin::ThreadPositionInGrid,
        Builtin::ThreadPositionInThreadgroup,
        Builtin::ThreadgroupPositionInGrid,
        Builtin::ThreadsPerThreadgroup,
        Builtin::ThreadsPerGrid,
        Builtin::ThreadgroupsPerGrid,
        Builtin::ThreadIndexInThreadgroup,
        Builtin::ThreadIndexInSimdgroup,
        Builtin::SimdgroupIndexInThreadgroup,
        Builtin::SimdgroupsPerThreadgroup,
        Builtin::ThreadsPerSimdgroup,
    ];

    /// The MSL attribute name, which is also the IR's name.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::ThreadPositionInGrid => "thread_position_in_grid",
            Builtin::ThreadPositionInThreadgroup => "thread_position_in_threadgroup",
            Builtin::ThreadgroupPositionInGrid => "threadgroup_position_in_grid",
            Builtin::ThreadsPerThreadgroup => "threads_per_threadgroup",
            Builtin::ThreadsPerGrid => "threads_per_grid",
            Builtin::ThreadgroupsPerGrid => "threadgroups_per_grid",
            Builtin::ThreadIndexInThreadgroup => "thread_index_in_threadgroup",
            Builtin::ThreadIndexInSimdgroup => "thread_index_in_simdgroup",
            Builtin::SimdgroupIndexInThreadgroup => "simdgroup_index_in_threadgroup",
            Builtin::SimdgroupsPerThreadgroup => "simdgroups_per_threadgroup",
            Builtin::ThreadsPerSimdgroup => "threads_per_simdgroup",
        }
    }

    pub fn from_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// `uint3` for the positions and sizes that MSL offers as vectors, `uint` otherwise.
    pub fn ty(self) -> Type {
        if self.is_vector() {
            Type::UINT3
        } else {
            Type::U32
        }
    }

    pub fn is_vector(self) -> bool {
        matches!(
            self,
            Builtin::ThreadPositionInGrid
                | Builtin::ThreadPositionInThreadgroup
                | Builtin::ThreadgroupPositionInGrid
                | Builtin::ThreadsPerThreadgroup
                | Builtin::ThreadsPerGrid
                | Builtin::ThreadgroupsPerGrid
        )
    }

    /// How far the value is shared: the same for the whole threadgroup, the
    /// same within a SIMD group, or different per thread.
    pub fn uniformity(self) -> Uniformity {
        match self {
            Builtin::ThreadgroupPositionInGrid
            | Builtin::ThreadsPerThreadgroup
            | Builtin::ThreadsPerGrid
            | Builtin::ThreadgroupsPerGrid
            | Builtin::SimdgroupsPerThreadgroup
            | Builtin::ThreadsPerSimdgroup => Uniformity::Threadgroup,
            Builtin::SimdgroupIndexInThreadgroup => Uniformity::Simdgroup,
            Builtin::ThreadPositionInGrid
            | Builtin::ThreadPositionInThreadgroup
            | Builtin::ThreadIndexInThreadgroup
            | Builtin::ThreadIndexInSimdgroup => Uniformity::Thread,
        }
    }
}

/// How widely a value (or the control flow reaching a statement) is shared.
/// Ordered from most to least uniform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Uniformity {
    Threadgroup,
    Simdgroup,
    Thread,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// C semantics: integer division truncates toward zero.
    Div,
    /// C semantics: the sign follows the dividend; `fmod` for floats.
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Logical and/or of booleans. Both sides are always evaluated.
    And,
    Or,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 18] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Shl,
        BinaryOp::Shr,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::And,
        BinaryOp::Or,
    ];

    /// The C operator.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::BitXor => "^",
            BinaryOp::Shl => "<<",
            BinaryOp::Shr => ">>",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::And => "&&",
            BinaryOp::Or => "||",
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOp {
    Neg,
    /// Bitwise complement `~` of integers.
    BitNot,
    /// Logical `!` of booleans.
    Not,
}

impl UnaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            UnaryOp::Neg => "-",
            UnaryOp::BitNot => "~",
            UnaryOp::Not => "!",
        }
    }
}

/// A function call, named as the MSL function it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intrinsic {
    // Float math. A call picks MSL's `fast::` or `precise::` variant of a
    // function that has them through its `Precision`.
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Tanh,
    Sin,
    Cos,
    Floor,
    Ceil,
    Pow,
    Fma,
    // More float math (MSL's standard library; `erf`, `erfc`, `log1p` and
    // `expm1`, which MSL lacks, are CUDA's and the simulator's only).
    Tan,
    Sinh,
    Cosh,
    Asin,
    Acos,
    Atan,
    Atan2,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Erfc,
    Log1p,
    Expm1,
    Round,
    Trunc,
    Rint,
    Copysign,
    Fmod,
    Sign,
    Saturate,
    Mix,
    Step,
    Smoothstep,
    // Classification of floats: a bool (or bool vector) per component.
    /// `isnan(x)`: the component is a NaN.
    #[serde(rename = "isnan")]
    IsNan,
    /// `isinf(x)`: the component is +∞ or −∞.
    #[serde(rename = "isinf")]
    IsInf,
    /// `isfinite(x)`: the component is neither infinite nor a NaN.
    #[serde(rename = "isfinite")]
    IsFinite,
    // Any numeric type.
    Abs,
    Min,
    Max,
    Clamp,
    /// `select(a, b, c)` of MSL: `c ? b : a`.
    Select,
    // Integer bits.
    Popcount,
    Clz,
    Ctz,
    // SIMD-group functions: over the active lanes of the caller's SIMD group.
    SimdSum,
    SimdProduct,
    SimdMax,
    SimdMin,
    SimdAnd,
    SimdOr,
    SimdXor,
    SimdBroadcast,
    SimdBroadcastFirst,
    SimdShuffle,
    SimdShuffleUp,
    SimdShuffleDown,
    SimdShuffleXor,
    SimdPrefixInclusiveSum,
    SimdPrefixExclusiveSum,
    SimdAll,
    SimdAny,
    SimdBallot,
    SimdIsFirst,
}

impl Intrinsic {
    pub const ALL: [Intrinsic; 67] = [
        Intrinsic::Exp,
        Intrinsic::Exp2,
        Intrinsic::Log,
        Intrinsic::Log2,
        Intrinsic::Sqrt,
        Intrinsic::Rsqrt,
        Intrinsic::Tanh,
        Intrinsic::Sin,
        Intrinsic::Cos,
        Intrinsic::Floor,
        Intrinsic::Ceil,
        Intrinsic::Pow,
        Intrinsic::Fma,
        Intrinsic::Tan,
        Intrinsic::Sinh,
        Intrinsic::Cosh,
        Intrinsic::Asin,
        Intrinsic::Acos,
        Intrinsic::Atan,
        Intrinsic::Atan2,
        Intrinsic::Asinh,
        Intrinsic::Acosh,
        Intrinsic::Atanh,
        Intrinsic::Erf,
        Intrinsic::Erfc,
        Intrinsic::Log1p,
        Intrinsic::Expm1,
        Intrinsic::Round,
        Intrinsic::Trunc,
        Intrinsic::Rint,
        Intrinsic::Copysign,
        Intrinsic::Fmod,
        Intrinsic::Sign,
        Intrinsic::Saturate,
        Intrinsic::Mix,
        Intrinsic::Step,
        Intrinsic::Smoothstep,
        Intrinsic::IsNan,
        Intrinsic::IsInf,
        Intrinsic::IsFinite,
        Intrinsic::Abs,
        Intrinsic::Min,
        Intrinsic::Max,
        Intrinsic::Clamp,
        Intrinsic::Select,
        Intrinsic::Popcount,
        Intrinsic::Clz,
        Intrinsic::Ctz,
        Intrinsic::SimdSum,
        Intrinsic::SimdProduct,
        Intrinsic::SimdMax,
        Intrinsic::SimdMin,
        Intrinsic::SimdAnd,
        Intrinsic::SimdOr,
        Intrinsic::SimdXor,
        Intrinsic::SimdBroadcast,
        Intrinsic::SimdBroadcastFirst,
        Intrinsic::SimdShuffle,
        Intrinsic::SimdShuffleUp,
        Intrinsic::SimdShuffleDown,
        Intrinsic::SimdShuffleXor,
        Intrinsic::SimdPrefixInclusiveSum,
        Intrinsic::SimdPrefixExclusiveSum,
        Intrinsic::SimdAll,
        Intrinsic::SimdAny,
        Intrinsic::SimdBallot,
        Intrinsic::SimdIsFirst,
    ];

    /// The MSL function name (`exp`, `simd_sum`, …), also the IR name.
    pub fn name(self) -> &'static str {
        use Intrinsic::*;
        match self {
            Exp => "exp",
            Exp2 => "exp2",
            Log => "log",
            Log2 => "log2",
            Sqrt => "sqrt",
            Rsqrt => "rsqrt",
            Tanh => "tanh",
            Sin => "sin",
            Cos => "cos",
            Floor => "floor",
            Ceil => "ceil",
            Pow => "pow",
            Fma => "fma",
            Tan => "tan",
            Sinh => "sinh",
            Cosh => "cosh",
            Asin => "asin",
            Acos => "acos",
            Atan => "atan",
            Atan2 => "atan2",
            Asinh => "asinh",
            Acosh => "acosh",
            Atanh => "atanh",
            Erf => "erf",
            Erfc => "erfc",
            Log1p => "log1p",
            Expm1 => "expm1",
            Round => "round",
            Trunc => "trunc",
            Rint => "rint",
            Copysign => "copysign",
            Fmod => "fmod",
            Sign => "sign",
            Saturate => "saturate",
            Mix => "mix",
            Step => "step",
            Smoothstep => "smoothstep",
            IsNan => "isnan",
            IsInf => "isinf",
            IsFinite => "isfinite",
            Abs => "abs",
            Min => "min",
            Max => "max",
            Clamp => "clamp",
            Select => "select",
            Popcount => "popcount",
            Clz => "clz",
            Ctz => "ctz",
            SimdSum => "simd_sum",
            SimdProduct => "simd_product",
            SimdMax => "simd_max",
            SimdMin => "simd_min",
            SimdAnd => "simd_and",
            SimdOr => "simd_or",
            SimdXor => "simd_xor",
            SimdBroadcast => "simd_broadcast",
            SimdBroadcastFirst => "simd_broadcast_first",
            SimdShuffle => "simd_shuffle",
            SimdShuffleUp => "simd_shuffle_up",
            SimdShuffleDown => "simd_shuffle_down",
            SimdShuffleXor => "simd_shuffle_xor",
            SimdPrefixInclusiveSum => "simd_prefix_inclusive_sum",
            SimdPrefixExclusiveSum => "simd_prefix_exclusive_sum",
            SimdAll => "simd_all",
            SimdAny => "simd_any",
            SimdBallot => "simd_ballot",
            SimdIsFirst => "simd_is_first",
        }
    }

    pub fn from_name(name: &str) -> Option<Intrinsic> {
        Intrinsic::ALL.into_iter().find(|i| i.name() == name)
    }

    /// The functions MSL also offers in its `fast::` and `precise::`
    /// namespaces (MSL specification §6.5, the math functions, and §6.3's
    /// `clamp` and `saturate`): the one list the builders, the front ends,
    /// the stubs and the docs follow. On `float` (f32) the variants are
    /// distinct; on `half` and `bfloat` MSL has one variant of each, which
    /// all three precisions use (see [`crate::typing::precision`]).
    pub const WITH_PRECISION_VARIANTS: [Intrinsic; 32] = [
        Intrinsic::Exp,
        Intrinsic::Exp2,
        Intrinsic::Log,
        Intrinsic::Log2,
        Intrinsic::Sqrt,
        Intrinsic::Rsqrt,
        Intrinsic::Sin,
        Intrinsic::Cos,
        Intrinsic::Tan,
        Intrinsic::Asin,
        Intrinsic::Acos,
        Intrinsic::Atan,
        Intrinsic::Atan2,
        Intrinsic::Sinh,
        Intrinsic::Cosh,
        Intrinsic::Tanh,
        Intrinsic::Asinh,
        Intrinsic::Acosh,
        Intrinsic::Atanh,
        Intrinsic::Pow,
        Intrinsic::Floor,
        Intrinsic::Ceil,
        Intrinsic::Round,
        Intrinsic::Trunc,
        Intrinsic::Rint,
        Intrinsic::Copysign,
        Intrinsic::Fmod,
        Intrinsic::Abs,
        Intrinsic::Min,
        Intrinsic::Max,
        Intrinsic::Clamp,
        Intrinsic::Saturate,
    ];

    /// MSL offers the function in its `fast::` and `precise::` namespaces
    /// too ([`Intrinsic::WITH_PRECISION_VARIANTS`]).
    pub fn has_precision_variants(self) -> bool {
        Intrinsic::WITH_PRECISION_VARIANTS.contains(&self)
    }

    /// The function's name in `precision`'s namespace (`fast::sin`), also
    /// the text form's spelling of the call.
    pub fn qualified_name(self, precision: Precision) -> String {
        match precision.namespace() {
            Some(ns) => format!("{ns}::{}", self.name()),
            None => self.name().to_string(),
        }
    }

    /// Number of arguments.
    pub fn arity(self) -> usize {
        use Intrinsic::*;
        match self {
            SimdIsFirst => 0,
            Pow | Atan2 | Copysign | Fmod | Step | Min | Max | SimdBroadcast | SimdShuffle | SimdShuffleUp
            | SimdShuffleDown | SimdShuffleXor => 2,
            Fma | Mix | Smoothstep | Clamp | Select => 3,
            _ => 1,
        }
    }

    /// A SIMD-group function: a collective over the active lanes.
    pub fn is_simd(self) -> bool {
        self.name().starts_with("simd_")
    }

    /// `isnan`, `isinf` or `isfinite`: a float's class, as bool components.
    pub fn is_classification(self) -> bool {
        matches!(self, Intrinsic::IsNan | Intrinsic::IsInf | Intrinsic::IsFinite)
    }

    /// A float-only math function (`exp`, `fast::sin`, …).
    pub fn is_float_math(self) -> bool {
        use Intrinsic::*;
        matches!(
            self,
            Exp | Exp2
                | Log
                | Log2
                | Sqrt
                | Rsqrt
                | Tanh
                | Sin
                | Cos
                | Floor
                | Ceil
                | Pow
                | Fma
                | Tan
                | Sinh
                | Cosh
                | Asin
                | Acos
                | Atan
                | Atan2
                | Asinh
                | Acosh
                | Atanh
                | Erf
                | Erfc
                | Log1p
                | Expm1
                | Round
                | Trunc
                | Rint
                | Copysign
                | Fmod
                | Sign
                | Saturate
                | Mix
                | Step
                | Smoothstep
        )
    }
}

/// Which of MSL's variants of a float function a call names: the default
/// one (`exp`, whose precision the compiler's fast-math setting picks), the
/// `fast::` one (lower precision allowed) or the `precise::` one (MSL's
/// precise bounds whatever the fast-math setting). Only the functions of
/// [`Intrinsic::WITH_PRECISION_VARIANTS`] take one but the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    #[default]
    Default,
    Fast,
    Precise,
}

impl Precision {
    pub const ALL: [Precision; 3] = [Precision::Default, Precision::Fast, Precision::Precise];

    /// MSL's namespace of the variant: `fast` or `precise`; none for the
    /// default.
    pub fn namespace(self) -> Option<&'static str> {
        match self {
            Precision::Default => None,
            Precision::Fast => Some("fast"),
            Precision::Precise => Some("precise"),
        }
    }

    pub fn from_namespace(namespace: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.namespace() == Some(namespace))
    }

    /// The default precision (left out of the JSON form).
    pub fn is_default(&self) -> bool {
        *self == Precision::Default
    }
}

/// `mem_flags` of a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemFlags {
    None,
    Threadgroup,
    Device,
    /// `mem_device | mem_threadgroup`.
    DeviceAndThreadgroup,
    /// `mem_texture`: orders texture accesses between the threads the
    /// barrier synchronises (alone: combinations with it are not in the IR yet).
    Texture,
}

impl MemFlags {
    /// The MSL spelling, e.g. `mem_flags::mem_threadgroup`.
    pub fn msl(self) -> &'static str {
        match self {
            MemFlags::None => "mem_flags::mem_none",
            MemFlags::Threadgroup => "mem_flags::mem_threadgroup",
            MemFlags::Device => "mem_flags::mem_device",
            MemFlags::DeviceAndThreadgroup => "mem_flags::mem_device | mem_flags::mem_threadgroup",
            MemFlags::Texture => "mem_flags::mem_texture",
        }
    }

    /// The short name used by the text form and Python (`mem_threadgroup`).
    pub fn name(self) -> &'static str {
        match self {
            MemFlags::None => "mem_none",
            MemFlags::Threadgroup => "mem_threadgroup",
            MemFlags::Device => "mem_device",
            MemFlags::DeviceAndThreadgroup => "mem_device_and_threadgroup",
            MemFlags::Texture => "mem_texture",
        }
    }

    pub fn from_name(name: &str) -> Option<MemFlags> {
        Some(match name {
            "mem_none" => MemFlags::None,
            "mem_threadgroup" => MemFlags::Threadgroup,
            "mem_device" => MemFlags::Device,
            "mem_device_and_threadgroup" | "mem_device|mem_threadgroup" => MemFlags::DeviceAndThreadgroup,
            "mem_texture" => MemFlags::Texture,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BarrierScope {
    /// `threadgroup_barrier`: every thread of the threadgroup must reach it.
    Threadgroup,
    /// `simdgroup_barrier`: every active lane of the SIMD group.
    Simdgroup,
}

/// A memory that can be indexed: a device buffer, a threadgroup array or a
/// per-thread array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Memory {
    Buffer(ParamId),
    Threadgroup(TgArrayId),
    Thread(ThreadArrayId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AtomicOp {
    Add,
    Sub,
    Min,
    Max,
    And,
    Or,
    Xor,
    Exchange,
}

impl AtomicOp {
    pub const ALL: [AtomicOp; 8] = [
        AtomicOp::Add,
        AtomicOp::Sub,
        AtomicOp::Min,
        AtomicOp::Max,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
        AtomicOp::Exchange,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
            AtomicOp::Sub => "sub",
            AtomicOp::Min => "min",
            AtomicOp::Max => "max",
            AtomicOp::And => "and",
            AtomicOp::Or => "or",
            AtomicOp::Xor => "xor",
            AtomicOp::Exchange => "exchange",
        }
    }

    pub fn from_name(name: &str) -> Option<AtomicOp> {
        AtomicOp::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// An expression tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expr {
    Literal(Literal),
    /// A by-value kernel parameter.
    Param(ParamId),
    Spec(SpecId),
    Var(VarId),
    Builtin(Builtin),
    /// `mem[index]`.
    Load { mem: Memory, index: Box<Expr> },
    /// `index`, checked as subscript `dim` (0 = the leftmost) of a
    /// multi-dimensional, row-major access to `mem` whose dimension `dim`
    /// holds `size` elements. Front ends wrap each subscript of `mem[i, j]`
    /// in one and compute the flat index from them (`i·m + j`), so an index
    /// past its dimension is caught even where the flat index stays inside
    /// the memory. The value is `index` (any integer scalar; `size` is an
    /// integer scalar too, compared by value). An index outside `0..size`
    /// is an out-of-bounds access of `mem` in dimension `dim`: the simulator
    /// fails the dispatch, or under the sanitizer reports it with the
    /// dimension; generated code is `index` alone (GPUs check no bounds).
    DimCheck { mem: Memory, dim: u8, index: Box<Expr>, size: Box<Expr> },
    Unary { op: UnaryOp, arg: Box<Expr> },
    /// Both sides have the same type, or one is a vector and the other a scalar
    /// of the same scalar type (the scalar is splatted).
    Binary { op: BinaryOp, lhs: Box<Expr>, rhs: Box<Expr> },
    /// `func(args)`; `precision` picks MSL's `fast::` or `precise::`
    /// variant of a function that has them.
    Call {
        func: Intrinsic,
        #[serde(default, skip_serializing_if = "Precision::is_default")]
        precision: Precision,
        args: Vec<Expr>,
    },
    /// Value conversion (`float(x)`, `half4(v)`).
    Cast { to: Type, arg: Box<Expr> },
    /// Reinterpretation of the bits (`as_type<uint>(x)`); sizes must match.
    Bitcast { to: Type, arg: Box<Expr> },
    /// `float4(a, b, c, d)`, or a splat from a single scalar.
    Vector { ty: Type, components: Vec<Expr> },
    /// Component `index` (0 = .x) of a vector.
    Extract { arg: Box<Expr>, index: u8 },
    /// `make_filled_simdgroup_matrix<T, R, C>(value)`: every element `value`;
    /// with `diagonal`, `value` on the diagonal and zero elsewhere (MSL's
    /// diagonal constructor). `value` is a scalar of the tile's element type.
    MatrixFill { ty: MatrixType, value: Box<Expr>, diagonal: bool },
    /// `simdgroup_load`: the tile whose element (r, c) is
    /// `mem[offset + r·stride + c]`, or with `transpose`
    /// `mem[offset + c·stride + r]`. `offset` and `stride` (MSL's
    /// `elements_per_row`) are u32; the memory's element type is the tile's,
    /// or a vector of it, read as its scalars (offset and stride then count
    /// scalars, like a `threadgroup half*` view of a `half4` array). Reads
    /// every element, each a memory access like a `Load` (of the whole
    /// vector holding it, for vector memory).
    MatrixLoad { ty: MatrixType, mem: Memory, offset: Box<Expr>, stride: Box<Expr>, transpose: bool },
    /// A tile of 4-bit weights decoded on load, the tile's rows running
    /// along K: with `(u, w, j) = layout.locate(r, c)` ([`QuantLayout`]:
    /// seed 002's `[K/8][N]`, where that is `(r / 8, c, r % 8)`, or the
    /// tensor cores' fragment order), element (r, c) is
    /// `code.value(nibble j of words[offset + u·stride + w]) ·
    /// scales[scale_offset + c]`, the exact product rounded once to the
    /// tile's element type (f16). The tile's rows and columns are multiples
    /// of the layout's unit. `words` holds u32 (or vectors of them, read as
    /// their scalars), `scales` f16 likewise; `offset`, `stride` and
    /// `scale_offset` are u32, the same on every lane. Reads every element's
    /// word and scale, each a memory access like a `Load`. A backend may
    /// hold the tile in whatever layout its products take it in.
    MatrixLoadQuantized {
        ty: MatrixType,
        code: QuantCode,
        #[serde(default)]
        layout: QuantLayout,
        words: Memory,
        offset: Box<Expr>,
        stride: Box<Expr>,
        scales: Memory,
        scale_offset: Box<Expr>,
    },
    /// `simdgroup_multiply(a, b)` or, with `acc`,
    /// `simdgroup_multiply_accumulate(a, b, acc)`: the R×C tile `a·b (+ acc)`
    /// of an R×K tile `a` and a K×C tile `b`.
    MatrixMultiply { a: Box<Expr>, b: Box<Expr>, acc: Option<Box<Expr>> },
    /// Element `index` of the calling lane's share of a tile (MSL's
    /// `thread_elements()[index]`); which element that is, is
    /// [`Expr::MatrixCoord`].
    MatrixElement { matrix: Box<Expr>, index: u8 },
    /// The row (or, with `column`, the column) within a `ty` tile of element
    /// `index` of the calling lane's share: a u32 that differs per backend's
    /// lane map, so kernels that address elements one by one ask for it.
    MatrixCoord { ty: MatrixType, index: u8, column: bool },
    /// `tex.read(coord)`: the texel at `coord` (a u32x2, x the column and y
    /// the row), as four values of the texture's texel type: the stored
    /// format converted as Metal does (unorm8 channels read as c/255;
    /// channels the format lacks read as 0, 0, 0, 1). A coordinate outside
    /// the texture is an error on the simulator (Metal leaves it undefined).
    TextureRead { tex: ParamId, coord: Box<Expr> },
    /// `tex.sample(sampler, uv)` on an `access::sample` texture of f32 or
    /// f16 texels: `uv` an f32x2 (normalised or in pixels, as the sampler
    /// says), the result four values of the texel type. With `u' = u·w` (or
    /// `u` in pixels) and likewise `v'`: `nearest` reads texel
    /// `(floor(u'), floor(v'))`; `linear` blends texels `i0 = floor(u' - 0.5)`
    /// and `i0 + 1` with weights `1 - a`, `a` for `a = frac(u' - 0.5)` (and
    /// likewise in y), the texel centres sitting at `(i + 0.5)/w`. Indices
    /// outside the texture follow the sampler's address mode. Computed in
    /// f32 (then rounded to the texel type); hardware filters may quantise
    /// the weights (NVIDIA's to 1/256).
    TextureSample { tex: ParamId, sampler: Sampler, uv: Box<Expr> },
    /// `tex.get_width()` / `tex.get_height()`: a u32, the same for every thread.
    TextureSize { tex: ParamId, dim: TextureDim },
    /// `t.get_capacity()`: how many slots of cooperative tensor `t` each
    /// thread of its scope holds (a u32, the same for every thread; it
    /// differs between devices).
    CooperativeCapacity { tensor: CoopId },
    /// `t.is_valid_element(index)`: whether slot `index` (u32, below the
    /// capacity) of the calling thread holds an element.
    CooperativeValid { tensor: CoopId, index: Box<Expr> },
    /// `t[index]`: the value in the calling thread's slot `index` (u32,
    /// below the capacity), of the tensor's element type; a slot that holds
    /// no element reads an unspecified value.
    CooperativeElement { tensor: CoopId, index: Box<Expr> },
    /// `t.get_multidimensional_index(index)[dim]`: coordinate `dim` of the
    /// element in the calling thread's slot `index`, innermost first (dim 0
    /// the column, 1 the row), a u32; unspecified for a slot without one.
    CooperativeCoord { tensor: CoopId, index: Box<Expr>, dim: u8 },
}

/// A source position from a front end (Rust caller or Python file and line).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceLoc {
    pub file: String,
    pub line: u32,
}

impl std::fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

pub type Block = Vec<Stmt>;

/// A statement, with the source position it came from when the front end knows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stmt {
    pub kind: StmtKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<SourceLoc>,
}

impl Stmt {
    pub fn new(kind: StmtKind) -> Stmt {
        Stmt { kind, loc: None }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StmtKind {
    /// `var = value`.
    Assign { var: VarId, value: Expr },
    /// `mem[index] = value`.
    Store { mem: Memory, index: Expr, value: Expr },
    /// `result = atomic_fetch_<op>_explicit(&mem[index], value, memory_order_relaxed)`.
    Atomic { op: AtomicOp, mem: Memory, index: Expr, value: Expr, result: Option<VarId> },
    /// Strong compare-and-exchange; `result` receives the value seen before.
    AtomicCompareExchange {
        mem: Memory,
        index: Expr,
        expected: Expr,
        desired: Expr,
        result: Option<VarId>,
    },
    If { cond: Expr, then_body: Block, else_body: Block },
    /// `for (var = start; var < end; var += step)`. `end` and `step` are
    /// evaluated once, before the first iteration; `step` must be non-zero.
    /// With `unroll`, the bounds and step are literals and the loop runs at
    /// most [`crate::limits::MAX_UNROLLED_TRIPS`] times: backends unroll it
    /// at compile time (`#pragma unroll`), so a per-thread array indexed by
    /// `var` stays in registers; it runs as any loop does.
    For {
        var: VarId,
        start: Expr,
        end: Expr,
        step: Expr,
        body: Block,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unroll: bool,
    },
    /// `while (cond) body` — `cond` is evaluated before every iteration.
    While { cond: Expr, body: Block },
    Break,
    Continue,
    /// Early return: the thread leaves the kernel.
    Return,
    Barrier { scope: BarrierScope, flags: MemFlags },
    /// `simdgroup_store`: writes tile `value` to `mem` where
    /// [`Expr::MatrixLoad`] with the same `offset`, `stride` and `transpose`
    /// reads it from; each element a memory access like a `Store`.
    MatrixStore { value: Expr, mem: Memory, offset: Expr, stride: Expr, transpose: bool },
    /// `tex.write(value, coord)`: stores the four values `value` (of the
    /// texture's texel type) at `coord` (u32x2), converted to the texture's
    /// format as Metal does (unorm8: clamped to [0, 1], then the nearest of
    /// c·255; float16: rounded to nearest even; channels the format lacks
    /// are dropped). A coordinate outside the texture is an error on the
    /// simulator (Metal leaves the write undefined).
    TextureWrite { tex: ParamId, value: Expr, coord: Expr },
    /// `tex.fence()` on a read_write texture: this thread's earlier writes
    /// to it are visible to its later reads. Without one, a thread reading
    /// a texel it wrote reads an undefined value in Metal (the sanitizer
    /// reports it).
    TextureFence { tex: ParamId },
    /// `device_fence()`: orders this thread's device-memory accesses before
    /// it against those after it for every thread of the dispatch (MSL's
    /// `atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst,
    /// thread_scope_device)`, MSL 3.2; CUDA's `__threadfence()`). With an
    /// atomic it hands data from one threadgroup to another: every thread
    /// of a threadgroup that wrote fences, the threadgroup passes a
    /// `threadgroup_barrier`, and one of its threads updates an atomic; in
    /// another threadgroup whose atomic update sees that one, every thread
    /// that reads fences after a barrier and then reads what the first
    /// wrote. A fence orders only its own thread (Metal's coherence rule),
    /// and the sanitizer follows that order: a writer or reader that did not
    /// fence is a device race ([`crate::Feature::DeviceFence`]).
    DeviceFence,
    /// `async_copy(dst, dst_index, src, src_index, count, valid)`: this
    /// thread starts copying the `count` elements `src[src_index ..
    /// src_index + count]` of a device buffer to `dst[dst_index ..]` in
    /// threadgroup memory, or zeros there when `valid` (bool) is false, in
    /// which case the source is not read. Both memories hold the same
    /// element type; a copy is 4, 8 or 16 bytes, and both ends are aligned
    /// to its size. The copy joins this thread's open group
    /// ([`StmtKind::AsyncCommit`] closes it) and is complete only after an
    /// [`StmtKind::AsyncWait`] that retires its group; its destination
    /// then becomes visible to other threads at the next threadgroup
    /// barrier. Until it is complete no thread may access the destination
    /// (the sanitizer reports it), and no thread may write the source.
    /// On CUDA this is `cp.async` (sm_80 and later); MSL copies at once,
    /// which every kernel that keeps these rules cannot tell apart.
    AsyncCopy { dst: Memory, dst_index: Expr, src: Memory, src_index: Expr, count: u32, valid: Expr },
    /// `tile_copy(barrier, dst[dst_index], src, …)`: the threadgroup copies
    /// a box of `rows × cols` elements of a row-major matrix in a device
    /// buffer to threadgroup memory ([`TileCopy`]); the copy completes at
    /// each thread's [`StmtKind::TileWait`] on the same barrier. Reached by
    /// every thread of the threadgroup with the same operands (validation
    /// requires uniform control flow and uniform operands). On CUDA sm_90
    /// one thread hands the box to the tensor copy engine
    /// (`cp.async.bulk.tensor`, completing on a shared-memory barrier);
    /// elsewhere the threads copy it together at once.
    TileCopy(Box<TileCopy>),
    /// `tile_wait(barrier)`: waits until every copy issued on `barrier`
    /// (u32, below [`crate::limits::TILE_BARRIERS`], uniform) since its
    /// previous wait is complete; their destinations are then visible to
    /// this thread. Reached uniformly, by every thread of the threadgroup.
    TileWait { barrier: Expr },
    /// `print(format, args...)`: this thread prints one line, `format` with
    /// each `{}` replaced by the next of `args` (`{{` and `}}` stand for
    /// braces). `format` is printable ASCII; `args` are scalars, as many as
    /// placeholders ([`crate::limits::MAX_PRINT_ARGS`] at most). Integers
    /// print in decimal, floats as C's `%g`, bools as `true`/`false`. The
    /// simulator tags each line with the thread's grid position and prints
    /// a dispatch's lines after it, SIMD group by SIMD group in dispatch
    /// order (at most [`crate::limits::MAX_PRINTED_LINES`], then a note of
    /// how many more); CUDA is `printf`, MSL (3.2 and later)
    /// `os_log_default.log`. Printing changes nothing the kernel computes.
    Print { format: String, args: Vec<Expr> },
    /// `async_commit()`: closes this thread's open group of asynchronous
    /// copies (an empty group when it has none).
    AsyncCommit,
    /// `async_wait(pending)`: waits until at most `pending` of this
    /// thread's committed groups are incomplete (the oldest complete first).
    AsyncWait { pending: u32 },
    /// `matmul2d<desc, scope>.run(left, right, dest)`: the product of
    /// [`crate::cooperative`] into cooperative tensor `dest` (m×n), issued by
    /// every thread of `scope` together; `release` says how long it may
    /// keep reading its operands after they return from it.
    Matmul2d {
        desc: Matmul2dDescriptor,
        scope: ExecutionScope,
        left: Matmul2dLeft,
        right: Box<TensorView>,
        dest: CoopId,
        #[serde(default, skip_serializing_if = "OperandRelease::is_next_barrier")]
        release: OperandRelease,
    },
    /// `tensor.load(src)`: every element (r, c) of `tensor` from view
    /// element (c, r) of `src` (zero outside its extents); by the whole scope.
    CooperativeLoad { tensor: CoopId, src: Box<TensorView> },
    /// `tensor.store(dst)`: every element (r, c) of `tensor` to view
    /// element (c, r) of `dst` (none outside its extents); by the whole scope.
    CooperativeStore { tensor: CoopId, dst: Box<TensorView> },
    /// `tensor[index] = value`: the calling thread's slot `index` (u32,
    /// below the capacity); writing a slot that holds no element changes
    /// nothing the kernel can observe.
    CooperativeSet { tensor: CoopId, index: Expr, value: Expr },
    /// `cooperative_dequantize(tensor, code, words, …)`: every element
    /// (r, c) of `tensor` (f32 or f16; its rows are the weights' N columns,
    /// its columns K, the orientation of the left operand of
    /// `Cᵀ = dequant(B)ᵀ · Aᵀ`) becomes
    /// `code.value(nibble j of words[offset + u·stride + w]) ·
    /// scales[scale_offset + (c >> group_shift)·scale_stride + r]` with
    /// `(u, w, j) = layout.locate(c, r)` ([`QuantLayout::locate`]: in seed
    /// 002's `[K/8][N]` rows nibble `c % 8` of
    /// `words[offset + (c / 8)·stride + r]`; in fragment order `stride` is
    /// the words of one row of 64 × 16 units) and `[K/group][N]` scales —
    /// the exact product
    /// rounded once to the tensor's element type. In MLX's columns layout
    /// the word is `words[offset + r·stride + c / 8]` and the scale
    /// `scales[scale_offset + r·scale_stride + (c >> group_shift)]`
    /// ([`QuantLayout::scale_index`]). With `biases` (f16, indexed as the
    /// scales) the element is `code.value(…) · scale + bias`, the exact
    /// value rounded once (MLX's affine weights with
    /// [`QuantCode::Uint4`]). `words` holds u32 and
    /// `scales` f16 (device or threadgroup memory); the offsets, strides
    /// and shift are u32, the same on every thread of the scope; by the
    /// whole scope. Slots holding no element are unchanged. Each element's
    /// word and scale read is a memory access like a `Load`.
    CooperativeDequantize {
        tensor: CoopId,
        code: QuantCode,
        #[serde(default, skip_serializing_if = "QuantLayout::is_rows")]
        layout: QuantLayout,
        words: Memory,
        offset: Expr,
        stride: Expr,
        scales: Memory,
        scale_offset: Expr,
        scale_stride: Expr,
        group_shift: Expr,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        biases: Option<Memory>,
    },
    /// `reduce_rows(src, dest, op)` / `reduce_columns`: `dest` (m×1 for
    /// rows, 1×n for columns, the same element type and scope) receives each
    /// row's (column's) `op` over `src`, sums in f32 in index order; by the
    /// whole scope.
    CooperativeReduce { src: CoopId, dest: CoopId, axis: ReduceAxis, op: ReduceOp },
    /// `combine(dest, src, op)`: every element (r, c) of `dest` becomes
    /// `op(dest(r, c), s)` in f32, `s` the element of `src` (both f32, one
    /// scope) in its row and column when `src` has `dest`'s shape, in its
    /// row when `src` is m×1 (a row reduction's shape: a per-row value
    /// applied along the row), in its column when `src` is 1×n; by the
    /// whole scope. Which threads hold the elements does not matter (unlike
    /// slot arithmetic across two tensors).
    CooperativeCombine { dest: CoopId, src: CoopId, op: CombineOp },
}

impl Kernel {
    /// A kernel named `name` with no declarations and an empty body.
    pub fn empty(name: impl Into<String>) -> Kernel {
        Kernel {
            name: name.into(),
            params: vec![],
            spec_constants: vec![],
            threadgroup_arrays: vec![],
            thread_arrays: vec![],
            locals: vec![],
            cooperative_tensors: vec![],
            body: vec![],
        }
    }

    pub fn param(&self, id: ParamId) -> &Param {
        &self.params[id.0 as usize]
    }
    pub fn local(&self, id: VarId) -> &Local {
        &self.locals[id.0 as usize]
    }
    pub fn tg_array(&self, id: TgArrayId) -> &ThreadgroupArray {
        &self.threadgroup_arrays[id.0 as usize]
    }
    pub fn thread_array(&self, id: ThreadArrayId) -> &ThreadArray {
        &self.thread_arrays[id.0 as usize]
    }
    pub fn spec(&self, id: SpecId) -> &SpecConstant {
        &self.spec_constants[id.0 as usize]
    }
    pub fn cooperative(&self, id: CoopId) -> &CooperativeTensor {
        &self.cooperative_tensors[id.0 as usize]
    }

    /// The binding slot of parameter `id`: its index among the buffer and
    /// by-value parameters (`[[buffer(n)]]`), or among the textures
    /// (`[[texture(n)]]`). A kernel without textures binds parameter `i` at
    /// buffer slot `i`.
    pub fn binding(&self, id: ParamId) -> u32 {
        let slot = |p: &Param| p.kind.is_buffer_slot();
        let mine = slot(self.param(id));
        self.params[..id.0 as usize].iter().filter(|p| slot(p) == mine).count() as u32
    }

    /// The name of a memory, for messages.
    pub fn memory_name(&self, mem: Memory) -> &str {
        match mem {
            Memory::Buffer(p) => &self.param(p).name,
            Memory::Threadgroup(t) => &self.tg_array(t).name,
            Memory::Thread(t) => &self.thread_array(t).name,
        }
    }

    /// Bytes of statically declared threadgroup memory.
    pub fn threadgroup_memory_bytes(&self) -> u64 {
        self.threadgroup_arrays.iter().map(ThreadgroupArray::size_bytes).sum()
    }
}

/// Which block of its parent a statement sits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Branch {
    /// The kernel body.
    Body,
    Then,
    Else,
    /// The body of a `for` or `while`.
    Loop,
}

/// Where a statement sits in the kernel: the block and index at each level,
/// printed as `body[2].then[0].loop[1]`. This is the IR location that errors
/// and sanitizer reports name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StmtPath(pub Vec<(Branch, u32)>);

impl std::fmt::Display for StmtPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("kernel");
        }
        for (i, (branch, idx)) in self.0.iter().enumerate() {
            let name = match branch {
                Branch::Body => "body",
                Branch::Then => "then",
                Branch::Else => "else",
                Branch::Loop => "loop",
            };
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{name}[{idx}]")?;
        }
        Ok(())
    }
}

/// `tensor<…, dextents<int32_t, 2>, tensor_inline>(mem + offset, extents,
/// strides)`: a 2-D view of a memory; all five values u32, uniform over
/// the scope that uses the view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorView {
    pub mem: Memory,
    pub offset: Expr,
    /// Innermost first: `[x extent, y extent]`.
    pub extents: [Expr; 2],
    /// Elements between neighbours along x and along y.
    pub strides: [Expr; 2],
}

impl TensorView {
    /// The five expressions in evaluation order: offset, extents, strides.
    pub fn exprs(&self) -> [&Expr; 5] {
        [&self.offset, &self.extents[0], &self.extents[1], &self.strides[0], &self.strides[1]]
    }
}

/// The operands of [`StmtKind::TileCopy`]. The source is a matrix of
/// `extents[0]` rows of `extents[1]` elements in device buffer `src`, row
/// `r` starting at element `r · pitch`; box element `(r, c)` is matrix
/// element `(origin[0] + r, origin[1] + c)`, or zero where that lies past
/// the matrix's last row or column, and lands at
/// `dst[dst_index + r · cols + c]` in threadgroup memory. Both memories hold
/// the same scalar type (not bool).
///
/// Rules (the simulator reports a break of any):
/// * `rows` from 1 to 256, `cols` from 1 to 256 with `cols` elements a
///   multiple of 16 bytes; `dst_index` a multiple of 128 bytes and the box
///   inside the array; `pitch` elements a multiple of 16 bytes;
/// * the matrix has at least one row and one column, its rows do not
///   overlap (`pitch ≥` its columns) and it lies inside the buffer;
/// * the box starts inside the matrix: `0 ≤ origin[0] <` its rows and
///   `0 ≤ origin[1] <` its columns (the tensor copy engine faults on a
///   box wholly outside; zeros before the first row or column are the
///   kernel's to write);
/// * the box starts a multiple of 16 bytes into its row (`origin[1]`
///   elements): the tensor copy engine reads a box only from a 16-byte
///   aligned address, and another column is an illegal instruction;
/// * `extents` and `pitch` are dispatch constants: literals, specialization
///   constants and by-value parameters under `+ - * / min max` (the CUDA
///   backend describes the matrix to the copy engine before the launch);
/// * copies on a barrier gather until a `tile_wait` on it, which waits for
///   them all; a wait finds at least one; between a wait on a barrier and
///   the next copy on it the threadgroup passes a threadgroup barrier;
/// * between the last threadgroup barrier before the copy and a thread's
///   `tile_wait`, no thread accesses the destination (the copy may land at
///   any time), and the dispatch writes no element of the source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TileCopy {
    pub barrier: Expr,
    pub dst: Memory,
    pub dst_index: Expr,
    pub src: Memory,
    /// `[rows, columns]` of the source matrix (u32).
    pub extents: [Expr; 2],
    /// Elements from one row of the source matrix to the next (u32).
    pub pitch: Expr,
    /// `[row, column]` of the box's first element in the matrix (i32,
    /// inside it).
    pub origin: [Expr; 2],
    pub rows: u32,
    pub cols: u32,
}

impl TileCopy {
    /// The expressions in evaluation order: barrier, destination index,
    /// extents, pitch, origin.
    pub fn exprs(&self) -> [&Expr; 7] {
        [&self.barrier, &self.dst_index, &self.extents[0], &self.extents[1], &self.pitch, &self.origin[0], &self.origin[1]]
    }
}

/// A product's left operand: a view, or a cooperative tensor (a previous
/// destination).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matmul2dLeft {
    Tensor(Box<TensorView>),
    Cooperative(CoopId),
}
