//! Library tuning sweeps on a CUDA GPU, for the measurements in
//! `bench/results/2026-11-23-h100-library-tuning.md`: each configuration of
//! an operation (threads per threadgroup, loads per thread, …) is timed
//! through the registry's benchmark (device time summed over the
//! operation's dispatches, median of 20 after 5 warm-ups) and its last
//! output checked against the f64 reference. Prints one line per
//! configuration, then a JSON array.
//!
//! Run on a CUDA machine: `tuning_cuda [name-filter ...]`.

use enigma_ops::{registry, AttentionOptions, Options, ScanOptions};
use enigma_runtime::Runtime;

/// The sweeps: an entry name and the options to time it with.
fn sweeps() -> Vec<(&'static str, String, Options)> {
    let mut out = vec![];
    for entry in ["prefix_sum_inclusive_f32"] {
        for (threads, items) in [(256, 1), (512, 2), (512, 4), (1024, 2)] {
            let o = Options { threads: Some(threads), scan: ScanOptions { items: Some(items) }, ..Options::default() };
            out.push((entry, format!("threads={threads} items={items}"), o));
        }
    }
    for entry in ["attention_decode_fused_f16", "attention_decode_fused_f32"] {
        for threads in [128, 256] {
            for splits in [17, 34, 68, 128] {
                let o = Options { threads: Some(threads), attention: AttentionOptions { splits: Some(splits), ..AttentionOptions::default() }, ..Options::default() };
                out.push((entry, format!("threads={threads} splits={splits}"), o));
            }
        }
    }
    out
}

const USAGE: &str = "tuning_cuda [NAME-FILTER ...]\n  The library tuning sweeps on a CUDA GPU (threads, loads per thread, splits), timed through the registry; one JSON object.";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let entries = registry();
    let mut rows = vec![];
    for (name, label, options) in sweeps() {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let Some(entry) = entries.iter().find(|e| e.name == name) else {
            println!("{name}: no such entry");
            continue;
        };
        let shape = entry.bench_shape.clone();
        let row = match entry.bench(&rt, &shape, &options, 5, 20, &mut |_, _| {}) {
            Ok(b) => {
                let median = b.median.as_secs_f64() * 1e6;
                let kernels: Vec<String> = b.launches.iter().map(|l| l.kernel.clone()).collect();
                println!("{name:28} {label:32} median {median:8.1} us  best {:8.1} us  ok {}  {}", b.best.as_secs_f64() * 1e6, b.check.passed, kernels.join(","));
                serde_json::json!({ "name": name, "config": label, "median_us": median, "best_us": b.best.as_secs_f64() * 1e6, "passed": b.check.passed, "kernels": kernels })
            }
            Err(e) => {
                println!("{name:28} {label:32} error: {e}");
                serde_json::json!({ "name": name, "config": label, "error": e.to_string() })
            }
        };
        rows.push(row);
    }
    if filters.is_empty() || filters.iter().any(|f| "rms_norm_f32".contains(f.as_str())) {
        rows.push(output_reuse(&rt));
    }
    if filters.is_empty() || filters.iter().any(|f| "prefix_sum_direct".contains(f.as_str())) {
        rows.push(scan_reuse(&rt));
    }
    println!("{}", serde_json::Value::Array(rows));
}

/// `rms_norm_f32_vec4_c8` at 8192×8192 dispatched directly, 20 times after 5
/// warm-ups, (a) into one output buffer made once, as the torch and Triton
/// timings do, and (b) into a fresh (zeroed) output buffer per run, as the
/// ops layer does: whether the registry's medians carry a cost of the fresh
/// allocation rather than of the kernel.
fn output_reuse(rt: &Runtime) -> serde_json::Value {
    use enigma_kernels::library::{norm, DType};
    use enigma_runtime::Arg;
    let (rows, d) = (8192u32, 8192u32);
    let elems = (rows * d) as usize;
    let values: Vec<f32> = (0..elems).map(|i| ((i * 7919 % 1000) as f32) / 500.0 - 1.0).collect();
    let weights: Vec<f32> = (0..d).map(|i| 0.5 + (i % 7) as f32 / 7.0).collect();
    let run = || -> Result<(f64, f64), enigma_ops::Error> {
        let x = enigma_ops::upload(rt, enigma_ir::Scalar::F32, &values)?;
        let w = enigma_ops::upload(rt, enigma_ir::Scalar::F32, &weights)?;
        let pipeline = rt.pipeline(&norm::rms_norm(DType::F32, 4, 8))?;
        let fixed = rt.buffer_bytes(elems * 4)?;
        let time = |fresh: bool| -> Result<f64, enigma_ops::Error> {
            let mut times = vec![];
            for i in 0..25 {
                let made;
                let y = if fresh {
                    made = rt.buffer_bytes(elems * 4)?;
                    &made
                } else {
                    &fixed
                };
                let args = [Arg::from(&x), Arg::from(&w), Arg::from(y), Arg::u32(d), Arg::f32(1e-5)];
                let report = rt.dispatch_threadgroups(&pipeline, &args, [rows, 1, 1], [256, 1, 1])?;
                if i >= 5 {
                    times.push(report.device_time.map(|t| t.as_secs_f64() * 1e6).unwrap_or(f64::NAN));
                }
            }
            times.sort_by(f64::total_cmp);
            Ok(times[times.len() / 2])
        };
        Ok((time(false)?, time(true)?))
    };
    match run() {
        Ok((reused, fresh)) => {
            println!("rms_norm_f32 direct dispatch: median {reused:.1} us into one reused output, {fresh:.1} us into a fresh output per run");
            serde_json::json!({ "name": "rms_norm_f32_direct", "reused_us": reused, "fresh_us": fresh })
        }
        Err(e) => {
            println!("rms_norm_f32 direct dispatch: error {e}");
            serde_json::json!({ "name": "rms_norm_f32_direct", "error": e.to_string() })
        }
    }
}

/// The 2^26 f32 inclusive prefix sum's dispatches (the default plan: 512
/// threads × 4 float4 loads) made directly, 20 times after 5 warm-ups,
/// into buffers made once, and into fresh (zeroed) ones per run as the ops
/// layer does: the sum of the dispatches' device times, median, and the
/// reused run's largest error relative to the f64 reference's last value.
fn scan_reuse(rt: &Runtime) -> serde_json::Value {
    use enigma_ir::Scalar;
    use enigma_kernels::library::scan::{self, BlockPass, ScanKind};
    use enigma_runtime::{Arg, Buffer};
    let n = 1usize << 26;
    let values: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1000) as f32) / 1000.0).collect();
    let run = || -> Result<(f64, f64, f64), enigma_ops::Error> {
        let plan = scan::plan(Scalar::F32, ScanKind::Inclusive, n, 4, scan::DEFAULT_THREADS, scan::DEFAULT_ITEMS)?;
        let x = enigma_ops::upload(rt, Scalar::F32, &values)?;
        let blocks: Vec<usize> = plan.levels.iter().map(|l| l.blocks as usize).collect();
        let make = || -> Result<(Buffer, Vec<Buffer>), enigma_ops::Error> {
            let y = rt.buffer_bytes(n * 4)?;
            let sums = blocks.iter().map(|&b| rt.buffer_bytes(b.div_ceil(4) * 16)).collect::<Result<Vec<_>, _>>()?;
            Ok((y, sums))
        };
        let items = plan.items;
        let mut pipelines = vec![];
        for (i, level) in plan.levels.iter().enumerate() {
            let pass = if i == 0 && plan.levels.len() > 1 { BlockPass::TotalOnly } else { BlockPass::ScanAndTotal };
            pipelines.push(rt.pipeline(&scan::scan_block(Scalar::F32, level.vec, level.kind, pass, items))?);
        }
        let last = rt.pipeline(&scan::scan_block(Scalar::F32, 4, ScanKind::Inclusive, BlockPass::ScanWithOffset, items))?;
        let adds = plan.levels.iter().map(|l| rt.pipeline(&scan::scan_add(Scalar::F32, l.vec, items))).collect::<Result<Vec<_>, _>>()?;
        let once = |y: &Buffer, sums: &[Buffer]| -> Result<f64, enigma_ops::Error> {
            let mut us = 0.0;
            let mut add = |r: enigma_runtime::DispatchReport| us += r.device_time.map(|t| t.as_secs_f64() * 1e6).unwrap_or(f64::NAN);
            for (i, level) in plan.levels.iter().enumerate() {
                let (input, output) = if i == 0 { (&x, y) } else { (&sums[i - 1], &sums[i - 1]) };
                let mut args = vec![Arg::from(input)];
                if i > 0 || plan.levels.len() == 1 {
                    args.push(Arg::from(output));
                }
                args.extend([Arg::from(&sums[i]), Arg::u32(level.n)]);
                add(rt.dispatch_threadgroups(&pipelines[i], &args, level.scan.size, level.scan.threads)?);
            }
            for (i, level) in plan.levels.iter().enumerate().rev() {
                let Some(dispatch) = level.add else { continue };
                if i == 0 {
                    let args = [Arg::from(&x), Arg::from(y), Arg::from(&sums[0]), Arg::u32(level.n)];
                    add(rt.dispatch_threadgroups(&last, &args, dispatch.size, dispatch.threads)?);
                } else {
                    let args = [Arg::from(&sums[i - 1]), Arg::from(&sums[i]), Arg::u32(level.n)];
                    add(rt.dispatch_threadgroups(&adds[i], &args, dispatch.size, dispatch.threads)?);
                }
            }
            Ok(us)
        };
        let median = |fresh: bool| -> Result<f64, enigma_ops::Error> {
            let (y, sums) = make()?;
            let mut times = vec![];
            for i in 0..25 {
                let t = if fresh {
                    let (y, sums) = make()?;
                    once(&y, &sums)?
                } else {
                    once(&y, &sums)?
                };
                if i >= 5 {
                    times.push(t);
                }
            }
            times.sort_by(f64::total_cmp);
            Ok(times[times.len() / 2])
        };
        let reused = median(false)?;
        let fresh = median(true)?;
        let (y, sums) = make()?;
        once(&y, &sums)?;
        let got = enigma_ops::download(&y, Scalar::F32, n)?;
        let want = scan::reference(ScanKind::Inclusive, &values.iter().map(|&v| v as f64).collect::<Vec<_>>());
        let scale = want[n - 1].abs().max(1.0);
        let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs() / scale).fold(0.0, f64::max);
        Ok((reused, fresh, err))
    };
    match run() {
        Ok((reused, fresh, err)) => {
            println!("prefix_sum_inclusive_f32 direct dispatches: median {reused:.1} us into reused buffers, {fresh:.1} us into fresh ones; max error / last value {err:.2e}");
            serde_json::json!({ "name": "prefix_sum_direct", "reused_us": reused, "fresh_us": fresh, "max_rel_error": err })
        }
        Err(e) => {
            println!("prefix_sum_inclusive_f32 direct dispatches: error {e}");
            serde_json::json!({ "name": "prefix_sum_direct", "error": e.to_string() })
        }
    }
}
