//! The seeds' tables, recomputed from this crate's formulas.
//!
//! Every table of seed 002 (memory budget, accumulators, occupancy, GPU-wide
//! parallelism, arithmetic intensity, FP16 comparison, dequant overhead,
//! recommended configurations, layouts, pipeline estimates, selection guide),
//! seed 004's chip, sizing, intensity and threadgroup-memory tables, and the
//! dispatch examples of seeds 000 and 003. Each [`Cell`] holds the value this
//! crate *computes* — by calling [`crate::tiles`], [`crate::geometry`],
//! [`crate::occupancy`](mod@crate::occupancy) and [`crate::catalog`], never by copying the seed — next
//! to the seed's printed figure, transcribed verbatim as data in
//! `seed_printed`, and whether the two agree.
//!
//! Agreement is judged at the printed precision: a number agrees when the
//! computed value rounds *or* truncates to the printed digits (`37.5 %` →
//! "38%", `3.56` → "3.5x"), and a cell that agrees only by truncation says so.
//! Cells where the seed's arithmetic is wrong have `agrees: Some(false)` and a
//! note that explains the right figure; [`discrepancies`] lists them.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalog::{self, CatalogError, DeviceSpec};
use crate::geometry::{self, DispatchMode, GeometryError};
use crate::occupancy::{self, KernelKind};
use crate::text::{dims, number};
use crate::tiles::{self, Bound, TileConfig, TileError, TileReport, TileShape, TileVariant, WeightFormat};

/// Why the tables could not be built (only if the catalogue or a formula
/// rejects one of the seeds' own configurations).
#[derive(Clone, Debug, PartialEq, Error)]
pub enum SeedTableError {
    /// A catalogue lookup failed.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The tile planner rejected a configuration.
    #[error(transparent)]
    Tile(#[from] TileError),
    /// A dispatch could not be planned.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// Occupancy could not be computed.
    #[error(transparent)]
    Occupancy(#[from] occupancy::OccupancyError),
}

/// A computed value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// A number, shown with `decimals` decimals.
    Number {
        /// The value.
        value: f64,
        /// Decimals to show.
        decimals: usize,
    },
    /// Anything else (a shape, a range, a verdict).
    Text(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Number { value, decimals } => f.write_str(&number(*value, *decimals)),
            Value::Text(t) => f.write_str(t),
        }
    }
}

/// One quantity of a table row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// What the cell is.
    pub quantity: String,
    /// How it is computed.
    pub formula: String,
    /// The value enigma computes.
    pub computed: Value,
    /// The seed's printed figure, verbatim; `None` for derived cells the seed
    /// does not print.
    pub seed_printed: Option<String>,
    /// Whether the seed's figure agrees with the computed one (`None` when
    /// there is nothing to compare).
    pub agrees: Option<bool>,
    /// Explanation, especially where the seed is wrong.
    pub note: Option<String>,
}

impl Cell {
    fn with_note(mut self, note: impl Into<String>) -> Self {
        let note = note.into();
        self.note = Some(match self.note.take() {
            Some(old) => format!("{old}; {note}"),
            None => note,
        });
        self
    }
}

/// A row of a table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The row's label, as the seed labels it.
    pub label: String,
    /// Its cells.
    pub cells: Vec<Cell>,
}

/// One table of a seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedTable {
    /// Seed number, e.g. "002".
    pub seed: String,
    /// Section, e.g. "§2.3".
    pub section: String,
    /// Title.
    pub title: String,
    /// The rows.
    pub rows: Vec<Row>,
}

/// A cell where the seed's printed figure disagrees with the formula.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Discrepancy {
    /// Seed number.
    pub seed: String,
    /// Section.
    pub section: String,
    /// Table title.
    pub table: String,
    /// Row label.
    pub row: String,
    /// Quantity.
    pub quantity: String,
    /// What enigma computes.
    pub computed: String,
    /// What the seed prints.
    pub seed_printed: String,
    /// Why.
    pub note: Option<String>,
}

// ---------------------------------------------------------------- cells ---

/// The number a printed figure states and its decimals: "~32 TFLOPS" →
/// (32, 0), "16,384" → (16384, 0), "56.9" → (56.9, 1); for a worked
/// expression the result after the last `=`: "76 * 4 = 304+" → (304, 0).
fn parse_printed(printed: &str) -> Option<(f64, usize)> {
    let printed = printed.rsplit('=').next().unwrap_or(printed);
    let start = printed.find(|c: char| c.is_ascii_digit())?;
    let mut digits = String::new();
    let mut decimals = None;
    for c in printed[start..].chars() {
        match c {
            '0'..='9' => {
                digits.push(c);
                if let Some(d) = decimals.as_mut() {
                    *d += 1;
                }
            }
            ',' if decimals.is_none() => {}
            '.' if decimals.is_none() => {
                digits.push('.');
                decimals = Some(0);
            }
            _ => break,
        }
    }
    let digits = digits.trim_end_matches('.');
    let value = digits.parse::<f64>().ok()?;
    Some((value, decimals.unwrap_or(0)))
}

/// (agrees, only by truncation).
fn compare(computed: f64, printed: &str) -> (bool, bool) {
    let Some((p, d)) = parse_printed(printed) else { return (false, false) };
    let unit = 10f64.powi(-(d as i32));
    let diff = computed - p;
    let eps = 1e-9 * computed.abs().max(1.0);
    let rounds = diff.abs() <= unit / 2.0 + eps;
    let truncates = diff >= -eps && diff < unit - eps;
    (rounds || truncates, !rounds && truncates)
}

fn num(quantity: &str, formula: &str, value: f64, decimals: usize, printed: &str) -> Cell {
    let (agrees, by_truncation) = compare(value, printed);
    let cell = Cell {
        quantity: quantity.to_string(),
        formula: formula.to_string(),
        computed: Value::Number { value, decimals },
        seed_printed: Some(printed.to_string()),
        agrees: Some(agrees),
        note: None,
    };
    if by_truncation {
        cell.with_note(format!("the seed truncates {} to {printed}", number(value, decimals.max(2))))
    } else {
        cell
    }
}

fn int(quantity: &str, formula: &str, value: u64, printed: &str) -> Cell {
    num(quantity, formula, value as f64, 0, printed)
}

fn derived(quantity: &str, formula: &str, value: f64, decimals: usize) -> Cell {
    Cell {
        quantity: quantity.to_string(),
        formula: formula.to_string(),
        computed: Value::Number { value, decimals },
        seed_printed: None,
        agrees: None,
        note: None,
    }
}

fn text(quantity: &str, formula: &str, computed: impl Into<String>, printed: &str, agrees: bool) -> Cell {
    Cell {
        quantity: quantity.to_string(),
        formula: formula.to_string(),
        computed: Value::Text(computed.into()),
        seed_printed: Some(printed.to_string()),
        agrees: Some(agrees),
        note: None,
    }
}

/// A text cell the seed prints that is not a number to check (a
/// qualitative word next to a computed figure).
fn qualitative(quantity: &str, formula: &str, computed: impl Into<String>, printed: &str) -> Cell {
    Cell {
        quantity: quantity.to_string(),
        formula: formula.to_string(),
        computed: Value::Text(computed.into()),
        seed_printed: Some(printed.to_string()),
        agrees: None,
        note: None,
    }
}

fn row(label: impl Into<String>, cells: Vec<Cell>) -> Row {
    Row { label: label.into(), cells }
}

fn table(seed: &str, section: &str, title: &str, rows: Vec<Row>) -> SeedTable {
    SeedTable { seed: seed.to_string(), section: section.to_string(), title: title.to_string(), rows }
}

// ------------------------------------------------------------- seed 002 ---

fn m4_max() -> Result<DeviceSpec, SeedTableError> {
    Ok(catalog::find("m4-max")?)
}

fn plan(dev: &DeviceSpec, m: u32, n: u32, k: u32, variant: TileVariant) -> Result<TileReport, SeedTableError> {
    let cfg = TileConfig::new(TileShape::new(m, n, k), variant, WeightFormat::Fp4E2M1);
    Ok(tiles::plan_tile(&cfg, dev, None)?)
}

fn plan_weights(dev: &DeviceSpec, shape: TileShape, weights: WeightFormat) -> Result<TileReport, SeedTableError> {
    let cfg = TileConfig::new(shape, TileVariant::Separate, weights);
    Ok(tiles::plan_tile(&cfg, dev, None)?)
}

fn s002_hardware(dev: &DeviceSpec) -> SeedTable {
    let mut rows = vec![
        row("GPU cores", vec![int("M4 Max value", "catalogue", u64::from(dev.gpu_cores), "40")]),
        row("Threads per simdgroup", vec![int("M4 Max value", "catalogue", u64::from(dev.simd_width), "32")]),
        row(
            "Max threads per threadgroup",
            vec![int("M4 Max value", "catalogue", u64::from(dev.max_threads_per_threadgroup), "1024")],
        ),
        row(
            "Threadgroup memory",
            vec![num("M4 Max value (KB)", "bytes / 1024", f64::from(dev.threadgroup_memory_bytes) / 1024.0, 0, "32 KB")],
        ),
        row(
            "simdgroup_matrix tile",
            vec![text("M4 Max value", "FRAGMENT", format!("{0}x{0}", tiles::FRAGMENT), "8x8", true)],
        ),
    ];
    if let Some(t) = dev.fp16_tflops {
        rows.push(row("Peak FP16 throughput", vec![num("M4 Max value (TFLOPS)", "catalogue", t, 0, "~32 TFLOPS")]));
    }
    if let Some(bw) = dev.memory_bandwidth_gb_s {
        rows.push(row("Memory bandwidth", vec![num("M4 Max value (GB/s)", "catalogue", bw, 0, "546 GB/s")]));
    }
    table("002", "§1", "Hardware parameters (catalogue vs seed)", rows)
}

fn s002_worked_examples(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let sep = plan(dev, 64, 64, 32, TileVariant::Separate)?;
    let fused = plan(dev, 64, 64, 32, TileVariant::Fused)?;
    let ratio = sep.tg_memory_bytes as f64 / fused.tg_memory_bytes as f64;
    Ok(table(
        "002",
        "§2.1–2.2",
        "Threadgroup memory, worked examples (64x64x32, 4 SIMD groups)",
        vec![
            row(
                "Separate, double-buffered",
                vec![
                    int("A_tiles bytes", "2·M·K·2", sep.a_bytes, "8,192"),
                    int("B_tiles bytes", "2·K·N·2", sep.b_bytes, "8,192"),
                    int("Total bytes", "4·K·(M+N)", sep.tg_memory_bytes, "16,384"),
                    num("Budget %", "total / 32768", sep.budget_percent, 1, "50%"),
                ],
            ),
            row(
                "Fused",
                vec![
                    int("A_tile bytes", "M·K·2", fused.a_bytes, "4,096"),
                    int("B_staging bytes", "SG·64·2", fused.b_bytes, "512"),
                    int("Total bytes", "2·M·K + SG·128", fused.tg_memory_bytes, "4,608"),
                    num("Budget %", "total / 32768", fused.budget_percent, 1, "14%"),
                ],
            ),
            row("Reduction", vec![num("Separate / fused", "16,384 / 4,608", ratio, 2, "3.5x")]),
        ],
    ))
}

/// A memory-budget row as printed: (M, N, K, variant, A, B, total, budget %).
type BudgetRow = (u32, u32, u32, TileVariant, &'static str, &'static str, &'static str, &'static str);

/// A labelled tile row as printed: (label, M, N, K, variant, three figures).
type LabelledRow = (&'static str, u32, u32, u32, TileVariant, &'static str, &'static str, &'static str);

fn s002_memory_budget(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    // (M, N, K, variant, A, B, total, budget) as printed.
    let printed: [BudgetRow; 9] = [
        (64, 64, 32, TileVariant::Separate, "8,192", "8,192", "16,384", "50%"),
        (64, 64, 32, TileVariant::Fused, "4,096", "512", "4,608", "14%"),
        (128, 64, 16, TileVariant::Separate, "8,192", "4,096", "12,288", "38%"),
        (128, 64, 16, TileVariant::Fused, "4,096", "512", "4,608", "14%"),
        (32, 128, 32, TileVariant::Separate, "4,096", "16,384", "20,480", "63%"),
        (32, 128, 32, TileVariant::Fused, "2,048", "512", "2,560", "8%"),
        (128, 128, 16, TileVariant::Separate, "8,192", "8,192", "16,384", "50%"),
        (128, 128, 16, TileVariant::Fused, "4,096", "512", "4,608", "14%"),
        (64, 64, 64, TileVariant::Separate, "16,384", "16,384", "32,768", "100%"),
    ];
    let mut rows = Vec::new();
    for (m, n, k, variant, a, b, total, pct) in printed {
        let r = plan(dev, m, n, k, variant)?;
        let (fa, fb, ft) = match variant {
            TileVariant::Separate => ("2·M·K·2", "2·K·N·2", "4·K·(M+N)"),
            TileVariant::Fused => ("M·K·2", "SG·128", "2·M·K + SG·128"),
            TileVariant::Staged => ("M·(K+8)·2", "K·(N+8)·2", "2·(M·(K+8) + K·(N+8))"),
        };
        let mut cells = vec![
            int("A bytes", fa, r.a_bytes, a),
            int("B bytes", fb, r.b_bytes, b),
            int("Total", ft, r.tg_memory_bytes, total),
            num("Budget %", "total / 32768", r.budget_percent, 1, pct),
        ];
        let verdict = if r.fits { "fits".to_string() } else { "rejected: no headroom".to_string() };
        if (m, n, k) == (64, 64, 64) {
            cells.push(text(
                "Fits (< 100 % of budget)",
                "total < 32768",
                verdict,
                "leaves zero headroom and will likely fail allocation",
                !r.fits,
            ));
        } else {
            cells.push(Cell {
                quantity: "Fits (< 100 % of budget)".to_string(),
                formula: "total < 32768".to_string(),
                computed: Value::Text(verdict),
                seed_printed: None,
                agrees: None,
                note: None,
            });
        }
        let label = format!(
            "{m}x{n}x{k} {}",
            match variant {
                TileVariant::Separate => "separate (2-buf)",
                TileVariant::Fused => "fused",
                TileVariant::Staged => "staged",
            }
        );
        rows.push(row(label, cells));
    }
    Ok(table("002", "§2.3", "Memory budget table", rows))
}

fn s002_mma(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let r = plan(dev, 64, 64, 32, TileVariant::Separate)?;
    let per_tg = u64::from(r.simdgroups) * u64::from(r.mma_per_simdgroup_per_iteration) * tiles::FLOPS_PER_MMA;
    Ok(table(
        "002",
        "§3.1",
        "simdgroup_multiply_accumulate on 8x8 fragments",
        vec![
            row(
                "C[8x8] += A[8x8] * B[8x8]",
                vec![
                    int("Multiply-adds per call", "8 outputs × 8 × 8 products", tiles::FMA_PER_MMA, "128 FMA operations").with_note(
                        "an 8×8×8 product has 64 outputs, each a sum of 8 products: 512 multiply-adds; the seed's \
                         8*8*2 = 128 counts 2 per output element",
                    ),
                    int("FLOPs per call", "2 × multiply-adds", tiles::FLOPS_PER_MMA, "256 FLOPs per call")
                        .with_note("2 × 512 = 1,024 FLOPs"),
                ],
            ),
            row(
                "Consistency with §5.1",
                vec![int("FLOPs per 64x64x32 iteration", "4 SG × 64 MMA × 1,024", per_tg, "262,144").with_note(
                    "§5.1's 2·M·N·K = 262,144 holds only with 1,024 FLOPs per call (with 256 it would be 65,536)",
                )],
            ),
        ],
    ))
}

fn s002_partition(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let r = plan(dev, 64, 64, 32, TileVariant::Separate)?;
    let p = r.partition;
    let cols = p.grid[1];
    let row_offsets: std::collections::BTreeSet<u32> =
        (0..r.simdgroups).map(|sid| (sid / cols) * p.sg_m_tiles * tiles::FRAGMENT).collect();
    let col_offsets: std::collections::BTreeSet<u32> =
        (0..r.simdgroups).map(|sid| (sid % cols) * p.sg_n_tiles * tiles::FRAGMENT).collect();
    let join = |s: &std::collections::BTreeSet<u32>| s.iter().map(u32::to_string).collect::<Vec<_>>().join(" or ");
    Ok(table(
        "002",
        "§3.2",
        "Work distribution, 64x64 tile, 4 SIMD groups",
        vec![row(
            "64x64, 4 SIMD groups",
            vec![
                text("SIMD-group grid", "partition()", tiles_grid(p.grid), "2x2", p.grid == [2, 2]),
                int("SG_M_TILES", "(M/8) / rows", u64::from(p.sg_m_tiles), "4"),
                int("SG_N_TILES", "(N/8) / cols", u64::from(p.sg_n_tiles), "4"),
                text("Output per SIMD group", "M/rows × N/cols", dims2(p.sg_tile), "32x32", p.sg_tile == [32, 32]),
                text("sg_row_offset", "(simd_id / cols) · SG_M·8", join(&row_offsets), "0 or 32", join(&row_offsets) == "0 or 32"),
                text("sg_col_offset", "(simd_id % cols) · SG_N·8", join(&col_offsets), "0 or 32", join(&col_offsets) == "0 or 32"),
            ],
        )],
    ))
}

fn tiles_grid(g: [u32; 2]) -> String {
    format!("{}x{}", g[0], g[1])
}

fn dims2(g: [u32; 2]) -> String {
    format!("{}x{}", g[0], g[1])
}

fn accumulator_cells(r: &TileReport, sg_m: &str, sg_n: &str, acc: &str, b16: &str, b32: &str) -> Vec<Cell> {
    vec![
        int("SG_M", "(M/8) / SG rows", u64::from(r.partition.sg_m_tiles), sg_m),
        int("SG_N", "(N/8) / SG cols", u64::from(r.partition.sg_n_tiles), sg_n),
        int("Accumulators", "SG_M · SG_N", u64::from(r.accumulators_per_simdgroup), acc),
        int("Bytes/thread (FP16)", "accumulators · 4", u64::from(r.accumulator_bytes_per_thread_fp16), b16),
        int("Bytes/thread (FP32)", "accumulators · 8", u64::from(r.accumulator_bytes_per_thread_fp32), b32),
    ]
}

fn s002_accumulators(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let r1 = plan(dev, 64, 64, 32, TileVariant::Separate)?;
    // "64x64 (current: 2x4)" with SG_M = 2, SG_N = 4: 8 SIMD groups in a 4×2 grid.
    let cfg = TileConfig {
        simdgroups: 8,
        sg_grid: Some([4, 2]),
        ..TileConfig::new(TileShape::new(64, 64, 32), TileVariant::Separate, WeightFormat::Fp4E2M1)
    };
    let r2 = tiles::plan_tile(&cfg, dev, None)?;
    let r3 = plan(dev, 128, 64, 16, TileVariant::Separate)?;
    let r4 = plan(dev, 32, 128, 32, TileVariant::Separate)?;

    let mut row1 = accumulator_cells(&r1, "4", "4", "16", "64", "128");
    row1.insert(0, text("SIMD-group grid", "partition()", tiles_grid(r1.partition.grid), "2x2", r1.partition.grid == [2, 2]));
    let mut row2 = accumulator_cells(&r2, "2", "4", "8", "32", "64");
    row2.insert(
        0,
        text("SIMD-group grid (M×N)", "(M/8)/SG_M × (N/8)/SG_N", tiles_grid(r2.partition.grid), "2x4", r2.partition.grid == [2, 4])
            .with_note(
                "the table's other labels are rows×columns along M×N (4x1 for 128x64 gives SG_M=4, SG_N=8), so a 2x4 \
                 grid would give SG_M=4, SG_N=2; SG_M=2, SG_N=4 on a 64x64 tile needs a 4x2 grid of 8 SIMD groups \
                 (256 threads), not the 4 SIMD groups of §3.2 — with 4 they would cover only half the tile",
            ),
    );
    let mut row3 = accumulator_cells(&r3, "4", "8", "32", "128", "256");
    row3.insert(0, text("SIMD-group grid", "partition()", tiles_grid(r3.partition.grid), "4x1", r3.partition.grid == [4, 1]));
    let mut row4 = accumulator_cells(&r4, "4", "4", "16", "64", "128");
    row4.insert(0, text("SIMD-group grid", "partition()", tiles_grid(r4.partition.grid), "1x4", r4.partition.grid == [1, 4]));
    Ok(table(
        "002",
        "§3.4",
        "Accumulator register pressure",
        vec![
            row("64x64 (2x2 SG grid)", row1),
            row("64x64 (current: 2x4)", row2),
            row("128x64 (4x1 SG)", row3),
            row("32x128 (1x4 SG)", row4),
        ],
    ))
}

fn s002_occupancy(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let printed: [LabelledRow; 5] = [
        ("Separate (64x64x32, 2-buf)", 64, 64, 32, TileVariant::Separate, "16,384", "2", "256"),
        ("Fused (64x64x32)", 64, 64, 32, TileVariant::Fused, "4,608", "7", "896"),
        ("Separate (128x64x16, 2-buf)", 128, 64, 16, TileVariant::Separate, "12,288", "2", "256"),
        ("Fused (128x64x16)", 128, 64, 16, TileVariant::Fused, "4,608", "7", "896"),
        ("Fused (32x128x32)", 32, 128, 32, TileVariant::Fused, "2,560", "12", "1,536"),
    ];
    let mut rows = Vec::new();
    for (label, m, n, k, variant, mem, tgs, threads) in printed {
        let r = plan(dev, m, n, k, variant)?;
        rows.push(row(
            label,
            vec![
                int("TG memory", "tile planner", r.tg_memory_bytes, mem),
                int("Max concurrent TGs", "floor(32768 / TG memory)", u64::from(r.tgs_per_core), tgs),
                int("Threads/core", "TGs · 128", r.threads_per_core, threads),
            ],
        ));
    }
    Ok(table("002", "§4.1", "Occupancy analysis", rows))
}

fn s002_gpu_wide(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let printed: [LabelledRow; 3] = [
        ("Separate 64x64", 64, 64, 32, TileVariant::Separate, "2", "80", "80"),
        ("Fused 64x64", 64, 64, 32, TileVariant::Fused, "7", "280", "280"),
        ("Fused 32x128", 32, 128, 32, TileVariant::Fused, "12", "480", "480"),
    ];
    let mut rows = Vec::new();
    for (label, m, n, k, variant, tgs, active, inflight) in printed {
        let r = plan(dev, m, n, k, variant)?;
        rows.push(row(
            label,
            vec![
                int("TGs/core", "floor(32768 / TG memory)", u64::from(r.tgs_per_core), tgs),
                int("Total active TGs", "TGs/core · 40 cores", r.concurrent_threadgroups, active),
                int("Output tiles in flight", "one tile per TG", r.concurrent_threadgroups, inflight),
            ],
        ));
    }
    // 4096x4096 GEMM with 64x64 tiles.
    let problem = tiles::ProblemSize { m: 4096, n: 4096, k: 4096 };
    let mut wave_cells = Vec::new();
    for (variant, printed) in [(TileVariant::Separate, "~51"), (TileVariant::Fused, "~15")] {
        let cfg = TileConfig::new(TileShape::new(64, 64, 32), variant, WeightFormat::Fp4E2M1);
        let r = tiles::plan_tile(&cfg, dev, Some(problem))?;
        if let Some(p) = r.problem {
            if variant == TileVariant::Separate {
                wave_cells.push(int("Output tiles", "(4096/64) · (4096/64)", p.total_output_tiles, "64x64 = 4096"));
            }
            wave_cells.push(
                num(
                    &format!("Waves with {} active TGs", r.concurrent_threadgroups),
                    "tiles / active TGs",
                    p.waves.waves_exact,
                    2,
                    printed,
                )
                .with_note(format!(
                    "that is {} waves, the last {:.0} % full",
                    p.waves.waves,
                    p.waves.last_wave_fill_percent
                )),
            );
        }
    }
    rows.push(row("4096x4096 GEMM, 64x64 tiles", wave_cells));
    Ok(table("002", "§4.3", "GPU-wide parallelism (M4 Max, 40 cores)", rows))
}

fn s002_intensity(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let printed: [(u32, u32, u32, &str, &str, &str, &str); 5] = [
        (64, 64, 32, "262,144", "4,096", "1,024", "51.2"),
        (128, 64, 16, "262,144", "4,096", "512", "56.9"),
        (32, 128, 32, "262,144", "2,048", "2,048", "64.0"),
        (128, 128, 16, "524,288", "4,096", "1,024", "102.4"),
        (64, 64, 64, "524,288", "8,192", "2,048", "51.2"),
    ];
    let balance = dev.machine_balance();
    let mut rows = Vec::new();
    for (m, n, k, flops, a, b, ai) in printed {
        let r = plan_weights(dev, TileShape::new(m, n, k), WeightFormat::Fp4E2M1)?;
        let mut cells = vec![
            int("FLOPs", "2·M·N·K", r.flops_per_iteration, flops),
            int("A bytes", "M·K·2", r.a_load_bytes as u64, a),
            int("B bytes (FP4)", "K·N·0.5", r.b_load_bytes as u64, b),
            num("AI (FLOPs/byte)", "FLOPs / (A + B)", r.arithmetic_intensity, 1, ai),
            derived("AI with scales (group 128)", "FLOPs / (A + B + (K/128)·N·2)", r.arithmetic_intensity_with_scales, 1),
        ];
        let bound = match r.bound {
            Bound::Compute => "compute-bound",
            Bound::Memory => "memory-bound",
            Bound::Unknown => "unknown",
        };
        let why = match balance {
            Some(b) => format!("{} {} {}", number(r.arithmetic_intensity, 1), if r.arithmetic_intensity < b { "<" } else { "≥" }, number(b, 1)),
            None => String::new(),
        };
        let bound_cell = match (m, n, k) {
            (64, 64, 32) => qualitative("Bound on M4 Max", "AI vs machine balance", format!("{bound} ({why})"), "near the compute/memory boundary")
                .with_note("51.2 is 87 % of the balance: on the memory side of the boundary"),
            (128, 64, 16) => text(
                "Bound on M4 Max",
                "AI vs machine balance",
                format!("{bound} ({why})"),
                "larger tiles are more comfortably compute-bound",
                r.bound == Bound::Compute,
            )
            .with_note("56.9 is still below the balance of 58.6, so 128x64x16 is memory-bound on the M4 Max"),
            (128, 128, 16) => text(
                "Bound on M4 Max",
                "AI vs machine balance",
                format!("{bound} ({why})"),
                "larger tiles are more comfortably compute-bound",
                r.bound == Bound::Compute,
            ),
            _ => Cell {
                quantity: "Bound on M4 Max".to_string(),
                formula: "AI vs machine balance".to_string(),
                computed: Value::Text(format!("{bound} ({why})")),
                seed_printed: None,
                agrees: None,
                note: None,
            },
        };
        cells.push(bound_cell);
        rows.push(row(format!("{m}x{n}x{k}"), cells));
    }
    if let Some(b) = balance {
        rows.push(row(
            "M4 Max machine balance",
            vec![num("FLOPs/byte", "32 TFLOPS / 546 GB/s", b, 1, "roughly 59")],
        ));
    }
    Ok(table("002", "§5.1", "Arithmetic intensity, FP4 quantized GEMM (per tile iteration, scales ignored)", rows))
}

fn s002_fp16(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let printed: [(u32, u32, u32, &str, &str, &str); 3] = [
        (64, 64, 32, "32.0", "51.2", "1.6x less memory traffic"),
        (128, 64, 16, "42.7", "56.9", "1.3x"),
        (32, 128, 32, "32.0", "64.0", "2.0x"),
    ];
    let mut rows = Vec::new();
    for (m, n, k, ai16, ai4, speedup) in printed {
        let shape = TileShape::new(m, n, k);
        let r16 = plan_weights(dev, shape, WeightFormat::Fp16)?;
        let r4 = plan_weights(dev, shape, WeightFormat::Fp4E2M1)?;
        let mut c16 = num("AI (FP16 weights)", "FLOPs / (M·K·2 + K·N·2)", r16.arithmetic_intensity, 1, ai16);
        let ratio = r4.arithmetic_intensity / r16.arithmetic_intensity;
        let mut cr = num("Speedup from quantization", "AI(FP4) / AI(FP16)", ratio, 1, speedup);
        if (m, n, k) == (32, 128, 32) {
            c16 = c16.with_note(
                "FP16 B is 32·128·2 = 8,192 bytes, so AI = 262,144 / (2,048 + 8,192) = 25.6; the seed's 32.0 would \
                 need only 8,192 bytes of A and B together",
            );
            cr = cr.with_note("64.0 / 25.6 = 2.5: FP4 cuts this tile's traffic from 10,240 to 4,096 bytes");
        }
        rows.push(row(
            format!("{m}x{n}x{k}"),
            vec![c16, num("AI (FP4 weights)", "FLOPs / (M·K·2 + K·N·0.5)", r4.arithmetic_intensity, 1, ai4), cr],
        ));
    }
    rows.push(row(
        "B-matrix traffic",
        vec![num(
            "FP16 / FP4 bytes per weight",
            "2 / 0.5",
            WeightFormat::Fp16.bytes_per_weight() / WeightFormat::Fp4E2M1.bytes_per_weight(),
            0,
            "4x",
        )],
    ));
    Ok(table("002", "§5.2", "Comparison with FP16 (no quantization)", rows))
}

fn s002_dequant(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let shape = TileShape::new(64, 64, 32);
    let fp4 = plan_weights(dev, shape, WeightFormat::Fp4E2M1)?;
    let int4 = plan_weights(dev, shape, WeightFormat::Int4U4B8)?;
    Ok(table(
        "002",
        "§5.3",
        "Dequant compute overhead per 64x64x32 iteration",
        vec![
            row("Useful compute", vec![int("FLOPs", "2·M·N·K", fp4.flops_per_iteration, "262,144")]),
            row(
                "FP4 E2M1",
                vec![
                    int("Dequant ops", "K·N·8", fp4.dequant_ops_per_iteration, "16,384"),
                    num("Overhead %", "ops / FLOPs = 8 / (2·M)", fp4.dequant_overhead_percent, 2, "6.25%"),
                ],
            ),
            row(
                "INT4 U4B8",
                vec![
                    int("Dequant ops", "K·N·4", int4.dequant_ops_per_iteration, "8,192"),
                    num("Overhead %", "ops / FLOPs = 4 / (2·M)", int4.dequant_overhead_percent, 3, "3.1%"),
                ],
            ),
        ],
    ))
}

struct Recommended {
    section: &'static str,
    shape: (u32, u32, u32),
    mem_sep: &'static str,
    mem_fused: &'static str,
    sg_tile: &'static str,
    sg_m: &'static str,
    sg_n: &'static str,
    k_sub: &'static str,
    mma: &'static str,
    occ_sep: &'static str,
    occ_fused: &'static str,
    ai: &'static str,
}

fn s002_recommended(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let printed = [
        Recommended {
            section: "§6.1 Primary",
            shape: (64, 64, 32),
            mem_sep: "16,384 bytes",
            mem_fused: "4,608 bytes",
            sg_tile: "32x32",
            sg_m: "SG_M=4",
            sg_n: "SG_N=4",
            k_sub: "4 (32/8)",
            mma: "64 (4*4*4)",
            occ_sep: "2 TGs/core",
            occ_fused: "7 TGs/core",
            ai: "51.2",
        },
        Recommended {
            section: "§6.2 Large-M",
            shape: (128, 64, 16),
            mem_sep: "12,288 bytes",
            mem_fused: "4,608 bytes",
            sg_tile: "32x64",
            sg_m: "SG_M=4",
            sg_n: "SG_N=8",
            k_sub: "2 (16/8)",
            mma: "64 (4*8*2)",
            occ_sep: "2 TGs/core",
            occ_fused: "7 TGs/core",
            ai: "56.9",
        },
        Recommended {
            section: "§6.3 Large-N",
            shape: (32, 128, 32),
            mem_sep: "20,480 bytes",
            mem_fused: "2,560 bytes",
            sg_tile: "32x32",
            sg_m: "SG_M=4",
            sg_n: "SG_N=4",
            k_sub: "4 (32/8)",
            mma: "64 (4*4*4)",
            occ_sep: "1 TG/core",
            occ_fused: "12 TGs/core",
            ai: "64.0",
        },
        Recommended {
            section: "§6.4 Maximum compute",
            shape: (128, 128, 16),
            mem_sep: "16,384 bytes",
            mem_fused: "4,608 bytes",
            sg_tile: "64x32",
            sg_m: "SG_M=8",
            sg_n: "SG_N=4",
            k_sub: "2 (16/8)",
            mma: "128 (8*8*2)",
            occ_sep: "2 TGs/core",
            occ_fused: "7 TGs/core",
            ai: "102.4",
        },
    ];
    let mut rows = Vec::new();
    for p in printed {
        let (m, n, k) = p.shape;
        let sep = plan(dev, m, n, k, TileVariant::Separate)?;
        let fused = plan(dev, m, n, k, TileVariant::Fused)?;
        let sg_tile = dims2(sep.partition.sg_tile);
        let mut cells = vec![
            int("TG memory (separate)", "4·K·(M+N)", sep.tg_memory_bytes, p.mem_sep),
            int("TG memory (fused)", "2·M·K + SG·128", fused.tg_memory_bytes, p.mem_fused),
            int("Simdgroups", "default", u64::from(sep.simdgroups), "4"),
            int("Threads", "SG · 32", u64::from(sep.threads_per_threadgroup), "128"),
            text("SG output tile", "partition()", sg_tile.clone(), p.sg_tile, sg_tile == p.sg_tile),
            int("SG_M", "(M/8) / SG rows", u64::from(sep.partition.sg_m_tiles), p.sg_m),
            int("SG_N", "(N/8) / SG cols", u64::from(sep.partition.sg_n_tiles), p.sg_n),
            int("K sub-tiles", "K / 8", u64::from(sep.k_subtiles), p.k_sub),
            int("MMA ops/iter (per SIMD group)", "SG_M · SG_N · K/8", u64::from(sep.mma_per_simdgroup_per_iteration), p.mma),
            int("Occupancy (separate)", "floor(32768 / bytes)", u64::from(sep.tgs_per_core), p.occ_sep),
            int("Occupancy (fused)", "floor(32768 / bytes)", u64::from(fused.tgs_per_core), p.occ_fused),
            num("AI (FP4)", "§5.1", sep.arithmetic_intensity, 1, p.ai),
        ];
        if p.shape == (128, 128, 16) {
            let note = "4 SIMD groups of 64x32 cover only half of a 128x128 tile; covering it takes a 2x2 grid of \
                        64x64 SIMD-group tiles (SG_M=8, SG_N=8), which the same section's '128 (8*8*2)' MMA count and \
                        512 bytes/thread assume";
            for c in cells.iter_mut() {
                if c.quantity == "SG output tile" || c.quantity == "SG_N" {
                    *c = c.clone().with_note(note);
                }
            }
            cells.push(
                int("Accumulators per SIMD group", "SG_M · SG_N", u64::from(sep.accumulators_per_simdgroup), "128 accumulators per SG")
                    .with_note("8 · 8 = 64"),
            );
            cells.push(
                int("Accumulators per SIMD group (prose)", "SG_M · SG_N", u64::from(sep.accumulators_per_simdgroup), "8*4 = 32 accumulators")
                    .with_note("8 · 8 = 64; the seed contradicts its own '128 accumulators per SG'"),
            );
            cells.push(int(
                "Register pressure, FP32 accumulators",
                "accumulators · 8",
                u64::from(sep.accumulator_bytes_per_thread_fp32),
                "512 bytes/thread",
            ));
        }
        rows.push(row(format!("{} {m}x{n}x{k}", p.section), cells));
    }
    Ok(table("002", "§6", "Recommended configurations", rows))
}

fn s002_layout(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let sep = plan(dev, 64, 64, 32, TileVariant::Separate)?;
    let fused = plan(dev, 64, 64, 32, TileVariant::Fused)?;
    let a_buffer = sep.a_bytes / 2;
    let b_buffer = sep.b_bytes / 2;
    let hex = |v: u64| format!("0x{v:04X}");
    let elements = 64u64 * 32;
    let per_thread = geometry::elements_per_thread(elements, sep.threads_per_threadgroup);
    let t127_first = 127 * per_thread;
    let staging = tiles::STAGING_BYTES_PER_SIMDGROUP;
    Ok(table(
        "002",
        "§7",
        "Memory layouts (64x64x32)",
        vec![
            row(
                "§7.1 double-buffered layout",
                vec![
                    int("A_tiles[i] bytes", "64·32·2", a_buffer, "4,096 bytes"),
                    text("A_tiles[1] offset", "A buffer bytes", hex(a_buffer), "0x1000", hex(a_buffer) == "0x1000"),
                    text("B_tiles[0] offset", "2 A buffers", hex(sep.a_bytes), "0x2000", hex(sep.a_bytes) == "0x2000"),
                    text("B_tiles[1] offset", "+ B buffer", hex(sep.a_bytes + b_buffer), "0x3000", hex(sep.a_bytes + b_buffer) == "0x3000"),
                    text("End", "total", hex(sep.tg_memory_bytes), "0x4000", hex(sep.tg_memory_bytes) == "0x4000"),
                    int("Total", "4·K·(M+N)", sep.tg_memory_bytes, "16,384 bytes (16 KB)"),
                    num(
                        "Remaining (KB)",
                        "(32768 − total) / 1024",
                        (f64::from(sep.budget_bytes) - sep.tg_memory_bytes as f64) / 1024.0,
                        0,
                        "16 KB",
                    ),
                ],
            ),
            row(
                "§7.2 A-tile cooperative load",
                vec![
                    int("Elements", "64·32", elements, "2048 elements"),
                    int("Elements per thread", "2048 / 128", per_thread, "16 elements per thread"),
                    int("Thread 127's first element", "127 · 16", t127_first, "[2032..2047]"),
                    int("Thread 127's row", "2032 / 32", t127_first / 32, "row 63"),
                ],
            ),
            row(
                "§7.4 fused B staging",
                vec![
                    int("Bytes per SIMD group", "8·8·2", staging, "128 bytes"),
                    text("SG 3 offset", "3 · 128", hex(3 * staging), "0x180", hex(3 * staging) == "0x0180"),
                    int("Total", "SG · 128", fused.b_bytes, "512"),
                ],
            ),
        ],
    ))
}

fn s002_pipeline(dev: &DeviceSpec) -> Result<SeedTable, SeedTableError> {
    let sep = plan(dev, 64, 64, 32, TileVariant::Separate)?;
    let per_thread_bytes = sep.a_load_bytes as u64 / u64::from(sep.threads_per_threadgroup);
    let mma = u64::from(sep.mma_per_simdgroup_per_iteration);
    let flops_sg = mma * tiles::FLOPS_PER_MMA;
    let sg_m = u64::from(sep.partition.sg_m_tiles);
    let sg_n = u64::from(sep.partition.sg_n_tiles);
    let k_sub = u64::from(sep.k_subtiles);
    let active_lanes = 8.0;
    let idle_percent = (32.0 - active_lanes) / 32.0 * 100.0;
    Ok(table(
        "002",
        "§8",
        "Pipeline timing estimates (64x64x32)",
        vec![
            row(
                "§8.1 separate: load phase",
                vec![
                    int("A bytes from device", "M·K·2", sep.a_load_bytes as u64, "4096B"),
                    int("A bytes per thread", "4096 / 128", per_thread_bytes, "32B/thread"),
                    int("B packed FP4 bytes", "K·N·0.5", sep.b_load_bytes as u64, "512B packed").with_note(
                        "a 32x64 FP4 tile is 32·64/2 = 1,024 bytes (§5.1 and §7.3: one uint32 per 8 K-values per column, \
                         4·64·4 = 1,024)",
                    ),
                ],
            ),
            row(
                "§8.1 separate: compute phase (per SIMD group)",
                vec![
                    int("MMA ops", "SG_M · SG_N · K/8", mma, "64 MMA ops"),
                    int("FLOPs", "MMA · 1,024", flops_sg, "16,384 FLOPs")
                        .with_note("64 calls × 1,024 FLOPs = 65,536 (the seed uses §3.1's 256 FLOPs per call)"),
                    int("Latency estimate (cycles)", "MMA · 4 cycles (seed's estimate)", mma * 4, "~64 * 4 = 256 cycles"),
                ],
            ),
            row(
                "§8.2 fused: inner loop",
                vec![
                    int("Cycles", "K/8 · SG_M · SG_N · ~20 (seed's estimate)", k_sub * sg_m * sg_n * 20, "1280 cycles"),
                    num("Idle lanes during dequant %", "(32 − 8) / 32", idle_percent, 0, "25% efficiency loss").with_note(
                        "lanes 0-7 work and 24 of 32 idle: 25 % efficiency, a 75 % loss during the dequant phase",
                    ),
                ],
            ),
        ],
    ))
}

/// select_tile over an inclusive M range, as "shape for M a–b, …".
fn selection_summary(lo: u32, hi: u32) -> (String, bool, Vec<TileShape>) {
    let mut runs: Vec<(u32, u32, TileShape)> = Vec::new();
    for m in lo..=hi {
        let s = tiles::select_tile(m, 4096, 4096);
        match runs.last_mut() {
            Some((_, end, shape)) if *shape == s => *end = m,
            _ => runs.push((m, m, s)),
        }
    }
    let uniform = runs.len() == 1;
    let shapes = runs.iter().map(|r| r.2).collect();
    let parts: Vec<String> = runs
        .iter()
        .map(|(a, b, s)| if a == b { format!("{s} for M={a}") } else { format!("{s} for M={a}–{b}") })
        .collect();
    (parts.join(", "), uniform, shapes)
}

fn s002_selection() -> SeedTable {
    // (workload, M range as printed, low, high, recommended config as printed)
    let printed: [(&str, &str, u32, u32, &str, TileShape); 5] = [
        ("Decode (single token)", "1-8", 1, 8, "32x128x32 fused", TileShape::new(32, 128, 32)),
        ("Small batch decode", "8-32", 8, 32, "64x64x32 fused", TileShape::new(64, 64, 32)),
        ("Prefill (short)", "32-128", 32, 128, "64x64x32 separate", TileShape::new(64, 64, 32)),
        ("Prefill (long)", "128-512", 128, 512, "128x64x16 separate", TileShape::new(128, 64, 16)),
        ("Large batch / training", "512+", 512, 8192, "128x128x16 fused", TileShape::new(128, 128, 16)),
    ];
    let mut rows = Vec::new();
    for (workload, range, lo, hi, config, shape) in printed {
        let (summary, uniform, shapes) = selection_summary(lo, hi);
        let agrees = uniform && shapes.first() == Some(&shape);
        let mut cell = text(
            &format!("§9.1 select_tile over M {range}"),
            "M ≤ 16 → 32x128x32; ≤ 64 → 64x64x32; ≤ 256 → 128x64x16; else 128x128x16",
            summary,
            config,
            agrees,
        );
        if !agrees {
            cell = cell.with_note("the §9 guide table and the §9.1 dispatch table disagree on this range; select_tile follows §9.1");
        }
        if hi == 8192 {
            cell = cell.with_note("checked up to M = 8192");
        }
        rows.push(row(format!("{workload} (M {range})"), vec![cell]));
    }
    table("002", "§9", "Configuration selection guide vs select_tile (§9.1)", rows)
}

/// Seed 002's tables, on the catalogue's M4 Max.
pub fn seed_002_tables() -> Result<Vec<SeedTable>, SeedTableError> {
    let dev = m4_max()?;
    Ok(vec![
        s002_hardware(&dev),
        s002_worked_examples(&dev)?,
        s002_memory_budget(&dev)?,
        s002_mma(&dev)?,
        s002_partition(&dev)?,
        s002_accumulators(&dev)?,
        s002_occupancy(&dev)?,
        s002_gpu_wide(&dev)?,
        s002_intensity(&dev)?,
        s002_fp16(&dev)?,
        s002_dequant(&dev)?,
        s002_recommended(&dev)?,
        s002_layout(&dev)?,
        s002_pipeline(&dev)?,
        s002_selection(),
    ])
}

// ------------------------------------------------------------- seed 004 ---

fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "Yes",
        Some(false) => "No",
        None => "unknown",
    }
}

fn bandwidth_text(d: &DeviceSpec) -> String {
    d.memory_bandwidth_gb_s.map_or("unknown".to_string(), |b| format!("{} GB/s", number(b, 0)))
}

fn s004_chips() -> Result<Vec<SeedTable>, SeedTableError> {
    // (id, cores, bandwidth, simd, max tg, bf16, family) as printed.
    let base: [(&str, &str, &str, &str, &str, &str, &str); 4] = [
        ("m1", "7–8", "68 GB/s", "32", "1024", "No", "Apple 7"),
        ("m2", "8–10", "100 GB/s", "32", "1024", "No", "Apple 8"),
        ("m3", "10", "100 GB/s", "32", "1024", "Yes", "Apple 9"),
        ("m4", "10", "120 GB/s", "32", "1024", "Yes", "Apple 9+"),
    ];
    let mut rows = Vec::new();
    for (id, cores, bw, simd, maxtg, bf16, family) in base {
        let d = catalog::find(id)?;
        let fam = d.family.clone().unwrap_or_default();
        rows.push(row(
            d.name.clone(),
            vec![
                text("GPU Cores", "catalogue", d.cores_label(), cores, d.cores_label() == cores),
                text("Memory BW", "catalogue", bandwidth_text(&d), bw, bandwidth_text(&d) == bw),
                int("SIMD Width", "catalogue", u64::from(d.simd_width), simd),
                int("Max Threadgroup", "catalogue", u64::from(d.max_threads_per_threadgroup), maxtg),
                text("BFloat16", "catalogue", yes_no(d.bf16), bf16, yes_no(d.bf16) == bf16),
                text("GPU Family", "catalogue", fam.clone(), family, fam == family),
            ],
        ));
    }
    let base_table = table("004", "Chip Specifications", "Base chips", rows);

    let pro: [(&str, &str, &str); 6] = [
        ("m1-pro", "14–16", "200 GB/s"),
        ("m1-max", "24–32", "400 GB/s"),
        ("m2-max", "30–38", "400 GB/s"),
        ("m3-max", "40", "400 GB/s"),
        ("m4-pro", "20", "273 GB/s"),
        ("m4-max", "40", "546 GB/s"),
    ];
    let mut rows = Vec::new();
    for (id, cores, bw) in pro {
        let d = catalog::find(id)?;
        let targets = geometry::threadgroup_targets(&d);
        rows.push(row(
            d.name.clone(),
            vec![
                text("GPU Cores", "catalogue", d.cores_label(), cores, d.cores_label() == cores),
                text("Memory BW", "catalogue", bandwidth_text(&d), bw, bandwidth_text(&d) == bw),
                derived("Minimum threadgroups (seed 000)", "cores", targets.minimum as f64, 0),
                derived("Better: several waves (seed 000)", "cores · 4", targets.better as f64, 0),
            ],
        ));
    }
    let pro_table = table("004", "Chip Specifications", "Pro/Max/Ultra chips", rows);
    Ok(vec![base_table, pro_table])
}

fn s004_sizing() -> SeedTable {
    let printed: [(&str, KernelKind, &str, &str); 5] = [
        ("Element-wise", KernelKind::ElementWise, "256–512", "High occupancy, simple ops"),
        ("Row reduction (D ≤ 32)", KernelKind::RowReduction { row_len: 32 }, "32", "Single simdgroup covers dimension"),
        (
            "Row reduction (D ≤ 1024)",
            KernelKind::RowReduction { row_len: 1024 },
            "256",
            "8 simdgroups with cross-group reduction",
        ),
        ("Row reduction (D > 1024)", KernelKind::RowReduction { row_len: 1025 }, "256–512", "Loop within threads"),
        ("Matrix multiply", KernelKind::MatrixMultiply, "64–128", "Tile-based, register pressure"),
    ];
    let mut rows = Vec::new();
    for (label, kind, size, rationale) in printed {
        let r = occupancy::recommended_threadgroup_size(kind);
        let range = if r.min == r.max { r.min.to_string() } else { format!("{}–{}", r.min, r.max) };
        let sg = geometry::plan_dispatch(DispatchMode::Threadgroups, [1, 1, 1], [r.default, 1, 1], None)
            .map(|g| g.simdgroups_per_threadgroup)
            .unwrap_or(0);
        let mut cells = vec![
            text("Recommended Size", "recommended_threadgroup_size()", range.clone(), size, range == size),
            text("Rationale", "recommended_threadgroup_size()", r.rationale.clone(), rationale, r.rationale == rationale),
            derived("Default", "start here", f64::from(r.default), 0),
        ];
        if label == "Row reduction (D ≤ 1024)" {
            cells.push(int("SIMD groups at 256", "256 / 32", u64::from(sg), "8 simdgroups"));
        }
        rows.push(row(label, cells));
    }
    table("004", "Threadgroup Sizing Guidelines", "Recommended threadgroup size by kernel type", rows)
}

fn s004_intensity() -> Result<SeedTable, SeedTableError> {
    let dev = m4_max()?;
    let balance = dev.machine_balance();
    let bound_word = |ai: f64| match Bound::classify(ai, balance) {
        Bound::Compute => "Compute",
        Bound::Memory => "Memory",
        Bound::Unknown => "unknown",
    };
    let mut rows = Vec::new();
    for (label, flops, bytes, ai, bound) in
        [("RMSNorm", 5.0, 8.0, "0.6", "Memory"), ("Softmax", 5.0, 8.0, "0.6", "Memory"), ("SiLU", 3.0, 8.0, "0.4", "Memory")]
    {
        let v = flops / bytes;
        rows.push(row(
            label,
            vec![
                num("AI", "FLOPs/element / bytes/element", v, 3, ai),
                text("Bound (vs M4 Max balance)", "AI < 58.6 → memory", bound_word(v), bound, bound_word(v) == bound),
            ],
        ));
    }
    let n = 4096.0;
    let gemm_ai = 2.0 * n / 4.0;
    let threshold = balance.map(|b| 2.0 * b);
    let mut gemm = vec![
        text("AI", "2N / 4", "N/2", "N/2", true),
        derived("AI at N = 4096", "2·4096 / 4", gemm_ai, 0),
        text("Bound at N = 4096 (vs M4 Max)", "AI ≥ 58.6 → compute", bound_word(gemm_ai), "Compute", bound_word(gemm_ai) == "Compute"),
    ];
    if let Some(t) = threshold {
        gemm.push(derived("Compute-bound from N >", "2 · balance", t, 1));
    }
    rows.push(row("GEMM (large)", gemm));
    Ok(table("004", "Arithmetic Intensity Analysis", "Arithmetic intensity by operation", rows))
}

fn s004_tg_memory() -> Result<Vec<SeedTable>, SeedTableError> {
    let dev = m4_max()?;
    let budget = u64::from(dev.threadgroup_memory_bytes);
    let mut rows = Vec::new();
    for (label, size, printed) in [
        ("float (4 bytes)", 4u64, "8192"),
        ("half / float16 (2 bytes)", 2, "16384"),
        ("int (4 bytes)", 4, "8192"),
        ("uint8_t (1 byte)", 1, "32768"),
    ] {
        rows.push(row(label, vec![int("Max elements in 32KB", "32768 / size", budget / size, printed)]));
    }
    let limits = table("004", "Threadgroup Memory: Limits", "Elements that fit in 32 KB", rows);

    let mut rows = Vec::new();
    for (label, kb, printed) in [
        ("≤ 4KB", 4u32, "High (limited by registers/threads)"),
        ("8KB", 8, "Moderate"),
        ("16KB", 16, "Reduced"),
        ("32KB (max)", 32, "1 threadgroup per core"),
    ] {
        let occ = occupancy::occupancy(&dev, 128, kb * 1024)?;
        let tgs = occ.threadgroups_per_core.unwrap_or(0);
        let cell = if kb == 32 {
            int("Concurrent TGs per core (memory bound)", "floor(32768 / bytes)", u64::from(tgs), printed)
        } else {
            qualitative("Concurrent TGs per core (memory bound)", "floor(32768 / bytes)", tgs.to_string(), printed)
        };
        rows.push(row(label, vec![cell]));
    }
    let occ = table("004", "Threadgroup Memory: Occupancy Impact", "Threadgroup memory vs concurrent threadgroups", rows);

    let mut rows = Vec::new();
    for (r, c, f32p, f16p, fits) in [
        (32u64, 32u64, "4KB", "2KB", "Yes"),
        (32, 64, "8KB", "4KB", "Yes"),
        (64, 64, "16KB", "8KB", "Yes (float16 only for 2 tiles)"),
        (32, 128, "16KB", "8KB", "Yes"),
        (64, 128, "32KB", "16KB", "Tight (float32) / Yes (float16)"),
    ] {
        let b32 = r * c * 4;
        let b16 = r * c * 2;
        let verdict = |bytes: u64| {
            if bytes < budget {
                "fits"
            } else if bytes == budget {
                "exactly 100 %: no headroom"
            } else {
                "does not fit"
            }
        };
        let fits_text = format!(
            "one tile: float32 {}, float16 {}; two tiles: float32 {}, float16 {}",
            verdict(b32),
            verdict(b16),
            verdict(2 * b32),
            verdict(2 * b16)
        );
        let fits_agree = match fits {
            "Yes" => b32 < budget && b16 < budget,
            "Yes (float16 only for 2 tiles)" => 2 * b32 >= budget && 2 * b16 < budget,
            _ => b32 == budget && b16 < budget,
        };
        rows.push(row(
            format!("{r}×{c} tile"),
            vec![
                num("float32 (KB)", "rows·cols·4 / 1024", b32 as f64 / 1024.0, 0, f32p),
                num("float16 (KB)", "rows·cols·2 / 1024", b16 as f64 / 1024.0, 0, f16p),
                text("Fits in 32KB?", "bytes < 32768 (100 % leaves no headroom)", fits_text, fits, fits_agree),
            ],
        ));
    }
    let tiles_table = table("004", "Threadgroup Memory: Tile Size Examples", "Tile sizes in threadgroup memory", rows);
    Ok(vec![limits, occ, tiles_table])
}

/// Seed 004's tables.
pub fn seed_004_tables() -> Result<Vec<SeedTable>, SeedTableError> {
    let mut out = s004_chips()?;
    out.push(s004_sizing());
    out.push(s004_intensity()?);
    out.extend(s004_tg_memory()?);
    Ok(out)
}

// ------------------------------------------------------- seeds 000, 003 ---

fn g(mode: DispatchMode, size: [u32; 3], tg: [u32; 3], dev: Option<&DeviceSpec>) -> Result<geometry::DispatchGeometry, SeedTableError> {
    Ok(geometry::plan_dispatch(mode, size, tg, dev)?)
}

fn grid_text(d: [u32; 3]) -> String {
    dims(d)
}

/// Seed 000's dispatch examples and sizing rules.
pub fn seed_000_tables() -> Result<Vec<SeedTable>, SeedTableError> {
    use DispatchMode::{Threadgroups, Threads};
    let mut rules = Vec::new();
    for (size, sgs) in [(32u32, "1"), (64, "2"), (128, "4"), (256, "8"), (512, "16"), (1024, "32")] {
        let geo = g(Threadgroups, [1, 1, 1], [size, 1, 1], None)?;
        rules.push(row(format!("{size} threads"), vec![int("SIMD Groups", "ceil(size / 32)", u64::from(geo.simdgroups_per_threadgroup), sgs)]));
    }
    let bad = g(Threadgroups, [1, 1, 1], [100, 1, 1], None)?;
    rules.push(row(
        "100 threads (bad)",
        vec![
            int("SIMD groups", "ceil(100 / 32)", u64::from(bad.simdgroups_per_threadgroup), "4 SIMD groups"),
            int("Idle lanes", "4·32 − 100", u64::from(bad.idle_lanes_per_threadgroup), "28 IDLE"),
            num("Waste %", "28 / 128", bad.waste_percent, 1, "22%"),
        ],
    ));
    let rules_table = table("000", "Rules 1–2", "Threadgroup sizes and SIMD groups", rules);

    let mut options = Vec::new();
    for (label, tgs, threads, regs, shared) in [
        ("Option A: 4 threadgroups of 128", 4u64, 128u64, "16KB", "8KB"),
        ("Option B: 2 threadgroups of 256", 2, 256, "32KB", "16KB"),
        ("Option C: 1 threadgroup of 1024", 1, 1024, "64KB", "32KB"),
    ] {
        options.push(row(
            label,
            vec![
                derived("Threads on the unit", "TGs · threads", (tgs * threads) as f64, 0),
                num("Registers per TG (KB)", "64 KB / TGs", 64.0 / tgs as f64, 0, regs),
                num("Shared memory per TG (KB)", "32 KB / TGs", 32.0 / tgs as f64, 0, shared),
            ],
        ));
    }
    let options_table = table("000", "Rule 3", "Simplified compute unit (64 KB registers, 32 KB threadgroup memory)", options);

    let mut ex = Vec::new();
    let img = g(Threads, [4000, 3000, 1], [16, 16, 1], None)?;
    ex.push(row(
        "dispatchThreads 4000×3000, 16×16",
        vec![
            text("Threadgroups", "ceil(grid / tg)", grid_text(img.threadgroups), "250 x 188", img.threadgroups == [250, 188, 1]),
            int("Rows launched", "188 · 16", u64::from(img.threadgroups[1]) * 16, "18816 = 3008")
                .with_note("the seed's \"18816\" is 188·16 with the multiplication sign lost (likewise \"25016 = 4000\")"),
            int("Extra rows disabled", "3008 − 3000", u64::from(img.threadgroups[1]) * 16 - 3000, "extra 8 rows"),
        ],
    ));
    let tgs = g(Threadgroups, [16, 8, 1], [256, 1, 1], None)?;
    ex.push(row("dispatchThreadgroups 16×8 of 256", vec![int("Total threads", "16·8·256", tgs.total_threads, "32,768")]));
    let ew = g(Threads, [4096 / 4, 1, 1], [256, 1, 1], None)?;
    ex.push(row(
        "Element-wise N=4096, half4",
        vec![
            int("Threads needed", "N / 4", ew.total_threads, "1024"),
            int("Threadgroups", "ceil(1024 / 256)", ew.total_threadgroups, "4"),
        ],
    ));
    let rw = g(Threadgroups, [32, 1, 1], [256, 1, 1], None)?;
    ex.push(row(
        "Row-wise M=32, N=4096",
        vec![
            int("Threadgroups", "M", rw.total_threadgroups, "32"),
            int("Elements per thread", "4096 / 256", geometry::elements_per_thread(4096, 256), "16"),
        ],
    ));
    let gemm_tgs = geometry::threadgroups_to_cover([4096, 4096, 1], [64, 32, 1]);
    let gemm = g(Threadgroups, gemm_tgs, [128, 1, 1], None)?;
    ex.push(row(
        "GEMM 4096³, TM=32, TN=64",
        vec![
            text("Grid", "(ceil(N/TN), ceil(M/TM), 1)", grid_text(gemm.threadgroups), "MTLSize(64, 128, 1)", gemm.threadgroups == [64, 128, 1]),
            int("Total threadgroups", "64 · 128", gemm.total_threadgroups, "8192"),
            int("Total threads", "8192 · 128", gemm.total_threads, "1,048,576"),
        ],
    ));
    let (h, s, d) = (32u32, 2048u32, 128u32);
    let scores = geometry::threadgroups_to_cover([s, 1, 1], [256, 1, 1]);
    let weighted = geometry::threadgroups_to_cover([d, 1, 1], [32, 1, 1]);
    let softmax = [h, 1, 1];
    ex.push(row(
        "Attention decode H=32, S=2048, D=128",
        vec![
            text("Scores grid", "(ceil(S/256), H, 1)", grid_text([scores[0], h, 1]), "MTLSize(ceil(S/256), H, 1)", [scores[0], h] == [8, 32]),
            text("Softmax grid", "(H, 1, 1)", grid_text(softmax), "MTLSize(H, 1, 1)", true)
                .with_note("DESIGN.md's acceptance list writes softmax (1,32); the seed's text is (H, 1, 1) = (32, 1, 1)"),
            text("Weighted-sum grid", "(ceil(D/32), H, 1)", grid_text([weighted[0], h, 1]), "MTLSize(ceil(D/32), H, 1)", [weighted[0], h] == [4, 32]),
        ],
    ));
    let ultra = catalog::find("m2-ultra")?;
    let t = geometry::threadgroup_targets(&ultra);
    ex.push(row(
        "Pitfall 2: M2 Ultra",
        vec![
            int("Compute units", "catalogue", u64::from(ultra.gpu_cores), "76 compute units"),
            int("Minimum threadgroups", "cores", t.minimum, "76"),
            int("Better", "cores · 4", t.better, "76 * 4 = 304+"),
        ],
    ));
    let ten = catalog::find("m4")?;
    let two = g(Threadgroups, [2, 1, 1], [256, 1, 1], Some(&ten))?;
    let idle = u64::from(ten.gpu_cores) - two.total_threadgroups;
    ex.push(row("Pitfall 2: 2 threadgroups, 10 compute units", vec![int("Idle compute units", "10 − 2", idle, "8 compute units sit idle")]));
    let pro = catalog::find("m1-pro")?;
    let w = geometry::waves(64, &pro, 1)?;
    ex.push(row(
        "M1 Pro: 64 threadgroups of 128",
        vec![
            int("Compute units", "catalogue (largest M1 Pro)", u64::from(pro.gpu_cores), "16 compute units"),
            int("Waves (one TG per unit)", "64 / 16", w.waves, "4 waves"),
        ],
    ));
    let examples = table("000", "Dispatch Geometry Calculation", "Dispatch examples", ex);
    Ok(vec![rules_table, options_table, examples])
}

/// Seed 003's dispatch examples.
pub fn seed_003_tables() -> Result<Vec<SeedTable>, SeedTableError> {
    let tg = geometry::pipeline_threadgroup_shape(32, 512)?;
    let a = geometry::cover_with_threadgroups([1024, 768, 1], tg, None)?;
    let b = geometry::cover_with_threadgroups([1920, 1080, 1], tg, None)?;
    let nonuniform = g(DispatchMode::Threads, [1920, 1080, 1], tg, None)?;
    Ok(vec![table(
        "003",
        "Calculate Threadgroups per Grid",
        "Threadgroups covering a texture",
        vec![
            row(
                "Listing 1: width 32, max 512",
                vec![text("Threads per threadgroup", "(w, max / w, 1)", grid_text(tg), "32 x 16", tg == [32, 16, 1])],
            ),
            row(
                "1024 × 768",
                vec![
                    text("Threadgroups", "ceil(size / tg)", grid_text(a.geometry.threadgroups), "32 x 48 x 1", a.geometry.threadgroups == [32, 48, 1]),
                    int("Threadgroup count", "32 · 48", a.geometry.total_threadgroups, "1536"),
                    int("Threads per threadgroup", "32 · 16", 512, "512"),
                    int("Total threads", "1536 · 512", a.geometry.total_threads, "786,432"),
                    text("Needs bounds check", "launched ≠ data", a.needs_bounds_check.to_string(), "matches the number of pixels", !a.needs_bounds_check),
                ],
            ),
            row(
                "1920 × 1080",
                vec![
                    derived("Threadgroups launched", "60 · 68", b.geometry.total_threadgroups as f64, 0),
                    derived("Threads launched", "4080 · 512", b.geometry.total_threads as f64, 0),
                    derived("Out-of-bounds threads", "launched − 1920·1080", b.out_of_bounds_threads as f64, 0),
                    text("Needs bounds check", "launched ≠ data", b.needs_bounds_check.to_string(), "may not always be the case", b.needs_bounds_check),
                    text(
                        "dispatchThreads covers exactly",
                        "non-uniform edges",
                        format!("{} threads run, edge threadgroup {}", nonuniform.total_threads, grid_text(nonuniform.edge_threadgroup.unwrap_or(tg))),
                        "this check isn't required with dispatchThreads",
                        nonuniform.total_threads == 1920 * 1080,
                    ),
                ],
            ),
        ],
    )])
}

/// Every table: seeds 000, 002, 003 and 004, in that order.
pub fn all_tables() -> Result<Vec<SeedTable>, SeedTableError> {
    let mut out = seed_000_tables()?;
    out.extend(seed_002_tables()?);
    out.extend(seed_003_tables()?);
    out.extend(seed_004_tables()?);
    Ok(out)
}

/// The cells whose printed figure disagrees with the formula.
pub fn discrepancies(tables: &[SeedTable]) -> Vec<Discrepancy> {
    let mut out = Vec::new();
    for t in tables {
        for r in &t.rows {
            for c in &r.cells {
                if c.agrees == Some(false) {
                    out.push(Discrepancy {
                        seed: t.seed.clone(),
                        section: t.section.clone(),
                        table: t.title.clone(),
                        row: r.label.clone(),
                        quantity: c.quantity.clone(),
                        computed: c.computed.to_string(),
                        seed_printed: c.seed_printed.clone().unwrap_or_default(),
                        note: c.note.clone(),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_printed_figures() {
        assert_eq!(parse_printed("~32 TFLOPS"), Some((32.0, 0)));
        assert_eq!(parse_printed("16,384 bytes"), Some((16384.0, 0)));
        assert_eq!(parse_printed("56.9"), Some((56.9, 1)));
        assert_eq!(parse_printed("6.25%"), Some((6.25, 2)));
        assert_eq!(parse_printed("1.6x less"), Some((1.6, 1)));
        assert_eq!(parse_printed("none"), None);
        assert_eq!(parse_printed("76 * 4 = 304+"), Some((304.0, 0)));
        assert_eq!(parse_printed("8*4 = 32 accumulators"), Some((32.0, 0)));
    }

    #[test]
    fn compares_at_printed_precision() {
        assert_eq!(compare(37.5, "38%"), (true, false));
        assert_eq!(compare(14.0625, "14%"), (true, false));
        assert_eq!(compare(3.5556, "3.5x"), (true, true));
        assert_eq!(compare(25.6, "32.0"), (false, false));
        assert_eq!(compare(56.888, "56.9"), (true, false));
        assert_eq!(compare(512.0, "128"), (false, false));
        assert_eq!(compare(51.2, "~51"), (true, false));
    }
}
