//! The arguments of the attention decode kernels
//! ([`crate::kernel_args!`]): the three-dispatch form's scores and
//! weighted sum, the fused kernel and the combine of its splits.

crate::kernel_args! {
    /// The arguments of [`scores`](super::scores) (`q4`, `k4` the vector
    /// views of `q`, `k`).
    pub struct ScoresArgs {
        Q q: buffer,
        Q4 q4: buffer,
        K k: buffer,
        K4 k4: buffer,
        SCORES scores: buffer,
        S_LEN s_len: u32,
        D d: u32,
        SCALE scale: f32,
    }
}

crate::kernel_args! {
    /// The arguments of [`weighted_sum`](super::weighted_sum).
    pub struct WeightedSumArgs {
        W w: buffer,
        V v: buffer,
        OUT out: buffer,
        S_LEN s_len: u32,
        D d: u32,
    }
}

crate::kernel_args! {
    /// The arguments of [`fused`](super::fused): Q, K and V (viewed as `q4`, `k4`, `v4`
    /// by the vector kernels, as the 16-byte words `q8`, `k8`, `v8` by the
    /// wide ones); `out` (and `lse`) unsplit, `partial_ml`, `partial_acc`
    /// and `split_len` split (with `out`, `lse` and `tickets` where the
    /// kernel merges its splits); `seq_lens` for ragged batches.
    pub struct FusedDecodeArgs {
        Q q: buffer,
        Q4 q4: buffer,
        Q8 q8: buffer,
        K k: buffer,
        K4 k4: buffer,
        K8 k8: buffer,
        V v: buffer,
        V4 v4: buffer,
        V8 v8: buffer,
        OUT out: optional,
        LSE lse: optional,
        PARTIAL_ML partial_ml: optional,
        PARTIAL_ACC partial_acc: optional,
        SEQ_LENS seq_lens: optional,
        TICKETS tickets: optional,
        S_LEN s_len: u32,
        D d: u32,
        SCALE scale: f32,
        GROUP group: u32,
        SPLIT_LEN split_len: u32,
    }
}

crate::kernel_args! {
    /// The arguments of [`combine`](super::combine) (`lse` with the log-sum-exp only).
    pub struct CombineArgs {
        PARTIAL_ML partial_ml: buffer,
        PARTIAL_ACC partial_acc: buffer,
        OUT out: buffer,
        LSE lse: optional,
        D d: u32,
        SPLITS splits: u32,
    }
}
