//! `enigma run <kernel>`, `enigma run list` and `enigma bench`, run as a
//! user would, on the simulator.

use serde_json::Value;
use std::process::{Command, Output};

fn enigma(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_enigma")).args(args).output().expect("run the enigma binary")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs a command that must succeed and print one JSON value.
fn json(args: &[&str]) -> Value {
    let out = enigma(args);
    assert!(out.status.success(), "enigma {args:?} failed: {}{}", stdout(&out), stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("enigma {args:?}: bad JSON ({e}): {}", stdout(&out)))
}

/// Runs a command that must fail with exit status 2 and an error naming `what`.
fn fails(args: &[&str], what: &str) {
    let out = enigma(args);
    assert_eq!(out.status.code(), Some(2), "enigma {args:?}: {}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains(what), "enigma {args:?}: stderr lacks `{what}`: {}", stderr(&out));
}

#[test]
fn list_names_every_registry_entry() {
    let v = json(&["run", "list", "--json"]);
    let names: Vec<&str> = v.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    let registry: Vec<String> = enigma_ops::registry().into_iter().map(|e| e.name).collect();
    assert_eq!(names, registry);
    let text = stdout(&enigma(&["run", "list"]));
    for name in &registry {
        assert!(text.lines().any(|l| l.starts_with(&format!("{name} "))), "`{name}` missing from:\n{text}");
    }
}

#[test]
fn every_kernel_runs_and_checks_out() {
    for entry in enigma_ops::registry() {
        let shape = match entry.shape_names.len() {
            1 => "1001",
            2 => "3x33",
            // Fragment order needs N a multiple of 16.
            _ if entry.name.starts_with("qmatmul_fragments") => "2x48x128",
            // Depthwise convolution: batch x channels x h x w.
            4 => "2x3x5x16",
            // Batched attention decode: batch x q_heads x kv_heads x s_len x d.
            5 => "2x4x2x40x128",
            // batch x heads x kv_heads x s_q x s_kv x d.
            6 => "1x2x1x40x33x64",
            _ => "2x40x128",
        };
        let v = json(&["run", &entry.name, "--device", "sim", "--shape", shape, "--json"]);
        assert_eq!(v["kernel"], entry.name.as_str());
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["failures"], 0, "{v}");
        assert!(v["device"].as_str().unwrap().starts_with("sim"), "{v}");
        assert!(!v["dispatches"].as_array().unwrap().is_empty(), "{v}");
    }
}

#[test]
fn dtype_shape_threads_and_sanitize_options() {
    let v = json(&["run", "softmax", "--dtype", "f16", "--shape", "3x33", "--threads", "64", "--sanitize", "--device", "sim", "--json"]);
    assert_eq!(v["kernel"], "softmax_f16");
    assert_eq!(v["shape"], serde_json::json!([3, 33]));
    assert_eq!(v["checked"], 99);
    let d = &v["dispatches"][0];
    assert_eq!((d["size"].clone(), d["threads"].clone()), (serde_json::json!([3, 1, 1]), serde_json::json!([64, 1, 1])));
    assert_eq!(d["findings"], serde_json::json!([]));
    // An example's name with a library option is the library kernel.
    let v = json(&["run", "scale", "--dtype", "bf16", "--shape", "4097", "--device", "sim", "--json"]);
    assert_eq!((v["kernel"].as_str(), v["ok"].as_bool()), (Some("scale_bf16"), Some(true)));
    // Text output: the outcome line, the device, one line per dispatch.
    let out = enigma(&["run", "prefix_sum_exclusive_u32", "--shape", "70001", "--threads", "32", "--device", "sim"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("prefix_sum_exclusive_u32 [70001]: ok — 70001 elements, 0 outside tolerance"), "{text}");
    // 70001 u32 in blocks of 32 uint4: 547 blocks; 547 totals in blocks of
    // 32: 18; then one block. Three block scans and two add-backs.
    assert_eq!(text.lines().filter(|l| l.trim_start().starts_with("scan_")).count(), 5, "{text}");
}

/// `--group` (issue 16's `enigma run qmatmul_fp4 --shape MxNxK --group 128`)
/// reaches the weights: a group of 32 has 4 packed words per scale, so the
/// decode kernel takes 4 words per iteration (8 for the default group of
/// 128 at this K); errors for a bad group, a kernel without one, a group
/// given twice.
#[test]
fn quantized_matmuls_take_a_group() {
    let v = json(&["run", "qmatmul_int4", "--shape", "2x64x256", "--group", "32", "--device", "sim", "--json"]);
    assert_eq!((v["shape"].clone(), v["ok"].as_bool()), (serde_json::json!([2, 64, 256, 32]), Some(true)));
    assert!(v["dispatches"][0]["kernel"].as_str().unwrap().contains("_u4_"), "{v}");
    let v = json(&["run", "qmatmul_int4", "--shape", "2x64x256", "--device", "sim", "--json"]);
    assert!(v["dispatches"][0]["kernel"].as_str().unwrap().contains("_u8_"), "{v}");
    // The group may also come as the shape's fourth dimension.
    let v = json(&["run", "qmatmul_fp4", "--shape", "3x100x256x64", "--device", "sim", "--json"]);
    assert_eq!(v["ok"].as_bool(), Some(true), "{v}");
    fails(&["run", "qmatmul_int4", "--shape", "2x64x256", "--group", "48", "--device", "sim"], "group size 48");
    fails(&["run", "softmax_f32", "--group", "64", "--device", "sim"], "--group applies to the quantized matmuls");
    fails(&["run", "qmatmul_int4", "--shape", "2x64x256x32", "--group", "64", "--device", "sim"], "give it once");
    fails(&["run", "qmatmul_int4", "--shape", "2x64x256x32x1", "--device", "sim"], "then optionally group");
}

#[test]
fn examples_still_run() {
    let out = enigma(&["run", "reduce", "--n", "100003", "--device", "sim"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("reduce     n=100003"), "{}", stdout(&out));
    let out = enigma(&["run", "all", "--n", "4096", "--device", "sim", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let examples: Vec<Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(examples.len(), 6);
    assert!(examples.iter().all(|e| e["ok"] == true), "{examples:?}");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    fails(&["run", "nope", "--device", "sim"], "unknown example or kernel `nope`");
    fails(&["run", "softmax", "--dtype", "i32", "--device", "sim"], "`softmax` has no i32 variant; types: f32, f16, bf16");
    fails(&["run", "softmax_f16", "--dtype", "f32", "--device", "sim"], "works on f16, but --dtype f32 was given");
    fails(&["run", "softmax", "--shape", "3", "--device", "sim"], "shape [3] has 1 dimensions; expected 2 (rows x d)");
    fails(&["run", "softmax", "--shape", "0x4", "--device", "sim"], "`rows` = 0");
    fails(&["run", "softmax", "--shape", "3xx4", "--device", "sim"], "is not a shape like 8192x8192");
    fails(&["run", "gemv", "--shape", "100000x100000", "--device", "sim"], "more than 2^32 - 1 elements");
    fails(&["run", "softmax", "--threads", "100", "--device", "sim"], "threadgroup size 100 is not a multiple of 32");
    fails(&["run", "softmax", "--device", "tpu"], "unknown device");
    fails(&["bench", "sum_f32", "--repeats", "0", "--device", "sim"], "0 is not between 1 and 10000");
    fails(&["bench", "nope", "--device", "sim"], "unknown kernel `nope`");
}

#[test]
fn bench_reports_times_and_bandwidth() {
    let out = enigma(&["bench", "sum", "--dtype", "f16", "--shape", "4097", "--repeats", "4", "--warmup", "2", "--device", "sim", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["kernel"].as_str(), v["timing"].as_str()), (Some("sum_f16"), Some("wall")));
    assert_eq!((v["warmup"].as_u64(), v["repeats"].as_u64()), (Some(2), Some(4)));
    let times: Vec<f64> = v["times_s"].as_array().unwrap().iter().map(|t| t.as_f64().unwrap()).collect();
    assert_eq!(times.len(), 4);
    let best = v["best_s"].as_f64().unwrap();
    assert!(best > 0.0 && times.iter().all(|&t| t >= best) && v["median_s"].as_f64().unwrap() >= best, "{v}");
    // 4097 halves read once; the last run's sum checked.
    assert_eq!(v["bytes"], 8194);
    assert_eq!(v["ok"], true);
    let gbps = v["best_gbps"].as_f64().unwrap();
    assert!((gbps - 8194.0 / best / 1e9).abs() <= 1e-9 * gbps.max(1.0), "{v}");
    // Progress on stderr: one update per run, warm-up included.
    let err = stderr(&out);
    assert!(err.contains("sum_f16 [4097]") && err.contains("6/6"), "{err}");

    let out = enigma(&["bench", "softmax_f32", "--shape", "2x64", "--repeats", "2", "--device", "sim"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("device: sim"), "{text}");
    assert!(lines[1].starts_with("kernel") && lines[1].contains("GB/s (best)"), "{text}");
    assert!(lines[3].starts_with("softmax_f32  2x64") && lines[3].contains(" wall ") && lines[3].ends_with(" ok"), "{text}");
}

/// Sizes from the command line that no machine holds fail with an error
/// naming the size (exit 2), not an abort (issue 18, defect 1). The address
/// space is capped at 4 GiB so the result does not depend on the machine.
#[cfg(target_os = "linux")]
#[test]
fn oversized_runs_are_errors_not_aborts() {
    let cases: [&[&str]; 5] = [
        &["run", "scale", "--n", "2000000000", "--device", "sim"],
        &["run", "sum_f32", "--shape", "4294967295", "--device", "sim"],
        &["run", "softmax_f32", "--shape", "65535x65535", "--device", "sim"],
        &["bench", "gemv_f16", "--shape", "65535x65535", "--device", "sim"],
        &["check", "reduce", "--n", "4294967295"],
    ];
    for args in cases {
        let out = Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 4194304 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_enigma"))
            .args(args)
            .output()
            .expect("run the enigma binary");
        assert_eq!(out.status.code(), Some(2), "enigma {args:?}: {}{}", stdout(&out), stderr(&out));
        assert!(stderr(&out).contains("cannot allocate") && stderr(&out).contains(" bytes"), "enigma {args:?}: {}", stderr(&out));
    }
}
