//! The driver-API implementation of [`enigma_backend::Backend`].

use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use enigma_backend::{
    own_buffer, own_kernel, ArgValue, Backend, BufferStorage, CompiledKernel, CooperativeLowering, DeviceInfo, DeviceKind, DispatchGeometry, DispatchOptions,
    DispatchReport, ReadWriteTier, RuntimeError, SpecValues,
};
use enigma_codegen::cuda::{CudaSource, LaunchParam, TENSOR_MAP_BYTES};
use crate::tensor_map;
use crate::printf_capture;
use crate::texture::{TextureBinding, ARGUMENT_BYTES};
use enigma_ir::{Kernel, KernelInfo, ParamId, ParamKind, Sampler};
use std::collections::BTreeMap;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn driver_err(what: &str, e: impl std::fmt::Debug) -> RuntimeError {
    RuntimeError::Backend { backend: "cuda", message: format!("{what}: {e:?}") }
}

/// The architecture whose code may use `wgmma`.
const WGMMA_ARCH: &str = "sm_90a";

/// The first CUDA GPU.
pub struct CudaBackend {
    info: DeviceInfo,
    arch: &'static str,
    /// Compiled modules by source hash.
    cache: Mutex<HashMap<u64, (Arc<CudaModule>, CudaFunction)>>,
    /// The start and end events that time each dispatch, made once: a
    /// dispatch holds the lock from launch to completion.
    timer: Mutex<Timer>,
    /// The batch in progress, if any.
    batch: Mutex<Option<Batch>>,
    /// Whether kernels launch as programmatic dependents of the kernel
    /// before them in the stream (compute capability 9.0 on): see
    /// [`queue_launch`].
    dependent_launches: bool,
    /// Last, so the events and modules above are released while it lives.
    ctx: Arc<CudaContext>,
}

/// Two CUDA events bracketing a launch.
struct Timer {
    start: sys::CUevent,
    end: sys::CUevent,
}

impl Timer {
    fn new() -> Result<Timer, RuntimeError> {
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        Ok(Timer {
            start: result::event::create(flags).map_err(|e| driver_err("creating an event", e))?,
            end: result::event::create(flags).map_err(|e| driver_err("creating an event", e))?,
        })
    }
}

/// An open batch: its own events, the start one recorded at its first
/// dispatch (so that host work before it, such as allocating outputs, is
/// not timed) or behind a held batch's wait, the end one after each
/// dispatch (so that host work after the last, such as freeing a
/// workspace, is not timed either). (An event between two kernels costs
/// about 1.2 µs of device time on an H200 and keeps the second from
/// overlapping the first's end, [`queue_launch`]: held figures of
/// operations of several dispatches include both.)
struct Batch {
    timer: Timer,
    started: bool,
    dispatched: bool,
}

impl Batch {
    fn new() -> Result<Batch, RuntimeError> {
        Ok(Batch { timer: Timer::new()?, started: false, dispatched: false })
    }
}

// SAFETY: events are driver handles usable from any thread of the process;
// the Mutex in CudaBackend serialises their use.
unsafe impl Send for Timer {}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: both events were created by event::create and are destroyed once.
        unsafe {
            let _ = result::event::destroy(self.start);
            let _ = result::event::destroy(self.end);
        }
    }
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend").field("info", &self.info).finish()
    }
}

/// Architectures NVRTC is asked to compile for, by compute capability:
/// Hopper (9.0) as `sm_90a`, whose architecture-specific instructions
/// (`wgmma`) cooperative products use.
fn arch_for(major: i32, minor: i32) -> &'static str {
    match (major, minor) {
        (9, 0) => WGMMA_ARCH,
        (8, 9) => "sm_89",
        (8, 6) => "sm_86",
        (8, 0) => "sm_80",
        (10, _) => "sm_100",
        (12, _) => "sm_120",
        (7, 5) => "sm_75",
        _ => "compute_75",
    }
}

impl CudaBackend {
    /// Opens GPU 0. Fails cleanly when the driver or NVRTC library is
    /// missing, or no GPU is present.
    pub fn new() -> Result<CudaBackend, RuntimeError> {
        let unavailable = |reason: String| RuntimeError::Unavailable { device: "cuda".into(), reason };
        // cudarc panics on first use when a library is missing: ask first.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(unavailable("no CUDA driver found (libcuda could not be loaded)".into()));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(unavailable("NVRTC not found (libnvrtc.so.13 could not be loaded; add the CUDA toolkit's lib directory to LD_LIBRARY_PATH)".into()));
        }
        result::init().map_err(|e| unavailable(format!("the CUDA driver failed to initialise: {e:?}")))?;
        let count = result::device::get_count().map_err(|e| unavailable(format!("cannot count CUDA devices: {e:?}")))?;
        if count == 0 {
            return Err(unavailable("no CUDA device".into()));
        }
        let ctx = CudaContext::new(0).map_err(|e| unavailable(format!("cannot create a context on GPU 0: {e:?}")))?;
        let attr = |a: sys::CUdevice_attribute| ctx.attribute(a).map_err(|e| driver_err("device attribute", e));
        let (major, minor) = ctx.compute_capability().map_err(|e| driver_err("compute capability", e))?;
        let info = DeviceInfo {
            kind: DeviceKind::Cuda,
            name: ctx.name().map_err(|e| driver_err("device name", e))?,
            max_threads_per_threadgroup: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
            // What a block may opt in to (227 KiB on an H100), not the 48 KiB
            // of static shared memory: larger threadgroup arrays are dynamic.
            max_threadgroup_memory_bytes: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u64,
            simd_width: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE)? as u32,
            compute_units: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            memory_bytes: ctx.total_mem().ok().map(|m| m as u64),
            features: cuda_features(major),
            // Cooperative products compile to `wgmma` for `sm_90a` only.
            // What the generator may use on this architecture.
            cooperative_lowering: Some(match enigma_codegen::cuda::Options::for_arch(arch_for(major, minor)) {
                Some(o) if o.wgmma => CooperativeLowering::Wgmma,
                Some(o) if o.mma => CooperativeLowering::MmaSync,
                _ => CooperativeLowering::Scalar,
            }),
            // Surfaces read and write every format enigma has.
            read_write_textures: ReadWriteTier::Tier2,
        };
        let timer = Timer::new()?;
        keep_pool_memory(&ctx);
        Ok(CudaBackend {
            ctx,
            info,
            arch: arch_for(major, minor),
            cache: Mutex::new(HashMap::new()),
            timer: Mutex::new(timer),
            batch: Mutex::new(None),
            dependent_launches: major >= 9,
        })
    }

    /// How many compiled modules the cache holds (one per distinct source).
    pub fn cached_modules(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn bind(&self) -> Result<(), RuntimeError> {
        self.ctx.bind_to_thread().map_err(|e| driver_err("binding the context", e))
    }

    /// The kernel function of `source`, compiled and loaded once per
    /// distinct source. A function that needs dynamic shared memory is
    /// allowed its bytes when it is loaded (the caller has checked them
    /// against the device's limit).
    fn module_for(&self, source: &CudaSource) -> Result<CudaFunction, RuntimeError> {
        let mut hasher = DefaultHasher::new();
        source.source.hash(&mut hasher);
        self.arch.hash(&mut hasher);
        let key = hasher.finish();
        if let Some((_, f)) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(f.clone());
        }
        let include_paths = cuda_include_paths();
        let options = CompileOptions {
            arch: Some(self.arch),
            include_paths,
            options: vec!["--std=c++17".into()],
            ..Default::default()
        };
        let ptx = compile_ptx_with_opts(&source.source, options).map_err(|e| RuntimeError::Backend {
            backend: "cuda",
            message: format!("NVRTC rejected the generated CUDA for `{}`: {e}", source.entry_point),
        })?;
        let module = self.ctx.load_module(ptx).map_err(|e| driver_err("loading the module", e))?;
        let function = module.load_function(&source.entry_point).map_err(|e| driver_err("finding the kernel", e))?;
        if source.dynamic_shared_bytes > 0 {
            // At most the device's opt-in limit (an i32 attribute), checked by `compile`.
            let bytes = source.dynamic_shared_bytes as i32;
            function
                .set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)
                .map_err(|e| driver_err(&format!("allowing `{}` {bytes} bytes of dynamic shared memory", source.entry_point), e))?;
        }
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, (module, function.clone()));
        Ok(function)
    }
}

/// The one-thread kernel a held batch starts behind
/// ([`Backend::begin_held_batch`]): it spins on the GPU's nanosecond timer
/// for its one parameter's nanoseconds.
fn hold_source() -> CudaSource {
    let source = r#"extern "C" __global__ void enigma_hold(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}
"#;
    CudaSource { source: source.into(), entry_point: "enigma_hold".into(), static_shared_bytes: 0, dynamic_shared_bytes: 0, launch_params: vec![] }
}

/// Asks the device's stream-ordered memory pool to keep freed memory for
/// reuse instead of returning it to the driver at every synchronisation, so
/// per-call outputs ([`Backend::allocate_on_stream`]) cost a pool lookup.
/// Best effort: without pools, allocation falls back to `cuMemAlloc`.
fn keep_pool_memory(ctx: &CudaContext) {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut threshold: u64 = u64::MAX;
    // SAFETY: plain driver calls on this context's device; `threshold` is
    // the u64 the attribute takes and outlives the call.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) == sys::CUresult::CUDA_SUCCESS {
            let _ = sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                &mut threshold as *mut u64 as *mut c_void,
            );
        }
    }
}

/// Where the CUDA headers (cuda_fp16.h, …) are: `$CUDA_HOME/include`, or the
/// usual install locations.
fn cuda_include_paths() -> Vec<String> {
    let mut candidates: Vec<String> = vec![];
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(home) = std::env::var(var) {
            candidates.push(format!("{home}/include"));
        }
    }
    candidates.extend(["/usr/local/cuda/include".to_string(), "/usr/include".to_string()]);
    candidates.into_iter().filter(|p| std::path::Path::new(&format!("{p}/cuda_fp16.h")).exists()).take(1).collect()
}

/// Device memory: from `cuMemAlloc` (freed on drop, which waits for the
/// device), from the stream-ordered pool (`cuMemAllocAsync`: freed on drop
/// on its stream, after the work queued there), or another library's
/// allocation wrapped by [`Backend::wrap_device_memory`] (its owner frees it).
#[derive(Debug)]
pub struct CudaBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) len: usize,
    ownership: Ownership,
    ctx: Arc<CudaContext>,
}

#[derive(Debug, Clone, Copy)]
enum Ownership {
    Owned,
    OnStream(sys::CUstream),
    Borrowed,
}

// The pointer is a device address owned by this buffer; the driver API is thread-safe.
unsafe impl Send for CudaBuffer {}
unsafe impl Sync for CudaBuffer {}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ptr == 0 || self.ctx.bind_to_thread().is_err() {
            return;
        }
        match self.ownership {
            // SAFETY: allocated by malloc_sync in this context and freed once;
            // cuMemFree waits for work still using it.
            Ownership::Owned => {
                let _ = unsafe { result::free_sync(self.ptr) };
            }
            // SAFETY: allocated by malloc_async on `stream`, which outlives
            // the buffer by allocate_on_stream's contract; freed once, after
            // the work queued there.
            Ownership::OnStream(stream) => {
                let _ = unsafe { result::free_async(self.ptr, stream) };
            }
            Ownership::Borrowed => {}
        }
    }
}

impl BufferStorage for CudaBuffer {
    fn len_bytes(&self) -> usize {
        self.len
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<(), RuntimeError> {
        check_range(offset, data.len(), self.len)?;
        if data.is_empty() {
            return Ok(());
        }
        self.ctx.bind_to_thread().map_err(|e| driver_err("binding the context", e))?;
        // SAFETY: the range was checked against the allocation. The legacy
        // stream is waited for so that the copy has landed before work on
        // any other stream can read it.
        unsafe {
            result::memcpy_htod_sync(self.ptr + offset as u64, data).and_then(|_| result::stream::synchronize(std::ptr::null_mut()))
        }
        .map_err(|e| driver_err("copy to device", e))
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), RuntimeError> {
        check_range(offset, out.len(), self.len)?;
        if out.is_empty() {
            return Ok(());
        }
        self.ctx.bind_to_thread().map_err(|e| driver_err("binding the context", e))?;
        // Work queued on any stream may still write the buffer: wait for all of it.
        result::ctx::synchronize().map_err(|e| RuntimeError::Execution {
            kernel: "(queued work)".into(),
            message: format!("a CUDA dispatch queued before this read failed: {e:?}"),
        })?;
        // SAFETY: the range was checked against the allocation; the copy is synchronous.
        unsafe { result::memcpy_dtoh_sync(out, self.ptr + offset as u64) }.map_err(|e| driver_err("copy from device", e))
    }

    fn device_address(&self) -> Option<u64> {
        Some(self.ptr)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn check_range(offset: usize, len: usize, size: usize) -> Result<(), RuntimeError> {
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(RuntimeError::BufferRange { offset, len, size });
    }
    Ok(())
}

/// Bytes of one kernel-parameter slot: a by-value argument (32 bytes), a
/// texture argument ([`ARGUMENT_BYTES`]) or a tensor map
/// ([`TENSOR_MAP_BYTES`]).
const SLOT_BYTES: usize = 128;
const _: () = assert!(ARGUMENT_BYTES <= SLOT_BYTES && TENSOR_MAP_BYTES <= SLOT_BYTES);

/// One kernel parameter's bytes, aligned as a tensor map must be.
#[repr(C, align(64))]
struct Slot([u8; SLOT_BYTES]);

/// The texture arguments of one dispatch, by argument index. Dropping it
/// waits for `stream` (the copies and the kernel may still use the arrays),
/// then releases the arrays and their objects.
struct Textures {
    bindings: Vec<Option<TextureBinding>>,
    stream: sys::CUstream,
}

impl Textures {
    /// Makes the array, surface and texture objects of every texture
    /// argument, queueing the copies of their texels on `stream`.
    ///
    /// # Safety
    /// The context is bound; `stream` is the legacy stream or one of this
    /// context; the texture buffers outlive the dispatch.
    unsafe fn new(cuda: &CudaKernel, args: &[ArgValue<'_>], stream: sys::CUstream) -> Result<Textures, RuntimeError> {
        let mut textures = Textures { bindings: Vec::with_capacity(args.len()), stream };
        for (i, arg) in args.iter().enumerate() {
            let binding = match arg {
                ArgValue::Texture { storage, desc } => {
                    let buf: &CudaBuffer = own_buffer(*storage, "cuda", &cuda.kernel.name)?;
                    let samplers = cuda.samplers.get(&ParamId(i as u32)).map_or(&[][..], Vec::as_slice);
                    // SAFETY: by this function's contract; the buffer holds the texels (checked at dispatch).
                    Some(unsafe { TextureBinding::new(buf.ptr, *desc, samplers, stream) }?)
                }
                _ => None,
            };
            textures.bindings.push(binding);
        }
        Ok(textures)
    }

    /// Queues the copies back of the textures the kernel may write (access
    /// write or read_write), and waits for them.
    ///
    /// # Safety
    /// As for [`Textures::new`], after the launch was queued on the same stream.
    unsafe fn copy_back(&self, cuda: &CudaKernel) -> Result<(), RuntimeError> {
        let mut any = false;
        for (i, binding) in self.bindings.iter().enumerate() {
            let written = matches!(cuda.kernel.params.get(i).map(|p| p.kind), Some(ParamKind::Texture { access, .. }) if access.can_write());
            if let (Some(binding), true) = (binding, written) {
                // SAFETY: by this function's contract.
                unsafe { binding.copy_back(self.stream) }?;
                any = true;
            }
        }
        if any {
            // SAFETY: a stream of the bound context.
            unsafe { result::stream::synchronize(self.stream) }.map_err(|e| launch_error(cuda, e))?;
        }
        Ok(())
    }
}

impl Drop for Textures {
    fn drop(&mut self) {
        if self.bindings.iter().any(Option::is_some) {
            // SAFETY: a stream of the bound context; waiting keeps the
            // arrays alive until the work queued on them is done.
            let _ = unsafe { result::stream::synchronize(self.stream) };
        }
    }
}

/// The kernel parameters of one launch, one slot each: every argument (a
/// device pointer, a by-value argument's bytes, or a texture argument made
/// by `textures`), then the grid sizes and tensor maps the generated code
/// asks for.
fn launch_slots(cuda: &CudaKernel, args: &[ArgValue<'_>], textures: &Textures, geometry: &DispatchGeometry) -> Result<Vec<Slot>, RuntimeError> {
    let mut storage: Vec<Slot> = Vec::with_capacity(args.len() + cuda.source.launch_params.len());
    for (i, arg) in args.iter().enumerate() {
        let mut slot = [0u8; SLOT_BYTES];
        match arg {
            ArgValue::Buffer { storage: s, .. } => {
                let buf: &CudaBuffer = own_buffer(*s, "cuda", &cuda.kernel.name)?;
                slot[..8].copy_from_slice(&buf.ptr.to_le_bytes());
            }
            ArgValue::Value { bytes, .. } => slot[..bytes.len()].copy_from_slice(bytes),
            ArgValue::Texture { desc, .. } => {
                let Some(Some(binding)) = textures.bindings.get(i) else {
                    return Err(RuntimeError::Backend {
                        backend: "cuda",
                        message: format!("kernel `{}`, argument {i}: the {desc} texture has no CUDA array", cuda.kernel.name),
                    });
                };
                slot[..ARGUMENT_BYTES].copy_from_slice(&binding.argument());
            }
        }
        storage.push(Slot(slot));
    }
    for extra in &cuda.source.launch_params {
        let mut slot = [0u8; SLOT_BYTES];
        let value: u32 = match extra {
            LaunchParam::GridX => geometry.grid[0],
            LaunchParam::GridY => geometry.grid[1],
            LaunchParam::GridZ => geometry.grid[2],
            LaunchParam::TensorMap(map) => {
                slot[..TENSOR_MAP_BYTES].copy_from_slice(&cuda.tensor_maps.encode(&cuda.kernel.name, map, args)?);
                storage.push(Slot(slot));
                continue;
            }
        };
        slot[..4].copy_from_slice(&value.to_le_bytes());
        storage.push(Slot(slot));
    }
    Ok(storage)
}

/// A kernel compiled by NVRTC.
#[derive(Debug)]
pub struct CudaKernel {
    kernel: Kernel,
    source: CudaSource,
    function: CudaFunction,
    max_threads: u32,
    /// Bytes of shared memory a launch uses: the static shared memory the
    /// driver reports plus the dynamic shared memory every launch passes.
    shared_bytes: u64,
    /// The samplers each sampled texture parameter is sampled with, in the
    /// order of its texture objects in the argument.
    samplers: BTreeMap<ParamId, Vec<Sampler>>,
    /// The kernel prints (`printf`).
    prints: bool,
    /// Tensor maps made for earlier dispatches, by what they describe.
    tensor_maps: tensor_map::Cache,
}

impl CudaKernel {
    /// The generated CUDA C++.
    pub fn source(&self) -> &str {
        &self.source.source
    }
}

impl CompiledKernel for CudaKernel {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    fn max_total_threads_per_threadgroup(&self) -> u32 {
        self.max_threads
    }
    fn thread_execution_width(&self) -> u32 {
        32
    }
    /// The static and the dynamic shared memory: all the threadgroup memory
    /// a launch uses, which dispatches check against the device's limit.
    fn static_threadgroup_memory_length(&self) -> u64 {
        self.shared_bytes
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Backend for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn begin_batch(&self) -> Result<(), RuntimeError> {
        self.bind()?;
        let mut batch = self.batch.lock().unwrap_or_else(|e| e.into_inner());
        if batch.is_some() {
            return Err(RuntimeError::Backend { backend: "cuda", message: "a batch is already open on this device".into() });
        }
        *batch = Some(Batch::new()?);
        Ok(())
    }

    fn begin_held_batch(&self, hold: Duration) -> Result<(), RuntimeError> {
        let hold_function = self.module_for(&hold_source())?;
        self.begin_batch()?;
        let mut batch = self.batch.lock().unwrap_or_else(|e| e.into_inner());
        let open = batch.as_mut().expect("begin_batch opened it");
        let mut nanoseconds = u64::try_from(hold.as_nanos()).unwrap_or(u64::MAX);
        let mut params = [&mut nanoseconds as *mut u64 as *mut c_void];
        let stream: sys::CUstream = std::ptr::null_mut();
        // SAFETY: the context is bound (begin_batch); one u64 parameter, as
        // `enigma_hold` takes; the batch's start event, recorded on the
        // same stream right behind the wait.
        let queued = unsafe {
            result::launch_kernel(hold_function.cu_function(), (1, 1, 1), (1, 1, 1), 0, stream, &mut params)
                .and_then(|_| result::event::record(open.timer.start, stream))
        };
        match queued {
            Ok(()) => {
                open.started = true;
                Ok(())
            }
            Err(e) => {
                *batch = None;
                Err(driver_err("queueing a held batch's wait", e))
            }
        }
    }

    fn end_batch(&self) -> Result<Option<Duration>, RuntimeError> {
        self.bind()?;
        let Some(batch) = self.batch.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Err(RuntimeError::Backend { backend: "cuda", message: "end_batch without begin_batch".into() });
        };
        if !batch.dispatched {
            return Ok(None); // nothing was dispatched
        }
        // SAFETY: the batch's end event, recorded on the default stream
        // after its last dispatch; the wait covers every dispatch queued
        // since its start.
        unsafe { result::event::synchronize(batch.timer.end) }
            .map_err(|e| RuntimeError::Execution { kernel: "(batch)".into(), message: format!("a batched CUDA dispatch failed: {e:?}") })?;
        // SAFETY: both events have completed.
        let ms = unsafe { result::event::elapsed(batch.timer.start, batch.timer.end) }.map_err(|e| driver_err("reading the batch's time", e))?;
        Ok(Some(Duration::from_secs_f64(ms as f64 / 1e3)))
    }

    fn allocate(&self, bytes: usize) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        self.bind()?;
        // cuMemAlloc rejects 0 bytes; keep one byte so every buffer has an address.
        let size = bytes.max(1);
        // SAFETY: a plain device allocation in the bound context, zeroed
        // below; the legacy stream is waited for so the zeroes are in place
        // before work on any other stream uses the buffer.
        let ptr = unsafe { result::malloc_sync(size) }.map_err(|e| driver_err(&format!("allocating {bytes} bytes"), e))?;
        let buffer = CudaBuffer { ptr, len: bytes, ownership: Ownership::Owned, ctx: self.ctx.clone() };
        unsafe { result::memset_d8_sync(ptr, 0, size).and_then(|_| result::stream::synchronize(std::ptr::null_mut())) }
            .map_err(|e| driver_err("zeroing a buffer", e))?;
        Ok(Box::new(buffer))
    }

    fn allocate_on_stream(&self, bytes: usize, stream: u64) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        self.bind()?;
        let size = bytes.max(1);
        let stream = stream as sys::CUstream;
        // SAFETY: an allocation from the device's stream-ordered pool on
        // `stream` (a stream of this context that outlives the buffer, per
        // the trait's contract), or a plain one where pools are missing;
        // zeroed on `stream`, so the zeroing precedes later work queued there.
        let buffer = match unsafe { result::malloc_async(stream, size) } {
            Ok(ptr) => CudaBuffer { ptr, len: bytes, ownership: Ownership::OnStream(stream), ctx: self.ctx.clone() },
            Err(_) => {
                let ptr = unsafe { result::malloc_sync(size) }.map_err(|e| driver_err(&format!("allocating {bytes} bytes"), e))?;
                CudaBuffer { ptr, len: bytes, ownership: Ownership::Owned, ctx: self.ctx.clone() }
            }
        };
        unsafe { result::memset_d8_async(buffer.ptr, 0, size, stream) }.map_err(|e| driver_err("zeroing a buffer", e))?;
        Ok(Box::new(buffer))
    }

    fn allocate_uninit(&self, bytes: usize, stream: Option<u64>) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        self.bind()?;
        let size = bytes.max(1);
        let alloc_err = |e| driver_err(&format!("allocating {bytes} bytes"), e);
        // SAFETY: allocations in the bound context: from the stream-ordered
        // pool on `stream` (a stream of this context that outlives the
        // buffer, per allocate_on_stream's contract) or plain; left
        // unzeroed, as this method's contract allows.
        let buffer = match stream {
            Some(stream) => match unsafe { result::malloc_async(stream as sys::CUstream, size) } {
                Ok(ptr) => CudaBuffer { ptr, len: bytes, ownership: Ownership::OnStream(stream as sys::CUstream), ctx: self.ctx.clone() },
                Err(_) => CudaBuffer { ptr: unsafe { result::malloc_sync(size) }.map_err(alloc_err)?, len: bytes, ownership: Ownership::Owned, ctx: self.ctx.clone() },
            },
            None => CudaBuffer { ptr: unsafe { result::malloc_sync(size) }.map_err(alloc_err)?, len: bytes, ownership: Ownership::Owned, ctx: self.ctx.clone() },
        };
        Ok(Box::new(buffer))
    }

    fn synchronize(&self) -> Result<(), RuntimeError> {
        self.bind()?;
        result::ctx::synchronize()
            .map_err(|e| RuntimeError::Execution { kernel: "(queued work)".into(), message: format!("a queued CUDA dispatch failed: {e:?}") })
    }

    unsafe fn wrap_device_memory(&self, address: u64, len: usize) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        if address == 0 && len > 0 {
            return Err(RuntimeError::Backend { backend: "cuda", message: format!("a null device pointer for {len} bytes") });
        }
        Ok(Box::new(CudaBuffer { ptr: address, len, ownership: Ownership::Borrowed, ctx: self.ctx.clone() }))
    }

    fn compile(&self, kernel: &Kernel, info: &KernelInfo, spec: &SpecValues) -> Result<Box<dyn CompiledKernel>, RuntimeError> {
        self.bind()?;
        // Checked before the code is generated and the function allowed its
        // dynamic shared memory: a kernel over the device's limit is this
        // typed error, never a driver failure.
        let bytes = enigma_codegen::cuda::shared_layout(kernel).bytes;
        if bytes > self.info.max_threadgroup_memory_bytes {
            return Err(RuntimeError::ThreadgroupMemory { kernel: kernel.name.clone(), bytes, limit: self.info.max_threadgroup_memory_bytes });
        }
        // Tile copies run on the tensor copy engine from compute capability 9.0.
        let tensor_copies = enigma_codegen::cuda::Options::for_arch(self.arch).is_some_and(|o| o.tensor_copies);
        let options = enigma_codegen::cuda::Options { spec_values: spec.resolve(kernel), wgmma: self.info.wgmma(), mma: self.info.mma(), tensor_copies, ..Default::default() };
        let source = enigma_codegen::cuda::write_string(kernel, info, &options)
            .map_err(|e| RuntimeError::Backend { backend: "cuda", message: e.to_string() })?;
        let function = self.module_for(&source)?;
        let attr = |a| function.get_attribute(a).map_err(|e| driver_err("function attribute", e));
        let max_threads = attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32;
        let static_shared = attr(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as u64;
        let shared_bytes = static_shared + source.dynamic_shared_bytes;
        Ok(Box::new(CudaKernel { kernel: kernel.clone(), source, function, max_threads, shared_bytes, samplers: info.samplers.clone(), prints: info.prints, tensor_maps: tensor_map::Cache::default() }))
    }

    fn dispatch(
        &self,
        compiled: &dyn CompiledKernel,
        args: &[ArgValue<'_>],
        geometry: &DispatchGeometry,
        options: &DispatchOptions,
    ) -> Result<DispatchReport, RuntimeError> {
        let start = Instant::now();
        let cuda: &CudaKernel = own_kernel(compiled, "cuda")?;
        self.bind()?;
        let stream: sys::CUstream = std::ptr::null_mut();
        // SAFETY: the context is bound; the legacy stream; the texture
        // buffers are borrowed for the whole dispatch.
        let textures = unsafe { Textures::new(cuda, args, stream) }?;
        let mut storage = launch_slots(cuda, args, &textures, geometry)?;
        if let Some(batch) = self.batch.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            // Queued behind the batch's earlier dispatches; end_batch waits.
            // SAFETY: the batch's events, recorded on this stream (the start
            // one once); the argument slots are copied by the driver when
            // the launch is queued.
            unsafe {
                if !batch.started {
                    result::event::record(batch.timer.start, stream).map_err(|e| driver_err("recording an event", e))?;
                    batch.started = true;
                }
                queue_launch(cuda, &mut storage, geometry, stream, self.dependent_launches).and_then(|_| result::event::record(batch.timer.end, stream))
            }
            .map_err(|e| launch_error(cuda, e))?;
            batch.dispatched = true;
            // SAFETY: after the launch, on its stream.
            unsafe { textures.copy_back(cuda) }?;
            let mut notes = geometry.warnings.clone();
            notes.extend(uncollected(cuda, options));
            return Ok(DispatchReport { device_time: None, wall_time: start.elapsed(), notes, findings: vec![], printed: vec![] });
        }
        let timer = self.timer.lock().unwrap_or_else(|e| e.into_inner());
        // The printf lines reach descriptor 1 by the synchronisation below.
        let capture = if options.collect_printed && cuda.prints {
            let capture = printf_capture::Capture::start().map_err(|e| RuntimeError::Execution {
                kernel: cuda.kernel.name.clone(),
                message: format!("could not capture the kernel's printf output: {e}"),
            })?;
            Some(capture)
        } else {
            None
        };
        // SAFETY: the legacy stream of the bound context; the argument slots
        // outlive the synchronous wait below.
        let launched = unsafe {
            result::event::record(timer.start, stream)
                .and_then(|_| queue_launch(cuda, &mut storage, geometry, stream, self.dependent_launches))
                .and_then(|_| result::event::record(timer.end, stream))
                .and_then(|_| result::event::synchronize(timer.end))
        };
        // SAFETY: both events were recorded on this stream and the end one has completed.
        let elapsed = unsafe { result::event::elapsed(timer.start, timer.end) };
        drop(timer);
        let printed = match capture {
            Some(capture) => capture.finish().map_err(|e| RuntimeError::Execution {
                kernel: cuda.kernel.name.clone(),
                message: format!("could not read the kernel's captured printf output: {e}"),
            })?,
            None => vec![],
        };
        launched.map_err(|e| launch_error(cuda, e))?;
        // SAFETY: after the launch, on its stream.
        unsafe { textures.copy_back(cuda) }?;
        Ok(DispatchReport {
            device_time: elapsed.ok().map(|ms| Duration::from_secs_f64(ms as f64 / 1e3)),
            wall_time: start.elapsed(),
            notes: dispatch_notes(geometry, options),
            findings: vec![],
            printed,
        })
    }

    fn dispatch_on_stream(
        &self,
        compiled: &dyn CompiledKernel,
        args: &[ArgValue<'_>],
        geometry: &DispatchGeometry,
        options: &DispatchOptions,
        stream: u64,
    ) -> Result<DispatchReport, RuntimeError> {
        let start = Instant::now();
        let cuda: &CudaKernel = own_kernel(compiled, "cuda")?;
        self.bind()?;
        let stream = stream as sys::CUstream;
        // SAFETY: `stream` is a stream of this context and the buffers
        // outlive the queued work, by the trait's contract. Texture arguments
        // make the dispatch wait for the stream (their arrays are released after).
        let textures = unsafe { Textures::new(cuda, args, stream) }?;
        let mut storage = launch_slots(cuda, args, &textures, geometry)?;
        unsafe { queue_launch(cuda, &mut storage, geometry, stream, self.dependent_launches) }.map_err(|e| launch_error(cuda, e))?;
        unsafe { textures.copy_back(cuda) }?;
        let mut notes = dispatch_notes(geometry, options);
        notes.extend(uncollected(cuda, options));
        Ok(DispatchReport { device_time: None, wall_time: start.elapsed(), notes, findings: vec![], printed: vec![] })
    }
}

/// The note of a dispatch asked to collect the lines of a kernel that
/// prints, queued in a batch or on a stream: its lines reach standard
/// output when the work is synchronised, after the dispatch returns.
fn uncollected(cuda: &CudaKernel, options: &DispatchOptions) -> Option<String> {
    (options.collect_printed && cuda.prints).then(|| {
        format!(
            "kernel `{}` prints: in a batch or on a stream its printf lines are not collected; they reach standard output when the work is synchronised",
            cuda.kernel.name
        )
    })
}

/// Queues `cuda` on `stream` with one argument slot per kernel parameter,
/// in order (the driver copies them when the launch is queued), and the
/// dynamic shared memory its threadgroup arrays need.
///
/// With `dependent` the launch is a programmatic dependent of the kernel
/// before it in the stream: its threadgroups may be scheduled as that
/// kernel's last ones exit, before the whole grid has completed, and every
/// generated kernel's first statement (`griddepcontrol.wait`, the CUDA
/// prelude's `grid_dependency_wait`) waits for that grid's completion and
/// memory, so nothing is read or written early. On an H200 a second and a
/// third kernel start 1.3 and 2.5 µs sooner that way (two short kernels
/// behind a 10 µs one).
///
/// # Safety
/// `stream` is the legacy stream (null) or a stream of the bound context,
/// and the buffers the slots point at outlive the queued work.
unsafe fn queue_launch(
    cuda: &CudaKernel,
    storage: &mut [Slot],
    geometry: &DispatchGeometry,
    stream: sys::CUstream,
    dependent: bool,
) -> Result<(), result::DriverError> {
    let mut params: Vec<*mut c_void> = storage.iter_mut().map(|s| s.0.as_mut_ptr() as *mut c_void).collect();
    let ([gx, gy, gz], [bx, by, bz]) = (geometry.threadgroups, geometry.threads_per_threadgroup);
    // At most the device's opt-in limit, checked when the kernel was compiled.
    let dynamic_shared = cuda.source.dynamic_shared_bytes as u32;
    if !dependent {
        // SAFETY: by this function's contract; `params` points at the slots;
        // the function was allowed `dynamic_shared` bytes when it was loaded.
        return unsafe { result::launch_kernel(cuda.function.cu_function(), (gx, gy, gz), (bx, by, bz), dynamic_shared, stream, &mut params) };
    }
    // SAFETY: a plain-data union; all zeros is a valid value of each field.
    let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    value.programmaticStreamSerializationAllowed = 1;
    let mut attribute = sys::CUlaunchAttribute { id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, pad: [0; 4], value };
    let config = sys::CUlaunchConfig {
        gridDimX: gx,
        gridDimY: gy,
        gridDimZ: gz,
        blockDimX: bx,
        blockDimY: by,
        blockDimZ: bz,
        sharedMemBytes: dynamic_shared,
        hStream: stream,
        attrs: &mut attribute,
        numAttrs: 1,
    };
    // SAFETY: as above; `config` and its one attribute outlive the call.
    unsafe { sys::cuLaunchKernelEx(&config, cuda.function.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }.result()
}

fn launch_error(cuda: &CudaKernel, e: result::DriverError) -> RuntimeError {
    RuntimeError::Execution { kernel: cuda.kernel.name.clone(), message: format!("the CUDA launch failed: {e:?}") }
}

/// A CUDA dispatch's notes: the geometry's warnings, and that the
/// sanitizer did not run when it was asked for.
fn dispatch_notes(geometry: &DispatchGeometry, options: &DispatchOptions) -> Vec<String> {
    let mut notes = geometry.warnings.clone();
    if options.sanitize {
        notes.push("the sanitizer runs on the simulator only; this CUDA dispatch ran unchecked (use compute-sanitizer for GPU-side checks)".into());
    }
    notes
}

/// The optional features of a GPU of compute capability `major`.x: bf16
/// arithmetic needs 8.0 (Ampere) or later; SIMD-group matrices run on every
/// GPU (tensor cores from 8.0, warp shuffles before); 2D textures on every
/// GPU (CUDA arrays with surface and texture objects, see `texture`);
/// device-scope fences (`__threadfence`) on every GPU; cooperative tensor
/// operations on every GPU (`wgmma` on sm_90a, the scalar path elsewhere;
/// `enigma_codegen::cuda` refuses the forms it does not generate).
fn cuda_features(major: i32) -> std::collections::BTreeSet<enigma_ir::Feature> {
    let mut features = std::collections::BTreeSet::new();
    if major >= 8 {
        features.insert(enigma_ir::Feature::Bfloat16);
    }
    features.insert(enigma_ir::Feature::SimdgroupMatrix);
    features.insert(enigma_ir::Feature::Texture2d);
    features.insert(enigma_ir::Feature::DeviceFence);
    features.insert(enigma_ir::Feature::CooperativeTensors);
    features
}
