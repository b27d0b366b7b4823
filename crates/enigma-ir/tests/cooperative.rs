//! Cooperative tensor operations in the IR: the text and JSON forms round
//! trip, the builder writes what the text says, validation accepts the
//! documented forms and records the scope a dispatch must match.

use enigma_ir::builder::*;
use enigma_ir::text::{parse, print};
use enigma_ir::{from_json, to_json, validate, Access, ExecutionScope, Matmul2dDescriptor, Matmul2dMode, ReduceAxis, ReduceOp, Scalar, Type};

const EVERY_FORM: &str = "\
kernel coop(A: device f16 read, B: device f16 read, C: device f32 read_write, R: device f32 read_write, K: u32) {
    threadgroup T: f16[4096]
    var i: u32
    var x: f32
    cooperative c: cooperative_tensor<f32, 64, 64, simdgroups(4)>
    cooperative d: cooperative_tensor<f32, 64, 32, simdgroups(4)>
    cooperative rows: cooperative_tensor<f32, 64, 1, simdgroups(4)>
    cooperative one: cooperative_tensor<bf16, 16, 32, simdgroup>

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
