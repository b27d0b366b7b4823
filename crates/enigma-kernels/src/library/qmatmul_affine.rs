//! Quantized matmul for MLX's affine 4-bit format at decode sizes:
//! `C[M, N] = A[M, K] · dequant(B)`, `A` in f16, `B` in
//! [`Format::MlxAffine`] (`packed[N][K/8]` words, f16 `scales[N][K/group]`
//! and `biases[N][K/group]`, `B[k][n] = scale · code + bias`, see
//! [`super::quant`]), `C` in f32 or f16, f32 accumulation.
//!
//! MLX keeps the packed words of one output column contiguous along K, so
//! the kernel walks K along a column, where seed 002's kernel
//! ([`super::qmatmul`]) walks N along a packed row:
//! * **A column per SIMD group** (or `cols` = 2 or 4 of them). Lane `l`
//!   takes the column's chunks `l, l + 32, …` of `8 · words` codes, one
//!   `uint` / `uint2` / `uint4` load per column and chunk (`words` = 1, 2,
//!   4), so each load instruction of the SIMD group reads one contiguous
//!   stretch of `128 · words` bytes of a column. K is a multiple of the
//!   group, so of 32: a chunk never crosses a group, and never the end of K.
//! * **A from the cache.** The chunk's `8 · words` values of each row of
//!   `A` are read as `half4` (`A` is small: every SIMD group reads the same
//!   rows, which stay in L1/L2) and converted once per lane; they serve all
//!   `cols` columns.
//! * **The bias costs one multiply per chunk.** Per chunk and row the lane
//!   sums `Σ code · a` per column (as a `float4`: four independent chains
//!   of fma, one per lane of a `half4`) and `Σ a` once, and adds
//!   `scale · Σ code · a + bias · Σ a`: every term of the chunk shares its
//!   group's scale and bias. Codes become f32 by [`super::qmatmul`]'s
//!   mantissa trick (one logic operation and one subtraction, exact).
//! * **One reduction.** The lanes' sums meet by `simd_sum`, `rows · cols`
//!   of them at the end; lane 0 writes. No threadgroup memory, no barrier.
//!
//! A threadgroup of `S` SIMD groups computes `S · cols` consecutive columns
//! of `rows` rows of `C` (`rows` = M up to 8; more rows take more
//! threadgroups along y, each reading `B` again, mostly from L2). A SIMD
//! group whose first column is past N does nothing; its other columns
//! past N, and rows past M, are clamped for the loads, which stay in
//! bounds, and never stored.
//!
//! Parameters: `a4` (`half4` view of `A`), `b` / `b2` / `b4` (the packed
//! words as `uint` / `uint2` / `uint4`), `scales`, `biases`, `c`, and `m`,
//! `n`, `k`, `group_shift` (log2 of the group size) by value.

use super::quant::{check_problem, nibble_minus, MAX_ROWS_PER_THREADGROUP};
use super::qmatmul::{BlockingOptions, DecodePlan};
use super::quant::{Format, VALUES_PER_WORD};
use super::split::SplitSum;
use super::*;
use enigma_ir::{Access, Kernel, Type};

/// The packed words per lane and load a kernel may take (`uint`, `uint2`,
/// `uint4`).
pub const LOAD_WORDS: [u32; 3] = [1, 2, 4];
/// Default threads per threadgroup (8 SIMD groups, 8 · `cols` columns).
pub const DEFAULT_THREADS: u32 = 256;
/// `rows · cols` the default keeps to (accumulators per lane, twice).
const DEFAULT_REGISTER_TILE: u32 = 8;

crate::kernel_args! {
    /// The arguments of [`qmatmul_affine()`]: A's `half4` view, the packed
    /// words read as vectors of `words` (`b`, `b2`, `b4`: views of one
    /// buffer), the scales and biases, C, the shape, and `group_shift`
    /// (log2 of the group).
    pub struct AffineArgs {
        A4 a4: buffer,
        B b: buffer,
        B2 b2: buffer,
        B4 b4: buffer,
        SCALES scales: buffer,
        BIASES biases: buffer,
        C c: buffer,
        M m: u32,
        N n: u32,
        K k: u32,
        GROUP_SHIFT group_shift: u32,
    }
}

/// `qmatmul_affine_{out}_r{rows}_c{cols}_w{words}_t{threads}`: `rows` rows
/// of `C` per threadgroup, `cols` columns per SIMD group, `words` packed
/// words per lane and load.
///
/// # Panics
/// When `rows` is not 1 … 8, `cols` not 1, 2 or 4, `words` not 1, 2 or 4,
/// `out` is bf16, or `threads` is not a multiple of 32 between 32 and 1024.
pub fn qmatmul_affine(out: DType, rows: u32, cols: u32, words: u32, threads: u32) -> Kernel {
    assert!((1..=MAX_ROWS_PER_THREADGROUP).contains(&rows), "rows must be 1 ..= 8, got {rows}");
    assert!(matches!(cols, 1 | 2 | 4), "cols must be 1, 2 or 4, got {cols}");
    assert!(LOAD_WORDS.contains(&words), "words must be 1, 2 or 4, got {words}");
    assert!(out != DType::BF16, "the output is f32 or f16");
    assert!(check_threads("qmatmul_affine", threads).is_ok(), "bad threadgroup size {threads}");
    let simdgroups = threads / SIMD_WIDTH;
    let chunk_values = words * VALUES_PER_WORD as u32;
    let mut k = KernelBuilder::new(format!("qmatmul_affine_{out}_r{rows}_c{cols}_w{words}_t{threads}"));
    type P = AffineArgs;
    let bn = match words {
        1 => P::B,
        2 => P::B2,
        _ => P::B4,
    };
    let a4 = k.buffer(P::A4, Type::vector(Scalar::F16, 4), Access::Read);
    let b = k.buffer(bn, Type::vector(Scalar::U32, words as u8), Access::Read);
    let scales = k.buffer(P::SCALES, Type::F16, Access::Read);
    let biases = k.buffer(P::BIASES, Type::F16, Access::Read);
    let c = k.buffer(P::C, out.ty(1), Access::ReadWrite);
    let m = k.value(P::M, Type::U32);
    let n = k.value(P::N, Type::U32);
    let kk = k.value(P::K, Type::U32);
    let group_shift = k.value(P::GROUP_SHIFT, Type::U32);

    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let col0 = k.let_("first_col", (threadgroup_position_in_grid().x() * simdgroups + sg) * cols);
    let row0 = k.let_("row0", threadgroup_position_in_grid().y() * rows);
    // `col0` is the same for the whole SIMD group: no divergence.
    k.if_(col0.lt(n), |k| {
        let last_col = k.let_("last_col", n - 1u32);
        let last_row = k.let_("last_row", m - 1u32);
        let chunks = k.let_("chunks", kk / chunk_values);
        let groups = k.let_("groups", kk >> group_shift);
        let k4 = k.let_("k4", kk / 4u32);
        // Per column (clamped): its first chunk and its first group.
        let bases: Vec<(Ex, Ex)> = (0..cols)
            .map(|cc| {
                let col = k.let_(&format!("col_{cc}"), min(col0 + cc, last_col));
                (k.let_(&format!("wbase{cc}"), col * chunks), k.let_(&format!("gbase{cc}"), col * groups))
            })
            .collect();
        // Per row (clamped): its first half4.
        let row_bases: Vec<Ex> = (0..rows).map(|r| k.let_(&format!("abase{r}"), min(row0 + r, last_row) * k4)).collect();
        let acc: Vec<Vec<Var>> = (0..rows).map(|r| (0..cols).map(|cc| k.var(&format!("acc{r}_{cc}"), f(0.0))).collect()).collect();
        k.for_range("chunk", lane, chunks, SIMD_WIDTH, |k, ch| {
            // The chunk's weight, scale and bias loads first, then the math.
            let g = k.let_("g", (ch * chunk_values) >> group_shift);
            let loads: Vec<(Ex, Ex, Ex)> = bases
                .iter()
                .enumerate()
                .map(|(cc, &(wbase, gbase))| {
                    let q = k.let_(&format!("q{cc}"), b.get(wbase + ch));
                    let s = k.let_(&format!("s{cc}"), to_f32(scales.get(gbase + g)));
                    let bias = k.let_(&format!("bias{cc}"), to_f32(biases.get(gbase + g)));
                    (q, s, bias)
                })
                .collect();
            // Σ code · a as four partial sums per row and column (one per
            // lane of a half4): four independent chains of fma.
            let dot: Vec<Vec<Var>> = (0..rows).map(|r| (0..cols).map(|cc| k.var(&format!("dot{r}_{cc}"), splat(0.0, 4))).collect()).collect();
            let asum: Vec<Var> = (0..rows).map(|r| k.var(&format!("asum{r}"), splat(0.0, 4))).collect();
            let first = k.let_("first", ch * (2 * words));
            // Each word holds 8 codes: two half4 of A.
            for w in 0..words {
                let word: Vec<Ex> = loads
                    .iter()
                    .enumerate()
                    .map(|(cc, &(q, _, _))| if words == 1 { q } else { k.let_(&format!("q{cc}_{w}"), q.component(w as u8)) })
                    .collect();
                let hi: Vec<Ex> = word.iter().enumerate().map(|(cc, &q)| k.let_(&format!("hi{cc}_{w}"), q >> 12u32)).collect();
                for half in 0..2 {
                    let a: Vec<Ex> = row_bases
                        .iter()
                        .enumerate()
                        .map(|(r, &base)| k.let_(&format!("a{r}_{w}_{half}"), a4.get(base + first + (2 * w + half)).cast(Type::vector(Scalar::F32, 4))))
                        .collect();
                    for (s, &av) in asum.iter().zip(&a) {
                        k.assign(*s, s.get() + av);
                    }
                    for (cc, (&q, &h)) in word.iter().zip(&hi).enumerate() {
                        let codes: Vec<Ex> = (0..4u32).map(|jj| nibble_minus(q, h, 4 * half + jj, 0.0)).collect();
                        let v = k.let_(&format!("v{cc}_{w}_{half}"), vector(Type::vector(Scalar::F32, 4), &codes));
                        for (dot_row, &av) in dot.iter().zip(&a) {
                            k.assign(dot_row[cc], fma(av, v, dot_row[cc].get()));
                        }
                    }
                }
            }
            for (r, ((acc_row, dot_row), s)) in acc.iter().zip(&dot).zip(&asum).enumerate() {
                let sum_a = k.let_(&format!("sum_a{r}"), hsum(s.get()));
                for ((acc_v, dot_v), &(_, scale, bias)) in acc_row.iter().zip(dot_row).zip(&loads) {
                    k.assign(*acc_v, fma(scale, hsum(dot_v.get()), fma(bias, sum_a, acc_v.get())));
                }
            }
        });
        for (r, acc_row) in acc.iter().enumerate() {
            for (cc, v) in acc_row.iter().enumerate() {
                let total = k.let_(&format!("total{r}_{cc}"), simd_sum(v.get()));
                let row = row0 + r as u32;
                let col = col0 + cc as u32;
                k.if_(lane.eq(0u32).and(row.lt(m)).and(col.lt(n)), |k| store_f32(k, c, row * n + col, total));
            }
        }
    });
    finish(k)
}

/// The affine kernel's blocking: `rows` of C per threadgroup, `cols`
/// columns per SIMD group, `words` packed words per lane and load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AffineBlocking {
    pub rows: u32,
    pub cols: u32,
    pub words: u32,
}

impl DecodePlan<AffineBlocking> {
    /// The kernel, [`qmatmul_affine()`].
    pub fn kernel(&self) -> Kernel {
        let AffineBlocking { rows, cols, words } = self.blocking;
        qmatmul_affine(self.out, rows, cols, words, self.threads)
    }
}

/// Plans `C[M, N] = A[M, K] · dequant(B)` for `B` in MLX's affine format
/// with `group` K values per scale and bias, in threadgroups of `threads`
/// ([`DEFAULT_THREADS`] is the library's choice).
pub(crate) fn plan(out: DType, m: usize, n: usize, k: usize, group: usize, threads: u32, options: BlockingOptions) -> Result<DecodePlan<AffineBlocking>, ShapeError> {
    let name = format!("qmatmul_{}_{out}", Format::MlxAffine);
    let [m32, n32, k32] = check_problem(&name, out, m, n, k, group)?;
    let t = check_threads(&name, threads)?;
    let simdgroups = t / SIMD_WIDTH;
    let rows = options.rows.unwrap_or(m32.min(MAX_ROWS_PER_THREADGROUP));
    if !(1..=MAX_ROWS_PER_THREADGROUP).contains(&rows) {
        return Err(ShapeError::new(name, format!("rows per threadgroup ({rows}) must be between 1 and {MAX_ROWS_PER_THREADGROUP}")));
    }
    let cols = match options.cols {
        Some(c) if !matches!(c, 1 | 2 | 4) => return Err(ShapeError::new(name, format!("columns per SIMD group ({c}) must be 1, 2 or 4"))),
        Some(c) => c,
        None => [4, 2, 1].into_iter().find(|&c| rows * c <= DEFAULT_REGISTER_TILE && n32.div_ceil(simdgroups * c) >= options.min_tiles).unwrap_or(1),
    };
    // K is a multiple of the group, so of 32 = 8 · 4: every width divides it.
    // By default two words per load at one row and one above (narrower
    // where a lane would get no chunk): on the H200 (11008 × 4096, group
    // 64, `BENCHMARKS.md`) one row took 20.6 µs with two against 22.5 with
    // one and 31.7 with four; at 2, 3, 4 and 8 rows one word was the
    // fastest at every column count (2 rows 27.9 against 44.3 and 58.9).
    let chunks = |w: u32| k32 / (w * VALUES_PER_WORD as u32);
    let widest = if m32 == 1 { 2 } else { 1 };
    let words = match options.words {
        Some(w) if !LOAD_WORDS.contains(&w) => return Err(ShapeError::new(name, format!("{w} packed words per lane and load must be 1, 2 or 4"))),
        Some(w) => w,
        None => LOAD_WORDS.into_iter().rev().filter(|&w| w <= widest).find(|&w| chunks(w) >= SIMD_WIDTH).unwrap_or(1),
    };
    let tiles = n32.div_ceil(simdgroups * cols);
    Ok(DecodePlan {
        format: Format::MlxAffine,
        out,
        blocking: AffineBlocking { rows, cols, words },
        threads: t,
        m: m32,
        n: n32,
        k: k32,
        group: group as u32,
        splits: 1,
        split_sum: SplitSum::Reduction,
        dispatch: Dispatch::threadgroups([tiles, m32.div_ceil(rows), 1], t),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::{validate, ValidationOptions};

    #[test]
    fn every_variant_validates() {
        for out in [DType::F32, DType::F16] {
            for rows in 1..=MAX_ROWS_PER_THREADGROUP {
                for cols in [1, 2, 4] {
                    for words in LOAD_WORDS {
                        let kernel = qmatmul_affine(out, rows, cols, words, 64);
                        if let Err(e) = validate(&kernel, &ValidationOptions::default()) {
                            panic!("{}: {e}", kernel.name);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn llama_mlp_shapes() {
        // K = 4096 at one row: 256 chunks of uint2 per column, every lane
        // busy; 4 columns per SIMD group, 32 per threadgroup: 344
        // threadgroups. Two rows load one word.
        let p = plan(DType::F16, 1, 11008, 4096, 64, 256, BlockingOptions::default()).unwrap();
        assert_eq!((p.blocking.rows, p.blocking.cols, p.blocking.words, p.group_shift()), (1, 4, 2, 6));
        assert_eq!(p.dispatch, Dispatch::threadgroups([344, 1, 1], 256));
        assert_eq!(p.kernel().name, "qmatmul_affine_f16_r1_c4_w2_t256");
        assert_eq!(plan(DType::F16, 2, 11008, 4096, 64, 256, BlockingOptions::default()).unwrap().kernel().name, "qmatmul_affine_f16_r2_c4_w1_t256");
        assert_eq!(p.bytes(), 4096 * 2 + 4096 * 11008 / 2 + 2 * (64 * 11008 * 2) + 11008 * 2);
        // At least 600 threadgroups: 2 columns per SIMD group (688).
        let gpu = BlockingOptions { min_tiles: 600, ..BlockingOptions::default() };
        assert_eq!(plan(DType::F16, 1, 11008, 4096, 64, 256, gpu).unwrap().blocking.cols, 2);
        // 8 rows keep to one column per SIMD group; M = 20 takes 3 row blocks.
        let p = plan(DType::F32, 20, 4096, 11008, 128, 256, BlockingOptions::default()).unwrap();
        assert_eq!((p.blocking.rows, p.blocking.cols), (8, 1));
        assert_eq!(p.dispatch, Dispatch::threadgroups([512, 3, 1], 256));
        // Short K: narrower loads so that every lane has a chunk (K = 256:
        // 16 chunks of uint2, so uint), down to uint for K = 64 (8 chunks).
        assert_eq!(plan(DType::F32, 1, 8, 512, 32, 256, BlockingOptions::default()).unwrap().blocking.words, 2);
        assert_eq!(plan(DType::F32, 1, 8, 256, 32, 256, BlockingOptions::default()).unwrap().blocking.words, 1);
        assert_eq!(plan(DType::F32, 1, 8, 64, 64, 256, BlockingOptions::default()).unwrap().blocking.words, 1);
    }

    #[test]
    fn bad_shapes_are_errors_with_the_numbers() {
        let e = |r: Result<DecodePlan<AffineBlocking>, ShapeError>| r.unwrap_err().to_string();
        let o = BlockingOptions::default();
        assert_eq!(e(plan(DType::F32, 1, 8, 96, 64, 256, o)), "qmatmul_mlx_affine_f32: k = 96 is not a multiple of the group size 64");
        assert_eq!(e(plan(DType::F16, 1, 8, 96, 48, 256, o)), "qmatmul_mlx_affine_f16: group size 48 is not 32, 64 or 128");
        assert_eq!(e(plan(DType::F32, 1, 0, 64, 64, 256, o)), "qmatmul_mlx_affine_f32: n must be at least 1");
        assert_eq!(e(plan(DType::BF16, 1, 8, 64, 64, 256, o)), "qmatmul_mlx_affine_bf16: the output is f32 or f16");
        assert!(e(plan(DType::F32, 1, 8, 64, 64, 48, o)).contains("threadgroup size 48"));
        assert_eq!(e(plan(DType::F32, 1, 8, 64, 64, 256, BlockingOptions { rows: Some(9), ..o })), "qmatmul_mlx_affine_f32: rows per threadgroup (9) must be between 1 and 8");
        assert_eq!(e(plan(DType::F32, 1, 8, 64, 64, 256, BlockingOptions { cols: Some(3), ..o })), "qmatmul_mlx_affine_f32: columns per SIMD group (3) must be 1, 2 or 4");
        assert_eq!(e(plan(DType::F32, 1, 8, 64, 64, 256, BlockingOptions { words: Some(8), ..o })), "qmatmul_mlx_affine_f32: 8 packed words per lane and load must be 1, 2 or 4");
    }
}
