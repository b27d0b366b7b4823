//! Occupancy: how many threadgroups of a kernel are resident on one core, and
//! which threadgroup size to start from for a kind of kernel.
//!
//! Threadgroups per core is the smallest of the bounds the device knows:
//!
//! * threadgroup memory: `floor(pool / bytes)` (seed 002 §4.1's
//!   `floor(32768 / X)`; the pool is
//!   [`DeviceSpec::threadgroup_memory_per_core_bytes`]);
//! * threads: `floor(max_threads_per_core / threads)`;
//! * SIMD groups: `floor(max_simdgroups_per_core / simdgroups)`;
//! * threadgroup slots: `max_threadgroups_per_core`.
//!
//! Apple publishes none of the last three, and the seeds state none (seed
//! 002's table puts 1,536 threads on one core, seed 000's "simplified"
//! compute unit shows 1,024), so for the catalogue's Apple GPUs only the
//! memory bound applies and a kernel without threadgroup memory has no known
//! bound: the result says so (`threadgroups_per_core: None`) rather than
//! guessing. Runtime devices (CUDA) fill those fields from the driver.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalog::{CatalogError, DeviceSpec};
use crate::text::thousands;

/// Why an occupancy cannot be computed.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum OccupancyError {
    /// A threadgroup of no threads.
    #[error("a threadgroup needs at least one thread (got 0)")]
    ZeroThreads,
    /// More threads than a threadgroup may have.
    #[error("threadgroup of {threads} threads exceeds the maximum of {max}")]
    ThreadgroupTooLarge {
        /// Requested threads.
        threads: u32,
        /// The device's limit.
        max: u32,
    },
    /// More threadgroup memory than one threadgroup may allocate.
    #[error("threadgroup memory of {bytes} bytes exceeds {device}'s limit of {max} bytes per threadgroup")]
    ThreadgroupMemoryTooLarge {
        /// Requested bytes.
        bytes: u32,
        /// The device's limit.
        max: u32,
        /// The device.
        device: String,
    },
    /// The device description is unusable.
    #[error(transparent)]
    Device(#[from] CatalogError),
}

/// Which bound decides the threadgroups per core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OccupancyLimiter {
    /// Threadgroup memory.
    ThreadgroupMemory,
    /// Resident threads.
    Threads,
    /// Resident SIMD groups.
    Simdgroups,
    /// Resident threadgroup slots.
    ThreadgroupSlots,
}

/// Threadgroups per core for one kernel configuration on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Occupancy {
    /// The device's name.
    pub device: String,
    /// Cores of the device.
    pub cores: u32,
    /// Threads per threadgroup.
    pub threads_per_threadgroup: u32,
    /// `ceil(threads / simd_width)`.
    pub simdgroups_per_threadgroup: u32,
    /// Threadgroup memory per threadgroup, bytes.
    pub threadgroup_memory_bytes: u32,
    /// That as a percentage of the per-threadgroup limit.
    pub memory_percent: f64,
    /// `floor(pool / bytes)`; `None` when the kernel uses no threadgroup memory.
    pub by_threadgroup_memory: Option<u32>,
    /// `floor(max_threads_per_core / threads)`, when the device knows it.
    pub by_threads: Option<u32>,
    /// `floor(max_simdgroups_per_core / simdgroups)`, when the device knows it.
    pub by_simdgroups: Option<u32>,
    /// `max_threadgroups_per_core`, when the device knows it.
    pub by_threadgroup_slots: Option<u32>,
    /// The smallest known bound; `None` when no bound is known.
    pub threadgroups_per_core: Option<u32>,
    /// Which bound that is.
    pub limiter: Option<OccupancyLimiter>,
    /// `threadgroups_per_core × threads`.
    pub threads_per_core: Option<u64>,
    /// `threadgroups_per_core × simdgroups`.
    pub simdgroups_per_core: Option<u64>,
    /// `threadgroups_per_core × cores`: threadgroups in flight on the device.
    pub concurrent_threadgroups: Option<u64>,
    /// Explanations (unknown bounds, no headroom …).
    pub notes: Vec<String>,
}

/// Threadgroups per core of a kernel with `threads_per_threadgroup` threads
/// and `threadgroup_memory_bytes` of threadgroup memory on `device`.
pub fn occupancy(device: &DeviceSpec, threads_per_threadgroup: u32, threadgroup_memory_bytes: u32) -> Result<Occupancy, OccupancyError> {
    device.validate()?;
    let threads = threads_per_threadgroup;
    if threads == 0 {
        return Err(OccupancyError::ZeroThreads);
    }
    if threads > device.max_threads_per_threadgroup {
        return Err(OccupancyError::ThreadgroupTooLarge { threads, max: device.max_threads_per_threadgroup });
    }
    let bytes = threadgroup_memory_bytes;
    if bytes > device.threadgroup_memory_bytes {
        return Err(OccupancyError::ThreadgroupMemoryTooLarge {
            bytes,
            max: device.threadgroup_memory_bytes,
            device: device.name.clone(),
        });
    }
    let simdgroups = threads.div_ceil(device.simd_width);
    let pool = device.threadgroup_memory_per_core_bytes;
    let by_threadgroup_memory = (bytes > 0).then(|| pool / bytes);
    let by_threads = device.max_threads_per_core.map(|t| t / threads);
    let by_simdgroups = device.max_simdgroups_per_core.map(|s| s / simdgroups);
    let by_threadgroup_slots = device.max_threadgroups_per_core;

    let candidates = [
        (by_threadgroup_memory, OccupancyLimiter::ThreadgroupMemory),
        (by_threads, OccupancyLimiter::Threads),
        (by_simdgroups, OccupancyLimiter::Simdgroups),
        (by_threadgroup_slots, OccupancyLimiter::ThreadgroupSlots),
    ];
    let best = candidates.iter().filter_map(|&(b, l)| b.map(|b| (b, l))).min_by_key(|&(b, _)| b);
    let threadgroups_per_core = best.map(|(b, _)| b);
    let limiter = best.map(|(_, l)| l);

    let mut notes = Vec::new();
    if device.max_threads_per_core.is_none() && device.max_simdgroups_per_core.is_none() {
        notes.push(format!(
            "{} publishes no per-core thread or SIMD-group limit, so only threadgroup memory bounds occupancy here; \
             registers and thread slots may lower it further",
            device.name
        ));
    }
    if threadgroups_per_core.is_none() {
        notes.push("no threadgroup memory and no known per-core limit: threadgroups per core is unknown".to_string());
    }
    if bytes == device.threadgroup_memory_bytes {
        notes.push(format!(
            "{} bytes is the whole {}-byte threadgroup memory: no headroom is left",
            thousands(u64::from(bytes)),
            thousands(u64::from(device.threadgroup_memory_bytes))
        ));
    }
    if threadgroups_per_core == Some(0) {
        notes.push("not even one threadgroup fits on a core".to_string());
    }

    Ok(Occupancy {
        device: device.name.clone(),
        cores: device.gpu_cores,
        threads_per_threadgroup: threads,
        simdgroups_per_threadgroup: simdgroups,
        threadgroup_memory_bytes: bytes,
        memory_percent: f64::from(bytes) / f64::from(device.threadgroup_memory_bytes.max(1)) * 100.0,
        by_threadgroup_memory,
        by_threads,
        by_simdgroups,
        by_threadgroup_slots,
        threadgroups_per_core,
        limiter,
        threads_per_core: threadgroups_per_core.map(|t| u64::from(t) * u64::from(threads)),
        simdgroups_per_core: threadgroups_per_core.map(|t| u64::from(t) * u64::from(simdgroups)),
        concurrent_threadgroups: threadgroups_per_core.map(|t| u64::from(t) * u64::from(device.gpu_cores)),
        notes,
    })
}

/// Kinds of kernel seed 004's sizing table distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelKind {
    /// One thread per element (ReLU, add, scale).
    ElementWise,
    /// One threadgroup per row of `row_len` elements (softmax, norms).
    RowReduction {
        /// Elements per row (seed 004's D).
        row_len: u32,
    },
    /// Tiled matrix multiply.
    MatrixMultiply,
}

/// A threadgroup-size recommendation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadgroupRecommendation {
    /// Smallest recommended size.
    pub min: u32,
    /// Largest recommended size.
    pub max: u32,
    /// Where to start.
    pub default: u32,
    /// Why (seed 004's rationale column).
    pub rationale: String,
}

/// Seed 004's "Threadgroup Sizing Guidelines": element-wise 256–512, row
/// reduction 32 (D ≤ 32), 256 (D ≤ 1024), 256–512 (D > 1024), matrix
/// multiply 64–128. Defaults: 256 for element-wise and long rows (seed 004
/// "Start with 256", seed 000's element-wise and row-wise dispatches) and 128
/// for GEMM (seed 000: "128 for GEMM").
pub fn recommended_threadgroup_size(kind: KernelKind) -> ThreadgroupRecommendation {
    let (min, max, default, rationale) = match kind {
        KernelKind::ElementWise => (256, 512, 256, "High occupancy, simple ops"),
        KernelKind::RowReduction { row_len } if row_len <= 32 => (32, 32, 32, "Single simdgroup covers dimension"),
        KernelKind::RowReduction { row_len } if row_len <= 1024 => {
            (256, 256, 256, "8 simdgroups with cross-group reduction")
        }
        KernelKind::RowReduction { .. } => (256, 512, 256, "Loop within threads"),
        KernelKind::MatrixMultiply => (64, 128, 128, "Tile-based, register pressure"),
    };
    ThreadgroupRecommendation { min, max, default, rationale: rationale.to_string() }
}

/// Seed 004's autotuning candidates.
pub const AUTOTUNE_CANDIDATES: [u32; 6] = [32, 64, 128, 256, 512, 1024];

/// The candidates seed 004's loop tries for a grid of `grid_x` threads along
/// x: it skips threadgroups wider than the grid (`if tgx > grid[0]: continue`).
pub fn autotune_candidates(grid_x: u32) -> Vec<u32> {
    AUTOTUNE_CANDIDATES.into_iter().filter(|&c| c <= grid_x).collect()
}
