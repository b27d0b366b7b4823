//! Every `fast::` and `precise::` variant of the math functions
//! (`Intrinsic::WITH_PRECISION_VARIANTS`) on f32, against an f64 reference,
//! on the GPU and on the simulator:
//!
//! * `precise::` within CUDA's documented bounds (its programming guide's
//!   maximum ULP errors: `sqrt` and `rsqrt` correctly rounded, `exp`,
//!   `exp2`, `sin`, `cos`, `asin`, `acos`, `atan`, `cosh`, `tanh` 2 ULP,
//!   `log`, `log2` 1, `atan2`, `sinh`, `asinh`, `atanh` 3, `tan`, `acosh`,
//!   `pow` 4; the rounding, sign and selection functions exact); the
//!   simulator, which computes them in f64 and rounds once, meets the same
//!   bounds.
//! * `fast::` within the documented errors of CUDA's intrinsics on their
//!   domains (`__expf`: 2 + ⌊1.173·|x|⌋ ULP; `__logf`, `__log2f`: 2^-21
//!   absolute on [0.5, 2], else 3 ULP; `__sinf`, `__cosf`: 2^-21 absolute on
//!   [-π, π]; `__tanf`, computed from those two: 2^-18 absolute plus 2^-19
//!   relative on [-1, 1]; `__powf`: 2^-12 relative for x in [1/16, 16],
//!   |y| ≤ 4; `rsqrt` is `rsqrtf`, 2 ULP), the other functions within their
//!   `precise::` bounds (CUDA has no intrinsic for them and calls the same
//!   function).
//!
//! The GPU half prints `skipped: <reason>` and passes where CUDA is
//! unavailable (recorded by `enigma_conformance::skip`).

use enigma_cuda::CudaBackend;
use enigma_ir::builder::*;
use enigma_ir::{Access, Intrinsic, Precision, Type};
use enigma_runtime::{Arg, Device, Runtime};
use std::sync::Arc;

/// The error a variant is allowed, at argument `x` (the first).
#[derive(Clone, Copy, Debug)]
enum Tol {
    Ulps(f64),
    /// `__expf`: 2 + ⌊1.173·|x|⌋ ULP.
    ExpUlps,
    /// `abs` absolute for x in [0.5, 2], else `ulps` ULP.
    AbsNearOne { abs: f64, ulps: f64 },
    /// `abs` absolute error.
    Abs(f64),
    /// `rel`·|want| + `abs`.
    Rel { rel: f64, abs: f64 },
}

impl Tol {
    fn holds(self, got: f32, want: f64, x: f64) -> bool {
        if got.is_nan() || want.is_nan() {
            return got.is_nan() && (want as f32).is_nan();
        }
        let err = (got as f64 - want).abs();
        match self {
            Tol::Ulps(n) => ulps(got, want) <= n,
            Tol::ExpUlps => ulps(got, want) <= 2.0 + (1.173 * x.abs()).floor(),
            Tol::AbsNearOne { abs, ulps: n } => {
                if (0.5..=2.0).contains(&x) {
                    err <= abs
                } else {
                    ulps(got, want) <= n
                }
            }
            Tol::Abs(abs) => err <= abs,
            Tol::Rel { rel, abs } => err <= rel * want.abs() + abs,
        }
    }
}

/// ULPs between `got` and the f32 rounding of `want` (0 when equal).
fn ulps(got: f32, want: f64) -> f64 {
    let w = want as f32;
    if w == got {
        return 0.0;
    }
    if !w.is_finite() || !got.is_finite() {
        return f64::INFINITY;
    }
    let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
    (got as f64 - want).abs() / ulp
}

/// `count` inputs spread evenly over `lo..hi`.
fn spread(lo: f32, hi: f32, count: usize) -> Vec<f32> {
    (0..count).map(|i| lo + (hi - lo) * i as f32 / (count - 1) as f32).collect()
}

type Reference = fn(&[f64]) -> f64;

/// A function's inputs, its f64 reference and its `precise::` bound.
fn case(f: Intrinsic) -> (Vec<Vec<f32>>, Reference, Tol) {
    use Intrinsic::*;
    let n = 4001;
    let one = |lo: f32, hi: f32| vec![spread(lo, hi, n)];
    let two = |lo: f32, hi: f32, lo2: f32, hi2: f32| vec![spread(lo, hi, n), spread(lo2, hi2, n).into_iter().rev().collect()];
    match f {
        Exp => (one(-80.0, 80.0), |x| x[0].exp(), Tol::Ulps(2.0)),
        Exp2 => (one(-120.0, 120.0), |x| x[0].exp2(), Tol::Ulps(2.0)),
        Log => (one(1e-30, 1e30), |x| x[0].ln(), Tol::Ulps(1.0)),
        Log2 => (one(1e-30, 1e30), |x| x[0].log2(), Tol::Ulps(1.0)),
        Sqrt => (one(0.0, 1e30), |x| x[0].sqrt(), Tol::Ulps(0.5)),
        Rsqrt => (one(1e-30, 1e30), |x| 1.0 / x[0].sqrt(), Tol::Ulps(0.5)),
        Sin => (one(-100.0, 100.0), |x| x[0].sin(), Tol::Ulps(2.0)),
        Cos => (one(-100.0, 100.0), |x| x[0].cos(), Tol::Ulps(2.0)),
        Tan => (one(-1.5, 1.5), |x| x[0].tan(), Tol::Ulps(4.0)),
        Asin => (one(-1.0, 1.0), |x| x[0].asin(), Tol::Ulps(2.0)),
        Acos => (one(-1.0, 1.0), |x| x[0].acos(), Tol::Ulps(2.0)),
        Atan => (one(-50.0, 50.0), |x| x[0].atan(), Tol::Ulps(2.0)),
        Atan2 => (two(-3.0, 3.0, -2.0, 2.5), |x| x[0].atan2(x[1]), Tol::Ulps(3.0)),
        Sinh => (one(-10.0, 10.0), |x| x[0].sinh(), Tol::Ulps(3.0)),
        Cosh => (one(-10.0, 10.0), |x| x[0].cosh(), Tol::Ulps(2.0)),
        Tanh => (one(-10.0, 10.0), |x| x[0].tanh(), Tol::Ulps(2.0)),
        Asinh => (one(-100.0, 100.0), |x| x[0].asinh(), Tol::Ulps(3.0)),
        Acosh => (one(1.0, 100.0), |x| x[0].acosh(), Tol::Ulps(4.0)),
        Atanh => (one(-0.99, 0.99), |x| x[0].atanh(), Tol::Ulps(3.0)),
        Pow => (two(0.01, 20.0, -8.0, 8.0), |x| x[0].powf(x[1]), Tol::Ulps(4.0)),
        Floor => (one(-20.0, 20.0), |x| x[0].floor(), Tol::Ulps(0.0)),
        Ceil => (one(-20.0, 20.0), |x| x[0].ceil(), Tol::Ulps(0.0)),
        Round => (one(-20.0, 20.0), |x| x[0].round(), Tol::Ulps(0.0)),
        Trunc => (one(-20.0, 20.0), |x| x[0].trunc(), Tol::Ulps(0.0)),
        Rint => (one(-20.0, 20.0), |x| x[0].round_ties_even(), Tol::Ulps(0.0)),
        Copysign => (two(-5.0, 5.0, -3.0, 3.0), |x| x[0].copysign(x[1]), Tol::Ulps(0.0)),
        Fmod => (two(-50.0, 50.0, 0.5, 7.0), |x| x[0] % x[1], Tol::Ulps(0.0)),
        Abs => (one(-5.0, 5.0), |x| x[0].abs(), Tol::Ulps(0.0)),
        Min => (two(-5.0, 5.0, -3.0, 3.0), |x| x[0].min(x[1]), Tol::Ulps(0.0)),
        Max => (two(-5.0, 5.0, -3.0, 3.0), |x| x[0].max(x[1]), Tol::Ulps(0.0)),
        Clamp => (vec![spread(-5.0, 5.0, n), vec![-1.0; n], vec![2.0; n]], |x| x[0].clamp(x[1], x[2]), Tol::Ulps(0.0)),
        Saturate => (one(-2.0, 2.0), |x| x[0].clamp(0.0, 1.0), Tol::Ulps(0.0)),
        other => panic!("no inputs for {}", other.name()),
    }
}

/// The `fast::` variant's inputs and bound where CUDA has an intrinsic for
/// it (its documented domain), else the `precise::` case.
fn fast_case(f: Intrinsic) -> (Vec<Vec<f32>>, Reference, Tol) {
    use Intrinsic::*;
    let pi = std::f32::consts::PI;
    let n = 4001;
    let (inputs, reference, _) = case(f);
    match f {
        Exp => (inputs, reference, Tol::ExpUlps),
        Rsqrt => (inputs, reference, Tol::Ulps(2.0)),
        Log | Log2 => (vec![spread(1e-3, 64.0, n)], reference, Tol::AbsNearOne { abs: 2f64.powi(-21), ulps: 3.0 }),
        Sin | Cos => (vec![spread(-pi, pi, n)], reference, Tol::Abs(2f64.powi(-21))),
        Tan => (vec![spread(-1.0, 1.0, n)], reference, Tol::Rel { rel: 2f64.powi(-19), abs: 2f64.powi(-18) }),
        Pow => (vec![spread(1.0 / 16.0, 16.0, n), spread(-4.0, 4.0, n)], reference, Tol::Rel { rel: 2f64.powi(-12), abs: 0.0 }),
        _ => case(f),
    }
}

/// `out[i] = precision's func(in0[i], …)` on `rt`.
fn run(rt: &Runtime, func: Intrinsic, precision: Precision, args: &[Vec<f32>]) -> Vec<f32> {
    let n = args[0].len();
    let mut k = KernelBuilder::new("variant");
    let ins: Vec<_> = (0..func.arity()).map(|i| k.buffer(&format!("in{i}"), Type::F32, Access::Read)).collect();
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let g = k.let_("g", thread_position_in_grid().x());
    let vals: Vec<Ex> = ins.iter().map(|m| m.get(g)).collect();
    k.store(out.at(g), call_with(func, precision, &vals));
    let kernel = k.finish().unwrap();
    let pipeline = rt.pipeline(&kernel).unwrap();
    let inputs: Vec<_> = args.iter().map(|a| rt.buffer_from(a).unwrap()).collect();
    let output = rt.buffer_zeroed::<f32>(n).unwrap();
    let mut bound: Vec<Arg<'_>> = inputs.iter().map(Arg::from).collect();
    bound.push(Arg::from(&output));
    rt.dispatch_threads(&pipeline, &bound, [n as u32, 1, 1], [128, 1, 1]).unwrap();
    output.to_vec::<f32>().unwrap()
}

fn check_all(rt: &Runtime, device: &str) {
    let mut failures = vec![];
    for f in Intrinsic::WITH_PRECISION_VARIANTS {
        for precision in [Precision::Precise, Precision::Fast] {
            let (args, reference, tol) = if precision == Precision::Fast { fast_case(f) } else { case(f) };
            let got = run(rt, f, precision, &args);
            let worst = got.iter().enumerate().find(|(i, g)| {
                let xs: Vec<f64> = args.iter().map(|a| a[*i] as f64).collect();
                !tol.holds(**g, reference(&xs), xs[0])
            });
            if let Some((i, g)) = worst {
                let xs: Vec<f32> = args.iter().map(|a| a[i]).collect();
                let want = reference(&xs.iter().map(|&x| x as f64).collect::<Vec<_>>());
                failures.push(format!("{} on {device}: f({xs:?}) = {g}, the reference {want} ({} ULP; bound {tol:?})", f.qualified_name(precision), ulps(*g, want)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_variant_within_its_bound_on_the_gpu() {
    let rt = match CudaBackend::new() {
        Ok(b) => Runtime::with_backend(Arc::new(b)),
        Err(e) => {
            enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e);
            return;
        }
    };
    check_all(&rt, "CUDA");
}

/// The same bounds hold on the simulator (`precise::` in f64 rounded once,
/// `fast::` as the default variant), which keeps the references and the
/// bounds themselves checked where there is no GPU.
#[test]
fn every_variant_within_its_bound_on_the_simulator() {
    check_all(&Runtime::new(Device::Sim).unwrap(), "the simulator");
}
