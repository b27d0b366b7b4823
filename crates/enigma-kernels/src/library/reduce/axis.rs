//! Reductions over the middle axis of `[outer, axis, inner]` with one
//! thread per column ([`reduce_axis`], [`plan_axis`]); what such a
//! reduction gives ([`AxisReduction`]), the column geometry the other
//! kernels over an axis share (`axis_columns`, [`AxisArgs`]) and the rule
//! of an index search (`arg_b_wins`).

use crate::library::*;
use enigma_ir::{Access, Kernel, Type};

crate::kernel_args! {
    /// The column geometry every kernel over the middle axis of
    /// `[outer, axis, inner]` declares (`axis_columns`), bound beside the
    /// kernel's buffers.
    pub struct AxisArgs(values) {
        AXIS axis: u32,
        INNER inner: u32,
        COLUMNS columns: u32,
    }
}

crate::kernel_args! {
    /// The buffers of the kernels over the middle axis that read `x` and
    /// write `y` (`softmax::softmax_axis`, `scan::scan_axis`), bound beside
    /// [`AxisArgs`].
    pub struct AxisRowArgs {
        X x: buffer,
        Y y: buffer,
    }
}

crate::kernel_args! {
    /// The buffers of [`reduce_axis`] (with [`AxisArgs`]).
    pub struct AxisReduceArgs {
        X x: buffer,
        OUT out: buffer,
    }
}

/// What a reduction over an axis gives per column: the reduced value
/// (f32), or the index (i32) of the first maximum or minimum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AxisReduction {
    Value(ReduceOp),
    ArgMax,
    ArgMin,
}

impl AxisReduction {
    pub fn name(self) -> &'static str {
        match self {
            AxisReduction::Value(op) => op.name(),
            AxisReduction::ArgMax => "argmax",
            AxisReduction::ArgMin => "argmin",
        }
    }

    /// The element type of the results: f32 values or i32 indices.
    pub fn output(self) -> Scalar {
        match self {
            AxisReduction::Value(_) => Scalar::F32,
            AxisReduction::ArgMax | AxisReduction::ArgMin => Scalar::I32,
        }
    }
}

impl fmt::Display for AxisReduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The positions of a kernel over an axis: whether this thread has a
/// column, the column's first element and the stride between its elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AxisColumn {
    pub column: Ex,
    pub active: Ex,
    pub base: Ex,
    pub stride: Ex,
}

/// Declares the by-value parameters `axis, inner, columns` and this
/// thread's column of `[outer, axis, inner]`; returns the column and the
/// axis length.
pub(crate) fn axis_columns(k: &mut KernelBuilder) -> (AxisColumn, Ex) {
    let axis = k.value(AxisArgs::AXIS, Type::U32);
    let inner = k.value(AxisArgs::INNER, Type::U32);
    let columns = k.value(AxisArgs::COLUMNS, Type::U32);
    let column = k.let_("column", thread_position_in_grid().x());
    let active = k.let_("active", column.lt(columns));
    // Threads past the last column compute an address they never load.
    let o = k.let_("o", column / inner);
    let i = k.let_("i", column % inner);
    let base = k.let_("base", o * axis * inner + i);
    (AxisColumn { column, active, base, stride: inner }, axis)
}

/// Reduction over the middle axis of `[outer, axis, inner]`:
/// `{sum,max,min,argmax,argmin}_axis_{dtype}`.
pub fn reduce_axis(r: AxisReduction, dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("{}_axis_{}", r.name(), dtype));
    let x = k.buffer(AxisReduceArgs::X, dtype.ty(1), Access::Read);
    let out = k.buffer(AxisReduceArgs::OUT, Type::scalar(r.output()), Access::ReadWrite);
    let (col, axis) = axis_columns(&mut k);
    k.if_(col.active, |k| match r {
        AxisReduction::Value(op) => {
            let acc = k.var("acc", f(op.identity()));
            k.for_range("j", 0u32, axis, 1u32, |k, j| k.assign(acc, op.combine(acc.get(), load_f32(x, col.base + j * col.stride))));
            k.store(out.at(col.column), acc.get());
        }
        AxisReduction::ArgMax | AxisReduction::ArgMin => {
            let largest = r == AxisReduction::ArgMax;
            let best = k.var("best", f(if largest { f64::NEG_INFINITY } else { f64::INFINITY }));
            let index = k.var("index", lit(Scalar::U32, 0.0));
            k.for_range("j", 0u32, axis, 1u32, |k, j| {
                let v = k.let_("v", load_f32(x, col.base + j * col.stride));
                let better = if largest { v.gt(best.get()) } else { v.lt(best.get()) };
                // The first NaN wins over every number and stays.
                let nan_first = v.ne(v).and(best.get().eq(best.get()));
                k.if_(better.or(nan_first), |k| {
                    k.assign(best, v);
                    k.assign(index, j);
                });
            });
            k.store(out.at(col.column), index.get().cast(Type::I32));
        }
    });
    finish(k)
}

/// A planned kernel over the middle axis of `[outer, axis, inner]`: one
/// thread per column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisPlan {
    pub axis: u32,
    pub inner: u32,
    pub columns: u32,
    pub dispatch: Dispatch,
}

impl AxisPlan {
    /// The column geometry the kernel is bound with.
    pub fn args(&self) -> AxisArgs {
        AxisArgs { axis: self.axis, inner: self.inner, columns: self.columns }
    }
}

/// Plans a kernel over the middle axis of `[outer, axis, inner]` with
/// threadgroups of `threads`.
pub fn plan_axis(kernel: &str, outer: usize, axis: usize, inner: usize, threads: u32) -> Result<AxisPlan, ShapeError> {
    nonzero(kernel, "outer", outer)?;
    nonzero(kernel, "axis", axis)?;
    nonzero(kernel, "inner", inner)?;
    let total = outer.checked_mul(axis).and_then(|v| v.checked_mul(inner)).unwrap_or(usize::MAX);
    to_u32(kernel, "outer × axis × inner", total)?;
    let t = check_threads(kernel, threads)?;
    let columns = (outer * inner) as u32;
    Ok(AxisPlan { axis: axis as u32, inner: inner as u32, columns, dispatch: Dispatch::threadgroups([columns.div_ceil(t), 1, 1], t) })
}

/// "No element yet": the index a thread of [`arg_rows`] holds before its first element.
pub(super) const NO_INDEX: f64 = u32::MAX as f64;

/// Whether `(bv, bi)` wins over `(av, ai)` in an index search (`largest`
/// for argmax): `b` holds an element and `a` none ([`NO_INDEX`]), or `b` is
/// the earlier NaN or a NaN against a number, or both are numbers and `b`
/// is the extreme (the earlier index on a tie).
pub(super) fn arg_b_wins(largest: bool, (av, ai): (Ex, Ex), (bv, bi): (Ex, Ex)) -> Ex {
    let none = lit(Scalar::U32, NO_INDEX);
    let earlier = bi.lt(ai);
    let (a_num, b_num) = (av.eq(av), bv.eq(bv));
    let b_value = if largest { bv.gt(av) } else { bv.lt(av) };
    bi.ne(none).and(ai.eq(none).or((!b_num).and(a_num.or(earlier))).or(a_num.and(b_num).and(b_value.or(bv.eq(av).and(earlier)))))
}
