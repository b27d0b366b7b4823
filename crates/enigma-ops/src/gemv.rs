//! GEMV: `y = W·x`.

use crate::{Error, KernelType, Ops};
use enigma_ir::{Scalar, Type};
use enigma_kernels::library::gemv::{self, GemvArgs};
use enigma_kernels::library::DType;
use enigma_runtime::Buffer;

impl Ops<'_> {

    /// `y = W·x` for `W` of `[m, k]` (f32, f16 or bf16) and f32 `x`: `m` f32.
    pub fn gemv(&self, w: &Buffer, x: &Buffer, m: usize, k: usize) -> Result<Buffer, Error> {
        let wdtype = self.dtype_of("gemv", w)?;
        self.need("gemv", "w", w, m.saturating_mul(k), wdtype.scalar())?;
        self.need("gemv", "x", x, k, Scalar::F32)?;
        let wvec = self.vectorize("gemv", &[w], wdtype.ty(4), k.is_multiple_of(4))?;
        let xvec = self.vectorize("gemv", &[x], Type::vector(Scalar::F32, 4), k.is_multiple_of(4))?;
        // 16-bit weights in 16-byte words where vectors are in use and the
        // rows are whole words.
        let wide = wvec.min(xvec) == 4 && wdtype != DType::F32 && k.is_multiple_of(8) && w.len_bytes().is_multiple_of(16);
        let vec = if wide { 8 } else { wvec.min(xvec) };
        let options = gemv::GemvOptions { rows_per_simdgroup: self.options.gemv.rows_per_simdgroup, unroll: self.options.gemv.loads, stagger: self.options.gemv.stagger };
        let plan = gemv::plan(wdtype, m, k, vec, self.threads(KernelType::MatVec), options)?;
        let y = self.output(Scalar::F32, m)?;
        self.launch(
            format!("gemv {plan:?}"),
            || plan.kernel(),
            plan.dispatch,
            &GemvArgs { w, w4: w, w8: w, x, x4: x, y: &y, m: plan.m, k: plan.k },
        )?;
        Ok(y)
    }

}
