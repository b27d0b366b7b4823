//! The recomputed seed tables: which printed figures agree, and exactly which
//! are flagged as the seeds' mistakes (with the right value).

use enigma_analysis::seed_tables::{self, Cell, SeedTable, Value};

fn tables() -> Vec<SeedTable> {
    seed_tables::all_tables().expect("tables build")
}

fn cell<'a>(tables: &'a [SeedTable], section: &str, row: &str, quantity: &str) -> &'a Cell {
    tables
        .iter()
        .filter(|t| t.section == section)
        .flat_map(|t| t.rows.iter())
        .filter(|r| r.label == row)
        .flat_map(|r| r.cells.iter())
        .find(|c| c.quantity == quantity)
        .unwrap_or_else(|| panic!("no cell {section} / {row} / {quantity}"))
}

fn number(c: &Cell) -> f64 {
    match c.computed {
        Value::Number { value, .. } => value,
        Value::Text(ref t) => panic!("{} is text: {t}", c.quantity),
    }
}

#[test]
fn exactly_these_seed_figures_disagree() {
    let t = tables();
    let mut found: Vec<(String, String, String)> =
        seed_tables::discrepancies(&t).into_iter().map(|d| (d.section, d.row, d.quantity)).collect();
    found.sort();
    let mut expected: Vec<(String, String, String)> = [
        ("§3.1", "C[8x8] += A[8x8] * B[8x8]", "Multiply-adds per call"),
        ("§3.1", "C[8x8] += A[8x8] * B[8x8]", "FLOPs per call"),
        ("§3.4", "64x64 (current: 2x4)", "SIMD-group grid (M×N)"),
        ("§5.1", "128x64x16", "Bound on M4 Max"),
        ("§5.2", "32x128x32", "AI (FP16 weights)"),
        ("§5.2", "32x128x32", "Speedup from quantization"),
        ("§6", "§6.4 Maximum compute 128x128x16", "SG output tile"),
        ("§6", "§6.4 Maximum compute 128x128x16", "SG_N"),
        ("§6", "§6.4 Maximum compute 128x128x16", "Accumulators per SIMD group"),
        ("§6", "§6.4 Maximum compute 128x128x16", "Accumulators per SIMD group (prose)"),
        ("§8", "§8.1 separate: load phase", "B packed FP4 bytes"),
        ("§8", "§8.1 separate: compute phase (per SIMD group)", "FLOPs"),
        ("§8", "§8.2 fused: inner loop", "Idle lanes during dequant %"),
        ("§9", "Small batch decode (M 8-32)", "§9.1 select_tile over M 8-32"),
        ("§9", "Prefill (short) (M 32-128)", "§9.1 select_tile over M 32-128"),
        ("§9", "Prefill (long) (M 128-512)", "§9.1 select_tile over M 128-512"),
    ]
    .into_iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    expected.sort();
    assert_eq!(found, expected);
    // Every flagged cell explains itself.
    for d in seed_tables::discrepancies(&t) {
        assert!(d.note.is_some(), "{} / {} has no note", d.row, d.quantity);
    }
}

#[test]
fn flagged_cells_hold_the_correct_values() {
    let t = tables();
    let c = cell(&t, "§3.1", "C[8x8] += A[8x8] * B[8x8]", "FLOPs per call");
    assert_eq!((number(c), c.seed_printed.as_deref(), c.agrees), (1024.0, Some("256 FLOPs per call"), Some(false)));
    let c = cell(&t, "§5.2", "32x128x32", "AI (FP16 weights)");
    assert!((number(c) - 25.6).abs() < 1e-12);
    assert_eq!(c.seed_printed.as_deref(), Some("32.0"));
    let c = cell(&t, "§5.2", "32x128x32", "Speedup from quantization");
    assert!((number(c) - 2.5).abs() < 1e-12);
    let c = cell(&t, "§6", "§6.4 Maximum compute 128x128x16", "Accumulators per SIMD group");
    assert_eq!(number(c), 64.0);
    let c = cell(&t, "§8", "§8.1 separate: load phase", "B packed FP4 bytes");
    assert_eq!(number(c), 1024.0);
    let c = cell(&t, "§8", "§8.1 separate: compute phase (per SIMD group)", "FLOPs");
    assert_eq!(number(c), 65_536.0);
    let c = cell(&t, "§8", "§8.2 fused: inner loop", "Idle lanes during dequant %");
    assert_eq!(number(c), 75.0);
    let c = cell(&t, "§9", "Small batch decode (M 8-32)", "§9.1 select_tile over M 8-32");
    assert_eq!(c.computed, Value::Text("32x128x32 for M=8–16, 64x64x32 for M=17–32".to_string()));
}

#[test]
fn seed_figures_that_agree() {
    let t = tables();
    for (section, row, quantity, value) in [
        ("§2.3", "64x64x32 separate (2-buf)", "Total", 16_384.0),
        ("§2.3", "128x64x16 separate (2-buf)", "Budget %", 37.5),
        ("§2.3", "32x128x32 separate (2-buf)", "Budget %", 62.5),
        ("§2.3", "32x128x32 fused", "Total", 2_560.0),
        ("§2.3", "64x64x64 separate (2-buf)", "Budget %", 100.0),
        ("§4.1", "Fused (32x128x32)", "Threads/core", 1_536.0),
        ("§4.3", "Fused 64x64", "Total active TGs", 280.0),
        ("§5.1", "128x128x16", "FLOPs", 524_288.0),
        ("§5.3", "INT4 U4B8", "Overhead %", 3.125),
        ("§6", "§6.4 Maximum compute 128x128x16", "Register pressure, FP32 accumulators", 512.0),
        ("§6", "§6.4 Maximum compute 128x128x16", "MMA ops/iter (per SIMD group)", 128.0),
        ("§6", "§6.3 Large-N 32x128x32", "Occupancy (separate)", 1.0),
    ] {
        let c = cell(&t, section, row, quantity);
        assert!((number(c) - value).abs() < 1e-9, "{section} / {row} / {quantity}: {:?}", c.computed);
        assert_eq!(c.agrees, Some(true), "{section} / {row} / {quantity}");
    }
    // 16,384 / 4,608 = 3.56 agrees with "3.5x" only by truncation, and says so.
    let c = cell(&t, "§2.1–2.2", "Reduction", "Separate / fused");
    assert_eq!(c.agrees, Some(true));
    assert!(c.note.as_deref().unwrap_or_default().contains("truncates"));
    // ~51 waves: 51.2.
    let c = cell(&t, "§4.3", "4096x4096 GEMM, 64x64 tiles", "Waves with 80 active TGs");
    assert!((number(c) - 51.2).abs() < 1e-12);
    assert!(c.note.as_deref().unwrap_or_default().contains("52 waves"));
    // 64x64x64 separate is rejected.
    let c = cell(&t, "§2.3", "64x64x64 separate (2-buf)", "Fits (< 100 % of budget)");
    assert_eq!(c.computed, Value::Text("rejected: no headroom".to_string()));
    assert_eq!(c.agrees, Some(true));
}

#[test]
fn seed004_chip_and_memory_tables_agree() {
    let t = tables();
    let s004: Vec<&SeedTable> = t.iter().filter(|t| t.seed == "004").collect();
    assert!(s004.len() >= 7);
    let mut checked = 0;
    for table in &s004 {
        for r in &table.rows {
            for c in &r.cells {
                if let Some(a) = c.agrees {
                    checked += 1;
                    assert!(a, "seed 004 {} / {} / {}: computed {}, printed {:?}", table.title, r.label, c.quantity, c.computed, c.seed_printed);
                }
            }
        }
    }
    assert!(checked >= 60, "only {checked} seed-004 cells checked");
    let c = cell(&t, "Chip Specifications", "Apple M1", "GPU Cores");
    assert_eq!(c.computed, Value::Text("7–8".to_string()));
    let c = cell(&t, "Arithmetic Intensity Analysis", "SiLU", "AI");
    assert_eq!(number(c), 0.375);
    let c = cell(&t, "Threadgroup Memory: Limits", "half / float16 (2 bytes)", "Max elements in 32KB");
    assert_eq!(number(c), 16_384.0);
}

#[test]
fn seeds_000_and_003_tables_agree() {
    let t = tables();
    for table in t.iter().filter(|t| t.seed == "000" || t.seed == "003") {
        for r in &table.rows {
            for c in &r.cells {
                assert_ne!(c.agrees, Some(false), "seed {} {} / {}", table.seed, r.label, c.quantity);
            }
        }
    }
    let c = cell(&t, "Rules 1–2", "100 threads (bad)", "Waste %");
    assert!((number(c) - 21.875).abs() < 1e-12);
    assert_eq!(c.seed_printed.as_deref(), Some("22%"));
    let c = cell(&t, "Calculate Threadgroups per Grid", "1024 × 768", "Total threads");
    assert_eq!(number(c), 786_432.0);
}

#[test]
fn counts_and_json() {
    let t = tables();
    let cells: Vec<&Cell> = t.iter().flat_map(|t| t.rows.iter()).flat_map(|r| r.cells.iter()).collect();
    let checked = cells.iter().filter(|c| c.agrees.is_some()).count();
    let disagree = cells.iter().filter(|c| c.agrees == Some(false)).count();
    assert_eq!(disagree, 16);
    assert!(checked > 300, "{checked}");
    // Every printed figure is labelled as the seed's and kept verbatim.
    assert!(cells.iter().all(|c| c.agrees.is_none() || c.seed_printed.is_some()));
    let v = serde_json::to_value(&t).unwrap();
    assert!(v.as_array().unwrap().iter().all(|t| t.get("seed").is_some() && t.get("rows").is_some()));
    let first_cell = &v[0]["rows"][0]["cells"][0];
    for key in ["quantity", "formula", "computed", "seed_printed", "agrees", "note"] {
        assert!(first_cell.get(key).is_some(), "missing {key}");
    }
}
