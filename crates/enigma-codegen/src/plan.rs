//! Facts the writer needs before it prints a statement: where each local is
//! declared, which loop bounds must be hoisted, and which matrix locals only
//! ever feed the B side of products; and the element type of a memory
//! ([`memory_elem`]), which the MSL and CUDA writers both read.
//!
//! A local is declared in the innermost block that holds every reference to
//! it, just before the first statement of that block that refers to it. When
//! that statement is the local's assignment (`Assign`, an atomic's result)
//! the declaration is that statement (`float sum = 0.0f;`); when it is a
//! `for` over the local and no reference lies outside the loop, the `for`
//! declares it; otherwise an uninitialised declaration precedes the
//! statement. Validation guarantees definite assignment, so a local declared
//! inside a loop body never needs a value from an earlier iteration.

use enigma_ir::limits::{MAX_THREADS_PER_THREADGROUP, SIMD_WIDTH};
use enigma_ir::{BinaryOp, Block, Branch, Builtin, Expr, Kernel, Literal, LiteralValue, Memory, ParamKind, Scalar, Stmt, StmtKind, StmtPath, Type, VarId};
use std::collections::{BTreeSet, HashMap, HashSet};

pub(crate) use enigma_ir::visit::assigned_in;

#[derive(Debug, Default)]
pub(crate) struct DeclPlan {
    /// Locals declared, uninitialised, just before the statement at a path.
    pub before: HashMap<StmtPath, Vec<VarId>>,
    /// Statements that declare the local they assign (or the `for` variable).
    pub declares: HashSet<StmtPath>,
    /// Matrix locals of 16-bit elements that every assignment fills with a
    /// `MatrixLoad`, a `MatrixLoadQuantized` or a copy of another of them,
    /// and every read passes, as a local, as the `b` of a `MatrixMultiply`
    /// or to such a copy ([`b_operands`]): a dialect may hold them in the
    /// layout its products take B in.
    pub b_operands: HashSet<VarId>,
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

    let mut plan = DeclPlan { b_operands: b_operands(kernel), ..DeclPlan::default() };
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

/// The matrix locals of 16-bit elements whose every assignment is a
/// `MatrixLoad`, a `MatrixLoadQuantized` or a copy of another such local,
/// and whose every read is the `b` of a `MatrixMultiply` or such a copy.
pub(crate) fn b_operands(kernel: &Kernel) -> HashSet<VarId> {
    fn reads(e: &Expr, seen: &mut HashSet<VarId>) {
        match e {
            Expr::Var(v) => {
                seen.insert(*v);
            }
            Expr::MatrixMultiply { a, b, acc } => {
                reads(a, seen);
                if !matches!(**b, Expr::Var(_)) {
                    reads(b, seen);
                }
                if let Some(c) = acc {
                    reads(c, seen);
                }
            }
            _ => e.children().into_iter().for_each(|c| reads(c, seen)),
        }
    }
    let mut disqualified = HashSet::new();
    // Copies `to = from` between matrix locals: both stay candidates only
    // while both are.
    let mut copies = vec![];
    kernel.walk_stmts(|_, stmt| {
        match &stmt.kind {
            StmtKind::Assign { var, value: Expr::Var(from) } if kernel.locals[var.0 as usize].ty.as_matrix().is_some() => {
                copies.push((*var, *from));
                return;
            }
            StmtKind::Assign { var, value } if !matches!(value, Expr::MatrixLoad { .. } | Expr::MatrixLoadQuantized { .. }) => {
                disqualified.insert(*var);
            }
            StmtKind::Assign { .. } => {}
            k => add_all(k.assigned(), &mut |v| {
                disqualified.insert(v);
            }),
        }
        for e in stmt.kind.exprs() {
            reads(e, &mut disqualified);
        }
    });
    disqualified.extend(
        (0..kernel.locals.len() as u32)
            .map(VarId)
            .filter(|v| !kernel.locals[v.0 as usize].ty.as_matrix().is_some_and(|m| matches!(m.elem(), Scalar::F16 | Scalar::BF16))),
    );
    loop {
        let before = disqualified.len();
        for &(to, from) in &copies {
            if disqualified.contains(&to) || disqualified.contains(&from) {
                disqualified.extend([to, from]);
            }
        }
        if disqualified.len() == before {
            break;
        }
    }
    (0..kernel.locals.len() as u32).map(VarId).filter(|v| !disqualified.contains(v)).collect()
}

/// What the code generator knows of u32 index expressions: the expression
/// each local assigned exactly once holds, and each `for` variable's start
/// and step. [`KnownValues::twos`] gives the power of two every value of an
/// expression is a multiple of, which proves a matrix load's rows 16-byte
/// aligned where the slice layout makes them so; [`KnownValues::max`] an
/// upper bound that holds without wrapping, which lets a swizzled index
/// `base + offset` be computed as the swizzle of `base` plus a constant.
pub(crate) struct KnownValues<'k> {
    kernel: &'k Kernel,
    single: HashMap<VarId, &'k Expr>,
    loops: HashMap<VarId, (&'k Expr, &'k Expr)>,
}

/// How deep [`KnownValues`] follows expressions and the locals they read.
const MAX_DEPTH: u32 = 32;

impl<'k> KnownValues<'k> {
    pub(crate) fn new(kernel: &'k Kernel) -> KnownValues<'k> {
        let mut count: HashMap<VarId, u32> = HashMap::new();
        let (mut single, mut loops) = (HashMap::new(), HashMap::new());
        kernel.walk_stmts(|_, stmt| {
            if let Some(v) = stmt.kind.assigned() {
                *count.entry(v).or_default() += 1;
            }
            match &stmt.kind {
                StmtKind::Assign { var, value } => {
                    single.insert(*var, value);
                }
                StmtKind::For { var, start, step, .. } => {
                    loops.insert(*var, (start, step));
                }
                _ => {}
            }
        });
        single.retain(|v, _| count.get(v) == Some(&1));
        loops.retain(|v, _| count.get(v) == Some(&1));
        KnownValues { kernel, single, loops }
    }

    /// `k` such that `2^k` divides every value of `e` in u32 arithmetic
    /// (32 for zero; 0 where nothing is known).
    pub(crate) fn twos(&self, e: &Expr) -> u32 {
        self.twos_within(e, 0)
    }

    fn twos_within(&self, e: &Expr, depth: u32) -> u32 {
        if depth > MAX_DEPTH {
            return 0;
        }
        let twos = |e: &Expr| self.twos_within(e, depth + 1);
        match e {
            Expr::Literal(Literal { value: LiteralValue::UInt(v), .. }) => v.trailing_zeros().min(32),
            Expr::Literal(Literal { value: LiteralValue::Int(v), .. }) => v.trailing_zeros().min(32),
            Expr::Var(v) => match (self.single.get(v), self.loops.get(v)) {
                (Some(value), _) => twos(value),
                (_, Some((start, step))) => twos(start).min(twos(step)),
                _ => 0,
            },
            Expr::Binary { op, lhs, rhs } => match op {
                BinaryOp::Add | BinaryOp::Sub => twos(lhs).min(twos(rhs)),
                BinaryOp::Mul => (twos(lhs) + twos(rhs)).min(32),
                BinaryOp::BitAnd => twos(lhs).max(twos(rhs)),
                BinaryOp::Shl => match &**rhs {
                    Expr::Literal(Literal { value: LiteralValue::UInt(s), .. }) => (twos(lhs) as u64 + s).min(32) as u32,
                    _ => 0,
                },
                _ => 0,
            },
            _ => 0,
        }
    }

    /// The largest value a u32 expression `e` takes, where every step of
    /// it is known not to wrap: literals, the thread's index builtins, the
    /// locals assigned once, and `+`, `*`, `/`, `%`, `&`, `>>` of those
    /// (`/`, `%` and `>>` by literals). `None` where nothing is known.
    pub(crate) fn max(&self, e: &Expr) -> Option<u64> {
        self.max_within(e, 0)
    }

    fn max_within(&self, e: &Expr, depth: u32) -> Option<u64> {
        if depth > MAX_DEPTH {
            return None;
        }
        let max = |e: &Expr| self.max_within(e, depth + 1);
        let literal = |e: &Expr| match e {
            Expr::Literal(Literal { ty: Scalar::U32, value: LiteralValue::UInt(v) }) => Some(*v),
            _ => None,
        };
        let within_u32 = |v: u64| (v <= u64::from(u32::MAX)).then_some(v);
        match e {
            Expr::Literal(_) => literal(e),
            Expr::Builtin(b) => match b {
                Builtin::ThreadIndexInThreadgroup => Some(u64::from(MAX_THREADS_PER_THREADGROUP) - 1),
                Builtin::ThreadIndexInSimdgroup => Some(u64::from(SIMD_WIDTH) - 1),
                Builtin::SimdgroupIndexInThreadgroup => Some(u64::from(MAX_THREADS_PER_THREADGROUP / SIMD_WIDTH) - 1),
                _ => None,
            },
            Expr::Var(v) if self.kernel.locals.get(v.0 as usize).is_some_and(|l| l.ty == Type::U32) => max(self.single.get(v)?),
            Expr::Binary { op, lhs, rhs } => {
                let (l, r) = (max(lhs), max(rhs));
                match op {
                    BinaryOp::Add => within_u32(l? + r?),
                    BinaryOp::Mul => within_u32(l?.checked_mul(r?)?),
                    BinaryOp::Div => literal(rhs).filter(|&d| d > 0).and_then(|d| Some(l? / d)),
                    BinaryOp::Rem => literal(rhs).filter(|&d| d > 0).map(|d| l.map_or(d - 1, |l| l.min(d - 1))),
                    BinaryOp::BitAnd => l.into_iter().chain(r).min(),
                    BinaryOp::Shr => literal(rhs).filter(|&s| s < 32).and_then(|s| Some(l? >> s)),
                    _ => None,
                }
            }
            _ => None,
        }
    }
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

/// The element type of a memory.
pub(crate) fn memory_elem(kernel: &Kernel, mem: Memory) -> Option<Type> {
    match mem {
        Memory::Buffer(p) => match kernel.params.get(p.0 as usize)?.kind {
            ParamKind::Buffer { elem, .. } => Some(elem),
            ParamKind::Value { .. } | ParamKind::Texture { .. } => None,
        },
        Memory::Threadgroup(t) => Some(kernel.threadgroup_arrays.get(t.0 as usize)?.elem),
        Memory::Thread(t) => Some(kernel.thread_arrays.get(t.0 as usize)?.elem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::builder::*;
    use enigma_ir::{Access, MatrixType, Type};

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

    #[test]
    fn b_operands_are_loaded_tiles_only_multiplied_from_the_right() {
        let mut k = KernelBuilder::new("k");
        let src = k.buffer("src", Type::F16, Access::Read);
        let out = k.buffer("out", Type::F32, Access::ReadWrite);
        let (half, single) = (MatrixType::new(Scalar::F16, 8, 8), MatrixType::new(Scalar::F32, 8, 8));
        let a = k.let_("a", matrix_load(half, src, 0u32, 8u32, false));
        let b = k.let_("b", matrix_load(half, src, 64u32, 8u32, false));
        let both = k.let_("both", matrix_load(half, src, 128u32, 8u32, true));
        let filled = k.let_("filled", matrix_fill(half, 1.0f32));
        let fb = k.let_("fb", matrix_load(single, out, 0u32, 8u32, false));
        let acc = k.let_("acc", matrix_multiply_accumulate(a, b, matrix_fill(single, 0.0f32)));
        let acc2 = k.let_("acc2", matrix_multiply_accumulate(both, both, acc));
        let acc3 = k.let_("acc3", matrix_multiply_accumulate(a, filled, acc2));
        let acc4 = k.let_("acc4", matrix_multiply_accumulate(fb, fb, acc3));
        // Copies: `b2` takes `b` (both stay B operands), `c2` takes `both`
        // (which is not one), `e2` takes `e` and is then an A operand.
        let b2 = k.var("b2", matrix_load(half, src, 0u32, 8u32, false));
        k.assign(b2, b);
        let c2 = k.var("c2", matrix_load(half, src, 0u32, 8u32, false));
        k.assign(c2, both);
        let e = k.let_("e", matrix_load(half, src, 0u32, 8u32, false));
        let e2 = k.var("e2", matrix_load(half, src, 0u32, 8u32, false));
        k.assign(e2, e);
        let acc5 = k.let_("acc5", matrix_multiply_accumulate(a, b2.get(), acc4));
        let acc6 = k.let_("acc6", matrix_multiply_accumulate(a, c2.get(), acc5));
        let acc7 = k.let_("acc7", matrix_multiply_accumulate(e2.get(), b, acc6));
        k.matrix_store(acc7, out, 0u32, 8u32, false);
        let kernel = k.finish().unwrap();
        let id = |name: &str| VarId(kernel.locals.iter().position(|l| l.name == name).unwrap() as u32);
        // `b` only feeds B sides; `both` is also an A operand, `filled` is
        // not a load, `fb` is f32, `a` only feeds A sides.
        assert_eq!(b_operands(&kernel), HashSet::from([id("b"), id("b2")]));
    }

    #[test]
    fn known_factors_follow_single_assignments_loops_and_arithmetic() {
        let mut k = KernelBuilder::new("k");
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let lane = k.let_("lane", thread_index_in_simdgroup());
        let row = k.let_("row", lane * 40u32); // 8 · 5: three twos
        let twice = k.var("twice", 0u32); // assigned twice: unknown
        k.assign(twice, 64u32);
        k.for_range("ks", 0u32, 64u32, 16u32, |k, ks| k.store(out.at(row + ks), twice.get()));
        let shifted = k.let_("shifted", (lane << 5u32) & 0xFFF0u32);
        k.store(out.at(shifted), 1u32);
        let kernel = k.finish().unwrap();
        let factors = KnownValues::new(&kernel);
        let var = |name: &str| Expr::Var(VarId(kernel.locals.iter().position(|l| l.name == name).unwrap() as u32));
        assert_eq!(factors.twos(&var("lane")), 0);
        assert_eq!(factors.twos(&var("row")), 3);
        assert_eq!(factors.twos(&var("twice")), 0, "two assignments prove nothing");
        assert_eq!(factors.twos(&var("ks")), 4, "start 0, step 16");
        assert_eq!(factors.twos(&var("shifted")), 5, "the shift's five, the mask's four: the larger");
        let sum = Expr::Binary { op: BinaryOp::Add, lhs: Box::new(var("row")), rhs: Box::new(var("ks")) };
        assert_eq!(factors.twos(&sum), 3);
        assert_eq!(factors.twos(&Expr::Literal(Literal { ty: Scalar::U32, value: LiteralValue::UInt(0) })), 32);
    }

    #[test]
    fn known_maxima_hold_without_wrapping_or_are_unknown() {
        let mut k = KernelBuilder::new("k");
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let n = k.value("n", Type::U32);
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let row = k.let_("row", lid / 8u32);
        let col = k.let_("col", lid % 8u32 * 8u32);
        let lane = k.let_("lane", row * 64u32 + col);
        let masked = k.let_("masked", n & 255u32);
        let big = k.let_("big", lid * 0x0400_0000u32); // 1023 · 2^26 wraps
        let scaled = k.let_("scaled", n * 2u32);
        let twice = k.var("twice", 0u32);
        k.assign(twice, 1u32);
        k.store(out.at(lane + masked + big + scaled), twice.get());
        let kernel = k.finish().unwrap();
        let known = KnownValues::new(&kernel);
        let var = |name: &str| Expr::Var(VarId(kernel.locals.iter().position(|l| l.name == name).unwrap() as u32));
        assert_eq!(known.max(&var("lid")), Some(1023));
        assert_eq!(known.max(&var("row")), Some(127));
        assert_eq!(known.max(&var("col")), Some(56));
        assert_eq!(known.max(&var("lane")), Some(127 * 64 + 56));
        assert_eq!(known.max(&var("masked")), Some(255), "a mask bounds an unknown value");
        assert_eq!(known.max(&var("big")), None, "the product may wrap");
        assert_eq!(known.max(&var("scaled")), None, "a parameter is unknown");
        assert_eq!(known.max(&var("twice")), None, "two assignments prove nothing");
        // The bound is a bound: every thread's value lies at or below it.
        for lid in 0..1024u32 {
            assert!(u64::from(lid / 8 * 64 + lid % 8 * 8) <= known.max(&var("lane")).unwrap());
        }
    }
}
