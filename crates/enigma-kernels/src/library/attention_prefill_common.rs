//! What both attention prefill kernels (`attention_prefill::prefill` and
//! `attention_prefill_cooperative::prefill_cooperative`) take: their
//! arguments ([`PrefillArgs`]), the head dimensions they are built for
//! ([`HEAD_DIMS`]), and the block of query rows a threadgroup owns with the
//! keys it sees ([`QueryBlock`]).

use super::*;
use enigma_ir::{Access, Type};

/// The head dimensions both prefill kernels are built for.
pub const HEAD_DIMS: [u32; 2] = [64, 128];

crate::kernel_args! {
    /// The arguments of both prefill kernels
    /// ([`prefill`](super::attention_prefill::prefill),
    /// [`prefill_cooperative`](super::attention_prefill_cooperative::prefill_cooperative);
    /// `lse` where the configuration asks for it; `diag` is read by causal
    /// kernels only, `batch_size` by the cooperative kernel's tile copies).
    pub struct PrefillArgs {
        Q q: buffer,
        K k: buffer,
        V v: buffer,
        OUT out: buffer,
        LSE lse: optional,
        S_Q s_q: u32,
        S_KV s_kv: u32,
        HEADS heads: u32,
        GROUP group: u32,
        SCALE_LOG2 scale_log2: f32,
        DIAG diag: u32,
        BATCH_SIZE batch_size: u32,
    }
}

/// Both prefill kernels' parameters, declared in [`PrefillArgs`]' order:
/// `q, k, v, out` of `elem`, the log-sum-exp where asked, the sizes, the
/// scale, and the causal diagonal's offset where the mask is causal.
pub(crate) struct PrefillParams {
    pub q: Mem,
    pub keys: Mem,
    pub values: Mem,
    pub out: Mem,
    pub lse: Option<Mem>,
    pub s_q: Ex,
    pub s_kv: Ex,
    pub heads: Ex,
    pub group: Ex,
    pub scale_log2: Ex,
    pub diag: Option<Ex>,
    /// The batch size, where the kernel describes Q, K and V as whole
    /// matrices (tile copies: their rows are the extents).
    pub batch_size: Option<Ex>,
}

impl PrefillParams {
    pub(crate) fn declare(k: &mut KernelBuilder, elem: Type, lse: bool, causal: bool, batch_size: bool) -> PrefillParams {
        type P = PrefillArgs;
        PrefillParams {
            q: k.buffer(P::Q, elem, Access::Read),
            keys: k.buffer(P::K, elem, Access::Read),
            values: k.buffer(P::V, elem, Access::Read),
            out: k.buffer(P::OUT, elem, Access::ReadWrite),
            lse: lse.then(|| k.buffer(P::LSE, Type::F32, Access::ReadWrite)),
            s_q: k.value(P::S_Q, Type::U32),
            s_kv: k.value(P::S_KV, Type::U32),
            heads: k.value(P::HEADS, Type::U32),
            group: k.value(P::GROUP, Type::U32),
            scale_log2: k.value(P::SCALE_LOG2, Type::F32),
            diag: causal.then(|| k.value(P::DIAG, Type::U32)),
            batch_size: batch_size.then(|| k.value(P::BATCH_SIZE, Type::U32)),
        }
    }
}

/// Query heads and how many share one K/V head.
pub(crate) struct Heads {
    pub heads: Ex,
    pub group: Ex,
}

/// The block of query rows this threadgroup owns and the keys it sees,
/// as both prefill kernels take them from the grid: `(ceil(S_q /
/// block_q), H, B)`, the last query block first.
pub(crate) struct QueryBlock {
    /// The block's first query row.
    pub q0: Ex,
    pub head: Ex,
    pub batch: Ex,
    /// The head's first row of `Q` (and of `out`) as a matrix of `d`
    /// columns, and the element it starts at.
    pub q_row: Ex,
    pub q_base: Ex,
    /// Its K/V head's first row of K and V, and the element it starts at.
    pub kv_row: Ex,
    pub kv_base: Ex,
    /// K/V blocks of `block_kv` keys up to the last key the block sees:
    /// all, or (causal, `diag` the diagonal's offset) its last row's
    /// diagonal.
    pub blocks: Ex,
}

impl QueryBlock {
    pub(crate) fn new(k: &mut KernelBuilder, Heads { heads, group }: Heads, (s_q, s_kv, d): (Ex, Ex, Ex), diag: Option<Ex>, (block_q, block_kv): (u32, u32)) -> QueryBlock {
        let tg = threadgroup_position_in_grid();
        let q_block = k.let_("q_block", threadgroups_per_grid().x() - 1u32 - tg.x());
        let q0 = k.let_("q0", q_block * block_q);
        let head = k.let_("head", tg.y());
        let batch = k.let_("batch", tg.z());
        let kv_heads = k.let_("kv_heads", heads / group);
        let q_row = k.let_("q_first_row", (batch * heads + head) * s_q);
        let q_base = k.let_("q_base", q_row * d);
        let kv_row = k.let_("kv_first_row", (batch * kv_heads + head / group) * s_kv);
        let kv_base = k.let_("kv_base", kv_row * d);
        let kv_end = match diag {
            None => s_kv,
            Some(diag) => {
                let reach = k.let_("reach", q0 + block_q + diag);
                k.let_("kv_end", min(s_kv, select(Ex::from(0u32), reach - s_q, reach.gt(s_q))))
            }
        };
        let blocks = k.let_("blocks", (kv_end + (block_kv - 1)) / block_kv);
        QueryBlock { q0, head, batch, q_row, q_base, kv_row, kv_base, blocks }
    }
}
