//! `enigma tune` end to end on the simulator: the JSON report, the cache file
//! it writes, and the errors.

use std::process::Command;

fn enigma(args: &[&str], cache: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_enigma"))
        .args(args)
        .env("ENIGMA_CACHE_DIR", cache)
        .output()
        .expect("the enigma binary runs")
}

#[test]
fn tune_reports_every_candidate_and_records_the_best() {
    let cache = std::env::temp_dir().join(format!("enigma-cli-tune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let out = enigma(&["tune", "relu", "--dtype", "f16", "--shape", "100", "--device", "sim", "--repeats", "1", "--warmup", "0", "--json"], &cache);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kernel"], "relu_f16");
    assert_eq!(v["shape_class"], "128");
    let trials = v["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 6);
    // 100 elements: 32..128 threads run; 256 and more exceed the work.
    let timed = trials.iter().filter(|t| t["status"] == "timed").count();
    let skipped: Vec<&serde_json::Value> = trials.iter().filter(|t| t["status"] == "skipped").collect();
    assert_eq!((timed, skipped.len()), (3, 3), "{trials:?}");
    assert!(skipped.iter().all(|t| t["reason"].as_str().unwrap().contains("exceed the 100 elements")));
    let best = v["best"]["threads"].as_u64().unwrap();
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(cache.join("tune.json")).unwrap()).unwrap();
    assert_eq!(file["entries"][0]["kernel"], "relu_f16");
    assert_eq!(file["entries"][0]["choice"]["threads"].as_u64(), Some(best));
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn tune_rejects_unknown_kernels_and_zero_repeats() {
    let cache = std::env::temp_dir().join(format!("enigma-cli-tune-err-{}", std::process::id()));
    let out = enigma(&["tune", "no_such_kernel", "--device", "sim"], &cache);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_kernel"));
    let out = enigma(&["tune", "relu_f32", "--device", "sim", "--repeats", "0"], &cache);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 is not between 1 and 10000"));
    assert!(!cache.join("tune.json").exists(), "nothing recorded");
}

#[test]
fn every_column_of_the_table_has_a_label() {
    let cache = std::env::temp_dir().join(format!("enigma-cli-tune-table-{}", std::process::id()));
    let out = enigma(&["tune", "relu", "--shape", "100", "--device", "sim", "--repeats", "1", "--warmup", "0", "--no-cache"], &cache);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let header = stdout.lines().nth(1).unwrap();
    let labels: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(labels, ["candidate", "median", "best", "GB/s", "verdict"], "{stdout}");
    // The verdict column says which candidate won.
    assert!(stdout.lines().skip(2).any(|l| l.trim_end().ends_with(" best")), "{stdout}");
}

#[test]
fn tuning_the_matmul_records_a_tile_that_run_then_uses() {
    let cache = std::env::temp_dir().join(format!("enigma-cli-tune-gemm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let out = enigma(&["tune", "matmul_f16", "--shape", "33x40x24", "--device", "sim", "--repeats", "1", "--warmup", "0", "--json"], &cache);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["trials"].as_array().unwrap().len(), 108);
    let tile = &v["best"]["tile"];
    let tile: enigma::ops::GemmTile = serde_json::from_value(tile.clone()).unwrap();
    // Pipelined stages where they fit the simulator's threadgroup memory.
    let config = enigma::kernels::library::gemm::GemmConfig::from_tile(tile, enigma::kernels::library::DType::F16, enigma::kernels::library::DType::F32);
    let limit = enigma::Runtime::new(enigma::Device::Sim).unwrap().device().max_threadgroup_memory_bytes;
    let name = config.pipelined_for(limit).name();
    let run = enigma(&["run", "matmul_f16", "--shape", "33x40x24", "--device", "sim", "--json"], &cache);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let r: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(r["dispatches"][0]["kernel"].as_str(), Some(name.as_str()), "{r}");
    // --tile overrides the cache.
    let run = enigma(&["run", "matmul_f16", "--shape", "33x40x24", "--device", "sim", "--tile", "64x64x16/1x1", "--json"], &cache);
    let r: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let small = enigma::ops::GemmTile::new(64, 64, 16, 1, 1);
    let small = enigma::kernels::library::gemm::GemmConfig::from_tile(small, enigma::kernels::library::DType::F16, enigma::kernels::library::DType::F32);
    assert_eq!(r["dispatches"][0]["kernel"].as_str(), Some(small.pipelined_for(limit).name().as_str()), "{r}");
    let bad = enigma(&["bench", "matmul_f16", "--device", "sim", "--tile", "64x64"], &cache);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("TMxTNxTK/ROWSxCOLS"));
    let _ = std::fs::remove_dir_all(&cache);
}
