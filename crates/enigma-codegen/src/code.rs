//! Expression text as the C-family writer builds it: [`Code`], a piece of
//! text with the [`Prec`]edence of its outermost operator, so that an
//! operand is parenthesised only where C++ needs it (or where clarity
//! does: mixed bitwise and shift operators); and a threadgroup array's
//! index as the writer prints it ([`TgIndex`]).

use enigma_ir::BinaryOp;

/// C++ operator precedence, loosest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Prec {
    LogicalOr,
    LogicalAnd,
    BitOr,
    BitXor,
    BitAnd,
    Equality,
    Relational,
    Shift,
    Additive,
    Multiplicative,
    Unary,
    Postfix,
    Primary,
}

impl Prec {
    pub(crate) fn of(op: BinaryOp) -> Prec {
        use BinaryOp::*;
        match op {
            Add | Sub => Prec::Additive,
            Mul | Div | Rem => Prec::Multiplicative,
            Shl | Shr => Prec::Shift,
            Lt | Le | Gt | Ge => Prec::Relational,
            Eq | Ne => Prec::Equality,
            BitAnd => Prec::BitAnd,
            BitXor => Prec::BitXor,
            BitOr => Prec::BitOr,
            And => Prec::LogicalAnd,
            Or => Prec::LogicalOr,
        }
    }
}

/// A piece of expression text with the precedence of its outermost operator.
#[derive(Clone, Debug)]
pub(crate) struct Code {
    pub text: String,
    pub prec: Prec,
    /// The outermost binary operator, for the clarity parentheses.
    pub op: Option<BinaryOp>,
}

impl Code {
    pub fn new(text: impl Into<String>, prec: Prec) -> Code {
        Code { text: text.into(), prec, op: None }
    }
    pub fn primary(text: impl Into<String>) -> Code {
        Code::new(text, Prec::Primary)
    }
    pub fn postfix(text: impl Into<String>) -> Code {
        Code::new(text, Prec::Postfix)
    }
    pub fn binary(text: impl Into<String>, prec: Prec, op: BinaryOp) -> Code {
        Code { text: text.into(), prec, op: Some(op) }
    }
    /// The text, parenthesised unless it binds at least as tightly as `prec`.
    pub fn at_least(&self, prec: Prec) -> String {
        if self.prec < prec {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }
    /// As an operand of a prefix operator or a C-style cast: a nested
    /// prefix expression is parenthesised too (`-(-x)`, never `--x`).
    pub fn unary_operand(&self) -> String {
        if self.prec <= Prec::Unary {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }
}

/// A threadgroup array's logical index as the writer prints it, and, where
/// the index is `base + offset` with a literal offset and the writer has
/// proved the sum does not wrap, the base's code and the offset apart (a
/// dialect that maps indices to another physical layout may then map the
/// base once and add the offset's image).
pub(crate) struct TgIndex {
    pub code: String,
    pub split: Option<(String, u32)>,
}
