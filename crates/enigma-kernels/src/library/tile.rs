//! The tile every GEMM family of the library shares ([`TileShape`]: `m × n`
//! outputs per threadgroup, `k` deep per slice; the SIMD-group GEMMs split it
//! over a grid of SIMD groups, [`GemmTile`], the SIMT GEMM over threads in
//! blocks), the limits a tile must fit ([`ThreadgroupLimits`]), the tiles
//! the autotuner tries ([`gemm_tiles`]) and the default tile per shape
//! ([`select_tile`]).

use enigma_analysis::tiles::staged_slice_bytes;
pub use enigma_analysis::tiles::TileShape;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What one threadgroup may use on a device: the limits a GEMM tile (and
/// any tuned threadgroup size) must fit. The runtime's `DeviceInfo` carries
/// both (32 KiB of threadgroup memory on Apple GPUs and the simulator, the
/// opt-in limit on CUDA GPUs: 227 KiB on an H100).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ThreadgroupLimits {
    /// Threads one threadgroup may have.
    pub max_threads: u32,
    /// Bytes of threadgroup memory one threadgroup may use.
    pub max_memory_bytes: u64,
}

impl ThreadgroupLimits {
    /// The execution model's portable limits (`enigma_ir::limits`): 1024
    /// threads, 32 KiB.
    pub const PORTABLE: ThreadgroupLimits = ThreadgroupLimits {
        max_threads: enigma_ir::limits::MAX_THREADS_PER_THREADGROUP,
        max_memory_bytes: enigma_ir::limits::MAX_THREADGROUP_MEMORY_BYTES,
    };
}

/// One configuration of enigma's staged GEMM (the planner's
/// `TileVariant::Staged`, [`super::gemm`]), shared by the SIMD-group GEMM
/// families: a tile of C per threadgroup ([`TileShape`]: `m × n`, `k` deep
/// per slice of K), split over `sg_rows × sg_cols` SIMD groups. Its
/// serialized form (the tuning cache's) names the fields `tm, tn, tk,
/// sg_rows, sg_cols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "GemmTileFields", into = "GemmTileFields")]
pub struct GemmTile {
    /// The tile of C per threadgroup and its depth along K.
    pub shape: TileShape,
    /// SIMD groups along M.
    pub sg_rows: u32,
    /// SIMD groups along N.
    pub sg_cols: u32,
}

/// [`GemmTile`]'s serialized form: its five numbers by name.
#[derive(Clone, Copy, Serialize, Deserialize)]
struct GemmTileFields {
    tm: u32,
    tn: u32,
    tk: u32,
    sg_rows: u32,
    sg_cols: u32,
}

impl From<GemmTileFields> for GemmTile {
    fn from(f: GemmTileFields) -> GemmTile {
        GemmTile::new(f.tm, f.tn, f.tk, f.sg_rows, f.sg_cols)
    }
}

impl From<GemmTile> for GemmTileFields {
    fn from(t: GemmTile) -> GemmTileFields {
        GemmTileFields { tm: t.shape.m, tn: t.shape.n, tk: t.shape.k, sg_rows: t.sg_rows, sg_cols: t.sg_cols }
    }
}

impl GemmTile {
    /// `tm × tn × tk` over `sg_rows × sg_cols` SIMD groups.
    pub const fn new(tm: u32, tn: u32, tk: u32, sg_rows: u32, sg_cols: u32) -> GemmTile {
        GemmTile { shape: TileShape::new(tm, tn, tk), sg_rows, sg_cols }
    }

    /// Threads per threadgroup: 32 per SIMD group (saturating).
    pub fn threads(&self) -> u32 {
        enigma_ir::limits::SIMD_WIDTH.saturating_mul(self.sg_rows).saturating_mul(self.sg_cols)
    }

    /// Threadgroup memory of the untransposed kernel with `elem_bytes`-byte
    /// inputs: the `tm × tk` slice of A and the `tk × tn` slice of B, rows
    /// padded (`enigma_analysis::tiles::staged_slice_bytes`, the rule the kernel declares by).
    pub fn threadgroup_memory_bytes(&self, elem_bytes: u32) -> u64 {
        let TileShape { m, n, k } = self.shape;
        staged_slice_bytes(m, k, elem_bytes).saturating_add(staged_slice_bytes(k, n, elem_bytes))
    }

    /// Whether the tile's threads and threadgroup memory (with
    /// `elem_bytes`-byte inputs) are within `limits`.
    pub fn fits(&self, elem_bytes: u32, limits: &ThreadgroupLimits) -> bool {
        self.threads() <= limits.max_threads && self.threadgroup_memory_bytes(elem_bytes) <= limits.max_memory_bytes
    }
}

/// `128x128x32/2x2`: the tile, then the SIMD-group grid.
impl std::fmt::Display for GemmTile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}x{}", self.shape, self.sg_rows, self.sg_cols)
    }
}

/// Why a text is not a [`GemmTile`].
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("`{text}` is not a GEMM tile like 128x128x32/2x2 (TMxTNxTK/ROWSxCOLS)")]
pub struct ParseGemmTileError {
    /// The text.
    pub text: String,
}

impl std::str::FromStr for GemmTile {
    type Err = ParseGemmTileError;

    /// Parses `TMxTNxTK/ROWSxCOLS`, as [`GemmTile`]'s `Display` writes it.
    fn from_str(text: &str) -> Result<GemmTile, ParseGemmTileError> {
        let err = || ParseGemmTileError { text: text.to_string() };
        let numbers = |part: &str| part.split('x').map(|p| p.trim().parse::<u32>().map_err(|_| err())).collect::<Result<Vec<u32>, _>>();
        let (tile, grid) = text.split_once('/').ok_or_else(err)?;
        match (&numbers(tile)?[..], &numbers(grid)?[..]) {
            (&[tm, tn, tk], &[sg_rows, sg_cols]) => Ok(GemmTile::new(tm, tn, tk, sg_rows, sg_cols)),
            _ => Err(err()),
        }
    }
}

/// Tile sides along M and N the autotuner tries.
pub const GEMM_TILE_SIDES: [u32; 3] = [64, 128, 256];
/// Slice depths along K the autotuner tries.
pub const GEMM_TILE_DEPTHS: [u32; 3] = [16, 32, 64];
/// Sides of one SIMD group's accumulator tile the autotuner tries: at most
/// 64 (the largest SIMD-group matrix); at least 32 to keep the search to
/// 108 configurations. 16-wide tiles are valid too (not searched); 8-wide
/// ones are far below the tensor cores' rate (`BENCHMARKS.md`,
/// register-resident tiles).
pub const GEMM_SIMDGROUP_SIDES: [u32; 2] = [32, 64];

/// Every staged GEMM configuration the autotuner considers, before any
/// device limit: tiles `tm, tn ∈` [`GEMM_TILE_SIDES`], `tk ∈`
/// [`GEMM_TILE_DEPTHS`], each split so that a SIMD group holds a tile with
/// sides in [`GEMM_SIMDGROUP_SIDES`] — 108 in all. [`GemmTile::fits`] (or
/// the GEMM's own `check` with the device's limit) says which a device runs.
pub fn gemm_tiles() -> Vec<GemmTile> {
    let mut out = vec![];
    for tm in GEMM_TILE_SIDES {
        for tn in GEMM_TILE_SIDES {
            for tk in GEMM_TILE_DEPTHS {
                for sm in GEMM_SIMDGROUP_SIDES.iter().rev() {
                    for sn in GEMM_SIMDGROUP_SIDES.iter().rev() {
                        out.push(GemmTile::new(tm, tn, tk, tm / sm, tn / sn));
                    }
                }
            }
        }
    }
    out
}

/// The GEMM tile for an `m × n × k` problem with `elem_bytes`-byte inputs
/// (2: f16 or bf16 on the tensor-core path, 4: f32) without tuning: the
/// tile follows M, as in seed 002 §9.1 (`enigma_analysis::tiles::select_tile`),
/// with enigma's tiles. The rules, first match (each chosen by the
/// measurements in `BENCHMARKS.md`'s GEMM tables, which say which shapes
/// were timed):
///
/// * **M ≤ 16 → 16×128×32 over 1×4** (16×32 per SIMD group), meant to run
///   with K split over threadgroups where the output has few tiles;
/// * **M ≤ 32 → 32×128×32 over 1×4** (the same shape of tile; not measured
///   itself);
/// * **M ≤ 64 → 64×128×32 over 2×2** (32×64 per SIMD group), with K split
///   likewise;
/// * **2-byte inputs, M and N from 2048, where two stages of it fit →
///   128×256×32 over 2×4** (64×64 per SIMD group, 8 of them): a
///   threadgroup reads a quarter less from L2 per product than with
///   128×128, which bounds the tensor-core GEMM at these shapes; with less
///   threadgroup memory (Apple GPUs' 32 KiB) the next rule;
/// * **2-byte inputs otherwise → 128×128×32 over 2×2** (64×64 per SIMD
///   group);
/// * **4-byte inputs, M and N above 2048 → 128×64×32 over 2×2**;
/// * **4-byte inputs otherwise → 64×64×32 over 2×2**.
///
/// A rule's tile that does not fit `limits` gives way to the first of
/// 64×64×32 over 2×2, 64×64×16 over 2×2 and 32×32×16 over 1×1 that does;
/// when none does (a device with less than 5632 bytes of threadgroup memory
/// or fewer than 32 threads), the last is returned and the GEMM's check
/// reports why. `k` does not take part, as in the seed.
pub fn select_tile(m: u32, n: u32, _k: u32, elem_bytes: u32, limits: &ThreadgroupLimits) -> GemmTile {
    const WIDE: GemmTile = GemmTile::new(128, 256, 32, 2, 4);
    let rule = if m <= 16 {
        GemmTile::new(16, 128, 32, 1, 4)
    } else if m <= 32 {
        GemmTile::new(32, 128, 32, 1, 4)
    } else if m <= 64 {
        GemmTile::new(64, 128, 32, 2, 2)
    } else if elem_bytes <= 2 && m >= 2048 && n >= 2048 && 2 * WIDE.threadgroup_memory_bytes(elem_bytes) <= limits.max_memory_bytes {
        WIDE
    } else if elem_bytes <= 2 {
        GemmTile::new(128, 128, 32, 2, 2)
    } else if m > 2048 && n > 2048 {
        GemmTile::new(128, 64, 32, 2, 2)
    } else {
        GemmTile::new(64, 64, 32, 2, 2)
    };
    let fallbacks = [GemmTile::new(64, 64, 32, 2, 2), GemmTile::new(64, 64, 16, 2, 2), GemmTile::new(32, 32, 16, 1, 1)];
    std::iter::once(rule).chain(fallbacks).find(|t| t.fits(elem_bytes, limits)).unwrap_or(fallbacks[2])
}
