//! Cooperative tensor operations (Metal 4's `matmul2d`): a product of 4
//! SIMD groups with a dynamic k, each slot then moved by its column through
//! `get_multidimensional_index`, row sums, stored whole. Inputs are small
//! multiples of 1/2, so every sum is exact in f32 in any order: results are
//! compared exactly with an f64 reference. A device without the feature
//! must refuse the pipeline naming it.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, ExecutionScope, Feature, Matmul2dDescriptor, ReduceAxis, ReduceOp, Scalar, Type};
use enigma_runtime::{Arg, Runtime, RuntimeError};
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
            return match rt.pipeline(&kernel) {
                Err(RuntimeError::Unsupported { feature: Feature::CooperativeTensors, .. }) => Ok(()),
                other => Err(format!("a device without cooperative tensors made the pipeline anyway or failed otherwise: {:?}", other.map(|_| ()))),
            };
        }
        let p = pipeline(rt, &kernel)?;
        let halves = |n: usize, rng: &mut rand::rngs::SmallRng| -> Vec<f32> { (0..n).map(|_| rng.gen_range(-8i32..=8) as f32 / 2.0).collect() };
        let (av, bv) = (halves(64 * K as usize, rng), halves(K as usize * 64, rng));
        let bits = |v: &[f32]| v.iter().map(|x| f32_to_f16(*x)).collect::<Vec<u16>>();
        let (ab, bb) = (upload_f16(rt, &bits(&av))?, upload_f16(rt, &bits(&bv))?);
        let (cb, rb) = (filled(rt, 64 * 64, -1.0f32)?, filled(rt, 64, -1.0f32)?);
        let args = [Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::from(&rb), Arg::u32(K)];
        groups(rt, &p, &args, [1, 1, 1], [128, 1, 1])?;
        let want: Vec<f32> = (0..64 * 64)
            .map(|i| {
                let (row, col) = (i / 64, i % 64);
                let dot: f64 = (0..K as usize).map(|j| av[row * K as usize + j] as f64 * bv[j * 64 + col] as f64).sum();
                (dot + col as f64) as f32
            })
            .collect();
        let sums: Vec<f32> = (0..64).map(|row| want[row * 64..row * 64 + 64].iter().map(|x| *x as f64).sum::<f64>() as f32).collect();
        let at = |i: usize| format!("row {}, column {}", i / 64, i % 64);
        check_f32_exact("the 64×64 tile", &download::<f32>(&cb)?, &want, at)?;
        check_f32_exact("the row sums", &download::<f32>(&rb)?, &sums, |i| format!("row {i}"))
    })
}
