//! Helpers shared by the cases: seeded random inputs, error context,
//! comparisons that name the first mismatches, and reference conversions for
//! `f16`/`bf16` (written here, independently of any backend, so the reference
//! never borrows the code under test).

use enigma_ir::builder::KernelBuilder;
use enigma_ir::Kernel;
use enigma_runtime::{Arg, Buffer, Element, Pipeline, Runtime};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::fmt::{Debug, Display};

/// What a case returns: `Err` carries a message naming what differed.
pub type CaseResult = Result<(), String>;

/// Environment variable that overrides every case's seed.
pub const SEED_ENV: &str = "ENIGMA_CONFORMANCE_SEED";

/// Returns early with a formatted error unless `cond` holds (a comparison
/// involving NaN does not hold).
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        // A comparison involving NaN evaluates to false here and fails the check.
        let ok: bool = $cond;
        if !ok {
            return Err(format!($($fmt)+));
        }
    };
}
pub(crate) use ensure;

/// Adds what was being done to an error.
pub(crate) trait Context<T> {
    fn ctx(self, what: impl Display) -> Result<T, String>;
}

impl<T, E: Display> Context<T> for Result<T, E> {
    fn ctx(self, what: impl Display) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// The seed of a case: [`SEED_ENV`] when set (decimal or `0x` hex), else a
/// hash of the case name, so every run of a case sees the same inputs.
pub fn seed_for(case: &str) -> u64 {
    if let Ok(s) = std::env::var(SEED_ENV) {
        let s = s.trim();
        let parsed = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        };
        if let Some(seed) = parsed {
            return seed;
        }
    }
    // FNV-1a.
    case.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Runs `f` with the case's seeded generator; a failure names the seed and
/// how to reproduce it.
pub(crate) fn seeded(case: &str, f: impl FnOnce(&mut SmallRng) -> CaseResult) -> CaseResult {
    let seed = seed_for(case);
    let mut rng = SmallRng::seed_from_u64(seed);
    f(&mut rng).map_err(|e| {
        format!("{e}\n  (random inputs from seed {seed:#x}; reproduce with {SEED_ENV}={seed:#x})")
    })
}

/// Finishes a builder.
pub(crate) fn finish(k: KernelBuilder) -> Result<Kernel, String> {
    k.finish().map_err(|e| format!("building the kernel: {e}"))
}

/// Validates and compiles a kernel on `rt`.
pub(crate) fn pipeline(rt: &Runtime, kernel: &Kernel) -> Result<Pipeline, String> {
    rt.pipeline(kernel)
        .ctx(format_args!("creating the pipeline of `{}`", kernel.name))
}

/// Dispatches in threads mode.
pub(crate) fn threads(
    rt: &Runtime,
    p: &Pipeline,
    args: &[Arg<'_>],
    grid: [u32; 3],
    tg: [u32; 3],
) -> CaseResult {
    rt.dispatch_threads(p, args, grid, tg)
        .map(|_| ())
        .ctx(format_args!(
            "dispatch_threads of `{}` with grid {grid:?}, threadgroup {tg:?}",
            p.kernel().name
        ))
}

/// Dispatches in threadgroups mode.
pub(crate) fn groups(
    rt: &Runtime,
    p: &Pipeline,
    args: &[Arg<'_>],
    tgs: [u32; 3],
    tg: [u32; 3],
) -> CaseResult {
    rt.dispatch_threadgroups(p, args, tgs, tg)
        .map(|_| ())
        .ctx(format_args!(
            "dispatch_threadgroups of `{}` with {tgs:?} threadgroups of {tg:?}",
            p.kernel().name
        ))
}

pub(crate) fn upload<T: Element>(rt: &Runtime, data: &[T]) -> Result<Buffer, String> {
    rt.buffer_from(data).ctx("allocating a buffer")
}

/// A buffer of `len` copies of `fill`.
pub(crate) fn filled<T: Element>(rt: &Runtime, len: usize, fill: T) -> Result<Buffer, String> {
    upload(rt, &vec![fill; len])
}

pub(crate) fn download<T: Element>(buf: &Buffer) -> Result<Vec<T>, String> {
    buf.to_vec::<T>().ctx("reading a buffer back")
}

/// Compares element by element; on mismatch, names the first few indices
/// with `describe(i)` (the inputs that produced element `i`).
pub(crate) fn check_with<T: Debug>(
    what: &str,
    got: &[T],
    want: &[T],
    same: impl Fn(&T, &T) -> bool,
    describe: impl Fn(usize) -> String,
) -> CaseResult {
    ensure!(
        got.len() == want.len(),
        "{what}: {} elements read back, {} expected",
        got.len(),
        want.len()
    );
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| !same(&got[i], &want[i]))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let mut msg = format!("{what}: {} of {} elements differ", bad.len(), got.len());
    for &i in bad.iter().take(6) {
        let d = describe(i);
        let d = if d.is_empty() {
            String::new()
        } else {
            format!(" ({d})")
        };
        msg.push_str(&format!(
            "\n    [{i}]{d}: got {:?}, expected {:?}",
            got[i], want[i]
        ));
    }
    if bad.len() > 6 {
        msg.push_str("\n    …");
    }
    Err(msg)
}

/// Exact equality.
pub(crate) fn check_eq<T: Debug + PartialEq>(
    what: &str,
    got: &[T],
    want: &[T],
    describe: impl Fn(usize) -> String,
) -> CaseResult {
    check_with(what, got, want, |a, b| a == b, describe)
}

/// Bit-exact f32 equality, except that every NaN matches every NaN.
pub(crate) fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

pub(crate) fn check_f32_exact(
    what: &str,
    got: &[f32],
    want: &[f32],
    describe: impl Fn(usize) -> String,
) -> CaseResult {
    check_with(what, got, want, |a, b| same_f32(*a, *b), describe)
}

/// Distance in units in the last place of `reference` (rounded to f32)
/// between `got` and the exact `reference`. NaN matches only NaN and an
/// infinity only itself (distance 0 or infinity).
pub(crate) fn ulp_error(got: f32, reference: f64) -> f64 {
    if reference.is_nan() || got.is_nan() {
        return if reference.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let r32 = reference as f32;
    if r32.is_infinite() || got.is_infinite() {
        // An overflowing reference may come back as the largest finite value
        // or infinity; both are within one rounding.
        if got == r32
            || (got.abs() == f32::MAX && r32.is_infinite() && got.signum() == r32.signum())
        {
            return 0.0;
        }
        return f64::INFINITY;
    }
    (got as f64 - reference).abs() / ulp_of(r32)
}

/// The spacing of f32 values at `x` (the gap to the next larger magnitude).
pub(crate) fn ulp_of(x: f32) -> f64 {
    let a = x.abs();
    if a < f32::MIN_POSITIVE {
        return 2f64.powi(-149);
    }
    let exp = ((a.to_bits() >> 23) as i32) - 127;
    2f64.powi(exp - 23)
}

/// Reference f32 → IEEE binary16 bits, round to nearest even; overflow gives
/// infinity, NaN a quiet NaN.
pub fn f32_to_f16(x: f32) -> u16 {
    let sign = ((x.to_bits() >> 16) & 0x8000) as u16;
    let a = x.abs();
    if a.is_nan() {
        return sign | 0x7e00;
    }
    // 65520 is halfway between 65504 (the largest half) and 65536: ties go to
    // the even neighbour, which is infinity.
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a < 2f32.powi(-14) {
        // Subnormal range: a multiple of 2^-24. Scaling by 2^24 is exact.
        let q = (a * 2f32.powi(24)).round_ties_even();
        return sign | q as u16; // 1024 encodes the smallest normal, correctly
    }
    let e = ((a.to_bits() >> 23) as i32) - 127; // -14..=15
    let q = (a * 2f32.powi(10 - e)).round_ties_even() as u32; // 1024..=2048
    let (e, q) = if q == 2048 { (e + 1, 1024) } else { (e, q) };
    sign | ((((e + 15) as u32) << 10) | (q - 1024)) as u16
}

/// Reference IEEE binary16 bits → f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let mant = (h & 0x3ff) as f32;
    match exp {
        0 => sign * mant * 2f32.powi(-24),
        0x1f if mant == 0.0 => sign * f32::INFINITY,
        0x1f => f32::NAN,
        e => sign * (1024.0 + mant) * 2f32.powi(e - 25),
    }
}

/// Reference f32 → bfloat16 bits, round to nearest even.
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    let lower = bits & 0xffff;
    let upper = bits >> 16;
    let round_up = lower > 0x8000 || (lower == 0x8000 && upper & 1 == 1);
    (upper + round_up as u32) as u16
}

pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// A buffer of f16 elements holding the given bit patterns.
pub(crate) fn upload_f16(rt: &Runtime, bits: &[u16]) -> Result<Buffer, String> {
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    rt.buffer_from_bytes(enigma_ir::Type::F16, &bytes)
        .ctx("allocating an f16 buffer")
}

/// The elements of a 16-bit buffer as bit patterns.
pub(crate) fn download_u16_bits(buf: &Buffer) -> Result<Vec<u16>, String> {
    let bytes = buf.read_bytes().ctx("reading a buffer back")?;
    Ok(bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect())
}

/// A random normal f32 with magnitude in `[2^lo, 2^hi)`, random sign.
pub(crate) fn normal_f32(rng: &mut SmallRng, lo: i32, hi: i32) -> f32 {
    let e = rng.gen_range(lo..hi);
    let m: u32 = rng.gen_range(0..(1 << 23));
    let bits = (((e + 127) as u32) << 23) | m;
    let x = f32::from_bits(bits);
    if rng.gen() {
        -x
    } else {
        x
    }
}

/// A random multiple of 1/4 with `|x| ≤ max_abs_quarters / 4`: sums of a
/// few thousand such values are exact in f32, whatever the order.
pub(crate) fn quarter(rng: &mut SmallRng, max_abs_quarters: i32) -> f32 {
    rng.gen_range(-max_abs_quarters..=max_abs_quarters) as f32 / 4.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_reference_round_trips_every_half() {
        for h in 0u16..=0xffff {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert_eq!(f32_to_f16(f) & 0x7c00, 0x7c00);
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#06x} = {f}");
            }
        }
    }

    #[test]
    fn f16_reference_rounds_midpoints_to_even() {
        // Between consecutive positive finite halves h and h+1, the midpoint
        // goes to the even one and anything off the midpoint to the nearer.
        for h in 0u16..0x7bff {
            let (a, b) = (f16_to_f32(h), f16_to_f32(h + 1));
            let mid = (a + b) / 2.0; // exact: halves have 11 significant bits
            let even = if h % 2 == 0 { h } else { h + 1 };
            assert_eq!(f32_to_f16(mid), even, "midpoint of {h:#06x}");
            assert_eq!(f32_to_f16(f32::from_bits(mid.to_bits() - 1)), h);
            assert_eq!(f32_to_f16(f32::from_bits(mid.to_bits() + 1)), h + 1);
        }
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(-1.0), 0xbc00);
    }

    #[test]
    fn bf16_reference_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80, "rounds up to infinity");
    }

    #[test]
    fn ulp_error_measures_in_units_of_the_reference() {
        assert_eq!(ulp_error(1.0, 1.0), 0.0);
        assert_eq!(ulp_error(f32::from_bits(1.0f32.to_bits() + 2), 1.0), 2.0);
        assert_eq!(ulp_error(f32::NAN, f64::NAN), 0.0);
        assert!(ulp_error(1.0, f64::NAN).is_infinite());
    }
}
