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
//! **Fused, on SIMD-group matrices** ([`fused_matrices`], the default for
//! f16 and bf16 where the device has them): the same grid, states, splits
//! and merge, with all query heads of a K/V head in one threadgroup as the
//! columns of a `Qᵀ` tile and each SIMD group's blocks of keys scored and
//! summed as tile products (`Sᵀ = K·Qᵀ`, `Vᵀ·Pᵀ`).
//!
//! `D` is fixed when the kernel is built (register slots per lane: `chunks
//! = ceil(D / vec / 32)` for the scores, [`fused_chunks`] for the fused
//! kernel, like a kernel templated on the head dimension); the vector forms
//! need `D % 4 == 0`, the 16-byte words `D % 8 == 0`.

mod args;
mod combine;
mod fused;
mod matrices;
mod plan;
mod reference;
mod select;
mod shape;
mod three_dispatch;
pub use args::*;
pub use combine::*;
pub use fused::*;
pub use matrices::*;
pub use plan::*;
pub use reference::*;
pub use select::{select, DecodeProblem};
pub use shape::*;
pub use three_dispatch::*;

#[cfg(test)]
mod tests;
