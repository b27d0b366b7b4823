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
//!   no order between threadgroups — unless device fences and an atomic
//!   order them, as Metal's coherence rules require (device memory is
//!   coherent only within a threadgroup; MSL §4.8): a threadgroup that
//!   updates an atomic element after a `device_fence()`, when every thread
//!   of it that wrote device memory has fenced since its last write,
//!   releases its writes into the element; and a *thread* whose
//!   `device_fence()` follows its threadgroup's update of that element
//!   acquires them, so its accesses to what they wrote are not races. One
//!   fencing thread orders only itself: a writer that did not fence keeps
//!   its threadgroup's writes unreleased, a reader that did not fence reads
//!   them as races. (The rule releases all of a threadgroup's writes, also
//!   those after the atomic update, and does not ask for the barrier that
//!   orders the writers' fences before the update: it can miss a race
//!   there, never invent one.)
//!   Inside a threadgroup, the elements it
//!   touches get the threadgroup-memory rules with the epochs of barriers
//!   that order device memory (`mem_flags::mem_device`): two SIMD groups, or
//!   two lanes of one, storing different values to one element or one
//!   writing what the other read is a race (stores of one value by every
//!   lane are not). Atomics never race with atomics; an element accessed
//!   both atomically and plainly by different threads (of one threadgroup
//!   between barriers, or of two threadgroups) is a mixed atomic access.
//! * Textures: each texel is a device element under the rules above, with
//!   the epochs of barriers that order textures (`mem_flags::mem_texture`)
//!   instead of device memory's: two threads writing different values to
//!   one texel, or one writing what another reads, with no such barrier
//!   between, is a race. A coordinate outside the texture is a finding with
//!   the coordinate and the size.
//! * Per-thread arrays: each element remembers which lanes wrote it; a read
//!   of an element the thread has not written is an uninitialised read, an
//!   index outside the array an out-of-bounds access.
//! * Coverage: elements of written buffers, and texels of written textures,
//!   that no thread wrote.
//!
//! Findings are grouped by (kind, variable, both instructions) so one bug
//! yields one finding with a count.

use crate::geometry::{TgPlace, LANES};
use crate::memory::try_filled;
use crate::program::{MemRef, Program};
use enigma_backend::{Finding, FindingKind, RuntimeError, Severity, TextureDesc, ThreadRef};
use enigma_ir::{Kernel, ParamKind};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
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

impl Who {
    /// The thread's index in its threadgroup (SIMD groups of 32 lanes).
    pub fn thread(self) -> u32 {
        self.simdgroup * LANES as u32 + self.lane
    }
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
    /// An out-of-bounds subscript of a multi-dimensional access (then
    /// `index` is `None`: the flat index was not formed yet).
    pub subscript: Option<Subscript>,
}

/// Subscript `dim` of a multi-dimensional access: `index` outside `0..size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subscript {
    pub dim: u8,
    pub index: i128,
    pub size: i128,
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

/// A device element's accesses inside the threadgroup being run.
#[derive(Clone, Copy, Debug)]
struct DevCell {
    /// The last write (or atomic) and its epochs; `w_value` identifies what
    /// a plain write stored.
    w: Option<(Who, u32, u32)>,
    w_value: u64,
    w_atomic: bool,
    /// The first read of the current epoch, with its epochs, and whether
    /// other SIMD groups / other lanes read it since.
    r: Option<(Who, u32, u32)>,
    /// The first reader of the epoch that is another thread than `r`.
    r_second: Option<Who>,
    r_other_sg: bool,
    r_other_lane: bool,
}

/// A multiply-rotate hasher for the per-threadgroup device-access table: its
/// keys are (buffer, element) pairs the simulator made itself, so SipHash's
/// resistance to chosen keys buys nothing and costs a third of a sanitized
/// dispatch.
#[derive(Default)]
struct CellHasher(u64);

impl Hasher for CellHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Per-threadgroup shadow state, reused across threadgroups by a worker.
#[derive(Debug)]
pub struct TgTracker {
    /// Device elements this threadgroup touched, by (parameter, element).
    device: HashMap<(u32, usize), DevCell, BuildHasherDefault<CellHasher>>,
    /// Epoch of barriers ordering device memory (`mem_device`).
    pub device_epoch: u32,
    /// Per SIMD group, the epoch of SIMD-group barriers ordering device memory.
    pub simd_device_epochs: Vec<u32>,
    /// Epoch of barriers ordering textures (`mem_texture`).
    pub texture_epoch: u32,
    /// Per SIMD group, the epoch of SIMD-group barriers ordering textures.
    pub simd_texture_epochs: Vec<u32>,
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
    /// Per (texture, thread of the threadgroup), the texels the thread wrote
    /// since its last `fence()` of that texture, with the writing instruction.
    unfenced: HashMap<(u32, u32), HashMap<usize, u32>>,
    /// Per thread of the threadgroup, its asynchronous copies not yet
    /// retired by an `async_wait`.
    async_groups: HashMap<u32, AsyncGroups>,
    /// Threadgroup elements (array, element) an asynchronous copy is still
    /// writing, with the lane and instruction that started it.
    in_flight: HashMap<(u32, usize), Who>,
    /// Threadgroup elements (array, element) read by overlapped products
    /// since the last threadgroup barrier, with the reader: the next barrier
    /// records each read again in its new epoch
    /// ([`TgTracker::threadgroup_barrier`]).
    pub overlapped_reads: Vec<(u32, usize, Who)>,
    /// Whether a thread of the threadgroup has run a `device_fence()`.
    fenced: bool,
    /// Threads (indices in the threadgroup) that wrote device memory since
    /// their last `device_fence()`.
    unfenced_writers: HashSet<u32>,
    /// Device elements (parameter, element) the threadgroup updated atomically.
    atomics: HashSet<(u32, usize), BuildHasherDefault<CellHasher>>,
    /// Per thread (index in the threadgroup), the threadgroups (linear
    /// indices) whose writes are ordered before its accesses: acquired at
    /// its fences through the atomics its threadgroup updated.
    acquired: HashMap<u32, HashSet<u64>>,
}

/// One thread's asynchronous copies: the open group, and the committed
/// groups, oldest first; each a list of (array, element) destinations.
#[derive(Debug, Default)]
struct AsyncGroups {
    open: Vec<(u32, usize)>,
    committed: std::collections::VecDeque<Vec<(u32, usize)>>,
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
        TgTracker {
            device: HashMap::default(),
            device_epoch: 1,
            simd_device_epochs: vec![],
            texture_epoch: 1,
            simd_texture_epochs: vec![],
            cells: vec![Cell::default(); n],
            offsets,
            epoch: 1,
            simd_epochs: vec![],
            raw: vec![],
            linear: 0,
            unfenced: HashMap::default(),
            async_groups: HashMap::default(),
            in_flight: HashMap::default(),
            overlapped_reads: vec![],
            fenced: false,
            unfenced_writers: HashSet::new(),
            atomics: HashSet::default(),
            acquired: HashMap::default(),
        }
    }

    /// Thread `thread` (index in the threadgroup) ran `device_fence()`: its
    /// device writes so far are fenced, the threadgroup's later atomic
    /// updates may release its writes, and the thread acquires the writes
    /// released into the atomic elements its threadgroup has updated.
    pub fn device_fence(&mut self, tracker: Option<&DispatchTracker>, thread: u32) {
        self.fenced = true;
        self.unfenced_writers.remove(&thread);
        if let Some(d) = tracker {
            let released = d.released.lock().unwrap_or_else(|e| e.into_inner());
            let mine = self.acquired.entry(thread).or_default();
            for e in &self.atomics {
                mine.extend(released.get(e).into_iter().flatten());
            }
        }
    }

    /// Thread `thread` wrote device memory (not atomically).
    pub fn device_write(&mut self, thread: u32) {
        self.unfenced_writers.insert(thread);
    }

    /// A thread updated element `index` of buffer `param` atomically (before
    /// the update takes place): after a fence, and with every writer of the
    /// threadgroup fenced, that releases the threadgroup's writes into the
    /// element.
    pub fn atomic_update(&mut self, tracker: Option<&DispatchTracker>, param: u32, index: usize) {
        self.atomics.insert((param, index));
        if let (true, true, Some(d)) = (self.fenced, self.unfenced_writers.is_empty(), tracker) {
            d.released.lock().unwrap_or_else(|e| e.into_inner()).entry((param, index)).or_default().insert(self.linear);
        }
    }

    /// Whether the access of another threadgroup `other` is ordered before
    /// the access of this threadgroup's thread `thread` (acquired through
    /// its fence and an atomic).
    pub fn ordered_after(&self, other: Other, thread: u32) -> bool {
        matches!(other, Other::Threadgroup { linear, .. } if self.acquired.get(&thread).is_some_and(|a| a.contains(&linear)))
    }

    pub fn reset(&mut self, linear: u64, simdgroups: usize) {
        self.fenced = false;
        self.unfenced_writers.clear();
        self.atomics.clear();
        self.acquired.clear();
        self.unfenced.clear();
        self.async_groups.clear();
        self.in_flight.clear();
        self.overlapped_reads.clear();
        self.cells.fill(Cell::default());
        self.epoch = 1;
        self.simd_epochs.clear();
        self.simd_epochs.resize(simdgroups, 1);
        self.device.clear();
        self.device_epoch = 1;
        self.simd_device_epochs.clear();
        self.simd_device_epochs.resize(simdgroups, 1);
        self.texture_epoch = 1;
        self.simd_texture_epochs.clear();
        self.simd_texture_epochs.resize(simdgroups, 1);
        self.linear = linear;
    }

    /// A threadgroup barrier: a new epoch for threadgroup memory, in which
    /// the reads of the overlapped products since the last barrier happen
    /// again (those products may still be reading until the next one), so
    /// that a write to their operands before then is a race.
    pub fn threadgroup_barrier(&mut self) {
        self.epoch += 1;
        for e in self.simd_epochs.iter_mut() {
            *e += 1;
        }
        for (array, index, who) in std::mem::take(&mut self.overlapped_reads) {
            self.threadgroup_access(array, index, who, AccessKind::Read);
        }
    }

    /// Records an access by one lane to element `index` of buffer (or texel
    /// `index` of texture) `mem` (a store of `value`, for writes) and
    /// reports what races inside this threadgroup.
    pub fn device_access(&mut self, mem: MemRef, index: usize, who: Who, kind: AccessKind, value: u64) {
        let (param, (epoch, simd_epoch)) = match mem {
            MemRef::Buffer(p) => (p, (self.device_epoch, self.simd_device_epochs[who.simdgroup as usize])),
            MemRef::Texture(p) => (p, (self.texture_epoch, self.simd_texture_epochs[who.simdgroup as usize])),
            MemRef::Threadgroup(_) | MemRef::Thread(_) => return,
        };
        let same_thread = |a: Who| a.simdgroup == who.simdgroup && a.lane == who.lane;
        let c = *self.device.entry((param, index)).or_insert(DevCell {
            w: None,
            w_value: 0,
            w_atomic: false,
            r: None,
            r_second: None,
            r_other_sg: false,
            r_other_lane: false,
        });
        // A reader to name beside `who`: another thread than `who` where one read.
        let reader = |r: Who| if same_thread(r) { c.r_second.unwrap_or(r) } else { r };
        let write = c.w.filter(|w| w.1 == epoch);
        let read = c.r.filter(|r| r.1 == epoch);
        let found = match kind {
            AccessKind::Read => match write {
                Some((w, _, _)) if c.w_atomic && !same_thread(w) => Some((FindingKind::MixedAtomic, w)),
                Some((w, _, _)) if !c.w_atomic && w.simdgroup != who.simdgroup => Some((FindingKind::ThreadgroupRace, w)),
                Some((w, _, w_simd)) if !c.w_atomic && w.lane != who.lane && w_simd == simd_epoch => Some((FindingKind::SimdgroupRace, w)),
                _ => None,
            },
            AccessKind::Write => match (write, read) {
                (Some((w, _, _)), _) if c.w_atomic && !same_thread(w) => Some((FindingKind::MixedAtomic, w)),
                (Some((w, _, _)), _) if w.simdgroup != who.simdgroup && c.w_value != value => Some((FindingKind::ThreadgroupRace, w)),
                (_, Some((r, _, _))) if r.simdgroup != who.simdgroup || c.r_other_sg => Some((FindingKind::ThreadgroupRace, reader(r))),
                (Some((w, _, w_simd)), _) if w.lane != who.lane && w_simd == simd_epoch && c.w_value != value => {
                    Some((FindingKind::SimdgroupRace, w))
                }
                (_, Some((r, _, r_simd))) if r_simd == simd_epoch && (r.lane != who.lane || c.r_other_lane) && r.pc != who.pc => {
                    Some((FindingKind::SimdgroupRace, reader(r)))
                }
                _ => None,
            },
            AccessKind::Atomic => match (write, read) {
                (Some((w, _, _)), _) if !c.w_atomic && !same_thread(w) => Some((FindingKind::MixedAtomic, w)),
                (_, Some((r, _, _))) if !same_thread(r) || c.r_other_sg || c.r_other_lane => Some((FindingKind::MixedAtomic, reader(r))),
                _ => None,
            },
        };
        if let Some((kind, other)) = found {
            self.report(kind, mem, index, who, Some(Other::Thread(other)));
        }
        let cell = self.device.get_mut(&(param, index)).expect("inserted above");
        match kind {
            AccessKind::Read if read.is_none() => {
                *cell = DevCell { r: Some((who, epoch, simd_epoch)), r_second: None, r_other_sg: false, r_other_lane: false, ..*cell };
            }
            AccessKind::Read => {
                let (r, _, r_simd) = read.expect("matched above");
                if cell.r_second.is_none() && !same_thread(r) {
                    cell.r_second = Some(who);
                }
                cell.r_other_sg |= r.simdgroup != who.simdgroup;
                cell.r_other_lane |= r.lane != who.lane || r_simd != simd_epoch;
            }
            AccessKind::Write | AccessKind::Atomic => {
                cell.w = Some((who, epoch, simd_epoch));
                cell.w_value = value;
                cell.w_atomic = kind == AccessKind::Atomic;
            }
        }
    }

    fn report(&mut self, kind: FindingKind, mem: MemRef, index: usize, who: Who, other: Option<Other>) {
        self.raw.push(Raw { kind, mem: Some(mem), index: Some(index as u64), who, other, subscript: None });
    }

    /// Records an access by one lane to threadgroup array `array`.
    pub fn threadgroup_access(&mut self, array: u32, index: usize, who: Who, kind: AccessKind) {
        let mem = MemRef::Threadgroup(array);
        if let Some(&issuer) = self.in_flight.get(&(array, index)) {
            self.report(FindingKind::AsyncCopyInFlight, mem, index, who, Some(Other::Thread(issuer)));
        }
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

    /// An asynchronous copy by `who` to element `index` of threadgroup array
    /// `array` (already recorded as a write): in flight, in the thread's
    /// open group, until an `async_wait` retires the group.
    pub fn async_issue(&mut self, array: u32, index: usize, who: Who) {
        self.in_flight.insert((array, index), who);
        self.async_groups.entry(who.thread()).or_default().open.push((array, index));
    }

    /// `async_commit()` by `who`: its open group joins the committed ones.
    pub fn async_commit(&mut self, who: Who) {
        let groups = self.async_groups.entry(who.thread()).or_default();
        let open = std::mem::take(&mut groups.open);
        groups.committed.push_back(open);
    }

    /// `async_wait(pending)` by `who`: its committed groups past the newest
    /// `pending` are complete. Their destinations leave the in-flight set
    /// and are recorded as written here, at the wait, since the copy may
    /// land as late as that: another thread needs a barrier after it.
    pub fn async_wait(&mut self, who: Who, pending: u32) {
        let Some(groups) = self.async_groups.get_mut(&(who.thread())) else {
            return;
        };
        let mut landed = vec![];
        while groups.committed.len() > pending as usize {
            landed.extend(groups.committed.pop_front().into_iter().flatten());
        }
        for (array, index) in landed {
            self.in_flight.remove(&(array, index));
            self.threadgroup_access(array, index, who, AccessKind::Write);
        }
    }

    /// A tile copy issued by the threadgroup (`issuer` stands for it) into
    /// elements `range` of threadgroup array `array`: an access to them
    /// since the last threadgroup barrier races with it (the copy may land
    /// at once), and until every thread has waited for it an access is a
    /// finding ([`TgTracker::tile_copy_landed`]).
    pub fn tile_copy_issued(&mut self, array: u32, range: std::ops::Range<usize>, issuer: Who) {
        let mem = MemRef::Threadgroup(array);
        let mut race = None;
        for index in range.clone() {
            let c = self.cells[self.offsets[array as usize] + index];
            if c.written && c.w_epoch == self.epoch {
                race = Some((index, Who { simdgroup: c.w_sg, lane: c.w_lane, pc: c.w_pc }));
            } else if c.r_epoch == self.epoch {
                race = Some((index, Who { simdgroup: c.r_sg, lane: c.r_lane, pc: c.r_pc }));
            }
            if race.is_some() {
                break;
            }
        }
        if let Some((index, other)) = race {
            self.report(FindingKind::ThreadgroupRace, mem, index, issuer, Some(Other::Thread(other)));
        }
        for index in range {
            self.in_flight.insert((array, index), issuer);
        }
    }

    /// Every thread has waited for the tile copy into `range` of `array`:
    /// its elements are written, before any access of this epoch (each
    /// thread saw them land at its own wait).
    pub fn tile_copy_landed(&mut self, array: u32, range: std::ops::Range<usize>, issuer: Who) {
        for index in range {
            self.in_flight.remove(&(array, index));
            let cell = &mut self.cells[self.offsets[array as usize] + index];
            *cell = Cell { written: true, w_epoch: 0, w_simd_epoch: 0, w_sg: issuer.simdgroup, w_lane: issuer.lane, w_pc: issuer.pc, ..*cell };
        }
    }

    /// A thread's write of texel `i` of texture `tex`, unfenced until its
    /// next `fence()` of the texture.
    pub fn texture_write_unfenced(&mut self, tex: u32, i: usize, who: Who) {
        self.unfenced.entry((tex, who.thread())).or_default().insert(i, who.pc);
    }

    /// A thread's read of texel `i` of texture `tex`: a finding when the
    /// thread wrote it since its last `fence()` of the texture.
    pub fn texture_read_fenced(&mut self, tex: u32, i: usize, who: Who) {
        if let Some(pc) = self.unfenced.get(&(tex, who.thread())).and_then(|w| w.get(&i)) {
            let writer = Who { pc: *pc, ..who };
            self.raw.push(Raw {
                kind: FindingKind::UnfencedTextureRead,
                mem: Some(MemRef::Texture(tex)),
                index: Some(i as u64),
                who,
                other: Some(Other::Thread(writer)),
                subscript: None,
            });
        }
    }

    /// A thread's `fence()` of texture `tex`: its writes become visible to its reads.
    pub fn texture_fence(&mut self, tex: u32, who: Who) {
        self.unfenced.remove(&(tex, who.thread()));
    }

    /// A texture access at (`x`, `y`) outside texture `tex`.
    pub fn texture_out_of_bounds(&mut self, tex: u32, x: u32, y: u32, who: Who) {
        self.raw.push(Raw { kind: FindingKind::OutOfBounds, mem: Some(MemRef::Texture(tex)), index: Some((y as u64) << 32 | x as u64), who, other: None, subscript: None });
    }

    pub fn out_of_bounds(&mut self, mem: MemRef, raw_index: u64, who: Who) {
        self.raw.push(Raw { kind: FindingKind::OutOfBounds, mem: Some(mem), index: Some(raw_index), who, other: None, subscript: None });
    }

    /// A lane read element `index` of per-thread array `array` before writing it.
    pub fn uninitialised_thread_read(&mut self, array: u32, index: usize, who: Who) {
        self.report(FindingKind::UninitializedRead, MemRef::Thread(array), index, who, None);
    }

    /// Records subscript `sub` of an access to `mem` outside its dimension.
    pub fn subscript_out_of_bounds(&mut self, mem: MemRef, sub: Subscript, who: Who) {
        self.raw.push(Raw { kind: FindingKind::OutOfBounds, mem: Some(mem), index: None, who, other: None, subscript: Some(sub) });
    }

    pub fn inactive_lane(&mut self, who: Who, source_lane: u32) {
        let other = Who { lane: source_lane, ..who };
        self.raw.push(Raw { kind: FindingKind::InactiveLaneRead, mem: None, index: None, who, other: Some(Other::Thread(other)), subscript: None });
    }

    pub fn divergent_barrier(&mut self, who: Who, other: Option<Who>) {
        self.raw.push(Raw {
            kind: FindingKind::DivergentBarrier,
            mem: None,
            index: None,
            who,
            other: other.map(Other::Thread),
            subscript: None,
        });
    }
}

/// Shadow of one device buffer: per element, the last write, the first
/// read, the first read by another threadgroup than that one, and the first
/// atomic access — each an [`Access`] packed into a word, 0 for none. (A
/// second writing threadgroup is a race, reported when it writes.)
#[derive(Debug)]
struct DeviceShadow {
    writer: Box<[AtomicU64]>,
    reader: Box<[AtomicU64]>,
    reader2: Box<[AtomicU64]>,
    /// The first atomic access.
    atomic: Box<[AtomicU64]>,
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
    /// The texture bound to each texture parameter.
    textures: Vec<Option<TextureDesc>>,
    /// Findings by (kind, memory, instruction, other instruction), each with
    /// the linear index of the threadgroup whose occurrence it shows.
    grouped: Mutex<HashMap<GroupKey, (u64, Finding)>>,
    /// Per device element updated atomically after a `device_fence()`, the
    /// threadgroups (linear indices) whose writes it released.
    released: Mutex<HashMap<(u32, usize), HashSet<u64>>>,
}

impl DispatchTracker {
    /// Shadows for every buffer argument, sized in elements, and every
    /// texture argument, sized in texels.
    /// The shadows take 32 bytes per element of buffers the user sized, so
    /// failing to allocate them is an error, not an abort.
    pub fn new(kernel: &Kernel, buffer_bytes: &[Option<usize>], textures: &[Option<TextureDesc>]) -> Result<DispatchTracker, RuntimeError> {
        let device = kernel
            .params
            .iter()
            .zip(buffer_bytes)
            .zip(textures)
            .map(|((p, bytes), texture)| {
                let n = match (p.kind, bytes, texture) {
                    (ParamKind::Buffer { elem, .. }, Some(bytes), _) => bytes / elem.size_bytes() as usize,
                    (ParamKind::Texture { .. }, _, Some(desc)) => desc.texels() as usize,
                    _ => return Ok(None),
                };
                {
                    let zeros = || {
                        try_filled(n, || AtomicU64::new(0), n as u128 * 8, "the sanitizer's shadow of a buffer").map(Vec::into_boxed_slice)
                    };
                    Ok(Some(DeviceShadow { writer: zeros()?, reader: zeros()?, reader2: zeros()?, atomic: zeros()? }))
                }
            })
            .collect::<Result<_, RuntimeError>>()?;
        Ok(DispatchTracker { device, textures: textures.to_vec(), grouped: Mutex::new(HashMap::new()), released: Mutex::new(HashMap::new()) })
    }

    /// Records a device access by thread `thread` of threadgroup `linear`;
    /// returns what it races with in another threadgroup: a device race, or
    /// a mixed atomic access (an atomic and a plain access). The shadow
    /// words change through atomic read-modify-writes where two threadgroups
    /// running at once could otherwise hide each other's access.
    pub fn device_access(&self, param: u32, index: usize, linear: u64, thread: u32, pc: u32, kind: AccessKind) -> Option<(FindingKind, Other)> {
        let shadow = self.device[param as usize].as_ref()?;
        let me = Access::new(linear, thread, pc);
        let foreign = |a: Access| a.group() != 0 && a.group() != me.group();
        if kind == AccessKind::Atomic {
            let _ = shadow.atomic[index].compare_exchange(0, me.0, Relaxed, Relaxed);
            return [&shadow.writer, &shadow.reader, &shadow.reader2]
                .into_iter()
                .map(|r| Access(r[index].load(Relaxed)))
                .find(|a| foreign(*a))
                .map(|a| (FindingKind::MixedAtomic, a.other()));
        }
        let atomic = Access(shadow.atomic[index].load(Relaxed));
        let race = self.plain_access(shadow, index, me, kind).map(|o| (FindingKind::DeviceRace, o));
        race.or_else(|| foreign(atomic).then(|| (FindingKind::MixedAtomic, atomic.other())))
    }

    /// The cross-threadgroup race rules of plain accesses.
    fn plain_access(&self, shadow: &DeviceShadow, index: usize, me: Access, kind: AccessKind) -> Option<Other> {
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
            // An atomic update writes the element too.
            let unwritten = w.load(Relaxed) >> 32 == 0 && shadow.atomic[i].load(Relaxed) == 0;
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
            // A mixed access is one bug whichever side came first: one group.
            let key = match (r.kind, pc_b) {
                (FindingKind::MixedAtomic, Some(b)) => (r.kind, r.mem, r.who.pc.min(b), Some(r.who.pc.max(b))),
                _ => (r.kind, r.mem, r.who.pc, pc_b),
            };
            let make = || make_finding(kernel, program, &self.textures, r, thread_ref(program, tg, full, r.who), other.clone());
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

    /// All findings, errors first, causes before what they cause (an
    /// access out of bounds before the races and uninitialised reads it
    /// may bring about), in a stable order.
    pub fn into_findings(self) -> Vec<Finding> {
        let grouped = self.grouped.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(GroupKey, (u64, Finding))> = grouped.into_iter().collect();
        v.sort_by_key(|((kind, mem, pc, pc_b), (_, f))| (f.severity == Severity::Warning, kind.report_order(), *pc, *pc_b, mem.map(mem_order)));
        v.into_iter().map(|(_, (_, f))| f).collect()
    }
}

fn mem_order(m: MemRef) -> (u8, u32) {
    match m {
        MemRef::Buffer(p) | MemRef::Texture(p) => (0, p),
        MemRef::Threadgroup(t) => (1, t),
        MemRef::Thread(t) => (2, t),
    }
}

fn site(program: &Program, pc: u32) -> (String, Option<String>) {
    match program.site_of.get(pc as usize).and_then(|s| program.sites.get(*s as usize)) {
        Some(s) => (s.path.to_string(), s.source.as_ref().map(|l| l.to_string())),
        None => ("kernel".into(), None),
    }
}

/// Where an access is, as messages and hints name it: its source line
/// (`kernel.py:12`, the file without its directories) where the front end
/// gave one — with the IR location too when `other`'s access is another on
/// the same line — else the IR location (`body[3].then[0]`).
fn place(access: &ThreadRef, other: Option<&ThreadRef>) -> String {
    let Some(source) = &access.source else { return access.location.clone() };
    let short = source.rsplit(['/', '\\']).next().unwrap_or(source);
    match other {
        Some(o) if o.source.as_ref() == Some(source) && o.location != access.location => format!("{short} ({})", access.location),
        _ => short.to_string(),
    }
}

fn thread_ref(program: &Program, tg: &TgPlace, full: [u32; 3], who: Who) -> ThreadRef {
    let linear = who.thread();
    let (location, source) = site(program, who.pc);
    ThreadRef {
        // A lane past the threadgroup's last thread (a shuffle's source in a
        // partial SIMD group) has no position in the grid.
        grid: (linear < tg.threads()).then(|| tg.grid_position(linear, full)),
        threadgroup: tg.position,
        simdgroup: Some(who.simdgroup),
        lane: Some(who.lane),
        location,
        source,
    }
}

fn make_finding(kernel: &Kernel, program: &Program, textures: &[Option<TextureDesc>], r: Raw, first: ThreadRef, second: Option<ThreadRef>) -> Finding {
    let variable = r.mem.and_then(|m| program.memory_names.get(&m).cloned());
    let var = variable.clone().unwrap_or_default();
    let a = place(&first, second.as_ref());
    let b = second.as_ref().map(|s| place(s, Some(&first))).unwrap_or_default();
    let device = matches!(r.mem, Some(MemRef::Buffer(_)));
    // The other access is an overlapped product's read (recorded again
    // after the barrier that follows it).
    let against_overlapped = [r.other.and_then(|o| match o {
        Other::Thread(w) => Some(w.pc),
        Other::Threadgroup { .. } => None,
    }), Some(r.who.pc)]
    .into_iter()
    .flatten()
    .any(|pc| program.is_overlapped_product(pc));
    let texture = match r.mem {
        Some(MemRef::Texture(p)) => textures.get(p as usize).copied().flatten(),
        _ => None,
    };
    let mut index = r.index;
    let (message, hint) = match r.kind {
        FindingKind::OutOfBounds if texture.is_some() => {
            let desc = texture.expect("matched");
            let (x, y) = r.index.map_or((0, 0), |i| (i as u32, (i >> 32) as u32));
            index = None;
            (
                format!("access of texture `{var}` at ({x}, {y}), outside its {}×{} texels, at {a} (Metal leaves it undefined)", desc.width, desc.height),
                "bounds-check the coordinate (`if (gid.x >= tex.get_width() || gid.y >= tex.get_height()) return;`) or dispatch exactly the texture's size with dispatch_threads".into(),
            )
        }
        FindingKind::UnfencedTextureRead => {
            let (x, y) = match (texture, r.index) {
                (Some(d), Some(i)) => (i % d.width as u64, i / d.width as u64),
                _ => (0, 0),
            };
            index = None;
            (
                format!("a thread reads texel ({x}, {y}) of read_write texture `{var}` at {a} after writing it at {b} with no fence() between (Metal leaves the value read undefined)"),
                format!("call `{var}.fence()` between the write at {b} and the read at {a}, or keep the value written in a local"),
            )
        }
        FindingKind::AsyncCopyInFlight if r.other.is_some_and(|o| matches!(o, Other::Thread(w) if program.is_tile_copy(w.pc))) => (
            format!("`{var}` is accessed at {a} while the tile_copy issued at {b} may still be writing it (a tile copy is complete for a thread at its tile_wait on the copy's barrier)"),
            format!("call tile_wait on the barrier of the copy at {b} before the access at {a}; in a multi-stage pipeline, check that the stage being read is not the one being refilled"),
        ),
        FindingKind::AsyncCopyInFlight => (
            format!("`{var}` is accessed at {a} while the async_copy started at {b} may still be writing it (a copy is complete after the async_wait that retires its group, and visible to other threads after the next threadgroup_barrier)"),
            format!("call async_wait for the copy at {b}, then threadgroup_barrier(mem_flags::mem_threadgroup), before the access at {a}; in a multi-stage pipeline, check that the stage being read is not the one being refilled"),
        ),
        FindingKind::ThreadgroupRace | FindingKind::SimdgroupRace | FindingKind::DeviceRace if texture.is_some() => (
            format!("two threads access a texel of texture `{var}`, at least one writing a value the other does not see or overwrites (at {b} and {a})"),
            format!("add threadgroup_barrier(mem_flags::mem_texture) between the access at {b} and the access at {a} (mem_device does not order textures), or give each thread its own texels; between threadgroups no barrier helps (they are unordered)"),
        ),
        FindingKind::ThreadgroupRace if device => (
            format!("two SIMD groups of one threadgroup access device buffer `{var}`, at least one writing, with no threadgroup_barrier(mem_flags::mem_device) between (at {b} and {a})"),
            format!("add threadgroup_barrier(mem_flags::mem_device) between the access at {b} and the access at {a}, give each thread its own element, or use an atomic"),
        ),
        FindingKind::SimdgroupRace if device => (
            format!("two lanes of one SIMD group access device buffer `{var}`, one storing a value the other does not see or overwrites (at {b} and {a})"),
            format!("give each lane its own element, or combine the lanes first (simd_sum, …) and let one lane write; an update shared by threads needs an atomic (at {a})"),
        ),
        FindingKind::MixedAtomic => (
            format!("`{var}` is updated atomically and also read or written plainly by another thread, with no barrier between (at {b} and {a}); the plain access races with the atomic"),
            "access the element only through atomics in this dispatch, or move the plain access to another dispatch".into(),
        ),
        FindingKind::ThreadgroupRace if against_overlapped => (
            format!("`{var}` is written while the overlapped product (matmul2d_run_overlapped) may still read it: it reads its operands until the second threadgroup_barrier after it (at {b} and {a})"),
            "write the product's operands only after the second threadgroup_barrier that follows it (refill the stage used two slices back), or run it with matmul2d_run, whose operands are free after the next barrier".into(),
        ),
        FindingKind::ThreadgroupRace => (
            format!("two SIMD groups access `{var}` with no threadgroup_barrier between (at {b} and {a})"),
            format!("add threadgroup_barrier(mem_flags::mem_threadgroup) between the access at {b} and the access at {a}"),
        ),
        FindingKind::SimdgroupRace => (
            format!("two lanes of one SIMD group access `{var}` with no simdgroup_barrier between (at {b} and {a})"),
            format!(
                "add simdgroup_barrier(mem_flags::mem_threadgroup) between the access at {b} and the access at {a}: enough while only lanes of one SIMD group share these elements; if other SIMD groups touch them too, or once the threadgroup grows past 32 threads, threadgroup_barrier(mem_flags::mem_threadgroup) is the fix that stays correct"
            ),
        ),
        FindingKind::DeviceRace => (
            format!("two threadgroups of one dispatch access `{var}`, at least one writing (at {b} and {a}); threadgroups are unordered"),
            "give each threadgroup its own output elements, use an atomic, or split the work into two dispatches".into(),
        ),
        FindingKind::UninitializedRead if matches!(r.mem, Some(MemRef::Thread(_))) => (
            format!("read of `{var}` at {a} before this thread wrote the element (per-thread arrays start uninitialised)"),
            format!("write every element of `{var}` before reading it (e.g. fill it with zeros in a loop first), or guard the read at {a}"),
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
        FindingKind::OutOfBounds => match r.subscript {
            Some(Subscript { dim, index, size }) => (
                format!("access outside `{var}` at {a}: index {index} of dimension {dim}, size {size} (the flat index may still fall inside `{var}`, on another element than the one meant)"),
                format!("bounds-check each subscript against the size of its own dimension (dimension {dim} has {size}), not only the flat index, or dispatch fewer threads"),
            ),
            None => (
                format!("access outside `{var}` at {a}"),
                "bounds-check the index (e.g. `if (tid >= n) return;`) or dispatch fewer threads".into(),
            ),
        },
        FindingKind::Coverage | FindingKind::OrderDependence | FindingKind::LayoutDependence => (String::new(), String::new()),
    };
    Finding {
        kind: r.kind,
        severity: Severity::Error,
        kernel: kernel.name.clone(),
        variable,
        index,
        first: Some(first),
        second,
        message,
        hint,
        count: 1,
    }
}
