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

pub(crate) use enigma_ir::visit::assigned_in;

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
    enigma_ir::visit::walk_block(&kernel.body, Branch::Body, &mut path, &mut |path, stmt| {
        let mut add = |v: VarId| {
            if let Some(list) = refs.get_mut(v.0 as usize) {
                if list.last() != Some(path) {
                    list.push(path.clone());
                }
            }
        };
        add_all(stmt.kind.assigned(), &mut add);
        for e in stmt.kind.exprs() {
            e.walk(&mut |x| add_all(if let Expr::Var(v) = x { Some(*v) } else { None }, &mut add));
        }
    });

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
            Some(k @ StmtKind::For { .. }) => k.assigned() == Some(var) && paths.iter().all(|p| p.0.starts_with(&common.0)),
            Some(k) => k.assigned() == Some(var),
            None => false,
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
            block = stmt?.kind.blocks().into_iter().find(|(b, _)| b == branch)?.1;
        }
        stmt = Some(block.get(*index as usize)?);
    }
    stmt
}

fn add_all(v: Option<VarId>, add: &mut impl FnMut(VarId)) {
    if let Some(v) = v {
        add(v)
    }
}

/// True when re-evaluating `e` in every iteration of a loop that assigns
/// `assigned` gives the value it had before the first iteration: it reads no
/// memory, calls no SIMD-group function, and reads no local the loop assigns.
pub(crate) fn is_loop_invariant(e: &Expr, assigned: &BTreeSet<VarId>) -> bool {
    e.all(&mut |x| match x {
        Expr::Var(v) => !assigned.contains(v),
        Expr::Load { .. } => false,
        Expr::Call { func, .. } => !func.is_simd(),
        _ => true,
    })
}

/// True when an expression calls a SIMD-group function (whose result depends
/// on which lanes evaluate it, so it must not sit where C++ may skip it).
pub(crate) fn calls_simd(e: &Expr) -> bool {
    e.any(&mut |x| matches!(x, Expr::Call { func, .. } if func.is_simd()))
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
