//! enigma's Metal backend: kernels become Metal Shading Language
//! (`enigma_codegen::msl`), compiled at
//! run time by the Metal framework and dispatched on the system's default
//! GPU, through [objc2-metal](https://docs.rs/objc2-metal).
//!
//! **This crate is macOS-only.** On every other system it compiles to an
//! empty library with no dependencies, so building enigma on Linux or
//! Windows costs nothing; `enigma_runtime::Device::Metal` there reports that
//! the Metal backend is not built in.
//!
//! # What it does (on macOS)
//! * **Device**: `MTLCreateSystemDefaultDevice()` and one command queue.
//!   `DeviceInfo` takes the name,
//!   `maxThreadsPerThreadgroup`, `maxThreadgroupMemoryLength` and
//!   `recommendedMaxWorkingSetSize` from Metal. Metal has no API for the
//!   SIMD width or the number of GPU cores: the SIMD width is given as 32
//!   (Apple GPUs; each pipeline reports Metal's own `threadExecutionWidth`)
//!   and the core count comes from enigma's device catalogue (a chip sold
//!   with several core counts gives its smallest; an unknown GPU gives 0).
//!   Every optional feature is listed, 2D textures included, and
//!   `DeviceInfo::read_write_textures` is `readWriteTextureSupport`'s tier
//!   (tier 1 binds only r32float, r32uint and r32sint as `access::read_write`;
//!   the shared dispatch checks refuse other formats there).
//! * **Cooperative tensors**: listed on Apple7 and Mac2 GPUs (those with
//!   SIMD-group matrices). On a device of the Metal4 family under macOS 26
//!   or later a kernel with cooperative tensor operations is written for MSL
//!   4.0 (MetalPerformancePrimitives' `matmul2d`) and compiled with
//!   `languageVersion` 4.0; elsewhere for the backend's version, on
//!   SIMD-group matrices (`mapping::kernel_msl_options`).
//! * **Compilation**: the generated MSL is compiled with
//!   `newLibraryWithSource:options:error:`, with `MTLCompileOptions`
//!   `languageVersion` equal to the version the source was written for
//!   (the generator's `msl::Options::language_version`, MSL 3.1 by default,
//!   so macOS 14 or later; 4.0 for cooperative kernels on Metal 4) and fast math **off**
//!   (`MTLMathModeSafe` and precise functions on macOS 15+,
//!   `fastMathEnabled = NO` before), because enigma's semantics are IEEE
//!   arithmetic with precise `metal::` math; kernels that want fast math
//!   call the `fast::` functions, or set `MetalOptions::fast_math`.
//!   Specialisation constants are Metal function constants: each value is
//!   set by index (`[[function_constant(i)]]`, declaration order) with its
//!   `MTLDataType` in an `MTLFunctionConstantValues`, and the function comes
//!   from `newFunctionWithName:constantValues:error:`. The pipeline state
//!   (`newComputePipelineStateWithFunction:error:`) gives
//!   `maxTotalThreadsPerThreadgroup`, `threadExecutionWidth` and
//!   `staticThreadgroupMemoryLength`, which the shared dispatch checks use.
//!   Libraries are cached by source, pipelines by source and specialisation
//!   values.
//! * **Buffers**: `newBufferWithLength:options:` with
//!   `MTLResourceStorageModeShared`, zero-filled, read and written through
//!   `contents()`. Host access to a buffer is serialised with a lock that a
//!   dispatch also holds until the GPU has finished with the buffer.
//! * **Dispatch**: one command buffer per dispatch, with one compute encoder:
//!   buffers by `setBuffer:offset:atIndex:`, by-value arguments by
//!   `setBytes:length:atIndex:` (index = the parameter's `[[buffer(n)]]`,
//!   `Kernel::binding`, as the MSL declares them), then `dispatchThreads:threadsPerThreadgroup:` or
//!   `dispatchThreadgroups:threadsPerThreadgroup:` according to the
//!   geometry's mode, `commit` and `waitUntilCompleted`. A command buffer
//!   that does not complete is a `RuntimeError::Execution` naming the
//!   kernel, with Metal's error description.
//!   `DispatchReport::device_time` is `GPUEndTime − GPUStartTime`.
//! * **Textures**: a texture's texels live in a shared `MTLBuffer` like any
//!   buffer's (row-major, no padding). For each texture argument a dispatch
//!   makes an `MTLTexture` from an `MTLTextureDescriptor` (`type2D`, the
//!   `MTLPixelFormat` of the texture's format, its width and height, usage
//!   `ShaderRead` and/or `ShaderWrite` from the parameter's access, storage
//!   mode shared — managed on a GPU without unified memory), copies the
//!   texels in with `replaceRegion:mipmapLevel:withBytes:bytesPerRow:`, and
//!   binds it with `setTexture:atIndex:` at the parameter's
//!   `[[texture(n)]]` (`Kernel::binding`; buffers and values take
//!   `[[buffer(n)]]` the same way). Once the command buffer has completed,
//!   the textures the kernel may write (`write`, `read_write`) are copied
//!   back into their buffers with `getBytes:bytesPerRow:fromRegion:mipmapLevel:`
//!   (a managed texture is first synchronised by a blit encoder). Samplers
//!   are `constexpr sampler`s in the generated MSL, so nothing is bound for
//!   them. A texture bound to two parameters of one dispatch is two copies,
//!   as on CUDA. The raw Metal numbers (pixel formats, usage, storage mode,
//!   tiers) are in `mapping`, unit-tested on every system.
//!   The simulator's sanitizer does not run on Metal; a dispatch asked to
//!   sanitize says so in its notes.
//! * **Printing** (`enigma.print`, MSL 3.2's `os_log`; macOS 15 and later,
//!   else the kernel is refused with an error naming macOS 15): a kernel
//!   that prints is compiled with `MTLCompileOptions.enableLogging`; its
//!   dispatch's command buffer comes from an `MTLCommandBufferDescriptor`
//!   whose `logState` is the backend's `MTLLogState`
//!   (`newLogStateWithDescriptor:error:`, its buffer sized for the 4096 lines
//!   a dispatch shows) with a log handler added by `addLogHandler:`; once
//!   the command buffer has completed, the handler's messages are written to
//!   standard output (or to `MetalBackend::printing_to`'s sink), bounded as
//!   the simulator bounds them, with a note past the bound. The handler is a
//!   global block literal written by hand (`shader_log`), since objc2-metal's
//!   `addLogHandler:` needs the `block2` crate. Dispatches of kernels that
//!   print run one at a time in a process (the handler's buffer is
//!   process-wide). Type-checked, not run on a Mac.
//!
//! # What has been checked — and what has not
//! **Nothing in this crate has yet run on Apple hardware** — the texture
//! support included: it is type-checked, not run on a Mac. It was written on
//! Linux, where the macOS code is only *type-checked*: `cargo check -p
//! enigma-metal -p enigma-runtime --target aarch64-apple-darwin`
//! (`scripts/check-metal.sh`, which says "skipped" when that target is not
//! installed). That proves the code matches objc2-metal's API, not that
//! Metal behaves as the code expects. The pure-Rust part (`mapping`: language
//! version encoding, function-constant bytes, by-value argument sizes,
//! pipeline cache keys, GPU-time arithmetic, pixel formats, texture usage
//! and storage modes, read-write tiers) is unit-tested on every system.
//! The MSL itself has only been syntax-checked with g++ against a shim
//! header (`crates/enigma-codegen/tests/msl_syntax.rs`, over the MSL golden
//! files), never compiled by Apple's compiler.
//!
//! # Running the conformance suite on a Mac
//! ```text
//! cargo test -p enigma-metal --test conformance
//! ```
//! runs the shared conformance suite (`enigma-conformance`, every portable
//! case) on the default Metal device, plus this crate's unit tests. On other
//! systems the same command runs the unit tests and one test that prints
//! `skipped: ...`.

#![cfg_attr(not(target_os = "macos"), allow(unused))]

#[cfg(any(target_os = "macos", test))]
mod mapping;

#[cfg(target_os = "macos")]
mod backend;
#[cfg(target_os = "macos")]
mod shader_log;

#[cfg(target_os = "macos")]
pub use backend::{MetalBackend, MetalBuffer, MetalKernel, MetalOptions};
