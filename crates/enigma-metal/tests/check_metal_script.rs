//! `scripts/check-metal.sh`, the aarch64-apple-darwin type-check of this
//! crate, run where it cannot succeed (a PATH without rustup): it skips
//! with its reason and exits 0 on a developer's machine, and fails under
//! CI (`CI=true`, which `.ci/run` sets), so CI never passes without the
//! check. `scripts/test.sh`, which `.ci/run` runs, runs it with `pipefail`.
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The script run with a PATH of only `dirname` (which it needs before it
/// looks for rustup), and `CI` as given.
fn run_without_rustup(ci: Option<&str>) -> Output {
    let bin = std::env::temp_dir().join(format!("enigma-check-metal-path-{}-{}", std::process::id(), ci.unwrap_or("none")));
    std::fs::create_dir_all(&bin).expect("a scratch directory");
    let dirname = ["/usr/bin/dirname", "/bin/dirname"].into_iter().find(|p| Path::new(p).exists()).expect("dirname");
    let link = bin.join("dirname");
    if !link.exists() {
        std::os::unix::fs::symlink(dirname, &link).expect("link dirname");
    }
    let bash = ["/bin/bash", "/usr/bin/bash"].into_iter().find(|p| Path::new(p).exists()).expect("bash");
    let mut cmd = Command::new(bash);
    cmd.arg(root().join("scripts/check-metal.sh")).env_clear().env("PATH", &bin);
    if let Some(ci) = ci {
        cmd.env("CI", ci);
    }
    let out = cmd.output().expect("run check-metal.sh");
    std::fs::remove_dir_all(&bin).ok();
    out
}

#[test]
fn a_skip_passes_outside_ci_and_fails_under_ci() {
    let local = run_without_rustup(None);
    let text = String::from_utf8_lossy(&local.stdout);
    assert!(local.status.success(), "{text}{}", String::from_utf8_lossy(&local.stderr));
    assert!(text.contains("check-metal: skipped: rustup is not installed"), "{text}");
    for ci in ["true", "1"] {
        let out = run_without_rustup(Some(ci));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "CI={ci}: {text}");
        assert!(text.contains("check-metal: skipped: rustup is not installed"), "{text}");
        assert!(text.contains(&format!("check-metal: failed: CI={ci} requires the Metal type-check")), "{text}");
    }
    // Any other value of CI is a developer's machine.
    assert!(run_without_rustup(Some("false")).status.success());
}

#[test]
fn ci_runs_the_check_and_fails_when_it_does() {
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    assert!(ci.contains("export CI=\"${CI:-true}\"") && ci.contains("bash scripts/test.sh"), "{ci}");
    let test = std::fs::read_to_string(root().join("scripts/test.sh")).expect("scripts/test.sh");
    assert!(test.contains("set -euo pipefail"), "scripts/test.sh must stop on a failing pipeline");
    assert!(test.lines().any(|l| l.trim_start().starts_with("bash scripts/check-metal.sh")), "scripts/test.sh does not run check-metal.sh");
}
