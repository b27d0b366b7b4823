//! What the benchmark binaries share: timing a closure the way every figure
//! in BENCHMARKS.md is taken (one warm-up run, then repeats), the seed-001
//! pass-1 input with its plain-Rust reference loop, and the CUDA runtime of
//! the GPU binaries (or the JSON line saying why there is none).

use std::hint::black_box;
use std::time::{Duration, Instant};

/// `n` floats in [-0.5, 0.5): the input of the simulator benchmarks.
pub fn pass1_data(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5).collect()
}

/// Best and median of the reference: a plain `for x in data { sum += x }`.
pub fn time_plain_sum(repeats: usize, data: &[f32]) -> (Duration, Duration) {
    time_runs(repeats, || {
        let mut sum = 0.0f32;
        for &x in black_box(data) {
            sum += x;
        }
        black_box(sum);
    })
}

/// Best and median wall time of `repeats` runs of `f` (at least one) after
/// one untimed warm-up run.
pub fn time_runs(repeats: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    f();
    let mut times: Vec<Duration> = (0..repeats.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    (times[0], times[times.len() / 2])
}

/// The CUDA runtime, or `None` after printing `{"skipped": reason}` — the
/// one JSON object a GPU benchmark binary prints on a machine without a
/// GPU, which its Python driver reports.
pub fn cuda_runtime_or_skip() -> Option<enigma_runtime::Runtime> {
    match enigma_runtime::Runtime::new(enigma_runtime::Device::Cuda) {
        Ok(rt) => Some(rt),
        Err(e) => {
            println!("{{\"skipped\": {:?}}}", e.to_string());
            None
        }
    }
}

/// Prints `usage` and exits with status 0 when the command line asks for
/// help (`--help` or `-h` anywhere): every benchmark binary answers it.
pub fn exit_if_help(usage: &str) {
    if std::env::args().skip(1).any(|a| a == "--help" || a == "-h") {
        println!("{usage}");
        std::process::exit(0);
    }
}
