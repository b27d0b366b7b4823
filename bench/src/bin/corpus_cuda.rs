//! One sanitizer-corpus kernel on a CUDA GPU, for running under NVIDIA's
//! compute-sanitizer (`scripts/compute-sanitizer-corpus.sh`):
//!
//! * `corpus_cuda list` prints each entry: name, bug class, what enigma's
//!   sanitizer reports, and whether it can be launched (entries whose
//!   divergent barrier enigma's validation rejects are not: on a GPU such a
//!   barrier can hang);
//! * `corpus_cuda <name> [--fixed]` launches the buggy (or fixed) kernel
//!   once with the entry's dispatch and prints what happened. It exits 0
//!   when the launch was made (whatever the kernel did: compute-sanitizer
//!   judges), 2 for bad arguments, 3 when CUDA is unavailable.

use enigma_kernels::sanitizer_corpus::{self as corpus, ArgSpec, Entry, Validation};
use enigma_runtime::{Arg, Buffer, Device, Mode, Runtime};
use std::process::ExitCode;

fn launchable(e: &Entry) -> bool {
    matches!(e.validation, Validation::Passes)
}

fn run(rt: &Runtime, e: &Entry, fixed: bool) -> Result<(), String> {
    let variant = if fixed { e.fixed } else { e.buggy };
    let kernel = (variant.kernel)();
    let launch = (variant.launch)();
    let pipeline = rt.pipeline(&kernel).map_err(|err| err.to_string())?;
    let buffers: Vec<Option<Buffer>> = launch
        .args
        .iter()
        .map(|a| match a {
            ArgSpec::Buffer { elem, bytes } => rt.buffer_from_bytes(*elem, bytes).map(Some).map_err(|err| err.to_string()),
            ArgSpec::Value(_) => Ok(None),
        })
        .collect::<Result<_, _>>()?;
    let args: Vec<Arg<'_>> = launch
        .args
        .iter()
        .zip(&buffers)
        .map(|(a, b)| match (a, b) {
            (ArgSpec::Value(lit), _) => Arg::Value(*lit),
            (_, Some(b)) => Arg::from(b),
            (_, None) => unreachable!("every buffer spec has a buffer"),
        })
        .collect();
    let mode = match launch.mode {
        corpus::Mode::Threads => Mode::Threads,
        corpus::Mode::Threadgroups => Mode::Threadgroups,
    };
    rt.dispatch(&pipeline, &args, mode, launch.size, launch.threads_per_threadgroup, &Default::default())
        .map(|_| ())
        .map_err(|err| err.to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(name) = args.first() else {
        eprintln!("usage: corpus_cuda list | corpus_cuda <name> [--fixed]");
        return ExitCode::from(2);
    };
    if name == "list" {
        for e in corpus::entries() {
            let launch = if launchable(&e) { "launch" } else { "rejected-by-validation" };
            println!("{}\t{}\t{:?}\t{launch}", e.name, e.class, (e.expected)().kind);
        }
        return ExitCode::SUCCESS;
    }
    let Some(entry) = Entry::find(name) else {
        eprintln!("no corpus entry `{name}` (corpus_cuda list shows them)");
        return ExitCode::from(2);
    };
    let fixed = args.iter().any(|a| a == "--fixed");
    if !launchable(&entry) && !fixed {
        println!("{name}: not launched: enigma's validation rejects its divergent barrier before any device sees it");
        return ExitCode::SUCCESS;
    }
    let rt = match Runtime::new(Device::Cuda) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(3);
        }
    };
    match run(&rt, &entry, fixed) {
        Ok(()) => println!("{name}{}: launched, completed", if fixed { " (fixed)" } else { "" }),
        Err(e) => println!("{name}{}: launched, runtime error: {e}", if fixed { " (fixed)" } else { "" }),
    }
    ExitCode::SUCCESS
}
