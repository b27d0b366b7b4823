//! `enigma run <example>`: runs an example on a device, checks it against a
//! CPU reference, and prints the result, the reference, the error and the
//! device. Exits non-zero when they disagree beyond tolerance.

use anyhow::Context;
use enigma_kernels::{reduce, seed000};
use enigma_runtime::{Arg, Device, Runtime};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to run: reduce, scale, row_sum, prefix_sum, stencil, gemm, or all.
    pub example: String,
    /// Number of elements (reduce, scale, prefix_sum, stencil).
    #[arg(long, default_value_t = 1 << 20)]
    pub n: u32,
    /// auto (Metal, else CUDA, else the simulator), sim (or cpu), metal, cuda.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Print one JSON object per example instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The outcome of one example.
#[derive(serde::Serialize, Debug)]
struct Outcome {
    example: &'static str,
    device: String,
    n: u64,
    result: f64,
    reference: f64,
    abs_error: f64,
    rel_error: f64,
    tolerance: f64,
    ok: bool,
}

pub const EXAMPLES: [&str; 6] = ["reduce", "scale", "row_sum", "prefix_sum", "stencil", "gemm"];

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let device: Device = args.device.parse()?;
    let rt = Runtime::new(device)?;
    let names: Vec<&str> = if args.example == "all" {
        EXAMPLES.to_vec()
    } else if let Some(name) = EXAMPLES.iter().find(|e| **e == args.example) {
        vec![*name]
    } else {
        anyhow::bail!("unknown example `{}`; expected one of: {}, all", args.example, EXAMPLES.join(", "));
    };
    let mut all_ok = true;
    for name in names {
        let outcome = run_one(&rt, name, args.n).with_context(|| format!("running `{name}`"))?;
        all_ok &= outcome.ok;
        if args.json {
            println!("{}", serde_json::to_string(&outcome)?);
        } else {
            println!(
                "{:<10} n={:<9} result={:<16.8} reference={:<16.8} abs_err={:.3e} rel_err={:.3e} {} on {}",
                outcome.example,
                outcome.n,
                outcome.result,
                outcome.reference,
                outcome.abs_error,
                outcome.rel_error,
                if outcome.ok { "OK" } else { "MISMATCH" },
                outcome.device
            );
        }
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Deterministic inputs in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
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

fn run_one(rt: &Runtime, name: &'static str, n: u32) -> anyhow::Result<Outcome> {
    Ok(match name {
        "reduce" => {
            let a = data(n as usize, 1);
            let groups = reduce::pass1_threadgroups(n);
            let input = rt.buffer_from(&a)?;
            let partial = rt.buffer_zeroed::<f32>(groups as usize)?;
            let result = rt.buffer_zeroed::<f32>(1)?;
            let p1 = rt.pipeline(&reduce::reduce_threadgroup())?;
            let p2 = rt.pipeline(&reduce::reduce_final())?;
            rt.dispatch_threads(&p1, &[Arg::from(&input), Arg::from(&partial)], [n, 1, 1], [reduce::PASS1_THREADS, 1, 1])?;
            let pass2 = [reduce::PASS2_THREADS, 1, 1];
            rt.dispatch_threads(&p2, &[Arg::from(&partial), Arg::from(&result), Arg::u32(groups)], pass2, pass2)?;
            let got = result.to_vec::<f32>()?[0] as f64;
            outcome(rt, name, n as u64, got, reduce::reference_sum(&a), reduce::tolerance(&a))
        }
        "scale" => {
            // f16 data: the reference rounds like the kernel (f32 multiply, one rounding to half).
            use enigma_ir::Type;
            let a = data(n as usize, 2);
            let halves: Vec<u16> = a.iter().map(|&x| f32_to_f16(x)).collect();
            let buf = rt.buffer_from_bytes(Type::F16, &halves.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<_>>())?;
            let p = rt.pipeline(&seed000::scale())?;
            rt.dispatch_threads(&p, &[Arg::from(&buf), Arg::f32(0.5)], [n, 1, 1], [256, 1, 1])?;
            let bytes = buf.read_bytes()?;
            let got: Vec<f32> = bytes.chunks_exact(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect();
            let want: Vec<f64> = halves.iter().map(|&h| f16_to_f32(f32_to_f16(f16_to_f32(h) * 0.5)) as f64).collect();
            let (err, g, w) = max_error(&got, &want);
            Outcome { abs_error: err, ..outcome(rt, name, n as u64, g, w, 0.0) }.checked(err, 0.0)
        }
        "row_sum" => {
            let (rows, cols) = (64u32, 1000u32);
            let m = data((rows * cols) as usize, 3);
            let matrix = rt.buffer_from(&m)?;
            let sums = rt.buffer_zeroed::<f32>(rows as usize)?;
            let p = rt.pipeline(&seed000::row_sum())?;
            rt.dispatch_threadgroups(&p, &[Arg::from(&matrix), Arg::from(&sums), Arg::u32(cols)], [rows, 1, 1], [256, 1, 1])?;
            let got = sums.to_vec::<f32>()?;
            let want: Vec<f64> = m.chunks(cols as usize).map(reduce::reference_sum).collect();
            let tol = reduce::tolerance(&m[..cols as usize]) * 4.0;
            let (err, g, w) = max_error(&got, &want);
            Outcome { abs_error: err, ..outcome(rt, name, (rows * cols) as u64, g, w, tol) }.checked(err, tol)
        }
        "prefix_sum" => {
            let a = data(n as usize, 4);
            let input = rt.buffer_from(&a)?;
            let out = rt.buffer_zeroed::<f32>(n as usize)?;
            let p = rt.pipeline(&seed000::prefix_sum())?;
            rt.dispatch_threads(&p, &[Arg::from(&input), Arg::from(&out)], [n, 1, 1], [256, 1, 1])?;
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
            let a = data(n as usize, 5);
            let input = rt.buffer_from(&a)?;
            let out = rt.buffer_zeroed::<f32>(n as usize)?;
            let p = rt.pipeline(&seed000::shuffle_stencil())?;
            rt.dispatch_threads(&p, &[Arg::from(&input), Arg::from(&out)], [n, 1, 1], [256, 1, 1])?;
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
            let (a, b) = (to_half(data((m * k) as usize, 6)), to_half(data((k * nn) as usize, 7)));
            let bytes = |v: &[u16]| v.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>();
            let (ab, bb) = (rt.buffer_from_bytes(Type::F16, &bytes(&a))?, rt.buffer_from_bytes(Type::F16, &bytes(&b))?);
            let cb = rt.buffer_of_type(Type::F16, (m * nn) as usize)?;
            let p = rt.pipeline(&seed000::gemm_tiled())?;
            let grid = [nn.div_ceil(seed000::GEMM_TN), m.div_ceil(seed000::GEMM_TM), 1];
            let args = [Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::u32(m), Arg::u32(nn), Arg::u32(k)];
            rt.dispatch_threadgroups(&p, &args, grid, [seed000::GEMM_THREADS, 1, 1])?;
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

