//! The `enigma` command-line tool: one subcommand per module in `cli/`, each
//! exposing an `Args` struct and `run(args) -> anyhow::Result<ExitCode>`.
//!
//! Exit status: what the subcommand returns, or 2 when it fails with an error.

mod cli {
    pub mod bench;
    pub mod check;
    pub mod common;
    pub mod emit;
    pub mod examples;
    pub mod geometry;
    pub mod info;
    pub mod library;
    pub mod occupancy;
    pub mod predict;
    pub mod run;
    pub mod source;
    pub mod tiles;
    pub mod tune;
}

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "enigma", version, about = "GPU kernels in the Metal execution model: simulate, check, run")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run an example or a library kernel on a device and check it against a CPU reference (`run list`: the library).
    Run(cli::run::Args),
    /// Time library kernels (warm-up, then repeats): best and median time, achieved GB/s.
    Bench(cli::bench::Args),
    /// Validate and sanitize an example, a library kernel or a corpus kernel (corpus/<name>), or validate your own (file.py::name, an IR file); non-zero exit on findings.
    Check(cli::check::Args),
    /// Print a kernel (an example's, a library kernel's, by name, or your own: file.py::name, an IR file) as MSL, CUDA C++, IR text or IR JSON.
    Emit(cli::emit::Args),
    /// Devices: the built-in catalogue (--catalog) and the devices this machine runs on.
    Info(cli::info::Args),
    /// Dispatch geometry: threadgroups, SIMD groups, idle lanes, waste, warnings.
    Geometry(cli::geometry::Args),
    /// Threadgroups per core for a threadgroup size and its threadgroup memory.
    Occupancy(cli::occupancy::Args),
    /// Tune a library kernel: time its candidate threadgroup sizes (GEMM tiles for matmul_*) and record the fastest in the tuning cache.
    Tune(cli::tune::Args),
    /// Quantized-GEMM tile planner (seed 002), or --seed-tables to check the seeds' tables.
    Tiles(cli::tiles::Args),
    /// Roofline prediction of a library operation on catalogue devices (default: M4 Max and M5): a model, not a measurement.
    Predict(cli::predict::Args),
}

/// `print!` panics when stdout is a pipe its reader closed (`enigma … |
/// head`). That is the reader's choice, not an error: end quietly, as a
/// process killed by SIGPIPE would, and leave every other panic's report
/// as it is.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload().downcast_ref::<String>().map(String::as_str).unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => cli::run::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Check(args) => cli::check::run(args),
        Command::Emit(args) => cli::emit::run(args),
        Command::Info(args) => cli::info::run(args),
        Command::Geometry(args) => cli::geometry::run(args),
        Command::Occupancy(args) => cli::occupancy::run(args),
        Command::Tiles(args) => cli::tiles::run(args),
        Command::Predict(args) => cli::predict::run(args),
        Command::Tune(args) => cli::tune::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
