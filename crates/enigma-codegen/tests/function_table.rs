//! `docs/kernel-functions.md` names every function of the IR
//! (`Intrinsic::ALL`) and every builtin (`Builtin::ALL`) in the first column
//! of one of its tables: a function added to the language without a row
//! fails here. Also each row's MSL spelling is the one the MSL writer uses.

use enigma_ir::{Builtin, Intrinsic};
use std::collections::BTreeMap;

/// The first-column names of every table row (backticked, comma-separated),
/// each with its row's cells.
fn rows() -> BTreeMap<String, Vec<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/kernel-functions.md");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut rows = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<String> = line.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect();
        for name in cells[0].split(", ") {
            rows.insert(name.trim_matches('`').to_string(), cells.clone());
        }
    }
    rows
}

#[test]
fn every_function_and_builtin_has_a_row() {
    let rows = rows();
    let missing: Vec<&str> = Intrinsic::ALL
        .iter()
        .map(|f| f.name())
        .chain(Builtin::ALL.iter().map(|b| b.name()))
        .filter(|n| !rows.contains_key(*n))
        .collect();
    assert!(missing.is_empty(), "docs/kernel-functions.md has no row for {missing:?}");
}

#[test]
fn the_msl_column_is_the_msl_name() {
    let rows = rows();
    for f in Intrinsic::ALL.iter().filter(|f| f.is_float_math()) {
        let cells = &rows[f.name()];
        assert!(cells[2].starts_with(&format!("`{}`", f.name())), "the MSL spelling of `{}`: {}", f.name(), cells[2]);
    }
}
