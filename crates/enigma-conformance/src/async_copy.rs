//! Asynchronous copies (`async_copy`, `async_commit`, `async_wait`): a
//! two-stage pipeline in threadgroup memory that refills one stage while the
//! threads read the other, with copies of 16, 8 and 4 bytes and zero-filled
//! copies past the end of the input. Integer data and small f16 integers, so
//! exact on every backend.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, MemFlags, Scalar, Type};
use enigma_runtime::{Arg, Runtime};
use rand::Rng;

/// Threads per threadgroup, and vectors per stage.
const T: u32 = 64;
/// Chunks of `T` vectors each threadgroup streams through its two stages.
const CHUNKS: u32 = 5;
/// Outputs per thread and chunk.
const OUTS: u32 = 3;

/// Each threadgroup streams `CHUNKS` chunks of `T` elements of three inputs
/// (u32x4 vectors: 16-byte copies; f16 quadruples: 8 bytes; u32: 4 bytes)
/// through two stages: the copies of chunk `c + 1` are in flight while the
/// threads read chunk `c` (`async_wait(1)`, then a barrier). Element `i` of
/// a chunk past `n` is copied as zeros (`valid` false). Thread `lid` writes
/// the component sum of vector `(5·lid + 3) mod T`, the sum of quadruple
/// `(lid + 7) mod T` and scalar `(lid + 1) mod T` of each chunk.
pub fn async_copy_pipeline(rt: &Runtime) -> CaseResult {
    seeded("async_copy_pipeline", |rng| {
        let mut k = KernelBuilder::new("async_pipeline");
        let vecs = k.buffer("vecs", Type::vector(Scalar::U32, 4), Access::Read);
        let halves = k.buffer("halves", Type::F16, Access::Read);
        let words = k.buffer("words", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let n = k.value("n", Type::U32);
        let tv = k.threadgroup_array("tv", Type::vector(Scalar::U32, 4), 2 * T);
        let th = k.threadgroup_array("th", Type::F16, 2 * 4 * T);
        let tw = k.threadgroup_array("tw", Type::U32, 2 * T);
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let first = k.let_("first", threadgroup_position_in_grid().x() * CHUNKS);
        let issue = |k: &mut KernelBuilder, tag: &str, chunk: Ex| {
            let stage = k.let_(&format!("{tag}stage"), chunk % 2u32);
            let i = k.let_(&format!("{tag}i"), chunk * T + lid);
            let valid = k.let_(&format!("{tag}valid"), i.lt(n));
            k.async_copy(tv.at(stage * T + lid), vecs.at(i), 1, valid);
            k.async_copy(th.at((stage * T + lid) * 4u32), halves.at(i * 4u32), 4, valid);
            k.async_copy(tw.at(stage * T + lid), words.at(i), 1, valid);
        };
        issue(&mut k, "first_", first);
        k.async_commit();
        k.for_range("c", 0u32, CHUNKS, 1u32, |k, c| {
            k.if_((c + 1u32).lt(CHUNKS), |k| issue(k, "next_", first + c + 1u32));
            k.async_commit();
            k.async_wait(1);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            let stage = k.let_("cur", (first + c) % 2u32 * T);
            let v = k.let_("v", tv.get(stage + (lid * 5u32 + 3u32) % T));
            let q = (stage + (lid + 7u32) % T) * 4u32;
            let h = k.let_("h", th.get(q) + th.get(q + 1u32) + th.get(q + 2u32) + th.get(q + 3u32));
            let at = k.let_("at", ((first + c) * T + lid) * OUTS);
            k.store(out.at(at), v.x() + v.y() + v.z() + v.w());
            k.store(out.at(at + 1u32), h.cast(Scalar::U32));
            k.store(out.at(at + 2u32), tw.get(stage + (lid + 1u32) % T));
            // The stage just read is refilled in the next iteration.
            k.threadgroup_barrier(MemFlags::Threadgroup);
        });
        let kernel = finish(k)?;
        let pl = pipeline(rt, &kernel)?;
        let groups = 3u32;
        let total = (groups * CHUNKS * T) as usize;
        // The last threadgroup's last chunks lie past n: zero-filled.
        let n = total - T as usize - 19;
        let vs: Vec<u32> = (0..n * 4).map(|_| rng.gen_range(0..1 << 28)).collect();
        let hs: Vec<f32> = (0..n * 4).map(|_| rng.gen_range(0..64) as f32).collect();
        let ws: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let bytes = |words: Vec<u8>, ty: Type| rt.buffer_from_bytes(ty, &words).ctx("allocating a buffer");
        let vb = bytes(vs.iter().flat_map(|v| v.to_le_bytes()).collect(), Type::vector(Scalar::U32, 4))?;
        let hb = bytes(hs.iter().flat_map(|&x| f32_to_f16(x).to_le_bytes()).collect(), Type::F16)?;
        let wb = upload(rt, &ws)?;
        let ob = filled(rt, total * OUTS as usize, 0xDEAD_BEEFu32)?;
        let args = [Arg::from(&vb), Arg::from(&hb), Arg::from(&wb), Arg::from(&ob), Arg::u32(n as u32)];
        crate::util::groups(rt, &pl, &args, [groups, 1, 1], [T, 1, 1])?;
        let mut want = Vec::with_capacity(total * OUTS as usize);
        for chunk in 0..(groups * CHUNKS) as usize {
            for lid in 0..T as usize {
                let at = |j: usize| chunk * T as usize + j % T as usize;
                let v = at(lid * 5 + 3);
                let q = at(lid + 7);
                let w = at(lid + 1);
                want.push(if v < n { (0..4).fold(0u32, |s, c| s.wrapping_add(vs[v * 4 + c])) } else { 0 });
                want.push(if q < n { (0..4).map(|c| hs[q * 4 + c]).sum::<f32>() as u32 } else { 0 });
                want.push(if w < n { ws[w] } else { 0 });
            }
        }
        let names = ["sum of a 16-byte vector", "sum of an 8-byte quadruple of halves", "a 4-byte word"];
        check_eq(&format!("{groups} threadgroups of {T}, n = {n}"), &download::<u32>(&ob)?, &want, |i| {
            let (thread, what) = (i / OUTS as usize, i % OUTS as usize);
            format!("chunk {}, thread {}: {}", thread / T as usize, thread % T as usize, names[what])
        })
    })
}
