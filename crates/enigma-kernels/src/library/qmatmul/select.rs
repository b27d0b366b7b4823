//! The quantized matmul family's one selection: which kernel computes
//! `C = A · dequant(B)` for 4-bit weights ([`kernel_for`]) and its whole
//! configuration ([`select`], or [`select_kernel`] for a kernel the caller
//! names).
//!
//! The rule: MLX's affine format runs the GEMM on cooperative tensors
//! (`qgemm_cooperative`) at any M where the device's cooperative products
//! are `wgmma` and N and K are multiples of 128, unless a thread count or
//! the affine decode kernel's blocking (rows, columns per SIMD group, words
//! per load) is asked for, and `qmatmul_affine` elsewhere. Weights in
//! fragment order run the fragment decode row (`qmatmul_fragments`) up to
//! its `DECODE_ROWS`, unless the overrides ask for a GEMM's features (a
//! tile, stages, K splits summed in the kernel, which the decode row does
//! not do), and above it (or when those are asked for) the GEMM on
//! cooperative tensors where it would run on the row layout, no tile or
//! stages are asked for and N is a multiple of 32 (the rows its tile
//! copies take), else the tensor-core GEMM (`gemm::qgemm`). FP4/INT4 in
//! their row layout run
//! the decode kernel ([`super::decode`]) up to [`super::decode::DECODE_ROWS`]
//! rows, or at any M
//! when the overrides ask for the decode kernel's own blocking (rows,
//! columns per thread, words per iteration, stages) or for no vector loads; else
//! the GEMM on cooperative tensors (`qgemm_cooperative`) at
//! [`cooperative_rows`] where the device's cooperative products are
//! `wgmma` (unless a tile or a thread count is asked for, which are the
//! tensor-core GEMM's; both GEMMs sum K splits in the kernel when asked),
//! and the tensor-core GEMM elsewhere. `GemmOptions::cooperative` `Some(true)` runs the
//! cooperative one at any M, `Some(false)` never. The fused kernel
//! (`qgemm_fused`) runs only when named.

use super::decode::{default_min_tiles, default_threads, plan, DecodeOptions, RowBlocking, DECODE_ROWS};
use super::plan::{BlockingOptions, DecodePlan};
use crate::library::gemm::{GemmConfig, QgemmConfig};
use crate::library::split::SplitSum;
use crate::library::tile::TileShape;
use crate::library::qgemm_cooperative::{CoopQgemmConfig, COOP_QGEMM_COLUMNS, COOP_QGEMM_ROWS, SLICE_DEPTHS};
use crate::library::qgemm_fused::FusedQgemmConfig;
use crate::library::qmatmul_affine::{self, AffineBlocking};
use crate::library::qmatmul_fragments::{self, FragmentBlocking, FragmentOptions};
use crate::library::quant::Format;
use crate::library::select::{self, argument, Overrides, SelectError};
use crate::library::{to_u32, DType};
use enigma_backend::DeviceInfo;
use enigma_ir::{Feature, QuantLayout};

/// A quantized matmul: `A` of `m × k` f16 values times `k × n` 4-bit
/// weights of `format` in `layout`, `group` K values per scale; C of `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QmatmulProblem {
    pub format: Format,
    pub layout: QuantLayout,
    pub out: DType,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
}

/// The kernels of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QmatmulKernel {
    /// FP4/INT4 in their row layout, a few rows: the decode kernel.
    Decode,
    /// FP4/INT4 in fragment order, a few rows: `qmatmul_fragments`.
    FragmentsDecode,
    /// MLX's affine format where the cooperative kernel does not run it:
    /// `qmatmul_affine`.
    Affine,
    /// The tensor-core GEMM on B decoded from staged words: `gemm::qgemm`.
    Tiled,
    /// The fused variant of seed 002: `qgemm_fused` (only when named).
    Fused,
    /// FP4/INT4 (in either layout) and MLX's affine weights on cooperative
    /// tensors: `qgemm_cooperative` (where asked for, and by default at
    /// [`cooperative_rows`] where products are `wgmma`).
    Cooperative,
}

/// One kernel of the family with its configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QmatmulSelection {
    Decode(DecodePlan<RowBlocking>),
    FragmentsDecode(DecodePlan<FragmentBlocking>),
    Affine(DecodePlan<AffineBlocking>),
    Tiled(QgemmConfig),
    Fused(FusedQgemmConfig),
    Cooperative(CoopQgemmConfig),
}

/// Whether the overrides ask for K splits summed in the kernel, which the
/// fragment order's decode row does not do: those rows take a GEMM.
fn kernel_sum_asked(overrides: &Overrides) -> bool {
    overrides.gemm.split_sum == Some(SplitSum::LastThreadgroup)
}

/// The rows of C for which [`kernel_for`] runs the quantized GEMM on
/// cooperative tensors by default for `format`, where the device's
/// cooperative products are `wgmma`: FP4 from 5 rows (past the decode
/// kernel's [`DECODE_ROWS`]), INT4 from 17, to 128. On the H200 (11008 ×
/// 4096, group 128, `BENCHMARKS.md`, the quantized matmul from 1 to 48
/// rows) FP4 ran 28.5, 28.3, 29.2, 28.8, 31.5, 30.8 and 37.8 µs at 5, 8,
/// 12, 16, 24, 32 and 48 rows against the tensor-core GEMM's 30.8, 31.2,
/// 31.4, 30.4, 33.7, 32.4 and 65.6; INT4 24.1 and 24.2 at 24 and 32 rows
/// against 26.4 and 25.8, but 22.4 and 22.3 at 16 and 12 against 21.7 and
/// 21.9, and level at 8 (21.4 against 21.5), so INT4 keeps the tensor-core
/// GEMM to 16 rows. At 48, 64 and 128 rows of INT4 it ran 30.2, 30.0 and
/// 38.3 against 49.0, 51 and 70 (whose tiles above 32 rows no longer split
/// K). Above 128 rows (several tiles of rows, each decoding the weights
/// again) it has not been timed. MLX's affine format from 2 rows: on the
/// H200 (11008 × 4096, group 64, `BENCHMARKS.md`) it ran 29.1, 29.4, 29.7,
/// 36.7 and 40.5 µs at 2, 4, 16, 64 and 128 rows against the decode
/// kernel's (`qmatmul_affine`, which reads the weights again for every 8
/// rows) 59.0, 206.8, 1432, 5716 and 11366 with its earlier default of
/// four words per load, and 27.9 at 2 rows with its best blocking, the
/// default now; at one row that kernel takes 20.6 µs against 28.7.
pub fn cooperative_rows(format: Format) -> std::ops::RangeInclusive<usize> {
    match format {
        Format::Fp4 => DECODE_ROWS as usize + 1..=128,
        Format::Int4 => 17..=128,
        Format::MlxAffine => 2..=usize::MAX,
    }
}

/// Whether the cooperative kernel takes MLX's affine weights of `n × k` at
/// every tile it may plan: N and K multiples of the widest tile's columns
/// and deepest slice (128), so its loads of the scales and biases stay in
/// their buffers ([`CoopQgemmConfig::takes_affine`]).
fn affine_takes(n: usize, k: usize) -> bool {
    n.is_multiple_of(COOP_QGEMM_COLUMNS[COOP_QGEMM_COLUMNS.len() - 1] as usize) && k.is_multiple_of(SLICE_DEPTHS[SLICE_DEPTHS.len() - 1] as usize)
}

/// The kernel [`select()`] runs for `problem` on `device` with `overrides`
/// (the rule in the module doc).
pub fn kernel_for(problem: &QmatmulProblem, device: &DeviceInfo, overrides: &Overrides) -> QmatmulKernel {
    if overrides.gemm.cooperative == Some(true) {
        return QmatmulKernel::Cooperative;
    }
    let m = problem.m;
    let g = &overrides.gemm;
    let n = u32::try_from(problem.n).ok();
    // The cooperative kernel by default: at `cooperative_rows` on
    // `wgmma`, where it takes the weights and no option of the tensor-core
    // kernel is asked for.
    let cooperative = g.cooperative.is_none()
        && device.wgmma()
        && cooperative_rows(problem.format).contains(&m)
        && n.is_some_and(CoopQgemmConfig::takes)
        && g.tile.is_none()
        && overrides.threads.is_none();
    if problem.format.has_biases() {
        // The affine decode kernel's own blocking asked for keeps it.
        let q = &overrides.qmatmul;
        let decode_asked = [q.rows_per_threadgroup, q.columns_per_simdgroup, q.words_per_load].iter().any(Option::is_some);
        return if cooperative && !decode_asked && affine_takes(problem.n, problem.k) { QmatmulKernel::Cooperative } else { QmatmulKernel::Affine };
    }
    if problem.layout == QuantLayout::Fragments {
        let gemm_asked = g.tile.is_some() || g.stages.is_some();
        // Above the decode row the cooperative kernel also needs its tile
        // copies to take the words.
        return if m <= qmatmul_fragments::DECODE_ROWS as usize && !gemm_asked && !kernel_sum_asked(overrides) {
            QmatmulKernel::FragmentsDecode
        } else if cooperative && !gemm_asked && n.is_some_and(CoopQgemmConfig::takes_fragments) {
            QmatmulKernel::Cooperative
        } else {
            QmatmulKernel::Tiled
        };
    }
    let q = &overrides.qmatmul;
    let decode_asked = [q.rows_per_threadgroup, q.columns_per_thread, q.words_per_iteration, q.stages].iter().any(Option::is_some) || overrides.vectorize == Some(false);
    if decode_asked || m <= DECODE_ROWS as usize {
        QmatmulKernel::Decode
    } else if cooperative {
        QmatmulKernel::Cooperative
    } else {
        QmatmulKernel::Tiled
    }
}

/// The kernel [`kernel_for`] names, configured for `problem` on `device`.
pub fn select(problem: &QmatmulProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<QmatmulSelection, SelectError> {
    select_kernel(kernel_for(problem, device, overrides), problem, device, overrides)
}

/// `kernel` configured for `problem` on `device`: the decode kernels their
/// blocking for the device's compute units (on a GPU: enough column tiles
/// for two threadgroups per compute unit, K split only where that still
/// leaves units short of warps; the simulator gains nothing from either),
/// the FP4/INT4 one's splits summed in the kernel where the device has
/// device-scope fences (one dispatch), else by the reduction;
/// the tensor-core GEMM [`QgemmConfig::for_rows`]'s tile deepened where the
/// group allows, in the weights' layout, K split where the output has few
/// tiles, stages where they fit (more where the whole-tile variant, which
/// stages no dequantized slice, takes the shape), its splits summed in the
/// kernel at one row where the device has device-scope fences; the fused
/// kernel its tile for M; the kernel on cooperative tensors
/// [`CoopQgemmConfig::for_problem`]'s tile and stages for the device (see
/// `select_cooperative`). Overrides replace each default.
pub fn select_kernel(kernel: QmatmulKernel, problem: &QmatmulProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<QmatmulSelection, SelectError> {
    let QmatmulProblem { format, layout: _, out, m, n, k, group } = *problem;
    let compute_units = select::gpu_compute_units(device);
    let q = &overrides.qmatmul;
    let g = &overrides.gemm;
    Ok(match kernel {
        QmatmulKernel::Decode => {
            let cols = match (q.columns_per_thread, overrides.vectorize) {
                (Some(c), _) => Some(c),
                (None, Some(false)) => Some(1),
                (None, _) => None,
            };
            let default_sum = if select::has_device_fences(device) { SplitSum::LastThreadgroup } else { SplitSum::Reduction };
            let split_sum = select::split_sum("qmatmul", device, g.split_sum, default_sum)?;
            let blocking = BlockingOptions { rows: q.rows_per_threadgroup, cols, words: q.words_per_iteration, min_tiles: default_min_tiles(m, compute_units) };
            let options = DecodeOptions {
                blocking,
                splits: g.k_splits,
                compute_units,
                stages: q.stages,
                split_sum: Some(split_sum),
                stage_memory: select::stage_memory(device),
            };
            let threads = overrides.threads.unwrap_or_else(|| default_threads(n, m, compute_units));
            QmatmulSelection::Decode(plan(format, out, m, n, k, group, threads, options)?)
        }
        QmatmulKernel::FragmentsDecode => {
            let options = FragmentOptions { threads: overrides.threads, rows: q.rows_per_threadgroup, steps: q.k_steps_per_iteration, splits: g.k_splits };
            QmatmulSelection::FragmentsDecode(qmatmul_fragments::plan(format, out, [m, n, k, group], options, 2 * compute_units)?)
        }
        QmatmulKernel::Affine => {
            if let Some(s) = g.k_splits.filter(|&s| s != 1) {
                return Err(argument("qmatmul", format!("{s} K splits asked for, but the kernel for {format} splits K over the lanes of a SIMD group only (k_splits 1 or none)")));
            }
            let words = match (q.words_per_load, overrides.vectorize) {
                (Some(u), _) => Some(u),
                (None, Some(false)) => Some(1),
                (None, _) => None,
            };
            let options = BlockingOptions { rows: q.rows_per_threadgroup, cols: q.columns_per_simdgroup, words, min_tiles: 2 * compute_units };
            let threads = overrides.threads.unwrap_or(qmatmul_affine::DEFAULT_THREADS);
            QmatmulSelection::Affine(qmatmul_affine::plan(out, m, n, k, group, threads, options)?)
        }
        QmatmulKernel::Tiled => QmatmulSelection::Tiled(select_tiled(problem, device, overrides)?),
        QmatmulKernel::Cooperative => QmatmulSelection::Cooperative(select_cooperative(problem, device, overrides)?),
        QmatmulKernel::Fused => {
            let op = "qmatmul_fused";
            let (mu, n, k) = (to_u32(op, "m", m)?, to_u32(op, "n", n)?, to_u32(op, "k", k)?);
            let cfg = match g.tile {
                Some(tile) => FusedQgemmConfig::from_tile(format, out, tile),
                None => FusedQgemmConfig::for_rows(format, out, mu),
            };
            select::check_tile_threads(op, cfg.tile, overrides.threads)?;
            let cfg = FusedQgemmConfig { splits: select::k_splits(device, g.k_splits, cfg.splits_for(mu, n, k, select::threadgroups_wanted(device))), ..cfg };
            cfg.check(select::limits(device).max_memory_bytes)?;
            QmatmulSelection::Fused(cfg)
        }
    })
}

/// Who sums the tensor-core GEMM's K splits by default at `m` rows: the
/// kernel at one row where the device has device-scope fences, else the
/// reduction (`BENCHMARKS.md`, the quantized GEMM's split-K sums: the
/// kernel's own sum is the faster at one row and the slower at 16, whose
/// last threadgroups sum sixteen times the elements).
fn default_split_sum(device: &DeviceInfo, m: u32) -> SplitSum {
    if m == 1 && select::has_device_fences(device) {
        SplitSum::LastThreadgroup
    } else {
        SplitSum::Reduction
    }
}

/// The tensor-core GEMM's configuration (see [`select_kernel`]).
fn select_tiled(problem: &QmatmulProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<QgemmConfig, SelectError> {
    let op = "qmatmul";
    let (mu, n, k) = (to_u32(op, "m", problem.m)?, to_u32(op, "n", problem.n)?, to_u32(op, "k", problem.k)?);
    let group = to_u32(op, "group", problem.group)?;
    let max_memory = select::limits(device).max_memory_bytes;
    let stage_memory = select::stage_memory(device);
    let g = &overrides.gemm;
    let cfg = match g.tile {
        Some(tile) => {
            select::check_tile_threads(op, tile, overrides.threads)?;
            QgemmConfig::from_tile(problem.format, problem.out, tile)
        }
        None => QgemmConfig::for_rows(problem.format, problem.out, mu).deepened_for(group, max_memory),
    };
    let cfg = cfg.in_layout(problem.layout, n);
    let splits = select::k_splits(device, g.k_splits, cfg.splits_for(mu, n, k, select::threadgroups_wanted(device)));
    let split_sum = select::split_sum(op, device, g.split_sum, default_split_sum(device, mu))?;
    let cfg = cfg.with_gemm(|gemm| GemmConfig { splits, split_sum, ..gemm });
    let cfg = match g.stages {
        Some(stages) => cfg.with_stages(stages),
        None => {
            // The whole-tile kernel stages no dequantized slice, so where
            // the shape takes it, more stages may fit.
            let whole = cfg.with_stages(2).whole_tiles_for(mu, n, k);
            let planned = if whole.gemm.edges.whole_tiles() { whole.pipelined_for(stage_memory) } else { cfg.pipelined_for(stage_memory) };
            if planned.threadgroup_memory_bytes() <= stage_memory {
                planned
            } else {
                cfg
            }
        }
    };
    let cfg = cfg.whole_tiles_for(mu, n, k);
    cfg.check(max_memory)?;
    cfg.check_group(group)?;
    Ok(cfg)
}

/// The quantized GEMM on cooperative tensors for `problem` on `device`:
/// [`CoopQgemmConfig::for_problem`]'s tile for M (the tile asked for where
/// one is) with the most stages that fit its threadgroup
/// memory ([`GemmOptions::stages`](crate::library::select::GemmOptions::stages)
/// where asked), K split where the output has too few tiles for twelve
/// SIMD groups per compute unit ([`CoopQgemmConfig::splits_for`]: on the
/// H200 at 16, 64 and 128 rows of 11008 × 4096, 3 splits ran 29, 36 and 47
/// µs against 39, 45 and 66 with 2 or none and 38 at 16 rows with 4;
/// [`GemmOptions::k_splits`](crate::library::select::GemmOptions::k_splits)
/// where asked), the splits summed by the reduction, or by the last
/// threadgroup of each tile where asked
/// ([`GemmOptions::split_sum`](crate::library::select::GemmOptions::split_sum);
/// on the H200 at 16, 64 and 128 rows of 11008 × 4096 INT4 in 3 splits the
/// kernel's own sum ran 23.0, 35.2 and 54.2 µs against the reduction's
/// 24.1, 30.9 and 44.7: its last threadgroups sum after their own slices,
/// at the end of the dispatch). An error where the
/// device has no cooperative tensors, the weights are not FP4/INT4 (in
/// seed 002's rows or in fragment order), N is not a multiple of 8 (of 32
/// for fragment-ordered words staged by tile copies asked for; by default
/// the threads copy other N's), the overrides fix a thread
/// count, ask for the kernel's sum on a device without fences, or a tile not the kernel's
/// ([`GemmOptions::tile`](crate::library::select::GemmOptions::tile): `tm`
/// one of [`COOP_QGEMM_ROWS`], `tn` one of [`COOP_QGEMM_COLUMNS`], `tk` one
/// of [`SLICE_DEPTHS`], `tn / 16` SIMD groups), or nothing fits.
fn select_cooperative(problem: &QmatmulProblem, device: &DeviceInfo, overrides: &Overrides) -> Result<CoopQgemmConfig, SelectError> {
    let op = "qmatmul";
    let refuse = |message: String| Err(argument(op, format!("the quantized GEMM on cooperative tensors: {message}")));
    let (m, n) = (to_u32(op, "m", problem.m)?, to_u32(op, "n", problem.n)?);
    let g = &overrides.gemm;
    if !device.features.contains(&Feature::CooperativeTensors) {
        return refuse(format!("{} has no cooperative tensors", device.name));
    }
    if !CoopQgemmConfig::takes(n) {
        return refuse(format!("N = {n} must be a multiple of 8 (16-byte copies of the scales)"));
    }
    let fragments = problem.layout == QuantLayout::Fragments;
    if overrides.threads.is_some() {
        return refuse("a thread count is an option of the SIMD-group kernels".to_string());
    }
    // A tile asked for: one of the kernel's, 64 deep, its SIMD groups 4 per
    // warpgroup of 64 columns in any grid.
    let tile = match g.tile {
        None => None,
        Some(t) => {
            let TileShape { m: tm, n: tn, k: tk } = t.shape;
            if !CoopQgemmConfig::has_tile(tm, tn, tk) || t.sg_rows * t.sg_cols != tn / 16 {
                return refuse(format!("a {t} tile; it takes tm one of {COOP_QGEMM_ROWS:?}, tn one of {COOP_QGEMM_COLUMNS:?}, tk one of {SLICE_DEPTHS:?}, with tn / 16 SIMD groups"));
            }
            Some((tm, tn, tk))
        }
    };
    let max_memory = select::limits(device).max_memory_bytes;
    // Fragment-ordered words whose rows of units are no whole rows of the
    // tile copies' view are staged by the threads' copies unless tile
    // copies are asked for.
    let tile_copies = g.tile_copies.unwrap_or_else(|| select::tile_copies_by_default(device) && (!fragments || CoopQgemmConfig::takes_fragments(n)));
    if fragments && tile_copies && !CoopQgemmConfig::takes_fragments(n) {
        return refuse(format!("N = {n} must be a multiple of 32 for tile copies of fragment-ordered words (rows of {} words)", crate::library::qgemm_cooperative::FRAGMENT_BOX_WORDS));
    }
    let (k, units) = (to_u32(op, "k", problem.k)?, select::gpu_compute_units(device));
    let planned = |tile| CoopQgemmConfig::for_problem(problem.format, problem.out, m, tile_copies, (tile, g.stages), max_memory);
    // Tile copies of fragment-ordered words take a box per row of units,
    // each inside B: a slice depth that divides K (64 does: K is whole
    // units).
    let planned = |tile| match planned(tile) {
        Some(cfg) if fragments && tile_copies && !k.is_multiple_of(cfg.tk) => planned(Some((cfg.tm, cfg.tn, SLICE_DEPTHS[0]))),
        cfg => cfg,
    };
    let Some(cfg) = planned(tile) else {
        let stages = g.stages.map_or(String::new(), |s| format!(" in {s} stages"));
        return refuse(format!("no tile fits {max_memory} bytes of threadgroup memory{stages}"));
    };
    let splits = g.k_splits.unwrap_or_else(|| cfg.splits_for(m, n, k, units));
    let split_sum = select::split_sum(op, device, g.split_sum, SplitSum::Reduction)?;
    // Fragment order where the words are in it, else the format's own layout.
    let layout = if fragments { QuantLayout::Fragments } else { problem.format.dequantize_code().1 };
    let cfg = CoopQgemmConfig { splits, split_sum, layout, ..cfg };
    if !cfg.takes_affine(n, k) {
        return refuse(format!("{} weights of N = {n} and K = {k} need N a multiple of the {}-column tile and K of its {}-deep slices (the threads load each slice's scales and biases from their buffers)", problem.format, cfg.tn, cfg.tk));
    }
    // Tile copies test no bounds: the whole-tile variant is the other path's.
    let cfg = if tile_copies { CoopQgemmConfig { tile_copies, stages: cfg.stages.min(enigma_ir::limits::TILE_BARRIERS), ..cfg } } else { cfg.whole_for(m, n, k) };
    cfg.check(max_memory)?;
    Ok(cfg)
}

