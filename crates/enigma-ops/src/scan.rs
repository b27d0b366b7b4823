//! Prefix sums: block scans level by level, then the offsets added back;
//! cumulative sums and products over any axis.

use crate::{Error, KernelType, Ops};
use enigma_ir::{Scalar, Type};
use enigma_kernels::library::reduce::AxisRowArgs;
use enigma_kernels::library::scan::{self, AxisChunkArgs, AxisScan, AxisScanPlan, ChunkPass, RowScanArgs, ScanArgs, ScanKind};
use enigma_kernels::library::ReduceOp;
use enigma_runtime::Buffer;

impl Ops<'_> {

    /// The inclusive or exclusive prefix sum of `n` elements (f32, i32 or
    /// u32, sums in that type); `y` is padded to whole vectors when the
    /// vector kernel runs.
    pub fn prefix_sum(&self, x: &Buffer, n: usize, kind: ScanKind) -> Result<Buffer, Error> {
        let name = format!("scan_{}", kind.name());
        let elem = self.elem_of(&name, x)?;
        self.need(&name, "x", x, n, elem)?;
        let vec = self.vectorize(&name, &[x], Type::vector(elem, 4), true)?;
        let items = self.options.scan.items.unwrap_or(scan::DEFAULT_ITEMS);
        let threads = self.options.threads.unwrap_or(scan::DEFAULT_THREADS);
        let plan = scan::plan(elem, kind, n, vec, threads, items)?;
        let y = self.flat_output(elem, n, vec)?;
        // Level i scans `input_i` into `output_i` and writes block totals,
        // which are level i+1's input (scanned in place). Level 0, when it
        // has more than one block, is a reduce-then-scan: its first pass
        // only writes the totals, and its add-back is a second scan of
        // the input with the offsets added (`BlockPass`).
        let mut sums: Vec<Buffer> = vec![];
        for level in &plan.levels {
            sums.push(self.output(elem, level.blocks as usize)?);
        }
        let split_first = plan.levels[0].blocks > 1;
        for (i, level) in plan.levels.iter().enumerate() {
            let (input, output) = if i == 0 { (x, &y) } else { (&sums[i - 1], &sums[i - 1]) };
            let pass = if i == 0 && split_first { scan::BlockPass::TotalOnly } else { scan::BlockPass::ScanAndTotal };
            self.launch(
                format!("scan_block {:?}", (elem, level.vec, level.kind, pass, plan.items)),
                || scan::scan_block(elem, level.vec, level.kind, pass, plan.items),
                level.scan,
                &ScanArgs { x: Some(input), x4: Some(input), y: Some(output), y4: Some(output), block_sums: Some(&sums[i]), offsets: None, n: level.n },
            )?;
        }
        for (i, level) in plan.levels.iter().enumerate().rev() {
            let Some(add) = level.add else { continue };
            if i == 0 {
                let first = plan.levels[0];
                self.launch(
                    format!("scan_block {:?}", (elem, first.vec, first.kind, scan::BlockPass::ScanWithOffset, plan.items)),
                    || scan::scan_block(elem, first.vec, first.kind, scan::BlockPass::ScanWithOffset, plan.items),
                    first.scan,
                    &ScanArgs { x: Some(x), x4: Some(x), y: Some(&y), y4: Some(&y), block_sums: None, offsets: Some(&sums[0]), n: first.n },
                )?;
            } else {
                let output = &sums[i - 1];
                self.launch(
                    format!("scan_add {:?}", (elem, level.vec, plan.items)),
                    || scan::scan_add(elem, level.vec, plan.items),
                    add,
                    &ScanArgs { x: None, x4: None, y: Some(output), y4: Some(output), block_sums: None, offsets: Some(&sums[i]), n: level.n },
                )?;
            }
        }
        Ok(y)
    }

    /// The inclusive running sum or product over the middle axis of
    /// `[outer, axis, inner]` (f32, f16, bf16, i32, u32; floats accumulate
    /// in f32), an output of the input's shape and type, in the form
    /// `library::scan::plan_axis_scan` chooses: a sum over one whole vector
    /// of f32, i32 or u32 takes the parallel prefix sum, of f16 or bf16 the
    /// blocked scan (blocks from f32 offsets, below); the last axis of long
    /// rows (or of rows too few to fill the GPU) a threadgroup per row; an
    /// axis whose columns are too few to fill the GPU a thread each runs by
    /// chunks of the axis (a totals pass, then a scan pass from the chunks'
    /// running totals); everything else one thread per column.
    pub fn scan_axis(&self, op: AxisScan, x: &Buffer, outer: usize, axis: usize, inner: usize) -> Result<Buffer, Error> {
        let name = format!("{}_axis", op.name());
        let elem = self.elem_of(&name, x)?;
        let n = outer.saturating_mul(axis).saturating_mul(inner);
        self.need(&name, "x", x, n, elem)?;
        let vector_ok = self.options.vectorize != Some(false) && x.viewed_as(Type::vector(elem, 4)).is_some();
        match scan::plan_axis_scan(op, elem, outer, axis, inner, self.threads(KernelType::Elementwise), vector_ok)? {
            AxisScanPlan::PrefixSum => self.prefix_sum(x, n, ScanKind::Inclusive),
            AxisScanPlan::Blocked => self.scan_blocked_f32(x, elem, n),
            AxisScanPlan::Rows => {
                let y = self.output(elem, n)?;
                self.scan_rows_into(op, x, &y, elem, n, axis, None)?;
                Ok(y)
            }
            AxisScanPlan::Columns(plan) => {
                let y = self.output(elem, n)?;
                self.launch(format!("scan_axis {:?}", (op, elem)), || scan::scan_axis(op, elem), plan.dispatch, &(AxisRowArgs { x, y: &y }, plan.args()))?;
                Ok(y)
            }
            AxisScanPlan::Chunks(plan) => self.scan_axis_chunks(&plan, x, n),
        }
    }

    /// The running sum or product over an axis by chunks: the chunks'
    /// totals, then each chunk's scan from the totals of those before it.
    fn scan_axis_chunks(&self, plan: &scan::AxisChunksPlan, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        let y = self.output(plan.scalar, n)?;
        let totals = self.output(plan.totals_scalar(), plan.totals_len())?;
        let view = |b: &Buffer, s: Scalar| if plan.vec == 4 { b.viewed_as(Type::vector(s, 4)).unwrap_or_else(|| b.clone()) } else { b.clone() };
        let (x, y4, totals) = (view(x, plan.scalar), view(&y, plan.scalar), view(&totals, plan.totals_scalar()));
        for pass in [ChunkPass::Totals, ChunkPass::Scan] {
            let args = AxisChunkArgs { x: &x, x4: &x, y: Some(&y4), y4: Some(&y4), totals: &totals, totals4: &totals };
            self.launch(format!("scan_axis_chunks {:?}", (plan.op, plan.scalar, plan.vec, pass)), || plan.kernel(pass), plan.dispatch, &(args, plan.args()))?;
        }
        Ok(y)
    }

    /// The running sum of a whole f16 or bf16 vector of `n` elements, in
    /// f32 throughout: blocks of `library::scan::SCAN_BLOCK` summed by the
    /// row reduction (every block but the last), those totals scanned by
    /// the f32 prefix sum, then each block scanned by the row scan from
    /// the total of the blocks before it.
    fn scan_blocked_f32(&self, x: &Buffer, elem: Scalar, n: usize) -> Result<Buffer, Error> {
        let d = scan::SCAN_BLOCK;
        let full = n.div_ceil(d) - 1;
        let offsets = self.reduce_rows(ReduceOp::Sum, x, full, d)?;
        let offsets = self.with_f32(|ops| ops.prefix_sum(&offsets, full, ScanKind::Inclusive))?;
        let y = self.output(elem, n)?;
        self.scan_rows_into(AxisScan::Sum, x, &y, elem, n, d, Some(&offsets))?;
        Ok(y)
    }

    /// The row scan of `n` elements in rows of `d` into `y`, each row `r > 0`
    /// starting from `offsets[r - 1]` where given.
    #[allow(clippy::too_many_arguments)]
    fn scan_rows_into(&self, op: AxisScan, x: &Buffer, y: &Buffer, elem: Scalar, n: usize, d: usize, offsets: Option<&Buffer>) -> Result<(), Error> {
        let vector = Type::vector(elem, 4);
        let (x4, y4) = (x.viewed_as(vector), y.viewed_as(vector));
        let vector_ok = self.options.vectorize != Some(false) && x4.is_some() && y4.is_some();
        let plan = scan::plan_scan_rows(op, elem, n, d, self.threads(KernelType::RowReduction { d }), vector_ok, offsets.is_some())?;
        let args = RowScanArgs { x, x4: x4.as_ref(), y, y4: y4.as_ref(), offsets, d: plan.d, n: plan.n };
        self.launch(format!("scan_rows {:?}", (plan.op, plan.scalar, plan.vec, plan.threads, plan.offsets)), || plan.kernel(), plan.dispatch, &args)
    }
}
