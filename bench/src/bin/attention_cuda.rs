//! Attention prefill (`enigma_ops::Ops::attention_prefill`) on a CUDA GPU,
//! for `bench/attention_vs_torch.py`. Two modes, one JSON object printed:
//!
//! ```text
//! attention_cuda bench [--repeats N] [--shapes B/H/HKV/SQ/SKV/D,...] [--dtypes f16,bf16] [--tiles all] [--plans default]
//! attention_cuda io DIR
//! ```
//! `bench` runs each shape in each type, not causal and causal (torch's
//! top-left alignment; the B16 H16 S1024 D64 shape not causal only, unless
//! shapes are given) with the library's plan, the plan of the other kernel
//! (on cooperative tensors or on SIMD-group matrices) and, for f16, every
//! block pair of the kernel on cooperative tensors (on a `wgmma` GPU), each
//! staged by tile copies (two and three stages) and by the threads' copies
//! (other types: the default blocks staged the other way) and,
//! with `--tiles all`, every tile of `TILES` at one and two stages
//! (`--plans default`: the library's plan alone); it
//! checks 32 sampled rows against their f64 reference and times the
//! dispatch (CUDA-event device time, median of the repeats after 3
//! warm-ups). `io` reads `DIR/cases.json` (`[{"name", "dtype",
//! "shape": [b, h, hkv, sq, skv, d], "mask": "none" | "top_left" |
//! "bottom_right", "scale"}]`) and each case's raw inputs `DIR/NAME.q`,
//! `.k`, `.v` (little-endian, in the case's type), and writes `DIR/NAME.out`
//! (the output, same type) and `DIR/NAME.lse` (f32), for the driver to
//! compare with torch.

use enigma_kernels::library::attention_prefill::{reference, Mask, PrefillConfig, PrefillKernel, PrefillPlan, PrefillShape, PrefillTile};
use enigma_kernels::library::attention_prefill_cooperative::CoopPrefillConfig;
use enigma_kernels::library::DType;
use enigma_ops::{download, quantize, upload, upload_bytes, AttentionOptions, Ops, Options};

const USAGE: &str = "attention_cuda bench [--repeats N] [--shapes B/H/HKV/SQ/SKV/D,...] [--dtypes f16,bf16] [--tiles all] [--plans default] | attention_cuda io DIR\n  Attention prefill on a CUDA GPU, checked and timed; one JSON object (bench/attention_vs_torch.py).";

fn dtype(name: &str) -> DType {
    DType::ALL.into_iter().find(|t| t.name() == name || (name == "f16" && *t == DType::F16)).unwrap_or_else(|| panic!("unknown type {name}"))
}

fn mask(name: &str) -> Mask {
    match name {
        "none" => Mask::None,
        "top_left" => Mask::TopLeft,
        "bottom_right" => Mask::BottomRight,
        other => panic!("unknown mask {other}"),
    }
}

fn shape(v: &[usize]) -> PrefillShape {
    PrefillShape { batch: v[0], heads: v[1], kv_heads: v[2], s_q: v[3], s_kv: v[4], d: v[5] }
}

fn ops(rt: &enigma_runtime::Runtime, dtype: DType) -> Ops<'_> {
    Ops::new(rt).with_options(Options { elem: Some(dtype.scalar()), ..Default::default() })
}

fn io(rt: &enigma_runtime::Runtime, dir: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(format!("{dir}/cases.json")).expect("cases.json");
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON list of cases");
    let mut rows = vec![];
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let dt = dtype(case["dtype"].as_str().expect("dtype"));
        let dims: Vec<usize> = case["shape"].as_array().expect("shape").iter().map(|x| x.as_u64().expect("a size") as usize).collect();
        let s = shape(&dims);
        let m = mask(case["mask"].as_str().expect("mask"));
        let scale = case["scale"].as_f64().map(|x| x as f32);
        let read = |ext: &str| upload_bytes(rt, std::fs::read(format!("{dir}/{name}.{ext}")).expect("an input file")).unwrap();
        let (q, k, v) = (read("q"), read("k"), read("v"));
        match ops(rt, dt).attention_prefill_lse(&q, &k, &v, s, m, scale) {
            Ok((out, lse)) => {
                let bytes = out.read_bytes().unwrap();
                std::fs::write(format!("{dir}/{name}.out"), &bytes[..s.q_len() * dt.size_bytes() as usize]).unwrap();
                let bytes = lse.read_bytes().unwrap();
                std::fs::write(format!("{dir}/{name}.lse"), &bytes[..s.rows() * 4]).unwrap();
                rows.push(serde_json::json!({ "name": name }));
            }
            Err(e) => rows.push(serde_json::json!({ "name": name, "error": e.to_string() })),
        }
    }
    serde_json::json!({ "device": rt.device().name, "rows": rows })
}

/// The tiles the benchmark compares on f16.
const TILES: [PrefillTile; 4] =
    [PrefillTile::PORTABLE, PrefillTile::WIDE, PrefillTile { block_q: 128, block_kv: 32 }, PrefillTile { block_q: 128, block_kv: 64 }];

/// 32 sampled rows of `got` against their f64 reference: how many elements
/// are off by more than the simulator tests' bound, and the largest error.
#[allow(clippy::too_many_arguments)]
fn sampled_check(got: &[f64], qh: &[f32], kh: &[f32], vh: &[f32], s: PrefillShape, m: Mask, dt: DType) -> (usize, f64) {
    let (mut failures, mut max_error) = (0usize, 0.0f64);
    let group = s.heads / s.kv_heads;
    for r in 0..32usize {
        let (b, h) = ((r * 7) % s.batch, (r * 13) % s.heads);
        let row = (r * 997 + 3) % s.s_q;
        let q_at = ((b * s.heads + h) * s.s_q + row) * s.d;
        let kv_at = ((b * s.kv_heads + h / group) * s.s_kv) * s.d;
        // The row alone: the keys it sees (a prefix, for the top-left
        // causal mask) with no mask.
        let keys = if m.is_causal() { (row + 1).min(s.s_kv) } else { s.s_kv };
        let one_row = PrefillShape { batch: 1, heads: 1, kv_heads: 1, s_q: 1, s_kv: keys, d: s.d };
        let (want, _) = reference(&qh[q_at..q_at + s.d], &kh[kv_at..kv_at + keys * s.d], &vh[kv_at..kv_at + keys * s.d], one_row, Mask::None, 1.0 / (s.d as f32).sqrt());
        for (c, w) in want.iter().enumerate() {
            let error = (got[q_at + c] - w).abs();
            max_error = max_error.max(error);
            if error.is_nan() || error > 3.0 * dt.unit_roundoff() * (1.0 + w.abs()) {
                failures += 1;
            }
        }
    }
    (failures, max_error)
}

fn bench(rt: &enigma_runtime::Runtime, args: &[String]) -> serde_json::Value {
    let mut repeats = 10;
    let mut every_tile = false;
    let mut only_default = false;
    let mut dtypes = vec![DType::F16, DType::BF16];
    let mut cases: Vec<(Vec<usize>, Mask)> = vec![
        (vec![4, 32, 32, 4096, 4096, 128], Mask::TopLeft),
        (vec![4, 32, 32, 4096, 4096, 128], Mask::None),
        (vec![16, 16, 16, 1024, 1024, 64], Mask::None),
    ];
    for pair in args.chunks(2) {
        let value = pair.get(1).unwrap_or_else(|| panic!("{} needs a value", pair[0]));
        match pair[0].as_str() {
            "--repeats" => repeats = value.parse::<usize>().expect("a number").max(1),
            "--dtypes" => dtypes = value.split(',').map(dtype).collect(),
            "--tiles" => every_tile = value == "all",
            "--plans" => only_default = value == "default",
            "--shapes" => {
                cases = value
                    .split(',')
                    .flat_map(|s| {
                        let dims: Vec<usize> = s.split('/').map(|x| x.parse().expect("a size")).collect();
                        [(dims.clone(), Mask::None), (dims, Mask::TopLeft)]
                    })
                    .collect()
            }
            other => panic!("unknown flag {other} (see the header of bench/src/bin/attention_cuda.rs)"),
        }
    }
    let mut rows = vec![];
    for &dt in &dtypes {
        for (dims, m) in &cases {
            let s = shape(dims);
            let data = |len: usize, seed: u64| {
                let mut x = enigma_kernels::test_data(len, seed);
                quantize(dt, &mut x);
                x
            };
            let (qh, kh, vh) = (data(s.q_len(), 1), data(s.kv_len(), 2), data(s.kv_len(), 3));
            let (q, k, v) = (upload(rt, dt.scalar(), &qh).unwrap(), upload(rt, dt.scalar(), &kh).unwrap(), upload(rt, dt.scalar(), &vh).unwrap());
            let default_plan = ops(rt, dt).attention_prefill_plan(&q, &k, &v, s, *m, false).expect("a plan");
            // The default plan; the other kernel's (each selection's choice
            // asked for); then (f16 only) every block pair of the kernel on
            // cooperative tensors that fits and, with `--tiles`, every tile
            // of the SIMD-group-matrix kernel at each stage count that fits.
            let mut plans = vec![default_plan];
            for cooperative in [true, false].into_iter().filter(|_| !only_default) {
                let asked = Ops::new(rt).with_options(Options {
                    elem: Some(dt.scalar()),
                    attention: AttentionOptions { prefill_cooperative: Some(cooperative), ..Default::default() },
                    ..Default::default()
                });
                if let Ok(plan) = asked.attention_prefill_plan(&q, &k, &v, s, *m, false) {
                    if !plans.contains(&plan) {
                        plans.push(plan);
                    }
                }
            }
            let memory = rt.device().max_threadgroup_memory_bytes;
            if dt == DType::F16 && rt.device().wgmma() && !only_default {
                for (block_q, block_kv) in [(64, 64), (128, 64), (64, 128), (128, 128)] {
                    for (tile_copies, stages) in [(true, 2), (false, 2), (true, 3)] {
                        let config = CoopPrefillConfig { dtype: dt, d: s.d as u32, causal: m.is_causal(), lse: false, block_q, block_kv, tile_copies, stages };
                        let plan = PrefillPlan { config: PrefillKernel::Cooperative(config), mask: *m, shape: s, dispatch: config.dispatch(s.s_q, s.heads, s.batch) };
                        if config.memory_bytes() <= memory && !plans.contains(&plan) {
                            plans.push(plan);
                        }
                    }
                }
            } else if let (PrefillKernel::Cooperative(c), false) = (default_plan.config, only_default) {
                // The default blocks staged the other way.
                let config = PrefillKernel::Cooperative(CoopPrefillConfig { tile_copies: !c.tile_copies, ..c });
                plans.push(PrefillPlan { config, ..default_plan });
            }
            if dt == DType::F16 && every_tile {
                for tile in TILES {
                    let with_tile = Ops::new(rt).with_options(Options {
                        elem: Some(dt.scalar()),
                        attention: AttentionOptions { prefill_tile: Some(tile), ..Default::default() },
                        ..Default::default()
                    });
                    let Ok(plan) = with_tile.attention_prefill_plan(&q, &k, &v, s, *m, false) else { continue };
                    let Some(config) = plan.config.matrices() else { continue };
                    for stages in [2, 1] {
                        let p = PrefillPlan { config: PrefillKernel::Matrices(PrefillConfig { stages, ..config }), ..plan };
                        if p.config.memory_bytes() <= memory && !plans.contains(&p) {
                            plans.push(p);
                        }
                    }
                }
            }
            for plan in &plans {
                let ops = ops(rt, dt);
                let mut result = None;
                let mut error = None;
                let mut times: Vec<f64> = Vec::new();
                for i in 0..3 + repeats {
                    match ops.attention_prefill_planned(plan, &q, &k, &v, None) {
                        Ok((out, _)) => result = Some(out),
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                    let launches = ops.take_launches();
                    if i >= 3 {
                        times.push(launches.iter().map(|l| l.report.device_time.unwrap_or(l.report.wall_time).as_secs_f64()).sum());
                    }
                }
                let kernel = plan.config.name();
                let (Some(out), None) = (result, &error) else {
                    rows.push(serde_json::json!({ "dtype": dt.to_string(), "shape": dims, "causal": m.is_causal(), "kernel": kernel, "error": error }));
                    continue;
                };
                times.sort_by(f64::total_cmp);
                let t = times[times.len() / 2];
                let flops = 4.0 * s.d as f64 * s.visible_pairs(*m) as f64;
                let got = download(&out, dt.scalar(), s.q_len()).unwrap();
                let (failures, max_error) = sampled_check(&got, &qh, &kh, &vh, s, *m, dt);
                eprintln!("{kernel} {dims:?}: {:.1} us, {:.1} TFLOP/s, {failures} sampled elements off (max error {max_error:.2e})", t * 1e6, flops / t / 1e12);
                rows.push(serde_json::json!({
                    "dtype": dt.to_string(), "shape": dims, "causal": m.is_causal(), "kernel": kernel, "default": plan == &default_plan,
                    "threadgroup_memory_bytes": plan.config.memory_bytes(),
                    "median_us": t * 1e6, "flops": flops, "tflops": flops / t / 1e12, "sampled_failures": failures, "max_abs_error": max_error,
                }));
            }
        }
    }
    serde_json::json!({ "device": rt.device().name, "rows": rows })
}

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let result = match args.first().map(String::as_str) {
        Some("io") => io(&rt, args.get(1).expect("io DIR")),
        Some("bench") => bench(&rt, &args[1..]),
        _ => panic!("{USAGE}"),
    };
    println!("{result}");
}
