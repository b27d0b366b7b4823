//! The strict MSL check of the golden files (`tests/snapshots/*.msl.snap`):
//! clang in C++ for OpenCL mode against `tests/msl_strict/` (see `strict`),
//! which holds MSL to rules the g++ syntax check (`msl_syntax.rs`) cannot
//! see: distinct address spaces, `atomic_float` in device memory only, the
//! SIMD-group functions' types, and the version each feature needs. Each
//! rule has a mutation here that the check must reject. Without a clang++
//! that reads C++ for OpenCL the tests print that they skipped, and why, and
//! pass (`scripts/test.sh` installs clang where it can).

mod strict;

use std::path::Path;

/// The golden files written for MSL 3.2 (`snapshots.rs` writes them with
/// `language_version: (3, 2)`); those that include MetalPerformancePrimitives
/// for MSL 4.0; the others for the default, 3.1.
const MSL_3_2_GOLDENS: &[&str] = &["device_fences", "printing"];

fn goldens() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("the snapshots directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".msl.snap"))
        .map(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            let name = name.trim_start_matches("snapshots__").trim_end_matches(".msl.snap").to_string();
            let snap = std::fs::read_to_string(&p).expect("a snapshot");
            let body = snap.splitn(3, "---\n").nth(2).unwrap_or_else(|| panic!("not an insta snapshot: {name}")).to_string();
            (name, body)
        })
        .collect();
    out.sort();
    out
}

fn version_of(name: &str, msl: &str) -> (u8, u8) {
    if msl.contains("#include <MetalPerformancePrimitives/") {
        enigma_codegen::msl::MPP_VERSION
    } else if MSL_3_2_GOLDENS.contains(&name) {
        (3, 2)
    } else {
        (3, 1)
    }
}

#[test]
fn every_msl_golden_file_passes_the_strict_check() {
    if let Some(why) = strict::unavailable() {
        println!("skipped: {why}");
        return;
    }
    let goldens = goldens();
    assert!(goldens.len() >= 30, "only {} MSL golden files", goldens.len());
    let dir = strict::scratch_dir("goldens");
    let failures: Vec<String> = goldens
        .iter()
        .filter_map(|(name, msl)| strict::errors(&dir, name, msl, version_of(name, msl)).map(|e| format!("== {name}\n{e}")))
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    assert!(failures.is_empty(), "{} of {} files fail:\n{}", failures.len(), goldens.len(), failures.join("\n"));
}

fn golden(name: &str) -> String {
    goldens().into_iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("the {name} golden")).1
}

/// Each rule of the shim rejects the MSL that breaks it, with the rule in
/// clang's message; the intact files pass.
#[test]
fn the_strict_check_rejects_each_class_of_error() {
    if let Some(why) = strict::unavailable() {
        println!("skipped: {why}");
        return;
    }
    let dir = strict::scratch_dir("mutations");
    let reduce = golden("reduce_threadgroup");
    let atomics = golden("atomics_threadgroup");
    let fences = golden("device_fences");
    let casts = golden("casts");
    let mpp = golden("cooperative__cooperative_gemm_tile");
    assert_eq!(strict::errors(&dir, "mpp", &mpp, (4, 0)), None);
    assert_eq!(strict::errors(&dir, "reduce", &reduce, (3, 1)), None);
    assert_eq!(strict::errors(&dir, "atomics", &atomics, (3, 1)), None);
    assert_eq!(strict::errors(&dir, "fences", &fences, (3, 2)), None);
    assert!(atomics.contains("threadgroup atomic_uint fsum[2];"), "{atomics}");
    let threadgroup_view = "metal::tensor<threadgroup half, metal::dextents<int32_t, 2>, metal::tensor_inline>((threadgroup half*)Bs";
    assert!(mpp.contains(threadgroup_view), "{mpp}");
    let cases: [(&str, String, (u8, u8), &str); 10] = [
        // f32 atomics on threadgroup memory, as the generator wrote them before.
        (
            "threadgroup_atomic_float",
            format!(
                "{}\nkernel void f(device float* out [[buffer(0)]]) {{\n    threadgroup atomic_float s[1];\n    \
                 out[0] = atomic_fetch_add_explicit(&s[0], 1.0f, memory_order_relaxed);\n}}\n",
                "#include <metal_stdlib>\nusing namespace metal;"
            ),
            (3, 1),
            "atomic_float exists in device memory only",
        ),
        // A threadgroup pointer where a device pointer is wanted.
        (
            "address_spaces",
            reduce.replacen("    float val = A[tid];", "    device float* wrong = scratch;\n    float val = A[tid];", 1),
            (3, 1),
            "with an lvalue of type '__local float[32]'",
        ),
        // The SIMD-group functions take no 64-bit integers ...
        ("simd_sum_of_ulong", reduce.replacen("simd_sum(val)", "float(simd_sum(ulong(val)))", 1), (3, 1), "take no bool, long or ulong"),
        // ... and no bool.
        ("simd_shuffle_of_bool", reduce.replacen("simd_sum(val)", "float(simd_shuffle_xor(val > 0.0f, 1u))", 1), (3, 1), "take no bool, long or ulong"),
        // Device-scope fences and coherent(device) are MSL 3.2's.
        ("fence_under_3_1", fences.replace("coherent(device) ", ""), (3, 1), "thread_scope_device"),
        ("coherent_under_3_1", fences.replace("atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);", ""), (3, 1), "coherent"),
        // bfloat is MSL 3.1's.
        ("bfloat_under_3_0", casts.clone(), (3, 0), "bfloat"),
        // MetalPerformancePrimitives is MSL 4.0's.
        ("mpp_under_3_2", mpp.clone(), (3, 2), "needs MSL 4.0"),
        // A view of device memory made from a threadgroup pointer.
        ("mpp_view_address_space", mpp.replacen(threadgroup_view, &threadgroup_view.replacen("tensor<threadgroup", "tensor<device", 1), 1), (4, 0), "no matching constructor"),
        // A reduction into a cooperative tensor of another element type.
        (
            "mpp_reduction_type",
            mpp.replacen("tensor_inline>, float>();\n    uint row", "tensor_inline>, half>();\n    uint row", 1),
            (4, 0),
            "no matching function for call to 'reduce_rows'",
        ),
    ];
    for (name, text, version, needle) in cases {
        let err = strict::errors(&dir, name, &text, version).unwrap_or_else(|| panic!("{name} passed the strict check:\n{text}"));
        assert!(err.contains(needle), "{name}: clang's errors do not mention {needle:?}:\n{err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
