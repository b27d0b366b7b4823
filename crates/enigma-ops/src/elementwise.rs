//! Element-wise operations: `y = op(x[, b])` over a flat vector.

use crate::{arg_err, Error, KernelType, Ops};
use enigma_kernels::library::elementwise::{self, Elementwise};
use enigma_runtime::{Arg, Buffer};

impl Ops<'_> {

    /// `y = op(x[, b])` over `n` elements (`factor` is used by `Scale`);
    /// `y` is padded to whole vectors when the vector kernel runs.
    pub fn elementwise(&self, op: Elementwise, x: &Buffer, b: Option<&Buffer>, n: usize, factor: f32) -> Result<Buffer, Error> {
        let name = op.name();
        let dtype = self.dtype_of(name, x)?;
        let elem = dtype.scalar();
        self.need(name, "x", x, n, elem)?;
        if op.is_binary() {
            let b = b.ok_or_else(|| arg_err(name, "a binary operation needs `b`"))?;
            self.need(name, "b", b, n, elem)?;
        }
        let mut inputs = vec![x];
        inputs.extend(b.filter(|_| op.is_binary()));
        let vec = self.vectorize(name, &inputs, dtype.ty(4), true)?;
        let plan = elementwise::plan(op, dtype, n, vec, self.threads(KernelType::Elementwise))?;
        let y = self.flat_output(elem, n, vec)?;
        let mut args = vec![("x", Arg::from(x)), ("x4", Arg::from(x)), ("y", Arg::from(&y)), ("y4", Arg::from(&y)), ("n", Arg::u32(plan.n))];
        if let Some(b) = b {
            args.extend([("b", Arg::from(b)), ("b4", Arg::from(b))]);
        }
        args.push(("factor", Arg::f32(factor)));
        self.launch(format!("elementwise {plan:?}"), || plan.kernel(), plan.dispatch, &args)?;
        Ok(y)
    }

    /// `y = x · factor`.
    pub fn scale(&self, x: &Buffer, n: usize, factor: f32) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Scale, x, None, n, factor)
    }
    /// `y = a + b`.
    pub fn add(&self, a: &Buffer, b: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Add, a, Some(b), n, 1.0)
    }
    /// `y = a · b`.
    pub fn mul(&self, a: &Buffer, b: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Mul, a, Some(b), n, 1.0)
    }
    /// `y = max(x, 0)`.
    pub fn relu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Relu, x, None, n, 1.0)
    }
    /// `y = x · sigmoid(x)`.
    pub fn silu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Silu, x, None, n, 1.0)
    }
    /// GELU, tanh form.
    pub fn gelu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Gelu, x, None, n, 1.0)
    }

}
