//! Reductions: over a flat vector (one or two passes), over each row, and
//! over any axis of an array seen as `[outer, axis, inner]` (with the mean
//! and the indices of the extremes); the cross-entropy loss.

use crate::{Error, KernelType, Ops};
use enigma_ir::Scalar;
use enigma_kernels::library::elementwise::Elementwise;
use enigma_kernels::library::reduce::AxisReduction;
use enigma_kernels::library::{reduce, softmax, ReduceOp};
use enigma_runtime::{Arg, Buffer};

/// How [`Ops::cross_entropy`] reduces the per-target losses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossReduction {
    /// Their sum.
    Sum,
    /// Their sum over the targets not ignored.
    Mean,
}

impl Ops<'_> {

    /// `op` over `n` elements: a buffer of one f32.
    pub fn reduce(&self, op: ReduceOp, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        let name = format!("{op}_reduce");
        let dtype = self.dtype_of(&name, x)?;
        self.need(&name, "x", x, n, dtype.scalar())?;
        let vec = self.vectorize(&name, &[x], dtype.ty(4), true)?;
        let options = reduce::ReduceOptions { max_groups: self.options.reduce.max_threadgroups, unroll: self.options.reduce.loads };
        let plan = reduce::plan(op, dtype, n, vec, self.threads(KernelType::VectorReduction { n }), options)?;
        let result = self.output(Scalar::F32, 1)?;
        match plan.pass2 {
            None => self.reduce_pass(&plan.pass1, x, &result)?,
            Some(pass2) => {
                let partials = self.output(Scalar::F32, plan.pass1.outputs() as usize)?;
                self.reduce_pass(&plan.pass1, x, &partials)?;
                self.reduce_pass(&pass2, &partials, &result)?;
            }
        }
        Ok(result)
    }

    fn reduce_pass(&self, pass: &reduce::ReducePass, x: &Buffer, out: &Buffer) -> Result<(), Error> {
        self.launch(format!("reduce {pass:?}"), || pass.kernel(), pass.dispatch, &[("x", Arg::from(x)), ("x4", Arg::from(x)), ("out", Arg::from(out)), ("n", Arg::u32(pass.n))])
    }

    /// Sum of `n` elements: one f32.
    pub fn sum(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.reduce(ReduceOp::Sum, x, n)
    }
    /// Maximum of `n` elements: one f32.
    pub fn max(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.reduce(ReduceOp::Max, x, n)
    }
    /// Minimum of `n` elements: one f32.
    pub fn min(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.reduce(ReduceOp::Min, x, n)
    }

    /// `op` over each row of `[rows, d]`: `rows` f32.
    pub fn reduce_rows(&self, op: ReduceOp, x: &Buffer, rows: usize, d: usize) -> Result<Buffer, Error> {
        let name = format!("{op}_rows");
        let dtype = self.dtype_of(&name, x)?;
        self.need(&name, "x", x, rows.saturating_mul(d), dtype.scalar())?;
        let vec = self.vectorize(&name, &[x], dtype.ty(4), d.is_multiple_of(4))?;
        let plan = reduce::plan_rows(op, dtype, rows, d, vec, self.threads(KernelType::RowReduction { d }))?;
        let out = self.output(Scalar::F32, rows)?;
        self.launch(format!("reduce_rows {plan:?}"), || plan.kernel(), plan.dispatch, &[("x", Arg::from(x)), ("x4", Arg::from(x)), ("out", Arg::from(&out)), ("d", Arg::u32(plan.d))])?;
        Ok(out)
    }

    /// `r` over the middle axis of `[outer, axis, inner]`: `outer · inner`
    /// f32 values (i32 indices for argmax and argmin), in `[outer, inner]`
    /// order. Sum, max and min over the last axis (`inner = 1`) take the
    /// row kernels (the flat reduction for a single row); everything else
    /// the axis kernel, one thread per column.
    pub fn reduce_axis(&self, r: AxisReduction, x: &Buffer, outer: usize, axis: usize, inner: usize) -> Result<Buffer, Error> {
        let name = format!("{r}_axis");
        let dtype = self.dtype_of(&name, x)?;
        self.need(&name, "x", x, outer.saturating_mul(axis).saturating_mul(inner), dtype.scalar())?;
        match r {
            AxisReduction::Value(op) if inner == 1 && outer == 1 => return self.reduce(op, x, axis),
            AxisReduction::Value(op) if inner == 1 => return self.reduce_rows(op, x, outer, axis),
            _ => {}
        }
        let plan = reduce::plan_axis(&name, outer, axis, inner, self.threads(KernelType::Elementwise))?;
        let out = self.output(r.output(), outer * inner)?;
        self.launch(format!("reduce_axis {:?}", (r, dtype)), || reduce::reduce_axis(r, dtype), plan.dispatch, &[("x", Arg::from(x)), ("out", Arg::from(&out)), ("axis", Arg::u32(plan.axis)), ("inner", Arg::u32(plan.inner)), ("columns", Arg::u32(plan.columns))])?;
        Ok(out)
    }

    /// The mean over the middle axis of `[outer, axis, inner]`: the sum of
    /// [`Ops::reduce_axis`] times `1 / axis`, `outer · inner` f32.
    pub fn mean_axis(&self, x: &Buffer, outer: usize, axis: usize, inner: usize) -> Result<Buffer, Error> {
        let sum = self.reduce_axis(AxisReduction::Value(ReduceOp::Sum), x, outer, axis, inner)?;
        let factor = (1.0 / axis as f64) as f32;
        self.with_f32(|ops| ops.scale(&sum, outer * inner, factor))
    }

    /// Cross-entropy of `[outer, classes, inner]` logits (classes on the
    /// middle axis) against `outer · inner` i32 target classes: log-softmax
    /// over the classes, then each target's negative log-probability
    /// (`library::softmax::nll_axis`: 0 where the target is
    /// `ignore_index`, `+inf` outside `[0, classes)`), then per
    /// `reduction`: `None` the `outer · inner` f32 losses, `Some(Sum)` their
    /// sum, `Some(Mean)` their sum over the targets not ignored (one f32).
    #[allow(clippy::too_many_arguments)]
    pub fn cross_entropy(&self, x: &Buffer, target: &Buffer, outer: usize, classes: usize, inner: usize, ignore_index: i32, reduction: Option<LossReduction>) -> Result<Buffer, Error> {
        let name = "cross_entropy";
        let dtype = self.dtype_of(name, x)?;
        let n = outer.saturating_mul(inner);
        self.need(name, "target", target, n, Scalar::I32)?;
        let logp = self.softmax_axis(x, outer, classes, inner, true)?;
        let plan = reduce::plan_axis(name, outer, classes, inner, self.threads(KernelType::Elementwise))?;
        let loss = self.output(Scalar::F32, n)?;
        let valid = self.output(Scalar::F32, n)?;
        self.launch(
            format!("nll_axis {dtype:?}"),
            || softmax::nll_axis(dtype),
            plan.dispatch,
            &[
                ("logp", Arg::from(&logp)),
                ("target", Arg::from(target)),
                ("loss", Arg::from(&loss)),
                ("valid", Arg::from(&valid)),
                ("ignore", Arg::i32(ignore_index)),
                ("axis", Arg::u32(plan.axis)),
                ("inner", Arg::u32(plan.inner)),
                ("columns", Arg::u32(plan.columns)),
            ],
        )?;
        self.with_f32(|ops| match reduction {
            None => Ok(loss),
            Some(LossReduction::Sum) => ops.sum(&loss, n),
            Some(LossReduction::Mean) => {
                let total = ops.sum(&loss, n)?;
                let count = ops.sum(&valid, n)?;
                ops.elementwise(Elementwise::Div, &total, Some(&count), 1, 1.0)
            }
        })
    }
}
