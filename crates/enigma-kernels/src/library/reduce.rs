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
//! **Axis by blocks of columns** ([`reduce_axis_blocks`], chosen by
//! [`axis_by_blocks`] when a row of `inner` fills a SIMD group or the
//! columns are fewer than 65536): a threadgroup takes 32 consecutive
//! vectors of `inner` (128 columns with `float4`/`half4` loads, 32
//! without), its lanes reading consecutive vectors of a row (coalesced),
//! its SIMD groups walking different rows of the axis; the groups' partials
//! meet in threadgroup memory and one thread per column combines them
//! (for argmax/argmin keeping the extreme of the lowest index). When the
//! blocks are too few to fill the GPU ([`plan_axis_blocks`]: fewer than
//! 2^19 threads) the axis is split over threadgroups, each writing a
//! partial of `[outer, splits, inner]` (an index search also the extreme's
//! f32 value), and a second pass of the same kernel, over f32, reduces the
//! splits. Parameters: `x[4], [xi[4],] out | out_index, out_value, axis,
//! units, col_blocks, splits, chunk`.
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
//! plane). One thread per output element. Parameters: `x, y, h, w, oh,
//! ow, kh, kw, sh, sw, ph, pw, total`, the sizes by value.

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
    /// The buffers of [`reduce_axis_blocks`]: `x` (its view `x4` in the
    /// vector kernels) and, in a second pass over a split index search's
    /// partials, their indices `xi` (`xi4`); the result in `out`, or, in a
    /// first pass of a split index search, the indices in `out_index` and
    /// the values in `out_value`. Bound beside [`AxisBlocksDims`].
    pub struct AxisBlocksArgs {
        X x: buffer,
        X4 x4: buffer,
        XI xi: optional,
        XI4 xi4: optional,
        OUT out: buffer,
        OUT_INDEX out_index: buffer,
        OUT_VALUE out_value: optional,
    }
}

crate::kernel_args! {
    /// The geometry [`reduce_axis_blocks`] takes by value
    /// ([`AxisBlocksPass`]).
    pub struct AxisBlocksDims(values) {
        AXIS axis: u32,
        UNITS units: u32,
        COL_BLOCKS col_blocks: u32,
        SPLITS splits: u32,
        CHUNK chunk: u32,
    }
}

crate::kernel_args! {
    /// The buffers and count of [`pool2d`], bound beside [`PoolDims`].
    pub struct PoolArgs {
        X x: buffer,
        Y y: buffer,
        TOTAL total: u32,
    }
}

crate::kernel_args! {
    /// The sizes [`pool2d`] takes by value, in the kernel's order.
    pub struct PoolDims(values) {
        H h: u32,
        W w: u32,
        OH oh: u32,
        OW ow: u32,
        KH kh: u32,
        KW kw: u32,
        SH sh: u32,
        SW sw: u32,
        PH ph: u32,
        PW pw: u32,
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
        let t2 = groups.div_ceil(SIMD_WIDTH).saturating_mul(SIMD_WIDTH).min(MAX_THREADS_PER_THREADGROUP);
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

/// A kernel of [`reduce_axis_blocks`]: the reduction, the element type it
/// reads, the vector width along `inner`, the threadgroup size, and the
/// stage of an index search split over the axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AxisBlocks {
    pub r: AxisReduction,
    pub dtype: DType,
    pub vec: u8,
    pub threads: u32,
    /// Argmax/argmin only: the input is the f32 extremes `x` and u32
    /// indices `xi` of a first pass, not the array.
    pub of_partials: bool,
    /// Argmax/argmin only: write each split's extreme (`out_value`, f32)
    /// and index (`out_index`, u32) for a second pass, not the i32 result.
    pub partial: bool,
}

fn component(v: Ex, c: u8) -> Ex {
    match (v.ty().width(), c) {
        (1, _) => v,
        (_, 0) => v.x(),
        (_, 1) => v.y(),
        (_, 2) => v.z(),
        _ => v.w(),
    }
}

/// Whether `(bv, bi)` wins over `(av, ai)` in an index search (`largest`
/// for argmax): `b` holds an element and `a` none ([`NO_INDEX`]), or `b` is
/// the earlier NaN or a NaN against a number, or both are numbers and `b`
/// is the extreme (the earlier index on a tie).
fn arg_b_wins(largest: bool, (av, ai): (Ex, Ex), (bv, bi): (Ex, Ex)) -> Ex {
    let none = lit(Scalar::U32, NO_INDEX);
    let earlier = bi.lt(ai);
    let (a_num, b_num) = (av.eq(av), bv.eq(bv));
    let b_value = if largest { bv.gt(av) } else { bv.lt(av) };
    bi.ne(none).and(ai.eq(none).or((!b_num).and(a_num.or(earlier))).or(a_num.and(b_num).and(b_value.or(bv.eq(av).and(earlier)))))
}

/// Reduction over the middle axis of `[outer, axis, inner]` by blocks of
/// columns: `{r}_axis_blocks_{dtype}[_vec4]_t{threads}[_of_partials][_partial]`
/// (module docs).
///
/// # Panics
/// When `vec` is not 1 or 4, `threads` is not a multiple of 32 from 32 to
/// 1024, or a stage of a split index search is asked of a value reduction.
pub fn reduce_axis_blocks(b: &AxisBlocks) -> Kernel {
    let &AxisBlocks { r, dtype, vec, threads, of_partials, partial } = b;
    assert_vec(vec);
    assert!(threads.is_multiple_of(SIMD_WIDTH) && (SIMD_WIDTH..=MAX_THREADS_PER_THREADGROUP).contains(&threads), "threads {threads} is not a multiple of 32 from 32 to 1024");
    let arg = matches!(r, AxisReduction::ArgMax | AxisReduction::ArgMin);
    assert!(arg || !(of_partials || partial), "only an index search has split stages");
    let largest = r == AxisReduction::ArgMax;
    let name = format!("{}_axis_blocks_{}{}_t{threads}{}{}", r.name(), dtype, vec_suffix(vec), if of_partials { "_of_partials" } else { "" }, if partial { "_partial" } else { "" });
    let mut k = KernelBuilder::new(name);
    type P = AxisBlocksArgs;
    type D = AxisBlocksDims;
    let (xn, xin) = if vec == 4 { (P::X4, P::XI4) } else { (P::X, P::XI) };
    let x = k.buffer(xn, dtype.ty(vec), Access::Read);
    let xi = of_partials.then(|| k.buffer(xin, Type::vector(Scalar::U32, vec), Access::Read));
    let (out, out_value) = match r {
        AxisReduction::Value(_) => (k.buffer(P::OUT, Type::F32, Access::ReadWrite), None),
        _ if partial => (k.buffer(P::OUT_INDEX, Type::U32, Access::ReadWrite), Some(k.buffer(P::OUT_VALUE, Type::F32, Access::ReadWrite))),
        _ => (k.buffer(P::OUT, Type::I32, Access::ReadWrite), None),
    };
    let axis = k.value(D::AXIS, Type::U32);
    let units = k.value(D::UNITS, Type::U32);
    let col_blocks = k.value(D::COL_BLOCKS, Type::U32);
    let splits = k.value(D::SPLITS, Type::U32);
    let chunk = k.value(D::CHUNK, Type::U32);
    let simdgroups = threads / SIMD_WIDTH;
    let width = SIMD_WIDTH * vec as u32;
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let lane = k.let_("lane", tid % SIMD_WIDTH);
    let sg = k.let_("sg", tid / SIMD_WIDTH);
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let block = k.let_("block", group % col_blocks);
    let rest = k.let_("rest", group / col_blocks);
    let split = k.let_("split", rest % splits);
    let o = k.let_("o", rest / splits);
    let col = k.let_("col", block * SIMD_WIDTH + lane);
    let first = k.let_("first", split * chunk);
    let end = k.let_("end", min(axis, first + chunk));
    let none = lit(Scalar::U32, NO_INDEX);
    let identity = match r {
        AxisReduction::Value(op) => op.identity(),
        AxisReduction::ArgMax => f64::NEG_INFINITY,
        AxisReduction::ArgMin => f64::INFINITY,
    };
    let accs: Vec<Var> = (0..vec).map(|c| k.var(&format!("acc{c}"), f(identity))).collect();
    let indices: Vec<Var> = if arg { (0..vec).map(|c| k.var(&format!("index{c}"), none)).collect() } else { vec![] };
    // SIMD group `sg` walks rows sg, sg + S, … of its split; its lanes read
    // consecutive vectors of a row.
    k.if_(col.lt(units), |k| {
        k.for_range("j", first + sg, end, simdgroups, |k, j| {
            let at = k.let_("at", (o * axis + j) * units + col);
            let v = k.let_("v", load_f32(x, at));
            let from = xi.map(|xi| k.let_("from", xi.get(at)));
            for c in 0..vec {
                let e = component(v, c);
                let acc = accs[c as usize];
                match r {
                    AxisReduction::Value(op) => k.assign(acc, op.combine(acc.get(), e)),
                    _ => {
                        let index = indices[c as usize];
                        let better = if largest { e.gt(acc.get()) } else { e.lt(acc.get()) };
                        // The first NaN wins over every number and stays.
                        let nan_first = e.ne(e).and(acc.get().eq(acc.get()));
                        let candidate = from.map_or(j, |from| component(from, c));
                        k.if_(index.get().eq(none).or(better).or(nan_first), |k| {
                            k.assign(acc, e);
                            k.assign(index, candidate);
                        });
                    }
                }
            }
        });
    });
    // Each SIMD group's partials, then the threads of the first `width`
    // slots combine the groups' partials of one column each.
    let values = k.threadgroup_array("values", Type::F32, threads * vec as u32);
    let slots = arg.then(|| k.threadgroup_array("indices", Type::U32, threads * vec as u32));
    for c in 0..vec {
        let slot = k.let_(&format!("slot{c}"), sg * width + lane * vec as u32 + c as u32);
        k.store(values.at(slot), accs[c as usize].get());
        if let Some(slots) = slots {
            k.store(slots.at(slot), indices[c as usize].get());
        }
    }
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.for_range("t", tid, width, threads, |k, t| {
        let best = k.var("best", values.get(t));
        let index = slots.map(|s| k.var("best_index", s.get(t)));
        k.for_range("q", 1u32, simdgroups, 1u32, |k, q| {
            let bv = k.let_("bv", values.get(q * width + t));
            match (r, slots, index) {
                (AxisReduction::Value(op), _, _) => k.assign(best, op.combine(best.get(), bv)),
                (_, Some(slots), Some(index)) => {
                    let bi = k.let_("bi", slots.get(q * width + t));
                    k.if_(arg_b_wins(largest, (best.get(), index.get()), (bv, bi)), |k| {
                        k.assign(best, bv);
                        k.assign(index, bi);
                    });
                }
                _ => unreachable!("an index search has index slots"),
            }
        });
        let element = k.let_("element", block * width + t);
        let inner = units * vec as u32;
        k.if_(element.lt(inner), |k| {
            let dst = k.let_("dst", (o * splits + split) * inner + element);
            match (index, out_value) {
                (None, _) => k.store(out.at(dst), best.get()),
                (Some(index), Some(out_value)) => {
                    k.store(out.at(dst), index.get());
                    k.store(out_value.at(dst), best.get());
                }
                (Some(index), None) => k.store(out.at(dst), index.get().cast(Type::I32)),
            }
        });
    });
    finish(k)
}

/// One launch of a blocked axis reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisBlocksPass {
    pub kernel: AxisBlocks,
    pub outer: u32,
    pub axis: u32,
    /// Vectors (of `vec` elements) per row of `inner`.
    pub units: u32,
    pub col_blocks: u32,
    pub splits: u32,
    /// Rows of the axis per split.
    pub chunk: u32,
    pub dispatch: Dispatch,
}

impl AxisBlocksPass {
    pub fn kernel(&self) -> Kernel {
        reduce_axis_blocks(&self.kernel)
    }

    /// The geometry the kernel is bound with.
    pub fn args(&self) -> AxisBlocksDims {
        AxisBlocksDims { axis: self.axis, units: self.units, col_blocks: self.col_blocks, splits: self.splits, chunk: self.chunk }
    }
}

/// A blocked axis reduction: one pass, or a pass per split of the axis and
/// a second pass over the splits' partials (`[outer, splits, inner]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisBlocksPlan {
    pub pass1: AxisBlocksPass,
    pub pass2: Option<AxisBlocksPass>,
}

/// The threads a blocked axis reduction aims at: below this, the axis is
/// split over threadgroups.
const AXIS_THREADS_IN_FLIGHT: u64 = 1 << 19;
/// The fewest rows a SIMD group walks in one split.
const AXIS_MIN_ROWS_PER_SIMDGROUP: usize = 8;

/// Whether a reduction over the middle axis of `[outer, axis, inner]`
/// runs by blocks of columns ([`reduce_axis_blocks`]) rather than a thread
/// per column ([`reduce_axis`]): when a row of `inner` fills a SIMD group,
/// or when the columns are too few to fill the GPU one thread each.
pub fn axis_by_blocks(outer: usize, inner: usize) -> bool {
    inner >= SIMD_WIDTH as usize || outer.saturating_mul(inner) < AXIS_FEW_COLUMNS
}

/// Below this many columns a thread per column leaves the GPU idle.
const AXIS_FEW_COLUMNS: usize = 1 << 16;

/// Plans [`reduce_axis_blocks`] over the middle axis of `[outer, axis,
/// inner]` with threadgroups of `threads`; `vector_ok` whether the input
/// binds as 4-wide vectors (taken when `inner` is a multiple of 4).
pub fn plan_axis_blocks(r: AxisReduction, dtype: DType, outer: usize, axis: usize, inner: usize, threads: u32, vector_ok: bool) -> Result<AxisBlocksPlan, ShapeError> {
    let name = format!("{r}_axis_blocks_{dtype}");
    nonzero(&name, "outer", outer)?;
    nonzero(&name, "axis", axis)?;
    nonzero(&name, "inner", inner)?;
    let total = outer.checked_mul(axis).and_then(|v| v.checked_mul(inner)).unwrap_or(usize::MAX);
    to_u32(&name, "outer × axis × inner", total)?;
    let t = check_threads(&name, threads)?;
    let vec: u8 = if vector_ok && inner.is_multiple_of(4) { 4 } else { 1 };
    let units = (inner / vec as usize) as u32;
    let col_blocks = units.div_ceil(SIMD_WIDTH);
    let base = col_blocks as u64 * outer as u64;
    let simdgroups = (t / SIMD_WIDTH) as usize;
    let most = (axis / (simdgroups * AXIS_MIN_ROWS_PER_SIMDGROUP)).max(1) as u64;
    let wanted = AXIS_THREADS_IN_FLIGHT.div_ceil(base * t as u64);
    let chunk = axis.div_ceil(wanted.clamp(1, most) as usize);
    let splits = axis.div_ceil(chunk) as u32;
    let groups = to_u32(&name, "threadgroups", base as usize * splits as usize)?;
    let arg = !matches!(r, AxisReduction::Value(_));
    let first = AxisBlocks { r, dtype, vec, threads: t, of_partials: false, partial: arg && splits > 1 };
    let pass1 = AxisBlocksPass { kernel: first, outer: outer as u32, axis: axis as u32, units, col_blocks, splits, chunk: chunk as u32, dispatch: Dispatch::threadgroups([groups, 1, 1], t) };
    let pass2 = (splits > 1).then(|| AxisBlocksPass {
        kernel: AxisBlocks { r, dtype: DType::F32, vec, threads: t, of_partials: arg, partial: false },
        outer: outer as u32,
        axis: splits,
        units,
        col_blocks,
        splits: 1,
        chunk: splits,
        dispatch: Dispatch::threadgroups([base as u32, 1, 1], t),
    });
    Ok(AxisBlocksPlan { pass1, pass2 })
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
    let d: Vec<Ex> = PoolDims::NAMES.iter().map(|n| k.value(n, Type::U32)).collect();
    let (h, w, oh, ow, kh, kw, sh, sw, ph, pw) = (d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9]);
    let total = k.value(PoolArgs::TOTAL, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(total), |k| {
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
    fn axis_blocks_split_the_axis_when_the_blocks_are_few() {
        // sum over dim 1 of 32×1024×1024: 8 blocks of 128 columns × 32
        // outer = 256 threadgroups, so the axis splits 8 ways (128 rows each).
        let p = plan_axis_blocks(AxisReduction::Value(ReduceOp::Sum), DType::F32, 32, 1024, 1024, 256, true).unwrap();
        assert_eq!((p.pass1.kernel.vec, p.pass1.units, p.pass1.col_blocks, p.pass1.splits, p.pass1.chunk), (4, 256, 8, 8, 128));
        assert_eq!(p.pass1.dispatch, Dispatch::threadgroups([2048, 1, 1], 256));
        let p2 = p.pass2.unwrap();
        assert_eq!((p2.kernel.dtype, p2.axis, p2.splits, p2.dispatch.size[0]), (DType::F32, 8, 1, 256));
        // An index search keeps its extremes' values for the second pass.
        let p = plan_axis_blocks(AxisReduction::ArgMax, DType::F16, 1, 1000, 3, 256, true).unwrap();
        assert!(p.pass1.kernel.partial && p.pass2.unwrap().kernel.of_partials && p.pass1.kernel.vec == 1);
        // Enough blocks: one pass.
        assert!(plan_axis_blocks(AxisReduction::ArgMin, DType::F32, 4096, 64, 4096, 256, true).unwrap().pass2.is_none());
        assert!(axis_by_blocks(1, 3) && axis_by_blocks(100_000, 32) && !axis_by_blocks(100_000, 31));
    }

    #[test]
    fn row_plans_take_one_threadgroup_per_row() {
        assert_eq!(plan_rows(ReduceOp::Sum, DType::F32, 7, 31, 1, 32).unwrap().dispatch, Dispatch::threadgroups([7, 1, 1], 32));
        assert_eq!(plan_rows(ReduceOp::Sum, DType::F32, 7, 4096, 4, 512).unwrap().dispatch.threads[0], 512);
        assert!(plan_rows(ReduceOp::Sum, DType::F32, 7, 31, 4, 32).is_err());
        assert!(plan_rows(ReduceOp::Sum, DType::F32, 0, 31, 1, 32).is_err());
    }
}
