//! The autotuner: times candidate threadgroup sizes (and, for the kernels
//! that have them, loads in flight per thread and rows per SIMD group; for
//! the matrix multiply, GEMM tiles) for one registry entry at one shape,
//! and keeps the best per (device, kernel, shape class) in an on-disk JSON
//! cache that the registry's runs then use.
//!
//! * **Candidates**: threads ∈ {32, 64, …, 1024}, crossed with `unroll` ∈
//!   {2, 4, 8} for vector reductions and GEMV and `rows_per_simdgroup` ∈
//!   {1, 2, 4} for GEMV. A candidate over the device's threadgroup maximum,
//!   or with more threads than the shape has work for one threadgroup (the
//!   flat length, or the row length for row kernels), is skipped with that
//!   reason; one the library rejects (e.g. too much threadgroup memory) is
//!   skipped with the library's error.
//! * **GEMM candidates** (`matmul_*`): the planner's staged configurations
//!   ([`enigma_kernels::library::tile::gemm_tiles`]: tiles of 64, 128 or 256 rows
//!   and columns, 16, 32 or 64 deep, 32 or 64 rows and columns per SIMD
//!   group — 108), each with its own threadgroup size. One the device
//!   cannot hold (threads, or refused by `gemm::select` given the tile:
//!   threadgroup memory by the GEMM's check with the device's limit,
//!   227 KiB on an H100, 32 KiB on Apple GPUs) is skipped with the reason; so is one with a side at least twice the
//!   shape's (half the tile already covers it: the same threadgroups, more
//!   padding), which keeps small shapes quick to tune. For f32 inputs the
//!   threadgroup sizes without a tile follow: off Metal, `Ops::matmul`'s
//!   SIMT kernel with its blocks over that many threads. Without a tuned
//!   choice, `Ops::matmul` takes the SIMT kernel for f32 off Metal, else
//!   [`enigma_kernels::library::gemm::select_tile`]'s tile.
//! * **Quantized candidates** (`qmatmul_fp4`, `qmatmul_int4`): the decode
//!   kernel's threadgroup sizes × packed words per loop iteration (with
//!   words set `Ops::qmatmul` runs the decode kernel at any M) and, above
//!   `qmatmul::DECODE_ROWS` rows, the tensor-core kernel's tiles (16 to 128
//!   rows, no taller than the rows need; 64, 128 or 256 columns; slices of
//!   32 or 64; 4 or 8 SIMD groups), each skipped where the device or
//!   `qmatmul::select_kernel` given the tile (the kernel's check, the
//!   group for a slice) refuses it.
//! * **Fragment-order candidates** (`qmatmul_fragments_*`): up to
//!   `qmatmul_fragments::DECODE_ROWS` rows the decode row's threadgroup
//!   sizes, and at every M the tensor-core kernel's tiles with 64-deep
//!   slices (the decode kernel on seed 002's words does not read that
//!   layout).
//! * **Fused quantized candidates** (`qmatmul_fused_*`): seed 002's four
//!   tiles (§9.1's choices over 4 SIMD groups), skipped where the device
//!   cannot hold them (`qmatmul::select_kernel` given the tile).
//! * **One selection**: every matrix candidate is judged, and run, as
//!   its family's selection makes it from the candidate given as
//!   overrides; the tuner holds no rule of its own about which
//!   configuration a tile becomes.
//! * **Timing**: seed 004's loop through [`Entry::bench`] (the inputs and
//!   their reference made once for all candidates): warm-up runs, then
//!   repeats; the median device time (CUDA events, Metal GPU time) or
//!   wall time on the simulator. The last run's output is checked against
//!   the f64 reference: a wrong result disqualifies the candidate.
//! * **Shape class**: each dimension rounded up to a power of two
//!   (`4096x8192` for 3000×8000), so one tuning serves similar shapes.
//! * **Cache**: `tune.json` in `$ENIGMA_CACHE_DIR`, else
//!   `$XDG_CACHE_HOME/enigma`, else `~/.cache/enigma`. It is read once per
//!   process; a missing file is an empty cache, an unreadable or foreign
//!   one is ignored with a warning on stderr (never an error). The registry
//!   ([`Entry::run_with`], [`Entry::bench`], so `enigma run` and `enigma
//!   bench`) uses a cached choice when the caller set none of the tuned
//!   options; `ENIGMA_TUNE_CACHE=off` turns that off.

use crate::registry::Entry;
pub use crate::tuning_cache::{cache_path, cached_choice, read_cache, reset_loaded_cache, shape_class, store, CacheEntry, Choice, Outcome, Trial, TuneReport};
use crate::{Error, Options};
use enigma_kernels::library::gemm::GemmProblem;
use enigma_kernels::library::qmatmul::{self, QmatmulKernel, QmatmulProblem, QmatmulSelection};
use enigma_kernels::library::select::{self, Overrides, SelectError};
use enigma_kernels::library::tile::{gemm_tiles, GemmTile, ThreadgroupLimits, GEMM_TILE_DEPTHS, GEMM_TILE_SIDES};
use enigma_kernels::library::qgemm_fused::FusedQgemmConfig;
use enigma_kernels::library::quant::Format;
use enigma_ir::QuantLayout;
use enigma_kernels::library::{gemm, DType};
use enigma_runtime::{DeviceInfo, Runtime};

/// Threadgroup sizes tried.
pub const THREADS: [u32; 6] = [32, 64, 128, 256, 512, 1024];

/// Warm-up runs and timed repeats per candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub warmup: usize,
    pub repeats: usize,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { warmup: 3, repeats: 10 }
    }
}

/// Every candidate for `entry` at `shape` on `device`, each with the reason
/// it is skipped, if it is. A matrix kernel's candidate is refused where
/// its family's selection (`gemm::select`, `qmatmul::select_kernel`), given
/// the candidate as overrides, refuses it: the configuration timed is the
/// one the selection makes of it.
pub fn candidates(entry: &Entry, shape: &[usize], device: &DeviceInfo) -> Vec<(Choice, Option<String>)> {
    let name = entry.name.as_str();
    let limits = &select::limits(device);
    if let Some(input) = DType::from_scalar(entry.elem).filter(|_| name.starts_with("matmul_")) {
        return gemm_candidates(input, shape, device);
    }
    if let Some(format) = name.strip_prefix("qmatmul_fused_").and_then(|f| Format::parse(f).ok()) {
        return fused_candidates(format, shape, device);
    }
    if let Some(format) = name.strip_prefix("qmatmul_fragments_").and_then(|f| Format::parse(f).ok()) {
        return qgemm_candidates(format, QuantLayout::Fragments, shape, device);
    }
    let flat_reduction = ["sum_", "max_", "min_"].iter().any(|p| name.starts_with(p)) && !name.contains("_rows_");
    let gemv = name.starts_with("gemv_");
    let unrolls: Vec<Option<u32>> = if flat_reduction || gemv {
        vec![None, Some(2), Some(4), Some(8)]
    } else if name == "qmatmul_mlx_affine" {
        // Packed words per lane and load.
        vec![None, Some(1), Some(2), Some(4)]
    } else if name.starts_with("qmatmul_") {
        // Packed words per loop iteration (those not dividing the group's are skipped).
        vec![None, Some(4), Some(8), Some(16)]
    } else {
        vec![None]
    };
    let rows: Vec<Option<u32>> = if gemv { vec![None, Some(1), Some(2), Some(4)] } else { vec![None] };
    // The work one threadgroup can share: the row for row kernels (and the
    // head dimension's keys for attention), the whole vector otherwise.
    let work = match shape.len() {
        0 => 1,
        1 => shape[0],
        _ if name.starts_with("attention") => shape[1],
        _ => shape[shape.len() - 1],
    };
    let mut out = vec![];
    // Seed 002's layout: above the decode kernel's rows, the tensor-core kernel.
    let packed = name.strip_prefix("qmatmul_").and_then(|f| Format::parse(f).ok()).filter(|f| !f.has_biases());
    if let Some(format) = packed {
        out.extend(qgemm_candidates(format, QuantLayout::Rows, shape, device));
    }
    for &threads in &THREADS {
        for &unroll in &unrolls {
            for &rows_per_simdgroup in &rows {
                let choice = Choice { threads, unroll, rows_per_simdgroup, tile: None };
                let tiled = packed.is_some_and(|format| qmatmul_kernel(format, QuantLayout::Rows, (shape.first().copied().unwrap_or(1), shape.get(1).copied().unwrap_or(1)), device, &choice.apply(&Options::default())) == QmatmulKernel::Tiled);
                let skip = over_max_threads(threads, limits)
                    .or_else(|| tiled.then(|| "above the decode kernel's rows the library runs the tensor-core kernel, which takes tiles, not a threadgroup size".to_string()))
                    .or_else(|| {
                    (threads as usize > work.next_multiple_of(32)).then(|| format!("{threads} threads per threadgroup exceed the {work} elements one threadgroup works on"))
                });
                out.push((choice, skip));
            }
        }
    }
    out
}

/// Why `overrides` cannot run: the error of `select` (a family's selection
/// given them), if it refuses.
fn refusal<T>(selected: Result<T, SelectError>) -> Option<String> {
    selected.err().map(|e| e.to_string())
}

/// The candidate `choice` as the overrides a selection takes.
fn overrides_of(choice: &Choice) -> Overrides {
    choice.apply(&Options::default()).overrides()
}

/// The GEMM tiles for `input` at `shape` (`[m, n, k]`), each with the
/// reason it is skipped: over the device's threads, a side at least twice
/// the shape's, or refused by `gemm::select` with the tile (the GEMM's own
/// check against the device's threadgroup memory). For f32, then
/// [`THREADS`] without a tile: where `Ops::matmul` runs the SIMT kernel
/// (off Metal) its blocks over that many threads, skipped where the
/// selection refuses them.
fn gemm_candidates(input: DType, shape: &[usize], device: &DeviceInfo) -> Vec<(Choice, Option<String>)> {
    let limits = &select::limits(device);
    let dim = |i: usize| shape.get(i).copied().unwrap_or(1);
    let problem = GemmProblem { input, output: DType::F32, m: dim(0) as u32, n: dim(1) as u32, k: dim(2) as u32, batch: 1 };
    let selected = |choice: &Choice| refusal(gemm::select(&problem, device, &overrides_of(choice)));
    let simt = THREADS.iter().filter(|_| input == DType::F32).map(|&threads| {
        let choice = Choice { threads, ..Choice::default() };
        let skip = over_max_threads(threads, limits).or_else(|| selected(&choice));
        (choice, skip)
    });
    gemm_tiles()
        .into_iter()
        .map(|tile| {
            let threads = tile.threads();
            let choice = Choice { threads, tile: Some(tile), ..Choice::default() };
            // A side above the smallest tried whose half covers the shape.
            let oversized = [(tile.shape.m, GEMM_TILE_SIDES[0], dim(0), "rows"), (tile.shape.n, GEMM_TILE_SIDES[0], dim(1), "columns"), (tile.shape.k, GEMM_TILE_DEPTHS[0], dim(2), "K values")]
                .into_iter()
                .find(|&(side, least, d, _)| side > least && (side / 2) as usize >= d);
            let skip = over_max_threads(threads, limits)
                .or_else(|| oversized.map(|(side, _, d, what)| format!("a side of {side} for {d} {what}: half the tile covers them")))
                .or_else(|| selected(&choice));
            (choice, skip)
        })
        .chain(simt)
        .collect()
}

/// Why `threads` per threadgroup cannot run on a device with `limits`, if
/// they cannot.
fn over_max_threads(threads: u32, limits: &ThreadgroupLimits) -> Option<String> {
    (threads > limits.max_threads).then(|| format!("{threads} threads exceed this device's maximum of {} per threadgroup", limits.max_threads))
}

/// The kernel `Ops::qmatmul` runs on `device` for `m × n` outputs from
/// weights of `format` in `layout` with `options` (`qmatmul::kernel_for`,
/// which reads neither K nor the output type).
fn qmatmul_kernel(format: Format, layout: QuantLayout, (m, n): (usize, usize), device: &DeviceInfo, options: &Options) -> QmatmulKernel {
    let problem = QmatmulProblem { format, layout, out: DType::F16, m, n, k: 1, group: 1 };
    qmatmul::kernel_for(&problem, device, &options.overrides())
}

/// SIMD-group grids the tensor-core quantized kernel's candidates take.
const QGEMM_GRIDS: [(u32, u32); 5] = [(1, 4), (2, 2), (1, 8), (2, 4), (4, 2)];

/// The tensor-core quantized kernel's tiles for `shape` (`[m, n, k]`,
/// the registry's group for K), where `Ops::qmatmul` runs it (weights in
/// `layout`: for seed 002's above `qmatmul::DECODE_ROWS` rows, none at or
/// below; for fragment order at every M): 16 to 128 rows (no taller than
/// needed: half the tile under M), 64, 128 or 256 columns, slices of 32 or
/// 64 K values (64 in fragment order), over 4 or 8 SIMD groups. Each is the
/// tile `qmatmul::select_kernel` makes of it (fragment order may narrow
/// it), once, with the reason it is skipped: over the device's threads, or
/// refused by the selection (its partition, threadgroup memory at the
/// device's limit, fragment order's whole tiles, a slice not dividing the
/// group). Up to the fragment decode row's rows, its threadgroup sizes
/// first.
fn qgemm_candidates(format: Format, layout: QuantLayout, shape: &[usize], device: &DeviceInfo) -> Vec<(Choice, Option<String>)> {
    let limits = &select::limits(device);
    let dim = |i: usize| shape.get(i).copied().unwrap_or(1);
    let (m, n, k) = (dim(0), dim(1), dim(2));
    // The decode kernel takes threadgroup sizes, not tiles; the cooperative
    // kernel's tiles are not tuned.
    let kernel = qmatmul_kernel(format, layout, (m, n), device, &Options::default());
    if matches!(kernel, QmatmulKernel::Decode | QmatmulKernel::Cooperative) {
        return vec![];
    }
    let group = shape.get(3).copied().map_or_else(|| crate::registry::registry_group("qmatmul", k), Ok);
    let select_with = |kernel: QmatmulKernel, choice: &Choice| match &group {
        Ok(group) => qmatmul::select_kernel(kernel, &QmatmulProblem { format, layout, out: DType::F16, m, n, k, group: *group }, device, &overrides_of(choice)).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let mut out = vec![];
    if kernel == QmatmulKernel::FragmentsDecode {
        // The decode row's threadgroup sizes (a tile below runs the GEMM instead).
        for threads in [128, 256, 512, 1024] {
            let choice = Choice { threads, ..Choice::default() };
            let skip = over_max_threads(threads, limits).or_else(|| select_with(QmatmulKernel::FragmentsDecode, &choice).err());
            out.push((choice, skip));
        }
    }
    for tm in [16u32, 32, 64, 128].into_iter().filter(|&tm| tm == 16 || ((tm / 2) as usize) < m) {
        for tn in [64, 128, 256] {
            for tk in gemm::QGEMM_SLICE_DEPTHS.into_iter().filter(|&tk| layout == QuantLayout::Rows || tk == layout.unit().0) {
                for (sg_rows, sg_cols) in QGEMM_GRIDS {
                    let asked = GemmTile::new(tm, tn, tk, sg_rows, sg_cols);
                    let selected = select_with(QmatmulKernel::Tiled, &Choice { threads: asked.threads(), tile: Some(asked), ..Choice::default() });
                    // The tile that runs: the selection's, where it takes the
                    // asked one (fragment order may narrow it), once.
                    let tile = match &selected {
                        Ok(QmatmulSelection::Tiled(cfg)) => cfg.tile(),
                        _ => asked,
                    };
                    if out.iter().any(|(ch, _): &(Choice, Option<String>)| ch.tile == Some(tile)) {
                        continue;
                    }
                    let skip = over_max_threads(tile.threads(), limits).or_else(|| selected.err());
                    out.push((Choice { threads: tile.threads(), tile: Some(tile), ..Choice::default() }, skip));
                }
            }
        }
    }
    out
}

/// Seed 002's four tiles for the fused quantized kernel (§9.1's choices,
/// each over 4 SIMD groups) at `shape` (`[m, n, k]`), each with the reason
/// it is skipped: over the device's threads, or refused by
/// `qmatmul::select_kernel` (the kernel's own check against the device's
/// threadgroup memory).
fn fused_candidates(format: Format, shape: &[usize], device: &DeviceInfo) -> Vec<(Choice, Option<String>)> {
    let limits = &select::limits(device);
    let dim = |i: usize| shape.get(i).copied().unwrap_or(1);
    let problem = QmatmulProblem { format, layout: QuantLayout::Rows, out: DType::F16, m: dim(0), n: dim(1), k: dim(2), group: shape.get(3).copied().unwrap_or(32) };
    // One M from each of §9.1's row ranges.
    [1, 64, 256, 1024]
        .into_iter()
        .map(|m| {
            let tile = FusedQgemmConfig::for_rows(format, DType::F16, m).tile;
            let choice = Choice { threads: tile.threads(), tile: Some(tile), ..Choice::default() };
            let skip = over_max_threads(tile.threads(), limits).or_else(|| refusal(qmatmul::select_kernel(QmatmulKernel::Fused, &problem, device, &overrides_of(&choice))));
            (choice, skip)
        })
        .collect()
}

/// Times every candidate of `entry` at `shape` (empty: its default shape)
/// on `rt`; `progress(done, total, choice)` is called before each candidate.
pub fn tune(
    entry: &Entry,
    rt: &Runtime,
    shape: &[usize],
    settings: Settings,
    progress: &mut dyn FnMut(usize, usize, &Choice),
) -> Result<TuneReport, Error> {
    let shape: Vec<usize> = if shape.is_empty() { entry.default_shape.clone() } else { shape.to_vec() };
    let candidates = candidates(entry, &shape, rt.device());
    let prepared = entry.prepare(rt, &shape)?;
    let total = candidates.len();
    let mut trials = vec![];
    let mut device_timed = false;
    let base = Options::default();
    for (i, (choice, skip)) in candidates.into_iter().enumerate() {
        progress(i, total, &choice);
        let outcome = match skip {
            Some(reason) => Outcome::Skipped { reason },
            None => match prepared.bench(&choice.apply(&base), settings.warmup, settings.repeats, &mut |_, _| {}) {
                Err(Error::Runtime(e)) if !matches!(e, enigma_runtime::RuntimeError::Validation(_)) && !is_limit(&e) => return Err(Error::Runtime(e)),
                Err(e) => Outcome::Skipped { reason: e.to_string() },
                Ok(b) if !b.check.passed => Outcome::Wrong {
                    reason: format!("{} of {} elements outside tolerance (max |error| {:.3e})", b.check.failures, b.check.checked, b.check.max_abs_error),
                },
                Ok(b) => {
                    device_timed = b.device_timed;
                    Outcome::Timed {
                        median_us: b.median.as_secs_f64() * 1e6,
                        best_us: b.best.as_secs_f64() * 1e6,
                        gb_per_s: if b.median.is_zero() { 0.0 } else { b.bytes as f64 / b.median.as_secs_f64() / 1e9 },
                    }
                }
            },
        };
        trials.push(Trial { choice, outcome });
    }
    progress(total, total, &Choice::default());
    let best = best_of(&trials);
    Ok(TuneReport {
        kernel: entry.name.clone(),
        device: rt.device().name.clone(),
        shape_class: shape_class(&shape),
        shape,
        device_timed,
        best,
        trials,
    })
}

/// Whether a runtime error is a limit a candidate ran into (a threadgroup
/// or memory limit), which skips the candidate, rather than a device fault.
fn is_limit(e: &enigma_runtime::RuntimeError) -> bool {
    let text = e.to_string();
    text.contains("exceeds") || text.contains("maximum") || text.contains("limit")
}

/// The timed trial with the smallest median.
pub fn best_of(trials: &[Trial]) -> Option<Choice> {
    trials
        .iter()
        .filter_map(|t| match t.outcome {
            Outcome::Timed { median_us, .. } => Some((median_us, t.choice)),
            _ => None,
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

