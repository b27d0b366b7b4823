//! Multiply-accumulate throughput of register-resident SIMD-group matrices on
//! a CUDA GPU, for `bench/matrix_throughput.py` (which measures the raw
//! `mma.sync` ceiling beside it in the same run). Prints one JSON object.
//!
//! The kernel, written in enigma's IR: each SIMD group loads an `R × 16` A
//! tile and a `16 × C` B tile of f16 (or bf16) once, then runs
//! `acc = simdgroup_multiply_accumulate(a, b, acc)` `iters` times on an
//! `R × C` f32 accumulator and stores it (so nothing is dead code). Every
//! product is `2·R·C·16` flops; the time is the dispatch's CUDA-event device
//! time, median of the repeats.
//!
//! Usage (on a CUDA machine): `matrix_cuda [iters]`.

use enigma_ir::builder::*;
use enigma_ir::{Access, Kernel, Literal, MatrixType, Scalar, Type};
use enigma_runtime::{Arg, DispatchMode, Options};

/// Threadgroups per dispatch and threads per threadgroup.
const THREADGROUPS: u32 = 132 * 8;
const THREADS: u32 = 128;

fn kernel(elem: Scalar, rows: u8, cols: u8) -> Kernel {
    let mut k = KernelBuilder::new(format!("mma_throughput_{}_{rows}x{cols}", Type::scalar(elem)));
    let src = k.buffer("src", Type::scalar(elem), Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let iters = k.value("iters", Type::U32);
    let a = k.let_("a", matrix_load(MatrixType::new(elem, rows, 16), src, 0u32, 16u32, false));
    let b = k.let_("b", matrix_load(MatrixType::new(elem, 16, cols), src, 0u32, cols as u32, false));
    let acc_ty = MatrixType::new(Scalar::F32, rows, cols);
    let acc = k.var("acc", matrix_fill(acc_ty, 0.0f32));
    k.for_range("i", 0u32, iters, 1u32, |k, _| k.assign(acc, matrix_multiply_accumulate(a, b, acc)));
    let group = k.let_("group", threadgroup_position_in_grid().x() * (THREADS / 32) + simdgroup_index_in_threadgroup());
    k.matrix_store(acc, out, group * (rows as u32 * cols as u32), cols as u32, false);
    k.finish().unwrap_or_else(|e| panic!("{e}"))
}

const USAGE: &str = "matrix_cuda [ITERATIONS]\n  Multiply-accumulate throughput of register-resident SIMD-group matrices on a CUDA GPU (default 4096 iterations); one JSON object (bench/matrix_throughput.py).";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let iters: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(4096);
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let mut rows = vec![];
    for elem in [Scalar::F16, Scalar::BF16] {
        for (r, c) in [(8, 8), (16, 16), (32, 32), (64, 32), (64, 64)] {
            let k = kernel(elem, r, c);
            let pipeline = rt.pipeline(&k).unwrap_or_else(|e| panic!("{e}"));
            // Small values: the sums stay finite over any number of iterations.
            let src = enigma_ops::upload(&rt, elem, &vec![1.0 / 4096.0; 64 * 64]).unwrap();
            let groups = THREADGROUPS * THREADS / 32;
            let out = rt.buffer_zeroed::<f32>(groups as usize * r as usize * c as usize).unwrap();
            let args = [Arg::from(&src), Arg::from(&out), Arg::Value(Literal::u32(iters))];
            let mut times: Vec<f64> = (0..13)
                .map(|_| {
                    let report = rt.dispatch(&pipeline, &args, DispatchMode::Threadgroups, [THREADGROUPS, 1, 1], [THREADS, 1, 1], &Options::default()).unwrap();
                    report.device_time.unwrap_or(report.wall_time).as_secs_f64()
                })
                .skip(3)
                .collect();
            times.sort_by(f64::total_cmp);
            let t = times[times.len() / 2];
            let flops = 2.0 * r as f64 * c as f64 * 16.0 * iters as f64 * groups as f64;
            eprintln!("{} {r}x{c}: {:.1} TFLOP/s", k.name, flops / t / 1e12);
            rows.push(serde_json::json!({ "kernel": k.name, "elem": Type::scalar(elem).to_string(), "rows": r, "cols": c, "seconds": t, "tflops": flops / t / 1e12 }));
        }
    }
    println!("{}", serde_json::json!({ "device": rt.device().name, "iters": iters, "threadgroups": THREADGROUPS, "threads": THREADS, "rows": rows }));
}
