//! enigma's kernels, written in the builder DSL: the seed-000 teaching
//! kernels ([`seed000`]) and the seed-001 two-pass reduction ([`reduce`]).
//! Each kernel comes with the dispatch it expects and, where it computes
//! something, a plain-Rust reference.

pub mod reduce;
pub mod sanitizer_corpus;
pub mod seed000;
