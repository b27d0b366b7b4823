//! The shared C-family writer: walks a validated kernel and prints its body
//! through a [`Dialect`].
//!
//! It owns what both targets share: declarations placed where a person
//! would put them ([`crate::plan`]), C++ precedence with the fewest
//! parentheses that stay clear (plus the ones `-Wparentheses` asks for),
//! compound assignments (`sum += x`), `else if` chains, hoisting of loop
//! bounds that the IR evaluates once, and the IR's integer rules: shift
//! amounts masked to the bit width, 8/16-bit arithmetic cut back to its type
//! after every operation (C++ computes it in `int`), and `&&`/`||` that
//! evaluate both sides when the right side calls a SIMD-group function.

use crate::code::{Code, Prec, TgIndex};
use crate::dialect::{BOperandTile, BuiltinOrd, DResult, Dialect, KernelCx, TileCopyCode, TypeOrd};
use crate::error::{CodegenError, CodegenErrorKind};
use crate::names::Names;
use crate::plan::{self, DeclPlan};
use enigma_ir::{
    BarrierScope, BinaryOp, Scalar, Block, Branch, Builtin, ExecutionScope, Expr, Intrinsic, Kernel, KernelInfo, Literal, LiteralValue, Matmul2dDescriptor, MatrixType, Memory, ParamKind, QuantCode, QuantLayout,
    Precision, Stmt, StmtKind, StmtPath, Type, UnaryOp, VarId,
};
mod cooperative;
mod cooperative_fragments;
mod cooperative_registers;

use std::collections::BTreeSet;
use std::fmt::Write as _;

/// An expression's code and IR type.
struct Val {
    code: Code,
    ty: Type,
}

/// The names the cooperative code uses.
#[derive(Debug, Default)]
pub(crate) struct CoopNames {
    /// Each distinct (descriptor, scope), with its object's name.
    pub ops: Vec<(Matmul2dDescriptor, ExecutionScope, String)>,
    /// Each cooperative tensor's name.
    pub tensors: Vec<String>,
    /// The names of the views a statement makes.
    pub views: [String; 2],
    /// Program-scope declarations (the descriptors, or the `wgmma`
    /// functions) for the dialect's head.
    pub prologue: String,
    /// The MSL lowerings' threadgroup scratch arrays (reductions and
    /// combinations over several SIMD groups), by element type.
    pub scratch: Vec<(enigma_ir::Scalar, String)>,
    /// MSL 4.0: each cooperative tensor's declaring expression, whose C++
    /// type (and so layout) it has.
    pub decls: Vec<String>,
    /// The layouts, when the dialect holds the tensors in registers.
    pub registers: Option<crate::cuda::cooperative::Plan>,
    /// The program-scope functions the prologue already has.
    pub functions: std::collections::BTreeSet<String>,
}

pub(crate) struct Writer<'k, D: Dialect> {
    pub kernel: &'k Kernel,
    pub info: &'k KernelInfo,
    pub names: Names,
    pub dialect: D,
    plan: DeclPlan,
    known: plan::KnownValues<'k>,
    path: StmtPath,
    out: String,
    indent: usize,
    builtins: BTreeSet<BuiltinOrd>,
    /// Vector builtins read whole (not only component by component).
    whole_builtins: BTreeSet<BuiltinOrd>,
    types: BTreeSet<TypeOrd>,
    /// Names and declarations of cooperative operations.
    coop: CoopNames,
    /// The statement before the one being written in its block (`None`
    /// for a block's first).
    previous: Option<&'k Stmt>,
}

/// A signed integer type of 32 or 64 bits (scalar or vector), whose
/// overflow C++ leaves undefined.
fn wide_signed(ty: Type) -> bool {
    matches!(ty.elem(), Scalar::I32 | Scalar::I64)
}

/// The unsigned integer type of the same width.
fn unsigned_of(s: Scalar) -> Scalar {
    match s {
        Scalar::I8 => Scalar::U8,
        Scalar::I16 => Scalar::U16,
        Scalar::I32 => Scalar::U32,
        Scalar::I64 => Scalar::U64,
        other => other,
    }
}

fn is_narrow_int(ty: Type) -> bool {
    ty.width() == 1 && ty.elem().is_int() && ty.elem().size_bytes() < 4
}

impl<'k, D: Dialect> Writer<'k, D> {
    pub fn new(kernel: &'k Kernel, info: &'k KernelInfo, names: Names, dialect: D) -> Writer<'k, D> {
        let mut types = BTreeSet::new();
        for p in &kernel.params {
            types.insert(TypeOrd::of(match p.kind {
                ParamKind::Buffer { elem, .. } => elem,
                ParamKind::Value { ty } => ty,
                ParamKind::Texture { texel, .. } => Type::vector(texel, 4),
            }));
        }
        for s in &kernel.spec_constants {
            types.insert(TypeOrd::of(Type::scalar(s.ty)));
        }
        for t in &kernel.threadgroup_arrays {
            types.insert(TypeOrd::of(t.elem));
        }
        for t in &kernel.thread_arrays {
            types.insert(TypeOrd::of(t.elem));
        }
        for l in &kernel.locals {
            types.insert(TypeOrd::of(l.ty));
        }
        Writer {
            kernel,
            info,
            names,
            dialect,
            plan: plan::plan_declarations(kernel),
            known: plan::KnownValues::new(kernel),
            path: StmtPath::default(),
            out: String::new(),
            indent: 1,
            builtins: BTreeSet::new(),
            whole_builtins: BTreeSet::new(),
            types,
            coop: CoopNames::default(),
            previous: None,
        }
    }

    pub fn error(&self, kind: CodegenErrorKind) -> CodegenError {
        CodegenError {
            kernel: self.kernel.name.clone(),
            target: D::TARGET,
            location: if self.path.0.is_empty() { None } else { Some(self.path.clone()) },
            kind,
        }
    }

    fn malformed(&self, detail: impl Into<String>) -> CodegenError {
        self.error(CodegenErrorKind::Malformed { detail: detail.into() })
    }

    fn lift<T>(&self, r: DResult<T>) -> Result<T, CodegenError> {
        r.map_err(|kind| self.error(kind))
    }

    /// Writes the whole kernel: the dialect's head, the body, the closing brace.
    pub fn finish(mut self) -> Result<(String, D), CodegenError> {
        self.indent = 1;
        self.cooperative_decls()?;
        let body = &self.kernel.body;
        self.block(body, Branch::Body)?;
        let body_text = std::mem::take(&mut self.out);
        let cx = KernelCx {
            kernel: self.kernel,
            info: self.info,
            names: &self.names,
            builtins: &self.builtins,
            whole_builtins: &self.whole_builtins,
            types: &self.types,
            prologue: &self.coop.prologue,
        };
        let head = self.dialect.head(&cx).map_err(|kind| CodegenError {
            kernel: self.kernel.name.clone(),
            target: D::TARGET,
            location: None,
            kind,
        })?;
        let mut text = head;
        text.push_str(&body_text);
        text.push_str("}\n");
        Ok((text, self.dialect))
    }

    // ---- statements --------------------------------------------------------

    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn block(&mut self, block: &'k Block, branch: Branch) -> Result<(), CodegenError> {
        for (i, stmt) in block.iter().enumerate() {
            self.path.0.push((branch, i as u32));
            self.previous = i.checked_sub(1).map(|p| &block[p]);
            self.stmt(stmt)?;
            self.path.0.pop();
        }
        Ok(())
    }

    fn local(&self, var: VarId) -> Result<(Type, String), CodegenError> {
        let local = self.kernel.locals.get(var.0 as usize).ok_or_else(|| self.malformed(format!("local {} does not exist", var.0)))?;
        Ok((local.ty, self.names.local(var).to_string()))
    }

    /// `T name` for a declaration.
    fn decl(&mut self, var: VarId) -> Result<String, CodegenError> {
        let (ty, name) = self.local(var)?;
        self.types.insert(TypeOrd::of(ty));
        let ty_name = match ty.as_matrix() {
            Some(m) => {
                self.dialect.use_matrices();
                match self.b_operand_tile(var, m) {
                    Some(b) => b.spelling,
                    None => self.dialect.tile_name(m),
                }
            }
            None => self.dialect.type_name(ty),
        };
        Ok(format!("{ty_name} {name}"))
    }

    fn declares_here(&self) -> bool {
        self.plan.declares.contains(&self.path)
    }

    /// `name = ` or `T name = ` for an assignment to `var`.
    fn target(&mut self, var: VarId) -> Result<String, CodegenError> {
        if self.declares_here() {
            self.decl(var)
        } else {
            Ok(self.local(var)?.1)
        }
    }

    fn stmt(&mut self, stmt: &'k Stmt) -> Result<(), CodegenError> {
        if let Some(vars) = self.plan.before.get(&self.path).cloned() {
            for var in vars {
                let decl = self.decl(var)?;
                self.line(&format!("{decl};"));
            }
        }
        if self.settles_here() {
            self.settle_products()?;
        }
        match &stmt.kind {
            StmtKind::Matmul2d { .. }
            | StmtKind::CooperativeLoad { .. }
            | StmtKind::CooperativeStore { .. }
            | StmtKind::CooperativeSet { .. }
            | StmtKind::CooperativeDequantize { .. }
            | StmtKind::CooperativeReduce { .. }
            | StmtKind::CooperativeCombine { .. } => self.cooperative_stmt(&stmt.kind)?,
            StmtKind::Assign { var, value } => {
                let (ty, name) = self.local(*var)?;
                if !self.declares_here() {
                    if let Some(text) = self.compound(*var, &name, ty, value)? {
                        self.line(&text);
                        return Ok(());
                    }
                }
                let value = match (value, ty.as_matrix().and_then(|m| self.b_operand_tile(*var, m))) {
                    (Expr::MatrixLoad { ty, mem, offset, stride, transpose }, Some(b)) => self.matrix_load(b.load, *ty, *mem, offset, stride, *transpose)?.code.text,
                    (Expr::MatrixLoadQuantized { ty, code, layout, words, offset, stride, scales, scale_offset }, Some(b)) => {
                        self.matrix_load_quantized(b.load_quantized, *ty, (*code, *layout), (*words, offset, stride), (*scales, scale_offset))?.code.text
                    }
                    _ => self.top_expr(value)?.code.text,
                };
                let target = self.target(*var)?;
                self.line(&format!("{target} = {value};"));
            }
            StmtKind::MatrixStore { value, mem, offset, stride, transpose } => {
                let v = self.expr(value)?;
                let (place, _, _) = self.place(*mem, offset)?;
                let stride = self.top_expr(stride)?;
                let lane = self.lane();
                self.line(&format!("enigma_tile_store({}, &{}, {}, {transpose}, {lane});", v.code.text, place.text, stride.code.text));
            }
            StmtKind::AsyncCopy { dst, dst_index, src, src_index, count, valid } => {
                let (dst_place, elem, _) = self.place(*dst, dst_index)?;
                let (src_place, _, _) = self.place(*src, src_index)?;
                let (src_base, _) = self.memory(*src)?;
                let valid = self.top_expr(valid)?;
                let text = self.dialect.async_copy(dst_place, src_place, &src_base, elem, *count, valid.code);
                self.line(&format!("{text};"));
            }
            StmtKind::TileCopy(copy) => self.tile_copy(copy)?,
            StmtKind::TileWait { barrier } => {
                let barrier = self.top_expr(barrier)?;
                let text = self.dialect.tile_wait(barrier.code);
                self.line(&format!("{text};"));
            }
            StmtKind::AsyncCommit => {
                if let Some(text) = self.dialect.async_commit() {
                    self.line(&format!("{text};"));
                }
            }
            StmtKind::AsyncWait { pending } => {
                if let Some(text) = self.dialect.async_wait(*pending) {
                    self.line(&format!("{text};"));
                }
            }
            StmtKind::Print { format, args } => self.print_stmt(format, args)?,
            StmtKind::DeviceFence => {
                let text = self.dialect.device_fence();
                let text = self.lift(text)?;
                self.line(&format!("{text};"));
            }
            StmtKind::TextureFence { tex } => {
                self.texel(*tex)?;
                let text = self.dialect.texture_fence(self.names.param(*tex));
                self.line(&format!("{text};"));
            }
            StmtKind::TextureWrite { tex, value, coord } => {
                let texel = self.texel(*tex)?;
                let value = self.top_expr(value)?;
                let coord = self.top_expr(coord)?;
                let text = self.dialect.texture_write(self.names.param(*tex), texel, value.code, coord.code);
                self.line(&format!("{text};"));
            }
            StmtKind::Store { mem, index, value } => {
                let (place, elem, atomic) = self.place(*mem, index)?;
                let value = self.top_expr(value)?;
                let text = self.dialect.store(*mem, elem, atomic, place, value.code);
                self.line(&format!("{text};"));
            }
            StmtKind::Atomic { op, mem, index, value, result } => {
                let (place, elem, _) = self.place(*mem, index)?;
                let value = self.top_expr(value)?;
                let call = self.dialect.atomic(*op, *mem, elem, place, value.code);
                let call = self.lift(call)?;
                match result {
                    Some(var) => {
                        let target = self.target(*var)?;
                        self.line(&format!("{target} = {};", call.text));
                    }
                    None => self.line(&format!("{};", call.text)),
                }
            }
            StmtKind::AtomicCompareExchange { mem, index, expected, desired, result } => {
                let (place, elem, _) = self.place(*mem, index)?;
                let expected = self.top_expr(expected)?;
                let desired = self.top_expr(desired)?;
                let call = self.dialect.compare_exchange(*mem, elem, place, expected.code, desired.code);
                let call = self.lift(call)?;
                match result {
                    Some(var) => {
                        let target = self.target(*var)?;
                        self.line(&format!("{target} = {};", call.text));
                    }
                    None => self.line(&format!("{};", call.text)),
                }
            }
            StmtKind::If { cond, then_body, else_body } => self.if_stmt(cond, then_body, else_body, false)?,
            StmtKind::For { var, start, end, step, body, unroll } => self.for_stmt(*var, (start, end, step), body, *unroll)?,
            StmtKind::While { cond, body } => {
                let cond = self.cond(cond)?;
                self.line(&format!("while ({cond}) {{"));
                self.nested(body, Branch::Loop)?;
                self.line("}");
            }
            StmtKind::Break => self.line("break;"),
            StmtKind::Continue => self.line("continue;"),
            StmtKind::Return => self.line("return;"),
            StmtKind::Barrier { scope, flags } => {
                let text = self.dialect.barrier(*scope, *flags, &self.path);
                self.line(&format!("{text};"));
            }
        }
        Ok(())
    }

    /// Whether the statement being written directly follows a threadgroup
    /// barrier in its block: every thread that runs it has just passed
    /// that barrier, with nothing between.
    pub(crate) fn follows_threadgroup_barrier(&self) -> bool {
        matches!(self.previous, Some(Stmt { kind: StmtKind::Barrier { scope: BarrierScope::Threadgroup, .. }, .. }))
    }

    fn nested(&mut self, body: &'k Block, branch: Branch) -> Result<(), CodegenError> {
        self.indent += 1;
        self.block(body, branch)?;
        self.indent -= 1;
        Ok(())
    }

    fn cond(&mut self, cond: &Expr) -> Result<String, CodegenError> {
        Ok(self.expr(cond)?.code.text)
    }

    /// `if (c) {` … `} else if (d) {` … `}`. `chained` when this `if` is
    /// the `else` of the previous one (its `}` and `else ` are already out).
    fn if_stmt(&mut self, cond: &Expr, then_body: &'k Block, else_body: &'k Block, chained: bool) -> Result<(), CodegenError> {
        let c = self.expr(cond)?;
        // An empty `then` with a non-empty `else` reads better negated.
        let swapped = then_body.is_empty() && !else_body.is_empty();
        let (c, first, first_branch, second, second_branch) = if swapped {
            (format!("!{}", c.code.unary_operand()), else_body, Branch::Else, then_body, Branch::Then)
        } else {
            (c.code.text, then_body, Branch::Then, else_body, Branch::Else)
        };
        if chained {
            self.out.push_str(&format!("if ({c}) {{\n"));
        } else {
            self.line(&format!("if ({c}) {{"));
        }
        self.nested(first, first_branch)?;
        if second.is_empty() {
            self.line("}");
            return Ok(());
        }
        // `else if` when the else branch is a lone `if` that needs no declarations before it.
        if let [Stmt { kind: StmtKind::If { cond, then_body, else_body }, .. }] = second.as_slice() {
            let mut inner = self.path.clone();
            inner.0.push((second_branch, 0));
            if !self.plan.before.contains_key(&inner) {
                for _ in 0..self.indent {
                    self.out.push_str("    ");
                }
                self.out.push_str("} else ");
                let outer = std::mem::replace(&mut self.path, inner);
                let r = self.if_stmt(cond, then_body, else_body, true);
                self.path = outer;
                return r;
            }
        }
        self.line("} else {");
        self.nested(second, second_branch)?;
        self.line("}");
        Ok(())
    }

    /// A `for` loop; `unroll` (constant bounds, which validation checked)
    /// puts `#pragma unroll` before it, which MSL and CUDA C++ both take.
    fn for_stmt(&mut self, var: VarId, (start, end, step): (&Expr, &Expr, &Expr), body: &'k Block, unroll: bool) -> Result<(), CodegenError> {
        let (ty, name) = self.local(var)?;
        let mut assigned = plan::assigned_in(body);
        assigned.insert(var);
        // `end` and `step` are evaluated once, before the first iteration.
        let bound = |this: &mut Self, e: &Expr, what: &str| -> Result<Code, CodegenError> {
            let v = if what == "step" { this.top_expr(e)? } else { this.expr(e)? };
            if plan::is_loop_invariant(e, &assigned) {
                return Ok(v.code);
            }
            let hoisted = this.names.fresh(&format!("{name}_{what}"));
            let ty_name = this.dialect.type_name(ty);
            this.line(&format!("const {ty_name} {hoisted} = {};", v.code.text));
            Ok(Code::primary(hoisted))
        };
        let end = bound(self, end, "end")?;
        let step_is_one = matches!(step, Expr::Literal(Literal { value: LiteralValue::Int(1) | LiteralValue::UInt(1), .. }));
        let step = bound(self, step, "step")?;
        let start = self.top_expr(start)?;
        let init = if self.declares_here() {
            format!("{} = {}", self.decl(var)?, start.code.text)
        } else {
            format!("{name} = {}", start.code.text)
        };
        let increment = if step_is_one { format!("{name}++") } else { format!("{name} += {}", step.text) };
        if unroll {
            self.line("#pragma unroll");
        }
        self.line(&format!("for ({init}; {name} < {}; {increment}) {{", end.at_least(Prec::Shift)));
        self.nested(body, Branch::Loop)?;
        self.line("}");
        Ok(())
    }

    /// `print(format, args)` as a `printf`-style call: the format's text
    /// escaped for a C string and for `%`, each value as its type prints
    /// (`%d`/`%u` for integers of up to 32 bits, widened; `%lld`/`%llu`
    /// for 64, `%g` for floats as f32, `%s` of `true`/`false` for bools).
    fn print_stmt(&mut self, format: &str, args: &'k [Expr]) -> Result<(), CodegenError> {
        use enigma_ir::print_format::Piece;
        let pieces = enigma_ir::print_format::pieces(format).map_err(|e| self.error(CodegenErrorKind::Malformed { detail: e.to_string() }))?;
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            values.push(self.top_expr(a)?);
        }
        let mut text = String::new();
        let mut out_args = Vec::with_capacity(values.len());
        let mut values = values.into_iter();
        for piece in &pieces {
            match piece {
                Piece::Text(t) => {
                    for c in t.chars() {
                        match c {
                            '"' => text.push_str("\\\""),
                            '\\' => text.push_str("\\\\"),
                            '%' => text.push_str("%%"),
                            c => text.push(c),
                        }
                    }
                }
                Piece::Value => {
                    let Some(v) = values.next() else {
                        return Err(self.error(CodegenErrorKind::Malformed { detail: format!("print({format:?}) has fewer values than placeholders") }));
                    };
                    let s = v.ty.elem();
                    let (spec, arg) = match s {
                        Scalar::Bool => ("%s", format!("({}) ? \"true\" : \"false\"", v.code.text)),
                        s if s.is_float() => {
                            let f = if s == Scalar::F32 { v.code } else { self.dialect.cast(Type::F32, v.ty, v.code) };
                            ("%g", self.dialect.print_float(&f.text))
                        }
                        Scalar::I64 | Scalar::U64 => (if s == Scalar::I64 { "%lld" } else { "%llu" }, v.code.text),
                        Scalar::I32 => ("%d", v.code.text),
                        Scalar::U32 => ("%u", v.code.text),
                        s if s.is_signed_int() => ("%d", self.dialect.cast(Type::I32, v.ty, v.code).text),
                        _ => ("%u", self.dialect.cast(Type::U32, v.ty, v.code).text),
                    };
                    text.push_str(spec);
                    out_args.push(arg);
                }
            }
        }
        let call = self.dialect.print(&text, &out_args);
        let call = self.lift(call)?;
        self.line(&format!("{call};"));
        Ok(())
    }

    /// `x op= y` for `x = x op y`, where C++ means the same.
    fn compound(&mut self, var: VarId, name: &str, ty: Type, value: &Expr) -> Result<Option<String>, CodegenError> {
        let Expr::Binary { op, lhs, rhs } = value else { return Ok(None) };
        if !matches!(**lhs, Expr::Var(v) if v == var) {
            return Ok(None);
        }
        use BinaryOp::*;
        let ok = match op {
            Add | Sub | Mul | Div | BitAnd | BitOr | BitXor | Shl | Shr => true,
            Rem => !ty.elem().is_float(),
            _ => false,
        };
        if !ok {
            return Ok(None);
        }
        let r = self.expr(rhs)?;
        let r = if matches!(op, Shl | Shr) { self.shift_amount(rhs, r) } else { r.code };
        Ok(Some(format!("{name} {}= {};", op.symbol(), r.text)))
    }

    /// `name[index]`, the element type, and whether the memory is atomic.
    fn place(&mut self, mem: Memory, index: &Expr) -> Result<(Code, Type, bool), CodegenError> {
        let (name, elem) = self.memory(mem)?;
        let code = self.expr(index)?.code.text;
        let index = match mem {
            Memory::Threadgroup(t) => {
                let split = self.constant_offset(index)?;
                self.dialect.threadgroup_index(t, TgIndex { code, split })
            }
            _ => code,
        };
        let atomic = self.info.atomic_memories.contains(&mem);
        Ok((Code::postfix(format!("{name}[{index}]")), elem, atomic))
    }

    /// `index` as `base + offset` with a u32 literal offset where the sum
    /// provably does not wrap ([`plan::KnownValues::max`]): the base's code
    /// and the offset.
    fn constant_offset(&mut self, index: &Expr) -> Result<Option<(String, u32)>, CodegenError> {
        let Expr::Binary { op: BinaryOp::Add, lhs, rhs } = index else { return Ok(None) };
        let Expr::Literal(Literal { ty: Scalar::U32, value: LiteralValue::UInt(offset) }) = **rhs else { return Ok(None) };
        let Ok(offset) = u32::try_from(offset) else { return Ok(None) };
        match self.known.max(lhs) {
            Some(max) if max + u64::from(offset) <= u64::from(u32::MAX) => Ok(Some((self.expr(lhs)?.code.text, offset))),
            _ => Ok(None),
        }
    }

    /// The name of a buffer, threadgroup array or per-thread array and its element type.
    fn memory(&self, mem: Memory) -> Result<(String, Type), CodegenError> {
        Ok(match mem {
            Memory::Buffer(p) => match self.kernel.params.get(p.0 as usize).map(|p| p.kind) {
                Some(ParamKind::Buffer { elem, .. }) => (self.names.param(p).to_string(), elem),
                _ => return Err(self.malformed(format!("parameter {} is not a buffer", p.0))),
            },
            Memory::Threadgroup(t) => match self.kernel.threadgroup_arrays.get(t.0 as usize) {
                Some(arr) => (self.names.tg_array(t).to_string(), arr.elem),
                None => return Err(self.malformed(format!("threadgroup array {} does not exist", t.0))),
            },
            Memory::Thread(t) => match self.kernel.thread_arrays.get(t.0 as usize) {
                Some(arr) => (self.names.thread_array(t).to_string(), arr.elem),
                None => return Err(self.malformed(format!("per-thread array {} does not exist", t.0))),
            },
        })
    }

    /// `tile_copy`: the operands' code and the threads' copy, element `e`
    /// of the box by thread `e mod threads`, then the dialect's statements.
    fn tile_copy(&mut self, copy: &enigma_ir::TileCopy) -> Result<(), CodegenError> {
        let [barrier, dst_index, rows, cols, pitch, row, col] = copy.exprs().map(|e| self.top_expr(e).map(|v| v.code.text));
        let (dst_index, rows, cols, pitch, row, col) = (dst_index?, rows?, cols?, pitch?, row?, col?);
        let (dst_name, elem) = self.memory(copy.dst)?;
        let (src_name, _) = self.memory(copy.src)?;
        let Memory::Threadgroup(array) = copy.dst else { unreachable!("validated: a tile copy writes threadgroup memory") };
        for b in [Builtin::ThreadIndexInThreadgroup, Builtin::ThreadsPerThreadgroup] {
            self.builtins.insert(BuiltinOrd::of(b));
        }
        let tid = self.dialect.builtin(Builtin::ThreadIndexInThreadgroup).text;
        let size = self.dialect.builtin(Builtin::ThreadsPerThreadgroup).text;
        let zero = self.dialect.literal(&Literal::u32(0).convert(elem.elem())).text;
        let element = self.dialect.threadgroup_index(array, TgIndex { code: format!("({dst_index}) + enigma_e"), split: None });
        let (box_rows, box_cols) = (copy.rows, copy.cols);
        let threads_copy = format!(
            "for (uint enigma_e = {tid}; enigma_e < {}u; enigma_e += {size}.x * {size}.y * {size}.z) {{\n    \
             const uint enigma_r = uint({row}) + enigma_e / {box_cols}u, enigma_c = uint({col}) + enigma_e % {box_cols}u;\n    \
             {dst_name}[{element}] = (enigma_r < ({rows}) && enigma_c < ({cols})) ? {src_name}[enigma_r * ({pitch}) + enigma_c] : {zero};\n\
             }}",
            box_rows * box_cols
        );
        let code = TileCopyCode { kernel: self.kernel, copy, barrier: barrier?, dst: (dst_name, dst_index), elem, origin: [row, col], threads_copy };
        let text = self.dialect.tile_copy(&code);
        let text = self.lift(text)?;
        for line in text.lines() {
            self.line(line);
        }
        Ok(())
    }

    /// The lane index, for the matrix helpers (each dialect's prelude maps
    /// a lane's share of a tile through it).
    fn lane(&mut self) -> String {
        self.dialect.use_matrices();
        self.builtins.insert(BuiltinOrd::of(Builtin::ThreadIndexInSimdgroup));
        self.dialect.builtin(Builtin::ThreadIndexInSimdgroup).text
    }

    /// The dialect's B-layout tile for `var`, when the plan found it feeds
    /// only the B side of products and the dialect has one.
    fn b_operand_tile(&self, var: VarId, m: MatrixType) -> Option<BOperandTile> {
        self.plan.b_operands.contains(&var).then(|| self.dialect.b_operand_tile(m)).flatten()
    }

    /// A `MatrixLoad` through `helper` (`enigma_tile_load`, or the dialect's
    /// B-layout load); vector memory is read through a view of its scalars.
    ///
    /// Where the code generator proves every row 16-byte aligned — threadgroup
    /// memory whose arrays the dialect declares 16-byte aligned
    /// ([`Dialect::threadgroup_array_align`]), the offset and the stride
    /// multiples of 16 bytes ([`plan::KnownValues`]) — the helper is told
    /// so (`helper<T, R, C, true>`) and skips its run-time test.
    fn matrix_load(&mut self, helper: &str, ty: MatrixType, mem: Memory, offset: &Expr, stride: &Expr, transpose: bool) -> Result<Val, CodegenError> {
        // The helpers' ALIGNED promise: rows on 16-byte boundaries.
        const ROW_ALIGN_TWOS: u32 = 4;
        let elem_twos = ty.elem().size_bytes().trailing_zeros();
        let aligned = matches!(mem, Memory::Threadgroup(_))
            && self.dialect.threadgroup_array_align().trailing_zeros() >= ROW_ALIGN_TWOS
            && self.known.twos(offset) + elem_twos >= ROW_ALIGN_TWOS
            && self.known.twos(stride) + elem_twos >= ROW_ALIGN_TWOS;
        let pointer = self.scalar_pointer(mem, offset)?;
        let stride = self.top_expr(stride)?;
        let lane = self.lane();
        let (t, r, c) = (self.dialect.scalar_name(ty.elem()), ty.rows(), ty.cols());
        let proven = if aligned { ", true" } else { "" };
        let text = format!("{helper}<{t}, {r}, {c}{proven}>({pointer}, {}, {transpose}, {lane})", stride.code.text);
        Ok(Val { code: Code::postfix(text), ty: Type::Matrix(ty) })
    }

    /// A pointer to scalar `offset` of `mem`: vector memory is read through a
    /// view of its scalars.
    fn scalar_pointer(&mut self, mem: Memory, offset: &Expr) -> Result<String, CodegenError> {
        Ok(match self.memory(mem)? {
            (array, elem) if elem.width() > 1 => {
                let offset = self.expr(offset)?;
                format!("{} + {}", self.dialect.scalar_view(mem, elem.elem(), &array), offset.code.at_least(Prec::Multiplicative))
            }
            _ => format!("&{}", self.place(mem, offset)?.0.text),
        })
    }

    /// A `MatrixLoadQuantized` through `helper` (`enigma_tile_load_q`, or
    /// the dialect's B-layout load): `helper<T, R, C, code, layout>(words,
    /// stride, scales, lane)`, `words` and `scales` pointing at the tile's
    /// first word and scale.
    fn matrix_load_quantized(
        &mut self,
        helper: &str,
        ty: MatrixType,
        (code, layout): (QuantCode, QuantLayout),
        (words, offset, stride): (Memory, &Expr, &Expr),
        (scales, scale_offset): (Memory, &Expr),
    ) -> Result<Val, CodegenError> {
        let (words, scales) = (self.scalar_pointer(words, offset)?, self.scalar_pointer(scales, scale_offset)?);
        let stride = self.top_expr(stride)?;
        let lane = self.lane();
        let (t, r, c) = (self.dialect.scalar_name(ty.elem()), ty.rows(), ty.cols());
        let text = format!("{helper}<{t}, {r}, {c}, enigma_{code}, enigma_q4_{layout}>({words}, {}, {scales}, {lane})", stride.code.text);
        Ok(Val { code: Code::postfix(text), ty: Type::Matrix(ty) })
    }

    fn matrix_expr(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        let (text, ty) = match e {
            Expr::MatrixFill { ty, value, diagonal } => {
                let v = self.top_expr(value)?;
                let lane = self.lane();
                let (t, r, c) = (self.dialect.scalar_name(ty.elem()), ty.rows(), ty.cols());
                (format!("enigma_tile_fill<{t}, {r}, {c}>({}, {diagonal}, {lane})", v.code.text), Type::Matrix(*ty))
            }
            Expr::MatrixLoad { ty, mem, offset, stride, transpose } => return self.matrix_load("enigma_tile_load", *ty, *mem, offset, stride, *transpose),
            Expr::MatrixLoadQuantized { ty, code, layout, words, offset, stride, scales, scale_offset } => {
                return self.matrix_load_quantized("enigma_tile_load_q", *ty, (*code, *layout), (*words, offset, stride), (*scales, scale_offset))
            }
            Expr::MatrixMultiply { a, b, acc } => {
                let (va, vb) = (self.expr(a)?, self.expr(b)?);
                let lane = self.lane();
                let acc = match acc {
                    Some(c) => Some(self.expr(c)?),
                    None => None,
                };
                let ty = enigma_ir::typing::matrix_multiply(va.ty, vb.ty, acc.as_ref().map(|c| c.ty)).map_err(|k| self.malformed(k.to_string()))?;
                let text = match acc {
                    Some(c) => format!("enigma_tile_mma({}, {}, {}, {lane})", va.code.text, vb.code.text, c.code.text),
                    None => format!("enigma_tile_mul({}, {}, {lane})", va.code.text, vb.code.text),
                };
                (text, ty)
            }
            Expr::MatrixElement { matrix, index } => {
                let m = self.expr(matrix)?;
                self.dialect.use_matrices();
                (format!("enigma_tile_element({}, {index})", m.code.text), Type::scalar(m.ty.elem()))
            }
            Expr::MatrixCoord { ty, index, column } => {
                let lane = self.lane();
                let f = if *column { "enigma_tile_col" } else { "enigma_tile_row" };
                (format!("{f}<{}, {}>({index}, {lane})", ty.rows(), ty.cols()), Type::U32)
            }
            _ => return Err(self.malformed("not a matrix expression")),
        };
        Ok(Val { code: Code::postfix(text), ty })
    }

    // ---- expressions -------------------------------------------------------

    /// The texel type of texture parameter `tex`.
    fn texel(&self, tex: enigma_ir::ParamId) -> Result<Scalar, CodegenError> {
        match self.kernel.params.get(tex.0 as usize).map(|p| p.kind) {
            Some(ParamKind::Texture { texel, .. }) => Ok(texel),
            _ => Err(self.malformed(format!("parameter {} is not a texture", tex.0))),
        }
    }

    /// An expression whose value is converted to its own type by its
    /// consumer (assigned, stored, an atomic operand, a vector component, a
    /// loop start or step): 8/16-bit results need no cut back here.
    fn top_expr(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        self.expr_inner(e, true)
    }

    fn expr(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        self.expr_inner(e, false)
    }

    fn expr_inner(&mut self, e: &Expr, top: bool) -> Result<Val, CodegenError> {
        let val = match e {
            Expr::CooperativeCapacity { .. } | Expr::CooperativeValid { .. } | Expr::CooperativeElement { .. } | Expr::CooperativeCoord { .. } => {
                self.cooperative_expr(e)?
            }
            Expr::Literal(lit) => Val { code: self.dialect.literal(lit), ty: Type::scalar(lit.ty) },
            Expr::Param(p) => match self.kernel.params.get(p.0 as usize).map(|p| p.kind) {
                Some(ParamKind::Value { ty }) => Val { code: Code::primary(self.names.param(*p)), ty },
                _ => return Err(self.malformed(format!("parameter {} is not a value", p.0))),
            },
            Expr::Spec(s) => {
                let spec = self.kernel.spec_constants.get(s.0 as usize).ok_or_else(|| self.malformed("dangling specialisation constant"))?;
                Val { code: self.dialect.spec(*s, self.names.spec(*s)), ty: Type::scalar(spec.ty) }
            }
            Expr::Var(v) => {
                let (ty, name) = self.local(*v)?;
                Val { code: Code::primary(name), ty }
            }
            Expr::Builtin(b) => {
                self.builtins.insert(BuiltinOrd::of(*b));
                if b.is_vector() {
                    self.whole_builtins.insert(BuiltinOrd::of(*b));
                }
                Val { code: self.dialect.builtin(*b), ty: b.ty() }
            }
            Expr::Load { mem, index } => {
                let (place, elem, atomic) = self.place(*mem, index)?;
                Val { code: self.dialect.load(*mem, elem, atomic, place), ty: elem }
            }
            // GPUs check no bounds: a checked subscript is its index.
            Expr::DimCheck { index, .. } => self.expr_inner(index, top)?,
            Expr::TextureRead { tex, coord } => {
                let texel = self.texel(*tex)?;
                let coord = self.top_expr(coord)?;
                Val { code: self.dialect.texture_read(self.names.param(*tex), texel, coord.code), ty: Type::vector(texel, 4) }
            }
            Expr::TextureSample { tex, sampler, uv } => {
                let texel = self.texel(*tex)?;
                let uv = self.top_expr(uv)?;
                let missing = || self.malformed(format!("{sampler} of parameter {} is not in the kernel's samplers", tex.0));
                let index = crate::dialect::kernel_samplers(self.info).iter().position(|s| s == sampler).ok_or_else(missing)?;
                let slot = self.info.samplers.get(tex).and_then(|all| all.iter().position(|s| s == sampler)).ok_or_else(missing)?;
                let code = self.dialect.texture_sample(self.names.param(*tex), texel, index, slot, uv.code);
                Val { code, ty: Type::vector(texel, 4) }
            }
            Expr::TextureSize { tex, dim } => {
                self.texel(*tex)?;
                Val { code: self.dialect.texture_size(self.names.param(*tex), *dim), ty: Type::U32 }
            }
            Expr::Unary { op, arg } => {
                let a = self.expr(arg)?;
                let ty = a.ty;
                // `-x` of the minimum overflows in C++; the IR's negation
                // wraps, so 32- and 64-bit signed values negate as unsigned.
                if *op == UnaryOp::Neg && wide_signed(ty) {
                    let unsigned = ty.with_elem(unsigned_of(ty.elem()));
                    self.types.insert(TypeOrd::of(unsigned));
                    let u = self.dialect.cast(unsigned, ty, a.code);
                    let negated = Code::new(format!("-{}", u.unary_operand()), Prec::Unary);
                    return Ok(Val { code: self.dialect.cast(ty, unsigned, negated), ty });
                }
                let code = Code::new(format!("{}{}", op.symbol(), a.code.unary_operand()), Prec::Unary);
                let code = if !top && is_narrow_int(ty) && *op != UnaryOp::Not { self.dialect.cast(ty, ty, code) } else { code };
                Val { code, ty }
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, top)?,
            Expr::Call { func, precision, args } => self.call(*func, *precision, args)?,
            Expr::Cast { to, arg } => {
                let a = self.expr(arg)?;
                if a.ty == *to {
                    a
                } else {
                    Val { code: self.dialect.cast(*to, a.ty, a.code), ty: *to }
                }
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(arg)?;
                Val { code: self.dialect.bitcast(*to, a.ty, a.code), ty: *to }
            }
            Expr::Vector { ty, components } => {
                let mut codes = vec![];
                for c in components {
                    codes.push(self.top_expr(c)?.code);
                }
                Val { code: self.dialect.vector(*ty, codes), ty: *ty }
            }
            Expr::MatrixFill { .. } | Expr::MatrixLoad { .. } | Expr::MatrixLoadQuantized { .. } | Expr::MatrixMultiply { .. } | Expr::MatrixElement { .. } | Expr::MatrixCoord { .. } => {
                self.matrix_expr(e)?
            }
            Expr::Extract { arg, index } => {
                let a = match &**arg {
                    // A component of a builtin: the builtin is not needed as a vector value.
                    Expr::Builtin(b) => {
                        self.builtins.insert(BuiltinOrd::of(*b));
                        Val { code: self.dialect.builtin(*b), ty: b.ty() }
                    }
                    _ => self.expr(arg)?,
                };
                let field = ["x", "y", "z", "w"].get(*index as usize).ok_or_else(|| self.malformed("vector component out of range"))?;
                Val { code: Code::postfix(format!("{}.{field}", a.code.at_least(Prec::Postfix))), ty: Type::scalar(a.ty.elem()) }
            }
        };
        self.types.insert(TypeOrd::of(val.ty));
        Ok(val)
    }

    /// The shift amount masked to the bit width of the shifted type, as the
    /// IR defines shifts (`x << (n % bits)`).
    fn shift_amount(&mut self, rhs: &Expr, r: Val) -> Code {
        let bits = r.ty.elem().size_bytes() as u64 * 8;
        if let Expr::Literal(Literal { value, .. }) = rhs {
            let n = value.as_i64() as u64;
            if n < bits {
                return r.code;
            }
            let masked = Literal { ty: r.ty.elem(), value: if r.ty.elem().is_signed_int() { LiteralValue::Int((n % bits) as i64) } else { LiteralValue::UInt(n % bits) } };
            return self.mask_literal(masked, r.ty);
        }
        let mask = Literal {
            ty: r.ty.elem(),
            value: if r.ty.elem().is_signed_int() { LiteralValue::Int(bits as i64 - 1) } else { LiteralValue::UInt(bits - 1) },
        };
        let m = self.mask_literal(mask, r.ty);
        Code::binary(format!("{} & {}", r.code.at_least(Prec::BitAnd), m.text), Prec::BitAnd, BinaryOp::BitAnd)
    }

    /// A literal for a shift mask: plain `int` for 8/16-bit scalars (C++
    /// promotes them anyway), the exact type otherwise.
    fn mask_literal(&self, lit: Literal, ty: Type) -> Code {
        if is_narrow_int(ty) {
            Code::primary(lit.value.as_i64().to_string())
        } else {
            self.dialect.literal(&lit)
        }
    }

    fn binary(&mut self, op: BinaryOp, lhs: &Expr, rhs: &Expr, top: bool) -> Result<Val, CodegenError> {
        use BinaryOp::*;
        if op == BitOr {
            if let Some(v) = self.and_or(lhs, rhs)? {
                return Ok(v);
            }
        }
        let l = self.expr(lhs)?;
        let r = self.expr(rhs)?;
        let operand = if l.ty.width() >= r.ty.width() { l.ty } else { r.ty };
        let ty = enigma_ir::typing::binary(op, l.ty, r.ty).map_err(|k| self.malformed(k.to_string()))?;
        if op == Rem && operand.elem().is_float() {
            return Ok(Val { code: self.dialect.float_rem(operand, l.code, r.code), ty });
        }
        let r_ty = r.ty;
        let r_code = if matches!(op, Shl | Shr) { self.shift_amount(rhs, r) } else { r.code };
        // `&&`/`||` skip the right side in C++; the IR evaluates both, which
        // matters when the right side is a SIMD-group function.
        let (op_text, op_for_prec) = match op {
            And | Or if operand.width() == 1 && plan::calls_simd(rhs) => (if op == And { "&" } else { "|" }, if op == And { BitAnd } else { BitOr }),
            _ => (op.symbol(), op),
        };
        let prec = Prec::of(op_for_prec);
        // Signed overflow is undefined in C++ (and MSL), and compilers use
        // that; the IR's signed `+ - * <<` wrap, so 32- and 64-bit signed
        // operands go through their unsigned type and back.
        // 8- and 16-bit operands promote to `int`, where a product
        // (`ushort(60000) * ushort(60000)`) or a left shift of a negative
        // value is undefined too: those go through `uint`.
        let narrow_through_uint = matches!(op, Mul | Shl) && is_narrow_int(ty);
        if (matches!(op, Add | Sub | Mul | Shl) && wide_signed(ty)) || narrow_through_uint {
            let unsigned = if narrow_through_uint { Type::U32 } else { ty.with_elem(unsigned_of(ty.elem())) };
            self.types.insert(TypeOrd::of(unsigned));
            let (lu, ru) = (self.dialect.cast(unsigned, l.ty, l.code), self.dialect.cast(unsigned, r_ty, r_code));
            let left = operand_text(&lu, op, prec, false);
            let right = operand_text(&ru, op, prec, true);
            let code = self.dialect.cast(ty, unsigned, Code::binary(format!("{left} {op_text} {right}"), prec, op));
            return Ok(Val { code, ty });
        }
        let left = operand_text(&l.code, op_for_prec, prec, false);
        let right = operand_text(&r_code, op_for_prec, prec, true);
        let mut code = Code::binary(format!("{left} {op_text} {right}"), prec, op_for_prec);
        if op_for_prec != op {
            code = self.dialect.cast(Type::BOOL, Type::I32, code);
        }
        let wraps = matches!(op, Add | Sub | Mul | Div | Rem | Shl | Shr);
        if !top && wraps && is_narrow_int(ty) {
            code = self.dialect.cast(ty, ty, code);
        }
        Ok(Val { code, ty })
    }

    /// `(x & mask) | bits` on a `u32` scalar with both constants literal, in
    /// the dialect's one-call form where it has one (the 4-bit decoders'
    /// pattern: a field masked in place and an exponent ORed in).
    fn and_or(&mut self, lhs: &Expr, rhs: &Expr) -> Result<Option<Val>, CodegenError> {
        let Expr::Binary { op: BinaryOp::BitAnd, lhs: x, rhs: mask } = lhs else { return Ok(None) };
        if !matches!(**mask, Expr::Literal(_)) || !matches!(rhs, Expr::Literal(_)) {
            return Ok(None);
        }
        let x = self.expr(x)?;
        let (mask, bits) = (self.expr(mask)?, self.expr(rhs)?);
        if x.ty != Type::U32 || mask.ty != Type::U32 || bits.ty != Type::U32 {
            return Ok(None);
        }
        Ok(self.dialect.and_or(x.code, mask.code, bits.code).map(|code| Val { code, ty: Type::U32 }))
    }

    fn call(&mut self, func: Intrinsic, precision: Precision, args: &[Expr]) -> Result<Val, CodegenError> {
        let mut codes = vec![];
        let mut types = vec![];
        for a in args {
            let v = self.expr(a)?;
            codes.push(v.code);
            types.push(v.ty);
        }
        if args.len() != func.arity() {
            return Err(self.malformed(format!("`{}` takes {} argument(s)", func.name(), func.arity())));
        }
        let result = enigma_ir::typing::call(func, &types).map_err(|k| self.malformed(k.to_string()))?;
        let code = self.dialect.call(func, precision, &types, result, codes);
        let code = self.lift(code)?;
        Ok(Val { code, ty: result })
    }
}

/// An operand of binary operator `op`, parenthesised as C++ requires and
/// where `-Wparentheses` (and a careful reader) would want it.
fn operand_text(code: &Code, op: BinaryOp, prec: Prec, right: bool) -> String {
    use BinaryOp::*;
    let required = if right { code.prec <= prec } else { code.prec < prec };
    let clarity = match code.op {
        Some(child) if child != op => match op {
            BitAnd | BitOr | BitXor => true,
            Shl | Shr => matches!(child, Add | Sub | Mul | Div | Rem),
            Or => child == And,
            And | Eq | Ne | Lt | Le | Gt | Ge => matches!(child, BitAnd | BitOr | BitXor) || (op != And && child.is_comparison()),
            _ => false,
        },
        _ => false,
    };
    if required || clarity {
        format!("({})", code.text)
    } else {
        code.text.clone()
    }
}

/// Appends `text` indented by `indent` levels to `out`, line by line.
pub(crate) fn push_indented(out: &mut String, text: &str, indent: usize) {
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{}{line}", "    ".repeat(indent));
        }
    }
}

/// Builtins in the order of [`Builtin::ALL`].
pub(crate) fn sorted_builtins(set: &BTreeSet<BuiltinOrd>) -> Vec<Builtin> {
    set.iter().map(|b| b.get()).collect()
}
