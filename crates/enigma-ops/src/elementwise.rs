//! Element-wise operations: `y = op(x[, b])` over a flat vector, the
//! binary ones over NumPy-broadcast shapes, and the device copy that writes
//! a result into memory the caller gave.

use crate::{arg_err, Error, KernelType, Ops};
use enigma_kernels::library::elementwise::{self, BroadcastArgs, CopyArgs, Elementwise, ElementwiseArgs};
use enigma_ir::Scalar;
use enigma_runtime::Buffer;

impl Ops<'_> {

    /// `y = op(x[, b])` over `n` elements (`factor` is used by `Scale`);
    /// `y` is padded to whole vectors when the vector kernel runs.
    pub fn elementwise(&self, op: Elementwise, x: &Buffer, b: Option<&Buffer>, n: usize, factor: f32) -> Result<Buffer, Error> {
        let name = op.name();
        let dtype = self.dtype_of(name, x)?;
        let elem = dtype.scalar();
        self.need(name, "x", x, n, elem)?;
        if op.is_binary() {
            let b = b.ok_or_else(|| arg_err(name, "a binary operation needs `b`"))?;
            self.need(name, "b", b, n, elem)?;
        }
        let mut inputs = vec![x];
        inputs.extend(b.filter(|_| op.is_binary()));
        let vec = self.vectorize(name, &inputs, dtype.ty(4), true)?;
        let plan = elementwise::plan(op, dtype, n, vec, self.threads(KernelType::Elementwise))?;
        let y = self.flat_output(elem, n, vec)?;
        let args = ElementwiseArgs { x, x4: x, b, b4: b, y: &y, y4: &y, n: plan.n, factor };
        self.launch(format!("elementwise {plan:?}"), || plan.kernel(), plan.dispatch, &args)?;
        Ok(y)
    }

    /// `y = x · factor`.
    pub fn scale(&self, x: &Buffer, n: usize, factor: f32) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Scale, x, None, n, factor)
    }
    /// `y = a + b`.
    pub fn add(&self, a: &Buffer, b: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Add, a, Some(b), n, 1.0)
    }
    /// `y = a · b`.
    pub fn mul(&self, a: &Buffer, b: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Mul, a, Some(b), n, 1.0)
    }
    /// `y = max(x, 0)`.
    pub fn relu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Relu, x, None, n, 1.0)
    }
    /// `y = x · sigmoid(x)`.
    pub fn silu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Silu, x, None, n, 1.0)
    }
    /// GELU, tanh form.
    pub fn gelu(&self, x: &Buffer, n: usize) -> Result<Buffer, Error> {
        self.elementwise(Elementwise::Gelu, x, None, n, 1.0)
    }

    /// Copies the first `elems` elements of `elem` from `src` into `dst` on
    /// the device, bit for bit (the kernel `copy_{elem}`, one thread per
    /// element): a result written into a buffer the caller allocated. Both
    /// buffers must hold `elems` elements of `elem` (untyped, or typed as
    /// `elem`); no elements is no dispatch.
    pub fn copy_into(&self, elem: Scalar, src: &Buffer, dst: &Buffer, elems: usize) -> Result<(), Error> {
        let name = format!("copy_{}", elem.name());
        self.need(&name, "src", src, elems, elem)?;
        self.need(&name, "dst", dst, elems, elem)?;
        if elems == 0 {
            return Ok(());
        }
        let n = enigma_kernels::library::to_u32(&name, "elements", elems)?;
        let t = enigma_kernels::library::check_threads(&name, self.threads(KernelType::Elementwise))?;
        let dispatch = enigma_kernels::library::Dispatch::threadgroups([n.div_ceil(t), 1, 1], t);
        self.launch(format!("copy {elem:?}"), || elementwise::copy(elem), dispatch, &CopyArgs { src, dst, n })
    }

    /// `y = op(a, b)` for a binary `op` and `a`, `b` of shapes `a_shape`,
    /// `b_shape` broadcast as NumPy does: the output and its shape. Equal
    /// shapes run [`Ops::elementwise`] (vector loads where they bind);
    /// others one thread per output element reading each input at its
    /// own strides.
    pub fn elementwise_broadcast(&self, op: Elementwise, a: &Buffer, b: &Buffer, a_shape: &[usize], b_shape: &[usize]) -> Result<(Buffer, Vec<usize>), Error> {
        let name = format!("{}_broadcast", op.name());
        if !op.is_binary() {
            return Err(arg_err(&name, format!("{op} is not a binary operation")));
        }
        let Some((shape, sa, sb)) = elementwise::broadcast_layout(a_shape, b_shape) else {
            return Err(arg_err(&name, format!("shapes {a_shape:?} and {b_shape:?} do not broadcast (each dimension must match or be 1)")));
        };
        let n: usize = shape.iter().product();
        if a_shape == b_shape {
            return Ok((self.elementwise(op, a, Some(b), n, 1.0)?, shape));
        }
        let dtype = self.dtype_of(&name, a)?;
        self.need(&name, "a", a, a_shape.iter().product(), dtype.scalar())?;
        self.need(&name, "b", b, b_shape.iter().product(), dtype.scalar())?;
        let n32 = enigma_kernels::library::to_u32(&name, "elements", n)?;
        enigma_kernels::library::nonzero(&name, "elements", n)?;
        let mut layout = Vec::with_capacity(3 * shape.len());
        for v in shape.iter().chain(&sa).chain(&sb) {
            layout.push(enigma_kernels::library::to_u32(&name, "a dimension", *v)?);
        }
        // A rank-0 broadcast (two scalars) still binds a layout buffer.
        layout.push(0);
        let layout = self.rt.buffer_from(&layout)?;
        let threads = self.threads(KernelType::Elementwise);
        let t = enigma_kernels::library::check_threads(&name, threads)?;
        let dispatch = enigma_kernels::library::Dispatch::threadgroups([n32.div_ceil(t), 1, 1], t);
        let y = self.output(dtype.scalar(), n)?;
        self.launch(
            format!("elementwise_broadcast {:?}", (op, dtype)),
            || elementwise::broadcast_binary(op, dtype),
            dispatch,
            &BroadcastArgs { a, b, y: &y, layout: &layout, rank: shape.len() as u32, n: n32 },
        )?;
        Ok((y, shape))
    }
}
