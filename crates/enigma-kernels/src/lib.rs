//! enigma's kernels, written in the builder DSL: the seed-000 teaching
//! kernels ([`seed000`]) and the seed-001 two-pass reduction ([`reduce`]).
//! Each kernel comes with the dispatch it expects and, where it computes
//! something, a plain-Rust reference.

pub mod library;
pub mod reduce;
pub mod sanitizer_corpus;
pub mod seed000;

/// Every named kernel of the seeds (seed-000 kernels, the reduction passes),
/// for tools that look kernels up by name (`enigma emit`, `enigma check`).
pub fn seed_kernels() -> Vec<enigma_ir::Kernel> {
    let mut kernels = seed000::all();
    kernels.push(reduce::reduce_threadgroup());
    kernels.push(reduce::reduce_final());
    kernels.push(reduce::reduce_threadgroup_vec4());
    kernels
}
