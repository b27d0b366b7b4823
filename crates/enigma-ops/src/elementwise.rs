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
        // Left to choose, a thread takes 8 elements: 16-bit types in one
        // 16-byte access, f32 in two `float4`s.
        let vec = if vec == 4 && self.options.vectorize.is_none() && elementwise::packs(dtype, n) { 8 } else { vec };
        let pairs = vec == 8 && elem == Scalar::F32;
        let threads = if pairs { self.options.threads.unwrap_or(elementwise::PAIRS_THREADS) } else { self.threads(KernelType::Elementwise) };
        let plan = elementwise::plan(op, dtype, n, vec, threads)?;
        let y = self.flat_output(elem, n, if pairs { 4 } else { vec })?;
        // The packed kernel reads and writes 16-byte words.
        let words = enigma_ir::Type::vector(Scalar::U32, 4);
        let packed = |what: &str, buf: &Buffer| (plan.vec == 8 && !pairs).then(|| self.vector_view(op.name(), what, buf, words, 8)).transpose();
        let (x8, y8) = (packed(ElementwiseArgs::X8, x)?, packed(ElementwiseArgs::Y8, &y)?);
        let b8 = b.map(|b| packed(ElementwiseArgs::B8, b)).transpose()?.flatten();
        let args = ElementwiseArgs { x, x4: x, x8: x8.as_ref(), b, b4: b, b8: b8.as_ref(), y: &y, y4: &y, y8: y8.as_ref(), n: plan.n, factor };
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
    /// `b_shape` broadcast as NumPy does: the output and its shape. Shapes
    /// that merge to one flat walk of both inputs (equal shapes) run
    /// [`Ops::elementwise`]; others the broadcast kernel over the output
    /// seen as `[rows, inner]` (`library::elementwise::plan_broadcast`:
    /// a row or column vector against a matrix, a scalar, any rank), with
    /// 4-wide loads and stores where the inner dimension is a multiple of 4.
    pub fn elementwise_broadcast(&self, op: Elementwise, a: &Buffer, b: &Buffer, a_shape: &[usize], b_shape: &[usize]) -> Result<(Buffer, Vec<usize>), Error> {
        let name = format!("{}_broadcast", op.name());
        if !op.is_binary() {
            return Err(arg_err(&name, format!("{op} is not a binary operation")));
        }
        let Some((shape, _, _)) = elementwise::broadcast_layout(a_shape, b_shape) else {
            return Err(arg_err(&name, format!("shapes {a_shape:?} and {b_shape:?} do not broadcast (each dimension must match or be 1)")));
        };
        let n: usize = shape.iter().product();
        let (na, nb) = (a_shape.iter().product::<usize>(), b_shape.iter().product::<usize>());
        if na == n && nb == n {
            return Ok((self.elementwise(op, a, Some(b), n, 1.0)?, shape));
        }
        let dtype = self.dtype_of(&name, a)?;
        self.need(&name, "a", a, na, dtype.scalar())?;
        self.need(&name, "b", b, nb, dtype.scalar())?;
        let y = self.output(dtype.scalar(), n)?;
        let vector = dtype.ty(4);
        let [a4, b4, y4] = [a, b, &y].map(|buf| buf.viewed_as(vector));
        let vector_ok = [&a4, &b4, &y4].map(|v| self.options.vectorize != Some(false) && v.is_some());
        let plan = elementwise::plan_broadcast(op, dtype, a_shape, b_shape, self.threads(KernelType::Elementwise), vector_ok)?;
        let args = BroadcastArgs { a, a4: a4.as_ref(), b, b4: b4.as_ref(), y: &y, y4: y4.as_ref(), units: plan.units, total: plan.total };
        self.launch(format!("elementwise_broadcast {:?}", (op, dtype, plan.vec, plan.access, plan.orank)), || plan.kernel(), plan.dispatch, &(args, plan.layout_args()))?;
        Ok((y, shape))
    }
}
