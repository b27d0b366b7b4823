//! The printer: a [`Kernel`] as text, fully parenthesised, with names quoted
//! where the reader would take them for something else and every float
//! literal bit-exact.

use super::lex::is_special_float;
use super::parse::type_from_text;
use crate::ir::*;
use crate::types::{QuantLayout, Scalar};
use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// The text form of `kernel`.
pub fn print(kernel: &Kernel) -> String {
    let mut p = Printer { k: kernel, out: String::new() };
    p.kernel();
    p.out
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}

const KEYWORDS: &[&str] = &[
    "kernel",
    "device",
    "read",
    "read_write",
    "spec",
    "threadgroup",
    "thread",
    "var",
    "if",
    "else",
    "for",
    "in",
    "while",
    "break",
    "continue",
    "return",
    "true",
    "false",
    "cast",
    "bitcast",
    "lit",
    "threadgroup_barrier",
    "simdgroup_barrier",
    "simdgroup_store",
    "simdgroup_store_transposed",
    "simdgroup_fill",
    "simdgroup_diagonal",
    "simdgroup_load",
    "simdgroup_load_transposed",
    "simdgroup_load_int4",
    "simdgroup_load_fp4",
    "simdgroup_load_int4_fragments",
    "simdgroup_load_fp4_fragments",
    "simdgroup_multiply",
    "simdgroup_multiply_accumulate",
    "thread_element",
    "matrix_row",
    "matrix_col",
    "dim_check",
    "texture2d",
    "texture_read",
    "texture_sample",
    "sampler",
    "texture_write",
    "texture_fence",
    "get_width",
    "get_height",
    "cooperative",
    "cooperative_tensor",
    "matmul2d",
    "matmul2d_overlapped",
    "matmul2d_descriptor",
    "dynamic_extent",
    "tensor",
    "cooperative_load",
    "cooperative_store",
    "cooperative_dequantize_int4",
    "cooperative_dequantize_fp4",
    "cooperative_dequantize_int4_fragments",
    "cooperative_dequantize_fp4_fragments",
    "reduce_rows",
    "reduce_columns",
    "combine",
    "get_capacity",
    "is_valid_element",
    "get_multidimensional_index",
];

fn is_plain_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn needs_quotes(name: &str) -> bool {
    !is_plain_ident(name)
        || KEYWORDS.contains(&name)
        || name.starts_with("atomic_")
        || is_special_float(name)
        || type_from_text(name).is_some()
        || Builtin::from_name(name).is_some()
}

fn quote_name(name: &str) -> Cow<'_, str> {
    if needs_quotes(name) {
        Cow::Owned(format!("{name:?}"))
    } else {
        Cow::Borrowed(name)
    }
}

fn access_name(access: Access) -> &'static str {
    match access {
        Access::Read => "read",
        Access::ReadWrite => "read_write",
    }
}

/// The body of a float in `lit<T>(float …)`: `1.5`, `inf`, `-inf`, `nan`, `nan(0x…)`.
fn float_body(f: f64) -> String {
    if f.is_finite() {
        format!("{f:?}")
    } else if f == f64::INFINITY {
        "inf".into()
    } else if f == f64::NEG_INFINITY {
        "-inf".into()
    } else if f.to_bits() == f64::NAN.to_bits() {
        "nan".into()
    } else {
        format!("nan(0x{:016x})", f.to_bits())
    }
}

/// The text of a literal.
pub fn literal_text(lit: &Literal) -> String {
    let t = lit.ty;
    match lit.value {
        LiteralValue::Bool(b) if t == Scalar::Bool => b.to_string(),
        LiteralValue::Int(i) if t.is_signed_int() => format!("{i}{t}"),
        LiteralValue::UInt(u) if t.is_unsigned_int() => format!("{u}{t}"),
        LiteralValue::Float(f) if t.is_float() => {
            if f.is_finite() {
                format!("{f:?}{t}")
            } else if f == f64::INFINITY {
                format!("inf_{t}")
            } else if f == f64::NEG_INFINITY {
                format!("-inf_{t}")
            } else if f.to_bits() == f64::NAN.to_bits() {
                format!("nan_{t}")
            } else {
                format!("nan_{t}(0x{:016x})", f.to_bits())
            }
        }
        LiteralValue::Bool(b) => format!("lit<{t}>(bool {b})"),
        LiteralValue::Int(i) => format!("lit<{t}>(int {i})"),
        LiteralValue::UInt(u) => format!("lit<{t}>(uint {u})"),
        LiteralValue::Float(f) => format!("lit<{t}>(float {})", float_body(f)),
    }
}

/// Whether the printed form of `e` begins with a literal (a minus sign right
/// before it would become the literal's sign).
fn starts_with_literal(e: &Expr) -> bool {
    match e {
        Expr::Literal(_) => true,
        Expr::Extract { arg, .. } => starts_with_literal(arg),
        _ => false,
    }
}

fn file_needs_quotes(file: &str) -> bool {
    file.starts_with('"') || file.trim() != file || file.chars().any(char::is_control)
}

struct Printer<'k> {
    k: &'k Kernel,
    out: String,
}

impl Printer<'_> {
    fn kernel(&mut self) {
        let k = self.k;
        let _ = write!(self.out, "kernel {}(", quote_name(&k.name));
        for (i, p) in k.params.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            let _ = match p.kind {
                ParamKind::Buffer { elem, access } => {
                    write!(self.out, "{}: device {elem} {}", quote_name(&p.name), access_name(access))
                }
                ParamKind::Value { ty } => write!(self.out, "{}: {ty}", quote_name(&p.name)),
                ParamKind::Texture { texel, access } => write!(self.out, "{}: texture2d<{texel}, {access}>", quote_name(&p.name)),
            };
        }
        self.out.push_str(") {\n");
        for s in &k.spec_constants {
            let _ = writeln!(self.out, "    spec {}: {} = {}", quote_name(&s.name), s.ty, literal_text(&s.default));
        }
        for t in &k.threadgroup_arrays {
            let _ = writeln!(self.out, "    threadgroup {}: {}[{}]", quote_name(&t.name), t.elem, t.len);
        }
        for t in &k.thread_arrays {
            let _ = writeln!(self.out, "    thread {}: {}[{}]", quote_name(&t.name), t.elem, t.len);
        }
        for l in &k.locals {
            let _ = writeln!(self.out, "    var {}: {}", quote_name(&l.name), l.ty);
        }
        for t in &k.cooperative_tensors {
            let _ = writeln!(self.out, "    cooperative {}: {}", quote_name(&t.name), t.type_text());
        }
        let decls = k.spec_constants.len() + k.threadgroup_arrays.len() + k.thread_arrays.len() + k.locals.len() + k.cooperative_tensors.len();
        if decls > 0 && !k.body.is_empty() {
            self.out.push('\n');
        }
        self.block(&k.body, 1);
        self.out.push_str("}\n");
    }

    fn param_ref(&self, id: ParamId) -> String {
        match self.k.params.get(id.0 as usize) {
            Some(p) => quote_name(&p.name).into_owned(),
            None => format!("$param({})", id.0),
        }
    }

    fn local_ref(&self, id: VarId) -> String {
        match self.k.locals.get(id.0 as usize) {
            Some(l) => quote_name(&l.name).into_owned(),
            None => format!("$local({})", id.0),
        }
    }

    fn spec_ref(&self, id: SpecId) -> String {
        match self.k.spec_constants.get(id.0 as usize) {
            Some(s) => quote_name(&s.name).into_owned(),
            None => format!("$spec({})", id.0),
        }
    }

    fn memory_ref(&self, mem: Memory) -> String {
        match mem {
            Memory::Buffer(p) => self.param_ref(p),
            Memory::Threadgroup(t) => match self.k.threadgroup_arrays.get(t.0 as usize) {
                Some(a) => quote_name(&a.name).into_owned(),
                None => format!("$tg({})", t.0),
            },
            Memory::Thread(t) => match self.k.thread_arrays.get(t.0 as usize) {
                Some(a) => quote_name(&a.name).into_owned(),
                None => format!("$thread({})", t.0),
            },
        }
    }

    fn coop_ref(&self, id: crate::cooperative::CoopId) -> String {
        match self.k.cooperative_tensors.get(id.0 as usize) {
            Some(t) => quote_name(&t.name).into_owned(),
            None => format!("$coop({})", id.0),
        }
    }

    /// `tensor(mem, offset, x extent, y extent, x stride, y stride)`.
    fn view(&mut self, view: &crate::ir::TensorView) {
        let name = self.memory_ref(view.mem);
        let _ = write!(self.out, "tensor({name}");
        for e in view.exprs() {
            self.out.push_str(", ");
            self.expr(e);
        }
        self.out.push(')');
    }

    /// The statements of [`crate::cooperative`].
    fn cooperative_stmt(&mut self, kind: &StmtKind) {
        use crate::cooperative::OperandRelease;
        use crate::ir::Matmul2dLeft;
        match kind {
            StmtKind::Matmul2d { desc, scope, left, right, dest, release } => {
                let k = desc.k.map_or("dynamic_extent".to_string(), |k| k.to_string());
                let word = match release {
                    OperandRelease::NextBarrier => "matmul2d",
                    OperandRelease::SecondBarrier => "matmul2d_overlapped",
                };
                let _ = write!(
                    self.out,
                    "{word}(matmul2d_descriptor({}, {}, {k}, {}, {}, {}, {}), {scope}, ",
                    desc.m,
                    desc.n,
                    desc.transpose_left,
                    desc.transpose_right,
                    desc.relaxed_precision,
                    desc.mode.name()
                );
                match left {
                    Matmul2dLeft::Tensor(view) => self.view(view),
                    Matmul2dLeft::Cooperative(id) => self.out.push_str(&self.coop_ref(*id)),
                }
                self.out.push_str(", ");
                self.view(right);
                let _ = write!(self.out, ", {})", self.coop_ref(*dest));
            }
            StmtKind::CooperativeLoad { tensor, src: view } | StmtKind::CooperativeStore { tensor, dst: view } => {
                let word = if matches!(kind, StmtKind::CooperativeLoad { .. }) { "cooperative_load" } else { "cooperative_store" };
                let _ = write!(self.out, "{word}({}, ", self.coop_ref(*tensor));
                self.view(view);
                self.out.push(')');
            }
            StmtKind::CooperativeSet { tensor, index, value } => {
                let _ = write!(self.out, "{}[", self.coop_ref(*tensor));
                self.expr(index);
                self.out.push_str("] = ");
                self.expr(value);
            }
            StmtKind::CooperativeDequantize { tensor, code, layout, words, offset, stride, scales, scale_offset, scale_stride, group_shift, biases } => {
                let (words, scales) = (self.memory_ref(*words), self.memory_ref(*scales));
                let layout = if layout.is_rows() { String::new() } else { format!("_{layout}") };
                let _ = write!(self.out, "cooperative_dequantize_{code}{layout}({}, {words}, ", self.coop_ref(*tensor));
                self.expr(offset);
                self.out.push_str(", ");
                self.expr(stride);
                let _ = write!(self.out, ", {scales}, ");
                self.expr(scale_offset);
                self.out.push_str(", ");
                self.expr(scale_stride);
                self.out.push_str(", ");
                self.expr(group_shift);
                if let Some(biases) = biases {
                    let _ = write!(self.out, ", {}", self.memory_ref(*biases));
                }
                self.out.push(')');
            }
            StmtKind::CooperativeReduce { src, dest, axis, op } => {
                let _ = write!(self.out, "{}({}, {}, {})", axis.function(), self.coop_ref(*src), self.coop_ref(*dest), op.name());
            }
            StmtKind::CooperativeCombine { dest, src, op } => {
                let _ = write!(self.out, "combine({}, {}, {})", self.coop_ref(*dest), self.coop_ref(*src), op.name());
            }
            _ => {}
        }
    }

    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
    }

    fn block(&mut self, block: &Block, depth: usize) {
        for stmt in block {
            self.stmt(stmt, depth);
        }
    }

    fn loc(&mut self, stmt: &Stmt) {
        if let Some(loc) = &stmt.loc {
            if file_needs_quotes(&loc.file) {
                let _ = write!(self.out, "  // {:?}:{}", loc.file, loc.line);
            } else {
                let _ = write!(self.out, "  // {}:{}", loc.file, loc.line);
            }
        }
    }

    /// Opens a compound statement's body: ` {`, the location, a newline.
    fn open(&mut self, stmt: &Stmt) {
        self.out.push_str(" {");
        self.loc(stmt);
        self.out.push('\n');
    }

    fn close(&mut self, depth: usize) {
        self.indent(depth);
        self.out.push_str("}\n");
    }

    /// `(cond)`, without doubling the parentheses of a binary expression.
    fn cond(&mut self, cond: &Expr) {
        self.out.push('(');
        match cond {
            Expr::Binary { op, lhs, rhs } => self.binary_inner(*op, lhs, rhs),
            other => self.expr(other),
        }
        self.out.push(')');
    }

    fn mem_index(&mut self, mem: Memory, index: &Expr) {
        let name = self.memory_ref(mem);
        self.out.push_str(&name);
        self.out.push('[');
        self.expr(index);
        self.out.push(']');
    }

    fn stmt(&mut self, stmt: &Stmt, depth: usize) {
        self.indent(depth);
        match &stmt.kind {
            StmtKind::MatrixStore { value, mem, offset, stride, transpose } => {
                self.out.push_str(if *transpose { "simdgroup_store_transposed(" } else { "simdgroup_store(" });
                self.expr(value);
                let name = self.memory_ref(*mem);
                let _ = write!(self.out, ", {name}, ");
                self.expr(offset);
                self.out.push_str(", ");
                self.expr(stride);
                self.out.push(')');
            }
            StmtKind::AsyncCopy { dst, dst_index, src, src_index, count, valid } => {
                self.out.push_str("async_copy(");
                self.mem_index(*dst, dst_index);
                self.out.push_str(", ");
                self.mem_index(*src, src_index);
                let _ = write!(self.out, ", {count}, ");
                self.expr(valid);
                self.out.push(')');
            }
            StmtKind::TileCopy(copy) => {
                self.out.push_str("tile_copy(");
                self.expr(&copy.barrier);
                self.out.push_str(", ");
                self.mem_index(copy.dst, &copy.dst_index);
                let name = self.memory_ref(copy.src);
                let _ = write!(self.out, ", {name}");
                for e in [&copy.extents[0], &copy.extents[1], &copy.pitch, &copy.origin[0], &copy.origin[1]] {
                    self.out.push_str(", ");
                    self.expr(e);
                }
                let _ = write!(self.out, ", {}, {})", copy.rows, copy.cols);
            }
            StmtKind::TileWait { barrier } => {
                self.out.push_str("tile_wait(");
                self.expr(barrier);
                self.out.push(')');
            }
            StmtKind::AsyncCommit => self.out.push_str("async_commit()"),
            StmtKind::AsyncWait { pending } => {
                let _ = write!(self.out, "async_wait({pending})");
            }
            StmtKind::DeviceFence => self.out.push_str("device_fence()"),
            StmtKind::Print { format, args } => {
                let _ = write!(self.out, "print({format:?}");
                for a in args {
                    self.out.push_str(", ");
                    self.expr(a);
                }
                self.out.push(')');
            }
            StmtKind::TextureFence { tex } => {
                let name = self.param_ref(*tex);
                let _ = write!(self.out, "texture_fence({name})");
            }
            StmtKind::TextureWrite { tex, value, coord } => {
                let name = self.param_ref(*tex);
                let _ = write!(self.out, "texture_write({name}, ");
                self.expr(value);
                self.out.push_str(", ");
                self.expr(coord);
                self.out.push(')');
            }
            StmtKind::Assign { var, value } => {
                let name = self.local_ref(*var);
                let _ = write!(self.out, "{name} = ");
                self.expr(value);
            }
            StmtKind::Store { mem, index, value } => {
                self.mem_index(*mem, index);
                self.out.push_str(" = ");
                self.expr(value);
            }
            StmtKind::Atomic { op, mem, index, value, result } => {
                if let Some(var) = result {
                    let name = self.local_ref(*var);
                    let _ = write!(self.out, "{name} = ");
                }
                let _ = match (op, result) {
                    (AtomicOp::Exchange, _) => write!(self.out, "atomic_exchange("),
                    (op, Some(_)) => write!(self.out, "atomic_fetch_{}(", op.name()),
                    (op, None) => write!(self.out, "atomic_{}(", op.name()),
                };
                self.mem_index(*mem, index);
                self.out.push_str(", ");
                self.expr(value);
                self.out.push(')');
            }
            StmtKind::AtomicCompareExchange { mem, index, expected, desired, result } => {
                if let Some(var) = result {
                    let name = self.local_ref(*var);
                    let _ = write!(self.out, "{name} = ");
                }
                self.out.push_str("atomic_compare_exchange(");
                self.mem_index(*mem, index);
                self.out.push_str(", ");
                self.expr(expected);
                self.out.push_str(", ");
                self.expr(desired);
                self.out.push(')');
            }
            StmtKind::If { cond, then_body, else_body } => {
                self.out.push_str("if ");
                self.cond(cond);
                self.open(stmt);
                self.block(then_body, depth + 1);
                if !else_body.is_empty() {
                    self.indent(depth);
                    self.out.push_str("} else {\n");
                    self.block(else_body, depth + 1);
                }
                return self.close(depth);
            }
            StmtKind::For { var, start, end, step, body, unroll } => {
                let name = self.local_ref(*var);
                let _ = write!(self.out, "for {name} in (");
                self.expr(start);
                self.out.push_str(", ");
                self.expr(end);
                self.out.push_str(", ");
                self.expr(step);
                self.out.push(')');
                if *unroll {
                    self.out.push_str(" unroll");
                }
                self.open(stmt);
                self.block(body, depth + 1);
                return self.close(depth);
            }
            StmtKind::While { cond, body } => {
                self.out.push_str("while ");
                self.cond(cond);
                self.open(stmt);
                self.block(body, depth + 1);
                return self.close(depth);
            }
            StmtKind::Break => self.out.push_str("break"),
            StmtKind::Continue => self.out.push_str("continue"),
            StmtKind::Return => self.out.push_str("return"),
            StmtKind::Barrier { scope, flags } => {
                let name = match scope {
                    BarrierScope::Threadgroup => "threadgroup_barrier",
                    BarrierScope::Simdgroup => "simdgroup_barrier",
                };
                let _ = write!(self.out, "{name}({})", flags.name());
            }
            StmtKind::Matmul2d { .. }
            | StmtKind::CooperativeLoad { .. }
            | StmtKind::CooperativeStore { .. }
            | StmtKind::CooperativeSet { .. }
            | StmtKind::CooperativeDequantize { .. }
            | StmtKind::CooperativeReduce { .. }
            | StmtKind::CooperativeCombine { .. } => self.cooperative_stmt(&stmt.kind),
        }
        self.loc(stmt);
        self.out.push('\n');
    }

    fn binary_inner(&mut self, op: BinaryOp, lhs: &Expr, rhs: &Expr) {
        self.expr(lhs);
        let _ = write!(self.out, " {} ", op.symbol());
        self.expr(rhs);
    }

    fn args(&mut self, args: &[Expr]) {
        self.out.push('(');
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.expr(a);
        }
        self.out.push(')');
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::CooperativeCapacity { tensor } => {
                let _ = write!(self.out, "get_capacity({})", self.coop_ref(*tensor));
            }
            Expr::CooperativeValid { tensor, index } => {
                let _ = write!(self.out, "is_valid_element({}, ", self.coop_ref(*tensor));
                self.expr(index);
                self.out.push(')');
            }
            Expr::CooperativeElement { tensor, index } => {
                let _ = write!(self.out, "{}[", self.coop_ref(*tensor));
                self.expr(index);
                self.out.push(']');
            }
            Expr::CooperativeCoord { tensor, index, dim } => {
                let _ = write!(self.out, "get_multidimensional_index({}, ", self.coop_ref(*tensor));
                self.expr(index);
                let _ = write!(self.out, ", {dim})");
            }
            Expr::MatrixFill { ty, value, diagonal } => {
                let _ = write!(self.out, "{}<{ty}>(", if *diagonal { "simdgroup_diagonal" } else { "simdgroup_fill" });
                self.expr(value);
                self.out.push(')');
            }
            Expr::MatrixLoad { ty, mem, offset, stride, transpose } => {
                let name = self.memory_ref(*mem);
                let _ = write!(self.out, "{}<{ty}>({name}, ", if *transpose { "simdgroup_load_transposed" } else { "simdgroup_load" });
                self.expr(offset);
                self.out.push_str(", ");
                self.expr(stride);
                self.out.push(')');
            }
            Expr::MatrixLoadQuantized { ty, code, layout, words, offset, stride, scales, scale_offset } => {
                let (words, scales) = (self.memory_ref(*words), self.memory_ref(*scales));
                let layout = match layout {
                    QuantLayout::Rows => String::new(),
                    other => format!("_{other}"),
                };
                let _ = write!(self.out, "simdgroup_load_{code}{layout}<{ty}>({words}, ");
                self.expr(offset);
                self.out.push_str(", ");
                self.expr(stride);
                let _ = write!(self.out, ", {scales}, ");
                self.expr(scale_offset);
                self.out.push(')');
            }
            Expr::MatrixMultiply { a, b, acc } => {
                self.out.push_str(if acc.is_some() { "simdgroup_multiply_accumulate(" } else { "simdgroup_multiply(" });
                self.expr(a);
                self.out.push_str(", ");
                self.expr(b);
                if let Some(c) = acc {
                    self.out.push_str(", ");
                    self.expr(c);
                }
                self.out.push(')');
            }
            Expr::MatrixElement { matrix, index } => {
                self.out.push_str("thread_element(");
                self.expr(matrix);
                let _ = write!(self.out, ", {index})");
            }
            Expr::MatrixCoord { ty, index, column } => {
                let _ = write!(self.out, "{}<{ty}>({index})", if *column { "matrix_col" } else { "matrix_row" });
            }
            Expr::TextureRead { tex, coord } => {
                let name = self.param_ref(*tex);
                let _ = write!(self.out, "texture_read({name}, ");
                self.expr(coord);
                self.out.push(')');
            }
            Expr::TextureSample { tex, sampler, uv } => {
                let name = self.param_ref(*tex);
                let _ = write!(self.out, "texture_sample({name}, {sampler}, ");
                self.expr(uv);
                self.out.push(')');
            }
            Expr::TextureSize { tex, dim } => {
                let name = self.param_ref(*tex);
                let _ = write!(self.out, "{}({name})", dim.method());
            }
            Expr::Literal(lit) => self.out.push_str(&literal_text(lit)),
            Expr::Param(p) => {
                let name = self.param_ref(*p);
                self.out.push_str(&name);
            }
            Expr::Spec(s) => {
                let name = self.spec_ref(*s);
                self.out.push_str(&name);
            }
            Expr::Var(v) => {
                let name = self.local_ref(*v);
                self.out.push_str(&name);
            }
            Expr::Builtin(b) => self.out.push_str(b.name()),
            Expr::Load { mem, index } => self.mem_index(*mem, index),
            Expr::DimCheck { mem, dim, index, size } => {
                let name = self.memory_ref(*mem);
                let _ = write!(self.out, "dim_check({name}, {dim}, ");
                self.expr(index);
                self.out.push_str(", ");
                self.expr(size);
                self.out.push(')');
            }
            Expr::Unary { op, arg } => {
                self.out.push('(');
                self.out.push_str(op.symbol());
                // `(- 3i32)`, `(- 3i32.x)`: without the space the lexer would
                // read the literal -3.
                if *op == UnaryOp::Neg && starts_with_literal(arg) {
                    self.out.push(' ');
                }
                self.expr(arg);
                self.out.push(')');
            }
            Expr::Binary { op, lhs, rhs } => {
                self.out.push('(');
                self.binary_inner(*op, lhs, rhs);
                self.out.push(')');
            }
            Expr::Call { func, precision, args } => {
                self.out.push_str(&func.qualified_name(*precision));
                self.args(args);
            }
            Expr::Cast { to, arg } => {
                let _ = write!(self.out, "cast<{to}>(");
                self.expr(arg);
                self.out.push(')');
            }
            Expr::Bitcast { to, arg } => {
                let _ = write!(self.out, "bitcast<{to}>(");
                self.expr(arg);
                self.out.push(')');
            }
            Expr::Vector { ty, components } => {
                let _ = write!(self.out, "{ty}");
                self.args(components);
            }
            Expr::Extract { arg, index } => {
                self.expr(arg);
                match index {
                    0 => self.out.push_str(".x"),
                    1 => self.out.push_str(".y"),
                    2 => self.out.push_str(".z"),
                    3 => self.out.push_str(".w"),
                    i => {
                        let _ = write!(self.out, ".{i}");
                    }
                }
            }
        }
    }
}
