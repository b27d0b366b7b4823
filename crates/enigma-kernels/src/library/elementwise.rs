//! Element-wise kernels: `scale`, `add`, `mul`, `relu`, `silu`, `gelu` (tanh
//! form), for f32, f16 and bf16, with scalar or 4-wide vector loads.
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
        let width = a.ty().width();
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
///
/// # Panics
/// When `vec` is not 1 or 4.
pub fn elementwise(op: Elementwise, dtype: DType, vec: u8) -> Kernel {
    assert_vec(vec);
    let mut k = KernelBuilder::new(format!("{}_{}{}", op.name(), dtype, vec_suffix(vec)));
    let ty = dtype.ty(vec);
    let sfx = if vec == 4 { "4" } else { "" };
    let x = k.buffer(&format!("x{sfx}"), ty, Access::Read);
    let b = op.is_binary().then(|| k.buffer(&format!("b{sfx}"), ty, Access::Read));
    let y = k.buffer(&format!("y{sfx}"), ty, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let factor = op.has_factor().then(|| k.value("factor", Type::F32));
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
    fn parameters_are_one_view_per_buffer() {
        let k = elementwise(Elementwise::Add, DType::F32, 4);
        let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x4", "b4", "y4", "n"]);
        let k = scale(DType::BF16);
        let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "n", "factor"]);
    }
}
