//! The quantized matmul `C = A · dequant(B)` for 4-bit weights: the kernel
//! [`qmatmul::select`] chooses (or the one a caller names), launched with
//! its buffers, and the weights on the device ([`QuantizedWeights`]).

use crate::{arg_err, host::upload_bytes, Error, Ops, QuantLayout, SplitSum};
use enigma_ir::{Kernel, Scalar, Type};
use enigma_kernels::library::gemm::{self, MatrixArgs, PackedArgs};
use enigma_kernels::library::qmatmul::{self, DecodeArgs, QmatmulKernel, QmatmulProblem, QmatmulSelection};
use enigma_kernels::library::qmatmul_affine::AffineArgs;
use enigma_kernels::library::quant::{self, QuantizedMatrix};
use enigma_kernels::library::{self as lib, qgemm_cooperative, qgemm_fused, DType, Dispatch};
use enigma_runtime::{Buffer, Runtime};

/// The problem `qmatmul` solves for `m` rows of A times `w`.
fn problem(w: &QuantizedWeights, m: usize, out: DType) -> QmatmulProblem {
    QmatmulProblem { format: w.format, layout: w.layout, out, m, n: w.n, k: w.k, group: w.group }
}

impl Ops<'_> {
    /// `C[M, N] = A[M, K] · dequant(B)` for 4-bit weights `w` (FP4 or INT4
    /// in seed 002's layout, or MLX's affine format) and `A` an untyped
    /// buffer of `m × K` f16 values ([`upload`](crate::upload)); `C` is `m × N` of `out`
    /// (f32 or f16), accumulated in f32. Weights in fragment order take
    /// `qmatmul_fragments` up to `qmatmul_fragments::DECODE_ROWS` rows (unless
    /// [`GemmOptions::tile`](crate::GemmOptions::tile), [`GemmOptions::stages`](crate::GemmOptions::stages) or splits summed in the
    /// kernel, [`GemmOptions::split_sum`](crate::GemmOptions::split_sum), ask for the tensor-core GEMM) and the
    /// GEMM above. The decode kernel (M up to `qmatmul::DECODE_ROWS`, FP4
    /// and INT4) sums the products of `qmatmul::WORDS_PER_F16_SUM` packed
    /// words in f16 before widening them (`qmatmul::f16_product_error`),
    /// finite for |a| ≤ `qmatmul::MAX_ABS_A`.
    /// The kernel is [`qmatmul::select`]'s. With
    /// [`GemmOptions::cooperative`](crate::GemmOptions::cooperative)
    /// `Some(true)` it is the quantized GEMM on cooperative tensors
    /// (`qgemm_cooperative`: A, the packed words and the scales staged by
    /// asynchronous copies, the words decoded by the threads into an f16
    /// slice that `matmul2d` multiplies; FP4/INT4 in seed 002's layout, N a
    /// multiple of 8, K split where the output has few tiles), at any M;
    /// never by default, as on the H200 it is no faster than the
    /// tensor-core kernel at any M (`BENCHMARKS.md`).
    pub fn qmatmul(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        self.check_qmatmul_inputs(a, w, m)?;
        let selection = qmatmul::select(&problem(w, m, out), self.rt.device(), &self.options.overrides())?;
        self.launch_qmatmul(a, w, m, out, selection)
    }

    /// [`Ops::qmatmul`] on the tensor-core kernel whatever M: the GEMM's
    /// tiles on SIMD-group matrices, B's packed words and scales staged in
    /// threadgroup memory and each B tile decoded from them
    /// (`gemm::QgemmConfig`; at edge tiles each slice is dequantized into
    /// threadgroup memory instead), each weight rounded to f16 with its
    /// scale. The tile is `gemm::select_tile`'s for M (or
    /// [`GemmOptions::tile`](crate::GemmOptions::tile)) with slices of 64 K values where they divide
    /// the group, four stages where they fit ([`GemmOptions::stages`](crate::GemmOptions::stages)).
    /// `qmatmul` takes it above `qmatmul::DECODE_ROWS` rows.
    /// It reads FP4/INT4 in seed 002's layout only: MLX's affine weights
    /// are an [`Error::Argument`] (`qmatmul` runs them at any M).
    pub fn qmatmul_tiled(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        self.check_qmatmul_inputs(a, w, m)?;
        if w.format.has_biases() {
            return Err(arg_err(
                "qmatmul_tiled",
                format!("the tensor-core kernel reads fp4 or int4 in seed 002's [K/8][N] layout, not {} ([N][K/8] with biases; K = {}, N = {}): use qmatmul", w.format, w.k, w.n),
            ));
        }
        let selection = qmatmul::select_kernel(QmatmulKernel::Tiled, &problem(w, m, out), self.rt.device(), &self.options.overrides())?;
        self.launch_qmatmul(a, w, m, out, selection)
    }

    /// [`Ops::qmatmul`] on seed 002's *fused* kernel
    /// (`qgemm_fused::FusedQgemmConfig`): A's slice in threadgroup memory,
    /// B dequantized per SIMD group through one 8×8 f16 staging fragment
    /// (each weight rounded to f16, as [`Ops::qmatmul_tiled`] does). The
    /// tile is [`GemmOptions::tile`](crate::GemmOptions::tile) where given, else seed 002 §9.1's for
    /// M over 4 SIMD groups; K is split as for `qmatmul_tiled`
    /// ([`GemmOptions::k_splits`](crate::GemmOptions::k_splits), on a GPU by default where the output has few
    /// tiles). The threads are the tile's: an [`Options::threads`](crate::Options::threads) that
    /// differs is an [`Error::Argument`], and so are MLX's affine weights
    /// (FP4/INT4 in seed 002's layout only). `qmatmul` never picks it by
    /// itself.
    pub fn qmatmul_fused(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        let op = "qmatmul_fused";
        self.check_qmatmul_inputs(a, w, m)?;
        if w.layout != QuantLayout::Rows {
            return Err(arg_err(op, format!("the fused kernel reads seed 002's [K/8][N] words, not the {} layout: use qmatmul", w.layout)));
        }
        if w.format.has_biases() {
            return Err(arg_err(op, format!("the fused kernel reads fp4 or int4 in seed 002's [K/8][N] layout, not {} (K = {}, N = {}): use qmatmul", w.format, w.k, w.n)));
        }
        let selection = qmatmul::select_kernel(QmatmulKernel::Fused, &problem(w, m, out), self.rt.device(), &self.options.overrides())?;
        self.launch_qmatmul(a, w, m, out, selection)
    }

    /// Runs `selection` on checked inputs: C of `out`, through an f32
    /// workspace where K is split (the fragment decode row's and the fused
    /// kernel's splits always summed by the reduction; the FP4/INT4 decode
    /// kernel's as its plan says and the tensor-core GEMM's as its
    /// configuration says). The decode kernels' vector loads
    /// need untyped weight buffers of a multiple of the vector's size.
    fn launch_qmatmul(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType, selection: QmatmulSelection) -> Result<Buffer, Error> {
        let op = "qmatmul";
        let (mu, n) = (lib::to_u32(op, "m", m)?, lib::to_u32(op, "n", w.n)?);
        match selection {
            QmatmulSelection::Decode(plan) => {
                let cols = plan.blocking.cols;
                if cols > 1 {
                    let bindable = |b: &Buffer, elem: u32| b.elem().is_none() && b.len_bytes().is_multiple_of((elem * cols) as usize);
                    if !bindable(&w.packed, 4) || !bindable(&w.scales, 2) {
                        return Err(arg_err(op, format!("{cols} columns per thread read the weights as vectors, but `packed` or `scales` is typed or not a multiple of the vector size; upload them untyped (QuantizedWeights::upload) or ask for 1 column per thread")));
                    }
                }
                let c = self.output(out.scalar(), m * w.n)?;
                let a4 = self.vector_view(op, "a", a, Type::vector(Scalar::F16, 4), w.k)?;
                self.launch_split(
                    format!("qmatmul {:?}", (plan.format, plan.out, plan.blocking, plan.threads, (plan.splits > 1).then_some(plan.split_sum))),
                    || plan.kernel(),
                    plan.dispatch,
                    DecodeArgs {
                        a4: &a4,
                        b: &w.packed,
                        b2: &w.packed,
                        b4: &w.packed,
                        scales: &w.scales,
                        scales2: &w.scales,
                        scales4: &w.scales,
                        m: plan.m,
                        n: plan.n,
                        k: plan.k,
                        group_words: plan.group_words(),
                    },
                    &c,
                    out,
                    m * w.n,
                    plan.splits,
                    plan.split_sum,
                )?;
                Ok(c)
            }
            QmatmulSelection::Affine(plan) => {
                let biases = w.biases.as_ref().ok_or_else(|| arg_err(op, format!("{} weights need `biases`", w.format)))?;
                let words = plan.blocking.words;
                if words > 1 && (w.packed.elem().is_some() || !w.packed.len_bytes().is_multiple_of((4 * words) as usize)) {
                    return Err(arg_err(op, format!("{words} packed words per load read the weights as vectors, but `packed` is typed or not a multiple of {} bytes; upload it untyped (QuantizedWeights::upload) or ask for 1 word per load", 4 * words)));
                }
                let c = self.output(out.scalar(), m * w.n)?;
                let a4 = self.vector_view(op, "a", a, Type::vector(Scalar::F16, 4), w.k)?;
                self.launch(
                    format!("qmatmul_affine {:?}", (plan.out, plan.blocking, plan.threads)),
                    || plan.kernel(),
                    plan.dispatch,
                    &AffineArgs {
                        a4: &a4,
                        b: &w.packed,
                        b2: &w.packed,
                        b4: &w.packed,
                        scales: &w.scales,
                        biases,
                        c: &c,
                        m: plan.m,
                        n: plan.n,
                        k: plan.k,
                        group_shift: plan.group_shift(),
                    },
                )?;
                Ok(c)
            }
            QmatmulSelection::FragmentsDecode(plan) => self.launch_packed(op, format!("qmatmul_fragments {:?}", (plan.format, plan.out, plan.blocking, plan.threads, plan.splits > 1)), || plan.kernel(), plan.dispatch, (plan.splits, plan.split_sum), a, w, m, out),
            // The keys name every field: the split count is built into the
            // kernel, not into its name.
            QmatmulSelection::Tiled(cfg) => self.launch_packed(op, format!("qgemm {cfg:?}"), || gemm::qgemm(&cfg), cfg.dispatch(mu, n), (cfg.gemm.splits, cfg.gemm.split_sum), a, w, m, out),
            QmatmulSelection::Cooperative(cfg) => {
                self.launch_packed(op, format!("qgemm_coop {cfg:?}"), || qgemm_cooperative::qgemm_cooperative(&cfg), cfg.dispatch(mu, n), (cfg.splits, cfg.split_sum), a, w, m, out)
            }
            QmatmulSelection::Fused(cfg) => {
                self.launch_packed("qmatmul_fused", format!("qgemm_fused {cfg:?}"), || qgemm_fused::qgemm_fused(&cfg), cfg.dispatch(mu, n), (cfg.splits, SplitSum::Reduction), a, w, m, out)
            }
        }
    }

    /// What both quantized matmuls require of their inputs: the format's
    /// shape rules, `a` an untyped buffer read as f16 (and options that
    /// agree), every buffer large enough, and biases exactly for MLX's
    /// affine format.
    fn check_qmatmul_inputs(&self, a: &Buffer, w: &QuantizedWeights, m: usize) -> Result<(), Error> {
        let op = "qmatmul";
        quant::check_shape(w.format, w.k, w.n, w.group)?;
        quant::check_layout(w.format, w.layout, w.k, w.n)?;
        if let Some(t) = a.elem() {
            return Err(arg_err(op, format!("`a` is a typed buffer of {t}; pass an untyped buffer of f16 (enigma_ops::upload), which the kernel reads as half4")));
        }
        if let Some(e) = self.options.elem.filter(|&e| e != Scalar::F16) {
            return Err(arg_err(op, format!("`a` is read as f16, but the options ask for {e}")));
        }
        self.need(op, "a", a, m.saturating_mul(w.k), Scalar::F16)?;
        self.need(op, "packed", &w.packed, w.k / quant::VALUES_PER_WORD * w.n, Scalar::U32)?;
        self.need(op, "scales", &w.scales, w.k / w.group * w.n, Scalar::F16)?;
        match (&w.biases, w.format.has_biases()) {
            (Some(b), true) => self.need(op, "biases", b, w.k / w.group * w.n, Scalar::F16)?,
            (None, false) => {}
            (Some(_), false) => return Err(arg_err(op, format!("{} weights have no biases, but `biases` is given", w.format))),
            (None, true) => return Err(arg_err(op, format!("{} weights need `biases` ({} f16 values: K = {}, N = {}, group {})", w.format, w.k / w.group * w.n, w.k, w.n, w.group))),
        }
        Ok(())
    }


    /// Runs a tensor-core quantized kernel (`key` and `build` as for
    /// `launch`) on `a` (`m` rows) and `w` with `splits` K splits: C of
    /// `out`, through an f32 workspace and the reduction where split.
    #[allow(clippy::too_many_arguments)]
    fn launch_packed(&self, op: &str, key: String, build: impl FnOnce() -> Kernel, dispatch: Dispatch, (splits, sum): (u32, SplitSum), a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        let (mu, n, k) = (lib::to_u32(op, "m", m)?, lib::to_u32(op, "n", w.n)?, lib::to_u32(op, "k", w.k)?);
        let c = self.output(out.scalar(), m * w.n)?;
        let a4 = self.vector_view(op, "a", a, Type::vector(Scalar::F16, 4), w.k)?;
        self.launch_split(
            key,
            build,
            dispatch,
            (MatrixArgs { a, a4: &a4, b: &w.packed, m: mu, n, k }, PackedArgs { scales: &w.scales, group: lib::to_u32(op, "group", w.group)?, biases: w.biases.as_ref() }),
            &c,
            out,
            m * w.n,
            splits,
            sum,
        )?;
        Ok(c)
    }

}

// ----- 4-bit weights ------------------------------------------------------

/// 4-bit weights on a device in the layout of their format (see
/// [`enigma_kernels::library::quant`]): for FP4/INT4 (seed 002) `packed`
/// holds `K/8 × N` u32 words and `scales` `K/group × N` f16 values; for
/// MLX's affine format `packed` holds `N × K/8` words, `scales` and
/// `biases` `N × K/group` f16 values. All untyped (so that the kernels can
/// read them as vectors).
#[derive(Debug)]
pub struct QuantizedWeights {
    pub format: quant::Format,
    pub k: usize,
    pub n: usize,
    pub group: usize,
    pub packed: Buffer,
    pub scales: Buffer,
    /// The f16 bias per group of MLX's affine format; `None` for FP4/INT4.
    pub biases: Option<Buffer>,
    /// How `packed` lies: the format's own layout, or (FP4, INT4) the
    /// tensor cores' fragment order ([`QuantizedWeights::upload_in`]), which
    /// the fragment decode row reads up to 16 rows and the GEMMs (on
    /// cooperative tensors where products are `wgmma`) above.
    pub layout: QuantLayout,
}

impl QuantizedWeights {
    /// Uploads a quantized matrix of any format (its lengths checked).
    pub fn upload(rt: &Runtime, q: &QuantizedMatrix) -> Result<QuantizedWeights, Error> {
        QuantizedWeights::upload_in(rt, q, QuantLayout::Rows)
    }

    /// Uploads a quantized matrix with its words packed in `layout`
    /// ([`QuantizedMatrix::packed_in`]: fragment order needs FP4 or INT4, K a
    /// multiple of 64 and N of 16).
    pub fn upload_in(rt: &Runtime, q: &QuantizedMatrix, layout: QuantLayout) -> Result<QuantizedWeights, Error> {
        // `upload_words` checks the parts; `packed_in` before reordering.
        let reordered;
        let words: &[u32] = match layout {
            QuantLayout::Rows => &q.packed,
            _ => {
                reordered = q.packed_in(layout)?;
                &reordered
            }
        };
        QuantizedWeights::upload_words(rt, q.format, layout, [q.k, q.n, q.group], words, &q.scales, &q.biases)
    }

    /// Uploads packed words already in `layout` (as
    /// [`QuantizedMatrix::packed_in`] gives them, or a file holds them), with
    /// their scales and biases (empty unless the format has biases), for a
    /// `k × n` matrix in groups of `group`: checked (the shape, the layout's
    /// units, each part's length) but not reordered, so no host pass over
    /// the words.
    pub fn upload_words(rt: &Runtime, format: quant::Format, layout: QuantLayout, [k, n, group]: [usize; 3], words: &[u32], scales: &[u16], biases: &[u16]) -> Result<QuantizedWeights, Error> {
        quant::check_parts(format, k, n, group, [words.len(), scales.len(), biases.len()])?;
        quant::check_layout(format, layout, k, n)?;
        let halves = |v: &[u16]| upload_bytes(rt, v.iter().flat_map(|s| s.to_le_bytes()).collect());
        let packed = upload_bytes(rt, words.iter().flat_map(|w| w.to_le_bytes()).collect())?;
        let biases = if format.has_biases() { Some(halves(biases)?) } else { None };
        Ok(QuantizedWeights { format, k, n, group, packed, scales: halves(scales)?, biases, layout })
    }
}

/// Quantizes the `k × n` row-major f32 matrix `w` to `format` with `group`
/// K values per scale (host side; see [`enigma_kernels::library::quant`]).
pub fn quantize_weights(format: quant::Format, w: &[f32], k: usize, n: usize, group: usize) -> Result<QuantizedMatrix, Error> {
    Ok(quant::quantize(format, w, k, n, group)?)
}

/// The `k × n` row-major f32 matrix a quantized matrix stands for.
pub fn dequantize_weights(q: &QuantizedMatrix) -> Result<Vec<f32>, Error> {
    Ok(q.dequantize()?)
}

