//! Math intrinsics against f64 references (Rust's f64 functions, whose own
//! error is far below one f32 ulp), each within a stated tolerance, plus the
//! exact ones (floor, ceil, fma, abs, min, max, clamp, select, popcount, clz,
//! ctz) compared bit for bit.
//!
//! Tolerances are the looser of the documented CUDA and Metal (precise-mode)
//! bounds, in units in the last place of the correctly rounded result:
//!
//! | function | precise | `fast::` variant |
//! |---|---|---|
//! | exp, exp2 | 4 ulp | 4 + 1.5·\|x\| ulp |
//! | log, log2 | 4 ulp | 2^-20 absolute for x in [0.5, 2], else 4 ulp |
//! | sqrt | 3 ulp | 4 ulp |
//! | rsqrt | 2 ulp | 3 ulp |
//! | tanh | 5 ulp | 2^-10 relative + 2^-20 absolute |
//! | sin, cos | 4 ulp on [-100, 100] | 2^-13 absolute on [-π, π] |
//! | pow | 16 ulp (x > 0) | 2^-12 relative (x in [1/16, 16], \|y\| ≤ 4) |
//!
//! Specials (infinities, NaN, zeros, negative arguments of log and sqrt) are
//! checked with the precise variants only, where C fixes the result: an
//! infinity or NaN must come back as exactly that.

use crate::columns::*;
use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Scalar, Type};
use enigma_runtime::{Arg, Runtime};
use rand::rngs::SmallRng;
use rand::Rng;

#[derive(Clone, Copy, Debug)]
enum Tol {
    Ulps(f64),
    /// `base + per_x·|x|` ulp (fast exp).
    UlpsGrowing {
        base: f64,
        per_x: f64,
    },
    /// Absolute `abs` for x in [0.5, 2], else `ulps` (fast log).
    AbsNearOne {
        abs: f64,
        ulps: f64,
    },
    Abs(f64),
    /// `rel·|reference| + abs`.
    Rel {
        rel: f64,
        abs: f64,
    },
}

impl Tol {
    fn ok(self, x: &[f32], got: f32, reference: f64) -> bool {
        // The class of a non-finite result is exact.
        if reference.is_nan() || got.is_nan() || reference.is_infinite() || got.is_infinite() {
            return ulp_error(got, reference) == 0.0;
        }
        let err = (got as f64 - reference).abs();
        match self {
            Tol::Ulps(u) => ulp_error(got, reference) <= u,
            Tol::UlpsGrowing { base, per_x } => {
                ulp_error(got, reference) <= base + per_x * (x[0] as f64).abs()
            }
            Tol::AbsNearOne { abs, ulps } => {
                if (0.5..=2.0).contains(&x[0]) {
                    err <= abs
                } else {
                    ulp_error(got, reference) <= ulps
                }
            }
            Tol::Abs(a) => err <= a,
            Tol::Rel { rel, abs } => err <= rel * reference.abs() + abs,
        }
    }
}

struct MathFn {
    name: &'static str,
    f: fn(&[Ex]) -> Ex,
    reference: fn(&[f64]) -> f64,
    inputs: Vec<Vec<f32>>,
    tol: Tol,
}

fn run_math(rt: &Runtime, fns: Vec<MathFn>) -> CaseResult {
    let mut failures = vec![];
    for mf in fns {
        let arity = mf.inputs.len();
        let n = mf.inputs[0].len();
        let mut k = KernelBuilder::new("math");
        let ins: Vec<Mem> = (0..arity)
            .map(|i| k.buffer(&format!("in{i}"), Type::F32, Access::Read))
            .collect();
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let xs: Vec<Ex> = ins
            .iter()
            .enumerate()
            .map(|(i, m)| k.let_(&format!("x{i}"), m.get(tid)))
            .collect();
        k.store(out.at(tid), (mf.f)(&xs));
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let bufs = mf
            .inputs
            .iter()
            .map(|v| upload(rt, v))
            .collect::<Result<Vec<_>, _>>()?;
        let out_buf = rt.buffer_zeroed::<f32>(n).ctx("allocating")?;
        let mut args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
        args.push(Arg::from(&out_buf));
        threads(rt, &p, &args, [n as u32, 1, 1], [128, 1, 1])?;
        let got: Vec<f32> = download(&out_buf)?;
        let mut bad = vec![];
        for i in 0..n {
            let x: Vec<f32> = mf.inputs.iter().map(|v| v[i]).collect();
            let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let r = (mf.reference)(&xd);
            if !mf.tol.ok(&x, got[i], r) {
                bad.push(format!(
                    "{}({}) = {:e} ({:#010x}), reference {:e}, error {:.2} ulp",
                    mf.name,
                    x.iter()
                        .map(|v| format!("{v:e}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    got[i],
                    got[i].to_bits(),
                    r,
                    ulp_error(got[i], r)
                ));
            }
        }
        if !bad.is_empty() {
            let shown: Vec<String> = bad.iter().take(5).map(|b| format!("    {b}")).collect();
            failures.push(format!(
                "{}: {} of {n} results outside {:?}:\n{}",
                mf.name,
                bad.len(),
                mf.tol,
                shown.join("\n")
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

fn uniform(rng: &mut SmallRng, n: usize, lo: f32, hi: f32, specials: &[f32]) -> Vec<f32> {
    let mut v = specials.to_vec();
    while v.len() < n {
        v.push(rng.gen_range(lo..hi));
    }
    v
}

/// Positive normals, log-uniform in [2^lo, 2^hi).
fn positive(rng: &mut SmallRng, n: usize, lo: i32, hi: i32, specials: &[f32]) -> Vec<f32> {
    let mut v = specials.to_vec();
    while v.len() < n {
        v.push(normal_f32(rng, lo, hi).abs());
    }
    v
}

const N: usize = 1500;
const F4: Type = Type::vector(Scalar::F32, 4);
const INF: f32 = f32::INFINITY;
const NAN: f32 = f32::NAN;

/// exp, exp2, log, log2, sqrt, rsqrt, tanh, sin, cos, pow (precise).
pub fn math_precise(rt: &Runtime) -> CaseResult {
    seeded("math_precise", |rng| {
        let fns = vec![
            MathFn {
                name: "exp",
                f: |x| exp(x[0]),
                reference: |x| x[0].exp(),
                inputs: vec![uniform(
                    rng,
                    N,
                    -87.0,
                    88.0,
                    &[0.0, -0.0, 1.0, -INF, INF, NAN],
                )],
                tol: Tol::Ulps(4.0),
            },
            MathFn {
                name: "exp2",
                f: |x| exp2(x[0]),
                reference: |x| x[0].exp2(),
                inputs: vec![uniform(
                    rng,
                    N,
                    -125.0,
                    127.0,
                    &[0.0, 10.0, -3.0, -INF, INF, NAN],
                )],
                tol: Tol::Ulps(4.0),
            },
            MathFn {
                name: "log",
                f: |x| log(x[0]),
                reference: |x| x[0].ln(),
                inputs: vec![positive(
                    rng,
                    N,
                    -126,
                    127,
                    &[1.0, 0.0, -0.0, -1.0, INF, NAN],
                )],
                tol: Tol::Ulps(4.0),
            },
            MathFn {
                name: "log2",
                f: |x| log2(x[0]),
                reference: |x| x[0].log2(),
                inputs: vec![positive(
                    rng,
                    N,
                    -126,
                    127,
                    &[1.0, 8.0, 0.0, -2.0, INF, NAN],
                )],
                tol: Tol::Ulps(4.0),
            },
            MathFn {
                name: "sqrt",
                f: |x| sqrt(x[0]),
                reference: |x| x[0].sqrt(),
                inputs: vec![positive(
                    rng,
                    N,
                    -126,
                    127,
                    &[0.0, -0.0, 4.0, -1.0, INF, NAN],
                )],
                tol: Tol::Ulps(3.0),
            },
            MathFn {
                name: "rsqrt",
                f: |x| rsqrt(x[0]),
                reference: |x| 1.0 / x[0].sqrt(),
                inputs: vec![positive(rng, N, -125, 125, &[0.0, 4.0, -1.0, INF, NAN])],
                tol: Tol::Ulps(2.0),
            },
            MathFn {
                name: "tanh",
                f: |x| tanh(x[0]),
                reference: |x| x[0].tanh(),
                inputs: vec![uniform(
                    rng,
                    N,
                    -10.0,
                    10.0,
                    &[0.0, -0.0, 20.0, -INF, INF, NAN],
                )],
                tol: Tol::Ulps(5.0),
            },
            MathFn {
                name: "sin",
                f: |x| sin(x[0]),
                reference: |x| x[0].sin(),
                inputs: vec![uniform(rng, N, -100.0, 100.0, &[0.0, -0.0, INF, NAN])],
                tol: Tol::Ulps(4.0),
            },
            MathFn {
                name: "cos",
                f: |x| cos(x[0]),
                reference: |x| x[0].cos(),
                inputs: vec![uniform(rng, N, -100.0, 100.0, &[0.0, -0.0, INF, NAN])],
                tol: Tol::Ulps(4.0),
            },
            MathFn {
                name: "pow",
                f: |x| pow(x[0], x[1]),
                reference: |x| x[0].powf(x[1]),
                inputs: vec![
                    positive(rng, N, -8, 8, &[2.0, 1.0, 3.0, 0.5]),
                    uniform(rng, N, -10.0, 10.0, &[10.0, 7.5, 0.0, -2.0]),
                ],
                tol: Tol::Ulps(16.0),
            },
        ];
        run_math(rt, fns)
    })
}

/// The `fast::` variants, on the domains their bounds are documented for.
pub fn math_fast(rt: &Runtime) -> CaseResult {
    seeded("math_fast", |rng| {
        let pi = std::f32::consts::PI;
        let fns = vec![
            MathFn {
                name: "fast::exp",
                f: |x| fast::exp(x[0]),
                reference: |x| x[0].exp(),
                inputs: vec![uniform(rng, N, -80.0, 80.0, &[0.0, 1.0])],
                tol: Tol::UlpsGrowing {
                    base: 4.0,
                    per_x: 1.5,
                },
            },
            MathFn {
                name: "fast::exp2",
                f: |x| fast::exp2(x[0]),
                reference: |x| x[0].exp2(),
                inputs: vec![uniform(rng, N, -120.0, 120.0, &[0.0, 3.0])],
                tol: Tol::UlpsGrowing {
                    base: 4.0,
                    per_x: 1.5,
                },
            },
            MathFn {
                name: "fast::log",
                f: |x| fast::log(x[0]),
                reference: |x| x[0].ln(),
                inputs: vec![positive(rng, N, -100, 100, &[1.0, 0.75, 1.5])],
                tol: Tol::AbsNearOne {
                    abs: 2f64.powi(-20),
                    ulps: 4.0,
                },
            },
            MathFn {
                name: "fast::log2",
                f: |x| fast::log2(x[0]),
                reference: |x| x[0].log2(),
                inputs: vec![positive(rng, N, -100, 100, &[1.0, 0.75, 1.5])],
                tol: Tol::AbsNearOne {
                    abs: 2f64.powi(-20),
                    ulps: 4.0,
                },
            },
            MathFn {
                name: "fast::sqrt",
                f: |x| fast::sqrt(x[0]),
                reference: |x| x[0].sqrt(),
                inputs: vec![positive(rng, N, -100, 100, &[4.0])],
                tol: Tol::Ulps(4.0),
            },
            MathFn {
                name: "fast::rsqrt",
                f: |x| fast::rsqrt(x[0]),
                reference: |x| 1.0 / x[0].sqrt(),
                inputs: vec![positive(rng, N, -100, 100, &[4.0])],
                tol: Tol::Ulps(3.0),
            },
            MathFn {
                name: "fast::tanh",
                f: |x| fast::tanh(x[0]),
                reference: |x| x[0].tanh(),
                inputs: vec![uniform(rng, N, -10.0, 10.0, &[0.0])],
                tol: Tol::Rel {
                    rel: 2f64.powi(-10),
                    abs: 2f64.powi(-20),
                },
            },
            MathFn {
                name: "fast::sin",
                f: |x| fast::sin(x[0]),
                reference: |x| x[0].sin(),
                inputs: vec![uniform(rng, N, -pi, pi, &[0.0])],
                tol: Tol::Abs(2f64.powi(-13)),
            },
            MathFn {
                name: "fast::cos",
                f: |x| fast::cos(x[0]),
                reference: |x| x[0].cos(),
                inputs: vec![uniform(rng, N, -pi, pi, &[0.0])],
                tol: Tol::Abs(2f64.powi(-13)),
            },
            MathFn {
                name: "fast::pow",
                f: |x| fast::pow(x[0], x[1]),
                reference: |x| x[0].powf(x[1]),
                inputs: vec![
                    positive(rng, N, -4, 4, &[2.0]),
                    uniform(rng, N, -4.0, 4.0, &[3.0]),
                ],
                tol: Tol::Rel {
                    rel: 2f64.powi(-12),
                    abs: 0.0,
                },
            },
        ];
        run_math(rt, fns)
    })
}

/// floor, ceil, fma (one rounding: `fma(a, b, -(a*b))` is the product's
/// rounding error), abs, min, max, clamp, select and the classification
/// (isnan, isinf, isfinite) on f32 — exact; and min, max, abs, fma on
/// `float4` component by component.
pub fn math_exact_float(rt: &Runtime) -> CaseResult {
    seeded("math_exact_float", |rng| {
        let mut a: Vec<f32> = vec![
            -0.5, 0.5, -0.0, 0.0, 1.0, -1.0, 2.5, -2.5, INF, -INF, NAN, 1e30, -1e30, 8388607.5,
            -8388607.5,
        ];
        while a.len() < N {
            a.push(if rng.gen() {
                normal_f32(rng, -3, 30)
            } else {
                normal_f32(rng, -20, 20)
            });
        }
        let b: Vec<f32> = (0..N)
            .map(|i| {
                if i % 9 == 0 {
                    a[i]
                } else {
                    normal_f32(rng, -20, 20)
                }
            })
            .collect();
        // c is -(a*b) rounded for a third of the elements (not where that is
        // a zero, whose sign would make clamp's bounds ambiguous).
        let c: Vec<f32> = (0..N)
            .map(|i| {
                if i % 3 == 0 && a[i] != 0.0 {
                    -(a[i] * b[i])
                } else {
                    normal_f32(rng, -20, 20)
                }
            })
            .collect();
        let (lo, hi): (Vec<f32>, Vec<f32>) = (0..N)
            .map(|i| {
                let (p, q) = (b[i], c[i]);
                if p <= q || q.is_nan() {
                    (p, q)
                } else {
                    (q, p)
                }
            })
            .unzip();
        let col = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(usize) -> f32| {
            Column::new(label, Scalar::F32, f, (0..N).map(|i| r(i).bits()).collect())
        };
        let columns = vec![
            col("floor(a)", |x| floor(x[0]), &|i| a[i].floor()),
            col("ceil(a)", |x| ceil(x[0]), &|i| a[i].ceil()),
            col("fma(a, b, c)", |x| fma(x[0], x[1], x[2]), &|i| {
                a[i].mul_add(b[i], c[i])
            }),
            col("abs(a)", |x| abs(x[0]), &|i| a[i].abs()),
            col("min(a, b)", |x| min(x[0], x[1]), &|i| fmin(a[i], b[i])),
            col("max(a, b)", |x| max(x[0], x[1]), &|i| fmax(a[i], b[i])),
            col("clamp(a, lo, hi)", |x| clamp(x[0], x[3], x[4]), &|i| {
                fmin(fmax(a[i], lo[i]), hi[i])
            }),
            col(
                "select(a, b, a < b)",
                |x| select(x[0], x[1], x[0].lt(x[1])),
                &|i| if a[i] < b[i] { b[i] } else { a[i] },
            ),
            col(
                "min(float4(a, b, c, a), float4(b)).z",
                |x| min(vector(F4, &[x[0], x[1], x[2], x[0]]), vector(F4, &[x[1]])).z(),
                &|i| fmin(c[i], b[i]),
            ),
            col(
                "fma(float4(a), float4(b, b, b, b), float4(c)).w",
                |x| {
                    fma(
                        vector(F4, &[x[0]]),
                        vector(F4, &[x[1], x[1], x[1], x[1]]),
                        vector(F4, &[x[2]]),
                    )
                    .w()
                },
                &|i| a[i].mul_add(b[i], c[i]),
            ),
            col(
                "abs(float4(a, -a, b, c)).y",
                |x| abs(vector(F4, &[x[0], -x[0], x[1], x[2]])).y(),
                &|i| a[i].abs(),
            ),
            col("select(0, 1, isnan(a))", |x| select(lit(Scalar::F32, 0.0), lit(Scalar::F32, 1.0), isnan(x[0])), &|i| {
                if a[i].is_nan() { 1.0 } else { 0.0 }
            }),
            col("select(0, 1, isinf(a))", |x| select(lit(Scalar::F32, 0.0), lit(Scalar::F32, 1.0), isinf(x[0])), &|i| {
                if a[i].is_infinite() { 1.0 } else { 0.0 }
            }),
            col("select(0, 1, isfinite(a))", |x| select(lit(Scalar::F32, 0.0), lit(Scalar::F32, 1.0), isfinite(x[0])), &|i| {
                if a[i].is_finite() { 1.0 } else { 0.0 }
            }),
        ];
        run_table(
            rt,
            "math_exact_float",
            &[
                Input::new(&a),
                Input::new(&b),
                Input::new(&c),
                Input::new(&lo),
                Input::new(&hi),
            ],
            columns,
        )
    })
}

/// C's fmin: a NaN operand gives the other operand.
fn fmin(a: f32, b: f32) -> f32 {
    a.min(b)
}

fn fmax(a: f32, b: f32) -> f32 {
    a.max(b)
}

/// abs, min, max, clamp, select, popcount, clz, ctz on integers of several
/// widths; `clz(0)` and `ctz(0)` are the width.
pub fn math_integer(rt: &Runtime) -> CaseResult {
    seeded("math_integer", |rng| {
        let n = 1200;
        let pick = |r: &mut SmallRng| -> i32 {
            match r.gen_range(0..4) {
                0 => [0, 1, -1, i32::MIN, i32::MAX, 0x10000, -0x10000][r.gen_range(0..7)],
                1 => r.gen_range(-100..100),
                _ => r.gen(),
            }
        };
        let a: Vec<i32> = (0..n).map(|_| pick(rng)).collect();
        let b: Vec<i32> = (0..n).map(|_| pick(rng)).collect();
        let (lo, hi): (Vec<i32>, Vec<i32>) = (0..n)
            .map(|_| (pick(rng), pick(rng)))
            .map(|(p, q)| (p.min(q), p.max(q)))
            .unzip();
        let col_i = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(usize) -> i32| {
            Column::new(label, Scalar::I32, f, (0..n).map(|i| r(i).bits()).collect())
        };
        let col_u = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(usize) -> u32| {
            Column::new(label, Scalar::U32, f, (0..n).map(|i| r(i).bits()).collect())
        };
        let u = |i: usize| a[i] as u32;
        let v = |i: usize| b[i] as u32;
        let (ulo, uhi) = (
            |i: usize| (lo[i] as u32).min(hi[i] as u32),
            |i: usize| (lo[i] as u32).max(hi[i] as u32),
        );
        let columns = vec![
            col_i("abs(a)", |x| abs(x[0]), &|i| a[i].wrapping_abs()),
            col_i("min(a, b)", |x| min(x[0], x[1]), &|i| a[i].min(b[i])),
            col_i("max(a, b)", |x| max(x[0], x[1]), &|i| a[i].max(b[i])),
            col_i("clamp(a, lo, hi)", |x| clamp(x[0], x[2], x[3]), &|i| {
                a[i].clamp(lo[i], hi[i])
            }),
            col_i(
                "select(a, b, a > b)",
                |x| select(x[0], x[1], x[0].gt(x[1])),
                &|i| if a[i] > b[i] { b[i] } else { a[i] },
            ),
            col_i("popcount(a)", |x| popcount(x[0]), &|i| {
                a[i].count_ones() as i32
            }),
            col_i("clz(a)", |x| clz(x[0]), &|i| a[i].leading_zeros() as i32),
            col_i("ctz(a)", |x| ctz(x[0]), &|i| a[i].trailing_zeros() as i32),
            col_u(
                "min(uint(a), uint(b))",
                |x| min(x[0].cast(Type::U32), x[1].cast(Type::U32)),
                &|i| u(i).min(v(i)),
            ),
            col_u(
                "max(uint(a), uint(b))",
                |x| max(x[0].cast(Type::U32), x[1].cast(Type::U32)),
                &|i| u(i).max(v(i)),
            ),
            col_u(
                "clamp(uint(a), min(uint(lo), uint(hi)), max(uint(lo), uint(hi)))",
                |x| {
                    let (p, q) = (x[2].cast(Type::U32), x[3].cast(Type::U32));
                    clamp(x[0].cast(Type::U32), min(p, q), max(p, q))
                },
                &|i| u(i).clamp(ulo(i), uhi(i)),
            ),
            col_u(
                "popcount(uint(a))",
                |x| popcount(x[0].cast(Type::U32)),
                &|i| u(i).count_ones(),
            ),
            col_u("clz(uint(a))", |x| clz(x[0].cast(Type::U32)), &|i| {
                u(i).leading_zeros()
            }),
            col_u("ctz(uint(a))", |x| ctz(x[0].cast(Type::U32)), &|i| {
                u(i).trailing_zeros()
            }),
            col_u(
                "uint(clz(uchar(a)))",
                |x| clz(x[0].cast(Scalar::U8)).cast(Type::U32),
                &|i| (a[i] as u8).leading_zeros(),
            ),
            col_u(
                "uint(ctz(uchar(a)))",
                |x| ctz(x[0].cast(Scalar::U8)).cast(Type::U32),
                &|i| (a[i] as u8).trailing_zeros(),
            ),
            col_u(
                "uint(popcount(short(a)))",
                |x| popcount(x[0].cast(Scalar::I16)).cast(Type::U32),
                &|i| (a[i] as i16).count_ones(),
            ),
            col_u(
                "uint(clz(short(a)))",
                |x| clz(x[0].cast(Scalar::I16)).cast(Type::U32),
                &|i| (a[i] as i16).leading_zeros(),
            ),
            col_u(
                "uint(clz(ulong(a) * 3))",
                |x| clz(x[0].cast(Type::U64) * 3u64).cast(Type::U32),
                &|i| (a[i] as u64).wrapping_mul(3).leading_zeros(),
            ),
            col_u(
                "uint(ctz(long(a) << 20))",
                |x| ctz(x[0].cast(Type::I64) << 20i64).cast(Type::U32),
                &|i| ((a[i] as i64) << 20).trailing_zeros(),
            ),
            col_u(
                "uint(popcount(ulong(a) ^ (ulong(b) << 32)))",
                |x| {
                    popcount(x[0].cast(Type::U64) ^ (x[1].cast(Type::U64) << 32u64)).cast(Type::U32)
                },
                &|i| ((a[i] as u64) ^ ((b[i] as u64) << 32)).count_ones(),
            ),
        ];
        run_table(
            rt,
            "math_integer",
            &[
                Input::new(&a),
                Input::new(&b),
                Input::new(&lo),
                Input::new(&hi),
            ],
            columns,
        )
    })
}
