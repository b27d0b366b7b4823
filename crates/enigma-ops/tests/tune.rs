//! The autotuner's mechanics on the simulator: candidate filtering, a real
//! tuning run, the cache file (round trip, replacement, bad files) and the
//! registry picking up a cached choice. Tests that touch the cache share the
//! process-wide `ENIGMA_CACHE_DIR`, so they take a lock.

use enigma_ops::registry;
use enigma_ops::tune::{self, Choice, Outcome, Settings};
use enigma_runtime::{Device, Runtime};
use std::path::PathBuf;
use std::sync::Mutex;

static ENV: Mutex<()> = Mutex::new(());

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
    let c = tune::candidates(&softmax, &[5, 33], 256);
    assert_eq!(c.len(), tune::THREADS.len());
    let runnable: Vec<u32> = c.iter().filter(|(_, skip)| skip.is_none()).map(|(ch, _)| ch.threads).collect();
    assert_eq!(runnable, [32, 64], "a 33-element row has work for at most 64 threads");
    let (_, why_128) = c.iter().find(|(ch, _)| ch.threads == 128).unwrap();
    assert!(why_128.as_deref().unwrap().contains("exceed the 33 elements"), "{why_128:?}");
    let wide = tune::candidates(&softmax, &[4, 8192], 256);
    let (_, why_512) = wide.iter().find(|(ch, _)| ch.threads == 512).unwrap();
    assert!(why_512.as_deref().unwrap().contains("maximum of 256"), "{why_512:?}");
    // Vector reductions also try loads in flight; GEMV also rows per SIMD group.
    let sum = tune::candidates(&entry("sum_f32"), &[1 << 20], 1024);
    assert_eq!(sum.len(), tune::THREADS.len() * 4);
    assert!(sum.iter().any(|(ch, _)| ch.unroll == Some(8)));
    let gemv = tune::candidates(&entry("gemv_f16"), &[300, 1000], 1024);
    assert_eq!(gemv.len(), tune::THREADS.len() * 16);
    // The quantized matmul also tries packed words per loop iteration.
    let q = tune::candidates(&entry("qmatmul_int4"), &[1, 64, 256], 1024);
    assert_eq!(q.len(), tune::THREADS.len() * 4);
    assert!(q.iter().any(|(ch, skip)| ch.unroll == Some(16) && skip.is_none()));
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
    let timed: Vec<(Choice, f64)> = report
        .trials
        .iter()
        .filter_map(|t| match t.outcome {
            Outcome::Timed { median_us, .. } => Some((t.choice, median_us)),
            _ => None,
        })
        .collect();
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
