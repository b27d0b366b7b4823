//! The quantized GEMM with *fused* dequantization (seed 002's
//! `marlin_gemm_fused_fp4`): `C[M, N] = A[M, K] · dequant(B)`, `A` f16
//! row-major, `B` 4-bit codes in seed 002's layout (FP4 E2M1 or INT4 U4B8,
//! `[K/8][N]` u32 words of 8 consecutive K values of one column, f16 scales
//! `[K/group][N]`), f32 accumulation, `C` f32 or f16.
//!
//! Unlike the *separate* variant ([`super::gemm::QgemmConfig`]), B never
//! has a threadgroup-wide tile. A threadgroup computes a `tm × tn` tile of C
//! over a `sg_rows × sg_cols` grid of SIMD groups, each owning a `sm × sn`
//! sub-tile (`sm = tm / sg_rows`, `sn = tn / sg_cols`) as `sn / 8`
//! accumulators of `sm × 8` f32. Threadgroup memory (seed 002 §2.2, §7.4) is
//! exactly what the planner reports for [`TileVariant::Fused`]:
//!
//! * `a_slice`: the `tm × tk` slice of A as f16, row-major, unpadded
//!   (`tm · tk · 2` bytes), loaded by all threads in `half4`s (rows past M
//!   read as zero) — one buffer: each thread holds its share of the next
//!   slice in registers while the SIMD groups multiply the current one, and
//!   writes it between two barriers (seed 002 §8.2's one cooperative load
//!   per slice);
//! * `b_staging`: one 8×8 f16 fragment per SIMD group (`SG · 128` bytes),
//!   private to it.
//!
//! Per slice each SIMD group's lanes 0–7 hold the packed words of their
//! column in each of the sub-tile's 8-column blocks (loaded a slice ahead,
//! zero past N) and the group's scale of each column (a slice lies inside
//! one group: `tk` divides every group size). For each K step of 8 the SIMD
//! group loads its `sm × 8` A fragment once, then for each 8-column block:
//! lanes 0–7 dequantize their word (value · scale, rounded to f16 as the
//! separate variant does) into the staging fragment as `[column][K]` (two
//! `half4` stores per lane), `simdgroup_barrier`, a transposed 8×8
//! `matrix_load` of the fragment, `simdgroup_barrier` again (the next block
//! overwrites it), and the multiply-accumulate into that block's
//! accumulator. Any M and N work (rows past M and columns past N are never
//! stored); K must be a multiple of `tk`, which every K the formats allow is
//! (a multiple of the group, 32 or more).
//!
//! K splits over threadgroups as in the GEMM ([`FusedQgemmConfig::splits`]):
//! split `z` of the grid's third dimension takes its run of whole slices and
//! writes its f32 partial product to slice `z` of `c`, a workspace of
//! `splits · M · N` f32 that [`super::split::splitk_reduce`] sums into C.
//!
//! The A slice is not padded (the planner's fused rule has no padding), so
//! the rows of an 8×8 fragment at a 32- or 64-byte stride share memory banks
//! on devices with 32 four-byte banks.
//!
//! Parameters: `a4, b, scales, c, m, n, k, group` (`a4` the `half4` view of
//! `A`; `b` the packed words; `group` K values per scale).

use super::gemm::{simdgroup_tiles, MatrixArgs, PackedArgs, SPLIT_K_MAX_ROWS};
use super::quant::dequantized_halves;
use super::split::{check_splits_and_memory, k_splits_for, split_range, SplitArgs};
use super::quant::{Format, VALUES_PER_WORD};
use super::*;
use super::tile::GemmTile;
use enigma_analysis::tiles::{self, TileVariant, WeightFormat, FRAGMENT, STAGING_BYTES_PER_SIMDGROUP};
use enigma_ir::{Access, Kernel, MatrixType, MemFlags, Scalar, Type};

/// K values per slice the kernel takes: each divides the smallest group
/// size (32, [`super::quant::GROUPS`]), so a slice needs one scale per
/// column.
pub const SLICE_DEPTHS: [u32; 3] = [8, 16, 32];

/// Elements per `half4` load or store.
const VEC: u32 = 4;

/// One fused quantized GEMM kernel: weight format, output type, tile, its
/// SIMD-group grid and the K split count (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FusedQgemmConfig {
    /// FP4 or INT4 in seed 002's layout.
    pub format: Format,
    /// C's type: f32 or f16 (with K split, the partial products are f32).
    pub output: DType,
    /// The tile of C per threadgroup (its `tk`: K values per slice of A in
    /// threadgroup memory, one of [`SLICE_DEPTHS`]) and its SIMD-group grid.
    pub tile: GemmTile,
    /// K split over this many threadgroups (1: none), as
    /// [`super::gemm::GemmConfig::splits`].
    pub splits: u32,
}

impl FusedQgemmConfig {
    /// The tile for `m` rows: seed 002 §9.1's table
    /// ([`tiles::select_tile`]: 32×128×32, 64×64×32, 128×64×16 or
    /// 128×128×16) over the planner's partition of 4 SIMD groups
    /// ([`tiles::partition`]: 1×4, 2×2, 4×1, 2×2), unsplit.
    pub fn for_rows(format: Format, output: DType, m: u32) -> FusedQgemmConfig {
        let shape = tiles::select_tile(m, 0, 0);
        let grid = tiles::partition(shape.m, shape.n, tiles::DEFAULT_SIMDGROUPS, None).expect("seed 002's tiles split over 4 SIMD groups").grid;
        FusedQgemmConfig::from_tile(format, output, GemmTile::new(shape.m, shape.n, shape.k, grid[0], grid[1]))
    }

    /// The configuration of `tile` (its shape and SIMD-group grid), unsplit.
    pub fn from_tile(format: Format, output: DType, tile: GemmTile) -> FusedQgemmConfig {
        FusedQgemmConfig { format, output, tile, splits: 1 }
    }

    /// SIMD groups per threadgroup.
    pub fn simdgroups(&self) -> u32 {
        self.tile.sg_rows.saturating_mul(self.tile.sg_cols)
    }

    /// Threads per threadgroup: 32 per SIMD group.
    pub fn threads(&self) -> u32 {
        self.tile.threads()
    }

    /// The planner's name for the weight format.
    fn weights(&self) -> WeightFormat {
        match self.format {
            Format::Fp4 => WeightFormat::Fp4E2M1,
            _ => WeightFormat::Int4U4B8,
        }
    }

    /// Threadgroup memory: the planner's rule for the fused variant
    /// ([`tiles::threadgroup_memory`] with [`TileVariant::Fused`]): the A
    /// slice, `tm · tk · 2` bytes, and one 8×8 f16 staging fragment per SIMD
    /// group, [`STAGING_BYTES_PER_SIMDGROUP`] each.
    pub fn threadgroup_memory_bytes(&self) -> u64 {
        let (a, b) = tiles::threadgroup_memory(self.tile.shape, TileVariant::Fused, self.weights(), self.simdgroups(), 1);
        a.saturating_add(b)
    }

    /// K splits for an `m × n × k` product on this tile that give at least
    /// `threadgroups` threadgroups (the GEMM's rule, [`k_splits_for`]).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, threadgroups: u32) -> u32 {
        k_splits_for(self.tile.shape, m, n, k, threadgroups, SPLIT_K_MAX_ROWS)
    }

    /// Checks that the kernel can be built: FP4 or INT4 weights, SIMD groups
    /// dividing the tile into sub-tiles whose sides are multiples of 8 up to
    /// 64, `tk` one of [`SLICE_DEPTHS`], at most 1024 threads, 1 to
    /// [`super::split::MAX_SPLITS`] K splits, and at most `max_threadgroup_memory_bytes`
    /// of threadgroup memory (the device's; `u64::MAX` checks the shape
    /// alone).
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        if !matches!(self.format, Format::Fp4 | Format::Int4) {
            return Err(ShapeError::new(name, format!("takes fp4 or int4 weights in seed 002's layout, not {}", self.format)));
        }
        let (sm, sn) = simdgroup_tiles(&name, (self.tile.shape.m, self.tile.shape.n), (self.tile.sg_rows, self.tile.sg_cols))?;
        let side = |v: u32| v > 0 && v.is_multiple_of(FRAGMENT) && v <= MatrixType::MAX_SIDE as u32;
        if !(side(sm) && side(sn)) {
            return Err(ShapeError::new(name, format!("SIMD-group tiles of {sm}×{sn} must have sides that are multiples of 8 up to 64")));
        }
        if !SLICE_DEPTHS.contains(&self.tile.shape.k) {
            return Err(ShapeError::new(name, format!("a K slice of {} values; one of {SLICE_DEPTHS:?} (dividing every group size)", self.tile.shape.k)));
        }
        check_threads(&name, self.threads())?;
        check_splits_and_memory(&name, self.splits, self.threadgroup_memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// `qgemm_fused_{format}_{out}_{tm}x{tn}x{tk}_sg{r}x{c}[_splitk]`.
    pub fn name(&self) -> String {
        let split = if self.splits > 1 { "_splitk" } else { "" };
        format!("qgemm_fused_{}_{}_{}x{}x{}_sg{}x{}{split}", self.format, self.output, self.tile.shape.m, self.tile.shape.n, self.tile.shape.k, self.tile.sg_rows, self.tile.sg_cols)
    }

    /// The dispatch for an `m × n` result: tiles along N (x) and M (y),
    /// the K splits along z.
    pub fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        Dispatch::threadgroups([n.div_ceil(self.tile.shape.n), m.div_ceil(self.tile.shape.m), self.splits.max(1)], self.threads())
    }
}

/// The fused quantized GEMM kernel of `cfg` (see the module doc).
///
/// # Panics
/// When `cfg.check(u64::MAX)` fails: plan through it first.
pub fn qgemm_fused(cfg: &FusedQgemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    let (sm, sn, tk) = (cfg.tile.shape.m / cfg.tile.sg_rows, cfg.tile.shape.n / cfg.tile.sg_cols, cfg.tile.shape.k);
    let (steps, blocks) = (tk / FRAGMENT, sn / FRAGMENT);
    let a_tile = MatrixType::new(Scalar::F16, sm as u8, FRAGMENT as u8);
    let b_frag = MatrixType::new(Scalar::F16, FRAGMENT as u8, FRAGMENT as u8);
    let acc_tile = MatrixType::new(Scalar::F32, sm as u8, FRAGMENT as u8);
    let half4 = Type::vector(Scalar::F16, VEC as u8);
    let splits = cfg.splits;
    let threads = cfg.threads();

    let mut k = KernelBuilder::new(cfg.name());
    let a4 = k.buffer(MatrixArgs::A4, half4, Access::Read);
    let b = k.buffer(MatrixArgs::B, Type::U32, Access::Read);
    let scales = k.buffer(PackedArgs::SCALES, Type::F16, Access::Read);
    // With K split, `c` is the f32 workspace of partial products.
    let c = k.buffer(SplitArgs::C, if splits > 1 { Type::F32 } else { cfg.output.ty(1) }, Access::ReadWrite);
    let m = k.value(MatrixArgs::M, Type::U32);
    let n = k.value(MatrixArgs::N, Type::U32);
    let kk = k.value(MatrixArgs::K, Type::U32);
    let group = k.value(PackedArgs::GROUP, Type::U32);
    let a_slice = k.threadgroup_array("a_slice", half4, cfg.tile.shape.m * tk / VEC);
    let frag_vecs = (STAGING_BYTES_PER_SIMDGROUP / u64::from(2 * VEC)) as u32;
    let staging = k.threadgroup_array("b_staging", half4, cfg.simdgroups() * frag_vecs);

    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let m0 = k.let_("m0", tg.y() * cfg.tile.shape.m);
    let n0 = k.let_("n0", tg.x() * cfg.tile.shape.n);
    let sg_m = k.let_("sg_m", sg / cfg.tile.sg_cols * sm);
    let sg_n = k.let_("sg_n", sg % cfg.tile.sg_cols * sn);
    // Split z takes whole slices [k_begin, k_end) and its own slice of `c`.
    let split = tg.z();
    let c_base = k.let_("c_base", split * m * n);
    let (k_begin, k_end) = split_range(&mut k, kk, split, splits, tk);
    // This lane's column in each 8-column block (lanes 0–7 dequantize).
    let dequantizer = k.let_("dequantizer", lane.lt(FRAGMENT));
    let cols: Vec<Ex> = (0..blocks).map(|ni| k.let_(&format!("col{ni}"), n0 + sg_n + ni * FRAGMENT + lane)).collect();
    // This SIMD group's staging fragment, in elements and in half4s.
    let frag = k.let_("frag", sg * frag_vecs);

    let a_slot = SliceLoad { a4, a_slice, m, kk, m0, lid, threads, tk, units: cfg.tile.shape.m * tk / VEC };
    let held = a_slot.registers(&mut k);
    let words: [Vec<Var>; 2] = ["cur", "next"].map(|t| (0..steps * blocks).map(|i| k.var(&format!("{t}_word{i}"), 0u32)).collect());
    let slice_scales: [Vec<Var>; 2] = ["cur", "next"].map(|t| (0..blocks).map(|ni| k.var(&format!("{t}_scale{ni}"), 0.0f32)).collect());
    let accs: Vec<Var> = (0..blocks).map(|ni| k.var(&format!("acc{ni}"), matrix_fill(acc_tile, 0.0f32))).collect();

    // Lanes 0–7: the words and scales of slice `k0` for their columns, zero
    // past N.
    let fetch_b = |k: &mut KernelBuilder, tag: &str, k0: Ex, into: usize| {
        k.if_(dequantizer, |k| {
            for (ni, col) in cols.iter().enumerate() {
                k.if_(col.lt(n), |k| {
                    k.assign(slice_scales[into][ni], scales.get(k0 / group * n + *col).cast(Type::F32));
                    for kt in 0..steps {
                        let at = k.let_(&format!("{tag}at{kt}_{ni}"), (k0 / VALUES_PER_WORD as u32 + kt) * n + *col);
                        k.assign(words[into][kt as usize * blocks as usize + ni], b.get(at));
                    }
                });
            }
        });
    };

    k.if_(k_end.gt(k_begin), |k| {
        a_slot.fetch(k, "first_", &held, k_begin);
        a_slot.commit(k, "first_", &held);
        fetch_b(k, "first_", k_begin, 0);
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.for_range("k0", k_begin, k_end, tk, |k, k0| {
            let next = k.let_("next", k0 + tk);
            k.if_(next.lt(k_end), |k| {
                a_slot.fetch(k, "next_", &held, next);
                fetch_b(k, "next_", next, 1);
            });
            for kt in 0..steps {
                let ma = k.let_(&format!("ma{kt}"), matrix_load(a_tile, a_slice, sg_m * tk + kt * FRAGMENT, tk, false));
                for (ni, acc) in accs.iter().enumerate() {
                    k.if_(dequantizer, |k| {
                        let word = words[0][kt as usize * blocks as usize + ni].get();
                        let values = dequantized_halves(k, &format!("w{kt}_{ni}"), cfg.format, word, slice_scales[0][ni].get());
                        // Column `lane` of the fragment, stored as [column][K].
                        let at = k.let_(&format!("st{kt}_{ni}"), frag + lane * 2u32);
                        k.store(staging.at(at), vector(half4, &values[..4]));
                        k.store(staging.at(at + 1u32), vector(half4, &values[4..]));
                    });
                    k.simdgroup_barrier(MemFlags::Threadgroup);
                    let mb = k.let_(&format!("mb{kt}_{ni}"), matrix_load(b_frag, staging, frag * VEC, FRAGMENT, true));
                    k.simdgroup_barrier(MemFlags::Threadgroup);
                    k.assign(*acc, matrix_multiply_accumulate(ma, mb, acc.get()));
                }
            }
            k.threadgroup_barrier(MemFlags::Threadgroup);
            k.if_(next.lt(k_end), |k| {
                a_slot.commit(k, "next_", &held);
                for (cur, nxt) in words[0].iter().zip(&words[1]).chain(slice_scales[0].iter().zip(&slice_scales[1])) {
                    k.assign(*cur, nxt.get());
                }
            });
            k.threadgroup_barrier(MemFlags::Threadgroup);
        });
    });

    for (ni, acc) in accs.iter().enumerate() {
        for i in 0..acc_tile.per_lane() as u8 {
            let row = k.let_(&format!("row{ni}_{i}"), m0 + sg_m + matrix_coord(acc_tile, i, false));
            let col = k.let_(&format!("ccol{ni}_{i}"), n0 + sg_n + ni as u32 * FRAGMENT + matrix_coord(acc_tile, i, true));
            k.if_(row.lt(m).and(col.lt(n)), |k| store_f32(k, c, c_base + row * n + col, thread_element(acc.get(), i)));
        }
    }
    finish(k)
}

/// The cooperative load of A's `tm × tk` slice: `units` `half4`s dealt
/// round-robin over the threadgroup's threads, row-major (`tk / 4` per
/// row), rows past M zero.
struct SliceLoad {
    a4: Mem,
    a_slice: Mem,
    m: Ex,
    kk: Ex,
    m0: Ex,
    lid: Ex,
    threads: u32,
    tk: u32,
    units: u32,
}

impl SliceLoad {
    /// The registers of this thread's share (zero where it has no last one).
    fn registers(&self, k: &mut KernelBuilder) -> Vec<Var> {
        let zero = vector(Type::vector(Scalar::F16, VEC as u8), &[lit(Scalar::F16, 0.0)]);
        (0..self.units.div_ceil(self.threads)).map(|u| k.var(&format!("a_held{u}"), zero)).collect()
    }

    /// Runs `body` with the index `j` of this thread's `half4` number `u`,
    /// on the threads that have one.
    fn share(&self, k: &mut KernelBuilder, name: &str, u: u32, body: impl FnOnce(&mut KernelBuilder, Ex)) {
        let j = k.let_(name, self.lid + u * self.threads);
        if (u + 1) * self.threads <= self.units {
            body(k, j);
        } else {
            k.if_(j.lt(self.units), |k| body(k, j));
        }
    }

    /// Loads this thread's share of the slice at `k0` into `regs`.
    fn fetch(&self, k: &mut KernelBuilder, tag: &str, regs: &[Var], k0: Ex) {
        let per_row = self.tk / VEC;
        for (u, reg) in regs.iter().enumerate() {
            self.share(k, &format!("{tag}aj{u}"), u as u32, |k, j| {
                let row = k.let_(&format!("{tag}arow{u}"), self.m0 + j / per_row);
                let at = k.let_(&format!("{tag}aat{u}"), (row * self.kk + k0) / VEC + j % per_row);
                let zero = vector(Type::vector(Scalar::F16, VEC as u8), &[lit(Scalar::F16, 0.0)]);
                k.if_else(row.lt(self.m), |k| k.assign(*reg, self.a4.get(at)), |k| k.assign(*reg, zero));
            });
        }
    }

    /// Writes `regs` to the threadgroup slice.
    fn commit(&self, k: &mut KernelBuilder, tag: &str, regs: &[Var]) {
        for (u, reg) in regs.iter().enumerate() {
            self.share(k, &format!("{tag}asj{u}"), u as u32, |k, j| k.store(self.a_slice.at(j), reg.get()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::tile::TileShape;

    /// Seed 002's four configurations (§6, with the planner's SIMD-group
    /// grids) are accepted, and each kernel declares the threadgroup memory
    /// the planner reports for the fused variant (seed 002 §2.3's table).
    #[test]
    fn the_seed_configurations_declare_the_planned_memory() {
        for (tile, seed_bytes) in [((64, 64, 32, 2, 2), 4608), ((128, 64, 16, 4, 1), 4608), ((32, 128, 32, 1, 4), 2560), ((128, 128, 16, 2, 2), 4608)] {
            let (tm, tn, tk, r, c) = tile;
            let cfg = FusedQgemmConfig::from_tile(Format::Fp4, DType::F16, GemmTile::new(tm, tn, tk, r, c));
            assert!(cfg.check(MAX_THREADGROUP_MEMORY_BYTES).is_ok(), "{}", cfg.name());
            let declared: u64 = qgemm_fused(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
            assert_eq!((cfg.threadgroup_memory_bytes(), declared), (seed_bytes, seed_bytes), "{}", cfg.name());
        }
        // §9.1's table, on the planner's grids.
        let grid = |m| {
            let GemmTile { shape: TileShape { m: tm, n: tn, k: tk }, sg_rows, sg_cols } = FusedQgemmConfig::for_rows(Format::Int4, DType::F32, m).tile;
            (tm, tn, tk, sg_rows, sg_cols)
        };
        assert_eq!([grid(1), grid(40), grid(200), grid(300)], [(32, 128, 32, 1, 4), (64, 64, 32, 2, 2), (128, 64, 16, 4, 1), (128, 128, 16, 2, 2)]);
    }

    #[test]
    fn configurations_are_checked_with_the_numbers() {
        let cfg = FusedQgemmConfig::for_rows(Format::Int4, DType::F16, 40);
        assert_eq!(cfg.name(), "qgemm_fused_int4_f16_64x64x32_sg2x2");
        assert_eq!(FusedQgemmConfig { splits: 3, ..cfg }.name(), "qgemm_fused_int4_f16_64x64x32_sg2x2_splitk");
        assert_eq!(FusedQgemmConfig { splits: 3, ..cfg }.dispatch(100, 65).size, [2, 2, 3]);
        let err = |c: FusedQgemmConfig, max: u64| c.check(max).unwrap_err().to_string();
        assert!(err(FusedQgemmConfig { tile: GemmTile { shape: TileShape { k: 64, ..cfg.tile.shape }, ..cfg.tile }, ..cfg }, u64::MAX).contains("a K slice of 64 values; one of [8, 16, 32]"));
        assert!(err(FusedQgemmConfig { tile: GemmTile { sg_rows: 3, ..cfg.tile }, ..cfg }, u64::MAX).contains("3×2 SIMD groups do not divide a 64×64 tile"));
        assert!(err(FusedQgemmConfig { tile: GemmTile { shape: TileShape { n: 256, ..cfg.tile.shape }, sg_cols: 2, ..cfg.tile }, ..cfg }, u64::MAX).contains("SIMD-group tiles of 32×128"));
        assert!(err(FusedQgemmConfig { splits: 65, ..cfg }, u64::MAX).contains("65 K splits; between 1 and 64"));
        assert!(err(FusedQgemmConfig { format: Format::MlxAffine, ..cfg }, u64::MAX).contains("not mlx_affine"));
        // 64 × 32 halves and 4 fragments of 128 bytes.
        assert_eq!(err(cfg, 4000), "qgemm_fused_int4_f16_64x64x32_sg2x2: needs 4608 bytes of threadgroup memory (limit 4000)");
    }
}
