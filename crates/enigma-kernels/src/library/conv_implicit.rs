//! Dense 2-D convolution as an implicit GEMM on cooperative tensors: for
//! each image, `Y = W · X̂` where `W` is the `c_out × K` matrix of weights
//! (`K = kh·kw·c_in`) and `X̂` the `K × (oh·ow)` unfolding of the image
//! that [`super::conv::im2col`] would write, which here is never written:
//! each slice of it is gathered from the input into threadgroup memory by
//! the threads that multiply it.
//!
//! **K ordered by tap.** Row `r` of `X̂` is tap `r / c_in` (`ky·kw + kx`)
//! of input channel `r % c_in`, so the weights are taken reordered to
//! `[c_out][kh][kw][c_in]` ([`conv_weights_by_tap`], a pass over the few
//! weights). With `c_in` a multiple of the slice depth `tk`, every slice
//! lies in one tap: its `tk` rows are consecutive channels of the input
//! shifted by one `(ky, kx)`. A thread then finds an output pixel's input
//! position and whether it lies in the padding once per slice, and each
//! of its rows is one plane further on (`in_h·in_w` elements): one load,
//! one store, no division per element. Consecutive threads take
//! consecutive pixels, so a SIMD group reads consecutive input elements.
//!
//! **The pipeline** is the cooperative GEMM's ([`super::gemm::cooperative`]):
//! `stages` slices of W (`tm × tk`) filled by 16-byte asynchronous copies
//! (zeros for rows past `c_out`) and of `X̂` (`tk × tn`), one
//! `matmul2d(tm, tn, tk)` per slice into one cooperative accumulator, one
//! barrier per slice, overlapped products with three or more stages. The
//! copies of W run `stages − lag` slices ahead; the gather of slice
//! `t + 1` follows the start of slice `t`'s product, into the stage that
//! slice `t + 1 − stages` used (released by then: `stages > lag`), so the
//! gather's loads overlap the tensor cores' work.
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
//! Parameters: `x, w` (the weights by tap), `y` (as `y_words`, 16-byte
//! words, where staged), `bias` (with [`ImplicitConvConfig::row_bias`]),
//! and the sizes of [`ConvDims`] by value (`groups` unused: 1).

use super::conv::ConvDims;
use super::select::Overrides;
use enigma_backend::DeviceInfo;
use super::gemm::cooperative::{for_each_slot, overlap_lag, slice_product, store_tile_direct, store_tile_staged, words_type, Staging, TileTarget, COPY_ELEMENTS, STAGING_PAD, STAGING_ROWS, WARPGROUP_ROWS};
use super::gemm::MAX_STAGES;
use super::*;
use enigma_ir::builder::{Matmul2d, Tensor};
use enigma_ir::{Access, ExecutionScope, Matmul2dDescriptor, Matmul2dMode};

crate::kernel_args! {
    /// The buffers of [`conv2d_implicit`] (module docs), bound beside
    /// [`ConvDims`]: `y` as 16-byte words (`y_words`) where the kernel
    /// stages its output, `bias` where it adds one.
    pub struct ImplicitConvArgs {
        X x: buffer,
        W w: buffer,
        Y y: optional,
        Y_WORDS y_words: optional,
        BIAS bias: optional,
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
    /// then by 64, [`SLICE_DEPTH`] deep, each in two stages, else three or
    /// four (`stages` where asked: on the H200, 64 images of 64 channels at
    /// 32 × 32 under a 3×3 window took 38.0, 38.5 and 39.5 µs in two,
    /// three and four, `BENCHMARKS.md`), the output staged where the pixels are a
    /// multiple of 8, then the same without the staging array; `None` where
    /// the data is not f16 or bf16, `c_in` is no multiple of the slice
    /// depth, or nothing fits (two stages of 64 × 64 take 32 KiB, an Apple
    /// GPU's whole threadgroup memory, so there without the staging).
    pub fn for_problem(dtype: DType, c_in: u32, pixels: u32, row_bias: bool, stages: Option<u32>, max_threadgroup_memory_bytes: u64) -> Option<ImplicitConvConfig> {
        if !matches!(dtype, DType::F16 | DType::BF16) || c_in == 0 || !c_in.is_multiple_of(SLICE_DEPTH) {
            return None;
        }
        let staging: &[bool] = if pixels.is_multiple_of(COPY_ELEMENTS) { &[true, false] } else { &[false] };
        let stage_counts: Vec<u32> = match stages {
            Some(s) => vec![s],
            None => (2..=4).collect(),
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
    /// it lies with 16-byte copies: on the H200 64 images of 64 to 128
    /// channels at 32 × 32 took 17.4 µs here against 10.9 in the GEMM,
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
        self.tn + STAGING_PAD
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
    /// 128; `tn` a multiple of 64 up to 256 that the threads' pixels
    /// divide or that divides them; `tk` a multiple of 64; 2 to
    /// [`MAX_STAGES`] stages; W's slices split evenly into 16-byte copies;
    /// everything within `max_threadgroup_memory_bytes`.
    pub fn check(&self, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
        let name = self.name();
        let err = |message: String| Err(ShapeError::new(&name, message));
        if !matches!(self.dtype, DType::F16 | DType::BF16) {
            return err(format!("the implicit-GEMM convolution takes f16 or bf16 data, not {}", self.dtype));
        }
        let threads = self.threads();
        if !matches!(self.tm, 64 | 128) || !self.tn.is_multiple_of(64) || !(64..=256).contains(&self.tn) || self.tk == 0 || !self.tk.is_multiple_of(64) {
            return err(format!("a {}×{}×{} tile; tm 64 or 128, tn a multiple of 64 up to 256, tk a multiple of 64", self.tm, self.tn, self.tk));
        }
        if !(threads.is_multiple_of(self.tn) || self.tn.is_multiple_of(threads)) {
            return err(format!("{} pixels per tile over {threads} threads", self.tn));
        }
        if !(2..=MAX_STAGES).contains(&self.stages) {
            return err(format!("{} stages; between 2 and {MAX_STAGES}", self.stages));
        }
        if !Staging::splits_evenly((self.tm, self.tk), COPY_ELEMENTS, threads) {
            return err(format!("the weights' 16-byte copies do not split evenly over {threads} threads"));
        }
        if self.memory_bytes() > max_threadgroup_memory_bytes {
            return err(format!("{} stages take {} bytes of threadgroup memory; the device has {max_threadgroup_memory_bytes}", self.stages, self.memory_bytes()));
        }
        Ok(())
    }

    /// Whether the kernel takes a convolution: `c_in` a multiple of `tk`
    /// (each slice one tap) and, staged, the output pixels per image a
    /// multiple of 8.
    pub fn takes(&self, c_in: u32, pixels: u32) -> bool {
        c_in.is_multiple_of(self.tk) && (!self.staged || pixels.is_multiple_of(COPY_ELEMENTS))
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
    let x = k.buffer(P::X, dtype.ty(1), Access::Read);
    let wt = k.buffer(P::W, dtype.ty(1), Access::Read);
    let y = if cfg.staged { k.buffer(P::Y_WORDS, words_type(), Access::ReadWrite) } else { k.buffer(P::Y, dtype.ty(1), Access::ReadWrite) };
    let bias = cfg.row_bias.then(|| k.buffer(P::BIAS, dtype.ty(1), Access::Read));
    let dims: Vec<Ex> = ConvDims::NAMES.iter().map(|n| k.value(n, Type::U32)).collect();
    let [c_in, in_h, in_w, c_out, out_h, out_w, kh, kw, sh, sw, ph, pw, dh, dw, _groups] = dims[..] else { unreachable!("ConvDims has 15 fields") };
    let w_slices = k.threadgroup_array("w_slices", dtype.ty(1), stages * tm * tk);
    let x_slices = k.threadgroup_array("x_slices", dtype.ty(1), stages * tk * tn);
    let staging = cfg.staged.then(|| k.threadgroup_array("y_staging", dtype.ty(1), STAGING_ROWS * cfg.staging_pitch()));
    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let (image, m0, n0) = (tg.z(), k.let_("m0", tg.y() * tm), k.let_("n0", tg.x() * tn));
    let taps = k.let_("taps", kh * kw);
    let kk = k.let_("kk", taps * c_in);
    let pixels = k.let_("pixels", out_h * out_w);
    let plane = k.let_("plane", in_h * in_w);
    let slices = k.let_("slices", kk / tk);
    let w_ops = Staging::new(&mut k, "w", (wt, w_slices), (tm, tk), COPY_ELEMENTS, lid, threads);

    // The gather's share of each thread: `cols` pixel columns
    // `col0 + j·threads`, and rows `row0 + i·row_step` of each.
    let (cols, row_step) = if tn >= threads { (tn / threads, 1) } else { (1, threads / tn) };
    let rows = tk / row_step;
    let row0 = k.let_("row0", lid / tn.min(threads));
    let col0 = k.let_("first_column", lid % tn.min(threads));
    let i32 = |e: Ex| e.cast(Type::I32);
    // Per column: its pixel, whether it is one, and its window's origin.
    let columns: Vec<(Ex, Ex, Ex, Ex)> = (0..cols)
        .map(|j| {
            let col = k.let_(&format!("column{j}"), col0 + j * threads);
            let pixel = k.let_(&format!("pixel{j}"), n0 + col);
            let y0 = k.let_(&format!("y0_{j}"), i32(pixel / out_w * sh) - i32(ph));
            let x0 = k.let_(&format!("x0_{j}"), i32(pixel % out_w * sw) - i32(pw));
            (col, pixel.lt(pixels), y0, x0)
        })
        .collect();
    let image_base = k.let_("image_base", image * c_in * plane);

    // Slice `t`'s rows of the unfolding into stage `stage`: every load
    // first, then the stores.
    let gather = |k: &mut KernelBuilder, tag: &str, t: Ex, stage: u32| {
        let k0 = k.let_(&format!("{tag}_k0"), t * tk);
        let tap = k.let_(&format!("{tag}_tap"), k0 / c_in);
        let ci0 = k.let_(&format!("{tag}_ci0"), k0 % c_in);
        let dy = k.let_(&format!("{tag}_dy"), i32(tap / kw * dh));
        let dx = k.let_(&format!("{tag}_dx"), i32(tap % kw * dw));
        let zero = lit(Scalar::I32, 0.0);
        let mut values = Vec::with_capacity((cols * rows) as usize);
        for (j, &(col, is_pixel, y0, x0)) in columns.iter().enumerate() {
            let iy = k.let_(&format!("{tag}_iy{j}"), y0 + dy);
            let ix = k.let_(&format!("{tag}_ix{j}"), x0 + dx);
            let inside = k.let_(&format!("{tag}_in{j}"), is_pixel.and(iy.ge(zero)).and(iy.lt(i32(in_h))).and(ix.ge(zero)).and(ix.lt(i32(in_w))));
            // Outside the input (padding, or no pixel) the index stays in
            // bounds and the value is zero.
            let first = k.let_(&format!("{tag}_first{j}"), select(Ex::from(0u32), image_base + (ci0 + row0) * plane + iy.cast(Type::U32) * in_w + ix.cast(Type::U32), inside));
            let step = k.let_(&format!("{tag}_step{j}"), select(Ex::from(0u32), plane * row_step, inside));
            for i in 0..rows {
                let v = k.let_(&format!("{tag}_v{j}_{i}"), select(lit(dtype.scalar(), 0.0), x.get(first + step * i), inside));
                values.push((col, i, v));
            }
        }
        let origin = stage * tk * tn;
        for (col, i, v) in values {
            k.store(x_slices.at((row0 + i * row_step) * tn + col + origin), v);
        }
    };
    let issue_w = |k: &mut KernelBuilder, tag: &str, t: Ex, stage: u32| {
        let k0 = k.let_(&format!("{tag}_k0"), t * tk);
        w_ops.issue(k, &format!("{tag}_w"), stage, m0 * kk + k0, kk, |r, _| (m0 + r).lt(c_out));
    };

    let desc = Matmul2dDescriptor { mode: Matmul2dMode::MultiplyAccumulate, ..Matmul2dDescriptor::new(tm, tn, Some(tk)) };
    let op = Matmul2d::new(desc, ExecutionScope::Simdgroups(cfg.simdgroups()));
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    let per_thread = tm * tn / threads;
    let lag = overlap_lag(stages);
    let ahead = stages - lag;
    for t in 0..ahead {
        k.if_(Ex::from(t).lt(slices), |k| issue_w(k, &format!("first{t}"), Ex::from(t), t % stages));
        k.async_commit();
    }
    gather(&mut k, "gather_first", Ex::from(0u32), 0);
    for_each_slot(&mut k, acc, per_thread, "i", &|k, i, _| k.cooperative_set(acc, i, 0.0f32));
    let view = |arr: Mem, (cols, rows): (u32, u32), s: u32| Tensor::new(arr, [cols, stages * rows]).slice(0u32, s * rows);
    k.for_range("round", 0u32, slices, stages, |k, round| {
        for s in 0..stages {
            let t = k.let_(&format!("t{s}"), round + s);
            k.if_(t.lt(slices), |k| {
                slice_product(k, &op, (&view(w_slices, (tk, tm), s), &view(x_slices, (tn, tk), s)), acc, (ahead, lag));
                let next = k.let_(&format!("ahead{s}"), t + ahead);
                k.if_(next.lt(slices), |k| issue_w(k, &format!("ahead{s}"), next, (s + ahead) % stages));
                k.async_commit();
                let following = k.let_(&format!("following{s}"), t + 1u32);
                k.if_(following.lt(slices), |k| gather(k, &format!("gather{s}"), following, (s + 1) % stages));
            });
        }
    });
    k.async_wait(0);
    let target = TileTarget { c: y, output: dtype, base: image * c_out * pixels, origin: (m0, n0), size: (c_out, pixels), alpha: f(1.0), beta: f(0.0), bias };
    match staging {
        Some(staging) => store_tile_staged(&mut k, acc, per_thread, &target, (staging, cfg.staging_pitch(), STAGING_ROWS), (tm, tn), (lid, threads)),
        None => store_tile_direct(&mut k, acc, per_thread, &target),
    }
    finish(k)
}

