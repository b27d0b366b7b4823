//! `enigma._enigma`: the native half of the `enigma` Python package.
//!
//! The Python front end (`enigma/_frontend/`) turns a decorated function's
//! AST into the IR's JSON form; this module parses and validates it
//! (`compile`), prints it (text, MSL, CUDA), and runs it on a
//! [`enigma_runtime::Runtime`] (`Runtime.dispatch`).
//! The front end takes result types from the IR's typing rules, exposed
//! here (`typing`: `binary_result_type`, `intrinsic_result_type`, …), and
//! keeps no copy of them.
//!
//! Data crosses the boundary without Python copies: arrays are bound in
//! Rust (`array::bind`) from `enigma.Array`s (device memory), from other
//! libraries' CUDA memory through DLPack or `__cuda_array_interface__` (no
//! copy), and from host memory through numpy's `__array_interface__` or
//! DLPack (copied once into the device's memory, and back into the caller's
//! array for parameters the kernel writes). Raw `bytes` (the stable ABI of
//! Python 3.9 has no buffer protocol) still serve bytes-like objects.
//! Outputs come back as `memoryview`s, of the simulator's own memory where
//! it is the host's (`output`): one host copy of an output at most.
//! Dispatches may go on a CUDA stream, queued without a wait. Textures are
//! `Texture` objects made from bytes on a runtime (`Runtime.texture`)
//! and bound to `texture2d` parameters; the Python side converts numpy
//! arrays of H×W(×C) channels.
//!
//! Errors become the package's exceptions, all subclasses of `EnigmaError`:
//! validation → `CompileError`, a device that is not there → `DeviceError`
//! (a `DispatchError`), sanitizer findings → `SanitizerError` (with
//! `.reports`, a list of dicts), anything else at dispatch → `DispatchError`.
//! Each carries the Rust message. Nothing here panics on user input: sizes
//! are checked and allocations are fallible.

use enigma_ir::{validate, Access, Kernel, KernelInfo, Literal, LiteralValue, ParamKind, Scalar, Type, ValidationError, ValidationOptions};
use enigma_runtime::{Arg, Buffer, Device, DispatchMode, Options, Pipeline, RuntimeError, SpecValues, TextureFormat};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// How often a waiting dispatch looks for signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

mod array;
mod dlpack;
mod ops;
mod output;
mod typing;

create_exception!(enigma, EnigmaError, PyException, "Base class of every error enigma raises.");
create_exception!(
    enigma,
    CompileError,
    EnigmaError,
    "A kernel cannot be compiled: unsupported Python, a type error, or an IR validation error. The message names the file and line."
);
create_exception!(
    enigma,
    DispatchError,
    EnigmaError,
    "A dispatch was rejected or failed: geometry, threadgroup limits, arguments, or a runtime error in the kernel."
);
create_exception!(
    enigma,
    SanitizerError,
    EnigmaError,
    "The sanitizer found problems; `.reports` lists them as dicts (kind, severity, kernel, variable, index, first, second, message, hint, count)."
);
create_exception!(
    enigma,
    DeviceError,
    DispatchError,
    "The requested device is not available in this build or on this machine (a DispatchError, so `except enigma.DispatchError` catches it)."
);

/// A validation error as Python shows it: at the source line where the
/// front end gave one (never an IR position then), else as Rust prints it.
fn validation_message(e: &ValidationError) -> String {
    match &e.location.source {
        Some(src) => format!("{src}: kernel `{}`: {}", e.kernel, e.kind),
        None => e.to_string(),
    }
}

/// A message from the Rust side with its advice spelled as a Python user
/// writes it: `threadgroup_barrier(mem_flags::mem_threadgroup)` becomes
/// `enigma.barrier(mem_flags="mem_threadgroup")`, `simdgroup_barrier(…)`
/// `enigma.simdgroup_barrier(…)`, and `--device sim` `device="cpu"`.
fn python_spelling(message: &str) -> String {
    let mut out = message.replace("--device sim", "device=\"cpu\"");
    for (msl, python) in [("threadgroup_barrier(", "enigma.barrier("), ("simdgroup_barrier(", "enigma.simdgroup_barrier(")] {
        let mut rest = out.as_str();
        let mut spelled = String::with_capacity(out.len());
        while let Some(at) = rest.find(msl) {
            let after = &rest[at + msl.len()..];
            let Some(close) = after.find(')').filter(|&c| after[..c].starts_with("mem_flags::")) else {
                spelled.push_str(&rest[..at + msl.len()]);
                rest = after;
                continue;
            };
            let flags = after[..close].replace("mem_flags::", "").replace(' ', "");
            spelled.push_str(&rest[..at]);
            spelled.push_str(&format!("{python}mem_flags=\"{flags}\")"));
            rest = &after[close + 1..];
        }
        spelled.push_str(rest);
        out = spelled;
    }
    out
}

/// Converts a runtime error into the matching Python exception.
fn runtime_err(py: Python<'_>, e: RuntimeError) -> PyErr {
    match e {
        RuntimeError::Validation(v) => CompileError::new_err(validation_message(&v)),
        RuntimeError::SpecConstant { .. } => CompileError::new_err(e.to_string()),
        RuntimeError::Unavailable { .. } => DeviceError::new_err(python_spelling(&e.to_string())),
        RuntimeError::Sanitizer { ref findings, .. } => {
            let err = SanitizerError::new_err(python_spelling(&e.to_string()));
            let reports = serde_json::to_string(findings)
                .map_err(|j| PyValueError::new_err(j.to_string()))
                .and_then(|s| py.import("json")?.call_method1("loads", (s,)).map(Bound::unbind));
            match reports {
                Ok(reports) => match err.value(py).setattr("reports", reports) {
                    Ok(()) => err,
                    Err(set) => set,
                },
                Err(j) => j,
            }
        }
        other => DispatchError::new_err(python_spelling(&other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::python_spelling;

    #[test]
    fn advice_is_spelled_in_python() {
        assert_eq!(
            python_spelling("add threadgroup_barrier(mem_flags::mem_threadgroup) between a and b; or simdgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup)"),
            "add enigma.barrier(mem_flags=\"mem_threadgroup\") between a and b; or enigma.simdgroup_barrier(mem_flags=\"mem_device|mem_threadgroup\")"
        );
        assert_eq!(python_spelling("use --device sim (or cuda)"), "use device=\"cpu\" (or cuda)");
        assert_eq!(python_spelling("a threadgroup_barrier( not followed by flags"), "a threadgroup_barrier( not followed by flags");
    }
}

/// A Python number as a literal of `ty`, range-checked.
fn literal_from_py(value: &Bound<'_, PyAny>, ty: Scalar, what: &str) -> PyResult<Literal> {
    let err = |msg: String| DispatchError::new_err(format!("{what}: {msg}"));
    let value = if ty == Scalar::Bool {
        if !value.is_instance_of::<PyBool>() {
            return Err(err(format!("expected a bool, got {}", value.get_type().name()?)));
        }
        LiteralValue::Bool(value.extract::<bool>()?)
    } else if ty.is_float() {
        if !(value.is_instance_of::<PyFloat>() || value.is_instance_of::<PyInt>()) {
            return Err(err(format!("expected a number for {ty}, got {}", value.get_type().name()?)));
        }
        // An int past f64's range (10**400) is out of range like any other.
        LiteralValue::Float(value.extract::<f64>().map_err(|_| err(format!("{} does not fit in {ty}", value.str().map(|s| s.to_string()).unwrap_or_default())))?)
    } else {
        if !value.is_instance_of::<PyInt>() {
            return Err(err(format!("expected an integer for {ty}, got {}", value.get_type().name()?)));
        }
        if let Ok(i) = value.extract::<i64>() {
            if ty.is_unsigned_int() {
                if i < 0 {
                    return Err(err(format!("{i} does not fit in {ty}")));
                }
                LiteralValue::UInt(i as u64)
            } else {
                LiteralValue::Int(i)
            }
        } else if let (true, Ok(u)) = (ty.is_unsigned_int(), value.extract::<u64>()) {
            LiteralValue::UInt(u)
        } else {
            return Err(err(format!("{} does not fit in {ty}", value.str()?)));
        }
    };
    let lit = Literal { ty, value };
    enigma_ir::validate::check_literal(&lit).map_err(|k| err(k.to_string()))?;
    Ok(lit)
}

static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(1);

/// A validated kernel with its specialisation values: what `enigma.compile` returns.
#[pyclass(module = "enigma._enigma", frozen)]
#[derive(Debug)]
struct CompiledKernel {
    kernel: Kernel,
    info: KernelInfo,
    spec: SpecValues,
    /// The MSL version asked for at compilation; `None`: the one the kernel
    /// needs (`msl::needed_version`).
    msl_version: Option<(u8, u8)>,
    /// Pipelines already made, by runtime id.
    pipelines: Mutex<Vec<(u64, Pipeline)>>,
}

fn type_name(ty: Type) -> String {
    ty.to_string()
}

#[pymethods]
impl CompiledKernel {
    #[getter]
    fn name(&self) -> &str {
        &self.kernel.name
    }

    /// The IR as JSON (the serde form every front end shares).
    #[getter]
    fn json(&self) -> PyResult<String> {
        serde_json::to_string(&self.kernel).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The IR in its text form (`enigma_ir::text::print`; it parses back).
    #[getter]
    fn ir(&self) -> String {
        enigma_ir::text::print(&self.kernel)
    }

    /// Metal Shading Language for the kernel (specialisation constants stay
    /// function constants, with their defaults), for the MSL version asked
    /// for at compilation or else the one the kernel needs.
    #[getter]
    fn msl(&self) -> PyResult<String> {
        let options = enigma_codegen::msl::Options::for_kernel(&self.info, self.msl_version);
        enigma_codegen::msl::write_string(&self.kernel, &self.info, &options).map_err(|e| CompileError::new_err(e.to_string()))
    }

    /// The MSL version `msl` is written for (`"3.2"`).
    #[getter]
    fn msl_version(&self) -> String {
        let (major, minor) = enigma_codegen::msl::Options::for_kernel(&self.info, self.msl_version).language_version;
        format!("{major}.{minor}")
    }

    /// CUDA C++ for the kernel, with this compilation's specialisation
    /// values, for any architecture (cooperative products on the scalar
    /// path; `Runtime.cuda_source` gives what a device compiles).
    #[getter]
    fn cuda(&self) -> PyResult<String> {
        self.cuda_source(false)
    }

    /// Bytes of threadgroup memory the kernel declares.
    #[getter]
    fn threadgroup_memory_bytes(&self) -> u64 {
        self.info.threadgroup_memory_bytes
    }

    /// The specialisation values in force: `{name: value}` for every constant.
    #[getter]
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (c, v) in self.kernel.spec_constants.iter().zip(self.spec.resolve(&self.kernel)) {
            match v.value {
                LiteralValue::Bool(b) => d.set_item(&c.name, b)?,
                LiteralValue::Int(i) => d.set_item(&c.name, i)?,
                LiteralValue::UInt(u) => d.set_item(&c.name, u)?,
                LiteralValue::Float(f) => d.set_item(&c.name, f)?,
            }
        }
        Ok(d)
    }

    /// One tuple per parameter: `(name, kind, type, scalar, width,
    /// element_bytes, access)` with kind `"buffer"` or `"value"` and access
    /// `"read"`, `"read_write"` or `None` (values).
    #[allow(clippy::type_complexity)]
    fn params(&self) -> Vec<(String, &'static str, String, &'static str, u8, u32, Option<&'static str>)> {
        self.kernel
            .params
            .iter()
            .map(|p| match p.kind {
                ParamKind::Buffer { elem, access } => (
                    p.name.clone(),
                    "buffer",
                    type_name(elem),
                    elem.elem().name(),
                    elem.width(),
                    elem.size_bytes(),
                    Some(match access {
                        Access::Read => "read",
                        Access::ReadWrite => "read_write",
                    }),
                ),
                ParamKind::Value { ty } => (p.name.clone(), "value", type_name(ty), ty.elem().name(), ty.width(), ty.size_bytes(), None),
                ParamKind::Texture { texel, access } => (
                    p.name.clone(),
                    "texture",
                    format!("texture2d<{texel}, {access}>"),
                    texel.name(),
                    4,
                    0,
                    Some(access.name()),
                ),
            })
            .collect()
    }
}

/// Parses the IR's JSON form, validates it with the default (Apple) limits,
/// and fixes specialisation values: `spec` maps constant names to numbers;
/// `msl_version` (`"3.2"`) is the MSL version `msl` is written for.
#[pyfunction]
#[pyo3(signature = (json, spec=None, msl_version=None))]
fn compile(json: &str, spec: Option<&Bound<'_, PyDict>>, msl_version: Option<&str>) -> PyResult<CompiledKernel> {
    let msl_version =
        msl_version.map(enigma_codegen::msl::parse_version).transpose().map_err(|e| CompileError::new_err(e.to_string()))?;
    let kernel: Kernel = enigma_ir::from_json(json)
        .map_err(|e| CompileError::new_err(format!("internal error: the front end produced IR that does not parse: {e}")))?;
    let info = validate(&kernel, &ValidationOptions::default()).map_err(|e| CompileError::new_err(validation_message(&e)))?;
    let mut values = SpecValues::new();
    if let Some(spec) = spec {
        for (name, value) in spec.iter() {
            let name: String = name.extract().map_err(|_| CompileError::new_err("specialisation names must be strings"))?;
            let Some(constant) = kernel.spec_constants.iter().find(|c| c.name == name) else {
                let known: Vec<&str> = kernel.spec_constants.iter().map(|c| c.name.as_str()).collect();
                return Err(CompileError::new_err(format!(
                    "kernel `{}` has no specialisation constant `{name}` (it declares: {})",
                    kernel.name,
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                )));
            };
            let what = format!("kernel `{}`, specialisation constant `{name}`", kernel.name);
            let lit = literal_from_py(&value, constant.ty, &what).map_err(|e| CompileError::new_err(e.to_string()))?;
            values = values.with(&name, lit);
        }
    }
    Ok(CompiledKernel { kernel, info, spec: values, msl_version, pipelines: Mutex::new(Vec::new()) })
}

/// The IR's JSON form of a kernel given in the IR's text form (what
/// `CompiledKernel.ir` prints), for `enigma.compile_ir`.
/// The IR's scalar types as the Rust side defines them, for the Python
/// package's type table: (IR name, size in bytes, kind, MSL name) with kind
/// `b` (bool), `i` (signed), `u` (unsigned) or `f` (float).
#[pyfunction]
fn scalar_types() -> Vec<(&'static str, u32, &'static str, &'static str)> {
    Scalar::ALL
        .into_iter()
        .map(|s| {
            let kind = match s {
                Scalar::Bool => "b",
                s if s.is_float() => "f",
                s if s.is_signed_int() => "i",
                _ => "u",
            };
            (s.name(), s.size_bytes(), kind, s.msl_name())
        })
        .collect()
}

#[pyfunction]
fn ir_text_to_json(text: &str) -> PyResult<String> {
    let kernel = enigma_ir::text::parse(text).map_err(|e| CompileError::new_err(format!("IR text: {e}")))?;
    Ok(enigma_ir::to_json(&kernel))
}

/// True when `name` can name a kernel, parameter, local or array in the IR.
#[pyfunction]
fn is_valid_identifier(name: &str) -> bool {
    enigma_ir::validate::is_valid_identifier(name) && enigma_ir::Builtin::from_name(name).is_none()
}

impl CompiledKernel {
    /// CUDA C++ for the kernel, cooperative products on `wgmma` where they qualify if `wgmma`.
    fn cuda_source(&self, wgmma: bool) -> PyResult<String> {
        let options = enigma_codegen::cuda::Options { spec_values: self.spec.resolve(&self.kernel), wgmma, ..Default::default() };
        enigma_codegen::cuda::write_string(&self.kernel, &self.info, &options)
            .map(|s| s.source)
            .map_err(|e| CompileError::new_err(e.to_string()))
    }
}

/// A device connection: `Runtime("auto" | "sim" | "cpu" | "metal" | "cuda")`,
/// with the kernel library's pipelines made on it.
#[pyclass(module = "enigma._enigma", frozen)]
#[derive(Debug)]
struct Runtime {
    rt: enigma_runtime::Runtime,
    id: u64,
    ops_cache: enigma_ops::PipelineCache,
}

fn geometry(v: Vec<u32>, what: &str) -> PyResult<[u32; 3]> {
    match v.as_slice() {
        [x] => Ok([*x, 1, 1]),
        [x, y] => Ok([*x, *y, 1]),
        [x, y, z] => Ok([*x, *y, *z]),
        _ => Err(PyValueError::new_err(format!("{what} must have 1 to 3 components, got {}", v.len()))),
    }
}

#[pymethods]
impl Runtime {
    #[new]
    fn new(py: Python<'_>, device: &str) -> PyResult<Runtime> {
        let dev: Device = device.parse().map_err(|e| runtime_err(py, e))?;
        let rt = enigma_runtime::Runtime::new(dev).map_err(|e| runtime_err(py, e))?;
        Ok(Runtime { rt, id: NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed), ops_cache: enigma_ops::PipelineCache::default() })
    }

    /// A zeroed `enigma.Array` of `shape` and element type `dtype` (`"f32"`, …).
    fn empty(&self, py: Python<'_>, shape: Vec<usize>, dtype: &str) -> PyResult<array::Array> {
        let scalar = array::scalar_named(dtype)?;
        let bytes = shape
            .iter()
            .try_fold(scalar.size_bytes() as usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| PyValueError::new_err(format!("shape {shape:?} is too large")))?;
        let buffer = self.rt.buffer_bytes(bytes).map_err(|e| runtime_err(py, e))?;
        Ok(array::Array::new(buffer, self.rt.device().kind, shape, scalar, None))
    }

    /// An `enigma.Array` holding a copy of host array `obj` (numpy, or
    /// anything with `__array_interface__` or host DLPack), of `dtype`
    /// (default: the array's own).
    #[pyo3(signature = (obj, dtype=None))]
    fn asarray(&self, py: Python<'_>, obj: &Bound<'_, PyAny>, dtype: Option<&str>) -> PyResult<array::Array> {
        let scalar = dtype.map(array::scalar_named).transpose()?;
        array::from_host(py, &self.rt, obj, scalar)
    }

    /// A `width`×`height` texture of `format` (`"rgba8unorm"`, …) holding
    /// `data`: its texels row by row, each the format's channels
    /// little-endian (the Python side lays numpy arrays out so).
    fn texture(&self, py: Python<'_>, data: &[u8], format: &str, width: u32, height: u32) -> PyResult<Texture> {
        let format = TextureFormat::from_name(format).ok_or_else(|| {
            let known: Vec<&str> = TextureFormat::ALL.iter().map(|f| f.name()).collect();
            PyValueError::new_err(format!("unknown texture format {format:?}; enigma has {}", known.join(", ")))
        })?;
        let tex = self.rt.texture_from_bytes(format, width, height, data).map_err(|e| runtime_err(py, e))?;
        Ok(Texture { tex, device: self.rt.device().kind.name() })
    }

    /// The CUDA C++ this runtime's device compiles `compiled` to: with
    /// cooperative products on `wgmma` where the device's cooperative
    /// lowering is `wgmma` (sm_90a). A `DispatchError` on other devices.
    fn cuda_source(&self, compiled: &CompiledKernel) -> PyResult<String> {
        let device = self.rt.device();
        if device.kind != enigma_runtime::DeviceKind::Cuda {
            return Err(DispatchError::new_err(format!(
                "kernel `{}`: the {} device does not compile CUDA (compiled.cuda is the source for any CUDA GPU)",
                compiled.kernel.name,
                device.kind.name()
            )));
        }
        compiled.cuda_source(device.wgmma())
    }

    /// Waits for every dispatch queued on the device.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let rt = &self.rt;
        py.detach(|| rt.synchronize().map_err(Box::new)).map_err(|e| runtime_err(py, *e))
    }

    /// What runs the kernels: `"sim"`, `"metal"` or `"cuda"`.
    #[getter]
    fn device(&self) -> &'static str {
        self.rt.device().kind.name()
    }

    /// The device's own name (`"enigma simulator (2 threads)"`, a GPU's name).
    #[getter]
    fn device_name(&self) -> String {
        self.rt.device().name.clone()
    }

    /// The device's description and limits as a JSON object.
    #[getter]
    fn info_json(&self) -> PyResult<String> {
        serde_json::to_string(self.rt.device()).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Runs `compiled`. `args` has one entry per kernel parameter: for a
    /// buffer, `bytes` (its initial contents), an `int` (that many zero
    /// bytes), an `enigma.Array`, or any array (see [`array::bind`]); for a
    /// by-value parameter, a Python number. `mode` is `"threads"` (`size`
    /// counts threads) or `"threadgroups"` (`size` counts threadgroups).
    /// `stream` queues the dispatch on that CUDA stream without waiting;
    /// `dlpack_stream` is what DLPack producers are told (see
    /// [`dlpack::from_dlpack`]). Returns the final contents of every
    /// read-write buffer that came from the host, as read-only
    /// `memoryview`s of bytes (the simulator's own memory, no copy: see
    /// [`output`]; `None` for the others, whose memory the caller holds),
    /// and the dispatch report as JSON.
    ///
    /// On the simulator, `max_loop_iterations` (per SIMD group) and
    /// `timeout` (seconds) stop a dispatch that does not end, and Ctrl-C
    /// interrupts it (`KeyboardInterrupt`): the dispatch runs on a worker
    /// thread while this one, without the GIL, looks for signals.
    #[pyo3(signature = (compiled, args, mode, size, threads, sanitize=false, stream=None, dlpack_stream=None, max_loop_iterations=None, timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn dispatch<'py>(
        &self,
        py: Python<'py>,
        compiled: &CompiledKernel,
        args: &Bound<'py, PyList>,
        mode: &str,
        size: Vec<u32>,
        threads: Vec<u32>,
        sanitize: bool,
        stream: Option<u64>,
        dlpack_stream: Option<i64>,
        max_loop_iterations: Option<u64>,
        timeout: Option<f64>,
    ) -> PyResult<(Vec<Option<Bound<'py, PyAny>>>, String)> {
        let timeout = timeout
            .map(|t| {
                Duration::try_from_secs_f64(t)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| DispatchError::new_err(format!("timeout must be a positive number of seconds, not {t}")))
            })
            .transpose()?;
        let kernel = &compiled.kernel;
        let rt = match stream {
            Some(s) => self.rt.on_stream(s),
            None => self.rt.clone(),
        };
        let mode = match mode {
            "threads" => DispatchMode::Threads,
            "threadgroups" => DispatchMode::Threadgroups,
            other => return Err(PyValueError::new_err(format!("mode must be \"threads\" or \"threadgroups\", not {other:?}"))),
        };
        let size = geometry(size, "grid")?;
        let threads = geometry(threads, "threads")?;
        if args.len() != kernel.params.len() {
            return Err(DispatchError::new_err(format!(
                "kernel `{}` takes {} argument(s), {} given",
                kernel.name,
                kernel.params.len(),
                args.len()
            )));
        }
        let pipeline = {
            let mut cache = compiled.pipelines.lock().map_err(|_| PyException::new_err("pipeline cache poisoned"))?;
            match cache.iter().find(|(id, _)| *id == self.id) {
                Some((_, p)) => p.clone(),
                None => {
                    let p = rt.pipeline_with(kernel, &compiled.spec).map_err(|e| runtime_err(py, e))?;
                    cache.push((self.id, p.clone()));
                    p
                }
            }
        };
        enum Slot {
            Buffer(Buffer),
            Bound(array::BoundArg),
            Value(Literal),
            Texture(enigma_runtime::Texture),
        }
        let mut slots = Vec::with_capacity(args.len());
        for (i, (param, arg)) in kernel.params.iter().zip(args.iter()).enumerate() {
            let what = format!("kernel `{}`, argument {i} (`{}`)", kernel.name, param.name);
            let slot = match param.kind {
                ParamKind::Buffer { elem, access } => {
                    if let Ok(bytes) = arg.cast::<PyBytes>() {
                        Slot::Buffer(rt.buffer_from_bytes(elem, bytes.as_bytes()).map_err(|e| runtime_err(py, e))?)
                    } else if arg.is_instance_of::<PyInt>() {
                        // A byte count: a zeroed buffer, with no host copy. A
                        // count past the address space is the same error as
                        // one the allocator refuses.
                        match arg.extract::<usize>() {
                            Ok(len) => Slot::Buffer(rt.buffer_zeroed_bytes(elem, len).map_err(|e| runtime_err(py, e))?),
                            Err(_) => {
                                let asked = arg.str()?.to_string();
                                return Err(DispatchError::new_err(format!(
                                    "{what}: cannot allocate a buffer of {asked} bytes: {}",
                                    if asked.starts_with('-') { "a size cannot be negative" } else { "more than this machine's address space" }
                                )));
                            }
                        }
                    } else {
                        let want = array::Want {
                            scalar: elem.elem(),
                            elem_bytes: elem.size_bytes() as usize,
                            writes: access == Access::ReadWrite,
                            staging: array::Staging::Typed(elem),
                            what: &format!("kernel `{}`, parameter `{}` ({} buffer)", kernel.name, param.name, elem),
                        };
                        Slot::Bound(array::bind(py, &rt, &arg, &want, dlpack_stream)?)
                    }
                }
                ParamKind::Value { ty } => {
                    if ty.is_vector() {
                        return Err(DispatchError::new_err(format!("{what}: by-value vector parameters are not supported")));
                    }
                    Slot::Value(literal_from_py(&arg, ty.elem(), &what)?)
                }
                ParamKind::Texture { texel, access } => match arg.cast::<Texture>() {
                    Ok(t) => Slot::Texture(t.get().tex.clone()),
                    Err(_) => {
                        return Err(DispatchError::new_err(format!(
                            "{what}: a texture2d<{texel}, {access}> takes an enigma texture (rt.texture(array, format=...)), not a {}",
                            arg.get_type().name()?
                        )))
                    }
                },
            };
            slots.push(slot);
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let options = Options { sanitize, max_loop_iterations, timeout, cancel: Some(cancel.clone()), ..Default::default() };
        let outcome = {
            let rt = &rt;
            let slots = &slots;
            let pipeline = &pipeline;
            let run = move || {
                let args: Vec<Arg<'_>> = slots
                    .iter()
                    .map(|s| match s {
                        Slot::Buffer(b) => Arg::Buffer(b),
                        Slot::Bound(b) => Arg::Buffer(&b.buffer),
                        Slot::Value(l) => Arg::Value(*l),
                        Slot::Texture(t) => Arg::Texture(t),
                    })
                    .collect();
                let report = rt.dispatch(pipeline, &args, mode, size, threads, &options).map_err(Box::new)?;
                // Host arrays bound by copy get the kernel's writes back.
                for s in slots {
                    if let Slot::Bound(b) = s {
                        b.write_back()?;
                    }
                }
                Ok::<_, Box<RuntimeError>>(report)
            };
            let simulated = rt.device().kind == enigma_runtime::DeviceKind::Simulator;
            py.detach(move || {
                if !simulated {
                    // A GPU dispatch cannot be stopped part-way (the options'
                    // budget, timeout and cancel flag are the simulator's),
                    // so it runs here, without a worker thread's latency.
                    return (run(), None);
                }
                std::thread::scope(|scope| {
                    let (done, finished) = mpsc::channel();
                    scope.spawn(move || {
                        // The receiver waits for this message; it cannot be gone.
                        let _ = done.send(run());
                    });
                    let mut interrupt = None;
                    loop {
                        match finished.recv_timeout(SIGNAL_POLL) {
                            Ok(result) => return (result, interrupt),
                            Err(mpsc::RecvTimeoutError::Timeout) if interrupt.is_none() => {
                                // Python runs its signal handlers here (on the
                                // main thread); a KeyboardInterrupt stops the dispatch.
                                if let Err(e) = Python::attach(|py| py.check_signals()) {
                                    cancel.store(true, Ordering::Relaxed);
                                    interrupt = Some(e);
                                }
                            }
                            Err(mpsc::RecvTimeoutError::Timeout) => {}
                            Err(mpsc::RecvTimeoutError::Disconnected) => {
                                let lost = RuntimeError::Backend { backend: "python", message: "the dispatch thread ended without a result".into() };
                                return (Err(Box::new(lost)), interrupt);
                            }
                        }
                    }
                })
            })
        };
        let report = match outcome {
            (_, Some(interrupt)) => return Err(interrupt),
            (result, None) => result.map_err(|e: Box<RuntimeError>| runtime_err(py, *e))?,
        };
        let mut out = Vec::with_capacity(slots.len());
        for (param, slot) in kernel.params.iter().zip(&slots) {
            let host = match slot {
                Slot::Buffer(b) => Some(b),
                Slot::Bound(b) if b.staged() => Some(&b.buffer),
                _ => None,
            };
            match (param.kind, host) {
                (ParamKind::Buffer { access: Access::ReadWrite, .. }, Some(b)) => {
                    out.push(Some(output::output_view(py, b, &kernel.name, &param.name)?));
                }
                _ => out.push(None),
            }
        }
        let report = serde_json::to_string(&report).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok((out, report))
    }
}

/// A 2D texture on one runtime's device: its texels in a pixel format.
/// Kernels write it in place; `read()` copies the texels back as bytes.
#[pyclass(module = "enigma._enigma", frozen)]
struct Texture {
    tex: enigma_runtime::Texture,
    device: &'static str,
}

#[pymethods]
impl Texture {
    /// The texels' bytes, row by row (as `Runtime.texture` takes them).
    fn read<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.tex.read_bytes().map_err(|e| runtime_err(py, e))?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[getter]
    fn format(&self) -> &'static str {
        self.tex.format().name()
    }
    #[getter]
    fn width(&self) -> u32 {
        self.tex.width()
    }
    #[getter]
    fn height(&self) -> u32 {
        self.tex.height()
    }
    /// Channels per texel (1 or 4).
    #[getter]
    fn channels(&self) -> usize {
        self.tex.format().channels()
    }
    /// The device the texture lives on (`"sim"`, …).
    #[getter]
    fn device(&self) -> &'static str {
        self.device
    }
}

/// `(name, channels, bytes per channel, kind)` of every texture format,
/// kind `"unorm"`, `"float"`, `"uint"` or `"sint"`.
#[pyfunction]
fn texture_formats() -> Vec<(&'static str, usize, usize, &'static str)> {
    TextureFormat::ALL
        .iter()
        .map(|f| {
            let kind = match (f.channel_kind(), f.channel_bytes()) {
                (enigma_runtime::texture::ChannelKind::Float, 1) => "unorm",
                (enigma_runtime::texture::ChannelKind::Float, _) => "float",
                (enigma_runtime::texture::ChannelKind::Uint, _) => "uint",
                (enigma_runtime::texture::ChannelKind::Sint, _) => "sint",
            };
            (f.name(), f.channels(), f.channel_bytes(), kind)
        })
        .collect()
}

#[pymodule]
fn _enigma(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("EnigmaError", py.get_type::<EnigmaError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("DispatchError", py.get_type::<DispatchError>())?;
    m.add("SanitizerError", py.get_type::<SanitizerError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add_class::<CompiledKernel>()?;
    m.add_class::<Runtime>()?;
    m.add_class::<array::Array>()?;
    m.add_class::<Texture>()?;
    m.add_class::<output::OutputMemory>()?;
    m.add_function(wrap_pyfunction!(texture_formats, m)?)?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(is_valid_identifier, m)?)?;
    m.add_function(wrap_pyfunction!(ir_text_to_json, m)?)?;
    m.add_function(wrap_pyfunction!(scalar_types, m)?)?;
    m.add("IR_JSON_SCHEMA", enigma_ir::JSON_SCHEMA)?;
    typing::register(m)?;
    m.add_function(wrap_pyfunction!(ops::op_scale, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_relu, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_silu, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_gelu, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_gelu_erf, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_sigmoid, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_exp, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_log, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_add, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_mul, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_binary_broadcast, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_reduce_rows, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_prefix_sum, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_reduce_axis, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_softmax_axis, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_scan_axis, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_matmul_batched, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_cross_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_pool2d, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_conv2d, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_rms_norm, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_gemv, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_attention_decode, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_attention_prefill, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_qmatmul, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_tune, m)?)?;
    m.add_function(wrap_pyfunction!(ops::op_write_into, m)?)?;
    m.add_function(wrap_pyfunction!(ops::ops_begin, m)?)?;
    m.add_function(wrap_pyfunction!(ops::ops_report, m)?)?;
    m.add_function(wrap_pyfunction!(ops::quant_quantize, m)?)?;
    m.add_function(wrap_pyfunction!(ops::quant_dequantize, m)?)?;
    m.add("QMATMUL_DECODE_ROWS", enigma_ops::library::qmatmul::DECODE_ROWS)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
