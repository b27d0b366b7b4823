//! The conformance suite on the CPU simulator, the reference backend: every
//! portable case and the simulator-only ones.

use enigma_conformance::atomics::{last_threadgroup_sums, Fencing, LAST_SUM_GROUPS, LAST_SUM_THREADS};
use enigma_runtime::{Arg, Device, FindingKind, DispatchMode, Options, Runtime, RuntimeError};

/// Cases that fail today because of a simulator bug. A listed case's test
/// passes while the case still fails (printing the failure) and fails once
/// it passes, so the entry goes away with the fix.
const KNOWN_FAILURES: &[&str] = &[];

enigma_conformance::conformance_tests!(Runtime::new(Device::Sim), known_failures = KNOWN_FAILURES);
enigma_conformance::conformance_sim_only_tests!(
    Runtime::new(Device::Sim),
    known_failures = KNOWN_FAILURES
);

/// The sanitizer follows the order device fences and an atomic make
/// between threadgroups, under Metal's coherence rules: the last-threadgroup
/// kernel is clean when every writer and every reader fences (and sums
/// right); with thread 0 fencing alone — enough on CUDA, not on Metal — and
/// without fences, its reads of the other threadgroups' partials are device
/// races.
#[test]
fn the_sanitizer_follows_device_fences_and_reports_the_reads_without_them() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let n = (LAST_SUM_GROUPS * LAST_SUM_THREADS) as usize;
    let values: Vec<u32> = (0..n as u32).map(|i| i % 97).collect();
    let run = |fencing: Fencing| {
        let (v, partials) = (rt.buffer_from(&values).unwrap(), rt.buffer_zeroed::<u32>(n).unwrap());
        let (counter, out) = (rt.buffer_zeroed::<u32>(1).unwrap(), rt.buffer_zeroed::<u32>(LAST_SUM_THREADS as usize).unwrap());
        let p = rt.pipeline(&last_threadgroup_sums(fencing).unwrap()).unwrap();
        let options = Options { sanitize: true, schedules: 0, ..Default::default() };
        let args = [Arg::from(&v), Arg::from(&partials), Arg::from(&counter), Arg::from(&out)];
        let report = rt.dispatch(&p, &args, DispatchMode::Threadgroups, [LAST_SUM_GROUPS, 1, 1], [LAST_SUM_THREADS, 1, 1], &options);
        (report, out.to_vec::<u32>().unwrap())
    };
    let (report, out) = run(Fencing::EveryThread);
    let report = report.unwrap_or_else(|e| panic!("{e}"));
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let want: Vec<u32> = (0..LAST_SUM_THREADS).map(|t| (0..LAST_SUM_GROUPS).map(|g| values[(g * LAST_SUM_THREADS + t) as usize] * 3 + g).sum()).collect();
    assert_eq!(out, want);
    for fencing in [Fencing::ThreadZero, Fencing::None] {
        let err = run(fencing).0.unwrap_err();
        let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{fencing:?}: {err}") };
        let race = findings.iter().find(|f| f.kind == FindingKind::DeviceRace).unwrap_or_else(|| panic!("{fencing:?}: {err}"));
        assert_eq!(race.variable.as_deref(), Some("partials"), "{fencing:?}: {err}");
    }
}

/// A shuffle that reads an inactive lane (here past the end of a partial
/// SIMD group) is reported, and under the sanitizer the reading lane gets a
/// poison value (an f32 NaN with payload 0xdead), not whatever the inactive
/// lane's register held; the other lanes get their neighbours.
#[test]
fn reads_of_inactive_lanes_are_reported_and_poisoned() {
    use enigma_ir::builder::*;
    use enigma_ir::{Access, Type};
    let mut k = KernelBuilder::new("shuffle_past_the_end");
    let x = k.buffer("x", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(out.at(tid), simd_shuffle_down(x.get(tid), 1u32));
    let rt = Runtime::new(Device::Sim).unwrap();
    let p = rt.pipeline(&k.finish().unwrap()).unwrap();
    let values: Vec<f32> = (0..40).map(|i| i as f32).collect();
    let (xb, ob) = (rt.buffer_from(&values).unwrap(), rt.buffer_zeroed::<f32>(40).unwrap());
    let options = Options { sanitize: true, schedules: 0, ..Default::default() };
    let err = rt.dispatch(&p, &[Arg::from(&xb), Arg::from(&ob)], DispatchMode::Threads, [40, 1, 1], [64, 1, 1], &options).unwrap_err();
    let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{err}") };
    assert!(findings.iter().any(|f| f.kind == FindingKind::InactiveLaneRead), "{err}");
    let out = ob.to_vec::<f32>().unwrap();
    assert_eq!(out[39].to_bits(), 0x7fc0_dead, "{out:?}");
    for i in 32..39 {
        assert_eq!(out[i], values[i + 1], "thread {i}");
    }
}
