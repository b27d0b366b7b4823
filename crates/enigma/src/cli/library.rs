//! The kernel library as the CLI sees it: finding a registry entry of
//! `enigma-ops` from a name and `--dtype` ([`find`]), or from the name of a
//! kernel it dispatches, a variant such as `softmax_f32_vec4_c1` that
//! `enigma run` reports ([`find_entry`] takes either), the kernels an entry
//! dispatches ([`dispatched_kernels`], for `enigma emit`), the options
//! shared by `enigma run <kernel>`, `enigma bench` and `enigma tune` (the
//! timing flags of the last two: [`Timing`]), and the `enigma run list`
//! table. Every name that table prints works with `run`, `emit`, `check`,
//! `bench` and `tune`.

use anyhow::Context;
use enigma_ir::Kernel;
use enigma_ops::{registry, Entry, GemmOptions, GemmTile, Options};
use enigma_runtime::{Device, Runtime};
use std::io::Write;

/// The flags `enigma bench` and `enigma tune` share: where, at what shape
/// and type, and how often to time.
#[derive(clap::Args, Debug)]
pub struct Timing {
    /// auto (Metal, else CUDA, else the simulator), sim (or cpu), metal, cuda.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// The problem shape, e.g. 8192x8192 (default: the kernel's GPU
    /// benchmark shape on a GPU, its small shape on the simulator).
    #[arg(long)]
    pub shape: Option<String>,
    /// Element type, f32 (default), f16 or bf16 (f32, i32 or u32 for prefix sums).
    #[arg(long)]
    pub dtype: Option<String>,
    /// Quantized matmuls (`qmatmul_*`): K values per scale, 32, 64 or 128
    /// (default: the largest that divides K).
    #[arg(long)]
    pub group: Option<usize>,
    /// Timed runs (seed 004: 10; 1 to 10000).
    #[arg(long, default_value_t = 10, value_parser = parse_repeats)]
    pub repeats: usize,
    /// Untimed warm-up runs first (seed 004: 3; at most 10000).
    #[arg(long, default_value_t = 3, value_parser = parse_warmup)]
    pub warmup: usize,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// The registry entry `name` names: its full name (`softmax_f16`), or an
/// operation with `--dtype` (`softmax --dtype f16`; f32 when no `--dtype`).
/// `None` when no entry matches either way.
pub fn find(name: &str, dtype: Option<&str>) -> anyhow::Result<Option<Entry>> {
    let entries = registry();
    if let Some(e) = entries.iter().find(|e| e.name == name) {
        if let Some(d) = dtype {
            if e.elem.name() != d {
                anyhow::bail!("`{name}` works on {}, but --dtype {d} was given; name the operation alone (e.g. `{}`) to pick the type", e.elem.name(), op_name(e));
            }
        }
        return Ok(Some(e.clone()));
    }
    let dtype = dtype.unwrap_or("f32");
    let full = format!("{name}_{dtype}");
    if let Some(e) = entries.iter().find(|e| e.name == full) {
        return Ok(Some(e.clone()));
    }
    let types: Vec<&str> = entries.iter().filter(|e| op_name(e) == name).map(|e| e.elem.name()).collect();
    if !types.is_empty() {
        anyhow::bail!("`{name}` has no {dtype} variant; types: {}", types.join(", "));
    }
    Ok(None)
}

/// The entry `name` names ([`find`]), else the entry that dispatches the
/// kernel variant `name` at its default shape ([`find_variant`]), with a
/// note on stderr saying which entry stands for the variant. `None` when
/// neither matches.
pub fn find_entry(name: &str, dtype: Option<&str>) -> anyhow::Result<Option<Entry>> {
    if let Some(entry) = find(name, dtype)? {
        return Ok(Some(entry));
    }
    let Some((entry, _)) = find_variant(name)? else { return Ok(None) };
    eprintln!("`{name}` is a kernel of the library operation `{}`, which chooses it at its default shape; taking `{}`", entry.name, entry.name);
    Ok(Some(entry))
}

/// The kernels `entry` dispatches at `shape` (empty: its default shape),
/// in order, each once: found by one run on the simulator (without the
/// sanitizer), as the library builds them for that shape.
pub fn dispatched_kernels(entry: &Entry, shape: &[usize]) -> anyhow::Result<Vec<Kernel>> {
    let rt = Runtime::new(Device::Sim)?;
    let outcome = entry.run_with(&rt, shape, &Options::default()).with_context(|| format!("running `{}` to find its kernels", entry.name))?;
    let mut kernels: Vec<Kernel> = vec![];
    for launch in outcome.launches {
        if !kernels.iter().any(|k| k.name == launch.ir.name) {
            kernels.push(launch.ir);
        }
    }
    Ok(kernels)
}

/// The registry entry that dispatches a kernel named `kernel` at its
/// default shape, with that kernel: the entries that share a word of their
/// name with `kernel` (`softmax`, `f32`, …) are run on the simulator, those
/// sharing the most first (`softmax_f32` for `softmax_f32_vec4_c1`), until
/// one dispatches it. `None` when none does (a name of no kernel, or a
/// variant the library builds only at other shapes: `enigma emit <entry>
/// --shape ...` prints those).
pub fn find_variant(kernel: &str) -> anyhow::Result<Option<(Entry, Kernel)>> {
    let words: Vec<&str> = kernel.split('_').collect();
    let shared = |e: &Entry| e.name.split('_').filter(|w| words.contains(w)).count();
    let prefix = |e: &Entry| e.name.chars().zip(kernel.chars()).take_while(|(a, b)| a == b).count();
    let mut entries: Vec<Entry> = registry().into_iter().filter(|e| shared(e) > 0).collect();
    entries.sort_by_key(|e| std::cmp::Reverse((shared(e), prefix(e))));
    for entry in entries {
        if let Some(k) = dispatched_kernels(&entry, &[])?.into_iter().find(|k| k.name == kernel) {
            return Ok(Some((entry, k)));
        }
    }
    Ok(None)
}

/// The entry's name without its element-type suffix (`softmax_f16` →
/// `softmax`).
fn op_name(e: &Entry) -> &str {
    e.name.strip_suffix(&format!("_{}", e.elem.name())).unwrap_or(&e.name)
}

/// The shape from `--shape` (empty: the entry's default).
pub fn shape(text: Option<&str>) -> anyhow::Result<Vec<usize>> {
    Ok(match text {
        Some(t) => enigma_ops::parse_shape(t)?,
        None => vec![],
    })
}

/// `shape` (empty: the entry's default) with `--group` added as its last
/// dimension, for the entries that take one (the quantized matmuls); an
/// error for the others, or when the shape already names a group.
pub fn with_group(entry: &Entry, shape: Vec<usize>, group: Option<usize>) -> anyhow::Result<Vec<usize>> {
    let Some(group) = group else { return Ok(shape) };
    let Some(dim) = entry.optional_dim else {
        anyhow::bail!("--group applies to the quantized matmuls (`enigma run list`: qmatmul_*), not `{}`", entry.name)
    };
    let mut shape = if shape.is_empty() { entry.default_shape.clone() } else { shape };
    if shape.len() != entry.shape_names.len() {
        anyhow::bail!("--group {group} and a {dim} in --shape: give it once");
    }
    shape.push(group);
    Ok(shape)
}

/// Options from `--threads`, `--tile` and `--sanitize`.
pub fn options(threads: Option<u32>, tile: Option<GemmTile>, sanitize: bool) -> Options {
    Options { threads, gemm: GemmOptions { tile, ..GemmOptions::default() }, sanitize, ..Options::default() }
}

/// `kind: name` of the runtime's device.
pub fn device_name(rt: &Runtime) -> String {
    format!("{}: {}", rt.device().kind.name(), rt.device().name)
}

/// `64x1000`.
pub fn shape_text(shape: &[usize]) -> String {
    shape.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("x")
}

/// `enigma run list`: every entry with its shape and description. A reader
/// that stops early (`enigma run list | head`) is not an error.
pub fn list(json: bool) -> anyhow::Result<()> {
    let text = list_text(json)?;
    match writeln!(std::io::stdout().lock(), "{}", text.trim_end()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

fn list_text(json: bool) -> anyhow::Result<String> {
    let entries = registry();
    if json {
        let rows: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "name": e.name,
                    "elem": e.elem.name(),
                    "shape_names": e.shape_names,
                    "default_shape": e.default_shape,
                    "bench_shape": e.bench_shape,
                    "description": e.description,
                })
            })
            .collect();
        return Ok(serde_json::to_string_pretty(&rows)?);
    }
    let rows: Vec<[String; 4]> = entries.iter().map(|e| [e.name.clone(), e.shape_names.join("x"), shape_text(&e.default_shape), shape_text(&e.bench_shape)]).collect();
    let header = ["kernel", "shape", "default", "bench (GPU)"].map(String::from);
    let widths: Vec<usize> = (0..4).map(|c| rows.iter().chain([&header]).map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let line = |cells: &[String; 4], what: &str| {
        let cols: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("{}  {what}\n", cols.join("  "))
    };
    let mut out = line(&header, "what");
    out += &line(&std::array::from_fn(|c| "-".repeat(widths[c])), "----");
    for (r, e) in rows.iter().zip(&entries) {
        out += &line(r, &e.description);
    }
    out += &format!(
        "\n{} kernels. Run one: enigma run <kernel> [--shape RxC] [--dtype f16]; its code: enigma emit <kernel>; \
         sanitize it: enigma check <kernel>; time it: enigma bench <kernel>; tune it: enigma tune <kernel>.",
        entries.len()
    );
    Ok(out)
}

/// The most timed or warm-up runs `bench` and `tune` take: enough for any
/// measurement, and a bound on how long one command runs.
pub const MAX_RUNS: usize = 10_000;

fn parse_runs(s: &str, least: usize) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| format!("`{s}` is not a count"))?;
    if !(least..=MAX_RUNS).contains(&n) {
        return Err(format!("{n} is not between {least} and {MAX_RUNS}"));
    }
    Ok(n)
}

/// `--repeats`: 1 to [`MAX_RUNS`].
fn parse_repeats(s: &str) -> Result<usize, String> {
    parse_runs(s, 1)
}

/// `--warmup`: 0 to [`MAX_RUNS`].
fn parse_warmup(s: &str) -> Result<usize, String> {
    parse_runs(s, 0)
}
