//! Facts the writer needs before it prints a statement: where each local is
//! declared, and which loop bounds must be hoisted.
//!
//! A local is declared in the innermost block that holds every reference to
//! it, just before the first statement of that block that refers to it. When
//! that statement is the local's assignment (`Assign`, an atomic's result)
//! the declaration is that statement (`float sum = 0.0f;`); when it is a
//! `for` over the local and no reference lies outside the loop, the `for`
//! declares it; otherwise an uninitialised declaration precedes the
//! statement. Validation guarantees definite assignment, so a local declared
//! inside a loop body never needs a value from an earlier iteration.

use enigma_ir::{Block, Branch, Expr, Kernel, Stmt, StmtKind, StmtPath, VarId};
use std::collections::{BTreeSet, HashMap, HashSet};

#[derive(Debug, Default)]
pub(crate) struct DeclPlan {
    /// Locals declared, uninitialised, just before the statement at a path.
    pub before: HashMap<StmtPath, Vec<VarId>>,
    /// Statements that declare the local they assign (or the `for` variable).
    pub declares: HashSet<StmtPath>,
}

pub(crate) fn plan_declarations(kernel: &Kernel) -> DeclPlan {
    let mut refs: Vec<Vec<StmtPath>> = vec![vec![]; kernel.locals.len()];
    let mut path = StmtPath::default();
    collect_block(&kernel.body, Branch::Body, &mut path, &mut refs);

    let mut plan = DeclPlan::default();
    for (var, paths) in refs.iter().enumerate() {
        let var = VarId(var as u32);
        let Some(first) = paths.first() else { continue };
        let common = paths[1..].iter().fold(first.clone(), |c, p| merge(&c, p));
        if common.0.is_empty() {
            continue; // unreachable: every path has at least one level
        }
        let stmt = stmt_at(&kernel.body, &common);
        let declares = match stmt.map(|s| &s.kind) {
            Some(StmtKind::Assign { var: v, .. }) => *v == var,
            Some(StmtKind::Atomic { result: Some(v), .. })
            | Some(StmtKind::AtomicCompareExchange { result: Some(v), .. }) => *v == var,
            Some(StmtKind::For { var: v, .. }) => *v == var && paths.iter().all(|p| p.0.starts_with(&common.0)),
            _ => false,
        };
        if declares {
            plan.declares.insert(common);
        } else {
            plan.before.entry(common).or_default().push(var);
        }
    }
    plan
}

/// The path of the first statement, in the innermost block holding both,
/// that contains `a` or `b`.
fn merge(a: &StmtPath, b: &StmtPath) -> StmtPath {
    let mut out = vec![];
    for (x, y) in a.0.iter().zip(&b.0) {
        if x.0 != y.0 {
            break;
        }
        if x.1 != y.1 {
            out.push((x.0, x.1.min(y.1)));
            break;
        }
        out.push(*x);
    }
    StmtPath(out)
}

/// The statement at `path`.
pub(crate) fn stmt_at<'a>(body: &'a Block, path: &StmtPath) -> Option<&'a Stmt> {
    let mut block = body;
    let mut stmt: Option<&'a Stmt> = None;
    for (i, (branch, index)) in path.0.iter().enumerate() {
        if i > 0 {
            block = match (&stmt?.kind, branch) {
                (StmtKind::If { then_body, .. }, Branch::Then) => then_body,
                (StmtKind::If { else_body, .. }, Branch::Else) => else_body,
                (StmtKind::For { body, .. } | StmtKind::While { body, .. }, Branch::Loop) => body,
                _ => return None,
            };
        }
        stmt = Some(block.get(*index as usize)?);
    }
    stmt
}

fn collect_block(block: &Block, branch: Branch, path: &mut StmtPath, refs: &mut [Vec<StmtPath>]) {
    for (i, stmt) in block.iter().enumerate() {
        path.0.push((branch, i as u32));
        let mut add = |v: VarId, path: &StmtPath| {
            if let Some(list) = refs.get_mut(v.0 as usize) {
                if list.last() != Some(path) {
                    list.push(path.clone());
                }
            }
        };
        let mut exprs: Vec<&Expr> = vec![];
        match &stmt.kind {
            StmtKind::Assign { var, value } => {
                add(*var, path);
                exprs.push(value);
            }
            StmtKind::Store { index, value, .. } => exprs.extend([index, value]),
            StmtKind::Atomic { index, value, result, .. } => {
                exprs.extend([index, value]);
                if let Some(v) = result {
                    add(*v, path);
                }
            }
            StmtKind::AtomicCompareExchange { index, expected, desired, result, .. } => {
                exprs.extend([index, expected, desired]);
                if let Some(v) = result {
                    add(*v, path);
                }
            }
            StmtKind::If { cond, .. } | StmtKind::While { cond, .. } => exprs.push(cond),
            StmtKind::For { var, start, end, step, .. } => {
                add(*var, path);
                exprs.extend([start, end, step]);
            }
            StmtKind::Break | StmtKind::Continue | StmtKind::Return | StmtKind::Barrier { .. } => {}
        }
        for e in exprs {
            visit_vars(e, &mut |v| add(v, path));
        }
        match &stmt.kind {
            StmtKind::If { then_body, else_body, .. } => {
                collect_block(then_body, Branch::Then, path, refs);
                collect_block(else_body, Branch::Else, path, refs);
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => collect_block(body, Branch::Loop, path, refs),
            _ => {}
        }
        path.0.pop();
    }
}

/// Calls `f` for every local an expression reads.
pub(crate) fn visit_vars(e: &Expr, f: &mut impl FnMut(VarId)) {
    match e {
        Expr::Var(v) => f(*v),
        Expr::Literal(_) | Expr::Param(_) | Expr::Spec(_) | Expr::Builtin(_) => {}
        Expr::Load { index, .. } => visit_vars(index, f),
        Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Extract { arg, .. } => {
            visit_vars(arg, f)
        }
        Expr::Binary { lhs, rhs, .. } => {
            visit_vars(lhs, f);
            visit_vars(rhs, f);
        }
        Expr::Call { args: items, .. } | Expr::Vector { components: items, .. } => {
            for a in items {
                visit_vars(a, f);
            }
        }
    }
}

/// Locals a block assigns, at any depth.
pub(crate) fn assigned_in(block: &Block) -> BTreeSet<VarId> {
    fn go(block: &Block, out: &mut BTreeSet<VarId>) {
        for stmt in block {
            match &stmt.kind {
                StmtKind::Assign { var, .. } => {
                    out.insert(*var);
                }
                StmtKind::Atomic { result: Some(var), .. } | StmtKind::AtomicCompareExchange { result: Some(var), .. } => {
                    out.insert(*var);
                }
                StmtKind::If { then_body, else_body, .. } => {
                    go(then_body, out);
                    go(else_body, out);
                }
                StmtKind::For { var, body, .. } => {
                    out.insert(*var);
                    go(body, out);
                }
                StmtKind::While { body, .. } => go(body, out),
                _ => {}
            }
        }
    }
    let mut out = BTreeSet::new();
    go(block, &mut out);
    out
}

/// True when re-evaluating `e` in every iteration of a loop that assigns
/// `assigned` gives the value it had before the first iteration: it reads no
/// memory, calls no SIMD-group function, and reads no local the loop assigns.
pub(crate) fn is_loop_invariant(e: &Expr, assigned: &BTreeSet<VarId>) -> bool {
    match e {
        Expr::Literal(_) | Expr::Param(_) | Expr::Spec(_) | Expr::Builtin(_) => true,
        Expr::Var(v) => !assigned.contains(v),
        Expr::Load { .. } => false,
        Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Extract { arg, .. } => {
            is_loop_invariant(arg, assigned)
        }
        Expr::Binary { lhs, rhs, .. } => is_loop_invariant(lhs, assigned) && is_loop_invariant(rhs, assigned),
        Expr::Call { func, args } => !func.is_simd() && args.iter().all(|a| is_loop_invariant(a, assigned)),
        Expr::Vector { components, .. } => components.iter().all(|c| is_loop_invariant(c, assigned)),
    }
}

/// True when an expression calls a SIMD-group function (whose result depends
/// on which lanes evaluate it, so it must not sit where C++ may skip it).
pub(crate) fn calls_simd(e: &Expr) -> bool {
    match e {
        Expr::Literal(_) | Expr::Param(_) | Expr::Spec(_) | Expr::Builtin(_) | Expr::Var(_) => false,
        Expr::Load { index, .. } => calls_simd(index),
        Expr::Unary { arg, .. } | Expr::Cast { arg, .. } | Expr::Bitcast { arg, .. } | Expr::Extract { arg, .. } => {
            calls_simd(arg)
        }
        Expr::Binary { lhs, rhs, .. } => calls_simd(lhs) || calls_simd(rhs),
        Expr::Call { func, args } => func.is_simd() || args.iter().any(calls_simd),
        Expr::Vector { components, .. } => components.iter().any(calls_simd),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::builder::*;
    use enigma_ir::{Access, Type};

    #[test]
    fn declarations_go_where_a_person_would_put_them() {
        let mut k = KernelBuilder::new("k");
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let tid = k.let_("tid", thread_position_in_grid().x()); // body[0]: declares
        let acc = k.var_uninit("acc", Type::F32);
        k.if_else(tid.lt(4u32), |k| k.assign(acc, 1.0f32), |k| k.assign(acc, 2.0f32)); // body[1]
        k.for_range("i", 0u32, 4u32, 1u32, |k, i| k.assign(acc, acc + i.cast(Type::F32))); // body[2]
        k.store(out.at(tid), acc);
        let kernel = k.finish().unwrap();
        let plan = plan_declarations(&kernel);
        let at = |i: u32| StmtPath(vec![(Branch::Body, i)]);
        assert!(plan.declares.contains(&at(0)));
        assert_eq!(plan.before.get(&at(1)), Some(&vec![VarId(1)]));
        assert!(plan.declares.contains(&at(2)), "the loop declares its variable");
    }
}
