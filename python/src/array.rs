//! Device-resident arrays and argument binding.
//!
//! [`Array`] (`enigma.Array`) is a buffer on one runtime's device with a
//! shape and an element type: made empty or from host data by the runtime,
//! returned by the kernel library, passed to dispatches without copies, and
//! copied to the host only by `.numpy()` (or `np.asarray`). On CUDA it
//! exports itself through DLPack, so `torch.from_dlpack(a)` shares it.
//!
//! [`bind`] turns one Python argument into a buffer for a dispatch: an
//! `Array` of the runtime's device as it is; another library's CUDA memory
//! (DLPack, `__cuda_array_interface__`) wrapped without a copy; host memory
//! (numpy, DLPack from the CPU) copied in Rust into a device buffer and,
//! for a parameter the kernel writes, copied back into the caller's memory
//! after the dispatch ([`BoundArg::write_back`]). Type, contiguity, device and
//! read-only mismatches are `DispatchError`s naming the parameter.

use crate::dlpack::{self, Memory, View};
use crate::{runtime_err, DispatchError};
use enigma_ir::{Scalar, Type};
use enigma_runtime::{Buffer, DeviceKind, Runtime};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// An array in a runtime's device memory.
#[derive(Debug)]
#[pyclass(module = "enigma._enigma", name = "Array", frozen)]
pub struct Array {
    pub(crate) buffer: Buffer,
    pub(crate) device: DeviceKind,
    pub(crate) shape: Vec<usize>,
    pub(crate) scalar: Scalar,
    /// The stream the work writing it was queued on (CUDA), if any.
    pub(crate) stream: Option<u64>,
}

/// numpy's name for an element type (bfloat16 as its uint16 bits).
fn numpy_name(scalar: Scalar) -> &'static str {
    match scalar {
        Scalar::Bool => "bool",
        Scalar::I8 => "int8",
        Scalar::I16 => "int16",
        Scalar::I32 => "int32",
        Scalar::I64 => "int64",
        Scalar::U8 => "uint8",
        Scalar::U16 | Scalar::BF16 => "uint16",
        Scalar::U32 => "uint32",
        Scalar::U64 => "uint64",
        Scalar::F16 => "float16",
        Scalar::F32 => "float32",
    }
}

/// An element type from its enigma name (`"f32"`) or numpy's (`"float32"`).
pub fn scalar_named(name: &str) -> PyResult<Scalar> {
    let s = Scalar::ALL.into_iter().find(|s| s.name() == name || (numpy_name(*s) == name && *s != Scalar::BF16));
    s.ok_or_else(|| PyValueError::new_err(format!("unknown element type {name:?} (use f32, f16, bf16, i32, u32, … or numpy's names)")))
}

fn elements(shape: &[usize]) -> PyResult<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| PyValueError::new_err(format!("shape {shape:?} is too large")))
}

impl Array {
    pub fn new(buffer: Buffer, device: DeviceKind, shape: Vec<usize>, scalar: Scalar, stream: Option<u64>) -> Array {
        Array { buffer, device, shape, scalar, stream }
    }

    fn nbytes_exact(&self) -> usize {
        self.shape.iter().product::<usize>() * self.scalar.size_bytes() as usize
    }
}

#[pymethods]
impl Array {
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// The element type's enigma name: `"f32"`, `"f16"`, `"bf16"`, …
    #[getter]
    fn dtype(&self) -> &'static str {
        self.scalar.name()
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    #[getter]
    fn size(&self) -> usize {
        self.shape.iter().product()
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes_exact()
    }

    /// The device it lives on: `"sim"`, `"cuda"` or `"metal"`.
    #[getter]
    fn device(&self) -> &'static str {
        self.device.name()
    }

    fn __len__(&self) -> PyResult<usize> {
        self.shape.first().copied().ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("len() of a 0-d enigma.Array"))
    }

    fn __repr__(&self) -> String {
        format!("<enigma.Array shape={:?} dtype={} device={}>", self.shape, self.scalar.name(), self.device.name())
    }

    /// The same memory with another shape of as many elements.
    fn reshape(&self, shape: Vec<usize>) -> PyResult<Array> {
        if elements(&shape)? != self.size() {
            return Err(PyValueError::new_err(format!("cannot reshape an array of {} elements {:?} to {shape:?}", self.size(), self.shape)));
        }
        Ok(Array { buffer: self.buffer.clone(), device: self.device, shape, scalar: self.scalar, stream: self.stream })
    }

    /// A numpy copy on the host (bfloat16 as uint16 bits); on a GPU it
    /// waits for the work queued on the device first.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let np = py.import("numpy")?;
        let out = np.call_method1("empty", (PyTuple::new(py, &self.shape)?, numpy_name(self.scalar)))?;
        let view = dlpack::from_interface(&out, &out.getattr("__array_interface__")?, false, "numpy()")?;
        let len = self.nbytes_exact();
        if len > 0 {
            // SAFETY: `out` is a fresh C-contiguous numpy array of exactly `len` bytes, alive here.
            let host = unsafe { std::slice::from_raw_parts_mut(view.address as *mut u8, len) };
            let buffer = &self.buffer;
            py.detach(|| buffer.read_into(0, host).map_err(Box::new)).map_err(|e| runtime_err(py, *e))?;
        }
        Ok(out)
    }

    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(&self, py: Python<'py>, dtype: Option<Bound<'py, PyAny>>, copy: Option<bool>) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(PyValueError::new_err("an enigma.Array lives in device memory: reading it on the host is a copy (copy=False cannot be honoured)"));
        }
        let host = self.numpy(py)?;
        match dtype {
            Some(d) if !d.is_none() => host.call_method1("astype", (d,)),
            _ => Ok(host),
        }
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        match self.device {
            DeviceKind::Cuda => (2, 0),
            _ => (1, 0),
        }
    }

    /// A DLPack capsule sharing the memory (CUDA only). A consumer's
    /// `stream` other than the one the array was written on (or -1) makes
    /// it wait for the device first.
    #[pyo3(signature = (stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<Bound<'_, PyAny>>,
        dl_device: Option<Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (max_version, dl_device); // a legacy capsule serves every consumer version
        let Some(address) = self.buffer.device_address() else {
            return Err(PyBufferError::new_err(format!(
                "an enigma.Array on the {} device lives in simulated memory, which DLPack cannot share: use .numpy() for a host copy",
                self.device.name()
            )));
        };
        if copy == Some(true) {
            return Err(PyBufferError::new_err("enigma.Array exports its memory without a copy; copy=True is not supported"));
        }
        let consumer = stream.map(|s| if s == 1 { 0 } else { s });
        let same_stream = matches!((consumer, self.stream), (Some(-1), _) | (None, None)) || consumer.map(|c| c as u64) == self.stream;
        if !same_stream {
            let buffer = &self.buffer;
            // Reading nothing waits for the device, like every read.
            py.detach(|| buffer.read_into(0, &mut []).map_err(Box::new)).map_err(|e| runtime_err(py, *e))?;
        }
        dlpack::export(py, &self.buffer, address, &self.shape, self.scalar)
    }
}

/// How a host array is staged into device memory.
#[derive(Clone, Copy)]
pub enum Staging {
    /// A buffer of exactly the data, typed (kernel dispatches).
    Typed(Type),
    /// An untyped buffer of exactly the data (`enigma.Array`s, which the
    /// kernel library may bind as vectors when their size allows).
    Untyped,
    /// An untyped buffer padded to 16 bytes, so the kernel library may bind
    /// it as vectors.
    Padded,
}

/// What a parameter accepts.
pub struct Want<'a> {
    /// The element type; bfloat16 also takes 16-bit unsigned data (its bits).
    pub scalar: Scalar,
    /// The whole element's size (vectors: all lanes).
    pub elem_bytes: usize,
    /// The kernel writes it.
    pub writes: bool,
    pub staging: Staging,
    /// How messages name it: "kernel `k`, parameter `A` (float buffer)".
    pub what: &'a str,
}

/// One bound buffer argument.
pub struct BoundArg {
    pub buffer: Buffer,
    /// The bytes of data the caller's array holds (the buffer may be padded).
    pub nbytes: usize,
    /// Host memory (address, bytes) to copy the results back into.
    write_back: Option<(u64, usize)>,
    /// The foreign array whose memory is bound (kept alive for the dispatch).
    view: Option<View>,
}

impl BoundArg {
    /// True when the data was copied from the host (so results are too).
    pub fn staged(&self) -> bool {
        matches!(&self.view, Some(v) if v.memory == Memory::Host)
    }

    /// Copies a written buffer back into the caller's host memory.
    pub fn write_back(&self) -> Result<(), Box<enigma_runtime::RuntimeError>> {
        if let Some((address, len)) = self.write_back {
            // SAFETY: the host view this came from is alive (`self.view`),
            // writable and exactly `len` bytes.
            let host = unsafe { std::slice::from_raw_parts_mut(address as *mut u8, len) };
            self.buffer.read_into(0, host).map_err(Box::new)?;
        }
        Ok(())
    }
}

fn err(want: &Want<'_>, message: String) -> PyErr {
    DispatchError::new_err(format!("{}: {message}", want.what))
}

fn type_ok(got: Option<Scalar>, want: Scalar) -> bool {
    got == Some(want) || (want == Scalar::BF16 && got == Some(Scalar::U16))
}

/// Binds `obj` for parameter `want` on `rt` (see the module doc). `stream`
/// is passed to CUDA DLPack producers (see [`dlpack::from_dlpack`]).
pub fn bind(py: Python<'_>, rt: &Runtime, obj: &Bound<'_, PyAny>, want: &Want<'_>, stream: Option<i64>) -> PyResult<BoundArg> {
    let device = rt.device().kind;
    if let Ok(array) = obj.cast::<Array>() {
        let a = array.get();
        if a.device != device {
            return Err(err(want, format!("an enigma.Array on the {} device cannot run on the {} device", a.device.name(), device.name())));
        }
        if !type_ok(Some(a.scalar), want.scalar) {
            return Err(err(want, format!("expected {} data, got an enigma.Array of {}", want.scalar.name(), a.scalar.name())));
        }
        if a.nbytes_exact() % want.elem_bytes != 0 {
            return Err(err(want, format!("{} bytes is not a whole number of elements ({} bytes each)", a.nbytes_exact(), want.elem_bytes)));
        }
        return Ok(BoundArg { buffer: a.buffer.clone(), nbytes: a.nbytes_exact(), write_back: None, view: None });
    }
    let Some(view) = dlpack::view_of(obj, stream, want.what)? else {
        return Err(err(
            want,
            format!("a {} is not an array (expected an enigma.Array, or an object with __dlpack__, __cuda_array_interface__ or __array_interface__)", obj.get_type().name()?),
        ));
    };
    if !type_ok(view.scalar, want.scalar) {
        return Err(err(want, format!("expected {} data, got {}", want.scalar.name(), view.dtype_name)));
    }
    if !view.contiguous {
        return Err(err(want, format!("the array (shape {:?}) is not C-contiguous (a slice with a step, a transpose...); pass a contiguous copy", view.shape)));
    }
    if view.nbytes % want.elem_bytes != 0 {
        return Err(err(want, format!("{} bytes is not a whole number of elements ({} bytes each)", view.nbytes, want.elem_bytes)));
    }
    match view.memory {
        Memory::Host => {
            let data: &[u8] = if view.nbytes == 0 {
                &[]
            } else {
                // SAFETY: a contiguous host array of `nbytes` bytes, kept alive by `view`.
                unsafe { std::slice::from_raw_parts(view.address as *const u8, view.nbytes) }
            };
            let buffer = match want.staging {
                Staging::Typed(elem) => rt.buffer_from_bytes(elem, data).map_err(|e| runtime_err(py, e))?,
                Staging::Untyped | Staging::Padded => {
                    let len = if matches!(want.staging, Staging::Padded) { data.len().div_ceil(16).max(1) * 16 } else { data.len() };
                    let buffer = rt.buffer_bytes(len).map_err(|e| runtime_err(py, e))?;
                    buffer.write_bytes(0, data).map_err(|e| runtime_err(py, e))?;
                    buffer
                }
            };
            let write_back = (want.writes && !view.readonly && view.nbytes > 0).then_some((view.address, view.nbytes));
            Ok(BoundArg { buffer, nbytes: view.nbytes, write_back, view: Some(view) })
        }
        Memory::Cuda(id) => {
            if device != DeviceKind::Cuda {
                return Err(err(want, format!("the array is in CUDA memory, but this runtime runs on the {} device; use device=\"cuda\" or copy it to the host", device.name())));
            }
            if id != 0 {
                return Err(err(want, format!("the array is on GPU {id}; enigma runs on GPU 0")));
            }
            if want.writes && view.readonly {
                return Err(err(want, "the kernel writes this parameter, but the array is read-only".into()));
            }
            let elem = match want.staging {
                // Vector kernels need 16-byte alignment and whole vectors.
                Staging::Padded if view.address % 16 != 0 || view.nbytes % 16 != 0 => Some(Type::scalar(view.scalar.unwrap_or(want.scalar))),
                _ => None,
            };
            // SAFETY: CUDA memory of GPU 0 (the runtime's device, in the
            // primary context other libraries share), `nbytes` long, whose
            // owner `view` is kept alive for the dispatch; work queued on a
            // stream follows that stream's lifetime rules, as the caller's own
            // kernels on it do.
            let buffer = unsafe { rt.buffer_from_device_memory(view.address, view.nbytes, elem) }.map_err(|e| runtime_err(py, e))?;
            Ok(BoundArg { buffer, nbytes: view.nbytes, write_back: None, view: Some(view) })
        }
    }
}

/// Host data (numpy, or any array on the host) copied into a new `Array`.
pub fn from_host(py: Python<'_>, rt: &Runtime, obj: &Bound<'_, PyAny>, scalar: Option<Scalar>) -> PyResult<Array> {
    let what = "asarray";
    let Some(view) = dlpack::view_of(obj, None, what)? else {
        return Err(DispatchError::new_err(format!("asarray: a {} is not an array", obj.get_type().name()?)));
    };
    let scalar = match (scalar, view.scalar) {
        (Some(want), got) if type_ok(got, want) => want,
        (Some(want), _) => return Err(DispatchError::new_err(format!("asarray: dtype {} asked for, but the array holds {}", want.name(), view.dtype_name))),
        (None, Some(got)) => got,
        (None, None) => return Err(DispatchError::new_err(format!("asarray: enigma has no element type for {}", view.dtype_name))),
    };
    let want = Want { scalar, elem_bytes: scalar.size_bytes() as usize, writes: false, staging: Staging::Untyped, what };
    if view.memory != Memory::Host {
        return Err(DispatchError::new_err("asarray: the array is already in device memory; pass it to kernels and enigma.ops directly"));
    }
    let shape = view.shape.clone();
    drop(view);
    let bound = bind(py, rt, obj, &want, None)?;
    Ok(Array::new(bound.buffer, rt.device().kind, shape, scalar, None))
}
