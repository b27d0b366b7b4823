//! Every registry entry (every operation × element type) on awkward sizes,
//! with the scalar kernels and with the vector kernels, against the f64 CPU
//! reference each entry carries; row kernels also in their streaming form.

use enigma_ops::{registry, CheckOutcome, Entry, Options};
use enigma_runtime::{Device, Runtime};

/// Flat vectors: one element, around one SIMD group, not a multiple of 4,
/// and just past 4096.
const FLAT: [usize; 6] = [1, 31, 33, 1000, 4096, 4097];
/// `[rows, d]` (and GEMV's `[m, k]`): a column, odd widths, a long odd row,
/// a long row of whole vectors, and more rows than one GEMV threadgroup.
const ROWS: [[usize; 2]; 6] = [[3, 1], [5, 33], [2, 1000], [1, 4097], [2, 4096], [37, 64]];
/// `[heads, s_len, d]` with seed 000's D = 128: one key, one SIMD group and
/// one more, more keys than a 256-thread scores threadgroup; d = 36
/// (vectors, fewer than 32 per row), 33 (scalar only) and the largest head
/// dimension, 1024 (8 register slots per lane with vectors, 32 without).
const ATTENTION: [[usize; 3]; 6] = [[1, 1, 128], [2, 33, 128], [3, 300, 128], [2, 40, 36], [1, 7, 33], [1, 3, 1024]];
/// Quantized matmul `[m, n, k]`: one column, odd widths and a partial tile,
/// one group of 32 (k = 32, 96) or 64, eight rows and two blocks of 8.
const QMATMUL: [[usize; 3]; 6] = [[1, 1, 32], [3, 7, 64], [8, 33, 128], [1, 100, 96], [16, 12, 256], [2, 130, 32]];

fn shapes(entry: &Entry) -> Vec<Vec<usize>> {
    if entry.name.starts_with("qmatmul_") {
        return QMATMUL.iter().map(|s| s.to_vec()).collect();
    }
    match entry.shape_names.len() {
        1 => FLAT.iter().map(|&n| vec![n]).collect(),
        2 => ROWS.iter().map(|s| s.to_vec()).collect(),
        _ => ATTENTION.iter().map(|s| s.to_vec()).collect(),
    }
}

/// Whether the shape allows the vector kernels: any length for flat
/// vectors, a last dimension that is a multiple of 4 otherwise.
fn vector_shape(shape: &[usize]) -> bool {
    shape.len() == 1 || shape.last().is_some_and(|d| d % 4 == 0)
}

fn check(rt: &Runtime, entry: &Entry, shape: &[usize], options: &Options) -> CheckOutcome {
    let outcome = entry.run_with(rt, shape, options).unwrap_or_else(|e| panic!("{} {shape:?} {options:?}: {e}", entry.name));
    assert!(outcome.passed, "{outcome}");
    let elems = match entry.name.as_str() {
        n if n.starts_with("sum_") || n.starts_with("max_") || n.starts_with("min_") => {
            if n.contains("_rows_") {
                shape[0]
            } else {
                1
            }
        }
        n if n.starts_with("gemv_") => shape[0],
        n if n.starts_with("qmatmul_") => shape[0] * shape[1],
        n if n.starts_with("attention_") => shape[0] * shape[2],
        _ => shape.iter().product(),
    };
    assert_eq!(outcome.checked, elems, "{outcome}");
    outcome
}

fn first_kernel(outcome: &CheckOutcome) -> &str {
    &outcome.launches.first().expect("at least one dispatch").kernel
}

#[test]
fn every_entry_matches_its_reference_on_awkward_sizes() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let mut runs = 0;
    for entry in registry() {
        for shape in shapes(&entry) {
            // `scale_vec4` entries insist on vector loads; the others
            // run once with scalar kernels and once choosing for themselves.
            if !entry.name.starts_with("scale_vec4") {
                let scalar = check(&rt, &entry, &shape, &Options { vectorize: Some(false), ..Options::default() });
                assert!(!first_kernel(&scalar).contains("_vec4"), "{scalar}");
                assert!(!entry.name.starts_with("qmatmul_") || first_kernel(&scalar).contains("_c1_"), "{scalar}");
            }
            let auto = check(&rt, &entry, &shape, &Options::default());
            if entry.name.starts_with("qmatmul_") {
                // Vector loads are columns per thread: 2 or 4 where N allows.
                assert_eq!(!first_kernel(&auto).contains("_c1_"), shape[1] % 2 == 0 && shape[0] <= 4, "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else {
                assert_eq!(first_kernel(&auto).contains("_vec4"), vector_shape(&shape), "{} {shape:?}: {:?}", entry.name, auto.launches);
            }
            runs += 2;
        }
    }
    assert!(runs > 600, "{runs} runs");
}

#[test]
fn row_kernels_stream_long_rows_the_same() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let streaming = Options { cache_rows: Some(false), ..Options::default() };
    let row_kernels = registry().into_iter().filter(|e| ["softmax_", "rms_norm_", "layer_norm_"].iter().any(|p| e.name.starts_with(p)));
    let mut runs = 0;
    for entry in row_kernels {
        for shape in ROWS {
            let outcome = check(&rt, &entry, &shape, &streaming);
            assert!(first_kernel(&outcome).ends_with("_online"), "{outcome}");
            let scalar = check(&rt, &entry, &shape, &Options { vectorize: Some(false), ..streaming.clone() });
            assert!(first_kernel(&scalar).ends_with("_online"), "{scalar}");
            runs += 1;
        }
    }
    assert_eq!(runs, 10 * ROWS.len(), "softmax (3 types + online), RMSNorm and LayerNorm (3 types each)");
}

#[test]
fn threadgroup_overrides_give_the_same_results() {
    // 32 threads: multi-level scans, many reduction passes, one SIMD group
    // per row; 1024: whole threadgroups of 32 SIMD groups.
    let rt = Runtime::new(Device::Sim).unwrap();
    for threads in [32, 64, 1024] {
        for entry in registry() {
            let shape = match entry.shape_names.len() {
                1 => vec![70_001],
                2 => vec![3, 2049],
                _ => vec![2, 70, 128],
            };
            let outcome = check(&rt, &entry, &shape, &Options::threads(threads));
            assert_eq!(outcome.launches[0].threads, [threads, 1, 1], "{outcome}");
        }
    }
}
