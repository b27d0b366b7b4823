//! Tile copies (`tile_copy`, `tile_wait`): boxes of two row-major
//! matrices (u32, and f16 small integers) streamed through two stages of
//! threadgroup memory, each stage's box in flight on its own barrier while
//! the threads read the other, with boxes that hang over the matrices' last
//! rows and columns (zeros past the extents) and a pitch wider than the
//! rows. Exact on every backend.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, MemFlags, Type};
use enigma_runtime::{Arg, Runtime};
use rand::Rng;

/// Threads per threadgroup.
const T: u32 = 64;
/// Box of the u32 matrix: rows × columns (64-byte rows).
const BOX_U32: (u32, u32) = (8, 16);
/// Box of the f16 matrix (16-byte rows).
const BOX_F16: (u32, u32) = (8, 8);
/// Boxes each threadgroup streams down its column of boxes.
const CHUNKS: u32 = 3;

/// Threadgroup (x, y) copies boxes at rows `y·CHUNKS·8 + 8c` (c < CHUNKS)
/// and columns `16x` (u32) and `16x + 8` (f16); thread `lid` writes two
/// elements of each u32 box (`(7·lid + 5) mod 128` and `lid`) and one of
/// each f16 box (`(3·lid + 1) mod 64`).
pub fn tile_copy_pipeline(rt: &Runtime) -> CaseResult {
    seeded("tile_copy_pipeline", |rng| {
        let mut k = KernelBuilder::new("tile_pipeline");
        let words = k.buffer("words", Type::U32, Access::Read);
        let halves = k.buffer("halves", Type::F16, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let rows = k.value("rows", Type::U32);
        let cols = k.value("cols", Type::U32);
        let pitch = k.value("pitch", Type::U32);
        let half_pitch = k.value("half_pitch", Type::U32);
        let (bw, bh) = (BOX_U32.0 * BOX_U32.1, BOX_F16.0 * BOX_F16.1);
        let tw = k.threadgroup_array("tw", Type::U32, 2 * bw);
        let th = k.threadgroup_array("th", Type::F16, 2 * bh);
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let tg = threadgroup_position_in_grid();
        let row0 = k.let_("row0", (tg.y() * (CHUNKS * BOX_U32.0)).cast(enigma_ir::Scalar::I32));
        let col_w = k.let_("col_w", (tg.x() * BOX_U32.1).cast(enigma_ir::Scalar::I32));
        let col_h = k.let_("col_h", (tg.x() * BOX_U32.1 + BOX_F16.1).cast(enigma_ir::Scalar::I32));
        let word_matrix = TileSource { mem: words, extents: [rows, cols], pitch };
        let half_matrix = TileSource { mem: halves, extents: [rows, cols], pitch: half_pitch };
        let issue = |k: &mut KernelBuilder, c: Ex| {
            let stage = c % 2u32;
            let row = row0 + (c * BOX_U32.0).cast(enigma_ir::Scalar::I32);
            k.tile_copy(stage, tw.at(stage * bw), word_matrix, [row, col_w], BOX_U32);
            k.tile_copy(stage + 2u32, th.at(stage * bh), half_matrix, [row, col_h], BOX_F16);
        };
        issue(&mut k, Ex::from(0u32));
        k.for_range("c", 0u32, CHUNKS, 1u32, |k, c| {
            k.if_((c + 1u32).lt(CHUNKS), |k| issue(k, c + 1u32));
            let stage = k.let_("stage", c % 2u32);
            k.tile_wait(stage);
            k.tile_wait(stage + 2u32);
            let chunk = k.let_("chunk", (tg.y() * CHUNKS + c) * threadgroups_per_grid().x() + tg.x());
            let at = k.let_("at", (chunk * T + lid) * 3u32);
            k.store(out.at(at), tw.get(stage * bw + (lid * 7u32 + 5u32) % bw));
            k.store(out.at(at + 1u32), tw.get(stage * bw + lid));
            k.store(out.at(at + 2u32), th.get(stage * bh + (lid * 3u32 + 1u32) % bh).cast(enigma_ir::Scalar::U32));
            // The stages just read are refilled in the next iteration.
            k.threadgroup_barrier(MemFlags::Threadgroup);
        });
        let kernel = finish(k)?;
        let pl = pipeline(rt, &kernel)?;
        // Every box starts inside the matrices; the last ones hang over.
        let (nrows, ncols, npitch, nhpitch) = (41usize, 45usize, 52usize, 48usize);
        let ws: Vec<u32> = (0..nrows * npitch).map(|_| rng.gen()).collect();
        let hs: Vec<u16> = (0..nrows * nhpitch).map(|_| f32_to_f16(rng.gen_range(0..2048) as f32)).collect();
        let (gx, gy) = (ncols.div_ceil(BOX_U32.1 as usize) as u32, nrows.div_ceil((CHUNKS * BOX_U32.0) as usize) as u32);
        let total = (gx * gy * CHUNKS * T * 3) as usize;
        let wb = upload(rt, &ws)?;
        let hb = upload_f16(rt, &hs)?;
        let ob = filled(rt, total, 0xDEAD_BEEFu32)?;
        let args = [Arg::from(&wb), Arg::from(&hb), Arg::from(&ob), Arg::u32(nrows as u32), Arg::u32(ncols as u32), Arg::u32(npitch as u32), Arg::u32(nhpitch as u32)];
        crate::util::groups(rt, &pl, &args, [gx, gy, 1], [T, 1, 1])?;
        let element = |r: i64, c: i64, pitch: usize, get: &dyn Fn(usize) -> u32| {
            if (0..nrows as i64).contains(&r) && (0..ncols as i64).contains(&c) { get(r as usize * pitch + c as usize) } else { 0 }
        };
        let mut want = vec![0u32; total];
        for y in 0..gy as i64 {
            for x in 0..gx as i64 {
                for c in 0..CHUNKS as i64 {
                    let row = y * (CHUNKS * BOX_U32.0) as i64 + c * BOX_U32.0 as i64;
                    let chunk = ((y * CHUNKS as i64 + c) * gx as i64 + x) as usize;
                    for lid in 0..T as usize {
                        let at = (chunk * T as usize + lid) * 3;
                        let word = |e: usize| element(row + (e / 16) as i64, x * 16 + (e % 16) as i64, npitch, &|i| ws[i]);
                        let half = |e: usize| element(row + (e / 8) as i64, x * 16 + 8 + (e % 8) as i64, nhpitch, &|i| f16_to_f32(hs[i]) as u32);
                        want[at] = word((lid * 7 + 5) % 128);
                        want[at + 1] = word(lid);
                        want[at + 2] = half((lid * 3 + 1) % 64);
                    }
                }
            }
        }
        let names = ["a u32 box element", "another u32 box element", "an f16 box element"];
        check_eq(&format!("{gx} × {gy} threadgroups, a {nrows} × {ncols} matrix"), &download::<u32>(&ob)?, &want, |i| {
            let (thread, what) = (i / 3, i % 3);
            format!("box {}, thread {}: {}", thread / T as usize, thread % T as usize, names[what])
        })
    })
}
