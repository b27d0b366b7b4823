//! The kernel library (`enigma-ops`) for Python: `library_call` runs one
//! operation on a runtime and returns its result as an `enigma.Array` in
//! device memory (`enigma/ops.py` turns it into the caller's kind of array);
//! `library_tune` runs the autotuner on a registry entry and returns its
//! report as JSON (`enigma.tune`).
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
use enigma_ops::{Elementwise, Ops, Options, Reduction, ScanKind};
use enigma_runtime::Buffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

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
/// the output as an array of shape `out_shape`.
#[pyfunction]
#[pyo3(signature = (runtime, op, elem, inputs, types, names, dims, params, out_shape, threads=None, stream=None, dlpack_stream=None))]
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
) -> PyResult<Array> {
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
    let ops = Ops::new(rt).with_options(Options { threads, elem: Some(elem), ..Options::default() }).with_cache(runtime.ops_cache.clone());
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
    Ok(Array::new(out, rt.device().kind, out_shape, out_elem, stream))
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
