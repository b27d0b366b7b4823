//! The sanitizer passes the seed-001 reduction clean and catches its classic
//! bug (no barrier between the SIMD-group partial sums and their reader); a
//! quantized tile load past its words is an out-of-bounds read.

use enigma_ir::builder::*;
use enigma_ir::{Access, Kernel, MemFlags, Type};
use enigma_kernels::two_pass_sum;
use enigma_runtime::{Arg, Device, FindingKind, DispatchMode, Options, Runtime, RuntimeError};

fn sanitize() -> Options {
    Options { sanitize: true, schedules: 0, ..Default::default() }
}

fn pass1(with_barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("reduce_threadgroup");
    let a = k.buffer("A", Type::F32, Access::Read);
    let out = k.buffer("PartialOut", Type::F32, Access::ReadWrite);
    let scratch = k.threadgroup_array("scratch", Type::F32, 32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let total = k.let_("total", simd_sum(a.get(tid)));
    k.if_(lane.eq(0u32), |k| k.store(scratch.at(sg), total));
    if with_barrier {
        k.threadgroup_barrier(MemFlags::Threadgroup);
    }
    k.if_(sg.eq(0u32), |k| {
        let v = k.var("v", 0.0f32);
        k.if_(lane.lt(simdgroups_per_threadgroup()), |k| k.assign(v, scratch.get(lane)));
        let s = k.let_("s", simd_sum(v.get()));
        k.if_(lane.eq(0u32), |k| k.store(out.at(threadgroup_position_in_grid().x()), s));
    });
    k.finish().unwrap()
}

#[test]
fn seed_reduction_is_clean_and_missing_barrier_is_a_threadgroup_race() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let data: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let input = rt.buffer_from(&data).unwrap();
    let partial = rt.buffer_zeroed::<f32>(4).unwrap();
    let args = [Arg::from(&input), Arg::from(&partial)];
    let good = rt.pipeline(&two_pass_sum::reduce_threadgroup()).unwrap();
    let report = rt.dispatch(&good, &args, DispatchMode::Threads, [1024, 1, 1], [256, 1, 1], &sanitize()).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let fixed = rt.pipeline(&pass1(true)).unwrap();
    rt.dispatch(&fixed, &args, DispatchMode::Threads, [1024, 1, 1], [256, 1, 1], &sanitize()).unwrap();
    let buggy = rt.pipeline(&pass1(false)).unwrap();
    let err = rt.dispatch(&buggy, &args, DispatchMode::Threads, [1024, 1, 1], [256, 1, 1], &sanitize()).unwrap_err();
    let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{err}") };
    let race = findings.iter().find(|f| f.kind == FindingKind::ThreadgroupRace).unwrap_or_else(|| panic!("{err}"));
    assert_eq!(race.variable.as_deref(), Some("scratch"));
    // The write is `scratch[sg] = total` (body[4].then[0]); the read is in the sg == 0 branch.
    let locations = [race.first.as_ref().unwrap().location.clone(), race.second.as_ref().unwrap().location.clone()];
    assert!(locations.contains(&"body[4].then[0]".to_string()), "{err}");
    assert!(race.hint.contains("threadgroup_barrier"), "{}", race.hint);
}

#[test]
fn truncated_dispatch_is_reported_as_coverage() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let data: Vec<f32> = vec![1.0; 1024];
    let input = rt.buffer_from(&data).unwrap();
    let partial = rt.buffer_zeroed::<f32>(4).unwrap();
    let p = rt.pipeline(&two_pass_sum::reduce_threadgroup()).unwrap();
    // The grid given in threadgroups where threads were meant: 4 threads of one threadgroup run.
    let report = rt
        .dispatch(&p, &[Arg::from(&input), Arg::from(&partial)], DispatchMode::Threads, [4, 1, 1], [256, 1, 1], &sanitize())
        .unwrap();
    let cov = report.findings.iter().find(|f| f.kind == FindingKind::Coverage).expect("coverage warning");
    assert_eq!(cov.variable.as_deref(), Some("PartialOut"));
    assert_eq!(cov.count, 3, "{cov}");
    assert!(cov.message.contains("1..4"), "{cov}");
}

/// A quantized tile load whose last packed row runs past the words buffer
/// (a stride one word too wide for the buffer) is an out-of-bounds read
/// naming the buffer, both without and with the sanitizer.
#[test]
fn a_quantized_tile_load_past_its_words_is_out_of_bounds() {
    let mut k = KernelBuilder::new("quantized_overrun");
    let words = k.buffer("words", Type::U32, Access::Read);
    let scales = k.buffer("scales", Type::F16, Access::Read);
    let out = k.buffer("out", Type::F16, Access::ReadWrite);
    let tile = enigma_ir::MatrixType::new(enigma_ir::Scalar::F16, 16, 8);
    k.matrix_store(matrix_load_quantized(tile, enigma_ir::QuantCode::Int4, enigma_ir::QuantLayout::Rows, words, 0u32, 9u32, scales, 0u32), out, 0u32, 8u32, false);
    let kernel = k.finish().unwrap();
    let rt = Runtime::new(Device::Sim).unwrap();
    let p = rt.pipeline(&kernel).unwrap();
    // Two packed rows of 8 columns at a stride of 9 need 17 words; 16 given.
    let (w, s, o) = (rt.buffer_zeroed::<u32>(16).unwrap(), rt.buffer_of_type(Type::F16, 8).unwrap(), rt.buffer_of_type(Type::F16, 128).unwrap());
    let args = [Arg::from(&w), Arg::from(&s), Arg::from(&o)];
    let err = rt.dispatch(&p, &args, DispatchMode::Threads, [32, 1, 1], [32, 1, 1], &Options::default()).unwrap_err();
    assert!(err.to_string().contains("out-of-bounds read of buffer `words`[16]: it holds 16 elements"), "{err}");
    let err = rt.dispatch(&p, &args, DispatchMode::Threads, [32, 1, 1], [32, 1, 1], &sanitize()).unwrap_err();
    let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{err}") };
    assert!(findings.iter().any(|f| f.kind == FindingKind::OutOfBounds && f.variable.as_deref() == Some("words")), "{err}");
}
