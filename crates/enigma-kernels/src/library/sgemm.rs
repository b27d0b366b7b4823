//! A register-blocked SIMT GEMM for f32 inputs: `C = alpha·op(A)·op(B) +
//! beta·C`, row-major, `op` the identity or the transpose, f32 accumulation,
//! C in any [`DType`], batched over the grid's third dimension, K optionally
//! split over threadgroups — the semantics of [`super::gemm::GemmConfig`]
//! for f32 input, on scalar `fma`s instead of SIMD-group matrices: CUDA's
//! tensor cores have no exact f32 form, so the SIMD-group kernel lowers f32
//! tiles to an exact but slow shuffle-and-`fmaf` path there.
//!
//! A threadgroup computes a `tm × tn` tile of C with `(tm / rm) · (tn / rn)`
//! threads, each holding an `rm × rn` block of C in registers (8×8 by
//! default: 64 accumulators). The thread's rows are `rm / 4` runs of 4
//! consecutive rows, one in each of `rm / 4` equal bands of the tile (its
//! columns likewise), so that it reads its operands as `float4`s and the
//! threads of a SIMD group read consecutive `float4`s of B.
//!
//! Per step of `tk` along K the threadgroup holds the `tk × tm` slice of
//! op(A) *transposed* (`As[k][m]`) and the `tk × tn` slice of op(B)
//! (`Bs[k][n]`) in threadgroup memory as `float4`s, each row padded by one
//! `float4` ([`PAD`]) so that the transposing stores fall in different
//! banks. Each K step of the multiply reads `rm / 4 + rn / 4` `float4`s and
//! makes `rm · rn` `fma`s. An operand stored with K along its rows (A
//! transposed, B as is) is loaded as `float4`s along the row where the row
//! length is a multiple of 4 and the vector lies inside the matrix; one
//! stored with K along its columns (A as is, B transposed) is gathered as
//! 4 scalars from 4 consecutive rows at one K, consecutive threads taking
//! consecutive K (whole 32-byte sectors); elements past the matrix are
//! zero. There are two stages of threadgroup memory: while the threads
//! multiply slice `i` from one, they already hold slice `i + 1` in
//! registers (loaded before the multiply) and write it to the other after
//! it, with one barrier per slice.
//!
//! Every output is accumulated with `fma` in increasing K order starting
//! from 0 (the zeros past K change no sum but the sign of a zero one), as
//! the simulator's SIMD-group multiply does, then `C = alpha·acc + beta·C`
//! (C read only where beta is not zero); with K split, each threadgroup
//! writes its partial sum to its own f32 slice of `c` for
//! [`super::split::splitk_reduce`].
//!
//! Parameters: `a, b, c, m, n, k, alpha, beta, a_stride, a4, b4`, as the SIMD-group
//! GEMM's (`a4`, `b4` the `float4` views of `a` and `b`), and with a row
//! bias (`SgemmConfig::row_bias`) `bias`.

use super::gemm::{MatrixArgs, PlainArgs};
use super::split::{check_splits_and_memory, k_splits_for, split_range, SplitArgs};
use super::tile::TileShape;
use super::*;
use enigma_ir::{Access, Kernel, MemFlags, Type};

/// The most rows of C for which the SIMT GEMM splits K
/// ([`SgemmConfig::splits_for`]): the split still pays at 128 rows, where
/// the tensor-core GEMMs no longer gain from it
/// ([`super::gemm::SPLIT_K_MAX_ROWS`]; `BENCHMARKS.md`, the SIMT f32 GEMM).
pub const SIMT_SPLIT_K_MAX_ROWS: u32 = 128;

/// Elements of each operand row one vector holds (`float4`).
const VEC: u32 = 4;

/// Padding after each row of a staged slice, in `float4`s.
pub const PAD: u32 = 1;

/// Slices of K in threadgroup memory: one multiplied, one being written.
pub const STAGES: u32 = 2;

/// K values per slice [`SgemmConfig::deepened_for`] takes where two stages
/// fit (the deeper slice measured faster: `BENCHMARKS.md`, the SIMT f32
/// GEMM).
pub const DEEP_TK: u32 = 16;

/// The accepted sides of a thread's block of C (`rm`, `rn`).
pub const BLOCK_SIDES: [u32; 2] = [4, 8];

/// The most threads [`SgemmConfig::with_threads`] gives blocks of more
/// than 4×4: a CUDA SM's 65536 registers leave up to 255 per thread at
/// 256 threads, 128 at 512 — too few for 64 accumulators, their operands and
/// the next slice without spilling.
pub const WIDE_BLOCK_THREADS: u32 = 256;

/// One SIMT GEMM kernel's shape: f32 input, `output` for C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SgemmConfig {
    /// C's element type (f32 accumulation, rounded once on the store).
    pub output: DType,
    /// The tile of C per threadgroup (`m × n`) and the K values per staged
    /// slice (`k`).
    pub tile: TileShape,
    /// Rows of C per thread (4 or 8).
    pub rm: u32,
    /// Columns of C per thread (4 or 8).
    pub rn: u32,
    /// A is stored `k × m` (op(A) = Aᵀ).
    pub trans_a: bool,
    /// B is stored `n × k` (op(B) = Bᵀ).
    pub trans_b: bool,
    /// K split over this many threadgroups per tile, as
    /// [`super::gemm::GemmConfig::splits`] (partial sums in an f32
    /// workspace of `splits · M · N` per batch).
    pub splits: u32,
    /// `bias[row]` (f32, `m` values) added to each row of C before it is
    /// rounded, unsplit only: a convolution's bias per output channel.
    pub row_bias: bool,
}

impl SgemmConfig {
    /// The default: a 128×128 tile, 8 deep, 256 threads of 8×8 each.
    pub fn new(output: DType) -> SgemmConfig {
        SgemmConfig { output, tile: TileShape::new(128, 128, 8), rm: 8, rn: 8, trans_a: false, trans_b: false, splits: 1, row_bias: false }
    }

    /// The tile for `m` rows: up to 64 rows, the fewest of 16, 32 or 64
    /// that cover them, in 4×8 blocks (64, 128 or 256 threads), so that a
    /// threadgroup computes few rows past M (the SIMD-group GEMM's small-M
    /// tiles do the same); above, [`SgemmConfig::new`]'s 128×128.
    pub fn for_rows(output: DType, m: u32) -> SgemmConfig {
        let base = SgemmConfig::new(output);
        match m {
            0..=64 => SgemmConfig { tile: TileShape { m: m.next_power_of_two().clamp(16, 64), ..base.tile }, rm: 4, ..base },
            _ => base,
        }
    }

    /// The tile for an `m × n` output on a GPU of `compute_units`:
    /// [`SgemmConfig::for_rows`], except that above 64 rows, where 128×128
    /// tiles would leave compute units without one, 128×64 tiles (128
    /// threads; `BENCHMARKS.md`, the SIMT f32 GEMM).
    pub fn for_shape(output: DType, m: u32, n: u32, compute_units: u32) -> SgemmConfig {
        let cfg = SgemmConfig::for_rows(output, m);
        if m > 64 && m.div_ceil(cfg.tile.m) * n.div_ceil(cfg.tile.n) < compute_units {
            return SgemmConfig { tile: TileShape { n: 64, ..cfg.tile }, ..cfg };
        }
        cfg
    }

    /// This configuration with [`DEEP_TK`] K values per slice where its
    /// threadgroup memory then fits `max_threadgroup_memory_bytes`, else
    /// as it is.
    pub fn deepened_for(self, max_threadgroup_memory_bytes: u64) -> SgemmConfig {
        let deep = SgemmConfig { tile: TileShape { k: DEEP_TK, ..self.tile }, ..self };
        if self.tile.k < DEEP_TK && deep.threadgroup_memory_bytes() <= max_threadgroup_memory_bytes {
            deep
        } else {
            self
        }
    }

    /// The blocks over `threads` threads (a power of two): this
    /// configuration's up to [`WIDE_BLOCK_THREADS`] threads, 4×4 above, in a
    /// grid of at most twice as many rows of threads as columns — so with
    /// 8×8 blocks 256 threads are the 128×128 tile, 128 a 128×64 one, 64 a
    /// 64×64 one, and 1024 threads of 4×4 a 128×128 tile again.
    pub fn with_threads(self, threads: u32) -> Result<SgemmConfig, ShapeError> {
        let threads = check_threads(&self.name(), threads)?;
        if !threads.is_power_of_two() {
            return Err(ShapeError::new(self.name(), format!("{threads} threads; the tile splits over a power of two")));
        }
        let (rm, rn) = if threads > WIDE_BLOCK_THREADS { (4, 4) } else { (self.rm, self.rn) };
        let cols = 1 << (threads.trailing_zeros() / 2);
        let cfg = SgemmConfig { tile: TileShape { m: threads / cols * rm, n: cols * rn, ..self.tile }, rm, rn, ..self };
        cfg.check(u64::MAX)?;
        Ok(cfg)
    }

    /// Threads per threadgroup: one per `rm × rn` block of the tile.
    pub fn threads(&self) -> u32 {
        (self.tile.m / self.rm.max(1)) * (self.tile.n / self.rn.max(1))
    }

    /// Threadgroup memory: [`STAGES`] slices of op(A) (`tk` rows of `tm`)
    /// and of op(B) (`tk` rows of `tn`), f32, each row padded by [`PAD`]
    /// `float4`s.
    pub fn threadgroup_memory_bytes(&self) -> u64 {
        let row = |side: u32| (side / VEC + PAD) as u64 * 16;
        STAGES as u64 * self.tile.k as u64 * (row(self.tile.m) + row(self.tile.n))
    }

    /// K splits for an `m × n × k` product aiming at `threadgroups`
    /// threadgroups (the SIMD-group GEMM's rule, [`k_splits_for`]).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, threadgroups: u32) -> u32 {
        k_splits_for(self.tile, m, n, k, threadgroups, SIMT_SPLIT_K_MAX_ROWS)
    }

    /// Checks the shape: blocks of 4 or 8, tile sides multiples of the
    /// blocks and of 4, a threadgroup size the library takes, 1 to 64 K
    /// values per slice, 1 to [`super::split::MAX_SPLITS`] splits, and at most
    /// `max_threadgroup_memory_bytes` of threadgroup memory (the device's;
    /// `u64::MAX` checks the shape alone).
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        if !(BLOCK_SIDES.contains(&self.rm) && BLOCK_SIDES.contains(&self.rn)) {
            return Err(ShapeError::new(name, format!("a {}×{} block per thread; sides of 4 or 8", self.rm, self.rn)));
        }
        if self.tile.m == 0 || self.tile.n == 0 || !self.tile.m.is_multiple_of(self.rm) || !self.tile.n.is_multiple_of(self.rn) {
            return Err(ShapeError::new(name, format!("{}×{} blocks do not divide a {}×{} tile", self.rm, self.rn, self.tile.m, self.tile.n)));
        }
        check_threads(&name, self.threads())?;
        if !(1..=64).contains(&self.tile.k) {
            return Err(ShapeError::new(name, format!("{} K values per slice; between 1 and 64", self.tile.k)));
        }
        if self.row_bias && self.splits > 1 {
            return Err(ShapeError::new(name, format!("a row bias with {} K splits; the bias is added by an unsplit kernel's epilogue", self.splits)));
        }
        check_splits_and_memory(&name, self.splits, self.threadgroup_memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// `sgemm_{out}_{tm}x{tn}x{tk}_r{rm}x{rn}[_ta][_tb][_splitk][_bias]`.
    pub fn name(&self) -> String {
        format!(
            "sgemm_{}_{}x{}x{}_r{}x{}{}{}{}{}",
            self.output,
            self.tile.m,
            self.tile.n,
            self.tile.k,
            self.rm,
            self.rn,
            if self.trans_a { "_ta" } else { "" },
            if self.trans_b { "_tb" } else { "" },
            if self.splits > 1 { "_splitk" } else { "" },
            if self.row_bias { "_bias" } else { "" }
        )
    }

    /// The dispatch for an `m × n` result, `batch` times (times the splits).
    pub fn dispatch(&self, m: u32, n: u32, batch: u32) -> Dispatch {
        Dispatch::threadgroups([n.div_ceil(self.tile.n), m.div_ceil(self.tile.m), batch * self.splits.max(1)], self.threads())
    }
}

/// One input as the kernel stages it: the stored matrix (`rows × cols`
/// from `base`), its scalar and `float4` views, the staged slice, the
/// tile's origin and extent along M (A) or N (B), and whether K runs along
/// the stored rows.
struct Operand {
    name: &'static str,
    scalar: Mem,
    vector: Mem,
    staged: Mem,
    base: Ex,
    rows: Ex,
    cols: Ex,
    origin: Ex,
    side: u32,
    k_is_row: bool,
}

/// One `float4` of a slice that a thread loads: its K offset in the slice
/// and its first element along M or N, guarded by `valid` where the
/// threads do not divide the slice.
struct Slot {
    kr: Ex,
    c: Ex,
    valid: Option<Ex>,
}

impl Operand {
    /// `float4`s per staged row.
    fn ld(&self) -> u32 {
        self.side / VEC + PAD
    }

    /// `float4`s per stage.
    fn stage_len(&self, cfg: &SgemmConfig) -> u32 {
        cfg.tile.k * self.ld()
    }

    /// This thread's `float4`s of each slice, dealt round-robin: along the
    /// stored row (consecutive threads, consecutive vectors) where K runs
    /// along the rows, else along K (consecutive threads, consecutive K of
    /// one row).
    fn slots(&self, k: &mut KernelBuilder, cfg: &SgemmConfig, lid: Ex) -> Vec<Slot> {
        let count = cfg.tile.k * self.side / VEC;
        let threads = cfg.threads();
        (0..count.div_ceil(threads))
            .map(|u| {
                let j = k.let_(&format!("{}_j{u}", self.name), lid + u * threads);
                let (kr, c) = if self.k_is_row { (j / (self.side / VEC), j % (self.side / VEC) * VEC) } else { (j % cfg.tile.k, j / cfg.tile.k * VEC) };
                let kr = k.let_(&format!("{}_kr{u}", self.name), kr);
                let c = k.let_(&format!("{}_c{u}", self.name), c);
                Slot { kr, c, valid: ((u + 1) * threads > count).then(|| j.lt(count)) }
            })
            .collect()
    }

    /// Loads this thread's `float4`s of the slice starting at `k0` into
    /// `regs`, zeros past the matrix; `vec_ok` says the stored rows are
    /// whole `float4`s.
    fn fetch(&self, k: &mut KernelBuilder, tag: &str, slots: &[Slot], regs: &[Var], k0: Ex, vec_ok: Ex) {
        let f4 = DType::F32.ty(VEC as u8);
        for (u, (slot, reg)) in slots.iter().zip(regs).enumerate() {
            let name = format!("{tag}{}{u}", self.name);
            let body = |k: &mut KernelBuilder| {
                let parts: Vec<Var> = (0..VEC).map(|e| k.var(&format!("{name}_e{e}"), 0.0f32)).collect();
                if self.k_is_row {
                    let (row, col) = (k.let_(&format!("{name}_row"), k0 + slot.kr), k.let_(&format!("{name}_col"), self.origin + slot.c));
                    let at = k.let_(&format!("{name}_at"), self.base + row * self.cols + col);
                    let inside = row.lt(self.rows);
                    k.if_else(
                        vec_ok.and(inside).and((col + VEC).le(self.cols)),
                        |k| k.assign(*reg, self.vector.get(at / VEC)),
                        |k| {
                            for (e, part) in parts.iter().enumerate() {
                                let e = e as u32;
                                k.if_(inside.and((col + e).lt(self.cols)), |k| k.assign(*part, self.scalar.get(at + e)));
                            }
                            let parts: Vec<Ex> = parts.iter().map(|p| p.get()).collect();
                            k.assign(*reg, vector(f4, &parts));
                        },
                    );
                } else {
                    let (row, col) = (k.let_(&format!("{name}_row"), self.origin + slot.c), k.let_(&format!("{name}_col"), k0 + slot.kr));
                    let at = k.let_(&format!("{name}_at"), self.base + row * self.cols + col);
                    let inside = col.lt(self.cols);
                    for (e, part) in parts.iter().enumerate() {
                        let e = e as u32;
                        k.if_(inside.and((row + e).lt(self.rows)), |k| k.assign(*part, self.scalar.get(at + e * self.cols)));
                    }
                    let parts: Vec<Ex> = parts.iter().map(|p| p.get()).collect();
                    k.assign(*reg, vector(f4, &parts));
                }
            };
            match slot.valid {
                Some(valid) => k.if_(valid, body),
                None => body(k),
            }
        }
    }

    /// Writes the registers to `stage` of the staged slice: `float4` `c / 4`
    /// of row `kr`.
    fn commit(&self, k: &mut KernelBuilder, cfg: &SgemmConfig, slots: &[Slot], regs: &[Var], stage: Ex) {
        for (slot, reg) in slots.iter().zip(regs) {
            let at = stage * self.stage_len(cfg) + slot.kr * self.ld() + slot.c / VEC;
            match slot.valid {
                Some(valid) => k.if_(valid, |k| k.store(self.staged.at(at), reg.get())),
                None => k.store(self.staged.at(at), reg.get()),
            }
        }
    }
}

/// The SIMT GEMM kernel of `cfg` (see the module doc).
///
/// # Panics
/// When `cfg` fails [`SgemmConfig::check`] with no memory limit: plan
/// through it first (the device's threadgroup memory is the caller's to
/// check).
pub fn sgemm(cfg: &SgemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    let splits = cfg.splits.max(1);
    let f4 = DType::F32.ty(VEC as u8);
    let mut k = KernelBuilder::new(cfg.name());
    let a = k.buffer(MatrixArgs::A, Type::F32, Access::Read);
    let b = k.buffer(MatrixArgs::B, Type::F32, Access::Read);
    // With K split, `c` is the f32 workspace of partial sums.
    let c = k.buffer(SplitArgs::C, if splits > 1 { Type::F32 } else { cfg.output.ty(1) }, Access::ReadWrite);
    let m = k.value(MatrixArgs::M, Type::U32);
    let n = k.value(MatrixArgs::N, Type::U32);
    let kk = k.value(MatrixArgs::K, Type::U32);
    let alpha = k.value(PlainArgs::ALPHA, Type::F32);
    let beta = k.value(PlainArgs::BETA, Type::F32);
    let a_stride = k.value(PlainArgs::A_STRIDE, Type::U32);
    let a4 = k.buffer(MatrixArgs::A4, f4, Access::Read);
    let bias = cfg.row_bias.then(|| k.buffer(PlainArgs::BIAS, Type::F32, Access::Read));
    let b4 = k.buffer(PlainArgs::B4, f4, Access::Read);
    let a_s = k.threadgroup_array("a_slice", f4, STAGES * cfg.tile.k * (cfg.tile.m / VEC + PAD));
    let b_s = k.threadgroup_array("b_slice", f4, STAGES * cfg.tile.k * (cfg.tile.n / VEC + PAD));
    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let (threads_m, threads_n) = (cfg.tile.m / cfg.rm, cfg.tile.n / cfg.rn);
    let tx = k.let_("tx", lid % threads_n);
    let ty = k.let_("ty", lid / threads_n);
    let m0 = k.let_("m0", tg.y() * cfg.tile.m);
    let n0 = k.let_("n0", tg.x() * cfg.tile.n);
    // With K split, z numbers (batch, split) pairs; a split takes whole
    // slices of K (as the SIMD-group GEMM).
    let batch = k.let_("batch", tg.z() / splits);
    let split = k.let_("split", tg.z() % splits);
    let c_base = k.let_("c_base", tg.z() * m * n);
    let (k_begin, k_end) = split_range(&mut k, kk, split, splits, cfg.tile.k);
    let slices = k.let_("slices", (k_end - k_begin + (cfg.tile.k - 1)) / cfg.tile.k);
    let ops = [
        Operand {
            name: "a",
            scalar: a,
            vector: a4,
            staged: a_s,
            base: k.let_("a_base", batch * a_stride),
            rows: if cfg.trans_a { kk } else { m },
            cols: if cfg.trans_a { m } else { kk },
            origin: m0,
            side: cfg.tile.m,
            k_is_row: cfg.trans_a,
        },
        Operand {
            name: "b",
            scalar: b,
            vector: b4,
            staged: b_s,
            base: k.let_("b_base", batch * kk * n),
            rows: if cfg.trans_b { n } else { kk },
            cols: if cfg.trans_b { kk } else { n },
            origin: n0,
            side: cfg.tile.n,
            k_is_row: !cfg.trans_b,
        },
    ];
    // Whole `float4` rows (the batch strides are then multiples of 4 too).
    let vec_ok: Vec<Ex> = ops.iter().map(|op| k.let_(&format!("{}_vec_ok", op.name), (op.cols % VEC).eq(0u32))).collect();
    let slots: Vec<Vec<Slot>> = ops.iter().map(|op| op.slots(&mut k, cfg, lid)).collect();
    let zero4 = vector(f4, &[f(0.0)]);
    let held: Vec<Vec<Var>> = ops.iter().zip(&slots).map(|(op, s)| (0..s.len()).map(|u| k.var(&format!("{}_held{u}", op.name), zero4)).collect()).collect();
    let acc: Vec<Vec<Var>> = (0..cfg.rm).map(|i| (0..cfg.rn).map(|j| k.var(&format!("acc{i}_{j}"), 0.0f32)).collect()).collect();
    k.if_(slices.gt(0u32), |k| {
        for (i, op) in ops.iter().enumerate() {
            op.fetch(k, "first_", &slots[i], &held[i], k_begin, vec_ok[i]);
            op.commit(k, cfg, &slots[i], &held[i], 0u32.into());
        }
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.for_range("s", 0u32, slices, 1u32, |k, s| {
            let next = k.let_("next", s + 1u32);
            let more = next.lt(slices);
            k.if_(more, |k| {
                for (i, op) in ops.iter().enumerate() {
                    op.fetch(k, "next_", &slots[i], &held[i], k_begin + next * cfg.tile.k, vec_ok[i]);
                }
            });
            let stage = k.let_("stage", s % STAGES);
            let a_at = k.let_("a_at", stage * ops[0].stage_len(cfg) + ty);
            let b_at = k.let_("b_at", stage * ops[1].stage_len(cfg) + tx);
            for kr in 0..cfg.tile.k {
                // The thread's `float4`s of row kr: one per band of the tile.
                let frag = |k: &mut KernelBuilder, op: &Operand, at: Ex, bands: u32, per_band: u32| -> Vec<Ex> {
                    (0..bands).map(|h| k.let_(&format!("{}_frag{kr}_{h}", op.name), op.staged.get(at + (kr * op.ld() + h * per_band)))).collect()
                };
                let fa = frag(k, &ops[0], a_at, cfg.rm / VEC, threads_m);
                let fb = frag(k, &ops[1], b_at, cfg.rn / VEC, threads_n);
                for (i, row) in acc.iter().enumerate() {
                    let av = fa[i / VEC as usize].component((i % VEC as usize) as u8);
                    for (j, cell) in row.iter().enumerate() {
                        let bv = fb[j / VEC as usize].component((j % VEC as usize) as u8);
                        k.assign(*cell, fma(av, bv, cell.get()));
                    }
                }
            }
            k.if_(more, |k| {
                let fill = k.let_("fill", next % STAGES);
                for (i, op) in ops.iter().enumerate() {
                    op.commit(k, cfg, &slots[i], &held[i], fill);
                }
            });
            k.threadgroup_barrier(MemFlags::Threadgroup);
        });
    });
    // Element (i, j) of the block: row `i % 4` of band `i / 4`, likewise
    // for the columns.
    let rows: Vec<Ex> = (0..cfg.rm).map(|i| k.let_(&format!("row{i}"), m0 + (i / VEC * threads_m * VEC + i % VEC) + ty * VEC)).collect();
    let cols: Vec<Ex> = (0..cfg.rn).map(|j| k.let_(&format!("col{j}"), n0 + (j / VEC * threads_n * VEC + j % VEC) + tx * VEC)).collect();
    for (i, row) in rows.iter().enumerate() {
        for (j, col) in cols.iter().enumerate() {
            k.if_(row.lt(m).and(col.lt(n)), |k| {
                let at = k.let_(&format!("at{i}_{j}"), c_base + *row * n + *col);
                let sum = acc[i][j].get();
                if splits > 1 {
                    store_f32(k, c, at, sum);
                    return;
                }
                let v = k.var(&format!("v{i}_{j}"), alpha * sum);
                k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + beta * load_f32(c, at)));
                if let Some(bias) = bias {
                    k.assign(v, v.get() + bias.get(*row));
                }
                store_f32(k, c, at, v.get());
            });
        }
    }
    finish(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_checked_with_the_numbers() {
        let cfg = SgemmConfig::new(DType::F32);
        // 2 stages × 8 rows × (33 + 33) float4s.
        assert_eq!((cfg.threads(), cfg.threadgroup_memory_bytes()), (256, 2 * 8 * 66 * 16));
        assert!(cfg.check(MAX_THREADGROUP_MEMORY_BYTES).is_ok());
        let declared: u64 = sgemm(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
        assert_eq!(declared, cfg.threadgroup_memory_bytes());
        assert_eq!(cfg.name(), "sgemm_f32_128x128x8_r8x8");
        assert_eq!(cfg.dispatch(129, 100, 2).size, [1, 2, 2]);
        let deep = SgemmConfig { tile: TileShape { k: 32, ..cfg.tile }, ..cfg };
        let err = deep.check(MAX_THREADGROUP_MEMORY_BYTES).unwrap_err().to_string();
        assert!(err.contains("needs 67584 bytes of threadgroup memory (limit 32768)"), "{err}");
        let odd = SgemmConfig { rm: 6, ..cfg };
        assert!(odd.check(u64::MAX).unwrap_err().to_string().contains("a 6×8 block per thread"));
        let ragged = SgemmConfig { tile: TileShape { n: 100, ..cfg.tile }, ..cfg };
        assert!(ragged.check(u64::MAX).unwrap_err().to_string().contains("8×8 blocks do not divide a 128×100 tile"));
        let tiles = |t| cfg.with_threads(t).map(|c| (c.tile.m, c.tile.n));
        assert_eq!((tiles(256), tiles(128), tiles(64), tiles(32)), (Ok((128, 128)), Ok((128, 64)), Ok((64, 64)), Ok((64, 32))));
        let rows = |m| SgemmConfig::for_rows(DType::F32, m);
        let small = [1, 16, 17, 33, 64, 65].map(|m| (rows(m).tile.m, rows(m).rm, rows(m).threads()));
        assert_eq!(small, [(16, 4, 64), (16, 4, 64), (32, 4, 128), (64, 4, 256), (64, 4, 256), (128, 8, 256)]);
        let wide = cfg.with_threads(1024).unwrap();
        assert_eq!((wide.tile.m, wide.tile.n, wide.rm, wide.rn, wide.threads()), (128, 128, 4, 4, 1024));
        assert!(tiles(96).unwrap_err().to_string().contains("96 threads; the tile splits over a power of two"));
    }
}
