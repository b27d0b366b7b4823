//! Sanitizer overhead: seed-001 pass 1 over 2^20 floats on the simulator,
//! plain and under the sanitizer (one schedule, and the default three), with
//! a plain Rust summation loop over the same data, all in the same run.
//! Ratios: best against best ("vs sim", "vs loop") and median against
//! median ("(median)"); the aim is a sanitizer under 10x plain simulation.
//!
//! Run: `cargo run --release -p enigma-bench --bin sanitizer_overhead [n]`

use enigma_kernels::two_pass_sum;
use enigma_runtime::{Arg, Device, DispatchMode, Options as DispatchOptions, Runtime};
use enigma_bench::{pass1_data, time_plain_sum, time_runs as time};
use std::time::Duration;

const USAGE: &str = "sanitizer_overhead [N]\n  Seed-001 pass 1 over N floats (default 2^20) on the simulator, plain and under the sanitizer, beside a plain Rust loop.";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let data = pass1_data(n);
    let plain_loop = time_plain_sum(9, &data);

    let rt = Runtime::new(Device::Sim).expect("the simulator is always available");
    let input = rt.buffer_from(&data).expect("allocation");
    let groups = two_pass_sum::pass1_threadgroups(n as u32);
    let partial = rt.buffer_zeroed::<f32>(groups as usize).expect("allocation");
    let pass1 = rt.pipeline(&two_pass_sum::reduce_threadgroup()).expect("pass 1 compiles");
    let args = [Arg::from(&input), Arg::from(&partial)];
    let run = |options: &DispatchOptions| {
        let report = rt
            .dispatch(&pass1, &args, DispatchMode::Threads, [n as u32, 1, 1], [two_pass_sum::PASS1_THREADS, 1, 1], options)
            .expect("pass 1 runs clean");
        assert!(report.findings.is_empty(), "pass 1 is a correct kernel: {:?}", report.findings);
    };
    let plain = time(5, || run(&DispatchOptions::default()));
    let one = time(5, || run(&DispatchOptions { sanitize: true, schedules: 1, ..Default::default() }));
    let three = time(5, || run(&DispatchOptions { sanitize: true, schedules: 3, ..Default::default() }));

    println!("device: {}; n = {n}; best / median of 5 (loop: 9) after a warm-up", rt.device().name);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    let row = |what: &str, (best, median): (Duration, Duration)| {
        println!(
            "{what:<44} {:>9.2} ms {:>9.2} ms {:>8.1}x {:>8.1}x {:>8.1}x",
            ms(best),
            ms(median),
            ratio(best, plain.0),
            ratio(median, plain.1),
            ratio(best, plain_loop.0)
        );
    };
    println!("{:<44} {:>12} {:>12} {:>9} {:>9} {:>9}", "what", "best", "median", "vs sim", "(median)", "vs loop");
    row("plain Rust loop", plain_loop);
    row("simulator, plain", plain);
    row("simulator + sanitizer, 1 schedule", one);
    row("simulator + sanitizer, 3 schedules (default)", three);
}
