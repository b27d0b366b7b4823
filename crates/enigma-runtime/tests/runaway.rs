//! Kernels that never end have ways out on the simulator: a step budget, a
//! timeout and a cancel flag (raised by Ctrl-C in the front ends), each an
//! error naming the loop; and one runtime's runaway dispatch does not hold
//! up another runtime's (issue 18, defect 2).

#![allow(clippy::result_large_err)] // RuntimeError is the runtime's own error type, returned as is.

use enigma_ir::{builder::*, Access, Type};
use enigma_runtime::{Arg, Device, DispatchMode, Options, Runtime, RuntimeError, StopReason};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `while true { out[tid] += 1 }`.
fn endless() -> enigma_ir::Kernel {
    let mut k = KernelBuilder::new("endless");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.while_(true, |k| k.store(out.at(tid), out.get(tid) + 1u32));
    k.finish().unwrap()
}

/// `for i in (n - 5, n, 7)` with a u32 `n`: at n = 2^32 - 1 the variable
/// wraps past `n` and the loop never ends.
fn wrapping() -> enigma_ir::Kernel {
    let mut k = KernelBuilder::new("wrapping");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    k.for_range("i", n - 5u32, n, 7u32, |k, i| k.store(out.at(0u32), i));
    k.finish().unwrap()
}

fn stopped(r: Result<enigma_runtime::DispatchReport, RuntimeError>) -> (StopReason, String, String) {
    match r {
        Err(e @ RuntimeError::Stopped { .. }) => {
            let text = e.to_string();
            let RuntimeError::Stopped { reason, location, .. } = e else { unreachable!() };
            (reason, location, text)
        }
        Err(other) => panic!("expected the dispatch to be stopped, got: {other}"),
        Ok(_) => panic!("expected the dispatch to be stopped, it finished"),
    }
}

fn budget(n: u64) -> Options {
    Options { max_loop_iterations: Some(n), ..Default::default() }
}

#[test]
fn a_step_budget_stops_endless_loops_and_names_the_loop() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let out = rt.buffer_zeroed::<u32>(64).unwrap();
    for sanitize in [false, true] {
        let options = Options { sanitize, ..budget(1000) };
        let p = rt.pipeline(&endless()).unwrap();
        let (reason, location, text) = stopped(rt.dispatch(&p, &[Arg::from(&out)], DispatchMode::Threads, [64, 1, 1], [32, 1, 1], &options));
        assert_eq!(reason, StopReason::StepBudget { budget: 1000 });
        assert!(location.starts_with("the loop at body[1]"), "{location}");
        assert!(text.contains("kernel `endless`") && text.contains("1000 loop iterations"), "{text}");
    }
    let p = rt.pipeline(&wrapping()).unwrap();
    let (reason, location, _) = stopped(rt.dispatch(&p, &[Arg::from(&out), Arg::u32(u32::MAX)], DispatchMode::Threads, [1, 1, 1], [1, 1, 1], &budget(1 << 16)));
    assert_eq!(reason, StopReason::StepBudget { budget: 1 << 16 });
    assert!(location.starts_with("the loop at body["), "{location}");
}

/// Under the sanitizer a dispatch that asks for no budget gets the
/// simulator's default one: an endless loop stops, naming the loop.
#[test]
fn sanitized_dispatches_have_a_default_step_budget() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let out = rt.buffer_zeroed::<u32>(32).unwrap();
    let p = rt.pipeline(&endless()).unwrap();
    let options = Options { sanitize: true, schedules: 1, ..Default::default() };
    let (reason, location, _) = stopped(rt.dispatch(&p, &[Arg::from(&out)], DispatchMode::Threads, [32, 1, 1], [32, 1, 1], &options));
    assert_eq!(reason, StopReason::StepBudget { budget: enigma_sim::SANITIZER_LOOP_BUDGET });
    assert!(location.starts_with("the loop at body[1]"), "{location}");
}

#[test]
fn loops_within_the_budget_run_to_the_end() {
    // The budget counts iterations of each SIMD group: exactly the budget is allowed.
    let rt = Runtime::new(Device::Sim).unwrap();
    let out = rt.buffer_zeroed::<u32>(1).unwrap();
    let p = rt.pipeline(&wrapping()).unwrap();
    // n = 100: i = 95 only, one iteration.
    rt.dispatch(&p, &[Arg::from(&out), Arg::u32(100)], DispatchMode::Threads, [1, 1, 1], [1, 1, 1], &budget(1)).unwrap();
    assert_eq!(out.to_vec::<u32>().unwrap(), vec![95]);
    let (reason, ..) = stopped(rt.dispatch(&p, &[Arg::from(&out), Arg::u32(100)], DispatchMode::Threads, [1, 1, 1], [1, 1, 1], &budget(0)));
    assert_eq!(reason, StopReason::StepBudget { budget: 0 });
}

#[test]
fn a_timeout_stops_an_endless_dispatch() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let out = rt.buffer_zeroed::<u32>(64).unwrap();
    let p = rt.pipeline(&endless()).unwrap();
    let options = Options { timeout: Some(Duration::from_millis(20)), ..Default::default() };
    let (reason, location, _) = stopped(rt.dispatch(&p, &[Arg::from(&out)], DispatchMode::Threads, [64, 1, 1], [32, 1, 1], &options));
    assert_eq!(reason, StopReason::Timeout { seconds: 0.02 });
    assert!(location.contains("body[1]"), "{location}");
}

#[test]
fn a_raised_cancel_flag_interrupts_the_dispatch() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let out = rt.buffer_zeroed::<u32>(64).unwrap();
    let p = rt.pipeline(&endless()).unwrap();
    let cancel = Arc::new(AtomicBool::new(true));
    let options = Options { cancel: Some(cancel), ..Default::default() };
    let (reason, location, _) = stopped(rt.dispatch(&p, &[Arg::from(&out)], DispatchMode::Threads, [64, 1, 1], [32, 1, 1], &options));
    assert_eq!(reason, StopReason::Interrupted);
    assert_eq!(location, "the start of threadgroup (0,0,0)");
}

#[test]
fn a_runaway_dispatch_does_not_block_another_runtime() {
    // Runtime A spins in an endless loop until its flag is raised (with a
    // long timeout as a backstop); runtime B's dispatch must finish
    // meanwhile. Had B waited for A's workers, A would end by its timeout,
    // not by the flag raised after B finished.
    let a = Runtime::new(Device::Sim).unwrap();
    let b = Runtime::new(Device::Sim).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let spinning = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            let out = a.buffer_zeroed::<u32>(4096).unwrap();
            let p = a.pipeline(&endless()).unwrap();
            let options = Options { cancel: Some(cancel), timeout: Some(Duration::from_secs(600)), ..Default::default() };
            a.dispatch(&p, &[Arg::from(&out)], DispatchMode::Threads, [4096, 1, 1], [64, 1, 1], &options).map(|_| ())
        })
    };
    let mut k = KernelBuilder::new("add_one");
    let data = k.buffer("data", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(data.at(tid), data.get(tid) + 1u32);
    let kernel = k.finish().unwrap();
    let buf = b.buffer_from(&(0..1000u32).collect::<Vec<_>>()).unwrap();
    let p = b.pipeline(&kernel).unwrap();
    b.dispatch_threads(&p, &[Arg::from(&buf)], [1000, 1, 1], [32, 1, 1]).unwrap();
    assert_eq!(buf.to_vec::<u32>().unwrap(), (1..=1000u32).collect::<Vec<_>>());
    cancel.store(true, Ordering::Relaxed);
    match spinning.join().unwrap() {
        Err(RuntimeError::Stopped { reason: StopReason::Interrupted, .. }) => {}
        other => panic!("runtime A should have been interrupted: {other:?}"),
    }
}

#[test]
fn a_constant_zero_step_is_rejected_in_the_ir_text() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for step in ["0u32", "0i32"] {
        let ty = if step.ends_with("u32") { "u32" } else { "i32" };
        let text = format!(
            "kernel k(A: device {ty} read_write) {{\n    var i: {ty}\n\n    for i in (0{ty}, 4{ty}, {step}) {{\n        A[0u32] = i\n    }}\n}}\n"
        );
        let kernel = enigma_ir::text::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let err = rt.pipeline(&kernel).unwrap_err().to_string();
        assert!(err.contains("constant step 0") && err.contains("body[0]"), "{err}");
    }
}
