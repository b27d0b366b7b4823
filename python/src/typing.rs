//! The IR's typing rules ([`enigma_ir::typing`]) for the Python front end,
//! so that it keeps no copy of them: each function takes and returns IR type
//! names (`f32`, `u32x4`, `mat8x8_f16`) and raises `TypingError` with the
//! Rust rule's own message when the operands are wrong. The front end adds
//! the kernel and the Python line.
//!
//! Operators and intrinsics are named as in the IR's JSON form (`bit_and`,
//! `fast::exp`). The tables ([`binary_ops`], [`unary_ops`], [`intrinsics`])
//! let the Python tests run every rule through the front end as well.

use crate::CompileError;
use enigma_ir::typing;
use enigma_ir::{BinaryOp, Intrinsic, Precision, Scalar, TextureAccess, Type, UnaryOp, ValidationErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    enigma,
    TypingError,
    CompileError,
    "The IR's typing rules refuse these operand types; the message is the rule's (the front end adds the kernel and line)."
);

fn ty(name: &str) -> PyResult<Type> {
    Type::from_ir_name(name).ok_or_else(|| PyValueError::new_err(format!("unknown IR type `{name}`")))
}

fn scalar(name: &str) -> PyResult<Scalar> {
    match ty(name)? {
        Type::Scalar(s) => Ok(s),
        t => Err(PyValueError::new_err(format!("`{t}` is not a scalar type"))),
    }
}

/// An IR enum from its JSON name (`"bit_and"`, `"exp"`, `"fast"`).
fn from_json_name<T: serde::de::DeserializeOwned>(what: &str, name: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(name.into())).map_err(|_| PyValueError::new_err(format!("unknown {what} `{name}`")))
}

fn json_name<T: serde::Serialize>(v: T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => unreachable!("IR operator enums serialize as strings"),
    }
}

fn result(r: Result<Type, ValidationErrorKind>) -> PyResult<String> {
    r.map(|t| t.to_string()).map_err(|k| TypingError::new_err(k.to_string()))
}

/// The type of `lhs op rhs` (`typing::binary`).
#[pyfunction]
pub fn binary_result_type(op: &str, lhs: &str, rhs: &str) -> PyResult<String> {
    result(typing::binary(from_json_name("binary operator", op)?, ty(lhs)?, ty(rhs)?))
}

/// The type of `op arg` (`typing::unary`).
#[pyfunction]
pub fn unary_result_type(op: &str, arg: &str) -> PyResult<String> {
    result(typing::unary(from_json_name("unary operator", op)?, ty(arg)?))
}

/// The type of `precision`'s variant of `func(args…)` (`typing::call` and
/// `typing::precision`), arity included.
#[pyfunction]
#[pyo3(signature = (func, arg_types, precision = "default"))]
pub fn intrinsic_result_type(func: &str, arg_types: Vec<String>, precision: &str) -> PyResult<String> {
    let func: Intrinsic = from_json_name("intrinsic", func)?;
    let precision: Precision = from_json_name("precision", precision)?;
    let types = arg_types.iter().map(|t| ty(t)).collect::<PyResult<Vec<_>>>()?;
    result(typing::call(func, &types).and_then(|t| typing::precision(func, precision, &types).map(|()| t)))
}

/// The JSON names of the functions MSL offers in its `fast::` and
/// `precise::` namespaces (`Intrinsic::WITH_PRECISION_VARIANTS`).
#[pyfunction]
pub fn precision_functions() -> Vec<String> {
    Intrinsic::WITH_PRECISION_VARIANTS.into_iter().map(json_name).collect()
}

/// How many arguments an intrinsic takes.
#[pyfunction]
pub fn intrinsic_arity(func: &str) -> PyResult<usize> {
    Ok(from_json_name::<Intrinsic>("intrinsic", func)?.arity())
}

/// Refuses a comparison `op` of a signed with an unsigned integer, before
/// the usual conversions (`typing::mixed_sign_comparison`).
#[pyfunction]
pub fn check_comparison_signs(op: &str, a: &str, b: &str) -> PyResult<()> {
    typing::mixed_sign_comparison(from_json_name("binary operator", op)?, ty(a)?, ty(b)?).map_err(|k| TypingError::new_err(k.to_string()))
}

/// The scalar type two differently typed scalars meet in
/// (`typing::usual_arithmetic`).
#[pyfunction]
pub fn common_scalar_type(a: &str, b: &str) -> PyResult<String> {
    Ok(typing::usual_arithmetic(scalar(a)?, scalar(b)?).to_string())
}

/// The type of a bit reinterpretation (`typing::bitcast`).
#[pyfunction]
pub fn bitcast_result_type(from: &str, to: &str) -> PyResult<String> {
    result(typing::bitcast(ty(from)?, ty(to)?))
}

/// The type of component `index` of a vector (`typing::extract`).
#[pyfunction]
pub fn extract_result_type(vector: &str, index: u8) -> PyResult<String> {
    result(typing::extract(ty(vector)?, index))
}

/// The type of a checked subscript of `memory` (`typing::dim_check`).
#[pyfunction]
pub fn dim_check_result_type(memory: &str, index: &str, size: &str) -> PyResult<String> {
    result(typing::dim_check(memory, ty(index)?, ty(size)?))
}

/// The type of `simdgroup_multiply(a, b)` or, with `acc`,
/// `simdgroup_multiply_accumulate(a, b, acc)` (`typing::matrix_multiply`).
#[pyfunction]
#[pyo3(signature = (a, b, acc=None))]
pub fn matrix_multiply_result_type(a: &str, b: &str, acc: Option<&str>) -> PyResult<String> {
    result(typing::matrix_multiply(ty(a)?, ty(b)?, acc.map(ty).transpose()?))
}

/// The type of element `index` of a lane's share of a tile
/// (`typing::matrix_element`).
#[pyfunction]
pub fn matrix_element_result_type(matrix: &str, index: u8) -> PyResult<String> {
    result(typing::matrix_element(ty(matrix)?, index))
}

/// The type of the row or column of element `index` (`typing::matrix_coord`).
#[pyfunction]
pub fn matrix_coord_result_type(matrix: &str, index: u8) -> PyResult<String> {
    match ty(matrix)? {
        Type::Matrix(m) => result(typing::matrix_coord(m, index)),
        t => Err(TypingError::new_err(format!("{t} is not a SIMD-group matrix type"))),
    }
}

/// The type of `tex.read(coord)` on texture `texture` of `texel`s with
/// `access` (`typing::texture_read`).
#[pyfunction]
pub fn texture_read_result_type(texture: &str, texel: &str, access: &str, coord: &str) -> PyResult<String> {
    let access = TextureAccess::from_name(access).ok_or_else(|| PyValueError::new_err(format!("unknown texture access `{access}`")))?;
    result(typing::texture_read(texture, scalar(texel)?, access, ty(coord)?))
}

/// The type of `tex.sample(sampler, uv)` (`typing::texture_sample`); the
/// sampler as its IR JSON (`{"coord": …, "filter": …, "address": …}`).
#[pyfunction]
pub fn texture_sample_result_type(texture: &str, texel: &str, access: &str, sampler: &str, uv: &str) -> PyResult<String> {
    let access = TextureAccess::from_name(access).ok_or_else(|| PyValueError::new_err(format!("unknown texture access `{access}`")))?;
    let sampler: enigma_ir::Sampler = serde_json::from_str(sampler).map_err(|e| PyValueError::new_err(format!("not a sampler: {e}")))?;
    result(typing::texture_sample(texture, scalar(texel)?, access, sampler, ty(uv)?))
}

/// The value type `tex.write(value, coord)` takes (`typing::texture_texel`).
#[pyfunction]
pub fn texture_texel_type(texture: &str, texel: &str) -> PyResult<String> {
    result(typing::texture_texel(texture, scalar(texel)?))
}

/// How many bytes `async_copy` moves: `count` elements from `src` (named,
/// a device buffer or not, of `src_elem`s) into `dst` (named, threadgroup
/// memory or not, of `dst_elem`s), with a `valid` flag of type `valid`
/// (`typing::async_copy_memories`, then `typing::async_copy`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn async_copy_bytes(
    dst: &str,
    dst_is_threadgroup: bool,
    dst_elem: &str,
    src: &str,
    src_is_buffer: bool,
    src_elem: &str,
    count: u32,
    valid: &str,
) -> PyResult<u32> {
    let (dst_elem, src_elem, valid) = (ty(dst_elem)?, ty(src_elem)?, ty(valid)?);
    typing::async_copy_memories(dst, dst_is_threadgroup, src, src_is_buffer)
        .and_then(|()| typing::async_copy(dst_elem, src_elem, count, valid))
        .map_err(|k| TypingError::new_err(k.to_string()))
}

/// Checks `async_wait(pending)` (`typing::async_wait`).
#[pyfunction]
pub fn async_wait_check(pending: u32) -> PyResult<()> {
    typing::async_wait(pending).map_err(|k| TypingError::new_err(k.to_string()))
}

/// Every binary operator's JSON name.
#[pyfunction]
pub fn binary_ops() -> Vec<String> {
    BinaryOp::ALL.into_iter().map(json_name).collect()
}

/// Every unary operator's JSON name.
#[pyfunction]
pub fn unary_ops() -> Vec<String> {
    [UnaryOp::Neg, UnaryOp::BitNot, UnaryOp::Not].into_iter().map(json_name).collect()
}

/// Every intrinsic's JSON name.
#[pyfunction]
pub fn intrinsics() -> Vec<String> {
    Intrinsic::ALL.into_iter().map(json_name).collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TypingError", m.py().get_type::<TypingError>())?;
    m.add_function(wrap_pyfunction!(binary_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(unary_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(intrinsic_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(intrinsic_arity, m)?)?;
    m.add_function(wrap_pyfunction!(common_scalar_type, m)?)?;
    m.add_function(wrap_pyfunction!(check_comparison_signs, m)?)?;
    m.add_function(wrap_pyfunction!(bitcast_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(extract_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(dim_check_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(matrix_multiply_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(matrix_element_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(matrix_coord_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(texture_read_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(texture_sample_result_type, m)?)?;
    m.add_function(wrap_pyfunction!(texture_texel_type, m)?)?;
    m.add_function(wrap_pyfunction!(async_copy_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(async_wait_check, m)?)?;
    m.add_function(wrap_pyfunction!(binary_ops, m)?)?;
    m.add_function(wrap_pyfunction!(unary_ops, m)?)?;
    m.add_function(wrap_pyfunction!(intrinsics, m)?)?;
    m.add_function(wrap_pyfunction!(precision_functions, m)?)?;
    Ok(())
}
