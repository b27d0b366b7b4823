//! The analysis subcommands of the `enigma` binary (`geometry`, `tiles`,
//! `occupancy`, `info`, `predict`), run as a user would, with their JSON checked against
//! numbers computed here from the seeds' formulas.

use std::process::{Command, Output};

use serde_json::Value;

fn enigma(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_enigma")).args(args).output().expect("run the enigma binary")
}

/// Runs a command that must succeed and print JSON.
fn json(args: &[&str]) -> Value {
    let out = enigma(args);
    assert!(out.status.success(), "enigma {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("enigma {args:?}: bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn dims(v: &Value) -> Vec<u64> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}")).iter().map(u).collect()
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

// ------------------------------------------------------------- geometry ---

#[test]
fn geometry_seed000_4000x3000() {
    let v = json(&["geometry", "--grid", "4000,3000", "--threads", "16,16", "--json"]);
    let (tx, ty) = (ceil_div(4000, 16), ceil_div(3000, 16));
    assert_eq!((tx, ty), (250, 188));
    assert_eq!(v["mode"], "threads");
    assert_eq!(dims(&v["threadgroups"]), vec![tx, ty, 1]);
    assert_eq!(u(&v["total_threadgroups"]), tx * ty);
    assert_eq!(u(&v["total_threads"]), 4000 * 3000);
    assert_eq!(u(&v["launched_threads"]), tx * ty * 256);
    assert_eq!(dims(&v["edge_threadgroup"]), vec![16, 3000 - 187 * 16, 1]);
    assert_eq!(u(&v["simdgroups_per_threadgroup"]), 8);
    for key in ["grid", "threads_per_threadgroup", "idle_lanes_per_threadgroup", "waste_percent", "warnings"] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
}

#[test]
fn geometry_100_thread_threadgroups_waste() {
    let v = json(&["geometry", "--grid", "10", "--threads", "100", "--mode", "threadgroups", "--json"]);
    assert_eq!(v["mode"], "threadgroups");
    assert_eq!(u(&v["simdgroups_per_threadgroup"]), ceil_div(100, 32));
    assert_eq!(u(&v["idle_lanes_per_threadgroup"]), 4 * 32 - 100);
    assert!((f(&v["waste_percent"]) - 28.0 / 128.0 * 100.0).abs() < 1e-9);
    assert_eq!(u(&v["total_threads"]), 1000);
    let warnings = v["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w.as_str().unwrap().contains("28 idle lanes")), "{warnings:?}");
}

#[test]
fn geometry_gemm_4096_cubed() {
    let v = json(&["geometry", "--grid", "64,128", "--threads", "128", "--mode", "threadgroups", "--json"]);
    assert_eq!(u(&v["total_threadgroups"]), (4096 / 64) * (4096 / 32));
    assert_eq!(u(&v["total_threads"]), 8192 * 128);
    assert_eq!(u(&v["total_threads"]), 1_048_576);
}

#[test]
fn geometry_seed003_cover_and_bounds_check() {
    let v = json(&["geometry", "--data", "1024,768", "--threads", "32,16", "--mode", "threadgroups", "--json"]);
    assert_eq!(dims(&v["threadgroups"]), vec![32, 48, 1]);
    assert_eq!(u(&v["total_threadgroups"]), 1_536);
    assert_eq!(u(&v["total_threads"]), 786_432);
    assert_eq!(v["needs_bounds_check"], false);

    let v = json(&["geometry", "--data", "1920,1080", "--threads", "32,16", "--mode", "threadgroups", "--json"]);
    let launched = ceil_div(1920, 32) * ceil_div(1080, 16) * 512;
    assert_eq!(u(&v["total_threads"]), launched);
    assert_eq!(v["needs_bounds_check"], true);
    assert_eq!(u(&v["out_of_bounds_threads"]), launched - 1920 * 1080);

    // dispatch_threads covers exactly the grid.
    let v = json(&["geometry", "--grid", "1920,1080", "--threads", "32,16", "--json"]);
    assert_eq!(u(&v["total_threads"]), 1920 * 1080);
    assert_eq!(dims(&v["edge_threadgroup"]), vec![32, 1080 % 16, 1]);
}

#[test]
fn geometry_too_few_threadgroups_for_the_device() {
    let v = json(&["geometry", "--grid", "2", "--threads", "256", "--mode", "threadgroups", "--device", "M4", "--json"]);
    let warnings: Vec<&str> = v["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert!(warnings.iter().any(|w| w.contains("10 cores") && w.contains("8 cores idle")), "{warnings:?}");
}

#[test]
fn geometry_rejects_a_4096_thread_threadgroup() {
    let out = enigma(&["geometry", "--grid", "4096", "--threads", "4096"]);
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("threadgroup of 4096 threads (4096×1×1) exceeds the maximum of 1024"), "{err}");
    let out = enigma(&["geometry", "--grid", "0,4", "--threads", "32"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("x axis is 0"));
}

#[test]
fn geometry_human_output() {
    let out = enigma(&["geometry", "--grid", "4000,3000", "--threads", "16,16", "--device", "m2-ultra"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("250×188×1 = 47,000"), "{text}");
    assert!(text.contains("12,000,000") && text.contains("12,032,000"), "{text}");
    assert!(text.contains("better 304+"), "{text}");
}

// ---------------------------------------------------------------- tiles ---

#[test]
fn tiles_64x64x32_separate_on_m4_max() {
    let v = json(&["tiles", "--m", "64", "--n", "64", "--k", "32", "--json"]);
    let (m, n, k) = (64.0, 64.0, 32.0);
    let bytes = 4.0 * k * (m + n);
    assert_eq!(f(&v["tg_memory_bytes"]), bytes);
    assert!((f(&v["budget_percent"]) - bytes / 32768.0 * 100.0).abs() < 1e-9);
    assert_eq!(v["fits"], true);
    assert_eq!(u(&v["tgs_per_core"]), (32768.0 / bytes) as u64);
    assert_eq!(u(&v["threads_per_core"]), 2 * 128);
    assert_eq!(u(&v["accumulators_per_simdgroup"]), (32 / 8) * (32 / 8));
    let ai = 2.0 * m * n * k / (m * k * 2.0 + k * n * 0.5);
    assert!((f(&v["arithmetic_intensity"]) - ai).abs() < 1e-9);
    let balance = 32e12 / 546e9;
    assert!((f(&v["machine_balance"]) - balance).abs() < 1e-9);
    assert_eq!(v["bound"], if ai < balance { "memory" } else { "compute" });
}

#[test]
fn tiles_fused_32x128x32_and_weights() {
    let v = json(&["tiles", "--m", "32", "--n", "128", "--k", "32", "--variant", "fused", "--json"]);
    let bytes = 2 * 32 * 32 + 4 * 128;
    assert_eq!(u(&v["tg_memory_bytes"]), bytes);
    assert_eq!(u(&v["tgs_per_core"]), 32_768 / bytes);
    assert_eq!(u(&v["threads_per_core"]), 12 * 128);
    assert_eq!(v["bound"], "compute"); // 64.0 ≥ 58.6
    let v = json(&["tiles", "--m", "32", "--n", "128", "--k", "32", "--weights", "fp16", "--json"]);
    assert!((f(&v["arithmetic_intensity"]) - 262_144.0 / (2_048.0 + 8_192.0)).abs() < 1e-9); // 25.6, not the seed's 32.0
    let v = json(&["tiles", "--m", "64", "--n", "64", "--k", "32", "--weights", "int4", "--json"]);
    assert!((f(&v["dequant_overhead_percent"]) - 32.0 * 64.0 * 4.0 / 262_144.0 * 100.0).abs() < 1e-9);
}

#[test]
fn tiles_64x64x64_separate_is_rejected() {
    let out = enigma(&["tiles", "--m", "64", "--n", "64", "--k", "64", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(u(&v["tg_memory_bytes"]), 4 * 64 * (64 + 64));
    assert_eq!(f(&v["budget_percent"]), 100.0);
    assert_eq!(v["fits"], false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rejected") && err.contains("100 %"), "{err}");
}

#[test]
fn tiles_select_and_waves_for_a_problem() {
    let v = json(&["tiles", "--problem", "4096,4096,4096", "--json"]);
    // select_tile: M > 256 → 128x128x16.
    assert_eq!((u(&v["tile"]["m"]), u(&v["tile"]["n"]), u(&v["tile"]["k"])), (128, 128, 16));
    let p = &v["problem"];
    assert_eq!(dims(&p["output_tiles"]), vec![4096 / 128, 4096 / 128]);
    let tiles = 32 * 32;
    let tgs = 32_768 / (4 * 16 * (128 + 128)); // 2
    let slots = 40 * tgs;
    assert_eq!(u(&p["waves"]["concurrent_threadgroups"]), slots);
    assert_eq!(u(&p["waves"]["waves"]), ceil_div(tiles, slots));
    let v = json(&["tiles", "--problem", "8,4096,4096", "--json"]);
    assert_eq!((u(&v["tile"]["m"]), u(&v["tile"]["n"])), (32, 128));
}

#[test]
fn tiles_unknown_balance_and_overrides() {
    let v = json(&["tiles", "--m", "64", "--n", "64", "--k", "32", "--device", "m1", "--json"]);
    assert_eq!(v["bound"], "unknown");
    assert!(v["machine_balance"].is_null());
    let v = json(&["tiles", "--m", "64", "--n", "64", "--k", "32", "--device", "m1", "--tflops", "2.6", "--bandwidth", "68", "--json"]);
    assert!((f(&v["machine_balance"]) - 2.6e12 / 68e9).abs() < 1e-9);
    assert_eq!(v["bound"], "compute"); // 51.2 ≥ 38.2
}

#[test]
fn tiles_errors() {
    let out = enigma(&["tiles", "--m", "60", "--n", "64", "--k", "32"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a multiple of the 8×8"));
    let out = enigma(&["tiles", "--m", "64", "--n", "64", "--k", "32", "--device", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown device `nope`"));
    let out = enigma(&["tiles"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn tiles_seed_tables_flag_the_seed_errors() {
    let v = json(&["tiles", "--seed-tables", "--json"]);
    let d = v["discrepancies"].as_array().unwrap();
    assert_eq!(d.len(), 16);
    let fp16 = d
        .iter()
        .find(|d| d["section"] == "§5.2" && d["quantity"] == "AI (FP16 weights)")
        .expect("the §5.2 32x128x32 slip is flagged");
    assert_eq!(fp16["seed_printed"], "32.0");
    assert_eq!(fp16["computed"], "25.6");
    assert!(v["tables"].as_array().unwrap().len() >= 20);

    let out = enigma(&["tiles", "--seed-tables", "--seed", "002"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SEED DISAGREES") && text.contains("seed prints"), "{text}");
    // Readable without the seeds: what they are, what the columns mean, and
    // which document each table comes from.
    assert!(text.starts_with("The seeds are the five documents enigma was written from"), "{text}");
    assert!(text.contains("`seed prints` the seed's"), "{text}");
    assert!(text.contains("\nseed 002 (tile sizing for quantized GEMM on the M4 Max) §1 — Hardware parameters"), "{text}");
    assert!(text.contains("16 disagree"), "{}", text.lines().rev().take(20).collect::<Vec<_>>().join("\n"));
    let v = json(&["tiles", "--seed-tables", "--seed", "004", "--json"]);
    assert_eq!(v["discrepancies"].as_array().unwrap().len(), 0);
}

// ------------------------------------------------------------ occupancy ---

#[test]
fn occupancy_fused_64x64x32() {
    let v = json(&["occupancy", "--tg-memory", "4608", "--threads", "128", "--json"]);
    assert_eq!(u(&v["threadgroups_per_core"]), 32_768 / 4_608);
    assert_eq!(u(&v["threads_per_core"]), (32_768 / 4_608) * 128);
    assert_eq!(u(&v["concurrent_threadgroups"]), 7 * 40);
    assert_eq!(v["limiter"], "threadgroup_memory");
    let v = json(&["occupancy", "--tg-memory", "16384", "--threads", "16,16", "--device", "m1-pro", "--json"]);
    assert_eq!(u(&v["threadgroups_per_core"]), 2);
    assert_eq!(u(&v["threads_per_threadgroup"]), 256);
    assert_eq!(u(&v["concurrent_threadgroups"]), 2 * 16);
}

#[test]
fn occupancy_errors() {
    let out = enigma(&["occupancy", "--tg-memory", "40000", "--threads", "128"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("40000") && err.contains("32768"), "{err}");
    let out = enigma(&["occupancy", "--tg-memory", "0", "--threads", "2048"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exceeds the maximum of 1024"));
}

// ----------------------------------------------------------------- info ---

#[test]
fn info_catalog() {
    let v = json(&["info", "--catalog", "--json"]);
    let cat = v["catalog"].as_array().unwrap();
    assert_eq!(cat.len(), 12);
    let max = cat.iter().find(|d| d["id"] == "m4-max").unwrap();
    assert_eq!(u(&max["gpu_cores"]), 40);
    assert_eq!(f(&max["memory_bandwidth_gb_s"]), 546.0);
    let m1 = cat.iter().find(|d| d["id"] == "m1").unwrap();
    assert_eq!((u(&m1["gpu_cores_min"]), u(&m1["gpu_cores_max"])), (7, 8));
    let out = enigma(&["info"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Apple M2 Ultra") && text.contains("devices on this machine"), "{text}");
    let out = enigma(&["info", "--catalog"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("devices on this machine"));
}

/// `enigma info` lists the simulator with its limits, and every GPU backend
/// either with what it reports (the cooperative-tensor lowering its backend
/// compiles with among it) or with the reason it is unavailable.
#[test]
fn info_lists_runtime_devices() {
    let v = json(&["info", "--json"]);
    let devices = v["devices"].as_array().unwrap();
    let names: Vec<&str> = devices.iter().map(|d| d["device"].as_str().unwrap()).collect();
    assert_eq!(names, ["sim", "cuda", "metal"]);
    let sim = &devices[0];
    assert_eq!(sim["available"], true);
    assert_eq!(u(&sim["max_threads_per_threadgroup"]), 1024);
    assert_eq!(u(&sim["simd_width"]), 32);
    assert_eq!(sim["cooperative_lowering"], "reference");
    for d in &devices[1..] {
        if d["available"] == false {
            assert!(!d["reason"].as_str().unwrap().is_empty(), "{d}");
        } else {
            assert_eq!(u(&d["simd_width"]), 32, "{d}");
            let lowerings: &[&str] = if d["device"] == "cuda" { &["wgmma", "scalar"] } else { &["metal_performance_primitives", "simdgroup_matrix"] };
            assert!(lowerings.contains(&d["cooperative_lowering"].as_str().unwrap_or("none")), "{d}");
        }
    }
    let out = enigma(&["info"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sim: cooperative tensors: the simulator's reference"), "{text}");
}

/// A reader that closes the pipe early (`enigma … | head`) ends the output
/// quietly: no panic report on stderr.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_enigma"))
        .args(["info", "--catalog"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // close the read end before anything is read
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

// -------------------------------------------------------------- predict ---

#[test]
fn predict_decode_on_the_m4_max_and_the_m5() {
    let v = json(&["predict", "attention-decode", "--shape", "1,32,8,8192,128", "--json"]);
    let all = v.as_array().unwrap();
    assert_eq!(all.len(), 2);
    // K and V of 8 heads × 8192 keys × 128, q and out of 32 heads, in f16.
    let bytes = (2.0 * 8.0 * 8192.0 * 128.0 + 2.0 * 32.0 * 128.0) * 2.0;
    for (p, device, gb_s) in [(&all[0], "Apple M4 Max", 546e9), (&all[1], "Apple M5", 153e9)] {
        assert_eq!(p["device"], device);
        assert!((f(&p["bytes"]) - bytes).abs() < 1e-6);
        assert!((f(&p["memory_seconds"]) - bytes / gb_s).abs() < 1e-15);
    }
    assert_eq!(all[0]["roof"], "memory");
    // The M5's FP16 throughput is not published: no compute roof.
    assert!(all[1]["compute_seconds"].is_null() && all[1]["seconds"].is_null());
    assert_eq!(all[1]["roof"], "unknown");
}

#[test]
fn predict_refuses_bad_shapes_and_devices() {
    for (args, needle) in [
        (vec!["predict", "gemm", "--shape", "0,3,4"], "M = 0"),
        (vec!["predict", "gemv", "--shape", "3,4,5"], "expected 2"),
        (vec!["predict", "attention-decode", "--shape", "1,32,5,64,128"], "not a multiple"),
        (vec!["predict", "qmatmul", "--shape", "1,64,100"], "must divide K"),
        (vec!["predict", "gemv", "--shape", "8,8", "--devices", "h200"], "unknown device"),
    ] {
        let out = enigma(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
