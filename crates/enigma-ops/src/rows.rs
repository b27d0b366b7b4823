//! Row kernels: softmax, log-softmax, RMSNorm and LayerNorm over each row
//! of `[rows, d]`; softmax and log-softmax over any axis.

use crate::{Error, KernelType, Ops};
use enigma_kernels::library::norm::{self, NormArgs};
use enigma_kernels::library::reduce::{self, AxisRowArgs};
use enigma_kernels::library::softmax::{self, RowArgs};
use enigma_kernels::library::DType;
use enigma_ir::{Scalar, Type};
use enigma_runtime::Buffer;

impl Ops<'_> {

    fn row_options(&self, d: usize) -> softmax::RowOptions {
        softmax::RowOptions { threads: self.threads(KernelType::RowReduction { d }), cache: self.options.rows.cache.unwrap_or(true) }
    }

    /// Softmax of each row of `[rows, d]`.
    pub fn softmax(&self, x: &Buffer, rows: usize, d: usize) -> Result<Buffer, Error> {
        let dtype = self.dtype_of("softmax", x)?;
        self.need("softmax", "x", x, rows.saturating_mul(d), dtype.scalar())?;
        let y = self.output(dtype.scalar(), rows * d)?;
        let vec = self.vectorize("softmax", &[x, &y], dtype.ty(4), d.is_multiple_of(4))?;
        let plan = softmax::plan(dtype, rows, d, vec, self.row_options(d))?;
        self.softmax_into(&plan, x, &y)?;
        Ok(y)
    }

    pub(crate) fn softmax_into(&self, plan: &softmax::RowPlan, x: &Buffer, y: &Buffer) -> Result<(), Error> {
        let c = plan.config;
        self.launch(
            format!("softmax {:?}", (c.dtype, c.vec, c.items)),
            || softmax::softmax(c.dtype, c.vec, c.items),
            plan.dispatch,
            &RowArgs { x, x4: x, y, y4: y, d: plan.d },
        )
    }

    /// Log-softmax of each row of `[rows, d]`: `x - max - log Σ exp(x - max)`.
    pub fn log_softmax(&self, x: &Buffer, rows: usize, d: usize) -> Result<Buffer, Error> {
        let dtype = self.dtype_of("log_softmax", x)?;
        self.need("log_softmax", "x", x, rows.saturating_mul(d), dtype.scalar())?;
        let y = self.output(dtype.scalar(), rows * d)?;
        let vec = self.vectorize("log_softmax", &[x, &y], dtype.ty(4), d.is_multiple_of(4))?;
        let plan = softmax::plan_rows("log_softmax", dtype, rows, d, vec, self.row_options(d))?;
        let c = plan.config;
        self.launch(
            format!("log_softmax {:?}", (c.dtype, c.vec, c.items)),
            || softmax::log_softmax(c.dtype, c.vec, c.items),
            plan.dispatch,
            &RowArgs { x, x4: x, y: &y, y4: &y, d: plan.d },
        )?;
        Ok(y)
    }

    /// Softmax (or log-softmax, `log_form`) over the middle axis of
    /// `[outer, axis, inner]`, an output of the input's shape and type:
    /// the row kernels over the last axis (`inner = 1`), else one thread
    /// per column.
    pub fn softmax_axis(&self, x: &Buffer, outer: usize, axis: usize, inner: usize, log_form: bool) -> Result<Buffer, Error> {
        match (inner, log_form) {
            (1, false) => return self.softmax(x, outer, axis),
            (1, true) => return self.log_softmax(x, outer, axis),
            _ => {}
        }
        let name = if log_form { "log_softmax_axis" } else { "softmax_axis" };
        let dtype = self.dtype_of(name, x)?;
        let n = outer.saturating_mul(axis).saturating_mul(inner);
        self.need(name, "x", x, n, dtype.scalar())?;
        let plan = reduce::plan_axis(name, outer, axis, inner, self.threads(KernelType::Elementwise))?;
        let y = self.output(dtype.scalar(), n)?;
        self.launch(format!("softmax_axis {:?}", (dtype, log_form)), || softmax::softmax_axis(dtype, log_form), plan.dispatch, &(AxisRowArgs { x, y: &y }, plan.args()))?;
        Ok(y)
    }

    /// RMSNorm of each row: `y = x · rsqrt(mean(x²) + eps) · w`.
    pub fn rms_norm(&self, x: &Buffer, w: &Buffer, rows: usize, d: usize, eps: f32) -> Result<Buffer, Error> {
        self.norm("rms_norm", x, w, None, rows, d, eps)
    }

    /// LayerNorm of each row: `y = (x - mean) · rsqrt(var + eps) · w + b`.
    pub fn layer_norm(&self, x: &Buffer, w: &Buffer, b: &Buffer, rows: usize, d: usize, eps: f32) -> Result<Buffer, Error> {
        self.norm("layer_norm", x, w, Some(b), rows, d, eps)
    }

    #[allow(clippy::too_many_arguments)]
    fn norm(&self, name: &str, x: &Buffer, w: &Buffer, b: Option<&Buffer>, rows: usize, d: usize, eps: f32) -> Result<Buffer, Error> {
        let dtype = self.dtype_of(name, x)?;
        self.need(name, "x", x, rows.saturating_mul(d), dtype.scalar())?;
        self.need(name, "w", w, d, dtype.scalar())?;
        if let Some(b) = b {
            self.need(name, "b", b, d, dtype.scalar())?;
        }
        let y = self.output(dtype.scalar(), rows * d)?;
        let mut bufs = vec![x, w, &y];
        bufs.extend(b);
        let vec = self.vectorize(name, &bufs, dtype.ty(4), d.is_multiple_of(4))?;
        // Left to choose, 16-bit rows that are whole 16-byte words may be
        // read as such; the plan decides whether they are.
        let words = Type::vector(Scalar::U32, 4);
        let wide = vec == 4 && self.options.vectorize.is_none() && dtype != DType::F32 && d.is_multiple_of(8) && bufs.iter().all(|buf| buf.viewed_as(words).is_some());
        let layer = b.is_some();
        let plan = norm::plan(layer, dtype, rows, d, if wide { 8 } else { vec }, self.row_options(d))?;
        let view = |buf: &Buffer| (plan.vec() == 8).then(|| buf.viewed_as(words)).flatten();
        let (x8, w8, y8, b8) = (view(x), view(w), view(&y), b.and_then(view));
        let key = format!("norm {:?}", (layer, plan.form));
        let build = || plan.kernel(layer);
        let args = NormArgs { x, x4: x, x8: x8.as_ref(), w, w4: w, w8: w8.as_ref(), b, b4: b, b8: b8.as_ref(), y: &y, y4: &y, y8: y8.as_ref(), d: plan.d, rows: plan.rows, eps };
        self.launch(key, build, plan.dispatch, &args)?;
        Ok(y)
    }

}
