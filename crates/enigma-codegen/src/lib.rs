//! enigma's C-family code generators: Metal Shading Language ([`msl`]) and
//! CUDA C++ ([`cuda`]) from one emitter.
//!
//! Both targets are C++ dialects, so one writer (`writer`) walks the IR and
//! prints declarations, statements and expressions, and a `Dialect` trait
//! supplies the words: its default methods write the common C++ (in MSL's
//! vocabulary, which is the IR's), and the MSL and CUDA dialects override
//! only where their target differs — the arrangement of CubeCL's C++
//! compiler and naga's back ends.
//!
//! Each target module has an `Options` struct and one entry point,
//! `write_string(kernel, info, options)`, taking a kernel and the
//! [`enigma_ir::KernelInfo`] that [`enigma_ir::validate()`] returned for it.
//! The promise: for a validated kernel, code generation never panics; it
//! returns the source or a [`CodegenError`] naming the kernel (for limits of
//! the target or the options, such as an MSL version without `bfloat`).
//!
//! # What has been checked, and how
//! Golden files (`tests/snapshots/`) pin the output for every IR construct
//! and the seed kernels. The test suite compiles every golden MSL and CUDA
//! source with `g++ -std=c++17 -fsyntax-only` against small shim headers
//! (`tests/shim/`) that declare the Metal and CUDA names the generators use.
//! **g++ is neither Apple's Metal compiler nor NVRTC**: this checks syntax,
//! name lookup and C++ typing of the generated code and its CUDA prelude, not
//! the targets' own rules. The MSL is also compiled by clang against a
//! stricter shim that holds it to some of MSL's own rules (address spaces,
//! atomic and SIMD-function types, versions; see [`msl`] and
//! `docs/metal.md`). See each module's documentation for what has been
//! compiled or run on real hardware.

mod code;
mod dialect;
mod error;
mod names;
mod plan;
mod writer;

pub mod cuda;
pub mod msl;
pub mod msl_math;

pub use error::{CodegenError, CodegenErrorKind, Target};
