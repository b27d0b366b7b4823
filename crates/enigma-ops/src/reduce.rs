//! Reductions: over a flat vector (one or two passes), over each row, and
//! over any axis of an array seen as `[outer, axis, inner]` (with the mean
//! and the indices of the extremes); the cross-entropy loss; 2-D pooling.

use crate::{arg_err, Error, KernelType, Ops};
use enigma_ir::Scalar;
use enigma_kernels::library::elementwise::Elementwise;
use enigma_kernels::library::reduce::{AxisBlocksArgs, AxisReduceArgs, AxisReduction, Pool, PoolArgs, PoolDims, ReduceArgs, RowReduceArgs};
use enigma_kernels::library::softmax::NllArgs;
use enigma_kernels::library::{self as lib, reduce, softmax, ReduceOp};
use enigma_runtime::Buffer;

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
        self.launch(format!("reduce {pass:?}"), || pass.kernel(), pass.dispatch, &ReduceArgs { x, x4: x, out, n: pass.n })
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
        self.launch(format!("reduce_rows {plan:?}"), || plan.kernel(), plan.dispatch, &RowReduceArgs { x, x4: x, out: &out, d: plan.d })?;
        Ok(out)
    }

    /// `r` over the middle axis of `[outer, axis, inner]`: `outer · inner`
    /// f32 values (i32 indices for argmax and argmin), in `[outer, inner]`
    /// order. Over the last axis (`inner = 1`) sum, max and min take the
    /// row kernels (the flat reduction for a single row), argmax and argmin
    /// [`Ops::arg_rows`]; everything else the axis kernel, one thread per
    /// column.
    pub fn reduce_axis(&self, r: AxisReduction, x: &Buffer, outer: usize, axis: usize, inner: usize) -> Result<Buffer, Error> {
        Ok(self.reduce_axis_scaled(r, x, outer, axis, inner, 1.0)?.0)
    }

    /// [`Ops::reduce_axis`], a reduction of values multiplied by `scale` as
    /// it is written where the kernel takes a factor (the blocked
    /// reductions over a middle axis): the result and whether it was.
    fn reduce_axis_scaled(&self, r: AxisReduction, x: &Buffer, outer: usize, axis: usize, inner: usize, scale: f32) -> Result<(Buffer, bool), Error> {
        let name = format!("{r}_axis");
        let dtype = self.dtype_of(&name, x)?;
        self.need(&name, "x", x, outer.saturating_mul(axis).saturating_mul(inner), dtype.scalar())?;
        match r {
            AxisReduction::Value(op) if inner == 1 && outer == 1 => return Ok((self.reduce(op, x, axis)?, false)),
            AxisReduction::Value(op) if inner == 1 => return Ok((self.reduce_rows(op, x, outer, axis)?, false)),
            AxisReduction::ArgMax | AxisReduction::ArgMin if inner == 1 => return Ok((self.arg_rows(r, x, outer, axis)?, false)),
            _ => {}
        }
        let out = self.output(r.output(), outer * inner)?;
        if !reduce::axis_by_blocks(outer, inner) {
            let plan = reduce::plan_axis(&name, outer, axis, inner, self.threads(KernelType::Elementwise))?;
            self.launch(format!("reduce_axis {:?}", (r, dtype)), || reduce::reduce_axis(r, dtype), plan.dispatch, &(AxisReduceArgs { x, out: &out }, plan.args()))?;
            return Ok((out, false));
        }
        let x4 = x.viewed_as(dtype.ty(4));
        let vector_ok = self.options.vectorize != Some(false) && x4.is_some();
        let plan = reduce::plan_axis_blocks(r, dtype, outer, axis, inner, self.threads(KernelType::Elementwise), vector_ok)?;
        let Some(pass2) = plan.pass2 else {
            self.axis_blocks_pass(&plan.pass1, x, None, &out, None, scale)?;
            return Ok((out, true));
        };
        let partials = outer * plan.pass1.splits as usize * inner;
        let values = self.output(Scalar::F32, partials)?;
        if pass2.kernel.of_partials {
            let indices = self.output(Scalar::U32, partials)?;
            self.axis_blocks_pass(&plan.pass1, x, None, &indices, Some(&values), 1.0)?;
            self.axis_blocks_pass(&pass2, &values, Some(&indices), &out, None, scale)?;
        } else {
            self.axis_blocks_pass(&plan.pass1, x, None, &values, None, 1.0)?;
            self.axis_blocks_pass(&pass2, &values, None, &out, None, scale)?;
        }
        Ok((out, true))
    }

    /// One pass of a blocked axis reduction: `x` (and the indices `xi` of
    /// a first pass) in, `out` (and the values `out_value` of a first pass
    /// of an index search) out.
    fn axis_blocks_pass(&self, pass: &reduce::AxisBlocksPass, x: &Buffer, xi: Option<&Buffer>, out: &Buffer, out_value: Option<&Buffer>, scale: f32) -> Result<(), Error> {
        let vec = pass.kernel.vec;
        let view = |b: &Buffer, ty: enigma_ir::Type| if vec == 4 { b.viewed_as(ty).unwrap_or_else(|| b.clone()) } else { b.clone() };
        let x = view(x, pass.kernel.dtype.ty(vec));
        let xi = xi.map(|xi| view(xi, enigma_ir::Type::vector(Scalar::U32, vec)));
        // The kernel reads `x` or its view `x4`, `xi` or `xi4`, as `vec` says;
        // its output is `out`, or `out_index` beside `out_value`.
        let args = AxisBlocksArgs { x: &x, x4: &x, xi: xi.as_ref(), xi4: xi.as_ref(), out, out_index: out, out_value };
        self.launch(format!("reduce_axis_blocks {:?}", pass.kernel), || pass.kernel(), pass.dispatch, &(args, pass.args(scale)))
    }

    /// The index (i32) of the first maximum (`ArgMax`) or minimum
    /// (`ArgMin`) of each row of `[rows, d]`, a NaN the extreme: one
    /// threadgroup per row (`library::reduce::arg_rows`), of the row
    /// reductions' size rounded down to a power of two.
    pub fn arg_rows(&self, r: AxisReduction, x: &Buffer, rows: usize, d: usize) -> Result<Buffer, Error> {
        let name = format!("{r}_rows");
        if !matches!(r, AxisReduction::ArgMax | AxisReduction::ArgMin) {
            return Err(arg_err(&name, format!("{r} is not argmax or argmin")));
        }
        let dtype = self.dtype_of(&name, x)?;
        self.need(&name, "x", x, rows.saturating_mul(d), dtype.scalar())?;
        let plan = reduce::plan_arg_rows(&name, rows, d, self.threads(KernelType::RowReduction { d }))?;
        let out = self.output(Scalar::I32, rows)?;
        self.launch(format!("arg_rows {:?}", (r, dtype, plan.threads)), || reduce::arg_rows(r, dtype, plan.threads), plan.dispatch, &RowReduceArgs { x, x4: x, out: &out, d: plan.d })?;
        Ok(out)
    }

    /// The mean over the middle axis of `[outer, axis, inner]`: the sum of
    /// [`Ops::reduce_axis`] times `1 / axis` (f32, rounded once more), `outer
    /// · inner` f32. The blocked reductions multiply as they write their
    /// last pass; the others are followed by a scale pass.
    pub fn mean_axis(&self, x: &Buffer, outer: usize, axis: usize, inner: usize) -> Result<Buffer, Error> {
        let factor = (1.0 / axis as f64) as f32;
        let (sum, scaled) = self.reduce_axis_scaled(AxisReduction::Value(ReduceOp::Sum), x, outer, axis, inner, factor)?;
        if scaled {
            return Ok(sum);
        }
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
            &(NllArgs { logp: &logp, target, loss: &loss, valid: &valid, ignore: ignore_index }, plan.args()),
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

    /// 2-D pooling of `planes` NCHW planes of `[h, w]` (`size`): windows of
    /// `kernel` (`[kh, kw]`), `stride` apart, the planes padded by
    /// `padding` (at most half the window, as in PyTorch): the output
    /// (`planes · oh · ow` of the input's type) and `[oh, ow]`, where
    /// `oh = (h + 2·ph - kh) / sh + 1` (rounded down).
    #[allow(clippy::too_many_arguments)]
    pub fn pool2d(&self, pool: Pool, x: &Buffer, planes: usize, size: [usize; 2], kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Result<(Buffer, [usize; 2]), Error> {
        let name = pool.name();
        let dtype = self.dtype_of(name, x)?;
        let mut out = [0usize; 2];
        for i in 0..2 {
            let axis = ["height", "width"][i];
            if kernel[i] == 0 || stride[i] == 0 {
                return Err(arg_err(name, format!("the window ({kernel:?}) and the stride ({stride:?}) must be at least 1 along the {axis}")));
            }
            if 2 * padding[i] > kernel[i] {
                return Err(arg_err(name, format!("padding {padding:?} is more than half the window {kernel:?} along the {axis}")));
            }
            if size[i] + 2 * padding[i] < kernel[i] {
                return Err(arg_err(name, format!("the window {kernel:?} is larger than the padded plane (size {size:?}, padding {padding:?}) along the {axis}")));
            }
            out[i] = (size[i] + 2 * padding[i] - kernel[i]) / stride[i] + 1;
        }
        self.need(name, "x", x, planes.saturating_mul(size[0]).saturating_mul(size[1]), dtype.scalar())?;
        let total = planes.saturating_mul(out[0]).saturating_mul(out[1]);
        lib::nonzero(name, "output elements", total)?;
        let total32 = lib::to_u32(name, "output elements", total)?;
        lib::to_u32(name, "input elements", planes.saturating_mul(size[0]).saturating_mul(size[1]))?;
        let t = lib::check_threads(name, self.threads(KernelType::Elementwise))?;
        let y = self.output(dtype.scalar(), total)?;
        let mut dims = [0; 10];
        for (d, v) in dims.iter_mut().zip([size[0], size[1], out[0], out[1], kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1]]) {
            *d = lib::to_u32(name, "a dimension", v)?;
        }
        let [h, w, oh, ow, kh, kw, sh, sw, ph, pw] = dims;
        let dims = PoolDims { h, w, oh, ow, kh, kw, sh, sw, ph, pw };
        self.launch(format!("pool2d {:?}", (pool, dtype)), || reduce::pool2d(pool, dtype), lib::Dispatch::threadgroups([total32.div_ceil(t), 1, 1], t), &(PoolArgs { x, y: &y, total: total32 }, dims))?;
        Ok((y, out))
    }
}
