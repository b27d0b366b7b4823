//! The sanitizer corpus (`enigma_testing::corpus`): every buggy
//! kernel is reported with the exact kind, variable and location (IR path and
//! Rust source line); its fixed version, and every kernel of the library,
//! runs with no finding at all — not even a warning.
//!
//! Kernels that validation rejects (barriers in thread-dependent control
//! flow) are checked twice: `Runtime::pipeline` must reject them with
//! `NonUniformBarrier` at the barrier, and the simulator, given the kernel
//! with barrier uniformity unchecked (`enigma_testing::harness::run_unvalidated`),
//! must report the divergence at run time. Bugs the runtime refuses at
//! dispatch (`corpus::refusals`) must fail with their message and no finding.

#![allow(clippy::result_large_err)] // RuntimeError is the runtime's own error type, returned as is.

use enigma_ir::{validate, Kernel, ValidationErrorKind, ValidationOptions};
use enigma_runtime::{Device, Finding, FindingKind, Options, Runtime, RuntimeError, Severity};
use enigma_testing::corpus::{self, Entry, Expected, Launch, Validation};
use enigma_testing::harness;

fn sanitize() -> Options {
    Options { sanitize: true, schedules: 0, ..Default::default() }
}

/// Runs `launch` through the runtime with the sanitizer; the findings
/// (errors included), or the error when the dispatch fails for another reason.
fn run_validated(rt: &Runtime, kernel: &Kernel, launch: &Launch) -> Result<Vec<Finding>, RuntimeError> {
    harness::findings(harness::dispatch(rt, kernel, launch, &sanitize()))
}

fn show(findings: &[Finding]) -> String {
    findings.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n")
}

/// Whether `f` is the report `x` describes.
fn matches(f: &Finding, x: &Expected) -> bool {
    let loc = |t: &Option<enigma_runtime::ThreadRef>| t.as_ref().map(|t| (t.location.clone(), t.source.clone()));
    let want = |s: &Option<corpus::Site>| s.map(|s| (s.path.to_string(), s.source()));
    let (first, second) = (loc(&f.first), loc(&f.second));
    let located = match (want(&x.at), want(&x.other)) {
        (None, _) => first.is_none() && second.is_none(),
        (Some(at), None) => first == Some(at),
        (Some(at), Some(other)) => {
            (first == Some(at.clone()) && second == Some(other.clone())) || (first == Some(other) && second == Some(at))
        }
    };
    f.kind == x.kind
        && f.variable.as_deref() == x.variable
        && x.index.is_none_or(|i| f.index == Some(i))
        && located
}

fn check_entry(name: &str) {
    let entry = Entry::find(name).unwrap_or_else(|| panic!("no corpus entry `{name}`"));
    let x = (entry.expected)();
    let rt = Runtime::new(Device::Sim).unwrap();
    let buggy = (entry.buggy.kernel)();
    let launch = (entry.buggy.launch)();

    // Every expected site carries a marker the builder recorded.
    for s in [x.at, x.other].into_iter().flatten() {
        assert!(s.source().is_some(), "{name}: marker `{}` is on no line", s.marker);
    }

    let findings = match entry.validation {
        Validation::Passes => {
            validate(&buggy, &ValidationOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let findings = run_validated(&rt, &buggy, &launch).unwrap_or_else(|e| panic!("{name}: {e}"));
            // Errors fail the dispatch; a coverage warning alone does not.
            let outcome = run_dispatch_outcome(&rt, &buggy, &launch);
            if x.kind == FindingKind::Coverage && x.with.is_empty() {
                assert!(outcome.is_ok(), "{name}: a coverage warning must not fail the dispatch");
            } else {
                assert!(matches!(outcome, Err(RuntimeError::Sanitizer { .. })), "{name}: the dispatch must fail");
            }
            findings
        }
        Validation::RejectsNonUniformBarrier { path } => {
            let err = rt.pipeline(&buggy).expect_err("validation must reject the barrier");
            let RuntimeError::Validation(e) = &err else { panic!("{name}: {err}") };
            assert!(
                matches!(e.kind, ValidationErrorKind::NonUniformBarrier { barrier: "threadgroup_barrier", .. }),
                "{name}: {e}"
            );
            assert_eq!(e.location.path.as_ref().map(|p| p.to_string()).as_deref(), Some(path), "{name}: {e}");
            let at = x.at.expect("a divergent barrier names the barrier");
            assert_eq!(at.path, path, "{name}: the expected report names the barrier validation names");
            assert_eq!(e.location.source.as_ref().map(|s| s.to_string()), at.source(), "{name}: {e}");
            harness::run_unvalidated(&buggy, &launch, &sanitize()).unwrap_or_else(|e| panic!("{name}: {e}"))
        }
    };

    assert!(findings.iter().any(|f| matches(f, &x)), "{name}: expected {x:?}; the sanitizer reported:\n{}", show(&findings));
    for f in &findings {
        let k = f.kind;
        let allowed = k == x.kind || x.with.iter().chain(x.may).any(|w| *w == k);
        assert!(allowed, "{name}: unexpected {k:?}:\n{}", show(&findings));
        assert_eq!(f.severity == Severity::Warning, k == FindingKind::Coverage, "{name}: {f}");
        assert_eq!(f.kernel, buggy.name);
        assert!(!f.hint.is_empty() && !f.message.is_empty(), "{name}: {f}");
        let text = f.to_string();
        assert!(text.contains(&format!("kernel `{}`", buggy.name)) && text.contains("hint: "), "{name}: {text}");
    }
    for w in x.with {
        assert!(findings.iter().any(|f| f.kind == *w), "{name}: {w:?} must be reported too:\n{}", show(&findings));
    }

    // The fixed version validates and runs clean: no finding, not even a warning.
    let fixed = (entry.fixed.kernel)();
    let launch = (entry.fixed.launch)();
    let report = run_dispatch_outcome(&rt, &fixed, &launch).unwrap_or_else(|e| panic!("{name} (fixed): {e}"));
    assert!(report.is_empty(), "{name} (fixed):\n{}", show(&report));
}

/// The plain outcome of a sanitized dispatch through the runtime.
fn run_dispatch_outcome(rt: &Runtime, kernel: &Kernel, launch: &Launch) -> Result<Vec<Finding>, RuntimeError> {
    harness::dispatch(rt, kernel, launch, &sanitize()).map(|r| r.findings)
}

macro_rules! corpus_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_entry(stringify!($name));
            }
        )*

        #[test]
        fn every_corpus_entry_has_a_test() {
            let tested = [$(stringify!($name)),*];
            let names: Vec<&str> = corpus::entries().iter().map(|e| e.name).collect();
            assert_eq!(names, tested);
        }
    };
}

corpus_tests! {
    tree_reduction_missing_barrier,
    neighbour_read_before_barrier,
    double_buffer_swap_without_barrier,
    async_copy_read_in_flight,
    simd_totals_one_slot,
    histogram_without_atomics,
    lane0_write_without_simdgroup_barrier,
    fused_dequant_staging_without_simdgroup_barrier,
    matrix_load_of_a_tile_staged_by_another_simdgroup,
    simd_shift_in_place,
    output_indexed_by_thread_in_threadgroup,
    in_place_neighbour_update,
    global_sum_without_atomics,
    simd_lanes_store_one_element,
    dot_product_without_atomics,
    atomic_counter_read_plainly,
    stencil_halo_never_loaded,
    partials_read_by_every_lane,
    shuffle_inside_branch,
    broadcast_from_inactive_lane,
    butterfly_in_partial_simdgroup,
    barrier_inside_lid_lt_16,
    early_return_before_barrier,
    barrier_in_per_thread_loop,
    missing_bounds_check,
    tile_overrun,
    threadgroup_count_as_grid,
    rows_dispatched_as_threads,
    cooperative_slots_by_index,
}

/// Bugs the runtime refuses at dispatch (`corpus::refusals`): the buggy
/// launch fails with the corpus's message, naming the kernel, and is no
/// sanitizer finding; the fixed launch runs with no finding at all.
#[test]
fn every_refusal_is_refused_at_dispatch_and_its_fix_runs_clean() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let refusals = corpus::refusals();
    assert!(refusals.iter().any(|r| r.name == "cooperative_scope_mismatch"));
    for r in &refusals {
        let kernel = (r.buggy.kernel)();
        let err = run_dispatch_outcome(&rt, &kernel, &(r.buggy.launch)()).expect_err(r.name);
        assert!(!matches!(err, RuntimeError::Sanitizer { .. }), "{}: {err}", r.name);
        let text = err.to_string();
        assert!(text.contains(&format!("kernel `{}` {}", kernel.name, r.message)), "{}: {text}", r.name);
        let fixed = (r.fixed.kernel)();
        let findings = run_dispatch_outcome(&rt, &fixed, &(r.fixed.launch)()).unwrap_or_else(|e| panic!("{} (fixed): {e}", r.name));
        assert!(findings.is_empty(), "{} (fixed):\n{}", r.name, show(&findings));
    }
}

#[test]
fn every_library_kernel_runs_clean() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let cases = corpus::library();
    let mut names: Vec<String> = cases.iter().map(|c| (c.variant.kernel)().name).collect();
    for case in &cases {
        let kernel = (case.variant.kernel)();
        let findings = run_dispatch_outcome(&rt, &kernel, &(case.variant.launch)()).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert!(findings.is_empty(), "{}:\n{}", case.name, show(&findings));
    }
    // Every kernel of dispatch_patterns::all() and the reduce passes is among them.
    names.sort();
    let mut library: Vec<String> = enigma_kernels::dispatch_patterns::all().into_iter().map(|k| k.name).collect();
    library.extend(["reduce_threadgroup", "reduce_final"].map(String::from));
    for name in library {
        assert!(names.contains(&name), "library kernel `{name}` has no clean case");
    }
}
