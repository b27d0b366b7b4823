//! The Rust API on hand-computed cases, the numerically hard inputs the
//! random registry data does not reach, and the typed errors.

use enigma_ir::{Scalar, Type};
use enigma_ops::{download, upload, CheckOutcome, Error, GemvOptions, Ops, Options, ReduceOp, ReduceOptions, RowOptions, ScanKind, Tolerance};
use enigma_runtime::{Device, Runtime};

fn sim() -> Runtime {
    Runtime::new(Device::Sim).unwrap()
}

/// `got` within `tol · (1 + |want|)` of `want`, element by element: the
/// registry's rule (`CheckOutcome::compare`) with `tol` absolute and relative.
fn close(got: &[f64], want: &[f64], tol: f64) {
    let outcome = CheckOutcome::compare("by hand", &[want.len()], got, want, |_| Tolerance::new(tol, tol));
    assert!(outcome.passed, "{outcome}");
}

#[test]
fn softmax_sum_and_prefix_sum_by_hand() {
    let rt = sim();
    // Typed buffers run the scalar kernels.
    let x = rt.buffer_from(&[1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0]).unwrap();
    let y = enigma_ops::softmax(&rt, &x, 2, 3).unwrap().to_vec::<f32>().unwrap();
    let e = [1f64.exp(), 2f64.exp(), 3f64.exp()];
    let s: f64 = e.iter().sum();
    let want = [e[0] / s, e[1] / s, e[2] / s, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0];
    close(&y.iter().map(|&v| v as f64).collect::<Vec<_>>(), &want, 1e-6);

    // 1 + 2 + … + 4097 = 4097 · 4098 / 2, exact in f32.
    let values: Vec<f32> = (1..=4097).map(|i| i as f32).collect();
    let x = upload(&rt, Scalar::F32, &values).unwrap();
    assert_eq!(enigma_ops::sum(&rt, &x, 4097).unwrap().to_vec::<f32>().unwrap(), [8_394_753.0]);
    assert_eq!(enigma_ops::max(&rt, &x, 4097).unwrap().to_vec::<f32>().unwrap(), [4097.0]);
    assert_eq!(enigma_ops::min(&rt, &x, 4097).unwrap().to_vec::<f32>().unwrap(), [1.0]);

    let ones = upload(&rt, Scalar::U32, &[1.0; 70_001]).unwrap();
    let options = Options::threads(32); // three levels of blocks
    let inc = download(&enigma_ops::prefix_sum_with(&rt, &ones, 70_001, ScanKind::Inclusive, &options).unwrap(), Scalar::U32, 70_001).unwrap();
    let exc = download(&enigma_ops::prefix_sum_with(&rt, &ones, 70_001, ScanKind::Exclusive, &options).unwrap(), Scalar::U32, 70_001).unwrap();
    assert!(inc.iter().enumerate().all(|(i, &v)| v == (i + 1) as f64), "inclusive");
    assert!(exc.iter().enumerate().all(|(i, &v)| v == i as f64), "exclusive");
}

#[test]
fn softmax_is_stable_for_large_and_infinite_inputs() {
    let rt = sim();
    // exp(1000) overflows f32 (and f64): the maximum is subtracted first.
    for (cache, vectorize) in [(true, Some(false)), (false, Some(false)), (true, None), (false, None)] {
        let options = Options { rows: RowOptions { cache: Some(cache) }, vectorize, ..Options::default() };
        let x = upload(&rt, Scalar::F32, &[1000.0, 1001.0, 1002.0, 1003.0, -1000.0, f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY]).unwrap();
        let y = download(&enigma_ops::softmax_with(&rt, &x, 2, 4, &options).unwrap(), Scalar::F32, 8).unwrap();
        let e: Vec<f64> = (0..4).map(|i| (i as f64 - 3.0).exp()).collect();
        let s: f64 = e.iter().sum();
        let p = 1.0 / (1.0 + 1000f64.exp());
        let want = [e[0] / s, e[1] / s, e[2] / s, e[3] / s, 0.0, 0.0, 1.0 - p, 0.0];
        close(&y, &want, 1e-6);
        // A row of only -inf is 0/0, as in PyTorch.
        let x = upload(&rt, Scalar::F32, &[f32::NEG_INFINITY; 4]).unwrap();
        let y = download(&enigma_ops::softmax_with(&rt, &x, 1, 4, &options).unwrap(), Scalar::F32, 4).unwrap();
        assert!(y.iter().all(|v| v.is_nan()), "cache {cache}: {y:?}");
    }
}

#[test]
fn norms_by_hand_and_far_from_zero() {
    let rt = sim();
    // RMSNorm of [3, 4] with w = [1, 2]: rms = sqrt(12.5).
    let x = rt.buffer_from(&[3.0f32, 4.0]).unwrap();
    let w = rt.buffer_from(&[1.0f32, 2.0]).unwrap();
    let y = enigma_ops::rms_norm(&rt, &x, &w, 1, 2, 0.0).unwrap().to_vec::<f32>().unwrap();
    let r = 12.5f64.sqrt();
    close(&[y[0] as f64, y[1] as f64], &[3.0 / r, 8.0 / r], 1e-6);
    // LayerNorm of rows around 10^4 (a naive E[x²] - E[x]² in f32 loses
    // everything); both the cached and the streaming forms.
    let d = 3000;
    let values: Vec<f32> = (0..d).map(|i| 10_000.0 + (i % 7) as f32 * 0.25).collect();
    let ones = vec![1.0f32; d];
    let zeros = vec![0.0f32; d];
    let want = enigma_kernels::library::norm::reference_layer(&values, &ones, &zeros, d, 1e-5);
    for cache in [true, false] {
        let options = Options { rows: RowOptions { cache: Some(cache) }, ..Options::default() };
        let (x, w, b) = (upload(&rt, Scalar::F32, &values).unwrap(), upload(&rt, Scalar::F32, &ones).unwrap(), upload(&rt, Scalar::F32, &zeros).unwrap());
        let y = download(&enigma_ops::layer_norm_with(&rt, &x, &w, &b, 1, d, 1e-5, &options).unwrap(), Scalar::F32, d).unwrap();
        close(&y, &want, 2e-3);
    }
}

#[test]
fn gemv_and_attention_by_hand() {
    let rt = sim();
    // [[1, 2, 3], [4, 5, 6]] · [1, 0, -1] = [-2, -2].
    let w = rt.buffer_from(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let x = rt.buffer_from(&[1.0f32, 0.0, -1.0]).unwrap();
    assert_eq!(enigma_ops::gemv(&rt, &w, &x, 2, 3).unwrap().to_vec::<f32>().unwrap(), [-2.0, -2.0]);
    // One key: the weights are [1] and the output is that key's value row.
    // Two equal keys: the mean of their values.
    let d = 128;
    let q: Vec<f32> = (0..2 * d).map(|i| (i % 5) as f32 * 0.1).collect();
    let k = vec![0.5f32; 2 * 2 * d];
    let v: Vec<f32> = (0..2 * 2 * d).map(|i| i as f32).collect();
    let (qb, kb, vb) = (upload(&rt, Scalar::F32, &q).unwrap(), upload(&rt, Scalar::F32, &k).unwrap(), upload(&rt, Scalar::F32, &v).unwrap());
    let want: Vec<f64> = (0..2 * d).map(|i| ((i / d) * 2 * d + i % d) as f64 + d as f64 / 2.0).collect();
    let three = enigma_ops::attention_decode(&rt, &qb, &kb, &vb, 2, 2, d, 0.1).unwrap();
    let fused = enigma_ops::attention_decode_fused(&rt, &qb, &kb, &vb, 2, 2, d, 0.1).unwrap();
    close(&download(&three, Scalar::F32, 2 * d).unwrap(), &want, 1e-6);
    close(&download(&fused, Scalar::F32, 2 * d).unwrap(), &want, 1e-6);
}

#[test]
fn f16_and_bf16_buffers_round_once() {
    let rt = sim();
    // 1 + 2^-11 is not an f16: the sum of the f16 inputs 1 and 2^-11 ties
    // to even (1.0); 3 · 0.5 is exact.
    let a = rt.buffer_from_bytes(Type::F16, &[0x00, 0x3c, 0x00, 0x3c]).unwrap(); // [1, 1]
    let b = rt.buffer_from_bytes(Type::F16, &[0x00, 0x10, 0x00, 0x3c]).unwrap(); // [2^-11, 1]
    let y = enigma_ops::add(&rt, &a, &b, 2).unwrap();
    assert_eq!(download(&y, Scalar::F16, 2).unwrap(), [1.0, 2.0]);
    let x = upload(&rt, Scalar::BF16, &[3.0, -1.5, 0.0]).unwrap();
    let y = enigma_ops::scale_with(&rt, &x, 3, 0.5, &Options { elem: Some(Scalar::BF16), ..Options::default() }).unwrap();
    assert_eq!(download(&y, Scalar::BF16, 3).unwrap(), [1.5, -0.75, 0.0]);
    // ReduceOps of f16 give f32 with f32 accumulation: 4096 · (1 + 2^-10)
    // is not representable in f16, but is in f32.
    let ones = upload(&rt, Scalar::F16, &vec![1.0 + 1.0 / 1024.0; 4096]).unwrap();
    let s = enigma_ops::sum_with(&rt, &ones, 4096, &Options { elem: Some(Scalar::F16), ..Options::default() }).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), [4100.0]);
    let rows = enigma_ops::reduce_rows_with(&rt, ReduceOp::Max, &ones, 2, 2048, &Options { elem: Some(Scalar::F16), ..Options::default() }).unwrap();
    assert_eq!(rows.to_vec::<f32>().unwrap(), [1.0 + 1.0 / 1024.0; 2]);
}

#[test]
fn errors_name_the_operation_and_the_numbers() {
    let rt = sim();
    let x = rt.buffer_from(&[1.0f32; 10]).unwrap();
    let msg = |e: Error| e.to_string();
    assert_eq!(msg(enigma_ops::relu(&rt, &x, 11).unwrap_err()), "relu: `x` has 40 bytes, needs 44 (11 f32 elements)");
    assert_eq!(msg(enigma_ops::softmax(&rt, &x, 0, 10).unwrap_err()), "softmax_f32: rows must be at least 1");
    assert_eq!(msg(enigma_ops::sum(&rt, &x, 0).unwrap_err()), "sum_reduce_f32: n must be at least 1");
    let ints = rt.buffer_from(&[1i32; 4]).unwrap();
    assert_eq!(msg(enigma_ops::relu(&rt, &ints, 4).unwrap_err()), "relu: element type i32 is not f32, f16 or bf16");
    let f16 = upload(&rt, Scalar::F16, &[1.0; 4]).unwrap();
    let as_f16 = Options { elem: Some(Scalar::F16), ..Options::default() };
    assert_eq!(
        msg(enigma_ops::add_with(&rt, &f16, &x, 4, &as_f16).unwrap_err()),
        "add: `b` holds f32, expected f16"
    );
    let vector = Options { vectorize: Some(true), ..Options::default() };
    assert!(msg(enigma_ops::relu_with(&rt, &x, 10, &vector).unwrap_err()).starts_with("relu: vector loads asked for, but a buffer cannot be bound as f32x4"));
    let g = upload(&rt, Scalar::F32, &[1.0; 12]).unwrap();
    assert_eq!(msg(enigma_ops::gemv_with(&rt, &g, &g, 4, 3, &vector).unwrap_err()), "gemv: vector loads asked for, but the shape is not a multiple of 4");
    let qkv = upload(&rt, Scalar::F32, &vec![0.0; 1030]).unwrap();
    assert_eq!(
        msg(enigma_ops::attention_decode(&rt, &qkv, &qkv, &qkv, 1, 1, 1030, 1.0).unwrap_err()),
        "attention_f32: head dimension 1030 is above the library's 1024"
    );
    // D = 1024 with 1024 threads: the fused kernel's accumulators do not
    // fit 32 KiB of threadgroup memory; the three dispatches need none.
    let (d, s_len) = (1024, 3);
    let values: Vec<f32> = (0..s_len * d).map(|i| ((i * 7) % 11) as f32 * 0.1).collect();
    let buf = upload(&rt, Scalar::F32, &values).unwrap();
    let wide = Options { threads: Some(1024), vectorize: Some(false), ..Options::default() };
    assert_eq!(
        msg(enigma_ops::attention_decode_fused_with(&rt, &buf, &buf, &buf, 1, s_len, d, 0.03, &wide).unwrap_err()),
        "attention_fused_f32: needs 131328 bytes of threadgroup memory for 1024 threads and d = 1024 (1 query heads per threadgroup; limit 32768)"
    );
    let out = enigma_ops::attention_decode_with(&rt, &buf, &buf, &buf, 1, s_len, d, 0.03, &wide).unwrap();
    let want = enigma_kernels::library::attention::reference(&values[..d], &values, &values, 1, s_len, d, 0.03);
    close(&download(&out, Scalar::F32, d).unwrap(), &want, 1e-5);
}

#[test]
fn ops_cache_pipelines_and_log_dispatches() {
    let rt = sim();
    let ops = Ops::new(&rt);
    let x = upload(&rt, Scalar::F32, &[1.0; 5000]).unwrap();
    for _ in 0..3 {
        ops.sum(&x, 5000).unwrap();
    }
    let launches = ops.take_launches();
    let names: Vec<&str> = launches.iter().map(|l| l.kernel.as_str()).collect();
    // 1250 float4 over 256 threads: 5 partials, then one pass over them.
    assert_eq!(names, ["sum_reduce_f32_vec4_u4", "sum_reduce_f32"].repeat(3));
    assert_eq!(launches[0].dispatch.size, [5, 1, 1]);
    assert!(ops.take_launches().is_empty());
}

#[test]
fn bench_times_checks_and_reports_progress() {
    let rt = sim();
    let entry = enigma_ops::registry().into_iter().find(|e| e.name == "layer_norm_bf16").unwrap();
    let mut calls = vec![];
    let b = entry.bench(&rt, &[3, 100], &Options::default(), 2, 3, &mut |done, total| calls.push((done, total))).unwrap();
    assert_eq!(calls, [(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]);
    assert_eq!((b.times.len(), b.warmup, b.device_timed), (3, 2, false));
    assert!(b.best > std::time::Duration::ZERO && b.times.iter().all(|&t| t >= b.best) && b.median >= b.best);
    // x and y of 3 × 100 bf16, w and b of 100.
    assert_eq!(b.bytes, 2 * 300 * 2 + 2 * 100 * 2);
    assert!((b.best_gbps - b.bytes as f64 / b.best.as_secs_f64() / 1e9).abs() < 1e-12);
    assert!(b.check.passed, "{}", b.check);
    assert_eq!(b.check.checked, 300);
    assert_eq!(b.launches.len(), 1);
}

#[test]
fn tuning_options_keep_results_and_run_clean() {
    let rt = sim();
    let find = |name: &str| enigma_ops::registry().into_iter().find(|e| e.name == name).unwrap();
    let sum = find("sum_f16");
    for (max_threadgroups, unroll) in [(Some(1), Some(1)), (Some(3), Some(16)), (Some(5000), Some(2)), (None, Some(7))] {
        let options = Options { reduce: ReduceOptions { max_threadgroups, loads: unroll }, threads: Some(32), sanitize: true, ..Options::default() };
        let o = sum.run_with(&rt, &[100_003], &options).unwrap();
        assert!(o.passed, "{o}");
        assert!(o.launches.iter().all(|l| l.findings.is_empty()), "{:?}", o.launches);
        let groups = o.launches[0].size[0];
        assert_eq!(groups, max_threadgroups.unwrap_or(1024).min(25_001u32.div_ceil(32)), "{options:?}");
        // One pass when pass 1 has one threadgroup, else a second over the partials.
        assert_eq!(o.launches.len(), if groups == 1 { 1 } else { 2 });
    }
    let gemv = find("gemv_bf16");
    for rows in 1..=8 {
        for (shape, unroll) in [([37, 64], 1), ([5, 33], 3), ([130, 1000], 8)] {
            let options = Options { gemv: GemvOptions { rows_per_simdgroup: Some(rows), loads: Some(unroll), stagger: Some(rows % 2 == 0) }, sanitize: true, ..Options::default() };
            let o = gemv.run_with(&rt, &shape, &options).unwrap();
            assert!(o.passed, "{o}");
            assert!(o.launches.iter().all(|l| l.findings.is_empty()), "{:?}", o.launches);
            // 8 SIMD groups × `rows` rows per threadgroup; even rows staggered.
            assert_eq!(o.launches[0].size[0] as usize, shape[0].div_ceil(8 * rows as usize), "{options:?}");
            assert_eq!(o.launches[0].kernel.ends_with("_st"), rows % 2 == 0, "{options:?}");
        }
    }
    let e = gemv.run_with(&rt, &[5, 33], &Options { gemv: GemvOptions { rows_per_simdgroup: Some(9), ..GemvOptions::default() }, ..Options::default() }).unwrap_err();
    assert_eq!(e.to_string(), "gemv_bf16: rows per SIMD group (9) and unroll (2) must be between 1 and 8");
    let e = sum.run_with(&rt, &[10], &Options { reduce: ReduceOptions { loads: Some(0), max_threadgroups: None }, ..Options::default() }).unwrap_err();
    assert_eq!(e.to_string(), "sum_reduce_f16: unroll 0 is not between 1 and 16");
}

#[test]
fn a_shared_pipeline_cache_serves_later_ops_on_the_same_runtime() {
    let rt = sim();
    let cache = enigma_ops::PipelineCache::default();
    let x = rt.buffer_from(&[0.0f32, 0.0, 0.0, 0.0]).unwrap();
    let first = Ops::new(&rt).with_cache(cache.clone());
    let y = first.softmax(&x, 1, 4).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(y, [0.25; 4]);
    let kernels = cache.len();
    assert!(kernels > 0);
    drop(first);
    // A second Ops over the same cache builds no new pipeline for the same operation.
    let second = Ops::new(&rt).with_cache(cache.clone());
    let y = second.softmax(&x, 1, 4).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(y, [0.25; 4]);
    assert_eq!(cache.len(), kernels);
}

/// A matrix in a buffer of exactly its own bytes, untyped (as an
/// `enigma.Array` of it holds it) or typed (as a framework's tensor is
/// wrapped), of `elem`.
fn exact_buffer(rt: &Runtime, elem: Scalar, values: &[f32], typed: bool) -> enigma_runtime::Buffer {
    let padded = upload(rt, elem, values).unwrap().read_bytes().unwrap();
    let bytes = &padded[..values.len() * elem.size_bytes() as usize];
    if typed {
        rt.buffer_from_bytes(Type::scalar(elem), bytes).unwrap()
    } else {
        let buf = rt.buffer_bytes(bytes.len()).unwrap();
        buf.write_bytes(0, bytes).unwrap();
        buf
    }
}

#[test]
fn matmul_takes_buffers_of_the_matrices_exact_size_typed_or_not() {
    // 67×45 f32 is 12060 bytes, not a whole number of float4s; 8×16 is.
    let rt = sim();
    for (elem, (m, n, k)) in [(Scalar::F32, (67, 101, 45)), (Scalar::F32, (8, 12, 16)), (Scalar::F16, (9, 20, 13)), (Scalar::F16, (16, 8, 24))] {
        // Small integers: every product and sum is exact in f32 (and f16 inputs).
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32) - 6.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32) - 5.0).collect();
        let want: Vec<f64> = (0..m * n).map(|ij| (0..k).map(|p| f64::from(a[ij / n * k + p]) * f64::from(b[p * n + ij % n])).sum()).collect();
        for typed in [false, true] {
            let (ab, bb) = (exact_buffer(&rt, elem, &a, typed), exact_buffer(&rt, elem, &b, typed));
            let ops = Ops::new(&rt).with_options(Options { elem: Some(elem), ..Options::default() });
            let c = ops.matmul(&ab, &bb, m, n, k, enigma_ops::DType::F32).unwrap_or_else(|e| panic!("{elem} {m}x{n}x{k} typed={typed}: {e}"));
            assert_eq!(download(&c, Scalar::F32, m * n).unwrap(), want, "{elem} {m}x{n}x{k} typed={typed}");
        }
    }
}

#[test]
fn matmul_refuses_a_longer_buffer_it_cannot_read_as_vectors() {
    // Rows of 16 elements are read as float4s; 16·16 + 1 floats are not a
    // whole number of them.
    let rt = sim();
    let a = rt.buffer_bytes((16 * 16 + 1) * 4).unwrap();
    let b = rt.buffer_bytes(16 * 16 * 4).unwrap();
    let e = Ops::new(&rt).matmul(&a, &b, 16, 16, 16, enigma_ops::DType::F32).unwrap_err().to_string();
    assert!(e.contains("matmul") && e.contains("1028 bytes") && e.contains("rows of 16 elements"), "{e}");
}
