//! Dispatch geometry: how a grid is cut into threadgroups and SIMD groups.
//!
//! This module owns the arithmetic of Metal's two dispatch calls (seeds 000
//! and 003), which the runtime crate calls before every launch:
//!
//! * [`DispatchMode::Threads`] — `dispatchThreads(threadsPerGrid,
//!   threadsPerThreadgroup)`: `size` is the grid in threads; Metal launches
//!   `ceil(size / tg)` threadgroups per axis and makes the last one along each
//!   axis *non-uniform* (its `threads_per_threadgroup` is the partial size), so
//!   exactly the grid runs.
//! * [`DispatchMode::Threadgroups`] — `dispatchThreadgroups(threadgroupsPerGrid,
//!   threadsPerThreadgroup)`: `size` is the threadgroup count; every
//!   threadgroup is full, and a kernel covering data that is not a multiple of
//!   the threadgroup size must bounds-check ([`cover_with_threadgroups`]).
//!
//! Waste is counted in SIMD-group lanes: a threadgroup of `t` threads forms
//! `ceil(t / 32)` SIMD groups, and lanes of those SIMD groups that run no
//! thread are idle (100 threads → 4 SIMD groups, 28 idle lanes, 21.9 %; seed
//! 000 rounds it to 22 %). Non-uniform edge threadgroups form SIMD groups for
//! their partial size only.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalog::{CatalogError, DeviceSpec};
use crate::text::{dims, thousands};

/// SIMD width and threadgroup limit used when no device is given (the
/// execution model's, seeds 000 and 002).
pub use enigma_ir::limits::{MAX_THREADS_PER_THREADGROUP as DEFAULT_MAX_THREADS_PER_THREADGROUP, SIMD_WIDTH as DEFAULT_SIMD_WIDTH};
/// Seed 000 Pitfall 2: "ideally several times more" threadgroups than cores —
/// its M2 Ultra example multiplies by 4 (76 → 304).
pub const LATENCY_HIDING_FACTOR: u32 = 4;

/// Which Metal dispatch call a geometry describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatchMode {
    /// `dispatchThreads`: `size` is the grid in threads.
    Threads,
    /// `dispatchThreadgroups`: `size` is the number of threadgroups.
    Threadgroups,
}

/// The argument of a dispatch an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatchArgument {
    /// The grid size in threads (Threads mode).
    Grid,
    /// The threadgroup count (Threadgroups mode).
    ThreadgroupsPerGrid,
    /// The threadgroup size.
    ThreadsPerThreadgroup,
    /// The data size a dispatch is meant to cover.
    Data,
}

impl std::fmt::Display for DispatchArgument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DispatchArgument::Grid => "grid size (threads per grid)",
            DispatchArgument::ThreadgroupsPerGrid => "threadgroup count (threadgroups per grid)",
            DispatchArgument::ThreadsPerThreadgroup => "threadgroup size (threads per threadgroup)",
            DispatchArgument::Data => "data size",
        })
    }
}

/// A grid axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// Axis 0.
    X,
    /// Axis 1.
    Y,
    /// Axis 2.
    Z,
}

impl Axis {
    const ALL: [Axis; 3] = [Axis::X, Axis::Y, Axis::Z];
}

impl std::fmt::Display for Axis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Axis::X => "x",
            Axis::Y => "y",
            Axis::Z => "z",
        })
    }
}

/// Why a dispatch cannot be planned.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum GeometryError {
    /// A size has a zero axis.
    #[error("the {argument} is {}: its {axis} axis is 0, and every axis must be at least 1", dims(*value))]
    ZeroAxis {
        /// Which argument.
        argument: DispatchArgument,
        /// Which axis.
        axis: Axis,
        /// The whole size.
        value: [u32; 3],
    },
    /// The threadgroup has more threads than the device allows.
    #[error("threadgroup of {threads} threads ({}) exceeds the maximum of {max}", dims(*shape))]
    ThreadgroupTooLarge {
        /// Threads in the threadgroup.
        threads: u64,
        /// Its shape.
        shape: [u32; 3],
        /// The device's (or Metal's) limit.
        max: u32,
    },
    /// One threadgroup axis is longer than the device allows.
    #[error("threadgroup size {} has {size} threads along {axis}, over the device's per-axis maximum of {max}", dims(*shape))]
    ThreadgroupAxisTooLarge {
        /// The axis.
        axis: Axis,
        /// Its length.
        size: u32,
        /// The limit.
        max: u32,
        /// The whole threadgroup shape.
        shape: [u32; 3],
    },
    /// More threadgroups along one axis than the device allows.
    #[error("{count} threadgroups along {axis} exceed the device's maximum of {max}")]
    TooManyThreadgroups {
        /// The axis.
        axis: Axis,
        /// Threadgroups along it.
        count: u32,
        /// The limit.
        max: u32,
    },
    /// A count does not fit its integer type.
    #[error("{what} overflows: {detail}")]
    Overflow {
        /// The quantity.
        what: &'static str,
        /// The numbers involved.
        detail: String,
    },
    /// A wave computation was asked for zero threadgroups per core.
    #[error("threadgroups per core must be at least 1 to count waves (got 0)")]
    ZeroThreadgroupsPerCore,
    /// A pipeline shape was asked for with impossible limits.
    #[error("cannot shape a threadgroup from thread execution width {width} and maximum {max_total} threads per threadgroup: {why}")]
    BadPipelineLimits {
        /// `threadExecutionWidth`.
        width: u32,
        /// `maxTotalThreadsPerThreadgroup`.
        max_total: u32,
        /// What is wrong.
        why: &'static str,
    },
    /// The device description is unusable.
    #[error(transparent)]
    Device(#[from] CatalogError),
}

/// The full geometry of one dispatch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DispatchGeometry {
    /// Which dispatch call.
    pub mode: DispatchMode,
    /// Threads that run, per axis (the grid in Threads mode; threadgroups × tg
    /// size in Threadgroups mode).
    pub grid: [u32; 3],
    /// Threadgroup size (the full one; edge threadgroups may be smaller).
    pub threads_per_threadgroup: [u32; 3],
    /// Threadgroups per axis.
    pub threadgroups: [u32; 3],
    /// Product of `threadgroups`.
    pub total_threadgroups: u64,
    /// Threads that run.
    pub total_threads: u64,
    /// Threadgroups × threadgroup size, including the disabled threads of
    /// non-uniform edge threadgroups.
    pub launched_threads: u64,
    /// SIMD groups in a full threadgroup: `ceil(threads / simd_width)`.
    pub simdgroups_per_threadgroup: u32,
    /// Lanes of a full threadgroup's SIMD groups that run no thread.
    pub idle_lanes_per_threadgroup: u32,
    /// Idle SIMD-group lanes as a percentage of all SIMD-group lanes formed
    /// by the dispatch (edge threadgroups form SIMD groups for their partial
    /// size).
    pub waste_percent: f64,
    /// Threads mode only: the size of the last threadgroup along each axis,
    /// when at least one axis is not a multiple of the threadgroup size.
    pub edge_threadgroup: Option<[u32; 3]>,
    /// What a person should know about this dispatch.
    pub warnings: Vec<String>,
}

fn product(d: [u32; 3]) -> Option<u64> {
    u64::from(d[0]).checked_mul(u64::from(d[1]))?.checked_mul(u64::from(d[2]))
}

fn check_nonzero(argument: DispatchArgument, value: [u32; 3]) -> Result<(), GeometryError> {
    for (i, axis) in Axis::ALL.into_iter().enumerate() {
        if value[i] == 0 {
            return Err(GeometryError::ZeroAxis { argument, axis, value });
        }
    }
    Ok(())
}

/// `ceil(data / tg)` per axis: the threadgroups `dispatchThreadgroups` needs to
/// cover `data` (seed 003's `(texture.width + w - 1) / w`). An axis whose data
/// or threadgroup size is 0 gives 0, which [`plan_dispatch`] then rejects with
/// a [`GeometryError::ZeroAxis`].
pub fn threadgroups_to_cover(data: [u32; 3], tg: [u32; 3]) -> [u32; 3] {
    let mut out = [0; 3];
    for a in 0..3 {
        out[a] = if tg[a] == 0 { 0 } else { data[a].div_ceil(tg[a]) };
    }
    out
}

/// How many elements each of `threads` threads handles in a stride loop over
/// `len` elements (seed 000 Pattern C: 4096 / 256 = 16). Zero threads handle
/// nothing, so the answer is 0.
pub fn elements_per_thread(len: u64, threads: u32) -> u64 {
    if threads == 0 {
        0
    } else {
        len.div_ceil(u64::from(threads))
    }
}

/// Seed 003 Listing 1: the threadgroup `(w, max / w, 1)` from a pipeline's
/// `threadExecutionWidth` and `maxTotalThreadsPerThreadgroup` (32 and 512 →
/// 32×16×1).
pub fn pipeline_threadgroup_shape(thread_execution_width: u32, max_total_threads_per_threadgroup: u32) -> Result<[u32; 3], GeometryError> {
    let bad = |why| GeometryError::BadPipelineLimits {
        width: thread_execution_width,
        max_total: max_total_threads_per_threadgroup,
        why,
    };
    if thread_execution_width == 0 {
        return Err(bad("the execution width is 0"));
    }
    if max_total_threads_per_threadgroup < thread_execution_width {
        return Err(bad("the maximum is smaller than one SIMD group"));
    }
    Ok([thread_execution_width, max_total_threads_per_threadgroup / thread_execution_width, 1])
}

/// Plans a dispatch; see the module documentation for the two modes.
///
/// With a `device`, its SIMD width and threadgroup limits apply and a
/// dispatch with fewer threadgroups than the device has cores is warned
/// about; without one, Metal's limits (1024 threads, SIMD width 32) apply.
pub fn plan_dispatch(
    mode: DispatchMode,
    size: [u32; 3],
    threads_per_threadgroup: [u32; 3],
    device: Option<&DeviceSpec>,
) -> Result<DispatchGeometry, GeometryError> {
    if let Some(d) = device {
        d.validate()?;
    }
    let simd = device.map_or(DEFAULT_SIMD_WIDTH, |d| d.simd_width);
    let max_tg = device.map_or(DEFAULT_MAX_THREADS_PER_THREADGROUP, |d| d.max_threads_per_threadgroup);
    let axis_max = device.map_or([DEFAULT_MAX_THREADS_PER_THREADGROUP; 3], |d| d.max_threadgroup_size_per_axis);
    let tg = threads_per_threadgroup;

    let size_arg = match mode {
        DispatchMode::Threads => DispatchArgument::Grid,
        DispatchMode::Threadgroups => DispatchArgument::ThreadgroupsPerGrid,
    };
    check_nonzero(size_arg, size)?;
    check_nonzero(DispatchArgument::ThreadsPerThreadgroup, tg)?;

    // Three u32 factors always fit in u128; the threadgroup is tiny anyway.
    let tg_threads = product(tg).ok_or(GeometryError::Overflow {
        what: "threadgroup size",
        detail: format!("{} threads", dims(tg)),
    })?;
    if tg_threads > u64::from(max_tg) {
        return Err(GeometryError::ThreadgroupTooLarge { threads: tg_threads, shape: tg, max: max_tg });
    }
    for (a, axis) in Axis::ALL.into_iter().enumerate() {
        if tg[a] > axis_max[a] {
            return Err(GeometryError::ThreadgroupAxisTooLarge { axis, size: tg[a], max: axis_max[a], shape: tg });
        }
    }
    let tg_threads32 = tg_threads as u32; // ≤ max_tg, a u32

    let (grid, threadgroups, edge) = match mode {
        DispatchMode::Threads => {
            let threadgroups = threadgroups_to_cover(size, tg);
            let mut partial = tg;
            let mut non_uniform = false;
            for a in 0..3 {
                let rem = size[a] % tg[a];
                if rem != 0 {
                    partial[a] = rem;
                    non_uniform = true;
                }
            }
            (size, threadgroups, non_uniform.then_some(partial))
        }
        DispatchMode::Threadgroups => {
            let mut grid = [0u32; 3];
            for (a, axis) in Axis::ALL.into_iter().enumerate() {
                grid[a] = size[a].checked_mul(tg[a]).ok_or_else(|| GeometryError::Overflow {
                    what: "grid size in threads",
                    detail: format!(
                        "{} threadgroups × {} threads along {axis} = {} exceeds the 32-bit thread position limit of {}",
                        thousands(u64::from(size[a])),
                        tg[a],
                        thousands(u64::from(size[a]) * u64::from(tg[a])),
                        thousands(u64::from(u32::MAX)),
                    ),
                })?;
            }
            (grid, size, None)
        }
    };

    if let Some(limit) = device.and_then(|d| d.max_threadgroups_per_grid_axis) {
        for (a, axis) in Axis::ALL.into_iter().enumerate() {
            if threadgroups[a] > limit[a] {
                return Err(GeometryError::TooManyThreadgroups { axis, count: threadgroups[a], max: limit[a] });
            }
        }
    }

    let total_threadgroups = product(threadgroups).ok_or_else(|| GeometryError::Overflow {
        what: "total threadgroup count",
        detail: format!("{} threadgroups do not fit in 64 bits", dims(threadgroups)),
    })?;
    let total_threads = product(grid).ok_or_else(|| GeometryError::Overflow {
        what: "total thread count",
        detail: format!("a grid of {} threads does not fit in 64 bits", dims(grid)),
    })?;
    let launched_threads = total_threadgroups.checked_mul(tg_threads).ok_or_else(|| GeometryError::Overflow {
        what: "launched thread count",
        detail: format!("{} threadgroups × {} threads do not fit in 64 bits", thousands(total_threadgroups), tg_threads),
    })?;

    let simdgroups_per_threadgroup = tg_threads32.div_ceil(simd);
    let idle_lanes_per_threadgroup = simdgroups_per_threadgroup * simd - tg_threads32;

    // SIMD-group lanes formed: split each axis into full threadgroups and at
    // most one partial edge threadgroup, and sum over the 8 combinations.
    let lanes_for = |threads: u128| threads.div_ceil(u128::from(simd)) * u128::from(simd);
    let mut lane_slots: u128 = 0;
    let parts: Vec<[(u128, u128); 2]> = (0..3)
        .map(|a| {
            let (full, edge_size) = match edge {
                Some(p) if p[a] != tg[a] => (u128::from(threadgroups[a] - 1), u128::from(p[a])),
                _ => (u128::from(threadgroups[a]), 0),
            };
            [(full, u128::from(tg[a])), (u128::from(edge_size > 0), edge_size)]
        })
        .collect();
    for &(cx, sx) in &parts[0] {
        for &(cy, sy) in &parts[1] {
            for &(cz, sz) in &parts[2] {
                let count = cx * cy * cz;
                if count > 0 {
                    lane_slots += count * lanes_for(sx * sy * sz);
                }
            }
        }
    }
    let waste_percent = if lane_slots == 0 {
        0.0
    } else {
        (lane_slots - u128::from(total_threads)) as f64 / lane_slots as f64 * 100.0
    };

    let mut warnings = Vec::new();
    if idle_lanes_per_threadgroup != 0 {
        let full_waste = f64::from(idle_lanes_per_threadgroup) / f64::from(simdgroups_per_threadgroup * simd) * 100.0;
        let lower = (tg_threads32 / simd) * simd;
        let upper = simdgroups_per_threadgroup * simd;
        let suggestion = if lower == 0 { format!("use {upper} threads") } else { format!("use {lower} or {upper} threads") };
        warnings.push(format!(
            "threadgroup size {tg_threads} is not a multiple of the SIMD width {simd}: each threadgroup forms \
             {simdgroups_per_threadgroup} SIMD groups with {idle_lanes_per_threadgroup} idle lanes ({full_waste:.1} % waste); \
             {suggestion}"
        ));
    }
    if let Some(p) = edge {
        warnings.push(format!(
            "the grid is not a multiple of the threadgroup size: the last threadgroup along each axis is {} \
             (threads_per_threadgroup reports that partial size); a kernel that assumes full threadgroups \
             must reduce over the actual size",
            dims(p)
        ));
    }
    if let Some(d) = device {
        let cores = u64::from(d.gpu_cores);
        if total_threadgroups < cores {
            warnings.push(format!(
                "{} threadgroup{} on the {} cores of {} leave{} {} cores idle; dispatch at least {} threadgroups, \
                 better {}+ for latency hiding",
                thousands(total_threadgroups),
                if total_threadgroups == 1 { "" } else { "s" },
                cores,
                d.name,
                if total_threadgroups == 1 { "s" } else { "" },
                cores - total_threadgroups,
                cores,
                cores * u64::from(LATENCY_HIDING_FACTOR),
            ));
        }
    }

    Ok(DispatchGeometry {
        mode,
        grid,
        threads_per_threadgroup: tg,
        threadgroups,
        total_threadgroups,
        total_threads,
        launched_threads,
        simdgroups_per_threadgroup,
        idle_lanes_per_threadgroup,
        waste_percent,
        edge_threadgroup: edge,
        warnings,
    })
}

/// A `dispatchThreadgroups` launch sized to cover a data extent (seed 003).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoverPlan {
    /// The dispatch (Threadgroups mode).
    #[serde(flatten)]
    pub geometry: DispatchGeometry,
    /// The data extent, one thread per element.
    pub data: [u32; 3],
    /// Elements of data.
    pub data_elements: u64,
    /// Launched threads that fall outside the data.
    pub out_of_bounds_threads: u64,
    /// Whether the kernel must bounds-check (`launched > data` along some axis).
    pub needs_bounds_check: bool,
}

/// Threadgroups mode covering `data` with `ceil(data / tg)` threadgroups per
/// axis. When that over-covers the data along any axis, the plan says the
/// kernel must bounds-check (1920×1080 with 32×16), and when it covers the
/// data exactly (1024×768 with 32×16) it says nothing.
pub fn cover_with_threadgroups(data: [u32; 3], tg: [u32; 3], device: Option<&DeviceSpec>) -> Result<CoverPlan, GeometryError> {
    check_nonzero(DispatchArgument::Data, data)?;
    check_nonzero(DispatchArgument::ThreadsPerThreadgroup, tg)?;
    let count = threadgroups_to_cover(data, tg);
    let mut geometry = plan_dispatch(DispatchMode::Threadgroups, count, tg, device)?;
    let data_elements = product(data).ok_or_else(|| GeometryError::Overflow {
        what: "data element count",
        detail: format!("{} elements do not fit in 64 bits", dims(data)),
    })?;
    let needs_bounds_check = (0..3).any(|a| geometry.grid[a] != data[a]);
    let out_of_bounds_threads = geometry.total_threads - data_elements;
    if needs_bounds_check {
        let axes: Vec<String> = Axis::ALL
            .into_iter()
            .enumerate()
            .filter(|&(a, _)| geometry.grid[a] != data[a])
            .map(|(a, axis)| format!("position.{axis} >= {}", data[a]))
            .collect();
        geometry.warnings.push(format!(
            "{} threadgroups of {} launch {} threads for {} data elements ({}): {} threads ({:.2} %) fall outside \
             the data, so the kernel must bounds-check (`if ({}) return;`) — or use dispatch_threads, which \
             covers exactly the grid",
            dims(count),
            dims(tg),
            thousands(geometry.total_threads),
            thousands(data_elements),
            dims(data),
            thousands(out_of_bounds_threads),
            out_of_bounds_threads as f64 / geometry.total_threads as f64 * 100.0,
            axes.join(" || "),
        ));
    }
    Ok(CoverPlan { geometry, data, data_elements, out_of_bounds_threads, needs_bounds_check })
}

/// How a number of threadgroups spreads over a device's cores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Waves {
    /// Threadgroups in the dispatch.
    pub threadgroups: u64,
    /// Cores of the device.
    pub cores: u32,
    /// Threadgroups resident on one core at a time.
    pub threadgroups_per_core: u32,
    /// `cores × threadgroups_per_core`.
    pub concurrent_threadgroups: u64,
    /// `threadgroups / concurrent_threadgroups`.
    pub waves_exact: f64,
    /// Waves actually run: `ceil(waves_exact)`.
    pub waves: u64,
    /// Threadgroups in the last wave.
    pub last_wave_threadgroups: u64,
    /// How full the last wave is, in percent.
    pub last_wave_fill_percent: f64,
}

/// Waves of a dispatch: total threadgroups / (cores × threadgroups per core)
/// (seed 000: 64 threadgroups on the 16 cores of an M1 Pro at one per core →
/// 4 waves; seed 002 §4.3: 4,096 tiles on 80 slots → 51.2, i.e. 52 waves).
pub fn waves(total_threadgroups: u64, device: &DeviceSpec, threadgroups_per_core: u32) -> Result<Waves, GeometryError> {
    device.validate()?;
    if threadgroups_per_core == 0 {
        return Err(GeometryError::ZeroThreadgroupsPerCore);
    }
    let concurrent = u64::from(device.gpu_cores) * u64::from(threadgroups_per_core);
    let waves = total_threadgroups.div_ceil(concurrent);
    let last = if total_threadgroups == 0 { 0 } else { total_threadgroups - (waves - 1) * concurrent };
    Ok(Waves {
        threadgroups: total_threadgroups,
        cores: device.gpu_cores,
        threadgroups_per_core,
        concurrent_threadgroups: concurrent,
        waves_exact: total_threadgroups as f64 / concurrent as f64,
        waves,
        last_wave_threadgroups: last,
        last_wave_fill_percent: last as f64 / concurrent as f64 * 100.0,
    })
}

/// Seed 000 Pitfall 2's targets for a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadgroupTargets {
    /// At least one threadgroup per core ("Minimum threadgroups for full
    /// utilization": 76 on an M2 Ultra).
    pub minimum: u64,
    /// Several waves for latency hiding: `cores × 4` (304 on an M2 Ultra).
    pub better: u64,
}

/// How many threadgroups keep `device` busy (seed 000 Pitfall 2).
pub fn threadgroup_targets(device: &DeviceSpec) -> ThreadgroupTargets {
    let cores = u64::from(device.gpu_cores);
    ThreadgroupTargets { minimum: cores, better: cores * u64::from(LATENCY_HIDING_FACTOR) }
}
