//! What the matrix products share: the device's defaults for K splits,
//! stages and who sums the splits, and the launch of a kernel whose K may
//! be split (workspace, tickets, the reduction's second pass).

use crate::{arg_err, Error, Ops, SplitSum};
use enigma_ir::{Kernel, Scalar};
use enigma_kernels::library::{self as lib, gemm, DType, Dispatch};
use enigma_runtime::{Arg, Buffer};

impl Ops<'_> {
    /// The threadgroup memory the GEMMs' pipelined stages may fill
    /// (`pipelined_for`): the device's, or none on Metal, whose MSL copies
    /// at once, so that stages there would only cost memory.
    pub(crate) fn stage_memory(&self) -> u64 {
        match self.rt.device().kind {
            enigma_runtime::DeviceKind::Metal => 0,
            _ => self.rt.device().max_threadgroup_memory_bytes,
        }
    }

    /// The K splits to use: the options', or on a GPU `planned`, or 1.
    pub(crate) fn k_splits(&self, planned: u32) -> u32 {
        match (self.options.gemm.k_splits, self.rt.device().kind) {
            (Some(s), _) => s,
            (None, enigma_runtime::DeviceKind::Simulator) => 1,
            (None, _) => planned,
        }
    }

    /// The device's compute units on a GPU; 0 on the simulator, which
    /// gains nothing from filling them (the decode kernels' defaults).
    pub(crate) fn gpu_compute_units(&self) -> u32 {
        match self.rt.device().kind {
            enigma_runtime::DeviceKind::Simulator => 0,
            _ => self.rt.device().compute_units,
        }
    }

    /// Threadgroups a split-K plan aims for: two per compute unit.
    pub(crate) fn threadgroups_wanted(&self) -> u32 {
        2 * self.rt.device().compute_units
    }

    /// Whether the device has device-scope fences, which a kernel that sums
    /// its own K splits needs.
    fn has_device_fences(&self) -> bool {
        self.rt.device().features.contains(&enigma_ir::Feature::DeviceFence)
    }

    /// Who sums a tensor-core GEMM's K splits ([`GemmOptions::split_sum`]):
    /// `default` unless asked otherwise, and the kernel only on a device
    /// with device-scope fences.
    pub(crate) fn split_sum(&self, op: &str, default: SplitSum) -> Result<SplitSum, Error> {
        match self.options.gemm.split_sum.unwrap_or(default) {
            SplitSum::LastThreadgroup if !self.has_device_fences() => Err(arg_err(
                op,
                format!("the kernel sums its K splits with device-scope fences, which {} does not have (on Metal they need MSL 3.2); use the reduction (split_sum None or Reduction)", self.rt.device().name),
            )),
            sum => Ok(sum),
        }
    }

    /// The quantized GEMM's default for who sums its K splits at `m` rows:
    /// the kernel at one row where the device has device-scope fences, else
    /// the reduction. On an H100 (fragment order, held, `BENCHMARKS.md`,
    /// eighth session) the kernel's own sum took 16.8 µs INT4 and 18.2 µs
    /// FP4 at 1 × 11008 × 4096 against 19.2 and 20.5 with the reduction
    /// (10.5 / 11.3 against 12.8 / 13.3 at 4096²), but at 16 rows, whose
    /// last threadgroups sum sixteen times the elements, 20.3 / 22.3
    /// against 19.9 / 21.6 (15.0 / 15.6 against 13.4 / 13.9 at 4096²).
    pub(crate) fn qgemm_split_sum(&self, m: u32) -> SplitSum {
        if m == 1 && self.has_device_fences() {
            SplitSum::LastThreadgroup
        } else {
            SplitSum::Reduction
        }
    }

    /// Runs a kernel whose C (`c`, `elements` of `out`) may be split over K
    /// (`splits`, summed as `sum` says): unsplit it writes `c`; split, its
    /// partial tiles go to an f32 workspace (`splits · elements`), which
    /// either the kernel sums into `c` with a zeroed ticket per tile (as
    /// many as the dispatch's threadgroups over the splits) or the
    /// reduction's second dispatch does. `named` are the kernel's other
    /// arguments.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_split(&self, key: String, build: impl FnOnce() -> Kernel, dispatch: Dispatch, named: &[(&str, Arg<'_>)], c: &Buffer, out: DType, elements: usize, splits: u32, sum: SplitSum) -> Result<(), Error> {
        let mut args = named.to_vec();
        if splits <= 1 {
            args.push(("c", Arg::from(c)));
            return self.launch(key, build, dispatch, &args);
        }
        let workspace = self.output(Scalar::F32, elements.saturating_mul(splits as usize))?;
        if sum == SplitSum::Reduction {
            args.push(("c", Arg::from(&workspace)));
            self.launch(key, build, dispatch, &args)?;
            return self.splitk_reduce(&workspace, c, out, splits, elements);
        }
        let [x, y, z] = dispatch.size;
        let count = (x as usize) * (y as usize) * (z / splits) as usize;
        let slot = (self.rt.stream(), count);
        let cached = self.pipelines.lock().tickets.remove(&slot);
        let tickets = match cached {
            Some(t) => t,
            None => self.rt.buffer_zeroed::<u32>(count)?,
        };
        args.extend([("c", Arg::from(c)), ("ws", Arg::from(&workspace)), ("tickets", Arg::from(&tickets))]);
        // A dispatch that failed may have left tickets taken: those are dropped.
        self.launch(key, build, dispatch, &args)?;
        self.pipelines.lock().tickets.insert(slot, tickets);
        Ok(())
    }

    /// The second pass of a split-K product: sums the workspace's slices
    /// into `c` (alpha 1, beta 0), four elements per thread where `elements`
    /// is a multiple of 4 (both are this library's untyped outputs, so
    /// they bind as vectors).
    fn splitk_reduce(&self, ws: &Buffer, c: &Buffer, out: DType, splits: u32, elements: usize) -> Result<(), Error> {
        let width: u8 = if elements.is_multiple_of(4) { 4 } else { 1 };
        let total = lib::to_u32("matmul", "m·n", elements / width as usize)?;
        let (ws_name, c_name) = if width == 4 { ("ws4", "c4") } else { ("ws", "c") };
        self.launch(
            format!("gemm_splitk_reduce {out} {width}"),
            || gemm::splitk_reduce(out, width),
            gemm::splitk_reduce_dispatch(total),
            &[
                (ws_name, Arg::from(ws)),
                (c_name, Arg::from(c)),
                ("mn", Arg::u32(total)),
                ("total", Arg::u32(total)),
                ("splits", Arg::u32(splits)),
                ("alpha", Arg::f32(1.0)),
                ("beta", Arg::f32(0.0)),
            ],
        )
    }

}
