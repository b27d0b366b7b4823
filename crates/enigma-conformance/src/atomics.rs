//! Atomics on device and threadgroup memory: add (histograms, tickets from
//! the returned old values), sub, min and max (signed and unsigned), and, or,
//! xor, exchange and compare-exchange (checked by what the operations must
//! conserve, since the order is not defined), and f32 add (exact with
//! quarter-multiples, so any order gives the same sum); a device fence with
//! an atomic handing partial results to the last threadgroup.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, AtomicOp, Feature, Kernel, MemFlags, Type};
use enigma_runtime::{Arg, Runtime, RuntimeError};
use rand::Rng;

/// Device-memory histogram with `atomic_fetch_add`, a countdown with
/// `atomic_fetch_sub`, and tickets: the old values returned by
/// `atomic_fetch_add(counter, 1)` are a permutation of 0..n.
pub fn atomics_device_add(rt: &Runtime) -> CaseResult {
    seeded("atomics_device_add", |rng| {
        const BINS: u32 = 37;
        let mut k = KernelBuilder::new("device_add");
        let values = k.buffer("values", Type::U32, Access::Read);
        let bins = k.buffer("bins", Type::U32, Access::ReadWrite);
        let counters = k.buffer("counters", Type::U32, Access::ReadWrite);
        let tickets = k.buffer("tickets", Type::U32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        k.atomic(AtomicOp::Add, bins.at(values.get(tid) % BINS), 1u32);
        k.atomic(AtomicOp::Sub, counters.at(1u32), 2u32);
        let ticket = k.atomic_fetch(AtomicOp::Add, counters.at(0u32), 1u32);
        k.store(tickets.at(tid), ticket);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 5000usize;
        let vs: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let vb = upload(rt, &vs)?;
        let bb = rt.buffer_zeroed::<u32>(BINS as usize).ctx("allocating")?;
        let cb = upload(rt, &[0u32, 3 * n as u32])?;
        let tb = filled(rt, n, u32::MAX)?;
        threads(
            rt,
            &p,
            &[
                Arg::from(&vb),
                Arg::from(&bb),
                Arg::from(&cb),
                Arg::from(&tb),
            ],
            [n as u32, 1, 1],
            [128, 1, 1],
        )?;
        let mut want = vec![0u32; BINS as usize];
        for v in &vs {
            want[(v % BINS) as usize] += 1;
        }
        check_eq("histogram", &download::<u32>(&bb)?, &want, |i| {
            format!("bin {i}")
        })?;
        check_eq(
            "counters",
            &download::<u32>(&cb)?,
            &[n as u32, n as u32],
            |i| ["tickets handed out", "3n - 2n"][i].into(),
        )?;
        let mut t: Vec<u32> = download(&tb)?;
        t.sort_unstable();
        check_eq(
            "sorted tickets (old values of atomic_fetch_add)",
            &t,
            &(0..n as u32).collect::<Vec<_>>(),
            |_| String::new(),
        )
    })
}

/// Signed and unsigned atomic min/max on device memory, including negative
/// values, and the f32 atomic add of quarter-multiples (exact).
pub fn atomics_device_min_max_float(rt: &Runtime) -> CaseResult {
    seeded("atomics_device_min_max_float", |rng| {
        let mut k = KernelBuilder::new("device_min_max");
        let si = k.buffer("si", Type::I32, Access::Read);
        let ui = k.buffer("ui", Type::U32, Access::Read);
        let fi = k.buffer("fi", Type::F32, Access::Read);
        let so = k.buffer("so", Type::I32, Access::ReadWrite);
        let uo = k.buffer("uo", Type::U32, Access::ReadWrite);
        let fo = k.buffer("fo", Type::F32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let s = k.let_("s", si.get(tid));
        let u = k.let_("u", ui.get(tid));
        k.atomic(AtomicOp::Min, so.at(0u32), s);
        k.atomic(AtomicOp::Max, so.at(1u32), s);
        k.atomic(AtomicOp::Min, uo.at(0u32), u);
        k.atomic(AtomicOp::Max, uo.at(1u32), u);
        // Per-bucket signed max: several threads race on each slot.
        k.atomic(AtomicOp::Max, so.at(2u32 + tid % 8u32), s);
        k.atomic(AtomicOp::Add, fo.at(0u32), fi.get(tid));
        k.atomic(AtomicOp::Sub, fo.at(1u32), fi.get(tid));
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 3000usize;
        let ss: Vec<i32> = (0..n)
            .map(|_| rng.gen_range(-1_000_000..1_000_000))
            .collect();
        let us: Vec<u32> = (0..n).map(|_| rng.gen_range(5..u32::MAX - 5)).collect();
        let fs: Vec<f32> = (0..n).map(|_| quarter(rng, 2000)).collect();
        let sb = upload(rt, &ss)?;
        let ub = upload(rt, &us)?;
        let fb = upload(rt, &fs)?;
        let mut s_init = vec![i32::MAX, i32::MIN];
        s_init.extend([i32::MIN; 8]);
        let sob = upload(rt, &s_init)?;
        let uob = upload(rt, &[u32::MAX, 0])?;
        let fob = upload(rt, &[1.5f32, 0.0])?;
        threads(
            rt,
            &p,
            &[
                Arg::from(&sb),
                Arg::from(&ub),
                Arg::from(&fb),
                Arg::from(&sob),
                Arg::from(&uob),
                Arg::from(&fob),
            ],
            [n as u32, 1, 1],
            [256, 1, 1],
        )?;
        let mut want_s = vec![
            *ss.iter().min().unwrap_or(&0),
            *ss.iter().max().unwrap_or(&0),
        ];
        want_s.extend((0..8).map(|b| (b..n).step_by(8).map(|t| ss[t]).max().unwrap_or(i32::MIN)));
        check_eq(
            "signed atomic min/max",
            &download::<i32>(&sob)?,
            &want_s,
            |i| {
                if i < 2 {
                    ["min", "max"][i].into()
                } else {
                    format!("max of bucket {}", i - 2)
                }
            },
        )?;
        let want_u = vec![
            *us.iter().min().unwrap_or(&0),
            *us.iter().max().unwrap_or(&0),
        ];
        check_eq(
            "unsigned atomic min/max",
            &download::<u32>(&uob)?,
            &want_u,
            |i| ["min", "max"][i].into(),
        )?;
        let sum = fs.iter().fold(0.0f32, |a, b| a + b);
        check_f32_exact(
            "f32 atomic add / sub",
            &download::<f32>(&fob)?,
            &[1.5 + sum, -sum],
            |i| ["1.5 + Σx", "0 - Σx"][i].into(),
        )
    })
}

/// `atomic_fetch_or/and/xor`: or-ing `1 << (tid % 32)` sets every bit, and-ing
/// the complements clears them, xor gives the xor of all values.
pub fn atomics_bitwise(rt: &Runtime) -> CaseResult {
    seeded("atomics_bitwise", |rng| {
        let mut k = KernelBuilder::new("bitwise");
        let values = k.buffer("values", Type::U32, Access::Read);
        let o = k.buffer("o", Type::U32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let bit = k.let_("bit", 1u32 << (tid % 32u32));
        k.atomic(AtomicOp::Or, o.at(0u32), bit);
        k.atomic(AtomicOp::And, o.at(1u32), !bit);
        k.atomic(AtomicOp::Xor, o.at(2u32), values.get(tid));
        k.atomic(AtomicOp::Or, o.at(3u32), bit & 0xF0F0u32);
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 1000usize;
        let vs: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let vb = upload(rt, &vs)?;
        let ob = upload(rt, &[0u32, u32::MAX, 0x1234_5678, 0])?;
        threads(
            rt,
            &p,
            &[Arg::from(&vb), Arg::from(&ob)],
            [n as u32, 1, 1],
            [128, 1, 1],
        )?;
        let want = [
            u32::MAX,
            0,
            vs.iter().fold(0x1234_5678, |a, b| a ^ b),
            0xF0F0,
        ];
        check_eq("bitwise atomics", &download::<u32>(&ob)?, &want, |i| {
            ["or", "and", "xor", "or of masked bits"][i].into()
        })
    })
}

/// `atomic_exchange`: every value put in comes out exactly once (returned to
/// some thread or left in the slot); compare-exchange: of the threads that
/// try to claim a free slot, exactly one succeeds and the slot holds its id.
pub fn atomics_exchange_compare_exchange(rt: &Runtime) -> CaseResult {
    seeded("atomics_exchange_compare_exchange", |rng| {
        const SLOTS: u32 = 5;
        const CLAIMS: u32 = 50;
        const FREE: u32 = u32::MAX;
        let mut k = KernelBuilder::new("exchange");
        let targets = k.buffer("targets", Type::U32, Access::Read);
        let slots = k.buffer("slots", Type::U32, Access::ReadWrite);
        let olds = k.buffer("olds", Type::U32, Access::ReadWrite);
        let claims = k.buffer("claims", Type::U32, Access::ReadWrite);
        let won = k.buffer("won", Type::U32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let old = k.atomic_fetch(AtomicOp::Exchange, slots.at(tid % SLOTS), tid + 1000u32);
        k.store(olds.at(tid), old);
        let seen = k.atomic_compare_exchange(claims.at(targets.get(tid)), FREE, tid);
        k.store(won.at(tid), seen.eq(FREE).cast(Type::U32));
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 700usize;
        let ts: Vec<u32> = (0..n).map(|_| rng.gen_range(0..CLAIMS)).collect();
        let tb = upload(rt, &ts)?;
        let sb = upload(rt, &(0..SLOTS).collect::<Vec<_>>())?;
        let ob = filled(rt, n, 0u32)?;
        let cb = filled(rt, CLAIMS as usize, FREE)?;
        let wb = filled(rt, n, 7u32)?;
        threads(
            rt,
            &p,
            &[
                Arg::from(&tb),
                Arg::from(&sb),
                Arg::from(&ob),
                Arg::from(&cb),
                Arg::from(&wb),
            ],
            [n as u32, 1, 1],
            [64, 1, 1],
        )?;
        let mut seen: Vec<u32> = download(&ob)?;
        seen.extend(download::<u32>(&sb)?);
        seen.sort_unstable();
        let mut put: Vec<u32> = (0..SLOTS).chain(1000..1000 + n as u32).collect();
        put.sort_unstable();
        check_eq(
            "values returned by atomic_exchange plus those left in the slots",
            &seen,
            &put,
            |_| String::new(),
        )?;
        let claims_now: Vec<u32> = download(&cb)?;
        let won: Vec<u32> = download(&wb)?;
        for c in 0..CLAIMS {
            let contenders: Vec<usize> = (0..n).filter(|&t| ts[t] == c).collect();
            let winners: Vec<usize> = contenders
                .iter()
                .copied()
                .filter(|&t| won[t] == 1)
                .collect();
            if contenders.is_empty() {
                ensure!(
                    claims_now[c as usize] == FREE,
                    "slot {c} had no contender but holds {}",
                    claims_now[c as usize]
                );
                continue;
            }
            ensure!(
                winners.len() == 1,
                "slot {c}: {} of {} contenders won the compare-exchange",
                winners.len(),
                contenders.len()
            );
            ensure!(
                claims_now[c as usize] == winners[0] as u32,
                "slot {c} holds {} but thread {} won it",
                claims_now[c as usize],
                winners[0]
            );
        }
        ensure!(
            won.iter().all(|&w| w <= 1),
            "a thread did not record its compare-exchange result"
        );
        Ok(())
    })
}

/// Threadgroup-memory atomics: per-threadgroup histogram (zeroed, barrier,
/// atomic adds, barrier) merged into device memory; per-threadgroup max;
/// per-threadgroup f32 sum.
pub fn atomics_threadgroup(rt: &Runtime) -> CaseResult {
    seeded("atomics_threadgroup", |rng| {
        const BINS: u32 = 16;
        let mut k = KernelBuilder::new("threadgroup_atomics");
        let values = k.buffer("values", Type::U32, Access::Read);
        let fvals = k.buffer("fvals", Type::F32, Access::Read);
        let bins = k.buffer("bins", Type::U32, Access::ReadWrite);
        let maxes = k.buffer("maxes", Type::U32, Access::ReadWrite);
        let sums = k.buffer("sums", Type::F32, Access::ReadWrite);
        let local = k.threadgroup_array("local_bins", Type::U32, BINS + 1);
        let fsum = k.threadgroup_array("fsum", Type::F32, 1);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let group = k.let_("group", threadgroup_position_in_grid().x());
        k.if_(lid.le(BINS), |k| k.store(local.at(lid), 0u32));
        k.if_(lid.eq(0u32), |k| k.store(fsum.at(0u32), 0.0f32));
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let v = k.let_("v", values.get(tid));
        k.atomic(AtomicOp::Add, local.at(v % BINS), 1u32);
        k.atomic(AtomicOp::Max, local.at(BINS), v);
        k.atomic(AtomicOp::Add, fsum.at(0u32), fvals.get(tid));
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.if_(lid.lt(BINS), |k| {
            k.atomic(AtomicOp::Add, bins.at(lid), local.get(lid))
        });
        k.if_(lid.eq(0u32), |k| {
            k.store(maxes.at(group), local.get(BINS));
            k.store(sums.at(group), fsum.get(0u32));
        });
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let (n, tg) = (1000usize, 128usize);
        let groups_n = n.div_ceil(tg);
        let vs: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let fs: Vec<f32> = (0..n).map(|_| quarter(rng, 1000)).collect();
        let bufs = [
            upload(rt, &vs)?,
            upload(rt, &fs)?,
            rt.buffer_zeroed::<u32>(BINS as usize).ctx("allocating")?,
            filled(rt, groups_n, 0u32)?,
            filled(rt, groups_n, f32::NAN)?,
        ];
        let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
        threads(rt, &p, &args, [n as u32, 1, 1], [tg as u32, 1, 1])?;
        let mut want_bins = vec![0u32; BINS as usize];
        for v in &vs {
            want_bins[(v % BINS) as usize] += 1;
        }
        check_eq(
            "histogram through threadgroup atomics",
            &download::<u32>(&bufs[2])?,
            &want_bins,
            |i| format!("bin {i}"),
        )?;
        let want_max: Vec<u32> = vs
            .chunks(tg)
            .map(|c| *c.iter().max().unwrap_or(&0))
            .collect();
        check_eq(
            "threadgroup atomic max",
            &download::<u32>(&bufs[3])?,
            &want_max,
            |i| format!("threadgroup {i}"),
        )?;
        let want_sum: Vec<f32> = fs
            .chunks(tg)
            .map(|c| c.iter().fold(0.0f32, |a, b| a + b))
            .collect();
        check_f32_exact(
            "threadgroup f32 atomic add",
            &download::<f32>(&bufs[4])?,
            &want_sum,
            |i| format!("threadgroup {i}"),
        )
    })
}

/// Threadgroups and threads per threadgroup of [`last_threadgroup_sums`].
pub const LAST_SUM_GROUPS: u32 = 37;
pub const LAST_SUM_THREADS: u32 = 64;

/// Where [`last_threadgroup_sums`] fences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fencing {
    /// No `device_fence()`: the reads of other threadgroups' partials race.
    None,
    /// Only thread 0 fences, around its ticket: enough where device memory
    /// is coherent across threadgroups (CUDA), not on Metal, where each
    /// writer's and each reader's own fence orders it (the sanitizer
    /// follows Metal's rule and reports the reads).
    ThreadZero,
    /// Every thread fences after its write, and every thread of the last
    /// threadgroup before its reads: the handoff Metal's coherence rules ask for.
    EveryThread,
}

/// The last threadgroup sums the others' partial results: every thread of
/// each of [`LAST_SUM_GROUPS`] threadgroups writes `values[i]·3 + group` to
/// `partials`, the threadgroup passes a barrier, and its thread 0 takes a
/// ticket from `counter` with `atomic_fetch_add`; the threadgroup that draws
/// the last ticket resets the counter, and after a barrier each of its
/// threads writes its sum over the groups to `out`. `fencing` says where
/// `device_fence()`s order that handoff.
pub fn last_threadgroup_sums(fencing: Fencing) -> Result<Kernel, String> {
    let mut k = KernelBuilder::new("last_threadgroup_sums");
    let values = k.buffer("values", Type::U32, Access::Read);
    let partials = k.buffer("partials", Type::U32, Access::ReadWrite);
    let counter = k.buffer("counter", Type::U32, Access::ReadWrite);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let last = k.threadgroup_array("last", Type::U32, 1);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let at = k.let_("at", group * LAST_SUM_THREADS + lid);
    k.store(partials.at(at), values.get(at) * 3u32 + group);
    let every = fencing == Fencing::EveryThread;
    if every {
        k.device_fence();
    }
    k.threadgroup_barrier(MemFlags::Device);
    k.if_(lid.eq(0u32), |k| {
        if fencing == Fencing::ThreadZero {
            k.device_fence();
        }
        let ticket = k.atomic_fetch(AtomicOp::Add, counter.at(0u32), 1u32);
        let is_last = k.let_("is_last", ticket.eq(LAST_SUM_GROUPS - 1));
        k.if_(is_last, |k| {
            k.atomic(AtomicOp::Exchange, counter.at(0u32), 0u32);
            if fencing == Fencing::ThreadZero {
                k.device_fence();
            }
        });
        k.store(last.at(0u32), select(0u32, 1u32, is_last));
    });
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(last.get(0u32).ne(0u32), |k| {
        if every {
            k.device_fence();
        }
        let sum = k.var("sum", 0u32);
        k.for_range("g", 0u32, LAST_SUM_GROUPS, 1u32, |k, g| k.assign(sum, sum.get() + partials.get(g * LAST_SUM_THREADS + lid)));
        k.store(out.at(lid), sum.get());
    });
    finish(k)
}

/// [`last_threadgroup_sums`] with its fences, run twice on one counter (the
/// reset must leave it at 0) against the sums computed here. On a device
/// without device-scope fences (Metal below MSL 3.2), making the pipeline
/// must fail naming the feature.
pub fn atomics_device_fence_last_threadgroup_sums(rt: &Runtime) -> CaseResult {
    seeded("atomics_device_fence_last_threadgroup_sums", |rng| {
        let kernel = last_threadgroup_sums(Fencing::EveryThread)?;
        if !rt.device().features.contains(&Feature::DeviceFence) {
            return match rt.pipeline(&kernel) {
                Err(RuntimeError::Unsupported { feature: Feature::DeviceFence, .. }) => Ok(()),
                other => Err(format!("a device without device-scope fences made the pipeline anyway or failed otherwise: {:?}", other.map(|_| ()))),
            };
        }
        let p = pipeline(rt, &kernel)?;
        let (groups_n, threads_n) = (LAST_SUM_GROUPS, LAST_SUM_THREADS);
        let n = (groups_n * threads_n) as usize;
        let vs: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1000)).collect();
        let vb = upload(rt, &vs)?;
        let pb = filled(rt, n, u32::MAX)?;
        let cb = rt.buffer_zeroed::<u32>(1).ctx("allocating")?;
        let want: Vec<u32> = (0..threads_n).map(|t| (0..groups_n).map(|g| vs[(g * threads_n + t) as usize] * 3 + g).sum()).collect();
        for run in 0..2 {
            let ob = filled(rt, threads_n as usize, u32::MAX)?;
            groups(rt, &p, &[Arg::from(&vb), Arg::from(&pb), Arg::from(&cb), Arg::from(&ob)], [groups_n, 1, 1], [threads_n, 1, 1])?;
            check_eq(&format!("sums, run {run}"), &download::<u32>(&ob)?, &want, |t| format!("thread {t}"))?;
            check_eq(&format!("the counter after run {run}"), &download::<u32>(&cb)?, &[0], |_| String::new())?;
        }
        Ok(())
    })
}
