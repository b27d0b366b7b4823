//! Errors every backend must report as errors — never a panic, a hang or a
//! silent wrong result: threadgroups over the pipeline's limit (seed 001's
//! 4096-thread pass 2), zero-sized dispatches, argument mismatches, threadgroup
//! memory over the device limit, and kernels that fail validation. After each
//! error the runtime must still run a valid dispatch.

// The closures below only pass the runtime's own `RuntimeError` through.
#![allow(clippy::result_large_err)]

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Intrinsic, Literal, MemFlags, Type};
use enigma_kernels::two_pass_sum;
use enigma_runtime::{Arg, Runtime, RuntimeError, SpecValues};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`, which must return an error whose message contains every string
/// of `must_name`.
fn expect_err<T>(
    what: &str,
    must_name: &[&str],
    f: impl FnOnce() -> Result<T, RuntimeError>,
) -> CaseResult {
    match catch_unwind(AssertUnwindSafe(f)) {
        Err(_) => Err(format!("{what}: panicked instead of returning an error")),
        Ok(Ok(_)) => Err(format!(
            "{what}: succeeded, but must be rejected with an error"
        )),
        Ok(Err(e)) => {
            let msg = e.to_string();
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

/// A small valid dispatch: the runtime still works after the errors.
fn still_works(rt: &Runtime) -> CaseResult {
    let mut k = KernelBuilder::new("still_works");
    let data = k.buffer("data", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(data.at(tid), data.get(tid) * 2u32 + tid);
    let kernel = finish(k)?;
    let p = pipeline(rt, &kernel)?;
    let buf = upload(rt, &[1u32, 2, 3, 4, 5])?;
    threads(rt, &p, &[Arg::from(&buf)], [5, 1, 1], [4, 1, 1])?;
    check_eq(
        "a valid dispatch after the errors",
        &download::<u32>(&buf)?,
        &[2, 5, 8, 11, 14],
        |i| format!("element {i}"),
    )
}

fn copy_kernel() -> Result<enigma_ir::Kernel, String> {
    let mut k = KernelBuilder::new("copy_u32");
    let src = k.buffer("src", Type::U32, Access::Read);
    let dst = k.buffer("dst", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(n), |k| k.store(dst.at(tid), src.get(tid)));
    finish(k)
}

/// Seed 001's pass 2 as written asks for a 4096-thread threadgroup: the
/// error names 4096 and the pipeline's maximum (1024 on every enigma
/// device); so do other shapes of 4096 threads. 1024 threads run.
pub fn errors_threadgroup_too_large(rt: &Runtime) -> CaseResult {
    let seed_pass2 = pipeline(rt, &two_pass_sum::reduce_final_seed())?;
    let max = seed_pass2.max_total_threads_per_threadgroup();
    ensure!(
        (1..=1024).contains(&max),
        "max_total_threads_per_threadgroup is {max}; it must be in 1..=1024"
    );
    let max_s = max.to_string();
    let partial = rt.buffer_zeroed::<f32>(4096).ctx("allocating")?;
    let result = rt.buffer_zeroed::<f32>(1).ctx("allocating")?;
    let args = [Arg::from(&partial), Arg::from(&result)];
    expect_err(
        "seed 001 pass 2: dispatch_threads(grid 4096, threadgroup 4096)",
        &["4096", &max_s],
        || rt.dispatch_threads(&seed_pass2, &args, [4096, 1, 1], [4096, 1, 1]),
    )?;
    expect_err(
        "dispatch_threadgroups of one 4096-thread threadgroup",
        &["4096", &max_s],
        || rt.dispatch_threadgroups(&seed_pass2, &args, [1, 1, 1], [4096, 1, 1]),
    )?;
    expect_err("a 64×64 threadgroup", &["4096", &max_s], || {
        rt.dispatch_threads(&seed_pass2, &args, [64, 64, 1], [64, 64, 1])
    })?;
    expect_err("a 2048-thread threadgroup", &["2048", &max_s], || {
        rt.dispatch_threads(&seed_pass2, &args, [2048, 1, 1], [2048, 1, 1])
    })?;
    // The valid pass 2 on the same partials runs.
    let p = pipeline(rt, &two_pass_sum::reduce_final())?;
    let data = upload(rt, &vec![0.5f32; 4096])?;
    groups(
        rt,
        &p,
        &[Arg::from(&data), Arg::from(&result), Arg::u32(4096)],
        [1, 1, 1],
        [two_pass_sum::PASS2_THREADS, 1, 1],
    )?;
    let got = download::<f32>(&result)?[0];
    ensure!(
        got == 2048.0,
        "the valid pass 2 over 4096 halves gave {got}, expected 2048"
    );
    still_works(rt)
}

/// A grid or threadgroup with a zero axis is an error in both modes.
pub fn errors_zero_sized_dispatch(rt: &Runtime) -> CaseResult {
    let p = pipeline(rt, &copy_kernel()?)?;
    let src = upload(rt, &[1u32; 8])?;
    let dst = upload(rt, &[0u32; 8])?;
    let args = [Arg::from(&src), Arg::from(&dst), Arg::u32(8)];
    for grid in [[0, 1, 1], [8, 0, 1], [8, 1, 0]] {
        expect_err(&format!("dispatch_threads with grid {grid:?}"), &[], || {
            rt.dispatch_threads(&p, &args, grid, [8, 1, 1])
        })?;
    }
    expect_err("dispatch_threads with threadgroup [0, 1, 1]", &[], || {
        rt.dispatch_threads(&p, &args, [8, 1, 1], [0, 1, 1])
    })?;
    expect_err(
        "dispatch_threadgroups with [0, 1, 1] threadgroups",
        &[],
        || rt.dispatch_threadgroups(&p, &args, [0, 1, 1], [8, 1, 1]),
    )?;
    expect_err(
        "dispatch_threadgroups with threadgroup [8, 0, 1]",
        &[],
        || rt.dispatch_threadgroups(&p, &args, [1, 1, 1], [8, 0, 1]),
    )?;
    check_eq(
        "destination after rejected dispatches",
        &download::<u32>(&dst)?,
        &[0; 8],
        |i| format!("element {i}"),
    )?;
    still_works(rt)
}

/// Too few or too many arguments, a buffer of the wrong element type, a value
/// where a buffer is expected and the reverse, a value of the wrong type, an
/// untyped buffer that is not a whole number of elements: each an error
/// naming the kernel.
pub fn errors_argument_mismatch(rt: &Runtime) -> CaseResult {
    let p = pipeline(rt, &copy_kernel()?)?;
    let src = upload(rt, &[1u32; 8])?;
    let dst = upload(rt, &[0u32; 8])?;
    let floats = upload(rt, &[1.0f32; 8])?;
    let ints = upload(rt, &[1i32; 8])?;
    let name = ["copy_u32"];
    let run = |args: &[Arg<'_>]| rt.dispatch_threads(&p, args, [8, 1, 1], [8, 1, 1]);
    expect_err("two arguments for three parameters", &name, || {
        run(&[Arg::from(&src), Arg::from(&dst)])
    })?;
    expect_err("four arguments for three parameters", &name, || {
        run(&[Arg::from(&src), Arg::from(&dst), Arg::u32(8), Arg::u32(8)])
    })?;
    expect_err("an f32 buffer for a u32 buffer parameter", &name, || {
        run(&[Arg::from(&floats), Arg::from(&dst), Arg::u32(8)])
    })?;
    expect_err("an i32 buffer for a u32 buffer parameter", &name, || {
        run(&[Arg::from(&src), Arg::from(&ints), Arg::u32(8)])
    })?;
    expect_err("a value for a buffer parameter", &name, || {
        run(&[Arg::u32(1), Arg::from(&dst), Arg::u32(8)])
    })?;
    expect_err("a buffer for a value parameter", &name, || {
        run(&[Arg::from(&src), Arg::from(&dst), Arg::from(&src)])
    })?;
    expect_err("an i32 value for a u32 value parameter", &name, || {
        run(&[Arg::from(&src), Arg::from(&dst), Arg::i32(8)])
    })?;
    let ragged = rt.buffer_bytes(10).ctx("allocating")?;
    expect_err(
        "an untyped buffer of 10 bytes for a u32 buffer parameter",
        &name,
        || run(&[Arg::from(&ragged), Arg::from(&dst), Arg::u32(8)]),
    )?;
    check_eq(
        "destination after rejected dispatches",
        &download::<u32>(&dst)?,
        &[0; 8],
        |i| format!("element {i}"),
    )?;
    still_works(rt)
}

/// A kernel declaring one word more threadgroup memory than the device
/// allows is rejected (at pipeline creation or dispatch) with both numbers;
/// one using exactly the limit runs.
pub fn errors_threadgroup_memory_limit(rt: &Runtime) -> CaseResult {
    let limit = rt.device().max_threadgroup_memory_bytes;
    ensure!(
        limit >= 4096 && limit % 4 == 0,
        "the device reports {limit} bytes of threadgroup memory"
    );
    let words = |n: u64| -> Result<enigma_ir::Kernel, String> {
        let mut k = KernelBuilder::new("big_threadgroup_memory");
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let scratch = k.threadgroup_array("scratch", Type::U32, n as u32);
        let lid = k.let_("lid", thread_index_in_threadgroup());
        k.for_range("i", lid, n as u32, 64u32, |k, i| k.store(scratch.at(i), i));
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.store(out.at(lid), scratch.get(n as u32 - 1u32 - lid));
        finish(k)
    };
    let over = words(limit / 4 + 1)?;
    let out = rt.buffer_zeroed::<u32>(64).ctx("allocating")?;
    let bytes = (limit + 4).to_string();
    let limit_s = limit.to_string();
    expect_err(
        "threadgroup memory 4 bytes over the device limit",
        &[&bytes, &limit_s],
        || {
            let p = rt.pipeline(&over)?;
            rt.dispatch_threads(&p, &[Arg::from(&out)], [64, 1, 1], [64, 1, 1])
        },
    )?;
    let exact = words(limit / 4)?;
    let p = pipeline(rt, &exact)?;
    threads(rt, &p, &[Arg::from(&out)], [64, 1, 1], [64, 1, 1])?;
    let n = (limit / 4) as u32;
    let want: Vec<u32> = (0..64).map(|l| n - 1 - l).collect();
    check_eq(
        "a kernel using exactly the threadgroup memory limit",
        &download::<u32>(&out)?,
        &want,
        |i| format!("thread {i}"),
    )?;
    still_works(rt)
}

/// Kernels that fail validation are rejected when the pipeline is made, with
/// the kernel's name: mismatched operand types, a store to a read-only
/// buffer, a barrier in divergent control flow, `break` outside a loop, a
/// read before assignment, a wrong intrinsic arity, a bitcast between sizes;
/// and unknown or mistyped specialisation values.
pub fn errors_validation(rt: &Runtime) -> CaseResult {
    type Build = fn(&mut KernelBuilder);
    let bad: [(&str, &str, Build); 7] = [
        ("mismatched_operands", "f32 + u32", |k| {
            let out = k.buffer("out", Type::F32, Access::ReadWrite);
            k.store(out.at(0u32), 1.0f32 + thread_index_in_threadgroup());
        }),
        ("store_to_read_only", "a store to a read-only buffer", |k| {
            let data = k.buffer("data", Type::U32, Access::Read);
            k.store(data.at(0u32), 1u32);
        }),
        (
            "divergent_barrier",
            "threadgroup_barrier inside `if (lid < 5)`",
            |k| {
                let out = k.buffer("out", Type::U32, Access::ReadWrite);
                let lid = k.let_("lid", thread_index_in_threadgroup());
                k.if_(lid.lt(5u32), |k| {
                    k.threadgroup_barrier(MemFlags::Threadgroup)
                });
                k.store(out.at(lid), lid);
            },
        ),
        ("break_outside_loop", "break outside a loop", |k| {
            let out = k.buffer("out", Type::U32, Access::ReadWrite);
            k.break_();
            k.store(out.at(0u32), 1u32);
        }),
        (
            "read_before_assign",
            "a local read before it is assigned",
            |k| {
                let out = k.buffer("out", Type::U32, Access::ReadWrite);
                let v = k.var_uninit("v", Type::U32);
                k.store(out.at(0u32), v);
            },
        ),
        ("wrong_arity", "pow with one argument", |k| {
            let out = k.buffer("out", Type::F32, Access::ReadWrite);
            k.store(out.at(0u32), call(Intrinsic::Pow, &[2.0f32.into()]));
        }),
        ("bitcast_size", "as_type<ushort>(float)", |k| {
            let out = k.buffer("out", Type::U32, Access::ReadWrite);
            k.store(
                out.at(0u32),
                1.0f32
                    .into_ex()
                    .bitcast(enigma_ir::Scalar::U16)
                    .cast(Type::U32),
            );
        }),
    ];
    for (name, what, build) in bad {
        let mut k = KernelBuilder::new(name);
        build(&mut k);
        let kernel = finish(k)?;
        expect_err(
            &format!("pipeline of a kernel with {what}"),
            &[name],
            || rt.pipeline(&kernel),
        )?;
    }
    let mut k = KernelBuilder::new("with_spec");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let s = k.spec("FACTOR", Literal::u32(2));
    k.store(out.at(0u32), s);
    let kernel = finish(k)?;
    expect_err(
        "a value for an unknown specialisation constant",
        &["with_spec", "NOPE"],
        || rt.pipeline_with(&kernel, &SpecValues::new().with("NOPE", Literal::u32(1))),
    )?;
    expect_err(
        "an f32 value for a u32 specialisation constant",
        &["with_spec", "FACTOR"],
        || {
            rt.pipeline_with(
                &kernel,
                &SpecValues::new().with("FACTOR", Literal::f32(1.0)),
            )
        },
    )?;
    still_works(rt)
}

/// `Ex::from` spelled as a method, for literals in expression position.
trait IntoEx {
    fn into_ex(self) -> Ex;
}

impl IntoEx for f32 {
    fn into_ex(self) -> Ex {
        self.into()
    }
}
