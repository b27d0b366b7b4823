//! The one walker over the IR: what each expression and statement contains,
//! written down once, so that an analysis is a closure over nodes rather than
//! another hand-written recursion that must learn every new construct.
//!
//! * [`Expr::children`] — an expression's direct operands, in evaluation order;
//!   [`Expr::walk`] and [`Expr::any`] visit a whole tree (pre-order).
//! * [`StmtKind::exprs`] — the expressions a statement evaluates itself, in
//!   evaluation order; [`StmtKind::blocks`] — its nested blocks, each with its
//!   [`Branch`]; [`StmtKind::assigned`] — the local it writes, if any.
//! * [`walk_block`] — every statement of a block at any depth with its
//!   [`StmtPath`]; [`Kernel::walk_stmts`] is this over the kernel body.
//! * [`assigned_in`] — the locals a block writes at any depth.
//!
//! Adding a construct means adding its arm to these three `match`es; every
//! analysis written on them follows.

use crate::ir::*;
use std::collections::BTreeSet;

impl Expr {
    /// The direct operands, in evaluation order.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Literal(_) | Expr::Param(_) | Expr::Spec(_) | Expr::Var(_) | Expr::Builtin(_) => vec![],
            Expr::Load { index, .. } => vec![index],
            Expr::DimCheck { index, size, .. } => vec![index, size],
            Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Extract { arg, .. } => vec![arg],
            Expr::Binary { lhs, rhs, .. } => vec![lhs, rhs],
            Expr::Call { args: items, .. } | Expr::Vector { components: items, .. } => items.iter().collect(),
            Expr::MatrixFill { value, .. } => vec![value],
            Expr::MatrixLoad { offset, stride, .. } => vec![offset, stride],
            Expr::MatrixLoadQuantized { offset, stride, scale_offset, .. } => vec![offset, stride, scale_offset],
            Expr::MatrixMultiply { a, b, acc } => [Some(&**a), Some(&**b), acc.as_deref()].into_iter().flatten().collect(),
            Expr::MatrixElement { matrix, .. } => vec![matrix],
            Expr::MatrixCoord { .. } | Expr::TextureSize { .. } => vec![],
            Expr::TextureRead { coord, .. } => vec![coord],
            Expr::TextureSample { uv, .. } => vec![uv],
            Expr::CooperativeCapacity { .. } => vec![],
            Expr::CooperativeValid { index, .. } | Expr::CooperativeElement { index, .. } | Expr::CooperativeCoord { index, .. } => vec![index],
        }
    }

    /// Calls `f` on this expression and every sub-expression, parents first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        for c in self.children() {
            c.walk(f);
        }
    }

    /// True when `pred` holds for this expression or any sub-expression.
    pub fn any(&self, pred: &mut impl FnMut(&Expr) -> bool) -> bool {
        pred(self) || self.children().into_iter().any(|c| c.any(pred))
    }

    /// True when `pred` holds for this expression and every sub-expression.
    pub fn all(&self, pred: &mut impl FnMut(&Expr) -> bool) -> bool {
        !self.any(&mut |e| !pred(e))
    }
}

impl StmtKind {
    /// The expressions the statement evaluates itself (not those of nested
    /// blocks), in evaluation order.
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            StmtKind::Assign { value, .. } => vec![value],
            StmtKind::Store { index, value, .. } | StmtKind::Atomic { index, value, .. } => vec![index, value],
            StmtKind::AtomicCompareExchange { index, expected, desired, .. } => vec![index, expected, desired],
            StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => vec![cond],
            StmtKind::For { start, end, step, .. } => vec![start, end, step],
            StmtKind::MatrixStore { value, offset, stride, .. } => vec![value, offset, stride],
            StmtKind::TextureWrite { value, coord, .. } => vec![value, coord],
            StmtKind::AsyncCopy { dst_index, src_index, valid, .. } => vec![dst_index, src_index, valid],
            StmtKind::Matmul2d { left, right, .. } => {
                let mut v: Vec<&Expr> = match left {
                    crate::ir::Matmul2dLeft::Tensor(view) => view.exprs().to_vec(),
                    crate::ir::Matmul2dLeft::Cooperative(_) => vec![],
                };
                v.extend(right.exprs());
                v
            }
            StmtKind::CooperativeLoad { src: view, .. } | StmtKind::CooperativeStore { dst: view, .. } => view.exprs().to_vec(),
            StmtKind::CooperativeSet { index, value, .. } => vec![index, value],
            StmtKind::CooperativeDequantize { offset, stride, scale_offset, scale_stride, group_shift, .. } => vec![offset, stride, scale_offset, scale_stride, group_shift],
            StmtKind::Print { args, .. } => args.iter().collect(),
            StmtKind::TileCopy(copy) => copy.exprs().to_vec(),
            StmtKind::TileWait { barrier } => vec![barrier],
            StmtKind::CooperativeReduce { .. }
            | StmtKind::CooperativeCombine { .. }
            | StmtKind::Break
            | StmtKind::Continue
            | StmtKind::Return
            | StmtKind::Barrier { .. }
            | StmtKind::TextureFence { .. }
            | StmtKind::DeviceFence
            | StmtKind::AsyncCommit
            | StmtKind::AsyncWait { .. } => vec![],
        }
    }

    /// The nested blocks, each with the branch its statements' paths use.
    pub fn blocks(&self) -> Vec<(Branch, &Block)> {
        match self {
            StmtKind::If { then_body, else_body, .. } => vec![(Branch::Then, then_body), (Branch::Else, else_body)],
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => vec![(Branch::Loop, body)],
            _ => vec![],
        }
    }

    /// The local the statement itself writes: an assignment's target, a loop
    /// variable, an atomic's result.
    pub fn assigned(&self) -> Option<VarId> {
        match self {
            StmtKind::Assign { var, .. } | StmtKind::For { var, .. } => Some(*var),
            StmtKind::Atomic { result, .. } | StmtKind::AtomicCompareExchange { result, .. } => *result,
            _ => None,
        }
    }
}

/// Calls `visit` on every statement of `block` at any depth, parents before
/// their nested blocks, with its path (`body[2].loop[0]`); `path` is the
/// path of the block's parent and `branch` the block's own.
pub fn walk_block<'a>(block: &'a Block, branch: Branch, path: &mut StmtPath, visit: &mut impl FnMut(&StmtPath, &'a Stmt)) {
    for (i, stmt) in block.iter().enumerate() {
        path.0.push((branch, i as u32));
        visit(path, stmt);
        for (branch, body) in stmt.kind.blocks() {
            walk_block(body, branch, path, visit);
        }
        path.0.pop();
    }
}

/// The locals `block` writes, at any depth.
pub fn assigned_in(block: &Block) -> BTreeSet<VarId> {
    let mut out = BTreeSet::new();
    walk_block(block, Branch::Body, &mut StmtPath::default(), &mut |_, stmt| {
        out.extend(stmt.kind.assigned());
    });
    out
}

impl Kernel {
    /// Calls `visit` on every statement of the body at any depth, with its path.
    pub fn walk_stmts<'a>(&'a self, mut visit: impl FnMut(&StmtPath, &'a Stmt)) {
        walk_block(&self.body, Branch::Body, &mut StmtPath::default(), &mut visit)
    }

    /// Calls `visit` on every expression of the body (each tree and all its
    /// sub-expressions).
    pub fn walk_exprs<'a>(&'a self, mut visit: impl FnMut(&'a Expr)) {
        self.walk_stmts(|_, stmt| {
            for e in stmt.kind.exprs() {
                e.walk(&mut visit);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::*;
    use crate::{Access, Type};

    #[test]
    fn walks_reach_every_statement_and_expression_once() {
        let mut k = KernelBuilder::new("k");
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x());
        let acc = k.var("acc", 0.0f32);
        k.for_range("i", 0u32, 4u32, 1u32, |k, i| {
            k.if_else(i.lt(tid), |k| k.assign(acc, acc + 1.0f32), |k| k.assign(acc, acc - 1.0f32))
        });
        k.store(out.at(tid), acc);
        let kernel = k.finish().unwrap();
        let mut paths = vec![];
        kernel.walk_stmts(|p, _| paths.push(p.to_string()));
        assert_eq!(
            paths,
            ["body[0]", "body[1]", "body[2]", "body[2].loop[0]", "body[2].loop[0].then[0]", "body[2].loop[0].else[0]", "body[3]"]
        );
        let mut builtins = 0;
        kernel.walk_exprs(|e| builtins += matches!(e, Expr::Builtin(_)) as u32);
        assert_eq!(builtins, 1);
        let loop_body = match &kernel.body[2].kind {
            StmtKind::For { body, .. } => body,
            other => panic!("expected the loop, got {other:?}"),
        };
        assert_eq!(assigned_in(loop_body), BTreeSet::from([VarId(1)]));
        assert_eq!(assigned_in(&kernel.body).len(), 3, "tid, acc and the loop variable");
    }

    #[test]
    fn an_async_copy_evaluates_its_indices_and_condition() {
        let mut k = KernelBuilder::new("k");
        let src = k.buffer("src", Type::F32, Access::Read);
        let n = k.value("n", Type::U32);
        let stage = k.threadgroup_array("stage", Type::F32, 64);
        let lid = k.let_("lid", thread_index_in_threadgroup());
        k.async_copy(stage.at(lid), src.at(lid + 1u32), 1, lid.lt(n));
        k.async_commit();
        k.async_wait(0);
        let kernel = k.finish().unwrap();
        let exprs = kernel.body[1].kind.exprs();
        assert_eq!(exprs.len(), 3, "destination index, source index, valid: {exprs:?}");
        assert!(matches!(exprs[2], Expr::Binary { op: crate::BinaryOp::Lt, .. }), "{exprs:?}");
        assert!(kernel.body[2].kind.exprs().is_empty() && kernel.body[3].kind.exprs().is_empty());
        assert!(kernel.body[1..].iter().all(|s| s.kind.blocks().is_empty() && s.kind.assigned().is_none()));
    }

    #[test]
    fn a_tile_copy_evaluates_its_barrier_index_extents_pitch_and_origin() {
        let mut k = KernelBuilder::new("k");
        let src = k.buffer("src", Type::U32, Access::Read);
        let rows = k.value("rows", Type::U32);
        let stage = k.threadgroup_array("stage", Type::U32, 256);
        let matrix = TileSource { mem: src, extents: [rows, 16u32.into()], pitch: Ex::from(16u32) };
        k.tile_copy(1u32, stage.at(128u32), matrix, [Ex::from(2i32), Ex::from(0i32)], (8, 16));
        k.tile_wait(1u32);
        let kernel = k.finish().unwrap();
        let exprs = kernel.body[0].kind.exprs();
        assert_eq!(exprs.len(), 7, "barrier, destination index, two extents, pitch, two origins: {exprs:?}");
        assert!(matches!(exprs[2], Expr::Param(_)), "the row count is the parameter: {exprs:?}");
        assert_eq!(kernel.body[1].kind.exprs().len(), 1, "the wait's barrier");
        assert!(kernel.body.iter().all(|s| s.kind.blocks().is_empty() && s.kind.assigned().is_none()));
    }

    #[test]
    fn a_checked_subscript_has_its_index_and_size_as_children() {
        let mut k = KernelBuilder::new("k");
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let n = k.value("n", Type::U32);
        let checked = dim_check(out, 1, thread_position_in_grid().x(), n);
        k.store(out.at(checked), 1u32);
        let kernel = k.finish().unwrap();
        let StmtKind::Store { index, .. } = &kernel.body[0].kind else { panic!("{:?}", kernel.body[0]) };
        let children = index.children();
        assert!(matches!(index, Expr::DimCheck { dim: 1, .. }), "{index:?}");
        assert!(matches!(children[..], [Expr::Extract { .. }, Expr::Param(ParamId(1))]), "{children:?}");
    }

    #[test]
    fn a_quantized_load_has_its_three_indices_as_children() {
        use crate::{MatrixType, QuantCode, Scalar};
        let mut k = KernelBuilder::new("k");
        let words = k.buffer("words", Type::U32, Access::Read);
        let scales = k.buffer("scales", Type::scalar(Scalar::F16), Access::Read);
        let out = k.buffer("out", Type::scalar(Scalar::F16), Access::ReadWrite);
        let n = k.value("n", Type::U32);
        let ty = MatrixType::new(Scalar::F16, 8, 8);
        k.matrix_store(matrix_load_quantized(ty, QuantCode::Int4, crate::QuantLayout::Rows, words, n * 2u32, n, scales, 3u32), out, 0u32, 8u32, false);
        let kernel = k.finish().unwrap();
        let StmtKind::MatrixStore { value, .. } = &kernel.body[0].kind else { panic!("{:?}", kernel.body[0]) };
        let children = value.children();
        assert!(
            matches!(children[..], [Expr::Binary { op: crate::BinaryOp::Mul, .. }, Expr::Param(ParamId(3)), Expr::Literal(_)]),
            "offset, stride, scale offset: {children:?}"
        );
    }

    #[test]
    fn texture_operations_expose_their_operands() {
        let mut k = KernelBuilder::new("k");
        let t = k.texture2d("t", crate::Scalar::F32, crate::TextureAccess::ReadWrite);
        let c = k.let_("c", vector(Type::vector(crate::Scalar::U32, 2), &[t.get_width(), t.get_height()]));
        k.texture_write(t, t.read(c), c);
        let kernel = k.finish().unwrap();
        let write = &kernel.body[1].kind;
        let operands = write.exprs();
        assert!(matches!(operands[..], [Expr::TextureRead { .. }, Expr::Var(_)]), "{operands:?}");
        assert!(matches!(operands[0].children()[..], [Expr::Var(_)]));
        let mut sizes = 0;
        kernel.walk_exprs(|e| sizes += matches!(e, Expr::TextureSize { .. }) as u32);
        assert_eq!(sizes, 2);
    }

    #[test]
    fn a_sample_exposes_its_coordinate_and_a_fence_nothing() {
        use crate::{Sampler, SamplerAddress, SamplerCoord, SamplerFilter};
        let mut k = KernelBuilder::new("k");
        let t = k.texture2d("t", crate::Scalar::F32, crate::TextureAccess::Sample);
        let rw = k.texture2d("rw", crate::Scalar::F32, crate::TextureAccess::ReadWrite);
        let uv = k.let_("uv", vector(Type::vector(crate::Scalar::F32, 2), &[0.5f32.into()]));
        let s = Sampler { coord: SamplerCoord::Normalized, filter: SamplerFilter::Linear, address: SamplerAddress::Repeat };
        let _v = k.let_("v", t.sample(s, uv));
        k.texture_fence(rw);
        let kernel = k.finish().unwrap();
        let StmtKind::Assign { value, .. } = &kernel.body[1].kind else { panic!("{:?}", kernel.body[1]) };
        assert!(matches!(value, Expr::TextureSample { sampler, .. } if *sampler == s), "{value:?}");
        assert!(matches!(value.children()[..], [Expr::Var(_)]));
        assert!(kernel.body[2].kind.exprs().is_empty() && kernel.body[2].kind.blocks().is_empty());
    }

    #[test]
    fn cooperative_operations_expose_their_view_values() {
        use crate::cooperative::{CoopId, ExecutionScope, Matmul2dDescriptor};
        use crate::ir::{Matmul2dLeft, TensorView};
        let n = |v: u32| Expr::Literal(Literal::u32(v));
        let view = |base: u32| TensorView { mem: Memory::Buffer(ParamId(0)), offset: n(base), extents: [n(base + 1), n(base + 2)], strides: [n(base + 3), n(base + 4)] };
        let run = StmtKind::Matmul2d {
            desc: Matmul2dDescriptor::new(8, 8, None),
            scope: ExecutionScope::Simdgroup,
            left: Matmul2dLeft::Tensor(Box::new(view(0))),
            right: Box::new(view(10)),
            dest: CoopId(0),
            release: Default::default(),
        };
        assert_eq!(run.exprs(), [0, 1, 2, 3, 4, 10, 11, 12, 13, 14].map(n).iter().collect::<Vec<_>>());
        let from_accumulator = StmtKind::Matmul2d {
            desc: Matmul2dDescriptor::new(8, 8, Some(8)),
            scope: ExecutionScope::Simdgroup,
            left: Matmul2dLeft::Cooperative(CoopId(1)),
            right: Box::new(view(10)),
            dest: CoopId(0),
            release: Default::default(),
        };
        assert_eq!(from_accumulator.exprs().len(), 5);
        let slot = Expr::CooperativeCoord { tensor: CoopId(0), index: Box::new(n(3)), dim: 1 };
        assert_eq!(slot.children(), vec![&n(3)]);
        assert_eq!(StmtKind::CooperativeSet { tensor: CoopId(0), index: n(1), value: n(2) }.exprs(), vec![&n(1), &n(2)]);
        let dequantize = StmtKind::CooperativeDequantize {
            tensor: CoopId(0),
            code: crate::QuantCode::Int4,
            layout: crate::QuantLayout::Rows,
            words: crate::Memory::Buffer(crate::ParamId(0)),
            offset: n(1),
            stride: n(2),
            scales: crate::Memory::Buffer(crate::ParamId(1)),
            scale_offset: n(3),
            scale_stride: n(4),
            group_shift: n(5),
            biases: None,
        };
        assert_eq!(dequantize.exprs(), vec![&n(1), &n(2), &n(3), &n(4), &n(5)]);
    }
}
