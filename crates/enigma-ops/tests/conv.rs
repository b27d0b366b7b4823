//! 2-D convolution (`Ops::conv2d`): dense, grouped, depthwise and
//! pointwise, with padding, strides, dilation and an optional bias, against
//! a plain f64 loop written here, for every element type, under the
//! simulator's sanitizer — the unfolding (by elements and by 16-byte
//! stores) and batched GEMM (groups of more than one input channel), the
//! depthwise kernels (by rows of 16-byte words and by tiles) and the direct
//! kernel alike.

use enigma_ops::{download, quantize, upload, Conv2d, DType, Ops, Options};
use enigma_runtime::{Buffer, Device, Runtime};

fn reference(x: &[f32], w: &[f32], bias: Option<&[f32]>, c: &Conv2d) -> Vec<f64> {
    let [h, wd] = c.size;
    let [kh, kw] = c.kernel;
    let [oh, ow] = c.output_size().unwrap();
    let in_group = c.in_channels / c.groups;
    let out_group = c.out_channels / c.groups;
    let mut out = vec![];
    for n in 0..c.batch {
        for co in 0..c.out_channels {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = bias.map_or(0.0, |b| b[co] as f64);
                    for ci in 0..in_group {
                        let channel = co / out_group * in_group + ci;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * c.stride[0] + ky * c.dilation[0]) as isize - c.padding[0] as isize;
                                let ix = (ox * c.stride[1] + kx * c.dilation[1]) as isize - c.padding[1] as isize;
                                if (0..h as isize).contains(&iy) && (0..wd as isize).contains(&ix) {
                                    let xv = x[((n * c.in_channels + channel) * h + iy as usize) * wd + ix as usize] as f64;
                                    acc += xv * w[((co * in_group + ci) * kh + ky) * kw + kx] as f64;
                                }
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    out
}

/// A convolution's input, weights and bias, rounded to the type, and their
/// buffers.
struct Inputs {
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
    xb: Buffer,
    wb: Buffer,
    bb: Buffer,
}

/// [`Inputs`] for `c` in `dtype` on `rt`: small multiples of powers of two,
/// so that the f64 reference's sums are exact in f32.
fn inputs(rt: &Runtime, c: &Conv2d, dtype: DType) -> Inputs {
    let n_x = c.batch * c.in_channels * c.size[0] * c.size[1];
    let n_w = c.out_channels * c.in_channels / c.groups * c.kernel[0] * c.kernel[1];
    let mut x: Vec<f32> = (0..n_x).map(|i| ((i * 29 + 3) % 19) as f32 * 0.25 - 2.25).collect();
    let mut w: Vec<f32> = (0..n_w).map(|i| ((i * 11 + 5) % 13) as f32 * 0.125 - 0.75).collect();
    let mut b: Vec<f32> = (0..c.out_channels).map(|i| i as f32 * 0.5 - 1.0).collect();
    for v in [&mut x, &mut w, &mut b] {
        quantize(dtype, v);
    }
    let up = |v: &[f32]| upload(rt, dtype.scalar(), v).unwrap();
    let (xb, wb, bb) = (up(&x), up(&w), up(&b));
    Inputs { x, w, b, xb, wb, bb }
}

#[test]
fn convolutions_match_an_f64_loop() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let base = Conv2d { batch: 2, in_channels: 3, size: [7, 9], out_channels: 5, kernel: [3, 3], stride: [1, 1], padding: [1, 1], dilation: [1, 1], groups: 1 };
    let cases = [
        base,
        Conv2d { stride: [2, 3], padding: [0, 2], kernel: [3, 2], ..base },
        Conv2d { dilation: [2, 1], padding: [2, 0], ..base },
        // Depthwise, pointwise, grouped.
        Conv2d { in_channels: 4, out_channels: 8, groups: 4, ..base },
        Conv2d { kernel: [1, 1], padding: [0, 0], ..base },
        Conv2d { in_channels: 6, out_channels: 4, groups: 2, batch: 1, size: [1, 1], kernel: [1, 1], padding: [0, 0], ..base },
        // Depthwise by tiles: a channel multiplier of 2, planes larger than
        // one tile (edges in both directions), a strided dilated window.
        Conv2d { in_channels: 2, out_channels: 4, groups: 2, size: [37, 45], ..base },
        Conv2d { batch: 1, in_channels: 3, size: [40, 70], out_channels: 3, kernel: [5, 3], stride: [2, 3], padding: [3, 1], dilation: [2, 1], groups: 3 },
        // Depthwise by rows of 16-byte words: a last block of rows short,
        // a channel multiplier of 2 with a taller window, a wide window
        // (rows of 12: f32 only), a window without left padding (f32
        // only), a 1×1 window.
        Conv2d { in_channels: 4, out_channels: 4, groups: 4, size: [7, 16], ..base },
        Conv2d { in_channels: 2, out_channels: 4, groups: 2, size: [9, 24], kernel: [5, 3], padding: [2, 1], ..base },
        Conv2d { in_channels: 3, out_channels: 3, groups: 3, size: [5, 12], kernel: [3, 5], padding: [1, 2], ..base },
        Conv2d { in_channels: 3, out_channels: 3, groups: 3, size: [6, 12], kernel: [2, 5], padding: [0, 0], ..base },
        Conv2d { in_channels: 2, out_channels: 2, groups: 2, size: [3, 8], kernel: [1, 1], padding: [0, 0], ..base },
        // A window of more taps than the tiled kernel holds: the direct kernel.
        Conv2d { in_channels: 2, out_channels: 2, groups: 2, batch: 1, size: [3, 52], kernel: [1, 50], padding: [1, 0], ..base },
        // Through the unfolding and the batched GEMM: groups of several
        // channels, several images, a stride with padding and dilation,
        // a pointwise convolution of groups over 3 images, a strided 1×1.
        Conv2d { in_channels: 6, out_channels: 4, groups: 2, batch: 3, stride: [2, 1], dilation: [1, 2], padding: [1, 2], ..base },
        Conv2d { in_channels: 8, out_channels: 6, groups: 2, batch: 3, kernel: [1, 1], padding: [0, 0], ..base },
        Conv2d { in_channels: 16, out_channels: 9, kernel: [1, 1], stride: [2, 2], padding: [1, 0], size: [5, 8], ..base },
        Conv2d { in_channels: 8, out_channels: 16, batch: 3, size: [4, 6], ..base },
        // Output rows of whole 16 bytes: the unfolding by 16-byte stores
        // (rows of 16 in every type, of 12 in f32 only), with padding on
        // both sides, a stride and a dilation along the row.
        Conv2d { in_channels: 4, out_channels: 6, batch: 2, size: [5, 16], ..base },
        Conv2d { in_channels: 3, out_channels: 4, size: [6, 33], stride: [1, 2], padding: [1, 0], ..base },
        Conv2d { in_channels: 6, out_channels: 4, groups: 2, size: [5, 16], kernel: [2, 3], dilation: [1, 2], padding: [0, 2], ..base },
        Conv2d { in_channels: 2, out_channels: 3, size: [4, 12], ..base },
        // By rows of words: a wider window with two columns of padding,
        // no rows of padding, a window one column wide.
        Conv2d { in_channels: 3, out_channels: 4, size: [5, 16], kernel: [3, 5], padding: [1, 2], ..base },
        Conv2d { in_channels: 2, out_channels: 3, size: [5, 16], kernel: [2, 3], padding: [0, 1], ..base },
        Conv2d { in_channels: 2, out_channels: 2, size: [4, 8], kernel: [3, 1], padding: [1, 0], ..base },
    ];
    for dtype in DType::ALL {
        let ops = Ops::new(&rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), ..Options::default() });
        for c in cases {
            let Inputs { x, w, b, xb, wb, bb } = inputs(&rt, &c, dtype);
            let n_w = w.len();
            for with_bias in [false, true] {
                let want = reference(&x, &w, with_bias.then_some(&b[..]), &c);
                let (y, out) = ops.conv2d(&xb, &wb, with_bias.then_some(&bb), &c).unwrap();
                assert_eq!(out, c.output_size().unwrap());
                // The unfolding, where there is one: by 16-byte stores where
                // the output rows are whole 16 bytes.
                let unfolds = c.groups < c.in_channels && (c.kernel, c.stride, c.padding) != ([1, 1], [1, 1], [0, 0]);
                let launches = ops.take_launches();
                assert!(launches.iter().all(|l| l.report.findings.is_empty()), "{dtype} {c:?}: {:?}", launches.iter().map(|l| (&l.kernel, &l.report.findings)).collect::<Vec<_>>());
                let kernels: Vec<String> = launches.into_iter().map(|l| l.kernel).collect();
                let per_word = 16 / dtype.size_bytes() as usize;
                if unfolds {
                    let packed = out[1].is_multiple_of(per_word);
                    // Of stride and dilation 1 over input rows of whole
                    // words: by rows of words.
                    let rows = packed
                        && (c.stride, c.dilation) == ([1, 1], [1, 1])
                        && c.kernel.iter().all(|&k| k <= 7)
                        && c.padding[1] < c.kernel[1]
                        && c.size[1].is_multiple_of(per_word);
                    let [kh, kw] = c.kernel;
                    let want = match (rows, packed) {
                        (true, _) => format!("im2col_{dtype}_rows_k{kh}x{kw}_pw{}", c.padding[1]),
                        (false, true) => format!("im2col_{dtype}_packed"),
                        (false, false) => format!("im2col_{dtype}"),
                    };
                    assert!(kernels.contains(&want), "{dtype} {c:?}: {kernels:?}");
                }
                // Grouped weights repeated per image, by 16-byte words where
                // they are whole words; without groups every image's
                // product reads the one set (A's batch stride 0).
                if c.groups < c.in_channels && c.batch > 1 {
                    let words = n_w.is_multiple_of(per_word);
                    let want = if words { "repeat_words".to_string() } else { format!("repeat_{dtype}") };
                    assert_eq!(kernels.contains(&want), c.groups > 1, "{dtype} {c:?}: {kernels:?}");
                }
                // Depthwise of stride and dilation 1 over rows of whole
                // 16-byte words: by rows of words.
                let by_rows = c.groups == c.in_channels
                    && (c.stride, c.dilation) == ([1, 1], [1, 1])
                    && c.kernel.iter().all(|&k| k <= 7)
                    && c.padding[1] < c.kernel[1]
                    && c.size[1].is_multiple_of(per_word)
                    && out[1].is_multiple_of(per_word);
                assert_eq!(kernels.iter().any(|k| k.starts_with("conv2d_depthwise_rows_")), by_rows, "{dtype} {c:?}: {kernels:?}");
                // Without groups through the GEMM (unsplit over several
                // images: the SIMT kernel for f32, on SIMD-group matrices for
                // the half types): the bias in its epilogue.
                if with_bias && c.groups == 1 && c.in_channels > 1 && c.batch > 1 {
                    assert!(kernels.iter().any(|k| (k.starts_with("sgemm_") || k.starts_with("gemm_")) && k.ends_with("_bias")), "{dtype} {c:?}: {kernels:?}");
                }
                let got = download(&y, dtype.scalar(), want.len()).unwrap();
                // f32 sums of exact products, rounded once to the type; twice
                // where the bias is a broadcast add after the product (a
                // grouped convolution through the GEMM).
                let roundings = if with_bias && c.groups > 1 && c.groups < c.in_channels { 2.02 } else { 1.01 };
                for (i, (g, v)) in got.iter().zip(&want).enumerate() {
                    let tol = v.abs() * dtype.unit_roundoff() * roundings + 1e-5;
                    assert!((g - v).abs() <= tol, "{dtype} {c:?} bias {with_bias} at {i}: {g} vs {v}");
                }
            }
        }
    }
}

#[test]
fn shapes_that_do_not_fit_are_refused() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let x = upload(&rt, enigma_ir::Scalar::F32, &[0.0; 64]).unwrap();
    let c = Conv2d { batch: 1, in_channels: 3, size: [4, 4], out_channels: 4, kernel: [3, 3], stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 2 };
    let err = Ops::new(&rt).conv2d(&x, &x, None, &c).unwrap_err().to_string();
    assert!(err.contains("groups = 2 must divide"), "{err}");
    let c = Conv2d { groups: 1, kernel: [5, 3], ..c };
    let err = Ops::new(&rt).conv2d(&x, &x, None, &c).unwrap_err().to_string();
    assert!(err.contains("larger than the padded input"), "{err}");
    let c = Conv2d { kernel: [3, 3], in_channels: 8, ..c };
    let err = Ops::new(&rt).conv2d(&x, &x, None, &c).unwrap_err().to_string();
    assert!(err.contains("`x`") && err.contains("128 f32 elements"), "{err}");
}

/// Convolutions through the GEMM on cooperative tensors (asked for: the
/// simulator's default is the SIMD-group kernel): without groups the bias
/// goes into the product's epilogue (a `_bias` kernel, no broadcast add,
/// no weights repeated), with groups it stays a broadcast add; against
/// the f64 loop, one rounding to the type where the bias is fused.
#[test]
fn the_bias_of_a_convolution_without_groups_is_added_in_the_products_epilogue() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let base = Conv2d { batch: 3, in_channels: 8, size: [4, 6], out_channels: 16, kernel: [3, 3], stride: [1, 1], padding: [1, 1], dilation: [1, 1], groups: 1 };
    let cases = [base, Conv2d { out_channels: 12, kernel: [1, 1], padding: [0, 0], size: [4, 4], ..base }, Conv2d { in_channels: 16, groups: 2, ..base }];
    for dtype in [DType::F16, DType::BF16] {
        let options = Options { sanitize: true, elem: Some(dtype.scalar()), gemm: enigma_ops::GemmOptions { cooperative: Some(true), ..Default::default() }, ..Options::default() };
        let ops = Ops::new(&rt).with_options(options);
        for c in cases {
            let Inputs { x, w, b, xb, wb, bb } = inputs(&rt, &c, dtype);
            let want = reference(&x, &w, Some(&b), &c);
            let (y, _) = ops.conv2d(&xb, &wb, Some(&bb), &c).unwrap();
            let launches = ops.take_launches();
            assert!(launches.iter().all(|l| l.report.findings.is_empty()), "{dtype} {c:?}: {:?}", launches.iter().map(|l| (&l.kernel, &l.report.findings)).collect::<Vec<_>>());
            let kernels: Vec<String> = launches.into_iter().map(|l| l.kernel).collect();
            let fused = c.groups == 1;
            assert_eq!(kernels.iter().any(|k| k.starts_with("gemm_coop_") && k.contains("_bias")), fused, "{dtype} {c:?}: {kernels:?}");
            assert_eq!(kernels.iter().any(|k| k.starts_with("add_broadcast") || k.starts_with("repeat")), !fused, "{dtype} {c:?}: {kernels:?}");
            let got = download(&y, dtype.scalar(), want.len()).unwrap();
            for (i, (g, v)) in got.iter().zip(&want).enumerate() {
                let rounds = if fused { 1.01 } else { 2.02 };
                let tol = v.abs() * dtype.unit_roundoff() * rounds + 1e-5;
                assert!((g - v).abs() <= tol, "{dtype} {c:?} at {i}: {g} vs {v}");
            }
        }
    }
}

/// Convolutions whose products the SIMD-group GEMM's whole-tile kernels
/// take (a 64 × 64 tile asked for, two stages: out channels, pixels and
/// `C_in·kh·kw` multiples of the tile, and out channels not a multiple:
/// the ragged rows): the bias in those kernels' epilogue, element by
/// element, against the f64 loop with one rounding.
#[test]
fn the_whole_tile_kernels_add_the_bias_in_their_epilogue() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let tile = enigma_ops::GemmTile::new(64, 64, 32, 2, 2);
    let gemm = enigma_ops::GemmOptions { tile: Some(tile), stages: Some(2), ..Default::default() };
    let base = Conv2d { batch: 2, in_channels: 64, size: [8, 8], out_channels: 64, kernel: [1, 1], stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1 };
    for (c, suffix) in [(base, "_whole_bias"), (Conv2d { out_channels: 40, ..base }, "_whole_ragged_bias")] {
        for dtype in [DType::F16, DType::BF16] {
            let ops = Ops::new(&rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), gemm, ..Options::default() });
            let Inputs { x, w, b, xb, wb, bb } = inputs(&rt, &c, dtype);
            let want = reference(&x, &w, Some(&b), &c);
            let (y, _) = ops.conv2d(&xb, &wb, Some(&bb), &c).unwrap();
            let launches = ops.take_launches();
            assert!(launches.iter().all(|l| l.report.findings.is_empty()));
            let kernels: Vec<String> = launches.into_iter().map(|l| l.kernel).collect();
            assert!(kernels.iter().any(|k| k.starts_with("gemm_") && k.ends_with(suffix)) && kernels.len() == 1, "{dtype} {c:?}: {kernels:?}");
            let got = download(&y, dtype.scalar(), want.len()).unwrap();
            for (i, (g, v)) in got.iter().zip(&want).enumerate() {
                let tol = v.abs() * dtype.unit_roundoff() * 1.01 + 1e-5;
                assert!((g - v).abs() <= tol, "{dtype} {c:?} at {i}: {g} vs {v}");
            }
        }
    }
}

/// Dense convolutions of input channels a multiple of 64 as an implicit
/// GEMM on cooperative tensors (asked for: the simulator's default is the
/// unfolding and the GEMM): the weights reordered by tap and the input
/// rewritten channels-last, then one kernel that copies the unfolding's
/// slices itself, under the sanitizer, in
/// two, three and four stages (products released at the next barrier, and
/// overlapped). Output channels and pixels that fill no whole tile, more
/// than one tile of each, a stride, a dilation, padding on one side only,
/// a 1×1 window, two slices per tap; outputs of whole 16-byte words
/// through the staging array and others element by element. Against the
/// f64 loop with one rounding, the bias added before it. On a simulator
/// posing as a GPU of 227 KiB of threadgroup memory (64 × 128 tiles), and
/// on the simulator's own 32 KiB (64 × 64 tiles in two stages, the output
/// element by element).
#[test]
fn dense_convolutions_of_64_channels_run_as_an_implicit_gemm() {
    let big = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    let small = Runtime::new(Device::Sim).unwrap();
    let base = Conv2d { batch: 2, in_channels: 64, size: [7, 9], out_channels: 24, kernel: [3, 3], stride: [1, 1], padding: [1, 1], dilation: [1, 1], groups: 1 };
    let cases = [
        (base, 3),
        (Conv2d { batch: 1, size: [12, 12], out_channels: 70, ..base }, 4),
        (Conv2d { size: [9, 8], stride: [2, 1], dilation: [1, 2], padding: [0, 2], kernel: [3, 2], ..base }, 2),
        (Conv2d { in_channels: 128, size: [5, 16], out_channels: 8, kernel: [1, 1], stride: [1, 2], padding: [0, 0], ..base }, 3),
        (Conv2d { in_channels: 128, size: [4, 4], out_channels: 16, kernel: [2, 2], padding: [1, 0], ..base }, 2),
    ];
    let runs = cases.iter().map(|&(c, stages)| (&big, c, Some(stages))).chain([(&small, base, None), (&small, cases[1].0, None)]);
    for (rt, c, stages) in runs {
        for dtype in [DType::F16, DType::BF16] {
            let gemm = enigma_ops::GemmOptions { cooperative: Some(true), stages, ..Default::default() };
            let ops = Ops::new(rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), gemm, ..Options::default() });
            let Inputs { x, w, b, xb, wb, bb } = inputs(rt, &c, dtype);
            for with_bias in [false, true] {
                let want = reference(&x, &w, with_bias.then_some(&b[..]), &c);
                let (y, out) = ops.conv2d(&xb, &wb, with_bias.then_some(&bb), &c).unwrap();
                assert_eq!(out, c.output_size().unwrap());
                let launches = ops.take_launches();
                assert!(launches.iter().all(|l| l.report.findings.is_empty()), "{dtype} {c:?}: {:?}", launches.iter().map(|l| (&l.kernel, &l.report.findings)).collect::<Vec<_>>());
                let kernels: Vec<String> = launches.into_iter().map(|l| l.kernel).collect();
                let big_memory = stages.is_some();
                let staged = big_memory && (out[0] * out[1]).is_multiple_of(8);
                let bias = if with_bias { "_bias" } else { "" };
                let direct = if staged { "" } else { "_direct" };
                let (tn, stages) = if big_memory { (128, stages.unwrap_or(0)) } else { (64, 2) };
                let want_kernels = [format!("conv_weights_by_tap_{dtype}"), format!("conv_input_channels_last_{dtype}"), format!("conv2d_implicit_{dtype}_64x{tn}x64_s{stages}{bias}{direct}")];
                assert_eq!(kernels, want_kernels, "{dtype} {c:?}");
                let got = download(&y, dtype.scalar(), want.len()).unwrap();
                for (i, (g, v)) in got.iter().zip(&want).enumerate() {
                    let tol = v.abs() * dtype.unit_roundoff() * 1.01 + 1e-5;
                    assert!((g - v).abs() <= tol, "{dtype} {c:?} bias {with_bias} at {i}: {g} vs {v}");
                }
            }
        }
    }
    // A 1×1 window of stride 1 without padding is a plain product over the
    // input as it lies: the GEMM, no gather.
    let plain = Conv2d { kernel: [1, 1], padding: [0, 0], size: [4, 8], ..base };
    let gemm = enigma_ops::GemmOptions { cooperative: Some(true), ..Default::default() };
    let ops = Ops::new(&big).with_options(Options { elem: Some(DType::F16.scalar()), gemm, ..Options::default() });
    let Inputs { xb, wb, .. } = inputs(&big, &plain, DType::F16);
    ops.conv2d(&xb, &wb, None, &plain).unwrap();
    let kernels: Vec<String> = ops.take_launches().into_iter().map(|l| l.kernel).collect();
    assert!(kernels.len() == 1 && kernels[0].starts_with("gemm_coop_"), "{kernels:?}");
}
