//! Issue 19, point 7: `enigma check` knows the kernel library of `enigma run
//! list` as well as the examples and the seed kernels.

use serde_json::Value;
use std::process::{Command, Output};

fn enigma(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_enigma")).args(args).output().expect("run the enigma binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_library_kernel_checks_clean_by_its_run_list_name() {
    let out = enigma(&["check", "softmax_f16"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.starts_with("check softmax_f16 (library kernel, shape 64x1000, 3 schedules): softmax_f16"), "{stdout}");
    assert!(stdout.trim_end().ends_with("— clean"), "{stdout}");
}

#[test]
fn the_list_names_every_library_kernel_of_run_list() {
    let out = enigma(&["check", "--list", "--json"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let library: Vec<&str> =
        v.as_array().unwrap().iter().filter(|t| t["kind"] == "library").map(|t| t["target"].as_str().unwrap()).collect();
    let registry: Vec<String> = enigma_ops::registry().into_iter().map(|e| e.name).collect();
    assert_eq!(library, registry);
    // The text list too, and no target is listed twice.
    let list = text(&enigma(&["check", "--list"]).stdout);
    let names: Vec<&str> = list.lines().filter_map(|l| l.strip_prefix("  ")).filter_map(|l| l.split_whitespace().next()).collect();
    for r in &registry {
        assert_eq!(names.iter().filter(|n| *n == r).count(), 1, "`{r}` in:\n{list}");
    }
}

#[test]
fn check_all_covers_the_library_and_is_clean() {
    let out = enigma(&["check", "all"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for e in enigma_ops::registry() {
        assert!(stdout.contains(&format!("check {} (library kernel", e.name)), "`{}` not checked:\n{stdout}", e.name);
    }
}
