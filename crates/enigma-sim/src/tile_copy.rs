//! Tile copies in the simulator (`tile_copy`, `tile_wait`): both are
//! collectives of the threadgroup, run once when every SIMD group has
//! reached them, with their operands read from the first active lane
//! (validation makes them uniform).
//!
//! The copy writes its box at once; what a GPU may do later is covered by
//! the rules the simulator checks. Errors (a GPU would hang or read the
//! wrong data): a wait with no copy in flight, a copy on a barrier waited on since
//! the last threadgroup barrier (a fast thread's next copy could complete
//! the barrier's phase twice before a slow thread's wait), a copy never
//! waited for before the threadgroup ends, a misaligned
//! destination, pitch or first column, a box past its array or starting
//! outside its matrix, and a source matrix that is empty, has overlapping rows or does
//! not lie inside its buffer. Under the sanitizer, an access to the destination between
//! the last barrier and the copy races with it, and one between the copy
//! and the wait is an access to a copy in flight.

use crate::cooperative::Ctx;
use crate::ops;
use crate::program::{MemRef, Reg, TileCopyRegs};
use crate::sanitizer::{AccessKind, Who};
use crate::state::{memory, Fault, SimdGroup};
use enigma_ir::limits::{TILE_BARRIERS, TILE_DST_ALIGN, TILE_ROW_ALIGN};
use enigma_ir::Scalar;

/// The state of a threadgroup's tile barriers.
#[derive(Debug, Default)]
pub struct TileBarriers {
    /// Per barrier: the copies in flight on it (each's destination array,
    /// elements and where it was issued).
    in_flight: [Vec<(u32, std::ops::Range<usize>, Who)>; TILE_BARRIERS as usize],
    /// Per barrier: the count of threadgroup barriers passed at its last wait.
    waited_at: [Option<u64>; TILE_BARRIERS as usize],
    /// Threadgroup barriers passed.
    barriers: u64,
}

impl TileBarriers {
    /// A fresh threadgroup.
    pub fn reset(&mut self) {
        *self = TileBarriers::default();
    }

    /// The threadgroup passed a threadgroup barrier.
    pub fn barrier(&mut self) {
        self.barriers += 1;
    }

    /// A copy still in flight (its barrier and where it was issued) when
    /// the threadgroup ends: never waited for, it could still be writing
    /// threadgroup memory that a GPU has given to another threadgroup.
    pub fn unwaited(&self) -> Option<(usize, Who)> {
        self.in_flight.iter().enumerate().find_map(|(b, copies)| copies.first().map(|(_, _, issuer)| (b, *issuer)))
    }
}

/// A uniform operand's value (the first active lane's).
fn value(sgs: &[SimdGroup], reg: Reg) -> u64 {
    let sg = &sgs[0];
    let lane = sg.active.trailing_zeros().min(31) as usize;
    sg.regs[reg as usize][lane]
}

fn fault(pc: u32, message: String) -> (usize, Fault) {
    (0, Fault { pc, lane: 0, message, stop: None })
}

/// The barrier operand, checked against [`TILE_BARRIERS`].
fn barrier_of(sgs: &[SimdGroup], reg: Reg, pc: u32, op: &str) -> Result<usize, (usize, Fault)> {
    let b = value(sgs, reg) as u32;
    if b >= TILE_BARRIERS {
        return Err(fault(pc, format!("{op} on barrier {b}; a kernel has tile barriers 0 to {}", TILE_BARRIERS - 1)));
    }
    Ok(b as usize)
}

/// `tile_copy`: checks the rules, then copies the box.
pub fn copy(ctx: &mut Ctx<'_, '_, '_>, sgs: &[SimdGroup], c: &TileCopyRegs) -> Result<(), (usize, Fault)> {
    let pc = ctx.pc;
    let b = barrier_of(sgs, c.barrier, pc, "tile_copy")?;
    let tiles = ctx.tiles.as_deref_mut().expect("a threadgroup collective has the threadgroup's tile barriers");
    if tiles.waited_at[b] == Some(tiles.barriers) {
        return Err(fault(
            pc,
            format!("tile_copy on barrier {b} with no threadgroup_barrier since the tile_wait on it: a thread still waiting for the previous copy could miss its completion"),
        ));
    }
    let size = c.elem.size_bytes() as u64;
    let [dst_index, rows, cols, pitch] = [c.dst_index, c.extents[0], c.extents[1], c.pitch].map(|r| value(sgs, r) as u32 as u64);
    let [row0, col0] = c.origin.map(|r| value(sgs, r) as u32 as i32 as i64);
    let (dst_words, dst_len) = memory(ctx.env, ctx.tg_mem, c.dst);
    let dst_count = dst_len as u64 / size;
    let name = |mem: MemRef| ctx.env.program.memory_names.get(&mem).cloned().unwrap_or_default();
    if !(dst_index * size).is_multiple_of(u64::from(TILE_DST_ALIGN)) {
        return Err(fault(pc, format!("tile_copy into `{}` at element {dst_index}: the destination must start at a multiple of {TILE_DST_ALIGN} bytes", name(c.dst))));
    }
    if !(pitch * size).is_multiple_of(u64::from(TILE_ROW_ALIGN)) {
        return Err(fault(pc, format!("tile_copy from `{}` with a pitch of {pitch} elements: the pitch must be a multiple of {TILE_ROW_ALIGN} bytes", name(c.src))));
    }
    let box_len = u64::from(c.rows) * u64::from(c.cols);
    if dst_index + box_len > dst_count {
        return Err(fault(pc, format!("tile_copy of {} × {} elements into `{}` at element {dst_index} ends past its {dst_count} elements", c.rows, c.cols, name(c.dst))));
    }
    let (src_words, src_len) = memory(ctx.env, ctx.tg_mem, c.src);
    let src_count = src_len as u64 / size;
    if rows == 0 || cols == 0 || (rows > 1 && cols > pitch) || (rows - 1) * pitch + cols > src_count {
        return Err(fault(
            pc,
            format!("tile_copy from `{}`: the {rows} × {cols} matrix with a pitch of {pitch} elements must have elements, rows that do not overlap, and lie inside the buffer's {src_count} elements", name(c.src)),
        ));
    }
    if !(0..rows as i64).contains(&row0) || !(0..cols as i64).contains(&col0) {
        return Err(fault(pc, format!("tile_copy from `{}`: the box starts at row {row0}, column {col0}, outside the {rows} × {cols} matrix; a box starts inside its matrix", name(c.src))));
    }
    if !(col0 as u64 * size).is_multiple_of(u64::from(TILE_ROW_ALIGN)) {
        return Err(fault(
            pc,
            format!(
                "tile_copy from `{}`: the box starts at column {col0}, {} bytes into its row; the copy engine reads a box from a multiple of {TILE_ROW_ALIGN} bytes",
                name(c.src),
                col0 as u64 * size
            ),
        ));
    }
    let issuer = Who { simdgroup: 0, lane: sgs[0].active.trailing_zeros().min(31), pc };
    for r in 0..u64::from(c.rows) {
        for col in 0..u64::from(c.cols) {
            let (mr, mc) = (row0 + r as i64, col0 + col as i64);
            let inside = (0..rows as i64).contains(&mr) && (0..cols as i64).contains(&mc);
            let bits = if inside {
                let i = mr as u64 * pitch + mc as u64;
                if i >= src_count {
                    return Err(fault(pc, format!("tile_copy reads element {i} of `{}`, past its {src_count} elements (row {mr}, column {mc}, pitch {pitch})", name(c.src))));
                }
                if let Some(t) = ctx.san.as_deref_mut() {
                    sgs[0].checked_index(ctx.env, pc, issuer.lane as usize, c.src, i, Scalar::U64, src_count as usize, "read", &mut Some(t), AccessKind::Read, 0).map_err(|f| (0, f))?;
                }
                ops::norm(c.elem, src_words.read(i as usize * size as usize, c.elem))
            } else {
                0
            };
            let d = dst_index + r * u64::from(c.cols) + col;
            dst_words.write(d as usize * size as usize, c.elem, bits);
        }
    }
    let MemRef::Threadgroup(array) = c.dst else { unreachable!("validated: a tile copy writes threadgroup memory") };
    let range = dst_index as usize..(dst_index + box_len) as usize;
    if let Some(t) = ctx.san.as_deref_mut() {
        t.tile_copy_issued(array, range.clone(), issuer);
    }
    tiles.in_flight[b].push((array, range, issuer));
    Ok(())
}

/// `tile_wait`: the copies in flight on the barrier land for every thread.
pub fn wait(ctx: &mut Ctx<'_, '_, '_>, sgs: &[SimdGroup], barrier: Reg) -> Result<(), (usize, Fault)> {
    let pc = ctx.pc;
    let b = barrier_of(sgs, barrier, pc, "tile_wait")?;
    let tiles = ctx.tiles.as_deref_mut().expect("a threadgroup collective has the threadgroup's tile barriers");
    let copies = std::mem::take(&mut tiles.in_flight[b]);
    if copies.is_empty() {
        return Err(fault(pc, format!("tile_wait on barrier {b} with no tile_copy in flight on it: on a GPU it would wait forever")));
    }
    tiles.waited_at[b] = Some(tiles.barriers);
    if let Some(t) = ctx.san.as_deref_mut() {
        for (array, range, issuer) in copies {
            t.tile_copy_landed(array, range, issuer);
        }
    }
    Ok(())
}
