//! The library GEMM (`enigma_kernels::library::gemm`) on a CUDA GPU, for
//! `bench/gemm_vs_torch.py`: for each input type, shape and tile
//! configuration it checks the result (512 sampled elements against their
//! f64 dot products, with the bound of the GEMM's own tests) and times the
//! dispatch (CUDA-event device time, median of the repeats after a
//! warm-up). Prints one JSON object.
//!
//! Usage (on a CUDA machine; every flag is optional):
//!
//! ```text
//! gemm_cuda [--dtypes f16,bf16,f32] [--shapes 4096x4096x4096,1024x1024x1024]
//!           [--tiles 128x128x32/2x4,128x256x32/2x4] [--stages 1,2,3] [--repeats 20]
//!           [--whole 1] [--output f32|input] [--batch 1] [--coop 128x256x64/4,...]
//! ```
//! `--batch B` multiplies B independent products of each shape at once
//! (`Ops::matmul_batched`; each kernel over the grid's third dimension, as
//! `enigma.ops.bmm` runs them), the samples spread over the batch.
//! `--coop` lists the cooperative configurations `TMxTNxTK/STAGES` run
//! instead of `COOP_SWEEP` (bands of 8 rows of tiles), `TMxTNxTK/STAGESp`
//! the persistent kernel (one threadgroup per multiprocessor),
//! `TMxTNxTK/STAGESt` the kernel staged by tile copies.
//! `--output input` writes C in the input type, as `torch.matmul` does
//! (default f32).
//! `--whole 1` also runs each pipelined tile as its whole-tile kernel
//! (`Edges::WholeTiles`) on the shapes it divides.
//! `--stages` lists the stage counts each tile runs with (default 1 and 2:
//! staging through registers, and two stages filled by asynchronous
//! copies); counts whose threadgroup memory does not fit are skipped.
//! A tile is `TMxTNxTK/ROWSxCOLS` (the SIMD-group grid); without `--tiles`
//! each type runs its default configuration and the sweep below. Each shape
//! also runs `Ops::matmul`'s own plan (`"kernel": "ops.matmul …"`: the tile
//! for its rows and K split over threadgroups where the output has few
//! tiles, for f32 the SIMT kernel; the time is the sum of its dispatches).
//! f32 also runs the SIMT kernel (`enigma_kernels::library::sgemm`) in the
//! configurations of `SIMT_SWEEP`; f16 and bf16 the GEMM on cooperative
//! tensors (`enigma_kernels::library::gemm::cooperative`) in the
//! configurations of `COOP_SWEEP` where the device runs them on `wgmma`
//! and the shape has whole 16-byte copies.

use enigma_ir::Literal;
use enigma_kernels::library::gemm::{CoopGemmConfig, GemmConfig, GemmPlan};
use enigma_kernels::library::tile::{GemmTile, TileShape};
use enigma_kernels::library::sgemm::SgemmConfig;
use enigma_kernels::library::DType;
use enigma_ops::{download, quantize, upload};
use enigma_runtime::{Arg, DispatchMode, Options};
use std::time::Duration;

/// A tile: TM, TN, TK and the SIMD-group grid's rows and columns.
type Tile = (u32, u32, u32, u32, u32);

/// Tiles tried beside each type's default (those that do not fit are skipped).
const SWEEP: [Tile; 6] =
    [(128, 128, 32, 2, 2), (128, 256, 32, 2, 4), (256, 128, 32, 4, 2), (128, 64, 32, 2, 2), (64, 64, 32, 2, 2), (64, 128, 32, 2, 2)];

/// SIMT kernels tried for f32: (threads, K values per slice) — the
/// default's 8×8 blocks over the threads (4×4 above 256).
const SIMT_SWEEP: [(u32, u32); 5] = [(256, 8), (256, 16), (128, 8), (128, 16), (64, 8)];

/// A cooperative configuration: tm, tn, tk, stages, rows of tiles per
/// band, persistent, staged by tile copies.
type Coop = (u32, u32, u32, u32, u32, bool, bool);

/// Cooperative GEMM configurations tried for f16 and bf16.
const COOP_SWEEP: [Coop; 7] =
    [(128, 256, 64, 4, 1, false, false), (128, 256, 64, 4, 8, false, false), (128, 256, 64, 4, 8, true, false), (128, 256, 64, 4, 16, false, false), (128, 256, 64, 3, 8, false, false), (128, 256, 128, 2, 8, false, false), (128, 128, 64, 3, 8, false, false)];

/// A kernel of the sweep's name: its configuration's.
fn name(plan: &GemmPlan) -> String {
    match plan {
        GemmPlan::Matrices(cfg) => cfg.name(),
        GemmPlan::Simt(cfg) => cfg.name(),
        GemmPlan::Cooperative(cfg) => cfg.name(),
    }
}

/// A kernel of the sweep's threads per threadgroup and threadgroup memory.
fn footprint(plan: &GemmPlan) -> (u32, u64) {
    match plan {
        GemmPlan::Matrices(cfg) => (cfg.threads(), cfg.threadgroup_memory_bytes()),
        GemmPlan::Simt(cfg) => (cfg.threads(), cfg.threadgroup_memory_bytes()),
        GemmPlan::Cooperative(cfg) => (cfg.threads(), cfg.memory_bytes()),
    }
}

fn numbers(text: &str, sep: char) -> Vec<u32> {
    text.split(sep).map(|p| p.trim().parse().unwrap_or_else(|_| panic!("`{p}` in `{text}` is not a number"))).collect()
}

const USAGE: &str = "gemm_cuda [--dtypes f16,bf16,f32] [--shapes MxNxK,...] [--tiles TMxTNxTK/RxC,...] [--stages 1,2,3] [--repeats N] [--whole 1] [--output f32|input] [--batch B] [--coop TMxTNxTK/S,...]\n  The library GEMM on a CUDA GPU, checked and timed; one JSON object (bench/gemm_vs_torch.py).";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let mut dtypes = vec![DType::F16, DType::BF16, DType::F32];
    let mut shapes = vec![[4096, 4096, 4096], [1024, 1024, 1024]];
    let mut tiles: Option<Vec<Tile>> = None;
    let mut repeats = 20;
    let mut stage_counts = vec![1, 2];
    let mut whole = false;
    let mut output_is_input = false;
    let mut batch = 1u32;
    let mut coop: Vec<Coop> = COOP_SWEEP.to_vec();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).unwrap_or_else(|| panic!("{} needs a value", pair[0]));
        match pair[0].as_str() {
            "--dtypes" => dtypes = value.split(',').map(|d| DType::ALL.into_iter().find(|t| t.name() == d).unwrap_or_else(|| panic!("unknown type {d}"))).collect(),
            "--shapes" => shapes = value.split(',').map(|s| <[u32; 3]>::try_from(numbers(s, 'x')).expect("a shape is MxNxK")).collect(),
            "--tiles" => {
                tiles = Some(
                    value
                        .split(',')
                        .map(|t| {
                            let (tile, grid) = t.split_once('/').expect("a tile is TMxTNxTK/ROWSxCOLS");
                            let (t, g) = (numbers(tile, 'x'), numbers(grid, 'x'));
                            (t[0], t[1], t[2], g[0], g[1])
                        })
                        .collect(),
                )
            }
            "--stages" => stage_counts = numbers(value, ','),
            "--repeats" => repeats = numbers(value, ',')[0].max(1) as usize,
            "--whole" => whole = value == "1",
            "--output" => output_is_input = value == "input",
            "--batch" => batch = numbers(value, ',')[0].max(1),
            "--coop" => {
                coop = value
                    .split(',')
                    .map(|t| {
                        let (tile, stages) = t.split_once('/').expect("a cooperative configuration is TMxTNxTK/STAGES[p|t]");
                        let t = numbers(tile, 'x');
                        let (persistent, tiles) = (stages.ends_with('p'), stages.ends_with('t'));
                        (t[0], t[1], t[2], numbers(stages.trim_end_matches(['p', 't']), ',')[0], 8, persistent, tiles)
                    })
                    .collect()
            }
            other => panic!("unknown flag {other} (see the header of bench/src/bin/gemm_cuda.rs)"),
        }
    }
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let mut rows = vec![];
    for &dtype in &dtypes {
        let output = if output_is_input { dtype } else { DType::F32 };
        let default = GemmConfig::new(dtype, output);
        let limit = rt.device().max_threadgroup_memory_bytes;
        let mut configs = vec![GemmPlan::Matrices(default)];
        for &(tm, tn, tk, sg_rows, sg_cols) in tiles.as_deref().unwrap_or(&SWEEP) {
            for &stages in &stage_counts {
                let cfg = GemmPlan::Matrices(GemmConfig { tile: GemmTile::new(tm, tn, tk, sg_rows, sg_cols), stages, ..default });
                if matches!(cfg, GemmPlan::Matrices(c) if c.check(limit).is_ok()) && !configs.contains(&cfg) {
                    configs.push(cfg);
                }
            }
        }
        if dtype != DType::F32 && rt.device().wgmma() {
            for &(tm, tn, tk, stages, raster, persistent, tile_copies) in &coop {
                let cfg = CoopGemmConfig { input: dtype, output, tm, tn, tk, stages, raster, persistent, row_bias: false, staged: output == dtype, tile_copies };
                if cfg.check(limit).is_ok() {
                    configs.push(GemmPlan::Cooperative(cfg));
                }
            }
        }
        if dtype == DType::F32 {
            for (threads, tk) in SIMT_SWEEP {
                let cfg = SgemmConfig::new(DType::F32).with_threads(threads).map(|c| SgemmConfig { tile: TileShape { k: tk, ..c.tile }, ..c });
                if let Ok(cfg) = cfg.and_then(|c| c.check(limit).map(|()| c)) {
                    configs.push(GemmPlan::Simt(cfg));
                }
            }
        }
        for &[m, n, k] in &shapes {
            let (mu, nu, ku, bu) = (m as usize, n as usize, k as usize, batch as usize);
            let data = |len: usize, seed: u64| {
                let mut v = enigma_kernels::test_data(len, seed);
                quantize(dtype, &mut v);
                v
            };
            let (a, b) = (data(bu * mu * ku, 1), data(bu * ku * nu, 2));
            let (ab, bb) = (upload(&rt, dtype.scalar(), &a).unwrap(), upload(&rt, dtype.scalar(), &b).unwrap());
            let cb = upload(&rt, output.scalar(), &vec![0.0; bu * mu * nu]).unwrap();
            // 512 sampled elements against their f64 dot products: how many
            // are off by more than the GEMM tests' bound, and the largest error.
            let sampled = |got: &[f64]| {
                let mut failures = 0;
                let mut max_error = 0.0f64;
                let mut state = 0x9e37_79b9_7f4a_7c15u64;
                for _ in 0..512 {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let (i, j, l) = ((state % m as u64) as usize, ((state >> 32) % n as u64) as usize, ((state >> 16) % batch as u64) as usize);
                    let (a, b) = (&a[l * mu * ku..], &b[l * ku * nu..]);
                    let want: f64 = (0..ku).map(|p| a[i * ku + p] as f64 * b[p * nu + j] as f64).sum();
                    let error = (got[l * mu * nu + i * nu + j] - want).abs();
                    max_error = max_error.max(error);
                    // The GEMM tests' bound, plus C's own rounding when it is 16-bit.
                    let rounding = if output == DType::F32 { 0.0 } else { want.abs() / 256.0 };
                    if error.is_nan() || error > 4.0 * ku as f64 * f32::EPSILON as f64 + rounding {
                        failures += 1;
                    }
                }
                (failures, max_error)
            };
            // Ops::matmul's plan: its launches' device times summed.
            let ops = enigma_ops::Ops::new(&rt).with_options(enigma_ops::Options { elem: Some(dtype.scalar()), ..Default::default() });
            let mut plan = String::new();
            let mut result = None;
            let mut times: Vec<f64> = (0..3 + repeats)
                .map(|_| {
                    result = Some(ops.matmul_batched(&ab, &bb, bu, mu, nu, ku, output).unwrap_or_else(|e| panic!("{e}")));
                    let launches = ops.take_launches();
                    plan = launches.iter().map(|l| l.kernel.clone()).collect::<Vec<_>>().join(" + ");
                    launches.iter().map(|l| l.report.device_time.unwrap_or(l.report.wall_time).as_secs_f64()).sum()
                })
                .skip(3)
                .collect();
            times.sort_by(f64::total_cmp);
            let t = times[times.len() / 2];
            let tflops = 2.0 * batch as f64 * m as f64 * n as f64 * k as f64 / t / 1e12;
            let got = download(result.as_ref().expect("at least one run"), output.scalar(), bu * mu * nu).unwrap();
            let (failures, max_error) = sampled(&got);
            eprintln!("ops.matmul ({plan}) {batch}x{m}x{n}x{k}: {:.1} us, {tflops:.1} TFLOP/s, {failures} of 512 sampled elements off", t * 1e6);
            rows.push(serde_json::json!({
                "dtype": dtype.to_string(), "shape": [m, n, k], "batch": batch, "kernel": format!("ops.matmul: {plan}"), "default": false,
                "median_us": t * 1e6, "tflops": tflops, "sampled_failures": failures, "max_abs_error": max_error,
            }));
            let mut runs = configs.clone();
            if whole {
                for cfg in &configs {
                    if let GemmPlan::Matrices(c) = cfg {
                        let w = c.whole_tiles_for(m, n, k);
                        if w != *c {
                            runs.push(GemmPlan::Matrices(w));
                        }
                    }
                }
            }
            for cfg in &runs {
                if matches!(cfg, GemmPlan::Cooperative(_)) && !CoopGemmConfig::takes(n, k) {
                    continue;
                }
                let name = name(cfg);
                let pipeline = match rt.pipeline(&cfg.kernel()) {
                    Ok(p) => p,
                    Err(e) => {
                        rows.push(serde_json::json!({ "dtype": dtype.to_string(), "shape": [m, n, k], "kernel": name, "error": e.to_string() }));
                        continue;
                    }
                };
                let mut args = vec![
                    Arg::from(&ab),
                    Arg::from(&bb),
                    Arg::from(&cb),
                    Arg::Value(Literal::u32(m)),
                    Arg::Value(Literal::u32(n)),
                    Arg::Value(Literal::u32(k)),
                    Arg::Value(Literal::f32(1.0)),
                    Arg::Value(Literal::f32(0.0)),
                    // A's batch stride: consecutive matrices.
                    Arg::Value(Literal::u32(m * k)),
                ];
                // The vector views of A and B (the cooperative kernel has
                // none; the persistent one and the one staged by tile copies
                // take the batch's size).
                match cfg {
                    GemmPlan::Cooperative(c) if c.persistent || c.tile_copies => args.push(Arg::Value(Literal::u32(batch))),
                    GemmPlan::Cooperative(_) => {}
                    _ => args.extend([Arg::from(&ab), Arg::from(&bb)]),
                }
                let d = cfg.dispatch(m, n, batch, rt.device().compute_units);
                let run = || rt.dispatch(&pipeline, &args, DispatchMode::Threadgroups, d.size, d.threads, &Options::default());
                if let Err(e) = run() {
                    rows.push(serde_json::json!({ "dtype": dtype.to_string(), "shape": [m, n, k], "kernel": name, "error": e.to_string() }));
                    continue;
                }
                let got = download(&cb, output.scalar(), bu * mu * nu).unwrap();
                let (failures, max_error) = sampled(&got);
                let mut times: Vec<Duration> = (0..3 + repeats).map(|_| run().map(|r| r.device_time.unwrap_or(r.wall_time)).unwrap()).skip(3).collect();
                times.sort();
                let t = times[times.len() / 2].as_secs_f64();
                let tflops = 2.0 * batch as f64 * m as f64 * n as f64 * k as f64 / t / 1e12;
                eprintln!("{name} {batch}x{m}x{n}x{k}: {:.1} us, {tflops:.1} TFLOP/s, {failures} of 512 sampled elements off", t * 1e6);
                let (threads, memory) = footprint(cfg);
                rows.push(serde_json::json!({
                    "dtype": dtype.to_string(), "shape": [m, n, k], "batch": batch, "kernel": name, "default": *cfg == GemmPlan::Matrices(default),
                    "threads": threads, "threadgroup_memory_bytes": memory,
                    "median_us": t * 1e6, "tflops": tflops, "sampled_failures": failures, "max_abs_error": max_error,
                }));
            }
        }
    }
    println!("{}", serde_json::json!({ "device": rt.device().name, "rows": rows }));
}
