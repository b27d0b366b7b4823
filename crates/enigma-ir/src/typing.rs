//! The IR's typing rules, written once: the result type of every operator,
//! intrinsic, cast and vector operation, or the [`ValidationErrorKind`](crate::validation_error::ValidationErrorKind) that
//! says why the operands are wrong.
//!
//! Validation applies them (adding the location); the builder applies them
//! to give each expression its type; the code writer and the simulator's
//! lowering read result types from them; the Python front end calls them
//! through the extension (`python/src/typing.rs`: `_enigma.binary_result_type`
//! and its siblings), so it keeps no copy. Only weak-literal coercion (the
//! builder's and the Python front end's convenience for `x + 1`) happens
//! before these rules; the rules themselves never convert.
//!
//! * Unary: `-` on floats and signed integers, `~` on integers, `!` on bool.
//! * Binary: both operands the same type, or one a scalar of the other's
//!   element type (scalar-vector broadcast, not for comparisons). Arithmetic
//!   needs a non-bool element; bit operations integers or bool; shifts
//!   integers; ordering comparisons a non-bool element; `&&`/`||` bool. The
//!   result has the wider operand's shape; comparisons give bool (vectors).
//!   A comparison of a signed with an unsigned integer is refused
//!   ([`mixed_sign_comparison`]) before anything else: C would convert the
//!   signed side, so `-1 < n` is false.
//! * Implicit conversion (front ends only): [`usual_arithmetic`].
//! * Intrinsics: see [`call`]. Casts keep the width or splat a scalar;
//!   bitcasts keep the byte size and exclude bool.
//! * A checked subscript ([`dim_check`]): an integer scalar index, checked
//!   against an integer scalar size; the index's type.
//! * SIMD-group matrices: see [`matrix_shape`], [`matrix_fill`],
//!   [`matrix_memory`], [`matrix_multiply`], [`matrix_element`]. No operator,
//!   cast or intrinsic takes a matrix.
//! * Textures: see [`texture_texel`], [`texture_read`], [`texture_write`],
//!   [`texture_sample`];
//!   a texture is not a value, so no operator takes one.

use crate::ir::{BinaryOp, Intrinsic, Precision, Sampler, SamplerCoord, TextureAccess, UnaryOp, Uniformity};
use crate::types::{MatrixType, QuantCode, QuantLayout, Scalar, Type};
use crate::validation_error::ValidationErrorKind as K;

/// The type of `op arg`.
pub fn unary(op: UnaryOp, ty: Type) -> Result<Type, K> {
    not_matrix(op.symbol(), ty)?;
    let s = ty.elem();
    let ok = match op {
        UnaryOp::Neg => s.is_float() || s.is_signed_int(),
        UnaryOp::BitNot => s.is_int(),
        UnaryOp::Not => s == Scalar::Bool,
    };
    if ok {
        Ok(ty)
    } else {
        Err(K::InvalidOperand { op: op.symbol().into(), ty })
    }
}

/// Refuses a comparison of a signed with an unsigned integer (scalars or
/// vectors): converted as C converts them (the signed side to unsigned, the
/// front ends' usual conversions), a negative value compares as a huge one.
/// Both operands keep their own types here: a front end asks this before it
/// converts them.
pub fn mixed_sign_comparison(op: BinaryOp, lt: Type, rt: Type) -> Result<(), K> {
    let (l, r) = (lt.elem(), rt.elem());
    if op.is_comparison() && !lt.is_matrix() && !rt.is_matrix() && l.is_int() && r.is_int() && l.is_signed_int() != r.is_signed_int() {
        return Err(K::MixedSignComparison { op: op.symbol(), lhs: lt, rhs: rt });
    }
    Ok(())
}

/// The type of `lhs op rhs`.
pub fn binary(op: BinaryOp, lt: Type, rt: Type) -> Result<Type, K> {
    not_matrix(op.symbol(), lt)?;
    not_matrix(op.symbol(), rt)?;
    mixed_sign_comparison(op, lt, rt)?;
    let shape_ok = lt == rt || (lt.elem() == rt.elem() && (lt.width() == 1 || rt.width() == 1) && !op.is_comparison());
    if !shape_ok {
        return Err(K::OperandTypes { op: op.symbol(), lhs: lt, rhs: rt });
    }
    let operand = if lt.width() >= rt.width() { lt } else { rt };
    let s = operand.elem();
    let ok = match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => s != Scalar::Bool,
        BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => s.is_int() || s == Scalar::Bool,
        BinaryOp::Shl | BinaryOp::Shr => s.is_int(),
        BinaryOp::Eq | BinaryOp::Ne => true,
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => s != Scalar::Bool,
        BinaryOp::And | BinaryOp::Or => s == Scalar::Bool,
    };
    if !ok {
        return Err(K::InvalidOperand { op: op.symbol().into(), ty: operand });
    }
    Ok(if op.is_comparison() { operand.with_elem(Scalar::Bool) } else { operand })
}

/// Whether `func` has a variant of `precision` for arguments of `types`
/// (their types already checked by [`call`]): MSL's `fast::` and
/// `precise::` namespaces hold the functions of
/// [`Intrinsic::WITH_PRECISION_VARIANTS`] on float scalars and vectors
/// (`abs`, `min`, `max` and `clamp` of integers have one variant). On
/// `float` the variants differ; `half` (and `bfloat`, computed as float
/// where MSL lacks it) have one, which every precision names.
pub fn precision(func: Intrinsic, precision: Precision, types: &[Type]) -> Result<(), K> {
    let Some(namespace) = precision.namespace() else {
        return Ok(());
    };
    let problem = if !func.has_precision_variants() {
        format!("MSL has no `fast::` or `precise::` variant of `{}`", func.name())
    } else if let Some(t) = types.iter().find(|t| !t.elem().is_float()) {
        format!("`{namespace}::{}` takes float scalars and vectors, found {t}", func.name())
    } else {
        return Ok(());
    };
    Err(K::PrecisionVariant { func: func.name(), namespace, problem })
}

/// The type of `func(args…)`:
/// * float math: a float scalar or vector, every argument the same type;
/// * `isnan`, `isinf`, `isfinite`: a float scalar or vector → bool of its width;
/// * `abs`, `min`, `max`, `clamp`: numeric, every argument the same type;
/// * `select(a, b, c)`: `a` and `b` the same type, `c` bool of width 1 or theirs;
/// * `popcount`, `clz`, `ctz`: integers;
/// * the SIMD-group functions take the types MSL gives them (spec §6.9.2:
///   not bool, not 64-bit integers): `simd_and/or/xor` 8- to 32-bit
///   integers; `simd_sum/product/max/min` and prefix sums 8- to 32-bit
///   integers and floats; shuffles and broadcasts any of those, with a u32
///   (or u16) lane index or delta;
/// * `simd_all`, `simd_any`: bool → bool; `simd_ballot`: bool → u64;
///   `simd_is_first()` → bool.
pub fn call(func: Intrinsic, types: &[Type]) -> Result<Type, K> {
    use Intrinsic::*;
    let name = func.name();
    if types.len() != func.arity() {
        return Err(K::ArgumentCount { func: name, expected: func.arity(), found: types.len() });
    }
    let arg_err = |index: usize, expected: &str| K::ArgumentType { func: name, index, expected: expected.into(), found: types[index] };
    let same_as_first = |from: usize| -> Result<(), K> {
        match (from..types.len()).find(|&i| types[i] != types[0]) {
            Some(i) => Err(arg_err(i, &types[0].to_string())),
            None => Ok(()),
        }
    };
    if let Some(index) = types.iter().position(|t| t.is_matrix()) {
        return Err(arg_err(index, "a scalar or vector (matrices have their own operations)"));
    }
    let t0 = types.first().copied().unwrap_or(Type::BOOL);
    let numeric = |t: Type| t.elem() != Scalar::Bool;
    Ok(match func {
        f if f.is_float_math() => {
            if !t0.elem().is_float() {
                return Err(arg_err(0, "a float scalar or vector"));
            }
            same_as_first(1)?;
            t0
        }
        IsNan | IsInf | IsFinite => {
            if !t0.elem().is_float() {
                return Err(arg_err(0, "a float scalar or vector"));
            }
            t0.with_elem(Scalar::Bool)
        }
        Abs | Min | Max | Clamp => {
            if !numeric(t0) {
                return Err(arg_err(0, "a numeric scalar or vector"));
            }
            same_as_first(1)?;
            t0
        }
        Select => {
            if types[2].elem() != Scalar::Bool || (types[2].width() != 1 && types[2].width() != t0.width()) {
                return Err(arg_err(2, "bool (or a bool vector of the operands' width)"));
            }
            if types[1] != t0 {
                return Err(arg_err(1, &t0.to_string()));
            }
            t0
        }
        Popcount | Clz | Ctz => {
            if !t0.elem().is_int() {
                return Err(arg_err(0, "an integer scalar or vector"));
            }
            t0
        }
        SimdAnd | SimdOr | SimdXor => {
            if !t0.elem().is_int() || !simd_value(t0) {
                return Err(arg_err(0, "an integer scalar or vector of 8 to 32 bits (MSL's SIMD-group functions exclude long and ulong)"));
            }
            t0
        }
        SimdSum | SimdProduct | SimdMax | SimdMin | SimdPrefixInclusiveSum | SimdPrefixExclusiveSum => {
            if !numeric(t0) || !simd_value(t0) {
                return Err(arg_err(0, "a numeric scalar or vector, not 64-bit (MSL's SIMD-group functions exclude long and ulong)"));
            }
            t0
        }
        SimdBroadcastFirst => {
            if !simd_value(t0) {
                return Err(arg_err(0, SIMD_VALUE));
            }
            t0
        }
        SimdBroadcast | SimdShuffle | SimdShuffleUp | SimdShuffleDown | SimdShuffleXor => {
            if !simd_value(t0) {
                return Err(arg_err(0, SIMD_VALUE));
            }
            if types[1] != Type::U32 && types[1] != Type::scalar(Scalar::U16) {
                return Err(arg_err(1, "u32 (or u16) lane index or delta"));
            }
            t0
        }
        SimdAll | SimdAny | SimdBallot => {
            if t0 != Type::BOOL {
                return Err(arg_err(0, "bool"));
            }
            if func == SimdBallot {
                Type::U64
            } else {
                Type::BOOL
            }
        }
        SimdIsFirst => Type::BOOL,
        _ => unreachable!("every intrinsic is matched above"),
    })
}

/// What MSL's SIMD-group shuffles and broadcasts take (spec §6.9.2).
const SIMD_VALUE: &str = "a scalar or vector of 8- to 32-bit integers or floats (MSL's SIMD-group functions exclude bool, long and ulong)";

/// Whether MSL's SIMD-group functions take values of `ty`: neither bool nor
/// 64-bit integers (spec §6.9.2).
fn simd_value(ty: Type) -> bool {
    !matches!(ty.elem(), Scalar::Bool | Scalar::I64 | Scalar::U64)
}

/// The scalar type that two differently typed scalar operands meet in,
/// where a front end converts implicitly (the Python front end's `a + b` with
/// `a: u8`, `b: i32`): C's usual arithmetic conversions without integer
/// promotion, so narrow integer arithmetic stays in its type.
///
/// * a float and a non-float: the float; two floats: the wider, and f16 with
///   bf16 meet in f32;
/// * bool and an integer: the integer;
/// * two integers: the wider; of one width, the unsigned one.
///
/// The IR itself never converts: the front end casts the operands to this
/// type, then [`binary`] (or [`call`]) gives the result.
pub fn usual_arithmetic(a: Scalar, b: Scalar) -> Scalar {
    let wider = |a: Scalar, b: Scalar| if a.size_bytes() >= b.size_bytes() { a } else { b };
    if a == b {
        return a;
    }
    match (a.is_float(), b.is_float()) {
        (true, true) if a.size_bytes() == b.size_bytes() => Scalar::F32,
        (true, true) => wider(a, b),
        (true, false) => a,
        (false, true) => b,
        _ if a == Scalar::Bool => b,
        _ if b == Scalar::Bool => a,
        _ if a.size_bytes() != b.size_bytes() => wider(a, b),
        _ if a.is_unsigned_int() => a,
        _ => b,
    }
}

/// The operand of a SIMD-group function that must be the same in every
/// lane of the SIMD group (MSL spec, Table 6.14), with the fix to name when
/// it is not: `simd_shuffle_up`/`down`'s delta, `simd_shuffle_xor`'s mask,
/// `simd_broadcast`'s lane. `None` for other arguments (`simd_shuffle`'s
/// lane may differ per lane).
pub fn simd_uniform_operand(func: Intrinsic, index: usize) -> Option<(&'static str, &'static str)> {
    use Intrinsic::*;
    const PER_LANE: &str = "compute it from values uniform over the SIMD group, or use `simd_shuffle(x, lane)`, whose lane may differ per lane";
    match (func, index) {
        (SimdShuffleUp | SimdShuffleDown, 1) => Some(("delta", PER_LANE)),
        (SimdShuffleXor, 1) => Some(("mask", PER_LANE)),
        (SimdBroadcast, 1) => Some(("lane", "compute it from values uniform over the SIMD group, or use `simd_shuffle(x, lane)` for a lane per lane")),
        _ => None,
    }
}

/// How uniform a call's result is, given how uniform its arguments are
/// together: SIMD-group reductions and broadcasts are uniform across the
/// SIMD group; shuffles, prefix sums and `simd_is_first` differ per lane.
pub fn call_uniformity(func: Intrinsic, args: Uniformity) -> Uniformity {
    use Intrinsic::*;
    match func {
        SimdPrefixInclusiveSum | SimdPrefixExclusiveSum | SimdShuffle | SimdShuffleUp | SimdShuffleDown | SimdShuffleXor
        | SimdIsFirst => Uniformity::Thread,
        f if f.is_simd() => args.max(Uniformity::Simdgroup),
        _ => args,
    }
}

fn check_width(ty: Type, widths: std::ops::RangeInclusive<u8>) -> Result<(), K> {
    if widths.contains(&ty.width()) {
        Ok(())
    } else {
        Err(K::VectorWidth { width: ty.width() })
    }
}

/// The type of a value conversion to `to`: same width, or a scalar splat.
pub fn cast(from: Type, to: Type) -> Result<Type, K> {
    if from.is_matrix() || to.is_matrix() {
        return Err(K::InvalidCast { from, to });
    }
    check_width(to, 1..=4)?;
    if from.width() != to.width() && from.width() != 1 {
        return Err(K::InvalidCast { from, to });
    }
    Ok(to)
}

/// The type of a bit reinterpretation as `to`: same size in bytes, no bool.
pub fn bitcast(from: Type, to: Type) -> Result<Type, K> {
    if from.is_matrix() || to.is_matrix() {
        return Err(K::InvalidCast { from, to });
    }
    check_width(to, 1..=4)?;
    let (fb, tb) = (from.elem().size_bytes() * from.width() as u32, to.elem().size_bytes() * to.width() as u32);
    if fb != tb || from.elem() == Scalar::Bool || to.elem() == Scalar::Bool {
        return Err(K::BitcastSize { from, from_bytes: fb, to, to_bytes: tb });
    }
    Ok(to)
}

/// The type of a vector constructor `ty(components…)`: `width` scalars of
/// its element type, or one to splat.
pub fn vector(ty: Type, components: &[Type]) -> Result<Type, K> {
    vector_shape(ty, components.len())?;
    match components.iter().position(|c| *c != Type::scalar(ty.elem())) {
        Some(index) => Err(K::ArgumentType { func: "vector constructor", index, expected: ty.elem().to_string(), found: components[index] }),
        None => Ok(ty),
    }
}

/// The shape half of [`vector`]: a width of 2–4 and 1 or `width` components.
pub fn vector_shape(ty: Type, components: usize) -> Result<(), K> {
    check_width(ty, 2..=4)?;
    if components != 1 && components != ty.width() as usize {
        return Err(K::VectorComponents { ty, expected: ty.width(), found: components });
    }
    Ok(())
}

/// The type of component `index` of a vector.
pub fn extract(ty: Type, index: u8) -> Result<Type, K> {
    if index >= ty.width() || !ty.is_vector() {
        return Err(K::ComponentOutOfRange { index, ty });
    }
    Ok(Type::scalar(ty.elem()))
}

/// `dim_check(mem, dim, index, size)` (a subscript of a multi-dimensional
/// access to `memory`): `index` and `size` are integer scalars (of any
/// integer types, compared by value); the result is `index`'s type.
pub fn dim_check(memory: &str, index: Type, size: Type) -> Result<Type, K> {
    let is_int = |t: Type| matches!(t, Type::Scalar(s) if s.is_int());
    if !is_int(index) {
        return Err(K::IndexType { memory: memory.into(), found: index });
    }
    if !is_int(size) {
        return Err(K::ArgumentType { func: "dim_check", index: 3, expected: "an integer scalar (the dimension's size)".into(), found: size });
    }
    Ok(index)
}

fn not_matrix(op: &str, ty: Type) -> Result<(), K> {
    if ty.is_matrix() {
        return Err(K::InvalidOperand { op: op.into(), ty });
    }
    Ok(())
}

/// A matrix type must have a supported shape and element.
pub fn matrix_shape(ty: MatrixType) -> Result<(), K> {
    if ty.is_valid() {
        Ok(())
    } else {
        Err(K::MatrixShape { ty: Type::Matrix(ty) })
    }
}

fn matrix_operand(op: &'static str, what: &str, ty: Type) -> Result<MatrixType, K> {
    ty.as_matrix().ok_or_else(|| K::MatrixOperands { op, problem: format!("{what} must be a SIMD-group matrix, found {ty}") })
}

/// `make_filled_simdgroup_matrix` (or the diagonal constructor): the value
/// is a scalar of the tile's element type.
pub fn matrix_fill(ty: MatrixType, value: Type) -> Result<Type, K> {
    matrix_shape(ty)?;
    if value != Type::scalar(ty.elem()) {
        return Err(K::ArgumentType { func: "make_filled_simdgroup_matrix", index: 0, expected: ty.elem().to_string(), found: value });
    }
    Ok(Type::Matrix(ty))
}

/// `simdgroup_load`/`simdgroup_store` on a memory of element type `elem`
/// with u32 `offset` and `stride`: the memory holds scalars of the tile's
/// element type, or — for a load — vectors of them, read as their scalars
/// (`offset` and `stride` then count scalars, as a `threadgroup half*` view
/// of a `threadgroup half4` array does in MSL). A store writes scalars only
/// (storing part of a vector element would read and rewrite the rest).
pub fn matrix_memory(op: &'static str, ty: MatrixType, memory: &str, elem: Type, offset: Type, stride: Type) -> Result<(), K> {
    matrix_shape(ty)?;
    let load = op == "simdgroup_load";
    if elem.elem() != ty.elem() || elem.is_matrix() || (elem.width() > 1 && !load) {
        let needs = match (load, elem.width() > 1) {
            (true, _) => format!("{} elements or vectors of them", ty.elem()),
            (false, true) => format!("{} elements (a store cannot write into vectors)", ty.elem()),
            (false, false) => format!("{} elements", ty.elem()),
        };
        return Err(K::MatrixOperands { op, problem: format!("`{memory}` holds {elem}; a {} tile needs {needs}", Type::Matrix(ty)) });
    }
    for (index, t) in [(1, offset), (2, stride)] {
        if t != Type::U32 {
            return Err(K::ArgumentType { func: op, index, expected: "u32".into(), found: t });
        }
    }
    Ok(())
}

/// A quantized tile load (`Expr::MatrixLoadQuantized`): an f16 tile (its
/// products take f16; the decoded value times an f16 scale rounds once to
/// it); `memories` are the packed words (u32 or vectors of u32) and the
/// scales (f16 or vectors of f16), each as (name, element type);
/// `indices` the types of the word offset, the stride and the scale offset,
/// all u32. The tile's sides are multiples of the layout's unit
/// ([`QuantLayout::unit`]).
pub fn matrix_quantized(ty: MatrixType, code: QuantCode, layout: QuantLayout, memories: [(&str, Type); 2], indices: [Type; 3]) -> Result<(), K> {
    let op = "simdgroup_load_quantized";
    matrix_shape(ty)?;
    if ty.elem() != Scalar::F16 {
        return Err(K::MatrixOperands { op, problem: format!("{code} weights decode into f16 tiles, not {}", Type::Matrix(ty)) });
    }
    if !QuantCode::TILE.contains(&code) || !QuantLayout::TILE.contains(&layout) {
        return Err(K::MatrixOperands { op, problem: format!("takes int4 or fp4 codes in the rows or fragments layout, not {code} in {layout} (those are cooperative_dequantize's, with its biases)") });
    }
    let (unit_rows, unit_cols) = layout.unit();
    if !u32::from(ty.rows()).is_multiple_of(unit_rows) || !u32::from(ty.cols()).is_multiple_of(unit_cols) {
        return Err(K::MatrixOperands {
            op,
            problem: format!("a {} tile in the {layout} layout needs rows a multiple of {unit_rows} and columns of {unit_cols}", Type::Matrix(ty)),
        });
    }
    for ((memory, elem), (wanted, what)) in memories.into_iter().zip([(Scalar::U32, "packed u32 words"), (Scalar::F16, "f16 scales")]) {
        if elem.elem() != wanted || elem.is_matrix() {
            return Err(K::MatrixOperands { op, problem: format!("`{memory}` holds {elem}; a quantized load reads {what} (or vectors of them)") });
        }
    }
    for (index, t) in [(1, indices[0]), (2, indices[1]), (4, indices[2])] {
        if t != Type::U32 {
            return Err(K::ArgumentType { func: op, index, expected: "u32".into(), found: t });
        }
    }
    Ok(())
}

/// `simdgroup_multiply(a, b)` / `simdgroup_multiply_accumulate(a, b, acc)`:
/// `a` R×K and `b` K×C of one element type; `acc`, when given, R×C of that
/// type or f32 (the usual f16/bf16 inputs with f32 accumulation). The result
/// has `acc`'s type, or `a`'s element.
pub fn matrix_multiply(a: Type, b: Type, acc: Option<Type>) -> Result<Type, K> {
    let op = if acc.is_some() { "simdgroup_multiply_accumulate" } else { "simdgroup_multiply" };
    let (ma, mb) = (matrix_operand(op, "the left operand", a)?, matrix_operand(op, "the right operand", b)?);
    if ma.cols() != mb.rows() || ma.elem() != mb.elem() {
        return Err(K::MatrixOperands { op, problem: format!("{a} times {b}: the inner sides and the element types must match") });
    }
    let Some(acc) = acc else {
        return Ok(Type::Matrix(MatrixType::new(ma.elem(), ma.rows(), mb.cols())));
    };
    let mc = matrix_operand(op, "the accumulator", acc)?;
    if (mc.rows(), mc.cols()) != (ma.rows(), mb.cols()) || !(mc.elem() == ma.elem() || mc.elem() == Scalar::F32) {
        return Err(K::MatrixOperands {
            op,
            problem: format!("{a} times {b} accumulates into a {}×{} tile of {} or f32, not {acc}", ma.rows(), mb.cols(), ma.elem()),
        });
    }
    Ok(acc)
}

/// Element `index` of a lane's share of a tile: a scalar of its element type.
pub fn matrix_element(ty: Type, index: u8) -> Result<Type, K> {
    let m = matrix_operand("thread_elements", "the operand", ty)?;
    matrix_coord(m, index)?;
    Ok(Type::scalar(m.elem()))
}

/// The row or column of element `index` of a lane's share: a u32.
pub fn matrix_coord(ty: MatrixType, index: u8) -> Result<Type, K> {
    matrix_shape(ty)?;
    if index as u32 >= ty.per_lane() {
        return Err(K::MatrixOperands {
            op: "thread_elements",
            problem: format!("element {index} of a lane's share of a {} tile does not exist (each lane holds {})", Type::Matrix(ty), ty.per_lane()),
        });
    }
    Ok(Type::U32)
}

/// The texel types `texture2d<T>` takes: f32, f16, i32, u32.
pub fn texture_texel(texture: &str, texel: Scalar) -> Result<Type, K> {
    if matches!(texel, Scalar::F32 | Scalar::F16 | Scalar::I32 | Scalar::U32) {
        Ok(Type::vector(texel, 4))
    } else {
        Err(K::TextureTexel { texture: texture.into(), texel })
    }
}

/// A texture coordinate is a u32x2 (MSL's `uint2`).
fn texture_coord(texture: &str, coord: Type) -> Result<(), K> {
    if coord == Type::vector(Scalar::U32, 2) {
        Ok(())
    } else {
        Err(K::TextureCoord { texture: texture.into(), found: coord })
    }
}

/// `tex.read(coord)` on a `texture2d<texel, access>`: the access allows
/// reading, the coordinate is a u32x2; the result is four texels.
pub fn texture_read(texture: &str, texel: Scalar, access: TextureAccess, coord: Type) -> Result<Type, K> {
    let ty = texture_texel(texture, texel)?;
    if !access.can_read() {
        return Err(K::TextureAccess { texture: texture.into(), access, op: "read" });
    }
    texture_coord(texture, coord)?;
    Ok(ty)
}

/// `async_copy(dst, _, src, _, count, valid)`: both memories hold `elem`
/// (the caller has checked which is which), `count` elements make one of
/// [`crate::limits::ASYNC_COPY_BYTES`], and `valid` is a bool. Returns the
/// bytes copied.
pub fn async_copy(dst_elem: Type, src_elem: Type, count: u32, valid: Type) -> Result<u32, K> {
    let problem = |problem: String| Err(K::AsyncCopy { problem });
    if dst_elem != src_elem {
        return problem(format!("copies between memories of one element type; the destination holds {dst_elem}, the source {src_elem}"));
    }
    if dst_elem.is_matrix() || dst_elem.elem() == Scalar::Bool {
        return problem(format!("copies numbers, not {dst_elem}"));
    }
    let bytes = u64::from(count) * u64::from(dst_elem.size_bytes());
    if !crate::limits::ASYNC_COPY_BYTES.iter().any(|&b| u64::from(b) == bytes) {
        return problem(format!(
            "moves 4, 8 or 16 bytes; {count} × {dst_elem} is {bytes} bytes"
        ));
    }
    if valid != Type::BOOL {
        return problem(format!("takes a bool saying whether to read the source (false: zeros), found {valid}"));
    }
    Ok(bytes as u32)
}

/// The ends of `async_copy`: the source `src` is a device buffer
/// (`src_is_buffer`), the destination `dst` threadgroup memory
/// (`dst_is_threadgroup`); each named for the message.
pub fn async_copy_memories(dst: &str, dst_is_threadgroup: bool, src: &str, src_is_buffer: bool) -> Result<(), K> {
    if !dst_is_threadgroup || !src_is_buffer {
        return Err(K::AsyncCopy {
            problem: format!("copies from a device buffer to threadgroup memory, not from `{src}` to `{dst}`"),
        });
    }
    Ok(())
}

/// `tile_copy`'s memories hold one scalar type (not bool), and its box
/// has 1 to [`crate::limits::MAX_TILE_BOX`] rows and columns, a row a
/// multiple of [`crate::limits::TILE_ROW_ALIGN`] bytes.
pub fn tile_copy(dst_elem: Type, src_elem: Type, rows: u32, cols: u32) -> Result<(), K> {
    use crate::limits::{MAX_TILE_BOX, TILE_ROW_ALIGN};
    let problem = |problem: String| Err(K::TileCopy { problem });
    if dst_elem != src_elem {
        return problem(format!("copies between memories of one element type; the destination holds {dst_elem}, the source {src_elem}"));
    }
    if !matches!(dst_elem, Type::Scalar(s) if s != Scalar::Bool) {
        return problem(format!("copies scalars (not bool), not {dst_elem}"));
    }
    for (what, n) in [("rows", rows), ("columns", cols)] {
        if n == 0 || n > MAX_TILE_BOX {
            return problem(format!("copies boxes of 1 to {MAX_TILE_BOX} {what}, not {n}"));
        }
    }
    let row_bytes = cols * dst_elem.size_bytes();
    if !row_bytes.is_multiple_of(TILE_ROW_ALIGN) {
        return problem(format!("copies rows of a multiple of {TILE_ROW_ALIGN} bytes; {cols} × {dst_elem} is {row_bytes} bytes"));
    }
    Ok(())
}

/// A tile copy's barrier (of `op`) is a u32.
pub fn tile_barrier(op: &str, ty: Type) -> Result<(), K> {
    if ty != Type::U32 {
        return Err(K::TileCopy { problem: format!("barriers are u32, 0 to {}; `{op}` was given {ty}", crate::limits::TILE_BARRIERS - 1) });
    }
    Ok(())
}

/// `print(format, args...)`: a format ([`crate::print_format`]) with one
/// placeholder per value, at most [`crate::limits::MAX_PRINT_ARGS`] values,
/// each a scalar.
pub fn print(format: &str, args: &[Type]) -> Result<(), K> {
    let problem = |problem: String| K::PrintFormat { format: format.to_string(), problem };
    crate::print_format::pieces(format).map_err(|e| problem(e.to_string()))?;
    let wanted = crate::print_format::placeholders(format);
    if wanted != args.len() {
        return Err(problem(format!("the format has {wanted} placeholder(s) `{{}}` but {} value(s) are given", args.len())));
    }
    if args.len() > crate::limits::MAX_PRINT_ARGS {
        return Err(problem(format!("{} values; one print formats at most {}", args.len(), crate::limits::MAX_PRINT_ARGS)));
    }
    if let Some((i, ty)) = args.iter().enumerate().find(|(_, t)| !matches!(t, Type::Scalar(_))) {
        return Err(problem(format!("value {i} is {ty}; print takes scalars (print a vector's components, `v.x`, one by one)")));
    }
    Ok(())
}

/// `async_wait(pending)`: at most [`crate::limits::MAX_ASYNC_PENDING`].
pub fn async_wait(pending: u32) -> Result<(), K> {
    if pending > crate::limits::MAX_ASYNC_PENDING {
        return Err(K::AsyncCopy {
            problem: format!("`async_wait({pending})` leaves too many groups in flight (at most {})", crate::limits::MAX_ASYNC_PENDING),
        });
    }
    Ok(())
}

/// `tex.write(value, coord)` on a `texture2d<texel, access>`: the access
/// allows writing, the value is four texels, the coordinate a u32x2.
pub fn texture_write(texture: &str, texel: Scalar, access: TextureAccess, value: Type, coord: Type) -> Result<(), K> {
    let ty = texture_texel(texture, texel)?;
    if !access.can_write() {
        return Err(K::TextureAccess { texture: texture.into(), access, op: "write" });
    }
    if value != ty {
        return Err(K::AssignType { target: format!("a texel of texture `{texture}`"), expected: ty, found: value });
    }
    texture_coord(texture, coord)
}

/// `tex.sample(sampler, uv)` on a `texture2d<texel, access>`: f32 or f16
/// texels, access::sample, a uv of f32x2, and a sampler that repeats only
/// with normalised coordinates; the result is four texels.
pub fn texture_sample(texture: &str, texel: Scalar, access: TextureAccess, sampler: Sampler, uv: Type) -> Result<Type, K> {
    let ty = texture_texel(texture, texel)?;
    if !matches!(texel, Scalar::F32 | Scalar::F16) {
        return Err(K::TextureSampleTexel { texture: texture.into(), texel });
    }
    if access != TextureAccess::Sample {
        return Err(K::TextureAccess { texture: texture.into(), access, op: "sample" });
    }
    if sampler.coord == SamplerCoord::Pixel && sampler.address.repeats() {
        return Err(K::SamplerPixelRepeat { texture: texture.into(), sampler });
    }
    if uv != Type::vector(Scalar::F32, 2) {
        return Err(K::TextureSampleCoord { texture: texture.into(), found: uv });
    }
    Ok(ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C's usual arithmetic conversions, without integer promotion.
    #[test]
    fn usual_arithmetic_conversions() {
        use Scalar::*;
        let cases = [
            (I32, I32, I32),
            (U8, I32, I32),
            (I32, U32, U32),
            (U32, I32, U32),
            (I64, U32, I64),
            (U16, I16, U16),
            (Bool, U8, U8),
            (I8, Bool, I8),
            (F16, I64, F16),
            (U32, BF16, BF16),
            (F16, BF16, F32),
            (BF16, F16, F32),
            (F16, F32, F32),
            (F32, BF16, F32),
        ];
        for (a, b, want) in cases {
            assert_eq!(usual_arithmetic(a, b), want, "{a} with {b}");
            assert_eq!(usual_arithmetic(b, a), want, "{b} with {a}");
        }
    }

    /// A load may view vector memory as its scalars; a store may not write
    /// into vectors; other element types are refused either way.
    #[test]
    fn matrix_memory_takes_scalars_or_for_loads_vectors_of_them() {
        let t = MatrixType::new(Scalar::F16, 16, 16);
        let ok = |op, elem| matrix_memory(op, t, "m", elem, Type::U32, Type::U32);
        assert!(ok("simdgroup_load", Type::F16).is_ok());
        assert!(ok("simdgroup_load", Type::vector(Scalar::F16, 4)).is_ok());
        assert!(ok("simdgroup_store", Type::F16).is_ok());
        let store = ok("simdgroup_store", Type::vector(Scalar::F16, 4)).unwrap_err().to_string();
        assert!(store.contains("`m` holds f16x4") && store.contains("a store cannot write into vectors"), "{store}");
        assert!(ok("simdgroup_load", Type::vector(Scalar::F32, 4)).is_err());
        assert!(ok("simdgroup_load", Type::F32).is_err());
    }
}
