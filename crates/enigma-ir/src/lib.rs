//! enigma's kernel IR.
//!
//! A [`Kernel`] is plain data: parameters (device buffers and by-value
//! constants, bound in declaration order as `[[buffer(n)]]`; 2D textures,
//! bound in declaration order as `[[texture(n)]]`), specialisation
//! constants, threadgroup arrays, typed locals, and a body of structured
//! statements over expression trees. Front ends build it (the Rust
//! [`builder`] DSL, the Python decorator through the JSON form), [`validate()`]
//! checks it, and backends (simulator, MSL, CUDA) consume it.
//!
//! # Semantics (normative; the simulator is the reference)
//! * SIMD groups have 32 lanes. SIMD-group functions act on the *active*
//!   lanes of the caller's SIMD group: `simd_sum` inside `if (lane < 8)` sums
//!   8 lanes. Reading an inactive lane with a shuffle or broadcast is
//!   undefined (the simulator gives a poison value — an f32 NaN with payload
//!   `0xdead`, `0xDEADBEEF…` for integers — and its sanitizer reports it).
//!   The delta of `simd_shuffle_up`/`down`, the mask of `simd_shuffle_xor`
//!   and the lane of `simd_broadcast` are the same in every lane (MSL's rule;
//!   validation checks it where control flow is uniform over the SIMD group).
//!   `simd_ballot`'s upper 32 bits are zero. The SIMD-group functions take no
//!   bool, i64 or u64.
//! * `threadgroup_barrier` must be reached by every thread of the threadgroup;
//!   `simdgroup_barrier` by every active lane of the SIMD group. Validation
//!   rejects barriers in control flow that depends on per-thread values.
//! * Threadgroup memory starts uninitialised.
//! * Integer `/` and `%` are C's (truncating); division by zero is an error
//!   in the simulator (undefined on GPUs). Shifts use the low bits of the
//!   shift amount (`x << (n % bits)`), as GPUs do.
//! * Integer arithmetic wraps (two's complement); float arithmetic is IEEE.
//!   `f16`/`bf16` arithmetic rounds to the type after every operation.
//! * Expressions are evaluated left to right, each sub-expression once; `&&`
//!   and `||` evaluate both sides.
//! * Out-of-bounds access to a buffer or threadgroup array is an error in the
//!   simulator, never a silent read. So is a subscript of a multi-dimensional
//!   access outside its dimension ([`Expr::DimCheck`]), even where the flat
//!   index it forms is inside the memory.
//! * Textures: `read(coord)` gives four texels converted from the texture's
//!   pixel format as Metal does, `write(value, coord)` converts back (see
//!   [`Expr::TextureRead`], [`StmtKind::TextureWrite`]); a coordinate outside
//!   the texture is an error in the simulator (undefined on GPUs). Only a
//!   barrier with `mem_texture` orders texture accesses between threads
//!   (`mem_device` does not). `sample(sampler, uv)` filters an f32/f16
//!   `access::sample` texture with a constant [`Sampler`] (coordinates,
//!   filter, address mode; see [`Expr::TextureSample`]); a thread reading a
//!   texel of a read_write texture it wrote needs `fence()` between
//!   ([`StmtKind::TextureFence`]; the sanitizer reports the read without).
//! * Asynchronous copies ([`StmtKind::AsyncCopy`]) move 4, 8 or 16 bytes
//!   from a device buffer to threadgroup memory in the background; a copy is
//!   complete after the `async_wait` that retires its group, and other
//!   threads see it after the next threadgroup barrier. Touching the
//!   destination before then is a race, which the sanitizer reports; a
//!   conforming kernel cannot tell whether a device copies at once (the
//!   simulator and MSL do) or later (CUDA's `cp.async`).

pub mod builder;
pub mod capabilities;
pub mod cooperative;
pub mod dispatch_constant;
pub mod ir;
pub mod limits;
pub mod print_format;
#[cfg(feature = "testgen")]
pub mod testgen;
pub mod text;
pub mod types;
pub mod typing;
pub mod validate;
pub mod validation_error;
pub mod visit;

pub use ir::*;
pub use capabilities::Feature;
pub use cooperative::{CombineOp, CoopId, CooperativeTensor, ExecutionScope, Matmul2dDescriptor, Matmul2dMode, OperandRelease, ReduceAxis, ReduceOp};
pub use types::{MatrixType, QuantCode, QuantLayout, Scalar, Type};
pub use text::{from_json, to_json, to_json_pretty, JsonError, JSON_SCHEMA, READABLE_JSON_SCHEMAS, ParseError, ParseErrorKind};
pub use validate::{validate, KernelInfo, ValidationOptions};
pub use validation_error::{Location, ValidationError, ValidationErrorKind};
