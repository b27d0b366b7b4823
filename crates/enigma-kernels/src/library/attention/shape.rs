//! The shape of a decode step ([`DecodeShape`]) and the register slots a
//! lane takes for a head dimension ([`chunks_for`]).

use crate::library::SIMD_WIDTH;

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
