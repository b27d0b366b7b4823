//! Regression: a divergent-barrier report names where the absent thread
//! actually is. It used to give the barrier's own location for a thread that
//! never reached it (a thread that had returned early, or whose lanes were
//! masked off in a branch), and the location of the last statement of a
//! nested block for a thread waiting at the end of an `if` or a loop.
//!
//! These kernels fail validation (barriers in thread-dependent control
//! flow), so they are compiled for the simulator directly, with the
//! `KernelInfo` of the same kernel without its barriers.

use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, Finding, FindingKind, SpecValues};
use enigma_ir::builder::*;
use enigma_ir::{validate, Access, Kernel, MemFlags, Type, ValidationOptions};
use enigma_sim::SimBackend;

/// Runs `kernel` over one u32 output of `n` elements (plus `n` as a value
/// when `with_n`) and returns the findings, or the dispatch error's text.
fn run(kernel: &Kernel, with_n: bool, mode: DispatchMode, size: u32, tg: u32, n: usize, sanitize: bool) -> Result<Vec<Finding>, String> {
    let info = validate(kernel, &ValidationOptions::allowing_divergent_barriers()).map_err(|e| e.to_string())?;
    assert!(validate(kernel, &ValidationOptions::default()).is_err(), "the kernel itself must fail validation");
    let backend = SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default()).map_err(|e| e.to_string())?;
    let out = backend.allocate(n * 4).map_err(|e| e.to_string())?;
    let mut args = vec![ArgValue::Buffer { storage: out.as_ref(), elem: Some(Type::U32) }];
    if with_n {
        args.push(ArgValue::literal(enigma_ir::Literal::u32(n as u32)));
    }
    let geometry = enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, mode, [size, 1, 1], [tg, 1, 1])
        .map_err(|e| e.to_string())?;
    backend
        .dispatch(compiled.as_ref(), &args, &geometry, &DispatchOptions { sanitize, schedules: 1, ..Default::default() })
        .map(|r| r.findings)
        .map_err(|e| e.to_string())
}

fn divergent(findings: &[Finding]) -> &Finding {
    findings.iter().find(|f| f.kind == FindingKind::DivergentBarrier).unwrap_or_else(|| panic!("{findings:#?}"))
}

#[test]
fn a_thread_that_returned_early_is_named_at_its_return() {
    let mut k = KernelBuilder::new("early_return");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.if_(gid.ge(n), |k| {
        k.store(out.at(0u32), 0u32);
        k.return_();
    });
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.store(out.at(gid), gid);
    let kernel = k.finish().unwrap();
    // 40 elements, one threadgroup of 64: lanes 8..31 of SIMD group 1 return.
    let findings = run(&kernel, true, DispatchMode::Threadgroups, 1, 64, 40, true).unwrap();
    let f = divergent(&findings);
    let (first, second) = (f.first.as_ref().unwrap(), f.second.as_ref().unwrap());
    assert_eq!(first.location, "body[2]", "{f}");
    assert_eq!(second.location, "body[1].then[1]", "{f}");
    assert_eq!((second.simdgroup, second.lane, second.grid), (Some(1), Some(8), Some([40, 0, 0])), "{f}");
    // Without the sanitizer the same dispatch is an error that says so.
    let err = run(&kernel, true, DispatchMode::Threadgroups, 1, 64, 40, false).unwrap_err();
    assert!(err.contains("reached by 40 of the 64 threads") && err.contains("had returned early"), "{err}");
}

#[test]
fn a_lane_masked_off_in_a_branch_is_named_at_the_branch() {
    let mut k = KernelBuilder::new("barrier_in_branch");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.if_(lid.lt(16u32), |k| {
        k.store(out.at(lid), 1u32);
        k.threadgroup_barrier(MemFlags::Threadgroup);
    });
    k.store(out.at(lid), lid);
    let kernel = k.finish().unwrap();
    let findings = run(&kernel, false, DispatchMode::Threads, 64, 64, 64, true).unwrap();
    let f = divergent(&findings);
    let (first, second) = (f.first.as_ref().unwrap(), f.second.as_ref().unwrap());
    assert_eq!(first.location, "body[1].then[1]", "{f}");
    // Lane 16 of SIMD group 0 waits at the end of the `if`, not at the barrier.
    assert_eq!((second.simdgroup, second.lane), (Some(0), Some(16)), "{f}");
    assert_eq!(second.location, "body[1]", "{f}");
}

#[test]
fn a_lane_that_left_a_loop_is_named_at_the_loop() {
    let mut k = KernelBuilder::new("barrier_in_loop");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.for_range("i", lid, n, 32u32, |k, i| {
        k.store(out.at(i), i);
        k.threadgroup_barrier(MemFlags::Threadgroup);
    });
    let kernel = k.finish().unwrap();
    // 40 elements, 32 threads: lanes 0..7 make a second pass, lanes 8..31 have left the loop.
    let findings = run(&kernel, true, DispatchMode::Threadgroups, 1, 32, 40, true).unwrap();
    let f = divergent(&findings);
    let (first, second) = (f.first.as_ref().unwrap(), f.second.as_ref().unwrap());
    assert_eq!(first.location, "body[1].loop[1]", "{f}");
    assert_eq!((second.lane, second.location.as_str()), (Some(8), "body[1]"), "{f}");
}
