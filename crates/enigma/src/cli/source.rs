//! A user's own kernel, for `enigma emit` and `enigma check`: a kernel of a
//! Python file as `file.py::name` (compiled by the `enigma` Python package in
//! `$ENIGMA_PYTHON`, else `python3`: the file runs as a module named
//! `__enigma_cli__`, so its `if __name__ == "__main__":` block does not),
//! or an IR file (`.json`: the IR's JSON form, `enigma emit --target json`;
//! any other file: its text form, `enigma emit --target ir`).

use anyhow::Context;
use enigma_ir::Kernel;
use std::path::Path;
use std::process::Command;

/// Prints the validated IR (its text form) of kernel `argv[2]` of Python file `argv[1]`;
/// exits 3 with the message on a compile error, 2 on any other problem.
const PYTHON_EXPORT: &str = r#"
import runpy, sys
path, name = sys.argv[1], sys.argv[2]
try:
    import enigma
except ImportError as e:
    print(f"cannot import the enigma Python package ({e}); install it (pip install ./python) or set ENIGMA_PYTHON to a Python that has it", file=sys.stderr)
    sys.exit(2)
namespace = runpy.run_path(path, run_name="__enigma_cli__")
kernel = namespace.get(name)
if not isinstance(kernel, enigma.Kernel):
    found = sorted(k for k, v in namespace.items() if isinstance(v, enigma.Kernel))
    what = "is not an @enigma.kernel function" if name in namespace else "is not defined there"
    print(f"`{name}` {what}; the kernels of {path}: {', '.join(found) or 'none'}", file=sys.stderr)
    sys.exit(2)
try:
    print(enigma.compile(kernel).ir)
except enigma.CompileError as e:
    print(e, file=sys.stderr)
    sys.exit(3)
"#;

/// A user's kernel as the front end gave it: compiled, or the reason it
/// does not compile (the front end's or the validator's message).
pub enum Source {
    Kernel(Kernel),
    CompileError(String),
}

/// Whether `name` names a user's kernel: `file.py::name`, or a file.
pub fn is_user_kernel(name: &str) -> bool {
    name.contains("::") || Path::new(name).is_file()
}

/// The kernel `name` (see [`is_user_kernel`]) names.
pub fn load(name: &str) -> anyhow::Result<Source> {
    if let Some((file, kernel)) = name.rsplit_once("::") {
        return from_python(file, kernel);
    }
    let text = std::fs::read_to_string(name).with_context(|| format!("reading the IR file {name}"))?;
    let parsed = if name.ends_with(".json") || text.trim_start().starts_with('{') {
        enigma_ir::from_json(&text).map_err(|e| e.to_string())
    } else {
        enigma_ir::text::parse(&text).map_err(|e| e.to_string())
    };
    Ok(match parsed {
        Ok(kernel) => Source::Kernel(kernel),
        Err(e) => Source::CompileError(format!("{name}: {e}")),
    })
}

fn from_python(file: &str, kernel: &str) -> anyhow::Result<Source> {
    anyhow::ensure!(Path::new(file).is_file(), "no Python file {file} (a user's kernel is `file.py::name`)");
    let python = std::env::var("ENIGMA_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let out = Command::new(&python)
        .args(["-c", PYTHON_EXPORT, file, kernel])
        .output()
        .with_context(|| format!("running {python} to compile {file}::{kernel} (set ENIGMA_PYTHON to a Python with the enigma package)"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    match out.status.code() {
        Some(0) => {
            let text = String::from_utf8(out.stdout).context("the front end's IR is not UTF-8")?;
            let kernel = enigma_ir::text::parse(&text).with_context(|| format!("reading the IR of {file}::{kernel}"))?;
            Ok(Source::Kernel(kernel))
        }
        Some(3) => Ok(Source::CompileError(stderr)),
        _ => anyhow::bail!("compiling {file}::{kernel} with {python} failed: {stderr}"),
    }
}
