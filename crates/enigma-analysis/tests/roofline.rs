//! Roofline predictions: each workload's bytes and FLOPs against sums
//! written out by hand, and the roofs on the M4 Max (bandwidth and FP16
//! throughput known) and the M5 (bandwidth only).

use enigma_analysis::catalog;
use enigma_analysis::roofline::{predict, Precision, Roof, Workload};
use enigma_analysis::tiles::WeightFormat;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn gemv_reads_the_matrix_and_both_vectors_once() {
    let w = Workload::Gemv { rows: 11008, cols: 4096, weights: Precision::Half };
    let bytes = 11008.0 * 4096.0 * 2.0 + (11008.0 + 4096.0) * 4.0;
    assert!(close(w.bytes(), bytes));
    assert!(close(w.flops(), 2.0 * 11008.0 * 4096.0));
    let p = predict(&catalog::find("m4-max").unwrap(), w);
    assert_eq!(p.roof, Roof::Memory);
    assert!(close(p.seconds.unwrap(), bytes / 546e9));
}

#[test]
fn quantized_matmul_counts_codes_scales_a_and_c() {
    let w = Workload::QuantMatmul { m: 1, n: 11008, k: 4096, group: 128, weights: WeightFormat::Int4U4B8 };
    // 4-bit codes, one f16 scale per 128 weights, A and C in f16.
    let bytes = 4096.0 * 11008.0 / 2.0 + 4096.0 / 128.0 * 11008.0 * 2.0 + 4096.0 * 2.0 + 11008.0 * 2.0;
    assert!(close(w.bytes(), bytes));
    let p = predict(&catalog::find("m4-max").unwrap(), w);
    assert_eq!(p.roof, Roof::Memory);
    assert!(close(p.memory_seconds.unwrap(), bytes / 546e9));
    assert!(close(p.compute_seconds.unwrap(), 2.0 * 11008.0 * 4096.0 / 32e12));
}

#[test]
fn a_large_half_gemm_is_compute_bound_and_f32_has_no_known_compute_roof() {
    let half = Workload::Gemm { batch: 1, m: 4096, n: 4096, k: 4096, input: Precision::Half, output: Precision::Half };
    let n = 4096.0f64;
    assert!(close(half.bytes(), 3.0 * n * n * 2.0));
    let p = predict(&catalog::find("m4-max").unwrap(), half);
    assert_eq!(p.roof, Roof::Compute);
    assert!(close(p.seconds.unwrap(), 2.0 * n * n * n / 32e12));
    assert!(close(p.arithmetic_intensity, 2.0 * n * n * n / (6.0 * n * n)));
    let single = Workload::Gemm { batch: 2, m: 4096, n: 4096, k: 4096, input: Precision::Single, output: Precision::Single };
    let p = predict(&catalog::find("m4-max").unwrap(), single);
    assert_eq!((p.compute_seconds, p.seconds, p.roof), (None, None, Roof::Unknown));
    assert!(close(p.lower_bound_seconds().unwrap(), 2.0 * 3.0 * n * n * 4.0 / 546e9));
}

#[test]
fn decode_reads_the_cache_once_and_the_m5_gives_only_the_memory_roof() {
    let w = Workload::AttentionDecode { batch: 8, q_heads: 32, kv_heads: 8, keys: 4096, d: 128, precision: Precision::Half };
    // K and V of 8 heads, q and out of 32, per sequence.
    let bytes = 8.0 * (2.0 * 8.0 * 4096.0 * 128.0 + 2.0 * 32.0 * 128.0) * 2.0;
    assert!(close(w.bytes(), bytes));
    assert!(close(w.flops(), 4.0 * 8.0 * 32.0 * 4096.0 * 128.0));
    let p = predict(&catalog::find("m5").unwrap(), w);
    assert_eq!((p.compute_seconds, p.seconds, p.roof), (None, None, Roof::Unknown));
    assert!(close(p.memory_seconds.unwrap(), bytes / 153e9));
    assert_eq!(p.lower_bound_seconds(), p.memory_seconds);
}

#[test]
fn the_causal_mask_keeps_a_top_left_triangle() {
    let pairs = |q_len, kv_len, causal| {
        let w = Workload::AttentionPrefill { batch: 1, q_heads: 1, kv_heads: 1, q_len, kv_len, d: 1, causal, precision: Precision::Half };
        w.flops() / 4.0
    };
    // Each row i keeps keys 0..=i, at most kv_len of them.
    for (q, kv) in [(4u64, 4u64), (6, 4), (2, 5), (1, 1), (1000, 1000), (7, 100)] {
        let want: u64 = (0..q).map(|i| (i + 1).min(kv)).sum();
        assert!(close(pairs(q, kv, true), want as f64), "{q}×{kv}");
        assert!(close(pairs(q, kv, false), (q * kv) as f64), "{q}×{kv}");
    }
}

#[test]
fn huge_shapes_do_not_overflow() {
    let w = Workload::Gemm { batch: u32::MAX as u64, m: u32::MAX as u64, n: u32::MAX as u64, k: u32::MAX as u64, input: Precision::Half, output: Precision::Single };
    assert!(w.bytes().is_finite() && w.flops().is_finite() && w.flops() > 1e38);
}
