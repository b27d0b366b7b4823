//! Asynchronous copies on the simulator at their edges: a copy whose ends
//! are not aligned to its size fails (as `cp.async` would fault) with the
//! numbers; a copy that would read past the source's end fails naming the
//! buffer, unless `valid` is false, when it writes zeros and reads nothing;
//! and the sanitizer reports a thread reading its own copy's destination
//! before the `async_wait` that completes it.

use enigma_ir::builder::*;
use enigma_ir::{Access, Kernel, MemFlags, Type};
use enigma_runtime::{Arg, Device, FindingKind, DispatchMode, Options, Runtime, RuntimeError};

/// Each of 8 threads copies `count` f32 from `src[first + count·lid]` into
/// threadgroup memory (zeros where `first + count·lid ≥ limit`), waits (or,
/// with `early_read`, first reads its destination), then writes what
/// arrived to `out[count·lid ..]`.
fn copy_kernel(count: u32, early_read: bool) -> Kernel {
    let mut k = KernelBuilder::new("copy");
    let src = k.buffer("src", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let first = k.value("first", Type::U32);
    let limit = k.value("limit", Type::U32);
    let stage = k.threadgroup_array("stage", Type::F32, 64);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let at = k.let_("at", first + lid * count);
    k.async_copy(stage.at(lid * count), src.at(at), count, at.lt(limit));
    k.async_commit();
    if early_read {
        k.store(out.at(lid * count), stage.get(lid * count));
    }
    k.async_wait(0);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.for_range("e", 0u32, count, 1u32, |k, e| k.store(out.at(lid * count + e), stage.get(lid * count + e)));
    k.finish().unwrap()
}

/// Runs `kernel` (copies of `count` elements) on 8 threads: the output and
/// the kinds of the sanitizer's findings (an error finding fails the
/// dispatch; its findings are returned all the same).
fn run(kernel: &Kernel, count: usize, first: u32, limit: u32, options: &Options) -> Result<(Vec<f32>, Vec<FindingKind>), RuntimeError> {
    let rt = Runtime::new(Device::Sim).unwrap();
    let data: Vec<f32> = (0..40).map(|i| i as f32 + 0.5).collect();
    let src = rt.buffer_from(&data)?;
    let out = rt.buffer_from(&vec![-1.0f32; 8 * count])?;
    let p = rt.pipeline(kernel)?;
    let args = [Arg::from(&src), Arg::from(&out), Arg::u32(first), Arg::u32(limit)];
    let findings = match rt.dispatch(&p, &args, DispatchMode::Threadgroups, [1, 1, 1], [8, 1, 1], options) {
        Ok(report) => report.findings,
        Err(RuntimeError::Sanitizer { findings, .. }) => findings,
        Err(e) => return Err(e),
    };
    Ok((out.to_vec::<f32>()?, findings.iter().map(|f| f.kind).collect()))
}

#[test]
fn copies_land_and_zero_fill_where_not_valid() {
    // 4 f32 (16 bytes) per thread from element 8: threads 0–4 read 8..28,
    // threads 5–7 would pass `limit` = 28 and get zeros instead.
    let (out, findings) = run(&copy_kernel(4, false), 4, 8, 28, &Options { sanitize: true, ..Options::default() }).unwrap();
    let want: Vec<f32> = (0..32).map(|i| if 8 + i < 28 { (8 + i) as f32 + 0.5 } else { 0.0 }).collect();
    assert_eq!(&out[..32], &want[..]);
    assert!(findings.is_empty(), "{findings:?}");
    // Zero-filled copies read nothing: a source index far past the end is fine.
    let (out, _) = run(&copy_kernel(4, false), 4, 1_000_000, 0, &Options::default()).unwrap();
    assert!(out[..32].iter().all(|&x| x == 0.0), "{out:?}");
}

#[test]
fn a_misaligned_copy_fails_with_the_numbers() {
    // Two f32 (8 bytes) from element 3: byte offset 12 is not 8-aligned.
    let err = run(&copy_kernel(2, false), 2, 3, 40, &Options::default()).unwrap_err().to_string();
    assert!(err.contains("async_copy of 8 bytes at byte offset 12 of `src` is not aligned to 8 bytes"), "{err}");
}

#[test]
fn a_copy_past_the_end_fails_naming_the_buffer() {
    // Threads 6 and 7 read elements 40..48 of a 40-element buffer.
    let err = run(&copy_kernel(4, false), 4, 16, 64, &Options::default()).unwrap_err().to_string();
    assert!(err.contains("`src`") && err.contains("holds 40 elements"), "{err}");
}

#[test]
fn reading_a_destination_before_the_wait_is_reported() {
    let (_, findings) = run(&copy_kernel(1, true), 1, 0, 40, &Options { sanitize: true, ..Options::default() }).unwrap();
    assert!(findings.contains(&FindingKind::AsyncCopyInFlight), "{findings:?}");
}
