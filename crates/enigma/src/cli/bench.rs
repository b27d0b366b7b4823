//! `enigma bench <kernel>|all`: times library kernels with seed 004's loop
//! (warm-up runs, then timed repeats; pipelines compiled and data made
//! once), with a progress line on stderr and a table — or JSON — on stdout:
//! best and median time per run (device time where the backend measures
//! it, else host wall time), the bandwidth achieved by the minimum bytes the
//! operation must move, and whether the last run's output matched the CPU
//! reference (exit status 1 when one did not).

use super::common::print_table;
use super::library;
use anyhow::Context;
use enigma_ops::{registry, BenchOutcome, Entry};
use enigma_runtime::{Device, DeviceKind, Runtime};
use std::io::Write;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A library kernel (`softmax_f16`, or `softmax --dtype f16`; see
    /// `enigma run list`), or `all`.
    pub kernel: String,
    /// Threads per threadgroup (default: the tuning cache's choice, else seed 004's table).
    #[arg(long)]
    pub threads: Option<u32>,
    /// Matrix multiply (`matmul_*`): the GEMM tile and SIMD-group grid,
    /// TMxTNxTK/ROWSxCOLS such as 128x128x32/2x2 (default: the tuning
    /// cache's choice, else the default for the shape).
    #[arg(long)]
    pub tile: Option<enigma_ops::GemmTile>,
    #[command(flatten)]
    pub timing: library::Timing,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let entries: Vec<Entry> = if args.kernel == "all" {
        if args.timing.shape.is_some() {
            anyhow::bail!("--shape does not apply to `all` (the kernels' shapes differ)");
        }
        registry().into_iter().filter(|e| args.timing.dtype.as_deref().is_none() || args.timing.dtype.as_deref() == Some(e.elem.name())).collect()
    } else {
        match library::find_entry(&args.kernel, args.timing.dtype.as_deref())? {
            Some(e) => vec![e],
            None => anyhow::bail!("unknown kernel `{}`; see `enigma run list`", args.kernel),
        }
    };
    let device: Device = args.timing.device.parse()?;
    let rt = Runtime::new(device)?;
    let on_gpu = rt.device().kind != DeviceKind::Simulator;
    let options = library::options(args.threads, args.tile, false);
    let mut rows = vec![];
    let mut all_ok = true;
    for entry in &entries {
        let shape = match (&args.timing.shape, on_gpu) {
            (Some(text), _) => library::shape(Some(text))?,
            (None, true) => entry.bench_shape.clone(),
            (None, false) => entry.default_shape.clone(),
        };
        let shape = library::with_group(entry, shape, args.timing.group)?;
        let label = format!("{} [{}]", entry.name, library::shape_text(&shape));
        eprint!("{label:<40} preparing data and the reference");
        let mut progress = |done: usize, total: usize| {
            let width = 20;
            let filled = done * width / total.max(1);
            eprint!("\r{label:<40} [{}{}] {done}/{total}{}", "#".repeat(filled), ".".repeat(width - filled), " ".repeat(20));
            let _ = std::io::stderr().flush();
        };
        let outcome = entry.bench(&rt, &shape, &options, args.timing.warmup, args.timing.repeats, &mut progress);
        eprintln!();
        let outcome = outcome.with_context(|| format!("benchmarking `{label}`"))?;
        if !outcome.check.passed {
            all_ok = false;
            eprintln!("{}", outcome.check);
        }
        if args.timing.json {
            println!("{}", serde_json::to_string(&json(&outcome, &library::device_name(&rt)))?);
        } else {
            rows.push(row(&outcome));
        }
    }
    if !args.timing.json {
        println!("device: {}", library::device_name(&rt));
        print_table(&["kernel", "shape", "timing", "runs", "best", "median", "MB moved", "GB/s (best)", "dispatches", "result"], &rows);
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn ms(d: std::time::Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn row(o: &BenchOutcome) -> Vec<String> {
    vec![
        o.name.clone(),
        library::shape_text(&o.shape),
        if o.device_timed { "device" } else { "wall" }.to_string(),
        o.times.len().to_string(),
        ms(o.best),
        ms(o.median),
        format!("{:.3}", o.bytes as f64 / 1e6),
        format!("{:.2}", o.best_gbps),
        o.launches.len().to_string(),
        if o.check.passed { "ok" } else { "MISMATCH" }.to_string(),
    ]
}

fn json(o: &BenchOutcome, device: &str) -> serde_json::Value {
    serde_json::json!({
        "kernel": o.name,
        "shape": o.shape,
        "device": device,
        "timing": if o.device_timed { "device" } else { "wall" },
        "warmup": o.warmup,
        "repeats": o.times.len(),
        "times_s": o.times.iter().map(|t| t.as_secs_f64()).collect::<Vec<_>>(),
        "best_s": o.best.as_secs_f64(),
        "median_s": o.median.as_secs_f64(),
        "bytes": o.bytes,
        "best_gbps": o.best_gbps,
        "ok": o.check.passed,
        "max_abs_error": o.check.max_abs_error,
        "dispatches": o.launches.iter().map(|l| serde_json::json!({
            "kernel": l.kernel,
            "mode": l.mode,
            "size": l.size,
            "threads": l.threads,
        })).collect::<Vec<_>>(),
    })
}
