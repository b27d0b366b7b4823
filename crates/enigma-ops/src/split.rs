//! The launch the matrix products share: a kernel whose K may be split
//! over threadgroups (workspace, tickets, the reduction's second pass),
//! and the tickets of any kernel that merges its own splits.

use crate::{Error, Ops, SplitSum};
use enigma_ir::{Kernel, Scalar};
use enigma_kernels::library::args::KernelArgs;
use enigma_kernels::library::split::{SplitArgs, SplitReduceArgs};
use enigma_kernels::library::{self as lib, split, DType, Dispatch};
use enigma_runtime::Buffer;

impl Ops<'_> {
    /// Runs a kernel whose C (`c`, `elements` of `out`) may be split over K
    /// (`splits`, summed as `sum` says): unsplit it writes `c`; split, its
    /// partial tiles go to an f32 workspace (`splits · elements`), which
    /// either the kernel sums into `c` with a zeroed ticket per tile (as
    /// many as the dispatch's threadgroups over the splits) or the
    /// reduction's second dispatch does. `args` are the kernel's other
    /// arguments, bound beside [`SplitArgs`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_split<'b>(&self, key: String, build: impl FnOnce() -> Kernel, dispatch: Dispatch, args: impl KernelArgs<'b, Buffer>, c: &Buffer, out: DType, elements: usize, splits: u32, sum: SplitSum) -> Result<(), Error> {
        if splits <= 1 {
            return self.launch(key, build, dispatch, &(args, SplitArgs { c, c_words: Some(c), ws: None, tickets: None }));
        }
        let workspace = self.output(Scalar::F32, elements.saturating_mul(splits as usize))?;
        if sum == SplitSum::Reduction {
            self.launch(key, build, dispatch, &(args, SplitArgs { c: &workspace, c_words: None, ws: None, tickets: None }))?;
            return self.splitk_reduce(&workspace, c, out, splits, elements);
        }
        let [x, y, z] = dispatch.size;
        let count = (x as usize) * (y as usize) * (z / splits) as usize;
        self.with_tickets(count, |tickets| self.launch(key, build, dispatch, &(args, SplitArgs { c, c_words: None, ws: Some(&workspace), tickets: Some(tickets) })))
    }

    /// Runs `launch` with `count` zeroed u32 tickets for a kernel that
    /// merges its own splits (each such dispatch leaves them at zero), kept
    /// per stream and count for the next call.
    pub(crate) fn with_tickets(&self, count: usize, launch: impl FnOnce(&Buffer) -> Result<(), Error>) -> Result<(), Error> {
        let slot = (self.rt.stream(), count);
        let cached = self.pipelines.lock().tickets.remove(&slot);
        let tickets = match cached {
            Some(t) => t,
            None => self.rt.buffer_zeroed::<u32>(count)?,
        };
        // A dispatch that failed may have left tickets taken: those are dropped.
        launch(&tickets)?;
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
        self.launch(
            format!("gemm_splitk_reduce {out} {width}"),
            || split::splitk_reduce(out, width),
            split::splitk_reduce_dispatch(total),
            &SplitReduceArgs { ws, ws4: ws, c, c4: c, mn: total, total, splits, alpha: 1.0, beta: 0.0 },
        )
    }

}
