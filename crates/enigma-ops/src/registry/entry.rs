//! A registered operation ([`Entry`]): its shapes, the inputs and f64
//! reference a run at one shape prepares ([`Case`], [`Prepared`]), its
//! checked run and its timing loop; and the helpers every family's entries
//! are written with ([`entry`], [`input`], [`rounded`], [`size`]).

use crate::check::Tolerance;
use crate::launch::LaunchSummary;
use crate::{download, quantize, upload, CheckOutcome, Error, Ops, Options};
use enigma_ir::Scalar;
use enigma_kernels::library::DType;
use enigma_kernels::TestRng;
use enigma_runtime::{Buffer, Runtime};
use std::sync::Arc;
use std::time::Duration;

/// How long the device waits in front of each timed iteration while the
/// host queues it ([`Runtime::begin_held_batch`]): far more than one
/// operation takes to queue, so that its time is the device's own.
pub const BENCH_HOLD: Duration = Duration::from_micros(200);

/// The timings of [`Entry::bench`].
#[derive(Clone, Debug, PartialEq)]
pub struct BenchOutcome {
    pub name: String,
    pub shape: Vec<usize>,
    /// Per timed iteration: the device time of its dispatches, run back to
    /// back in a held batch ([`BENCH_HOLD`]: the host's launch latency is
    /// not in it), where the device measured every iteration, else the sum
    /// of their wall times.
    pub times: Vec<Duration>,
    /// Whether `times` are device times.
    pub device_timed: bool,
    /// Untimed iterations run first.
    pub warmup: usize,
    pub best: Duration,
    pub median: Duration,
    /// Minimum bytes moved per iteration.
    pub bytes: u64,
    /// `bytes / best`, in GB/s (10^9 bytes per second).
    pub best_gbps: f64,
    /// The dispatches of the last iteration.
    pub launches: Vec<LaunchSummary>,
    /// The last iteration's output against the f64 reference: a timing of
    /// a wrong result is worth nothing.
    pub check: CheckOutcome,
}

/// Runs an operation on a case's inputs.
type RunCase = Box<dyn Fn(&Ops<'_>) -> Result<Buffer, Error>>;

/// Inputs built for one shape: how to run the operation, and what to expect.
pub(crate) struct Case {
    pub(super) run: RunCase,
    /// Element type of the output buffer.
    pub(super) out_elem: Scalar,
    pub(super) want: Vec<f64>,
    pub(super) tol: Box<dyn Fn(usize) -> Tolerance>,
    pub(super) bytes: u64,
}

type Prepare = dyn Fn(&Runtime, &[usize], u64) -> Result<Case, Error> + Send + Sync;

/// A registered operation.
#[derive(Clone)]
pub struct Entry {
    /// `softmax_f16`, `sum_f32`, `gemv_f16`, …
    pub name: String,
    pub description: String,
    /// The element type of the inputs.
    pub elem: Scalar,
    /// What each shape dimension means (`["rows", "d"]`).
    pub shape_names: Vec<&'static str>,
    /// A shape that runs in a moment on the simulator.
    pub default_shape: Vec<usize>,
    /// The shape of the performance target (for `bench` on a GPU).
    pub bench_shape: Vec<usize>,
    /// A dimension a shape may add after [`Entry::shape_names`]' (the
    /// quantized matmuls' `group`, K values per scale; without it, the
    /// largest of 128, 64 and 32 that divides K).
    pub optional_dim: Option<&'static str>,
    pub(super) vectorize: Option<bool>,
    pub(super) cache_rows: Option<bool>,
    pub(super) prepare: Arc<Prepare>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("elem", &self.elem)
            .field("shape_names", &self.shape_names)
            .field("default_shape", &self.default_shape)
            .field("bench_shape", &self.bench_shape)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// The operations object for a run at `shape`: `options`, with the
    /// tuning cache's choice when the caller chose none of the tuned options.
    fn ops<'rt>(&self, rt: &'rt Runtime, options: &Options, shape: &[usize]) -> Ops<'rt> {
        let mut o = options.clone();
        if !crate::tuning_cache::Choice::is_set_in(&o) {
            if let Some(choice) = crate::tuning_cache::cached_choice(&rt.device().name, &self.name, shape) {
                o = choice.apply(&o);
            }
        }
        o.elem = Some(self.elem);
        o.vectorize = o.vectorize.or(self.vectorize);
        o.rows.cache = o.rows.cache.or(self.cache_rows);
        Ops::new(rt).with_options(o)
    }

    /// `shape`, or the default shape when it is empty; checked to have
    /// this entry's dimensions, each at least 1, and at most 2^32 - 1
    /// elements in all (the kernels' counts are 32-bit).
    pub(super) fn shape<'a>(&'a self, shape: &'a [usize]) -> Result<&'a [usize], Error> {
        let shape = if shape.is_empty() { &self.default_shape[..] } else { shape };
        let err = |message: String| Err(Error::Argument { op: self.name.clone(), message });
        let optional = self.optional_dim.is_some() && shape.len() == self.shape_names.len() + 1;
        if shape.len() != self.shape_names.len() && !optional {
            let extra = self.optional_dim.map(|d| format!(", then optionally {d}")).unwrap_or_default();
            return err(format!("shape {shape:?} has {} dimensions; expected {} ({}{extra})", shape.len(), self.shape_names.len(), self.shape_names.join(" x ")));
        }
        if let Some(i) = shape.iter().position(|&s| s == 0) {
            let name = self.shape_names.get(i).copied().or(self.optional_dim).unwrap_or("a dimension");
            return err(format!("`{name}` = 0 in shape {shape:?}; every dimension must be at least 1"));
        }
        if self.elements(shape) > u32::MAX as u128 {
            return err(format!("shape {shape:?} has more than 2^32 - 1 elements"));
        }
        Ok(shape)
    }

    /// Elements of the largest array of a run of `shape`: the shape's
    /// product, or for an `m × n × k` product the largest of A (`m·k`),
    /// B (`k·n`) and C (`m·n`).
    pub(super) fn elements(&self, shape: &[usize]) -> u128 {
        match (self.shape_names.as_slice(), shape) {
            (["m", "n", "k"], &[m, n, k, ..]) => {
                let (m, n, k) = (m as u128, n as u128, k as u128);
                (m * k).max(k * n).max(m * n)
            }
            (names, &[b, h, hk, sq, skv, d, ..]) if names == PREFILL_DIMS => {
                let (b, d) = (b as u128, d as u128);
                (b * h as u128 * sq as u128 * d).max(b * hk as u128 * skv as u128 * d)
            }
            _ => shape.iter().map(|&s| s as u128).product(),
        }
    }

    /// Fails with [`RuntimeError::Allocation`] when the host memory a
    /// checked run of `shape` holds at once (inputs, their f64 reference,
    /// tolerances and the downloaded result: [`HOST_BYTES_PER_ELEMENT`] per
    /// element of the shape) cannot be allocated.
    fn check_host_memory(&self, shape: &[usize]) -> Result<(), Error> {
        let elements = self.elements(shape);
        let what = format!("{}: host memory for a checked run of shape {shape:?}", self.name);
        Ok(enigma_runtime::check_host_memory(&what, elements * HOST_BYTES_PER_ELEMENT)?)
    }

    /// Runs once on random data of `shape` (empty: [`Entry::default_shape`])
    /// and checks the output against the f64 reference.
    pub fn run(&self, rt: &Runtime, shape: &[usize]) -> Result<CheckOutcome, Error> {
        self.run_with(rt, shape, &Options::default())
    }

    /// [`Entry::run`] with options (threads, sanitizer, …) and a data seed
    /// of 1.
    pub fn run_with(&self, rt: &Runtime, shape: &[usize], options: &Options) -> Result<CheckOutcome, Error> {
        let shape = self.shape(shape)?;
        self.check_host_memory(shape)?;
        let case = (self.prepare)(rt, shape, 1)?;
        let ops = self.ops(rt, options, shape);
        let out = (case.run)(&ops)?;
        let got = download(&out, case.out_elem, case.want.len())?;
        let mut outcome = CheckOutcome::compare(&self.name, shape, &got, &case.want, &case.tol);
        outcome.launches = ops.take_launches().iter().map(LaunchSummary::from_launch).collect();
        outcome.bytes = case.bytes;
        Ok(outcome)
    }

    /// Times `iters` runs (at least one) after `warmup` runs, seed 004's
    /// loop: pipelines compiled once, data prepared once; the last run's
    /// output is checked against the reference afterwards. A run's device
    /// time is the sum of its dispatches' (each timed on the device), so
    /// host work between dispatches is not in it.
    /// `progress(done, total)` is called once the data is ready (`done` = 0)
    /// and after every run, warm-up included.
    pub fn bench(
        &self,
        rt: &Runtime,
        shape: &[usize],
        options: &Options,
        warmup: usize,
        iters: usize,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<BenchOutcome, Error> {
        self.prepare(rt, shape)?.bench(options, warmup, iters, progress)
    }

    /// The inputs and the f64 reference of a run at `shape` (empty: the
    /// default shape) on `rt`, made once for several timings under
    /// different options ([`Prepared::bench`]; the autotuner's candidates).
    pub fn prepare<'e, 'rt>(&'e self, rt: &'rt Runtime, shape: &[usize]) -> Result<Prepared<'e, 'rt>, Error> {
        let shape = self.shape(shape)?.to_vec();
        self.check_host_memory(&shape)?;
        let case = (self.prepare)(rt, &shape, 1)?;
        Ok(Prepared { entry: self, rt, shape, case })
    }
}

/// One entry's inputs and reference at one shape ([`Entry::prepare`]).
pub struct Prepared<'e, 'rt> {
    entry: &'e Entry,
    rt: &'rt Runtime,
    shape: Vec<usize>,
    case: Case,
}

impl std::fmt::Debug for Prepared<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("entry", &self.entry.name).field("shape", &self.shape).finish_non_exhaustive()
    }
}

impl Prepared<'_, '_> {
    /// [`Entry::bench`] on these inputs.
    pub fn bench(&self, options: &Options, warmup: usize, iters: usize, progress: &mut dyn FnMut(usize, usize)) -> Result<BenchOutcome, Error> {
        let (entry, rt, shape, case) = (self.entry, self.rt, &self.shape[..], &self.case);
        let ops = entry.ops(rt, options, shape);
        let iters = iters.max(1);
        let total = warmup + iters;
        progress(0, total);
        for i in 0..warmup {
            (case.run)(&ops)?;
            progress(i + 1, total);
        }
        ops.take_launches();
        let mut device_times = vec![];
        let mut wall_times = vec![];
        let mut launches = vec![];
        let mut out = None;
        for i in 0..iters {
            rt.begin_held_batch(BENCH_HOLD)?;
            let run = (case.run)(&ops);
            // The batch ends whether or not the iteration failed.
            let batch = rt.end_batch();
            out = Some(run?);
            launches = ops.take_launches();
            device_times.push(batch?);
            wall_times.push(launches.iter().map(|l| l.report.wall_time).sum::<Duration>());
            progress(warmup + i + 1, total);
        }
        // Device times only when every dispatch of every iteration has one.
        let device: Option<Vec<Duration>> = device_times.into_iter().collect();
        let device_timed = device.is_some();
        let times = device.unwrap_or(wall_times);
        let mut sorted = times.clone();
        sorted.sort();
        let best = sorted.first().copied().unwrap_or_default();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
        let best_gbps = if best.is_zero() { 0.0 } else { case.bytes as f64 / best.as_secs_f64() / 1e9 };
        let out = out.expect("at least one timed iteration");
        let got = download(&out, case.out_elem, case.want.len())?;
        let check = CheckOutcome::compare(&entry.name, shape, &got, &case.want, &case.tol);
        Ok(BenchOutcome {
            name: entry.name.clone(),
            shape: shape.to_vec(),
            times,
            device_timed,
            warmup,
            best,
            median,
            bytes: case.bytes,
            best_gbps,
            launches: launches.iter().map(LaunchSummary::from_launch).collect(),
            check,
        })
    }
}

/// Host bytes a checked run holds per element of its shape: the f32 inputs
/// (4), the f64 reference (8), its tolerances (16), the f64 result (8) and
/// room for a second input or a quantized copy (12).
const HOST_BYTES_PER_ELEMENT: u128 = 48;

/// The dimensions of an attention prefill entry's shape.
pub(super) const PREFILL_DIMS: [&str; 6] = ["batch", "heads", "kv_heads", "s_q", "s_kv", "d"];

pub(super) fn entry(
    name: String,
    description: String,
    elem: Scalar,
    shape_names: &[&'static str],
    default_shape: &[usize],
    bench_shape: &[usize],
    prepare: impl Fn(&Runtime, &[usize], u64) -> Result<Case, Error> + Send + Sync + 'static,
) -> Entry {
    Entry {
        name,
        description,
        elem,
        shape_names: shape_names.to_vec(),
        default_shape: default_shape.to_vec(),
        bench_shape: bench_shape.to_vec(),
        optional_dim: None,
        vectorize: None,
        cache_rows: None,
        prepare: Arc::new(prepare),
    }
}

/// Random inputs of `dtype`: the f32 values the kernel will see, and the
/// untyped buffer holding them.
pub(super) fn input(rt: &Runtime, dtype: DType, rng: &mut TestRng, n: usize, lo: f32, hi: f32) -> Result<(Vec<f32>, Buffer), Error> {
    let mut v = rng.vec(n, lo, hi);
    quantize(dtype, &mut v);
    let buf = upload(rt, dtype.scalar(), &v)?;
    Ok((v, buf))
}

/// The tolerance of a result computed in f32 and rounded once to `dtype`
/// (relatively, or absolutely where it lands among the subnormals).
pub(super) fn rounded(dtype: DType, abs: f64, rel_f32: f64) -> Tolerance {
    Tolerance::new(abs + dtype.underflow_error() * 1.01, rel_f32 + dtype.unit_roundoff() * 1.01)
}

/// Bytes of one element of `dtype`.
pub(super) fn size(dtype: DType) -> u64 {
    dtype.size_bytes() as u64
}
