//! 2-D max and average pooling (`Ops::pool2d`) against a plain f64 loop over
//! windows written here, at awkward sizes (odd planes, windows of 1, padded
//! edges, strides that skip elements), for every element type, under the
//! simulator's sanitizer.

use enigma_ops::{download, quantize, upload, DType, Ops, Options, Pool};
use enigma_runtime::{Device, Runtime};

#[allow(clippy::too_many_arguments)]
fn reference(pool: Pool, x: &[f32], planes: usize, [h, w]: [usize; 2], [kh, kw]: [usize; 2], [sh, sw]: [usize; 2], [ph, pw]: [usize; 2]) -> (Vec<f64>, [usize; 2]) {
    let (oh, ow) = ((h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1);
    let mut out = vec![];
    for p in 0..planes {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut values = vec![];
                for ky in 0..kh {
                    for kx in 0..kw {
                        let (iy, ix) = ((oy * sh + ky) as isize - ph as isize, (ox * sw + kx) as isize - pw as isize);
                        if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                            values.push(x[(p * h + iy as usize) * w + ix as usize] as f64);
                        }
                    }
                }
                let sum: f64 = values.iter().sum();
                out.push(match pool {
                    Pool::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    Pool::Avg { count_pad: true } => sum / (kh * kw) as f64,
                    Pool::Avg { count_pad: false } => sum / values.len() as f64,
                });
            }
        }
    }
    (out, [oh, ow])
}

#[test]
fn pooling_matches_an_f64_loop() {
    let rt = Runtime::new(Device::Sim).unwrap();
    type Case = (usize, [usize; 2], [usize; 2], [usize; 2], [usize; 2]);
    let cases: [Case; 5] = [
        (3, [7, 9], [2, 2], [2, 2], [0, 0]),
        (2, [8, 8], [3, 3], [1, 1], [1, 1]),
        (1, [1, 1], [1, 1], [1, 1], [0, 0]),
        (4, [13, 5], [3, 2], [2, 3], [1, 1]),
        (2, [32, 33], [5, 4], [3, 2], [2, 2]),
    ];
    for dtype in DType::ALL {
        let ops = Ops::new(&rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), ..Options::default() });
        for (planes, size, kernel, stride, padding) in cases {
            let mut x: Vec<f32> = (0..planes * size[0] * size[1]).map(|i| ((i * 37 + 11) % 23) as f32 * 0.375 - 4.0).collect();
            quantize(dtype, &mut x);
            let xb = upload(&rt, dtype.scalar(), &x).unwrap();
            for pool in [Pool::Max, Pool::Avg { count_pad: true }, Pool::Avg { count_pad: false }] {
                let (want, out) = reference(pool, &x, planes, size, kernel, stride, padding);
                let (y, got_out) = ops.pool2d(pool, &xb, planes, size, kernel, stride, padding).unwrap();
                assert_eq!(got_out, out);
                let got = download(&y, dtype.scalar(), want.len()).unwrap();
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let tol = w.abs() * dtype.unit_roundoff() * 2.0 + 1e-6;
                    assert!((g - w).abs() <= tol, "{pool:?} {dtype} planes {planes} {size:?} k {kernel:?} s {stride:?} p {padding:?} at {i}: {g} vs {w}");
                }
            }
        }
    }
}

#[test]
fn bad_windows_are_refused() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let x = upload(&rt, enigma_ir::Scalar::F32, &[0.0; 16]).unwrap();
    let ops = Ops::new(&rt);
    let err = ops.pool2d(Pool::Max, &x, 1, [4, 4], [2, 2], [2, 2], [2, 0]).unwrap_err().to_string();
    assert!(err.contains("max_pool2d") && err.contains("more than half the window"), "{err}");
    let err = ops.pool2d(Pool::Max, &x, 1, [4, 4], [5, 2], [1, 1], [0, 0]).unwrap_err().to_string();
    assert!(err.contains("larger than the padded plane"), "{err}");
    let err = ops.pool2d(Pool::Avg { count_pad: true }, &x, 1, [4, 4], [2, 2], [0, 1], [0, 0]).unwrap_err().to_string();
    assert!(err.contains("at least 1"), "{err}");
}
