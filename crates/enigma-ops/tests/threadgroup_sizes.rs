//! Default threadgroup sizes against seed 004's "Threadgroup Sizing
//! Guidelines" table, written out here from the seed:
//!
//! | Kernel Type | Recommended Size |
//! |---|---|
//! | Element-wise | 256–512 |
//! | Row reduction (D ≤ 32) | 32 |
//! | Row reduction (D ≤ 1024) | 256 |
//! | Row reduction (D > 1024) | 256–512 |
//!
//! ("Start with 256"), and seed 000's geometry where the table has no row
//! (GEMV: 256; attention decode H = 32, S = 2048, D = 128: scores (8, 32),
//! softmax (32, 1) — `MTLSize(H, 1, 1)` —, weighted sum (4, 32), all with
//! 256 threads). Checked on
//! the dispatches the operations actually make.

use enigma_ops::{default_threads, registry, KernelType, Options};
use enigma_runtime::{Device, Runtime};

/// The first dispatch's threads per threadgroup for a registry entry.
fn threads_of(rt: &Runtime, name: &str, shape: &[usize]) -> u32 {
    let entry = registry().into_iter().find(|e| e.name == name).unwrap_or_else(|| panic!("no entry {name}"));
    let outcome = entry.run(rt, shape).unwrap();
    assert!(outcome.passed, "{outcome}");
    let t = outcome.launches[0].threads;
    assert_eq!(t[1..], [1, 1], "{name}");
    t[0]
}

#[test]
fn defaults_follow_the_table() {
    assert_eq!(default_threads(KernelType::Elementwise), 256);
    for (d, want) in [(1, 32), (31, 32), (32, 32), (33, 256), (1000, 256), (1024, 256), (1025, 256), (8192, 256)] {
        assert_eq!(default_threads(KernelType::RowReduction { d }), want, "D = {d}");
        assert_eq!(default_threads(KernelType::VectorReduction { n: d }), want, "n = {d}");
    }
    assert_eq!(default_threads(KernelType::RowReduction { d: usize::MAX }), 256);
    assert_eq!(default_threads(KernelType::MatVec), 256);
    assert_eq!(default_threads(KernelType::Attention), 256);
}

#[test]
fn operations_dispatch_with_the_defaults() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for dtype in ["f32", "f16", "bf16"] {
        for op in ["scale", "add", "mul", "relu", "silu", "gelu", "scale_vec4"] {
            // f32 element-wise operations of two float4s a thread take their
            // own measured default (`library::elementwise::PAIRS_THREADS`).
            let want = if dtype == "f32" && op != "scale_vec4" { 128 } else { 256 };
            assert_eq!(threads_of(&rt, &format!("{op}_{dtype}"), &[4097]), want, "{op}_{dtype}");
        }
        for kernel in ["softmax", "rms_norm", "layer_norm", "sum_rows", "max_rows"] {
            let name = format!("{kernel}_{dtype}");
            assert_eq!(threads_of(&rt, &name, &[2, 32]), 32, "{name}, D = 32");
            assert_eq!(threads_of(&rt, &name, &[2, 33]), 256, "{name}, D = 33");
            assert_eq!(threads_of(&rt, &name, &[2, 1024]), 256, "{name}, D = 1024");
            assert_eq!(threads_of(&rt, &name, &[1, 4097]), 256, "{name}, D = 4097");
        }
        assert_eq!(threads_of(&rt, &format!("sum_{dtype}"), &[20]), 32);
        assert_eq!(threads_of(&rt, &format!("sum_{dtype}"), &[100_000]), 256);
        assert_eq!(threads_of(&rt, &format!("gemv_{dtype}"), &[5, 33]), 256);
    }
    // The prefix sums take their own measured default (blocks of 512 threads × 4 float4 loads).
    assert_eq!(threads_of(&rt, "prefix_sum_inclusive_f32", &[1000]), 512);
}

#[test]
fn attention_follows_seed_000() {
    // Seed 000's own shape: H = 32, S = 2048, D = 128 (under a second on
    // the simulator), checked against the reference too.
    let rt = Runtime::new(Device::Sim).unwrap();
    let grids = |name: &str| {
        let entry = registry().into_iter().find(|e| e.name == name).unwrap();
        let outcome = entry.run(&rt, &[32, 2048, 128]).unwrap();
        assert!(outcome.passed, "{outcome}");
        outcome.launches.iter().map(|l| (l.size, l.threads)).collect::<Vec<_>>()
    };
    // ceil(2048 / 256) = 8 score threadgroups per head; one softmax
    // threadgroup per head; ceil(128 / 32) = 4 weighted-sum threadgroups;
    // the fused kernel: one threadgroup per (split, K/V head, sequence), of
    // the 96 threads whose 4 stages of staged K/V words fit 32 KiB.
    let tg = [256, 1, 1];
    assert_eq!(grids("attention_decode_f16"), [([8, 32, 1], tg), ([32, 1, 1], tg), ([4, 32, 1], tg)]);
    assert_eq!(grids("attention_decode_fused_f16"), [([1, 32, 1], [96, 1, 1])]);
    // D = 1024: the fused kernel's state for 8 SIMD groups is 32832 bytes,
    // over 32 KiB, so it takes 7; the three dispatches keep 256.
    assert_eq!(threads_of(&rt, "attention_decode_fused_f32", &[1, 3, 1024]), 224);
    assert_eq!(threads_of(&rt, "attention_decode_f32", &[1, 3, 1024]), 256);
}

#[test]
fn overrides_are_checked() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let entry = registry().into_iter().find(|e| e.name == "softmax_f32").unwrap();
    assert_eq!(entry.run_with(&rt, &[2, 33], &Options::threads(64)).unwrap().launches[0].threads, [64, 1, 1]);
    for bad in [0, 100, 2048] {
        let e = entry.run_with(&rt, &[2, 33], &Options::threads(bad)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("softmax_f32: threadgroup size {bad} is not a multiple of 32 between 32 and 1024 (the library's reductions need whole SIMD groups)")
        );
    }
}
