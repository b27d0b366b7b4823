//! Reductions: sum, max and min of a vector of any length, and of each row
//! of a `[rows, d]` matrix. Results are f32; accumulation is f32 per
//! thread, then SIMD-group and threadgroup reductions.
//!
//! **Vector** ([`reduce()`], two passes like seed 001 but for any length):
//! pass 1 runs `G` threadgroups that stride over the whole vector (grid-stride
//! loop, `unroll` independent loads in flight per thread, `float4` loads
//! through the `x4` view with the tail of `n % 4` elements read through the
//! scalar view `x` by the first threadgroup) and writes one partial per
//! threadgroup; pass 2 is the same kernel over the `G` f32 partials in one
//! threadgroup. When `G = 1` pass 1 writes the result directly.
//! Parameters: `[x4,] x, out, n`.
//!
//! **Rows** ([`reduce_rows`]): one threadgroup per row, threads striding
//! over the row (`float4` loads when `d % 4 == 0`); parameters
//! `x (or x4), out, d`. Threadgroup size from seed 004's row-reduction rows.
//!
//! **Axis** ([`reduce_axis`]): the array seen as `[outer, axis, inner]`,
//! reduced over its middle dimension: one thread per `(outer, inner)`
//! column, which walks the axis serially with a stride of `inner` elements
//! (consecutive threads read consecutive elements of a row of `inner`).
//! Besides sum, max and min it gives the index of the first maximum or
//! minimum (`argmax`, `argmin`, as i32; a NaN counts as the largest and
//! as the smallest value, as in PyTorch). Parameters: `x, out, axis,
//! inner, columns` (`columns = outer · inner`, the threads that work).
//! [`AxisPlan`] and `axis_columns` are shared by the other kernels over
//! an axis (softmax, cumulative sums and products).
//!
//! **Argmax and argmin of rows** ([`arg_rows`]): over the last axis
//! (`inner = 1`) the index search runs as the row reductions do, one
//! threadgroup of `T` threads (a power of two) per row, each thread keeping
//! the first extreme of its strided elements, then a tree over threadgroup
//! memory that keeps the extreme of the lowest index (a NaN the extreme,
//! the first NaN of the row). Parameters: `x, out, d`.
//!
//! **Pooling** ([`pool2d`]): the maximum or mean of each `kh × kw` window
//! of each `h × w` plane (NCHW), windows `sh`, `sw` apart, the planes
//! padded by `ph`, `pw` (padding never wins a maximum; a mean divides by
//! the whole window, or with `count_pad` false by its elements inside the
//! plane). One thread per output element. Parameters: `x, y, dims, total`,
//! `dims` a u32 buffer `[h, w, oh, ow, kh, kw, sh, sw, ph, pw]`.

use super::*;
use enigma_ir::{Access, Kernel, Type};

/// Default loads in flight per thread in the vector reduction.
pub const DEFAULT_UNROLL: u32 = 4;
/// Default cap on pass-1 threadgroups (each then loops over its share).
pub const DEFAULT_MAX_GROUPS: u32 = 1024;

crate::kernel_args! {
    /// The arguments of [`reduce()`]'s passes: `x` (and its vector view `x4`
    /// in the vector kernels), `n` elements, a partial per threadgroup in
    /// `out`.
    pub struct ReduceArgs {
        X x: buffer,
        X4 x4: buffer,
        OUT out: buffer,
        N n: u32,
    }
}

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

crate::kernel_args! {
    /// The arguments of [`pool2d`].
    pub struct PoolArgs {
        X x: buffer,
        Y y: buffer,
        DIMS dims: buffer,
        TOTAL total: u32,
    }
}

/// Pass-1 / pass-2 kernel of the vector reduction: `{op}_reduce_{dtype}[_vec4][_u{unroll}]`.
///
/// # Panics
/// When `vec` is not 1 or 4 or `unroll` is 0.
pub fn reduce(op: ReduceOp, dtype: DType, vec: u8, unroll: u32) -> Kernel {
    assert_vec(vec);
    assert!(unroll >= 1, "unroll must be at least 1");
    let unroll_suffix = if unroll > 1 { format!("_u{unroll}") } else { String::new() };
    let mut k = KernelBuilder::new(format!("{}_reduce_{}{}{}", op.name(), dtype, vec_suffix(vec), unroll_suffix));
    let x4 = (vec == 4).then(|| k.buffer(ReduceArgs::X4, dtype.ty(4), Access::Read));
    let x = k.buffer(ReduceArgs::X, dtype.ty(1), Access::Read);
    let out = k.buffer(ReduceArgs::OUT, Type::F32, Access::ReadWrite);
    let n = k.value(ReduceArgs::N, Type::U32);
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let tpg = k.let_("tpg", threads_per_threadgroup().x());
    let stride = k.let_("stride", threadgroups_per_grid().x() * tpg);
    let src = x4.unwrap_or(x);
    let nv = k.let_("nv", if vec == 4 { n / 4u32 } else { n });
    let accs: Vec<Var> = (0..unroll).map(|u| k.var(&format!("acc{u}"), splat(op.identity(), vec))).collect();
    k.for_range("i", group * tpg + tid, nv, stride * unroll, |k, i| {
        for (u, acc) in accs.iter().enumerate() {
            if u == 0 {
                k.assign(*acc, op.combine(acc.get(), load_f32(src, i)));
            } else {
                let j = k.let_(&format!("j{u}"), i + stride * (u as u32));
                k.if_(j.lt(nv), |k| k.assign(*acc, op.combine(acc.get(), load_f32(src, j))));
            }
        }
    });
    let mut combined = accs[0].get();
    for acc in &accs[1..] {
        combined = op.combine(combined, acc.get());
    }
    let value = k.var("value", op.horizontal(combined));
    if vec == 4 {
        // The tail of n % 4 elements, read through the scalar view.
        let tail = k.let_("tail", nv * 4u32 + tid);
        k.if_(group.eq(0u32).and(tail.lt(n)), |k| k.assign(value, op.combine(value.get(), load_f32(x, tail))));
    }
    let total = threadgroup_reduce(&mut k, "tg", &[(op, value.get())])[0];
    k.if_(tid.eq(0u32), |k| k.store(out.at(group), total));
    finish(k)
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

/// One launch of the vector reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReducePass {
    pub op: ReduceOp,
    pub dtype: DType,
    pub vec: u8,
    pub unroll: u32,
    /// Elements this pass reduces (its `n` parameter).
    pub n: u32,
    pub dispatch: Dispatch,
}

impl ReducePass {
    pub fn kernel(&self) -> Kernel {
        reduce(self.op, self.dtype, self.vec, self.unroll)
    }

    /// Partials (outputs) this pass writes: one per threadgroup.
    pub fn outputs(&self) -> u32 {
        self.dispatch.size[0]
    }
}

/// The vector reduction: pass 1, and pass 2 when pass 1 has more than one
/// threadgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReducePlan {
    pub pass1: ReducePass,
    pub pass2: Option<ReducePass>,
}

/// Options of [`plan`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceOptions {
    /// Cap on pass-1 threadgroups (default [`DEFAULT_MAX_GROUPS`]).
    pub max_groups: Option<u32>,
    /// Loads in flight per thread (default [`DEFAULT_UNROLL`]).
    pub unroll: Option<u32>,
}

/// Plans the reduction of `n` elements with pass-1 threadgroups of
/// `threads`; `vec` 4 when the caller can bind the vector view.
pub fn plan(op: ReduceOp, dtype: DType, n: usize, vec: u8, threads: u32, options: ReduceOptions) -> Result<ReducePlan, ShapeError> {
    let name = format!("{}_reduce_{}", op.name(), dtype);
    check_vec(&name, vec)?;
    nonzero(&name, "n", n)?;
    let n = to_u32(&name, "n", n)?;
    let t = check_threads(&name, threads)?;
    let unroll = options.unroll.unwrap_or(DEFAULT_UNROLL);
    if !(1..=16).contains(&unroll) {
        return Err(ShapeError::new(name, format!("unroll {unroll} is not between 1 and 16")));
    }
    let max_groups = options.max_groups.unwrap_or(DEFAULT_MAX_GROUPS).max(1);
    let nv = if vec == 4 { n / 4 } else { n };
    let groups = nv.div_ceil(t).clamp(1, max_groups);
    let pass1 = ReducePass { op, dtype, vec, unroll, n, dispatch: Dispatch::threadgroups([groups, 1, 1], t) };
    let pass2 = (groups > 1).then(|| {
        let t2 = groups.div_ceil(SIMD_WIDTH).saturating_mul(SIMD_WIDTH).min(MAX_THREADS);
        ReducePass { op, dtype: DType::F32, vec: 1, unroll: 1, n: groups, dispatch: Dispatch::threadgroups([1, 1, 1], t2) }
    });
    Ok(ReducePlan { pass1, pass2 })
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

/// "No element yet": the index a thread of [`arg_rows`] holds before its first element.
const NO_INDEX: f64 = u32::MAX as f64;

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
            let earlier = bi.lt(ai);
            let (a_num, b_num) = (av.eq(av), bv.eq(bv));
            let b_value = if largest { bv.gt(av) } else { bv.lt(av) };
            // b wins when it holds an element and a holds none, when it is
            // the earlier NaN or a NaN against a number, or when both are
            // numbers and it is the extreme (the earlier one on a tie).
            let b_wins = bi.ne(none).and(
                ai.eq(none)
                    .or((!b_num).and(a_num.or(earlier)))
                    .or(a_num.and(b_num).and(b_value.or(bv.eq(av).and(earlier)))),
            );
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

/// What a 2-D pooling window gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pool {
    Max,
    /// The mean; `count_pad`: padding counts in the divisor (PyTorch's
    /// `count_include_pad`).
    Avg { count_pad: bool },
}

impl Pool {
    pub fn name(self) -> &'static str {
        match self {
            Pool::Max => "max_pool2d",
            Pool::Avg { count_pad: true } => "avg_pool2d",
            Pool::Avg { count_pad: false } => "avg_pool2d_valid",
        }
    }
}

/// 2-D pooling over NCHW planes: `{max_pool2d,avg_pool2d[_valid]}_{dtype}`
/// (module docs).
pub fn pool2d(pool: Pool, dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("{}_{}", pool.name(), dtype));
    let x = k.buffer(PoolArgs::X, dtype.ty(1), Access::Read);
    let y = k.buffer(PoolArgs::Y, dtype.ty(1), Access::ReadWrite);
    let dims = k.buffer(PoolArgs::DIMS, Type::U32, Access::Read);
    let total = k.value(PoolArgs::TOTAL, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(total), |k| {
        let names = ["h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "ph", "pw"];
        let d: Vec<Ex> = names.iter().enumerate().map(|(i, n)| k.let_(n, dims.get(lit(Scalar::U32, i as f64)))).collect();
        let (h, w, oh, ow, kh, kw, sh, sw, ph, pw) = (d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9]);
        let ox = k.let_("ox", tid % ow);
        let oy = k.let_("oy", tid / ow % oh);
        let plane = k.let_("plane", tid / ow / oh);
        let i32 = |e: Ex| e.cast(Type::I32);
        let y0 = k.let_("y0", i32(oy * sh) - i32(ph));
        let x0 = k.let_("x0", i32(ox * sw) - i32(pw));
        let acc = k.var("acc", f(if pool == Pool::Max { f64::NEG_INFINITY } else { 0.0 }));
        let inside = k.var("inside", lit(Scalar::U32, 0.0));
        k.for_range("ky", 0u32, kh, 1u32, |k, ky| {
            let iy = k.let_("iy", y0 + i32(ky));
            k.for_range("kx", 0u32, kw, 1u32, |k, kx| {
                let ix = k.let_("ix", x0 + i32(kx));
                let zero = lit(Scalar::I32, 0.0);
                let within = iy.ge(zero).and(iy.lt(i32(h))).and(ix.ge(zero)).and(ix.lt(i32(w)));
                k.if_(within, |k| {
                    let v = k.let_("v", load_f32(x, (plane * h + iy.cast(Type::U32)) * w + ix.cast(Type::U32)));
                    k.assign(acc, if pool == Pool::Max { max(acc.get(), v) } else { acc.get() + v });
                    k.assign(inside, inside.get() + 1u32);
                });
            });
        });
        let value = match pool {
            Pool::Max => acc.get(),
            Pool::Avg { count_pad: true } => acc.get() / (kh * kw).cast(Type::F32),
            Pool::Avg { count_pad: false } => acc.get() / inside.get().cast(Type::F32),
        };
        store_f32(k, y, tid, value);
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

/// The f64 reference of a vector reduction.
pub fn reference(op: ReduceOp, x: &[f32]) -> f64 {
    op.reference(x.iter().map(|&v| v as f64))
}

/// The f64 reference of a row reduction.
pub fn reference_rows(op: ReduceOp, x: &[f32], d: usize) -> Vec<f64> {
    x.chunks(d).map(|row| reference(op, row)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cap_the_threadgroups_and_add_a_second_pass() {
        let p = plan(ReduceOp::Sum, DType::F32, 1 << 28, 4, 256, ReduceOptions::default()).unwrap();
        assert_eq!(p.pass1.dispatch, Dispatch::threadgroups([1024, 1, 1], 256));
        assert_eq!(p.pass2.unwrap().dispatch, Dispatch::threadgroups([1, 1, 1], 1024));
        let p = plan(ReduceOp::Max, DType::F16, 1000, 1, 256, ReduceOptions::default()).unwrap();
        assert_eq!(p.pass1.dispatch.size[0], 4);
        assert_eq!(p.pass2.unwrap().dispatch.threads[0], 32);
        let p = plan(ReduceOp::Min, DType::F32, 3, 4, 32, ReduceOptions::default()).unwrap();
        assert_eq!(p.pass1.dispatch.size[0], 1);
        assert!(p.pass2.is_none());
        assert!(plan(ReduceOp::Min, DType::F32, 3, 4, 256, ReduceOptions { unroll: Some(0), max_groups: None }).is_err());
    }

    #[test]
    fn row_plans_take_one_threadgroup_per_row() {
        assert_eq!(plan_rows(ReduceOp::Sum, DType::F32, 7, 31, 1, 32).unwrap().dispatch, Dispatch::threadgroups([7, 1, 1], 32));
        assert_eq!(plan_rows(ReduceOp::Sum, DType::F32, 7, 4096, 4, 512).unwrap().dispatch.threads[0], 512);
        assert!(plan_rows(ReduceOp::Sum, DType::F32, 7, 31, 4, 32).is_err());
        assert!(plan_rows(ReduceOp::Sum, DType::F32, 0, 31, 1, 32).is_err());
    }
}
