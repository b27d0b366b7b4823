//! Prefix sums (inclusive and exclusive) of any length. The levels below
//! the first run in three steps:
//!
//! 1. [`scan_block`]: each threadgroup scans a block of `T · vec` elements —
//!    each thread scans its own `vec` elements serially (one `float4` load),
//!    `simd_prefix_exclusive_sum` scans the thread totals within a SIMD
//!    group, and the SIMD-group totals go through threadgroup memory (one
//!    barrier; every SIMD group then sums the totals of the groups before
//!    it with one `simd_sum`). Thread 0 writes the block's total to
//!    `block_sums[group]`.
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
//! `y4` with `vec = 4`). With `vec = 4` thread `i < ceil(n/4)` handles
//! vector `i`; the last one may be partial, so `x` and `y` must hold
//! `ceil(n/4)` whole vectors: lanes past `n` are read as 0 and written with
//! the running sum (buffer padding, not part of the result).

use super::*;
use enigma_ir::{Access, Kernel, MemFlags, Scalar, Type};

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

/// Step 1: `scan_{kind}_{scalar}[_vec4]`, or the reduce-then-scan passes
/// (`scan_total_…`, `scan_{kind}_offset_…`), per [`BlockPass`].
///
/// # Panics
/// When `vec` is not 1 or 4 or `scalar` is not one of [`SCAN_SCALARS`].
pub fn scan_block(scalar: Scalar, vec: u8, kind: ScanKind, pass: BlockPass) -> Kernel {
    assert_vec(vec);
    assert!(SCAN_SCALARS.contains(&scalar), "scan supports f32, i32 and u32, not {scalar}");
    let name = match pass {
        BlockPass::ScanAndTotal => format!("scan_{}_{}{}", kind.name(), scalar, vec_suffix(vec)),
        BlockPass::TotalOnly => format!("scan_total_{}{}", scalar, vec_suffix(vec)),
        BlockPass::ScanWithOffset => format!("scan_{}_offset_{}{}", kind.name(), scalar, vec_suffix(vec)),
    };
    let mut k = KernelBuilder::new(name);
    let sfx = if vec == 4 { "4" } else { "" };
    let x = k.buffer(&format!("x{sfx}"), Type::vector(scalar, vec), Access::Read);
    let y = (pass != BlockPass::TotalOnly).then(|| k.buffer(&format!("y{sfx}"), Type::vector(scalar, vec), Access::ReadWrite));
    let block_sums = (pass != BlockPass::ScanWithOffset).then(|| k.buffer("block_sums", Type::scalar(scalar), Access::ReadWrite));
    let offsets = (pass == BlockPass::ScanWithOffset).then(|| k.buffer("offsets", Type::scalar(scalar), Access::Read));
    let n = k.value("n", Type::U32);
    let partials = k.threadgroup_array("simd_totals", Type::scalar(scalar), SIMD_WIDTH);
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let i = k.let_("i", group * threads_per_threadgroup().x() + tid);
    let units = if vec == 4 { vec_units(&mut k, n) } else { n };
    // This thread's elements (zero past the end) and their serial scan.
    let elems: Vec<Var> = (0..vec).map(|c| k.var(&format!("e{c}"), zero(scalar))).collect();
    k.if_(i.lt(units), |k| {
        if vec == 1 {
            k.assign(elems[0], x.get(i));
        } else {
            let v = k.let_("v", x.get(i));
            // Lanes at or past element n (n - 4i of them are real) read 0.
            let real = k.let_("real", n - i * 4u32);
            for (c, e) in elems.iter().enumerate() {
                k.assign(*e, select(zero(scalar), v.component(c as u8), lit(Scalar::U32, c as f64).lt(real)));
            }
        }
    });
    let mut running = vec![];
    let mut acc: Option<Ex> = None;
    for (c, e) in elems.iter().enumerate() {
        let s = match acc {
            None => e.get(),
            Some(a) => a + e.get(),
        };
        let s = k.let_(&format!("s{c}"), s);
        running.push(s);
        acc = Some(s);
    }
    let thread_total = *running.last().expect("at least one element");
    let lane_offset = k.let_("lane_offset", simd_prefix_exclusive_sum(thread_total));
    let simd_total = k.let_("simd_total", simd_sum(thread_total));
    k.if_(lane.eq(0u32), |k| k.store(partials.at(sg), simd_total));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    if let Some(y) = y {
        let before = k.var("before", zero(scalar));
        k.if_(lane.lt(sg), |k| k.assign(before, partials.get(lane)));
        let block_offset = match offsets {
            Some(offsets) => simd_sum(before.get()) + offsets.get(group),
            None => simd_sum(before.get()),
        };
        let offset = k.let_("offset", block_offset + lane_offset);
        let outs: Vec<Ex> = (0..vec as usize)
            .map(|c| match kind {
                ScanKind::Inclusive => offset + running[c],
                ScanKind::Exclusive if c == 0 => offset,
                ScanKind::Exclusive => offset + running[c - 1],
            })
            .collect();
        k.if_(i.lt(units), |k| {
            let out = if vec == 1 { outs[0] } else { vector(Type::vector(scalar, 4), &outs) };
            k.store(y.at(i), out);
        });
    }
    // The block total, from SIMD group 0 (every SIMD group could).
    if let Some(block_sums) = block_sums {
        k.if_(sg.eq(0u32), |k| {
            let all = k.var("all", zero(scalar));
            k.if_(lane.lt(simdgroups_per_threadgroup()), |k| k.assign(all, partials.get(lane)));
            let block_total = k.let_("block_total", simd_sum(all.get()));
            k.if_(lane.eq(0u32), |k| k.store(block_sums.at(group), block_total));
        });
    }
    finish(k)
}

/// Step 3: `scan_add_{scalar}[_vec4]` — block `g` adds `offsets[g]`, the
/// exclusive scan of the block totals (dispatch one threadgroup per block).
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn scan_add(scalar: Scalar, vec: u8) -> Kernel {
    assert_vec(vec);
    let mut k = KernelBuilder::new(format!("scan_add_{}{}", scalar, vec_suffix(vec)));
    let sfx = if vec == 4 { "4" } else { "" };
    let y = k.buffer(&format!("y{sfx}"), Type::vector(scalar, vec), Access::ReadWrite);
    let offsets = k.buffer("offsets", Type::scalar(scalar), Access::Read);
    let n = k.value("n", Type::U32);
    let block = k.let_("block", threadgroup_position_in_grid().x());
    let i = k.let_("i", block * threads_per_threadgroup().x() + thread_index_in_threadgroup());
    let units = if vec == 4 { vec_units(&mut k, n) } else { n };
    let offset = k.let_("offset", offsets.get(block));
    k.if_(i.lt(units), |k| k.store(y.at(i), y.get(i) + offset));
    finish(k)
}

/// One level of the scan: the block scan of `n` elements into `blocks`
/// blocks of `threads · vec` elements.
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
    pub levels: Vec<ScanLevel>,
}

/// Plans the scan of `n` elements in blocks of `threads · vec`; `vec` 4
/// when the caller can bind vector views of the input and output. The
/// deeper levels scan buffers of exactly `blocks` elements: with `vec = 4`
/// when `blocks % 4 == 0`, else with `vec = 1`.
pub fn plan(scalar: Scalar, kind: ScanKind, n: usize, vec: u8, threads: u32) -> Result<ScanPlan, ShapeError> {
    let name = format!("scan_{}_{}", kind.name(), scalar);
    check_vec(&name, vec)?;
    if !SCAN_SCALARS.contains(&scalar) {
        return Err(ShapeError::new(name, format!("element type {scalar} is not one of f32, i32, u32")));
    }
    nonzero(&name, "n", n)?;
    let mut n = to_u32(&name, "n", n)?;
    let t = check_threads(&name, threads)?;
    let mut levels = vec![];
    let mut level_vec = vec;
    let mut level_kind = kind;
    loop {
        let block = t * level_vec as u32;
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
    Ok(ScanPlan { scalar, levels })
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
        let p = plan(Scalar::F32, ScanKind::Inclusive, 1, 1, 256).unwrap();
        assert_eq!(p.levels.len(), 1);
        assert!(p.levels[0].add.is_none());
        // 2^20 with 256 threads × 4: 1024 blocks, then 1 block of 1024 totals.
        let p = plan(Scalar::F32, ScanKind::Exclusive, 1 << 20, 4, 256).unwrap();
        assert_eq!(p.levels.iter().map(|l| l.blocks).collect::<Vec<_>>(), vec![1024, 1]);
        assert_eq!(p.levels[1].kind, ScanKind::Exclusive);
        let p = plan(Scalar::U32, ScanKind::Inclusive, 70_000, 1, 32).unwrap();
        assert_eq!(p.levels.iter().map(|l| l.blocks).collect::<Vec<_>>(), vec![2188, 18, 1]);
        // 2188 totals scan as float4 (blocks of 128), 18 as scalars.
        assert_eq!(p.levels.iter().map(|l| l.vec).collect::<Vec<_>>(), vec![1, 4, 1]);
        assert_eq!(p.levels[0].add, Some(Dispatch::threadgroups([2188, 1, 1], 32)));
        assert!(plan(Scalar::F16, ScanKind::Inclusive, 10, 1, 256).is_err());
    }

    #[test]
    fn references_agree() {
        assert_eq!(reference(ScanKind::Inclusive, &[1.0, 2.0, 3.0]), vec![1.0, 3.0, 6.0]);
        assert_eq!(reference(ScanKind::Exclusive, &[1.0, 2.0, 3.0]), vec![0.0, 1.0, 3.0]);
        assert_eq!(reference_u32(ScanKind::Exclusive, &[u32::MAX, 2]), vec![0, u32::MAX]);
    }
}
