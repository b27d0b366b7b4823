//! `Ops::copy_into` (the copy behind `out=`) on the simulator under the
//! sanitizer: every element type's bits arrive unchanged (NaN payloads,
//! negative zero, infinities, integer extremes), the destination's bytes
//! past the copied elements are left as they were, and a destination too
//! small is an error naming the sizes.

use enigma_ir::Scalar;
use enigma_ops::{upload_bytes, Ops, Options};
use enigma_runtime::{Device, Runtime};

/// `n` elements of `elem` whose bit patterns include the awkward ones.
fn awkward_bits(elem: Scalar, n: usize) -> Vec<u8> {
    let size = elem.size_bytes() as usize;
    let specials: [u32; 6] = [0x7fc0_1234, 0x8000_0000, 0x7f80_0000, 0xffff_ffff, 0x8000_0001, 0x0000_0001];
    (0..n)
        .flat_map(|i| {
            let word = if i < specials.len() { specials[i] } else { (i as u32).wrapping_mul(2_654_435_761) };
            let word = if size == 2 { (word >> 16) ^ (word & 0xffff) } else { word };
            word.to_le_bytes()[..size].to_vec()
        })
        .collect()
}

#[test]
fn copies_are_bit_exact_and_stay_in_bounds() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ops = Ops::new(&rt).with_options(Options { sanitize: true, ..Options::default() });
    for elem in [Scalar::F32, Scalar::F16, Scalar::BF16, Scalar::I32, Scalar::U32] {
        let size = elem.size_bytes() as usize;
        for n in [1usize, 7, 257, 1000] {
            let data = awkward_bits(elem, n);
            let src = upload_bytes(&rt, data.clone()).unwrap();
            // A destination of exactly the elements: every one written, no findings.
            let exact = rt.buffer_bytes(n * size).unwrap();
            ops.copy_into(elem, &src, &exact, n).unwrap();
            assert_eq!(exact.read_bytes().unwrap(), data, "{elem} n={n}: copied bits differ");
            for launch in ops.take_launches() {
                assert!(launch.report.findings.is_empty(), "{elem} n={n}: sanitizer findings {:?}", launch.report.findings);
            }
            // A destination 3 elements longer, filled with 0xAB: those stay
            // (the sanitizer notes them as never written, and nothing else).
            let sentinel = vec![0xABu8; (n + 3) * size];
            let dst = rt.buffer_bytes(sentinel.len()).unwrap();
            dst.write_bytes(0, &sentinel).unwrap();
            ops.copy_into(elem, &src, &dst, n).unwrap();
            let got = dst.read_bytes().unwrap();
            assert_eq!(&got[..n * size], &data[..], "{elem} n={n}: copied bits differ");
            assert!(got[n * size..].iter().all(|&b| b == 0xAB), "{elem} n={n}: bytes past the copy changed");
            for launch in ops.take_launches() {
                assert!(launch.report.findings.iter().all(|f| format!("{:?}", f.kind) == "Coverage"), "{elem} n={n}: {:?}", launch.report.findings);
            }
        }
    }
}

#[test]
fn a_destination_too_small_is_refused() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let ops = Ops::new(&rt);
    let src = upload_bytes(&rt, vec![0; 40]).unwrap();
    let dst = rt.buffer_bytes(36).unwrap();
    let err = ops.copy_into(Scalar::F32, &src, &dst, 10).unwrap_err().to_string();
    assert!(err.contains("copy_f32") && err.contains("`dst` has 36 bytes, needs 40"), "{err}");
    // No elements: nothing to check against, no dispatch.
    ops.copy_into(Scalar::F32, &src, &dst, 0).unwrap();
    assert!(ops.take_launches().is_empty());
}
