//! The fused attention decode with its keys split over threadgroups (then
//! combined) against the f64 reference, for awkward shapes and split
//! counts, in f32 and f16, the splits merged by the combine and by the
//! split kernel's last threadgroup, and clean under the sanitizer.

use enigma_ir::Scalar;
use enigma_kernels::library::attention;
use enigma_ops::{download, quantize, upload, AttentionOptions, DType, Options, SplitSum};
use enigma_runtime::{Device, Runtime};


fn check(rt: &Runtime, dtype: DType, h: usize, s: usize, d: usize, splits: u32, sanitize: bool) {
    for sum in [SplitSum::Reduction, SplitSum::LastThreadgroup] {
        check_sum(rt, dtype, h, s, d, splits, sum, sanitize);
    }
}

/// One run with the splits merged as `sum` says.
#[allow(clippy::too_many_arguments)]
fn check_sum(rt: &Runtime, dtype: DType, h: usize, s: usize, d: usize, splits: u32, sum: SplitSum, sanitize: bool) {
    let mut q = enigma_kernels::test_data(h * d, 1);
    let mut k = enigma_kernels::test_data(h * s * d, 2);
    let mut v = enigma_kernels::test_data(h * s * d, 3);
    for x in [&mut q, &mut k, &mut v] {
        quantize(dtype, x);
    }
    let scale = 1.0 / (d as f32).sqrt();
    let want = attention::reference(&q, &k, &v, h, s, d, scale);
    let elem = dtype.scalar();
    let (qb, kb, vb) = (upload(rt, elem, &q).unwrap(), upload(rt, elem, &k).unwrap(), upload(rt, elem, &v).unwrap());
    let options = Options { attention: AttentionOptions { splits: Some(splits), split_sum: Some(sum), ..AttentionOptions::default() }, elem: Some(elem), sanitize, ..Options::default() };
    let ops = enigma_ops::Ops::new(rt).with_options(options);
    let out = ops.attention_decode_fused(&qb, &kb, &vb, h, s, d, scale).unwrap_or_else(|e| panic!("h={h} s={s} d={d} splits={splits} {sum:?}: {e}"));
    let launches = ops.take_launches();
    let expected_splits = (splits as usize).clamp(1, s);
    let split_len = s.div_ceil(expected_splits);
    let used = s.div_ceil(split_len);
    if used > 1 {
        let dispatches = if sum == SplitSum::Reduction { 2 } else { 1 };
        assert_eq!(launches.len(), dispatches, "split form, {sum:?}: {launches:?}");
        assert_eq!(launches[0].dispatch.size[..2], [used as u32, h as u32]);
    } else {
        assert_eq!(launches.len(), 1);
    }
    let got = download(&out, elem, h * d).unwrap();
    let tol = if elem == Scalar::F32 { 2e-5 } else { 2e-3 };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "h={h} s={s} d={d} splits={splits} {sum:?} {dtype}: [{i}] got {g}, want {w}");
    }
}

#[test]
fn split_decode_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for (h, s, d) in [(1, 1, 128), (2, 37, 128), (3, 100, 33), (1, 1000, 64), (2, 65, 1024)] {
        for splits in [1, 2, 3, 7, 64] {
            check(&rt, DType::F32, h, s, d, splits, false);
        }
    }
    check(&rt, DType::F16, 2, 300, 128, 5, false);
    check(&rt, DType::BF16, 2, 300, 128, 4, false);
}

#[test]
fn split_decode_is_sanitizer_clean() {
    let rt = Runtime::new(Device::Sim).unwrap();
    check(&rt, DType::F32, 2, 37, 128, 3, true);
    check(&rt, DType::F16, 1, 200, 36, 4, true);
}
