//! The kernel library on a CUDA GPU at its benchmark shapes, for
//! `bench/library_vs_torch.py`: each registry entry is first checked against
//! its f64 reference at that shape, then timed (device time from CUDA
//! events, summed over the entry's dispatches; median of the repeats).
//! Prints one JSON object.
//!
//! Run on a CUDA machine: `library_cuda [OPTION ...] [name-filter[@shape] ...]`;
//! a filter with `@shape` (e.g. `attention_decode_batch_f16@8x32x8x4096x128`)
//! times the entries it names at that shape instead of their benchmark
//! shape, and may be given several times.

use enigma_ops::{parse_shape, registry, AttentionOptions, GemvOptions, Options, SplitSum};

const USAGE: &str = "library_cuda [--threads N] [--vectorize 0|1] [--splits N] [--keys-per-step N] [--lanes-per-key N] [--stages N] [--heads-per-threadgroup N] [--prefetch 0|1] [--split-sum combine|kernel] [--matrices 0|1] [--gemv-rows N] [--gemv-loads N] [--gemv-stagger 0|1] [--gemm-stages N] [--gemm-cooperative 0|1] [NAME-FILTER[@SHAPE] ...]\n  Every registry entry (or those whose name contains a filter) checked and timed at its benchmark shape (or the filter's SHAPE) on a CUDA GPU, with the options given; one JSON object (bench/library_vs_torch.py).";

/// A name filter and the shape it asks for (`None`: the benchmark shape).
type Filter = (String, Option<Vec<usize>>);

/// The options the flags set, and the filters left.
fn parse_args(args: Vec<String>) -> (Options, Vec<Filter>) {
    let mut options = Options::default();
    let mut filters = vec![];
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut number = |flag: &str| -> u32 {
            let v = it.next().unwrap_or_else(|| panic!("{flag} needs a number"));
            v.parse().unwrap_or_else(|_| panic!("{flag}: `{v}` is not a number"))
        };
        match arg.as_str() {
            "--threads" => options.threads = Some(number("--threads")),
            "--vectorize" => options.vectorize = Some(number("--vectorize") != 0),
            "--splits" => options.attention = AttentionOptions { splits: Some(number("--splits")), ..options.attention },
            "--keys-per-step" => options.attention = AttentionOptions { keys_per_step: Some(number("--keys-per-step")), ..options.attention },
            "--lanes-per-key" => options.attention = AttentionOptions { lanes_per_key: Some(number("--lanes-per-key")), ..options.attention },
            "--stages" => options.attention = AttentionOptions { stages: Some(number("--stages")), ..options.attention },
            "--heads-per-threadgroup" => options.attention = AttentionOptions { heads_per_threadgroup: Some(number("--heads-per-threadgroup")), ..options.attention },
            "--matrices" => options.attention = AttentionOptions { matrices: Some(number("--matrices") != 0), ..options.attention },
            "--prefetch" => options.attention = AttentionOptions { prefetch: Some(number("--prefetch") != 0), ..options.attention },
            "--split-sum" => {
                let sum = match it.next().as_deref() {
                    Some("combine") => SplitSum::Reduction,
                    Some("kernel") => SplitSum::LastThreadgroup,
                    other => panic!("--split-sum takes combine or kernel, not {other:?}"),
                };
                options.attention = AttentionOptions { split_sum: Some(sum), ..options.attention };
            }
            "--gemm-stages" => options.gemm.stages = Some(number("--gemm-stages")),
            "--gemm-cooperative" => options.gemm.cooperative = Some(number("--gemm-cooperative") != 0),
            "--gemv-rows" => options.gemv = GemvOptions { rows_per_simdgroup: Some(number("--gemv-rows")), ..options.gemv },
            "--gemv-stagger" => options.gemv = GemvOptions { stagger: Some(number("--gemv-stagger") != 0), ..options.gemv },
            "--gemv-loads" => options.gemv = GemvOptions { loads: Some(number("--gemv-loads")), ..options.gemv },
            _ => match arg.split_once('@') {
                Some((name, shape)) => filters.push((name.to_string(), Some(parse_shape(shape).unwrap_or_else(|e| panic!("{e}"))))),
                None => filters.push((arg, None)),
            },
        }
    }
    (options, filters)
}

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let (options, filters) = parse_args(std::env::args().skip(1).collect());
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let mut rows = vec![];
    let entries = registry();
    let runs: Vec<(&enigma_ops::Entry, Vec<usize>)> = if filters.is_empty() {
        entries.iter().map(|e| (e, e.bench_shape.clone())).collect()
    } else {
        filters
            .iter()
            .flat_map(|(f, shape)| entries.iter().filter(|e| e.name.contains(f.as_str())).map(|e| (e, shape.clone().unwrap_or_else(|| e.bench_shape.clone()))))
            .collect()
    };
    for (entry, shape) in runs {
        eprintln!("{} {:?}", entry.name, shape);
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
            "kernels": bench.launches.iter().map(|l| l.kernel.clone()).collect::<Vec<_>>(),
        }));
    }
    let out = serde_json::json!({ "device": rt.device().name, "rows": rows });
    println!("{out}");
}
