//! The quantized GEMM on cooperative tensors: `C[M, N] = A[M, K] ·
//! dequant(B)`, A f16 (row-major), B FP4 or INT4 in seed 002's `[K/8][N]`
//! layout or in the tensor cores' fragment order
//! ([`CoopQgemmConfig::layout`]) with an f16 scale per group of K values
//! (`[K/group][N]`), or MLX's affine weights (below), f32 accumulation, C
//! f16 or f32. Any M; N a multiple of 8 (16-byte copies of the scales); K
//! a multiple of the group, as every quantized matmul.
//!
//! **MLX's affine weights** (`mlx_affine`: `[N][K/8]` words of unsigned
//! nibbles, `[N][K/group]` f16 scales and biases, each weight `code ·
//! scale + bias`; N a multiple of the tile's columns and K of its slice,
//! [`CoopQgemmConfig::takes_affine`]): a slice's words are the tile's `tn`
//! columns of `tk / 8` words, one box (or the threads' copies) from
//! `[N][K/8]`. A slice's scales and biases are one to four values per
//! column, too narrow a row for a copy, so the threads stage them: each
//! loads its share of the next slice's into registers during the current
//! slice and stores it after the product into the buffer of that slice's
//! parity (two buffers each), which the next iteration's barrier hands to
//! the decode. Read from the buffers by the decode instead, they ran at
//! 67 µs where staged they run at 29 (16 rows of 11008 × 4096 on the H200,
//! `BENCHMARKS.md`). The decode is `cooperative_dequantize` with the
//! unsigned code, MLX's columns layout and the biases: on CUDA one
//! `__hfma2` per pair of weights in place of the scaling `__hmul2`.
//!
//! **Fragment order** (`_fragments`; K a multiple of 64, N of 16, the
//! layout's units): a slice's words are `tk / 64` rows of units, each the
//! tile's `8 · tn` consecutive words, which the threads' copies stage as
//! they are and tile copies as one box per row of units in B viewed as
//! rows of [`FRAGMENT_BOX_WORDS`] (so N a multiple of 32 and `tk` dividing
//! K: every box starts inside B; [`CoopQgemmConfig::takes_fragments`], the
//! selection's checks). The decode then loads a thread's four words of a
//! unit at once (`cooperative_dequantize` in fragment order).
//!
//! **Computed transposed**, `Cᵀ = dequant(B)ᵀ · Aᵀ`: the weights are the
//! product's left operand and A its right one. A threadgroup of `tn / 64`
//! warpgroups computes a `tm × tn` tile of C (`tm` rows of A, `tn` columns
//! of B) as the `tn × tm` product of one `matmul2d(tn, tm, tk)` per slice
//! of `tk` K values. The weights' side is always whole 64-row slices of the
//! product, so a few rows of A cost a narrow product (`tm` from 8), not a
//! 64-row one, and the scope dequantizes each slice of weights straight
//! into an f16 cooperative tensor (`cooperative_dequantize`: each weight
//! times its scale rounded once to f16, as every quantized GEMM rounds
//! it) — the left operand, which on CUDA `wgmma` reads from registers as
//! it is (the accumulator's fragment layout, where each thread decodes two
//! K-adjacent weights of one word with one f16-pair multiply by their
//! scales) — with no decoded copy in threadgroup memory and no barrier
//! between decoding and product.
//!
//! Per slice, 16-byte asynchronous copies bring A's `tm × tk` values (zeros
//! past M and K), the slice's `tk / 8 × tn` packed words (as they lie in
//! memory: a row of words is `tn` consecutive words) and the `tk / 32 × tn`
//! scales of the groups the slice can touch into `stages` stages of
//! threadgroup memory (zeros past N and K) — or, with
//! [`CoopQgemmConfig::tile_copies`] (the default where products are
//! `wgmma`), three tile copies of those boxes, each stage's on its own
//! barrier (on CUDA the tensor copy engine: one thread's instructions, not
//! every thread's copies and their address arithmetic). After the slice's barrier the
//! scope dequantizes the stage into the weights' tensor (K value `c` of
//! weight column `r`: nibble `c % 8` of word `(c / 8, r)` times its group's
//! scale), and the product multiplies it with the staged A (K-major,
//! `transpose_right`). The copies
//! run `stages − 1` slices ahead: the stage refilled after slice `t`'s
//! barrier is slice `t − 1`'s, whose product and decoding that barrier
//! ended.
//!
//! The walk over C's tiles is the cooperative GEMM's
//! ([`super::gemm::cooperative`]: bands of `raster` rows of tiles). The
//! epilogue stores each slot at its coordinates, transposed (`tm` rows of
//! C, elements past M or N skipped). K splits over the grid's z
//! ([`CoopQgemmConfig::splits`]), each split's partial product f32 in a
//! workspace that [`super::split::splitk_reduce`] sums or, with
//! [`SplitSum::LastThreadgroup`], the last of a tile's threadgroups
//! (`split::SplitTile`).
//!
//! **Chosen** by the family's selection (`qmatmul::kernel_for`) at
//! `qmatmul::cooperative_rows` where the device's cooperative
//! products are `wgmma`, and wherever asked for
//! ([`crate::library::select::GemmOptions::cooperative`] `Some(true)`).
//!
//! Parameters: `a, b, c, m, n, k, group, scales` (`b` the packed words,
//! `group` K values per scale: 32, 64 or 128).

use super::gemm::cooperative::{for_each_slot, raster_walk, slice_view, Staging, COPY_ELEMENTS, DEFAULT_RASTER, WARPGROUP_ROWS};
use super::gemm::{asked_or_fitting_stages, MatrixArgs, PackedArgs, MAX_STAGES};
use super::quant::{Format, GROUPS, VALUES_PER_WORD};
use super::split::{check_splits_and_memory, k_splits_for, split_range, SplitArgs, SplitSum, SplitTile};
use super::tile::TileShape;
use super::*;
use enigma_ir::builder::Matmul2d;
use enigma_ir::limits::TILE_BARRIERS;
use enigma_ir::{Access, ExecutionScope, Matmul2dDescriptor, Matmul2dMode, QuantLayout, Scalar};

/// Packed words per 16-byte copy.
pub const WORDS_PER_COPY: u32 = 4;

/// Words per row of the view of fragment-ordered words that tile copies
/// take (a box is at most [`enigma_ir::limits::MAX_TILE_BOX`] wide).
pub const FRAGMENT_BOX_WORDS: u32 = 256;

/// K values of a slice by default: a multiple of 64 (the staged A's pitch,
/// which `wgmma` needs) dividing or divided by each group.
pub const SLICE_DEPTH: u32 = 64;

/// The slice depths a tile may take: each a multiple of 64 dividing or
/// divided by each group.
pub const SLICE_DEPTHS: [u32; 2] = [SLICE_DEPTH, 128];

/// The rows of C (of A) a tile may take: the product's width, from 8.
pub const COOP_QGEMM_ROWS: [u32; 6] = [8, 16, 32, 64, 128, 256];

/// The columns of C (of the weights) a tile may take: one or two
/// warpgroups of 64.
pub const COOP_QGEMM_COLUMNS: [u32; 2] = [64, 128];

/// The fewest rows of a tile that [`CoopQgemmConfig::for_problem`] gives
/// two warpgroups' columns, staged by each thread's copies: each stage of
/// A then serves 128 columns of weights, not 64. On the H200 (11008 × 4096
/// INT4, group 128, 3 K splits, `BENCHMARKS.md`) 128 × 128 ran 38.6 µs
/// against 128 × 64's 43.2, and at 64 and 16 rows the wider tile gained
/// nothing (30.7 against 30.6, 24.5 against 24.0).
pub const WIDE_TILE_ROWS: u32 = 128;

/// [`WIDE_TILE_ROWS`] where the stages are tile copies: at 64 rows two
/// warpgroups' columns (128-deep slices) ran 27.0–27.2 µs against one
/// warpgroup's 29.7 (INT4) and 33.5 against 35.7 (FP4) on the H200, as
/// the copies no longer cost the threads (`BENCHMARKS.md`).
pub const WIDE_TILE_ROWS_TILE_COPIES: u32 = 64;

/// Below 128 rows [`CoopQgemmConfig::for_problem`] takes slices of this
/// depth (where they fit): half the barriers and waits per K value. On the
/// H200 (11008 × 4096 INT4, group 128, 3 K splits, two calls,
/// `BENCHMARKS.md`) 128-deep slices ran 22.3, 29.9–30.3 and 30.0–30.1 µs at
/// 16, 48 and 64 rows against 64-deep ones' 23.7–23.9, 30.5–30.9 and
/// 30.7; at 128 rows (on 128 columns) 42.2 against 38.3, so there 64 (with
/// tile copies 42.8 against 35.3).
pub const NARROW_TILE_DEPTH: u32 = 128;

/// SIMD groups per compute unit the K split aims for
/// ([`CoopQgemmConfig::splits_for`]): three threadgroups of one warpgroup,
/// or one and a half of two.
pub const SIMDGROUPS_PER_COMPUTE_UNIT: u32 = 12;

/// The most rows of C for which [`CoopQgemmConfig::splits_for`] splits K:
/// on the H200, 128 rows of 11008 × 4096 ran 47 µs split 3 ways against 66
/// unsplit; above them the f32 workspace's traffic grows with M.
pub const COOP_SPLIT_K_MAX_ROWS: u32 = 128;

/// Rows of scales a stage holds: the groups a slice can touch, at the
/// smallest group.
fn scale_rows(tk: u32) -> u32 {
    tk / GROUPS[0] as u32
}

/// One kernel: the weights' format, C's type, the tile, the stages and the
/// walk over C's tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopQgemmConfig {
    pub format: Format,
    pub output: DType,
    /// Rows of C (of A) per tile: the product's width.
    pub tm: u32,
    /// Columns of C (of the weights) per tile: the product's height, 64
    /// per warpgroup.
    pub tn: u32,
    pub tk: u32,
    pub stages: u32,
    /// Rows of tiles per band of the walk over C's tiles (1: row-major).
    pub raster: u32,
    /// K split over this many threadgroups along the grid's z (1: none):
    /// split `z` takes its run of whole slices (`split::split_range`) and writes
    /// its f32 partial product to slice `z` of `c`, the `splits · M · N`
    /// workspace that [`super::split::splitk_reduce`] sums into C.
    pub splits: u32,
    /// Who sums the K splits' partial products: the reduction's second
    /// dispatch (the kernel's `c` is then the f32 workspace), or the last
    /// threadgroup of each tile (`c` is C, the workspace `ws`).
    pub split_sum: SplitSum,
    /// Whole tiles: M a multiple of `tm`, N of `tn` and K of `tk`, so every
    /// copy of A and of the words lies inside its matrix and the kernel
    /// tests none of them (a variant of its own, `_whole`: on the H200 the
    /// tests cost 2.1 µs of 35.8 at 64 rows of 11008 × 4096 INT4,
    /// `BENCHMARKS.md`). Dispatch it only
    /// where [`CoopQgemmConfig::whole_for`] sets it.
    pub whole: bool,
    /// Stage A, the words and the scales by tile copies (`tile_copy`, the
    /// whole threadgroup's box of each per slice, zeros past the edges; on
    /// CUDA the tensor copy engine) instead of every thread's 16-byte
    /// asynchronous copies (a variant of its own, `_tiles`).
    pub tile_copies: bool,
    /// How the words lie: seed 002's `[K/8][N]` rows, or the tensor cores'
    /// fragment order (a variant of its own, `_fragments`), in which a
    /// thread's 32 weights of a 64-deep unit are one 16-byte load.
    pub layout: QuantLayout,
}

impl CoopQgemmConfig {
    /// The configuration for `m` rows of C within
    /// `max_threadgroup_memory_bytes`, staged by tile copies or not: the
    /// first of [`COOP_QGEMM_ROWS`] holding them (256 above), from
    /// [`WIDE_TILE_ROWS`] rows ([`WIDE_TILE_ROWS_TILE_COPIES`] with tile
    /// copies) 128 columns and below them 64, [`SLICE_DEPTH`] deep from 128
    /// rows and [`NARROW_TILE_DEPTH`] deep below (or 64 columns,
    /// [`SLICE_DEPTH`] deep, where those do not fit),
    /// with the most stages (from [`super::gemm::DEFAULT_STAGES`] down to
    /// 2, or `stages` where asked) that fit, or the widest narrower tile
    /// that fits; `tile` (`(tm, tn, tk)`) where asked (that tile only);
    /// `None` where nothing fits.
    pub fn for_problem(format: Format, output: DType, m: u32, tile_copies: bool, (tile, stages): (Option<(u32, u32, u32)>, Option<u32>), max_threadgroup_memory_bytes: u64) -> Option<CoopQgemmConfig> {
        let tiles: Vec<(u32, u32, u32)> = match tile {
            Some(tile) => vec![tile],
            None => {
                let widest = COOP_QGEMM_ROWS.into_iter().find(|&rows| rows >= m).unwrap_or(256);
                let wide = if tile_copies { WIDE_TILE_ROWS_TILE_COPIES } else { WIDE_TILE_ROWS };
                let shapes = |rows: u32| {
                    let columns = if rows >= wide { 2 * WARPGROUP_ROWS } else { WARPGROUP_ROWS };
                    let first = (columns, if rows >= 2 * WARPGROUP_ROWS { SLICE_DEPTH } else { NARROW_TILE_DEPTH });
                    [first, (WARPGROUP_ROWS, SLICE_DEPTH)].map(|(tn, tk)| (rows, tn, tk))
                };
                COOP_QGEMM_ROWS.into_iter().rev().filter(|&rows| rows <= widest).flat_map(shapes).collect()
            }
        };
        tiles.into_iter().find_map(|(tm, tn, tk)| {
            let base = CoopQgemmConfig { format, output, tm, tn, tk, stages: 2, raster: DEFAULT_RASTER, splits: 1, split_sum: SplitSum::Reduction, whole: false, tile_copies, layout: format.dequantize_code().1 };
            let bytes = |stages: u32| CoopQgemmConfig { stages, ..base }.memory_bytes();
            asked_or_fitting_stages(stages, bytes, max_threadgroup_memory_bytes).map(|stages| CoopQgemmConfig { stages, ..base })
        })
    }

    /// SIMD groups per threadgroup: four per warpgroup of 64 columns.
    pub fn simdgroups(&self) -> u32 {
        self.tn / WARPGROUP_ROWS * 4
    }

    pub fn threads(&self) -> u32 {
        self.simdgroups() * SIMD_WIDTH
    }

    /// Threadgroup memory: per stage A's `tm × tk` f16 values, the
    /// `tk / 8 × tn` packed words and `tk / 32 × tn` f16 scales; for MLX's
    /// affine weights, whose scales and biases the threads stage (a slice's
    /// are a value or two per column, too narrow a row for a copy), no
    /// scales per stage but two buffers of `tk / 32 × tn` scales and as
    /// many biases.
    pub fn memory_bytes(&self) -> u64 {
        let (tm, tn, tk) = (u64::from(self.tm), u64::from(self.tn), u64::from(self.tk));
        let scales = u64::from(scale_rows(self.tk)) * tn * 2;
        let (per_stage, once) = if self.format.has_biases() { (0, 2 * 2 * scales) } else { (scales, 0) };
        u64::from(self.stages) * (tm * tk * 2 + tk / VALUES_PER_WORD as u64 * tn * 4 + per_stage) + once
    }

    /// K splits for an `m × n × k` product on this tile that give at least
    /// [`SIMDGROUPS_PER_COMPUTE_UNIT`] SIMD groups per compute unit of
    /// `compute_units`, for M up to [`COOP_SPLIT_K_MAX_ROWS`] (the GEMM's
    /// rule, [`k_splits_for`]). On the H200 at 16, 64 and 128 rows of 11008
    /// × 4096 that is 3 splits, which measured faster than 2, 4 and 6 on
    /// every default tile (`BENCHMARKS.md`).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, compute_units: u32) -> u32 {
        let threadgroups = (SIMDGROUPS_PER_COMPUTE_UNIT * compute_units).div_ceil(self.simdgroups());
        k_splits_for(TileShape { m: self.tm, n: self.tn, k: self.tk }, m, n, k, threadgroups, COOP_SPLIT_K_MAX_ROWS)
    }

    /// This configuration as the whole-tile kernel ([`CoopQgemmConfig::whole`])
    /// where `m`, `n` and `k` are multiples of the tile's rows, columns and
    /// depth; otherwise the kernel that tests its copies' bounds.
    pub fn whole_for(self, m: u32, n: u32, k: u32) -> CoopQgemmConfig {
        CoopQgemmConfig { whole: m.is_multiple_of(self.tm) && n.is_multiple_of(self.tn) && k.is_multiple_of(self.tk), ..self }
    }

    /// `qgemm_coop_{format}_{out}_{tm}x{tn}x{tk}_s{stages}[_r{raster}][_splitk{splits}[_sum]][_whole][_tiles][_fragments]`
    /// (`_sum`: the splits summed in the kernel; `_tiles`: tile copies;
    /// `_fragments`: words in fragment order).
    pub fn name(&self) -> String {
        let raster = if self.raster == 1 { String::new() } else { format!("_r{}", self.raster) };
        let sum = if self.split_sum == SplitSum::LastThreadgroup { "_sum" } else { "" };
        let split = if self.splits > 1 { format!("_splitk{}{sum}", self.splits) } else { String::new() };
        let whole = if self.whole { "_whole" } else { "" };
        let tiles = if self.tile_copies { "_tiles" } else { "" };
        // MLX's affine weights lie in their own columns: the format says so.
        let layout = if self.layout == QuantLayout::Fragments { "_fragments" } else { "" };
        format!("qgemm_coop_{}_{}_{}x{}x{}_s{}{raster}{split}{whole}{tiles}{layout}", self.format, self.output, self.tm, self.tn, self.tk, self.stages)
    }

    /// Whether the tile and stages make a kernel: FP4 or INT4 (in seed
    /// 002's rows or in fragment order) or MLX's affine weights (in their
    /// columns), C f16 or f32; `tm` one of [`COOP_QGEMM_ROWS`], `tn` one of
    /// [`COOP_QGEMM_COLUMNS`], `tk` one of [`SLICE_DEPTHS`]; 2 to [`MAX_STAGES`]
    /// stages; all within `max_threadgroup_memory_bytes`. (Every such tile
    /// splits its copies evenly over the threads: `Staging::splits_evenly`.)
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        let err = |message: String| Err(ShapeError::new(&name, message));
        let own = self.format.dequantize_code().1;
        if self.layout != own && !(self.layout == QuantLayout::Fragments && own == QuantLayout::Rows) {
            return err(format!("reads {} weights in the {own} layout{}, not {}", self.format, if own.is_rows() { " or fragment order" } else { "" }, self.layout));
        }
        if !matches!(self.output, DType::F16 | DType::F32) {
            return err(format!("writes C in f16 or f32, not {}", self.output));
        }
        if !Self::has_tile(self.tm, self.tn, self.tk) {
            return err(format!("a {}×{}×{} tile; tm one of {COOP_QGEMM_ROWS:?}, tn one of {COOP_QGEMM_COLUMNS:?}, tk one of {SLICE_DEPTHS:?}", self.tm, self.tn, self.tk));
        }
        if self.raster == 0 {
            return err("a walk over bands of 0 rows of tiles; raster is at least 1".to_string());
        }
        if !(2..=MAX_STAGES).contains(&self.stages) {
            return err(format!("{} stages; between 2 and {MAX_STAGES}", self.stages));
        }
        if self.tile_copies && self.stages > TILE_BARRIERS {
            return err(format!("{} stages of tile copies; at most {TILE_BARRIERS}, one barrier each", self.stages));
        }
        check_splits_and_memory(&name, self.splits, self.memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// Whether `tm × tn × tk` is one of the kernel's tiles: `tm` one of
    /// [`COOP_QGEMM_ROWS`], `tn` one of [`COOP_QGEMM_COLUMNS`], `tk` one of
    /// [`SLICE_DEPTHS`].
    pub fn has_tile(tm: u32, tn: u32, tk: u32) -> bool {
        COOP_QGEMM_ROWS.contains(&tm) && COOP_QGEMM_COLUMNS.contains(&tn) && SLICE_DEPTHS.contains(&tk)
    }

    /// Whether the kernel takes N columns: whole 16-byte copies of scales.
    pub fn takes(n: u32) -> bool {
        n.is_multiple_of(COPY_ELEMENTS)
    }

    /// Whether this kernel of MLX's affine weights takes `n × k` weights:
    /// whole tiles of columns and slices of K, so that the threads' loads
    /// of each slice's scales and biases stay inside their buffers. Every
    /// other format's kernel takes any.
    pub fn takes_affine(&self, n: u32, k: u32) -> bool {
        !self.format.has_biases() || (n.is_multiple_of(self.tn) && k.is_multiple_of(self.tk))
    }

    /// Whether tile copies take fragment-ordered words of N columns: a row
    /// of units (`8·N` words) is whole rows of [`FRAGMENT_BOX_WORDS`], N a
    /// multiple of 32.
    pub fn takes_fragments(n: u32) -> bool {
        (n * 8).is_multiple_of(FRAGMENT_BOX_WORDS)
    }

    /// The box of words a slice stages: the `tk × tn` tile's rows of the
    /// layout's units, each its words of a row ([`QuantLayout::stride`]):
    /// `tk / 8` rows of `tn` words in rows, `tk / 64` rows of `8 · tn` in
    /// fragment order, the tile's `tn` columns of `tk / 8` words in MLX's
    /// columns.
    pub fn word_box(&self) -> (u32, u32) {
        (self.layout.rows_of_units(self.tk, self.tn), self.layout.stride(self.tk, self.tn))
    }

    pub fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        Dispatch::threadgroups([n.div_ceil(self.tn), m.div_ceil(self.tm), self.splits.max(1)], self.threads())
    }
}

/// The quantized GEMM kernel of `cfg` (see the module doc).
///
/// # Panics
/// When `cfg.check(u64::MAX)` fails: plan through `qmatmul::select` (the
/// threadgroup memory is the device's to check).
pub fn qgemm_cooperative(cfg: &CoopQgemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    let CoopQgemmConfig { format, tm, tn, tk, stages, splits, whole, tile_copies, .. } = *cfg;
    let summed = splits > 1 && cfg.split_sum == SplitSum::LastThreadgroup;
    let code = format.dequantize_code().0;
    // MLX's affine weights: `[N][K/8]` words, a slice's box `tn` columns of
    // `tk / 8` words; the threads stage each slice's scales and biases.
    let columns = cfg.layout == QuantLayout::Columns;
    let threads = cfg.threads();
    // The words' box per slice (`word_rows` rows of `word_cols`), and the
    // words from one of its rows to the next in B (`words_pitch_per_n` per
    // column of N).
    let (word_rows, word_cols) = cfg.word_box();
    let (unit_rows, _) = cfg.layout.unit();
    let words_pitch_per_n = unit_rows / VALUES_PER_WORD as u32;
    let mut k = KernelBuilder::new(cfg.name());
    let a = k.buffer(MatrixArgs::A, Type::F16, Access::Read);
    let b = k.buffer(MatrixArgs::B, Type::U32, Access::Read);
    // With K split and summed by the reduction, `c` is the f32 workspace
    // of partial products.
    let c = k.buffer(SplitArgs::C, if splits > 1 && !summed { Type::F32 } else { cfg.output.ty(1) }, Access::ReadWrite);
    let m = k.value(MatrixArgs::M, Type::U32);
    let n = k.value(MatrixArgs::N, Type::U32);
    let kk = k.value(MatrixArgs::K, Type::U32);
    let group = k.value(PackedArgs::GROUP, Type::U32);
    let scales = k.buffer(PackedArgs::SCALES, Type::F16, Access::Read);
    let biases = format.has_biases().then(|| k.buffer(PackedArgs::BIASES, Type::F16, Access::Read));
    let ws_tickets = summed.then(|| (k.buffer(SplitArgs::WS, Type::F32, Access::ReadWrite), k.buffer(SplitArgs::TICKETS, Type::U32, Access::ReadWrite)));
    let partial = ws_tickets.map_or(c, |(ws, _)| ws);
    let a_slices = k.threadgroup_array("a_slices", Type::F16, stages * tm * tk);
    let word_slices = k.threadgroup_array("word_slices", Type::U32, stages * word_rows * word_cols);
    let scale_slices = (!columns).then(|| k.threadgroup_array("scale_slices", Type::F16, stages * scale_rows(tk) * tn));
    // MLX's affine weights: a slice's scales and biases (`tn` columns of
    // its groups, column-major) in one of two buffers each, by slice parity.
    let slice_groups = scale_rows(tk) * tn;
    let affine_slices = columns.then(|| (k.threadgroup_array("affine_scales", Type::F16, 2 * slice_groups), k.threadgroup_array("affine_biases", Type::F16, 2 * slice_groups)));
    let lid = k.let_("lid", thread_index_in_threadgroup());
    // Each thread's share of the copies, where the threads copy.
    let staging = (!tile_copies).then(|| {
        (
            Staging::new(&mut k, "a", (a, a_slices), (tm, tk), COPY_ELEMENTS, lid, threads),
            Staging::new(&mut k, "w", (b, word_slices), (word_rows, word_cols), WORDS_PER_COPY, lid, threads),
            scale_slices.map(|slices| Staging::new(&mut k, "s", (scales, slices), (scale_rows(tk), tn), COPY_ELEMENTS, lid, threads)),
        )
    });
    let (tile_row, tile_col) = raster_walk(&mut k, cfg.raster);
    let m0 = k.let_("m0", tile_row * tm);
    let n0 = k.let_("n0", tile_col * tn);
    // This threadgroup's slices of K: `slices` of them from `first_slice`.
    let (c_base, first_slice, slices) = if splits > 1 {
        let split = k.let_("split", threadgroup_position_in_grid().z());
        let c_base = k.let_("c_base", split * m * n);
        let (k_begin, k_end) = split_range(&mut k, kk, split, splits, tk);
        let first_slice = k.let_("first_slice", k_begin / tk);
        (c_base, first_slice, k.let_("slices", (k_end - k_begin + (tk - 1)) / tk))
    } else {
        (Ex::from(0u32), Ex::from(0u32), k.let_("slices", (kk + (tk - 1)) / tk))
    };
    let group_shift = k.let_("group_shift", ctz(group));
    let groups = k.let_("groups", kk >> group_shift);
    // MLX's affine weights: the groups a slice touches (one where a group
    // is deeper than it).
    let slice_group_count = columns.then(|| k.let_("slice_groups", ((tk - 1) >> group_shift) + 1u32));
    // B's rows of words (of units in fragment order; its columns in MLX's
    // columns) and the words from one to the next: expressions of the
    // arguments, as the copy engine takes a matrix's extents, and locals
    // where the threads copy.
    let b_words = if columns { (n, kk / VALUES_PER_WORD as u32) } else { (kk / unit_rows, n * words_pitch_per_n) };
    let (words_k, words_n) = if tile_copies { b_words } else { (k.let_("words_k", b_words.0), k.let_("words_n", b_words.1)) };
    // Slice `t`'s box of words in B's `words_k × words_n` matrix of words:
    // its first row and column (the slice's rows of units at the tile's
    // columns; in MLX's columns the tile's columns at the slice's words).
    let word_origin = |k: &mut KernelBuilder, tag: &str, t: Ex| {
        if columns {
            (n0, k.let_(&format!("{tag}_w0"), t * word_cols))
        } else {
            (k.let_(&format!("{tag}_w0"), t * word_rows), n0 * words_pitch_per_n)
        }
    };

    // The weights are f16, A's type: the product reads them as they are.
    let desc = Matmul2dDescriptor { transpose_right: true, mode: Matmul2dMode::MultiplyAccumulate, ..Matmul2dDescriptor::new(tn, tm, Some(tk)) };
    let scope = ExecutionScope::Simdgroups(cfg.simdgroups());
    let op = Matmul2d::new(desc, scope);
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    let weights = k.cooperative_tensor("weights", Scalar::F16, tn, tk, scope);
    let acc_per_thread = tn * tm / threads;
    for_each_slot(&mut k, acc, acc_per_thread, "i", &|k, i, _| k.cooperative_set(acc, i, 0.0f32));

    // Slice `t`'s copies (of this threadgroup's run of K) into stage
    // `stage` (a value).
    let issue = |k: &mut KernelBuilder, tag: &str, t: Ex, stage: Ex| {
        let Some((a_ops, word_ops, scale_ops)) = &staging else { unreachable!("each thread's copies are staged where the kernel has no tile copies") };
        let t = k.let_(&format!("{tag}_slice"), first_slice + t);
        let k0 = k.let_(&format!("{tag}_k0"), t * tk);
        // With whole tiles only the scales' rows past the last group are
        // tested (a stage holds the rows of the smallest group).
        let inside = |test: Ex| if whole { Ex::from(true) } else { test };
        a_ops.issue_into(k, &format!("{tag}_a"), stage, m0 * kk + k0, kk, |r, c| inside((m0 + r).lt(m).and((k0 + c).lt(kk))));
        let (w_row, w_col) = word_origin(k, tag, t);
        word_ops.issue_into(k, &format!("{tag}_w"), stage, w_row * words_n + w_col, words_n, |r, c| inside((w_row + r).lt(words_k).and((w_col + c).lt(words_n))));
        if let Some(scale_ops) = scale_ops {
            let g0 = k.let_(&format!("{tag}_g0"), k0 >> group_shift);
            scale_ops.issue_into(k, &format!("{tag}_s"), stage, g0 * n + n0, n, |r, c| (g0 + r).lt(groups).and(inside((n0 + c).lt(n))));
        }
    };
    // Dequantizes the weights' tensor from the words and scales in stage
    // `stage` (a value): K value `c` of weight column `r` is nibble `c % 8`
    // of the stage's word `(c / 8, r)` times its scale `(c >> group_shift,
    // r)` — a slice starts at a multiple of its depth, which a group
    // divides or which divides a group, so `c >> group_shift` is the group
    // relative to the stage's first row of scales.
    //
    // MLX's affine weights: K value `c` of column `r` is nibble `c % 8` of
    // the stage's word `(r, c / 8)` times its scale plus its bias, both at
    // `(r, c >> group_shift)` of slice `t`'s buffer of its groups (staged
    // by the threads, below).
    let decode = |k: &mut KernelBuilder, stage: Ex, t: Ex| {
        let words_at = k.let_("words_at", stage * (word_rows * word_cols));
        match (scale_slices, affine_slices) {
            (Some(scale_slices), _) => {
                let scales_at = k.let_("scales_at", stage * (scale_rows(tk) * tn));
                k.cooperative_dequantize(weights, (code, cfg.layout), (word_slices, words_at, word_cols), (scale_slices, scales_at, tn), group_shift);
            }
            (None, Some((affine_scales, affine_biases))) => {
                let scales_at = k.let_("scales_at", (t % 2u32) * slice_groups);
                let count = slice_group_count.expect("MLX's affine weights count their slices' groups");
                k.cooperative_dequantize_with_biases(weights, (code, cfg.layout), (word_slices, words_at, word_cols), (affine_scales, scales_at, count), affine_biases, group_shift);
            }
            (None, None) => unreachable!("the scales are staged per stage or, for MLX's affine weights, by the threads"),
        }
    };
    let right = |stage: Ex| slice_view(a_slices, (tm, tk), stages, stage);
    // With tile copies, slice `t`'s three boxes into stage `stage`, on the
    // stage's barrier. The matrices' extents are the kernel's arguments
    // (dispatch constants): A is M × K, the words K/8 × N, the scales
    // K/group × N.
    let issue_tiles = |k: &mut KernelBuilder, tag: &str, t: Ex, stage: Ex| {
        let t = k.let_(&format!("{tag}_slice"), first_slice + t);
        let origin = |e: Ex| e.cast(Scalar::I32);
        let a_matrix = TileSource { mem: a, extents: [m, kk], pitch: kk };
        k.tile_copy(stage, a_slices.at(stage * (tm * tk)), a_matrix, [origin(m0), origin(t * tk)], (tm, tk));
        let words_to = stage * (word_rows * word_cols);
        if cfg.layout != QuantLayout::Fragments {
            // In MLX's columns a row of the box is 32 or 64 bytes from a
            // multiple of it.
            let word_matrix = TileSource { mem: b, extents: [words_k, words_n], pitch: words_n };
            let (w_row, w_col) = word_origin(k, tag, t);
            k.tile_copy(stage, word_slices.at(words_to), word_matrix, [origin(w_row), origin(w_col)], (word_rows, word_cols));
        } else {
            // A slice's units of one row are `word_cols` consecutive words,
            // wider than a box: B viewed as rows of `FRAGMENT_BOX_WORDS`
            // (N a multiple of 32, [`CoopQgemmConfig::takes_fragments`]),
            // one box of `word_cols / FRAGMENT_BOX_WORDS` of them per row of
            // units.
            let view_rows = words_k * (words_n / FRAGMENT_BOX_WORDS);
            let word_matrix = TileSource { mem: b, extents: [view_rows, Ex::from(FRAGMENT_BOX_WORDS)], pitch: Ex::from(FRAGMENT_BOX_WORDS) };
            for u in 0..word_rows {
                let first = ((t * word_rows + u) * words_n + n0 * words_pitch_per_n) / FRAGMENT_BOX_WORDS;
                k.tile_copy(stage, word_slices.at(words_to + u * word_cols), word_matrix, [origin(first), origin(Ex::from(0u32))], (word_cols / FRAGMENT_BOX_WORDS, FRAGMENT_BOX_WORDS));
            }
        }
        if let Some(scale_slices) = scale_slices {
            let scale_matrix = TileSource { mem: scales, extents: [kk / group, n], pitch: n };
            let g0 = (t * tk) >> group_shift;
            k.tile_copy(stage, scale_slices.at(stage * (scale_rows(tk) * tn)), scale_matrix, [origin(g0), origin(n0)], (scale_rows(tk), tn));
        }
    };

    // MLX's affine weights: each thread's share of a slice's scales and
    // biases (element `e` is group `e % groups_per_slice` of column
    // `e / groups_per_slice`), loaded a slice ahead into registers and
    // stored after the product into the buffer of the next slice's parity,
    // which the barrier at the top of the next iteration hands to the
    // decode (the other buffer's readers are the current slice's).
    let per_thread = slice_groups.div_ceil(threads);
    let affine_staging = affine_slices.map(|(affine_scales, affine_biases)| {
        let regs: Vec<(Var, Var)> = (0..per_thread).map(|i| (k.var(&format!("slice_scale{i}"), Ex::from(0.0f32).cast(Scalar::F16)), k.var(&format!("slice_bias{i}"), Ex::from(0.0f32).cast(Scalar::F16)))).collect();
        let count = slice_group_count.expect("MLX's affine weights count their slices' groups");
        (affine_scales, affine_biases, biases.expect("MLX's affine weights have biases"), regs, count)
    });
    let prefetch = |k: &mut KernelBuilder, tag: &str, t: Ex| {
        let Some((_, _, biases, regs, count)) = &affine_staging else { return };
        let count = *count;
        for (i, (s, b)) in regs.iter().enumerate() {
            let e = lid + (i as u32) * threads;
            k.if_(e.lt(tn * count).and(t.lt(slices)), |k| {
                let at = k.let_(&format!("{tag}_at{i}"), (n0 + e / count) * groups + (((first_slice + t) * tk) >> group_shift) + e % count);
                k.assign(*s, scales.get(at));
                k.assign(*b, biases.get(at));
            });
        }
    };
    let store_prefetched = |k: &mut KernelBuilder, tag: &str, t: Ex| {
        let Some((affine_scales, affine_biases, _, regs, count)) = &affine_staging else { return };
        for (i, (s, b)) in regs.iter().enumerate() {
            let e = lid + (i as u32) * threads;
            k.if_(e.lt(tn * *count), |k| {
                let at = k.let_(&format!("{tag}_to{i}"), (t % 2u32) * slice_groups + e);
                k.store(affine_scales.at(at), s.get());
                k.store(affine_biases.at(at), b.get());
            });
        }
    };
    prefetch(&mut k, "first_groups", Ex::from(0u32));
    store_prefetched(&mut k, "first_groups", Ex::from(0u32));
    prefetch(&mut k, "second_groups", Ex::from(1u32));
    let ahead = stages - 1;
    if tile_copies {
        // Each stage's boxes land on its own barrier; the copies run
        // `ahead` slices ahead. The barrier at the top of iteration t ends
        // slice t − 1's product and decoding, so its stage (and barrier,
        // waited on then) takes slice t + ahead.
        for t in 0..ahead {
            k.if_(Ex::from(t).lt(slices), |k| issue_tiles(k, &format!("first{t}"), Ex::from(t), Ex::from(t)));
        }
        k.for_range("t", 0u32, slices, 1u32, |k, t| {
            k.threadgroup_barrier(MemFlags::Threadgroup);
            let stage = k.let_("stage", t % stages);
            let next = k.let_("ahead", t + ahead);
            k.if_(next.lt(slices), |k| issue_tiles(k, "ahead", next, next % stages));
            k.tile_wait(stage);
            decode(k, stage, t);
            k.matmul2d_run(&op, weights, &right(stage), acc);
            store_prefetched(k, "next_groups", t + 1u32);
            prefetch(k, "later_groups", t + 2u32);
        });
    } else {
        // Every iteration commits one group (empty past the last slice),
        // so waiting for all but `ahead − 1` leaves slice t complete.
        for t in 0..ahead {
            k.if_(Ex::from(t).lt(slices), |k| issue(k, &format!("first{t}"), Ex::from(t), Ex::from(t)));
            k.async_commit();
        }
        k.for_range("t", 0u32, slices, 1u32, |k, t| {
            k.async_wait(ahead - 1);
            // Slice t is in every thread's view, and slice t − 1's product
            // and decoding are done: its stage is free.
            k.threadgroup_barrier(MemFlags::Threadgroup);
            let stage = k.let_("stage", t % stages);
            let next = k.let_("ahead", t + ahead);
            k.if_(next.lt(slices), |k| issue(k, "ahead", next, next % stages));
            k.async_commit();
            decode(k, stage, t);
            k.matmul2d_run(&op, weights, &right(stage), acc);
            store_prefetched(k, "next_groups", t + 1u32);
            prefetch(k, "later_groups", t + 2u32);
        });
        // Nothing in flight (the copies past the last slice are empty groups).
        k.async_wait(0);
    }

    // Slot (row r, column c) of the product is C[m0 + c][n0 + r].
    for_each_slot(&mut k, acc, acc_per_thread, "slot", &|k, slot, tag| {
        k.if_(acc.is_valid_element(slot), |k| {
            let [col, row] = acc.get_multidimensional_index(slot);
            let (crow, ccol) = (k.let_(&format!("{tag}_row"), m0 + col), k.let_(&format!("{tag}_col"), n0 + row));
            k.if_(crow.lt(m).and(ccol.lt(n)), |k| store_f32(k, partial, c_base + crow * n + ccol, acc.get(slot)));
        });
    });
    if let Some((ws, tickets)) = ws_tickets {
        // A's stages are free: every product is done (the epilogue read
        // the accumulator) and nothing is in flight.
        let tile = SplitTile { splits, tile: (tm, tn), threads, c, ws, tickets, flag: a_slices, m, n, m0, n0, batch: Ex::from(0u32), lid, scaling: None };
        tile.sum_if_last(&mut k);
    }
    finish(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel declares the threadgroup memory its configuration reports
    /// (what the selection checks against the device), at every tile and
    /// depth.
    #[test]
    fn memory_is_what_the_kernel_declares() {
        let tiles = COOP_QGEMM_ROWS.into_iter().flat_map(|tm| COOP_QGEMM_COLUMNS.into_iter().flat_map(move |tn| SLICE_DEPTHS.map(|tk| (tm, tn, tk))));
        for ((tm, tn, tk), stages) in tiles.flat_map(|tile| (2..=MAX_STAGES).map(move |stages| (tile, stages))) {
            let cfg = CoopQgemmConfig { format: Format::Int4, output: DType::F16, tm, tn, tk, stages, raster: DEFAULT_RASTER, splits: 1, split_sum: SplitSum::Reduction, whole: stages % 2 == 0, tile_copies: stages == 3, layout: enigma_ir::QuantLayout::Rows };
            let affine = CoopQgemmConfig { format: Format::MlxAffine, layout: enigma_ir::QuantLayout::Columns, ..cfg };
            for cfg in [cfg, affine] {
                cfg.check(u64::MAX).unwrap();
                let declared: u64 = qgemm_cooperative(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
                assert_eq!(cfg.memory_bytes(), declared, "{}", cfg.name());
            }
        }
    }

    /// The tile each M gets (the narrowest width holding M, 256 above it;
    /// 64 columns) and the most stages that fit; what does not fit is
    /// refused; what the check refuses, named.
    #[test]
    fn tiles_hold_m_and_fit_the_memory() {
        let plan = |m: u32, memory: u64| CoopQgemmConfig::for_problem(Format::Fp4, DType::F16, m, false, (None, None), memory).map(|c| (c.tm, c.tn, c.stages));
        let depth = |m: u32, memory: u64| CoopQgemmConfig::for_problem(Format::Fp4, DType::F16, m, false, (None, None), memory).map(|c| c.tk);
        let tiles = |m: u32| CoopQgemmConfig::for_problem(Format::Int4, DType::F16, m, true, (None, None), 227 * 1024).map(|c| (c.tm, c.tn, c.tk, c.tile_copies));
        let h200 = 227 * 1024;
        assert_eq!(plan(1, h200), Some((8, 64, 4)));
        assert_eq!(plan(16, h200), Some((16, 64, 4)));
        assert_eq!(plan(17, h200), Some((32, 64, 4)));
        assert_eq!(plan(64, h200), Some((64, 64, 4)));
        assert_eq!(plan(100, h200), Some((128, 128, 4)));
        assert_eq!(plan(4096, h200), Some((256, 128, 4)));
        assert_eq!([1, 16, 64, 100, 4096].map(|m| depth(m, h200)), [Some(128), Some(128), Some(128), Some(64), Some(64)]);
        // 128-deep slices of 64 rows in two stages do not fit 32 KiB: 64
        // deep in three.
        assert_eq!(depth(64, 32 * 1024), Some(64));
        // Where 128 columns do not fit, 64.
        assert_eq!(plan(128, 40 * 1024), Some((128, 64, 2)));
        // 128 × 64 values of A are 16 KiB a stage: two stages do not fit
        // 32 KiB with the words, so 64 rows in three.
        assert_eq!(plan(4096, 32 * 1024), Some((64, 64, 3)));
        assert_eq!(plan(128, 32 * 1024), Some((64, 64, 3)));
        assert_eq!(plan(8, 4 * 1024), None);
        // Staged by tile copies, two warpgroups' columns from 64 rows.
        assert_eq!([16, 48, 64, 128].map(tiles), [Some((16, 64, 128, true)), Some((64, 128, 128, true)), Some((64, 128, 128, true)), Some((128, 128, 64, true))]);
        assert_eq!(CoopQgemmConfig::for_problem(Format::Int4, DType::F16, 16, false, (Some((64, 128, 128)), Some(3)), h200).map(|c| (c.tm, c.tn, c.tk, c.stages)), Some((64, 128, 128, 3)));
        let cfg = CoopQgemmConfig { format: Format::Int4, output: DType::F16, tm: 16, tn: 64, tk: 64, stages: 2, raster: 1, splits: 1, split_sum: SplitSum::Reduction, whole: false, tile_copies: false, layout: enigma_ir::QuantLayout::Rows };
        assert_eq!(cfg.memory_bytes(), 2 * (16 * 64 * 2 + 8 * 64 * 4 + 2 * 64 * 2));
        assert_eq!((cfg.threads(), cfg.dispatch(100, 200).size), (128, [4, 7, 1]));
        assert!(CoopQgemmConfig { tm: 24, ..cfg }.check(u64::MAX).unwrap_err().to_string().contains("a 24×64×64 tile"));
        assert!(CoopQgemmConfig { tn: 256, ..cfg }.check(u64::MAX).unwrap_err().to_string().contains("tn one of [64, 128]"));
        // MLX's affine weights in their own columns only, their scales not staged.
        let affine = CoopQgemmConfig { format: Format::MlxAffine, ..cfg };
        assert!(affine.check(u64::MAX).unwrap_err().to_string().contains("reads mlx_affine weights in the columns layout, not rows"), "{}", affine.check(u64::MAX).unwrap_err());
        let affine = CoopQgemmConfig { layout: enigma_ir::QuantLayout::Columns, ..affine };
        affine.check(u64::MAX).unwrap();
        // Two stages of A and the words, two buffers of a slice's scales and biases.
        assert_eq!(affine.memory_bytes(), 2 * (16 * 64 * 2 + 8 * 64 * 4) + 2 * 2 * (2 * 64 * 2));
        assert_eq!(affine.word_box(), (64, 8));
        assert!(CoopQgemmConfig { layout: enigma_ir::QuantLayout::Columns, ..cfg }.check(u64::MAX).unwrap_err().to_string().contains("reads int4 weights in the rows layout or fragment order, not columns"));
        assert_eq!(CoopQgemmConfig::for_problem(Format::MlxAffine, DType::F16, 16, true, (None, None), h200).map(|c| c.layout), Some(enigma_ir::QuantLayout::Columns));
        assert!(cfg.check(8 * 1024).unwrap_err().to_string().contains("8704 bytes"));
    }

    /// Whole tiles exactly where M, N and K are multiples of the tile's
    /// rows, columns and depth, named so.
    #[test]
    fn whole_tiles_where_the_tile_divides_the_shape() {
        let cfg = CoopQgemmConfig { format: Format::Int4, output: DType::F16, tm: 16, tn: 64, tk: 128, stages: 2, raster: 1, splits: 1, split_sum: SplitSum::Reduction, whole: false, tile_copies: false, layout: enigma_ir::QuantLayout::Rows };
        assert!(cfg.whole_for(32, 11008, 4096).whole);
        assert!(cfg.whole_for(32, 11008, 4096).name().ends_with("_whole"));
        for (m, n, k) in [(17, 11008, 4096), (32, 11000, 4096), (32, 11008, 4160), (1, 64, 128)] {
            assert!(!cfg.whole_for(m, n, k).whole, "{m}x{n}x{k}");
        }
        assert!(!cfg.whole_for(32, 11008, 4096).whole_for(32, 11008, 64).whole);
        assert!(!cfg.name().contains("whole"));
    }
}
