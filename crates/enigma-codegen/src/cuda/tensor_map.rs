//! Tile copies on the tensor copy engine (sm_90 and later): what the
//! runtime needs to describe each copy's source matrix before the launch
//! ([`TensorMap`], a `CUtensorMap` made by `cuTensorMapEncodeTiled`), and
//! the values it is described with ([`HostExpr`], a tile copy's extents and
//! pitch, which validation makes dispatch constants).
//!
//! A copy into a threadgroup array that `wgmma` reads
//! ([`super::cooperative`]'s 128-byte swizzle, rows of the array's whole
//! pitch) is one box of 64 columns per panel, which the engine writes in
//! the same swizzle; a copy into any other array is one box of the copy's
//! shape, rows one after the other. Elsewhere (a box narrower than the
//! swizzled array's pitch, a destination index off a swizzle atom at run
//! time) the threads copy the box themselves and one of them completes the
//! barrier's phase.

use enigma_ir::{BinaryOp, Expr, Intrinsic, Kernel, Literal, LiteralValue, ParamId, ParamKind, Scalar, TileCopy, Type};

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

/// One tile copy's source as the tensor copy engine sees it: a 2-D matrix
/// of `elem` in buffer parameter `buffer`, `extents` (rows, columns) and
/// `pitch` elements between rows, copied in boxes of `box_shape` (rows,
/// columns), in the 128-byte swizzle where `swizzle`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMap {
    pub buffer: ParamId,
    pub elem: Scalar,
    pub extents: [HostExpr; 2],
    pub pitch: HostExpr,
    pub box_shape: [u32; 2],
    pub swizzle: bool,
}

/// How a tile copy runs on the engine: the source's description, the
/// boxes (`panels` of `box_shape[1]` columns each) and whether the
/// destination index must be tested at run time (a whole swizzle atom).
pub(crate) struct EnginePlan {
    pub map: TensorMap,
    pub panels: u32,
    pub swizzle_pitch: Option<u32>,
}

/// The engine's plan for `copy` into an array with 128-byte swizzle
/// `swizzle` (its pitch), if the engine can take it.
pub(crate) fn engine_plan(kernel: &Kernel, spec_values: &[Literal], copy: &TileCopy, elem: Scalar, swizzle: Option<u32>) -> Option<EnginePlan> {
    let enigma_ir::Memory::Buffer(buffer) = copy.src else { return None };
    let extents = [HostExpr::of(kernel, spec_values, &copy.extents[0])?, HostExpr::of(kernel, spec_values, &copy.extents[1])?];
    let pitch = HostExpr::of(kernel, spec_values, &copy.pitch)?;
    let (box_shape, panels) = match swizzle {
        Some(pitch) if elem.size_bytes() == 2 && pitch == copy.cols && copy.cols.is_multiple_of(super::cooperative::PANEL) => {
            ([copy.rows, super::cooperative::PANEL], copy.cols / super::cooperative::PANEL)
        }
        Some(_) => return None,
        None => ([copy.rows, copy.cols], 1),
    };
    Some(EnginePlan { map: TensorMap { buffer, elem, extents, pitch, box_shape, swizzle: swizzle.is_some() }, panels, swizzle_pitch: swizzle })
}
