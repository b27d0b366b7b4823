//! Element-wise kernels: `scale`, `add`, `mul`, `div`, `relu`, `silu`, `gelu` (tanh
//! form), `gelu_erf` (the erf form), `sigmoid`, `exp`, `log`, for f32, f16
//! and bf16, with scalar or 4-wide vector loads.
//!
//! **Broadcasting** ([`broadcast_binary`], [`plan_broadcast`]): `add`,
//! `mul` and `div` of two arrays of NumPy-broadcast shapes. The plan drops
//! dimensions of 1 and merges neighbours both inputs walk as one longer
//! dimension ([`collapse_broadcast`]), which leaves the output as `[rows,
//! inner]`: the innermost merged dimension and the rest. Along `inner`
//! each input is either contiguous or one element splatted over the row
//! ([`InnerAccess`]), so a row vector against a matrix (`[R, C] op [C]`),
//! a column vector (`[R, C] op [R, 1]`) and a scalar all become one
//! contiguous walk, with `float4`/`half4` loads and stores when `inner` is
//! a multiple of 4. One thread per element (or vector) of the output, as
//! in the flat kernels: it splits its index into row and column, and the
//! row over the outer dimensions to find the row's start in each input
//! (one division for the row, none more with one outer dimension; at most
//! [`MAX_OUTER_DIMS`], the kernel specialised to their number).
//! Parameters: `a[4], b[4], y[4], l0, l1, …, units, total`; the `l`s are
//! the outer dimensions, then `a`'s and `b`'s strides over them, by value.
//!
//! **Copies** ([`copy`]): `dst = src` for any scalar element type, which
//! writes a result into memory the caller gave; [`repeat`] writes a buffer's
//! first elements again and again (a convolution's weights once per image).
//!
//! `gelu_erf` evaluates `erfc` by Abramowitz and Stegun's rational
//! approximation 7.1.26 (absolute error at most 1.5e-7), on every backend
//! alike: MSL has no `erf`. Kernels whose results are f16 or bf16 evaluate
//! `exp`, `log` and the reciprocals of `sigmoid`, `silu`, the GELUs' in the cheaper
//! forms of [`Math::Relaxed`] (still in f32): their errors stay far below
//! the result's rounding, and these operations were bound by arithmetic,
//! not memory, at 8 elements a thread.
//!
//! Scalar kernels (`vec = 1`), parameters in binding order:
//! `x, [b,] y, n, [factor]` — one thread per element, `if (tid < n)`.
//!
//! Vector kernels (`vec = 4`, `scale_vec4` of seed 000 Pattern B and its
//! siblings): `x4, [b4,] y4, n, [factor]`. Thread `i < ceil(n/4)` handles
//! `float4` number `i`; when `n % 4 != 0` the last vector reaches past
//! element `n` into the buffers' padding, so every buffer must hold
//! `ceil(n/4)` whole vectors (a buffer whose size is a multiple of the
//! vector's and that holds `n` elements does). The padding lanes of `y` get
//! the operation of the padding lanes of the inputs: they are not part of
//! the result.
//!
//! Packed kernels (`vec = 8`, f16 and bf16 only, [`elementwise_packed`]):
//! `x8, [b8,] y8, n, [factor]`, the buffers bound as `uint4`: thread
//! `i < n/8` moves elements `8i … 8i+7` with one 16-byte load per input
//! and one 16-byte store (a `half4` moves 8 bytes), each 32-bit word
//! reinterpreted as a pair of elements. For `n % 8 == 0`; other lengths
//! take the vector kernels.
//!
//! Dispatch: `dispatchThreadgroups(ceil(units / T), T)` with `units = n`
//! (scalar) or `ceil(n/4)` (vector); `enigma-ops` takes `T = 256` (seed
//! 004: element-wise 256–512).

use super::*;
use super::args::{Bound, KernelArgs, Unbound};
use enigma_ir::{Access, Kernel, Literal, Type};

/// The element-wise operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elementwise {
    /// `y = x · factor` (`factor` an f32 by-value parameter).
    Scale,
    /// `y = x + b`.
    Add,
    /// `y = x · b`.
    Mul,
    /// `y = x / b`.
    Div,
    /// `y = max(x, 0)`.
    Relu,
    /// `y = x / (1 + exp(-x))`.
    Silu,
    /// `y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    Gelu,
    /// `y = 0.5·x·(1 + erf(x/√2))`.
    GeluErf,
    /// `y = 1 / (1 + exp(-x))`.
    Sigmoid,
    /// `y = exp(x)`.
    Exp,
    /// `y = log(x)` (natural).
    Log,
}

/// `√(2/π)`, the GELU tanh-form constant.
pub const GELU_C: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of the GELU tanh form.
pub const GELU_K: f64 = 0.044715;
/// `p` of Abramowitz and Stegun 7.1.26: `t = 1 / (1 + p·a)`.
const ERFC_P: f64 = 0.327_591_1;
/// `a1…a5` of Abramowitz and Stegun 7.1.26: `erfc(a) ≈ (a1·t + … + a5·t⁵)·exp(-a²)`
/// for `a ≥ 0`.
const ERFC_A: [f64; 5] = [0.254_829_592, -0.284_496_736, 1.421_413_741, -1.453_152_027, 1.061_405_429];

/// `1 + erf(z)` on f32 lanes: `2 - erfc(|z|)` for `z ≥ 0`, `erfc(|z|)`
/// below (accurate in absolute terms where it is small), in `math`.
fn one_plus_erf(z: Ex, math: Math) -> Ex {
    let width = z.ty().width();
    let a = abs(z);
    let t = math.recip_from_one(1.0 + ERFC_P * a);
    let mut poly = splat(ERFC_A[4], width);
    for &c in ERFC_A[..4].iter().rev() {
        poly = poly * t + c;
    }
    let erfc = poly * t * math.exp(-(a * a));
    select(erfc, 2.0 - erfc, z.ge(splat(0.0, width)))
}

/// Below this `|x − 1|`, [`log_relaxed`] takes the series.
const LOG_SERIES_RADIUS: f64 = 0.125;

/// The natural logarithm of an f32 `x` for results rounded to f16 or
/// bf16 (see `Math::Relaxed`): `fast::log2(x)·ln 2` (one special-function
/// instruction; CUDA documents `__log2f`'s absolute error as at most 2⁻²²
/// in `[0.5, 2]` and 2 ulp elsewhere) where `|x − 1| ≥ 1/8`, so
/// `|log2 x| > 0.17` and its relative error stays below 1.5·10⁻⁶, with
/// subnormal `x` (which it may flush to 0) scaled by 2²⁴ first; nearer 1,
/// where that absolute error would be a unit of f16, the series
/// `log(1 + f) = f − f²/2 + f³/3 − … + f⁷/7` of the exact `f = x − 1`
/// (its first omitted term is below 10⁻⁷ of the sum). The special values
/// are the fast logarithm's: `−∞` at ±0, `+∞` at `+∞`, NaN below 0 and for
/// NaN.
fn log_relaxed(x: Ex) -> Ex {
    let f1 = x - 1.0;
    // q = 1 − f/2 + f²/3 − … + f⁶/7, by Horner's rule.
    let mut q = f(1.0 / 7.0);
    for n in (1..=6).rev() {
        let sign = if n % 2 == 1 { 1.0 } else { -1.0 };
        q = fma(q, f1, f(sign / n as f64));
    }
    // The fast function may flush subnormal inputs (bf16 has them): those
    // are scaled by 2²⁴ first, the 24 taken off after.
    let tiny = x.lt(f(f32::MIN_POSITIVE as f64));
    let scaled = select(x, x * 16_777_216.0, tiny);
    let unscale = select(f(0.0), f(-24.0 * std::f64::consts::LN_2), tiny);
    let fast = fma(fast::log2(scaled), f(std::f64::consts::LN_2), unscale);
    select(fast, f1 * q, abs(f1).lt(f(LOG_SERIES_RADIUS)))
}

/// How an element-wise operation evaluates its f32 functions: the
/// accurate forms for an f32 result; for a result rounded to f16 or bf16,
/// forms whose few-ULP f32 errors that rounding hides (its unit roundoff
/// is 2^-11 or 2^-8), at a fraction of the instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Math {
    /// `exp` and division as written.
    Accurate,
    /// `fast::exp` (CUDA's `__expf`), and `1/x` for `x ≥ 1` as
    /// `rsqrt(x)²` (one special-function instruction and a product in
    /// place of an IEEE division); `log` as `fast::log2(x)·ln 2` except
    /// within 1/8 of 1, where that function's absolute error reaches a unit
    /// of f16 and a series of `x − 1` takes over (`log_relaxed`: relative
    /// error below 1.5·10⁻⁶ everywhere); `tanh` keeps its accurate form;
    /// GELU's tanh form is evaluated as `x·σ(2u)`, its identity.
    Relaxed,
}

impl Math {
    /// The math for results of `dtype`.
    pub fn for_dtype(dtype: DType) -> Math {
        if dtype == DType::F32 {
            Math::Accurate
        } else {
            Math::Relaxed
        }
    }

    fn exp(self, x: Ex) -> Ex {
        match self {
            Math::Accurate => exp(x),
            Math::Relaxed => fast::exp(x),
        }
    }

    fn log(self, x: Ex) -> Ex {
        match self {
            Math::Accurate => log(x),
            Math::Relaxed => {
                let width = x.ty().width();
                if width == 1 {
                    return log_relaxed(x);
                }
                let lanes: Vec<Ex> = (0..width).map(|c| log_relaxed(x.component(c))).collect();
                vector(Type::vector(Scalar::F32, width), &lanes)
            }
        }
    }

    /// `1 / x` for `x ≥ 1` (or +∞, or NaN).
    fn recip_from_one(self, x: Ex) -> Ex {
        match self {
            Math::Accurate => 1.0 / x,
            Math::Relaxed => {
                let r = rsqrt(x);
                r * r
            }
        }
    }
}

impl Elementwise {
    pub const ALL: [Elementwise; 11] = [
        Elementwise::Scale,
        Elementwise::Add,
        Elementwise::Mul,
        Elementwise::Div,
        Elementwise::Relu,
        Elementwise::Silu,
        Elementwise::Gelu,
        Elementwise::GeluErf,
        Elementwise::Sigmoid,
        Elementwise::Exp,
        Elementwise::Log,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Elementwise::Scale => "scale",
            Elementwise::Add => "add",
            Elementwise::Mul => "mul",
            Elementwise::Div => "div",
            Elementwise::Relu => "relu",
            Elementwise::Silu => "silu",
            Elementwise::Gelu => "gelu",
            Elementwise::GeluErf => "gelu_erf",
            Elementwise::Sigmoid => "sigmoid",
            Elementwise::Exp => "exp",
            Elementwise::Log => "log",
        }
    }

    /// Whether the operation reads a second buffer `b`.
    pub fn is_binary(self) -> bool {
        matches!(self, Elementwise::Add | Elementwise::Mul | Elementwise::Div)
    }

    /// Whether the operation takes the by-value `factor`.
    pub fn has_factor(self) -> bool {
        self == Elementwise::Scale
    }

    /// The operation on f32 lanes (`a`, `b` of one width).
    fn apply(self, a: Ex, b: Option<Ex>, factor: Option<Ex>, math: Math) -> Ex {
        let width = a.ty().width();
        match self {
            Elementwise::Scale => a * factor.expect("scale takes a factor"),
            Elementwise::Add => a + b.expect("add is binary"),
            Elementwise::Mul => a * b.expect("mul is binary"),
            Elementwise::Div => a / b.expect("div is binary"),
            Elementwise::Relu => max(a, splat(0.0, width)),
            Elementwise::Silu => match math {
                Math::Accurate => a / (1.0 + exp(-a)),
                Math::Relaxed => a * math.recip_from_one(1.0 + math.exp(-a)),
            },
            Elementwise::Gelu => match math {
                Math::Accurate => 0.5 * a * (1.0 + tanh(GELU_C * (a + GELU_K * a * a * a))),
                // 0.5·(1 + tanh(u)) = σ(2u).
                Math::Relaxed => a * math.recip_from_one(1.0 + math.exp(-2.0 * GELU_C * (a + GELU_K * a * a * a))),
            },
            Elementwise::GeluErf => 0.5 * a * one_plus_erf(a * std::f64::consts::FRAC_1_SQRT_2, math),
            Elementwise::Sigmoid => math.recip_from_one(1.0 + math.exp(-a)),
            Elementwise::Exp => math.exp(a),
            Elementwise::Log => math.log(a),
        }
    }

    /// The f64 reference of one element.
    pub fn reference_one(self, a: f64, b: f64, factor: f64) -> f64 {
        match self {
            Elementwise::Scale => a * factor,
            Elementwise::Add => a + b,
            Elementwise::Mul => a * b,
            Elementwise::Div => a / b,
            Elementwise::Relu => a.max(0.0),
            Elementwise::Silu => a / (1.0 + (-a).exp()),
            Elementwise::Gelu => 0.5 * a * (1.0 + (GELU_C * (a + GELU_K * a * a * a)).tanh()),
            Elementwise::GeluErf => 0.5 * a * (1.0 + erf(a * std::f64::consts::FRAC_1_SQRT_2)),
            Elementwise::Sigmoid => 1.0 / (1.0 + (-a).exp()),
            Elementwise::Exp => a.exp(),
            Elementwise::Log => a.ln(),
        }
    }
}

/// erf in f64 for the reference: the Maclaurin series below |x| = 3, the
/// continued fraction of erfc above (60 levels, evaluated from the bottom).
fn erf(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() || a < 3.0 {
        let (mut term, mut sum) = (x, x);
        for n in 1..200 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        return sum * std::f64::consts::FRAC_2_SQRT_PI;
    }
    // erfc(a) = e^{-a²}/√π · 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + …)))).
    let mut fraction = a;
    for k in (1..=60).rev() {
        fraction = a + (k as f64 / 2.0) / fraction;
    }
    let erfc = (-a * a).exp() / std::f64::consts::PI.sqrt() / fraction;
    x.signum() * (1.0 - erfc)
}

impl fmt::Display for Elementwise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

crate::kernel_args! {
    /// The arguments of [`elementwise()`]'s and [`elementwise_packed`]'s
    /// kernels: the scalar kernels read `x`, `b` and write `y`, the vector
    /// kernels the views `x4`, `b4`, `y4` of the same buffers, the packed
    /// kernels their `uint4` views `x8`, `b8`, `y8`; `b`, `b4`, `b8` for
    /// binary operations only, `factor` for `Scale` only.
    pub struct ElementwiseArgs {
        X x: buffer,
        X4 x4: buffer,
        X8 x8: optional,
        B b: optional,
        B4 b4: optional,
        B8 b8: optional,
        Y y: buffer,
        Y4 y4: buffer,
        Y8 y8: optional,
        N n: u32,
        FACTOR factor: f32,
    }
}

crate::kernel_args! {
    /// The buffers and counts of [`broadcast_binary`] (module docs): an
    /// input read along the row is bound through its vector view (`a4`,
    /// `b4`) in the vector kernels, a splatted one as itself, the output
    /// through `y4` in the vector kernels. Bound beside [`BroadcastLayout`].
    pub struct BroadcastArgs {
        A a: buffer,
        A4 a4: optional,
        B b: buffer,
        B4 b4: optional,
        Y y: buffer,
        Y4 y4: optional,
        UNITS units: u32,
        TOTAL total: u32,
    }
}

/// The layout [`broadcast_binary`] takes by value, `l0, l1, …`
/// ([`BroadcastPlan::layout`]: the outer dimensions, then `a`'s and `b`'s
/// strides over them); a kernel of outer rank `r` declares the first
/// `3r`, the rest are 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BroadcastLayout(pub [u32; BroadcastLayout::LEN]);

impl BroadcastLayout {
    /// The most values a kernel declares (`3 · MAX_OUTER_DIMS`).
    pub const LEN: usize = 3 * MAX_OUTER_DIMS as usize;
    /// Every parameter name, in order.
    pub const NAMES: [&'static str; BroadcastLayout::LEN] =
        ["l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9", "l10", "l11", "l12", "l13", "l14", "l15", "l16", "l17"];
}

impl<'s, T: ?Sized> KernelArgs<'s, T> for BroadcastLayout {
    fn type_name(&self) -> String {
        "BroadcastLayout".to_string()
    }

    fn arg(&self, name: &str) -> Result<Bound<&'s T>, Unbound> {
        let at = Self::NAMES.iter().position(|n| *n == name).ok_or(Unbound::NotAParameter)?;
        Ok(Bound::Value(Literal::u32(self.0[at])))
    }
}

crate::kernel_args! {
    /// The arguments of [`copy`].
    pub struct CopyArgs {
        SRC src: buffer,
        DST dst: buffer,
        N n: u32,
    }
}

crate::kernel_args! {
    /// The arguments of [`repeat`].
    pub struct RepeatArgs {
        SRC src: buffer,
        DST dst: buffer,
        LEN len: u32,
        N n: u32,
    }
}

/// The parameters an element-wise kernel declares, in their order: `x`,
/// `b` (a binary operation's), `y` (all of one type), `n` and `factor`
/// (where the operation has one).
struct Operands {
    x: Mem,
    b: Option<Mem>,
    y: Mem,
    n: Ex,
    factor: Option<Ex>,
}

/// Declares [`Operands`] for `op`, `x`, `b` and `y` named `names`.
fn declare_operands(k: &mut KernelBuilder, op: Elementwise, [xn, bn, yn]: [&str; 3], ty: Type) -> Operands {
    let x = k.buffer(xn, ty, Access::Read);
    let b = op.is_binary().then(|| k.buffer(bn, ty, Access::Read));
    let y = k.buffer(yn, ty, Access::ReadWrite);
    let n = k.value(ElementwiseArgs::N, Type::U32);
    let factor = op.has_factor().then(|| k.value(ElementwiseArgs::FACTOR, Type::F32));
    Operands { x, b, y, n, factor }
}

/// The kernel `{op}_{dtype}[_vec4]`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn elementwise(op: Elementwise, dtype: DType, vec: u8) -> Kernel {
    assert_vec(vec);
    let mut k = KernelBuilder::new(format!("{}_{}{}", op.name(), dtype, vec_suffix(vec)));
    let ty = dtype.ty(vec);
    type P = ElementwiseArgs;
    let names = if vec == 4 { [P::X4, P::B4, P::Y4] } else { [P::X, P::B, P::Y] };
    let Operands { x, b, y, n, factor } = declare_operands(&mut k, op, names, ty);
    let tid = k.let_("tid", thread_position_in_grid().x());
    // Vectors to process: ceil(n / 4), the last one possibly partial.
    let units = if vec == 4 { vec_units(&mut k, n) } else { n };
    k.if_(tid.lt(units), |k| {
        let a = k.let_("a", load_f32(x, tid));
        let bv = b.map(|b| load_f32(b, tid));
        store_f32(k, y, tid, op.apply(a, bv, factor, Math::for_dtype(dtype)));
    });
    finish(k)
}

/// The kernel `{op}_{dtype}_vec8` for a 16-bit `dtype` (f16, bf16): eight
/// elements per thread through one 16-byte load of each input and one
/// 16-byte store (module docs). Parameters `x8, [b8,] y8, n, [factor]`,
/// the buffers bound as `uint4`s; `n % 8 == 0`.
///
/// # Panics
/// When `dtype` is f32.
pub fn elementwise_packed(op: Elementwise, dtype: DType) -> Kernel {
    assert!(dtype != DType::F32, "the packed kernels take f16 or bf16");
    let words = Type::vector(Scalar::U32, 4);
    let pair = dtype.ty(2);
    let mut k = KernelBuilder::new(format!("{}_{}_vec8", op.name(), dtype));
    type P = ElementwiseArgs;
    let Operands { x, b, y, n, factor } = declare_operands(&mut k, op, [P::X8, P::B8, P::Y8], words);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(n / 8u32), |k| {
        let xw = k.let_("xw", x.get(tid));
        let bw = b.map(|b| k.let_("bw", b.get(tid)));
        // Each 32-bit word holds two elements: unpacked to a float2,
        // computed, rounded and packed back.
        let mut out = vec![];
        for c in 0..4u8 {
            let a = k.let_(&format!("a{c}"), to_f32(xw.component(c).bitcast(pair)));
            let bv = bw.map(|bw| to_f32(bw.component(c).bitcast(pair)));
            out.push(k.let_(&format!("w{c}"), op.apply(a, bv, factor, Math::for_dtype(dtype)).cast(pair).bitcast(Type::U32)));
        }
        k.store(y.at(tid), vector(words, &out));
    });
    finish(k)
}

/// The threadgroup size of [`elementwise_pairs`] when the caller does not
/// choose one.
pub const PAIRS_THREADS: u32 = 128;

/// The kernel `{op}_f32_vec4_x2`: eight f32 elements per thread as two
/// `float4`s of the vector kernels' views, `T` vectors apart (thread `t` of
/// threadgroup `g` takes vectors `2gT + t` and `2gT + T + t`, so each load
/// of a SIMD group stays contiguous), both loaded before either is
/// computed: twice the bytes in flight of one vector a thread, which the
/// accurate f32 functions' instructions otherwise leave the memory system
/// short of. Parameters `x4, [b4,] y4, n, [factor]`; any `n`, padded as
/// the vector kernels'.
pub fn elementwise_pairs(op: Elementwise) -> Kernel {
    let mut k = KernelBuilder::new(format!("{}_f32_vec4_x2", op.name()));
    let ty = Type::vector(Scalar::F32, 4);
    type P = ElementwiseArgs;
    let Operands { x, b, y, n, factor } = declare_operands(&mut k, op, [P::X4, P::B4, P::Y4], ty);
    let units = vec_units(&mut k, n);
    let tpg = k.let_("tpg", threads_per_threadgroup().x());
    let first = k.let_("first", threadgroup_position_in_grid().x() * tpg * 2u32 + thread_index_in_threadgroup());
    let at = [first, k.let_("second", first + tpg)];
    let mut loaded = vec![];
    for (i, &u) in at.iter().enumerate() {
        let inside = k.let_(&format!("inside{i}"), u.lt(units));
        let a = k.var(&format!("a{i}"), splat(0.0, 4));
        let bv = b.map(|_| k.var(&format!("b{i}"), splat(0.0, 4)));
        k.if_(inside, |k| {
            k.assign(a, x.get(u));
            if let (Some(b), Some(bv)) = (b, bv) {
                k.assign(bv, b.get(u));
            }
        });
        loaded.push((u, inside, a, bv));
    }
    for (u, inside, a, bv) in loaded {
        k.if_(inside, |k| k.store(y.at(u), op.apply(a.get(), bv.map(|v| v.get()), factor, Math::Accurate)));
    }
    finish(k)
}

/// How a broadcast kernel reads one input along the output's innermost
/// (collapsed) dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InnerAccess {
    /// Consecutive elements (stride 1): vector loads where the row allows.
    Contiguous,
    /// One element for the whole row (stride 0), loaded once and splatted.
    Splat,
}

impl InnerAccess {
    fn letter(self) -> char {
        match self {
            InnerAccess::Contiguous => 'c',
            InnerAccess::Splat => 's',
        }
    }
}

/// `y = op(a, b)` of a binary `op` with broadcast inputs over the output
/// seen as `[rows, inner]`: `{op}_broadcast_{dtype}[_vec4]_{a}{b}`, `a`
/// and `b` each `c` ([`InnerAccess::Contiguous`]) or `s`
/// ([`InnerAccess::Splat`]) (module docs).
///
/// # Panics
/// When `op` is not binary or `vec` is not 1 or 4.
pub fn broadcast_binary(op: Elementwise, dtype: DType, vec: u8, access: [InnerAccess; 2], orank: u32) -> Kernel {
    assert!(op.is_binary(), "{op} is not a binary operation");
    assert_vec(vec);
    assert!((1..=MAX_OUTER_DIMS).contains(&orank), "outer rank {orank} is not 1 to {MAX_OUTER_DIMS}");
    let mut k = KernelBuilder::new(format!("{}_broadcast_{}{}_{}{}_o{orank}", op.name(), dtype, vec_suffix(vec), access[0].letter(), access[1].letter()));
    type P = BroadcastArgs;
    // A contiguous input is read through its vector view, a splatted one
    // one element at a time.
    let input = |k: &mut KernelBuilder, [name, view]: [&str; 2], a: InnerAccess| match a {
        InnerAccess::Contiguous => k.buffer(if vec == 4 { view } else { name }, dtype.ty(vec), Access::Read),
        InnerAccess::Splat => k.buffer(name, dtype.ty(1), Access::Read),
    };
    let inputs = [input(&mut k, [P::A, P::A4], access[0]), input(&mut k, [P::B, P::B4], access[1])];
    let y = k.buffer(if vec == 4 { P::Y4 } else { P::Y }, dtype.ty(vec), Access::ReadWrite);
    // The outer dimensions (the first one's size is never needed), then
    // each input's strides over them.
    let layout: Vec<Ex> = BroadcastLayout::NAMES[..3 * orank as usize].iter().map(|n| k.value(n, Type::U32)).collect();
    let units = k.value(P::UNITS, Type::U32);
    let total = k.value(P::TOTAL, Type::U32);
    let g = k.let_("g", thread_position_in_grid().x());
    k.if_(g.lt(total), |k| {
        let r = k.let_("r", g / units);
        let col = k.let_("col", g - r * units);
        // The row's first element in each input: `r` split over the outer
        // dimensions, the last fastest; the first takes what is left, so one
        // outer dimension costs no division.
        let mut rest = r;
        let mut at = [lit(Scalar::U32, 0.0), lit(Scalar::U32, 0.0)];
        for d in (1..orank).rev() {
            let size = layout[d as usize];
            let coord = k.let_(&format!("coord{d}"), rest % size);
            rest = k.let_(&format!("rest{d}"), rest / size);
            for (s, at) in at.iter_mut().enumerate() {
                *at = *at + coord * layout[(orank * (s as u32 + 1) + d) as usize];
            }
        }
        let mut values = vec![];
        for (s, (&mem, &a)) in inputs.iter().zip(&access).enumerate() {
            let start = k.let_(&format!("start{s}"), at[s] + rest * layout[(orank * (s as u32 + 1)) as usize]);
            values.push(match a {
                InnerAccess::Contiguous => load_f32(mem, start / vec as u32 + col),
                InnerAccess::Splat => {
                    let v = k.let_(&format!("v{s}"), load_f32(mem, start));
                    splat_ex(v, vec)
                }
            });
        }
        store_f32(k, y, g, op.apply(values[0], Some(values[1]), None, Math::for_dtype(dtype)));
    });
    finish(k)
}

/// An f32 value splatted to `width` lanes (the value itself for 1).
fn splat_ex(v: Ex, width: u8) -> Ex {
    if width == 1 {
        v
    } else {
        vector(Type::vector(Scalar::F32, width), &[v])
    }
}

/// A planned [`broadcast_binary`] launch: the output seen as `[rows,
/// inner]` after merging the dimensions both inputs walk alike, one thread
/// per element or 4-wide vector of it (`units` per row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BroadcastPlan {
    pub op: Elementwise,
    pub dtype: DType,
    pub vec: u8,
    pub access: [InnerAccess; 2],
    /// The outer dimensions, then `a`'s and `b`'s strides over them (in
    /// elements): the kernel's by-value `l0, l1, …`; one dimension of 1
    /// when there is none.
    pub layout: Vec<u32>,
    pub orank: u32,
    pub rows: u32,
    pub inner: u32,
    /// Vectors (of `vec` elements) per row: `inner / vec`.
    pub units: u32,
    /// Threads that work: `rows · units`.
    pub total: u32,
    pub dispatch: Dispatch,
}

impl BroadcastPlan {
    pub fn kernel(&self) -> Kernel {
        broadcast_binary(self.op, self.dtype, self.vec, self.access, self.orank)
    }

    /// The layout the kernel is bound with.
    pub fn layout_args(&self) -> BroadcastLayout {
        let mut values = [0; BroadcastLayout::LEN];
        values[..self.layout.len()].copy_from_slice(&self.layout);
        BroadcastLayout(values)
    }
}

/// The most outer dimensions a broadcast kernel takes (after merging).
pub const MAX_OUTER_DIMS: u32 = 6;

/// The broadcast shape of `a` and `b` merged to outer dimensions and one
/// inner dimension: `(dims, a strides, b strides)`, innermost last.
/// Dimensions of 1 drop out, and a dimension merges into the next when
/// both inputs step over it as over one longer dimension (both
/// contiguous, or both broadcast along both). `None` when the shapes do
/// not broadcast.
pub fn collapse_broadcast(a: &[usize], b: &[usize]) -> Option<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let (shape, sa, sb) = broadcast_layout(a, b)?;
    let mut dims: Vec<(usize, usize, usize)> = vec![];
    for d in (0..shape.len()).rev() {
        if shape[d] == 1 {
            continue;
        }
        match dims.last_mut() {
            Some((size, ta, tb)) if sa[d] == *ta * *size && sb[d] == *tb * *size => *size *= shape[d],
            _ => dims.push((shape[d], sa[d], sb[d])),
        }
    }
    dims.reverse();
    Some((dims.iter().map(|d| d.0).collect(), dims.iter().map(|d| d.1).collect(), dims.iter().map(|d| d.2).collect()))
}

/// Plans `op` over `a` and `b` of NumPy-broadcast shapes with threadgroups
/// of `threads`; `vector_ok` whether `a`, `b` and the output bind as 4-wide
/// views (the plan takes them when the inner dimension is a multiple of 4
/// and every buffer read or written through a view binds: a splatted input
/// is read one element at a time).
pub fn plan_broadcast(op: Elementwise, dtype: DType, a: &[usize], b: &[usize], threads: u32, vector_ok: [bool; 3]) -> Result<BroadcastPlan, ShapeError> {
    let name = format!("{}_broadcast", op.name());
    let Some((dims, sa, sb)) = collapse_broadcast(a, b) else {
        return Err(ShapeError::new(name, format!("shapes {a:?} and {b:?} do not broadcast (each dimension must match or be 1)")));
    };
    let t = check_threads(&name, threads)?;
    let n: usize = dims.iter().product();
    nonzero(&name, "elements", n)?;
    to_u32(&name, "elements", n)?;
    let (inner, ia, ib) = match (dims.last(), sa.last(), sb.last()) {
        (Some(&d), Some(&x), Some(&y)) => (d, x, y),
        // Every dimension is 1: one element.
        _ => (1, 0, 0),
    };
    let access = [ia, ib].map(|s| if s == 1 { InnerAccess::Contiguous } else { InnerAccess::Splat });
    let outer = dims.len().saturating_sub(1);
    if outer > MAX_OUTER_DIMS as usize {
        return Err(ShapeError::new(name, format!("shapes {a:?} and {b:?} broadcast over {outer} outer dimensions after merging those walked alike; at most {MAX_OUTER_DIMS} are supported")));
    }
    let mut layout = Vec::with_capacity(3 * outer.max(1));
    if outer == 0 {
        layout.extend([1, 0, 0]);
    } else {
        for v in dims[..outer].iter().chain(&sa[..outer]).chain(&sb[..outer]) {
            layout.push(to_u32(&name, "a stride", *v)?);
        }
    }
    let views = vector_ok[2] && access.iter().zip(vector_ok).all(|(&a, ok)| a == InnerAccess::Splat || ok);
    let vec = if views && inner.is_multiple_of(4) { 4 } else { 1 };
    let inner = inner as u32;
    let units = inner / vec as u32;
    let rows = (n / inner as usize) as u32;
    let total = rows * units;
    Ok(BroadcastPlan { op, dtype, vec, access, layout, orank: outer.max(1) as u32, rows, inner, units, total, dispatch: Dispatch::threadgroups([total.div_ceil(t), 1, 1], t) })
}

/// `dst[i] = src[i]` for `i < n`, elements of `elem` moved without
/// arithmetic (bit for bit, NaN payloads and integers alike): `copy_{elem}`,
/// parameters `src, dst, n`, one thread per element. It writes a result
/// into memory the caller gave (`out=`).
pub fn copy(elem: Scalar) -> Kernel {
    let mut k = KernelBuilder::new(format!("copy_{}", elem.name()));
    let src = k.buffer(CopyArgs::SRC, Type::scalar(elem), Access::Read);
    let dst = k.buffer(CopyArgs::DST, Type::scalar(elem), Access::ReadWrite);
    let n = k.value(CopyArgs::N, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(n), |k| {
        k.store(dst.at(tid), src.get(tid));
    });
    finish(k)
}

/// `dst[i] = src[i % len]` for `i < n`: the first `len` elements of `src`
/// repeated one after another, bit for bit: `repeat_{elem}`, parameters
/// `src, dst, len, n`, one thread per element.
pub fn repeat(elem: Scalar) -> Kernel {
    repeat_of(Type::scalar(elem), elem.name())
}

/// [`repeat`] over 16-byte words (`uint4` views of the buffers, `len` and
/// `n` counted in words): `repeat_words`, for data whose repeated run is a
/// whole number of 16 bytes.
pub fn repeat_words() -> Kernel {
    repeat_of(Type::vector(Scalar::U32, 4), "words")
}

fn repeat_of(ty: Type, name: &str) -> Kernel {
    let mut k = KernelBuilder::new(format!("repeat_{name}"));
    let src = k.buffer(RepeatArgs::SRC, ty, Access::Read);
    let dst = k.buffer(RepeatArgs::DST, ty, Access::ReadWrite);
    let len = k.value(RepeatArgs::LEN, Type::U32);
    let n = k.value(RepeatArgs::N, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(n), |k| {
        k.store(dst.at(tid), src.get(tid % len));
    });
    finish(k)
}

/// The NumPy broadcast of shapes `a` and `b`, and each one's strides (in
/// elements, 0 along a broadcast dimension) over it; `None` when a
/// dimension of each is neither equal to the other nor 1.
pub fn broadcast_layout(a: &[usize], b: &[usize]) -> Option<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let rank = a.len().max(b.len());
    let padded = |s: &[usize]| -> Vec<usize> { std::iter::repeat_n(1, rank - s.len()).chain(s.iter().copied()).collect() };
    let (pa, pb) = (padded(a), padded(b));
    let mut shape = Vec::with_capacity(rank);
    for (&x, &y) in pa.iter().zip(&pb) {
        shape.push(match (x, y) {
            _ if x == y => x,
            (1, _) => y,
            (_, 1) => x,
            _ => return None,
        });
    }
    let strides = |p: &[usize]| -> Vec<usize> {
        let mut out = vec![0; rank];
        let mut step = 1;
        for d in (0..rank).rev() {
            out[d] = if p[d] == 1 && shape[d] != 1 { 0 } else { step };
            step *= p[d];
        }
        out
    };
    let (sa, sb) = (strides(&pa), strides(&pb));
    Some((shape, sa, sb))
}

/// Seed 000 Pattern A for any element type: `y = x · factor`.
pub fn scale(dtype: DType) -> Kernel {
    elementwise(Elementwise::Scale, dtype, 1)
}

/// Seed 000 Pattern B (`half4` / `float4` loads) with a scalar tail.
pub fn scale_vec4(dtype: DType) -> Kernel {
    elementwise(Elementwise::Scale, dtype, 4)
}

/// Threads the kernel needs: one per element, one per (last partial)
/// `float4`, one per 8 packed elements, or one per two (last partial)
/// `float4`s of f32.
pub fn units(dtype: DType, n: u32, vec: u8) -> u32 {
    match vec {
        8 if dtype == DType::F32 => n.div_ceil(4).div_ceil(2),
        8 => n / 8,
        4 => n.div_ceil(4),
        _ => n,
    }
}

/// A planned element-wise launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementwisePlan {
    pub op: Elementwise,
    pub dtype: DType,
    pub vec: u8,
    pub n: u32,
    pub dispatch: Dispatch,
}

impl ElementwisePlan {
    pub fn kernel(&self) -> Kernel {
        if self.vec == 8 && self.dtype == DType::F32 {
            elementwise_pairs(self.op)
        } else if self.vec == 8 {
            elementwise_packed(self.op, self.dtype)
        } else {
            elementwise(self.op, self.dtype, self.vec)
        }
    }
}

/// The launch for `n` elements in threadgroups of `threads`; `vec` 4 when
/// the caller can bind vector views, 8 for eight elements a thread
/// ([`packs`]: the packed kernel of f16 and bf16, two `float4`s of f32).
pub fn plan(op: Elementwise, dtype: DType, n: usize, vec: u8, threads: u32) -> Result<ElementwisePlan, ShapeError> {
    let name = format!("{}_{}{}", op.name(), dtype, vec_suffix(vec));
    if vec == 8 {
        if !packs(dtype, n) {
            return Err(ShapeError::new(format!("{}_{}_vec8", op.name(), dtype), format!("8 elements per thread need f32, or f16 or bf16 and a multiple of 8 elements, not {n} of {dtype}")));
        }
    } else {
        check_vec(&name, vec)?;
    }
    nonzero(&name, "n", n)?;
    let n = to_u32(&name, "n", n)?;
    let t = check_threads(&name, threads)?;
    let groups = units(dtype, n, vec).div_ceil(t);
    Ok(ElementwisePlan { op, dtype, vec, n, dispatch: Dispatch::threadgroups([groups, 1, 1], t) })
}

/// Whether `n` elements of `dtype` can run eight elements a thread: the
/// packed kernel ([`elementwise_packed`], f16 and bf16, `n % 8 == 0`) or
/// two `float4`s of f32 ([`elementwise_pairs`], any `n`).
pub fn packs(dtype: DType, n: usize) -> bool {
    dtype == DType::F32 || n.is_multiple_of(8)
}

/// The f64 reference (`b` only for binary operations).
pub fn reference(op: Elementwise, x: &[f32], b: Option<&[f32]>, factor: f32) -> Vec<f64> {
    x.iter()
        .enumerate()
        .map(|(i, &a)| op.reference_one(a as f64, b.map_or(0.0, |b| b[i] as f64), factor as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where [`log_relaxed`] takes the fast logarithm nearest 1 (`x = 1 ±
    /// 1/8`), that function's worst absolute error (2⁻²² in log2, times
    /// ln 2, and the product's rounding) stays within the non-rounding part
    /// of the element-wise bound, `1e-6 + 2e-6·|log x|`; and the series'
    /// first omitted term, `|f|⁸/8`, at `|f| = 1/8` is below 10⁻⁷ of the
    /// result. (The simulator computes `fast::log2` exactly, so its tests
    /// check the series and the switch, the GPU's the function itself.)
    #[test]
    fn the_log_switch_keeps_both_halves_within_the_bound() {
        for x in [1.0 - LOG_SERIES_RADIUS, 1.0 + LOG_SERIES_RADIUS] {
            let ln = f64::ln(x);
            let fast_error = 2f64.powi(-22) * std::f64::consts::LN_2 + ln.abs() * 2f64.powi(-24);
            assert!(fast_error <= 1e-6 + 2e-6 * ln.abs(), "x = {x}: {fast_error:e} against {:e}", 1e-6 + 2e-6 * ln.abs());
            assert!(fast_error / ln.abs() < 1.5e-6, "x = {x}: relative {:e}", fast_error / ln.abs());
            let omitted = LOG_SERIES_RADIUS.powi(8) / 8.0;
            assert!(omitted / ln.abs() < 1e-7, "x = {x}: series {:e}", omitted / ln.abs());
        }
    }

    #[test]
    fn vector_plans_cover_the_tail_with_one_more_thread() {
        assert_eq!(units(DType::F16, 4096, 4), 1024);
        assert_eq!(units(DType::F32, 4097, 4), 1025);
        assert_eq!(units(DType::BF16, 3, 4), 1);
        // Two float4s a thread: 4097 f32 are 1025 vectors, 513 threads.
        assert_eq!(units(DType::F32, 4097, 8), 513);
        assert_eq!(units(DType::F16, 4096, 8), 512);
        let p = plan(Elementwise::Scale, DType::F16, 4096, 4, 256).unwrap();
        // Seed 000: N = 4096 half4 scale → 4 threadgroups of 256.
        assert_eq!(p.dispatch, Dispatch::threadgroups([4, 1, 1], 256));
        // 4097 halves: 1024 whole half4 and one partial.
        assert_eq!(plan(Elementwise::Scale, DType::F16, 4097, 4, 256).unwrap().dispatch, Dispatch::threadgroups([5, 1, 1], 256));
        assert!(plan(Elementwise::Scale, DType::F16, 0, 4, 256).is_err());
        assert!(plan(Elementwise::Scale, DType::F16, 10, 1, 100).is_err());
        assert!(plan(Elementwise::Scale, DType::F16, 10, 2, 256).is_err());
        // Packed: 8 halves per thread.
        assert_eq!(plan(Elementwise::Sigmoid, DType::BF16, 4096, 8, 256).unwrap().dispatch, Dispatch::threadgroups([2, 1, 1], 256));
        assert!(plan(Elementwise::Sigmoid, DType::BF16, 4100, 8, 256).is_err());
        // Two float4s of f32 per thread, any length: 4100 f32 are 1025
        // vectors, 513 threads.
        assert_eq!(plan(Elementwise::Sigmoid, DType::F32, 4100, 8, 128).unwrap().dispatch, Dispatch::threadgroups([5, 1, 1], 128));
    }

    #[test]
    fn broadcast_layouts_follow_numpy() {
        let (shape, sa, sb) = broadcast_layout(&[4, 1, 3], &[5, 1]).unwrap();
        assert_eq!((shape, sa, sb), (vec![4, 5, 3], vec![3, 0, 1], vec![0, 1, 0]));
        let (shape, sa, sb) = broadcast_layout(&[], &[2, 2]).unwrap();
        assert_eq!((shape, sa, sb), (vec![2, 2], vec![0, 0], vec![2, 1]));
        assert!(broadcast_layout(&[3], &[4]).is_none());
    }

    #[test]
    fn broadcasts_collapse_to_rows_and_an_inner_dimension() {
        // [32, 1024, 1024] + [1024]: the two outer dimensions merge.
        assert_eq!(collapse_broadcast(&[32, 1024, 1024], &[1024]).unwrap(), (vec![32768, 1024], vec![1024, 1], vec![0, 1]));
        // A column vector: b splatted along the row.
        assert_eq!(collapse_broadcast(&[8, 6], &[8, 1]).unwrap(), (vec![8, 6], vec![6, 1], vec![1, 0]));
        // Dimensions of 1 drop out; equal shapes merge to one.
        assert_eq!(collapse_broadcast(&[3, 1, 5], &[3, 1, 5]).unwrap(), (vec![15], vec![1], vec![1]));
        assert_eq!(collapse_broadcast(&[1], &[1, 1]).unwrap(), (vec![], vec![], vec![]));
        let p = plan_broadcast(Elementwise::Add, DType::F16, &[32, 1024, 1024], &[1024], 256, [true; 3]).unwrap();
        assert_eq!((p.vec, p.access, p.rows, p.units, p.orank), (4, [InnerAccess::Contiguous; 2], 32768, 256, 1));
        assert_eq!(p.dispatch, Dispatch::threadgroups([32768, 1, 1], 256));
        let p = plan_broadcast(Elementwise::Mul, DType::F32, &[5, 3], &[5, 1], 256, [true; 3]).unwrap();
        // A splatted scalar needs no vector view.
        assert_eq!(plan_broadcast(Elementwise::Mul, DType::F16, &[5, 8], &[1], 256, [true, false, true]).unwrap().vec, 4);
        assert_eq!(plan_broadcast(Elementwise::Mul, DType::F16, &[5, 8], &[8], 256, [true, false, true]).unwrap().vec, 1);
        assert_eq!((p.vec, p.access, p.units, p.total, p.layout.clone()), (1, [InnerAccess::Contiguous, InnerAccess::Splat], 3, 15, vec![5, 3, 1]));
        assert!(plan_broadcast(Elementwise::Add, DType::F32, &[3, 0], &[0], 256, [true; 3]).is_err());
    }

    #[test]
    fn parameters_are_one_view_per_buffer() {
        let k = elementwise(Elementwise::Add, DType::F32, 4);
        let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x4", "b4", "y4", "n"]);
        let k = scale(DType::BF16);
        let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "n", "factor"]);
    }
}
