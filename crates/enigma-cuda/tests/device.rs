//! The CUDA backend as a device: what it reports, the limits it enforces,
//! the seed-001 reduction, and a clear error where there is no GPU.
//! Each test prints `skipped: <reason>` and passes when CUDA is unavailable
//! (recorded by `enigma_conformance::skip`, so `scripts/test.sh` counts it).

use enigma_cuda::CudaBackend;
use enigma_kernels::two_pass_sum;
use enigma_runtime::{Arg, Buffer, Device, DeviceKind, Pipeline, Runtime, RuntimeError};
use std::sync::Arc;

fn cuda() -> Option<Runtime> {
    match CudaBackend::new() {
        Ok(b) => Some(Runtime::with_backend(Arc::new(b))),
        Err(e) => {
            enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e);
            None
        }
    }
}

#[test]
fn without_a_gpu_opening_cuda_is_a_clear_error() {
    match Runtime::new(Device::Cuda) {
        Ok(rt) => assert_eq!(rt.device().kind, DeviceKind::Cuda),
        Err(e) => {
            assert!(matches!(e, RuntimeError::Unavailable { .. }), "{e:?}");
            let msg = e.to_string();
            assert!(msg.contains("cuda") || msg.contains("CUDA"), "{msg}");
            // Auto falls back to the simulator instead.
            assert_eq!(Runtime::new(Device::Auto).unwrap().device().kind, DeviceKind::Simulator);
        }
    }
}

#[test]
fn device_reports_the_gpu_and_its_limits() {
    let Some(rt) = cuda() else { return };
    let info = rt.device();
    println!("{info:?}");
    assert_eq!(info.kind, DeviceKind::Cuda);
    assert!(!info.name.is_empty());
    assert_eq!(info.simd_width, 32);
    assert_eq!(info.max_threads_per_threadgroup, 1024);
    assert!(info.compute_units > 0);
    assert!(info.max_threadgroup_memory_bytes >= 48 * 1024);
    assert!(info.memory_bytes.unwrap_or(0) > 1 << 30);
    assert_eq!(Runtime::new(Device::Auto).unwrap().device().kind, DeviceKind::Cuda, "Auto prefers the GPU");
}

#[test]
fn pipeline_limits_come_from_the_driver() {
    let Some(rt) = cuda() else { return };
    let p = rt.pipeline(&two_pass_sum::reduce_threadgroup()).unwrap();
    assert_eq!(p.thread_execution_width(), 32);
    assert!(p.max_total_threads_per_threadgroup() >= 256 && p.max_total_threads_per_threadgroup() <= 1024);
    // scratch: 32 floats of threadgroup memory.
    assert_eq!(p.static_threadgroup_memory_length(), 128);
}

#[test]
fn seed001_two_pass_reduction_matches_the_f64_reference() {
    let Some(rt) = cuda() else { return };
    for n in [1usize, 33, 1000, 4097, 1 << 20, (1 << 20) + 3] {
        let a: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 256.0).collect();
        let groups = two_pass_sum::pass1_threadgroups(n as u32);
        let input = rt.buffer_from(&a).unwrap();
        let partial = rt.buffer_zeroed::<f32>(groups as usize).unwrap();
        let result = rt.buffer_zeroed::<f32>(1).unwrap();
        let p1 = rt.pipeline(&two_pass_sum::reduce_threadgroup()).unwrap();
        let p2 = rt.pipeline(&two_pass_sum::reduce_final()).unwrap();
        let r1 = rt
            .dispatch_threads(&p1, &[Arg::from(&input), Arg::from(&partial)], [n as u32, 1, 1], [two_pass_sum::PASS1_THREADS, 1, 1])
            .unwrap();
        assert!(r1.device_time.is_some(), "CUDA events time each dispatch");
        let pass2 = [two_pass_sum::PASS2_THREADS, 1, 1];
        rt.dispatch_threads(&p2, &[Arg::from(&partial), Arg::from(&result), Arg::u32(groups)], pass2, pass2).unwrap();
        let got = result.to_vec::<f32>().unwrap()[0] as f64;
        let want = two_pass_sum::reference_sum(&a);
        assert!((got - want).abs() <= enigma_kernels::sum_tolerance(&a), "n = {n}: got {got}, want {want}");
    }
}

#[test]
fn the_seeds_4096_thread_pass2_is_rejected_with_both_numbers() {
    let Some(rt) = cuda() else { return };
    let p2 = rt.pipeline(&two_pass_sum::reduce_final_seed()).unwrap();
    let partial = rt.buffer_zeroed::<f32>(4096).unwrap();
    let result = rt.buffer_zeroed::<f32>(1).unwrap();
    let err = rt
        .dispatch_threads(&p2, &[Arg::from(&partial), Arg::from(&result)], [4096, 1, 1], [4096, 1, 1])
        .unwrap_err()
        .to_string();
    assert!(err.contains("4096") && err.contains("1024"), "{err}");
}

#[test]
fn modules_are_cached_by_their_source() {
    let backend = match CudaBackend::new() {
        Ok(b) => Arc::new(b),
        Err(e) => return enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e),
    };
    let rt = Runtime::with_backend(backend.clone());
    rt.pipeline(&two_pass_sum::reduce_final()).unwrap();
    assert_eq!(backend.cached_modules(), 1);
    rt.pipeline(&two_pass_sum::reduce_final()).unwrap();
    assert_eq!(backend.cached_modules(), 1, "the same source compiles once");
    rt.pipeline(&two_pass_sum::reduce_threadgroup()).unwrap();
    assert_eq!(backend.cached_modules(), 2);
}

/// The seed-001 two-pass sum of 2^20 + 5 values on `rt`, ready to queue.
struct TwoPassSum {
    data: Vec<f32>,
    groups: u32,
    input: Buffer,
    partial: Buffer,
    result: Buffer,
    pass1: Pipeline,
    pass2: Pipeline,
}

impl TwoPassSum {
    fn new(rt: &Runtime) -> TwoPassSum {
        let n = (1usize << 20) + 5;
        let data: Vec<f32> = (0..n).map(|i| (i % 997) as f32 * 1e-3).collect();
        let groups = two_pass_sum::pass1_threadgroups(n as u32);
        TwoPassSum {
            input: rt.buffer_from(&data).unwrap(),
            partial: rt.buffer_zeroed::<f32>(groups as usize).unwrap(),
            result: rt.buffer_zeroed::<f32>(1).unwrap(),
            pass1: rt.pipeline(&two_pass_sum::reduce_threadgroup()).unwrap(),
            pass2: rt.pipeline(&two_pass_sum::reduce_final()).unwrap(),
            data,
            groups,
        }
    }

    /// Dispatches both passes; the first one's report.
    fn dispatch(&self, rt: &Runtime) -> enigma_runtime::DispatchReport {
        let grid = [self.data.len() as u32, 1, 1];
        let r1 = rt.dispatch_threads(&self.pass1, &[Arg::from(&self.input), Arg::from(&self.partial)], grid, [two_pass_sum::PASS1_THREADS, 1, 1]).unwrap();
        let pass2 = [two_pass_sum::PASS2_THREADS, 1, 1];
        rt.dispatch_threads(&self.pass2, &[Arg::from(&self.partial), Arg::from(&self.result), Arg::u32(self.groups)], pass2, pass2).unwrap();
        r1
    }

    /// The sum matches the f64 reference.
    fn check(&self) {
        let got = self.result.to_vec::<f32>().unwrap()[0] as f64;
        let want = two_pass_sum::reference_sum(&self.data);
        assert!((got - want).abs() <= enigma_kernels::sum_tolerance(&self.data), "got {got}, want {want}");
    }
}

#[test]
fn a_held_batch_times_the_dispatches_without_the_wait_in_front() {
    let Some(rt) = cuda() else { return };
    let sum = TwoPassSum::new(&rt);
    // The two dispatches take microseconds; the wait in front of them 50 ms.
    let hold = std::time::Duration::from_millis(50);
    let wall = std::time::Instant::now();
    rt.begin_held_batch(hold).unwrap();
    assert!(rt.begin_batch().is_err(), "one batch at a time");
    sum.dispatch(&rt);
    let time = rt.end_batch().unwrap().expect("CUDA times a held batch");
    assert!(wall.elapsed() >= hold, "the device waited {hold:?} before the batch, but it ended after {:?}", wall.elapsed());
    assert!(time.as_nanos() > 0 && time < hold / 5, "the batch's time {time:?} should be its two dispatches', not the {hold:?} wait");
    sum.check();
}

#[test]
fn a_batch_queues_dispatches_and_times_them_together() {
    let Some(rt) = cuda() else { return };
    let sum = TwoPassSum::new(&rt);
    rt.begin_batch().unwrap();
    assert!(rt.begin_batch().is_err(), "one batch at a time");
    let r1 = sum.dispatch(&rt);
    assert!(r1.device_time.is_none(), "a queued dispatch has no time of its own");
    let time = rt.end_batch().unwrap().expect("CUDA times a batch");
    assert!(time.as_nanos() > 0);
    sum.check();
    assert!(rt.end_batch().is_err(), "end_batch without a batch");
}
