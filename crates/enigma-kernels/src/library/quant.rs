//! 4-bit weight formats: packing, quantization and dequantization on the host.
//!
//! A weight matrix `B` is `K × N` (`C[M, N] = A[M, K] · B`, K the reduction
//! dimension), given to [`quantize`] as f32, row-major (`w[k * N + n]`).
//!
//! # Seed 002's layout: [`Format::Fp4`] and [`Format::Int4`]
//! * `packed[K/8][N]` (`u32`, row-major): the word `packed[kw * N + n]` holds
//!   the 8 consecutive K values `k = 8·kw + j`, `j = 0 … 7`, of column `n`;
//!   value `j` is the nibble at bits `4j … 4j+3` (the lowest nibble is the
//!   smallest `k`). Neighbouring columns are neighbouring words, so threads
//!   reading consecutive columns read consecutive words.
//! * `scales[K/group][N]` (IEEE f16 bits, row-major): one scale per `group`
//!   consecutive K values of a column, `group` ∈ {32, 64, 128}
//!   ([`GROUPS`]); `B[k][n] = value(nibble) · scales[k / group][n]`.
//! * **FP4 E2M1** nibbles are `s e1 e0 m` (sign, two exponent bits with bias
//!   1, one mantissa bit): `e = 0` gives `±m · 0.5`, `e > 0` gives
//!   `±2^(e-1) · (1 + m/2)`, so the values are {0, ±0.5, ±1, ±1.5, ±2, ±3,
//!   ±4, ±6} ([`fp4_value`]). Quantization takes `scale = max|w| / 6` of the
//!   group (rounded to f16) and the nearest E2M1 value of `w / scale`, ties
//!   to the even mantissa.
//! * **INT4 U4B8** nibbles are unsigned, biased by 8: `value = nibble − 8`,
//!   −8 … 7 ([`int4_value`]). Quantization takes `scale = max|w| / 7`
//!   (rounded to f16) and `round(w / scale)` (halves away from zero),
//!   clamped to −8 … 7.
//!
//! # MLX's affine format: [`Format::MlxAffine`]
//! MLX (`mlx.core.quantize(w, group_size=64, bits=4)`, mode `"affine"`)
//! quantizes the *last* axis of its weight, which for a linear layer is
//! `[out, in] = [N, K]`, i.e. `Bᵀ`. Its layout, which this format follows:
//! * `packed[N][K/8]` (`u32`): each row of `Bᵀ` (one output column `n`) is a
//!   little-endian stream of 4-bit codes, K value `k = 8·kw + j` at bits
//!   `4j … 4j+3` of word `packed[n * K/8 + kw]`;
//! * `scales[N][K/group]` and `biases[N][K/group]` in the weight's type
//!   (here f16), group 64 by default (32 and 128 also exist);
//! * `B[k][n] = scales[n][k/group] · code + biases[n][k/group]`, codes
//!   unsigned 0 … 15.
//!
//! Unlike seed 002 it is column-major in `B` (the packed words of one
//! column are contiguous along K) and asymmetric (a bias per group). This
//! quantizer takes `bias = min(w)`, `scale = (max(w) − min(w)) / 15` of the
//! group (both rounded to f16) and `round((w − bias) / scale)` clamped to
//! 0 … 15; MLX's own quantizer chooses scale and bias slightly differently
//! (so that the group's largest-magnitude edge is exact), but the
//! dequantization formula, and so any MLX-packed weights, are the same.
//!
//! # Fragment order: [`QuantLayout::Fragments`]
//! The same FP4 or INT4 codes and scales, the words reordered for the
//! tensor cores ([`QuantizedMatrix::packed_in`], back with
//! [`unpack_layout`]): `B` is cut into units of 64 K values × 16 columns,
//! 128 words each, stored unit after unit along N and then along K (`8·N`
//! words per 64 K values). Word `4·l + q` of a unit holds what lane `l` of
//! an `mma.sync` m16n8k16 takes as B for the unit's K step `q` in both of
//! its 8-column halves: nibble `h + 2·half + 4·p` is the unit's
//! `B[16q + 8h + 2(l % 4) + p][8·half + l / 4]`. A SIMD group reads a unit with one
//! 16-byte load per lane, and a mask takes each of its f16 pairs from a
//! word ([`QuantLayout`] in `enigma-ir` is the rule). It needs K a multiple
//! of 64 and N of 16.
//!
//! Shapes are checked with typed errors ([`QuantError`]) naming the numbers:
//! `K` must be a multiple of 8 and of the group, the group one of [`GROUPS`].

use enigma_backend::half::{f16_bits_to_f32, f32_to_f16_bits};
use super::{f, nonzero, to_u32, DType, ShapeError};
use enigma_ir::builder::{Ex, KernelBuilder};
use enigma_ir::{QuantCode, QuantLayout, Type};
use std::fmt;

/// The group sizes (K values per scale) the formats take.
pub const GROUPS: [usize; 3] = [32, 64, 128];

/// K values per packed `u32`.
pub const VALUES_PER_WORD: usize = 8;

/// A 4-bit weight format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// FP4 E2M1 codes with an f16 scale per group, seed 002's layout.
    Fp4,
    /// INT4 U4B8 codes (nibble − 8) with an f16 scale per group, seed 002's layout.
    Int4,
    /// MLX's affine 4-bit codes with an f16 scale and bias per group, MLX's layout.
    MlxAffine,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Fp4, Format::Int4, Format::MlxAffine];

    pub fn name(self) -> &'static str {
        match self {
            Format::Fp4 => "fp4",
            Format::Int4 => "int4",
            Format::MlxAffine => "mlx_affine",
        }
    }

    /// The format named `fp4`, `int4` or `mlx_affine` (also `mlx`).
    pub fn parse(name: &str) -> Result<Format, QuantError> {
        match name.to_ascii_lowercase().as_str() {
            "fp4" | "e2m1" => Ok(Format::Fp4),
            "int4" | "u4b8" => Ok(Format::Int4),
            "mlx_affine" | "mlx" | "affine" => Ok(Format::MlxAffine),
            _ => Err(QuantError::UnknownFormat(name.to_string())),
        }
    }

    /// Whether the format has a bias per group (MLX's affine format).
    pub fn has_biases(self) -> bool {
        self == Format::MlxAffine
    }

    /// The group size used when none is given: 128 for seed 002's formats
    /// (the usual GPTQ/Marlin choice), MLX's 64 for the affine format.
    pub fn default_group(self) -> usize {
        match self {
            Format::Fp4 | Format::Int4 => 128,
            Format::MlxAffine => 64,
        }
    }

    /// The code and layout `cooperative_dequantize` reads this format's
    /// words with in their own layout: seed 002's rows for FP4 and INT4,
    /// MLX's columns of unsigned nibbles (with the biases) for the affine
    /// format.
    pub fn dequantize_code(self) -> (QuantCode, QuantLayout) {
        match self {
            Format::Fp4 => (QuantCode::Fp4, QuantLayout::Rows),
            Format::Int4 => (QuantCode::Int4, QuantLayout::Rows),
            Format::MlxAffine => (QuantCode::Uint4, QuantLayout::Columns),
        }
    }

    /// The IR's 4-bit code for seed 002's formats (`None` for MLX's affine
    /// format, whose codes are scaled and offset per group).
    pub fn quant_code(self) -> Option<QuantCode> {
        match self {
            Format::Fp4 => Some(QuantCode::Fp4),
            Format::Int4 => Some(QuantCode::Int4),
            Format::MlxAffine => None,
        }
    }

    /// The value of a 4-bit code before scaling (FP4, INT4), or the code
    /// itself (MLX affine, 0 … 15). Only the low 4 bits of `code` count.
    pub fn code_value(self, code: u32) -> f32 {
        match self {
            Format::Fp4 => fp4_value(code),
            Format::Int4 => int4_value(code),
            Format::MlxAffine => (code & 0xF) as f32,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A shape, a buffer or a weight the formats cannot take.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QuantError {
    #[error("unknown quantization format `{0}` (expected fp4, int4 or mlx_affine)")]
    UnknownFormat(String),
    #[error("{format}: K and N must be at least 1 (K = {k}, N = {n})")]
    Empty { format: Format, k: usize, n: usize },
    #[error("{format}: K = {k} is not a multiple of 8 (each u32 packs 8 consecutive K values)")]
    KNotMultipleOf8 { format: Format, k: usize },
    #[error("{format}: group size {group} is not supported (32, 64 or 128)")]
    UnsupportedGroup { format: Format, group: usize },
    #[error("{format}: K = {k} is not a multiple of the group size {group}")]
    KNotMultipleOfGroup { format: Format, k: usize, group: usize },
    #[error("{format}: K × N = {k} × {n} elements do not fit in memory indices")]
    TooLarge { format: Format, k: usize, n: usize },
    #[error("{format}: `{what}` has {got} elements; K = {k}, N = {n}, group {group} need {expected}")]
    Length { format: Format, what: &'static str, got: usize, expected: usize, k: usize, n: usize, group: usize },
    #[error("{format}: weight w[{k}][{n}] = {value} is not finite")]
    NonFinite { format: Format, k: usize, n: usize, value: f32 },
    #[error("{format}: the scale of column {n}, K values {k_start}..{k_end}, is {scale:e}, beyond f16's largest finite value 65504")]
    ScaleOverflow { format: Format, n: usize, k_start: usize, k_end: usize, scale: f32 },
    #[error("{format}: the bias of column {n}, K values {k_start}..{k_end}, is {bias:e}, beyond f16's largest finite value 65504")]
    BiasOverflow { format: Format, n: usize, k_start: usize, k_end: usize, bias: f32 },
    #[error("{format}: the {layout} layout needs K a multiple of {unit_k} and N of {unit_n} (K = {k}, N = {n})")]
    LayoutShape { format: Format, layout: QuantLayout, k: usize, n: usize, unit_k: usize, unit_n: usize },
    #[error("{format} weights have no {layout} layout (it holds fp4 or int4 codes, scaled per group without a bias)")]
    LayoutFormat { format: Format, layout: QuantLayout },
}

/// Checks that a `k × n` matrix of `format` can be packed in `layout`:
/// FP4 or INT4 (any format in seed 002's own layout), `k` and `n` multiples
/// of the layout's unit.
pub fn check_layout(format: Format, layout: QuantLayout, k: usize, n: usize) -> Result<(), QuantError> {
    if layout == QuantLayout::Rows {
        return Ok(());
    }
    if format.quant_code().is_none() {
        return Err(QuantError::LayoutFormat { format, layout });
    }
    let (unit_k, unit_n) = layout.unit();
    let (unit_k, unit_n) = (unit_k as usize, unit_n as usize);
    if !k.is_multiple_of(unit_k) || !n.is_multiple_of(unit_n) {
        return Err(QuantError::LayoutShape { format, layout, k, n, unit_k, unit_n });
    }
    Ok(())
}

/// The place of each `B[k][n]` of a `k × n` matrix in `layout`: the index of
/// its word and its nibble ([`QuantLayout::locate`] on the whole matrix).
fn layout_place(layout: QuantLayout, (k, n): (usize, usize), kk: usize, nn: usize) -> (usize, u32) {
    let (unit_row, word, nibble) = layout.locate(kk as u32, nn as u32);
    (unit_row as usize * layout.stride(k as u32, n as u32) as usize + word as usize, nibble)
}

/// Seed 002's `[K/8][N]` words of a `k × n` FP4 or INT4 matrix whose words
/// are `words` in `layout` (the inverse of [`QuantizedMatrix::packed_in`]).
pub fn unpack_layout(format: Format, layout: QuantLayout, k: usize, n: usize, words: &[u32]) -> Result<Vec<u32>, QuantError> {
    check_layout(format, layout, k, n)?;
    let expected = packed_words(k, n);
    if words.len() != expected {
        return Err(QuantError::Length { format, what: "packed", got: words.len(), expected, k, n, group: 0 });
    }
    let mut rows = vec![0u32; expected];
    for kk in 0..k {
        for nn in 0..n {
            let (at, nibble) = layout_place(layout, (k, n), kk, nn);
            let code = (words[at] >> (4 * nibble)) & 0xF;
            rows[(kk / VALUES_PER_WORD) * n + nn] |= code << (4 * (kk % VALUES_PER_WORD));
        }
    }
    Ok(rows)
}

/// Packed words of a `k × n` matrix, in any layout: 8 values a word.
fn packed_words(k: usize, n: usize) -> usize {
    k / VALUES_PER_WORD * n
}

/// Checks a `k × n` matrix of `format` in groups of `group` whose packed
/// words (in any layout: they count the same), scales and biases have
/// `[packed, scales, biases]` elements: the shape ([`check_shape`]) and each
/// part's length.
pub fn check_parts(format: Format, k: usize, n: usize, group: usize, [packed, scales, biases]: [usize; 3]) -> Result<(), QuantError> {
    check_shape(format, k, n, group)?;
    let len = |what: &'static str, got: usize, expected: usize| {
        if got == expected {
            Ok(())
        } else {
            Err(QuantError::Length { format, what, got, expected, k, n, group })
        }
    };
    len("packed", packed, packed_words(k, n))?;
    len("scales", scales, k / group * n)?;
    len("biases", biases, if format.has_biases() { k / group * n } else { 0 })
}

/// Checks a shape for `format`: K, N ≥ 1, K a multiple of 8 and of
/// `group`, `group` one of [`GROUPS`], `K × N` countable.
pub fn check_shape(format: Format, k: usize, n: usize, group: usize) -> Result<(), QuantError> {
    if k == 0 || n == 0 {
        return Err(QuantError::Empty { format, k, n });
    }
    if !GROUPS.contains(&group) {
        return Err(QuantError::UnsupportedGroup { format, group });
    }
    if !k.is_multiple_of(VALUES_PER_WORD) {
        return Err(QuantError::KNotMultipleOf8 { format, k });
    }
    if !k.is_multiple_of(group) {
        return Err(QuantError::KNotMultipleOfGroup { format, k, group });
    }
    if k.checked_mul(n).filter(|&e| e <= u32::MAX as usize).is_none() {
        return Err(QuantError::TooLarge { format, k, n });
    }
    Ok(())
}

/// The E2M1 value of the low 4 bits of `code` (`s e1 e0 m`): the IR's
/// rule ([`QuantCode::Fp4`]), which quantized tile loads decode by.
pub fn fp4_value(code: u32) -> f32 {
    QuantCode::Fp4.value(code)
}

/// The U4B8 value of the low 4 bits of `code`: `code − 8`
/// ([`QuantCode::Int4`]).
pub fn int4_value(code: u32) -> f32 {
    QuantCode::Int4.value(code)
}

/// A quantized `K × N` matrix: codes, f16 scales (and biases) as bits, in
/// the layout of its [`Format`] (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizedMatrix {
    pub format: Format,
    pub k: usize,
    pub n: usize,
    pub group: usize,
    /// `[K/8][N]` (seed 002) or `[N][K/8]` (MLX).
    pub packed: Vec<u32>,
    /// f16 bits, `[K/group][N]` (seed 002) or `[N][K/group]` (MLX).
    pub scales: Vec<u16>,
    /// f16 bits, `[N][K/group]` for MLX's affine format; empty otherwise.
    pub biases: Vec<u16>,
}

impl QuantizedMatrix {
    /// A matrix from its parts, checking the shape and every length.
    pub fn new(format: Format, k: usize, n: usize, group: usize, packed: Vec<u32>, scales: Vec<u16>, biases: Vec<u16>) -> Result<QuantizedMatrix, QuantError> {
        let m = QuantizedMatrix { format, k, n, group, packed, scales, biases };
        m.check()?;
        Ok(m)
    }

    /// Checks the shape and the lengths of the parts.
    pub fn check(&self) -> Result<(), QuantError> {
        check_parts(self.format, self.k, self.n, self.group, [self.packed.len(), self.scales.len(), self.biases.len()])
    }

    /// The index in `scales` (and `biases`) of the group holding `B[k][n]`.
    fn group_index(&self, k: usize, n: usize) -> usize {
        match self.format {
            Format::MlxAffine => n * (self.k / self.group) + k / self.group,
            _ => (k / self.group) * self.n + n,
        }
    }

    /// The index in `packed` of the word holding `B[k][n]`.
    fn word_index(&self, k: usize, n: usize) -> usize {
        match self.format {
            Format::MlxAffine => n * (self.k / VALUES_PER_WORD) + k / VALUES_PER_WORD,
            _ => (k / VALUES_PER_WORD) * self.n + n,
        }
    }

    /// The packed words in `layout` (the scales stay as they are): the
    /// matrix's own words for [`QuantLayout::Rows`], or for [`QuantLayout::Fragments`] the same codes in
    /// the tensor cores' fragment order, which the quantized GEMM's
    /// fragment-order kernel reads (`QgemmConfig::layout`). FP4 or INT4, K a
    /// multiple of 64 and N of 16 there.
    pub fn packed_in(&self, layout: QuantLayout) -> Result<Vec<u32>, QuantError> {
        self.check()?;
        check_layout(self.format, layout, self.k, self.n)?;
        if layout == QuantLayout::Rows {
            return Ok(self.packed.clone());
        }
        let mut words = vec![0u32; self.packed.len()];
        for kk in 0..self.k {
            for nn in 0..self.n {
                let (at, nibble) = layout_place(layout, (self.k, self.n), kk, nn);
                words[at] |= self.code(kk, nn) << (4 * nibble);
            }
        }
        Ok(words)
    }

    /// The 4-bit code of `B[k][n]`.
    pub fn code(&self, k: usize, n: usize) -> u32 {
        (self.packed[self.word_index(k, n)] >> (4 * (k % VALUES_PER_WORD))) & 0xF
    }

    /// The scale of `B[k][n]`'s group, as f32.
    pub fn scale(&self, k: usize, n: usize) -> f32 {
        f16_bits_to_f32(self.scales[self.group_index(k, n)])
    }

    /// The bias of `B[k][n]`'s group as f32; 0 for formats without biases.
    pub fn bias(&self, k: usize, n: usize) -> f32 {
        if self.format.has_biases() {
            f16_bits_to_f32(self.biases[self.group_index(k, n)])
        } else {
            0.0
        }
    }

    /// `|value · scale| + |bias|` of `B[k][n]` (`|B[k][n]|` for formats
    /// without biases): the weight of the element's terms in an f32 product
    /// that sums `scale · Σ value · a` and `bias · Σ a` apart, as MLX's
    /// affine kernel does; error bounds scale with it.
    pub fn magnitude(&self, k: usize, n: usize) -> f32 {
        (self.format.code_value(self.code(k, n)) * self.scale(k, n)).abs() + self.bias(k, n).abs()
    }

    /// `Σ_k |a[r][k]| · magnitude(k, c)` for each element (r, c) of the
    /// `m × N` product with the row-major `m × K` matrix `a`, in f64 summed
    /// in k order: the scale of each output's rounding error, for error
    /// bounds. Each magnitude is decoded once (not once per row).
    pub fn abs_products(&self, a: &[f32], m: usize) -> Vec<f64> {
        let (k, n) = (self.k, self.n);
        let magnitudes: Vec<f64> = (0..k * n).map(|i| self.magnitude(i / n, i % n) as f64).collect();
        let mut sums = vec![0.0f64; m * n];
        for r in 0..m {
            for kk in 0..k {
                let x = (a[r * k + kk] as f64).abs();
                for (sum, w) in sums[r * n..(r + 1) * n].iter_mut().zip(&magnitudes[kk * n..(kk + 1) * n]) {
                    *sum += x * w;
                }
            }
        }
        sums
    }

    /// The `K × N` matrix the codes stand for, f32 row-major (`w[k * N + n]`),
    /// each element `value · scale (+ bias)` computed in f32.
    pub fn dequantize(&self) -> Result<Vec<f32>, QuantError> {
        self.check()?;
        let mut w = vec![0.0f32; self.k * self.n];
        for k in 0..self.k {
            for n in 0..self.n {
                let v = self.format.code_value(self.code(k, n)) * self.scale(k, n);
                w[k * self.n + n] = if self.format.has_biases() { v + self.bias(k, n) } else { v };
            }
        }
        Ok(w)
    }
}

/// `x` rounded to f16 and back, or `None` past f16's finite range.
fn to_f16(x: f32) -> Option<(u16, f32)> {
    let bits = f32_to_f16_bits(x);
    let back = f16_bits_to_f32(bits);
    back.is_finite().then_some((bits, back))
}

/// The E2M1 code nearest to `x` (clamped to ±6), ties to the even mantissa.
fn fp4_code(x: f32) -> u32 {
    let a = x.abs();
    let mut best = 0u32;
    for code in 1..8u32 {
        let (d, d_best) = ((fp4_value(code) - a).abs(), (fp4_value(best) - a).abs());
        if d < d_best || (d == d_best && code & 1 == 0) {
            best = code;
        }
    }
    if x < 0.0 && best != 0 {
        best | 8
    } else {
        best
    }
}

/// Quantizes the `K × N` f32 matrix `w` (row-major, `w[k * N + n]`) to
/// `format` with `group` K values per scale (see the module documentation
/// for each format's rule).
pub fn quantize(format: Format, w: &[f32], k: usize, n: usize, group: usize) -> Result<QuantizedMatrix, QuantError> {
    check_shape(format, k, n, group)?;
    if w.len() != k * n {
        return Err(QuantError::Length { format, what: "w", got: w.len(), expected: k * n, k, n, group });
    }
    if let Some(i) = w.iter().position(|v| !v.is_finite()) {
        return Err(QuantError::NonFinite { format, k: i / n, n: i % n, value: w[i] });
    }
    let groups = k / group;
    let words = k / VALUES_PER_WORD;
    let mut out = QuantizedMatrix {
        format,
        k,
        n,
        group,
        packed: vec![0; words * n],
        scales: vec![0; groups * n],
        biases: if format.has_biases() { vec![0; groups * n] } else { vec![] },
    };
    for g in 0..groups {
        let ks = g * group..(g + 1) * group;
        for col in 0..n {
            let values = ks.clone().map(|kk| w[kk * n + col]);
            let (lo, hi) = values.clone().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let absmax = lo.abs().max(hi.abs());
            let raw_scale = match format {
                Format::Fp4 => absmax / 6.0,
                Format::Int4 => absmax / 7.0,
                Format::MlxAffine => (hi - lo) / 15.0,
            };
            let overflow = || QuantError::ScaleOverflow { format, n: col, k_start: ks.start, k_end: ks.end, scale: raw_scale };
            let (scale_bits, scale) = to_f16(raw_scale).ok_or_else(overflow)?;
            let gi = out.group_index(ks.start, col);
            out.scales[gi] = scale_bits;
            let bias = if format.has_biases() {
                let (bits, bias) = to_f16(lo).ok_or(QuantError::BiasOverflow { format, n: col, k_start: ks.start, k_end: ks.end, bias: lo })?;
                out.biases[gi] = bits;
                bias
            } else {
                0.0
            };
            for (kk, v) in ks.clone().zip(values) {
                let code = if scale == 0.0 {
                    match format {
                        Format::Int4 => 8,
                        _ => 0,
                    }
                } else {
                    match format {
                        Format::Fp4 => fp4_code(v / scale),
                        Format::Int4 => ((v / scale).round().clamp(-8.0, 7.0) + 8.0) as u32,
                        Format::MlxAffine => ((v - bias) / scale).round().clamp(0.0, 15.0) as u32,
                    }
                };
                let wi = out.word_index(kk, col);
                out.packed[wi] |= code << (4 * (kk % VALUES_PER_WORD));
            }
        }
    }
    Ok(out)
}

// ----- decoding in kernel code -------------------------------------------

/// The most rows of C one threadgroup of a decode kernel (`qmatmul`,
/// `qmatmul_affine`) computes.
pub const MAX_ROWS_PER_THREADGROUP: u32 = 8;

/// The E2M1 value of code `q` (0 … 15, u32) as f32, by bit arithmetic: the
/// magnitude bits (e1 e0 m) go to bits 22..=24 and the exponent is rebiased
/// (+126); e = 0 gives 0 or 0.5 by a select, so no subnormal is formed; the
/// sign goes to bit 31. Fills the kernel's 16-entry table.
pub(crate) fn fp4_code_value(q: Ex) -> Ex {
    let mag = (q << 22u32) & 0x01C0_0000u32;
    let sign = (q << 28u32) & 0x8000_0000u32;
    // 0x3F000000 (0.5) = 252 · 2^22.
    let bits = enigma_ir::builder::select(mag + 0x3F00_0000u32, mag * 252u32, mag.lt(0x0080_0000u32));
    (bits | sign).bitcast(Type::F32)
}

/// Nibble `j` of `q` (u32).
pub(crate) fn nibble(q: Ex, j: u32) -> Ex {
    match j {
        0 => q & 0xFu32,
        7 => q >> 28u32,
        _ => (q >> (4 * j)) & 0xFu32,
    }
}

/// Nibble `j` of `q` minus `offset` as f32, exactly (for an `offset` the
/// f32 `2^(23−4j') + offset` holds exactly), in one logic operation and one
/// subtraction: the nibble, left in place at bits `4j'`, is the low
/// mantissa of an f32 whose exponent is `23 − 4j'`, so the float is
/// `2^(23−4j') + nibble`. Nibbles 0 … 4 are read from `q` in place
/// (`j' = j`), nibbles 5 … 7 from `hi = q >> 12` (`j' = j − 3`).
pub(crate) fn nibble_minus(q: Ex, hi: Ex, j: u32, offset: f64) -> Ex {
    let (src, jj) = if j <= 4 { (q, j) } else { (hi, j - 3) };
    let e = 23 - 4 * jj;
    let magic = (127 + e) << 23;
    ((src & (0xFu32 << (4 * jj))) | magic).bitcast(Type::F32) - f((1u32 << e) as f64 + offset)
}

/// The INT4 value (nibble − 8) of nibble `j` of `q` as f32, exactly
/// ([`nibble_minus`] with offset 8).
pub(crate) fn int4_nibble_value(q: Ex, hi: Ex, j: u32) -> Ex {
    nibble_minus(q, hi, j, 8.0)
}

/// The checks every quantized matmul's plan makes of its problem: M, N, K
/// not zero, `group` one of [`GROUPS`] dividing K, the matrices' element
/// counts within u32, C in f32 or f16. M, N and K as u32.
pub(crate) fn check_problem(name: &str, out: DType, m: usize, n: usize, k: usize, group: usize) -> Result<[u32; 3], ShapeError> {
    nonzero(name, "m", m)?;
    nonzero(name, "n", n)?;
    nonzero(name, "k", k)?;
    if !GROUPS.contains(&group) {
        return Err(ShapeError::new(name, format!("group size {group} is not 32, 64 or 128")));
    }
    if !k.is_multiple_of(group) {
        return Err(ShapeError::new(name, format!("k = {k} is not a multiple of the group size {group}")));
    }
    let dims = [to_u32(name, "m", m)?, to_u32(name, "n", n)?, to_u32(name, "k", k)?];
    to_u32(name, "m × k", m.saturating_mul(k))?;
    to_u32(name, "m × n", m.saturating_mul(n))?;
    to_u32(name, "k × n", k.saturating_mul(n))?;
    if out == DType::BF16 {
        return Err(ShapeError::new(name, "the output is f32 or f16"));
    }
    Ok(dims)
}

/// The 8 values of packed `word` (seed 002's layout: nibble `j` is K value
/// `j` of the word), each decoded as `format`, times `scale` (f32) and
/// rounded to f16 — how both quantized GEMMs ([`QgemmConfig`] and
/// [`super::qgemm_fused`]) dequantize a weight. `name` names the local
/// holding the word's high bits.
pub(crate) fn dequantized_halves(k: &mut KernelBuilder, name: &str, format: Format, word: Ex, scale: Ex) -> Vec<Ex> {
    let hi = k.let_(&format!("{name}hi"), word >> 12u32);
    (0..VALUES_PER_WORD as u32)
        .map(|j| {
            let v = match format {
                Format::Fp4 => fp4_code_value(nibble(word, j)),
                _ => int4_nibble_value(word, hi, j),
            };
            (v * scale).cast(Type::F16)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// E2M1, written out by hand from the bit fields (not from
    /// [`fp4_value`]): codes 0 … 15.
    const E2M1: [f32; 16] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];

    /// Fragment order against its definition written out per lane (not
    /// through `QuantLayout::locate`), and back.
    #[test]
    fn fragment_order_places_each_lanes_pairs_and_unpacks() {
        let (k, n) = (128usize, 48usize);
        let w: Vec<f32> = (0..k * n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        for format in [Format::Int4, Format::Fp4] {
            let q = quantize(format, &w, k, n, 64).unwrap();
            let words = q.packed_in(QuantLayout::Fragments).unwrap();
            assert_eq!(words.len(), q.packed.len());
            for (ku, nu, lane, step) in (0..k / 64).flat_map(|ku| (0..n / 16).flat_map(move |nu| (0..32).flat_map(move |l| (0..4).map(move |s| (ku, nu, l, s))))) {
                let word = words[ku * 8 * n + nu * 128 + 4 * lane + step];
                for (h, half, p) in (0..2).flat_map(|h| (0..2).flat_map(move |half| (0..2).map(move |p| (h, half, p)))) {
                    let row = 64 * ku + 16 * step + 8 * h + 2 * (lane % 4) + p;
                    let col = 16 * nu + 8 * half + lane / 4;
                    assert_eq!((word >> (4 * (h + 2 * half + 4 * p))) & 0xF, q.code(row, col), "{format} B[{row}][{col}]");
                }
            }
            assert_eq!(unpack_layout(format, QuantLayout::Fragments, k, n, &words).unwrap(), q.packed);
        }
        let q = quantize(Format::Int4, &w[..96 * 48], 96, 48, 32).unwrap();
        assert!(matches!(q.packed_in(QuantLayout::Fragments), Err(QuantError::LayoutShape { k: 96, unit_k: 64, .. })));
        let affine = quantize(Format::MlxAffine, &w, k, n, 64).unwrap();
        assert!(matches!(affine.packed_in(QuantLayout::Fragments), Err(QuantError::LayoutFormat { .. })));
    }

    #[test]
    fn decoding_tables() {
        for code in 0..16u32 {
            assert_eq!(fp4_value(code).to_bits(), E2M1[code as usize].to_bits(), "fp4 code {code}");
            assert_eq!(int4_value(code), [-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0][code as usize]);
        }
        assert_eq!(Format::parse("FP4").unwrap(), Format::Fp4);
        assert_eq!(Format::parse("mlx").unwrap(), Format::MlxAffine);
        assert_eq!(Format::parse("nf4").unwrap_err().to_string(), "unknown quantization format `nf4` (expected fp4, int4 or mlx_affine)");
    }

    #[test]
    fn nibble_order_is_lowest_k_first() {
        // Column 1 of a 32 × 2 matrix: k = 0..8 take the codes 1..=8 of
        // INT4 (values −7 … 0) at scale 1: word 1 (row 0, column 1) is
        // 0x87654321 read from the top nibble down.
        let (k, n) = (32, 2);
        let mut w = vec![0.0f32; k * n];
        for kk in 0..8 {
            w[kk * n + 1] = kk as f32 - 7.0;
        }
        let q = quantize(Format::Int4, &w, k, n, 32).unwrap();
        assert_eq!(f16_bits_to_f32(q.scales[1]), 1.0);
        assert_eq!(q.packed[1], 0x8765_4321);
        assert_eq!(q.packed[0], 0x8888_8888);
        assert_eq!(q.packed.len(), 4 * 2);
        // MLX: the same column is row 1 of [N][K/8]: word 4.
        let m = quantize(Format::MlxAffine, &w, k, n, 32).unwrap();
        assert_eq!(m.packed.len(), 2 * 4);
        // min −7, max 0: scale 7/15, bias −7; w = −4 is code round(45/7) = 6.
        assert_eq!(m.code(3, 1), 6);
        assert_eq!((m.bias(3, 1), q.bias(3, 1)), (-7.0, 0.0));
        assert_eq!(m.magnitude(3, 1), 6.0 * m.scale(3, 1) + 7.0);
        assert_eq!(m.packed[4] >> 12 & 0xF, 6);
        assert_eq!(m.packed[0], 0);
    }

    #[test]
    fn abs_products_sum_each_outputs_magnitudes() {
        let (k, n, rows) = (64, 3, 2);
        let w: Vec<f32> = (0..k * n).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
        let a: Vec<f32> = (0..rows * k).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
        for format in Format::ALL {
            let q = quantize(format, &w, k, n, 32).unwrap();
            let got = q.abs_products(&a, rows);
            for (i, g) in got.iter().enumerate() {
                let (r, c) = (i / n, i % n);
                let want: f64 = (0..k).map(|kk| (a[r * k + kk] as f64).abs() * q.magnitude(kk, c) as f64).sum();
                assert_eq!(*g, want, "{format} ({r}, {c})");
            }
        }
    }

    #[test]
    fn representable_values_round_trip_exactly() {
        // Every column holds each E2M1 value times 0.25 (an f16 power of
        // two): quantize → dequantize gives them back bit for bit.
        let (k, n) = (64, 3);
        let mut w = vec![0.0f32; k * n];
        for kk in 0..k {
            for col in 0..n {
                w[kk * n + col] = E2M1[(kk + col) % 16] * 0.25 * if col == 2 { 3.0 } else { 1.0 };
            }
        }
        for group in [32, 64] {
            let q = quantize(Format::Fp4, &w, k, n, group).unwrap();
            let d = q.dequantize().unwrap();
            for (i, (&a, &b)) in w.iter().zip(&d).enumerate() {
                assert_eq!(a, b, "fp4 group {group} element {i}");
            }
        }
        // Every group of every column holds ±3.5 (scale 0.5) for INT4, and
        // −1 and 0.875 (scale 0.125, bias −1) for MLX.
        let wi: Vec<f32> = (0..k * n).map(|i| ((i / n % 15) as f32 - 7.0) * 0.5).collect();
        let d = quantize(Format::Int4, &wi, k, n, 32).unwrap().dequantize().unwrap();
        assert_eq!(d, wi);
        let wm: Vec<f32> = (0..k * n).map(|i| (i / n % 16) as f32 * 0.125 - 1.0).collect();
        let d = quantize(Format::MlxAffine, &wm, k, n, 64).unwrap().dequantize().unwrap();
        assert_eq!(d, wm);
    }

    #[test]
    fn fp4_rounds_to_nearest_with_ties_to_even() {
        // Scale 1 (max 6): 2.5 lies between 2 (code 4, even) and 3 (code 5).
        let cases = [(0.2, 0.0), (0.25, 0.0), (0.3, 0.5), (0.75, 1.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (3.5, 4.0), (5.0, 4.0), (5.1, 6.0), (-2.5, -2.0), (-5.9, -6.0)];
        let k = 32;
        let mut w = vec![0.0f32; k];
        w[0] = 6.0;
        for (i, &(x, _)) in cases.iter().enumerate() {
            w[i + 1] = x;
        }
        let d = quantize(Format::Fp4, &w, k, 1, 32).unwrap().dequantize().unwrap();
        for (i, &(x, want)) in cases.iter().enumerate() {
            assert_eq!(d[i + 1], want, "{x}");
        }
    }

    #[test]
    fn round_trip_error_is_within_half_a_step() {
        let (k, n) = (256, 5);
        let w = crate::test_data(k * n, 7);
        for format in Format::ALL {
            for group in GROUPS {
                let q = quantize(format, &w, k, n, group).unwrap();
                let d = q.dequantize().unwrap();
                for kk in 0..k {
                    for col in 0..n {
                        let s = q.scale(kk, col);
                        // Half the widest gap between neighbouring codes
                        // (FP4: 4 → 6), plus the f16 rounding of scale and bias.
                        let step = match format {
                            Format::Fp4 => 1.0,
                            _ => 0.5,
                        };
                        let err = (d[kk * n + col] - w[kk * n + col]).abs();
                        assert!(err <= step * s + 2e-3, "{format} group {group} ({kk}, {col}): {err} > {}", step * s);
                        // The terms' magnitude: |B| without biases, at least |B| with.
                        let (mag, b) = (q.magnitude(kk, col), d[kk * n + col].abs());
                        assert!(if format.has_biases() { mag >= b } else { mag == b }, "{format} ({kk}, {col}): magnitude {mag}, |B| {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn zero_groups_and_bad_inputs() {
        let w = vec![0.0f32; 64];
        for format in Format::ALL {
            assert_eq!(quantize(format, &w, 64, 1, 64).unwrap().dequantize().unwrap(), w);
        }
        let e = |r: Result<QuantizedMatrix, QuantError>| r.unwrap_err().to_string();
        assert_eq!(e(quantize(Format::Fp4, &[0.0; 12], 12, 1, 32)), "fp4: K = 12 is not a multiple of 8 (each u32 packs 8 consecutive K values)");
        assert_eq!(e(quantize(Format::Int4, &[0.0; 48], 48, 1, 32)), "int4: K = 48 is not a multiple of the group size 32");
        assert_eq!(e(quantize(Format::Int4, &[0.0; 64], 64, 1, 16)), "int4: group size 16 is not supported (32, 64 or 128)");
        assert_eq!(e(quantize(Format::Fp4, &[0.0; 63], 32, 2, 32)), "fp4: `w` has 63 elements; K = 32, N = 2, group 32 need 64");
        assert_eq!(e(quantize(Format::Fp4, &[], 0, 2, 32)), "fp4: K and N must be at least 1 (K = 0, N = 2)");
        let mut bad = vec![0.0f32; 64];
        bad[33] = f32::NAN;
        assert_eq!(e(quantize(Format::Fp4, &bad, 32, 2, 32)), "fp4: weight w[16][1] = NaN is not finite");
        bad[33] = 1e6;
        assert!(e(quantize(Format::Fp4, &bad, 32, 2, 32)).starts_with("fp4: the scale of column 1, K values 0..32, is 1.6666"));
        let q = QuantizedMatrix::new(Format::Int4, 32, 2, 32, vec![0; 8], vec![0; 2], vec![]).unwrap();
        assert_eq!(q.dequantize().unwrap(), vec![0.0; 64]);
        let r = QuantizedMatrix::new(Format::MlxAffine, 32, 2, 32, vec![0; 8], vec![0; 2], vec![0; 1]);
        assert_eq!(e(r), "mlx_affine: `biases` has 1 elements; K = 32, N = 2, group 32 need 2");
    }
}
