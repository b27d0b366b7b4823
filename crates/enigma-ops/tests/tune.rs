//! The autotuner's mechanics on the simulator: candidate filtering, a real
//! tuning run, the cache file (round trip, replacement, bad files) and the
//! registry picking up a cached choice. Tests that touch the cache share the
//! process-wide `ENIGMA_CACHE_DIR`, so they take a lock.

use enigma_ops::{registry, GemmTile};
use enigma_ops::tune::{self, Choice, Outcome, Settings};
use enigma_runtime::{Device, DeviceInfo, Runtime};
use std::path::PathBuf;
use std::sync::Mutex;

static ENV: Mutex<()> = Mutex::new(());

/// The simulator with `max_threads` per threadgroup and `memory` bytes of
/// threadgroup memory.
fn device_with(max_threads: u32, memory: u64) -> DeviceInfo {
    DeviceInfo { max_threads_per_threadgroup: max_threads, max_threadgroup_memory_bytes: memory, ..Runtime::new(Device::Sim).unwrap().device().clone() }
}

/// The simulator with `max_threads` per threadgroup and 32 KiB.
fn limits(max_threads: u32) -> DeviceInfo {
    device_with(max_threads, 32 * 1024)
}

fn entry(name: &str) -> enigma_ops::Entry {
    registry().into_iter().find(|e| e.name == name).unwrap_or_else(|| panic!("no entry {name}"))
}

/// A fresh cache directory for this test, set as ENIGMA_CACHE_DIR.
fn cache_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("enigma-tune-test-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("ENIGMA_CACHE_DIR", &dir);
    std::env::remove_var("ENIGMA_TUNE_CACHE");
    tune::reset_loaded_cache();
    dir
}

/// The candidates a tuning report timed, with their median times.
fn timed_trials(report: &tune::TuneReport) -> Vec<(Choice, f64)> {
    report
        .trials
        .iter()
        .filter_map(|t| match t.outcome {
            Outcome::Timed { median_us, .. } => Some((t.choice, median_us)),
            _ => None,
        })
        .collect()
}

#[test]
fn shape_classes_round_each_dimension_up_to_a_power_of_two() {
    assert_eq!(tune::shape_class(&[3000, 8000]), "4096x8192");
    assert_eq!(tune::shape_class(&[1]), "1");
    assert_eq!(tune::shape_class(&[8192, 8192]), "8192x8192");
    assert_eq!(tune::shape_class(&[32, 2048, 129]), "32x2048x256");
}

#[test]
fn candidates_over_the_device_maximum_or_the_work_are_skipped_with_the_reason() {
    let softmax = entry("softmax_f32");
    let c = tune::candidates(&softmax, &[5, 33], &limits(256));
    assert_eq!(c.len(), tune::THREADS.len());
    let runnable: Vec<u32> = c.iter().filter(|(_, skip)| skip.is_none()).map(|(ch, _)| ch.threads).collect();
    assert_eq!(runnable, [32, 64], "a 33-element row has work for at most 64 threads");
    let (_, why_128) = c.iter().find(|(ch, _)| ch.threads == 128).unwrap();
    assert!(why_128.as_deref().unwrap().contains("exceed the 33 elements"), "{why_128:?}");
    let wide = tune::candidates(&softmax, &[4, 8192], &limits(256));
    let (_, why_512) = wide.iter().find(|(ch, _)| ch.threads == 512).unwrap();
    assert!(why_512.as_deref().unwrap().contains("maximum of 256"), "{why_512:?}");
    // Vector reductions also try loads in flight; GEMV also rows per SIMD group.
    let sum = tune::candidates(&entry("sum_f32"), &[1 << 20], &limits(1024));
    assert_eq!(sum.len(), tune::THREADS.len() * 4);
    assert!(sum.iter().any(|(ch, _)| ch.unroll == Some(8)));
    let gemv = tune::candidates(&entry("gemv_f16"), &[300, 1000], &limits(1024));
    assert_eq!(gemv.len(), tune::THREADS.len() * 16);
    // The quantized matmul also tries packed words per loop iteration.
    let q = tune::candidates(&entry("qmatmul_int4"), &[1, 64, 256], &limits(1024));
    assert_eq!(q.len(), tune::THREADS.len() * 4);
    assert!(q.iter().any(|(ch, skip)| ch.unroll == Some(16) && skip.is_none()));
    // Above the decode kernel's rows: the tensor-core kernel's tiles, the
    // library's default for 16 rows among the runnable ones; no tile for 1
    // row (above), and threads alone are skipped (they reach no kernel).
    let q16 = tune::candidates(&entry("qmatmul_int4"), &[16, 11008, 4096], &limits(1024));
    let runnable_tiles: Vec<GemmTile> = q16.iter().filter(|(_, skip)| skip.is_none()).filter_map(|(ch, _)| ch.tile).collect();
    assert!(runnable_tiles.contains(&GemmTile::new(16, 128, 64, 1, 4)), "{runnable_tiles:?}");
    assert!(runnable_tiles.iter().all(|t| t.shape.m == 16), "16 rows take 16-row tiles: {runnable_tiles:?}");
    assert!(q.iter().all(|(ch, _)| ch.tile.is_none()));
    assert!(q16.iter().filter(|(ch, _)| ch.tile.is_none() && ch.unroll.is_none()).all(|(_, skip)| skip.is_some()));
    // Weights in fragment order: up to 16 rows the decode row's threadgroup
    // sizes (1024 threads would not fit, skipped with the reason; at 16
    // rows neither would 512) and the tensor-core kernel's tiles, 64-deep
    // slices only; above 16 rows the tiles alone.
    let frag = tune::candidates(&entry("qmatmul_fragments_int4"), &[1, 11008, 4096], &limits(1024));
    let runnable: Vec<GemmTile> = frag.iter().filter(|(_, skip)| skip.is_none()).filter_map(|(ch, _)| ch.tile).collect();
    assert!(runnable.contains(&GemmTile::new(16, 128, 64, 1, 4)), "{runnable:?}");
    let decode: Vec<(u32, bool)> = frag.iter().filter(|(ch, _)| ch.tile.is_none()).map(|(ch, skip)| (ch.threads, skip.is_none())).collect();
    assert_eq!(decode, [(128, true), (256, true), (512, true), (1024, false)], "{frag:?}");
    assert!(frag.iter().all(|(ch, _)| ch.tile.is_none_or(|t| t.shape.k == 64)), "{frag:?}");
    let frag16 = tune::candidates(&entry("qmatmul_fragments_int4"), &[16, 11008, 4096], &limits(1024));
    let decode16: Vec<(u32, bool)> = frag16.iter().filter(|(ch, _)| ch.tile.is_none()).map(|(ch, skip)| (ch.threads, skip.is_none())).collect();
    assert_eq!(decode16, [(128, true), (256, true), (512, false), (1024, false)], "{frag16:?}");
    let frag17 = tune::candidates(&entry("qmatmul_fragments_int4"), &[17, 11008, 4096], &limits(1024));
    assert!(frag17.iter().all(|(ch, _)| ch.tile.is_some_and(|t| t.shape.k == 64)), "{frag17:?}");
    // MLX's affine kernel takes threadgroup sizes at any M: none skipped for it.
    let affine16 = tune::candidates(&entry("qmatmul_mlx_affine"), &[16, 64, 256], &limits(1024));
    assert!(affine16.iter().any(|(ch, skip)| ch.unroll.is_none() && skip.is_none()), "{affine16:?}");
    assert!(affine16.iter().all(|(ch, _)| ch.tile.is_none()));
    // For MLX's affine format: packed words per lane and load (1, 2, 4).
    let affine = tune::candidates(&entry("qmatmul_mlx_affine"), &[1, 64, 256], &limits(1024));
    let words: std::collections::BTreeSet<Option<u32>> = affine.iter().map(|(ch, _)| ch.unroll).collect();
    assert_eq!(words.into_iter().collect::<Vec<_>>(), [None, Some(1), Some(2), Some(4)]);
}

#[test]
fn tuning_the_quantized_matmul_skips_words_that_do_not_divide_the_group() {
    // k = 96 quantizes in groups of 32 (4 packed words): 8 and 16 words per
    // iteration are shape errors, skipped with the reason; the rest run.
    let rt = Runtime::new(Device::Sim).unwrap();
    let report = tune::tune(&entry("qmatmul_fp4"), &rt, &[2, 40, 96], Settings { warmup: 0, repeats: 1 }, &mut |_, _, _| {}).unwrap();
    let skipped_words: Vec<&str> = report
        .trials
        .iter()
        .filter_map(|t| match &t.outcome {
            Outcome::Skipped { reason } if t.choice.threads <= 96 && t.choice.unroll.is_some_and(|u| u > 4) => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(skipped_words.len(), 2 * 2, "32 and 64 threads, 8 and 16 words: {:?}", report.trials);
    assert!(skipped_words.iter().all(|r| r.contains("divide the group's 4 words")), "{skipped_words:?}");
    assert!(report.best.is_some());
}

#[test]
fn tuning_times_the_runnable_candidates_and_picks_the_fastest() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let e = entry("scale_f32");
    let mut calls = 0;
    let report = tune::tune(&e, &rt, &[1000], Settings { warmup: 0, repeats: 1 }, &mut |done, total, _| {
        assert!(done <= total);
        calls += 1;
    })
    .unwrap();
    assert_eq!(calls, tune::THREADS.len() + 1, "progress before each candidate and at the end");
    assert_eq!(report.shape_class, "1024");
    let timed = timed_trials(&report);
    assert_eq!(timed.len(), tune::THREADS.len(), "1000 elements leave every threadgroup size runnable");
    let fastest = timed.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0;
    assert_eq!(report.best, Some(fastest));
    // Every size the simulator can run gives the right answer.
    assert!(!report.trials.iter().any(|t| matches!(t.outcome, Outcome::Wrong { .. })));
}

#[test]
fn the_cache_stores_one_choice_per_device_kernel_and_shape_class() {
    let _lock = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = cache_dir("store");
    let path = tune::cache_path().unwrap();
    assert_eq!(path, dir.join("tune.json"));
    let rt = Runtime::new(Device::Sim).unwrap();
    let e = entry("relu_f32");
    let settings = Settings { warmup: 0, repeats: 1 };
    let report = tune::tune(&e, &rt, &[100], settings, &mut |_, _, _| {}).unwrap();
    let stored = tune::store(&path, &report).unwrap().unwrap();
    assert_eq!(Some(stored.choice), report.best);
    let again = tune::tune(&e, &rt, &[120], settings, &mut |_, _, _| {}).unwrap();
    tune::store(&path, &again).unwrap();
    let (entries, warning) = tune::read_cache(&path);
    assert!(warning.is_none());
    assert_eq!(entries.len(), 1, "100 and 120 share the shape class 128: the entry is replaced");
    assert_eq!(Some(entries[0].choice), again.best);
    let other = tune::tune(&e, &rt, &[1000], settings, &mut |_, _, _| {}).unwrap();
    tune::store(&path, &other).unwrap();
    assert_eq!(tune::read_cache(&path).0.len(), 2);
    let _ = std::fs::remove_dir_all(dir);
}

/// A tile in the cache file is its five numbers by name (`tm, tn, tk,
/// sg_rows, sg_cols`, whatever the fields of `GemmTile` are), and reads back.
#[test]
fn a_cached_tile_is_its_five_numbers_by_name() {
    let tile = GemmTile::new(128, 64, 32, 2, 2);
    let text = serde_json::to_string(&tile).unwrap();
    assert_eq!(text, r#"{"tm":128,"tn":64,"tk":32,"sg_rows":2,"sg_cols":2}"#);
    assert_eq!(serde_json::from_str::<GemmTile>(&text).unwrap(), tile);
}

#[test]
fn the_registry_runs_with_a_cached_choice_unless_told_otherwise() {
    let _lock = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = cache_dir("use");
    let rt = Runtime::new(Device::Sim).unwrap();
    let e = entry("softmax_f32");
    let default_threads = e.run(&rt, &[5, 1000]).unwrap().launches[0].threads[0];
    let pick = if default_threads == 64 { 128 } else { 64 };
    std::fs::create_dir_all(&dir).unwrap();
    let cache = format!(
        r#"{{"version": 1, "entries": [{{"device": "{}", "kernel": "softmax_f32", "shape_class": "8x1024",
            "choice": {{"threads": {pick}}}, "median_us": 1.0, "tuned_at": 0}}]}}"#,
        rt.device().name
    );
    std::fs::write(dir.join("tune.json"), cache).unwrap();
    tune::reset_loaded_cache();
    let run = e.run(&rt, &[5, 1000]).unwrap();
    assert!(run.passed);
    assert_eq!(run.launches[0].threads[0], pick, "the cached choice is used");
    // Another shape class, or an explicit choice, is not affected.
    assert_eq!(e.run(&rt, &[5, 3000]).unwrap().launches[0].threads[0], default_threads);
    let explicit = e.run_with(&rt, &[5, 1000], &enigma_ops::Options::threads(256)).unwrap();
    assert_eq!(explicit.launches[0].threads[0], 256);
    std::env::set_var("ENIGMA_TUNE_CACHE", "off");
    assert_eq!(e.run(&rt, &[5, 1000]).unwrap().launches[0].threads[0], default_threads);
    std::env::remove_var("ENIGMA_TUNE_CACHE");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_cache_file_is_ignored_with_a_warning() {
    let dir = std::env::temp_dir().join(format!("enigma-tune-test-{}-bad", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tune.json");
    std::fs::write(&path, "not json").unwrap();
    let (entries, warning) = tune::read_cache(&path);
    assert!(entries.is_empty());
    assert!(warning.unwrap().contains("not a tuning cache"));
    std::fs::write(&path, r#"{"version": 99, "entries": []}"#).unwrap();
    let (_, warning) = tune::read_cache(&path);
    assert!(warning.unwrap().contains("format version 99"));
    let (entries, warning) = tune::read_cache(&dir.join("missing.json"));
    assert!(entries.is_empty() && warning.is_none(), "a missing file is an empty cache");
    let _ = std::fs::remove_dir_all(dir);
}

/// Devices with the threadgroup memory of the simulator and Apple GPUs
/// (32 KiB) and of a CUDA GPU's static shared memory (48 KiB; with dynamic
/// shared memory a CUDA device reports its opt-in limit, 227 KiB on an
/// H100).
fn devices() -> [(&'static str, DeviceInfo); 2] {
    [("32 KiB (Metal, simulator)", device_with(1024, 32 * 1024)), ("48 KiB (CUDA)", device_with(1024, 48 * 1024))]
}

#[test]
fn gemm_candidates_are_the_planners_tiles_that_fit_the_device() {
    use enigma_analysis::tiles::{plan_tile, TileConfig, TileVariant, WeightFormat};
    use enigma_kernels::library::gemm::{gemm, GemmConfig};
    use enigma_kernels::library::sgemm::SgemmConfig;
    use enigma_kernels::library::DType;
    let planner_device = enigma_analysis::catalog::find("m4-max").unwrap();
    let mut runnable_f16 = vec![];
    for (label, device) in devices() {
        let limits = enigma_ops::threadgroup_limits(&device);
        for (name, input) in [("matmul_f16", DType::F16), ("matmul_bf16", DType::BF16), ("matmul_f32", DType::F32)] {
            let c = tune::candidates(&entry(name), &[4096, 4096, 4096], &device);
            // f32 also tries the SIMT kernel at every threadgroup size.
            let simt = if input == DType::F32 { tune::THREADS.len() } else { 0 };
            assert_eq!(c.len(), 108 + simt, "{name}");
            let mut runs = 0;
            for (choice, skip) in &c {
                let Some(tile) = choice.tile else {
                    let cfg = SgemmConfig::new(DType::F32).with_threads(choice.threads);
                    let refused = cfg.and_then(|c| c.check(limits.max_memory_bytes)).is_err() || choice.threads > limits.max_threads;
                    assert!(input == DType::F32 && skip.is_some() == refused, "{name} {choice} on {label}: {skip:?}");
                    continue;
                };
                assert_eq!(choice.threads, tile.threads());
                let cfg = GemmConfig::from_tile(tile, input, DType::F32);
                // Skipped exactly when the GEMM's own check (with the
                // device's limit) or the thread limit refuses it.
                let refused = cfg.check(limits.max_memory_bytes).is_err() || tile.threads() > limits.max_threads;
                assert_eq!(skip.is_some(), refused, "{name} {tile} on {label}: {skip:?}");
                if skip.is_none() {
                    runs += 1;
                    assert!(cfg.threadgroup_memory_bytes() <= limits.max_memory_bytes);
                    if input == DType::F16 && limits.max_memory_bytes > 32 * 1024 {
                        runnable_f16.push(cfg);
                    }
                }
            }
            assert!(runs > 0, "{name} on {label}");
        }
    }
    // 48 KiB holds tiles that 32 KiB does not: 128×128×64 f16 needs
    // 128 × (64 + 8) + 64 × (128 + 8) halves = 35840 bytes.
    let deep = |device: &DeviceInfo| {
        let c = tune::candidates(&entry("matmul_f16"), &[4096, 4096, 4096], device);
        c.into_iter().find(|(ch, _)| ch.tile.map(|t| t.to_string()).as_deref() == Some("128x128x64/2x2")).unwrap().1
    };
    assert!(deep(&devices()[0].1).unwrap().contains("needs 35840 bytes of threadgroup memory (limit 32768)"));
    assert_eq!(deep(&devices()[1].1), None);
    // The planner's staged figures are the kernel's: threadgroup memory
    // (declared by the compiled kernel) and the SIMD-group grid.
    for cfg in runnable_f16 {
        let planned = TileConfig {
            simdgroups: cfg.tile.sg_rows * cfg.tile.sg_cols,
            sg_grid: Some([cfg.tile.sg_rows, cfg.tile.sg_cols]),
            ..TileConfig::new(cfg.tile.shape, TileVariant::Staged, WeightFormat::Fp16)
        };
        let report = plan_tile(&planned, &planner_device, None).unwrap();
        let declared: u64 = gemm(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
        assert_eq!((report.tg_memory_bytes, report.partition.grid), (declared, [cfg.tile.sg_rows, cfg.tile.sg_cols]), "{}", cfg.name());
    }
    // Tiles twice the shape's size are skipped: at 33×40×24 only 64×64
    // tiles 16 or 32 deep run.
    let small = tune::candidates(&entry("matmul_f16"), &[33, 40, 24], &devices()[0].1);
    let run: Vec<String> = small.iter().filter(|(_, s)| s.is_none()).map(|(c, _)| c.tile.unwrap().to_string()).collect();
    assert_eq!(run, ["64x64x16/1x1", "64x64x16/1x2", "64x64x16/2x1", "64x64x16/2x2", "64x64x32/1x1", "64x64x32/1x2", "64x64x32/2x1", "64x64x32/2x2"]);
    let (_, why) = small.iter().find(|(c, _)| c.tile.unwrap().to_string() == "128x64x16/2x1").unwrap();
    assert!(why.as_deref().unwrap().contains("a side of 128 for 33 rows"), "{why:?}");
}

#[test]
fn tuning_the_matmul_picks_a_tile_that_the_registry_then_runs() {
    let _lock = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = cache_dir("gemm");
    let rt = Runtime::new(Device::Sim).unwrap();
    let e = entry("matmul_f16");
    let shape = [33, 40, 24];
    let report = tune::tune(&e, &rt, &shape, Settings { warmup: 0, repeats: 1 }, &mut |_, _, _| {}).unwrap();
    let timed = timed_trials(&report);
    assert_eq!(timed.len(), 8, "{:?}", report.trials);
    assert!(!report.trials.iter().any(|t| matches!(t.outcome, Outcome::Wrong { .. })), "every tile computes the right product");
    let fastest = timed.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap().0;
    assert_eq!(report.best, Some(fastest));
    let best = fastest.tile.unwrap();
    tune::store(&tune::cache_path().unwrap(), &report).unwrap();
    // The registry's run of this shape class takes the tuned tile; another
    // class takes gemm::select_tile's.
    let tuned = e.run(&rt, &shape).unwrap();
    assert!(tuned.passed, "{tuned}");
    // Pipelined stages where they fit the simulator's threadgroup memory.
    let limit = rt.device().max_threadgroup_memory_bytes;
    let want = enigma_kernels::library::gemm::GemmConfig::from_tile(best, enigma_kernels::library::DType::F16, enigma_kernels::library::DType::F32).pipelined_for(limit).name();
    assert_eq!((tuned.launches[0].kernel.as_str(), tuned.launches[0].threads[0]), (want.as_str(), best.threads()));
    let other = e.run(&rt, &[3, 40, 24]).unwrap();
    assert_eq!(other.launches[0].kernel, "gemm_f16_f32_16x128x32_sg1x4_s3", "M ≤ 16: the small-M tile");
    let _ = std::fs::remove_dir_all(dir);
}

/// Tuning the f32 matmul also times the SIMT kernel at every threadgroup
/// size (all computing the right product), and a cached tile-less choice
/// makes the registry run the SIMT kernel with its blocks over those threads.
#[test]
fn tuning_the_f32_matmul_tries_the_simt_kernel() {
    let _lock = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = cache_dir("simt");
    let rt = Runtime::new(Device::Sim).unwrap();
    let e = entry("matmul_f32");
    let report = tune::tune(&e, &rt, &[33, 40, 24], Settings { warmup: 0, repeats: 1 }, &mut |_, _, _| {}).unwrap();
    let simt: Vec<u32> = timed_trials(&report).iter().filter(|(c, _)| c.tile.is_none()).map(|(c, _)| c.threads).collect();
    assert_eq!(simt, tune::THREADS, "{:?}", report.trials);
    assert!(!report.trials.iter().any(|t| matches!(t.outcome, Outcome::Wrong { .. })), "every candidate computes the right product");
    std::fs::create_dir_all(&dir).unwrap();
    let cache = format!(
        r#"{{"version": 1, "entries": [{{"device": "{}", "kernel": "matmul_f32", "shape_class": "64x64x32",
            "choice": {{"threads": 64}}, "median_us": 1.0, "tuned_at": 0}}]}}"#,
        rt.device().name
    );
    std::fs::write(dir.join("tune.json"), cache).unwrap();
    tune::reset_loaded_cache();
    let run = e.run(&rt, &[33, 40, 24]).unwrap();
    assert!(run.passed, "{run}");
    assert_eq!((run.launches[0].kernel.as_str(), run.launches[0].threads[0]), ("sgemm_f32_64x64x8_r8x8", 64));
    let _ = std::fs::remove_dir_all(dir);
}

/// The fused quantized kernel's candidates are seed 002's four tiles (§9.1's
/// choices over 4 SIMD groups); a real tuning run times them all (each
/// computing the right product), and the registry then runs the tuned tile.
#[test]
fn tuning_the_fused_quantized_matmul_tries_seed_002s_tiles() {
    let _lock = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let dir = cache_dir("fused");
    let e = entry("qmatmul_fused_int4");
    let c = tune::candidates(&e, &[3, 100, 256], &limits(1024));
    let tiles: Vec<String> = c.iter().map(|(choice, _)| choice.tile.unwrap().to_string()).collect();
    assert_eq!(tiles, ["32x128x32/1x4", "64x64x32/2x2", "128x64x16/4x1", "128x128x16/2x2"]);
    assert!(c.iter().all(|(_, skip)| skip.is_none()), "{c:?}");
    let narrow = tune::candidates(&e, &[3, 100, 256], &limits(64));
    assert!(narrow.iter().all(|(_, skip)| skip.as_deref().is_some_and(|s| s.contains("128 threads exceed"))), "{narrow:?}");
    let rt = Runtime::new(Device::Sim).unwrap();
    let shape = [3, 40, 128];
    let report = tune::tune(&e, &rt, &shape, Settings { warmup: 0, repeats: 1 }, &mut |_, _, _| {}).unwrap();
    assert_eq!(timed_trials(&report).len(), 4, "{:?}", report.trials);
    let best = report.best.unwrap().tile.unwrap();
    tune::store(&tune::cache_path().unwrap(), &report).unwrap();
    let run = e.run(&rt, &shape).unwrap();
    assert!(run.passed, "{run}");
    assert!(run.launches[0].kernel.starts_with(&format!("qgemm_fused_int4_f16_{}x{}x{}_sg{}x{}", best.shape.m, best.shape.n, best.shape.k, best.sg_rows, best.sg_cols)), "{}", run.launches[0].kernel);
    let _ = std::fs::remove_dir_all(dir);
}
