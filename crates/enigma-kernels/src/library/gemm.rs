//! Tiled GEMM on SIMD-group matrices: `C = alpha·op(A)·op(B) + beta·C`,
//! row-major, `op` the identity or the transpose, f16/bf16/f32 inputs with
//! f32 accumulation, C in the input type or f32, batched over the grid's
//! third dimension (seed 000's "Batched Operations").
//!
//! A threadgroup computes a `tm × tn` tile of C; its SIMD groups form a
//! `sg_rows × sg_cols` grid (seed 002 §3.2's partition), each owning a
//! `(tm / sg_rows) × (tn / sg_cols)` accumulator tile. Per step of `tk` along
//! K the threadgroup copies the `tm × tk` slice of op(A) and the `tk × tn`
//! slice of op(B) into threadgroup memory — bounds-checked, zero past the
//! matrix edges, transposing as it copies — then each SIMD group multiplies
//! its rows of the A slice by its columns of the B slice. The epilogue
//! writes each lane's elements through the per-lane view, skipping those
//! past M or N. Any M, N, K work.
//!
//! What is not here yet: double-buffered threadgroup memory (seed 002 §2.1)
//! and padding against bank conflicts; on CUDA the matrix operations do not
//! use tensor cores yet (see the README), so this kernel is correct there but
//! far from cuBLAS.
//!
//! Parameters: `a, b, c, m, n, k, alpha, beta` (+ the batch strides come from
//! the shapes: `m·k`, `k·n`, `m·n` elements).

use super::*;
use enigma_ir::{Access, Kernel, MatrixType, MemFlags, Type};

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
}

impl GemmConfig {
    /// Seed 002's 64×64×32 tile with a 2×2 partition of SIMD groups.
    pub fn new(input: DType, output: DType) -> GemmConfig {
        GemmConfig { input, output, tm: 64, tn: 64, tk: 32, sg_rows: 2, sg_cols: 2, trans_a: false, trans_b: false }
    }

    /// The same tile split over `threads / 32` SIMD groups: 1, 2, 4 … 32 of
    /// them as a grid of at most twice as many rows as columns.
    pub fn with_threads(self, threads: u32) -> Result<GemmConfig, ShapeError> {
        let groups = check_threads(&self.name(), threads)? / SIMD_WIDTH;
        if !groups.is_power_of_two() {
            return Err(ShapeError::new(self.name(), format!("{threads} threads are {groups} SIMD groups; the tile splits over a power of two")));
        }
        let sg_cols = 1 << (groups.trailing_zeros() / 2);
        let cfg = GemmConfig { sg_rows: groups / sg_cols, sg_cols, ..self };
        cfg.check()?;
        Ok(cfg)
    }

    pub fn threads(&self) -> u32 {
        SIMD_WIDTH * self.sg_rows * self.sg_cols
    }

    /// Threadgroup memory: one `tm × tk` and one `tk × tn` slice of inputs.
    pub fn threadgroup_memory_bytes(&self) -> u64 {
        (self.tm * self.tk + self.tk * self.tn) as u64 * self.input.size_bytes() as u64
    }

    /// f32 accumulator elements each lane holds.
    pub fn accumulators_per_lane(&self) -> u32 {
        (self.tm / self.sg_rows) * (self.tn / self.sg_cols) / SIMD_WIDTH
    }

    /// Checks that the tile shape is one the kernel can build: sides and
    /// SIMD-group tiles multiples of 8, tiles at most 64, at most 1024
    /// threads and 32 KiB of threadgroup memory.
    pub fn check(&self) -> Result<(), ShapeError> {
        let name = self.name();
        let side = |v: u32| v > 0 && v % 8 == 0 && v <= 64;
        let (sm, sn) = (self.tm / self.sg_rows.max(1), self.tn / self.sg_cols.max(1));
        if self.sg_rows == 0 || self.sg_cols == 0 || self.tm % self.sg_rows != 0 || self.tn % self.sg_cols != 0 {
            return Err(ShapeError::new(name, format!("{}×{} SIMD groups do not divide a {}×{} tile", self.sg_rows, self.sg_cols, self.tm, self.tn)));
        }
        if !(side(sm) && side(sn) && side(self.tk)) {
            return Err(ShapeError::new(
                name,
                format!("SIMD-group tiles of {sm}×{sn} and a K step of {} must be multiples of 8 up to 64", self.tk),
            ));
        }
        check_threads(&name, self.threads())?;
        if self.threadgroup_memory_bytes() > MAX_THREADGROUP_MEMORY {
            return Err(ShapeError::new(
                name,
                format!("needs {} bytes of threadgroup memory (limit {MAX_THREADGROUP_MEMORY})", self.threadgroup_memory_bytes()),
            ));
        }
        Ok(())
    }

    /// `gemm_{in}_{out}_{tm}x{tn}x{tk}_sg{r}x{c}[_ta][_tb]`.
    pub fn name(&self) -> String {
        format!(
            "gemm_{}_{}_{}x{}x{}_sg{}x{}{}{}",
            self.input,
            self.output,
            self.tm,
            self.tn,
            self.tk,
            self.sg_rows,
            self.sg_cols,
            if self.trans_a { "_ta" } else { "" },
            if self.trans_b { "_tb" } else { "" }
        )
    }

    /// The dispatch for an `m × n` result, `batch` times.
    pub fn dispatch(&self, m: u32, n: u32, batch: u32) -> Dispatch {
        Dispatch::threadgroups([n.div_ceil(self.tn), m.div_ceil(self.tm), batch], self.threads())
    }
}

/// The GEMM kernel of `cfg` (see the module doc).
///
/// # Panics
/// When `cfg.check()` fails: plan through [`GemmConfig::check`] first.
pub fn gemm(cfg: &GemmConfig) -> Kernel {
    if let Err(e) = cfg.check() {
        panic!("{e}");
    }
    let (sm, sn) = (cfg.tm / cfg.sg_rows, cfg.tn / cfg.sg_cols);
    let elem = cfg.input.scalar();
    let a_tile = MatrixType::new(elem, sm as u8, cfg.tk as u8);
    let b_tile = MatrixType::new(elem, cfg.tk as u8, sn as u8);
    let acc_tile = MatrixType::new(enigma_ir::Scalar::F32, sm as u8, sn as u8);
    let mut k = KernelBuilder::new(cfg.name());
    let a = k.buffer("a", cfg.input.ty(1), Access::Read);
    let b = k.buffer("b", cfg.input.ty(1), Access::Read);
    let c = k.buffer("c", cfg.output.ty(1), Access::ReadWrite);
    let m = k.value("m", Type::U32);
    let n = k.value("n", Type::U32);
    let kk = k.value("k", Type::U32);
    let alpha = k.value("alpha", Type::F32);
    let beta = k.value("beta", Type::F32);
    let a_s = k.threadgroup_array("a_slice", cfg.input.ty(1), cfg.tm * cfg.tk);
    let b_s = k.threadgroup_array("b_slice", cfg.input.ty(1), cfg.tk * cfg.tn);
    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let m0 = k.let_("m0", tg.y() * cfg.tm);
    let n0 = k.let_("n0", tg.x() * cfg.tn);
    let batch = k.let_("batch", tg.z());
    let a_base = k.let_("a_base", batch * m * kk);
    let b_base = k.let_("b_base", batch * kk * n);
    let c_base = k.let_("c_base", batch * m * n);
    let sg_m = k.let_("sg_m", sg / cfg.sg_cols * sm);
    let sg_n = k.let_("sg_n", sg % cfg.sg_cols * sn);
    let zero = lit(elem, 0.0);
    let acc = k.var("acc", matrix_fill(acc_tile, 0.0f32));
    k.for_range("k0", 0u32, kk, cfg.tk, |k, k0| {
        // The tm × tk slice of op(A) and the tk × tn slice of op(B), zero
        // past the edges.
        let a_slice = Slice { rows: (m0, m, cfg.tm), cols: (k0, kk, cfg.tk), transposed: cfg.trans_a };
        let b_slice = Slice { rows: (k0, kk, cfg.tk), cols: (n0, n, cfg.tn), transposed: cfg.trans_b };
        stage(k, "a", a_slice, a, a_base, a_s, zero, lid, cfg.threads());
        stage(k, "b", b_slice, b, b_base, b_s, zero, lid, cfg.threads());
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let ma = k.let_("ma", matrix_load(a_tile, a_s, sg_m * cfg.tk, cfg.tk, false));
        let mb = k.let_("mb", matrix_load(b_tile, b_s, sg_n, cfg.tn, false));
        k.assign(acc, matrix_multiply_accumulate(ma, mb, acc));
        k.threadgroup_barrier(MemFlags::Threadgroup);
    });
    for i in 0..acc_tile.per_lane() as u8 {
        let row = k.let_(&format!("row{i}"), m0 + sg_m + matrix_coord(acc_tile, i, false));
        let col = k.let_(&format!("col{i}"), n0 + sg_n + matrix_coord(acc_tile, i, true));
        k.if_(row.lt(m).and(col.lt(n)), |k| {
            let at = k.let_(&format!("at{i}"), c_base + row * n + col);
            let scaled = alpha * thread_element(acc, i);
            let v = k.let_(&format!("v{i}"), select(scaled, scaled + beta * load_f32(c, at), beta.ne(0.0f32)));
            store_f32(k, c, at, v);
        });
    }
    finish(k)
}

/// A slice of op(X) for one K step: along each axis its first index, the
/// matrix's size and the slice's size; `transposed` when X is stored as
/// op(X)ᵀ (row-major either way).
#[derive(Clone, Copy)]
struct Slice {
    rows: (Ex, Ex, u32),
    cols: (Ex, Ex, u32),
    transposed: bool,
}

/// The threads of the threadgroup copy `slice` of op(`src`) (elements from
/// `base`) into `dst`, row-major, writing `zero` past the matrix's edges.
#[allow(clippy::too_many_arguments)]
fn stage(k: &mut KernelBuilder, name: &str, slice: Slice, src: Mem, base: Ex, dst: Mem, zero: Ex, lid: Ex, threads: u32) {
    let ((r0, r_len, rows), (c0, c_len, cols)) = (slice.rows, slice.cols);
    k.for_range(&format!("i{name}"), lid, rows * cols, threads, |k, i| {
        let r = k.let_(&format!("{name}r"), r0 + i / cols);
        let c = k.let_(&format!("{name}c"), c0 + i % cols);
        let at = if slice.transposed { c * r_len + r } else { r * c_len + c };
        let v = k.var(&format!("{name}v"), zero);
        k.if_(r.lt(r_len).and(c.lt(c_len)), |k| k.assign(v, src.get(base + at)));
        k.store(dst.at(i), v);
    });
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
        assert!(GemmConfig::new(DType::F16, DType::F32).check().is_ok());
        let too_big = GemmConfig { tm: 128, tn: 128, tk: 64, sg_rows: 2, sg_cols: 2, ..GemmConfig::new(DType::F32, DType::F32) };
        let err = too_big.check().unwrap_err().to_string();
        assert!(err.contains("needs 65536 bytes of threadgroup memory (limit 32768)"), "{err}");
        let odd = GemmConfig { sg_rows: 3, ..GemmConfig::new(DType::F16, DType::F16) };
        assert!(odd.check().unwrap_err().to_string().contains("3×2 SIMD groups do not divide a 64×64 tile"));
        let cfg = GemmConfig::new(DType::F16, DType::F32);
        assert_eq!((cfg.threads(), cfg.threadgroup_memory_bytes(), cfg.accumulators_per_lane()), (128, 8192, 32));
        assert_eq!(cfg.dispatch(100, 33, 2).size, [1, 2, 2]);
        let split = |t| cfg.with_threads(t).map(|c| (c.sg_rows, c.sg_cols));
        assert_eq!((split(32), split(256), split(1024)), (Ok((1, 1)), Ok((4, 2)), Ok((8, 4))));
        assert!(split(96).unwrap_err().to_string().contains("96 threads are 3 SIMD groups"));
    }
}
