//! Cases only the simulator can pass: behaviour that is undefined on GPUs
//! (out-of-bounds accesses, integer division by zero) and a barrier whose
//! divergence only shows at run time. The simulator reports each as an error
//! naming what went wrong — never a panic, a hang or a silent result.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, AtomicOp, MemFlags, Type};
use enigma_runtime::{Arg, Runtime};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn expect_run_err(what: &str, must_name: &[&str], f: impl FnOnce() -> CaseResult) -> CaseResult {
    match catch_unwind(AssertUnwindSafe(f)) {
        Err(_) => Err(format!("{what}: panicked instead of returning an error")),
        Ok(Ok(())) => Err(format!(
            "{what}: succeeded, but must be reported as an error"
        )),
        Ok(Err(msg)) => {
            for s in must_name {
                ensure!(
                    msg.contains(s),
                    "{what}: the error does not mention `{s}`: {msg}"
                );
            }
            Ok(())
        }
    }
}

/// Reads and writes past the end of a buffer, a threadgroup array indexed past
/// its length, and a negative signed index: errors naming the memory.
pub fn sim_out_of_bounds(rt: &Runtime) -> CaseResult {
    let mut k = KernelBuilder::new("oob_read");
    let src = k.buffer("src", Type::U32, Access::Read);
    let dst = k.buffer("dst", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(dst.at(tid), src.get(tid));
    let read = finish(k)?;
    let small = upload(rt, &[1u32; 10])?;
    let big = upload(rt, &[0u32; 11])?;
    expect_run_err(
        "reading src[10] of a 10-element buffer",
        &["out-of-bounds", "src", "10"],
        || {
            let p = pipeline(rt, &read)?;
            threads(
                rt,
                &p,
                &[Arg::from(&small), Arg::from(&big)],
                [11, 1, 1],
                [32, 1, 1],
            )
        },
    )?;
    expect_run_err(
        "writing dst[10] of a 10-element buffer",
        &["out-of-bounds", "dst", "10"],
        || {
            let p = pipeline(rt, &read)?;
            threads(
                rt,
                &p,
                &[Arg::from(&big), Arg::from(&small)],
                [11, 1, 1],
                [32, 1, 1],
            )
        },
    )?;

    let mut k = KernelBuilder::new("oob_threadgroup");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let scratch = k.threadgroup_array("scratch", Type::U32, 8);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.store(scratch.at(lid), lid);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.store(out.at(lid), scratch.get(0u32));
    let tg = finish(k)?;
    let out = upload(rt, &[0u32; 16])?;
    expect_run_err(
        "writing scratch[8] of an 8-element threadgroup array",
        &["out-of-bounds", "scratch"],
        || {
            let p = pipeline(rt, &tg)?;
            threads(rt, &p, &[Arg::from(&out)], [16, 1, 1], [16, 1, 1])
        },
    )?;

    let mut k = KernelBuilder::new("oob_negative");
    let src = k.buffer("src", Type::U32, Access::Read);
    let dst = k.buffer("dst", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(dst.at(tid), src.get(tid.cast(Type::I32) - 1));
    let neg = finish(k)?;
    expect_run_err("reading src[-1]", &["out-of-bounds", "src", "-1"], || {
        let p = pipeline(rt, &neg)?;
        threads(
            rt,
            &p,
            &[Arg::from(&small), Arg::from(&big)],
            [4, 1, 1],
            [4, 1, 1],
        )
    })
}

/// Integer `/` and `%` by zero are errors naming the operation.
pub fn sim_division_by_zero(rt: &Runtime) -> CaseResult {
    for (name, rem) in [("div_by_zero", false), ("rem_by_zero", true)] {
        let mut k = KernelBuilder::new(name);
        let a = k.buffer("a", Type::I32, Access::Read);
        let b = k.buffer("b", Type::I32, Access::Read);
        let out = k.buffer("out", Type::I32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let (x, y) = (a.get(tid), b.get(tid));
        k.store(out.at(tid), if rem { x % y } else { x / y });
        let kernel = finish(k)?;
        let ab = upload(rt, &[7i32, 8, 9, 10])?;
        let bb = upload(rt, &[1i32, 2, 0, 3])?;
        let ob = upload(rt, &[0i32; 4])?;
        expect_run_err(
            &format!("{name}: an element divided by 0"),
            &["division by zero", name],
            || {
                let p = pipeline(rt, &kernel)?;
                threads(
                    rt,
                    &p,
                    &[Arg::from(&ab), Arg::from(&bb), Arg::from(&ob)],
                    [4, 1, 1],
                    [4, 1, 1],
                )
            },
        )?;
    }
    Ok(())
}

/// A barrier that passes validation (its condition reads `flag[0]`, an
/// index the same for every thread) but that only some SIMD groups reach at
/// run time, because every thread first bumps `flag[0]` atomically: reported
/// as an error about the barrier (at validation or at run time), without
/// hanging.
pub fn sim_divergent_barrier_at_run_time(rt: &Runtime) -> CaseResult {
    let mut k = KernelBuilder::new("runtime_divergent_barrier");
    let flag = k.buffer("flag", Type::U32, Access::ReadWrite);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.atomic(AtomicOp::Add, flag.at(0u32), 1u32);
    let seen = k.let_("seen", flag.get(0u32));
    k.if_(seen.le(32u32), |k| {
        k.threadgroup_barrier(MemFlags::Threadgroup)
    });
    k.store(out.at(lid), seen);
    let kernel = finish(k)?;
    let fb = upload(rt, &[0u32])?;
    let ob = upload(rt, &[0u32; 64])?;
    expect_run_err(
        "a barrier reached by one of two SIMD groups",
        &["barrier"],
        || {
            let p = pipeline(rt, &kernel)?;
            threads(
                rt,
                &p,
                &[Arg::from(&fb), Arg::from(&ob)],
                [64, 1, 1],
                [64, 1, 1],
            )
        },
    )
}
