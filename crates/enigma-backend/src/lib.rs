//! The contract between enigma's runtime and its devices.
//!
//! A [`Backend`] (the simulator, Metal, CUDA) allocates [`BufferStorage`],
//! compiles a validated kernel into a [`CompiledKernel`], and runs a
//! dispatch whose geometry and arguments have already been checked by
//! [`check_dispatch`] — the same checks on every backend, so a dispatch is
//! rejected the same way everywhere, with the numbers involved.

pub mod args;
mod check;
mod error;
pub mod findings;
pub mod half;
pub mod texture;

pub use args::{ArgValue, SpecValues};
pub use check::{check_dispatch, check_features, check_spec_values};
pub use enigma_analysis::geometry::{DispatchGeometry, DispatchMode};
pub use error::{RuntimeError, StopReason};
pub use findings::{Finding, FindingKind, Severity, ThreadRef};
pub use texture::{ReadWriteTier, TextureDesc, TextureFormat};

use enigma_ir::{Kernel, KernelInfo};
use serde::Serialize;
use std::any::Any;
use std::fmt::Debug;
use std::time::Duration;

/// Which kind of device runs the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// enigma's CPU simulator (the reference semantics).
    Simulator,
    Metal,
    Cuda,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Simulator => "sim",
            DeviceKind::Metal => "metal",
            DeviceKind::Cuda => "cuda",
        }
    }
}

/// What a device is and what it allows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceInfo {
    pub kind: DeviceKind,
    /// A human-readable name ("NVIDIA H100 80GB HBM3", "enigma simulator (2 threads)").
    pub name: String,
    /// The most threads one threadgroup may have on this device.
    pub max_threads_per_threadgroup: u32,
    /// Threadgroup (shared) memory one threadgroup may use, in bytes.
    pub max_threadgroup_memory_bytes: u64,
    /// SIMD-group (warp) width.
    pub simd_width: u32,
    /// GPU cores / SMs / worker threads that run threadgroups concurrently.
    pub compute_units: u32,
    /// Device memory in bytes, where known.
    pub memory_bytes: Option<u64>,
    /// The optional features this device supports (see [`enigma_ir::capabilities`]).
    pub features: std::collections::BTreeSet<enigma_ir::Feature>,
    /// How the backend lowers cooperative tensor operations on this device
    /// (the choice it makes when it compiles a kernel); `None` where the
    /// device does not run them.
    pub cooperative_lowering: Option<CooperativeLowering>,
    /// The pixel formats this device can bind as `access::read_write`
    /// textures (Metal's `readWriteTextureSupport`; the simulator and CUDA
    /// allow every format).
    pub read_write_textures: ReadWriteTier,
}

impl DeviceInfo {
    /// Whether cooperative tensor products run on warpgroup matrix
    /// instructions (CUDA's `wgmma`: a GPU compiled for `sm_90a`).
    pub fn wgmma(&self) -> bool {
        self.cooperative_lowering == Some(CooperativeLowering::Wgmma)
    }

    /// Whether cooperative tensor products with 16-bit operands may run on
    /// `mma.sync` (CUDA, compute capability 8.0 and later).
    pub fn mma(&self) -> bool {
        matches!(self.cooperative_lowering, Some(CooperativeLowering::Wgmma | CooperativeLowering::MmaSync))
    }
}

/// How a device's backend runs cooperative tensor operations (`matmul2d`
/// and the cooperative tensors it fills), as `enigma info` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CooperativeLowering {
    /// The simulator's reference semantics (each element summed in f32 in k
    /// order; under the sanitizer, several seeded layouts).
    Reference,
    /// Metal 4 (MSL 4.0): MetalPerformancePrimitives'
    /// `mpp::tensor_ops::matmul2d` on `tensor` views and `cooperative_tensor`s.
    MetalPerformancePrimitives,
    /// Apple GPUs below Metal 4: `simdgroup_matrix` fragments (8×8 tiles).
    SimdgroupMatrix,
    /// CUDA on `sm_90a`: products that qualify issue `wgmma.mma_async`
    /// (warpgroups of four warps), other 16-bit products `mma.sync`, the
    /// rest the scalar path.
    Wgmma,
    /// CUDA on compute capability 8.0 and later without `wgmma`: 16-bit
    /// products on `mma.sync` m16n8k16 fragments, the rest the scalar path.
    MmaSync,
    /// CUDA elsewhere: every thread sums its own elements with `fmaf` in
    /// k order, in per-thread register arrays.
    Scalar,
}

impl CooperativeLowering {
    /// A short description for reports.
    pub fn describe(self) -> &'static str {
        match self {
            CooperativeLowering::Reference => "the simulator's reference (f32 sums in k order; seeded layouts under the sanitizer)",
            CooperativeLowering::MetalPerformancePrimitives => "MetalPerformancePrimitives matmul2d (Metal 4, MSL 4.0)",
            CooperativeLowering::SimdgroupMatrix => "simdgroup_matrix fragments (below Metal 4)",
            CooperativeLowering::Wgmma => "wgmma.mma_async on sm_90a for scopes of 4·k SIMD groups, mma.sync for other 16-bit products, the scalar path for the rest",
            CooperativeLowering::MmaSync => "mma.sync m16n8k16 for 16-bit products, the scalar path for the rest",
            CooperativeLowering::Scalar => "the scalar path (per-thread fmaf in k order)",
        }
    }
}

/// Device memory a backend can bind: memory it allocated and owns, or
/// memory another library owns that it wraps ([`Backend::wrap_device_memory`]).
pub trait BufferStorage: Send + Sync + Debug {
    fn len_bytes(&self) -> usize;
    /// The buffer's address in the device's address space, for backends
    /// whose memory has one that other libraries can use (a CUDA device
    /// pointer); `None` for simulated memory.
    fn device_address(&self) -> Option<u64> {
        None
    }
    /// The address of the buffer's bytes in this process's memory, where
    /// the device's memory is host memory laid out byte for byte as kernels
    /// see it (the simulator on a little-endian host): a front end may then
    /// view the contents without copying them. `None` elsewhere. The address
    /// stays valid while the storage lives; reading through it races with a
    /// dispatch that writes the buffer, so views are for buffers no
    /// dispatch uses any more.
    fn host_address(&self) -> Option<u64> {
        None
    }
    /// Copies `data` into the buffer at `offset` (bounds already checked).
    fn write(&self, offset: usize, data: &[u8]) -> Result<(), RuntimeError>;
    /// Copies from the buffer at `offset` into `out` (bounds already checked).
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), RuntimeError>;
    fn as_any(&self) -> &dyn Any;
}

/// `compiled` as backend `backend`'s own kernel type `K`, or an error naming
/// the kernel when another backend compiled it.
pub fn own_kernel<'a, K: 'static>(compiled: &'a dyn CompiledKernel, backend: &'static str) -> Result<&'a K, RuntimeError> {
    compiled.as_any().downcast_ref::<K>().ok_or_else(|| RuntimeError::Backend {
        backend,
        message: format!("kernel `{}` was compiled for another device", compiled.kernel().name),
    })
}

/// `storage` as backend `backend`'s own buffer type `B`, or an error naming
/// the kernel it was passed to when another backend allocated it.
pub fn own_buffer<'a, B: 'static>(storage: &'a dyn BufferStorage, backend: &'static str, kernel: &str) -> Result<&'a B, RuntimeError> {
    storage.as_any().downcast_ref::<B>().ok_or_else(|| RuntimeError::Backend {
        backend,
        message: format!("kernel `{kernel}`: a buffer of another device was passed to the {backend} backend"),
    })
}

/// A kernel compiled for one backend: Metal's pipeline state, a CUDA
/// function, or the simulator's program.
pub trait CompiledKernel: Send + Sync + Debug {
    fn kernel(&self) -> &Kernel;
    /// The largest threadgroup this pipeline can run (≤ the device's).
    fn max_total_threads_per_threadgroup(&self) -> u32;
    /// SIMD-group width the pipeline runs with.
    fn thread_execution_width(&self) -> u32;
    /// Bytes of threadgroup memory the kernel declares statically.
    fn static_threadgroup_memory_length(&self) -> u64;
    fn as_any(&self) -> &dyn Any;
}

/// Options of one dispatch.
#[derive(Clone, Debug, Default)]
pub struct DispatchOptions {
    /// Run the simulator's sanitizer (ignored by GPU backends, which say so
    /// in [`DispatchReport::notes`]).
    pub sanitize: bool,
    /// How many SIMD-group schedules the sanitizer runs (at least 1; 0 means
    /// the default of 3).
    pub schedules: u32,
    /// The simulator's step budget: the most loop iterations one SIMD group
    /// may run before the dispatch fails with [`StopReason::StepBudget`]
    /// (`None`: no budget, except under the sanitizer, which then takes the
    /// simulator's `SANITIZER_LOOP_BUDGET`, 2^22). GPU backends ignore it.
    pub max_loop_iterations: Option<u64>,
    /// Wall-clock limit of a simulated dispatch ([`StopReason::Timeout`]).
    pub timeout: Option<Duration>,
    /// Raised by another thread to stop a simulated dispatch
    /// ([`StopReason::Interrupted`]); the front ends raise it on Ctrl-C.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Return the lines the kernel prints (`print`) in
    /// [`DispatchReport::printed`] instead of writing them to standard
    /// output, for a program that compares or shows them its own way.
    pub collect_printed: bool,
}

/// What a finished dispatch reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DispatchReport {
    /// Time measured on the device (CUDA events, Metal command-buffer GPU time).
    pub device_time: Option<Duration>,
    /// Host wall-clock time of the whole dispatch call.
    pub wall_time: Duration,
    /// Non-fatal remarks (e.g. geometry warnings).
    pub notes: Vec<String>,
    /// Sanitizer findings (only when [`DispatchOptions::sanitize`] was set).
    pub findings: Vec<Finding>,
    /// The lines the kernel printed, as the backend renders them (the
    /// simulator's tagged with the thread's grid position, the GPUs'
    /// untagged), and the note of those left out past the backend's bound:
    /// only when [`DispatchOptions::collect_printed`] was set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub printed: Vec<String>,
}

/// A device that can run enigma kernels.
pub trait Backend: Send + Sync + Debug {
    fn info(&self) -> &DeviceInfo;
    fn allocate(&self, bytes: usize) -> Result<Box<dyn BufferStorage>, RuntimeError>;
    /// Compiles a kernel that passed validation, with its specialisation
    /// constants fixed.
    fn compile(&self, kernel: &Kernel, info: &KernelInfo, spec: &SpecValues) -> Result<Box<dyn CompiledKernel>, RuntimeError>;
    /// Runs a dispatch that passed [`check_dispatch`]. Outside a batch it
    /// returns once the dispatch has finished; inside one it may return as
    /// soon as the dispatch is queued (its report then has no device time).
    fn dispatch(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[ArgValue<'_>],
        geometry: &DispatchGeometry,
        options: &DispatchOptions,
    ) -> Result<DispatchReport, RuntimeError>;
    /// Opens a batch: the dispatches until [`Backend::end_batch`] are queued
    /// back to back, in order, without waiting for each. Backends that run
    /// every dispatch to completion anyway (the simulator) need not
    /// override it.
    fn begin_batch(&self) -> Result<(), RuntimeError> {
        Ok(())
    }
    /// Opens a batch whose time is the device's own: the device first waits
    /// up to `hold` (idle, before the batch's first dispatch) while the host
    /// queues the batch, then runs the dispatches back to back, so
    /// [`Backend::end_batch`]'s time leaves out the host's launch latency
    /// (a few µs per dispatch on CUDA) as long as the host queues the batch
    /// within `hold`. For benchmarks: every such batch costs `hold` of wall
    /// time. Backends that run each dispatch to completion anyway (the
    /// simulator) open a plain batch.
    fn begin_held_batch(&self, hold: std::time::Duration) -> Result<(), RuntimeError> {
        let _ = hold;
        self.begin_batch()
    }
    /// Waits for the batch's dispatches and returns the device time from
    /// its first dispatch's start to its last one's end, where the backend
    /// measures one (`None` otherwise, or when nothing was dispatched). An
    /// error of a queued dispatch surfaces here.
    fn end_batch(&self) -> Result<Option<std::time::Duration>, RuntimeError> {
        Ok(None)
    }
    /// Like [`Backend::dispatch`], queued on `stream` (a backend's own
    /// queue handle: a `CUstream` for CUDA, 0 being the legacy default
    /// stream) and returning as soon as it is queued, without a device time.
    /// Its arguments' memory must stay valid until the stream reaches the
    /// dispatch. Backends without queues (the simulator) run it to
    /// completion, which is what the default does.
    fn dispatch_on_stream(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[ArgValue<'_>],
        geometry: &DispatchGeometry,
        options: &DispatchOptions,
        stream: u64,
    ) -> Result<DispatchReport, RuntimeError> {
        let _ = stream;
        self.dispatch(kernel, args, geometry, options)
    }
    /// A zeroed buffer whose zeroing is ordered on `stream` before any later
    /// work queued there (see [`Backend::dispatch_on_stream`]). A backend may
    /// take it from a stream-ordered pool and free it on `stream` when it is
    /// dropped, after the work queued there: `stream` must outlive the
    /// buffer, and work on other streams must be done with it by then.
    fn allocate_on_stream(&self, bytes: usize, stream: u64) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        let _ = stream;
        self.allocate(bytes)
    }
    /// A buffer whose contents are unspecified until written (a backend may
    /// skip zeroing it), ordered on `stream` like
    /// [`Backend::allocate_on_stream`] when one is given: for outputs every
    /// element of which a dispatch writes before anything reads it. The
    /// default zeroes it anyway.
    fn allocate_uninit(&self, bytes: usize, stream: Option<u64>) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        match stream {
            Some(stream) => self.allocate_on_stream(bytes, stream),
            None => self.allocate(bytes),
        }
    }
    /// Waits until every dispatch queued on the device, on any stream, has
    /// finished; its errors surface here.
    fn synchronize(&self) -> Result<(), RuntimeError> {
        Ok(())
    }
    /// A buffer over `len` bytes of device memory at `address` that this
    /// backend does not own (a tensor of another library): dispatches bind
    /// it like their own buffers, bounds are `len`, and dropping it frees
    /// nothing. Backends whose memory has no such addresses (the simulator)
    /// refuse, which is what the default does.
    ///
    /// # Safety
    /// `address .. address + len` must be device memory of this backend's
    /// device and context, and stay allocated for as long as the returned
    /// storage, and any dispatch queued with it, lives.
    unsafe fn wrap_device_memory(&self, address: u64, len: usize) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        let _ = (address, len);
        Err(RuntimeError::Backend {
            backend: self.info().kind.name(),
            message: "this device cannot bind another library's memory; pass host data (it is copied) or the device's own buffers".into(),
        })
    }
}
