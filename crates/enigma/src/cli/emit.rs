//! `enigma emit --target msl|cuda|ir|json <name>`: prints kernels as Metal
//! Shading Language, CUDA C++ (for NVRTC), the IR's text form or its JSON
//! form.
//!
//! A name is an example of `enigma run` (`reduce`, `gemm`, …: every kernel it
//! dispatches, in order), a kernel's own name (the seed kernels,
//! `reduce_threadgroup`, `gemm_tiled`, …, `reduce_final_seed`, the seed's
//! second pass as written, and the kernel library's variants: `enigma emit
//! --list`; where a library operation has the same name, `--by-kernel-name`),
//! a library operation of `enigma run list` (`softmax_f32`, or
//! `softmax --dtype f16`: the kernels it dispatches at its default shape or
//! `--shape`, found by one run on the simulator), a variant that `enigma
//! run` reports (`softmax_f32_vec4_c1`, found the same way), or a user's
//! kernel: `file.py::name` or an IR file (`cli::source`). Several kernels
//! print one after the other (JSON: as an array). MSL and CUDA need a valid
//! kernel: a validation error is the command's error; IR and JSON print any
//! kernel.
//!
//! MSL is written for the version each kernel needs (3.2 where it uses
//! device fences, else 3.1), or for the one `--msl-version` names; a version
//! that lacks a feature the kernel uses is the command's error, naming both.
//! CUDA is written for every GPU, or as the backend writes it for the
//! architecture `--cuda-arch` names (`sm_90a`: cooperative products on
//! `wgmma`).

use super::examples::{example_kernels, EXAMPLES};
use super::library;
use super::source::{self, Source};
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
    /// An example (reduce, scale, row_sum, prefix_sum, stencil, gemm), a
    /// kernel name (see --list), a library kernel of `enigma run list`
    /// (softmax_f32, or softmax --dtype f16) or a variant `enigma run`
    /// reports, or a user's kernel: file.py::name or an IR file (.json:
    /// JSON form; otherwise the text form).
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// Library kernels: the shape whose kernels to print, e.g. 64x4096
    /// (default: the kernel's default shape).
    #[arg(long)]
    pub shape: Option<String>,
    /// Library kernels: element type, f32 (default), f16 or bf16.
    #[arg(long)]
    pub dtype: Option<String>,
    /// Look the name up among kernels' own names only (the seed kernels and
    /// the library's variants of --list), not as an example or a library
    /// operation: `scale_f32` is the element-wise operation (its kernels
    /// at the default shape), `--by-kernel-name scale_f32` its scalar kernel.
    #[arg(long, conflicts_with_all = ["shape", "dtype"])]
    pub by_kernel_name: bool,
    /// List the names that can be emitted and exit.
    #[arg(long)]
    pub list: bool,
    /// The MSL version to write (3.0, 3.1 or 3.2); by default the one each
    /// kernel needs.
    #[arg(long, value_parser = parse_msl_version)]
    pub msl_version: Option<(u8, u8)>,
    /// CUDA: the architecture to write for, as the CUDA backend compiles
    /// for it (`sm_80`, `sm_90a`, …): cooperative products on `mma.sync`
    /// from sm_80, on `wgmma` for sm_90a; by default code for every GPU.
    #[arg(long, value_parser = parse_cuda_arch)]
    pub cuda_arch: Option<enigma_codegen::cuda::Options>,
}

fn parse_cuda_arch(text: &str) -> Result<enigma_codegen::cuda::Options, String> {
    enigma_codegen::cuda::Options::for_arch(text).ok_or_else(|| format!("`{text}` is not a CUDA architecture; write it as NVRTC does, e.g. sm_80 or sm_90a"))
}

fn parse_msl_version(text: &str) -> Result<(u8, u8), String> {
    enigma_codegen::msl::parse_version(text).map_err(|e| e.to_string())
}

/// Every kernel `emit` knows, under the name that selects it: the seeds'
/// kernels and the library's by their own names, and the seed's second pass
/// as written under `reduce_final_seed` (the name `enigma check --list`
/// uses; its source keeps the seed's function name, `reduce_final`). Every
/// name is listed once.
fn named_kernels() -> Vec<(String, Kernel)> {
    let mut kernels: Vec<(String, Kernel)> = enigma_kernels::seed_kernels().into_iter().map(|k| (k.name.clone(), k)).collect();
    kernels.push(("reduce_final_seed".to_string(), enigma_kernels::two_pass_sum::reduce_final_seed()));
    kernels.extend(enigma_kernels::library::variants::all_kernels().into_iter().map(|k| (k.name.clone(), k)));
    kernels
}

/// The kernel whose own name is `name` (`--by-kernel-name`).
fn by_kernel_name(name: &str) -> anyhow::Result<Vec<Kernel>> {
    match named_kernels().into_iter().find(|(n, _)| n == name) {
        Some((_, k)) => Ok(vec![k]),
        None => anyhow::bail!("no kernel is named `{name}`; `enigma emit --list` lists their names"),
    }
}

/// The kernels `name` stands for (see the module doc), in that order of
/// lookup.
fn resolve(name: &str, shape: Option<&str>, dtype: Option<&str>) -> anyhow::Result<Vec<Kernel>> {
    let library_options = shape.is_some() || dtype.is_some();
    let from_example = example_kernels(name);
    if !from_example.is_empty() && !library_options {
        return Ok(from_example);
    }
    if source::is_user_kernel(name) {
        return match source::load(name)? {
            Source::Kernel(k) => Ok(vec![k]),
            Source::CompileError(message) => anyhow::bail!("{message}"),
        };
    }
    // A library operation before a kernel's own name: `scale_f32` is the
    // operation in `run`, `check`, `bench` and `tune`, so here too.
    if let Some(entry) = library::find(name, dtype)? {
        return library::dispatched_kernels(&entry, &library::shape(shape)?);
    }
    let kernels = named_kernels();
    if let (Some((_, k)), false) = (kernels.iter().find(|(n, _)| n == name), library_options) {
        return Ok(vec![k.clone()]);
    }
    if !library_options {
        if let Some((_, kernel)) = library::find_variant(name)? {
            return Ok(vec![kernel]);
        }
    }
    let close: Vec<&str> =
        kernels.iter().map(|(n, _)| n.as_str()).filter(|n| n.contains(name) || name.contains(*n)).take(8).collect();
    let hint = if close.is_empty() { String::new() } else { format!(" (similar: {})", close.join(", ")) };
    anyhow::bail!("unknown example or kernel `{name}`{hint}; `enigma emit --list` and `enigma run list` list them")
}

/// The most shared memory a CUDA GPU lets one block opt in to (an H100's or
/// H200's 227 KiB).
const CUDA_MAX_SHARED_MEMORY_PER_BLOCK: u64 = 227 * 1024;

/// One kernel in `target`'s form.
fn emit(kernel: &Kernel, target: Target, msl_version: Option<(u8, u8)>, cuda: &enigma_codegen::cuda::Options) -> anyhow::Result<String> {
    let name = &kernel.name;
    // Threadgroup memory as the target offers it: Apple GPUs' 32 KiB for
    // MSL; for CUDA the most any GPU lets one block opt in to (227 KiB,
    // compute capability 9.0), since the source does not fix the GPU: the
    // CUDA backend checks the device's own limit when it loads the kernel.
    let max_threadgroup_memory_bytes = match target {
        Target::Cuda => CUDA_MAX_SHARED_MEMORY_PER_BLOCK,
        _ => ValidationOptions::default().max_threadgroup_memory_bytes,
    };
    let options = ValidationOptions { max_threadgroup_memory_bytes, ..ValidationOptions::default() };
    let info = || validate(kernel, &options).with_context(|| format!("kernel `{name}` is not valid"));
    Ok(match target {
        Target::Msl => {
            let info = info()?;
            let options = enigma_codegen::msl::Options::for_kernel(&info, msl_version);
            enigma_codegen::msl::write_string(kernel, &info, &options).with_context(|| format!("generating MSL for `{name}`"))?
        }
        Target::Cuda => {
            enigma_codegen::cuda::write_string(kernel, &info()?, cuda)
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
        format!(
            "examples: {}\nkernels:\n{}\nlibrary operations (their kernels at a shape): `enigma run list`\nyour own: file.py::name, or an IR file (.json or text)",
            EXAMPLES.join(", "),
            kernels.join("\n")
        )
    } else {
        let name = args.name.as_deref().unwrap_or_default();
        let kernels = if args.by_kernel_name { by_kernel_name(name)? } else { resolve(name, args.shape.as_deref(), args.dtype.as_deref())? };
        let cuda = args.cuda_arch.clone().unwrap_or_default();
        let texts = kernels.iter().map(|k| emit(k, args.target, args.msl_version, &cuda)).collect::<anyhow::Result<Vec<String>>>()?;
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
