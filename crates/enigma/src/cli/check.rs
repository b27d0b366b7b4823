//! `enigma check <target>`: validates the target's kernels and runs its
//! dispatches on the simulator with the sanitizer, then prints every finding
//! (or, with `--json`, a JSON array of them). Exits 1 when there is any
//! finding — a validation error, a sanitizer error or a warning — and 0 when
//! the target is clean.
//!
//! Targets: the examples of `enigma run` (with the same setup), the seed
//! kernels by their function names (`gemm_tiled`, `reduce_final`, …), the
//! kernel library of `enigma run list` by its names (`softmax_f16`, …: one
//! checked run at the entry's default shape), and the buggy kernels of the
//! sanitizer corpus as `corpus/<name>` (with `--fixed`, their fixed
//! versions); a variant of the library that `enigma run` reports
//! (`softmax_f32_vec4_c1`) checks the library kernel that dispatches it.
//! A user's own kernel (`file.py::name`, or an IR file: `cli::source`) is
//! compiled and validated; it is not dispatched, as `check` knows no
//! arguments for it (run it under the sanitizer from Python with
//! `enigma.MetalRuntime(sanitize=True)`). Corpus kernels that validation rejects
//! (barriers in thread-dependent control flow) are reported as such and then
//! run with barrier uniformity unchecked, to show what happens at run time.

use super::examples::{self, Session, EXAMPLES};
use super::library;
use super::source::{self, Source};
use anyhow::Context;
use enigma_ir::{validate, Kernel, ValidationError, ValidationOptions};
use enigma_runtime::{Device, Finding, DispatchMode, Options, Runtime, RuntimeError};
use enigma_testing::corpus::{self, Entry, Launch, Validation};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to check: an example (reduce, scale, row_sum, prefix_sum, stencil,
    /// gemm), a seed kernel (e.g. gemm_tiled, reduce_final), a library kernel
    /// of `enigma run list` (e.g. softmax_f16), a corpus kernel
    /// (corpus/<name>), a user's kernel (file.py::name, or an IR file), or
    /// all (every example, seed and library kernel).
    #[arg(required_unless_present = "list")]
    pub target: Option<String>,
    /// For corpus/<name>: check the fixed version instead of the buggy one.
    #[arg(long)]
    pub fixed: bool,
    /// Number of elements for the examples (the sanitizer is slower than a
    /// plain simulation: about 3x per SIMD-group schedule).
    #[arg(long, default_value_t = 1 << 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub n: u32,
    /// SIMD-group schedules to run (0: the default, 3; at most 100). Library
    /// kernels of `enigma run list` always run the default.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub schedules: u32,
    /// Print the findings as one JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    /// List the targets and exit.
    #[arg(long)]
    pub list: bool,
}

/// What checking one target found.
#[derive(Debug)]
struct Report {
    target: String,
    /// What the target is, for the text output.
    about: String,
    kernels: Vec<String>,
    validation: Vec<ValidationError>,
    findings: Vec<Finding>,
    /// Problems of a library kernel's checked run that are not sanitizer
    /// errors: its warnings (as text) and a result outside tolerance.
    notes: Vec<String>,
}

impl Report {
    fn problems(&self) -> usize {
        self.validation.len() + self.findings.len() + self.notes.len()
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.list {
        print_targets(args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let target = args.target.clone().unwrap_or_default();
    let rt = Runtime::new(Device::Sim)?;
    let options = Options { sanitize: true, schedules: args.schedules, ..Default::default() };
    let targets: Vec<Target> = if target == "all" {
        let examples = EXAMPLES.iter().map(|e| Target::Example(e));
        let seeds = corpus::library().into_iter().map(Target::Kernel);
        examples.chain(seeds).chain(enigma_ops::registry().into_iter().map(Target::Op)).collect()
    } else if let Some(name) = target.strip_prefix("corpus/") {
        let entry = Entry::find(name).with_context(|| format!("no corpus entry `{name}`; `enigma check --list` lists them"))?;
        vec![Target::Corpus(entry)]
    } else {
        // A name can be both an example and a seed kernel (scale): check both.
        let example = EXAMPLES.iter().find(|e| **e == target).map(|e| Target::Example(e));
        let kernel = examples::library_case(&target).map(Target::Kernel);
        let op = enigma_ops::registry().into_iter().find(|e| e.name == target).map(Target::Op);
        let mut found: Vec<Target> = example.into_iter().chain(kernel).chain(op).collect();
        if found.is_empty() && source::is_user_kernel(&target) {
            found.push(Target::User(target.clone(), source::load(&target)?));
        }
        if found.is_empty() {
            if let Some((entry, _)) = library::find_variant(&target)? {
                found.push(Target::Variant(target.clone(), entry));
            }
        }
        anyhow::ensure!(!found.is_empty(), "unknown target `{target}`; `enigma check --list` lists them");
        found
    };
    anyhow::ensure!(!args.fixed || matches!(targets[..], [Target::Corpus(_)]), "--fixed applies to corpus/<name> targets only");
    let mut reports = vec![];
    for t in targets {
        let name = t.name();
        reports.push(check_target(&rt, t, &args, &options).with_context(|| format!("checking `{name}`"))?);
    }
    let clean = reports.iter().all(|r| r.problems() == 0);
    if args.json {
        let mut all = vec![];
        for r in &reports {
            all.extend(r.validation.iter().map(validation_json));
            for f in &r.findings {
                all.push(serde_json::to_value(f)?);
            }
            all.extend(r.notes.iter().map(|n| note_json(&r.target, n)));
        }
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        for r in &reports {
            print_report(r);
        }
    }
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Something `enigma check` runs.
enum Target {
    /// An example of `enigma run`, with its setup.
    Example(&'static str),
    /// A seed kernel with its clean dispatch.
    Kernel(corpus::Case),
    /// A kernel of the library (`enigma run list`), run once at its
    /// default shape and checked against its reference.
    Op(enigma_ops::Entry),
    /// A corpus entry (its buggy version unless `--fixed`).
    Corpus(Entry),
    /// A variant of the library (its kernel name), checked through the
    /// library kernel that dispatches it.
    Variant(String, enigma_ops::Entry),
    /// A user's kernel (as named on the command line), validated.
    User(String, Source),
}

impl Target {
    fn name(&self) -> String {
        match self {
            Target::Example(e) => e.to_string(),
            Target::Kernel(c) => c.name.to_string(),
            Target::Op(e) => e.name.clone(),
            Target::Corpus(e) => format!("corpus/{}", e.name),
            Target::Variant(name, _) | Target::User(name, _) => name.clone(),
        }
    }
}

fn check_target(rt: &Runtime, target: Target, args: &Args, options: &Options) -> anyhow::Result<Report> {
    let mut session = Session::new(rt, options.clone());
    let name = target.name();
    match target {
        Target::Corpus(entry) => check_corpus(&mut session, name, entry, args.fixed),
        Target::Example(example) => {
            let kernels = examples::example_kernels(example);
            let validation = validate_all(&kernels);
            if validation.is_empty() {
                let outcome = examples::run_example(&mut session, example, args.n)?;
                // Under the sanitizer the result is still judged: a wrong sum is worth saying.
                anyhow::ensure!(outcome.ok || !session.findings.is_empty(), "`{example}` ran clean but disagrees with its reference");
            }
            let sized = ["reduce", "scale", "prefix_sum", "stencil"].contains(&example);
            Ok(Report {
                target: name,
                about: if sized { format!("example, n = {}", args.n) } else { "example".into() },
                kernels: kernels.iter().map(|k| k.name.clone()).collect(),
                validation,
                findings: session.findings,
                notes: vec![],
            })
        }
        Target::Op(entry) => check_op(rt, name, &entry),
        Target::Variant(_, entry) => {
            let mut report = check_op(rt, name, &entry)?;
            report.about = format!("a kernel of library kernel `{}`, checked through it: {}", entry.name, report.about);
            Ok(report)
        }
        Target::User(_, source) => Ok(check_user(name, source)),
        Target::Kernel(case) => {
            let kernel = (case.variant.kernel)();
            let launch = (case.variant.launch)();
            let validation = validate_all(std::slice::from_ref(&kernel));
            if validation.is_empty() {
                session.launch(&kernel, &launch)?;
            }
            Ok(Report {
                target: name,
                about: format!("seed kernel, {}", describe(&launch)),
                kernels: vec![kernel.name],
                validation,
                findings: session.findings,
                notes: vec![],
            })
        }
    }
}

fn check_corpus(session: &mut Session<'_>, target: String, entry: Entry, fixed: bool) -> anyhow::Result<Report> {
    let variant = if fixed { entry.fixed } else { entry.buggy };
    let kernel = (variant.kernel)();
    let launch = (variant.launch)();
    let validation = validate_all(std::slice::from_ref(&kernel));
    let non_uniform_barrier_only = !fixed && matches!(entry.validation, Validation::RejectsNonUniformBarrier { .. });
    if validation.is_empty() {
        session.launch(&kernel, &launch)?;
    } else if non_uniform_barrier_only {
        let findings = enigma_testing::harness::run_unvalidated(&kernel, &launch, &session.options).map_err(|e| match e {
            RuntimeError::Validation(e) => anyhow::Error::new(e).context("the kernel fails validation for more than its barriers"),
            e => e.into(),
        })?;
        session.findings.extend(findings);
    }
    let version = if fixed { "fixed" } else { "buggy" };
    let mut about = format!("corpus, {version}: {} — {}; {}", entry.class, entry.description, describe(&launch));
    if non_uniform_barrier_only {
        about.push_str("; validation rejects it, so it ran with barrier uniformity unchecked");
    }
    Ok(Report { target, about, kernels: vec![kernel.name], validation, findings: std::mem::take(&mut session.findings), notes: vec![] })
}

/// One checked run of a library kernel at its default shape, every
/// dispatch under the sanitizer: error findings are the report's findings,
/// warnings and a result outside tolerance its notes.
fn check_op(rt: &Runtime, target: String, entry: &enigma_ops::Entry) -> anyhow::Result<Report> {
    let options = enigma_ops::Options { sanitize: true, ..Default::default() };
    let about = format!("library kernel, shape {}, 3 schedules", library::shape_text(&entry.default_shape));
    let mut report = Report { target, about, kernels: vec![], validation: vec![], findings: vec![], notes: vec![] };
    match entry.run_with(rt, &[], &options) {
        Ok(outcome) => {
            for l in &outcome.launches {
                if !report.kernels.contains(&l.kernel) {
                    report.kernels.push(l.kernel.clone());
                }
                report.notes.extend(l.findings.iter().map(|f| format!("{} ({}): {f}", l.kernel, l.mode)));
            }
            if !outcome.passed {
                report.notes.push(format!("result outside tolerance: {outcome}"));
            }
        }
        Err(enigma_ops::Error::Runtime(RuntimeError::Sanitizer { kernel, findings })) => {
            report.kernels.push(kernel);
            report.findings = findings;
        }
        Err(e) => return Err(e.into()),
    }
    Ok(report)
}

/// A user's kernel: compiled and validated, not dispatched; a compile
/// error (which includes the validator's) is its one finding.
fn check_user(target: String, source: Source) -> Report {
    let about = "your kernel, validated (not dispatched: run it with enigma.MetalRuntime(sanitize=True) for the sanitizer)".to_string();
    match source {
        Source::Kernel(kernel) => {
            let validation = validate_all(std::slice::from_ref(&kernel));
            Report { target, about, kernels: vec![kernel.name], validation, findings: vec![], notes: vec![] }
        }
        Source::CompileError(message) => {
            Report { target, about, kernels: vec![], validation: vec![], findings: vec![], notes: vec![format!("does not compile: {message}")] }
        }
    }
}

fn validate_all(kernels: &[Kernel]) -> Vec<ValidationError> {
    kernels.iter().filter_map(|k| validate(k, &ValidationOptions::default()).err()).collect()
}

fn describe(launch: &Launch) -> String {
    let dims = |d: [u32; 3]| d.iter().map(u32::to_string).collect::<Vec<_>>().join("×");
    let call = match launch.mode {
        DispatchMode::Threads => "dispatch_threads",
        DispatchMode::Threadgroups => "dispatch_threadgroups",
    };
    format!("{call}({}, {})", dims(launch.size), dims(launch.threads_per_threadgroup))
}

/// A validation error as a JSON object shaped like a finding.
fn validation_json(e: &ValidationError) -> serde_json::Value {
    serde_json::json!({
        "kind": "validation_error",
        "severity": "error",
        "kernel": e.kernel,
        "message": e.kind.to_string(),
        "location": e.location.path.as_ref().map(|p| p.to_string()),
        "source": e.location.source.as_ref().map(|s| s.to_string()),
    })
}

/// A note of a library kernel's run as a JSON object shaped like a finding.
fn note_json(target: &str, note: &str) -> serde_json::Value {
    serde_json::json!({ "kind": "library_check", "severity": "warning", "kernel": target, "message": note })
}

fn print_report(r: &Report) {
    let problems = r.problems();
    let verdict = if problems == 0 { "clean".to_string() } else { format!("{problems} finding(s)") };
    println!("check {} ({}): {} — {verdict}", r.target, r.about, r.kernels.join(", "));
    for e in &r.validation {
        println!("error: validation: {e}");
    }
    for f in &r.findings {
        println!("{f}");
    }
    for n in &r.notes {
        println!("warning: {n}");
    }
    if problems > 0 {
        println!();
    }
}

fn print_targets(json: bool) -> anyhow::Result<()> {
    if json {
        // One object per target: its name, its kind and what it is.
        let mut all = vec![];
        for e in EXAMPLES {
            let kernels: Vec<String> = examples::example_kernels(e).into_iter().map(|k| k.name).collect();
            all.push(serde_json::json!({ "target": e, "kind": "example", "kernels": kernels }));
        }
        for c in corpus::library() {
            all.push(serde_json::json!({ "target": c.name, "kind": "seed", "dispatch": describe(&(c.variant.launch)()) }));
        }
        for e in enigma_ops::registry() {
            all.push(serde_json::json!({ "target": e.name, "kind": "library", "shape": e.default_shape, "description": e.description }));
        }
        for e in corpus::entries() {
            all.push(serde_json::json!({ "target": format!("corpus/{}", e.name), "kind": "corpus", "class": e.class }));
        }
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    println!("examples (as `enigma run` sets them up; --n elements):");
    for e in EXAMPLES {
        let kernels: Vec<String> = examples::example_kernels(e).into_iter().map(|k| k.name).collect();
        println!("  {e:<40} {}", kernels.join(", "));
    }
    println!("seed kernels (their own dispatch):");
    for c in corpus::library() {
        println!("  {:<40} {}", c.name, describe(&(c.variant.launch)()));
    }
    println!("library kernels (`enigma run list`; one checked run at the default shape):");
    for e in enigma_ops::registry() {
        println!("  {:<40} shape {}", e.name, library::shape_text(&e.default_shape));
    }
    println!("sanitizer corpus (buggy; add --fixed for the fix):");
    for e in corpus::entries() {
        println!("  {:<40} {}", format!("corpus/{}", e.name), e.class);
    }
    Ok(())
}
