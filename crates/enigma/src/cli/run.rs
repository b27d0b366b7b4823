//! `enigma run <what>`: runs an example (or `all` of them) or a kernel of
//! the library on a device, checks it against a CPU reference, and prints
//! the result, the reference, the error and the device; `enigma run list`
//! lists the library. Exits 1 when a result disagrees beyond tolerance.

use super::examples::{run_example, Session, EXAMPLES};
use super::library;
use anyhow::Context;
use enigma_runtime::{Device, Options, Runtime};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An example (reduce, scale, row_sum, prefix_sum, stencil, gemm), `all`
    /// examples, a library kernel (`softmax_f16`, or `softmax --dtype f16`),
    /// or `list` to list the library's kernels. With --dtype, --shape,
    /// --threads or --sanitize, `scale` is the library's (`scale_f32`).
    pub what: String,
    /// Examples: number of elements (reduce, scale, prefix_sum, stencil; at least 1).
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub n: u32,
    /// auto (Metal, else CUDA, else the simulator), sim (or cpu), metal, cuda.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Library kernels: the problem shape, e.g. 64x1000 for rows × d (see
    /// `enigma run list`; default: a shape that runs in a moment).
    #[arg(long)]
    pub shape: Option<String>,
    /// Library kernels: element type, f32 (default), f16 or bf16 (f32, i32
    /// or u32 for prefix sums).
    #[arg(long)]
    pub dtype: Option<String>,
    /// Quantized matmuls (`qmatmul_*`): K values per scale, 32, 64 or 128
    /// (default: the largest that divides K).
    #[arg(long)]
    pub group: Option<usize>,
    /// Library kernels: threads per threadgroup (default: seed 004's table).
    #[arg(long)]
    pub threads: Option<u32>,
    /// Matrix multiply (`matmul_*`): the GEMM tile and SIMD-group grid,
    /// TMxTNxTK/ROWSxCOLS such as 128x128x32/2x2 (default: the tuning
    /// cache's choice, else the default for the shape).
    #[arg(long)]
    pub tile: Option<enigma_ops::GemmTile>,
    /// Library kernels: run every dispatch under the simulator's sanitizer.
    #[arg(long)]
    pub sanitize: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.what == "list" {
        library::list(args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let example = EXAMPLES.iter().find(|e| **e == args.what);
    // An example name with a library option means the library kernel of
    // that name (`enigma run scale --dtype f16`).
    let library_options = args.dtype.is_some() || args.shape.is_some() || args.group.is_some() || args.threads.is_some() || args.tile.is_some() || args.sanitize;
    if args.what == "all" {
        return run_examples(&args, &EXAMPLES);
    }
    if let (Some(example), false) = (example, library_options) {
        return run_examples(&args, &[example]);
    }
    match library::find_entry(&args.what, args.dtype.as_deref())? {
        Some(entry) => run_kernel(&args, &entry),
        None => anyhow::bail!(
            "unknown example or kernel `{}`; examples: {}, all; kernels: `enigma run list`",
            args.what,
            EXAMPLES.join(", ")
        ),
    }
}

fn run_examples(args: &Args, names: &[&'static str]) -> anyhow::Result<ExitCode> {
    let device: Device = args.device.parse()?;
    let rt = Runtime::new(device)?;
    let mut all_ok = true;
    for &name in names {
        let outcome = run_example(&mut Session::new(&rt, Options::default()), name, args.n).with_context(|| format!("running `{name}`"))?;
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

fn run_kernel(args: &Args, entry: &enigma_ops::Entry) -> anyhow::Result<ExitCode> {
    let device: Device = args.device.parse()?;
    let rt = Runtime::new(device)?;
    let shape = library::with_group(entry, library::shape(args.shape.as_deref())?, args.group)?;
    let options = library::options(args.threads, args.tile, args.sanitize);
    let outcome = entry.run_with(&rt, &shape, &options).with_context(|| format!("running `{}`", entry.name))?;
    let device = library::device_name(&rt);
    if args.json {
        let dispatches: Vec<serde_json::Value> = outcome
            .launches
            .iter()
            .map(|l| {
                serde_json::json!({
                    "kernel": l.kernel,
                    "mode": l.mode,
                    "size": l.size,
                    "threads": l.threads,
                    "wall_time_s": l.wall_time.as_secs_f64(),
                    "device_time_s": l.device_time.map(|t| t.as_secs_f64()),
                    "findings": l.findings,
                })
            })
            .collect();
        let v = serde_json::json!({
            "kernel": outcome.name,
            "shape": outcome.shape,
            "device": device,
            "ok": outcome.passed,
            "checked": outcome.checked,
            "failures": outcome.failures,
            "max_abs_error": outcome.max_abs_error,
            "worst": {
                "index": outcome.worst_index,
                "got": outcome.worst_got,
                "want": outcome.worst_want,
                "tolerance_abs": outcome.tolerance.abs,
                "tolerance_rel": outcome.tolerance.rel,
                "ratio": outcome.worst_ratio,
            },
            "dispatches": dispatches,
        });
        println!("{}", serde_json::to_string(&v)?);
    } else {
        println!("{outcome}");
        println!("  on {device}");
        for l in &outcome.launches {
            let [x, y, z] = l.size;
            let [tx, ty, tz] = l.threads;
            println!("  {:<28} {:<12} ({x}, {y}, {z}) × ({tx}, {ty}, {tz})  {:.3} ms", l.kernel, l.mode, l.wall_time.as_secs_f64() * 1e3);
            for f in &l.findings {
                println!("    {f}");
            }
        }
    }
    Ok(if outcome.passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
