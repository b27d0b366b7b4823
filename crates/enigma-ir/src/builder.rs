//! The Rust builder DSL: kernels written as close to their MSL as Rust allows.
//!
//! ```
//! use enigma_ir::builder::*;
//! use enigma_ir::{Access, MemFlags, Type};
//!
//! let mut k = KernelBuilder::new("scale");
//! let data = k.buffer("data", Type::F32, Access::ReadWrite);
//! let factor = k.value("factor", Type::F32);
//! let tid = k.let_("tid", thread_position_in_grid().x());
//! k.store(data.at(tid), data.get(tid) * factor);
//! let kernel = k.finish().unwrap();
//! assert_eq!(kernel.params.len(), 2);
//! ```
//!
//! Expressions are [`Ex`] handles (`Copy`), so `tid * 4 + lane` reads like C.
//! Their trees live in a per-thread pool while a builder is alive. Rust
//! integer and float literals without a suffix are *weak*: `x + 1` takes the
//! type of `x`, as an MSL literal would; suffixed literals (`1u32`, `0.5f32`)
//! are strong. Type errors are not reported by the operators: they surface in
//! [`crate::validate()`], with the statement's Rust source line.

mod cooperative;
pub use cooperative::{CoopTensor, Left, Matmul2d, Tensor};

use crate::ir::*;
use crate::types::{MatrixType, QuantCode, QuantLayout, Scalar, Type};
use std::cell::RefCell;
use std::ops;
use thiserror::Error;

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

#[derive(Default)]
struct Pool {
    exprs: Vec<Expr>,
    generation: u32,
    live_builders: u32,
}

/// An expression under construction: a handle into this thread's pool, with
/// its type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ex {
    id: u32,
    generation: u32,
    ty: Type,
    /// An unsuffixed Rust literal, which adopts the type of the other operand.
    weak: bool,
}

impl Ex {
    fn new(expr: Expr, ty: Type) -> Ex {
        POOL.with(|p| {
            let mut p = p.borrow_mut();
            p.exprs.push(expr);
            Ex { id: p.exprs.len() as u32 - 1, generation: p.generation, ty, weak: false }
        })
    }

    fn weak(expr: Expr, ty: Type) -> Ex {
        Ex { weak: true, ..Ex::new(expr, ty) }
    }

    /// The expression tree, or `None` when the handle outlived its builder.
    fn tree(self) -> Option<Expr> {
        POOL.with(|p| {
            let p = p.borrow();
            (p.generation == self.generation).then(|| p.exprs[self.id as usize].clone())
        })
    }

    fn tree_or_poison(self) -> Expr {
        self.tree().unwrap_or(Expr::Literal(Literal { ty: Scalar::Bool, value: LiteralValue::Float(f64::NAN) }))
    }

    /// The static type of the expression.
    pub fn ty(self) -> Type {
        self.ty
    }

    /// A literal of an explicit type.
    pub fn literal(lit: Literal) -> Ex {
        Ex::new(Expr::Literal(lit), Type::scalar(lit.ty))
    }

    /// Converts a weak literal to `ty`'s scalar type; other expressions are unchanged.
    fn coerce_to(self, ty: Type) -> Ex {
        if !self.weak {
            return self;
        }
        match self.tree() {
            Some(Expr::Literal(lit)) => Ex::literal(lit.convert(ty.elem())),
            _ => self,
        }
    }

    /// Makes both operands agree where one is a weak literal.
    fn unify(a: Ex, b: Ex) -> (Ex, Ex) {
        match (a.weak, b.weak) {
            (true, false) => (a.coerce_to(b.ty), b),
            (false, true) => (a, b.coerce_to(a.ty)),
            _ => (a, b),
        }
    }

    fn binary(op: BinaryOp, lhs: Ex, rhs: Ex) -> Ex {
        let (lhs, rhs) = Ex::unify(lhs, rhs);
        // An invalid combination keeps the left operand's type; validation in
        // `finish` reports it with the location.
        let ty = crate::typing::binary(op, lhs.ty, rhs.ty).unwrap_or(lhs.ty);
        let expr = Expr::Binary { op, lhs: Box::new(lhs.tree_or_poison()), rhs: Box::new(rhs.tree_or_poison()) };
        let both_weak = lhs.weak && rhs.weak && !op.is_comparison();
        if both_weak {
            Ex::weak(expr, ty)
        } else {
            Ex::new(expr, ty)
        }
    }

    pub fn eq(self, rhs: impl Into<Ex>) -> Ex {
        Ex::binary(BinaryOp::Eq, self, rhs.into())
    }
    pub fn ne(self, rhs: impl Into<Ex>) -> Ex {
        Ex::binary(BinaryOp::Ne, self, rhs.into())
    }
    pub fn lt(self, rhs: impl Into<Ex>) -> Ex {
        Ex::binary(BinaryOp::Lt, self, rhs.into())
    }
    pub fn le(self, rhs: impl Into<Ex>) -> Ex {
        Ex::binary(BinaryOp::Le, self, rhs.into())
    }
    pub fn gt(self, rhs: impl Into<Ex>) -> Ex {
        Ex::binary(BinaryOp::Gt, self, rhs.into())
    }
    pub fn ge(self, rhs: impl Into<Ex>) -> Ex {
        Ex::binary(BinaryOp::Ge, self, rhs.into())
    }
    /// Logical `&&` (both sides are evaluated).
    pub fn and(self, rhs: impl Into<Ex>) -> Ex {
        Ex::binary(BinaryOp::And, self, rhs.into())
    }
    /// Logical `||` (both sides are evaluated).
    pub fn or(self, rhs: impl Into<Ex>) -> Ex {
        Ex::binary(BinaryOp::Or, self, rhs.into())
    }

    /// Value conversion, `T(x)` in MSL.
    pub fn cast(self, to: impl Into<Type>) -> Ex {
        let to = to.into();
        Ex::new(Expr::Cast { to, arg: Box::new(self.materialize().tree_or_poison()) }, to)
    }

    /// Bit reinterpretation, `as_type<T>(x)` in MSL.
    pub fn bitcast(self, to: impl Into<Type>) -> Ex {
        let to = to.into();
        Ex::new(Expr::Bitcast { to, arg: Box::new(self.materialize().tree_or_poison()) }, to)
    }

    /// Vector component `index` (0 = `.x`).
    pub fn component(self, index: u8) -> Ex {
        Ex::new(Expr::Extract { arg: Box::new(self.tree_or_poison()), index }, Type::scalar(self.ty.elem()))
    }
    pub fn x(self) -> Ex {
        self.component(0)
    }
    pub fn y(self) -> Ex {
        self.component(1)
    }
    pub fn z(self) -> Ex {
        self.component(2)
    }
    pub fn w(self) -> Ex {
        self.component(3)
    }

    /// A weak literal standing alone takes its default type (i32 or f32).
    fn materialize(self) -> Ex {
        if self.weak {
            self.coerce_to(self.ty)
        } else {
            self
        }
    }
}

impl From<Var> for Ex {
    fn from(v: Var) -> Ex {
        v.get()
    }
}

macro_rules! strong_literal {
    ($($t:ty => $ctor:expr),* $(,)?) => {$(
        impl From<$t> for Ex {
            fn from(v: $t) -> Ex {
                #[allow(clippy::redundant_closure_call)]
                Ex::literal(($ctor)(v))
            }
        }
    )*};
}

strong_literal! {
    u32 => |v: u32| Literal::u32(v),
    f32 => |v: f32| Literal::f32(v),
    bool => |v: bool| Literal::bool(v),
    u64 => |v: u64| Literal { ty: Scalar::U64, value: LiteralValue::UInt(v) },
    i64 => |v: i64| Literal { ty: Scalar::I64, value: LiteralValue::Int(v) },
}

/// Unsuffixed integer literals are `i32` in Rust: they are weak.
impl From<i32> for Ex {
    fn from(v: i32) -> Ex {
        Ex::weak(Expr::Literal(Literal::i32(v)), Type::I32)
    }
}

/// Unsuffixed float literals are `f64` in Rust: they are weak `f32`.
impl From<f64> for Ex {
    fn from(v: f64) -> Ex {
        Ex::weak(Expr::Literal(Literal { ty: Scalar::F32, value: LiteralValue::Float(v) }), Type::F32)
    }
}

macro_rules! binary_ops {
    ($($trait:ident $method:ident $op:ident),* $(,)?) => {$(
        impl<R: Into<Ex>> ops::$trait<R> for Ex {
            type Output = Ex;
            fn $method(self, rhs: R) -> Ex {
                Ex::binary(BinaryOp::$op, self, rhs.into())
            }
        }
        impl<R: Into<Ex>> ops::$trait<R> for Var {
            type Output = Ex;
            fn $method(self, rhs: R) -> Ex {
                Ex::binary(BinaryOp::$op, self.get(), rhs.into())
            }
        }
        binary_ops!(@lhs $trait $method $op: u32, i32, f32, f64);
    )*};
    (@lhs $trait:ident $method:ident $op:ident: $($t:ty),*) => {$(
        impl ops::$trait<Ex> for $t {
            type Output = Ex;
            fn $method(self, rhs: Ex) -> Ex {
                Ex::binary(BinaryOp::$op, self.into(), rhs)
            }
        }
    )*};
}

binary_ops! {
    Add add Add, Sub sub Sub, Mul mul Mul, Div div Div, Rem rem Rem,
    BitAnd bitand BitAnd, BitOr bitor BitOr, BitXor bitxor BitXor, Shl shl Shl, Shr shr Shr,
}

impl ops::Neg for Ex {
    type Output = Ex;
    fn neg(self) -> Ex {
        let arg = Box::new(self.tree_or_poison());
        if self.weak {
            Ex::weak(Expr::Unary { op: UnaryOp::Neg, arg }, self.ty)
        } else {
            Ex::new(Expr::Unary { op: UnaryOp::Neg, arg }, self.ty)
        }
    }
}

/// `!b` for booleans, `~x` for integers.
impl ops::Not for Ex {
    type Output = Ex;
    fn not(self) -> Ex {
        let op = if self.ty.elem() == Scalar::Bool { UnaryOp::Not } else { UnaryOp::BitNot };
        Ex::new(Expr::Unary { op, arg: Box::new(self.materialize().tree_or_poison()) }, self.ty)
    }
}

/// A mutable local variable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Var {
    id: VarId,
    ty: Type,
}

impl Var {
    /// Reads the variable.
    pub fn get(self) -> Ex {
        Ex::new(Expr::Var(self.id), self.ty)
    }
    pub fn id(self) -> VarId {
        self.id
    }
}

/// A device buffer, threadgroup array or per-thread array that can be indexed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mem {
    mem: Memory,
    elem: Type,
}

impl Mem {
    /// The element `self[index]`, to load or to store to.
    pub fn at(self, index: impl Into<Ex>) -> Place {
        Place { mem: self, index: index.into().coerce_to(Type::U32) }
    }

    /// Loads `self[index]`.
    pub fn get(self, index: impl Into<Ex>) -> Ex {
        self.at(index).load()
    }

    /// The element `self[i0, i1, …]` of the memory seen as a row-major
    /// array of `shape`: the flat index `(i0·s1 + i1)·s2 + …`, each
    /// subscript wrapped in a [`dim_check`] against its dimension's size,
    /// so an index past its dimension is out of bounds even where the flat
    /// index is not. Weak literals become u32.
    pub fn at_dims<const N: usize>(self, index: [Ex; N], shape: [Ex; N]) -> Place {
        let mut flat: Option<Ex> = None;
        for (d, (i, size)) in index.into_iter().zip(shape).enumerate() {
            let (i, size) = (i.coerce_to(Type::U32), size.coerce_to(Type::U32));
            let checked = dim_check(self, d as u8, i, size);
            flat = Some(match flat {
                None => checked,
                Some(f) => f * size + checked,
            });
        }
        self.at(flat.unwrap_or_else(|| Ex::literal(Literal::u32(0))))
    }

    pub fn memory(self) -> Memory {
        self.mem
    }

    pub fn elem(self) -> Type {
        self.elem
    }
}

/// The source of a [`KernelBuilder::tile_copy`]: a row-major matrix of
/// `extents` (rows, columns) in device buffer `mem`, a row every `pitch`
/// elements; extents and pitch dispatch constants ([`crate::ir::TileCopy`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TileSource {
    pub mem: Mem,
    pub extents: [Ex; 2],
    pub pitch: Ex,
}

/// An element of a [`Mem`]: `buf.at(i)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Place {
    mem: Mem,
    index: Ex,
}

impl Place {
    pub fn load(self) -> Ex {
        Ex::new(Expr::Load { mem: self.mem.mem, index: Box::new(self.index.tree_or_poison()) }, self.mem.elem)
    }
}

impl From<Place> for Ex {
    fn from(p: Place) -> Ex {
        p.load()
    }
}

/// A `texture2d<T, access>` parameter: `tex.read(coord)`,
/// `tex.sample(sampler, uv)`, `tex.get_width()`, `tex.get_height()`; writes are
/// [`KernelBuilder::texture_write`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tex {
    id: ParamId,
    texel: Scalar,
}

impl Tex {
    /// `tex.read(coord)`: the texel at `coord` (a u32x2) as four values of
    /// the texel type.
    pub fn read(self, coord: impl Into<Ex>) -> Ex {
        let coord = Box::new(coord.into().tree_or_poison());
        Ex::new(Expr::TextureRead { tex: self.id, coord }, Type::vector(self.texel, 4))
    }

    /// `tex.sample(sampler, uv)` (uv an f32x2): see [`Expr::TextureSample`].
    pub fn sample(self, sampler: Sampler, uv: impl Into<Ex>) -> Ex {
        let uv = Box::new(uv.into().tree_or_poison());
        Ex::new(Expr::TextureSample { tex: self.id, sampler, uv }, Type::vector(self.texel, 4))
    }

    /// `tex.get_width()`.
    pub fn get_width(self) -> Ex {
        Ex::new(Expr::TextureSize { tex: self.id, dim: TextureDim::Width }, Type::U32)
    }

    /// `tex.get_height()`.
    pub fn get_height(self) -> Ex {
        Ex::new(Expr::TextureSize { tex: self.id, dim: TextureDim::Height }, Type::U32)
    }
}

/// Errors found while building, before validation.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum BuildError {
    #[error("kernel `{kernel}` at {loc}: an expression was used after the builder that made it finished")]
    StaleExpression { kernel: String, loc: SourceLoc },
    #[error("kernel `{kernel}`: `{what}` was used outside {outside}")]
    Misplaced { kernel: String, what: &'static str, outside: &'static str },
}

/// Builds one [`Kernel`]. Methods that add a statement record the Rust source
/// line of their caller, so errors and sanitizer reports point at your code.
#[derive(Debug)]
pub struct KernelBuilder {
    kernel: Kernel,
    /// The blocks being filled, innermost last.
    blocks: Vec<Block>,
    errors: Vec<BuildError>,
    generation: u32,
}

impl Drop for KernelBuilder {
    fn drop(&mut self) {
        POOL.with(|p| {
            let mut p = p.borrow_mut();
            p.live_builders -= 1;
            if p.live_builders == 0 {
                p.exprs.clear();
                p.generation = p.generation.wrapping_add(1);
            }
        })
    }
}

fn caller_loc(loc: &std::panic::Location<'_>) -> SourceLoc {
    SourceLoc { file: loc.file().to_string(), line: loc.line() }
}

impl KernelBuilder {
    pub fn new(name: impl Into<String>) -> KernelBuilder {
        let generation = POOL.with(|p| {
            let mut p = p.borrow_mut();
            p.live_builders += 1;
            p.generation
        });
        KernelBuilder {
            kernel: Kernel::empty(name),
            blocks: vec![vec![]],
            errors: vec![],
            generation,
        }
    }

    /// A device buffer parameter (`device T*`, `device const T*` when read-only).
    pub fn buffer(&mut self, name: &str, elem: impl Into<Type>, access: Access) -> Mem {
        let elem = elem.into();
        let id = ParamId(self.kernel.params.len() as u32);
        self.kernel.params.push(Param { name: name.into(), kind: ParamKind::Buffer { elem, access } });
        Mem { mem: Memory::Buffer(id), elem }
    }

    /// A texture parameter: `texture2d<texel, access> name [[texture(n)]]`.
    pub fn texture2d(&mut self, name: &str, texel: Scalar, access: TextureAccess) -> Tex {
        let id = ParamId(self.kernel.params.len() as u32);
        self.kernel.params.push(Param { name: name.into(), kind: ParamKind::Texture { texel, access } });
        Tex { id, texel }
    }

    /// A by-value parameter (`constant T& name`).
    pub fn value(&mut self, name: &str, ty: impl Into<Type>) -> Ex {
        let ty = ty.into();
        let id = ParamId(self.kernel.params.len() as u32);
        self.kernel.params.push(Param { name: name.into(), kind: ParamKind::Value { ty } });
        Ex::new(Expr::Param(id), ty)
    }

    /// A specialisation constant (Metal function constant) with its default.
    pub fn spec(&mut self, name: &str, default: Literal) -> Ex {
        let id = SpecId(self.kernel.spec_constants.len() as u32);
        self.kernel.spec_constants.push(SpecConstant { name: name.into(), ty: default.ty, default });
        Ex::new(Expr::Spec(id), Type::scalar(default.ty))
    }

    /// `threadgroup T name[len];`
    pub fn threadgroup_array(&mut self, name: &str, elem: impl Into<Type>, len: u32) -> Mem {
        let elem = elem.into();
        let id = TgArrayId(self.kernel.threadgroup_arrays.len() as u32);
        self.kernel.threadgroup_arrays.push(ThreadgroupArray { name: name.into(), elem, len });
        Mem { mem: Memory::Threadgroup(id), elem }
    }

    /// `thread T name[len];`: an array each thread has its own copy of,
    /// its elements uninitialised until the thread writes them. Index it
    /// like any memory (`acc.at(i)`, `acc.get(i)`; `at_dims` for a
    /// multi-dimensional one); indexed by constants or by the variables of
    /// [`KernelBuilder::for_unrolled`] loops, a GPU keeps it in registers.
    pub fn thread_array(&mut self, name: &str, elem: impl Into<Type>, len: u32) -> Mem {
        let elem = elem.into();
        let id = ThreadArrayId(self.kernel.thread_arrays.len() as u32);
        self.kernel.thread_arrays.push(ThreadArray { name: name.into(), elem, len });
        Mem { mem: Memory::Thread(id), elem }
    }

    fn declare(&mut self, name: &str, ty: Type) -> Var {
        let id = VarId(self.kernel.locals.len() as u32);
        self.kernel.locals.push(Local { name: name.into(), ty });
        Var { id, ty }
    }

    fn tree(&mut self, e: Ex, loc: &std::panic::Location<'_>) -> Expr {
        match e.tree().filter(|_| e.generation == self.generation) {
            Some(tree) => tree,
            None => {
                self.errors.push(BuildError::StaleExpression { kernel: self.kernel.name.clone(), loc: caller_loc(loc) });
                e.tree_or_poison()
            }
        }
    }

    fn push(&mut self, kind: StmtKind, loc: &std::panic::Location<'_>) {
        let stmt = Stmt { kind, loc: Some(caller_loc(loc)) };
        self.blocks.last_mut().expect("the body block is never popped").push(stmt);
    }

    /// Declares a local initialised to `value` and returns it as an
    /// expression: `T name = value;`.
    #[track_caller]
    pub fn let_(&mut self, name: &str, value: impl Into<Ex>) -> Ex {
        self.var(name, value).get()
    }

    /// Declares a mutable local initialised to `value`.
    #[track_caller]
    pub fn var(&mut self, name: &str, value: impl Into<Ex>) -> Var {
        let loc = std::panic::Location::caller();
        let value = value.into().materialize();
        let var = self.declare(name, value.ty);
        let value = self.tree(value, loc);
        self.push(StmtKind::Assign { var: var.id, value }, loc);
        var
    }

    /// Declares a local without assigning it (validation checks that every
    /// path assigns it before it is read).
    pub fn var_uninit(&mut self, name: &str, ty: impl Into<Type>) -> Var {
        self.declare(name, ty.into())
    }

    /// `var = value;`
    #[track_caller]
    pub fn assign(&mut self, var: Var, value: impl Into<Ex>) {
        let loc = std::panic::Location::caller();
        let value = value.into().coerce_to(var.ty);
        let value = self.tree(value, loc);
        self.push(StmtKind::Assign { var: var.id, value }, loc);
    }

    /// `mem[index] = value;`
    #[track_caller]
    pub fn store(&mut self, place: Place, value: impl Into<Ex>) {
        let loc = std::panic::Location::caller();
        let value = value.into().coerce_to(place.mem.elem);
        let index = self.tree(place.index.materialize(), loc);
        let value = self.tree(value, loc);
        self.push(StmtKind::Store { mem: place.mem.mem, index, value }, loc);
    }

    /// `async_copy(dst, src, count, valid)`: starts copying `count`
    /// elements from device memory `src` to threadgroup memory `dst`, or
    /// zeros where `valid` is false; see [`StmtKind::AsyncCopy`] for when
    /// the copy is complete.
    #[track_caller]
    pub fn async_copy(&mut self, dst: Place, src: Place, count: u32, valid: impl Into<Ex>) {
        let loc = std::panic::Location::caller();
        let dst_index = self.tree(dst.index.materialize(), loc);
        let src_index = self.tree(src.index.materialize(), loc);
        let valid = self.tree(valid.into().coerce_to(Type::BOOL), loc);
        self.push(StmtKind::AsyncCopy { dst: dst.mem.mem, dst_index, src: src.mem.mem, src_index, count, valid }, loc);
    }

    /// `async_commit()`: closes this thread's group of asynchronous copies.
    #[track_caller]
    pub fn async_commit(&mut self) {
        self.push(StmtKind::AsyncCommit, std::panic::Location::caller());
    }

    /// `async_wait(pending)`: waits until at most `pending` of this
    /// thread's committed groups of copies are incomplete.
    #[track_caller]
    pub fn async_wait(&mut self, pending: u32) {
        self.push(StmtKind::AsyncWait { pending }, std::panic::Location::caller());
    }

    /// `tile_copy(barrier, dst, src, origin, (rows, cols))`: the threadgroup
    /// copies the `rows × cols` box of matrix `src` whose first element is
    /// `origin` (row, column; i32, zeros outside the matrix) to `dst`'s
    /// elements from its index on, row after row; complete at
    /// [`KernelBuilder::tile_wait`]. See [`crate::ir::TileCopy`] for the rules.
    #[track_caller]
    pub fn tile_copy(&mut self, barrier: impl Into<Ex>, dst: Place, src: TileSource, origin: [Ex; 2], (rows, cols): (u32, u32)) {
        let loc = std::panic::Location::caller();
        let barrier = self.tree(barrier.into().coerce_to(Type::U32), loc);
        let dst_index = self.tree(dst.index.materialize(), loc);
        let [extent_rows, extent_cols] = src.extents.map(|e| e.coerce_to(Type::U32));
        let extents = [self.tree(extent_rows, loc), self.tree(extent_cols, loc)];
        let pitch = self.tree(src.pitch.coerce_to(Type::U32), loc);
        let [row, col] = origin.map(|e| e.coerce_to(Type::I32));
        let origin = [self.tree(row, loc), self.tree(col, loc)];
        let copy = crate::ir::TileCopy { barrier, dst: dst.mem.mem, dst_index, src: src.mem.mem, extents, pitch, origin, rows, cols };
        self.push(StmtKind::TileCopy(Box::new(copy)), loc);
    }

    /// `tile_wait(barrier)`: waits for the tile copy last issued on
    /// `barrier`; see [`StmtKind::TileWait`].
    #[track_caller]
    pub fn tile_wait(&mut self, barrier: impl Into<Ex>) {
        let loc = std::panic::Location::caller();
        let barrier = self.tree(barrier.into().coerce_to(Type::U32), loc);
        self.push(StmtKind::TileWait { barrier }, loc);
    }

    /// `print(format, values...)`: this thread prints one line, `format`
    /// with each `{}` replaced by the next value; see [`StmtKind::Print`].
    /// Validation checks the format against the values.
    #[track_caller]
    pub fn print(&mut self, format: &str, values: &[Ex]) {
        let loc = std::panic::Location::caller();
        let args = values.iter().map(|v| self.tree(v.materialize(), loc)).collect();
        self.push(StmtKind::Print { format: format.to_string(), args }, loc);
    }

    /// `device_fence()`: see [`StmtKind::DeviceFence`].
    #[track_caller]
    pub fn device_fence(&mut self) {
        self.push(StmtKind::DeviceFence, std::panic::Location::caller());
    }

    /// `tex.fence()`: see [`StmtKind::TextureFence`].
    #[track_caller]
    pub fn texture_fence(&mut self, tex: Tex) {
        self.push(StmtKind::TextureFence { tex: tex.id }, std::panic::Location::caller());
    }

    /// `tex.write(value, coord)`: see [`StmtKind::TextureWrite`].
    #[track_caller]
    pub fn texture_write(&mut self, tex: Tex, value: impl Into<Ex>, coord: impl Into<Ex>) {
        let loc = std::panic::Location::caller();
        let value = self.tree(value.into().materialize(), loc);
        let coord = self.tree(coord.into().materialize(), loc);
        self.push(StmtKind::TextureWrite { tex: tex.id, value, coord }, loc);
    }

    /// `simdgroup_store(value, mem + offset, stride)` (or transposed): see
    /// [`StmtKind::MatrixStore`].
    #[track_caller]
    pub fn matrix_store(&mut self, value: impl Into<Ex>, mem: Mem, offset: impl Into<Ex>, stride: impl Into<Ex>, transpose: bool) {
        let loc = std::panic::Location::caller();
        let value = self.tree(value.into().materialize(), loc);
        let offset = self.tree(offset.into().coerce_to(Type::U32), loc);
        let stride = self.tree(stride.into().coerce_to(Type::U32), loc);
        self.push(StmtKind::MatrixStore { value, mem: mem.mem, offset, stride, transpose }, loc);
    }

    /// `atomic_fetch_<op>_explicit(&place, value, memory_order_relaxed)`,
    /// returning the previous value.
    #[track_caller]
    pub fn atomic_fetch(&mut self, op: AtomicOp, place: Place, value: impl Into<Ex>) -> Ex {
        let n = self.kernel.locals.len();
        let var = self.declare(&format!("old{n}"), place.mem.elem);
        self.atomic_stmt(op, place, value.into(), Some(var.id), std::panic::Location::caller());
        var.get()
    }

    /// An atomic read-modify-write whose previous value is not needed.
    #[track_caller]
    pub fn atomic(&mut self, op: AtomicOp, place: Place, value: impl Into<Ex>) {
        self.atomic_stmt(op, place, value.into(), None, std::panic::Location::caller());
    }

    fn atomic_stmt(&mut self, op: AtomicOp, place: Place, value: Ex, result: Option<VarId>, loc: &std::panic::Location<'_>) {
        let index = self.tree(place.index.materialize(), loc);
        let value = self.tree(value.coerce_to(place.mem.elem), loc);
        self.push(StmtKind::Atomic { op, mem: place.mem.mem, index, value, result }, loc);
    }

    /// Strong compare-and-exchange; returns the value seen before.
    #[track_caller]
    pub fn atomic_compare_exchange(&mut self, place: Place, expected: impl Into<Ex>, desired: impl Into<Ex>) -> Ex {
        let loc = std::panic::Location::caller();
        let n = self.kernel.locals.len();
        let var = self.declare(&format!("old{n}"), place.mem.elem);
        let index = self.tree(place.index.materialize(), loc);
        let expected = self.tree(expected.into().coerce_to(place.mem.elem), loc);
        let desired = self.tree(desired.into().coerce_to(place.mem.elem), loc);
        self.push(
            StmtKind::AtomicCompareExchange { mem: place.mem.mem, index, expected, desired, result: Some(var.id) },
            loc,
        );
        var.get()
    }

    fn nested(&mut self, body: impl FnOnce(&mut Self)) -> Block {
        self.blocks.push(vec![]);
        body(self);
        self.blocks.pop().expect("pushed above")
    }

    /// `if (cond) { then }`
    #[track_caller]
    pub fn if_(&mut self, cond: impl Into<Ex>, then: impl FnOnce(&mut Self)) {
        self.if_else(cond, then, |_| {})
    }

    /// `if (cond) { then } else { otherwise }`
    #[track_caller]
    pub fn if_else(&mut self, cond: impl Into<Ex>, then: impl FnOnce(&mut Self), otherwise: impl FnOnce(&mut Self)) {
        let loc = std::panic::Location::caller();
        let cond = self.tree(cond.into(), loc);
        let then_body = self.nested(then);
        let else_body = self.nested(otherwise);
        self.push(StmtKind::If { cond, then_body, else_body }, loc);
    }

    /// `for (T var = start; var < end; var += step) { body(var) }`; the loop
    /// variable takes the type of `start` (or `end` when `start` is a weak
    /// literal).
    #[track_caller]
    pub fn for_range(
        &mut self,
        name: &str,
        start: impl Into<Ex>,
        end: impl Into<Ex>,
        step: impl Into<Ex>,
        body: impl FnOnce(&mut Self, Ex),
    ) {
        let loc = std::panic::Location::caller();
        let (start, end) = Ex::unify(start.into(), end.into());
        let (start, end) = (start.materialize(), end.materialize());
        let step = step.into().coerce_to(start.ty);
        let var = self.declare(name, start.ty);
        let (start, end, step) = (self.tree(start, loc), self.tree(end, loc), self.tree(step, loc));
        let body = self.nested(|k| body(k, var.get()));
        self.push(StmtKind::For { var: var.id, start, end, step, body, unroll: false }, loc);
    }

    /// `#pragma unroll` `for (T var = start; var < end; var += step) { body(var) }`:
    /// a loop with constant bounds and step (Rust literals: `0u32`, `8u32`,
    /// `1u32`) unrolled at compile time, so a per-thread array indexed by
    /// `var` stays in registers. Validation refuses bounds known only at run
    /// time, and more than [`crate::limits::MAX_UNROLLED_TRIPS`] iterations.
    #[track_caller]
    pub fn for_unrolled(
        &mut self,
        name: &str,
        start: impl Into<Ex>,
        end: impl Into<Ex>,
        step: impl Into<Ex>,
        body: impl FnOnce(&mut Self, Ex),
    ) {
        // `for_range` is `track_caller` too: the statement keeps this call's line.
        self.for_range(name, start, end, step, body);
        if let Some(Stmt { kind: StmtKind::For { unroll, .. }, .. }) = self.blocks.last_mut().and_then(|b| b.last_mut()) {
            *unroll = true;
        }
    }

    /// `while (cond) { body }`; `cond` is re-evaluated before every iteration.
    #[track_caller]
    pub fn while_(&mut self, cond: impl Into<Ex>, body: impl FnOnce(&mut Self)) {
        let loc = std::panic::Location::caller();
        let cond = self.tree(cond.into(), loc);
        let body = self.nested(body);
        self.push(StmtKind::While { cond, body }, loc);
    }

    #[track_caller]
    pub fn break_(&mut self) {
        self.push(StmtKind::Break, std::panic::Location::caller());
    }

    #[track_caller]
    pub fn continue_(&mut self) {
        self.push(StmtKind::Continue, std::panic::Location::caller());
    }

    /// Early return: the calling threads leave the kernel.
    #[track_caller]
    pub fn return_(&mut self) {
        self.push(StmtKind::Return, std::panic::Location::caller());
    }

    /// `threadgroup_barrier(flags)`.
    #[track_caller]
    pub fn threadgroup_barrier(&mut self, flags: MemFlags) {
        self.push(StmtKind::Barrier { scope: BarrierScope::Threadgroup, flags }, std::panic::Location::caller());
    }

    /// `simdgroup_barrier(flags)`.
    #[track_caller]
    pub fn simdgroup_barrier(&mut self, flags: MemFlags) {
        self.push(StmtKind::Barrier { scope: BarrierScope::Simdgroup, flags }, std::panic::Location::caller());
    }

    /// The finished kernel (not yet validated: call [`crate::validate()`]).
    pub fn finish(mut self) -> Result<Kernel, BuildError> {
        if let Some(err) = self.errors.first() {
            return Err(err.clone());
        }
        let mut kernel = std::mem::replace(
            &mut self.kernel,
            Kernel::empty(""),
        );
        kernel.body = std::mem::take(&mut self.blocks[0]);
        Ok(kernel)
    }
}

/// A builtin as an expression (`uint3` or `uint`).
pub fn builtin(b: Builtin) -> Ex {
    Ex::new(Expr::Builtin(b), b.ty())
}

macro_rules! builtin_fns {
    ($($name:ident => $b:ident),* $(,)?) => {$(
        #[doc = concat!("The `", stringify!($name), "` attribute.")]
        pub fn $name() -> Ex {
            builtin(Builtin::$b)
        }
    )*};
}

builtin_fns! {
    thread_position_in_grid => ThreadPositionInGrid,
    thread_position_in_threadgroup => ThreadPositionInThreadgroup,
    threadgroup_position_in_grid => ThreadgroupPositionInGrid,
    threads_per_threadgroup => ThreadsPerThreadgroup,
    threads_per_grid => ThreadsPerGrid,
    threadgroups_per_grid => ThreadgroupsPerGrid,
    thread_index_in_threadgroup => ThreadIndexInThreadgroup,
    thread_index_in_simdgroup => ThreadIndexInSimdgroup,
    simdgroup_index_in_threadgroup => SimdgroupIndexInThreadgroup,
    simdgroups_per_threadgroup => SimdgroupsPerThreadgroup,
    threads_per_simdgroup => ThreadsPerSimdgroup,
}

/// Calls an intrinsic. Weak literal arguments take the type of the first
/// strong argument (the lane index of shuffles is `u32`).
pub fn call(func: Intrinsic, args: &[Ex]) -> Ex {
    call_with(func, Precision::Default, args)
}

/// Calls `precision`'s variant of an intrinsic (MSL's `fast::` or
/// `precise::` namespace; [`fast`] and [`precise`] spell it
/// `precise::sin(x)`).
pub fn call_with(func: Intrinsic, precision: Precision, args: &[Ex]) -> Ex {
    use Intrinsic::*;
    let lane_arg = matches!(func, SimdBroadcast | SimdShuffle | SimdShuffleUp | SimdShuffleDown | SimdShuffleXor);
    let anchor = args.iter().find(|a| !a.weak).map(|a| a.ty);
    let args: Vec<Ex> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match (lane_arg && i == 1, anchor) {
            (true, _) => a.coerce_to(Type::U32),
            (false, Some(ty)) if !(func == Select && i == 2) => a.coerce_to(ty),
            _ => a.materialize(),
        })
        .collect();
    let types: Vec<Type> = args.iter().map(|a| a.ty).collect();
    // An invalid call keeps its first argument's type; validation in
    // `finish` reports it with the location.
    let ty = crate::typing::call(func, &types).unwrap_or(types.first().copied().unwrap_or(Type::BOOL));
    Ex::new(Expr::Call { func, precision, args: args.iter().map(|a| a.tree_or_poison()).collect() }, ty)
}

macro_rules! intrinsic_fns {
    ($($name:ident($($arg:ident),*) => $f:ident),* $(,)?) => {$(
        #[doc = concat!("The MSL function of the same name (`", stringify!($f), "`).")]
        pub fn $name($($arg: impl Into<Ex>),*) -> Ex {
            call(Intrinsic::$f, &[$($arg.into()),*])
        }
    )*};
}

/// The functions of [`Intrinsic::WITH_PRECISION_VARIANTS`] in `$precision`'s
/// variant, for the `fast` and `precise` modules (the test
/// `precision_modules_follow_the_list` holds this list to the IR's).
macro_rules! with_precision_variants {
    ($precision:expr, $ns:literal) => {
        precision_fns! { $precision, $ns;
            exp(x) => Exp, exp2(x) => Exp2, log(x) => Log, log2(x) => Log2, sqrt(x) => Sqrt,
            rsqrt(x) => Rsqrt, sin(x) => Sin, cos(x) => Cos, tan(x) => Tan, asin(x) => Asin,
            acos(x) => Acos, atan(x) => Atan, atan2(y, x) => Atan2, sinh(x) => Sinh, cosh(x) => Cosh,
            tanh(x) => Tanh, asinh(x) => Asinh, acosh(x) => Acosh, atanh(x) => Atanh, pow(x, y) => Pow,
            floor(x) => Floor, ceil(x) => Ceil, round(x) => Round, trunc(x) => Trunc, rint(x) => Rint,
            copysign(x, y) => Copysign, fmod(x, y) => Fmod, abs(x) => Abs, min(a, b) => Min,
            max(a, b) => Max, clamp(x, lo, hi) => Clamp, saturate(x) => Saturate,
        }
    };
}

macro_rules! precision_fns {
    ($precision:expr, $ns:literal; $($name:ident($($arg:ident),*) => $f:ident),* $(,)?) => {
        /// The functions in this namespace, in [`Intrinsic::WITH_PRECISION_VARIANTS`]'s order.
        pub const FUNCTIONS: &[Intrinsic] = &[$(Intrinsic::$f),*];
        $(
            #[doc = concat!("MSL's `", $ns, "::", stringify!($name), "`.")]
            pub fn $name($($arg: impl Into<Ex>),*) -> Ex {
                super::call_with(Intrinsic::$f, $precision, &[$($arg.into()),*])
            }
        )*
    };
}

/// MSL's `fast::` variants (`fast::exp(x)`): lower precision allowed. See
/// [`Precision::Fast`].
pub mod fast {
    use super::Ex;
    use crate::ir::{Intrinsic, Precision};
    with_precision_variants!(Precision::Fast, "fast");
}

/// MSL's `precise::` variants (`precise::sin(x)`): MSL's precise bounds
/// whatever the fast-math setting. See [`Precision::Precise`].
pub mod precise {
    use super::Ex;
    use crate::ir::{Intrinsic, Precision};
    with_precision_variants!(Precision::Precise, "precise");
}

intrinsic_fns! {
    exp(x) => Exp, exp2(x) => Exp2, log(x) => Log, log2(x) => Log2, sqrt(x) => Sqrt,
    rsqrt(x) => Rsqrt, tanh(x) => Tanh, sin(x) => Sin, cos(x) => Cos, floor(x) => Floor,
    ceil(x) => Ceil, pow(x, y) => Pow, fma(a, b, c) => Fma,
    tan(x) => Tan, sinh(x) => Sinh, cosh(x) => Cosh, asin(x) => Asin, acos(x) => Acos,
    atan(x) => Atan, atan2(y, x) => Atan2, asinh(x) => Asinh, acosh(x) => Acosh, atanh(x) => Atanh,
    erf(x) => Erf, erfc(x) => Erfc, log1p(x) => Log1p, expm1(x) => Expm1, round(x) => Round,
    trunc(x) => Trunc, rint(x) => Rint, copysign(x, y) => Copysign, fmod(x, y) => Fmod,
    sign(x) => Sign, saturate(x) => Saturate, mix(x, y, a) => Mix, step(edge, x) => Step,
    smoothstep(edge0, edge1, x) => Smoothstep,
    isnan(x) => IsNan, isinf(x) => IsInf, isfinite(x) => IsFinite,
    abs(x) => Abs, min(a, b) => Min, max(a, b) => Max, clamp(x, lo, hi) => Clamp,
    select(if_false, if_true, cond) => Select,
    popcount(x) => Popcount, clz(x) => Clz, ctz(x) => Ctz,
    simd_sum(x) => SimdSum, simd_product(x) => SimdProduct, simd_max(x) => SimdMax,
    simd_min(x) => SimdMin, simd_and(x) => SimdAnd, simd_or(x) => SimdOr, simd_xor(x) => SimdXor,
    simd_broadcast(x, lane) => SimdBroadcast, simd_broadcast_first(x) => SimdBroadcastFirst,
    simd_shuffle(x, lane) => SimdShuffle, simd_shuffle_up(x, delta) => SimdShuffleUp,
    simd_shuffle_down(x, delta) => SimdShuffleDown, simd_shuffle_xor(x, mask) => SimdShuffleXor,
    simd_prefix_inclusive_sum(x) => SimdPrefixInclusiveSum,
    simd_prefix_exclusive_sum(x) => SimdPrefixExclusiveSum,
    simd_all(x) => SimdAll, simd_any(x) => SimdAny, simd_ballot(x) => SimdBallot,
    simd_is_first() => SimdIsFirst,
}

/// `T(components...)`: a vector from `width` scalars, or a splat from one.
pub fn vector(ty: Type, components: &[Ex]) -> Ex {
    let comps = components.iter().map(|c| c.coerce_to(Type::scalar(ty.elem())).tree_or_poison()).collect();
    Ex::new(Expr::Vector { ty, components: comps }, ty)
}

/// A literal of scalar type `ty` from a number (`lit(Scalar::F16, 0.5)`).
pub fn lit(ty: Scalar, value: f64) -> Ex {
    let value = if ty == Scalar::Bool {
        LiteralValue::Bool(value != 0.0)
    } else if ty.is_float() {
        LiteralValue::Float(value)
    } else if ty.is_signed_int() {
        LiteralValue::Int(value as i64)
    } else {
        LiteralValue::UInt(value as u64)
    };
    Ex::literal(Literal { ty, value })
}

/// `make_filled_simdgroup_matrix<T, R, C>(value)`: every element `value`.
pub fn matrix_fill(ty: MatrixType, value: impl Into<Ex>) -> Ex {
    let value = value.into().coerce_to(Type::scalar(ty.elem()));
    Ex::new(Expr::MatrixFill { ty, value: Box::new(value.tree_or_poison()), diagonal: false }, Type::Matrix(ty))
}

/// The diagonal matrix with `value` on its diagonal (MSL's diagonal constructor).
pub fn matrix_diagonal(ty: MatrixType, value: impl Into<Ex>) -> Ex {
    let value = value.into().coerce_to(Type::scalar(ty.elem()));
    Ex::new(Expr::MatrixFill { ty, value: Box::new(value.tree_or_poison()), diagonal: true }, Type::Matrix(ty))
}

/// `simdgroup_load` of a `ty` tile whose element (r, c) is
/// `mem[offset + r·stride + c]` (with `transpose`, `mem[offset + c·stride + r]`).
pub fn matrix_load(ty: MatrixType, mem: Mem, offset: impl Into<Ex>, stride: impl Into<Ex>, transpose: bool) -> Ex {
    let offset = Box::new(offset.into().coerce_to(Type::U32).tree_or_poison());
    let stride = Box::new(stride.into().coerce_to(Type::U32).tree_or_poison());
    Ex::new(Expr::MatrixLoad { ty, mem: mem.mem, offset, stride, transpose }, Type::Matrix(ty))
}

/// A `ty` tile of 4-bit `code` weights decoded on load
/// ([`Expr::MatrixLoadQuantized`]): element (r, c) is the value of the
/// nibble `layout.locate(r, c)` names (in seed 002's layout nibble `r % 8`
/// of `words[offset + (r / 8)·stride + c]`) times `scales[scale_offset + c]`,
/// rounded once to f16.
#[allow(clippy::too_many_arguments)]
pub fn matrix_load_quantized(
    ty: MatrixType,
    code: QuantCode,
    layout: QuantLayout,
    words: Mem,
    offset: impl Into<Ex>,
    stride: impl Into<Ex>,
    scales: Mem,
    scale_offset: impl Into<Ex>,
) -> Ex {
    let index = |e: Ex| Box::new(e.coerce_to(Type::U32).tree_or_poison());
    let (offset, stride, scale_offset) = (index(offset.into()), index(stride.into()), index(scale_offset.into()));
    Ex::new(Expr::MatrixLoadQuantized { ty, code, layout, words: words.mem, offset, stride, scales: scales.mem, scale_offset }, Type::Matrix(ty))
}

/// `simdgroup_multiply(a, b)`.
pub fn matrix_multiply(a: impl Into<Ex>, b: impl Into<Ex>) -> Ex {
    let (a, b) = (a.into(), b.into());
    let ty = crate::typing::matrix_multiply(a.ty, b.ty, None).unwrap_or(a.ty);
    Ex::new(Expr::MatrixMultiply { a: Box::new(a.tree_or_poison()), b: Box::new(b.tree_or_poison()), acc: None }, ty)
}

/// `simdgroup_multiply_accumulate(a, b, acc)`: `a·b + acc`.
pub fn matrix_multiply_accumulate(a: impl Into<Ex>, b: impl Into<Ex>, acc: impl Into<Ex>) -> Ex {
    let (a, b, acc) = (a.into(), b.into(), acc.into());
    let ty = acc.ty;
    let (a, b, acc) = (Box::new(a.tree_or_poison()), Box::new(b.tree_or_poison()), Box::new(acc.tree_or_poison()));
    Ex::new(Expr::MatrixMultiply { a, b, acc: Some(acc) }, ty)
}

/// Element `index` of the calling lane's share of a tile (`thread_elements()[index]`).
pub fn thread_element(matrix: impl Into<Ex>, index: u8) -> Ex {
    let m = matrix.into();
    let ty = crate::typing::matrix_element(m.ty, index).unwrap_or(m.ty);
    Ex::new(Expr::MatrixElement { matrix: Box::new(m.tree_or_poison()), index }, ty)
}

/// The row (or, with `column`, the column) of element `index` of the calling
/// lane's share of a `ty` tile.
pub fn matrix_coord(ty: MatrixType, index: u8, column: bool) -> Ex {
    Ex::new(Expr::MatrixCoord { ty, index, column }, Type::U32)
}

/// `index`, checked as subscript `dim` of a multi-dimensional access to
/// `mem` whose dimension `dim` holds `size` elements ([`Expr::DimCheck`]);
/// [`Mem::at_dims`] builds whole accesses from it.
pub fn dim_check(mem: Mem, dim: u8, index: impl Into<Ex>, size: impl Into<Ex>) -> Ex {
    let (index, size) = (index.into(), size.into());
    let expr = Expr::DimCheck { mem: mem.mem, dim, index: Box::new(index.tree_or_poison()), size: Box::new(size.tree_or_poison()) };
    Ex::new(expr, index.ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_modules_follow_the_list() {
        assert_eq!(fast::FUNCTIONS, Intrinsic::WITH_PRECISION_VARIANTS);
        assert_eq!(precise::FUNCTIONS, Intrinsic::WITH_PRECISION_VARIANTS);
        let x = Ex::from(1.0f32);
        match precise::atan2(x, x).tree_or_poison() {
            Expr::Call { func: Intrinsic::Atan2, precision: Precision::Precise, args } => assert_eq!(args.len(), 2),
            other => panic!("{other:?}"),
        }
    }
}
