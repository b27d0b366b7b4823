//! Kernels for the code generator's tests: one per group of IR constructs,
//! plus the seed kernels of `enigma_kernels`. Each is validated on the way
//! out, so every test starts from what a backend is promised.

#![allow(dead_code)]

use enigma_ir::builder::*;
use enigma_ir::{
    validate, Access, AtomicOp, Intrinsic, Kernel, KernelInfo, Literal, LiteralValue, MemFlags, Precision, Scalar, Type,
    ValidationOptions,
};

pub fn validated(kernel: Kernel) -> (Kernel, KernelInfo) {
    let info = validate(&kernel, &ValidationOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    (kernel, info)
}

fn finish(k: KernelBuilder) -> Kernel {
    k.finish().expect("expressions of this builder")
}

fn vt(s: Scalar, w: u8) -> Type {
    Type::vector(s, w)
}

/// Every binary operator on `u32`, the compound assignments, and `&&`/`||`.
pub fn binary_ops_u32() -> Kernel {
    let mut k = KernelBuilder::new("binary_ops_u32");
    let a = k.buffer("a", Type::U32, Access::Read);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let flags = k.buffer("flags", Type::BOOL, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let i = k.let_("i", thread_position_in_grid().x());
    let x = k.let_("x", a.get(i));
    let y = k.let_("y", a.get(i + 1u32));
    k.store(out.at(0u32), x + y);
    k.store(out.at(1u32), x - y);
    k.store(out.at(2u32), x * y);
    k.store(out.at(3u32), x / y);
    k.store(out.at(4u32), x % y);
    k.store(out.at(5u32), x & y);
    k.store(out.at(6u32), x | y);
    k.store(out.at(7u32), x ^ y);
    k.store(out.at(8u32), x << y);
    k.store(out.at(9u32), x >> y);
    k.store(out.at(10u32), x << 3u32);
    k.store(out.at(11u32), x >> 35u32);
    k.store(flags.at(0u32), x.eq(y));
    k.store(flags.at(1u32), x.ne(y));
    k.store(flags.at(2u32), x.lt(y));
    k.store(flags.at(3u32), x.le(y));
    k.store(flags.at(4u32), x.gt(y));
    k.store(flags.at(5u32), x.ge(y));
    k.store(flags.at(6u32), x.lt(n).and(y.lt(n)).or(x.eq(0u32)));
    k.store(flags.at(7u32), x.lt(n).and(y.lt(n).or(x.eq(0u32))));
    // Precedence: the tree decides the parentheses.
    k.store(out.at(12u32), (x + y) * (x - y));
    k.store(out.at(13u32), x - (y - n));
    k.store(out.at(14u32), x - y - n);
    k.store(out.at(15u32), ((x & 255u32) + (y | n)) ^ (x << 2u32));
    k.store(flags.at(8u32), (x & 1u32).eq(y & 1u32));
    let acc = k.var("acc", x);
    k.assign(acc, acc + y);
    k.assign(acc, acc - y);
    k.assign(acc, acc * y);
    k.assign(acc, acc / y);
    k.assign(acc, acc % y);
    k.assign(acc, acc & y);
    k.assign(acc, acc | y);
    k.assign(acc, acc ^ y);
    k.assign(acc, acc << y);
    k.assign(acc, acc >> 1u32);
    k.assign(acc, y - acc);
    k.store(out.at(16u32), acc);
    finish(k)
}

/// Float arithmetic: `fmod` for `%`, negation, comparisons, literals.
pub fn binary_ops_f32() -> Kernel {
    let mut k = KernelBuilder::new("binary_ops_f32");
    let a = k.buffer("a", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let flags = k.buffer("flags", Type::BOOL, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    let x = k.let_("x", a.get(i));
    let y = k.let_("y", a.get(i + 1u32));
    k.store(out.at(0u32), x + y * 0.5f32);
    k.store(out.at(1u32), (x - y) / 3.0f32);
    k.store(out.at(2u32), x % y);
    k.store(out.at(3u32), -x);
    k.store(out.at(4u32), -(-x));
    k.store(out.at(5u32), x * -2.5f32);
    k.store(out.at(6u32), lit(Scalar::F32, 1e-8) + lit(Scalar::F32, 1e20) + lit(Scalar::F32, 0.1));
    k.store(out.at(7u32), Ex::literal(Literal { ty: Scalar::F32, value: LiteralValue::Float(f64::INFINITY) }));
    k.store(out.at(8u32), Ex::literal(Literal { ty: Scalar::F32, value: LiteralValue::Float(f64::NEG_INFINITY) }));
    k.store(out.at(9u32), Ex::literal(Literal { ty: Scalar::F32, value: LiteralValue::Float(f64::NAN) }));
    k.store(flags.at(0u32), x.lt(y).and(x.ne(0.0f32)));
    k.store(flags.at(1u32), x.ge(y).or(y.eq(1.0f32)));
    let acc = k.var("acc", x);
    k.assign(acc, acc % y);
    k.assign(acc, acc * y);
    k.store(out.at(10u32), acc);
    finish(k)
}

/// `-` on signed integers and floats, `~` on integers, `!` on booleans.
pub fn unary_ops() -> Kernel {
    let mut k = KernelBuilder::new("unary_ops");
    let ints = k.buffer("ints", Type::I32, Access::ReadWrite);
    let uints = k.buffer("uints", Type::U32, Access::ReadWrite);
    let bools = k.buffer("bools", Type::BOOL, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    let s = k.let_("s", ints.get(i));
    k.store(ints.at(i), -s);
    k.store(ints.at(i + 1u32), -(s + 1));
    k.store(uints.at(i), !uints.get(i));
    k.store(bools.at(i), !bools.get(i));
    k.store(bools.at(i + 1u32), !(s.lt(0)));
    k.store(ints.at(i + 2u32), Ex::literal(Literal { ty: Scalar::I32, value: LiteralValue::Int(i32::MIN as i64) }));
    finish(k)
}

/// Loads, literals and arithmetic of every scalar type; 8/16-bit
/// arithmetic is cut back to its type.
pub fn scalar_types() -> Kernel {
    let mut k = KernelBuilder::new("scalar_types");
    let i = k.let_("i", thread_position_in_grid().x());
    let values = [
        (Scalar::Bool, 1.0),
        (Scalar::I8, -5.0),
        (Scalar::I16, 300.0),
        (Scalar::I32, -7.0),
        (Scalar::I64, 5_000_000_000.0),
        (Scalar::U8, 200.0),
        (Scalar::U16, 60_000.0),
        (Scalar::U32, 4_000_000_000.0),
        (Scalar::U64, 10_000_000_000.0),
        (Scalar::F16, 0.1),
        (Scalar::BF16, 0.1),
        (Scalar::F32, 0.1),
    ];
    for (s, v) in values {
        let buf = k.buffer(&format!("buf_{}", s.name()), Type::scalar(s), Access::ReadWrite);
        let x = k.let_(&format!("x_{}", s.name()), buf.get(i));
        if s == Scalar::Bool {
            k.store(buf.at(i), x.ne(lit(s, v)));
        } else {
            k.store(buf.at(i), x * lit(s, v) + x);
            if s.is_int() {
                k.store(buf.at(i + 1u32), (x + lit(s, v)) / lit(s, 2.0));
                k.store(buf.at(i + 2u32), (x << lit(s, 3.0)).cast(Type::F32).cast(Type::scalar(s)));
            }
        }
    }
    let i64_min = Ex::literal(Literal { ty: Scalar::I64, value: LiteralValue::Int(i64::MIN) });
    let wide = k.buffer("wide", Type::I64, Access::ReadWrite);
    k.store(wide.at(i), i64_min);
    k.store(wide.at(i + 1u32), Ex::literal(Literal { ty: Scalar::I64, value: LiteralValue::Int(i64::MAX) }));
    let ubytes = k.buffer("ubytes", Type::scalar(Scalar::U8), Access::ReadWrite);
    let a = k.let_("a8", ubytes.get(i));
    let b = k.let_("b8", ubytes.get(i + 1u32));
    let c = k.var("c8", (a + b) / lit(Scalar::U8, 2.0));
    k.assign(c, c + a);
    k.store(ubytes.at(i), !c.get());
    finish(k)
}

/// Vector types: loads, arithmetic with scalars, constructors, splats,
/// components, conversions, comparisons and `select` per component.
pub fn vectors() -> Kernel {
    let (half4, float4, int2, uint3, bool4) =
        (vt(Scalar::F16, 4), vt(Scalar::F32, 4), vt(Scalar::I32, 2), vt(Scalar::U32, 3), vt(Scalar::Bool, 4));
    let mut k = KernelBuilder::new("vectors");
    let h = k.buffer("h", half4, Access::ReadWrite);
    let f = k.buffer("f", float4, Access::ReadWrite);
    let pairs = k.buffer("pairs", int2, Access::ReadWrite);
    let ids = k.buffer("ids", uint3, Access::ReadWrite);
    let scale = k.value("scale", float4);
    let gid = k.let_("gid", thread_position_in_grid());
    let i = k.let_("i", gid.x());
    k.store(ids.at(i), gid + 1u32);
    let v = k.var("v", h.get(i).cast(float4) * scale);
    k.assign(v, v * 2.0f32);
    k.assign(v, v + vector(float4, &[1.0f32.into(), 2.0f32.into(), 3.0f32.into(), v.get().w()]));
    k.store(h.at(i), v.get().cast(half4));
    let splat = k.let_("splat", vector(float4, &[v.get().x()]));
    let mask = k.let_("mask", v.get().lt(splat));
    k.store(f.at(i), select(v.get(), splat, mask) + i.cast(float4));
    let any_lt = k.let_("both", mask.ne(vector(bool4, &[false.into()])).x());
    k.if_(any_lt, |k| {
        let p = pairs.get(i);
        k.store(pairs.at(i), (p << vector(int2, &[3.into()])) + -p);
    });
    finish(k)
}

/// Value conversions and bit reinterpretations between scalar types.
pub fn casts() -> Kernel {
    let mut k = KernelBuilder::new("casts");
    let f = k.buffer("f", Type::F32, Access::ReadWrite);
    let u = k.buffer("u", Type::U32, Access::ReadWrite);
    let h = k.buffer("h", Type::F16, Access::ReadWrite);
    let b = k.buffer("b", Type::BF16, Access::ReadWrite);
    let w = k.buffer("w", Type::U64, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    let x = k.let_("x", f.get(i));
    k.store(u.at(i), x.bitcast(Type::U32));
    k.store(f.at(i), u.get(i).bitcast(Type::F32));
    k.store(u.at(i + 1u32), x.cast(Type::U32) + x.bitcast(Type::I32).cast(Type::U32));
    k.store(h.at(i), u.get(i).cast(Type::F16) + x.cast(Type::F16));
    k.store(u.at(i + 2u32), h.get(i).cast(Type::U32));
    k.store(b.at(i), h.get(i).cast(Type::BF16));
    k.store(h.at(i + 1u32), h.get(i + 1u32).bitcast(Type::scalar(Scalar::U16)).bitcast(Type::F16));
    k.store(w.at(i), vector(vt(Scalar::F32, 2), &[x, x]).bitcast(Type::U64));
    k.store(f.at(i + 1u32), (x + 1.0f32).cast(Type::I32).cast(Type::F32) + i.eq(0u32).cast(Type::F32));
    finish(k)
}

/// Every builtin, read whole and by component.
pub fn builtins() -> Kernel {
    let mut k = KernelBuilder::new("builtins");
    let out = k.buffer("out", Type::UINT3, Access::ReadWrite);
    let scalars = k.buffer("scalars", Type::U32, Access::ReadWrite);
    let i = k.let_("i", thread_index_in_threadgroup() + threadgroup_position_in_grid().x() * threads_per_threadgroup().x());
    k.store(out.at(i * 6u32), thread_position_in_grid());
    k.store(out.at(i * 6u32 + 1u32), thread_position_in_threadgroup());
    k.store(out.at(i * 6u32 + 2u32), threadgroup_position_in_grid());
    k.store(out.at(i * 6u32 + 3u32), threads_per_threadgroup());
    k.store(out.at(i * 6u32 + 4u32), threads_per_grid());
    k.store(out.at(i * 6u32 + 5u32), threadgroups_per_grid());
    k.store(scalars.at(i * 4u32), thread_index_in_simdgroup() + threads_per_simdgroup());
    k.store(scalars.at(i * 4u32 + 1u32), simdgroup_index_in_threadgroup());
    k.store(scalars.at(i * 4u32 + 2u32), simdgroups_per_threadgroup());
    k.store(scalars.at(i * 4u32 + 3u32), thread_position_in_grid().y() + threads_per_grid().z());
    finish(k)
}

/// Every float math function on `f32`, then every `fast::` and `precise::`
/// variant.
pub fn math_f32() -> Kernel {
    let mut k = KernelBuilder::new("math_f32");
    let a = k.buffer("a", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    let x = k.let_("x", a.get(i));
    let y = k.let_("y", a.get(i + 1u32));
    let mut slot = 0u32;
    for func in Intrinsic::ALL {
        let args: Vec<Ex> = match func.arity() {
            _ if func.is_simd() || matches!(func, Intrinsic::Select | Intrinsic::Popcount | Intrinsic::Clz | Intrinsic::Ctz) => continue,
            // MSL has none of these: its helpers have a golden file of their own (msl_helpers).
            _ if matches!(func, Intrinsic::Erf | Intrinsic::Erfc | Intrinsic::Log1p | Intrinsic::Expm1) => continue,
            1 => vec![x],
            2 => vec![x, y],
            _ => vec![x, y, 1.0f32.into()],
        };
        let value = call(func, &args);
        // A classification's bool, as 0.0 or 1.0.
        let value = if func.is_classification() { select(0.0f32, 1.0f32, value) } else { value };
        k.store(out.at(slot), value);
        slot += 1;
    }
    for precision in [Precision::Fast, Precision::Precise] {
        for func in Intrinsic::WITH_PRECISION_VARIANTS {
            let args = [x, y, 1.0f32.into()];
            k.store(out.at(slot), call_with(func, precision, &args[..func.arity()]));
            slot += 1;
        }
    }
    finish(k)
}

/// Math on `half`, `bfloat` and vectors; `abs/min/max/clamp` on integers;
/// `popcount/clz/ctz`; `select`; `isnan/isinf/isfinite` of half, bfloat and
/// a vector.
pub fn math_other_types() -> Kernel {
    let mut k = KernelBuilder::new("math_other_types");
    let h = k.buffer("h", Type::F16, Access::ReadWrite);
    let bf = k.buffer("bf", Type::BF16, Access::ReadWrite);
    let v = k.buffer("v", vt(Scalar::F32, 4), Access::ReadWrite);
    let ints = k.buffer("ints", Type::I32, Access::ReadWrite);
    let uints = k.buffer("uints", Type::U32, Access::ReadWrite);
    let bytes = k.buffer("bytes", Type::scalar(Scalar::U8), Access::ReadWrite);
    let longs = k.buffer("longs", Type::I64, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    let hx = k.let_("hx", h.get(i));
    k.store(h.at(i), exp(hx) + fast::exp(hx) + fma(hx, hx, lit(Scalar::F16, 0.5)) + pow(hx, lit(Scalar::F16, 2.0)));
    k.store(h.at(i + 1u32), clamp(abs(hx), lit(Scalar::F16, 0.0), lit(Scalar::F16, 1.0)) + min(hx, hx) % max(hx, hx));
    let bx = k.let_("bx", bf.get(i));
    k.store(bf.at(i), sqrt(bx) * rsqrt(bx) + max(bx, lit(Scalar::BF16, 0.25)));
    let vx = k.let_("vx", v.get(i));
    k.store(v.at(i), tanh(vx) + fast::sin(vx) * precise::sqrt(vx) + min(vx, vector(vt(Scalar::F32, 4), &[0.0f32.into()])) + floor(vx) % ceil(vx));
    let s = k.let_("s", ints.get(i));
    k.store(ints.at(i), abs(s) + min(s, 3) + max(s, -3) + clamp(s, -1, 1));
    let u = k.let_("u", uints.get(i));
    k.store(uints.at(i), abs(u) + clamp(u, 1u32, 9u32) + popcount(u) + clz(u) + ctz(u));
    k.store(uints.at(i + 1u32), select(u, u + 1u32, u.gt(5u32)));
    k.store(uints.at(i + 2u32), select(0u32, 1u32, isnan(hx)) + select(0u32, 2u32, isinf(bx)) + select(0u32, 4u32, isfinite(hx)));
    k.store(v.at(i + 1u32), select(vx, vector(vt(Scalar::F32, 4), &[0.0f32.into()]), isnan(vx) | isinf(vx)));
    let byte = k.let_("byte", bytes.get(i));
    k.store(bytes.at(i), popcount(byte) + clz(byte) + ctz(byte) + min(byte, byte));
    let l = k.let_("l", longs.get(i));
    k.store(longs.at(i), abs(l) + max(l, l) + popcount(l));
    finish(k)
}

/// The functions MSL lacks (`erf`, `erfc`, `log1p`, `expm1`) of f32, f16
/// and bf16 scalars: on MSL, enigma's helpers.
pub fn msl_helpers() -> Kernel {
    let mut k = KernelBuilder::new("msl_helpers");
    let a = k.buffer("a", Type::F32, Access::ReadWrite);
    let h = k.buffer("h", Type::F16, Access::ReadWrite);
    let bf = k.buffer("bf", Type::BF16, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    k.store(a.at(i), call(Intrinsic::Erf, &[a.get(i)]) + call(Intrinsic::Erfc, &[a.get(i + 1u32)]));
    k.store(a.at(i + 2u32), call(Intrinsic::Log1p, &[a.get(i)]) - call(Intrinsic::Expm1, &[a.get(i + 1u32)]));
    k.store(h.at(i), call(Intrinsic::Erf, &[h.get(i)]) * call(Intrinsic::Log1p, &[h.get(i + 1u32)]));
    k.store(bf.at(i), call(Intrinsic::Erfc, &[bf.get(i)]) + call(Intrinsic::Expm1, &[bf.get(i)]));
    let v = k.buffer("v", Type::vector(Scalar::F32, 4), Access::ReadWrite);
    k.store(v.at(i), call(Intrinsic::Erf, &[v.get(i)]) + call(Intrinsic::Log1p, &[v.get(i + 1u32)]));
    finish(k)
}

/// Every SIMD-group function, some inside a branch (partial SIMD group).
pub fn simd_functions() -> Kernel {
    let mut k = KernelBuilder::new("simd_functions");
    let a = k.buffer("a", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let bits = k.buffer("bits", Type::U32, Access::ReadWrite);
    let votes = k.buffer("votes", Type::U64, Access::ReadWrite);
    let flags = k.buffer("flags", Type::BOOL, Access::ReadWrite);
    let vecs = k.buffer("vecs", vt(Scalar::F32, 4), Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let x = k.let_("x", a.get(tid));
    let o = tid * 16u32;
    k.store(out.at(o), simd_sum(x));
    k.store(out.at(o + 1u32), simd_product(x));
    k.store(out.at(o + 2u32), simd_max(x));
    k.store(out.at(o + 3u32), simd_min(x));
    k.store(out.at(o + 4u32), simd_broadcast(x, 3u32));
    k.store(out.at(o + 5u32), simd_broadcast_first(x));
    k.store(out.at(o + 6u32), simd_shuffle(x, lane ^ 1u32));
    k.store(out.at(o + 7u32), simd_shuffle_up(x, 2u32));
    k.store(out.at(o + 8u32), simd_shuffle_down(x, 2u32));
    k.store(out.at(o + 9u32), simd_shuffle_xor(x, 4u32));
    k.store(out.at(o + 10u32), simd_prefix_inclusive_sum(x));
    k.store(out.at(o + 11u32), simd_prefix_exclusive_sum(x));
    k.if_(lane.lt(8u32), |k| {
        k.store(bits.at(tid * 4u32), simd_and(lane) + simd_or(lane) + simd_xor(lane));
        k.store(bits.at(tid * 4u32 + 1u32), simd_sum(lane));
        k.store(votes.at(tid), simd_ballot(x.gt(0.0f32)));
        k.store(flags.at(tid * 4u32), simd_all(x.gt(0.0f32)));
        k.store(flags.at(tid * 4u32 + 1u32), simd_any(x.gt(0.0f32)));
        k.store(flags.at(tid * 4u32 + 2u32), simd_is_first());
    });
    // The right side of `&&` calls a SIMD-group function: both sides are evaluated.
    k.store(flags.at(tid * 4u32 + 3u32), lane.lt(4u32).and(simd_any(x.lt(0.0f32))));
    k.store(vecs.at(tid), simd_sum(vecs.get(tid)) + simd_shuffle_down(vecs.get(tid), 1u32));
    finish(k)
}

/// Specialisation constants: a loop bound and a scale factor.
pub fn spec_constants() -> Kernel {
    let mut k = KernelBuilder::new("spec_constants");
    let tile = k.spec("TILE", Literal::u32(32));
    let alpha = k.spec("ALPHA", Literal::f32(0.5));
    let enabled = k.spec("ENABLED", Literal::bool(true));
    let data = k.buffer("data", Type::F32, Access::ReadWrite);
    let base = k.let_("base", threadgroup_position_in_grid().x() * tile);
    k.if_(enabled, |k| {
        k.for_range("j", 0u32, tile, 1u32, |k, j| {
            k.store(data.at(base + j), data.get(base + j) * alpha);
        });
    });
    finish(k)
}

/// Every atomic operation on device memory, with and without a result;
/// plain loads and stores of the same memory; `f32` atomics.
pub fn atomics_device() -> Kernel {
    let mut k = KernelBuilder::new("atomics_device");
    let counters = k.buffer("counters", Type::U32, Access::ReadWrite);
    let signed = k.buffer("ints", Type::I32, Access::ReadWrite);
    let sums = k.buffer("sums", Type::F32, Access::ReadWrite);
    let olds = k.buffer("olds", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    for (n, op) in AtomicOp::ALL.into_iter().enumerate() {
        k.atomic(op, counters.at(n as u32), tid);
        k.atomic(op, signed.at(n as u32), -1);
    }
    let old = k.atomic_fetch(AtomicOp::Add, counters.at(8u32), 1u32);
    k.store(olds.at(tid), old);
    let seen = k.atomic_compare_exchange(counters.at(9u32), 0u32, tid);
    k.store(olds.at(tid + 1u32), seen + counters.get(10u32));
    k.atomic(AtomicOp::Add, sums.at(0u32), 1.5f32);
    k.atomic(AtomicOp::Sub, sums.at(1u32), 0.5f32);
    let prev = k.atomic_fetch(AtomicOp::Exchange, sums.at(2u32), tid.cast(Type::F32));
    k.store(sums.at(3u32), prev);
    finish(k)
}

/// A device fence on both sides of an atomic ticket (the last-threadgroup
/// pattern): `__threadfence()` in CUDA, `atomic_thread_fence` with a device
/// scope in MSL 3.2.
pub fn device_fences() -> Kernel {
    let mut k = KernelBuilder::new("device_fences");
    let partials = k.buffer("partials", Type::U32, Access::ReadWrite);
    let counter = k.buffer("counter", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(partials.at(tid), tid);
    k.device_fence();
    let ticket = k.atomic_fetch(AtomicOp::Add, counter.at(0u32), 1u32);
    k.device_fence();
    k.store(partials.at(tid), ticket);
    finish(k)
}

/// `print` with a value of each kind: an unsigned and a signed integer,
/// 64-bit ones, a float and an f16 (as f32), a bool, and text that needs
/// escaping in C (`%`, a quote, a backslash) and braces.
pub fn printing() -> Kernel {
    let mut k = KernelBuilder::new("printing");
    let x = k.buffer("x", Type::F16, Access::Read);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let v = k.let_("v", x.at(tid).load());
    k.print("tid {} v {} ({} as f32) {}", &[tid, v, v.cast(Type::F32), tid.cast(Type::I32) - 1i32]);
    k.print("wide {} {} big {} 100% \"{{quoted}}\" \\", &[tid.cast(Type::scalar(Scalar::I64)), tid.cast(Type::scalar(Scalar::U64)), tid.gt(7u32)]);
    finish(k)
}

/// Atomics on threadgroup memory: a histogram in shared memory, and f32
/// add, sub, exchange, store and load on threadgroup memory (MSL has no
/// threadgroup `atomic_float`: a compare-and-swap loop on the bits).
// `mine * 0u32` builds an IR expression that keeps the exchange's result in
// use in the generated code; it is not arithmetic on the host.
#[allow(clippy::erasing_op)]
pub fn atomics_threadgroup() -> Kernel {
    let mut k = KernelBuilder::new("atomics_threadgroup");
    let data = k.buffer("data", Type::U32, Access::Read);
    let hist = k.buffer("hist", Type::U32, Access::ReadWrite);
    let sums = k.buffer("sums", Type::F32, Access::ReadWrite);
    let bins = k.threadgroup_array("bins", Type::U32, 16);
    let fsum = k.threadgroup_array("fsum", Type::F32, 2);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.if_(lid.lt(16u32), |k| k.store(bins.at(lid), 0u32));
    k.if_(lid.lt(2u32), |k| k.store(fsum.at(lid), 0.0f32));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.atomic(AtomicOp::Add, bins.at(data.get(thread_position_in_grid().x()) % 16u32), 1u32);
    let mine = k.atomic_compare_exchange(bins.at(15u32), 7u32, 8u32);
    k.atomic(AtomicOp::Add, fsum.at(0u32), 0.5f32);
    k.atomic(AtomicOp::Sub, fsum.at(1u32), 0.25f32);
    let old = k.atomic_fetch(AtomicOp::Exchange, fsum.at(1u32), 1.0f32);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(lid.lt(16u32), |k| {
        k.atomic(AtomicOp::Add, hist.at(lid), bins.get(lid) + mine * 0u32);
    });
    k.if_(lid.lt(2u32), |k| k.store(sums.at(lid), fsum.get(lid) + old));
    finish(k)
}

/// if / else / else-if chains, an empty `then`, `while` with `break` and
/// `continue`, `for` with hoisted and plain bounds, a loop variable read
/// after its loop, early `return`, and declarations before branches.
pub fn control_flow() -> Kernel {
    let mut k = KernelBuilder::new("control_flow");
    let data = k.buffer("data", Type::I32, Access::ReadWrite);
    let limits = k.buffer("limits", Type::U32, Access::Read);
    let n = k.value("n", Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.ge(n), |k| k.return_());
    let x = k.let_("x", data.get(tid));
    let sign = k.var_uninit("sign", Type::I32);
    k.if_else(
        x.lt(0),
        |k| k.assign(sign, -1),
        |k| k.if_else(x.eq(0), |k| k.assign(sign, 0), |k| k.if_else(x.lt(10), |k| k.assign(sign, 1), |k| k.assign(sign, 2))),
    );
    k.if_else(x.gt(100), |_| {}, |k| k.store(data.at(tid), sign.get()));
    let count = k.var("count", 0u32);
    k.while_(count.get().lt(n), |k| {
        k.assign(count, count + 1u32);
        k.if_(count.get().eq(3u32), |k| k.continue_());
        k.if_(data.get(count.get()).eq(0), |k| k.break_());
    });
    // `end` reads memory and `step` a local the loop assigns: both hoisted.
    let step = k.var("step", 1u32);
    k.for_range("i", 0u32, limits.get(tid), step, |k, i| {
        k.assign(step, step + 1u32);
        k.store(data.at(i), i.cast(Type::I32));
    });
    let j = k.var_uninit("j", Type::U32);
    let _ = j;
    let last = k.var("last", 0u32);
    k.for_range("m", tid, n, 4u32, |k, m| {
        k.if_(m.eq(7u32), |k| k.break_());
        k.assign(last, m);
    });
    let w = k.var("w", 0i32);
    k.for_range("q", 10, 0, -2, |k, q| k.assign(w, w + q));
    k.store(data.at(tid), last.get().cast(Type::I32) + count.get().cast(Type::I32) + w.get());
    finish(k)
}

/// `threadgroup_barrier` with every `mem_flags`, and `simdgroup_barrier`.
pub fn barriers() -> Kernel {
    let mut k = KernelBuilder::new("barriers");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let tile = k.threadgroup_array("tile", Type::F32, 64);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.store(tile.at(lid % 64u32), out.get(lid));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.threadgroup_barrier(MemFlags::Device);
    k.threadgroup_barrier(MemFlags::DeviceAndThreadgroup);
    k.threadgroup_barrier(MemFlags::None);
    k.simdgroup_barrier(MemFlags::Threadgroup);
    k.simdgroup_barrier(MemFlags::None);
    k.store(out.at(lid), tile.get((lid + 1u32) % 64u32));
    finish(k)
}

/// Asynchronous copies of 16, 8 and 4 bytes (a vector, four halves, a
/// word), one of them zero-filled past `n`, then a commit and a wait.
pub fn async_copies() -> Kernel {
    let mut k = KernelBuilder::new("async_copies");
    let vecs = k.buffer("vecs", Type::vector(Scalar::F32, 4), Access::Read);
    let halves = k.buffer("halves", Type::F16, Access::Read);
    let words = k.buffer("words", Type::U32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let tv = k.threadgroup_array("tv", Type::vector(Scalar::F32, 4), 64);
    let th = k.threadgroup_array("th", Type::F16, 256);
    let tw = k.threadgroup_array("tw", Type::U32, 64);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.async_copy(tv.at(lid), vecs.at(lid), 1, lid.lt(n));
    k.async_copy(th.at(lid * 4u32), halves.at(lid * 4u32), 4, true);
    k.async_copy(tw.at(lid), words.at(lid), 1, true);
    k.async_commit();
    k.async_wait(0);
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.store(words.at(lid), tw.get((lid + 1u32) % 64u32) + tv.get(lid).x().cast(Type::U32) + th.get(lid).cast(Type::U32));
    finish(k)
}

/// Tile copies: an 8 × 16 box of a u32 matrix (its extents and pitch the
/// kernel's arguments, its origin the threadgroup's) into one of two
/// stages, waited on, then read.
pub fn tile_copies() -> Kernel {
    let mut k = KernelBuilder::new("tile_copies");
    let words = k.buffer("words", Type::U32, Access::ReadWrite);
    let rows = k.value("rows", Type::U32);
    let cols = k.value("cols", Type::U32);
    let stage = k.threadgroup_array("stage", Type::U32, 256);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let tg = threadgroup_position_in_grid();
    let matrix = TileSource { mem: words, extents: [rows, cols], pitch: cols + 4u32 };
    let side = k.let_("side", tg.x() % 2u32);
    k.tile_copy(side, stage.at(side * 128u32), matrix, [(tg.y() * 8u32).cast(Type::I32), (tg.x() * 16u32).cast(Type::I32)], (8, 16));
    k.tile_wait(side);
    k.store(words.at(lid), stage.get(side * 128u32 + lid % 128u32));
    finish(k)
}

/// Multi-dimensional subscripts (a transpose through a 2-D tile): each index
/// is wrapped in a dimension check that generated code leaves out, so
/// `out[j, i]` of a `[m, n]` `out` reads `out[j * n + i]`.
pub fn multi_dim_indexing() -> Kernel {
    let mut k = KernelBuilder::new("multi_dim_indexing");
    let a = k.buffer("a", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let m = k.value("m", Type::U32);
    let tile = k.threadgroup_array("tile", Type::F32, 16 * 17);
    let (i, j) = (k.let_("i", thread_position_in_grid().y()), k.let_("j", thread_position_in_grid().x()));
    let (li, lj) = (k.let_("li", thread_position_in_threadgroup().y()), k.let_("lj", thread_position_in_threadgroup().x()));
    let tile_shape = || [Ex::from(16u32), Ex::from(17u32)];
    k.store(tile.at_dims([li, lj], tile_shape()), a.at_dims([i, j], [n, m]).load());
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.store(out.at_dims([j, i], [m, n]), tile.at_dims([lj, li], tile_shape()).load());
    finish(k)
}

/// Per-thread arrays (a scalar one, a vector one, one indexed by two
/// checked subscripts) filled and read in loops unrolled at compile time,
/// and read at an index known only at run time.
pub fn thread_arrays() -> Kernel {
    let mut k = KernelBuilder::new("thread_arrays");
    let a = k.buffer("a", Type::F32, Access::Read);
    let out = k.buffer("out", Type::vector(Scalar::F32, 4), Access::ReadWrite);
    let acc = k.thread_array("acc", Type::F32, 8);
    let quads = k.thread_array("quads", Type::vector(Scalar::F32, 4), 2);
    let tile = k.thread_array("tile", Type::I32, 12);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.for_unrolled("i", 0u32, 8u32, 1u32, |k, i| k.store(acc.at(i), a.get(gid * 8u32 + i)));
    k.for_unrolled("j", 0u32, 2u32, 1u32, |k, j| {
        let v = vector(Type::vector(Scalar::F32, 4), &[acc.get(j), acc.get(j + 2u32), acc.get(j + 4u32), acc.get(j + 6u32)]);
        k.store(quads.at(j), v);
    });
    k.for_unrolled("r", 0u32, 3u32, 1u32, |k, r| {
        k.for_unrolled("c", 0u32, 4u32, 1u32, |k, c| k.store(tile.at_dims([r, c], [3u32.into(), 4u32.into()]), (r * c).cast(Scalar::I32)));
    });
    let pick = k.let_("pick", tile.at_dims([gid % 3u32, gid % 4u32], [3u32.into(), 4u32.into()]).load());
    k.store(out.at(gid), quads.get(gid % 2u32) + pick.cast(Scalar::F32));
    finish(k)
}

/// Names that collide with target words are renamed; the rest are kept.
pub fn colliding_names() -> Kernel {
    let mut k = KernelBuilder::new("expf");
    let buf = k.buffer("bool4", Type::F32, Access::ReadWrite);
    let a = k.let_("simd_sum", thread_position_in_grid().x());
    let b = k.let_("enigma_tg", a + 1u32);
    let c = k.let_("threadIdx_", b);
    let d = k.let_("char4", c.cast(Type::F32));
    let e = k.let_("atomicAdd", d);
    k.store(buf.at(a), e);
    finish(k)
}

/// The kernels of every group, by name.
pub fn construct_kernels() -> Vec<Kernel> {
    vec![
        binary_ops_u32(),
        binary_ops_f32(),
        unary_ops(),
        scalar_types(),
        vectors(),
        casts(),
        builtins(),
        math_f32(),
        math_other_types(),
        simd_functions(),
        spec_constants(),
        atomics_device(),
        atomics_threadgroup(),
        control_flow(),
        barriers(),
        async_copies(),
        colliding_names(),
        simdgroup_matrices(),
        multi_dim_indexing(),
        thread_arrays(),
    ]
}

/// Every SIMD-group matrix construct: fill, diagonal, loads from device and
/// threadgroup memory (plain and transposed), multiply and
/// multiply-accumulate with an f32 accumulator, the per-lane view, stores.
pub fn simdgroup_matrices() -> Kernel {
    let h = enigma_ir::MatrixType::new(Scalar::F16, 16, 8);
    let ht = enigma_ir::MatrixType::new(Scalar::F16, 8, 16);
    let f = enigma_ir::MatrixType::new(Scalar::F32, 16, 16);
    let mut k = KernelBuilder::new("simdgroup_matrices");
    let a = k.buffer("a", Type::F16, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let stage = k.threadgroup_array("stage", Type::F16, 128);
    let lane = k.let_("lane", thread_index_in_simdgroup());
    k.for_range("i", 0u32, 4u32, 1u32, |k, i| k.store(stage.at(lane * 4u32 + i), a.get(lane * 4u32 + i)));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let ma = k.let_("ma", matrix_load(h, a, 0u32, 8u32, false));
    let mb = k.let_("mb", matrix_load(ht, stage, 0u32, 8u32, true));
    let acc = k.var("acc", matrix_diagonal(f, 1.0f32));
    k.assign(acc, matrix_multiply_accumulate(ma, mb, acc));
    let sq = k.let_("sq", matrix_multiply(ma, matrix_fill(ht, lit(Scalar::F16, 0.5))));
    k.matrix_store(acc, out, 0u32, 16u32, false);
    k.store(out.at(matrix_coord(f, 3, false) * 16u32 + matrix_coord(f, 3, true) + 256u32), thread_element(acc, 3));
    k.store(out.at(lane + 512u32), thread_element(sq, 0).cast(Type::F32));
    // Tiles read from vector memory through a view of its scalars.
    let a4 = k.buffer("a4", Type::vector(Scalar::F16, 4), Access::Read);
    let stage4 = k.threadgroup_array("stage4", Type::vector(Scalar::F16, 4), 64);
    k.store(stage4.at(lane), a4.get(lane));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let from_vectors = matrix_multiply_accumulate(matrix_load(h, a4, 8u32, 8u32, false), matrix_load(ht, stage4, 16u32, 16u32, false), acc);
    k.matrix_store(from_vectors, out, 768u32, 16u32, false);
    finish(k)
}

/// 4-bit tiles decoded on load: an INT4 tile stored as it is (the
/// reference layout) and an FP4 tile from a vector view of the words that
/// only feeds the B side of a product (on CUDA the B-layout decoder).
pub fn quantized_matrices() -> Kernel {
    let h = enigma_ir::MatrixType::new(Scalar::F16, 16, 16);
    let f = enigma_ir::MatrixType::new(Scalar::F32, 16, 16);
    let mut k = KernelBuilder::new("quantized_matrices");
    let words = k.buffer("words", Type::U32, Access::Read);
    let words4 = k.buffer("words4", Type::vector(Scalar::U32, 4), Access::Read);
    let scales = k.buffer("scales", Type::F16, Access::Read);
    let a = k.buffer("a", Type::F16, Access::Read);
    let out = k.buffer("out", Type::F16, Access::ReadWrite);
    let prod = k.buffer("prod", Type::F32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let rows = enigma_ir::QuantLayout::Rows;
    let int4 = k.let_("w_int4", matrix_load_quantized(h, enigma_ir::QuantCode::Int4, rows, words, 4u32, n, scales, 0u32));
    k.matrix_store(int4, out, 0u32, 16u32, false);
    let fp4 = k.let_("w_fp4", matrix_load_quantized(h, enigma_ir::QuantCode::Fp4, rows, words4, 8u32, n, scales, 16u32));
    let ma = k.let_("ma", matrix_load(h, a, 0u32, 16u32, false));
    k.matrix_store(matrix_multiply_accumulate(ma, fp4, matrix_fill(f, 0.0f32)), prod, 0u32, 16u32, false);
    // Fragment order: a 64 × 16 unit, stored, and as the B side of a product.
    let (deep, wide) = (enigma_ir::MatrixType::new(Scalar::F16, 64, 16), enigma_ir::MatrixType::new(Scalar::F16, 16, 64));
    let fragments = enigma_ir::QuantLayout::Fragments;
    let unit = k.let_("w_unit", matrix_load_quantized(deep, enigma_ir::QuantCode::Int4, fragments, words, 128u32, n, scales, 0u32));
    k.matrix_store(unit, out, 256u32, 16u32, false);
    let unit_b = k.let_("w_unit_b", matrix_load_quantized(deep, enigma_ir::QuantCode::Fp4, fragments, words4, 0u32, n, scales, 16u32));
    let mw = k.let_("mw", matrix_load(wide, a, 0u32, 64u32, false));
    k.matrix_store(matrix_multiply_accumulate(mw, unit_b, matrix_fill(f, 0.0f32)), prod, 256u32, 16u32, false);
    finish(k)
}

/// Every texture construct: the four texel types and four access modes in
/// one texture table beside buffers (so bindings count per table), read,
/// write, the size queries.
pub fn textures() -> Kernel {
    let mut k = KernelBuilder::new("textures");
    let scale = k.value("scale", Type::F32);
    let src = k.texture2d("src", Scalar::F16, enigma_ir::TextureAccess::Sample);
    let dst = k.texture2d("dst", Scalar::F32, enigma_ir::TextureAccess::ReadWrite);
    let ids = k.texture2d("ids", Scalar::U32, enigma_ir::TextureAccess::Read);
    let labels = k.texture2d("labels", Scalar::I32, enigma_ir::TextureAccess::Write);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid());
    let c = k.let_("c", vector(vt(Scalar::U32, 2), &[gid.x(), gid.y()]));
    k.threadgroup_barrier(MemFlags::Texture);
    k.if_(c.x().ge(dst.get_width()).or(c.y().ge(dst.get_height())), |k| k.return_());
    let v = k.let_("v", src.read(c).cast(vt(Scalar::F32, 4)) * scale + dst.read(c));
    k.texture_write(dst, v, c);
    k.texture_fence(dst);
    let id = k.let_("id", ids.read(c).x() + dst.read(c).x().cast(Type::U32));
    k.texture_write(labels, vector(vt(Scalar::I32, 4), &[id.cast(Type::I32)]), c);
    k.store(out.at(c.y() * dst.get_width() + c.x()), id);
    finish(k)
}

/// Sampling: an f32 texture sampled with two samplers and an f16 one with
/// one of them again (the kernel declares it once), normalised and pixel
/// coordinates, every filter and two address modes.
pub fn texture_sampling() -> Kernel {
    use enigma_ir::{Sampler, SamplerAddress, SamplerCoord, SamplerFilter};
    let mut k = KernelBuilder::new("texture_sampling");
    let image = k.texture2d("image", Scalar::F32, enigma_ir::TextureAccess::Sample);
    let mask = k.texture2d("mask", Scalar::F16, enigma_ir::TextureAccess::Sample);
    let out = k.buffer("out", vt(Scalar::F32, 4), Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid());
    let linear = Sampler { coord: SamplerCoord::Normalized, filter: SamplerFilter::Linear, address: SamplerAddress::MirroredRepeat };
    let nearest = Sampler { coord: SamplerCoord::Pixel, filter: SamplerFilter::Nearest, address: SamplerAddress::ClampToZero };
    let size = vector(vt(Scalar::F32, 2), &[image.get_width().cast(Type::F32), image.get_height().cast(Type::F32)]);
    let pixel = k.let_("pixel", vector(vt(Scalar::F32, 2), &[gid.x().cast(Type::F32), gid.y().cast(Type::F32)]) + 0.5f32);
    let uv = k.let_("uv", pixel / size);
    let m = k.let_("m", mask.sample(linear, uv).cast(vt(Scalar::F32, 4)));
    k.store(out.at(gid.y() * image.get_width() + gid.x()), image.sample(linear, uv) * m + image.sample(nearest, pixel));
    finish(k)
}

/// The seed-000 kernels and the seed-001 reduction, from `enigma_kernels`.
pub fn seed_kernels() -> Vec<Kernel> {
    let mut kernels = enigma_kernels::dispatch_patterns::all();
    kernels.push(enigma_kernels::two_pass_sum::reduce_threadgroup());
    kernels.push(enigma_kernels::two_pass_sum::reduce_final());
    let mut seed_pass2 = enigma_kernels::two_pass_sum::reduce_final_seed();
    seed_pass2.name = "reduce_final_seed".into();
    kernels.push(seed_pass2);
    kernels
}

/// Threadgroup arrays of 64 KiB, more than CUDA's 48 KiB of static shared
/// memory: 8191 `u16` (padded to 16384 bytes) and 12288 `f32`, filled by the
/// threadgroup, then read back across a barrier. Validated against the
/// largest opt-in limit of a CUDA GPU ([`big_threadgroup_memory_validated`]).
pub fn big_threadgroup_memory() -> Kernel {
    let mut k = KernelBuilder::new("big_threadgroup_memory");
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let lo = k.threadgroup_array("lo", Type::scalar(Scalar::U16), 8191);
    let hi = k.threadgroup_array("hi", Type::F32, 12288);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let step = k.let_("step", threads_per_threadgroup().x());
    k.for_range("i", lid, 8191u32, step, |k, i| k.store(lo.at(i), i.cast(Type::scalar(Scalar::U16))));
    k.for_range("j", lid, 12288u32, step, |k, j| k.store(hi.at(j), j.cast(Type::F32)));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.store(out.at(gid), hi.get(12287u32 - lid) + lo.get(lid).cast(Type::F32));
    finish(k)
}

/// [`big_threadgroup_memory`], validated with the 227 KiB of threadgroup
/// memory an H100 block may opt in to.
pub fn big_threadgroup_memory_validated() -> (Kernel, KernelInfo) {
    let kernel = big_threadgroup_memory();
    let options = ValidationOptions { max_threadgroup_memory_bytes: enigma_codegen::cuda::MAX_SHARED_LIMIT, ..ValidationOptions::default() };
    let info = validate(&kernel, &options).unwrap_or_else(|e| panic!("{e}"));
    (kernel, info)
}
