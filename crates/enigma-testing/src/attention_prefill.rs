//! Attention prefill (`Ops::attention_prefill_lse`) checked on a runtime
//! against the f64 reference (`attention_prefill::reference`), for the
//! simulator (`enigma-ops/tests/attention_prefill.rs`, with a CUDA GPU's
//! threadgroup memory, under the sanitizer where asked) and a CUDA GPU
//! (`enigma-cuda/tests/attention_prefill.rs`): the kernel each selection
//! gives at the awkward sizes ([`check_awkward_sizes`]: S = 1, 7, 100 and
//! 1000, D = 64 and 128, grouped-query heads 32 over 8, both causal
//! alignments with `S_q ≠ S_kv`, rows that see no key, f16 and bf16, the
//! log-sum-exp).

use enigma_kernels::library::attention_prefill::{self, Mask, PrefillShape};
use enigma_ops::{download, quantize, upload, AttentionOptions, DType, Options};
use enigma_runtime::Runtime;

/// `[batch, heads, s_q, d]` queries over `[batch, kv_heads, s_kv, d]` keys and values.
pub fn shape(batch: usize, heads: usize, kv_heads: usize, s_q: usize, s_kv: usize, d: usize) -> PrefillShape {
    PrefillShape { batch, heads, kv_heads, s_q, s_kv, d }
}

/// Runs the prefill of `s` with `attention`'s choices (and the sanitizer
/// where `sanitize`) on data rounded to `dtype`, with a scale of `2/√d`
/// (peakier weights than random data gives), compares the output and the
/// log-sum-exp with the f64 reference ([`compare`]) and returns the name
/// of the kernel that ran.
pub fn check(rt: &Runtime, dtype: DType, s: PrefillShape, mask: Mask, attention: AttentionOptions, sanitize: bool) -> String {
    check_scaled(rt, dtype, s, mask, attention, sanitize, 2.0 / (s.d as f32).sqrt())
}

/// [`check`] with the scale `scale` (negative or zero included).
pub fn check_scaled(rt: &Runtime, dtype: DType, s: PrefillShape, mask: Mask, attention: AttentionOptions, sanitize: bool, scale: f32) -> String {
    let elem = dtype.scalar();
    let data = |len, seed| {
        let mut x = enigma_kernels::test_data(len, seed);
        quantize(dtype, &mut x);
        x
    };
    let (q, k, v) = (data(s.q_len(), 1), data(s.kv_len(), 2), data(s.kv_len(), 3));
    let (want, want_lse) = attention_prefill::reference(&q, &k, &v, s, mask, scale);
    let (qb, kb, vb) = (upload(rt, elem, &q).unwrap(), upload(rt, elem, &k).unwrap(), upload(rt, elem, &v).unwrap());
    let ops = enigma_ops::Ops::new(rt).with_options(Options { elem: Some(elem), sanitize, attention, ..Options::default() });
    let (out, lse) = ops.attention_prefill_lse(&qb, &kb, &vb, s, mask, Some(scale)).unwrap_or_else(|e| panic!("{s:?} {mask:?} scale {scale}: {e}"));
    let launches = ops.take_launches();
    assert_eq!(launches.len(), 1);
    let kernel = launches[0].kernel.clone();
    let got = download(&out, elem, s.q_len()).unwrap();
    let got_lse = download(&lse, enigma_ir::Scalar::F32, s.rows()).unwrap();
    compare(&format!("{kernel} {s:?} {mask:?} scale {scale}"), dtype, (&got, &want), (&got_lse, &want_lse));
    kernel
}

/// The output and log-sum-exp against the f64 reference's. The weights are
/// rounded to the input type before P·V (see the registry's tolerance),
/// the output once more; the log-sum-exp is f32 throughout, and `−∞`
/// exactly for a row that sees no key.
pub fn compare(what: &str, dtype: DType, (got, want): (&[f64], &[f64]), (got_lse, want_lse): (&[f64], &[f64])) {
    let tol = 3.0 * dtype.unit_roundoff();
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}: out[{i}] got {g}, want {w}");
    }
    for (i, (g, w)) in got_lse.iter().zip(want_lse).enumerate() {
        let ok = if w.is_infinite() { g == w } else { (g - w).abs() <= 1e-4 * (1.0 + w.abs()) };
        assert!(ok, "{what}: lse[{i}] got {g}, want {w}");
    }
}

/// [`check`] at the awkward sizes, each run's kernel name starting with
/// `kernel` (the selection `attention` makes on this runtime); the two
/// shapes of 100 rows under the sanitizer where `sanitize`.
pub fn check_awkward_sizes(rt: &Runtime, attention: AttentionOptions, kernel: &str, sanitize: bool) {
    let run = |dtype, s, mask, sanitize| {
        let name = check(rt, dtype, s, mask, attention, sanitize);
        assert!(name.starts_with(kernel), "{name} is not a {kernel} kernel");
    };
    for mask in [Mask::None, Mask::TopLeft] {
        run(DType::F16, shape(1, 2, 1, 1, 1, 64), mask, false);
        run(DType::BF16, shape(2, 2, 2, 7, 7, 128), mask, false);
    }
    // Grouped-query attention, 32 query heads over 8 key/value heads.
    run(DType::F16, shape(1, 32, 8, 7, 7, 64), Mask::TopLeft, false);
    run(DType::BF16, shape(1, 32, 8, 100, 100, 128), Mask::None, false);
    for mask in [Mask::None, Mask::TopLeft, Mask::BottomRight] {
        run(DType::F16, shape(1, 2, 1, 37, 100, 64), mask, false);
        // S_q > S_kv: bottom-right rows 0..63 see no key at all.
        run(DType::BF16, shape(1, 1, 1, 100, 37, 128), mask, false);
    }
    run(DType::F16, shape(1, 1, 1, 1000, 1000, 128), Mask::TopLeft, false);
    run(DType::BF16, shape(1, 1, 1, 1000, 1000, 64), Mask::None, false);
    run(DType::F16, shape(1, 2, 1, 100, 100, 64), Mask::BottomRight, sanitize);
    run(DType::BF16, shape(1, 2, 2, 150, 200, 128), Mask::TopLeft, sanitize);
}
