//! Conversions and bit reinterpretations.
//!
//! Value casts follow C with the GPU rules the IR fixes: float → integer
//! truncates toward zero and saturates at the type's range, NaN → 0 (Rust's
//! `as`, the reference); integer → float and float → narrower float round to
//! nearest even (correctly rounded, also from 64-bit integers); integer →
//! integer wraps (truncates) or sign/zero-extends; anything → bool is `!= 0`
//! (NaN is true). Bitcasts keep the bits, component 0 in the low bytes.
//! Integer → half conversions stay inside half's range (out-of-range ones are
//! undefined in C).

use crate::columns::*;
use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Scalar, Type};
use enigma_runtime::Runtime;
use rand::rngs::SmallRng;
use rand::Rng;

/// A column `T(x0)` with expected values `r(i)`.
fn cast_col<T: Bits>(label: &str, n: usize, to: Scalar, r: impl Fn(usize) -> T) -> Column {
    Column::new(
        label,
        to,
        move |x| x[0].cast(to),
        (0..n).map(|i| r(i).bits()).collect(),
    )
}

const F32_CAST_SPECIALS: [f32; 40] = [
    f32::NAN,
    -f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -0.0,
    0.5,
    -0.5,
    0.99,
    -0.99,
    1.5,
    -1.5,
    2.5,
    127.5,
    128.0,
    -128.5,
    -129.0,
    255.5,
    256.0,
    32767.5,
    32768.0,
    -32769.0,
    65535.9,
    65536.0,
    2147483520.0, // the largest f32 below 2^31
    2147483648.0,
    -2147483648.0,
    -2147483904.0,
    4294967040.0, // the largest f32 below 2^32
    4294967296.0,
    9.223371e18, // the largest f32 below 2^63
    9.223372e18,
    -9.223372e18,
    -9.223373e18, // the f32 just below -2^63
    1.8446743e19,
    1e30,
    -1e30,
    f32::MAX,
    65519.0, // rounds to the largest half
    65520.0, // rounds to half infinity
];

/// f32 → every integer type (saturating, NaN → 0), f16, bf16 and bool.
pub fn casts_from_f32(rt: &Runtime) -> CaseResult {
    seeded("casts_from_f32", |rng| {
        let mut x: Vec<f32> = F32_CAST_SPECIALS.to_vec();
        while x.len() < 2000 {
            x.push(match rng.gen_range(0..3) {
                0 => normal_f32(rng, -3, 66),
                1 => normal_f32(rng, -30, 17),
                _ => rng.gen_range(-300i32..300) as f32 + 0.5,
            });
        }
        let n = x.len();
        let columns = vec![
            cast_col("char(x)", n, Scalar::I8, |i| x[i] as i8),
            cast_col("uchar(x)", n, Scalar::U8, |i| x[i] as u8),
            cast_col("short(x)", n, Scalar::I16, |i| x[i] as i16),
            cast_col("ushort(x)", n, Scalar::U16, |i| x[i] as u16),
            cast_col("int(x)", n, Scalar::I32, |i| x[i] as i32),
            cast_col("uint(x)", n, Scalar::U32, |i| x[i] as u32),
            cast_col("long(x)", n, Scalar::I64, |i| x[i] as i64),
            cast_col("ulong(x)", n, Scalar::U64, |i| x[i] as u64),
            Column::new(
                "half(x)",
                Scalar::F16,
                |x| x[0].cast(Scalar::F16),
                x.iter().map(|&v| f32_to_f16(v) as u64).collect(),
            ),
            Column::new(
                "bfloat(x)",
                Scalar::BF16,
                |x| x[0].cast(Scalar::BF16),
                x.iter().map(|&v| f32_to_bf16(v) as u64).collect(),
            ),
            Column::new(
                "uint(bool(x))",
                Scalar::U32,
                |x| x[0].cast(Scalar::Bool).cast(Type::U32),
                x.iter().map(|&v| (v != 0.0) as u64).collect(),
            ),
        ];
        run_table(rt, "casts_from_f32", &[Input::new(&x)], columns)
    })
}

fn ints<T: Copy>(
    rng: &mut SmallRng,
    specials: &[T],
    n: usize,
    mut gen: impl FnMut(&mut SmallRng) -> T,
) -> Vec<T> {
    let mut v = specials.to_vec();
    while v.len() < n {
        v.push(gen(rng));
    }
    v
}

/// 32-bit integers → every other integer type (wrapping, sign- or
/// zero-extending), f32 (round to nearest even above 2^24), half, bool.
pub fn casts_from_32bit_ints(rt: &Runtime) -> CaseResult {
    seeded("casts_from_32bit_ints", |rng| {
        let s = ints(
            rng,
            &[
                0,
                1,
                -1,
                i32::MIN,
                i32::MAX,
                16777217,
                -16777217,
                16777219,
                33554435,
                255,
                256,
                -129,
                65535,
            ],
            1500,
            |r| {
                if r.gen() {
                    r.gen()
                } else {
                    r.gen_range(-70000..70000)
                }
            },
        );
        let n = s.len();
        let columns = vec![
            cast_col("char(i)", n, Scalar::I8, |i| s[i] as i8),
            cast_col("uchar(i)", n, Scalar::U8, |i| s[i] as u8),
            cast_col("short(i)", n, Scalar::I16, |i| s[i] as i16),
            cast_col("ushort(i)", n, Scalar::U16, |i| s[i] as u16),
            cast_col("uint(i)", n, Scalar::U32, |i| s[i] as u32),
            cast_col("long(i)", n, Scalar::I64, |i| s[i] as i64),
            cast_col("ulong(i)", n, Scalar::U64, |i| s[i] as u64),
            cast_col("float(i)", n, Scalar::F32, |i| s[i] as f32),
            cast_col("uint(bool(i))", n, Scalar::U32, |i| (s[i] != 0) as u32)
                .with(|x| x[0].cast(Scalar::Bool).cast(Type::U32)),
            Column::new(
                "half(i >> 16)",
                Scalar::F16,
                |x| (x[0] >> 16).cast(Scalar::F16),
                s.iter()
                    .map(|&v| f32_to_f16((v >> 16) as f32) as u64)
                    .collect(),
            ),
        ];
        run_table(rt, "casts_from_i32", &[Input::new(&s)], columns)?;

        let u = ints(
            rng,
            &[
                0,
                1,
                u32::MAX,
                0x8000_0000,
                16777217,
                4294967040,
                4294967168,
            ],
            1500,
            |r| r.gen(),
        );
        let n = u.len();
        let columns = vec![
            cast_col("int(u)", n, Scalar::I32, |i| u[i] as i32),
            cast_col("uchar(u)", n, Scalar::U8, |i| u[i] as u8),
            cast_col("short(u)", n, Scalar::I16, |i| u[i] as i16),
            cast_col("long(u)", n, Scalar::I64, |i| u[i] as i64),
            cast_col("ulong(u)", n, Scalar::U64, |i| u[i] as u64),
            cast_col("float(u)", n, Scalar::F32, |i| u[i] as f32),
            Column::new(
                "half(u >> 17)",
                Scalar::F16,
                |x| (x[0] >> 17u32).cast(Scalar::F16),
                u.iter()
                    .map(|&v| f32_to_f16((v >> 17) as f32) as u64)
                    .collect(),
            ),
        ];
        run_table(rt, "casts_from_u32", &[Input::new(&u)], columns)
    })
}

/// 8-, 16- and 64-bit integers → other types.
pub fn casts_from_narrow_and_wide_ints(rt: &Runtime) -> CaseResult {
    seeded("casts_from_narrow_and_wide_ints", |rng| {
        let c = ints(rng, &[0i8, 1, -1, i8::MIN, i8::MAX], 600, |r| r.gen());
        let n = c.len();
        run_table(
            rt,
            "casts_from_i8",
            &[Input::new(&c)],
            vec![
                cast_col("int(c)", n, Scalar::I32, |i| c[i] as i32),
                cast_col("uint(c)", n, Scalar::U32, |i| c[i] as u32),
                cast_col("uchar(c)", n, Scalar::U8, |i| c[i] as u8),
                cast_col("ushort(c)", n, Scalar::U16, |i| c[i] as u16),
                cast_col("long(c)", n, Scalar::I64, |i| c[i] as i64),
                cast_col("float(c)", n, Scalar::F32, |i| c[i] as f32),
                Column::new(
                    "half(c)",
                    Scalar::F16,
                    |x| x[0].cast(Scalar::F16),
                    c.iter().map(|&v| f32_to_f16(v as f32) as u64).collect(),
                ),
            ],
        )?;
        let b = ints(rng, &[0u8, 1, 127, 128, 255], 600, |r| r.gen());
        let n = b.len();
        run_table(
            rt,
            "casts_from_u8",
            &[Input::new(&b)],
            vec![
                cast_col("int(b)", n, Scalar::I32, |i| b[i] as i32),
                cast_col("char(b)", n, Scalar::I8, |i| b[i] as i8),
                cast_col("ulong(b)", n, Scalar::U64, |i| b[i] as u64),
                Column::new(
                    "half(b)",
                    Scalar::F16,
                    |x| x[0].cast(Scalar::F16),
                    b.iter().map(|&v| f32_to_f16(v as f32) as u64).collect(),
                ),
            ],
        )?;
        let h = ints(rng, &[0i16, -1, i16::MIN, i16::MAX], 600, |r| r.gen());
        let n = h.len();
        run_table(
            rt,
            "casts_from_i16",
            &[Input::new(&h)],
            vec![
                cast_col("int(h)", n, Scalar::I32, |i| h[i] as i32),
                cast_col("ushort(h)", n, Scalar::U16, |i| h[i] as u16),
                cast_col("uint(h)", n, Scalar::U32, |i| h[i] as u32),
                cast_col("float(h)", n, Scalar::F32, |i| h[i] as f32),
                Column::new(
                    "half(h)",
                    Scalar::F16,
                    |x| x[0].cast(Scalar::F16),
                    h.iter().map(|&v| f32_to_f16(v as f32) as u64).collect(),
                ),
            ],
        )?;
        let w = ints(rng, &[0u16, 1, 2048, 2049, 4097, 65535], 600, |r| r.gen());
        let n = w.len();
        run_table(
            rt,
            "casts_from_u16",
            &[Input::new(&w)],
            vec![
                cast_col("int(w)", n, Scalar::I32, |i| w[i] as i32),
                cast_col("short(w)", n, Scalar::I16, |i| w[i] as i16),
                cast_col("float(w)", n, Scalar::F32, |i| w[i] as f32),
                // 2049 is not a half: rounds to even (2048); 4097 → 4096.
                Column::new(
                    "half(w >> 1)",
                    Scalar::F16,
                    |x| (x[0] >> 1).cast(Scalar::F16),
                    w.iter()
                        .map(|&v| f32_to_f16((v >> 1) as f32) as u64)
                        .collect(),
                ),
            ],
        )?;
        let l = ints(
            rng,
            &[0i64, -1, i64::MIN, i64::MAX, 1 << 40, -(1 << 35) - 7],
            600,
            |r| {
                if r.gen() {
                    r.gen()
                } else {
                    r.gen_range(-(1i64 << 40)..(1i64 << 40))
                }
            },
        );
        let n = l.len();
        run_table(
            rt,
            "casts_from_i64",
            &[Input::new(&l)],
            vec![
                cast_col("int(l)", n, Scalar::I32, |i| l[i] as i32),
                cast_col("uint(l)", n, Scalar::U32, |i| l[i] as u32),
                cast_col("short(l)", n, Scalar::I16, |i| l[i] as i16),
                cast_col("ulong(l)", n, Scalar::U64, |i| l[i] as u64),
            ],
        )?;
        let q = ints(rng, &[0u64, u64::MAX, 1 << 63, (1 << 32) + 5], 600, |r| {
            r.gen()
        });
        let n = q.len();
        run_table(
            rt,
            "casts_from_u64",
            &[Input::new(&q)],
            vec![
                cast_col("uint(q)", n, Scalar::U32, |i| q[i] as u32),
                cast_col("long(q)", n, Scalar::I64, |i| q[i] as i64),
                cast_col("uchar(q)", n, Scalar::U8, |i| q[i] as u8),
            ],
        )
    })
}

/// 64-bit integers → f32, correctly rounded (one rounding, to nearest even).
/// Values chosen so that rounding through f64 first (53 bits, then 24) lands
/// on an f32 midpoint and ties the wrong way; plus random 64-bit values.
pub fn casts_int64_to_f32_rounding(rt: &Runtime) -> CaseResult {
    seeded("casts_int64_to_f32_rounding", |rng| {
        let l = ints(
            rng,
            &[
                (1 << 60) + (1 << 36) + 1,
                -((1 << 60) + (1 << 36) + 1),
                (1 << 62) + (1 << 38) + 1,
                (1 << 55) + (1 << 31) + 1,
                (1 << 53) + 1,
                i64::MAX,
                i64::MIN,
            ],
            300,
            |r| r.gen(),
        );
        let n = l.len();
        run_table(
            rt,
            "casts_i64_to_f32",
            &[Input::new(&l)],
            vec![cast_col("float(l)", n, Scalar::F32, |i| l[i] as f32)],
        )?;
        let q = ints(
            rng,
            &[
                (1 << 63) + (1 << 39) + 1,
                (1 << 60) + (1 << 36) + 1,
                u64::MAX,
                (1 << 24) + 1,
            ],
            300,
            |r| r.gen(),
        );
        let n = q.len();
        run_table(
            rt,
            "casts_u64_to_f32",
            &[Input::new(&q)],
            vec![cast_col("float(q)", n, Scalar::F32, |i| q[i] as f32)],
        )
    })
}

/// Every f16 bit pattern → f32 (exact), int and ushort (saturating, NaN → 0),
/// bfloat (rounded); every bf16 pattern except f32-subnormal ones → f32
/// (exact), half (rounded), int.
pub fn casts_half_and_bfloat(rt: &Runtime) -> CaseResult {
    let halves: Vec<u16> = (0..=0xffffu16).collect();
    let hf: Vec<f32> = halves.iter().map(|&h| f16_to_f32(h)).collect();
    let n = halves.len();
    run_table(
        rt,
        "casts_from_f16",
        &[Input::half(&halves)],
        vec![
            cast_col("float(h)", n, Scalar::F32, |i| hf[i]),
            cast_col("int(h)", n, Scalar::I32, |i| hf[i] as i32),
            cast_col("ushort(h)", n, Scalar::U16, |i| hf[i] as u16),
            cast_col("char(h)", n, Scalar::I8, |i| hf[i] as i8),
            Column::new(
                "bfloat(h)",
                Scalar::BF16,
                |x| x[0].cast(Scalar::BF16),
                hf.iter().map(|&v| f32_to_bf16(v) as u64).collect(),
            ),
        ],
    )?;
    // bf16 patterns whose f32 value is subnormal are left out: GPUs may flush those.
    let bfs: Vec<u16> = (0..=0xffffu16)
        .filter(|b| b & 0x7f80 != 0 || b & 0x7f == 0)
        .collect();
    let bf: Vec<f32> = bfs.iter().map(|&b| bf16_to_f32(b)).collect();
    let n = bfs.len();
    run_table(
        rt,
        "casts_from_bf16",
        &[Input::bfloat(&bfs)],
        vec![
            cast_col("float(b)", n, Scalar::F32, |i| bf[i]),
            Column::new(
                "half(b)",
                Scalar::F16,
                |x| x[0].cast(Scalar::F16),
                bf.iter().map(|&v| f32_to_f16(v) as u64).collect(),
            ),
            cast_col("int(b)", n, Scalar::I32, |i| bf[i] as i32),
        ],
    )
}

/// `as_type<T>(x)`: uint ↔ float/int, uint → half2/ushort2/uchar4
/// components, half2 → uint, ulong ↔ uint2; component 0 is the low bytes.
pub fn bitcasts(rt: &Runtime) -> CaseResult {
    seeded("bitcasts", |rng| {
        let n = 1500;
        let u: Vec<u32> = (0..n).map(|_| rng.gen()).collect();
        // Non-NaN halves, so no NaN passes through a half register.
        let half = |r: &mut SmallRng| loop {
            let h: u16 = r.gen();
            if h & 0x7c00 != 0x7c00 {
                break h;
            }
        };
        let h0: Vec<u16> = (0..n).map(|_| half(rng)).collect();
        let h1: Vec<u16> = (0..n).map(|_| half(rng)).collect();
        let f: Vec<f32> = (0..n).map(|_| normal_f32(rng, -100, 100)).collect();
        let l: Vec<u64> = (0..n).map(|_| rng.gen()).collect();
        let half2 = Type::vector(Scalar::F16, 2);
        let ushort2 = Type::vector(Scalar::U16, 2);
        let uchar4 = Type::vector(Scalar::U8, 4);
        let uint2 = Type::vector(Scalar::U32, 2);
        let columns = vec![
            Column::new(
                "as_type<float>(u)",
                Scalar::F32,
                |x| x[0].bitcast(Type::F32),
                u.iter().map(|&v| v as u64).collect(),
            ),
            Column::new(
                "as_type<int>(u)",
                Scalar::I32,
                |x| x[0].bitcast(Type::I32),
                u.iter().map(|&v| v as u64).collect(),
            ),
            Column::new(
                "as_type<uint>(as_type<float>(u))",
                Scalar::U32,
                |x| x[0].bitcast(Type::F32).bitcast(Type::U32),
                u.iter().map(|&v| v as u64).collect(),
            ),
            Column::new(
                "as_type<half2>(u).x",
                Scalar::F16,
                move |x| x[0].bitcast(half2).x(),
                u.iter().map(|&v| (v & 0xffff) as u64).collect(),
            ),
            Column::new(
                "as_type<half2>(u).y",
                Scalar::F16,
                move |x| x[0].bitcast(half2).y(),
                u.iter().map(|&v| (v >> 16) as u64).collect(),
            ),
            Column::new(
                "as_type<ushort2>(u).y",
                Scalar::U16,
                move |x| x[0].bitcast(ushort2).y(),
                u.iter().map(|&v| (v >> 16) as u64).collect(),
            ),
            Column::new(
                "as_type<uchar4>(u).z",
                Scalar::U8,
                move |x| x[0].bitcast(uchar4).z(),
                u.iter().map(|&v| ((v >> 16) & 0xff) as u64).collect(),
            ),
            Column::new(
                "as_type<uchar4>(u).w",
                Scalar::U8,
                move |x| x[0].bitcast(uchar4).w(),
                u.iter().map(|&v| (v >> 24) as u64).collect(),
            ),
            Column::new(
                "as_type<uint>(ushort2(u.y, u.x))",
                Scalar::U32,
                move |x| {
                    let v = x[0].bitcast(ushort2);
                    vector(ushort2, &[v.y(), v.x()]).bitcast(Type::U32)
                },
                u.iter().map(|&v| v.rotate_left(16) as u64).collect(),
            ),
            Column::new(
                "as_type<uint>(half2(h0, h1))",
                Scalar::U32,
                move |x| vector(half2, &[x[1], x[2]]).bitcast(Type::U32),
                (0..n)
                    .map(|i| (h0[i] as u64) | (h1[i] as u64) << 16)
                    .collect(),
            ),
            Column::new(
                "as_type<uint>(f)",
                Scalar::U32,
                |x| x[3].bitcast(Type::U32),
                f.iter().map(|&v| v.to_bits() as u64).collect(),
            ),
            Column::new(
                "as_type<int>(f)",
                Scalar::I32,
                |x| x[3].bitcast(Type::I32),
                f.iter().map(|&v| v.to_bits() as u64).collect(),
            ),
            Column::new(
                "as_type<uint2>(l).x",
                Scalar::U32,
                move |x| x[4].bitcast(uint2).x(),
                l.iter().map(|&v| v & 0xffff_ffff).collect(),
            ),
            Column::new(
                "as_type<uint2>(l).y",
                Scalar::U32,
                move |x| x[4].bitcast(uint2).y(),
                l.iter().map(|&v| v >> 32).collect(),
            ),
            Column::new(
                "as_type<ulong>(uint2(u, ~u))",
                Scalar::U64,
                move |x| vector(uint2, &[x[0], !x[0]]).bitcast(Type::U64),
                u.iter().map(|&v| v as u64 | ((!v as u64) << 32)).collect(),
            ),
        ];
        run_table(
            rt,
            "bitcasts",
            &[
                Input::new(&u),
                Input::half(&h0),
                Input::half(&h1),
                Input::new(&f),
                Input::new(&l),
            ],
            columns,
        )
    })
}
