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
//!   padding; a thread per output pixel of each image's channel.
//!   Parameters: `x, col, total` and the sizes of [`ConvDims`] by value
//!   (`c_out` and `groups` unused). [`im2col_packed`] is the same
//!   unfolding by 16-byte stores, for output rows of whole 16 bytes.
//!
//! * [`conv2d_depthwise`], a depthwise convolution (one input channel per
//!   group) by output tiles, the input under each tile staged in
//!   threadgroup memory, the window fixed in the kernel.
//! * [`conv2d_depthwise_rows`], the same convolution of stride and
//!   dilation 1 over rows of whole 16-byte words
//!   ([`RowWindow::of`]): no threadgroup memory; a thread
//!   computes one 16-byte word of outputs (8 f16/bf16 or 4 f32) in each
//!   of [`DEPTHWISE_ROWS`] consecutive output rows, from the input rows
//!   under them, each loaded once as a 16-byte word plus the window's
//!   columns either side as single elements, all loads issued before the
//!   sums.
//!
//! `enigma-ops` runs dense half-precision convolutions of input channels a
//! multiple of 64 as an implicit GEMM where the device's products are
//! `wgmma` ([`super::conv_implicit`]), other dense and grouped
//! convolutions as [`im2col`] and a batched GEMM (a pointwise one of
//! stride 1 without the unfolding),
//! depthwise ones with [`conv2d_depthwise_rows`] or [`conv2d_depthwise`]
//! where the window fits them, and the rest with [`conv2d`].

use super::*;
use enigma_ir::{Access, Kernel, MemFlags, Scalar, Type};

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
    /// The buffers and count of [`im2col`], [`im2col_packed`] and
    /// [`im2col_rows`] (whose `col` is a `uint4` view, and which reads `x`
    /// also as 16-byte words, `x_words`), bound beside [`ConvDims`].
    pub struct Im2colArgs {
        X x: buffer,
        COL col: buffer,
        X_WORDS x_words: optional,
        TOTAL total: u32,
    }
}

/// Whether a convolution of this window, stride and padding is a plain
/// matrix product over the input as it lies (a 1×1 window of stride 1
/// without padding): no unfolding, no gather.
pub fn is_plain_product(kernel: [u32; 2], stride: [u32; 2], padding: [u32; 2]) -> bool {
    kernel == [1, 1] && stride == [1, 1] && padding == [0, 0]
}

/// The sizes of [`ConvDims`] as the kernel's values, in their order.
pub(crate) fn conv_dims(k: &mut KernelBuilder) -> [Ex; 15] {
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

/// The unfolding kernel `im2col_{dtype}` (module docs): `col` is
/// `[images, c_in, kh, kw, out_h, out_w]`; thread `tid` (of `total` =
/// `images · c_in · out_h · out_w`) takes output pixel `(oy, ox)` of one
/// image's channel and writes its window's `kh · kw` taps (the input
/// under each, or zero in the padding, moved bit for bit), so that
/// consecutive threads write consecutive elements of each row.
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
        // The image's channel: `image · c_in + ci`.
        let plane = k.let_("plane", tid / pixels);
        let i32 = |e: Ex| e.cast(Type::I32);
        let y0 = k.let_("y0", i32(pixel / ow * sh) - i32(ph));
        let x0 = k.let_("x0", i32(pixel % ow * sw) - i32(pw));
        let source = k.let_("source", plane * h);
        let first = k.let_("first", plane * kh * kw * pixels + pixel);
        k.for_range("ky", 0u32, kh, 1u32, |k, ky| {
            let iy = k.let_("iy", y0 + i32(ky * dh));
            let zero = lit(Scalar::I32, 0.0);
            let row_inside = k.let_("row_inside", iy.ge(zero).and(iy.lt(i32(h))));
            let row = k.let_("row", (source + iy.cast(Type::U32)) * w);
            k.for_range("kx", 0u32, kw, 1u32, |k, kx| {
                let ix = k.let_("ix", x0 + i32(kx * dw));
                let v = k.var("v", lit(dtype.scalar(), 0.0));
                k.if_(row_inside.and(ix.ge(zero)).and(ix.lt(i32(w))), |k| k.assign(v, x.get(row + ix.cast(Type::U32))));
                k.store(col.at(first + (ky * kw + kx) * pixels), v.get());
            });
        });
    });
    finish(k)
}

/// The output pixels one [`im2col_packed`] thread takes: 16 bytes of
/// `dtype` (4 f32 values, 8 f16 or bf16 ones).
pub fn im2col_lanes(dtype: DType) -> u32 {
    16 / dtype.size_bytes()
}

/// The unfolding `im2col_{dtype}_packed`: [`im2col`]'s result, each
/// thread (of `total` = `images · c_in · out_h · out_w /`
/// [`im2col_lanes`]) taking that many consecutive output pixels of one
/// output row and writing each tap's values as one 16-byte store, so that
/// a SIMD group stores 512 consecutive bytes where [`im2col`]'s stores
/// 32 elements (64 bytes in f16), and the pixel's coordinates are divided
/// out once per 16 bytes. `col` is bound as `uint4`s (the values moved bit
/// for bit, two 16-bit values per word); `out_w` must be a multiple of the
/// lanes (the caller's to check), so a thread's pixels share their row and
/// its stores are aligned.
pub fn im2col_packed(dtype: DType) -> Kernel {
    let lanes = im2col_lanes(dtype);
    let words = Type::vector(Scalar::U32, 4);
    let mut k = KernelBuilder::new(format!("im2col_{dtype}_packed"));
    type P = Im2colArgs;
    let x = k.buffer(P::X, dtype.ty(1), Access::Read);
    let col = k.buffer(P::COL, words, Access::ReadWrite);
    let [_, h, w, _, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, _] = conv_dims(&mut k);
    let total = k.value(P::TOTAL, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(total), |k| {
        // Packs per plane and per row of col.
        let packs = k.let_("packs", oh * ow / lanes);
        let pixel = k.let_("pixel", tid % packs * lanes);
        let plane = k.let_("plane", tid / packs);
        let i32 = |e: Ex| e.cast(Type::I32);
        let y0 = k.let_("y0", i32(pixel / ow * sh) - i32(ph));
        let x0 = k.let_("x0", i32(pixel % ow * sw) - i32(pw));
        let source = k.let_("source", plane * h);
        let first = k.let_("first", plane * kh * kw * packs + pixel / lanes);
        k.for_range("ky", 0u32, kh, 1u32, |k, ky| {
            let iy = k.let_("iy", y0 + i32(ky * dh));
            let zero = lit(Scalar::I32, 0.0);
            let row_inside = k.let_("row_inside", iy.ge(zero).and(iy.lt(i32(h))));
            let row = k.let_("row", (source + iy.cast(Type::U32)) * w);
            k.for_range("kx", 0u32, kw, 1u32, |k, kx| {
                let tap_x = k.let_("tap_x", x0 + i32(kx * dw));
                let values: Vec<Ex> = (0..lanes)
                    .map(|j| {
                        let ix = k.let_(&format!("ix{j}"), tap_x + i32(sw * j));
                        let v = k.var(&format!("v{j}"), lit(dtype.scalar(), 0.0));
                        k.if_(row_inside.and(ix.ge(zero)).and(ix.lt(i32(w))), |k| k.assign(v, x.get(row + ix.cast(Type::U32))));
                        v.get()
                    })
                    .collect();
                let packed: Vec<Ex> = if lanes == 4 {
                    values.iter().map(|v| v.bitcast(Type::U32)).collect()
                } else {
                    values.chunks(2).map(|pair| vector(dtype.ty(2), pair).bitcast(Type::U32)).collect()
                };
                k.store(col.at(first + (ky * kw + kx) * packs), vector(words, &packed));
            });
        });
    });
    finish(k)
}

/// Output columns of one [`conv2d_depthwise`] tile: one per lane.
pub const DEPTHWISE_TILE_W: u32 = 32;
/// Output rows of one [`conv2d_depthwise`] tile.
pub const DEPTHWISE_TILE_H: u32 = 32;
/// Threads of one [`conv2d_depthwise`] threadgroup: 8 rows of lanes, each
/// thread computing `DEPTHWISE_TILE_H / 8` outputs of one column.
pub const DEPTHWISE_THREADS: u32 = 256;
/// The most input elements (f32 in threadgroup memory: 32 KiB) one
/// [`conv2d_depthwise`] tile stages.
pub const DEPTHWISE_MAX_STAGED: u32 = 8192;
/// The most taps (`kh·kw`) a [`conv2d_depthwise`] window has: each thread
/// holds them in registers.
pub const DEPTHWISE_MAX_TAPS: u32 = 49;

/// A depthwise convolution's window, fixed in its [`conv2d_depthwise`]
/// kernel: element type, `[kh, kw]`, stride and dilation (padding and
/// sizes are values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DepthwiseConfig {
    pub dtype: DType,
    pub kernel: [u32; 2],
    pub stride: [u32; 2],
    pub dilation: [u32; 2],
}

impl DepthwiseConfig {
    /// `[rows, cols]` of the input one output tile reads.
    pub fn staged(&self) -> [u32; 2] {
        let span = |i: usize, tile: u32| (tile - 1) * self.stride[i] + (self.kernel[i] - 1) * self.dilation[i] + 1;
        [span(0, DEPTHWISE_TILE_H), span(1, DEPTHWISE_TILE_W)]
    }

    /// Whether the kernel takes this window: at least 1 along each axis,
    /// at most [`DEPTHWISE_MAX_TAPS`] taps and a staged input of at most
    /// [`DEPTHWISE_MAX_STAGED`] elements.
    pub fn fits(&self) -> bool {
        let positive = self.kernel.iter().chain(&self.stride).chain(&self.dilation).all(|v| (1..=DEPTHWISE_TILE_W).contains(v));
        positive && self.kernel[0] * self.kernel[1] <= DEPTHWISE_MAX_TAPS && {
            let [rows, cols] = self.staged();
            rows * cols <= DEPTHWISE_MAX_STAGED
        }
    }

    pub fn name(&self) -> String {
        let [kh, kw] = self.kernel;
        let [sh, sw] = self.stride;
        let [dh, dw] = self.dilation;
        format!("conv2d_depthwise_{}_k{kh}x{kw}_s{sh}x{sw}_d{dh}x{dw}", self.dtype)
    }

    /// Threadgroups over `planes` output planes (`images · c_out`) of
    /// `[out_h, out_w]`: one per output tile, and the tiles per plane and
    /// per row of tiles.
    pub fn dispatch(&self, planes: u32, out_h: u32, out_w: u32) -> (Dispatch, u32, u32) {
        let tiles_w = out_w.div_ceil(DEPTHWISE_TILE_W);
        let tiles = out_h.div_ceil(DEPTHWISE_TILE_H) * tiles_w;
        (Dispatch::threadgroups([planes * tiles, 1, 1], DEPTHWISE_THREADS), tiles, tiles_w)
    }
}

crate::kernel_args! {
    /// The buffers of [`conv2d_depthwise`] (`bias` read only where
    /// `has_bias` is 1), bound beside [`DepthwiseDims`].
    pub struct DepthwiseArgs {
        X x: buffer,
        W w: buffer,
        BIAS bias: buffer,
        Y y: buffer,
        HAS_BIAS has_bias: u32,
    }
}

crate::kernel_args! {
    /// The sizes [`conv2d_depthwise`] takes by value: the planes', the
    /// padding, and the output tiles per plane and per row of tiles
    /// ([`DepthwiseConfig::dispatch`]).
    pub struct DepthwiseDims(values) {
        C_IN c_in: u32,
        IN_H in_h: u32,
        IN_W in_w: u32,
        C_OUT c_out: u32,
        OUT_H out_h: u32,
        OUT_W out_w: u32,
        PH ph: u32,
        PW pw: u32,
        TILES tiles: u32,
        TILES_W tiles_w: u32,
    }
}

/// Output plane `plane` (`image · c_out + co`) of a depthwise convolution:
/// its output channel `co` and the input plane it reads, the image's
/// channel `co / (c_out / c_in)`.
fn depthwise_channels(k: &mut KernelBuilder, plane: Ex, c_in: Ex, c_out: Ex) -> (Ex, Ex) {
    let co = k.let_("co", plane % c_out);
    let channel = k.let_("channel", plane / c_out * c_in + co / (c_out / c_in));
    (co, channel)
}

/// The `taps` weights of output channel `co` and its bias (0 unless
/// `has_bias` is 1), in f32, in registers.
fn depthwise_weights(k: &mut KernelBuilder, (wt, bias, has_bias): (Mem, Mem, Ex), co: Ex, taps: u32) -> (Vec<Ex>, Ex) {
    let weights = (0..taps).map(|t| k.let_(&format!("w{t}"), load_f32(wt, co * taps + t))).collect();
    let b = k.var("b", f(0.0));
    k.if_(has_bias.eq(1u32), |k| k.assign(b, load_f32(bias, co)));
    (weights, b.get())
}

/// The tiled depthwise convolution `cfg.name()`: one input channel per
/// group (`c_out` a multiple of `c_in`, output channel `co` reading input
/// channel `co / (c_out / c_in)`). A threadgroup computes a
/// [`DEPTHWISE_TILE_H`] × [`DEPTHWISE_TILE_W`] tile of one output plane:
/// it first stages the input under the tile (zeros in the padding) in
/// threadgroup memory as f32, each input element loaded once, then each
/// thread sums the window (taps unrolled, weights in registers) for its
/// column's outputs in f32 and rounds once to the data's type.
///
/// # Panics
/// When `cfg` does not [fit](DepthwiseConfig::fits).
pub fn conv2d_depthwise(cfg: &DepthwiseConfig) -> Kernel {
    assert!(cfg.fits(), "{}: the window does not fit the tiled kernel", cfg.name());
    let mut k = KernelBuilder::new(cfg.name());
    type P = DepthwiseArgs;
    let x = k.buffer(P::X, cfg.dtype.ty(1), Access::Read);
    let wt = k.buffer(P::W, cfg.dtype.ty(1), Access::Read);
    let bias = k.buffer(P::BIAS, cfg.dtype.ty(1), Access::Read);
    let y = k.buffer(P::Y, cfg.dtype.ty(1), Access::ReadWrite);
    let has_bias = k.value(P::HAS_BIAS, Type::U32);
    let d: Vec<Ex> = DepthwiseDims::NAMES.iter().map(|n| k.value(n, Type::U32)).collect();
    let [c_in, h, w, c_out, oh, ow, ph, pw, tiles, tiles_w] = d[..] else { unreachable!("DepthwiseDims has 10 fields") };
    let [kh, kw] = cfg.kernel;
    let [sh, sw] = cfg.stride;
    let [dh, dw] = cfg.dilation;
    let [rows, cols] = cfg.staged();
    let staged = k.threadgroup_array("staged", Type::F32, rows * cols);
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let plane = k.let_("plane", group / tiles);
    let tile = k.let_("tile", group % tiles);
    let oy0 = k.let_("oy0", tile / tiles_w * DEPTHWISE_TILE_H);
    let ox0 = k.let_("ox0", tile % tiles_w * DEPTHWISE_TILE_W);
    let (co, channel) = depthwise_channels(&mut k, plane, c_in, c_out);
    let i32 = |e: Ex| e.cast(Type::I32);
    let iy0 = k.let_("iy0", i32(oy0 * sh) - i32(ph));
    let ix0 = k.let_("ix0", i32(ox0 * sw) - i32(pw));
    k.for_range("i", lid, rows * cols, DEPTHWISE_THREADS, |k, i| {
        let iy = k.let_("iy", iy0 + i32(i / cols));
        let ix = k.let_("ix", ix0 + i32(i % cols));
        let zero = lit(Scalar::I32, 0.0);
        let inside = iy.ge(zero).and(iy.lt(i32(h))).and(ix.ge(zero)).and(ix.lt(i32(w)));
        let v = k.var("v", f(0.0));
        k.if_(inside, |k| k.assign(v, load_f32(x, (channel * h + iy.cast(Type::U32)) * w + ix.cast(Type::U32))));
        k.store(staged.at(i), v.get());
    });
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let (taps, b) = depthwise_weights(&mut k, (wt, bias, has_bias), co, kh * kw);
    let tx = k.let_("tx", lid % DEPTHWISE_TILE_W);
    let ty = k.let_("ty", lid / DEPTHWISE_TILE_W);
    let ox = k.let_("ox", ox0 + tx);
    let base = k.let_("base", ty * (sh * cols) + tx * sw);
    let lanes_down = DEPTHWISE_THREADS / DEPTHWISE_TILE_W;
    for j in 0..DEPTHWISE_TILE_H / lanes_down {
        let oy = k.let_(&format!("out_row{j}"), oy0 + ty + j * lanes_down);
        let mut acc = b;
        for ky in 0..kh {
            for kx in 0..kw {
                let at = base + (j * lanes_down * sh + ky * dh) * cols + kx * dw;
                acc = acc + staged.get(at) * taps[(ky * kw + kx) as usize];
            }
        }
        let acc = k.let_(&format!("acc{j}"), acc);
        k.if_(oy.lt(oh).and(ox.lt(ow)), |k| store_f32(k, y, (plane * oh + oy) * ow + ox, acc));
    }
    finish(k)
}

/// One input row under a word of outputs at column `ox` (`word` of the
/// row's 16-byte words), for `window` (`kw` wide with `pw` columns of
/// padding): the `vec + kw − 1` values of input columns `ox − pw + c`,
/// the word above the outputs (`xw` at `start / vec + word`) and single
/// elements of `x` either side, zero outside the row (`w` wide) or where
/// the row is outside the plane (`row_in` false; `start` is then any row's
/// start). Each value as f32 (`as_f32`) or in the data's type.
fn row_segment(k: &mut KernelBuilder, tag: &str, window: &RowWindow, (x, xw): (Mem, Mem), (start, word, ox, row_in): (Ex, Ex, Ex, Ex), w: Ex, as_f32: bool) -> Vec<Var> {
    let RowWindow { dtype, kernel: [_, kw], pw } = *window;
    let vec = window.word_elems();
    let half = dtype != DType::F32;
    let pair = dtype.ty(2);
    let i32 = |e: Ex| e.cast(Type::I32);
    let zero = lit(Scalar::I32, 0.0);
    let span = vec + kw - 1;
    let ty = if as_f32 { Scalar::F32 } else { dtype.scalar() };
    let vals: Vec<Var> = (0..span).map(|c| k.var(&format!("v{tag}_{c}"), lit(ty, 0.0))).collect();
    k.if_(row_in, |k| {
        let word_v = k.let_(&format!("word{tag}"), xw.get(start / vec + word));
        for j in 0..vec {
            let e = if half { word_v.component((j / 2) as u8).bitcast(pair).component((j % 2) as u8) } else { word_v.component(j as u8) };
            k.assign(vals[(pw + j) as usize], if as_f32 { to_f32(e) } else { e });
        }
        for c in (0..pw).chain(pw + vec..span) {
            let col = k.let_(&format!("col{tag}_{c}"), i32(ox + c) - i32(lit(Scalar::U32, pw as f64)));
            let inside = if c < pw { col.ge(zero) } else { col.lt(i32(w)) };
            let at = start + col.cast(Type::U32);
            k.if_(inside, |k| k.assign(vals[c as usize], if as_f32 { load_f32(x, at) } else { x.get(at) }));
        }
    });
    vals
}

/// A window of stride and dilation 1 over rows of whole 16-byte words,
/// fixed in a rows kernel ([`conv2d_depthwise_rows`], [`im2col_rows`]):
/// the element type, `[kh, kw]` and the columns of padding `pw` (the rows
/// of padding are a value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowWindow {
    pub dtype: DType,
    pub kernel: [u32; 2],
    pub pw: u32,
}

impl RowWindow {
    /// The rows form of a window of `kernel` with `(stride, dilation)` and
    /// `pw` columns of padding over input rows of `in_w` and output rows of
    /// `out_w`, where the rows kernels take it: stride and dilation 1, a
    /// window of at most [`DEPTHWISE_ROWS_MAX_WINDOW`] along each axis,
    /// padding narrower than the window, and input and output rows of
    /// whole words, so that the input word under each output word lies
    /// inside its row.
    pub fn of(dtype: DType, kernel: [u32; 2], (stride, dilation): ([u32; 2], [u32; 2]), pw: u32, (in_w, out_w): (u32, u32)) -> Option<RowWindow> {
        let window = RowWindow { dtype, kernel, pw };
        let words = window.word_elems();
        let fits = stride == [1, 1] && dilation == [1, 1] && window.fits() && in_w.is_multiple_of(words) && out_w.is_multiple_of(words);
        fits.then_some(window)
    }

    /// Whether the rows kernels hold the window: at most
    /// [`DEPTHWISE_ROWS_MAX_WINDOW`] along each axis, padding narrower than
    /// it.
    fn fits(&self) -> bool {
        self.kernel.iter().all(|k| (1..=DEPTHWISE_ROWS_MAX_WINDOW).contains(k)) && self.pw < self.kernel[1]
    }

    /// Elements of one 16-byte word: 4 f32, 8 f16 or bf16.
    pub fn word_elems(&self) -> u32 {
        16 / self.dtype.size_bytes()
    }

    /// The type the rows kernels bind the input's 16-byte words as
    /// (`x_words`): `uint4` of 16-bit pairs, or `float4`.
    pub fn x_word_type(&self) -> Type {
        if self.dtype == DType::F32 {
            Type::vector(Scalar::F32, 4)
        } else {
            Type::vector(Scalar::U32, 4)
        }
    }

    /// `im2col_{dtype}_rows_k{kh}x{kw}_pw{pw}`: [`im2col_rows`]'s name.
    pub fn im2col_name(&self) -> String {
        let [kh, kw] = self.kernel;
        format!("im2col_{}_rows_k{kh}x{kw}_pw{}", self.dtype, self.pw)
    }

    /// `conv2d_depthwise_rows_{dtype}_k{kh}x{kw}_pw{pw}`:
    /// [`conv2d_depthwise_rows`]'s name.
    pub fn depthwise_name(&self) -> String {
        let [kh, kw] = self.kernel;
        format!("conv2d_depthwise_rows_{}_k{kh}x{kw}_pw{}", self.dtype, self.pw)
    }

    /// The threads of [`conv2d_depthwise_rows`] over `planes` output
    /// planes of `[out_h, out_w]` (one per output word of
    /// [`DEPTHWISE_ROWS`] rows), and their dispatch.
    pub fn depthwise_dispatch(&self, planes: u32, out_h: u32, out_w: u32) -> (u64, Dispatch) {
        let threads = planes as u64 * out_h.div_ceil(DEPTHWISE_ROWS) as u64 * (out_w / self.word_elems()) as u64;
        let groups = threads.div_ceil(DEPTHWISE_ROWS_THREADS as u64);
        (threads, Dispatch::threadgroups([groups.min(u32::MAX as u64) as u32, 1, 1], DEPTHWISE_ROWS_THREADS))
    }

    /// Panics, naming `kernel`, where the window does not fit the rows
    /// kernels ([`Self::fits`]).
    fn assert_fits(&self, kernel: &str) {
        assert!(self.fits(), "{kernel}: the window does not fit the rows kernel");
    }
}

/// The unfolding [`im2col`] by rows of 16-byte words, for a window of
/// stride and dilation 1 ([`RowWindow::of`]): a thread per 16-byte word
/// of output pixels of one output row of one image's channel (`total` of
/// them, as [`im2col_packed`]) loads each of the `kh` input rows under it
/// once, as the word above its pixels and the `kw − 1` columns either
/// side (`row_segment`), and stores each tap's pixels as one 16-byte word
/// cut from those values, where [`im2col_packed`] loads every tap's
/// pixels one element at a time (`kh · kw · 8` loads for 16-bit data
/// against `kh` words and `kh · (kw − 1)` elements here).
///
/// # Panics
/// When the window is wider than [`DEPTHWISE_ROWS_MAX_WINDOW`] or `pw` is
/// not narrower than it.
pub fn im2col_rows(cfg: &RowWindow) -> Kernel {
    let [kh, kw] = cfg.kernel;
    cfg.assert_fits(&cfg.im2col_name());
    let mut k = KernelBuilder::new(cfg.im2col_name());
    type P = Im2colArgs;
    let words_ty = Type::vector(Scalar::U32, 4);
    let vec = cfg.word_elems();
    let x = k.buffer(P::X, cfg.dtype.ty(1), Access::Read);
    let col = k.buffer(P::COL, words_ty, Access::ReadWrite);
    let xw = k.buffer(P::X_WORDS, cfg.x_word_type(), Access::Read);
    let [_, h, w, _, oh, ow, _, _, _, _, ph, _, _, _, _] = conv_dims(&mut k);
    let total = k.value(P::TOTAL, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(total), |k| {
        let words = k.let_("words", ow / vec);
        let word = k.let_("word", tid % words);
        let rest = k.let_("rest", tid / words);
        let oy = k.let_("oy", rest % oh);
        let plane = k.let_("plane", rest / oh);
        let ox = k.let_("ox", word * vec);
        // col's word of tap t: row `plane·kh·kw + t`, `oh·ow / vec` words a row.
        let packs = k.let_("packs", oh * words);
        let first = k.let_("first", plane * (kh * kw) * packs + oy * words + word);
        let i32 = |e: Ex| e.cast(Type::I32);
        let zero = lit(Scalar::I32, 0.0);
        for ky in 0..kh {
            let iy = k.let_(&format!("iy{ky}"), i32(oy + ky) - i32(ph));
            let row_in = k.let_(&format!("row_in{ky}"), iy.ge(zero).and(iy.lt(i32(h))));
            let start = k.let_(&format!("start{ky}"), (plane * h + select(lit(Scalar::U32, 0.0), iy.cast(Type::U32), row_in)) * w);
            let vals = row_segment(k, &ky.to_string(), cfg, (x, xw), (start, word, ox, row_in), w, false);
            for kx in 0..kw {
                let taps: Vec<Ex> = (0..vec).map(|j| vals[(kx + j) as usize].get()).collect();
                let packed: Vec<Ex> = if cfg.dtype == DType::F32 {
                    taps.iter().map(|v| v.bitcast(Type::U32)).collect()
                } else {
                    taps.chunks(2).map(|pair| vector(cfg.dtype.ty(2), pair).bitcast(Type::U32)).collect()
                };
                k.store(col.at(first + (ky * kw + kx) * packs), vector(words_ty, &packed));
            }
        }
    });
    finish(k)
}

/// Output rows a thread of [`conv2d_depthwise_rows`] computes.
pub const DEPTHWISE_ROWS: u32 = 4;
/// Threads of one [`conv2d_depthwise_rows`] threadgroup.
pub const DEPTHWISE_ROWS_THREADS: u32 = 256;
/// The widest window [`conv2d_depthwise_rows`] takes along each axis.
pub const DEPTHWISE_ROWS_MAX_WINDOW: u32 = 7;

crate::kernel_args! {
    /// The buffers of [`conv2d_depthwise_rows`]: `x` read as elements and,
    /// through its 16-byte view `x_words`, as words; `y` written through
    /// its view `y_words`; `bias` read only where `has_bias` is 1. Bound
    /// beside [`DepthwiseRowsDims`].
    pub struct DepthwiseRowsArgs {
        X x: buffer,
        X_WORDS x_words: buffer,
        W w: buffer,
        BIAS bias: buffer,
        Y_WORDS y_words: buffer,
        HAS_BIAS has_bias: u32,
    }
}

crate::kernel_args! {
    /// The sizes [`conv2d_depthwise_rows`] takes by value: the planes', the
    /// rows of padding, and the threads that work (`threads`).
    pub struct DepthwiseRowsDims(values) {
        C_IN c_in: u32,
        IN_H in_h: u32,
        IN_W in_w: u32,
        C_OUT c_out: u32,
        OUT_H out_h: u32,
        OUT_W out_w: u32,
        PH ph: u32,
        THREADS threads: u32,
    }
}

/// The depthwise convolution of stride and dilation 1 by rows of 16-byte
/// words, `cfg.depthwise_name()` (module docs): thread `t` takes word `t % words` of
/// [`DEPTHWISE_ROWS`] consecutive output rows of one plane. It loads the
/// `DEPTHWISE_ROWS + kh − 1` input rows under them (zeros outside the
/// plane), each as the word above its outputs and the `pw` elements left
/// of it and `kw − 1 − pw` right of it, then sums the windows in f32
/// (weights in registers) and rounds once to the data's type, one 16-byte
/// store per output row.
///
/// # Panics
/// When the window is wider than [`DEPTHWISE_ROWS_MAX_WINDOW`] or `pw` is
/// not narrower than it.
pub fn conv2d_depthwise_rows(cfg: &RowWindow) -> Kernel {
    let [kh, kw] = cfg.kernel;
    cfg.assert_fits(&cfg.depthwise_name());
    let mut k = KernelBuilder::new(cfg.depthwise_name());
    type P = DepthwiseRowsArgs;
    let half = cfg.dtype != DType::F32;
    let word_ty = cfg.x_word_type();
    let vec = cfg.word_elems();
    let x = k.buffer(P::X, cfg.dtype.ty(1), Access::Read);
    let xw = k.buffer(P::X_WORDS, word_ty, Access::Read);
    let wt = k.buffer(P::W, cfg.dtype.ty(1), Access::Read);
    let bias = k.buffer(P::BIAS, cfg.dtype.ty(1), Access::Read);
    let yw = k.buffer(P::Y_WORDS, word_ty, Access::ReadWrite);
    let has_bias = k.value(P::HAS_BIAS, Type::U32);
    let d: Vec<Ex> = DepthwiseRowsDims::NAMES.iter().map(|n| k.value(n, Type::U32)).collect();
    let [c_in, h, w, c_out, oh, ow, ph, threads] = d[..] else { unreachable!("DepthwiseRowsDims has 8 fields") };
    let tid = k.let_("tid", thread_position_in_grid().x());
    let pair = cfg.dtype.ty(2);
    k.if_(tid.lt(threads), |k| {
        let words = k.let_("words", ow / vec);
        let row_blocks = k.let_("row_blocks", (oh + (DEPTHWISE_ROWS - 1)) / DEPTHWISE_ROWS);
        let word = k.let_("word", tid % words);
        let rest = k.let_("rest", tid / words);
        let oy0 = k.let_("oy0", rest % row_blocks * DEPTHWISE_ROWS);
        let plane = k.let_("plane", rest / row_blocks);
        let (co, channel) = depthwise_channels(k, plane, c_in, c_out);
        let ox = k.let_("ox", word * vec);
        let i32 = |e: Ex| e.cast(Type::I32);
        let zero = lit(Scalar::I32, 0.0);
        // Input row r is plane row oy0 - ph + r (`row_segment`: value c of
        // it is column ox - pw + c).
        let mut rows: Vec<Vec<Var>> = vec![];
        for r in 0..DEPTHWISE_ROWS + kh - 1 {
            let iy = k.let_(&format!("iy{r}"), i32(oy0 + r) - i32(ph));
            let row_in = k.let_(&format!("row_in{r}"), iy.ge(zero).and(iy.lt(i32(h))));
            let start = k.let_(&format!("start{r}"), (channel * h + select(lit(Scalar::U32, 0.0), iy.cast(Type::U32), row_in)) * w);
            rows.push(row_segment(k, &r.to_string(), cfg, (x, xw), (start, word, ox, row_in), w, true));
        }
        let (taps, b) = depthwise_weights(k, (wt, bias, has_bias), co, kh * kw);
        for o in 0..DEPTHWISE_ROWS {
            let oy = k.let_(&format!("out_row{o}"), oy0 + o);
            let outs: Vec<Ex> = (0..vec)
                .map(|j| {
                    let mut acc = b;
                    for ky in 0..kh {
                        for kx in 0..kw {
                            acc = acc + rows[(o + ky) as usize][(j + kx) as usize].get() * taps[(ky * kw + kx) as usize];
                        }
                    }
                    k.let_(&format!("acc{o}_{j}"), acc)
                })
                .collect();
            let out = if half {
                let packed: Vec<Ex> = (0..4).map(|q| vector(Type::vector(Scalar::F32, 2), &[outs[2 * q], outs[2 * q + 1]]).cast(pair).bitcast(Type::U32)).collect();
                vector(word_ty, &packed)
            } else {
                vector(word_ty, &outs)
            };
            k.if_(oy.lt(oh), |k| k.store(yw.at((plane * oh + oy) * words + word), out));
        }
    });
    finish(k)
}
