//! RMSNorm and LayerNorm at awkward row lengths and counts, f32/f16/bf16,
//! scalar and vector accesses, with a weight and bias and with the
//! identity ones (what `enigma.ops` passes for `weight=None`,
//! `bias=None`), under the simulator's sanitizer, against the f64
//! references; and which form (`library::norm::plan`) each shape takes.

use enigma_ops::library::norm::{self, NormForm};
use enigma_ops::library::softmax::RowOptions;
use enigma_ops::{download, quantize, upload, CheckOutcome, DType, Ops, Options, Tolerance};
use enigma_runtime::{Device, Runtime};

const LENGTHS: [usize; 9] = [1, 7, 31, 32, 33, 100, 1024, 1025, 4096];
const EPS: f32 = 1e-5;

/// The rows each length runs with: 1, 3 and 1000 up to 1024 elements (a
/// last threadgroup with rows past the end, in the lanes form); 1 and 3
/// for the longer rows (a threadgroup per row).
fn row_counts(d: usize) -> &'static [usize] {
    if d <= 1024 {
        &[1, 3, 1000]
    } else {
        &[1, 3]
    }
}

fn values(n: usize, seed: usize, lo: f32, hi: f32, dtype: DType) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n).map(|i| lo + (hi - lo) * (((i * 7919 + seed * 104_729) % 1009) as f32 / 1008.0)).collect();
    quantize(dtype, &mut v);
    v
}

#[test]
fn norms_match_the_f64_reference_at_awkward_shapes() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let mut runs = 0;
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for vectorize in [Some(false), None] {
            let ops = Ops::new(&rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), vectorize, ..Options::default() });
            for d in LENGTHS {
                for &rows in row_counts(d) {
                    let x = values(rows * d, d, -2.0, 3.0, dtype);
                    for affine in [true, false] {
                        let (w, b) = if affine { (values(d, 1, 0.5, 1.5, dtype), values(d, 2, -0.5, 0.5, dtype)) } else { (vec![1.0; d], vec![0.0; d]) };
                        let [xb, wb, bb] = [&x, &w, &b].map(|v| upload(&rt, dtype.scalar(), v).unwrap());
                        let what = format!("{dtype} rows {rows} d {d} vectorize {vectorize:?} affine {affine}");
                        let tol = Tolerance::new(2e-6 + dtype.underflow_error() * 1.01, 1e-5 + dtype.unit_roundoff() * 1.01);
                        let y = ops.rms_norm(&xb, &wb, rows, d, EPS).unwrap();
                        let got = download(&y, dtype.scalar(), rows * d).unwrap();
                        let outcome = CheckOutcome::compare(&format!("rms_norm {what}"), &[rows, d], &got, &norm::reference_rms(&x, &w, d, EPS), |_| tol);
                        assert!(outcome.passed, "{outcome}");
                        let y = ops.layer_norm(&xb, &wb, &bb, rows, d, EPS).unwrap();
                        let got = download(&y, dtype.scalar(), rows * d).unwrap();
                        let outcome = CheckOutcome::compare(&format!("layer_norm {what}"), &[rows, d], &got, &norm::reference_layer(&x, &w, &b, d, EPS), |_| tol);
                        assert!(outcome.passed, "{outcome}");
                        // Short rows take the lanes form (`_l<lanes>_`),
                        // long ones a threadgroup each.
                        let short = d * dtype.size_bytes() as usize <= norm::LANE_ROW_BYTES && (vectorize.is_none() || d <= 256);
                        for launch in ops.take_launches() {
                            assert_eq!(launch.kernel.contains("_l"), short, "{what}: ran {}", launch.kernel);
                            let wide = vectorize.is_none() && short && dtype != DType::F32 && d % 8 == 0;
                            assert_eq!(launch.kernel.contains("_vec8"), wide, "{what}: ran {}", launch.kernel);
                        }
                        runs += 2;
                    }
                }
            }
        }
    }
    assert_eq!(runs, 3 * 2 * (7 * 3 + 2 * 2) * 2 * 2);
}

#[test]
fn the_plan_chooses_the_form_from_the_row_and_the_type() {
    let lanes = |dtype, rows, d, vec| match norm::plan(false, dtype, rows, d, vec, RowOptions::threads(256)).unwrap() {
        norm::NormPlan { form: NormForm::Lanes(c), dispatch, .. } => Some((c.vec, c.lanes, c.items, dispatch.size[0])),
        _ => None,
    };
    // The benchmark's rows: 1024 halves as 128 words over 32 lanes, 8 rows
    // to a threadgroup of 256.
    assert_eq!(lanes(DType::F16, 4096, 1024, 8), Some((8, 32, 4, 512)));
    assert_eq!(lanes(DType::BF16, 4096, 1024, 4), Some((4, 32, 8, 512)));
    // 1024 floats (4 KiB) keep a threadgroup per row; 512 fit.
    assert_eq!(lanes(DType::F32, 4096, 1024, 4), None);
    assert_eq!(lanes(DType::F32, 4096, 512, 4), Some((4, 32, 4, 512)));
    // Short rows share a SIMD group: 7 elements on 8 lanes, 32 rows to a
    // threadgroup; one element, one lane.
    assert_eq!(lanes(DType::F32, 1000, 7, 1), Some((1, 8, 1, 32)));
    assert_eq!(lanes(DType::F16, 3, 1, 1), Some((1, 1, 1, 1)));
    // Long rows, scalar rows past 8 loads a lane, and the streaming form
    // asked for: a threadgroup per row.
    assert_eq!(lanes(DType::F16, 8, 8192, 8), None);
    assert_eq!(lanes(DType::F16, 8, 1000, 1), None);
    assert!(matches!(norm::plan(true, DType::F16, 8, 64, 8, RowOptions { threads: 256, cache: false }).unwrap().form, NormForm::Threadgroup(c) if c.items == 0 && c.vec == 4));
    // Words of 8 need 16-bit rows of a multiple of 8.
    assert!(norm::plan(false, DType::F32, 8, 64, 8, RowOptions::threads(256)).is_err());
    assert!(norm::plan(false, DType::F16, 8, 60, 8, RowOptions::threads(256)).is_err());
    // Other widths are refused.
    assert!(norm::plan(false, DType::F16, 8, 64, 16, RowOptions::threads(256)).is_err());
    assert!(norm::plan(false, DType::F16, 8, 64, 2, RowOptions::threads(256)).is_err());
}
