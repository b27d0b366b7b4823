//! The GEMM on cooperative tensors (`gemm::cooperative`) on the
//! simulator, under its sanitizer: through `Ops::matmul` and
//! `Ops::matmul_batched` (asked for with `GemmOptions::cooperative`) at
//! shapes that leave partial tiles along M, N and K, and dispatched
//! directly with alpha, beta and 16-bit outputs, each against an f64
//! triple loop written here; and the options it refuses.

use enigma_ir::Scalar;
use enigma_kernels::library::gemm::{gemm_cooperative, CoopGemmConfig};
use enigma_ops::{download, quantize, upload, DType, Error, GemmOptions, Ops, Options};
use enigma_runtime::{Arg, Device, Mode, Runtime};

fn values(n: usize, seed: usize, dtype: DType) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(|i| (((i + seed) * 2654435761) % 1021) as f32 / 1021.0 - 0.5).collect();
    quantize(dtype, &mut x);
    x
}

/// `alpha·A·B + beta·C` over `batch` matrices, in f64.
#[allow(clippy::too_many_arguments)]
fn product(a: &[f32], b: &[f32], c: &[f32], batch: usize, m: usize, n: usize, k: usize, alpha: f64, beta: f64) -> Vec<f64> {
    let mut out = vec![0.0f64; batch * m * n];
    for p in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|l| a[(p * m + i) * k + l] as f64 * b[(p * k + l) * n + j] as f64).sum();
                let prior = if beta != 0.0 { beta * c[(p * m + i) * n + j] as f64 } else { 0.0 };
                out[(p * m + i) * n + j] = alpha * dot + prior;
            }
        }
    }
    out
}

fn cooperative() -> Options {
    Options { sanitize: true, gemm: GemmOptions { cooperative: Some(true), ..GemmOptions::default() }, ..Options::default() }
}

/// Each element within `tol` (absolute, plus the output type's rounding).
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64, out: DType) {
    let rounding = match out {
        DType::F32 => 0.0,
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
    };
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol + rounding * w.abs(), "{what}: element {i} is {g}, want {w}");
    }
}

#[test]
fn matmul_on_cooperative_tensors_matches_an_f64_loop() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for dtype in [DType::F16, DType::BF16] {
        let ops = Ops::new(&rt).with_options(Options { elem: Some(dtype.scalar()), ..cooperative() });
        for (batch, m, n, k) in [(1, 1, 8, 8), (1, 7, 72, 40), (1, 100, 136, 200), (1, 130, 64, 64), (3, 65, 24, 136)] {
            let a = values(batch * m * k, 1, dtype);
            let b = values(batch * k * n, 7, dtype);
            let c = ops.matmul_batched(&upload(&rt, dtype.scalar(), &a).unwrap(), &upload(&rt, dtype.scalar(), &b).unwrap(), batch, m, n, k, DType::F32).unwrap();
            let kernel = ops.take_launches().remove(0).kernel;
            assert!(kernel.starts_with("gemm_coop_"), "{kernel}");
            let got: Vec<f64> = download(&c, Scalar::F32, batch * m * n).unwrap().iter().map(|&x| x as f64).collect();
            // f32 accumulation of k products of values below 0.5.
            assert_close(&format!("{kernel} batch {batch} {m}x{n}x{k}"), &got, &product(&a, &b, &[], batch, m, n, k, 1.0, 0.0), 1e-6 * k as f64, DType::F32);
        }
    }
}

#[test]
fn the_epilogue_scales_adds_c_and_rounds_to_the_output_type() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let (batch, m, n, k) = (2usize, 70usize, 80usize, 72usize);
    for (input, output) in [(DType::F16, DType::F16), (DType::BF16, DType::BF16), (DType::F16, DType::F32)] {
        let cfg = CoopGemmConfig::for_memory(input, output, None, rt.device().max_threadgroup_memory_bytes).unwrap();
        let pipeline = rt.pipeline(&gemm_cooperative(&cfg)).unwrap();
        let (a, b, c0) = (values(batch * m * k, 3, input), values(batch * k * n, 5, input), values(batch * m * n, 9, output));
        let up = |dtype: DType, v: &[f32]| upload(&rt, dtype.scalar(), v).unwrap();
        let (ab, bb, cb) = (up(input, &a), up(input, &b), up(output, &c0));
        let (alpha, beta) = (0.75f32, -1.5f32);
        let args = [Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::u32(m as u32), Arg::u32(n as u32), Arg::u32(k as u32), Arg::f32(alpha), Arg::f32(beta)];
        let dispatch = cfg.dispatch(m as u32, n as u32, batch as u32);
        rt.dispatch(&pipeline, &args, Mode::Threadgroups, dispatch.size, dispatch.threads, &enigma_runtime::Options { sanitize: true, ..Default::default() }).unwrap();
        let got: Vec<f64> = download(&cb, output.scalar(), batch * m * n).unwrap().iter().map(|&x| x as f64).collect();
        let want = product(&a, &b, &c0, batch, m, n, k, alpha as f64, beta as f64);
        assert_close(&format!("{} {m}x{n}x{k}", cfg.name()), &got, &want, 1e-6 * k as f64, output);
    }
}

#[test]
fn the_simulator_runs_the_simdgroup_kernel_unless_asked_and_refuses_what_the_kernel_cannot_take() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let (a, b) = (upload(&rt, Scalar::F16, &values(64 * 64, 1, DType::F16)).unwrap(), upload(&rt, Scalar::F16, &values(64 * 64, 2, DType::F16)).unwrap());
    let ops = Ops::new(&rt).with_options(Options { elem: Some(Scalar::F16), ..Options::default() });
    ops.matmul(&a, &b, 64, 64, 64, DType::F32).unwrap();
    let kernel = ops.take_launches().remove(0).kernel;
    assert!(kernel.starts_with("gemm_f16"), "{kernel}");
    let forced = Ops::new(&rt).with_options(Options { elem: Some(Scalar::F16), ..cooperative() });
    // N = 60 is not whole 16-byte copies.
    let err = forced.matmul(&a, &b, 64, 60, 64, DType::F32).unwrap_err();
    assert!(matches!(err, Error::Argument { .. }) && err.to_string().contains("N = 60 and K = 64 must be multiples of 8"), "{err}");
    let split = Ops::new(&rt).with_options(Options { elem: Some(Scalar::F16), gemm: GemmOptions { k_splits: Some(2), ..cooperative().gemm }, ..cooperative() });
    let err = split.matmul(&a, &b, 64, 64, 64, DType::F32).unwrap_err();
    assert!(err.to_string().contains("options of the SIMD-group kernel"), "{err}");
}
