//! Arithmetic: every binary and unary operator on every integer width and on
//! f32, f16 and (through casts) bf16; C semantics of `/` and `%` with negative
//! operands (truncation toward zero); shifts whose amount is taken modulo the
//! width; wrapping integer arithmetic; comparisons (NaN compares unordered).
//!
//! All exact. Float `+ - * /` and `%` (fmod) are IEEE and correctly rounded;
//! `f16`/`bf16` arithmetic rounds to the type after every operation, whose
//! reference is the f32 result rounded once to the type — exact, because f32
//! carries at least `2p + 2` significant bits for both (p = 11 and 8).
//! Division by zero and `MIN / -1` are avoided: they are undefined on GPUs.

use crate::columns::*;
use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Scalar, Type};
use enigma_runtime::Runtime;
use rand::distributions::{Distribution, Standard};
use rand::rngs::SmallRng;
use rand::Rng;
use std::fmt::Debug;

/// An integer type with its reference (Rust's wrapping) operations.
pub(crate) trait IntRef: Bits + Debug + PartialOrd + 'static
where
    Standard: Distribution<Self>,
{
    const BITS: u32;
    const SIGNED: bool;
    const MIN: Self;
    const MAX: Self;
    fn from_i64(v: i64) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn rem(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn shl(self, o: Self) -> Self;
    fn shr(self, o: Self) -> Self;
    fn not(self) -> Self;
    fn neg(self) -> Self;
    fn is_zero(self) -> bool;
}

macro_rules! int_ref {
    ($($t:ty: $signed:expr),* $(,)?) => {$(
        impl IntRef for $t {
            const BITS: u32 = <$t>::BITS;
            const SIGNED: bool = $signed;
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            fn from_i64(v: i64) -> Self { v as $t }
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            // Rust's integer division truncates toward zero, as C's does.
            fn div(self, o: Self) -> Self { self.wrapping_div(o) }
            fn rem(self, o: Self) -> Self { self.wrapping_rem(o) }
            fn and(self, o: Self) -> Self { self & o }
            fn or(self, o: Self) -> Self { self | o }
            fn xor(self, o: Self) -> Self { self ^ o }
            // `wrapping_sh*` take the amount modulo the width.
            fn shl(self, o: Self) -> Self { self.wrapping_shl(o as u32) }
            fn shr(self, o: Self) -> Self { self.wrapping_shr(o as u32) }
            fn not(self) -> Self { !self }
            fn neg(self) -> Self { (0 as $t).wrapping_sub(self) }
            fn is_zero(self) -> bool { self == 0 }
        }
    )*};
}

int_ref!(i8: true, u8: false, i16: true, u16: false, i32: true, u32: false, i64: true, u64: false);

fn pick_int<T: IntRef>(rng: &mut SmallRng) -> T
where
    Standard: Distribution<T>,
{
    match rng.gen_range(0..8) {
        0 => [
            T::MIN,
            T::MAX,
            T::from_i64(0),
            T::from_i64(1),
            T::from_i64(-1),
        ][rng.gen_range(0..5)],
        1..=3 => T::from_i64(rng.gen_range(-100..100)),
        _ => rng.gen(),
    }
}

/// Every operator on one integer type: `a op b`, `a / d`, `a % d` (d ≠ 0,
/// not `MIN / -1`), `a << s`, `a >> s` (s in 0..4·width), `~a`, `-a` (or
/// `a * 3 + 7` with weak literals for unsigned types), and the six
/// comparisons as `uint`.
fn int_ops<T: IntRef>(rt: &Runtime, rng: &mut SmallRng, name: &str) -> CaseResult
where
    Standard: Distribution<T>,
{
    let mut a: Vec<T> = vec![];
    let mut d: Vec<T> = vec![];
    // C's truncating division with negative operands, explicitly.
    let pairs: &[(i64, i64)] = if T::SIGNED {
        &[
            (-7, 2),
            (7, -2),
            (-7, -2),
            (7, 2),
            (-1, 2),
            (1, -2),
            (-8, 3),
            (-9, -4),
        ]
    } else {
        &[(7, 2), (9, 4)]
    };
    for &(x, y) in pairs {
        a.push(T::from_i64(x));
        d.push(T::from_i64(y));
    }
    while a.len() < 2000 {
        a.push(pick_int(rng));
        let mut y: T = if rng.gen::<bool>() {
            T::from_i64(rng.gen_range(-9..10))
        } else {
            pick_int(rng)
        };
        if y.is_zero() {
            y = T::from_i64(3);
        }
        d.push(y);
    }
    let n = a.len();
    for i in 0..n {
        if T::SIGNED && a[i] == T::MIN && d[i] == T::from_i64(-1) {
            d[i] = T::from_i64(1);
        }
    }
    let b: Vec<T> = (0..n)
        .map(|i| if i % 5 == 0 { a[i] } else { pick_int(rng) })
        .collect();
    let s: Vec<T> = (0..n)
        .map(|_| T::from_i64(rng.gen_range(0..4 * T::BITS as i64)))
        .collect();
    let ty = T::SCALAR;
    let col = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(usize) -> T| {
        Column::new(label, ty, f, (0..n).map(|i| r(i).bits()).collect())
    };
    let cmp = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(usize) -> bool| {
        Column::new(
            label,
            Scalar::U32,
            move |x| f(x).cast(Type::U32),
            (0..n).map(|i| r(i) as u64).collect(),
        )
    };
    let mut columns = vec![
        col("a + b", |x| x[0] + x[1], &|i| a[i].add(b[i])),
        col("a - b", |x| x[0] - x[1], &|i| a[i].sub(b[i])),
        col("a * b", |x| x[0] * x[1], &|i| a[i].mul(b[i])),
        col("a / d", |x| x[0] / x[2], &|i| a[i].div(d[i])),
        col("a % d", |x| x[0] % x[2], &|i| a[i].rem(d[i])),
        col("a & b", |x| x[0] & x[1], &|i| a[i].and(b[i])),
        col("a | b", |x| x[0] | x[1], &|i| a[i].or(b[i])),
        col("a ^ b", |x| x[0] ^ x[1], &|i| a[i].xor(b[i])),
        col("a << s", |x| x[0] << x[3], &|i| a[i].shl(s[i])),
        col("a >> s", |x| x[0] >> x[3], &|i| a[i].shr(s[i])),
        col("~a", |x| !x[0], &|i| a[i].not()),
        cmp("a == b", |x| x[0].eq(x[1]), &|i| a[i] == b[i]),
        cmp("a != b", |x| x[0].ne(x[1]), &|i| a[i] != b[i]),
        cmp("a < b", |x| x[0].lt(x[1]), &|i| a[i] < b[i]),
        cmp("a <= b", |x| x[0].le(x[1]), &|i| a[i] <= b[i]),
        cmp("a > b", |x| x[0].gt(x[1]), &|i| a[i] > b[i]),
        cmp("a >= b", |x| x[0].ge(x[1]), &|i| a[i] >= b[i]),
    ];
    if T::SIGNED {
        columns.push(col("-a", |x| -x[0], &|i| a[i].neg()));
    } else {
        columns.push(col("a * 3 + 7", |x| x[0] * 3 + 7, &|i| {
            a[i].mul(T::from_i64(3)).add(T::from_i64(7))
        }));
    }
    run_table(
        rt,
        name,
        &[
            Input::new(&a),
            Input::new(&b),
            Input::new(&d),
            Input::new(&s),
        ],
        columns,
    )
}

macro_rules! int_cases {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        #[doc = concat!("Every operator on `", stringify!($t), "`: wrapping, C division, shifts modulo the width, comparisons.")]
        pub fn $name(rt: &Runtime) -> CaseResult {
            seeded(stringify!($name), |rng| int_ops::<$t>(rt, rng, stringify!($name)))
        }
    )*};
}

int_cases!(int_ops_i32: i32, int_ops_u32: u32, int_ops_i8: i8, int_ops_u8: u8, int_ops_i16: i16, int_ops_u16: u16, int_ops_i64: i64, int_ops_u64: u64);

/// f32 values that exercise IEEE corner cases in every pairing.
pub(crate) const F32_SPECIALS: [f32; 14] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    3.0,
    -7.25,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    f32::MAX,
    -f32::MAX,
    1e-3,
    1e30,
];

/// `+ - * / %` and unary `-` on f32, bit-exact (NaN matches any NaN), and the
/// six comparisons (unordered with NaN: only `!=` is true). Random operands
/// are normal numbers in ±[2^-20, 2^20] so no result is subnormal.
pub fn float_ops_f32(rt: &Runtime) -> CaseResult {
    seeded("float_ops_f32", |rng| {
        let (mut a, mut b) = (vec![], vec![]);
        for &x in &F32_SPECIALS {
            for &y in &F32_SPECIALS {
                a.push(x);
                b.push(y);
            }
        }
        while a.len() < 2000 {
            let x = normal_f32(rng, -20, 20);
            a.push(x);
            b.push(if rng.gen_range(0..6) == 0 {
                x
            } else {
                normal_f32(rng, -20, 20)
            });
        }
        let n = a.len();
        let col = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(f32, f32) -> f32| {
            Column::new(
                label,
                Scalar::F32,
                f,
                (0..n).map(|i| r(a[i], b[i]).bits()).collect(),
            )
        };
        let cmp = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(f32, f32) -> bool| {
            Column::new(
                label,
                Scalar::U32,
                move |x| f(x).cast(Type::U32),
                (0..n).map(|i| r(a[i], b[i]) as u64).collect(),
            )
        };
        let columns = vec![
            col("a + b", |x| x[0] + x[1], &|x, y| x + y),
            col("a - b", |x| x[0] - x[1], &|x, y| x - y),
            col("a * b", |x| x[0] * x[1], &|x, y| x * y),
            col("a / b", |x| x[0] / x[1], &|x, y| x / y),
            col("a % b (fmod)", |x| x[0] % x[1], &|x, y| x % y),
            col("-a", |x| -x[0], &|x, _| -x),
            cmp("a == b", |x| x[0].eq(x[1]), &|x, y| x == y),
            cmp("a != b", |x| x[0].ne(x[1]), &|x, y| x != y),
            cmp("a < b", |x| x[0].lt(x[1]), &|x, y| x < y),
            cmp("a <= b", |x| x[0].le(x[1]), &|x, y| x <= y),
            cmp("a > b", |x| x[0].gt(x[1]), &|x, y| x > y),
            cmp("a >= b", |x| x[0].ge(x[1]), &|x, y| x >= y),
        ];
        run_table(
            rt,
            "float_ops_f32",
            &[Input::new(&a), Input::new(&b)],
            columns,
        )
    })
}

/// A random half with magnitude in [2^-6, 2^6), as bits.
fn half_normal(rng: &mut SmallRng) -> u16 {
    let e: u16 = rng.gen_range(15 - 6..15 + 6);
    let m: u16 = rng.gen_range(0..1024);
    let s: u16 = if rng.gen() { 0x8000 } else { 0 };
    s | e << 10 | m
}

/// `+ - * /`, unary `-` and comparisons on f16 buffers (values are f16 bit
/// patterns); every result rounded to half.
pub fn float_ops_f16(rt: &Runtime) -> CaseResult {
    seeded("float_ops_f16", |rng| {
        let specials: [u16; 8] = [
            0x0000, 0x8000, 0x3c00, 0xc500, 0x7bff, 0x7c00, 0xfc00, 0x7e00,
        ];
        let (mut a, mut b) = (vec![], vec![]);
        for &x in &specials {
            for &y in &specials {
                a.push(x);
                b.push(y);
            }
        }
        while a.len() < 2000 {
            let x = half_normal(rng);
            a.push(x);
            b.push(if rng.gen_range(0..6) == 0 {
                x
            } else {
                half_normal(rng)
            });
        }
        let n = a.len();
        let h = |i: usize| (f16_to_f32(a[i]), f16_to_f32(b[i]));
        let col = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(f32, f32) -> f32| {
            Column::new(
                label,
                Scalar::F16,
                f,
                (0..n)
                    .map(|i| f32_to_f16(r(h(i).0, h(i).1)) as u64)
                    .collect(),
            )
        };
        let cmp = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(f32, f32) -> bool| {
            Column::new(
                label,
                Scalar::U32,
                move |x| f(x).cast(Type::U32),
                (0..n).map(|i| r(h(i).0, h(i).1) as u64).collect(),
            )
        };
        let columns = vec![
            col("a + b", |x| x[0] + x[1], &|x, y| x + y),
            col("a - b", |x| x[0] - x[1], &|x, y| x - y),
            col("a * b", |x| x[0] * x[1], &|x, y| x * y),
            col("a / b", |x| x[0] / x[1], &|x, y| x / y),
            col("-a", |x| -x[0], &|x, _| -x),
            col(
                "(a + b) * a: rounded after each op",
                |x| (x[0] + x[1]) * x[0],
                &|x, y| f16_to_f32(f32_to_f16(x + y)) * x,
            ),
            cmp("a == b", |x| x[0].eq(x[1]), &|x, y| x == y),
            cmp("a < b", |x| x[0].lt(x[1]), &|x, y| x < y),
            cmp("a >= b", |x| x[0].ge(x[1]), &|x, y| x >= y),
        ];
        run_table(
            rt,
            "float_ops_f16",
            &[Input::half(&a), Input::half(&b)],
            columns,
        )
    })
}

/// bf16 arithmetic reached through casts from f32 and back:
/// `float(bfloat(a) op bfloat(b))`.
pub fn float_ops_bf16_via_casts(rt: &Runtime) -> CaseResult {
    seeded("float_ops_bf16_via_casts", |rng| {
        let n = 1500;
        let a: Vec<f32> = (0..n).map(|_| normal_f32(rng, -20, 20)).collect();
        let b: Vec<f32> = (0..n).map(|_| normal_f32(rng, -20, 20)).collect();
        let bf = |x: f32| bf16_to_f32(f32_to_bf16(x));
        let col = |label: &str, f: fn(Ex, Ex) -> Ex, r: &dyn Fn(f32, f32) -> f32| {
            Column::new(
                label,
                Scalar::F32,
                move |x| f(x[0].cast(Scalar::BF16), x[1].cast(Scalar::BF16)).cast(Type::F32),
                (0..n).map(|i| bf(r(bf(a[i]), bf(b[i]))).bits()).collect(),
            )
        };
        let columns = vec![
            col("bfloat(a) + bfloat(b)", |x, y| x + y, &|x, y| x + y),
            col("bfloat(a) - bfloat(b)", |x, y| x - y, &|x, y| x - y),
            col("bfloat(a) * bfloat(b)", |x, y| x * y, &|x, y| x * y),
            col("bfloat(a) / bfloat(b)", |x, y| x / y, &|x, y| x / y),
        ];
        run_table(
            rt,
            "float_ops_bf16",
            &[Input::new(&a), Input::new(&b)],
            columns,
        )
    })
}

/// i8 and u16 arithmetic reached through casts from 32-bit values: wraps at
/// the narrow width, shifts modulo 8 / 16, narrow signed comparison.
pub fn narrow_int_ops_via_casts(rt: &Runtime) -> CaseResult {
    seeded("narrow_int_ops_via_casts", |rng| {
        let n = 1500;
        let a: Vec<i32> = (0..n).map(|_| pick_int(rng)).collect();
        let b: Vec<i32> = (0..n).map(|_| pick_int(rng)).collect();
        let s: Vec<i32> = (0..n).map(|_| rng.gen_range(0..40)).collect();
        let i8_col = |label: &str, f: fn(&[Ex]) -> Ex, r: &dyn Fn(i8, i8, i8) -> i8| {
            Column::new(
                label,
                Scalar::I32,
                f,
                (0..n)
                    .map(|i| (r(a[i] as i8, b[i] as i8, s[i] as i8) as i32).bits())
                    .collect(),
            )
        };
        let columns = vec![
            i8_col(
                "int(char(a) + char(b))",
                |x| {
                    let [p, q, _] = i8s(x);
                    (p + q).cast(Type::I32)
                },
                &|p, q, _| p.wrapping_add(q),
            ),
            i8_col(
                "int(char(a) * char(b))",
                |x| {
                    let [p, q, _] = i8s(x);
                    (p * q).cast(Type::I32)
                },
                &|p, q, _| p.wrapping_mul(q),
            ),
            i8_col(
                "int(char(a) << char(s))",
                |x| {
                    let [p, _, r] = i8s(x);
                    (p << r).cast(Type::I32)
                },
                &|p, _, r| p.wrapping_shl(r as u32),
            ),
            i8_col(
                "int(char(a) >> char(s))",
                |x| {
                    let [p, _, r] = i8s(x);
                    (p >> r).cast(Type::I32)
                },
                &|p, _, r| p.wrapping_shr(r as u32),
            ),
            i8_col(
                "int(char(a) < char(b))",
                |x| {
                    let [p, q, _] = i8s(x);
                    p.lt(q).cast(Type::I32)
                },
                &|p, q, _| (p < q) as i8,
            ),
            Column::new(
                "uint(ushort(a) * ushort(b))",
                Scalar::U32,
                |x| (x[0].cast(Scalar::U16) * x[1].cast(Scalar::U16)).cast(Type::U32),
                (0..n)
                    .map(|i| ((a[i] as u16).wrapping_mul(b[i] as u16) as u32).bits())
                    .collect(),
            ),
            Column::new(
                "uint(ushort(a) >> ushort(s))",
                Scalar::U32,
                |x| (x[0].cast(Scalar::U16) >> x[2].cast(Scalar::U16)).cast(Type::U32),
                (0..n)
                    .map(|i| ((a[i] as u16).wrapping_shr(s[i] as u32) as u32).bits())
                    .collect(),
            ),
            Column::new(
                "uint(ushort(a) - ushort(b))",
                Scalar::U32,
                |x| (x[0].cast(Scalar::U16) - x[1].cast(Scalar::U16)).cast(Type::U32),
                (0..n)
                    .map(|i| ((a[i] as u16).wrapping_sub(b[i] as u16) as u32).bits())
                    .collect(),
            ),
        ];
        run_table(
            rt,
            "narrow_int_ops",
            &[Input::new(&a), Input::new(&b), Input::new(&s)],
            columns,
        )
    })
}

fn i8s(x: &[Ex]) -> [Ex; 3] {
    [
        x[0].cast(Scalar::I8),
        x[1].cast(Scalar::I8),
        x[2].cast(Scalar::I8),
    ]
}

/// `!b`, `&&`, `||` and `==` on bools built from comparisons.
pub fn bool_ops(rt: &Runtime) -> CaseResult {
    seeded("bool_ops", |rng| {
        let n = 300;
        let a: Vec<u32> = (0..n).map(|_| rng.gen_range(0..4)).collect();
        let b: Vec<u32> = (0..n).map(|_| rng.gen_range(0..4)).collect();
        let col = |label: &str, f: fn(Ex, Ex) -> Ex, r: &dyn Fn(bool, bool) -> bool| {
            Column::new(
                label,
                Scalar::U32,
                move |x| f(x[0].lt(2u32), x[1].lt(2u32)).cast(Type::U32),
                (0..n).map(|i| r(a[i] < 2, b[i] < 2) as u64).collect(),
            )
        };
        let columns = vec![
            col("!p", |p, _| !p, &|p, _| !p),
            col("p && q", |p, q| p.and(q), &|p, q| p && q),
            col("p || q", |p, q| p.or(q), &|p, q| p || q),
            col("p == q", |p, q| p.eq(q), &|p, q| p == q),
            col("p != q", |p, q| p.ne(q), &|p, q| p != q),
            col("p & q", |p, q| p & q, &|p, q| p & q),
            col("p ^ q", |p, q| p ^ q, &|p, q| p ^ q),
        ];
        run_table(rt, "bool_ops", &[Input::new(&a), Input::new(&b)], columns)
    })
}

/// Signed values keep their sign when loaded, whatever the mask: `i32`,
/// `short` and `char` elements loaded by full and by partial SIMD groups,
/// widened to `long` and compared with 0.
pub fn int_loads_keep_sign(rt: &Runtime) -> CaseResult {
    let n = 40usize; // one full SIMD group and one of 8 lanes
    let a: Vec<i32> = (0..n as i32)
        .map(|i| if i % 2 == 0 { -7 - i } else { i })
        .collect();
    let h: Vec<i16> = a.iter().map(|&v| v as i16).collect();
    let c: Vec<i8> = a.iter().map(|&v| v as i8).collect();
    let columns = vec![
        Column::new(
            "long(int)",
            Scalar::I64,
            |x| x[0].cast(Type::I64),
            a.iter().map(|&v| (v as i64).bits()).collect(),
        ),
        Column::new(
            "int < 0",
            Scalar::U32,
            |x| x[0].lt(0).cast(Type::U32),
            a.iter().map(|&v| (v < 0) as u64).collect(),
        ),
        Column::new(
            "int / 2",
            Scalar::I32,
            |x| x[0] / 2,
            a.iter().map(|&v| (v / 2).bits()).collect(),
        ),
        Column::new(
            "long(short)",
            Scalar::I64,
            |x| x[1].cast(Type::I64),
            h.iter().map(|&v| (v as i64).bits()).collect(),
        ),
        Column::new(
            "long(char)",
            Scalar::I64,
            |x| x[2].cast(Type::I64),
            c.iter().map(|&v| (v as i64).bits()).collect(),
        ),
    ];
    run_table(
        rt,
        "int_loads_keep_sign",
        &[Input::new(&a), Input::new(&h), Input::new(&c)],
        columns,
    )
}
