//! The conformance suite on the CPU simulator, the reference backend: every
//! portable case and the simulator-only ones.

use enigma_runtime::{Device, Runtime};

/// Cases that fail today because of a simulator bug. A listed case's test
/// passes while the case still fails (printing the failure) and fails once
/// it passes, so the entry goes away with the fix.
const KNOWN_FAILURES: &[&str] = &[
    // FIXME(enigma-sim, exec.rs `Inst::Load` fast path for full SIMD groups
    // loading 32-bit scalars, commit 85c4d46): the loaded bits are not passed
    // through `ops::norm`, so `i32` elements arrive zero-extended instead of
    // sign-extended: with all 32 lanes active, `in[tid] / 2` for -7 gives
    // 2147483644, `in[tid] < 0` is false, `long(in[tid])` is 4294967289.
    // Minimal case: `int_loads_keep_sign`; the others fail through it.
    "int_loads_keep_sign",
    "int_ops_i32",
    "casts_from_32bit_ints",
    "math_integer",
    "control_if_else_nesting",
    "simd_full_groups",
    "simd_partial_last_group",
    "simd_after_early_return",
    // FIXME(enigma-sim, program.rs lowering of `StmtKind::For`): `end` and
    // `step` are documented as evaluated once before the first iteration,
    // but when they are plain variables the loop test reads the variable's
    // register every iteration: `for (i = 0; i < end; i++) end /= 2;` with
    // end = 30 runs 3 times instead of 30.
    "control_for_bounds_evaluated_once",
    // FIXME(enigma-sim, ops.rs `convert`): 64-bit integer → f32 converts
    // through f64 and rounds twice; (1 << 60) + (1 << 36) + 1 gives
    // 0x5d800000 instead of the correctly rounded 0x5d800001.
    "casts_int64_to_f32_rounding",
];

enigma_conformance::conformance_tests!(Runtime::new(Device::Sim), known_failures = KNOWN_FAILURES);
enigma_conformance::conformance_sim_only_tests!(
    Runtime::new(Device::Sim),
    known_failures = KNOWN_FAILURES
);
