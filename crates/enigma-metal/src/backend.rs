//! The objc2-metal implementation of [`enigma_backend::Backend`] (macOS
//! only): devices, pipelines, shared buffers, and per-dispatch `MTLTexture`s
//! (see the crate documentation). Type-checked for aarch64-apple-darwin, not
//! yet run on a Mac.

use crate::mapping::{self, PipelineKey};
use crate::shader_log::{Collection, ShaderLog};
use enigma_backend::{
    own_buffer, own_kernel, ArgValue, Backend, BufferStorage, CompiledKernel, DeviceInfo, DeviceKind, DispatchGeometry, DispatchMode,
    DispatchOptions, DispatchReport, RuntimeError, SpecValues, TextureDesc,
};
use enigma_codegen::msl;
use enigma_ir::{Kernel, KernelInfo, Literal, ParamId, ParamKind, Scalar, TextureAccess};
use objc2::rc::{autoreleasepool, Retained};
use objc2::runtime::ProtocolObject;
use objc2_foundation::{NSError, NSString};
use objc2_metal::{
    MTLBlitCommandEncoder, MTLBuffer, MTLCommandBuffer, MTLCommandBufferDescriptor, MTLCommandBufferStatus, MTLCommandEncoder, MTLCommandQueue,
    MTLCompileOptions, MTLComputeCommandEncoder, MTLComputePipelineState, MTLCreateSystemDefaultDevice, MTLDataType,
    MTLDevice, MTLFunctionConstantValues, MTLGPUFamily, MTLLanguageVersion, MTLLibrary, MTLMathFloatingPointFunctions,
    MTLMathMode, MTLOrigin, MTLPixelFormat, MTLRegion, MTLResourceOptions, MTLSize, MTLStorageMode, MTLTexture,
    MTLTextureDescriptor, MTLTextureType, MTLTextureUsage,
};
use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

// `MTLCreateSystemDefaultDevice` returns nil in a process that does not link
// CoreGraphics (objc2-metal's documentation says so); link it here so that
// command-line tools and test binaries find the GPU.
#[link(name = "CoreGraphics", kind = "framework")]
extern "C" {}

type Device = ProtocolObject<dyn MTLDevice>;
type Queue = ProtocolObject<dyn MTLCommandQueue>;
type Library = ProtocolObject<dyn MTLLibrary>;
type PipelineState = ProtocolObject<dyn MTLComputePipelineState>;
type MtlBuffer = ProtocolObject<dyn MTLBuffer>;
type MtlTexture = ProtocolObject<dyn MTLTexture>;

const BACKEND: &str = "metal";

/// How [`MetalBackend`] compiles kernels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetalOptions {
    /// Options of the MSL generator. Its `language_version` is also the
    /// `MTLCompileOptions.languageVersion` the source is compiled under.
    pub msl: msl::Options,
    /// Let the Metal compiler use fast math (`MTLMathModeFast` and fast
    /// single-precision functions). Off by default: enigma's semantics are
    /// IEEE arithmetic with precise `metal::` math functions, and kernels ask
    /// for fast variants explicitly (`fast::exp`), which this does not affect.
    pub fast_math: bool,
}

/// The system's default Metal GPU.
pub struct MetalBackend {
    device: Retained<Device>,
    queue: Retained<Queue>,
    info: DeviceInfo,
    options: MetalOptions,
    /// Whether the device has Metal 4 (the Metal4 family on macOS 26 or
    /// later): kernels with cooperative tensor operations are then written
    /// for MSL 4.0, with MetalPerformancePrimitives.
    metal4: bool,
    /// Whether `dispatchThreads` (non-uniform threadgroups) is supported:
    /// GPU families Apple4 and later, and Mac2.
    non_uniform_threadgroups: bool,
    /// Whether CPU and GPU share memory (`hasUnifiedMemory`): textures are
    /// then shared, else managed ([`mapping::texture_storage_mode`]).
    unified_memory: bool,
    /// Libraries by generated source.
    libraries: Mutex<HashMap<String, Retained<Library>>>,
    /// Pipelines by generated source and specialisation values.
    pipelines: Mutex<HashMap<PipelineKey, Retained<PipelineState>>>,
    /// The log state of dispatches of kernels that print, made on the first.
    shader_log: Mutex<Option<Arc<ShaderLog>>>,
    /// Where printed lines go instead of standard output
    /// ([`MetalBackend::printing_to`]).
    printed: Option<Arc<Mutex<Vec<String>>>>,
}

impl std::fmt::Debug for MetalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetalBackend")
            .field("info", &self.info)
            .field("options", &self.options)
            .field("metal4", &self.metal4)
            .field("non_uniform_threadgroups", &self.non_uniform_threadgroups)
            .field("unified_memory", &self.unified_memory)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves no broken invariant
    // (caches hold finished objects; buffer locks guard no Rust data).
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Metal's own words for a failure: the error's localised description
/// (for compilation, the compiler's log).
fn describe(error: &NSError) -> String {
    error.localizedDescription().to_string()
}

fn backend_err(message: String) -> RuntimeError {
    RuntimeError::Backend { backend: BACKEND, message }
}

impl MetalBackend {
    /// Opens the system's default Metal device with default options.
    pub fn new() -> Result<MetalBackend, RuntimeError> {
        MetalBackend::with_options(MetalOptions::default())
    }

    /// Opens the system's default Metal device.
    pub fn with_options(options: MetalOptions) -> Result<MetalBackend, RuntimeError> {
        autoreleasepool(|_| {
            let unavailable = |reason: &str| RuntimeError::Unavailable { device: BACKEND.into(), reason: reason.into() };
            let device = MTLCreateSystemDefaultDevice()
                .ok_or_else(|| unavailable("no Metal device (MTLCreateSystemDefaultDevice returned nil)"))?;
            let queue = device.newCommandQueue().ok_or_else(|| unavailable("Metal could not create a command queue"))?;
            let name = device.name().to_string();
            // MSL 4.0 and MetalPerformancePrimitives: the Metal4 family, on
            // macOS 26 or later (older systems do not know the family).
            let metal4 = objc2::available!(macos = 26.0) && device.supportsFamily(MTLGPUFamily::Metal4);
            let families = mapping::GpuFamilies {
                apple7: device.supportsFamily(MTLGPUFamily::Apple7),
                mac2: device.supportsFamily(MTLGPUFamily::Mac2),
                metal4,
            };
            let features = mapping::device_features(&options.msl, families);
            let info = DeviceInfo {
                kind: DeviceKind::Metal,
                max_threads_per_threadgroup: mapping::device_max_threads(device.maxThreadsPerThreadgroup().width),
                max_threadgroup_memory_bytes: device.maxThreadgroupMemoryLength() as u64,
                // Apple GPUs run 32-wide SIMD groups; each pipeline reports
                // Metal's figure as `thread_execution_width`.
                simd_width: 32,
                compute_units: mapping::compute_units(&name),
                memory_bytes: Some(device.recommendedMaxWorkingSetSize()),
                // MSL 3.1's `bfloat`, which the generated code targets, and
                // 2D textures (MTLTextures made per dispatch) everywhere;
                // SIMD-group matrices and cooperative tensors on Apple7 and
                // Mac2 GPUs; device-scope fences on Apple silicon where the
                // options ask for MSL 3.2.
                cooperative_lowering: mapping::cooperative_lowering(&features, families),
                features,
                read_write_textures: mapping::read_write_tier(device.readWriteTextureSupport().0),
                name,
            };
            let non_uniform_threadgroups =
                device.supportsFamily(MTLGPUFamily::Apple4) || device.supportsFamily(MTLGPUFamily::Mac2);
            let unified_memory = device.hasUnifiedMemory();
            Ok(MetalBackend {
                device,
                queue,
                info,
                options,
                metal4,
                non_uniform_threadgroups,
                unified_memory,
                libraries: Mutex::new(HashMap::new()),
                pipelines: Mutex::new(HashMap::new()),
                shader_log: Mutex::new(None),
                printed: None,
            })
        })
    }

    /// The backend appending the lines kernels `print` (and the note of
    /// those left out) to `lines` instead of writing them to standard
    /// output, as `SimBackend::printing_to`.
    pub fn printing_to(mut self, lines: Arc<Mutex<Vec<String>>>) -> MetalBackend {
        self.printed = Some(lines);
        self
    }

    /// The backend's log state (made on first use).
    fn shader_log(&self) -> Result<Arc<ShaderLog>, String> {
        let mut log = lock(&self.shader_log);
        if let Some(log) = &*log {
            return Ok(log.clone());
        }
        let made = Arc::new(autoreleasepool(|_| ShaderLog::new(&self.device))?);
        *log = Some(made.clone());
        Ok(made)
    }

    /// A dispatch's printed lines, to the sink of
    /// [`MetalBackend::printing_to`] or to standard output.
    fn write_printed(&self, lines: impl Iterator<Item = String>) {
        match &self.printed {
            Some(sink) => lock(sink).extend(lines),
            None => {
                let mut out = std::io::stdout().lock();
                for line in lines {
                    // A closed standard output loses the lines, as printf's would.
                    let _ = writeln!(out, "{line}");
                }
                let _ = out.flush();
            }
        }
    }

    /// Compile options for source written for MSL `version`; `logging` for
    /// a kernel that prints (`enableLogging`, macOS 15 and later).
    fn compile_options(&self, version: (u8, u8), logging: bool) -> Retained<MTLCompileOptions> {
        let options = MTLCompileOptions::new();
        options.setLanguageVersion(MTLLanguageVersion(mapping::language_version(version)));
        if logging && objc2::available!(macos = 15.0) {
            options.setEnableLogging(true);
        }
        if objc2::available!(macos = 15.0) {
            let (mode, functions) = if self.options.fast_math {
                (MTLMathMode::Fast, MTLMathFloatingPointFunctions::Fast)
            } else {
                (MTLMathMode::Safe, MTLMathFloatingPointFunctions::Precise)
            };
            options.setMathMode(mode);
            options.setMathFloatingPointFunctions(functions);
        } else {
            // `mathMode` is new in macOS 15; before it, this is the switch.
            #[allow(deprecated)]
            options.setFastMathEnabled(self.options.fast_math);
        }
        options
    }

    /// The library compiled from `source`, written for MSL `version`, with
    /// shader logging where `logging` (cached by source: a kernel that
    /// prints has source of its own).
    fn library(&self, kernel: &str, source: &str, version: (u8, u8), logging: bool) -> Result<Retained<Library>, RuntimeError> {
        let mut libraries = lock(&self.libraries);
        if let Some(library) = libraries.get(source) {
            return Ok(library.clone());
        }
        let library = self
            .device
            .newLibraryWithSource_options_error(&NSString::from_str(source), Some(&self.compile_options(version, logging)))
            .map_err(|e| backend_err(format!("kernel `{kernel}`: the Metal compiler rejected the generated MSL: {}", describe(&e))))?;
        libraries.insert(source.to_string(), library.clone());
        Ok(library)
    }

    /// The pipeline state of `entry` in `source` with the function constants
    /// `values` (one per specialisation constant, in declaration order: the
    /// MSL declares constant `i` as `[[function_constant(i)]]`); cached.
    fn pipeline(&self, kernel: &str, source: &str, version: (u8, u8), logging: bool, entry: &str, values: &[Literal]) -> Result<Retained<PipelineState>, RuntimeError> {
        let key = PipelineKey::new(source, values);
        if let Some(pipeline) = lock(&self.pipelines).get(&key) {
            return Ok(pipeline.clone());
        }
        let library = self.library(kernel, source, version, logging)?;
        let constants = MTLFunctionConstantValues::new();
        for (index, value) in values.iter().enumerate() {
            let (bytes, _len) = mapping::spec_constant_bytes(*value);
            // SAFETY: `bytes` holds the value in the layout of `data_type(value.ty)`
            // (at least as many bytes as that type has) and outlives the call,
            // which copies the value; `index` is the constant's
            // `[[function_constant(index)]]` in the generated source.
            unsafe {
                constants.setConstantValue_type_atIndex(
                    NonNull::from(&bytes).cast::<c_void>(),
                    data_type(value.ty),
                    index,
                );
            }
        }
        let function = library
            .newFunctionWithName_constantValues_error(&NSString::from_str(entry), &constants)
            .map_err(|e| backend_err(format!("kernel `{kernel}`: Metal could not specialise function `{entry}`: {}", describe(&e))))?;
        let pipeline = self
            .device
            .newComputePipelineStateWithFunction_error(&function)
            .map_err(|e| backend_err(format!("kernel `{kernel}`: Metal could not build a compute pipeline: {}", describe(&e))))?;
        lock(&self.pipelines).insert(key, pipeline.clone());
        Ok(pipeline)
    }
}

/// One texture argument of a dispatch: the `MTLTexture` made for it, its
/// `[[texture(n)]]` slot and the buffer its texels live in.
struct TextureBinding<'a> {
    texture: Retained<MtlTexture>,
    index: usize,
    storage: &'a MetalBuffer,
    desc: TextureDesc,
    /// Whether the kernel may write it (its texels are copied back).
    written: bool,
}

/// The whole texture as a region of mip level 0.
fn texture_region(desc: &TextureDesc) -> MTLRegion {
    MTLRegion {
        origin: MTLOrigin { x: 0, y: 0, z: 0 },
        size: MTLSize { width: desc.width as usize, height: desc.height as usize, depth: 1 },
    }
}

impl MetalBackend {
    /// A 2D `MTLTexture` of `desc` for a parameter of `access`, holding a
    /// copy of the texels in `storage`.
    ///
    /// The caller holds `storage`'s host lock.
    fn upload_texture(&self, kernel: &str, storage: &MetalBuffer, desc: TextureDesc, access: TextureAccess) -> Result<Retained<MtlTexture>, RuntimeError> {
        let descriptor = MTLTextureDescriptor::new();
        descriptor.setTextureType(MTLTextureType::Type2D);
        descriptor.setPixelFormat(MTLPixelFormat(mapping::pixel_format(desc.format)));
        // SAFETY: each side is 1 to 16384 texels, the limit of every GPU
        // Metal 3 runs on (`check_dispatch` checked `desc.check_sides()`).
        unsafe {
            descriptor.setWidth(desc.width as usize);
            descriptor.setHeight(desc.height as usize);
        }
        descriptor.setUsage(MTLTextureUsage::from_bits_retain(mapping::texture_usage(access)));
        descriptor.setStorageMode(MTLStorageMode(mapping::texture_storage_mode(self.unified_memory)));
        let texture = self
            .device
            .newTextureWithDescriptor(&descriptor)
            .ok_or_else(|| backend_err(format!("kernel `{kernel}`: Metal could not create a {desc} texture")))?;
        // SAFETY: `storage` holds `desc.len_bytes()` bytes (checked by
        // `check_dispatch`), which are `height` rows of `bytes_per_row`
        // bytes; its shared `contents()` is valid for them and no GPU work
        // uses it (the caller holds its host lock); Metal copies them
        // during the call.
        unsafe {
            texture.replaceRegion_mipmapLevel_withBytes_bytesPerRow(
                texture_region(&desc),
                0,
                storage.buffer.contents(),
                mapping::texture_bytes_per_row(&desc),
            );
        }
        Ok(texture)
    }
}

/// The `MTLDataType` of a function constant of scalar type `scalar`.
fn data_type(scalar: Scalar) -> MTLDataType {
    match scalar {
        Scalar::Bool => MTLDataType::Bool,
        Scalar::I8 => MTLDataType::Char,
        Scalar::U8 => MTLDataType::UChar,
        Scalar::I16 => MTLDataType::Short,
        Scalar::U16 => MTLDataType::UShort,
        Scalar::I32 => MTLDataType::Int,
        Scalar::U32 => MTLDataType::UInt,
        Scalar::I64 => MTLDataType::Long,
        Scalar::U64 => MTLDataType::ULong,
        Scalar::F16 => MTLDataType::Half,
        Scalar::BF16 => MTLDataType::BFloat,
        Scalar::F32 => MTLDataType::Float,
    }
}

/// A shared-storage `MTLBuffer`: the CPU reads and writes it through
/// `contents()`, the GPU uses the same memory.
pub struct MetalBuffer {
    buffer: Retained<MtlBuffer>,
    /// The size asked for (the `MTLBuffer` has at least one byte).
    len: usize,
    /// Serialises host access to the contents: held by `read` and `write`,
    /// and by a dispatch that uses the buffer until the GPU has finished.
    host_access: Mutex<()>,
}

// SAFETY: Metal's buffer objects may be used from any thread (unlike command
// buffers and encoders, which this crate never lets leave one call); the only
// unsynchronised state is the contents, and every host access to them holds
// `host_access`, as does every dispatch that lets the GPU touch them.
unsafe impl Send for MetalBuffer {}
// SAFETY: as for `Send`.
unsafe impl Sync for MetalBuffer {}

impl std::fmt::Debug for MetalBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetalBuffer").field("len", &self.len).finish_non_exhaustive()
    }
}

impl MetalBuffer {
    fn check_range(&self, offset: usize, len: usize) -> Result<(), RuntimeError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(RuntimeError::BufferRange { offset, len, size: self.len }),
        }
    }

    /// The underlying `MTLBuffer`.
    pub fn mtl_buffer(&self) -> &ProtocolObject<dyn MTLBuffer> {
        &self.buffer
    }
}

impl BufferStorage for MetalBuffer {
    fn len_bytes(&self) -> usize {
        self.len
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<(), RuntimeError> {
        self.check_range(offset, data.len())?;
        let _guard = lock(&self.host_access);
        // SAFETY: a shared-storage buffer's `contents()` points at its
        // `length() >= self.len` bytes for the buffer's life; the range was
        // checked; no GPU work uses the buffer while `host_access` is held,
        // and `data` cannot overlap memory only Metal hands out.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.buffer.contents().as_ptr().cast::<u8>().add(offset), data.len());
        }
        Ok(())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), RuntimeError> {
        self.check_range(offset, out.len())?;
        let _guard = lock(&self.host_access);
        // SAFETY: as in `write`, with the copy the other way.
        unsafe {
            std::ptr::copy_nonoverlapping(self.buffer.contents().as_ptr().cast::<u8>().add(offset), out.as_mut_ptr(), out.len());
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A compute pipeline state and what Metal says about it.
pub struct MetalKernel {
    kernel: Kernel,
    /// The kernel prints: its dispatches collect shader logs.
    prints: bool,
    source: String,
    entry_point: String,
    pipeline: Retained<PipelineState>,
    max_total_threads_per_threadgroup: u32,
    thread_execution_width: u32,
    static_threadgroup_memory_length: u64,
}

impl std::fmt::Debug for MetalKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetalKernel")
            .field("kernel", &self.kernel.name)
            .field("entry_point", &self.entry_point)
            .field("max_total_threads_per_threadgroup", &self.max_total_threads_per_threadgroup)
            .field("thread_execution_width", &self.thread_execution_width)
            .field("static_threadgroup_memory_length", &self.static_threadgroup_memory_length)
            .finish_non_exhaustive()
    }
}

impl MetalKernel {
    /// The generated MSL the pipeline was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The kernel function's name in [`MetalKernel::source`].
    pub fn entry_point(&self) -> &str {
        &self.entry_point
    }
}

impl CompiledKernel for MetalKernel {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    fn max_total_threads_per_threadgroup(&self) -> u32 {
        self.max_total_threads_per_threadgroup
    }
    fn thread_execution_width(&self) -> u32 {
        self.thread_execution_width
    }
    fn static_threadgroup_memory_length(&self) -> u64 {
        self.static_threadgroup_memory_length
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One argument of a dispatch, ready for the encoder.
enum Slot<'a> {
    Buffer(&'a MetalBuffer),
    Bytes(&'a [u8]),
    /// A texture: its buffer and description, and the parameter's access.
    Texture(&'a MetalBuffer, TextureDesc, TextureAccess),
}

fn mtl_size([width, height, depth]: [u32; 3]) -> MTLSize {
    MTLSize { width: width as usize, height: height as usize, depth: depth as usize }
}

impl Backend for MetalBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn allocate(&self, bytes: usize) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        // Metal refuses empty buffers; keep one byte so every buffer exists.
        let length = bytes.max(1);
        let buffer = autoreleasepool(|_| {
            self.device.newBufferWithLength_options(length, MTLResourceOptions::StorageModeShared)
        })
        .ok_or_else(|| backend_err(format!("Metal could not allocate a buffer of {bytes} bytes")))?;
        // SAFETY: the new shared buffer's `contents()` points at its `length`
        // bytes, and nothing else can reach the buffer yet.
        unsafe { std::ptr::write_bytes(buffer.contents().as_ptr().cast::<u8>(), 0, length) };
        Ok(Box::new(MetalBuffer { buffer, len: bytes, host_access: Mutex::new(()) }))
    }

    fn compile(&self, kernel: &Kernel, info: &KernelInfo, spec: &SpecValues) -> Result<Box<dyn CompiledKernel>, RuntimeError> {
        if info.prints && !objc2::available!(macos = 15.0) {
            // Shader logging (`MTLLogState`) is new in macOS 15.
            return Err(backend_err(format!(
                "kernel `{}` prints (enigma.print), which Metal's shader logging serves from macOS 15 on; this system is older (run it on the simulator or CUDA to see its lines)",
                kernel.name
            )));
        }
        let options = mapping::kernel_msl_options(&self.options.msl, info, self.metal4);
        let source = msl::write_string(kernel, info, &options).map_err(|e| backend_err(e.to_string()))?;
        let entry_point = msl::entry_point(kernel);
        let values = spec.resolve(kernel);
        let pipeline =
            autoreleasepool(|_| self.pipeline(&kernel.name, &source, options.language_version, info.prints, &entry_point, &values))?;
        mapping::check_simd_width(&kernel.name, info, pipeline.threadExecutionWidth() as u32).map_err(backend_err)?;
        Ok(Box::new(MetalKernel {
            kernel: kernel.clone(),
            prints: info.prints,
            max_total_threads_per_threadgroup: pipeline.maxTotalThreadsPerThreadgroup() as u32,
            thread_execution_width: pipeline.threadExecutionWidth() as u32,
            static_threadgroup_memory_length: pipeline.staticThreadgroupMemoryLength() as u64,
            source,
            entry_point,
            pipeline,
        }))
    }

    fn dispatch(
        &self,
        compiled: &dyn CompiledKernel,
        args: &[ArgValue<'_>],
        geometry: &DispatchGeometry,
        options: &DispatchOptions,
    ) -> Result<DispatchReport, RuntimeError> {
        let start = Instant::now();
        let name = &compiled.kernel().name;
        let metal: &MetalKernel = own_kernel(compiled, "metal")?;
        let execution = |message: String| RuntimeError::Execution { kernel: name.clone(), message };
        if geometry.mode == DispatchMode::Threads && !self.non_uniform_threadgroups {
            return Err(execution(format!(
                "{} does not support non-uniform threadgroups (dispatch_threads); use dispatch_threadgroups with a bounds check",
                self.info.name
            )));
        }
        // Each argument as Metal takes it: a Metal buffer, bytes, or a
        // texture's buffer.
        let mut slots: Vec<Slot<'_>> = Vec::with_capacity(args.len());
        for (arg, param) in args.iter().zip(&metal.kernel.params) {
            slots.push(match (arg, param.kind) {
                (ArgValue::Buffer { storage, .. }, _) => Slot::Buffer(own_buffer(*storage, "metal", name)?),
                (ArgValue::Value { ty, bytes }, _) => Slot::Bytes(&bytes[..mapping::value_arg_len(*ty).min(bytes.len())]),
                (ArgValue::Texture { storage, desc }, ParamKind::Texture { access, .. }) => {
                    Slot::Texture(own_buffer(*storage, "metal", name)?, *desc, access)
                }
                // `check_dispatch` matched every argument to its parameter.
                (ArgValue::Texture { desc, .. }, _) => {
                    return Err(execution(format!("a {desc} texture was passed for `{}`, which is not a texture", param.name)))
                }
            });
        }
        let buffers: Vec<&MetalBuffer> = slots
            .iter()
            .filter_map(|s| match s {
                Slot::Buffer(b) | Slot::Texture(b, ..) => Some(*b),
                Slot::Bytes(_) => None,
            })
            .collect();
        // Hold every buffer's host lock (textures' too) until the GPU is
        // done with it and written textures are copied back.
        let _guards: Vec<MutexGuard<'_, ()>> =
            mapping::distinct_by_address(&buffers).into_iter().map(|i| lock(&buffers[i].host_access)).collect();

        // A kernel that prints: the process's printing lock, then the log
        // state its command buffer reports to.
        let collection = metal.prints.then(Collection::start);
        let shader_log = if metal.prints { Some(self.shader_log().map_err(execution)?) } else { None };

        let device_time = autoreleasepool(|_| {
            // The parameter's slot in its table: `[[buffer(n)]]` for buffers
            // and values, `[[texture(n)]]` for textures.
            let binding = |i: usize| metal.kernel.binding(ParamId(i as u32)) as usize;
            let mut textures: Vec<TextureBinding<'_>> = vec![];
            for (i, slot) in slots.iter().enumerate() {
                if let Slot::Texture(storage, desc, access) = slot {
                    textures.push(TextureBinding {
                        texture: self.upload_texture(name, storage, *desc, *access)?,
                        index: binding(i),
                        storage,
                        desc: *desc,
                        written: access.can_write(),
                    });
                }
            }
            let command_buffer = match &shader_log {
                Some(log) => {
                    let descriptor = MTLCommandBufferDescriptor::new();
                    descriptor.setLogState(Some(&log.state));
                    self.queue.commandBufferWithDescriptor(&descriptor)
                }
                None => self.queue.commandBuffer(),
            }
            .ok_or_else(|| execution("Metal could not create a command buffer".into()))?;
            let encoder = command_buffer
                .computeCommandEncoder()
                .ok_or_else(|| execution("Metal could not create a compute command encoder".into()))?;
            encoder.setComputePipelineState(&metal.pipeline);
            for (i, slot) in slots.iter().enumerate() {
                let index = binding(i);
                match slot {
                    Slot::Buffer(buffer) => {
                        // SAFETY: the buffer lives (borrowed from `args`) until the
                        // command buffer has completed below, and the command
                        // buffer also retains it; `index` is the parameter's
                        // `[[buffer(index)]]`; its host lock is held.
                        unsafe { encoder.setBuffer_offset_atIndex(Some(&buffer.buffer), 0, index) };
                    }
                    Slot::Bytes(bytes) => {
                        // SAFETY: `bytes` is the value in MSL layout (its type's
                        // size, at most 32 bytes, well under setBytes' 4 KiB);
                        // Metal copies them during the call; `index` is the
                        // parameter's `constant T& [[buffer(index)]]`.
                        unsafe {
                            encoder.setBytes_length_atIndex(NonNull::from(*bytes).cast::<c_void>(), bytes.len(), index)
                        };
                    }
                    // Bound below, from `textures`.
                    Slot::Texture(..) => {}
                }
            }
            for texture in &textures {
                // SAFETY: the texture lives in `textures` until the command
                // buffer has completed, which also retains it; `index` is the
                // parameter's `[[texture(index)]]`.
                unsafe { encoder.setTexture_atIndex(Some(&texture.texture), texture.index) };
            }
            let threads_per_threadgroup = mtl_size(geometry.threads_per_threadgroup);
            match geometry.mode {
                DispatchMode::Threads => {
                    encoder.dispatchThreads_threadsPerThreadgroup(mtl_size(geometry.grid), threads_per_threadgroup)
                }
                DispatchMode::Threadgroups => encoder
                    .dispatchThreadgroups_threadsPerThreadgroup(mtl_size(geometry.threadgroups), threads_per_threadgroup),
            }
            encoder.endEncoding();
            if !self.unified_memory {
                // A managed texture the GPU wrote reaches the CPU's copy only
                // through a synchronisation.
                let written: Vec<&TextureBinding<'_>> = textures.iter().filter(|t| t.written).collect();
                if !written.is_empty() {
                    let blit = command_buffer
                        .blitCommandEncoder()
                        .ok_or_else(|| execution("Metal could not create a blit command encoder".into()))?;
                    for binding in written {
                        blit.synchronizeResource(ProtocolObject::from_ref(&*binding.texture));
                    }
                    blit.endEncoding();
                }
            }
            command_buffer.commit();
            command_buffer.waitUntilCompleted();
            let status = command_buffer.status();
            if status != MTLCommandBufferStatus::Completed {
                let reason = match command_buffer.error() {
                    Some(error) => describe(&error),
                    None => format!("it ended with status {}", status.0),
                };
                return Err(execution(format!("the Metal command buffer failed: {reason}")));
            }
            for binding in textures.iter().filter(|t| t.written) {
                // SAFETY: the storage holds `desc.len_bytes()` bytes, `height`
                // rows of `bytes_per_row`, at its shared `contents()`; the GPU
                // has finished (the command buffer completed) and this
                // dispatch holds the storage's host lock.
                unsafe {
                    binding.texture.getBytes_bytesPerRow_fromRegion_mipmapLevel(
                        binding.storage.buffer.contents(),
                        mapping::texture_bytes_per_row(&binding.desc),
                        texture_region(&binding.desc),
                        0,
                    );
                }
            }
            Ok(mapping::gpu_time(command_buffer.GPUStartTime(), command_buffer.GPUEndTime()))
        })?;

        let mut notes = geometry.warnings.clone();
        let mut printed = vec![];
        if let Some(collection) = collection {
            let (lines, note) = mapping::shown_log_lines(collection.finish());
            let lines = lines.into_iter().chain(note.clone());
            if options.collect_printed {
                printed.extend(lines);
            } else {
                self.write_printed(lines);
            }
            notes.extend(note);
        }
        if options.sanitize {
            notes.push(
                "the sanitizer runs on the simulator only; this Metal dispatch ran unchecked (Xcode's Metal validation and shader validation check on the GPU)"
                    .into(),
            );
        }
        Ok(DispatchReport { device_time, wall_time: start.elapsed(), notes, findings: vec![], printed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_backend::{ReadWriteTier, TextureFormat};
    use objc2_metal::MTLReadWriteTextureTier;

    /// `mapping`'s raw numbers are objc2-metal's constants.
    #[test]
    fn mapping_matches_objc2_metals_constants() {
        let formats = [
            (TextureFormat::R8Unorm, MTLPixelFormat::R8Unorm),
            (TextureFormat::Rgba8Unorm, MTLPixelFormat::RGBA8Unorm),
            (TextureFormat::R16Float, MTLPixelFormat::R16Float),
            (TextureFormat::Rgba16Float, MTLPixelFormat::RGBA16Float),
            (TextureFormat::R32Float, MTLPixelFormat::R32Float),
            (TextureFormat::Rgba32Float, MTLPixelFormat::RGBA32Float),
            (TextureFormat::R32Uint, MTLPixelFormat::R32Uint),
            (TextureFormat::R32Sint, MTLPixelFormat::R32Sint),
        ];
        for (format, metal) in formats {
            assert_eq!(MTLPixelFormat(mapping::pixel_format(format)), metal, "{format}");
        }
        assert_eq!(mapping::read_write_tier(MTLReadWriteTextureTier::TierNone.0), ReadWriteTier::None);
        assert_eq!(mapping::read_write_tier(MTLReadWriteTextureTier::Tier1.0), ReadWriteTier::Tier1);
        assert_eq!(mapping::read_write_tier(MTLReadWriteTextureTier::Tier2.0), ReadWriteTier::Tier2);
        let read_write = MTLTextureUsage::from_bits_retain(mapping::texture_usage(TextureAccess::ReadWrite));
        assert_eq!(read_write, MTLTextureUsage::ShaderRead | MTLTextureUsage::ShaderWrite);
        assert_eq!(MTLStorageMode(mapping::texture_storage_mode(true)), MTLStorageMode::Shared);
        assert_eq!(MTLStorageMode(mapping::texture_storage_mode(false)), MTLStorageMode::Managed);
    }
}
