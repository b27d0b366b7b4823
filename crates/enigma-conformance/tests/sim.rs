//! The conformance suite on the CPU simulator, the reference backend: every
//! portable case and the simulator-only ones.

use enigma_runtime::{Device, Runtime};

/// Cases that fail today because of a simulator bug. A listed case's test
/// passes while the case still fails (printing the failure) and fails once
/// it passes, so the entry goes away with the fix.
const KNOWN_FAILURES: &[&str] = &[];

enigma_conformance::conformance_tests!(Runtime::new(Device::Sim), known_failures = KNOWN_FAILURES);
enigma_conformance::conformance_sim_only_tests!(
    Runtime::new(Device::Sim),
    known_failures = KNOWN_FAILURES
);
