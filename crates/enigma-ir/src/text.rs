//! The IR's text form (prints and parses back exactly) and its JSON form.
//!
//! # Text form
//!
//! The text reads like source, in the spirit of Cranelift's `.clif`:
//!
//! ```text
//! kernel reduce(A: device f32 read, Out: device f32 read_write, n: u32) {
//!     spec TILE: u32 = 32u32
//!     threadgroup scratch: f32[32]
//!     var tid: u32
//!     var sum: f32
//!
//!     tid = thread_position_in_grid.x  // reduce.rs:12
//!     if (tid < n) {
//!         sum = simd_sum(A[tid])
//!     } else {
//!         sum = 0.0f32
//!     }
//!     scratch[thread_index_in_threadgroup] = sum
//!     threadgroup_barrier(mem_threadgroup)
//!     Out[tid] = (scratch[0u32] + 1.5f32)
//! }
//! ```
//!
//! Grammar (`*` repeats, `?` optional, `|` alternatives; newlines are
//! whitespace, `;` may separate statements):
//!
//! ```text
//! kernel  := "kernel" name "(" (param ("," param)* ","?)? ")" "{" decl* stmt* "}"
//! param   := name ":" "device" type ("read" | "read_write")   // a buffer
//!          | name ":" type                                     // a by-value constant
//! decl    := "spec" name ":" scalar "=" literal
//!          | "threadgroup" name ":" type "[" len "]"
//!          | "var" name ":" type
//! stmt    := ref "=" expr                      | ref "[" expr "]" "=" expr
//!          | (ref "=")? "atomic_<op>" "(" ref "[" expr "]" "," expr ")"
//!          | (ref "=")? "atomic_compare_exchange" "(" ref "[" expr "]" "," expr "," expr ")"
//!          | "if" "(" expr ")" "{" stmt* "}" ("else" ("{" stmt* "}" | if-stmt))?
//!          | "for" ref "in" "(" expr "," expr "," expr ")" "{" stmt* "}"   // (start, end, step)
//!          | "while" "(" expr ")" "{" stmt* "}"
//!          | "break" | "continue" | "return"
//!          | ("threadgroup_barrier" | "simdgroup_barrier") "(" flag ("|" flag)* ")"
//! expr    := unary (binop unary)?               // one operator per parenthesis level
//! unary   := ("-" | "~" | "!") unary | primary ("." component)*
//! primary := literal | ref | ref "[" expr "]" | builtin | "(" expr ")"
//!          | function "(" args ")"              // MSL names: `min`, `fast::exp`, `simd_sum`, …
//!          | type "(" args ")"                  // vector constructor: `f32x4(a, b, c, d)`
//!          | ("cast" | "bitcast") "<" type ">" "(" expr ")"
//! ```
//!
//! * Names are identifiers; a name that is not a plain ASCII identifier or
//!   that collides with a keyword, a type or a builtin is written as a quoted
//!   string with Rust escapes (`"my name"`). A reference to an id the kernel
//!   does not declare prints as `$param(3)`, `$spec(0)`, `$tg(1)`, `$local(7)`.
//! * `<op>` is `add sub min max and or xor exchange`; a statement with a result
//!   prints as `old = atomic_fetch_add(A[i], v)`, without as `atomic_add(A[i], v)`.
//! * Barrier flags: `mem_none`, `mem_threadgroup`, `mem_device`,
//!   `mem_device_and_threadgroup` (also written `mem_device | mem_threadgroup`).
//! * Literals carry their type: `true`, `1u32`, `-3i32`, `0.5f32`, `1e-7f16`.
//!   A float prints as the shortest decimal that reads back to the same `f64`
//!   (the IR keeps every float literal as an `f64`), so printing is bit-exact;
//!   `inf_f32`, `-inf_f32`, `nan_f32` and `nan_f32(0x7ff8000000000001)` (the
//!   `f64` bits of any other NaN) cover the rest. A literal whose value kind
//!   does not match its type (which validation rejects) prints as
//!   `lit<u32>(int -3)` (kinds `bool`, `int`, `uint`, `float`).
//! * Binary expressions are fully parenthesised, `(a + b)`; unary ones too,
//!   `(-x)`. The parser also accepts one unparenthesised operator where an
//!   expression stands alone (`if (i < n)`, `x = a + b`, `A[i + 1u32]`).
//! * Vector components: `.x .y .z .w`, or `.0` … `.3`.
//! * A statement's source location prints as a trailing comment,
//!   `// file.rs:12` (on the opening line of `if`/`for`/`while`), and parses
//!   back; other comments are ignored.
//!
//! [`print`] then [`parse`] gives back an equal kernel for every kernel
//! whose declared names are pairwise distinct (which validation requires),
//! up to 128 levels of nesting. [`parse`] never panics: errors are
//! [`ParseError`]s with the line, the column and what was expected.
//!
//! # JSON form
//!
//! The serde derives of [`crate::ir`] define it; the Python front end writes
//! it. [`to_json`] writes one line, [`to_json_pretty`] an indented document,
//! [`from_json`] reads either. The shape, by example:
//!
//! ```text
//! {"schema":2,"name":"k",
//!  "params":[{"name":"A","kind":{"buffer":{"elem":"f32","access":"read"}}},
//!            {"name":"n","kind":{"value":{"ty":"u32"}}}],
//!  "spec_constants":[{"name":"TILE","ty":"u32","default":{"ty":"u32","value":{"u_int":32}}}],
//!  "threadgroup_arrays":[{"name":"s","elem":"f32","len":32}],
//!  "locals":[{"name":"x","ty":"f32"}],
//!  "body":[{"kind":{"assign":{"var":0,"value":{"load":{"mem":{"buffer":0},"index":{"builtin":"thread_index_in_threadgroup"}}}}},
//!           "loc":{"file":"k.py","line":3}},
//!          {"kind":{"barrier":{"scope":"threadgroup","flags":"threadgroup"}}},
//!          {"kind":"return"}]}
//! ```
//!
//! * The document starts with `"schema"`, the version of this form
//!   ([`JSON_SCHEMA`]); types are their IR names (`"f32"`, `"u32x4"`), the
//!   spelling the text form prints.
//! * Every enum is externally tagged with snake_case names: a unit variant is
//!   a string (`"break"`, `"return"`, builtin names, `"add"`), a variant with
//!   data is a one-key object (`{"binary":{"op":"add","lhs":…,"rhs":…}}`).
//! * Ids (`ParamId`, `VarId`, `TgArrayId`, `SpecId`) are bare indices into
//!   `params`, `locals`, `threadgroup_arrays`, `spec_constants`.
//! * Expressions: `literal`, `param`, `spec`, `var`, `builtin`, `load {mem,
//!   index}`, `unary {op, arg}`, `binary {op, lhs, rhs}`, `call {func, args}`
//!   (`func` is the intrinsic's variant name: `fast_exp`, `simd_sum`), `cast
//!   {to, arg}`, `bitcast {to, arg}`, `vector {ty, components}`, `extract {arg,
//!   index}`. Memories are `{"buffer":i}` or `{"threadgroup":i}`.
//! * Literals are `{"ty":"<scalar>","value":{"<kind>":v}}` with kinds `bool`,
//!   `int`, `u_int`, `float`. A float is a JSON number, or one of the strings
//!   `"nan"`, `"inf"`, `"-inf"`, `"nan:0x…"` (JSON has no numbers for them).
//! * A statement is `{"kind":…, "loc":{"file","line"}}`; `loc` is left out
//!   when unknown.

use crate::ir::*;
use crate::types::{Scalar, Type};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use thiserror::Error;

/// The deepest nesting (expressions and blocks together) the parser accepts.
pub const MAX_NESTING: u32 = 128;

/// How many `.x` may follow one another.
const MAX_COMPONENT_CHAIN: u32 = 8;

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------

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

impl std::str::FromStr for Kernel {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Kernel, ParseError> {
        parse(text)
    }
}

const KEYWORDS: &[&str] = &[
    "kernel",
    "device",
    "read",
    "read_write",
    "spec",
    "threadgroup",
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
];

const FLOAT_SUFFIXES: [&str; 3] = ["f16", "bf16", "f32"];

fn is_plain_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `inf_f32`, `nan_bf16`, …: identifiers the lexer reads as literals.
fn is_special_float(s: &str) -> bool {
    let rest = s.strip_prefix("inf_").or_else(|| s.strip_prefix("nan_"));
    rest.is_some_and(|r| FLOAT_SUFFIXES.contains(&r))
}

/// A type name: `f32`, `u32x4`, `f32x0` (an invalid width still reads back),
/// or an MSL name (`float4`, `half`).
fn type_from_text(s: &str) -> Option<Type> {
    Type::from_ir_name(s)
}

fn scalar_from_ir_name(s: &str) -> Option<Scalar> {
    Scalar::from_ir_name(s)
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
            };
        }
        self.out.push_str(") {\n");
        for s in &k.spec_constants {
            let _ = writeln!(self.out, "    spec {}: {} = {}", quote_name(&s.name), s.ty, literal_text(&s.default));
        }
        for t in &k.threadgroup_arrays {
            let _ = writeln!(self.out, "    threadgroup {}: {}[{}]", quote_name(&t.name), t.elem, t.len);
        }
        for l in &k.locals {
            let _ = writeln!(self.out, "    var {}: {}", quote_name(&l.name), l.ty);
        }
        let decls = k.spec_constants.len() + k.threadgroup_arrays.len() + k.locals.len();
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
            StmtKind::For { var, start, end, step, body } => {
                let name = self.local_ref(*var);
                let _ = write!(self.out, "for {name} in (");
                self.expr(start);
                self.out.push_str(", ");
                self.expr(end);
                self.out.push_str(", ");
                self.expr(step);
                self.out.push(')');
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
            Expr::Call { func, args } => {
                self.out.push_str(func.name());
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

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// A text-form parse error: where, and what.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    /// The kernel's name, once the header has been read.
    pub kernel: Option<String>,
    /// 1-based line and column (in characters) of the offending token.
    pub line: u32,
    pub column: u32,
    pub kind: ParseErrorKind,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(k) = &self.kernel {
            write!(f, "kernel `{k}`, ")?;
        }
        write!(f, "line {}, column {}: {}", self.line, self.column, self.kind)
    }
}

impl std::error::Error for ParseError {}

fn did_you_mean(s: &Option<&'static str>) -> String {
    match s {
        Some(s) => format!("; did you mean `{s}`?"),
        None => String::new(),
    }
}

#[derive(Clone, Debug, Error, PartialEq)]
pub enum ParseErrorKind {
    #[error("expected {expected}, found {found}")]
    Expected { expected: String, found: String },
    #[error("unknown builtin `{name}`{}", did_you_mean(.suggestion))]
    UnknownBuiltin { name: String, suggestion: Option<&'static str> },
    #[error("unknown function `{name}`{}", did_you_mean(.suggestion))]
    UnknownFunction { name: String, suggestion: Option<&'static str> },
    #[error("`{name}` is not declared: no parameter, spec constant, threadgroup array or local has that name, and no builtin")]
    UnknownName { name: String },
    #[error("unknown type `{name}`")]
    UnknownType { name: String },
    #[error("the name `{name}` is declared twice")]
    DuplicateName { name: String },
    #[error("`{name}` is a {what}; {expected}")]
    WrongKind { name: String, what: &'static str, expected: &'static str },
    #[error("invalid literal `{text}`: {reason}")]
    InvalidLiteral { text: String, reason: String },
    #[error("unexpected character {ch:?}")]
    UnexpectedCharacter { ch: char },
    #[error("invalid string: {reason}")]
    InvalidString { reason: &'static str },
    #[error("nesting deeper than {limit} levels")]
    TooDeep { limit: u32 },
}

// ---------------------------------------------------------------------------
// Lexing
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// A quoted name, unescaped.
    Quoted(String),
    /// A number with its sign and type suffix, `-3i32`, `0x7ff8…`, `inf_f32`.
    Number(String),
    Punct(&'static str),
    Eof,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) | Tok::Number(s) => format!("`{s}`"),
            Tok::Quoted(s) => format!("`{s:?}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "the end of the text".into(),
        }
    }
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: u32,
    col: u32,
}

const PUNCTS: [&str; 33] = [
    "::", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "{", "}", "[", "]", "<", ">", ",", ":", "=", ".",
    ";", "+", "-", "*", "/", "%", "&", "|", "^", "!", "~", "$",
];

struct Lexed {
    toks: Vec<Token>,
    /// Trailing comments (text after `//`) by line.
    comments: HashMap<u32, String>,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Reads a string body after its opening quote; returns the text and the
/// index just past the closing quote.
fn unescape(chars: &[char], mut i: usize) -> Result<(String, usize), &'static str> {
    let mut out = String::new();
    loop {
        match chars.get(i) {
            None | Some('\n') => return Err("missing closing quote"),
            Some('"') => return Ok((out, i + 1)),
            Some('\\') => {
                let c = match chars.get(i + 1) {
                    Some('n') => '\n',
                    Some('r') => '\r',
                    Some('t') => '\t',
                    Some('0') => '\0',
                    Some('\\') => '\\',
                    Some('"') => '"',
                    Some('\'') => '\'',
                    Some('u') => {
                        if chars.get(i + 2) != Some(&'{') {
                            return Err("expected `{` after `\\u`");
                        }
                        let start = i + 3;
                        let mut end = start;
                        while chars.get(end).is_some_and(|c| c.is_ascii_hexdigit()) {
                            end += 1;
                        }
                        if chars.get(end) != Some(&'}') || end == start || end - start > 6 {
                            return Err("a `\\u{…}` escape takes 1 to 6 hex digits");
                        }
                        let hex: String = chars[start..end].iter().collect();
                        let c = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or("the `\\u{…}` escape is not a Unicode scalar value")?;
                        out.push(c);
                        i = end + 1;
                        continue;
                    }
                    _ => return Err("unknown escape"),
                };
                out.push(c);
                i += 2;
            }
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

fn lex(src: &str) -> Result<Lexed, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut comments = HashMap::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let mut last_token_line = 0u32;
    let err = |line, col, kind| ParseError { kernel: None, line, column: col, kind };
    while let Some(&c) = chars.get(i) {
        let start = i;
        if c == '\n' {
            line = line.saturating_add(1);
            col = 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col = col.saturating_add(1);
            continue;
        }
        let next = chars.get(i + 1).copied();
        let after_dot = matches!(toks.last(), Some(Token { tok: Tok::Punct("."), .. }));
        let tok = if c == '/' && next == Some('/') {
            let mut end = i + 2;
            while chars.get(end).is_some_and(|&c| c != '\n') {
                end += 1;
            }
            if last_token_line == line {
                comments.insert(line, chars[i + 2..end].iter().collect());
            }
            col = col.saturating_add((end - i) as u32);
            i = end;
            continue;
        } else if c == '"' {
            let (s, end) = unescape(&chars, i + 1).map_err(|reason| err(line, col, ParseErrorKind::InvalidString { reason }))?;
            i = end;
            Tok::Quoted(s)
        } else if c.is_ascii_alphabetic() || c == '_' {
            while chars.get(i).copied().is_some_and(is_ident_char) {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            if is_special_float(&s) {
                Tok::Number(s)
            } else {
                Tok::Ident(s)
            }
        } else if c.is_ascii_digit() || (c == '-' && next.is_some_and(|n| n.is_ascii_digit()) && !after_dot) {
            i = lex_number(&chars, i, after_dot);
            Tok::Number(chars[start..i].iter().collect())
        } else if let Some(end) = negative_infinity_end(&chars, i) {
            i = end;
            Tok::Number(chars[start..i].iter().collect())
        } else if let Some(&p) = PUNCTS.iter().find(|p| {
            let mut pc = p.chars();
            pc.next() == Some(c) && pc.next().map_or(true, |p2| Some(p2) == next)
        }) {
            i += p.len();
            Tok::Punct(p)
        } else {
            return Err(err(line, col, ParseErrorKind::UnexpectedCharacter { ch: c }));
        };
        toks.push(Token { tok, line, col });
        last_token_line = line;
        col = col.saturating_add((i - start) as u32);
    }
    toks.push(Token { tok: Tok::Eof, line, col });
    Ok(Lexed { toks, comments })
}

/// `-inf_f32` is one token: the end of it when it starts at `i`.
fn negative_infinity_end(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i) != Some(&'-') {
        return None;
    }
    let mut end = i + 1;
    while chars.get(end).copied().is_some_and(is_ident_char) {
        end += 1;
    }
    let word: String = chars[i + 1..end].iter().collect();
    (word.starts_with("inf_") && is_special_float(&word)).then_some(end)
}

/// Scans a number: `-`? digits (`.` digits)? (`e` sign? digits)? suffix?, or
/// `0x` hex digits. After a `.` only digits (`v.4`).
fn lex_number(chars: &[char], mut i: usize, after_dot: bool) -> usize {
    let digit = |i: usize| chars.get(i).is_some_and(|c| c.is_ascii_digit());
    if chars.get(i) == Some(&'-') {
        i += 1;
    }
    if !after_dot && chars.get(i) == Some(&'0') && matches!(chars.get(i + 1), Some('x' | 'X')) {
        i += 2;
        while chars.get(i).is_some_and(|c| c.is_ascii_hexdigit()) {
            i += 1;
        }
        return i;
    }
    while digit(i) {
        i += 1;
    }
    if after_dot {
        return i;
    }
    if chars.get(i) == Some(&'.') && digit(i + 1) {
        i += 1;
        while digit(i) {
            i += 1;
        }
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        let mut j = i + 1;
        if matches!(chars.get(j), Some('+' | '-')) {
            j += 1;
        }
        if digit(j) {
            i = j;
            while digit(i) {
                i += 1;
            }
        }
    }
    while chars.get(i).copied().is_some_and(is_ident_char) {
        i += 1;
    }
    i
}

/// Parses `file:line` (or `"file":line`) from a trailing comment.
fn parse_loc(comment: &str) -> Option<SourceLoc> {
    let t = comment.trim();
    let digits = |s: &str| -> Option<u32> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    if t.starts_with('"') {
        let chars: Vec<char> = t.chars().collect();
        let (file, end) = unescape(&chars, 1).ok()?;
        let rest: String = chars[end..].iter().collect();
        let line = digits(rest.strip_prefix(':')?)?;
        return Some(SourceLoc { file, line });
    }
    let (file, line) = t.rsplit_once(':')?;
    Some(SourceLoc { file: file.to_string(), line: digits(line)? })
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// Parses the text form.
pub fn parse(text: &str) -> Result<Kernel, ParseError> {
    let Lexed { toks, comments } = lex(text)?;
    let mut p = Parser {
        toks,
        pos: 0,
        comments,
        names: HashMap::new(),
        depth: 0,
        last_line: 1,
        kernel: Kernel {
            name: String::new(),
            params: vec![],
            spec_constants: vec![],
            threadgroup_arrays: vec![],
            locals: vec![],
            body: vec![],
        },
        named: false,
    };
    p.kernel()?;
    Ok(p.kernel)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Entity {
    Param(u32),
    Spec(u32),
    Tg(u32),
    Local(u32),
}

impl Entity {
    fn what(self) -> &'static str {
        match self {
            Entity::Param(_) => "parameter",
            Entity::Spec(_) => "spec constant",
            Entity::Tg(_) => "threadgroup array",
            Entity::Local(_) => "local",
        }
    }
}

type PResult<T> = Result<T, ParseError>;

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    comments: HashMap<u32, String>,
    names: HashMap<String, Entity>,
    depth: u32,
    /// Line of the last token consumed.
    last_line: u32,
    kernel: Kernel,
    /// Whether the kernel's name has been read (errors then name it).
    named: bool,
}

fn binop_from_punct(p: &str) -> Option<BinaryOp> {
    BinaryOp::ALL.into_iter().find(|op| op.symbol() == p)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn suggest(name: &str, candidates: impl Iterator<Item = &'static str>) -> Option<&'static str> {
    if name.chars().count() > 64 {
        return None;
    }
    let limit = (name.chars().count() / 3).clamp(2, 4);
    candidates.map(|c| (edit_distance(name, c), c)).filter(|(d, _)| *d <= limit).min().map(|(_, c)| c)
}

fn builtin_suggestion(name: &str) -> Option<&'static str> {
    suggest(name, Builtin::ALL.iter().map(|b| b.name()))
}

fn looks_like_builtin(name: &str) -> bool {
    ["thread_", "threads_", "threadgroup_", "threadgroups_", "simdgroup_", "simdgroups_", "simd_lane", "lane_"]
        .iter()
        .any(|p| name.starts_with(p))
        || builtin_suggestion(name).is_some()
}

impl Parser {
    fn tok(&self) -> &Token {
        // The lexer always ends the tokens with `Eof`, and `bump` never moves past it.
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek(&self) -> &Tok {
        &self.tok().tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        let i = (self.pos + n).min(self.toks.len() - 1);
        &self.toks[i].tok
    }

    fn bump(&mut self) -> Token {
        let t = self.tok().clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        self.last_line = t.line;
        t
    }

    fn err_at(&self, t: &Token, kind: ParseErrorKind) -> ParseError {
        ParseError {
            kernel: self.named.then(|| self.kernel.name.clone()),
            line: t.line,
            column: t.col,
            kind,
        }
    }

    fn err(&self, kind: ParseErrorKind) -> ParseError {
        self.err_at(self.tok(), kind)
    }

    fn expected(&self, what: &str) -> ParseError {
        self.err(ParseErrorKind::Expected { expected: what.into(), found: self.peek().describe() })
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let yes = self.is_punct(p);
        if yes {
            self.bump();
        }
        yes
    }

    fn expect_punct(&mut self, p: &str) -> PResult<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{p}`")))
        }
    }

    fn is_ident(&self, word: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == word)
    }

    fn eat_ident(&mut self, word: &str) -> bool {
        let yes = self.is_ident(word);
        if yes {
            self.bump();
        }
        yes
    }

    fn expect_ident(&mut self, word: &str) -> PResult<()> {
        if self.eat_ident(word) {
            Ok(())
        } else {
            Err(self.expected(&format!("`{word}`")))
        }
    }

    fn enter(&mut self) -> PResult<()> {
        if self.depth >= MAX_NESTING {
            return Err(self.err(ParseErrorKind::TooDeep { limit: MAX_NESTING }));
        }
        self.depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn take_loc(&mut self, line: u32) -> Option<SourceLoc> {
        self.comments.remove(&line).and_then(|c| parse_loc(&c))
    }

    /// A name being declared: an identifier or a quoted string.
    fn decl_name(&mut self) -> PResult<String> {
        match self.peek().clone() {
            Tok::Ident(s) | Tok::Quoted(s) => {
                self.bump();
                Ok(s)
            }
            _ => Err(self.expected("a name")),
        }
    }

    fn declare(&mut self, name: &str, entity: Entity, at: &Token) -> PResult<()> {
        if self.names.contains_key(name) {
            return Err(self.err_at(at, ParseErrorKind::DuplicateName { name: name.into() }));
        }
        self.names.insert(name.to_string(), entity);
        Ok(())
    }

    fn ty(&mut self) -> PResult<Type> {
        match self.peek().clone() {
            Tok::Ident(s) => match type_from_text(&s) {
                Some(t) => {
                    self.bump();
                    Ok(t)
                }
                None => Err(self.err(ParseErrorKind::UnknownType { name: s })),
            },
            _ => Err(self.expected("a type")),
        }
    }

    fn scalar(&mut self) -> PResult<Scalar> {
        let at = self.tok().clone();
        let t = self.ty()?;
        if t.is_vector() {
            return Err(self.err_at(&at, ParseErrorKind::Expected { expected: "a scalar type".into(), found: format!("`{t}`") }));
        }
        Ok(t.elem())
    }

    /// A plain unsigned decimal number with no suffix.
    fn plain_u64(&mut self, what: &str) -> PResult<u64> {
        match self.peek().clone() {
            Tok::Number(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => match s.parse::<u64>() {
                Ok(v) => {
                    self.bump();
                    Ok(v)
                }
                Err(_) => Err(self.err(ParseErrorKind::InvalidLiteral { text: s, reason: "too large".into() })),
            },
            _ => Err(self.expected(what)),
        }
    }

    fn plain_u32(&mut self, what: &str) -> PResult<u32> {
        let at = self.tok().clone();
        let v = self.plain_u64(what)?;
        u32::try_from(v).map_err(|_| self.err_at(&at, ParseErrorKind::InvalidLiteral { text: v.to_string(), reason: "does not fit in u32".into() }))
    }

    // --- kernel and declarations -------------------------------------------

    fn kernel(&mut self) -> PResult<()> {
        self.expect_ident("kernel")?;
        self.kernel.name = self.decl_name()?;
        self.named = true;
        self.expect_punct("(")?;
        while !self.is_punct(")") {
            self.param()?;
            if !self.eat_punct(",") {
                break;
            }
        }
        self.expect_punct(")")?;
        self.expect_punct("{")?;
        self.decls()?;
        let body = self.block_rest()?;
        self.kernel.body = body;
        if *self.peek() != Tok::Eof {
            return Err(self.expected("the end of the text after the kernel's closing `}`"));
        }
        Ok(())
    }

    fn param(&mut self) -> PResult<()> {
        let at = self.tok().clone();
        let name = self.decl_name()?;
        self.expect_punct(":")?;
        let kind = if self.eat_ident("device") {
            let elem = self.ty()?;
            let access = if self.eat_ident("read") {
                Access::Read
            } else if self.eat_ident("read_write") {
                Access::ReadWrite
            } else {
                return Err(self.expected("`read` or `read_write`"));
            };
            ParamKind::Buffer { elem, access }
        } else {
            ParamKind::Value { ty: self.ty()? }
        };
        self.declare(&name, Entity::Param(self.kernel.params.len() as u32), &at)?;
        self.kernel.params.push(Param { name, kind });
        Ok(())
    }

    /// True when the next tokens are `word name :` (a declaration).
    fn at_decl(&self, word: &str) -> bool {
        self.is_ident(word) && matches!(self.peek_at(1), Tok::Ident(_) | Tok::Quoted(_)) && *self.peek_at(2) == Tok::Punct(":")
    }

    fn decls(&mut self) -> PResult<()> {
        loop {
            while self.eat_punct(";") {}
            if self.at_decl("spec") {
                self.bump();
                let at = self.tok().clone();
                let name = self.decl_name()?;
                self.expect_punct(":")?;
                let ty = self.scalar()?;
                self.expect_punct("=")?;
                let default = self.literal()?;
                self.declare(&name, Entity::Spec(self.kernel.spec_constants.len() as u32), &at)?;
                self.kernel.spec_constants.push(SpecConstant { name, ty, default });
            } else if self.at_decl("threadgroup") {
                self.bump();
                let at = self.tok().clone();
                let name = self.decl_name()?;
                self.expect_punct(":")?;
                let elem = self.ty()?;
                self.expect_punct("[")?;
                let len = self.plain_u32("the array length")?;
                self.expect_punct("]")?;
                self.declare(&name, Entity::Tg(self.kernel.threadgroup_arrays.len() as u32), &at)?;
                self.kernel.threadgroup_arrays.push(ThreadgroupArray { name, elem, len });
            } else if self.at_decl("var") {
                self.bump();
                let at = self.tok().clone();
                let name = self.decl_name()?;
                self.expect_punct(":")?;
                let ty = self.ty()?;
                self.declare(&name, Entity::Local(self.kernel.locals.len() as u32), &at)?;
                self.kernel.locals.push(Local { name, ty });
            } else {
                return Ok(());
            }
        }
    }

    // --- statements ----------------------------------------------------------

    /// Statements up to and including the closing `}`.
    fn block_rest(&mut self) -> PResult<Block> {
        self.enter()?;
        let mut block = Vec::new();
        loop {
            if self.eat_punct("}") {
                break;
            }
            if self.eat_punct(";") {
                continue;
            }
            if *self.peek() == Tok::Eof {
                self.leave();
                return Err(self.expected("a statement or `}`"));
            }
            match self.stmt() {
                Ok(s) => block.push(s),
                Err(e) => {
                    self.leave();
                    return Err(e);
                }
            }
        }
        self.leave();
        Ok(block)
    }

    /// `{ stmts }` with the location comment of the opening line.
    fn body(&mut self) -> PResult<(Block, Option<SourceLoc>)> {
        self.expect_punct("{")?;
        let loc = self.take_loc(self.last_line);
        Ok((self.block_rest()?, loc))
    }

    fn paren_cond(&mut self) -> PResult<Expr> {
        self.expect_punct("(")?;
        let e = self.expr()?;
        self.expect_punct(")")?;
        Ok(e)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        if let Tok::Ident(word) = self.peek().clone() {
            let kind = match word.as_str() {
                "if" => return self.if_stmt(),
                "for" => {
                    self.bump();
                    let var = self.local_target()?;
                    self.expect_ident("in")?;
                    self.expect_punct("(")?;
                    let start = self.expr()?;
                    self.expect_punct(",")?;
                    let end = self.expr()?;
                    self.expect_punct(",")?;
                    let step = self.expr()?;
                    self.expect_punct(")")?;
                    let (body, loc) = self.body()?;
                    return Ok(Stmt { kind: StmtKind::For { var, start, end, step, body }, loc });
                }
                "while" => {
                    self.bump();
                    let cond = self.paren_cond()?;
                    let (body, loc) = self.body()?;
                    return Ok(Stmt { kind: StmtKind::While { cond, body }, loc });
                }
                "break" | "continue" | "return" => {
                    self.bump();
                    Some(match word.as_str() {
                        "break" => StmtKind::Break,
                        "continue" => StmtKind::Continue,
                        _ => StmtKind::Return,
                    })
                }
                "threadgroup_barrier" | "simdgroup_barrier" => {
                    self.bump();
                    let scope =
                        if word == "threadgroup_barrier" { BarrierScope::Threadgroup } else { BarrierScope::Simdgroup };
                    self.expect_punct("(")?;
                    let flags = self.mem_flags()?;
                    self.expect_punct(")")?;
                    Some(StmtKind::Barrier { scope, flags })
                }
                "spec" | "threadgroup" | "var" if self.at_decl(&word) => {
                    return Err(self.err(ParseErrorKind::Expected {
                        expected: "a statement (declarations come before the first statement)".into(),
                        found: format!("the declaration `{word}`"),
                    }))
                }
                w if w.starts_with("atomic_") && *self.peek_at(1) == Tok::Punct("(") => Some(self.atomic(None)?),
                _ => None,
            };
            if let Some(kind) = kind {
                let loc = self.take_loc(self.last_line);
                return Ok(Stmt { kind, loc });
            }
        }
        let at = self.tok().clone();
        if !matches!(at.tok, Tok::Ident(_) | Tok::Quoted(_) | Tok::Punct("$")) {
            return Err(self.expected("a statement"));
        }
        let target = self.reference()?;
        let kind = if self.eat_punct("[") {
            let mem = self.memory_of(target, &at)?;
            let index = self.expr()?;
            self.expect_punct("]")?;
            self.expect_punct("=")?;
            let value = self.expr()?;
            StmtKind::Store { mem, index, value }
        } else if self.eat_punct("=") {
            let var = self.local_of(target, &at)?;
            match self.peek() {
                Tok::Ident(w) if w.starts_with("atomic_") && *self.peek_at(1) == Tok::Punct("(") => self.atomic(Some(var))?,
                _ => StmtKind::Assign { var, value: self.expr()? },
            }
        } else {
            return Err(self.expected("`=` or `[` after the name at the start of a statement"));
        };
        let loc = self.take_loc(self.last_line);
        Ok(Stmt { kind, loc })
    }

    fn if_stmt(&mut self) -> PResult<Stmt> {
        self.expect_ident("if")?;
        let cond = self.paren_cond()?;
        let (then_body, loc) = self.body()?;
        let else_body = if self.eat_ident("else") {
            if self.is_ident("if") {
                // `else if` nests like a block.
                self.enter()?;
                let r = self.if_stmt();
                self.leave();
                vec![r?]
            } else {
                self.body()?.0
            }
        } else {
            vec![]
        };
        Ok(Stmt { kind: StmtKind::If { cond, then_body, else_body }, loc })
    }

    fn mem_flags(&mut self) -> PResult<MemFlags> {
        let (mut tg, mut dev) = (false, false);
        loop {
            let flag = match self.peek() {
                Tok::Ident(s) => MemFlags::from_name(s),
                _ => None,
            };
            match flag {
                Some(MemFlags::None) => {}
                Some(MemFlags::Threadgroup) => tg = true,
                Some(MemFlags::Device) => dev = true,
                Some(MemFlags::DeviceAndThreadgroup) => (tg, dev) = (true, true),
                None => return Err(self.expected("a memory flag (`mem_none`, `mem_threadgroup`, `mem_device`)")),
            }
            self.bump();
            if !self.eat_punct("|") {
                break;
            }
        }
        Ok(match (tg, dev) {
            (false, false) => MemFlags::None,
            (true, false) => MemFlags::Threadgroup,
            (false, true) => MemFlags::Device,
            (true, true) => MemFlags::DeviceAndThreadgroup,
        })
    }

    fn atomic(&mut self, result: Option<VarId>) -> PResult<StmtKind> {
        let at = self.bump();
        let Tok::Ident(name) = &at.tok else {
            return Err(self.err_at(&at, ParseErrorKind::Expected { expected: "an atomic operation".into(), found: at.tok.describe() }));
        };
        let op_name = name.strip_prefix("atomic_").unwrap_or(name);
        self.expect_punct("(")?;
        let mem_at = self.tok().clone();
        let target = self.reference()?;
        let mem = self.memory_of(target, &mem_at)?;
        self.expect_punct("[")?;
        let index = self.expr()?;
        self.expect_punct("]")?;
        self.expect_punct(",")?;
        if op_name == "compare_exchange" {
            let expected = self.expr()?;
            self.expect_punct(",")?;
            let desired = self.expr()?;
            self.expect_punct(")")?;
            return Ok(StmtKind::AtomicCompareExchange { mem, index, expected, desired, result });
        }
        let op = AtomicOp::from_name(op_name.strip_prefix("fetch_").unwrap_or(op_name)).ok_or_else(|| {
            let candidates = AtomicOp::ALL
                .iter()
                .map(|o| match o {
                    AtomicOp::Add => "atomic_add",
                    AtomicOp::Sub => "atomic_sub",
                    AtomicOp::Min => "atomic_min",
                    AtomicOp::Max => "atomic_max",
                    AtomicOp::And => "atomic_and",
                    AtomicOp::Or => "atomic_or",
                    AtomicOp::Xor => "atomic_xor",
                    AtomicOp::Exchange => "atomic_exchange",
                })
                .chain(std::iter::once("atomic_compare_exchange"));
            self.err_at(&at, ParseErrorKind::UnknownFunction { name: name.clone(), suggestion: suggest(name, candidates) })
        })?;
        let value = self.expr()?;
        self.expect_punct(")")?;
        Ok(StmtKind::Atomic { op, mem, index, value, result })
    }

    // --- references ----------------------------------------------------------

    /// A declared name (plain or quoted) or a `$kind(n)` id.
    fn reference(&mut self) -> PResult<Entity> {
        let at = self.tok().clone();
        match &at.tok {
            Tok::Ident(s) | Tok::Quoted(s) => match self.names.get(s).copied() {
                Some(e) => {
                    self.bump();
                    Ok(e)
                }
                None => Err(self.err(ParseErrorKind::UnknownName { name: s.clone() })),
            },
            Tok::Punct("$") => self.dollar(),
            _ => Err(self.expected("a name")),
        }
    }

    fn dollar(&mut self) -> PResult<Entity> {
        self.expect_punct("$")?;
        let kind = match self.peek() {
            Tok::Ident(s) => s.clone(),
            _ => return Err(self.expected("`param`, `spec`, `tg` or `local` after `$`")),
        };
        let make: fn(u32) -> Entity = match kind.as_str() {
            "param" => Entity::Param,
            "spec" => Entity::Spec,
            "tg" => Entity::Tg,
            "local" => Entity::Local,
            _ => return Err(self.expected("`param`, `spec`, `tg` or `local` after `$`")),
        };
        self.bump();
        self.expect_punct("(")?;
        let n = self.plain_u32("an index")?;
        self.expect_punct(")")?;
        Ok(make(n))
    }

    fn local_target(&mut self) -> PResult<VarId> {
        let at = self.tok().clone();
        let e = self.reference()?;
        self.local_of(e, &at)
    }

    fn entity_name(&self, at: &Token) -> String {
        match &at.tok {
            Tok::Ident(s) | Tok::Quoted(s) => s.clone(),
            _ => "$…".into(),
        }
    }

    fn local_of(&self, e: Entity, at: &Token) -> PResult<VarId> {
        match e {
            Entity::Local(v) => Ok(VarId(v)),
            other => Err(self.err_at(
                at,
                ParseErrorKind::WrongKind { name: self.entity_name(at), what: other.what(), expected: "only locals can be assigned" },
            )),
        }
    }

    fn memory_of(&self, e: Entity, at: &Token) -> PResult<Memory> {
        match e {
            Entity::Param(p) => Ok(Memory::Buffer(ParamId(p))),
            Entity::Tg(t) => Ok(Memory::Threadgroup(TgArrayId(t))),
            other => Err(self.err_at(
                at,
                ParseErrorKind::WrongKind {
                    name: self.entity_name(at),
                    what: other.what(),
                    expected: "only buffers and threadgroup arrays can be indexed",
                },
            )),
        }
    }

    /// The value of a reference, or a load when `[` follows.
    fn entity_value(&mut self, e: Entity, at: &Token) -> PResult<Expr> {
        if self.eat_punct("[") {
            let mem = self.memory_of(e, at)?;
            let index = self.expr()?;
            self.expect_punct("]")?;
            return Ok(Expr::Load { mem, index: Box::new(index) });
        }
        Ok(match e {
            Entity::Param(p) => Expr::Param(ParamId(p)),
            Entity::Spec(s) => Expr::Spec(SpecId(s)),
            Entity::Local(v) => Expr::Var(VarId(v)),
            Entity::Tg(_) => {
                return Err(self.err_at(
                    at,
                    ParseErrorKind::WrongKind {
                        name: self.entity_name(at),
                        what: "threadgroup array",
                        expected: "index it (`name[i]`) to read an element",
                    },
                ))
            }
        })
    }

    // --- expressions ---------------------------------------------------------

    /// An expression with at most one unparenthesised binary operator.
    fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.expr_inner();
        self.leave();
        r
    }

    /// `a -3i32` lexes the `-` into the number; between operands it is a minus.
    fn split_negative_number(&mut self) {
        let t = self.tok().clone();
        if let Tok::Number(s) = &t.tok {
            if let Some(rest) = s.strip_prefix('-') {
                let rest = rest.to_string();
                self.toks[self.pos] = Token { tok: Tok::Punct("-"), ..t.clone() };
                self.toks.insert(self.pos + 1, Token { tok: Tok::Number(rest), line: t.line, col: t.col.saturating_add(1) });
            }
        }
    }

    fn peek_binop(&mut self) -> Option<BinaryOp> {
        self.split_negative_number();
        match self.peek() {
            Tok::Punct(p) => binop_from_punct(p),
            _ => None,
        }
    }

    fn expr_inner(&mut self) -> PResult<Expr> {
        let lhs = self.unary()?;
        let Some(op) = self.peek_binop() else { return Ok(lhs) };
        self.bump();
        let rhs = self.unary()?;
        if let Some(next) = self.peek_binop() {
            return Err(self.err(ParseErrorKind::Expected {
                expected: "`)`: operators do not chain; parenthesise each operation, e.g. `((a + b) + c)`".into(),
                found: format!("`{}`", next.symbol()),
            }));
        }
        Ok(Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) })
    }

    fn unary(&mut self) -> PResult<Expr> {
        let op = match self.peek() {
            Tok::Punct("-") => Some(UnaryOp::Neg),
            Tok::Punct("~") => Some(UnaryOp::BitNot),
            Tok::Punct("!") => Some(UnaryOp::Not),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            self.enter()?;
            let arg = self.unary();
            self.leave();
            return Ok(Expr::Unary { op, arg: Box::new(arg?) });
        }
        let mut e = self.primary()?;
        let mut chain = 0;
        while self.is_punct(".") {
            self.bump();
            let index = match self.peek().clone() {
                Tok::Ident(c) => match c.as_str() {
                    "x" => 0,
                    "y" => 1,
                    "z" => 2,
                    "w" => 3,
                    _ => return Err(self.expected("a vector component (`x`, `y`, `z`, `w`, or a number)")),
                },
                Tok::Number(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => match n.parse::<u8>() {
                    Ok(i) => i,
                    Err(_) => return Err(self.err(ParseErrorKind::InvalidLiteral { text: n, reason: "a component index is at most 255".into() })),
                },
                _ => return Err(self.expected("a vector component (`x`, `y`, `z`, `w`, or a number)")),
            };
            chain += 1;
            if chain > MAX_COMPONENT_CHAIN {
                return Err(self.err(ParseErrorKind::TooDeep { limit: MAX_COMPONENT_CHAIN }));
            }
            self.bump();
            e = Expr::Extract { arg: Box::new(e), index };
        }
        Ok(e)
    }

    fn call_args(&mut self) -> PResult<Vec<Expr>> {
        self.expect_punct("(")?;
        let mut args = Vec::new();
        while !self.is_punct(")") {
            args.push(self.expr()?);
            if !self.eat_punct(",") {
                break;
            }
        }
        self.expect_punct(")")?;
        Ok(args)
    }

    fn primary(&mut self) -> PResult<Expr> {
        let at = self.tok().clone();
        match &at.tok {
            Tok::Number(_) => Ok(Expr::Literal(self.literal()?)),
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect_punct(")")?;
                Ok(e)
            }
            Tok::Punct("$") => {
                let e = self.dollar()?;
                self.entity_value(e, &at)
            }
            Tok::Quoted(_) => {
                let e = self.reference()?;
                self.entity_value(e, &at)
            }
            Tok::Ident(word) => {
                let word = word.clone();
                let next = self.peek_at(1).clone();
                match (word.as_str(), &next) {
                    ("true" | "false", _) | ("lit", Tok::Punct("<")) => Ok(Expr::Literal(self.literal()?)),
                    ("cast" | "bitcast", Tok::Punct("<")) => {
                        self.bump();
                        self.bump();
                        let to = self.ty()?;
                        self.expect_punct(">")?;
                        self.expect_punct("(")?;
                        let arg = Box::new(self.expr()?);
                        self.expect_punct(")")?;
                        Ok(if word == "cast" { Expr::Cast { to, arg } } else { Expr::Bitcast { to, arg } })
                    }
                    (_, Tok::Punct("::")) => {
                        let mut name = word.clone();
                        self.bump();
                        while self.eat_punct("::") {
                            match self.peek().clone() {
                                Tok::Ident(part) => {
                                    self.bump();
                                    name.push_str("::");
                                    name.push_str(&part);
                                }
                                _ => return Err(self.expected("a name after `::`")),
                            }
                        }
                        self.call(name, &at)
                    }
                    (_, Tok::Punct("(")) => {
                        self.bump();
                        self.call(word, &at)
                    }
                    // A bare builtin name is the builtin: a declared name
                    // spelt like one prints quoted.
                    _ => match (Builtin::from_name(&word), self.names.get(&word)) {
                        (Some(b), _) => {
                            self.bump();
                            Ok(Expr::Builtin(b))
                        }
                        (None, Some(e)) => {
                            let e = *e;
                            self.bump();
                            self.entity_value(e, &at)
                        }
                        (None, None) if looks_like_builtin(&word) => Err(self.err(ParseErrorKind::UnknownBuiltin {
                            suggestion: builtin_suggestion(&word),
                            name: word,
                        })),
                        (None, None) => Err(self.err(ParseErrorKind::UnknownName { name: word })),
                    },
                }
            }
            _ => Err(self.expected("an expression")),
        }
    }

    /// A call or a vector constructor; the name has been consumed, `(` is next.
    fn call(&mut self, name: String, at: &Token) -> PResult<Expr> {
        if let Some(ty) = type_from_text(&name) {
            let components = self.call_args()?;
            return Ok(Expr::Vector { ty, components });
        }
        if let Some(func) = Intrinsic::from_name(&name) {
            let args = self.call_args()?;
            return Ok(Expr::Call { func, args });
        }
        if name.starts_with("atomic_") || name.ends_with("_barrier") {
            return Err(self.err_at(
                at,
                ParseErrorKind::Expected {
                    expected: "an expression (atomics and barriers are statements: `old = atomic_fetch_add(A[i], v)`)".into(),
                    found: format!("`{name}`"),
                },
            ));
        }
        let suggestion = suggest(&name, Intrinsic::ALL.iter().map(|i| i.name()));
        Err(self.err_at(at, ParseErrorKind::UnknownFunction { name, suggestion }))
    }

    // --- literals ------------------------------------------------------------

    fn literal(&mut self) -> PResult<Literal> {
        let at = self.tok().clone();
        match &at.tok {
            Tok::Ident(w) if w == "true" || w == "false" => {
                self.bump();
                Ok(Literal::bool(w == "true"))
            }
            Tok::Ident(w) if w == "lit" => self.explicit_literal(),
            Tok::Number(text) => {
                self.bump();
                self.number_literal(text, &at)
            }
            _ => Err(self.expected("a literal")),
        }
    }

    fn invalid(&self, at: &Token, text: &str, reason: &str) -> ParseError {
        self.err_at(at, ParseErrorKind::InvalidLiteral { text: text.into(), reason: reason.into() })
    }

    /// The `0x…` NaN payload in `nan_f32(0x…)` / `nan(0x…)`, when present.
    fn nan_payload(&mut self) -> PResult<f64> {
        if !self.eat_punct("(") {
            return Ok(f64::NAN);
        }
        let at = self.tok().clone();
        let bits = match &at.tok {
            Tok::Number(h) => h.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()),
            _ => None,
        };
        let Some(bits) = bits.filter(|b| f64::from_bits(*b).is_nan()) else {
            return Err(self.expected("the f64 bits of a NaN, e.g. `0x7ff8000000000001`"));
        };
        self.bump();
        self.expect_punct(")")?;
        Ok(f64::from_bits(bits))
    }

    fn number_literal(&mut self, text: &str, at: &Token) -> PResult<Literal> {
        let (neg, body) = match text.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, text),
        };
        if let Some(suffix) = body.strip_prefix("inf_") {
            let ty = scalar_from_ir_name(suffix).ok_or_else(|| self.invalid(at, text, "unknown type"))?;
            let v = if neg { f64::NEG_INFINITY } else { f64::INFINITY };
            return Ok(Literal { ty, value: LiteralValue::Float(v) });
        }
        if let Some(suffix) = body.strip_prefix("nan_") {
            let ty = scalar_from_ir_name(suffix).ok_or_else(|| self.invalid(at, text, "unknown type"))?;
            return Ok(Literal { ty, value: LiteralValue::Float(self.nan_payload()?) });
        }
        if body.starts_with("0x") || body.starts_with("0X") {
            return Err(self.invalid(at, text, "hexadecimal numbers are only NaN payloads, as in `nan_f32(0x7ff8000000000001)`"));
        }
        // The number ends where the type suffix starts; in `1e5f32` the `e`
        // (followed by a digit or a signed digit) belongs to the number.
        let bytes = body.as_bytes();
        let digit_at = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
        let mut split = 0;
        while split < bytes.len() {
            let b = bytes[split];
            if b.is_ascii_digit() || b == b'.' {
                split += 1;
            } else if matches!(b, b'e' | b'E') && digit_at(split + 1) {
                split += 2;
            } else if matches!(b, b'e' | b'E') && matches!(bytes.get(split + 1), Some(b'-' | b'+')) && digit_at(split + 2) {
                split += 3;
            } else {
                break;
            }
        }
        let (mantissa, suffix) = body.split_at(split);
        if suffix.is_empty() {
            return Err(self.invalid(at, text, "a literal needs its type, as in `1u32`, `-3i32`, `0.5f32`"));
        }
        let ty = scalar_from_ir_name(suffix).ok_or_else(|| self.invalid(at, text, &format!("unknown type suffix `{suffix}`")))?;
        let integral = mantissa.bytes().all(|b| b.is_ascii_digit()) && !mantissa.is_empty();
        let signed = if neg { format!("-{mantissa}") } else { mantissa.to_string() };
        let value = if ty == Scalar::Bool {
            return Err(self.invalid(at, text, "bool literals are `true` and `false`"));
        } else if ty.is_float() {
            LiteralValue::Float(signed.parse::<f64>().map_err(|_| self.invalid(at, text, "not a number"))?)
        } else if !integral {
            return Err(self.invalid(at, text, "an integer literal has no fraction or exponent"));
        } else if ty.is_signed_int() {
            LiteralValue::Int(signed.parse::<i64>().map_err(|_| self.invalid(at, text, "does not fit in 64 bits"))?)
        } else if neg {
            return Err(self.invalid(at, text, "an unsigned literal cannot be negative"));
        } else {
            LiteralValue::UInt(mantissa.parse::<u64>().map_err(|_| self.invalid(at, text, "does not fit in 64 bits"))?)
        };
        Ok(Literal { ty, value })
    }

    /// `lit<T>(kind value)`: a literal whose value kind differs from its type's.
    fn explicit_literal(&mut self) -> PResult<Literal> {
        self.expect_ident("lit")?;
        self.expect_punct("<")?;
        let ty = self.scalar()?;
        self.expect_punct(">")?;
        self.expect_punct("(")?;
        let kind = match self.peek() {
            Tok::Ident(k) => k.clone(),
            _ => return Err(self.expected("`bool`, `int`, `uint` or `float`")),
        };
        self.bump();
        let at = self.tok().clone();
        let value = match (kind.as_str(), &at.tok) {
            ("bool", Tok::Ident(b)) if b == "true" || b == "false" => {
                self.bump();
                LiteralValue::Bool(b == "true")
            }
            ("int", Tok::Number(n)) => {
                let v = n.parse::<i64>().map_err(|_| self.invalid(&at, n, "expected an integer that fits in i64"))?;
                self.bump();
                LiteralValue::Int(v)
            }
            ("uint", Tok::Number(n)) => {
                let v = n.parse::<u64>().map_err(|_| self.invalid(&at, n, "expected an integer that fits in u64"))?;
                if n.starts_with('+') {
                    return Err(self.invalid(&at, n, "expected an integer that fits in u64"));
                }
                self.bump();
                LiteralValue::UInt(v)
            }
            ("float", _) => LiteralValue::Float(self.float_body()?),
            ("bool" | "int" | "uint", _) => return Err(self.expected(&format!("a {kind} value"))),
            _ => return Err(self.err(ParseErrorKind::Expected { expected: "`bool`, `int`, `uint` or `float`".into(), found: format!("`{kind}`") })),
        };
        self.expect_punct(")")?;
        Ok(Literal { ty, value })
    }

    fn float_body(&mut self) -> PResult<f64> {
        let at = self.tok().clone();
        match &at.tok {
            Tok::Number(n) => {
                let ok = n.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'));
                let v = n.parse::<f64>().ok().filter(|_| ok).ok_or_else(|| self.invalid(&at, n, "expected a decimal number"))?;
                self.bump();
                Ok(v)
            }
            Tok::Ident(w) if w == "inf" => {
                self.bump();
                Ok(f64::INFINITY)
            }
            Tok::Ident(w) if w == "nan" => {
                self.bump();
                self.nan_payload()
            }
            Tok::Punct("-") if matches!(self.peek_at(1), Tok::Ident(w) if w == "inf") => {
                self.bump();
                self.bump();
                Ok(f64::NEG_INFINITY)
            }
            _ => Err(self.expected("a float (`1.5`, `inf`, `-inf`, `nan`)")),
        }
    }
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

/// A JSON-form read error, with the position serde_json reports.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("invalid kernel JSON at line {line}, column {column}: {message}")]
pub struct JsonError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// The version of the JSON form, written first as `"schema"` and checked on
/// reading. Version 2 spells types as their IR names (`"f32x4"`); version 1
/// spelled them as `{"scalar","width"}` objects.
pub const JSON_SCHEMA: u32 = 2;

#[derive(serde::Serialize)]
struct Versioned<'a> {
    schema: u32,
    #[serde(flatten)]
    kernel: &'a Kernel,
}

#[derive(serde::Deserialize)]
struct Header {
    schema: Option<u32>,
}

/// The JSON form of `kernel`, on one line.
pub fn to_json(kernel: &Kernel) -> String {
    serde_json::to_string(&Versioned { schema: JSON_SCHEMA, kernel })
        .expect("a Kernel is plain data with string keys; serialising it cannot fail")
}

/// The JSON form of `kernel`, indented.
pub fn to_json_pretty(kernel: &Kernel) -> String {
    serde_json::to_string_pretty(&Versioned { schema: JSON_SCHEMA, kernel })
        .expect("a Kernel is plain data with string keys; serialising it cannot fail")
}

/// Reads the JSON form; a document of another schema version (or none) is an
/// error that says which version this reader takes.
pub fn from_json(json: &str) -> Result<Kernel, JsonError> {
    let err = |e: serde_json::Error| JsonError { line: e.line(), column: e.column(), message: e.to_string() };
    let header: Header = serde_json::from_str(json).map_err(err)?;
    if header.schema != Some(JSON_SCHEMA) {
        let found = header.schema.map_or("no \"schema\" field".to_string(), |v| format!("schema {v}"));
        return Err(JsonError {
            line: 1,
            column: 1,
            message: format!("{found}; this enigma reads IR JSON schema {JSON_SCHEMA}"),
        });
    }
    serde_json::from_str(json).map_err(err)
}
