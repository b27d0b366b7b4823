//! Tile copies on the tensor copy engine (sm_90 and later): what the
//! runtime needs to describe each copy's source matrix before the launch
//! ([`TensorMap`], a `CUtensorMap` made by `cuTensorMapEncodeTiled`), and
//! the values it is described with (`enigma_ir::dispatch_constant::HostExpr`,
//! a tile copy's extents and pitch).
//!
//! A copy into a threadgroup array that `wgmma` reads
//! ([`super::cooperative`]'s 128-byte swizzle, rows of the array's whole
//! pitch) is one box of 64 columns per panel, which the engine writes in
//! the same swizzle; a copy into any other array is one box of the copy's
//! shape, rows one after the other. Elsewhere (a box narrower than the
//! swizzled array's pitch, a destination index off a swizzle atom at run
//! time) the threads copy the box themselves and one of them completes the
//! barrier's phase.

use enigma_ir::dispatch_constant::HostExpr;
use enigma_ir::{Kernel, Literal, ParamId, Scalar, TileCopy};

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
