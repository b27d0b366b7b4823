//! Row kernels: softmax, RMSNorm and LayerNorm over each row of `[rows, d]`.

use crate::{Error, KernelType, Ops};
use enigma_kernels::library::{norm, softmax};
use enigma_runtime::{Arg, Buffer};

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
            &[("x", Arg::from(x)), ("x4", Arg::from(x)), ("y", Arg::from(y)), ("y4", Arg::from(y)), ("d", Arg::u32(plan.d))],
        )
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
        let plan = softmax::plan_rows(name, dtype, rows, d, vec, self.row_options(d))?;
        let c = plan.config;
        let layer = b.is_some();
        let key = format!("norm {:?}", (layer, c.dtype, c.vec, c.items));
        let build = || if layer { norm::layer_norm(c.dtype, c.vec, c.items) } else { norm::rms_norm(c.dtype, c.vec, c.items) };
        let mut args = vec![
            ("x", Arg::from(x)),
            ("x4", Arg::from(x)),
            ("w", Arg::from(w)),
            ("w4", Arg::from(w)),
            ("y", Arg::from(&y)),
            ("y4", Arg::from(&y)),
            ("d", Arg::u32(plan.d)),
            ("eps", Arg::f32(eps)),
        ];
        if let Some(b) = b {
            args.extend([("b", Arg::from(b)), ("b4", Arg::from(b))]);
        }
        self.launch(key, build, plan.dispatch, &args)?;
        Ok(y)
    }

}
