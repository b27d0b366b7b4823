//! Allocations whose size the caller chooses are fallible: a size no
//! machine can hold is [`RuntimeError::Allocation`] naming what was asked
//! for and the bytes, never an abort (issue 18, defect 1).

use enigma_ir::Type;
use enigma_runtime::{check_host_memory, Device, Runtime, RuntimeError};

fn allocation_bytes(e: RuntimeError) -> u128 {
    match e {
        RuntimeError::Allocation { bytes, .. } => bytes,
        other => panic!("expected an allocation error, got {other}"),
    }
}

#[test]
fn oversized_simulator_buffers_are_errors_with_the_size_asked_for() {
    let rt = Runtime::new(Device::Sim).unwrap();
    // Sizes from a petabyte up to the whole address space: none can be
    // allocated, each must come back as an error carrying its size.
    let mut size = 1usize << 50;
    while size < usize::MAX / 4 {
        let err = rt.buffer_bytes(size).unwrap_err();
        assert!(err.to_string().contains(&size.to_string()), "{err}");
        assert_eq!(allocation_bytes(err), size as u128);
        size = size * 3 + 7;
    }
    assert_eq!(allocation_bytes(rt.buffer_bytes(usize::MAX).unwrap_err()), usize::MAX as u128);
}

#[test]
fn element_counts_whose_byte_size_overflows_name_the_full_size() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let err = rt.buffer_of_type(Type::F32, usize::MAX).unwrap_err();
    assert_eq!(allocation_bytes(err), usize::MAX as u128 * 4);
    let err = rt.buffer_zeroed::<u64>(usize::MAX / 4).unwrap_err();
    assert_eq!(allocation_bytes(err), (usize::MAX / 4) as u128 * 8);
    // A small buffer still works and is zeroed.
    assert_eq!(rt.buffer_zeroed::<u32>(5).unwrap().to_vec::<u32>().unwrap(), vec![0; 5]);
}

#[test]
fn host_memory_checks_report_what_they_were_for() {
    let err = check_host_memory("host memory for a test", u128::MAX).unwrap_err();
    assert!(err.to_string().contains("host memory for a test"), "{err}");
    assert_eq!(allocation_bytes(err), u128::MAX);
    check_host_memory("a kilobyte", 1024).unwrap();
}
