//! Prefix sums (inclusive and exclusive) of any length, in three steps:
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
//! 3. [`scan_add`]: every block but the first adds the scanned total of the
//!    blocks before it.
//!
//! Element types: f32, i32 and u32 (sums in the element type). Parameters:
//! `scan_block`: `[x4,] x, [y4,] y, block_sums, n`; `scan_add`:
//! `[y4,] y, offsets, n`. With `vec = 4`, `x4`/`x` and `y4`/`y` are views of
//! one buffer each, the tail read and written through the scalar views.

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

/// Step 1: `scan_{kind}_{scalar}[_vec4]`.
pub fn scan_block(scalar: Scalar, vec: u8, kind: ScanKind) -> Kernel {
    check_vec(vec);
    assert!(SCAN_SCALARS.contains(&scalar), "scan supports f32, i32 and u32, not {scalar}");
    let mut k = KernelBuilder::new(format!("scan_{}_{}{}", kind.name(), scalar, vec_suffix(vec)));
    let x4 = (vec == 4).then(|| k.buffer("x4", Type::vector(scalar, 4), Access::Read));
    let x = k.buffer("x", Type::scalar(scalar), Access::Read);
    let y4 = (vec == 4).then(|| k.buffer("y4", Type::vector(scalar, 4), Access::ReadWrite));
    let y = k.buffer("y", Type::scalar(scalar), Access::ReadWrite);
    let block_sums = k.buffer("block_sums", Type::scalar(scalar), Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let partials = k.threadgroup_array("simd_totals", Type::scalar(scalar), SIMD_WIDTH);
    let tid = k.let_("tid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let i = k.let_("i", group * threads_per_threadgroup().x() + tid);
    // This thread's elements (zero past the end) and their serial scan.
    let elems: Vec<Var> = (0..vec).map(|c| k.var(&format!("e{c}"), zero(scalar))).collect();
    if vec == 1 {
        k.if_(i.lt(n), |k| k.assign(elems[0], x.get(i)));
    } else {
        let n4 = k.let_("n4", n / 4u32);
        let x4 = x4.expect("vector view");
        k.if_else(
            i.lt(n4),
            |k| {
                let v = k.let_("v", x4.get(i));
                for (c, e) in elems.iter().enumerate() {
                    k.assign(*e, v.component(c as u8));
                }
            },
            |k| {
                k.if_(i.eq(n4), |k| {
                    for (c, e) in elems.iter().enumerate() {
                        let idx = n4 * 4u32 + c as u32;
                        k.if_(idx.lt(n), |k| k.assign(*e, x.get(idx)));
                    }
                });
            },
        );
    }
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
    let before = k.var("before", zero(scalar));
    k.if_(lane.lt(sg), |k| k.assign(before, partials.get(lane)));
    let offset = k.let_("offset", simd_sum(before.get()) + lane_offset);
    let outs: Vec<Ex> = (0..vec as usize)
        .map(|c| match kind {
            ScanKind::Inclusive => offset + running[c],
            ScanKind::Exclusive if c == 0 => offset,
            ScanKind::Exclusive => offset + running[c - 1],
        })
        .collect();
    if vec == 1 {
        k.if_(i.lt(n), |k| k.store(y.at(i), outs[0]));
    } else {
        let n4 = n / 4u32;
        let y4 = y4.expect("vector view");
        k.if_else(
            i.lt(n4),
            |k| k.store(y4.at(i), vector(Type::vector(scalar, 4), &outs)),
            |k| {
                k.if_(i.eq(n4), |k| {
                    for (c, o) in outs.iter().enumerate() {
                        let idx = i * 4u32 + c as u32;
                        k.if_(idx.lt(n), |k| k.store(y.at(idx), *o));
                    }
                });
            },
        );
    }
    // The block total, from SIMD group 0 (every SIMD group could).
    k.if_(sg.eq(0u32), |k| {
        let all = k.var("all", zero(scalar));
        k.if_(lane.lt(simdgroups_per_threadgroup()), |k| k.assign(all, partials.get(lane)));
        let block_total = k.let_("block_total", simd_sum(all.get()));
        k.if_(lane.eq(0u32), |k| k.store(block_sums.at(group), block_total));
    });
    finish(k)
}

/// Step 3: `scan_add_{scalar}[_vec4]` — block `g + 1` adds `offsets[g + 1]`
/// (dispatch one threadgroup fewer than there are blocks).
pub fn scan_add(scalar: Scalar, vec: u8) -> Kernel {
    check_vec(vec);
    let mut k = KernelBuilder::new(format!("scan_add_{}{}", scalar, vec_suffix(vec)));
    let y4 = (vec == 4).then(|| k.buffer("y4", Type::vector(scalar, 4), Access::ReadWrite));
    let y = k.buffer("y", Type::scalar(scalar), Access::ReadWrite);
    let offsets = k.buffer("offsets", Type::scalar(scalar), Access::Read);
    let n = k.value("n", Type::U32);
    let block = k.let_("block", threadgroup_position_in_grid().x() + 1u32);
    let i = k.let_("i", block * threads_per_threadgroup().x() + thread_index_in_threadgroup());
    let offset = k.let_("offset", offsets.get(block));
    if vec == 1 {
        k.if_(i.lt(n), |k| k.store(y.at(i), y.get(i) + offset));
    } else {
        let y4 = y4.expect("vector view");
        let n4 = k.let_("n4", n / 4u32);
        k.if_else(
            i.lt(n4),
            |k| k.store(y4.at(i), y4.get(i) + offset),
            |k| {
                k.if_(i.eq(n4), |k| {
                    k.for_range("t", n4 * 4u32, n, 1u32, |k, t| k.store(y.at(t), y.get(t) + offset));
                });
            },
        );
    }
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
    /// The add-back: `blocks - 1` threadgroups (absent for one block).
    pub add: Option<Dispatch>,
}

/// Every level of a scan, from the input down to the level of one block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanPlan {
    pub scalar: Scalar,
    pub levels: Vec<ScanLevel>,
}

/// Plans the scan of `n` elements; `vec` 4 when the caller can bind vector
/// views of the input and output (deeper levels use `vec = 4` too: their
/// buffers are the library's own).
pub fn plan(scalar: Scalar, kind: ScanKind, n: usize, vec: u8, threads: Option<u32>) -> Result<ScanPlan, ShapeError> {
    check_vec(vec);
    let name = format!("scan_{}_{}", kind.name(), scalar);
    if !SCAN_SCALARS.contains(&scalar) {
        return Err(ShapeError::new(name, format!("element type {scalar} is not one of f32, i32, u32")));
    }
    nonzero(&name, "n", n)?;
    let mut n = to_u32(&name, "n", n)?;
    let t = pick_threads(&name, KernelClass::Elementwise, threads)?;
    let mut levels = vec![];
    let mut level_vec = vec;
    let mut level_kind = kind;
    loop {
        let block = t * level_vec as u32;
        let blocks = n.div_ceil(block);
        let add = (blocks > 1).then(|| Dispatch::threadgroups([blocks - 1, 1, 1], t));
        levels.push(ScanLevel { n, vec: level_vec, kind: level_kind, blocks, scan: Dispatch::threadgroups([blocks, 1, 1], t), add });
        if blocks == 1 {
            break;
        }
        n = blocks;
        level_vec = 4;
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
        let p = plan(Scalar::F32, ScanKind::Inclusive, 1, 1, None).unwrap();
        assert_eq!(p.levels.len(), 1);
        assert!(p.levels[0].add.is_none());
        // 2^20 with 256 threads × 4: 1024 blocks, then 1 block of 1024 totals.
        let p = plan(Scalar::F32, ScanKind::Exclusive, 1 << 20, 4, None).unwrap();
        assert_eq!(p.levels.iter().map(|l| l.blocks).collect::<Vec<_>>(), vec![1024, 1]);
        assert_eq!(p.levels[1].kind, ScanKind::Exclusive);
        let p = plan(Scalar::U32, ScanKind::Inclusive, 70_000, 1, Some(32)).unwrap();
        assert_eq!(p.levels.iter().map(|l| l.blocks).collect::<Vec<_>>(), vec![2188, 18, 1]);
        assert!(plan(Scalar::F16, ScanKind::Inclusive, 10, 1, None).is_err());
    }

    #[test]
    fn references_agree() {
        assert_eq!(reference(ScanKind::Inclusive, &[1.0, 2.0, 3.0]), vec![1.0, 3.0, 6.0]);
        assert_eq!(reference(ScanKind::Exclusive, &[1.0, 2.0, 3.0]), vec![0.0, 1.0, 3.0]);
        assert_eq!(reference_u32(ScanKind::Exclusive, &[u32::MAX, 2]), vec![0, u32::MAX]);
    }
}
