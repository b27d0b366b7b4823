//! The GEMM family's one selection: which kernel a matrix multiply runs
//! (the SIMD-group-matrix GEMM or the SIMT f32 kernel) and its whole
//! configuration — tile, K splits, who sums them, stages, whole tiles —
//! for a problem on a device with the caller's overrides ([`select`]), and
//! the default tile per shape ([`select_tile`]).

use super::{GemmConfig, SplitSum};
use crate::library::select::{self, Overrides, SelectError};
use crate::library::sgemm::SgemmConfig;
use crate::library::tile::{GemmTile, ThreadgroupLimits};
use crate::library::{DType, Dispatch};
use enigma_backend::{DeviceInfo, DeviceKind};
use enigma_ir::Kernel;

/// A matrix multiply `C = A · B`: `m × k` times `k × n` of `input`, C of
/// `output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmProblem {
    pub input: DType,
    pub output: DType,
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

/// The kernel a matrix multiply runs: on SIMD-group matrices, or the SIMT
/// f32 kernel. Both take the same parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmPlan {
    Matrices(GemmConfig),
    Simt(SgemmConfig),
}

impl GemmPlan {
    pub fn kernel(&self) -> Kernel {
        match self {
            GemmPlan::Matrices(cfg) => super::gemm(cfg),
            GemmPlan::Simt(cfg) => crate::library::sgemm::sgemm(cfg),
        }
    }

    pub fn splits(&self) -> u32 {
        match self {
            GemmPlan::Matrices(cfg) => cfg.splits,
            GemmPlan::Simt(cfg) => cfg.splits,
        }
    }

    /// Who sums the splits: the SIMT kernel always leaves them to the reduction.
    pub fn split_sum(&self) -> SplitSum {
        match self {
            GemmPlan::Matrices(cfg) => cfg.split_sum,
            GemmPlan::Simt(_) => SplitSum::Reduction,
        }
    }

    /// The dispatch for an `m × n` result.
    pub fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        match self {
            GemmPlan::Matrices(cfg) => cfg.dispatch(m, n, 1),
            GemmPlan::Simt(cfg) => cfg.dispatch(m, n, 1),
        }
    }
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
/// threadgroup memory.
pub fn select(problem: &GemmProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<GemmPlan, SelectError> {
    let GemmProblem { input, output, m, n, k } = *problem;
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

/// The GEMM tile for an `m × n × k` problem with `elem_bytes`-byte inputs
/// (2: f16 or bf16 on the tensor-core path, 4: f32) without tuning: seed
/// 002 §9.1's `select_tile` idea (`enigma_analysis::tiles::select_tile`) — the tile follows M — with enigma's
/// tiles. The rules, first match:
///
/// * **M ≤ 16 → 16×128×32 over 1×4** (16×32 per SIMD group): with K
///   split over threadgroups (the ops layer's split-K), measured on an H100
///   at 16×11008×4096 f16: 75.9 µs, 76 % of cuBLAS, against 653 µs for the
///   128-row tile (BENCHMARKS.md, "Split-K and small-M tiles").
/// * **M ≤ 32 → 32×128×32 over 1×4**: the same shape of tile between the
///   two measured ones; not measured itself.
/// * **M ≤ 64 → 64×128×32 over 2×2** (32×64 per SIMD group): with split-K,
///   measured at 64×11008×4096 f16: 120.8 µs (43 % of cuBLAS) against
///   662 µs for the 128-row tile.
/// * **2-byte inputs, M and N from 2048, where two stages of it fit →
///   128×256×32 over 2×4** (64×64 per SIMD group, 8 of them): a
///   threadgroup reads a quarter less from L2 per product than with
///   128×128, and at these shapes the tensor-core GEMM is bound by that
///   traffic (measured on an H100 at f16 4096³: BENCHMARKS.md, "sixth
///   session"). On devices with less threadgroup memory (Apple GPUs' 32
///   KiB) the next rule.
/// * **2-byte inputs otherwise → 128×128×32 over 2×2** (64×64 per SIMD group):
///   measured fastest of six tiles at f16 4096³ on an H100 (BENCHMARKS.md,
///   "GEMM 4096³": 1012 µs against 1016–1495 µs); bf16 within 1 %. Other
///   shapes (1024³, 8192³, 4096×11008×4096, M = 128) were run with it, but
///   no other tile was timed there. The seed's 128×64×16 for M ≤ 256 was
///   not tried.
/// * **4-byte inputs, M and N above 2048 → 128×64×32 over 2×2**: measured
///   at f32 4096³ on an H100 at 27.7 TFLOP/s against 25.0 for 64×64×32
///   (BENCHMARKS.md); only that shape was measured.
/// * **4-byte inputs otherwise → 64×64×32 over 2×2**: the GEMM's f32
///   default before tiles were chosen per shape; not measured against other
///   tiles below 4096³.
///
/// A rule's tile that does not fit `limits` gives way to the first of
/// 64×64×32 over 2×2, 64×64×16 over 2×2 and 32×32×16 over 1×1 that does;
/// when none does (a device with less than 5632 bytes of threadgroup memory
/// or fewer than 32 threads), the last is returned and the GEMM's check
/// reports why. `k` does not take part, as in the seed.
pub fn select_tile(m: u32, n: u32, _k: u32, elem_bytes: u32, limits: &ThreadgroupLimits) -> GemmTile {
    const WIDE: GemmTile = GemmTile::new(128, 256, 32, 2, 4);
    let rule = if m <= 16 {
        GemmTile::new(16, 128, 32, 1, 4)
    } else if m <= 32 {
        GemmTile::new(32, 128, 32, 1, 4)
    } else if m <= 64 {
        GemmTile::new(64, 128, 32, 2, 2)
    } else if elem_bytes <= 2 && m >= 2048 && n >= 2048 && 2 * WIDE.threadgroup_memory_bytes(elem_bytes) <= limits.max_memory_bytes {
        WIDE
    } else if elem_bytes <= 2 {
        GemmTile::new(128, 128, 32, 2, 2)
    } else if m > 2048 && n > 2048 {
        GemmTile::new(128, 64, 32, 2, 2)
    } else {
        GemmTile::new(64, 64, 32, 2, 2)
    };
    let fallbacks = [GemmTile::new(64, 64, 32, 2, 2), GemmTile::new(64, 64, 16, 2, 2), GemmTile::new(32, 32, 16, 1, 1)];
    std::iter::once(rule).chain(fallbacks).find(|t| t.fits(elem_bytes, limits)).unwrap_or(fallbacks[2])
}
