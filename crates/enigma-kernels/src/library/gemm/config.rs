//! The GEMM family's configurations: [`GemmConfig`] (the tile, its SIMD-group
//! grid, stages, K splits, edges) and [`QgemmConfig`] (the same over 4-bit
//! weights), each with its checks, name, threadgroup memory and dispatch,
//! and the limits they are checked against.

use crate::library::quant::{Format, VALUES_PER_WORD};
use crate::library::split::*;
use crate::library::tile::{GemmTile, ThreadgroupLimits, TileShape};
use crate::library::*;
use enigma_analysis::tiles::BStaging;
use crate::library::tile::select_tile;
use enigma_ir::{MatrixType, QuantLayout};

/// Elements of padding after each row of a staged slice (the planner's
/// [`enigma_analysis::tiles::STAGED_PAD`]).
pub const PAD: u32 = enigma_analysis::tiles::STAGED_PAD;

/// The most rows of C for which the tensor-core GEMMs split K
/// ([`GemmConfig::splits_for`], and through it the quantized GEMM's; the
/// fused variant's): up to 32 rows the split pays, from 64 it no longer
/// does (`BENCHMARKS.md`, split-K over M; the fused variant was not
/// measured there). The SIMT
/// f32 GEMM has its own limit ([`crate::library::sgemm::SIMT_SPLIT_K_MAX_ROWS`]).
pub const SPLIT_K_MAX_ROWS: u32 = 32;

/// Elements each thread moves per vector load when staging a slice.
pub(super) const VEC: u32 = 4;

/// Bytes of one asynchronous copy when a pipelined kernel stages a slice
/// (`cp.async`'s largest).
pub(super) const COPY_BYTES: u32 = 16;

/// K values per slice the quantized GEMM takes (its tile's `tk`): 32
/// divides every group size, 64 the larger two (the GEMM's slices are at
/// most 64 deep).
pub const QGEMM_SLICE_DEPTHS: [u32; 2] = [32, 64];

/// The stages [`GemmConfig::pipelined_for`] and [`QgemmConfig::pipelined_for`]
/// aim for (fewer where they do not fit): four were faster than three for
/// every whole-tile GEMM measured, and the quantized GEMM ran the same with
/// either (`BENCHMARKS.md`, GEMM stages).
pub const DEFAULT_STAGES: u32 = 4;

/// The most stages, from [`DEFAULT_STAGES`] down to two, whose threadgroup
/// memory (`bytes(stages)`) fits `max_threadgroup_memory_bytes`: the one
/// rule of both GEMMs' `pipelined_for`.
pub(crate) fn stages_that_fit(bytes: impl Fn(u32) -> u64, max_threadgroup_memory_bytes: u64) -> Option<u32> {
    (2..=DEFAULT_STAGES).rev().find(|&stages| bytes(stages) <= max_threadgroup_memory_bytes)
}

/// `asked` stages where their threadgroup memory (`bytes(stages)`) fits
/// `max_threadgroup_memory_bytes`, else `None`; without `asked`,
/// [`stages_that_fit`]'s: the one rule of the cooperative GEMMs' choice.
pub(crate) fn asked_or_fitting_stages(asked: Option<u32>, bytes: impl Fn(u32) -> u64, max_threadgroup_memory_bytes: u64) -> Option<u32> {
    match asked {
        Some(s) => Some(s).filter(|&s| bytes(s) <= max_threadgroup_memory_bytes),
        None => stages_that_fit(bytes, max_threadgroup_memory_bytes),
    }
}

/// The most slices of K a pipelined kernel keeps in threadgroup memory: it
/// waits with `stages − 2` groups of copies still in flight, and the IR
/// allows at most [`enigma_ir::limits::MAX_ASYNC_PENDING`].
pub const MAX_STAGES: u32 = enigma_ir::limits::MAX_ASYNC_PENDING + 2;

/// Which shapes a GEMM kernel takes, and so which edge paths it compiles
/// in. The whole-tile kernels are kept apart from the general one because
/// the edge paths cost the pipeline its speed when they are in the same
/// kernel, even unrun (`BENCHMARKS.md`, whole tiles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Edges {
    /// Any `m × n × k`: tiles at the matrices' edges take bounds-checked
    /// paths (the general kernel).
    #[default]
    Checked,
    /// Only shapes the tile divides ([`GemmConfig::whole_tiles_for`]): every
    /// threadgroup runs the pipeline over whole slices and stores its tile
    /// whole, with no edge paths compiled in. Pipelined (two stages or
    /// more). A dispatch whose shape the tile does not divide leaves C
    /// untouched: plan through [`GemmConfig::whole_tiles_for`] (`gemm::select`
    /// does).
    WholeTiles,
    /// [`Edges::WholeTiles`] for shapes whose M need not be a multiple of
    /// `tm` (A untransposed): A's rows past M are copied as zeros and the
    /// last row of tiles is stored element by element, rows past M skipped.
    /// A variant of its own: the row tests slow the divided shapes down
    /// (`BENCHMARKS.md`, whole tiles).
    RaggedRows,
}

impl Edges {
    /// Whether the kernel is a whole-tile one (either variant).
    pub fn whole_tiles(self) -> bool {
        !matches!(self, Edges::Checked)
    }

    /// The kernel names' mark: `_whole`, `_whole_ragged`, nothing for the
    /// general kernel.
    pub(super) fn suffix(self) -> &'static str {
        match self {
            Edges::Checked => "",
            Edges::WholeTiles => "_whole",
            Edges::RaggedRows => "_whole_ragged",
        }
    }
}

/// One GEMM kernel's shape and types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    pub input: DType,
    pub output: DType,
    /// The tile of C per threadgroup and its SIMD-group grid.
    pub tile: GemmTile,
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
    /// Which shapes the kernel takes: any, or only those the tile divides
    /// (along M too, or not: [`Edges`]).
    pub edges: Edges,
    /// `bias[row]` (`m` values of the inputs' type) added to each row of C
    /// before it is rounded, unsplit only: a convolution's bias per output
    /// channel.
    pub row_bias: bool,
}

impl GemmConfig {
    /// The default tile for the input type: 128×128×32 over 2×2 SIMD groups
    /// (64×64 each, the fastest of the tile sweep in `BENCHMARKS.md`)
    /// for 16-bit inputs, 64×64×32 over 2×2 for f32 (whose slices take twice
    /// the threadgroup memory).
    pub fn new(input: DType, output: DType) -> GemmConfig {
        let side = if input == DType::F32 { 64 } else { 128 };
        let tile = GemmTile::new(side, side, 32, 2, 2);
        GemmConfig { input, output, tile, trans_a: false, trans_b: false, splits: 1, split_sum: SplitSum::Reduction, stages: 1, edges: Edges::Checked, row_bias: false }
    }

    /// This configuration as the whole-tile kernel ([`Edges::WholeTiles`])
    /// where an `m × n × k` product allows it: pipelined (two or more
    /// stages) and `n`, `k` multiples of `tn`, `tk` — which also makes every
    /// slice's rows whole 16-byte copies inside the matrices — and `m` a
    /// multiple of `tm`, or (A untransposed) [`Edges::RaggedRows`].
    /// Otherwise unchanged.
    pub fn whole_tiles_for(self, m: u32, n: u32, k: u32) -> GemmConfig {
        let TileShape { m: tm, n: tn, k: tk } = self.tile.shape;
        let rows_divide = m.is_multiple_of(tm);
        let fits = self.stages >= 2 && (rows_divide || !self.trans_a) && n.is_multiple_of(tn) && k.is_multiple_of(tk);
        if self.edges.whole_tiles() || !fits {
            return self;
        }
        GemmConfig { edges: if rows_divide { Edges::WholeTiles } else { Edges::RaggedRows }, ..self }
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
    pub(super) fn copy_elems(&self) -> u32 {
        COPY_BYTES / self.input.size_bytes()
    }

    /// The configuration of a planner tile ([`GemmTile`]: the tuner's
    /// candidates and `select_tile`'s choice), untransposed, unsplit.
    pub fn from_tile(tile: GemmTile, input: DType, output: DType) -> GemmConfig {
        GemmConfig { tile, ..GemmConfig::new(input, output) }
    }

    /// K splits for an `m × n × k` product on this tile ([`k_splits_for`]).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, threadgroups: u32) -> u32 {
        k_splits_for(self.tile.shape, m, n, k, threadgroups, SPLIT_K_MAX_ROWS)
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
        let shape = TileShape { m: self.tile.shape.m.min(side * sg_rows), n: self.tile.shape.n.min(side * sg_cols), ..self.tile.shape };
        let tile = GemmTile { shape, sg_rows, sg_cols };
        let cfg = GemmConfig { tile, ..self };
        cfg.check(u64::MAX)?;
        Ok(cfg)
    }

    pub fn threads(&self) -> u32 {
        self.tile.threads()
    }

    /// The staged slices of A and B as stored: (rows, columns) each.
    pub(super) fn slices(&self) -> [(u32, u32); 2] {
        let a = if self.trans_a { (self.tile.shape.k, self.tile.shape.m) } else { (self.tile.shape.m, self.tile.shape.k) };
        let b = if self.trans_b { (self.tile.shape.n, self.tile.shape.k) } else { (self.tile.shape.k, self.tile.shape.n) };
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
    pub(super) fn packed_staging(&self) -> BStaging {
        BStaging::Packed { dequantized_slice: !self.edges.whole_tiles() }
    }

    /// Threadgroup memory with B of values or of 4-bit words as `b_staging`
    /// says: a pipelined kernel with packed weights keeps `stages` copies of
    /// A's slice and of the slice's words and scales, and maybe one slice of
    /// B dequantized ([`GemmConfig::packed_staging`]).
    pub(super) fn memory_bytes(&self, b_staging: BStaging) -> u64 {
        let [a, b] = self.slices();
        let (a_bytes, b_bytes) = enigma_analysis::tiles::staged_gemm_memory(a, b, self.input.size_bytes(), self.stages, b_staging);
        a_bytes.saturating_add(b_bytes)
    }

    /// Per stage of a pipelined kernel with packed weights: the slice's
    /// words (`tk / 8` rows of `tn`, as in memory) and its `tn` scales.
    pub(super) fn packed_stage_elems(&self) -> (u32, u32) {
        (self.tile.shape.k / VALUES_PER_WORD as u32 * self.tile.shape.n, self.tile.shape.n)
    }

    /// f32 accumulator elements each lane holds.
    pub fn accumulators_per_lane(&self) -> u32 {
        (self.tile.shape.m / self.tile.sg_rows) * (self.tile.shape.n / self.tile.sg_cols) / SIMD_WIDTH
    }

    /// The K extent of one matrix multiply: 16 (the tensor cores' step) where
    /// `tk` allows, else 8.
    pub(super) fn k_step(&self) -> u32 {
        if self.tile.shape.k.is_multiple_of(16) {
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
        let (sm, sn) = simdgroup_tiles(&name, (self.tile.shape.m, self.tile.shape.n), (self.tile.sg_rows, self.tile.sg_cols))?;
        if !(side(sm) && side(sn) && side(self.tile.shape.k)) {
            return Err(ShapeError::new(
                name,
                format!("SIMD-group tiles of {sm}×{sn} and a K step of {} must be multiples of 8 up to 64", self.tile.shape.k),
            ));
        }
        check_threads(&name, self.threads())?;
        if !(1..=MAX_STAGES).contains(&self.stages) {
            return Err(ShapeError::new(name, format!("{} stages; between 1 and {MAX_STAGES}", self.stages)));
        }
        if self.edges.whole_tiles() && self.stages < 2 {
            return Err(ShapeError::new(name, "the whole-tile kernel is pipelined: it takes 2 stages or more".to_string()));
        }
        if self.edges == Edges::RaggedRows && self.trans_a {
            return Err(ShapeError::new(name, "ragged rows are a variant of the whole-tile kernel with A untransposed".to_string()));
        }
        if self.row_bias && self.splits > 1 {
            return Err(ShapeError::new(name, format!("a row bias with {} K splits; the bias is added by an unsplit kernel's epilogue", self.splits)));
        }
        check_splits_and_memory(&name, self.splits, self.threadgroup_memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// `gemm_{in}_{out}_{tm}x{tn}x{tk}_sg{r}x{c}[_ta][_tb][_splitk[_sum]][_s{stages}][_whole[_ragged]][_bias]`.
    pub fn name(&self) -> String {
        format!(
            "gemm_{}_{}_{}x{}x{}_sg{}x{}{}{}{}{}{}{}",
            self.input,
            self.output,
            self.tile.shape.m,
            self.tile.shape.n,
            self.tile.shape.k,
            self.tile.sg_rows,
            self.tile.sg_cols,
            if self.trans_a { "_ta" } else { "" },
            if self.trans_b { "_tb" } else { "" },
            split_suffix(self.splits, self.split_sum),
            if self.stages > 1 { format!("_s{}", self.stages) } else { String::new() },
            self.edges.suffix(),
            if self.row_bias { "_bias" } else { "" }
        )
    }

    /// The dispatch for an `m × n` result, `batch` times (times the splits).
    pub fn dispatch(&self, m: u32, n: u32, batch: u32) -> Dispatch {
        Dispatch::threadgroups([n.div_ceil(self.tile.shape.n), m.div_ceil(self.tile.shape.m), batch * self.splits.max(1)], self.threads())
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
/// once; 64×32 (2×4 SIMD groups) measured faster than 64×64 (2×2) at
/// M = 128 (`BENCHMARKS.md`, quantized GEMM in fragment order).
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
/// [`crate::library::qmatmul::DECODE_ROWS`] rows.
///
/// Parameters: `a, b, c, m, n, k, group, scales, a4` (`a4` the `half4`
/// view of `a`; `b` the packed words; `group` K values per scale, a power of two that the slice depth divides: [`QgemmConfig::check_group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QgemmConfig {
    pub format: Format,
    /// How the packed words lie: seed 002's `[K/8][N]`, or fragment order
    /// ([`QuantLayout::Fragments`], from [`crate::library::quant::QuantizedMatrix::packed_in`]),
    /// which the pipelined whole-tile kernel alone takes: 64-deep slices,
    /// each SIMD group's B tile (64 × a multiple of 16) decoded at once from
    /// 16-byte loads of the staged words.
    pub layout: QuantLayout,
    /// The GEMM that stages the slices: f16 A, B read transposed
    /// ([`QgemmConfig::check`] holds it to that), its tile `tk` one of
    /// [`QGEMM_SLICE_DEPTHS`] dividing the group, and its stages, K splits,
    /// their sum, edges and output type the quantized kernel's. With 2
    /// stages or more, A's slices, the packed words and their scales go to
    /// threadgroup memory by asynchronous copies, and each B tile is
    /// decoded from the staged words by its load (the dequantized slice
    /// then serves only edge tiles).
    pub gemm: GemmConfig,
}

impl QgemmConfig {
    /// The configuration of a planner tile (its `tm × tn × tk` and
    /// SIMD-group grid), seed 002's layout, unsplit and unpipelined.
    pub fn from_tile(format: Format, output: DType, tile: GemmTile) -> QgemmConfig {
        let gemm = GemmConfig { trans_b: true, ..GemmConfig::from_tile(tile, DType::F16, output) };
        QgemmConfig { format, layout: QuantLayout::Rows, gemm }
    }

    /// The tile for `m` rows: `select_tile`'s for 16-bit inputs at
    /// the portable limits (16, 32, 64 or 128 rows by 128 columns), slices
    /// of the first of [`QGEMM_SLICE_DEPTHS`].
    pub fn for_rows(format: Format, output: DType, m: u32) -> QgemmConfig {
        let tile = select_tile(m, u32::MAX, 0, 2, &ThreadgroupLimits::PORTABLE);
        QgemmConfig::from_tile(format, output, GemmTile { shape: TileShape { k: QGEMM_SLICE_DEPTHS[0], ..tile.shape }, ..tile })
    }

    /// The tile's shape and SIMD-group grid.
    pub fn tile(&self) -> GemmTile {
        self.gemm.tile
    }

    /// This configuration with its GEMM's parts changed by `change`.
    pub fn with_gemm(self, change: impl FnOnce(GemmConfig) -> GemmConfig) -> QgemmConfig {
        QgemmConfig { gemm: change(self.gemm), ..self }
    }

    /// This configuration with `stages` stages.
    pub fn with_stages(self, stages: u32) -> QgemmConfig {
        self.with_gemm(|g| GemmConfig { stages, ..g })
    }

    /// The configuration with slices of 64 K values where they divide the
    /// group and two stages of them fit `max_threadgroup_memory_bytes` (the
    /// pipeline matters more), else unchanged: half the loop and barrier
    /// overhead per weight (`BENCHMARKS.md`, slices of 64 K values).
    pub fn deepened_for(self, group: u32, max_threadgroup_memory_bytes: u64) -> QgemmConfig {
        let depth = QGEMM_SLICE_DEPTHS[QGEMM_SLICE_DEPTHS.len() - 1];
        let deep = self.with_gemm(|g| GemmConfig { tile: GemmTile { shape: TileShape { k: depth, ..g.tile.shape }, ..g.tile }, ..g });
        let two_stages = deep.with_stages(2).threadgroup_memory_bytes();
        if group.is_multiple_of(depth) && two_stages <= max_threadgroup_memory_bytes {
            deep
        } else {
            self
        }
    }

    /// Checks that the kernel takes groups of `group` K values: the slice
    /// lies inside one group.
    pub fn check_group(&self, group: u32) -> Result<(), ShapeError> {
        let tk = self.gemm.tile.shape.k;
        if group == 0 || !group.is_multiple_of(tk) {
            return Err(ShapeError::new(self.name(), format!("slices of {tk} K values must divide the group of {group}")));
        }
        if !group.is_power_of_two() {
            return Err(ShapeError::new(self.name(), format!("the group of {group} K values is not a power of two (the pipelined kernel finds a slice's scales by a shift)")));
        }
        Ok(())
    }

    /// Checks the tile (as [`GemmConfig::check`]), the format, the staging
    /// GEMM's operands (f16 A, B transposed), and the threadgroup memory
    /// against `max_threadgroup_memory_bytes` (the device's; `u64::MAX`
    /// checks the shape alone).
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let g = &self.gemm;
        if !matches!(self.format, Format::Fp4 | Format::Int4) {
            return Err(ShapeError::new(self.name(), format!("takes fp4 or int4 weights in seed 002's layout, not {}", self.format)));
        }
        if g.input != DType::F16 || g.trans_a || !g.trans_b {
            return Err(ShapeError::new(self.name(), format!("stages f16 A untransposed and B transposed (not {} A{}, B{})", g.input, if g.trans_a { " transposed" } else { "" }, if g.trans_b { " transposed" } else { " untransposed" })));
        }
        if !QGEMM_SLICE_DEPTHS.contains(&g.tile.shape.k) {
            return Err(ShapeError::new(self.name(), format!("slices of {} K values; one of {QGEMM_SLICE_DEPTHS:?}", g.tile.shape.k)));
        }
        if self.layout == QuantLayout::Fragments {
            let ((unit_rows, unit_cols), sn) = (self.layout.unit(), g.tile.shape.n / g.tile.sg_cols.max(1));
            let problems: Vec<String> = [
                (g.tile.shape.k != unit_rows).then(|| format!("slices of {unit_rows} K values (not {})", g.tile.shape.k)),
                (!sn.is_multiple_of(unit_cols)).then(|| format!("SIMD-group tiles a multiple of {unit_cols} columns wide (not {sn})")),
                (g.stages < 2).then(|| format!("2 stages or more (not {})", g.stages)),
                (!g.edges.whole_tiles()).then(|| "the whole-tile kernel (a shape the tile divides along N and K)".to_string()),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !problems.is_empty() {
                return Err(ShapeError::new(self.name(), format!("fragment-ordered weights take {}", problems.join(", "))));
            }
        }
        g.check(u64::MAX)?;
        check_splits_and_memory(&self.name(), g.splits, self.threadgroup_memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// Threadgroup memory: A's slices, the general kernel's dequantized B
    /// slice (the whole-tile kernel decodes from the staged words and has
    /// none), and with stages the packed words and scales of each stage.
    pub fn threadgroup_memory_bytes(&self) -> u64 {
        self.gemm.memory_bytes(self.gemm.packed_staging())
    }

    /// [`DEFAULT_STAGES`] pipelined stages where they fit
    /// `max_threadgroup_memory_bytes`, else two where those fit, else
    /// unchanged (as [`GemmConfig::pipelined_for`]).
    pub fn pipelined_for(self, max_threadgroup_memory_bytes: u64) -> QgemmConfig {
        let stages = stages_that_fit(|stages| self.with_stages(stages).threadgroup_memory_bytes(), max_threadgroup_memory_bytes);
        self.with_stages(stages.unwrap_or(self.gemm.stages))
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
        let mut tile = GemmTile { shape: TileShape { k: unit_rows, ..self.gemm.tile.shape }, ..self.gemm.tile };
        while !n.is_multiple_of(tile.shape.n) && tile.shape.n > unit_cols {
            tile.shape.n /= 2;
            if tile.shape.n / tile.sg_cols < unit_cols && tile.sg_cols > 1 {
                tile.sg_cols /= 2;
            }
        }
        while (tile.shape.m / tile.sg_rows) * (tile.shape.n / tile.sg_cols) > FRAGMENT_ORDER_SIMDGROUP_TILE {
            if tile.shape.n / tile.sg_cols >= 2 * unit_cols {
                tile.sg_cols *= 2;
            } else if tile.shape.m / tile.sg_rows > 16 {
                tile.sg_rows *= 2;
            } else {
                break;
            }
        }
        QgemmConfig { layout, ..self.with_gemm(|g| GemmConfig { tile, ..g }) }
    }

    /// K splits for an `m × n × k` product: the GEMM's rule
    /// ([`GemmConfig::splits_for`]) up to [`SPLIT_K_MAX_ROWS`] rows; up to
    /// [`QGEMM_SPLIT_K_MAX_ROWS`] rows, where the tiles would fill at most
    /// half the `threadgroups / 2` compute units, the same rule at most
    /// [`QGEMM_WIDE_SPLITS`] ways. The weights are read once whatever M is,
    /// so a grid of few tiles leaves most of the GPU idle; where the tiles
    /// fill more than half the units, splits were as often slower as faster
    /// (`BENCHMARKS.md`, quantized GEMM split over M).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, threadgroups: u32) -> u32 {
        let tile = self.gemm.tile.shape;
        let TileShape { m: tm, n: tn, .. } = tile;
        if m <= SPLIT_K_MAX_ROWS {
            return k_splits_for(tile, m, n, k, threadgroups, SPLIT_K_MAX_ROWS);
        }
        let tiles = m.div_ceil(tm).max(1) * n.div_ceil(tn).max(1);
        if tiles.saturating_mul(4) > threadgroups {
            return 1;
        }
        k_splits_for(tile, m, n, k, threadgroups, QGEMM_SPLIT_K_MAX_ROWS).min(QGEMM_WIDE_SPLITS)
    }

    /// This configuration as the whole-tile kernel where an `m × n × k`
    /// product allows it (the rule of [`GemmConfig::whole_tiles_for`]).
    pub fn whole_tiles_for(self, m: u32, n: u32, k: u32) -> QgemmConfig {
        self.with_gemm(|g| g.whole_tiles_for(m, n, k))
    }

    /// `qgemm_{format}_{out}_{tm}x{tn}[x{tk}]_sg{r}x{c}[_splitk[_sum]][_s{stages}][_whole[_ragged]][_fragments]`
    /// (`tk` named where it is not 32).
    pub fn name(&self) -> String {
        let g = &self.gemm;
        let GemmTile { shape: TileShape { m: tm, n: tn, k: tk }, sg_rows, sg_cols } = g.tile;
        let split = split_suffix(g.splits, g.split_sum);
        let stages = if g.stages > 1 { format!("_s{}", g.stages) } else { String::new() };
        let depth = if tk == QGEMM_SLICE_DEPTHS[0] { String::new() } else { format!("x{tk}") };
        let whole = g.edges.suffix();
        let layout = if self.layout == QuantLayout::Fragments { "_fragments" } else { "" };
        format!("qgemm_{}_{}_{tm}x{tn}{depth}_sg{sg_rows}x{sg_cols}{split}{stages}{whole}{layout}", self.format, g.output)
    }

    /// The dispatch for an `m × n` result.
    pub fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        self.gemm.dispatch(m, n, 1)
    }
}

/// The most 32-bit registers per lane that double-buffered tiles of an odd
/// number of K steps per slice may take, counting two sets of A and B tiles
/// and the accumulator (two 16-bit or one 32-bit element a register):
/// beyond it the kernel would spill or lose occupancy. The quantized GEMM's
/// 16 × 128 tile in fragment order (one 64-deep step per slice, 112
/// registers by this count) gains from the second buffer
/// (`BENCHMARKS.md`, double-buffered tiles); a 64 × 32 SIMD-group tile
/// (256) keeps one buffer.
pub const DOUBLE_BUFFER_REGISTERS: u32 = 128;

/// The kernel names' mark of a K split: `_splitk`, `_splitk_sum` where the
/// kernel sums the splits itself, nothing unsplit.
pub(super) fn split_suffix(splits: u32, sum: SplitSum) -> &'static str {
    match (splits > 1, sum) {
        (false, _) => "",
        (true, SplitSum::Reduction) => "_splitk",
        (true, SplitSum::LastThreadgroup) => "_splitk_sum",
    }
}

/// Each SIMD group's share `(tm / sg_rows, tn / sg_cols)` of a `tm × tn`
/// tile over a `sg_rows × sg_cols` grid, checked: the grid's sides nonzero
/// and dividing the tile's.
pub(crate) fn simdgroup_tiles(name: &str, (tm, tn): (u32, u32), (sg_rows, sg_cols): (u32, u32)) -> Result<(u32, u32), ShapeError> {
    if sg_rows == 0 || sg_cols == 0 || !tm.is_multiple_of(sg_rows) || !tn.is_multiple_of(sg_cols) {
        return Err(ShapeError::new(name, format!("{sg_rows}×{sg_cols} SIMD groups do not divide a {tm}×{tn} tile")));
    }
    Ok((tm / sg_rows, tn / sg_cols))
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
