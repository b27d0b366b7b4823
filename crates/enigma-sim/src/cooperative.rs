//! Cooperative tensors in the simulator: the operations that span the
//! threads of a scope (the product and the reductions), and the gathering
//! and scattering of a tensor's elements through its [`Layout`].
//!
//! A cooperative tensor's elements live in `capacity` registers of each
//! thread of its scope; which slot of which thread holds which element is a
//! [`Layout`] (`layout.rs`). The IR promises none, so the simulator builds its program
//! for a given layout per tensor: layout 0 puts element `e` (row-major) in
//! slot `e % capacity` of thread `e / capacity`, and every other seed is a
//! seeded permutation of the slots. Plain runs use layout 0; the sanitizer
//! reruns the dispatch with other layouts and reports outputs that change.
//!
//! Loads, stores and slot accesses are per-thread instructions (each thread
//! reads its own slots' coordinates from a table), so the sanitizer sees
//! their memory accesses as the thread's own. The product and the
//! reductions need every thread's registers: a [`Collective`] runs once
//! per scope, when its SIMD groups have all reached it (for a threadgroup
//! scope, the scheduler holds each SIMD group there as at a barrier). Its
//! memory reads are bounds-checked and recorded with the sanitizer as reads
//! by the scope's threads in turn, each element by two different threads
//! ([`readers`]): the scope's SIMD groups may still be reading a product's
//! operands when one of them has returned from it (on `wgmma` the product
//! is in flight until the next barrier), so a write to an operand by any
//! thread of the scope before the next barrier is a race, including one by
//! a thread that was itself counted as a reader.

use crate::geometry::LANES;
use crate::memory::Words;
use crate::ops;
use crate::layout::Layout;
use crate::program::{Collective, LeftOperand, MemRef, Reg, ViewRegs};
use crate::sanitizer::{AccessKind, TgTracker, Who};
use crate::state::{memory, Env, Fault, SimdGroup};
use enigma_ir::{Matmul2dMode, ReduceAxis, ReduceOp, Scalar};

impl Layout {
    /// Every element's value (row-major) gathered from the scope's registers.
    fn gather(&self, sgs: &[SimdGroup], base: Reg) -> Vec<u64> {
        let mut out = vec![0u64; (self.rows * self.cols) as usize];
        for (s, e) in self.slot_elem.iter().enumerate() {
            if let Some(e) = e {
                let (t, i) = (s as u32 / self.capacity, s as u32 % self.capacity);
                out[*e as usize] = sgs[(t as usize) / LANES].regs[(base + i) as usize][(t as usize) % LANES];
            }
        }
        out
    }

    /// Writes every element's value (row-major) to the scope's registers.
    fn scatter(&self, sgs: &mut [SimdGroup], base: Reg, values: &[u64]) {
        for (s, e) in self.slot_elem.iter().enumerate() {
            if let Some(e) = e {
                let (t, i) = (s as u32 / self.capacity, s as u32 % self.capacity);
                sgs[(t as usize) / LANES].regs[(base + i) as usize][(t as usize) % LANES] = values[*e as usize];
            }
        }
    }
}

/// The five values of a view, read from the first active lane of the
/// scope's first SIMD group (validation makes them uniform).
fn view_values(sgs: &[SimdGroup], v: &ViewRegs) -> [u64; 5] {
    let sg = &sgs[0];
    let lane = sg.active.trailing_zeros().min(LANES as u32 - 1) as usize;
    [v.offset, v.extents[0], v.extents[1], v.strides[0], v.strides[1]].map(|r| sg.regs[r as usize][lane] as u32 as u64)
}

/// The two scope threads (of `threads`, at least 32) the sanitizer counts
/// as readers of a product's operand element `e`.
fn readers(e: usize, threads: u32) -> [u32; 2] {
    let first = (e % threads as usize) as u32;
    [first, (first + threads / 2) % threads]
}

/// What a collective needs besides its operands.
pub struct Ctx<'e, 'a, 't> {
    pub env: &'e Env<'a>,
    pub tg_mem: &'e Words,
    pub pc: u32,
    pub san: Option<&'t mut TgTracker>,
    /// Whether the reads are an overlapped product's (the sanitizer records
    /// them again at the next barrier).
    pub overlapped: bool,
    /// The threadgroup's tile barriers (for a threadgroup's collectives).
    pub tiles: Option<&'t mut crate::tile_copy::TileBarriers>,
}

impl Ctx<'_, '_, '_> {
    /// View element (x, y) as f32, zero outside the extents; the read is
    /// scope threads `threads`' (bounds-checked, seen by the sanitizer).
    fn read(&mut self, sgs: &[SimdGroup], v: &ViewRegs, values: &[u64; 5], x: u64, y: u64, threads: [u32; 2]) -> Result<f32, (usize, Fault)> {
        let [offset, ex, ey, sx, sy] = *values;
        if x >= ex || y >= ey {
            return Ok(0.0);
        }
        let index = offset + x * sx + y * sy;
        let (words, len) = memory(self.env, self.tg_mem, v.mem);
        let stride = v.elem.size_bytes() as usize;
        let mut checked = None;
        for thread in threads {
            let sg_index = thread as usize / LANES;
            let lane = thread as usize % LANES;
            checked = sgs[sg_index]
                .checked_index(self.env, self.pc, lane, v.mem, index, Scalar::U64, len / stride, "read", &mut self.san, AccessKind::Read, 0)
                .map_err(|f| (sg_index, f))?;
            if let (true, Some(t), MemRef::Threadgroup(array), Some(i)) = (self.overlapped, self.san.as_deref_mut(), v.mem, checked) {
                t.overlapped_reads.push((array, i, Who { simdgroup: sg_index as u32, lane: lane as u32, pc: self.pc }));
            }
        }
        Ok(match checked {
            Some(i) => ops::f32_of(v.elem, ops::norm(v.elem, words.read(i * stride, v.elem))),
            None => 0.0,
        })
    }
}

impl Collective {
    /// Runs the operation over `sgs`, the scope's SIMD groups in order; an
    /// error names the SIMD group (its position in `sgs`) it happened in.
    pub fn run(&self, ctx: &mut Ctx<'_, '_, '_>, sgs: &mut [SimdGroup]) -> Result<(), (usize, Fault)> {
        match self {
            Collective::Matmul { desc, left, right, dest, overlapped } => {
                ctx.overlapped = *overlapped;
                let (m, n) = (desc.m as usize, desc.n as usize);
                let threads = dest.layout.threads;
                let (a, k) = match left {
                    LeftOperand::View(v) => {
                        let values = view_values(sgs, v);
                        let k = desc.k.map_or(if desc.transpose_left { values[2] } else { values[1] }, u64::from) as usize;
                        let mut a = vec![0f32; m * k];
                        for r in 0..m {
                            for kk in 0..k {
                                let (x, y) = if desc.transpose_left { (r, kk) } else { (kk, r) };
                                let e = r * k + kk;
                                a[e] = ctx.read(sgs, v, &values, x as u64, y as u64, readers(e, threads))?;
                            }
                        }
                        (a, k)
                    }
                    LeftOperand::Held(h) => {
                        let a = h.layout.gather(sgs, h.base).into_iter().map(|bits| ops::f32_of(h.elem, bits)).collect();
                        (a, h.layout.cols as usize)
                    }
                };
                let values = view_values(sgs, right);
                let mut b = vec![0f32; k * n];
                for kk in 0..k {
                    for c in 0..n {
                        let (x, y) = if desc.transpose_right { (kk, c) } else { (c, kk) };
                        let e = kk * n + c;
                        b[e] = ctx.read(sgs, right, &values, x as u64, y as u64, readers(e, threads))?;
                    }
                }
                let start: Vec<f32> = match desc.mode {
                    Matmul2dMode::Multiply => vec![0.0; m * n],
                    Matmul2dMode::MultiplyAccumulate => dest.layout.gather(sgs, dest.base).into_iter().map(|bits| ops::f32_of(dest.elem, bits)).collect(),
                };
                let mut out = vec![0u64; m * n];
                for r in 0..m {
                    for c in 0..n {
                        let mut sum = start[r * n + c];
                        for kk in 0..k {
                            sum = a[r * k + kk].mul_add(b[kk * n + c], sum);
                        }
                        out[r * n + c] = ops::from_f32(dest.elem, sum);
                    }
                }
                dest.layout.scatter(sgs, dest.base, &out);
            }
            Collective::Reduce { src, dest, axis, op } => {
                let values = src.layout.gather(sgs, src.base);
                let (rows, cols) = (src.layout.rows as usize, src.layout.cols as usize);
                let (outer, inner) = match axis {
                    ReduceAxis::Rows => (rows, cols),
                    ReduceAxis::Columns => (cols, rows),
                };
                let at = |o: usize, i: usize| match axis {
                    ReduceAxis::Rows => values[o * cols + i],
                    ReduceAxis::Columns => values[i * cols + o],
                };
                let out: Vec<u64> = (0..outer).map(|o| reduce(src.elem, *op, (0..inner).map(|i| at(o, i)))).collect();
                dest.layout.scatter(sgs, dest.base, &out);
            }
            Collective::Combine { dest, src, op } => {
                let (d, s) = (dest.layout.gather(sgs, dest.base), src.layout.gather(sgs, src.base));
                let (cols, src_rows, src_cols) = (dest.layout.cols as usize, src.layout.rows as usize, src.layout.cols as usize);
                let out: Vec<u64> = d
                    .iter()
                    .enumerate()
                    .map(|(e, &v)| {
                        let (r, c) = (e / cols, e % cols);
                        let at = if src_rows == 1 && src_cols == cols { c } else if src_cols == 1 { r } else { e };
                        ops::from_f32(dest.elem, op.apply(ops::f32_of(dest.elem, v), ops::f32_of(src.elem, s[at])))
                    })
                    .collect();
                dest.layout.scatter(sgs, dest.base, &out);
            }
            Collective::TileCopy(copy) => crate::tile_copy::copy(ctx, sgs, copy)?,
            Collective::TileWait { barrier } => crate::tile_copy::wait(ctx, sgs, *barrier)?,
        }
        Ok(())
    }

    /// The MSL name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Collective::Matmul { .. } => "matmul2d",
            Collective::Reduce { axis, .. } => axis.function(),
            Collective::Combine { .. } => "combine",
            Collective::TileCopy(_) => "tile_copy",
            Collective::TileWait { .. } => "tile_wait",
        }
    }
}

/// `op` over values of `elem` in order: floats in f32, integers wrapping.
fn reduce(elem: Scalar, op: ReduceOp, values: impl Iterator<Item = u64>) -> u64 {
    if elem.is_float() {
        let mut acc: Option<f32> = None;
        for v in values.map(|v| ops::f32_of(elem, v)) {
            acc = Some(match (acc, op) {
                (None, _) => v,
                (Some(a), ReduceOp::Sum) => a + v,
                (Some(a), ReduceOp::Max) => a.max(v),
                (Some(a), ReduceOp::Min) => a.min(v),
            });
        }
        return ops::from_f32(elem, acc.unwrap_or(0.0));
    }
    let signed = elem.is_signed_int();
    let mut acc: Option<i64> = None;
    for v in values.map(|v| if signed { v as i32 as i64 } else { v as u32 as i64 }) {
        acc = Some(match (acc, op) {
            (None, _) => v,
            (Some(a), ReduceOp::Sum) => a.wrapping_add(v),
            (Some(a), ReduceOp::Max) => a.max(v),
            (Some(a), ReduceOp::Min) => a.min(v),
        });
    }
    ops::norm(elem, acc.unwrap_or(0) as u64)
}
