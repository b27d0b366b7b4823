//! `erf`, `erfc`, `log1p` and `expm1` for MSL, whose standard library has
//! none of them: each formula written here twice — as the MSL helpers the
//! generator emits (`helpers`, for `float` and, component by component,
//! `float2`…`float4`) and as the same f32 arithmetic in Rust
//! ([`erf`], [`erfc`], [`log1p`], [`expm1`]), which enigma-sim's tests hold
//! to an f64 reference (the accuracy docs/kernel-functions.md states: erf
//! within 3 ULP, erfc within 6, log1p within 3, expm1 within 2, with a correctly
//! rounded `exp` and `log`; MSL's `precise::exp` and `precise::log` add
//! their own errors).
//!
//! log1p and expm1 avoid the cancellation of `log(1 + x)` and `exp(x) − 1`
//! near 0 by series there, and are those expressions elsewhere:
//!
//! * `log1p`, `−1/3 < x < 1/2`: `2·atanh(s)` with `s = x / (2 + x)`
//!   (`|s| < 1/5`), `s · Σ 2s²ᵏ/(2k + 1)` over seven terms;
//! * `expm1`, `|x| < 1/2`: `x · Σ xᵏ/(k + 1)!` over eleven terms.
//!
//! * `|x| < ERF_SPLIT`: erf by its Maclaurin series, `x · Σ aₙ x²ⁿ` with
//!   `aₙ = 2/√π · (−1)ⁿ / (n! (2n + 1))`, ten terms (the next is below
//!   2⁻³⁰ of the sum there);
//! * `x ≥ ERFC_SPLIT`: `erfc(x) = e^{−x²} · Q(t)`, `t = 1 / (1 + x/2)`,
//!   with `Q` a degree-10 least-squares fit of `erfc(x)·e^{x²}` over
//!   [0.5, 10] (relative error below 3·10⁻¹⁰); `e^{−x²}` as
//!   `e^{−h²} · e^{(h − x)(h + x)}` with `h` `x` cut to 12 significant bits,
//!   so `h²` is exact;
//! * elsewhere by symmetry: `erf = 1 − erfc` above `ERF_SPLIT` (and ±1 from
//!   4, where erfc is below half an f32 ULP of 1), `erfc = 1 − erf` below
//!   `ERFC_SPLIT`, `erfc(−x) = 2 − erfc(x)`, erfc 0 from 10.

use std::fmt::Write;

/// Below this `|x|`, erf is its series.
pub const ERF_SPLIT: f32 = 0.84375;
/// From this `x`, erfc is `e^{−x²} · Q(t)`.
pub const ERFC_SPLIT: f32 = 0.5;

/// The series' coefficients `aₙ = 2/√π · (−1)ⁿ / (n! (2n + 1))`, `n = 0…9`.
fn erf_series_coefficients() -> [f32; 10] {
    std::array::from_fn(|n| {
        let factorial = (1..=n as u64).product::<u64>() as f64;
        let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
        (std::f64::consts::FRAC_2_SQRT_PI * sign / (factorial * (2 * n + 1) as f64)) as f32
    })
}

/// `Q`'s coefficients, `t⁰…t¹⁰`.
const TAIL: [f32; 11] = [
    3.212_535_6e-6,
    0.281_995_36,
    0.283_440_62,
    0.236_357_52,
    0.228_087_53,
    -0.085_041_25,
    0.357_839_55,
    -0.543_385_9,
    0.291_459_47,
    -0.044_000_15,
    -0.006_770_149,
];

/// `Σ c[i] · vⁱ` by Horner's rule in f32 with fused multiply-adds, as the
/// MSL helper computes it.
fn horner(c: &[f32], v: f32) -> f32 {
    c.iter().rev().fold(0.0f32, |acc, &k| acc.mul_add(v, k))
}

/// `e^{−x²}` with `x²` split so that its rounding does not reach the result.
fn exp_neg_square(x: f32) -> f32 {
    let h = f32::from_bits(x.to_bits() & 0xffff_f000);
    (-h * h).exp() * ((h - x) * (h + x)).exp()
}

/// The series part: erf for `|x| < ERF_SPLIT`.
fn erf_series(x: f32) -> f32 {
    x * horner(&erf_series_coefficients(), x * x)
}

/// erfc for `x ≥ ERFC_SPLIT`.
fn erfc_tail(x: f32) -> f32 {
    if x >= 10.0 {
        return 0.0;
    }
    let t = 1.0 / (1.0 + 0.5 * x);
    exp_neg_square(x) * horner(&TAIL, t)
}

/// erf of `x` by the MSL helper's formula, in f32.
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    if a.is_nan() {
        return x;
    }
    if a < ERF_SPLIT {
        return erf_series(x);
    }
    let r = if a >= 4.0 { 1.0 } else { 1.0 - erfc_tail(a) };
    r.copysign(x)
}

/// erfc of `x` by the MSL helper's formula, in f32.
pub fn erfc(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x.abs() < ERFC_SPLIT {
        return 1.0 - erf_series(x);
    }
    if x > 0.0 {
        erfc_tail(x)
    } else {
        2.0 - erfc_tail(-x)
    }
}

/// `log1p`'s series coefficients, `2/(2k + 1)` for `k = 0…6`.
fn log1p_series() -> [f32; 7] {
    std::array::from_fn(|k| (2.0 / (2 * k + 1) as f64) as f32)
}

/// `expm1`'s series coefficients, `1/(k + 1)!` for `k = 0…10`.
fn expm1_series() -> [f32; 11] {
    std::array::from_fn(|k| (1.0 / (1..=k as u64 + 1).product::<u64>() as f64) as f32)
}

/// log1p of `x` by the MSL helper's formula, in f32.
pub fn log1p(x: f32) -> f32 {
    if x > -1.0 / 3.0 && x < 0.5 {
        let s = x / (2.0 + x);
        return s * horner(&log1p_series(), s * s);
    }
    (1.0 + x).ln()
}

/// expm1 of `x` by the MSL helper's formula, in f32.
pub fn expm1(x: f32) -> f32 {
    if x.abs() < 0.5 {
        return x * horner(&expm1_series(), x);
    }
    x.exp() - 1.0
}

/// An f32 literal in MSL.
fn lit(v: f32) -> String {
    format!("{v:?}f")
}

/// `Σ c[i] · vⁱ` as MSL text (Horner's rule, as [`horner`]).
fn horner_msl(c: &[f32], v: &str) -> String {
    let mut text = String::from("0.0f");
    for k in c.iter().rev() {
        text = format!("fma({text}, {v}, {})", lit(*k));
    }
    text
}

/// The MSL helpers for `functions` (`erf` and `erfc` come together):
/// `enigma_erf(float)`, `enigma_erfc(float)`, `enigma_log1p(float)`,
/// `enigma_expm1(float)`.
pub(crate) fn helpers(functions: &std::collections::BTreeSet<&'static str>) -> String {
    let mut out = String::new();
    if functions.contains("erf") || functions.contains("erfc") {
        out.push_str(&erf_helpers());
    }
    if functions.contains("log1p") {
        let _ = write!(
            out,
            "// log1p, which MSL's standard library lacks (enigma's msl_math: within 3 ULP).\n\
             static inline float enigma_log1p(float x)\n{{\n    if (x > {third} && x < 0.5f) {{\n        float s = x / (2.0f + x);\n        \
             float v = s * s;\n        return s * {};\n    }}\n    return precise::log(1.0f + x);\n}}\n\n",
            horner_msl(&log1p_series(), "v"),
            third = lit(-1.0 / 3.0),
        );
    }
    if functions.contains("expm1") {
        let _ = write!(
            out,
            "// expm1, which MSL's standard library lacks (enigma's msl_math: within 2 ULP).\n\
             static inline float enigma_expm1(float x)\n{{\n    if (abs(x) < 0.5f) {{\n        return x * {};\n    }}\n    \
             return precise::exp(x) - 1.0f;\n}}\n\n",
            horner_msl(&expm1_series(), "x"),
        );
    }
    for name in ["erf", "erfc", "log1p", "expm1"].into_iter().filter(|n| functions.contains(n)) {
        // The vectors' overloads, component by component.
        for width in 2..=4 {
            let components: Vec<String> = ["x", "y", "z", "w"][..width].iter().map(|c| format!("enigma_{name}(x.{c})")).collect();
            let _ = writeln!(out, "static inline float{width} enigma_{name}(float{width} x)\n{{\n    return float{width}({});\n}}", components.join(", "));
        }
        out.push('\n');
    }
    out
}

/// The MSL helpers `enigma_erf(float)` and `enigma_erfc(float)`.
fn erf_helpers() -> String {
    let mut out = String::from("// erf and erfc, which MSL's standard library lacks (enigma's msl_math: erf within 3 ULP, erfc within 6).\n");
    let _ = write!(
        out,
        "static inline float enigma_exp_neg_square(float x)\n{{\n    float h = as_type<float>(as_type<uint>(x) & 0xfffff000u);\n    \
         return precise::exp(-h * h) * precise::exp((h - x) * (h + x));\n}}\n\
         static inline float enigma_erf_series(float x)\n{{\n    float v = x * x;\n    return x * {};\n}}\n\
         static inline float enigma_erfc_tail(float x)\n{{\n    if (x >= 10.0f) {{\n        return 0.0f;\n    }}\n    \
         float t = 1.0f / (1.0f + 0.5f * x);\n    return enigma_exp_neg_square(x) * {};\n}}\n\
         static inline float enigma_erf(float x)\n{{\n    float a = abs(x);\n    if (isnan(a)) {{\n        return x;\n    }}\n    \
         if (a < {split}) {{\n        return enigma_erf_series(x);\n    }}\n    \
         return copysign(a >= 4.0f ? 1.0f : 1.0f - enigma_erfc_tail(a), x);\n}}\n\
         static inline float enigma_erfc(float x)\n{{\n    if (isnan(x)) {{\n        return x;\n    }}\n    \
         if (abs(x) < {tail}) {{\n        return 1.0f - enigma_erf_series(x);\n    }}\n    \
         return x > 0.0f ? enigma_erfc_tail(x) : 2.0f - enigma_erfc_tail(-x);\n}}\n\n",
        horner_msl(&erf_series_coefficients(), "v"),
        horner_msl(&TAIL, "t"),
        split = lit(ERF_SPLIT),
        tail = lit(ERFC_SPLIT),
    );
    out
}
