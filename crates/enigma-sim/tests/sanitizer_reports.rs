//! Regressions in what a sanitizer report says:
//! * a device race names the other threadgroup's thread completely (grid
//!   position, SIMD group, lane), and never labels a reader of another
//!   threadgroup with the reporting threadgroup's position (it used to, when
//!   several threadgroups had read the element);
//! * the occurrence a grouped finding shows does not depend on the order the
//!   workers ran threadgroups in (it used to be the first to reach the lock);
//! * an order-dependence finding's index is an element index (it was the
//!   byte offset of the differing word);
//! * a SIMD-group race's hint says when the threadgroup barrier is the fix
//!   that stays correct (a simdgroup barrier breaks once the threadgroup
//!   has more than one SIMD group);
//! * an out-of-bounds subscript of a multi-dimensional access names its
//!   dimension and size, though the flat index is inside the buffer;
//! * a device race and a coverage gap caused by an index formula that
//!   assumes uniform threadgroups (`tg * threads_per_threadgroup + lid`) in
//!   a dispatch whose last threadgroup is partial name that cause.

use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, Finding, FindingKind, RuntimeError, SpecValues};
use enigma_ir::builder::*;
use enigma_ir::{validate, Access, Kernel, MemFlags, Type, ValidationOptions};
use enigma_sim::SimBackend;

/// Dispatches `kernel` with the sanitizer over buffers of `sizes` zeroed bytes.
fn sanitize(kernel: &Kernel, sizes: &[usize], grid: u32, tg: u32) -> Vec<Finding> {
    dispatch(kernel, sizes, grid, tg, true).unwrap()
}

/// Dispatches `kernel` (sanitized or not) over buffers of `sizes` zeroed
/// bytes; the findings, or the error.
fn dispatch(kernel: &Kernel, sizes: &[usize], grid: u32, tg: u32, sanitize: bool) -> Result<Vec<Finding>, RuntimeError> {
    let info = validate(kernel, &ValidationOptions::default()).unwrap();
    let backend = SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default()).unwrap();
    let storages: Vec<_> = sizes.iter().map(|n| backend.allocate(*n).unwrap()).collect();
    let args: Vec<ArgValue<'_>> = storages.iter().map(|s| ArgValue::Buffer { storage: s.as_ref(), elem: None }).collect();
    let geometry =
        enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, DispatchMode::Threads, [grid, 1, 1], [tg, 1, 1]).unwrap();
    Ok(backend.dispatch(compiled.as_ref(), &args, &geometry, &DispatchOptions { sanitize, schedules: 0, ..Default::default() })?.findings)
}

#[test]
fn a_device_race_names_both_threads() {
    // Every threadgroup writes out[lid]: threadgroups 0..7 collide.
    let mut k = KernelBuilder::new("out_by_lid");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.store(out.at(lid), lid);
    let kernel = k.finish().unwrap();
    let findings = sanitize(&kernel, &[64 * 4], 8 * 64, 64);
    let race = findings.iter().find(|f| f.kind == FindingKind::DeviceRace).unwrap_or_else(|| panic!("{findings:#?}"));
    let (a, b) = (race.first.as_ref().unwrap(), race.second.as_ref().unwrap());
    assert_ne!(a.threadgroup, b.threadgroup, "{race}");
    // Both write element `index`: thread `index` of their threadgroups.
    let i = race.index.unwrap() as u32;
    for t in [a, b] {
        assert_eq!(t.grid, Some([t.threadgroup[0] * 64 + i, 0, 0]), "{race}");
        assert_eq!((t.simdgroup, t.lane), (Some(i / 32), Some(i % 32)), "{race}");
        assert_eq!(t.location, "body[1]", "{race}");
    }
    assert!(race.to_string().contains("second: thread ("), "{race}");
}

#[test]
fn a_write_after_reads_by_several_threadgroups_names_a_real_reader() {
    // Every threadgroup reads data[0]; thread 0 of threadgroup 0 then writes it.
    let mut k = KernelBuilder::new("shared_read");
    let data = k.buffer("data", Type::U32, Access::ReadWrite);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.store(out.at(gid), data.get(0u32));
    k.threadgroup_barrier(MemFlags::Device);
    k.if_(gid.eq(0u32), |k| k.store(data.at(0u32), 7u32));
    let kernel = k.finish().unwrap();
    for _ in 0..5 {
        let findings = sanitize(&kernel, &[4, 16 * 64 * 4], 16 * 64, 64);
        let races: Vec<&Finding> = findings.iter().filter(|f| f.kind == FindingKind::DeviceRace).collect();
        assert!(!races.is_empty(), "{findings:#?}");
        for race in races {
            let (a, b) = (race.first.as_ref().unwrap(), race.second.as_ref().unwrap());
            assert_ne!(a.threadgroup, b.threadgroup, "{race}");
            assert!(b.grid.is_some() && b.lane.is_some(), "{race}");
        }
    }
}

#[test]
fn grouped_reports_show_the_lowest_threadgroup() {
    // A missing barrier in every one of 64 threadgroups; threadgroup 0 first
    // spins, so the others reach the report first.
    let mut k = KernelBuilder::new("neighbour");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let tile = k.threadgroup_array("tile", Type::U32, 64);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let spin = k.var("spin", 0u32);
    k.if_(threadgroup_position_in_grid().x().eq(0u32), |k| {
        k.for_range("i", 0u32, 20_000u32, 1u32, |k, i| k.assign(spin, spin + i));
    });
    k.store(tile.at(lid), lid + spin * 0u32);
    k.store(out.at(thread_position_in_grid().x()), tile.get((lid + 1u32) % 64u32));
    let kernel = k.finish().unwrap();
    let reference = sanitize(&kernel, &[64 * 64 * 4], 64 * 64, 64);
    assert!(reference.iter().any(|f| f.kind == FindingKind::ThreadgroupRace), "{reference:#?}");
    for f in &reference {
        if let Some(t) = &f.first {
            assert_eq!(t.threadgroup, [0, 0, 0], "{f}");
        }
    }
    for _ in 0..10 {
        assert_eq!(sanitize(&kernel, &[64 * 64 * 4], 64 * 64, 64), reference);
    }
}

#[test]
fn order_dependence_names_the_element() {
    // SIMD groups race for one threadgroup slot; thread 0 copies it to out[5].
    let mut k = KernelBuilder::new("last_writer");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let slot = k.threadgroup_array("slot", Type::U32, 1);
    k.if_(thread_index_in_simdgroup().eq(0u32), |k| k.store(slot.at(0u32), simdgroup_index_in_threadgroup() + 1u32));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(thread_index_in_threadgroup().eq(0u32), |k| {
        for i in 0..8u32 {
            k.store(out.at(i), select(0u32, slot.get(0u32), Ex::from(i).eq(5u32)));
        }
    });
    let kernel = k.finish().unwrap();
    let findings = sanitize(&kernel, &[8 * 4], 128, 128);
    let order = findings.iter().find(|f| f.kind == FindingKind::OrderDependence).unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!((order.variable.as_deref(), order.index), (Some("out"), Some(5)), "{order}");
}

#[test]
fn a_simdgroup_race_hint_names_the_robust_fix() {
    // Lane 0 publishes, the other lanes of its SIMD group read: no barrier.
    let mut k = KernelBuilder::new("lane0_publish");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let slot = k.threadgroup_array("slot", Type::U32, 1);
    let lane = k.let_("lane", thread_index_in_simdgroup());
    k.if_(lane.eq(0u32), |k| k.store(slot.at(0u32), 7u32));
    k.store(out.at(lane), slot.get(0u32));
    let kernel = k.finish().unwrap();
    let findings = sanitize(&kernel, &[32 * 4], 32, 32);
    let race = findings.iter().find(|f| f.kind == FindingKind::SimdgroupRace).unwrap_or_else(|| panic!("{findings:#?}"));
    let hint = race.hint.as_str();
    assert!(hint.starts_with("add simdgroup_barrier(mem_flags::mem_threadgroup) between"), "{hint}");
    assert!(hint.contains("threadgroup_barrier(mem_flags::mem_threadgroup) is the fix that stays correct"), "{hint}");
}

#[test]
fn an_out_of_bounds_subscript_names_its_dimension() {
    // out[2, 5] of a 3×4 `out`: the flat index 13 is inside the 16-element
    // buffer, but index 5 is past dimension 1.
    let mut k = KernelBuilder::new("subscript");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.eq(0u32), |k| k.store(out.at_dims([Ex::from(2u32), Ex::from(5u32)], [Ex::from(3u32), Ex::from(4u32)]), 1u32));
    let kernel = k.finish().unwrap();
    let findings = sanitize(&kernel, &[16 * 4], 32, 32);
    let oob = findings.iter().find(|f| f.kind == FindingKind::OutOfBounds).unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!((oob.variable.as_deref(), oob.index), (Some("out"), None), "{oob}");
    assert!(oob.message.contains("index 5 of dimension 1, size 4"), "{oob}");
    assert_eq!(oob.first.as_ref().map(|t| t.grid), Some(Some([0, 0, 0])), "{oob}");
    // Without the sanitizer the dispatch fails, saying the same.
    let err = dispatch(&kernel, &[16 * 4], 32, 32, false).unwrap_err().to_string();
    assert!(err.contains("out-of-bounds subscript of buffer `out`: index 5 of dimension 1, size 4"), "{err}");
    // In bounds, the same access is clean and writes element 2·4 + 3.
    let mut k = KernelBuilder::new("subscript_ok");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    k.store(out.at_dims([Ex::from(2u32), thread_position_in_grid().x()], [Ex::from(3u32), Ex::from(4u32)]), 1u32);
    let kernel = k.finish().unwrap();
    let findings = dispatch(&kernel, &[12 * 4], 4, 4, true).unwrap();
    let coverage = findings.iter().find(|f| f.kind == FindingKind::Coverage).unwrap_or_else(|| panic!("{findings:#?}"));
    assert!(findings.iter().all(|f| f.kind == FindingKind::Coverage), "{findings:#?}");
    assert!(coverage.message.starts_with("8 of 12 elements were never written (first unwritten: 0..8)"), "{coverage}");
}

#[test]
fn a_partial_last_threadgroup_is_named_as_the_cause() {
    // i = tg * threads_per_threadgroup + lid with grid 9, threadgroups of 4:
    // the last threadgroup has 1 thread, so its thread writes out[2].
    let mut k = KernelBuilder::new("uniform_index");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let i = k.let_("i", threadgroup_position_in_grid().x() * threads_per_threadgroup().x() + thread_position_in_threadgroup().x());
    k.store(out.at(i), i);
    let kernel = k.finish().unwrap();
    let findings = sanitize(&kernel, &[9 * 4], 9, 4);
    let cause = "the last threadgroup is partial: its threads_per_threadgroup is 1 (9 = 2·4 + 1); index with thread_position_in_grid instead";
    for kind in [FindingKind::DeviceRace, FindingKind::Coverage] {
        let f = findings.iter().find(|f| f.kind == kind).unwrap_or_else(|| panic!("{kind:?}: {findings:#?}"));
        assert!(f.hint.starts_with(cause), "{f}");
    }
    // With thread_position_in_grid the kernel is clean, and no cause is named.
    let mut k = KernelBuilder::new("grid_index");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    k.store(out.at(i), threads_per_threadgroup().x());
    let kernel = k.finish().unwrap();
    assert_eq!(sanitize(&kernel, &[9 * 4], 9, 4), vec![]);
}
