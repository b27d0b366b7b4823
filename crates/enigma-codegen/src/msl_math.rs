//! `erf` and `erfc` for MSL, whose standard library has neither: one
//! formula, written here twice — as the MSL helpers the generator emits
//! ([`helpers`]) and as the same f32 arithmetic in Rust ([`erf`], [`erfc`]),
//! which enigma-sim's tests hold to an f64 reference (the accuracy
//! docs/kernel-functions.md states: erf within 3 ULP, erfc within 6, with a
//! correctly rounded `exp`; MSL's `precise::exp` adds its own error to the
//! `exp(−x²)` factor).
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

/// The series' coefficients `aₙ`, `n = 0…9`.
const SERIES: [f32; 10] = [
    1.128_379_2,
    -0.376_126_38,
    0.112_837_92,
    -0.026_866_172,
    0.005_223_978,
    -0.000_854_832_7,
    0.000_120_553_33,
    -1.492_565e-5,
    1.646_211_4e-6,
    -1.636_584_4e-7,
];

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
    x * horner(&SERIES, x * x)
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

/// The MSL helpers `enigma_erf(float)` and `enigma_erfc(float)`.
pub(crate) fn helpers() -> String {
    let mut out = String::from("// erf and erfc, which MSL's standard library lacks (enigma's msl_math: erf within 3 ULP, erfc within 6).\n");
    let _ = write!(
        out,
        "static inline float enigma_exp_neg_square(float x)\n{{\n    float h = as_type<float>(as_type<uint>(x) & 0xfffff000u);\n    \
         return precise::exp(-h * h) * precise::exp((h - x) * (h + x));\n}}\n\
         static inline float enigma_erf_series(float x)\n{{\n    float v = x * x;\n    return x * {};\n}}\n\
         static inline float enigma_erfc_tail(float x)\n{{\n    if (x >= 10.0f) {{\n        return 0.0f;\n    }}\n    \
         float t = 1.0f / (1.0f + 0.5f * x);\n    return enigma_exp_neg_square(x) * {};\n}}\n\
         static inline float enigma_erf(float x)\n{{\n    float a = fabs(x);\n    if (isnan(a)) {{\n        return x;\n    }}\n    \
         if (a < {split}) {{\n        return enigma_erf_series(x);\n    }}\n    \
         return copysign(a >= 4.0f ? 1.0f : 1.0f - enigma_erfc_tail(a), x);\n}}\n\
         static inline float enigma_erfc(float x)\n{{\n    if (isnan(x)) {{\n        return x;\n    }}\n    \
         if (fabs(x) < {tail}) {{\n        return 1.0f - enigma_erf_series(x);\n    }}\n    \
         return x > 0.0f ? enigma_erfc_tail(x) : 2.0f - enigma_erfc_tail(-x);\n}}\n\n",
        horner_msl(&SERIES, "v"),
        horner_msl(&TAIL, "t"),
        split = lit(ERF_SPLIT),
        tail = lit(ERFC_SPLIT),
    );
    out
}
