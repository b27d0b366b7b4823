//! Runs a dispatch: threadgroups in parallel (rayon), and within each
//! threadgroup its SIMD groups in turn, each until the next threadgroup
//! barrier. A barrier releases only when every thread of the threadgroup
//! waits at that same barrier; anything else is reported as an error naming
//! the threads involved — the simulator never hangs.

use crate::exec::{Env, Fault, SimdGroup, Stop, TgPlace, LANES};
use crate::memory::{Words, POISON_WORD};
use enigma_backend::{DispatchGeometry, DispatchMode, RuntimeError};
use enigma_ir::Kernel;
use rayon::prelude::*;

/// Reusable per-worker state: the SIMD groups and the threadgroup memory.
struct Scratch {
    simdgroups: Vec<SimdGroup>,
    tg_mem: Words,
}

/// Runs every threadgroup of the dispatch; the error of the lowest-numbered
/// failing threadgroup is returned, so failures are reproducible.
pub fn run_dispatch(kernel: &Kernel, env: &Env<'_>, geometry: &DispatchGeometry) -> Result<(), RuntimeError> {
    let [nx, ny, nz] = geometry.threadgroups;
    let total = nx as u64 * ny as u64 * nz as u64;
    let full = geometry.threads_per_threadgroup;
    let tg_threads = full[0] * full[1] * full[2];
    let simdgroups = tg_threads.div_ceil(LANES as u32) as usize;
    let program = env.program;
    let place_of = |linear: u64| {
        let position = [(linear % nx as u64) as u32, ((linear / nx as u64) % ny as u64) as u32, (linear / (nx as u64 * ny as u64)) as u32];
        let size = match geometry.mode {
            DispatchMode::Threads => [0, 1, 2].map(|a| full[a].min(geometry.grid[a] - position[a] * full[a])),
            DispatchMode::Threadgroups => full,
        };
        TgPlace { position, size }
    };
    let error = (0..total)
        .into_par_iter()
        .map_init(
            || Scratch {
                simdgroups: (0..simdgroups).map(|_| SimdGroup::new(program.num_regs)).collect(),
                tg_mem: Words::new(program.tg_words * 4, POISON_WORD),
            },
            |scratch, linear| run_threadgroup(env, place_of(linear), scratch).err(),
        )
        .find_map_first(|e| e);
    match error {
        None => Ok(()),
        Some(message) => Err(RuntimeError::Execution { kernel: kernel.name.clone(), message }),
    }
}

fn run_threadgroup(env: &Env<'_>, tg: TgPlace, scratch: &mut Scratch) -> Result<(), String> {
    let n = tg.threads().div_ceil(LANES as u32) as usize;
    scratch.tg_mem.fill(POISON_WORD);
    let sgs = &mut scratch.simdgroups[..n];
    for (i, sg) in sgs.iter_mut().enumerate() {
        sg.reset(env, &tg, i as u32);
    }
    let mut stops = vec![Stop::Done; n];
    let mut running: Vec<bool> = vec![true; n];
    loop {
        for (i, sg) in sgs.iter_mut().enumerate() {
            if running[i] {
                stops[i] = sg.run(env, &scratch.tg_mem).map_err(|f| describe_fault(env, &tg, sg, &f))?;
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
        if waiting.is_empty() {
            return Ok(());
        }
        let (_, pc, _) = waiting[0];
        let site = site(env, pc);
        if let Some(&(_, other_pc, _)) = waiting.iter().find(|(_, p, _)| *p != pc) {
            return Err(format!(
                "threads of threadgroup {} wait at different threadgroup barriers: {} and {}; every thread must reach the same barrier",
                fmt3(tg.position),
                site,
                self::site(env, other_pc)
            ));
        }
        let arrived: u32 = waiting.iter().map(|(_, _, a)| a.count_ones()).sum();
        if arrived != tg.threads() {
            let missing = sgs
                .iter()
                .enumerate()
                .find_map(|(i, sg)| {
                    let at_barrier = match stops[i] {
                        Stop::Barrier { active, .. } => active,
                        Stop::Done => 0,
                    };
                    let absent = sg.launched & !at_barrier;
                    (absent != 0).then(|| (i, absent.trailing_zeros(), sg.exited & (1 << absent.trailing_zeros()) != 0))
                })
                .map(|(i, lane, returned)| {
                    let linear = i as u32 * LANES as u32 + lane;
                    format!(
                        "; e.g. thread {} (SIMD group {i}, lane {lane}) {}",
                        fmt3(tg.grid_position(linear, env.threadgroup_size)),
                        if returned { "had returned early" } else { "was in a branch that skipped it" }
                    )
                })
                .unwrap_or_default();
            return Err(format!(
                "threadgroup_barrier at {site} reached by {arrived} of the {} threads of threadgroup {}{missing}; a barrier must be reached by every thread of the threadgroup",
                tg.threads(),
                fmt3(tg.position),
            ));
        }
        for (i, s) in stops.iter().enumerate() {
            running[i] = matches!(s, Stop::Barrier { .. });
        }
    }
}

fn fmt3(v: [u32; 3]) -> String {
    format!("({},{},{})", v[0], v[1], v[2])
}

fn site(env: &Env<'_>, pc: u32) -> String {
    let program = env.program;
    program.sites.get(program.site_of[pc as usize] as usize).map(|s| s.to_string()).unwrap_or_default()
}

fn describe_fault(env: &Env<'_>, tg: &TgPlace, sg: &SimdGroup, fault: &Fault) -> String {
    let linear = sg.index * LANES as u32 + fault.lane;
    format!(
        "{} by thread {} (threadgroup {}, SIMD group {}, lane {}) at {}",
        fault.message,
        fmt3(tg.grid_position(linear, env.threadgroup_size)),
        fmt3(tg.position),
        sg.index,
        fault.lane,
        site(env, fault.pc)
    )
}
