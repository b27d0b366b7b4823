//! Tiled GEMM on SIMD-group matrices: `C = alpha·op(A)·op(B) + beta·C`,
//! row-major, `op` the identity or the transpose, f16/bf16/f32 inputs with
//! f32 accumulation, C in the input type or f32, batched over the grid's
//! third dimension (seed 000's "Batched Operations").
//!
//! A threadgroup computes a `tm × tn` tile of C; its SIMD groups form a
//! `sg_rows × sg_cols` grid (seed 002 §3.2's partition), each owning a
//! `(tm / sg_rows) × (tn / sg_cols)` accumulator tile. Per step of `tk` along
//! K the threadgroup holds the `tm × tk` slice of A and the `tk × tn` slice
//! of B in threadgroup memory, as they are stored (a transposed operand is
//! read back with a transposed matrix load), each row padded by
//! [`PAD`] elements so that the 8 rows of a fragment fall in different
//! memory banks. While the SIMD groups multiply one slice, every thread
//! already holds its share of the next one in registers (4-element vector
//! loads where the slice lies inside the matrix and its rows are 4-aligned,
//! bounds-checked scalar loads with zeros past the edges otherwise), written
//! to threadgroup memory between two barriers: the global-memory latency of
//! step `i + 1` overlaps the multiplies of step `i` with one slice of
//! threadgroup memory. With [`GemmConfig::stages`] of 2 or more, a
//! threadgroup whose slices lie inside the matrices with rows of whole
//! 16-byte copies stages them with asynchronous copies instead (`cp.async`
//! on CUDA): `stages` slices of threadgroup memory, the copies of slice
//! `i + stages − 1` in flight while slice `i` is multiplied, one barrier per
//! slice (`Stages::pipeline`); packed weights ([`QgemmConfig`]) arrive as
//! raw words and scales, which each B tile's load decodes
//! ([`matrix_load_quantized`]: on CUDA straight into the registers the
//! tensor cores read, no dequantized slice, no second barrier). The
//! epilogue writes each lane's elements through the per-lane view, skipping
//! those past M or N. Any M, N, K work.
//!
//! Where the tile divides the shape, [`GemmConfig::whole_tiles`] builds a
//! second kernel that is the pipeline alone: no edge paths, no register
//! staging, its tile stored whole by one matrix store (alpha 1, beta 0, f32
//! C) or element by element without bounds tests; where only M is not
//! divided, its variant with [`GemmConfig::ragged_rows`] (A's rows past M
//! copied as zeros, the last row of tiles stored row by row). On an H100 the edge
//! paths' code made the same pipeline a fifth slower even where it never
//! ran (the CUDA compiler scheduled and allocated the whole kernel at
//! once; `BENCHMARKS.md`, sixth session).
//!
//! Parameters: `a, b, c, m, n, k, alpha, beta, a4, b4` — `a4` and `b4` are
//! 4-element vector views of the same buffers as `a` and `b` (the batch
//! strides come from the shapes: `m·k`, `k·n`, `m·n` elements).

use super::qmatmul::{fp4_code_value, int4_value, nibble};
use super::tile::{GemmTile, ThreadgroupLimits};
use enigma_analysis::tiles::BStaging;

mod select;
pub use select::{select, select_tile, GemmPlan, GemmProblem};
use super::quant::{Format, VALUES_PER_WORD};
use super::*;
use enigma_ir::{Access, AtomicOp, Kernel, MatrixType, MemFlags, QuantLayout, Type};

/// Elements of padding after each row of a staged slice (the planner's
/// [`enigma_analysis::tiles::STAGED_PAD`]).
pub const PAD: u32 = enigma_analysis::tiles::STAGED_PAD;

/// The most ways K is split over threadgroups.
pub const MAX_SPLITS: u32 = 64;

/// The most rows of C for which the tensor-core GEMMs split K
/// ([`GemmConfig::splits_for`], and through it the quantized GEMM's; the
/// fused variant's). On an H100 at N = 11008, K = 4096 (`BENCHMARKS.md`,
/// sixth session) the split paid at 32 rows (f16 GEMM 50.4 µs against 52.4
/// unsplit, INT4 quantized 34.2 against 39.7) and no longer at 64 (56.5
/// unsplit against 61.0; 56.7 against 55.3) or 128 (67.9 against 89.8;
/// 84.9 against 87.4). The fused variant was not measured there. The SIMT
/// f32 GEMM has its own limit ([`super::sgemm::SIMT_SPLIT_K_MAX_ROWS`]).
pub const SPLIT_K_MAX_ROWS: u32 = 32;

/// Elements each thread moves per vector load when staging a slice.
const VEC: u32 = 4;

/// Bytes of one asynchronous copy when a pipelined kernel stages a slice
/// (`cp.async`'s largest).
const COPY_BYTES: u32 = 16;

/// K values per slice the quantized GEMM takes ([`QgemmConfig::tk`]): 32
/// divides every group size, 64 the larger two (the GEMM's slices are at
/// most 64 deep).
pub const QGEMM_SLICE_DEPTHS: [u32; 2] = [32, 64];

/// The stages [`GemmConfig::pipelined_for`] and [`QgemmConfig::pipelined_for`]
/// aim for (fewer where they do not fit): on an H100 four were faster than
/// three for every whole-tile GEMM measured (4096³ f16 on 128×256×32:
/// 384 µs against 426; `BENCHMARKS.md`, sixth session), and the quantized
/// GEMM ran the same with either.
pub const DEFAULT_STAGES: u32 = 4;

/// The most stages, from [`DEFAULT_STAGES`] down to two, whose threadgroup
/// memory (`bytes(stages)`) fits `max_threadgroup_memory_bytes`: the one
/// rule of both GEMMs' `pipelined_for`.
fn stages_that_fit(bytes: impl Fn(u32) -> u64, max_threadgroup_memory_bytes: u64) -> Option<u32> {
    (2..=DEFAULT_STAGES).rev().find(|&stages| bytes(stages) <= max_threadgroup_memory_bytes)
}

/// The most slices of K a pipelined kernel keeps in threadgroup memory: it
/// waits with `stages − 2` groups of copies still in flight, and the IR
/// allows at most [`enigma_ir::limits::MAX_ASYNC_PENDING`].
pub const MAX_STAGES: u32 = enigma_ir::limits::MAX_ASYNC_PENDING + 2;

/// K splits for an `m × n × k` product on `tile` (`tm, tn, tk`) that give
/// at least `threadgroups` threadgroups, each split keeping at least 4
/// slices of K — for M up to `max_rows` only (the kernel's limit:
/// [`SPLIT_K_MAX_ROWS`], [`super::sgemm::SIMT_SPLIT_K_MAX_ROWS`]): with more
/// rows the workspace's traffic costs more than the parallelism gains (on
/// an H100, 1024³ split 5 ways took 67 µs against 51 µs unsplit;
/// `BENCHMARKS.md`). The rule of every GEMM ([`GemmConfig::splits_for`],
/// [`super::sgemm::SgemmConfig::splits_for`], the fused variant's).
pub fn k_splits_for(tile: (u32, u32, u32), m: u32, n: u32, k: u32, threadgroups: u32, max_rows: u32) -> u32 {
    let (tm, tn, tk) = tile;
    if m > max_rows {
        return 1;
    }
    let tiles = m.div_ceil(tm).max(1) * n.div_ceil(tn).max(1);
    let wanted = threadgroups.div_ceil(tiles);
    wanted.min(k / (4 * tk)).clamp(1, MAX_SPLITS)
}

/// Who sums a K-split product's partial tiles into C.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SplitSum {
    /// A second dispatch, [`splitk_reduce`]: the kernel's `c` is the f32
    /// workspace of partial tiles.
    #[default]
    Reduction,
    /// The kernel: each threadgroup writes its partial tile to the f32
    /// workspace `ws`, and the last of a tile's threadgroups to finish (a
    /// ticket per tile in `tickets`, taken with an atomic between two
    /// `device_fence()`s) sums the tile's partials in split order into `c`,
    /// with [`splitk_reduce`]'s arithmetic, and resets the ticket to 0.
    /// `tickets` holds one u32 per tile and batch, zero before the dispatch
    /// and zero after it. Needs [`enigma_ir::Feature::DeviceFence`].
    LastThreadgroup,
}

/// One GEMM kernel's shape and types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    pub input: DType,
    pub output: DType,
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub sg_rows: u32,
    pub sg_cols: u32,
    pub trans_a: bool,
    pub trans_b: bool,
    /// K split over this many threadgroups per tile (1: none). With more,
    /// each writes its f32 partial product to its own slice of `c`, a
    /// workspace of `splits · M · N` f32 per batch, and [`splitk_reduce`]
    /// sums the slices into C in a fixed order (deterministic); or the
    /// kernel does, as `split_sum` says.
    pub splits: u32,
    /// With K split: who sums the partial tiles.
    pub split_sum: SplitSum,
    /// Slices of K held in threadgroup memory at once: 1 stages the next
    /// slice through registers ([`GemmConfig::new`]'s default); 2 or more
    /// fill them with asynchronous copies, `stages - 1` slices ahead of the
    /// one being multiplied (where a threadgroup's slices are inside the
    /// matrices with rows of whole 16-byte copies; elsewhere it stages
    /// through registers). [`GemmConfig::pipelined_for`] picks it.
    pub stages: u32,
    /// A kernel for shapes the tile divides ([`GemmConfig::whole_tiles_for`]):
    /// every threadgroup runs the pipeline over whole slices and stores its
    /// tile whole, with no edge paths compiled in. Kept separate because the
    /// edge paths cost the pipeline its speed when they are in the same
    /// kernel, even unrun (on an H100, `BENCHMARKS.md`). A dispatch whose
    /// shape the tile does not divide leaves C untouched: plan through
    /// [`GemmConfig::whole_tiles_for`] (`Ops::matmul` does).
    pub whole_tiles: bool,
    /// With `whole_tiles`: M need not be a multiple of `tm` (A untransposed).
    /// A's rows past M are copied as zeros and the last row of tiles is
    /// stored element by element, rows past M skipped. A variant of its
    /// own: the row tests cost the divided shapes 6 % at f16 4096³ on an
    /// H100 (`BENCHMARKS.md`, sixth session).
    pub ragged_rows: bool,
}

impl GemmConfig {
    /// The default tile for the input type: 128×128×32 over 2×2 SIMD groups
    /// (64×64 each, the fastest of the sweep in `BENCHMARKS.md` on an H100)
    /// for 16-bit inputs, 64×64×32 over 2×2 for f32 (whose slices take twice
    /// the threadgroup memory).
    pub fn new(input: DType, output: DType) -> GemmConfig {
        let tm = if input == DType::F32 { 64 } else { 128 };
        GemmConfig { input, output, tm, tn: tm, tk: 32, sg_rows: 2, sg_cols: 2, trans_a: false, trans_b: false, splits: 1, split_sum: SplitSum::Reduction, stages: 1, whole_tiles: false, ragged_rows: false }
    }

    /// This configuration as the whole-tile kernel ([`GemmConfig::whole_tiles`])
    /// where an `m × n × k` product allows it: pipelined (two or more
    /// stages) and `n`, `k` multiples of `tn`, `tk` — which also makes every
    /// slice's rows whole 16-byte copies inside the matrices — and `m` a
    /// multiple of `tm`, or (A untransposed) with [`GemmConfig::ragged_rows`].
    /// Otherwise unchanged.
    pub fn whole_tiles_for(self, m: u32, n: u32, k: u32) -> GemmConfig {
        let rows_divide = m.is_multiple_of(self.tm);
        let fits = self.stages >= 2 && (rows_divide || !self.trans_a) && n.is_multiple_of(self.tn) && k.is_multiple_of(self.tk);
        if self.whole_tiles || !fits {
            return self;
        }
        GemmConfig { whole_tiles: true, ragged_rows: !rows_divide, ..self }
    }

    /// The configuration with [`DEFAULT_STAGES`] stages filled by
    /// asynchronous copies where they fit in `max_threadgroup_memory_bytes`,
    /// else the most from three down to two that fit, else unchanged (the
    /// 128×128×32 16-bit tile's four stages take 74 KiB, two 37 KiB; an
    /// H100 has 227). Devices whose
    /// copies are not asynchronous (Metal's MSL copies at once) gain nothing
    /// from it: the caller decides.
    pub fn pipelined_for(self, max_threadgroup_memory_bytes: u64) -> GemmConfig {
        let stages = stages_that_fit(|stages| GemmConfig { stages, ..self }.threadgroup_memory_bytes(), max_threadgroup_memory_bytes);
        GemmConfig { stages: stages.unwrap_or(self.stages), ..self }
    }

    /// Elements of one asynchronous copy ([`COPY_BYTES`]).
    fn copy_elems(&self) -> u32 {
        COPY_BYTES / self.input.size_bytes()
    }

    /// The configuration of a planner tile ([`GemmTile`]: the tuner's
    /// candidates and `select_tile`'s choice), untransposed, unsplit.
    pub fn from_tile(tile: GemmTile, input: DType, output: DType) -> GemmConfig {
        let GemmTile { tm, tn, tk, sg_rows, sg_cols } = tile;
        GemmConfig { tm, tn, tk, sg_rows, sg_cols, ..GemmConfig::new(input, output) }
    }

    /// K splits for an `m × n × k` product on this tile ([`k_splits_for`]).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, threadgroups: u32) -> u32 {
        k_splits_for((self.tm, self.tn, self.tk), m, n, k, threadgroups, SPLIT_K_MAX_ROWS)
    }

    /// The tile split over `threads / 32` SIMD groups: 1, 2, 4 … 32 of them
    /// as a grid of at most twice as many rows as columns; a side shrinks
    /// where its SIMD groups would hold more than 64 (the largest matrix).
    pub fn with_threads(self, threads: u32) -> Result<GemmConfig, ShapeError> {
        let groups = check_threads(&self.name(), threads)? / SIMD_WIDTH;
        if !groups.is_power_of_two() {
            return Err(ShapeError::new(self.name(), format!("{threads} threads are {groups} SIMD groups; the tile splits over a power of two")));
        }
        let sg_cols = 1 << (groups.trailing_zeros() / 2);
        let sg_rows = groups / sg_cols;
        let side = MatrixType::MAX_SIDE as u32;
        let cfg = GemmConfig { sg_rows, sg_cols, tm: self.tm.min(side * sg_rows), tn: self.tn.min(side * sg_cols), ..self };
        cfg.check(u64::MAX)?;
        Ok(cfg)
    }

    pub fn threads(&self) -> u32 {
        SIMD_WIDTH * self.sg_rows * self.sg_cols
    }

    /// The staged slices of A and B as stored: (rows, columns) each.
    fn slices(&self) -> [(u32, u32); 2] {
        let a = if self.trans_a { (self.tk, self.tm) } else { (self.tm, self.tk) };
        let b = if self.trans_b { (self.tn, self.tk) } else { (self.tk, self.tn) };
        [a, b]
    }

    /// Threadgroup memory: per stage one slice of A and one of B, rows
    /// padded by [`PAD`] (the planner's rule,
    /// [`enigma_analysis::tiles::staged_slice_bytes`]).
    pub fn threadgroup_memory_bytes(&self) -> u64 {
        self.memory_bytes(BStaging::Values)
    }

    /// How this configuration stages packed weights ([`QgemmConfig`]): the
    /// whole-tile kernel decodes every B tile from the staged words, with no
    /// dequantized slice; the general kernel keeps one for its edge tiles.
    fn packed_staging(&self) -> BStaging {
        BStaging::Packed { dequantized_slice: !self.whole_tiles }
    }

    /// Threadgroup memory with B of values or of 4-bit words as `b_staging`
    /// says: a pipelined kernel with packed weights keeps `stages` copies of
    /// A's slice and of the slice's words and scales, and maybe one slice of
    /// B dequantized ([`GemmConfig::packed_staging`]).
    fn memory_bytes(&self, b_staging: BStaging) -> u64 {
        let [a, b] = self.slices();
        let (a_bytes, b_bytes) = enigma_analysis::tiles::staged_gemm_memory(a, b, self.input.size_bytes(), self.stages, b_staging);
        a_bytes.saturating_add(b_bytes)
    }

    /// Per stage of a pipelined kernel with packed weights: the slice's
    /// words (`tk / 8` rows of `tn`, as in memory) and its `tn` scales.
    fn packed_stage_elems(&self) -> (u32, u32) {
        (self.tk / VALUES_PER_WORD as u32 * self.tn, self.tn)
    }

    /// f32 accumulator elements each lane holds.
    pub fn accumulators_per_lane(&self) -> u32 {
        (self.tm / self.sg_rows) * (self.tn / self.sg_cols) / SIMD_WIDTH
    }

    /// The K extent of one matrix multiply: 16 (the tensor cores' step) where
    /// `tk` allows, else 8.
    fn k_step(&self) -> u32 {
        if self.tk.is_multiple_of(16) {
            16
        } else {
            8
        }
    }

    /// Checks that the tile shape is one the kernel can build: sides and
    /// SIMD-group tiles multiples of 8, tiles at most 64, at most 1024
    /// threads, and at most `max_threadgroup_memory_bytes` of threadgroup
    /// memory — the device's (`DeviceInfo::max_threadgroup_memory_bytes`:
    /// 32 KiB on Apple GPUs, 227 KiB on an H100); `u64::MAX` checks the shape
    /// alone.
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        let side = |v: u32| v > 0 && v.is_multiple_of(8) && v <= 64;
        let (sm, sn) = simdgroup_tiles(&name, (self.tm, self.tn), (self.sg_rows, self.sg_cols))?;
        if !(side(sm) && side(sn) && side(self.tk)) {
            return Err(ShapeError::new(
                name,
                format!("SIMD-group tiles of {sm}×{sn} and a K step of {} must be multiples of 8 up to 64", self.tk),
            ));
        }
        check_threads(&name, self.threads())?;
        if !(1..=MAX_STAGES).contains(&self.stages) {
            return Err(ShapeError::new(name, format!("{} stages; between 1 and {MAX_STAGES}", self.stages)));
        }
        if self.whole_tiles && self.stages < 2 {
            return Err(ShapeError::new(name, "the whole-tile kernel is pipelined: it takes 2 stages or more".to_string()));
        }
        if self.ragged_rows && (!self.whole_tiles || self.trans_a) {
            return Err(ShapeError::new(name, "ragged rows are a variant of the whole-tile kernel with A untransposed".to_string()));
        }
        check_splits_and_memory(&name, self.splits, self.threadgroup_memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// `gemm_{in}_{out}_{tm}x{tn}x{tk}_sg{r}x{c}[_ta][_tb][_splitk[_sum]][_s{stages}][_whole[_ragged]]`.
    pub fn name(&self) -> String {
        format!(
            "gemm_{}_{}_{}x{}x{}_sg{}x{}{}{}{}{}{}",
            self.input,
            self.output,
            self.tm,
            self.tn,
            self.tk,
            self.sg_rows,
            self.sg_cols,
            if self.trans_a { "_ta" } else { "" },
            if self.trans_b { "_tb" } else { "" },
            split_suffix(self.splits, self.split_sum),
            if self.stages > 1 { format!("_s{}", self.stages) } else { String::new() },
            self.whole_tiles_suffix()
        )
    }

    /// The names' mark of the whole-tile kernel: `_whole`, `_whole_ragged`
    /// for its ragged-rows variant, nothing for the general kernel.
    fn whole_tiles_suffix(&self) -> &'static str {
        match (self.whole_tiles, self.ragged_rows) {
            (true, true) => "_whole_ragged",
            (true, false) => "_whole",
            _ => "",
        }
    }

    /// The dispatch for an `m × n` result, `batch` times (times the splits).
    pub fn dispatch(&self, m: u32, n: u32, batch: u32) -> Dispatch {
        Dispatch::threadgroups([n.div_ceil(self.tn), m.div_ceil(self.tm), batch * self.splits.max(1)], self.threads())
    }
}

/// The GEMM kernel of `cfg` (see the module doc).
///
/// # Panics
/// When the tile's shape fails [`GemmConfig::check`]: plan through it first
/// (the threadgroup memory is the device's to check, there and when the
/// runtime compiles the kernel).
pub fn gemm(cfg: &GemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    build(cfg, cfg.name(), None)
}

/// The kernel of `cfg` named `name`: B of the input type, or with `packed`
/// 4-bit weights in a layout of packed words (see [`QgemmConfig`]).
fn build(cfg: &GemmConfig, name: String, packed: Option<(Format, QuantLayout)>) -> Kernel {
    let (sm, sn) = (cfg.tm / cfg.sg_rows, cfg.tn / cfg.sg_cols);
    // Fragment-ordered weights decode a whole slice's B tile at once (its
    // 64-row unit), so A's tile spans the slice too.
    let step = match packed {
        Some((_, QuantLayout::Fragments)) => cfg.tk,
        _ => cfg.k_step(),
    };
    let elem = cfg.input.scalar();
    let a_tile = MatrixType::new(elem, sm as u8, step as u8);
    let b_tile = MatrixType::new(elem, step as u8, sn as u8);
    let acc_tile = MatrixType::new(enigma_ir::Scalar::F32, sm as u8, sn as u8);
    let splits = cfg.splits.max(1);
    let mut k = KernelBuilder::new(name);
    let a = k.buffer("a", cfg.input.ty(1), Access::Read);
    let b = match packed {
        None => k.buffer("b", cfg.input.ty(1), Access::Read),
        Some(_) => k.buffer("b", Type::U32, Access::Read),
    };
    // With K split, `c` is the f32 workspace of partial products, unless
    // the kernel sums them (`ws` then, with the tickets after the other
    // parameters).
    let sums_here = splits > 1 && cfg.split_sum == SplitSum::LastThreadgroup;
    let c = k.buffer("c", if splits > 1 && !sums_here { Type::F32 } else { cfg.output.ty(1) }, Access::ReadWrite);
    let m = k.value("m", Type::U32);
    let n = k.value("n", Type::U32);
    let kk = k.value("k", Type::U32);
    // alpha and beta, or for packed weights the group size and its scales.
    let (scaling, scales) = match packed {
        None => (Some((k.value("alpha", Type::F32), k.value("beta", Type::F32))), None),
        Some(_) => (None, Some((k.value("group", Type::U32), k.buffer("scales", Type::F16, Access::Read)))),
    };
    let a4 = k.buffer("a4", cfg.input.ty(VEC as u8), Access::Read);
    let b_source = match (packed, scales) {
        (Some((format, layout)), Some((group, scales))) => Source::Packed { format, layout, words: b, scales, group },
        _ => Source::Values { scalar: b, vector: k.buffer("b4", cfg.input.ty(VEC as u8), Access::Read) },
    };
    let summed = sums_here.then(|| (k.buffer("ws", Type::F32, Access::ReadWrite), k.buffer("tickets", Type::U32, Access::ReadWrite)));
    // Where the threadgroup's own product goes: C, or its split's slice of
    // the f32 workspace.
    let partial = summed.map_or(c, |(ws, _)| ws);
    let [(a_rows, a_cols), (b_rows, b_cols)] = cfg.slices();
    let (lda, ldb) = (a_cols + PAD, b_cols + PAD);
    // Slices of 4-element vectors, written whole; the matrix loads read
    // their scalars (offsets and strides count elements).
    // With stages, stage s of a slice starts at element s · rows · ld.
    // Packed weights are dequantized into one B slice; with stages their
    // words and scales are staged raw (`GemmConfig::memory_bytes`).
    let b_stages = if packed.is_some() { 1 } else { cfg.stages };
    let a_s = k.threadgroup_array("a_slice", cfg.input.ty(VEC as u8), cfg.stages * a_rows * lda / VEC);
    // Without a dequantized slice (`GemmConfig::packed_staging`) the
    // operand's `staged` is the words, never read as values.
    let b_slice = packed.is_none() || cfg.packed_staging() == BStaging::Packed { dequantized_slice: true };
    let b_values = b_slice.then(|| k.threadgroup_array("b_slice", cfg.input.ty(VEC as u8), b_stages * b_rows * ldb / VEC));
    let b_raw = (packed.is_some() && cfg.stages > 1).then(|| {
        let (words, scales) = cfg.packed_stage_elems();
        (k.threadgroup_array("b_words", Type::U32, cfg.stages * words), k.threadgroup_array("b_scales", Type::F16, cfg.stages * scales))
    });
    let b_s = match (b_values, b_raw) {
        (Some(values), _) => values,
        (None, Some((words, _))) => words,
        (None, None) => unreachable!("a whole-tile kernel of packed weights stages their words"),
    };
    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let m0 = k.let_("m0", tg.y() * cfg.tm);
    let n0 = k.let_("n0", tg.x() * cfg.tn);
    // With K split, z numbers (batch, split) pairs; this threadgroup takes
    // the split's stretch of K, whole slices, and writes its partial
    // product to its own f32 slice of `c` (alpha and beta wait for the
    // reduction).
    let batch = k.let_("batch", tg.z() / splits);
    let split = k.let_("split", tg.z() % splits);
    let c_base = k.let_("c_base", tg.z() * m * n);
    let (k_begin, k_end) = split_range(&mut k, kk, split, splits, cfg.tk);
    let sg_m = k.let_("sg_m", sg / cfg.sg_cols * sm);
    let sg_n = k.let_("sg_n", sg % cfg.sg_cols * sn);
    // The operands as stored: (rows, columns) of the matrix, the origin of
    // this threadgroup's slices along the axis that is not K.
    let a_op = Operand {
        name: "a",
        source: Source::Values { scalar: a, vector: a4 },
        staged: a_s,
        base: k.let_("a_base", batch * m * kk),
        shape: if cfg.trans_a { (kk, m) } else { (m, kk) },
        slice: (a_rows, a_cols),
        origin: m0,
        k_is_row: cfg.trans_a,
        raw: None,
    };
    let b_op = Operand {
        name: "b",
        source: b_source,
        staged: b_s,
        base: k.let_("b_base", batch * kk * n),
        shape: if cfg.trans_b { (n, kk) } else { (kk, n) },
        slice: (b_rows, b_cols),
        origin: n0,
        k_is_row: !cfg.trans_b,
        raw: b_raw,
    };
    let threads = cfg.threads();
    let stages = Stages { cfg, ops: [a_op, b_op], lid, sg_m, sg_n, a_tile, b_tile, step };
    let acc = k.var("acc", matrix_fill(acc_tile, 0.0f32));
    let split_tile = summed.map(|(ws, tickets)| SplitTile { cfg, c, ws, tickets, flag: a_s, m, n, m0, n0, batch, lid, scaling });
    if cfg.whole_tiles {
        // Only shapes the tile divides; any other would read past the
        // matrices, so it is left alone (the planner never sends one).
        let rows = if cfg.ragged_rows { Ex::from(true) } else { (m % cfg.tm).eq(0u32) };
        let divides = rows.and((n % cfg.tn).eq(0u32)).and((kk % cfg.tk).eq(0u32));
        k.if_(divides, |k| {
            k.if_(k_end.gt(k_begin), |k| stages.pipeline(k, acc, k_begin, k_end));
            let c_is_f32 = splits > 1 || cfg.output == DType::F32;
            let at = c_base + (m0 + sg_m) * n + n0 + sg_n;
            let own_scaling = scaling.filter(|_| splits == 1);
            let whole = |k: &mut KernelBuilder| store_whole_tile(k, acc, partial, c_is_f32, at, n, own_scaling, None);
            match cfg.ragged_rows {
                true => k.if_else((m0 + cfg.tm).le(m), whole, |k| store_whole_tile(k, acc, partial, c_is_f32, at, n, own_scaling, Some((m0 + sg_m, m)))),
                false => whole(k),
            }
            if let Some(tile) = &split_tile {
                tile.sum_if_last(k);
            }
        });
        return finish(k);
    }
    let held: Vec<Vec<Var>> = stages.ops.iter().map(|op| op.registers(&mut k, cfg, threads)).collect();
    // A threadgroup whose slices lie inside the matrices along M and N, with
    // vector-aligned rows, runs its whole K slices on vector loads and only
    // a last partial slice (K not a multiple of tk) element by element. Two
    // separate loops, so no register is written by both kinds of load.
    let whole_end = k.let_("whole_end", k_begin + (k_end - k_begin) / cfg.tk * cfg.tk);
    let interior = stages.ops.iter().map(|op| op.inside_across_k()).reduce(|x, y| x.and(y)).expect("two operands");
    let through_registers = |k: &mut KernelBuilder| {
        k.if_(whole_end.gt(k_begin), |k| stages.run(k, "whole_", &held, acc, k_begin, whole_end, true));
        k.if_(whole_end.lt(k_end), |k| stages.run(k, "tail_", &held, acc, whole_end, k_end, false));
    };
    let by_registers = |k: &mut KernelBuilder| {
        k.if_else(interior, through_registers, |k| k.if_(k_end.gt(k_begin), |k| stages.run(k, "edge_", &held, acc, k_begin, k_end, false)))
    };
    if cfg.stages == 1 {
        by_registers(&mut k);
    } else {
        // Rows of whole copies, inside the matrices across K (A's rows past
        // M copy zeros): the pipeline for the whole slices, the registers
        // for a last partial one (after a barrier: stage 0 may still be
        // read).
        let pipelined = stages.ops.iter().map(|op| op.copies_aligned(cfg).and(op.pipelinable())).reduce(|x, y| x.and(y)).expect("two operands");
        k.if_else(
            pipelined,
            |k| {
                k.if_(whole_end.gt(k_begin), |k| stages.pipeline(k, acc, k_begin, whole_end));
                k.if_(whole_end.lt(k_end), |k| {
                    k.threadgroup_barrier(MemFlags::Threadgroup);
                    stages.run(k, "pipe_tail_", &held, acc, whole_end, k_end, false);
                });
            },
            by_registers,
        );
    }
    for i in 0..acc_tile.per_lane() as u8 {
        let row = k.let_(&format!("row{i}"), m0 + sg_m + matrix_coord(acc_tile, i, false));
        let col = k.let_(&format!("col{i}"), n0 + sg_n + matrix_coord(acc_tile, i, true));
        k.if_(row.lt(m).and(col.lt(n)), |k| {
            let at = k.let_(&format!("at{i}"), c_base + row * n + col);
            match scaling.filter(|_| splits == 1) {
                Some((alpha, beta)) => {
                    let v = k.var(&format!("v{i}"), alpha * thread_element(acc, i));
                    k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + beta * load_f32(c, at)));
                    store_f32(k, c, at, v.get());
                }
                None => store_f32(k, partial, at, thread_element(acc, i)),
            }
        });
    }
    if let Some(tile) = &split_tile {
        tile.sum_if_last(&mut k);
    }
    finish(k)
}

/// What the last threadgroup of a K-split tile needs to sum the splits
/// ([`SplitSum::LastThreadgroup`]): the output `c`, the workspace `ws`, the
/// `tickets`, A's staged slices (`flag`: free once the slices are
/// multiplied, its first vector tells the threadgroup whether it is the
/// last), the shape, the tile's corner, the batch, the thread's index, and
/// alpha and beta where the kernel has them.
struct SplitTile<'a> {
    cfg: &'a GemmConfig,
    c: Mem,
    ws: Mem,
    tickets: Mem,
    flag: Mem,
    m: Ex,
    n: Ex,
    m0: Ex,
    n0: Ex,
    batch: Ex,
    lid: Ex,
    scaling: Option<(Ex, Ex)>,
}

impl SplitTile<'_> {
    /// After every thread stored its part of the partial tile: thread 0
    /// fences and takes the tile's ticket; the threadgroup that draws the
    /// last one fences again, resets the ticket, and sums the splits' tiles
    /// element by element in split order, as [`splitk_reduce`] does (the
    /// same f32 operations, so the same C).
    fn sum_if_last(&self, k: &mut KernelBuilder) {
        let Self { cfg, c, ws, tickets, flag, m, n, m0, n0, batch, lid, scaling } = *self;
        let splits = cfg.splits;
        k.threadgroup_barrier(MemFlags::Device);
        let grid = threadgroups_per_grid();
        let tg = threadgroup_position_in_grid();
        let ticket_at = k.let_("ticket_at", (batch * grid.y() + tg.y()) * grid.x() + tg.x());
        let flag_ty = flag.elem();
        let one_hot = |k: &mut KernelBuilder, last: Ex| {
            let x = enigma_ir::builder::select(0.0f32, 1.0f32, last).cast(Type::scalar(flag_ty.elem()));
            let zero = Ex::from(0.0f32).cast(Type::scalar(flag_ty.elem()));
            k.store(flag.at(0u32), vector(flag_ty, &[x, zero, zero, zero]));
        };
        k.if_(lid.eq(0u32), |k| {
            k.device_fence();
            let ticket = k.atomic_fetch(AtomicOp::Add, tickets.at(ticket_at), 1u32);
            let last = k.let_("split_last", ticket.eq(splits - 1));
            k.if_(last, |k| {
                k.atomic(AtomicOp::Exchange, tickets.at(ticket_at), 0u32);
                k.device_fence();
            });
            one_hot(k, last);
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let is_last = flag.get(0u32).x().cast(Type::F32).ne(0.0f32);
        k.if_(is_last, |k| {
            let mn = k.let_("split_mn", m * n);
            // Each thread's elements of the tile, SUM_UNROLL at a time, and
            // every split of each: independent loads, all in flight at once.
            let per_thread = cfg.tm * cfg.tn / cfg.threads();
            let unroll = per_thread.min(SUM_UNROLL);
            k.for_range("split_it", 0u32, per_thread / unroll, 1u32, |k, it| {
                for u in 0..unroll {
                    let e = k.let_(&format!("split_e{u}"), (it * unroll + u) * cfg.threads() + lid);
                    let row = k.let_(&format!("split_row{u}"), m0 + e / cfg.tn);
                    let col = k.let_(&format!("split_col{u}"), n0 + e % cfg.tn);
                    k.if_(row.lt(m).and(col.lt(n)), |k| {
                        let i = k.let_(&format!("split_i{u}"), batch * mn + row * n + col);
                        let base = k.let_(&format!("split_base{u}"), batch * splits * mn + row * n + col);
                        let sum = k.var(&format!("split_sum{u}"), ws.get(base));
                        for s in 1..splits {
                            k.assign(sum, sum.get() + ws.get(base + mn * s));
                        }
                        match scaling {
                            Some((alpha, beta)) => {
                                let v = k.var(&format!("split_v{u}"), sum.get() * alpha);
                                k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + load_f32(c, i) * beta));
                                store_f32(k, c, i, v.get());
                            }
                            None => store_f32(k, c, i, sum.get()),
                        }
                    });
                }
            });
        });
    }
}

/// Elements of C each thread of a tile's last threadgroup sums per loop
/// iteration ([`SplitSum::LastThreadgroup`]), their splits' loads all
/// issued together.
const SUM_UNROLL: u32 = 8;

/// The whole-tile kernel's epilogue: the SIMD group's accumulator tile to
/// C at `at` (row stride `n`), all of it inside C, or with `rows` = (the
/// tile's first row, M) only its rows before M (the ragged variant's last
/// row of tiles). With `rows`, `scaling` (alpha, beta) other than (1, 0)
/// or C not f32 (`c_is_f32`: the output type, or a split's f32 workspace),
/// element by element through the per-lane view (each `alpha · acc + beta ·
/// C`, rounded to C's type); otherwise one matrix store, which the CUDA
/// back end writes as pairs.
#[allow(clippy::too_many_arguments)]
fn store_whole_tile(k: &mut KernelBuilder, acc: Var, c: Mem, c_is_f32: bool, at: Ex, n: Ex, scaling: Option<(Ex, Ex)>, rows: Option<(Ex, Ex)>) {
    let acc_tile = acc.get().ty().as_matrix().expect("the accumulator is a tile");
    let tag = if rows.is_some() { "edge_" } else { "" };
    let by_element = |k: &mut KernelBuilder| {
        for i in 0..acc_tile.per_lane() as u8 {
            let row = matrix_coord(acc_tile, i, false);
            let store = |k: &mut KernelBuilder| {
                let to = k.let_(&format!("{tag}at{i}"), at + row * n + matrix_coord(acc_tile, i, true));
                match scaling {
                    Some((alpha, beta)) => {
                        let v = k.var(&format!("{tag}v{i}"), alpha * thread_element(acc, i));
                        k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + beta * load_f32(c, to)));
                        store_f32(k, c, to, v.get());
                    }
                    None => store_f32(k, c, to, thread_element(acc, i)),
                }
            };
            match rows {
                Some((first, m)) => k.if_((first + row).lt(m), store),
                None => store(k),
            }
        }
    };
    let as_matrix = |k: &mut KernelBuilder| k.matrix_store(acc, c, at, n, false);
    match scaling {
        _ if !c_is_f32 || rows.is_some() => by_element(k),
        None => as_matrix(k),
        Some((alpha, beta)) => k.if_else(alpha.eq(1.0f32).and(beta.eq(0.0f32)), as_matrix, by_element),
    }
}

/// The most rows for which the quantized GEMM splits K at all
/// ([`QgemmConfig::splits_for`]).
pub const QGEMM_SPLIT_K_MAX_ROWS: u32 = 128;

/// The most K splits of the quantized GEMM above [`SPLIT_K_MAX_ROWS`] rows
/// (the most measured; [`QgemmConfig::splits_for`]).
pub const QGEMM_WIDE_SPLITS: u32 = 4;

/// The largest SIMD-group tile (rows × columns) of the quantized GEMM on
/// fragment-ordered weights ([`QgemmConfig::in_layout`]): its A tile
/// (rows × 64), B tile (64 × columns) and f32 accumulators are live at
/// once. On an H100 at M = 128, 11008×4096, 64×32 tiles (2×4 SIMD groups)
/// took 80.2 µs INT4 and 86.1 µs FP4 against 87.8 and 100.4 µs for 64×64
/// (2×2; `BENCHMARKS.md`, seventh session).
pub const FRAGMENT_ORDER_SIMDGROUP_TILE: u32 = 64 * 32;

/// The quantized GEMM `C[M, N] = A[M, K] · dequant(B)` on the GEMM's tiles
/// and tensor-core path: `A` f16, `B` 4-bit codes in seed 002's layout (FP4
/// or INT4, `[K/8][N]` words with f16 scales per group), `C` f32 or f16.
/// Pipelined (`stages` ≥ 2), each K slice's packed words and scales are
/// copied into threadgroup memory and each B tile is decoded from them by
/// its load; tiles at the matrix's edges dequantize each slice into
/// threadgroup memory (seed 002's *separate* variant, one slice, as `[N][K]`
/// so that a word's 8 values are contiguous) and read it back with
/// transposed matrix loads. A slice lies inside one quantization group
/// (`tk` divides the group). For M above the decode kernel's
/// [`super::qmatmul::DECODE_ROWS`] rows.
///
/// Parameters: `a, b, c, m, n, k, group, scales, a4` (`a4` the `half4`
/// view of `a`; `b` the packed words; `group` K values per scale, a power of two that the slice depth divides: [`QgemmConfig::check_group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QgemmConfig {
    pub format: Format,
    pub output: DType,
    pub tm: u32,
    pub tn: u32,
    /// K values per slice: one of [`QGEMM_SLICE_DEPTHS`], dividing the group.
    pub tk: u32,
    pub sg_rows: u32,
    pub sg_cols: u32,
    /// K split over threadgroups, as [`GemmConfig::splits`].
    pub splits: u32,
    /// As [`GemmConfig::split_sum`].
    pub split_sum: SplitSum,
    /// As [`GemmConfig::stages`]: with 2 or more, A's slices, the packed
    /// words and their scales go to threadgroup memory by asynchronous
    /// copies, and each B tile is decoded from the staged words by its
    /// load (the dequantized slice then serves only edge tiles).
    pub stages: u32,
    /// As [`GemmConfig::whole_tiles`]: the pipeline alone, for shapes the
    /// tile divides ([`QgemmConfig::whole_tiles_for`]).
    pub whole_tiles: bool,
    /// As [`GemmConfig::ragged_rows`].
    pub ragged_rows: bool,
    /// How the packed words lie: seed 002's `[K/8][N]`, or fragment order
    /// ([`QuantLayout::Fragments`], from [`super::quant::QuantizedMatrix::packed_in`]),
    /// which the pipelined whole-tile kernel alone takes: 64-deep slices,
    /// each SIMD group's B tile (64 × a multiple of 16) decoded at once from
    /// 16-byte loads of the staged words.
    pub layout: QuantLayout,
}

impl QgemmConfig {
    /// The tile for `m` rows: `select_tile`'s for 16-bit inputs at
    /// the portable limits (16, 32, 64 or 128 rows by 128 columns).
    pub fn for_rows(format: Format, output: DType, m: u32) -> QgemmConfig {
        let tile = select_tile(m, u32::MAX, 0, 2, &ThreadgroupLimits::PORTABLE);
        let g = GemmConfig::from_tile(tile, DType::F16, output);
        QgemmConfig { format, output, tm: g.tm, tn: g.tn, tk: QGEMM_SLICE_DEPTHS[0], sg_rows: g.sg_rows, sg_cols: g.sg_cols, splits: 1, split_sum: SplitSum::Reduction, stages: 1, whole_tiles: false, ragged_rows: false, layout: QuantLayout::Rows }
    }

    /// The configuration of a planner tile (its `tm × tn × tk` and
    /// SIMD-group grid), unsplit and unpipelined.
    pub fn from_tile(format: Format, output: DType, tile: GemmTile) -> QgemmConfig {
        QgemmConfig { format, output, tm: tile.tm, tn: tile.tn, tk: tile.tk, sg_rows: tile.sg_rows, sg_cols: tile.sg_cols, splits: 1, split_sum: SplitSum::Reduction, stages: 1, whole_tiles: false, ragged_rows: false, layout: QuantLayout::Rows }
    }

    /// The configuration with slices of 64 K values where they divide the
    /// group and two stages of them fit `max_threadgroup_memory_bytes` (the
    /// pipeline matters more), else unchanged: half the loop and barrier
    /// overhead per weight (on an H100, 11008×4096 INT4: 33.0 → 29.6 µs at
    /// M = 16, 80.1 → 63.3 µs at M = 64; `BENCHMARKS.md`).
    pub fn deepened_for(self, group: u32, max_threadgroup_memory_bytes: u64) -> QgemmConfig {
        let deep = QgemmConfig { tk: QGEMM_SLICE_DEPTHS[QGEMM_SLICE_DEPTHS.len() - 1], ..self };
        let two_stages = QgemmConfig { stages: 2, ..deep }.threadgroup_memory_bytes();
        if group.is_multiple_of(deep.tk) && two_stages <= max_threadgroup_memory_bytes {
            deep
        } else {
            self
        }
    }

    /// Checks that the kernel takes groups of `group` K values: the slice
    /// lies inside one group.
    pub fn check_group(&self, group: u32) -> Result<(), ShapeError> {
        if group == 0 || !group.is_multiple_of(self.tk) {
            return Err(ShapeError::new(self.name(), format!("slices of {} K values must divide the group of {group}", self.tk)));
        }
        if !group.is_power_of_two() {
            return Err(ShapeError::new(self.name(), format!("the group of {group} K values is not a power of two (the pipelined kernel finds a slice's scales by a shift)")));
        }
        Ok(())
    }

    /// The GEMM configuration that stages its slices: f16 A, B read
    /// transposed, `tk` K values per slice.
    pub fn gemm(&self) -> GemmConfig {
        GemmConfig {
            input: DType::F16,
            output: self.output,
            tm: self.tm,
            tn: self.tn,
            tk: self.tk,
            sg_rows: self.sg_rows,
            sg_cols: self.sg_cols,
            trans_a: false,
            trans_b: true,
            splits: self.splits,
            split_sum: self.split_sum,
            stages: self.stages,
            whole_tiles: self.whole_tiles,
            ragged_rows: self.ragged_rows,
        }
    }

    /// Checks the tile (as [`GemmConfig::check`]), the format, and the
    /// threadgroup memory against `max_threadgroup_memory_bytes` (the
    /// device's; `u64::MAX` checks the shape alone).
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        if !matches!(self.format, Format::Fp4 | Format::Int4) {
            return Err(ShapeError::new(self.name(), format!("takes fp4 or int4 weights in seed 002's layout, not {}", self.format)));
        }
        if !QGEMM_SLICE_DEPTHS.contains(&self.tk) {
            return Err(ShapeError::new(self.name(), format!("slices of {} K values; one of {QGEMM_SLICE_DEPTHS:?}", self.tk)));
        }
        if self.layout == QuantLayout::Fragments {
            let ((unit_rows, unit_cols), sn) = (self.layout.unit(), self.tn / self.sg_cols.max(1));
            let problems: Vec<String> = [
                (self.tk != unit_rows).then(|| format!("slices of {unit_rows} K values (not {})", self.tk)),
                (!sn.is_multiple_of(unit_cols)).then(|| format!("SIMD-group tiles a multiple of {unit_cols} columns wide (not {sn})")),
                (self.stages < 2).then(|| format!("2 stages or more (not {})", self.stages)),
                (!self.whole_tiles).then(|| "the whole-tile kernel (a shape the tile divides along N and K)".to_string()),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !problems.is_empty() {
                return Err(ShapeError::new(self.name(), format!("fragment-ordered weights take {}", problems.join(", "))));
            }
        }
        self.gemm().check(u64::MAX)?;
        check_splits_and_memory(&self.name(), self.splits, self.threadgroup_memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// Threadgroup memory: A's slices, the general kernel's dequantized B
    /// slice (the whole-tile kernel decodes from the staged words and has
    /// none), and with stages the packed words and scales of each stage.
    pub fn threadgroup_memory_bytes(&self) -> u64 {
        let g = self.gemm();
        g.memory_bytes(g.packed_staging())
    }

    /// [`DEFAULT_STAGES`] pipelined stages where they fit
    /// `max_threadgroup_memory_bytes`, else two where those fit, else
    /// unchanged (as [`GemmConfig::pipelined_for`]).
    pub fn pipelined_for(self, max_threadgroup_memory_bytes: u64) -> QgemmConfig {
        let stages = stages_that_fit(|stages| QgemmConfig { stages, ..self }.threadgroup_memory_bytes(), max_threadgroup_memory_bytes);
        QgemmConfig { stages: stages.unwrap_or(self.stages), ..self }
    }

    /// This configuration reading weights packed in `layout`: unchanged for
    /// seed 002's; for fragment order, 64-deep slices and, where the tile's
    /// columns do not divide `n`, the widest of half, a quarter … of them
    /// that does with SIMD-group tiles still a multiple of 16 columns wide
    /// (fewer SIMD groups across if need be). A SIMD group multiplies a
    /// whole 64-deep slice at once there, so its tile keeps to
    /// [`FRAGMENT_ORDER_SIMDGROUP_TILE`] elements (more SIMD groups where
    /// it would not). Then plan the stages and the whole-tile kernel, which
    /// fragment order needs ([`QgemmConfig::check`]).
    pub fn in_layout(self, layout: QuantLayout, n: u32) -> QgemmConfig {
        if layout == QuantLayout::Rows {
            return QgemmConfig { layout, ..self };
        }
        let (unit_rows, unit_cols) = layout.unit();
        let mut cfg = QgemmConfig { layout, tk: unit_rows, ..self };
        while !n.is_multiple_of(cfg.tn) && cfg.tn > unit_cols {
            cfg.tn /= 2;
            if cfg.tn / cfg.sg_cols < unit_cols && cfg.sg_cols > 1 {
                cfg.sg_cols /= 2;
            }
        }
        while (cfg.tm / cfg.sg_rows) * (cfg.tn / cfg.sg_cols) > FRAGMENT_ORDER_SIMDGROUP_TILE {
            if cfg.tn / cfg.sg_cols >= 2 * unit_cols {
                cfg.sg_cols *= 2;
            } else if cfg.tm / cfg.sg_rows > 16 {
                cfg.sg_rows *= 2;
            } else {
                break;
            }
        }
        cfg
    }

    /// K splits for an `m × n × k` product: the GEMM's rule
    /// ([`GemmConfig::splits_for`]) up to [`SPLIT_K_MAX_ROWS`] rows; up to
    /// [`QGEMM_SPLIT_K_MAX_ROWS`] rows, where the tiles would fill at most
    /// half the `threadgroups / 2` compute units, the same rule at most
    /// [`QGEMM_WIDE_SPLITS`] ways. The weights are read once whatever M is,
    /// so a grid of few tiles leaves most of the GPU idle: on an H100 at
    /// 4096 columns (32 tiles) four splits took 64×4096×4096 INT4 from 52.8
    /// to 28.4 µs and 128×4096×11008 from 168 to 62 µs, where at 86 and 96
    /// tiles (N = 11008, 12288) splits were as often slower as faster
    /// (`BENCHMARKS.md`, seventh session).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, threadgroups: u32) -> u32 {
        let tile = (self.tm, self.tn, self.tk);
        if m <= SPLIT_K_MAX_ROWS {
            return k_splits_for(tile, m, n, k, threadgroups, SPLIT_K_MAX_ROWS);
        }
        let tiles = m.div_ceil(self.tm).max(1) * n.div_ceil(self.tn).max(1);
        if tiles.saturating_mul(4) > threadgroups {
            return 1;
        }
        k_splits_for(tile, m, n, k, threadgroups, QGEMM_SPLIT_K_MAX_ROWS).min(QGEMM_WIDE_SPLITS)
    }

    /// This configuration as the whole-tile kernel where an `m × n × k`
    /// product allows it (the rule of [`GemmConfig::whole_tiles_for`]).
    pub fn whole_tiles_for(self, m: u32, n: u32, k: u32) -> QgemmConfig {
        let g = self.gemm().whole_tiles_for(m, n, k);
        QgemmConfig { whole_tiles: g.whole_tiles, ragged_rows: g.ragged_rows, ..self }
    }

    /// `qgemm_{format}_{out}_{tm}x{tn}[x{tk}]_sg{r}x{c}[_splitk[_sum]][_s{stages}][_whole[_ragged]][_fragments]`
    /// (`tk` named where it is not 32).
    pub fn name(&self) -> String {
        let split = split_suffix(self.splits, self.split_sum);
        let stages = if self.stages > 1 { format!("_s{}", self.stages) } else { String::new() };
        let depth = if self.tk == QGEMM_SLICE_DEPTHS[0] { String::new() } else { format!("x{}", self.tk) };
        let whole = self.gemm().whole_tiles_suffix();
        let layout = if self.layout == QuantLayout::Fragments { "_fragments" } else { "" };
        format!("qgemm_{}_{}_{}x{}{depth}_sg{}x{}{split}{stages}{whole}{layout}", self.format, self.output, self.tm, self.tn, self.sg_rows, self.sg_cols)
    }

    /// The dispatch for an `m × n` result.
    pub fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        self.gemm().dispatch(m, n, 1)
    }
}

/// The quantized GEMM kernel of `cfg` (see [`QgemmConfig`]).
///
/// # Panics
/// When `cfg.check(u64::MAX)` fails.
pub fn qgemm(cfg: &QgemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    build(&cfg.gemm(), cfg.name(), Some((cfg.format, cfg.layout)))
}

/// The multiply loop's fixed parts: the configuration, the two operands, the
/// thread's index and its SIMD group's corner, the operand tile types.
struct Stages<'a> {
    cfg: &'a GemmConfig,
    ops: [Operand; 2],
    lid: Ex,
    sg_m: Ex,
    sg_n: Ex,
    a_tile: MatrixType,
    b_tile: MatrixType,
    /// K values per matrix multiply (the tiles' inner side).
    step: u32,
}

impl Stages<'_> {
    /// Accumulates the slices `from, from + tk, … < to` along K into `acc`:
    /// the first staged before the loop; in the loop each thread loads its
    /// share of the next slice into `held` before the SIMD groups multiply
    /// the current one, and writes it to threadgroup memory between two
    /// barriers. `vector_loads` as in [`Operand::fetch`].
    #[allow(clippy::too_many_arguments)]
    fn run(&self, k: &mut KernelBuilder, tag: &str, held: &[Vec<Var>], acc: Var, from: Ex, to: Ex, vector_loads: bool) {
        let (cfg, threads, lid) = (self.cfg, self.cfg.threads(), self.lid);
        for (op, regs) in self.ops.iter().zip(held) {
            op.fetch(k, &format!("{tag}first_"), cfg, regs, from, lid, threads, vector_loads);
            op.commit(k, &format!("{tag}first_"), regs, from, lid, threads);
        }
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.for_range(&format!("{tag}k0"), from, to, cfg.tk, |k, k0| {
            let next = k.let_(&format!("{tag}next"), k0 + cfg.tk);
            k.if_(next.lt(to), |k| {
                for (op, regs) in self.ops.iter().zip(held) {
                    op.fetch(k, &format!("{tag}next_"), cfg, regs, next, lid, threads, vector_loads);
                }
            });
            self.multiply(k, tag, acc, None, None);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            k.if_(next.lt(to), |k| {
                for (op, regs) in self.ops.iter().zip(held) {
                    op.commit(k, &format!("{tag}next_"), regs, next, lid, threads);
                }
            });
            k.threadgroup_barrier(MemFlags::Threadgroup);
        });
    }
}

impl Stages<'_> {
    /// Multiplies the staged slices (A's in `stage_a`, B's in `stage_b`, or
    /// stage 0) into `acc`, one K step (16 or 8) at a time.
    fn multiply(&self, k: &mut KernelBuilder, tag: &str, acc: Var, stage_a: Option<Ex>, stage_b: Option<Ex>) {
        for s in 0..self.cfg.tk / self.step {
            let (a_load, b_load) = self.step_tiles(s, stage_a, stage_b);
            let ma = k.let_(&format!("{tag}ma{s}"), a_load);
            let mb = k.let_(&format!("{tag}mb{s}"), b_load);
            k.assign(acc, matrix_multiply_accumulate(ma, mb, acc));
        }
    }

    /// The loads of K step `s`'s A and B tiles from the staged slices (A's
    /// in `stage_a`, B's in `stage_b`, or stage 0). Packed weights staged
    /// raw (`stage_b` given) are decoded by the B tile's load
    /// ([`matrix_load_quantized`]) from the stage's words and scales.
    fn step_tiles(&self, s: u32, stage_a: Option<Ex>, stage_b: Option<Ex>) -> (Ex, Ex) {
        let cfg = self.cfg;
        let [(a_rows, a_cols), (b_rows, b_cols)] = cfg.slices();
        let (lda, ldb) = (a_cols + PAD, b_cols + PAD);
        let ks = s * self.step;
        // Element (r, c) of the A tile is op(A)[sg_m + r][ks + c]; of
        // the B tile op(B)[ks + r][sg_n + c].
        let (sg_m, sg_n) = (self.sg_m, self.sg_n);
        let mut a_at = if cfg.trans_a { sg_m + ks * lda } else { sg_m * lda + ks };
        let mut b_at = if cfg.trans_b { sg_n * ldb + ks } else { sg_n + ks * ldb };
        if let Some(stage) = stage_a {
            a_at = stage * (a_rows * lda) + a_at;
        }
        let b_op = &self.ops[1];
        let b_load = match (b_op.source, b_op.raw, stage_b) {
            (Source::Packed { format, layout, .. }, Some((raw, raw_scales)), Some(stage)) => {
                // The stage's words are its rows of units as in memory
                // (`[tk / 8][tn]` words in seed 002's layout), its scales [tn].
                let (stage_words, cols) = cfg.packed_stage_elems();
                let code = format.quant_code().expect("the tensor-core kernel takes fp4 or int4");
                let (unit_row, word, _) = layout.locate(ks, 0);
                let stride = layout.stride(cols);
                let words_at = stage * stage_words + unit_row * stride + word + sg_n * layout.stride(1);
                matrix_load_quantized(self.b_tile, code, layout, raw, words_at, stride, raw_scales, stage * cols + sg_n)
            }
            (_, _, stage) => {
                if let Some(stage) = stage {
                    b_at = stage * (b_rows * ldb) + b_at;
                }
                matrix_load(self.b_tile, b_op.staged, b_at, ldb, cfg.trans_b)
            }
        };
        (matrix_load(self.a_tile, self.ops[0].staged, a_at, lda, cfg.trans_a), b_load)
    }

    /// Accumulates the whole slices `from, from + tk, … < to` into `acc`
    /// through `cfg.stages` stages filled by asynchronous copies, one
    /// barrier per slice. The copies' addresses are worked out once
    /// ([`Operand::plan_copies`]); packed weights arrive as raw words and
    /// scales, which the B tiles' loads decode. The caller knows the slices
    /// lie inside the matrices, with rows of whole copies.
    ///
    /// With an even number of K steps per slice the tiles are double
    /// buffered: each step loads the next step's tiles before it
    /// multiplies its own, and the last step of slice `i` first issues the
    /// copies of slice `i + stages − 1` into the stage slice `i − 1` used,
    /// waits for slice `i + 1`'s own copies (`async_wait(stages − 2)`),
    /// passes the barrier that makes them visible and loads slice `i + 1`'s
    /// first tiles before it multiplies its own. With an odd number the
    /// same holds where two sets of tiles and the accumulator fit
    /// [`DOUBLE_BUFFER_REGISTERS`]; the tiles loaded last in a slice then
    /// move to the first buffer after its last multiply. Otherwise each
    /// slice starts with the wait and the barrier, and the copies follow
    /// its multiplies.
    ///
    /// The loop body has no branch: the copies of slices past the last copy
    /// the last slice again (into stages no one reads any more), and after
    /// the last slice the next-slice load reads the last stage again. On an
    /// H100 the default 128×256×32 tile ran f16 4096³ in 382 µs this way
    /// against 402 µs with the copies behind an `if` (at 64-deep slices it
    /// went the other way, 400 against 380; `BENCHMARKS.md`, sixth session).
    fn pipeline(&self, k: &mut KernelBuilder, acc: Var, from: Ex, to: Ex) {
        let (cfg, threads, lid) = (self.cfg, self.cfg.threads(), self.lid);
        let stages = cfg.stages;
        let slices = k.let_("pipe_slices", (to - from) / cfg.tk);
        let copies: Vec<SliceCopies> = self.ops.iter().map(|op| op.plan_copies(k, cfg, from, lid, threads)).collect();
        // Slices past the last copy the last one again, into stages no
        // one reads any more: the copies stay branch-free.
        let last = k.let_("pipe_last", slices - 1u32);
        for p in 0..stages - 1 {
            let slice = k.let_(&format!("pipe_first{p}"), min(last, p));
            for c in &copies {
                c.issue(k, &format!("pipe_first{p}_"), slice, p.into(), from, cfg.tk);
            }
            k.async_commit();
        }
        let issue_ahead = |k: &mut KernelBuilder, i: Ex| {
            let ahead = k.let_("pipe_ahead", i + (stages - 1));
            let slice = k.let_("pipe_copied", min(ahead, last));
            let fill = k.let_("pipe_fill", ahead % stages);
            for c in &copies {
                c.issue(k, "pipe_next_", slice, fill, from, cfg.tk);
            }
            k.async_commit();
        };
        let steps = cfg.tk / self.step;
        let acc_tile = acc.get().ty().as_matrix().expect("the accumulator is a tile");
        let registers_of = |t: MatrixType| t.per_lane() * t.elem().size_bytes() / 4;
        let registers = 2 * (registers_of(self.a_tile) + registers_of(self.b_tile)) + registers_of(acc_tile);
        if steps % 2 == 1 && registers > DOUBLE_BUFFER_REGISTERS {
            k.for_range("pipe_i", 0u32, slices, 1u32, |k, i| {
                k.async_wait(stages - 2);
                k.threadgroup_barrier(MemFlags::Threadgroup);
                let stage = k.let_("pipe_stage", i % stages);
                self.multiply(k, "pipe_", acc, Some(stage), Some(stage));
                issue_ahead(k, i);
            });
        } else {
            k.async_wait(stages - 2);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            let first = Some(Ex::from(0u32));
            // Two buffers of tiles; both start as slice 0's first (a B
            // tile assigned only by loads keeps the layout the tensor
            // cores read it in).
            let buffers: Vec<(Var, Var)> = (0..2)
                .map(|b| {
                    let (a_load, b_load) = self.step_tiles(0, first, first);
                    (k.var(&format!("pipe_ta{b}"), a_load), k.var(&format!("pipe_tb{b}"), b_load))
                })
                .collect();
            k.for_range("pipe_i", 0u32, slices, 1u32, |k, i| {
                let stage = Some(k.let_("pipe_stage", i % stages));
                for s in 0..steps {
                    let (next_a, next_b) = buffers[(s as usize + 1) % 2];
                    if s + 1 < steps {
                        let (a_load, b_load) = self.step_tiles(s + 1, stage, stage);
                        k.assign(next_a, a_load);
                        k.assign(next_b, b_load);
                    } else {
                        issue_ahead(k, i);
                        k.async_wait(stages - 2);
                        k.threadgroup_barrier(MemFlags::Threadgroup);
                        // After the last slice its own stage again (still
                        // complete, never refilled), not a stage that may
                        // never have been written.
                        let next_stage = Some(k.let_("pipe_next_stage", min(i + 1u32, last) % stages));
                        let (a_load, b_load) = self.step_tiles(0, next_stage, next_stage);
                        k.assign(next_a, a_load);
                        k.assign(next_b, b_load);
                    }
                    let (ta, tb) = buffers[s as usize % 2];
                    k.assign(acc, matrix_multiply_accumulate(ta.get(), tb.get(), acc));
                }
                if steps % 2 == 1 {
                    // The next slice's first tiles went to the second buffer.
                    let ((ta, tb), (next_a, next_b)) = (buffers[0], buffers[1]);
                    k.assign(ta, next_a.get());
                    k.assign(tb, next_b.get());
                }
            });
        }
        // The copies of the slices past the last may still be in flight:
        // complete them before the stages are used again.
        k.async_wait(0);
        k.threadgroup_barrier(MemFlags::Threadgroup);
    }
}

/// The most 32-bit registers per lane that double-buffered tiles of an odd
/// number of K steps per slice may take, counting two sets of A and B tiles
/// and the accumulator (two 16-bit or one 32-bit element a register):
/// beyond it the kernel would spill or lose occupancy. On an H100 the
/// quantized GEMM's 16 × 128 tile in fragment order (one 64-deep step per
/// slice, 112 registers by this count) ran 16 × 11008 × 4096 INT4 in
/// 13.0–13.3 µs double buffered against 13.6–13.7 µs (CuPy graph of the
/// generated kernels; `BENCHMARKS.md`, eighth session); a 64 × 32 SIMD-group
/// tile (256) keeps one buffer.
pub const DOUBLE_BUFFER_REGISTERS: u32 = 128;

/// The kernel names' mark of a K split: `_splitk`, `_splitk_sum` where the
/// kernel sums the splits itself, nothing unsplit.
fn split_suffix(splits: u32, sum: SplitSum) -> &'static str {
    match (splits > 1, sum) {
        (false, _) => "",
        (true, SplitSum::Reduction) => "_splitk",
        (true, SplitSum::LastThreadgroup) => "_splitk_sum",
    }
}

/// The stretch `[k_begin, k_end)` of K (`kk`) that split `split` of
/// `splits` takes: whole slices of `tk`, `⌈K / (splits · tk)⌉` of them per
/// split, cut at K (empty for a split past it).
pub(super) fn split_range(k: &mut KernelBuilder, kk: Ex, split: Ex, splits: u32, tk: u32) -> (Ex, Ex) {
    let k_chunk = k.let_("k_chunk", (kk + (splits * tk - 1)) / (splits * tk) * tk);
    // min(split · k_chunk, K) and min(k_begin + k_chunk, K).
    let k_begin = k.let_("k_begin", enigma_ir::builder::select(kk, split * k_chunk, (split * k_chunk).lt(kk)));
    let k_end = k.let_("k_end", enigma_ir::builder::select(kk, k_begin + k_chunk, (k_begin + k_chunk).lt(kk)));
    (k_begin, k_end)
}

/// Each SIMD group's share `(tm / sg_rows, tn / sg_cols)` of a `tm × tn`
/// tile over a `sg_rows × sg_cols` grid, checked: the grid's sides nonzero
/// and dividing the tile's.
pub(super) fn simdgroup_tiles(name: &str, (tm, tn): (u32, u32), (sg_rows, sg_cols): (u32, u32)) -> Result<(u32, u32), ShapeError> {
    if sg_rows == 0 || sg_cols == 0 || !tm.is_multiple_of(sg_rows) || !tn.is_multiple_of(sg_cols) {
        return Err(ShapeError::new(name, format!("{sg_rows}×{sg_cols} SIMD groups do not divide a {tm}×{tn} tile")));
    }
    Ok((tm / sg_rows, tn / sg_cols))
}

/// The last checks every GEMM configuration makes: 1 to [`MAX_SPLITS`] K
/// splits, and at most `max_threadgroup_memory_bytes` of the `bytes` of
/// threadgroup memory it declares.
pub(super) fn check_splits_and_memory(name: &str, splits: u32, bytes: u64, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
    if !(1..=MAX_SPLITS).contains(&splits) {
        return Err(ShapeError::new(name, format!("{splits} K splits; between 1 and {MAX_SPLITS}")));
    }
    if bytes > max_threadgroup_memory_bytes {
        return Err(ShapeError::new(name, format!("needs {bytes} bytes of threadgroup memory (limit {max_threadgroup_memory_bytes})")));
    }
    Ok(())
}

/// Runs `body` with item `j = lid + u · threads` of `count` items dealt
/// round-robin over `threads` threads (`j` bound to a local named `name`),
/// on the threads that have an item `u`: a guard only where `threads` does
/// not divide `count`.
fn share(k: &mut KernelBuilder, name: &str, u: u32, count: u32, lid: Ex, threads: u32, body: impl FnOnce(&mut KernelBuilder, Ex)) {
    let j = k.let_(name, lid + u * threads);
    if (u + 1) * threads <= count {
        body(k, j);
    } else {
        k.if_(j.lt(count), |k| body(k, j));
    }
}

/// Where an operand's values come from.
#[derive(Clone, Copy)]
enum Source {
    /// Values of the input type, through a scalar and a 4-wide view.
    Values { scalar: Mem, vector: Mem },
    /// 4-bit codes: u32 `words` in `layout` (seed 002's: 8 consecutive K
    /// values of one column per word), f16 `scales` per `group` K values and
    /// column (`[K / group][N]` in either layout).
    Packed { format: Format, layout: QuantLayout, words: Mem, scales: Mem, group: Ex },
}

/// One input matrix as the kernel stages it: its source, its threadgroup
/// slice, where this batch's matrix starts (`base`), its stored shape
/// (rows, columns), the slice's shape, the slice's origin along the axis
/// that is not K, and whether K runs along the rows.
struct Operand {
    name: &'static str,
    source: Source,
    staged: Mem,
    base: Ex,
    shape: (Ex, Ex),
    slice: (u32, u32),
    origin: Ex,
    k_is_row: bool,
    /// Pipelined packed weights: the stages of raw words (`[tk / 8][tn]`
    /// each, as in memory) and of the slice's scales (`tn` each).
    raw: Option<(Mem, Mem)>,
}

/// One of a thread's asynchronous copies of an operand's slices
/// ([`Operand::plan_copies`]).
struct StagedCopy {
    /// Its source index at the first slice (a let, computed once).
    src: Ex,
    /// Its destination index within a stage.
    dst: Ex,
    /// False where the copy zero-fills (A's rows past M).
    valid: Ex,
    /// Whether this thread has the copy, where the threads do not divide
    /// the slice's copies.
    guard: Option<Ex>,
}

/// A thread's asynchronous copies of an operand's slices, addressed once
/// before the pipeline's loop ([`Operand::plan_copies`]).
struct SliceCopies {
    src: Mem,
    dst: Mem,
    /// Elements of `src` and `dst` per copy.
    count: u32,
    /// Elements of `dst` per stage.
    stage_size: u32,
    /// How far every source index moves from one slice to the next.
    advance: Ex,
    copies: Vec<StagedCopy>,
    /// Packed weights' scales, one row per slice.
    scales: Option<ScaleCopies>,
    lid: Ex,
    threads: u32,
}

/// The scales of a packed slice: the `cols` scales of its group, 8 per
/// copy, from `[K / group][n]`; the group a power of two, its scale row
/// `k0 >> group_shift` (a division by the run-time group in every slice's
/// copies cost the quantized GEMM 4 % at 16×11008×4096 on an H100, the
/// SIMD group that makes the copies arriving late at each barrier).
struct ScaleCopies {
    scales: Mem,
    raw_scales: Mem,
    group_shift: Ex,
    n: Ex,
    origin: Ex,
    cols: u32,
}

impl SliceCopies {
    /// Starts the copies of slice number `slice` (counted from the first,
    /// whose K is `from`) into `stage`; `tag` keeps the names of each call
    /// apart.
    #[allow(clippy::too_many_arguments)]
    fn issue(&self, k: &mut KernelBuilder, tag: &str, slice: Ex, stage: Ex, from: Ex, tk: u32) {
        let shift = slice * self.advance;
        let stage_at = stage * self.stage_size;
        for copy in &self.copies {
            let start = |k: &mut KernelBuilder| k.async_copy(self.dst.at(stage_at + copy.dst), self.src.at(copy.src + shift), self.count, copy.valid);
            match copy.guard {
                None => start(k),
                Some(guard) => k.if_(guard, start),
            }
        }
        if let Some(sc) = &self.scales {
            let k0 = from + slice * tk;
            let scale_copies = sc.cols / 8;
            for u in 0..scale_copies.div_ceil(self.threads) {
                share(k, &format!("{tag}scale_j{u}"), u, scale_copies, self.lid, self.threads, |k, j| {
                    k.async_copy(sc.raw_scales.at(stage * sc.cols + j * 8u32), sc.scales.at((k0 >> sc.group_shift) * sc.n + sc.origin + j * 8u32), 8, true);
                });
            }
        }
    }
}

impl Operand {
    /// Values one thread moves per load: a vector, or a packed word.
    fn unit(&self) -> u32 {
        match self.source {
            Source::Values { .. } => VEC,
            Source::Packed { .. } => VALUES_PER_WORD as u32,
        }
    }

    /// Loads (vectors or words) in a slice.
    fn loads(&self) -> u32 {
        self.slice.0 * self.slice.1 / self.unit()
    }

    /// Loads each thread makes (the last one only on the first threads when
    /// the threads do not divide the slice).
    fn per_thread(&self, threads: u32) -> u32 {
        self.loads().div_ceil(threads)
    }

    /// The registers holding this thread's share of the next slice (zero
    /// where a thread has no last load).
    fn registers(&self, k: &mut KernelBuilder, cfg: &GemmConfig, threads: u32) -> Vec<Var> {
        let zero = match self.source {
            Source::Values { .. } => vector(cfg.input.ty(VEC as u8), &[lit(cfg.input.scalar(), 0.0)]),
            Source::Packed { .. } => 0u32.into(),
        };
        (0..self.per_thread(threads)).map(|u| k.var(&format!("{}_held{u}", self.name), zero)).collect()
    }

    /// Runs `body` with the (row, column) within the slice of load `u` of
    /// thread `lid`, skipping a thread that has no load `u`. Vectors run
    /// row-major; a packed slice is `[N][K]` and consecutive threads take
    /// consecutive columns of B (consecutive words in memory).
    fn slot(&self, k: &mut KernelBuilder, tag: &str, u: u32, lid: Ex, threads: u32, body: impl FnOnce(&mut KernelBuilder, Ex, Ex)) {
        share(k, &format!("{tag}{}j{u}", self.name), u, self.loads(), lid, threads, |k, j| {
            let (r, c) = match self.source {
                Source::Values { .. } => {
                    let per_row = self.slice.1 / VEC;
                    (j / per_row, j % per_row * VEC)
                }
                Source::Packed { .. } => (j % self.slice.0, j / self.slice.0 * VALUES_PER_WORD as u32),
            };
            body(k, r, c)
        });
    }

    /// Works out, once before the pipeline's loop, this thread's
    /// asynchronous copies of every slice (`from` the first slice's K):
    /// whole copies of [`COPY_BYTES`], consecutive threads taking
    /// consecutive copies along a row; packed weights copy 4 words and, per
    /// slice, 8 scales. The slice lies inside the matrix with rows of whole
    /// copies (the caller checks), so every copy reads; rows across K past
    /// the matrix (A's past M; B's past N when B is transposed) copy zeros,
    /// from the last row's address. Only the source moves from slice to
    /// slice, by a fixed stride ([`SliceCopies::issue`]), so the loop's
    /// copies cost an add each instead of the row arithmetic.
    fn plan_copies(&self, k: &mut KernelBuilder, cfg: &GemmConfig, from: Ex, lid: Ex, threads: u32) -> SliceCopies {
        let name = format!("pipe_{}", self.name);
        let (src, dst, elems, advance, scales) = match (self.source, self.raw) {
            (Source::Values { vector, .. }, _) => {
                let advance = if self.k_is_row { self.shape.1 * (cfg.tk / VEC) } else { Ex::from(cfg.tk / VEC) };
                (vector, self.staged, cfg.copy_elems(), advance, None)
            }
            (Source::Packed { words, layout, scales, group, .. }, Some((raw, raw_scales))) => {
                let n = self.shape.0;
                let group_shift = k.let_(&format!("{name}_group_shift"), ctz(group));
                (words, raw, 4, n * layout.stride(1) * (cfg.tk / layout.unit().0), Some(ScaleCopies { scales, raw_scales, group_shift, n, origin: self.origin, cols: cfg.tn }))
            }
            (Source::Packed { .. }, None) => unreachable!("a pipelined kernel declares the raw stages of packed weights"),
        };
        // Packed weights: the stage holds the slice's rows of units, as in
        // memory ([tk / 8][tn] words in seed 002's layout, one row of
        // 8 · tn words in fragment order).
        let (rows, cols, ld, vec) = match self.source {
            Source::Values { .. } => (self.slice.0, self.slice.1, self.slice.1 + PAD, VEC),
            Source::Packed { layout, .. } => (cfg.tk / layout.unit().0, layout.stride(cfg.tn), layout.stride(cfg.tn), 1),
        };
        let per_row = cols / elems;
        let count = rows * per_row;
        let copies = (0..count.div_ceil(threads))
            .map(|u| {
                // Item j = lid + u·threads at (r, c) of the slice; with
                // whole rows per round, r and c as lid's plus constants.
                let (r, column) = if threads.is_multiple_of(per_row) {
                    (lid / per_row + u * (threads / per_row), lid % per_row)
                } else {
                    let j = lid + u * threads;
                    (j / per_row, j % per_row)
                };
                let c = column * elems;
                let guard = ((u + 1) * threads > count).then(|| (lid + u * threads).lt(count));
                let (at, valid) = match self.source {
                    Source::Packed { layout, .. } => ((from / layout.unit().0 + r) * (self.shape.0 * layout.stride(1)) + self.origin * layout.stride(1) + c, Ex::from(true)),
                    Source::Values { .. } if self.k_is_row => ((self.base + (from + r) * self.shape.1 + self.origin + c) / VEC, Ex::from(true)),
                    // The whole-tile kernel's rows are all inside, unless ragged.
                    Source::Values { .. } if cfg.whole_tiles && !cfg.ragged_rows => ((self.base + (self.origin + r) * self.shape.1 + from + c) / VEC, Ex::from(true)),
                    Source::Values { .. } => {
                        let row = self.origin + r;
                        let valid = k.let_(&format!("{name}_valid{u}"), row.lt(self.shape.0));
                        ((self.base + min(row, self.shape.0 - 1u32) * self.shape.1 + from + c) / VEC, valid)
                    }
                };
                StagedCopy { src: k.let_(&format!("{name}_src{u}"), at), dst: r * (ld / vec) + column * (elems / vec), valid, guard }
            })
            .collect();
        let advance = k.let_(&format!("{name}_advance"), advance);
        SliceCopies { src, dst, count: elems / vec, stage_size: rows * ld / vec, advance, copies, scales, lid, threads }
    }

    /// Whether every copy of this operand's slices is whole and aligned:
    /// rows of whole 16-byte copies (values), or N a multiple of 8 (packed:
    /// 4 words or 8 scales per copy).
    fn copies_aligned(&self, cfg: &GemmConfig) -> Ex {
        match self.source {
            Source::Values { .. } => (self.shape.1 % cfg.copy_elems()).eq(0u32),
            Source::Packed { .. } => (self.shape.0 % 8u32).eq(0u32),
        }
    }

    /// Whether this threadgroup's slices lie inside the matrix across K
    /// (along M for A, N for B) and its stored rows are vector-aligned, so
    /// that every whole slice along K loads as vectors.
    fn inside_across_k(&self) -> Ex {
        let (rows, cols) = self.shape;
        let across = if self.k_is_row { (self.origin + self.slice.1).le(cols) } else { (self.origin + self.slice.0).le(rows) };
        across.and(self.rows_vector_aligned())
    }

    /// Whether the stored rows are vector-aligned (whole vectors along them).
    fn rows_vector_aligned(&self) -> Ex {
        (self.shape.1 % VEC).eq(0u32)
    }

    /// Whether the pipeline may stage this operand's slices: inside the
    /// matrix across K, or — for values stored with K along their rows (A,
    /// or B transposed) — with vector-aligned rows, the rows past the
    /// matrix zero-filled by their copies.
    fn pipelinable(&self) -> Ex {
        match self.source {
            Source::Values { .. } if !self.k_is_row => self.rows_vector_aligned(),
            _ => self.inside_across_k(),
        }
    }

    /// Loads this thread's share of the slice starting at `k0` along K into
    /// `regs`: as whole vectors or words (`vector_loads`: the caller knows
    /// the slice lies inside the matrix with vector-aligned rows), or
    /// element by element with zeros past the edges (packed: a whole word,
    /// zero past N). `tag` keeps the names of each use apart.
    #[allow(clippy::too_many_arguments)]
    fn fetch(&self, k: &mut KernelBuilder, tag: &str, cfg: &GemmConfig, regs: &[Var], k0: Ex, lid: Ex, threads: u32, vector_loads: bool) {
        let (rows, cols) = self.shape;
        let (row0, col0) = if self.k_is_row { (k0, self.origin) } else { (self.origin, k0) };
        let name = &format!("{tag}{}", self.name);
        let zero = lit(cfg.input.scalar(), 0.0);
        for (u, reg) in regs.iter().enumerate() {
            self.slot(k, &format!("{tag}load_"), u as u32, lid, threads, |k, r, c| {
                let (row, col) = (k.let_(&format!("{name}r{u}"), row0 + r), k.let_(&format!("{name}c{u}"), col0 + c));
                match self.source {
                    Source::Packed { words, .. } => {
                        // Word (col / 8, row) of the [K/8][N] layout.
                        let at = k.let_(&format!("{name}at{u}"), col / VALUES_PER_WORD as u32 * rows + row);
                        if vector_loads {
                            k.assign(*reg, words.get(at));
                        } else {
                            k.if_else(row.lt(rows).and(col.lt(cols)), |k| k.assign(*reg, words.get(at)), |k| k.assign(*reg, 0u32));
                        }
                    }
                    Source::Values { scalar, vector: view } => {
                        let at = k.let_(&format!("{name}at{u}"), self.base + row * cols + col);
                        if vector_loads {
                            k.assign(*reg, view.get(at / VEC));
                            return;
                        }
                        let parts: Vec<Var> = (0..VEC).map(|e| k.var(&format!("{name}e{u}_{e}"), zero)).collect();
                        for (e, part) in parts.iter().enumerate() {
                            let e = e as u32;
                            k.if_(row.lt(rows).and((col + e).lt(cols)), |k| k.assign(*part, scalar.get(at + e)));
                        }
                        let parts: Vec<Ex> = parts.iter().map(|p| p.get()).collect();
                        k.assign(*reg, vector(cfg.input.ty(VEC as u8), &parts));
                    }
                }
            });
        }
    }

    /// Writes the registers (the slice starting at `k0` along K) to the
    /// threadgroup slice, rows padded by [`PAD`], in whole vectors; packed
    /// words are dequantized on the way (value · the group's scale, zero
    /// past N), each into two vectors of its 8 consecutive K values.
    fn commit(&self, k: &mut KernelBuilder, tag: &str, regs: &[Var], k0: Ex, lid: Ex, threads: u32) {
        let ld = self.slice.1 + PAD;
        let name = &format!("{tag}{}", self.name);
        for (u, reg) in regs.iter().enumerate() {
            self.slot(k, &format!("{tag}store_"), u as u32, lid, threads, |k, r, c| {
                let at = (r * ld + c) / VEC;
                let Source::Packed { format, scales, group, .. } = self.source else {
                    k.store(self.staged.at(at), reg.get());
                    return;
                };
                let n = self.shape.0;
                let col = k.let_(&format!("{name}col{u}"), self.origin + r);
                let scale = k.var(&format!("{name}scale{u}"), 0.0f32);
                let inside = col.lt(n).and((k0 + c).lt(self.shape.1));
                k.if_(inside, |k| k.assign(scale, scales.get((k0 + c) / group * n + col).cast(Type::F32)));
                self.store_dequantized(k, &format!("{name}{u}"), format, r, c, reg.get(), scale.get());
            });
        }
    }

    /// Writes the 8 values of packed `word` (column `r`, K values `c …
    /// c + 7` of the slice), each times `scale` and rounded to f16, to the
    /// B slice as two vectors.
    #[allow(clippy::too_many_arguments)]
    fn store_dequantized(&self, k: &mut KernelBuilder, name: &str, format: Format, r: Ex, c: Ex, word: Ex, scale: Ex) {
        let at = (r * (self.slice.1 + PAD) + c) / VEC;
        let values = dequantized_halves(k, name, format, word, scale);
        let half4 = Type::vector(enigma_ir::Scalar::F16, VEC as u8);
        k.store(self.staged.at(at), vector(half4, &values[..4]));
        k.store(self.staged.at(at + 1u32), vector(half4, &values[4..]));
    }
}

/// The 8 values of packed `word` (seed 002's layout: nibble `j` is K value
/// `j` of the word), each decoded as `format`, times `scale` (f32) and
/// rounded to f16 — how both quantized GEMMs ([`QgemmConfig`] and
/// [`super::qgemm_fused`]) dequantize a weight. `name` names the local
/// holding the word's high bits.
pub(super) fn dequantized_halves(k: &mut KernelBuilder, name: &str, format: Format, word: Ex, scale: Ex) -> Vec<Ex> {
    let hi = k.let_(&format!("{name}hi"), word >> 12u32);
    (0..VALUES_PER_WORD as u32)
        .map(|j| {
            let v = match format {
                Format::Fp4 => fp4_code_value(nibble(word, j)),
                _ => int4_value(word, hi, j),
            };
            (v * scale).cast(Type::F16)
        })
        .collect()
}

/// The second pass of a split-K GEMM: `c(i) = alpha · Σ_s ws((b·splits + s)·mn
/// + j) + beta · c(i)` for element `j` of batch `b` (`i = b·mn + j`), the
/// splits summed in order, in f32; `c` in `output`'s type (read only where
/// `beta` is not zero). One thread per `width` consecutive elements of C
/// (1, or 4 with `ws` and `c` bound as 4-vectors: 16-byte loads of the
/// workspace), named `gemm_splitk_reduce_{output}` and `…_v4`.
///
/// Parameters: `ws` (f32, or `ws4`), `c` (or `c4`), `mn` (`m · n`),
/// `total` (`batch · m · n`), both counted in `width`s of elements,
/// `splits`, `alpha`, `beta`.
///
/// # Panics
/// When `width` is not 1 or 4.
pub fn splitk_reduce(output: DType, width: u8) -> Kernel {
    assert!(matches!(width, 1 | 4), "splitk_reduce takes 1 or 4 elements per thread, not {width}");
    let (name, suffix) = if width == 1 { (String::new(), "") } else { (width.to_string(), "_v4") };
    let mut k = KernelBuilder::new(format!("gemm_splitk_reduce_{output}{suffix}"));
    let ws = k.buffer(&format!("ws{name}"), Type::vector(Scalar::F32, width), Access::Read);
    let c = k.buffer(&format!("c{name}"), output.ty(width), Access::ReadWrite);
    let mn = k.value("mn", Type::U32);
    let total = k.value("total", Type::U32);
    let splits = k.value("splits", Type::U32);
    let alpha = k.value("alpha", Type::F32);
    let beta = k.value("beta", Type::F32);
    let i = k.let_("i", thread_position_in_grid().x());
    k.if_(i.lt(total), |k| {
        let base = k.let_("base", i / mn * splits * mn + i % mn);
        let sum = k.var("sum", ws.get(base));
        k.for_range("s", 1u32, splits, 1u32, |k, s| k.assign(sum, sum.get() + ws.get(base + s * mn)));
        let v = k.var("v", sum.get() * alpha);
        k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + load_f32(c, i) * beta));
        store_f32(k, c, i, v.get());
    });
    finish(k)
}

/// Threads per threadgroup of [`splitk_reduce`].
pub const REDUCE_THREADS: u32 = 256;

/// The dispatch of [`splitk_reduce`] over `total` threads (elements of C
/// over the kernel's width).
pub fn splitk_reduce_dispatch(total: u32) -> Dispatch {
    Dispatch::threadgroups([total.div_ceil(REDUCE_THREADS), 1, 1], REDUCE_THREADS)
}

/// `C = alpha·op(A)·op(B) + beta·C` in f64, row-major, `batch` times: the
/// reference. `a` is `[batch][m][k]` (or `[batch][k][m]` transposed), `b`
/// `[batch][k][n]` (or `[batch][n][k]`), `c` `[batch][m][n]` (read only when
/// `beta` is not zero; may be empty then).
#[allow(clippy::too_many_arguments)]
pub fn reference(cfg: &GemmConfig, a: &[f64], b: &[f64], c: &[f64], m: usize, n: usize, k: usize, batch: usize, alpha: f64, beta: f64) -> Vec<f64> {
    let mut out = vec![0.0; batch * m * n];
    for z in 0..batch {
        let (a, b, c) = (&a[z * m * k..], &b[z * k * n..], c.get(z * m * n..).unwrap_or(&[]));
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|p| {
                        let av = if cfg.trans_a { a[p * m + i] } else { a[i * k + p] };
                        let bv = if cfg.trans_b { b[j * k + p] } else { b[p * n + j] };
                        av * bv
                    })
                    .sum();
                let prior = if beta != 0.0 { beta * c[i * n + j] } else { 0.0 };
                out[z * m * n + i * n + j] = alpha * dot + prior;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_checked_with_the_numbers() {
        assert!(GemmConfig::new(DType::F16, DType::F32).check(MAX_THREADGROUP_MEMORY).is_ok());
        let too_big = GemmConfig { tm: 128, tn: 128, tk: 64, sg_rows: 2, sg_cols: 2, ..GemmConfig::new(DType::F32, DType::F32) };
        let err = too_big.check(MAX_THREADGROUP_MEMORY).unwrap_err().to_string();
        // (128 × (64 + 8) + 64 × (128 + 8)) f32 elements.
        assert!(err.contains("needs 71680 bytes of threadgroup memory (limit 32768)"), "{err}");
        let odd = GemmConfig { sg_rows: 3, ..GemmConfig::new(DType::F16, DType::F16) };
        assert!(odd.check(MAX_THREADGROUP_MEMORY).unwrap_err().to_string().contains("3×2 SIMD groups do not divide a 128×128 tile"));
        let cfg = GemmConfig::new(DType::F16, DType::F32);
        // 128 × (32 + 8) + 32 × (128 + 8) halves; a 64×64 f32 tile per SIMD group.
        assert_eq!((cfg.threads(), cfg.threadgroup_memory_bytes(), cfg.accumulators_per_lane()), (128, 18944, 128));
        assert_eq!(cfg.dispatch(100, 33, 2).size, [1, 1, 2]);
        let split = |t| cfg.with_threads(t).map(|c| (c.sg_rows, c.sg_cols));
        assert_eq!((split(128), split(256), split(1024)), (Ok((2, 2)), Ok((4, 2)), Ok((8, 4))));
        // One SIMD group holds at most a 64×64 tile.
        assert_eq!(cfg.with_threads(32).map(|c| (c.tm, c.tn)), Ok((64, 64)));
        assert!(split(96).unwrap_err().to_string().contains("96 threads are 3 SIMD groups"));
    }

    /// The quantized GEMM splits K above the GEMM's 32 rows only where its
    /// tiles leave most compute units idle, at most four ways.
    #[test]
    fn qgemm_splits_narrow_grids_up_to_128_rows() {
        let at = |m: u32, n: u32, k: u32| QgemmConfig::for_rows(Format::Int4, DType::F16, m).splits_for(m, n, k, 264);
        assert_eq!(at(16, 11008, 4096), QgemmConfig::for_rows(Format::Int4, DType::F16, 16).gemm().splits_for(16, 11008, 4096, 264));
        assert_eq!(at(64, 4096, 4096), 4);
        assert_eq!(at(128, 4096, 11008), 4);
        assert_eq!(at(64, 11008, 4096), 1);
        assert_eq!(at(256, 4096, 4096), 1);
    }

    /// Fragment order keeps each SIMD group's tile within its register
    /// budget and narrows the tile to divide N.
    #[test]
    fn fragment_order_narrows_tiles_to_fit_n_and_its_registers() {
        let wide = QgemmConfig::for_rows(Format::Int4, DType::F16, 128).in_layout(QuantLayout::Fragments, 11008);
        assert_eq!((wide.tm, wide.tn, wide.tk, wide.sg_rows, wide.sg_cols), (128, 128, 64, 2, 4));
        let narrow = QgemmConfig::for_rows(Format::Int4, DType::F16, 16).in_layout(QuantLayout::Fragments, 48);
        assert_eq!((narrow.tn, narrow.sg_cols), (16, 1));
    }

    /// The quantized GEMM declares the threadgroup memory its configuration
    /// reports, with and without the raw stages of the pipelined form.
    #[test]
    fn qgemm_memory_is_what_the_kernel_declares() {
        for (rows, stages) in [(16, 1), (16, 2), (64, 2), (128, 1)] {
            let cfg = QgemmConfig { stages, ..QgemmConfig::for_rows(Format::Int4, DType::F16, rows) };
            for cfg in [cfg, cfg.whole_tiles_for(rows, 128, 128), cfg.in_layout(QuantLayout::Fragments, 128).whole_tiles_for(rows, 128, 128)] {
                if cfg.check(u64::MAX).is_err() {
                    continue;
                }
                let declared: u64 = qgemm(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
                assert_eq!(cfg.threadgroup_memory_bytes(), declared, "{}", cfg.name());
            }
        }
        // The whole-tile kernel has no dequantized slice: 64 rows, two
        // stages of A (64 × 40 halves), words and scales.
        let whole = QgemmConfig { stages: 2, ..QgemmConfig::for_rows(Format::Fp4, DType::F16, 64) }.whole_tiles_for(64, 128, 128);
        assert!(whole.whole_tiles);
        assert_eq!(whole.threadgroup_memory_bytes(), 2 * 64 * 40 * 2 + 2 * (512 * 4 + 128 * 2));
        // 64 rows, two stages: A 2 × 64 × 40 halves, B 128 × 40 halves, and
        // per stage 4 × 128 words and 128 scales.
        let cfg = QgemmConfig { stages: 2, ..QgemmConfig::for_rows(Format::Fp4, DType::F16, 64) };
        assert_eq!(cfg.threadgroup_memory_bytes(), 2 * 64 * 40 * 2 + 128 * 40 * 2 + 2 * (512 * 4 + 128 * 2));
        assert!(cfg.check(32 * 1024).is_ok());
        let big = QgemmConfig { stages: 2, ..QgemmConfig::for_rows(Format::Fp4, DType::F16, 128) };
        assert!(big.check(32 * 1024).unwrap_err().to_string().contains("bytes of threadgroup memory (limit 32768)"));
        assert_eq!(QgemmConfig::for_rows(Format::Fp4, DType::F16, 128).pipelined_for(32 * 1024).stages, 1);
    }
}
