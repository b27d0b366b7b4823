//! The quantized-GEMM tile planner of seed 002 (Metal Marlin on Apple GPUs).
//!
//! A threadgroup computes a `M × N` tile of `C = A · dequant(B)`, stepping
//! through K in blocks of `K` ("tile iterations"); its SIMD groups split the
//! tile into 8×8 `simdgroup_matrix` fragments. For one tile configuration
//! [`plan_tile`] derives everything seed 002 tabulates:
//!
//! * threadgroup memory — *separate* dequant with double buffering holds
//!   `A_tiles[2][M][K]` and `B_tiles[2][K][N]` in half precision, `4·K·(M+N)`
//!   bytes (seed 002 §2.1: "4 * (M*K + K*N)"); *fused* dequant holds one
//!   `A_tile[M][K]` and an 8×8 half staging block per SIMD group,
//!   `2·M·K + SG·128` bytes (§2.2). A tile needing 100 % or more of the
//!   threadgroup memory is rejected, as §2.3 rejects 64×64×64 separate;
//! * the SIMD-group partition, accumulators per SIMD group and their register
//!   bytes per thread (4 bytes with half, 8 with float accumulators, §3.4);
//! * threadgroups per core `floor(pool / bytes)` (§4.1), threads per core,
//!   threadgroups in flight on the device (§4.3);
//! * arithmetic intensity per tile iteration, `2·M·N·K / (2·M·K + K·N·b)` with
//!   `b` bytes per weight (½ for 4-bit, 2 for FP16), ignoring the group scales
//!   as §5.1 does, and separately with the scales (`(K/group)·N·2` bytes);
//!   the device's machine balance and whether the tile is compute- or
//!   memory-bound (§5.1);
//! * dequantization ALU overhead, `K·N·ops / (2·M·N·K)` with 8 ops per FP4
//!   E2M1 and 4 per INT4 U4B8 weight (§5.3);
//! * for a problem size, output tiles and waves (§4.3).
//!
//! [`select_tile`] is seed 002 §9.1's dispatch table, verbatim.
//!
//! For enigma's own GEMM ([`TileVariant::Staged`]) this module holds the
//! threadgroup-memory rule ([`staged_gemm_memory`], [`staged_slice_bytes`])
//! the planner and the library's kernels share; which tile the library runs
//! is the library's policy (`enigma_kernels::library::gemm::select`).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalog::{CatalogError, DeviceSpec};
use crate::geometry::{waves, GeometryError, Waves};
use crate::text::thousands;

/// Side of a `simdgroup_matrix` fragment.
pub const FRAGMENT: u32 = 8;
/// Bytes of one 8×8 half fragment (the fused kernel's per-SIMD-group staging).
pub const STAGING_BYTES_PER_SIMDGROUP: u64 = (FRAGMENT * FRAGMENT * 2) as u64;
/// Multiply-adds in one `simdgroup_multiply_accumulate` on 8×8 fragments:
/// 64 outputs × 8 products.
pub const FMA_PER_MMA: u64 = (FRAGMENT * FRAGMENT * FRAGMENT) as u64;
/// FLOPs in one 8×8×8 `simdgroup_multiply_accumulate` (2 per multiply-add).
pub const FLOPS_PER_MMA: u64 = 2 * FMA_PER_MMA;
/// Group size assumed for the quantization scales when none is given (the
/// scales are one half per group of K-values per column).
pub const DEFAULT_GROUP_SIZE: u32 = 128;
/// SIMD groups per threadgroup in every configuration of seed 002.
pub const DEFAULT_SIMDGROUPS: u32 = 4;

/// How B's weights are stored in device memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightFormat {
    /// Unquantized half precision.
    Fp16,
    /// 4-bit float E2M1 (FP4), 8 per `uint32`.
    Fp4E2M1,
    /// 4-bit unsigned integer with bias 8 (U4B8), 8 per `uint32`.
    Int4U4B8,
}

impl WeightFormat {
    /// Bytes per weight in device memory.
    pub fn bytes_per_weight(self) -> f64 {
        match self {
            WeightFormat::Fp16 => 2.0,
            WeightFormat::Fp4E2M1 | WeightFormat::Int4U4B8 => 0.5,
        }
    }

    /// ALU operations to dequantize one weight (seed 002 §5.3: FP4 E2M1 ~8 —
    /// shift, mask, select, multiply; INT4 U4B8 ~4 — OR, subtract, multiply).
    pub fn dequant_ops_per_weight(self) -> u64 {
        match self {
            WeightFormat::Fp16 => 0,
            WeightFormat::Fp4E2M1 => 8,
            WeightFormat::Int4U4B8 => 4,
        }
    }

    /// Whether the format carries per-group scales.
    pub fn has_scales(self) -> bool {
        !matches!(self, WeightFormat::Fp16)
    }

    /// Short name as the CLI spells it.
    pub fn short_name(self) -> &'static str {
        match self {
            WeightFormat::Fp16 => "fp16",
            WeightFormat::Fp4E2M1 => "fp4",
            WeightFormat::Int4U4B8 => "int4",
        }
    }
}

/// Where B is dequantized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TileVariant {
    /// `marlin_gemm_fp4`: B dequantized into double-buffered threadgroup tiles.
    Separate,
    /// `marlin_gemm_fused_fp4`: B dequantized in registers through an 8×8
    /// staging block per SIMD group (enigma's kernel:
    /// `enigma_kernels::library::qgemm_fused`, which declares this
    /// variant's [`threadgroup_memory`]).
    Fused,
    /// enigma's library GEMM (`enigma_kernels::library::gemm`, 16-bit A and
    /// B): one slice of each in threadgroup memory, rows padded by
    /// [`STAGED_PAD`] elements, the next slice prefetched through registers.
    Staged,
}

impl TileVariant {
    /// Short name as the CLI spells it.
    pub fn short_name(self) -> &'static str {
        match self {
            TileVariant::Separate => "separate",
            TileVariant::Fused => "fused",
            TileVariant::Staged => "staged",
        }
    }
}

/// A tile: `m × n` outputs, `k` deep per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TileShape {
    /// TILE_M.
    pub m: u32,
    /// TILE_N.
    pub n: u32,
    /// TILE_K.
    pub k: u32,
}

impl TileShape {
    /// `TileShape { m, n, k }`.
    pub const fn new(m: u32, n: u32, k: u32) -> Self {
        TileShape { m, n, k }
    }
}

impl std::fmt::Display for TileShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

/// A GEMM problem `C[M,N] = A[M,K] · B[K,N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProblemSize {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// The reduction length.
    pub k: u32,
}

/// Everything that selects a tile configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TileConfig {
    /// The tile.
    pub shape: TileShape,
    /// Separate or fused dequant.
    pub variant: TileVariant,
    /// B's storage format.
    pub weights: WeightFormat,
    /// K-values per quantization scale.
    pub group_size: u32,
    /// SIMD groups per threadgroup.
    pub simdgroups: u32,
    /// SIMD-group grid `[along M, along N]`; `None` picks one (see
    /// [`partition`]).
    pub sg_grid: Option<[u32; 2]>,
    /// [`TileVariant::Staged`]: slices of K held at once — 1 stages the
    /// next slice through registers, 2 or more are the GEMM's pipelined
    /// stages, filled by asynchronous copies. The other variants ignore it.
    #[serde(default = "one_stage")]
    pub stages: u32,
}

fn one_stage() -> u32 {
    1
}

impl TileConfig {
    /// A configuration with seed 002's defaults: 4 SIMD groups, group size
    /// 128, partition chosen automatically.
    pub fn new(shape: TileShape, variant: TileVariant, weights: WeightFormat) -> Self {
        TileConfig {
            shape,
            variant,
            weights,
            group_size: DEFAULT_GROUP_SIZE,
            simdgroups: DEFAULT_SIMDGROUPS,
            sg_grid: None,
            stages: 1,
        }
    }
}

/// Why a tile configuration cannot be planned.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum TileError {
    /// A tile dimension is 0.
    #[error("tile {shape} has {dim} = 0; every tile dimension must be a positive multiple of 8")]
    ZeroDimension {
        /// "M", "N" or "K".
        dim: &'static str,
        /// The tile.
        shape: TileShape,
    },
    /// A tile dimension is not a whole number of 8×8 fragments.
    #[error("tile {shape} has {dim} = {value}, not a multiple of the 8×8 simdgroup_matrix fragment")]
    NotFragmentMultiple {
        /// "M", "N" or "K".
        dim: &'static str,
        /// Its value.
        value: u32,
        /// The tile.
        shape: TileShape,
    },
    /// No SIMD groups.
    #[error("a threadgroup needs at least one SIMD group (got 0)")]
    ZeroSimdgroups,
    /// Too many threads.
    #[error("{simdgroups} SIMD groups of {simd_width} make a threadgroup of {threads} threads, over the maximum of {max}")]
    TooManyThreads {
        /// SIMD groups requested.
        simdgroups: u32,
        /// SIMD width.
        simd_width: u32,
        /// Threads that makes.
        threads: u64,
        /// The limit.
        max: u32,
    },
    /// The SIMD groups cannot split the tile into whole fragments.
    #[error("a {m}x{n} tile ({} × {} fragments) cannot be split evenly among {simdgroups} SIMD groups", m / 8, n / 8)]
    NoPartition {
        /// TILE_M.
        m: u32,
        /// TILE_N.
        n: u32,
        /// SIMD groups.
        simdgroups: u32,
    },
    /// An explicit SIMD-group grid does not fit the tile.
    #[error("SIMD-group grid {rows}x{cols} does not fit a {m}x{n} tile with {simdgroups} SIMD groups: {why}")]
    BadSimdgroupGrid {
        /// SIMD groups along M.
        rows: u32,
        /// SIMD groups along N.
        cols: u32,
        /// TILE_M.
        m: u32,
        /// TILE_N.
        n: u32,
        /// SIMD groups in the threadgroup.
        simdgroups: u32,
        /// What is wrong.
        why: String,
    },
    /// Group size 0.
    #[error("the quantization group size must be at least 1 (got 0)")]
    ZeroGroupSize,
    /// A figure of the tile does not fit its type: the tile is far larger
    /// than any threadgroup can compute.
    #[error("tile {shape} is too large to plan: its {what} overflows ({detail}); a tile is one threadgroup's work")]
    TooLarge {
        /// The tile.
        shape: TileShape,
        /// The figure that overflows.
        what: &'static str,
        /// Its width (`a 64-bit count`, `a 32-bit count`).
        detail: &'static str,
    },
    /// A problem dimension is 0.
    #[error("problem size {m}x{n}x{k} has a zero dimension")]
    ZeroProblem {
        /// M.
        m: u32,
        /// N.
        n: u32,
        /// K.
        k: u32,
    },
    /// The tile needs 100 % or more of the threadgroup memory.
    #[error("{reason}")]
    DoesNotFit {
        /// Bytes needed.
        bytes: u64,
        /// The budget.
        budget: u32,
        /// `bytes / budget` in percent.
        percent: f64,
        /// The explanation.
        reason: String,
    },
    /// The device description is unusable.
    #[error(transparent)]
    Device(#[from] CatalogError),
    /// Counting waves failed.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
}

/// How the SIMD groups of a threadgroup split its output tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimdgroupPartition {
    /// SIMD groups along M × along N.
    pub grid: [u32; 2],
    /// Output elements per SIMD group, rows × columns.
    pub sg_tile: [u32; 2],
    /// SG_M_TILES: 8×8 fragments per SIMD group along M.
    pub sg_m_tiles: u32,
    /// SG_N_TILES: 8×8 fragments per SIMD group along N.
    pub sg_n_tiles: u32,
}

/// Splits an `m × n` tile among `simdgroups` SIMD groups. With `explicit`,
/// checks that grid; otherwise picks, among the grids `rows × cols =
/// simdgroups` that give every SIMD group whole fragments, the one that
/// minimises the fragments a SIMD group loads per 8-deep k-step
/// (`SG_M + SG_N`), splitting M further on ties. This reproduces seed 002:
/// 64×64 → 2×2 (32×32 each), 128×64 → 4×1 (32×64), 32×128 → 1×4 (32×32),
/// 128×128 → 2×2 (64×64).
pub fn partition(m: u32, n: u32, simdgroups: u32, explicit: Option<[u32; 2]>) -> Result<SimdgroupPartition, TileError> {
    if simdgroups == 0 {
        return Err(TileError::ZeroSimdgroups);
    }
    let fm = m / FRAGMENT;
    let fn_ = n / FRAGMENT;
    let make = |rows: u32, cols: u32| SimdgroupPartition {
        grid: [rows, cols],
        sg_tile: [m / rows, n / cols],
        sg_m_tiles: fm / rows,
        sg_n_tiles: fn_ / cols,
    };
    if let Some([rows, cols]) = explicit {
        let bad = |why: String| TileError::BadSimdgroupGrid { rows, cols, m, n, simdgroups, why };
        if rows == 0 || cols == 0 {
            return Err(bad("a grid axis is 0".to_string()));
        }
        if u64::from(rows) * u64::from(cols) != u64::from(simdgroups) {
            return Err(bad(format!("{rows}×{cols} = {} SIMD groups", u64::from(rows) * u64::from(cols))));
        }
        if fm % rows != 0 {
            return Err(bad(format!("{fm} fragment rows do not split into {rows}")));
        }
        if fn_ % cols != 0 {
            return Err(bad(format!("{fn_} fragment columns do not split into {cols}")));
        }
        return Ok(make(rows, cols));
    }
    (1..=simdgroups)
        .filter(|r| simdgroups % r == 0)
        .map(|r| (r, simdgroups / r))
        .filter(|&(r, c)| fm % r == 0 && fn_ % c == 0)
        .map(|(r, c)| make(r, c))
        .min_by_key(|p| (p.sg_m_tiles + p.sg_n_tiles, p.sg_m_tiles))
        .ok_or(TileError::NoPartition { m, n, simdgroups })
}

/// Compute- or memory-bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Arithmetic intensity at or above the machine balance.
    Compute,
    /// Arithmetic intensity below the machine balance.
    Memory,
    /// The device's FLOPs or bandwidth is unknown.
    Unknown,
}

impl Bound {
    /// `AI < balance → memory` (seed 004), else compute; unknown balance →
    /// unknown.
    pub fn classify(arithmetic_intensity: f64, machine_balance: Option<f64>) -> Bound {
        match machine_balance {
            None => Bound::Unknown,
            Some(b) if arithmetic_intensity < b => Bound::Memory,
            Some(_) => Bound::Compute,
        }
    }
}

/// A problem size run with a tile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProblemReport {
    /// The problem.
    pub problem: ProblemSize,
    /// Output tiles `[ceil(N/TILE_N), ceil(M/TILE_M)]` — the threadgroup grid
    /// (x along N, y along M, as seed 000's GEMM dispatch).
    pub output_tiles: [u32; 2],
    /// Their product: threadgroups dispatched.
    pub total_output_tiles: u64,
    /// Tile iterations along K: `ceil(K / TILE_K)`.
    pub k_iterations: u32,
    /// Useful FLOPs `2·M·N·K`.
    pub total_flops: u128,
    /// Output elements computed beyond the matrix edges, in percent of all
    /// computed.
    pub edge_waste_percent: f64,
    /// The tiles spread over the device's threadgroup slots.
    pub waves: Waves,
    /// A roofline prediction of the dispatch's time, where the catalogue
    /// knows the device's FP16 throughput and bandwidth: the larger of the
    /// MMA time (every tile's FLOPs, edges included, at peak, stretched by
    /// the last partial wave: `× waves / waves_exact`) and the memory time
    /// (every tile reading its A and B slices and scales from DRAM, no
    /// cache reuse). A model, not a measurement.
    pub predicted: Option<Prediction>,
}

/// A predicted time and which roof set it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub seconds: f64,
    pub compute_seconds: f64,
    pub memory_seconds: f64,
}

/// Everything seed 002 derives for one tile configuration on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TileReport {
    /// The device's name.
    pub device: String,
    /// The tile.
    pub tile: TileShape,
    /// Separate or fused.
    pub variant: TileVariant,
    /// B's format.
    pub weights: WeightFormat,
    /// K-values per scale.
    pub group_size: u32,
    /// SIMD groups per threadgroup.
    pub simdgroups: u32,
    /// `simdgroups × simd_width`.
    pub threads_per_threadgroup: u32,
    /// Threadgroup bytes of the A side (separate: `2·M·K·2`; fused: `M·K·2`).
    pub a_bytes: u64,
    /// Threadgroup bytes of the B side (separate: `2·K·N·2`; fused:
    /// `SG·8·8·2`).
    pub b_bytes: u64,
    /// `a_bytes + b_bytes`.
    pub tg_memory_bytes: u64,
    /// The device's threadgroup memory per threadgroup.
    pub budget_bytes: u32,
    /// `tg_memory_bytes / budget_bytes` in percent.
    pub budget_percent: f64,
    /// Whether the tile leaves headroom (`< 100 %`).
    pub fits: bool,
    /// Why not, when it does not fit.
    pub rejection: Option<String>,
    /// The SIMD-group partition.
    pub partition: SimdgroupPartition,
    /// `SG_M × SG_N`.
    pub accumulators_per_simdgroup: u32,
    /// Accumulator register bytes per thread with half accumulators (4 per
    /// 8×8 fragment).
    pub accumulator_bytes_per_thread_fp16: u32,
    /// The same with float accumulators (8 per fragment).
    pub accumulator_bytes_per_thread_fp32: u32,
    /// 8-deep k-steps per tile iteration: `K / 8`.
    pub k_subtiles: u32,
    /// `SG_M × SG_N × K/8` multiply-accumulates per SIMD group per iteration.
    pub mma_per_simdgroup_per_iteration: u32,
    /// `(M/8)(N/8)(K/8)` per threadgroup per iteration.
    pub mma_per_threadgroup_per_iteration: u64,
    /// `floor(pool / tg_memory_bytes)`, lowered by any known thread,
    /// SIMD-group or slot limit. A rejected tile keeps the formula's value.
    pub tgs_per_core: u32,
    /// `tgs_per_core × threads_per_threadgroup`.
    pub threads_per_core: u64,
    /// `tgs_per_core × cores`: output tiles in flight.
    pub concurrent_threadgroups: u64,
    /// `2·M·N·K` per tile iteration.
    pub flops_per_iteration: u64,
    /// A bytes loaded from device memory per iteration: `M·K·2`.
    pub a_load_bytes: f64,
    /// B bytes loaded per iteration: `K·N·bytes_per_weight`.
    pub b_load_bytes: f64,
    /// Scale bytes per iteration, amortized: `(K/group)·N·2` (0 for FP16).
    pub scale_load_bytes: f64,
    /// FLOPs per byte ignoring the scales (seed 002 §5.1).
    pub arithmetic_intensity: f64,
    /// FLOPs per byte including the scales.
    pub arithmetic_intensity_with_scales: f64,
    /// The device's FP16 FLOPs per byte, if known.
    pub machine_balance: Option<f64>,
    /// `arithmetic_intensity` against `machine_balance`.
    pub bound: Bound,
    /// Dequant ALU operations per iteration: `K·N·ops`.
    pub dequant_ops_per_iteration: u64,
    /// `dequant_ops / flops` in percent.
    pub dequant_overhead_percent: f64,
    /// Output tiles and waves for a problem size, when one was given.
    pub problem: Option<ProblemReport>,
    /// Remarks.
    pub notes: Vec<String>,
}

impl TileReport {
    /// `Ok` when the tile fits; otherwise the rejection as an error.
    pub fn ensure_fits(&self) -> Result<(), TileError> {
        match &self.rejection {
            None => Ok(()),
            Some(reason) => Err(TileError::DoesNotFit {
                bytes: self.tg_memory_bytes,
                budget: self.budget_bytes,
                percent: self.budget_percent,
                reason: reason.clone(),
            }),
        }
    }
}

/// Threadgroup bytes `(A side, B side)` of a configuration: separate
/// `(2·M·K·2, 2·K·N·2)`, fused `(M·K·2, SG·128)`, staged
/// [`staged_gemm_memory`] of the untransposed kernel (4-bit weights: B
/// dequantized as `[N][K]`); saturating at `u64::MAX` (only tiles no
/// threadgroup holds come near it).
pub fn threadgroup_memory(shape: TileShape, variant: TileVariant, weights: WeightFormat, simdgroups: u32, stages: u32) -> (u64, u64) {
    let (m, n, k) = (u64::from(shape.m), u64::from(shape.n), u64::from(shape.k));
    match variant {
        TileVariant::Separate => (4u64.saturating_mul(m * k), 4u64.saturating_mul(k * n)),
        TileVariant::Fused => (2u64.saturating_mul(m * k), u64::from(simdgroups) * STAGING_BYTES_PER_SIMDGROUP),
        TileVariant::Staged if weights.has_scales() => staged_gemm_memory((shape.m, shape.k), (shape.n, shape.k), 2, stages, BStaging::Packed { dequantized_slice: true }),
        TileVariant::Staged => staged_gemm_memory((shape.m, shape.k), (shape.k, shape.n), 2, stages, BStaging::Values),
    }
}

/// What a staged GEMM keeps of B in threadgroup memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BStaging {
    /// B's slice of values in each stage.
    Values,
    /// 4-bit weights: with 2 or more stages each stage's raw words and
    /// scales, and (`dequantized_slice`) one slice dequantized for the tiles
    /// that decode through it (a kernel of whole tiles decodes every tile
    /// from the raw words and has none).
    Packed { dequantized_slice: bool },
}

/// Threadgroup bytes `(A side, B side)` of enigma's staged GEMM, the one
/// rule the planner and the library's kernels (`GemmConfig`, `QgemmConfig`)
/// declare by: A's slice `a` (rows, columns as stored) in each of `stages`
/// stages; B's slice `b` in each stage, or for 4-bit weights
/// ([`BStaging::Packed`]) maybe one dequantized slice (`b` = `[N][K]`) and,
/// with 2 or more stages, each stage's raw words (`K / 8 × N` u32) and
/// scales (`N` f16). Slices are padded by [`staged_slice_bytes`].
pub fn staged_gemm_memory(a: (u32, u32), b: (u32, u32), elem_bytes: u32, stages: u32, b_staging: BStaging) -> (u64, u64) {
    let s = u64::from(stages.max(1));
    let a_bytes = staged_slice_bytes(a.0, a.1, elem_bytes).saturating_mul(s);
    let b_slice = staged_slice_bytes(b.0, b.1, elem_bytes);
    let BStaging::Packed { dequantized_slice } = b_staging else {
        return (a_bytes, b_slice.saturating_mul(s));
    };
    let (n, k) = (u64::from(b.0), u64::from(b.1));
    let raw = if s > 1 { (k / 8 * n * 4 + n * 2).saturating_mul(s) } else { 0 };
    (a_bytes, if dequantized_slice { b_slice } else { 0 }.saturating_add(raw))
}

/// Elements of padding after each row of a [`TileVariant::Staged`] slice:
/// 16 bytes of 16-bit values, so the 8 rows of a fragment start in 8
/// different bank groups (an `ldmatrix` without conflicts).
pub const STAGED_PAD: u32 = 8;

/// Bytes of a `rows × cols` slice of `elem_bytes`-byte values staged with
/// [`STAGED_PAD`] elements after each row: the one rule the planner and the
/// library GEMM share.
pub fn staged_slice_bytes(rows: u32, cols: u32, elem_bytes: u32) -> u64 {
    u64::from(rows).saturating_mul(u64::from(cols) + u64::from(STAGED_PAD)).saturating_mul(u64::from(elem_bytes))
}

/// The product of `factors`, or [`TileError::TooLarge`] naming `what`.
fn product_u64(shape: TileShape, what: &'static str, factors: &[u64]) -> Result<u64, TileError> {
    factors
        .iter()
        .try_fold(1u64, |acc, &f| acc.checked_mul(f))
        .ok_or(TileError::TooLarge { shape, what, detail: "more than a 64-bit count" })
}

/// Like [`product_u64`], for figures reported as 32-bit counts.
fn product_u32(shape: TileShape, what: &'static str, factors: &[u32]) -> Result<u32, TileError> {
    factors
        .iter()
        .try_fold(1u32, |acc, &f| acc.checked_mul(f))
        .ok_or(TileError::TooLarge { shape, what, detail: "more than a 32-bit count" })
}

fn check_shape(shape: TileShape) -> Result<(), TileError> {
    for (dim, value) in [("M", shape.m), ("N", shape.n), ("K", shape.k)] {
        if value == 0 {
            return Err(TileError::ZeroDimension { dim, shape });
        }
        if value % FRAGMENT != 0 {
            return Err(TileError::NotFragmentMultiple { dim, value, shape });
        }
    }
    Ok(())
}

/// Plans one tile configuration on `device`; with `problem`, also its output
/// tiles and waves. A tile that needs 100 % or more of the threadgroup memory
/// is planned with `fits: false` and the reason; [`TileReport::ensure_fits`]
/// turns that into an error.
pub fn plan_tile(config: &TileConfig, device: &DeviceSpec, problem: Option<ProblemSize>) -> Result<TileReport, TileError> {
    device.validate()?;
    let shape = config.shape;
    check_shape(shape)?;
    if config.group_size == 0 {
        return Err(TileError::ZeroGroupSize);
    }
    let sg = config.simdgroups;
    if sg == 0 {
        return Err(TileError::ZeroSimdgroups);
    }
    let threads = u64::from(sg) * u64::from(device.simd_width);
    if threads > u64::from(device.max_threads_per_threadgroup) {
        return Err(TileError::TooManyThreads {
            simdgroups: sg,
            simd_width: device.simd_width,
            threads,
            max: device.max_threads_per_threadgroup,
        });
    }
    let threads = threads as u32;
    let part = partition(shape.m, shape.n, sg, config.sg_grid)?;

    let (a_bytes, b_bytes) = threadgroup_memory(shape, config.variant, config.weights, sg, config.stages);
    let tg_memory_bytes = a_bytes
        .checked_add(b_bytes)
        .filter(|b| *b < u64::MAX)
        .ok_or(TileError::TooLarge { shape, what: "threadgroup memory", detail: "more than 2^64 bytes" })?;
    let budget = device.threadgroup_memory_bytes;
    let budget_percent = tg_memory_bytes as f64 / f64::from(budget.max(1)) * 100.0;
    let fits = tg_memory_bytes < u64::from(budget);
    let rejection = (!fits).then(|| {
        if tg_memory_bytes == u64::from(budget) {
            format!(
                "{} {} needs {} bytes of threadgroup memory, 100 % of the {}-byte budget: it leaves no headroom \
                 and is rejected (seed 002 §2.3)",
                shape,
                config.variant.short_name(),
                thousands(tg_memory_bytes),
                thousands(u64::from(budget))
            )
        } else {
            format!(
                "{} {} needs {} bytes of threadgroup memory, {:.0} % of the {}-byte budget",
                shape,
                config.variant.short_name(),
                thousands(tg_memory_bytes),
                budget_percent,
                thousands(u64::from(budget))
            )
        }
    });

    // Occupancy: the memory bound, lowered by any limit the device knows.
    let pool = u64::from(device.threadgroup_memory_per_core_bytes);
    let mut tgs = pool / tg_memory_bytes; // tg_memory_bytes > 0: M, K ≥ 8
    if let Some(t) = device.max_threads_per_core {
        tgs = tgs.min(u64::from(t / threads));
    }
    if let Some(s) = device.max_simdgroups_per_core {
        tgs = tgs.min(u64::from(s / sg));
    }
    if let Some(slots) = device.max_threadgroups_per_core {
        tgs = tgs.min(u64::from(slots));
    }
    let tgs_per_core = u32::try_from(tgs).unwrap_or(u32::MAX);

    let (m, n, k) = (u64::from(shape.m), u64::from(shape.n), u64::from(shape.k));
    let flops = product_u64(shape, "FLOPs per iteration", &[2, m, n, k])?;
    let a_load = (m * k) as f64 * 2.0;
    let b_load = (k * n) as f64 * config.weights.bytes_per_weight();
    let scale_load = if config.weights.has_scales() {
        k as f64 / f64::from(config.group_size) * n as f64 * 2.0
    } else {
        0.0
    };
    let ai = flops as f64 / (a_load + b_load);
    let ai_scales = flops as f64 / (a_load + b_load + scale_load);
    let machine_balance = device.machine_balance();
    let bound = Bound::classify(ai, machine_balance);
    let dequant_ops = product_u64(shape, "dequantization operations per iteration", &[k, n, config.weights.dequant_ops_per_weight()])?;

    let accumulators = product_u32(shape, "accumulators per SIMD group", &[part.sg_m_tiles, part.sg_n_tiles])?;
    let k_subtiles = shape.k / FRAGMENT;
    let accumulator_bytes_fp16 = product_u32(shape, "accumulator bytes per thread", &[accumulators, 4])?;
    let accumulator_bytes_fp32 = product_u32(shape, "accumulator bytes per thread", &[accumulators, 8])?;
    let mma_per_simdgroup = product_u32(shape, "MMAs per SIMD group and iteration", &[accumulators, k_subtiles])?;
    let mma_per_threadgroup = product_u64(shape, "MMAs per threadgroup and iteration", &[m / 8, n / 8, k / 8])?;

    let mut notes = Vec::new();
    if machine_balance.is_none() {
        notes.push(format!(
            "{} has no known FP16 throughput or bandwidth in the catalogue, so the bound is unknown; \
             give --tflops and --bandwidth to classify it",
            device.name
        ));
    }

    let problem = match problem {
        None => None,
        Some(p) => {
            if p.m == 0 || p.n == 0 || p.k == 0 {
                return Err(TileError::ZeroProblem { m: p.m, n: p.n, k: p.k });
            }
            let tx = p.n.div_ceil(shape.n);
            let ty = p.m.div_ceil(shape.m);
            let total = u64::from(tx) * u64::from(ty);
            let computed = u128::from(total) * u128::from(shape.m) * u128::from(shape.n);
            let useful = u128::from(p.m) * u128::from(p.n);
            let w = waves(total, device, tgs_per_core.max(1))?;
            if tgs_per_core == 0 {
                notes.push("no threadgroup of this tile fits on a core; waves are counted at one per core".to_string());
            }
            let k_iterations = p.k.div_ceil(shape.k);
            let tile_iterations = total as f64 * f64::from(k_iterations);
            let roofs = device.roof_seconds(tile_iterations * flops as f64, tile_iterations * (a_load + b_load + scale_load), true);
            let predicted = match roofs {
                (Some(compute), Some(memory_seconds)) if w.waves_exact > 0.0 => {
                    let compute_seconds = compute * (w.waves as f64 / w.waves_exact);
                    Some(Prediction { seconds: compute_seconds.max(memory_seconds), compute_seconds, memory_seconds })
                }
                _ => None,
            };
            Some(ProblemReport {
                problem: p,
                output_tiles: [tx, ty],
                total_output_tiles: total,
                k_iterations,
                total_flops: 2 * u128::from(p.m) * u128::from(p.n) * u128::from(p.k),
                edge_waste_percent: (computed - useful) as f64 / computed as f64 * 100.0,
                waves: w,
                predicted,
            })
        }
    };

    Ok(TileReport {
        device: device.name.clone(),
        tile: shape,
        variant: config.variant,
        weights: config.weights,
        group_size: config.group_size,
        simdgroups: sg,
        threads_per_threadgroup: threads,
        a_bytes,
        b_bytes,
        tg_memory_bytes,
        budget_bytes: budget,
        budget_percent,
        fits,
        rejection,
        partition: part,
        accumulators_per_simdgroup: accumulators,
        accumulator_bytes_per_thread_fp16: accumulator_bytes_fp16,
        accumulator_bytes_per_thread_fp32: accumulator_bytes_fp32,
        k_subtiles,
        mma_per_simdgroup_per_iteration: mma_per_simdgroup,
        mma_per_threadgroup_per_iteration: mma_per_threadgroup,
        tgs_per_core,
        threads_per_core: u64::from(tgs_per_core) * u64::from(threads),
        concurrent_threadgroups: u64::from(tgs_per_core) * u64::from(device.gpu_cores),
        flops_per_iteration: flops,
        a_load_bytes: a_load,
        b_load_bytes: b_load,
        scale_load_bytes: scale_load,
        arithmetic_intensity: ai,
        arithmetic_intensity_with_scales: ai_scales,
        machine_balance,
        bound,
        dequant_ops_per_iteration: dequant_ops,
        dequant_overhead_percent: dequant_ops as f64 / flops as f64 * 100.0,
        problem,
        notes,
    })
}

/// Seed 002 §9.1's host-side tile selection, verbatim: M ≤ 16 → 32×128×32
/// (decode), M ≤ 64 → 64×64×32, M ≤ 256 → 128×64×16, else 128×128×16. N and K
/// do not take part, as in the seed.
pub fn select_tile(m: u32, _n: u32, _k: u32) -> TileShape {
    if m <= 16 {
        TileShape::new(32, 128, 32)
    } else if m <= 64 {
        TileShape::new(64, 64, 32)
    } else if m <= 256 {
        TileShape::new(128, 64, 16)
    } else {
        TileShape::new(128, 128, 16)
    }
}
