//! The kernel library (`enigma-ops`) for Python: `library_call` runs one
//! operation on a runtime and returns its result as an `enigma.Array` in
//! device memory (`enigma/ops.py` turns it into the caller's kind of array);
//! `library_tune` runs the autotuner on a registry entry and returns its
//! report as JSON (`enigma.tune`); `quant_quantize`, `quant_dequantize` and
//! `library_qmatmul` are the 4-bit weight formats and the quantized matmul
//! (`enigma.ops.quantize`, `dequantize`, `qmatmul`).
//!
//! Inputs are bound like kernel arguments ([`array::bind`]): enigma arrays
//! and CUDA tensors as they are, host arrays copied into untyped buffers
//! padded to 16 bytes, with the element type given separately, so the
//! library may pick its vector (`float4`) kernels (CUDA tensors too, when
//! 16-byte aligned and whole vectors). Pipelines stay in the runtime's cache
//! between calls.

use crate::array::{self, Array, Staging, Want};
use crate::{runtime_err, DispatchError, Runtime};
use enigma_ir::Scalar;
use enigma_ops::{ElemType, Elementwise, Ops, Options, QuantFormat, QuantLayout, QuantizedMatrix, QuantizedWeights, Reduction, ScanKind};
use enigma_runtime::Buffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn elem_of(name: &str) -> PyResult<Scalar> {
    match name {
        "f32" => Ok(Scalar::F32),
        "f16" => Ok(Scalar::F16),
        "bf16" => Ok(Scalar::BF16),
        "i32" => Ok(Scalar::I32),
        "u32" => Ok(Scalar::U32),
        other => Err(PyValueError::new_err(format!("the kernel library takes f32, f16, bf16, i32 or u32 data, not {other}"))),
    }
}

fn ops_err(py: Python<'_>, e: enigma_ops::Error) -> PyErr {
    match e {
        enigma_ops::Error::Runtime(r) => runtime_err(py, r),
        other => DispatchError::new_err(other.to_string()),
    }
}

/// Runs library operation `op` (`softmax`, `rms_norm`, `sum`, …) on
/// `inputs` (arrays named `names`, of element types `types`; the operation's
/// type is `elem`) with shape `dims` and scalar parameters `params` (factor,
/// eps or scale), on `stream` when given (see `Runtime.dispatch`). Returns
/// the output as an array of shape `out_shape`, and with `sanitize` (every
/// dispatch under the simulator's sanitizer) the report of the operation's
/// dispatches together as JSON (`Runtime.dispatch`'s form: the times
/// summed, the notes and findings of all).
#[pyfunction]
#[pyo3(signature = (runtime, op, elem, inputs, types, names, dims, params, out_shape, threads=None, stream=None, dlpack_stream=None, sanitize=false))]
#[allow(clippy::too_many_arguments)]
pub fn library_call(
    py: Python<'_>,
    runtime: &Runtime,
    op: &str,
    elem: &str,
    inputs: Vec<Bound<'_, PyAny>>,
    types: Vec<String>,
    names: Vec<String>,
    dims: Vec<usize>,
    params: Vec<f64>,
    out_shape: Vec<usize>,
    threads: Option<u32>,
    stream: Option<u64>,
    dlpack_stream: Option<i64>,
    sanitize: bool,
) -> PyResult<(Array, Option<String>)> {
    let rt = match stream {
        Some(s) => runtime.rt.on_stream(s),
        None => runtime.rt.clone(),
    };
    let rt = &rt;
    let elem = elem_of(elem)?;
    if types.len() != inputs.len() || names.len() != inputs.len() {
        return Err(PyValueError::new_err(format!("{op}: {} arrays, {} types and {} names", inputs.len(), types.len(), names.len())));
    }
    let mut bound = Vec::with_capacity(inputs.len());
    for ((input, ty), name) in inputs.iter().zip(&types).zip(&names) {
        let scalar = elem_of(ty)?;
        let what = format!("{op}: `{name}`");
        let want = Want { scalar, elem_bytes: scalar.size_bytes() as usize, writes: false, staging: Staging::Padded, what: &what };
        bound.push(array::bind(py, rt, input, &want, dlpack_stream)?);
    }
    let lengths: Vec<(usize, Scalar)> = bound.iter().zip(&types).map(|(b, ty)| Ok((b.nbytes, elem_of(ty)?))).collect::<PyResult<_>>()?;
    check_lengths(op, &lengths, &dims)?;
    let buffers: Vec<Buffer> = bound.iter().map(|b| b.buffer.clone()).collect();
    let need = |n_inputs: usize, n_dims: usize, n_params: usize| -> PyResult<()> {
        if buffers.len() != n_inputs || dims.len() != n_dims || params.len() < n_params {
            return Err(PyValueError::new_err(format!(
                "{op} takes {n_inputs} arrays, {n_dims} dimensions and {n_params} parameters; got {}, {} and {}",
                buffers.len(),
                dims.len(),
                params.len()
            )));
        }
        Ok(())
    };
    let ops = Ops::new(rt).with_options(Options { threads, elem: Some(elem), sanitize, ..Options::default() }).with_cache(runtime.ops_cache.clone());
    let param = |i: usize| params.get(i).copied().unwrap_or(0.0) as f32;
    // (result, number of output elements, output element type)
    let (out, n_out, out_elem) = match op {
        "scale" | "relu" | "silu" | "gelu" | "add" | "mul" => {
            let binary = matches!(op, "add" | "mul");
            need(if binary { 2 } else { 1 }, 1, usize::from(op == "scale"))?;
            let kind = match op {
                "scale" => Elementwise::Scale,
                "relu" => Elementwise::Relu,
                "silu" => Elementwise::Silu,
                "gelu" => Elementwise::Gelu,
                "add" => Elementwise::Add,
                _ => Elementwise::Mul,
            };
            let out = ops.elementwise(kind, &buffers[0], buffers.get(1), dims[0], param(0));
            (out, dims[0], elem)
        }
        "sum" | "max" | "min" => {
            need(1, 1, 0)?;
            let r = reduction(op);
            (ops.reduce(r, &buffers[0], dims[0]), 1, Scalar::F32)
        }
        "sum_rows" | "max_rows" | "min_rows" => {
            need(1, 2, 0)?;
            let r = reduction(op.trim_end_matches("_rows"));
            (ops.reduce_rows(r, &buffers[0], dims[0], dims[1]), dims[0], Scalar::F32)
        }
        "prefix_sum_inclusive" | "prefix_sum_exclusive" => {
            need(1, 1, 0)?;
            let kind = if op.ends_with("inclusive") { ScanKind::Inclusive } else { ScanKind::Exclusive };
            (ops.prefix_sum(&buffers[0], dims[0], kind), dims[0], elem)
        }
        "softmax" => {
            need(1, 2, 0)?;
            (ops.softmax(&buffers[0], dims[0], dims[1]), dims[0] * dims[1], elem)
        }
        "rms_norm" => {
            need(2, 2, 1)?;
            (ops.rms_norm(&buffers[0], &buffers[1], dims[0], dims[1], param(0)), dims[0] * dims[1], elem)
        }
        "layer_norm" => {
            need(3, 2, 1)?;
            (ops.layer_norm(&buffers[0], &buffers[1], &buffers[2], dims[0], dims[1], param(0)), dims[0] * dims[1], elem)
        }
        "matmul" => {
            need(2, 3, 0)?;
            let (m, n, k) = (dims[0], dims[1], dims[2]);
            (ops.matmul(&buffers[0], &buffers[1], m, n, k, ElemType::F32), m * n, Scalar::F32)
        }
        "gemv" => {
            need(2, 2, 0)?;
            (ops.gemv(&buffers[0], &buffers[1], dims[0], dims[1]), dims[0], Scalar::F32)
        }
        "attention_decode" | "attention_decode_fused" => {
            need(3, 3, 1)?;
            let (h, s, d) = (dims[0], dims[1], dims[2]);
            let out = if op.ends_with("fused") {
                ops.attention_decode_fused(&buffers[0], &buffers[1], &buffers[2], h, s, d, param(0))
            } else {
                ops.attention_decode(&buffers[0], &buffers[1], &buffers[2], h, s, d, param(0))
            };
            (out, h * d, elem)
        }
        other => return Err(PyValueError::new_err(format!("no library operation named `{other}`"))),
    };
    let out = out.map_err(|e| ops_err(py, e))?;
    let elements: usize = out_shape.iter().product();
    if elements != n_out || out.len_bytes() < n_out * out_elem.size_bytes() as usize {
        return Err(PyValueError::new_err(format!(
            "{op}: an output shape of {out_shape:?} for {n_out} elements ({} bytes written)",
            out.len_bytes()
        )));
    }
    let report = if sanitize { Some(launches_report(ops.take_launches())?) } else { None };
    Ok((Array::new(out, rt.device().kind, out_shape, out_elem, stream), report))
}

/// The reports of an operation's dispatches as one (JSON).
fn launches_report(launches: Vec<enigma_ops::Launch>) -> PyResult<String> {
    let mut all = enigma_runtime::DispatchReport::default();
    for launch in launches {
        let r = launch.report;
        all.wall_time += r.wall_time;
        all.device_time = match (all.device_time, r.device_time) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        all.notes.extend(r.notes);
        all.findings.extend(r.findings);
    }
    serde_json::to_string(&all).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The inputs operation `op` takes for shape `dims`: each one's name, its
/// element count and element type (`None`: the call's). `None` for an
/// unknown operation or a shape whose sizes overflow.
fn expected_inputs(op: &str, dims: &[usize]) -> Option<Vec<(&'static str, usize, Option<Scalar>)>> {
    let dim = |i: usize| dims.get(i).copied();
    let product = |n: usize| dims.iter().take(n).try_fold(1usize, |acc, &d| acc.checked_mul(d));
    Some(match op {
        "add" | "mul" => vec![("a", dim(0)?, None), ("b", dim(0)?, None)],
        "scale" | "relu" | "silu" | "gelu" | "sum" | "max" | "min" | "prefix_sum_inclusive" | "prefix_sum_exclusive" => vec![("x", dim(0)?, None)],
        "sum_rows" | "max_rows" | "min_rows" | "softmax" => vec![("x", product(2)?, None)],
        "rms_norm" => vec![("x", product(2)?, None), ("weight", dim(1)?, None)],
        "layer_norm" => vec![("x", product(2)?, None), ("weight", dim(1)?, None), ("bias", dim(1)?, None)],
        "gemv" => vec![("w", product(2)?, None), ("x", dim(1)?, Some(Scalar::F32))],
        "matmul" => vec![("a", dim(0)?.checked_mul(dim(2)?)?, None), ("b", dim(2)?.checked_mul(dim(1)?)?, None)],
        "attention_decode" | "attention_decode_fused" => {
            vec![("q", dim(0)?.checked_mul(dim(2)?)?, None), ("k", product(3)?, None), ("v", product(3)?, None)]
        }
        _ => return None,
    })
}

/// Every input (its bytes of data and element type) must hold exactly the
/// elements the shape asks for: host buffers are padded to 16 bytes on
/// upload, so a length checked after that would let a short array through
/// (its missing elements read as zeros).
fn check_lengths(op: &str, inputs: &[(usize, Scalar)], dims: &[usize]) -> PyResult<()> {
    let Some(expected) = expected_inputs(op, dims) else { return Ok(()) };
    if expected.len() != inputs.len() {
        return Ok(()); // the argument count is reported below, with the dimensions
    }
    for ((name, elements, _), &(bytes, ty)) in expected.iter().zip(inputs) {
        let size = ty.size_bytes() as usize;
        if bytes % size != 0 || bytes / size != *elements {
            return Err(PyValueError::new_err(format!("{op}: `{name}` has {} elements of {ty}; the shape {dims:?} needs {elements}", bytes / size)));
        }
    }
    Ok(())
}

fn reduction(name: &str) -> Reduction {
    match name {
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        _ => Reduction::Sum,
    }
}

/// Tunes registry entry `name` at `shape` (empty: its default shape) on
/// `runtime`: the report as JSON, with the cache file it was recorded in
/// (`null` when `record` is false).
#[pyfunction]
#[pyo3(signature = (runtime, name, shape, warmup, repeats, record))]
pub fn library_tune(py: Python<'_>, runtime: &Runtime, name: &str, shape: Vec<usize>, warmup: usize, repeats: usize, record: bool) -> PyResult<String> {
    let Some(entry) = enigma_ops::registry().into_iter().find(|e| e.name == name) else {
        return Err(PyValueError::new_err(format!("no library kernel named `{name}` (names are like softmax_f32, gemv_f16)")));
    };
    if repeats == 0 {
        return Err(PyValueError::new_err("repeats must be at least 1"));
    }
    let settings = enigma_ops::tune::Settings { warmup, repeats };
    let report = enigma_ops::tune::tune(&entry, &runtime.rt, &shape, settings, &mut |_, _, _| {}).map_err(|e| ops_err(py, e))?;
    let stored = match (record, enigma_ops::tune::cache_path()) {
        (true, Some(path)) => enigma_ops::tune::store(&path, &report)
            .map_err(|e| DispatchError::new_err(format!("recording the tuning result in {}: {e}", path.display())))?
            .map(|_| path.display().to_string()),
        _ => None,
    };
    let mut value = serde_json::to_value(&report).map_err(|e| PyValueError::new_err(e.to_string()))?;
    value["cache"] = serde_json::json!(stored);
    Ok(value.to_string())
}

fn quant_err(e: enigma_ops::QuantError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn halves(bytes: &[u8]) -> Vec<u16> {
    bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
}

/// The packed-word layout named `rows` (the format's own) or `fragments`.
fn quant_layout(name: &str) -> PyResult<QuantLayout> {
    QuantLayout::from_name(name).ok_or_else(|| PyValueError::new_err(format!("layout is 'rows' or 'fragments', not {name:?}")))
}

/// A quantized matrix from packed words in `layout` (back in the format's
/// own layout, checked), scales and biases as bytes.
#[allow(clippy::too_many_arguments)]
fn quantized_matrix(format: QuantFormat, layout: QuantLayout, k: usize, n: usize, group: usize, packed: &[u8], scales: &[u8], biases: &[u8]) -> PyResult<QuantizedMatrix> {
    let words = match layout {
        QuantLayout::Rows => words(packed),
        _ => enigma_ops::quant::unpack_layout(format, layout, k, n, &words(packed)).map_err(quant_err)?,
    };
    QuantizedMatrix::new(format, k, n, group, words, halves(scales), halves(biases)).map_err(quant_err)
}

/// Quantizes the `k × n` f32 matrix `w` (little-endian bytes, row-major) to
/// `format` (`fp4`, `int4`, `mlx_affine`): the packed words (in `layout`),
/// scales and biases (empty unless MLX's format) as bytes.
#[pyfunction]
#[pyo3(signature = (format, w, k, n, group, layout="rows"))]
pub fn quant_quantize<'py>(py: Python<'py>, format: &str, w: Vec<u8>, k: usize, n: usize, group: usize, layout: &str) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let format = QuantFormat::parse(format).map_err(quant_err)?;
    let layout = quant_layout(layout)?;
    if w.len() % 4 != 0 {
        return Err(PyValueError::new_err(format!("w has {} bytes, not whole float32 values", w.len())));
    }
    let values: Vec<f32> = words(&w).into_iter().map(f32::from_bits).collect();
    let q = enigma_ops::quant::quantize(format, &values, k, n, group).map_err(quant_err)?;
    let packed: Vec<u8> = q.packed_in(layout).map_err(quant_err)?.iter().flat_map(|v| v.to_le_bytes()).collect();
    let scales: Vec<u8> = q.scales.iter().flat_map(|v| v.to_le_bytes()).collect();
    let biases: Vec<u8> = q.biases.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok((PyBytes::new(py, &packed), PyBytes::new(py, &scales), PyBytes::new(py, &biases)))
}

/// The `k × n` f32 matrix (bytes) that packed words (in `layout`), f16
/// scales (and biases) of `format` stand for.
#[pyfunction]
#[pyo3(signature = (format, k, n, group, packed, scales, biases, layout="rows"))]
#[allow(clippy::too_many_arguments)]
pub fn quant_dequantize<'py>(py: Python<'py>, format: &str, k: usize, n: usize, group: usize, packed: Vec<u8>, scales: Vec<u8>, biases: Vec<u8>, layout: &str) -> PyResult<Bound<'py, PyBytes>> {
    let format = QuantFormat::parse(format).map_err(quant_err)?;
    let q = quantized_matrix(format, quant_layout(layout)?, k, n, group, &packed, &scales, &biases)?;
    let w = q.dequantize().map_err(quant_err)?;
    let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok(PyBytes::new(py, &bytes))
}

/// `C[m, n] = A[m, k] · dequant(B)` on `runtime`: `a` f16 bytes, `packed`
/// and `scales` (and `biases`, for `mlx_affine` only) in the layout of
/// `format` (`fp4`, `int4`: seed 002's; `mlx_affine`: MLX's), `out` `f16`
/// or `f32`, through `variant`: `auto` (`Ops::qmatmul`'s choice),
/// `separate` (`Ops::qmatmul_tiled`) or `fused` (`Ops::qmatmul_fused`);
/// `packed` in `layout` (`rows`, or `fragments`, which the tensor-core
/// kernel reads at every M). Returns C's bytes.
#[pyfunction]
#[pyo3(signature = (runtime, format, a, packed, scales, m, n, k, group, out, threads=None, biases=None, variant="auto", layout="rows"))]
#[allow(clippy::too_many_arguments)]
pub fn library_qmatmul<'py>(
    py: Python<'py>,
    runtime: &Runtime,
    format: &str,
    a: Vec<u8>,
    packed: Vec<u8>,
    scales: Vec<u8>,
    m: usize,
    n: usize,
    k: usize,
    group: usize,
    out: &str,
    threads: Option<u32>,
    biases: Option<Vec<u8>>,
    variant: &str,
    layout: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let rt = &runtime.rt;
    let format = QuantFormat::parse(format).map_err(quant_err)?;
    if !matches!(variant, "auto" | "separate" | "fused") {
        return Err(PyValueError::new_err(format!("qmatmul's variant is 'auto', 'separate' or 'fused', not {variant:?}")));
    }
    let out = match out {
        "f32" => ElemType::F32,
        "f16" => ElemType::F16,
        other => return Err(PyValueError::new_err(format!("qmatmul's output is f32 or f16, not {other}"))),
    };
    let layout = quant_layout(layout)?;
    // The words go up as they are, in their layout: checked, not reordered.
    let biases = halves(biases.as_deref().unwrap_or_default());
    let weights = QuantizedWeights::upload_words(rt, format, layout, [k, n, group], &words(&packed), &halves(&scales), &biases).map_err(|e| match e {
        enigma_ops::Error::Quant(q) => quant_err(q),
        other => ops_err(py, other),
    })?;
    let a = enigma_ops::upload_bytes(rt, a).map_err(|e| ops_err(py, e))?;
    let ops = Ops::new(rt).with_options(Options { threads, ..Options::default() }).with_cache(runtime.ops_cache.clone());
    let c = match variant {
        "separate" => ops.qmatmul_tiled(&a, &weights, m, out),
        "fused" => ops.qmatmul_fused(&a, &weights, m, out),
        _ => ops.qmatmul(&a, &weights, m, out),
    }
    .map_err(|e| ops_err(py, e))?;
    let mut bytes = c.read_bytes().map_err(|e| runtime_err(py, e))?;
    bytes.truncate(m * n * out.size_bytes() as usize);
    Ok(PyBytes::new(py, &bytes))
}
