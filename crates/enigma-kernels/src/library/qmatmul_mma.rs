//! The quantized matmul for few rows on SIMD-group matrices, with the
//! weights decoded straight into them: `C[M, N] = A[M, K] · dequant(B)`,
//! `A` f16 row-major, `B` FP4 E2M1 or INT4 U4B8 in seed 002's `[K/8][N]`
//! layout with f16 scales `[K/group][N]`, f32 accumulation, `C` f32 or f16.
//!
//! At decode and small-batch sizes the product is bound by reading `B`
//! once, and the other kernels spend what bandwidth they get on the
//! decoding: the decode kernel ([`super::qmatmul`]) decodes and multiplies
//! each weight on ordinary ALUs (about 5.5 instructions per weight per
//! row), the tiled kernels ([`super::gemm::QgemmConfig`],
//! [`super::qgemm_fused`]) decode through threadgroup memory between
//! barriers. This one loads each weight tile with
//! [`matrix_load_quantized`]: a `depth × cols` f16 tile whose element
//! (r, c) is the value of nibble `r % 8` of a packed word times its
//! column's scale (rounded once to f16). It never touches threadgroup
//! memory; on CUDA the code generator holds such a tile, which only feeds
//! products from the right, in the layout `mma.sync` takes B in, where a
//! lane's two elements of a fragment are one byte of one word, and decodes
//! it in about two instructions per weight.
//!
//! A threadgroup computes a `rows × cols` tile of C; its `simdgroups` SIMD
//! groups all work on that tile and take the `depth`-deep K steps
//! round-robin (SIMD group `s` takes steps `s, s + S, …`), so a narrow
//! output still gives the GPU many loads in flight. Per step a SIMD group
//! stages its `rows × depth` slice of A as f16 in its own threadgroup area
//! (rows padded to `depth + 8` halves: 16-byte-aligned rows for `ldmatrix`
//! that fall in different banks; rows past M stay zero from the start),
//! loads it as a matrix, loads the weight tile and multiply-accumulates.
//! The SIMD groups' partial tiles meet in threadgroup memory (one barrier)
//! and the threadgroup's threads sum them in SIMD-group order and store the
//! rows below M. K split over threadgroups works as in the GEMM
//! ([`MmaQmatmulConfig::splits`], an f32 workspace that
//! [`super::gemm::splitk_reduce`] sums).
//!
//! `depth` must divide the group (so a step needs one scale per column)
//! and N must be at least `cols`: a tile past the last full one reads the
//! `cols` columns ending at N and stores only its own.
//!
//! Parameters: `a4` (the `half4` view of `A`), `b` (packed words), `scales`,
//! `c` (with K split, the f32 workspace), and `m`, `n`, `k`, `group` (K
//! values per scale) by value.

use super::gemm::{check_splits_and_memory, k_splits_for, split_range};
use super::quant::{Format, VALUES_PER_WORD};
use super::*;
use enigma_ir::{Access, Kernel, MatrixType, MemFlags, Scalar, Type};

/// K values per step a kernel may take (each divides a group of 64 or 128;
/// 16 and 32 divide every group).
pub const DEPTHS: [u32; 3] = [16, 32, 64];

/// Elements per `half4`.
const VEC: u32 = 4;

/// Halves of padding after each staged row of A.
const ROW_PAD: u32 = 8;

/// One kernel of the family: weight format, output type, C tile per
/// threadgroup, K step, SIMD groups and K splits (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaQmatmulConfig {
    /// FP4 or INT4 in seed 002's layout.
    pub format: Format,
    /// C's type: f32 or f16 (with K split, the partial products are f32).
    pub output: DType,
    /// Rows of C per threadgroup (a multiple of 8 up to 64).
    pub rows: u32,
    /// Columns of C per threadgroup (a multiple of 8 up to 64).
    pub cols: u32,
    /// K values per step (one of [`DEPTHS`]).
    pub depth: u32,
    /// SIMD groups per threadgroup, sharing the K steps.
    pub simdgroups: u32,
    /// K split over this many threadgroups (1: none).
    pub splits: u32,
}

impl MmaQmatmulConfig {
    /// The default for `m` rows and groups of `group` K values within
    /// `max_threadgroup_memory_bytes`: the fewest rows (a multiple of 16, at
    /// most 64) covering M, 32 columns, 4 SIMD groups and steps of 64 K
    /// values (32 for groups of 32), unsplit; where that does not fit, half
    /// the step (down to 16), then half the SIMD groups.
    pub fn for_shape(format: Format, output: DType, m: u32, group: u32, max_threadgroup_memory_bytes: u64) -> MmaQmatmulConfig {
        let rows = (m.div_ceil(16) * 16).clamp(16, 64);
        let mut cfg = MmaQmatmulConfig { format, output, rows, cols: 32, depth: 64.min(group), simdgroups: 4, splits: 1 };
        while cfg.threadgroup_memory_bytes() > max_threadgroup_memory_bytes {
            if cfg.depth > DEPTHS[0] {
                cfg.depth /= 2;
            } else if cfg.simdgroups > 1 {
                cfg.simdgroups /= 2;
            } else {
                break;
            }
        }
        cfg
    }

    /// Threads per threadgroup: 32 per SIMD group.
    pub fn threads(&self) -> u32 {
        SIMD_WIDTH.saturating_mul(self.simdgroups)
    }

    /// Threadgroup memory: each SIMD group's staged slice of A
    /// (`rows · (depth + 8)` halves) and its partial tile of C
    /// (`rows · cols` f32; only with more than one SIMD group).
    pub fn threadgroup_memory_bytes(&self) -> u64 {
        let stage = u64::from(self.rows) * u64::from(self.depth + ROW_PAD) * 2;
        let partial = if self.simdgroups > 1 { u64::from(self.rows) * u64::from(self.cols) * 4 } else { 0 };
        u64::from(self.simdgroups) * (stage + partial)
    }

    /// K splits for an `m × n × k` product that give at least
    /// `threadgroups` threadgroups (the GEMM's rule, [`k_splits_for`]).
    pub fn splits_for(&self, m: u32, n: u32, k: u32, threadgroups: u32) -> u32 {
        k_splits_for((self.rows, self.cols, self.depth), m, n, k, threadgroups)
    }

    /// Checks that the kernel can be built: FP4 or INT4 weights, tile sides
    /// that are multiples of 8 up to 64, a depth from [`DEPTHS`], 1 to 32
    /// SIMD groups, 1 to [`super::gemm::MAX_SPLITS`] K splits and at most
    /// `max_threadgroup_memory_bytes` of threadgroup memory (`u64::MAX`
    /// checks the shape alone).
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        if self.format.quant_code().is_none() {
            return Err(ShapeError::new(name, format!("takes fp4 or int4 weights in seed 002's layout, not {}", self.format)));
        }
        let side = |v: u32| v > 0 && v.is_multiple_of(8) && v <= MatrixType::MAX_SIDE as u32;
        if !(side(self.rows) && side(self.cols)) {
            return Err(ShapeError::new(name, format!("a {}×{} tile; its sides must be multiples of 8 up to 64", self.rows, self.cols)));
        }
        if !DEPTHS.contains(&self.depth) {
            return Err(ShapeError::new(name, format!("a K step of {} values; one of {DEPTHS:?}", self.depth)));
        }
        check_threads(&name, self.threads())?;
        check_splits_and_memory(&name, self.splits, self.threadgroup_memory_bytes(), max_threadgroup_memory_bytes)
    }

    /// Checks that the kernel takes an `m × n × k` product with groups of
    /// `group`: the step divides the group, and N holds at least one tile
    /// of columns.
    pub fn check_problem(&self, n: u32, group: u32) -> Result<(), ShapeError> {
        if group == 0 || !group.is_multiple_of(self.depth) {
            return Err(ShapeError::new(self.name(), format!("K steps of {} values must divide the group of {group}", self.depth)));
        }
        if n < self.cols {
            return Err(ShapeError::new(self.name(), format!("N = {n} is narrower than a tile of {} columns", self.cols)));
        }
        Ok(())
    }

    /// `qmatmul_mma_{format}_{out}_{rows}x{cols}x{depth}_sg{S}[_splitk]`.
    pub fn name(&self) -> String {
        let split = if self.splits > 1 { "_splitk" } else { "" };
        format!("qmatmul_mma_{}_{}_{}x{}x{}_sg{}{split}", self.format, self.output, self.rows, self.cols, self.depth, self.simdgroups)
    }

    /// The dispatch for an `m × n` result: column tiles along x, row tiles
    /// along y, K splits along z.
    pub fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        Dispatch::threadgroups([n.div_ceil(self.cols), m.div_ceil(self.rows), self.splits.max(1)], self.threads())
    }
}

/// The kernel of `cfg` (see the module doc).
///
/// # Panics
/// When `cfg.check(u64::MAX)` fails: plan through it first.
pub fn qmatmul_mma(cfg: &MmaQmatmulConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    let code = cfg.format.quant_code().expect("checked: fp4 or int4");
    let (rows, cols, depth, simdgroups) = (cfg.rows, cfg.cols, cfg.depth, cfg.simdgroups);
    let a_tile = MatrixType::new(Scalar::F16, rows as u8, depth as u8);
    let b_tile = MatrixType::new(Scalar::F16, depth as u8, cols as u8);
    let acc_tile = MatrixType::new(Scalar::F32, rows as u8, cols as u8);
    let half4 = Type::vector(Scalar::F16, VEC as u8);
    let row_vecs = (depth + ROW_PAD) / VEC;
    let stage_vecs = rows * row_vecs;
    let slice_vecs = rows * depth / VEC;

    let mut k = KernelBuilder::new(cfg.name());
    let a4 = k.buffer("a4", half4, Access::Read);
    let b = k.buffer("b", Type::U32, Access::Read);
    let scales = k.buffer("scales", Type::F16, Access::Read);
    let c = k.buffer("c", if cfg.splits > 1 { Type::F32 } else { cfg.output.ty(1) }, Access::ReadWrite);
    let m = k.value("m", Type::U32);
    let n = k.value("n", Type::U32);
    let kk = k.value("k", Type::U32);
    let group = k.value("group", Type::U32);
    let stage = k.threadgroup_array("a_stage", half4, simdgroups * stage_vecs);
    let partials = (simdgroups > 1).then(|| k.threadgroup_array("partials", Type::F32, simdgroups * rows * cols));

    let tg = threadgroup_position_in_grid();
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let row0 = k.let_("row0", tg.y() * rows);
    // The tile's own first column, and the first column it reads: the last
    // tile reads the `cols` columns ending at N.
    let own0 = k.let_("own0", tg.x() * cols);
    let n0 = k.let_("n0", min(own0, n - cols));
    let split = tg.z();
    let c_base = k.let_("c_base", split * m * n);
    let (k_begin, k_end) = split_range(&mut k, kk, split, cfg.splits, depth);
    let k4 = k.let_("k4", kk / VEC);
    let base = k.let_("stage_base", sg * stage_vecs);

    // Rows past M stay zero: clear the whole area once.
    let zero = vector(half4, &[lit(Scalar::F16, 0.0)]);
    for i in 0..stage_vecs.div_ceil(SIMD_WIDTH) {
        let idx = k.let_(&format!("clear{i}"), lane + i * SIMD_WIDTH);
        let clear = |k: &mut KernelBuilder| k.store(stage.at(base + idx), zero.clone());
        if (i + 1) * SIMD_WIDTH <= stage_vecs {
            clear(&mut k);
        } else {
            k.if_(idx.lt(stage_vecs), clear);
        }
    }
    let acc = k.var("acc", matrix_fill(acc_tile, 0.0f32));
    // The weight tile of the step at `k0`, as a matrix: loaded a step ahead.
    let weights = |k0: Ex| {
        let word0 = k0 / VALUES_PER_WORD as u32 * n + n0;
        matrix_load_quantized(b_tile, code, b, word0, n, scales, k0 / group * n + n0)
    };
    // A's slice of the step at `k0` into this SIMD group's area, as a
    // matrix, times `mb` into the accumulator.
    let multiply = |k: &mut KernelBuilder, tag: &str, k0: Ex, mb: Ex| {
        k.simdgroup_barrier(MemFlags::Threadgroup);
        for i in 0..slice_vecs.div_ceil(SIMD_WIDTH) {
            let idx = k.let_(&format!("{tag}slice{i}"), lane + i * SIMD_WIDTH);
            let r = k.let_(&format!("{tag}r{i}"), idx / (depth / VEC));
            let inside = (row0 + r).lt(m);
            let inside = if (i + 1) * SIMD_WIDTH <= slice_vecs { inside } else { inside.and(idx.lt(slice_vecs)) };
            k.if_(inside, |k| {
                let src = (row0 + r) * k4 + k0 / VEC + idx % (depth / VEC);
                k.store(stage.at(base + r * row_vecs + idx % (depth / VEC)), a4.get(src));
            });
        }
        k.simdgroup_barrier(MemFlags::Threadgroup);
        let ma = k.let_(&format!("{tag}ma"), matrix_load(a_tile, stage, base * VEC, row_vecs * VEC, false));
        k.assign(acc, matrix_multiply_accumulate(ma, mb, acc.get()));
    };
    // Two steps per iteration, each one's weights loaded (clamped to the
    // last step, so always in bounds) before the other's multiply: two
    // matrices that are only ever loaded and multiplied from the right, so
    // a backend may keep them in its B layout.
    let first = k.let_("k_first", k_begin + sg * depth);
    let stride = simdgroups * depth;
    k.if_(first.lt(k_end), |k| {
        let last = k.let_("k_last", k_end - depth);
        let b_even = k.var("b_even", weights(first));
        let b_odd = k.var_uninit("b_odd", Type::Matrix(b_tile));
        k.for_range("k0", first, k_end, 2 * stride, |k, k0| {
            let k1 = k.let_("k1", k0 + stride);
            k.assign(b_odd, weights(min(k1, last)));
            multiply(k, "even_", k0, b_even.get());
            k.if_(k1.lt(k_end), |k| {
                k.assign(b_even, weights(min(k1 + stride, last)));
                multiply(k, "odd_", k1, b_odd.get());
            });
        });
    });

    let store = |k: &mut KernelBuilder, row: Ex, col: Ex, value: Ex| {
        k.if_(row.lt(m).and((n0 + col).ge(own0)), |k| store_f32(k, c, c_base + row * n + n0 + col, value));
    };
    match partials {
        None => {
            for i in 0..acc_tile.per_lane() as u8 {
                let row = k.let_(&format!("out_row{i}"), row0 + matrix_coord(acc_tile, i, false));
                let col = k.let_(&format!("out_col{i}"), matrix_coord(acc_tile, i, true));
                store(&mut k, row, col, thread_element(acc.get(), i));
            }
        }
        Some(partials) => {
            k.matrix_store(acc.get(), partials, sg * (rows * cols), cols, false);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            let per_tile = rows * cols;
            k.for_range("o", thread_index_in_threadgroup(), per_tile, cfg.threads(), |k, o| {
                let total = k.var("total", f(0.0));
                for s in 0..simdgroups {
                    k.assign(total, total.get() + partials.get(o + s * per_tile));
                }
                store(k, row0 + o / cols, o % cols, total.get());
            });
        }
    }
    finish(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threadgroup_memory_counts_each_simdgroups_slice_and_partial_tile() {
        let cfg = MmaQmatmulConfig { format: Format::Int4, output: DType::F16, rows: 16, cols: 32, depth: 64, simdgroups: 4, splits: 1 };
        assert_eq!(cfg.threadgroup_memory_bytes(), 4 * (16 * 72 * 2 + 16 * 32 * 4));
        let kernel = qmatmul_mma(&cfg);
        assert_eq!(kernel.threadgroup_memory_bytes(), cfg.threadgroup_memory_bytes());
        let single = MmaQmatmulConfig { simdgroups: 1, ..cfg };
        assert_eq!(qmatmul_mma(&single).threadgroup_memory_bytes(), single.threadgroup_memory_bytes());
    }

    #[test]
    fn bad_configurations_are_refused_with_the_numbers() {
        let ok = MmaQmatmulConfig::for_shape(Format::Fp4, DType::F32, 3, 128, 32 * 1024);
        assert_eq!((ok.rows, ok.cols, ok.depth, ok.simdgroups), (16, 32, 64, 4));
        // 48 rows: 52 KiB at 64-deep steps, 40 KiB at 32, 37 KiB at 16; 2 SIMD groups fit.
        let tall = MmaQmatmulConfig::for_shape(Format::Fp4, DType::F32, 33, 128, 32 * 1024);
        assert_eq!((tall.rows, tall.depth, tall.simdgroups), (48, 16, 2));
        assert!(tall.threadgroup_memory_bytes() <= 32 * 1024);
        assert!(ok.check(u64::MAX).is_ok());
        let e = MmaQmatmulConfig { depth: 48, ..ok }.check(u64::MAX).unwrap_err();
        assert!(e.to_string().contains("a K step of 48 values"), "{e}");
        let e = MmaQmatmulConfig { format: Format::MlxAffine, ..ok }.check(u64::MAX).unwrap_err();
        assert!(e.to_string().contains("not mlx"), "{e}");
        let e = ok.check_problem(11008, 32).unwrap_err();
        assert!(e.to_string().contains("K steps of 64 values must divide the group of 32"), "{e}");
        let e = ok.check_problem(24, 128).unwrap_err();
        assert!(e.to_string().contains("N = 24 is narrower than a tile of 32 columns"), "{e}");
    }
}
