//! Registry entries of the element-wise, reduction, scan, softmax and
//! normalisation operations.

use super::entry::{entry, input, rounded, size, Case, Entry};
use crate::check::Tolerance;
use crate::upload;
use enigma_ir::Scalar;
use enigma_kernels::library::elementwise::Elementwise;
use enigma_kernels::library::scan::ScanKind;
use enigma_kernels::library::{elementwise, norm, reduce, scan, softmax, DType, ReduceOp};
use enigma_kernels::TestRng;
use enigma_runtime::Buffer;

pub(super) fn elementwise_entry(op: Elementwise, dtype: DType, force_vec4: bool) -> Entry {
    let name = if force_vec4 { format!("scale_vec4_{dtype}") } else { format!("{op}_{dtype}") };
    let description = match op {
        Elementwise::Scale if force_vec4 => format!("y = x · 0.75 with 4-wide {dtype} loads (seed 000 Pattern B)"),
        Elementwise::Scale => format!("y = x · 0.75 over {dtype}"),
        Elementwise::Add => format!("y = a + b over {dtype}"),
        Elementwise::Mul => format!("y = a · b over {dtype}"),
        Elementwise::Div => format!("y = a / b over {dtype} (b in [0.5, 4))"),
        Elementwise::Relu => format!("y = max(x, 0) over {dtype}"),
        Elementwise::Silu => format!("y = x · sigmoid(x) over {dtype}"),
        Elementwise::Gelu => format!("GELU (tanh form) over {dtype}"),
        Elementwise::GeluErf => format!("GELU (erf form, erfc by Abramowitz and Stegun 7.1.26) over {dtype}"),
        Elementwise::Sigmoid => format!("y = 1 / (1 + exp(-x)) over {dtype}"),
        Elementwise::Exp => format!("y = exp(x) over {dtype}"),
        Elementwise::Log => format!("y = log(x) over {dtype} (x in (0, 8))"),
    };
    // The logarithm on its domain; the others around 0.
    let (lo, hi) = if op == Elementwise::Log { (1e-3, 8.0) } else { (-4.0, 4.0) };
    let default = if force_vec4 { 65_536 } else { 65_539 };
    let mut e = entry(name, description, dtype.scalar(), &["n"], &[default], &[1 << 24], move |rt, shape, seed| {
        let n = shape[0];
        let mut rng = TestRng::new(seed);
        let (x, xb) = input(rt, dtype, &mut rng, n, lo, hi)?;
        // A divisor away from 0.
        let (b_lo, b_hi) = if op == Elementwise::Div { (0.5, 4.0) } else { (lo, hi) };
        let b = if op.is_binary() { Some(input(rt, dtype, &mut rng, n, b_lo, b_hi)?) } else { None };
        let want = elementwise::reference(op, &x, b.as_ref().map(|b| &b.0[..]), 0.75);
        let bb = b.map(|b| b.1);
        let reads = if op.is_binary() { 2 } else { 1 };
        Ok(Case {
            run: Box::new(move |ops| ops.elementwise(op, &xb, bb.as_ref(), n, 0.75)),
            out_elem: dtype.scalar(),
            want,
            tol: Box::new(move |_| rounded(dtype, 1e-6, 2e-6)),
            bytes: (reads + 1) * n as u64 * size(dtype),
        })
    });
    if force_vec4 {
        e.vectorize = Some(true);
    }
    e
}

pub(super) fn reduce_entry(op: ReduceOp, dtype: DType) -> Entry {
    let description = format!("{op} of a vector of {dtype} (f32 result; two passes)");
    entry(format!("{op}_{dtype}"), description, dtype.scalar(), &["n"], &[100_003], &[1 << 28], move |rt, shape, seed| {
        let n = shape[0];
        let (x, xb) = input(rt, dtype, &mut TestRng::new(seed), n, -1.0, 1.0)?;
        let want = vec![reduce::reference(op, &x)];
        let tol = if op == ReduceOp::Sum { Tolerance::new(enigma_kernels::sum_tolerance(&x), 0.0) } else { Tolerance::exact() };
        Ok(Case {
            run: Box::new(move |ops| ops.reduce(op, &xb, n)),
            out_elem: Scalar::F32,
            want,
            tol: Box::new(move |_| tol),
            bytes: n as u64 * size(dtype),
        })
    })
}

pub(super) fn rows_entry(op: ReduceOp, dtype: DType) -> Entry {
    let description = format!("{op} of each row of a [rows, d] {dtype} matrix (f32 results)");
    entry(format!("{op}_rows_{dtype}"), description, dtype.scalar(), &["rows", "d"], &[64, 1000], &[8192, 8192], move |rt, shape, seed| {
        let (rows, d) = (shape[0], shape[1]);
        let (x, xb) = input(rt, dtype, &mut TestRng::new(seed), rows * d, -1.0, 1.0)?;
        let want = reduce::reference_rows(op, &x, d);
        let tols: Vec<Tolerance> = x
            .chunks(d)
            .map(|row| if op == ReduceOp::Sum { Tolerance::new(enigma_kernels::sum_tolerance(row), 0.0) } else { Tolerance::exact() })
            .collect();
        Ok(Case {
            run: Box::new(move |ops| ops.reduce_rows(op, &xb, rows, d)),
            out_elem: Scalar::F32,
            want,
            tol: Box::new(move |i| tols[i]),
            bytes: (rows * d) as u64 * size(dtype) + rows as u64 * 4,
        })
    })
}

pub(super) fn scan_entry(elem: Scalar, kind: ScanKind) -> Entry {
    let description = format!("{} prefix sum of {elem} (block scan, scan of block totals, add-back)", kind.name());
    entry(format!("prefix_sum_{}_{elem}", kind.name()), description, elem, &["n"], &[100_003], &[1 << 26], move |rt, shape, seed| {
        let n = shape[0];
        let mut rng = TestRng::new(seed);
        let (want, tols, buf): (Vec<f64>, Vec<Tolerance>, Buffer) = match elem {
            Scalar::F32 => {
                let x = rng.vec(n, -1.0, 1.0);
                let want = scan::reference(kind, &x.iter().map(|&v| v as f64).collect::<Vec<_>>());
                let levels = 8.0 * ((n + 2) as f64).log2();
                let mut running = 0.0;
                let tols = x
                    .iter()
                    .map(|&v| {
                        running += (v as f64).abs();
                        Tolerance::new(running * f32::EPSILON as f64 * levels + 1e-30, 0.0)
                    })
                    .collect();
                (want, tols, upload(rt, elem, &x)?)
            }
            _ => {
                // Integers: small values, exact (u32 wraps like the kernel).
                let x: Vec<f32> = (0..n).map(|_| (rng.next_u64() % 2001) as f32 - if elem == Scalar::I32 { 1000.0 } else { 0.0 }).collect();
                let want = if elem == Scalar::U32 {
                    scan::reference_u32(kind, &x.iter().map(|&v| v as u32).collect::<Vec<_>>()).iter().map(|&v| v as f64).collect()
                } else {
                    scan::reference(kind, &x.iter().map(|&v| v as f64).collect::<Vec<_>>())
                };
                (want, vec![Tolerance::exact(); n], upload(rt, elem, &x)?)
            }
        };
        Ok(Case {
            run: Box::new(move |ops| ops.prefix_sum(&buf, n, kind)),
            out_elem: elem,
            want,
            tol: Box::new(move |i| tols[i]),
            bytes: 2 * n as u64 * elem.size_bytes() as u64,
        })
    })
}

pub(super) fn softmax_entry(dtype: DType, cache: Option<bool>) -> Entry {
    let online = cache == Some(false);
    let name = if online { format!("softmax_online_{dtype}") } else { format!("softmax_{dtype}") };
    let description = if online {
        format!("row softmax of {dtype}, streaming form (online maximum, then normalisation pass)")
    } else {
        format!("row softmax of {dtype}, one threadgroup per row")
    };
    let mut e = entry(name, description, dtype.scalar(), &["rows", "d"], &[64, 1000], &[8192, 8192], move |rt, shape, seed| {
        let (rows, d) = (shape[0], shape[1]);
        let (x, xb) = input(rt, dtype, &mut TestRng::new(seed), rows * d, -8.0, 8.0)?;
        let want = softmax::reference(&x, d);
        Ok(Case {
            run: Box::new(move |ops| ops.softmax(&xb, rows, d)),
            out_elem: dtype.scalar(),
            want,
            tol: Box::new(move |_| rounded(dtype, 1e-9, 1e-5)),
            bytes: 2 * (rows * d) as u64 * size(dtype),
        })
    });
    e.cache_rows = cache;
    e
}

pub(super) fn norm_entry(dtype: DType, layer: bool) -> Entry {
    let (name, description) = if layer {
        (format!("layer_norm_{dtype}"), format!("LayerNorm of each row of {dtype}, weight and bias, eps = 1e-5"))
    } else {
        (format!("rms_norm_{dtype}"), format!("RMSNorm of each row of {dtype}, weight, eps = 1e-5"))
    };
    entry(name, description, dtype.scalar(), &["rows", "d"], &[64, 1000], &[8192, 8192], move |rt, shape, seed| {
        let (rows, d) = (shape[0], shape[1]);
        let mut rng = TestRng::new(seed);
        let (x, xb) = input(rt, dtype, &mut rng, rows * d, -2.0, 3.0)?;
        let (w, wb) = input(rt, dtype, &mut rng, d, 0.5, 1.5)?;
        let eps = 1e-5f32;
        let bytes = 2 * (rows * d) as u64 * size(dtype) + d as u64 * size(dtype) * if layer { 2 } else { 1 };
        if layer {
            let (b, bb) = input(rt, dtype, &mut rng, d, -0.5, 0.5)?;
            let want = norm::reference_layer(&x, &w, &b, d, eps);
            Ok(Case {
                run: Box::new(move |ops| ops.layer_norm(&xb, &wb, &bb, rows, d, eps)),
                out_elem: dtype.scalar(),
                want,
                tol: Box::new(move |_| rounded(dtype, 2e-6, 1e-5)),
                bytes,
            })
        } else {
            let want = norm::reference_rms(&x, &w, d, eps);
            Ok(Case {
                run: Box::new(move |ops| ops.rms_norm(&xb, &wb, rows, d, eps)),
                out_elem: dtype.scalar(),
                want,
                tol: Box::new(move |_| rounded(dtype, 1e-6, 1e-5)),
                bytes,
            })
        }
    })
}
