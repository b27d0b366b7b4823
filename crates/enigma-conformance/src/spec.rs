//! Specialisation constants (Metal function constants): one kernel, several
//! pipelines with different values, different results; constants not given
//! keep their defaults.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Literal, LiteralValue, Scalar, Type};
use enigma_runtime::{Arg, Runtime, SpecValues};
use rand::Rng;

/// A u32 factor, an f32 bias, a bool switch and a u32 loop trip count, all
/// specialisation constants; also an i32 constant used as a shift amount.
pub fn spec_constants(rt: &Runtime) -> CaseResult {
    seeded("spec_constants", |rng| {
        let mut k = KernelBuilder::new("specialised");
        let input = k.buffer("input", Type::U32, Access::Read);
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let scale = k.spec("SCALE", Literal::u32(2));
        let bias = k.spec("BIAS", Literal::f32(0.5));
        let square = k.spec("SQUARE", Literal::bool(false));
        let trips = k.spec("TRIPS", Literal::u32(3));
        let shift = k.spec("SHIFT", Literal::i32(1));
        let tid = k.let_("tid", thread_position_in_grid().x());
        let v = k.var("v", input.get(tid));
        k.if_(square, |k| k.assign(v, v * v));
        k.assign(v, v * scale);
        k.for_range("i", 0u32, trips, 1u32, |k, i| k.assign(v, v + i));
        k.assign(v, v >> shift.cast(Type::U32));
        k.store(out.at(tid), v.get().cast(Type::F32) + bias);
        let kernel = finish(k)?;
        let n = 200usize;
        let xs: Vec<u32> = (0..n).map(|_| rng.gen_range(0..1000)).collect();
        // (SCALE, BIAS, SQUARE, TRIPS, SHIFT) each variant should see.
        type Values = (u32, f32, bool, u32, u32);
        let variants: [(&str, SpecValues, Values); 4] = [
            ("defaults", SpecValues::new(), (2, 0.5, false, 3, 1)),
            (
                "SCALE = 3",
                SpecValues::new().with("SCALE", Literal::u32(3)),
                (3, 0.5, false, 3, 1),
            ),
            (
                "SCALE = 5, BIAS = -1.25, SQUARE = true, TRIPS = 0, SHIFT = 0",
                SpecValues::new()
                    .with("SCALE", Literal::u32(5))
                    .with("BIAS", Literal::f32(-1.25))
                    .with("SQUARE", Literal::bool(true))
                    .with("TRIPS", Literal::u32(0))
                    .with("SHIFT", Literal::i32(0)),
                (5, -1.25, true, 0, 0),
            ),
            (
                "TRIPS = 10, SHIFT = 3",
                SpecValues::new().with("TRIPS", Literal::u32(10)).with(
                    "SHIFT",
                    Literal {
                        ty: Scalar::I32,
                        value: LiteralValue::Int(3),
                    },
                ),
                (2, 0.5, false, 10, 3),
            ),
        ];
        let ib = upload(rt, &xs)?;
        let mut results: Vec<Vec<f32>> = vec![];
        for (label, values, (scale, bias, square, trips, shift)) in variants {
            let p = rt
                .pipeline_with(&kernel, &values)
                .ctx(format_args!("pipeline with {label}"))?;
            let ob = filled(rt, n, f32::NAN)?;
            threads(
                rt,
                &p,
                &[Arg::from(&ib), Arg::from(&ob)],
                [n as u32, 1, 1],
                [64, 1, 1],
            )?;
            let want: Vec<f32> = xs
                .iter()
                .map(|&x| {
                    let mut v = if square { x * x } else { x };
                    v *= scale;
                    v += (0..trips).sum::<u32>();
                    (v >> shift) as f32 + bias
                })
                .collect();
            let got: Vec<f32> = download(&ob)?;
            check_f32_exact(&format!("specialised with {label}"), &got, &want, |i| {
                format!("x = {}", xs[i])
            })?;
            results.push(got);
        }
        ensure!(
            results[0] != results[1] && results[1] != results[2],
            "different specialisations gave the same results"
        );
        Ok(())
    })
}
