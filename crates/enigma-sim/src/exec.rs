//! The SIMD-group interpreter: runs one SIMD group's 32 lanes in lockstep
//! over the [`Program`](crate::program::Program), with an active-lane mask, until it reaches a
//! threadgroup barrier or finishes.
//!
//! Control flow is a stack of mask frames. An `If` frame remembers the lanes
//! that entered it and those that took the branch; a `Loop` frame remembers
//! the lanes that entered the loop and those that left through `break` or
//! skipped the rest of the iteration through `continue`. Lanes that `return`
//! are gone for good. Whenever no lane is active, execution skips to the
//! point where some may become active again, so a SIMD group never executes
//! work for zero lanes and never stops at a barrier none of its lanes reached.

use crate::geometry::{Lanes, TgPlace, LANES};
use crate::memory::Words;
use crate::state::{memory, Env, Fault, Frame, MemView, SimdGroup, Stop};
use crate::sanitizer::{AccessKind, Subscript, TgTracker, Who};
use crate::ops;
use crate::program::{Inst, MemRef, Reg};
use enigma_backend::texture::ChannelKind;
use enigma_backend::{FindingKind, StopReason, TextureDesc};
use enigma_ir::{AtomicOp, BarrierScope, BinaryOp, Builtin, Intrinsic, MatrixType, Precision, Scalar, TextureDim, Type};
use std::sync::atomic::Ordering::Relaxed;

/// Back-edges between two looks at the clock and the cancel flag (a power of two).
const CHECK_EVERY: u64 = 1024;

#[inline(always)]
fn mask_of(r: &Lanes) -> u32 {
    let mut m = 0u32;
    for (l, v) in r.iter().enumerate() {
        m |= ((*v != 0) as u32) << l;
    }
    m
}

#[inline(always)]
fn lanes_of(mask: u32) -> impl Iterator<Item = usize> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        }
    })
}

impl SimdGroup {
    pub fn new(num_regs: u32, thread_cells: u32) -> SimdGroup {
        SimdGroup {
            thread_written: vec![0; thread_cells as usize],
            regs: vec![[0; LANES]; num_regs as usize],
            index: 0,
            launched: 0,
            active: 0,
            exited: 0,
            returned_at: [0; LANES],
            pc: 0,
            frames: Vec::with_capacity(8),
            iterations: 0,
            place: TgPlace { position: [0; 3], size: [1; 3] },
            printed: vec![],
            unprinted: 0,
        }
    }

    /// Prepares the SIMD group `index` of a threadgroup to run from the start.
    pub fn reset(&mut self, env: &Env<'_>, tg: &TgPlace, index: u32) {
        let threads = tg.threads();
        let first = index * LANES as u32;
        let n = (threads - first).min(LANES as u32);
        self.index = index;
        self.launched = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        self.active = self.launched;
        self.exited = 0;
        self.pc = 0;
        self.frames.clear();
        self.iterations = 0;
        self.place = *tg;
        self.printed.clear();
        self.unprinted = 0;
        // Per-thread arrays start unwritten; a read before a write (which
        // the sanitizer reports) reads zeros, not another thread's data.
        self.thread_written.fill(0);
        for slot in &env.program.thread_arrays {
            let regs = slot.reg as usize..(slot.reg + slot.len * slot.width) as usize;
            self.regs[regs].fill([0; LANES]);
        }
        let simdgroups = threads.div_ceil(LANES as u32);
        // Positions of the 32 lanes in the threadgroup, computed once.
        let mut local = [[0u32; 3]; LANES];
        for (lane, pos) in local.iter_mut().enumerate() {
            *pos = tg.local_position(first + lane as u32);
        }
        for slot in &env.program.builtins {
            let r = slot.reg as usize;
            let width = slot.builtin.ty().width() as usize;
            let uniform: Option<[u32; 3]> = match slot.builtin {
                Builtin::ThreadgroupPositionInGrid => Some(tg.position),
                Builtin::ThreadsPerThreadgroup => Some(tg.size),
                Builtin::ThreadsPerGrid => Some(env.threads_per_grid),
                Builtin::ThreadgroupsPerGrid => Some(env.threadgroups_per_grid),
                Builtin::SimdgroupIndexInThreadgroup => Some([index, 0, 0]),
                Builtin::SimdgroupsPerThreadgroup => Some([simdgroups, 0, 0]),
                Builtin::ThreadsPerSimdgroup => Some([LANES as u32, 0, 0]),
                _ => None,
            };
            if let Some(v) = uniform {
                for (c, value) in v.iter().take(width).enumerate() {
                    self.regs[r + c] = [*value as u64; LANES];
                }
                continue;
            }
            for (lane, pos) in local.iter().enumerate() {
                let values: [u32; 3] = match slot.builtin {
                    Builtin::ThreadPositionInGrid => [0, 1, 2].map(|a| tg.position[a] * env.threadgroup_size[a] + pos[a]),
                    Builtin::ThreadPositionInThreadgroup => *pos,
                    Builtin::ThreadIndexInThreadgroup => [first + lane as u32, 0, 0],
                    _ => [lane as u32, 0, 0],
                };
                for (c, v) in values.iter().take(width).enumerate() {
                    self.regs[r + c][lane] = *v as u64;
                }
            }
        }
        for &(reg, count, bits) in &env.program.initial {
            for r in reg..reg + count {
                self.regs[r as usize] = [bits; LANES];
            }
        }
        for (param, reg) in &env.program.value_params {
            let bits = env.values[param.0 as usize];
            for (c, b) in bits.iter().enumerate() {
                if let Some(r) = self.regs.get_mut(*reg as usize + c) {
                    if c < 4 {
                        *r = [*b; LANES];
                    }
                }
            }
        }
    }

    fn live(&self) -> u32 {
        let mut live = self.launched & !self.exited;
        if let Some(Frame::Loop { broken, continued, .. }) =
            self.frames.iter().rev().find(|f| matches!(f, Frame::Loop { .. }))
        {
            live &= !(broken | continued);
        }
        live
    }

    /// Jumps to where lanes may become active again; `false` when the SIMD
    /// group has finished.
    fn skip(&mut self) -> bool {
        match self.frames.last() {
            None => false,
            Some(Frame::If { skip_pc, .. }) => {
                self.pc = *skip_pc;
                true
            }
            Some(Frame::Loop { cont_pc, .. }) => {
                self.pc = *cont_pc;
                true
            }
        }
    }

    /// Where a lane that is not active stands: the `return` it took, else
    /// the innermost `if` or loop it is waiting to leave (the deepest frame
    /// it entered), else the last instruction run.
    pub fn parked_at(&self, lane: u32) -> u32 {
        let bit = 1u32 << lane;
        if self.exited & bit != 0 {
            return self.returned_at[lane as usize];
        }
        self.frames
            .iter()
            .rev()
            .find_map(|f| match *f {
                Frame::If { saved, skip_pc, .. } if saved & bit != 0 => Some(skip_pc),
                Frame::Loop { saved, exit_pc, .. } if saved & bit != 0 => Some(exit_pc),
                _ => None,
            })
            .unwrap_or(self.pc.saturating_sub(1))
    }

    fn innermost_loop(&mut self) -> &mut Frame {
        self.frames
            .iter_mut()
            .rev()
            .find(|f| matches!(f, Frame::Loop { .. }))
            .expect("validation rejects break/continue outside loops")
    }

    /// Runs until a threadgroup barrier or the end of the kernel.
    pub fn run(&mut self, env: &Env<'_>, tg_mem: &Words, mut san: Option<&mut TgTracker>) -> Result<Stop, Fault> {
        let code = &env.program.code;
        loop {
            let pc = self.pc;
            let Some(inst) = code.get(pc as usize) else {
                return Ok(Stop::Done);
            };
            self.pc += 1;
            match *inst {
                Inst::Const { dst, bits } => self.regs[dst as usize] = [bits; LANES],
                Inst::Copy { dst, src } => {
                    let s = self.regs[src as usize];
                    let d = &mut self.regs[dst as usize];
                    if self.active == u32::MAX {
                        *d = s;
                    } else {
                        for l in lanes_of(self.active) {
                            d[l] = s[l];
                        }
                    }
                }
                Inst::Unary { op, ty, dst, a } => {
                    let a = self.regs[a as usize];
                    let d = &mut self.regs[dst as usize];
                    for l in 0..LANES {
                        d[l] = ops::unary(op, ty, a[l]);
                    }
                }
                Inst::Binary { op, ty, dst, a, b } => self.binary(op, ty, dst, a, b, pc)?,
                Inst::Convert { from, to, dst, a } => {
                    let a = self.regs[a as usize];
                    let d = &mut self.regs[dst as usize];
                    for l in 0..LANES {
                        d[l] = ops::convert(from, to, a[l]);
                    }
                }
                Inst::Bitcast { from, to, dst, src } => self.bitcast(from, to, dst, src),
                Inst::Dequant { code, elem, dst, word, shift, scale, bias } => {
                    let (w, sh, sc) = (self.regs[word as usize], self.regs[shift as usize], self.regs[scale as usize]);
                    let b = bias.map(|b| self.regs[b as usize]);
                    let d = &mut self.regs[dst as usize];
                    for l in 0..LANES {
                        // Exact in f64: a 4-bit value times an f16, plus an f16.
                        let product = f64::from(code.value((w[l] as u32) >> (sh[l] as u32 & 31))) * ops::to_f64(Scalar::F16, sc[l]);
                        d[l] = ops::from_f64(elem, b.map_or(product, |b| product + ops::to_f64(Scalar::F16, b[l])));
                    }
                }
                Inst::Call { func, precision, ty, dst, args } => self.call(func, precision, ty, dst, args),
                Inst::Simd { func, ty, dst, a, b } => {
                    let poisoned = self.inactive_sources(func, b);
                    if let (Some(t), Some((lane, source))) = (san.as_deref_mut(), poisoned.1) {
                        t.inactive_lane(Who { simdgroup: self.index, lane, pc }, source);
                    }
                    self.simd(func, ty, dst, a, b);
                    // What an inactive lane gives is undefined on a GPU: a
                    // poison value, rather than whatever its register holds.
                    for l in lanes_of(poisoned.0) {
                        self.regs[dst as usize][l] = poison(ty);
                    }
                }
                Inst::Load { mem, elem, dst, index, index_ty } => {
                    let (words, len) = memory(env, tg_mem, mem);
                    let idx = self.regs[index as usize];
                    let stride = elem.size_bytes() as usize;
                    let count = len / stride;
                    let comp_bytes = elem.elem().size_bytes() as usize;
                    if san.is_none() && elem.width() == 1 && comp_bytes == 4 && self.active == u32::MAX && index_ty == Scalar::U32 {
                        // Fast path: a full SIMD group loading 32-bit scalars.
                        if idx.iter().all(|&i| (i as usize) < count) {
                            let d = &mut self.regs[dst as usize];
                            for l in 0..LANES {
                                d[l] = ops::norm(elem.elem(), words.read(idx[l] as usize * 4, Scalar::U32));
                            }
                            continue;
                        }
                    }
                    for c in 0..elem.width() as usize {
                        self.regs[dst as usize + c] = [0; LANES];
                    }
                    for l in lanes_of(self.active) {
                        let Some(i) = self.checked_index(env, pc, l, mem, idx[l], index_ty, count, "read", &mut san, AccessKind::Read, 0)? else {
                            continue;
                        };
                        for c in 0..elem.width() as usize {
                            self.regs[dst as usize + c][l] = ops::norm(elem.elem(), words.read(i * stride + c * comp_bytes, elem.elem()));
                        }
                    }
                }
                Inst::ThreadLoad { array, dst, index, index_ty } => self.thread_access(env, pc, array, dst, index, index_ty, false, &mut san)?,
                Inst::ThreadStore { array, src, index, index_ty } => self.thread_access(env, pc, array, src, index, index_ty, true, &mut san)?,
                Inst::DimCheck { mem, dim, index, index_ty, size, size_ty } => {
                    let value = |raw: u64, ty: Scalar| if ty.is_signed_int() { raw as i64 as i128 } else { raw as i128 };
                    let (idx, sizes) = (self.regs[index as usize], self.regs[size as usize]);
                    for l in lanes_of(self.active) {
                        let sub = Subscript { dim, index: value(idx[l], index_ty), size: value(sizes[l], size_ty) };
                        if (0..sub.size).contains(&sub.index) {
                            continue;
                        }
                        match san.as_deref_mut() {
                            Some(t) => t.subscript_out_of_bounds(mem, sub, Who { simdgroup: self.index, lane: l as u32, pc }),
                            None => {
                                let (what, name) = match mem {
                                    MemRef::Buffer(p) => ("buffer", env_name(env, mem, p)),
                                    MemRef::Threadgroup(t) => ("threadgroup array", env_name(env, mem, t)),
                                    MemRef::Texture(t) => ("texture", env_name(env, mem, t)),
                                    MemRef::Thread(t) => ("per-thread array", env_name(env, mem, t)),
                                };
                                let message = format!(
                                    "out-of-bounds subscript of {what} `{name}`: index {} of dimension {dim}, size {}",
                                    sub.index, sub.size
                                );
                                return Err(Fault { pc, lane: l as u32, message, stop: None });
                            }
                        }
                    }
                }
                Inst::Store { mem, elem, src, index, index_ty } => {
                    let (words, len) = memory(env, tg_mem, mem);
                    let idx = self.regs[index as usize];
                    let stride = elem.size_bytes() as usize;
                    let count = len / stride;
                    let comp_bytes = elem.elem().size_bytes() as usize;
                    for l in lanes_of(self.active) {
                        // What the lane stores, as one word (for the sanitizer's same-value test).
                        let value = (0..elem.width() as usize).fold(0u64, |h, c| h.rotate_left(17) ^ self.regs[src as usize + c][l]);
                        let Some(i) = self.checked_index(env, pc, l, mem, idx[l], index_ty, count, "write", &mut san, AccessKind::Write, value)? else {
                            continue;
                        };
                        for c in 0..elem.width() as usize {
                            words.write(i * stride + c * comp_bytes, elem.elem(), self.regs[src as usize + c][l]);
                        }
                    }
                }
                Inst::Atomic { op, mem, ty, index, index_ty, value, dst } => {
                    let (words, len) = memory(env, tg_mem, mem);
                    let count = len / 4;
                    let idx = self.regs[index as usize];
                    let val = self.regs[value as usize];
                    for l in lanes_of(self.active) {
                        let Some(i) = self.checked_index(env, pc, l, mem, idx[l], index_ty, count, "atomic access", &mut san, AccessKind::Atomic, 0)? else {
                            continue;
                        };
                        let old = atomic_rmw(words.word(i * 4), op, ty, val[l]);
                        if let Some(d) = dst {
                            self.regs[d as usize][l] = ops::norm(ty, old);
                        }
                    }
                }
                Inst::CompareExchange { mem, ty, index, index_ty, expected, desired, dst } => {
                    let (words, len) = memory(env, tg_mem, mem);
                    let count = len / 4;
                    let idx = self.regs[index as usize];
                    for l in lanes_of(self.active) {
                        let Some(i) = self.checked_index(env, pc, l, mem, idx[l], index_ty, count, "atomic access", &mut san, AccessKind::Atomic, 0)? else {
                            continue;
                        };
                        let (e, d) = (self.regs[expected as usize][l] as u32, self.regs[desired as usize][l] as u32);
                        let old = match words.word(i * 4).compare_exchange(e, d, Relaxed, Relaxed) {
                            Ok(v) | Err(v) => v,
                        };
                        if let Some(r) = dst {
                            self.regs[r as usize][l] = ops::norm(ty, old as u64);
                        }
                    }
                }
                Inst::If { cond, else_pc } => {
                    let taken = mask_of(&self.regs[cond as usize]) & self.active;
                    self.frames.push(Frame::If { saved: self.active, taken, skip_pc: else_pc });
                    self.active = taken;
                    if taken == 0 {
                        self.pc = else_pc;
                    }
                }
                Inst::Else { end_pc } => {
                    let live = self.live();
                    if let Some(Frame::If { saved, taken, skip_pc }) = self.frames.last_mut() {
                        *skip_pc = end_pc;
                        self.active = *saved & !*taken & live;
                    }
                    if self.active == 0 {
                        self.pc = end_pc;
                    }
                }
                Inst::EndIf => {
                    let Some(Frame::If { saved, .. }) = self.frames.pop() else {
                        unreachable!("EndIf pops the frame its If pushed")
                    };
                    self.active = saved & self.live();
                    if self.active == 0 && !self.skip() {
                        return Ok(Stop::Done);
                    }
                }
                Inst::LoopBegin { cont_pc, exit_pc } => {
                    self.frames.push(Frame::Loop { saved: self.active, broken: 0, continued: 0, cont_pc, exit_pc });
                }
                Inst::LoopTest { cond } => {
                    self.active &= mask_of(&self.regs[cond as usize]);
                    if self.active == 0 {
                        if let Some(Frame::Loop { exit_pc, .. }) = self.frames.last() {
                            self.pc = *exit_pc;
                        }
                    }
                }
                Inst::LoopContinue => {
                    let exited = self.exited;
                    if let Some(Frame::Loop { continued, exit_pc, .. }) = self.frames.last_mut() {
                        self.active = (self.active | *continued) & !exited;
                        *continued = 0;
                        if self.active == 0 {
                            self.pc = *exit_pc;
                        }
                    }
                }
                Inst::LoopBack { head_pc } => {
                    self.pc = head_pc;
                    self.iterations += 1;
                    let limits = env.limits;
                    let stop = match limits.max_loop_iterations {
                        Some(budget) if self.iterations > budget => Some(StopReason::StepBudget { budget }),
                        _ if self.iterations & (CHECK_EVERY - 1) == 0 => limits.stop_now(),
                        _ => None,
                    };
                    if let Some(stop) = stop {
                        let lane = self.active.trailing_zeros();
                        return Err(Fault { pc, lane, message: stop.to_string(), stop: Some(stop) });
                    }
                }
                Inst::LoopEnd => {
                    let Some(Frame::Loop { saved, .. }) = self.frames.pop() else {
                        unreachable!("LoopEnd pops the frame its LoopBegin pushed")
                    };
                    self.active = saved & self.live();
                    if self.active == 0 && !self.skip() {
                        return Ok(Stop::Done);
                    }
                }
                Inst::Break | Inst::Continue => {
                    let lanes = self.active;
                    let is_break = matches!(inst, Inst::Break);
                    if let Frame::Loop { broken, continued, .. } = self.innermost_loop() {
                        if is_break {
                            *broken |= lanes;
                        } else {
                            *continued |= lanes;
                        }
                    }
                    self.active = 0;
                    if !self.skip() {
                        return Ok(Stop::Done);
                    }
                }
                Inst::Return => {
                    for l in lanes_of(self.active) {
                        self.returned_at[l] = pc;
                    }
                    self.exited |= self.active;
                    self.active = 0;
                    if !self.skip() {
                        return Ok(Stop::Done);
                    }
                }
                Inst::Barrier { scope, device, texture } => {
                    if scope == BarrierScope::Threadgroup {
                        return Ok(Stop::Barrier { pc, active: self.active });
                    }
                    if let Some(t) = san.as_deref_mut() {
                        t.simd_epochs[self.index as usize] += 1;
                        if device {
                            t.simd_device_epochs[self.index as usize] += 1;
                        }
                        if texture {
                            t.simd_texture_epochs[self.index as usize] += 1;
                        }
                    }
                }
                Inst::LaneTable { dst, ref values } => self.regs[dst as usize] = **values,
                Inst::CoopTable { dst, ref table, capacity, threadgroup, index, tensor } => {
                    let first = if threadgroup { self.index as usize * LANES } else { 0 };
                    for l in lanes_of(self.active) {
                        let slot = self.regs[index as usize][l];
                        if slot >= capacity as u64 {
                            return Err(self.slot_fault(env, pc, l, slot, capacity, tensor));
                        }
                        self.regs[dst as usize][l] = table[(first + l) * capacity as usize + slot as usize];
                    }
                }
                Inst::CoopGet { dst, base, capacity, index, tensor } => {
                    for l in lanes_of(self.active) {
                        let slot = self.regs[index as usize][l];
                        if slot >= capacity as u64 {
                            return Err(self.slot_fault(env, pc, l, slot, capacity, tensor));
                        }
                        self.regs[dst as usize][l] = self.regs[(base + slot as u32) as usize][l];
                    }
                }
                Inst::CoopSet { base, capacity, index, src, tensor } => {
                    for l in lanes_of(self.active) {
                        let slot = self.regs[index as usize][l];
                        if slot >= capacity as u64 {
                            return Err(self.slot_fault(env, pc, l, slot, capacity, tensor));
                        }
                        self.regs[(base + slot as u32) as usize][l] = self.regs[src as usize][l];
                    }
                }
                Inst::Collective { ref op, threadgroup } => {
                    if threadgroup {
                        return Ok(Stop::Barrier { pc, active: self.active });
                    }
                    let op = op.clone();
                    let mut ctx = crate::cooperative::Ctx { env, tg_mem, pc, san: san.as_deref_mut(), overlapped: false, tiles: None };
                    op.run(&mut ctx, std::slice::from_mut(self)).map_err(|(_, f)| f)?;
                }
                Inst::WholeSimdgroup { op } => {
                    if self.active != u32::MAX {
                        let lane = (!self.active).trailing_zeros();
                        return Err(Fault {
                            pc,
                            lane,
                            message: format!(
                                "`{op}` needs every lane of the SIMD group, but lane {lane} is inactive here ({} of 32 active; a partial SIMD group at the edge of the threadgroup, or divergent control flow)",
                                self.active.count_ones()
                            ),
                            stop: None,
                        });
                    }
                }
                Inst::MatrixMultiply { a, b, acc, dst, a_ty, b_ty, out } => self.matrix_multiply(a, b, acc, dst, a_ty, b_ty, out),
                Inst::TexSize { tex, dim, dst } => {
                    let desc = texture(env, tex);
                    let v = match dim {
                        TextureDim::Width => desc.width,
                        TextureDim::Height => desc.height,
                    };
                    self.regs[dst as usize] = [v as u64; LANES];
                }
                Inst::TexRead { tex, texel, dst, coord } => {
                    let desc = texture(env, tex);
                    let (words, _) = memory(env, tg_mem, MemRef::Texture(tex));
                    for c in 0..4 {
                        self.regs[dst as usize + c] = [0; LANES];
                    }
                    for l in lanes_of(self.active) {
                        let Some(i) = self.texel_index(env, pc, l, tex, &desc, coord, "read", &mut san, AccessKind::Read, 0)? else {
                            continue;
                        };
                        for (c, v) in read_texel(words, &desc, i, texel).into_iter().enumerate() {
                            self.regs[dst as usize + c][l] = v;
                        }
                    }
                }
                Inst::AsyncCopy { dst, dst_index, dst_index_ty, src, src_index, src_index_ty, elem, count, valid } => {
                    let ends = [(dst, dst_index, dst_index_ty), (src, src_index, src_index_ty)];
                    self.async_copy(env, tg_mem, pc, ends, elem, count, valid, &mut san)?;
                }
                Inst::AsyncCommit => {
                    if let Some(t) = san.as_deref_mut() {
                        for l in lanes_of(self.active) {
                            t.async_commit(Who { simdgroup: self.index, lane: l as u32, pc });
                        }
                    }
                }
                Inst::AsyncWait { pending } => {
                    if let Some(t) = san.as_deref_mut() {
                        for l in lanes_of(self.active) {
                            t.async_wait(Who { simdgroup: self.index, lane: l as u32, pc }, pending);
                        }
                    }
                }
                Inst::Print { ref pieces, ref args } => {
                    if env.print_log.is_some() {
                        for l in lanes_of(self.active) {
                            if self.printed.len() >= enigma_ir::limits::MAX_PRINTED_LINES {
                                self.unprinted += 1;
                                continue;
                            }
                            let values: Vec<(Scalar, u64)> = args.iter().map(|&(r, ty)| (ty, self.regs[r as usize][l])).collect();
                            let [x, y, z] = self.place.grid_position(self.index * LANES as u32 + l as u32, env.threadgroup_size);
                            self.printed.push(format!("thread ({x},{y},{z}): {}", crate::print::render(&pieces[..], &values)));
                        }
                    }
                }
                Inst::DeviceFence => {
                    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                    if let Some(t) = san.as_deref_mut() {
                        for l in lanes_of(self.active) {
                            t.device_fence(env.tracker, Who { simdgroup: self.index, lane: l as u32, pc }.thread());
                        }
                    }
                }
                Inst::TexFence { tex } => {
                    if let Some(t) = san.as_deref_mut() {
                        for l in lanes_of(self.active) {
                            t.texture_fence(tex, Who { simdgroup: self.index, lane: l as u32, pc });
                        }
                    }
                }
                Inst::TexSample { tex, texel, sampler, dst, uv } => {
                    // A sampled texture is access::sample, which no thread
                    // writes, so its reads are not tracked for races.
                    let desc = texture(env, tex);
                    let (words, _) = memory(env, tg_mem, MemRef::Texture(tex));
                    for c in 0..4 {
                        self.regs[dst as usize + c] = [0; LANES];
                    }
                    for l in lanes_of(self.active) {
                        let uv = [0, 1].map(|c| f32::from_bits(self.regs[uv as usize + c][l] as u32));
                        let value = enigma_backend::texture::sample(&desc, sampler, uv, |x, y| {
                            let i = y as usize * desc.width as usize + x as usize;
                            read_texel(words, &desc, i, Scalar::F32).map(|v| f32::from_bits(v as u32))
                        });
                        for (c, v) in value.into_iter().enumerate() {
                            self.regs[dst as usize + c][l] = ops::from_f32(texel, v);
                        }
                    }
                }
                Inst::TexWrite { tex, texel, src, coord } => {
                    let desc = texture(env, tex);
                    let (words, _) = memory(env, tg_mem, MemRef::Texture(tex));
                    for l in lanes_of(self.active) {
                        let value: [u64; 4] = std::array::from_fn(|c| self.regs[src as usize + c][l]);
                        let hash = value.iter().fold(0u64, |h, v| h.rotate_left(17) ^ v);
                        let Some(i) = self.texel_index(env, pc, l, tex, &desc, coord, "write", &mut san, AccessKind::Write, hash)? else {
                            continue;
                        };
                        write_texel(words, &desc, i, texel, value);
                    }
                }
            }
        }
    }

    /// Each active lane's `async_copy` of `count` elements of `elem` from
    /// the source to the destination (`ends`: memory, index register and
    /// index type of each): at once, the source read element by element
    /// (zeros where `valid` is false) and the destination written; the
    /// sanitizer records both and keeps the destination in flight. A copy
    /// whose ends are not aligned to its size fails (`cp.async` faults).
    #[allow(clippy::too_many_arguments)]
    fn async_copy(
        &mut self,
        env: &Env<'_>,
        tg_mem: &Words,
        pc: u32,
        ends: [(MemRef, Reg, Scalar); 2],
        elem: Type,
        count: u32,
        valid: Reg,
        san: &mut Option<&mut TgTracker>,
    ) -> Result<(), Fault> {
        let stride = elem.size_bytes() as usize;
        let comp_bytes = elem.elem().size_bytes() as usize;
        let bytes = stride * count as usize;
        let [(dst, dst_reg, dst_ty), (src, src_reg, src_ty)] = ends;
        let (dst_words, dst_len) = memory(env, tg_mem, dst);
        let (src_words, src_len) = memory(env, tg_mem, src);
        let valid = self.regs[valid as usize];
        for l in lanes_of(self.active) {
            let (dst_raw, src_raw) = (self.regs[dst_reg as usize][l], self.regs[src_reg as usize][l]);
            // An invalid copy reads nothing, so its source may be anywhere.
            let checked = if valid[l] != 0 { 2 } else { 1 };
            for (mem, raw, ty) in [(dst, dst_raw, dst_ty), (src, src_raw, src_ty)].into_iter().take(checked) {
                let at = if ty.is_signed_int() { (raw as i64 as i128) * stride as i128 } else { raw as i128 * stride as i128 };
                if at.rem_euclid(bytes as i128) != 0 {
                    let name = env_name(env, mem, 0);
                    return Err(Fault {
                        pc,
                        lane: l as u32,
                        message: format!(
                            "async_copy of {bytes} bytes at byte offset {at} of `{name}` is not aligned to {bytes} bytes (CUDA's cp.async faults; copy from an element index that is a multiple of {count})"
                        ),
                        stop: None,
                    });
                }
            }
            let mut values = vec![0u64; count as usize * elem.width() as usize];
            if valid[l] != 0 {
                for e in 0..count as usize {
                    let raw = src_raw.wrapping_add(e as u64);
                    let Some(i) = self.checked_index(env, pc, l, src, raw, src_ty, src_len / stride, "async_copy read", san, AccessKind::Read, 0)? else {
                        continue;
                    };
                    for c in 0..elem.width() as usize {
                        values[e * elem.width() as usize + c] = src_words.read(i * stride + c * comp_bytes, elem.elem());
                    }
                }
            }
            for e in 0..count as usize {
                let raw = dst_raw.wrapping_add(e as u64);
                let Some(i) = self.checked_index(env, pc, l, dst, raw, dst_ty, dst_len / stride, "async_copy write", san, AccessKind::Write, 0)? else {
                    continue;
                };
                for c in 0..elem.width() as usize {
                    dst_words.write(i * stride + c * comp_bytes, elem.elem(), values[e * elem.width() as usize + c]);
                }
                if let (Some(t), MemRef::Threadgroup(array)) = (san.as_deref_mut(), dst) {
                    t.async_issue(array, i, Who { simdgroup: self.index, lane: l as u32, pc });
                }
            }
        }
        Ok(())
    }

    /// The element a lane accesses: `Ok(None)` when the access is out of
    /// bounds and the sanitizer recorded it (the lane skips the access),
    /// `Err` when out of bounds without the sanitizer. Records the access
    /// with the sanitizer.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn checked_index(
        &self,
        env: &Env<'_>,
        pc: u32,
        lane: usize,
        mem: MemRef,
        raw: u64,
        index_ty: Scalar,
        count: usize,
        what: &str,
        san: &mut Option<&mut TgTracker>,
        kind: AccessKind,
        value: u64,
    ) -> Result<Option<usize>, Fault> {
        let who = Who { simdgroup: self.index, lane: lane as u32, pc };
        let Some(i) = element_index(raw, index_ty, count) else {
            return match san.as_deref_mut() {
                Some(t) => {
                    t.out_of_bounds(mem, raw, who);
                    Ok(None)
                }
                None => Err(self.oob(env, pc, lane, mem, raw, index_ty, count, what)),
            };
        };
        if let Some(t) = san.as_deref_mut() {
            match mem {
                MemRef::Threadgroup(array) => t.threadgroup_access(array, i, who, kind),
                MemRef::Buffer(_) | MemRef::Texture(_) => self.track_device(env, t, mem, i, who, kind, value),
                MemRef::Thread(_) => {}
            }
        }
        Ok(Some(i))
    }

    /// A slot index past a cooperative tensor's capacity.
    fn slot_fault(&self, env: &Env<'_>, pc: u32, lane: usize, slot: u64, capacity: u32, tensor: u32) -> Fault {
        let name = env.program.coop_names.get(tensor as usize).cloned().unwrap_or_default();
        let message = format!("slot {slot} of cooperative tensor `{name}` is past its capacity of {capacity} slots per thread (loop to get_capacity())");
        Fault { pc, lane: lane as u32, message, stop: None }
    }

    /// Records a lane's access to element `i` of a buffer or texel `i` of a
    /// texture with the sanitizer: races inside the threadgroup, then
    /// against other threadgroups.
    #[allow(clippy::too_many_arguments)]
    fn track_device(&self, env: &Env<'_>, t: &mut TgTracker, mem: MemRef, i: usize, who: Who, kind: AccessKind, value: u64) {
        let param = match mem {
            MemRef::Buffer(p) | MemRef::Texture(p) => p,
            MemRef::Threadgroup(_) | MemRef::Thread(_) => return,
        };
        t.device_access(mem, i, who, kind, value);
        let thread = who.thread();
        match kind {
            AccessKind::Atomic => t.atomic_update(env.tracker, param, i),
            AccessKind::Write if matches!(mem, MemRef::Buffer(_)) => t.device_write(thread),
            _ => {}
        }
        if let Some((kind, other)) = env.tracker.and_then(|d| d.device_access(param, i, t.linear, thread, who.pc, kind)) {
            if !(kind == FindingKind::DeviceRace && t.ordered_after(other, thread)) {
                t.raw.push(crate::sanitizer::Raw { kind, mem: Some(mem), index: Some(i as u64), who, other: Some(other), subscript: None });
            }
        }
    }

    /// The texel a lane's coordinate (registers `coord`, `coord + 1`) names
    /// in texture `tex`: `Ok(None)` when it is outside the texture and the
    /// sanitizer recorded it (the lane skips the access), `Err` naming the
    /// texture, the coordinate and the size without the sanitizer. Records
    /// the access with the sanitizer.
    #[allow(clippy::too_many_arguments)]
    fn texel_index(
        &self,
        env: &Env<'_>,
        pc: u32,
        lane: usize,
        tex: u32,
        desc: &TextureDesc,
        coord: Reg,
        what: &str,
        san: &mut Option<&mut TgTracker>,
        kind: AccessKind,
        value: u64,
    ) -> Result<Option<usize>, Fault> {
        let (x, y) = (self.regs[coord as usize][lane] as u32, self.regs[coord as usize + 1][lane] as u32);
        let who = Who { simdgroup: self.index, lane: lane as u32, pc };
        if x >= desc.width || y >= desc.height {
            return match san.as_deref_mut() {
                Some(t) => {
                    t.texture_out_of_bounds(tex, x, y, who);
                    Ok(None)
                }
                None => Err(Fault {
                    pc,
                    lane: lane as u32,
                    message: format!(
                        "out-of-bounds {what} of texture `{}` at ({x}, {y}): it is {}×{} texels",
                        env_name(env, MemRef::Texture(tex), tex),
                        desc.width,
                        desc.height
                    ),
                    stop: None,
                }),
            };
        }
        let i = y as usize * desc.width as usize + x as usize;
        if let Some(t) = san.as_deref_mut() {
            self.track_device(env, t, MemRef::Texture(tex), i, who, kind, value);
            match kind {
                AccessKind::Write => t.texture_write_unfenced(tex, i, who),
                AccessKind::Read => t.texture_read_fenced(tex, i, who),
                AccessKind::Atomic => {}
            }
        }
        Ok(Some(i))
    }

    /// A load (`store` false: registers `regs..` receive the element) or
    /// store (`store` true: registers `regs..` hold the value) of per-thread
    /// array `array` at each active lane's `index`. An index outside the
    /// array fails the dispatch, or under the sanitizer is reported and the
    /// lane skips the access; under the sanitizer a read of an element the
    /// lane has not written is reported (the read gives zeros).
    #[allow(clippy::too_many_arguments)]
    fn thread_access(
        &mut self,
        env: &Env<'_>,
        pc: u32,
        array: u32,
        regs: Reg,
        index: Reg,
        index_ty: Scalar,
        store: bool,
        san: &mut Option<&mut TgTracker>,
    ) -> Result<(), Fault> {
        let slot = env.program.thread_arrays[array as usize];
        let idx = self.regs[index as usize];
        let mem = MemRef::Thread(array);
        if !store {
            for c in 0..slot.width {
                self.regs[(regs + c) as usize] = [0; LANES];
            }
        }
        for l in lanes_of(self.active) {
            let who = Who { simdgroup: self.index, lane: l as u32, pc };
            let Some(i) = element_index(idx[l], index_ty, slot.len as usize) else {
                match san.as_deref_mut() {
                    Some(t) => {
                        t.out_of_bounds(mem, idx[l], who);
                        continue;
                    }
                    None => return Err(self.oob(env, pc, l, mem, idx[l], index_ty, slot.len as usize, if store { "write" } else { "read" })),
                }
            };
            let cell = &mut self.thread_written[(slot.first_cell as usize) + i];
            if store {
                *cell |= 1 << l;
            } else if *cell & (1 << l) == 0 {
                if let Some(t) = san.as_deref_mut() {
                    t.uninitialised_thread_read(array, i, who);
                }
            }
            let element = slot.reg + i as u32 * slot.width;
            for c in 0..slot.width {
                let (from, to) = if store { (regs + c, element + c) } else { (element + c, regs + c) };
                self.regs[to as usize][l] = self.regs[from as usize][l];
            }
        }
        Ok(())
    }

    /// The lanes of a shuffle or broadcast whose source lane is not active,
    /// with the first such (lane, source lane) for the sanitizer's report.
    fn inactive_sources(&self, func: Intrinsic, b: Reg) -> (u32, Option<(u32, u32)>) {
        use Intrinsic::*;
        if !matches!(func, SimdShuffle | SimdBroadcast | SimdShuffleUp | SimdShuffleDown | SimdShuffleXor) {
            return (0, None);
        }
        let y = &self.regs[b as usize];
        let active = self.active;
        let (mut poisoned, mut first) = (0u32, None);
        for l in lanes_of(active) {
            let d = y[l] as usize;
            let source = match func {
                SimdShuffleUp => l.checked_sub(d),
                SimdShuffleDown => Some(l + d).filter(|s| *s < LANES),
                SimdShuffleXor => Some(l ^ d),
                _ => Some(d),
            };
            if let Some(src) = source {
                if src >= LANES || active & (1 << src) == 0 {
                    first = first.or(Some((l as u32, src as u32)));
                    poisoned |= 1 << l;
                }
            }
        }
        (poisoned, first)
    }

    #[allow(clippy::too_many_arguments)]
    fn oob(&self, env: &Env<'_>, pc: u32, lane: usize, mem: MemRef, raw: u64, index_ty: Scalar, count: usize, what: &str) -> Fault {
        let kernel_mem = match mem {
            MemRef::Buffer(p) => format!("buffer `{}`", env_name(env, mem, p)),
            MemRef::Threadgroup(t) => format!("threadgroup array `{}`", env_name(env, mem, t)),
            MemRef::Texture(p) => format!("texture `{}`", env_name(env, mem, p)),
            MemRef::Thread(t) => format!("per-thread array `{}`", env_name(env, mem, t)),
        };
        let index = if index_ty.is_signed_int() { (raw as i64).to_string() } else { raw.to_string() };
        Fault {
            pc,
            lane: lane as u32,
            message: format!("out-of-bounds {what} of {kernel_mem}[{index}]: it holds {count} elements"),
            stop: None,
        }
    }

    fn binary(&mut self, op: BinaryOp, ty: Scalar, dst: Reg, a: Reg, b: Reg, pc: u32) -> Result<(), Fault> {
        let a = self.regs[a as usize];
        let b = self.regs[b as usize];
        let d = &mut self.regs[dst as usize];
        macro_rules! lanes {
            (|$x:ident, $y:ident| $e:expr) => {
                for l in 0..LANES {
                    let ($x, $y) = (a[l], b[l]);
                    d[l] = $e;
                }
            };
        }
        let f = |v: u64| f32::from_bits(v as u32);
        match (op, ty) {
            (BinaryOp::Add, Scalar::F32) => lanes!(|x, y| (f(x) + f(y)).to_bits() as u64),
            (BinaryOp::Sub, Scalar::F32) => lanes!(|x, y| (f(x) - f(y)).to_bits() as u64),
            (BinaryOp::Mul, Scalar::F32) => lanes!(|x, y| (f(x) * f(y)).to_bits() as u64),
            (BinaryOp::Add, Scalar::U32) => lanes!(|x, y| (x as u32).wrapping_add(y as u32) as u64),
            (BinaryOp::Mul, Scalar::U32) => lanes!(|x, y| (x as u32).wrapping_mul(y as u32) as u64),
            (BinaryOp::Lt, Scalar::U32) => lanes!(|x, y| (x < y) as u64),
            (BinaryOp::Eq, Scalar::U32) => lanes!(|x, y| (x == y) as u64),
            (BinaryOp::Div | BinaryOp::Rem, t) if t.is_int() => {
                for l in lanes_of(self.active) {
                    d[l] = ops::binary(op, ty, a[l], b[l]).map_err(|m| Fault { pc, lane: l as u32, message: m.into(), stop: None })?;
                }
            }
            _ => {
                for l in 0..LANES {
                    // Only integer division can fail, handled above.
                    d[l] = ops::binary(op, ty, a[l], b[l]).unwrap_or(0);
                }
            }
        }
        Ok(())
    }

    fn bitcast(&mut self, from: Type, to: Type, dst: Reg, src: Reg) {
        let (fs, ts) = (from.elem().size_bytes() as usize, to.elem().size_bytes() as usize);
        for l in 0..LANES {
            let mut bytes = [0u8; 32];
            for c in 0..from.width() as usize {
                let v = self.regs[src as usize + c][l];
                bytes[c * fs..(c + 1) * fs].copy_from_slice(&v.to_le_bytes()[..fs]);
            }
            for c in 0..to.width() as usize {
                let mut buf = [0u8; 8];
                buf[..ts].copy_from_slice(&bytes[c * ts..(c + 1) * ts]);
                self.regs[dst as usize + c][l] = ops::norm(to.elem(), u64::from_le_bytes(buf));
            }
        }
    }

    /// `dst = a·b (+ acc)` for the whole SIMD group: the reference
    /// semantics of SIMD-group matrix multiplication. Each output element is
    /// computed in f32: starting from the accumulator's element (or 0), it
    /// adds `a[r][k]·b[k][c]` for k = 0, 1, … with one fused multiply-add
    /// each, then rounds once to the output's element type. (f16 and bf16
    /// products are exact in f32, so only the additions round.)
    #[allow(clippy::too_many_arguments)]
    fn matrix_multiply(&mut self, a: Reg, b: Reg, acc: Option<Reg>, dst: Reg, a_ty: MatrixType, b_ty: MatrixType, out: MatrixType) {
        let gather = |regs: &[Lanes], base: Reg, ty: MatrixType| -> Vec<f32> {
            let mut m = vec![0f32; ty.rows() as usize * ty.cols() as usize];
            for lane in 0..LANES as u32 {
                for i in 0..ty.per_lane() {
                    if let Some((r, c)) = ty.reference_coord(lane, i) {
                        m[(r * ty.cols() as u32 + c) as usize] = ops::f32_of(ty.elem(), regs[(base + i) as usize][lane as usize]);
                    }
                }
            }
            m
        };
        let (ma, mb) = (gather(&self.regs, a, a_ty), gather(&self.regs, b, b_ty));
        let mc = acc.map(|c| gather(&self.regs, c, out));
        let (k_len, cols) = (a_ty.cols() as usize, out.cols() as usize);
        for lane in 0..LANES as u32 {
            for i in 0..out.per_lane() {
                let Some((r, c)) = out.reference_coord(lane, i) else { continue };
                let (r, c) = (r as usize, c as usize);
                let mut sum = mc.as_ref().map_or(0.0, |m| m[r * cols + c]);
                for k in 0..k_len {
                    sum = ma[r * k_len + k].mul_add(mb[k * cols + c], sum);
                }
                self.regs[(dst + i) as usize][lane as usize] = ops::from_f32(out.elem(), sum);
            }
        }
    }

    fn call(&mut self, func: Intrinsic, precision: Precision, ty: Scalar, dst: Reg, args: [Reg; 3]) {
        let n = func.arity();
        let a = args.map(|r| self.regs[r as usize]);
        let d = &mut self.regs[dst as usize];
        for l in 0..LANES {
            let vals = [a[0][l], a[1][l], a[2][l]];
            d[l] = match func {
                Intrinsic::Select => {
                    if vals[2] != 0 {
                        vals[1]
                    } else {
                        vals[0]
                    }
                }
                Intrinsic::Popcount | Intrinsic::Clz | Intrinsic::Ctz => ops::bits(func, ty, vals[0]),
                Intrinsic::Abs | Intrinsic::Min | Intrinsic::Max | Intrinsic::Clamp => ops::numeric(func, ty, &vals[..n]),
                Intrinsic::IsNan | Intrinsic::IsInf | Intrinsic::IsFinite => ops::classify(func, ty, vals[0]),
                _ => ops::float_math(func, precision, ty, &vals[..n]),
            };
        }
    }

    /// SIMD-group functions over the active lanes.
    fn simd(&mut self, func: Intrinsic, ty: Scalar, dst: Reg, a: Reg, b: Reg) {
        use Intrinsic::*;
        let active = self.active;
        if active == 0 {
            return;
        }
        let x = self.regs[a as usize];
        let y = self.regs[b as usize];
        let mut out = self.regs[dst as usize];
        let first = active.trailing_zeros() as usize;
        let fold = |op: BinaryOp| {
            let mut acc = x[first];
            for l in lanes_of(active & !(1 << first)) {
                acc = ops::binary(op, ty, acc, x[l]).unwrap_or(0);
            }
            acc
        };
        let reduce_with = |f: Intrinsic| {
            let mut acc = x[first];
            for l in lanes_of(active & !(1 << first)) {
                acc = ops::numeric(f, ty, &[acc, x[l]]);
            }
            acc
        };
        let uniform = match func {
            SimdSum if ty == Scalar::F32 => {
                let mut acc = f32::from_bits(x[first] as u32);
                for l in lanes_of(active & !(1 << first)) {
                    acc += f32::from_bits(x[l] as u32);
                }
                Some(acc.to_bits() as u64)
            }
            SimdSum => Some(fold(BinaryOp::Add)),
            SimdProduct => Some(fold(BinaryOp::Mul)),
            SimdAnd => Some(fold(BinaryOp::BitAnd)),
            SimdOr => Some(fold(BinaryOp::BitOr)),
            SimdXor => Some(fold(BinaryOp::BitXor)),
            SimdMax => Some(reduce_with(Max)),
            SimdMin => Some(reduce_with(Min)),
            SimdBroadcastFirst => Some(x[first]),
            SimdBroadcast => Some(x[(y[first] as usize) % LANES]),
            SimdAll => Some((lanes_of(active).all(|l| x[l] != 0)) as u64),
            SimdAny => Some((lanes_of(active).any(|l| x[l] != 0)) as u64),
            SimdBallot => Some(lanes_of(active).filter(|&l| x[l] != 0).fold(0u64, |m, l| m | 1 << l)),
            _ => None,
        };
        if let Some(v) = uniform {
            for l in lanes_of(active) {
                out[l] = v;
            }
        } else {
            match func {
                SimdPrefixInclusiveSum | SimdPrefixExclusiveSum => {
                    let mut acc = ops::convert(Scalar::U32, ty, 0);
                    for l in lanes_of(active) {
                        let next = ops::binary(BinaryOp::Add, ty, acc, x[l]).unwrap_or(0);
                        out[l] = if func == SimdPrefixInclusiveSum { next } else { acc };
                        acc = next;
                    }
                }
                SimdShuffle => {
                    for l in lanes_of(active) {
                        out[l] = x[(y[l] as usize) % LANES];
                    }
                }
                SimdShuffleUp => {
                    for l in lanes_of(active) {
                        let d = y[l] as usize;
                        out[l] = if l >= d { x[l - d] } else { x[l] };
                    }
                }
                SimdShuffleDown => {
                    for l in lanes_of(active) {
                        let d = y[l] as usize;
                        out[l] = if l + d < LANES { x[l + d] } else { x[l] };
                    }
                }
                SimdShuffleXor => {
                    for l in lanes_of(active) {
                        out[l] = x[(l ^ y[l] as usize) % LANES];
                    }
                }
                SimdIsFirst => {
                    for l in lanes_of(active) {
                        out[l] = (l == first) as u64;
                    }
                }
                _ => unreachable!("every SIMD function is handled: {func:?}"),
            }
        }
        self.regs[dst as usize] = out;
    }
}

/// The value the sanitizer gives a lane that read an inactive lane: a NaN
/// with a payload for floats, `0xDEADBEEF…` cut to the type for integers.
fn poison(ty: Scalar) -> u64 {
    match ty {
        Scalar::F32 => 0x7fc0_dead,
        Scalar::F16 => 0x7ead,
        Scalar::BF16 => 0x7fad,
        _ => ops::norm(ty, 0xdead_beef_dead_beef),
    }
}

fn env_name(env: &Env<'_>, mem: MemRef, _index: u32) -> String {
    env.program.memory_names.get(&mem).cloned().unwrap_or_default()
}

/// What texture parameter `tex` is bound to.
fn texture(env: &Env<'_>, tex: u32) -> TextureDesc {
    env.textures[tex as usize].expect("checked at dispatch: a texture parameter has a texture argument")
}

/// The scalar of one stored channel of `desc`'s format.
fn channel_scalar(desc: &TextureDesc) -> Scalar {
    match desc.format.channel_bytes() {
        1 => Scalar::U8,
        2 => Scalar::U16,
        _ => Scalar::U32,
    }
}

/// Texel `i` of a texture as four register values of type `texel`.
fn read_texel(words: MemView<'_>, desc: &TextureDesc, i: usize, texel: Scalar) -> [u64; 4] {
    let (f, ch) = (desc.format, channel_scalar(desc));
    let base = i * f.bytes_per_texel();
    let raw: [u32; 4] = std::array::from_fn(|c| if c < f.channels() { words.read(base + c * f.channel_bytes(), ch) as u32 } else { 0 });
    match f.channel_kind() {
        ChannelKind::Float => f.read_float(raw).map(|v| ops::from_f32(texel, v)),
        ChannelKind::Uint | ChannelKind::Sint => f.read_int(raw).map(|v| ops::norm(texel, v as u64)),
    }
}

/// Stores four register values of type `texel` as texel `i` of a texture.
fn write_texel(words: MemView<'_>, desc: &TextureDesc, i: usize, texel: Scalar, value: [u64; 4]) {
    let (f, ch) = (desc.format, channel_scalar(desc));
    let stored = match f.channel_kind() {
        ChannelKind::Float => f.write_float(value.map(|v| ops::f32_of(texel, v))),
        ChannelKind::Uint | ChannelKind::Sint => value.map(|v| v as u32),
    };
    let base = i * f.bytes_per_texel();
    for (c, v) in stored.iter().enumerate().take(f.channels()) {
        words.write(base + c * f.channel_bytes(), ch, *v as u64);
    }
}

/// The element index a lane's index value names, if it is in bounds.
#[inline(always)]
fn element_index(raw: u64, ty: Scalar, count: usize) -> Option<usize> {
    if ty.is_signed_int() && (raw as i64) < 0 {
        return None;
    }
    let i = raw as usize;
    (i < count).then_some(i)
}

fn atomic_rmw(word: &std::sync::atomic::AtomicU32, op: AtomicOp, ty: Scalar, v: u64) -> u64 {
    let v32 = v as u32;
    let old = match (op, ty) {
        (AtomicOp::Add, Scalar::F32) | (AtomicOp::Sub, Scalar::F32) => {
            let delta = f32::from_bits(v32);
            let delta = if op == AtomicOp::Sub { -delta } else { delta };
            word.fetch_update(Relaxed, Relaxed, |w| Some((f32::from_bits(w) + delta).to_bits())).unwrap_or(0)
        }
        (AtomicOp::Add, _) => word.fetch_add(v32, Relaxed),
        (AtomicOp::Sub, _) => word.fetch_sub(v32, Relaxed),
        (AtomicOp::And, _) => word.fetch_and(v32, Relaxed),
        (AtomicOp::Or, _) => word.fetch_or(v32, Relaxed),
        (AtomicOp::Xor, _) => word.fetch_xor(v32, Relaxed),
        (AtomicOp::Exchange, _) => word.swap(v32, Relaxed),
        (AtomicOp::Min, Scalar::I32) => word
            .fetch_update(Relaxed, Relaxed, |w| Some((w as i32).min(v32 as i32) as u32))
            .unwrap_or(0),
        (AtomicOp::Max, Scalar::I32) => word
            .fetch_update(Relaxed, Relaxed, |w| Some((w as i32).max(v32 as i32) as u32))
            .unwrap_or(0),
        (AtomicOp::Min, _) => word.fetch_min(v32, Relaxed),
        (AtomicOp::Max, _) => word.fetch_max(v32, Relaxed),
    };
    old as u64
}
