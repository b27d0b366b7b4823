//! The pages of `README.md` and `docs/` as doctests: `cargo test -p enigma --doc`
//! compiles and runs every Rust code block of them as pasted (their Python
//! blocks run in `python/tests/test_docs.py`).

#[doc = include_str!("../../../README.md")]
pub mod readme {}

#[doc = include_str!("../../../docs/rust-dsl.md")]
pub mod rust_dsl {}

#[doc = include_str!("../../../docs/library.md")]
pub mod library {}

#[doc = include_str!("../../../docs/sanitizer.md")]
pub mod sanitizer {}

#[doc = include_str!("../../../docs/cuda.md")]
pub mod cuda {}
