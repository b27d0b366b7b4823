//! The tuner's records: one candidate's options ([`Choice`]), its outcome
//! ([`Trial`], [`TuneReport`]), the shape class a tuning serves
//! ([`shape_class`]) and the tuning cache on disk that the registry reads
//! ([`cached_choice`]) and `enigma tune` writes ([`store`]). The cache's
//! rules are in [`crate::tune`]'s module doc.

use crate::Options;
use enigma_kernels::library::tile::GemmTile;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Version of the cache file's format.
const CACHE_VERSION: u32 = 1;

/// The tuned options of one candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub threads: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unroll: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_per_simdgroup: Option<u32>,
    /// The matrix multiply's tile (`threads` is then its threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<GemmTile>,
}

impl Choice {
    /// `base` with this choice's options set.
    /// A candidate is tried on one entry, so `unroll` goes to every
    /// family's field for it (loads in flight for the reductions and GEMV,
    /// items for the prefix sums, words per iteration or per load for the
    /// quantized decode kernels): the entry's own family reads it.
    pub fn apply(&self, base: &Options) -> Options {
        let mut o = base.clone();
        o.threads = Some(self.threads);
        o.reduce.loads = self.unroll;
        o.gemv.loads = self.unroll;
        o.scan.items = self.unroll;
        o.qmatmul.words_per_iteration = self.unroll;
        o.qmatmul.words_per_load = self.unroll;
        o.gemv.rows_per_simdgroup = self.rows_per_simdgroup;
        o.gemm.tile = self.tile;
        o
    }

    /// Whether `options` set any of the options a choice sets.
    pub fn is_set_in(options: &Options) -> bool {
        let unroll = [options.reduce.loads, options.gemv.loads, options.scan.items, options.qmatmul.words_per_iteration, options.qmatmul.words_per_load];
        options.threads.is_some() || unroll.iter().any(Option::is_some) || options.gemv.rows_per_simdgroup.is_some() || options.gemm.tile.is_some()
    }
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(t) = self.tile {
            write!(f, "tile={t} ")?;
        }
        write!(f, "threads={}", self.threads)?;
        if let Some(u) = self.unroll {
            write!(f, " unroll={u}")?;
        }
        if let Some(r) = self.rows_per_simdgroup {
            write!(f, " rows/simdgroup={r}")?;
        }
        Ok(())
    }
}

/// What happened to one candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Timed, and its output matched the reference.
    Timed { median_us: f64, best_us: f64, gb_per_s: f64 },
    /// Not run: over a limit, or rejected by the library.
    Skipped { reason: String },
    /// Ran, but its output did not match the reference.
    Wrong { reason: String },
}

/// One candidate and its outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Trial {
    pub choice: Choice,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The result of tuning one entry at one shape.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TuneReport {
    pub kernel: String,
    pub device: String,
    pub shape: Vec<usize>,
    pub shape_class: String,
    /// Whether times are device times (else wall times).
    pub device_timed: bool,
    pub best: Option<Choice>,
    pub trials: Vec<Trial>,
}

/// The shape class of `shape`: each dimension rounded up to a power of two.
pub fn shape_class(shape: &[usize]) -> String {
    shape.iter().map(|d| d.max(&1).next_power_of_two().to_string()).collect::<Vec<_>>().join("x")
}

/// One cached choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    pub device: String,
    pub kernel: String,
    pub shape_class: String,
    pub choice: Choice,
    pub median_us: f64,
    /// Seconds since 1970 when it was tuned.
    pub tuned_at: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    entries: Vec<CacheEntry>,
}

/// The cache file's path (see the module docs), or `None` without a home.
pub fn cache_path() -> Option<PathBuf> {
    let dir = if let Some(d) = std::env::var_os("ENIGMA_CACHE_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(d).join("enigma")
    } else {
        PathBuf::from(std::env::var_os("HOME")?).join(".cache").join("enigma")
    };
    Some(dir.join("tune.json"))
}

/// Reads the cache at `path`: empty when missing; a warning (returned) and
/// empty when unreadable or of another format.
pub fn read_cache(path: &std::path::Path) -> (Vec<CacheEntry>, Option<String>) {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (vec![], None),
        Err(e) => return (vec![], Some(format!("enigma: ignoring the tuning cache {}: {e}", path.display()))),
    };
    match serde_json::from_str::<CacheFile>(&text) {
        Ok(f) if f.version == CACHE_VERSION => (f.entries, None),
        Ok(f) => (vec![], Some(format!("enigma: ignoring the tuning cache {}: format version {} (this enigma reads {CACHE_VERSION})", path.display(), f.version))),
        Err(e) => (vec![], Some(format!("enigma: ignoring the tuning cache {}: not a tuning cache ({e})", path.display()))),
    }
}

/// Records `report`'s best choice in the cache at `path` (replacing the
/// entry for the same device, kernel and shape class) and returns it.
pub fn store(path: &std::path::Path, report: &TuneReport) -> Result<Option<CacheEntry>, std::io::Error> {
    let Some(choice) = report.best else { return Ok(None) };
    let median_us = report
        .trials
        .iter()
        .find_map(|t| match t.outcome {
            Outcome::Timed { median_us, .. } if t.choice == choice => Some(median_us),
            _ => None,
        })
        .unwrap_or(0.0);
    let entry = CacheEntry {
        device: report.device.clone(),
        kernel: report.kernel.clone(),
        shape_class: report.shape_class.clone(),
        choice,
        median_us,
        tuned_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs(),
    };
    let (mut entries, _) = read_cache(path);
    entries.retain(|e| !(e.device == entry.device && e.kernel == entry.kernel && e.shape_class == entry.shape_class));
    entries.push(entry.clone());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(&CacheFile { version: CACHE_VERSION, entries }).map_err(std::io::Error::other)?;
    // Write then rename, so a reader never sees half a file.
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    reset_loaded_cache();
    Ok(Some(entry))
}

fn loaded() -> &'static Mutex<Option<Vec<CacheEntry>>> {
    static CACHE: OnceLock<Mutex<Option<Vec<CacheEntry>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(None))
}

/// Forgets the cache read by [`cached_choice`], so the next call reads the
/// file again (after [`store`], or when `ENIGMA_CACHE_DIR` changed).
pub fn reset_loaded_cache() {
    *loaded().lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// The cached choice for `kernel` at `shape` on `device`, unless
/// `ENIGMA_TUNE_CACHE=off`. Reads the file on first use.
pub fn cached_choice(device: &str, kernel: &str, shape: &[usize]) -> Option<Choice> {
    if std::env::var("ENIGMA_TUNE_CACHE").is_ok_and(|v| v == "off" || v == "0") {
        return None;
    }
    let mut guard = loaded().lock().unwrap_or_else(|e| e.into_inner());
    let entries = guard.get_or_insert_with(|| match cache_path() {
        Some(path) => {
            let (entries, warning) = read_cache(&path);
            if let Some(w) = warning {
                eprintln!("{w}");
            }
            entries
        }
        None => vec![],
    });
    let class = shape_class(shape);
    entries.iter().find(|e| e.device == device && e.kernel == kernel && e.shape_class == class).map(|e| e.choice)
}
