//! The quantized GEMM on cooperative tensors (`qgemm_cooperative`) checked
//! on a runtime against the f64 product of A and the host-dequantized
//! weights (`qmatmul::reference`; the host decodes the codes by
//! `quant::fp4_value` and `int4_value`; the kernel FP4 with
//! `cooperative_dequantize`, INT4 by bit arithmetic of its own), for the
//! simulator (`enigma-ops/tests/qmatmul_cooperative.rs`,
//! under the sanitizer, posing as a device of 227 KiB) and a CUDA GPU
//! (`enigma-cuda/tests/library.rs`, `wgmma` on sm_90a): through
//! `Ops::qmatmul` asked for it, at awkward shapes ([`check_shapes`]) and
//! with K split ([`check_k_splits`]), on fragment-ordered words
//! ([`check_fragment_order`]), on MLX's affine weights
//! ([`check_mlx_affine`]); and
//! every tile and pipeline depth that fits the device dispatched directly
//! ([`check_pipeline_depths`]) in each walk over the tiles
//! ([`check_rasterisation`]).

use enigma_ir::Scalar;
use enigma_kernels::library::qgemm_cooperative::{qgemm_cooperative, CoopQgemmConfig, SLICE_DEPTH};
use enigma_kernels::library::quant::{self, Format};
use enigma_kernels::library::split::SplitSum;
use enigma_kernels::library::{gemm::MAX_STAGES, qmatmul};
use enigma_ops::{download, upload, DType, GemmOptions, Ops, Options, QuantizedWeights};
use enigma_runtime::{Arg, Buffer, DispatchMode, Runtime};

/// Options that ask for the quantized GEMM on cooperative tensors (and the
/// sanitizer where `sanitize`).
pub fn cooperative(sanitize: bool) -> Options {
    Options { sanitize, gemm: GemmOptions { cooperative: Some(true), ..GemmOptions::default() }, ..Options::default() }
}

/// A problem's inputs: A (`m × k`, f16 values) and its buffer, the
/// quantized weights and their dequantized values (`k × n`, f32).
struct Inputs {
    a: Vec<f32>,
    a_buffer: Buffer,
    weights: QuantizedWeights,
    w: Vec<f32>,
}

fn inputs(rt: &Runtime, format: Format, [m, n, k, group]: [usize; 4]) -> Inputs {
    let mut a = enigma_kernels::test_data(m * k, (m * 7 + n * 13 + k) as u64);
    enigma_ops::quantize(DType::F16, &mut a);
    let q = quant::quantize(format, &enigma_kernels::test_data(k * n, (k * 3 + n) as u64), k, n, group).unwrap();
    let w = q.dequantize().unwrap();
    Inputs { a_buffer: upload(rt, Scalar::F16, &a).unwrap(), weights: QuantizedWeights::upload(rt, &q).unwrap(), a, w }
}

/// C against the f64 product: each weight is rounded to f16 with its scale
/// (one rounding of `|a·w|` each), the sums are f32, C is rounded to `out`.
fn assert_close(what: &str, got: &[f64], x: &Inputs, [m, n, k]: [usize; 3], out: DType) {
    let want = qmatmul::reference(&x.a, &x.w, m, n, k);
    for i in 0..m * n {
        let (r, col) = (i / n, i % n);
        let abs: f64 = (0..k).map(|kk| (x.a[r * k + kk] as f64 * x.w[kk * n + col] as f64).abs()).sum();
        let bound = abs * (1e-6 + DType::F16.unit_roundoff()) + want[i].abs() * out.unit_roundoff() * 1.01 + 1e-7;
        assert!((got[i] - want[i]).abs() <= bound, "{what}: C[{r}][{col}] = {} want {} (bound {bound})", got[i], want[i]);
    }
}

/// `Ops::qmatmul` asked for the kernel, FP4 and INT4, at M = 1, 16, 17,
/// 64, 100 and 128 (rows past M in every tile), N past the tile's columns
/// (and below them), K not a multiple of the slice (groups of 32
/// with an odd number of them), each group size, C f16 (and f32 once),
/// and at two shapes the tile divides (the whole-tile kernel, which tests
/// no copy's bounds, where the device's default is each thread's copies;
/// every other shape gets the kernel that does): the
/// tile the selection gives the device, clean under the sanitizer where
/// `sanitize`.
pub fn check_shapes(rt: &Runtime, sanitize: bool) {
    let ops = Ops::new(rt).with_options(cooperative(sanitize));
    let shapes = [[1, 8, 32, 32], [16, 72, 96, 32], [17, 264, 192, 64], [64, 136, 256, 128], [100, 200, 160, 32], [128, 328, 128, 128], [64, 128, 256, 128], [16, 64, 384, 32]];
    let whole = |[m, n, k, _]: [usize; 4]| [[64, 128, 256], [16, 64, 384]].contains(&[m, n, k]);
    for (i, &[m, n, k, group]) in shapes.iter().enumerate() {
        for format in [Format::Fp4, Format::Int4] {
            let out = if i == 2 && format == Format::Int4 { DType::F32 } else { DType::F16 };
            let x = inputs(rt, format, [m, n, k, group]);
            let what = format!("{format} {out} {m}x{n}x{k} group {group}");
            let c = ops.qmatmul(&x.a_buffer, &x.weights, m, out).unwrap_or_else(|e| panic!("{what}: {e}"));
            let launches = ops.take_launches();
            assert_eq!(launches.len(), 1, "{what}");
            assert!(launches[0].kernel.starts_with("qgemm_coop_"), "{what}: {}", launches[0].kernel);
            // The device's default staging: tile copies (which test no
            // bounds, so never the whole-tile variant) or each thread's copies.
            let tiles = enigma_kernels::library::select::tile_copies_by_default(rt.device());
            assert_eq!(launches[0].kernel.ends_with("_tiles"), tiles, "{what}: {}", launches[0].kernel);
            assert_eq!(launches[0].kernel.ends_with("_whole"), whole([m, n, k, group]) && !tiles, "{what}: {}", launches[0].kernel);
            assert!(launches[0].report.findings.is_empty(), "{what}: {:?}", launches[0].report.findings);
            let got = download(&c, out.scalar(), m * n).unwrap();
            assert_close(&format!("{} {what}", launches[0].kernel), &got, &x, [m, n, k], out);
        }
    }
}

/// `Ops::qmatmul` asked for the kernel on weights in fragment order
/// (`QuantizedWeights::upload_in`, the `_fragments` variant), FP4 and
/// INT4, at M = 17, 64, 100 and 128 (rows past M), N of 64 to 160 (a
/// partial tile of 128 columns), K of 4 to 7 units of 64 in groups of 64
/// and 128, staged by each thread's copies and by tile copies, unsplit
/// and split 3 ways (summed by the reduction and by each tile's last
/// threadgroup), and N of 48 and 80 (multiples of 16, not of 32) staged by
/// the threads' copies, which the selection takes for them unless tile
/// copies are asked for: C against the f64 product, clean under the
/// sanitizer where `sanitize`.
pub fn check_fragment_order(rt: &Runtime, sanitize: bool) {
    let shapes = [[17, 64, 256, 64], [64, 96, 448, 64], [100, 160, 384, 128], [128, 128, 256, 128]];
    for (i, &shape) in shapes.iter().enumerate() {
        for format in [Format::Fp4, Format::Int4] {
            let summed = |tile_copies: bool, sum: SplitSum| (tile_copies, Some(3), Some(sum));
            for (tile_copies, splits, split_sum) in [(false, None, None), (true, None, None), summed(i % 2 == 0, SplitSum::Reduction), summed(i % 2 == 1, SplitSum::LastThreadgroup)] {
                let options = cooperative(sanitize);
                let gemm = GemmOptions { k_splits: splits, split_sum, tile_copies: Some(tile_copies), ..options.gemm };
                let [m, n, k, group] = shape;
                let what = format!("{format} {m}x{n}x{k} group {group} in fragment order, tile copies {tile_copies}, splits {splits:?} summed by {split_sum:?}");
                let kernels = fragment_order_kernels(rt, Options { gemm, ..options }, format, shape, &what);
                assert!(kernels[0].starts_with("qgemm_coop_") && kernels[0].ends_with("_fragments"), "{what}: {kernels:?}");
                assert_eq!(kernels[0].contains("_tiles"), tile_copies, "{what}: {kernels:?}");
                // The reduction is a second dispatch; the kernel's own sum is not.
                let dispatches = if split_sum == Some(SplitSum::Reduction) { 2 } else { 1 };
                assert_eq!(kernels.len(), dispatches, "{what}: {kernels:?}");
            }
        }
    }
    for (format, n) in [(Format::Fp4, 48), (Format::Int4, 80)] {
        let what = format!("{format} 33x{n}x192 group 64 in fragment order, the selection's staging");
        let kernels = fragment_order_kernels(rt, cooperative(sanitize), format, [33, n, 192, 64], &what);
        assert!(kernels[0].ends_with("_fragments") && !kernels[0].contains("_tiles"), "{what}: {kernels:?}");
    }
}

/// `Ops::qmatmul` with `options` on `format` weights of `[m, n, k, group]`
/// uploaded in fragment order: the kernels it dispatched, each run clean of
/// findings, C against the f64 product (`what`, the case, in failures).
fn fragment_order_kernels(rt: &Runtime, options: Options, format: Format, [m, n, k, group]: [usize; 4], what: &str) -> Vec<String> {
    let ops = Ops::new(rt).with_options(options);
    let x = inputs(rt, format, [m, n, k, group]);
    let q = quant::quantize(format, &enigma_kernels::test_data(k * n, (k * 3 + n) as u64), k, n, group).unwrap();
    let weights = QuantizedWeights::upload_in(rt, &q, enigma_ir::QuantLayout::Fragments).unwrap();
    let c = ops.qmatmul(&x.a_buffer, &weights, m, DType::F16).unwrap_or_else(|e| panic!("{what}: {e}"));
    let launches = ops.take_launches();
    for l in &launches {
        assert!(l.report.findings.is_empty(), "{what}: {}: {:?}", l.kernel, l.report.findings);
    }
    let got = download(&c, Scalar::F16, m * n).unwrap();
    assert_close(&format!("{} {what}", launches[0].kernel), &got, &x, [m, n, k], DType::F16);
    launches.into_iter().map(|l| l.kernel).collect()
}

/// `Ops::qmatmul` asked for the kernel on MLX's affine weights (`[N][K/8]`
/// words, `[N][K/group]` scales and biases, each weight `code · scale +
/// bias`, decoded from the scales' and biases' buffers): at M = 1, 16, 33
/// and 100 (rows past M), N and K whole tiles of 128 (what the kernel takes
/// for them), every group size, staged by each thread's copies and by tile
/// copies, unsplit and split 3 ways (summed by the reduction and by each
/// tile's last threadgroup), C f16 and f32: against the f64 product, clean
/// under the sanitizer where `sanitize`; and N not a whole tile refused,
/// with the numbers.
pub fn check_mlx_affine(rt: &Runtime, sanitize: bool) {
    let shapes = [[1, 128, 128, 64], [16, 256, 256, 32], [33, 128, 384, 128], [100, 256, 256, 64]];
    for (i, &[m, n, k, group]) in shapes.iter().enumerate() {
        let x = inputs(rt, Format::MlxAffine, [m, n, k, group]);
        let sum = if i % 2 == 0 { SplitSum::Reduction } else { SplitSum::LastThreadgroup };
        for (tile_copies, splits, split_sum) in [(false, None, None), (true, None, None), (i % 2 == 1, Some(3), Some(sum))] {
            let options = cooperative(sanitize);
            let gemm = GemmOptions { k_splits: splits, split_sum, tile_copies: Some(tile_copies), ..options.gemm };
            let ops = Ops::new(rt).with_options(Options { gemm, ..options });
            let out = if i == 2 { DType::F32 } else { DType::F16 };
            let what = format!("mlx_affine {out} {m}x{n}x{k} group {group}, tile copies {tile_copies}, splits {splits:?} summed by {split_sum:?}");
            let c = ops.qmatmul(&x.a_buffer, &x.weights, m, out).unwrap_or_else(|e| panic!("{what}: {e}"));
            let launches = ops.take_launches();
            assert!(launches[0].kernel.starts_with("qgemm_coop_mlx_affine_"), "{what}: {}", launches[0].kernel);
            assert_eq!(launches[0].kernel.contains("_tiles"), tile_copies, "{what}: {}", launches[0].kernel);
            for l in &launches {
                assert!(l.report.findings.is_empty(), "{what}: {}: {:?}", l.kernel, l.report.findings);
            }
            let got = download(&c, out.scalar(), m * n).unwrap();
            assert_close(&format!("{} {what}", launches[0].kernel), &got, &x, [m, n, k], out);
        }
    }
    let x = inputs(rt, Format::MlxAffine, [16, 200, 128, 64]);
    let err = Ops::new(rt).with_options(cooperative(sanitize)).qmatmul(&x.a_buffer, &x.weights, 16, DType::F16).unwrap_err().to_string();
    assert!(err.contains("mlx_affine weights of N = 200 and K = 128 need N a multiple of the"), "{err}");
}

/// `Ops::qmatmul` asked for the kernel with K split 2, 3 and 5 ways
/// (`GemmOptions::k_splits`), FP4 and INT4, C f16 and f32: at M = 1, 16
/// and 5 (rows past M), N past the tile's columns, K of 448 in groups of
/// 64 and 32 and of 384 in groups of 128 (runs of unequal length, empty
/// splits at 5 ways), and K of 3 and 4 slices of 128 split 5 ways (empty
/// splits), those two shapes in whole tiles; the splits summed by the reduction
/// (two dispatches, the kernel writing its f32 partial products) and by
/// the last threadgroup of each tile (one dispatch; run twice, so the
/// tickets are back at zero after each), three splits staged by tile
/// copies; clean under the sanitizer where `sanitize`.
pub fn check_k_splits(rt: &Runtime, sanitize: bool) {
    let shapes = [[16, 136, 448, 64], [1, 72, 384, 128], [5, 200, 448, 32], [16, 64, 384, 32], [16, 128, 512, 64]];
    for (i, &[m, n, k, group]) in shapes.iter().enumerate() {
        for format in [Format::Fp4, Format::Int4] {
            for splits in [2, 3, 5] {
                // The reduction's C, which the last threadgroup's sum (the
                // same f32 additions in split order) must equal bit for bit.
                let mut reduced: Option<Vec<u64>> = None;
                for sum in [SplitSum::Reduction, SplitSum::LastThreadgroup] {
                    let out = if (i + splits as usize) % 2 == 0 { DType::F32 } else { DType::F16 };
                    // Three splits stage by tile copies.
                    let tile_copies = splits == 3;
                    let options = cooperative(sanitize);
                    let gemm = GemmOptions { k_splits: Some(splits), split_sum: Some(sum), tile_copies: Some(tile_copies), ..options.gemm };
                    let ops = Ops::new(rt).with_options(Options { gemm, ..options });
                    let x = inputs(rt, format, [m, n, k, group]);
                    let what = format!("{format} {out} {m}x{n}x{k} group {group} in {splits} splits, {sum:?}");
                    let calls = if sum == SplitSum::Reduction { 1 } else { 2 };
                    for call in 0..calls {
                        let c = ops.qmatmul(&x.a_buffer, &x.weights, m, out).unwrap_or_else(|e| panic!("{what}: {e}"));
                        let launches = ops.take_launches();
                        let suffix = if sum == SplitSum::Reduction { format!("_splitk{splits}") } else { format!("_splitk{splits}_sum") };
                        let kernel = &launches[0].kernel;
                        let name = if tile_copies { kernel.strip_suffix("_tiles") } else { kernel.strip_suffix("_whole").or(Some(kernel)) };
                        let name = name.unwrap_or_else(|| panic!("{what}: {kernel}"));
                        assert!(name.starts_with("qgemm_coop_") && name.ends_with(&suffix), "{what}: {kernel}");
                        assert_eq!(name.len() < kernel.len(), i >= 3 || tile_copies, "{what}: {kernel}");
                        if sum == SplitSum::Reduction {
                            assert_eq!(launches.len(), 2, "{what}");
                            assert!(launches[1].kernel.starts_with("gemm_splitk_reduce"), "{what}: {}", launches[1].kernel);
                        } else {
                            assert_eq!(launches.len(), 1, "{what}");
                        }
                        for l in &launches {
                            assert!(l.report.findings.is_empty(), "{what}: {}: {:?}", l.kernel, l.report.findings);
                        }
                        let got = download(&c, out.scalar(), m * n).unwrap();
                        assert_close(&format!("{} {what}, call {call}", launches[0].kernel), &got, &x, [m, n, k], out);
                        let bits: Vec<u64> = got.iter().map(|v| v.to_bits()).collect();
                        match &reduced {
                            None => reduced = Some(bits),
                            Some(r) => assert!(*r == bits, "{what}, call {call}: C differs from the reduction's at element {:?}", r.iter().zip(&bits).position(|(a, b)| a != b)),
                        }
                    }
                }
            }
        }
    }
}

/// Tiles of 8, 16, 64 and 128 rows over one and two warpgroups' columns,
/// 64 and 128 deep, in two, three and four stages (those that fit the
/// device): 70 × 136 × 448 INT4 in groups of 64 (seven slices of 64, three
/// and a half of 128, which span two groups each), each stage reused
/// several times, the last row and column of tiles partial; a 128-deep
/// slice of FP4 in groups of 32 (four scales a slice); and whole tiles of
/// 16 × 128 × 128 and 64 × 64 × 64 over 64 × 128 × 256 INT4 in groups of
/// 128 (a stage's second row of scales past the last group); the INT4
/// and FP4 tiles again with their operands staged by tile copies.
pub fn check_pipeline_depths(rt: &Runtime, sanitize: bool) {
    let max = rt.device().max_threadgroup_memory_bytes;
    let configs = |format: Format, tiles: &[(u32, u32, u32)], whole: bool| -> Vec<CoopQgemmConfig> {
        tiles
            .iter()
            .flat_map(|&(tm, tn, tk)| (2..=MAX_STAGES.min(4)).map(move |stages| CoopQgemmConfig { format, output: DType::F16, tm, tn, tk, stages, raster: 1, splits: 1, split_sum: SplitSum::Reduction, whole, tile_copies: false, layout: enigma_ir::QuantLayout::Rows }))
            .filter(|cfg| cfg.check(max).is_ok())
            .collect()
    };
    let int4 = configs(Format::Int4, &[(8, 64, 64), (16, 128, 128), (64, 64, 64), (128, 128, 64), (16, 64, 128)], false);
    assert!(int4.iter().any(|c| c.stages == 4), "no configuration of four stages fits {max} bytes");
    check_configs(rt, sanitize, &int4, Format::Int4, [70, 136, 448, 64]);
    check_configs(rt, sanitize, &configs(Format::Fp4, &[(16, 64, 128)], false), Format::Fp4, [20, 72, 384, 32]);
    // The same tiles staged by tile copies (on CUDA the tensor copy engine).
    let tiles: Vec<CoopQgemmConfig> = int4.iter().map(|c| CoopQgemmConfig { tile_copies: true, ..*c }).collect();
    check_configs(rt, sanitize, &tiles, Format::Int4, [70, 136, 448, 64]);
    let fp4_tiles: Vec<CoopQgemmConfig> = configs(Format::Fp4, &[(16, 64, 128)], false).iter().map(|c| CoopQgemmConfig { tile_copies: true, ..*c }).collect();
    check_configs(rt, sanitize, &fp4_tiles, Format::Fp4, [20, 72, 384, 32]);
    let whole = configs(Format::Int4, &[(16, 128, 128), (64, 64, 64)], true);
    assert!(whole.iter().all(|c| *c == c.whole_for(64, 128, 256)));
    check_configs(rt, sanitize, &whole, Format::Int4, [64, 128, 256, 128]);
}

/// The 64 × 64 tile in two stages walking C's 3 × 3 tiles (the last row
/// partial) row by row and in bands of 2 and 8 rows of tiles, FP4 in
/// groups of 32: every tile computed once.
pub fn check_rasterisation(rt: &Runtime, sanitize: bool) {
    let configs = [1, 2, 8].map(|raster| CoopQgemmConfig { format: Format::Fp4, output: DType::F32, tm: 64, tn: 64, tk: SLICE_DEPTH, stages: 2, raster, splits: 1, split_sum: SplitSum::Reduction, whole: false, tile_copies: false, layout: enigma_ir::QuantLayout::Rows });
    check_configs(rt, sanitize, &configs, Format::Fp4, [64 * 3 - 5, 64 * 3, 96, 32]);
}

/// `configs` dispatched on `format` weights of `[m, n, k, group]` into a C
/// of NaNs, against the f64 product.
fn check_configs(rt: &Runtime, sanitize: bool, configs: &[CoopQgemmConfig], format: Format, [m, n, k, group]: [usize; 4]) {
    let x = inputs(rt, format, [m, n, k, group]);
    for cfg in configs {
        let pipeline = rt.pipeline(&qgemm_cooperative(cfg)).unwrap();
        // NaN where the kernel would leave an element unwritten.
        let c = upload(rt, cfg.output.scalar(), &vec![f32::NAN; m * n]).unwrap();
        let (mu, nu) = (m as u32, n as u32);
        let args = [Arg::from(&x.a_buffer), Arg::from(&x.weights.packed), Arg::from(&c), Arg::u32(mu), Arg::u32(nu), Arg::u32(k as u32), Arg::u32(group as u32), Arg::from(&x.weights.scales)];
        let dispatch = cfg.dispatch(mu, nu);
        let report = rt.dispatch(&pipeline, &args, DispatchMode::Threadgroups, dispatch.size, dispatch.threads, &enigma_runtime::Options { sanitize, ..Default::default() }).unwrap();
        assert!(report.findings.is_empty(), "{}: {:?}", cfg.name(), report.findings);
        let got = download(&c, cfg.output.scalar(), m * n).unwrap();
        assert_close(&format!("{} {format} {m}x{n}x{k} group {group}", cfg.name()), &got, &x, [m, n, k], cfg.output);
    }
}
