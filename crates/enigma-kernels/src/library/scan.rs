//! Prefix sums (inclusive and exclusive) of any length. The levels below
//! the first run in three steps:
//!
//! 1. [`scan_block`]: each threadgroup scans a block of `T · vec · items`
//!    elements, `items` sub-blocks of `T` loads — each thread loads its
//!    `vec` elements of every sub-block (`items` loads in flight) and scans
//!    each load's serially, `simd_prefix_exclusive_sum` scans the thread
//!    totals within a SIMD group, and the SIMD-group totals go through
//!    threadgroup memory (one barrier for all sub-blocks; every SIMD group
//!    then sums the totals of the groups, and sub-blocks, before it with
//!    `simd_sum`). Thread 0 writes the block's total to `block_sums[group]`.
//! 2. The block totals are scanned (exclusively) the same way — recursively,
//!    when there is more than one block of them.
//! 3. [`scan_add`]: every block adds the scanned total of the blocks before
//!    it (0 for the first, which is written all the same so that every
//!    dispatch writes its whole output).
//!
//! The first level, when it has more than one block, runs as a
//! reduce-then-scan instead ([`BlockPass`]): a read-only pass writes only
//! the block totals, the totals are scanned as above, and a last pass
//! scans each block again with its offset added: three passes over memory
//! (read; read + write) instead of four (read + write; read + write).
//!
//! Element types: f32, i32 and u32 (sums in the element type). Parameters:
//! `scan_block`: `x, y, block_sums, n`; `scan_add`: `y, offsets, n` (`x4`,
//! `y4` with `vec = 4`). With `vec = 4` load `i < ceil(n/4)` is vector
//! `i`; the last one may be partial, so `x` and `y` must hold
//! `ceil(n/4)` whole vectors: lanes past `n` are read as 0 and written with
//! the running sum (buffer padding, not part of the result).

//!
//! **Over an axis** ([`scan_axis`]): cumulative sums or products over the
//! middle axis of `[outer, axis, inner]` (PyTorch's `cumsum`, `cumprod`),
//! one thread per `(outer, inner)` column walking the axis serially
//! (`reduce::axis_columns`); f32, f16 and bf16 accumulate in f32 and round
//! each result once, i32 and u32 accumulate in their own type (wrapping).
//! Parameters `x, y, axis, inner, columns`.

//!
//! **Over an axis by chunks** ([`scan_axis_chunks`], chosen by
//! [`plan_axis_scan`] when the columns are too few to fill the GPU a
//! thread each): the axis is cut into `splits` chunks of `chunk` rows and a
//! thread takes one column vector (`float4`/`half4` when `inner` is a
//! multiple of 4) of one chunk, consecutive threads on consecutive vectors
//! of a row (coalesced). A reduce-then-scan in two launches: the totals
//! pass writes each chunk's total per column (`totals`, `[outer, splits,
//! inner]` in the accumulation type); the scan pass starts each chunk from
//! the running total of the chunks before it (read back from `totals`,
//! which L2 holds) and walks its rows again, writing the results. Both
//! keep [`AXIS_CHUNK_LOADS`] loads in flight per thread. Accumulation as
//! in [`scan_axis`]. Parameters `x[4], [y[4],] totals[4], axis, units,
//! col_blocks, splits, chunk`.

//!
//! **Rows** ([`scan_rows`], chosen by [`plan_axis_scan`] over the last axis
//! when rows are long or few): a threadgroup per row walks it in chunks of
//! `T` loads (`float4`/`half4` when the row length is a multiple of 4):
//! each thread scans its load's lanes, a SIMD-group scan of the thread
//! totals (shuffles, so products scan as sums do), the SIMD-group totals
//! through threadgroup memory, and the chunk's total carried into the
//! next chunk. A whole f16/bf16 vector longer than [`SCAN_BLOCK`] runs as
//! rows of that block, each starting from an f32 offset (`offsets`, the
//! running total of the blocks before it, from the f32 prefix sum of their
//! row sums): accumulation is f32 throughout, each result rounded once.
//! Parameters: `x[4], y[4], [offsets,] d, n`.

use super::*;
use super::reduce::{plan_axis, AxisPlan};
use enigma_ir::{Access, Kernel, MemFlags, Scalar, Type};

/// Element types [`scan_axis`] supports.
pub const AXIS_SCAN_SCALARS: [Scalar; 5] = [Scalar::F32, Scalar::F16, Scalar::BF16, Scalar::I32, Scalar::U32];

/// The running operation of [`scan_axis`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AxisScan {
    /// `y[j] = x[0] + … + x[j]`.
    Sum,
    /// `y[j] = x[0] · … · x[j]`.
    Product,
}

impl AxisScan {
    pub fn name(self) -> &'static str {
        match self {
            AxisScan::Sum => "cumsum",
            AxisScan::Product => "cumprod",
        }
    }
}

/// The inclusive running sum or product over the middle axis of
/// `[outer, axis, inner]`: `{cumsum,cumprod}_axis_{scalar}`.
///
/// # Panics
/// When `scalar` is not one of [`AXIS_SCAN_SCALARS`].
pub fn scan_axis(op: AxisScan, scalar: Scalar) -> Kernel {
    assert!(AXIS_SCAN_SCALARS.contains(&scalar), "scan_axis takes f32, f16, bf16, i32 or u32, not {scalar}");
    let float = scalar.is_float();
    let acc_ty = if float { Scalar::F32 } else { scalar };
    let mut k = KernelBuilder::new(format!("{}_axis_{}", op.name(), scalar.name()));
    let x = k.buffer(super::reduce::AxisRowArgs::X, Type::scalar(scalar), Access::Read);
    let y = k.buffer(super::reduce::AxisRowArgs::Y, Type::scalar(scalar), Access::ReadWrite);
    let (col, axis) = super::reduce::axis_columns(&mut k);
    k.if_(col.active, |k| {
        let identity = match op {
            AxisScan::Sum => 0.0,
            AxisScan::Product => 1.0,
        };
        let acc = k.var("acc", lit(acc_ty, identity));
        k.for_range("j", 0u32, axis, 1u32, |k, j| {
            let at = k.let_("at", col.base + j * col.stride);
            let v = if float { load_f32(x, at) } else { x.get(at) };
            k.assign(acc, match op {
                AxisScan::Sum => acc.get() + v,
                AxisScan::Product => acc.get() * v,
            });
            if float {
                store_f32(k, y, at, acc.get());
            } else {
                k.store(y.at(at), acc.get());
            }
        });
    });
    finish(k)
}

crate::kernel_args! {
    /// The buffers of [`scan_axis_chunks`]: `x` and `y` (their views `x4`,
    /// `y4` in the vector kernels; the totals pass has no `y`) and the
    /// chunks' totals `totals` (`totals4`), bound beside [`AxisChunkDims`].
    pub struct AxisChunkArgs {
        X x: buffer,
        X4 x4: buffer,
        Y y: optional,
        Y4 y4: optional,
        TOTALS totals: buffer,
        TOTALS4 totals4: buffer,
    }
}

crate::kernel_args! {
    /// The geometry [`scan_axis_chunks`] takes by value: the axis length,
    /// the vectors per row of `inner`, the threadgroups across a row, the
    /// chunks of the axis and the rows of each.
    pub struct AxisChunkDims(values) {
        AXIS axis: u32,
        UNITS units: u32,
        COL_BLOCKS col_blocks: u32,
        SPLITS splits: u32,
        CHUNK chunk: u32,
    }
}

/// The launches of a running sum or product over an axis by chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChunkPass {
    /// Each chunk's total per column into `totals`.
    Totals,
    /// Each chunk's running results from the totals of the chunks before.
    Scan,
}

/// The loads a thread of [`scan_axis_chunks`] issues before it combines
/// any of them.
pub const AXIS_CHUNK_LOADS: u32 = 8;

/// One pass of the running sum or product over the middle axis of
/// `[outer, axis, inner]` by chunks of the axis:
/// `{cumsum,cumprod}_axis_chunks_{totals,scan}_{scalar}[_vec4]` (module
/// docs).
///
/// # Panics
/// When `scalar` is not one of [`AXIS_SCAN_SCALARS`] or `vec` is not 1 or 4.
pub fn scan_axis_chunks(op: AxisScan, scalar: Scalar, vec: u8, pass: ChunkPass) -> Kernel {
    assert!(AXIS_SCAN_SCALARS.contains(&scalar), "scan_axis_chunks takes f32, f16, bf16, i32 or u32, not {scalar}");
    assert_vec(vec);
    let float = scalar.is_float();
    let acc_ty = if float { Scalar::F32 } else { scalar };
    let pass_name = match pass {
        ChunkPass::Totals => "totals",
        ChunkPass::Scan => "scan",
    };
    let mut k = KernelBuilder::new(format!("{}_axis_chunks_{pass_name}_{}{}", op.name(), scalar.name(), vec_suffix(vec)));
    type P = AxisChunkArgs;
    type D = AxisChunkDims;
    let (xn, yn, tn) = if vec == 4 { (P::X4, P::Y4, P::TOTALS4) } else { (P::X, P::Y, P::TOTALS) };
    let x = k.buffer(xn, Type::vector(scalar, vec), Access::Read);
    let y = (pass == ChunkPass::Scan).then(|| k.buffer(yn, Type::vector(scalar, vec), Access::ReadWrite));
    let acc_vec = Type::vector(acc_ty, vec);
    let totals = k.buffer(tn, acc_vec, if pass == ChunkPass::Totals { Access::ReadWrite } else { Access::Read });
    let axis = k.value(D::AXIS, Type::U32);
    let units = k.value(D::UNITS, Type::U32);
    let col_blocks = k.value(D::COL_BLOCKS, Type::U32);
    let splits = k.value(D::SPLITS, Type::U32);
    let chunk = k.value(D::CHUNK, Type::U32);
    let identity = {
        let one = lit(acc_ty, if op == AxisScan::Sum { 0.0 } else { 1.0 });
        if vec == 1 { one } else { vector(acc_vec, &[one]) }
    };
    let combine = |a: Ex, b: Ex| if op == AxisScan::Sum { a + b } else { a * b };
    let load = |x: Mem, at: Ex| if float { load_f32(x, at) } else { x.get(at) };
    // Threadgroup `group` is block `block` of the row's vectors, chunk
    // `split` of the axis, outer index `o` (blocks fastest: neighbouring
    // threadgroups read neighbouring memory).
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let block = k.let_("block", group % col_blocks);
    let rest = k.let_("rest", group / col_blocks);
    let split = k.let_("split", rest % splits);
    let o = k.let_("o", rest / splits);
    let unit = k.let_("unit", block * threads_per_threadgroup().x() + thread_index_in_threadgroup());
    k.if_(unit.lt(units), |k| {
        let first = k.let_("first", split * chunk);
        let end = k.let_("end", min(axis, first + chunk));
        let acc = k.var("acc", identity);
        if pass == ChunkPass::Scan {
            // The running total of the chunks before this one: independent
            // loads (L2), combined in order.
            let chunk_base = k.let_("chunk_base", o * splits * units + unit);
            k.for_range("s", 0u32, split, AXIS_CHUNK_LOADS, |k, s| {
                let parts: Vec<Var> = (0..AXIS_CHUNK_LOADS)
                    .map(|u| {
                        let part = k.var(&format!("t{u}"), identity);
                        let at = s + u;
                        k.if_(at.lt(split), |k| k.assign(part, totals.get(chunk_base + at * units)));
                        part
                    })
                    .collect();
                for part in parts {
                    k.assign(acc, combine(acc.get(), part.get()));
                }
            });
        }
        let row_base = k.let_("row_base", o * axis * units + unit);
        k.for_range("j", first, end, AXIS_CHUNK_LOADS, |k, j| {
            let loads: Vec<(Ex, Var)> = (0..AXIS_CHUNK_LOADS)
                .map(|u| {
                    let v = k.var(&format!("v{u}"), identity);
                    let at = k.let_(&format!("at{u}"), row_base + (j + u) * units);
                    let inside = k.let_(&format!("inside{u}"), (j + u).lt(end));
                    k.if_(inside, |k| k.assign(v, load(x, at)));
                    (inside, v)
                })
                .collect();
            for (u, (inside, v)) in loads.into_iter().enumerate() {
                k.assign(acc, combine(acc.get(), v.get()));
                if let Some(y) = y {
                    let at = row_base + (j + u as u32) * units;
                    k.if_(inside, |k| {
                        if float {
                            store_f32(k, y, at, acc.get());
                        } else {
                            k.store(y.at(at), acc.get());
                        }
                    });
                }
            }
        });
        if pass == ChunkPass::Totals {
            k.store(totals.at((o * splits + split) * units + unit), acc.get());
        }
    });
    finish(k)
}

/// A planned running sum or product over an axis by chunks: the totals
/// pass and the scan pass share the dispatch and the geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisChunksPlan {
    pub op: AxisScan,
    pub scalar: Scalar,
    pub vec: u8,
    pub outer: u32,
    pub axis: u32,
    pub units: u32,
    pub col_blocks: u32,
    pub splits: u32,
    pub chunk: u32,
    pub dispatch: Dispatch,
}

impl AxisChunksPlan {
    pub fn kernel(&self, pass: ChunkPass) -> Kernel {
        scan_axis_chunks(self.op, self.scalar, self.vec, pass)
    }

    pub fn args(&self) -> AxisChunkDims {
        AxisChunkDims { axis: self.axis, units: self.units, col_blocks: self.col_blocks, splits: self.splits, chunk: self.chunk }
    }

    /// The element type of the chunks' totals: f32 for floats.
    pub fn totals_scalar(&self) -> Scalar {
        if self.scalar.is_float() {
            Scalar::F32
        } else {
            self.scalar
        }
    }

    /// Elements of the chunks' totals, `outer · splits · inner`.
    pub fn totals_len(&self) -> usize {
        self.outer as usize * self.splits as usize * self.units as usize * self.vec as usize
    }
}

/// How a running sum or product over the middle axis of `[outer, axis,
/// inner]` runs ([`plan_axis_scan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisScanPlan {
    /// One whole f32, i32 or u32 vector summed: the parallel prefix sum
    /// ([`plan`]).
    PrefixSum,
    /// One whole f16 or bf16 vector longer than [`SCAN_BLOCK`] summed: in
    /// blocks from f32 offsets ([`scan_rows`] with offsets).
    Blocked,
    /// The last axis, rows long or few: a threadgroup per row
    /// ([`plan_scan_rows`]).
    Rows,
    /// Columns enough to fill the GPU: a thread per column ([`scan_axis`]).
    Columns(AxisPlan),
    /// Columns too few: chunks of the axis ([`scan_axis_chunks`]).
    Chunks(AxisChunksPlan),
}

/// The threads a running sum or product over a leading or middle axis
/// aims at: below this, the axis is cut into chunks.
const AXIS_SCAN_THREADS: usize = 1 << 17;
/// The fewest rows of a chunk.
const AXIS_MIN_CHUNK: usize = 32;

/// Chooses how a running sum or product over the middle axis of `[outer,
/// axis, inner]` of `scalar` runs, the column forms with threadgroups of
/// `threads`; `vector_ok` whether the buffers bind as 4-wide vectors
/// (taken by the chunks when `inner` is a multiple of 4).
pub fn plan_axis_scan(op: AxisScan, scalar: Scalar, outer: usize, axis: usize, inner: usize, threads: u32, vector_ok: bool) -> Result<AxisScanPlan, ShapeError> {
    let name = format!("{}_axis_{}", op.name(), scalar.name());
    if !AXIS_SCAN_SCALARS.contains(&scalar) {
        return Err(ShapeError::new(name, format!("element type {scalar} is not f32, f16, bf16, i32 or u32")));
    }
    nonzero(&name, "outer", outer)?;
    nonzero(&name, "axis", axis)?;
    nonzero(&name, "inner", inner)?;
    let total = outer.checked_mul(axis).and_then(|v| v.checked_mul(inner)).unwrap_or(usize::MAX);
    to_u32(&name, "outer × axis × inner", total)?;
    let whole = outer == 1 && inner == 1;
    if op == AxisScan::Sum && whole && SCAN_SCALARS.contains(&scalar) {
        return Ok(AxisScanPlan::PrefixSum);
    }
    if op == AxisScan::Sum && whole && scalar.is_float() && total > SCAN_BLOCK {
        return Ok(AxisScanPlan::Blocked);
    }
    if scan_by_rows(outer, axis, inner) {
        return Ok(AxisScanPlan::Rows);
    }
    let t = check_threads(&name, threads)?;
    let vec: u8 = if vector_ok && inner.is_multiple_of(4) { 4 } else { 1 };
    let units = inner / vec as usize;
    let columns = outer * units;
    let splits = AXIS_SCAN_THREADS.div_ceil(columns).min(axis / AXIS_MIN_CHUNK).max(1);
    if inner == 1 || splits == 1 {
        return Ok(AxisScanPlan::Columns(plan_axis(&name, outer, axis, inner, t)?));
    }
    // Chunks of whole load groups; the splits that still have rows.
    let chunk = axis.div_ceil(splits).next_multiple_of(AXIS_CHUNK_LOADS as usize);
    let splits = axis.div_ceil(chunk);
    let t = t.min(units.next_multiple_of(SIMD_WIDTH as usize) as u32);
    let col_blocks = units.div_ceil(t as usize);
    let groups = to_u32(&name, "threadgroups", col_blocks * splits * outer)?;
    Ok(AxisScanPlan::Chunks(AxisChunksPlan {
        op,
        scalar,
        vec,
        outer: outer as u32,
        axis: axis as u32,
        units: units as u32,
        col_blocks: col_blocks as u32,
        splits: splits as u32,
        chunk: chunk as u32,
        dispatch: Dispatch::threadgroups([groups, 1, 1], t),
    }))
}

crate::kernel_args! {
    /// The arguments of [`scan_rows`]: `x`, `y` (their views `x4`, `y4` in
    /// the vector kernels), rows of `d` of `n` elements, the rows' starting
    /// totals `offsets` where the kernel takes them.
    pub struct RowScanArgs {
        X x: buffer,
        X4 x4: optional,
        Y y: buffer,
        Y4 y4: optional,
        OFFSETS offsets: optional,
        D d: u32,
        N n: u32,
    }
}

/// The inclusive running sum or product along each row, a threadgroup per
/// row: `{cumsum,cumprod}_rows_{scalar}[_vec4]_t{threads}[_offsets]` (module
/// docs). `offsets` (sums only): each row `r > 0` starts from
/// `offsets[r - 1]` (f32), the running total of the rows before it.
///
/// # Panics
/// When `scalar` is not one of [`AXIS_SCAN_SCALARS`], `vec` is not 1 or 4,
/// `threads` is not a multiple of 32 from 32 to 1024, or offsets are asked
/// of a product or of an integer type.
pub fn scan_rows(op: AxisScan, scalar: Scalar, vec: u8, threads: u32, offsets: bool) -> Kernel {
    assert!(AXIS_SCAN_SCALARS.contains(&scalar), "scan_rows takes f32, f16, bf16, i32 or u32, not {scalar}");
    assert_vec(vec);
    assert!(threads.is_multiple_of(SIMD_WIDTH) && (SIMD_WIDTH..=MAX_THREADS_PER_THREADGROUP).contains(&threads), "threads {threads} is not a multiple of 32 from 32 to 1024");
    let float = scalar.is_float();
    assert!(!offsets || (op == AxisScan::Sum && float), "row offsets are f32 running sums");
    let acc_ty = if float { Scalar::F32 } else { scalar };
    let name = format!("{}_rows_{}{}_t{threads}{}", op.name(), scalar.name(), vec_suffix(vec), if offsets { "_offsets" } else { "" });
    let mut k = KernelBuilder::new(name);
    type P = RowScanArgs;
    let (xn, yn) = if vec == 4 { (P::X4, P::Y4) } else { (P::X, P::Y) };
    let x = k.buffer(xn, Type::vector(scalar, vec), Access::Read);
    let y = k.buffer(yn, Type::vector(scalar, vec), Access::ReadWrite);
    let starts = offsets.then(|| k.buffer(P::OFFSETS, Type::F32, Access::Read));
    let d = k.value(P::D, Type::U32);
    let n = k.value(P::N, Type::U32);
    let identity = lit(acc_ty, if op == AxisScan::Sum { 0.0 } else { 1.0 });
    let combine = |a: Ex, b: Ex| if op == AxisScan::Sum { a + b } else { a * b };
    let row = k.let_("row", threadgroup_position_in_grid().x());
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let simdgroups = threads / SIMD_WIDTH;
    // Row `row` is elements [start, end) (the last row of a flat vector may
    // be short); in vectors when `vec` is 4.
    let start = k.let_("start", row * d);
    let end = k.let_("end", min(n, start + d));
    let (vstart, vend) = (k.let_("vstart", start / vec as u32), k.let_("vend", end / vec as u32));
    let carry = k.var("carry", identity);
    if let Some(starts) = starts {
        k.if_(row.gt(0u32), |k| k.assign(carry, starts.get(row - 1u32)));
    }
    let totals = k.threadgroup_array("totals", Type::scalar(acc_ty), simdgroups);
    k.for_range("chunk", vstart, vend, threads, |k, chunk| {
        let at = k.let_("at", chunk + tid);
        let inside = k.let_("inside", at.lt(vend));
        // The thread's lanes scanned serially (identity past the row's end).
        let v = k.var_uninit("v", Type::vector(acc_ty, vec));
        k.if_else(
            inside,
            |k| k.assign(v, if float { load_f32(x, at) } else { x.get(at) }),
            |k| k.assign(v, if vec == 1 { identity } else { vector(Type::vector(acc_ty, vec), &[identity]) }),
        );
        let mut lanes = vec![];
        for c in 0..vec {
            let e = if vec == 1 { v.get() } else { [v.get().x(), v.get().y(), v.get().z(), v.get().w()][c as usize] };
            let running = if c == 0 { e } else { combine(lanes[c as usize - 1], e) };
            lanes.push(k.let_(&format!("lane{c}"), running));
        }
        let own = lanes[vec as usize - 1];
        // Inclusive scan of the thread totals within the SIMD group.
        let incl = k.var("incl", own);
        let mut delta = 1u32;
        while delta < SIMD_WIDTH {
            let up = k.let_(&format!("up{delta}"), simd_shuffle_up(incl.get(), lit(Scalar::U32, delta as f64)));
            k.if_(lane.ge(delta), |k| k.assign(incl, combine(up, incl.get())));
            delta *= 2;
        }
        let before_up = k.let_("before_up", simd_shuffle_up(incl.get(), lit(Scalar::U32, 1.0)));
        let before = k.let_("before", select(before_up, identity, lane.eq(0u32)));
        k.if_(lane.eq(SIMD_WIDTH - 1), |k| k.store(totals.at(sg), incl.get()));
        k.threadgroup_barrier(MemFlags::Threadgroup);
        // The SIMD groups before this one, and the whole chunk.
        let prefix = k.var("prefix", carry.get());
        let chunk_total = k.var("chunk_total", carry.get());
        k.for_range("q", 0u32, simdgroups, 1u32, |k, q| {
            let t = k.let_("t", totals.get(q));
            k.if_(q.lt(sg), |k| k.assign(prefix, combine(prefix.get(), t)));
            k.assign(chunk_total, combine(chunk_total.get(), t));
        });
        let base = k.let_("base", combine(prefix.get(), before));
        k.if_(inside, |k| {
            let parts: Vec<Ex> = lanes.iter().map(|&l| combine(base, l)).collect();
            let out = if vec == 1 { parts[0] } else { vector(Type::vector(acc_ty, vec), &parts) };
            if float {
                store_f32(k, y, at, out);
            } else {
                k.store(y.at(at), out);
            }
        });
        k.assign(carry, chunk_total.get());
        // The totals are rewritten by the next chunk.
        k.threadgroup_barrier(MemFlags::Threadgroup);
    });
    finish(k)
}

/// A planned [`scan_rows`] launch: one threadgroup per row of `d` (the last
/// row of `n` elements possibly shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowsScanPlan {
    pub op: AxisScan,
    pub scalar: Scalar,
    pub vec: u8,
    pub threads: u32,
    pub offsets: bool,
    pub d: u32,
    pub n: u32,
    pub dispatch: Dispatch,
}

impl RowsScanPlan {
    pub fn kernel(&self) -> Kernel {
        scan_rows(self.op, self.scalar, self.vec, self.threads, self.offsets)
    }
}

/// Whether a running sum or product over the middle axis of `[outer,
/// axis, inner]` runs the row scan ([`scan_rows`]) rather than a thread
/// per column: over the last axis (`inner = 1`), when rows are long or too
/// few to fill the GPU one thread each.
fn scan_by_rows(outer: usize, axis: usize, inner: usize) -> bool {
    inner == 1 && (axis >= SCAN_ROWS_LONG || outer < SCAN_ROWS_FEW)
}

/// The block of a whole f16/bf16 vector's running sum: vectors longer than
/// this are scanned in blocks of it, from the f32 running total of the
/// blocks before (`enigma-ops`' blocked scan).
pub const SCAN_BLOCK: usize = 4096;

/// Rows at least this long take a threadgroup each.
const SCAN_ROWS_LONG: usize = 128;
/// Fewer rows than this leave the GPU idle at a thread each.
const SCAN_ROWS_FEW: usize = 1 << 16;

/// Plans [`scan_rows`] over `n` elements in rows of `d` with threadgroups
/// of `threads`; `vector_ok` whether the buffers bind as 4-wide vectors
/// (taken when `d` and `n` are multiples of 4); `offsets` for rows that
/// start from the running sum of the rows before.
pub fn plan_scan_rows(op: AxisScan, scalar: Scalar, n: usize, d: usize, threads: u32, vector_ok: bool, offsets: bool) -> Result<RowsScanPlan, ShapeError> {
    let name = format!("{}_rows_{}", op.name(), scalar.name());
    nonzero(&name, "n", n)?;
    nonzero(&name, "d", d)?;
    let n32 = to_u32(&name, "elements", n)?;
    let t = check_threads(&name, threads)?;
    // A row of fewer vectors than threads takes fewer threads.
    let vec: u8 = if vector_ok && d.is_multiple_of(4) && n.is_multiple_of(4) { 4 } else { 1 };
    let per_row = (d / vec as usize).div_ceil(SIMD_WIDTH as usize) * SIMD_WIDTH as usize;
    let t = t.min(per_row as u32);
    let rows = to_u32(&name, "rows", n.div_ceil(d))?;
    Ok(RowsScanPlan { op, scalar, vec, threads: t, offsets, d: d as u32, n: n32, dispatch: Dispatch::threadgroups([rows, 1, 1], t) })
}

/// Element types the scan supports.
pub const SCAN_SCALARS: [Scalar; 3] = [Scalar::F32, Scalar::I32, Scalar::U32];

/// Inclusive (`y[i] = x[0] + … + x[i]`) or exclusive (`… + x[i-1]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanKind {
    Inclusive,
    Exclusive,
}

impl ScanKind {
    pub fn name(self) -> &'static str {
        match self {
            ScanKind::Inclusive => "inclusive",
            ScanKind::Exclusive => "exclusive",
        }
    }
}

fn zero(s: Scalar) -> Ex {
    lit(s, 0.0)
}

/// What a block pass writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockPass {
    /// Step 1 as described above: the block's scan into `y` and its total
    /// into `block_sums`.
    ScanAndTotal,
    /// Only the block's total (`x, block_sums, n`): the read-only first pass
    /// of a reduce-then-scan.
    TotalOnly,
    /// The block's scan plus `offsets[block]` (the scanned totals of the
    /// blocks before it) into `y` (`x, y, offsets, n`): the last pass of a
    /// reduce-then-scan, in place of step 3.
    ScanWithOffset,
}

/// The most vector loads a thread of a block pass keeps in flight.
pub const MAX_SCAN_ITEMS: u32 = 8;

/// Loads per thread when the caller does not choose, and threads per
/// threadgroup: blocks of 8192 elements with float4 loads, fewer blocks
/// and so fewer small dispatches than the element-wise 256 threads with
/// one load each (the fastest of the sizes tried: `BENCHMARKS.md`, prefix
/// sum with several loads per thread).
pub const DEFAULT_ITEMS: u32 = 4;
/// See [`DEFAULT_ITEMS`].
pub const DEFAULT_THREADS: u32 = 512;

/// The suffix of a kernel whose threads handle `items` loads (none for 1).
fn items_suffix(items: u32) -> String {
    if items > 1 {
        format!("_x{items}")
    } else {
        String::new()
    }
}

crate::kernel_args! {
    /// The arguments of [`scan_block`]'s passes and [`scan_add`]: the
    /// vector kernels read and write the views `x4`, `y4`; which of the
    /// optional buffers a pass declares is [`BlockPass`]'s (`scan_add`
    /// reads `y` and `offsets` only).
    pub struct ScanArgs {
        X x: optional,
        X4 x4: optional,
        Y y: optional,
        Y4 y4: optional,
        BLOCK_SUMS block_sums: optional,
        OFFSETS offsets: optional,
        N n: u32,
    }
}

/// Step 1: `scan_{kind}_{scalar}[_vec4][_x<items>]`, or the reduce-then-scan
/// passes (`scan_total_…`, `scan_{kind}_offset_…`), per [`BlockPass`].
///
/// A block is `items` sub-blocks of `T` loads (`vec` elements each); thread
/// `t` handles load `t` of every sub-block, so each load instruction of a
/// SIMD group is contiguous and a thread issues all `items` loads before it
/// uses any. Each sub-block is scanned as described in the module doc (one
/// barrier for all of them); sub-block `j` adds the totals of sub-blocks
/// `0..j`.
///
/// # Panics
/// When `vec` is not 1 or 4, `items` is not in `1..=MAX_SCAN_ITEMS`, or
/// `scalar` is not one of [`SCAN_SCALARS`].
pub fn scan_block(scalar: Scalar, vec: u8, kind: ScanKind, pass: BlockPass, items: u32) -> Kernel {
    assert_vec(vec);
    assert!((1..=MAX_SCAN_ITEMS).contains(&items), "scan items {items} not in 1..={MAX_SCAN_ITEMS}");
    assert!(SCAN_SCALARS.contains(&scalar), "scan supports f32, i32 and u32, not {scalar}");
    let shape = format!("{scalar}{}{}", vec_suffix(vec), items_suffix(items));
    let name = match pass {
        BlockPass::ScanAndTotal => format!("scan_{}_{shape}", kind.name()),
        BlockPass::TotalOnly => format!("scan_total_{shape}"),
        BlockPass::ScanWithOffset => format!("scan_{}_offset_{shape}", kind.name()),
    };
    let mut k = KernelBuilder::new(name);
    type P = ScanArgs;
    let (xn, yn) = if vec == 4 { (P::X4, P::Y4) } else { (P::X, P::Y) };
    let x = k.buffer(xn, Type::vector(scalar, vec), Access::Read);
    let y = (pass != BlockPass::TotalOnly).then(|| k.buffer(yn, Type::vector(scalar, vec), Access::ReadWrite));
    let block_sums = (pass != BlockPass::ScanWithOffset).then(|| k.buffer(P::BLOCK_SUMS, Type::scalar(scalar), Access::ReadWrite));
    let offsets = (pass == BlockPass::ScanWithOffset).then(|| k.buffer(P::OFFSETS, Type::scalar(scalar), Access::Read));
    let n = k.value(P::N, Type::U32);
    // One slot per SIMD group: the TotalOnly pass needs one sub-block's.
    let slots = if pass == BlockPass::TotalOnly { 1 } else { items };
    let partials = k.threadgroup_array("simd_totals", Type::scalar(scalar), SIMD_WIDTH * slots);
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let tpg = k.let_("tpg", threads_per_threadgroup().x());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let first = k.let_("first", group * tpg * items + tid);
    let units = if vec == 4 { vec_units(&mut k, n) } else { n };
    // Every load first (zero past the end), then each thread's serial scan
    // of each load's elements.
    let mut loads = vec![];
    for j in 0..items {
        let i = if j == 0 { first } else { k.let_(&format!("i{j}"), first + tpg * j) };
        let elems: Vec<Var> = (0..vec).map(|c| k.var(&format!("e{j}_{c}"), zero(scalar))).collect();
        k.if_(i.lt(units), |k| {
            if vec == 1 {
                k.assign(elems[0], x.get(i));
            } else {
                let v = k.let_(&format!("v{j}"), x.get(i));
                // Lanes at or past element n (n - 4i of them are real) read 0.
                let real = k.let_(&format!("real{j}"), n - i * 4u32);
                for (c, e) in elems.iter().enumerate() {
                    k.assign(*e, select(zero(scalar), v.component(c as u8), lit(Scalar::U32, c as f64).lt(real)));
                }
            }
        });
        loads.push((i, elems));
    }
    let mut scans = vec![];
    for (j, (i, elems)) in loads.iter().enumerate() {
        let mut running = vec![];
        let mut acc: Option<Ex> = None;
        for (c, e) in elems.iter().enumerate() {
            let s = match acc {
                None => e.get(),
                Some(a) => a + e.get(),
            };
            let s = k.let_(&format!("s{j}_{c}"), s);
            running.push(s);
            acc = Some(s);
        }
        scans.push((*i, running));
    }
    let nsg = k.let_("nsg", simdgroups_per_threadgroup());
    if pass == BlockPass::TotalOnly {
        let mut total: Option<Ex> = None;
        for (_, running) in &scans {
            let last = *running.last().expect("at least one element");
            total = Some(match total {
                None => last,
                Some(t) => t + last,
            });
        }
        let simd_total = k.let_("simd_total", simd_sum(total.expect("at least one load")));
        k.if_(lane.eq(0u32), |k| k.store(partials.at(sg), simd_total));
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let block_sums = block_sums.expect("the totals pass writes block sums");
        k.if_(sg.eq(0u32), |k| {
            let all = k.var("all", zero(scalar));
            k.if_(lane.lt(nsg), |k| k.assign(all, partials.get(lane)));
            let block_total = k.let_("block_total", simd_sum(all.get()));
            k.if_(lane.eq(0u32), |k| k.store(block_sums.at(group), block_total));
        });
        return finish(k);
    }
    let mut lane_offsets = vec![];
    for (j, (_, running)) in scans.iter().enumerate() {
        let thread_total = *running.last().expect("at least one element");
        lane_offsets.push(k.let_(&format!("lane_offset{j}"), simd_prefix_exclusive_sum(thread_total)));
        let simd_total = k.let_(&format!("simd_total{j}"), simd_sum(thread_total));
        let slot = if j == 0 { sg } else { sg + SIMD_WIDTH * j as u32 };
        k.if_(lane.eq(0u32), |k| k.store(partials.at(slot), simd_total));
    }
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let y = y.expect("scan passes write y");
    // `carry`: the block's offset plus the totals of the sub-blocks before.
    let carry = k.var("carry", offsets.map(|o| o.get(group)).unwrap_or_else(|| zero(scalar)));
    for (j, (i, running)) in scans.iter().enumerate() {
        let total = k.var(&format!("sub{j}"), zero(scalar));
        let slot = if j == 0 { lane } else { lane + SIMD_WIDTH * j as u32 };
        k.if_(lane.lt(nsg), |k| k.assign(total, partials.get(slot)));
        let before = simd_sum(select(zero(scalar), total.get(), lane.lt(sg)));
        let offset = k.let_(&format!("offset{j}"), carry.get() + before + lane_offsets[j]);
        let outs: Vec<Ex> = (0..vec as usize)
            .map(|c| match kind {
                ScanKind::Inclusive => offset + running[c],
                ScanKind::Exclusive if c == 0 => offset,
                ScanKind::Exclusive => offset + running[c - 1],
            })
            .collect();
        let i = *i;
        k.if_(i.lt(units), |k| {
            let out = if vec == 1 { outs[0] } else { vector(Type::vector(scalar, 4), &outs) };
            k.store(y.at(i), out);
        });
        if j + 1 < scans.len() || block_sums.is_some() {
            k.assign(carry, carry.get() + simd_sum(total.get()));
        }
    }
    // The block total (every SIMD group has it in `carry`).
    if let Some(block_sums) = block_sums {
        k.if_(tid.eq(0u32), |k| k.store(block_sums.at(group), carry.get()));
    }
    finish(k)
}

/// Step 3: `scan_add_{scalar}[_vec4][_x<items>]` — block `g` (of
/// `T · items` loads, as in [`scan_block`]) adds `offsets[g]`, the
/// exclusive scan of the block totals (dispatch one threadgroup per block).
///
/// # Panics
/// When `vec` is not 1 or 4 or `items` is not in `1..=MAX_SCAN_ITEMS`.
pub fn scan_add(scalar: Scalar, vec: u8, items: u32) -> Kernel {
    assert_vec(vec);
    assert!((1..=MAX_SCAN_ITEMS).contains(&items), "scan items {items} not in 1..={MAX_SCAN_ITEMS}");
    let mut k = KernelBuilder::new(format!("scan_add_{}{}{}", scalar, vec_suffix(vec), items_suffix(items)));
    type P = ScanArgs;
    let y = k.buffer(if vec == 4 { P::Y4 } else { P::Y }, Type::vector(scalar, vec), Access::ReadWrite);
    let offsets = k.buffer(P::OFFSETS, Type::scalar(scalar), Access::Read);
    let n = k.value(P::N, Type::U32);
    let block = k.let_("block", threadgroup_position_in_grid().x());
    let tpg = k.let_("tpg", threads_per_threadgroup().x());
    let first = k.let_("first", block * tpg * items + thread_index_in_threadgroup());
    let units = if vec == 4 { vec_units(&mut k, n) } else { n };
    let offset = k.let_("offset", offsets.get(block));
    for j in 0..items {
        let i = if j == 0 { first } else { k.let_(&format!("i{j}"), first + tpg * j) };
        k.if_(i.lt(units), |k| k.store(y.at(i), y.get(i) + offset));
    }
    finish(k)
}

/// One level of the scan: the block scan of `n` elements into `blocks`
/// blocks of `threads · vec · items` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanLevel {
    pub n: u32,
    pub vec: u8,
    pub kind: ScanKind,
    pub blocks: u32,
    /// The block scan: `blocks` threadgroups.
    pub scan: Dispatch,
    /// The add-back: `blocks` threadgroups (absent for one block).
    pub add: Option<Dispatch>,
}

/// Every level of a scan, from the input down to the level of one block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanPlan {
    pub scalar: Scalar,
    /// Loads per thread of every level's passes.
    pub items: u32,
    pub levels: Vec<ScanLevel>,
}

/// Plans the scan of `n` elements in blocks of `threads · vec · items`;
/// `vec` 4 when the caller can bind vector views of the input and output.
/// The deeper levels scan buffers of exactly `blocks` elements: with
/// `vec = 4` when `blocks % 4 == 0`, else with `vec = 1`.
pub fn plan(scalar: Scalar, kind: ScanKind, n: usize, vec: u8, threads: u32, items: u32) -> Result<ScanPlan, ShapeError> {
    let name = format!("scan_{}_{}", kind.name(), scalar);
    check_vec(&name, vec)?;
    if !SCAN_SCALARS.contains(&scalar) {
        return Err(ShapeError::new(name, format!("element type {scalar} is not one of f32, i32, u32")));
    }
    if !(1..=MAX_SCAN_ITEMS).contains(&items) {
        return Err(ShapeError::new(name, format!("{items} loads per thread is not in 1..={MAX_SCAN_ITEMS}")));
    }
    nonzero(&name, "n", n)?;
    let mut n = to_u32(&name, "n", n)?;
    let t = check_threads(&name, threads)?;
    let mut levels = vec![];
    let mut level_vec = vec;
    let mut level_kind = kind;
    loop {
        let block = t * level_vec as u32 * items;
        let blocks = n.div_ceil(block);
        let add = (blocks > 1).then(|| Dispatch::threadgroups([blocks, 1, 1], t));
        levels.push(ScanLevel { n, vec: level_vec, kind: level_kind, blocks, scan: Dispatch::threadgroups([blocks, 1, 1], t), add });
        if blocks == 1 {
            break;
        }
        n = blocks;
        level_vec = if blocks % 4 == 0 { 4 } else { 1 };
        level_kind = ScanKind::Exclusive;
    }
    Ok(ScanPlan { scalar, items, levels })
}

/// The f64 reference.
pub fn reference(kind: ScanKind, x: &[f64]) -> Vec<f64> {
    let mut acc = 0.0;
    x.iter()
        .map(|&v| {
            let before = acc;
            acc += v;
            match kind {
                ScanKind::Inclusive => acc,
                ScanKind::Exclusive => before,
            }
        })
        .collect()
}

/// The exact wrapping u32 reference.
pub fn reference_u32(kind: ScanKind, x: &[u32]) -> Vec<u32> {
    let mut acc = 0u32;
    x.iter()
        .map(|&v| {
            let before = acc;
            acc = acc.wrapping_add(v);
            match kind {
                ScanKind::Inclusive => acc,
                ScanKind::Exclusive => before,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_scans_take_a_threadgroup_per_row() {
        let p = plan_scan_rows(AxisScan::Sum, Scalar::F16, 8192 * 8192, 8192, 256, true, false).unwrap();
        assert_eq!((p.vec, p.threads, p.dispatch.size[0]), (4, 256, 8192));
        // A short row takes fewer threads; a ragged one scalar loads.
        let p = plan_scan_rows(AxisScan::Product, Scalar::F32, 231, 33, 256, true, false).unwrap();
        assert_eq!((p.vec, p.threads, p.dispatch.size[0]), (1, 64, 7));
        // The blocked vector: the last block short.
        assert_eq!(plan_scan_rows(AxisScan::Sum, Scalar::BF16, 10001, SCAN_BLOCK, 256, true, true).unwrap().dispatch.size[0], 3);
        assert!(scan_by_rows(8192, 8192, 1) && scan_by_rows(7, 3, 1) && !scan_by_rows(1 << 20, 7, 1) && !scan_by_rows(1, 8192, 3));
    }

    #[test]
    fn an_axis_of_few_columns_runs_by_chunks() {
        let chunks = |outer, axis, inner, vector_ok| match plan_axis_scan(AxisScan::Sum, Scalar::F32, outer, axis, inner, 256, vector_ok).unwrap() {
            AxisScanPlan::Chunks(p) => p,
            other => panic!("{outer}×{axis}×{inner}: {other:?}"),
        };
        // cumsum over dim 0 of 8192×8192: 2048 float4 columns, 64 chunks of
        // 128 rows, 8 threadgroups across a row.
        let p = chunks(1, 8192, 8192, true);
        assert_eq!((p.vec, p.units, p.col_blocks, p.splits, p.chunk), (4, 2048, 8, 64, 128));
        assert_eq!((p.dispatch.size[0], p.totals_len()), (512, 64 * 8192));
        // A ragged row: scalar columns, a threadgroup of one SIMD group;
        // chunks of whole load groups.
        let p = chunks(1, 1000, 3, true);
        assert_eq!((p.vec, p.units, p.splits, p.chunk, p.dispatch.threads[0]), (1, 3, 25, 40, 32));
        assert_eq!(chunks(2, 1000, 36, false).vec, 1);
        // Columns enough, or an axis too short to cut: a thread per column.
        assert!(matches!(plan_axis_scan(AxisScan::Product, Scalar::F16, 1 << 10, 64, 1 << 10, 256, true).unwrap(), AxisScanPlan::Columns(_)));
        assert!(matches!(plan_axis_scan(AxisScan::Sum, Scalar::F32, 1, 31, 8, 256, true).unwrap(), AxisScanPlan::Columns(_)));
        // The whole-vector and row forms.
        assert_eq!(plan_axis_scan(AxisScan::Sum, Scalar::I32, 1, 100, 1, 256, true).unwrap(), AxisScanPlan::PrefixSum);
        assert_eq!(plan_axis_scan(AxisScan::Sum, Scalar::BF16, 1, 10_000, 1, 256, true).unwrap(), AxisScanPlan::Blocked);
        assert_eq!(plan_axis_scan(AxisScan::Product, Scalar::BF16, 8, 10_000, 1, 256, true).unwrap(), AxisScanPlan::Rows);
        assert!(plan_axis_scan(AxisScan::Sum, Scalar::I64, 2, 2, 2, 256, true).is_err());
        assert!(plan_axis_scan(AxisScan::Sum, Scalar::F32, 2, 0, 2, 256, true).is_err());
    }

    #[test]
    fn levels_shrink_to_one_block() {
        let p = plan(Scalar::F32, ScanKind::Inclusive, 1, 1, 256, 1).unwrap();
        assert_eq!(p.levels.len(), 1);
        assert!(p.levels[0].add.is_none());
        // 2^20 with 256 threads × 4: 1024 blocks, then 1 block of 1024 totals.
        let p = plan(Scalar::F32, ScanKind::Exclusive, 1 << 20, 4, 256, 1).unwrap();
        assert_eq!(p.levels.iter().map(|l| l.blocks).collect::<Vec<_>>(), vec![1024, 1]);
        assert_eq!(p.levels[1].kind, ScanKind::Exclusive);
        let p = plan(Scalar::U32, ScanKind::Inclusive, 70_000, 1, 32, 1).unwrap();
        assert_eq!(p.levels.iter().map(|l| l.blocks).collect::<Vec<_>>(), vec![2188, 18, 1]);
        // 2188 totals scan as float4 (blocks of 128), 18 as scalars.
        assert_eq!(p.levels.iter().map(|l| l.vec).collect::<Vec<_>>(), vec![1, 4, 1]);
        assert_eq!(p.levels[0].add, Some(Dispatch::threadgroups([2188, 1, 1], 32)));
        // 2^26 with 1024 threads × 4 × 4 loads: 4096 blocks, then one.
        let p = plan(Scalar::F32, ScanKind::Inclusive, 1 << 26, 4, 1024, 4).unwrap();
        assert_eq!(p.levels.iter().map(|l| l.blocks).collect::<Vec<_>>(), vec![4096, 1]);
        assert!(plan(Scalar::F16, ScanKind::Inclusive, 10, 1, 256, 1).is_err());
        assert!(plan(Scalar::F32, ScanKind::Inclusive, 10, 1, 256, 0).is_err());
        assert!(plan(Scalar::F32, ScanKind::Inclusive, 10, 1, 256, MAX_SCAN_ITEMS + 1).is_err());
    }

    #[test]
    fn references_agree() {
        assert_eq!(reference(ScanKind::Inclusive, &[1.0, 2.0, 3.0]), vec![1.0, 3.0, 6.0]);
        assert_eq!(reference(ScanKind::Exclusive, &[1.0, 2.0, 3.0]), vec![0.0, 1.0, 3.0]);
        assert_eq!(reference_u32(ScanKind::Exclusive, &[u32::MAX, 2]), vec![0, u32::MAX]);
    }
}
