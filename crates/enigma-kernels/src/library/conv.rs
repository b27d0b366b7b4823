//! 2-D convolution (PyTorch's `conv2d`: cross-correlation) over NCHW data
//! with OIHW weights and `groups` (1: dense, `C_in`: depthwise):
//!
//! * [`conv2d`], the direct kernel with an optional bias: one thread per
//!   output element, which sums its window over the input channels of its
//!   group in f32 and rounds once to the data's type. No tensor cores, no
//!   tiling in threadgroup memory. Parameters: `x, w, bias, y, c_in, in_h,
//!   in_w, c_out, out_h, out_w, kh, kw, sh, sw, ph, pw, dh, dw, groups,
//!   has_bias, total`, the sizes by value (`bias` is read only when
//!   `has_bias` is 1).
//! * [`im2col`], the unfolding that makes a convolution a matrix product:
//!   each image's windows as the columns of a `[c_in·kh·kw, out_h·out_w]`
//!   matrix (the rows ordered as the weights' `[c_in, kh, kw]`, so a
//!   group's rows are consecutive), zeros where a window reaches into the
//!   padding. Parameters: `x, col, total` and the sizes of [`ConvDims`]
//!   by value (`c_out` and `groups` unused).
//!
//! `enigma-ops` runs dense and grouped convolutions as [`im2col`] and a
//! batched GEMM (a pointwise one of stride 1 without the unfolding) and
//! the others (depthwise) with [`conv2d`].

use super::*;
use enigma_ir::{Access, Kernel, Scalar, Type};

crate::kernel_args! {
    /// The buffers and counts of [`conv2d`] (module docs; `bias` is read
    /// only where `has_bias` is 1), bound beside [`ConvDims`].
    pub struct ConvArgs {
        X x: buffer,
        W w: buffer,
        BIAS bias: buffer,
        Y y: buffer,
        HAS_BIAS has_bias: u32,
        TOTAL total: u32,
    }
}

crate::kernel_args! {
    /// The sizes [`conv2d`] takes by value, in the kernel's order.
    pub struct ConvDims(values) {
        C_IN c_in: u32,
        IN_H in_h: u32,
        IN_W in_w: u32,
        C_OUT c_out: u32,
        OUT_H out_h: u32,
        OUT_W out_w: u32,
        KH kh: u32,
        KW kw: u32,
        SH sh: u32,
        SW sw: u32,
        PH ph: u32,
        PW pw: u32,
        DH dh: u32,
        DW dw: u32,
        GROUPS groups: u32,
    }
}

crate::kernel_args! {
    /// The buffers and count of [`im2col`], bound beside [`ConvDims`].
    pub struct Im2colArgs {
        X x: buffer,
        COL col: buffer,
        TOTAL total: u32,
    }
}

/// The sizes of [`ConvDims`] as the kernel's values, in their order.
fn conv_dims(k: &mut KernelBuilder) -> [Ex; 15] {
    let values: Vec<Ex> = ConvDims::NAMES.iter().map(|n| k.value(n, Type::U32)).collect();
    values.try_into().unwrap_or_else(|v: Vec<Ex>| unreachable!("ConvDims has 15 fields, not {}", v.len()))
}

/// The direct convolution kernel `conv2d_{dtype}` (module docs).
pub fn conv2d(dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("conv2d_{dtype}"));
    type P = ConvArgs;
    let x = k.buffer(P::X, dtype.ty(1), Access::Read);
    let wt = k.buffer(P::W, dtype.ty(1), Access::Read);
    let bias = k.buffer(P::BIAS, dtype.ty(1), Access::Read);
    let y = k.buffer(P::Y, dtype.ty(1), Access::ReadWrite);
    let [c_in, h, w, c_out, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, groups] = conv_dims(&mut k);
    let has_bias = k.value(P::HAS_BIAS, Type::U32);
    let total = k.value(P::TOTAL, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(total), |k| {
        let ox = k.let_("ox", tid % ow);
        let oy = k.let_("oy", tid / ow % oh);
        let co = k.let_("co", tid / ow / oh % c_out);
        let image = k.let_("image", tid / ow / oh / c_out);
        let in_group = k.let_("in_group", c_in / groups);
        let first = k.let_("first", co / (c_out / groups) * in_group);
        let i32 = |e: Ex| e.cast(Type::I32);
        let y0 = k.let_("y0", i32(oy * sh) - i32(ph));
        let x0 = k.let_("x0", i32(ox * sw) - i32(pw));
        let acc = k.var("acc", f(0.0));
        k.if_(has_bias.eq(1u32), |k| k.assign(acc, load_f32(bias, co)));
        k.for_range("ci", 0u32, in_group, 1u32, |k, ci| {
            let plane = k.let_("plane", (image * c_in + first + ci) * h);
            let taps = k.let_("taps", (co * in_group + ci) * kh);
            k.for_range("ky", 0u32, kh, 1u32, |k, ky| {
                let iy = k.let_("iy", y0 + i32(ky * dh));
                k.if_(iy.ge(lit(Scalar::I32, 0.0)).and(iy.lt(i32(h))), |k| {
                    let row = k.let_("row", (plane + iy.cast(Type::U32)) * w);
                    let tap_row = k.let_("tap_row", (taps + ky) * kw);
                    k.for_range("kx", 0u32, kw, 1u32, |k, kx| {
                        let ix = k.let_("ix", x0 + i32(kx * dw));
                        k.if_(ix.ge(lit(Scalar::I32, 0.0)).and(ix.lt(i32(w))), |k| {
                            let product = load_f32(x, row + ix.cast(Type::U32)) * load_f32(wt, tap_row + kx);
                            k.assign(acc, acc.get() + product);
                        });
                    });
                });
            });
        });
        store_f32(k, y, tid, acc.get());
    });
    finish(k)
}

/// The unfolding kernel `im2col_{dtype}` (module docs): element `tid` of
/// `col` (`[images, c_in, kh, kw, out_h, out_w]`, `total` elements) is
/// the input under tap `(ky, kx)` of channel `ci`'s window at output
/// `(oy, ox)`, or zero in the padding, moved bit for bit.
pub fn im2col(dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("im2col_{dtype}"));
    type P = Im2colArgs;
    let x = k.buffer(P::X, dtype.ty(1), Access::Read);
    let col = k.buffer(P::COL, dtype.ty(1), Access::ReadWrite);
    let [_, h, w, _, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, _] = conv_dims(&mut k);
    let total = k.value(P::TOTAL, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(total), |k| {
        let pixels = k.let_("pixels", oh * ow);
        let pixel = k.let_("pixel", tid % pixels);
        let row = k.let_("row", tid / pixels);
        let kx = k.let_("kx", row % kw);
        let ky = k.let_("ky", row / kw % kh);
        // The image's channel: `image · c_in + ci`.
        let plane = k.let_("plane", row / kw / kh);
        let i32 = |e: Ex| e.cast(Type::I32);
        let iy = k.let_("iy", i32(pixel / ow * sh + ky * dh) - i32(ph));
        let ix = k.let_("ix", i32(pixel % ow * sw + kx * dw) - i32(pw));
        let zero = lit(Scalar::I32, 0.0);
        let inside = iy.ge(zero).and(iy.lt(i32(h))).and(ix.ge(zero)).and(ix.lt(i32(w)));
        let v = k.var("v", lit(dtype.scalar(), 0.0));
        k.if_(inside, |k| k.assign(v, x.get((plane * h + iy.cast(Type::U32)) * w + ix.cast(Type::U32))));
        k.store(col.at(tid), v.get());
    });
    finish(k)
}
