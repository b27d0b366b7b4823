//! The examples and kernels the CLI runs, set up once for every subcommand
//! that runs them: `enigma run` executes an example and judges it against its
//! CPU reference; `enigma check` executes the same dispatches under the
//! simulator's sanitizer. A [`Session`] carries the runtime, the dispatch
//! options and the sanitizer findings collected so far.

use enigma_ir::Kernel;
use enigma_kernels::{two_pass_sum, dispatch_patterns};
use enigma_runtime::{Arg, DispatchReport, Finding, DispatchMode, Options, Pipeline, Runtime, RuntimeError};
use enigma_testing::corpus::{self, Launch};
use enigma_testing::harness;

/// The examples, in the order `all` runs them.
pub const EXAMPLES: [&str; 6] = ["reduce", "scale", "row_sum", "prefix_sum", "stencil", "gemm"];

/// The outcome of one example.
#[derive(serde::Serialize, Debug)]
pub struct Outcome {
    pub example: &'static str,
    pub device: String,
    pub n: u64,
    pub result: f64,
    pub reference: f64,
    pub abs_error: f64,
    pub rel_error: f64,
    pub tolerance: f64,
    pub ok: bool,
}

/// Dispatches on one runtime with one set of options; sanitizer findings
/// are collected rather than returned as errors, so every dispatch of an
/// example runs and is checked.
#[derive(Debug)]
pub struct Session<'a> {
    pub rt: &'a Runtime,
    pub options: Options,
    pub findings: Vec<Finding>,
}

impl<'a> Session<'a> {
    pub fn new(rt: &'a Runtime, options: Options) -> Session<'a> {
        Session { rt, options, findings: vec![] }
    }

    /// One dispatch; its findings (errors and warnings) join `findings`.
    pub fn dispatch(&mut self, mode: DispatchMode, pipeline: &Pipeline, args: &[Arg<'_>], size: [u32; 3], tg: [u32; 3]) -> anyhow::Result<()> {
        self.collect(self.rt.dispatch(pipeline, args, mode, size, tg, &self.options))
    }

    /// Validates and compiles `kernel`, makes the buffers of `launch` and
    /// dispatches it.
    pub fn launch(&mut self, kernel: &Kernel, launch: &Launch) -> anyhow::Result<()> {
        self.collect(harness::dispatch(self.rt, kernel, launch, &self.options))
    }

    fn collect(&mut self, outcome: Result<DispatchReport, RuntimeError>) -> anyhow::Result<()> {
        self.findings.extend(harness::findings(outcome)?);
        Ok(())
    }
}

/// The kernels example `name` dispatches, in order.
pub fn example_kernels(name: &str) -> Vec<Kernel> {
    match name {
        "reduce" => vec![two_pass_sum::reduce_threadgroup(), two_pass_sum::reduce_final()],
        "scale" => vec![dispatch_patterns::scale()],
        "row_sum" => vec![dispatch_patterns::row_sum()],
        "prefix_sum" => vec![dispatch_patterns::prefix_sum()],
        "stencil" => vec![dispatch_patterns::shuffle_stencil()],
        "gemm" => vec![dispatch_patterns::gemm_tiled()],
        _ => vec![],
    }
}

/// The library kernel called `name` (a function of `seed000` or `reduce`)
/// with the dispatch it is checked with.
pub fn library_case(name: &str) -> Option<corpus::Case> {
    corpus::library().into_iter().find(|c| c.name == name)
}


fn outcome(rt: &Runtime, example: &'static str, n: u64, result: f64, reference: f64, tolerance: f64) -> Outcome {
    let abs_error = (result - reference).abs();
    Outcome {
        example,
        device: format!("{}: {}", rt.device().kind.name(), rt.device().name),
        n,
        result,
        reference,
        abs_error,
        rel_error: if reference != 0.0 { abs_error / reference.abs() } else { abs_error },
        tolerance,
        ok: abs_error <= tolerance,
    }
}

/// The largest elementwise error of `got` against `want`, and a summary value.
fn max_error(got: &[f32], want: &[f64]) -> (f64, f64, f64) {
    let err = got.iter().zip(want).map(|(g, w)| (*g as f64 - w).abs()).fold(0.0, f64::max);
    let checksum_got: f64 = got.iter().map(|&g| g as f64).sum();
    let checksum_want: f64 = want.iter().sum();
    (err, checksum_got, checksum_want)
}

/// Runs example `name` over `n` elements in `s` and judges it against its
/// CPU reference.
pub fn run_example(s: &mut Session<'_>, name: &'static str, n: u32) -> anyhow::Result<Outcome> {
    let rt = s.rt;
    // The inputs, their device copies, the results and the f64 references
    // together: at most 32 bytes per element.
    enigma_runtime::check_host_memory(&format!("host memory for example `{name}` at --n {n}"), n as u128 * 32)?;
    Ok(match name {
        "reduce" => {
            let a = enigma_kernels::test_data(n as usize, 1);
            let groups = two_pass_sum::pass1_threadgroups(n);
            let input = rt.buffer_from(&a)?;
            let partial = rt.buffer_zeroed::<f32>(groups as usize)?;
            let result = rt.buffer_zeroed::<f32>(1)?;
            let p1 = rt.pipeline(&two_pass_sum::reduce_threadgroup())?;
            let p2 = rt.pipeline(&two_pass_sum::reduce_final())?;
            s.dispatch(DispatchMode::Threads, &p1, &[Arg::from(&input), Arg::from(&partial)], [n, 1, 1], [two_pass_sum::PASS1_THREADS, 1, 1])?;
            let pass2 = [two_pass_sum::PASS2_THREADS, 1, 1];
            s.dispatch(DispatchMode::Threads, &p2, &[Arg::from(&partial), Arg::from(&result), Arg::u32(groups)], pass2, pass2)?;
            let got = result.to_vec::<f32>()?[0] as f64;
            outcome(rt, name, n as u64, got, two_pass_sum::reference_sum(&a), enigma_kernels::sum_tolerance(&a))
        }
        "scale" => {
            // f16 data: the reference rounds like the kernel (f32 multiply, one rounding to half).
            use enigma_ir::Type;
            let a = enigma_kernels::test_data(n as usize, 2);
            let halves: Vec<u16> = a.iter().map(|&x| f32_to_f16(x)).collect();
            let buf = rt.buffer_from_bytes(Type::F16, &halves.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<_>>())?;
            let p = rt.pipeline(&dispatch_patterns::scale())?;
            s.dispatch(DispatchMode::Threads, &p, &[Arg::from(&buf), Arg::f32(0.5)], [n, 1, 1], [256, 1, 1])?;
            let bytes = buf.read_bytes()?;
            let got: Vec<f32> = bytes.chunks_exact(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect();
            let want: Vec<f64> = halves.iter().map(|&h| f16_to_f32(f32_to_f16(f16_to_f32(h) * 0.5)) as f64).collect();
            let (err, g, w) = max_error(&got, &want);
            Outcome { abs_error: err, ..outcome(rt, name, n as u64, g, w, 0.0) }.checked(err, 0.0)
        }
        "row_sum" => {
            let (rows, cols) = (64u32, 1000u32);
            let m = enigma_kernels::test_data((rows * cols) as usize, 3);
            let matrix = rt.buffer_from(&m)?;
            let sums = rt.buffer_zeroed::<f32>(rows as usize)?;
            let p = rt.pipeline(&dispatch_patterns::row_sum())?;
            s.dispatch(DispatchMode::Threadgroups, &p, &[Arg::from(&matrix), Arg::from(&sums), Arg::u32(cols)], [rows, 1, 1], [256, 1, 1])?;
            let got = sums.to_vec::<f32>()?;
            let want: Vec<f64> = m.chunks(cols as usize).map(two_pass_sum::reference_sum).collect();
            let tol = enigma_kernels::sum_tolerance(&m[..cols as usize]) * 4.0;
            let (err, g, w) = max_error(&got, &want);
            Outcome { abs_error: err, ..outcome(rt, name, (rows * cols) as u64, g, w, tol) }.checked(err, tol)
        }
        "prefix_sum" => {
            let a = enigma_kernels::test_data(n as usize, 4);
            let input = rt.buffer_from(&a)?;
            let out = rt.buffer_zeroed::<f32>(n as usize)?;
            let p = rt.pipeline(&dispatch_patterns::prefix_sum())?;
            s.dispatch(DispatchMode::Threads, &p, &[Arg::from(&input), Arg::from(&out)], [n, 1, 1], [256, 1, 1])?;
            let got = out.to_vec::<f32>()?;
            let mut want = Vec::with_capacity(a.len());
            for chunk in a.chunks(32) {
                let mut acc = 0.0f64;
                for &x in chunk {
                    acc += x as f64;
                    want.push(acc);
                }
            }
            let tol = 32.0 * f32::EPSILON as f64 * 32.0;
            let (err, g, w) = max_error(&got, &want);
            Outcome { abs_error: err, ..outcome(rt, name, n as u64, g, w, tol) }.checked(err, tol)
        }
        "stencil" => {
            let a = enigma_kernels::test_data(n as usize, 5);
            let input = rt.buffer_from(&a)?;
            let out = rt.buffer_zeroed::<f32>(n as usize)?;
            let p = rt.pipeline(&dispatch_patterns::shuffle_stencil())?;
            s.dispatch(DispatchMode::Threads, &p, &[Arg::from(&input), Arg::from(&out)], [n, 1, 1], [256, 1, 1])?;
            let got = out.to_vec::<f32>()?;
            let want: Vec<f64> = (0..a.len())
                .map(|i| {
                    let (lane, base) = (i % 32, i - i % 32);
                    let last = (base + 31).min(a.len() - 1);
                    let left = if lane > 0 { a[i - 1] } else { a[i] } as f64;
                    let right = if i < last { a[i + 1] } else { a[i] } as f64;
                    0.25 * left + 0.5 * a[i] as f64 + 0.25 * right
                })
                .collect();
            let tol = 4.0 * f32::EPSILON as f64;
            let (err, g, w) = max_error(&got, &want);
            Outcome { abs_error: err, ..outcome(rt, name, n as u64, g, w, tol) }.checked(err, tol)
        }
        "gemm" => {
            use enigma_ir::Type;
            let (m, nn, k) = (96u32, 130u32, 40u32);
            let to_half = |v: Vec<f32>| v.iter().map(|&x| f32_to_f16(x)).collect::<Vec<u16>>();
            let (a, b) = (to_half(enigma_kernels::test_data((m * k) as usize, 6)), to_half(enigma_kernels::test_data((k * nn) as usize, 7)));
            let bytes = |v: &[u16]| v.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>();
            let (ab, bb) = (rt.buffer_from_bytes(Type::F16, &bytes(&a))?, rt.buffer_from_bytes(Type::F16, &bytes(&b))?);
            let cb = rt.buffer_of_type(Type::F16, (m * nn) as usize)?;
            let p = rt.pipeline(&dispatch_patterns::gemm_tiled())?;
            let grid = [nn.div_ceil(dispatch_patterns::GEMM_TN), m.div_ceil(dispatch_patterns::GEMM_TM), 1];
            let args = [Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::u32(m), Arg::u32(nn), Arg::u32(k)];
            s.dispatch(DispatchMode::Threadgroups, &p, &args, grid, [dispatch_patterns::GEMM_THREADS, 1, 1])?;
            let got: Vec<f32> = cb.read_bytes()?.chunks_exact(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect();
            let want: Vec<f64> = (0..m * nn)
                .map(|e| {
                    let (r, c) = (e / nn, e % nn);
                    (0..k).map(|x| f16_to_f32(a[(r * k + x) as usize]) as f64 * f16_to_f32(b[(x * nn + c) as usize]) as f64).sum()
                })
                .collect();
            // One rounding to half of a sum of up to 40 products of magnitude ≤ 1.
            let tol = 40.0 * 2f64.powi(-11) + 1e-3;
            let (err, g, w) = max_error(&got, &want);
            Outcome { abs_error: err, ..outcome(rt, name, (m * nn) as u64, g, w, tol) }.checked(err, tol)
        }
        other => anyhow::bail!("unknown example `{other}`"),
    })
}

impl Outcome {
    /// Judges an elementwise example by its largest error.
    fn checked(mut self, max_err: f64, tolerance: f64) -> Outcome {
        self.ok = max_err <= tolerance;
        self.tolerance = tolerance;
        self
    }
}

fn f32_to_f16(x: f32) -> u16 {
    enigma_runtime::half::f32_to_f16_bits(x)
}

fn f16_to_f32(h: u16) -> f32 {
    enigma_runtime::half::f16_bits_to_f32(h)
}

