//! enigma's CUDA backend: kernels become CUDA C++ (`enigma_codegen::cuda`),
//! compiled at run time by NVRTC and launched through the driver API.
//!
//! Both libraries are loaded when the backend is opened (cudarc with dynamic
//! loading), so building enigma needs no CUDA, and a machine without a GPU
//! gets [`enigma_backend::RuntimeError::Unavailable`] ("no CUDA driver found"), never a crash.
//!
//! Mapping: a SIMD group is a warp; a threadgroup is a block; threadgroup
//! memory is static `__shared__` up to 48 KiB and dynamic shared memory above
//! (the function is allowed its bytes with
//! `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` when it is loaded, and
//! every launch passes them), so the device's limit is the opt-in one
//! (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`: 227 KiB on an
//! H100); a kernel over it is [`enigma_backend::RuntimeError::ThreadgroupMemory`]
//! when it is compiled; `dispatch_threads` launches whole blocks
//! and passes the grid size so edge blocks behave as Metal's non-uniform
//! threadgroups (see the codegen module docs). Timing uses CUDA events.
//! Compiled modules are cached by a hash of the generated source. Textures
//! are copied into CUDA arrays for each dispatch (see the `texture` module).

mod backend;
mod printf_capture;
mod tensor_map;
mod texture;

pub use backend::{CudaBackend, CudaKernel};
