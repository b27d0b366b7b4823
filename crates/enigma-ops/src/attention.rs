//! Attention decode: three dispatches (scores, softmax, weighted sum) or
//! one fused kernel over a batch with grouped K/V heads, its keys
//! optionally split over threadgroups (then combined).

use crate::{DType, Error, KernelType, Ops};
use enigma_ir::Scalar;
use enigma_kernels::library::attention::{self, CombineArgs, DecodeShape, FusedDecodeArgs, ScoresArgs, WeightedSumArgs};
use enigma_runtime::Buffer;

/// The fused decode's results: `out` (`[batch, q_heads, d]` in the input's
/// type) and, when asked for, `lse` (`[batch, q_heads]` f32: the natural
/// log-sum-exp of each row's scaled scores, `-inf` for an empty sequence).
#[derive(Debug)]
pub struct DecodeOutput {
    pub out: Buffer,
    pub lse: Option<Buffer>,
}

impl Ops<'_> {
    /// Checks the buffers of a decode of `shape`; their element type and
    /// the load width they allow (4 or 1).
    fn attention_inputs(&self, q: &Buffer, k: &Buffer, v: &Buffer, shape: &DecodeShape) -> Result<(DType, u8), Error> {
        let op = "attention_decode";
        let dtype = self.dtype_of(op, q)?;
        let (b, hq, hkv, s, d) = (shape.batch as usize, shape.q_heads as usize, shape.kv_heads as usize, shape.s_len as usize, shape.d as usize);
        self.need(op, "q", q, b.saturating_mul(hq).saturating_mul(d), dtype.scalar())?;
        let cache = b.saturating_mul(hkv).saturating_mul(s).saturating_mul(d);
        self.need(op, "k", k, cache, dtype.scalar())?;
        self.need(op, "v", v, cache, dtype.scalar())?;
        let vec = self.vectorize(op, &[q, k, v], dtype.ty(4), d.is_multiple_of(4))?;
        Ok((dtype, vec))
    }

    /// Attention decode in seed 000's three dispatches (scores, softmax,
    /// weighted sum): `out` is `[heads, d]` in the input's type.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32) -> Result<Buffer, Error> {
        let shape = decode_shape(1, heads, heads, s_len, d)?;
        let (dtype, vec) = self.attention_inputs(q, k, v, &shape)?;
        let plan = attention::plan(dtype, &shape, vec, self.threads(KernelType::Attention))?;
        plan.check_three_dispatch()?;
        let scores = self.output(Scalar::F32, heads * s_len)?;
        let out = self.output(plan.dtype.scalar(), heads * d)?;
        let (s_len, d) = (shape.s_len, shape.d);
        let args = ScoresArgs { q, q4: q, k, k4: k, scores: &scores, s_len, d, scale };
        self.launch(format!("attention_scores {:?}", (plan.dtype, plan.vec, plan.chunks)), || plan.scores_kernel(), plan.scores, &args)?;
        self.softmax_into(&plan.softmax, &scores, &scores)?;
        let args = WeightedSumArgs { w: &scores, v, out: &out, s_len, d };
        self.launch(format!("attention_weighted_sum {:?}", plan.dtype), || plan.weighted_sum_kernel(), plan.weighted_sum, &args)?;
        Ok(out)
    }

    /// Attention decode of one sequence with one K/V head per query head,
    /// fused ([`Ops::attention_decode_batch`]).
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode_fused(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32) -> Result<Buffer, Error> {
        let shape = decode_shape(1, heads, heads, s_len, d)?;
        Ok(self.attention_decode_batch(q, k, v, &shape, None, scale, false)?.out)
    }

    /// Attention decode of a batch in one fused kernel as
    /// [`attention::select`] plans it for the device and the options
    /// ([`crate::AttentionOptions`]): its keys split over threadgroups
    /// where the sequences are long for the GPU, the splits merged by the
    /// kernel's last threadgroup of each head block or by
    /// [`attention::combine`]:
    /// `q` is `[batch, q_heads, d]`, `k` and `v` `[batch, kv_heads, s_len,
    /// d]` (query head `h` reads K/V head `h / (q_heads / kv_heads)`);
    /// `seq_lens` (u32 `[batch]`, clamped to `s_len`) gives each
    /// sequence's key count, else every sequence has `s_len`; `with_lse`
    /// also returns each row's log-sum-exp.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode_batch(
        &self,
        q: &Buffer,
        k: &Buffer,
        v: &Buffer,
        shape: &DecodeShape,
        seq_lens: Option<&Buffer>,
        scale: f32,
        with_lse: bool,
    ) -> Result<DecodeOutput, Error> {
        let (dtype, vec) = self.attention_inputs(q, k, v, shape)?;
        let whole_words = [q, k, v].iter().all(|b| b.len_bytes().is_multiple_of(16));
        let problem = attention::DecodeProblem { dtype, shape: *shape, vec, whole_words, ragged: seq_lens.is_some(), lse: with_lse };
        let plan = attention::select(&problem, self.rt.device(), &self.options.overrides(), self.threads(KernelType::Attention))?;
        if let Some(lens) = seq_lens {
            self.need("attention_decode", "seq_lens", lens, shape.batch as usize, Scalar::U32)?;
        }
        let rows = shape.rows() as usize;
        let d = shape.d as usize;
        let out = self.output(plan.dtype.scalar(), rows * d)?;
        let lse = if with_lse { Some(self.output(Scalar::F32, rows)?) } else { None };
        let key = format!("attention_fused {:?}", plan.fused_config());
        let args = FusedDecodeArgs {
            q,
            q4: q,
            q8: q,
            k,
            k4: k,
            k8: k,
            v,
            v4: v,
            v8: v,
            out: Some(&out),
            lse: lse.as_ref(),
            partial_ml: None,
            partial_acc: None,
            seq_lens,
            tickets: None,
            s_len: shape.s_len,
            d: shape.d,
            scale,
            group: shape.group(),
            split_len: plan.split_len,
        };
        if plan.splits == 1 {
            self.launch(key, || plan.fused_kernel(), plan.fused, &args)?;
            return Ok(DecodeOutput { out, lse });
        }
        let parts = rows * plan.splits as usize;
        let partial_ml = self.output(Scalar::F32, parts * 2)?;
        let partial_acc = self.output(Scalar::F32, parts * d)?;
        if plan.fused_config().merge {
            let merged = FusedDecodeArgs { partial_ml: Some(&partial_ml), partial_acc: Some(&partial_acc), ..args };
            self.with_tickets(plan.head_blocks() as usize, |tickets| self.launch(key, || plan.fused_kernel(), plan.fused, &FusedDecodeArgs { tickets: Some(tickets), ..merged }))?;
            return Ok(DecodeOutput { out, lse });
        }
        let split = FusedDecodeArgs { out: None, lse: None, partial_ml: Some(&partial_ml), partial_acc: Some(&partial_acc), ..args };
        self.launch(key, || plan.fused_kernel(), plan.fused, &split)?;
        let args = CombineArgs { partial_ml: &partial_ml, partial_acc: &partial_acc, out: &out, lse: lse.as_ref(), d: shape.d, splits: plan.splits };
        self.launch(format!("attention_combine {:?}", (plan.dtype, with_lse)), || plan.combine_kernel(), plan.combine, &args)?;
        Ok(DecodeOutput { out, lse })
    }
}

/// The shape of a decode from host sizes, each checked to fit 32 bits.
pub fn decode_shape(batch: usize, q_heads: usize, kv_heads: usize, s_len: usize, d: usize) -> Result<DecodeShape, Error> {
    let fit = |what: &str, v: usize| enigma_kernels::library::to_u32("attention_decode", what, v);
    Ok(DecodeShape { batch: fit("batch", batch)?, q_heads: fit("q_heads", q_heads)?, kv_heads: fit("kv_heads", kv_heads)?, s_len: fit("s_len", s_len)?, d: fit("d", d)? })
}
