//! Threadgroup memory above CUDA's 48 KiB of static shared memory: the
//! arrays become dynamic shared memory, which the function is allowed when
//! it is loaded and every launch passes; a kernel over the device's opt-in
//! limit is a typed error. Each test prints `skipped: <reason>` and passes
//! when CUDA is unavailable (recorded by `enigma_conformance::skip`).

use enigma_backend::Backend;
use enigma_cuda::CudaBackend;
use enigma_ir::builder::{thread_index_in_threadgroup, threadgroup_position_in_grid, threads_per_threadgroup, KernelBuilder};
use enigma_ir::{validate, Access, Kernel, MemFlags, Type, ValidationErrorKind, ValidationOptions};
use enigma_runtime::{Arg, Runtime, RuntimeError, SpecValues};
use std::sync::Arc;

/// Elements of each of the two arrays of [`fill_and_read_back`]: two arrays
/// of 48 KiB, 96 KiB in all (within the 99 KiB that sm_86 and sm_89 allow).
const SLOTS: u32 = 12 * 1024;

fn cuda_backend() -> Option<Arc<CudaBackend>> {
    match CudaBackend::new() {
        Ok(b) => Some(Arc::new(b)),
        Err(e) => {
            enigma_conformance::skip(env!("CARGO_PKG_NAME"), &e);
            None
        }
    }
}

/// Each thread writes its slots of a `u32` and an `f32` array of [`SLOTS`]
/// elements each (slot `i` holds `i * 3 + group` and `i / 2`), then, after
/// a barrier, reads the mirrored slot of each, written by another thread:
/// `out[group * SLOTS + i] = ints[SLOTS - 1 - i] + u32(floats[SLOTS - 1 - i])`.
fn fill_and_read_back() -> Kernel {
    let mut k = KernelBuilder::new("fill_and_read_back");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let ints = k.threadgroup_array("ints", Type::U32, SLOTS);
    let floats = k.threadgroup_array("floats", Type::F32, SLOTS);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let step = k.let_("step", threads_per_threadgroup().x());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    k.for_range("i", lid, SLOTS, step, |k, i| {
        k.store(ints.at(i), i * 3u32 + group);
        k.store(floats.at(i), i.cast(Type::F32) * 0.5f32);
    });
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.for_range("j", lid, SLOTS, step, |k, j| {
        let mirror = k.let_("mirror", (SLOTS - 1) - j);
        k.store(out.at(group * SLOTS + j), ints.get(mirror) + floats.get(mirror).cast(Type::U32));
    });
    k.finish().expect("a well-formed kernel")
}

/// What [`fill_and_read_back`] writes, from a plain loop.
fn expected(groups: u32) -> Vec<u32> {
    let mut out = vec![];
    for group in 0..groups {
        for i in 0..SLOTS {
            let mirror = SLOTS - 1 - i;
            out.push(mirror * 3 + group + (mirror as f32 * 0.5) as u32);
        }
    }
    out
}

#[test]
fn a_kernel_with_96_kib_of_threadgroup_memory_runs_and_reads_back_its_slots() {
    let Some(backend) = cuda_backend() else { return };
    let rt = Runtime::with_backend(backend);
    let bytes = 2 * SLOTS as u64 * 4;
    let limit = rt.device().max_threadgroup_memory_bytes;
    if limit < bytes {
        // A GPU that allows less (sm_75: 64 KiB) refuses it with both numbers.
        let err = rt.pipeline(&fill_and_read_back()).unwrap_err();
        assert!(err.to_string().contains(&bytes.to_string()) && err.to_string().contains(&limit.to_string()), "{err}");
        return;
    }
    let p = rt.pipeline(&fill_and_read_back()).unwrap();
    assert_eq!(p.static_threadgroup_memory_length(), bytes, "static plus dynamic shared memory");
    let groups = 5;
    let out = rt.buffer_zeroed::<u32>((groups * SLOTS) as usize).unwrap();
    for threads in [256, 1024, 96] {
        rt.dispatch_threadgroups(&p, &[Arg::from(&out)], [groups, 1, 1], [threads, 1, 1]).unwrap();
        assert_eq!(out.to_vec::<u32>().unwrap(), expected(groups), "{threads} threads per threadgroup");
    }
}

#[test]
fn more_threadgroup_memory_than_the_device_allows_is_a_typed_error() {
    let Some(backend) = cuda_backend() else { return };
    let limit = backend.info().max_threadgroup_memory_bytes;
    assert!(limit >= 48 * 1024, "{limit}");
    // Four u32 more than the limit: 16 bytes over.
    let mut k = KernelBuilder::new("too_much_shared");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let big = k.threadgroup_array("big", Type::U32, (limit / 4) as u32 + 4);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.store(big.at(lid), lid);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.store(out.at(lid), big.get(lid));
    let kernel = k.finish().expect("a well-formed kernel");

    // The backend itself, given a kernel validated without a limit.
    let unlimited = ValidationOptions { max_threadgroup_memory_bytes: u64::MAX, ..ValidationOptions::default() };
    let info = validate(&kernel, &unlimited).unwrap();
    match backend.compile(&kernel, &info, &SpecValues::default()) {
        Err(RuntimeError::ThreadgroupMemory { kernel: name, bytes, limit: l }) => {
            assert_eq!((name.as_str(), bytes, l), ("too_much_shared", limit + 16, limit));
        }
        other => panic!("expected RuntimeError::ThreadgroupMemory, got {other:?}"),
    }

    // Through the runtime, validation refuses it first, with the same numbers.
    let rt = Runtime::with_backend(backend);
    match rt.pipeline(&kernel) {
        Err(RuntimeError::Validation(e)) => {
            assert_eq!(e.kind, ValidationErrorKind::ThreadgroupMemoryLimit { bytes: limit + 16, limit });
        }
        Err(other) => panic!("expected a validation error, got {other:?}"),
        Ok(_) => panic!("a kernel over the device's limit compiled"),
    }
}
