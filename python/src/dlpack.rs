//! Other libraries' arrays, seen without a copy: DLPack capsules
//! (`__dlpack__`, legacy and versioned), `__cuda_array_interface__` and
//! numpy's `__array_interface__` become a [`View`] (address, byte length,
//! element type, shape, contiguity, host or CUDA memory); and enigma's own
//! device buffers leave as DLPack capsules ([`export`]), so
//! `torch.from_dlpack(array)` shares them.
//!
//! The structs follow `dlpack.h` (v1.0) field for field. A view keeps the
//! object it came from (the capsule, or the array) alive; a capsule is never
//! renamed to `used_dltensor`, so its producer's destructor releases the
//! tensor when the view is dropped, as the producer would for an unused one.

use enigma_ir::Scalar;
use enigma_runtime::Buffer;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::ffi::{c_void, CStr};

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

const FLAG_READ_ONLY: u64 = 1;
const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DL_CUDA_HOST: i32 = 3;
const DL_CUDA_MANAGED: i32 = 13;
const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";

/// Where a view's memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// Host memory (numpy; CUDA pinned host memory too).
    Host,
    /// CUDA device (or managed) memory on GPU `n`.
    Cuda(i32),
}

/// Another library's array, without a copy.
pub struct View {
    /// The first element's address (host or device).
    pub address: u64,
    pub nbytes: usize,
    pub memory: Memory,
    /// The element type, where enigma has one for it.
    pub scalar: Option<Scalar>,
    /// The element type as the producer names it, for messages.
    pub dtype_name: String,
    pub shape: Vec<usize>,
    /// C-contiguous (row-major, no gaps).
    pub contiguous: bool,
    pub readonly: bool,
    /// The capsule or array the memory belongs to, kept alive with the view.
    _owner: Py<PyAny>,
}

fn scalar_from_dlpack(dtype: DLDataType) -> Option<Scalar> {
    if dtype.lanes != 1 {
        return None;
    }
    Some(match (dtype.code, dtype.bits) {
        (0, 8) => Scalar::I8,
        (0, 16) => Scalar::I16,
        (0, 32) => Scalar::I32,
        (0, 64) => Scalar::I64,
        (1, 8) => Scalar::U8,
        (1, 16) => Scalar::U16,
        (1, 32) => Scalar::U32,
        (1, 64) => Scalar::U64,
        (2, 16) => Scalar::F16,
        (2, 32) => Scalar::F32,
        (4, 16) => Scalar::BF16,
        _ => return None,
    })
}

fn dlpack_name(dtype: DLDataType) -> String {
    let kind = match dtype.code {
        0 => "int",
        1 => "uint",
        2 => "float",
        4 => "bfloat",
        5 => "complex",
        6 => "bool",
        _ => "type code ",
    };
    if dtype.lanes == 1 {
        format!("{kind}{}", dtype.bits)
    } else {
        format!("{kind}{}x{}", dtype.bits, dtype.lanes)
    }
}

/// A typestr of the array interfaces (`<f4`, `|u1`, …): its scalar, if any.
fn scalar_from_typestr(typestr: &str) -> Option<Scalar> {
    let (order, rest) = typestr.split_at_checked(1)?;
    if order == ">" {
        return None; // big-endian
    }
    Some(match rest {
        "i1" => Scalar::I8,
        "i2" => Scalar::I16,
        "i4" => Scalar::I32,
        "i8" => Scalar::I64,
        "u1" => Scalar::U8,
        "u2" => Scalar::U16,
        "u4" => Scalar::U32,
        "u8" => Scalar::U64,
        "f2" => Scalar::F16,
        "f4" => Scalar::F32,
        _ => return None,
    })
}

fn typestr_name(typestr: &str) -> String {
    let big = typestr.starts_with('>');
    let name = match typestr.get(1..) {
        Some("i1") => "int8",
        Some("i2") => "int16",
        Some("i4") => "int32",
        Some("i8") => "int64",
        Some("u1") => "uint8",
        Some("u2") => "uint16",
        Some("u4") => "uint32",
        Some("u8") => "uint64",
        Some("f2") => "float16",
        Some("f4") => "float32",
        Some("f8") => "float64",
        Some("b1") => "bool",
        _ => return format!("typestr {typestr:?}"),
    };
    if big {
        format!("big-endian {name}")
    } else {
        name.to_string()
    }
}

/// Row-major contiguity of `shape` with `strides` in units of `unit` bytes
/// (`None`: contiguous by definition).
fn is_contiguous(shape: &[usize], strides: Option<&[i64]>, item: i64, unit: i64) -> bool {
    let Some(strides) = strides else { return true };
    if shape.contains(&0) {
        return true;
    }
    let mut expected = item;
    for (&dim, &stride) in shape.iter().zip(strides).rev() {
        if dim != 1 && stride * unit != expected {
            return false;
        }
        expected *= dim as i64;
    }
    true
}

fn byte_len(shape: &[usize], item: usize, what: &str) -> PyResult<usize> {
    shape
        .iter()
        .try_fold(item, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| PyBufferError::new_err(format!("{what}: shape {shape:?} does not fit in memory")))
}

/// The DLPack device `(type, id)` of `obj`, from `__dlpack_device__`.
pub fn dlpack_device(obj: &Bound<'_, PyAny>) -> PyResult<Option<(i32, i32)>> {
    match obj.getattr(pyo3::intern!(obj.py(), "__dlpack_device__")) {
        Ok(f) => Ok(Some(f.call0()?.extract()?)),
        Err(_) => Ok(None),
    }
}

/// Whether a DLPack device type is CUDA memory a kernel can use.
pub fn is_cuda_device(device_type: i32) -> bool {
    device_type == DL_CUDA || device_type == DL_CUDA_MANAGED
}

/// `obj` through DLPack. `stream` is what the `__dlpack__` protocol passes
/// to CUDA producers (the stream the consumer will use; -1 for none, 1 for
/// the legacy default stream); host producers are called without one.
pub fn from_dlpack(obj: &Bound<'_, PyAny>, stream: Option<i64>, what: &str) -> PyResult<View> {
    let py = obj.py();
    let device = dlpack_device(obj)?;
    let kwargs = PyDict::new(py);
    if let (Some((dt, _)), Some(s)) = (device, stream) {
        if is_cuda_device(dt) {
            kwargs.set_item("stream", s)?;
        }
    }
    let method = obj.getattr(pyo3::intern!(py, "__dlpack__"))?;
    let versioned = PyDict::new(py);
    for (k, v) in kwargs.iter() {
        versioned.set_item(k, v)?;
    }
    versioned.set_item("max_version", PyTuple::new(py, [1u32, 0])?)?;
    // Producers before DLPack 1.0 have no max_version: ask again without it.
    let capsule = match method.call((), Some(&versioned)) {
        Ok(c) => c,
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) => method.call((), Some(&kwargs))?,
        Err(e) => return Err(e),
    };
    // SAFETY: the capsule's pointer is a DLManagedTensor(Versioned) by the
    // protocol, valid while the capsule lives (we keep it in the view).
    unsafe {
        let cap = capsule.as_ptr();
        let (tensor, flags) = if ffi::PyCapsule_IsValid(cap, VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, VERSIONED.as_ptr()) as *const DLManagedTensorVersioned;
            if (*m).version.major != 1 {
                return Err(PyBufferError::new_err(format!("{what}: DLPack version {}.{} is not supported (1.x is)", (*m).version.major, (*m).version.minor)));
            }
            (&(*m).dl_tensor as *const DLTensor, (*m).flags)
        } else if ffi::PyCapsule_IsValid(cap, LEGACY.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, LEGACY.as_ptr()) as *const DLManagedTensor;
            (&(*m).dl_tensor as *const DLTensor, 0)
        } else {
            return Err(PyBufferError::new_err(format!("{what}: __dlpack__ returned something that is not an unused DLPack capsule")));
        };
        let t = &*tensor;
        let ndim = usize::try_from(t.ndim).map_err(|_| PyBufferError::new_err(format!("{what}: DLPack tensor with ndim {}", t.ndim)))?;
        if ndim > 0 && t.shape.is_null() {
            return Err(PyBufferError::new_err(format!("{what}: a DLPack tensor of {ndim} dimensions without a shape")));
        }
        let raw_shape: &[i64] = if ndim == 0 { &[] } else { std::slice::from_raw_parts(t.shape, ndim) };
        let shape = raw_shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| PyBufferError::new_err(format!("{what}: negative dimension {d}"))))
            .collect::<PyResult<Vec<usize>>>()?;
        let strides = (!t.strides.is_null() && ndim > 0).then(|| std::slice::from_raw_parts(t.strides, ndim));
        let item = (t.dtype.bits as usize * t.dtype.lanes as usize).div_ceil(8);
        let memory = match t.device.device_type {
            DL_CPU | DL_CUDA_HOST => Memory::Host,
            dt if is_cuda_device(dt) => Memory::Cuda(t.device.device_id),
            other => {
                return Err(PyBufferError::new_err(format!(
                    "{what}: DLPack device type {other} (enigma takes host memory and CUDA device memory)"
                )))
            }
        };
        Ok(View {
            address: (t.data as u64).wrapping_add(t.byte_offset),
            nbytes: byte_len(&shape, item, what)?,
            memory,
            scalar: scalar_from_dlpack(t.dtype),
            dtype_name: dlpack_name(t.dtype),
            contiguous: is_contiguous(&shape, strides, item as i64, item as i64),
            readonly: flags & FLAG_READ_ONLY != 0,
            shape,
            _owner: capsule.unbind(),
        })
    }
}

/// `obj` through `__array_interface__` (host memory) or
/// `__cuda_array_interface__` (CUDA memory; `cuda` set): the dict's data
/// pointer, shape, typestr and strides (in bytes).
pub fn from_interface(obj: &Bound<'_, PyAny>, interface: &Bound<'_, PyAny>, cuda: bool, what: &str) -> PyResult<View> {
    let get = |key: &str| interface.get_item(key);
    let (address, readonly): (u64, bool) = get("data")?.extract()?;
    let shape: Vec<usize> = get("shape")?.extract()?;
    let typestr: String = get("typestr")?.extract()?;
    let strides: Option<Vec<i64>> = match get("strides") {
        Ok(s) if !s.is_none() => Some(s.extract()?),
        _ => None,
    };
    let item: usize = typestr.get(2..).and_then(|n| n.parse().ok()).unwrap_or(1);
    Ok(View {
        address,
        nbytes: byte_len(&shape, item, what)?,
        memory: if cuda { Memory::Cuda(0) } else { Memory::Host },
        scalar: scalar_from_typestr(&typestr),
        dtype_name: typestr_name(&typestr),
        contiguous: is_contiguous(&shape, strides.as_deref(), item as i64, 1),
        readonly,
        shape,
        _owner: obj.clone().unbind(),
    })
}

/// A torch CUDA tensor through its own accessors (`data_ptr`, `shape`,
/// `dtype`, `is_contiguous`): the same facts DLPack gives, for a fraction of
/// the per-call cost. `None` for anything else (CPU tensors go through
/// DLPack).
fn torch_cuda_view(obj: &Bound<'_, PyAny>) -> PyResult<Option<View>> {
    let py = obj.py();
    let is_torch = obj.get_type().module().is_ok_and(|m| m.to_cow().is_ok_and(|m| m.starts_with("torch")));
    if !is_torch || !obj.getattr(pyo3::intern!(py, "is_cuda")).and_then(|c| c.extract::<bool>()).unwrap_or(false) {
        return Ok(None);
    }
    let dtype = obj.getattr(pyo3::intern!(py, "dtype"))?.str()?;
    let (scalar, name) = match dtype.to_cow()?.as_ref() {
        "torch.float32" => (Some(Scalar::F32), "float32"),
        "torch.float16" => (Some(Scalar::F16), "float16"),
        "torch.bfloat16" => (Some(Scalar::BF16), "bfloat16"),
        "torch.int32" => (Some(Scalar::I32), "int32"),
        "torch.int64" => (Some(Scalar::I64), "int64"),
        "torch.int16" => (Some(Scalar::I16), "int16"),
        "torch.int8" => (Some(Scalar::I8), "int8"),
        "torch.uint8" => (Some(Scalar::U8), "uint8"),
        "torch.uint16" => (Some(Scalar::U16), "uint16"),
        "torch.uint32" => (Some(Scalar::U32), "uint32"),
        "torch.uint64" => (Some(Scalar::U64), "uint64"),
        _ => (None, ""),
    };
    let Some(scalar) = scalar else {
        return Ok(None); // DLPack names the type in the message
    };
    let shape: Vec<usize> = obj.getattr(pyo3::intern!(py, "shape"))?.extract()?;
    let device: i32 = obj.call_method0(pyo3::intern!(py, "get_device"))?.extract()?;
    Ok(Some(View {
        address: obj.call_method0(pyo3::intern!(py, "data_ptr"))?.extract()?,
        nbytes: byte_len(&shape, scalar.size_bytes() as usize, "tensor")?,
        memory: Memory::Cuda(device),
        scalar: Some(scalar),
        dtype_name: name.to_string(),
        contiguous: obj.call_method0(pyo3::intern!(py, "is_contiguous"))?.extract()?,
        readonly: false,
        shape,
        _owner: obj.clone().unbind(),
    }))
}

/// The view of any array `obj` offers: a torch CUDA tensor's own accessors
/// when the dispatch runs on its current stream (`stream` -1), numpy's array
/// interface (host memory, readable even when read-only), then DLPack, then
/// the CUDA array interface; `None` for an object with none of them.
pub fn view_of(obj: &Bound<'_, PyAny>, stream: Option<i64>, what: &str) -> PyResult<Option<View>> {
    let py = obj.py();
    if stream == Some(-1) {
        if let Some(view) = torch_cuda_view(obj)? {
            return Ok(Some(view));
        }
    }
    if let Ok(interface) = obj.getattr(pyo3::intern!(py, "__array_interface__")) {
        return from_interface(obj, &interface, false, what).map(Some);
    }
    if obj.hasattr(pyo3::intern!(py, "__dlpack__"))? {
        return from_dlpack(obj, stream, what).map(Some);
    }
    if let Ok(interface) = obj.getattr(pyo3::intern!(py, "__cuda_array_interface__")) {
        return from_interface(obj, &interface, true, what).map(Some);
    }
    Ok(None)
}

/// What an exported capsule owns: the managed tensor the consumer sees
/// (first, so its address is the box's), its shape, and the buffer.
#[repr(C)]
struct Export {
    managed: DLManagedTensor,
    shape: Vec<i64>,
    _buffer: Buffer,
}

unsafe extern "C" fn delete_export(managed: *mut DLManagedTensor) {
    // SAFETY: `manager_ctx` is the Box<Export> made in `export`, freed once
    // (by the consumer, or by the capsule's destructor when unused).
    unsafe { drop(Box::from_raw((*managed).manager_ctx as *mut Export)) }
}

unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: a capsule still named "dltensor" was never consumed, so its
    // tensor is still ours to delete; a consumed one was renamed.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()) as *mut DLManagedTensor;
            if let Some(deleter) = (*managed).deleter {
                deleter(managed);
            }
        }
    }
}

/// A legacy DLPack capsule over `buffer` (CUDA memory at `address` on GPU
/// 0) as a C-contiguous array of `shape` and `scalar`; the capsule keeps the
/// buffer alive until its consumer deletes the tensor.
pub fn export(py: Python<'_>, buffer: &Buffer, address: u64, shape: &[usize], scalar: Scalar) -> PyResult<Py<PyAny>> {
    let (code, bits) = match scalar {
        Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64 => (0u8, scalar.size_bytes() * 8),
        Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64 => (1, scalar.size_bytes() * 8),
        Scalar::F16 | Scalar::F32 => (2, scalar.size_bytes() * 8),
        Scalar::BF16 => (4, 16),
        Scalar::Bool => (6, 8),
    };
    let mut export = Box::new(Export {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data: address as *mut c_void,
                device: DLDevice { device_type: DL_CUDA, device_id: 0 },
                ndim: shape.len() as i32,
                dtype: DLDataType { code, bits: bits as u8, lanes: 1 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_export),
        },
        shape: shape.iter().map(|&d| d as i64).collect(),
        _buffer: buffer.clone(),
    });
    export.managed.dl_tensor.shape = export.shape.as_mut_ptr();
    let raw = Box::into_raw(export);
    // SAFETY: `raw` is a live Box<Export>; its first field is the managed
    // tensor the capsule hands out, and manager_ctx lets the deleter free it.
    unsafe {
        (*raw).managed.manager_ctx = raw as *mut c_void;
        let capsule = ffi::PyCapsule_New(raw as *mut c_void, LEGACY.as_ptr(), Some(capsule_destructor));
        if capsule.is_null() {
            drop(Box::from_raw(raw));
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule).unbind())
    }
}

