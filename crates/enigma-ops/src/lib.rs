//! The kernel library of `enigma-kernels` as a Rust API: one call per
//! operation, which plans the dispatches for the shape, compiles (and
//! caches) the pipelines, allocates the output and runs.
//!
//! ```
//! use enigma_runtime::{Device, Runtime};
//! let rt = Runtime::new(Device::Sim).unwrap();
//! let x = rt.buffer_from(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
//! let y = enigma_ops::softmax(&rt, &x, 2, 3).unwrap();
//! let y = y.to_vec::<f32>().unwrap();
//! assert!((y[0] + y[1] + y[2] - 1.0).abs() < 1e-6);
//! let s = enigma_ops::sum(&rt, &x, 6).unwrap().to_vec::<f32>().unwrap();
//! assert_eq!(s, vec![21.0]);
//! ```
//!
//! # Element types
//! The element type of an input is the type its buffer was made with
//! (`rt.buffer_from(&[f32])`, `rt.buffer_from_bytes(Type::F16, …)`), or
//! [`Options::elem`], or f32 for an untyped buffer (`rt.buffer_bytes`,
//! [`upload`]). Arithmetic is f32; outputs of element-wise, softmax, norm
//! and attention kernels have the input's type, reductions and GEMV give f32.
//!
//! # Vector loads
//! The runtime checks that a typed buffer is bound to a parameter of its own
//! element type, so `float4` views can only be bound to *untyped* buffers
//! whose size is a multiple of the vector size. Buffers made by [`upload`]
//! and every output of this crate are untyped, so they take the vectorised
//! kernels when the shape allows (any `n` for flat vectors — a buffer
//! whose size is a multiple of the vector's holds the last, partial vector
//! whole —, `d % 4 == 0` for rows, `k % 4 == 0` for GEMV); typed buffers
//! from `rt.buffer_from` run the scalar kernels. [`Options::vectorize`] forces either choice. When the
//! vector kernels run, outputs of the flat operations (element-wise, prefix
//! sums) are padded to a multiple of 4 elements, which the kernels write
//! too: read their first `n` elements ([`download`]). Other outputs have
//! exactly the elements asked for.
//!
//! # Threadgroup sizes
//! The occupancy table's size for the kernel by default, 256 for GEMV and
//! attention ([`default_threads`]), `scan::DEFAULT_THREADS` for the prefix
//! sums, or [`Options::threads`] (a multiple of 32).
//!
//! # 4-bit weights
//! [`quantize_weights`] and [`dequantize_weights`] convert on the host (FP4,
//! INT4, MLX's affine format: [`quant`]); [`QuantizedWeights::upload`] puts
//! them on the device and [`qmatmul()`] computes `A · dequant(B)` with `A`
//! an untyped f16 buffer ([`upload`]): FP4/INT4 in their row layout on
//! `qmatmul` up to [`library::qmatmul::DECODE_ROWS`] rows and the tensor-core kernel
//! above, in fragment order ([`QuantizedWeights::upload_in`]) on
//! `qmatmul_fragments` up to `qmatmul_fragments::DECODE_ROWS` rows and the
//! tensor-core kernel above, MLX's affine format on `qmatmul_affine` at
//! any M.
//!
//! # Registry
//! [`registry()`] lists every operation with a checked run on random data
//! ([`Entry::run`]) and a timing loop ([`Entry::bench`]), for `enigma run`
//! and `enigma bench`.

//!
//! # Layout
//! One module per kernel family, each adding its operations to [`Ops`]:
//! `elementwise` (with broadcasting), `reduce` (flat, per row, over any
//! axis; cross-entropy, 2-D pooling), `scan` (prefix sums, running sums and
//! products over an axis), `rows` (softmax, log-softmax and the norms),
//! `conv` (2-D convolution), `gemv`, `gemm` (matrix multiply, batched), `qmatmul`
//! (4-bit weights), `attention` (decode), `attention_prefill` (whole
//! sequences); `launch` holds [`Ops`] itself, the
//! pipeline cache and the checks every operation shares, `error` the
//! error type, `split` the K-split
//! launches the matrix products share, `options` the per-call choices (one
//! struct per family), `host` the host-side conversions, `free` a function
//! per operation.

mod attention;
mod attention_prefill;
mod check;
mod conv;
mod elementwise;
mod error;
mod free;
mod gemm;
mod gemv;
mod host;
mod launch;
mod options;
mod qmatmul;
mod reduce;
mod registry;
mod rows;
mod scan;
mod split;
mod threads;
pub mod tune;
mod tuning_cache;

pub use check::{CheckOutcome, Tolerance};
pub use conv::Conv2d;
pub(crate) use error::arg_err;
pub use error::Error;
pub use enigma_ir::QuantLayout;
pub use enigma_kernels::library::elementwise::Elementwise;
pub use enigma_kernels::library::split::SplitSum;
pub use enigma_kernels::library::select::{GemmOptions, QmatmulOptions, SelectError};
pub use enigma_kernels::library::tile::{GemmTile, ThreadgroupLimits};
pub use enigma_kernels::library::quant::{self, QuantError, QuantizedMatrix};
pub use enigma_kernels::library;
pub use attention::{decode_shape, DecodeOutput};
pub use enigma_kernels::library::attention::DecodeShape;
pub use enigma_kernels::library::attention_prefill::{Mask, PrefillShape, PrefillTile};
pub use enigma_kernels::library::reduce::{AxisReduction, Pool};
pub use enigma_kernels::library::scan::{AxisScan, ScanKind};
pub use enigma_kernels::library::{DType, ReduceOp};
pub use free::*;
pub use host::{download, quantize, upload, upload_bytes};
pub use launch::{threadgroup_limits, Launch, LaunchSummary, Ops, PipelineCache};
pub use reduce::LossReduction;
pub use options::{AttentionOptions, GemvOptions, Options, ReduceOptions, RowOptions, ScanOptions};
pub use qmatmul::{dequantize_weights, quantize_weights, QuantizedWeights};
pub use registry::{parse_shape, registry, BenchOutcome, Entry, Prepared, BENCH_HOLD};
pub use threads::{default_threads, KernelType};
