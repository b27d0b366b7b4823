//! The kernel library (`enigma-ops`) for Python: one native function per
//! operation (`op_softmax_axis`, `op_rms_norm`, `op_reduce_axis`, …) runs it on a runtime
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
use enigma_ops::{AxisReduction, AxisScan, Conv2d, DType, Elementwise, GemmOptions, LossReduction, Ops, Pool, Options, QuantLayout, QuantizedMatrix, QuantizedWeights, ReduceOp, ScanKind};
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

/// The type of a matrix product's inputs and result (f32, f16 or bf16):
/// the result keeps the inputs' type, as torch's `matmul` does.
fn matrix_type(elem: Scalar) -> PyResult<DType> {
    DType::from_scalar(elem).ok_or_else(|| PyValueError::new_err(format!("matmul takes float32, float16 or bfloat16 matrices, not {elem}")))
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

/// GELU (erf form) of `x` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, x, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_gelu_erf(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    unary(py, "gelu", Elementwise::GeluErf, runtime, x, shape, 0.0, elem, threads, stream, dlpack_stream)
}

/// `1 / (1 + exp(-x))` for `x` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, x, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_sigmoid(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    unary(py, "sigmoid", Elementwise::Sigmoid, runtime, x, shape, 0.0, elem, threads, stream, dlpack_stream)
}

/// `exp(x)` for `x` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, x, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_exp(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    unary(py, "exp", Elementwise::Exp, runtime, x, shape, 0.0, elem, threads, stream, dlpack_stream)
}

/// `log(x)` for `x` of `shape`.
#[pyfunction]
#[pyo3(signature = (runtime, x, shape, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_log(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, shape: Vec<usize>, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    unary(py, "log", Elementwise::Log, runtime, x, shape, 0.0, elem, threads, stream, dlpack_stream)
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

/// `a + b` (`op` `"add"`), `a * b` (`"mul"`) or `a / b` (`"div"`) for `a` of `a_shape` and `b`
/// of `b_shape` broadcast as NumPy does: an array of the broadcast shape.
#[pyfunction]
#[pyo3(signature = (runtime, a, b, a_shape, b_shape, op, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_binary_broadcast(py: Python<'_>, runtime: &Runtime, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, a_shape: Vec<usize>, b_shape: Vec<usize>, op: &str, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let (name, kind) = match op {
        "add" => ("add", Elementwise::Add),
        "mul" => ("mul", Elementwise::Mul),
        "div" => ("div", Elementwise::Div),
        other => return Err(PyValueError::new_err(format!("a broadcast operation is add, mul or div, not {other:?}"))),
    };
    let mut call = Call::new(name, runtime, elem, threads, stream, dlpack_stream)?;
    let a = call.input(py, "a", a, product(name, &a_shape)?, None)?;
    let b = call.input(py, "b", b, product(name, &b_shape)?, None)?;
    let (out, shape) = match call.ops().elementwise_broadcast(kind, &a, &b, &a_shape, &b_shape) {
        Ok((y, shape)) => (Ok(y), shape),
        Err(e) => (Err(e), vec![]),
    };
    call.output(py, out, shape, call.elem)
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

// ----- Operations over one axis of `[outer, axis, inner]` (`dim=`) -----

/// The reduction over an axis named `name`, or `None` for the mean.
fn axis_reduction(name: &str) -> PyResult<Option<AxisReduction>> {
    match name {
        "sum" => Ok(Some(AxisReduction::Value(ReduceOp::Sum))),
        "max" => Ok(Some(AxisReduction::Value(ReduceOp::Max))),
        "min" => Ok(Some(AxisReduction::Value(ReduceOp::Min))),
        "argmax" => Ok(Some(AxisReduction::ArgMax)),
        "argmin" => Ok(Some(AxisReduction::ArgMin)),
        "mean" => Ok(None),
        other => Err(PyValueError::new_err(format!("a reduction over an axis is sum, mean, max, min, argmax or argmin, not {other:?}"))),
    }
}

/// The `reduction` (`sum`, `mean`, `max`, `min`: f32; `argmax`, `argmin`:
/// i32 indices) over the middle axis of `x` seen as `[outer, axis, inner]`:
/// an array of `outer · inner` elements.
#[pyfunction]
#[pyo3(signature = (runtime, x, outer, axis, inner, reduction, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_reduce_axis(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, outer: usize, axis: usize, inner: usize, reduction: &str, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let r = axis_reduction(reduction)?;
    let mut call = Call::new("reduce_axis", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "x", x, product("reduce_axis", &[outer, axis, inner])?, None)?;
    let (out, out_elem) = {
        let ops = call.ops();
        match r {
            Some(r) => (ops.reduce_axis(r, &x, outer, axis, inner), r.output()),
            None => (ops.mean_axis(&x, outer, axis, inner), Scalar::F32),
        }
    };
    call.output(py, out, vec![outer * inner], out_elem)
}

/// Softmax (log-softmax when `log`) over the middle axis of `x` seen as
/// `[outer, axis, inner]`: an array of `x`'s size and type.
#[pyfunction]
#[pyo3(signature = (runtime, x, outer, axis, inner, log, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_softmax_axis(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, outer: usize, axis: usize, inner: usize, log: bool, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let op = if log { "log_softmax" } else { "softmax" };
    let mut call = Call::new(op, runtime, elem, threads, stream, dlpack_stream)?;
    let n = product(op, &[outer, axis, inner])?;
    let x = call.input(py, "x", x, n, None)?;
    let out = call.ops().softmax_axis(&x, outer, axis, inner, log);
    call.output(py, out, vec![n], call.elem)
}

/// The running sum (`op` `"sum"`) or product (`"prod"`) over the middle
/// axis of `x` seen as `[outer, axis, inner]`: an array of `x`'s size and type.
#[pyfunction]
#[pyo3(signature = (runtime, x, outer, axis, inner, op, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_scan_axis(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, outer: usize, axis: usize, inner: usize, op: &str, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let (name, scan) = match op {
        "sum" => ("cumsum", AxisScan::Sum),
        "prod" => ("cumprod", AxisScan::Product),
        other => return Err(PyValueError::new_err(format!("a running operation is sum or prod, not {other:?}"))),
    };
    let mut call = Call::new(name, runtime, elem, threads, stream, dlpack_stream)?;
    let n = product(name, &[outer, axis, inner])?;
    let x = call.input(py, "x", x, n, None)?;
    let out = call.ops().scan_axis(scan, &x, outer, axis, inner);
    call.output(py, out, vec![n], call.elem)
}

/// `a[i] @ b[i]` for `batch` consecutive row-major `m × k` and `k × n`
/// matrices (with `shared_a`, one `m × k` matrix `a` for every `b[i]`):
/// `batch · m · n` values of the inputs' type (accumulated in f32, as
/// torch's `bmm`), one dispatch.
#[pyfunction]
#[pyo3(signature = (runtime, a, b, batch, m, n, k, elem, shared_a=false, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_matmul_batched(py: Python<'_>, runtime: &Runtime, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, batch: usize, m: usize, n: usize, k: usize, elem: &str, shared_a: bool, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new("matmul", runtime, elem, threads, stream, dlpack_stream)?;
    let a_dims: &[usize] = if shared_a { &[m, k] } else { &[batch, m, k] };
    let a = call.input(py, "a", a, product("matmul", a_dims)?, None)?;
    let b = call.input(py, "b", b, product("matmul", &[batch, k, n])?, None)?;
    let out = if shared_a { call.ops().matmul_shared_a(&a, &b, batch, m, n, k, matrix_type(call.elem)?) } else { call.ops().matmul_batched(&a, &b, batch, m, n, k, matrix_type(call.elem)?) };
    call.output(py, out, vec![batch, m, n], call.elem)
}

// ----- `out=`: a result written into the caller's array -----------------

/// Writes `result` (an operation's result, on `runtime`'s device) into
/// `out`, the caller's array of the same element type and size: an
/// `enigma.Array` or CUDA tensor by one device copy (`copy_{elem}`) on the
/// call's stream, host memory (numpy, CPU tensors) by that copy into a
/// staging buffer and back. Shape and kind are checked in `enigma/ops.py`;
/// here the element type, device, contiguity, writability and byte count
/// are. The call's report (`last_report`) stays the operation's.
#[pyfunction]
#[pyo3(signature = (runtime, result, out, op, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_write_into(py: Python<'_>, runtime: &Runtime, result: &Bound<'_, Array>, out: &Bound<'_, PyAny>, op: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<()> {
    let result = result.get();
    let rt = match stream {
        Some(s) => runtime.rt.on_stream(s),
        None => runtime.rt.clone(),
    };
    let scalar = result.scalar;
    let elements = product(op, &result.shape)?;
    let what = format!("{op}: `out`");
    let want = Want { scalar, elem_bytes: scalar.size_bytes() as usize, writes: true, staging: Staging::Untyped, what: &what };
    let bound = array::bind(py, &rt, out, &want, dlpack_stream)?;
    let need = elements * scalar.size_bytes() as usize;
    if bound.nbytes != need {
        return Err(PyValueError::new_err(format!("{op}: `out` holds {} bytes; the result is {elements} {scalar} elements ({need} bytes)", bound.nbytes)));
    }
    let options = Options { threads, sanitize: SANITIZE.with(Cell::get), ..Options::default() };
    let ops = Ops::new(&rt).with_options(options).with_cache(runtime.ops_cache.clone());
    ops.copy_into(scalar, &result.buffer, &bound.buffer, elements).map_err(|e| ops_err(py, e))?;
    bound.write_back().map_err(|e| runtime_err(py, *e))
}

// ----- end of `out=` -------------------------------------------------------

/// Cross-entropy of logits `x` seen as `[outer, classes, inner]` against
/// `outer · inner` i32 `target` classes: `reduction` `"none"` (`outer ·
/// inner` f32 losses), `"sum"` or `"mean"` (one f32).
#[pyfunction]
#[pyo3(signature = (runtime, x, target, outer, classes, inner, ignore_index, reduction, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_cross_entropy(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, target: &Bound<'_, PyAny>, outer: usize, classes: usize, inner: usize, ignore_index: i32, reduction: &str, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let r = match reduction {
        "none" => None,
        "sum" => Some(LossReduction::Sum),
        "mean" => Some(LossReduction::Mean),
        other => return Err(PyValueError::new_err(format!("cross_entropy's reduction is 'none', 'sum' or 'mean', not {other:?}"))),
    };
    let mut call = Call::new("cross_entropy", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "input", x, product("cross_entropy", &[outer, classes, inner])?, None)?;
    let t = call.input(py, "target", target, product("cross_entropy", &[outer, inner])?, Some(Scalar::I32))?;
    let out = call.ops().cross_entropy(&x, &t, outer, classes, inner, ignore_index, r);
    let shape = if r.is_none() { vec![outer * inner] } else { vec![1] };
    call.output(py, out, shape, Scalar::F32)
}

/// 2-D pooling (`kind` `"max"`, `"avg"`, or `"avg_valid"`: the mean over
/// the window's elements inside the plane) of `planes` NCHW planes of
/// `size`: an array `[planes, oh, ow]` of `x`'s type.
#[pyfunction]
#[pyo3(signature = (runtime, x, planes, size, kernel, stride, padding, kind, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_pool2d(py: Python<'_>, runtime: &Runtime, x: &Bound<'_, PyAny>, planes: usize, size: [usize; 2], kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2], kind: &str, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let pool = match kind {
        "max" => Pool::Max,
        "avg" => Pool::Avg { count_pad: true },
        "avg_valid" => Pool::Avg { count_pad: false },
        other => return Err(PyValueError::new_err(format!("a pooling is max, avg or avg_valid, not {other:?}"))),
    };
    let mut call = Call::new(pool.name(), runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "x", x, product(pool.name(), &[planes, size[0], size[1]])?, None)?;
    let (out, shape) = match call.ops().pool2d(pool, &x, planes, size, kernel, stride, padding) {
        Ok((y, [oh, ow])) => (Ok(y), vec![planes, oh, ow]),
        Err(e) => (Err(e), vec![]),
    };
    call.output(py, out, shape, call.elem)
}

/// `conv2d(x, w) + bias` for NCHW `x` of `[batch, in_channels, size…]`,
/// OIHW `w` of `out_channels` and an optional `bias`: an array `[batch,
/// out_channels, oh, ow]` of `x`'s type.
#[pyfunction]
#[pyo3(signature = (runtime, x, w, bias, batch, in_channels, size, out_channels, kernel, stride, padding, dilation, groups, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_conv2d(
    py: Python<'_>,
    runtime: &Runtime,
    x: &Bound<'_, PyAny>,
    w: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    batch: usize,
    in_channels: usize,
    size: [usize; 2],
    out_channels: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
    elem: &str,
    threads: Option<u32>,
    stream: Option<u64>,
    dlpack_stream: Option<i64>,
) -> PyResult<Array> {
    let shape = Conv2d { batch, in_channels, size, out_channels, kernel, stride, padding, dilation, groups };
    let mut call = Call::new("conv2d", runtime, elem, threads, stream, dlpack_stream)?;
    let x = call.input(py, "input", x, product("conv2d", &[batch, in_channels, size[0], size[1]])?, None)?;
    let per_group = in_channels.checked_div(groups).unwrap_or(0);
    let w = call.input(py, "weight", w, product("conv2d", &[out_channels, per_group, kernel[0], kernel[1]])?, None)?;
    let b = match bias {
        Some(b) => Some(call.input(py, "bias", b, out_channels, None)?),
        None => None,
    };
    let (out, dims) = match call.ops().conv2d(&x, &w, b.as_ref(), &shape) {
        Ok((y, [oh, ow])) => (Ok(y), vec![batch, out_channels, oh, ow]),
        Err(e) => (Err(e), vec![]),
    };
    call.output(py, out, dims, call.elem)
}

// ----- end of the operations over one axis -----

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
/// `m × n` values of their type (accumulated in f32, as torch's `matmul`).
#[pyfunction]
#[pyo3(signature = (runtime, a, b, m, n, k, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_matmul(py: Python<'_>, runtime: &Runtime, a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>, m: usize, n: usize, k: usize, elem: &str, threads: Option<u32>, stream: Option<u64>, dlpack_stream: Option<i64>) -> PyResult<Array> {
    let mut call = Call::new("matmul", runtime, elem, threads, stream, dlpack_stream)?;
    let a = call.input(py, "a", a, product("matmul", &[m, k])?, None)?;
    let b = call.input(py, "b", b, product("matmul", &[k, n])?, None)?;
    let out = call.ops().matmul(&a, &b, m, n, k, matrix_type(call.elem)?);
    call.output(py, out, vec![m, n], call.elem)
}

/// One decode step of attention for `q` `[batch, q_heads, d]` and `k`, `v`
/// `[batch, kv_heads, s, d]` (`q_heads` a multiple of `kv_heads`):
/// `[batch, q_heads, d]`, in three dispatches (one K/V head per query head,
/// whole sequences, no log-sum-exp) or one `fused` kernel; `seq_lens`
/// (u32 `[batch]`) gives each sequence's key count, and `return_lse` also
/// returns the f32 log-sum-exp of each row (`[batch, q_heads]`).
#[pyfunction]
#[pyo3(signature = (runtime, q, k, v, batch, q_heads, kv_heads, s, d, scale, fused, elem, seq_lens=None, return_lse=false, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_attention_decode(
    py: Python<'_>,
    runtime: &Runtime,
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    s: usize,
    d: usize,
    scale: f32,
    fused: bool,
    elem: &str,
    seq_lens: Option<&Bound<'_, PyAny>>,
    return_lse: bool,
    threads: Option<u32>,
    stream: Option<u64>,
    dlpack_stream: Option<i64>,
) -> PyResult<(Array, Option<Array>)> {
    const OP: &str = "attention_decode";
    let mut call = Call::new(OP, runtime, elem, threads, stream, dlpack_stream)?;
    let q = call.input(py, "q", q, product(OP, &[batch, q_heads, d])?, None)?;
    let cache = product(OP, &[batch, kv_heads, s, d])?;
    let k = call.input(py, "k", k, cache, None)?;
    let v = call.input(py, "v", v, cache, None)?;
    let lens = seq_lens.map(|l| call.input(py, "seq_lens", l, batch, Some(Scalar::U32))).transpose()?;
    let shape = enigma_ops::decode_shape(batch, q_heads, kv_heads, s, d).map_err(|e| ops_err(py, e))?;
    let out_shape = vec![batch, q_heads, d];
    if !fused {
        let out = call.ops().attention_decode(&q, &k, &v, batch * q_heads, s, d, scale);
        return Ok((call.output(py, out, out_shape, call.elem)?, None));
    }
    let decoded = call.ops().attention_decode_batch(&q, &k, &v, &shape, lens.as_ref(), scale, return_lse);
    settle(decoded.is_ok());
    let decoded = decoded.map_err(|e| ops_err(py, e))?;
    let out = call.output(py, Ok(decoded.out), out_shape, call.elem)?;
    let lse = decoded.lse.map(|l| call.output(py, Ok(l), vec![batch, q_heads], Scalar::F32)).transpose()?;
    Ok((out, lse))
}

/// Attention over whole sequences for `q` `[b, h, sq, d]` and `k`, `v`
/// `[b, hkv, skv, d]` (`shape` is `(b, h, hkv, sq, skv, d)`), with `mask`
/// `"none"`, `"top_left"` or `"bottom_right"`: the `[b, h, sq, d]` output,
/// and with `lse` also the `[b, h, sq]` f32 log-sum-exp of each row.
#[pyfunction]
#[pyo3(signature = (runtime, q, k, v, shape, mask, scale, lse, elem, threads=None, stream=None, dlpack_stream=None))]
#[allow(clippy::too_many_arguments)]
pub fn op_attention_prefill(
    py: Python<'_>,
    runtime: &Runtime,
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    shape: (usize, usize, usize, usize, usize, usize),
    mask: &str,
    scale: Option<f32>,
    lse: bool,
    elem: &str,
    threads: Option<u32>,
    stream: Option<u64>,
    dlpack_stream: Option<i64>,
) -> PyResult<(Array, Option<Array>)> {
    let op = "scaled_dot_product_attention";
    let (batch, heads, kv_heads, s_q, s_kv, d) = shape;
    let mask = match mask {
        "none" => enigma_ops::Mask::None,
        "top_left" => enigma_ops::Mask::TopLeft,
        "bottom_right" => enigma_ops::Mask::BottomRight,
        other => return Err(PyValueError::new_err(format!("{op}: mask must be none, top_left or bottom_right, not {other:?}"))),
    };
    let shape = enigma_ops::PrefillShape { batch, heads, kv_heads, s_q, s_kv, d };
    let mut call = Call::new(op, runtime, elem, threads, stream, dlpack_stream)?;
    let q = call.input(py, "q", q, product(op, &[batch, heads, s_q, d])?, None)?;
    let cache = product(op, &[batch, kv_heads, s_kv, d])?;
    let k = call.input(py, "k", k, cache, None)?;
    let v = call.input(py, "v", v, cache, None)?;
    let out_shape = vec![batch, heads, s_q, d];
    if !lse {
        let out = call.ops().attention_prefill(&q, &k, &v, shape, mask, scale);
        return Ok((call.output(py, out, out_shape, call.elem)?, None));
    }
    let result = call.ops().attention_prefill_lse(&q, &k, &v, shape, mask, scale);
    settle(result.is_ok());
    let (out, lse) = result.map_err(|e| ops_err(py, e))?;
    Ok((call.output(py, Ok(out), out_shape, call.elem)?, Some(call.output(py, Ok(lse), vec![batch, heads, s_q], Scalar::F32)?)))
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
fn quantized_matrix(format: enigma_ops::quant::Format, layout: QuantLayout, k: usize, n: usize, group: usize, packed: &[u8], scales: &[u8], biases: &[u8]) -> PyResult<QuantizedMatrix> {
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
    let format = enigma_ops::quant::Format::parse(format).map_err(quant_err)?;
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
    let format = enigma_ops::quant::Format::parse(format).map_err(quant_err)?;
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
    let format = enigma_ops::quant::Format::parse(format).map_err(quant_err)?;
    if !matches!(variant, "auto" | "separate" | "fused" | "cooperative") {
        return Err(PyValueError::new_err(format!("qmatmul's variant is 'auto', 'separate', 'fused' or 'cooperative', not {variant:?}")));
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
        // The cooperative kernel is `Ops::qmatmul`'s when asked for.
        let gemm = GemmOptions { cooperative: (variant == "cooperative").then_some(true), ..GemmOptions::default() };
        let ops = Recorded::new(Ops::new(rt).with_options(Options { threads, gemm, ..Options::default() }).with_cache(runtime.ops_cache.clone()));
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
