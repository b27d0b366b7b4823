//! The execution model's limits, defined once. Every crate that checks or
//! plans against a limit reads it from here; a device may report smaller
//! limits of its own (its `DeviceInfo`), never larger ones.
//!
//! * [`SIMD_WIDTH`]: lanes per SIMD group (Apple GPUs; a warp on NVIDIA).
//! * [`MAX_THREADS_PER_THREADGROUP`]: Metal's `maxTotalThreadsPerThreadgroup`
//!   ceiling, also CUDA's block limit.
//! * [`MAX_THREADGROUP_MEMORY_BYTES`]: threadgroup memory every Apple GPU
//!   gives one threadgroup (32 KiB), the portable budget.
//! * [`MAX_BUFFER_ARGUMENTS`]: entries of Metal's buffer argument table
//!   (`[[buffer(0)]]` … `[[buffer(30)]]`).
//! * [`MAX_TEXTURE_ARGUMENTS`]: entries of Metal's texture argument table
//!   that every Apple GPU has (`[[texture(0)]]` … `[[texture(30)]]`).
//! * [`ASYNC_COPY_BYTES`]: the sizes one asynchronous copy may move (those
//!   of CUDA's `cp.async`); [`MAX_ASYNC_PENDING`]: the most committed groups
//!   an `async_wait` may leave in flight.
//! * [`MAX_UNROLLED_TRIPS`]: iterations a loop unrolled at compile time may run.
//! * [`MAX_THREAD_ARRAY_BYTES`]: bytes of per-thread arrays one thread may
//!   declare.
//! * [`MAX_PRINT_ARGS`]: values one `print` may format;
//!   [`MAX_PRINTED_LINES`]: lines the simulator prints for one dispatch.

/// Lanes per SIMD group.
pub const SIMD_WIDTH: u32 = 32;
/// The largest threadgroup of the execution model.
pub const MAX_THREADS_PER_THREADGROUP: u32 = 1024;
/// Threadgroup memory one threadgroup may use on every device (32 KiB).
pub const MAX_THREADGROUP_MEMORY_BYTES: u64 = 32 * 1024;
/// Buffer (and by-value) parameters a kernel may bind: Metal's argument
/// table has 31 entries.
pub const MAX_BUFFER_ARGUMENTS: u32 = 31;
/// Texture parameters a kernel may bind: 31 on every Apple GPU (Macs have
/// 128; the portable limit is the smaller).
pub const MAX_TEXTURE_ARGUMENTS: u32 = 31;
/// Bytes one `async_copy` may move (its alignment too).
pub const ASYNC_COPY_BYTES: [u32; 3] = [4, 8, 16];
/// Barriers a kernel's tile copies complete on (`tile_copy(barrier, …)`
/// takes `0 .. TILE_BARRIERS`): enough for a pipeline of eight stages.
pub const TILE_BARRIERS: u32 = 8;
/// The largest rows and columns of one `tile_copy` box (the tensor copy
/// engine's limit per dimension).
pub const MAX_TILE_BOX: u32 = 256;
/// `tile_copy`'s alignment in bytes: of a box row, of the source pitch,
/// of the box's first column in its row (the tensor copy engine reads a
/// box only from a 16-byte aligned address).
pub const TILE_ROW_ALIGN: u32 = 16;
/// `tile_copy`'s alignment in bytes of the destination.
pub const TILE_DST_ALIGN: u32 = 128;
/// The largest `pending` of an `async_wait` (copy pipelines use 1 or 2).
pub const MAX_ASYNC_PENDING: u32 = 7;
/// Bytes of per-thread arrays (`thread T name[N]`) one thread may declare:
/// 16 KiB. A GPU keeps such arrays in registers only while they are small
/// (an H100 thread has at most 255 32-bit registers, an Apple GPU thread
/// fewer before occupancy falls); past that they live in memory private to
/// the thread, and past this limit a kernel is almost surely a mistake.
pub const MAX_THREAD_ARRAY_BYTES: u64 = 16 * 1024;
/// Iterations of a loop unrolled at compile time (`static_range`): past a
/// few hundred copies of its body, unrolling costs compile time and
/// instruction cache for nothing.
pub const MAX_UNROLLED_TRIPS: u64 = 1024;
/// Values one `print` statement may format (CUDA's `printf` takes 32
/// arguments, the format string among them).
pub const MAX_PRINT_ARGS: usize = 16;
/// Lines of `print` the simulator keeps for one dispatch, the first in
/// dispatch order; it then notes how many more were printed.
pub const MAX_PRINTED_LINES: usize = 4096;
