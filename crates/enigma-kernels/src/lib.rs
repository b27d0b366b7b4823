//! enigma's kernels, written in the builder DSL: the seed-000 teaching
//! kernels ([`seed000`]), the seed-001 two-pass reduction ([`reduce`]) and
//! seed 003's texture kernel ([`seed003`]).
//! Each kernel comes with the dispatch it expects and, where it computes
//! something, a plain-Rust reference.

pub mod library;
pub mod reduce;
pub mod sanitizer_corpus;
pub mod seed000;
pub mod seed003;

/// Deterministic test inputs in [-1, 1) from a xorshift generator seeded by
/// `seed`: the one data generator of the tests, the CLI's checked runs, the
/// sanitizer corpus and the benchmarks.
pub fn test_data(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Every named kernel of the seeds (seed-000 kernels, the reduction passes),
/// for tools that look kernels up by name (`enigma emit`, `enigma check`).
pub fn seed_kernels() -> Vec<enigma_ir::Kernel> {
    let mut kernels = seed000::all();
    kernels.push(reduce::reduce_threadgroup());
    kernels.push(reduce::reduce_final());
    kernels.push(reduce::reduce_threadgroup_vec4());
    kernels.push(seed003::simple_kernel_function());
    kernels
}
