//! Cooperative tensor operations in the IR: the text and JSON forms round
//! trip, the builder writes what the text says, validation accepts the
//! documented forms and records the scope a dispatch must match.

use enigma_ir::builder::*;
use enigma_ir::text::{parse, print};
use enigma_ir::{from_json, to_json, validate, Access, ExecutionScope, Matmul2dDescriptor, Matmul2dMode, QuantCode, QuantLayout, ReduceAxis, ReduceOp, Scalar, Type};

const EVERY_FORM: &str = "\
kernel coop(A: device f16 read, B: device f16 read, C: device f32 read_write, R: device f32 read_write, K: u32, W: device u32 read, S: device f16 read) {
    threadgroup T: f16[4096]
    threadgroup TW: u32[512]
    threadgroup TS: f16[128]
    var i: u32
    var x: f32
    cooperative c: cooperative_tensor<f32, 64, 64, simdgroups(4)>
    cooperative d: cooperative_tensor<f32, 64, 32, simdgroups(4)>
    cooperative rows: cooperative_tensor<f32, 64, 1, simdgroups(4)>
    cooperative one: cooperative_tensor<bf16, 16, 32, simdgroup>
    cooperative w: cooperative_tensor<f16, 64, 64, simdgroups(4)>

    matmul2d(matmul2d_descriptor(64, 64, dynamic_extent, false, true, false, multiply), simdgroups(4), tensor(A, 0u32, K, 64u32, 1u32, K), tensor(B, 0u32, K, 64u32, 1u32, K), c)
    matmul2d(matmul2d_descriptor(64, 32, 64, false, false, true, multiply_accumulate), simdgroups(4), c, tensor(T, (K * 2u32), 32u32, 64u32, 1u32, 32u32), d)
    matmul2d_overlapped(matmul2d_descriptor(64, 32, 32, false, false, false, multiply_accumulate), simdgroups(4), tensor(T, 0u32, 32u32, 64u32, 1u32, 32u32), tensor(T, 2048u32, 32u32, 32u32, 1u32, 32u32), d)
    for i in (0u32, get_capacity(c), 1u32) {
        if (is_valid_element(c, i)) {
            x = c[i]
            c[i] = (x + cast<f32>(get_multidimensional_index(c, i, 1)))
        }
    }
    reduce_rows(c, rows, max)
    combine(c, rows, sub)
    combine(rows, rows, mul)
    reduce_columns(d, d, sum)
    cooperative_load(c, tensor(C, 0u32, 64u32, 64u32, 1u32, 64u32))
    cooperative_store(rows, tensor(R, 0u32, 1u32, 64u32, 1u32, 1u32))
    cooperative_dequantize_int4(w, W, (K * 8u32), 64u32, S, 0u32, 64u32, 5u32)
    cooperative_dequantize_fp4(w, TW, 0u32, 64u32, TS, 64u32, 64u32, ctz(K))
    cooperative_dequantize_uint4_columns(w, W, 0u32, 8u32, S, 0u32, 1u32, 6u32, TS)
}
";

#[test]
fn every_cooperative_form_round_trips_through_text_and_json() {
    let kernel = parse(EVERY_FORM).unwrap_or_else(|e| panic!("{e}"));
    let printed = print(&kernel);
    assert_eq!(printed, EVERY_FORM);
    assert_eq!(parse(&printed).unwrap(), kernel);
    let json = to_json(&kernel);
    assert_eq!(from_json(&json).unwrap(), kernel);
    // Only the overlapped product names its release; ordinary products keep the JSON they had.
    assert_eq!(json.matches("\"release\"").count(), 1, "{json}");
    assert!(json.contains("\"release\":\"second_barrier\""), "{json}");
    let d = &kernel.cooperative_tensors[3];
    assert_eq!((d.elem, d.rows, d.cols, d.scope), (Scalar::BF16, 16, 32, ExecutionScope::Simdgroup));
}

#[test]
fn validation_accepts_the_forms_and_names_the_scope() {
    // The same kernel minus the reduction into itself, which validation refuses.
    let text = EVERY_FORM.replace("    reduce_columns(d, d, sum)\n", "");
    let info = validate(&parse(&text).unwrap(), &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(info.cooperative_simdgroups, Some(4));
    let err = validate(&parse(EVERY_FORM).unwrap(), &Default::default()).unwrap_err();
    assert!(err.to_string().contains("`d` (cooperative_tensor<f32, 64, 32, simdgroups(4)>) reduces into a cooperative_tensor<f32, 1, 32"), "{err}");
    // `combine` takes a source of the destination's shape, m×1 or 1×n.
    let text = text.replace("combine(rows, rows, mul)", "combine(c, d, add)");
    let err = validate(&parse(&text).unwrap(), &Default::default()).unwrap_err();
    assert!(
        err.to_string().contains("`c` (cooperative_tensor<f32, 64, 64, simdgroups(4)>) takes an f32 source of its scope shaped 64×64, 64×1 or 1×64, not `d` (cooperative_tensor<f32, 64, 32, simdgroups(4)>)"),
        "{err}"
    );
}

#[test]
fn validation_refuses_a_dequantization_of_the_wrong_types_or_operands_that_differ_between_threads() {
    let text = EVERY_FORM.replace("    reduce_columns(d, d, sum)\n", "");
    for (from, to, message) in [
        ("cooperative w: cooperative_tensor<f16", "cooperative w: cooperative_tensor<i32", "`w` holds i32; dequantized weights fill an f32 or f16 tensor"),
        ("cooperative_dequantize_int4(w, W,", "cooperative_dequantize_int4(w, S,", "the packed words `S` hold f16, not u32"),
        ("TS, 64u32, 64u32, ctz(K))", "TW, 64u32, 64u32, ctz(K))", "the scales `TW` hold u32, not f16"),
        ("S, 0u32, 64u32, 5u32)", "S, 0u32, 64u32, 5i32)", "the group shift is i32; it must be u32"),
        ("S, 0u32, 64u32, 5u32)", "S, thread_index_in_threadgroup, 64u32, 5u32)", "`cooperative_dequantize` is issued by every thread of its scope (simdgroups(4)) together, but an offset, stride or group shift differs between its threads"),
        ("6u32, TS)", "6u32, TW)", "the biases `TW` hold u32, not f16"),
    ] {
        let bad = text.replace(from, to);
        let err = validate(&parse(&bad).unwrap_or_else(|e| panic!("{e}")), &Default::default()).unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
    }
}

#[test]
fn the_builder_writes_a_dequantization() {
    let mut k = KernelBuilder::new("dequantize");
    let words = k.buffer("W", Type::U32, Access::Read);
    let scales = k.buffer("S", Type::F16, Access::Read);
    let n = k.value("N", Type::U32);
    let w = k.cooperative_tensor("w", Scalar::F16, 64, 128, ExecutionScope::Simdgroups(4));
    k.cooperative_dequantize(w, (QuantCode::Int4, QuantLayout::Rows), (words, 4u32, n), (scales, 0u32, n), 6u32);
    let kernel = k.finish().unwrap();
    validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let text = print(&kernel);
    assert!(text.contains("    cooperative_dequantize_int4(w, W, 4u32, N, S, 0u32, N, 6u32)"), "{text}");
    assert_eq!(parse(&text).unwrap(), kernel);
    // Words in fragment order: the layout is part of the statement's name
    // in the text form and a field of the JSON form, and both read back.
    let mut k = KernelBuilder::new("dequantize_fragments");
    let words = k.buffer("W", Type::U32, Access::Read);
    let scales = k.buffer("S", Type::F16, Access::Read);
    let n = k.value("N", Type::U32);
    let w = k.cooperative_tensor("w", Scalar::F16, 64, 128, ExecutionScope::Simdgroups(4));
    k.cooperative_dequantize(w, (QuantCode::Fp4, QuantLayout::Fragments), (words, 0u32, n * 8u32), (scales, 0u32, n), 6u32);
    let kernel = k.finish().unwrap();
    validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let text = print(&kernel);
    assert!(text.contains("    cooperative_dequantize_fp4_fragments(w, W, 0u32, (N * 8u32), S, 0u32, N, 6u32)"), "{text}");
    assert_eq!(parse(&text).unwrap(), kernel);
    let json = to_json(&kernel);
    assert!(json.contains("\"layout\":\"fragments\""), "{json}");
    assert_eq!(from_json(&json).unwrap(), kernel);
    // MLX's affine weights: the unsigned code in MLX's columns, the biases
    // the statement's last operand in the text form and a field of the
    // JSON form (absent without biases, so older JSON reads back).
    let mut k = KernelBuilder::new("dequantize_affine");
    let words = k.buffer("W", Type::U32, Access::Read);
    let scales = k.buffer("S", Type::F16, Access::Read);
    let biases = k.buffer("B", Type::F16, Access::Read);
    let w = k.cooperative_tensor("w", Scalar::F16, 64, 128, ExecutionScope::Simdgroups(4));
    k.cooperative_dequantize_with_biases(w, (QuantCode::Uint4, QuantLayout::Columns), (words, 0u32, 16u32), (scales, 0u32, 2u32), biases, 6u32);
    let kernel = k.finish().unwrap();
    validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let text = print(&kernel);
    assert!(text.contains("    cooperative_dequantize_uint4_columns(w, W, 0u32, 16u32, S, 0u32, 2u32, 6u32, B)"), "{text}");
    assert_eq!(parse(&text).unwrap(), kernel);
    let json = to_json(&kernel);
    assert!(json.contains("\"layout\":\"columns\"") && json.contains("\"code\":\"uint4\"") && json.contains("\"biases\""), "{json}");
    assert_eq!(from_json(&json).unwrap(), kernel);
    assert!(!to_json(&parse(&text.replace(", B)", ")")).unwrap()).contains("\"biases\""));
}

#[test]
fn the_builder_writes_the_text_form() {
    let mut k = KernelBuilder::new("gemm_tile");
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let c = k.buffer("C", Type::F32, Access::ReadWrite);
    let (m, n, kk) = (k.value("M", Type::U32), k.value("N", Type::U32), k.value("K", Type::U32));
    let mut desc = Matmul2dDescriptor::new(64, 64, None);
    desc.mode = Matmul2dMode::MultiplyAccumulate;
    let op = Matmul2d::new(desc, ExecutionScope::Simdgroups(4));
    let (ta, tb) = (Tensor::new(a, [kk, m]), Tensor::new(b, [n, kk]));
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    let sums = k.cooperative_tensor("sums", Scalar::F32, 1, 64, ExecutionScope::Simdgroups(4));
    k.for_range("s", 0u32, acc.get_capacity(), 1u32, |k, s| {
        k.cooperative_set(acc, s, 0.0);
    });
    k.matmul2d_run(&op, &ta.slice(0u32, 64u32), &tb, acc);
    k.cooperative_reduce(acc, sums, ReduceAxis::Columns, ReduceOp::Sum);
    k.cooperative_store(acc, &Tensor::new(c, [n, m]).with_strides([Ex::from(1u32), n]));
    let kernel = k.finish().unwrap();
    validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let text = print(&kernel);
    for needle in [
        "    cooperative acc: cooperative_tensor<f32, 64, 64, simdgroups(4)>\n",
        "        acc[s] = 0.0f32",
        "matmul2d(matmul2d_descriptor(64, 64, dynamic_extent, false, false, false, multiply_accumulate), simdgroups(4), \
         tensor(A, ((0u32 + (0u32 * 1u32)) + (64u32 * K)), select((K - 0u32), 0u32, (0u32 >= K)), select((M - 64u32), 0u32, (64u32 >= M)), 1u32, K), \
         tensor(B, 0u32, N, K, 1u32, N), acc)",
        "reduce_columns(acc, sums, sum)",
        "cooperative_store(acc, tensor(C, 0u32, N, M, 1u32, N))",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    assert_eq!(parse(&text).unwrap(), kernel);
}
