//! The parser: tokens to a [`Kernel`], resolving names to ids as it goes,
//! with typed errors at the offending token and a limit on nesting.

use super::lex::{lex, parse_loc, Lexed, Tok, Token};
use super::{ParseError, ParseErrorKind};
use crate::ir::*;
use crate::types::{QuantCode, QuantLayout, Scalar, Type};
use std::collections::HashMap;

/// The deepest nesting (expressions and blocks together) the parser accepts.
pub const MAX_NESTING: u32 = 128;

/// How many `.x` may follow one another.
const MAX_COMPONENT_CHAIN: u32 = 8;

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
        kernel: Kernel::empty(""),
        named: false,
    };
    p.kernel()?;
    Ok(p.kernel)
}

impl std::str::FromStr for Kernel {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Kernel, ParseError> {
        parse(text)
    }
}

/// A type name: `f32`, `u32x4`, `f32x0` (an invalid width still reads back),
/// or an MSL name (`float4`, `half`).
pub(super) fn type_from_text(s: &str) -> Option<Type> {
    Type::from_ir_name(s)
}

fn scalar_from_ir_name(s: &str) -> Option<Scalar> {
    Scalar::from_ir_name(s)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Entity {
    Param(u32),
    Spec(u32),
    Tg(u32),
    Thread(u32),
    Local(u32),
    Coop(u32),
}

impl Entity {
    fn what(self) -> &'static str {
        match self {
            Entity::Param(_) => "parameter",
            Entity::Spec(_) => "spec constant",
            Entity::Tg(_) => "threadgroup array",
            Entity::Thread(_) => "per-thread array",
            Entity::Local(_) => "local",
            Entity::Coop(_) => "cooperative tensor",
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

/// The code and layout a `cooperative_dequantize_{code}[_{layout}]` name
/// spells (the row layout unnamed).
fn dequantize_code_layout(word: &str) -> Option<(QuantCode, QuantLayout)> {
    let rest = word.strip_prefix("cooperative_dequantize_")?;
    let (code, layout) = match rest.split_once('_') {
        Some((code, layout)) => (code, QuantLayout::from_name(layout).filter(|l| !l.is_rows())?),
        None => (rest, QuantLayout::Rows),
    };
    Some((QuantCode::ALL.into_iter().find(|c| c.name() == code)?, layout))
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
        } else if self.is_ident("texture2d") && *self.peek_at(1) == Tok::Punct("<") {
            self.bump();
            self.bump();
            let at = self.tok().clone();
            let texel = self.ty()?;
            if texel.width() != 1 || texel.is_matrix() {
                return Err(self.err_at(&at, ParseErrorKind::Expected { expected: "a scalar texel type (`f32`, `f16`, `i32`, `u32`)".into(), found: texel.to_string() }));
            }
            self.expect_punct(",")?;
            let access = match self.peek().clone() {
                Tok::Ident(word) if TextureAccess::from_name(&word).is_some() => {
                    self.bump();
                    TextureAccess::from_name(&word).expect("matched")
                }
                _ => return Err(self.expected("`read`, `write`, `read_write` or `sample`")),
            };
            self.expect_punct(">")?;
            ParamKind::Texture { texel: texel.elem(), access }
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
            } else if self.at_decl("cooperative") {
                self.bump();
                let at = self.tok().clone();
                let name = self.decl_name()?;
                self.expect_punct(":")?;
                self.expect_ident("cooperative_tensor")?;
                self.expect_punct("<")?;
                let elem = self.scalar()?;
                self.expect_punct(",")?;
                let rows = self.plain_u32("the rows")?;
                self.expect_punct(",")?;
                let cols = self.plain_u32("the columns")?;
                self.expect_punct(",")?;
                let scope = self.scope()?;
                self.expect_punct(">")?;
                self.declare(&name, Entity::Coop(self.kernel.cooperative_tensors.len() as u32), &at)?;
                self.kernel.cooperative_tensors.push(crate::cooperative::CooperativeTensor { name, elem, rows, cols, scope });
            } else if self.at_decl("thread") {
                self.bump();
                let at = self.tok().clone();
                let name = self.decl_name()?;
                self.expect_punct(":")?;
                let elem = self.ty()?;
                self.expect_punct("[")?;
                let len = self.plain_u32("the array length")?;
                self.expect_punct("]")?;
                self.declare(&name, Entity::Thread(self.kernel.thread_arrays.len() as u32), &at)?;
                self.kernel.thread_arrays.push(ThreadArray { name, elem, len });
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
                    let unroll = self.is_ident("unroll");
                    if unroll {
                        self.bump();
                    }
                    let (body, loc) = self.body()?;
                    return Ok(Stmt { kind: StmtKind::For { var, start, end, step, body, unroll }, loc });
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
                "matmul2d"
                | "matmul2d_overlapped"
                | "cooperative_load"
                | "cooperative_store"
                | "reduce_rows"
                | "reduce_columns"
                | "combine"
                    if *self.peek_at(1) == Tok::Punct("(") =>
                {
                    Some(self.cooperative_stmt(&word)?)
                }
                w if dequantize_code_layout(w).is_some() && *self.peek_at(1) == Tok::Punct("(") => Some(self.cooperative_stmt(&word)?),
                "spec" | "threadgroup" | "var" | "cooperative" if self.at_decl(&word) => {
                    return Err(self.err(ParseErrorKind::Expected {
                        expected: "a statement (declarations come before the first statement)".into(),
                        found: format!("the declaration `{word}`"),
                    }))
                }
                w if w.starts_with("atomic_") && *self.peek_at(1) == Tok::Punct("(") => Some(self.atomic(None)?),
                "async_copy" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    let (dst, dst_index) = self.memory_element()?;
                    self.expect_punct(",")?;
                    let (src, src_index) = self.memory_element()?;
                    self.expect_punct(",")?;
                    let count = self.plain_u32("an element count")?;
                    self.expect_punct(",")?;
                    let valid = self.expr()?;
                    self.expect_punct(")")?;
                    Some(StmtKind::AsyncCopy { dst, dst_index, src, src_index, count, valid })
                }
                "tile_copy" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    let barrier = self.expr()?;
                    self.expect_punct(",")?;
                    let (dst, dst_index) = self.memory_element()?;
                    self.expect_punct(",")?;
                    let src = self.memory_arg()?;
                    let mut e = Vec::with_capacity(5);
                    for _ in 0..5 {
                        self.expect_punct(",")?;
                        e.push(self.expr()?);
                    }
                    self.expect_punct(",")?;
                    let rows = self.plain_u32("a box's row count")?;
                    self.expect_punct(",")?;
                    let cols = self.plain_u32("a box's column count")?;
                    self.expect_punct(")")?;
                    let [extent_rows, extent_cols, pitch, row, col]: [Expr; 5] = e.try_into().expect("five expressions parsed");
                    Some(StmtKind::TileCopy(Box::new(TileCopy {
                        barrier,
                        dst,
                        dst_index,
                        src,
                        extents: [extent_rows, extent_cols],
                        pitch,
                        origin: [row, col],
                        rows,
                        cols,
                    })))
                }
                "tile_wait" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    let barrier = self.expr()?;
                    self.expect_punct(")")?;
                    Some(StmtKind::TileWait { barrier })
                }
                "async_commit" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    self.expect_punct(")")?;
                    Some(StmtKind::AsyncCommit)
                }
                "async_wait" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    let pending = self.plain_u32("a count of copy groups")?;
                    self.expect_punct(")")?;
                    Some(StmtKind::AsyncWait { pending })
                }
                "print" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    let Tok::Quoted(format) = self.peek().clone() else {
                        return Err(self.expected("a quoted format string"));
                    };
                    self.bump();
                    let mut args = vec![];
                    while self.eat_punct(",") {
                        args.push(self.expr()?);
                    }
                    self.expect_punct(")")?;
                    Some(StmtKind::Print { format, args })
                }
                "device_fence" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    self.expect_punct(")")?;
                    Some(StmtKind::DeviceFence)
                }
                "texture_fence" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    let tex = self.texture_arg()?;
                    self.expect_punct(")")?;
                    Some(StmtKind::TextureFence { tex })
                }
                "texture_write" if *self.peek_at(1) == Tok::Punct("(") => {
                    self.bump();
                    self.bump();
                    let tex = self.texture_arg()?;
                    self.expect_punct(",")?;
                    let value = self.expr()?;
                    self.expect_punct(",")?;
                    let coord = self.expr()?;
                    self.expect_punct(")")?;
                    Some(StmtKind::TextureWrite { tex, value, coord })
                }
                "simdgroup_store" | "simdgroup_store_transposed" => {
                    self.bump();
                    self.expect_punct("(")?;
                    let value = self.expr()?;
                    self.expect_punct(",")?;
                    let mem = self.memory_arg()?;
                    self.expect_punct(",")?;
                    let offset = self.expr()?;
                    self.expect_punct(",")?;
                    let stride = self.expr()?;
                    self.expect_punct(")")?;
                    Some(StmtKind::MatrixStore { value, mem, offset, stride, transpose: word == "simdgroup_store_transposed" })
                }
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
        let kind = if let (Entity::Coop(t), true) = (target, self.is_punct("[")) {
            self.bump();
            let index = self.expr()?;
            self.expect_punct("]")?;
            self.expect_punct("=")?;
            let value = self.expr()?;
            StmtKind::CooperativeSet { tensor: crate::cooperative::CoopId(t), index, value }
        } else if self.eat_punct("[") {
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
        let (mut tg, mut dev, mut tex) = (false, false, false);
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
                Some(MemFlags::Texture) => tex = true,
                None => return Err(self.expected("a memory flag (`mem_none`, `mem_threadgroup`, `mem_device`, `mem_texture`)")),
            }
            self.bump();
            if !self.eat_punct("|") {
                break;
            }
        }
        if tex {
            if tg || dev {
                return Err(self.expected("`mem_texture` alone (combinations with it are not in the IR yet: use two barriers)"));
            }
            return Ok(MemFlags::Texture);
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
            _ => return Err(self.expected("`param`, `spec`, `tg`, `thread` or `local` after `$`")),
        };
        let make: fn(u32) -> Entity = match kind.as_str() {
            "param" => Entity::Param,
            "spec" => Entity::Spec,
            "tg" => Entity::Tg,
            "thread" => Entity::Thread,
            "local" => Entity::Local,
            "coop" => Entity::Coop,
            _ => return Err(self.expected("`param`, `spec`, `tg`, `thread`, `local` or `coop` after `$`")),
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
            Entity::Thread(t) => Ok(Memory::Thread(ThreadArrayId(t))),
            other => Err(self.err_at(
                at,
                ParseErrorKind::WrongKind {
                    name: self.entity_name(at),
                    what: other.what(),
                    expected: "only buffers, threadgroup arrays and per-thread arrays can be indexed",
                },
            )),
        }
    }

    /// The value of a reference, or a load when `[` follows.
    fn entity_value(&mut self, e: Entity, at: &Token) -> PResult<Expr> {
        if let (Entity::Coop(t), true) = (e, self.is_punct("[")) {
            self.bump();
            let index = Box::new(self.expr()?);
            self.expect_punct("]")?;
            return Ok(Expr::CooperativeElement { tensor: crate::cooperative::CoopId(t), index });
        }
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
            Entity::Coop(_) => {
                return Err(self.err_at(
                    at,
                    ParseErrorKind::WrongKind {
                        name: self.entity_name(at),
                        what: "cooperative tensor",
                        expected: "index it (`name[i]`) to read a slot",
                    },
                ))
            }
            e @ (Entity::Tg(_) | Entity::Thread(_)) => {
                return Err(self.err_at(
                    at,
                    ParseErrorKind::WrongKind {
                        name: self.entity_name(at),
                        what: e.what(),
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
                    (
                        "simdgroup_fill" | "simdgroup_diagonal" | "simdgroup_load" | "simdgroup_load_transposed" | "simdgroup_load_int4" | "simdgroup_load_fp4"
                        | "simdgroup_load_int4_fragments" | "simdgroup_load_fp4_fragments" | "matrix_row" | "matrix_col",
                        Tok::Punct("<"),
                    ) => self.matrix_primary(&word),
                    ("simdgroup_multiply" | "simdgroup_multiply_accumulate" | "thread_element", Tok::Punct("(")) => {
                        self.bump();
                        self.bump();
                        let first = Box::new(self.expr()?);
                        self.expect_punct(",")?;
                        let e = if word == "thread_element" {
                            let index = self.small_index("an element index")?;
                            Expr::MatrixElement { matrix: first, index }
                        } else {
                            let b = Box::new(self.expr()?);
                            let acc = if word == "simdgroup_multiply_accumulate" {
                                self.expect_punct(",")?;
                                Some(Box::new(self.expr()?))
                            } else {
                                None
                            };
                            Expr::MatrixMultiply { a: first, b, acc }
                        };
                        self.expect_punct(")")?;
                        Ok(e)
                    }
                    ("dim_check", Tok::Punct("(")) => {
                        self.bump();
                        self.bump();
                        let mem = self.memory_arg()?;
                        self.expect_punct(",")?;
                        let dim = self.small_index("a dimension")?;
                        self.expect_punct(",")?;
                        let index = Box::new(self.expr()?);
                        self.expect_punct(",")?;
                        let size = Box::new(self.expr()?);
                        self.expect_punct(")")?;
                        Ok(Expr::DimCheck { mem, dim, index, size })
                    }
                    ("get_capacity" | "is_valid_element" | "get_multidimensional_index", Tok::Punct("(")) => {
                        self.bump();
                        self.bump();
                        let tensor = self.coop_arg()?;
                        let e = if word == "get_capacity" {
                            Expr::CooperativeCapacity { tensor }
                        } else {
                            self.expect_punct(",")?;
                            let index = Box::new(self.expr()?);
                            if word == "is_valid_element" {
                                Expr::CooperativeValid { tensor, index }
                            } else {
                                self.expect_punct(",")?;
                                let dim = self.small_index("a coordinate")?;
                                Expr::CooperativeCoord { tensor, index, dim }
                            }
                        };
                        self.expect_punct(")")?;
                        Ok(e)
                    }
                    ("texture_sample", Tok::Punct("(")) => {
                        self.bump();
                        self.bump();
                        let tex = self.texture_arg()?;
                        self.expect_punct(",")?;
                        let sampler = self.sampler()?;
                        self.expect_punct(",")?;
                        let uv = Box::new(self.expr()?);
                        self.expect_punct(")")?;
                        Ok(Expr::TextureSample { tex, sampler, uv })
                    }
                    ("texture_read" | "get_width" | "get_height", Tok::Punct("(")) => {
                        self.bump();
                        self.bump();
                        let tex = self.texture_arg()?;
                        let e = match word.as_str() {
                            "texture_read" => {
                                self.expect_punct(",")?;
                                Expr::TextureRead { tex, coord: Box::new(self.expr()?) }
                            }
                            "get_width" => Expr::TextureSize { tex, dim: TextureDim::Width },
                            _ => Expr::TextureSize { tex, dim: TextureDim::Height },
                        };
                        self.expect_punct(")")?;
                        Ok(e)
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

    /// A matrix expression with a type argument (`simdgroup_load<mat8x8_f16>(…)`);
    /// the name is next.
    fn matrix_primary(&mut self, word: &str) -> PResult<Expr> {
        self.bump();
        self.bump();
        let at = self.tok().clone();
        let ty = self.ty()?.as_matrix().ok_or_else(|| {
            self.err_at(&at, ParseErrorKind::Expected { expected: "a matrix type (`mat8x8_f16`)".into(), found: at.tok.describe() })
        })?;
        self.expect_punct(">")?;
        self.expect_punct("(")?;
        let e = match word {
            "simdgroup_fill" | "simdgroup_diagonal" => {
                Expr::MatrixFill { ty, value: Box::new(self.expr()?), diagonal: word == "simdgroup_diagonal" }
            }
            "matrix_row" | "matrix_col" => Expr::MatrixCoord { ty, index: self.small_index("an element index")?, column: word == "matrix_col" },
            "simdgroup_load_int4" | "simdgroup_load_fp4" | "simdgroup_load_int4_fragments" | "simdgroup_load_fp4_fragments" => {
                let code = if word.starts_with("simdgroup_load_int4") { QuantCode::Int4 } else { QuantCode::Fp4 };
                let layout = if word.ends_with("_fragments") { QuantLayout::Fragments } else { QuantLayout::Rows };
                let words = self.memory_arg()?;
                self.expect_punct(",")?;
                let offset = Box::new(self.expr()?);
                self.expect_punct(",")?;
                let stride = Box::new(self.expr()?);
                self.expect_punct(",")?;
                let scales = self.memory_arg()?;
                self.expect_punct(",")?;
                let scale_offset = Box::new(self.expr()?);
                Expr::MatrixLoadQuantized { ty, code, layout, words, offset, stride, scales, scale_offset }
            }
            _ => {
                let mem = self.memory_arg()?;
                self.expect_punct(",")?;
                let offset = Box::new(self.expr()?);
                self.expect_punct(",")?;
                let stride = Box::new(self.expr()?);
                Expr::MatrixLoad { ty, mem, offset, stride, transpose: word == "simdgroup_load_transposed" }
            }
        };
        self.expect_punct(")")?;
        Ok(e)
    }

    /// A texture parameter named as an argument.
    /// `sampler(coord, filter, address)`, e.g. `sampler(normalized, linear, repeat)`.
    fn sampler(&mut self) -> PResult<Sampler> {
        self.expect_ident("sampler")?;
        self.expect_punct("(")?;
        let coord = self.named(SamplerCoord::from_name, "`normalized` or `pixel`")?;
        self.expect_punct(",")?;
        let filter = self.named(SamplerFilter::from_name, "`nearest` or `linear`")?;
        self.expect_punct(",")?;
        let address = self.named(SamplerAddress::from_name, "`clamp_to_edge`, `clamp_to_zero`, `repeat` or `mirrored_repeat`")?;
        self.expect_punct(")")?;
        Ok(Sampler { coord, filter, address })
    }

    /// A word `from_name` knows.
    fn named<T>(&mut self, from_name: fn(&str) -> Option<T>, expected: &str) -> PResult<T> {
        match self.peek().clone() {
            Tok::Ident(word) => match from_name(&word) {
                Some(v) => {
                    self.bump();
                    Ok(v)
                }
                None => Err(self.expected(expected)),
            },
            _ => Err(self.expected(expected)),
        }
    }

    fn texture_arg(&mut self) -> PResult<ParamId> {
        let at = self.tok().clone();
        match self.reference()? {
            Entity::Param(p) => Ok(ParamId(p)),
            other => Err(self.err_at(
                &at,
                ParseErrorKind::WrongKind { name: self.entity_name(&at), what: other.what(), expected: "a texture parameter is expected here" },
            )),
        }
    }

    /// A cooperative tensor named as an argument.
    fn coop_arg(&mut self) -> PResult<crate::cooperative::CoopId> {
        let at = self.tok().clone();
        match self.reference()? {
            Entity::Coop(t) => Ok(crate::cooperative::CoopId(t)),
            other => Err(self.err_at(
                &at,
                ParseErrorKind::WrongKind { name: self.entity_name(&at), what: other.what(), expected: "a cooperative tensor is expected here" },
            )),
        }
    }

    /// `simdgroup` or `simdgroups(n)`.
    fn scope(&mut self) -> PResult<crate::cooperative::ExecutionScope> {
        if self.eat_ident("simdgroup") {
            return Ok(crate::cooperative::ExecutionScope::Simdgroup);
        }
        if !self.eat_ident("simdgroups") {
            return Err(self.expected("`simdgroup` or `simdgroups(n)`"));
        }
        self.expect_punct("(")?;
        let n = self.plain_u32("a SIMD-group count")?;
        self.expect_punct(")")?;
        Ok(crate::cooperative::ExecutionScope::Simdgroups(n))
    }

    /// `true` or `false`.
    fn flag(&mut self) -> PResult<bool> {
        if self.eat_ident("true") {
            Ok(true)
        } else if self.eat_ident("false") {
            Ok(false)
        } else {
            Err(self.expected("`true` or `false`"))
        }
    }

    /// `tensor(mem, offset, x extent, y extent, x stride, y stride)`.
    fn view(&mut self) -> PResult<crate::ir::TensorView> {
        self.expect_ident("tensor")?;
        self.expect_punct("(")?;
        let mem = self.memory_arg()?;
        let mut e = Vec::with_capacity(5);
        for _ in 0..5 {
            self.expect_punct(",")?;
            e.push(self.expr()?);
        }
        self.expect_punct(")")?;
        let [offset, ex, ey, sx, sy]: [Expr; 5] = e.try_into().map_err(|_| self.expected("five view values"))?;
        Ok(crate::ir::TensorView { mem, offset, extents: [ex, ey], strides: [sx, sy] })
    }

    /// A cooperative statement; its name is next.
    fn cooperative_stmt(&mut self, word: &str) -> PResult<StmtKind> {
        use crate::cooperative::*;
        self.bump();
        self.expect_punct("(")?;
        let kind = match word {
            "matmul2d" | "matmul2d_overlapped" => {
                self.expect_ident("matmul2d_descriptor")?;
                self.expect_punct("(")?;
                let m = self.plain_u32("m")?;
                self.expect_punct(",")?;
                let n = self.plain_u32("n")?;
                self.expect_punct(",")?;
                let k = if self.eat_ident("dynamic_extent") { None } else { Some(self.plain_u32("k or `dynamic_extent`")?) };
                self.expect_punct(",")?;
                let transpose_left = self.flag()?;
                self.expect_punct(",")?;
                let transpose_right = self.flag()?;
                self.expect_punct(",")?;
                let relaxed_precision = self.flag()?;
                self.expect_punct(",")?;
                let mode = self.named(Matmul2dMode::from_name, "`multiply` or `multiply_accumulate`")?;
                self.expect_punct(")")?;
                self.expect_punct(",")?;
                let desc = Matmul2dDescriptor { m, n, k, transpose_left, transpose_right, relaxed_precision, mode };
                let scope = self.scope()?;
                self.expect_punct(",")?;
                let left = if self.is_ident("tensor") && *self.peek_at(1) == Tok::Punct("(") {
                    Matmul2dLeft::Tensor(Box::new(self.view()?))
                } else {
                    Matmul2dLeft::Cooperative(self.coop_arg()?)
                };
                self.expect_punct(",")?;
                let right = Box::new(self.view()?);
                self.expect_punct(",")?;
                let dest = self.coop_arg()?;
                let release = if word == "matmul2d" { OperandRelease::NextBarrier } else { OperandRelease::SecondBarrier };
                StmtKind::Matmul2d { desc, scope, left, right, dest, release }
            }
            "cooperative_load" | "cooperative_store" => {
                let tensor = self.coop_arg()?;
                self.expect_punct(",")?;
                let view = Box::new(self.view()?);
                if word == "cooperative_load" {
                    StmtKind::CooperativeLoad { tensor, src: view }
                } else {
                    StmtKind::CooperativeStore { tensor, dst: view }
                }
            }
            w if dequantize_code_layout(w).is_some() => {
                let (code, layout) = dequantize_code_layout(w).expect("matched");
                let tensor = self.coop_arg()?;
                self.expect_punct(",")?;
                let words = self.memory_arg()?;
                self.expect_punct(",")?;
                let offset = self.expr()?;
                self.expect_punct(",")?;
                let stride = self.expr()?;
                self.expect_punct(",")?;
                let scales = self.memory_arg()?;
                self.expect_punct(",")?;
                let scale_offset = self.expr()?;
                self.expect_punct(",")?;
                let scale_stride = self.expr()?;
                self.expect_punct(",")?;
                let group_shift = self.expr()?;
                let biases = if *self.peek() == Tok::Punct(",") {
                    self.bump();
                    Some(self.memory_arg()?)
                } else {
                    None
                };
                StmtKind::CooperativeDequantize { tensor, code, layout, words, offset, stride, scales, scale_offset, scale_stride, group_shift, biases }
            }
            "combine" => {
                let dest = self.coop_arg()?;
                self.expect_punct(",")?;
                let src = self.coop_arg()?;
                self.expect_punct(",")?;
                let op = self.named(CombineOp::from_name, "`assign`, `add`, `sub`, `mul`, `max` or `min`")?;
                StmtKind::CooperativeCombine { dest, src, op }
            }
            _ => {
                let src = self.coop_arg()?;
                self.expect_punct(",")?;
                let dest = self.coop_arg()?;
                self.expect_punct(",")?;
                let op = self.named(ReduceOp::from_name, "`sum`, `max` or `min`")?;
                let axis = if word == "reduce_rows" { ReduceAxis::Rows } else { ReduceAxis::Columns };
                StmtKind::CooperativeReduce { src, dest, axis, op }
            }
        };
        self.expect_punct(")")?;
        Ok(kind)
    }

    /// A buffer or threadgroup array named as an argument.
    fn memory_arg(&mut self) -> PResult<Memory> {
        let at = self.tok().clone();
        let target = self.reference()?;
        self.memory_of(target, &at)
    }

    /// `memory[index]`: a memory and an index expression.
    fn memory_element(&mut self) -> PResult<(Memory, Expr)> {
        let mem = self.memory_arg()?;
        self.expect_punct("[")?;
        let index = self.expr()?;
        self.expect_punct("]")?;
        Ok((mem, index))
    }

    /// A plain number below 256 (a component or element index).
    fn small_index(&mut self, what: &str) -> PResult<u8> {
        let at = self.tok().clone();
        let n = self.plain_u64(what)?;
        u8::try_from(n).map_err(|_| self.err_at(&at, ParseErrorKind::Expected { expected: format!("{what} below 256"), found: n.to_string() }))
    }

    /// A call or a vector constructor; the name has been consumed, `(` is next.
    fn call(&mut self, name: String, at: &Token) -> PResult<Expr> {
        if let Some(ty) = type_from_text(&name) {
            let components = self.call_args()?;
            return Ok(Expr::Vector { ty, components });
        }
        let qualified = name.split_once("::").and_then(|(ns, f)| Some((Precision::from_namespace(ns)?, f)));
        let (precision, plain) = qualified.unwrap_or((Precision::Default, name.as_str()));
        if let Some(func) = Intrinsic::from_name(plain) {
            let args = self.call_args()?;
            return Ok(Expr::Call { func, precision, args });
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
