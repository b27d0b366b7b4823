//! The operations over any axis of an array seen as `[outer, axis, inner]`
//! (reductions, argmax/argmin, mean, softmax and log-softmax, cumulative
//! sums and products) against plain f64 loops written here, at awkward
//! shapes (axes of 1, 7 and 1000; first, middle and last), for every
//! element type, under the simulator's sanitizer.

use enigma_ir::Scalar;
use enigma_ops::{download, quantize, upload, AxisReduction, AxisScan, CheckOutcome, DType, LossReduction, Ops, Options, ReduceOp, Tolerance};
use enigma_runtime::{Device, Runtime};

/// `[outer, axis, inner]` shapes: the axis first (outer 1), in the middle,
/// last (inner 1), of length 1, and long.
const SHAPES: [[usize; 3]; 8] = [[1, 7, 1], [1, 1, 1], [3, 1000, 1], [1, 7, 13], [5, 7, 3], [2, 1, 9], [1, 1000, 3], [7, 33, 1]];

/// Shapes of the running sums' and products' row scan: rows of several
/// chunks with 4-wide loads and without, short rows, and whole vectors of
/// several blocks (the last one partial) for the blocked f16/bf16 sum.
const SCAN_SHAPES: [[usize; 3]; 4] = [[2, 3000, 1], [3, 1001, 1], [1, 10001, 1], [1, 8192, 1]];

/// Shapes of the running sums and products by chunks of the axis: 4-wide
/// columns (a last chunk short, several outer slices), scalar columns of a
/// row not a multiple of 4 or 8, an axis of two chunks, a row wider than a
/// threadgroup (two threadgroups across it, the second partial).
const CHUNK_SHAPES: [[usize; 3]; 5] = [[1, 1000, 8], [2, 257, 36], [1, 1000, 37], [3, 64, 5], [1, 70, 1100]];

/// Shapes of the reductions' kernels over a middle axis: rows of 4-wide
/// vectors and not, blocks of columns with a partial last block, the axis
/// split over threadgroups (with a second pass over the splits), and a
/// thread per column (many columns of a short row).
const REDUCTION_SHAPES: [[usize; 3]; 5] = [[3, 200, 40], [2, 1000, 37], [1, 1000, 64], [2, 9, 130], [2200, 2, 31]];

fn sanitized(elem: Scalar) -> Options {
    Options { sanitize: true, elem: Some(elem), ..Options::default() }
}

/// Deterministic values in [-4, 4) with repeats (ties for argmax), rounded
/// to `dtype`.
fn data(n: usize, dtype: DType) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(|i| ((i * 7919 + 13) % 61) as f32 / 61.0 * 8.0 - 4.0).collect();
    quantize(dtype, &mut x);
    x
}

/// The values of column `(o, i)` of `[outer, axis, inner]`.
fn column(x: &[f32], [_, axis, inner]: [usize; 3], o: usize, i: usize) -> Vec<f64> {
    (0..axis).map(|j| x[(o * axis + j) * inner + i] as f64).collect()
}

fn check(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let outcome = CheckOutcome::compare(what, &[want.len()], got, want, |_| Tolerance::new(tol, tol));
    assert!(outcome.passed, "{outcome}");
}

#[test]
fn reductions_over_any_axis_match_f64_loops() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for dtype in DType::ALL {
        let ops = Ops::new(&rt).with_options(sanitized(dtype.scalar()));
        for shape @ [outer, axis, inner] in SHAPES.into_iter().chain(REDUCTION_SHAPES) {
            let x = data(outer * axis * inner, dtype);
            let buf = upload(&rt, dtype.scalar(), &x).unwrap();
            let columns: Vec<Vec<f64>> = (0..outer).flat_map(|o| (0..inner).map(move |i| (o, i))).map(|(o, i)| column(&x, shape, o, i)).collect();
            let what = |name: &str| format!("{name} {dtype} {shape:?}");
            let sums: Vec<f64> = columns.iter().map(|c| c.iter().sum()).collect();
            let got = download(&ops.reduce_axis(AxisReduction::Value(ReduceOp::Sum), &buf, outer, axis, inner).unwrap(), Scalar::F32, outer * inner).unwrap();
            check(&what("sum"), &got, &sums, 1e-5 * axis as f64);
            let means: Vec<f64> = sums.iter().map(|s| s / axis as f64).collect();
            let got = download(&ops.mean_axis(&buf, outer, axis, inner).unwrap(), Scalar::F32, outer * inner).unwrap();
            check(&what("mean"), &got, &means, 1e-5);
            let maxima: Vec<f64> = columns.iter().map(|c| c.iter().copied().fold(f64::NEG_INFINITY, f64::max)).collect();
            let got = download(&ops.reduce_axis(AxisReduction::Value(ReduceOp::Max), &buf, outer, axis, inner).unwrap(), Scalar::F32, outer * inner).unwrap();
            assert_eq!(got, maxima, "{}", what("max"));
            let minima: Vec<f64> = columns.iter().map(|c| c.iter().copied().fold(f64::INFINITY, f64::min)).collect();
            let got = download(&ops.reduce_axis(AxisReduction::Value(ReduceOp::Min), &buf, outer, axis, inner).unwrap(), Scalar::F32, outer * inner).unwrap();
            assert_eq!(got, minima, "{}", what("min"));
            // The first index of the extreme value (the data repeats values).
            let first = |c: &Vec<f64>, v: f64| c.iter().position(|&e| e == v).unwrap() as f64;
            let want: Vec<f64> = columns.iter().zip(&maxima).map(|(c, &m)| first(c, m)).collect();
            let got = download(&ops.reduce_axis(AxisReduction::ArgMax, &buf, outer, axis, inner).unwrap(), Scalar::I32, outer * inner).unwrap();
            assert_eq!(got, want, "{}", what("argmax"));
            let want: Vec<f64> = columns.iter().zip(&minima).map(|(c, &m)| first(c, m)).collect();
            let got = download(&ops.reduce_axis(AxisReduction::ArgMin, &buf, outer, axis, inner).unwrap(), Scalar::I32, outer * inner).unwrap();
            assert_eq!(got, want, "{}", what("argmin"));
        }
    }
}

#[test]
fn argmax_and_argmin_take_the_first_nan_and_the_first_tie() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ops = Ops::new(&rt).with_options(sanitized(Scalar::F32));
    let nan = f32::NAN;
    // Columns of [1, 4, 2] (inner 2): [3, nan, 3, nan] and [-inf, -inf, 5, 5].
    let x = upload(&rt, Scalar::F32, &[3.0, f32::NEG_INFINITY, nan, f32::NEG_INFINITY, 3.0, 5.0, nan, 5.0]).unwrap();
    let argmax = download(&ops.reduce_axis(AxisReduction::ArgMax, &x, 1, 4, 2).unwrap(), Scalar::I32, 2).unwrap();
    assert_eq!(argmax, [1.0, 2.0]);
    let argmin = download(&ops.reduce_axis(AxisReduction::ArgMin, &x, 1, 4, 2).unwrap(), Scalar::I32, 2).unwrap();
    assert_eq!(argmin, [1.0, 0.0]);
}

#[test]
fn softmax_and_log_softmax_over_any_axis_match_f64_loops() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for dtype in DType::ALL {
        let ops = Ops::new(&rt).with_options(sanitized(dtype.scalar()));
        // One rounding of the result to the type, and f32 arithmetic.
        let tol = dtype.unit_roundoff() * 4.0 + 1e-5;
        for shape @ [outer, axis, inner] in SHAPES {
            let n = outer * axis * inner;
            let x = data(n, dtype);
            let buf = upload(&rt, dtype.scalar(), &x).unwrap();
            let mut soft = vec![0.0; n];
            let mut logs = vec![0.0; n];
            for o in 0..outer {
                for i in 0..inner {
                    let c = column(&x, shape, o, i);
                    let m = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let s: f64 = c.iter().map(|v| (v - m).exp()).sum();
                    for (j, v) in c.iter().enumerate() {
                        soft[(o * axis + j) * inner + i] = (v - m).exp() / s;
                        logs[(o * axis + j) * inner + i] = v - m - s.ln();
                    }
                }
            }
            let got = download(&ops.softmax_axis(&buf, outer, axis, inner, false).unwrap(), dtype.scalar(), n).unwrap();
            check(&format!("softmax {dtype} {shape:?}"), &got, &soft, tol);
            let got = download(&ops.softmax_axis(&buf, outer, axis, inner, true).unwrap(), dtype.scalar(), n).unwrap();
            check(&format!("log_softmax {dtype} {shape:?}"), &got, &logs, tol * 8.0);
        }
    }
}

#[test]
fn log_softmax_of_large_and_infinite_inputs() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ops = Ops::new(&rt).with_options(sanitized(Scalar::F32));
    let ninf = f32::NEG_INFINITY;
    let x = upload(&rt, Scalar::F32, &[1000.0, 1001.0, ninf, 0.0]).unwrap();
    let l = (1.0 + (-1f64).exp()).ln();
    // Rows [1000, 1001] and [-inf, 0].
    let got = download(&ops.softmax_axis(&x, 2, 2, 1, true).unwrap(), Scalar::F32, 4).unwrap();
    check("log_softmax rows", &[got[0], got[1], got[3]], &[-1.0 - l, -l, 0.0], 1e-6);
    assert_eq!(got[2], f64::NEG_INFINITY);
    // Columns [1000, -inf] and [1001, 0].
    let got = download(&ops.softmax_axis(&x, 1, 2, 2, true).unwrap(), Scalar::F32, 4).unwrap();
    assert_eq!((got[0], got[2]), (0.0, f64::NEG_INFINITY));
    check("log_softmax columns", &[got[1], got[3]], &[0.0, -1001.0], 1e-6);
    // A column of only -inf is NaN, as in PyTorch.
    let x = upload(&rt, Scalar::F32, &[ninf; 4]).unwrap();
    for log_form in [false, true] {
        let got = download(&ops.softmax_axis(&x, 1, 2, 2, log_form).unwrap(), Scalar::F32, 4).unwrap();
        assert!(got.iter().all(|v| v.is_nan()), "{got:?}");
    }
}

#[test]
fn cumulative_sums_and_products_over_any_axis() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for elem in [Scalar::F32, Scalar::F16, Scalar::BF16, Scalar::I32, Scalar::U32] {
        let ops = Ops::new(&rt).with_options(sanitized(elem));
        for shape @ [outer, axis, inner] in SHAPES.into_iter().chain(SCAN_SHAPES).chain(CHUNK_SHAPES) {
            let n = outer * axis * inner;
            // Small integers (exact sums), and factors near 1 for products.
            let x: Vec<f32> = (0..n).map(|i| ((i * 37 + 5) % 9) as f32).collect();
            let mut factors: Vec<f32> = (0..n).map(|i| if elem.is_float() { 1.0 + ((i % 5) as f32 - 2.0) / 512.0 } else { ((i % 3) as f32).max(1.0) }).collect();
            if let Some(dtype) = DType::from_scalar(elem) {
                quantize(dtype, &mut factors); // what the kernel reads
            }
            for (op, values) in [(AxisScan::Sum, &x), (AxisScan::Product, &factors)] {
                if op == AxisScan::Product && !elem.is_float() && axis > 20 {
                    continue; // 2^1000 wraps; the f64 loop would not.
                }
                let buf = upload(&rt, elem, values).unwrap();
                let mut want = vec![0.0; n];
                for o in 0..outer {
                    for i in 0..inner {
                        let mut acc = if op == AxisScan::Sum { 0.0 } else { 1.0 };
                        for (j, v) in column(values, shape, o, i).into_iter().enumerate() {
                            acc = if op == AxisScan::Sum { acc + v } else { acc * v };
                            want[(o * axis + j) * inner + i] = acc;
                        }
                    }
                }
                let got = download(&ops.scan_axis(op, &buf, outer, axis, inner).unwrap(), elem, n).unwrap();
                let tol = match DType::from_scalar(elem) {
                    Some(d) => d.unit_roundoff() * 2.0 + 1e-6 * axis as f64,
                    None => 0.0,
                };
                check(&format!("{} {elem} {shape:?}", op.name()), &got, &want, tol);
                let launches = ops.take_launches();
                assert!(launches.iter().all(|l| l.report.findings.is_empty()), "{} {elem} {shape:?}: {:?}", op.name(), launches.iter().map(|l| (&l.kernel, &l.report.findings)).collect::<Vec<_>>());
                if CHUNK_SHAPES.contains(&shape) {
                    assert!(launches.iter().any(|l| l.kernel.contains("_axis_chunks_scan_")), "{} {elem} {shape:?} ran {:?}", op.name(), launches.iter().map(|l| &l.kernel).collect::<Vec<_>>());
                }
            }
        }
    }
}

/// torch's argmax (`largest`) or argmin of one row: the first NaN if there
/// is one, else the first index of the extreme.
fn reference_arg(row: &[f32], largest: bool) -> f64 {
    if let Some(i) = row.iter().position(|v| v.is_nan()) {
        return i as f64;
    }
    let extreme = row.iter().copied().fold(if largest { f32::NEG_INFINITY } else { f32::INFINITY }, |a, b| if largest { a.max(b) } else { a.min(b) });
    row.iter().position(|&v| v == extreme).unwrap() as f64
}

#[test]
fn argmax_and_argmin_of_rows_across_threadgroup_sizes() {
    // Over the last axis the row kernel runs: its threads' partial answers
    // meet in a tree, so ties, NaNs and infinities must survive the tree
    // at every threadgroup size (96 runs as 64) and row length.
    let rt = Runtime::new(Device::Sim).unwrap();
    for dtype in DType::ALL {
        for threads in [32, 96, 256] {
            let ops = Ops::new(&rt).with_options(Options { threads: Some(threads), ..sanitized(dtype.scalar()) });
            for d in [1usize, 5, 33, 1000, 4097] {
                // Row 0: few distinct values (ties across threads); row 1:
                // the same with NaNs at d/2 and d - 1; row 2: all -inf; row
                // 3: the extremes only at the end.
                let mut x: Vec<f32> = (0..d).map(|j| ((j * 37) % 5) as f32 - 2.0).collect();
                let mut nans = x.clone();
                nans[d / 2] = f32::NAN;
                nans[d - 1] = f32::NAN;
                x.extend(nans);
                x.extend(std::iter::repeat_n(f32::NEG_INFINITY, d));
                x.extend((0..d).map(|j| if j + 1 == d { 9.0 } else if j + 2 == d { -9.0 } else { 0.5 }));
                quantize(dtype, &mut x);
                let buf = upload(&rt, dtype.scalar(), &x).unwrap();
                for (r, largest) in [(AxisReduction::ArgMax, true), (AxisReduction::ArgMin, false)] {
                    let got = download(&ops.reduce_axis(r, &buf, 4, d, 1).unwrap(), Scalar::I32, 4).unwrap();
                    let want: Vec<f64> = x.chunks(d).map(|row| reference_arg(row, largest)).collect();
                    assert_eq!(got, want, "{r} {dtype} d={d} threads={threads}");
                    let launches = ops.take_launches();
                    assert!(launches.iter().all(|l| l.kernel.contains("_rows_") && l.report.findings.is_empty()), "{r} {dtype} d={d}: {:?}", launches.iter().map(|l| (&l.kernel, &l.report.findings)).collect::<Vec<_>>());
                }
            }
        }
    }
}

#[test]
fn axis_operations_refuse_bad_shapes_and_types() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ops = Ops::new(&rt).with_options(sanitized(Scalar::F32));
    let x = upload(&rt, Scalar::F32, &[1.0; 12]).unwrap();
    let err = ops.reduce_axis(AxisReduction::ArgMax, &x, 2, 4, 3).unwrap_err().to_string();
    assert!(err.contains("argmax_axis") && err.contains("needs 96"), "{err}");
    let err = ops.softmax_axis(&x, 2, 0, 3, false).unwrap_err().to_string();
    assert!(err.contains("axis must be at least 1"), "{err}");
    let ints = Ops::new(&rt).with_options(sanitized(Scalar::I32));
    let err = ints.reduce_axis(AxisReduction::ArgMax, &x, 1, 12, 1).unwrap_err().to_string();
    assert!(err.contains("not f32, f16 or bf16"), "{err}");
}

#[test]
fn cross_entropy_matches_an_f64_loop() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for dtype in DType::ALL {
        let ops = Ops::new(&rt).with_options(sanitized(dtype.scalar()));
        for [outer, classes, inner] in [[4, 7, 1], [3, 1000, 1], [2, 5, 9], [1, 1, 1]] {
            let n = outer * inner;
            let x = data(outer * classes * inner, dtype);
            // Every class once in a while, and the ignored index -100.
            let targets: Vec<i32> = (0..n).map(|i| if i % 5 == 3 { -100 } else { ((i * 13) % classes) as i32 }).collect();
            let t = upload(&rt, Scalar::I32, &targets.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap();
            let xb = upload(&rt, dtype.scalar(), &x).unwrap();
            let mut losses = vec![0.0; n];
            for o in 0..outer {
                for i in 0..inner {
                    let c = column(&x, [outer, classes, inner], o, i);
                    let m = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let lse = m + c.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                    let target = targets[o * inner + i];
                    losses[o * inner + i] = if target < 0 { 0.0 } else { lse - c[target as usize] };
                }
            }
            let counted = targets.iter().filter(|&&t| t >= 0).count() as f64;
            let what = format!("cross_entropy {dtype} {outer}x{classes}x{inner}");
            let tol = dtype.unit_roundoff() * 8.0 + 1e-5;
            let got = download(&ops.cross_entropy(&xb, &t, outer, classes, inner, -100, None).unwrap(), Scalar::F32, n).unwrap();
            check(&what, &got, &losses, tol);
            let sum: f64 = losses.iter().sum();
            let got = download(&ops.cross_entropy(&xb, &t, outer, classes, inner, -100, Some(LossReduction::Sum)).unwrap(), Scalar::F32, 1).unwrap();
            check(&what, &got, &[sum], tol * n as f64);
            let got = download(&ops.cross_entropy(&xb, &t, outer, classes, inner, -100, Some(LossReduction::Mean)).unwrap(), Scalar::F32, 1).unwrap();
            if counted > 0.0 {
                check(&what, &got, &[sum / counted], tol * n as f64);
            } else {
                assert!(got[0].is_nan(), "{what}: every target ignored gives 0/0, as in PyTorch: {got:?}");
            }
        }
    }
    // A target outside the classes gives +inf.
    let ops = Ops::new(&rt).with_options(sanitized(Scalar::F32));
    let x = upload(&rt, Scalar::F32, &[0.0; 6]).unwrap();
    let t = upload(&rt, Scalar::I32, &[3.0, -1.0]).unwrap();
    let got = download(&ops.cross_entropy(&x, &t, 2, 3, 1, -100, None).unwrap(), Scalar::F32, 2).unwrap();
    assert_eq!(got, [f64::INFINITY, f64::INFINITY]);
}
