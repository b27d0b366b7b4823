//! The device catalogue: what enigma knows about a GPU before it runs anything.
//!
//! This module owns [`DeviceSpec`], the device description every analysis in
//! this crate takes, and the built-in catalogue of Apple silicon GPUs
//! transcribed from the seeds (seed 004's chip tables, seed 000's M2 Ultra,
//! seed 002's M4 Max throughput figure) and, for the M5, from Apple's
//! announcement of it. Runtime backends build a
//! [`DeviceSpec`] from what the driver reports (for CUDA: SMs as cores,
//! shared memory per block and per SM, threads per SM …) so the same
//! geometry and occupancy code applies to them.
//!
//! Every catalogue entry names its sources. Figures that no seed gives are
//! `None` (for example FP16 throughput of every chip but the M4 Max, and the
//! per-core thread limit of all Apple GPUs, which Apple does not publish);
//! analyses report "unknown" for what depends on them instead of inventing a
//! number.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Errors from looking up or checking a device description.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CatalogError {
    /// No catalogue entry matches the name.
    #[error("unknown device `{name}`; known devices: {}", known.join(", "))]
    UnknownDevice {
        /// The name that was asked for.
        name: String,
        /// The ids of the catalogue entries.
        known: Vec<String>,
    },
    /// A core-count variant outside the chip's range was asked for.
    #[error("{device} comes with {min}–{max} GPU cores; a {requested}-core variant does not exist")]
    CoresOutOfRange {
        /// The chip.
        device: String,
        /// The core count that was asked for.
        requested: u32,
        /// Smallest configuration.
        min: u32,
        /// Largest configuration.
        max: u32,
    },
    /// A device description has a field no analysis can work with.
    #[error("device `{device}` is not usable for analysis: {field} is {value} ({why})")]
    InvalidSpec {
        /// The device's name.
        device: String,
        /// The offending field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must satisfy.
        why: &'static str,
    },
}

/// Where a device description came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecOrigin {
    /// The built-in catalogue (transcribed from the seeds).
    Catalog,
    /// Queried from a driver at run time.
    Runtime,
    /// Written by hand (tests, `--tflops` overrides, …).
    Custom,
}

/// Everything the analyses need to know about one GPU.
///
/// Field meanings are general so that runtime devices fit: on Apple GPUs a
/// "core" is a GPU core, on NVIDIA GPUs it is a streaming multiprocessor; a
/// "threadgroup" is a CUDA block and "threadgroup memory" is shared memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// Short key used on the command line, e.g. `m4-max`.
    pub id: String,
    /// Marketing name, e.g. `Apple M4 Max`.
    pub name: String,
    /// Vendor, e.g. `Apple`, `NVIDIA`.
    pub vendor: String,
    /// GPU family as the vendor names it (`Apple 7`, `sm_90`), if known.
    pub family: Option<String>,
    /// Cores (compute units / SMs) of this configuration.
    pub gpu_cores: u32,
    /// Smallest core count the chip ships with (equals `gpu_cores_max` when
    /// there is one configuration).
    pub gpu_cores_min: u32,
    /// Largest core count the chip ships with; the catalogue's default variant.
    pub gpu_cores_max: u32,
    /// Peak memory bandwidth in GB/s (10^9 bytes per second), if known.
    pub memory_bandwidth_gb_s: Option<f64>,
    /// Peak FP16 throughput in TFLOPS (10^12 FLOP per second), if known.
    pub fp16_tflops: Option<f64>,
    /// Threads per SIMD group (warp). 32 on every device enigma targets.
    pub simd_width: u32,
    /// Most threads in one threadgroup.
    pub max_threads_per_threadgroup: u32,
    /// Most threads along each threadgroup axis.
    pub max_threadgroup_size_per_axis: [u32; 3],
    /// Most threadgroups along each grid axis, where the API limits it
    /// (CUDA: 2^31−1 × 65535 × 65535); `None` when only the 32-bit position
    /// builtins limit it (Metal).
    pub max_threadgroups_per_grid_axis: Option<[u32; 3]>,
    /// Threadgroup memory one threadgroup may allocate, in bytes.
    pub threadgroup_memory_bytes: u32,
    /// Threadgroup memory shared by the threadgroups resident on one core, in
    /// bytes: the pool occupancy divides. For Apple GPUs the seeds use the
    /// per-threadgroup limit (seed 002 §4.1: `floor(32768 / X)` threadgroups
    /// per core; seed 004: "32KB (max) → 1 threadgroup per core"), so it
    /// equals `threadgroup_memory_bytes`. On an H100 it is 228 KiB per SM.
    pub threadgroup_memory_per_core_bytes: u32,
    /// Resident threads per core, if known. Apple does not publish it and no
    /// seed states it (seed 002 §4.1 counts 1,536 threads on one core, so it
    /// is at least that); `None` means "not a known bound". H100: 2048.
    pub max_threads_per_core: Option<u32>,
    /// Resident SIMD groups (warps) per core, if known. H100: 64.
    pub max_simdgroups_per_core: Option<u32>,
    /// Resident threadgroups (blocks) per core, if known. H100: 32.
    pub max_threadgroups_per_core: Option<u32>,
    /// Native bfloat16 support, if known.
    pub bf16: Option<bool>,
    /// Where this description came from.
    pub origin: SpecOrigin,
    /// Where each figure comes from, in words.
    pub sources: Vec<String>,
}

/// Apple's fixed limits (seed 002 §1, seed 004 "Limits"), shared by every
/// catalogue entry.
const APPLE_SIMD_WIDTH: u32 = enigma_ir::limits::SIMD_WIDTH;
const APPLE_MAX_TG_THREADS: u32 = enigma_ir::limits::MAX_THREADS_PER_THREADGROUP;
const APPLE_TG_MEMORY: u32 = enigma_ir::limits::MAX_THREADGROUP_MEMORY_BYTES as u32;

impl DeviceSpec {
    /// A device with Apple-style limits (SIMD width 32, 1024 threads per
    /// threadgroup, 32 KiB threadgroup memory) and `gpu_cores` cores; every
    /// unknown figure is `None`. Runtime backends start from this and
    /// overwrite the fields the driver reports.
    pub fn custom(name: impl Into<String>, gpu_cores: u32) -> Self {
        let name = name.into();
        DeviceSpec {
            id: normalize(&name),
            name,
            vendor: String::new(),
            family: None,
            gpu_cores,
            gpu_cores_min: gpu_cores,
            gpu_cores_max: gpu_cores,
            memory_bandwidth_gb_s: None,
            fp16_tflops: None,
            simd_width: APPLE_SIMD_WIDTH,
            max_threads_per_threadgroup: APPLE_MAX_TG_THREADS,
            max_threadgroup_size_per_axis: [APPLE_MAX_TG_THREADS; 3],
            max_threadgroups_per_grid_axis: None,
            threadgroup_memory_bytes: APPLE_TG_MEMORY,
            threadgroup_memory_per_core_bytes: APPLE_TG_MEMORY,
            max_threads_per_core: None,
            max_simdgroups_per_core: None,
            max_threadgroups_per_core: None,
            bf16: None,
            origin: SpecOrigin::Custom,
            sources: Vec::new(),
        }
    }

    /// Checks the fields the analyses divide by or compare against.
    pub fn validate(&self) -> Result<(), CatalogError> {
        let bad = |field: &'static str, value: u64, why: &'static str| {
            Err(CatalogError::InvalidSpec { device: self.name.clone(), field, value, why })
        };
        if self.gpu_cores == 0 {
            return bad("gpu_cores", 0, "a device needs at least one core");
        }
        if self.simd_width == 0 {
            return bad("simd_width", 0, "a SIMD group has at least one lane");
        }
        if self.max_threads_per_threadgroup == 0 {
            return bad("max_threads_per_threadgroup", 0, "a threadgroup has at least one thread");
        }
        if self.max_threadgroup_size_per_axis.contains(&0) {
            return bad("max_threadgroup_size_per_axis", 0, "every axis allows at least one thread");
        }
        if let Some(t) = self.max_threads_per_core {
            if t == 0 {
                return bad("max_threads_per_core", 0, "a core holds at least one thread");
            }
        }
        if let Some(t) = self.max_simdgroups_per_core {
            if t == 0 {
                return bad("max_simdgroups_per_core", 0, "a core holds at least one SIMD group");
            }
        }
        if let Some(t) = self.max_threadgroups_per_core {
            if t == 0 {
                return bad("max_threadgroups_per_core", 0, "a core holds at least one threadgroup");
            }
        }
        if self.gpu_cores_min > self.gpu_cores_max {
            return bad("gpu_cores_min", u64::from(self.gpu_cores_min), "must not exceed gpu_cores_max");
        }
        Ok(())
    }

    /// The two roofs of `flops` and `bytes` on this device, in seconds:
    /// compute at its FP16 throughput (`None` where it is unknown, or where
    /// `half` is false: the catalogue has no FP32 throughput) and memory at
    /// its peak bandwidth (`None` where unknown).
    pub fn roof_seconds(&self, flops: f64, bytes: f64, half: bool) -> (Option<f64>, Option<f64>) {
        let compute = self.fp16_tflops.filter(|t| half && *t > 0.0).map(|t| flops / (t * 1e12));
        let memory = self.memory_bandwidth_gb_s.filter(|b| *b > 0.0).map(|b| bytes / (b * 1e9));
        (compute, memory)
    }

    /// Peak FP16 FLOPs per byte of memory traffic (`fp16_tflops × 10^12 /
    /// (bandwidth × 10^9)`), when both are known. M4 Max: 32 TFLOPS / 546 GB/s
    /// = 58.6 (seed 002 §5.1: "roughly 59").
    pub fn machine_balance(&self) -> Option<f64> {
        let tflops = self.fp16_tflops?;
        let bw = self.memory_bandwidth_gb_s?;
        if bw <= 0.0 || tflops <= 0.0 {
            return None;
        }
        Some(tflops * 1e12 / (bw * 1e9))
    }

    /// The core count as the seeds print it: `40`, or `7–8` for a range.
    pub fn cores_label(&self) -> String {
        if self.gpu_cores_min == self.gpu_cores_max {
            self.gpu_cores_max.to_string()
        } else {
            format!("{}–{}", self.gpu_cores_min, self.gpu_cores_max)
        }
    }

    /// The same chip with `cores` GPU cores (a binned configuration).
    pub fn with_cores(&self, cores: u32) -> Result<DeviceSpec, CatalogError> {
        if cores < self.gpu_cores_min || cores > self.gpu_cores_max {
            return Err(CatalogError::CoresOutOfRange {
                device: self.name.clone(),
                requested: cores,
                min: self.gpu_cores_min,
                max: self.gpu_cores_max,
            });
        }
        let mut spec = self.clone();
        spec.gpu_cores = cores;
        if self.gpu_cores_min != self.gpu_cores_max {
            spec.id = format!("{}-{}c", self.id, cores);
            spec.name = format!("{} ({}-core GPU)", self.name, cores);
        }
        Ok(spec)
    }

    /// Every shipped core configuration of this chip, smallest first. The
    /// seeds give ranges as `min–max`; the chips ship in those two
    /// configurations.
    pub fn variants(&self) -> Vec<DeviceSpec> {
        let mut cores = vec![self.gpu_cores_min];
        if self.gpu_cores_max != self.gpu_cores_min {
            cores.push(self.gpu_cores_max);
        }
        cores.into_iter().filter_map(|c| self.with_cores(c).ok()).collect()
    }
}

/// One row of the catalogue, before it becomes a [`DeviceSpec`].
struct Entry {
    id: &'static str,
    chip: &'static str,
    family: Option<&'static str>,
    cores: (u32, u32),
    bandwidth_gb_s: Option<f64>,
    fp16_tflops: Option<f64>,
    bf16: bool,
    sources: &'static [&'static str],
}

/// Seed 004 gives the GPU family and bfloat16 support in its base-chip table
/// only; the Pro/Max/Ultra chips share their generation's GPU, so they take the
/// base chip's family and bf16 column.
const ENTRIES: &[Entry] = &[
    Entry {
        id: "m1",
        chip: "M1",
        family: Some("Apple 7"),
        cores: (7, 8),
        bandwidth_gb_s: Some(68.0),
        fp16_tflops: None,
        bf16: false,
        sources: &["seed 004 base-chip table"],
    },
    Entry {
        id: "m2",
        chip: "M2",
        family: Some("Apple 8"),
        cores: (8, 10),
        bandwidth_gb_s: Some(100.0),
        fp16_tflops: None,
        bf16: false,
        sources: &["seed 004 base-chip table"],
    },
    Entry {
        id: "m3",
        chip: "M3",
        family: Some("Apple 9"),
        cores: (10, 10),
        bandwidth_gb_s: Some(100.0),
        fp16_tflops: None,
        bf16: true,
        sources: &["seed 004 base-chip table"],
    },
    Entry {
        id: "m4",
        chip: "M4",
        family: Some("Apple 9+"),
        cores: (10, 10),
        bandwidth_gb_s: Some(120.0),
        fp16_tflops: None,
        bf16: true,
        sources: &["seed 004 base-chip table"],
    },
    Entry {
        id: "m1-pro",
        chip: "M1 Pro",
        family: Some("Apple 7"),
        cores: (14, 16),
        bandwidth_gb_s: Some(200.0),
        fp16_tflops: None,
        bf16: false,
        sources: &[
            "seed 004 Pro/Max/Ultra table (cores, bandwidth)",
            "family and bf16 of the M1 generation (seed 004 base-chip table)",
            "seed 000 wave example: 16 compute units",
        ],
    },
    Entry {
        id: "m1-max",
        chip: "M1 Max",
        family: Some("Apple 7"),
        cores: (24, 32),
        bandwidth_gb_s: Some(400.0),
        fp16_tflops: None,
        bf16: false,
        sources: &[
            "seed 004 Pro/Max/Ultra table (cores, bandwidth)",
            "family and bf16 of the M1 generation (seed 004 base-chip table)",
        ],
    },
    Entry {
        id: "m2-max",
        chip: "M2 Max",
        family: Some("Apple 8"),
        cores: (30, 38),
        bandwidth_gb_s: Some(400.0),
        fp16_tflops: None,
        bf16: false,
        sources: &[
            "seed 004 Pro/Max/Ultra table (cores, bandwidth)",
            "family and bf16 of the M2 generation (seed 004 base-chip table)",
        ],
    },
    Entry {
        id: "m2-ultra",
        chip: "M2 Ultra",
        family: Some("Apple 8"),
        cores: (76, 76),
        bandwidth_gb_s: None,
        fp16_tflops: None,
        bf16: false,
        sources: &[
            "seed 000 Pitfall 2: 76 compute units",
            "family and bf16 of the M2 generation (seed 004 base-chip table)",
            "no seed gives its memory bandwidth",
        ],
    },
    Entry {
        id: "m3-max",
        chip: "M3 Max",
        family: Some("Apple 9"),
        cores: (40, 40),
        bandwidth_gb_s: Some(400.0),
        fp16_tflops: None,
        bf16: true,
        sources: &[
            "seed 004 Pro/Max/Ultra table (cores, bandwidth)",
            "family and bf16 of the M3 generation (seed 004 base-chip table)",
        ],
    },
    Entry {
        id: "m4-pro",
        chip: "M4 Pro",
        family: Some("Apple 9+"),
        cores: (20, 20),
        bandwidth_gb_s: Some(273.0),
        fp16_tflops: None,
        bf16: true,
        sources: &[
            "seed 004 Pro/Max/Ultra table (cores, bandwidth)",
            "family and bf16 of the M4 generation (seed 004 base-chip table)",
        ],
    },
    Entry {
        id: "m4-max",
        chip: "M4 Max",
        family: Some("Apple 9+"),
        cores: (40, 40),
        bandwidth_gb_s: Some(546.0),
        fp16_tflops: Some(32.0),
        bf16: true,
        sources: &[
            "seed 004 Pro/Max/Ultra table (cores, bandwidth)",
            "seed 002 §1 (40 cores, ~32 TFLOPS FP16, 546 GB/s)",
            "family and bf16 of the M4 generation (seed 004 base-chip table)",
        ],
    },
    Entry {
        id: "m5",
        chip: "M5",
        family: None,
        cores: (10, 10),
        bandwidth_gb_s: Some(153.0),
        fp16_tflops: None,
        bf16: true,
        sources: &[
            "Apple's M5 announcement, October 2025 (10-core GPU with a neural accelerator in each core, 153 GB/s); \
             Apple gives its AI compute only as 'over 4x M4', no FP16 figure, and no GPU family in that text",
            "bf16 as every GPU since the M3 generation (seed 004 base-chip table)",
        ],
    },
];

fn build(entry: &Entry) -> DeviceSpec {
    let mut spec = DeviceSpec::custom(format!("Apple {}", entry.chip), entry.cores.1);
    spec.id = entry.id.to_string();
    spec.vendor = "Apple".to_string();
    spec.family = entry.family.map(str::to_string);
    spec.gpu_cores_min = entry.cores.0;
    spec.gpu_cores_max = entry.cores.1;
    spec.memory_bandwidth_gb_s = entry.bandwidth_gb_s;
    spec.fp16_tflops = entry.fp16_tflops;
    spec.bf16 = Some(entry.bf16);
    spec.origin = SpecOrigin::Catalog;
    spec.sources = entry.sources.iter().map(|s| s.to_string()).collect();
    spec.sources.push(
        "SIMD width 32, 1024 threads per threadgroup, 32 KiB threadgroup memory: seed 002 §1, seed 004".to_string(),
    );
    spec
}

/// Every catalogue entry, default (largest) configuration, in seed 004's order
/// with the M2 Ultra after the M2 Max, then the M5.
pub fn all() -> Vec<DeviceSpec> {
    ENTRIES.iter().map(build).collect()
}

/// Lower-case letters and digits only: "M4 Max", "m4-max" and "m4_max" all
/// become "m4max".
fn normalize(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

/// Looks a device up by name, ignoring case and punctuation: `m4-max`,
/// `M4 Max` and `Apple M4 Max` all find the M4 Max. A core count after the
/// chip name picks a configuration: `m1-max-24`, `M1 Max 24-core`,
/// `m1max24c`.
pub fn find(name: &str) -> Result<DeviceSpec, CatalogError> {
    let mut query = normalize(name);
    if let Some(rest) = query.strip_prefix("apple") {
        query = rest.to_string();
    }
    let unknown = || CatalogError::UnknownDevice {
        name: name.to_string(),
        known: ENTRIES.iter().map(|e| e.id.to_string()).collect(),
    };
    if query.is_empty() {
        return Err(unknown());
    }
    // Exact chip first, then "<chip><cores>[c|core|cores|coregpu]".
    if let Some(entry) = ENTRIES.iter().find(|e| normalize(e.id) == query) {
        return Ok(build(entry));
    }
    for entry in ENTRIES {
        let key = normalize(entry.id);
        let Some(rest) = query.strip_prefix(&key) else { continue };
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let suffix = &rest[digits.len()..];
        if digits.is_empty() || !matches!(suffix, "" | "c" | "core" | "cores" | "coregpu" | "gpu") {
            continue;
        }
        let Ok(cores) = digits.parse::<u32>() else { continue };
        return build(entry).with_cores(cores);
    }
    Err(unknown())
}
