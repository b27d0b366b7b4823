//! `enigma run <example>`: runs an example on a device, checks it against a
//! CPU reference, and prints the result, the reference, the error and the
//! device. Exits non-zero when they disagree beyond tolerance.

use anyhow::Context;
use super::examples::{run_example, Session, EXAMPLES};
use enigma_runtime::{Device, Options, Runtime};
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
