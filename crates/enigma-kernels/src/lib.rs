//! enigma's kernels, written in the builder DSL: the dispatch patterns of
//! the execution-model guide ([`dispatch_patterns`]), the two-pass sum of
//! the Python example ([`two_pass_sum`]), the white-texture fill
//! ([`texture_fill`]) and the kernel library ([`library`]).
//! Each kernel comes with the dispatch it expects and, where it computes
//! something, a plain-Rust reference.

pub mod dispatch_patterns;
pub mod library;
pub mod texture_fill;
pub mod two_pass_sum;

/// The one generator of test data: xorshift64 (shifts 13, 7, 17) from a
/// seed spread by the golden-ratio multiplier. Behind [`test_data`] (the
/// tests, the CLI's examples, the sanitizer corpus, the benchmarks) and the
/// kernel library's checked runs on random inputs (`enigma_ops::registry`).
#[derive(Clone, Debug)]
pub struct TestRng(u64);

impl TestRng {
    pub fn new(seed: u64) -> TestRng {
        TestRng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `[lo, hi)`, from the top 24 bits.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Deterministic test inputs in [-1, 1): `n` values of [`TestRng`] seeded
/// by `seed`.
pub fn test_data(n: usize, seed: u64) -> Vec<f32> {
    TestRng::new(seed).vec(n, -1.0, 1.0)
}

/// The one tolerance rule for an f32 sum of `terms` terms whose magnitudes
/// add up to `abs_sum`, against the f64 reference: `levels · ε · Σ|x|` with
/// `levels = 2·log2(terms) + 4` — twice the depth of a summation tree, plus
/// vector loads and SIMD-group steps that add a few roundings (ε is twice
/// the unit roundoff, so the bound has a further factor of two to spare).
pub fn sum_bound(abs_sum: f64, terms: usize) -> f64 {
    let levels = 2.0 * (terms.max(2) as f64).log2() + 4.0;
    abs_sum * f32::EPSILON as f64 * levels + 1e-30
}

/// [`sum_bound`] for the f32 sum of `values`: the tolerance of every
/// reduction (the seed-001 passes, the library's sums, row sums).
pub fn sum_tolerance(values: &[f32]) -> f64 {
    sum_bound(values.iter().map(|&x| (x as f64).abs()).sum(), values.len())
}

/// Every named kernel of the seeds (seed-000 kernels, the reduction passes),
/// for tools that look kernels up by name (`enigma emit`, `enigma check`).
pub fn seed_kernels() -> Vec<enigma_ir::Kernel> {
    let mut kernels = dispatch_patterns::all();
    kernels.push(two_pass_sum::reduce_threadgroup());
    kernels.push(two_pass_sum::reduce_final());
    kernels.push(two_pass_sum::reduce_threadgroup_vec4());
    kernels.push(texture_fill::simple_kernel_function());
    kernels
}
