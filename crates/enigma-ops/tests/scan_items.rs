//! The prefix sums with every number of loads per thread
//! ([`Options::unroll`], 1 to `MAX_SCAN_ITEMS`), each against the f64
//! reference on awkward sizes — one element, partial vectors, partial last
//! blocks and several levels of block totals — and under the sanitizer.

use enigma_kernels::library::scan::MAX_SCAN_ITEMS;
use enigma_ops::{registry, Options, ScanOptions};
use enigma_runtime::{Device, Runtime};

/// One element, one SIMD group and one more, not a multiple of 4, and
/// (with 32 threads and 8 loads of 4: blocks of 1024) about 69 blocks.
const SIZES: [usize; 5] = [1, 33, 1001, 4097, 70_001];

fn scan_entries() -> Vec<enigma_ops::Entry> {
    registry().into_iter().filter(|e| e.name.starts_with("prefix_sum_")).collect()
}

#[test]
fn every_load_count_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let entries = scan_entries();
    assert_eq!(entries.len(), 6, "inclusive and exclusive × f32, i32, u32");
    for entry in &entries {
        for items in 1..=MAX_SCAN_ITEMS {
            for threads in [32, 256] {
                for n in SIZES {
                    let options = Options { scan: ScanOptions { items: Some(items) }, threads: Some(threads), ..Options::default() };
                    let outcome = entry.run_with(&rt, &[n], &options).unwrap_or_else(|e| panic!("{} {n} {options:?}: {e}", entry.name));
                    assert!(outcome.passed, "{outcome}");
                    assert_eq!(outcome.checked, n, "{outcome}");
                    // The first pass's kernel is named by its loads.
                    let first = &outcome.launches[0].kernel;
                    assert_eq!(first.contains(&format!("_x{items}")), items > 1, "{first}");
                }
            }
        }
    }
}

#[test]
fn several_loads_per_thread_run_clean_under_the_sanitizer() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for entry in scan_entries() {
        for items in [2, 3, 8] {
            for vectorize in [Some(false), None] {
                let options = Options { scan: ScanOptions { items: Some(items) }, threads: Some(32), vectorize, sanitize: true, ..Options::default() };
                let outcome = entry.run_with(&rt, &[5001], &options).unwrap_or_else(|e| panic!("{} {options:?}: {e}", entry.name));
                assert!(outcome.passed, "{outcome}");
                assert!(outcome.launches.len() >= 3, "{outcome}");
                for launch in &outcome.launches {
                    assert!(launch.findings.is_empty(), "{} ({}): {}", entry.name, launch.kernel, launch.findings.join("\n"));
                }
            }
        }
    }
}
