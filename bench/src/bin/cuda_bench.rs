//! enigma on a CUDA GPU, for `bench/cuda_vs_torch.py`: the two-pass sum of
//! 2^28 f32 (the seed-001 pass 1 with one element per thread, and the
//! grid-stride float4 pass 1), and the host overhead of one small dispatch.
//! Prints one JSON object; the Python script measures torch on the same
//! sizes in the same run and prints the side-by-side table.
//!
//! Run on a CUDA machine: `cuda_bench [log2_n]`.

use enigma_ir::{Scalar, Type};
use enigma_kernels::two_pass_sum;
use enigma_runtime::Arg;
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

const USAGE: &str = "cuda_bench [LOG2_N]\n  The two-pass sum of 2^LOG2_N f32 (default 28) and the host overhead of one dispatch on a CUDA GPU; one JSON object (bench/cuda_vs_torch.py).";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let log2_n: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(28);
    let n = 1usize << log2_n;
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    // Values in [0, 1): no cancellation, so the relative error measures the
    // summation (a zero-mean input would make any error look large).
    let data: Vec<f32> = (0..n).map(|i| ((i as u64 * 2654435761) % 1000) as f32 * 1e-3).collect();
    let want = two_pass_sum::reference_sum(&data);
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    let input = rt.buffer_from_bytes(Type::F32, &bytes).expect("input");
    let input4 = rt.buffer_from_bytes(Type::vector(Scalar::F32, 4), &bytes).expect("input");
    let p1 = rt.pipeline(&two_pass_sum::reduce_threadgroup()).expect("pass 1");
    let p1v = rt.pipeline(&two_pass_sum::reduce_threadgroup_vec4()).expect("pass 1 vec4");
    let p2 = rt.pipeline(&two_pass_sum::reduce_final()).expect("pass 2");
    let cores = rt.device().compute_units;
    let result = rt.buffer_zeroed::<f32>(1).expect("result");
    let pass2 = [two_pass_sum::PASS2_THREADS, 1, 1];

    // Seed-style pass 1: one element per thread.
    let groups = two_pass_sum::pass1_threadgroups(n as u32);
    let partial = rt.buffer_zeroed::<f32>(groups as usize).expect("partials");
    let seed_style = || -> (Duration, f32) {
        let a = rt.dispatch_threads(&p1, &[Arg::from(&input), Arg::from(&partial)], [n as u32, 1, 1], [two_pass_sum::PASS1_THREADS, 1, 1]).expect("pass 1");
        let b = rt.dispatch_threads(&p2, &[Arg::from(&partial), Arg::from(&result), Arg::u32(groups)], pass2, pass2).expect("pass 2");
        (a.device_time.unwrap_or_default() + b.device_time.unwrap_or_default(), result.to_vec::<f32>().expect("read")[0])
    };
    // Grid-stride float4 pass 1: 8 threadgroups of 256 per SM.
    let groups4 = cores * 8;
    let partial4 = rt.buffer_zeroed::<f32>(groups4 as usize).expect("partials");
    let strided = || -> (Duration, f32) {
        let args = [Arg::from(&input4), Arg::from(&partial4), Arg::u32((n / 4) as u32)];
        let a = rt.dispatch_threadgroups(&p1v, &args, [groups4, 1, 1], [two_pass_sum::PASS1_THREADS, 1, 1]).expect("pass 1");
        let b = rt.dispatch_threads(&p2, &[Arg::from(&partial4), Arg::from(&result), Arg::u32(groups4)], pass2, pass2).expect("pass 2");
        (a.device_time.unwrap_or_default() + b.device_time.unwrap_or_default(), result.to_vec::<f32>().expect("read")[0])
    };
    let mut rows = vec![];
    for (name, f) in [("two_pass_seed_style", &seed_style as &dyn Fn() -> (Duration, f32)), ("two_pass_vec4_strided", &strided)] {
        f();
        let mut times = vec![];
        let mut got = 0.0;
        for _ in 0..20 {
            let (t, r) = f();
            times.push(t.as_secs_f64());
            got = r;
        }
        let t = median(times);
        rows.push(format!(
            "{{\"name\": \"{name}\", \"n\": {n}, \"seconds\": {t:e}, \"tb_per_s\": {:.4}, \"result\": {got}, \"reference\": {want}, \"rel_error\": {:e}}}",
            n as f64 * 4.0 / t / 1e12,
            ((got as f64 - want) / want).abs()
        ));
    }
    // Host overhead: a one-threadgroup dispatch, compiled and cached, waited on.
    let tiny = rt.buffer_zeroed::<f32>(32).expect("tiny");
    let tiny_args = [Arg::from(&tiny), Arg::from(&result), Arg::u32(32)];
    for _ in 0..100 {
        rt.dispatch_threads(&p2, &tiny_args, [32, 1, 1], [32, 1, 1]).expect("tiny");
    }
    let mut walls = vec![];
    let mut devices = vec![];
    for _ in 0..2000 {
        let t = Instant::now();
        let r = rt.dispatch_threads(&p2, &tiny_args, [32, 1, 1], [32, 1, 1]).expect("tiny");
        walls.push(t.elapsed().as_secs_f64());
        devices.push(r.device_time.unwrap_or_default().as_secs_f64());
    }
    let (wall, device) = (median(walls), median(devices));
    rows.push(format!(
        "{{\"name\": \"small_dispatch\", \"wall_us\": {:.2}, \"device_us\": {:.2}, \"host_overhead_us\": {:.2}}}",
        wall * 1e6,
        device * 1e6,
        (wall - device) * 1e6
    ));
    println!("{{\"device\": {:?}, \"rows\": [{}]}}", rt.device().name, rows.join(", "));
}
