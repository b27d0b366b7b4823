//! Vectors: `float4`/`half4`/`uint3`/`int4` construction from components and
//! by splat, component extraction, vector ⊗ vector, vector ⊗ scalar and
//! scalar ⊗ vector arithmetic, vector comparisons feeding a vector `select`,
//! vector casts, and vector loads and stores (3-vectors occupy 16 bytes, as
//! in MSL). Elementwise, so exact.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Scalar, Type};
use enigma_runtime::{Arg, Runtime};
use rand::Rng;

pub fn vectors(rt: &Runtime) -> CaseResult {
    seeded("vectors", |rng| {
        let float4 = Type::vector(Scalar::F32, 4);
        let int4 = Type::vector(Scalar::I32, 4);
        let half4 = Type::vector(Scalar::F16, 4);
        let uint3 = Type::UINT3;
        let mut k = KernelBuilder::new("vectors");
        let a = k.buffer("a", Type::F32, Access::Read);
        let b = k.buffer("b", Type::F32, Access::Read);
        let u = k.buffer("u", Type::U32, Access::Read);
        let in4 = k.buffer("in4", float4, Access::Read);
        let in3 = k.buffer("in3", uint3, Access::Read);
        let inh = k.buffer("inh", half4, Access::Read);
        let o4 = k.buffer("o4", float4, Access::ReadWrite);
        let o3 = k.buffer("o3", uint3, Access::ReadWrite);
        let oi = k.buffer("oi", int4, Access::ReadWrite);
        let oh = k.buffer("oh", half4, Access::ReadWrite);
        let os = k.buffer("os", Type::F32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let x = k.let_("x", a.get(tid));
        let y = k.let_("y", b.get(tid));
        let w = k.let_("w", u.get(tid));
        let v = k.let_("v", vector(float4, &[x, y, -x, 0.5.into()]));
        let ys = k.let_("ys", vector(float4, &[y]));
        let l4 = k.let_("l4", in4.get(tid));
        k.store(o4.at(tid * 6u32), v * y);
        k.store(o4.at(tid * 6u32 + 1u32), y - v);
        k.store(o4.at(tid * 6u32 + 2u32), v / ys);
        k.store(o4.at(tid * 6u32 + 3u32), select(v, ys, v.lt(ys)));
        k.store(o4.at(tid * 6u32 + 4u32), v + l4);
        k.store(
            o4.at(tid * 6u32 + 5u32),
            vector(float4, &[v.w(), v.z(), v.y(), v.x()]),
        );
        k.store(
            o3.at(tid * 2u32),
            vector(uint3, &[w, w + 1u32, w * 2u32]) + thread_position_in_grid(),
        );
        k.store(
            o3.at(tid * 2u32 + 1u32),
            (in3.get(tid) * 3u32) ^ vector(uint3, &[w]),
        );
        k.store(oi.at(tid), (v * 4096.0f32).cast(int4));
        k.store(
            oh.at(tid),
            inh.get(tid) * lit(Scalar::F16, 0.5) + inh.get(tid),
        );
        k.store(os.at(tid * 2u32), l4.x() + l4.w());
        k.store(os.at(tid * 2u32 + 1u32), (v * v).y());
        let kernel = finish(k)?;
        let p = pipeline(rt, &kernel)?;

        let n = 700usize;
        let av: Vec<f32> = (0..n).map(|_| normal_f32(rng, -10, 20)).collect();
        let bv: Vec<f32> = (0..n)
            .map(|i| {
                if i % 7 == 0 {
                    av[i]
                } else {
                    normal_f32(rng, -10, 20)
                }
            })
            .collect();
        let uv: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        let in4v: Vec<f32> = (0..4 * n).map(|_| normal_f32(rng, -10, 20)).collect();
        let in3v: Vec<u32> = (0..4 * n).map(|_| rng.gen()).collect(); // 4th word of each is padding
        let inhv: Vec<u16> = (0..4 * n)
            .map(|_| f32_to_f16(normal_f32(rng, -6, 6)))
            .collect();
        let bytes = |words: &[u32]| {
            words
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect::<Vec<u8>>()
        };
        let bufs = [
            upload(rt, &av)?,
            upload(rt, &bv)?,
            upload(rt, &uv)?,
            rt.buffer_from_bytes(
                float4,
                &bytes(&in4v.iter().map(|f| f.to_bits()).collect::<Vec<_>>()),
            )
            .ctx("allocating")?,
            rt.buffer_from_bytes(uint3, &bytes(&in3v))
                .ctx("allocating")?,
            rt.buffer_from_bytes(
                half4,
                &inhv
                    .iter()
                    .flat_map(|h| h.to_le_bytes())
                    .collect::<Vec<u8>>(),
            )
            .ctx("allocating")?,
            rt.buffer_of_type(float4, n * 6).ctx("allocating")?,
            rt.buffer_of_type(uint3, n * 2).ctx("allocating")?,
            rt.buffer_of_type(int4, n).ctx("allocating")?,
            rt.buffer_of_type(half4, n).ctx("allocating")?,
            rt.buffer_of_type(Type::F32, n * 2).ctx("allocating")?,
        ];
        let args: Vec<Arg<'_>> = bufs.iter().map(Arg::from).collect();
        threads(rt, &p, &args, [n as u32, 1, 1], [96, 1, 1])?;

        let mut want4 = vec![];
        let mut want3 = vec![];
        let mut wanti = vec![];
        let mut wanth = vec![];
        let mut wants = vec![];
        for i in 0..n {
            let (x, y) = (av[i], bv[i]);
            let v = [x, y, -x, 0.5];
            let l = &in4v[4 * i..4 * i + 4];
            want4.extend(v.map(|c| c * y));
            want4.extend(v.map(|c| y - c));
            want4.extend(v.map(|c| c / y));
            want4.extend(v.map(|c| if c < y { y } else { c }));
            want4.extend((0..4).map(|c| v[c] + l[c]));
            want4.extend([v[3], v[2], v[1], v[0]]);
            let w = uv[i];
            want3.extend([
                w.wrapping_add(i as u32),
                w.wrapping_add(1),
                w.wrapping_mul(2).wrapping_add(0),
            ]);
            want3.extend((0..3).map(|c| in3v[4 * i + c].wrapping_mul(3) ^ w));
            wanti.extend(v.map(|c| (c * 4096.0) as i32));
            wanth.extend((0..4).map(|c| {
                let h = f16_to_f32(inhv[4 * i + c]);
                f32_to_f16(f16_to_f32(f32_to_f16(h * 0.5)) + h)
            }));
            wants.extend([l[0] + l[3], y * y]);
        }
        let got4: Vec<f32> = download(&bufs[6])?;
        check_f32_exact("float4 results", &got4, &want4, |i| {
            let ops = [
                "v * b",
                "b - v",
                "v / float4(b)",
                "select(v, float4(b), v < float4(b))",
                "v + in4",
                "v.wzyx",
            ];
            format!(
                "thread {}, {} component {}, with v = float4(a, b, -a, 0.5), a = {}, b = {}",
                i / 24,
                ops[i / 4 % 6],
                i % 4,
                av[i / 24],
                bv[i / 24]
            )
        })?;
        let words: Vec<u32> = download(&bufs[7])?;
        let got3: Vec<u32> = words
            .chunks_exact(4)
            .flat_map(|c| [c[0], c[1], c[2]])
            .collect();
        check_eq("uint3 results", &got3, &want3, |i| {
            let ops = [
                "uint3(u, u + 1, u * 2) + thread_position_in_grid",
                "in3 * 3 ^ uint3(u)",
            ];
            format!("thread {}, {} component {}", i / 6, ops[i / 3 % 2], i % 3)
        })?;
        check_eq(
            "int4(v * 4096) (saturating)",
            &download::<i32>(&bufs[8])?,
            &wanti,
            |i| format!("thread {}, component {}", i / 4, i % 4),
        )?;
        check_eq(
            "half4 h * 0.5h + h",
            &download_u16_bits(&bufs[9])?,
            &wanth,
            |i| format!("thread {}, component {}", i / 4, i % 4),
        )?;
        check_f32_exact(
            "scalars extracted from vectors",
            &download::<f32>(&bufs[10])?,
            &wants,
            |i| {
                format!(
                    "thread {}, {}",
                    i / 2,
                    ["in4.x + in4.w", "(v * v).y"][i % 2]
                )
            },
        )
    })
}
