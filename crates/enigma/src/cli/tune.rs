//! `enigma tune <kernel>`: times the candidate threadgroup sizes (and loads
//! in flight, rows per SIMD group where the kernel has them; GEMM tiles for
//! `matmul_*`) of a library kernel on a device, prints every candidate's time or why it was skipped,
//! and records the fastest in the tuning cache that `enigma run`, `enigma
//! bench` and the registry use afterwards (see `enigma_ops::tune`).

use super::common::print_table;
use super::library;
use enigma_ops::tune::{self, Outcome, Settings};
use enigma_runtime::{Device, DeviceKind, Runtime};
use std::io::Write;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A library kernel (`softmax_f16`, or `softmax --dtype f16`; see `enigma run list`).
    pub kernel: String,
    /// Do not record the result in the tuning cache.
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub timing: library::Timing,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(entry) = library::find_entry(&args.kernel, args.timing.dtype.as_deref())? else {
        anyhow::bail!("unknown kernel `{}`; see `enigma run list`", args.kernel);
    };
    let rt = Runtime::new(args.timing.device.parse::<Device>()?)?;
    let shape = match &args.timing.shape {
        Some(text) => library::shape(Some(text))?,
        None if rt.device().kind != DeviceKind::Simulator => entry.bench_shape.clone(),
        None => entry.default_shape.clone(),
    };
    let shape = library::with_group(&entry, shape, args.timing.group)?;
    let label = format!("{} [{}]", entry.name, library::shape_text(&shape));
    let settings = Settings { warmup: args.timing.warmup, repeats: args.timing.repeats };
    let report = tune::tune(&entry, &rt, &shape, settings, &mut |done, total, choice| {
        if done < total {
            eprint!("\r{label:<40} candidate {}/{total}: {choice}{}", done + 1, " ".repeat(20));
        } else {
            eprintln!("\r{label:<40} {total} candidates done{}", " ".repeat(40));
        }
        let _ = std::io::stderr().flush();
    })?;
    let stored = match (args.no_cache, tune::cache_path()) {
        (false, Some(path)) => tune::store(&path, &report)?.map(|_| path),
        _ => None,
    };
    if args.timing.json {
        let mut value = serde_json::to_value(&report)?;
        value["cache"] = serde_json::json!(stored.as_ref().map(|p| p.display().to_string()));
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        let rows: Vec<Vec<String>> = report
            .trials
            .iter()
            .map(|t| {
                let mark = if Some(t.choice) == report.best { "best" } else { "" };
                match &t.outcome {
                    Outcome::Timed { median_us, best_us, gb_per_s } => vec![
                        t.choice.to_string(),
                        format!("{median_us:.1} us"),
                        format!("{best_us:.1} us"),
                        format!("{gb_per_s:.1}"),
                        mark.to_string(),
                    ],
                    Outcome::Skipped { reason } => vec![t.choice.to_string(), "-".into(), "-".into(), "-".into(), format!("skipped: {reason}")],
                    Outcome::Wrong { reason } => vec![t.choice.to_string(), "-".into(), "-".into(), "-".into(), format!("WRONG: {reason}")],
                }
            })
            .collect();
        println!("{} on {} ({} time), shape class {}", report.kernel, report.device, if report.device_timed { "device" } else { "wall" }, report.shape_class);
        print_table(&["candidate", "median", "best", "GB/s", "verdict"], &rows);
        match (&report.best, &stored) {
            (Some(best), Some(path)) => println!("best: {best}; recorded in {}", path.display()),
            (Some(best), None) => println!("best: {best} (not recorded)"),
            (None, _) => println!("no candidate ran correctly"),
        }
    }
    Ok(if report.best.is_some() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
