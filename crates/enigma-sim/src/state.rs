//! The simulator's state while a dispatch runs: what every SIMD group reads
//! ([`Env`], with the [`Limits`] that stop a dispatch), one SIMD group's
//! lanes, registers and control frames ([`SimdGroup`], run by `exec`), how
//! it stops ([`Stop`], [`Fault`]), and the view of a memory through which
//! the interpreter and the cooperative operations read and write it
//! ([`memory`]).

use crate::geometry::{Lanes, TgPlace, LANES};
use crate::memory::Words;
use crate::print::PrintLog;
use crate::program::{MemRef, Program};
use crate::sanitizer::DispatchTracker;
use enigma_backend::{StopReason, TextureDesc};
use enigma_ir::Scalar;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// Per-dispatch data every SIMD group reads.
pub struct Env<'a> {
    pub program: &'a Program,
    /// Device buffers and textures' texels by parameter index (`None` for
    /// by-value parameters), with their length in bytes.
    pub buffers: Vec<Option<(&'a Words, usize)>>,
    /// What each texture parameter's texture is (`None` for the others).
    pub textures: Vec<Option<TextureDesc>>,
    /// By-value parameter bits per component, by parameter index.
    pub values: Vec<[u64; 4]>,
    pub threads_per_grid: [u32; 3],
    pub threadgroups_per_grid: [u32; 3],
    /// The threadgroup size of the dispatch (edge threadgroups may be smaller).
    pub threadgroup_size: [u32; 3],
    /// Dispatch-wide sanitizer state, in sanitizer mode.
    pub tracker: Option<&'a DispatchTracker>,
    /// When the dispatch must stop: step budget, deadline, cancel flag.
    pub limits: &'a Limits,
    /// Where `print` lines go; `None` in the runs whose lines are not
    /// shown (the sanitizer's later schedules).
    pub print_log: Option<&'a PrintLog>,
}

/// The ways out of a dispatch that does not end by itself, checked at
/// every loop back-edge (the only place a kernel can run forever).
#[derive(Debug, Default)]
pub struct Limits {
    /// Loop iterations one SIMD group may run.
    pub max_loop_iterations: Option<u64>,
    /// The wall-clock deadline, with the timeout it came from.
    pub deadline: Option<(Instant, f64)>,
    /// Raised from outside (Ctrl-C) to stop the dispatch.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Limits {
    /// Why the dispatch must stop now, if it must (the budget aside).
    pub fn stop_now(&self) -> Option<StopReason> {
        if self.cancel.as_ref().is_some_and(|c| c.load(Relaxed)) {
            return Some(StopReason::Interrupted);
        }
        match self.deadline {
            Some((deadline, seconds)) if Instant::now() >= deadline => Some(StopReason::Timeout { seconds }),
            _ => None,
        }
    }
}

impl<'a> Env<'a> {
    /// The same dispatch running `program` (the kernel lowered with other
    /// cooperative-tensor layouts).
    pub fn with_program<'s>(&'s self, program: &'s Program) -> Env<'s>
    where
        'a: 's,
    {
        Env { program, ..self.with_tracker(self.tracker) }
    }

    /// The same dispatch, observed by a sanitizer tracker.
    pub fn with_tracker<'s>(&self, tracker: Option<&'s DispatchTracker>) -> Env<'s>
    where
        'a: 's,
    {
        Env {
            program: self.program,
            buffers: self.buffers.clone(),
            textures: self.textures.clone(),
            values: self.values.clone(),
            threads_per_grid: self.threads_per_grid,
            threadgroups_per_grid: self.threadgroups_per_grid,
            threadgroup_size: self.threadgroup_size,
            tracker,
            limits: self.limits,
            print_log: self.print_log,
        }
    }

    /// The same dispatch, its `print` lines not shown.
    pub fn quiet(&self) -> Env<'a> {
        Env { print_log: None, ..self.with_tracker(self.tracker) }
    }
}

/// A runtime error inside a SIMD group: what, at which instruction, which lane.
#[derive(Clone, Debug)]
pub struct Fault {
    pub pc: u32,
    pub lane: u32,
    pub message: String,
    /// Set when the fault is a stop (budget, timeout, interrupt) rather
    /// than an error of the kernel.
    pub stop: Option<StopReason>,
}

/// A control-flow frame of the interpreter's mask stack (see `exec`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Frame {
    If { saved: u32, taken: u32, skip_pc: u32 },
    Loop { saved: u32, broken: u32, continued: u32, cont_pc: u32, exit_pc: u32 },
}

/// Why a SIMD group stopped running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// At the `threadgroup_barrier` at `pc`, with these lanes active.
    Barrier { pc: u32, active: u32 },
    Done,
}

/// One SIMD group's state.
#[derive(Debug)]
pub struct SimdGroup {
    pub regs: Vec<Lanes>,
    pub index: u32,
    /// Lanes that exist (the last SIMD group of a threadgroup may be partial).
    pub launched: u32,
    pub active: u32,
    pub exited: u32,
    /// The `return` each exited lane took.
    pub returned_at: [u32; LANES],
    pub pc: u32,
    pub(crate) frames: Vec<Frame>,
    /// Loop back-edges taken since [`SimdGroup::reset`].
    pub(crate) iterations: u64,
    /// Per element of the per-thread arrays, the lanes that have written it.
    pub(crate) thread_written: Vec<u32>,
    /// The threadgroup this SIMD group is part of.
    pub(crate) place: TgPlace,
    /// Lines `print` made since [`SimdGroup::reset`], tagged, and how many
    /// more it made past [`enigma_ir::limits::MAX_PRINTED_LINES`].
    pub printed: Vec<String>,
    pub unprinted: u64,
}

#[inline(always)]
pub(crate) fn memory<'a>(env: &'a Env<'_>, tg_mem: &'a Words, mem: MemRef) -> (MemView<'a>, usize) {
    match mem {
        MemRef::Buffer(p) | MemRef::Texture(p) => {
            let (w, len) = env.buffers[p as usize].expect("validated and checked: loads, stores and texture accesses have memory");
            (MemView { words: w, base: 0 }, len)
        }
        MemRef::Threadgroup(t) => {
            let base = env.program.tg_offsets_words[t as usize] * 4;
            (MemView { words: tg_mem, base }, env.program.tg_lens_bytes[t as usize])
        }
        // Per-thread arrays live in registers (`ThreadLoad`, `ThreadStore`);
        // validation gives them to no other access. Seen as memory they are
        // empty, so an access through this path is out of bounds, not a panic.
        MemRef::Thread(_) => (MemView { words: tg_mem, base: 0 }, 0),
    }
}

/// A memory seen from a base byte offset.
#[derive(Clone, Copy)]
pub(crate) struct MemView<'a> {
    pub(crate) words: &'a Words,
    pub(crate) base: usize,
}

impl MemView<'_> {
    #[inline(always)]
    pub(crate) fn read(&self, offset: usize, ty: Scalar) -> u64 {
        self.words.read(self.base + offset, ty)
    }
    #[inline(always)]
    pub(crate) fn write(&self, offset: usize, ty: Scalar, v: u64) {
        self.words.write(self.base + offset, ty, v)
    }
    #[inline(always)]
    pub(crate) fn word(&self, offset: usize) -> &std::sync::atomic::AtomicU32 {
        self.words.word(self.base + offset)
    }
}
