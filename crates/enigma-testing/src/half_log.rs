//! `log` of every finite positive float16 and bfloat16 value (and of ±0,
//! `+∞`, NaN and negative values) through `Ops::elementwise` with scalar,
//! 4-wide and packed 16-byte kernels, each result against the f64 `ln` of
//! its input within the element-wise bound (`1e-6 + underflow` absolute
//! plus `2e-6 + unit roundoff` relative, the one `enigma-ops`' element-wise
//! tests hold every operation to), for the simulator's test
//! (`enigma-ops/tests/elementwise_packed.rs`) and a CUDA GPU's
//! (`enigma-cuda/tests/library.rs`).

use enigma_ops::{download, upload_bytes, DType, Elementwise, Ops, Options};
use enigma_runtime::Runtime;

/// The bits of the values checked in `dtype` (f16 or bf16): every finite
/// positive one, then ±0, `+∞`, a NaN, `-1` and the negative value of
/// least magnitude, then ones up to a multiple
/// of 8 elements (so the packed kernel can run).
fn inputs(dtype: DType) -> Vec<u16> {
    // (largest finite, +∞, NaN, -1, 1)
    let (last, inf, nan, minus_one, one) = match dtype {
        DType::F16 => (0x7bff, 0x7c00, 0x7e00, 0xbc00, 0x3c00),
        _ => (0x7f7f, 0x7f80, 0x7fc0, 0xbf80, 0x3f80),
    };
    let mut bits: Vec<u16> = (1..=last).collect();
    bits.extend([0, 0x8000, inf, nan, minus_one, 0x8001]);
    bits.resize(bits.len().div_ceil(8) * 8, one);
    bits
}

/// Checks `log` on `rt` (module docs), under the sanitizer when `sanitize`
/// (the simulator); panics naming the first value outside the bound.
pub fn check_log_of_every_half_value(rt: &Runtime, sanitize: bool) {
    for dtype in [DType::F16, DType::BF16] {
        let bits = inputs(dtype);
        let n = bits.len();
        let xb = upload_bytes(rt, bits.iter().flat_map(|b| b.to_le_bytes()).collect()).unwrap();
        let x = download(&xb, dtype.scalar(), n).unwrap();
        // Scalar, 4-wide and (left to choose, n % 8 == 0) packed kernels.
        for (vectorize, form) in [(Some(false), ""), (Some(true), "_vec4"), (None, "_vec8")] {
            let ops = Ops::new(rt).with_options(Options { sanitize, elem: Some(dtype.scalar()), vectorize, ..Options::default() });
            let y = ops.elementwise(Elementwise::Log, &xb, None, n, 1.0).unwrap();
            let kernel = ops.take_launches().pop().unwrap().kernel;
            assert_eq!(kernel, format!("log_{dtype}{form}"));
            let got = download(&y, dtype.scalar(), n).unwrap();
            for (&v, &g) in x.iter().zip(&got) {
                let want = v.ln();
                let ok = if v.is_finite() && v > 0.0 {
                    (g - want).abs() <= 1e-6 + dtype.underflow_error() * 1.01 + want.abs() * (2e-6 + dtype.unit_roundoff() * 1.01)
                } else {
                    // ln's own: −∞ at ±0, +∞ at +∞, NaN below 0 and for NaN.
                    g == want || (g.is_nan() && want.is_nan())
                };
                assert!(ok, "{kernel}: log({v:e}) = {g:e}, want {want:e}");
            }
        }
    }
}
