//! The seed-001 two-pass reduction on the default device, against the f64
//! reference; and the seed's own pass 2 rejected with the numbers involved.

use enigma_kernels::two_pass_sum;
use enigma_runtime::{Arg, Device, Runtime, RuntimeError};


fn two_pass(rt: &Runtime, a: &[f32]) -> f32 {
    let n = a.len() as u32;
    let groups = two_pass_sum::pass1_threadgroups(n);
    let input = rt.buffer_from(a).unwrap();
    let partial = rt.buffer_zeroed::<f32>(groups as usize).unwrap();
    let result = rt.buffer_zeroed::<f32>(1).unwrap();
    let p1 = rt.pipeline(&two_pass_sum::reduce_threadgroup()).unwrap();
    let p2 = rt.pipeline(&two_pass_sum::reduce_final()).unwrap();
    rt.dispatch_threads(&p1, &[Arg::from(&input), Arg::from(&partial)], [n, 1, 1], [two_pass_sum::PASS1_THREADS, 1, 1]).unwrap();
    rt.dispatch_threads(&p2, &[Arg::from(&partial), Arg::from(&result), Arg::u32(groups)], [two_pass_sum::PASS2_THREADS, 1, 1], [two_pass_sum::PASS2_THREADS, 1, 1])
        .unwrap();
    result.to_vec::<f32>().unwrap()[0]
}

#[test]
fn two_pass_reduction_matches_the_f64_reference_for_awkward_sizes() {
    let rt = Runtime::new(Device::Auto).unwrap();
    for n in [1usize, 31, 33, 255, 256, 1000, 4097, 1 << 20] {
        let a = enigma_kernels::test_data(n, 7);
        let got = two_pass(&rt, &a) as f64;
        let want = two_pass_sum::reference_sum(&a);
        assert!((got - want).abs() <= enigma_kernels::sum_tolerance(&a), "n = {n}: got {got}, want {want}");
    }
}

#[test]
fn pass1_partials_are_the_sums_of_each_threadgroup_slice() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let a = enigma_kernels::test_data(1000, 7);
    let input = rt.buffer_from(&a).unwrap();
    let partial = rt.buffer_zeroed::<f32>(4).unwrap();
    let p1 = rt.pipeline(&two_pass_sum::reduce_threadgroup()).unwrap();
    rt.dispatch_threads(&p1, &[Arg::from(&input), Arg::from(&partial)], [1000, 1, 1], [256, 1, 1]).unwrap();
    let got = partial.to_vec::<f32>().unwrap();
    for (g, chunk) in a.chunks(256).enumerate() {
        let want = two_pass_sum::reference_sum(chunk);
        assert!((got[g] as f64 - want).abs() <= enigma_kernels::sum_tolerance(chunk), "group {g}: {} vs {want}", got[g]);
    }
}

#[test]
fn the_seeds_second_pass_is_rejected_naming_4096_and_1024() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let partial = rt.buffer_zeroed::<f32>(4096).unwrap();
    let result = rt.buffer_zeroed::<f32>(1).unwrap();
    let p2 = rt.pipeline(&two_pass_sum::reduce_final_seed()).unwrap();
    assert_eq!(p2.max_total_threads_per_threadgroup(), 1024);
    let err = rt
        .dispatch_threads(&p2, &[Arg::from(&partial), Arg::from(&result)], [4096, 1, 1], [4096, 1, 1])
        .unwrap_err();
    assert!(matches!(err, RuntimeError::ThreadgroupTooLarge { threads: 4096, max: 1024, .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("4096") && msg.contains("1024") && msg.contains("reduce_final"), "{msg}");
}

#[test]
fn strided_vec4_pass1_then_pass2_matches_the_reference() {
    use enigma_ir::{Scalar, Type};
    let rt = Runtime::new(Device::Sim).unwrap();
    for (n, groups) in [(4usize, 1u32), (4096, 3), (1 << 16, 8)] {
        let a = enigma_kernels::test_data(n, 7);
        let bytes: Vec<u8> = a.iter().flat_map(|x| x.to_le_bytes()).collect();
        let input = rt.buffer_from_bytes(Type::vector(Scalar::F32, 4), &bytes).unwrap();
        let partial = rt.buffer_zeroed::<f32>(groups as usize).unwrap();
        let result = rt.buffer_zeroed::<f32>(1).unwrap();
        let p1 = rt.pipeline(&two_pass_sum::reduce_threadgroup_vec4()).unwrap();
        let p2 = rt.pipeline(&two_pass_sum::reduce_final()).unwrap();
        let args = [Arg::from(&input), Arg::from(&partial), Arg::u32((n / 4) as u32)];
        rt.dispatch_threadgroups(&p1, &args, [groups, 1, 1], [two_pass_sum::PASS1_THREADS, 1, 1]).unwrap();
        let pass2 = [two_pass_sum::PASS2_THREADS, 1, 1];
        rt.dispatch_threads(&p2, &[Arg::from(&partial), Arg::from(&result), Arg::u32(groups)], pass2, pass2).unwrap();
        let got = result.to_vec::<f32>().unwrap()[0] as f64;
        let want = two_pass_sum::reference_sum(&a);
        assert!((got - want).abs() <= enigma_kernels::sum_tolerance(&a), "n = {n}: got {got}, want {want}");
    }
}

/// On the simulator a batch changes nothing: each dispatch still runs to
/// completion, and the batch reports no device time.
#[test]
fn a_batch_on_the_simulator_runs_each_dispatch_in_turn() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let a = enigma_kernels::test_data(5000, 7);
    rt.begin_batch().unwrap();
    let got = two_pass(&rt, &a) as f64;
    assert_eq!(rt.end_batch().unwrap(), None);
    let want = two_pass_sum::reference_sum(&a);
    assert!((got - want).abs() <= enigma_kernels::sum_tolerance(&a), "got {got}, want {want}");
}

#[test]
fn a_kernel_needing_a_feature_the_device_lacks_is_refused_naming_both() {
    use enigma_backend::{check_features, DeviceInfo, DeviceKind, ReadWriteTier};
    use enigma_ir::builder::*;
    use enigma_ir::{validate, Access, Feature, Type, ValidationOptions};
    let mut k = KernelBuilder::new("bf16_copy");
    let a = k.buffer("a", Type::BF16, Access::Read);
    let out = k.buffer("out", Type::BF16, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(out.at(tid), a.get(tid));
    let kernel = k.finish().unwrap();
    let info = validate(&kernel, &ValidationOptions::default()).unwrap();
    assert!(info.features.contains(&Feature::Bfloat16));
    let mut device = DeviceInfo {
        kind: DeviceKind::Cuda,
        name: "an sm_75 GPU".into(),
        max_threads_per_threadgroup: 1024,
        max_threadgroup_memory_bytes: 48 * 1024,
        simd_width: 32,
        compute_units: 40,
        memory_bytes: None,
        features: Default::default(),
        cooperative_lowering: None,
        read_write_textures: ReadWriteTier::Tier2,
    };
    let err = check_features(&kernel, &info, &device).unwrap_err().to_string();
    assert_eq!(err, "kernel `bf16_copy` uses bf16 values; device `an sm_75 GPU` supports none of enigma's optional features");
    device.features.insert(Feature::Bfloat16);
    assert!(check_features(&kernel, &info, &device).is_ok());
    // The simulator supports every feature, so the runtime makes the pipeline.
    let rt = Runtime::new(Device::Sim).unwrap();
    assert!(rt.pipeline(&kernel).is_ok());
}
