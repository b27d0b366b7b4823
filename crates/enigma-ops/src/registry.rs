//! The registry of library operations, for `enigma run <name>` (one run on
//! random data, checked against the f64 reference) and `enigma bench <name>`
//! (a timing loop).
//!
//! ```
//! use enigma_runtime::{Device, Runtime};
//! let rt = Runtime::new(Device::Sim).unwrap();
//! let entry = enigma_ops::registry().into_iter().find(|e| e.name == "softmax_f16").unwrap();
//! assert_eq!(entry.shape_names, ["rows", "d"]);
//! let outcome = entry.run(&rt, &[3, 100]).unwrap();
//! assert!(outcome.passed, "{outcome}");
//! ```

use crate::check::Tolerance;
use enigma_kernels::TestRng;
use crate::{download, quantize, upload, CheckOutcome, Error, Mask, Ops, Options, PrefillShape, QuantizedWeights};
use enigma_ir::{QuantLayout, Scalar};
use enigma_kernels::library::quant::{self, Format};
use enigma_kernels::library::{attention, attention_prefill, elementwise, gemm, gemv, norm, qmatmul, reduce, scan, softmax, DType, ReduceOp};
use enigma_kernels::library::elementwise::Elementwise;
use enigma_kernels::library::scan::ScanKind;
use enigma_runtime::{Buffer, DeviceKind, Runtime};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

mod attention_entries;
mod rows;
use self::attention_entries::{attention_batch_entry, attention_entry, attention_prefill_entry, PREFILL_DIMS};
use self::rows::{elementwise_entry, norm_entry, reduce_entry, rows_entry, scan_entry, softmax_entry};

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
    pub ir: enigma_ir::Kernel,
}

impl LaunchSummary {
    fn from_launch(l: &crate::Launch) -> LaunchSummary {
        LaunchSummary {
            kernel: l.kernel.clone(),
            mode: match l.dispatch.mode {
                enigma_kernels::library::DispatchMode::Threads => "threads",
                enigma_kernels::library::DispatchMode::Threadgroups => "threadgroups",
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
    run: RunCase,
    /// Element type of the output buffer.
    out_elem: Scalar,
    want: Vec<f64>,
    tol: Box<dyn Fn(usize) -> Tolerance>,
    bytes: u64,
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
    vectorize: Option<bool>,
    cache_rows: Option<bool>,
    prepare: Arc<Prepare>,
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
    fn shape<'a>(&'a self, shape: &'a [usize]) -> Result<&'a [usize], Error> {
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
    fn elements(&self, shape: &[usize]) -> u128 {
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

/// Parses `8192x8192` (or `8192,8192`) into a shape.
pub fn parse_shape(text: &str) -> Result<Vec<usize>, Error> {
    text.split(['x', 'X', ',', '×'])
        .map(|p| {
            p.trim().replace('_', "").parse::<usize>().map_err(|_| Error::Argument { op: "shape".into(), message: format!("`{text}` is not a shape like 8192x8192") })
        })
        .collect()
}

fn entry(
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
fn input(rt: &Runtime, dtype: DType, rng: &mut TestRng, n: usize, lo: f32, hi: f32) -> Result<(Vec<f32>, Buffer), Error> {
    let mut v = rng.vec(n, lo, hi);
    quantize(dtype, &mut v);
    let buf = upload(rt, dtype.scalar(), &v)?;
    Ok((v, buf))
}

/// The tolerance of a result computed in f32 and rounded once to `dtype`
/// (relatively, or absolutely where it lands among the subnormals).
fn rounded(dtype: DType, abs: f64, rel_f32: f64) -> Tolerance {
    Tolerance::new(abs + dtype.underflow_error() * 1.01, rel_f32 + dtype.unit_roundoff() * 1.01)
}

fn size(dtype: DType) -> u64 {
    dtype.size_bytes() as u64
}

/// Every registered operation.
pub fn registry() -> Vec<Entry> {
    let mut out = vec![];
    for dtype in DType::ALL {
        for op in Elementwise::ALL {
            out.push(elementwise_entry(op, dtype, false));
        }
        out.push(elementwise_entry(Elementwise::Scale, dtype, true));
    }
    for dtype in DType::ALL {
        for op in ReduceOp::ALL {
            out.push(reduce_entry(op, dtype));
        }
    }
    for dtype in DType::ALL {
        for op in ReduceOp::ALL {
            out.push(rows_entry(op, dtype));
        }
    }
    for elem in scan::SCAN_SCALARS {
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            out.push(scan_entry(elem, kind));
        }
    }
    for dtype in DType::ALL {
        out.push(softmax_entry(dtype, None));
    }
    out.push(softmax_entry(DType::F32, Some(false)));
    for dtype in DType::ALL {
        out.push(norm_entry(dtype, false));
        out.push(norm_entry(dtype, true));
    }
    for dtype in DType::ALL {
        out.push(gemv_entry(dtype));
    }
    for dtype in DType::ALL {
        out.push(attention_entry(dtype, false));
        out.push(attention_entry(dtype, true));
        out.push(attention_batch_entry(dtype, false));
        out.push(attention_batch_entry(dtype, true));
    }
    for dtype in [DType::F16, DType::BF16] {
        out.push(attention_prefill_entry(dtype, Mask::None));
        out.push(attention_prefill_entry(dtype, Mask::TopLeft));
    }
    for format in Format::ALL {
        out.push(qmatmul_entry(format, QmatmulPath::Auto));
    }
    for format in [Format::Fp4, Format::Int4] {
        out.push(qmatmul_entry(format, QmatmulPath::Fused));
        out.push(qmatmul_entry(format, QmatmulPath::Fragments));
    }
    for dtype in DType::ALL {
        out.push(matmul_entry(dtype));
    }
    out
}

fn matmul_entry(dtype: DType) -> Entry {
    let kernel = match dtype {
        DType::F32 => "off Metal a SIMT kernel (128×128 tiles or fewer rows for small M, 8×8 outputs per thread) unless a tile is given or tuned, else SIMD-group matrices",
        _ => "on SIMD-group matrices",
    };
    let description = format!("C = A·B, A [m, k] and B [k, n] in {dtype}, C f32, f32 accumulation {kernel} (the tile per shape: gemm::select_tile, or the tuned one)");
    entry(format!("matmul_{dtype}"), description, dtype.scalar(), &["m", "n", "k"], &[100, 70, 65], &[4096, 4096, 4096], move |rt, shape, seed| {
        let (m, n, k) = (shape[0], shape[1], shape[2]);
        let mut rng = TestRng::new(seed);
        let (a, ab) = input(rt, dtype, &mut rng, m * k, -1.0, 1.0)?;
        let (b, bb) = input(rt, dtype, &mut rng, k * n, -1.0, 1.0)?;
        let want = matmul_reference(dtype, &a, &b, m, n, k);
        // f32 sums of k products of values in [-1, 1).
        let tol = Tolerance::new(enigma_kernels::sum_bound(k as f64, k), 0.0);
        Ok(Case {
            run: Box::new(move |ops| ops.matmul(&ab, &bb, m, n, k, DType::F32)),
            out_elem: Scalar::F32,
            want,
            tol: Box::new(move |_| tol),
            bytes: ((m * k + k * n) as u64) * size(dtype) + (m * n) as u64 * 4,
        })
    })
}

/// `A·B` in f64 by [`gemm::reference`], with B transposed first (so that
/// both operands are read along K, not B with a stride of `n`) and the rows
/// of C split over the host's cores: the reference of the GPU shapes
/// (4096³ and up) is the bulk of a checked run's host time, and the
/// autotuner's.
fn matmul_reference(dtype: DType, a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let a: Vec<f64> = a.iter().map(|&x| x as f64).collect();
    let mut bt = vec![0.0; k * n];
    for (p, row) in b.chunks(n).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            bt[j * k + p] = v as f64;
        }
    }
    let cfg = gemm::GemmConfig { trans_b: true, ..gemm::GemmConfig::new(dtype, DType::F32) };
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let rows = m.div_ceil(cores).max(1);
    let mut out = vec![0.0; m * n];
    let (cfg, bt) = (&cfg, &bt[..]);
    std::thread::scope(|s| {
        for (c, a) in out.chunks_mut(rows * n).zip(a.chunks(rows * k)) {
            s.spawn(move || c.copy_from_slice(&gemm::reference(cfg, a, bt, &[], a.len() / k, n, k, 1, 1.0, 0.0)));
        }
    });
    out
}

fn gemv_entry(dtype: DType) -> Entry {
    let description = format!("y = W·x, W [m, k] in {dtype}, x and y f32, f32 accumulation");
    entry(format!("gemv_{dtype}"), description, dtype.scalar(), &["m", "k"], &[300, 1000], &[11008, 4096], move |rt, shape, seed| {
        let (m, k) = (shape[0], shape[1]);
        let mut rng = TestRng::new(seed);
        let (w, wb) = input(rt, dtype, &mut rng, m * k, -1.0, 1.0)?;
        let (x, xb) = input(rt, DType::F32, &mut rng, k, -1.0, 1.0)?;
        let want = gemv::reference(&w, &x, m, k);
        let tols: Vec<Tolerance> = w
            .chunks(k)
            .map(|row| {
                let abs: f64 = row.iter().zip(&x).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
                Tolerance::new(enigma_kernels::sum_bound(abs, k), 0.0)
            })
            .collect();
        Ok(Case {
            run: Box::new(move |ops| ops.gemv(&wb, &xb, m, k)),
            out_elem: Scalar::F32,
            want,
            tol: Box::new(move |i| tols[i]),
            bytes: (m * k) as u64 * size(dtype) + (k + m) as u64 * 4,
        })
    })
}

/// The group size the registry quantizes with: the largest of 128, 64, 32
/// that divides `k`.
pub(crate) fn registry_group(name: &str, k: usize) -> Result<usize, Error> {
    quant::GROUPS.iter().rev().copied().find(|g| k.is_multiple_of(*g)).ok_or_else(|| Error::Argument {
        op: name.to_string(),
        message: format!("k = {k} is not a multiple of 32 (the smallest quantization group)"),
    })
}

/// Which quantized matmul a registry entry runs.
#[derive(Clone, Copy, PartialEq)]
enum QmatmulPath {
    /// `Ops::qmatmul` on the format's own layout.
    Auto,
    /// `Ops::qmatmul_fused` (seed 002's fused kernel).
    Fused,
    /// `Ops::qmatmul` on weights in fragment order (`qmatmul_fragments` up to
    /// its rows, the tensor-core kernel above).
    Fragments,
}

/// `qmatmul_{format}` (`Ops::qmatmul`), `qmatmul_fused_{format}`
/// (`Ops::qmatmul_fused`, seed 002's fused kernel) or
/// `qmatmul_fragments_{format}` (`Ops::qmatmul` on fragment-ordered weights).
fn qmatmul_entry(format: Format, path: QmatmulPath) -> Entry {
    let fused = path == QmatmulPath::Fused;
    let name = match path {
        QmatmulPath::Auto => format!("qmatmul_{format}"),
        QmatmulPath::Fused => format!("qmatmul_fused_{format}"),
        QmatmulPath::Fragments => format!("qmatmul_fragments_{format}"),
    };
    let layout = match (format.has_biases(), path) {
        (true, _) => "MLX's [n][k/8] layout with f16 scales and biases",
        (false, QmatmulPath::Fragments) => "the tensor cores' fragment order (k a multiple of 64, n of 16) with f16 scales",
        (false, _) => "seed 002's [k/8][n] layout with f16 scales",
    };
    let kernel = match path {
        QmatmulPath::Fused => ", seed 002's fused kernel (B dequantized per SIMD group through an 8×8 fragment)",
        QmatmulPath::Fragments => ", the decode row's tensor-core kernel up to 8 rows and the tensor-core GEMM above",
        QmatmulPath::Auto => "",
    };
    let default_shape: &[usize] = if path == QmatmulPath::Fragments { &[3, 96, 256] } else { &[3, 100, 256] };
    let quant_layout = if path == QmatmulPath::Fragments { QuantLayout::Fragments } else { QuantLayout::Rows };
    let description = format!(
        "C[m, n] = A[m, k] · dequant(B), A f16, B {format} in {layout} per group of 128 (64 or 32 when k needs), C f16, f32 accumulation{kernel}; on a GPU each run reads the next of 200 MB of weight copies"
    );
    // A shape may add the group after M, N and K (`enigma run … --group 64`).
    Entry {
        optional_dim: Some("group"),
        ..entry(name.clone(), description, Scalar::F16, &["m", "n", "k"], default_shape, &[1, 11008, 4096], move |rt, shape, seed| {
            let (m, n, k) = (shape[0], shape[1], shape[2]);
            let group = match shape.get(3) {
                Some(&group) => group,
                None => registry_group(&name, k)?,
            };
            let mut rng = TestRng::new(seed);
            let (a, ab) = input(rt, DType::F16, &mut rng, m * k, -1.0, 1.0)?;
            let q = quant::quantize(format, &rng.vec(k * n, -1.0, 1.0), k, n, group)?;
            let w = q.dequantize()?;
            // On a GPU, copies of the weights spanning four times a 50 MB L2,
            // one per run in turn, so that timed runs read them from DRAM as a
            // decode step does (one copy would stay in L2 between runs).
            let weight_bytes = k * n / 2 + k / group * n * 2 * if format.has_biases() { 2 } else { 1 };
            let copies = if rt.device().kind == DeviceKind::Simulator { 1 } else { (200usize << 20).div_ceil(weight_bytes).clamp(1, 64) };
            let weights = (0..copies).map(|_| QuantizedWeights::upload_in(rt, &q, quant_layout)).collect::<Result<Vec<_>, Error>>()?;
            let next = Cell::new(0usize);
            let want = qmatmul::reference(&a, &w, m, n, k);
            // f32 sums of k products (each exact in f32: an f16 times a
            // 4-bit value times an f16 scale), then one rounding to f16. With
            // many rows the tensor-core kernel stages each dequantized weight
            // in f16: one more rounding per product. MLX's affine kernel sums
            // scale · code · a and bias · a apart: their magnitudes bound it.
            // The decode kernel (M up to DECODE_ROWS) sums INT4 products in
            // f16 four at a time (`qmatmul::f16_product_error`).
            let tensor_cores = fused || path == QmatmulPath::Fragments || (m > qmatmul::DECODE_ROWS as usize && !format.has_biases());
            let staging = if tensor_cores {
                DType::F16.unit_roundoff()
            } else {
                qmatmul::f16_product_error(format)
            };
            let tols: Vec<Tolerance> = q.abs_products(&a, m).into_iter().map(|abs| rounded(DType::F16, enigma_kernels::sum_bound(abs, k) + abs * staging, 0.0)).collect();
            let bytes = (m * k * 2 + weight_bytes + m * n * 2) as u64;
            Ok(Case {
                run: Box::new(move |ops| {
                    let i = next.get();
                    next.set(i + 1);
                    let w = &weights[i % weights.len()];
                    if fused {
                        ops.qmatmul_fused(&ab, w, m, DType::F16)
                    } else {
                        ops.qmatmul(&ab, w, m, DType::F16)
                    }
                }),
                out_elem: Scalar::F16,
                want,
                tol: Box::new(move |i| tols[i]),
                bytes,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_shapes_parse() {
        let reg = registry();
        let mut names = std::collections::HashSet::new();
        for e in &reg {
            assert!(names.insert(e.name.clone()), "duplicate {}", e.name);
            assert_eq!(e.default_shape.len(), e.shape_names.len(), "{}", e.name);
            assert_eq!(e.bench_shape.len(), e.shape_names.len(), "{}", e.name);
        }
        assert_eq!(parse_shape("8192x8192").unwrap(), vec![8192, 8192]);
        assert_eq!(parse_shape("32,2048,128").unwrap(), vec![32, 2048, 128]);
        assert!(parse_shape("8192xx").is_err());
    }

    /// A product's shape counts its largest matrix, not m·n·k: 4096³ is
    /// 2^24 elements per matrix; 70000 × 70000 outputs are too many.
    #[test]
    fn a_product_shape_counts_its_largest_matrix() {
        let reg = registry();
        let matmul = reg.iter().find(|e| e.name == "matmul_f16").unwrap();
        assert_eq!(matmul.shape(&[4096, 4096, 4096]).unwrap(), &[4096, 4096, 4096]);
        assert_eq!(matmul.elements(&[16, 11008, 4096]), 11008 * 4096);
        assert!(matmul.shape(&[70000, 70000, 2]).unwrap_err().to_string().contains("more than 2^32 - 1 elements"));
        let softmax = reg.iter().find(|e| e.name == "softmax_f32").unwrap();
        assert_eq!(softmax.elements(&[3, 5]), 15);
    }

    #[test]
    fn the_matmul_reference_is_the_gemm_reference_whatever_the_split() {
        for (m, n, k) in [(1, 1, 1), (37, 5, 13), (3, 40, 7), (130, 9, 2)] {
            let a = enigma_kernels::test_data(m * k, 1);
            let b = enigma_kernels::test_data(k * n, 2);
            let f = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<f64>>();
            let direct = gemm::reference(&gemm::GemmConfig::new(DType::F32, DType::F32), &f(&a), &f(&b), &[], m, n, k, 1, 1.0, 0.0);
            assert_eq!(matmul_reference(DType::F32, &a, &b, m, n, k), direct, "{m}x{n}x{k}");
        }
    }
}
