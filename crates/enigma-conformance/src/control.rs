//! Structured control flow: early return, nested if/else, for loops with
//! loop-carried values and per-thread trip counts, while loops, break and
//! continue in divergent branches, return inside loops, and loops whose
//! bodies call SIMD functions under masks that shrink as lanes leave.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Scalar, Type};
use enigma_runtime::{Arg, Runtime};
use rand::Rng;

const SENTINEL: u32 = 0xDEAD_BEEF;

/// `if (tid >= n) return;` with whole threadgroups over more threads than
/// elements; and a return between two stores (odd threads leave after the
/// first).
pub fn control_early_return(rt: &Runtime) -> CaseResult {
    seeded("control_early_return", |rng| {
        let mut k = KernelBuilder::new("early_return");
        let input = k.buffer("input", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let marks = k.buffer("marks", Type::U32, Access::ReadWrite);
        let n = k.value("n", Type::U32);
        let tid = k.let_("tid", thread_position_in_grid().x());
        k.store(marks.at(tid), 1u32);
        k.if_((tid % 2u32).eq(1u32), |k| k.return_());
        k.store(marks.at(tid), 2u32);
        k.if_(tid.ge(n), |k| k.return_());
        k.store(out.at(tid), input.get(tid) * 3u32 + 1u32);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 1000usize;
        let xs: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let ib = upload(rt, &xs)?;
        let ob = filled(rt, 1024, SENTINEL)?;
        let mb = filled(rt, 1024, 0u32)?;
        groups(
            rt,
            &p,
            &[
                Arg::from(&ib),
                Arg::from(&ob),
                Arg::from(&mb),
                Arg::u32(n as u32),
            ],
            [4, 1, 1],
            [256, 1, 1],
        )?;
        let want: Vec<u32> = (0..1024)
            .map(|i| {
                if i < n && i % 2 == 0 {
                    xs[i].wrapping_mul(3).wrapping_add(1)
                } else {
                    SENTINEL
                }
            })
            .collect();
        check_eq(
            "out after `if (tid >= n) return`",
            &download::<u32>(&ob)?,
            &want,
            |i| format!("thread {i}"),
        )?;
        let want: Vec<u32> = (0..1024).map(|i| if i % 2 == 1 { 1 } else { 2 }).collect();
        check_eq(
            "marks around `if (tid % 2 == 1) return`",
            &download::<u32>(&mb)?,
            &want,
            |i| format!("thread {i}"),
        )
    })
}

/// Nested if/else chains classifying an i32, a variable assigned on every
/// path and read after the join, and an if without else that updates it.
pub fn control_if_else_nesting(rt: &Runtime) -> CaseResult {
    seeded("control_if_else_nesting", |rng| {
        let mut k = KernelBuilder::new("if_else");
        let input = k.buffer("input", Type::I32, Access::Read);
        let out = k.buffer("out", Type::I32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let x = k.let_("x", input.get(tid));
        let r = k.var_uninit("r", Type::I32);
        k.if_else(
            x.lt(0),
            |k| k.if_else(x.lt(-100), |k| k.assign(r, 1), |k| k.assign(r, 2)),
            |k| {
                k.if_else(
                    x.eq(0),
                    |k| k.assign(r, 3),
                    |k| {
                        k.if_else(
                            (x % 2).eq(0),
                            |k| k.assign(r, x / 2),
                            |k| k.assign(r, x * 3 + 1),
                        )
                    },
                )
            },
        );
        k.if_(x.gt(1000).and(r.get().ne(3)), |k| k.assign(r, r * -1));
        k.store(out.at(tid), r);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let mut xs: Vec<i32> = vec![0, -1, -100, -101, 1, 2, 1000, 1001, 1002];
        while xs.len() < 1000 {
            xs.push(rng.gen_range(-300..3000));
        }
        let want: Vec<i32> = xs
            .iter()
            .map(|&x| {
                let r = if x < 0 {
                    if x < -100 {
                        1
                    } else {
                        2
                    }
                } else if x == 0 {
                    3
                } else if x % 2 == 0 {
                    x / 2
                } else {
                    x * 3 + 1
                };
                if x > 1000 && r != 3 {
                    -r
                } else {
                    r
                }
            })
            .collect();
        let ib = upload(rt, &xs)?;
        let ob = rt.buffer_zeroed::<i32>(xs.len()).ctx("allocating")?;
        threads(
            rt,
            &p,
            &[Arg::from(&ib), Arg::from(&ob)],
            [xs.len() as u32, 1, 1],
            [64, 1, 1],
        )?;
        check_eq("nested if/else", &download::<i32>(&ob)?, &want, |i| {
            format!("x = {}", xs[i])
        })
    })
}

/// For loops: per-thread trip counts with a loop-carried value, a per-thread
/// start with step 3, nested loops whose inner bounds depend on the outer
/// variable, and an i32 loop from a negative start.
pub fn control_for_loops(rt: &Runtime) -> CaseResult {
    seeded("control_for_loops", |rng| {
        let mut k = KernelBuilder::new("for_loops");
        let trips = k.buffer("trips", Type::U32, Access::Read);
        let starts = k.buffer("starts", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let end = k.value("end", Type::U32);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let t = k.let_("t", trips.get(tid));
        let acc = k.var("acc", 7u32);
        k.for_range("i", 0u32, t, 1u32, |k, i| k.assign(acc, acc * 3u32 + i));
        let acc2 = k.var("acc2", 0u32);
        k.for_range("j", starts.get(tid), end, 3u32, |k, j| {
            k.assign(acc2, acc2 + j)
        });
        let acc3 = k.var("acc3", 0u32);
        k.for_range("a", 0u32, t % 5u32, 1u32, |k, a| {
            k.for_range("b", a, 5u32, 1u32, |k, b| {
                k.assign(acc3, acc3 + a * b + 1u32)
            });
        });
        let acc4 = k.var("acc4", 0i32);
        k.for_range("m", -5, t.cast(Type::I32) - 3, 2, |k, m| {
            k.assign(acc4, acc4 + m)
        });
        k.store(out.at(tid * 4u32), acc);
        k.store(out.at(tid * 4u32 + 1u32), acc2);
        k.store(out.at(tid * 4u32 + 2u32), acc3);
        k.store(out.at(tid * 4u32 + 3u32), acc4.get().bitcast(Type::U32));
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 500usize;
        let ts: Vec<u32> = (0..n).map(|_| rng.gen_range(0..50)).collect();
        let ss: Vec<u32> = (0..n).map(|_| rng.gen_range(0..120)).collect();
        let end_v = 100u32;
        let tb = upload(rt, &ts)?;
        let sb = upload(rt, &ss)?;
        let ob = filled(rt, n * 4, SENTINEL)?;
        threads(
            rt,
            &p,
            &[
                Arg::from(&tb),
                Arg::from(&sb),
                Arg::from(&ob),
                Arg::u32(end_v),
            ],
            [n as u32, 1, 1],
            [96, 1, 1],
        )?;
        let mut want = vec![];
        for i in 0..n {
            let t = ts[i];
            let acc = (0..t).fold(7u32, |a, i| a.wrapping_mul(3).wrapping_add(i));
            let acc2: u32 = (ss[i]..end_v).step_by(3).sum();
            let acc3: u32 = (0..t % 5)
                .flat_map(|a| (a..5).map(move |b| a * b + 1))
                .sum();
            let acc4: i32 = (-5..t as i32 - 3).step_by(2).sum();
            want.extend([acc, acc2, acc3, acc4 as u32]);
        }
        let names = [
            "acc = acc*3 + i for i < t",
            "Σ j for j = start; j < end; j += 3",
            "nested a < t%5, b in a..5",
            "Σ m for m = -5; m < t-3; m += 2",
        ];
        check_eq("for loops", &download::<u32>(&ob)?, &want, |i| {
            format!(
                "thread {}, {}, t = {}, start = {}",
                i / 4,
                names[i % 4],
                ts[i / 4],
                ss[i / 4]
            )
        })
    })
}

/// `for (i = 0; i < end; i++)` evaluates `end` once, before the first
/// iteration: changing the variable it was read from inside the body does
/// not change the trip count (same for `step`).
pub fn control_for_bounds_evaluated_once(rt: &Runtime) -> CaseResult {
    seeded("control_for_bounds_evaluated_once", |rng| {
        let mut k = KernelBuilder::new("for_bounds_once");
        let input = k.buffer("input", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let end = k.var("end", input.get(tid));
        let count = k.var("count", 0u32);
        k.for_range("i", 0u32, end, 1u32, |k, _| {
            k.assign(end, end.get() / 2u32);
            k.assign(count, count + 1u32);
        });
        let step = k.var("step", 1u32);
        let count2 = k.var("count2", 0u32);
        k.for_range("j", 0u32, 40u32, step, |k, _| {
            k.assign(step, step + 1u32);
            k.assign(count2, count2 + 1u32);
        });
        k.store(out.at(tid * 2u32), count);
        k.store(out.at(tid * 2u32 + 1u32), count2);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 64usize;
        let xs: Vec<u32> = (0..n).map(|_| rng.gen_range(0..100)).collect();
        let ib = upload(rt, &xs)?;
        let ob = filled(rt, 2 * n, SENTINEL)?;
        threads(
            rt,
            &p,
            &[Arg::from(&ib), Arg::from(&ob)],
            [n as u32, 1, 1],
            [32, 1, 1],
        )?;
        let want: Vec<u32> = xs.iter().flat_map(|&x| [x, 40]).collect();
        check_eq(
            "trip counts of loops whose bound variables change in the body",
            &download::<u32>(&ob)?,
            &want,
            |i| {
                if i % 2 == 0 {
                    format!("`for i < end` with end = {} halved in the body", xs[i / 2])
                } else {
                    "`for j < 40; j += step` with step = 1 incremented in the body".to_string()
                }
            },
        )
    })
}

/// While loops: Collatz step counts (per-thread trip counts up to ~180), and
/// `while (true)` left by `break`.
pub fn control_while_loops(rt: &Runtime) -> CaseResult {
    seeded("control_while_loops", |rng| {
        let mut k = KernelBuilder::new("while_loops");
        let input = k.buffer("input", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let x = k.let_("x", input.get(tid));
        let v = k.var("v", x);
        let steps = k.var("steps", 0u32);
        k.while_(v.get().ne(1u32), |k| {
            k.if_else(
                (v % 2u32).eq(0u32),
                |k| k.assign(v, v / 2u32),
                |k| k.assign(v, v * 3u32 + 1u32),
            );
            k.assign(steps, steps + 1u32);
        });
        let r = k.var("r", 0u32);
        k.while_(true, |k| {
            k.assign(r, r + 1u32);
            k.if_((r * r).gt(x), |k| k.break_());
        });
        k.store(out.at(tid * 2u32), steps);
        k.store(out.at(tid * 2u32 + 1u32), r);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 400usize;
        let xs: Vec<u32> = (0..n)
            .map(|i| if i == 0 { 1 } else { rng.gen_range(1..3000) })
            .collect();
        let ib = upload(rt, &xs)?;
        let ob = filled(rt, 2 * n, SENTINEL)?;
        threads(
            rt,
            &p,
            &[Arg::from(&ib), Arg::from(&ob)],
            [n as u32, 1, 1],
            [64, 1, 1],
        )?;
        let want: Vec<u32> = xs
            .iter()
            .flat_map(|&x| {
                let (mut v, mut steps) = (x, 0);
                while v != 1 {
                    v = if v % 2 == 0 { v / 2 } else { v * 3 + 1 };
                    steps += 1;
                }
                let mut r = 0u32;
                loop {
                    r += 1;
                    if r * r > x {
                        break;
                    }
                }
                [steps, r]
            })
            .collect();
        check_eq("while loops", &download::<u32>(&ob)?, &want, |i| {
            format!(
                "x = {}, {}",
                xs[i / 2],
                ["Collatz steps", "least r with r·r > x"][i % 2]
            )
        })
    })
}

/// `continue` and `break` under per-thread conditions, in a for loop and in
/// nested loops (inner break, outer continue).
pub fn control_break_continue_divergent(rt: &Runtime) -> CaseResult {
    seeded("control_break_continue_divergent", |rng| {
        let mut k = KernelBuilder::new("break_continue");
        let limits = k.buffer("limits", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let limit = k.let_("limit", limits.get(tid));
        let acc = k.var("acc", 0u32);
        k.for_range("i", 0u32, 64u32, 1u32, |k, i| {
            k.if_((i * (tid + 1u32) % 7u32).eq(3u32), |k| k.continue_());
            k.if_(acc.get().gt(limit), |k| k.break_());
            k.assign(acc, acc + i);
        });
        let acc2 = k.var("acc2", 0u32);
        k.for_range("a", 0u32, 10u32, 1u32, |k, a| {
            k.if_(((a + tid) % 3u32).eq(0u32), |k| k.continue_());
            k.for_range("b", 0u32, 10u32, 1u32, |k, b| {
                k.if_((a * b).gt(limit % 20u32), |k| k.break_());
                k.assign(acc2, acc2 + a * 10u32 + b);
            });
        });
        k.store(out.at(tid * 2u32), acc);
        k.store(out.at(tid * 2u32 + 1u32), acc2);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 300usize;
        let ls: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1500)).collect();
        let lb = upload(rt, &ls)?;
        let ob = filled(rt, 2 * n, SENTINEL)?;
        threads(
            rt,
            &p,
            &[Arg::from(&lb), Arg::from(&ob)],
            [n as u32, 1, 1],
            [96, 1, 1],
        )?;
        let want: Vec<u32> = (0..n)
            .flat_map(|t| {
                let limit = ls[t];
                let mut acc = 0u32;
                for i in 0..64u32 {
                    if i * (t as u32 + 1) % 7 == 3 {
                        continue;
                    }
                    if acc > limit {
                        break;
                    }
                    acc += i;
                }
                let mut acc2 = 0u32;
                for a in 0..10u32 {
                    if (a + t as u32) % 3 == 0 {
                        continue;
                    }
                    for b in 0..10u32 {
                        if a * b > limit % 20 {
                            break;
                        }
                        acc2 += a * 10 + b;
                    }
                }
                [acc, acc2]
            })
            .collect();
        check_eq("break/continue", &download::<u32>(&ob)?, &want, |i| {
            format!(
                "thread {}, limit {}, {}",
                i / 2,
                ls[i / 2],
                ["for with continue and break", "nested loops"][i % 2]
            )
        })
    })
}

/// `return` inside a loop: threads that return skip the rest of the loop and
/// everything after it.
pub fn control_return_in_loop(rt: &Runtime) -> CaseResult {
    seeded("control_return_in_loop", |rng| {
        let mut k = KernelBuilder::new("return_in_loop");
        let stops = k.buffer("stops", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let stop = k.let_("stop", stops.get(tid));
        k.for_range("i", 0u32, 10u32, 1u32, |k, i| {
            k.if_(i.eq(stop), |k| k.return_());
            k.store(out.at(tid * 2u32), i);
        });
        k.store(out.at(tid * 2u32 + 1u32), 99u32);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 200usize;
        let ss: Vec<u32> = (0..n).map(|_| rng.gen_range(0..15)).collect();
        let sb = upload(rt, &ss)?;
        let ob = filled(rt, 2 * n, SENTINEL)?;
        threads(
            rt,
            &p,
            &[Arg::from(&sb), Arg::from(&ob)],
            [n as u32, 1, 1],
            [64, 1, 1],
        )?;
        let want: Vec<u32> = ss
            .iter()
            .flat_map(|&s| {
                let last = if s == 0 { SENTINEL } else { s.min(10) - 1 };
                [last, if s < 10 { SENTINEL } else { 99 }]
            })
            .collect();
        check_eq("return inside a loop", &download::<u32>(&ob)?, &want, |i| {
            format!(
                "thread {}, stop = {}, {}",
                i / 2,
                ss[i / 2],
                ["last i stored", "after the loop"][i % 2]
            )
        })
    })
}

/// SIMD functions inside loops whose active lanes shrink: a for loop with a
/// per-thread trip count (`simd_sum(1)` counts the lanes still iterating,
/// `simd_prefix_exclusive_sum(1)` ranks them), a while loop left by a
/// divergent `break`, and a loop whose `continue` skips the SIMD call; with
/// 96-thread threadgroups over 200 threads (partial SIMD groups).
pub fn control_loops_with_simd(rt: &Runtime) -> CaseResult {
    seeded("control_loops_with_simd", |rng| {
        let mut k = KernelBuilder::new("loops_with_simd");
        let trips = k.buffer("trips", Type::U32, Access::Read);
        let breaks = k.buffer("breaks", Type::U32, Access::Read);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let lane = k.let_("lane", thread_index_in_simdgroup());
        let t = k.let_("t", trips.get(tid));
        let brk = k.let_("brk", breaks.get(tid));
        let acc = k.var("acc", 0u32);
        let acc_rank = k.var("acc_rank", 0u32);
        k.for_range("i", 0u32, t, 1u32, |k, i| {
            k.assign(acc, acc + simd_sum(1u32) * (i + 1u32));
            k.assign(
                acc_rank,
                acc_rank + simd_prefix_exclusive_sum(1u32) * (i + 1u32),
            );
        });
        let j = k.var("j", 0u32);
        let acc2 = k.var("acc2", 0u32);
        k.while_(j.get().lt(40u32), |k| {
            k.if_(j.get().eq(brk), |k| k.break_());
            k.assign(
                acc2,
                acc2 + simd_sum(j.get()) + simd_ballot(true).cast(Type::U32),
            );
            k.assign(j, j + 1u32);
        });
        let acc3 = k.var("acc3", 0u32);
        k.for_range("c", 0u32, 32u32, 1u32, |k, c| {
            k.if_(((lane + c) % 4u32).eq(0u32), |k| k.continue_());
            k.assign(acc3, acc3 + simd_sum(1u32));
        });
        k.store(out.at(tid * 4u32), acc);
        k.store(out.at(tid * 4u32 + 1u32), acc_rank);
        k.store(out.at(tid * 4u32 + 2u32), acc2);
        k.store(out.at(tid * 4u32 + 3u32), acc3);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let (n, tg) = (200usize, 96usize);
        let ts: Vec<u32> = (0..n).map(|_| rng.gen_range(0..30)).collect();
        let bs: Vec<u32> = (0..n).map(|_| rng.gen_range(0..50)).collect();
        let tb = upload(rt, &ts)?;
        let bb = upload(rt, &bs)?;
        let ob = filled(rt, 4 * n, SENTINEL)?;
        threads(
            rt,
            &p,
            &[Arg::from(&tb), Arg::from(&bb), Arg::from(&ob)],
            [n as u32, 1, 1],
            [tg as u32, 1, 1],
        )?;
        let mut want = vec![0u32; 4 * n];
        for t in 0..n {
            // The SIMD group: threads of the same threadgroup and 32-lane block.
            let (g, local) = (t / tg, t % tg);
            let first = g * tg + local / 32 * 32;
            let last = (first + 32).min((g + 1) * tg).min(n);
            let group: Vec<usize> = (first..last).collect();
            let lane = (t - first) as u32;
            let (mut acc, mut rank) = (0u32, 0u32);
            for i in 0..ts[t] {
                let active: Vec<&usize> = group.iter().filter(|&&x| ts[x] > i).collect();
                acc += active.len() as u32 * (i + 1);
                rank += active.iter().filter(|&&&x| x < t).count() as u32 * (i + 1);
            }
            let mut acc2 = 0u32;
            for j in 0..40u32.min(bs[t]) {
                let active: Vec<&usize> = group.iter().filter(|&&x| bs[x] > j).collect();
                let ballot = active.iter().fold(0u32, |m, &&x| m | 1 << (x - first));
                acc2 = acc2
                    .wrapping_add(j * active.len() as u32)
                    .wrapping_add(ballot);
            }
            let mut acc3 = 0u32;
            for c in 0..32u32 {
                if (lane + c) % 4 != 0 {
                    acc3 += group
                        .iter()
                        .filter(|&&x| ((x - first) as u32 + c) % 4 != 0)
                        .count() as u32;
                }
            }
            want[4 * t..4 * t + 4].copy_from_slice(&[acc, rank, acc2, acc3]);
        }
        let names = [
            "Σ simd_sum(1)·(i+1) over a per-thread trip count",
            "Σ simd_prefix_exclusive_sum(1)·(i+1)",
            "while loop with divergent break: Σ simd_sum(j) + ballot",
            "simd_sum(1) after a divergent continue",
        ];
        check_eq(
            "SIMD functions in loops",
            &download::<u32>(&ob)?,
            &want,
            |i| {
                format!(
                    "thread {} (trips {}, break at {}), {}",
                    i / 4,
                    ts[i / 4],
                    bs[i / 4],
                    names[i % 4]
                )
            },
        )
    })
}

/// The `for` loop variable's type follows its bounds: a `ushort` loop near
/// the top of its range.
pub fn control_narrow_loop_variable(rt: &Runtime) -> CaseResult {
    let mut k = KernelBuilder::new("narrow_loop");
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let acc = k.var("acc", 0u32);
    k.for_range(
        "s",
        lit(Scalar::U16, 65530.0),
        lit(Scalar::U16, 65533.0),
        lit(Scalar::U16, 2.0),
        |k, s| {
            k.assign(acc, acc + s.cast(Type::U32));
        },
    );
    k.store(out.at(tid), acc + tid);
    let kernel = finish(k)?;
    let p = pipeline(rt, &kernel)?;
    let ob = filled(rt, 4, SENTINEL)?;
    threads(rt, &p, &[Arg::from(&ob)], [4, 1, 1], [4, 1, 1])?;
    let want: Vec<u32> = (0..4).map(|t| 65530 + 65532 + t).collect();
    check_eq(
        "ushort loop 65530..65533 step 2",
        &download::<u32>(&ob)?,
        &want,
        |i| format!("thread {i}"),
    )
}
