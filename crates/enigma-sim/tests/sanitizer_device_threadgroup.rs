//! Device-memory races inside one threadgroup and mixed atomic/plain
//! accesses (issue 18's sanitizer blind spots), over a bounded sweep of
//! threadgroup sizes: what is reported follows from the threads involved,
//! computed here independently of the sanitizer.

use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, Finding, FindingKind, SpecValues};
use enigma_ir::builder::*;
use enigma_ir::{validate, Access, AtomicOp, Kernel, MemFlags, Type, ValidationOptions};
use enigma_sim::SimBackend;
use std::collections::BTreeSet;

const SIZES: [u32; 8] = [1, 2, 7, 32, 33, 64, 100, 256];

/// The kinds of the sanitizer's findings for one threadgroup of `tg` threads
/// over u32 buffers of 4 elements.
fn kinds(kernel: &Kernel, buffers: usize, tg: u32) -> BTreeSet<FindingKind> {
    let info = validate(kernel, &ValidationOptions::default()).unwrap();
    let backend = SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default()).unwrap();
    let storages: Vec<_> = (0..buffers).map(|_| backend.allocate(16).unwrap()).collect();
    let args: Vec<ArgValue<'_>> = storages.iter().map(|s| ArgValue::Buffer { storage: s.as_ref(), elem: None }).collect();
    let geometry = enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, DispatchMode::Threads, [tg, 1, 1], [tg, 1, 1]).unwrap();
    let options = DispatchOptions { sanitize: true, schedules: 1, ..Default::default() };
    let findings: Vec<Finding> = backend.dispatch(compiled.as_ref(), &args, &geometry, &options).unwrap().findings;
    findings.iter().filter(|f| f.kind != FindingKind::Coverage).map(|f| f.kind).collect()
}

/// `out[0] = value(tid)` by every thread.
fn store_to_one(distinct: bool) -> Kernel {
    let mut k = KernelBuilder::new("store_to_one");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(out.at(0u32), if distinct { tid } else { Ex::from(7u32) });
    k.finish().unwrap()
}

#[test]
fn stores_of_different_values_to_one_element_race_and_of_one_value_do_not() {
    for tg in SIZES {
        let mut want = BTreeSet::new();
        if tg > 1 {
            want.insert(FindingKind::SimdgroupRace);
        }
        if tg > 32 {
            want.insert(FindingKind::ThreadgroupRace);
        }
        assert_eq!(kinds(&store_to_one(true), 1, tg), want, "distinct values, {tg} threads");
        assert!(kinds(&store_to_one(false), 1, tg).is_empty(), "one value, {tg} threads");
    }
}

/// `out[0] = out[0] + 1` by every thread, plain or atomic.
fn increment(atomic: bool) -> Kernel {
    let mut k = KernelBuilder::new("increment");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    if atomic {
        k.atomic(AtomicOp::Add, out.at(0u32), 1u32);
    } else {
        k.store(out.at(0u32), out.get(0u32) + 1u32);
    }
    k.finish().unwrap()
}

#[test]
fn a_plain_read_modify_write_by_several_threads_races_and_an_atomic_one_does_not() {
    for tg in SIZES {
        let mut want = BTreeSet::new();
        if tg > 1 {
            want.insert(FindingKind::SimdgroupRace);
        }
        if tg > 32 {
            want.insert(FindingKind::ThreadgroupRace);
        }
        let got = kinds(&increment(false), 1, tg);
        assert_eq!(got.iter().filter(|k| **k != FindingKind::OrderDependence).copied().collect::<BTreeSet<_>>(), want, "{tg} threads");
        assert!(kinds(&increment(true), 1, tg).is_empty(), "atomic, {tg} threads");
    }
}

/// SIMD group 0 writes `out[lid]`, then (after a barrier with `flags`, or
/// none) SIMD group 1 reads `out[lid - 32]` into `copy`.
fn publish(flags: Option<MemFlags>) -> Kernel {
    let mut k = KernelBuilder::new("publish");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let copy = k.buffer("copy", Type::U32, Access::ReadWrite);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.if_(lid.lt(4u32), |k| k.store(out.at(lid), lid + 1u32));
    if let Some(flags) = flags {
        k.threadgroup_barrier(flags);
    }
    k.if_(lid.ge(32u32) & lid.lt(36u32), |k| k.store(copy.at(lid - 32u32), out.get(lid - 32u32)));
    k.finish().unwrap()
}

#[test]
fn only_a_barrier_ordering_device_memory_orders_simd_groups() {
    let race: BTreeSet<FindingKind> = [FindingKind::ThreadgroupRace].into();
    assert_eq!(kinds(&publish(None), 2, 64), race);
    assert_eq!(kinds(&publish(Some(MemFlags::Threadgroup)), 2, 64), race);
    assert!(kinds(&publish(Some(MemFlags::Device)), 2, 64).is_empty());
    assert!(kinds(&publish(Some(MemFlags::DeviceAndThreadgroup)), 2, 64).is_empty());
}

/// Thread 0 reads `count[0]` plainly while every thread adds to it atomically.
fn mixed(read_first: bool) -> Kernel {
    let mut k = KernelBuilder::new("mixed");
    let count = k.buffer("count", Type::U32, Access::ReadWrite);
    let seen = k.buffer("seen", Type::U32, Access::ReadWrite);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let read = |k: &mut KernelBuilder| k.if_(lid.eq(0u32), |k| k.store(seen.at(0u32), count.get(0u32)));
    if read_first {
        read(&mut k);
    }
    k.atomic(AtomicOp::Add, count.at(0u32), 1u32);
    if !read_first {
        read(&mut k);
    }
    k.finish().unwrap()
}

#[test]
fn atomic_and_plain_accesses_of_one_element_by_different_threads_are_reported() {
    for tg in SIZES {
        for read_first in [true, false] {
            let got = kinds(&mixed(read_first), 2, tg);
            // A single thread orders its own accesses.
            let want: BTreeSet<FindingKind> = if tg > 1 { [FindingKind::MixedAtomic].into() } else { BTreeSet::new() };
            let got: BTreeSet<FindingKind> = got.into_iter().filter(|k| *k != FindingKind::OrderDependence).collect();
            assert_eq!(got, want, "{tg} threads, read first: {read_first}");
        }
    }
}
