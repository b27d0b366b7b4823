//! One name per kernel on the command line: every kernel `enigma run list`
//! prints is emitted and checked by that name, the variants `enigma run`
//! reports are emitted, checked and timed by theirs, and `emit`/`check`
//! take a user's own kernel (an IR file in either form, or `file.py::name`
//! through the Python package when one is installed).

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn enigma(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_enigma")).args(args).output().expect("run the enigma binary")
}

fn stdout(args: &[&str]) -> String {
    let out = enigma(args);
    assert!(out.status.success(), "enigma {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn run_list() -> Vec<String> {
    let v: Value = serde_json::from_str(&stdout(&["run", "list", "--json"])).unwrap();
    v.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect()
}

/// The kernels `enigma run <name>` dispatches, by name.
fn dispatched(name: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(&stdout(&["run", name, "--device", "sim", "--json"])).unwrap();
    let mut names: Vec<String> = v["dispatches"].as_array().unwrap().iter().map(|d| d["kernel"].as_str().unwrap().to_string()).collect();
    names.dedup();
    names
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("enigma-cli-names-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn every_run_list_name_emits_the_kernels_it_dispatches() {
    let names = run_list();
    assert!(names.len() > 50, "{names:?}");
    for name in &names {
        let json = stdout(&["emit", "--target", "json", name]);
        let v: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: {e}\n{json}"));
        let kernels: Vec<Value> = if v.is_array() { v.as_array().unwrap().clone() } else { vec![v] };
        let emitted: Vec<String> =
            kernels.iter().map(|k| enigma_ir::from_json(&k.to_string()).unwrap_or_else(|e| panic!("{name}: {e}")).name).collect();
        let mut want = dispatched(name);
        want.sort();
        want.dedup();
        let mut got = emitted.clone();
        got.sort();
        assert_eq!(got, want, "`enigma emit {name}` and `enigma run {name}`");
    }
}

#[test]
fn every_run_list_name_is_checked_clean() {
    // All in one command (each name is a target of its own): the slow part
    // is the sanitizer, not the process.
    for name in run_list() {
        let out = enigma(&["check", &name, "--json"]);
        let findings: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(out.status.success() && findings == Value::Array(vec![]), "`enigma check {name}`: {findings}");
    }
}

#[test]
fn a_variant_run_reports_works_with_emit_check_bench_and_tune() {
    let variants = dispatched("softmax_f32");
    assert_eq!(variants, ["softmax_f32_vec4_c1"]);
    let variant = &variants[0];
    let msl = stdout(&["emit", variant]);
    assert!(msl.contains(&format!("kernel void {variant}(")), "{msl}");
    // One that the library builds only when an operation asks for it.
    let sgemm = dispatched("matmul_f32");
    assert_eq!(sgemm.len(), 1);
    let ir = stdout(&["emit", "--target", "ir", &sgemm[0]]);
    assert_eq!(enigma_ir::text::parse(&ir).unwrap().name, sgemm[0]);
    let check = stdout(&["check", variant]);
    assert!(check.starts_with(&format!("check {variant} (a kernel of library kernel `softmax_f32`")), "{check}");
    assert!(check.trim_end().ends_with("— clean"), "{check}");
    let bench = stdout(&["bench", variant, "--device", "sim", "--repeats", "1", "--warmup", "0", "--json"]);
    let v: Value = serde_json::from_str(bench.trim()).unwrap();
    assert_eq!((v["kernel"].as_str(), v["ok"].as_bool()), (Some("softmax_f32"), Some(true)), "{v}");
    let tune = stdout(&["tune", variant, "--device", "sim", "--shape", "4x64", "--repeats", "1", "--warmup", "0", "--no-cache", "--json"]);
    let v: Value = serde_json::from_str(&tune).unwrap();
    assert_eq!(v["kernel"], "softmax_f32", "{v}");
    assert!(v["best"].is_object() || v["best"].is_string(), "{v}");
}

#[test]
fn emit_takes_a_shape_and_a_dtype_for_library_kernels() {
    let small = stdout(&["emit", "--target", "json", "softmax", "--dtype", "f16", "--shape", "2x64"]);
    assert_eq!(enigma_ir::from_json(&small).unwrap().name, dispatched_at("softmax_f16", "2x64")[0]);
}

fn dispatched_at(name: &str, shape: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(&stdout(&["run", name, "--device", "sim", "--shape", shape, "--json"])).unwrap();
    v["dispatches"].as_array().unwrap().iter().map(|d| d["kernel"].as_str().unwrap().to_string()).collect()
}

#[test]
fn emit_and_check_take_an_ir_file_in_either_form() {
    let text = scratch("reduce.ir");
    std::fs::write(&text, stdout(&["emit", "--target", "ir", "reduce_threadgroup"])).unwrap();
    let json = scratch("reduce.json");
    std::fs::write(&json, stdout(&["emit", "--target", "json", "reduce_threadgroup"])).unwrap();
    let by_name = stdout(&["emit", "--target", "msl", "reduce_threadgroup"]);
    for file in [&text, &json] {
        let file = file.to_str().unwrap();
        assert_eq!(stdout(&["emit", "--target", "msl", file]), by_name);
        let check = stdout(&["check", file]);
        assert!(check.contains("reduce_threadgroup — clean"), "{check}");
    }
    // A kernel that writes a buffer it declares read-only: a validation
    // finding, exit status 1.
    let broken = stdout(&["emit", "--target", "ir", "reduce_threadgroup"]).replace("PartialOut: device f32 read_write", "PartialOut: device f32 read");
    assert!(broken.contains("PartialOut: device f32 read,") || broken.contains("PartialOut: device f32 read)"), "{broken}");
    let file = scratch("broken.ir");
    std::fs::write(&file, broken).unwrap();
    let out = enigma(&["check", file.to_str().unwrap()]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("error: validation") && report.contains("PartialOut"), "{report}");
    let out = enigma(&["emit", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not valid"));
}

/// A Python with the enigma package: `ENIGMA_PYTHON`, else the one
/// python/build_and_test.sh made.
fn python_with_enigma() -> Option<String> {
    let candidates = [
        std::env::var("ENIGMA_PYTHON").ok(),
        Some(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/python/venv/bin/python").to_string()),
    ];
    candidates.into_iter().flatten().find(|p| Command::new(p).args(["-c", "import enigma"]).output().is_ok_and(|o| o.status.success()))
}

#[test]
fn emit_and_check_take_a_kernel_of_a_python_file() {
    let file = scratch("user_kernels.py");
    std::fs::write(
        &file,
        "import enigma\n\n@enigma.kernel\ndef twice(x: enigma.f32, y: enigma.f32):\n    i = enigma.thread_position_in_grid\n    y[i] = x[i] * 2.0\n\n\
         @enigma.kernel\ndef bad(x: enigma.f32):\n    x[0] = undefined_name\n\nif __name__ == \"__main__\":\n    raise SystemExit(\"not run by the CLI\")\n",
    )
    .unwrap();
    let twice = format!("{}::twice", file.display());
    let Some(python) = python_with_enigma() else {
        // Without the package the CLI says how to get it.
        let out = Command::new(env!("CARGO_BIN_EXE_enigma")).args(["emit", &twice]).env("ENIGMA_PYTHON", "python3").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("enigma Python package") || err.contains("python3"), "{err}");
        eprintln!("no Python with the enigma package (python/build_and_test.sh makes one): checked the message only");
        return;
    };
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_enigma")).args(args).env("ENIGMA_PYTHON", &python).output().unwrap();
    let out = run(&["emit", "--target", "msl", &twice]);
    let msl = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(msl.contains("kernel void twice("), "{msl}");
    let out = run(&["check", &twice]);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("twice — clean"));
    // A kernel that does not compile: the front end's message, with the line.
    let out = run(&["check", &format!("{}::bad", file.display())]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(report.contains("does not compile") && report.contains("undefined_name") && report.contains(":10:"), "{report}");
    // A name the file does not define.
    let out = run(&["emit", &format!("{}::nothing", file.display())]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the kernels of"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_facade_re_exports_code_generation() {
    let kernel = enigma::kernels::two_pass_sum::reduce_threadgroup();
    let info = enigma::ir::validate(&kernel, &enigma::ir::ValidationOptions::default()).unwrap();
    let cuda = enigma::codegen::cuda::write_string(&kernel, &info, &enigma::codegen::cuda::Options::default()).unwrap();
    assert!(cuda.source.contains("__global__ void reduce_threadgroup("));
}

#[test]
fn a_library_operation_wins_over_a_kernel_of_the_same_name() {
    // `scale_f32` is the element-wise operation everywhere; its scalar
    // kernel, of the same name, is printed with --by-kernel-name.
    let op = enigma_ir::from_json(&stdout(&["emit", "--target", "json", "scale_f32"])).unwrap();
    assert_eq!(op.name, dispatched("scale_f32")[0]);
    let scalar = enigma_ir::from_json(&stdout(&["emit", "--target", "json", "--by-kernel-name", "scale_f32"])).unwrap();
    let want = enigma_kernels::library::variants::all_kernels().into_iter().find(|k| k.name == "scale_f32").unwrap();
    assert_eq!(scalar, want);
    assert_ne!(op, scalar);
}
