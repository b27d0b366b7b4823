//! Per-thread arrays under the simulator: an index outside the array fails
//! the dispatch (or, sanitized, is an out-of-bounds finding naming the
//! array), a subscript past its dimension likewise, and a read of an element
//! the thread has not written is an uninitialised read — per thread: the
//! element another thread wrote does not count, and a thread that writes
//! each element before reading it gives no finding. Also: findings list an
//! access out of bounds before the race beside it (cause first).

use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, Finding, FindingKind, RuntimeError, SpecValues};
use enigma_ir::builder::*;
use enigma_ir::{validate, Access, Kernel, Type, ValidationOptions};
use enigma_sim::SimBackend;

/// Dispatches `kernel` over buffers of `sizes` zeroed bytes, `grid` threads
/// in threadgroups of `tg`; the findings (sanitized) or the error, and the
/// first buffer's words.
fn dispatch(kernel: &Kernel, sizes: &[usize], grid: u32, tg: u32, sanitize: bool) -> Result<(Vec<Finding>, Vec<u32>), RuntimeError> {
    let info = validate(kernel, &ValidationOptions::default()).unwrap();
    let backend = SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default()).unwrap();
    let storages: Vec<_> = sizes.iter().map(|n| backend.allocate(*n).unwrap()).collect();
    let args: Vec<ArgValue<'_>> = storages.iter().map(|s| ArgValue::Buffer { storage: s.as_ref(), elem: None }).collect();
    let geometry =
        enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, DispatchMode::Threads, [grid, 1, 1], [tg, 1, 1]).unwrap();
    let findings = backend.dispatch(compiled.as_ref(), &args, &geometry, &DispatchOptions { sanitize, schedules: 0, ..Default::default() })?.findings;
    let mut bytes = vec![0u8; sizes[0]];
    storages[0].read(0, &mut bytes).unwrap();
    Ok((findings, bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()))
}

/// Each thread writes `acc[0..written]` and reads `acc[read]`.
fn partly_written(written: u32, read: u32) -> Kernel {
    let mut k = KernelBuilder::new("partly_written");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let acc = k.thread_array("acc", Type::U32, 4);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.for_range("i", 0u32, written, 1u32, |k, i| k.store(acc.at(i), gid + i));
    k.store(out.at(gid), acc.get(read));
    k.finish().unwrap()
}

#[test]
fn an_index_past_a_thread_array_fails_or_is_a_finding() {
    let kernel = partly_written(4, 4);
    let err = dispatch(&kernel, &[64 * 4], 64, 32, false).unwrap_err().to_string();
    assert!(err.contains("out-of-bounds read of per-thread array `acc`[4]: it holds 4 elements"), "{err}");
    let (findings, _) = dispatch(&kernel, &[64 * 4], 64, 32, true).unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!((f.kind, f.variable.as_deref(), f.count), (FindingKind::OutOfBounds, Some("acc"), 64), "{f}");
}

#[test]
fn reading_an_element_the_thread_did_not_write_is_an_uninitialised_read() {
    let (findings, _) = dispatch(&partly_written(2, 3), &[64 * 4], 64, 32, true).unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!((f.kind, f.variable.as_deref(), f.index, f.count), (FindingKind::UninitializedRead, Some("acc"), Some(3), 64), "{f}");
    assert!(f.message.contains("before this thread wrote the element"), "{f}");
    // Written first: no finding, and each thread reads its own values.
    let (findings, out) = dispatch(&partly_written(4, 3), &[64 * 4], 64, 32, true).unwrap();
    assert!(findings.is_empty(), "{findings:#?}");
    assert_eq!(out, (0..64).map(|g| g + 3).collect::<Vec<u32>>());
}

#[test]
fn an_element_written_by_another_thread_is_still_uninitialised() {
    // Only even threads write acc[0]; every thread reads it.
    let mut k = KernelBuilder::new("other_thread");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let acc = k.thread_array("acc", Type::U32, 1);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.if_((gid % 2u32).eq(0u32), |k| k.store(acc.at(0u32), gid + 1));
    k.store(out.at(gid), acc.get(0u32));
    let (findings, out) = dispatch(&k.finish().unwrap(), &[64 * 4], 64, 64, true).unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!((findings[0].kind, findings[0].count), (FindingKind::UninitializedRead, 32), "{}", findings[0]);
    // Unwritten elements read as zeros in the simulator, never a neighbour's value.
    assert_eq!(out, (0..64).map(|g| if g % 2 == 0 { g + 1 } else { 0 }).collect::<Vec<u32>>());
}

#[test]
fn a_subscript_past_its_dimension_names_the_dimension() {
    // acc is 2 × 4; acc[0, 5] is flat element 5, inside the array.
    let mut k = KernelBuilder::new("subscripts");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let acc = k.thread_array("acc", Type::U32, 8);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.for_range("i", 0u32, 8u32, 1u32, |k, i| k.store(acc.at(i), i));
    k.store(out.at(gid), acc.at_dims([0u32.into(), 5u32.into()], [2u32.into(), 4u32.into()]).load());
    let kernel = k.finish().unwrap();
    let err = dispatch(&kernel, &[32 * 4], 32, 32, false).unwrap_err().to_string();
    assert!(err.contains("out-of-bounds subscript of per-thread array `acc`: index 5 of dimension 1, size 4"), "{err}");
    let (findings, _) = dispatch(&kernel, &[32 * 4], 32, 32, true).unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert!(findings[0].message.contains("index 5 of dimension 1, size 4"), "{}", findings[0]);
}

#[test]
fn an_access_out_of_bounds_is_listed_before_the_race_beside_it() {
    // Two threadgroups of 64 write out[lid + 1] into 64 elements: lane 63
    // writes past the end, and both threadgroups write out[1..64].
    let mut k = KernelBuilder::new("shifted");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.store(out.at(lid + 1u32), lid);
    let (findings, _) = dispatch(&k.finish().unwrap(), &[64 * 4], 128, 64, true).unwrap();
    let kinds: Vec<FindingKind> = findings.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&FindingKind::DeviceRace), "{findings:#?}");
    assert_eq!(kinds[0], FindingKind::OutOfBounds, "{findings:#?}");
}
