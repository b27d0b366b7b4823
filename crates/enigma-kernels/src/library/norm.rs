//! RMSNorm and LayerNorm over rows, one threadgroup per row, with the same
//! cached / streaming forms as [`super::softmax`] (planned by
//! [`super::softmax::plan_rows`]).
//!
//! * RMSNorm: `y = x · rsqrt(mean(x²) + eps) · w`. One reduction (one
//!   barrier).
//! * LayerNorm: `y = (x - mean) · rsqrt(var + eps) · w + b`. Cached: the
//!   mean, then the centred sum of squares from registers (two barriers, one
//!   read of the row). Streaming: sums of `x - K` and `(x - K)²` with the
//!   shift `K = x[row, 0]` (the shifted-data variance, stable when `K` is
//!   close to the mean) in one reduction, then the normalising pass.
//!
//! Parameters: `x, w, [b,] y, d, eps` (vector views `x4, w4, [b4,] y4` when
//! `vec = 4`), `eps` an f32 by-value parameter; `w` and `b` have `d`
//! elements of the same type as `x`.

use super::softmax::{load_cached, row_ctx, RowConfig};
use super::*;
use enigma_ir::{Access, Kernel, Type};

crate::kernel_args! {
    /// The arguments of [`rms_norm`] and [`layer_norm`] (module docs); `b`,
    /// `b4` for LayerNorm only.
    pub struct NormArgs {
        X x: buffer,
        X4 x4: buffer,
        W w: buffer,
        W4 w4: buffer,
        B b: optional,
        B4 b4: optional,
        Y y: buffer,
        Y4 y4: buffer,
        D d: u32,
        EPS eps: f32,
    }
}

fn params(k: &mut KernelBuilder, dtype: DType, vec: u8, bias: bool) -> (Mem, Mem, Option<Mem>, Mem, Ex, Ex) {
    type P = NormArgs;
    let [xn, wn, bn, yn] = if vec == 4 { [P::X4, P::W4, P::B4, P::Y4] } else { [P::X, P::W, P::B, P::Y] };
    let x = k.buffer(xn, dtype.ty(vec), Access::Read);
    let w = k.buffer(wn, dtype.ty(vec), Access::Read);
    let b = bias.then(|| k.buffer(bn, dtype.ty(vec), Access::Read));
    let y = k.buffer(yn, dtype.ty(vec), Access::ReadWrite);
    let d = k.value(P::D, Type::U32);
    let eps = k.value(P::EPS, Type::F32);
    (x, w, b, y, d, eps)
}

/// `rms_norm_{dtype}[_vec4]_{c<items>|online}`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn rms_norm(dtype: DType, vec: u8, items: u32) -> Kernel {
    assert_vec(vec);
    let cfg = RowConfig { dtype, vec, items };
    let mut k = KernelBuilder::new(format!("rms_norm_{}", cfg.suffix()));
    let (x, w, _, y, d, eps) = params(&mut k, dtype, vec, false);
    let ctx = row_ctx(&mut k, d, vec);
    let inv_d = k.let_("inv_d", 1.0f32 / d.cast(Type::F32));
    if items > 0 {
        let regs = load_cached(&mut k, ctx, x, vec, items, 0.0);
        let mut ss = hsum(regs[0].0.get() * regs[0].0.get());
        for &(v, _) in &regs[1..] {
            ss = ss + hsum(v.get() * v.get());
        }
        let total = threadgroup_reduce(&mut k, "ss", &[(ReduceOp::Sum, ss)])[0];
        let r = k.let_("r", rsqrt(total * inv_d + eps));
        for &(v, idx) in &regs {
            k.if_(idx.lt(ctx.dv), |k| store_f32(k, y, ctx.base + idx, v.get() * r * load_f32(w, idx)));
        }
    } else {
        let ss = k.var("ss", splat(0.0, vec));
        k.for_range("j", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
            let v = k.let_("v", load_f32(x, ctx.base + j));
            k.assign(ss, fma(v, v, ss.get()));
        });
        let total = threadgroup_reduce(&mut k, "ss", &[(ReduceOp::Sum, hsum(ss.get()))])[0];
        let r = k.let_("r", rsqrt(total * inv_d + eps));
        k.for_range("j2", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
            store_f32(k, y, ctx.base + j, load_f32(x, ctx.base + j) * r * load_f32(w, j));
        });
    }
    finish(k)
}

/// `layer_norm_{dtype}[_vec4]_{c<items>|online}`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn layer_norm(dtype: DType, vec: u8, items: u32) -> Kernel {
    assert_vec(vec);
    let cfg = RowConfig { dtype, vec, items };
    let mut k = KernelBuilder::new(format!("layer_norm_{}", cfg.suffix()));
    let (x, w, b, y, d, eps) = params(&mut k, dtype, vec, true);
    let b = b.expect("layer norm has a bias");
    let ctx = row_ctx(&mut k, d, vec);
    let inv_d = k.let_("inv_d", 1.0f32 / d.cast(Type::F32));
    if items > 0 {
        let regs = load_cached(&mut k, ctx, x, vec, items, 0.0);
        let mut s = hsum(regs[0].0.get());
        for &(v, _) in &regs[1..] {
            s = s + hsum(v.get());
        }
        let total = threadgroup_reduce(&mut k, "sum", &[(ReduceOp::Sum, s)])[0];
        let mean = k.let_("mean", total * inv_d);
        // Centred squares; slots past the row's end hold 0, so mask them.
        let mut sq: Option<Ex> = None;
        for (it, &(v, idx)) in regs.iter().enumerate() {
            let c = k.let_(&format!("c{it}"), select(v.get() - mean, splat(0.0, vec), idx.ge(ctx.dv)));
            let term = hsum(c * c);
            sq = Some(sq.map_or(term, |s| s + term));
        }
        let var_sum = threadgroup_reduce(&mut k, "sq", &[(ReduceOp::Sum, sq.expect("items > 0"))])[0];
        let rstd = k.let_("rstd", rsqrt(var_sum * inv_d + eps));
        for &(v, idx) in &regs {
            k.if_(idx.lt(ctx.dv), |k| {
                let out = fma((v.get() - mean) * rstd, load_f32(w, idx), load_f32(b, idx));
                store_f32(k, y, ctx.base + idx, out);
            });
        }
        return finish(k);
    }
    // Streaming: shifted sums with K = x[row, 0], then the normalising pass.
    let (mean, rstd) = {
        let first = load_f32(x, ctx.base);
        let shift = k.let_("shift", if vec == 4 { first.x() } else { first });
        let s1 = k.var("s1", splat(0.0, vec));
        let s2 = k.var("s2", splat(0.0, vec));
        k.for_range("j", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
            let c = k.let_("c", load_f32(x, ctx.base + j) - shift);
            k.assign(s1, s1.get() + c);
            k.assign(s2, fma(c, c, s2.get()));
        });
        let totals = threadgroup_reduce(&mut k, "sums", &[(ReduceOp::Sum, hsum(s1.get())), (ReduceOp::Sum, hsum(s2.get()))]);
        let m1 = k.let_("m1", totals[0] * inv_d);
        let var = k.let_("var", max(totals[1] * inv_d - m1 * m1, f(0.0)));
        (k.let_("mean", shift + m1), k.let_("rstd", rsqrt(var + eps)))
    };
    k.for_range("j2", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
        let out = fma((load_f32(x, ctx.base + j) - mean) * rstd, load_f32(w, j), load_f32(b, j));
        store_f32(k, y, ctx.base + j, out);
    });
    finish(k)
}

/// Plans RMSNorm over `[rows, d]`.
pub fn plan_rms(dtype: DType, rows: usize, d: usize, vec: u8, options: super::softmax::RowOptions) -> Result<super::softmax::RowPlan, ShapeError> {
    super::softmax::plan_rows("rms_norm", dtype, rows, d, vec, options)
}

/// Plans LayerNorm over `[rows, d]`.
pub fn plan_layer(dtype: DType, rows: usize, d: usize, vec: u8, options: super::softmax::RowOptions) -> Result<super::softmax::RowPlan, ShapeError> {
    super::softmax::plan_rows("layer_norm", dtype, rows, d, vec, options)
}

/// The f64 RMSNorm reference.
pub fn reference_rms(x: &[f32], w: &[f32], d: usize, eps: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let ms: f64 = row.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / d as f64;
        let r = 1.0 / (ms + eps as f64).sqrt();
        out.extend(row.iter().zip(w).map(|(&v, &w)| v as f64 * r * w as f64));
    }
    out
}

/// The f64 LayerNorm reference (biased variance, as PyTorch).
pub fn reference_layer(x: &[f32], w: &[f32], b: &[f32], d: usize, eps: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let mean: f64 = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var: f64 = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let r = 1.0 / (var + eps as f64).sqrt();
        out.extend(row.iter().zip(w.iter().zip(b)).map(|(&v, (&w, &b))| (v as f64 - mean) * r * w as f64 + b as f64));
    }
    out
}
