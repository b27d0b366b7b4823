//! The math functions the simulator computes, kernel by kernel, against an
//! f64 reference on inputs spread over each function's domain: within 1 ULP
//! of the reference for the functions computed in f64 and rounded once
//! (the inverse and hyperbolic functions, erf, erfc, log1p, expm1, mix,
//! smoothstep), 2 ULP for tanh (f32's own); exact for round, trunc, rint,
//! copysign, fmod, sign, saturate and step; every `precise::` variant
//! within 1 ULP (computed in f64 and rounded once: correctly rounded but for
//! rare double roundings), every `fast::` variant equal to the default one
//! (the simulator's documented choice).

use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, SpecValues};
use enigma_ir::builder::*;
use enigma_ir::{validate, Access, Intrinsic, Precision, Type, ValidationOptions};
use enigma_sim::SimBackend;

/// `out[i] = func(a[i], b[i], c[i])` (as many arguments as `func` takes) on the simulator.
fn run(func: Intrinsic, args: &[Vec<f32>]) -> Vec<f32> {
    run_with(func, Precision::Default, args)
}

/// [`run`] of `precision`'s variant of `func`.
fn run_with(func: Intrinsic, precision: Precision, args: &[Vec<f32>]) -> Vec<f32> {
    let n = args[0].len();
    let mut k = KernelBuilder::new("math");
    let ins: Vec<_> = (0..func.arity()).map(|i| k.buffer(&format!("in{i}"), Type::F32, Access::Read)).collect();
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let g = k.let_("g", thread_position_in_grid().x());
    let vals: Vec<Ex> = ins.iter().map(|m| m.get(g)).collect();
    k.store(out.at(g), call_with(func, precision, &vals));
    let kernel = k.finish().unwrap();
    let info = validate(&kernel, &ValidationOptions::default()).unwrap();
    let backend = SimBackend::new();
    let compiled = backend.compile(&kernel, &info, &SpecValues::default()).unwrap();
    let mut storages = vec![];
    for a in args.iter().take(func.arity()) {
        let s = backend.allocate(n * 4).unwrap();
        s.write(0, &a.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        storages.push(s);
    }
    storages.push(backend.allocate(n * 4).unwrap());
    let bound: Vec<ArgValue<'_>> = storages.iter().map(|s| ArgValue::Buffer { storage: s.as_ref(), elem: None }).collect();
    let geometry = enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &bound, DispatchMode::Threads, [n as u32, 1, 1], [64, 1, 1]).unwrap();
    backend.dispatch(compiled.as_ref(), &bound, &geometry, &DispatchOptions::default()).unwrap();
    let mut bytes = vec![0u8; n * 4];
    storages.last().unwrap().read(0, &mut bytes).unwrap();
    bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// ULPs between `got` and the f32 rounding of `want` (0 for matching NaNs
/// and infinities).
fn ulps(got: f32, want: f64) -> f64 {
    let w = want as f32;
    if w.is_nan() || got.is_nan() {
        return if w.is_nan() && got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if w == got {
        return 0.0;
    }
    let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
    (got as f64 - want).abs() / ulp
}

/// `count` inputs spread evenly over `lo..hi`.
fn spread(lo: f32, hi: f32, count: usize) -> Vec<f32> {
    (0..count).map(|i| lo + (hi - lo) * i as f32 / (count - 1) as f32).collect()
}

fn check(func: Intrinsic, args: &[Vec<f32>], reference: impl Fn(&[f64]) -> f64, bound: f64) {
    check_with(func, Precision::Default, args, reference, bound)
}

fn check_with(func: Intrinsic, precision: Precision, args: &[Vec<f32>], reference: impl Fn(&[f64]) -> f64, bound: f64) {
    let got = run_with(func, precision, args);
    for (i, g) in got.iter().enumerate() {
        let xs: Vec<f64> = args.iter().map(|a| a[i] as f64).collect();
        let want = reference(&xs);
        let e = ulps(*g, want);
        assert!(e <= bound, "{}({xs:?}) = {g}, the reference {want}: {e} ULP (bound {bound})", func.qualified_name(precision));
    }
}

/// An input range, and the f64 function a result is checked against.
type Domain = (f32, f32);
type Reference = fn(f64) -> f64;

#[test]
fn transcendental_functions_within_1_ulp() {
    use Intrinsic::*;
    let one: [(Intrinsic, Domain, Reference); 12] = [
        (Tan, (-1.5, 1.5), f64::tan),
        (Sinh, (-10.0, 10.0), f64::sinh),
        (Cosh, (-10.0, 10.0), f64::cosh),
        (Asin, (-1.0, 1.0), f64::asin),
        (Acos, (-1.0, 1.0), f64::acos),
        (Atan, (-50.0, 50.0), f64::atan),
        (Asinh, (-100.0, 100.0), f64::asinh),
        (Acosh, (1.0, 100.0), f64::acosh),
        (Atanh, (-0.99, 0.99), f64::atanh),
        (Log1p, (-0.9, 10.0), f64::ln_1p),
        (Expm1, (-10.0, 10.0), f64::exp_m1),
        (Tanh, (-10.0, 10.0), f64::tanh),
    ];
    for (f, (lo, hi), r) in one {
        check(f, &[spread(lo, hi, 1001)], |x| r(x[0]), if f == Tanh { 2.0 } else { 1.0 });
    }
    // Tiny arguments, where log1p and expm1 keep precision that log(1 + x) loses.
    for (f, r) in [(Log1p, f64::ln_1p as Reference), (Expm1, f64::exp_m1)] {
        check(f, &[spread(-1e-6, 1e-6, 201)], |x| r(x[0]), 1.0);
    }
    let ys = spread(-3.0, 3.0, 61);
    let xs: Vec<f32> = (0..61).map(|i| if i % 2 == 0 { 1.5 } else { -0.75 }).collect();
    check(Atan2, &[ys, xs], |a| a[0].atan2(a[1]), 1.0);
}

/// An f64 reference of any arity.
type ReferenceOf = fn(&[f64]) -> f64;

/// Inputs for a function of [`Intrinsic::WITH_PRECISION_VARIANTS`] over its
/// domain, and its f64 reference.
fn precision_case(f: Intrinsic) -> (Vec<Vec<f32>>, ReferenceOf) {
    use Intrinsic::*;
    let one = |lo: f32, hi: f32| vec![spread(lo, hi, 1001)];
    let two = |lo: f32, hi: f32, lo2: f32, hi2: f32| vec![spread(lo, hi, 1001), spread(lo2, hi2, 1001).into_iter().rev().collect()];
    match f {
        Exp => (one(-80.0, 80.0), |x| x[0].exp()),
        Exp2 => (one(-120.0, 120.0), |x| x[0].exp2()),
        Log => (one(1e-30, 1e30), |x| x[0].ln()),
        Log2 => (one(1e-30, 1e30), |x| x[0].log2()),
        Sqrt => (one(0.0, 1e30), |x| x[0].sqrt()),
        Rsqrt => (one(1e-30, 1e30), |x| 1.0 / x[0].sqrt()),
        Sin => (one(-100.0, 100.0), |x| x[0].sin()),
        Cos => (one(-100.0, 100.0), |x| x[0].cos()),
        Tan => (one(-1.5, 1.5), |x| x[0].tan()),
        Asin => (one(-1.0, 1.0), |x| x[0].asin()),
        Acos => (one(-1.0, 1.0), |x| x[0].acos()),
        Atan => (one(-50.0, 50.0), |x| x[0].atan()),
        Atan2 => (two(-3.0, 3.0, -2.0, 2.5), |x| x[0].atan2(x[1])),
        Sinh => (one(-10.0, 10.0), |x| x[0].sinh()),
        Cosh => (one(-10.0, 10.0), |x| x[0].cosh()),
        Tanh => (one(-10.0, 10.0), |x| x[0].tanh()),
        Asinh => (one(-100.0, 100.0), |x| x[0].asinh()),
        Acosh => (one(1.0, 100.0), |x| x[0].acosh()),
        Atanh => (one(-0.99, 0.99), |x| x[0].atanh()),
        Pow => (two(0.01, 20.0, -8.0, 8.0), |x| x[0].powf(x[1])),
        Floor => (one(-20.0, 20.0), |x| x[0].floor()),
        Ceil => (one(-20.0, 20.0), |x| x[0].ceil()),
        Round => (one(-20.0, 20.0), |x| x[0].round()),
        Trunc => (one(-20.0, 20.0), |x| x[0].trunc()),
        Rint => (one(-20.0, 20.0), |x| x[0].round_ties_even()),
        Copysign => (two(-5.0, 5.0, -3.0, 3.0), |x| x[0].copysign(x[1])),
        Fmod => (two(-50.0, 50.0, 0.5, 7.0), |x| x[0] % x[1]),
        Abs => (one(-5.0, 5.0), |x| x[0].abs()),
        Min => (two(-5.0, 5.0, -3.0, 3.0), |x| x[0].min(x[1])),
        Max => (two(-5.0, 5.0, -3.0, 3.0), |x| x[0].max(x[1])),
        Clamp => (
            vec![spread(-5.0, 5.0, 1001), vec![-1.0; 1001], vec![2.0; 1001]],
            |x| x[0].clamp(x[1], x[2]),
        ),
        Saturate => (one(-2.0, 2.0), |x| x[0].clamp(0.0, 1.0)),
        other => panic!("no inputs for {}", other.name()),
    }
}

/// Every `precise::` variant: within 1 ULP of the f64 function (computed in
/// f64 and rounded once); the exact functions exactly.
#[test]
fn every_precise_function_within_1_ulp() {
    for f in Intrinsic::WITH_PRECISION_VARIANTS {
        let (args, reference) = precision_case(f);
        check_with(f, Precision::Precise, &args, reference, 1.0);
    }
}

/// Every `fast::` variant computes what the default one does on the
/// simulator (which documents it so).
#[test]
fn every_fast_function_equals_the_default_one() {
    for f in Intrinsic::WITH_PRECISION_VARIANTS {
        let (args, _) = precision_case(f);
        let (fast, default) = (run_with(f, Precision::Fast, &args), run(f, &args));
        assert_eq!(
            fast.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            default.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "{}",
            f.qualified_name(Precision::Fast)
        );
    }
}

#[test]
fn erf_and_erfc_within_1_ulp_of_tabulated_values() {
    // erf and erfc to 16 digits at points across their range.
    let table = [
        (0.0, 0.0, 1.0),
        (0.25, 0.2763263901682369, 0.7236736098317631),
        (0.5, 0.5204998778130465, 0.4795001221869535),
        (1.0, 0.8427007929497149, 0.1572992070502851),
        (1.5, 0.9661051464753108, 0.03389485352468927),
        (2.0, 0.9953222650189527, 0.004677734981047266),
        (3.0, 0.9999779095030014, 2.209049699858544e-5),
        (4.0, 0.9999999845827421, 1.541725790028002e-8),
        (6.0, 1.0, 2.151973671249892e-17),
    ];
    let xs: Vec<f32> = table.iter().map(|t| t.0 as f32).collect();
    let erf = run(Intrinsic::Erf, std::slice::from_ref(&xs));
    let erfc = run(Intrinsic::Erfc, std::slice::from_ref(&xs));
    for (i, (x, e, c)) in table.iter().enumerate() {
        assert!(ulps(erf[i], *e) <= 1.0, "erf({x}) = {}, want {e}", erf[i]);
        assert!(ulps(erfc[i], *c) <= 1.0, "erfc({x}) = {}, want {c}", erfc[i]);
    }
    let neg: Vec<f32> = xs.iter().map(|x| -x).collect();
    let erf_neg = run(Intrinsic::Erf, std::slice::from_ref(&neg));
    assert_eq!(erf_neg, erf.iter().map(|v| -v).collect::<Vec<f32>>(), "erf is odd");
    let erfc_neg = run(Intrinsic::Erfc, &[neg]);
    for (i, (_, _, c)) in table.iter().enumerate() {
        assert!(ulps(erfc_neg[i], 2.0 - c) <= 1.0, "erfc(-x) = 2 - erfc(x)");
    }
}

#[test]
fn rounding_and_sign_functions_are_exact() {
    use Intrinsic::*;
    let xs = vec![-2.5f32, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.7, -3.7, f32::NAN, f32::INFINITY];
    check(Round, std::slice::from_ref(&xs), |x| if x[0].is_nan() { x[0] } else { x[0].round() }, 0.0);
    check(Trunc, std::slice::from_ref(&xs), |x| x[0].trunc(), 0.0);
    check(Rint, std::slice::from_ref(&xs), |x| x[0].round_ties_even(), 0.0);
    let got = run(Sign, std::slice::from_ref(&xs));
    let want = [-1.0f32, -1.0, -1.0, -0.0, 0.0, 1.0, 1.0, 1.0, 1.0, -1.0, 0.0, 1.0];
    assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{got:?}");
    check(Saturate, std::slice::from_ref(&xs), |x| if x[0].is_nan() { 0.0 } else { x[0].clamp(0.0, 1.0) }, 0.0);
    let ys = vec![1.0f32, -1.0, 2.0, 1.0, -1.0, 0.25, -0.75, 2.0, 1.5, 1.5, 1.0, 2.0];
    check(Copysign, &[xs.clone(), ys.clone()], |a| a[0].copysign(a[1]), 0.0);
    check(Fmod, &[xs.clone(), ys.clone()], |a| a[0] % a[1], 0.0);
    check(Step, &[ys, xs], |a| if a[1] < a[0] { 0.0 } else { 1.0 }, 0.0);
}

#[test]
fn mix_and_smoothstep_within_1_ulp() {
    use Intrinsic::*;
    let a = spread(-4.0, 4.0, 101);
    let b: Vec<f32> = a.iter().map(|x| 3.0 - 0.5 * x).collect();
    let t = spread(0.0, 1.0, 101);
    check(Mix, &[a, b, t], |v| v[0] + (v[1] - v[0]) * v[2], 1.0);
    let e0 = vec![-1.0f32; 101];
    let e1 = vec![2.0f32; 101];
    let x = spread(-2.0, 3.0, 101);
    check(Smoothstep, &[e0, e1, x], |v| {
        let t = ((v[2] - v[0]) / (v[1] - v[0])).clamp(0.0, 1.0);
        t * t * (3.0 - 2.0 * t)
    }, 1.0);
}

/// `isnan`, `isinf` and `isfinite` of f32 values, of those values converted
/// to f16 and bf16 (where the conversion keeps the value's class), and of a
/// `float2` built from them, against Rust's classification.
#[test]
fn classification_matches_rusts() {
    use enigma_ir::Scalar;
    let plain = [0.0f32, -0.0, 1.5, -3.0, 100.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN];
    let extremes = [f32::MAX, f32::MIN, f32::MIN_POSITIVE, 1e-40, 1e30];
    let xs: Vec<f32> = plain.iter().chain(&extremes).copied().collect();
    let n = xs.len();
    let mut k = KernelBuilder::new("classify");
    let a = k.buffer("a", Type::F32, Access::Read);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let g = k.let_("g", thread_position_in_grid().x());
    let x = k.let_("x", a.get(g));
    let flags = |v: Ex| select(0u32, 1u32, isnan(v)) + select(0u32, 2u32, isinf(v)) + select(0u32, 4u32, isfinite(v));
    k.store(out.at(g * 4u32), flags(x));
    k.store(out.at(g * 4u32 + 1u32), flags(x.cast(Type::scalar(Scalar::F16))));
    k.store(out.at(g * 4u32 + 2u32), flags(x.cast(Type::scalar(Scalar::BF16))));
    let pair = k.let_("pair", vector(Type::vector(Scalar::F32, 2), &[1.0f32.into(), x]));
    let nan2 = k.let_("nan2", isnan(pair));
    k.store(out.at(g * 4u32 + 3u32), select(0u32, 1u32, nan2.y()) + select(0u32, 2u32, isfinite(pair).x()));
    let kernel = k.finish().unwrap();
    let info = validate(&kernel, &ValidationOptions::default()).unwrap();
    let backend = SimBackend::new();
    let compiled = backend.compile(&kernel, &info, &SpecValues::default()).unwrap();
    let input = backend.allocate(n * 4).unwrap();
    input.write(0, &xs.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let output = backend.allocate(n * 16).unwrap();
    let bound = [ArgValue::Buffer { storage: input.as_ref(), elem: None }, ArgValue::Buffer { storage: output.as_ref(), elem: None }];
    let geometry = enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &bound, DispatchMode::Threads, [n as u32, 1, 1], [32, 1, 1]).unwrap();
    backend.dispatch(compiled.as_ref(), &bound, &geometry, &DispatchOptions::default()).unwrap();
    let mut bytes = vec![0u8; n * 16];
    output.read(0, &mut bytes).unwrap();
    let got: Vec<u32> = bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let want = |v: f32| u32::from(v.is_nan()) + 2 * u32::from(v.is_infinite()) + 4 * u32::from(v.is_finite());
    for (i, &v) in xs.iter().enumerate() {
        assert_eq!(got[i * 4], want(v), "f32 {v}");
        if i < plain.len() {
            // Each of these is exactly representable (or keeps its class) in f16 and bf16.
            assert_eq!(got[i * 4 + 1], want(v), "f16 {v}");
            assert_eq!(got[i * 4 + 2], want(v), "bf16 {v}");
        }
        assert_eq!(got[i * 4 + 3], u32::from(v.is_nan()) + 2, "float2(1, {v})");
    }
}
