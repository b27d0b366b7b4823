//! A dispatch's outputs as the Python side receives them: a read-only
//! `memoryview` of the output's bytes, on every device.
//!
//! On the simulator the view is of the simulator's own buffer, held by an
//! [`OutputMemory`] that numpy reads through `__array_interface__`: the
//! output crosses to Python without a copy (the stable ABI of Python 3.9
//! has no buffer protocol, so numpy makes the `memoryview`'s buffer). On a
//! GPU the output is copied once into host memory (`bytes`) and viewed.
//! Either way `np.frombuffer(out, dtype)` and `np.asarray(out)` view that
//! memory without another copy, and it lives as long as any view of it.

use crate::{runtime_err, DispatchError};
use enigma_runtime::Buffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView, PyTuple};

/// A finished dispatch's output buffer in host memory (the simulator's),
/// which no later dispatch can reach: numpy views it through
/// `__array_interface__` as read-only bytes.
#[derive(Debug)]
#[pyclass(module = "enigma._enigma", name = "OutputMemory", frozen)]
pub struct OutputMemory {
    buffer: Buffer,
    address: u64,
}

#[pymethods]
impl OutputMemory {
    fn __len__(&self) -> usize {
        self.buffer.len_bytes()
    }

    /// numpy's array interface (version 3): the bytes, read-only.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", PyTuple::new(py, [self.buffer.len_bytes()])?)?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.address, true))?;
        Ok(d)
    }
}

/// The read-only `memoryview` of output `output` of kernel `kernel`, held
/// in `buffer` after its dispatch: a view of the buffer itself where its
/// memory is the host's (see the module doc), else of one host copy. A
/// failed allocation of that copy is a `DispatchError` naming the size.
pub fn output_view<'py>(py: Python<'py>, buffer: &Buffer, kernel: &str, output: &str) -> PyResult<Bound<'py, PyAny>> {
    let len = buffer.len_bytes();
    let owner = match buffer.host_address() {
        Some(address) => {
            let memory = Bound::new(py, OutputMemory { buffer: buffer.clone(), address })?;
            py.import("numpy")?.call_method1("asarray", (memory,))?
        }
        None => PyBytes::new_with(py, len, |dst| buffer.read_into(0, dst).map_err(|e| runtime_err(py, e)))
            .map_err(|e| {
                if e.is_instance_of::<pyo3::exceptions::PyMemoryError>(py) {
                    DispatchError::new_err(format!("kernel `{kernel}`, output `{output}`: cannot allocate the result of {len} bytes: out of memory"))
                } else {
                    e
                }
            })?
            .into_any(),
    };
    Ok(PyMemoryView::from(&owner)?.into_any())
}
