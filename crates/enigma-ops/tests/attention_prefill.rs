//! Attention prefill against the f64 reference on the simulator: sequence
//! lengths 1, 7, 100 and 1000, head dimensions 64 and 128, grouped-query
//! heads (32 over 8), both causal alignments with `S_q ≠ S_kv` (rows that
//! see no key included), f16 and bf16, the log-sum-exp, every tile (on a
//! simulator with a CUDA GPU's threadgroup memory); sanitizer clean. The
//! kernel on cooperative tensors at the same awkward sizes, and the
//! selection between the two.

use enigma_kernels::library::attention_prefill::{self, Mask, PrefillKernel, PrefillShape, PrefillTile};
use enigma_ops::{download, quantize, upload, AttentionOptions, DType, Error, Options};
use enigma_runtime::{Device, Runtime};
use enigma_testing::attention_prefill::compare;

fn shape(batch: usize, heads: usize, kv_heads: usize, s_q: usize, s_kv: usize, d: usize) -> PrefillShape {
    PrefillShape { batch, heads, kv_heads, s_q, s_kv, d }
}

fn check(rt: &Runtime, dtype: DType, s: PrefillShape, mask: Mask, sanitize: bool) {
    let mut q = enigma_kernels::test_data(s.q_len(), 1);
    let mut k = enigma_kernels::test_data(s.kv_len(), 2);
    let mut v = enigma_kernels::test_data(s.kv_len(), 3);
    for x in [&mut q, &mut k, &mut v] {
        quantize(dtype, x);
    }
    // A scale above 1/√d makes the weights peakier than random data would.
    let scale = 2.0 / (s.d as f32).sqrt();
    let (want, want_lse) = attention_prefill::reference(&q, &k, &v, s, mask, scale);
    let elem = dtype.scalar();
    let (qb, kb, vb) = (upload(rt, elem, &q).unwrap(), upload(rt, elem, &k).unwrap(), upload(rt, elem, &v).unwrap());
    let ops = enigma_ops::Ops::new(rt).with_options(Options { elem: Some(elem), sanitize, ..Options::default() });
    let (out, lse) = ops.attention_prefill_lse(&qb, &kb, &vb, s, mask, Some(scale)).unwrap_or_else(|e| panic!("{s:?} {mask:?}: {e}"));
    let launches = ops.take_launches();
    assert_eq!(launches.len(), 1);
    assert_eq!(launches[0].dispatch.size, [s.s_q.div_ceil(64) as u32, s.heads as u32, s.batch as u32]);
    let got = download(&out, elem, s.q_len()).unwrap();
    let got_lse = download(&lse, enigma_ir::Scalar::F32, s.rows()).unwrap();
    compare(&format!("{dtype} {s:?} {mask:?}"), dtype, (&got, &want), (&got_lse, &want_lse));
}

#[test]
fn short_sequences_match_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for mask in [Mask::None, Mask::TopLeft] {
        check(&rt, DType::F16, shape(1, 2, 1, 1, 1, 64), mask, false);
        check(&rt, DType::F16, shape(2, 2, 2, 7, 7, 128), mask, false);
        check(&rt, DType::BF16, shape(1, 2, 1, 7, 7, 64), mask, false);
    }
    // Grouped-query attention, 32 query heads over 8 key/value heads.
    check(&rt, DType::F16, shape(1, 32, 8, 7, 7, 64), Mask::TopLeft, false);
    check(&rt, DType::BF16, shape(1, 32, 8, 9, 9, 128), Mask::None, false);
}

#[test]
fn unequal_lengths_follow_each_causal_alignment() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for mask in [Mask::None, Mask::TopLeft, Mask::BottomRight] {
        check(&rt, DType::F16, shape(1, 2, 1, 37, 100, 64), mask, false);
        // S_q > S_kv: bottom-right rows 0..63 see no key at all.
        check(&rt, DType::F16, shape(1, 1, 1, 100, 37, 128), mask, false);
    }
}

#[test]
fn hundred_rows_are_sanitizer_clean() {
    let rt = Runtime::new(Device::Sim).unwrap();
    check(&rt, DType::F16, shape(1, 4, 2, 100, 100, 64), Mask::None, true);
    check(&rt, DType::BF16, shape(1, 2, 1, 100, 100, 128), Mask::TopLeft, true);
}

#[test]
fn a_thousand_rows_match_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    check(&rt, DType::F16, shape(1, 1, 1, 1000, 1000, 64), Mask::None, false);
    check(&rt, DType::BF16, shape(1, 1, 1, 1000, 1000, 128), Mask::TopLeft, false);
}

/// The simulator with a CUDA GPU's threadgroup memory, where every tile
/// fits.
fn cuda_sized() -> Runtime {
    Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)))
}

fn check_tile(rt: &Runtime, dtype: DType, s: PrefillShape, mask: Mask, tile: PrefillTile, sanitize: bool) {
    let elem = dtype.scalar();
    let data = |len, seed| {
        let mut x = enigma_kernels::test_data(len, seed);
        quantize(dtype, &mut x);
        x
    };
    let (q, k, v) = (data(s.q_len(), 4), data(s.kv_len(), 5), data(s.kv_len(), 6));
    let (want, want_lse) = attention_prefill::reference(&q, &k, &v, s, mask, 0.125);
    let (qb, kb, vb) = (upload(rt, elem, &q).unwrap(), upload(rt, elem, &k).unwrap(), upload(rt, elem, &v).unwrap());
    let attention = AttentionOptions { prefill_tile: Some(tile), ..Default::default() };
    let ops = enigma_ops::Ops::new(rt).with_options(Options { elem: Some(elem), sanitize, attention, ..Options::default() });
    let (out, lse) = ops.attention_prefill_lse(&qb, &kb, &vb, s, mask, Some(0.125)).unwrap_or_else(|e| panic!("{tile:?} {s:?}: {e}"));
    let launches = ops.take_launches();
    assert!(launches[0].kernel.contains(&format!("_q{}_kv{}_", tile.block_q, tile.block_kv)), "{}", launches[0].kernel);
    let got = download(&out, elem, s.q_len()).unwrap();
    let got_lse = download(&lse, enigma_ir::Scalar::F32, s.rows()).unwrap();
    compare(&format!("{tile:?} {s:?} {mask:?}"), dtype, (&got, &want), (&got_lse, &want_lse));
}

#[test]
fn every_tile_matches_the_reference_with_cuda_sized_memory() {
    let rt = cuda_sized();
    // The default plans there: two stages, 64 keys per block at D = 64.
    let ops = enigma_ops::Ops::new(&rt).with_options(Options { elem: Some(enigma_ir::Scalar::F16), ..Options::default() });
    for (d, tile) in [(128, PrefillTile::PORTABLE), (64, PrefillTile::WIDE)] {
        let s = shape(1, 2, 1, 150, 150, d);
        let buf = |n: usize| upload(&rt, enigma_ir::Scalar::F16, &vec![0.5; n]).unwrap();
        let plan = ops.attention_prefill_plan(&buf(s.q_len()), &buf(s.kv_len()), &buf(s.kv_len()), s, Mask::None, false).unwrap();
        let PrefillKernel::Matrices(config) = plan.config else { panic!("{plan:?}") };
        assert_eq!((config.tile, config.stages), (tile, 2));
    }
    let large = PrefillTile { block_q: 128, block_kv: 64 };
    for tile in [large, PrefillTile { block_q: 128, block_kv: 32 }, PrefillTile::WIDE] {
        check_tile(&rt, DType::F16, shape(1, 2, 1, 150, 150, 128), Mask::TopLeft, tile, false);
        check_tile(&rt, DType::BF16, shape(1, 2, 2, 37, 200, 64), Mask::BottomRight, tile, false);
        check_tile(&rt, DType::F16, shape(1, 1, 1, 200, 70, 64), Mask::BottomRight, tile, false);
    }
    check_tile(&rt, DType::F16, shape(1, 2, 1, 300, 300, 64), Mask::None, PrefillTile::WIDE, true);
    check_tile(&rt, DType::F16, shape(1, 2, 1, 200, 200, 128), Mask::TopLeft, large, true);
}

#[test]
fn unsupported_shapes_are_typed_errors() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ops = enigma_ops::Ops::new(&rt).with_options(Options { elem: Some(enigma_ir::Scalar::F16), ..Options::default() });
    let buf = rt.buffer_bytes(2 * 96 * 4).unwrap();
    let err = ops.attention_prefill(&buf, &buf, &buf, shape(1, 1, 1, 4, 4, 96), Mask::None, None).unwrap_err();
    assert!(matches!(err, Error::Shape(_)), "{err:?}");
    assert_eq!(err.to_string(), "attention_prefill_f16: head dimension 96 is not supported (the kernel is built for [64, 128])");
    let small = rt.buffer_bytes(2 * 64).unwrap();
    let err = ops.attention_prefill(&small, &small, &small, shape(1, 1, 1, 4, 4, 64), Mask::None, None).unwrap_err();
    assert_eq!(err.to_string(), "attention_prefill: `q` has 128 bytes, needs 512 (256 f16 elements)");
    let f32s = enigma_ops::Ops::new(&rt);
    let err = f32s.attention_prefill(&buf, &buf, &buf, shape(1, 1, 1, 2, 2, 64), Mask::None, None).unwrap_err();
    assert!(err.to_string().contains("f32 inputs are not supported"), "{err}");
}

/// The kernel on cooperative tensors, asked for (the simulator's
/// cooperative products are the reference semantics, not `wgmma`, so the
/// selection does not take it by default), at the awkward sizes, on a
/// simulator with a CUDA GPU's threadgroup memory; sanitizer clean.
#[test]
fn cooperative_kernel_matches_the_reference_at_awkward_sizes() {
    let attention = AttentionOptions { prefill_cooperative: Some(true), ..Default::default() };
    enigma_testing::attention_prefill::check_awkward_sizes(&cuda_sized(), attention, "attention_prefill_coop_", true);
}

/// The same staged by tile copies (Q, K and V as whole matrices: the boxes
/// of a head's last block reach into the next head's rows).
#[test]
fn cooperative_kernel_with_tile_copies_matches_the_reference_at_awkward_sizes() {
    let attention = AttentionOptions { prefill_cooperative: Some(true), prefill_tile_copies: Some(true), ..Default::default() };
    let rt = cuda_sized();
    let name = enigma_testing::attention_prefill::check(&rt, DType::F16, shape(2, 4, 2, 70, 90, 64), Mask::TopLeft, attention, true);
    assert!(name.ends_with("_tiles"), "{name}");
    enigma_testing::attention_prefill::check_awkward_sizes(&rt, attention, "attention_prefill_coop_", true);
}

/// Tile copies in three stages (copies two blocks ahead; five blocks of
/// keys, the last partial), under the sanitizer.
#[test]
fn cooperative_kernel_with_three_stages_of_tile_copies_matches_the_reference() {
    use enigma_kernels::library::attention_prefill::PrefillPlan;
    use enigma_kernels::library::attention_prefill_cooperative::CoopPrefillConfig;
    let rt = cuda_sized();
    for (dtype, mask, d) in [(DType::F16, Mask::BottomRight, 64), (DType::BF16, Mask::None, 128)] {
        let s = shape(1, 4, 2, 100, 300, d);
        let data = |len, seed| {
            let mut x = enigma_kernels::test_data(len, seed);
            quantize(dtype, &mut x);
            x
        };
        let (q, k, v) = (data(s.q_len(), 1), data(s.kv_len(), 2), data(s.kv_len(), 3));
        let (want, want_lse) = attention_prefill::reference(&q, &k, &v, s, mask, 0.2);
        let elem = dtype.scalar();
        let (qb, kb, vb) = (upload(&rt, elem, &q).unwrap(), upload(&rt, elem, &k).unwrap(), upload(&rt, elem, &v).unwrap());
        let attention = AttentionOptions { prefill_cooperative: Some(true), prefill_tile: Some(PrefillTile { block_q: 64, block_kv: 64 }), prefill_tile_copies: Some(true), ..Default::default() };
        let ops = enigma_ops::Ops::new(&rt).with_options(Options { elem: Some(elem), attention, sanitize: true, ..Options::default() });
        let plan = ops.attention_prefill_plan(&qb, &kb, &vb, s, mask, true).unwrap();
        let PrefillKernel::Cooperative(config) = plan.config else { panic!("{plan:?}") };
        let plan = PrefillPlan { config: PrefillKernel::Cooperative(CoopPrefillConfig { stages: 3, ..config }), ..plan };
        assert!(plan.config.name().ends_with("_s3_tiles"), "{}", plan.config.name());
        let (out, lse) = ops.attention_prefill_planned(&plan, &qb, &kb, &vb, Some(0.2)).unwrap();
        let got = download(&out, elem, s.q_len()).unwrap();
        let got_lse = download(&lse.unwrap(), enigma_ir::Scalar::F32, s.rows()).unwrap();
        compare(&plan.config.name(), dtype, (&got, &want), (&got_lse, &want_lse));
    }
}

/// A block past a head's last key holds the next head's values, there
/// infinite: its weights are 0 and the kernel zeroes those rows, so no NaN
/// reaches the first head (the second's output is torch's NaN).
#[test]
fn tile_copies_past_a_heads_last_key_read_nothing_of_the_next_head() {
    let rt = cuda_sized();
    let s = shape(1, 2, 2, 10, 10, 64);
    let mut q = enigma_kernels::test_data(s.q_len(), 1);
    let mut k = enigma_kernels::test_data(s.kv_len(), 2);
    let mut v = enigma_kernels::test_data(s.kv_len(), 3);
    for x in [&mut q, &mut k, &mut v] {
        quantize(DType::F16, x);
    }
    let head = s.s_kv * s.d;
    v[head..].fill(f32::INFINITY);
    let (want, _) = attention_prefill::reference(&q, &k, &v, s, Mask::None, 0.125);
    let elem = enigma_ir::Scalar::F16;
    let (qb, kb, vb) = (upload(&rt, elem, &q).unwrap(), upload(&rt, elem, &k).unwrap(), upload(&rt, elem, &v).unwrap());
    for tile_copies in [false, true] {
        let attention = AttentionOptions { prefill_cooperative: Some(true), prefill_tile_copies: Some(tile_copies), ..Default::default() };
        let ops = enigma_ops::Ops::new(&rt).with_options(Options { elem: Some(elem), attention, sanitize: true, ..Options::default() });
        let out = ops.attention_prefill(&qb, &kb, &vb, s, Mask::None, Some(0.125)).unwrap();
        let got = download(&out, elem, s.q_len()).unwrap();
        let first = s.s_q * s.d;
        for (i, (g, w)) in got[..first].iter().zip(&want[..first]).enumerate() {
            assert!((g - w).abs() <= 2e-2 * w.abs().max(1.0), "tile copies {tile_copies}: element {i}: {g} against {w}");
        }
        assert!(got[first..].iter().all(|x| !x.is_finite()), "tile copies {tile_copies}: the second head sums infinite values");
    }
}

/// Every block pair (one and two warpgroups; 64 and 128 keys), each at
/// two shapes with partial blocks, one under the sanitizer; staged by
/// each thread's copies and by tile copies.
#[test]
fn every_cooperative_block_pair_matches_the_reference() {
    let rt = cuda_sized();
    for ((block_q, block_kv), tile_copies) in [(64, 64), (128, 64), (128, 128), (64, 128)].into_iter().zip([false, true, false, true]) {
        let attention = AttentionOptions {
            prefill_cooperative: Some(true),
            prefill_tile: Some(PrefillTile { block_q, block_kv }),
            prefill_tile_copies: Some(tile_copies),
            ..Default::default()
        };
        let suffix = format!("_q{block_q}_kv{block_kv}{}", if tile_copies { "_tiles" } else { "" });
        let name = enigma_testing::attention_prefill::check(&rt, DType::F16, shape(1, 4, 2, 150, 300, 64), Mask::BottomRight, attention, false);
        assert!(name.ends_with(&suffix), "{name}");
        let name = enigma_testing::attention_prefill::check(&rt, DType::BF16, shape(1, 2, 1, 130, 130, 128), Mask::TopLeft, attention, block_q == 128);
        assert!(name.ends_with(&suffix), "{name}");
    }
}
/// Negative and zero scales, masked blocks and unmasked ones in one row.
#[test]
fn cooperative_kernel_takes_any_scale() {
    let rt = cuda_sized();
    let attention = AttentionOptions { prefill_cooperative: Some(true), ..Default::default() };
    for (scale, mask) in [(-0.2, Mask::None), (-0.2, Mask::TopLeft), (0.0, Mask::BottomRight), (0.0, Mask::None)] {
        enigma_testing::attention_prefill::check_scaled(&rt, DType::F16, shape(1, 2, 1, 150, 200, 64), mask, attention, false, scale);
    }
}

#[test]
fn the_selection_takes_the_cooperative_kernel_only_where_asked_or_on_wgmma() {
    let rt = cuda_sized();
    let s = shape(1, 2, 1, 100, 100, 128);
    let buf = |n: usize| upload(&rt, enigma_ir::Scalar::F16, &vec![0.5; n]).unwrap();
    let (q, k, v) = (buf(s.q_len()), buf(s.kv_len()), buf(s.kv_len()));
    let with = |attention| enigma_ops::Ops::new(&rt).with_options(Options { elem: Some(enigma_ir::Scalar::F16), attention, ..Options::default() });
    // The simulator's cooperative products are not `wgmma`: by default the
    // SIMD-group-matrix kernel.
    let plan = with(AttentionOptions::default()).attention_prefill_plan(&q, &k, &v, s, Mask::None, false).unwrap();
    assert!(matches!(plan.config, PrefillKernel::Matrices(_)), "{plan:?}");
    let plan = with(AttentionOptions { prefill_cooperative: Some(true), ..Default::default() }).attention_prefill_plan(&q, &k, &v, s, Mask::None, true).unwrap();
    assert_eq!(plan.config.name(), "attention_prefill_coop_f16_d128_lse_q64_kv64");
    assert_eq!(plan.dispatch.size, [2, 2, 1]);
    let tile = |block_q, block_kv| AttentionOptions { prefill_cooperative: Some(true), prefill_tile: Some(PrefillTile { block_q, block_kv }), ..Default::default() };
    let plan = with(tile(128, 128)).attention_prefill_plan(&q, &k, &v, s, Mask::TopLeft, false).unwrap();
    assert_eq!((plan.config.name(), plan.dispatch.size, plan.dispatch.threads), ("attention_prefill_coop_f16_d128_causal_q128_kv128".to_string(), [1, 2, 1], [256, 1, 1]));
    let err = with(tile(64, 32)).attention_prefill_plan(&q, &k, &v, s, Mask::None, false).unwrap_err();
    assert_eq!(err.to_string(), "attention_prefill_coop_f16_d128_q64_kv32: blocks of 64 rows and 32 keys; each 64 or 128");
    // 32 KiB of threadgroup memory: no block of the cooperative kernel fits.
    let small = Runtime::new(Device::Sim).unwrap();
    let ops = enigma_ops::Ops::new(&small).with_options(Options { elem: Some(enigma_ir::Scalar::F16), attention: AttentionOptions { prefill_cooperative: Some(true), ..Default::default() }, ..Options::default() });
    let b = |n: usize| upload(&small, enigma_ir::Scalar::F16, &vec![0.5; n]).unwrap();
    let err = ops.attention_prefill_plan(&b(s.q_len()), &b(s.kv_len()), &b(s.kv_len()), s, Mask::None, false).unwrap_err();
    assert!(err.to_string().contains("bytes of threadgroup memory (limit 32768)"), "{err}");
}
