//! The runtime API every front end uses: pick a [`Device`], make [`Buffer`]s,
//! [`Texture`]s and [`Pipeline`]s, and dispatch them in Metal's two modes.
//!
//! Textures (2D, in the formats of [`TextureFormat`]; read, write, read_write
//! and sample) run on the simulator and CUDA (through CUDA arrays); the Metal
//! backend binds them as per-dispatch `MTLTexture`s (type-checked, not run on
//! a Mac). A `read_write` texture must have a format the device's
//! [`DeviceInfo::read_write_textures`] tier allows, or the dispatch fails
//! with [`RuntimeError::TextureReadWrite`].
//!
//! ```
//! use enigma_runtime::{Arg, Device, Runtime};
//! use enigma_ir::{builder::*, Access, Type};
//!
//! let mut k = KernelBuilder::new("add_one");
//! let data = k.buffer("data", Type::U32, Access::ReadWrite);
//! let tid = k.let_("tid", thread_position_in_grid().x());
//! k.store(data.at(tid), data.get(tid) + 1u32);
//! let kernel = k.finish().unwrap();
//!
//! let rt = Runtime::new(Device::Sim).unwrap();
//! let buf = rt.buffer_from(&[1u32, 2, 3]).unwrap();
//! let pipeline = rt.pipeline(&kernel).unwrap();
//! rt.dispatch_threads(&pipeline, &[Arg::from(&buf)], [3, 1, 1], [32, 1, 1]).unwrap();
//! assert_eq!(buf.to_vec::<u32>().unwrap(), vec![2, 3, 4]);
//! ```

use enigma_backend::{ArgValue, Backend, BufferStorage, CompiledKernel, DispatchOptions};
pub use enigma_backend::{
    CooperativeLowering, DeviceInfo, DeviceKind, DispatchGeometry, DispatchReport, Finding, FindingKind, ReadWriteTier, RuntimeError, Severity, SpecValues, StopReason,
    TextureDesc, TextureFormat, ThreadRef,
};
use enigma_ir::{validate, Kernel, Literal, Scalar, Type, ValidationOptions};
use std::sync::Arc;

/// Which device a [`Runtime`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// Metal where present, else CUDA, else the simulator.
    Auto,
    /// The CPU simulator.
    Sim,
    Metal,
    Cuda,
}

impl std::str::FromStr for Device {
    type Err = RuntimeError;
    fn from_str(s: &str) -> Result<Device, RuntimeError> {
        Ok(match s {
            "auto" => Device::Auto,
            "sim" | "cpu" | "simulator" => Device::Sim,
            "metal" => Device::Metal,
            "cuda" => Device::Cuda,
            other => {
                return Err(RuntimeError::Unavailable {
                    device: other.into(),
                    reason: "unknown device; expected auto, sim (or cpu), metal or cuda".into(),
                })
            }
        })
    }
}

/// A connection to one device. A runtime made by [`Runtime::on_stream`]
/// queues its dispatches on that stream without waiting for them (on CUDA;
/// the simulator runs every dispatch to completion).
#[derive(Clone, Debug)]
pub struct Runtime {
    backend: Arc<dyn Backend>,
    stream: Option<u64>,
}

impl Runtime {
    /// Opens `device`. `Device::Auto` falls back to the simulator when no GPU
    /// backend is available.
    pub fn new(device: Device) -> Result<Runtime, RuntimeError> {
        let backend: Arc<dyn Backend> = match device {
            Device::Auto => Self::first_available(),
            Device::Sim => Arc::new(enigma_sim::SimBackend::new()),
            Device::Metal => Self::metal()?,
            Device::Cuda => Arc::new(enigma_cuda::CudaBackend::new()?),
        };
        Ok(Runtime { backend, stream: None })
    }

    /// The Metal backend on the system's default GPU (macOS only).
    #[cfg(target_os = "macos")]
    fn metal() -> Result<Arc<dyn Backend>, RuntimeError> {
        Ok(Arc::new(enigma_metal::MetalBackend::new()?))
    }

    #[cfg(not(target_os = "macos"))]
    fn metal() -> Result<Arc<dyn Backend>, RuntimeError> {
        Err(RuntimeError::Unavailable {
            device: "metal".into(),
            reason: format!(
                "the Metal backend exists only on macOS, and this enigma was built for {}; use --device sim (or cuda on an NVIDIA machine)",
                std::env::consts::OS
            ),
        })
    }

    /// The backend `Device::Auto` picks: Metal on macOS when a device is
    /// present, else a CUDA GPU when the driver, NVRTC and a device are
    /// present, else the simulator.
    fn first_available() -> Arc<dyn Backend> {
        if let Ok(metal) = Self::metal() {
            return metal;
        }
        match enigma_cuda::CudaBackend::new() {
            Ok(cuda) => Arc::new(cuda),
            Err(_) => Arc::new(enigma_sim::SimBackend::new()),
        }
    }

    /// Opens a batch on this device: dispatches until [`Runtime::end_batch`]
    /// are queued back to back without a wait after each (on CUDA; the
    /// simulator runs each to completion anyway), so a multi-dispatch
    /// operation pays one launch-and-wait instead of one per dispatch.
    /// Reading a buffer inside the batch waits for what was queued before.
    /// A batch covers every dispatch on the device, from any thread.
    pub fn begin_batch(&self) -> Result<(), RuntimeError> {
        self.backend.begin_batch()
    }

    /// Opens a batch timed as the device runs it: the device waits up to
    /// `hold` before the batch's first dispatch while the host queues the
    /// batch, so [`Runtime::end_batch`]'s time is the dispatches' own, back
    /// to back, without the host's launch latency (which a single timed
    /// dispatch's `device_time` includes: the device idles from the start
    /// event until the launch reaches it). For benchmarks; each such batch
    /// costs `hold` of wall time, and host work slower than `hold` shows in
    /// the time again. On the simulator, a plain batch.
    pub fn begin_held_batch(&self, hold: std::time::Duration) -> Result<(), RuntimeError> {
        self.backend.begin_held_batch(hold)
    }

    /// Waits for the batch's dispatches: the device time from its first
    /// dispatch's start (or a held batch's end of waiting) to its last
    /// dispatch's end, where the backend measures one; `None` when nothing
    /// was dispatched. Host work after the last dispatch is not in it.
    pub fn end_batch(&self) -> Result<Option<std::time::Duration>, RuntimeError> {
        self.backend.end_batch()
    }

    /// A runtime over any backend.
    pub fn with_backend(backend: Arc<dyn Backend>) -> Runtime {
        Runtime { backend, stream: None }
    }

    /// The same device, dispatching on `stream` (a `CUstream` handle on
    /// CUDA; 0 is the legacy default stream): dispatches are queued there
    /// and return at once, outputs it allocates are zeroed there, and
    /// [`Runtime::synchronize`] or a read waits for them. The buffers a
    /// queued dispatch uses must stay allocated until it has run: buffers
    /// this runtime allocates are freed on `stream` after its queued work
    /// (so `stream` must outlive them) or with a wait; for memory wrapped
    /// with [`Runtime::buffer_from_device_memory`] that is its owner's duty,
    /// as for any work on that owner's stream.
    pub fn on_stream(&self, stream: u64) -> Runtime {
        Runtime { backend: self.backend.clone(), stream: Some(stream) }
    }

    /// The stream this runtime dispatches on, if one was given.
    pub fn stream(&self) -> Option<u64> {
        self.stream
    }

    /// Waits for every dispatch queued on the device (on any stream).
    pub fn synchronize(&self) -> Result<(), RuntimeError> {
        self.backend.synchronize()
    }

    /// A buffer over `len` bytes of another library's device memory at
    /// `address` (a CUDA device pointer from a torch or CuPy tensor), typed
    /// as `elem` when given: no copy is made and dropping the buffer frees
    /// nothing. Dispatches check its length like any buffer's. The
    /// simulator refuses (its memory is its own).
    ///
    /// # Safety
    /// The memory must belong to this runtime's device and context and stay
    /// allocated while the buffer, or a dispatch queued with it, lives.
    pub unsafe fn buffer_from_device_memory(&self, address: u64, len: usize, elem: Option<Type>) -> Result<Buffer, RuntimeError> {
        // SAFETY: forwarded from this function's contract.
        let storage = unsafe { self.backend.wrap_device_memory(address, len) }?;
        Ok(Buffer { storage: Arc::from(storage), elem })
    }

    pub fn device(&self) -> &DeviceInfo {
        self.backend.info()
    }

    /// A buffer holding a copy of `data`.
    pub fn buffer_from<T: Element>(&self, data: &[T]) -> Result<Buffer, RuntimeError> {
        let elem_bytes = T::TYPE.size_bytes() as usize;
        // Not stream-ordered: the host writes below are synchronous.
        let storage = self.backend.allocate(allocation_len(data.len() as u128 * elem_bytes as u128, Some(T::TYPE))?)?;
        // Written in chunks, so no host copy of the whole buffer is made.
        let mut chunk = Vec::with_capacity(CHUNK_ELEMENTS * elem_bytes);
        for (i, part) in data.chunks(CHUNK_ELEMENTS).enumerate() {
            chunk.clear();
            chunk.extend(part.iter().flat_map(|x| x.to_le_bytes_vec()));
            storage.write(i * CHUNK_ELEMENTS * elem_bytes, &chunk)?;
        }
        Ok(Buffer { storage: Arc::from(storage), elem: Some(T::TYPE) })
    }

    /// Zeroed device memory of `bytes` bytes (the size as asked for, which
    /// may not fit `usize`) for elements of `elem` (named in the error),
    /// ordered on this runtime's stream when it has one.
    fn allocate(&self, bytes: u128, elem: Option<Type>) -> Result<Box<dyn BufferStorage>, RuntimeError> {
        let len = allocation_len(bytes, elem)?;
        match self.stream {
            Some(stream) => self.backend.allocate_on_stream(len, stream),
            None => self.backend.allocate(len),
        }
    }

    /// A buffer of `len` zeroed elements of `T`.
    pub fn buffer_zeroed<T: Element>(&self, len: usize) -> Result<Buffer, RuntimeError> {
        self.buffer_of_type(T::TYPE, len)
    }

    /// A zeroed buffer of `len` elements of `elem` (e.g. `half4`).
    pub fn buffer_of_type(&self, elem: Type, len: usize) -> Result<Buffer, RuntimeError> {
        let storage = self.allocate(len as u128 * elem.size_bytes() as u128, Some(elem))?;
        Ok(Buffer { storage: Arc::from(storage), elem: Some(elem) })
    }

    /// A buffer with raw bytes, typed as elements of `elem`.
    pub fn buffer_from_bytes(&self, elem: Type, bytes: &[u8]) -> Result<Buffer, RuntimeError> {
        let storage = self.backend.allocate(bytes.len())?;
        storage.write(0, bytes)?;
        Ok(Buffer { storage: Arc::from(storage), elem: Some(elem) })
    }

    /// An untyped buffer of `len` bytes whose contents are unspecified until
    /// written (on CUDA it is not zeroed; the simulator zeroes it): for
    /// outputs every byte of which a dispatch writes before anything reads
    /// it. Ordered on this runtime's stream when it has one.
    pub fn buffer_uninit(&self, len: usize) -> Result<Buffer, RuntimeError> {
        Ok(Buffer { storage: Arc::from(self.backend.allocate_uninit(len, self.stream)?), elem: None })
    }

    /// A buffer of `len` zero bytes typed as elements of `elem`.
    pub fn buffer_zeroed_bytes(&self, elem: Type, len: usize) -> Result<Buffer, RuntimeError> {
        Ok(Buffer { storage: Arc::from(self.allocate(len as u128, Some(elem))?), elem: Some(elem) })
    }

    /// An untyped buffer of `len` zero bytes.
    pub fn buffer_bytes(&self, len: usize) -> Result<Buffer, RuntimeError> {
        Ok(Buffer { storage: Arc::from(self.allocate(len as u128, None)?), elem: None })
    }

    /// A `width`×`height` texture of `format`, every texel's bytes zero.
    pub fn texture(&self, format: TextureFormat, width: u32, height: u32) -> Result<Texture, RuntimeError> {
        let desc = texture_desc(format, width, height)?;
        Ok(Texture { storage: Arc::from(self.allocate(desc.len_bytes() as u128, None)?), desc })
    }

    /// A `width`×`height` texture of `format` holding `bytes`: its texels
    /// row by row, each the format's channels (RGBA order) little-endian —
    /// `width · height · format.bytes_per_texel()` bytes.
    pub fn texture_from_bytes(&self, format: TextureFormat, width: u32, height: u32, bytes: &[u8]) -> Result<Texture, RuntimeError> {
        let desc = texture_desc(format, width, height)?;
        if bytes.len() as u64 != desc.len_bytes() {
            return Err(RuntimeError::TextureSize {
                desc,
                problem: format!("{} bytes of texels given, it holds {} ({} per texel)", bytes.len(), desc.len_bytes(), format.bytes_per_texel()),
            });
        }
        let storage = self.backend.allocate(bytes.len())?;
        storage.write(0, bytes)?;
        Ok(Texture { storage: Arc::from(storage), desc })
    }

    /// A texture from channel values of `T` (u8 for the unorm8 formats, u16
    /// half bits for the float16 ones, f32, u32 or i32 for the 32-bit ones):
    /// `width · height · channels` of them, row by row.
    pub fn texture_from<T: Element>(&self, format: TextureFormat, width: u32, height: u32, channels: &[T]) -> Result<Texture, RuntimeError> {
        check_channel_type::<T>(texture_desc(format, width, height)?)?;
        let bytes: Vec<u8> = channels.iter().flat_map(|c| c.to_le_bytes_vec()).collect();
        self.texture_from_bytes(format, width, height, &bytes)
    }

    /// Validates `kernel` against this device's limits and compiles it.
    pub fn pipeline(&self, kernel: &Kernel) -> Result<Pipeline, RuntimeError> {
        self.pipeline_with(kernel, &SpecValues::default())
    }

    /// Like [`Runtime::pipeline`], with values for specialisation constants.
    pub fn pipeline_with(&self, kernel: &Kernel, spec: &SpecValues) -> Result<Pipeline, RuntimeError> {
        let options = ValidationOptions { max_threadgroup_memory_bytes: self.device().max_threadgroup_memory_bytes, ..ValidationOptions::default() };
        let info = validate(kernel, &options)?;
        enigma_backend::check_features(kernel, &info, self.device())?;
        enigma_backend::check_spec_values(kernel, spec)?;
        let compiled = self.backend.compile(kernel, &info, spec)?;
        Ok(Pipeline { compiled: Arc::from(compiled) })
    }

    /// Metal's `dispatchThreads`: `grid` counts threads; edge threadgroups
    /// are partial (non-uniform).
    pub fn dispatch_threads(&self, pipeline: &Pipeline, args: &[Arg<'_>], grid: [u32; 3], threads_per_threadgroup: [u32; 3]) -> Result<DispatchReport, RuntimeError> {
        self.dispatch(pipeline, args, DispatchMode::Threads, grid, threads_per_threadgroup, &DispatchOptions::default())
    }

    /// Metal's `dispatchThreadgroups`: `threadgroups` counts uniform
    /// threadgroups; the kernel bounds-checks.
    pub fn dispatch_threadgroups(&self, pipeline: &Pipeline, args: &[Arg<'_>], threadgroups: [u32; 3], threads_per_threadgroup: [u32; 3]) -> Result<DispatchReport, RuntimeError> {
        self.dispatch(pipeline, args, DispatchMode::Threadgroups, threadgroups, threads_per_threadgroup, &DispatchOptions::default())
    }

    /// A dispatch in either mode, with options.
    pub fn dispatch(
        &self,
        pipeline: &Pipeline,
        args: &[Arg<'_>],
        mode: DispatchMode,
        size: [u32; 3],
        threads_per_threadgroup: [u32; 3],
        options: &DispatchOptions,
    ) -> Result<DispatchReport, RuntimeError> {
        let values: Vec<ArgValue<'_>> = args.iter().map(Arg::value).collect();
        let compiled: &dyn CompiledKernel = pipeline.compiled.as_ref();
        let geometry = enigma_backend::check_dispatch(self.device(), compiled, &values, mode, size, threads_per_threadgroup)?;
        let report = match self.stream {
            Some(stream) => self.backend.dispatch_on_stream(compiled, &values, &geometry, options, stream)?,
            None => self.backend.dispatch(compiled, &values, &geometry, options)?,
        };
        if report.findings.iter().any(|f| f.severity == enigma_backend::Severity::Error) {
            return Err(RuntimeError::Sanitizer { kernel: pipeline.kernel().name.clone(), findings: report.findings });
        }
        Ok(report)
    }
}

/// Checks, before a run allocates them piece by piece, that `bytes` of host
/// memory (the size as asked for, possibly more than `usize` holds) can be
/// allocated now: a run sized by a user's numbers then fails with an error
/// naming `what` instead of aborting part-way when one of its vectors
/// cannot be allocated. The memory is released at once.
pub fn check_host_memory(what: &str, bytes: u128) -> Result<(), RuntimeError> {
    let len = usize::try_from(bytes).map_err(|_| RuntimeError::allocation(what, bytes))?;
    let mut probe: Vec<u8> = Vec::new();
    probe.try_reserve_exact(len).map_err(|_| RuntimeError::allocation(what, bytes))
}

pub use enigma_backend::DispatchMode;
pub use enigma_backend::DispatchOptions as Options;

/// `bytes` as a `usize`, or the allocation error naming a buffer of `elem`.
fn allocation_len(bytes: u128, elem: Option<Type>) -> Result<usize, RuntimeError> {
    usize::try_from(bytes).map_err(|_| {
        let what = match elem {
            Some(elem) => format!("a buffer of {elem} elements"),
            None => "a buffer".to_string(),
        };
        RuntimeError::allocation(what, bytes)
    })
}

/// The description of a `width`×`height` texture of `format`, once its
/// sides are checked (1 to [`MAX_TEXTURE_SIDE`] texels).
fn texture_desc(format: TextureFormat, width: u32, height: u32) -> Result<TextureDesc, RuntimeError> {
    let desc = TextureDesc { format, width, height };
    desc.check_sides()?;
    Ok(desc)
}

/// `T` must be the size of one channel of `desc`'s format.
fn check_channel_type<T: Element>(desc: TextureDesc) -> Result<(), RuntimeError> {
    let (format, size) = (desc.format, T::TYPE.size_bytes() as usize);
    if size != format.channel_bytes() {
        return Err(RuntimeError::TextureSize {
            desc,
            problem: format!("its channels are {} byte(s) each; {} has {size}", format.channel_bytes(), T::TYPE),
        });
    }
    Ok(())
}

pub use enigma_backend::texture::MAX_TEXTURE_SIDE;

/// Elements [`Runtime::buffer_from`] converts per write.
const CHUNK_ELEMENTS: usize = 1 << 16;

/// Device memory.
#[derive(Clone, Debug)]
pub struct Buffer {
    storage: Arc<dyn BufferStorage>,
    elem: Option<Type>,
}

impl Buffer {
    pub fn len_bytes(&self) -> usize {
        self.storage.len_bytes()
    }

    /// The element type the buffer was made with, if any.
    pub fn elem(&self) -> Option<Type> {
        self.elem
    }

    /// The same memory bound as elements of `view`, where that is sound: the
    /// buffer is untyped or holds `view`'s scalar (an `f32` buffer viewed as
    /// `f32x4`, as MSL reads a `float` buffer through a `float4` pointer), and
    /// its size is a whole number of `view` elements. `None` otherwise. No
    /// copy is made: writes through either buffer are seen through the other.
    pub fn viewed_as(&self, view: Type) -> Option<Buffer> {
        let same_scalar = self.elem.is_none_or(|t| t.elem() == view.elem());
        (same_scalar && self.len_bytes().is_multiple_of(view.size_bytes() as usize)).then(|| Buffer { storage: Arc::clone(&self.storage), elem: Some(view) })
    }

    pub fn read_bytes(&self) -> Result<Vec<u8>, RuntimeError> {
        let len = self.len_bytes();
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|_| RuntimeError::allocation("a host copy of a buffer", len as u128))?;
        out.resize(len, 0);
        self.storage.read(0, &mut out)?;
        Ok(out)
    }

    pub fn write_bytes(&self, offset: usize, data: &[u8]) -> Result<(), RuntimeError> {
        self.storage.write(offset, data)
    }

    /// Copies `out.len()` bytes from `offset` into `out` (on a GPU, after
    /// the work queued on the device has finished): e.g. memory a front end
    /// allocated for the result, so no other copy is made.
    pub fn read_into(&self, offset: usize, out: &mut [u8]) -> Result<(), RuntimeError> {
        self.storage.read(offset, out)
    }

    /// The buffer's device address, where the device has addresses other
    /// libraries can use (a CUDA device pointer); `None` on the simulator.
    pub fn device_address(&self) -> Option<u64> {
        self.storage.device_address()
    }

    /// The address of the buffer's bytes in this process's memory, where
    /// the device's memory is host memory laid out as kernels see it (the
    /// simulator on a little-endian host); `None` elsewhere. Valid while any
    /// clone of this buffer lives; a front end may hand out a view of a
    /// buffer that no later dispatch writes (a finished dispatch's output)
    /// instead of copying it.
    pub fn host_address(&self) -> Option<u64> {
        self.storage.host_address()
    }

    /// The contents as elements of `T`.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, RuntimeError> {
        let bytes = self.read_bytes()?;
        Ok(bytes.chunks_exact(T::TYPE.size_bytes() as usize).map(T::from_le_bytes).collect())
    }
}

/// A 2D texture: texels of one [`TextureFormat`] on the device, bound to a
/// kernel's `texture2d` parameter with [`Arg::Texture`].
#[derive(Clone, Debug)]
pub struct Texture {
    storage: Arc<dyn BufferStorage>,
    desc: TextureDesc,
}

impl Texture {
    pub fn desc(&self) -> TextureDesc {
        self.desc
    }
    pub fn format(&self) -> TextureFormat {
        self.desc.format
    }
    pub fn width(&self) -> u32 {
        self.desc.width
    }
    pub fn height(&self) -> u32 {
        self.desc.height
    }

    /// The texels' bytes, row by row, as [`Runtime::texture_from_bytes`] takes them.
    pub fn read_bytes(&self) -> Result<Vec<u8>, RuntimeError> {
        let len = self.storage.len_bytes();
        let mut out = Vec::new();
        out.try_reserve_exact(len).map_err(|_| RuntimeError::allocation("a host copy of a texture", len as u128))?;
        out.resize(len, 0);
        self.storage.read(0, &mut out)?;
        Ok(out)
    }

    /// Replaces every texel with `bytes` (laid out as [`Texture::read_bytes`] gives them).
    pub fn write_bytes(&self, bytes: &[u8]) -> Result<(), RuntimeError> {
        if bytes.len() as u64 != self.desc.len_bytes() {
            return Err(RuntimeError::TextureSize { desc: self.desc, problem: format!("{} bytes of texels given, it holds {}", bytes.len(), self.desc.len_bytes()) });
        }
        self.storage.write(0, bytes)
    }

    /// The channel values as `T` (see [`Runtime::texture_from`]).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, RuntimeError> {
        check_channel_type::<T>(self.desc)?;
        Ok(self.read_bytes()?.chunks_exact(T::TYPE.size_bytes() as usize).map(T::from_le_bytes).collect())
    }
}

/// A compiled kernel, ready to dispatch.
#[derive(Clone, Debug)]
pub struct Pipeline {
    compiled: Arc<dyn CompiledKernel>,
}

impl Pipeline {
    pub fn kernel(&self) -> &Kernel {
        self.compiled.kernel()
    }
    /// The largest threadgroup this pipeline can run.
    pub fn max_total_threads_per_threadgroup(&self) -> u32 {
        self.compiled.max_total_threads_per_threadgroup()
    }
    pub fn thread_execution_width(&self) -> u32 {
        self.compiled.thread_execution_width()
    }
    pub fn static_threadgroup_memory_length(&self) -> u64 {
        self.compiled.static_threadgroup_memory_length()
    }
}

/// One argument of a dispatch.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Buffer(&'a Buffer),
    Texture(&'a Texture),
    Value(Literal),
}

impl<'a> From<&'a Buffer> for Arg<'a> {
    fn from(b: &'a Buffer) -> Arg<'a> {
        Arg::Buffer(b)
    }
}

impl<'a> From<&'a Texture> for Arg<'a> {
    fn from(t: &'a Texture) -> Arg<'a> {
        Arg::Texture(t)
    }
}

impl Arg<'_> {
    pub fn u32(v: u32) -> Arg<'static> {
        Arg::Value(Literal::u32(v))
    }
    pub fn i32(v: i32) -> Arg<'static> {
        Arg::Value(Literal::i32(v))
    }
    pub fn f32(v: f32) -> Arg<'static> {
        Arg::Value(Literal::f32(v))
    }

    fn value(&self) -> ArgValue<'_> {
        match self {
            Arg::Buffer(b) => ArgValue::Buffer { storage: b.storage.as_ref(), elem: b.elem },
            Arg::Texture(t) => ArgValue::Texture { storage: t.storage.as_ref(), desc: t.desc },
            Arg::Value(lit) => ArgValue::literal(*lit),
        }
    }
}

/// A Rust type that can live in a buffer.
pub trait Element: Copy {
    const TYPE: Type;
    fn to_le_bytes_vec(self) -> Vec<u8>;
    fn from_le_bytes(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($($t:ty => $s:ident),* $(,)?) => {$(
        impl Element for $t {
            const TYPE: Type = Type::scalar(Scalar::$s);
            fn to_le_bytes_vec(self) -> Vec<u8> {
                self.to_le_bytes().to_vec()
            }
            fn from_le_bytes(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("chunk of the element's size"))
            }
        }
    )*};
}

element!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64, f32 => F32);

/// Pixel formats and their conversions (`ChannelKind`, `unorm8`).
pub mod texture {
    pub use enigma_backend::texture::*;
}

/// IEEE half and bfloat16 conversions (round to nearest even), for preparing
/// and reading `f16`/`bf16` buffers.
pub mod half {
    pub use enigma_backend::half::{bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits};
}
