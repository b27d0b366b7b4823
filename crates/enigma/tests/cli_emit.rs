//! `enigma emit`, run as a user would: MSL and CUDA C++ carry the constructs
//! of the kernel asked for, the IR text and JSON read back to the very kernel
//! that enigma-kernels builds, examples print all their kernels, and unknown
//! names fail with a message and exit status 2.

use std::process::{Command, Output};

fn enigma(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_enigma")).args(args).output().expect("run the enigma binary")
}

/// Runs a command that must succeed; its stdout.
fn stdout(args: &[&str]) -> String {
    let out = enigma(args);
    assert!(out.status.success(), "enigma {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
fn msl_of_the_reduction_binds_buffers_and_sums_simd_groups() {
    let msl = stdout(&["emit", "--target", "msl", "reduce_threadgroup"]);
    for needle in [
        "#include <metal_stdlib>",
        "kernel void reduce_threadgroup(",
        "device const float* A [[buffer(0)]]",
        "device float* PartialOut [[buffer(1)]]",
        "threadgroup float scratch[32];",
        "simd_sum(",
        "threadgroup_barrier(mem_flags::mem_threadgroup);",
    ] {
        assert!(msl.contains(needle), "missing {needle:?} in\n{msl}");
    }
    // MSL is the default target.
    assert_eq!(stdout(&["emit", "reduce_threadgroup"]), msl);
}

#[test]
fn cuda_of_the_reduction_is_an_extern_c_global_function() {
    let cuda = stdout(&["emit", "--target", "cuda", "reduce_threadgroup"]);
    assert!(cuda.contains("extern \"C\" __global__ void reduce_threadgroup("), "{cuda}");
    for needle in ["__shared__ __align__(16) float scratch[32];", "enigma::simd_sum(val)", "enigma::threadgroup_barrier(enigma_tg);"] {
        assert!(cuda.contains(needle), "missing {needle:?} in\n{cuda}");
    }
}

#[test]
fn ir_text_parses_back_to_the_library_kernel() {
    let text = stdout(&["emit", "--target", "ir", "reduce_threadgroup"]);
    let parsed = enigma_ir::text::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(parsed, enigma_kernels::two_pass_sum::reduce_threadgroup());
}

#[test]
fn json_reads_back_to_the_library_kernel() {
    let json = stdout(&["emit", "--target", "json", "gemm_tiled"]);
    assert_eq!(enigma_ir::from_json(&json).unwrap(), enigma_kernels::dispatch_patterns::gemm_tiled());
    // A library variant, by its own name.
    let softmax = enigma_kernels::library::variants::all_kernels().into_iter().find(|k| k.name.starts_with("softmax")).unwrap();
    let json = stdout(&["emit", "--target", "json", &softmax.name]);
    assert_eq!(enigma_ir::from_json(&json).unwrap(), softmax);
}

#[test]
fn an_example_prints_every_kernel_it_dispatches() {
    let json = stdout(&["emit", "--target", "json", "reduce"]);
    let kernels: Vec<enigma_ir::Kernel> = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["reduce_threadgroup", "reduce_final"]);
    let msl = stdout(&["emit", "--target", "msl", "reduce"]);
    assert_eq!(msl.matches("kernel void ").count(), 2, "{msl}");
}

#[test]
fn list_names_examples_and_kernels() {
    let list = stdout(&["emit", "--list"]);
    assert!(list.starts_with("examples: reduce, scale, row_sum, prefix_sum, stencil, gemm\nkernels:\n"), "{list}");
    for k in enigma_kernels::library::variants::all_kernels().iter().chain(&enigma_kernels::seed_kernels()) {
        assert!(list.contains(&format!("\n  {}\n", k.name)) || list.ends_with(&format!("\n  {}\n", k.name)), "{} not listed", k.name);
    }
}

#[test]
fn an_unknown_name_fails_with_a_message() {
    let out = enigma(&["emit", "--target", "msl", "no_such_kernel"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown example or kernel `no_such_kernel`"), "{err}");
    assert!(out.stdout.is_empty());
    // A wrong target is clap's usage error.
    let out = enigma(&["emit", "--target", "wgsl", "reduce"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("wgsl"));
}

#[test]
fn every_name_is_listed_once_and_the_seed_second_pass_has_its_own() {
    let list = stdout(&["emit", "--list"]);
    let names: Vec<&str> = list.lines().filter_map(|l| l.strip_prefix("  ")).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "a name is listed twice: {names:?}");
    // The seed's second pass as written, under the name `check --list` uses.
    assert!(names.contains(&"reduce_final_seed"), "{list}");
    let json = stdout(&["emit", "--target", "json", "reduce_final_seed"]);
    assert_eq!(enigma_ir::from_json(&json).unwrap(), enigma_kernels::two_pass_sum::reduce_final_seed());
    let json = stdout(&["emit", "--target", "json", "reduce_final"]);
    assert_eq!(enigma_ir::from_json(&json).unwrap(), enigma_kernels::two_pass_sum::reduce_final());
    // Every seed kernel `check --list` names can be emitted by that name.
    for case in enigma_testing::corpus::library() {
        assert!(names.contains(&case.name), "`{}` is a check target but not an emit name", case.name);
    }
}

/// A library kernel that hands partial results between threadgroups
/// through device fences (the split-K GEMM whose last threadgroup sums).
fn kernel_with_device_fences() -> String {
    enigma_kernels::library::variants::all_kernels()
        .into_iter()
        .find(|k| {
            enigma_ir::validate(k, &enigma_ir::ValidationOptions::default())
                .is_ok_and(|info| info.features.contains(&enigma_ir::Feature::DeviceFence))
        })
        .expect("a library kernel with device fences")
        .name
}

#[test]
fn msl_follows_the_version_a_kernel_needs_or_the_one_asked_for() {
    let name = kernel_with_device_fences();
    // By default the kernel gets MSL 3.2, which its fences need.
    let msl = stdout(&["emit", &name]);
    assert!(msl.contains("thread_scope_device") && msl.contains("coherent(device) device "), "{msl}");
    assert_eq!(stdout(&["emit", "--msl-version", "3.2", &name]), msl);
    // Asked for 3.1, it fails naming both versions.
    let out = enigma(&["emit", "--msl-version", "3.1", &name]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("needs MSL 3.2") && err.contains("MSL 3.1"), "{err}");
    // A kernel without fences is the same under 3.1 and 3.2.
    assert_eq!(stdout(&["emit", "--msl-version", "3.1", "reduce_threadgroup"]), stdout(&["emit", "reduce_threadgroup"]));
    // A version the generator does not write is refused, with the ones it does.
    let out = enigma(&["emit", "--msl-version", "2.9", "reduce_threadgroup"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("unknown MSL version `2.9`") && err.contains("3.0, 3.1, 3.2 and 4.0"), "{err}");
}

#[test]
fn cuda_for_an_architecture_shows_the_cooperative_lowering_it_gets() {
    let name = "gemm_coop_f16_f16_64x64x64_s2_r8_direct";
    let hopper = stdout(&["emit", "--target", "cuda", "--cuda-arch", "sm_90a", "--by-kernel-name", name]);
    assert!(hopper.contains("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), "{hopper}");
    let ampere = stdout(&["emit", "--target", "cuda", "--cuda-arch", "sm_80", "--by-kernel-name", name]);
    assert!(ampere.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") && !ampere.contains("wgmma.mma_async"), "{ampere}");
    let any = stdout(&["emit", "--target", "cuda", "--by-kernel-name", name]);
    assert!(!any.contains("wgmma.mma_async") && !any.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0"), "{any}");
    let bad = enigma(&["emit", "--target", "cuda", "--cuda-arch", "hopper", "--by-kernel-name", name]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("`hopper` is not a CUDA architecture; write it as NVRTC does, e.g. sm_80 or sm_90a"));
}
