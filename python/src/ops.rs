//! The kernel library (`enigma-ops`) for Python: one native function per
//! operation (`op_softmax`, `op_rms_norm`, `op_sum`, …) runs it on a runtime
//! and returns its result as an `enigma.Array` in device memory
//! (`enigma/ops.py` turns it into the caller's kind of array); `op_tune`
//! runs the autotuner on a registry entry and returns its report as JSON
//! (`enigma.tune`); `quant_quantize`, `quant_dequantize` and `op_qmatmul`
//! are the 4-bit weight formats and the quantized matmul
//! (`enigma.ops.quantize`, `dequantize`, `qmatmul`).
//!
//! Inputs are bound like kernel arguments ([`array::bind`]): enigma arrays
//! and CUDA tensors as they are, host arrays copied into untyped buffers
//! padded to 16 bytes, with the element type given separately, so the
//! library may pick its vector (`float4`) kernels (CUDA tensors too, when
//! 16-byte aligned and whole vectors). Pipelines stay in the runtime's cache
//! between calls.
//!
//! `MetalRuntime.last_report` for library calls: `ops_begin(sanitize)` says
//! whether the calling thread's next call runs under the sanitizer (its
//! runtime's setting) and clears its report; a call that succeeds leaves
//! the report of its dispatches (all of them: findings and notes in order,
//! times added, the kernels' names) for `ops_report` on the same thread.

use crate::array::{self, Array, BoundArg, Staging, Want};
use crate::{runtime_err, DispatchError, Runtime};
use enigma_ir::Scalar;
use enigma_ops::{DType, Elementwise, Ops, Options, QuantFormat, QuantLayout, QuantizedMatrix, QuantizedWeights, ReduceOp, ScanKind};
use enigma_runtime::Buffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::cell::{Cell, RefCell};
use std::ops::Deref;

thread_local! {
    /// Whether this thread's library calls run under the sanitizer.
    static SANITIZE: Cell<bool> = const { Cell::new(false) };
    /// The report of this thread's current call's dispatches, until it succeeds.
    static PENDING: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The report of this thread's last library call, if it succeeded.
    static REPORT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Starts a library call on this thread: under the sanitizer or not, with
/// no report yet.
#[pyfunction]
pub fn ops_begin(sanitize: bool) {
    SANITIZE.with(|s| s.set(sanitize));
    PENDING.with(|p| p.take());
    REPORT.with(|r| r.take());
}

/// The report (JSON) of this thread's last library call, once: `None` if it
/// failed or made no dispatch.
#[pyfunction]
pub fn ops_report() -> Option<String> {
    REPORT.with(|r| r.take())
}

/// Makes this thread's pending report its last call's (`ok`) or drops it.
fn settle(ok: bool) {
    let pending = PENDING.with(|p| p.take());
    REPORT.with(|r| *r.borrow_mut() = if ok { pending } else { None });
}

/// One report of `launches`, in the form of a kernel dispatch's: findings
/// and notes in dispatch order, wall times added, device times added where
/// every dispatch has one; with `kernels`, the kernels dispatched, and
/// `sanitized`, whether the sanitizer checked them.
fn merged_report(launches: &[enigma_ops::Launch], sanitized: bool) -> Option<String> {
    let mut merged = enigma_runtime::DispatchReport::default();
    let mut device_time = Some(std::time::Duration::ZERO);
    for l in launches {
        merged.wall_time += l.report.wall_time;
        device_time = device_time.zip(l.report.device_time).map(|(a, b)| a + b);
        merged.notes.extend(l.report.notes.iter().cloned());
        merged.findings.extend(l.report.findings.iter().cloned());
    }
    merged.device_time = device_time.filter(|_| !launches.is_empty());
    let mut value = serde_json::to_value(&merged).ok()?;
    value["kernels"] = launches.iter().map(|l| l.kernel.clone()).collect();
    value["sanitized"] = sanitized.into();
    Some(value.to_string())
}

/// The operations object of one library call: when dropped, the report of
/// its dispatches waits for the call's outcome ([`settle`]).
struct Recorded<'rt>(Ops<'rt>);

impl<'rt> Recorded<'rt> {
    /// `ops` under this thread's sanitizer setting.
    fn new(ops: Ops<'rt>) -> Recorded<'rt> {
        let options = Options { sanitize: SANITIZE.with(Cell::get), ..ops.options().clone() };
        Recorded(ops.with_options(options))
    }
}

impl<'rt> Deref for Recorded<'rt> {
    type Target = Ops<'rt>;

    fn deref(&self) -> &Ops<'rt> {
        &self.0
    }
}

impl Drop for Recorded<'_> {
    fn drop(&mut self) {
        let report = merged_report(&self.0.take_launches(), self.0.options().sanitize);
        PENDING.with(|p| *p.borrow_mut() = report);
    }
}

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

/// One library call: the runtime (on the caller's CUDA stream, if any), the
/// operation's element type, its options and the arrays bound so far (kept
/// alive until the operation has run).
struct Call<'a> {
    op: &'static str,
    runtime: &'a Runtime,
    rt: enigma_runtime::Runtime,
    elem: Scalar,
    threads: Option<u32>,
    stream: Option<u64>,
    dlpack_stream: Option<i64>,
    bound: Vec<BoundArg>,
}

impl<'a> Call<'a> {
    fn new(op: &'static str, runtime: &'a Runtime, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Call<'a>> {
        let rt = match stream {
            Some(s) => runtime.rt.on_stream(s),
            None => runtime.rt.clone(),
        };
        Ok(Call { op, runtime, rt, elem: elem_of(elem)?, threads, stream, dlpack_stream, bound: vec![] })
    }

    /// Binds array `input` as the operation's `name`, which must hold exactly
    /// `elements` values of `ty` (the call's element type when `None`): host
    /// buffers are padded to 16 bytes on upload, so a length checked after
    /// that would let a short array through.
    fn input(&mut self, py: Python<'_>, name: &str, input: &Bound<'_, PyAny>, elements: usize, ty: Option<Scalar>) -> PyResult<Buffer> {
        let scalar = ty.unwrap_or(self.elem);
        let what = format!("{}: `{name}`", self.op);
        let want = Want { scalar, elem_bytes: scalar.size_bytes() as usize, writes: false, staging: Staging::Padded, what: &what };
        let bound = array::bind(py, &self.rt, input, &want, self.dlpack_stream)?;
        let size = scalar.size_bytes() as usize;
        if bound.nbytes % size != 0 || bound.nbytes / size != elements {
            return Err(PyValueError::new_err(format!("{}: `{name}` has {} elements of {scalar}; the shape needs {elements}", self.op, bound.nbytes / size)));
        }
        let buffer = bound.buffer.clone();
        self.bound.push(bound);
        Ok(buffer)
    }

    /// The operations object for this call: its threadgroup size and element
    /// type, with the runtime's pipeline cache.
    fn ops(&self) -> Recorded<'_> {
        Recorded::new(Ops::new(&self.rt).with_options(Options { threads: self.threads, elem: Some(self.elem), ..Options::default() }).with_cache(self.runtime.ops_cache.clone()))
    }

    /// The operation's result as an array of `shape` holding `out_elem`s.
    fn output(&self, py: Python<'_>, out: Result<Buffer, enigma_ops::Error>, shape: Vec<usize>, out_elem: Scalar) -> PyResult<Array> {
        settle(out.is_ok());
        let out = out.map_err(|e| ops_err(py, e))?;
        let elements: usize = shape.iter().product();
        if out.len_bytes() < elements * out_elem.size_bytes() as usize {
            return Err(PyValueError::new_err(format!("{}: an output of shape {shape:?} needs {elements} {out_elem} elements; {} bytes were written", self.op, out.len_bytes())));
        }
        Ok(Array::new(out, self.rt.device().kind, shape, out_elem, self.stream))
    }
}

/// The product of `dims`, or an error naming the operation when it overflows.
fn product(op: &str, dims: &[usize]) -> PyResult<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or_else(|| PyValueError::new_err(format!("{op}: the shape {dims:?} has too many elements")))
}

/// An element-wise operation of one array of `shape`.
#[allow(clippy::too_many_arguments)]
fn unary(py: Python<'_>, op: &'static str, kind: Elementwise, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, factor: f32, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new(op, runtime, elem, threads, stream, dlpack_stream)?;
    let n = product(op, &shape)?;
    let x = call.input(py, "x", x, n, None)?;
    let out = call.ops().elementwise(kind, &x, None, n, factor);
    call.output(py, out, shape, call.elem)
}

/// An element-wise operation of two arrays of `shape`.
#[allow(clippy::too_many_arguments)]
fn binary(py: Python<'_>, op: &'static str, kind: Elementwise, runtime: &Runtime, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new(op, runtime, elem, threads, stream, dlpack_stream)?;
    let n = product(op, &shape)?;
    let a = call.input(py, "a", a, n, None)?;
    let b = call.input(py, "b", b, n, None)?;
    let out = call.ops().elementwise(kind, &a, Some(&b), n, 0.0);
    call.output(py, out, shape, call.elem)
}

/// `x * factor` for `x` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, x, shape, factor, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_scale(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, factor: f32, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    unary(py, "scale", Elementwise::Scale, runtime, x, shape, factor, elem, threads, stream, dlpack_stream)
}

/// `max(x, 0)` for `x` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, x, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_relu(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    unary(py, "relu", Elementwise::Relu, runtime, x, shape, 0.0, elem, threads, stream, dlpack_stream)
}

/// `x * sigmoid(x)` for `x` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, x, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_silu(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    unary(py, "silu", Elementwise::Silu, runtime, x, shape, 0.0, elem, threads, stream, dlpack_stream)
}

/// GELU (tanh form) of `x` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, x, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_gelu(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    unary(py, "gelu", Elementwise::Gelu, runtime, x, shape, 0.0, elem, threads, stream, dlpack_stream)
}

/// `a + b` for `a` and `b` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, a, b, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_add(py: Python<'_>, runtime: &Runtime, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    binary(py, "add", Elementwise::Add, runtime, a, b, shape, elem, threads, stream, dlpack_stream)
}

/// `a * b` for `a` and `b` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, a, b, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_mul(py: Python<'_>, runtime: &Runtime, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    binary(py, "mul", Elementwise::Mul, runtime, a, b, shape, elem, threads, stream, dlpack_stream)
}

/// The reduction named `reduction` (`sum`, `max`, `min`).
fn reduction(reduction: &str) -> PyResult<ReduceOp> {
    match reduction {
        "sum" => Ok(ReduceOp::Sum),
        "max" => Ok(ReduceOp::Max),
        "min" => Ok(ReduceOp::Min),
        other => Err(PyValueError::new_err(format!("a reduction is sum, max or min, not {other:?}"))),
    }
}

/// The `reduction` (`sum`, `max` or `min`) of the `n` elements of `x`: an
/// f32 array of one element.
#[pyfunction]
#[pyo3(signature = (runtime, x, n, reduction, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_reduce(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, n: usize, reduction: &str, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let r = self::reduction(reduction)?;
    let mut call = Call::new("reduce", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "x", x, n, None)?;
    let out = call.ops().reduce(r, &x, n);
    call.output(py, out, vec![1], Scalar::F32)
}

/// The `reduction` (`sum`, `max` or `min`) of each row of the `rows × d`
/// array `x`: an f32 array of `rows` elements.
#[pyfunction]
#[pyo3(signature = (runtime, x, rows, d, reduction, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_reduce_rows(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, rows: usize, d: usize, reduction: &str, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let r = self::reduction(reduction)?;
    let mut call = Call::new("reduce_rows", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "x", x, product("reduce_rows", &[rows, d])?, None)?;
    let out = call.ops().reduce_rows(r, &x, rows, d);
    call.output(py, out, vec![rows], Scalar::F32)
}

/// Running sums of the `n` elements of `x`, inclusive or `exclusive`.
#[pyfunction]
#[pyo3(signature = (runtime, x, n, exclusive, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_prefix_sum(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, n: usize, exclusive: bool, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new("prefix_sum", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "x", x, n, None)?;
    let kind = if exclusive { ScanKind::Exclusive } else { ScanKind::Inclusive };
    let out = call.ops().prefix_sum(&x, n, kind);
    call.output(py, out, vec![n], call.elem)
}

/// Softmax of each row of the `rows × d` array `x`.
#[pyfunction]
#[pyo3(signature = (runtime, x, rows, d, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_softmax(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, rows: usize, d: usize, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new("softmax", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "x", x, product("softmax", &[rows, d])?, None)?;
    let out = call.ops().softmax(&x, rows, d);
    call.output(py, out, vec![rows, d], call.elem)
}

/// RMSNorm of each row of the `rows × d` array `x` with a `d`-element `weight`.
#[pyfunction]
#[pyo3(signature = (runtime, x, weight, rows, d, eps, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_rms_norm(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, weight: &Bound<'_, PyAny>, rows: usize, d: usize, eps: f32, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new("rms_norm", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "x", x, product("rms_norm", &[rows, d])?, None)?;
    let w = call.input(py, "weight", weight, d, None)?;
    let out = call.ops().rms_norm(&x, &w, rows, d, eps);
    call.output(py, out, vec![rows, d], call.elem)
}

/// LayerNorm of each row of the `rows × d` array `x` with `d`-element
/// `weight` and `bias`.
#[pyfunction]
#[pyo3(signature = (runtime, x, weight, bias, rows, d, eps, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_layer_norm(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, weight: &Bound<'_, PyAny>, bias: &Bound<'_, PyAny>, rows: usize, d: usize, eps: f32, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new("layer_norm", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "x", x, product("layer_norm", &[rows, d])?, None)?;
    let w = call.input(py, "weight", weight, d, None)?;
    let b = call.input(py, "bias", bias, d, None)?;
    let out = call.ops().layer_norm(&x, &w, &b, rows, d, eps);
    call.output(py, out, vec![rows, d], call.elem)
}

/// `w @ x` for the `m × k` matrix `w` and the f32 `k`-vector `x`: `m` f32 values.
#[pyfunction]
#[pyo3(signature = (runtime, w, x, m, k, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_gemv(py: Python<'_>, runtime: &Runtime, w: &Bound<'_, PyAny>, x: &Bound<'_, PyAny>, m: usize, k: usize, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new("gemv", runtime, elem, threads, stream, dlpack_stream)?;
    let w = call.input(py, "w", w, product("gemv", &[m, k])?, None)?;
    let x = call.input(py, "x", x, k, Some(Scalar::F32))?;
    let out = call.ops().gemv(&w, &x, m, k);
    call.output(py, out, vec![m], Scalar::F32)
}

/// `a @ b` for the row-major `m × k` and `k × n` matrices `a` and `b`:
/// `m × n` f32 values.
#[pyfunction]
#[pyo3(signature = (runtime, a, b, m, n, k, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_matmul(py: Python<'_>, runtime: &Runtime, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, m: usize, n: usize, k: usize, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new("matmul", runtime, elem, threads, stream, dlpack_stream)?;
    let a = call.input(py, "a", a, product("matmul", &[m, k])?, None)?;
    let b = call.input(py, "b", b, product("matmul", &[k, n])?, None)?;
    let out = call.ops().matmul(&a, &b, m, n, k, DType::F32);
    call.output(py, out, vec![m, n], Scalar::F32)
}

/// One decode step of attention for `q` `[heads, d]` and `k`, `v`
/// `[heads, s, d]`: `[heads, d]`, in three dispatches or one `fused` kernel.
#[pyfunction]
#[pyo3(signature = (runtime, q, k, v, heads, s, d, scale, fused, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_attention_decode(
    py: Python<'_>,
    runtime: &Runtime,
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    heads: usize,
    s: usize,
    d: usize,
    scale: f32,
    fused: bool,
    elem: &str,
    threads: Option<u32>,
    stream: Option<u64>,
    dlpack_stream: Option<i64>,
) -> PyResult<Array> {
    let mut call = Call::new("attention_decode", runtime, elem, threads, stream, dlpack_stream)?;
    let q = call.input(py, "q", q, product("attention_decode", &[heads, d])?, None)?;
    let cache = product("attention_decode", &[heads, s, d])?;
    let k = call.input(py, "k", k, cache, None)?;
    let v = call.input(py, "v", v, cache, None)?;
    let out = {
        let ops = call.ops();
        if fused { ops.attention_decode_fused(&q, &k, &v, heads, s, d, scale) } else { ops.attention_decode(&q, &k, &v, heads, s, d, scale) }
    };
    call.output(py, out, vec![heads, d], call.elem)
}

/// Tunes registry entry `name` at `shape` (empty: its default shape) on
/// `runtime`: the report as JSON, with the cache file it was recorded in
/// (`null` when `record` is false).
#[pyfunction]
#[pyo3(signature = (runtime, name, shape, warmup, repeats, record))]
pub fn op_tune(py: Python<'_>, runtime: &Runtime, name: &str, shape: Vec<usize>, warmup: usize, repeats: usize, record: bool) -> PyResult<String> {
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
pub fn op_qmatmul<'py>(
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
        "f32" => DType::F32,
        "f16" => DType::F16,
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
    let c = {
        let ops = Recorded::new(Ops::new(rt).with_options(Options { threads, ..Options::default() }).with_cache(runtime.ops_cache.clone()));
        match variant {
            "separate" => ops.qmatmul_tiled(&a, &weights, m, out),
            "fused" => ops.qmatmul_fused(&a, &weights, m, out),
            _ => ops.qmatmul(&a, &weights, m, out),
        }
    };
    settle(c.is_ok());
    let c = c.map_err(|e| ops_err(py, e))?;
    let mut bytes = c.read_bytes().map_err(|e| runtime_err(py, e))?;
    bytes.truncate(m * n * out.size_bytes() as usize);
    Ok(PyBytes::new(py, &bytes))
}
