//! Cooperative tensors on the simulator: products, loads, stores, slot
//! access and reductions against plain-Rust references; the scope checked
//! at dispatch; the sanitizer's layout check (a kernel that assumes which
//! thread holds which element is reported, naming the kernel, the
//! accumulator and the first differing element; the same kernel through
//! `get_multidimensional_index` is clean).

use enigma_backend::half::{f16_bits_to_f32, f32_to_f16_bits};
use enigma_backend::{ArgValue, Backend, DispatchMode, DispatchOptions, Finding, FindingKind, RuntimeError, SpecValues};
use enigma_ir::builder::*;
use enigma_ir::{validate, Access, CombineOp, ExecutionScope, Kernel, Matmul2dDescriptor, Matmul2dMode, ReduceAxis, ReduceOp, Scalar, Type};
use enigma_sim::SimBackend;

/// A buffer's initial bytes.
enum Data {
    F16(Vec<f32>),
    F32(Vec<f32>),
    U32(u32),
}

impl Data {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Data::F16(v) => v.iter().flat_map(|x| f32_to_f16_bits(*x).to_le_bytes()).collect(),
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::U32(v) => v.to_le_bytes().to_vec(),
        }
    }
}

/// Runs `kernel` over `data` with `threads` threads in one threadgroup per
/// entry of `groups`; the f32 buffers' contents afterwards, and the findings.
fn run(kernel: &Kernel, data: &[Data], groups: u32, threads: u32, sanitize: bool) -> Result<(Vec<Vec<f32>>, Vec<Finding>), RuntimeError> {
    let info = validate(kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    let backend = SimBackend::new();
    let compiled = backend.compile(kernel, &info, &SpecValues::default())?;
    let mut storages = vec![];
    for d in data {
        let bytes = d.bytes();
        if let Data::U32(_) = d {
            storages.push(None);
            continue;
        }
        let s = backend.allocate(bytes.len())?;
        s.write(0, &bytes)?;
        storages.push(Some(s));
    }
    let values: Vec<Vec<u8>> = data.iter().map(Data::bytes).collect();
    let args: Vec<ArgValue<'_>> = storages
        .iter()
        .zip(&values)
        .map(|(s, v)| match s {
            Some(s) => ArgValue::Buffer { storage: s.as_ref(), elem: None },
            None => {
                let mut bytes = [0u8; 32];
                bytes[..v.len()].copy_from_slice(v);
                ArgValue::Value { ty: Type::U32, bytes }
            }
        })
        .collect();
    let geometry = enigma_backend::check_dispatch(backend.info(), compiled.as_ref(), &args, DispatchMode::Threadgroups, [groups, 1, 1], [threads, 1, 1])?;
    let report = backend.dispatch(compiled.as_ref(), &args, &geometry, &DispatchOptions { sanitize, ..Default::default() })?;
    let outputs = storages
        .iter()
        .zip(data)
        .filter_map(|(s, d)| match (s, d) {
            (Some(s), Data::F32(v)) => {
                let mut bytes = vec![0u8; v.len() * 4];
                s.read(0, &mut bytes).unwrap();
                Some(bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
            }
            _ => None,
        })
        .collect();
    Ok((outputs, report.findings))
}

/// Small integers (and halves), whose f16 products and f32 sums are exact.
fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed * 97) >> 7) % 9) as f32 * 0.5 - 2.0).collect()
}

/// `C (m×n, row-major, stride ldc) = A (m×k) · B (k×n)`, each sum in f32 in k order.
fn reference(a: impl Fn(usize, usize) -> f32, b: impl Fn(usize, usize) -> f32, m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for r in 0..m {
        for col in 0..n {
            let mut s = 0f32;
            for kk in 0..k {
                s = a(r, kk).mul_add(b(kk, col), s);
            }
            c[r * n + col] = s;
        }
    }
    c
}

/// The kernel: a 64×64 by 64×K product over 4 SIMD groups,
/// A (M×K) and B (K×N) row-major f16, C f32; threadgroup g takes rows
/// 64·g.
fn gemm_tile() -> Kernel {
    let mut k = KernelBuilder::new("gemm_tile");
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let c = k.buffer("C", Type::F32, Access::ReadWrite);
    let (m, n, kk) = (k.value("M", Type::U32), k.value("N", Type::U32), k.value("K", Type::U32));
    let op = Matmul2d::new(Matmul2dDescriptor::new(64, 64, None), ExecutionScope::Simdgroups(4));
    let row = k.let_("row", threadgroup_position_in_grid().x() * 64u32);
    let ta = Tensor::new(a, [kk, m]).slice(0u32, row);
    let tb = Tensor::new(b, [n, kk]);
    let acc = k.destination_cooperative_tensor(&op, "c", Scalar::F32);
    k.matmul2d_run(&op, &ta, &tb, acc);
    k.cooperative_store(acc, &Tensor::new(c, [n, m]).slice(0u32, row));
    k.finish().unwrap()
}

#[test]
fn the_gemm_tile_matches_the_reference_plain_and_sanitized() {
    let (m, n, kdim) = (128, 64, 96);
    let (a, b) = (data(m * kdim, 1), data(kdim * n, 2));
    let want = reference(|r, k| a[r * kdim + k], |k, c| b[k * n + c], m, n, kdim);
    let kernel = gemm_tile();
    for sanitize in [false, true] {
        let args = [Data::F16(a.clone()), Data::F16(b.clone()), Data::F32(vec![0.0; m * n]), Data::U32(m as u32), Data::U32(n as u32), Data::U32(kdim as u32)];
        let (out, findings) = run(&kernel, &args, 2, 128, sanitize).unwrap();
        assert_eq!(out[0], want, "sanitize {sanitize}");
        assert!(findings.is_empty(), "{findings:#?}");
    }
}

#[test]
fn a_scope_that_does_not_match_the_threadgroup_is_refused_with_both_numbers() {
    let args = [Data::F16(vec![0.0; 64 * 64]), Data::F16(vec![0.0; 64 * 64]), Data::F32(vec![0.0; 64 * 64]), Data::U32(64), Data::U32(64), Data::U32(64)];
    let err = run(&gemm_tile(), &args, 1, 96, false).unwrap_err();
    assert!(matches!(err, RuntimeError::CooperativeScope { scope: 4, needed: 128, threads: 96, simdgroups: 3, .. }), "{err}");
    assert!(err.to_string().contains("execution_simdgroups(4)") && err.to_string().contains("96 threads (3 SIMD groups of 32)"), "{err}");
}

/// A 64×32 f32 accumulator of one SIMD group's product, written out slot
/// by slot: `by_coordinates` places each slot's element at its
/// coordinates; otherwise at `thread·capacity + slot`, as if slot `i` of
/// thread `t` were a fixed element.
fn slot_writer(by_coordinates: bool) -> Kernel {
    let mut k = KernelBuilder::new(if by_coordinates { "slots_by_coordinates" } else { "slots_by_index" });
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let c = k.buffer("C", Type::F32, Access::ReadWrite);
    let op = Matmul2d::new(Matmul2dDescriptor::new(64, 32, Some(16)), ExecutionScope::Simdgroup);
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    k.matmul2d_run(&op, &Tensor::new(a, [16u32, 64u32]), &Tensor::new(b, [32u32, 16u32]), acc);
    let lane = k.let_("lane", thread_index_in_simdgroup());
    k.for_range("i", 0u32, acc.get_capacity(), 1u32, |k, i| {
        k.if_(acc.is_valid_element(i), |k| {
            let [col, row] = acc.get_multidimensional_index(i);
            let at = if by_coordinates { row * 32u32 + col } else { lane * acc.get_capacity() + i };
            k.store(c.at(at), acc.get(i));
        });
    });
    k.finish().unwrap()
}

#[test]
fn the_sanitizer_reports_a_kernel_that_assumes_the_layout() {
    let (a, b) = (data(64 * 16, 3), data(16 * 32, 4));
    let want = reference(|r, k| a[r * 16 + k], |k, c| b[k * 32 + c], 64, 32, 16);
    let args = || [Data::F16(a.clone()), Data::F16(b.clone()), Data::F32(vec![0.0; 64 * 32])];
    let (out, findings) = run(&slot_writer(true), &args(), 1, 32, true).unwrap();
    assert_eq!(out[0], want);
    assert!(findings.is_empty(), "{findings:#?}");
    let (_, findings) = run(&slot_writer(false), &args(), 1, 32, true).unwrap();
    let f = findings.iter().find(|f| f.kind == FindingKind::LayoutDependence).unwrap_or_else(|| panic!("{findings:#?}"));
    assert_eq!((f.kernel.as_str(), f.variable.as_deref()), ("slots_by_index", Some("C")));
    assert!(f.message.starts_with("this result depends on the cooperative tensor's layout: `C` differs when cooperative tensor `acc`"), "{f}");
    assert!(f.message.contains(&format!("first at element {}", f.index.unwrap())), "{f}");
}

#[test]
fn accumulate_reduce_and_reuse_match_the_reference() {
    // D (64×32) = C0 + A·Bᵀ with A 64×32 transposed in memory (32×64) and B
    // 32×32 read transposed; then E = D·F (D as the left operand, F 32×16);
    // then row maxima of E and column sums of D.
    let mut k = KernelBuilder::new("chain");
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let f = k.buffer("F", Type::F16, Access::Read);
    let c0 = k.buffer("C0", Type::F32, Access::Read);
    let out_e = k.buffer("E", Type::F32, Access::ReadWrite);
    let out_r = k.buffer("R", Type::F32, Access::ReadWrite);
    let out_s = k.buffer("S", Type::F32, Access::ReadWrite);
    let scope = ExecutionScope::Simdgroups(2);
    let mut desc = Matmul2dDescriptor::new(64, 32, Some(32));
    (desc.transpose_left, desc.transpose_right, desc.mode) = (true, true, Matmul2dMode::MultiplyAccumulate);
    let first = Matmul2d::new(desc, scope);
    let second = Matmul2d::new(Matmul2dDescriptor::new(64, 16, Some(32)), scope);
    let d = k.destination_cooperative_tensor(&first, "d", Scalar::F32);
    let e = k.destination_cooperative_tensor(&second, "e", Scalar::F32);
    let rows = k.cooperative_tensor("rows", Scalar::F32, 64, 1, scope);
    let cols = k.cooperative_tensor("cols", Scalar::F32, 1, 32, scope);
    k.cooperative_load(d, &Tensor::new(c0, [32u32, 64u32]));
    k.matmul2d_run(&first, &Tensor::new(a, [64u32, 32u32]), &Tensor::new(b, [32u32, 32u32]), d);
    k.matmul2d_run(&second, d, &Tensor::new(f, [16u32, 32u32]), e);
    k.cooperative_reduce(e, rows, ReduceAxis::Rows, ReduceOp::Max);
    k.cooperative_reduce(d, cols, ReduceAxis::Columns, ReduceOp::Sum);
    k.cooperative_store(e, &Tensor::new(out_e, [16u32, 64u32]));
    k.cooperative_store(rows, &Tensor::new(out_r, [1u32, 64u32]));
    k.cooperative_store(cols, &Tensor::new(out_s, [32u32, 1u32]));
    let kernel = k.finish().unwrap();
    let (a, b, fm, c0) = (data(32 * 64, 5), data(32 * 32, 6), data(32 * 16, 7), data(64 * 32, 8));
    let mut d = reference(|r, kk| a[kk * 64 + r], |kk, c| b[c * 32 + kk], 64, 32, 32);
    // multiply-accumulate starts each sum from C0's element
    for r in 0..64 {
        for c in 0..32 {
            let mut s = c0[r * 32 + c];
            for kk in 0..32 {
                s = a[kk * 64 + r].mul_add(b[c * 32 + kk], s);
            }
            d[r * 32 + c] = s;
        }
    }
    let e = reference(|r, kk| d[r * 32 + kk], |kk, c| fm[kk * 16 + c], 64, 16, 32);
    let rows: Vec<f32> = (0..64).map(|r| e[r * 16..r * 16 + 16].iter().copied().fold(f32::MIN, f32::max)).collect();
    let cols: Vec<f32> = (0..32).map(|c| (0..64).fold(0f32, |s, r| s + d[r * 32 + c])).collect();
    for sanitize in [false, true] {
        let args = [
            Data::F16(a.clone()),
            Data::F16(b.clone()),
            Data::F16(fm.clone()),
            Data::F32(c0.clone()),
            Data::F32(vec![0.0; 64 * 16]),
            Data::F32(vec![0.0; 64]),
            Data::F32(vec![0.0; 32]),
        ];
        let (out, findings) = run(&kernel, &args, 1, 64, sanitize).unwrap();
        assert_eq!((&out[1], &out[2], &out[3]), (&e, &rows, &cols), "sanitize {sanitize}");
        assert!(findings.is_empty(), "{findings:#?}");
    }
    // f16 round trip of the helpers the data rely on.
    assert_eq!(f16_bits_to_f32(f32_to_f16_bits(-1.5)), -1.5);
}

#[test]
fn views_read_zero_outside_their_extents_and_slots_past_the_capacity_fail() {
    // K = 20 of a dynamic-k 16×16 product: the 8 padding columns read zero;
    // C's view is 16×10, so columns 10.. are never written.
    let mut k = KernelBuilder::new("ragged");
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let c = k.buffer("C", Type::F32, Access::ReadWrite);
    let op = Matmul2d::new(Matmul2dDescriptor::new(16, 16, None), ExecutionScope::Simdgroup);
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    k.matmul2d_run(&op, &Tensor::new(a, [20u32, 16u32]), &Tensor::new(b, [16u32, 20u32]), acc);
    k.cooperative_store(acc, &Tensor::new(c, [10u32, 16u32]).with_strides([Ex::from(1u32), Ex::from(16u32)]));
    let kernel = k.finish().unwrap();
    let (a, b) = (data(16 * 20, 9), data(20 * 16, 10));
    let full = reference(|r, kk| a[r * 20 + kk], |kk, c| b[kk * 16 + c], 16, 16, 20);
    let want: Vec<f32> = (0..256).map(|i| if i % 16 < 10 { full[i] } else { -7.0 }).collect();
    let (out, _) = run(&kernel, &[Data::F16(a), Data::F16(b), Data::F32(vec![-7.0; 256])], 1, 32, false).unwrap();
    assert_eq!(out[0], want);

    let mut k = KernelBuilder::new("past_capacity");
    let c = k.buffer("C", Type::F32, Access::ReadWrite);
    let t = k.cooperative_tensor("t", Scalar::F32, 16, 16, ExecutionScope::Simdgroup);
    k.store(c.at(0u32), t.get(t.get_capacity()));
    let err = run(&k.finish().unwrap(), &[Data::F32(vec![0.0; 4])], 1, 32, false).unwrap_err();
    assert!(err.to_string().contains("slot 8 of cooperative tensor `t` is past its capacity of 8 slots per thread"), "{err}");
}

/// A 64×64×16 product over threadgroup tiles that thread `lid` then
/// overwrites at `As[lid]` after `barriers` threadgroup barriers (0: at
/// once, while the scope's other SIMD groups may still be reading it);
/// `overlapped` runs the product with its operands released at the second
/// barrier.
fn operand_rewriter(barriers: u32, overlapped: bool) -> Kernel {
    let mut k = KernelBuilder::new(format!("rewrite_after_{barriers}{}", if overlapped { "_overlapped" } else { "" }));
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let c = k.buffer("C", Type::F32, Access::ReadWrite);
    let ta = k.threadgroup_array("As", Type::F16, 64 * 16);
    let tb = k.threadgroup_array("Bs", Type::F16, 16 * 64);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.for_range("i", lid, 1024u32, 128u32, |k, i| {
        k.store(ta.at(i), a.at(i));
        k.store(tb.at(i), b.at(i));
    });
    k.threadgroup_barrier(enigma_ir::MemFlags::Threadgroup);
    let op = Matmul2d::new(Matmul2dDescriptor::new(64, 64, Some(16)), ExecutionScope::Simdgroups(4));
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    let (left, right) = (Tensor::new(ta, [16u32, 64u32]), Tensor::new(tb, [64u32, 16u32]));
    if overlapped {
        k.matmul2d_run_overlapped(&op, &left, &right, acc);
    } else {
        k.matmul2d_run(&op, &left, &right, acc);
    }
    for _ in 0..barriers {
        k.threadgroup_barrier(enigma_ir::MemFlags::Threadgroup);
    }
    k.store(ta.at(lid), tb.at(lid).load());
    k.cooperative_store(acc, &Tensor::new(c, [64u32, 64u32]));
    k.finish().unwrap()
}

#[test]
fn writing_a_products_operand_before_its_release_is_a_race_even_for_its_own_reader() {
    // Thread `lid` is one of the two threads the product's read of
    // As[lid] is counted for; the other is in another SIMD group.
    let (a, b) = (data(64 * 16, 5), data(16 * 64, 6));
    let want = reference(|r, k| a[r * 16 + k], |k, c| b[k * 64 + c], 64, 64, 16);
    let args = || [Data::F16(a.clone()), Data::F16(b.clone()), Data::F32(vec![0.0; 64 * 64])];
    // (barriers before the write, overlapped, whether that is a race)
    for (barriers, overlapped, race) in [(0, false, true), (1, false, false), (0, true, true), (1, true, true), (2, true, false)] {
        let kernel = operand_rewriter(barriers, overlapped);
        let (out, findings) = run(&kernel, &args(), 1, 128, true).unwrap();
        assert_eq!(out[0], want, "{}", kernel.name);
        if race {
            let found = findings.iter().find(|f| f.kind == FindingKind::ThreadgroupRace).unwrap_or_else(|| panic!("{}: {findings:#?}", kernel.name));
            assert_eq!((found.kernel.as_str(), found.variable.as_deref()), (kernel.name.as_str(), Some("As")), "{found}");
            if overlapped && barriers == 1 {
                assert!(found.message.contains("the overlapped product (matmul2d_run_overlapped) may still read it"), "{found}");
            }
        } else {
            assert!(findings.is_empty(), "{}: {findings:#?}", kernel.name);
        }
    }
}

#[test]
fn an_overlapped_product_of_device_memory_is_refused() {
    let mut k = KernelBuilder::new("overlapped_device");
    let a = k.buffer("A", Type::F16, Access::Read);
    let tb = k.threadgroup_array("Bs", Type::F16, 16 * 64);
    let op = Matmul2d::new(Matmul2dDescriptor::new(64, 64, Some(16)), ExecutionScope::Simdgroups(4));
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    k.matmul2d_run_overlapped(&op, &Tensor::new(a, [16u32, 64u32]), &Tensor::new(tb, [64u32, 16u32]), acc);
    let err = validate(&k.finish().unwrap(), &Default::default()).unwrap_err().to_string();
    assert!(err.contains("an overlapped product (operands released at the second barrier) reads threadgroup memory only, but `A` is not a threadgroup array"), "{err}");
}

/// `combine`: E (64×32, loaded) minus each row's maximum, times each
/// column's value of a 1×32 tensor, then plus a same-shape tensor; and two
/// per-row tensors combined (assign, mul, max, min) — against plain loops,
/// in every layout the sanitizer tries.
#[test]
fn combinations_along_rows_columns_and_elements_match_the_reference() {
    let mut k = KernelBuilder::new("combine");
    let e_in = k.buffer("E", Type::F32, Access::Read);
    let f_in = k.buffer("F", Type::F32, Access::Read);
    let c_in = k.buffer("C", Type::F32, Access::Read);
    let out_e = k.buffer("OE", Type::F32, Access::ReadWrite);
    let out_r = k.buffer("OR", Type::F32, Access::ReadWrite);
    let scope = ExecutionScope::Simdgroups(2);
    let e = k.cooperative_tensor("e", Scalar::F32, 64, 32, scope);
    let f = k.cooperative_tensor("f", Scalar::F32, 64, 32, scope);
    let cols = k.cooperative_tensor("cols", Scalar::F32, 1, 32, scope);
    let rows = k.cooperative_tensor("rows", Scalar::F32, 64, 1, scope);
    let other = k.cooperative_tensor("other", Scalar::F32, 64, 1, scope);
    k.cooperative_load(e, &Tensor::new(e_in, [32u32, 64u32]));
    k.cooperative_load(f, &Tensor::new(f_in, [32u32, 64u32]));
    k.cooperative_load(cols, &Tensor::new(c_in, [32u32, 1u32]));
    k.cooperative_reduce(e, rows, ReduceAxis::Rows, ReduceOp::Max);
    k.cooperative_combine(e, rows, CombineOp::Sub);
    k.cooperative_combine(e, cols, CombineOp::Mul);
    k.cooperative_combine(e, f, CombineOp::Add);
    // other = min(max(rows · rows, rows), 10)
    k.cooperative_combine(other, rows, CombineOp::Assign);
    k.cooperative_combine(other, rows, CombineOp::Mul);
    k.cooperative_combine(other, rows, CombineOp::Max);
    k.cooperative_reduce(f, rows, ReduceAxis::Rows, ReduceOp::Min);
    k.cooperative_combine(other, rows, CombineOp::Min);
    k.cooperative_store(e, &Tensor::new(out_e, [32u32, 64u32]));
    k.cooperative_store(other, &Tensor::new(out_r, [1u32, 64u32]));
    let kernel = k.finish().unwrap();
    let (ev, fv, cv) = (data(64 * 32, 11), data(64 * 32, 12), data(32, 13));
    let row_max: Vec<f32> = (0..64).map(|r| ev[r * 32..r * 32 + 32].iter().copied().fold(f32::MIN, f32::max)).collect();
    let row_min: Vec<f32> = (0..64).map(|r| fv[r * 32..r * 32 + 32].iter().copied().fold(f32::MAX, f32::min)).collect();
    let want_e: Vec<f32> = (0..64 * 32).map(|i| (ev[i] - row_max[i / 32]) * cv[i % 32] + fv[i]).collect();
    let want_r: Vec<f32> = (0..64).map(|r| (row_max[r] * row_max[r]).max(row_max[r]).min(row_min[r])).collect();
    for sanitize in [false, true] {
        let args = [Data::F32(ev.clone()), Data::F32(fv.clone()), Data::F32(cv.clone()), Data::F32(vec![0.0; 64 * 32]), Data::F32(vec![0.0; 64])];
        let (out, findings) = run(&kernel, &args, 1, 64, sanitize).unwrap();
        assert_eq!((&out[3], &out[4]), (&want_e, &want_r), "sanitize {sanitize}");
        assert!(findings.is_empty(), "{findings:#?}");
    }
}
