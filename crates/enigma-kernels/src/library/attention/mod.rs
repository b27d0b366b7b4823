//! Attention decode (one query token per sequence): `out[r] =
//! softmax(q[r]·K[r]ᵀ · scale) · V[r]` for each query row `r` of a batch
//! ([`DecodeShape`]): `batch` sequences of `q_heads` query heads over
//! `kv_heads` K/V heads (grouped-query attention when fewer), `S` keys of
//! head dimension `D`; `q` is `[batch, q_heads, D]`, `K` and `V` are
//! `[batch, kv_heads, S, D]`, all of one element type; `scale` is by value
//! (usually `1/√D`); scores and weights are f32; `out` is `[batch, q_heads,
//! D]` in the element type.
//!
//! **Three dispatches, seed 000's geometry** (H = 32, S = 2048, D = 128:
//! scores `(8, 32)`, softmax `(32, 1)`, weighted sum `(4, 32)` threadgroups
//! of 256):
//! 1. [`scores`], grid `(ceil(S/256), H)`: each threadgroup scores 256 keys
//!    of one head; each SIMD group takes 32 of them, one key at a time: the
//!    32 lanes read the key's `D` elements together (one `float4` each when
//!    D = 128 — 512 contiguous bytes), multiply by the `q` they keep in
//!    registers and `simd_sum`; lane `j` keeps key `j`'s score and the SIMD
//!    group stores its 32 scores in one coalesced store.
//! 2. [`super::softmax::softmax`] over the `[H, S]` scores, grid `(H, 1)`,
//!    in place.
//! 3. [`weighted_sum`], grid `(ceil(D/32), H)`: each threadgroup owns 32
//!    output dimensions of one head; lane `l` owns dimension `l`, the SIMD
//!    groups split the keys, and the partial sums meet in threadgroup
//!    memory (one barrier).
//!
//! The three dispatches take one K/V head per query head and whole
//! sequences (`H` = `batch · q_heads` rows).
//!
//! **Fused** ([`fused`], grid `(splits, q_heads / heads, batch)`, a
//! threadgroup per block of query heads that read one K/V head): lanes own
//! keys. Each SIMD group splits into key groups of a few lanes; a key group
//! scores its own keys, each lane multiplying its slots of the key with the
//! query slots it keeps in registers, the dot product finishing with a few
//! shuffles. Every lane keeps, per query head, a running maximum, a
//! rescaled sum and its slots of a rescaled `V` accumulator (online
//! softmax), so scores never reach memory; the key groups merge by
//! shuffles, the SIMD groups in threadgroup memory after one barrier. `K`
//! and `V` arrive in registers (with the next step's loads issued early) or
//! staged several steps ahead by asynchronous copies into each lane's own
//! part of threadgroup memory; f16 and bf16 rows are read as 16-byte words.
//! It optionally reads per-sequence lengths (a ragged batch in a cache of
//! `S` keys per sequence) and writes the log-sum-exp of each row. Long
//! sequences split their keys over threadgroups ([`splits_for`]: from the
//! sequence length and the GPU's multiprocessor count); the last
//! threadgroup of each head block merges the splits ([`FusedConfig::merge`],
//! where the device has device-scope fences), or [`combine`] does.
//! [`select`] chooses all of it for a problem, a device and the caller's
//! overrides.
//!
//! `D` is fixed when the kernel is built (register slots per lane: `chunks
//! = ceil(D / vec / 32)` for the scores, [`fused_chunks`] for the fused
//! kernel, like a kernel templated on the head dimension); the vector forms
//! need `D % 4 == 0`, the 16-byte words `D % 8 == 0`.


use super::*;
use enigma_ir::{Access, Kernel, MemFlags, Scalar, Type};

mod args;
mod combine;
mod fused;
mod plan;
mod select;
mod three_dispatch;
pub use args::*;
pub use combine::*;
pub use fused::*;
pub use plan::*;
pub use select::{select, DecodeProblem};
pub use three_dispatch::*;

/// Register slots per lane for a head dimension `d` at vector width `vec`.
pub fn chunks_for(d: u32, vec: u8) -> u32 {
    (d / vec as u32).div_ceil(SIMD_WIDTH).max(1)
}

/// The shape of a decode step: `batch` sequences, each with `q_heads` query
/// heads over `kv_heads` K/V heads (`q_heads` a multiple of `kv_heads`;
/// query head `h` reads K/V head `h / (q_heads / kv_heads)`), a cache of
/// `s_len` keys per sequence (the stride of `K` and `V`; a ragged batch uses
/// its first `seq_lens[b]` keys) and head dimension `d`. `q` and `out` are
/// `[batch, q_heads, d]`, `K` and `V` `[batch, kv_heads, s_len, d]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodeShape {
    pub batch: u32,
    pub q_heads: u32,
    pub kv_heads: u32,
    pub s_len: u32,
    pub d: u32,
}

impl DecodeShape {
    /// One sequence of `heads` heads, one K/V head per query head.
    pub fn heads(heads: u32, s_len: u32, d: u32) -> DecodeShape {
        DecodeShape { batch: 1, q_heads: heads, kv_heads: heads, s_len, d }
    }

    /// Query heads per K/V head.
    pub fn group(&self) -> u32 {
        self.q_heads / self.kv_heads
    }

    /// Query rows of the whole batch (`batch · q_heads`).
    pub fn rows(&self) -> u32 {
        self.batch * self.q_heads
    }
}

/// The f64 reference of a batch: `out` (`[batch, q_heads, d]`) and the
/// natural log-sum-exp of each row's scaled scores (`-inf` for an empty
/// sequence, whose output is zeros); sequence `b` uses its first
/// `seq_lens[b]` keys (all `s_len` when `None`).
pub fn reference_batch(q: &[f32], k: &[f32], v: &[f32], shape: &DecodeShape, seq_lens: Option<&[u32]>, scale: f32) -> (Vec<f64>, Vec<f64>) {
    let (hq, hkv, s_len, d) = (shape.q_heads as usize, shape.kv_heads as usize, shape.s_len as usize, shape.d as usize);
    let group = hq / hkv;
    let rows = shape.batch as usize * hq;
    let mut out = vec![0.0; rows * d];
    let mut lse = vec![f64::NEG_INFINITY; rows];
    for r in 0..rows {
        let (b, h) = (r / hq, r % hq);
        let len = seq_lens.map_or(s_len, |l| (l[b] as usize).min(s_len));
        let seq = b * hkv + h / group;
        let qh = &q[r * d..(r + 1) * d];
        let scores: Vec<f64> = (0..len)
            .map(|s| {
                let kr = &k[(seq * s_len + s) * d..(seq * s_len + s + 1) * d];
                qh.iter().zip(kr).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * scale as f64
            })
            .collect();
        if scores.is_empty() {
            continue;
        }
        let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
        let total: f64 = e.iter().sum();
        lse[r] = m + total.ln();
        for (s, &p) in e.iter().enumerate() {
            let vr = &v[(seq * s_len + s) * d..(seq * s_len + s + 1) * d];
            for (o, &vv) in out[r * d..(r + 1) * d].iter_mut().zip(vr) {
                *o += p / total * vv as f64;
            }
        }
    }
    (out, lse)
}

/// The f64 reference of one sequence with one K/V head per query head:
/// `out[h, :]` for every head.
pub fn reference(q: &[f32], k: &[f32], v: &[f32], heads: usize, s_len: usize, d: usize, scale: f32) -> Vec<f64> {
    let shape = DecodeShape::heads(heads as u32, s_len as u32, d as u32);
    reference_batch(q, k, v, &shape, None, scale).0
}

#[cfg(test)]
mod tests;
