//! GEMV `y = W·x`: `W` is `[m, k]` row-major in f32, f16 or bf16, `x` has
//! `k` f32 elements, `y` has `m` f32 elements; accumulation is f32.
//!
//! Each SIMD group computes `rows` consecutive rows (R): its 32 lanes walk
//! the rows together, lane `l` taking columns `l, l + 32, …` (as `float4` /
//! `half4` when `k % 4 == 0`), so every load instruction of the SIMD group
//! reads one contiguous stretch of a row, and every `x` load serves R rows.
//! `unroll` loads per row are in flight per iteration. With f16 or bf16
//! weights and `k % 8 == 0` the widest form (`vec` 8, `gemv_{dtype}_wide…`)
//! reads 16 bytes per lane and load — eight weights as a `uint4`, unpacked
//! in registers — so each load instruction of a SIMD group moves 512
//! contiguous bytes of a row. Rows lie `k` elements apart (a power of two
//! in the usual shapes), so SIMD groups that walk their rows in step read
//! the same offsets at once; the forms that load 16 bytes per lane (the
//! wide one, and f32 as `float4`) stagger them by default (`stagger`: SIMD
//! group `g` starts at column `g · 32 · unroll` and wraps round) and take
//! 4 rows per SIMD group. The row sums finish
//! with `simd_sum`; there is no threadgroup memory and no barrier. Row
//! indices past `m` are clamped for the loads (always in bounds) and never
//! stored.
//!
//! Seed 000's GEMV geometry (`ceil(M / 256)` threadgroups of 256 threads,
//! one thread per row) reads a row-major `W` with a stride of `k` elements
//! between neighbouring lanes — uncoalesced — so the library keeps the
//! 256-thread threadgroups of seed 004 but gives each SIMD group R rows:
//! `ceil(m / (8R))` threadgroups.
//!
//! Parameters: `w (or w4, or w8 for the wide form), x (or x4), y, m, k`.

use super::*;
use enigma_ir::{Access, Kernel, Scalar, Type};

/// Default rows per SIMD group.
pub const DEFAULT_ROWS_PER_SIMDGROUP: u32 = 2;
/// Default loads in flight per row and iteration.
pub const DEFAULT_UNROLL: u32 = 2;
/// Whether the forms that load 16 bytes per lane ([`loads_16_bytes`])
/// stagger their SIMD groups' walks by default ([`gemv()`]'s `stagger`):
/// on an H200 at 11008×4096 the staggered walk ran f16 in 25.5 µs and bf16
/// in 25.4 against 27.0 and 27.0 in the same run, and f32 (4 rows × 2
/// loads) in 44.6–45.1 µs against 45.3–45.4 (BENCHMARKS.md, "GEMV"). The
/// narrower forms were not measured and walk every row from column 0.
pub const WIDE_STAGGER: bool = true;
/// Default rows per SIMD group of the forms that load 16 bytes per lane:
/// on an H200 at 11008×4096, 4 rows × 2 loads ran f16 and bf16 in 27.0 and
/// 26.7 µs against 28.6 for 2 × 4 and 32.0 for 1 × 4, and f32 (staggered)
/// in 44.6–45.1 µs against 48.4–48.5 for 2 × 2, 50.7–51.0 for 8 × 2 and
/// 45.3 for 4 × 4 (BENCHMARKS.md, "GEMV").
pub const WIDE_ROWS_PER_SIMDGROUP: u32 = 4;

/// Whether the form of `wdtype` weights in loads of `vec` elements loads 16
/// bytes per lane: f16/bf16 words of eight (`vec` 8) or f32 `float4`s.
pub fn loads_16_bytes(wdtype: DType, vec: u8) -> bool {
    wdtype.size_bytes() * u32::from(vec) == 16
}

crate::kernel_args! {
    /// The arguments of [`gemv()`]: the weights `w` (viewed as `w4`, or as
    /// the wide form's `w8`), `x` (viewed as `x4` by the vector and wide
    /// forms), `y`, `m` rows of `k`.
    pub struct GemvArgs {
        W w: buffer,
        W4 w4: buffer,
        W8 w8: buffer,
        X x: buffer,
        X4 x4: buffer,
        Y y: buffer,
        M m: u32,
        K k: u32,
    }
}

/// `gemv_{wdtype}[_vec4|_wide]_r{rows}_u{unroll}[_st]`: `vec` 1, 4, or 8
/// (the wide form, 16-bit weights only: `w8` is bound as `uint4` words of
/// eight weights, `x4` as `float4`s). With `stagger` (`_st`) SIMD group
/// `g` of the grid walks its rows from column `g · 32 · unroll` (modulo
/// the row, wrapping round), so that the SIMD groups in flight read
/// different offsets of rows whose starts lie a power of two apart.
///
/// # Panics
/// When `vec` is not 1, 4 or 8, `vec` is 8 with f32 weights, or `rows` or
/// `unroll` is 0.
pub fn gemv(wdtype: DType, vec: u8, rows: u32, unroll: u32, stagger: bool) -> Kernel {
    let wide = vec == 8;
    assert!(!wide || wdtype != DType::F32, "the wide GEMV reads 16-bit weights");
    if !wide {
        assert_vec(vec);
    }
    assert!(rows >= 1 && unroll >= 1, "rows and unroll must be at least 1");
    let form = if wide { "_wide" } else { vec_suffix(vec) };
    let mut k = KernelBuilder::new(format!("gemv_{}{}_r{}_u{}{}", wdtype, form, rows, unroll, if stagger { "_st" } else { "" }));
    type P = GemvArgs;
    let (wn, xn) = match vec {
        8 => (P::W8, P::X4),
        4 => (P::W4, P::X4),
        _ => (P::W, P::X),
    };
    let w = k.buffer(wn, if wide { Type::vector(Scalar::U32, 4) } else { wdtype.ty(vec) }, Access::Read);
    let xvec = vec.min(4);
    let x = k.buffer(xn, Type::vector(Scalar::F32, xvec), Access::Read);
    let y = k.buffer(P::Y, Type::F32, Access::ReadWrite);
    let m = k.value(P::M, Type::U32);
    let kk = k.value(P::K, Type::U32);
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let first = k.let_("first_row", (threadgroup_position_in_grid().x() * simdgroups_per_threadgroup() + sg) * rows);
    let kv = k.let_("kv", if vec > 1 { kk / vec as u32 } else { kk });
    let pair = Type::vector(wdtype.scalar(), 2);
    let f32x2 = Type::vector(Scalar::F32, 2);
    let f32x4 = Type::vector(Scalar::F32, 4);
    // `first_row` is the same for the whole SIMD group: no divergence.
    k.if_(first.lt(m), |k| {
        let last = k.let_("last_row", m - 1u32);
        let bases: Vec<Ex> =
            (0..rows).map(|r| k.let_(&format!("base{r}"), min(first + r, last) * kv)).collect();
        let accs: Vec<Var> = (0..rows).map(|r| k.var(&format!("acc{r}"), splat(0.0, xvec))).collect();
        let shift = stagger.then(|| k.let_("shift", first / rows * (SIMD_WIDTH * unroll) % kv));
        // Column `col` of the walk, where the walk starts at `shift`.
        let rotate = |k: &mut KernelBuilder, col: Ex, u: u32| match shift {
            Some(shift) => {
                let at = k.let_(&format!("shifted{u}"), col + shift);
                k.let_(&format!("rotated{u}"), select(at - kv, at, at.lt(kv)))
            }
            None => col,
        };
        k.for_range("j", lane, kv, SIMD_WIDTH * unroll, |k, j| {
            // Every load of the step first, none behind a branch: a column
            // past the row's end re-reads the last one, and its products
            // are left out of the sums.
            let mut steps = vec![];
            for u in 0..unroll {
                let (col, live) = if u == 0 {
                    (j, None)
                } else {
                    let next = k.let_(&format!("next{u}"), j + SIMD_WIDTH * u);
                    (k.let_(&format!("col{u}"), min(next, kv - 1u32)), Some(k.let_(&format!("live{u}"), next.lt(kv))))
                };
                let col = rotate(k, col, u);
                let xs: Vec<Ex> = if wide {
                    // Eight weights per word: `x` elements 8·col .. 8·col + 8.
                    vec![k.let_(&format!("xa{u}"), x.get(col * 2u32)), k.let_(&format!("xb{u}"), x.get(col * 2u32 + 1u32))]
                } else {
                    vec![k.let_(&format!("xv{u}"), x.get(col))]
                };
                let ws: Vec<Ex> = bases.iter().enumerate().map(|(r, &base)| k.let_(&format!("w{u}_{r}"), w.get(base + col))).collect();
                steps.push((live, xs, ws));
            }
            for (u, (live, xs, ws)) in steps.into_iter().enumerate() {
                for (r, (acc, word)) in accs.iter().zip(ws).enumerate() {
                    let sum = if wide {
                        let halves: Vec<Ex> = (0..4u8)
                            .map(|c| k.let_(&format!("pair{u}_{r}_{c}"), word.component(c).bitcast(pair).cast(f32x2)))
                            .collect();
                        let lo = vector(f32x4, &[halves[0].x(), halves[0].y(), halves[1].x(), halves[1].y()]);
                        let hi = vector(f32x4, &[halves[2].x(), halves[2].y(), halves[3].x(), halves[3].y()]);
                        fma(hi, xs[1], fma(lo, xs[0], acc.get()))
                    } else {
                        fma(to_f32(word), xs[0], acc.get())
                    };
                    k.assign(*acc, match live {
                        Some(live) => select(acc.get(), sum, live),
                        None => sum,
                    });
                }
            }
        });
        for (r, acc) in accs.iter().enumerate() {
            let total = k.let_(&format!("total{r}"), simd_sum(hsum(acc.get())));
            let row = first + r as u32;
            k.if_(lane.eq(0u32).and(row.lt(m)), |k| k.store(y.at(row), total));
        }
    });
    finish(k)
}

/// A planned GEMV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvPlan {
    pub wdtype: DType,
    pub vec: u8,
    pub rows_per_simdgroup: u32,
    pub unroll: u32,
    /// Each SIMD group starts at its own column ([`gemv()`]'s `stagger`).
    pub stagger: bool,
    pub m: u32,
    pub k: u32,
    pub dispatch: Dispatch,
}

impl GemvPlan {
    pub fn kernel(&self) -> Kernel {
        gemv(self.wdtype, self.vec, self.rows_per_simdgroup, self.unroll, self.stagger)
    }
}

/// Options of [`plan`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GemvOptions {
    pub rows_per_simdgroup: Option<u32>,
    pub unroll: Option<u32>,
    /// Each SIMD group starts at its own column (default: the wide form,
    /// [`WIDE_STAGGER`]).
    pub stagger: Option<bool>,
}

/// Plans `y = W·x` for `W` of `[m, k]` in threadgroups of `threads`
/// (seed 000's GEMV: 256); `vec` 4 needs `k % 4 == 0`, `vec` 8 (the wide
/// form) 16-bit weights and `k % 8 == 0`.
pub fn plan(wdtype: DType, m: usize, k: usize, vec: u8, threads: u32, options: GemvOptions) -> Result<GemvPlan, ShapeError> {
    let name = format!("gemv_{wdtype}{}", if vec == 8 { "_wide" } else { vec_suffix(vec) });
    if vec == 8 {
        if wdtype == DType::F32 {
            return Err(ShapeError::new(name, "the wide form reads 16-bit weights (f16, bf16)"));
        }
    } else {
        check_vec(&name, vec)?;
    }
    nonzero(&name, "m", m)?;
    nonzero(&name, "k", k)?;
    if vec > 1 && !k.is_multiple_of(vec as usize) {
        return Err(ShapeError::new(name, format!("vector loads need k % {vec} == 0, k = {k}")));
    }
    let m32 = to_u32(&name, "m", m)?;
    let k32 = to_u32(&name, "k", k)?;
    to_u32(&name, "m × k", m.saturating_mul(k))?;
    let t = check_threads(&name, threads)?;
    let wide = loads_16_bytes(wdtype, vec);
    let rows = options.rows_per_simdgroup.unwrap_or(if wide { WIDE_ROWS_PER_SIMDGROUP } else { DEFAULT_ROWS_PER_SIMDGROUP });
    let unroll = options.unroll.unwrap_or(DEFAULT_UNROLL);
    if !(1..=8).contains(&rows) || !(1..=8).contains(&unroll) {
        return Err(ShapeError::new(name, format!("rows per SIMD group ({rows}) and unroll ({unroll}) must be between 1 and 8")));
    }
    let rows_per_group = (t / SIMD_WIDTH) * rows;
    let groups = m32.div_ceil(rows_per_group);
    Ok(GemvPlan { wdtype, vec, rows_per_simdgroup: rows, unroll, stagger: options.stagger.unwrap_or(wide && WIDE_STAGGER), m: m32, k: k32, dispatch: Dispatch::threadgroups([groups, 1, 1], t) })
}

/// The f64 reference.
pub fn reference(w: &[f32], x: &[f32], m: usize, k: usize) -> Vec<f64> {
    (0..m).map(|r| w[r * k..(r + 1) * k].iter().zip(x).map(|(&a, &b)| a as f64 * b as f64).sum()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_mlp_shape() {
        // 8 SIMD groups × 2 rows per threadgroup: 11008 / 16 = 688.
        let p = plan(DType::F16, 11008, 4096, 4, 256, GemvOptions::default()).unwrap();
        assert_eq!(p.dispatch, Dispatch::threadgroups([688, 1, 1], 256));
        assert!(plan(DType::F16, 10, 6, 4, 256, GemvOptions::default()).is_err());
        assert!(plan(DType::F16, 10, 8, 4, 256, GemvOptions { rows_per_simdgroup: Some(9), ..GemvOptions::default() }).is_err());
        assert_eq!(plan(DType::F16, 11008, 4096, 8, 256, GemvOptions::default()).unwrap().kernel().name, "gemv_f16_wide_r4_u2_st");
        assert_eq!(plan(DType::F16, 11008, 4096, 4, 256, GemvOptions::default()).unwrap().kernel().name, "gemv_f16_vec4_r2_u2");
        assert_eq!(plan(DType::F16, 10, 12, 8, 256, GemvOptions::default()).unwrap_err().to_string(), "gemv_f16_wide: vector loads need k % 8 == 0, k = 12");
        assert!(plan(DType::F32, 10, 16, 8, 256, GemvOptions::default()).is_err());
    }
}
