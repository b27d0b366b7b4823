//! Row softmax and log-softmax, numerically stable, one threadgroup per
//! row; and both over the middle axis of `[outer, axis, inner]`.
//!
//! Two forms, chosen by the row length ([`plan`]):
//! * **cached** (`items > 0`): each thread loads its `items` (vector)
//!   elements of the row into registers once, takes its local maximum and
//!   `Σ exp(x - max)`, the threadgroup combines the `(max, sum)` pairs in one
//!   barrier, and the thread writes `exp(x - M) / L` from its registers: one
//!   read and one write of the row.
//! * **online** (`items = 0`, long rows): a single streaming pass keeps a
//!   running maximum and a sum rescaled whenever the maximum grows, the pairs
//!   are combined as above, then a normalisation pass re-reads the row and
//!   writes it.
//!
//! Exponentials are `exp2((x - max) · log2 e)`. A row of only `-inf` gives NaN
//! (0/0), as in PyTorch. Parameters: `x (or x4), y (or y4), d`, where `d`
//! is the row length in elements (`d % 4 == 0` for the vector form); `y`
//! may be `x` (in place). Log-softmax ([`log_softmax`]) is the same kernel
//! writing `x - M - log L` instead of `exp(x - M) / L`.
//!
//! **Over an axis** ([`softmax_axis`]): one thread per `(outer, inner)`
//! column (`reduce::axis_columns`), an online pass for `(M, L)` along the
//! axis and a second pass that writes; parameters `x, y, axis, inner,
//! columns`. For `inner = 1` the row kernels are the fast form.
//!
//! **Negative log-likelihood** ([`nll_axis`], cross-entropy's second
//! step): per column, `-logp[class]` of its i32 target class, 0 where the
//! target is the ignored index (and `valid` 0 there, else 1), `+inf` for a
//! target outside `[0, classes)`. Parameters `logp, target, loss, valid,
//! ignore, axis, inner, columns`.

use super::*;
use enigma_ir::{Access, Kernel, Scalar, Type};

/// A row kernel's shape: element type, vector width, and the vector loads
/// each thread keeps in registers (0 = stream the row).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowConfig {
    pub dtype: DType,
    pub vec: u8,
    pub items: u32,
}

impl RowConfig {
    pub(crate) fn suffix(&self) -> String {
        let form = if self.items > 0 { format!("c{}", self.items) } else { "online".to_string() };
        format!("{}{}_{}", self.dtype, vec_suffix(self.vec), form)
    }
}

/// The positions shared by row kernels: the row, this thread, the row's
/// length in vectors and its first vector.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowCtx {
    pub tid: Ex,
    pub tpg: Ex,
    pub dv: Ex,
    pub base: Ex,
}

pub(crate) fn row_ctx(k: &mut KernelBuilder, d: Ex, vec: u8) -> RowCtx {
    let row = k.let_("row", threadgroup_position_in_grid().x());
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let tpg = k.let_("tpg", threads_per_threadgroup().x());
    let dv = k.let_("dv", if vec == 4 { d / 4u32 } else { d });
    let base = k.let_("base", row * dv);
    RowCtx { tid, tpg, dv, base }
}

/// Loads this thread's `items` vectors of the row into registers; slots past
/// the row's end hold `fill`. Returns each register with its column index.
pub(crate) fn load_cached(k: &mut KernelBuilder, ctx: RowCtx, x: Mem, vec: u8, items: u32, fill: f64) -> Vec<(Var, Ex)> {
    (0..items)
        .map(|it| {
            let idx = k.let_(&format!("idx{it}"), ctx.tid + ctx.tpg * it);
            let v = k.var(&format!("v{it}"), splat(fill, vec));
            k.if_(idx.lt(ctx.dv), |k| k.assign(v, load_f32(x, ctx.base + idx)));
            (v, idx)
        })
        .collect()
}

/// The softmax kernel `softmax_{dtype}[_vec4]_{c<items>|online}`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn softmax(dtype: DType, vec: u8, items: u32) -> Kernel {
    row_softmax(dtype, vec, items, false)
}

/// The log-softmax kernel `log_softmax_{dtype}[_vec4]_{c<items>|online}`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn log_softmax(dtype: DType, vec: u8, items: u32) -> Kernel {
    row_softmax(dtype, vec, items, true)
}

/// The value a softmax kernel writes for `x` (f32 lanes) given the shift
/// (the maximum, or 0 for a row of `-inf`) and the sum of exponentials:
/// `exp(x - shift) / l`, or `x - shift - log l` for log-softmax.
fn softmax_value(k: &mut KernelBuilder, log_form: bool, shift: Ex, l: Ex) -> impl Fn(Ex) -> Ex {
    let scale = if log_form { k.let_("log_l", log(l)) } else { k.let_("inv", 1.0f32 / l) };
    move |x: Ex| if log_form { (x - shift) - scale } else { exp_shifted(x, shift) * scale }
}

crate::kernel_args! {
    /// The arguments of the row softmax and log-softmax: rows of `d`
    /// elements, the vector kernels reading the views `x4`, `y4`.
    pub struct RowArgs {
        X x: buffer,
        X4 x4: buffer,
        Y y: buffer,
        Y4 y4: buffer,
        D d: u32,
    }
}

crate::kernel_args! {
    /// The arguments of [`nll_axis`] beside `reduce::AxisArgs`.
    pub struct NllArgs {
        LOGP logp: buffer,
        TARGET target: buffer,
        LOSS loss: buffer,
        VALID valid: buffer,
        IGNORE ignore: i32,
    }
}

fn row_softmax(dtype: DType, vec: u8, items: u32, log_form: bool) -> Kernel {
    assert_vec(vec);
    let cfg = RowConfig { dtype, vec, items };
    let prefix = if log_form { "log_softmax" } else { "softmax" };
    let mut k = KernelBuilder::new(format!("{prefix}_{}", cfg.suffix()));
    type P = RowArgs;
    let (xn, yn) = if vec == 4 { (P::X4, P::Y4) } else { (P::X, P::Y) };
    let x = k.buffer(xn, dtype.ty(vec), Access::Read);
    let y = k.buffer(yn, dtype.ty(vec), Access::ReadWrite);
    let d = k.value(P::D, Type::U32);
    let ctx = row_ctx(&mut k, d, vec);
    if items > 0 {
        let regs = load_cached(&mut k, ctx, x, vec, items, f64::NEG_INFINITY);
        let mut m = hmax(regs[0].0.get());
        for &(v, _) in &regs[1..] {
            m = max(m, hmax(v.get()));
        }
        let m = k.let_("m", m);
        let shift = k.let_("shift", finite_or_zero(m));
        let mut l = hsum(exp_shifted(regs[0].0.get(), shift));
        for &(v, _) in &regs[1..] {
            l = l + hsum(exp_shifted(v.get(), shift));
        }
        let l = k.let_("l", l);
        let (total_max, total_sum) = threadgroup_max_sumexp(&mut k, "row", m, l);
        let shift = k.let_("final_shift", finite_or_zero(total_max));
        let value = softmax_value(&mut k, log_form, shift, total_sum);
        for &(v, idx) in &regs {
            k.if_(idx.lt(ctx.dv), |k| store_f32(k, y, ctx.base + idx, value(v.get())));
        }
    } else {
        let m = k.var("m", neg_inf());
        let l = k.var("l", f(0.0));
        k.for_range("j", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
            let t = k.let_("t", load_f32(x, ctx.base + j));
            let m_new = k.let_("m_new", max(m.get(), hmax(t)));
            let shift = k.let_("shift", finite_or_zero(m_new));
            k.assign(l, l.get() * exp_shifted(m.get(), shift) + hsum(exp_shifted(t, shift)));
            k.assign(m, m_new);
        });
        let (total_max, total_sum) = threadgroup_max_sumexp(&mut k, "row", m.get(), l.get());
        let shift = k.let_("final_shift", finite_or_zero(total_max));
        let value = softmax_value(&mut k, log_form, shift, total_sum);
        k.for_range("j2", ctx.tid, ctx.dv, ctx.tpg, |k, j| {
            let t = load_f32(x, ctx.base + j);
            store_f32(k, y, ctx.base + j, value(t));
        });
    }
    finish(k)
}

/// Softmax (or log-softmax, `log_form`) over the middle axis of
/// `[outer, axis, inner]`: `{softmax,log_softmax}_axis_{dtype}`.
pub fn softmax_axis(dtype: DType, log_form: bool) -> Kernel {
    let prefix = if log_form { "log_softmax" } else { "softmax" };
    let mut k = KernelBuilder::new(format!("{prefix}_axis_{dtype}"));
    let x = k.buffer(super::reduce::AxisRowArgs::X, dtype.ty(1), Access::Read);
    let y = k.buffer(super::reduce::AxisRowArgs::Y, dtype.ty(1), Access::ReadWrite);
    let (col, axis) = super::reduce::axis_columns(&mut k);
    k.if_(col.active, |k| {
        let m = k.var("m", neg_inf());
        let l = k.var("l", f(0.0));
        k.for_range("j", 0u32, axis, 1u32, |k, j| {
            let t = k.let_("t", load_f32(x, col.base + j * col.stride));
            let m_new = k.let_("m_new", max(m.get(), t));
            let shift = k.let_("shift", finite_or_zero(m_new));
            k.assign(l, l.get() * exp_shifted(m.get(), shift) + exp_shifted(t, shift));
            k.assign(m, m_new);
        });
        let shift = k.let_("final_shift", finite_or_zero(m.get()));
        let value = softmax_value(k, log_form, shift, l.get());
        k.for_range("j2", 0u32, axis, 1u32, |k, j| {
            let at = k.let_("at", col.base + j * col.stride);
            store_f32(k, y, at, value(load_f32(x, at)));
        });
    });
    finish(k)
}

/// The negative log-likelihood of each column's target over the middle
/// (class) axis of `[outer, classes, inner]` log-probabilities:
/// `nll_axis_{dtype}` (module docs).
pub fn nll_axis(dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("nll_axis_{dtype}"));
    type P = NllArgs;
    let logp = k.buffer(P::LOGP, dtype.ty(1), Access::Read);
    let target = k.buffer(P::TARGET, Type::I32, Access::Read);
    let loss = k.buffer(P::LOSS, Type::F32, Access::ReadWrite);
    let valid = k.buffer(P::VALID, Type::F32, Access::ReadWrite);
    let ignore = k.value(P::IGNORE, Type::I32);
    let (col, classes) = super::reduce::axis_columns(&mut k);
    k.if_(col.active, |k| {
        let t = k.let_("t", target.get(col.column));
        let skipped = k.let_("skipped", t.eq(ignore));
        let in_range = k.let_("in_range", t.ge(lit(Scalar::I32, 0.0)).and(t.cast(Type::U32).lt(classes)));
        // Out-of-range targets read class 0 and give +inf.
        let class = k.let_("class_index", select(lit(Scalar::U32, 0.0), t.cast(Type::U32), in_range));
        let value = k.let_("value", -load_f32(logp, col.base + class * col.stride));
        k.store(loss.at(col.column), select(select(f(f64::INFINITY), value, in_range), f(0.0), skipped));
        k.store(valid.at(col.column), select(f(1.0), f(0.0), skipped));
    });
    finish(k)
}

/// A planned row kernel (softmax, RMSNorm, LayerNorm).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowPlan {
    pub config: RowConfig,
    pub rows: u32,
    pub d: u32,
    pub dispatch: Dispatch,
}

/// Options of the row kernels' plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowOptions {
    /// Threads per threadgroup (`enigma-ops` takes seed 004's row-reduction
    /// rows).
    pub threads: u32,
    /// Keep the row in registers when it fits ([`MAX_CACHED_ITEMS`] loads
    /// per thread). `false` forces the streaming form.
    pub cache: bool,
}

impl RowOptions {
    /// Threadgroups of `threads`, rows cached in registers when they fit.
    pub fn threads(threads: u32) -> RowOptions {
        RowOptions { threads, cache: true }
    }
}

/// Plans a row kernel over `[rows, d]`: one threadgroup per row; the cached
/// form when `ceil(d / (vec · T)) ≤ MAX_CACHED_ITEMS`.
pub fn plan_rows(kernel: &str, dtype: DType, rows: usize, d: usize, vec: u8, options: RowOptions) -> Result<RowPlan, ShapeError> {
    let name = format!("{kernel}_{dtype}{}", vec_suffix(vec));
    check_vec(&name, vec)?;
    nonzero(&name, "rows", rows)?;
    nonzero(&name, "d", d)?;
    if vec == 4 && !d.is_multiple_of(4) {
        return Err(ShapeError::new(name, format!("float4 rows need d % 4 == 0, d = {d}")));
    }
    let rows32 = to_u32(&name, "rows", rows)?;
    let d32 = to_u32(&name, "d", d)?;
    to_u32(&name, "rows × d", rows.saturating_mul(d))?;
    let t = check_threads(&name, options.threads)?;
    let per_thread = (d32 / vec as u32).div_ceil(t);
    let items = if options.cache && per_thread <= MAX_CACHED_ITEMS { per_thread.max(1) } else { 0 };
    Ok(RowPlan { config: RowConfig { dtype, vec, items }, rows: rows32, d: d32, dispatch: Dispatch::threadgroups([rows32, 1, 1], t) })
}

/// Plans the softmax of `[rows, d]`.
pub fn plan(dtype: DType, rows: usize, d: usize, vec: u8, options: RowOptions) -> Result<RowPlan, ShapeError> {
    plan_rows("softmax", dtype, rows, d, vec, options)
}

/// The f64 reference.
pub fn reference(x: &[f32], d: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let m = row.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_rows_stream_and_short_rows_cache() {
        // 8192 floats as 2048 float4 over 256 threads: 8 loads each, cached.
        let p = plan(DType::F32, 8192, 8192, 4, RowOptions::threads(256)).unwrap();
        assert_eq!(p.dispatch, Dispatch::threadgroups([8192, 1, 1], 256));
        assert_eq!(p.config.items, 8);
        let p = plan(DType::F32, 8192, 8192, 1, RowOptions::threads(256)).unwrap();
        assert_eq!(p.config.items, 0);
        let p = plan(DType::F32, 2, 1 << 20, 4, RowOptions::threads(512)).unwrap();
        assert_eq!(p.config.items, 0);
        let p = plan(DType::F16, 3, 31, 1, RowOptions::threads(32)).unwrap();
        assert_eq!((p.config.items, p.dispatch.threads[0]), (1, 32));
        let p = plan(DType::F16, 3, 31, 1, RowOptions { threads: 32, cache: false }).unwrap();
        assert_eq!(p.config.items, 0);
        assert!(plan(DType::F16, 3, 31, 1, RowOptions::threads(48)).is_err());
    }
}
