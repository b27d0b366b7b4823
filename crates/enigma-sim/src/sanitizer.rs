//! The sanitizer: shadow state for threadgroup and device memory that turns
//! the simulator's exact execution into bug reports.
//!
//! * Threadgroup memory: each element remembers its last write (SIMD group,
//!   lane, instruction, barrier epoch, SIMD-barrier epoch) and its readers in
//!   the current epoch. Two accesses by different SIMD groups in one epoch
//!   (one writing) are a threadgroup race; by different lanes of one SIMD
//!   group with no `simdgroup_barrier` between, a SIMD-group race. A read of
//!   an element never written in this threadgroup is an uninitialised read.
//! * Device memory: each element remembers the threadgroup that wrote it and
//!   the one(s) that read it; two threadgroups of one dispatch writing one
//!   element, or one reading what another writes, is a device race — there is
//!   no order between threadgroups. Atomic accesses are never races.
//! * Coverage: elements of written buffers that no thread wrote.
//!
//! Findings are grouped by (kind, variable, both instructions) so one bug
//! yields one finding with a count.

use crate::exec::{TgPlace, LANES};
use crate::memory::try_filled;
use crate::program::{MemRef, Program};
use enigma_backend::{Finding, FindingKind, RuntimeError, Severity, ThreadRef};
use enigma_ir::{Kernel, ParamKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// How a lane touches memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Read,
    Write,
    Atomic,
}

/// A thread inside the threadgroup being run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Who {
    pub simdgroup: u32,
    pub lane: u32,
    pub pc: u32,
}

/// The other side of a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Other {
    Thread(Who),
    /// A thread of another threadgroup: the threadgroup's linear index, the
    /// thread's index in it, and the instruction.
    Threadgroup { linear: u64, thread: u32, pc: u32 },
}

/// A finding before it is named and grouped.
#[derive(Clone, Copy, Debug)]
pub struct Raw {
    pub kind: FindingKind,
    pub mem: Option<MemRef>,
    pub index: Option<u64>,
    pub who: Who,
    pub other: Option<Other>,
}

#[derive(Clone, Copy, Default)]
struct Cell {
    /// Epochs start at 1; 0 means "never".
    w_epoch: u32,
    w_simd_epoch: u32,
    w_sg: u32,
    w_lane: u32,
    w_pc: u32,
    written: bool,
    r_epoch: u32,
    r_simd_epoch: u32,
    r_sg: u32,
    r_lane: u32,
    r_pc: u32,
    r_other_sg: bool,
    r_other_lane: bool,
}

/// Per-threadgroup shadow state, reused across threadgroups by a worker.
#[derive(Debug)]
pub struct TgTracker {
    cells: Vec<Cell>,
    /// First cell of each threadgroup array.
    offsets: Vec<usize>,
    /// Barrier epoch of the threadgroup (incremented at each threadgroup barrier).
    pub epoch: u32,
    /// SIMD-barrier epoch of each SIMD group.
    pub simd_epochs: Vec<u32>,
    pub raw: Vec<Raw>,
    /// Linear index of the threadgroup being run.
    pub linear: u64,
}

impl std::fmt::Debug for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cell(w{}@{}, r{}@{})", self.w_sg, self.w_epoch, self.r_sg, self.r_epoch)
    }
}

impl TgTracker {
    pub fn new(kernel: &Kernel) -> TgTracker {
        let mut offsets = vec![];
        let mut n = 0;
        for arr in &kernel.threadgroup_arrays {
            offsets.push(n);
            n += arr.len as usize;
        }
        TgTracker { cells: vec![Cell::default(); n], offsets, epoch: 1, simd_epochs: vec![], raw: vec![], linear: 0 }
    }

    pub fn reset(&mut self, linear: u64, simdgroups: usize) {
        self.cells.fill(Cell::default());
        self.epoch = 1;
        self.simd_epochs.clear();
        self.simd_epochs.resize(simdgroups, 1);
        self.linear = linear;
    }

    fn report(&mut self, kind: FindingKind, mem: MemRef, index: usize, who: Who, other: Option<Other>) {
        self.raw.push(Raw { kind, mem: Some(mem), index: Some(index as u64), who, other });
    }

    /// Records an access by one lane to threadgroup array `array`.
    pub fn threadgroup_access(&mut self, array: u32, index: usize, who: Who, kind: AccessKind) {
        let mem = MemRef::Threadgroup(array);
        let (epoch, simd_epoch) = (self.epoch, self.simd_epochs[who.simdgroup as usize]);
        let cell_index = self.offsets[array as usize] + index;
        let c = self.cells[cell_index];
        let writer = Who { simdgroup: c.w_sg, lane: c.w_lane, pc: c.w_pc };
        let reader = Who { simdgroup: c.r_sg, lane: c.r_lane, pc: c.r_pc };
        let same_epoch_write = c.written && c.w_epoch == epoch;
        let same_epoch_read = c.r_epoch == epoch;
        match kind {
            AccessKind::Read => {
                if !c.written {
                    self.report(FindingKind::UninitializedRead, mem, index, who, None);
                } else if same_epoch_write && c.w_sg != who.simdgroup {
                    self.report(FindingKind::ThreadgroupRace, mem, index, who, Some(Other::Thread(writer)));
                } else if same_epoch_write && c.w_lane != who.lane && c.w_simd_epoch == simd_epoch {
                    self.report(FindingKind::SimdgroupRace, mem, index, who, Some(Other::Thread(writer)));
                }
                let cell = &mut self.cells[cell_index];
                if cell.r_epoch != epoch {
                    *cell = Cell {
                        r_epoch: epoch,
                        r_simd_epoch: simd_epoch,
                        r_sg: who.simdgroup,
                        r_lane: who.lane,
                        r_pc: who.pc,
                        r_other_sg: false,
                        r_other_lane: false,
                        ..*cell
                    };
                } else {
                    cell.r_other_sg |= cell.r_sg != who.simdgroup;
                    cell.r_other_lane |= cell.r_lane != who.lane || cell.r_simd_epoch != simd_epoch;
                }
            }
            AccessKind::Write | AccessKind::Atomic => {
                if kind == AccessKind::Write {
                    if same_epoch_write && c.w_sg != who.simdgroup {
                        self.report(FindingKind::ThreadgroupRace, mem, index, who, Some(Other::Thread(writer)));
                    } else if same_epoch_read && (c.r_sg != who.simdgroup || c.r_other_sg) {
                        self.report(FindingKind::ThreadgroupRace, mem, index, who, Some(Other::Thread(reader)));
                    } else if same_epoch_write && c.w_lane != who.lane && c.w_simd_epoch == simd_epoch {
                        self.report(FindingKind::SimdgroupRace, mem, index, who, Some(Other::Thread(writer)));
                    } else if same_epoch_read
                        && c.r_simd_epoch == simd_epoch
                        && (c.r_lane != who.lane || c.r_other_lane)
                        && c.r_pc != who.pc
                    {
                        self.report(FindingKind::SimdgroupRace, mem, index, who, Some(Other::Thread(reader)));
                    }
                }
                let cell = &mut self.cells[cell_index];
                cell.written = true;
                cell.w_epoch = epoch;
                cell.w_simd_epoch = simd_epoch;
                cell.w_sg = who.simdgroup;
                cell.w_lane = who.lane;
                cell.w_pc = who.pc;
            }
        }
    }

    pub fn out_of_bounds(&mut self, mem: MemRef, raw_index: u64, who: Who) {
        self.raw.push(Raw { kind: FindingKind::OutOfBounds, mem: Some(mem), index: Some(raw_index), who, other: None });
    }

    pub fn inactive_lane(&mut self, who: Who, source_lane: u32) {
        let other = Who { lane: source_lane, ..who };
        self.raw.push(Raw { kind: FindingKind::InactiveLaneRead, mem: None, index: None, who, other: Some(Other::Thread(other)) });
    }

    pub fn divergent_barrier(&mut self, who: Who, other: Option<Who>) {
        self.raw.push(Raw {
            kind: FindingKind::DivergentBarrier,
            mem: None,
            index: None,
            who,
            other: other.map(Other::Thread),
        });
    }
}

/// Shadow of one device buffer: per element, the last write, the first
/// read, and the first read by another threadgroup than that one — each an
/// [`Access`] packed into a word, 0 for none. (A second writing threadgroup
/// is a race, reported when it writes.)
#[derive(Debug)]
struct DeviceShadow {
    writer: Box<[AtomicU64]>,
    reader: Box<[AtomicU64]>,
    reader2: Box<[AtomicU64]>,
}

/// An access packed into a `u64`: the threadgroup's linear index + 1 in the
/// high 32 bits, the thread's index in its threadgroup (< 1024) in the next
/// 10, the instruction in the low 22.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Access(u64);

const PC_BITS: u32 = 22;

impl Access {
    fn new(linear: u64, thread: u32, pc: u32) -> Access {
        Access((linear + 1) << 32 | ((thread as u64 & 0x3ff) << PC_BITS) | (pc as u64 & ((1 << PC_BITS) - 1)))
    }
    /// The threadgroup's linear index + 1 (0: no access).
    fn group(self) -> u64 {
        self.0 >> 32
    }
    fn other(self) -> Other {
        Other::Threadgroup { linear: self.group() - 1, thread: (self.0 >> PC_BITS) as u32 & 0x3ff, pc: self.0 as u32 & ((1 << PC_BITS) - 1) }
    }
}

type GroupKey = (FindingKind, Option<MemRef>, u32, Option<u32>);

/// Dispatch-wide sanitizer state, shared by the workers.
#[derive(Debug)]
pub struct DispatchTracker {
    device: Vec<Option<DeviceShadow>>,
    /// Findings by (kind, memory, instruction, other instruction), each with
    /// the linear index of the threadgroup whose occurrence it shows.
    grouped: Mutex<HashMap<GroupKey, (u64, Finding)>>,
}

impl DispatchTracker {
    /// Shadows for every buffer argument, sized in elements.
    /// The shadows take 24 bytes per element of buffers the user sized, so
    /// failing to allocate them is an error, not an abort.
    pub fn new(kernel: &Kernel, buffer_bytes: &[Option<usize>]) -> Result<DispatchTracker, RuntimeError> {
        let device = kernel
            .params
            .iter()
            .zip(buffer_bytes)
            .map(|(p, bytes)| match (p.kind, bytes) {
                (ParamKind::Buffer { elem, .. }, Some(bytes)) => {
                    let n = bytes / elem.size_bytes() as usize;
                    let zeros = || {
                        try_filled(n, || AtomicU64::new(0), n as u128 * 8, "the sanitizer's shadow of a buffer").map(Vec::into_boxed_slice)
                    };
                    Ok(Some(DeviceShadow { writer: zeros()?, reader: zeros()?, reader2: zeros()? }))
                }
                _ => Ok(None),
            })
            .collect::<Result<_, RuntimeError>>()?;
        Ok(DispatchTracker { device, grouped: Mutex::new(HashMap::new()) })
    }

    /// Records a device access by thread `thread` of threadgroup `linear`;
    /// returns the access of another threadgroup it races with. The shadow
    /// words change through atomic read-modify-writes where two threadgroups
    /// running at once could otherwise hide each other's access.
    pub fn device_access(&self, param: u32, index: usize, linear: u64, thread: u32, pc: u32, kind: AccessKind) -> Option<Other> {
        if kind == AccessKind::Atomic {
            return None;
        }
        let shadow = self.device[param as usize].as_ref()?;
        let me = Access::new(linear, thread, pc);
        let foreign = |a: Access| a.group() != 0 && a.group() != me.group();
        match kind {
            AccessKind::Read => {
                let first = Access(shadow.reader[index].load(Relaxed));
                let first = if first.group() == 0 {
                    match shadow.reader[index].compare_exchange(0, me.0, Relaxed, Relaxed) {
                        Ok(_) => me,
                        Err(now) => Access(now),
                    }
                } else {
                    first
                };
                if foreign(first) && shadow.reader2[index].load(Relaxed) == 0 {
                    let _ = shadow.reader2[index].compare_exchange(0, me.0, Relaxed, Relaxed);
                }
                let w = Access(shadow.writer[index].load(Relaxed));
                foreign(w).then(|| w.other())
            }
            _ => {
                let w = Access(shadow.writer[index].swap(me.0, Relaxed));
                if foreign(w) {
                    return Some(w.other());
                }
                [&shadow.reader, &shadow.reader2].into_iter().map(|r| Access(r[index].load(Relaxed))).find(|r| foreign(*r)).map(Access::other)
            }
        }
    }

    /// Ranges of elements of buffer `param` that no thread wrote (at most `limit`).
    pub fn unwritten_ranges(&self, param: u32, limit: usize) -> (u64, Vec<(u64, u64)>) {
        let Some(shadow) = self.device[param as usize].as_ref() else { return (0, vec![]) };
        let mut ranges = vec![];
        let mut missing = 0u64;
        let mut start: Option<u64> = None;
        for (i, w) in shadow.writer.iter().enumerate() {
            let unwritten = w.load(Relaxed) >> 32 == 0;
            missing += unwritten as u64;
            match (unwritten, start) {
                (true, None) => start = Some(i as u64),
                (false, Some(s)) => {
                    if ranges.len() < limit {
                        ranges.push((s, i as u64));
                    }
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            if ranges.len() < limit {
                ranges.push((s, shadow.writer.len() as u64));
            }
        }
        (missing, ranges)
    }

    /// Names and groups the raw findings of threadgroup `linear`. A group
    /// shows the first occurrence in the lowest-numbered threadgroup that
    /// had one, so the report does not depend on which threadgroups the
    /// workers happened to run first.
    #[allow(clippy::too_many_arguments)]
    pub fn collect(
        &self,
        kernel: &Kernel,
        program: &Program,
        tg: &TgPlace,
        linear: u64,
        full: [u32; 3],
        place_of: &dyn Fn(u64) -> TgPlace,
        raw: &mut Vec<Raw>,
    ) {
        if raw.is_empty() {
            return;
        }
        let mut grouped = self.grouped.lock().unwrap_or_else(|e| e.into_inner());
        for r in raw.drain(..) {
            let (pc_b, other) = match r.other {
                Some(Other::Thread(w)) => (Some(w.pc), Some(thread_ref(program, tg, full, w))),
                Some(Other::Threadgroup { linear, thread, pc }) => {
                    let place = place_of(linear);
                    let who = Who { simdgroup: thread / LANES as u32, lane: thread % LANES as u32, pc };
                    (Some(pc), Some(thread_ref(program, &place, full, who)))
                }
                None => (None, None),
            };
            let key = (r.kind, r.mem, r.who.pc, pc_b);
            let make = || make_finding(kernel, program, r, thread_ref(program, tg, full, r.who), other.clone());
            match grouped.get_mut(&key) {
                Some((shown, f)) => {
                    f.count += 1;
                    if linear < *shown {
                        let count = f.count;
                        *f = Finding { count, ..make() };
                        *shown = linear;
                    }
                }
                None => {
                    grouped.insert(key, (linear, make()));
                }
            }
        }
    }

    pub fn add(&self, finding: Finding) {
        let mut grouped = self.grouped.lock().unwrap_or_else(|e| e.into_inner());
        let key = (finding.kind, None, u32::MAX - grouped.len() as u32, None);
        grouped.insert(key, (0, finding));
    }

    /// All findings, errors first, in a stable order.
    pub fn into_findings(self) -> Vec<Finding> {
        let grouped = self.grouped.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(GroupKey, (u64, Finding))> = grouped.into_iter().collect();
        v.sort_by_key(|((kind, mem, pc, pc_b), (_, f))| (f.severity == Severity::Warning, *kind, *pc, *pc_b, mem.map(mem_order)));
        v.into_iter().map(|(_, (_, f))| f).collect()
    }
}

fn mem_order(m: MemRef) -> (bool, u32) {
    match m {
        MemRef::Buffer(p) => (false, p),
        MemRef::Threadgroup(t) => (true, t),
    }
}

fn site(program: &Program, pc: u32) -> (String, Option<String>) {
    match program.site_of.get(pc as usize).and_then(|s| program.sites.get(*s as usize)) {
        Some(s) => (s.path.to_string(), s.source.as_ref().map(|l| l.to_string())),
        None => ("kernel".into(), None),
    }
}

fn thread_ref(program: &Program, tg: &TgPlace, full: [u32; 3], who: Who) -> ThreadRef {
    let linear = who.simdgroup * LANES as u32 + who.lane;
    let (location, source) = site(program, who.pc);
    ThreadRef {
        grid: Some(tg.grid_position(linear, full)),
        threadgroup: tg.position,
        simdgroup: Some(who.simdgroup),
        lane: Some(who.lane),
        location,
        source,
    }
}

fn make_finding(kernel: &Kernel, program: &Program, r: Raw, first: ThreadRef, second: Option<ThreadRef>) -> Finding {
    let variable = r.mem.and_then(|m| program.memory_names.get(&m).cloned());
    let var = variable.clone().unwrap_or_default();
    let a = first.location.clone();
    let b = second.as_ref().map(|s| s.location.clone()).unwrap_or_default();
    let (message, hint) = match r.kind {
        FindingKind::ThreadgroupRace => (
            format!("two SIMD groups access `{var}` with no threadgroup_barrier between (at {b} and {a})"),
            format!("add threadgroup_barrier(mem_flags::mem_threadgroup) between the access at {b} and the access at {a}"),
        ),
        FindingKind::SimdgroupRace => (
            format!("two lanes of one SIMD group access `{var}` with no simdgroup_barrier between (at {b} and {a})"),
            format!("add simdgroup_barrier(mem_flags::mem_threadgroup) between the access at {b} and the access at {a}"),
        ),
        FindingKind::DeviceRace => (
            format!("two threadgroups of one dispatch access `{var}`, at least one writing (at {b} and {a}); threadgroups are unordered"),
            "give each threadgroup its own output elements, use an atomic, or split the work into two dispatches".into(),
        ),
        FindingKind::UninitializedRead => (
            format!("read of `{var}` before any thread of this threadgroup wrote it (threadgroup memory starts uninitialised)"),
            format!("write the element before reading it, with a threadgroup_barrier between, or guard the read at {a}"),
        ),
        FindingKind::InactiveLaneRead => (
            format!("a SIMD shuffle or broadcast at {a} reads a lane that is not active (its value is undefined)"),
            "shuffle only from lanes inside the same branch, or move the shuffle before the branch".into(),
        ),
        FindingKind::DivergentBarrier => (
            format!("threadgroup_barrier at {a} is not reached by every thread of the threadgroup"),
            "move the barrier out of thread-dependent control flow; do not return early before a barrier".into(),
        ),
        FindingKind::OutOfBounds => (
            format!("access outside `{var}` at {a}"),
            "bounds-check the index (e.g. `if (tid >= n) return;`) or dispatch fewer threads".into(),
        ),
        FindingKind::Coverage | FindingKind::OrderDependence => (String::new(), String::new()),
    };
    Finding {
        kind: r.kind,
        severity: Severity::Error,
        kernel: kernel.name.clone(),
        variable,
        index: r.index,
        first: Some(first),
        second,
        message,
        hint,
        count: 1,
    }
}
