//! The device code the CUDA source carries before its kernel: the emulation
//! of Metal's threadgroup geometry (always), and the helpers the body uses
//! (vector types, math on `half`, SIMD-group functions, …), each emitted
//! only when needed, in a fixed order, inside `namespace enigma`.

use enigma_ir::{Intrinsic, Precision, Scalar};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// A helper of the prelude. The order of the variants is the order of
/// emission, so each helper comes after those it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Helper {
    /// `copy_bytes(dst, src, n)`: a byte copy (NVRTC has no `memcpy`
    /// builtin without headers); first, as others use it.
    CopyBytes,
    /// `convert<To>(from)`: conversions that go through `float` for half types.
    Convert,
    /// `vec<T, N>` with MSL's layout, its operators, and the `float4`-style aliases.
    Vec,
    /// `enigma::<name>` overloads for a math function (by its MSL name).
    Math(&'static str),
    /// `enigma::fast_<name>` or `enigma::precise_<name>`: the `float`
    /// overloads (scalar and vector) of a variant whose CUDA function
    /// differs from the default one's, by the function's index in
    /// `Intrinsic::ALL`.
    MathVariant(usize, Precision),
    /// `clamp`, after the `min` and `max` it calls.
    Clamp,
    Bits,
    Select,
    Bitcast,
    AtomicAccess,
    /// Lane id, `shfl` of any type, the rank helpers and the reduction.
    SimdCore,
    /// `enigma::simd_*`: its index in `Intrinsic::ALL` (the order of
    /// emission: inclusive before exclusive prefix sums) and its MSL name.
    Simd(usize, &'static str),
    /// `texture2d` arguments over surface objects (read, write) and texture
    /// objects (sample), with Metal's format conversions.
    Texture,
    /// `async_copy<bytes>`, `async_commit`, `async_wait<n>`: `cp.async` on
    /// sm_80 and later, plain copies before.
    AsyncCopy,
    /// Tile copies on the tensor copy engine and their shared-memory barriers.
    TileCopy,
    /// `and_or(a, b, c)`: `(a & b) | c` on 32-bit words in one `LOP3`.
    AndOr,
    /// `swizzle128<P, R>(i)`, `wgmma_row`/`wgmma_col`: the physical layouts
    /// of cooperative tensors and of `wgmma` operand arrays
    /// (`super::cooperative`).
    CooperativeLayout,
    /// `wgmma_desc`, `wgmma_fence`, `wgmma_commit`, `wgmma_wait`, `wgmma_wait_all_but_last`,
    /// `async_proxy_fence`: Hopper's warpgroup matrix multiply (sm_90a).
    Wgmma,
}

impl Helper {
    /// Helpers this one needs.
    fn deps(self) -> &'static [Helper] {
        match self {
            Helper::Vec => &[Helper::Convert],
            Helper::Simd(_, "simd_min") => &[Helper::SimdCore, Helper::Math("min")],
            Helper::Simd(_, "simd_max") => &[Helper::SimdCore, Helper::Math("max")],
            Helper::Simd(_, "simd_prefix_exclusive_sum") => &[Helper::SimdCore, INCLUSIVE_SUM],
            Helper::Simd(..) => &[Helper::SimdCore],
            Helper::Clamp => &[Helper::Math("min"), Helper::Math("max")],
            Helper::Bitcast | Helper::SimdCore => &[Helper::CopyBytes],
            Helper::Texture => &[Helper::Vec],
            _ => &[],
        }
    }
}

const INCLUSIVE_SUM: Helper = Helper::Simd(61, "simd_prefix_inclusive_sum");

/// Adds `h` and what it needs to `set`.
pub(crate) fn require(set: &mut BTreeSet<Helper>, h: Helper) {
    if set.insert(h) {
        for d in h.deps() {
            require(set, *d);
        }
    }
}

/// What the prelude must cover.
pub(crate) struct PreludeCx {
    pub half: bool,
    pub bfloat: bool,
    /// Whether vector types are used (then `vec` overloads are written).
    pub vectors: bool,
    /// The vector aliases to define: (alias, scalar spelling, width).
    pub aliases: Vec<(String, &'static str, u8)>,
}

pub(crate) fn write(out: &mut String, helpers: &BTreeSet<Helper>, cx: &PreludeCx) {
    out.push_str("namespace enigma {\n\n");
    for h in helpers {
        match h {
            Helper::CopyBytes => out.push_str(COPY_BYTES),
            Helper::Convert => convert(out, cx),
            Helper::Vec => vec(out, cx),
            Helper::Math(name) => math(out, name, cx),
            Helper::MathVariant(index, precision) => math_variant(out, Intrinsic::ALL[*index], *precision, cx),
            Helper::Clamp => out.push_str("template <typename T> __device__ inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }\n\n"),
            Helper::Bits => {
                out.push_str(BITS);
                if cx.vectors {
                    for f in ["popcount", "clz", "ctz"] {
                        let _ = write!(
                            out,
                            "template <typename T, int N> __device__ inline vec<T, N> {f}(const vec<T, N>& v)\n{{\n    vec<T, N> r;\n    for (int i = 0; i < N; ++i) r[i] = {f}(v[i]);\n    return r;\n}}\n"
                        );
                    }
                    out.push('\n');
                }
            }
            Helper::Select => select(out, cx),
            Helper::Bitcast => out.push_str(BITCAST),
            Helper::AtomicAccess => out.push_str(ATOMIC_ACCESS),
            Helper::SimdCore => out.push_str(SIMD_CORE),
            Helper::Simd(_, name) => simd(out, name),
            Helper::Texture => out.push_str(TEXTURE),
            Helper::AsyncCopy => out.push_str(ASYNC_COPY),
            Helper::TileCopy => out.push_str(TILE_COPY),
            Helper::AndOr => out.push_str(AND_OR),
            Helper::CooperativeLayout => out.push_str(COOPERATIVE_LAYOUT),
            Helper::Wgmma => out.push_str(WGMMA),
        }
    }
    out.push_str(GEOMETRY);
    out.push_str("} // namespace enigma\n\n");
}

fn convert(out: &mut String, cx: &PreludeCx) {
    out.push_str(
        "// Value conversion as in MSL; `half` and `bfloat` convert through `float`.
template <typename To, typename From> struct Convert {
    static __device__ To run(From x) { return (To)x; }
};
// Float to a narrow integer saturates at the type's range, NaN gives 0 (as
// in the simulator); a plain C cast would go through int and wrap.
template <> struct Convert<signed char, float> {
    static __device__ signed char run(float x) { return (signed char)::max(-128, ::min(127, __float2int_rz(x))); }
};
template <> struct Convert<short, float> {
    static __device__ short run(float x) { return (short)::max(-32768, ::min(32767, __float2int_rz(x))); }
};
template <> struct Convert<unsigned char, float> {
    static __device__ unsigned char run(float x) { return (unsigned char)::min(255u, __float2uint_rz(x)); }
};
// 32-bit conversions through the round-toward-zero intrinsics, which
// saturate and give 0 for NaN (a C cast is undefined out of range).
template <> struct Convert<int, float> {
    static __device__ int run(float x) { return __float2int_rz(x); }
};
template <> struct Convert<unsigned int, float> {
    static __device__ unsigned int run(float x) { return __float2uint_rz(x); }
};
// 64-bit conversions saturate in hardware, but NaN would give the minimum.
template <> struct Convert<long long, float> {
    static __device__ long long run(float x) { return x != x ? 0ll : __float2ll_rz(x); }
};
template <> struct Convert<unsigned long long, float> {
    static __device__ unsigned long long run(float x) { return x != x ? 0ull : __float2ull_rz(x); }
};
template <> struct Convert<unsigned short, float> {
    static __device__ unsigned short run(float x) { return (unsigned short)::min(65535u, __float2uint_rz(x)); }
};
",
    );
    let mut halves = vec![];
    if cx.half {
        halves.push("__half");
    }
    if cx.bfloat {
        halves.push("__nv_bfloat16");
    }
    for h in &halves {
        let _ = write!(
            out,
            "template <typename To> struct Convert<To, {h}> {{
    static __device__ To run({h} x) {{ return Convert<To, float>::run((float)x); }}
}};
template <typename From> struct Convert<{h}, From> {{
    static __device__ {h} run(From x) {{ return ({h})(float)x; }}
}};
template <> struct Convert<{h}, {h}> {{
    static __device__ {h} run({h} x) {{ return x; }}
}};
"
        );
    }
    if halves.len() == 2 {
        out.push_str(
            "template <> struct Convert<__half, __nv_bfloat16> {
    static __device__ __half run(__nv_bfloat16 x) { return (__half)(float)x; }
};
template <> struct Convert<__nv_bfloat16, __half> {
    static __device__ __nv_bfloat16 run(__half x) { return (__nv_bfloat16)(float)x; }
};
",
        );
    }
    out.push_str(
        "template <typename To, typename From> __device__ inline To convert(From x)
{
    return Convert<To, From>::run(x);
}

",
    );
}

fn vec(out: &mut String, cx: &PreludeCx) {
    out.push_str(
        r#"// Vectors laid out as in MSL: aligned to their size, a 3-vector padded to
// the size of a 4-vector. Arithmetic is componentwise, a scalar operand is
// splatted, and comparisons give bool vectors.
template <typename T, int N> struct vec;

template <typename T> struct alignas(2 * sizeof(T)) vec<T, 2> {
    T x, y;
    vec() = default;
    __device__ explicit vec(T s) : x(s), y(s) {}
    __device__ vec(T x_, T y_) : x(x_), y(y_) {}
    template <typename U> __device__ explicit vec(const vec<U, 2>& v) : x(convert<T>(v.x)), y(convert<T>(v.y)) {}
    __device__ T& operator[](int i) { return i == 0 ? x : y; }
    __device__ const T& operator[](int i) const { return i == 0 ? x : y; }
};

template <typename T> struct alignas(4 * sizeof(T)) vec<T, 3> {
    T x, y, z;
    vec() = default;
    __device__ explicit vec(T s) : x(s), y(s), z(s) {}
    __device__ vec(T x_, T y_, T z_) : x(x_), y(y_), z(z_) {}
    template <typename U> __device__ explicit vec(const vec<U, 3>& v)
        : x(convert<T>(v.x)), y(convert<T>(v.y)), z(convert<T>(v.z)) {}
    __device__ T& operator[](int i) { return i == 0 ? x : i == 1 ? y : z; }
    __device__ const T& operator[](int i) const { return i == 0 ? x : i == 1 ? y : z; }
};

template <typename T> struct alignas(4 * sizeof(T)) vec<T, 4> {
    T x, y, z, w;
    vec() = default;
    __device__ explicit vec(T s) : x(s), y(s), z(s), w(s) {}
    __device__ vec(T x_, T y_, T z_, T w_) : x(x_), y(y_), z(z_), w(w_) {}
    template <typename U> __device__ explicit vec(const vec<U, 4>& v)
        : x(convert<T>(v.x)), y(convert<T>(v.y)), z(convert<T>(v.z)), w(convert<T>(v.w)) {}
    __device__ T& operator[](int i) { return i == 0 ? x : i == 1 ? y : i == 2 ? z : w; }
    __device__ const T& operator[](int i) const { return i == 0 ? x : i == 1 ? y : i == 2 ? z : w; }
};

#define ENIGMA_VEC_BINARY(OP)                                                                            \
    template <typename T, int N> __device__ inline vec<T, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) \
    {                                                                                                    \
        vec<T, N> r;                                                                                     \
        for (int i = 0; i < N; ++i) r[i] = T(a[i] OP b[i]);                                              \
        return r;                                                                                        \
    }                                                                                                    \
    template <typename T, int N> __device__ inline vec<T, N> operator OP(const vec<T, N>& a, T b)        \
    {                                                                                                    \
        return a OP vec<T, N>(b);                                                                        \
    }                                                                                                    \
    template <typename T, int N> __device__ inline vec<T, N> operator OP(T a, const vec<T, N>& b)        \
    {                                                                                                    \
        return vec<T, N>(a) OP b;                                                                        \
    }                                                                                                    \
    template <typename T, int N> __device__ inline vec<T, N>& operator OP##=(vec<T, N>& a, const vec<T, N>& b) \
    {                                                                                                    \
        return a = a OP b;                                                                               \
    }                                                                                                    \
    template <typename T, int N> __device__ inline vec<T, N>& operator OP##=(vec<T, N>& a, T b)          \
    {                                                                                                    \
        return a = a OP vec<T, N>(b);                                                                    \
    }
ENIGMA_VEC_BINARY(+)
ENIGMA_VEC_BINARY(-)
ENIGMA_VEC_BINARY(*)
ENIGMA_VEC_BINARY(/)
ENIGMA_VEC_BINARY(%)
ENIGMA_VEC_BINARY(&)
ENIGMA_VEC_BINARY(|)
ENIGMA_VEC_BINARY(^)
ENIGMA_VEC_BINARY(<<)
ENIGMA_VEC_BINARY(>>)
#undef ENIGMA_VEC_BINARY

#define ENIGMA_VEC_COMPARE(OP)                                                                           \
    template <typename T, int N> __device__ inline vec<bool, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) \
    {                                                                                                    \
        vec<bool, N> r;                                                                                  \
        for (int i = 0; i < N; ++i) r[i] = a[i] OP b[i];                                                 \
        return r;                                                                                        \
    }
ENIGMA_VEC_COMPARE(==)
ENIGMA_VEC_COMPARE(!=)
ENIGMA_VEC_COMPARE(<)
ENIGMA_VEC_COMPARE(<=)
ENIGMA_VEC_COMPARE(>)
ENIGMA_VEC_COMPARE(>=)
ENIGMA_VEC_COMPARE(&&)
ENIGMA_VEC_COMPARE(||)
#undef ENIGMA_VEC_COMPARE

template <typename T, int N> __device__ inline vec<T, N> operator-(const vec<T, N>& a)
{
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r[i] = T(-a[i]);
    return r;
}
template <typename T, int N> __device__ inline vec<T, N> operator~(const vec<T, N>& a)
{
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r[i] = T(~a[i]);
    return r;
}
template <int N> __device__ inline vec<bool, N> operator!(const vec<bool, N>& a)
{
    vec<bool, N> r;
    for (int i = 0; i < N; ++i) r[i] = !a[i];
    return r;
}

"#,
    );
    if cx.half {
        out.push_str(HALF2);
    }
    for (alias, scalar, width) in &cx.aliases {
        let _ = writeln!(out, "typedef vec<{scalar}, {width}> {alias};");
    }
    out.push('\n');
}

/// `vec<__half, 2>`'s arithmetic as the hardware's `__half2` pairs: one
/// HADD2 / HMUL2 / HFMA2 per pair (the same roundings as componentwise).
const HALF2: &str = "__device__ inline __half2 as_half2(const vec<__half, 2>& v) { return *reinterpret_cast<const __half2*>(&v); }
__device__ inline vec<__half, 2> from_half2(__half2 v) { return *reinterpret_cast<const vec<__half, 2>*>(&v); }
__device__ inline vec<__half, 2> operator+(const vec<__half, 2>& a, const vec<__half, 2>& b) { return from_half2(__hadd2(as_half2(a), as_half2(b))); }
__device__ inline vec<__half, 2> operator-(const vec<__half, 2>& a, const vec<__half, 2>& b) { return from_half2(__hsub2(as_half2(a), as_half2(b))); }
__device__ inline vec<__half, 2> operator*(const vec<__half, 2>& a, const vec<__half, 2>& b) { return from_half2(__hmul2(as_half2(a), as_half2(b))); }

";

/// The f32 implementation of a math function by MSL name, as a format with
/// `{0}`, `{1}`, `{2}` for the arguments.
fn f32_impl(name: &str) -> Option<(&'static str, usize)> {
    Some(match name {
        "exp" => ("expf({0})", 1),
        "exp2" => ("exp2f({0})", 1),
        "log" => ("logf({0})", 1),
        "log2" => ("log2f({0})", 1),
        "sqrt" => ("sqrtf({0})", 1),
        "rsqrt" => ("rsqrtf({0})", 1),
        "tanh" => ("tanhf({0})", 1),
        "sin" => ("sinf({0})", 1),
        "cos" => ("cosf({0})", 1),
        "floor" => ("floorf({0})", 1),
        "ceil" => ("ceilf({0})", 1),
        "pow" => ("powf({0}, {1})", 2),
        "fma" => ("fmaf({0}, {1}, {2})", 3),
        "fmod" => ("fmodf({0}, {1})", 2),
        "tan" => ("tanf({0})", 1),
        "sinh" => ("sinhf({0})", 1),
        "cosh" => ("coshf({0})", 1),
        "asin" => ("asinf({0})", 1),
        "acos" => ("acosf({0})", 1),
        "atan" => ("atanf({0})", 1),
        "atan2" => ("atan2f({0}, {1})", 2),
        "asinh" => ("asinhf({0})", 1),
        "acosh" => ("acoshf({0})", 1),
        "atanh" => ("atanhf({0})", 1),
        "erf" => ("erff({0})", 1),
        "erfc" => ("erfcf({0})", 1),
        "log1p" => ("log1pf({0})", 1),
        "expm1" => ("expm1f({0})", 1),
        "round" => ("roundf({0})", 1),
        "trunc" => ("truncf({0})", 1),
        "rint" => ("rintf({0})", 1),
        "copysign" => ("copysignf({0}, {1})", 2),
        // MSL's sign: ±1, x itself for ±0, 0 for NaN.
        "sign" => ("({0} > 0.0f ? 1.0f : {0} < 0.0f ? -1.0f : {0} == 0.0f ? {0} : 0.0f)", 1),
        "saturate" => ("fminf(fmaxf({0}, 0.0f), 1.0f)", 1),
        "mix" => ("({0} + ({1} - {0}) * {2})", 3),
        "step" => ("({1} < {0} ? 0.0f : 1.0f)", 2),
        "smoothstep" => ("enigma_smoothstep({0}, {1}, {2})", 3),
        // The classifications, on the bits' meaning (no library call):
        // only a NaN is unequal to itself; 0x7f800000 is +∞.
        "isnan" => ("({0} != {0})", 1),
        "isinf" => ("(fabsf({0}) == __int_as_float(0x7f800000))", 1),
        "isfinite" => ("(fabsf({0}) < __int_as_float(0x7f800000))", 1),
        "abs" => ("fabsf({0})", 1),
        "min" => ("fminf({0}, {1})", 2),
        "max" => ("fmaxf({0}, {1})", 2),
        _ => return None,
    })
}

/// `enigma::<ns>_<name>` on `float` and its vectors: `precision`'s CUDA
/// function ([`f32_function`]) on each component.
fn math_variant(out: &mut String, func: Intrinsic, precision: Precision, cx: &PreludeCx) {
    let (Some(ns), Some(f)) = (precision.namespace(), f32_function(func, precision)) else { return };
    let name = format!("{ns}_{}", func.name());
    let params = &["a", "b", "c"][..func.arity()];
    let _ = writeln!(
        out,
        "__device__ inline float {name}({}) {{ return {f}({}); }}",
        params.iter().map(|p| format!("float {p}")).collect::<Vec<_>>().join(", "),
        params.join(", ")
    );
    if cx.vectors {
        let vsig = params.iter().map(|p| format!("const vec<float, N>& {p}")).collect::<Vec<_>>().join(", ");
        let each = params.iter().map(|p| format!("{p}[i]")).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            out,
            "template <int N> __device__ inline vec<float, N> {name}({vsig})\n{{\n    vec<float, N> r;\n    for (int i = 0; i < N; ++i) r[i] = {f}({each});\n    return r;\n}}"
        );
    }
    out.push('\n');
}

fn math(out: &mut String, name: &str, cx: &PreludeCx) {
    let params = ["a", "b", "c"];
    let Some((f32_fmt, arity)) = f32_impl(name) else { return };
    let sig = |ty: &str| params[..arity].iter().map(|p| format!("{ty} {p}")).collect::<Vec<_>>().join(", ");
    let call = |args: &[String]| {
        let mut s = f32_fmt.to_string();
        for (i, a) in args.iter().enumerate() {
            s = s.replace(&format!("{{{i}}}"), a);
        }
        s
    };
    match name {
        "abs" => out.push_str("template <typename T> __device__ inline T abs(T x) { return x < T(0) ? T(-x) : x; }\n"),
        "min" => out.push_str("template <typename T> __device__ inline T min(T a, T b) { return b < a ? b : a; }\n"),
        "max" => out.push_str("template <typename T> __device__ inline T max(T a, T b) { return a < b ? b : a; }\n"),
        _ => {}
    }
    if name == "smoothstep" {
        out.push_str(
            "__device__ inline float enigma_smoothstep(float e0, float e1, float x) { float t = fminf(fmaxf((x - e0) / (e1 - e0), 0.0f), 1.0f); return t * t * (3.0f - 2.0f * t); }\n",
        );
    }
    // A classification returns bool (vec<bool, N>), every other function its argument's type.
    let classify = matches!(name, "isnan" | "isinf" | "isfinite");
    let ret = |ty: &str| if classify { "bool".to_string() } else { ty.to_string() };
    let plain: Vec<String> = params[..arity].iter().map(|p| p.to_string()).collect();
    let _ = writeln!(out, "__device__ inline {} {name}({}) {{ return {}; }}", ret("float"), sig("float"), call(&plain));
    for (used, h) in [(cx.half, "__half"), (cx.bfloat, "__nv_bfloat16")] {
        if used && name == "fma" && h == "__half" {
            // One rounding, as the simulator's f16 fma (through f32 it would be two).
            out.push_str("__device__ inline __half fma(__half a, __half b, __half c) { return __hfma(a, b, c); }\n");
            if cx.vectors {
                out.push_str(
                    "__device__ inline vec<__half, 2> fma(const vec<__half, 2>& a, const vec<__half, 2>& b, const vec<__half, 2>& c) { return from_half2(__hfma2(as_half2(a), as_half2(b), as_half2(c))); }\n",
                );
            }
        } else if used {
            let widened: Vec<String> = params[..arity].iter().map(|p| format!("(float){p}")).collect();
            let _ = writeln!(out, "__device__ inline {} {name}({}) {{ return ({}){}; }}", ret(h), sig(h), ret(h), call(&widened));
        }
    }
    if cx.vectors {
        let vsig = params[..arity].iter().map(|p| format!("const vec<T, N>& {p}")).collect::<Vec<_>>().join(", ");
        let each = params[..arity].iter().map(|p| format!("{p}[i]")).collect::<Vec<_>>().join(", ");
        let elem = ret("T");
        let _ = write!(
            out,
            "template <typename T, int N> __device__ inline vec<{elem}, N> {name}({vsig})
{{
    vec<{elem}, N> r;
    for (int i = 0; i < N; ++i) r[i] = {name}({each});
    return r;
}}
"
        );
    }
    out.push('\n');
}

const COOPERATIVE_LAYOUT: &str = "// The 128-byte swizzle of a threadgroup array that wgmma reads (pitch P, R
// rows): logical element i (row i / P, column i % P) lies in panel column / 64
// (R rows of 64 elements each), its 16-byte chunk XORed with the row modulo 8.
template <unsigned P, unsigned R> __device__ __forceinline__ unsigned swizzle128(unsigned i)
{
    const unsigned row = i / P, col = i % P;
    return (col / 64u) * (R * 64u) + row * 64u + ((((col % 64u) / 8u) ^ (row % 8u)) * 8u) + (col % 8u);
}
// Row and column of slot i of thread t in wgmma's m64nN f32 accumulator,
// S 64-row slices per warpgroup.
template <unsigned S, unsigned N> __device__ __forceinline__ unsigned wgmma_row(unsigned t, unsigned i)
{
    const unsigned u = t % 128u, j = i % (N / 2u);
    return (t / 128u) * 64u * S + (i / (N / 2u)) * 64u + 16u * (u / 32u) + (u % 32u) / 4u + 8u * ((j / 2u) % 2u);
}
template <unsigned N> __device__ __forceinline__ unsigned wgmma_col(unsigned t, unsigned i)
{
    const unsigned j = i % (N / 2u);
    return 8u * (j / 4u) + 2u * (t % 4u) + j % 2u;
}
// Row and column of slot i of thread t in mma.sync's m16n8 f32 fragments:
// SIMD group t / 32 owns rows [B·(t / 32), B·(t / 32 + 1)) in 16×8 tiles,
// row-major over the tiles of an N-column tensor.
template <unsigned B, unsigned N> __device__ __forceinline__ unsigned mma_row(unsigned t, unsigned i)
{
    const unsigned l = t % 32u, q = i % 4u;
    return (t / 32u) * B + 16u * (i / 4u / (N / 8u)) + l / 4u + 8u * (q / 2u);
}
template <unsigned N> __device__ __forceinline__ unsigned mma_col(unsigned t, unsigned i)
{
    const unsigned q = i % 4u;
    return 8u * (i / 4u % (N / 8u)) + 2u * (t % 4u) + q % 2u;
}

";

const WGMMA: &str = "// wgmma (sm_90a): a shared-memory matrix descriptor in the 128-byte swizzle
// (start address, leading and stride byte offsets, each in 16-byte units).
__device__ __forceinline__ unsigned long long wgmma_desc(const void* p, unsigned lead, unsigned stride)
{
    const unsigned a = unsigned(__cvta_generic_to_shared(p));
    return (unsigned long long)((a & 0x3FFFFu) >> 4) | ((unsigned long long)((lead >> 4) & 0x3FFFu) << 16)
        | ((unsigned long long)((stride >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}
// Orders this thread's earlier shared-memory writes before reads of the async
// proxy (wgmma's operand reads).
__device__ __forceinline__ void async_proxy_fence() { asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\"); }
__device__ __forceinline__ void wgmma_wait() { asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\"); }
// Waits for every committed group but the most recent one.
__device__ __forceinline__ void wgmma_wait_all_but_last() { asm volatile(\"wgmma.wait_group.sync.aligned 1;\\n\" ::: \"memory\"); }

";

const AND_OR: &str = "// (a & b) | c in one LOP3 with every operand in a register: given two
// immediates the compiler splits it into two instructions, one immediate each.
__device__ inline unsigned and_or(unsigned a, unsigned b, unsigned c)
{
    unsigned d;
    asm(\"lop3.b32 %0, %1, %2, %3, 0xEA;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(c));
    return d;
}

";

const BITS: &str = "// popcount, clz and ctz of the value's own width, as in MSL.
template <typename T> __device__ inline unsigned long long bits_of(T x)
{
    return sizeof(T) == 8 ? (unsigned long long)x : (unsigned long long)x & ((1ull << (8 * sizeof(T))) - 1);
}
template <typename T> __device__ inline T popcount(T x) { return T(__popcll(bits_of(x))); }
template <typename T> __device__ inline T clz(T x) { return T(__clzll(bits_of(x)) - (64 - 8 * (int)sizeof(T))); }
template <typename T> __device__ inline T ctz(T x)
{
    return bits_of(x) == 0 ? T(8 * sizeof(T)) : T(__ffsll((long long)bits_of(x)) - 1);
}

";

fn select(out: &mut String, cx: &PreludeCx) {
    out.push_str(
        "// MSL's select(a, b, c): c ? b : a, with every argument evaluated.
template <typename T> __device__ inline T select(T a, T b, bool c) { return c ? b : a; }
",
    );
    if cx.vectors {
        out.push_str(
            "template <typename T, int N> __device__ inline vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, const vec<bool, N>& c)
{
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r[i] = c[i] ? b[i] : a[i];
    return r;
}
",
        );
    }
    out.push('\n');
}

const COPY_BYTES: &str = "// Copies n bytes (the compiler turns fixed-size copies into register moves).
__device__ inline void copy_bytes(void* dst, const void* src, unsigned n)
{
    unsigned char* d = static_cast<unsigned char*>(dst);
    const unsigned char* s = static_cast<const unsigned char*>(src);
    for (unsigned i = 0; i < n; ++i) d[i] = s[i];
}

";

const BITCAST: &str = "// MSL's as_type<To>(x): the same bits as another type of the same size.
template <typename To, typename From> __device__ inline To bitcast(From x)
{
    static_assert(sizeof(To) == sizeof(From), \"bitcast between types of different sizes\");
    To r;
    if (sizeof(To) % 4 == 0) {
        // Whole words (such types are word-aligned): the compiler keeps them
        // in registers, where a byte loop becomes byte extracts and inserts.
        unsigned* d = reinterpret_cast<unsigned*>(&r);
        const unsigned* s = reinterpret_cast<const unsigned*>(&x);
        for (unsigned i = 0; i < sizeof(To) / 4; ++i) d[i] = s[i];
    } else {
        copy_bytes(&r, &x, sizeof(To));
    }
    return r;
}

";

const ATOMIC_ACCESS: &str = "// Plain loads and stores of memory that atomics also touch (relaxed).
template <typename T> __device__ inline T atomic_load(const T* p) { return *(const volatile T*)p; }
template <typename T> __device__ inline void atomic_store(T* p, T v) { *(volatile T*)p = v; }

";

const SIMD_CORE: &str = "// SIMD groups are warps. Metal's SIMD-group functions act on the active
// lanes, which here are those in __activemask(): reductions and scans over
// a partial warp combine exactly the active lanes (by rank), and shuffles
// read only lanes in that mask.
__device__ inline uint lane_id()
{
    uint lane;
    asm(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));
    return lane;
}

// The lane of the n-th (from 0) set bit of mask.
__device__ inline uint nth_lane(uint mask, uint n)
{
    uint lane = 0;
    for (uint step = 16; step > 0; step /= 2) {
        if ((uint)__popc(mask & ((1u << (lane + step)) - 1u)) <= n) lane += step;
    }
    return lane;
}

// How many lanes of mask come before this one.
__device__ inline uint rank_in(uint mask, uint lane) { return __popc(mask & ((1u << lane) - 1u)); }

// __shfl_sync of any type, 32 bits at a time.
template <typename T> __device__ inline T shfl(uint mask, T x, uint src)
{
    constexpr int words = (sizeof(T) + 3) / 4;
    uint w[words] = {};
    copy_bytes(w, &x, sizeof(T));
    for (int i = 0; i < words; ++i) w[i] = __shfl_sync(mask, w[i], src);
    T r;
    copy_bytes(&r, w, sizeof(T));
    return r;
}

template <typename T> __device__ inline T zero_value()
{
    T r;
    unsigned char* bytes = reinterpret_cast<unsigned char*>(&r);
    for (unsigned i = 0; i < sizeof(T); ++i) bytes[i] = 0;
    return r;
}

struct SumOp { template <typename T> __device__ T operator()(T a, T b) const { return T(a + b); } };
struct ProductOp { template <typename T> __device__ T operator()(T a, T b) const { return T(a * b); } };
struct AndOp { template <typename T> __device__ T operator()(T a, T b) const { return T(a & b); } };
struct OrOp { template <typename T> __device__ T operator()(T a, T b) const { return T(a | b); } };
struct XorOp { template <typename T> __device__ T operator()(T a, T b) const { return T(a ^ b); } };

// The reduction of x over the active lanes, in every active lane.
template <typename T, typename Op> __device__ inline T simd_reduce(T x, Op op)
{
    const uint mask = __activemask();
    const uint lane = lane_id();
    if (mask == 0xffffffffu) {
        for (uint d = 16; d > 0; d /= 2) x = op(x, shfl(mask, x, lane ^ d));
        return x;
    }
    // A partial warp: a tree over the active lanes' ranks; rank 0 ends with the total.
    const uint n = __popc(mask);
    const uint rank = rank_in(mask, lane);
    for (uint d = 1; d < n; d *= 2) {
        const bool has_partner = rank + d < n;
        const T other = shfl(mask, x, has_partner ? nth_lane(mask, rank + d) : lane);
        if (has_partner) x = op(x, other);
    }
    return shfl(mask, x, __ffs(mask) - 1);
}

";

fn simd(out: &mut String, name: &str) {
    let text = match name {
        "simd_sum" => "template <typename T> __device__ inline T simd_sum(T x) { return simd_reduce(x, SumOp()); }\n",
        "simd_product" => "template <typename T> __device__ inline T simd_product(T x) { return simd_reduce(x, ProductOp()); }\n",
        "simd_and" => "template <typename T> __device__ inline T simd_and(T x) { return simd_reduce(x, AndOp()); }\n",
        "simd_or" => "template <typename T> __device__ inline T simd_or(T x) { return simd_reduce(x, OrOp()); }\n",
        "simd_xor" => "template <typename T> __device__ inline T simd_xor(T x) { return simd_reduce(x, XorOp()); }\n",
        "simd_min" => {
            "struct MinOp { template <typename T> __device__ T operator()(T a, T b) const { return min(a, b); } };
template <typename T> __device__ inline T simd_min(T x) { return simd_reduce(x, MinOp()); }
"
        }
        "simd_max" => {
            "struct MaxOp { template <typename T> __device__ T operator()(T a, T b) const { return max(a, b); } };
template <typename T> __device__ inline T simd_max(T x) { return simd_reduce(x, MaxOp()); }
"
        }
        "simd_broadcast" => {
            "// The lane is the first active lane's argument, as in the simulator.
template <typename T> __device__ inline T simd_broadcast(T x, uint lane)
{
    const uint mask = __activemask();
    return shfl(mask, x, __shfl_sync(mask, lane, __ffs(mask) - 1) % 32u);
}
"
        }
        "simd_broadcast_first" => {
            "template <typename T> __device__ inline T simd_broadcast_first(T x)
{
    const uint mask = __activemask();
    return shfl(mask, x, __ffs(mask) - 1);
}
"
        }
        "simd_shuffle" => {
            "template <typename T> __device__ inline T simd_shuffle(T x, uint lane) { return shfl(__activemask(), x, lane % 32u); }\n"
        }
        "simd_shuffle_up" => {
            "// Lanes below delta keep their own value.
template <typename T> __device__ inline T simd_shuffle_up(T x, uint delta)
{
    const uint lane = lane_id();
    return shfl(__activemask(), x, lane >= delta ? lane - delta : lane);
}
"
        }
        "simd_shuffle_down" => {
            "// Lanes whose source would pass lane 31 keep their own value.
template <typename T> __device__ inline T simd_shuffle_down(T x, uint delta)
{
    const uint lane = lane_id();
    return shfl(__activemask(), x, delta < 32u - lane ? lane + delta : lane);
}
"
        }
        "simd_shuffle_xor" => {
            "template <typename T> __device__ inline T simd_shuffle_xor(T x, uint mask)
{
    return shfl(__activemask(), x, (lane_id() ^ mask) % 32u);
}
"
        }
        "simd_prefix_inclusive_sum" => {
            "// Sum over the active lanes up to this one (Hillis-Steele over ranks).
template <typename T> __device__ inline T simd_prefix_inclusive_sum(T x)
{
    const uint mask = __activemask();
    const uint lane = lane_id();
    const uint n = __popc(mask);
    const uint rank = rank_in(mask, lane);
    for (uint d = 1; d < n; d *= 2) {
        const bool has_lower = rank >= d;
        const uint src = !has_lower ? lane : mask == 0xffffffffu ? lane - d : nth_lane(mask, rank - d);
        const T lower = shfl(mask, x, src);
        if (has_lower) x = T(lower + x);
    }
    return x;
}
"
        }
        "simd_prefix_exclusive_sum" => {
            "// Sum over the active lanes before this one; zero in the first.
template <typename T> __device__ inline T simd_prefix_exclusive_sum(T x)
{
    const uint mask = __activemask();
    const uint lane = lane_id();
    const uint rank = rank_in(mask, lane);
    const T inclusive = simd_prefix_inclusive_sum(x);
    const T before = shfl(mask, inclusive, rank > 0 ? nth_lane(mask, rank - 1) : lane);
    return rank > 0 ? before : zero_value<T>();
}
"
        }
        "simd_all" => "__device__ inline bool simd_all(bool p) { return __all_sync(__activemask(), p) != 0; }\n",
        "simd_any" => "__device__ inline bool simd_any(bool p) { return __any_sync(__activemask(), p) != 0; }\n",
        "simd_ballot" => {
            "__device__ inline unsigned long long simd_ballot(bool p) { return __ballot_sync(__activemask(), p); }\n"
        }
        "simd_is_first" => {
            "__device__ inline bool simd_is_first() { return lane_id() == (uint)(__ffs(__activemask()) - 1); }\n"
        }
        _ => "",
    };
    out.push_str(text);
    out.push('\n');
}

const GEOMETRY: &str = "// The Metal threadgroup this block plays. Under dispatch_threads the
// threadgroups at the far edges of the grid are partial: the block is
// launched full, its first `threads` threads in linear order play the
// threadgroup's threads (so warps are exactly its SIMD groups), and the
// others return before the kernel body.
struct Threadgroup {
    uint size_x, size_y, size_z; // threads_per_threadgroup
    uint index;                  // thread_index_in_threadgroup
    uint threads;                // size_x * size_y * size_z

    static __device__ uint edge(uint block, uint id, uint grid)
    {
        const uint left = grid - id * block;
        return left < block ? left : block;
    }
    __device__ Threadgroup(uint grid_x, uint grid_y, uint grid_z)
        : size_x(edge(blockDim.x, blockIdx.x, grid_x)),
          size_y(edge(blockDim.y, blockIdx.y, grid_y)),
          size_z(edge(blockDim.z, blockIdx.z, grid_z)),
          index(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)),
          threads(size_x * size_y * size_z)
    {
    }
    __device__ bool in_grid() const { return index < threads; }
    __device__ uint position_x() const { return index % size_x; }
    __device__ uint position_y() const { return index / size_x % size_y; }
    __device__ uint position_z() const { return index / (size_x * size_y); }
};

// The kernel's first statement. The backend launches every kernel as a
// programmatic dependent of the one before it in the stream (sm_90 on), so
// that its launch overlaps that kernel's last threadgroups; this waits for
// that kernel to complete and its writes to be visible before the kernel
// reads or writes anything. Without such a launch, or before sm_90, it
// does nothing.
__device__ __forceinline__ void grid_dependency_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");
#endif
}

// threadgroup_barrier: waits for the warps that hold the threadgroup's
// threads. A named barrier with a thread count (a multiple of 32, counted
// per warp) leaves out the warps of a partial threadgroup that returned;
// the returned lanes of its last warp are not waited for (PTX barrier.sync).
__device__ inline void threadgroup_barrier(const Threadgroup& tg)
{
    asm volatile(\"barrier.sync 0, %0;\" : : \"r\"((tg.threads + 31u) / 32u * 32u) : \"memory\");
}

";

/// The spelling of each scalar inside the prelude's aliases.
pub(crate) fn scalar_for_alias(s: Scalar) -> &'static str {
    match s {
        Scalar::Bool => "bool",
        Scalar::I8 => "signed char",
        Scalar::I16 => "short",
        Scalar::I32 => "int",
        Scalar::I64 => "long long",
        Scalar::U8 => "unsigned char",
        Scalar::U16 => "unsigned short",
        Scalar::U32 => "uint",
        Scalar::U64 => "unsigned long long",
        Scalar::F16 => "__half",
        Scalar::BF16 => "__nv_bfloat16",
        Scalar::F32 => "float",
    }
}

/// `texture2d` on CUDA: a surface object over a cudaArray of the texels,
/// the texture's size and format, and a texture object per sampler the
/// kernel samples it with, passed by value; reads and writes switch on the
/// format at run time (it belongs to the texture, not the kernel) and
/// convert as Metal does, on raw surface elements (x addressed in bytes);
/// samples are `tex2D` through the sampler's texture object.
const TEXTURE: &str = r#"// A texture2d argument: the surface object of a cudaArray holding the
// texels in `format`, the texture's size, and the texture objects of the
// samplers the kernel samples it with (their coordinates, filter and address
// modes are the texture object's; unorm8 formats read normalised). Surfaces
// address x in bytes and are read and written as raw elements: the unorm8
// and float16 conversions are Metal's, done here.
enum texture_format : uint { r8unorm, rgba8unorm, r16float, rgba16float, r32float, rgba32float, r32uint, r32sint };
struct texture2d {
    unsigned long long surface; // cudaSurfaceObject_t
    uint width, height, format;
    unsigned long long samplers[4]; // cudaTextureObject_t, one per sampler
    __device__ uint get_width() const { return width; }
    __device__ uint get_height() const { return height; }
};
__device__ inline float texture_from_unorm8(unsigned char c) { return c / 255.0f; }
__device__ inline unsigned char texture_to_unorm8(float v) { return (unsigned char)__float2uint_rn((v != v ? 0.0f : fminf(fmaxf(v, 0.0f), 1.0f)) * 255.0f); }
__device__ inline float texture_from_half(unsigned short h) { return __half2float(__ushort_as_half(h)); }
__device__ inline unsigned short texture_to_half(float v) { return __half_as_ushort(__float2half_rn(v)); }
// tex.read(c) with float or half texels; missing channels read as (0, 0, 0, 1).
template <typename T> __device__ inline vec<T, 4> texture_read(const texture2d& t, const vec<uint, 2>& c) {
    float v[4] = {0.0f, 0.0f, 0.0f, 1.0f};
    switch (t.format) {
    case r8unorm: v[0] = texture_from_unorm8(surf2Dread<unsigned char>(t.surface, c.x, c.y)); break;
    case rgba8unorm: {
        const ::uchar4 p = surf2Dread<::uchar4>(t.surface, c.x * 4, c.y);
        v[0] = texture_from_unorm8(p.x); v[1] = texture_from_unorm8(p.y); v[2] = texture_from_unorm8(p.z); v[3] = texture_from_unorm8(p.w);
    } break;
    case r16float: v[0] = texture_from_half(surf2Dread<unsigned short>(t.surface, c.x * 2, c.y)); break;
    case rgba16float: {
        const ::ushort4 p = surf2Dread<::ushort4>(t.surface, c.x * 8, c.y);
        v[0] = texture_from_half(p.x); v[1] = texture_from_half(p.y); v[2] = texture_from_half(p.z); v[3] = texture_from_half(p.w);
    } break;
    case r32float: v[0] = surf2Dread<float>(t.surface, c.x * 4, c.y); break;
    case rgba32float: {
        const ::float4 p = surf2Dread<::float4>(t.surface, c.x * 16, c.y);
        v[0] = p.x; v[1] = p.y; v[2] = p.z; v[3] = p.w;
    } break;
    }
    return vec<T, 4>(convert<T>(v[0]), convert<T>(v[1]), convert<T>(v[2]), convert<T>(v[3]));
}
template <> __device__ inline vec<uint, 4> texture_read<uint>(const texture2d& t, const vec<uint, 2>& c) {
    return vec<uint, 4>(surf2Dread<uint>(t.surface, c.x * 4, c.y), 0u, 0u, 1u);
}
template <> __device__ inline vec<int, 4> texture_read<int>(const texture2d& t, const vec<uint, 2>& c) {
    return vec<int, 4>(surf2Dread<int>(t.surface, c.x * 4, c.y), 0, 0, 1);
}
// tex.sample(sampler, uv) with float or half texels, through the texture
// object of the texture's sampler `slot`; one-channel formats read the
// missing channels as (0, 0, 1), the clamp-to-zero border included, as Metal does.
template <typename T> __device__ inline vec<T, 4> texture_sample(const texture2d& t, uint slot, const vec<float, 2>& uv) {
    const ::float4 p = tex2D<::float4>(t.samplers[slot], uv.x, uv.y);
    const bool one = t.format == r8unorm || t.format == r16float || t.format == r32float;
    return vec<T, 4>(convert<T>(p.x), convert<T>(one ? 0.0f : p.y), convert<T>(one ? 0.0f : p.z), convert<T>(one ? 1.0f : p.w));
}
// tex.fence(): this thread's surface writes before its later surface reads
// (a block-scope memory fence; surface loads and stores of one thread).
__device__ inline void texture_fence(const texture2d&) { __threadfence_block(); }
// tex.write(value, c) with float or half texels; channels the format lacks are dropped.
template <typename T> __device__ inline void texture_write(const texture2d& t, const vec<T, 4>& value, const vec<uint, 2>& c) {
    const float v[4] = {convert<float>(value.x), convert<float>(value.y), convert<float>(value.z), convert<float>(value.w)};
    switch (t.format) {
    case r8unorm: surf2Dwrite(texture_to_unorm8(v[0]), t.surface, c.x, c.y); break;
    case rgba8unorm:
        surf2Dwrite(make_uchar4(texture_to_unorm8(v[0]), texture_to_unorm8(v[1]), texture_to_unorm8(v[2]), texture_to_unorm8(v[3])), t.surface, c.x * 4, c.y);
        break;
    case r16float: surf2Dwrite(texture_to_half(v[0]), t.surface, c.x * 2, c.y); break;
    case rgba16float:
        surf2Dwrite(make_ushort4(texture_to_half(v[0]), texture_to_half(v[1]), texture_to_half(v[2]), texture_to_half(v[3])), t.surface, c.x * 8, c.y);
        break;
    case r32float: surf2Dwrite(v[0], t.surface, c.x * 4, c.y); break;
    case rgba32float: surf2Dwrite(make_float4(v[0], v[1], v[2], v[3]), t.surface, c.x * 16, c.y); break;
    }
}
__device__ inline void texture_write(const texture2d& t, const vec<uint, 4>& value, const vec<uint, 2>& c) {
    surf2Dwrite(value.x, t.surface, c.x * 4, c.y);
}
__device__ inline void texture_write(const texture2d& t, const vec<int, 4>& value, const vec<uint, 2>& c) {
    surf2Dwrite(value.x, t.surface, c.x * 4, c.y);
}

"#;

const TILE_COPY: &str = r#"// Tile copies (sm_90): a CUtensorMap passed by value, boxes copied by the
// tensor copy engine into shared memory, completing on a shared-memory
// barrier (mbarrier) that expects the bytes they bring; one thread arrives
// at the wait.
struct alignas(64) tensor_map { unsigned long long opaque[16]; };
__device__ __forceinline__ unsigned shared_address(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
// Barriers of one arrival each, visible to the copy engine.
__device__ __forceinline__ void tile_barriers_init(unsigned long long* bars, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(shared_address(&bars[i])) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Adds `bytes` the engine brings to the barrier's current phase.
__device__ __forceinline__ void tile_expect(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" :: "r"(shared_address(bar)), "r"(bytes) : "memory");
}
// The box at (column, row) of the map's matrix into dst, zeros outside it.
__device__ __forceinline__ void tile_load(void* dst, const tensor_map* map, int column, int row, unsigned long long* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(shared_address(dst)), "l"(map), "r"(column), "r"(row), "r"(shared_address(bar)) : "memory");
}
// The phase's one arrival (at the wait, by one thread): the phase completes
// once the bytes expected have landed too.
__device__ __forceinline__ void tile_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(shared_address(bar)) : "memory");
}
// Waits for the barrier's phase of this parity to complete.
__device__ __forceinline__ void tile_wait(unsigned long long* bar, unsigned parity) {
    unsigned done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
    } while (!done);
}

"#;

const ASYNC_COPY: &str = r#"// async_copy: Bytes (4, 8 or 16) from global to shared memory in the
// background (cp.async; .cg bypasses L1 for 16 bytes), zeros where !valid
// (a source size of 0 reads nothing; the buffer's base stands in for the
// source address then). Complete after the async_wait<n> that leaves at most
// n newer groups in flight. Before sm_80: a plain copy, complete at once.
template <int Bytes>
__device__ __forceinline__ void async_copy(void* dst, const void* src, const void* base, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned to = unsigned(__cvta_generic_to_shared(dst));
    const void* from = valid ? src : base;
    if (Bytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(to), "l"(from), "r"(valid ? 16 : 0) : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" :: "r"(to), "l"(from), "n"(Bytes), "r"(valid ? Bytes : 0) : "memory");
    }
#else
    for (int w = 0; w < Bytes / 4; ++w) {
        static_cast<unsigned*>(dst)[w] = valid ? static_cast<const unsigned*>(src)[w] : 0u;
    }
#endif
}

__device__ __forceinline__ void async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int Pending>
__device__ __forceinline__ void async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(Pending) : "memory");
#endif
}

"#;

/// The f32 CUDA function for `precision`'s variant of a math intrinsic:
/// `precise::` takes the correctly rounded `__fsqrt_rn` and `__frsqrt_rn`
/// and CUDA's full-precision functions otherwise; `fast::` takes the
/// intrinsics CUDA has (`__expf`, `__logf`, `__log2f`, `__sinf`, `__cosf`,
/// `__tanf`, `__powf`) and the default function where it has none.
pub(super) fn f32_function(func: Intrinsic, precision: Precision) -> Option<&'static str> {
    use Intrinsic::*;
    match (precision, func) {
        (Precision::Precise, Sqrt) => return Some("__fsqrt_rn"),
        (Precision::Precise, Rsqrt) => return Some("__frsqrt_rn"),
        (Precision::Fast, Exp) => return Some("__expf"),
        (Precision::Fast, Log) => return Some("__logf"),
        (Precision::Fast, Log2) => return Some("__log2f"),
        (Precision::Fast, Sin) => return Some("__sinf"),
        (Precision::Fast, Cos) => return Some("__cosf"),
        (Precision::Fast, Tan) => return Some("__tanf"),
        (Precision::Fast, Pow) => return Some("__powf"),
        _ => {}
    }
    Some(match func {
        Exp => "expf",
        Exp2 => "exp2f",
        Log => "logf",
        Log2 => "log2f",
        Sqrt => "sqrtf",
        Rsqrt => "rsqrtf",
        Tanh => "tanhf",
        Sin => "sinf",
        Cos => "cosf",
        Floor => "floorf",
        Ceil => "ceilf",
        Pow => "powf",
        Fma => "fmaf",
        Tan => "tanf",
        Sinh => "sinhf",
        Cosh => "coshf",
        Asin => "asinf",
        Acos => "acosf",
        Atan => "atanf",
        Atan2 => "atan2f",
        Asinh => "asinhf",
        Acosh => "acoshf",
        Atanh => "atanhf",
        Erf => "erff",
        Erfc => "erfcf",
        Log1p => "log1pf",
        Expm1 => "expm1f",
        Round => "roundf",
        Trunc => "truncf",
        Rint => "rintf",
        Copysign => "copysignf",
        Fmod => "fmodf",
        Abs => "fabsf",
        Min => "fminf",
        Max => "fmaxf",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::Intrinsic;

    #[test]
    fn the_inclusive_sum_index_is_its_place_in_all() {
        let place = Intrinsic::ALL.iter().position(|i| *i == Intrinsic::SimdPrefixInclusiveSum).unwrap();
        assert_eq!(INCLUSIVE_SUM, Helper::Simd(place, "simd_prefix_inclusive_sum"));
    }
}
