//! One sanitizer-corpus kernel on a CUDA GPU, for running under NVIDIA's
//! compute-sanitizer (`scripts/compute-sanitizer-corpus.sh`):
//!
//! * `corpus_cuda list` prints one tab-separated line per entry: name, bug
//!   class, the kind enigma's sanitizer reports, and whether the buggy
//!   variant is launched (`launch`) or not (`rejected-by-validation`: enigma's
//!   validation rejects its divergent barrier, which on a GPU can hang). It
//!   needs no GPU.
//! * `corpus_cuda <name> [--fixed]` compiles the buggy (or fixed) kernel with
//!   NVRTC, launches it once with the entry's dispatch and arguments, and
//!   prints one line: `launched, completed` (with the compile and dispatch
//!   times), `launched, runtime error: …`, or `not launched: compile error: …`.
//!
//! Exit status: 0 when the launch was made, whatever the kernel did (the
//! sanitizer judges), and for a buggy variant that is not launched; 2 for
//! bad arguments; 3 when CUDA is unavailable (no driver, no GPU or no NVRTC)
//! — the script checks for 3 before it starts compute-sanitizer.

use enigma_runtime::{Device, Runtime};
use enigma_testing::corpus::{self, Entry, Validation};
use enigma_testing::harness;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: corpus_cuda list | corpus_cuda <name> [--fixed]";

fn launchable(e: &Entry) -> bool {
    matches!(e.validation, Validation::Passes)
}

/// Why a variant did not complete: it failed before its launch (compile,
/// allocation) or in it. The text is printed, not handled.
enum Failure {
    BeforeLaunch(String),
    InLaunch(String),
}

/// Compiles and launches one variant; returns the compile and dispatch times.
fn run(rt: &Runtime, e: &Entry, fixed: bool) -> Result<(Duration, Duration), Failure> {
    let variant = if fixed { e.fixed } else { e.buggy };
    let launch = (variant.launch)();
    let started = Instant::now();
    let pipeline = rt.pipeline(&(variant.kernel)()).map_err(|err| Failure::BeforeLaunch(format!("compile error: {err}")))?;
    let compile = started.elapsed();
    let buffers = harness::buffers(rt, &launch).map_err(|err| Failure::BeforeLaunch(format!("allocation error: {err}")))?;
    let args = harness::args(&launch, &buffers);
    let started = Instant::now();
    rt.dispatch(&pipeline, &args, launch.mode, launch.size, launch.threads_per_threadgroup, &Default::default())
        .map_err(|err| Failure::InLaunch(err.to_string()))?;
    Ok((compile, started.elapsed()))
}

fn main() -> ExitCode {
    enigma_bench::exit_if_help(USAGE);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (name, fixed) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["list"] => {
            for e in corpus::entries() {
                let launch = if launchable(&e) { "launch" } else { "rejected-by-validation" };
                println!("{}\t{}\t{:?}\t{launch}", e.name, e.class, (e.expected)().kind);
            }
            return ExitCode::SUCCESS;
        }
        [name] if !name.starts_with('-') => (name, false),
        [name, "--fixed"] if !name.starts_with('-') => (name, true),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let Some(entry) = Entry::find(name) else {
        eprintln!("no corpus entry `{name}` (`corpus_cuda list` shows them)");
        return ExitCode::from(2);
    };
    let label = if fixed { format!("{name} (fixed)") } else { name.to_string() };
    if !launchable(&entry) && !fixed {
        println!("{label}: not launched: enigma's validation rejects its divergent barrier (on a GPU it can hang)");
        return ExitCode::SUCCESS;
    }
    let rt = match Runtime::new(Device::Cuda) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{label}: {e}");
            return ExitCode::from(3);
        }
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    match run(&rt, &entry, fixed) {
        Ok((compile, dispatch)) => {
            println!("{label}: launched, completed (compile {:.1} ms, dispatch {:.1} ms)", ms(compile), ms(dispatch))
        }
        Err(Failure::InLaunch(e)) => println!("{label}: launched, runtime error: {e}"),
        Err(Failure::BeforeLaunch(e)) => println!("{label}: not launched: {e}"),
    }
    ExitCode::SUCCESS
}
