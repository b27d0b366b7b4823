//! Simulator throughput on seed-001 pass 1 over 2^24 floats, against a plain
//! Rust summation loop over the same data in the same run.
//!
//! Run: `cargo run --release -p enigma-bench --bin sim_throughput`
//!
//! The figure is elements per second (one element = one simulated thread of
//! pass 1, which runs about 15 IR operations), compared with the plain loop's
//! elements per second (one f32 add each).

use enigma_kernels::two_pass_sum;
use enigma_runtime::{Arg, Device, Runtime};
use enigma_bench::{pass1_data, time_plain_sum, time_runs};
use std::time::Duration;

const USAGE: &str = "sim_throughput [N]\n  Simulator throughput on seed-001 pass 1 over N floats (default 2^24), beside a plain Rust loop.";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1 << 24);
    let data = pass1_data(n);

    let (plain, _) = time_plain_sum(5, &data);

    let rt = Runtime::new(Device::Sim).expect("the simulator is always available");
    let input = rt.buffer_from(&data).expect("allocation");
    let groups = two_pass_sum::pass1_threadgroups(n as u32);
    let partial = rt.buffer_zeroed::<f32>(groups as usize).expect("allocation");
    let pass1 = rt.pipeline(&two_pass_sum::reduce_threadgroup()).expect("pass 1 compiles");
    let (sim, _) = time_runs(3, || {
        rt.dispatch_threads(&pass1, &[Arg::from(&input), Arg::from(&partial)], [n as u32, 1, 1], [two_pass_sum::PASS1_THREADS, 1, 1])
            .expect("pass 1 runs");
    });

    let per_sec = |d: Duration| n as f64 / d.as_secs_f64();
    println!("device: {}", rt.device().name);
    println!("elements: {n}");
    println!("plain Rust loop: {:>10.3} ms  {:>8.1} M elements/s", plain.as_secs_f64() * 1e3, per_sec(plain) / 1e6);
    println!("simulator pass1: {:>10.3} ms  {:>8.1} M elements/s (one thread of pass 1 each)", sim.as_secs_f64() * 1e3, per_sec(sim) / 1e6);
    println!("ratio (simulator time / plain loop time): {:.1}x", sim.as_secs_f64() / plain.as_secs_f64());
}
