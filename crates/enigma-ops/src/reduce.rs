//! Reductions: over a flat vector (one or two passes) and over each row.

use crate::{Error, KernelType, Ops};
use enigma_ir::Scalar;
use enigma_kernels::library::{reduce, ReduceOp};
use enigma_runtime::{Arg, Buffer};

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

}
