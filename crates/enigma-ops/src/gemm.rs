//! Matrix multiply: the kernel [`gemm::select`] chooses (the
//! SIMD-group-matrix GEMM or, for f32 off Metal, the SIMT kernel), with K
//! split over threadgroups where it says.

use crate::{Error, Ops};
use enigma_kernels::library::gemm::{self, GemmProblem};
use enigma_kernels::library::{self as lib, DType};
use enigma_runtime::{Arg, Buffer};

impl Ops<'_> {

    /// `C = A · B` (row-major, `A` `m × k`, `B` `k × n`, both f16, bf16 or
    /// f32 of one type) with f32 accumulation; `C` is `m × n` of `out`.
    /// The kernel and its configuration are [`gemm::select`]'s: f32 inputs
    /// without [`GemmOptions::tile`](crate::GemmOptions::tile) run the SIMT kernel of
    /// [`enigma_kernels::library::sgemm`] except on Metal (whose f32
    /// SIMD-group matrices are native): its tile for the shape
    /// (`SgemmConfig::for_shape`: 128×128, 128×64 where 128×128 tiles leave
    /// compute units idle, or 16, 32 or 64 rows up to 64), 16 deep where
    /// that fits the device (`SgemmConfig::deepened_for`), or with [`Options::threads`](crate::Options::threads) its 8×8 blocks over that many threads
    /// (`SgemmConfig::with_threads`). Otherwise the tiled SIMD-group-matrix
    /// kernel of [`enigma_kernels::library::gemm`] with
    /// [`GemmOptions::tile`](crate::GemmOptions::tile); with only [`Options::threads`](crate::Options::threads), the type's
    /// base tile (`GemmConfig::new`) split over `threads / 32` SIMD groups
    /// (`GemmConfig::with_threads`); else the tile [`gemm::select_tile`]
    /// gives the shape on this device. Pipelined, where the tile divides
    /// the shape, it runs the whole-tile variant (`GemmConfig::whole_tiles`).
    pub fn matmul(&self, a: &Buffer, b: &Buffer, m: usize, n: usize, k: usize, out: DType) -> Result<Buffer, Error> {
        let op = "matmul";
        let mut dims = [0u32; 3];
        for (d, (what, v)) in dims.iter_mut().zip([("m", m), ("n", n), ("k", k)]) {
            lib::nonzero(op, what, v)?;
            *d = lib::to_u32(op, what, v)?;
        }
        let input = self.dtype_of(op, a)?;
        self.need(op, "a", a, m.saturating_mul(k), input.scalar())?;
        self.need(op, "b", b, k.saturating_mul(n), input.scalar())?;
        let (mu, nu, ku) = (m as u32, n as u32, k as u32);
        let plan = gemm::select(&GemmProblem { input, output: out, m: mu, n: nu, k: ku }, self.rt.device(), &self.options.overrides())?;
        let c = self.output(out.scalar(), m.saturating_mul(n))?;
        let a4 = self.vector_view(op, "a", a, input.ty(4), k)?;
        let b4 = self.vector_view(op, "b", b, input.ty(4), n)?;
        // The key names every field: the split count is built into the
        // kernel, not into its name.
        self.launch_split(
            format!("matmul {plan:?}"),
            || plan.kernel(),
            plan.dispatch(mu, nu),
            &[
                ("a", Arg::from(a)),
                ("b", Arg::from(b)),
                ("m", Arg::u32(mu)),
                ("n", Arg::u32(nu)),
                ("k", Arg::u32(ku)),
                ("alpha", Arg::f32(1.0)),
                ("beta", Arg::f32(0.0)),
                ("a4", Arg::from(&a4)),
                ("b4", Arg::from(&b4)),
            ],
            &c,
            out,
            m * n,
            plan.splits(),
            plan.split_sum(),
        )?;
        Ok(c)
    }
}
