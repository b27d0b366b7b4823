//! Issue 18's command-line edges, run as a user would: the examples at
//! sizes that are not multiples of 32 agree with their references and check
//! clean; `tiles` plans only what its arithmetic can hold and takes complete
//! problem sizes; counts that would run practically forever are bounded; bad
//! values name their option.

use serde_json::Value;
use std::process::{Command, Output};

fn enigma(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_enigma")).args(args).output().expect("run the enigma binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A command that must fail with exit status 2 and say every one of `words`
/// on stderr, each once.
fn fails(args: &[&str], words: &[&str]) {
    let out = enigma(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "enigma {args:?}: {}{err}", text(&out.stdout));
    for w in words {
        assert_eq!(err.matches(w).count(), 1, "enigma {args:?}: `{w}` once in: {err}");
    }
}

#[test]
fn the_examples_agree_with_their_references_at_awkward_sizes() {
    for n in ["1", "31", "33", "100", "1000"] {
        let out = enigma(&["run", "all", "--n", n, "--device", "sim", "--json"]);
        assert!(out.status.success(), "run all --n {n}: {}{}", text(&out.stdout), text(&out.stderr));
        for line in text(&out.stdout).lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["ok"], Value::Bool(true), "--n {n}: {v}");
        }
    }
}

#[test]
fn the_examples_check_clean_at_awkward_sizes() {
    for example in ["stencil", "prefix_sum", "reduce", "scale"] {
        for n in ["1", "33", "1000"] {
            let out = enigma(&["check", example, "--n", n, "--json"]);
            assert!(out.status.success(), "check {example} --n {n}: {}{}", text(&out.stdout), text(&out.stderr));
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v, Value::Array(vec![]), "check {example} --n {n}");
        }
    }
}

#[test]
fn a_finding_never_names_a_thread_that_does_not_exist() {
    // 100 threads: the last SIMD group has lanes 0..3, and the butterfly
    // reads lanes past them. Every thread a finding names with a grid
    // position lies inside the 100×1×1 grid.
    let out = enigma(&["check", "corpus/butterfly_in_partial_simdgroup", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = v.as_array().unwrap();
    assert!(!findings.is_empty());
    let mut lanes_without_thread = 0;
    for f in findings {
        for side in ["first", "second"] {
            match &f[side]["grid"] {
                Value::Array(g) => assert!(g[0].as_u64().unwrap() < 100 && g[1] == 0 && g[2] == 0, "{f}"),
                Value::Null if f[side].is_object() => lanes_without_thread += 1,
                _ => {}
            }
        }
    }
    assert!(lanes_without_thread > 0, "{v}");
}

#[test]
fn tiles_too_large_to_plan_are_errors() {
    fails(&["tiles", "--m", "64", "--n", "1073741824", "--k", "128", "--variant", "fused"], &["too large to plan"]);
    fails(&["tiles", "--m", "65536", "--n", "65536", "--k", "65536"], &["too large to plan"]);
    fails(&["tiles", "--m", "4294967264", "--n", "4294967264", "--k", "4294967264"], &["too large to plan"]);
    // A large but representable tile is planned, with its figures exact.
    let out = enigma(&["tiles", "--m", "1024", "--n", "1024", "--k", "1024", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    assert_eq!(v["mma_per_threadgroup_per_iteration"].as_u64(), Some(128 * 128 * 128));
    assert_eq!(v["flops_per_iteration"].as_u64(), Some(2 * 1024 * 1024 * 1024));
}

#[test]
fn a_problem_size_needs_all_three_dimensions() {
    fails(&["tiles", "--problem", "4096"], &["--problem", "M,N,K"]);
    fails(&["tiles", "--problem", "1,1"], &["--problem", "M,N,K"]);
    fails(&["tiles", "--problem", "4096,0,4096"], &["--problem", "N = 0"]);
    let out = enigma(&["tiles", "--problem", "4096,4096,4096", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn counts_that_would_run_forever_are_bounded() {
    fails(&["bench", "relu_f32", "--repeats", "4294967295", "--device", "sim"], &["--repeats", "10000"]);
    fails(&["bench", "relu_f32", "--warmup", "4294967295", "--device", "sim"], &["--warmup", "10000"]);
    fails(&["tune", "relu_f32", "--repeats", "4294967295", "--device", "sim"], &["--repeats", "10000"]);
    fails(&["check", "stencil", "--schedules", "4294967295"], &["--schedules"]);
    fails(&["bench", "relu_f32", "--repeats", "0", "--device", "sim"], &["--repeats"]);
}

#[test]
fn a_zero_size_names_its_option_once() {
    fails(&["run", "reduce", "--n", "0", "--device", "sim"], &["--n"]);
    fails(&["check", "reduce", "--n", "0"], &["--n"]);
}

#[test]
fn check_list_prints_json_when_asked() {
    let out = enigma(&["check", "--list", "--json"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    let targets: Vec<&str> = v.as_array().unwrap().iter().map(|t| t["target"].as_str().unwrap()).collect();
    assert!(targets.contains(&"stencil") && targets.contains(&"corpus/dot_product_without_atomics"), "{targets:?}");
}
