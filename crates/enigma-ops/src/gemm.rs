//! Matrix multiply: the kernel [`gemm::select`] chooses (the
//! SIMD-group-matrix GEMM or, for f32 off Metal, the SIMT kernel), with K
//! split over threadgroups where it says.

use crate::{Elementwise, Error, Ops};
use enigma_kernels::library::gemm::{self, GemmProblem, MatrixArgs, PlainArgs};
use enigma_kernels::library::{self as lib, DType};
use enigma_runtime::Buffer;

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
    /// the shape, it runs the whole-tile variant (`gemm::Edges::WholeTiles`).
    pub fn matmul(&self, a: &Buffer, b: &Buffer, m: usize, n: usize, k: usize, out: DType) -> Result<Buffer, Error> {
        self.matmul_batched(a, b, 1, m, n, k, out)
    }

    /// `C[i] = A[i] · B[i]` for `i < batch`: [`Ops::matmul`] over
    /// `batch` consecutive `m × k` and `k × n` matrices (`C` holds `batch`
    /// consecutive `m × n` results), in one dispatch over the grid's third
    /// dimension. With more than one matrix K is not split (the batch
    /// gives the grid its threadgroups).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_batched(&self, a: &Buffer, b: &Buffer, batch: usize, m: usize, n: usize, k: usize, out: DType) -> Result<Buffer, Error> {
        self.product(&Product { a, b, batch, m, n, k, out, shared_a: false, row_bias: None })
    }

    /// `C[i] = A · B[i]` for `i < batch`: one `m × k` matrix A for every
    /// one of `batch` consecutive `k × n` matrices B (A's batch stride 0:
    /// A is read in place, not repeated), as torch's `matmul` broadcasts
    /// a 2-D left operand over a batched right one; otherwise as
    /// [`Ops::matmul_batched`].
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_shared_a(&self, a: &Buffer, b: &Buffer, batch: usize, m: usize, n: usize, k: usize, out: DType) -> Result<Buffer, Error> {
        self.product(&Product { a, b, batch, m, n, k, out, shared_a: true, row_bias: None })
    }

    /// The batched product `p` describes (see [`Product`]); the bias, where
    /// there is one, in the GEMM's epilogue where the selected kernel
    /// takes it ([`gemm::GemmPlan::with_row_bias`]) and C has the inputs'
    /// type, else by a broadcast add after the product.
    pub(crate) fn product(&self, p: &Product) -> Result<Buffer, Error> {
        let op = "matmul";
        let Product { a, b, batch, m, n, k, out, shared_a, row_bias } = *p;
        let mut dims = [0u32; 4];
        for (d, (what, v)) in dims.iter_mut().zip([("m", m), ("n", n), ("k", k), ("batch", batch)]) {
            lib::nonzero(op, what, v)?;
            *d = lib::to_u32(op, what, v)?;
        }
        for (what, v) in [("batch · m · k", m * k), ("batch · k · n", k * n), ("batch · m · n", m * n)] {
            lib::to_u32(op, what, v.saturating_mul(batch))?;
        }
        let input = self.dtype_of(op, a)?;
        let a_len = if shared_a { m * k } else { batch * m * k };
        self.need(op, "a", a, a_len, input.scalar())?;
        self.need(op, "b", b, batch * k * n, input.scalar())?;
        if let Some(bias) = row_bias {
            self.need(op, "bias", bias, m, out.scalar())?;
        }
        let (mu, nu, ku) = (m as u32, n as u32, k as u32);
        let mut overrides = self.options.overrides();
        if batch > 1 {
            overrides.gemm.k_splits = Some(1);
        }
        let plan = gemm::select(&GemmProblem { input, output: out, m: mu, n: nu, k: ku, batch: batch as u32 }, self.rt.device(), &overrides)?;
        let fused = row_bias.filter(|_| out == input).and_then(|_| plan.with_row_bias());
        let fused_bias = fused.and(row_bias);
        let plan = fused.unwrap_or(plan);
        let c = self.output(out.scalar(), batch * m * n)?;
        let a4 = self.vector_view(op, "a", a, input.ty(4), k)?;
        let b4 = self.vector_view(op, "b", b, input.ty(4), n)?;
        let dispatch = plan.dispatch(mu, nu, batch as u32, self.rt.device().compute_units);
        let a_stride = if shared_a { 0 } else { mu * ku };
        // The key names every field: the split count is built into the
        // kernel, not into its name.
        self.launch_split(
            format!("matmul {plan:?}"),
            || plan.kernel(),
            dispatch,
            (MatrixArgs { a, a4: &a4, b, m: mu, n: nu, k: ku }, PlainArgs { b4: &b4, alpha: 1.0, beta: 0.0, a_stride, batch: batch as u32, bias: fused_bias }),
            &c,
            out,
            m * n,
            plan.splits(),
            plan.split_sum(),
        )?;
        match row_bias.filter(|_| fused_bias.is_none()) {
            Some(bias) => Ok(self.elementwise_broadcast(Elementwise::Add, &c, bias, &[batch, m, n], &[m, 1])?.0),
            None => Ok(c),
        }
    }
}

/// A batched product `C[i] = A[i] · B[i] + bias` for `i < batch`:
/// `batch` consecutive `k × n` matrices B (`b`), `m × k` matrices A (`a`:
/// `batch` consecutive ones, or with `shared_a` one for every product, as
/// a convolution's weights), C `batch` consecutive `m × n` results of
/// `out`, and an optional bias of `m` values of `out` added to each row
/// of every result.
#[derive(Clone, Copy)]
pub(crate) struct Product<'a> {
    pub a: &'a Buffer,
    pub b: &'a Buffer,
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub out: DType,
    pub shared_a: bool,
    pub row_bias: Option<&'a Buffer>,
}
