//! Reductions of each row of `[rows, d]`: the value reductions
//! ([`reduce_rows`], [`plan_rows`]) and the index searches ([`arg_rows`],
//! [`plan_arg_rows`]), one threadgroup per row; the rows' f64 reference.

use super::axis::{arg_b_wins, AxisReduction, NO_INDEX};
use super::vector::reference;
use crate::library::*;
use enigma_ir::{Access, Kernel, Type};

crate::kernel_args! {
    /// The arguments of [`reduce_rows`] (`x` or its view `x4`) and
    /// [`arg_rows`] (`x`): rows of `d` elements, one result per row in
    /// `out`.
    pub struct RowReduceArgs {
        X x: buffer,
        X4 x4: buffer,
        OUT out: buffer,
        D d: u32,
    }
}

/// Row reduction `{op}_rows_{dtype}[_vec4]`: `out[row] = op(x[row, :])`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn reduce_rows(op: ReduceOp, dtype: DType, vec: u8) -> Kernel {
    assert_vec(vec);
    let mut k = KernelBuilder::new(format!("{}_rows_{}{}", op.name(), dtype, vec_suffix(vec)));
    let x = k.buffer(if vec == 4 { RowReduceArgs::X4 } else { RowReduceArgs::X }, dtype.ty(vec), Access::Read);
    let out = k.buffer(RowReduceArgs::OUT, Type::F32, Access::ReadWrite);
    let d = k.value(RowReduceArgs::D, Type::U32);
    let row = k.let_("row", threadgroup_position_in_grid().x());
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let dv = k.let_("dv", if vec == 4 { d / 4u32 } else { d });
    let base = k.let_("base", row * dv);
    let acc = k.var("acc", splat(op.identity(), vec));
    k.for_range("j", tid, dv, threads_per_threadgroup().x(), |k, j| {
        k.assign(acc, op.combine(acc.get(), load_f32(x, base + j)));
    });
    let total = threadgroup_reduce(&mut k, "tg", &[(op, op.horizontal(acc.get()))])[0];
    k.if_(tid.eq(0u32), |k| k.store(out.at(row), total));
    finish(k)
}

/// A planned row reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowsPlan {
    pub op: ReduceOp,
    pub dtype: DType,
    pub vec: u8,
    pub d: u32,
    pub dispatch: Dispatch,
}

impl RowsPlan {
    pub fn kernel(&self) -> Kernel {
        reduce_rows(self.op, self.dtype, self.vec)
    }
}

/// Plans a row reduction of `[rows, d]` with threadgroups of `threads`;
/// `vec` 4 needs `d % 4 == 0`.
pub fn plan_rows(op: ReduceOp, dtype: DType, rows: usize, d: usize, vec: u8, threads: u32) -> Result<RowsPlan, ShapeError> {
    let name = format!("{}_rows_{}{}", op.name(), dtype, vec_suffix(vec));
    check_vec(&name, vec)?;
    nonzero(&name, "rows", rows)?;
    nonzero(&name, "d", d)?;
    if vec == 4 && !d.is_multiple_of(4) {
        return Err(ShapeError::new(name, format!("float4 rows need d % 4 == 0, d = {d}")));
    }
    let rows = to_u32(&name, "rows", rows)?;
    let d32 = to_u32(&name, "d", d)?;
    to_u32(&name, "rows × d", (rows as usize).saturating_mul(d))?;
    let t = check_threads(&name, threads)?;
    Ok(RowsPlan { op, dtype, vec, d: d32, dispatch: Dispatch::threadgroups([rows, 1, 1], t) })
}

/// Argmax or argmin of each row of `[rows, d]` with threadgroups of
/// `threads` (a power of two, 32 to 1024): `{argmax,argmin}_rows_{dtype}_t{threads}`
/// (module docs), `out[row]` the i32 index.
///
/// # Panics
/// When `r` is not `ArgMax` or `ArgMin`, or `threads` is not a power of two
/// from 32 to 1024.
pub fn arg_rows(r: AxisReduction, dtype: DType, threads: u32) -> Kernel {
    assert!(matches!(r, AxisReduction::ArgMax | AxisReduction::ArgMin), "{r} is not an index search");
    assert!(threads.is_power_of_two() && (32..=1024).contains(&threads), "threads {threads} is not a power of two from 32 to 1024");
    let largest = r == AxisReduction::ArgMax;
    let mut k = KernelBuilder::new(format!("{}_rows_{}_t{threads}", r.name(), dtype));
    let x = k.buffer(RowReduceArgs::X, dtype.ty(1), Access::Read);
    let out = k.buffer(RowReduceArgs::OUT, Type::I32, Access::ReadWrite);
    let d = k.value(RowReduceArgs::D, Type::U32);
    let row = k.let_("row", threadgroup_position_in_grid().x());
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let base = k.let_("base", row * d);
    let none = lit(Scalar::U32, NO_INDEX);
    let best = k.var("best", f(if largest { f64::NEG_INFINITY } else { f64::INFINITY }));
    let index = k.var("index", none);
    k.for_range("j", tid, d, threads, |k, j| {
        let v = k.let_("v", load_f32(x, base + j));
        let better = if largest { v.gt(best.get()) } else { v.lt(best.get()) };
        // The first NaN wins over every number and stays.
        let nan_first = v.ne(v).and(best.get().eq(best.get()));
        k.if_(index.get().eq(none).or(better).or(nan_first), |k| {
            k.assign(best, v);
            k.assign(index, j);
        });
    });
    let values = k.threadgroup_array("values", Type::F32, threads);
    let indices = k.threadgroup_array("indices", Type::U32, threads);
    k.store(values.at(tid), best.get());
    k.store(indices.at(tid), index.get());
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let mut step = threads / 2;
    while step >= 1 {
        k.if_(tid.lt(step), |k| {
            let (av, ai) = (k.let_(&format!("av{step}"), values.get(tid)), k.let_(&format!("ai{step}"), indices.get(tid)));
            let (bv, bi) = (k.let_(&format!("bv{step}"), values.get(tid + step)), k.let_(&format!("bi{step}"), indices.get(tid + step)));
            let b_wins = arg_b_wins(largest, (av, ai), (bv, bi));
            k.if_(b_wins, |k| {
                k.store(values.at(tid), bv);
                k.store(indices.at(tid), bi);
            });
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
        step /= 2;
    }
    k.if_(tid.eq(0u32), |k| k.store(out.at(row), indices.get(0u32).cast(Type::I32)));
    finish(k)
}

/// A planned [`arg_rows`] launch: one threadgroup per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgRowsPlan {
    pub d: u32,
    /// Threads per threadgroup: the power of two at or below the asked size.
    pub threads: u32,
    pub dispatch: Dispatch,
}

/// Plans [`arg_rows`] for `rows` rows of `d` with threadgroups of at most
/// `threads` (rounded down to a power of two).
pub fn plan_arg_rows(kernel: &str, rows: usize, d: usize, threads: u32) -> Result<ArgRowsPlan, ShapeError> {
    nonzero(kernel, "rows", rows)?;
    nonzero(kernel, "d", d)?;
    let total = rows.saturating_mul(d);
    to_u32(kernel, "rows × d", total)?;
    let t = check_threads(kernel, threads)?;
    let t = 1u32 << t.ilog2();
    let rows = to_u32(kernel, "rows", rows)?;
    Ok(ArgRowsPlan { d: d as u32, threads: t, dispatch: Dispatch::threadgroups([rows, 1, 1], t) })
}

/// The f64 reference of a row reduction.
pub fn reference_rows(op: ReduceOp, x: &[f32], d: usize) -> Vec<f64> {
    x.chunks(d).map(|row| reference(op, row)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_plans_take_one_threadgroup_per_row() {
        assert_eq!(plan_rows(ReduceOp::Sum, DType::F32, 7, 31, 1, 32).unwrap().dispatch, Dispatch::threadgroups([7, 1, 1], 32));
        assert_eq!(plan_rows(ReduceOp::Sum, DType::F32, 7, 4096, 4, 512).unwrap().dispatch.threads[0], 512);
        assert!(plan_rows(ReduceOp::Sum, DType::F32, 7, 31, 4, 32).is_err());
        assert!(plan_rows(ReduceOp::Sum, DType::F32, 0, 31, 1, 32).is_err());
    }
}
