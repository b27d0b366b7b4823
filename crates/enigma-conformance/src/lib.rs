//! enigma's execution conformance suite: the cases every backend must pass,
//! written once against the [`Runtime`] API and run by each backend's tests.
//!
//! Each case builds kernels with the builder DSL, runs them on random inputs
//! from a seeded generator (so a failure reproduces: the message names the
//! seed, and `ENIGMA_CONFORMANCE_SEED` overrides it) and compares against a
//! plain-Rust reference: exactly where the result is defined exactly
//! (integer ops, elementwise float ops, conversions, and float sums whose
//! inputs make every order exact), within a stated tolerance otherwise (math
//! functions, float reductions in an unspecified order).
//!
//! A backend's test file expands the cases into one `#[test]` each:
//!
//! ```no_run
//! // e.g. crates/enigma-cuda/tests/conformance.rs
//! use enigma_runtime::{Device, Runtime};
//! enigma_conformance::conformance_tests!(Runtime::new(Device::Cuda));
//! # fn main() {}
//! ```
//!
//! The runtime expression may be an `Option<Runtime>`, a
//! `Result<Runtime, E: Display>` or a `Runtime`; when it gives no runtime
//! (no such device) every test prints `skipped: <reason>` and passes,
//! recorded as a skip ([`skip`]: `scripts/test.sh` counts them). It is
//! evaluated once per test binary. [`conformance_sim_only_tests!`] adds the
//! cases only the simulator can pass (out-of-bounds detection, runtime
//! barrier divergence, division by zero). Both take an optional
//! `known_failures = LIST` (a `&[&str]` of case names): a listed case must
//! still fail (its test passes and prints the failure), and once it passes
//! its test fails so the entry gets removed.
//!
//! [`run_all`] runs everything for a CLI summary.

pub use enigma_runtime;
use enigma_runtime::{DeviceKind, Runtime};
use std::fmt::Display;
use std::io::Write;

/// The environment variable naming the file where skipped GPU tests are
/// recorded, one line each (`scripts/test.sh` sets it and prints the count).
pub const SKIP_LOG_ENV: &str = "ENIGMA_SKIP_LOG";

/// The first word of a skip record's line, for scripts that read the log.
pub const SKIP_MARKER: &str = "enigma-skip";

/// A test that cannot run for want of a device (no CUDA driver, no Metal
/// GPU, not macOS): prints `skipped: <reason>` (seen with `--nocapture`) and,
/// when [`SKIP_LOG_ENV`] names a file, appends one line to it:
/// `enigma-skip<TAB>package<TAB>test<TAB>reason`. `package` is the calling
/// crate (`env!("CARGO_PKG_NAME")`); the test is the current thread's name,
/// which the test harness sets to the test's path. The caller's test then
/// returns and passes.
///
/// # Panics
/// When the log is named but cannot be written: a skip that goes uncounted
/// would make the summary lie.
pub fn skip(package: &str, reason: &dyn Display) {
    println!("skipped: {reason}");
    if let Some(log) = std::env::var_os(SKIP_LOG_ENV) {
        let test = std::thread::current().name().unwrap_or("unnamed test").to_string();
        let path = std::path::Path::new(&log);
        record_skip(path, package, &test, &reason.to_string())
            .unwrap_or_else(|e| panic!("{SKIP_LOG_ENV}={}: cannot record the skip of `{test}`: {e}", path.display()));
    }
}

/// Appends one skip record to `log` (one `write` of one line, so that tests
/// skipping in parallel do not interleave). Tabs and newlines in the fields
/// become spaces.
fn record_skip(log: &std::path::Path, package: &str, test: &str, reason: &str) -> std::io::Result<()> {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let line = format!("{SKIP_MARKER}\t{}\t{}\t{}\n", clean(package), clean(test), clean(reason));
    std::fs::OpenOptions::new().create(true).append(true).open(log)?.write_all(line.as_bytes())
}

mod columns;
mod util;

pub mod arith;
pub mod async_copy;
pub mod atomics;
pub mod builtins;
pub mod casts;
pub mod control;
pub mod cooperative;
pub mod errors;
pub mod kernels;
pub mod matrices;
pub mod math;
pub mod memory;
pub mod printing;
pub mod sim_only;
pub mod simd;
pub mod spec;
pub mod textures;
pub mod thread_arrays;
pub mod tile_copy;
pub mod vectors;

pub use util::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, seed_for, CaseResult, SEED_ENV};

/// One conformance case: a name and a function that runs it on a runtime.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub name: &'static str,
    pub run: fn(&Runtime) -> Result<(), String>,
}

impl Case {
    /// Runs the case; a panic inside it (in the backend or the case) is
    /// turned into an error, so one case never stops a summary.
    pub fn run_catching(&self, rt: &Runtime) -> CaseResult {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.run)(rt))) {
            Ok(result) => result,
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a non-string panic payload".into());
                Err(format!("panicked: {msg}"))
            }
        }
    }
}

/// Calls `$crate::$callback!{ (args) [module::case, …] }` with the list of
/// portable or simulator-only cases. The one place cases are listed.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_cases {
    (portable, $callback:ident, $($args:tt)*) => {
        $crate::$callback! { ($($args)*) [
            builtins::builtins_1d_threads,
            builtins::builtins_2d_threads,
            builtins::builtins_3d_threads,
            builtins::builtins_1d_threadgroups,
            builtins::builtins_2d_threadgroups,
            builtins::builtins_3d_threadgroups,
            builtins::threadgroup_sizes,
            arith::int_ops_i32,
            arith::int_ops_u32,
            arith::int_ops_i8,
            arith::int_ops_u8,
            arith::int_ops_i16,
            arith::int_ops_u16,
            arith::int_ops_i64,
            arith::int_ops_u64,
            arith::float_ops_f32,
            arith::float_ops_f16,
            arith::float_ops_bf16_via_casts,
            arith::narrow_int_ops_via_casts,
            arith::bool_ops,
            arith::int_loads_keep_sign,
            casts::casts_from_f32,
            casts::casts_from_32bit_ints,
            casts::casts_from_narrow_and_wide_ints,
            casts::casts_int64_to_f32_rounding,
            casts::casts_half_and_bfloat,
            casts::bitcasts,
            vectors::vectors,
            math::math_precise,
            math::math_fast,
            math::math_exact_float,
            math::math_integer,
            simd::simd_full_groups,
            simd::simd_partial_last_group,
            simd::simd_divergent_lane_mod3,
            simd::simd_divergent_lane_lt8,
            simd::simd_divergent_lane_ge24,
            simd::simd_divergent_data,
            simd::simd_nested_divergence,
            simd::simd_in_else_branch,
            simd::simd_after_early_return,
            simd::simd_sum_f32_tolerance,
            simd::simd_other_types,
            memory::threadgroup_memory_neighbours,
            memory::threadgroup_memory_scan,
            memory::threadgroup_memory_transpose,
            memory::multi_dim_transpose,
            memory::device_memory_barrier,
            thread_arrays::thread_arrays,
            printing::print_lines,
            async_copy::async_copy_pipeline,
            tile_copy::tile_copy_pipeline,
            kernels::seed000_scale,
            kernels::seed000_scale_vec4,
            kernels::seed000_two_stage_reduction,
            kernels::seed000_row_sum,
            kernels::seed000_simd_broadcast,
            kernels::seed000_prefix_sum,
            kernels::seed000_shuffle_stencil,
            kernels::seed000_gemm_tiled,
            kernels::seed001_reduction,
            matrices::matrix_multiply_8x8x8,
            matrices::matrix_loads_and_stores,
            matrices::matrix_loads_from_vector_memory,
            matrices::matrix_quantized_loads,
            matrices::matrix_fill_and_diagonal,
            matrices::matrix_tile_64x64_four_simdgroups,
            matrices::matrix_per_lane_view,
            matrices::matrix_partial_simdgroup_refused,
            cooperative::cooperative_gemm_tile_slots_and_row_sums,
            cooperative::cooperative_overlapped_products_through_three_stages,
            cooperative::cooperative_combine_rows_columns_and_elements,
            cooperative::cooperative_dequantize_into_a_left_operand,
            cooperative::cooperative_dequantize_fragment_order_into_a_left_operand,
            cooperative::cooperative_dequantize_mlx_affine_into_a_left_operand,
            textures::texture_formats_round_trip,
            textures::texture_listing4_covers_1920_by_1080,
            textures::texture_sampling_every_filter_and_address_mode,
            textures::texture_read_write_follows_the_tier,
            control::control_early_return,
            control::control_if_else_nesting,
            control::control_for_loops,
            control::control_for_bounds_evaluated_once,
            control::control_while_loops,
            control::control_break_continue_divergent,
            control::control_return_in_loop,
            control::control_loops_with_simd,
            control::control_narrow_loop_variable,
            spec::spec_constants,
            atomics::atomics_device_add,
            atomics::atomics_device_min_max_float,
            atomics::atomics_bitwise,
            atomics::atomics_exchange_compare_exchange,
            atomics::atomics_threadgroup,
            atomics::atomics_device_fence_last_threadgroup_sums,
            errors::errors_threadgroup_too_large,
            errors::errors_zero_sized_dispatch,
            errors::errors_argument_mismatch,
            errors::errors_threadgroup_memory_limit,
            errors::errors_validation,
        ] }
    };
    (sim_only, $callback:ident, $($args:tt)*) => {
        $crate::$callback! { ($($args)*) [
            sim_only::sim_out_of_bounds,
            sim_only::sim_division_by_zero,
            sim_only::sim_divergent_barrier_at_run_time,
        ] }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __case_vec {
    (() [ $($module:ident :: $case:ident),* $(,)? ]) => {
        vec![ $( $crate::Case { name: stringify!($case), run: $crate::$module::$case } ),* ]
    };
}

/// The cases every backend must pass.
pub fn cases() -> Vec<Case> {
    crate::__with_cases!(portable, __case_vec,)
}

/// Cases only the simulator can pass: out-of-bounds accesses, barriers that
/// diverge at run time and integer division by zero are errors there, and
/// undefined behaviour on GPUs.
pub fn sim_only_cases() -> Vec<Case> {
    crate::__with_cases!(sim_only, __case_vec,)
}

/// Runs every case on `rt` (and, on the simulator, the simulator-only cases),
/// catching panics; for a summary table.
pub fn run_all(rt: &Runtime) -> Vec<(&'static str, CaseResult)> {
    let mut all = cases();
    if rt.device().kind == DeviceKind::Simulator {
        all.extend(sim_only_cases());
    }
    all.iter()
        .map(|case| (case.name, case.run_catching(rt)))
        .collect()
}

/// What a backend's test file passes to the test macros: a runtime, or the
/// reason there is none.
pub trait TestRuntime {
    fn into_test_runtime(self) -> Result<Runtime, String>;
}

impl TestRuntime for Runtime {
    fn into_test_runtime(self) -> Result<Runtime, String> {
        Ok(self)
    }
}

impl TestRuntime for Option<Runtime> {
    fn into_test_runtime(self) -> Result<Runtime, String> {
        self.ok_or_else(|| "the runtime expression gave no runtime (no such device here)".into())
    }
}

impl<E: Display> TestRuntime for Result<Runtime, E> {
    fn into_test_runtime(self) -> Result<Runtime, String> {
        self.map_err(|e| e.to_string())
    }
}

/// The body of one generated test; without a runtime it calls `on_skip`
/// with the reason ([`skip`] in the generated tests) and returns.
#[doc(hidden)]
pub fn __run_case_test(
    on_skip: impl FnOnce(&str),
    name: &'static str,
    run: fn(&Runtime) -> CaseResult,
    rt: &Result<Runtime, String>,
    known_failures: &[&str],
) {
    let rt = match rt {
        Ok(rt) => rt,
        Err(reason) => {
            on_skip(reason);
            return;
        }
    };
    let device = &rt.device().name;
    let known = known_failures.contains(&name);
    match (Case { name, run }.run_catching(rt), known) {
        (Ok(()), false) => {}
        (Err(e), false) => panic!("conformance case `{name}` failed on {device}:\n{e}"),
        (Err(e), true) => println!("known failure (listed in KNOWN_FAILURES), still failing as expected:\n{e}"),
        (Ok(()), true) => panic!("conformance case `{name}` is listed as a known failure but now passes on {device}: remove it from the list"),
    }
}

/// Checks that every name in a known-failures list is a case.
#[doc(hidden)]
pub fn __check_known_failures(known_failures: &[&str]) {
    let all: Vec<&str> = cases()
        .iter()
        .chain(sim_only_cases().iter())
        .map(|c| c.name)
        .collect();
    for name in known_failures {
        assert!(
            all.contains(name),
            "`{name}` is listed as a known failure but no conformance case has that name"
        );
    }
}

#[doc(hidden)]
#[macro_export]
macro_rules! __or_empty {
    () => {
        &[]
    };
    ($e:expr) => {
        $e
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __test_fns {
    (($rt:expr, ($($known:expr)?)) [ $($module:ident :: $case:ident),* $(,)? ]) => {
        fn __runtime() -> &'static ::std::result::Result<$crate::enigma_runtime::Runtime, ::std::string::String> {
            static RUNTIME: ::std::sync::OnceLock<
                ::std::result::Result<$crate::enigma_runtime::Runtime, ::std::string::String>,
            > = ::std::sync::OnceLock::new();
            RUNTIME.get_or_init(|| $crate::TestRuntime::into_test_runtime($rt))
        }
        fn __known_failures() -> &'static [&'static str] {
            $crate::__or_empty!($($known)?)
        }
        $(
            #[test]
            fn $case() {
                $crate::__run_case_test(|reason| $crate::skip(env!("CARGO_PKG_NAME"), &reason), stringify!($case), $crate::$module::$case, __runtime(), __known_failures());
            }
        )*
        #[test]
        fn known_failures_name_real_cases() {
            $crate::__check_known_failures(__known_failures());
        }
    };
}

/// Expands to a module `conformance` with one `#[test]` per portable case,
/// run on the runtime `$rt` gives (`Option<Runtime>`, `Result<Runtime, E>`
/// or `Runtime`). Optional: `known_failures = LIST`.
#[macro_export]
macro_rules! conformance_tests {
    ($rt:expr $(, known_failures = $known:expr)? $(,)?) => {
        mod conformance {
            #[allow(unused_imports)]
            use super::*;
            $crate::__with_cases!(portable, __test_fns, $rt, ($($known)?));
        }
    };
}

/// Like [`conformance_tests!`], for the simulator-only cases, in a module
/// `conformance_sim_only`.
#[macro_export]
macro_rules! conformance_sim_only_tests {
    ($rt:expr $(, known_failures = $known:expr)? $(,)?) => {
        mod conformance_sim_only {
            #[allow(unused_imports)]
            use super::*;
            $crate::__with_cases!(sim_only, __test_fns, $rt, ($($known)?));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_runtime::Device;

    fn passes(_: &Runtime) -> CaseResult {
        Ok(())
    }

    fn fails(_: &Runtime) -> CaseResult {
        Err("wrong".into())
    }

    fn no_skip(reason: &str) {
        panic!("skipped with a runtime: {reason}")
    }

    fn must_not_run(_: &Runtime) -> CaseResult {
        panic!("a skipped case ran")
    }

    /// The read-write tier case passes on devices of every tier: the
    /// simulator posing as tier 1 (r32 formats run, the others are refused)
    /// and as tier none (every format refused).
    #[test]
    fn the_read_write_tier_case_passes_on_lower_tiers() {
        use enigma_runtime::ReadWriteTier;
        for tier in [ReadWriteTier::None, ReadWriteTier::Tier1] {
            let sim = enigma_sim::SimBackend::new().with_read_write_textures(tier);
            let rt = Runtime::with_backend(std::sync::Arc::new(sim));
            assert_eq!(textures::texture_read_write_follows_the_tier(&rt), Ok(()), "{tier}");
        }
    }

    #[test]
    fn a_skip_is_one_line_of_the_log_with_package_test_and_reason() {
        let log = std::env::temp_dir().join(format!("enigma-skip-log-{}", std::process::id()));
        let _ = std::fs::remove_file(&log);
        record_skip(&log, "enigma-cuda", "conformance::barrier", "device `cuda` is not available:\tno driver\n").unwrap();
        record_skip(&log, "enigma-metal", "metal_conformance", "only on macOS").unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::remove_file(&log).unwrap();
        assert_eq!(
            text,
            "enigma-skip\tenigma-cuda\tconformance::barrier\tdevice `cuda` is not available: no driver \n\
             enigma-skip\tenigma-metal\tmetal_conformance\tonly on macOS\n"
        );
    }

    #[test]
    fn no_runtime_skips_without_running_the_case() {
        let none = None::<Runtime>.into_test_runtime();
        assert!(none.is_err());
        let mut skipped = None;
        __run_case_test(|reason| skipped = Some(reason.to_string()), "must_not_run", must_not_run, &none, &[]);
        assert_eq!(skipped.as_deref(), Some("the runtime expression gave no runtime (no such device here)"));
    }

    #[test]
    fn a_failing_case_fails_its_test_unless_listed() {
        let rt = Runtime::new(Device::Sim).into_test_runtime();
        let unlisted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            __run_case_test(no_skip, "fails", fails, &rt, &[])
        }));
        assert!(unlisted.is_err());
        __run_case_test(no_skip, "fails", fails, &rt, &["fails"]);
    }

    #[test]
    fn a_listed_case_that_passes_fails_its_test() {
        let rt = Runtime::new(Device::Sim).into_test_runtime();
        __run_case_test(no_skip, "passes", passes, &rt, &[]);
        let listed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                __run_case_test(no_skip, "passes", passes, &rt, &["passes"])
            }));
        assert!(listed.is_err());
    }

    #[test]
    fn case_names_are_unique_and_known_failures_are_checked() {
        let mut names: Vec<&str> = cases()
            .iter()
            .chain(sim_only_cases().iter())
            .map(|c| c.name)
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "two cases share a name");
        assert!(std::panic::catch_unwind(|| __check_known_failures(&["no_such_case"])).is_err());
    }

    #[test]
    fn a_panicking_case_is_reported_as_an_error() {
        let rt = Runtime::new(Device::Sim).unwrap();
        let err = Case {
            name: "must_not_run",
            run: must_not_run,
        }
        .run_catching(&rt)
        .unwrap_err();
        assert!(err.contains("a skipped case ran"), "{err}");
    }
}
