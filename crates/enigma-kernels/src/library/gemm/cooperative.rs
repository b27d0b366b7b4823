//! The GEMM on cooperative tensors: `C = alpha·A·B + beta·C`, row-major,
//! f16 or bf16 inputs with f32 accumulation, C f16, bf16 or f32, batched
//! over the grid's third dimension, any M; N and K multiples of 8 (the
//! 16-byte copies below; [`super::select`] sends other shapes to the
//! SIMD-group-matrix kernel).
//!
//! A threadgroup of `tm / 64` warpgroups (four SIMD groups each) computes
//! a `tm × tn` tile of C into one cooperative tensor, by one
//! `matmul2d(tm, tn, tk)` per slice of `tk` K values. The slices of A
//! (`tm × tk`) and B (`tk × tn`) lie in threadgroup memory as they are
//! stored, `stages` of each, filled by 16-byte asynchronous copies (zeros
//! for rows past M and for K and N past the matrices, so the product
//! needs no edge path), one barrier per slice. With three or more stages
//! the products are *overlapped* (`matmul2d_run_overlapped`: a product's
//! operands are released at the second barrier after it): each iteration
//! starts the product of slice `t`, then the copies of slice
//! `t + stages − 2` into the stage slice `t − 2` used, which the barrier
//! just passed released; on CUDA the products of slices `t − 1` and `t`
//! stay in flight together through that barrier, so the tensor cores do
//! not wait for it. With two stages (devices with little threadgroup
//! memory) the products release their operands at the next barrier and
//! the copies of slice `t + 1` go into the stage of slice `t − 1`. In both
//! the copies run `stages − lag` slices ahead ([`CoopGemmConfig::lag`]).
//! With one stage (products of one slice of K, which need no second) the
//! copies of slice `t + 1` wait for a barrier after slice `t`'s product.
//! On CUDA for `sm_90a` these products are Hopper's warpgroup matrix
//! multiply (`enigma_codegen::cuda`'s cooperative lowering: both arrays
//! have pitches that are multiples of 64, the product's m a multiple of
//! 64 per warpgroup); elsewhere the backend's cooperative path.
//!
//! **Tile copies** ([`CoopGemmConfig::tile_copies`], `_tiles`; chosen by
//! [`super::select`] on `wgmma` devices for 128-row tiles and one-stage
//! products). Each slice is two tile copies on its stage's barrier (on
//! CUDA one thread hands them to the tensor copy engine, which writes
//! `wgmma`'s swizzle), so the threads issue no copies: A and B are
//! described as whole matrices of the batch (A `max(M, a_stride / K ·
//! batch)` rows of K, B `K · batch` rows of N; the batch size is an
//! argument), the engine filling zeros past K and N of A and B's last
//! columns and past the matrices' last rows. A box past a product's M
//! reads the next product's rows of A into C's rows past M, which are not
//! stored; a box past its K reads the next product's rows of B, which the
//! threads set to zero after the wait (A's columns there are zeros, and a
//! non-finite value times zero would not be). A threadgroup per tile
//! only (not persistent).
//!
//! **Rasterisation.** Threadgroups start in the order of their linear
//! index (x fastest). Each takes the tile of C at its place in a walk that
//! goes down `raster` rows of tiles before moving one tile column right
//! (then the next band of `raster` rows): the threadgroups resident at
//! once cover a block of about `raster` rows of tiles by a few columns,
//! so the A rows and B columns they read are shared and stay in L2, where
//! a row-major walk would read every column of B once per row of tiles.
//! `raster` 1 is the row-major walk.
//!
//! **The epilogue.** Where C has the inputs' 16-bit type and the device's
//! threadgroup memory holds a staging array beside the stages
//! ([`CoopGemmConfig::staged`]) it goes through that array
//! (`store_tile_staged`, [`STAGING_ROWS`] rows of `tn` values and 16 bytes
//! of padding): each thread writes its accumulator slots, `alpha·acc +
//! beta·C` rounded to C's type, into the array, and after a barrier the
//! threads store its rows as 16-byte words of eight values, consecutive
//! threads taking consecutive words, so a SIMD group writes whole
//! 512-byte stretches of C; a 128-row tile goes in two rounds of 64 rows.
//! The array is its own, not the B stages, whose layout the `wgmma`
//! lowering swizzles (every value's place would take a swizzle's
//! arithmetic), and the padding keeps one store's rows in different
//! banks. Otherwise (f32 C, or too little threadgroup memory) each thread
//! stores its slots where they lie (`store_tile_direct`). Both skip
//! elements past M or N; C is read
//! only where beta is not 0. With a row bias ([`CoopGemmConfig::row_bias`])
//! each element gains `bias[row]` in f32 before its one rounding, where a
//! separate broadcast add would read and write C again and round twice.
//!
//! **Persistence** (`CoopGemmConfig::persistent`, chosen by
//! [`super::select`] for 128-row tiles of short products: `persists` in
//! its source). One threadgroup per compute unit walks the tiles
//! of every product of the batch (tile `i`: product `i / tiles`, then the
//! band walk), `threadgroups_per_grid.x` apart. Once a tile's products are
//! done it issues the next tile's first slices (into the stages they take
//! in any tile) and then runs the epilogue, so the copies land while the
//! epilogue stores. Measured on an H200 (f16, C f16, 128 × 256 in four
//! stages, CUDA-event medians): with C staged in the B stages, 4096³
//! 228.3 µs against 227.3 one threadgroup per tile, 8192³ 1699.9 against
//! 1674.2 (no gain where K is long); with C in its own staging array, 32
//! products of 1024³ 145.3 µs against 152.9, where each tile's 16 slices
//! leave the fill and the epilogue a large share.
//!
//! Parameters: `a, b, c, m, n, k, alpha, beta, a_stride` (A's batch
//! stride, 0 where the products share one A; B's and C's come from the
//! shapes: `k·n` and `m·n` elements), `c` taken as `c_words` (C's 16-byte
//! `u32x4` words) by the epilogue through threadgroup memory, in a
//! persistent kernel `batch` (the number of products; the others take it
//! from the grid's third dimension), and with a row bias `bias`.
//!
//! The staging (`Staging`), the walk (`raster_walk`) and the loop over the
//! accumulator's slots (`for_each_slot`) serve the quantized GEMM on
//! cooperative tensors too (`library::qgemm_cooperative`).

use super::config::{asked_or_fitting_stages, MAX_STAGES};
use super::args::{MatrixArgs, PlainArgs};
use crate::library::split::SplitArgs;
use crate::library::*;
use enigma_ir::builder::{CoopTensor, Matmul2d, Tensor, TileSource};
use enigma_ir::limits::TILE_BARRIERS;
use enigma_ir::{Access, ExecutionScope, Matmul2dDescriptor, Matmul2dMode, MemFlags, Scalar, Type};

/// Rows of C one warpgroup (four SIMD groups) multiplies.
pub const WARPGROUP_ROWS: u32 = 64;

/// Elements of one asynchronous copy: 16 bytes of 16-bit values.
pub const COPY_ELEMENTS: u32 = 8;

/// The tiles [`CoopGemmConfig::for_memory`] tries, best first, as
/// `(tm, tn, tk)`: 128 × 256 (two warpgroups, each `wgmma` m64n256k16),
/// then 64 × 64, which fits 32 KiB of threadgroup memory in two stages.
pub const COOP_TILES: [(u32, u32, u32); 2] = [(128, 256, 64), (64, 64, 64)];

/// 16-bit values of C in each 16-byte word (`u32x4`) the epilogue through
/// threadgroup memory stores.
pub const EPILOGUE_WORD_VALUES: u32 = 8;

/// Rows of C the staging array holds: one warpgroup's band, so that a
/// 128-row tile is staged in two rounds (a whole 128 × 256 tile beside
/// four stages would pass the H200's 227 KiB).
pub const STAGING_ROWS: u32 = WARPGROUP_ROWS;

/// Values past `tn` in each row of the staging array (16 bytes of 16-bit
/// values): [`CoopGemmConfig::staging_pitch`].
pub const STAGING_PAD: u32 = 8;

/// The row pitch in values of the epilogue's staging array for tiles `tn`
/// wide: `tn` and [`STAGING_PAD`] (16 bytes of 16-bit values), so that the
/// rows of one store of the accumulator's fragments fall in different
/// banks while each row stays whole 16-byte words.
pub(crate) fn staging_pitch(tn: u32) -> u32 {
    tn + STAGING_PAD
}

/// Whether a `tm × tn × tk` tile suits the pipeline on cooperative
/// tensors: `tm` 64 or 128 (one or two warpgroups); `tn` and `tk`
/// multiples of 64 (the pitches of the staged slices, which `wgmma`
/// needs), `tn` at most 256.
pub(crate) fn check_tile((tm, tn, tk): (u32, u32, u32)) -> Result<(), String> {
    if !matches!(tm, 64 | 128) || !tn.is_multiple_of(64) || !(64..=256).contains(&tn) || tk == 0 || !tk.is_multiple_of(64) {
        return Err(format!("a {tm}×{tn}×{tk} tile; tm 64 or 128, tn a multiple of 64 up to 256, tk a multiple of 64"));
    }
    Ok(())
}

/// The type of C's words in that epilogue (`c_words`).
pub(crate) fn words_type() -> Type {
    Type::vector(Scalar::U32, 4)
}

/// Rows of tiles in one band of the walk over C's tiles (see the module
/// doc), [`CoopGemmConfig::for_memory`]'s choice.
pub const DEFAULT_RASTER: u32 = 8;

/// Barriers between a product and the reuse of its operands' stage in a
/// pipeline of `stages`: 2 (overlapped products, released at the second
/// barrier) with three or more stages, else 1 (released at the next).
fn overlap_lag(stages: u32) -> u32 {
    if stages >= 3 {
        2
    } else {
        1
    }
}

/// One cooperative GEMM kernel: types, tile, stages and the order of tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopGemmConfig {
    pub input: DType,
    pub output: DType,
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub stages: u32,
    /// Rows of tiles per band of the walk over C's tiles (1: row-major).
    pub raster: u32,
    /// One threadgroup per compute unit walking the tiles (module doc,
    /// "Persistence") rather than one threadgroup per tile.
    pub persistent: bool,
    /// `bias[row]` added to each row of C before it is rounded (module
    /// doc, "The epilogue"): a convolution's bias per output channel.
    pub row_bias: bool,
    /// C (of the inputs' 16-bit type) stored through its own staging array
    /// in threadgroup memory (module doc, "The epilogue"); else each thread
    /// stores its slots where they lie.
    pub staged: bool,
    /// Stage the slices by tile copies (`tile_copy`; on CUDA `sm_90` the
    /// tensor copy engine) rather than by every thread's asynchronous
    /// copies (module doc, "Tile copies"; a threadgroup per tile only).
    pub tile_copies: bool,
}

impl CoopGemmConfig {
    /// The first of [`COOP_TILES`] with the most stages (from
    /// [`super::DEFAULT_STAGES`] down to 2) that fit `max_threadgroup_memory_bytes`,
    /// or with `stages` asked, the first tile whose `stages` fit, C staged
    /// where it is 16-bit ([`Self::staged`]); where nothing fits with the
    /// staging array, the same without it (C stored where it lies); `None`
    /// where none fits at all.
    pub fn for_memory(input: DType, output: DType, stages: Option<u32>, max_threadgroup_memory_bytes: u64) -> Option<CoopGemmConfig> {
        let staging = if output == input { [true, false].as_slice() } else { [false].as_slice() };
        staging.iter().find_map(|&staged| {
            COOP_TILES.iter().find_map(|&(tm, tn, tk)| {
                let base = CoopGemmConfig { input, output, tm, tn, tk, stages: 2, raster: DEFAULT_RASTER, persistent: false, row_bias: false, staged, tile_copies: false };
                let bytes = |stages: u32| CoopGemmConfig { stages, ..base }.memory_bytes();
                asked_or_fitting_stages(stages, bytes, max_threadgroup_memory_bytes).map(|stages| CoopGemmConfig { stages, ..base })
            })
        })
    }

    /// A `tm × tn × tk` configuration of `stages` for `input` and `output`
    /// in bands of [`DEFAULT_RASTER`] rows of tiles, a threadgroup per
    /// tile, no row bias, C staged where it is 16-bit.
    pub fn new(input: DType, output: DType, (tm, tn, tk): (u32, u32, u32), stages: u32) -> CoopGemmConfig {
        CoopGemmConfig { input, output, tm, tn, tk, stages, raster: DEFAULT_RASTER, persistent: false, row_bias: false, staged: output == input, tile_copies: false }
    }

    /// Barriers between a product and the reuse of its stage: 2 (overlapped
    /// products) with three or more stages, else 1. The copies run
    /// `stages − lag` slices ahead.
    pub fn lag(&self) -> u32 {
        SlicePipeline::new(self.stages).lag
    }

    /// Slices the copies run ahead of the products: `stages − lag`, and 1
    /// with one stage (whose next slice's copies wait for a barrier after
    /// the product).
    pub fn ahead(&self) -> u32 {
        SlicePipeline::new(self.stages).ahead
    }

    /// SIMD groups per threadgroup: four per warpgroup of 64 rows.
    pub fn simdgroups(&self) -> u32 {
        self.tm / WARPGROUP_ROWS * 4
    }

    pub fn threads(&self) -> u32 {
        self.simdgroups() * SIMD_WIDTH
    }

    /// Threadgroup memory: `stages` slices of A and of B, and where C is
    /// staged its [`STAGING_ROWS`] rows of [`Self::staging_pitch`] values.
    pub fn memory_bytes(&self) -> u64 {
        let stages = u64::from(self.stages) * u64::from(self.tm * self.tk + self.tk * self.tn) * u64::from(self.input.size_bytes());
        let staging = if self.staged { u64::from(STAGING_ROWS * self.staging_pitch()) * u64::from(self.output.size_bytes()) } else { 0 };
        stages + staging
    }

    /// The staging array's row pitch in values: `tn` and 16 bytes more, so
    /// that the rows of one store of the accumulator's fragments fall in
    /// different banks while each row stays whole 16-byte words.
    pub fn staging_pitch(&self) -> u32 {
        staging_pitch(self.tn)
    }

    pub fn name(&self) -> String {
        let raster = if self.raster == 1 { String::new() } else { format!("_r{}", self.raster) };
        let persistent = if self.persistent { "_p" } else { "" };
        let bias = if self.row_bias { "_bias" } else { "" };
        let direct = if !self.staged && self.output == self.input { "_direct" } else { "" };
        let tiles = if self.tile_copies { "_tiles" } else { "" };
        format!("gemm_coop_{}_{}_{}x{}x{}_s{}{raster}{persistent}{bias}{direct}{tiles}", self.input, self.output, self.tm, self.tn, self.tk, self.stages)
    }

    /// Whether the tile and stages make a kernel: 16-bit inputs; `tm` 64
    /// or 128; `tn` and `tk` multiples of 64 (the pitches of the staged
    /// slices), `tn` at most 256; 1 to [`MAX_STAGES`] stages (with tile
    /// copies at most [`TILE_BARRIERS`], and not persistent); each slice's
    /// copies split evenly over the threads in whole rows
    /// (`Staging::splits_evenly`: not 192 columns); C staged only in the
    /// inputs' type; the stages and the staging array within
    /// `max_threadgroup_memory_bytes`.
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        let err = |message: String| Err(ShapeError::new(&name, message));
        if !matches!(self.input, DType::F16 | DType::BF16) {
            return err(format!("cooperative products take f16 or bf16 inputs, not {}", self.input));
        }
        check_tile((self.tm, self.tn, self.tk)).or_else(err)?;
        if self.raster == 0 {
            return err("a walk over bands of 0 rows of tiles; raster is at least 1".to_string());
        }
        if !(1..=MAX_STAGES).contains(&self.stages) {
            return err(format!("{} stages; between 1 and {MAX_STAGES}", self.stages));
        }
        if self.tile_copies && self.stages > TILE_BARRIERS {
            return err(format!("{} stages of tile copies; at most {TILE_BARRIERS}, one barrier each", self.stages));
        }
        if self.tile_copies && self.persistent {
            return err("tile copies in a persistent kernel; they stage a threadgroup per tile".to_string());
        }
        if !Staging::splits_evenly((self.tm, self.tk), COPY_ELEMENTS, self.threads()) || !Staging::splits_evenly((self.tk, self.tn), COPY_ELEMENTS, self.threads()) {
            return err(format!("the slices' 16-byte copies do not split evenly over {} threads in whole rows", self.threads()));
        }
        if self.staged && self.output != self.input {
            return err(format!("C is staged through threadgroup memory in the inputs' type ({}), not {}", self.input, self.output));
        }
        if self.memory_bytes() > max_threadgroup_memory_bytes {
            let staging = if self.staged { " and the staging of C" } else { "" };
            return err(format!("{} stages{staging} take {} bytes of threadgroup memory; the device has {max_threadgroup_memory_bytes}", self.stages, self.memory_bytes()));
        }
        Ok(())
    }

    /// Whether the kernel takes an `m × n × k` problem: N and K whole
    /// 16-byte copies.
    pub fn takes(n: u32, k: u32) -> bool {
        n.is_multiple_of(COPY_ELEMENTS) && k.is_multiple_of(COPY_ELEMENTS)
    }

    /// The grid for `batch` products of `m × n`: a threadgroup per tile, or
    /// persistent, one per compute unit (of `compute_units`) up to the
    /// tiles' count.
    pub fn dispatch(&self, m: u32, n: u32, batch: u32, compute_units: u32) -> Dispatch {
        let (tiles_x, tiles_y) = (n.div_ceil(self.tn), m.div_ceil(self.tm));
        if self.persistent {
            let tiles = u64::from(tiles_x) * u64::from(tiles_y) * u64::from(batch);
            // At most `compute_units`, so it fits u32.
            let threadgroups = tiles.min(u64::from(compute_units.max(1))) as u32;
            return Dispatch::threadgroups([threadgroups, 1, 1], self.threads());
        }
        Dispatch::threadgroups([tiles_x, tiles_y, batch], self.threads())
    }
}

/// One operand's staged slices: the source buffer, the threadgroup array
/// of `stages` slices of `rows × cols`, and this thread's share of each
/// slice's 16-byte copies of `per_copy` elements: rows `row0 + i·row_step`
/// (i below `copies`) at column `col`, the same in every slice, so that
/// only the slice's origin changes from one to the next. Where a slice
/// has fewer copies than threads, the threads below their number
/// (`guard`) take one each.
pub(crate) struct Staging {
    src: Mem,
    staged: Mem,
    rows: u32,
    cols: u32,
    row0: Ex,
    col: Ex,
    /// `row0·cols + col`: where this thread's first copy lands in a stage.
    lane: Ex,
    row_step: u32,
    copies: u32,
    per_copy: u32,
    guard: Option<Ex>,
}

impl Staging {
    /// Whether `threads` share a `rows × cols` slice's copies of
    /// `per_copy` elements the way [`Staging::new`] lays them out: the
    /// same number each, every thread at one column of the rows it takes
    /// (`threads` a multiple of a row's copies, or fewer copies in all
    /// than threads).
    pub(crate) fn splits_evenly((rows, cols): (u32, u32), per_copy: u32, threads: u32) -> bool {
        let per_row = cols / per_copy;
        let total = rows * per_row;
        cols.is_multiple_of(per_copy) && (total < threads || (total.is_multiple_of(threads) && threads.is_multiple_of(per_row)))
    }

    /// The staging of `rows × cols` slices of `src` into `staged`, 16
    /// bytes (`per_copy` elements) a copy, this thread (`lid` of `threads`)
    /// taking every `threads`-th copy.
    pub(crate) fn new(k: &mut KernelBuilder, tag: &str, (src, staged): (Mem, Mem), (rows, cols): (u32, u32), per_copy: u32, lid: Ex, threads: u32) -> Staging {
        debug_assert!(Self::splits_evenly((rows, cols), per_copy, threads), "{tag}: {rows}×{cols} in copies of {per_copy} over {threads} threads");
        let per_row = cols / per_copy;
        let row0 = k.let_(&format!("{tag}_row0"), lid / per_row);
        let col = k.let_(&format!("{tag}_col"), lid % per_row * per_copy);
        let lane = k.let_(&format!("{tag}_lane"), row0 * cols + col);
        let total = rows * per_row;
        let (copies, guard) = if total < threads { (1, Some(lid.lt(total))) } else { (total / threads, None) };
        Staging { src, staged, rows, cols, row0, col, lane, row_step: threads / per_row, copies, per_copy, guard }
    }

    /// Starts the copies of one slice into stage `stage`: element (r, c) of
    /// the slice from `src[origin + r·pitch + c]` where `valid(r, c)`,
    /// zeros elsewhere.
    pub(crate) fn issue(&self, k: &mut KernelBuilder, tag: &str, stage: u32, origin: Ex, pitch: Ex, valid: impl Fn(Ex, Ex) -> Ex) {
        let lane = self.lane;
        self.issue_from(k, tag, (lane, stage * self.rows * self.cols), origin, pitch, &valid);
    }

    /// [`Staging::issue`] into the stage that the value `stage` names (a
    /// pipeline whose loop is not unrolled over its stages): this thread's
    /// first element of that stage computed once, each copy a constant
    /// from it.
    pub(crate) fn issue_into(&self, k: &mut KernelBuilder, tag: &str, stage: Ex, origin: Ex, pitch: Ex, valid: impl Fn(Ex, Ex) -> Ex) {
        let stage_lane = k.let_(&format!("{tag}_to"), self.lane + stage * (self.rows * self.cols));
        self.issue_from(k, tag, (stage_lane, 0), origin, pitch, &valid);
    }

    /// The copies of [`Staging::issue`] and [`Staging::issue_into`], the
    /// `i`-th landing at `lane + (offset + i·row_step·cols)`, on the threads
    /// that have them.
    fn issue_from(&self, k: &mut KernelBuilder, tag: &str, to: (Ex, u32), origin: Ex, pitch: Ex, valid: &dyn Fn(Ex, Ex) -> Ex) {
        match self.guard {
            None => self.issue_copies(k, tag, to, origin, pitch, valid),
            Some(guard) => k.if_(guard, |k| self.issue_copies(k, tag, to, origin, pitch, valid)),
        }
    }

    /// [`Staging::issue_from`]'s copies, on a thread that has them.
    fn issue_copies(&self, k: &mut KernelBuilder, tag: &str, (lane, offset): (Ex, u32), origin: Ex, pitch: Ex, valid: &dyn Fn(Ex, Ex) -> Ex) {
        let first = k.let_(&format!("{tag}_first"), origin + self.row0 * pitch + self.col);
        for i in 0..self.copies {
            let step = i * self.row_step;
            let ok = k.let_(&format!("{tag}_ok{i}"), valid(self.row0 + step, self.col));
            // An invalid copy reads nothing; its index stays in bounds anyway.
            let from = select(Ex::from(0u32), first + pitch * step, ok);
            let to = lane + (offset + step * self.cols);
            k.async_copy(self.staged.at(to), self.src.at(from), self.per_copy, ok);
        }
    }

    /// Starts the copies of one slice into stage `stage` whose rows lie
    /// anywhere in `src`: this thread's `i`-th row (of
    /// [`Self::rows_of_thread`]) from `src[start + c]`, where `(start,
    /// valid) = row(k, i)`, zeros where not `valid`. A gather of rows, as a
    /// convolution's input rows are.
    pub(crate) fn issue_rows(&self, k: &mut KernelBuilder, tag: &str, stage: u32, row: &dyn Fn(&mut KernelBuilder, u32) -> (Ex, Ex)) {
        let copies = |k: &mut KernelBuilder| {
            for i in 0..self.copies {
                let step = i * self.row_step;
                let (start, valid) = row(k, i);
                let ok = k.let_(&format!("{tag}_ok{i}"), valid);
                // An invalid copy reads nothing; its index stays in bounds anyway.
                let from = select(Ex::from(0u32), start + self.col, ok);
                let to = self.lane + (stage * self.rows * self.cols + step * self.cols);
                k.async_copy(self.staged.at(to), self.src.at(from), self.per_copy, ok);
            }
        };
        match self.guard {
            None => copies(k),
            Some(guard) => k.if_(guard, copies),
        }
    }

    /// The rows of a slice this thread copies: `row0 + i·row_step` for `i`
    /// below the copies.
    pub(crate) fn rows_of_thread(&self) -> (Ex, u32, u32) {
        (self.row0, self.row_step, self.copies)
    }

    /// Stage `stage` as a view for the product (x the column).
    pub(crate) fn view(&self, stages: u32, stage: Ex) -> Tensor {
        slice_view(self.staged, (self.rows, self.cols), stages, stage)
    }
}

/// Stage `stage` of `staged` (`stages` slices of `rows × cols`) as a view
/// for the product (x the column): [`Staging::view`], and the view of
/// slices that tile copies fill.
pub(crate) fn slice_view(staged: Mem, (rows, cols): (u32, u32), stages: u32, stage: Ex) -> Tensor {
    Tensor::new(staged, [cols, stages * rows]).slice(0u32, stage * rows)
}

/// Sets to zero the rows of a `rows × cols` box of `staged` (of `elem`,
/// from element `at`) that lie at or past row `limit` of its source, the
/// box's first row being row `first`, where the box reaches that far; the
/// threads (`lid` of `threads`) take every `threads`-th element. A tile
/// copy of a batch's matrices as one reads the next matrix's rows there,
/// where each thread's copies leave zeros: the GEMM's rows of B past K, the
/// attention prefill's values past `S_kv`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn zero_rows_past(k: &mut KernelBuilder, tag: &str, (staged, elem, at): (Mem, Scalar, Ex), (rows, cols): (u32, u32), first: Ex, limit: Ex, (lid, threads): (Ex, u32)) {
    k.if_((first + rows).gt(limit), |k| {
        k.for_range(tag, lid, Ex::from(rows * cols), threads, |k, i| {
            k.if_((first + i / cols).ge(limit), |k| k.store(staged.at(at + i), f(0.0).cast(elem)));
        });
    });
}

/// The software pipeline over a tile's slices of K: `stages` slices in
/// threadgroup memory, the copies `ahead` slices ahead
/// ([`CoopGemmConfig::ahead`]), each product releasing its operands `lag`
/// barriers after it ([`CoopGemmConfig::lag`]: 2, overlapped, with three
/// or more stages). With each thread's asynchronous copies every iteration
/// commits one group (empty past the last slice), so waiting for all but
/// `ahead − 1` groups leaves the slice to multiply complete; with tile
/// copies (`tiles`) each stage's copies complete on the stage's own
/// barrier, waited for before its product. Shared by the cooperative GEMM
/// and the implicit-GEMM convolution.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlicePipeline {
    pub(crate) stages: u32,
    pub(crate) lag: u32,
    pub(crate) ahead: u32,
    pub(crate) tiles: bool,
}

impl SlicePipeline {
    pub(crate) fn new(stages: u32) -> SlicePipeline {
        let lag = overlap_lag(stages);
        SlicePipeline { stages, lag, ahead: (stages - lag).max(1), tiles: false }
    }

    /// The first `ahead` slices' copies, one group (or barrier) each:
    /// `issue(k, tag, t, stage)` starts slice `t`'s copies into `stage`.
    pub(crate) fn prologue(&self, k: &mut KernelBuilder, tag: &str, slices: Ex, issue: &dyn Fn(&mut KernelBuilder, &str, Ex, u32)) {
        for t in 0..self.ahead {
            k.if_(Ex::from(t).lt(slices), |k| issue(k, &format!("{tag}{t}"), Ex::from(t), t % self.stages));
            if !self.tiles {
                k.async_commit();
            }
        }
    }

    /// The products of every slice into `acc` (its first slices' copies
    /// issued by [`Self::prologue`]): for slice `t`, the wait for its
    /// copies, the barrier that makes every thread's part of its stage
    /// visible, its product of the stage's `views(stage)` (overlapped or
    /// not), then the copies of slice `t + ahead` into the stage slice
    /// `t − lag` used, which that barrier released (with one stage after a
    /// barrier of their own: the product just started reads it until the
    /// next). Unrolled by `stages`, so that each slice's stage is a
    /// constant: the views' offsets and the products' run-time checks fold
    /// away. With tile copies `landed(k, t, stage)` runs after slice `t`'s
    /// wait, before the barrier (the GEMM zeroes rows a box read past its
    /// batch's K there).
    pub(crate) fn run(&self, k: &mut KernelBuilder, slices: Ex, (op, acc): (&Matmul2d, CoopTensor), views: &dyn Fn(u32) -> (Tensor, Tensor), issue: &dyn Fn(&mut KernelBuilder, &str, Ex, u32), landed: &dyn Fn(&mut KernelBuilder, Ex, u32)) {
        let SlicePipeline { stages, lag, ahead, tiles } = *self;
        k.for_range("round", 0u32, slices, stages, |k, round| {
            for s in 0..stages {
                let t = k.let_(&format!("t{s}"), round + s);
                k.if_(t.lt(slices), |k| {
                    if tiles {
                        k.tile_wait(s);
                        landed(k, t, s);
                    } else {
                        k.async_wait(ahead - 1);
                    }
                    k.threadgroup_barrier(MemFlags::Threadgroup);
                    let (left, right) = views(s);
                    if lag == 2 {
                        k.matmul2d_run_overlapped(op, &left, &right, acc);
                    } else {
                        k.matmul2d_run(op, &left, &right, acc);
                    }
                    let next = k.let_(&format!("ahead{s}"), t + ahead);
                    k.if_(next.lt(slices), |k| {
                        if stages == 1 {
                            k.threadgroup_barrier(MemFlags::Threadgroup);
                        }
                        issue(k, &format!("ahead{s}"), next, (s + ahead) % stages)
                    });
                    if !tiles {
                        k.async_commit();
                    }
                });
            }
        });
    }
}

/// Runs `body` on every slot of the accumulator `acc` (`body` gets the
/// loop's name, which keeps its own names apart): the tile's
/// `per_thread` elements per thread in a loop unrolled at compile time (a
/// register array indexed by a loop that is not unrolled lives in local
/// memory on CUDA), then any slots past them that the backend's capacity
/// has.
pub(crate) fn for_each_slot(k: &mut KernelBuilder, acc: CoopTensor, per_thread: u32, name: &str, body: &dyn Fn(&mut KernelBuilder, Ex, &str)) {
    k.for_unrolled(name, 0u32, per_thread, 1u32, |k, i| body(k, i, name));
    let rest = format!("{name}_rest");
    k.for_range(&rest, per_thread, acc.get_capacity(), 1u32, |k, i| body(k, i, &rest));
}

/// This threadgroup's tile of C, `(row, column)` in tiles, in the walk
/// over bands of `raster` rows of tiles (module doc) of the grid's
/// `x × y` tiles.
pub(crate) fn raster_walk(k: &mut KernelBuilder, raster: u32) -> (Ex, Ex) {
    let tg = threadgroup_position_in_grid();
    if raster == 1 {
        return (tg.y(), tg.x());
    }
    let grid = threadgroups_per_grid();
    let linear = k.let_("linear", tg.y() * grid.x() + tg.x());
    band_walk(k, "tile", linear, (grid.x(), grid.y()), raster)
}

/// The `linear`-th tile, `(row, column)`, of a walk over bands of `raster`
/// rows of a grid of `tiles_x × tiles_y` tiles (module doc).
fn band_walk(k: &mut KernelBuilder, tag: &str, linear: Ex, (tiles_x, tiles_y): (Ex, Ex), raster: u32) -> (Ex, Ex) {
    let band_tiles = k.let_(&format!("{tag}_band_tiles"), tiles_x * raster);
    let band = k.let_(&format!("{tag}_band"), linear / band_tiles);
    let first_row = k.let_(&format!("{tag}_first_row"), band * raster);
    let band_rows = k.let_(&format!("{tag}_band_rows"), min(tiles_y - first_row, Ex::from(raster)));
    let in_band = k.let_(&format!("{tag}_in_band"), linear % band_tiles);
    let row = k.let_(&format!("{tag}_row"), first_row + in_band % band_rows);
    let col = k.let_(&format!("{tag}_col"), in_band / band_rows);
    (row, col)
}

/// Where an epilogue writes the accumulator: C (`c`: its elements of
/// `output`, or for `store_tile_staged` its 16-byte `u32x4` words of eight 16-bit
/// values), the batch's first element `base`, the tile's first row and
/// column `origin` in an `m × n` matrix (`size`), `C = alpha·acc +
/// beta·C + bias[row]`'s scalars (C read only where beta is not 0) and
/// row bias (read for rows inside C).
pub(crate) struct TileTarget {
    pub(crate) c: Mem,
    pub(crate) output: DType,
    pub(crate) base: Ex,
    pub(crate) origin: (Ex, Ex),
    pub(crate) size: (Ex, Ex),
    pub(crate) alpha: Ex,
    pub(crate) beta: Ex,
    pub(crate) bias: Option<Mem>,
}

impl TileTarget {
    /// Element (row, col) of the tile: its matrix row and column and
    /// whether they lie inside C.
    fn place(&self, k: &mut KernelBuilder, tag: &str, row: Ex, col: Ex) -> (Ex, Ex, Ex) {
        let row = k.let_(&format!("{tag}_row"), self.origin.0 + row);
        let col = k.let_(&format!("{tag}_col"), self.origin.1 + col);
        (row, col, row.lt(self.size.0).and(col.lt(self.size.1)))
    }

    /// Adds the bias of matrix row `row` to `v`, where there is a bias
    /// and the row lies inside C.
    fn add_bias(&self, k: &mut KernelBuilder, v: Var, row: Ex) {
        if let Some(bias) = self.bias {
            k.if_(row.lt(self.size.0), |k| k.assign(v, v.get() + load_f32(bias, row)));
        }
    }
}

/// The epilogue element by element: each thread stores its accumulator
/// slots at their coordinates, `alpha·acc + beta·C` rounded to C's type.
pub(crate) fn store_tile_direct(k: &mut KernelBuilder, acc: CoopTensor, per_thread: u32, out: &TileTarget) {
    for_each_slot(k, acc, per_thread, "slot", &|k, slot, tag| {
        k.if_(acc.is_valid_element(slot), |k| {
            let [col, row] = acc.get_multidimensional_index(slot);
            let (row, col, inside) = out.place(k, tag, row, col);
            k.if_(inside, |k| {
                let at = k.let_(&format!("{tag}_at"), out.base + row * out.size.1 + col);
                let v = k.var(&format!("{tag}_v"), out.alpha * acc.get(slot));
                k.if_(out.beta.ne(0.0f32), |k| k.assign(v, v.get() + out.beta * load_f32(out.c, at)));
                out.add_bias(k, v, row);
                store_f32(k, out.c, at, v.get());
            });
        });
    });
}

/// The epilogue through threadgroup memory, for 16-bit C with `n` a
/// multiple of 8, in rounds of `rows` rows of the `tm × tn` tile: each
/// thread writes the slots of the round's rows, `alpha·acc + beta·C (+
/// bias)` rounded once to C's type, into `staging` (an array of C's type
/// and row pitch `pitch`, used by nothing else), then, after a barrier,
/// the threads store the round's rows as 16-byte `u32x4` words of
/// [`EPILOGUE_WORD_VALUES`] values, consecutive threads taking
/// consecutive words: a SIMD group writes 512 contiguous bytes at once
/// where the accumulator's own layout scatters a few bytes over many rows
/// (on CUDA, `wgmma`'s fragments: 4 bytes of 8 rows a lane quadruple per
/// store, each 32-byte sector written in several requests). `n` a
/// multiple of 8 keeps a word within a row. Measured on an H200 against
/// words of two values (`u32`), the 16-byte words took 32 products of
/// 1024³ from 180.5 to 162 µs and 4096³ from 243 to 231 µs; the staging
/// array of its own (not the B stages, which `wgmma`'s operand layout
/// swizzles on CUDA: a swizzle computed for every value) took 64 products
/// of 128 × 1024 × 64 on 64 × 64 tiles from 19.7–20.3 to 15.3–15.4 µs and
/// 32 of 1024³ from 158.6–158.8 to 152.9–154.3 (`BENCHMARKS.md`).
pub(crate) fn store_tile_staged(k: &mut KernelBuilder, acc: CoopTensor, per_thread: u32, out: &TileTarget, (staging, pitch, rows): (Mem, u32, u32), (tm, tn): (u32, u32), (lid, threads): (Ex, u32)) {
    let pair = out.output.ty(2);
    let per_word = EPILOGUE_WORD_VALUES;
    // The two values of C's word holding element `at` (even or odd).
    let read_pair = |k: &mut KernelBuilder, tag: &str, at: Ex| {
        let word = k.let_(&format!("{tag}_word"), out.c.get(at / per_word));
        let part = k.let_(&format!("{tag}_part"), at % per_word / 2u32);
        let low = select(word.x(), word.y(), part.eq(1u32));
        let high = select(word.z(), word.w(), part.eq(3u32));
        select(low, high, part.ge(2u32)).bitcast(pair)
    };
    let rounds = tm.div_ceil(rows);
    for round in 0..rounds {
        let first_row = round * rows;
        for_each_slot(k, acc, per_thread, &format!("slot{round}"), &|k, slot, tag| {
            k.if_(acc.is_valid_element(slot), |k| {
                let [col, row] = acc.get_multidimensional_index(slot);
                let write = |k: &mut KernelBuilder| {
                    let v = k.var(&format!("{tag}_v"), out.alpha * acc.get(slot));
                    let (grow, gcol, inside) = out.place(k, tag, row, col);
                    k.if_(out.beta.ne(0.0f32).and(inside), |k| {
                        let at = k.let_(&format!("{tag}_at"), out.base + grow * out.size.1 + gcol);
                        let both = read_pair(k, tag, at);
                        let both = k.let_(&format!("{tag}_c"), both);
                        let prior = select(both.x(), both.y(), (at % 2u32).eq(1u32));
                        k.assign(v, v.get() + out.beta * to_f32(prior));
                    });
                    out.add_bias(k, v, grow);
                    store_f32(k, staging, (row - first_row) * pitch + col, v.get());
                };
                if rounds == 1 {
                    write(k);
                } else {
                    k.if_(row.ge(first_row).and(row.lt(first_row + rows)), write);
                }
            });
        });
        // Device memory too: the words C's reads above took are written below
        // by other threads.
        k.threadgroup_barrier(MemFlags::DeviceAndThreadgroup);
        let words_per_row = tn / per_word;
        let round_rows = rows.min(tm - first_row);
        let steps = (round_rows * words_per_row).div_ceil(threads);
        let tag = format!("word{round}");
        k.for_unrolled(&tag, 0u32, steps, 1u32, |k, i| {
            let w = k.let_(&format!("{tag}_index"), lid + i * threads);
            k.if_(w.lt(round_rows * words_per_row), |k| {
                let row = k.let_(&format!("{tag}_r"), w / words_per_row);
                let col = k.let_(&format!("{tag}_c"), w % words_per_row * per_word);
                let (grow, gcol, inside) = out.place(k, &tag, row + first_row, col);
                k.if_(inside, |k| {
                    let first = k.let_(&format!("{tag}_first"), row * pitch + col);
                    let packed: Vec<Ex> = (0..per_word / 2).map(|j| vector(pair, &[staging.get(first + 2 * j), staging.get(first + (2 * j + 1))]).bitcast(Type::U32)).collect();
                    k.store(out.c.at((out.base + grow * out.size.1 + gcol) / per_word), vector(words_type(), &packed));
                });
            });
        });
        // The next round (or the next tile's epilogue) writes the staging
        // array again.
        if round + 1 < rounds {
            k.threadgroup_barrier(MemFlags::Threadgroup);
        }
    }
}

/// Where one tile of C lies: its first row and column, and the first
/// elements of its batch's A, B and C.
#[derive(Clone, Copy)]
struct TilePlace {
    m0: Ex,
    n0: Ex,
    a_base: Ex,
    b_base: Ex,
    c_base: Ex,
}

/// How a cooperative GEMM's slices reach threadgroup memory.
enum SliceCopies {
    /// Each thread's share of asynchronous copies, of A and of B.
    Threads(Staging, Staging),
    /// Two tile copies per slice of the batch's A and B as whole matrices,
    /// `batches` products of them.
    Tiles { batches: Ex },
}

/// The cooperative GEMM kernel of `cfg` (see the module doc).
///
/// # Panics
/// When `cfg.check(u64::MAX)` fails: plan through [`super::select`] (the
/// threadgroup memory is the device's to check).
pub fn gemm_cooperative(cfg: &CoopGemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    let CoopGemmConfig { tm, tn, tk, stages, .. } = *cfg;
    let threads = cfg.threads();
    let mut k = KernelBuilder::new(cfg.name());
    let a = k.buffer(MatrixArgs::A, cfg.input.ty(1), Access::Read);
    let b = k.buffer(MatrixArgs::B, cfg.input.ty(1), Access::Read);
    let staged = cfg.staged;
    let c = if staged { k.buffer(SplitArgs::C_WORDS, words_type(), Access::ReadWrite) } else { k.buffer(SplitArgs::C, cfg.output.ty(1), Access::ReadWrite) };
    let m = k.value(MatrixArgs::M, Type::U32);
    let n = k.value(MatrixArgs::N, Type::U32);
    let kk = k.value(MatrixArgs::K, Type::U32);
    let alpha = k.value(PlainArgs::ALPHA, Type::F32);
    let beta = k.value(PlainArgs::BETA, Type::F32);
    let a_stride = k.value(PlainArgs::A_STRIDE, Type::U32);
    let batches = (cfg.persistent || cfg.tile_copies).then(|| k.value(PlainArgs::BATCH, Type::U32));
    let bias = cfg.row_bias.then(|| k.buffer(PlainArgs::BIAS, cfg.input.ty(1), Access::Read));
    let a_slices = k.threadgroup_array("a_slices", cfg.input.ty(1), stages * tm * tk);
    let b_slices = k.threadgroup_array("b_slices", cfg.input.ty(1), stages * tk * tn);
    let c_staging = staged.then(|| k.threadgroup_array("c_staging", cfg.output.ty(1), STAGING_ROWS * cfg.staging_pitch()));
    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    // How the slices arrive: tile copies of the batch's whole matrices
    // (whose extents take the batch size), or each thread's share of
    // asynchronous copies.
    let copies = match batches.filter(|_| cfg.tile_copies) {
        Some(batches) => SliceCopies::Tiles { batches },
        None => SliceCopies::Threads(Staging::new(&mut k, "a", (a, a_slices), (tm, tk), COPY_ELEMENTS, lid, threads), Staging::new(&mut k, "b", (b, b_slices), (tk, tn), COPY_ELEMENTS, lid, threads)),
    };
    let slices = k.let_("slices", (kk + (tk - 1)) / tk);
    // The place of the tile of the batch's `(row, col)` of tiles.
    let place = |k: &mut KernelBuilder, tag: &str, batch: Ex, (row, col): (Ex, Ex)| TilePlace {
        m0: k.let_(&format!("{tag}_m0"), row * tm),
        n0: k.let_(&format!("{tag}_n0"), col * tn),
        a_base: k.let_(&format!("{tag}_a_base"), batch * a_stride),
        b_base: k.let_(&format!("{tag}_b_base"), batch * kk * n),
        c_base: k.let_(&format!("{tag}_c_base"), batch * m * n),
    };

    let desc = Matmul2dDescriptor { mode: Matmul2dMode::MultiplyAccumulate, ..Matmul2dDescriptor::new(tm, tn, Some(tk)) };
    let op = Matmul2d::new(desc, ExecutionScope::Simdgroups(cfg.simdgroups()));
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    let per_thread = tm * tn / threads;

    // Slice `t`'s copies into stage `stage` (`t % stages`, a constant):
    // each thread's share, or two tile copies on the stage's barrier of
    // the batches' A (`max(M, a_stride / K · batch)` rows: one matrix, or
    // one per product) and B (`K · batch` rows) as whole matrices.
    let issue = |k: &mut KernelBuilder, tag: &str, at: TilePlace, t: Ex, stage: u32| {
        let TilePlace { m0, n0, a_base, b_base, .. } = at;
        let k0 = k.let_(&format!("{tag}_k0"), t * tk);
        match &copies {
            SliceCopies::Tiles { batches } => {
                let batches = *batches;
                let origin = |row: Ex, col: Ex| [row.cast(Scalar::I32), col.cast(Scalar::I32)];
                let a_matrix = TileSource { mem: a, extents: [max(m, a_stride / kk * batches), kk], pitch: kk };
                k.tile_copy(stage, a_slices.at(stage * (tm * tk)), a_matrix, origin(a_base / kk + m0, k0), (tm, tk));
                let b_matrix = TileSource { mem: b, extents: [kk * batches, n], pitch: n };
                k.tile_copy(stage, b_slices.at(stage * (tk * tn)), b_matrix, origin(b_base / n + k0, n0), (tk, tn));
            }
            SliceCopies::Threads(a_ops, b_ops) => {
                a_ops.issue(k, &format!("{tag}_a"), stage, a_base + m0 * kk + k0, kk, |r, c| (m0 + r).lt(m).and((k0 + c).lt(kk)));
                b_ops.issue(k, &format!("{tag}_b"), stage, b_base + k0 * n + n0, n, |r, c| (k0 + r).lt(kk).and((n0 + c).lt(n)));
            }
        }
    };
    // A box of the last slice past K holds the next product's rows of B,
    // (finite or not) where A's columns are 0: zeros, as the threads'
    // copies leave.
    let landed = |k: &mut KernelBuilder, t: Ex, stage: u32| {
        let k0 = k.let_(&format!("landed{stage}_k0"), t * tk);
        zero_rows_past(k, &format!("past_k{stage}"), (b_slices, cfg.input.scalar(), Ex::from(stage * (tk * tn))), (tk, tn), k0, kk, (lid, threads));
    };
    let pipeline = SlicePipeline { tiles: cfg.tile_copies, ..SlicePipeline::new(stages) };
    // A tile's first `ahead` slices, one group each.
    let prologue = |k: &mut KernelBuilder, tag: &str, at: TilePlace| pipeline.prologue(k, tag, slices, &|k, tag, t, stage| issue(k, tag, at, t, stage));
    // A tile's products into `acc`, its first slices' copies issued.
    let products = |k: &mut KernelBuilder, at: TilePlace| {
        for_each_slot(k, acc, per_thread, "i", &|k, i, _| k.cooperative_set(acc, i, 0.0f32));
        pipeline.run(k, slices, (&op, acc), &|s| (slice_view(a_slices, (tm, tk), stages, Ex::from(s)), slice_view(b_slices, (tk, tn), stages, Ex::from(s))), &|k, tag, t, stage| issue(k, tag, at, t, stage), &landed);
    };
    // Every copy landed and every product done, its operands released (the
    // second barrier): the stages are free for the next tile's first slices.
    let drain = |k: &mut KernelBuilder| {
        k.async_wait(0);
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.threadgroup_barrier(MemFlags::Threadgroup);
    };
    let epilogue = |k: &mut KernelBuilder, at: TilePlace| {
        let target = TileTarget { c, output: cfg.output, base: at.c_base, origin: (at.m0, at.n0), size: (m, n), alpha, beta, bias };
        match c_staging {
            Some(staging) => store_tile_staged(k, acc, per_thread, &target, (staging, cfg.staging_pitch(), STAGING_ROWS), (tm, tn), (lid, threads)),
            None => store_tile_direct(k, acc, per_thread, &target),
        }
    };

    match batches.filter(|_| cfg.persistent) {
        None => {
            let tile = raster_walk(&mut k, cfg.raster);
            let here = place(&mut k, "tile", tg.z(), tile);
            prologue(&mut k, "first", here);
            products(&mut k, here);
            epilogue(&mut k, here);
        }
        Some(batches) => {
            // Tile `i` of the walk: batch `i / per_batch`, then the band walk
            // within the batch's tiles.
            let tiles_x = k.let_("tiles_x", (n + (tn - 1)) / tn);
            let tiles_y = k.let_("tiles_y", (m + (tm - 1)) / tm);
            let per_batch = k.let_("per_batch", tiles_x * tiles_y);
            let total = k.let_("total", per_batch * batches);
            let stride = k.let_("stride", threadgroups_per_grid().x());
            let raster = cfg.raster;
            let locate = |k: &mut KernelBuilder, tag: &str, i: Ex| {
                let batch = k.let_(&format!("{tag}_batch"), i / per_batch);
                let linear = k.let_(&format!("{tag}_linear"), i % per_batch);
                let tile = band_walk(k, tag, linear, (tiles_x, tiles_y), raster);
                place(k, tag, batch, tile)
            };
            let first = tg.x();
            k.if_(first.lt(total), |k| {
                let at = locate(k, "first", first);
                prologue(k, "first", at);
            });
            k.for_range("tile", first, total, stride, |k, i| {
                let here = locate(k, "here", i);
                products(k, here);
                drain(k);
                // The next tile's first slices land while this one's epilogue
                // runs.
                let next = k.let_("next", i + stride);
                k.if_(next.lt(total), |k| {
                    let at = locate(k, "next", next);
                    prologue(k, "next", at);
                });
                epilogue(k, here);
            });
        }
    }
    finish(k)
}
