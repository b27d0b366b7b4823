//! What the benchmark binaries share: timing a closure the way every figure
//! in BENCHMARKS.md is taken (one warm-up run, then repeats).

use std::time::{Duration, Instant};

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
