//! Device catalogue, dispatch geometry, occupancy and tile planning.
//!
//! Pure arithmetic over the Metal execution model (grid → threadgroups of at
//! most 1024 threads → SIMD groups of 32), depending only on `enigma-ir`'s
//! [`limits`](enigma_ir::limits):
//!
//! * [`catalog`] — [`DeviceSpec`] and the Apple M1–M4 catalogue of the seeds
//!   (and the M5, from its announcement);
//! * [`geometry`] — [`plan_dispatch`] for `dispatch_threads` /
//!   `dispatch_threadgroups`, waste of non-multiple-of-32 threadgroups, waves;
//! * [`occupancy`](mod@occupancy) — threadgroups per core and seed 004's threadgroup-size
//!   recommendations;
//! * [`tiles`] — seed 002's quantized-GEMM tile planner and `select_tile`,
//!   and the staged GEMM's threadgroup-memory rule the library's kernels
//!   declare by (`staged_slice_bytes`); the library's own tile policy lives
//!   with its kernels (`enigma_kernels::library::gemm::select`);
//! * [`roofline`] — the least time a library operation can take on a
//!   catalogue device (its bytes at peak bandwidth, its FLOPs at peak FP16
//!   throughput): predictions, not measurements;
//! * `seed_tables` (cargo feature `seed-tables`, off for the backends) — every
//!   table of seeds 002 and 004 recomputed from those
//!   formulas next to the seed's printed figures, with the disagreements
//!   flagged;
//! * [`text`] — number formatting shared with the CLI.
//!
//! Every function returns a typed error instead of panicking on bad input.

pub mod catalog;
pub mod geometry;
pub mod occupancy;
pub mod roofline;
#[cfg(feature = "seed-tables")]
pub mod seed_tables;
pub mod text;
pub mod tiles;

pub use catalog::{CatalogError, DeviceSpec, SpecOrigin};
pub use geometry::{
    cover_with_threadgroups, plan_dispatch, threadgroups_to_cover, waves, CoverPlan, DispatchGeometry, DispatchMode,
    GeometryError, Waves,
};
pub use occupancy::{occupancy, recommended_threadgroup_size, KernelKind, Occupancy, OccupancyError, ThreadgroupRecommendation};
pub use tiles::{
    plan_tile, select_tile, Bound, ProblemSize, TileConfig, TileError, TileReport, TileShape,
    TileVariant, WeightFormat,
};
