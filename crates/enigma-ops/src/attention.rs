//! Attention decode: three dispatches (scores, softmax, weighted sum) or
//! one fused kernel over a batch with grouped K/V heads, its keys
//! optionally split over threadgroups (then combined).

use crate::error::arg_err;
use crate::{Error, KernelType, Ops, SplitSum};
use enigma_ir::{Feature, Scalar};
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
    /// The plan of either form; the fused one takes fewer threads than the
    /// default where its state would not fit threadgroup memory (an
    /// explicit [`crate::Options::threads`] is kept, and checked).
    fn attention_plan(&self, q: &Buffer, k: &Buffer, v: &Buffer, shape: &DecodeShape, fused: bool) -> Result<attention::AttentionPlan, Error> {
        let op = "attention_decode";
        let dtype = self.dtype_of(op, q)?;
        let (b, hq, hkv, s, d) = (shape.batch as usize, shape.q_heads as usize, shape.kv_heads as usize, shape.s_len as usize, shape.d as usize);
        self.need(op, "q", q, b.saturating_mul(hq).saturating_mul(d), dtype.scalar())?;
        let cache = b.saturating_mul(hkv).saturating_mul(s).saturating_mul(d);
        self.need(op, "k", k, cache, dtype.scalar())?;
        self.need(op, "v", v, cache, dtype.scalar())?;
        let vec = self.vectorize(op, &[q, k, v], dtype.ty(4), d.is_multiple_of(4))?;
        let mut threads = self.threads(KernelType::Attention);
        if fused && self.options.threads.is_none() {
            let group = shape.q_heads.checked_div(shape.kv_heads).unwrap_or(1).max(1);
            let heads = self.options.attention.heads_per_threadgroup.unwrap_or(attention::default_heads_per_threadgroup(group)).max(1);
            threads = threads.min(attention::fused_threads_that_fit(shape.d, vec, heads));
        }
        Ok(attention::plan(dtype, shape, vec, threads)?)
    }

    /// Attention decode in seed 000's three dispatches (scores, softmax,
    /// weighted sum): `out` is `[heads, d]` in the input's type.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32) -> Result<Buffer, Error> {
        let shape = decode_shape(1, heads, heads, s_len, d)?;
        let plan = self.attention_plan(q, k, v, &shape, false)?;
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

    /// Attention decode of a batch in one fused kernel, its keys split over
    /// threadgroups where the sequences are long for the GPU
    /// ([`attention::splits_for`], or [`crate::AttentionOptions`]), the
    /// splits merged by the kernel's last threadgroup of each head block
    /// or by [`attention::combine`] (`AttentionOptions::split_sum`):
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
        let plan = self.attention_plan(q, k, v, shape, true)?;
        if let Some(lens) = seq_lens {
            self.need("attention_decode", "seq_lens", lens, shape.batch as usize, Scalar::U32)?;
        }
        let keys = self.options.attention.keys_per_step.unwrap_or(attention::DEFAULT_KEYS_PER_STEP);
        let options = self.options.attention;
        let heads = options.heads_per_threadgroup.unwrap_or(plan.heads_per_threadgroup);
        let prefetch = options.prefetch.unwrap_or(attention::DEFAULT_PREFETCH);
        let mut plan = plan.with_keys_per_step(keys).with_outputs(seq_lens.is_some(), with_lse).with_heads_per_threadgroup(heads, prefetch)?;
        if ![q, k, v].iter().all(|b| b.len_bytes().is_multiple_of(16)) {
            plan = plan.without_wide_words();
        }
        if let Some(lanes) = options.lanes_per_key {
            plan = plan.with_lanes_per_key(lanes)?;
        }
        let stages = options.stages.unwrap_or_else(|| attention::default_stages(&plan, self.options.threads.is_some()));
        plan = plan.with_stages(stages)?;
        if self.options.threads.is_none() {
            plan = plan.fitting_threads();
        }
        plan.check_fused()?;
        let plan = plan.with_splits(self.attention_splits(&plan)).with_split_sum(self.attention_split_sum()?);
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

    /// How many ways the fused decode splits each K/V head's keys:
    /// [`crate::AttentionOptions::splits`]; else, on a GPU,
    /// [`attention::splits_for`] its multiprocessor count (the simulator
    /// gains nothing from splitting: 1).
    fn attention_splits(&self, plan: &attention::AttentionPlan) -> u32 {
        if let Some(s) = self.options.attention.splits {
            return s.max(1);
        }
        if self.rt.device().kind == enigma_runtime::DeviceKind::Simulator {
            return 1;
        }
        attention::splits_for(plan, self.rt.device().compute_units)
    }
}

impl Ops<'_> {
    /// Who merges the fused decode's splits:
    /// [`crate::AttentionOptions::split_sum`], else the kernel where the
    /// device has device-scope fences, else [`attention::combine`].
    fn attention_split_sum(&self) -> Result<SplitSum, Error> {
        let fences = self.rt.device().features.contains(&Feature::DeviceFence);
        match self.options.attention.split_sum {
            Some(SplitSum::LastThreadgroup) if !fences => Err(arg_err(
                "attention_decode",
                format!("the fused decode merges its splits with device-scope fences, which {} does not have (on Metal they need MSL 3.2); use split_sum Reduction", self.rt.device().name),
            )),
            Some(sum) => Ok(sum),
            None if fences => Ok(SplitSum::LastThreadgroup),
            None => Ok(SplitSum::Reduction),
        }
    }
}

/// The shape of a decode from host sizes, each checked to fit 32 bits.
pub fn decode_shape(batch: usize, q_heads: usize, kv_heads: usize, s_len: usize, d: usize) -> Result<DecodeShape, Error> {
    let fit = |what: &str, v: usize| enigma_kernels::library::to_u32("attention_decode", what, v);
    Ok(DecodeShape { batch: fit("batch", batch)?, q_heads: fit("q_heads", q_heads)?, kv_heads: fit("kv_heads", kv_heads)?, s_len: fit("s_len", s_len)?, d: fit("d", d)? })
}
