//! `enigma emit --target msl|cuda|ir|json <name>`: prints kernels as Metal
//! Shading Language, CUDA C++ (for NVRTC), the IR's text form or its JSON
//! form.
//!
//! A name is an example of `enigma run` (`reduce`, `gemm`, …: every kernel it
//! dispatches, in order) or a kernel's own name: the seed kernels
//! (`reduce_threadgroup`, `gemm_tiled`, …, and `reduce_final_seed`, the
//! seed's second pass as written) and every variant of the kernel library
//! (`enigma emit --list` lists them all). Several kernels print one after the
//! other (JSON: as an array). MSL and CUDA need a valid kernel: a validation
//! error is the command's error; IR and JSON print any kernel.

use super::examples::{example_kernels, EXAMPLES};
use anyhow::Context;
use enigma_ir::{validate, Kernel, ValidationOptions};
use std::io::Write;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Metal Shading Language.
    Msl,
    /// CUDA C++ for NVRTC.
    Cuda,
    /// The IR's text form (parses back with enigma_ir::text::parse).
    Ir,
    /// The IR's JSON form (reads back with enigma_ir::from_json).
    Json,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to print.
    #[arg(long, value_enum, default_value = "msl")]
    pub target: Target,
    /// An example (reduce, scale, row_sum, prefix_sum, stencil, gemm) or a
    /// kernel name (see --list).
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// List the names that can be emitted and exit.
    #[arg(long)]
    pub list: bool,
}

/// Every kernel `emit` knows, under the name that selects it: the seeds'
/// kernels and the library's by their own names, and the seed's second pass
/// as written under `reduce_final_seed` (the name `enigma check --list`
/// uses; its source keeps the seed's function name, `reduce_final`). Every
/// name is listed once.
fn named_kernels() -> Vec<(String, Kernel)> {
    let mut kernels: Vec<(String, Kernel)> = enigma_kernels::seed_kernels().into_iter().map(|k| (k.name.clone(), k)).collect();
    kernels.push(("reduce_final_seed".to_string(), enigma_kernels::reduce::reduce_final_seed()));
    kernels.extend(enigma_kernels::library::variants::all_kernels().into_iter().map(|k| (k.name.clone(), k)));
    kernels
}

/// The kernels `name` stands for.
fn resolve(name: &str) -> anyhow::Result<Vec<Kernel>> {
    let from_example = example_kernels(name);
    if !from_example.is_empty() {
        return Ok(from_example);
    }
    let kernels = named_kernels();
    if let Some((_, k)) = kernels.iter().find(|(n, _)| n == name) {
        return Ok(vec![k.clone()]);
    }
    let close: Vec<&str> =
        kernels.iter().map(|(n, _)| n.as_str()).filter(|n| n.contains(name) || name.contains(*n)).take(8).collect();
    let hint = if close.is_empty() { String::new() } else { format!(" (similar: {})", close.join(", ")) };
    anyhow::bail!("unknown example or kernel `{name}`{hint}; `enigma emit --list` lists them")
}

/// One kernel in `target`'s form.
fn emit(kernel: &Kernel, target: Target) -> anyhow::Result<String> {
    let name = &kernel.name;
    let info = || validate(kernel, &ValidationOptions::default()).with_context(|| format!("kernel `{name}` is not valid"));
    Ok(match target {
        Target::Msl => enigma_codegen::msl::write_string(kernel, &info()?, &enigma_codegen::msl::Options::default())
            .with_context(|| format!("generating MSL for `{name}`"))?,
        Target::Cuda => {
            enigma_codegen::cuda::write_string(kernel, &info()?, &enigma_codegen::cuda::Options::default())
                .with_context(|| format!("generating CUDA C++ for `{name}`"))?
                .source
        }
        Target::Ir => enigma_ir::text::print(kernel),
        Target::Json => enigma_ir::to_json_pretty(kernel),
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let out = if args.list {
        let kernels: Vec<String> = named_kernels().into_iter().map(|(n, _)| format!("  {n}")).collect();
        format!("examples: {}\nkernels:\n{}", EXAMPLES.join(", "), kernels.join("\n"))
    } else {
        let kernels = resolve(args.name.as_deref().unwrap_or_default())?;
        let texts = kernels.iter().map(|k| emit(k, args.target)).collect::<anyhow::Result<Vec<String>>>()?;
        match (args.target, &texts[..]) {
            (Target::Json, [one]) => one.clone(),
            (Target::Json, many) => format!("[\n{}\n]", many.join(",\n")),
            (_, many) => many.iter().map(|t| t.trim_end()).collect::<Vec<_>>().join("\n\n"),
        }
    };
    // A reader that stops early (`enigma emit … | head`) is not an error.
    match writeln!(std::io::stdout().lock(), "{}", out.trim_end()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(ExitCode::SUCCESS),
    }
}
