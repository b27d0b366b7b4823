//! Attention over a whole sequence (prefill): `softmax(Q·Kᵀ·scale + mask)·V`
//! in one dispatch (`library::attention_prefill`: the kernel on cooperative
//! tensors where the device runs them on `wgmma`, else the one on SIMD-group
//! matrices), with the log-sum-exp of each row on request.

use crate::{Error, Ops};
use enigma_ir::Scalar;
use enigma_kernels::library::attention_prefill::{self, Mask, PrefillArgs, PrefillChoice, PrefillPlan, PrefillShape};
use enigma_runtime::Buffer;

impl Ops<'_> {
    /// `out = softmax(Q·Kᵀ·scale + mask)·V` for `q` `[batch, heads, s_q, d]`
    /// and `k`, `v` `[batch, kv_heads, s_kv, d]` (f16 or bf16, contiguous;
    /// `d` 64 or 128; `kv_heads` dividing `heads`); `out` has `q`'s shape
    /// and type. `scale` defaults to `1/√d`.
    pub fn attention_prefill(&self, q: &Buffer, k: &Buffer, v: &Buffer, shape: PrefillShape, mask: Mask, scale: Option<f32>) -> Result<Buffer, Error> {
        Ok(self.prefill(q, k, v, shape, mask, scale, false)?.0)
    }

    /// [`Ops::attention_prefill`] and each row's natural log-sum-exp of its
    /// scaled visible scores (f32, `[batch, heads, s_q]`; `−∞` for a row that
    /// sees no key).
    pub fn attention_prefill_lse(&self, q: &Buffer, k: &Buffer, v: &Buffer, shape: PrefillShape, mask: Mask, scale: Option<f32>) -> Result<(Buffer, Buffer), Error> {
        let (out, lse) = self.prefill(q, k, v, shape, mask, scale, true)?;
        Ok((out, lse.expect("asked for the log-sum-exp")))
    }

    /// The plan of a prefill over these buffers on this device.
    pub fn attention_prefill_plan(&self, q: &Buffer, k: &Buffer, v: &Buffer, shape: PrefillShape, mask: Mask, lse: bool) -> Result<PrefillPlan, Error> {
        let op = "attention_prefill";
        let dtype = self.dtype_of(op, q)?;
        self.need(op, "q", q, shape.q_len(), dtype.scalar())?;
        self.need(op, "k", k, shape.kv_len(), dtype.scalar())?;
        self.need(op, "v", v, shape.kv_len(), dtype.scalar())?;
        let attention = &self.options.attention;
        let choice = PrefillChoice { tile: attention.prefill_tile, cooperative: attention.prefill_cooperative, tile_copies: attention.prefill_tile_copies };
        Ok(attention_prefill::select_prefill(dtype, shape, mask, lse, choice, self.rt.device())?)
    }

    #[allow(clippy::too_many_arguments)]
    fn prefill(&self, q: &Buffer, k: &Buffer, v: &Buffer, shape: PrefillShape, mask: Mask, scale: Option<f32>, lse: bool) -> Result<(Buffer, Option<Buffer>), Error> {
        let plan = self.attention_prefill_plan(q, k, v, shape, mask, lse)?;
        self.attention_prefill_planned(&plan, q, k, v, scale)
    }

    /// Runs `plan` (from [`Ops::attention_prefill_plan`], its configuration
    /// possibly changed: the benchmarks compare stage counts this way) on
    /// buffers it was made for: the output, and the log-sum-exp when the
    /// plan computes it.
    pub fn attention_prefill_planned(&self, plan: &PrefillPlan, q: &Buffer, k: &Buffer, v: &Buffer, scale: Option<f32>) -> Result<(Buffer, Option<Buffer>), Error> {
        let shape = plan.shape;
        let lse = plan.config.lse();
        let scale = scale.unwrap_or(1.0 / (shape.d as f32).sqrt());
        if !scale.is_finite() {
            return Err(crate::arg_err("attention_prefill", format!("scale {scale} is not finite")));
        }
        let out = self.output(plan.config.dtype().scalar(), shape.q_len())?;
        let lse = if lse { Some(self.output(Scalar::F32, shape.rows())?) } else { None };
        let args = PrefillArgs {
            q,
            k,
            v,
            out: &out,
            lse: lse.as_ref(),
            s_q: shape.s_q as u32,
            s_kv: shape.s_kv as u32,
            heads: shape.heads as u32,
            group: (shape.heads / shape.kv_heads) as u32,
            scale_log2: scale * std::f32::consts::LOG2_E,
            diag: plan.diag(),
            batch_size: shape.batch as u32,
        };
        self.launch(format!("attention_prefill {:?}", plan.config), || plan.kernel(), plan.dispatch, &args)?;
        Ok((out, lse))
    }
}
