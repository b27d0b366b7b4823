//! The kernel library on a CUDA GPU at its benchmark shapes, for
//! `bench/library_vs_torch.py`: each registry entry is first checked against
//! its f64 reference at that shape, then timed (device time from CUDA
//! events, summed over the entry's dispatches; median of the repeats).
//! Prints one JSON object.
//!
//! Run on a CUDA machine: `library_cuda [name-filter ...]`.

use enigma_ops::{registry, Options};

const USAGE: &str = "library_cuda [NAME-FILTER ...]\n  Every registry entry (or those whose name contains a filter) checked and timed at its benchmark shape on a CUDA GPU; one JSON object (bench/library_vs_torch.py).";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let mut rows = vec![];
    for entry in registry() {
        if !filters.is_empty() && !filters.iter().any(|f| entry.name.contains(f.as_str())) {
            continue;
        }
        let shape = entry.bench_shape.clone();
        eprintln!("{} {:?}", entry.name, shape);
        let options = Options::default();
        let check = match entry.run_with(&rt, &shape, &options) {
            Ok(c) => c,
            Err(e) => {
                rows.push(serde_json::json!({ "name": entry.name, "shape": shape, "error": e.to_string() }));
                continue;
            }
        };
        let bench = match entry.bench(&rt, &shape, &options, 5, 20, &mut |_, _| {}) {
            Ok(b) => b,
            Err(e) => {
                rows.push(serde_json::json!({ "name": entry.name, "shape": shape, "error": e.to_string() }));
                continue;
            }
        };
        let median_s = bench.median.as_secs_f64();
        rows.push(serde_json::json!({
            "name": entry.name,
            "elem": entry.elem.to_string(),
            "shape": shape,
            "passed": check.passed,
            "failures": check.failures,
            "max_abs_error": check.max_abs_error,
            "device_timed": bench.device_timed,
            "median_us": median_s * 1e6,
            "best_us": bench.best.as_secs_f64() * 1e6,
            "bytes": bench.bytes,
            "tb_per_s": bench.bytes as f64 / median_s / 1e12,
            "dispatches": bench.launches.len(),
        }));
    }
    let out = serde_json::json!({ "device": rt.device().name, "rows": rows });
    println!("{out}");
}
