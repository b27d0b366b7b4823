//! Runs a dispatch: threadgroups in parallel (rayon), and within each
//! threadgroup its SIMD groups in turn, each until the next threadgroup
//! barrier. A barrier releases only when every thread of the threadgroup
//! waits at that same barrier; anything else is an error naming the threads
//! involved (a finding, in sanitizer mode) — the simulator never hangs.
//!
//! In sanitizer mode the SIMD groups of each threadgroup run in a different,
//! seeded order in each schedule (schedule 0 in index order, 1 reversed, then
//! shuffled), and results that differ between schedules are reported.

use crate::geometry::{TgPlace, LANES};
use crate::state::{Env, Fault, SimdGroup, Stop};
use crate::memory::{Words, POISON_WORD};
use crate::program::Inst;
use crate::sanitizer::{TgTracker, Who};
use crate::tile_copy::TileBarriers;
use enigma_backend::{DispatchGeometry, DispatchMode, RuntimeError, StopReason};
use enigma_ir::Kernel;
use rayon::prelude::*;

/// Reusable per-worker state: the SIMD groups, threadgroup memory and, in
/// sanitizer mode, the threadgroup's shadow state.
struct Scratch {
    simdgroups: Vec<SimdGroup>,
    tg_mem: Words,
    tracker: Option<TgTracker>,
    tiles: TileBarriers,
}

/// Maps a threadgroup's linear index to its place in the grid and its size.
pub fn place_fn(geometry: &DispatchGeometry) -> impl Fn(u64) -> TgPlace + Sync + '_ {
    let [nx, ny, _] = geometry.threadgroups;
    let full = geometry.threads_per_threadgroup;
    move |linear: u64| {
        let position = [(linear % nx as u64) as u32, ((linear / nx as u64) % ny as u64) as u32, (linear / (nx as u64 * ny as u64)) as u32];
        let size = match geometry.mode {
            DispatchMode::Threads => [0, 1, 2].map(|a| full[a].min(geometry.grid[a] - position[a] * full[a])),
            DispatchMode::Threadgroups => full,
        };
        TgPlace { position, size }
    }
}

/// Runs every threadgroup of the dispatch with SIMD-group schedule
/// `schedule`; the error of the lowest-numbered failing threadgroup is
/// returned, so failures are reproducible.
pub fn run_dispatch(kernel: &Kernel, env: &Env<'_>, geometry: &DispatchGeometry, schedule: u32) -> Result<(), RuntimeError> {
    let [nx, ny, nz] = geometry.threadgroups;
    let total = nx as u64 * ny as u64 * nz as u64;
    let full = geometry.threads_per_threadgroup;
    let simdgroups = (full[0] * full[1] * full[2]).div_ceil(LANES as u32) as usize;
    let program = env.program;
    let place_of = place_fn(geometry);
    let error = (0..total)
        .into_par_iter()
        .map_init(
            || Scratch {
                simdgroups: (0..simdgroups).map(|_| SimdGroup::new(program.num_regs, program.thread_cells)).collect(),
                tg_mem: Words::new(program.tg_words * 4, POISON_WORD),
                tracker: env.tracker.map(|_| TgTracker::new(kernel)),
                tiles: TileBarriers::default(),
            },
            |scratch, linear| {
                let place = place_of(linear);
                if let Some(reason) = env.limits.stop_now() {
                    return Some(Failure::Stopped { reason, location: format!("the start of threadgroup {}", fmt3(place.position)) });
                }
                let result = run_threadgroup(env, place, linear, schedule, scratch);
                if let Some(log) = env.print_log {
                    let sgs = &mut scratch.simdgroups[..place.threads().div_ceil(LANES as u32) as usize];
                    let dropped = sgs.iter().map(|sg| sg.unprinted).sum();
                    log.add(linear, sgs.iter_mut().flat_map(|sg| std::mem::take(&mut sg.printed)).collect(), dropped);
                }
                if let (Some(dispatch), Some(t)) = (env.tracker, scratch.tracker.as_mut()) {
                    dispatch.collect(kernel, program, &place, linear, full, &place_of, &mut t.raw);
                }
                result.err()
            },
        )
        .find_map_first(|e| e);
    match error {
        None => Ok(()),
        Some(Failure::Error(message)) => Err(RuntimeError::Execution { kernel: kernel.name.clone(), message }),
        Some(Failure::Stopped { reason, location }) => Err(RuntimeError::Stopped { kernel: kernel.name.clone(), location, reason }),
    }
}

/// Why a threadgroup did not finish.
enum Failure {
    /// An error of the kernel, described.
    Error(String),
    /// The dispatch was stopped (budget, timeout, interrupt) at `location`.
    Stopped { reason: StopReason, location: String },
}

/// The order in which SIMD groups run in one phase (between two barriers).
fn order(n: usize, schedule: u32, linear: u64, phase: u32) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    match schedule {
        0 => {}
        1 => v.reverse(),
        s => {
            let mut state = (s as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ linear.wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ phase as u64;
            for i in (1..n).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                v.swap(i, (state % (i as u64 + 1)) as usize);
            }
        }
    }
    v
}

fn run_threadgroup(env: &Env<'_>, tg: TgPlace, linear: u64, schedule: u32, scratch: &mut Scratch) -> Result<(), Failure> {
    let n = tg.threads().div_ceil(LANES as u32) as usize;
    scratch.tg_mem.fill(POISON_WORD);
    scratch.tiles.reset();
    if let Some(t) = scratch.tracker.as_mut() {
        t.reset(linear, n);
    }
    let sgs = &mut scratch.simdgroups[..n];
    for (i, sg) in sgs.iter_mut().enumerate() {
        sg.reset(env, &tg, i as u32);
    }
    let mut stops = vec![Stop::Done; n];
    let mut running: Vec<bool> = vec![true; n];
    for phase in 0u32.. {
        for i in order(n, schedule, linear, phase) {
            if running[i] {
                let sg = &mut sgs[i];
                stops[i] = sg.run(env, &scratch.tg_mem, scratch.tracker.as_mut()).map_err(|f| describe_fault(env, &tg, sg, &f))?;
            }
        }
        let waiting: Vec<(usize, u32, u32)> = stops
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Stop::Barrier { pc, active } => Some((i, *pc, *active)),
                Stop::Done => None,
            })
            .collect();
        let Some(&(first_sg, pc, first_active)) = waiting.first() else {
            if let Some((barrier, issuer)) = scratch.tiles.unwaited() {
                return Err(Failure::Error(format!(
                    "tile_copy on barrier {barrier} at {} never waited for: threadgroup {} ended with it in flight (on a GPU the copy could still write threadgroup memory given to another threadgroup); wait for it with tile_wait({barrier})",
                    site(env, issuer.pc),
                    fmt3(tg.position)
                )));
            }
            return Ok(());
        };
        let site = site(env, pc);
        let collective = match env.program.code.get(pc as usize) {
            Some(Inst::Collective { op, .. }) => Some(op.clone()),
            _ => None,
        };
        let what = collective.as_ref().map_or("threadgroup_barrier", |op| op.name());
        let arrived: u32 = waiting.iter().map(|(_, _, a)| a.count_ones()).sum();
        let other_barrier = waiting.iter().find(|(_, p, _)| *p != pc);
        if other_barrier.is_some() || arrived != tg.threads() {
            let who = Who { simdgroup: first_sg as u32, lane: first_active.trailing_zeros(), pc };
            // A thread that did not arrive: returned early, or in a branch that skipped the barrier.
            let absent = sgs.iter().enumerate().find_map(|(i, sg)| {
                let at_barrier = match stops[i] {
                    Stop::Barrier { active, pc: p } if p == pc => active,
                    _ => 0,
                };
                let missing = sg.launched & !at_barrier;
                (missing != 0).then(|| {
                    let lane = missing.trailing_zeros();
                    (Who { simdgroup: i as u32, lane, pc: sg.parked_at(lane) }, sg.exited & (1 << lane) != 0)
                })
            });
            if let Some(t) = scratch.tracker.as_mut() {
                t.divergent_barrier(who, absent.map(|(w, _)| w));
                return Ok(());
            }
            if let Some(&(_, other_pc, _)) = other_barrier {
                return Err(Failure::Error(format!(
                    "threads of threadgroup {} wait at different threadgroup barriers or cooperative operations: {} and {}; every thread must reach the same one",
                    fmt3(tg.position),
                    site,
                    self::site(env, other_pc)
                )));
            }
            let example = absent
                .map(|(w, returned)| {
                    format!(
                        "; e.g. thread {} (SIMD group {}, lane {}) {}",
                        fmt3(tg.grid_position(w.thread(), env.threadgroup_size)),
                        w.simdgroup,
                        w.lane,
                        if returned { "had returned early" } else { "was in a branch that skipped it" }
                    )
                })
                .unwrap_or_default();
            return Err(Failure::Error(format!(
                "{what} at {site} reached by {arrived} of the {} threads of threadgroup {}{example}; it must be reached by every thread of the threadgroup",
                tg.threads(),
                fmt3(tg.position),
            )));
        }
        if let Some(op) = collective {
            let mut ctx = crate::cooperative::Ctx { env, tg_mem: &scratch.tg_mem, pc, san: scratch.tracker.as_mut(), overlapped: false, tiles: Some(&mut scratch.tiles) };
            op.run(&mut ctx, sgs).map_err(|(i, f)| describe_fault(env, &tg, &sgs[i], &f))?;
        } else {
            scratch.tiles.barrier();
            if let Some(t) = scratch.tracker.as_mut() {
                t.threadgroup_barrier();
                if matches!(env.program.code.get(pc as usize), Some(Inst::Barrier { device: true, .. })) {
                    t.device_epoch += 1;
                    for e in t.simd_device_epochs.iter_mut() {
                        *e += 1;
                    }
                }
                if matches!(env.program.code.get(pc as usize), Some(Inst::Barrier { texture: true, .. })) {
                    t.texture_epoch += 1;
                    for e in t.simd_texture_epochs.iter_mut() {
                        *e += 1;
                    }
                }
            }
        }
        for (i, s) in stops.iter().enumerate() {
            running[i] = matches!(s, Stop::Barrier { .. });
        }
    }
    Ok(())
}

fn fmt3(v: [u32; 3]) -> String {
    format!("({},{},{})", v[0], v[1], v[2])
}

fn site(env: &Env<'_>, pc: u32) -> String {
    let program = env.program;
    program.sites.get(program.site_of[pc as usize] as usize).map(|s| s.to_string()).unwrap_or_default()
}

fn describe_fault(env: &Env<'_>, tg: &TgPlace, sg: &SimdGroup, fault: &Fault) -> Failure {
    if let Some(reason) = &fault.stop {
        return Failure::Stopped { reason: reason.clone(), location: format!("the loop at {}", site(env, fault.pc)) };
    }
    let linear = sg.index * LANES as u32 + fault.lane;
    Failure::Error(format!(
        "{} by thread {} (threadgroup {}, SIMD group {}, lane {}) at {}",
        fault.message,
        fmt3(tg.grid_position(linear, env.threadgroup_size)),
        fmt3(tg.position),
        sg.index,
        fault.lane,
        site(env, fault.pc)
    ))
}

