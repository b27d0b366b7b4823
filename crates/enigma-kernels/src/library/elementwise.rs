//! Element-wise kernels: `scale`, `add`, `mul`, `relu`, `silu`, `gelu` (tanh
//! form), for f32, f16 and bf16, with scalar or 4-wide vector loads.
//!
//! Scalar kernels (`vec = 1`), parameters in binding order:
//! `x, [b,] y, n, [factor]` — one thread per element, `if (tid < n)`.
//!
//! Vector kernels (`vec = 4`, `scale_vec4` of seed 000 Pattern B and its
//! siblings): `x4, [b4,] y4, x, [b,] y, n, [factor]`, where `x4`/`x` (and
//! `b4`/`b`, `y4`/`y`) are the vector and scalar views of one buffer. Thread
//! `i < n/4` handles `float4` number `i`; thread `n/4` handles the tail of
//! `n % 4` elements through the scalar views.
//!
//! Dispatch: `dispatchThreadgroups(ceil(units / T), T)` with `units = n`
//! (scalar) or `n/4 + 1` when there is a tail, `T = 256` (seed 004:
//! element-wise 256–512).

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
    /// `y = max(x, 0)`.
    Relu,
    /// `y = x / (1 + exp(-x))`.
    Silu,
    /// `y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    Gelu,
}

/// `√(2/π)`, the GELU tanh-form constant.
pub const GELU_C: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of the GELU tanh form.
pub const GELU_K: f64 = 0.044715;

impl Elementwise {
    pub const ALL: [Elementwise; 6] =
        [Elementwise::Scale, Elementwise::Add, Elementwise::Mul, Elementwise::Relu, Elementwise::Silu, Elementwise::Gelu];

    pub fn name(self) -> &'static str {
        match self {
            Elementwise::Scale => "scale",
            Elementwise::Add => "add",
            Elementwise::Mul => "mul",
            Elementwise::Relu => "relu",
            Elementwise::Silu => "silu",
            Elementwise::Gelu => "gelu",
        }
    }

    pub fn from_name(name: &str) -> Option<Elementwise> {
        Elementwise::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Whether the operation reads a second buffer `b`.
    pub fn is_binary(self) -> bool {
        matches!(self, Elementwise::Add | Elementwise::Mul)
    }

    /// Whether the operation takes the by-value `factor`.
    pub fn has_factor(self) -> bool {
        self == Elementwise::Scale
    }

    /// The operation on f32 lanes (`a`, `b` of one width).
    fn apply(self, a: Ex, b: Option<Ex>, factor: Option<Ex>) -> Ex {
        let width = a.ty().width;
        match self {
            Elementwise::Scale => a * factor.expect("scale takes a factor"),
            Elementwise::Add => a + b.expect("add is binary"),
            Elementwise::Mul => a * b.expect("mul is binary"),
            Elementwise::Relu => max(a, splat(0.0, width)),
            Elementwise::Silu => a / (1.0 + exp(-a)),
            Elementwise::Gelu => 0.5 * a * (1.0 + tanh(GELU_C * (a + GELU_K * a * a * a))),
        }
    }

    /// The f64 reference of one element.
    pub fn reference_one(self, a: f64, b: f64, factor: f64) -> f64 {
        match self {
            Elementwise::Scale => a * factor,
            Elementwise::Add => a + b,
            Elementwise::Mul => a * b,
            Elementwise::Relu => a.max(0.0),
            Elementwise::Silu => a / (1.0 + (-a).exp()),
            Elementwise::Gelu => 0.5 * a * (1.0 + (GELU_C * (a + GELU_K * a * a * a)).tanh()),
        }
    }
}

impl fmt::Display for Elementwise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kernel `{op}_{dtype}[_vec4]`.
pub fn elementwise(op: Elementwise, dtype: DType, vec: u8) -> Kernel {
    check_vec(vec);
    let mut k = KernelBuilder::new(format!("{}_{}{}", op.name(), dtype, vec_suffix(vec)));
    let (scalar_ty, vec_ty) = (dtype.ty(1), dtype.ty(vec));
    // Vector views first, then scalar views, so the binding order is
    // `x4, [b4,] y4, x, [b,] y`.
    let x4 = (vec == 4).then(|| k.buffer("x4", vec_ty, Access::Read));
    let b4 = (vec == 4 && op.is_binary()).then(|| k.buffer("b4", vec_ty, Access::Read));
    let y4 = (vec == 4).then(|| k.buffer("y4", vec_ty, Access::ReadWrite));
    let x = k.buffer("x", scalar_ty, Access::Read);
    let b = op.is_binary().then(|| k.buffer("b", scalar_ty, Access::Read));
    let y = k.buffer("y", scalar_ty, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let factor = op.has_factor().then(|| k.value("factor", Type::F32));
    let tid = k.let_("tid", thread_position_in_grid().x());
    let scalar_body = |k: &mut KernelBuilder, i: Ex| {
        let a = load_f32(x, i);
        let bv = b.map(|b| load_f32(b, i));
        store_f32(k, y, i, op.apply(a, bv, factor));
    };
    if vec == 1 {
        k.if_(tid.lt(n), |k| scalar_body(k, tid));
    } else {
        let (x4, y4) = (x4.expect("vector view"), y4.expect("vector view"));
        let n4 = k.let_("n4", n / 4u32);
        k.if_else(
            tid.lt(n4),
            |k| {
                let a = k.let_("a", load_f32(x4, tid));
                let bv = b4.map(|b4| load_f32(b4, tid));
                store_f32(k, y4, tid, op.apply(a, bv, factor));
            },
            |k| {
                k.if_(tid.eq(n4), |k| {
                    k.for_range("i", n4 * 4u32, n, 1u32, |k, i| scalar_body(k, i));
                });
            },
        );
    }
    finish(k)
}

/// Seed 000 Pattern A for any element type: `y = x · factor`.
pub fn scale(dtype: DType) -> Kernel {
    elementwise(Elementwise::Scale, dtype, 1)
}

/// Seed 000 Pattern B (`half4` / `float4` loads) with a scalar tail.
pub fn scale_vec4(dtype: DType) -> Kernel {
    elementwise(Elementwise::Scale, dtype, 4)
}

/// Threads the kernel needs: one per element, or one per `float4` plus one
/// for the tail.
pub fn units(n: u32, vec: u8) -> u32 {
    if vec == 4 {
        n / 4 + u32::from(n % 4 != 0)
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

/// The launch for `n` elements; `vec` 4 when the caller can bind vector
/// views, `threads` overrides seed 004's 256.
pub fn plan(op: Elementwise, dtype: DType, n: usize, vec: u8, threads: Option<u32>) -> Result<ElementwisePlan, ShapeError> {
    check_vec(vec);
    let name = format!("{}_{}{}", op.name(), dtype, vec_suffix(vec));
    nonzero(&name, "n", n)?;
    let n = to_u32(&name, "n", n)?;
    let t = pick_threads(&name, KernelClass::Elementwise, threads)?;
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
        let p = plan(Elementwise::Scale, DType::F16, 4096, 4, None).unwrap();
        // Seed 000: N = 4096 half4 scale → 4 threadgroups of 256.
        assert_eq!(p.dispatch, Dispatch::threadgroups([4, 1, 1], 256));
        assert!(plan(Elementwise::Scale, DType::F16, 0, 4, None).is_err());
        assert!(plan(Elementwise::Scale, DType::F16, 10, 1, Some(100)).is_err());
    }

    #[test]
    fn parameters_bind_vector_views_first() {
        let k = elementwise(Elementwise::Add, DType::F32, 4);
        let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x4", "b4", "y4", "x", "b", "y", "n"]);
        let k = scale(DType::BF16);
        let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "n", "factor"]);
    }
}
