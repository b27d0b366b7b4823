//! Element-wise kernels: `scale`, `add`, `mul`, `div`, `relu`, `silu`, `gelu` (tanh
//! form), `gelu_erf` (the erf form), `sigmoid`, `exp`, `log`, for f32, f16
//! and bf16, with scalar or 4-wide vector loads.
//!
//! **Broadcasting** ([`broadcast_binary`]): `add`, `mul` and `div` of two arrays
//! of NumPy-broadcast shapes, one thread per output element, which
//! decomposes its index over the output's dimensions and reads each input
//! at its own strides (0 along a broadcast dimension). Parameters: `a, b,
//! y, layout, rank, n`; `layout` holds `rank` output dimensions, then `a`'s
//! and `b`'s `rank` strides, as u32.
//!
//! **Copies** ([`copy`]): `dst = src` for any scalar element type, which
//! writes a result into memory the caller gave.
//!
//! `gelu_erf` evaluates `erfc` by Abramowitz and Stegun's rational
//! approximation 7.1.26 (absolute error at most 1.5e-7), on every backend
//! alike: MSL has no `erf`.
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
//! Dispatch: `dispatchThreadgroups(ceil(units / T), T)` with `units = n`
//! (scalar) or `ceil(n/4)` (vector); `enigma-ops` takes `T = 256` (seed
//! 004: element-wise 256–512).

use super::*;
use enigma_ir::{Access, Kernel, Type};

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
/// below (accurate in absolute terms where it is small).
fn one_plus_erf(z: Ex) -> Ex {
    let width = z.ty().width();
    let a = abs(z);
    let t = 1.0 / (1.0 + ERFC_P * a);
    let mut poly = splat(ERFC_A[4], width);
    for &c in ERFC_A[..4].iter().rev() {
        poly = poly * t + c;
    }
    let erfc = poly * t * exp(-(a * a));
    select(erfc, 2.0 - erfc, z.ge(splat(0.0, width)))
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
    fn apply(self, a: Ex, b: Option<Ex>, factor: Option<Ex>) -> Ex {
        let width = a.ty().width();
        match self {
            Elementwise::Scale => a * factor.expect("scale takes a factor"),
            Elementwise::Add => a + b.expect("add is binary"),
            Elementwise::Mul => a * b.expect("mul is binary"),
            Elementwise::Div => a / b.expect("div is binary"),
            Elementwise::Relu => max(a, splat(0.0, width)),
            Elementwise::Silu => a / (1.0 + exp(-a)),
            Elementwise::Gelu => 0.5 * a * (1.0 + tanh(GELU_C * (a + GELU_K * a * a * a))),
            Elementwise::GeluErf => 0.5 * a * one_plus_erf(a * std::f64::consts::FRAC_1_SQRT_2),
            Elementwise::Sigmoid => 1.0 / (1.0 + exp(-a)),
            Elementwise::Exp => exp(a),
            Elementwise::Log => log(a),
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
    /// The arguments of [`elementwise()`]'s kernels: the scalar kernels read
    /// `x`, `b` and write `y`, the vector kernels the views `x4`, `b4`, `y4`
    /// of the same buffers; `b`, `b4` for binary operations only, `factor`
    /// for `Scale` only.
    pub struct ElementwiseArgs {
        X x: buffer,
        X4 x4: buffer,
        B b: optional,
        B4 b4: optional,
        Y y: buffer,
        Y4 y4: buffer,
        N n: u32,
        FACTOR factor: f32,
    }
}

crate::kernel_args! {
    /// The arguments of [`broadcast_binary`] (module docs).
    pub struct BroadcastArgs {
        A a: buffer,
        B b: buffer,
        Y y: buffer,
        LAYOUT layout: buffer,
        RANK rank: u32,
        N n: u32,
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

/// The kernel `{op}_{dtype}[_vec4]`.
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn elementwise(op: Elementwise, dtype: DType, vec: u8) -> Kernel {
    assert_vec(vec);
    let mut k = KernelBuilder::new(format!("{}_{}{}", op.name(), dtype, vec_suffix(vec)));
    let ty = dtype.ty(vec);
    type P = ElementwiseArgs;
    let [xn, bn, yn] = if vec == 4 { [P::X4, P::B4, P::Y4] } else { [P::X, P::B, P::Y] };
    let x = k.buffer(xn, ty, Access::Read);
    let b = op.is_binary().then(|| k.buffer(bn, ty, Access::Read));
    let y = k.buffer(yn, ty, Access::ReadWrite);
    let n = k.value(P::N, Type::U32);
    let factor = op.has_factor().then(|| k.value(P::FACTOR, Type::F32));
    let tid = k.let_("tid", thread_position_in_grid().x());
    // Vectors to process: ceil(n / 4), the last one possibly partial.
    let units = if vec == 4 { vec_units(&mut k, n) } else { n };
    k.if_(tid.lt(units), |k| {
        let a = k.let_("a", load_f32(x, tid));
        let bv = b.map(|b| load_f32(b, tid));
        store_f32(k, y, tid, op.apply(a, bv, factor));
    });
    finish(k)
}

/// `y = op(a, b)` of a binary `op` with broadcast inputs:
/// `{op}_broadcast_{dtype}` (module docs).
///
/// # Panics
/// When `op` is not binary.
pub fn broadcast_binary(op: Elementwise, dtype: DType) -> Kernel {
    assert!(op.is_binary(), "{op} is not a binary operation");
    let mut k = KernelBuilder::new(format!("{}_broadcast_{}", op.name(), dtype));
    type P = BroadcastArgs;
    let a = k.buffer(P::A, dtype.ty(1), Access::Read);
    let b = k.buffer(P::B, dtype.ty(1), Access::Read);
    let y = k.buffer(P::Y, dtype.ty(1), Access::ReadWrite);
    let layout = k.buffer(P::LAYOUT, Type::U32, Access::Read);
    let rank = k.value(P::RANK, Type::U32);
    let n = k.value(P::N, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(n), |k| {
        let rest = k.var("rest", tid);
        let at_a = k.var("at_a", lit(Scalar::U32, 0.0));
        let at_b = k.var("at_b", lit(Scalar::U32, 0.0));
        k.for_range("i", 0u32, rank, 1u32, |k, i| {
            // The dimensions from the last (fastest) to the first.
            let d = k.let_("d", rank - 1u32 - i);
            let size = k.let_("size", layout.get(d));
            let coord = k.let_("coord", rest.get() % size);
            k.assign(rest, rest.get() / size);
            k.assign(at_a, at_a.get() + coord * layout.get(rank + d));
            k.assign(at_b, at_b.get() + coord * layout.get(rank * 2u32 + d));
        });
        store_f32(k, y, tid, op.apply(load_f32(a, at_a.get()), Some(load_f32(b, at_b.get())), None));
    });
    finish(k)
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

/// Threads the kernel needs: one per element, or one per (last partial)
/// `float4`.
pub fn units(n: u32, vec: u8) -> u32 {
    if vec == 4 {
        n.div_ceil(4)
    } else {
        n
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
        elementwise(self.op, self.dtype, self.vec)
    }
}

/// The launch for `n` elements in threadgroups of `threads`; `vec` 4 when
/// the caller can bind vector views.
pub fn plan(op: Elementwise, dtype: DType, n: usize, vec: u8, threads: u32) -> Result<ElementwisePlan, ShapeError> {
    let name = format!("{}_{}{}", op.name(), dtype, vec_suffix(vec));
    check_vec(&name, vec)?;
    nonzero(&name, "n", n)?;
    let n = to_u32(&name, "n", n)?;
    let t = check_threads(&name, threads)?;
    let groups = units(n, vec).div_ceil(t);
    Ok(ElementwisePlan { op, dtype, vec, n, dispatch: Dispatch::threadgroups([groups, 1, 1], t) })
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

    #[test]
    fn vector_plans_cover_the_tail_with_one_more_thread() {
        assert_eq!(units(4096, 4), 1024);
        assert_eq!(units(4097, 4), 1025);
        assert_eq!(units(3, 4), 1);
        let p = plan(Elementwise::Scale, DType::F16, 4096, 4, 256).unwrap();
        // Seed 000: N = 4096 half4 scale → 4 threadgroups of 256.
        assert_eq!(p.dispatch, Dispatch::threadgroups([4, 1, 1], 256));
        // 4097 halves: 1024 whole half4 and one partial.
        assert_eq!(plan(Elementwise::Scale, DType::F16, 4097, 4, 256).unwrap().dispatch, Dispatch::threadgroups([5, 1, 1], 256));
        assert!(plan(Elementwise::Scale, DType::F16, 0, 4, 256).is_err());
        assert!(plan(Elementwise::Scale, DType::F16, 10, 1, 100).is_err());
        assert!(plan(Elementwise::Scale, DType::F16, 10, 2, 256).is_err());
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
    fn parameters_are_one_view_per_buffer() {
        let k = elementwise(Elementwise::Add, DType::F32, 4);
        let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x4", "b4", "y4", "n"]);
        let k = scale(DType::BF16);
        let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "n", "factor"]);
    }
}
