//! What the families' selections (`gemm::select`, `qmatmul::select`,
//! `attention::select`) read besides the problem: the caller's overrides ([`Overrides`], one
//! struct per family inside) and the device (`enigma_backend::DeviceInfo`,
//! through the rules below), and their error ([`SelectError`]).

use super::attention_prefill::PrefillTile;
use super::split::SplitSum;
use super::tile::{GemmTile, ThreadgroupLimits};
use super::ShapeError;
use enigma_backend::{DeviceInfo, DeviceKind};

/// Choices every matrix product shares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemmOptions {
    /// The GEMM tile and its SIMD-group grid (default: [`super::gemm::select_tile`]
    /// for the shape and the device, unless [`Overrides::threads`] is set).
    /// With a thread count too, the two must agree. For f32 inputs off
    /// Metal a tile also chooses the SIMD-group kernel over the default SIMT
    /// one. The fused quantized kernel takes its tile from here too
    /// (default: its tile for M), and so does the quantized tensor-core
    /// kernel (slices of 32 or 64 K values, dividing the group), and the
    /// quantized GEMM on cooperative tensors (one of its tiles, 64 deep,
    /// `tm / 16` SIMD groups in any grid).
    pub tile: Option<GemmTile>,
    /// GEMM and the quantized tensor-core kernel: slices of K in flight in
    /// threadgroup memory, filled by asynchronous copies (1: staged through
    /// registers; default: 3 where they fit, else 2 where those fit, none on
    /// Metal).
    pub stages: Option<u32>,
    /// GEMM and every quantized matmul kernel: how many ways K is split
    /// over threadgroups (partial products in an f32 workspace, summed by a
    /// second kernel in a fixed order; 1: one dispatch, no workspace).
    /// Default: 1 on the simulator; on a GPU, for GEMM, the tensor-core
    /// kernel and the quantized GEMM on cooperative tensors (up to 64 rows)
    /// enough for two threadgroups per compute unit where the output
    /// has too few tiles, each split keeping at least 4 slices of K; for the
    /// decode kernel `qmatmul::default_splits` (a split only where the grid
    /// leaves compute units with fewer than 8 warps, whole quantization
    /// groups per split). The decode kernel takes 1 up to K / group (at
    /// most 64), dividing the groups or not; the kernel for MLX's affine
    /// format only 1.
    pub k_splits: Option<u32>,
    /// The tensor-core GEMMs (matrix multiply, the quantized GEMM) and the
    /// FP4/INT4 decode kernel with K split: who sums the partial tiles.
    /// `Reduction`: a second dispatch. `LastThreadgroup`: each tile's last
    /// threadgroup, in the kernel (one dispatch; needs device-scope fences,
    /// a [`SelectError::Argument`] on a device without them). Default where
    /// the device has the fences: the decode kernel's own sum, and the
    /// quantized GEMM's at one row; the reduction otherwise (`BENCHMARKS.md`,
    /// the quantized GEMM's split-K sums).
    pub split_sum: Option<SplitSum>,
    /// GEMM: the kernel on cooperative tensors (`gemm::cooperative`).
    /// `Some(true)`: that kernel on any device with cooperative tensors
    /// (an error where the device, the types, the shape or the other
    /// options do not allow it); `Some(false)`: never. Default: where the
    /// device runs cooperative products on warpgroup matrix instructions
    /// (`DeviceInfo::wgmma`) and the problem allows it (`gemm::select`).
    /// The quantized matmul: `Some(true)` runs the quantized GEMM on
    /// cooperative tensors (`qgemm_cooperative`) at any M (an error where
    /// it cannot take the weights, the shape or the other options);
    /// `Some(false)`: never. Default: at `qmatmul::cooperative_rows` rows
    /// of seed 002's layout where the device's cooperative products
    /// are `wgmma` (`qmatmul::kernel_for`).
    pub cooperative: Option<bool>,
    /// The GEMM and the quantized GEMM on cooperative tensors: stage their
    /// operands by tile copies (`tile_copy`; on CUDA the tensor copy engine)
    /// rather than by every thread's asynchronous copies. `Some(true)`:
    /// tile copies (at most [`enigma_ir::limits::TILE_BARRIERS`] stages; the
    /// GEMM then runs a threadgroup per tile, not persistent);
    /// `Some(false)`: never. Default: [`tile_copies_by_default`] (the GEMM:
    /// where it is not persistent and its tile has two warpgroups or one
    /// stage, `gemm::select`).
    pub tile_copies: Option<bool>,
}

/// Choices of the quantized matmul's decode kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QmatmulOptions {
    /// Both decode kernels: rows of `C` per threadgroup (the row layout's
    /// 1 … 8, default `min(M, 8)`; fragment order's 8 or 16, default 8 up
    /// to 8 rows, else 16).
    pub rows_per_threadgroup: Option<u32>,
    /// FP4/INT4 decode kernel: columns per thread (1, 2 or 4: `uint`,
    /// `uint2`, `uint4` weight loads; default the widest that divides N
    /// with `rows · columns ≤ 8` and, on a GPU, leaves at least two column
    /// tiles per compute unit; [`Overrides::vectorize`] `Some(false)` means
    /// 1).
    pub columns_per_thread: Option<u32>,
    /// FP4/INT4 decode kernel: packed words per loop iteration (4, 8 or 16).
    pub words_per_iteration: Option<u32>,
    /// Fragment order's decode kernel: K steps of 64 values per iteration
    /// of a SIMD group's loop, whose weight and A loads are issued
    /// together (1, 2 or 4; default 1 on 8-row tiles, 2 on 16-row ones).
    pub k_steps_per_iteration: Option<u32>,
    /// MLX's affine format: the columns of each SIMD group, whose lanes all
    /// work on each of them (1, 2 or 4; default as for
    /// `columns_per_thread`).
    pub columns_per_simdgroup: Option<u32>,
    /// MLX's affine format: packed words per lane and load (1, 2 or 4;
    /// [`Overrides::vectorize`] `Some(false)` means 1).
    pub words_per_load: Option<u32>,
    /// FP4/INT4 decode kernel: chunks of packed words staged ahead by
    /// asynchronous copies into threadgroup memory (default 0: loads into
    /// registers one chunk ahead).
    pub stages: Option<u32>,
}

/// Choices of the attention kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttentionOptions {
    /// Fused decode: how many ways each head's keys are split over
    /// threadgroups (default on a GPU: `attention::splits_for`, the most
    /// that keep the grid within one wave of four threadgroups per compute
    /// unit; 1 = one threadgroup per head).
    pub splits: Option<u32>,
    /// Prefill: the query and key blocks of a threadgroup (default: the
    /// first of `PrefillTile::preferred(d)` that fits the device's
    /// threadgroup memory).
    pub prefill_tile: Option<PrefillTile>,
    /// Prefill on cooperative tensors: `Some(true)` asks for that kernel
    /// (an error where it cannot run), `Some(false)` refuses it; default:
    /// where the device's cooperative products run on `wgmma`
    /// (`attention_prefill::select_prefill`).
    pub prefill_cooperative: Option<bool>,
    /// Prefill on cooperative tensors: stage Q, K and V by tile copies
    /// (`tile_copy`; on CUDA the tensor copy engine) rather than by every
    /// thread's asynchronous copies. Default: [`tile_copies_by_default`].
    pub prefill_tile_copies: Option<bool>,
    /// Keys each key group (the lanes that share a key) loads per step
    /// (default: `attention::DEFAULT_KEYS_PER_STEP`); on SIMD-group
    /// matrices (asked for with `matrices`), the keys each SIMD group takes
    /// per step, 16 or 32 (default: `attention::DEFAULT_MATRIX_BLOCK`).
    pub keys_per_step: Option<u32>,
    /// Lanes of the fused decode that share one key, a power of two up to
    /// 32 (default: `attention::default_lanes_per_key`).
    pub lanes_per_key: Option<u32>,
    /// Steps of the fused decode staged ahead by asynchronous copies (0:
    /// loads into registers; default: `attention::default_stages`).
    pub stages: Option<u32>,
    /// Query heads per threadgroup, a divisor of the query heads per K/V
    /// head (default: `attention::default_heads_per_threadgroup`).
    pub heads_per_threadgroup: Option<u32>,
    /// Whether each SIMD group loads its next step while using this one
    /// (default: `attention::DEFAULT_PREFETCH`).
    pub prefetch: Option<bool>,
    /// Fused decode with its keys split: who merges the splits.
    /// `Reduction`: `attention::combine`, a second dispatch.
    /// `LastThreadgroup`: the last threadgroup of each head block, in the
    /// split kernel (one dispatch; needs device-scope fences, an
    /// [`SelectError::Argument`] on a device without them). Default: the
    /// kernel where the device has the fences, else the combine.
    pub split_sum: Option<SplitSum>,
    /// Fused decode on SIMD-group matrices (`attention::fused_matrices`):
    /// `Some(true)` asks for it (an error where it cannot run), `Some(false)`
    /// refuses it; default: where it can run (f16/bf16, `d` a multiple of
    /// 16 up to 256, 16-byte aligned rows, a device with SIMD-group
    /// matrices) unless `lanes_per_key`, `keys_per_step` or `prefetch`,
    /// which only the form on lanes has, is set.
    pub matrices: Option<bool>,
}

/// What a caller of a family's selection may fix; `None` leaves the
/// choice to the selection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Threads per threadgroup.
    pub threads: Option<u32>,
    /// `Some(false)`: no vector loads (for the quantized decode kernels:
    /// one column per thread, one packed word per load).
    pub vectorize: Option<bool>,
    pub gemm: GemmOptions,
    pub qmatmul: QmatmulOptions,
    pub attention: AttentionOptions,
}

/// Why a selection refused its inputs.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// A configuration the kernel cannot take (its own check).
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// Overrides that contradict each other or the device.
    #[error("{op}: {message}")]
    Argument { op: String, message: String },
}

pub(crate) fn argument(op: &str, message: String) -> SelectError {
    SelectError::Argument { op: op.to_string(), message }
}

/// What one threadgroup may use on `device`.
pub fn limits(device: &DeviceInfo) -> ThreadgroupLimits {
    ThreadgroupLimits { max_threads: device.max_threads_per_threadgroup, max_memory_bytes: device.max_threadgroup_memory_bytes }
}

/// The threadgroup memory the GEMMs' pipelined stages may fill
/// (`pipelined_for`): the device's, or none on Metal, whose MSL copies at
/// once, so that stages there would only cost memory.
pub(crate) fn stage_memory(device: &DeviceInfo) -> u64 {
    match device.kind {
        DeviceKind::Metal => 0,
        _ => device.max_threadgroup_memory_bytes,
    }
}

/// The K splits to use: `asked`, or on a GPU `planned`, or 1.
pub(crate) fn k_splits(device: &DeviceInfo, asked: Option<u32>, planned: u32) -> u32 {
    match (asked, device.kind) {
        (Some(s), _) => s,
        (None, DeviceKind::Simulator) => 1,
        (None, _) => planned,
    }
}

/// The device's compute units on a GPU; 0 on the simulator, which gains
/// nothing from filling them (the decode kernels' defaults).
pub(crate) fn gpu_compute_units(device: &DeviceInfo) -> u32 {
    match device.kind {
        DeviceKind::Simulator => 0,
        _ => device.compute_units,
    }
}

/// Threadgroups a split-K plan aims for: two per compute unit.
pub(crate) fn threadgroups_wanted(device: &DeviceInfo) -> u32 {
    2 * device.compute_units
}

/// Whether a kernel on cooperative tensors stages its operands by tile
/// copies where not asked: where its products are `wgmma` (CUDA sm_90,
/// whose tensor copy engine runs them). The quantized GEMM and the
/// attention prefill measured faster so on the H200 (`BENCHMARKS.md`, their
/// sections).
pub fn tile_copies_by_default(device: &DeviceInfo) -> bool {
    device.wgmma()
}

/// Whether the device has device-scope fences, which a kernel that sums its
/// own K splits needs.
pub(crate) fn has_device_fences(device: &DeviceInfo) -> bool {
    device.features.contains(&enigma_ir::Feature::DeviceFence)
}

/// Who sums a tensor-core GEMM's K splits: `asked`, else `default`; the
/// kernel only on a device with device-scope fences.
pub(crate) fn split_sum(op: &str, device: &DeviceInfo, asked: Option<SplitSum>, default: SplitSum) -> Result<SplitSum, SelectError> {
    match asked.unwrap_or(default) {
        SplitSum::LastThreadgroup if !has_device_fences(device) => Err(argument(
            op,
            format!("the kernel sums its K splits with device-scope fences, which {} does not have (on Metal they need MSL 3.2); use the reduction (split_sum None or Reduction)", device.name),
        )),
        sum => Ok(sum),
    }
}

/// A tile's threads are its SIMD groups': a thread count that differs is a
/// [`SelectError::Argument`] naming both.
pub(crate) fn check_tile_threads(op: &str, tile: GemmTile, threads: Option<u32>) -> Result<(), SelectError> {
    match threads {
        Some(t) if t != tile.threads() => Err(argument(op, format!("the tile {tile} takes {} threads, but the options ask for {t}", tile.threads()))),
        _ => Ok(()),
    }
}
