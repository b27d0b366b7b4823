//! Binary element-wise operations over NumPy-broadcast shapes
//! (`Ops::elementwise_broadcast`) against an f64 loop over the output's
//! coordinates written here, for every element type, under the sanitizer.

use enigma_ir::Scalar;
use enigma_ops::{download, quantize, upload, DType, Elementwise, Ops, Options};
use enigma_runtime::{Device, Runtime};

/// The element of an array of `shape` that output coordinate `coord` (of
/// the broadcast shape, rank `coord.len()`) reads.
fn source(shape: &[usize], coord: &[usize]) -> usize {
    let skip = coord.len() - shape.len();
    shape.iter().zip(&coord[skip..]).fold(0, |at, (&size, &c)| at * size + if size == 1 { 0 } else { c })
}

#[test]
fn add_and_mul_broadcast_as_numpy() {
    let rt = Runtime::new(Device::Sim).unwrap();
    // Each access pattern of the broadcast kernel and its edges: row and
    // column vectors against a matrix (inner a multiple of 4, so vector
    // loads, and not), scalars on either side, outer dimensions that do
    // not merge, a row of one element, more rows than one threadgroup
    // pass covers, and shapes that merge to a flat walk.
    let cases: [(&[usize], &[usize], &[usize]); 16] = [
        (&[4, 1, 3], &[5, 1], &[4, 5, 3]),
        (&[7], &[1], &[7]),
        (&[2, 3, 1000], &[1000], &[2, 3, 1000]),
        (&[1], &[3, 1], &[3, 1]),
        (&[], &[2, 2], &[2, 2]),
        (&[6, 1], &[1, 7], &[6, 7]),
        (&[3, 5], &[3, 5], &[3, 5]),
        (&[5, 12], &[12], &[5, 12]),
        (&[9, 12], &[9, 1], &[9, 12]),
        (&[9, 1], &[9, 12], &[9, 12]),
        (&[1], &[2, 3, 8], &[2, 3, 8]),
        (&[2, 3, 8], &[], &[2, 3, 8]),
        (&[3, 1, 4, 8], &[1, 5, 1, 8], &[3, 5, 4, 8]),
        (&[1300, 1], &[1300, 3], &[1300, 3]),
        (&[3, 5], &[1, 3, 5], &[1, 3, 5]),
        (&[1, 1], &[1], &[1, 1]),
    ];
    for dtype in DType::ALL {
        let ops = Ops::new(&rt).with_options(Options { sanitize: true, elem: Some(dtype.scalar()), ..Options::default() });
        for (sa, sb, want_shape) in cases {
            let na: usize = sa.iter().product();
            let nb: usize = sb.iter().product();
            let mut a: Vec<f32> = (0..na).map(|i| (i % 17) as f32 * 0.25 - 2.0).collect();
            let mut b: Vec<f32> = (0..nb).map(|i| (i % 11) as f32 * 0.5 - 2.75).collect();
            quantize(dtype, &mut a);
            quantize(dtype, &mut b);
            let (ab, bb) = (upload(&rt, dtype.scalar(), &a).unwrap(), upload(&rt, dtype.scalar(), &b).unwrap());
            for op in [Elementwise::Add, Elementwise::Mul, Elementwise::Div] {
                let (y, shape) = ops.elementwise_broadcast(op, &ab, &bb, sa, sb).unwrap();
                assert_eq!(shape, want_shape);
                let n: usize = shape.iter().product();
                let got = download(&y, dtype.scalar(), n).unwrap();
                for (i, &g) in got.iter().enumerate() {
                    let mut coord = vec![0; shape.len()];
                    let mut rest = i;
                    for d in (0..shape.len()).rev() {
                        coord[d] = rest % shape[d];
                        rest /= shape[d];
                    }
                    let (x, z) = (a[source(sa, &coord)] as f64, b[source(sb, &coord)] as f64);
                    let want = op.reference_one(x, z, 1.0);
                    // One rounding to the type (the inputs are exact in it; a
                    // quotient rounds twice, to f32 and then to the type).
                    assert!((g - want).abs() <= want.abs() * (dtype.unit_roundoff() + 1e-7), "{op} {dtype} {sa:?} {sb:?} at {i}: {g} vs {want}");
                }
            }
        }
    }
}

#[test]
fn shapes_that_do_not_broadcast_are_refused() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let x = upload(&rt, Scalar::F32, &[1.0; 12]).unwrap();
    let err = Ops::new(&rt).elementwise_broadcast(Elementwise::Add, &x, &x, &[3, 4], &[3]).unwrap_err().to_string();
    assert!(err.contains("add_broadcast") && err.contains("[3, 4] and [3] do not broadcast"), "{err}");
    let err = Ops::new(&rt).elementwise_broadcast(Elementwise::Relu, &x, &x, &[3], &[3]).unwrap_err().to_string();
    assert!(err.contains("not a binary operation"), "{err}");
    // Eight outer dimensions that no merge removes: more than the kernel takes.
    let y = upload(&rt, Scalar::F32, &[1.0; 48]).unwrap();
    let err = Ops::new(&rt).elementwise_broadcast(Elementwise::Add, &y, &y, &[2, 1, 2, 1, 2, 1, 2, 1, 3], &[1, 2, 1, 2, 1, 2, 1, 2, 3]).unwrap_err().to_string();
    assert!(err.contains("8 outer dimensions") && err.contains("at most 6"), "{err}");
}
