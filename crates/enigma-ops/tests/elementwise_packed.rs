//! The element-wise kernels of 8 elements a thread (packed f16 and bf16, 8
//! elements per 16-byte access; f32 as two `float4`s) against the f64
//! reference of each operation, under the simulator's sanitizer, and the
//! choice between them and the vector kernels.

use enigma_ops::{download, library::elementwise, quantize, upload, CheckOutcome, DType, Elementwise, Ops, Options, Tolerance};
use enigma_runtime::{Device, Runtime};

#[test]
fn packed_kernels_match_the_f64_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for dtype in [DType::F16, DType::BF16] {
        let ops = Ops::new(&rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), ..Options::default() });
        // A multiple of 8 (packed) and one that is not (the vector kernel).
        for n in [8usize, 2056, 2052] {
            for op in Elementwise::ALL {
                // The logarithm on its domain, a divisor away from 0.
                let mut x: Vec<f32> = (0..n).map(|i| ((i * 37 + 11) % 101) as f32 / 101.0 * 8.0 - 4.0).collect();
                if op == Elementwise::Log {
                    x.iter_mut().for_each(|v| *v += 4.01);
                }
                let mut b: Vec<f32> = (0..n).map(|i| 0.5 + ((i * 13 + 5) % 29) as f32 / 8.0).collect();
                quantize(dtype, &mut x);
                quantize(dtype, &mut b);
                let (xb, bb) = (upload(&rt, dtype.scalar(), &x).unwrap(), upload(&rt, dtype.scalar(), &b).unwrap());
                let y = ops.elementwise(op, &xb, op.is_binary().then_some(&bb), n, 0.75).unwrap();
                let kernel = ops.take_launches().pop().unwrap().kernel;
                let packed = n % 8 == 0;
                assert_eq!(kernel.ends_with("_vec8"), packed, "{op} {dtype} n {n}: ran {kernel}");
                let got = download(&y, dtype.scalar(), n).unwrap();
                let want = elementwise::reference(op, &x, Some(&b), 0.75);
                // Computed in f32 (erfc to 1.5e-7), rounded once to the type.
                let tol = Tolerance::new(1e-6 + dtype.underflow_error() * 1.01, 2e-6 + dtype.unit_roundoff() * 1.01);
                let outcome = CheckOutcome::compare(&format!("{op} {dtype} n {n}"), &[n], &got, &want, |_| tol);
                assert!(outcome.passed, "{outcome}");
            }
        }
    }
}

#[test]
fn f32_pairs_of_vectors_match_the_vector_kernel_and_the_f64_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let options = Options { sanitize: true, elem: Some(DType::F32.scalar()), threads: Some(64), ..Options::default() };
    let pairs = Ops::new(&rt).with_options(options.clone());
    let vectors = Ops::new(&rt).with_options(Options { vectorize: Some(true), ..options });
    // One element; a partial vector; whole threadgroups of 128 vectors; a
    // last threadgroup with its second vector out of range, and with one
    // vector in it partial.
    for n in [1usize, 7, 1024, 1030, 1290] {
        for op in Elementwise::ALL {
            let mut x: Vec<f32> = (0..n).map(|i| ((i * 37 + 11) % 101) as f32 / 101.0 * 8.0 - 4.0).collect();
            if op == Elementwise::Log {
                x.iter_mut().for_each(|v| *v += 4.01);
            }
            let b: Vec<f32> = (0..n).map(|i| 0.5 + ((i * 13 + 5) % 29) as f32 / 8.0).collect();
            let (xb, bb) = (upload(&rt, DType::F32.scalar(), &x).unwrap(), upload(&rt, DType::F32.scalar(), &b).unwrap());
            let run = |ops: &Ops<'_>| {
                let y = ops.elementwise(op, &xb, op.is_binary().then_some(&bb), n, 0.75).unwrap();
                let launch = ops.take_launches().pop().unwrap();
                assert!(launch.report.findings.is_empty(), "{op} n {n}: {:?}", launch.report.findings);
                (launch.kernel, download(&y, DType::F32.scalar(), n).unwrap())
            };
            let ((kernel, got), (vector_kernel, want_bits)) = (run(&pairs), run(&vectors));
            assert!(kernel.ends_with("_f32_vec4_x2") && vector_kernel.ends_with("_f32_vec4"), "{op} n {n}: ran {kernel} and {vector_kernel}");
            // The same f32 functions: the same bits.
            assert!(got.iter().zip(&want_bits).all(|(g, w)| g.to_bits() == w.to_bits()), "{op} n {n}: {got:?} vs {want_bits:?}");
            let want = elementwise::reference(op, &x, Some(&b), 0.75);
            let outcome = CheckOutcome::compare(&format!("{op} f32 n {n}"), &[n], &got, &want, |_| Tolerance::new(1e-6, 2e-6));
            assert!(outcome.passed, "{outcome}");
        }
    }
}

/// The 16-bit kernels' relaxed math (`library::elementwise::Math`) far out
/// on both sides, where `exp` overflows f32 and the reciprocal's argument
/// is infinite: the f64 reference's values (zeros keeping their sign),
/// not NaN.
#[test]
fn relaxed_math_keeps_the_tails() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let tails = [-60000.0f32, -1000.0, -100.0, -30.0, -12.0, -0.5, 0.5, 12.0, 30.0, 100.0, 1000.0, 60000.0];
    for dtype in [DType::F16, DType::BF16] {
        let ops = Ops::new(&rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), ..Options::default() });
        // Whole 16-byte groups: the packed kernel.
        let mut x: Vec<f32> = tails.iter().cycle().take(16).copied().collect();
        quantize(dtype, &mut x);
        let xb = upload(&rt, dtype.scalar(), &x).unwrap();
        for op in [Elementwise::Sigmoid, Elementwise::Silu, Elementwise::Gelu, Elementwise::GeluErf] {
            let y = ops.elementwise(op, &xb, None, x.len(), 1.0).unwrap();
            let got = download(&y, dtype.scalar(), x.len()).unwrap();
            let want = elementwise::reference(op, &x, None, 1.0);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let tol = 1e-6 + dtype.underflow_error() * 1.01 + w.abs() * (2e-6 + dtype.unit_roundoff() * 1.01);
                assert!((g - w).abs() <= tol && g.is_sign_negative() == w.is_sign_negative(), "{op} {dtype} at {} (x = {}): {g} vs {w}", i, x[i]);
            }
        }
    }
}

/// The 16-bit kernels' `log` (`library::elementwise::Math::Relaxed`: the
/// fast base-2 logarithm, a series within 1/8 of 1) on every finite
/// positive f16 and bf16 value, subnormals and values next to 1 included,
/// and at ±0, `+∞`, NaN and negative values, in the scalar, 4-wide and
/// packed kernels.
#[test]
fn log_of_every_half_value_is_within_the_bound() {
    let rt = Runtime::new(Device::Sim).unwrap();
    enigma_testing::half_log::check_log_of_every_half_value(&rt, true);
}
