//! The builder's spelling of cooperative tensor operations, MSL's
//! MetalPerformancePrimitives names in Rust:
//!
//! ```
//! use enigma_ir::builder::*;
//! use enigma_ir::{Access, ExecutionScope, Matmul2dDescriptor, Scalar, Type};
//!
//! let mut k = KernelBuilder::new("gemm_tile");
//! let (a, b, c) = (k.buffer("A", Type::F16, Access::Read), k.buffer("B", Type::F16, Access::Read), k.buffer("C", Type::F32, Access::ReadWrite));
//! let (m, n, kk) = (k.value("M", Type::U32), k.value("N", Type::U32), k.value("K", Type::U32));
//! let op = Matmul2d::new(Matmul2dDescriptor::new(64, 64, None), ExecutionScope::Simdgroups(4));
//! let (ta, tb) = (Tensor::new(a, [kk, m]), Tensor::new(b, [n, kk]));
//! let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
//! k.matmul2d_run(&op, &ta, &tb, acc);
//! k.cooperative_store(acc, &Tensor::new(c, [n, m]));
//! let kernel = k.finish().unwrap();
//! enigma_ir::validate(&kernel, &Default::default()).unwrap();
//! ```

use super::{Ex, KernelBuilder, Mem};
use crate::cooperative::{CombineOp, CoopId, CooperativeTensor, ExecutionScope, Matmul2dDescriptor, OperandRelease, ReduceAxis, ReduceOp};
use crate::ir::{Matmul2dLeft, TensorView};
use crate::ir::{Expr, Literal, StmtKind};
use crate::types::{QuantCode, QuantLayout, Scalar, Type};

/// `matmul2d<descriptor, scope>`: the operation object (no code by itself).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Matmul2d {
    pub desc: Matmul2dDescriptor,
    pub scope: ExecutionScope,
}

impl Matmul2d {
    pub fn new(desc: Matmul2dDescriptor, scope: ExecutionScope) -> Matmul2d {
        Matmul2d { desc, scope }
    }
}

/// A 2-D view of a buffer or threadgroup array: MSL's
/// `tensor<T, dextents<int32_t, 2>, tensor_inline>`; extents innermost first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tensor {
    mem: Mem,
    offset: Ex,
    extents: [Ex; 2],
    strides: [Ex; 2],
}

impl Tensor {
    /// The view of `mem` from element 0 with `extents` (x innermost),
    /// packed: strides `[1, extents[0]]`.
    pub fn new(mem: Mem, extents: [impl Into<Ex>; 2]) -> Tensor {
        let [x, y] = extents.map(|e| e.into().coerce_to(Type::U32));
        Tensor { mem, offset: Ex::literal(Literal::u32(0)), extents: [x, y], strides: [Ex::literal(Literal::u32(1)), x] }
    }

    /// The same view with other strides.
    pub fn with_strides(self, strides: [impl Into<Ex>; 2]) -> Tensor {
        Tensor { strides: strides.map(|s| s.into().coerce_to(Type::U32)), ..self }
    }

    /// `slice(x, y)`: the view starting at element (x, y), its extents what
    /// remains of this one's.
    pub fn slice(self, x: impl Into<Ex>, y: impl Into<Ex>) -> Tensor {
        let (x, y) = (x.into().coerce_to(Type::U32), y.into().coerce_to(Type::U32));
        let remaining = |e: Ex, o: Ex| crate::builder::select(e - o, Ex::literal(Literal::u32(0)), o.ge(e));
        Tensor {
            mem: self.mem,
            offset: self.offset + x * self.strides[0] + y * self.strides[1],
            extents: [remaining(self.extents[0], x), remaining(self.extents[1], y)],
            strides: self.strides,
        }
    }

    fn ir(&self, k: &mut KernelBuilder, loc: &std::panic::Location<'_>) -> TensorView {
        let mut e = |x: Ex| k.tree(x.materialize(), loc);
        TensorView {
            mem: self.mem.memory(),
            offset: e(self.offset),
            extents: [e(self.extents[0]), e(self.extents[1])],
            strides: [e(self.strides[0]), e(self.strides[1])],
        }
    }
}

/// A cooperative tensor of the kernel: read its slots with the methods
/// here, write them with [`KernelBuilder::cooperative_set`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoopTensor {
    id: CoopId,
    elem: Scalar,
}

impl CoopTensor {
    pub fn id(self) -> CoopId {
        self.id
    }

    /// `get_capacity()`.
    pub fn get_capacity(self) -> Ex {
        Ex::new(Expr::CooperativeCapacity { tensor: self.id }, Type::U32)
    }

    /// `is_valid_element(i)`.
    pub fn is_valid_element(self, i: impl Into<Ex>) -> Ex {
        let index = Box::new(i.into().coerce_to(Type::U32).tree_or_poison());
        Ex::new(Expr::CooperativeValid { tensor: self.id, index }, Type::BOOL)
    }

    /// `t[i]`.
    pub fn get(self, i: impl Into<Ex>) -> Ex {
        let index = Box::new(i.into().coerce_to(Type::U32).tree_or_poison());
        Ex::new(Expr::CooperativeElement { tensor: self.id, index }, Type::scalar(self.elem))
    }

    /// `get_multidimensional_index(i)`: `[column, row]` of slot `i`'s element.
    pub fn get_multidimensional_index(self, i: impl Into<Ex>) -> [Ex; 2] {
        let i = i.into().coerce_to(Type::U32);
        [0u8, 1].map(|dim| Ex::new(Expr::CooperativeCoord { tensor: self.id, index: Box::new(i.tree_or_poison()), dim }, Type::U32))
    }
}

/// A product's left operand: a view or a previous destination.
#[derive(Debug)]
pub enum Left<'a> {
    Tensor(&'a Tensor),
    Cooperative(CoopTensor),
}

impl<'a> From<&'a Tensor> for Left<'a> {
    fn from(t: &'a Tensor) -> Left<'a> {
        Left::Tensor(t)
    }
}

impl From<CoopTensor> for Left<'_> {
    fn from(t: CoopTensor) -> Self {
        Left::Cooperative(t)
    }
}

impl KernelBuilder {
    /// Declares a cooperative tensor of `rows×cols` elements over `scope`.
    pub fn cooperative_tensor(&mut self, name: &str, elem: Scalar, rows: u32, cols: u32, scope: ExecutionScope) -> CoopTensor {
        let id = CoopId(self.kernel.cooperative_tensors.len() as u32);
        self.kernel.cooperative_tensors.push(CooperativeTensor { name: name.into(), elem, rows, cols, scope });
        CoopTensor { id, elem }
    }

    /// `op.get_destination_cooperative_tensor<…, elem>()`: a new m×n tensor
    /// of `op`'s scope (its contents unspecified until written).
    pub fn destination_cooperative_tensor(&mut self, op: &Matmul2d, name: &str, elem: Scalar) -> CoopTensor {
        self.cooperative_tensor(name, elem, op.desc.m, op.desc.n, op.scope)
    }

    /// `op.run(left, right, dest)`.
    #[track_caller]
    pub fn matmul2d_run<'a>(&mut self, op: &Matmul2d, left: impl Into<Left<'a>>, right: &Tensor, dest: CoopTensor) {
        self.matmul2d_run_releasing(op, left, right, dest, OperandRelease::NextBarrier);
    }

    /// `op.run(left, right, dest)`, the product free to read its
    /// (threadgroup) operands until the second threadgroup barrier after it
    /// ([`OperandRelease::SecondBarrier`]): for pipelines whose stages are
    /// overwritten two barriers after their product.
    #[track_caller]
    pub fn matmul2d_run_overlapped<'a>(&mut self, op: &Matmul2d, left: impl Into<Left<'a>>, right: &Tensor, dest: CoopTensor) {
        self.matmul2d_run_releasing(op, left, right, dest, OperandRelease::SecondBarrier);
    }

    #[track_caller]
    fn matmul2d_run_releasing<'a>(&mut self, op: &Matmul2d, left: impl Into<Left<'a>>, right: &Tensor, dest: CoopTensor, release: OperandRelease) {
        let loc = std::panic::Location::caller();
        let left = match left.into() {
            Left::Tensor(t) => Matmul2dLeft::Tensor(Box::new(t.ir(self, loc))),
            Left::Cooperative(c) => Matmul2dLeft::Cooperative(c.id),
        };
        let right = Box::new(right.ir(self, loc));
        self.push(StmtKind::Matmul2d { desc: op.desc, scope: op.scope, left, right, dest: dest.id, release }, loc);
    }

    /// `t.load(view)`.
    #[track_caller]
    pub fn cooperative_load(&mut self, t: CoopTensor, view: &Tensor) {
        let loc = std::panic::Location::caller();
        let src = Box::new(view.ir(self, loc));
        self.push(StmtKind::CooperativeLoad { tensor: t.id, src }, loc);
    }

    /// `t.store(view)`.
    #[track_caller]
    pub fn cooperative_store(&mut self, t: CoopTensor, view: &Tensor) {
        let loc = std::panic::Location::caller();
        let dst = Box::new(view.ir(self, loc));
        self.push(StmtKind::CooperativeStore { tensor: t.id, dst }, loc);
    }

    /// `t[i] = value`.
    #[track_caller]
    pub fn cooperative_set(&mut self, t: CoopTensor, i: impl Into<Ex>, value: impl Into<Ex>) {
        let loc = std::panic::Location::caller();
        let index = self.tree(i.into().coerce_to(Type::U32), loc);
        let value = self.tree(value.into().coerce_to(Type::scalar(t.elem)), loc);
        self.push(StmtKind::CooperativeSet { tensor: t.id, index, value }, loc);
    }

    /// `cooperative_dequantize` ([`StmtKind::CooperativeDequantize`]):
    /// every element (r, c) of `t` becomes the `code` weight that `layout`
    /// places at K row `c`, N column `r` of `words` (in the row layout nibble
    /// `c % 8` of `words[offset + (c / 8)·stride + r]`) times
    /// `scales[scale_offset + (c >> group_shift)·scale_stride + r]`, rounded
    /// once to `t`'s element type; `words` is `(memory, offset, stride)`,
    /// `scales` likewise.
    #[track_caller]
    pub fn cooperative_dequantize(&mut self, t: CoopTensor, (code, layout): (QuantCode, QuantLayout), words: (Mem, impl Into<Ex>, impl Into<Ex>), scales: (Mem, impl Into<Ex>, impl Into<Ex>), group_shift: impl Into<Ex>) {
        let loc = std::panic::Location::caller();
        self.dequantize_at(loc, t, (code, layout), (words.0, words.1.into(), words.2.into()), (scales.0, scales.1.into(), scales.2.into()), group_shift.into(), None);
    }

    /// [`KernelBuilder::cooperative_dequantize`] with `biases` (f16, indexed
    /// as the scales): each element is `value · scale + bias`, the exact
    /// value rounded once (MLX's affine weights with [`QuantCode::Uint4`]
    /// in [`QuantLayout::Columns`]).
    #[track_caller]
    pub fn cooperative_dequantize_with_biases(&mut self, t: CoopTensor, (code, layout): (QuantCode, QuantLayout), words: (Mem, impl Into<Ex>, impl Into<Ex>), scales: (Mem, impl Into<Ex>, impl Into<Ex>), biases: Mem, group_shift: impl Into<Ex>) {
        let loc = std::panic::Location::caller();
        self.dequantize_at(loc, t, (code, layout), (words.0, words.1.into(), words.2.into()), (scales.0, scales.1.into(), scales.2.into()), group_shift.into(), Some(biases));
    }

    #[allow(clippy::too_many_arguments)]
    fn dequantize_at(&mut self, loc: &'static std::panic::Location<'static>, t: CoopTensor, (code, layout): (QuantCode, QuantLayout), words: (Mem, Ex, Ex), scales: (Mem, Ex, Ex), group_shift: Ex, biases: Option<Mem>) {
        let mut index = |e: Ex| self.tree(e.coerce_to(Type::U32), loc);
        let (offset, stride) = (index(words.1), index(words.2));
        let (scale_offset, scale_stride) = (index(scales.1), index(scales.2));
        let group_shift = index(group_shift);
        let kind = StmtKind::CooperativeDequantize { tensor: t.id, code, layout, words: words.0.mem, offset, stride, scales: scales.0.mem, scale_offset, scale_stride, group_shift, biases: biases.map(|b| b.mem) };
        self.push(kind, loc);
    }

    /// `reduce_rows(src, dest, op)` / `reduce_columns`.
    #[track_caller]
    pub fn cooperative_reduce(&mut self, src: CoopTensor, dest: CoopTensor, axis: ReduceAxis, op: ReduceOp) {
        let loc = std::panic::Location::caller();
        self.push(StmtKind::CooperativeReduce { src: src.id, dest: dest.id, axis, op }, loc);
    }

    /// `combine(dest, src, op)`: `dest = op(dest, src)` element by element,
    /// `src` of `dest`'s shape or one value per row (m×1) or column (1×n).
    #[track_caller]
    pub fn cooperative_combine(&mut self, dest: CoopTensor, src: CoopTensor, op: CombineOp) {
        let loc = std::panic::Location::caller();
        self.push(StmtKind::CooperativeCombine { dest: dest.id, src: src.id, op }, loc);
    }
}
