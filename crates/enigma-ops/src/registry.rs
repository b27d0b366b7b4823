//! The registry of library operations, for `enigma run <name>` (one run on
//! random data, checked against the f64 reference) and `enigma bench <name>`
//! (a timing loop).
//!
//! ```
//! use enigma_runtime::{Device, Runtime};
//! let rt = Runtime::new(Device::Sim).unwrap();
//! let entry = enigma_ops::registry().into_iter().find(|e| e.name == "softmax_f16").unwrap();
//! assert_eq!(entry.shape_names, ["rows", "d"]);
//! let outcome = entry.run(&rt, &[3, 100]).unwrap();
//! assert!(outcome.passed, "{outcome}");
//! ```

mod attention_entries;
mod axes;
mod entry;
mod rows;

pub use self::entry::{BenchOutcome, Entry, Prepared, BENCH_HOLD};
use self::attention_entries::{attention_batch_entry, attention_entry, attention_prefill_entry};
use self::entry::{entry, input, rounded, size, Case};
use self::axes::{axis_scan_entry, dense_conv_entry, depthwise_entry, DenseWindow};
use self::rows::{elementwise_entry, norm_entry, reduce_entry, rows_entry, scan_entry, softmax_entry};
use crate::check::Tolerance;
use crate::{Error, Mask, QuantizedWeights};
use enigma_ir::{QuantLayout, Scalar};
use enigma_kernels::library::elementwise::Elementwise;
use enigma_kernels::library::quant::{self, Format};
use enigma_kernels::library::scan::{AxisScan, ScanKind};
use enigma_kernels::library::{gemm, gemv, qmatmul, scan, DType, ReduceOp};
use enigma_kernels::TestRng;
use enigma_runtime::DeviceKind;
use std::cell::Cell;

/// Parses `8192x8192` (or `8192,8192`) into a shape.
pub fn parse_shape(text: &str) -> Result<Vec<usize>, Error> {
    text.split(['x', 'X', ',', '×'])
        .map(|p| {
            p.trim().replace('_', "").parse::<usize>().map_err(|_| Error::Argument { op: "shape".into(), message: format!("`{text}` is not a shape like 8192x8192") })
        })
        .collect()
}

/// Every registered operation.
pub fn registry() -> Vec<Entry> {
    let mut out = vec![];
    for dtype in DType::ALL {
        for op in Elementwise::ALL {
            out.push(elementwise_entry(op, dtype, false));
        }
        out.push(elementwise_entry(Elementwise::Scale, dtype, true));
    }
    for dtype in DType::ALL {
        for op in ReduceOp::ALL {
            out.push(reduce_entry(op, dtype));
        }
    }
    for dtype in DType::ALL {
        for op in ReduceOp::ALL {
            out.push(rows_entry(op, dtype));
        }
    }
    for elem in scan::SCAN_SCALARS {
        for kind in [ScanKind::Inclusive, ScanKind::Exclusive] {
            out.push(scan_entry(elem, kind));
        }
    }
    for dtype in DType::ALL {
        out.push(softmax_entry(dtype, None));
    }
    out.push(softmax_entry(DType::F32, Some(false)));
    for dtype in DType::ALL {
        out.push(norm_entry(dtype, false));
        out.push(norm_entry(dtype, true));
    }
    for dtype in DType::ALL {
        out.push(gemv_entry(dtype));
    }
    for dtype in DType::ALL {
        out.push(attention_entry(dtype, false));
        out.push(attention_entry(dtype, true));
        out.push(attention_batch_entry(dtype, false));
        out.push(attention_batch_entry(dtype, true));
    }
    for dtype in [DType::F16, DType::BF16] {
        out.push(attention_prefill_entry(dtype, Mask::None));
        out.push(attention_prefill_entry(dtype, Mask::TopLeft));
    }
    for format in Format::ALL {
        out.push(qmatmul_entry(format, QmatmulPath::Auto));
    }
    for format in [Format::Fp4, Format::Int4] {
        out.push(qmatmul_entry(format, QmatmulPath::Fused));
        out.push(qmatmul_entry(format, QmatmulPath::Fragments));
    }
    for dtype in DType::ALL {
        out.push(matmul_entry(dtype));
    }
    for dtype in DType::ALL {
        out.push(axis_scan_entry(AxisScan::Sum, dtype));
        out.push(axis_scan_entry(AxisScan::Product, dtype));
    }
    for dtype in DType::ALL {
        out.push(depthwise_entry(dtype));
        out.push(dense_conv_entry(dtype, DenseWindow::Square3));
        out.push(dense_conv_entry(dtype, DenseWindow::Pointwise));
    }
    out
}

fn matmul_entry(dtype: DType) -> Entry {
    let kernel = match dtype {
        DType::F32 => "off Metal a SIMT kernel (128×128 tiles or fewer rows for small M, 8×8 outputs per thread) unless a tile is given or tuned, else SIMD-group matrices",
        _ => "on SIMD-group matrices",
    };
    let description = format!("C = A·B, A [m, k] and B [k, n] in {dtype}, C f32, f32 accumulation {kernel} (the tile per shape: gemm::select_tile, or the tuned one)");
    entry(format!("matmul_{dtype}"), description, dtype.scalar(), &["m", "n", "k"], &[100, 70, 65], &[4096, 4096, 4096], move |rt, shape, seed| {
        let (m, n, k) = (shape[0], shape[1], shape[2]);
        let mut rng = TestRng::new(seed);
        let (a, ab) = input(rt, dtype, &mut rng, m * k, -1.0, 1.0)?;
        let (b, bb) = input(rt, dtype, &mut rng, k * n, -1.0, 1.0)?;
        let want = matmul_reference(dtype, &a, &b, m, n, k);
        // f32 sums of k products of values in [-1, 1).
        let tol = Tolerance::new(enigma_kernels::sum_bound(k as f64, k), 0.0);
        Ok(Case {
            run: Box::new(move |ops| ops.matmul(&ab, &bb, m, n, k, DType::F32)),
            out_elem: Scalar::F32,
            want,
            tol: Box::new(move |_| tol),
            bytes: ((m * k + k * n) as u64) * size(dtype) + (m * n) as u64 * 4,
        })
    })
}

/// `A·B` in f64 by [`gemm::reference`], with B transposed first (so that
/// both operands are read along K, not B with a stride of `n`) and the rows
/// of C split over the host's cores: the reference of the GPU shapes
/// (4096³ and up) is the bulk of a checked run's host time, and the
/// autotuner's.
fn matmul_reference(dtype: DType, a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let a: Vec<f64> = a.iter().map(|&x| x as f64).collect();
    let mut bt = vec![0.0; k * n];
    for (p, row) in b.chunks(n).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            bt[j * k + p] = v as f64;
        }
    }
    let cfg = gemm::GemmConfig { trans_b: true, ..gemm::GemmConfig::new(dtype, DType::F32) };
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let rows = m.div_ceil(cores).max(1);
    let mut out = vec![0.0; m * n];
    let (cfg, bt) = (&cfg, &bt[..]);
    std::thread::scope(|s| {
        for (c, a) in out.chunks_mut(rows * n).zip(a.chunks(rows * k)) {
            s.spawn(move || c.copy_from_slice(&gemm::reference(cfg, a, bt, &[], a.len() / k, n, k, 1, 1.0, 0.0)));
        }
    });
    out
}

fn gemv_entry(dtype: DType) -> Entry {
    let description = format!("y = W·x, W [m, k] in {dtype}, x and y f32, f32 accumulation");
    entry(format!("gemv_{dtype}"), description, dtype.scalar(), &["m", "k"], &[300, 1000], &[11008, 4096], move |rt, shape, seed| {
        let (m, k) = (shape[0], shape[1]);
        let mut rng = TestRng::new(seed);
        let (w, wb) = input(rt, dtype, &mut rng, m * k, -1.0, 1.0)?;
        let (x, xb) = input(rt, DType::F32, &mut rng, k, -1.0, 1.0)?;
        let want = gemv::reference(&w, &x, m, k);
        let tols: Vec<Tolerance> = w
            .chunks(k)
            .map(|row| {
                let abs: f64 = row.iter().zip(&x).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
                Tolerance::new(enigma_kernels::sum_bound(abs, k), 0.0)
            })
            .collect();
        Ok(Case {
            run: Box::new(move |ops| ops.gemv(&wb, &xb, m, k)),
            out_elem: Scalar::F32,
            want,
            tol: Box::new(move |i| tols[i]),
            bytes: (m * k) as u64 * size(dtype) + (k + m) as u64 * 4,
        })
    })
}

/// The group size the registry quantizes with: the largest of 128, 64, 32
/// that divides `k`.
pub(crate) fn registry_group(name: &str, k: usize) -> Result<usize, Error> {
    quant::GROUPS.iter().rev().copied().find(|g| k.is_multiple_of(*g)).ok_or_else(|| Error::Argument {
        op: name.to_string(),
        message: format!("k = {k} is not a multiple of 32 (the smallest quantization group)"),
    })
}

/// Which quantized matmul a registry entry runs.
#[derive(Clone, Copy, PartialEq)]
enum QmatmulPath {
    /// `Ops::qmatmul` on the format's own layout.
    Auto,
    /// `Ops::qmatmul_fused` (seed 002's fused kernel).
    Fused,
    /// `Ops::qmatmul` on weights in fragment order (`qmatmul_fragments` up to
    /// its rows, the tensor-core kernel above).
    Fragments,
}

/// `qmatmul_{format}` (`Ops::qmatmul`), `qmatmul_fused_{format}`
/// (`Ops::qmatmul_fused`, seed 002's fused kernel) or
/// `qmatmul_fragments_{format}` (`Ops::qmatmul` on fragment-ordered weights).
fn qmatmul_entry(format: Format, path: QmatmulPath) -> Entry {
    let fused = path == QmatmulPath::Fused;
    let name = match path {
        QmatmulPath::Auto => format!("qmatmul_{format}"),
        QmatmulPath::Fused => format!("qmatmul_fused_{format}"),
        QmatmulPath::Fragments => format!("qmatmul_fragments_{format}"),
    };
    let layout = match (format.has_biases(), path) {
        (true, _) => "MLX's [n][k/8] layout with f16 scales and biases",
        (false, QmatmulPath::Fragments) => "the tensor cores' fragment order (k a multiple of 64, n of 16) with f16 scales",
        (false, _) => "seed 002's [k/8][n] layout with f16 scales",
    };
    let kernel = match path {
        QmatmulPath::Fused => ", seed 002's fused kernel (B dequantized per SIMD group through an 8×8 fragment)",
        QmatmulPath::Fragments => ", the decode row's tensor-core kernel up to 16 rows and the tensor-core GEMM above",
        QmatmulPath::Auto => "",
    };
    let default_shape: &[usize] = if path == QmatmulPath::Fragments { &[3, 96, 256] } else { &[3, 100, 256] };
    let quant_layout = if path == QmatmulPath::Fragments { QuantLayout::Fragments } else { QuantLayout::Rows };
    let description = format!(
        "C[m, n] = A[m, k] · dequant(B), A f16, B {format} in {layout} per group of 128 (64 or 32 when k needs), C f16, f32 accumulation{kernel}; on a GPU each run reads the next of 200 MB of weight copies"
    );
    // A shape may add the group after M, N and K (`enigma run … --group 64`).
    Entry {
        optional_dim: Some("group"),
        ..entry(name.clone(), description, Scalar::F16, &["m", "n", "k"], default_shape, &[1, 11008, 4096], move |rt, shape, seed| {
            let (m, n, k) = (shape[0], shape[1], shape[2]);
            let group = match shape.get(3) {
                Some(&group) => group,
                None => registry_group(&name, k)?,
            };
            let mut rng = TestRng::new(seed);
            let (a, ab) = input(rt, DType::F16, &mut rng, m * k, -1.0, 1.0)?;
            let q = quant::quantize(format, &rng.vec(k * n, -1.0, 1.0), k, n, group)?;
            let w = q.dequantize()?;
            // On a GPU, copies of the weights spanning four times a 50 MB L2,
            // one per run in turn, so that timed runs read them from DRAM as a
            // decode step does (one copy would stay in L2 between runs).
            let weight_bytes = k * n / 2 + k / group * n * 2 * if format.has_biases() { 2 } else { 1 };
            let copies = if rt.device().kind == DeviceKind::Simulator { 1 } else { (200usize << 20).div_ceil(weight_bytes).clamp(1, 64) };
            let weights = (0..copies).map(|_| QuantizedWeights::upload_in(rt, &q, quant_layout)).collect::<Result<Vec<_>, Error>>()?;
            let next = Cell::new(0usize);
            let want = qmatmul::reference(&a, &w, m, n, k);
            // f32 sums of k products (each exact in f32: an f16 times a
            // 4-bit value times an f16 scale), then one rounding to f16. With
            // many rows the tensor-core kernel stages each dequantized weight
            // in f16: one more rounding per product. MLX's affine kernel sums
            // scale · code · a and bias · a apart: their magnitudes bound it.
            // The decode kernel (M up to DECODE_ROWS) sums products in f16
            // sixteen at a time (`qmatmul::f16_product_error`).
            let tensor_cores = fused || path == QmatmulPath::Fragments || (m > qmatmul::DECODE_ROWS as usize && !format.has_biases());
            let staging = if tensor_cores {
                DType::F16.unit_roundoff()
            } else {
                qmatmul::f16_product_error(format)
            };
            let tols: Vec<Tolerance> = q.abs_products(&a, m).into_iter().map(|abs| rounded(DType::F16, enigma_kernels::sum_bound(abs, k) + abs * staging, 0.0)).collect();
            let bytes = (m * k * 2 + weight_bytes + m * n * 2) as u64;
            Ok(Case {
                run: Box::new(move |ops| {
                    let i = next.get();
                    next.set(i + 1);
                    let w = &weights[i % weights.len()];
                    if fused {
                        ops.qmatmul_fused(&ab, w, m, DType::F16)
                    } else {
                        ops.qmatmul(&ab, w, m, DType::F16)
                    }
                }),
                out_elem: Scalar::F16,
                want,
                tol: Box::new(move |i| tols[i]),
                bytes,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_shapes_parse() {
        let reg = registry();
        let mut names = std::collections::HashSet::new();
        for e in &reg {
            assert!(names.insert(e.name.clone()), "duplicate {}", e.name);
            assert_eq!(e.default_shape.len(), e.shape_names.len(), "{}", e.name);
            assert_eq!(e.bench_shape.len(), e.shape_names.len(), "{}", e.name);
        }
        assert_eq!(parse_shape("8192x8192").unwrap(), vec![8192, 8192]);
        assert_eq!(parse_shape("32,2048,128").unwrap(), vec![32, 2048, 128]);
        assert!(parse_shape("8192xx").is_err());
    }

    /// A product's shape counts its largest matrix, not m·n·k: 4096³ is
    /// 2^24 elements per matrix; 70000 × 70000 outputs are too many.
    #[test]
    fn a_product_shape_counts_its_largest_matrix() {
        let reg = registry();
        let matmul = reg.iter().find(|e| e.name == "matmul_f16").unwrap();
        assert_eq!(matmul.shape(&[4096, 4096, 4096]).unwrap(), &[4096, 4096, 4096]);
        assert_eq!(matmul.elements(&[16, 11008, 4096]), 11008 * 4096);
        assert!(matmul.shape(&[70000, 70000, 2]).unwrap_err().to_string().contains("more than 2^32 - 1 elements"));
        let softmax = reg.iter().find(|e| e.name == "softmax_f32").unwrap();
        assert_eq!(softmax.elements(&[3, 5]), 15);
    }

    #[test]
    fn the_matmul_reference_is_the_gemm_reference_whatever_the_split() {
        for (m, n, k) in [(1, 1, 1), (37, 5, 13), (3, 40, 7), (130, 9, 2)] {
            let a = enigma_kernels::test_data(m * k, 1);
            let b = enigma_kernels::test_data(k * n, 2);
            let f = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<f64>>();
            let direct = gemm::reference(&gemm::GemmConfig::new(DType::F32, DType::F32), &f(&a), &f(&b), &[], m, n, k, 1, 1.0, 0.0);
            assert_eq!(matmul_reference(DType::F32, &a, &b, m, n, k), direct, "{m}x{n}x{k}");
        }
    }
}
