//! Attention decode: three dispatches (scores, softmax, weighted sum) or
//! one fused kernel, its keys optionally split over threadgroups.

use crate::{Error, KernelType, Ops};
use enigma_ir::Scalar;
use enigma_kernels::library::attention;
use enigma_runtime::{Arg, Buffer};

impl Ops<'_> {

    #[allow(clippy::too_many_arguments)]
    /// The plan of either form; the fused one takes fewer threads than the
    /// default where its state would not fit threadgroup memory (an
    /// explicit [`Options::threads`] is kept, and checked).
    fn attention_plan(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, fused: bool) -> Result<attention::AttentionPlan, Error> {
        let op = "attention_decode";
        let dtype = self.dtype_of(op, q)?;
        self.need(op, "q", q, heads.saturating_mul(d), dtype.scalar())?;
        self.need(op, "k", k, heads.saturating_mul(s_len).saturating_mul(d), dtype.scalar())?;
        self.need(op, "v", v, heads.saturating_mul(s_len).saturating_mul(d), dtype.scalar())?;
        let vec = self.vectorize(op, &[q, k, v], dtype.ty(4), d.is_multiple_of(4))?;
        let mut threads = self.threads(KernelType::Attention);
        if fused && self.options.threads.is_none() {
            threads = threads.min(attention::fused_threads_that_fit(u32::try_from(d).unwrap_or(u32::MAX), vec));
        }
        Ok(attention::plan(dtype, heads, s_len, d, vec, threads)?)
    }

    /// Attention decode in seed 000's three dispatches (scores, softmax,
    /// weighted sum): `out` is `[heads, d]` in the input's type.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32) -> Result<Buffer, Error> {
        let plan = self.attention_plan(q, k, v, heads, s_len, d, false)?;
        let scores = self.output(Scalar::F32, heads * s_len)?;
        let out = self.output(plan.dtype.scalar(), heads * d)?;
        let dims = [("s_len", Arg::u32(plan.s_len)), ("d", Arg::u32(plan.d)), ("scale", Arg::f32(scale))];
        let mut args = vec![("q", Arg::from(q)), ("q4", Arg::from(q)), ("k", Arg::from(k)), ("k4", Arg::from(k)), ("scores", Arg::from(&scores))];
        args.extend(dims);
        self.launch(format!("attention_scores {:?}", (plan.dtype, plan.vec, plan.chunks)), || plan.scores_kernel(), plan.scores, &args)?;
        self.softmax_into(&plan.softmax, &scores, &scores)?;
        let args = [("w", Arg::from(&scores)), ("v", Arg::from(v)), ("out", Arg::from(&out)), dims[0], dims[1]];
        self.launch(format!("attention_weighted_sum {:?}", plan.dtype), || plan.weighted_sum_kernel(), plan.weighted_sum, &args)?;
        Ok(out)
    }

    /// Attention decode in one dispatch, one threadgroup per head.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode_fused(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32) -> Result<Buffer, Error> {
        let plan = self.attention_plan(q, k, v, heads, s_len, d, true)?;
        plan.check_fused()?;
        let plan = plan.with_splits(self.attention_splits(&plan));
        let out = self.output(plan.dtype.scalar(), heads * d)?;
        let mut args = vec![
            ("q", Arg::from(q)),
            ("q4", Arg::from(q)),
            ("k", Arg::from(k)),
            ("k4", Arg::from(k)),
            ("v", Arg::from(v)),
            ("v4", Arg::from(v)),
            ("s_len", Arg::u32(plan.s_len)),
            ("d", Arg::u32(plan.d)),
            ("scale", Arg::f32(scale)),
        ];
        if plan.splits == 1 {
            args.push(("out", Arg::from(&out)));
            self.launch(fused_key(&plan), || plan.fused_kernel(), plan.fused, &args)?;
            return Ok(out);
        }
        let parts = plan.heads as usize * plan.splits as usize;
        let partial_ml = self.output(Scalar::F32, parts * 2)?;
        let partial_acc = self.output(Scalar::F32, parts * d)?;
        args.extend([("partial_ml", Arg::from(&partial_ml)), ("partial_acc", Arg::from(&partial_acc)), ("split_len", Arg::u32(plan.split_len))]);
        self.launch(fused_key(&plan), || plan.fused_kernel(), plan.fused, &args)?;
        let args = [
            ("partial_ml", Arg::from(&partial_ml)),
            ("partial_acc", Arg::from(&partial_acc)),
            ("out", Arg::from(&out)),
            ("d", Arg::u32(plan.d)),
            ("splits", Arg::u32(plan.splits)),
        ];
        self.launch(format!("attention_combine {:?}", plan.dtype), || plan.combine_kernel(), plan.combine, &args)?;
        Ok(out)
    }

    /// How many ways the fused decode splits each head's keys:
    /// [`AttentionOptions::splits`]; else, on a GPU, enough threadgroups
    /// for about four per compute unit, keeping at least 8 keys per SIMD
    /// group (the simulator gains nothing from splitting: 1).
    fn attention_splits(&self, plan: &attention::AttentionPlan) -> u32 {
        if let Some(s) = self.options.attention.splits {
            return s.max(1);
        }
        if self.rt.device().kind == enigma_runtime::DeviceKind::Simulator {
            return 1;
        }
        let target = 4 * self.rt.device().compute_units.max(1);
        let by_occupancy = target.div_ceil(plan.heads.max(1));
        let simdgroups = plan.fused.threads[0].div_ceil(32).max(1);
        let by_keys = (plan.s_len / (simdgroups * 8)).max(1);
        by_occupancy.min(by_keys)
    }
}

/// What determines the fused attention kernel of `plan`.
fn fused_key(plan: &attention::AttentionPlan) -> String {
    format!("attention_fused {:?}", (plan.dtype, plan.vec, plan.chunks, plan.fused.threads[0], plan.splits > 1))
}
