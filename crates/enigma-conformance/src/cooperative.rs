//! Cooperative tensor operations (Metal 4's `matmul2d`): a product of 4
//! SIMD groups with a dynamic k, each slot then moved by its column through
//! `get_multidimensional_index`, row sums, stored whole; and a pipeline of
//! overlapped products over three threadgroup stages, each stage refilled
//! by asynchronous copies right after the second barrier that follows its
//! product; and `combine` along rows, along columns and element by element
//! between tensors of two products. Inputs are small multiples of 1/2, so
//! every sum is exact in f32 in any order: results are compared exactly
//! with an f64 reference (and each combination, one f32 operation, with
//! the same operation in a plain loop); and 4-bit weights dequantized into
//! an f16 tensor that is a product's left operand. A device without the
//! feature must refuse the pipeline naming it.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, CombineOp, ExecutionScope, Feature, Kernel, Matmul2dDescriptor, Matmul2dMode, MemFlags, QuantCode, QuantLayout, ReduceAxis, ReduceOp, Scalar, Type};
use enigma_runtime::{Arg, Buffer, Runtime, RuntimeError};
use rand::Rng;

pub fn cooperative_gemm_tile_slots_and_row_sums(rt: &Runtime) -> CaseResult {
    seeded("cooperative_gemm_tile_slots_and_row_sums", |rng| {
        const K: u32 = 80;
        let mut k = KernelBuilder::new("cooperative_gemm_tile");
        let a = k.buffer("A", Type::F16, Access::Read);
        let b = k.buffer("B", Type::F16, Access::Read);
        let c = k.buffer("C", Type::F32, Access::ReadWrite);
        let r = k.buffer("R", Type::F32, Access::ReadWrite);
        let kk = k.value("K", Type::U32);
        let op = Matmul2d::new(Matmul2dDescriptor::new(64, 64, None), ExecutionScope::Simdgroups(4));
        let (ta, tb) = (Tensor::new(a, [kk, Ex::from(64u32)]), Tensor::new(b, [Ex::from(64u32), kk]));
        let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
        let sums = k.cooperative_tensor("sums", Scalar::F32, 64, 1, ExecutionScope::Simdgroups(4));
        k.matmul2d_run(&op, &ta, &tb, acc);
        k.for_range("i", 0u32, acc.get_capacity(), 1u32, |k, i| {
            k.if_(acc.is_valid_element(i), |k| {
                let [col, _] = acc.get_multidimensional_index(i);
                k.cooperative_set(acc, i, acc.get(i) + col.cast(Type::F32));
            });
        });
        k.cooperative_reduce(acc, sums, ReduceAxis::Rows, ReduceOp::Sum);
        k.cooperative_store(acc, &Tensor::new(c, [64u32, 64u32]));
        k.cooperative_store(sums, &Tensor::new(r, [1u32, 64u32]));
        let kernel = finish(k)?;
        if !rt.device().features.contains(&Feature::CooperativeTensors) {
            return refused(rt, &kernel);
        }
        let p = pipeline(rt, &kernel)?;
        let (av, bv, ab, bb) = operands(rt, rng, K)?;
        let (cb, rb) = (filled(rt, 64 * 64, -1.0f32)?, filled(rt, 64, -1.0f32)?);
        let args = [Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::from(&rb), Arg::u32(K)];
        groups(rt, &p, &args, [1, 1, 1], [128, 1, 1])?;
        // Exact: the product and the column are small multiples of 1/4.
        let want: Vec<f32> = product64(&av, &bv, K, K).iter().enumerate().map(|(i, dot)| dot + (i % 64) as f32).collect();
        let sums: Vec<f32> = (0..64).map(|row| want[row * 64..row * 64 + 64].iter().map(|x| *x as f64).sum::<f64>() as f32).collect();
        let at = |i: usize| format!("row {}, column {}", i / 64, i % 64);
        check_f32_exact("the 64×64 tile", &download::<f32>(&cb)?, &want, at)?;
        check_f32_exact("the row sums", &download::<f32>(&rb)?, &sums, |i| format!("row {i}"))
    })
}

/// `acc = A·B` (64 × K times K × 64, k dynamic) and `other` the product of
/// A's first 16 columns and B's first 16 rows (a static k: another
/// descriptor, so another MSL 4.0 type); then `acc −= row maximum of acc`
/// (m×1, along the rows), `acc += other` (element by element), `acc *=
/// column maximum of other` (1×n, along the columns), stored whole.
pub fn cooperative_combine_rows_columns_and_elements(rt: &Runtime) -> CaseResult {
    seeded("cooperative_combine_rows_columns_and_elements", |rng| {
        const K: u32 = 32;
        const K2: u32 = 16;
        let mut k = KernelBuilder::new("cooperative_combine");
        let a = k.buffer("A", Type::F16, Access::Read);
        let b = k.buffer("B", Type::F16, Access::Read);
        let c = k.buffer("C", Type::F32, Access::ReadWrite);
        let kk = k.value("K", Type::U32);
        let scope = ExecutionScope::Simdgroups(4);
        let op = Matmul2d::new(Matmul2dDescriptor::new(64, 64, None), scope);
        let op2 = Matmul2d::new(Matmul2dDescriptor::new(64, 64, Some(K2)), scope);
        let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
        let other = k.destination_cooperative_tensor(&op2, "other", Scalar::F32);
        let row_max = k.cooperative_tensor("row_max", Scalar::F32, 64, 1, scope);
        let col_max = k.cooperative_tensor("col_max", Scalar::F32, 1, 64, scope);
        k.matmul2d_run(&op, &Tensor::new(a, [kk, Ex::from(64u32)]), &Tensor::new(b, [Ex::from(64u32), kk]), acc);
        let a16 = Tensor::new(a, [K2, 64u32]).with_strides([Ex::from(1u32), kk]);
        k.matmul2d_run(&op2, &a16, &Tensor::new(b, [64u32, K2]), other);
        k.cooperative_reduce(acc, row_max, ReduceAxis::Rows, ReduceOp::Max);
        k.cooperative_combine(acc, row_max, CombineOp::Sub);
        k.cooperative_combine(acc, other, CombineOp::Add);
        k.cooperative_reduce(other, col_max, ReduceAxis::Columns, ReduceOp::Max);
        k.cooperative_combine(acc, col_max, CombineOp::Mul);
        k.cooperative_store(acc, &Tensor::new(c, [64u32, 64u32]));
        let kernel = finish(k)?;
        if !rt.device().features.contains(&Feature::CooperativeTensors) {
            return refused(rt, &kernel);
        }
        let p = pipeline(rt, &kernel)?;
        let (av, bv, ab, bb) = operands(rt, rng, K)?;
        let cb = filled(rt, 64 * 64, -1.0f32)?;
        groups(rt, &p, &[Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::u32(K)], [1, 1, 1], [128, 1, 1])?;
        let (full, part) = (product64(&av, &bv, K, K), product64(&av, &bv, K, K2));
        let row_max: Vec<f32> = (0..64).map(|r| full[r * 64..r * 64 + 64].iter().copied().fold(f32::NEG_INFINITY, f32::max)).collect();
        let col_max: Vec<f32> = (0..64).map(|col| (0..64).map(|r| part[r * 64 + col]).fold(f32::NEG_INFINITY, f32::max)).collect();
        let want: Vec<f32> = (0..64 * 64).map(|i| (full[i] - row_max[i / 64] + part[i]) * col_max[i % 64]).collect();
        check_f32_exact("the combined 64×64 tile", &download::<f32>(&cb)?, &want, |i| format!("row {}, column {}", i / 64, i % 64))
    })
}

/// `cooperative_dequantize`: 4-bit INT4 weights (64 columns of N, 64 of K,
/// seed 002's `[K/8][N]` words, one f16 scale per 32 K values and column)
/// staged into threadgroup memory and dequantized into an f16 tensor, which
/// is stored whole and multiplies a staged A (64 × 64, K-major) as the
/// product's left operand: `O = W·Aᵀ`. The scales are powers of two and A
/// holds halves, so the weights and every sum are exact. Run with groups of
/// 32 K values (both columns of a pair in one group), 64 (every column in
/// the first group) and 1 (a scale per column): the lowerings of each.
pub fn cooperative_dequantize_into_a_left_operand(rt: &Runtime) -> CaseResult {
    seeded("cooperative_dequantize_into_a_left_operand", |rng| dequantize_into_a_left_operand(rt, rng, (QuantCode::Int4, QuantLayout::Rows, false)))
}

/// The same with the words in the tensor cores' fragment order
/// (`QuantLayout::Fragments`: four units of 64 K values × 16 columns, 128
/// words each), which `wgmma` lowerings read a thread's four words of a
/// unit at once.
pub fn cooperative_dequantize_fragment_order_into_a_left_operand(rt: &Runtime) -> CaseResult {
    seeded("cooperative_dequantize_fragment_order_into_a_left_operand", |rng| dequantize_into_a_left_operand(rt, rng, (QuantCode::Int4, QuantLayout::Fragments, false)))
}

/// The same with MLX's affine weights: `uint4` codes in MLX's columns
/// (`[N][K/8]` words, a column's 8 words together; `[N][K/group]` scales)
/// with f16 biases beside the scales, each weight `code · scale + bias`.
pub fn cooperative_dequantize_mlx_affine_into_a_left_operand(rt: &Runtime) -> CaseResult {
    seeded("cooperative_dequantize_mlx_affine_into_a_left_operand", |rng| dequantize_into_a_left_operand(rt, rng, (QuantCode::Uint4, QuantLayout::Columns, true)))
}

fn dequantize_into_a_left_operand(rt: &Runtime, rng: &mut rand::rngs::SmallRng, (code, layout, biased): (QuantCode, QuantLayout, bool)) -> CaseResult {
    let mut k = KernelBuilder::new(format!("cooperative_dequantize_{code}_{layout}"));
    let a = k.buffer("A", Type::F16, Access::Read);
    let words = k.buffer("W", Type::U32, Access::Read);
    let scales = k.buffer("S", Type::F16, Access::Read);
    let biases = k.buffer("B", Type::F16, Access::Read);
    let d = k.buffer("D", Type::F16, Access::ReadWrite);
    let o = k.buffer("O", Type::F32, Access::ReadWrite);
    let scope = ExecutionScope::Simdgroups(4);
    let shift = k.value("shift", Type::U32);
    // Words from one row of the layout's units to the next (64 columns).
    let stride = layout.stride(64, 64);
    let (a_tile, word_tile, scale_tile) = (k.threadgroup_array("As", Type::F16, 64 * 64), k.threadgroup_array("Ws", Type::U32, 8 * 64), k.threadgroup_array("Ss", Type::F16, 64 * 64));
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.for_range("i", lid, 64u32 * 64, 128u32, |k, i| k.store(a_tile.at(i), a.get(i)));
    k.for_range("j", lid, 8u32 * 64, 128u32, |k, j| k.store(word_tile.at(j), words.get(j)));
    k.for_range("s", lid, 64u32 * 64, 128u32, |k, s| k.store(scale_tile.at(s), scales.get(s)));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let w = k.cooperative_tensor("w", Scalar::F16, 64, 64, scope);
    if biased {
        // The biases read from the buffer, the scales from threadgroup memory.
        k.cooperative_dequantize_with_biases(w, (code, layout), (word_tile, 0u32, stride), (scale_tile, 0u32, 64u32), biases, shift);
    } else {
        k.cooperative_dequantize(w, (code, layout), (word_tile, 0u32, stride), (scale_tile, 0u32, 64u32), shift);
    }
    let desc = Matmul2dDescriptor { transpose_right: true, ..Matmul2dDescriptor::new(64, 64, Some(64)) };
    let op = Matmul2d::new(desc, scope);
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    k.matmul2d_run(&op, w, &Tensor::new(a_tile, [64u32, 64u32]), acc);
    k.cooperative_store(w, &Tensor::new(d, [64u32, 64u32]));
    k.cooperative_store(acc, &Tensor::new(o, [64u32, 64u32]));
    let kernel = finish(k)?;
    if !rt.device().features.contains(&Feature::CooperativeTensors) {
        return refused(rt, &kernel);
    }
    let p = pipeline(rt, &kernel)?;
    for shift in [5u32, 6, 0] {
        let av = halves(64 * 64, rng);
        let word_v: Vec<u32> = (0..8 * 64).map(|_| rng.gen()).collect();
        let scale_v: Vec<f32> = (0..64 * 64).map(|_| [0.25f32, -0.5, 1.0, 2.0][rng.gen_range(0..4)]).collect();
        let bias_v: Vec<f32> = (0..64 * 64).map(|_| [-4.0f32, -2.0, 0.5, 1.0][rng.gen_range(0..4)]).collect();
        let (ab, wb, sb, bb) = (upload_f16(rt, &f16_bits(&av))?, upload(rt, &word_v)?, upload_f16(rt, &f16_bits(&scale_v))?, upload_f16(rt, &f16_bits(&bias_v))?);
        let (db, ob) = (upload_f16(rt, &[f32_to_f16(-1.0); 64 * 64])?, filled(rt, 64 * 64, -1.0f32)?);
        groups(rt, &p, &[Arg::from(&ab), Arg::from(&wb), Arg::from(&sb), Arg::from(&bb), Arg::from(&db), Arg::from(&ob), Arg::u32(shift)], [1, 1, 1], [128, 1, 1])?;
        // Weight (r, c): column r of N, K value c, where the layout puts it;
        // its scale (and bias) where the layout puts group c >> shift.
        let weight = |r: usize, c: usize| {
            let (unit_row, word, nibble) = layout.locate(c as u32, r as u32);
            let at = layout.scale_index((c >> shift) as u32, r as u32, 64) as usize;
            let product = code.value(word_v[(unit_row * stride + word) as usize] >> (4 * nibble)) * scale_v[at];
            if biased {
                product + bias_v[at]
            } else {
                product
            }
        };
        let weights: Vec<f32> = (0..64 * 64).map(|i| weight(i / 64, i % 64)).collect();
        let got: Vec<f32> = download_u16_bits(&db)?.into_iter().map(f16_to_f32).collect();
        let at = |i: usize| format!("{layout:?} words, groups of {} K values: row {}, column {}", 1u32 << shift, i / 64, i % 64);
        check_f32_exact("the dequantized weights", &got, &weights, at)?;
        let want: Vec<f32> = (0..64 * 64).map(|i| (0..64).map(|c| weights[i / 64 * 64 + c] as f64 * av[i % 64 * 64 + c] as f64).sum::<f64>() as f32).collect();
        check_f32_exact("the product", &download::<f32>(&ob)?, &want, at)?;
    }
    Ok(())
}

/// Values in {−4, −3.5, …, 4}: products and their sums stay exact in f32.
fn halves(n: usize, rng: &mut rand::rngs::SmallRng) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(-8i32..=8) as f32 / 2.0).collect()
}

fn f16_bits(v: &[f32]) -> Vec<u16> {
    v.iter().map(|x| f32_to_f16(*x)).collect()
}

/// A (64 × `k`) and B (`k` × 64) of [`halves`], row-major, and their f16
/// buffers.
fn operands(rt: &Runtime, rng: &mut rand::rngs::SmallRng, k: u32) -> Result<(Vec<f32>, Vec<f32>, Buffer, Buffer), String> {
    let (av, bv) = (halves(64 * k as usize, rng), halves(k as usize * 64, rng));
    let (ab, bb) = (upload_f16(rt, &f16_bits(&av))?, upload_f16(rt, &f16_bits(&bv))?);
    Ok((av, bv, ab, bb))
}

/// The 64 × 64 product of A's first `depth` columns and B's first `depth`
/// rows (A 64 × `k`, B `k` × 64, row-major), summed in f64.
fn product64(av: &[f32], bv: &[f32], k: u32, depth: u32) -> Vec<f32> {
    (0..64 * 64).map(|i| (0..depth as usize).map(|j| av[i / 64 * k as usize + j] as f64 * bv[j * 64 + i % 64] as f64).sum::<f64>() as f32).collect()
}

/// A device without cooperative tensors refuses the pipeline, naming the feature.
fn refused(rt: &Runtime, kernel: &Kernel) -> CaseResult {
    match rt.pipeline(kernel) {
        Err(RuntimeError::Unsupported { feature: Feature::CooperativeTensors, .. }) => Ok(()),
        other => Err(format!("a device without cooperative tensors made the pipeline anyway or failed otherwise: {:?}", other.map(|_| ()))),
    }
}

/// `C = A·B` (64 × K times K × 64) in slices of 32 K values through three
/// threadgroup stages: slice `t + 1`'s copies go into the stage slice
/// `t − 2` used, just after the barrier that releases that slice's
/// overlapped product (its second), so two products may be in flight
/// through each barrier. K = 160 reuses every stage.
pub fn cooperative_overlapped_products_through_three_stages(rt: &Runtime) -> CaseResult {
    seeded("cooperative_overlapped_products_through_three_stages", |rng| {
        const K: u32 = 160;
        const TK: u32 = 32;
        const STAGES: u32 = 3;
        let mut k = KernelBuilder::new("cooperative_overlapped_stages");
        let a = k.buffer("A", Type::F16, Access::Read);
        let b = k.buffer("B", Type::F16, Access::Read);
        let c = k.buffer("C", Type::F32, Access::ReadWrite);
        let kk = k.value("K", Type::U32);
        let a_st = k.threadgroup_array("a_stages", Type::F16, STAGES * 64 * TK);
        let b_st = k.threadgroup_array("b_stages", Type::F16, STAGES * TK * 64);
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let desc = Matmul2dDescriptor { mode: Matmul2dMode::MultiplyAccumulate, ..Matmul2dDescriptor::new(64, 64, Some(TK)) };
        let op = Matmul2d::new(desc, ExecutionScope::Simdgroups(4));
        let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
        k.for_range("i", 0u32, acc.get_capacity(), 1u32, |k, i| k.cooperative_set(acc, i, 0.0f32));
        // 128 threads, two 16-byte copies of each operand per slice: A's
        // 64 rows of 32 (4 copies a row), B's 32 rows of 64 (8 a row).
        let issue = |k: &mut KernelBuilder, t: Ex| {
            let stage = t % STAGES;
            for half in 0..2u32 {
                let copy = lid + half * 128;
                let (ar, ac) = (copy / 4u32, copy % 4u32 * 8u32);
                k.async_copy(a_st.at(stage * (64 * TK) + ar * TK + ac), a.at(ar * kk + t * TK + ac), 8, true);
                let (br, bc) = (copy / 8u32, copy % 8u32 * 8u32);
                k.async_copy(b_st.at(stage * (TK * 64) + br * 64u32 + bc), b.at((t * TK + br) * 64u32 + bc), 8, true);
            }
            k.async_commit();
        };
        issue(&mut k, Ex::from(0u32));
        let slices = k.let_("slices", kk / TK);
        k.for_range("t", 0u32, slices, 1u32, |k, t| {
            k.async_wait(0);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            let stage = t % STAGES;
            let left = Tensor::new(a_st, [Ex::from(TK), Ex::from(STAGES * 64)]).slice(0u32, stage * 64u32);
            let right = Tensor::new(b_st, [Ex::from(64u32), Ex::from(STAGES * TK)]).slice(0u32, stage * TK);
            k.matmul2d_run_overlapped(&op, &left, &right, acc);
            k.if_((t + 1u32).lt(slices), |k| issue(k, t + 1u32));
        });
        k.cooperative_store(acc, &Tensor::new(c, [64u32, 64u32]));
        let kernel = finish(k)?;
        if !rt.device().features.contains(&Feature::CooperativeTensors) {
            return refused(rt, &kernel);
        }
        let p = pipeline(rt, &kernel)?;
        let (av, bv, ab, bb) = operands(rt, rng, K)?;
        let cb = filled(rt, 64 * 64, -1.0f32)?;
        groups(rt, &p, &[Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::u32(K)], [1, 1, 1], [128, 1, 1])?;
        let want = product64(&av, &bv, K, K);
        check_f32_exact("the 64×64 product", &download::<f32>(&cb)?, &want, |i| format!("row {}, column {}", i / 64, i % 64))
    })
}
