//! `Device::Metal` off macOS: a typed `Unavailable` error that says why and
//! what to use instead, never a panic; `Device::Auto` still opens a device.
//! (On macOS, enigma-metal's tests/conformance.rs checks that both open Metal.)

#[cfg(not(target_os = "macos"))]
#[test]
fn metal_is_unavailable_off_macos_with_the_reason() {
    use enigma_runtime::{Device, DeviceKind, Runtime, RuntimeError};
    match Runtime::new(Device::Metal) {
        Err(RuntimeError::Unavailable { device, reason }) => {
            assert_eq!(device, "metal");
            assert!(reason.contains("only on macOS"), "{reason}");
            assert!(reason.contains(std::env::consts::OS), "{reason}");
        }
        Err(other) => panic!("expected Unavailable, got {other}"),
        Ok(rt) => panic!("opened {:?} off macOS", rt.device().kind),
    }
    let auto = Runtime::new(Device::Auto).unwrap();
    assert_ne!(auto.device().kind, DeviceKind::Metal);
    assert_eq!("metal".parse::<Device>().unwrap(), Device::Metal);
}
