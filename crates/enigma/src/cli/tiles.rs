//! `enigma tiles`: seed 002's quantized-GEMM tile planner for one tile
//! (`--m --n --k`, or `--problem` to let `select_tile` pick), and
//! `--seed-tables` to print every seed table recomputed from the formulas with
//! the cells where the seed's printed figure disagrees marked.
//!
//! Exit status: 0 when the tile fits, 1 when it needs 100 % or more of the
//! threadgroup memory (the report still prints, with the reason), 2 on errors.

use std::process::ExitCode;

use enigma_analysis::seed_tables::{self, SeedTable};
use enigma_analysis::text::{dims2, number, thousands};
use enigma_analysis::tiles::{self, Bound, ProblemSize, TileConfig, TileReport, TileShape, TileVariant, WeightFormat};

use super::common::{self, parse_dims, parse_pair};

/// Weight format on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// FP4 E2M1.
    Fp4,
    /// INT4 U4B8.
    Int4,
    /// Unquantized FP16.
    Fp16,
}

/// Dequant variant on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Double-buffered A and B tiles in threadgroup memory.
    Separate,
    /// B dequantized in registers through per-SIMD-group 8×8 staging.
    Fused,
    /// enigma's library GEMM (FP16 weights): one padded slice of A and of B,
    /// the next prefetched through registers.
    Staged,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// TILE_M (with --n and --k).
    #[arg(long, requires_all = ["n", "k"])]
    pub m: Option<u32>,
    /// TILE_N.
    #[arg(long, requires_all = ["m", "k"])]
    pub n: Option<u32>,
    /// TILE_K.
    #[arg(long, requires_all = ["m", "n"])]
    pub k: Option<u32>,
    /// GEMM problem M,N,K: adds output tiles and waves; without --m/--n/--k
    /// the tile comes from select_tile (seed 002 §9.1).
    #[arg(long, value_parser = parse_problem)]
    pub problem: Option<[u32; 3]>,
    /// B's weight format.
    #[arg(long, value_enum, default_value_t = Weights::Fp4)]
    pub weights: Weights,
    /// Dequant variant.
    #[arg(long, value_enum, default_value_t = Variant::Separate)]
    pub variant: Variant,
    /// Catalogue device.
    #[arg(long, default_value = "m4-max")]
    pub device: String,
    /// SIMD groups per threadgroup.
    #[arg(long, default_value_t = tiles::DEFAULT_SIMDGROUPS)]
    pub simdgroups: u32,
    /// SIMD-group grid along M×N (e.g. 2x2); chosen automatically if absent.
    #[arg(long = "sg-grid", value_parser = parse_pair)]
    pub sg_grid: Option<[u32; 2]>,
    /// K-values per quantization scale.
    #[arg(long = "group-size", default_value_t = tiles::DEFAULT_GROUP_SIZE)]
    pub group_size: u32,
    /// With --variant staged: slices of K in threadgroup memory at once (1:
    /// staged through registers; 2 or 3: pipelined by asynchronous copies).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(enigma_kernels::library::gemm::MAX_STAGES)))]
    pub stages: u32,
    /// Override the device's peak FP16 TFLOPS (for the machine balance).
    #[arg(long)]
    pub tflops: Option<f64>,
    /// Override the device's memory bandwidth in GB/s.
    #[arg(long)]
    pub bandwidth: Option<f64>,
    /// Print the seed tables recomputed from the formulas instead.
    #[arg(long = "seed-tables", conflicts_with_all = ["m", "n", "k", "problem"])]
    pub seed_tables: bool,
    /// With --seed-tables: only this seed (000, 002, 003, 004).
    #[arg(long, requires = "seed_tables")]
    pub seed: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--problem M,N,K`: all three dimensions, each at least 1 (a GEMM has no
/// default for a missing one).
fn parse_problem(s: &str) -> Result<[u32; 3], String> {
    let dims = parse_dims(s)?;
    if s.split([',', 'x', 'X', '×']).count() != 3 {
        return Err(format!("`{s}` is not a problem size: expected M,N,K (all three)"));
    }
    if let Some(i) = dims.iter().position(|&d| d == 0) {
        return Err(format!("`{s}`: {} = 0; every problem dimension must be at least 1", ["M", "N", "K"][i]));
    }
    Ok(dims)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.seed_tables {
        return run_seed_tables(&args);
    }
    let mut device = common::device(&args.device)?;
    if let Some(t) = args.tflops {
        anyhow::ensure!(t.is_finite() && t > 0.0, "--tflops must be a positive number (got {t})");
        device.fp16_tflops = Some(t);
    }
    if let Some(b) = args.bandwidth {
        anyhow::ensure!(b.is_finite() && b > 0.0, "--bandwidth must be a positive number (got {b})");
        device.memory_bandwidth_gb_s = Some(b);
    }
    let problem = args.problem.map(|[m, n, k]| ProblemSize { m, n, k });
    let (shape, selected) = match (args.m, args.n, args.k, problem) {
        (Some(m), Some(n), Some(k), _) => (TileShape::new(m, n, k), false),
        (_, _, _, Some(p)) => (tiles::select_tile(p.m, p.n, p.k), true),
        _ => anyhow::bail!("give a tile with --m, --n and --k, or a problem size with --problem (or use --seed-tables)"),
    };
    let config = TileConfig {
        shape,
        variant: match args.variant {
            Variant::Separate => TileVariant::Separate,
            Variant::Fused => TileVariant::Fused,
            Variant::Staged => TileVariant::Staged,
        },
        weights: match args.weights {
            Weights::Fp4 => WeightFormat::Fp4E2M1,
            Weights::Int4 => WeightFormat::Int4U4B8,
            Weights::Fp16 => WeightFormat::Fp16,
        },
        group_size: args.group_size,
        simdgroups: args.simdgroups,
        sg_grid: args.sg_grid,
        stages: args.stages,
    };
    let report = tiles::plan_tile(&config, &device, problem)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, selected);
    }
    if let Some(reason) = &report.rejection {
        eprintln!("rejected: {reason}");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn weights_name(w: WeightFormat) -> &'static str {
    match w {
        WeightFormat::Fp16 => "FP16",
        WeightFormat::Fp4E2M1 => "FP4 E2M1",
        WeightFormat::Int4U4B8 => "INT4 U4B8",
    }
}

fn print_report(r: &TileReport, selected: bool) {
    println!(
        "tile {}{}: {}, {} weights{}, {} SIMD groups ({} threads) on {}",
        r.tile,
        if selected { " (select_tile)" } else { "" },
        match r.variant {
            TileVariant::Staged => "staged slices (the library GEMM)".to_string(),
            v => format!("{} dequant", v.short_name()),
        },
        weights_name(r.weights),
        if r.weights.has_scales() { format!(" (group {})", r.group_size) } else { String::new() },
        r.simdgroups,
        r.threads_per_threadgroup,
        r.device
    );
    let p = &r.partition;
    let mut pairs = vec![
        (
            "threadgroup memory".to_string(),
            format!(
                "A {} + B {} = {} bytes ({:.1} % of {}): {}",
                thousands(r.a_bytes),
                thousands(r.b_bytes),
                thousands(r.tg_memory_bytes),
                r.budget_percent,
                thousands(u64::from(r.budget_bytes)),
                if r.fits { "fits" } else { "REJECTED" }
            ),
        ),
        (
            "SIMD-group partition".to_string(),
            format!(
                "{} grid (M×N), {} outputs each (SG_M={}, SG_N={}), {} K sub-tiles",
                dims2(p.grid),
                dims2(p.sg_tile),
                p.sg_m_tiles,
                p.sg_n_tiles,
                r.k_subtiles
            ),
        ),
        (
            "MMA per iteration".to_string(),
            format!("{} per SIMD group, {} per threadgroup", r.mma_per_simdgroup_per_iteration, thousands(r.mma_per_threadgroup_per_iteration)),
        ),
        (
            "accumulators".to_string(),
            format!(
                "{} per SIMD group: {} bytes/thread (fp16), {} bytes/thread (fp32)",
                r.accumulators_per_simdgroup, r.accumulator_bytes_per_thread_fp16, r.accumulator_bytes_per_thread_fp32
            ),
        ),
        (
            "occupancy".to_string(),
            format!(
                "{} threadgroup{} per core, {} threads per core, {} in flight",
                r.tgs_per_core,
                if r.tgs_per_core == 1 { "" } else { "s" },
                thousands(r.threads_per_core),
                thousands(r.concurrent_threadgroups)
            ),
        ),
        (
            "per tile iteration".to_string(),
            format!(
                "{} FLOPs; loads A {} + B {} bytes (+ scales {})",
                thousands(r.flops_per_iteration),
                number(r.a_load_bytes, 0),
                number(r.b_load_bytes, 0),
                number(r.scale_load_bytes, 1)
            ),
        ),
        (
            "arithmetic intensity".to_string(),
            format!(
                "{} FLOPs/byte ignoring scales, {} with scales",
                number(r.arithmetic_intensity, 1),
                number(r.arithmetic_intensity_with_scales, 1)
            ),
        ),
        (
            "machine balance".to_string(),
            match r.machine_balance {
                Some(b) => format!(
                    "{} FLOPs/byte → {}",
                    number(b, 1),
                    match r.bound {
                        Bound::Compute => "compute-bound",
                        Bound::Memory => "memory-bound",
                        Bound::Unknown => "unknown",
                    }
                ),
                None => "unknown → bound unknown".to_string(),
            },
        ),
        (
            "dequant overhead".to_string(),
            format!("{} ops per iteration = {:.2} % of the FLOPs", thousands(r.dequant_ops_per_iteration), r.dequant_overhead_percent),
        ),
    ];
    if let Some(pr) = &r.problem {
        pairs.push((
            format!("problem {}x{}x{}", pr.problem.m, pr.problem.n, pr.problem.k),
            format!(
                "{} = {} output tiles, {} K iterations, {:.1} % edge waste; {:.2} waves of {} ({} wave{}, last {:.0} % full)",
                dims2(pr.output_tiles),
                thousands(pr.total_output_tiles),
                pr.k_iterations,
                pr.edge_waste_percent,
                pr.waves.waves_exact,
                thousands(pr.waves.concurrent_threadgroups),
                pr.waves.waves,
                if pr.waves.waves == 1 { "" } else { "s" },
                pr.waves.last_wave_fill_percent
            ),
        ));
        if let Some(p) = pr.predicted {
            let roof = if p.compute_seconds >= p.memory_seconds { "compute" } else { "memory" };
            pairs.push((
                "predicted time".to_string(),
                format!(
                    "{:.1} µs ({roof}-bound roofline: MMAs {:.1} µs, DRAM {:.1} µs; a model, not a measurement)",
                    p.seconds * 1e6,
                    p.compute_seconds * 1e6,
                    p.memory_seconds * 1e6
                ),
            ));
        }
    }
    common::print_pairs(&pairs);
    for n in &r.notes {
        println!("note: {n}");
    }
}

/// What `--seed-tables` prints first, so that its tables read without the
/// seed documents at hand.
const SEED_TABLES_PREAMBLE: &str = "\
The seeds are the five documents enigma was written from; they are not in the
repository (the README's \"The seed documents\" says what each one is). Each
table below takes one table or worked example of a seed and recomputes it
from its formulas: `computed` is enigma's figure, `seed prints` the seed's,
and `check` says `ok` when they agree, `SEED DISAGREES` when they do not, and
`-` when the seed prints nothing to compare.
";

/// A few words on what seed document `seed` is.
fn seed_document(seed: &str) -> &'static str {
    match seed {
        "000" => "a chapter on Metal threadgroups, SIMD groups and dispatch",
        "001" => "the Python two-pass reduction example",
        "002" => "tile sizing for quantized GEMM on the M4 Max",
        "003" => "Apple's \"Calculating Threadgroup and Grid Sizes\"",
        "004" => "an Apple-silicon GPU optimisation guide",
        _ => "a seed document",
    }
}

fn run_seed_tables(args: &Args) -> anyhow::Result<ExitCode> {
    let tables: Vec<SeedTable> = match args.seed.as_deref().map(|s| s.trim_start_matches('0')) {
        None => seed_tables::all_tables()?,
        Some("") => seed_tables::seed_000_tables()?,
        Some("2") => seed_tables::seed_002_tables()?,
        Some("3") => seed_tables::seed_003_tables()?,
        Some("4") => seed_tables::seed_004_tables()?,
        Some(_) => anyhow::bail!(
            "no tables for seed `{}`; seeds with tables: 000, 002, 003, 004",
            args.seed.as_deref().unwrap_or_default()
        ),
    };
    let discrepancies = seed_tables::discrepancies(&tables);
    if args.json {
        let out = serde_json::json!({ "tables": tables, "discrepancies": discrepancies });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", SEED_TABLES_PREAMBLE.trim_end());
    println!();
    let (mut checked, mut agree) = (0usize, 0usize);
    for t in &tables {
        println!("seed {} ({}) {} — {}", t.seed, seed_document(&t.seed), t.section, t.title);
        let mut rows = Vec::new();
        let mut notes = Vec::new();
        for r in &t.rows {
            for c in &r.cells {
                let mark = match c.agrees {
                    Some(true) => "ok",
                    Some(false) => "SEED DISAGREES",
                    None => "-",
                };
                if let Some(a) = c.agrees {
                    checked += 1;
                    agree += usize::from(a);
                }
                let mut computed = c.computed.to_string();
                if let Some(note) = &c.note {
                    notes.push(note.clone());
                    computed.push_str(&format!(" [{}]", notes.len()));
                }
                rows.push(vec![
                    r.label.clone(),
                    c.quantity.clone(),
                    computed,
                    c.seed_printed.clone().unwrap_or_else(|| "(not printed)".to_string()),
                    mark.to_string(),
                ]);
            }
        }
        common::print_table(&["row", "quantity", "computed", "seed prints", "check"], &rows);
        for (i, n) in notes.iter().enumerate() {
            println!("  [{}] {n}", i + 1);
        }
        println!();
    }
    println!("{checked} printed figures checked: {agree} agree, {} disagree", checked - agree);
    for d in &discrepancies {
        println!(
            "  seed {} {} {} / {}: computed {}, seed prints \"{}\"",
            d.seed, d.section, d.row, d.quantity, d.computed, d.seed_printed
        );
    }
    Ok(ExitCode::SUCCESS)
}
