//! SIMD-group functions over the *active* lanes: full SIMD groups, partial
//! last SIMD groups, and inside divergent branches (`lane % 3 == 0`,
//! `lane < 8` as in seed 001, `lane >= 24`, data-dependent, nested, the else
//! side of a branch, after an early return). The reference computes each
//! function over the active lanes of each SIMD group only. Shuffles only ever
//! read lanes that are active (reading an inactive lane is undefined): each
//! scenario names the shuffle deltas and masks that are valid for its masks,
//! and the harness checks that claim before running.
//!
//! Float sums and prefix sums use multiples of 1/4 and products use ±2^k, so
//! every order of evaluation gives the exact result and the comparison is
//! exact; [`simd_sum_f32_tolerance`] covers general floats with a stated
//! bound.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Scalar, Type};
use enigma_runtime::{Arg, Runtime};
use rand::rngs::SmallRng;
use rand::Rng;

const SENTINEL: u32 = 0xDEAD_BEEF;
const SLOTS: usize = 30;

const SLOT_NAMES: [&str; SLOTS] = [
    "simd_sum(f32)",
    "simd_sum(i32)",
    "simd_sum(u32)",
    "simd_product(f32)",
    "simd_product(u32)",
    "simd_max(f32)",
    "simd_min(f32)",
    "simd_max(i32)",
    "simd_min(u32)",
    "simd_and(u32)",
    "simd_or(u32)",
    "simd_xor(u32)",
    "simd_broadcast(f32, lane)",
    "simd_broadcast_first(u32)",
    "simd_shuffle(f32, index)",
    "simd_shuffle_up(u32, delta)",
    "simd_shuffle_down(u32, delta)",
    "simd_shuffle_xor(u32, mask)",
    "simd_prefix_inclusive_sum(f32)",
    "simd_prefix_exclusive_sum(f32)",
    "simd_prefix_inclusive_sum(u32)",
    "simd_prefix_exclusive_sum(i32)",
    "simd_all(f > 0)",
    "simd_any(f > 0)",
    "simd_ballot(f > 0) low bits",
    "simd_ballot(f > 0) high bits",
    "simd_is_first()",
    "simd_all(i > -1000000)",
    "simd_broadcast_first(f32)",
    "simd_sum(1) on the other side of the branch",
];

type Pred = fn(Ex, Ex, Ex) -> Ex;
type HostPred = fn(u32, u32, u32) -> bool;

/// Where the SIMD functions run.
struct Scenario {
    name: &'static str,
    grid: u32,
    tg: u32,
    /// Threads with `tid >= n` return first.
    early_return: Option<u32>,
    /// Nested conditions of (lane, tid, flag); the functions run where all
    /// hold (or, with `in_else`, where the outer ones hold and the innermost
    /// does not); the other side of the innermost branch counts its lanes.
    preds: Vec<(Pred, HostPred)>,
    in_else: bool,
    up: Option<u32>,
    down: Option<u32>,
    xor: Option<u32>,
}

struct Inputs {
    f: Vec<f32>,
    p: Vec<f32>,
    u: Vec<u32>,
    i: Vec<i32>,
    flag: Vec<u32>,
}

fn kernel(s: &Scenario) -> Result<enigma_ir::Kernel, String> {
    let mut k = KernelBuilder::new("simd_functions");
    let xf = k.buffer("xf", Type::F32, Access::Read);
    let xp = k.buffer("xp", Type::F32, Access::Read);
    let xu = k.buffer("xu", Type::U32, Access::Read);
    let xi = k.buffer("xi", Type::I32, Access::Read);
    let flags = k.buffer("flags", Type::U32, Access::Read);
    let shuffle_index = k.buffer("shuffle_index", Type::U32, Access::Read);
    let broadcast_lane = k.buffer("broadcast_lane", Type::U32, Access::Read);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let flag = k.let_("flag", flags.get(tid));
    let sg = k.let_(
        "sg",
        threadgroup_position_in_grid().x() * 32u32 + simdgroup_index_in_threadgroup(),
    );
    let base = k.let_("base", tid * SLOTS as u32);
    let (up, down, xor) = (s.up, s.down, s.xor);
    // Loaded before the branches (and the early return), so lanes that do not
    // take part hold real values: a function that wrongly includes them shows.
    let f = k.let_("f", xf.get(tid));
    let p = k.let_("p", xp.get(tid));
    let u = k.let_("u", xu.get(tid));
    let i = k.let_("i", xi.get(tid));
    if s.early_return.is_some() {
        k.if_(tid.ge(n), |k| k.return_());
    }
    let ops = move |k: &mut KernelBuilder| {
        let put = |k: &mut KernelBuilder, slot: u32, v: Ex| {
            let v = if v.ty() == Type::BOOL {
                v.cast(Type::U32)
            } else if v.ty() == Type::U32 {
                v
            } else {
                v.bitcast(Type::U32)
            };
            k.store(out.at(base + slot), v);
        };
        put(k, 0, simd_sum(f));
        put(k, 1, simd_sum(i));
        put(k, 2, simd_sum(u));
        put(k, 3, simd_product(p));
        put(k, 4, simd_product(u));
        put(k, 5, simd_max(f));
        put(k, 6, simd_min(f));
        put(k, 7, simd_max(i));
        put(k, 8, simd_min(u));
        put(k, 9, simd_and(u));
        put(k, 10, simd_or(u));
        put(k, 11, simd_xor(u));
        let bl = k.let_("bl", broadcast_lane.get(sg));
        put(k, 12, simd_broadcast(f, bl));
        put(k, 13, simd_broadcast_first(u));
        put(k, 14, simd_shuffle(f, shuffle_index.get(tid)));
        if let Some(d) = up {
            put(k, 15, simd_shuffle_up(u, d));
        }
        if let Some(d) = down {
            put(k, 16, simd_shuffle_down(u, d));
        }
        if let Some(m) = xor {
            put(k, 17, simd_shuffle_xor(u, m));
        }
        put(k, 18, simd_prefix_inclusive_sum(f));
        put(k, 19, simd_prefix_exclusive_sum(f));
        put(k, 20, simd_prefix_inclusive_sum(u));
        put(k, 21, simd_prefix_exclusive_sum(i));
        // Predicates inline (not through a local), so the lanes that do not
        // take part hold real values in the operand too.
        put(k, 22, simd_all(f.gt(0.0)));
        put(k, 23, simd_any(f.gt(0.0)));
        let ballot = k.let_("ballot", simd_ballot(f.gt(0.0)));
        put(k, 24, ballot.cast(Type::U32));
        put(k, 25, (ballot >> 32u64).cast(Type::U32));
        put(k, 26, simd_is_first());
        put(k, 27, simd_all(i.gt(-1000000)));
        put(k, 28, simd_broadcast_first(f));
    };
    let other = move |k: &mut KernelBuilder| k.store(out.at(base + 29u32), simd_sum(1u32));
    nest(&mut k, &s.preds, s.in_else, lane, tid, flag, ops, other);
    finish(k)
}

/// Emits the nested ifs of `preds` with `ops` innermost (or in the
/// innermost else) and `other` on the other side.
#[allow(clippy::too_many_arguments)]
fn nest(
    k: &mut KernelBuilder,
    preds: &[(Pred, HostPred)],
    in_else: bool,
    lane: Ex,
    tid: Ex,
    flag: Ex,
    ops: impl FnOnce(&mut KernelBuilder),
    other: impl FnOnce(&mut KernelBuilder),
) {
    match preds {
        [] => ops(k),
        [(last, _)] => {
            if in_else {
                k.if_else(last(lane, tid, flag), other, ops)
            } else {
                k.if_else(last(lane, tid, flag), ops, other)
            }
        }
        [(first, _), rest @ ..] => k.if_(first(lane, tid, flag), |k| {
            nest(k, rest, in_else, lane, tid, flag, ops, other)
        }),
    }
}

fn inputs(rng: &mut SmallRng, n: usize, flag_density: f64) -> Inputs {
    Inputs {
        f: (0..n).map(|_| quarter(rng, 256)).collect(),
        p: (0..n)
            .map(|_| [1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 0.25, 4.0][rng.gen_range(0..8)])
            .collect(),
        u: (0..n).map(|_| rng.gen()).collect(),
        i: (0..n).map(|_| rng.gen_range(-1000..1000)).collect(),
        flag: (0..n).map(|_| rng.gen_bool(flag_density) as u32).collect(),
    }
}

/// Runs one scenario and compares every slot of every thread.
fn run_scenario(rt: &Runtime, rng: &mut SmallRng, s: &Scenario) -> CaseResult {
    let grid = s.grid as usize;
    let inp = inputs(rng, grid, 0.5);
    // Which threads reach the functions ("ops") and which the other side.
    let mut ops_active = vec![false; grid];
    let mut other_active = vec![false; grid];
    let mut lane_of = vec![0u32; grid];
    let mut group_of = vec![0usize; grid]; // a global SIMD-group id
    for t in 0..grid as u32 {
        let tgi = t / s.tg;
        let local = t % s.tg;
        let lane = local % 32;
        lane_of[t as usize] = lane;
        group_of[t as usize] = (tgi * 32 + local / 32) as usize;
        if s.early_return.is_some_and(|n| t >= n) {
            continue;
        }
        let f = inp.flag[t as usize];
        let (outer, last) = match s.preds.split_last() {
            None => {
                ops_active[t as usize] = true;
                continue;
            }
            Some((last, outer)) => (outer, last),
        };
        if outer.iter().all(|(_, h)| h(lane, t, f)) {
            let taken = (last.1)(lane, t, f);
            if taken != s.in_else {
                ops_active[t as usize] = true;
            } else {
                other_active[t as usize] = true;
            }
        }
    }
    let groups = group_of.iter().max().map_or(0, |g| g + 1);
    let mut members: Vec<Vec<usize>> = vec![vec![]; groups]; // active threads by lane order
    let mut others: Vec<u32> = vec![0; groups];
    let mut lane_thread: Vec<[Option<usize>; 32]> = vec![[None; 32]; groups];
    for t in 0..grid {
        if ops_active[t] {
            members[group_of[t]].push(t);
            lane_thread[group_of[t]][lane_of[t] as usize] = Some(t);
        }
        if other_active[t] {
            others[group_of[t]] += 1;
        }
    }
    // Broadcast lanes and shuffle indices point at active lanes.
    let mut broadcast_lane = vec![0u32; groups.max(1) * 32];
    for (g, m) in members.iter().enumerate() {
        if !m.is_empty() {
            broadcast_lane[g] = lane_of[m[rng.gen_range(0..m.len())]];
        }
    }
    let mut shuffle_index = vec![0u32; grid];
    for t in 0..grid {
        if ops_active[t] {
            let m = &members[group_of[t]];
            shuffle_index[t] = lane_of[m[rng.gen_range(0..m.len())]];
        }
    }
    // The scenario's shuffles must read active lanes only.
    for t in (0..grid).filter(|&t| ops_active[t]) {
        let (l, g) = (lane_of[t], group_of[t]);
        let reads = [
            s.up.map(|d| if l >= d { l - d } else { l }),
            s.down.map(|d| if l + d < 32 { l + d } else { l }),
            s.xor.map(|m| l ^ m),
        ];
        for (what, src) in ["shuffle_up", "shuffle_down", "shuffle_xor"]
            .iter()
            .zip(reads)
        {
            if let Some(src) = src {
                ensure!(
                    src < 32 && lane_thread[g][src as usize].is_some(),
                    "conformance test bug: scenario {} has {what} reading inactive lane {src} from lane {l}",
                    s.name
                );
            }
        }
    }

    let mut want = vec![SENTINEL; grid * SLOTS];
    for t in 0..grid {
        if other_active[t] {
            want[t * SLOTS + 29] = others[group_of[t]];
        }
        if !ops_active[t] {
            continue;
        }
        let g = group_of[t];
        let m = &members[g];
        let l = lane_of[t];
        let at = |lane: u32| lane_thread[g][lane as usize].expect("checked above");
        let fs = || m.iter().map(|&x| inp.f[x]);
        let us = || m.iter().map(|&x| inp.u[x]);
        let is = || m.iter().map(|&x| inp.i[x]);
        let lanes = &lane_of;
        let before = |incl: bool| {
            m.iter()
                .filter(move |&&x| if incl { lanes[x] <= l } else { lanes[x] < l })
        };
        let ballot: u64 = m
            .iter()
            .filter(|&&x| inp.f[x] > 0.0)
            .fold(0, |b, &x| b | 1 << lane_of[x]);
        let w = &mut want[t * SLOTS..t * SLOTS + SLOTS];
        w[0] = fs().fold(0.0f32, |a, b| a + b).to_bits();
        w[1] = is().fold(0i32, |a, b| a.wrapping_add(b)) as u32;
        w[2] = us().fold(0u32, |a, b| a.wrapping_add(b));
        w[3] = m.iter().map(|&x| inp.p[x]).product::<f32>().to_bits();
        w[4] = us().fold(1u32, |a, b| a.wrapping_mul(b));
        w[5] = fs().fold(f32::NEG_INFINITY, f32::max).to_bits();
        w[6] = fs().fold(f32::INFINITY, f32::min).to_bits();
        w[7] = is().max().unwrap_or(0) as u32;
        w[8] = us().min().unwrap_or(0);
        w[9] = us().fold(u32::MAX, |a, b| a & b);
        w[10] = us().fold(0, |a, b| a | b);
        w[11] = us().fold(0, |a, b| a ^ b);
        w[12] = inp.f[at(broadcast_lane[g])].to_bits();
        w[13] = inp.u[m[0]];
        w[14] = inp.f[at(shuffle_index[t])].to_bits();
        if let Some(d) = s.up {
            w[15] = inp.u[at(if l >= d { l - d } else { l })];
        }
        if let Some(d) = s.down {
            w[16] = inp.u[at(if l + d < 32 { l + d } else { l })];
        }
        if let Some(x) = s.xor {
            w[17] = inp.u[at(l ^ x)];
        }
        w[18] = before(true)
            .map(|&x| inp.f[x])
            .fold(0.0f32, |a, b| a + b)
            .to_bits();
        w[19] = before(false)
            .map(|&x| inp.f[x])
            .fold(0.0f32, |a, b| a + b)
            .to_bits();
        w[20] = before(true)
            .map(|&x| inp.u[x])
            .fold(0u32, |a, b| a.wrapping_add(b));
        w[21] = before(false)
            .map(|&x| inp.i[x])
            .fold(0i32, |a, b| a.wrapping_add(b)) as u32;
        w[22] = fs().all(|v| v > 0.0) as u32;
        w[23] = fs().any(|v| v > 0.0) as u32;
        w[24] = ballot as u32;
        w[25] = (ballot >> 32) as u32;
        w[26] = (l == lane_of[m[0]]) as u32;
        w[27] = 1;
        w[28] = inp.f[m[0]].to_bits();
    }

    let k = kernel(s)?;
    let p = pipeline(rt, &k)?;
    let bufs = [
        upload(rt, &inp.f)?,
        upload(rt, &inp.p)?,
        upload(rt, &inp.u)?,
        upload(rt, &inp.i)?,
        upload(rt, &inp.flag)?,
        upload(rt, &shuffle_index)?,
        upload(rt, &broadcast_lane)?,
        filled(rt, grid * SLOTS, SENTINEL)?,
    ];
    let mut args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
    args.push(Arg::u32(s.early_return.unwrap_or(u32::MAX)));
    threads(rt, &p, &args, [s.grid, 1, 1], [s.tg, 1, 1])?;
    let got: Vec<u32> = download(&bufs[7])?;
    check_eq(
        &format!(
            "scenario {} (grid {}, threadgroups of {})",
            s.name, s.grid, s.tg
        ),
        &got,
        &want,
        |i| {
            let t = i / SLOTS;
            let g = group_of[t];
            let lanes: Vec<u32> = members[g].iter().map(|&x| lane_of[x]).collect();
            format!(
            "thread {t} (lane {}), {}; active lanes of its SIMD group: {lanes:?}; f = {}, u = {:#x}, i = {}",
            lane_of[t],
            SLOT_NAMES[i % SLOTS],
            inp.f[t],
            inp.u[t],
            inp.i[t]
        )
        },
    )
}

fn scenario(name: &'static str, grid: u32, tg: u32) -> Scenario {
    Scenario {
        name,
        grid,
        tg,
        early_return: None,
        preds: vec![],
        in_else: false,
        up: None,
        down: None,
        xor: None,
    }
}

macro_rules! simd_case {
    ($(#[$doc:meta])* $name:ident => $s:expr) => {
        $(#[$doc])*
        pub fn $name(rt: &Runtime) -> CaseResult {
            seeded(stringify!($name), |rng| run_scenario(rt, rng, &$s))
        }
    };
}

simd_case!(
    /// Every SIMD function with all 32 lanes of every SIMD group active.
    simd_full_groups => Scenario { up: Some(5), down: Some(7), xor: Some(13), ..scenario("full", 256, 128) }
);

simd_case!(
    /// Threadgroups of 100 threads (SIMD groups of 32, 32, 32, 4) and a
    /// partial last threadgroup of 30 threads.
    simd_partial_last_group => Scenario { up: Some(3), xor: Some(1), ..scenario("partial last SIMD group", 230, 100) }
);

simd_case!(
    /// Inside `if (lane % 3 == 0)`: every function sees lanes 0, 3, …, 30.
    simd_divergent_lane_mod3 => Scenario {
        preds: vec![(|l, _, _| (l % 3u32).eq(0u32), |l, _, _| l % 3 == 0)],
        up: Some(3),
        down: Some(3),
        ..scenario("lane % 3 == 0", 192, 64)
    }
);

simd_case!(
    /// Inside `if (lane < 8)` (seed 001's second stage): 8 lanes.
    simd_divergent_lane_lt8 => Scenario {
        preds: vec![(|l, _, _| l.lt(8u32), |l, _, _| l < 8)],
        up: Some(2),
        xor: Some(5),
        ..scenario("lane < 8", 128, 128)
    }
);

simd_case!(
    /// Inside `if (lane >= 24)`: the upper 8 lanes (the first active lane is 24).
    simd_divergent_lane_ge24 => Scenario {
        preds: vec![(|l, _, _| l.ge(24u32), |l, _, _| l >= 24)],
        down: Some(3),
        xor: Some(4),
        ..scenario("lane >= 24", 128, 64)
    }
);

simd_case!(
    /// Inside `if (flags[tid] != 0)` with random flags, in a dispatch whose
    /// last threadgroup (12 threads) is partial.
    simd_divergent_data => Scenario {
        preds: vec![(|_, _, f| f.ne(0u32), |_, _, f| f != 0)],
        ..scenario("flags[tid] != 0", 300, 96)
    }
);

simd_case!(
    /// Nested: `if (lane < 20) { if (lane % 2 == 1) { … } else { … } }`.
    simd_nested_divergence => Scenario {
        preds: vec![(|l, _, _| l.lt(20u32), |l, _, _| l < 20), (|l, _, _| (l % 2u32).eq(1u32), |l, _, _| l % 2 == 1)],
        up: Some(2),
        xor: Some(2),
        ..scenario("lane < 20, then lane odd", 160, 160)
    }
);

simd_case!(
    /// In the else branch: `if (lane % 4 == 0) { … } else { simd functions }`.
    simd_in_else_branch => Scenario {
        preds: vec![(|l, _, _| (l % 4u32).eq(0u32), |l, _, _| l % 4 == 0)],
        in_else: true,
        ..scenario("else of lane % 4 == 0", 128, 64)
    }
);

simd_case!(
    /// After `if (tid >= 200) return;` with 64-thread threadgroups: the last
    /// threadgroup keeps 8 lanes of its first SIMD group and none of its second.
    simd_after_early_return => Scenario { early_return: Some(200), up: Some(1), xor: Some(4), ..scenario("after early return", 256, 64) }
);

/// `simd_sum` and `simd_prefix_inclusive_sum` of general f32 values, whose
/// result depends on the order of additions: within `(n - 1)·ε·Σ|x|` of the
/// exact sum over the active lanes (n = 32), under full and `lane < 13` masks.
pub fn simd_sum_f32_tolerance(rt: &Runtime) -> CaseResult {
    seeded("simd_sum_f32_tolerance", |rng| {
        let mut k = KernelBuilder::new("simd_sum_tolerance");
        let x = k.buffer("x", Type::F32, Access::Read);
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let lane = k.let_("lane", thread_index_in_simdgroup());
        let v = k.let_("v", x.get(tid));
        k.store(out.at(tid * 4u32), simd_sum(v));
        k.store(out.at(tid * 4u32 + 1u32), simd_prefix_inclusive_sum(v));
        k.if_(lane.lt(13u32), |k| {
            k.store(out.at(tid * 4u32 + 2u32), simd_sum(v));
            k.store(out.at(tid * 4u32 + 3u32), simd_prefix_exclusive_sum(v));
        });
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 512usize;
        let xs: Vec<f32> = (0..n).map(|_| normal_f32(rng, -10, 10)).collect();
        let xb = upload(rt, &xs)?;
        let ob = filled(rt, n * 4, 0.0f32)?;
        threads(
            rt,
            &p,
            &[Arg::from(&xb), Arg::from(&ob)],
            [n as u32, 1, 1],
            [128, 1, 1],
        )?;
        let got: Vec<f32> = download(&ob)?;
        let eps = f32::EPSILON as f64;
        for t in 0..n {
            let g = t / 32 * 32;
            let lane = t % 32;
            let sum = |lanes: std::ops::Range<usize>| {
                let exact: f64 = lanes.clone().map(|l| xs[g + l] as f64).sum();
                let abs: f64 = lanes.map(|l| (xs[g + l] as f64).abs()).sum();
                (exact, 31.0 * eps * abs)
            };
            let mut checks = vec![
                ("simd_sum", 0, sum(0..32)),
                ("simd_prefix_inclusive_sum", 1, sum(0..lane + 1)),
            ];
            if lane < 13 {
                checks.push(("simd_sum under lane < 13", 2, sum(0..13)));
                checks.push(("simd_prefix_exclusive_sum under lane < 13", 3, sum(0..lane)));
            }
            for (what, slot, (exact, tol)) in checks {
                let g = got[t * 4 + slot] as f64;
                ensure!(
                    (g - exact).abs() <= tol,
                    "{what} at thread {t}: got {g:e}, exact {exact:e}, tolerance {tol:e}"
                );
            }
        }
        Ok(())
    })
}

/// SIMD functions on other types: `simd_sum(float4)`, `simd_max(half)`,
/// `simd_sum(half)` (small integers, exact), `simd_shuffle_xor(float4, 1)`,
/// `simd_broadcast(half, 3)`, `simd_min(int)` under `lane % 2 == 0`.
pub fn simd_other_types(rt: &Runtime) -> CaseResult {
    seeded("simd_other_types", |rng| {
        let float4 = Type::vector(Scalar::F32, 4);
        let mut k = KernelBuilder::new("simd_types");
        let x = k.buffer("x", float4, Access::Read);
        let h = k.buffer("h", Type::F16, Access::Read);
        let o4 = k.buffer("o4", float4, Access::ReadWrite);
        let oh = k.buffer("oh", Type::F16, Access::ReadWrite);
        let oi = k.buffer("oi", Type::I32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let lane = k.let_("lane", thread_index_in_simdgroup());
        let v = k.let_("v", x.get(tid));
        let hv = k.let_("hv", h.get(tid));
        k.store(o4.at(tid * 2u32), simd_sum(v));
        k.store(o4.at(tid * 2u32 + 1u32), simd_shuffle_xor(v, 1u32));
        k.store(oh.at(tid * 3u32), simd_max(hv));
        k.store(oh.at(tid * 3u32 + 1u32), simd_sum(hv));
        k.store(oh.at(tid * 3u32 + 2u32), simd_broadcast(hv, 3u32));
        k.store(oi.at(tid), -1);
        k.if_((lane % 2u32).eq(0u32), |k| {
            k.store(oi.at(tid), simd_min(v.x().cast(Type::I32)))
        });
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;
        let n = 256usize;
        let xs: Vec<f32> = (0..4 * n).map(|_| quarter(rng, 400)).collect();
        let hs: Vec<u16> = (0..n)
            .map(|_| f32_to_f16(rng.gen_range(-30..=30) as f32))
            .collect();
        let xb = rt
            .buffer_from_bytes(
                float4,
                &xs.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>(),
            )
            .ctx("allocating")?;
        let hb = upload_f16(rt, &hs)?;
        let o4b = rt.buffer_of_type(float4, 2 * n).ctx("allocating")?;
        let ohb = upload_f16(rt, &vec![0; 3 * n])?;
        let oib = rt.buffer_zeroed::<i32>(n).ctx("allocating")?;
        threads(
            rt,
            &p,
            &[
                Arg::from(&xb),
                Arg::from(&hb),
                Arg::from(&o4b),
                Arg::from(&ohb),
                Arg::from(&oib),
            ],
            [n as u32, 1, 1],
            [64, 1, 1],
        )?;
        let (mut w4, mut wh, mut wi) = (vec![], vec![], vec![]);
        for t in 0..n {
            let g = t / 32 * 32;
            for c in 0..4 {
                w4.push(
                    (0..32)
                        .map(|l| xs[4 * (g + l) + c])
                        .fold(0.0f32, |a, b| a + b),
                );
            }
            for c in 0..4 {
                w4.push(xs[4 * (t ^ 1) + c]);
            }
            let hf = |l: usize| f16_to_f32(hs[g + l]);
            wh.push(f32_to_f16(
                (0..32).map(hf).fold(f32::NEG_INFINITY, f32::max),
            ));
            wh.push(f32_to_f16((0..32).map(hf).fold(0.0f32, |a, b| a + b)));
            wh.push(hs[g + 3]);
            wi.push(if t % 2 == 0 {
                (0..16)
                    .map(|l| xs[4 * (g + 2 * l)] as i32)
                    .min()
                    .unwrap_or(0)
            } else {
                -1
            });
        }
        check_f32_exact(
            "float4 simd_sum / simd_shuffle_xor",
            &download::<f32>(&o4b)?,
            &w4,
            |i| {
                format!(
                    "thread {}, {} component {}",
                    i / 8,
                    ["simd_sum", "simd_shuffle_xor(v, 1)"][i / 4 % 2],
                    i % 4
                )
            },
        )?;
        check_eq("half simd functions", &download_u16_bits(&ohb)?, &wh, |i| {
            format!(
                "thread {}, {}",
                i / 3,
                [
                    "simd_max(half)",
                    "simd_sum(half)",
                    "simd_broadcast(half, 3)"
                ][i % 3]
            )
        })?;
        check_eq(
            "simd_min(int) under lane % 2 == 0",
            &download::<i32>(&oib)?,
            &wi,
            |i| format!("thread {i}"),
        )
    })
}
