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
//! Seed 004's table by default, seed 000's 256 for GEMV and attention
//! ([`default_threads`]), 512 for the prefix sums (measured on the H100:
//! `scan::DEFAULT_THREADS`), or [`Options::threads`] (a multiple of 32).
//!
//! # 4-bit weights
//! [`quantize_weights`] and [`dequantize_weights`] convert on the host (FP4,
//! INT4, MLX's affine format: [`quant`]); [`QuantizedWeights::upload`] puts
//! them on the device and [`qmatmul()`] computes `A · dequant(B)` with `A`
//! an untyped f16 buffer ([`upload`]): FP4/INT4 in seed 002's layout on
//! `qmatmul` (or, above `qmatmul::TILED_ABOVE_ROWS` rows, the tensor-core kernel), in fragment
//! order ([`QuantizedWeights::upload_in`]) on `qmatmul_fragments` up to
//! `qmatmul_fragments::DECODE_ROWS` rows and the tensor-core kernel above, MLX's affine
//! format on `qmatmul_affine` at any M.
//!
//! # Registry
//! [`registry()`] lists every operation with a checked run on random data
//! ([`Entry::run`]) and a timing loop ([`Entry::bench`]), for `enigma run`
//! and `enigma bench`.

use enigma_ir::{Kernel, Scalar, Type};
use enigma_kernels::library::{self as lib, attention, elementwise, gemm, gemv, norm, qgemm_fused, qmatmul, qmatmul_affine, qmatmul_fragments, reduce, scan, sgemm, softmax, DType, Dispatch, ReduceOp};
use enigma_runtime::half::{bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits};
use enigma_runtime::{Arg, Buffer, DispatchReport, Pipeline, Runtime, RuntimeError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use enigma_kernels::library::elementwise::Elementwise;
pub use enigma_kernels::library::scan::ScanKind;
pub use enigma_kernels::library::quant::{self, Format as QuantFormat, QuantError, QuantizedMatrix};
pub use enigma_ir::QuantLayout;
pub use enigma_kernels::library::gemm::SplitSum;
/// The most rows [`Ops::qmatmul`] gives the decode kernel; above them it takes
/// the tensor-core kernel.
pub use enigma_kernels::library::qmatmul::TILED_ABOVE_ROWS as QMATMUL_DECODE_ROWS;

/// Whether [`Ops::qmatmul`] runs the decode kernel for `m` rows with
/// `options` (seed 002's layout): at any M when the options ask for the
/// decode kernel's own blocking (rows, columns per thread, packed words) or
/// for no vector loads; else up to [`QMATMUL_DECODE_ROWS`] rows unless they
/// ask for K splits summed in the kernel, which the tensor-core kernel has
/// and the decode kernel has not; else the tensor-core kernel.
pub(crate) fn qmatmul_takes_decode_kernel(m: usize, options: &Options) -> bool {
    let decode_options = [options.rows_per_threadgroup, options.columns_per_thread, options.unroll].iter().any(Option::is_some) || options.vectorize == Some(false);
    decode_options || (m <= QMATMUL_DECODE_ROWS as usize && options.split_sum != Some(SplitSum::LastThreadgroup))
}
/// Whether [`Ops::qmatmul`] runs the decode row on weights in fragment order
/// (`qmatmul_fragments`) for `m` rows with `options`: up to
/// `qmatmul_fragments::DECODE_ROWS` rows, unless the options ask for the
/// tensor-core GEMM's own features (a tile, stages, K splits summed in the
/// kernel); else the GEMM.
pub(crate) fn qmatmul_takes_fragment_decode_row(m: usize, options: &Options) -> bool {
    let gemm_asked = options.gemm_tile.is_some() || options.stages.is_some() || options.split_sum == Some(SplitSum::LastThreadgroup);
    m <= qmatmul_fragments::DECODE_ROWS as usize && !gemm_asked
}
pub use enigma_kernels::library::{DType as ElemType, ReduceOp as Reduction, ShapeError};
pub use enigma_analysis::tiles::{select_gemm_tile, GemmTile, ThreadgroupLimits};

mod check;
mod registry;
mod threads;
pub mod tune;

pub use check::{CheckOutcome, Tolerance};
pub use registry::{parse_shape, registry, BenchOutcome, Entry, LaunchSummary, Prepared, BENCH_HOLD};
pub use threads::{default_threads, KernelType};

/// Everything that can go wrong in an operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// A 4-bit weight shape or buffer the formats cannot take.
    #[error(transparent)]
    Quant(#[from] QuantError),
    /// A buffer that does not fit the operation (too small, wrong type).
    #[error("{op}: {message}")]
    Argument { op: String, message: String },
}

fn arg_err(op: &str, message: impl Into<String>) -> Error {
    Error::Argument { op: op.to_string(), message: message.into() }
}

/// What one threadgroup may use on `device`: the limits GEMM tiles and
/// tuned threadgroup sizes are checked against.
pub fn threadgroup_limits(device: &enigma_runtime::DeviceInfo) -> ThreadgroupLimits {
    ThreadgroupLimits { max_threads: device.max_threads_per_threadgroup, max_memory_bytes: device.max_threadgroup_memory_bytes }
}

/// Per-call choices; every field has a default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Threads per threadgroup (default: seed 004's table for the kernel).
    pub threads: Option<u32>,
    /// Element type of untyped input buffers (default f32).
    pub elem: Option<Scalar>,
    /// `Some(true)`: use vector loads or fail; `Some(false)`: scalar
    /// kernels; `None`: vector loads when the buffers and shape allow.
    pub vectorize: Option<bool>,
    /// Row kernels: keep rows that fit in registers (default `true`).
    pub cache_rows: Option<bool>,
    /// Vector reductions: cap on pass-1 threadgroups.
    pub max_threadgroups: Option<u32>,
    /// Vector reductions, GEMV and prefix sums: loads in flight per thread;
    /// quantized matmul: packed words per loop iteration (4, 8 or 16), for
    /// MLX's affine format packed words per lane and load (1, 2 or 4).
    pub unroll: Option<u32>,
    /// GEMV: rows per SIMD group.
    pub rows_per_simdgroup: Option<u32>,
    /// Quantized matmul: rows of `C` per threadgroup (1 … 8; default
    /// `min(M, 8)`).
    pub rows_per_threadgroup: Option<u32>,
    /// Quantized matmul: columns per thread (1, 2 or 4: `uint`, `uint2`,
    /// `uint4` weight loads; default the widest that divides N with
    /// `rows · columns ≤ 8` and, on a GPU, leaves at least two column tiles
    /// per compute unit; `vectorize: Some(false)` means 1). For MLX's
    /// affine format the columns of each SIMD group, whose lanes all work
    /// on each of them (1, 2 or 4; default likewise; `vectorize:
    /// Some(false)` means one packed word per load instead).
    pub columns_per_thread: Option<u32>,
    /// GEMM and both quantized matmuls: how many ways K is split over
    /// threadgroups (partial products in an f32 workspace, summed by a
    /// second kernel in a fixed order; 1: one dispatch, no workspace).
    /// Default: 1 on the simulator; on a GPU, for GEMM and the tensor-core
    /// kernel enough for two threadgroups per compute unit where the output
    /// has too few tiles, each split keeping at least 4 slices of K; for the
    /// decode kernel `qmatmul::default_splits` (a split only where the grid
    /// leaves compute units with fewer than 8 warps, whole quantization
    /// groups per split). The decode
    /// kernel takes 1 up to K / group (at most 64), dividing the groups or
    /// not; the kernel for MLX's affine format only 1.
    pub k_splits: Option<u32>,
    /// The tensor-core GEMMs (matrix multiply, the quantized GEMM) with K
    /// split: who sums the partial tiles. `Reduction`: a second dispatch.
    /// `LastThreadgroup`: each tile's last threadgroup, in the kernel (one
    /// dispatch; needs device-scope fences, an [`Error::Argument`] on a
    /// device without them). Default: the quantized GEMM's kernel at one
    /// row where the device has the fences, the reduction otherwise (on an
    /// H100 the kernel's own sum was the faster at one row and the slower
    /// at 16; `BENCHMARKS.md`, eighth session).
    pub split_sum: Option<SplitSum>,
    /// Matrix multiply: the GEMM tile and its SIMD-group grid (default:
    /// [`select_gemm_tile`] for the shape and the device, unless
    /// [`Options::threads`] is set; the autotuner's choice in the
    /// registry). With [`Options::threads`] too, the two must agree. For f32
    /// inputs off Metal a tile also chooses the SIMD-group kernel over the
    /// default SIMT one ([`Ops::matmul`]). [`Ops::qmatmul_fused`] takes its
    /// tile from here too (default: seed 002 §9.1's for M), and so does
    /// [`Ops::qmatmul_tiled`] (and `qmatmul` above the decode kernel's
    /// rows; slices of 32 or 64 K values, dividing the group).
    pub gemm_tile: Option<GemmTile>,
    /// GEMM and the quantized tensor-core kernel: slices of K in flight in
    /// threadgroup memory, filled by asynchronous copies (1: staged through
    /// registers; default: `gemm::DEFAULT_STAGES` (4), else the most that fit down to 2, none on
    /// Metal).
    pub stages: Option<u32>,
    /// Fused attention decode: how many ways each head's keys are split
    /// over threadgroups (default: enough for about four threadgroups per
    /// compute unit; 1 = one threadgroup per head).
    pub attention_splits: Option<u32>,
    /// Run every dispatch under the simulator's sanitizer (races,
    /// uninitialised reads, …): error findings fail the dispatch
    /// ([`Error::Runtime`]), warnings are kept in the [`Launch`] log.
    pub sanitize: bool,
}

impl Options {
    pub fn threads(threads: u32) -> Options {
        Options { threads: Some(threads), ..Options::default() }
    }
}

/// One dispatch an [`Ops`] made, with the runtime's report.
#[derive(Clone, Debug)]
pub struct Launch {
    pub kernel: String,
    pub dispatch: Dispatch,
    pub report: DispatchReport,
    /// The pipeline dispatched (its kernel: [`Pipeline::kernel`]).
    pub pipeline: Pipeline,
}

/// The GEMM kernel a matrix multiply runs: on SIMD-group matrices, or the
/// SIMT f32 kernel. Both take the same parameters.
#[derive(Clone, Copy, Debug)]
enum MatmulPlan {
    Matrices(gemm::GemmConfig),
    Simt(sgemm::SgemmConfig),
}

impl MatmulPlan {
    fn kernel(&self) -> Kernel {
        match self {
            MatmulPlan::Matrices(cfg) => gemm::gemm(cfg),
            MatmulPlan::Simt(cfg) => sgemm::sgemm(cfg),
        }
    }

    fn splits(&self) -> u32 {
        match self {
            MatmulPlan::Matrices(cfg) => cfg.splits,
            MatmulPlan::Simt(cfg) => cfg.splits,
        }
    }

    /// Who sums the splits: the SIMT kernel always leaves them to the reduction.
    fn split_sum(&self) -> SplitSum {
        match self {
            MatmulPlan::Matrices(cfg) => cfg.split_sum,
            MatmulPlan::Simt(_) => SplitSum::Reduction,
        }
    }

    /// The dispatch for an `m × n` result.
    fn dispatch(&self, m: u32, n: u32) -> Dispatch {
        match self {
            MatmulPlan::Matrices(cfg) => cfg.dispatch(m, n, 1),
            MatmulPlan::Simt(cfg) => cfg.dispatch(m, n, 1),
        }
    }
}

/// Pipelines made by [`Ops`], by kernel name and by what built each
/// kernel (see `Ops::launch`). Clones share one cache, so it can outlive
/// an `Ops` and serve the next one on the same device ([`Ops::with_cache`]):
/// a front end that runs one operation per call keeps one per runtime.
#[derive(Clone, Debug, Default)]
pub struct PipelineCache(Arc<Mutex<CachedPipelines>>);

#[derive(Debug, Default)]
struct CachedPipelines {
    by_name: HashMap<String, Pipeline>,
    by_key: HashMap<String, Pipeline>,
    /// Zeroed tickets for kernels that sum their K splits
    /// (`SplitSum::LastThreadgroup`), by the runtime's stream and the
    /// count: each such dispatch leaves them at zero. A call takes its
    /// buffer out while it runs, so calls from two threads never share one.
    tickets: HashMap<(Option<u64>, usize), Buffer>,
}

impl PipelineCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, CachedPipelines> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many distinct kernels the cache holds.
    pub fn len(&self) -> usize {
        self.lock().by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The operations over one runtime, with options, a pipeline cache (by
/// kernel name) and a log of the dispatches made.
#[derive(Debug)]
pub struct Ops<'rt> {
    rt: &'rt Runtime,
    options: Options,
    pipelines: PipelineCache,
    launches: RefCell<Vec<Launch>>,
}

impl<'rt> Ops<'rt> {
    /// The operations on `rt` with default options.
    pub fn new(rt: &'rt Runtime) -> Ops<'rt> {
        Ops { rt, options: Options::default(), pipelines: PipelineCache::default(), launches: RefCell::default() }
    }

    /// The same, keeping pipelines in `cache`, which must only ever hold
    /// pipelines of `rt`'s device (a pipeline of another device fails to
    /// dispatch, naming the kernel).
    pub fn with_cache(mut self, cache: PipelineCache) -> Ops<'rt> {
        self.pipelines = cache;
        self
    }

    /// The same, with `options` for every call.
    pub fn with_options(mut self, options: Options) -> Ops<'rt> {
        self.options = options;
        self
    }

    pub fn runtime(&self) -> &'rt Runtime {
        self.rt
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The dispatches made so far, oldest first; clears the log.
    pub fn take_launches(&self) -> Vec<Launch> {
        std::mem::take(&mut self.launches.borrow_mut())
    }

    /// The threadgroup size for a kernel type: [`Options::threads`], else
    /// the default of seed 004's table.
    fn threads(&self, kind: KernelType) -> u32 {
        self.options.threads.unwrap_or_else(|| default_threads(kind))
    }

    fn pipeline(&self, kernel: Kernel) -> Result<Pipeline, Error> {
        // One name may be built differently under other options (a
        // threadgroup size), which a shared cache can meet: reuse only the
        // same kernel.
        if let Some(p) = self.pipelines.lock().by_name.get(&kernel.name).filter(|p| *p.kernel() == kernel) {
            return Ok(p.clone());
        }
        let p = self.rt.pipeline(&kernel)?;
        self.pipelines.lock().by_name.insert(kernel.name.clone(), p.clone());
        Ok(p)
    }

    /// Dispatches the kernel `build` makes, binding its parameters by name
    /// from `named`. `key` names the kernel by what determines it (the
    /// builder and its arguments, in their `Debug` form), so a repeated
    /// launch finds its pipeline without building the kernel again.
    fn launch(&self, key: String, build: impl FnOnce() -> Kernel, dispatch: Dispatch, named: &[(&str, Arg<'_>)]) -> Result<(), Error> {
        let cached = self.pipelines.lock().by_key.get(&key).cloned();
        let pipeline = match cached {
            Some(p) => p,
            None => {
                let p = self.pipeline(build())?;
                self.pipelines.lock().by_key.insert(key, p.clone());
                p
            }
        };
        let kernel = pipeline.kernel();
        let mut args = Vec::with_capacity(kernel.params.len());
        for p in &kernel.params {
            let arg = named
                .iter()
                .find(|(n, _)| *n == p.name)
                .map(|(_, a)| *a)
                .ok_or_else(|| arg_err(&kernel.name, format!("no argument for parameter `{}`", p.name)))?;
            args.push(arg);
        }
        let name = kernel.name.clone();
        let mode = match dispatch.mode {
            lib::Mode::Threads => enigma_runtime::Mode::Threads,
            lib::Mode::Threadgroups => enigma_runtime::Mode::Threadgroups,
        };
        let options = enigma_runtime::Options { sanitize: self.options.sanitize, ..Default::default() };
        let report = self.rt.dispatch(&pipeline, &args, mode, dispatch.size, dispatch.threads, &options)?;
        self.launches.borrow_mut().push(Launch { kernel: name, dispatch, report, pipeline });
        Ok(())
    }

    // ----- buffers and types -------------------------------------------

    fn elem_of(&self, op: &str, buf: &Buffer) -> Result<Scalar, Error> {
        match (buf.elem(), self.options.elem) {
            (Some(t), Some(e)) if t != Type::scalar(e) => {
                Err(arg_err(op, format!("the buffer holds {t} but the options ask for {e}")))
            }
            (Some(t), _) if t.width() != 1 => Err(arg_err(op, format!("the buffer holds vectors ({t}); pass an untyped or scalar buffer"))),
            (Some(t), _) => Ok(t.elem()),
            (None, Some(e)) => Ok(e),
            (None, None) => Ok(Scalar::F32),
        }
    }

    fn dtype_of(&self, op: &str, buf: &Buffer) -> Result<DType, Error> {
        let s = self.elem_of(op, buf)?;
        DType::from_scalar(s).ok_or_else(|| arg_err(op, format!("element type {s} is not f32, f16 or bf16")))
    }

    fn need(&self, op: &str, what: &str, buf: &Buffer, elems: usize, elem: Scalar) -> Result<(), Error> {
        let bytes = elems.saturating_mul(elem.size_bytes() as usize);
        if buf.len_bytes() < bytes {
            return Err(arg_err(op, format!("`{what}` has {} bytes, needs {bytes} ({elems} {elem} elements)", buf.len_bytes())));
        }
        if let Some(t) = buf.elem() {
            if t.elem() != elem {
                return Err(arg_err(op, format!("`{what}` holds {t}, expected {elem}")));
            }
        }
        Ok(())
    }

    /// The vector width (1 or 4) for buffers `bufs` and a shape that
    /// allows vectors (`shape_ok`): 4 when every buffer can be bound as
    /// `vector` — untyped, with a size that is a multiple of the vector's
    /// (so a buffer checked by [`Ops::need`] to hold `n` elements holds
    /// `ceil(n/4)` whole vectors) — unless [`Options::vectorize`] decides.
    fn vectorize(&self, op: &str, bufs: &[&Buffer], vector: Type, shape_ok: bool) -> Result<u8, Error> {
        let bindable = |b: &Buffer| b.elem().is_none() && b.len_bytes().is_multiple_of(vector.size_bytes() as usize);
        let possible = shape_ok && bufs.iter().all(|b| bindable(b));
        match self.options.vectorize {
            Some(false) => Ok(1),
            Some(true) if !possible => Err(arg_err(
                op,
                if shape_ok {
                    format!("vector loads asked for, but a buffer cannot be bound as {vector} (typed buffers bind only as their own type; untyped ones need a size that is a multiple of {} bytes)", vector.size_bytes())
                } else {
                    "vector loads asked for, but the shape is not a multiple of 4".to_string()
                },
            )),
            _ => Ok(if possible { 4 } else { 1 }),
        }
    }

    /// The buffer a GEMM-family kernel's vector parameter (`a4`, `b4`: the
    /// 4-element vector view of the matrix `buf`, whose rows hold `row_len`
    /// elements) is bound to. Those kernels read the view only for a matrix
    /// whose rows are whole vectors (`row_len` a multiple of 4) and otherwise
    /// load scalars (`library::gemm` and `library::sgemm`, module docs), so:
    /// `buf` itself viewed as `vector` where that binds
    /// ([`Buffer::viewed_as`]: typed buffers of the same scalar too); a
    /// one-vector placeholder the kernel never reads where the rows are not
    /// whole vectors; an error naming the sizes where they are but the
    /// buffer's size is not a whole number of vectors (a buffer longer than
    /// the matrix by an odd tail).
    fn vector_view(&self, op: &str, what: &str, buf: &Buffer, vector: Type, row_len: usize) -> Result<Buffer, Error> {
        if let Some(view) = buf.viewed_as(vector) {
            return Ok(view);
        }
        if !row_len.is_multiple_of(4) {
            return Ok(self.rt.buffer_bytes(vector.size_bytes() as usize)?);
        }
        Err(arg_err(
            op,
            format!(
                "`{what}` ({} bytes{}) cannot be read as {vector}: its rows of {row_len} elements are loaded as vectors, which needs a buffer of the matrix's exact size or a multiple of {} bytes",
                buf.len_bytes(),
                buf.elem().map(|t| format!(" of {t}")).unwrap_or_default(),
                vector.size_bytes()
            ),
        ))
    }

    /// An untyped output of `elems` elements of `elem`, not zeroed: every
    /// element of every buffer the library allocates is written by its
    /// kernels before anything reads it (the sanitizer's coverage check in
    /// `tests/sanitizer.rs` holds every registry entry to that).
    fn output(&self, elem: Scalar, elems: usize) -> Result<Buffer, Error> {
        Ok(self.rt.buffer_uninit(elems * elem.size_bytes() as usize)?)
    }

    /// The output of a flat operation: `elems` elements of `elem`, padded
    /// to whole 4-element vectors when the vector kernel (`vec = 4`) writes
    /// it (which writes the padding too).
    fn flat_output(&self, elem: Scalar, elems: usize, vec: u8) -> Result<Buffer, Error> {
        let size = elem.size_bytes() as usize;
        let elems = if vec == 4 { elems.div_ceil(4) * 4 } else { elems };
        Ok(self.rt.buffer_uninit(elems * size)?)
    }

    // ----- element-wise -------------------------------------------------

    /// `y = op(x[, b])` over `n` elements (`factor` is used by `Scale`);
    /// `y` is padded to whole vectors when the vector kernel runs.
    pub fn elementwise(&self, op: Elementwise, x: &Buffer, b: Option<&Buffer>, n: usize, factor: f32) -> Result<Buffer, Error> {
        let name = op.name();
        let dtype = self.dtype_of(name, x)?;
        let elem = dtype.scalar();
        self.need(name, "x", x, n, elem)?;
        if op.is_binary() {
            let b = b.ok_or_else(|| arg_err(name, "a binary operation needs `b`"))?;
            self.need(name, "b", b, n, elem)?;
        }
        let mut inputs = vec![x];
        inputs.extend(b.filter(|_| op.is_binary()));
        let vec = self.vectorize(name, &inputs, dtype.ty(4), true)?;
        let plan = elementwise::plan(op, dtype, n, vec, self.threads(KernelType::Elementwise))?;
        let y = self.flat_output(elem, n, vec)?;
        let mut args = vec![("x", Arg::from(x)), ("x4", Arg::from(x)), ("y", Arg::from(&y)), ("y4", Arg::from(&y)), ("n", Arg::u32(plan.n))];
        if let Some(b) = b {
            args.extend([("b", Arg::from(b)), ("b4", Arg::from(b))]);
        }
        args.push(("factor", Arg::f32(factor)));
        self.launch(format!("elementwise {plan:?}"), || plan.kernel(), plan.dispatch, &args)?;
        Ok(y)
    }

    /// `y = x · factor`.
    pub fn scale(&self, x: &Buffer, n: usize, factor: f32) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Scale, x, None, n, factor)
    }
    /// `y = a + b`.
    pub fn add(&self, a: &Buffer, b: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Add, a, Some(b), n, 1.0)
    }
    /// `y = a · b`.
    pub fn mul(&self, a: &Buffer, b: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Mul, a, Some(b), n, 1.0)
    }
    /// `y = max(x, 0)`.
    pub fn relu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Relu, x, None, n, 1.0)
    }
    /// `y = x · sigmoid(x)`.
    pub fn silu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Silu, x, None, n, 1.0)
    }
    /// GELU, tanh form.
    pub fn gelu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Gelu, x, None, n, 1.0)
    }

    // ----- reductions ---------------------------------------------------

    /// `op` over `n` elements: a buffer of one f32.
    pub fn reduce(&self, op: ReduceOp, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        let name = format!("{op}_reduce");
        let dtype = self.dtype_of(&name, x)?;
        self.need(&name, "x", x, n, dtype.scalar())?;
        let vec = self.vectorize(&name, &[x], dtype.ty(4), true)?;
        let options = reduce::ReduceOptions { max_groups: self.options.max_threadgroups, unroll: self.options.unroll };
        let plan = reduce::plan(op, dtype, n, vec, self.threads(KernelType::VectorReduction { n }), options)?;
        let result = self.output(Scalar::F32, 1)?;
        match plan.pass2 {
            None => self.reduce_pass(&plan.pass1, x, &result)?,
            Some(pass2) => {
                let partials = self.output(Scalar::F32, plan.pass1.outputs() as usize)?;
                self.reduce_pass(&plan.pass1, x, &partials)?;
                self.reduce_pass(&pass2, &partials, &result)?;
            }
        }
        Ok(result)
    }

    fn reduce_pass(&self, pass: &reduce::ReducePass, x: &Buffer, out: &Buffer) -> Result<(), Error> {
        self.launch(format!("reduce {pass:?}"), || pass.kernel(), pass.dispatch, &[("x", Arg::from(x)), ("x4", Arg::from(x)), ("out", Arg::from(out)), ("n", Arg::u32(pass.n))])
    }

    /// Sum of `n` elements: one f32.
    pub fn sum(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.reduce(ReduceOp::Sum, x, n)
    }
    /// Maximum of `n` elements: one f32.
    pub fn max(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.reduce(ReduceOp::Max, x, n)
    }
    /// Minimum of `n` elements: one f32.
    pub fn min(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.reduce(ReduceOp::Min, x, n)
    }

    /// `op` over each row of `[rows, d]`: `rows` f32.
    pub fn reduce_rows(&self, op: ReduceOp, x: &Buffer, rows: usize, d: usize) -> Result<Buffer, Error> {
        let name = format!("{op}_rows");
        let dtype = self.dtype_of(&name, x)?;
        self.need(&name, "x", x, rows.saturating_mul(d), dtype.scalar())?;
        let vec = self.vectorize(&name, &[x], dtype.ty(4), d.is_multiple_of(4))?;
        let plan = reduce::plan_rows(op, dtype, rows, d, vec, self.threads(KernelType::RowReduction { d }))?;
        let out = self.output(Scalar::F32, rows)?;
        self.launch(format!("reduce_rows {plan:?}"), || plan.kernel(), plan.dispatch, &[("x", Arg::from(x)), ("x4", Arg::from(x)), ("out", Arg::from(&out)), ("d", Arg::u32(plan.d))])?;
        Ok(out)
    }

    // ----- prefix sums --------------------------------------------------

    /// The inclusive or exclusive prefix sum of `n` elements (f32, i32 or
    /// u32, sums in that type); `y` is padded to whole vectors when the
    /// vector kernel runs.
    pub fn prefix_sum(&self, x: &Buffer, n: usize, kind: ScanKind) -> Result<Buffer, Error> {
        let name = format!("scan_{}", kind.name());
        let elem = self.elem_of(&name, x)?;
        self.need(&name, "x", x, n, elem)?;
        let vec = self.vectorize(&name, &[x], Type::vector(elem, 4), true)?;
        let items = self.options.unroll.unwrap_or(scan::DEFAULT_ITEMS);
        let threads = self.options.threads.unwrap_or(scan::DEFAULT_THREADS);
        let plan = scan::plan(elem, kind, n, vec, threads, items)?;
        let y = self.flat_output(elem, n, vec)?;
        // Level i scans `input_i` into `output_i` and writes block totals,
        // which are level i+1's input (scanned in place). Level 0, when it
        // has more than one block, is a reduce-then-scan: its first pass
        // only writes the totals, and its add-back is a second scan of
        // the input with the offsets added (`BlockPass`).
        let mut sums: Vec<Buffer> = vec![];
        for level in &plan.levels {
            sums.push(self.output(elem, level.blocks as usize)?);
        }
        let split_first = plan.levels[0].blocks > 1;
        for (i, level) in plan.levels.iter().enumerate() {
            let (input, output) = if i == 0 { (x, &y) } else { (&sums[i - 1], &sums[i - 1]) };
            let pass = if i == 0 && split_first { scan::BlockPass::TotalOnly } else { scan::BlockPass::ScanAndTotal };
            self.launch(
                format!("scan_block {:?}", (elem, level.vec, level.kind, pass, plan.items)),
                || scan::scan_block(elem, level.vec, level.kind, pass, plan.items),
                level.scan,
                &[
                    ("x", Arg::from(input)),
                    ("x4", Arg::from(input)),
                    ("y", Arg::from(output)),
                    ("y4", Arg::from(output)),
                    ("block_sums", Arg::from(&sums[i])),
                    ("n", Arg::u32(level.n)),
                ],
            )?;
        }
        for (i, level) in plan.levels.iter().enumerate().rev() {
            let Some(add) = level.add else { continue };
            if i == 0 {
                let first = plan.levels[0];
                self.launch(
                    format!("scan_block {:?}", (elem, first.vec, first.kind, scan::BlockPass::ScanWithOffset, plan.items)),
                    || scan::scan_block(elem, first.vec, first.kind, scan::BlockPass::ScanWithOffset, plan.items),
                    first.scan,
                    &[
                        ("x", Arg::from(x)),
                        ("x4", Arg::from(x)),
                        ("y", Arg::from(&y)),
                        ("y4", Arg::from(&y)),
                        ("offsets", Arg::from(&sums[0])),
                        ("n", Arg::u32(first.n)),
                    ],
                )?;
            } else {
                let output = &sums[i - 1];
                self.launch(
                    format!("scan_add {:?}", (elem, level.vec, plan.items)),
                    || scan::scan_add(elem, level.vec, plan.items),
                    add,
                    &[("y", Arg::from(output)), ("y4", Arg::from(output)), ("offsets", Arg::from(&sums[i])), ("n", Arg::u32(level.n))],
                )?;
            }
        }
        Ok(y)
    }

    // ----- row kernels --------------------------------------------------

    fn row_options(&self, d: usize) -> softmax::RowOptions {
        softmax::RowOptions { threads: self.threads(KernelType::RowReduction { d }), cache: self.options.cache_rows.unwrap_or(true) }
    }

    /// Softmax of each row of `[rows, d]`.
    pub fn softmax(&self, x: &Buffer, rows: usize, d: usize) -> Result<Buffer, Error> {
        let dtype = self.dtype_of("softmax", x)?;
        self.need("softmax", "x", x, rows.saturating_mul(d), dtype.scalar())?;
        let y = self.output(dtype.scalar(), rows * d)?;
        let vec = self.vectorize("softmax", &[x, &y], dtype.ty(4), d.is_multiple_of(4))?;
        let plan = softmax::plan(dtype, rows, d, vec, self.row_options(d))?;
        self.softmax_into(&plan, x, &y)?;
        Ok(y)
    }

    fn softmax_into(&self, plan: &softmax::RowPlan, x: &Buffer, y: &Buffer) -> Result<(), Error> {
        let c = plan.config;
        self.launch(
            format!("softmax {:?}", (c.dtype, c.vec, c.items)),
            || softmax::softmax(c.dtype, c.vec, c.items),
            plan.dispatch,
            &[("x", Arg::from(x)), ("x4", Arg::from(x)), ("y", Arg::from(y)), ("y4", Arg::from(y)), ("d", Arg::u32(plan.d))],
        )
    }

    /// RMSNorm of each row: `y = x · rsqrt(mean(x²) + eps) · w`.
    pub fn rms_norm(&self, x: &Buffer, w: &Buffer, rows: usize, d: usize, eps: f32) -> Result<Buffer, Error> {
        self.norm("rms_norm", x, w, None, rows, d, eps)
    }

    /// LayerNorm of each row: `y = (x - mean) · rsqrt(var + eps) · w + b`.
    pub fn layer_norm(&self, x: &Buffer, w: &Buffer, b: &Buffer, rows: usize, d: usize, eps: f32) -> Result<Buffer, Error> {
        self.norm("layer_norm", x, w, Some(b), rows, d, eps)
    }

    #[allow(clippy::too_many_arguments)]
    fn norm(&self, name: &str, x: &Buffer, w: &Buffer, b: Option<&Buffer>, rows: usize, d: usize, eps: f32) -> Result<Buffer, Error> {
        let dtype = self.dtype_of(name, x)?;
        self.need(name, "x", x, rows.saturating_mul(d), dtype.scalar())?;
        self.need(name, "w", w, d, dtype.scalar())?;
        if let Some(b) = b {
            self.need(name, "b", b, d, dtype.scalar())?;
        }
        let y = self.output(dtype.scalar(), rows * d)?;
        let mut bufs = vec![x, w, &y];
        bufs.extend(b);
        let vec = self.vectorize(name, &bufs, dtype.ty(4), d.is_multiple_of(4))?;
        let plan = softmax::plan_rows(name, dtype, rows, d, vec, self.row_options(d))?;
        let c = plan.config;
        let layer = b.is_some();
        let key = format!("norm {:?}", (layer, c.dtype, c.vec, c.items));
        let build = || if layer { norm::layer_norm(c.dtype, c.vec, c.items) } else { norm::rms_norm(c.dtype, c.vec, c.items) };
        let mut args = vec![
            ("x", Arg::from(x)),
            ("x4", Arg::from(x)),
            ("w", Arg::from(w)),
            ("w4", Arg::from(w)),
            ("y", Arg::from(&y)),
            ("y4", Arg::from(&y)),
            ("d", Arg::u32(plan.d)),
            ("eps", Arg::f32(eps)),
        ];
        if let Some(b) = b {
            args.extend([("b", Arg::from(b)), ("b4", Arg::from(b))]);
        }
        self.launch(key, build, plan.dispatch, &args)?;
        Ok(y)
    }

    // ----- GEMV ---------------------------------------------------------

    /// `y = W·x` for `W` of `[m, k]` (f32, f16 or bf16) and f32 `x`: `m` f32.
    pub fn gemv(&self, w: &Buffer, x: &Buffer, m: usize, k: usize) -> Result<Buffer, Error> {
        let wdtype = self.dtype_of("gemv", w)?;
        self.need("gemv", "w", w, m.saturating_mul(k), wdtype.scalar())?;
        self.need("gemv", "x", x, k, Scalar::F32)?;
        let wvec = self.vectorize("gemv", &[w], wdtype.ty(4), k.is_multiple_of(4))?;
        let xvec = self.vectorize("gemv", &[x], Type::vector(Scalar::F32, 4), k.is_multiple_of(4))?;
        let options = gemv::GemvOptions { rows_per_simdgroup: self.options.rows_per_simdgroup, unroll: self.options.unroll };
        let plan = gemv::plan(wdtype, m, k, wvec.min(xvec), self.threads(KernelType::MatVec), options)?;
        let y = self.output(Scalar::F32, m)?;
        self.launch(
            format!("gemv {plan:?}"),
            || plan.kernel(),
            plan.dispatch,
            &[
                ("w", Arg::from(w)),
                ("w4", Arg::from(w)),
                ("x", Arg::from(x)),
                ("x4", Arg::from(x)),
                ("y", Arg::from(&y)),
                ("m", Arg::u32(plan.m)),
                ("k", Arg::u32(plan.k)),
            ],
        )?;
        Ok(y)
    }

    // ----- matrix multiply ----------------------------------------------

    /// `C = A · B` (row-major, `A` `m × k`, `B` `k × n`, both f16, bf16 or
    /// f32 of one type) with f32 accumulation; `C` is `m × n` of `out`.
    /// f32 inputs without [`Options::gemm_tile`] run the SIMT kernel of
    /// [`enigma_kernels::library::sgemm`] except on Metal (whose f32
    /// SIMD-group matrices are native): its tile for the shape
    /// (`SgemmConfig::for_shape`: 128×128, 128×64 where 128×128 tiles leave
    /// compute units idle, or 16, 32 or 64 rows up to 64), 16 deep where
    /// that fits the device (`SgemmConfig::deepened_for`), or with [`Options::threads`] its 8×8 blocks over that many threads
    /// (`SgemmConfig::with_threads`). Otherwise the tiled SIMD-group-matrix
    /// kernel of [`enigma_kernels::library::gemm`] with
    /// [`Options::gemm_tile`]; with only [`Options::threads`], the type's
    /// base tile (`GemmConfig::new`) split over `threads / 32` SIMD groups
    /// (`GemmConfig::with_threads`); else the tile [`select_gemm_tile`]
    /// gives the shape on this device. Pipelined, where the tile divides
    /// the shape, it runs the whole-tile variant (`GemmConfig::whole_tiles`).
    pub fn matmul(&self, a: &Buffer, b: &Buffer, m: usize, n: usize, k: usize, out: DType) -> Result<Buffer, Error> {
        let op = "matmul";
        let mut dims = [0u32; 3];
        for (d, (what, v)) in dims.iter_mut().zip([("m", m), ("n", n), ("k", k)]) {
            lib::nonzero(op, what, v)?;
            *d = lib::to_u32(op, what, v)?;
        }
        let input = self.dtype_of(op, a)?;
        self.need(op, "a", a, m.saturating_mul(k), input.scalar())?;
        self.need(op, "b", b, k.saturating_mul(n), input.scalar())?;
        let (mu, nu, ku) = (m as u32, n as u32, k as u32);
        let plan = self.matmul_plan(input, out, mu, nu, ku)?;
        let c = self.output(out.scalar(), m.saturating_mul(n))?;
        let a4 = self.vector_view(op, "a", a, input.ty(4), k)?;
        let b4 = self.vector_view(op, "b", b, input.ty(4), n)?;
        // The key names every field: the split count is built into the
        // kernel, not into its name.
        self.launch_split(
            format!("matmul {plan:?}"),
            || plan.kernel(),
            plan.dispatch(mu, nu),
            &[
                ("a", Arg::from(a)),
                ("b", Arg::from(b)),
                ("m", Arg::u32(mu)),
                ("n", Arg::u32(nu)),
                ("k", Arg::u32(ku)),
                ("alpha", Arg::f32(1.0)),
                ("beta", Arg::f32(0.0)),
                ("a4", Arg::from(&a4)),
                ("b4", Arg::from(&b4)),
            ],
            &c,
            out,
            m * n,
            plan.splits(),
            plan.split_sum(),
        )?;
        Ok(c)
    }

    /// The GEMM [`Ops::matmul`] runs for an `m × n × k` product of `input`
    /// (see there), with its K splits, checked against the device's
    /// threadgroup memory.
    fn matmul_plan(&self, input: DType, out: DType, m: u32, n: u32, k: u32) -> Result<MatmulPlan, Error> {
        let limits = threadgroup_limits(self.rt.device());
        let simt = input == DType::F32 && self.options.gemm_tile.is_none() && self.rt.device().kind != enigma_runtime::DeviceKind::Metal;
        if simt {
            let cfg = match self.options.threads {
                Some(t) => sgemm::SgemmConfig::new(out).with_threads(t)?,
                None => sgemm::SgemmConfig::for_shape(out, m, n, self.rt.device().compute_units).deepened_for(limits.max_memory_bytes),
            };
            let cfg = sgemm::SgemmConfig { splits: self.k_splits(cfg.splits_for(m, n, k, self.threadgroups_wanted())), ..cfg };
            cfg.check(limits.max_memory_bytes)?;
            return Ok(MatmulPlan::Simt(cfg));
        }
        let cfg = match (self.options.gemm_tile, self.options.threads) {
            (Some(tile), _) => {
                self.check_tile_threads("matmul", tile)?;
                gemm::GemmConfig::from_tile(tile, input, out)
            }
            (None, Some(t)) => gemm::GemmConfig::new(input, out).with_threads(t)?,
            (None, None) => gemm::GemmConfig::from_tile(select_gemm_tile(m, n, k, input.size_bytes(), &limits), input, out),
        };
        let cfg = gemm::GemmConfig { splits: self.k_splits(cfg.splits_for(m, n, k, self.threadgroups_wanted())), split_sum: self.split_sum("matmul", SplitSum::Reduction)?, ..cfg };
        let cfg = match self.options.stages {
            Some(stages) => gemm::GemmConfig { stages, ..cfg },
            None => cfg.pipelined_for(self.stage_memory()),
        };
        let cfg = cfg.whole_tiles_for(m, n, k);
        cfg.check(limits.max_memory_bytes)?;
        Ok(MatmulPlan::Matrices(cfg))
    }

    /// A tile's threads are its SIMD groups': an [`Options::threads`] that
    /// differs is an [`Error::Argument`] naming both.
    fn check_tile_threads(&self, op: &str, tile: GemmTile) -> Result<(), Error> {
        match self.options.threads {
            Some(t) if t != tile.threads() => Err(arg_err(op, format!("the tile {tile} takes {} threads, but the options ask for {t}", tile.threads()))),
            _ => Ok(()),
        }
    }

    /// The threadgroup memory the GEMMs' pipelined stages may fill
    /// (`pipelined_for`): the device's, or none on Metal, whose MSL copies
    /// at once, so that stages there would only cost memory.
    fn stage_memory(&self) -> u64 {
        match self.rt.device().kind {
            enigma_runtime::DeviceKind::Metal => 0,
            _ => self.rt.device().max_threadgroup_memory_bytes,
        }
    }

    /// The K splits to use: the options', or on a GPU `planned`, or 1.
    fn k_splits(&self, planned: u32) -> u32 {
        match (self.options.k_splits, self.rt.device().kind) {
            (Some(s), _) => s,
            (None, enigma_runtime::DeviceKind::Simulator) => 1,
            (None, _) => planned,
        }
    }

    /// The device's compute units on a GPU; 0 on the simulator, which
    /// gains nothing from filling them (the decode kernels' defaults).
    fn gpu_compute_units(&self) -> u32 {
        match self.rt.device().kind {
            enigma_runtime::DeviceKind::Simulator => 0,
            _ => self.rt.device().compute_units,
        }
    }

    /// Threadgroups a split-K plan aims for: two per compute unit.
    fn threadgroups_wanted(&self) -> u32 {
        2 * self.rt.device().compute_units
    }

    /// Whether the device has device-scope fences, which a kernel that sums
    /// its own K splits needs.
    fn has_device_fences(&self) -> bool {
        self.rt.device().features.contains(&enigma_ir::Feature::DeviceFence)
    }

    /// Who sums a tensor-core GEMM's K splits ([`Options::split_sum`]):
    /// `default` unless asked otherwise, and the kernel only on a device
    /// with device-scope fences.
    fn split_sum(&self, op: &str, default: SplitSum) -> Result<SplitSum, Error> {
        match self.options.split_sum.unwrap_or(default) {
            SplitSum::LastThreadgroup if !self.has_device_fences() => Err(arg_err(
                op,
                format!("the kernel sums its K splits with device-scope fences, which {} does not have (on Metal they need MSL 3.2); use the reduction (split_sum None or Reduction)", self.rt.device().name),
            )),
            sum => Ok(sum),
        }
    }

    /// The quantized GEMM's default for who sums its K splits at `m` rows:
    /// the kernel at one row where the device has device-scope fences, else
    /// the reduction. On an H100 (fragment order, held, `BENCHMARKS.md`,
    /// eighth session) the kernel's own sum took 16.8 µs INT4 and 18.2 µs
    /// FP4 at 1 × 11008 × 4096 against 19.2 and 20.5 with the reduction
    /// (10.5 / 11.3 against 12.8 / 13.3 at 4096²), but at 16 rows, whose
    /// last threadgroups sum sixteen times the elements, 20.3 / 22.3
    /// against 19.9 / 21.6 (15.0 / 15.6 against 13.4 / 13.9 at 4096²).
    fn qgemm_split_sum(&self, m: u32) -> SplitSum {
        if m == 1 && self.has_device_fences() {
            SplitSum::LastThreadgroup
        } else {
            SplitSum::Reduction
        }
    }

    /// Runs a kernel whose C (`c`, `elements` of `out`) may be split over K
    /// (`splits`, summed as `sum` says): unsplit it writes `c`; split, its
    /// partial tiles go to an f32 workspace (`splits · elements`), which
    /// either the kernel sums into `c` with a zeroed ticket per tile (as
    /// many as the dispatch's threadgroups over the splits) or the
    /// reduction's second dispatch does. `named` are the kernel's other
    /// arguments.
    #[allow(clippy::too_many_arguments)]
    fn launch_split(&self, key: String, build: impl FnOnce() -> Kernel, dispatch: Dispatch, named: &[(&str, Arg<'_>)], c: &Buffer, out: DType, elements: usize, splits: u32, sum: SplitSum) -> Result<(), Error> {
        let mut args = named.to_vec();
        if splits <= 1 {
            args.push(("c", Arg::from(c)));
            return self.launch(key, build, dispatch, &args);
        }
        let workspace = self.output(Scalar::F32, elements.saturating_mul(splits as usize))?;
        if sum == SplitSum::Reduction {
            args.push(("c", Arg::from(&workspace)));
            self.launch(key, build, dispatch, &args)?;
            return self.splitk_reduce(&workspace, c, out, splits, elements);
        }
        let [x, y, z] = dispatch.size;
        let count = (x as usize) * (y as usize) * (z / splits) as usize;
        let slot = (self.rt.stream(), count);
        let cached = self.pipelines.lock().tickets.remove(&slot);
        let tickets = match cached {
            Some(t) => t,
            None => self.rt.buffer_zeroed::<u32>(count)?,
        };
        args.extend([("c", Arg::from(c)), ("ws", Arg::from(&workspace)), ("tickets", Arg::from(&tickets))]);
        // A dispatch that failed may have left tickets taken: those are dropped.
        self.launch(key, build, dispatch, &args)?;
        self.pipelines.lock().tickets.insert(slot, tickets);
        Ok(())
    }

    /// The second pass of a split-K product: sums the workspace's slices
    /// into `c` (alpha 1, beta 0), four elements per thread where `elements`
    /// is a multiple of 4 (both are this library's untyped outputs, so
    /// they bind as vectors).
    fn splitk_reduce(&self, ws: &Buffer, c: &Buffer, out: DType, splits: u32, elements: usize) -> Result<(), Error> {
        let width: u8 = if elements.is_multiple_of(4) { 4 } else { 1 };
        let total = lib::to_u32("matmul", "m·n", elements / width as usize)?;
        let (ws_name, c_name) = if width == 4 { ("ws4", "c4") } else { ("ws", "c") };
        self.launch(
            format!("gemm_splitk_reduce {out} {width}"),
            || gemm::splitk_reduce(out, width),
            gemm::splitk_reduce_dispatch(total),
            &[
                (ws_name, Arg::from(ws)),
                (c_name, Arg::from(c)),
                ("mn", Arg::u32(total)),
                ("total", Arg::u32(total)),
                ("splits", Arg::u32(splits)),
                ("alpha", Arg::f32(1.0)),
                ("beta", Arg::f32(0.0)),
            ],
        )
    }

    // ----- quantized matmul ---------------------------------------------

    /// `C[M, N] = A[M, K] · dequant(B)` for 4-bit weights `w` (FP4 or INT4
    /// in seed 002's layout, or MLX's affine format) and `A` an untyped
    /// buffer of `m × K` f16 values ([`upload`]); `C` is `m × N` of `out`
    /// (f32 or f16), accumulated in f32. Weights in fragment order take
    /// `qmatmul_fragments` up to `qmatmul_fragments::DECODE_ROWS` rows (unless
    /// [`Options::gemm_tile`], [`Options::stages`] or splits summed in the
    /// kernel, [`Options::split_sum`], ask for the tensor-core GEMM) and the
    /// GEMM above. The INT4 decode kernel (M up to
    /// `QMATMUL_DECODE_ROWS`) sums each packed word's products in f16 four
    /// at a time before widening them (`qmatmul::f16_product_error`),
    /// finite for |a| ≤ 16376.
    pub fn qmatmul(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        let op = "qmatmul";
        self.check_qmatmul_inputs(a, w, m)?;
        if let Some(biases) = &w.biases {
            return self.launch_affine(a, w, biases, m, out);
        }
        if w.layout == QuantLayout::Fragments && qmatmul_takes_fragment_decode_row(m, &self.options) {
            return self.launch_fragments_decode(a, w, m, out);
        }
        if !qmatmul_takes_decode_kernel(m, &self.options) || w.layout != QuantLayout::Rows {
            return self.launch_qgemm(a, w, m, out);
        }
        let cols = match (self.options.columns_per_thread, self.options.vectorize) {
            (Some(c), _) => Some(c),
            (None, Some(false)) => Some(1),
            (None, _) => None,
        };
        // On a GPU, default to enough column tiles for two threadgroups per
        // compute unit, 16 SIMD groups per threadgroup where the columns
        // give fewer (`qmatmul::default_threads`), and K split only where
        // that still leaves units short of warps (`qmatmul::default_splits`);
        // the simulator gains nothing from any of it.
        let compute_units = self.gpu_compute_units();
        let options = qmatmul::QmatmulOptions {
            rows: self.options.rows_per_threadgroup,
            cols,
            words: self.options.unroll,
            min_tiles: 2 * compute_units,
            splits: self.options.k_splits,
            compute_units,
        };
        let threads = self.options.threads.unwrap_or_else(|| qmatmul::default_threads(w.n, m, compute_units));
        let plan = qmatmul::plan(w.format, out, m, w.n, w.k, w.group, threads, options)?;
        if plan.cols > 1 {
            let bindable = |b: &Buffer, elem: u32| b.elem().is_none() && b.len_bytes().is_multiple_of((elem * plan.cols) as usize);
            if !bindable(&w.packed, 4) || !bindable(&w.scales, 2) {
                return Err(arg_err(op, format!("{} columns per thread read the weights as vectors, but `packed` or `scales` is typed or not a multiple of the vector size; upload them untyped (QuantizedWeights::upload) or ask for 1 column per thread", plan.cols)));
            }
        }
        let c = self.output(out.scalar(), m * w.n)?;
        let a4 = self.vector_view(op, "a", a, Type::vector(Scalar::F16, 4), w.k)?;
        // The decode kernel's splits are always summed by the reduction.
        self.launch_split(
            format!("qmatmul {:?}", (plan.format, plan.out, plan.rows, plan.cols, plan.words, plan.threads, plan.splits > 1)),
            || plan.kernel(),
            plan.dispatch,
            &[
                ("a4", Arg::from(&a4)),
                ("b", Arg::from(&w.packed)),
                ("b2", Arg::from(&w.packed)),
                ("b4", Arg::from(&w.packed)),
                ("scales", Arg::from(&w.scales)),
                ("scales2", Arg::from(&w.scales)),
                ("scales4", Arg::from(&w.scales)),
                ("m", Arg::u32(plan.m)),
                ("n", Arg::u32(plan.n)),
                ("k", Arg::u32(plan.k)),
                ("group_words", Arg::u32(plan.group_words())),
            ],
            &c,
            out,
            m * w.n,
            plan.splits,
            SplitSum::Reduction,
        )?;
        Ok(c)
    }

    /// [`Ops::qmatmul`] on the tensor-core kernel whatever M: the GEMM's
    /// tiles on SIMD-group matrices, B's packed words and scales staged in
    /// threadgroup memory and each B tile decoded from them
    /// (`gemm::QgemmConfig`; at edge tiles each slice is dequantized into
    /// threadgroup memory instead), each weight rounded to f16 with its
    /// scale. The tile is `select_gemm_tile`'s for M (or
    /// [`Options::gemm_tile`]) with slices of 64 K values where they divide
    /// the group, four stages where they fit ([`Options::stages`]).
    /// `qmatmul` takes it above `qmatmul::TILED_ABOVE_ROWS` rows.
    /// It reads FP4/INT4 in seed 002's layout only: MLX's affine weights
    /// are an [`Error::Argument`] (`qmatmul` runs them at any M).
    pub fn qmatmul_tiled(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        self.check_qmatmul_inputs(a, w, m)?;
        if w.format.has_biases() {
            return Err(arg_err(
                "qmatmul_tiled",
                format!("the tensor-core kernel reads fp4 or int4 in seed 002's [K/8][N] layout, not {} ([N][K/8] with biases; K = {}, N = {}): use qmatmul", w.format, w.k, w.n),
            ));
        }
        self.launch_qgemm(a, w, m, out)
    }

    /// [`Ops::qmatmul`] on seed 002's *fused* kernel
    /// (`qgemm_fused::FusedQgemmConfig`): A's slice in threadgroup memory,
    /// B dequantized per SIMD group through one 8×8 f16 staging fragment
    /// (each weight rounded to f16, as [`Ops::qmatmul_tiled`] does). The
    /// tile is [`Options::gemm_tile`] where given, else seed 002 §9.1's for
    /// M over 4 SIMD groups; K is split as for `qmatmul_tiled`
    /// ([`Options::k_splits`], on a GPU by default where the output has few
    /// tiles). The threads are the tile's: an [`Options::threads`] that
    /// differs is an [`Error::Argument`], and so are MLX's affine weights
    /// (FP4/INT4 in seed 002's layout only). `qmatmul` never picks it by
    /// itself.
    pub fn qmatmul_fused(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        let op = "qmatmul_fused";
        self.check_qmatmul_inputs(a, w, m)?;
        if w.layout != QuantLayout::Rows {
            return Err(arg_err(op, format!("the fused kernel reads seed 002's [K/8][N] words, not the {} layout: use qmatmul", w.layout)));
        }
        if w.format.has_biases() {
            return Err(arg_err(op, format!("the fused kernel reads fp4 or int4 in seed 002's [K/8][N] layout, not {} (K = {}, N = {}): use qmatmul", w.format, w.k, w.n)));
        }
        let (mu, n, k) = (lib::to_u32(op, "m", m)?, lib::to_u32(op, "n", w.n)?, lib::to_u32(op, "k", w.k)?);
        let cfg = match self.options.gemm_tile {
            Some(tile) => qgemm_fused::FusedQgemmConfig::from_tile(w.format, out, tile),
            None => qgemm_fused::FusedQgemmConfig::for_rows(w.format, out, mu),
        };
        self.check_tile_threads(op, cfg.tile())?;
        let cfg = qgemm_fused::FusedQgemmConfig { splits: self.k_splits(cfg.splits_for(mu, n, k, self.threadgroups_wanted())), ..cfg };
        cfg.check(threadgroup_limits(self.rt.device()).max_memory_bytes)?;
        // The key names every field (the split count is built into the
        // kernel, not into its name).
        self.launch_packed(op, format!("qgemm_fused {cfg:?}"), || qgemm_fused::qgemm_fused(&cfg), cfg.dispatch(mu, n), (cfg.splits, SplitSum::Reduction), a, w, m, out)
    }

    /// `qmatmul` for MLX's affine format on checked inputs: the kernel
    /// `qmatmul_affine`, row blocks of up to 8 along y for any M.
    fn launch_affine(&self, a: &Buffer, w: &QuantizedWeights, biases: &Buffer, m: usize, out: DType) -> Result<Buffer, Error> {
        let op = "qmatmul";
        if let Some(s) = self.options.k_splits.filter(|&s| s != 1) {
            return Err(arg_err(op, format!("{s} K splits asked for, but the kernel for {} splits K over the lanes of a SIMD group only (k_splits 1 or none)", w.format)));
        }
        let words = match (self.options.unroll, self.options.vectorize) {
            (Some(u), _) => Some(u),
            (None, Some(false)) => Some(1),
            (None, _) => None,
        };
        // On a GPU, default to enough threadgroups for two per compute unit.
        let min_tiles = 2 * self.gpu_compute_units();
        let options = qmatmul_affine::AffineOptions { rows: self.options.rows_per_threadgroup, cols: self.options.columns_per_thread, words, min_tiles };
        let threads = self.options.threads.unwrap_or(qmatmul_affine::DEFAULT_THREADS);
        let plan = qmatmul_affine::plan(out, m, w.n, w.k, w.group, threads, options)?;
        if plan.words > 1 && (w.packed.elem().is_some() || !w.packed.len_bytes().is_multiple_of((4 * plan.words) as usize)) {
            return Err(arg_err(op, format!("{} packed words per load read the weights as vectors, but `packed` is typed or not a multiple of {} bytes; upload it untyped (QuantizedWeights::upload) or ask for 1 word per load", plan.words, 4 * plan.words)));
        }
        let c = self.output(out.scalar(), m * w.n)?;
        let a4 = self.vector_view(op, "a", a, Type::vector(Scalar::F16, 4), w.k)?;
        self.launch(
            format!("qmatmul_affine {:?}", (plan.out, plan.rows, plan.cols, plan.words, plan.threads)),
            || plan.kernel(),
            plan.dispatch,
            &[
                ("a4", Arg::from(&a4)),
                ("b", Arg::from(&w.packed)),
                ("b2", Arg::from(&w.packed)),
                ("b4", Arg::from(&w.packed)),
                ("scales", Arg::from(&w.scales)),
                ("biases", Arg::from(biases)),
                ("c", Arg::from(&c)),
                ("m", Arg::u32(plan.m)),
                ("n", Arg::u32(plan.n)),
                ("k", Arg::u32(plan.k)),
                ("group_shift", Arg::u32(plan.group_shift())),
            ],
        )?;
        Ok(c)
    }

    /// What both quantized matmuls require of their inputs: the format's
    /// shape rules, `a` an untyped buffer read as f16 (and options that
    /// agree), every buffer large enough, and biases exactly for MLX's
    /// affine format.
    fn check_qmatmul_inputs(&self, a: &Buffer, w: &QuantizedWeights, m: usize) -> Result<(), Error> {
        let op = "qmatmul";
        quant::check_shape(w.format, w.k, w.n, w.group)?;
        quant::check_layout(w.format, w.layout, w.k, w.n)?;
        if let Some(t) = a.elem() {
            return Err(arg_err(op, format!("`a` is a typed buffer of {t}; pass an untyped buffer of f16 (enigma_ops::upload), which the kernel reads as half4")));
        }
        if let Some(e) = self.options.elem.filter(|&e| e != Scalar::F16) {
            return Err(arg_err(op, format!("`a` is read as f16, but the options ask for {e}")));
        }
        self.need(op, "a", a, m.saturating_mul(w.k), Scalar::F16)?;
        self.need(op, "packed", &w.packed, w.k / quant::VALUES_PER_WORD * w.n, Scalar::U32)?;
        self.need(op, "scales", &w.scales, w.k / w.group * w.n, Scalar::F16)?;
        match (&w.biases, w.format.has_biases()) {
            (Some(b), true) => self.need(op, "biases", b, w.k / w.group * w.n, Scalar::F16)?,
            (None, false) => {}
            (Some(_), false) => return Err(arg_err(op, format!("{} weights have no biases, but `biases` is given", w.format))),
            (None, true) => return Err(arg_err(op, format!("{} weights need `biases` ({} f16 values: K = {}, N = {}, group {})", w.format, w.k / w.group * w.n, w.k, w.n, w.group))),
        }
        Ok(())
    }

    /// The tensor-core kernel on checked inputs (K split where the output
    /// has few tiles, then the reduction).
    fn launch_qgemm(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        let op = "qmatmul";
        let (mu, n, k) = (lib::to_u32(op, "m", m)?, lib::to_u32(op, "n", w.n)?, lib::to_u32(op, "k", w.k)?);
        let group = lib::to_u32(op, "group", w.group)?;
        let max_memory = threadgroup_limits(self.rt.device()).max_memory_bytes;
        let cfg = match self.options.gemm_tile {
            Some(tile) => {
                self.check_tile_threads(op, tile)?;
                gemm::QgemmConfig::from_tile(w.format, out, tile)
            }
            None => gemm::QgemmConfig::for_rows(w.format, out, mu).deepened_for(group, max_memory),
        };
        let cfg = cfg.in_layout(w.layout, n);
        let cfg = gemm::QgemmConfig { splits: self.k_splits(cfg.splits_for(mu, n, k, self.threadgroups_wanted())), split_sum: self.split_sum(op, self.qgemm_split_sum(mu))?, ..cfg };
        let cfg = match self.options.stages {
            Some(stages) => gemm::QgemmConfig { stages, ..cfg },
            None => {
                // The whole-tile kernel stages no dequantized slice, so
                // where the shape takes it, more stages may fit.
                let whole = gemm::QgemmConfig { stages: 2, ..cfg }.whole_tiles_for(mu, n, k);
                let planned = if whole.whole_tiles { whole.pipelined_for(self.stage_memory()) } else { cfg.pipelined_for(self.stage_memory()) };
                if planned.threadgroup_memory_bytes() <= self.stage_memory() { planned } else { cfg }
            }
        };
        let cfg = cfg.whole_tiles_for(mu, n, k);
        cfg.check(max_memory)?;
        cfg.check_group(group)?;
        // The key names every field: the split count is built into the
        // kernel, not into its name.
        self.launch_packed(op, format!("qgemm {cfg:?}"), || gemm::qgemm(&cfg), cfg.dispatch(mu, n), (cfg.splits, cfg.split_sum), a, w, m, out)
    }

    /// [`Ops::qmatmul`]'s decode row on fragment-ordered weights
    /// (`qmatmul_fragments`, up to `qmatmul_fragments::DECODE_ROWS` rows):
    /// its tile for the device's compute units, [`Options::threads`] and
    /// [`Options::k_splits`] where given, splits summed by the reduction.
    fn launch_fragments_decode(&self, a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        let min_tiles = 2 * self.gpu_compute_units();
        let plan = qmatmul_fragments::plan(w.format, out, [m, w.n, w.k, w.group], self.options.threads, self.options.k_splits, min_tiles)?;
        self.launch_packed("qmatmul", format!("{plan:?}"), || plan.kernel(), plan.dispatch, (plan.splits, SplitSum::Reduction), a, w, m, out)
    }

    /// Runs a tensor-core quantized kernel (`key` and `build` as for
    /// `launch`) on `a` (`m` rows) and `w` with `splits` K splits: C of
    /// `out`, through an f32 workspace and the reduction where split.
    #[allow(clippy::too_many_arguments)]
    fn launch_packed(&self, op: &str, key: String, build: impl FnOnce() -> Kernel, dispatch: Dispatch, (splits, sum): (u32, SplitSum), a: &Buffer, w: &QuantizedWeights, m: usize, out: DType) -> Result<Buffer, Error> {
        let (mu, n, k) = (lib::to_u32(op, "m", m)?, lib::to_u32(op, "n", w.n)?, lib::to_u32(op, "k", w.k)?);
        let c = self.output(out.scalar(), m * w.n)?;
        let a4 = self.vector_view(op, "a", a, Type::vector(Scalar::F16, 4), w.k)?;
        self.launch_split(
            key,
            build,
            dispatch,
            &[
                ("a", Arg::from(a)),
                ("a4", Arg::from(&a4)),
                ("b", Arg::from(&w.packed)),
                ("scales", Arg::from(&w.scales)),
                ("m", Arg::u32(mu)),
                ("n", Arg::u32(n)),
                ("k", Arg::u32(k)),
                ("group", Arg::u32(lib::to_u32(op, "group", w.group)?)),
            ],
            &c,
            out,
            m * w.n,
            splits,
            sum,
        )?;
        Ok(c)
    }

    // ----- attention decode ---------------------------------------------

    #[allow(clippy::too_many_arguments)]
    /// The plan of either form; the fused one takes fewer threads than the
    /// default where its state would not fit threadgroup memory (an
    /// explicit [`Options::threads`] is kept, and checked).
    fn attention_plan(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, fused: bool) -> Result<attention::AttentionPlan, Error> {
        let op = "attention_decode";
        let dtype = self.dtype_of(op, q)?;
        self.need(op, "q", q, heads.saturating_mul(d), dtype.scalar())?;
        self.need(op, "k", k, heads.saturating_mul(s_len).saturating_mul(d), dtype.scalar())?;
        self.need(op, "v", v, heads.saturating_mul(s_len).saturating_mul(d), dtype.scalar())?;
        let vec = self.vectorize(op, &[q, k, v], dtype.ty(4), d.is_multiple_of(4))?;
        let mut threads = self.threads(KernelType::Attention);
        if fused && self.options.threads.is_none() {
            threads = threads.min(attention::fused_threads_that_fit(u32::try_from(d).unwrap_or(u32::MAX), vec));
        }
        Ok(attention::plan(dtype, heads, s_len, d, vec, threads)?)
    }

    /// Attention decode in seed 000's three dispatches (scores, softmax,
    /// weighted sum): `out` is `[heads, d]` in the input's type.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32) -> Result<Buffer, Error> {
        let plan = self.attention_plan(q, k, v, heads, s_len, d, false)?;
        let scores = self.output(Scalar::F32, heads * s_len)?;
        let out = self.output(plan.dtype.scalar(), heads * d)?;
        let dims = [("s_len", Arg::u32(plan.s_len)), ("d", Arg::u32(plan.d)), ("scale", Arg::f32(scale))];
        let mut args = vec![("q", Arg::from(q)), ("q4", Arg::from(q)), ("k", Arg::from(k)), ("k4", Arg::from(k)), ("scores", Arg::from(&scores))];
        args.extend(dims);
        self.launch(format!("attention_scores {:?}", (plan.dtype, plan.vec, plan.chunks)), || plan.scores_kernel(), plan.scores, &args)?;
        self.softmax_into(&plan.softmax, &scores, &scores)?;
        let args = [("w", Arg::from(&scores)), ("v", Arg::from(v)), ("out", Arg::from(&out)), dims[0], dims[1]];
        self.launch(format!("attention_weighted_sum {:?}", plan.dtype), || plan.weighted_sum_kernel(), plan.weighted_sum, &args)?;
        Ok(out)
    }

    /// Attention decode in one dispatch, one threadgroup per head.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_decode_fused(&self, q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32) -> Result<Buffer, Error> {
        let plan = self.attention_plan(q, k, v, heads, s_len, d, true)?;
        plan.check_fused()?;
        let plan = plan.with_splits(self.attention_splits(&plan));
        let out = self.output(plan.dtype.scalar(), heads * d)?;
        let mut args = vec![
            ("q", Arg::from(q)),
            ("q4", Arg::from(q)),
            ("k", Arg::from(k)),
            ("k4", Arg::from(k)),
            ("v", Arg::from(v)),
            ("v4", Arg::from(v)),
            ("s_len", Arg::u32(plan.s_len)),
            ("d", Arg::u32(plan.d)),
            ("scale", Arg::f32(scale)),
        ];
        if plan.splits == 1 {
            args.push(("out", Arg::from(&out)));
            self.launch(fused_key(&plan), || plan.fused_kernel(), plan.fused, &args)?;
            return Ok(out);
        }
        let parts = plan.heads as usize * plan.splits as usize;
        let partial_ml = self.output(Scalar::F32, parts * 2)?;
        let partial_acc = self.output(Scalar::F32, parts * d)?;
        args.extend([("partial_ml", Arg::from(&partial_ml)), ("partial_acc", Arg::from(&partial_acc)), ("split_len", Arg::u32(plan.split_len))]);
        self.launch(fused_key(&plan), || plan.fused_kernel(), plan.fused, &args)?;
        let args = [
            ("partial_ml", Arg::from(&partial_ml)),
            ("partial_acc", Arg::from(&partial_acc)),
            ("out", Arg::from(&out)),
            ("d", Arg::u32(plan.d)),
            ("splits", Arg::u32(plan.splits)),
        ];
        self.launch(format!("attention_combine {:?}", plan.dtype), || plan.combine_kernel(), plan.combine, &args)?;
        Ok(out)
    }

    /// How many ways the fused decode splits each head's keys:
    /// [`Options::attention_splits`]; else, on a GPU, enough threadgroups
    /// for about four per compute unit, keeping at least 8 keys per SIMD
    /// group (the simulator gains nothing from splitting: 1).
    fn attention_splits(&self, plan: &attention::AttentionPlan) -> u32 {
        if let Some(s) = self.options.attention_splits {
            return s.max(1);
        }
        if self.rt.device().kind == enigma_runtime::DeviceKind::Simulator {
            return 1;
        }
        let target = 4 * self.rt.device().compute_units.max(1);
        let by_occupancy = target.div_ceil(plan.heads.max(1));
        let simdgroups = plan.fused.threads[0].div_ceil(32).max(1);
        let by_keys = (plan.s_len / (simdgroups * 8)).max(1);
        by_occupancy.min(by_keys)
    }
}

/// What determines the fused attention kernel of `plan`.
fn fused_key(plan: &attention::AttentionPlan) -> String {
    format!("attention_fused {:?}", (plan.dtype, plan.vec, plan.chunks, plan.fused.threads[0], plan.splits > 1))
}

// ----- free functions ---------------------------------------------------

macro_rules! free_fns {
    ($($(#[$doc:meta])* $name:ident / $with:ident ($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name(rt: &Runtime, $($arg: $ty),*) -> Result<Buffer, Error> {
            Ops::new(rt).$name($($arg),*)
        }
        #[doc = concat!("[`", stringify!($name), "()`] with [`Options`].")]
        #[allow(clippy::too_many_arguments)]
        pub fn $with(rt: &Runtime, $($arg: $ty,)* options: &Options) -> Result<Buffer, Error> {
            Ops::new(rt).with_options(options.clone()).$name($($arg),*)
        }
    )*};
}

free_fns! {
    /// `y = x · factor`.
    scale / scale_with(x: &Buffer, n: usize, factor: f32);
    /// `y = a + b`.
    add / add_with(a: &Buffer, b: &Buffer, n: usize);
    /// `y = a · b`.
    mul / mul_with(a: &Buffer, b: &Buffer, n: usize);
    /// `y = max(x, 0)`.
    relu / relu_with(x: &Buffer, n: usize);
    /// `y = x · sigmoid(x)`.
    silu / silu_with(x: &Buffer, n: usize);
    /// GELU, tanh form.
    gelu / gelu_with(x: &Buffer, n: usize);
    /// Sum of `n` elements (one f32).
    sum / sum_with(x: &Buffer, n: usize);
    /// Maximum of `n` elements (one f32).
    max / max_with(x: &Buffer, n: usize);
    /// Minimum of `n` elements (one f32).
    min / min_with(x: &Buffer, n: usize);
    /// `op` over each row (`rows` f32).
    reduce_rows / reduce_rows_with(op: ReduceOp, x: &Buffer, rows: usize, d: usize);
    /// Inclusive or exclusive prefix sum.
    prefix_sum / prefix_sum_with(x: &Buffer, n: usize, kind: ScanKind);
    /// Row softmax.
    softmax / softmax_with(x: &Buffer, rows: usize, d: usize);
    /// Row RMSNorm.
    rms_norm / rms_norm_with(x: &Buffer, w: &Buffer, rows: usize, d: usize, eps: f32);
    /// Row LayerNorm.
    layer_norm / layer_norm_with(x: &Buffer, w: &Buffer, b: &Buffer, rows: usize, d: usize, eps: f32);
    /// `y = W·x`.
    gemv / gemv_with(w: &Buffer, x: &Buffer, m: usize, k: usize);
    /// Attention decode, three dispatches.
    attention_decode / attention_decode_with(q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32);
    /// Attention decode, fused.
    attention_decode_fused / attention_decode_fused_with(q: &Buffer, k: &Buffer, v: &Buffer, heads: usize, s_len: usize, d: usize, scale: f32);
    /// `C = A · B`, tiled on SIMD-group matrices.
    matmul / matmul_with(a: &Buffer, b: &Buffer, m: usize, n: usize, k: usize, out: ElemType);
    /// `C = A · dequant(B)` for 4-bit weights.
    qmatmul / qmatmul_with(a: &Buffer, w: &QuantizedWeights, m: usize, out: ElemType);
}

// ----- 4-bit weights ------------------------------------------------------

/// 4-bit weights on a device in the layout of their format (see
/// [`enigma_kernels::library::quant`]): for FP4/INT4 (seed 002) `packed`
/// holds `K/8 × N` u32 words and `scales` `K/group × N` f16 values; for
/// MLX's affine format `packed` holds `N × K/8` words, `scales` and
/// `biases` `N × K/group` f16 values. All untyped (so that the kernels can
/// read them as vectors).
#[derive(Debug)]
pub struct QuantizedWeights {
    pub format: QuantFormat,
    pub k: usize,
    pub n: usize,
    pub group: usize,
    pub packed: Buffer,
    pub scales: Buffer,
    /// The f16 bias per group of MLX's affine format; `None` for FP4/INT4.
    pub biases: Option<Buffer>,
    /// How `packed` lies: the format's own layout, or (FP4, INT4) the
    /// tensor cores' fragment order ([`QuantizedWeights::upload_in`]), which
    /// only the tensor-core kernel reads, at every M.
    pub layout: QuantLayout,
}

impl QuantizedWeights {
    /// Uploads a quantized matrix of any format (its lengths checked).
    pub fn upload(rt: &Runtime, q: &QuantizedMatrix) -> Result<QuantizedWeights, Error> {
        QuantizedWeights::upload_in(rt, q, QuantLayout::Rows)
    }

    /// Uploads a quantized matrix with its words packed in `layout`
    /// ([`QuantizedMatrix::packed_in`]: fragment order needs FP4 or INT4, K a
    /// multiple of 64 and N of 16).
    pub fn upload_in(rt: &Runtime, q: &QuantizedMatrix, layout: QuantLayout) -> Result<QuantizedWeights, Error> {
        // `upload_words` checks the parts; `packed_in` before reordering.
        let reordered;
        let words: &[u32] = match layout {
            QuantLayout::Rows => &q.packed,
            _ => {
                reordered = q.packed_in(layout)?;
                &reordered
            }
        };
        QuantizedWeights::upload_words(rt, q.format, layout, [q.k, q.n, q.group], words, &q.scales, &q.biases)
    }

    /// Uploads packed words already in `layout` (as
    /// [`QuantizedMatrix::packed_in`] gives them, or a file holds them), with
    /// their scales and biases (empty unless the format has biases), for a
    /// `k × n` matrix in groups of `group`: checked (the shape, the layout's
    /// units, each part's length) but not reordered, so no host pass over
    /// the words.
    pub fn upload_words(rt: &Runtime, format: QuantFormat, layout: QuantLayout, [k, n, group]: [usize; 3], words: &[u32], scales: &[u16], biases: &[u16]) -> Result<QuantizedWeights, Error> {
        quant::check_parts(format, k, n, group, [words.len(), scales.len(), biases.len()])?;
        quant::check_layout(format, layout, k, n)?;
        let halves = |v: &[u16]| upload_bytes(rt, v.iter().flat_map(|s| s.to_le_bytes()).collect());
        let packed = upload_bytes(rt, words.iter().flat_map(|w| w.to_le_bytes()).collect())?;
        let biases = if format.has_biases() { Some(halves(biases)?) } else { None };
        Ok(QuantizedWeights { format, k, n, group, packed, scales: halves(scales)?, biases, layout })
    }
}

/// Quantizes the `k × n` row-major f32 matrix `w` to `format` with `group`
/// K values per scale (host side; see [`enigma_kernels::library::quant`]).
pub fn quantize_weights(format: QuantFormat, w: &[f32], k: usize, n: usize, group: usize) -> Result<QuantizedMatrix, Error> {
    Ok(quant::quantize(format, w, k, n, group)?)
}

/// The `k × n` row-major f32 matrix a quantized matrix stands for.
pub fn dequantize_weights(q: &QuantizedMatrix) -> Result<Vec<f32>, Error> {
    Ok(q.dequantize()?)
}

// ----- host data ----------------------------------------------------------

/// The bits of `v` in `elem` (f32, f16, bf16), little-endian.
fn encode(elem: Scalar, values: &[f32]) -> Vec<u8> {
    match elem {
        Scalar::F16 => values.iter().flat_map(|&v| f32_to_f16_bits(v).to_le_bytes()).collect(),
        Scalar::BF16 => values.iter().flat_map(|&v| f32_to_bf16_bits(v).to_le_bytes()).collect(),
        Scalar::I32 => values.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
        Scalar::U32 => values.iter().flat_map(|&v| (v as u32).to_le_bytes()).collect(),
        _ => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
    }
}

/// An untyped buffer holding `values` converted to `elem` (f32, f16, bf16,
/// i32 or u32), zero-padded to a multiple of 16 bytes so that it can be
/// bound as a vector view.
pub fn upload(rt: &Runtime, elem: Scalar, values: &[f32]) -> Result<Buffer, Error> {
    upload_bytes(rt, encode(elem, values))
}

/// An untyped buffer holding `bytes`, zero-padded to a multiple of 16 bytes
/// (so that it can be bound as a vector view).
pub fn upload_bytes(rt: &Runtime, mut bytes: Vec<u8>) -> Result<Buffer, Error> {
    bytes.resize(bytes.len().div_ceil(16) * 16, 0);
    let buf = rt.buffer_bytes(bytes.len())?;
    buf.write_bytes(0, &bytes)?;
    Ok(buf)
}

/// The first `n` elements of `buf` read as `elem`, converted to f64.
pub fn download(buf: &Buffer, elem: Scalar, n: usize) -> Result<Vec<f64>, Error> {
    let bytes = buf.read_bytes()?;
    let size = elem.size_bytes() as usize;
    if bytes.len() < n * size {
        return Err(arg_err("download", format!("buffer of {} bytes holds fewer than {n} {elem} elements", bytes.len())));
    }
    Ok(bytes[..n * size]
        .chunks_exact(size)
        .map(|c| match elem {
            Scalar::F16 => f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64,
            Scalar::BF16 => bf16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64,
            Scalar::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            Scalar::U32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            _ => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
        })
        .collect())
}

/// `values` rounded to `dtype` and back (what the kernel will read).
pub fn quantize(dtype: DType, values: &mut [f32]) {
    match dtype {
        DType::F32 => {}
        DType::F16 => values.iter_mut().for_each(|v| *v = f16_bits_to_f32(f32_to_f16_bits(*v))),
        DType::BF16 => values.iter_mut().for_each(|v| *v = bf16_bits_to_f32(f32_to_bf16_bits(*v))),
    }
}
