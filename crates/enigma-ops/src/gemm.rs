//! Matrix multiply: the SIMD-group-matrix GEMM or, for f32 off Metal, the
//! SIMT kernel, with K split over threadgroups where the output has few
//! tiles.

use crate::{arg_err, select_gemm_tile, threadgroup_limits, Error, GemmTile, Ops, SplitSum};
use enigma_ir::Kernel;
use enigma_kernels::library::{self as lib, gemm, sgemm, DType, Dispatch};
use enigma_runtime::{Arg, Buffer};
/// The GEMM kernel a matrix multiply runs: on SIMD-group matrices, or the
/// SIMT f32 kernel. Both take the same parameters.
#[derive(Clone, Copy, Debug)]
enum MatmulPlan {
    Matrices(gemm::GemmConfig),
    Simt(sgemm::SgemmConfig),
}

impl MatmulPlan {
    pub(crate) fn kernel(&self) -> Kernel {
        match self {
            MatmulPlan::Matrices(cfg) => gemm::gemm(cfg),
            MatmulPlan::Simt(cfg) => sgemm::sgemm(cfg),
        }
    }

    pub(crate) fn splits(&self) -> u32 {
        match self {
            MatmulPlan::Matrices(cfg) => cfg.splits,
            MatmulPlan::Simt(cfg) => cfg.splits,
        }
    }

    /// Who sums the splits: the SIMT kernel always leaves them to the reduction.
    pub(crate) fn split_sum(&self) -> SplitSum {
        match self {
            MatmulPlan::Matrices(cfg) => cfg.split_sum,
            MatmulPlan::Simt(_) => SplitSum::Reduction,
        }
    }

    /// The dispatch for an `m × n` result.
    pub(crate) fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        match self {
            MatmulPlan::Matrices(cfg) => cfg.dispatch(m, n, 1),
            MatmulPlan::Simt(cfg) => cfg.dispatch(m, n, 1),
        }
    }
}

impl Ops<'_> {

    /// `C = A · B` (row-major, `A` `m × k`, `B` `k × n`, both f16, bf16 or
    /// f32 of one type) with f32 accumulation; `C` is `m × n` of `out`.
    /// f32 inputs without [`GemmOptions::tile`] run the SIMT kernel of
    /// [`enigma_kernels::library::sgemm`] except on Metal (whose f32
    /// SIMD-group matrices are native): its tile for the shape
    /// (`SgemmConfig::for_shape`: 128×128, 128×64 where 128×128 tiles leave
    /// compute units idle, or 16, 32 or 64 rows up to 64), 16 deep where
    /// that fits the device (`SgemmConfig::deepened_for`), or with [`Options::threads`] its 8×8 blocks over that many threads
    /// (`SgemmConfig::with_threads`). Otherwise the tiled SIMD-group-matrix
    /// kernel of [`enigma_kernels::library::gemm`] with
    /// [`GemmOptions::tile`]; with only [`Options::threads`], the type's
    /// base tile (`GemmConfig::new`) split over `threads / 32` SIMD groups
    /// (`GemmConfig::with_threads`); else the tile [`select_gemm_tile`]
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
        let plan = self.matmul_plan(input, out, mu, nu, ku)?;
        let c = self.output(out.scalar(), m.saturating_mul(n))?;
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
                ("a4", Arg::from(a)),
                ("b4", Arg::from(b)),
            ],
            &c,
            out,
            m * n,
            plan.splits(),
            plan.split_sum(),
        )?;
        Ok(c)
    }

    /// The GEMM [`Ops::matmul`] runs for an `m × n × k` product of `input`
    /// (see there), with its K splits, checked against the device's
    /// threadgroup memory.
    fn matmul_plan(&self, input: DType, out: DType, m: u32, n: u32, k: u32) -> Result<MatmulPlan, Error> {
        let limits = threadgroup_limits(self.rt.device());
        let simt = input == DType::F32 && self.options.gemm.tile.is_none() && self.rt.device().kind != enigma_runtime::DeviceKind::Metal;
        if simt {
            let cfg = match self.options.threads {
                Some(t) => sgemm::SgemmConfig::new(out).with_threads(t)?,
                None => sgemm::SgemmConfig::for_shape(out, m, n, self.rt.device().compute_units).deepened_for(limits.max_memory_bytes),
            };
            let cfg = sgemm::SgemmConfig { splits: self.k_splits(cfg.splits_for(m, n, k, self.threadgroups_wanted())), ..cfg };
            cfg.check(limits.max_memory_bytes)?;
            return Ok(MatmulPlan::Simt(cfg));
        }
        let cfg = match (self.options.gemm.tile, self.options.threads) {
            (Some(tile), _) => {
                self.check_tile_threads("matmul", tile)?;
                gemm::GemmConfig::from_tile(tile, input, out)
            }
            (None, Some(t)) => gemm::GemmConfig::new(input, out).with_threads(t)?,
            (None, None) => gemm::GemmConfig::from_tile(select_gemm_tile(m, n, k, input.size_bytes(), &limits), input, out),
        };
        let cfg = gemm::GemmConfig { splits: self.k_splits(cfg.splits_for(m, n, k, self.threadgroups_wanted())), split_sum: self.split_sum("matmul", SplitSum::Reduction)?, ..cfg };
        let cfg = match self.options.gemm.stages {
            Some(stages) => gemm::GemmConfig { stages, ..cfg },
            None => cfg.pipelined_for(self.stage_memory()),
        };
        let cfg = cfg.whole_tiles_for(m, n, k);
        cfg.check(limits.max_memory_bytes)?;
        Ok(MatmulPlan::Matrices(cfg))
    }

    /// A tile's threads are its SIMD groups': an [`Options::threads`] that
    /// differs is an [`Error::Argument`] naming both.
    pub(crate) fn check_tile_threads(&self, op: &str, tile: GemmTile) -> Result<(), Error> {
        match self.options.threads {
            Some(t) if t != tile.threads() => Err(arg_err(op, format!("the tile {tile} takes {} threads, but the options ask for {t}", tile.threads()))),
            _ => Ok(()),
        }
    }
}
