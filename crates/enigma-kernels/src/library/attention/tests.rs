//! The decode's plans against hand-worked geometry and the f64 reference
//! against hand-computed softmaxes.

use super::*;
use crate::library::{DType, Dispatch};

#[test]
fn seed_000_geometry() {
    let p = plan(DType::F32, &DecodeShape::heads(32, 2048, 128), 4, SEED_000_THREADS).unwrap();
    assert_eq!(p.scores, Dispatch::threadgroups([8, 32, 1], 256));
    assert_eq!(p.softmax.dispatch, Dispatch::threadgroups([32, 1, 1], 256));
    assert_eq!(p.weighted_sum, Dispatch::threadgroups([4, 32, 1], 256));
    assert_eq!(p.fused, Dispatch::threadgroups([1, 32, 1], 256));
    assert_eq!(p.chunks, 1);
    assert_eq!(chunks_for(128, 1), 4);
    assert_eq!(chunks_for(129, 1), 5);
    assert!(plan(DType::F32, &DecodeShape::heads(1, 1, 130), 4, 256).is_err());
    // 32 SIMD groups × 1024 accumulators of 4 bytes: over 32 KiB for
    // the fused kernel only.
    let p = plan(DType::F32, &DecodeShape::heads(1, 1, 1024), 1, 1024).unwrap();
    assert_eq!(p.fused_threadgroup_memory(), 4 * 32 * (2 + 1024));
    assert_eq!(
        p.check_fused().unwrap_err().to_string(),
        "attention_fused_f32: needs 131328 bytes of threadgroup memory for 1024 threads and d = 1024 (1 query heads per threadgroup; limit 32768)"
    );
    assert_eq!(plan(DType::F32, &DecodeShape::heads(1, 1, 128), 4, 256).unwrap().fused_threadgroup_memory(), 4 * 8 * 130);
    assert_eq!(fused_threads_that_fit(1024, 4, 1), 224);
    assert_eq!(fused_threads_that_fit(1024, 1, 1), 224);
    assert_eq!((fused_threads_that_fit(992, 1, 1), fused_threads_that_fit(993, 1, 1)), (256, 224));
    assert_eq!((fused_threads_that_fit(896, 4, 1), fused_threads_that_fit(900, 4, 1)), (288, 224));
    assert_eq!((fused_threads_that_fit(224, 1, 1), fused_threads_that_fit(225, 1, 1)), (1024, 992));
    assert_eq!(fused_threads_that_fit(128, 4, 1), 1024);
    // Four query heads per K/V head: four states per SIMD group.
    assert_eq!(fused_threads_that_fit(128, 4, 4), 480);
    for (d, vec, group) in [(1024, 4, 1), (1000, 1, 1), (128, 4, 1), (33, 1, 1), (128, 4, 8), (256, 1, 3)] {
        let t = fused_threads_that_fit(d, vec, group);
        let shape = DecodeShape { batch: 1, q_heads: group, kv_heads: 1, s_len: 1, d };
        let all_heads = |t| plan(DType::F32, &shape, vec, t).unwrap().with_heads_per_threadgroup(group, false).unwrap();
        assert!(all_heads(t).check_fused().is_ok());
        if t < 1024 {
            assert!(all_heads(t + 32).check_fused().is_err());
        }
    }
}

#[test]
fn grouped_and_batched_geometry() {
    let shape = DecodeShape { batch: 8, q_heads: 32, kv_heads: 8, s_len: 4096, d: 128 };
    let p = plan(DType::F16, &shape, 4, 256).unwrap();
    assert_eq!(p.fused, Dispatch::threadgroups([1, 16, 8], 256));
    assert_eq!(p.combine, Dispatch::threadgroups([256, 4, 1], COMBINE_THREADS));
    assert_eq!(p.fused_config().heads, 2);
    assert_eq!([1, 2, 3, 4, 6, 8].map(default_heads_per_threadgroup), [1, 2, 1, 2, 2, 2]);
    // One query head per threadgroup: twice the threadgroups.
    let single = p.with_heads_per_threadgroup(1, true).unwrap();
    assert_eq!(single.fused, Dispatch::threadgroups([1, 32, 8], 256));
    // 16-byte words of eight halves, 8 lanes per key: 2 slots per lane.
    assert_eq!(single.fused_config().name(), "attention_fused_f16_wide_c2_t256_h1_l8_k1_p");
    assert_eq!(single.without_wide_words().fused_config().name(), "attention_fused_f16_vec4_c2_t256_h1_l16_k1_p");
    // Staged: 4 stages of 4 words of 16 bytes per thread; 96 threads
    // and their states fit 32 KiB (3 · 130 · 4 + 4 · 4 · 96 · 16 =
    // 26136 bytes, 128 would need 34848); the prefetch into registers
    // is off.
    assert_eq!(default_stages(&single, false), 4);
    // 256 threads kept: 4 stages would need 73 KiB.
    assert_eq!(default_stages(&single, true), 0);
    let staged = single.with_stages(4).unwrap().fitting_threads();
    assert_eq!(staged.fused_config().name(), "attention_fused_f16_wide_c2_t96_h1_l8_k1_s4");
    assert_eq!(staged.fused_threadgroup_memory(), 3 * 4 * (2 + 128) + 4 * 4 * 96 * 16);
    // D = 1024 in f32: 16 words per thread and step, registers instead.
    let wide_head = plan(DType::F32, &DecodeShape::heads(1, 8, 1024), 4, 256).unwrap();
    assert_eq!(default_stages(&wide_head, false), 0);
    assert!(plan(DType::F16, &DecodeShape::heads(1, 8, 33), 1, 256).unwrap().with_stages(2).is_err());
    assert_eq!([1, 4, 8, 16, 32, 33, 64, 1024].map(|d| default_lanes_per_key(d, 1)), [1, 2, 4, 8, 16, 32, 32, 32]);
    assert_eq!(default_lanes_per_key(128, 8), 8);
    assert!(p.with_lanes_per_key(6).is_err() && p.with_lanes_per_key(64).is_err());
    assert_eq!(
        p.with_heads_per_threadgroup(3, false).unwrap_err().to_string(),
        "attention_fused_f16_vec4: 3 query heads per threadgroup do not divide the 4 query heads per K/V head"
    );
    assert!(p.check_three_dispatch().is_err());
    // 132 multiprocessors: one wave of 528 threadgroups over 128 blocks of
    // 2 query heads → 4 splits (1024 keys each: 16 steps of 8 keys for
    // each of 8 SIMD groups); 5 would take 640, past the wave.
    let split = p.with_splits(splits_for(&p, 132, SPLIT_THREADGROUPS_PER_COMPUTE_UNIT, false));
    assert_eq!((split.splits, split.split_len), (4, 1024));
    assert_eq!(split.fused, Dispatch::threadgroups([4, 16, 8], 256));
    // One sequence: 16 blocks take 33 splits (528 threadgroups); past one
    // wave of blocks, one split.
    for merged in [false, true] {
        assert_eq!(splits_for(&plan(DType::F16, &DecodeShape { batch: 1, s_len: 8192, ..shape }, 4, 256).unwrap(), 132, SPLIT_THREADGROUPS_PER_COMPUTE_UNIT, merged), 33);
        assert_eq!(splits_for(&plan(DType::F16, &DecodeShape { batch: 40, ..shape }, 4, 256).unwrap(), 132, SPLIT_THREADGROUPS_PER_COMPUTE_UNIT, merged), 1);
    }
    // The splits merged by the combine by default; by the kernel's last
    // threadgroup of each of the 128 head blocks when asked, which then
    // writes `out` and `lse` itself.
    assert!(!split.fused_config().merge && split.fused_config().name().starts_with("attention_fused_split_"));
    let merged = split.with_split_sum(crate::library::split::SplitSum::LastThreadgroup).with_outputs(false, true);
    assert_eq!(merged.head_blocks(), 128);
    assert_eq!(merged.fused_config().name(), "attention_fused_merged_f16_wide_c2_t256_h2_l8_k1_p_lse");
    assert_eq!(merged.fused_threadgroup_memory(), split.fused_threadgroup_memory() + 4);
    // Unsplit, there is nothing to merge.
    assert!(!p.with_split_sum(crate::library::split::SplitSum::LastThreadgroup).fused_config().merge);
    // Merged by the kernel, short sequences split as far as the wave
    // allows (4 splits of 32 keys, 512 threadgroups), down to a step of one
    // SIMD group (4 keys) per split; merged by the combine's dispatch, a
    // split takes 4 steps of each of the 8 SIMD groups (128 keys), so those
    // stay whole.
    let short = |batch, s_len| plan(DType::F16, &DecodeShape { batch, s_len, ..shape }, 4, 256).unwrap();
    assert_eq!(splits_for(&short(8, 128), 132, SPLIT_THREADGROUPS_PER_COMPUTE_UNIT, true), 4);
    assert_eq!(splits_for(&short(1, 8), 132, SPLIT_THREADGROUPS_PER_COMPUTE_UNIT, true), 2);
    assert_eq!(splits_for(&short(8, 128), 132, SPLIT_THREADGROUPS_PER_COMPUTE_UNIT, false), 1);
    assert_eq!(splits_for(&short(1, 512), 132, SPLIT_THREADGROUPS_PER_COMPUTE_UNIT, false), 4);
    // On SIMD-group matrices (one threadgroup per multiprocessor): 32 query
    // heads over 8 K/V heads at 512 keys take 8 splits of 64 keys (4
    // SIMD-group steps each; the wave would take 16); from 1024 keys they
    // fill the 132 multiprocessors with 16 splits, at 8192 keys of 512 keys
    // each, and 8 sequences of 4096 keys (64 head blocks) take 2.
    let gqa = |batch, s_len| plan(DType::F16, &DecodeShape { batch, q_heads: 32, kv_heads: 8, s_len, d: 128 }, 4, 256).unwrap().with_heads_per_threadgroup(4, false).unwrap().with_matrices(16).unwrap();
    assert_eq!([(1, 512), (1, 1024), (1, 8192), (8, 4096), (1, 100), (1, 16)].map(|(b, s)| splits_for(&gqa(b, s), 132, 1, true)), [8, 16, 16, 2, 1, 1]);
    assert_eq!(
        plan(DType::F16, &DecodeShape { kv_heads: 5, ..shape }, 4, 256).unwrap_err().to_string(),
        "attention_f16_vec4: q_heads = 32 is not a multiple of kv_heads = 5"
    );
    assert!(plan(DType::F16, &DecodeShape { batch: 0, ..shape }, 4, 256).is_err());
}

#[test]
fn the_reference_groups_heads_and_honours_lengths() {
    // Two sequences, two query heads over one K/V head, d = 1: the
    // softmax of q·k over the first `len` keys, by hand.
    let shape = DecodeShape { batch: 2, q_heads: 2, kv_heads: 1, s_len: 2, d: 1 };
    let q = [1.0, 0.0, 2.0, 1.0];
    let k = [0.0, 1.0, 1.0, 3.0];
    let v = [10.0, 20.0, 5.0, 7.0];
    let (out, lse) = reference_batch(&q, &k, &v, &shape, Some(&[2, 1]), 1.0);
    let e = std::f64::consts::E;
    assert!((out[0] - (10.0 + 20.0 * e) / (1.0 + e)).abs() < 1e-12);
    assert!((out[1] - 15.0).abs() < 1e-12);
    assert_eq!(&out[2..], &[5.0, 5.0]);
    assert!((lse[0] - (1.0 + e).ln()).abs() < 1e-12);
    assert!((lse[1] - 2f64.ln()).abs() < 1e-12);
    assert!((lse[2] - 2.0).abs() < 1e-12 && (lse[3] - 1.0).abs() < 1e-12);
    let (out, lse) = reference_batch(&q, &k, &v, &shape, Some(&[0, 5]), 1.0);
    assert_eq!(&out[..2], &[0.0, 0.0]);
    assert_eq!(lse[0], f64::NEG_INFINITY);
    assert!((out[2] - (5.0 * e.powi(2) + 7.0 * e.powi(6)) / (e.powi(2) + e.powi(6))).abs() < 1e-9);
}
