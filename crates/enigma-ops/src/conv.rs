//! 2-D convolution: dense half-precision ones of input channels a multiple
//! of 64 as an implicit GEMM on cooperative tensors where
//! `library::conv_implicit::ImplicitConvConfig::select` takes them (the
//! weights reordered by tap, the input copied channels-last, then one
//! kernel); other dense and grouped convolutions as a batched matrix
//! product over the unfolded input (`library::conv::im2col`, none for a
//! pointwise one); depthwise ones (one input channel per group) of stride
//! and dilation 1 over rows of whole 16-byte words by rows of words
//! (`library::conv::conv2d_depthwise_rows`), others by tiles staged in
//! threadgroup memory (`library::conv::conv2d_depthwise`) where the window
//! fits those kernels; the rest (and unfoldings that would pass
//! [`IM2COL_MAX_BYTES`]) with the direct kernel of `library::conv`.

use crate::gemm::Product;
use crate::{arg_err, Error, KernelType, Ops};
use enigma_kernels::library::elementwise::{self, Elementwise, RepeatArgs};
use enigma_kernels::library::conv_implicit::{self, ChannelsLastArgs, ImplicitConvArgs, ImplicitConvConfig, WeightsByTapArgs};
use enigma_kernels::library::{self as lib, conv};
use enigma_runtime::Buffer;

/// The most bytes the unfolded input of one convolution may take: past
/// them the convolution runs the direct kernel, which needs no scratch
/// memory (1 GiB: 64 images of 64 channels at 32×32 under a 3×3 window
/// take 75 MiB in f16).
pub const IM2COL_MAX_BYTES: usize = 1 << 30;

/// The shape of a 2-D convolution (PyTorch's `conv2d` arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2d {
    /// Images (N).
    pub batch: usize,
    pub in_channels: usize,
    /// `[h, w]` of each input plane.
    pub size: [usize; 2],
    pub out_channels: usize,
    /// `[kh, kw]`.
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    /// Channel groups: 1 dense, `in_channels` depthwise.
    pub groups: usize,
}

impl Conv2d {
    /// `[oh, ow]`: `(h + 2·ph - dh·(kh - 1) - 1) / sh + 1`, or an error
    /// naming the numbers where a size, stride, dilation or the groups do
    /// not fit.
    pub fn output_size(&self) -> Result<[usize; 2], Error> {
        let name = "conv2d";
        let c = self;
        if c.groups == 0 || !c.in_channels.is_multiple_of(c.groups) || !c.out_channels.is_multiple_of(c.groups) {
            return Err(arg_err(name, format!("groups = {} must divide the input channels ({}) and the output channels ({})", c.groups, c.in_channels, c.out_channels)));
        }
        let mut out = [0; 2];
        for i in 0..2 {
            let axis = ["height", "width"][i];
            if c.kernel[i] == 0 || c.stride[i] == 0 || c.dilation[i] == 0 {
                return Err(arg_err(name, format!("the window {:?}, stride {:?} and dilation {:?} must be at least 1 along the {axis}", c.kernel, c.stride, c.dilation)));
            }
            let span = c.dilation[i] * (c.kernel[i] - 1) + 1;
            if c.size[i] + 2 * c.padding[i] < span {
                return Err(arg_err(name, format!("the dilated window ({span}) is larger than the padded input ({} + 2·{}) along the {axis}", c.size[i], c.padding[i])));
            }
            out[i] = (c.size[i] + 2 * c.padding[i] - span) / c.stride[i] + 1;
        }
        Ok(out)
    }
}

impl Ops<'_> {

    /// `y = conv2d(x, w) + bias` for NCHW `x` (`batch · in_channels · h ·
    /// w`), OIHW `w` (`out_channels · in_channels / groups · kh · kw`) and
    /// an optional bias of `out_channels`, all of one type: the output
    /// (`batch · out_channels · oh · ow`, that type) and `[oh, ow]`.
    pub fn conv2d(&self, x: &Buffer, w: &Buffer, bias: Option<&Buffer>, shape: &Conv2d) -> Result<(Buffer, [usize; 2]), Error> {
        let name = "conv2d";
        let [oh, ow] = shape.output_size()?;
        let dtype = self.dtype_of(name, x)?;
        let c = shape;
        let inputs = c.batch * c.in_channels * c.size[0] * c.size[1];
        let weights = c.out_channels * (c.in_channels / c.groups) * c.kernel[0] * c.kernel[1];
        self.need(name, "x", x, inputs, dtype.scalar())?;
        self.need(name, "w", w, weights, dtype.scalar())?;
        if let Some(b) = bias {
            self.need(name, "bias", b, c.out_channels, dtype.scalar())?;
        }
        let total = c.batch * c.out_channels * oh * ow;
        lib::nonzero(name, "output elements", total)?;
        let total32 = lib::to_u32(name, "output elements", total)?;
        lib::to_u32(name, "input elements", inputs)?;
        lib::to_u32(name, "weights", weights)?;
        let values = [c.in_channels, c.size[0], c.size[1], c.out_channels, oh, ow, c.kernel[0], c.kernel[1], c.stride[0], c.stride[1], c.padding[0], c.padding[1], c.dilation[0], c.dilation[1], c.groups];
        let mut dims = [0; 15];
        for ((d, v), what) in dims.iter_mut().zip(values).zip(conv::ConvDims::NAMES) {
            *d = lib::to_u32(name, what, v)?;
        }
        let [c_in, in_h, in_w, c_out, out_h, out_w, kh, kw, sh, sw, ph, pw, dh, dw, groups] = dims;
        let dims = conv::ConvDims { c_in, in_h, in_w, c_out, out_h, out_w, kh, kw, sh, sw, ph, pw, dh, dw, groups };
        if let Some(y) = self.conv2d_implicit(x, w, bias, c, dtype, dims)? {
            return Ok((y, [oh, ow]));
        }
        if let Some(y) = self.conv2d_gemm(x, w, bias, c, dtype, dims)? {
            return Ok((y, [oh, ow]));
        }
        let depthwise = conv::DepthwiseConfig { dtype, kernel: [kh, kw], stride: [sh, sw], dilation: [dh, dw] };
        if c.in_channels == c.groups {
            if let Some(y) = self.conv2d_depthwise_rows(x, w, bias, &depthwise, dims, total)? {
                return Ok((y, [oh, ow]));
            }
        }
        if c.in_channels == c.groups && depthwise.fits() {
            let planes = lib::to_u32(name, "output planes", c.batch * c.out_channels)?;
            let (dispatch, tiles, tiles_w) = depthwise.dispatch(planes, out_h, out_w);
            lib::to_u32(name, "output tiles", planes as usize * tiles as usize)?;
            let y = self.output(dtype.scalar(), total)?;
            let args = conv::DepthwiseArgs { x, w, bias: bias.unwrap_or(w), y: &y, has_bias: bias.is_some() as u32 };
            let dims = conv::DepthwiseDims { c_in, in_h, in_w, c_out, out_h, out_w, ph, pw, tiles, tiles_w };
            self.launch(format!("conv2d depthwise {depthwise:?}"), || conv::conv2d_depthwise(&depthwise), dispatch, &(args, dims))?;
            return Ok((y, [oh, ow]));
        }
        let t = lib::check_threads(name, self.threads(KernelType::Elementwise))?;
        let y = self.output(dtype.scalar(), total)?;
        self.launch(
            format!("conv2d {dtype:?}"),
            || conv::conv2d(dtype),
            lib::Dispatch::threadgroups([total32.div_ceil(t), 1, 1], t),
            // Without a bias the kernel never reads `bias`: `w` stands in.
            &(conv::ConvArgs { x, w, bias: bias.unwrap_or(w), y: &y, has_bias: bias.is_some() as u32, total: total32 }, dims),
        )?;
        Ok((y, [oh, ow]))
    }

    /// A depthwise convolution of stride and dilation 1 over rows of whole
    /// 16-byte words by rows of words (`library::conv::conv2d_depthwise_rows`),
    /// where it takes the window and the input binds as 16-byte words,
    /// unless the options ask for no vector loads; `None` otherwise.
    fn conv2d_depthwise_rows(&self, x: &Buffer, w: &Buffer, bias: Option<&Buffer>, cfg: &conv::DepthwiseConfig, dims: conv::ConvDims, total: usize) -> Result<Option<Buffer>, Error> {
        let name = "conv2d";
        if self.options.vectorize == Some(false) {
            return Ok(None);
        }
        let conv::ConvDims { c_in, in_h, in_w, c_out, out_h, out_w, ph, pw, .. } = dims;
        let Some(rows) = conv::RowWindow::of(cfg.dtype, cfg.kernel, (cfg.stride, cfg.dilation), pw, (in_w, out_w)) else { return Ok(None) };
        let words = rows.x_word_type();
        let Some(x_words) = x.viewed_as(words) else { return Ok(None) };
        let y = self.output(cfg.dtype.scalar(), total)?;
        let y_words = y.viewed_as(words).ok_or_else(|| arg_err(name, format!("an output of {total} elements of {} does not bind as 16-byte words", cfg.dtype)))?;
        let planes = total / (out_h as usize * out_w as usize);
        let (threads, dispatch) = rows.depthwise_dispatch(lib::to_u32(name, "output planes", planes)?, out_h, out_w);
        let threads = lib::to_u32(name, "threads", threads as usize)?;
        let args = conv::DepthwiseRowsArgs { x, x_words: &x_words, w, bias: bias.unwrap_or(w), y_words: &y_words, has_bias: bias.is_some() as u32 };
        let dims = conv::DepthwiseRowsDims { c_in, in_h, in_w, c_out, out_h, out_w, ph, threads };
        self.launch(format!("conv2d depthwise rows {rows:?}"), || conv::conv2d_depthwise_rows(&rows), dispatch, &(args, dims))?;
        Ok(Some(y))
    }

    /// A dense convolution as an implicit GEMM on cooperative tensors
    /// (`library::conv_implicit`: the weights reordered by tap and the
    /// input rewritten channels-last, then one kernel that copies the
    /// unfolding's slices into threadgroup memory itself), where
    /// [`ImplicitConvConfig::select`] takes it; `None` otherwise.
    fn conv2d_implicit(&self, x: &Buffer, w: &Buffer, bias: Option<&Buffer>, c: &Conv2d, dtype: lib::DType, dims: conv::ConvDims) -> Result<Option<Buffer>, Error> {
        let name = "conv2d";
        let pixels = dims.out_h * dims.out_w;
        let plain = conv::is_plain_product([dims.kh, dims.kw], [dims.sh, dims.sw], [dims.ph, dims.pw]);
        let Some(cfg) = ImplicitConvConfig::select(dtype, (dims.c_in, dims.groups, pixels), (plain, bias.is_some()), self.rt.device(), &self.options.overrides()) else { return Ok(None) };
        let taps = dims.kh * dims.kw;
        let weights = c.out_channels * c.in_channels * taps as usize;
        let total = lib::to_u32(name, "weights", weights)?;
        let t = lib::check_threads(name, self.threads(KernelType::Elementwise))?;
        let by_tap = self.output(dtype.scalar(), weights)?;
        let dispatch = lib::Dispatch::threadgroups([total.div_ceil(t), 1, 1], t);
        self.launch(format!("conv weights by tap {dtype:?}"), || conv_implicit::conv_weights_by_tap(dtype), dispatch, &WeightsByTapArgs { w, w_by_tap: &by_tap, taps, c_in: dims.c_in, total })?;
        let inputs = c.batch * c.in_channels * c.size[0] * c.size[1];
        let x_last = self.output(dtype.scalar(), inputs)?;
        let images = lib::to_u32(name, "images", c.batch)?;
        let in_pixels = dims.in_h * dims.in_w;
        let args = ChannelsLastArgs { x, x_last: &x_last, c_in: dims.c_in, pixels: in_pixels };
        self.launch(format!("conv input channels last {dtype:?}"), || conv_implicit::conv_input_channels_last(dtype), conv_implicit::channels_last_dispatch(dims.c_in, in_pixels, images), &args)?;
        let outputs = c.batch * c.out_channels * pixels as usize;
        let y = self.output(dtype.scalar(), outputs)?;
        let words = if cfg.staged {
            Some(y.viewed_as(enigma_ir::Type::vector(enigma_ir::Scalar::U32, 4)).ok_or_else(|| arg_err(name, format!("an output of {outputs} elements of {dtype} does not bind as 16-byte words")))?)
        } else {
            None
        };
        let args = ImplicitConvArgs { x_last: &x_last, w: &by_tap, y: (!cfg.staged).then_some(&y), y_words: words.as_ref(), bias };
        self.launch(format!("conv2d implicit {cfg:?}"), || cfg.kernel(), cfg.dispatch(dims.c_out, pixels, images), &(args, dims))?;
        Ok(Some(y))
    }

    /// A convolution whose groups take more than one input channel, as
    /// one batched product ([`Product`]) over images and groups: for
    /// image `n` and group `g`, `Y[n, g] = W[g] · X[n, g]` (`[out/groups,
    /// in/groups·kh·kw] · [in/groups·kh·kw, oh·ow]`), `X[n, g]` the group's
    /// rows of the image's unfolding (`library::conv::im2col`, by 16-byte
    /// stores where the output rows are whole 16 bytes; the input
    /// itself for a 1×1 window of stride 1 without padding), with f32
    /// accumulation and the result rounded once to the input's type.
    /// Without groups every image's product reads the one set of weights
    /// (A's batch stride 0) and the bias per output channel is added in
    /// the GEMM's epilogue before the rounding (where the product is not
    /// split over K: [`enigma_kernels::library::gemm::GemmPlan::with_row_bias`]);
    /// with groups the weights are repeated per image
    /// ([`Self::repeat_weights`]) and the bias is a broadcast add after
    /// the product (an f16 or bf16 result then rounded twice). `None` for a
    /// depthwise convolution and where the unfolding would pass
    /// [`IM2COL_MAX_BYTES`].
    fn conv2d_gemm(&self, x: &Buffer, w: &Buffer, bias: Option<&Buffer>, c: &Conv2d, dtype: lib::DType, dims: conv::ConvDims) -> Result<Option<Buffer>, Error> {
        let name = "conv2d";
        let in_group = c.in_channels / c.groups;
        let (taps, pixels) = (c.kernel[0] * c.kernel[1], dims.out_h as usize * dims.out_w as usize);
        let unfolded = c.batch * c.in_channels * taps * pixels;
        if in_group == 1 || unfolded.saturating_mul(dtype.size_bytes() as usize) > IM2COL_MAX_BYTES {
            return Ok(None);
        }
        let t = lib::check_threads(name, self.threads(KernelType::Elementwise))?;
        let col = if conv::is_plain_product([dims.kh, dims.kw], [dims.sh, dims.sw], [dims.ph, dims.pw]) {
            x.clone()
        } else {
            lib::to_u32(name, "unfolded input elements", unfolded)?;
            let total = lib::to_u32(name, "input channels' output pixels", c.batch * c.in_channels * pixels)?;
            let col = self.output(dtype.scalar(), unfolded)?;
            let lanes = conv::im2col_lanes(dtype);
            // Output rows of whole 16 bytes: one 16-byte store per tap and
            // thread; of stride and dilation 1 over input rows of whole
            // words, each input row read once as words.
            let words = if dims.out_w.is_multiple_of(lanes) { col.viewed_as(enigma_ir::Type::vector(enigma_ir::Scalar::U32, 4)) } else { None };
            let rows = conv::RowWindow::of(dtype, [dims.kh, dims.kw], ([dims.sh, dims.sw], [dims.dh, dims.dw]), dims.pw, (dims.in_w, dims.out_w));
            let by_rows = rows.zip(words.clone()).and_then(|(rows, words)| x.viewed_as(rows.x_word_type()).map(|x_words| (rows, words, x_words)));
            match (by_rows, words) {
                (Some((rows, words, x_words)), _) => {
                    let total = total / lanes;
                    let dispatch = lib::Dispatch::threadgroups([total.div_ceil(t), 1, 1], t);
                    self.launch(rows.im2col_name(), || conv::im2col_rows(&rows), dispatch, &(conv::Im2colArgs { x, col: &words, x_words: Some(&x_words), total }, dims))?;
                }
                (None, Some(words)) => {
                    let total = total / lanes;
                    let dispatch = lib::Dispatch::threadgroups([total.div_ceil(t), 1, 1], t);
                    self.launch(format!("im2col packed {dtype:?}"), || conv::im2col_packed(dtype), dispatch, &(conv::Im2colArgs { x, col: &words, x_words: None, total }, dims))?;
                }
                (None, None) => {
                    let dispatch = lib::Dispatch::threadgroups([total.div_ceil(t), 1, 1], t);
                    self.launch(format!("im2col {dtype:?}"), || conv::im2col(dtype), dispatch, &(conv::Im2colArgs { x, col: &col, x_words: None, total }, dims))?;
                }
            }
            col
        };
        // One set of weights for every image (A's batch stride 0), and the
        // bias in the product's epilogue where the kernel takes it: both
        // only without groups, whose weights and bias differ from one
        // product of the batch to the next.
        let (batch, shared) = if c.groups == 1 { (c.batch, true) } else { (c.batch * c.groups, false) };
        // One image's groups read the weights as they lie.
        let weights = if shared || c.batch == 1 { w.clone() } else { self.repeat_weights(w, c, dtype)? };
        let row_bias = bias.filter(|_| shared);
        let y = self.product(&Product { a: &weights, b: &col, batch, m: c.out_channels / c.groups, n: pixels, k: in_group * taps, out: dtype, shared_a: shared, row_bias })?;
        match bias.filter(|_| !shared) {
            None => Ok(Some(y)),
            Some(b) => Ok(Some(self.elementwise_broadcast(Elementwise::Add, &y, b, &[c.batch, c.out_channels, pixels], &[c.out_channels, 1])?.0)),
        }
    }

    /// Grouped weights repeated once per image (`library::elementwise::repeat`,
    /// by 16-byte words where the weights are whole words): the batched
    /// product over images and groups reads consecutive matrices.
    fn repeat_weights(&self, w: &Buffer, c: &Conv2d, dtype: lib::DType) -> Result<Buffer, Error> {
        let name = "conv2d";
        let t = lib::check_threads(name, self.threads(KernelType::Elementwise))?;
        let len = c.out_channels * (c.in_channels / c.groups) * c.kernel[0] * c.kernel[1];
        let n = lib::to_u32(name, "repeated weights", len * c.batch)?;
        let repeated = self.output(dtype.scalar(), len * c.batch)?;
        let len = lib::to_u32(name, "weights", len)?;
        let per_word = 16 / dtype.size_bytes();
        let word = enigma_ir::Type::vector(enigma_ir::Scalar::U32, 4);
        let words = if len.is_multiple_of(per_word) { w.viewed_as(word).zip(repeated.viewed_as(word)) } else { None };
        match words {
            Some((src, dst)) => {
                let n = n / per_word;
                let dispatch = lib::Dispatch::threadgroups([n.div_ceil(t), 1, 1], t);
                self.launch("repeat words".to_string(), elementwise::repeat_words, dispatch, &RepeatArgs { src: &src, dst: &dst, len: len / per_word, n })?;
            }
            None => {
                let dispatch = lib::Dispatch::threadgroups([n.div_ceil(t), 1, 1], t);
                self.launch(format!("repeat {dtype:?}"), || elementwise::repeat(dtype.scalar()), dispatch, &RepeatArgs { src: w, dst: &repeated, len, n })?;
            }
        }
        Ok(repeated)
    }
}
