//! Syntax check of the MSL golden files (tests/snapshots/*.msl.snap) with
//! g++: `g++ -fsyntax-only -std=c++17` against tests/msl_shim/metal_stdlib, a
//! small header that declares the Metal types, address-space qualifiers,
//! attributes and functions the generator uses. This is not Apple's
//! compiler: it shows the MSL is well-formed and uses only declared names
//! with plausible types, not that the Metal compiler accepts it (nothing has
//! been compiled by Apple's toolchain yet). Without g++ the test prints that
//! it skipped and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn gxx_available() -> bool {
    Command::new("g++").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// The MSL of an insta snapshot: what follows its second `---` line.
fn snapshot_body(snap: &str) -> String {
    snap.splitn(3, "---\n").nth(2).unwrap_or_else(|| panic!("not an insta snapshot:\n{snap}")).to_string()
}

/// g++'s complaint about `msl`, or `None` when it reads it cleanly.
fn syntax_errors(dir: &Path, name: &str, msl: &str) -> Option<String> {
    let file = dir.join(format!("{name}.metal"));
    std::fs::write(&file, msl).unwrap();
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/msl_shim");
    let out = Command::new("g++")
        .args(["-fsyntax-only", "-std=c++17", "-Wno-attributes", "-Wno-literal-suffix", "-x", "c++"])
        .arg("-I")
        .arg(&shim)
        .arg(&file)
        .output()
        .expect("run g++");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("enigma-msl-syntax-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn goldens() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".msl.snap"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().trim_end_matches(".msl.snap").to_string();
            (name, snapshot_body(&std::fs::read_to_string(&p).unwrap()))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_msl_golden_file_passes_gxx_with_the_metal_shim() {
    if !gxx_available() {
        println!("skipped: g++ is not installed, so the MSL golden files are not syntax-checked");
        return;
    }
    let goldens = goldens();
    assert!(goldens.len() >= 25, "only {} MSL golden files", goldens.len());
    let dir = scratch_dir("goldens");
    let failures: Vec<String> = goldens
        .iter()
        .filter_map(|(name, msl)| syntax_errors(&dir, name, msl).map(|e| format!("== {name}\n{e}")))
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    assert!(failures.is_empty(), "{} of {} files fail:\n{}", failures.len(), goldens.len(), failures.join("\n"));
}

/// The check can fail: broken variants of a golden file are rejected.
#[test]
fn the_check_rejects_broken_msl() {
    if !gxx_available() {
        println!("skipped: g++ is not installed");
        return;
    }
    let (_, msl) = goldens().into_iter().find(|(name, _)| name.ends_with("reduce_threadgroup")).expect("the reduce_threadgroup golden");
    let dir = scratch_dir("broken");
    assert_eq!(syntax_errors(&dir, "intact", &msl), None);
    let broken = [
        ("misspelt_function", msl.replacen("simd_sum(", "simd_summ(", 1)),
        ("missing_semicolon", msl.replacen("threadgroup_barrier(mem_flags::mem_threadgroup);", "threadgroup_barrier(mem_flags::mem_threadgroup)", 1)),
        ("undeclared_variable", msl.replacen("scratch[simd_gid]", "scratch[simd_gidx]", 1)),
        ("unknown_type", msl.replacen("device float* PartialOut", "device floot* PartialOut", 1)),
        ("unknown_mem_flag", msl.replacen("mem_flags::mem_threadgroup", "mem_flags::mem_local", 1)),
    ];
    for (name, text) in broken {
        assert_ne!(text, msl, "{name}: the mutation did not apply");
        assert!(syntax_errors(&dir, name, &text).is_some(), "{name} passed the syntax check");
    }
    std::fs::remove_dir_all(&dir).ok();
}
