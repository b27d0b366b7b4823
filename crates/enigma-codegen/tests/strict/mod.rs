//! The strict MSL check: clang in C++ for OpenCL mode (`clang++ -x clcpp
//! -cl-std=clc++2021 -cl-no-stdinc -fsyntax-only`) against the shim in
//! `tests/msl_strict/`, where `device`, `threadgroup`, `constant` and
//! `thread` are OpenCL's distinct address spaces, `atomic<float>` exists in
//! device memory only, the SIMD-group functions refuse bool, long and ulong,
//! and the features of MSL 3.1 and 3.2 are declared only for sources written
//! for them (`-DENIGMA_MSL_VERSION=302`), MetalPerformancePrimitives and
//! `<metal_tensor>` (the subset enigma writes) only for MSL 4.0. Shared by this crate's golden-file
//! check and the conformance crate's check of every library kernel and
//! conformance case. Still not Apple's compiler: docs/metal.md lists what
//! only that can check.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The shim's directory (from this crate's tests or another crate's under
/// `crates/`, which include this module by path).
pub fn shim_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../enigma-codegen/tests/msl_strict")
}

/// Why the check cannot run here, or `None` when clang++ reads C++ for OpenCL
/// (clang 14 or later).
pub fn unavailable() -> Option<String> {
    let probe = Command::new("clang++")
        .args(["-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc", "-fsyntax-only", "-"])
        .stdin(std::process::Stdio::null())
        .output();
    match probe {
        Err(_) => Some("clang++ is not installed (apt-get install clang), so the strict MSL check did not run".into()),
        Ok(out) if !out.status.success() => Some(format!(
            "clang++ does not read C++ for OpenCL 2021 (clang 14 or later does): {}",
            String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or_default()
        )),
        Ok(_) => None,
    }
}

/// A scratch directory for the sources the check writes.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("enigma-msl-strict-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// The source as the check compiles it: OpenCL requires a variable in the
/// constant address space to be initialised, so each function constant
/// (`constant T NAME [[function_constant(i)]];`, which the Metal runtime
/// sets) gets its type's zero.
fn with_function_constants_initialised(msl: &str) -> String {
    msl.lines()
        .map(|line| match line.split_once(" [[function_constant(") {
            Some((decl, rest)) if line.starts_with("constant ") && rest.ends_with(")]];") => format!("{decl} = {{}};"),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// clang's errors for `msl` written for MSL `version`, or `None` when it
/// compiles.
pub fn errors(dir: &Path, name: &str, msl: &str, version: (u8, u8)) -> Option<String> {
    let file = dir.join(format!("{name}.metal"));
    std::fs::write(&file, with_function_constants_initialised(msl)).expect("write the source");
    let out = Command::new("clang++")
        .args(["-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc", "-fsyntax-only", "-Wno-unknown-attributes"])
        .arg(format!("-DENIGMA_MSL_VERSION={}", u32::from(version.0) * 100 + u32::from(version.1)))
        .arg("-I")
        .arg(shim_dir())
        .arg(&file)
        .output()
        .expect("run clang++");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}
