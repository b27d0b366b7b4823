//! The shared conformance suite (`enigma-conformance`, every portable case)
//! on the system's default Metal GPU: `cargo test -p enigma-metal` on a Mac.
//!
//! On a Mac without a usable Metal device every case prints `skipped: ...`
//! and passes. On other systems this file is one test that says it skipped.
//! Every skip is recorded by `enigma_conformance::skip`, so `scripts/test.sh`
//! counts it.

#[cfg(target_os = "macos")]
mod metal {
    use enigma_runtime::Runtime;
    use std::sync::Arc;

    /// Cases that fail on Metal today because of a bug outside this crate.
    /// A listed case's test passes while the case still fails and fails once
    /// it passes, so the entry is removed with the fix. Empty: the suite has
    /// never been run on Apple hardware, so no failure is known yet.
    const KNOWN_FAILURES: &[&str] = &[];

    fn metal_runtime() -> Result<Runtime, enigma_runtime::RuntimeError> {
        Ok(Runtime::with_backend(Arc::new(enigma_metal::MetalBackend::new()?)))
    }

    enigma_conformance::conformance_tests!(metal_runtime(), known_failures = KNOWN_FAILURES);

    /// `Device::Metal` (and `Device::Auto`, which prefers it) open this backend.
    #[test]
    fn runtime_devices_open_metal() {
        use enigma_runtime::{Device, DeviceKind};
        if let Err(e) = enigma_metal::MetalBackend::new() {
            enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e);
            return;
        }
        for device in [Device::Metal, Device::Auto] {
            let rt = Runtime::new(device).unwrap_or_else(|e| panic!("{device:?}: {e}"));
            assert_eq!(rt.device().kind, DeviceKind::Metal, "{device:?}");
        }
    }
}

#[cfg(not(target_os = "macos"))]
#[test]
fn metal_conformance() {
    enigma_conformance::skip(env!("CARGO_PKG_NAME"), &"the Metal conformance suite runs only on macOS (cargo test -p enigma-metal on a Mac)");
}
