//! Dispatch constants: values fixed for a whole dispatch that the host can
//! compute before the launch from the kernel's by-value arguments — a tile
//! copy's extents and pitch, which the CUDA backend describes to the tensor
//! copy engine in a `CUtensorMap`. [`HostExpr::of`] is the one rule of what
//! they may be (validation refuses the rest), and [`HostExpr::eval`] their
//! value for a dispatch's arguments.

use crate::{BinaryOp, Expr, Intrinsic, Kernel, Literal, LiteralValue, ParamId, ParamKind, Scalar, Type};

/// A value the host computes before the launch from the kernel's
/// by-value arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostExpr {
    Const(u64),
    /// By-value parameter `n`, a scalar of this type.
    Param(u32, Scalar),
    Add(Box<HostExpr>, Box<HostExpr>),
    Sub(Box<HostExpr>, Box<HostExpr>),
    Mul(Box<HostExpr>, Box<HostExpr>),
    Div(Box<HostExpr>, Box<HostExpr>),
    Min(Box<HostExpr>, Box<HostExpr>),
    Max(Box<HostExpr>, Box<HostExpr>),
}

impl HostExpr {
    /// `e` over literals, specialization constants (`spec_values`) and
    /// by-value scalar parameters; None for anything else.
    pub fn of(kernel: &Kernel, spec_values: &[Literal], e: &Expr) -> Option<HostExpr> {
        let pair = |a: &Expr, b: &Expr| Some((Box::new(HostExpr::of(kernel, spec_values, a)?), Box::new(HostExpr::of(kernel, spec_values, b)?)));
        Some(match e {
            Expr::Literal(lit) => HostExpr::Const(literal_value(lit)?),
            Expr::Spec(s) => HostExpr::Const(literal_value(spec_values.get(s.0 as usize)?)?),
            Expr::Param(ParamId(p)) => match kernel.params.get(*p as usize)?.kind {
                ParamKind::Value { ty: Type::Scalar(s) } if s.is_int() => HostExpr::Param(*p, s),
                _ => return None,
            },
            Expr::Binary { op, lhs, rhs } => {
                let (a, b) = pair(lhs, rhs)?;
                match op {
                    BinaryOp::Add => HostExpr::Add(a, b),
                    BinaryOp::Sub => HostExpr::Sub(a, b),
                    BinaryOp::Mul => HostExpr::Mul(a, b),
                    BinaryOp::Div => HostExpr::Div(a, b),
                    _ => return None,
                }
            }
            Expr::Call { func: func @ (Intrinsic::Min | Intrinsic::Max), args, .. } if args.len() == 2 => {
                let (a, b) = pair(&args[0], &args[1])?;
                if *func == Intrinsic::Min {
                    HostExpr::Min(a, b)
                } else {
                    HostExpr::Max(a, b)
                }
            }
            _ => return None,
        })
    }

    /// The value, in u32 arithmetic as the kernel computes it, with
    /// `param(n)` the bits of by-value argument `n`; None where an argument
    /// is missing or a division is by zero.
    pub fn eval(&self, param: &dyn Fn(u32) -> Option<u64>) -> Option<u32> {
        let two = |a: &HostExpr, b: &HostExpr| Some((a.eval(param)?, b.eval(param)?));
        Some(match self {
            HostExpr::Const(v) => *v as u32,
            HostExpr::Param(p, _) => param(*p)? as u32,
            HostExpr::Add(a, b) => two(a, b).map(|(a, b)| a.wrapping_add(b))?,
            HostExpr::Sub(a, b) => two(a, b).map(|(a, b)| a.wrapping_sub(b))?,
            HostExpr::Mul(a, b) => two(a, b).map(|(a, b)| a.wrapping_mul(b))?,
            HostExpr::Div(a, b) => two(a, b).and_then(|(a, b)| a.checked_div(b))?,
            HostExpr::Min(a, b) => two(a, b).map(|(a, b)| a.min(b))?,
            HostExpr::Max(a, b) => two(a, b).map(|(a, b)| a.max(b))?,
        })
    }
}

fn literal_value(lit: &Literal) -> Option<u64> {
    match lit.value {
        LiteralValue::UInt(v) => Some(v),
        LiteralValue::Int(v) => Some(v as u64),
        _ => None,
    }
}
