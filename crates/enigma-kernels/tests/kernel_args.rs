//! Each kernel family's arguments ([`enigma_kernels::kernel_args!`]) and its
//! kernels agree: every parameter of every kernel a family builds is a
//! field of the family's arguments (with `split::SplitArgs` where K may be
//! split), every field is a parameter of one of them, and a launch filled
//! as `enigma-ops` fills it binds each kernel. A builder that declared a
//! parameter under a name of its own, or a field no kernel reads, fails
//! here; `enigma-ops`' registry tests bind every launcher on the simulator.

use enigma_ir::{Kernel, Literal};
use enigma_kernels::library::args::{Bound, KernelArgs};
use enigma_kernels::library::attention::{self, CombineArgs, FusedConfig, FusedDecodeArgs, ScoresArgs, WeightedSumArgs};
use enigma_kernels::library::attention_prefill::{self, PrefillArgs, PrefillConfig, PrefillTile};
use enigma_kernels::library::attention_prefill_cooperative;
use enigma_kernels::library::conv_implicit::{self, ChannelsLastArgs, ImplicitConvArgs, ImplicitConvConfig, WeightsByTapArgs};
use enigma_kernels::library::conv::{self, ConvArgs, ConvDims, DepthwiseArgs, DepthwiseConfig, DepthwiseDims, DepthwiseRowsArgs, DepthwiseRowsDims, Im2colArgs};
use enigma_kernels::library::elementwise::{self, BroadcastArgs, BroadcastLayout, CopyArgs, Elementwise, ElementwiseArgs, InnerAccess, RepeatArgs};
use enigma_kernels::library::gemm::{self, GemmConfig, MatrixArgs, PackedArgs, PlainArgs, QgemmConfig};
use enigma_kernels::library::gemv::{self, GemvArgs};
use enigma_kernels::library::norm::{self, NormArgs};
use enigma_kernels::library::qmatmul::{self, DecodeArgs};
use enigma_kernels::library::qmatmul_affine::{self, AffineArgs};
use enigma_kernels::library::quant::Format;
use enigma_kernels::library::reduce::{self, AxisArgs, AxisBlocks, AxisBlocksArgs, AxisBlocksDims, AxisReduceArgs, AxisReduction, AxisRowArgs, Pool, PoolArgs, PoolDims, ReduceArgs, RowReduceArgs};
use enigma_kernels::library::scan::{self, AxisChunkArgs, AxisChunkDims, AxisScan, BlockPass, ChunkPass, RowScanArgs, ScanArgs, ScanKind};
use enigma_kernels::library::softmax::{self, NllArgs, RowArgs};
use enigma_kernels::library::split::{self, SplitArgs, SplitReduceArgs, SplitSum};
use enigma_kernels::library::{qgemm_cooperative, qgemm_fused, qmatmul_fragments, sgemm, DType, ReduceOp};
use enigma_ir::Scalar;

/// Checks one family: `kernels` bind through `args` (every parameter found,
/// in the kernel's order), and the union of their parameters is `names`.
fn family<'s>(label: &str, kernels: Vec<Kernel>, names: &[&[&str]], args: &impl KernelArgs<'s, str>) {
    assert!(!kernels.is_empty(), "{label}: no kernels");
    let mut used = std::collections::BTreeSet::new();
    for kernel in &kernels {
        let bound = args.bind(kernel).unwrap_or_else(|e| panic!("{label}: {e}"));
        for (param, arg) in kernel.params.iter().zip(&bound) {
            // Each buffer field holds its own name below: a parameter bound
            // to another field's buffer would show here.
            if let Bound::Buffer(name) = arg {
                assert_eq!(*name, param.name, "{label}: {}", kernel.name);
            }
            used.insert(param.name.clone());
        }
    }
    let declared: std::collections::BTreeSet<String> = names.iter().flat_map(|n| n.iter().map(|s| s.to_string())).collect();
    assert_eq!(used, declared, "{label}: the parameters its kernels declare and its arguments' fields");
}

/// The fused decode's arguments with every buffer given, each holding its
/// name.
fn fused_decode_args() -> FusedDecodeArgs<&'static str> {
    FusedDecodeArgs {
        q: "q",
        q4: "q4",
        q8: "q8",
        k: "k",
        k4: "k4",
        k8: "k8",
        v: "v",
        v4: "v4",
        v8: "v8",
        out: Some("out"),
        lse: Some("lse"),
        partial_ml: Some("partial_ml"),
        partial_acc: Some("partial_acc"),
        seq_lens: Some("seq_lens"),
        tickets: Some("tickets"),
        s_len: 1,
        d: 1,
        scale: 1.0,
        group: 1,
        split_len: 1,
    }
}

#[test]
fn every_family_binds_its_kernels_by_its_arguments() {
    let dtypes = DType::ALL;
    let mut kernels = vec![];
    for dtype in dtypes {
        for vec in [1, 4] {
            kernels.extend(Elementwise::ALL.map(|op| elementwise::elementwise(op, dtype, vec)));
        }
        if dtype != DType::F32 {
            kernels.extend(Elementwise::ALL.map(|op| elementwise::elementwise_packed(op, dtype)));
        } else {
            kernels.extend(Elementwise::ALL.map(elementwise::elementwise_pairs));
        }
    }
    let args = ElementwiseArgs { x: "x", x4: "x4", x8: Some("x8"), b: Some("b"), b4: Some("b4"), b8: Some("b8"), y: "y", y4: "y4", y8: Some("y8"), n: 1, factor: 2.0 };
    family("elementwise", kernels, &[ElementwiseArgs::NAMES], &args);
    use InnerAccess::{Contiguous, Splat};
    // Every view and every outer rank's layout values between them.
    let broadcasts = vec![
        elementwise::broadcast_binary(Elementwise::Add, DType::F16, 4, [Contiguous, Splat], 1),
        elementwise::broadcast_binary(Elementwise::Mul, DType::F32, 1, [Splat, Contiguous], elementwise::MAX_OUTER_DIMS),
        elementwise::broadcast_binary(Elementwise::Div, DType::BF16, 4, [Contiguous, Contiguous], 3),
    ];
    let args = BroadcastArgs { a: "a", a4: Some("a4"), b: "b", b4: Some("b4"), y: "y", y4: Some("y4"), units: 1, total: 1 };
    family("broadcast", broadcasts, &[BroadcastArgs::NAMES, &BroadcastLayout::NAMES], &(args, BroadcastLayout([1; BroadcastLayout::LEN])));
    family("copy", vec![elementwise::copy(Scalar::U32)], &[CopyArgs::NAMES], &CopyArgs { src: "src", dst: "dst", n: 1 });
    family("repeat", vec![elementwise::repeat(Scalar::BF16)], &[RepeatArgs::NAMES], &RepeatArgs { src: "src", dst: "dst", len: 3, n: 7 });

    let reduce_kernels = [1, 4].into_iter().flat_map(|vec| ReduceOp::ALL.map(|op| reduce::reduce(op, DType::F32, vec, 4))).collect();
    family("reduce", reduce_kernels, &[ReduceArgs::NAMES], &ReduceArgs { x: "x", x4: "x4", out: "out", n: 1 });
    let mut rows: Vec<Kernel> = [1, 4].into_iter().map(|vec| reduce::reduce_rows(ReduceOp::Sum, DType::BF16, vec)).collect();
    rows.push(reduce::arg_rows(AxisReduction::ArgMax, DType::F16, 64));
    family("row reductions", rows, &[RowReduceArgs::NAMES], &RowReduceArgs { x: "x", x4: "x4", out: "out", d: 1 });
    let axis = AxisArgs { axis: 1, inner: 1, columns: 1 };
    family("axis reductions", vec![reduce::reduce_axis(AxisReduction::ArgMin, DType::F32)], &[AxisReduceArgs::NAMES, AxisArgs::NAMES], &(AxisReduceArgs { x: "x", out: "out" }, axis));
    let axis_rows = vec![softmax::softmax_axis(DType::F16, true), scan::scan_axis(AxisScan::Product, Scalar::I32)];
    family("axis rows", axis_rows, &[AxisRowArgs::NAMES, AxisArgs::NAMES], &(AxisRowArgs { x: "x", y: "y" }, axis));
    let nll = NllArgs { logp: "logp", target: "target", loss: "loss", valid: "valid", ignore: -100 };
    family("nll", vec![softmax::nll_axis(DType::BF16)], &[NllArgs::NAMES, AxisArgs::NAMES], &(nll, axis));
    let blocks = |r, vec, of_partials, partial| reduce::reduce_axis_blocks(&AxisBlocks { r, dtype: DType::F16, vec, threads: 128, of_partials, partial });
    let axis_blocks = vec![
        blocks(AxisReduction::Value(ReduceOp::Sum), 4, false, false),
        blocks(AxisReduction::ArgMax, 1, false, true),
        blocks(AxisReduction::ArgMax, 4, true, false),
        blocks(AxisReduction::ArgMin, 1, true, false),
    ];
    let args = AxisBlocksArgs { x: "x", x4: "x4", xi: Some("xi"), xi4: Some("xi4"), out: "out", out_index: "out_index", out_value: Some("out_value") };
    let dims = AxisBlocksDims { axis: 1, units: 1, col_blocks: 1, splits: 1, chunk: 1, scale: 1.0 };
    family("blocked axis reductions", axis_blocks, &[AxisBlocksArgs::NAMES, AxisBlocksDims::NAMES], &(args, dims));
    let dims = PoolDims { h: 1, w: 1, oh: 1, ow: 1, kh: 1, kw: 1, sh: 1, sw: 1, ph: 0, pw: 0 };
    family("pool", vec![reduce::pool2d(Pool::Max, DType::F32)], &[PoolArgs::NAMES, PoolDims::NAMES], &(PoolArgs { x: "x", y: "y", total: 1 }, dims));
    let dims = ConvDims { c_in: 1, in_h: 1, in_w: 1, c_out: 1, out_h: 1, out_w: 1, kh: 1, kw: 1, sh: 1, sw: 1, ph: 0, pw: 0, dh: 1, dw: 1, groups: 1 };
    let args = ConvArgs { x: "x", w: "w", bias: "bias", y: "y", has_bias: 1, total: 1 };
    family("conv", vec![conv::conv2d(DType::F16)], &[ConvArgs::NAMES, ConvDims::NAMES], &(args, dims));
    let depthwise = DepthwiseConfig { dtype: DType::F32, kernel: [3, 5], stride: [2, 1], dilation: [1, 2] };
    let args = DepthwiseArgs { x: "x", w: "w", bias: "bias", y: "y", has_bias: 0 };
    let sizes = DepthwiseDims { c_in: 1, in_h: 1, in_w: 1, c_out: 1, out_h: 1, out_w: 1, ph: 0, pw: 0, tiles: 1, tiles_w: 1 };
    family("depthwise", vec![conv::conv2d_depthwise(&depthwise)], &[DepthwiseArgs::NAMES, DepthwiseDims::NAMES], &(args, sizes));
    let rows = vec![conv::conv2d_depthwise_rows(&conv::RowWindow { dtype: DType::BF16, kernel: [5, 3], pw: 2 }), conv::conv2d_depthwise_rows(&conv::RowWindow { dtype: DType::F32, kernel: [1, 1], pw: 0 })];
    let args = DepthwiseRowsArgs { x: "x", x_words: "x_words", w: "w", bias: "bias", y_words: "y_words", has_bias: 0 };
    let sizes = DepthwiseRowsDims { c_in: 1, in_h: 1, in_w: 1, c_out: 1, out_h: 1, out_w: 1, ph: 0, threads: 1 };
    family("depthwise rows", rows, &[DepthwiseRowsArgs::NAMES, DepthwiseRowsDims::NAMES], &(args, sizes));
    let rows = conv::RowWindow { dtype: DType::F16, kernel: [3, 3], pw: 1 };
    let unfoldings = vec![conv::im2col(DType::BF16), conv::im2col_packed(DType::F16), conv::im2col_packed(DType::F32), conv::im2col_rows(&rows)];
    family("im2col", unfoldings, &[Im2colArgs::NAMES, ConvDims::NAMES], &(Im2colArgs { x: "x", col: "col", x_words: Some("x_words"), total: 1 }, dims));
    let implicit = [(DType::F16, true, true), (DType::BF16, false, false)]
        .map(|(dtype, row_bias, staged)| conv_implicit::conv2d_implicit(&ImplicitConvConfig { dtype, tm: 64, tn: 128, tk: 64, stages: 3, row_bias, staged }));
    let args = ImplicitConvArgs { x_last: "x_last", w: "w", y: Some("y"), y_words: Some("y_words"), bias: Some("bias") };
    family("implicit conv", implicit.to_vec(), &[ImplicitConvArgs::NAMES, ConvDims::NAMES], &(args, dims));
    let args = WeightsByTapArgs { w: "w", w_by_tap: "w_by_tap", taps: 9, c_in: 64, total: 1 };
    family("weights by tap", vec![conv_implicit::conv_weights_by_tap(DType::F16)], &[WeightsByTapArgs::NAMES], &args);
    let args = ChannelsLastArgs { x: "x", x_last: "x_last", c_in: 64, pixels: 1 };
    family("channels last", vec![conv_implicit::conv_input_channels_last(DType::BF16)], &[ChannelsLastArgs::NAMES], &args);

    let softmaxes = [1, 4].into_iter().flat_map(|vec| [softmax::softmax(DType::F32, vec, 2), softmax::log_softmax(DType::F16, vec, 0)]).collect();
    family("row softmax", softmaxes, &[RowArgs::NAMES], &RowArgs { x: "x", x4: "x4", y: "y", y4: "y4", d: 1 });
    let mut norms: Vec<_> = [1, 4].into_iter().flat_map(|vec| [norm::rms_norm(DType::F32, vec, 2), norm::layer_norm(DType::F16, vec, 0)]).collect();
    for (dtype, vec) in [(DType::F32, 1), (DType::F16, 4), (DType::BF16, 8)] {
        norms.extend([false, true].map(|layer| norm::norm_lanes(norm::LanesConfig { dtype, vec, lanes: 16, items: 2 }, layer)));
    }
    let args = NormArgs { x: "x", x4: "x4", x8: Some("x8"), w: "w", w4: "w4", w8: Some("w8"), b: Some("b"), b4: Some("b4"), b8: Some("b8"), y: "y", y4: "y4", y8: Some("y8"), d: 1, rows: 1, eps: 1e-5 };
    family("norms", norms, &[NormArgs::NAMES], &args);

    let mut scans = vec![];
    for vec in [1, 4] {
        for pass in [BlockPass::ScanAndTotal, BlockPass::TotalOnly, BlockPass::ScanWithOffset] {
            scans.push(scan::scan_block(Scalar::F32, vec, ScanKind::Exclusive, pass, 2));
        }
        scans.push(scan::scan_add(Scalar::U32, vec, 1));
    }
    let args = ScanArgs { x: Some("x"), x4: Some("x4"), y: Some("y"), y4: Some("y4"), block_sums: Some("block_sums"), offsets: Some("offsets"), n: 1 };
    family("scans", scans, &[ScanArgs::NAMES], &args);
    let row_scans = vec![scan::scan_rows(AxisScan::Sum, Scalar::F16, 4, 64, true), scan::scan_rows(AxisScan::Product, Scalar::I32, 1, 32, false)];
    let args = RowScanArgs { x: "x", x4: Some("x4"), y: "y", y4: Some("y4"), offsets: Some("offsets"), d: 1, n: 1 };
    family("row scans", row_scans, &[RowScanArgs::NAMES], &args);
    let chunk_scans = vec![scan::scan_axis_chunks(AxisScan::Sum, Scalar::BF16, 4, ChunkPass::Totals), scan::scan_axis_chunks(AxisScan::Product, Scalar::U32, 1, ChunkPass::Scan), scan::scan_axis_chunks(AxisScan::Sum, Scalar::F16, 4, ChunkPass::Scan)];
    let args = AxisChunkArgs { x: "x", x4: "x4", y: Some("y"), y4: Some("y4"), totals: "totals", totals4: "totals4" };
    let dims = AxisChunkDims { axis: 1, units: 1, col_blocks: 1, splits: 1, chunk: 1 };
    family("chunk scans", chunk_scans, &[AxisChunkArgs::NAMES, AxisChunkDims::NAMES], &(args, dims));

    let gemvs = vec![gemv::gemv(DType::F32, 1, 2, 2, false), gemv::gemv(DType::F16, 4, 2, 2, true), gemv::gemv(DType::BF16, 8, 4, 1, true)];
    family("gemv", gemvs, &[GemvArgs::NAMES], &GemvArgs { w: "w", w4: "w4", w8: "w8", x: "x", x4: "x4", y: "y", m: 1, k: 1 });
}

#[test]
fn the_matrix_and_attention_families_bind_their_kernels() {
    let matrix = MatrixArgs { a: "a", a4: "a4", b: "b", m: 1, n: 1, k: 1 };
    let split = SplitArgs { c: "c", c_words: Some("c_words"), ws: Some("ws"), tickets: Some("tickets") };
    let plain = vec![
        gemm::gemm(&GemmConfig::new(DType::F16, DType::F32)),
        gemm::gemm(&GemmConfig { splits: 2, split_sum: SplitSum::LastThreadgroup, ..GemmConfig::new(DType::BF16, DType::F32) }),
        sgemm::sgemm(&sgemm::SgemmConfig::new(DType::F32)),
        gemm::gemm_cooperative(&gemm::CoopGemmConfig { input: DType::F16, output: DType::F16, tm: 64, tn: 64, tk: 64, stages: 2, raster: 1, persistent: false, row_bias: false, staged: true, tile_copies: false }),
        gemm::gemm_cooperative(&gemm::CoopGemmConfig { input: DType::F16, output: DType::F32, tm: 64, tn: 64, tk: 64, stages: 2, raster: 1, persistent: true, row_bias: false, staged: false, tile_copies: false }),
        gemm::gemm_cooperative(&gemm::CoopGemmConfig { input: DType::F16, output: DType::F16, tm: 64, tn: 64, tk: 64, stages: 2, raster: 1, persistent: false, row_bias: true, staged: true, tile_copies: false }),
    ];
    let args = ((matrix, PlainArgs { b4: "b4", alpha: 1.0, beta: 0.0, a_stride: 1, batch: 1, bias: Some("bias") }), split);
    family("plain products", plain, &[MatrixArgs::NAMES, PlainArgs::NAMES, SplitArgs::NAMES], &args);

    let packed = vec![
        gemm::qgemm(&QgemmConfig::for_rows(Format::Int4, DType::F16, 64)),
        qgemm_fused::qgemm_fused(&qgemm_fused::FusedQgemmConfig::for_rows(Format::Fp4, DType::F32, 16)),
        qmatmul_fragments::qmatmul_fragments(Format::Int4, DType::F16, qmatmul_fragments::FragmentBlocking { units: 1, rows: 16, steps: 2 }, 128),
        qgemm_cooperative::qgemm_cooperative(&qgemm_cooperative::CoopQgemmConfig { format: Format::Fp4, output: DType::F16, tm: 64, tn: 64, tk: 64, stages: 2, raster: 1, splits: 1, split_sum: enigma_kernels::library::split::SplitSum::Reduction, whole: false, tile_copies: false, layout: enigma_ir::QuantLayout::Rows }),
        // MLX's affine weights: the biases too.
        qgemm_cooperative::qgemm_cooperative(&qgemm_cooperative::CoopQgemmConfig { format: Format::MlxAffine, output: DType::F16, tm: 64, tn: 64, tk: 64, stages: 2, raster: 1, splits: 1, split_sum: enigma_kernels::library::split::SplitSum::Reduction, whole: false, tile_copies: true, layout: enigma_ir::QuantLayout::Columns }),
    ];
    let args = ((matrix, PackedArgs { scales: "scales", group: 64, biases: Some("biases") }), SplitArgs { c_words: None, ws: None, tickets: None, ..split });
    // No packed kernel sums its own splits.
    let names: Vec<&str> = SplitArgs::NAMES.iter().copied().filter(|n| *n == SplitArgs::C).collect();
    family("packed products", packed, &[MatrixArgs::NAMES, PackedArgs::NAMES, &names], &args);

    let decode = [1, 2, 4].map(|cols| qmatmul::qmatmul(Format::Fp4, DType::F16, 1, cols, qmatmul::DEFAULT_WORDS, qmatmul::DEFAULT_THREADS)).to_vec();
    let args = DecodeArgs { a4: "a4", b: "b", b2: "b2", b4: "b4", scales: "scales", scales2: "scales2", scales4: "scales4", m: 1, n: 1, k: 1, group_words: 8 };
    family("decode", decode, &[DecodeArgs::NAMES, &names], &(args, SplitArgs { c_words: None, ws: None, tickets: None, ..split }));
    let affine = [1, 2, 4].map(|words| qmatmul_affine::qmatmul_affine(DType::F32, 1, 1, words, 256)).to_vec();
    let args = AffineArgs { a4: "a4", b: "b", b2: "b2", b4: "b4", scales: "scales", biases: "biases", c: "c", m: 1, n: 1, k: 1, group_shift: 6 };
    family("affine", affine, &[AffineArgs::NAMES], &args);
    let reduce = [1, 4].map(|width| split::splitk_reduce(DType::F16, width)).to_vec();
    let args = SplitReduceArgs { ws: "ws", ws4: "ws4", c: "c", c4: "c4", mn: 1, total: 1, splits: 2, alpha: 1.0, beta: 0.0 };
    family("split-K reduction", reduce, &[SplitReduceArgs::NAMES], &args);

    family("scores", [1, 4].map(|vec| attention::scores(DType::F16, vec, 1)).to_vec(), &[ScoresArgs::NAMES], &ScoresArgs { q: "q", q4: "q4", k: "k", k4: "k4", scores: "scores", s_len: 1, d: 1, scale: 1.0 });
    family("weighted sum", vec![attention::weighted_sum(DType::F32)], &[WeightedSumArgs::NAMES], &WeightedSumArgs { w: "w", v: "v", out: "out", s_len: 1, d: 1 });
    let base = FusedConfig { dtype: DType::F16, vec: 1, chunks: 1, threads: 256, heads: 1, lanes: 32, keys_per_step: 1, prefetch: false, stages: 0, split: false, ragged: false, lse: false, merge: false, matrices: None };
    let fused = vec![
        attention::fused(&base),
        attention::fused(&FusedConfig { vec: 4, ragged: true, lse: true, ..base }),
        attention::fused(&FusedConfig { vec: 8, chunks: 2, threads: 96, heads: 4, lanes: 8, stages: 4, split: true, ..base }),
        attention::fused(&FusedConfig { vec: 8, chunks: 2, threads: 96, heads: 2, lanes: 8, stages: 4, split: true, merge: true, lse: true, ..base }),
    ];
    family("fused decode", fused, &[FusedDecodeArgs::NAMES], &fused_decode_args());
    let combine = vec![attention::combine(DType::F16, false), attention::combine(DType::BF16, true)];
    family("combine", combine, &[CombineArgs::NAMES], &CombineArgs { partial_ml: "partial_ml", partial_acc: "partial_acc", out: "out", lse: Some("lse"), d: 1, splits: 2 });
    let mut prefill: Vec<_> = [(false, false), (true, true)].map(|(causal, lse)| attention_prefill::prefill(&PrefillConfig { dtype: DType::F16, d: 64, causal, lse, stages: 2, tile: PrefillTile::PORTABLE })).to_vec();
    let tiles = attention_prefill_cooperative::CoopPrefillConfig { dtype: DType::F16, d: 64, causal: true, lse: true, block_q: 64, block_kv: 64, tile_copies: true, stages: 3 };
    prefill.push(attention_prefill_cooperative::prefill_cooperative(&tiles));
    let args = PrefillArgs { q: "q", k: "k", v: "v", out: "out", lse: Some("lse"), s_q: 1, s_kv: 1, heads: 1, group: 1, scale_log2: 1.0, diag: 0, batch_size: 1 };
    family("prefill", prefill, &[PrefillArgs::NAMES], &args);
}

#[test]
fn values_bind_to_the_parameters_of_their_names() {
    // A broadcast of outer rank 2 takes `l0 … l5`, each its own value.
    let kernel = elementwise::broadcast_binary(Elementwise::Add, DType::F32, 1, [InnerAccess::Contiguous, InnerAccess::Splat], 2);
    let layout = BroadcastLayout(std::array::from_fn(|i| 10 + i as u32));
    let args = (BroadcastArgs { a: "a", a4: None, b: "b", b4: None, y: "y", y4: None, units: 7, total: 8 }, layout);
    let bound = KernelArgs::<str>::bind(&args, &kernel).unwrap();
    let values: Vec<(&str, Literal)> = kernel
        .params
        .iter()
        .zip(bound)
        .filter_map(|(p, a)| match a {
            Bound::Value(v) => Some((p.name.as_str(), v)),
            Bound::Buffer(_) => None,
        })
        .collect();
    let layout_values = BroadcastLayout::NAMES[..6].iter().enumerate().map(|(i, n)| (*n, Literal::u32(10 + i as u32)));
    let expected: Vec<(&str, Literal)> = layout_values.chain([(BroadcastArgs::UNITS, Literal::u32(7)), (BroadcastArgs::TOTAL, Literal::u32(8))]).collect();
    assert_eq!(values, expected);
    // The pool's sizes, in the kernel's order.
    let dims = PoolDims { h: 1, w: 2, oh: 3, ow: 4, kh: 5, kw: 6, sh: 7, sw: 8, ph: 9, pw: 10 };
    let bound = KernelArgs::<str>::bind(&(PoolArgs { x: "x", y: "y", total: 11 }, dims), &reduce::pool2d(Pool::Avg { count_pad: false }, DType::F16)).unwrap();
    let values: Vec<Bound<&str>> = (1..=10).map(|v| Bound::Value(Literal::u32(v))).collect();
    assert_eq!(bound[2..12], values[..]);
    assert_eq!(bound[12], Bound::Value(Literal::u32(11)));
}

#[test]
fn a_launch_that_leaves_out_a_buffer_its_kernel_declares_is_refused() {
    // The fused decode's split form writes partial states; a launch filled
    // for the unsplit form has none for it.
    let base = FusedConfig { dtype: DType::F32, vec: 1, chunks: 1, threads: 128, heads: 1, lanes: 32, keys_per_step: 1, prefetch: false, stages: 0, split: true, ragged: false, lse: false, merge: false, matrices: None };
    let unsplit = FusedDecodeArgs { lse: None, partial_ml: None, partial_acc: None, seq_lens: None, tickets: None, ..fused_decode_args() };
    let kernel = attention::fused(&base);
    let e = unsplit.bind(&kernel).unwrap_err();
    assert_eq!(e.param, "partial_ml");
    assert_eq!(e.to_string(), format!("kernel `{}`: parameter `partial_ml` is an optional buffer of FusedDecodeArgs that the launch left out", kernel.name));
    // The split form that merges its own splits needs its tickets too.
    let merged = attention::fused(&FusedConfig { merge: true, ..base });
    let e = FusedDecodeArgs { tickets: None, ..fused_decode_args() }.bind(&merged).unwrap_err();
    assert_eq!(e.param, "tickets");
    // A GEMM bound without its split output names the parameter it lacks.
    let e = MatrixArgs { a: "a", a4: "a4", b: "b", m: 1, n: 1, k: 1 }.bind(&gemm::gemm(&GemmConfig::new(DType::F16, DType::F16))).unwrap_err();
    assert_eq!((e.param.as_str(), e.args.as_str()), ("c", "MatrixArgs"));
}
