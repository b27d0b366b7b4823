//! Reductions over the middle axis by blocks of columns
//! ([`reduce_axis_blocks`], [`plan_axis_blocks`], chosen by
//! [`axis_by_blocks`]), split over the axis when the blocks are few.

use super::axis::{arg_b_wins, AxisReduction, NO_INDEX};
use crate::library::*;
use enigma_ir::{Access, Kernel, Type};

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
    /// ([`AxisBlocksPass`]), and for a reduction of values the factor each
    /// result is multiplied by as it is written (`scale`: 1 for a sum or an
    /// extreme, `1 / axis` in the last pass of a mean).
    pub struct AxisBlocksDims(values) {
        AXIS axis: u32,
        UNITS units: u32,
        COL_BLOCKS col_blocks: u32,
        SPLITS splits: u32,
        CHUNK chunk: u32,
        SCALE scale: f32,
    }
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
    let scale = matches!(r, AxisReduction::Value(_)).then(|| k.value(D::SCALE, Type::F32));
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
                (None, _) => k.store(out.at(dst), best.get() * scale.expect("a reduction of values has its scale")),
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

    /// The geometry the kernel is bound with, its results multiplied by
    /// `scale` (a reduction of values; ignored by an index search).
    pub fn args(&self, scale: f32) -> AxisBlocksDims {
        AxisBlocksDims { axis: self.axis, units: self.units, col_blocks: self.col_blocks, splits: self.splits, chunk: self.chunk, scale }
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
/// per column ([`reduce_axis`](super::reduce_axis)): when a row of `inner` fills a SIMD group,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
