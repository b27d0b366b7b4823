//! Sanitizer findings: what the simulator's sanitizer reports, as data every
//! front end can show (Rust type, JSON in the CLI, dicts in Python).

use serde::Serialize;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Two SIMD groups touch one threadgroup element, at least one writing,
    /// with no `threadgroup_barrier` between — or one device element, with
    /// no `threadgroup_barrier(mem_flags::mem_device)` between.
    ThreadgroupRace,
    /// Two lanes of one SIMD group touch one threadgroup or device element,
    /// at least one writing, with no `simdgroup_barrier` (or threadgroup
    /// barrier) of that memory between.
    SimdgroupRace,
    /// Two threadgroups of one dispatch write one device element, or one
    /// writes what another reads (no order exists between threadgroups).
    DeviceRace,
    /// One device element accessed both atomically and with a plain load or
    /// store, by different threads with no barrier between.
    MixedAtomic,
    /// A read of threadgroup memory never written in this threadgroup.
    UninitializedRead,
    /// A shuffle or broadcast reads a lane that is not active.
    InactiveLaneRead,
    /// A `threadgroup_barrier` not reached by every thread of the threadgroup.
    DivergentBarrier,
    /// An access outside a buffer or threadgroup array.
    OutOfBounds,
    /// Elements of an output buffer no thread wrote (a truncated dispatch?).
    Coverage,
    /// Results differ between SIMD-group schedules.
    OrderDependence,
    /// A thread reads a texel of a read_write texture it wrote, with no
    /// `fence()` of the texture between.
    UnfencedTextureRead,
    /// An access to threadgroup memory that an `async_copy` may still be
    /// writing (before the `async_wait` retiring the copy, or before the
    /// barrier after it).
    AsyncCopyInFlight,
    /// Results differ between layouts of a cooperative tensor: the kernel
    /// assumes which thread holds which element, which no device promises.
    LayoutDependence,
}

impl FindingKind {
    /// Where a report lists findings of this kind among its errors (then
    /// its warnings): causes first — an access out of bounds before the
    /// races and uninitialised reads it may bring about — then by kind.
    pub fn report_order(self) -> (bool, FindingKind) {
        (self != FindingKind::OutOfBounds, self)
    }

    pub fn name(self) -> &'static str {
        match self {
            FindingKind::ThreadgroupRace => "threadgroup race",
            FindingKind::SimdgroupRace => "SIMD-group race",
            FindingKind::DeviceRace => "device-memory race",
            FindingKind::MixedAtomic => "mixed atomic and plain access",
            FindingKind::UninitializedRead => "uninitialised read",
            FindingKind::InactiveLaneRead => "inactive-lane read",
            FindingKind::DivergentBarrier => "divergent barrier",
            FindingKind::OutOfBounds => "out of bounds",
            FindingKind::Coverage => "coverage",
            FindingKind::OrderDependence => "order dependence",
            FindingKind::UnfencedTextureRead => "texture read without fence",
            FindingKind::AsyncCopyInFlight => "access during an asynchronous copy",
            FindingKind::LayoutDependence => "cooperative tensor layout dependence",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// A thread, as the sanitizer names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadRef {
    /// `thread_position_in_grid`, when the thread is known (none for a lane
    /// past the end of a partial SIMD group).
    pub grid: Option<[u32; 3]>,
    pub threadgroup: [u32; 3],
    pub simdgroup: Option<u32>,
    pub lane: Option<u32>,
    /// The IR location of the access (`body[3].then[0]`).
    pub location: String,
    /// The front end's source location (`reduce.py:12`), when known.
    pub source: Option<String>,
}

impl fmt::Display for ThreadRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.threadgroup;
        match (self.grid, self.simdgroup, self.lane) {
            (Some([gx, gy, gz]), Some(sg), Some(lane)) => {
                write!(f, "thread ({gx},{gy},{gz}) [threadgroup ({x},{y},{z}), SIMD group {sg}, lane {lane}]")?
            }
            (None, Some(sg), Some(lane)) => {
                write!(f, "lane {lane} of SIMD group {sg} [threadgroup ({x},{y},{z}); no thread: the threadgroup ends before it]")?
            }
            _ => write!(f, "a thread of threadgroup ({x},{y},{z})")?,
        }
        write!(f, " at {}", self.location)?;
        if let Some(src) = &self.source {
            write!(f, " ({src})")?;
        }
        Ok(())
    }
}

/// One sanitizer report; many occurrences of one bug are grouped into one
/// finding with a count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    pub kernel: String,
    /// The buffer or threadgroup array involved.
    pub variable: Option<String>,
    /// The element index involved (first occurrence).
    pub index: Option<u64>,
    pub first: Option<ThreadRef>,
    pub second: Option<ThreadRef>,
    pub message: String,
    /// A one-line suggestion.
    pub hint: String,
    /// How many occurrences this finding groups.
    pub count: u64,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev}: {} in kernel `{}`", self.kind.name(), self.kernel)?;
        if let Some(v) = &self.variable {
            write!(f, " on `{v}`")?;
            if let Some(i) = self.index {
                write!(f, "[{i}]")?;
            }
        }
        write!(f, ": {}", self.message)?;
        if self.count > 1 {
            write!(f, " ({} occurrences)", self.count)?;
        }
        if let Some(t) = &self.first {
            write!(f, "\n  first:  {t}")?;
        }
        if let Some(t) = &self.second {
            write!(f, "\n  second: {t}")?;
        }
        write!(f, "\n  hint: {}", self.hint)
    }
}
