//! Cooperative tensor products (`matmul2d`) on a CUDA GPU, for
//! `bench/coop_throughput.py` (which measures a raw `wgmma` loop and
//! torch's matmul beside them in the same run). Prints one JSON object.
//!
//! * `throughput`: each threadgroup (8 SIMD groups, two warpgroups) fills a
//!   128×64 A tile and a 64×256 B tile of threadgroup memory once, then runs
//!   `matmul2d(128, 256, 64, multiply_accumulate)` `iters` times on a
//!   register-resident f32 accumulator and stores it. Each product is
//!   `2·128·256·64` flops.
//! * `gemm`: `C = A·B` at 4096³ with 128×256 output tiles, one
//!   `matmul2d` per 64-deep k tile filled by 16-byte asynchronous copies
//!   (one stage: copy, wait, product).
//! * `gemm3`: the same with three stages (the copies of k tile t + 2 in
//!   flight during the product of tile t), at 4096³ and 8192³.
//!
//! Times are CUDA-event device times, median of 10 after 3 warm-ups.
//!
//! Usage (on a CUDA machine): `coop_cuda [iters]`.

use enigma_ir::text::parse;
use enigma_ir::{Kernel, Literal, Scalar};
use enigma_runtime::{Arg, DispatchMode, Options, Pipeline, Runtime};

const THREADGROUPS: u32 = 132 * 2;

fn throughput_kernel(elem: &str) -> Kernel {
    let text = format!(
        "kernel coop_throughput_{elem}(src: device {elem} read, out: device f32 read_write, iters: u32) {{
    threadgroup As: {elem}[8192]
    threadgroup Bs: {elem}[16384]
    var i: u32
    cooperative c: cooperative_tensor<f32, 128, 256, simdgroups(8)>

    for i in (thread_index_in_threadgroup, 16384u32, 256u32) {{
        Bs[i] = src[(i % 4096u32)]
    }}
    for i in (thread_index_in_threadgroup, 8192u32, 256u32) {{
        As[i] = src[(i % 4096u32)]
    }}
    for i in (0u32, get_capacity(c), 1u32) {{
        c[i] = 0.0f32
    }}
    threadgroup_barrier(mem_threadgroup)
    for i in (0u32, iters, 1u32) {{
        matmul2d(matmul2d_descriptor(128, 256, 64, false, false, false, multiply_accumulate), simdgroups(8), tensor(As, 0u32, 64u32, 128u32, 1u32, 64u32), tensor(Bs, 0u32, 256u32, 64u32, 1u32, 256u32), c)
    }}
    cooperative_store(c, tensor(out, (threadgroup_position_in_grid.x * 32768u32), 256u32, 128u32, 1u32, 256u32))
}}
"
    );
    parse(&text).unwrap_or_else(|e| panic!("{e}"))
}

fn gemm_kernel(elem: &str) -> Kernel {
    let text = format!(
        "kernel coop_gemm_{elem}(A: device {elem} read, B: device {elem} read, C: device f32 read_write, M: u32, N: u32, K: u32) {{
    threadgroup As: {elem}[8192]
    threadgroup Bs: {elem}[16384]
    var row0: u32
    var col0: u32
    var kt: u32
    var i: u32
    var r: u32
    var cc: u32
    cooperative c: cooperative_tensor<f32, 128, 256, simdgroups(8)>

    row0 = (threadgroup_position_in_grid.y * 128u32)
    col0 = (threadgroup_position_in_grid.x * 256u32)
    for i in (0u32, get_capacity(c), 1u32) {{
        c[i] = 0.0f32
    }}
    for kt in (0u32, K, 64u32) {{
        for i in (thread_index_in_threadgroup, 1024u32, 256u32) {{
            r = (i / 8u32)
            cc = ((i % 8u32) * 8u32)
            async_copy(As[((r * 64u32) + cc)], A[((((row0 + r) * K) + kt) + cc)], 8, ((row0 + r) < M))
        }}
        for i in (thread_index_in_threadgroup, 2048u32, 256u32) {{
            r = (i / 32u32)
            cc = ((i % 32u32) * 8u32)
            async_copy(Bs[((r * 256u32) + cc)], B[((((kt + r) * N) + col0) + cc)], 8, ((col0 + cc) < N))
        }}
        async_commit()
        async_wait(0)
        threadgroup_barrier(mem_threadgroup)
        matmul2d(matmul2d_descriptor(128, 256, 64, false, false, false, multiply_accumulate), simdgroups(8), tensor(As, 0u32, 64u32, 128u32, 1u32, 64u32), tensor(Bs, 0u32, 256u32, 64u32, 1u32, 256u32), c)
        threadgroup_barrier(mem_threadgroup)
    }}
    cooperative_store(c, tensor(C, ((row0 * N) + col0), min(256u32, (N - col0)), min(128u32, (M - row0)), 1u32, N))
}}
"
    );
    parse(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// The copies of k tile `t` (k offset `kt`) into stage `s` of the
/// three-stage GEMM's arrays.
fn stage_copies(t: &str) -> String {
    format!(
        "s = ({t} % 3u32)
            kt = ({t} * 64u32)
            for i in (thread_index_in_threadgroup, 1024u32, 256u32) {{
                r = (i / 8u32)
                cc = ((i % 8u32) * 8u32)
                async_copy(As[(((s * 8192u32) + (r * 64u32)) + cc)], A[((((row0 + r) * K) + kt) + cc)], 8, (((row0 + r) < M) && ((kt + cc) < K)))
            }}
            for i in (thread_index_in_threadgroup, 2048u32, 256u32) {{
                r = (i / 32u32)
                cc = ((i % 32u32) * 8u32)
                async_copy(Bs[(((s * 16384u32) + (r * 256u32)) + cc)], B[((((kt + r) * N) + col0) + cc)], 8, (((col0 + cc) < N) && ((kt + r) < K)))
            }}"
    )
}

/// The GEMM with three stages: the copies of k tile t + 2 are in flight
/// while the product of tile t runs.
fn gemm3_kernel(elem: &str) -> Kernel {
    let text = format!(
        "kernel coop_gemm3_{elem}(A: device {elem} read, B: device {elem} read, C: device f32 read_write, M: u32, N: u32, K: u32) {{
    threadgroup As: {elem}[24576]
    threadgroup Bs: {elem}[49152]
    var row0: u32
    var col0: u32
    var nk: u32
    var kt: u32
    var t: u32
    var s: u32
    var i: u32
    var r: u32
    var cc: u32
    cooperative c: cooperative_tensor<f32, 128, 256, simdgroups(8)>

    row0 = (threadgroup_position_in_grid.y * 128u32)
    col0 = (threadgroup_position_in_grid.x * 256u32)
    nk = ((K + 63u32) / 64u32)
    for i in (0u32, get_capacity(c), 1u32) {{
        c[i] = 0.0f32
    }}
    for t in (0u32, 2u32, 1u32) {{
        if (t < nk) {{
            {first}
        }}
        async_commit()
    }}
    for t in (0u32, nk, 1u32) {{
        async_wait(1)
        threadgroup_barrier(mem_threadgroup)
        if ((t + 2u32) < nk) {{
            {next}
        }}
        async_commit()
        s = (t % 3u32)
        matmul2d(matmul2d_descriptor(128, 256, 64, false, false, false, multiply_accumulate), simdgroups(8), tensor(As, (s * 8192u32), 64u32, 128u32, 1u32, 64u32), tensor(Bs, (s * 16384u32), 256u32, 64u32, 1u32, 256u32), c)
    }}
    cooperative_store(c, tensor(C, ((row0 * N) + col0), min(256u32, (N - col0)), min(128u32, (M - row0)), 1u32, N))
}}
",
        first = stage_copies("t"),
        next = stage_copies("(t + 2u32)"),
    );
    parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The median device time of 10 dispatches after 3 warm-ups.
fn time(rt: &Runtime, p: &Pipeline, args: &[Arg<'_>], groups: [u32; 3]) -> f64 {
    let mut times: Vec<f64> = (0..13)
        .map(|_| {
            let report = rt.dispatch(p, args, DispatchMode::Threadgroups, groups, [256, 1, 1], &Options::default()).unwrap_or_else(|e| panic!("{e}"));
            report.device_time.unwrap_or(report.wall_time).as_secs_f64()
        })
        .skip(3)
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

const USAGE: &str = "coop_cuda [ITERATIONS]\n  Throughput of register-resident cooperative products (matmul2d 128x256x64, default 1024 iterations) and a 4096^3 GEMM on them, on a CUDA GPU; one JSON object (bench/coop_throughput.py).";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let iters: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let mut rows = vec![];
    for (elem, scalar) in [("f16", Scalar::F16), ("bf16", Scalar::BF16)] {
        let k = throughput_kernel(elem);
        let p = rt.pipeline(&k).unwrap_or_else(|e| panic!("{e}"));
        let src = enigma_ops::upload(&rt, scalar, &vec![1.0 / 4096.0; 4096]).unwrap();
        let out = rt.buffer_zeroed::<f32>(THREADGROUPS as usize * 128 * 256).unwrap();
        let t = time(&rt, &p, &[Arg::from(&src), Arg::from(&out), Arg::Value(Literal::u32(iters))], [THREADGROUPS, 1, 1]);
        let flops = 2.0 * 128.0 * 256.0 * 64.0 * iters as f64 * THREADGROUPS as f64;
        eprintln!("{}: {:.1} TFLOP/s", k.name, flops / t / 1e12);
        rows.push(serde_json::json!({ "kind": "throughput", "elem": elem, "seconds": t, "tflops": flops / t / 1e12 }));

        for (kind, g, n) in [("gemm", gemm_kernel(elem), 4096u32), ("gemm3", gemm3_kernel(elem), 4096), ("gemm3", gemm3_kernel(elem), 8192)] {
            let p = rt.pipeline(&g).unwrap_or_else(|e| panic!("{e}"));
            let values: Vec<f32> = (0..n * n).map(|i| ((i % 7) as f32 - 3.0) / 8.0).collect();
            let a = enigma_ops::upload(&rt, scalar, &values).unwrap();
            let b = enigma_ops::upload(&rt, scalar, &values).unwrap();
            let c = rt.buffer_zeroed::<f32>((n * n) as usize).unwrap();
            let args = [Arg::from(&a), Arg::from(&b), Arg::from(&c), Arg::u32(n), Arg::u32(n), Arg::u32(n)];
            let t = time(&rt, &p, &args, [n / 256, n / 128, 1]);
            // A spot check against a plain loop (the values make every sum exact).
            let got = c.to_vec::<f32>().unwrap();
            let last = n as usize - 1;
            for (i, j) in [(0usize, 0usize), (1, last), (last, 17), (2049, 2050), (127, 255), (128, 256)] {
                let want: f32 = (0..n as usize).map(|kk| values[i * n as usize + kk] * values[kk * n as usize + j]).sum();
                assert_eq!(got[i * n as usize + j], want, "{}: C[{i}][{j}]", g.name);
            }
            let flops = 2.0 * (n as f64).powi(3);
            eprintln!("{}: {n}^3 {:.1} us, {:.1} TFLOP/s", g.name, t * 1e6, flops / t / 1e12);
            rows.push(serde_json::json!({ "kind": kind, "elem": elem, "n": n, "seconds": t, "tflops": flops / t / 1e12 }));
        }
    }
    println!("{}", serde_json::json!({ "device": rt.device().name, "iters": iters, "threadgroups": THREADGROUPS, "rows": rows }));
}
