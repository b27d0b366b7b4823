//! Registry entries of the operations over an axis and of images: running
//! sums and products over the middle axis of `[outer, axis, inner]`, the
//! depthwise 3×3 convolution.

use super::entry::{entry, input, size, Case, Entry};
use crate::check::Tolerance;
use crate::conv::Conv2d;
use enigma_kernels::library::scan::AxisScan;
use enigma_kernels::library::DType;
use enigma_kernels::TestRng;

/// `{cumsum,cumprod}_axis_{dtype}`: the inclusive running sum or product
/// over the middle axis of `[outer, axis, inner]`, f32 accumulation.
pub(super) fn axis_scan_entry(op: AxisScan, dtype: DType) -> Entry {
    let description = format!("{} over the middle axis of [outer, axis, inner] {dtype} (f32 accumulation; by chunks of the axis where the columns are few)", op.name());
    entry(format!("{}_axis_{dtype}", op.name()), description, dtype.scalar(), &["outer", "axis", "inner"], &[2, 300, 36], &[1, 8192, 8192], move |rt, shape, seed| {
        let (outer, axis, inner) = (shape[0], shape[1], shape[2]);
        let n = outer * axis * inner;
        // Factors near 1 for products, values around 0 for sums.
        let (lo, hi) = if op == AxisScan::Sum { (-1.0, 1.0) } else { (1.0 - 1.0 / 256.0, 1.0 + 1.0 / 256.0) };
        let (x, xb) = input(rt, dtype, &mut TestRng::new(seed), n, lo, hi)?;
        let mut want = vec![0.0; n];
        let mut tols = vec![Tolerance::exact(); n];
        for o in 0..outer {
            for i in 0..inner {
                let (mut acc, mut magnitude) = if op == AxisScan::Sum { (0.0, 0.0) } else { (1.0, 1.0) };
                for j in 0..axis {
                    let at = (o * axis + j) * inner + i;
                    let v = x[at] as f64;
                    (acc, magnitude) = if op == AxisScan::Sum { (acc + v, magnitude + v.abs()) } else { (acc * v, magnitude * v.abs()) };
                    want[at] = acc;
                    // f32 accumulation of j + 1 terms, rounded once to the type.
                    let f32_error = magnitude * f32::EPSILON as f64 * (j + 1) as f64;
                    tols[at] = Tolerance::new(f32_error + dtype.underflow_error() * 1.01, dtype.unit_roundoff() * 1.01);
                }
            }
        }
        Ok(Case {
            run: Box::new(move |ops| ops.scan_axis(op, &xb, outer, axis, inner)),
            out_elem: dtype.scalar(),
            want,
            tol: Box::new(move |i| tols[i]),
            bytes: 2 * n as u64 * size(dtype),
        })
    })
}

/// The dense convolutions of the registry: a 3×3 window of padding 1, and
/// a 1×1 one (pointwise) without padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DenseWindow {
    Square3,
    Pointwise,
}

impl DenseWindow {
    /// `(window side, padding)`.
    fn size(self) -> (usize, usize) {
        match self {
            DenseWindow::Square3 => (3, 1),
            DenseWindow::Pointwise => (1, 0),
        }
    }
}

/// `conv2d_{dtype}` (the 3×3 window of padding 1) and
/// `conv2d_pointwise_{dtype}` (1×1, no padding): a dense convolution with
/// a bias over `[batch, in_channels, h, w]` (NCHW) to `out_channels`, f32
/// accumulation, one rounding. The 3×3 one runs the unfolding and the
/// batched GEMM with the bias in its epilogue (the test shape's
/// `in_channels · 9` is not a multiple of 8, so on `sm_90a` it runs the
/// SIMD-group GEMM), or where its input channels are a multiple of 64 on
/// `sm_90a` (the bench shape) the implicit GEMM on cooperative tensors;
/// the pointwise one the batched GEMM over the input as it lies.
pub(super) fn dense_conv_entry(dtype: DType, window: DenseWindow) -> Entry {
    let (side, pad) = window.size();
    let (name, description) = match window {
        DenseWindow::Square3 => (format!("conv2d_{dtype}"), format!("dense 3×3 conv2d, padding 1, with a bias, over [batch, in_channels, out_channels, h, w] {dtype} (f32 accumulation)")),
        DenseWindow::Pointwise => (format!("conv2d_pointwise_{dtype}"), format!("pointwise (1×1) conv2d with a bias over [batch, in_channels, out_channels, h, w] {dtype} (f32 accumulation)")),
    };
    let bench: &[usize] = match window {
        DenseWindow::Square3 => &[64, 64, 64, 32, 32],
        DenseWindow::Pointwise => &[64, 64, 128, 32, 32],
    };
    entry(name, description, dtype.scalar(), &["batch", "in_channels", "out_channels", "h", "w"], &[2, 3, 5, 10, 16], bench, move |rt, shape, seed| {
        let (batch, c_in, c_out, h, w) = (shape[0], shape[1], shape[2], shape[3], shape[4]);
        let c = Conv2d { batch, in_channels: c_in, size: [h, w], out_channels: c_out, kernel: [side, side], stride: [1, 1], padding: [pad, pad], dilation: [1, 1], groups: 1 };
        let taps = side * side;
        let mut rng = TestRng::new(seed);
        let (x, xb) = input(rt, dtype, &mut rng, batch * c_in * h * w, -1.0, 1.0)?;
        let (wt, wb) = input(rt, dtype, &mut rng, c_out * c_in * taps, -1.0, 1.0)?;
        let (bias, bb) = input(rt, dtype, &mut rng, c_out, -1.0, 1.0)?;
        let mut want = vec![];
        let mut tols = vec![];
        for image in 0..batch {
            for co in 0..c_out {
                for oy in 0..h {
                    for ox in 0..w {
                        let (mut acc, mut magnitude) = (bias[co] as f64, (bias[co] as f64).abs());
                        for ci in 0..c_in {
                            for ky in 0..side {
                                for kx in 0..side {
                                    let (iy, ix) = ((oy + ky) as isize - pad as isize, (ox + kx) as isize - pad as isize);
                                    if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                                        let p = x[((image * c_in + ci) * h + iy as usize) * w + ix as usize] as f64 * wt[(co * c_in + ci) * taps + ky * side + kx] as f64;
                                        acc += p;
                                        magnitude += p.abs();
                                    }
                                }
                            }
                        }
                        want.push(acc);
                        // `c_in · taps + 1` f32 terms, rounded once to the type.
                        let terms = (c_in * taps + 1) as f64;
                        tols.push(Tolerance::new(magnitude * f32::EPSILON as f64 * terms + dtype.underflow_error() * 1.01, dtype.unit_roundoff() * 1.01));
                    }
                }
            }
        }
        Ok(Case {
            run: Box::new(move |ops| Ok(ops.conv2d(&xb, &wb, Some(&bb), &c)?.0)),
            out_elem: dtype.scalar(),
            want,
            tol: Box::new(move |i| tols[i]),
            bytes: (batch * (c_in + c_out) * h * w) as u64 * size(dtype),
        })
    })
}

/// `conv2d_depthwise_{dtype}`: the depthwise 3×3 convolution of padding 1
/// with a bias over `[batch, channels, h, w]` (NCHW), f32 accumulation.
pub(super) fn depthwise_entry(dtype: DType) -> Entry {
    let description = format!("depthwise 3×3 conv2d, padding 1, with a bias, over [batch, channels, h, w] {dtype} (f32 accumulation)");
    entry(format!("conv2d_depthwise_{dtype}"), description, dtype.scalar(), &["batch", "channels", "h", "w"], &[2, 3, 10, 16], &[64, 64, 32, 32], move |rt, shape, seed| {
        let (batch, channels, h, w) = (shape[0], shape[1], shape[2], shape[3]);
        let c = Conv2d { batch, in_channels: channels, size: [h, w], out_channels: channels, kernel: [3, 3], stride: [1, 1], padding: [1, 1], dilation: [1, 1], groups: channels };
        let mut rng = TestRng::new(seed);
        let (x, xb) = input(rt, dtype, &mut rng, batch * channels * h * w, -1.0, 1.0)?;
        let (wt, wb) = input(rt, dtype, &mut rng, channels * 9, -1.0, 1.0)?;
        let (bias, bb) = input(rt, dtype, &mut rng, channels, -1.0, 1.0)?;
        let mut want = vec![];
        let mut tols = vec![];
        for plane in 0..batch * channels {
            let ch = plane % channels;
            for oy in 0..h {
                for ox in 0..w {
                    let (mut acc, mut magnitude) = (bias[ch] as f64, (bias[ch] as f64).abs());
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (iy, ix) = ((oy + ky) as isize - 1, (ox + kx) as isize - 1);
                            if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                                let p = x[(plane * h + iy as usize) * w + ix as usize] as f64 * wt[ch * 9 + ky * 3 + kx] as f64;
                                acc += p;
                                magnitude += p.abs();
                            }
                        }
                    }
                    want.push(acc);
                    // Ten f32 terms, rounded once to the type.
                    tols.push(Tolerance::new(magnitude * f32::EPSILON as f64 * 10.0 + dtype.underflow_error() * 1.01, dtype.unit_roundoff() * 1.01));
                }
            }
        }
        Ok(Case {
            run: Box::new(move |ops| Ok(ops.conv2d(&xb, &wb, Some(&bb), &c)?.0)),
            out_elem: dtype.scalar(),
            want,
            tol: Box::new(move |i| tols[i]),
            bytes: 2 * (batch * channels * h * w) as u64 * size(dtype),
        })
    })
}
