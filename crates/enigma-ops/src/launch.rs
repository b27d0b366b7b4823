//! [`Ops`]: the operations over one runtime, their options, the pipeline
//! cache shared by every call, the launch of one kernel (and its summary in
//! a checked or timed run, [`LaunchSummary`]) and the checks every
//! operation makes of its buffers.

use crate::{arg_err, default_threads, Error, KernelType, Options};
use enigma_ir::{Kernel, Scalar, Type};
use enigma_kernels::library::args::{Bound, KernelArgs};
use enigma_kernels::library::{self as lib, DType, Dispatch};
use enigma_runtime::{Arg, Buffer, DispatchReport, Pipeline, Runtime};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one threadgroup may use on `device`: the limits GEMM tiles and
/// tuned threadgroup sizes are checked against.
pub fn threadgroup_limits(device: &enigma_runtime::DeviceInfo) -> crate::ThreadgroupLimits {
    lib::select::limits(device)
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

/// One dispatch of a checked or timed run.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchSummary {
    pub kernel: String,
    /// `"threadgroups"` or `"threads"`.
    pub mode: &'static str,
    pub size: [u32; 3],
    pub threads: [u32; 3],
    /// Time on the device (GPU backends); `None` on the simulator.
    pub device_time: Option<Duration>,
    pub wall_time: Duration,
    /// Sanitizer findings the dispatch reported without failing
    /// (warnings), as text.
    pub findings: Vec<String>,
    /// The kernel dispatched, as built for this run (`enigma emit
    /// <entry>` prints it).
    pub ir: Kernel,
}

impl LaunchSummary {
    pub(crate) fn from_launch(l: &Launch) -> LaunchSummary {
        LaunchSummary {
            kernel: l.kernel.clone(),
            mode: match l.dispatch.mode {
                lib::DispatchMode::Threads => "threads",
                lib::DispatchMode::Threadgroups => "threadgroups",
            },
            size: l.dispatch.size,
            threads: l.dispatch.threads,
            device_time: l.report.device_time,
            wall_time: l.report.wall_time,
            findings: l.report.findings.iter().map(|f| f.to_string()).collect(),
            ir: l.pipeline.kernel().clone(),
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
pub(crate) struct CachedPipelines {
    by_name: HashMap<String, Pipeline>,
    by_key: HashMap<String, Pipeline>,
    /// Zeroed tickets for kernels that sum their K splits
    /// (`SplitSum::LastThreadgroup`), by the runtime's stream and the
    /// count: each such dispatch leaves them at zero. A call takes its
    /// buffer out while it runs, so calls from two threads never share one.
    pub(crate) tickets: HashMap<(Option<u64>, usize), Buffer>,
}

impl PipelineCache {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, CachedPipelines> {
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
    pub(crate) rt: &'rt Runtime,
    pub(crate) options: Options,
    pub(crate) pipelines: PipelineCache,
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

    /// Runs `f` on the same runtime, options and pipelines with f32 as the
    /// element type of untyped buffers (for steps on this crate's f32
    /// outputs), its dispatches logged here.
    pub(crate) fn with_f32<T>(&self, f: impl FnOnce(&Ops<'rt>) -> Result<T, Error>) -> Result<T, Error> {
        let sub = Ops { rt: self.rt, options: Options { elem: Some(Scalar::F32), ..self.options.clone() }, pipelines: self.pipelines.clone(), launches: RefCell::default() };
        let out = f(&sub);
        self.launches.borrow_mut().extend(sub.take_launches());
        out
    }

    /// The threadgroup size for a kernel type: [`Options::threads`], else
    /// the default of seed 004's table.
    pub(crate) fn threads(&self, kind: KernelType) -> u32 {
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

    /// Dispatches the kernel `build` makes, its parameters bound from its
    /// family's arguments `args` ([`KernelArgs::bind`]). `key` names the
    /// kernel by what determines it (the builder and its arguments, in
    /// their `Debug` form), so a repeated launch finds its pipeline without
    /// building the kernel again.
    pub(crate) fn launch<'b>(&self, key: String, build: impl FnOnce() -> Kernel, dispatch: Dispatch, args: &impl KernelArgs<'b, Buffer>) -> Result<(), Error> {
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
        let args: Vec<Arg<'_>> = args
            .bind(kernel)
            .map_err(|e| arg_err(&kernel.name, e.to_string()))?
            .into_iter()
            .map(|a| match a {
                Bound::Buffer(b) => Arg::from(b),
                Bound::Value(v) => Arg::Value(v),
            })
            .collect();
        let name = kernel.name.clone();
        let options = enigma_runtime::Options { sanitize: self.options.sanitize, ..Default::default() };
        let report = self.rt.dispatch(&pipeline, &args, dispatch.mode, dispatch.size, dispatch.threads, &options)?;
        self.launches.borrow_mut().push(Launch { kernel: name, dispatch, report, pipeline });
        Ok(())
    }

    // ----- buffers and types -------------------------------------------

    pub(crate) fn elem_of(&self, op: &str, buf: &Buffer) -> Result<Scalar, Error> {
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

    pub(crate) fn dtype_of(&self, op: &str, buf: &Buffer) -> Result<DType, Error> {
        let s = self.elem_of(op, buf)?;
        DType::from_scalar(s).ok_or_else(|| arg_err(op, format!("element type {s} is not f32, f16 or bf16")))
    }

    pub(crate) fn need(&self, op: &str, what: &str, buf: &Buffer, elems: usize, elem: Scalar) -> Result<(), Error> {
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
    pub(crate) fn vectorize(&self, op: &str, bufs: &[&Buffer], vector: Type, shape_ok: bool) -> Result<u8, Error> {
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
    pub(crate) fn vector_view(&self, op: &str, what: &str, buf: &Buffer, vector: Type, row_len: usize) -> Result<Buffer, Error> {
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
    pub(crate) fn output(&self, elem: Scalar, elems: usize) -> Result<Buffer, Error> {
        Ok(self.rt.buffer_uninit(elems * elem.size_bytes() as usize)?)
    }

    /// The output of a flat operation: `elems` elements of `elem`, padded
    /// to whole 4-element vectors when the vector kernel (`vec = 4`) writes
    /// it (which writes the padding too).
    pub(crate) fn flat_output(&self, elem: Scalar, elems: usize, vec: u8) -> Result<Buffer, Error> {
        let size = elem.size_bytes() as usize;
        let elems = if vec == 4 { elems.div_ceil(4) * 4 } else { elems };
        Ok(self.rt.buffer_uninit(elems * size)?)
    }
}
