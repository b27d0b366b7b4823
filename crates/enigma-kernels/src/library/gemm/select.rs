//! The GEMM family's one selection: which kernel a matrix multiply runs
//! (the GEMM on cooperative tensors, the SIMD-group-matrix GEMM or the
//! SIMT f32 kernel) and its whole
//! configuration — tile, K splits, who sums them, stages, whole tiles —
//! for a problem on a device with the caller's overrides ([`select`]); the
//! default tile per shape is [`select_tile`].

use super::config::GemmConfig;
use super::config::DEFAULT_STAGES;
use super::cooperative::{CoopGemmConfig, DEFAULT_RASTER, WARPGROUP_ROWS};
use crate::library::split::SplitSum;
use crate::library::select::{self, Overrides, SelectError};
use crate::library::sgemm::SgemmConfig;
use crate::library::tile::select_tile;
use crate::library::{DType, Dispatch};
use enigma_backend::{DeviceInfo, DeviceKind};
use enigma_ir::{Feature, Kernel};

/// A matrix multiply `C = A · B`: `m × k` times `k × n` of `input`, C of
/// `output`, `batch` independent products at once (1: one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmProblem {
    pub input: DType,
    pub output: DType,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub batch: u32,
}

/// The kernel a matrix multiply runs: on cooperative tensors, on
/// SIMD-group matrices, or the SIMT f32 kernel. All take the parameters of
/// the SIMD-group kernel (the cooperative one all but `a4` and `b4`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmPlan {
    Cooperative(CoopGemmConfig),
    Matrices(GemmConfig),
    Simt(SgemmConfig),
}

impl GemmPlan {
    pub fn kernel(&self) -> Kernel {
        match self {
            GemmPlan::Cooperative(cfg) => super::cooperative::gemm_cooperative(cfg),
            GemmPlan::Matrices(cfg) => super::kernel::gemm(cfg),
            GemmPlan::Simt(cfg) => crate::library::sgemm::sgemm(cfg),
        }
    }

    /// K splits: the cooperative kernel never splits.
    pub fn splits(&self) -> u32 {
        match self {
            GemmPlan::Cooperative(_) => 1,
            GemmPlan::Matrices(cfg) => cfg.splits,
            GemmPlan::Simt(cfg) => cfg.splits,
        }
    }

    /// Who sums the splits: the SIMT kernel always leaves them to the
    /// reduction (the cooperative one has none to sum).
    pub fn split_sum(&self) -> SplitSum {
        match self {
            GemmPlan::Matrices(cfg) => cfg.split_sum,
            GemmPlan::Cooperative(_) | GemmPlan::Simt(_) => SplitSum::Reduction,
        }
    }

    /// This plan adding a bias (of the inputs' type) to each row of C in
    /// its epilogue, where its kernel can: the cooperative one
    /// (`CoopGemmConfig::row_bias`), and the SIMD-group and SIMT ones
    /// unsplit (`GemmConfig::row_bias`, `SgemmConfig::row_bias`); `None` for
    /// a split product, whose caller adds the bias by a broadcast add after
    /// it.
    pub fn with_row_bias(&self) -> Option<GemmPlan> {
        match self {
            GemmPlan::Cooperative(cfg) => Some(GemmPlan::Cooperative(CoopGemmConfig { row_bias: true, ..*cfg })),
            GemmPlan::Matrices(cfg) if cfg.splits <= 1 => Some(GemmPlan::Matrices(GemmConfig { row_bias: true, ..*cfg })),
            GemmPlan::Simt(cfg) if cfg.splits <= 1 => Some(GemmPlan::Simt(SgemmConfig { row_bias: true, ..*cfg })),
            GemmPlan::Matrices(_) | GemmPlan::Simt(_) => None,
        }
    }

    /// The dispatch for `batch` results of `m × n` on a device of
    /// `compute_units` (which a persistent cooperative kernel covers once).
    pub fn dispatch(&self, m: u32, n: u32, batch: u32, compute_units: u32) -> Dispatch {
        match self {
            GemmPlan::Cooperative(cfg) => cfg.dispatch(m, n, batch, compute_units),
            GemmPlan::Matrices(cfg) => cfg.dispatch(m, n, batch),
            GemmPlan::Simt(cfg) => cfg.dispatch(m, n, batch),
        }
    }
}

/// The GEMM on cooperative tensors for `problem`, where it runs: asked
/// for ([`GemmOptions::cooperative`](crate::library::select::GemmOptions::cooperative)
/// `Some(true)`: an error where the device has no cooperative tensors,
/// the inputs are not 16-bit, N or K is not a multiple of 8, the options
/// fix a tile, a thread count or K splits, or no tile fits the device's
/// threadgroup memory), or by default on a device whose cooperative
/// products are warpgroup matrix instructions ([`DeviceInfo::wgmma`]) when
/// all of that allows it and the product is large enough for its tiles
/// ([`fills_enough`]). Its slices are staged by tile copies where
/// [`GemmOptions::tile_copies`](crate::library::select::GemmOptions::tile_copies)
/// asks, or by default on such a device where the kernel is not
/// persistent and they pay ([`tile_copies_pay`]).
fn cooperative(problem: &GemmProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<Option<CoopGemmConfig>, SelectError> {
    let GemmProblem { input, n, k, .. } = *problem;
    let asked = &overrides.gemm;
    let forced = match asked.cooperative {
        Some(false) => return Ok(None),
        Some(true) => true,
        None if !device.wgmma() => return Ok(None),
        None => false,
    };
    let refusal = if !device.features.contains(&Feature::CooperativeTensors) {
        Some(format!("{} has no cooperative tensors", device.name))
    } else if !matches!(input, DType::F16 | DType::BF16) {
        Some(format!("cooperative products take f16 or bf16 inputs, not {input}"))
    } else if !CoopGemmConfig::takes(n, k) {
        Some(format!("N = {n} and K = {k} must be multiples of 8 (16-byte copies)"))
    } else if asked.tile.is_some() || overrides.threads.is_some() || asked.k_splits.is_some_and(|s| s > 1) || asked.split_sum.is_some() {
        Some("a tile, a thread count, K splits and their sum are options of the SIMD-group kernel".to_string())
    } else {
        None
    };
    let cfg = match refusal {
        Some(message) if forced => return Err(select::argument("matmul", format!("the GEMM on cooperative tensors: {message}"))),
        Some(_) => return Ok(None),
        None => cooperative_config(problem, asked.stages, device.max_threadgroup_memory_bytes),
    };
    match cfg {
        None if forced => Err(select::argument(
            "matmul",
            format!("the GEMM on cooperative tensors: no tile and stages fit {} bytes of threadgroup memory", device.max_threadgroup_memory_bytes),
        )),
        Some(cfg) if forced || fills_enough(&cfg, problem, device.compute_units) => {
            let persistent = persists(&cfg, problem, device.compute_units);
            // Tile copies stage a threadgroup per tile: asked for, they take
            // the place of the persistent walk.
            let tile_copies = asked.tile_copies.unwrap_or_else(|| !persistent && tile_copies_pay(&cfg) && select::tile_copies_by_default(device));
            let cfg = CoopGemmConfig { persistent: persistent && !tile_copies, tile_copies, ..cfg };
            cfg.check(device.max_threadgroup_memory_bytes).map_err(|e| select::argument("matmul", e.to_string()))?;
            Ok(Some(cfg))
        }
        _ => Ok(None),
    }
}

/// Whether tile copies beat each thread's copies for `cfg` (on a device
/// that has them, [`select::tile_copies_by_default`]): with two warpgroups
/// (128-row tiles), or one stage. Measured on an H200 (f16, C f16,
/// `gemm_cuda`, `BENCHMARKS.md`): 128 × 256 in four stages 207.9 against
/// 219.2 µs at 4096³, 1564 against 1663 at 8192³, 565 against 595 at
/// 4096 × 11008 × 4096; 64 × 128 in one stage (64 products of 128 × 1024
/// × 64) 13.2 against 14.6. With one warpgroup in more stages a slice's
/// product is too short to cover the copy engine's latency two slices
/// ahead: 64 × 128 in four stages 45.4 against 41.2 µs at 64 × 11008 ×
/// 4096, 39.6 against 30.9 for 64 products of 64 × 1024 × 576; 64 × 64 in
/// two 15.5 against 14.5.
fn tile_copies_pay(cfg: &CoopGemmConfig) -> bool {
    cfg.tm == 2 * WARPGROUP_ROWS || cfg.stages == 1
}

/// Most K values per product for which the persistent kernel is chosen.
const PERSISTENT_MAX_K: u32 = 1024;

/// Whether `cfg` runs persistent for `problem` on a GPU of
/// `compute_units`: with 128-row tiles (two warpgroups), K of at most
/// [`PERSISTENT_MAX_K`] (a tile's few slices leave the fill and the
/// epilogue a large share of its time, which the next tile's copies then
/// overlap) and at least two tiles per compute unit to walk. Measured on
/// an H200 (f16, C f16, 128 × 256 in four stages, C through the staging
/// array, `gemm_cuda`, two passes in one run, `BENCHMARKS.md`): 32
/// products of 1024³ 145.3 / 147.1 µs persistent against 152.9 / 154.3 a
/// threadgroup per tile; 4096³ 228.3 against 227.3 and 8192³ 1699.9
/// against 1674.2 (C staged in the B stages then): no gain where K is long.
fn persists(cfg: &CoopGemmConfig, problem: &GemmProblem, compute_units: u32) -> bool {
    let tiles = u64::from(problem.m.div_ceil(cfg.tm)) * u64::from(problem.n.div_ceil(cfg.tn)) * u64::from(problem.batch);
    cfg.tm == 2 * WARPGROUP_ROWS && problem.k <= PERSISTENT_MAX_K && tiles >= 2 * u64::from(compute_units)
}

/// The cooperative kernel's tile and stages for `problem`: products of at
/// most 64 rows the 64 × 128 tile (one warpgroup, no half-empty tiles), in
/// the stages asked for or four; products of one slice of K (`k ≤ 64`) the
/// 64 × 128 tile in the stages asked for or one (the one slice needs no
/// second: 41 KiB of threadgroup memory with the staging array, so that
/// several threadgroups share a multiprocessor and one's copies overlap
/// another's epilogue; on the H200 64 products of 128 × 1024 × 64 with a
/// row bias, three passes, ran 13.4–13.5 µs against 13.8–14.0 on 64 × 64
/// in one stage, 15.1–15.3 in two, 15.7 on 64 × 128 in two and 15.0–15.2
/// on 64 × 256, `BENCHMARKS.md`); the rest (or where those do not fit
/// `max_threadgroup_memory_bytes`) [`CoopGemmConfig::for_memory`]'s, the
/// 128 × 256 tile in four stages on the H200. Measured there (f16, C f16,
/// the epilogue through threadgroup memory, `gemm_cuda --batch`,
/// `BENCHMARKS.md`): M = 64, N = 11008, K = 4096 ran 43.8 µs on 64 × 128
/// against 61.3 on 128 × 256; 64 products of 128 × 1024 × 64 20.4 on
/// 64 × 64 in two stages against 23.6 on 64 × 128, 23.3–23.9 on 128 × 128
/// in two, 26.8 on 128 × 256 in four; 32 products of 1024³ 180.9 on 128 × 256 in four against
/// 214.0 on 128 × 128 in two, and 4096 × 1024 × 1024 27.8 against 32.2 in
/// three stages and 33.8 on 64 × 128.
fn cooperative_config(problem: &GemmProblem, asked: Option<u32>, max_threadgroup_memory_bytes: u64) -> Option<CoopGemmConfig> {
    let GemmProblem { input, output, m, k, .. } = *problem;
    let short = CoopGemmConfig { input, output, tm: WARPGROUP_ROWS, tn: 128, tk: 64, stages: asked.unwrap_or(DEFAULT_STAGES), raster: DEFAULT_RASTER, persistent: false, row_bias: false, staged: output == input, tile_copies: false };
    if m <= WARPGROUP_ROWS && short.check(max_threadgroup_memory_bytes).is_ok() {
        return Some(short);
    }
    let shallow = CoopGemmConfig { tn: 128, stages: asked.unwrap_or(1), ..short };
    if k <= shallow.tk && shallow.check(max_threadgroup_memory_bytes).is_ok() {
        return Some(shallow);
    }
    CoopGemmConfig::for_memory(input, output, asked, max_threadgroup_memory_bytes)
}

/// Whether the cooperative kernel's tiles suit `problem` on a GPU of
/// `compute_units`: the tiles over all the batch's products fill the
/// compute units at least once, or, with each product at least a tile's
/// rows tall, a quarter of them. Smaller products run the SIMD-group
/// kernel, which splits K. On the H200 (132 multiprocessors, f16): M =
/// 128, N = 11008, K = 4096 (43 tiles of 128 × 256) ran 67.2 µs
/// cooperative against 75.3 µs on SIMD-group matrices; M = 64 at the same
/// N and K (86 tiles of 64 × 128) 44.5 against 55.7; 1024³ (32 tiles of
/// 128 × 256) 26.9 against 27.8 (`BENCHMARKS.md`).
fn fills_enough(cfg: &CoopGemmConfig, problem: &GemmProblem, compute_units: u32) -> bool {
    let tiles = u64::from(problem.m.div_ceil(cfg.tm)) * u64::from(problem.n.div_ceil(cfg.tn)) * u64::from(problem.batch);
    let units = u64::from(compute_units);
    tiles >= units || (problem.m >= cfg.tm && 4 * tiles >= units)
}

/// The GEMM for `problem` on `device`: f32 inputs without a tile asked for
/// run the SIMT kernel except on Metal (whose f32 SIMD-group matrices are
/// native): its tile for the shape (`SgemmConfig::for_shape`), deepened
/// where that fits the device, or with a thread count its blocks over that
/// many threads (`SgemmConfig::with_threads`). Otherwise the SIMD-group
/// kernel with the asked tile; with only a thread count, the type's base
/// tile split over `threads / 32` SIMD groups (`GemmConfig::with_threads`);
/// else [`select_tile`]'s. K is split where the output has few tiles (on a
/// GPU), the splits summed by the reduction unless asked otherwise; stages
/// where they fit (none on Metal); the whole-tile variant where the tile
/// divides the shape. Every configuration is checked against the device's
/// threadgroup memory. Before all of these, the GEMM on cooperative
/// tensors where it runs (see `cooperative` in this module's source: by
/// default on `sm_90a` GPUs for 16-bit inputs, N and K multiples of 8,
/// and at least one output tile per compute unit).
pub fn select(problem: &GemmProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<GemmPlan, SelectError> {
    if let Some(cfg) = cooperative(problem, device, overrides)? {
        return Ok(GemmPlan::Cooperative(cfg));
    }
    let GemmProblem { input, output, m, n, k, .. } = *problem;
    let limits = select::limits(device);
    let asked = &overrides.gemm;
    let wanted = select::threadgroups_wanted(device);
    if input == DType::F32 && asked.tile.is_none() && device.kind != DeviceKind::Metal {
        let cfg = match overrides.threads {
            Some(t) => SgemmConfig::new(output).with_threads(t)?,
            None => SgemmConfig::for_shape(output, m, n, device.compute_units).deepened_for(limits.max_memory_bytes),
        };
        let cfg = SgemmConfig { splits: select::k_splits(device, asked.k_splits, cfg.splits_for(m, n, k, wanted)), ..cfg };
        cfg.check(limits.max_memory_bytes)?;
        return Ok(GemmPlan::Simt(cfg));
    }
    let cfg = match (asked.tile, overrides.threads) {
        (Some(tile), threads) => {
            select::check_tile_threads("matmul", tile, threads)?;
            GemmConfig::from_tile(tile, input, output)
        }
        (None, Some(t)) => GemmConfig::new(input, output).with_threads(t)?,
        (None, None) => GemmConfig::from_tile(select_tile(m, n, k, input.size_bytes(), &limits), input, output),
    };
    let cfg = GemmConfig {
        splits: select::k_splits(device, asked.k_splits, cfg.splits_for(m, n, k, wanted)),
        split_sum: select::split_sum("matmul", device, asked.split_sum, SplitSum::Reduction)?,
        ..cfg
    };
    let cfg = match asked.stages {
        Some(stages) => GemmConfig { stages, ..cfg },
        None => cfg.pipelined_for(select::stage_memory(device)),
    };
    let cfg = cfg.whole_tiles_for(m, n, k);
    cfg.check(limits.max_memory_bytes)?;
    Ok(GemmPlan::Matrices(cfg))
}
