//! Streams and foreign memory on the simulator: a runtime on a stream still
//! runs every dispatch to completion, and wrapping another library's device
//! memory is refused with a typed error (simulated memory is the
//! simulator's own).

use enigma_ir::{builder::*, Access, Type};
use enigma_runtime::{Arg, Device, Runtime, RuntimeError};

#[test]
fn a_runtime_on_a_stream_runs_simulated_dispatches_to_completion() {
    let mut k = KernelBuilder::new("times_two");
    let data = k.buffer("data", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(data.at(tid), data.get(tid) * 2u32);
    let kernel = k.finish().unwrap();

    let rt = Runtime::new(Device::Sim).unwrap().on_stream(7);
    assert_eq!(rt.stream(), Some(7));
    let buf = rt.buffer_from(&[1u32, 2, 3]).unwrap();
    let out = rt.buffer_zeroed::<u32>(3).unwrap();
    assert_eq!(out.to_vec::<u32>().unwrap(), [0, 0, 0]);
    let pipeline = rt.pipeline(&kernel).unwrap();
    rt.dispatch_threads(&pipeline, &[Arg::from(&buf)], [3, 1, 1], [32, 1, 1]).unwrap();
    rt.synchronize().unwrap();
    assert_eq!(buf.to_vec::<u32>().unwrap(), [2, 4, 6]);
    let mut first = [0u8; 4];
    buf.read_into(4, &mut first).unwrap();
    assert_eq!(u32::from_le_bytes(first), 4);
    assert_eq!(buf.device_address(), None);
    // An output buffer whose contents are the kernel's to write: sized, untyped.
    let out = rt.buffer_uninit(12).unwrap();
    assert_eq!((out.len_bytes(), out.elem()), (12, None));
}

#[test]
fn the_simulator_refuses_foreign_device_memory() {
    let rt = Runtime::new(Device::Sim).unwrap();
    // SAFETY: the simulator refuses before using the address.
    let err = unsafe { rt.buffer_from_device_memory(0x1000, 64, None) }.unwrap_err();
    assert!(matches!(err, RuntimeError::Backend { backend: "sim", .. }), "{err}");
    assert!(err.to_string().contains("cannot bind another library's memory"), "{err}");
}
