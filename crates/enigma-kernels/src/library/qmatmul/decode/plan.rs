//! The row decode's plan: its blocking ([`RowBlocking`]), options
//! ([`DecodeOptions`]), the defaults per shape and device
//! ([`default_threads`], [`default_min_tiles`], [`default_splits`]) and
//! the threadgroup memory a blocking needs.

use super::kernel::{qmatmul_staged, stage_layout, MAX_STAGES, WORDS_PER_ITERATION};
use crate::library::qmatmul::plan::{BlockingOptions, DecodePlan};
use crate::library::quant::{check_problem, Format, MAX_ROWS_PER_THREADGROUP, VALUES_PER_WORD};
use crate::library::split::{check_k_splits, SplitSum, MAX_SPLITS};
use crate::library::*;
use enigma_ir::Kernel;

/// Default packed words per loop iteration (fewer when a group has fewer).
pub const DEFAULT_WORDS: u32 = 8;
/// Above this many rows `enigma_ops::Ops::qmatmul` takes the tensor-core
/// kernel (`gemm::qgemm`, its B tiles decoded from staged words, K split
/// over threadgroups), measured the faster above it over seed 002's four
/// shapes (`BENCHMARKS.md`, the quantized matmul over M).
pub const DECODE_ROWS: u32 = 4;

/// Default threads per threadgroup (8 SIMD groups splitting K).
pub const DEFAULT_THREADS: u32 = 256;
/// `rows · cols` the default keeps to (accumulators per thread, twice).
const DEFAULT_REGISTER_TILE: u32 = 8;

/// The row decode's blocking: `rows` of C per threadgroup, `cols` columns
/// per thread, `words` packed words per loop iteration, `stages` chunks
/// staged ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowBlocking {
    pub rows: u32,
    pub cols: u32,
    pub words: u32,
    /// Chunks staged ahead by asynchronous copies ([`qmatmul_staged`]; 0:
    /// the register prefetch of [`qmatmul()`](super::qmatmul)).
    pub stages: u32,
}

impl DecodePlan<RowBlocking> {
    /// The kernel: [`qmatmul()`](super::qmatmul), with K split [`qmatmul_splitk`](super::qmatmul_splitk) or
    /// [`qmatmul_splitk_sum`](super::qmatmul_splitk_sum) (as `split_sum` says), any of them staged
    /// ([`qmatmul_staged`]) with stages.
    pub fn kernel(&self) -> Kernel {
        let RowBlocking { rows, cols, words, stages } = self.blocking;
        qmatmul_staged(self.format, self.out, rows, cols, words, self.threads, stages, (self.splits > 1).then_some(self.split_sum))
    }
}

/// Options of the row decode's plan (`plan`, reached through
/// `qmatmul::select`): the blocking ([`BlockingOptions`]; words per
/// iteration default to [`DEFAULT_WORDS`] or the group's words if fewer)
/// and K splits over threadgroups (1 up to the quantization groups, at
/// most `split::MAX_SPLITS`; default [`default_splits`] for
/// `compute_units`), who sums them (default the reduction) and chunks
/// staged ahead (0 … [`MAX_STAGES`]; default 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    pub blocking: BlockingOptions,
    /// How many ways K is split over threadgroups (1: one dispatch, no
    /// workspace); `None` for [`default_splits`].
    pub splits: Option<u32>,
    /// The device's compute units, for [`default_splits`]; 0 (unknown, or
    /// the simulator, which gains nothing from splitting) for no split.
    pub compute_units: u32,
    /// Chunks staged ahead by asynchronous copies ([`qmatmul_staged`]);
    /// `None` for 0, the register prefetch, which ran faster on an H200 in
    /// every configuration measured (`BENCHMARKS.md`, the quantized
    /// matmul).
    pub stages: Option<u32>,
    /// Who sums the K splits: `None` for the reduction's second dispatch.
    pub split_sum: Option<SplitSum>,
    /// The threadgroup memory a staged kernel may use (the device's; below
    /// `MAX_THREADGROUP_MEMORY_BYTES`, that limit, which every kernel keeps
    /// without stages).
    pub stage_memory: u64,
}

impl DecodeOptions {
    /// The threadgroup memory a kernel with `stages` may use.
    fn memory_limit(&self, stages: u32) -> u64 {
        if stages > 0 {
            self.stage_memory.max(MAX_THREADGROUP_MEMORY_BYTES)
        } else {
            MAX_THREADGROUP_MEMORY_BYTES
        }
    }
}

/// Warps per compute unit below which [`default_splits`] splits K over
/// threadgroups: eight. A split costs a workspace and a second dispatch (the
/// reduction) or the last threadgroup's sum, which outweighed what it gave
/// wherever the grid already had a few warps per unit, summed in the kernel
/// too (`BENCHMARKS.md`, the decode kernel's grid and the quantized matmul
/// on the H200).
pub const MIN_WARPS_PER_UNIT: u32 = 8;

/// The decode kernel's default threads per threadgroup for `m` rows and
/// `n` columns on a device of `compute_units`: 512 (16 SIMD groups sharing
/// a column tile's K) at one row, or where one column per thread leaves
/// fewer than two threadgroups per unit, else [`DEFAULT_THREADS`]. More
/// SIMD groups per column tile give a narrow grid more warps without a K
/// split; a wide grid of several rows stays faster at 256, one row (with
/// [`default_min_tiles`]' wider columns) at 512 (`BENCHMARKS.md`, the
/// decode kernel's grid).
pub fn default_threads(n: usize, m: usize, compute_units: u32) -> u32 {
    let tiles = n.div_ceil(SIMD_WIDTH as usize).saturating_mul(m.div_ceil(MAX_ROWS_PER_THREADGROUP as usize));
    if compute_units > 0 && (m == 1 || tiles < 2 * compute_units as usize) {
        2 * DEFAULT_THREADS
    } else {
        DEFAULT_THREADS
    }
}

/// The column tiles the decode kernel's default columns per thread keep
/// to ([`BlockingOptions::min_tiles`]) at `m` rows on a device of
/// `compute_units`: at one row half a tile per unit (so 4 columns per
/// thread, 16-byte weight loads, from N = 64 · units up: the fewer
/// instructions per weight outweigh the idle units on an H200), at more
/// rows two per unit (`BENCHMARKS.md`, the decode kernel's grid).
pub fn default_min_tiles(m: usize, compute_units: u32) -> u32 {
    if m == 1 {
        compute_units / 2
    } else {
        2 * compute_units
    }
}

/// The default K split of the decode kernel, for a grid of `threadgroups`
/// (column tiles × row blocks) over `groups` quantization groups, with
/// `simdgroups` SIMD groups per threadgroup, on a device of
/// `compute_units`: the fewest splits that give the grid at least
/// [`MIN_WARPS_PER_UNIT`] warps per compute unit. At most
/// `groups / simdgroups` splits, so that every SIMD group of a split keeps
/// at least one whole group (a split of fewer groups than SIMD groups
/// leaves some idle and still pays for the workspace), and at most
/// `split::MAX_SPLITS`; 1 when `compute_units` is 0.
pub fn default_splits(threadgroups: u32, groups: u32, simdgroups: u32, compute_units: u32) -> u32 {
    if compute_units == 0 {
        return 1;
    }
    let wanted = (MIN_WARPS_PER_UNIT * compute_units).div_ceil(threadgroups.saturating_mul(simdgroups).max(1));
    wanted.min(groups / simdgroups.max(1)).clamp(1, MAX_SPLITS)
}

/// Plans `C[M, N] = A[M, K] · dequant(B)` with `group` K values per scale
/// in threadgroups of `threads` ([`DEFAULT_THREADS`] is the library's
/// choice).
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan(format: Format, out: DType, m: usize, n: usize, k: usize, group: usize, threads: u32, options: DecodeOptions) -> Result<DecodePlan<RowBlocking>, ShapeError> {
    let blocking = options.blocking;
    let name = format!("qmatmul_{format}_{out}");
    if !matches!(format, Format::Fp4 | Format::Int4) {
        return Err(ShapeError::new(name, format!("the kernel reads fp4 or int4 in seed 002's layout, not {format}")));
    }
    let [m32, n32, k32] = check_problem(&name, out, m, n, k, group)?;
    let t = check_threads(&name, threads)?;
    let group_words = (group / VALUES_PER_WORD) as u32;
    let words = match blocking.words {
        Some(w) if !WORDS_PER_ITERATION.contains(&w) || !group_words.is_multiple_of(w) => {
            return Err(ShapeError::new(name, format!("{w} packed words per iteration must be 4, 8 or 16 and divide the group's {group_words} words")))
        }
        Some(w) => w,
        None => DEFAULT_WORDS.min(group_words),
    };
    // Default rows: up to 8, fewer where the partial sums (of one column
    // per thread) and the staged A would not fit threadgroup memory.
    if let Some(stages) = options.stages.filter(|&s| s > MAX_STAGES) {
        return Err(ShapeError::new(name, format!("{stages} stages; between 0 and {MAX_STAGES}")));
    }
    let asked_stages = options.stages.unwrap_or(0);
    let fits = |rows: u32, cols: u32| threadgroup_bytes(t, rows, cols, words, asked_stages) <= options.memory_limit(asked_stages);
    let rows = blocking.rows.unwrap_or_else(|| (1..=m32.min(MAX_ROWS_PER_THREADGROUP)).rev().find(|&r| fits(r, 1)).unwrap_or(1));
    if !(1..=MAX_ROWS_PER_THREADGROUP).contains(&rows) {
        return Err(ShapeError::new(name, format!("rows per threadgroup ({rows}) must be between 1 and {MAX_ROWS_PER_THREADGROUP}")));
    }
    let cols = match blocking.cols {
        Some(c) if !matches!(c, 1 | 2 | 4) => return Err(ShapeError::new(name, format!("columns per thread ({c}) must be 1, 2 or 4"))),
        Some(c) if n32 % c != 0 => return Err(ShapeError::new(name, format!("{c} columns per thread need n % {c} == 0, n = {n}"))),
        Some(c) => c,
        None => [4, 2, 1]
            .into_iter()
            .find(|&c| n32 % c == 0 && rows * c <= DEFAULT_REGISTER_TILE && fits(rows, c) && (n32 / c).div_ceil(SIMD_WIDTH) >= blocking.min_tiles)
            .unwrap_or(1),
    };
    let stages = asked_stages;
    let bytes = threadgroup_bytes(t, rows, cols, words, stages);
    let limit = options.memory_limit(stages);
    if bytes > limit {
        return Err(ShapeError::new(
            name,
            format!(
                "{t} threads × {rows} rows × {cols} columns × {words} words{} need {bytes} bytes of threadgroup memory (partial sums, staged A{}), over {limit}",
                if stages > 0 { format!(" × {stages} stages") } else { String::new() },
                if stages > 0 { ", stages" } else { "" },
            ),
        ));
    }
    let tiles = (n32 / cols).div_ceil(SIMD_WIDTH);
    let row_blocks = m32.div_ceil(rows);
    let groups = k32 / group as u32;
    let splits = match options.splits {
        Some(s) => check_k_splits(&name, s, groups, &format!("quantization groups of k = {k}"), m, n)?,
        None => default_splits(tiles * row_blocks, groups, t / SIMD_WIDTH, options.compute_units),
    };
    Ok(DecodePlan {
        format,
        out,
        blocking: RowBlocking { rows, cols, words, stages },
        threads: t,
        m: m32,
        n: n32,
        k: k32,
        group: group as u32,
        splits,
        split_sum: options.split_sum.unwrap_or_default(),
        dispatch: Dispatch::threadgroups([tiles, row_blocks, splits], t),
    })
}

/// Threadgroup memory of a kernel (the same for FP4 and INT4): the partial
/// sums (`[S][rows][cols][32]` f32), the converted A (`[S][rows][8·words]`
/// f16 pairs) and with `stages` each thread's slots of every stage
/// (`words` weight vectors of `4 · cols` bytes and the two A vectors per
/// pass it copies, 8 bytes each).
pub(super) fn threadgroup_bytes(threads: u32, rows: u32, cols: u32, words: u32, stages: u32) -> u64 {
    let simdgroups = (threads / SIMD_WIDTH) as u64;
    let partials = simdgroups * (rows * cols * SIMD_WIDTH) as u64 * 4;
    let (vecs, elem) = stage_layout(rows, words);
    let stage = simdgroups * vecs as u64 * elem.size_bytes() as u64;
    let a_slots = vecs.div_ceil(SIMD_WIDTH) * 2;
    let staged = stages as u64 * threads as u64 * (words as u64 * 4 * cols as u64 + a_slots as u64 * 8);
    partials + stage + staged
}
