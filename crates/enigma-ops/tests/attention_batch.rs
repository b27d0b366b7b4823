//! The fused attention decode of a batch — grouped query heads, per-sequence
//! lengths (empty, short, clamped to the cache), log-sum-exp, keys split
//! over threadgroups (merged by the combine and by the split kernel's last
//! threadgroup), several keys per step, 1 to 32 lanes per key and
//! 16-byte words of f16/bf16 — against the f64 reference on the simulator,
//! in f32, f16 and bf16, and clean under the sanitizer.

use enigma_kernels::library::attention;
use enigma_ops::{decode_shape, download, quantize, upload, upload_bytes, AttentionOptions, DType, Options, SplitSum};
use enigma_runtime::{Device, Runtime};

struct Case<'a> {
    dtype: DType,
    /// batch, q_heads, kv_heads, s_len, d
    shape: [usize; 5],
    lens: Option<&'a [u32]>,
    splits: u32,
    keys_per_step: u32,
    /// Query heads per threadgroup (`None`: all of a K/V head's).
    heads: Option<u32>,
    prefetch: bool,
    /// Lanes per key (`None`: the default for the head dimension).
    lanes: Option<u32>,
    /// Steps staged ahead by asynchronous copies (0: loads into registers).
    stages: u32,
    sanitize: bool,
}

/// Checks `c` with its splits merged by the combine and, where the keys
/// are split, by the split kernel's last threadgroup.
fn check(rt: &Runtime, c: &Case) {
    check_sum(rt, c, SplitSum::Reduction);
    if c.splits > 1 {
        check_sum(rt, c, SplitSum::LastThreadgroup);
    }
}

fn check_sum(rt: &Runtime, c: &Case, sum: SplitSum) {
    let attention = AttentionOptions { splits: Some(c.splits), keys_per_step: Some(c.keys_per_step), heads_per_threadgroup: c.heads, prefetch: Some(c.prefetch), lanes_per_key: c.lanes, stages: Some(c.stages), split_sum: Some(sum), ..AttentionOptions::default() };
    let what = format!("{} {:?} lens {:?} splits {} ({sum:?}) keys/step {} heads {:?} prefetch {} lanes {:?} stages {}", c.dtype, c.shape, c.lens, c.splits, c.keys_per_step, c.heads, c.prefetch, c.lanes, c.stages);
    let heads = c.heads.unwrap_or(attention::default_heads_per_threadgroup((c.shape[1] / c.shape[2]) as u32));
    let kernel = run(rt, c.dtype, c.shape, c.lens, attention, heads, c.sanitize, &what);
    assert!(!kernel.contains("_mma_"), "{what}: {kernel}");
}

/// Runs the decode of `shape` (`lens`) with `attention` against the f64
/// reference: its grid (`heads` query heads per threadgroup), its
/// dispatches, `out` and the log-sum-exp; returns the name of its first
/// kernel.
#[allow(clippy::too_many_arguments)]
fn run(rt: &Runtime, dtype: DType, shape: [usize; 5], lens: Option<&[u32]>, attention: AttentionOptions, heads: u32, sanitize: bool, what: &str) -> String {
    let [b, hq, hkv, s, d] = shape;
    let shape = decode_shape(b, hq, hkv, s, d).unwrap();
    let mut q = enigma_kernels::test_data(b * hq * d, 1);
    let mut k = enigma_kernels::test_data(b * hkv * s * d, 2);
    let mut v = enigma_kernels::test_data(b * hkv * s * d, 3);
    // Larger scores than the test data's [-1, 1] gives: a peaked softmax.
    for x in k.iter_mut() {
        *x *= 3.0;
    }
    for x in [&mut q, &mut k, &mut v] {
        quantize(dtype, x);
    }
    let scale = 1.0 / (d as f32).sqrt();
    let (want, want_lse) = attention::reference_batch(&q, &k, &v, &shape, lens, scale);
    let elem = dtype.scalar();
    let (qb, kb, vb) = (upload(rt, elem, &q).unwrap(), upload(rt, elem, &k).unwrap(), upload(rt, elem, &v).unwrap());
    let lens = lens.map(|l| upload_bytes(rt, l.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap());
    let options = Options { attention, elem: Some(elem), sanitize, ..Options::default() };
    let ops = enigma_ops::Ops::new(rt).with_options(options);
    let got = ops.attention_decode_batch(&qb, &kb, &vb, &shape, lens.as_ref(), scale, true).unwrap_or_else(|e| panic!("{what}: {e}"));
    let launches = ops.take_launches();
    let splits = attention.splits.unwrap_or(1);
    let split_len = s.div_ceil((splits as usize).clamp(1, s));
    let used = s.div_ceil(split_len) as u32;
    let sum = attention.split_sum.unwrap_or(SplitSum::Reduction);
    assert_eq!(launches[0].dispatch.size, [used, hq as u32 / heads, b as u32], "{what}");
    assert_eq!(launches.len(), if used > 1 && sum == SplitSum::Reduction { 2 } else { 1 }, "{what}");
    let out = download(&got.out, elem, b * hq * d).unwrap();
    let tol = if dtype == DType::F32 { 2e-5 } else { 4e-3 };
    for (i, (g, w)) in out.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}: out[{i}] got {g}, want {w}");
    }
    let lse = download(got.lse.as_ref().expect("asked for"), enigma_ir::Scalar::F32, b * hq).unwrap();
    for (i, (g, w)) in lse.iter().zip(&want_lse).enumerate() {
        if w.is_infinite() {
            assert_eq!(*g, f64::NEG_INFINITY, "{what}: lse[{i}] of an empty sequence");
        } else {
            assert!((g - w).abs() <= 2e-5 * (1.0 + w.abs()), "{what}: lse[{i}] got {g}, want {w}");
        }
    }
    launches[0].kernel.clone()
}

/// The decode on SIMD-group matrices of `shape` (`lens`), `splits` ways
/// (merged by the combine and, split, by the kernel), with `heads` query
/// heads per threadgroup (default: all of a K/V head's up to 8), `stages`
/// (default: as many as fit), on `rt`; checks its kernel is the matrix form.
#[allow(clippy::too_many_arguments)]
fn check_matrices(rt: &Runtime, dtype: DType, shape: [usize; 5], lens: Option<&[u32]>, splits: u32, heads: Option<u32>, stages: Option<u32>, sanitize: bool) {
    let sums: &[SplitSum] = if splits > 1 { &[SplitSum::Reduction, SplitSum::LastThreadgroup] } else { &[SplitSum::Reduction] };
    for &sum in sums {
        let attention = AttentionOptions { splits: Some(splits), heads_per_threadgroup: heads, stages, split_sum: Some(sum), matrices: Some(true), ..AttentionOptions::default() };
        let what = format!("matrices {dtype} {shape:?} lens {lens:?} splits {splits} ({sum:?}) heads {heads:?} stages {stages:?} on {}", rt.device().name);
        let h = heads.unwrap_or(attention::default_matrix_heads((shape[1] / shape[2]) as u32));
        let kernel = run(rt, dtype, shape, lens, attention, h, sanitize, &what);
        assert!(kernel.contains("_mma_"), "{what}: {kernel}");
    }
}

#[test]
fn grouped_ragged_decode_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ragged: &[u32] = &[77, 0, 1, 40, 500];
    for (shape, lens) in [
        ([1, 4, 1, 37, 40], None),
        ([5, 6, 2, 77, 40], Some(ragged)),
        ([2, 3, 3, 65, 33], None),
        ([1, 8, 2, 129, 128], None),
    ] {
        for (splits, keys_per_step, prefetch) in [(1, 1, false), (1, 4, true), (3, 3, false), (64, 4, true), (7, 2, true)] {
            check(&rt, &Case { dtype: DType::F32, shape, lens, splits, keys_per_step, heads: None, prefetch, lanes: None, stages: 0, sanitize: false });
        }
        // One query head per threadgroup.
        check(&rt, &Case { dtype: DType::F32, shape, lens, splits: 2, keys_per_step: 2, heads: Some(1), prefetch: true, lanes: None, stages: 0, sanitize: false });
        // Every lane count: a whole SIMD group per key down to one lane.
        for (lanes, splits) in [(1, 1), (2, 3), (4, 1), (16, 2), (32, 1)] {
            check(&rt, &Case { dtype: DType::F32, shape, lens, splits, keys_per_step: 3, heads: None, prefetch: lanes % 4 == 0, lanes: Some(lanes), stages: 0, sanitize: false });
        }
    }
    // 16-byte words of eight halves with 1, 2 and 16 lanes per key (16,
    // 8 and 1 slots per lane at D = 128), in registers and staged.
    // (Staged, one lane per key copies 16 words per key: one key per step
    // and one stage fit.)
    for (lanes, stages, keys_per_step) in [(1, 0, 2), (2, 0, 2), (16, 0, 2), (1, 1, 1), (2, 2, 1), (16, 2, 2)] {
        check(&rt, &Case { dtype: DType::F16, shape: [1, 4, 2, 70, 128], lens: None, splits: 2, keys_per_step, heads: None, prefetch: true, lanes: Some(lanes), stages, sanitize: false });
    }
    // Staged by asynchronous copies: 4-byte (d = 33), 16-byte (float4s)
    // and 8-byte (half4s of bf16 with d = 36) words, 1 to 4 stages, more
    // stages than a split has steps.
    for (dtype, shape, lens) in [(DType::F32, [2, 3, 3, 65, 33], None), (DType::F32, [5, 6, 2, 77, 40], Some(ragged)), (DType::BF16, [2, 4, 2, 45, 36], Some(&[45, 3][..]))] {
        for (stages, splits, keys_per_step, lanes) in [(1, 1, 1, None), (2, 3, 2, Some(4)), (3, 64, 1, Some(8)), (4, 2, 3, Some(32))] {
            check(&rt, &Case { dtype, shape, lens, splits, keys_per_step, heads: None, prefetch: false, lanes, stages, sanitize: false });
        }
    }
    check(&rt, &Case { dtype: DType::F16, shape: [2, 8, 2, 300, 128], lens: Some(&[300, 123]), splits: 5, keys_per_step: 4, heads: Some(2), prefetch: true, lanes: None, stages: 0, sanitize: false });
    check(&rt, &Case { dtype: DType::BF16, shape: [2, 4, 1, 150, 64], lens: Some(&[1, 150]), splits: 1, keys_per_step: 4, heads: None, prefetch: false, lanes: None, stages: 0, sanitize: false });
}

#[test]
fn grouped_ragged_decode_is_sanitizer_clean() {
    let rt = Runtime::new(Device::Sim).unwrap();
    check(&rt, &Case { dtype: DType::F32, shape: [3, 4, 2, 37, 36], lens: Some(&[37, 0, 20]), splits: 3, keys_per_step: 4, heads: None, prefetch: true, lanes: Some(4), stages: 0, sanitize: true });
    check(&rt, &Case { dtype: DType::F16, shape: [2, 6, 3, 50, 128], lens: Some(&[9, 50]), splits: 1, keys_per_step: 3, heads: Some(1), prefetch: false, lanes: None, stages: 0, sanitize: true });
    // Staged: each lane reads back only the copies it made, after they
    // complete, and reuses a stage only after reading it.
    check(&rt, &Case { dtype: DType::F16, shape: [2, 4, 2, 90, 64], lens: Some(&[90, 17]), splits: 2, keys_per_step: 2, heads: None, prefetch: false, lanes: None, stages: 3, sanitize: true });
    check(&rt, &Case { dtype: DType::F32, shape: [1, 2, 1, 40, 33], lens: None, splits: 1, keys_per_step: 1, heads: None, prefetch: false, lanes: Some(4), stages: 2, sanitize: true });
}

#[test]
fn decode_on_matrices_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ragged: &[u32] = &[77, 0, 1, 40, 33];
    // Grouped heads (4 and 8 per K/V head, 2 per threadgroup), one head per
    // K/V head, ragged batches with an empty sequence, D = 16 to 256
    // (256: two 64-wide chunks and more; 80: a 16-wide chunk), splits
    // longer and shorter than a step, the simulator's 32 KiB (fewer SIMD
    // groups and stages).
    for dtype in [DType::F16, DType::BF16] {
        check_matrices(&rt, dtype, [1, 8, 2, 129, 128], None, 3, None, None, false);
        check_matrices(&rt, dtype, [5, 6, 2, 77, 64], Some(ragged), 4, None, None, false);
        check_matrices(&rt, dtype, [2, 4, 4, 70, 80], None, 1, None, None, false);
    }
    check_matrices(&rt, DType::F16, [1, 16, 2, 50, 16], None, 2, None, None, false);
    check_matrices(&rt, DType::F16, [2, 8, 2, 100, 128], Some(&[100, 45]), 2, Some(2), Some(1), false);
    check_matrices(&rt, DType::BF16, [1, 2, 1, 40, 256], None, 1, None, None, false);
    // A device with CUDA's 227 KiB: 4 SIMD groups, 3 stages.
    let big = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    check_matrices(&big, DType::F16, [3, 8, 2, 300, 128], Some(&[300, 5, 211]), 2, None, None, false);
    check_matrices(&big, DType::BF16, [1, 4, 1, 1000, 128], None, 3, None, None, false);
}

#[test]
fn decode_on_matrices_in_blocks_of_32_keys_matches_the_reference() {
    // 32 keys per SIMD group and step (`keys_per_step` with `matrices`):
    // ragged with an empty sequence, split and merged by the kernel or the
    // combine, a split shorter than a block, D = 128 on CUDA's 227 KiB and
    // D = 80 (a 16-wide chunk) on the simulator's 32 KiB; sanitized once.
    let small = Runtime::new(Device::Sim).unwrap();
    let big = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    let cases = [
        (&big, DType::F16, [3, 8, 2, 300, 128], Some(&[300, 0, 211][..]), 3, false),
        (&big, DType::BF16, [1, 32, 8, 200, 128], None, 8, false),
        (&big, DType::F16, [1, 4, 1, 100, 128], None, 1, false),
        (&small, DType::F16, [2, 4, 2, 70, 80], Some(&[70, 33][..]), 2, false),
        (&big, DType::F16, [2, 4, 2, 90, 128], Some(&[90, 17][..]), 2, true),
    ];
    for (rt, dtype, shape, lens, splits, sanitize) in cases {
        let sums: &[SplitSum] = if splits > 1 { &[SplitSum::Reduction, SplitSum::LastThreadgroup] } else { &[SplitSum::Reduction] };
        for &sum in sums {
            let attention = AttentionOptions { splits: Some(splits), keys_per_step: Some(32), split_sum: Some(sum), matrices: Some(true), ..AttentionOptions::default() };
            let what = format!("matrices, 32 keys per step, {dtype} {shape:?} lens {lens:?} splits {splits} ({sum:?}) on {}", rt.device().name);
            let heads = attention::default_matrix_heads((shape[1] / shape[2]) as u32);
            let kernel = run(rt, dtype, shape, lens, attention, heads, sanitize, &what);
            assert!(kernel.contains("_mma_") && kernel.contains("_b32_"), "{what}: {kernel}");
        }
    }
}

#[test]
fn decode_on_matrices_is_sanitizer_clean() {
    let rt = Runtime::new(Device::Sim).unwrap();
    check_matrices(&rt, DType::F16, [2, 4, 2, 90, 64], Some(&[90, 17]), 2, None, Some(2), true);
    let big = Runtime::with_backend(std::sync::Arc::new(enigma_sim::SimBackend::new().with_threadgroup_memory(227 * 1024)));
    check_matrices(&big, DType::BF16, [1, 8, 2, 200, 128], None, 1, None, None, true);
}

#[test]
fn shapes_the_decode_cannot_take_are_errors() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let buf = upload(&rt, enigma_ir::Scalar::F32, &vec![0.0; 4096]).unwrap();
    let ops = enigma_ops::Ops::new(&rt);
    let shape = decode_shape(1, 6, 4, 8, 32).unwrap();
    let err = ops.attention_decode_batch(&buf, &buf, &buf, &shape, None, 1.0, false).unwrap_err().to_string();
    assert_eq!(err, "attention_f32_vec4: q_heads = 6 is not a multiple of kv_heads = 4");
    // Five sequences, four lengths (16 bytes).
    let shape = decode_shape(5, 4, 2, 8, 32).unwrap();
    let short = upload_bytes(&rt, vec![1; 16]).unwrap();
    let err = ops.attention_decode_batch(&buf, &buf, &buf, &shape, Some(&short), 1.0, false).unwrap_err().to_string();
    assert!(err.contains("`seq_lens` has 16 bytes, needs 20"), "{err}");
}
