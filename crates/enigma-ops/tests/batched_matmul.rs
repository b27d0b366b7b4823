//! Batched matrix products (`Ops::matmul_batched`, one dispatch over the
//! grid's third dimension, and `Ops::matmul_shared_a`, one A for every
//! product) against an f64 triple loop written here, for
//! every input type, at shapes that leave partial tiles and at shapes of
//! whole tiles, under the simulator's sanitizer.

use enigma_ir::Scalar;
use enigma_ops::{download, quantize, upload, CheckOutcome, DType, Ops, Options, Tolerance};
use enigma_runtime::{Device, Runtime};

fn values(n: usize, seed: usize, dtype: DType) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(|i| (((i + seed) * 2654435761) % 1021) as f32 / 1021.0 - 0.5).collect();
    quantize(dtype, &mut x);
    x
}

#[test]
fn batched_products_match_an_f64_loop() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for dtype in DType::ALL {
        let ops = Ops::new(&rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), ..Options::default() });
        for (batch, m, n, k) in [(3, 7, 13, 5), (2, 67, 101, 45), (4, 1, 1, 1), (2, 64, 64, 32)] {
            let a = values(batch * m * k, 1, dtype);
            let b = values(batch * k * n, 7, dtype);
            let mut want = vec![0.0f64; batch * m * n];
            for p in 0..batch {
                for i in 0..m {
                    for j in 0..n {
                        want[(p * m + i) * n + j] = (0..k).map(|l| a[(p * m + i) * k + l] as f64 * b[(p * k + l) * n + j] as f64).sum();
                    }
                }
            }
            let c = ops.matmul_batched(&upload(&rt, dtype.scalar(), &a).unwrap(), &upload(&rt, dtype.scalar(), &b).unwrap(), batch, m, n, k, DType::F32).unwrap();
            let got = download(&c, Scalar::F32, batch * m * n).unwrap();
            // f32 accumulation of k products of values below 0.5.
            let tol = 1e-6 * k as f64;
            let outcome = CheckOutcome::compare(&format!("matmul {dtype} batch {batch} {m}x{n}x{k}"), &[batch, m, n], &got, &want, |_| Tolerance::new(tol, tol));
            assert!(outcome.passed, "{outcome}");
            // The first A for every product (A's batch stride 0): only `m·k`
            // elements are read, so a buffer of exactly that many must do.
            let shared = ops.matmul_shared_a(&upload(&rt, dtype.scalar(), &a[..m * k]).unwrap(), &upload(&rt, dtype.scalar(), &b).unwrap(), batch, m, n, k, DType::F32).unwrap();
            let got = download(&shared, Scalar::F32, batch * m * n).unwrap();
            let mut want = vec![0.0f64; batch * m * n];
            for p in 0..batch {
                for i in 0..m {
                    for j in 0..n {
                        want[(p * m + i) * n + j] = (0..k).map(|l| a[i * k + l] as f64 * b[(p * k + l) * n + j] as f64).sum();
                    }
                }
            }
            let outcome = CheckOutcome::compare(&format!("matmul_shared_a {dtype} batch {batch} {m}x{n}x{k}"), &[batch, m, n], &got, &want, |_| Tolerance::new(tol, tol));
            assert!(outcome.passed, "{outcome}");
            assert!(ops.take_launches().iter().all(|l| l.report.findings.is_empty()));
        }
    }
}

#[test]
fn a_batch_that_does_not_fit_is_refused() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let a = upload(&rt, Scalar::F32, &[1.0; 8]).unwrap();
    let err = Ops::new(&rt).matmul_batched(&a, &a, 3, 2, 2, 2, DType::F32).unwrap_err().to_string();
    assert!(err.contains("matmul") && err.contains("12 f32 elements"), "{err}");
    let err = Ops::new(&rt).matmul_batched(&a, &a, 0, 2, 2, 2, DType::F32).unwrap_err().to_string();
    assert!(err.contains("batch must be at least 1"), "{err}");
}
