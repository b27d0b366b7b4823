//! Quantized matmul for decode sizes on fragment-ordered weights:
//! `C[M, N] = A[M, K] · dequant(B)`, `A` in f16, `B` FP4 or INT4 in the
//! tensor cores' fragment order ([`QuantLayout::Fragments`], from
//! [`super::quant::QuantizedMatrix::packed_in`]) with f16 scales per group
//! in seed 002's `[K/group][N]`, `C` in f32 or f16, f32 accumulation.
//!
//! The tensor-core GEMM ([`super::gemm::qgemm`]) takes the same words above
//! [`DECODE_ROWS`] rows; this kernel is its decode row (8 or 16 rows per
//! threadgroup), so that one packing serves every M. It is built for the few instructions
//! per weight a bandwidth-bound kernel can afford:
//! * **Weights straight to registers.** A SIMD group's B tile is `units`
//!   fragment units side by side (64 K values × 16 columns each, 512 bytes,
//!   one 16-byte load per lane and unit), decoded by its load
//!   ([`matrix_load_quantized`]: on CUDA a mask and an f16 pair operation
//!   per two weights, the scale one pair multiply) into the registers the
//!   tensor cores read. No threadgroup memory, no barrier on the weights'
//!   path.
//! * **The tensor cores do the products.** One 8 × 64 or 16 × 64 A tile
//!   times the 64 × `16·units` B tile per step, accumulated in f32: two
//!   `mma.sync` per packed word on CUDA (on 8-row tiles half of their rows
//!   are A's zero padding), where a scalar kernel spends eight fmas per row.
//! * **Several steps per iteration.** A SIMD group's loop may take `steps`
//!   K steps at a time, every step's weight and A loads issued before the
//!   first product (two on 16-row tiles, one on 8-row ones: on the H200
//!   two steps ran 16 rows of 11008 × 4096 in 17.7 µs against one step's
//!   20.9, but 1 row in 17.8 against 15.8; `BENCHMARKS.md`).
//! * **A staged per SIMD group.** Each step the SIMD group copies its
//!   `rows` × 64 A values (rows past M clamped to the last row, their results never
//!   stored) into its own area of threadgroup memory, rows padded by
//!   [`super::gemm::PAD`] so a fragment's rows fall in different banks, and
//!   loads the A tile from there (`simdgroup_barrier` before and after).
//! * **K split over SIMD groups and threadgroups.** The threadgroup's SIMD
//!   groups share one column tile and take its K units round-robin; with K
//!   split ([`qmatmul_fragments_splitk`]) the grid's z dimension numbers
//!   the splits, each a contiguous run of K units, writing its f32 partial
//!   product to slice `z` of a workspace `[splits][M][N]` that
//!   `split::splitk_reduce` sums in order. The SIMD groups' partial tiles
//!   meet in threadgroup memory (one barrier).
//!
//! A threadgroup computes 8 or 16 rows of `C` (more rows take more
//! threadgroups along y) and `16·units` columns; where `units` does not divide N / 16
//! the last column tile starts `units` units from the end (overlapping its
//! neighbour, whose columns it does not store). N must be a multiple of
//! 16, K of 64, and the group of 64 (one scale row per unit).
//!
//! Parameters: `a4` (`half4` view of `A`), `b` (the words), `scales`, `c`
//! (with K split, the f32 workspace), and `m`, `n`, `k`, `group` by value.

use super::gemm::{MatrixArgs, PackedArgs};
use super::qmatmul::DecodePlan;
use super::quant::Format;
use super::split::{SplitArgs, SplitSum};
use super::*;
use enigma_ir::{Access, Kernel, MatrixType, QuantLayout, Type};

/// Rows of C a threadgroup may take: one tensor-core fragment of rows
/// (half of each `mma.sync`'s rows A's padding) or two (every row used).
pub const ROWS: [u32; 2] = [8, 16];
/// K values per step (the fragment unit's rows, [`QuantLayout::unit`]).
pub const UNIT_K: u32 = QuantLayout::Fragments.unit().0;
/// Columns per fragment unit.
pub const UNIT_N: u32 = QuantLayout::Fragments.unit().1;
/// The unit counts a SIMD group's B tile may take.
pub const UNITS: [u32; 3] = [1, 2, 4];
/// The K steps a SIMD group's loop may take per iteration.
pub const STEPS: [u32; 3] = [1, 2, 4];

/// `qmatmul_{format}_{out}_fragments_u{units}_t{threads}`, with
/// `_r16` for 16-row tiles and `_s{steps}` for more than one K step per
/// iteration.
///
/// # Panics
/// When `format` is not FP4 or INT4, the blocking's rows not 8 or 16,
/// units not 1, 2 or 4, steps not 1, 2 or 4, or `threads` not a multiple
/// of 32 between 32 and 1024.
pub fn qmatmul_fragments(format: Format, out: DType, blocking: FragmentBlocking, threads: u32) -> Kernel {
    build(format, out, blocking, threads, false)
}

/// The first pass with K split over threadgroups (`threadgroups_per_grid.z`
/// splits): `qmatmul_{format}_f32_fragments_u{units}_t{threads}…_splitk`,
/// writing slice `z` of the f32 workspace `[splits][M][N]` in `c`. Panics
/// as [`qmatmul_fragments()`].
pub fn qmatmul_fragments_splitk(format: Format, blocking: FragmentBlocking, threads: u32) -> Kernel {
    build(format, DType::F32, blocking, threads, true)
}

fn build(format: Format, out: DType, blocking: FragmentBlocking, threads: u32, split: bool) -> Kernel {
    let FragmentBlocking { units, rows, steps } = blocking;
    let code = format.quant_code().unwrap_or_else(|| panic!("qmatmul_fragments takes fp4 or int4, not {format}"));
    assert!(UNITS.contains(&units), "units must be 1, 2 or 4, got {units}");
    assert!(ROWS.contains(&rows), "rows must be 8 or 16, got {rows}");
    assert!(STEPS.contains(&steps), "steps must be 1, 2 or 4, got {steps}");
    assert!(check_threads("qmatmul_fragments", threads).is_ok(), "bad threadgroup size {threads}");
    let simdgroups = threads / SIMD_WIDTH;
    let tile_n = units * UNIT_N;
    let mut k = KernelBuilder::new(format!("qmatmul_{format}_{out}_fragments_u{units}_t{threads}{}{}{}", if rows == 16 { "_r16" } else { "" }, if steps > 1 { format!("_s{steps}") } else { String::new() }, if split { "_splitk" } else { "" }));
    let a4 = k.buffer(MatrixArgs::A4, Type::vector(Scalar::F16, 4), Access::Read);
    let b = k.buffer(MatrixArgs::B, Type::U32, Access::Read);
    let scales = k.buffer(PackedArgs::SCALES, Type::F16, Access::Read);
    let c = k.buffer(SplitArgs::C, out.ty(1), Access::ReadWrite);
    let m = k.value(MatrixArgs::M, Type::U32);
    let n = k.value(MatrixArgs::N, Type::U32);
    let kk = k.value(MatrixArgs::K, Type::U32);
    let group = k.value(PackedArgs::GROUP, Type::U32);
    // A's staging, [simdgroup][row][64 + PAD] f16 as half4s.
    let lda = UNIT_K + gemm::PAD;
    let stage = k.threadgroup_array("a_stage", Type::vector(Scalar::F16, 4), simdgroups * rows * lda / 4);
    let partials = k.threadgroup_array("partials", Type::F32, simdgroups * rows * tile_n);
    let a_tile = MatrixType::new(Scalar::F16, rows as u8, UNIT_K as u8);
    let b_tile = MatrixType::new(Scalar::F16, UNIT_K as u8, tile_n as u8);
    let acc_tile = MatrixType::new(Scalar::F32, rows as u8, tile_n as u8);

    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let tile = k.let_("tile", threadgroup_position_in_grid().x());
    let row0 = k.let_("row0", threadgroup_position_in_grid().y() * rows);
    let units_n = k.let_("units_n", n / UNIT_N);
    // The tile's first unit: the last tile starts `units` from the end.
    let unit0 = k.let_("unit0", min(tile * units, units_n - units));
    let k4 = k.let_("k4", kk / 4u32);
    let k_units = k.let_("k_units", kk / UNIT_K);
    let last_row = k.let_("last_row", m - 1u32);
    let word_stride = k.let_("word_stride", n * 8u32);
    let (split_index, begin, end) = if split {
        let (z, begin, end) = super::split::split_run(&mut k, k_units, "u");
        (Some(z), begin, end)
    } else {
        (None, k.let_("u_begin", 0u32), k_units)
    };
    let stage_base = k.let_("stage_base", sg * (rows * lda));
    let acc = k.var("acc", matrix_fill(acc_tile, 0.0f32));
    // Lane `lane` copies half4s `lane + 32·i` of the `rows` × 16 the step's A tile holds.
    let copies = rows * UNIT_K / 4 / SIMD_WIDTH;
    let sources: Vec<(Ex, Ex)> = (0..copies)
        .map(|i| {
            let idx = k.let_(&format!("idx{i}"), lane + i * SIMD_WIDTH);
            let row = k.let_(&format!("arow{i}"), idx / (UNIT_K / 4));
            let quad = k.let_(&format!("aquad{i}"), idx % (UNIT_K / 4));
            let from = k.let_(&format!("afrom{i}"), min(row0 + row, last_row) * k4 + quad);
            let to = k.let_(&format!("ato{i}"), (stage_base + row * lda) / 4u32 + quad);
            (from, to)
        })
        .collect();
    // One K step `r` per entry of `at`: the steps' weight loads first, then
    // their A values, so that every load of the iteration is issued before
    // the first is waited for; then each step's A through the stage into
    // its product.
    let steps_at = |k: &mut KernelBuilder, at: &[Ex], tag: &str| {
        let mbs: Vec<Ex> = at
            .iter()
            .enumerate()
            .map(|(j, &r)| {
                let words_at = r * word_stride + unit0 * (UNIT_K * UNIT_N / 8);
                let scales_at = (r * UNIT_K / group) * n + unit0 * UNIT_N;
                k.let_(&format!("mb{tag}{j}"), matrix_load_quantized(b_tile, code, QuantLayout::Fragments, b, words_at, word_stride, scales, scales_at))
            })
            .collect();
        let values: Vec<Vec<Ex>> = at.iter().enumerate().map(|(j, &r)| sources.iter().enumerate().map(|(i, (from, _))| k.let_(&format!("a{tag}{j}_{i}"), a4.get(*from + r * (UNIT_K / 4)))).collect()).collect();
        for (j, (mb, step_values)) in mbs.into_iter().zip(values).enumerate() {
            for ((_, to), v) in sources.iter().zip(step_values) {
                k.store(stage.at(*to), v);
            }
            k.simdgroup_barrier(MemFlags::Threadgroup);
            let ma = k.let_(&format!("ma{tag}{j}"), matrix_load(a_tile, stage, stage_base, lda, false));
            k.assign(acc, matrix_multiply_accumulate(ma, mb, acc.get()));
            // Every lane has read the staged A before the next step overwrites it.
            k.simdgroup_barrier(MemFlags::Threadgroup);
        }
    };
    // Whole iterations of `steps` steps (the SIMD group's steps `simdgroups`
    // apart), then the remainder one step at a time.
    let whole_end = if steps > 1 { k.let_("whole_end", begin + (end - begin) / (simdgroups * steps) * (simdgroups * steps)) } else { end };
    k.for_range("r", begin + sg, whole_end, simdgroups * steps, |k, r| {
        let at: Vec<Ex> = (0..steps).map(|j| if j == 0 { r } else { k.let_(&format!("r{j}"), r + j * simdgroups) }).collect();
        steps_at(k, &at, "")
    });
    if steps > 1 {
        k.for_range("rest", whole_end + sg, end, simdgroups, |k, r| steps_at(k, &[r], "_rest"));
    }

    // The SIMD groups' partial tiles: [simdgroup][row][column].
    k.matrix_store(acc.get(), partials, sg * (rows * tile_n), tile_n, false);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let first_col = k.let_("first_col", tile * tile_n);
    k.for_range("o", thread_index_in_threadgroup(), rows * tile_n, threads, |k, o| {
        let total = k.var("total", f(0.0));
        for s in 0..simdgroups {
            k.assign(total, total.get() + partials.get(o + s * (rows * tile_n)));
        }
        let row = k.let_("row", row0 + o / tile_n);
        let col = k.let_("col", unit0 * UNIT_N + o % tile_n);
        let at = match split_index {
            Some(z) => (z * m + row) * n + col,
            None => row * n + col,
        };
        k.if_(row.lt(m).and(col.ge(first_col)), |k| store_f32(k, c, at, total.get()));
    });
    finish(k)
}

/// The most rows `enigma_ops::Ops::qmatmul` gives this kernel (fragment-
/// ordered weights; the tensor-core GEMM above): one threadgroup's 16-row
/// tile.
pub const DECODE_ROWS: u32 = ROWS[1];

/// The fragment decode's blocking: `units` fragment units (16 columns
/// each) per column tile, `rows` rows of C (8 or 16) per threadgroup, and
/// `steps` K steps per iteration of a SIMD group's loop, whose loads are
/// issued together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FragmentBlocking {
    pub units: u32,
    pub rows: u32,
    pub steps: u32,
}

impl DecodePlan<FragmentBlocking> {
    /// The kernel: [`qmatmul_fragments()`], or [`qmatmul_fragments_splitk`] with K split.
    pub fn kernel(&self) -> Kernel {
        if self.splits > 1 {
            qmatmul_fragments_splitk(self.format, self.blocking, self.threads)
        } else {
            qmatmul_fragments(self.format, self.out, self.blocking, self.threads)
        }
    }
}

/// Threadgroup memory of a kernel of `units` and `rows` at `threads`: the
/// staged A (`[S][rows][64 + PAD]` f16) and the SIMD groups' partial tiles
/// (`[S][rows][16·units]` f32).
pub fn threadgroup_bytes(units: u32, rows: u32, threads: u32) -> u64 {
    let simdgroups = (threads / SIMD_WIDTH) as u64;
    simdgroups * (rows * (UNIT_K + gemm::PAD)) as u64 * 2 + simdgroups * (rows * units * UNIT_N) as u64 * 4
}

/// The fragment decode's choices a caller may fix: threads, rows per
/// threadgroup (8 or 16), K steps per iteration (1, 2 or 4) and K splits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FragmentOptions {
    pub threads: Option<u32>,
    pub rows: Option<u32>,
    pub steps: Option<u32>,
    pub splits: Option<u32>,
}

/// Plans [`qmatmul_fragments()`] for `C[M, N] = A[M, K] · dequant(B)` with
/// `group` K values per scale. Rows: 8 up to 8 rows of C, else 16. The
/// default tile is two units (32 columns, 256 threads) where that still
/// gives `min_tiles` column tiles (on a GPU two per compute unit), else
/// one unit with 512 threads, so that a narrow N keeps more SIMD groups per
/// tile (`BENCHMARKS.md`, the fragment decode row); the default thread
/// count halves until that tile fits threadgroup memory (16-row tiles of
/// two units: 128 threads). Steps: 1 on 8-row tiles, 2 on 16-row ones. `options.threads`
/// replaces the default's (with one unit where two would not fit
/// threadgroup memory); `options.splits` (default 1: split in two or
/// three, every shape measured slower) splits K over threadgroups.
pub(crate) fn plan(format: Format, out: DType, [m, n, k, group]: [usize; 4], options: FragmentOptions, min_tiles: u32) -> Result<DecodePlan<FragmentBlocking>, ShapeError> {
    let name = format!("qmatmul_{format}_{out}_fragments");
    if format.quant_code().is_none() {
        return Err(ShapeError::new(name, format!("fragment order holds fp4 or int4 codes, not {format}")));
    }
    let [m32, n32, k32] = super::quant::check_problem(&name, out, m, n, k, group)?;
    let problems: Vec<String> = [
        (!n32.is_multiple_of(UNIT_N)).then(|| format!("n a multiple of {UNIT_N} (n = {n})")),
        (!k32.is_multiple_of(UNIT_K)).then(|| format!("k a multiple of {UNIT_K} (k = {k})")),
        (!group.is_multiple_of(UNIT_K as usize)).then(|| format!("groups of at least {UNIT_K} K values, one scale row per unit (group = {group})")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !problems.is_empty() {
        return Err(ShapeError::new(name, format!("fragment-ordered weights take {}", problems.join(", "))));
    }
    let rows = options.rows.unwrap_or(if m32 <= ROWS[0] { ROWS[0] } else { ROWS[1] });
    if !ROWS.contains(&rows) {
        return Err(ShapeError::new(name, format!("{rows} rows per threadgroup; the kernel takes {ROWS:?}")));
    }
    let steps = options.steps.unwrap_or(if rows == ROWS[1] { 2 } else { 1 });
    if !STEPS.contains(&steps) {
        return Err(ShapeError::new(name, format!("{steps} K steps per iteration; the kernel takes {STEPS:?}")));
    }
    let units_n = n32 / UNIT_N;
    let wide = units_n >= 2 && units_n / 2 >= min_tiles;
    let preferred_units = if wide { 2 } else { 1 };
    let t = match options.threads {
        Some(t) => check_threads(&name, t)?,
        None => {
            let mut t = if wide { 256 } else { 512 };
            while t > SIMD_WIDTH && threadgroup_bytes(preferred_units, rows, t) > MAX_THREADGROUP_MEMORY_BYTES {
                t /= 2;
            }
            t
        }
    };
    let units = if threadgroup_bytes(preferred_units, rows, t) <= MAX_THREADGROUP_MEMORY_BYTES { preferred_units } else { 1 };
    let bytes = threadgroup_bytes(units, rows, t);
    if bytes > MAX_THREADGROUP_MEMORY_BYTES {
        return Err(ShapeError::new(name, format!("{t} threads with {units}-unit tiles of {rows} rows need {bytes} bytes of threadgroup memory (staged A, partial tiles), over {MAX_THREADGROUP_MEMORY_BYTES}")));
    }
    let splits = match options.splits {
        Some(s) => super::split::check_k_splits(&name, s, k32 / UNIT_K, &format!("units of {UNIT_K} K values"), m, n)?,
        None => 1,
    };
    Ok(DecodePlan {
        format,
        out,
        blocking: FragmentBlocking { units, rows, steps },
        threads: t,
        m: m32,
        n: n32,
        k: k32,
        group: group as u32,
        splits,
        // Its splits are always summed by the reduction.
        split_sum: SplitSum::Reduction,
        dispatch: Dispatch::threadgroups([units_n.div_ceil(units), m32.div_ceil(rows), splits], t),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the plan counts as threadgroup memory is what the kernel declares.
    #[test]
    fn the_plan_counts_the_kernels_threadgroup_memory() {
        for (units, rows, threads) in [(1, 8, 512), (2, 8, 256), (4, 8, 128), (1, 16, 256), (2, 16, 128)] {
            let kernel = qmatmul_fragments(Format::Int4, DType::F16, FragmentBlocking { units, rows, steps: 2 }, threads);
            let declared: u64 = kernel.threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
            assert_eq!(declared, threadgroup_bytes(units, rows, threads), "u{units} r{rows} t{threads}");
        }
    }

    #[test]
    fn the_plan_picks_the_tile_and_refuses_what_the_layout_cannot_hold() {
        let p = |n, min_tiles| plan(Format::Int4, DType::F16, [1, n, 4096, 128], FragmentOptions::default(), min_tiles).unwrap();
        // N = 11008 on 132 compute units: 344 two-unit tiles ≥ 264.
        assert_eq!((p(11008, 264).blocking.units, p(11008, 264).threads, p(11008, 264).dispatch.size), (2, 256, [344, 1, 1]));
        // 16 rows: a 16-row tile of two units in 128 threads, two K steps per iteration.
        let p16 = plan(Format::Int4, DType::F16, [16, 11008, 4096, 128], FragmentOptions::default(), 264).unwrap();
        assert_eq!((p16.blocking, p16.threads, p16.dispatch.size), (FragmentBlocking { units: 2, rows: 16, steps: 2 }, 128, [344, 1, 1]));
        assert_eq!(p(11008, 264).blocking, FragmentBlocking { units: 2, rows: 8, steps: 1 });
        // N = 4096: 128 two-unit tiles would be too few.
        assert_eq!((p(4096, 264).blocking.units, p(4096, 264).threads, p(4096, 264).dispatch.size), (1, 512, [256, 1, 1]));
        // 48 columns: three units, the second tile overlapping the first.
        assert_eq!(p(48, 0).dispatch.size, [2, 1, 1]);
        let err = |shape: [usize; 4], format| plan(format, DType::F16, shape, FragmentOptions::default(), 0).unwrap_err().to_string();
        assert!(err([1, 40, 128, 128], Format::Int4).contains("n a multiple of 16 (n = 40)"), "{}", err([1, 40, 128, 128], Format::Int4));
        assert!(err([1, 32, 96, 32], Format::Fp4).contains("k a multiple of 64 (k = 96)"));
        assert!(err([1, 32, 128, 32], Format::Int4).contains("group = 32"));
        assert!(err([1, 32, 128, 64], Format::MlxAffine).contains("not mlx_affine"));
        let split = plan(Format::Int4, DType::F16, [1, 32, 128, 64], FragmentOptions { splits: Some(3), ..FragmentOptions::default() }, 0).unwrap_err().to_string();
        assert!(split.contains("3 K splits; between 1 and 2"), "{split}");
        // 512 threads of two-unit tiles would not fit: one unit.
        assert_eq!(plan(Format::Int4, DType::F16, [1, 64, 128, 64], FragmentOptions { threads: Some(512), ..FragmentOptions::default() }, 0).unwrap().blocking.units, 1);
        let memory = plan(Format::Int4, DType::F16, [1, 64, 128, 64], FragmentOptions { threads: Some(1024), ..FragmentOptions::default() }, 0).unwrap_err().to_string();
        assert!(memory.contains("threadgroup memory"), "{memory}");
    }
}
