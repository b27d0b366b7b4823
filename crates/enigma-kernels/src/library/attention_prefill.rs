//! Attention over a whole sequence (prefill), FlashAttention-2's structure:
//! `out = softmax(Q·Kᵀ·scale + mask)·V` for `Q` `[B, H, S_q, D]` and `K`,
//! `V` `[B, H_kv, S_kv, D]` (torch's SDPA layout, contiguous), f16 or bf16
//! with f32 accumulation, `D` 64 or 128, `H_kv` dividing `H` (grouped-query
//! attention: query head `h` reads key/value head `h / (H / H_kv)`), and
//! optionally the natural log-sum-exp of each row's scaled scores (f32,
//! `[B, H, S_q]`).
//!
//! **Geometry** ([`PrefillTile`]). One threadgroup per block of 64 or 128
//! query rows of one head (grid `(ceil(S_q / block_q), H, B)`, the last
//! query block first so the longest causal blocks start early), one SIMD
//! group per 16 rows. The Q block is staged once through threadgroup
//! memory into SIMD-group matrices (16 × 64 tiles) that stay in registers.
//! K and V are read in blocks of 32 or 64 keys, staged in threadgroup
//! memory by asynchronous copies (16 bytes each, zeros past `S_kv`), two
//! stages deep where the device's threadgroup memory allows. [`plan`] takes
//! 64 rows against 64 keys at `D = 64` where that fits (CUDA GPUs), else 64
//! rows against 32 keys ([`PrefillTile::PORTABLE`], within the 32 KiB of
//! Apple GPUs and the simulator): on an H200 those were the fastest of the
//! four tiles (BENCHMARKS.md); 128 rows need up to 116 KiB of threadgroup
//! memory, which leaves one threadgroup per multiprocessor.
//!
//! **One pass with an online softmax.** Per K/V block each SIMD group
//! computes `S = Q·Kᵀ` (f32, 16 × block_kv) on SIMD-group matrices, stores it to
//! its own scratch tile, and two lanes per row find the row maximum, the
//! weights `p = 2^(t − m)` (scores in the log2 domain, `t = s·scale·log2 e`,
//! masked ones `−∞`), their sum and the factor `α = 2^(m_old − m_new)`; the
//! weights go back to threadgroup memory in the input type and are loaded
//! as the left operand of `P·V`. The output rows live in plain f32
//! registers (each lane's share of the 16 × D accumulator, by the matrices'
//! element coordinates), rescaled by `α` of their row and added to each
//! block's `P·V`. The SIMD-group matrix construct has no way to change a
//! tile's elements or its element type in registers, so `P` makes that
//! round trip through threadgroup memory and the accumulator is kept
//! outside the matrices. [`super::attention_prefill_cooperative`] is the
//! same algorithm on cooperative tensors (`matmul2d`, whose accumulators
//! have row reductions and element maps and are the next product's left
//! operand), which keeps `S` and `P` in registers on `wgmma`.
//!
//! **Selection** ([`select_prefill`], the family's one place): the kernel on
//! cooperative tensors where asked for or where the device runs
//! cooperative products on `wgmma` (CUDA for `sm_90a`; on an H200 it ran
//! 2.5–2.8× faster than this one), this one elsewhere ([`plan`] chooses its
//! tile and stages).
//!
//! **Masks.** Keys past `S_kv` and rows past `S_q` are masked. Causal
//! masks come in torch's two alignments ([`Mask`]): `TopLeft` (what torch's
//! `is_causal=True` computes: key `j` is visible to query `i` when `j ≤ i`)
//! and `BottomRight` (torch's `causal_lower_right`, FlashAttention's
//! convention: `j ≤ i + S_kv − S_q`); they agree when `S_q = S_kv`. A
//! threadgroup reads no K/V block past its last visible key. A row that
//! sees no key at all (bottom-right with `S_q > S_kv`) gets zeros and a
//! log-sum-exp of `−∞`.

use super::attention_prefill_cooperative::{prefill_cooperative, CoopPrefillConfig, STAGES};
pub use super::attention_prefill_common::{PrefillArgs, HEAD_DIMS};
use super::attention_prefill_common::{Heads, PrefillParams, QueryBlock};
use super::*;
use enigma_backend::DeviceInfo;
use enigma_ir::{Kernel, MatrixType, MemFlags, Type};

/// Query rows per SIMD group.
pub const ROWS_PER_SIMDGROUP: u32 = 16;

/// The blocks one threadgroup works on: `block_q` query rows (64 or 128,
/// a SIMD group per 16) against K/V blocks of `block_kv` keys (32 or 64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefillTile {
    pub block_q: u32,
    pub block_kv: u32,
}

impl PrefillTile {
    /// 64 rows, blocks of 32 keys: fits 32 KiB of threadgroup memory.
    pub const PORTABLE: PrefillTile = PrefillTile { block_q: 64, block_kv: 32 };
    /// 64 rows, blocks of 64 keys.
    pub const WIDE: PrefillTile = PrefillTile { block_q: 64, block_kv: 64 };

    /// The tiles [`plan`] tries for head dimension `d`, best first.
    pub fn preferred(d: u32) -> &'static [PrefillTile] {
        match d {
            64 => &[PrefillTile::WIDE, PrefillTile::PORTABLE],
            _ => &[PrefillTile::PORTABLE],
        }
    }

    pub fn simdgroups(&self) -> u32 {
        self.block_q / ROWS_PER_SIMDGROUP
    }
    pub fn threads(&self) -> u32 {
        self.simdgroups() * SIMD_WIDTH
    }
    /// Whether the kernel is built for it.
    pub fn is_valid(&self) -> bool {
        matches!(self.block_q, 64 | 128) && matches!(self.block_kv, 32 | 64)
    }
}
/// Columns of `D` per matrix tile.
const CHUNK: u32 = 64;
/// Padding of each staged K/V row (elements): 16 bytes, so rows start in
/// different banks and every copy stays aligned.
const PAD: u32 = 8;
/// Elements per asynchronous copy (16 bytes of a 16-bit type).
const COPY: u32 = 8;

/// Which keys each query sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mask {
    /// Every key.
    #[default]
    None,
    /// Causal, aligned to the top left (torch's `is_causal=True`): key `j`
    /// is visible to query `i` when `j ≤ i`.
    TopLeft,
    /// Causal, aligned to the bottom right (torch's `causal_lower_right`):
    /// key `j` is visible to query `i` when `j ≤ i + S_kv − S_q`.
    BottomRight,
}

impl Mask {
    pub fn is_causal(self) -> bool {
        self != Mask::None
    }

    /// The `diag` parameter of the causal kernel: key `j` is visible to
    /// query `i` when `j + S_q ≤ i + diag`.
    pub fn diag(self, s_q: u32, s_kv: u32) -> u32 {
        match self {
            Mask::BottomRight => s_kv,
            _ => s_q,
        }
    }

    /// Whether query `i` sees key `j`.
    pub fn visible(self, i: usize, j: usize, s_q: usize, s_kv: usize) -> bool {
        match self {
            Mask::None => true,
            Mask::TopLeft => j <= i,
            Mask::BottomRight => j + s_q <= i + s_kv,
        }
    }
}

/// The sizes of one attention: `Q` `[batch, heads, s_q, d]`, `K` and `V`
/// `[batch, kv_heads, s_kv, d]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefillShape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub s_q: usize,
    pub s_kv: usize,
    pub d: usize,
}

impl PrefillShape {
    /// Elements of `Q` (and of the output).
    pub fn q_len(&self) -> usize {
        self.batch.saturating_mul(self.heads).saturating_mul(self.s_q).saturating_mul(self.d)
    }
    /// Elements of `K` (and of `V`).
    pub fn kv_len(&self) -> usize {
        self.batch.saturating_mul(self.kv_heads).saturating_mul(self.s_kv).saturating_mul(self.d)
    }
    /// Rows of the output (entries of the log-sum-exp).
    pub fn rows(&self) -> usize {
        self.batch.saturating_mul(self.heads).saturating_mul(self.s_q)
    }
    /// Multiply-adds of `Q·Kᵀ` and `P·V` the mask keeps (the FLOP count of
    /// benchmarks is twice this).
    pub fn visible_pairs(&self, mask: Mask) -> u64 {
        let per_head: u64 = (0..self.s_q).map(|i| (0..self.s_kv).filter(|&j| mask.visible(i, j, self.s_q, self.s_kv)).count() as u64).sum();
        per_head * (self.batch * self.heads) as u64
    }
}

/// What one prefill kernel is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefillConfig {
    pub dtype: DType,
    pub d: u32,
    pub causal: bool,
    pub lse: bool,
    /// K/V stages in threadgroup memory (1 or 2).
    pub stages: u32,
    pub tile: PrefillTile,
}

impl PrefillConfig {
    /// `attention_prefill_{dtype}_d{d}[_causal][_lse]_q{block_q}_kv{block_kv}_s{stages}`.
    pub fn name(&self) -> String {
        format!(
            "attention_prefill_{}_d{}{}{}_q{}_kv{}_s{}",
            self.dtype,
            self.d,
            if self.causal { "_causal" } else { "" },
            if self.lse { "_lse" } else { "" },
            self.tile.block_q,
            self.tile.block_kv,
            self.stages
        )
    }

    /// Rows of the staging array: the K/V stages, or the Q block staged
    /// through it when that is larger.
    fn staged_rows(&self) -> u32 {
        (self.stages * 2 * self.tile.block_kv).max(self.tile.block_q)
    }

    /// Threadgroup memory of the kernel: the K/V stages (or the Q block),
    /// each SIMD group's scores (f32) and weights (input type), and one f32
    /// per row.
    pub fn memory_bytes(&self) -> u64 {
        let e = self.dtype.size_bytes() as u64;
        let staged = self.staged_rows() as u64 * (self.d + PAD) as u64 * e;
        let scores = (self.tile.block_q * self.tile.block_kv) as u64;
        staged + scores * 4 + scores * e + self.tile.block_q as u64 * 4
    }
}

/// The kernel a prefill runs: on SIMD-group matrices ([`prefill`]) or on
/// cooperative tensors ([`prefill_cooperative`]). Both take [`PrefillArgs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrefillKernel {
    Matrices(PrefillConfig),
    Cooperative(CoopPrefillConfig),
}

impl PrefillKernel {
    pub fn name(&self) -> String {
        match self {
            PrefillKernel::Matrices(c) => c.name(),
            PrefillKernel::Cooperative(c) => c.name(),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            PrefillKernel::Matrices(c) => c.dtype,
            PrefillKernel::Cooperative(c) => c.dtype,
        }
    }

    /// Whether the kernel writes the log-sum-exp.
    pub fn lse(&self) -> bool {
        match self {
            PrefillKernel::Matrices(c) => c.lse,
            PrefillKernel::Cooperative(c) => c.lse,
        }
    }

    pub fn memory_bytes(&self) -> u64 {
        match self {
            PrefillKernel::Matrices(c) => c.memory_bytes(),
            PrefillKernel::Cooperative(c) => c.memory_bytes(),
        }
    }

    /// The SIMD-group-matrix kernel's configuration, if it is that one.
    pub fn matrices(&self) -> Option<PrefillConfig> {
        match self {
            PrefillKernel::Matrices(c) => Some(*c),
            PrefillKernel::Cooperative(_) => None,
        }
    }

    pub fn kernel(&self) -> Kernel {
        match self {
            PrefillKernel::Matrices(c) => prefill(c),
            PrefillKernel::Cooperative(c) => prefill_cooperative(c),
        }
    }
}

/// A planned prefill: the kernel's configuration, the sizes it binds and
/// its dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefillPlan {
    pub config: PrefillKernel,
    pub mask: Mask,
    pub shape: PrefillShape,
    /// `(ceil(S_q / block_q), H, B)` threadgroups, `block_q / 16` SIMD
    /// groups each.
    pub dispatch: Dispatch,
}

impl PrefillPlan {
    pub fn kernel(&self) -> Kernel {
        self.config.kernel()
    }

    /// The kernel's `diag` (causal kernels only).
    pub fn diag(&self) -> u32 {
        self.mask.diag(self.shape.s_q as u32, self.shape.s_kv as u32)
    }
}

/// The caller's choices of [`select_prefill`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefillChoice {
    /// The blocks: of the SIMD-group-matrix kernel, or (with `cooperative`
    /// `Some(true)`) of the kernel on cooperative tensors (64 or 128 rows
    /// and keys).
    pub tile: Option<PrefillTile>,
    /// The kernel on cooperative tensors: `Some(true)` asks for it (an
    /// error where it cannot run), `Some(false)` refuses it, `None` takes
    /// it where the device's cooperative products are warpgroup matrix
    /// instructions ([`DeviceInfo::wgmma`]).
    pub cooperative: Option<bool>,
    /// The kernel on cooperative tensors: stage Q, K and V by tile copies
    /// ([`CoopPrefillConfig::tile_copies`]); default
    /// [`select::tile_copies_by_default`].
    pub tile_copies: Option<bool>,
}

/// The attention prefill family's one selection: the kernel on
/// cooperative tensors where `choice` asks for it (with its tile, if one
/// is given), or by default where the device runs cooperative products on
/// `wgmma` and no tile is asked for (the first blocks of
/// [`CoopPrefillConfig::preferred`] that fit the device's threadgroup
/// memory); else the kernel on SIMD-group matrices ([`plan`]). Asked for
/// where it cannot run (no cooperative tensors, f32, a tile it is not
/// built for, too little threadgroup memory), it is a typed error naming
/// why.
pub fn select_prefill(dtype: DType, shape: PrefillShape, mask: Mask, lse: bool, choice: PrefillChoice, device: &DeviceInfo) -> Result<PrefillPlan, ShapeError> {
    let memory = device.max_threadgroup_memory_bytes;
    let tile_copies = choice.tile_copies.unwrap_or_else(|| super::select::tile_copies_by_default(device));
    let forced = match choice.cooperative {
        Some(false) => false,
        Some(true) => true,
        None if !device.wgmma() || choice.tile.is_some() => false,
        None => {
            // The default: where the matrices' kernel would run, if it fits.
            let planned = plan(dtype, shape, mask, lse, None, memory)?;
            return Ok(cooperative_plan(planned.shape, mask, dtype, lse, tile_copies, memory).unwrap_or(planned));
        }
    };
    if !forced {
        return plan(dtype, shape, mask, lse, choice.tile, memory);
    }
    // Checks the shape as the other kernel does (the same errors).
    plan(dtype, shape, mask, lse, None, u64::MAX)?;
    let name = format!("attention_prefill_coop_{dtype}");
    if !device.features.contains(&enigma_ir::Feature::CooperativeTensors) {
        return Err(ShapeError::new(name, format!("{} has no cooperative tensors", device.name)));
    }
    if let Some(tile) = choice.tile {
        let config = CoopPrefillConfig { dtype, d: shape.d as u32, causal: mask.is_causal(), lse, block_q: tile.block_q, block_kv: tile.block_kv, tile_copies, stages: STAGES };
        config.check()?;
        if config.memory_bytes() > memory {
            return Err(ShapeError::new(config.name(), format!("needs {} bytes of threadgroup memory (limit {memory})", config.memory_bytes())));
        }
        return Ok(PrefillPlan { config: PrefillKernel::Cooperative(config), mask, shape, dispatch: config.dispatch(shape.s_q, shape.heads, shape.batch) });
    }
    cooperative_plan(shape, mask, dtype, lse, tile_copies, memory).ok_or_else(|| {
        let least = CoopPrefillConfig::preferred(shape.d as u32, tile_copies)
            .iter()
            .map(|&(block_q, block_kv)| CoopPrefillConfig { dtype, d: shape.d as u32, causal: mask.is_causal(), lse, block_q, block_kv, tile_copies, stages: STAGES }.memory_bytes())
            .min()
            .unwrap_or(0);
        ShapeError::new(name, format!("needs {least} bytes of threadgroup memory (limit {memory})"))
    })
}

/// The plan of the kernel on cooperative tensors with the largest blocks
/// that fit `memory` (a shape [`plan`] accepted), staged by tile copies
/// where `tile_copies`.
fn cooperative_plan(shape: PrefillShape, mask: Mask, dtype: DType, lse: bool, tile_copies: bool, memory: u64) -> Option<PrefillPlan> {
    let config = CoopPrefillConfig::for_memory(dtype, shape.d as u32, mask.is_causal(), lse, tile_copies, memory)?;
    Some(PrefillPlan { config: PrefillKernel::Cooperative(config), mask, shape, dispatch: config.dispatch(shape.s_q, shape.heads, shape.batch) })
}

/// Plans the prefill of `shape` for a device whose threadgroups may use
/// `max_memory_bytes` of threadgroup memory: `tile` (default: the first of
/// [`PrefillTile::preferred`] that fits) with two K/V stages where they
/// fit, else one.
pub fn plan(dtype: DType, shape: PrefillShape, mask: Mask, lse: bool, tile: Option<PrefillTile>, max_memory_bytes: u64) -> Result<PrefillPlan, ShapeError> {
    let name = format!("attention_prefill_{dtype}");
    if dtype == DType::F32 {
        return Err(ShapeError::new(name, "f32 inputs are not supported (the SIMD-group matrix products take f16 or bf16)"));
    }
    for (what, v) in [("batch", shape.batch), ("heads", shape.heads), ("kv_heads", shape.kv_heads), ("s_q", shape.s_q), ("s_kv", shape.s_kv), ("d", shape.d)] {
        nonzero(&name, what, v)?;
    }
    if !HEAD_DIMS.contains(&(shape.d as u32)) || shape.d > u32::MAX as usize {
        return Err(ShapeError::new(name, format!("head dimension {} is not supported (the kernel is built for {HEAD_DIMS:?})", shape.d)));
    }
    if !shape.heads.is_multiple_of(shape.kv_heads) {
        return Err(ShapeError::new(name, format!("{} query heads are not a multiple of {} key/value heads", shape.heads, shape.kv_heads)));
    }
    to_u32(&name, "batch × heads × s_q × d", shape.q_len())?;
    to_u32(&name, "batch × kv_heads × s_kv × d", shape.kv_len())?;
    // Row indices reach s_q + 64 and key indices s_kv + diag + 64.
    to_u32(&name, "s_q + s_kv + 256", shape.s_q.saturating_add(shape.s_kv).saturating_add(256))?;
    if let Some(t) = tile.filter(|t| !t.is_valid()) {
        return Err(ShapeError::new(name, format!("{t:?} is not a tile the kernel is built for (block_q 64 or 128, block_kv 32 or 64)")));
    }
    let d = shape.d as u32;
    let tiles = match tile {
        Some(t) => vec![t],
        None => PrefillTile::preferred(d).to_vec(),
    };
    let candidates = tiles.iter().flat_map(|&tile| [2, 1].map(|stages| PrefillConfig { dtype, d, causal: mask.is_causal(), lse, stages, tile }));
    let Some(config) = candidates.clone().find(|c| c.memory_bytes() <= max_memory_bytes) else {
        let least = candidates.map(|c| c.memory_bytes()).min().unwrap_or(0);
        return Err(ShapeError::new(name, format!("needs {least} bytes of threadgroup memory (limit {max_memory_bytes})")));
    };
    let grid = [shape.s_q.div_ceil(config.tile.block_q as usize) as u32, shape.heads as u32, shape.batch as u32];
    Ok(PrefillPlan { config: PrefillKernel::Matrices(config), mask, shape, dispatch: Dispatch::threadgroups(grid, config.tile.threads()) })
}

/// The kernel's buffers and sizes, as the helpers read them.
struct Binding {
    kv: Mem,
    ld: u32,
    lid: Ex,
    threads: u32,
}

impl Binding {
    /// Starts copying `rows` rows of `d` elements of `src` (row `first` on,
    /// from element `base`) to `kv[dst ..]` (rows `ld` apart), zeros for
    /// rows at or past `limit`.
    #[allow(clippy::too_many_arguments)]
    fn copy_rows(&self, k: &mut KernelBuilder, tag: &str, src: Mem, base: Ex, first: Ex, limit: Ex, dst: Ex, rows: u32, d: u32) {
        let per_row = d / COPY;
        let copies = rows * per_row;
        assert!(copies.is_multiple_of(self.threads), "{rows} rows of {d} split evenly over the threads");
        for c in 0..copies / self.threads {
            let idx = k.let_(&format!("{tag}_idx{c}"), self.lid + c * self.threads);
            let row = k.let_(&format!("{tag}_row{c}"), idx / per_row);
            let col = k.let_(&format!("{tag}_col{c}"), idx % per_row * COPY);
            let valid = k.let_(&format!("{tag}_valid{c}"), (first + row).lt(limit));
            // An invalid copy reads nothing; its index stays in bounds anyway.
            let src_row = select(Ex::from(0u32), first + row, valid);
            k.async_copy(self.kv.at(dst + row * self.ld + col), src.at(base + src_row * d + col), COPY, valid);
        }
    }
}

/// `S = Q·Kᵀ` (f32, 16 × `block_kv`) of one SIMD group's query tiles
/// and the staged K block at `k_at`.
fn scores_tile(q_tiles: &[Ex], kv: Mem, k_at: Ex, ld: u32, block_kv: u32, elem: enigma_ir::Scalar) -> Ex {
    let kt = MatrixType::new(elem, CHUNK as u8, block_kv as u8);
    let mut s = matrix_fill(MatrixType::new(enigma_ir::Scalar::F32, ROWS_PER_SIMDGROUP as u8, block_kv as u8), 0.0f32);
    for (c, &q) in q_tiles.iter().enumerate() {
        s = matrix_multiply_accumulate(q, matrix_load(kt, kv, k_at + c as u32 * CHUNK, ld, true), s);
    }
    s
}

/// `P·V[:, chunk]` (f32, 16 × 64) for one SIMD group's weights `p` and the
/// staged V block at `v_at`.
#[allow(clippy::too_many_arguments)]
fn weighted_values(p: Ex, kv: Mem, v_at: Ex, chunk: u32, ld: u32, block_kv: u32, elem: enigma_ir::Scalar) -> Ex {
    let vt = MatrixType::new(elem, block_kv as u8, CHUNK as u8);
    let zero = matrix_fill(MatrixType::new(enigma_ir::Scalar::F32, ROWS_PER_SIMDGROUP as u8, CHUNK as u8), 0.0f32);
    matrix_multiply_accumulate(p, matrix_load(vt, kv, v_at + chunk * CHUNK, ld, false), zero)
}

/// The prefill kernel of `cfg` (see the module doc). Parameters: `q, k, v,
/// out, [lse], s_q, s_kv, heads, group, scale_log2, [diag]`, with `group =
/// heads / kv_heads`, `scale_log2 = scale · log2 e` and, for causal
/// kernels, `diag` ([`Mask::diag`]).
///
/// # Panics
/// When `cfg.d` is not one of [`HEAD_DIMS`], the type is f32, the stages
/// are not 1 or 2 or the tile is not one [`PrefillTile::is_valid`] accepts
/// ([`plan`] checks all four).
pub fn prefill(cfg: &PrefillConfig) -> Kernel {
    assert!(HEAD_DIMS.contains(&cfg.d) && cfg.dtype != DType::F32 && (1..=2).contains(&cfg.stages) && cfg.tile.is_valid(), "unsupported {cfg:?}");
    let (d, stages) = (cfg.d, cfg.stages);
    let PrefillTile { block_q, block_kv } = cfg.tile;
    let ld = d + PAD;
    let chunks = d / CHUNK;
    let elem = cfg.dtype.scalar();
    let f32s = enigma_ir::Scalar::F32;
    let mut kb = KernelBuilder::new(cfg.name());
    let k = &mut kb;
    let PrefillParams { q, keys, values, out, lse, s_q, s_kv, heads, group, scale_log2, diag, .. } = PrefillParams::declare(k, cfg.dtype.ty(1), cfg.lse, cfg.causal, false);
    let kv = k.threadgroup_array("kv", cfg.dtype.ty(1), cfg.staged_rows() * ld);
    let tile = ROWS_PER_SIMDGROUP * block_kv;
    let scores = k.threadgroup_array("scores", Type::F32, block_q * block_kv);
    let probs = k.threadgroup_array("probs", cfg.dtype.ty(1), block_q * block_kv);
    let row_scale = k.threadgroup_array("row_scale", Type::F32, block_q);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let QueryBlock { q0, head, batch, q_base, kv_base, blocks, .. } =
        QueryBlock::new(k, Heads { heads, group }, (s_q, s_kv, Ex::from(d)), diag, (block_q, block_kv));
    let bind = Binding { kv, ld, lid, threads: cfg.tile.threads() };

    // The Q block, through the K/V stages, into registers.
    bind.copy_rows(k, "q", q, q_base, q0, s_q, Ex::from(0u32), block_q, d);
    k.async_commit();
    k.async_wait(0);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let q_tile = MatrixType::new(elem, ROWS_PER_SIMDGROUP as u8, CHUNK as u8);
    let q_tiles: Vec<Ex> =
        (0..chunks).map(|c| k.let_(&format!("q_tile{c}"), matrix_load(q_tile, kv, sg * ROWS_PER_SIMDGROUP * ld + c * CHUNK, ld, false))).collect();
    k.threadgroup_barrier(MemFlags::Threadgroup);

    // Each lane's share of the 16 × D output rows, and its row's state
    // (two lanes per row in the softmax).
    let o_tile = MatrixType::new(f32s, ROWS_PER_SIMDGROUP as u8, CHUNK as u8);
    let acc: Vec<Vec<Var>> =
        (0..chunks).map(|c| (0..o_tile.per_lane()).map(|i| k.var(&format!("o{c}_{i}"), f(0.0))).collect()).collect();
    let m = k.var("m", neg_inf());
    let l = k.var("l", f(0.0));
    let row = k.let_("row", lane >> 1u32);
    let half = k.let_("side", lane & 1u32);
    let q_row = k.let_("q_row", q0 + sg * ROWS_PER_SIMDGROUP + row);
    let my_tile = k.let_("my_tile", sg * tile);
    let stage_len = 2 * block_kv * ld;
    // `tag` keeps the names of each place that issues a block apart.
    let issue = |k: &mut KernelBuilder, tag: &str, block: Ex, stage: Ex| {
        let first = k.let_(&format!("{tag}_first_key"), block * block_kv);
        bind.copy_rows(k, &format!("{tag}_k"), keys, kv_base, first, s_kv, stage * stage_len, block_kv, d);
        bind.copy_rows(k, &format!("{tag}_v"), values, kv_base, first, s_kv, stage * stage_len + block_kv * ld, block_kv, d);
        k.async_commit();
    };
    k.if_(blocks.gt(0u32), |k| issue(k, "first", Ex::from(0u32), Ex::from(0u32)));
    k.for_range("block", 0u32, blocks, 1u32, |k, block| {
        let next = k.let_("next", block + 1u32);
        if stages == 2 {
            k.if_else(
                next.lt(blocks),
                |k| {
                    issue(k, "ahead", next, next & 1u32);
                    k.async_wait(1);
                },
                |k| k.async_wait(0),
            );
        } else {
            k.async_wait(0);
        }
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let k_at = k.let_("k_at", if stages == 2 { (block & 1u32) * stage_len } else { Ex::from(0u32) });
        let v_at = k.let_("v_at", k_at + block_kv * ld);
        let kv0 = k.let_("kv0", block * block_kv);
        let s = k.let_("s", scores_tile(&q_tiles, kv, k_at, ld, block_kv, elem));
        k.matrix_store(s, scores, my_tile, block_kv, false);
        k.simdgroup_barrier(MemFlags::Threadgroup);
        // Lane pair (2r, 2r + 1) takes row r; for each step j the 16 rows
        // read 16 different column pairs (no two lanes in one bank).
        let ts: Vec<Ex> = (0..block_kv / 2)
            .map(|j| {
                let col = k.let_(&format!("col{j}"), ((row + j) & (block_kv / 2 - 1)) * 2u32 + half);
                let key = kv0 + col;
                let mut visible = key.lt(s_kv);
                if let Some(diag) = diag {
                    visible = visible.and((key + s_q).le(q_row + diag));
                }
                let t = scores.get(my_tile + row * block_kv + col) * scale_log2;
                k.let_(&format!("t{j}"), select(neg_inf(), t, visible))
            })
            .collect();
        let block_max = ts.iter().copied().reduce(max).expect("columns");
        let block_max = k.let_("block_max", max(block_max, simd_shuffle_xor(block_max, 1u32)));
        let m_new = k.let_("m_new", max(m.get(), block_max));
        let shift = k.let_("shift", finite_or_zero(m_new));
        let alpha = k.let_("alpha", exp2(m.get() - shift));
        let mut sum: Option<Ex> = None;
        for (j, &t) in ts.iter().enumerate() {
            let p = k.let_(&format!("p{j}"), exp2(t - shift));
            let col = ((row + j as u32) & (block_kv / 2 - 1)) * 2u32 + half;
            store_f32(k, probs, my_tile + row * block_kv + col, p);
            sum = Some(sum.map_or(p, |s| s + p));
        }
        let sum = k.let_("row_sum", sum.expect("columns"));
        k.assign(l, fma(l.get(), alpha, sum + simd_shuffle_xor(sum, 1u32)));
        k.assign(m, m_new);
        k.if_(half.eq(0u32), |k| k.store(row_scale.at(sg * ROWS_PER_SIMDGROUP + row), alpha));
        k.simdgroup_barrier(MemFlags::Threadgroup);
        let p_tile = k.let_("p_tile", matrix_load(MatrixType::new(elem, ROWS_PER_SIMDGROUP as u8, block_kv as u8), probs, my_tile, block_kv, false));
        let alphas: Vec<Ex> =
            (0..o_tile.per_lane() as u8).map(|i| k.let_(&format!("alpha{i}"), row_scale.get(sg * ROWS_PER_SIMDGROUP + matrix_coord(o_tile, i, false)))).collect();
        for (c, vars) in acc.iter().enumerate() {
            let pv = k.let_(&format!("pv{c}"), weighted_values(p_tile, kv, v_at, c as u32, ld, block_kv, elem));
            for (i, var) in vars.iter().enumerate() {
                k.assign(*var, fma(var.get(), alphas[i], thread_element(pv, i as u8)));
            }
        }
        k.threadgroup_barrier(MemFlags::Threadgroup);
        if stages == 1 {
            k.if_(next.lt(blocks), |k| issue(k, "after", next, Ex::from(0u32)));
        }
    });

    // 1/l per row (0 for a row that saw no key), and the log-sum-exp.
    let seen = k.let_("seen", l.get().gt(0.0f32));
    k.if_(half.eq(0u32), |k| {
        k.store(row_scale.at(sg * ROWS_PER_SIMDGROUP + row), select(f(0.0), 1.0f32 / l.get(), seen));
        if let Some(lse) = lse {
            k.if_(q_row.lt(s_q), |k| {
                let value = select(neg_inf(), (m.get() + log2(l.get())) * std::f64::consts::LN_2, seen);
                k.store(lse.at((batch * heads + head) * s_q + q_row), value);
            });
        }
    });
    k.simdgroup_barrier(MemFlags::Threadgroup);
    for (c, vars) in acc.iter().enumerate() {
        for (i, var) in vars.iter().enumerate() {
            let r = k.let_(&format!("out_r{c}_{i}"), sg * ROWS_PER_SIMDGROUP + matrix_coord(o_tile, i as u8, false));
            let at_row = k.let_(&format!("out_row{c}_{i}"), q0 + r);
            k.if_(at_row.lt(s_q), |k| {
                let col = c as u32 * CHUNK + matrix_coord(o_tile, i as u8, true);
                store_f32(k, out, q_base + at_row * d + col, var.get() * row_scale.get(r));
            });
        }
    }
    finish(kb)
}

/// The f64 reference: the output `[B, H, S_q, D]` and each row's natural
/// log-sum-exp of its scaled visible scores (`−∞` and zeros for a row that
/// sees no key).
pub fn reference(q: &[f32], k: &[f32], v: &[f32], shape: PrefillShape, mask: Mask, scale: f32) -> (Vec<f64>, Vec<f64>) {
    let PrefillShape { batch, heads, kv_heads, s_q, s_kv, d } = shape;
    let group = heads / kv_heads;
    let mut out = vec![0.0; shape.q_len()];
    let mut lse = vec![f64::NEG_INFINITY; shape.rows()];
    for b in 0..batch {
        for h in 0..heads {
            let kv_at = (b * kv_heads + h / group) * s_kv * d;
            for i in 0..s_q {
                let row = (b * heads + h) * s_q + i;
                let qr = &q[row * d..(row + 1) * d];
                let scores: Vec<(usize, f64)> = (0..s_kv)
                    .filter(|&j| mask.visible(i, j, s_q, s_kv))
                    .map(|j| {
                        let kr = &k[kv_at + j * d..kv_at + (j + 1) * d];
                        (j, qr.iter().zip(kr).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * scale as f64)
                    })
                    .collect();
                if scores.is_empty() {
                    continue;
                }
                let mx = scores.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = scores.iter().map(|s| (s.1 - mx).exp()).sum();
                lse[row] = mx + total.ln();
                for &(j, s) in &scores {
                    let w = (s - mx).exp() / total;
                    for (o, &x) in out[row * d..(row + 1) * d].iter_mut().zip(&v[kv_at + j * d..kv_at + (j + 1) * d]) {
                        *o += w * x as f64;
                    }
                }
            }
        }
    }
    (out, lse)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &PrefillPlan) -> PrefillConfig {
        p.config.matrices().expect("the SIMD-group-matrix kernel")
    }

    fn shape(s_q: usize, s_kv: usize, d: usize) -> PrefillShape {
        PrefillShape { batch: 1, heads: 4, kv_heads: 2, s_q, s_kv, d }
    }

    #[test]
    fn tiles_and_stages_follow_the_memory_limit() {
        let plan_at = |s, limit| plan(DType::F16, s, Mask::None, false, None, limit).unwrap();
        // 32 KiB: the portable tile, one stage at D = 128.
        let p = plan_at(shape(100, 100, 128), MAX_THREADGROUP_MEMORY_BYTES);
        assert_eq!((m(&p).tile, m(&p).stages), (PrefillTile::PORTABLE, 1));
        assert!(p.config.memory_bytes() <= MAX_THREADGROUP_MEMORY_BYTES);
        assert_eq!(p.dispatch, Dispatch::threadgroups([2, 4, 1], 128));
        // 64 rows of 136 f16 staged (the Q block; one stage of K and V is
        // as large), 64 × 32 scores (f32) and weights (f16), 64 row factors.
        assert_eq!(p.config.memory_bytes(), 17408 + 8192 + 4096 + 256);
        let p = plan_at(shape(1, 1, 64), MAX_THREADGROUP_MEMORY_BYTES);
        assert_eq!((m(&p).tile, m(&p).stages), (PrefillTile::PORTABLE, 2));
        // A CUDA GPU's 227 KiB: two stages; 64 keys per block at D = 64.
        let p = plan_at(shape(300, 300, 128), 227 * 1024);
        assert_eq!((m(&p).tile, m(&p).stages), (PrefillTile::PORTABLE, 2));
        let p = plan_at(shape(300, 300, 64), 227 * 1024);
        assert_eq!((m(&p).tile, m(&p).stages), (PrefillTile::WIDE, 2));
        assert_eq!(p.config.memory_bytes(), 2 * 2 * 64 * 72 * 2 + 64 * 64 * (4 + 2) + 64 * 4);
        assert_eq!(p.dispatch, Dispatch::threadgroups([5, 4, 1], 128));
        let large = PrefillTile { block_q: 128, block_kv: 64 };
        let p = plan(DType::F16, shape(300, 300, 128), Mask::None, false, Some(large), 227 * 1024).unwrap();
        assert_eq!(p.config.memory_bytes(), 2 * 2 * 64 * 136 * 2 + 128 * 64 * (4 + 2) + 128 * 4);
        assert_eq!(p.dispatch, Dispatch::threadgroups([3, 4, 1], 256));
        let tile = PrefillTile { block_q: 128, block_kv: 32 };
        let p = plan(DType::BF16, shape(1, 1, 64), Mask::TopLeft, true, Some(tile), 48 * 1024).unwrap();
        assert_eq!(p.config.name(), "attention_prefill_bf16_d64_causal_lse_q128_kv32_s2");
        let bad = plan(DType::F16, shape(1, 1, 64), Mask::None, false, Some(PrefillTile { block_q: 96, block_kv: 32 }), u64::MAX);
        assert!(bad.unwrap_err().to_string().contains("is not a tile the kernel is built for"));
        let small = plan(DType::F16, shape(1, 1, 128), Mask::None, false, Some(large), MAX_THREADGROUP_MEMORY_BYTES);
        assert!(small.unwrap_err().to_string().contains("bytes of threadgroup memory (limit 32768)"));
    }

    #[test]
    fn refuses_what_it_is_not_built_for() {
        let err = |dtype, s: PrefillShape| plan(dtype, s, Mask::None, false, None, MAX_THREADGROUP_MEMORY_BYTES).unwrap_err().to_string();
        assert_eq!(err(DType::F16, shape(8, 8, 96)), "attention_prefill_f16: head dimension 96 is not supported (the kernel is built for [64, 128])");
        assert_eq!(
            err(DType::F16, PrefillShape { heads: 6, kv_heads: 4, ..shape(8, 8, 64) }),
            "attention_prefill_f16: 6 query heads are not a multiple of 4 key/value heads"
        );
        assert!(err(DType::F32, shape(8, 8, 64)).contains("f32 inputs are not supported"));
        assert!(err(DType::F16, shape(0, 8, 64)).contains("s_q"));
    }

    #[test]
    fn masks_follow_torch() {
        // torch.tril(ones(3, 4)) and tril(ones(3, 4), diagonal=1).
        let rows = |mask: Mask| (0..3).map(|i| (0..4).filter(|&j| mask.visible(i, j, 3, 4)).count()).collect::<Vec<_>>();
        assert_eq!(rows(Mask::TopLeft), vec![1, 2, 3]);
        assert_eq!(rows(Mask::BottomRight), vec![2, 3, 4]);
        assert_eq!(rows(Mask::None), vec![4, 4, 4]);
        for (mask, s_q, s_kv) in [(Mask::TopLeft, 3, 4), (Mask::BottomRight, 3, 4), (Mask::BottomRight, 5, 2)] {
            for i in 0..s_q {
                for j in 0..s_kv {
                    let diag = mask.diag(s_q as u32, s_kv as u32) as usize;
                    assert_eq!(mask.visible(i, j, s_q, s_kv), j + s_q <= i + diag);
                }
            }
        }
    }

    #[test]
    fn every_configuration_validates() {
        for dtype in [DType::F16, DType::BF16] {
            for d in HEAD_DIMS {
                for (causal, lse, stages, tile) in [
                    (false, false, 1, PrefillTile::PORTABLE),
                    (true, true, 2, PrefillTile { block_q: 128, block_kv: 64 }),
                    (true, false, 1, PrefillTile { block_q: 128, block_kv: 32 }),
                    (false, true, 2, PrefillTile::WIDE),
                ] {
                    let cfg = PrefillConfig { dtype, d, causal, lse, stages, tile };
                    let kernel = prefill(&cfg);
                    let options = enigma_ir::ValidationOptions { max_threadgroup_memory_bytes: cfg.memory_bytes(), ..Default::default() };
                    let info = enigma_ir::validate(&kernel, &options).unwrap_or_else(|e| panic!("{}: {e:?}", kernel.name));
                    assert_eq!(info.threadgroup_memory_bytes, cfg.memory_bytes(), "{}", kernel.name);
                }
            }
        }
    }
}
