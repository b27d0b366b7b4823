//! The GEMM family's one selection: which kernel a matrix multiply runs
//! (the SIMD-group-matrix GEMM or the SIMT f32 kernel) and its whole
//! configuration — tile, K splits, who sums them, stages, whole tiles —
//! for a problem on a device with the caller's overrides ([`select`]); the
//! default tile per shape is [`select_tile`].

use super::config::GemmConfig;
use crate::library::split::SplitSum;
use crate::library::select::{self, Overrides, SelectError};
use crate::library::sgemm::SgemmConfig;
use crate::library::tile::select_tile;
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
            GemmPlan::Matrices(cfg) => super::kernel::gemm(cfg),
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
