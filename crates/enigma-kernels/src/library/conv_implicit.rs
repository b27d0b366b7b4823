//! Dense 2-D convolution as an implicit GEMM on cooperative tensors: for
//! each image, `Y = W · X̂` where `W` is the `c_out × K` matrix of weights
//! (`K = kh·kw·c_in`) and `X̂` the `K × (oh·ow)` unfolding of the image
//! that [`super::conv::im2col`] would write, which here is never written:
//! each slice of it is copied from the input into threadgroup memory by
//! 16-byte asynchronous copies, as a GEMM's operands are.
//!
//! **K ordered by tap, the input channels last.** Row `r` of `X̂` is tap
//! `r / c_in` (`ky·kw + kx`) of input channel `r % c_in`, so the weights
//! are taken reordered to `[c_out][kh][kw][c_in]` ([`conv_weights_by_tap`],
//! a pass over the few weights) and the input rewritten channels-last,
//! `[images][in_h][in_w][c_in]` ([`conv_input_channels_last`], one pass
//! over it). With `c_in` a multiple of the slice depth `tk`, every slice
//! lies in one tap, and its column for an output pixel is `tk`
//! consecutive channels of one input pixel: 16-byte words in a row of the
//! channels-last input. The slice is staged transposed, a row of `tk`
//! channels per output pixel (`transpose_right`): each row is `tk / 8`
//! copies from wherever the window puts that pixel, or zeros where it
//! lies in the padding or past the output. A thread finds its rows'
//! window origins once per tile and their input pixels once per slice.
//!
//! **The pipeline** is the cooperative GEMM's ([`super::gemm::cooperative`]):
//! `stages` slices of W (`tm × tk`, zeros for rows past `c_out`) and of the
//! unfolding (`tn × tk`), one `matmul2d(tm, tn, tk)` per slice into one
//! cooperative accumulator, one barrier per slice, the copies
//! `stages − lag` slices ahead, overlapped products with three or more
//! stages.
//!
//! **The epilogue** is the cooperative GEMM's too, with the bias per output
//! channel added in f32 before the one rounding: through its staging array
//! where the output pixels per image are a multiple of 8 (16-byte words of
//! a row), else element by element.
//!
//! A threadgroup computes a `tm × tn` tile of one image's output (`tm`
//! output channels by `tn` pixels); the grid is `(pixel tiles, channel
//! tiles, images)`, the pixel tiles fastest, so neighbouring threadgroups
//! read overlapping input rows while they are in L2.
//!
//! Parameters: `x_last` (the channels-last input), `w` (the weights by
//! tap), `y` (as `y_words`, 16-byte words, where staged), `bias` (with
//! [`ImplicitConvConfig::row_bias`]), and the sizes of [`ConvDims`](super::conv::ConvDims) by
//! value (`groups` unused: 1).

use super::conv::conv_dims;
use super::select::Overrides;
use enigma_backend::DeviceInfo;
use super::gemm::cooperative::{check_tile, for_each_slot, staging_pitch, store_tile_direct, store_tile_staged, words_type, SlicePipeline, Staging, TileTarget, COPY_ELEMENTS, STAGING_ROWS, WARPGROUP_ROWS};
use super::gemm::{DEFAULT_STAGES, MAX_STAGES};
use super::*;
use enigma_ir::builder::Matmul2d;
use enigma_ir::{Access, ExecutionScope, Matmul2dDescriptor, Matmul2dMode};

crate::kernel_args! {
    /// The buffers of [`conv2d_implicit`] (module docs), bound beside
    /// [`ConvDims`](super::conv::ConvDims): `y` as 16-byte words (`y_words`) where the kernel
    /// stages its output, `bias` where it adds one.
    pub struct ImplicitConvArgs {
        X_LAST x_last: buffer,
        W w: buffer,
        Y y: optional,
        Y_WORDS y_words: optional,
        BIAS bias: optional,
    }
}

crate::kernel_args! {
    /// The buffers and sizes of [`conv_input_channels_last`].
    pub struct ChannelsLastArgs {
        X x: buffer,
        X_LAST x_last: buffer,
        C_IN c_in: u32,
        PIXELS pixels: u32,
    }
}

crate::kernel_args! {
    /// The buffers and count of [`conv_weights_by_tap`].
    pub struct WeightsByTapArgs {
        W w: buffer,
        W_BY_TAP w_by_tap: buffer,
        TAPS taps: u32,
        C_IN c_in: u32,
        TOTAL total: u32,
    }
}

/// K values per slice: one tap of `tk` consecutive input channels.
pub const SLICE_DEPTH: u32 = 64;

/// One implicit-GEMM convolution kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ImplicitConvConfig {
    /// The data's type (input, weights, bias and output): f16 or bf16.
    pub dtype: DType,
    /// Output channels per tile: 64 per warpgroup.
    pub tm: u32,
    /// Output pixels per tile.
    pub tn: u32,
    /// K values per slice: input channels of one tap.
    pub tk: u32,
    pub stages: u32,
    /// A bias per output channel, added in f32 before the rounding.
    pub row_bias: bool,
    /// The output stored through a staging array as 16-byte words (pixels
    /// per image a multiple of 8); else element by element.
    pub staged: bool,
}

impl ImplicitConvConfig {
    /// The configuration for a convolution of `c_in` input channels and
    /// `pixels` output pixels per image within
    /// `max_threadgroup_memory_bytes`: 64 output channels by 128 pixels,
    /// then by 64, [`SLICE_DEPTH`] deep, each in the most stages from
    /// [`DEFAULT_STAGES`] down to two that fit (`stages` where asked), the
    /// output staged where the pixels are a multiple of 8, then the same
    /// without the staging array; `None` where the data is not f16 or
    /// bf16, `c_in` is no multiple of the slice depth, or nothing fits (two
    /// stages of 64 × 64 take 32 KiB, an Apple GPU's whole threadgroup
    /// memory, so there without the staging).
    pub fn for_problem(dtype: DType, c_in: u32, pixels: u32, row_bias: bool, stages: Option<u32>, max_threadgroup_memory_bytes: u64) -> Option<ImplicitConvConfig> {
        if !matches!(dtype, DType::F16 | DType::BF16) || c_in == 0 || !c_in.is_multiple_of(SLICE_DEPTH) {
            return None;
        }
        let staging: &[bool] = if pixels.is_multiple_of(COPY_ELEMENTS) { &[true, false] } else { &[false] };
        let stage_counts: Vec<u32> = match stages {
            Some(s) => vec![s],
            None => (2..=DEFAULT_STAGES).rev().collect(),
        };
        staging.iter().find_map(|&staged| {
            [128, 64].into_iter().find_map(|tn| {
                stage_counts.iter().find_map(|&stages| {
                    let cfg = ImplicitConvConfig { dtype, tm: WARPGROUP_ROWS, tn, tk: SLICE_DEPTH, stages, row_bias, staged };
                    cfg.check(max_threadgroup_memory_bytes).is_ok().then_some(cfg)
                })
            })
        })
    }

    /// The kernel a dense convolution (`groups` 1) of `dtype` with `c_in`
    /// input channels and `pixels` output pixels per image runs on
    /// `device`, where it runs this one: never for a plain product
    /// (`plain`: [`super::conv::is_plain_product`], which the GEMM reads as
    /// it lies, with no copy of the input: on the H200 64 images of 64 to
    /// 128 channels at 32 × 32 took 17.4 µs in a first form of this kernel
    /// against 10.9 in the GEMM,
    /// `BENCHMARKS.md`); by default on a device whose
    /// cooperative products are warpgroup matrix instructions
    /// ([`DeviceInfo::wgmma`]), anywhere with cooperative tensors where
    /// [`GemmOptions::cooperative`](super::select::GemmOptions::cooperative)
    /// is `Some(true)`, never where it is `Some(false)`; the stages from
    /// the options. `None` sends the convolution to the unfolding and the
    /// GEMM.
    pub fn select(dtype: DType, (c_in, groups, pixels): (u32, u32, u32), (plain, row_bias): (bool, bool), device: &DeviceInfo, overrides: &Overrides) -> Option<ImplicitConvConfig> {
        let wanted = match overrides.gemm.cooperative {
            Some(asked) => asked,
            None => device.wgmma(),
        };
        if !wanted || plain || groups != 1 || !device.features.contains(&enigma_ir::Feature::CooperativeTensors) {
            return None;
        }
        ImplicitConvConfig::for_problem(dtype, c_in, pixels, row_bias, overrides.gemm.stages, device.max_threadgroup_memory_bytes)
    }

    /// SIMD groups per threadgroup: four per warpgroup of 64 output channels.
    pub fn simdgroups(&self) -> u32 {
        self.tm / WARPGROUP_ROWS * 4
    }

    pub fn threads(&self) -> u32 {
        self.simdgroups() * SIMD_WIDTH
    }

    /// The staging array's row pitch in values (the cooperative GEMM's:
    /// `tn` and 16 bytes).
    pub fn staging_pitch(&self) -> u32 {
        staging_pitch(self.tn)
    }

    /// Threadgroup memory: `stages` slices of W and of the unfolding, and
    /// where staged the epilogue's [`STAGING_ROWS`] rows.
    pub fn memory_bytes(&self) -> u64 {
        let size = u64::from(self.dtype.size_bytes());
        let stages = u64::from(self.stages) * u64::from(self.tm * self.tk + self.tk * self.tn) * size;
        let staging = if self.staged { u64::from(STAGING_ROWS * self.staging_pitch()) * size } else { 0 };
        stages + staging
    }

    pub fn name(&self) -> String {
        let bias = if self.row_bias { "_bias" } else { "" };
        let direct = if self.staged { "" } else { "_direct" };
        format!("conv2d_implicit_{}_{}x{}x{}_s{}{bias}{direct}", self.dtype, self.tm, self.tn, self.tk, self.stages)
    }

    /// Whether the configuration makes a kernel: f16 or bf16; `tm` 64 or
    /// 128; `tn` a multiple of 64 up to 256; `tk` a multiple of 64; 2 to
    /// [`MAX_STAGES`] stages; both operands' slices split evenly into
    /// 16-byte copies; everything within `max_threadgroup_memory_bytes`.
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        let err = |message: String| Err(ShapeError::new(&name, message));
        if !matches!(self.dtype, DType::F16 | DType::BF16) {
            return err(format!("the implicit-GEMM convolution takes f16 or bf16 data, not {}", self.dtype));
        }
        let threads = self.threads();
        check_tile((self.tm, self.tn, self.tk)).or_else(err)?;
        if !(2..=MAX_STAGES).contains(&self.stages) {
            return err(format!("{} stages; between 2 and {MAX_STAGES}", self.stages));
        }
        if !Staging::splits_evenly((self.tm, self.tk), COPY_ELEMENTS, threads) || !Staging::splits_evenly((self.tn, self.tk), COPY_ELEMENTS, threads) {
            return err(format!("the slices' 16-byte copies do not split evenly over {threads} threads in whole rows"));
        }
        if self.memory_bytes() > max_threadgroup_memory_bytes {
            return err(format!("{} stages take {} bytes of threadgroup memory; the device has {max_threadgroup_memory_bytes}", self.stages, self.memory_bytes()));
        }
        Ok(())
    }

    /// The grid for `images` of `c_out` channels by `pixels`: a
    /// threadgroup per tile.
    pub fn dispatch(&self, c_out: u32, pixels: u32, images: u32) -> Dispatch {
        Dispatch::threadgroups([pixels.div_ceil(self.tn), c_out.div_ceil(self.tm), images], self.threads())
    }

    /// The kernel ([`conv2d_implicit`]).
    pub fn kernel(&self) -> Kernel {
        conv2d_implicit(self)
    }
}

/// The weights `[c_out][c_in][kh·kw]` reordered to `[c_out][kh·kw][c_in]`
/// (moved bit for bit): `conv_weights_by_tap_{dtype}`, a thread per
/// weight (`total` of them), writing consecutive elements of the result.
pub fn conv_weights_by_tap(dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("conv_weights_by_tap_{dtype}"));
    type P = WeightsByTapArgs;
    let w = k.buffer(P::W, dtype.ty(1), Access::Read);
    let by_tap = k.buffer(P::W_BY_TAP, dtype.ty(1), Access::ReadWrite);
    let taps = k.value(P::TAPS, Type::U32);
    let c_in = k.value(P::C_IN, Type::U32);
    let total = k.value(P::TOTAL, Type::U32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.if_(tid.lt(total), |k| {
        let ci = k.let_("ci", tid % c_in);
        let tap = k.let_("tap", tid / c_in % taps);
        let co = k.let_("co", tid / c_in / taps);
        k.store(by_tap.at(tid), w.get((co * c_in + ci) * taps + tap));
    });
    finish(k)
}

/// Threads of [`conv_input_channels_last`]'s threadgroups, and the side of
/// its square tiles (channels by pixels).
pub const CHANNELS_LAST_THREADS: u32 = 256;
pub const CHANNELS_LAST_TILE: u32 = 64;

/// The input `[images][c_in][pixels]` (NCHW) rewritten as
/// `[images][pixels][c_in]` (NHWC, moved bit for bit):
/// `conv_input_channels_last_{dtype}`. A threadgroup of
/// [`CHANNELS_LAST_THREADS`] takes a tile of [`CHANNELS_LAST_TILE`]
/// channels by as many pixels of one image (the grid `(pixel tiles,
/// channel tiles, images)`): it reads the tile's rows of pixels (consecutive
/// threads, consecutive pixels) into threadgroup memory and, after a
/// barrier, writes its rows of channels (consecutive threads, consecutive
/// channels); elements past `c_in` or `pixels` are skipped.
pub fn conv_input_channels_last(dtype: DType) -> Kernel {
    let mut k = KernelBuilder::new(format!("conv_input_channels_last_{dtype}"));
    type P = ChannelsLastArgs;
    let x = k.buffer(P::X, dtype.ty(1), Access::Read);
    let last = k.buffer(P::X_LAST, dtype.ty(1), Access::ReadWrite);
    let c_in = k.value(P::C_IN, Type::U32);
    let pixels = k.value(P::PIXELS, Type::U32);
    let side = CHANNELS_LAST_TILE;
    // A row of the tile padded by two values, so that a column's values
    // fall in different banks.
    let pitch = side + 2;
    let tile = k.threadgroup_array("tile", dtype.ty(1), side * pitch);
    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let (p0, c0, image) = (k.let_("p0", tg.x() * side), k.let_("c0", tg.y() * side), tg.z());
    let base = k.let_("base", image * c_in * pixels);
    let lane = k.let_("lane", lid % side);
    let row0 = k.let_("row0", lid / side);
    let rows_per_pass = CHANNELS_LAST_THREADS / side;
    k.for_unrolled("read", 0u32, side / rows_per_pass, 1u32, |k, i| {
        let c = k.let_("read_c", row0 + i * rows_per_pass);
        let inside = (c0 + c).lt(c_in).and((p0 + lane).lt(pixels));
        k.if_(inside, |k| k.store(tile.at(c * pitch + lane), x.get(base + (c0 + c) * pixels + p0 + lane)));
    });
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.for_unrolled("write", 0u32, side / rows_per_pass, 1u32, |k, i| {
        let p = k.let_("write_p", row0 + i * rows_per_pass);
        let inside = (p0 + p).lt(pixels).and((c0 + lane).lt(c_in));
        k.if_(inside, |k| k.store(last.at(base + (p0 + p) * c_in + c0 + lane), tile.get(lane * pitch + p)));
    });
    finish(k)
}

/// The grid of [`conv_input_channels_last`] for `images` of `c_in`
/// channels by `pixels`.
pub fn channels_last_dispatch(c_in: u32, pixels: u32, images: u32) -> Dispatch {
    Dispatch::threadgroups([pixels.div_ceil(CHANNELS_LAST_TILE), c_in.div_ceil(CHANNELS_LAST_TILE), images], CHANNELS_LAST_THREADS)
}

/// The implicit-GEMM convolution kernel of `cfg` (module docs).
///
/// # Panics
/// When `cfg.check(u64::MAX)` fails: plan through
/// [`ImplicitConvConfig::for_problem`].
pub fn conv2d_implicit(cfg: &ImplicitConvConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    let ImplicitConvConfig { dtype, tm, tn, tk, stages, .. } = *cfg;
    let threads = cfg.threads();
    let mut k = KernelBuilder::new(cfg.name());
    type P = ImplicitConvArgs;
    let x = k.buffer(P::X_LAST, dtype.ty(1), Access::Read);
    let wt = k.buffer(P::W, dtype.ty(1), Access::Read);
    let y = if cfg.staged { k.buffer(P::Y_WORDS, words_type(), Access::ReadWrite) } else { k.buffer(P::Y, dtype.ty(1), Access::ReadWrite) };
    let bias = cfg.row_bias.then(|| k.buffer(P::BIAS, dtype.ty(1), Access::Read));
    let [c_in, in_h, in_w, c_out, out_h, out_w, kh, kw, sh, sw, ph, pw, dh, dw, _groups] = conv_dims(&mut k);
    let w_slices = k.threadgroup_array("w_slices", dtype.ty(1), stages * tm * tk);
    let x_slices = k.threadgroup_array("x_slices", dtype.ty(1), stages * tn * tk);
    let staging = cfg.staged.then(|| k.threadgroup_array("y_staging", dtype.ty(1), STAGING_ROWS * cfg.staging_pitch()));
    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let (image, m0, n0) = (tg.z(), k.let_("m0", tg.y() * tm), k.let_("n0", tg.x() * tn));
    let taps = k.let_("taps", kh * kw);
    let kk = k.let_("kk", taps * c_in);
    let pixels = k.let_("pixels", out_h * out_w);
    let slices = k.let_("slices", kk / tk);
    let w_ops = Staging::new(&mut k, "w", (wt, w_slices), (tm, tk), COPY_ELEMENTS, lid, threads);
    // The unfolding's slices transposed: a row per output pixel, its `tk`
    // channels of one tap (16-byte words of the channels-last input).
    let x_ops = Staging::new(&mut k, "x", (x, x_slices), (tn, tk), COPY_ELEMENTS, lid, threads);
    let i32 = |e: Ex| e.cast(Type::I32);
    // Per row this thread copies: whether its pixel is one and its
    // window's origin.
    let (row0, row_step, copies) = x_ops.rows_of_thread();
    let origins: Vec<(Ex, Ex, Ex)> = (0..copies)
        .map(|i| {
            let pixel = k.let_(&format!("pixel{i}"), n0 + row0 + i * row_step);
            let y0 = k.let_(&format!("y0_{i}"), i32(pixel / out_w * sh) - i32(ph));
            let x0 = k.let_(&format!("x0_{i}"), i32(pixel % out_w * sw) - i32(pw));
            (pixel.lt(pixels), y0, x0)
        })
        .collect();
    let image_base = k.let_("image_base", image * in_h * in_w * c_in);

    // Slice `t`'s copies into stage `stage`: W's `tm × tk` (rows past
    // `c_out` zero) and the unfolding's `tn × tk` (pixels past the output
    // and windows over the padding zero).
    let issue = |k: &mut KernelBuilder, tag: &str, t: Ex, stage: u32| {
        let k0 = k.let_(&format!("{tag}_k0"), t * tk);
        w_ops.issue(k, &format!("{tag}_w"), stage, m0 * kk + k0, kk, |r, _| (m0 + r).lt(c_out));
        let tap = k.let_(&format!("{tag}_tap"), k0 / c_in);
        let ci0 = k.let_(&format!("{tag}_ci0"), k0 % c_in);
        let dy = k.let_(&format!("{tag}_dy"), i32(tap / kw * dh));
        let dx = k.let_(&format!("{tag}_dx"), i32(tap % kw * dw));
        let zero = lit(Scalar::I32, 0.0);
        let row = |k: &mut KernelBuilder, i: u32| {
            let (is_pixel, y0, x0) = origins[i as usize];
            let iy = k.let_(&format!("{tag}_iy{i}"), y0 + dy);
            let ix = k.let_(&format!("{tag}_ix{i}"), x0 + dx);
            let inside = is_pixel.and(iy.ge(zero)).and(iy.lt(i32(in_h))).and(ix.ge(zero)).and(ix.lt(i32(in_w)));
            (image_base + (iy.cast(Type::U32) * in_w + ix.cast(Type::U32)) * c_in + ci0, inside)
        };
        x_ops.issue_rows(k, &format!("{tag}_x"), stage, &row);
    };

    let desc = Matmul2dDescriptor { transpose_right: true, mode: Matmul2dMode::MultiplyAccumulate, ..Matmul2dDescriptor::new(tm, tn, Some(tk)) };
    let op = Matmul2d::new(desc, ExecutionScope::Simdgroups(cfg.simdgroups()));
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    let per_thread = tm * tn / threads;
    let pipeline = SlicePipeline::new(stages);
    pipeline.prologue(&mut k, "first", slices, &issue);
    for_each_slot(&mut k, acc, per_thread, "i", &|k, i, _| k.cooperative_set(acc, i, 0.0f32));
    pipeline.run(&mut k, slices, (&op, acc), &|s| (w_ops.view(stages, Ex::from(s)), x_ops.view(stages, Ex::from(s))), &issue, &|_, _, _| {});
    let target = TileTarget { c: y, output: dtype, base: image * c_out * pixels, origin: (m0, n0), size: (c_out, pixels), alpha: f(1.0), beta: f(0.0), bias };
    match staging {
        Some(staging) => store_tile_staged(&mut k, acc, per_thread, &target, (staging, cfg.staging_pitch(), STAGING_ROWS), (tm, tn), (lid, threads)),
        None => store_tile_direct(&mut k, acc, per_thread, &target),
    }
    finish(k)
}
