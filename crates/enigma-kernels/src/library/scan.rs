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

use super::*;
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
