//! Texture pixel formats and their conversions, as Metal specifies them: what
//! a texel of each format holds in memory, what `read` returns for it and
//! what `write` stores (MSL specification, "Conversion Rules").
//!
//! * unorm8 channels read as `c / 255`; a write clamps to [0, 1] (NaN to 0)
//!   and stores the nearest integer to `c · 255`, ties to even.
//! * float16 channels read exactly; a write rounds to the nearest half, ties
//!   to even. float32 channels are stored as given.
//! * uint32 / sint32 channels hold the integer's bits.
//! * A format with fewer than four channels reads the missing ones as
//!   (0, 0, 0, 1) — 0 for green and blue, 1 for alpha — and a write drops them.
//!
//! Sampling ([`sample`]) is Metal's: texel `i`'s centre at `(i + 0.5)/w`,
//! nearest or bilinear filtering, and the four address modes, computed in
//! f32. Hardware filters may differ in the last bits: NVIDIA's texture units
//! hold the bilinear weights in fixed point with 8 fractional bits, so a
//! linearly filtered value there is within [`HARDWARE_FILTER_TOLERANCE`] ×
//! (the spread of the texels blended) of this one.
//!
//! Texels are stored row-major, `width · bytes_per_texel()` bytes a row with
//! no padding, channels in RGBA order, each little-endian. A texture lives in
//! a backend's [`crate::BufferStorage`] of exactly `width · height ·
//! bytes_per_texel()` bytes, described by a [`TextureDesc`].

use crate::half::{f16_bits_to_f32, f32_to_f16_bits};
use enigma_ir::{Sampler, SamplerAddress, SamplerCoord, SamplerFilter, Scalar};
use serde::Serialize;
use std::fmt;

/// A texture's pixel format (Metal's `MTLPixelFormat` of the same name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TextureFormat {
    R8Unorm,
    Rgba8Unorm,
    R16Float,
    Rgba16Float,
    R32Float,
    Rgba32Float,
    R32Uint,
    R32Sint,
}

/// What kind of values a format's channels hold, which decides the texel
/// types a kernel may view it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelKind {
    /// unorm and float formats: read and written as f32 or f16.
    Float,
    /// Read and written as u32.
    Uint,
    /// Read and written as i32.
    Sint,
}

impl TextureFormat {
    pub const ALL: [TextureFormat; 8] = [
        TextureFormat::R8Unorm,
        TextureFormat::Rgba8Unorm,
        TextureFormat::R16Float,
        TextureFormat::Rgba16Float,
        TextureFormat::R32Float,
        TextureFormat::Rgba32Float,
        TextureFormat::R32Uint,
        TextureFormat::R32Sint,
    ];

    /// The name users write (`rgba8unorm`), Metal's without the prefix.
    pub fn name(self) -> &'static str {
        match self {
            TextureFormat::R8Unorm => "r8unorm",
            TextureFormat::Rgba8Unorm => "rgba8unorm",
            TextureFormat::R16Float => "r16float",
            TextureFormat::Rgba16Float => "rgba16float",
            TextureFormat::R32Float => "r32float",
            TextureFormat::Rgba32Float => "rgba32float",
            TextureFormat::R32Uint => "r32uint",
            TextureFormat::R32Sint => "r32sint",
        }
    }

    pub fn from_name(name: &str) -> Option<TextureFormat> {
        TextureFormat::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Channels stored per texel: 1 or 4.
    pub fn channels(self) -> usize {
        match self {
            TextureFormat::Rgba8Unorm | TextureFormat::Rgba16Float | TextureFormat::Rgba32Float => 4,
            _ => 1,
        }
    }

    /// Bytes of one channel.
    pub fn channel_bytes(self) -> usize {
        match self {
            TextureFormat::R8Unorm | TextureFormat::Rgba8Unorm => 1,
            TextureFormat::R16Float | TextureFormat::Rgba16Float => 2,
            _ => 4,
        }
    }

    pub fn bytes_per_texel(self) -> usize {
        self.channels() * self.channel_bytes()
    }

    pub fn channel_kind(self) -> ChannelKind {
        match self {
            TextureFormat::R32Uint => ChannelKind::Uint,
            TextureFormat::R32Sint => ChannelKind::Sint,
            _ => ChannelKind::Float,
        }
    }

    /// Whether a `texture2d<texel>` may view a texture of this format (as in
    /// Metal: float and unorm formats as f32 or f16, uint formats as u32,
    /// sint formats as i32).
    pub fn accepts(self, texel: Scalar) -> bool {
        match self.channel_kind() {
            ChannelKind::Float => matches!(texel, Scalar::F32 | Scalar::F16),
            ChannelKind::Uint => texel == Scalar::U32,
            ChannelKind::Sint => texel == Scalar::I32,
        }
    }

    /// Whether a sampler may filter the format linearly: the unorm and
    /// float formats, not the integer ones (as in Metal).
    pub fn filterable(self) -> bool {
        self.channel_kind() == ChannelKind::Float
    }

    /// The texel types that may view this format, for messages.
    pub fn texel_types(self) -> &'static str {
        match self.channel_kind() {
            ChannelKind::Float => "f32 or f16",
            ChannelKind::Uint => "u32",
            ChannelKind::Sint => "i32",
        }
    }

    /// The four channels a read of a float or unorm texel gives, from its
    /// stored channels (`raw[c]`, each the little-endian bits of channel c).
    pub fn read_float(self, raw: [u32; 4]) -> [f32; 4] {
        let mut out = [0.0, 0.0, 0.0, 1.0];
        for (c, v) in out.iter_mut().enumerate().take(self.channels()) {
            *v = match self.channel_bytes() {
                1 => raw[c] as u8 as f32 / 255.0,
                2 => f16_bits_to_f32(raw[c] as u16),
                _ => f32::from_bits(raw[c]),
            };
        }
        out
    }

    /// The stored channels of a write of four floats (only the format's own
    /// channels are meaningful).
    pub fn write_float(self, value: [f32; 4]) -> [u32; 4] {
        value.map(|v| match self.channel_bytes() {
            1 => unorm8(v) as u32,
            2 => f32_to_f16_bits(v) as u32,
            _ => v.to_bits(),
        })
    }

    /// The four channels (as 32-bit patterns) a read of an integer texel
    /// gives: its stored channel and (0, 0, 1) for green, blue and alpha.
    pub fn read_int(self, raw: [u32; 4]) -> [u32; 4] {
        let mut out = [0, 0, 0, 1];
        out[..self.channels()].copy_from_slice(&raw[..self.channels()]);
        out
    }
}

/// Which pixel formats a device can bind to an `access::read_write` texture
/// parameter: Metal's `MTLReadWriteTextureTier`, the one rule every backend
/// applies (in [`crate::check_dispatch`]). Read-only, write-only and sampled
/// textures take every format on every tier.
///
/// * [`ReadWriteTier::None`]: no format (Metal's `MTLReadWriteTextureTierNone`).
/// * [`ReadWriteTier::Tier1`]: r32float, r32uint and r32sint.
/// * [`ReadWriteTier::Tier2`]: also rgba32float, rgba16float, r16float,
///   rgba8unorm and r8unorm (and formats enigma does not have), so every
///   [`TextureFormat`]. The simulator and CUDA (whose surfaces read and
///   write every format) report this tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadWriteTier {
    None,
    Tier1,
    Tier2,
}

impl ReadWriteTier {
    /// Whether a texture of `format` may be bound as `access::read_write`.
    pub fn allows(self, format: TextureFormat) -> bool {
        match self {
            ReadWriteTier::None => false,
            ReadWriteTier::Tier1 => matches!(format, TextureFormat::R32Float | TextureFormat::R32Uint | TextureFormat::R32Sint),
            ReadWriteTier::Tier2 => true,
        }
    }

    /// The formats this tier allows read_write.
    pub fn formats(self) -> Vec<TextureFormat> {
        TextureFormat::ALL.into_iter().filter(|f| self.allows(*f)).collect()
    }

    /// [`ReadWriteTier::formats`] for messages: "r32float, r32uint,
    /// r32sint", or "no format".
    pub fn format_names(self) -> String {
        let names: Vec<&str> = self.formats().iter().map(|f| f.name()).collect();
        if names.is_empty() {
            "no format".into()
        } else {
            names.join(", ")
        }
    }
}

impl fmt::Display for ReadWriteTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReadWriteTier::None => "read-write texture tier none",
            ReadWriteTier::Tier1 => "read-write texture tier 1",
            ReadWriteTier::Tier2 => "read-write texture tier 2",
        })
    }
}

/// A float written to a unorm8 channel: clamped to [0, 1] (NaN as 0), then
/// the nearest of `c · 255`, ties to even.
pub fn unorm8(v: f32) -> u8 {
    let c = if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) };
    (c * 255.0).round_ties_even() as u8
}

/// How far a hardware bilinear filter may land from [`sample`]'s, as a
/// fraction of the largest difference between the texels it blends: NVIDIA
/// holds each weight with 8 fractional bits (CUDA programming guide,
/// texture fetching), an error of up to 1/256 per axis, 2/256 over both.
/// Measured on an H100: 1.07/256 at worst in the sampling conformance case
/// (r8unorm, linear, repeat), over the 1/256 first assumed here.
pub const HARDWARE_FILTER_TOLERANCE: f32 = 2.0 / 256.0;

/// `tex.sample(sampler, uv)` on a texture of `desc`, as Metal specifies it,
/// in f32: with `u' = u·w` for normalised coordinates (`u` itself in
/// pixels) and likewise `v'`, `nearest` reads texel `(floor(u'), floor(v'))`
/// and `linear` blends texels `floor(u' - 0.5)` and the next with weights
/// `1 - a` and `a`, `a = frac(u' - 0.5)` (likewise in y). Texel indices
/// outside the texture go through the address mode ([`address`]); a
/// clamp-to-zero border texel reads as stored zeros do. `texel(x, y)` reads
/// the texel at an in-range index as four floats.
pub fn sample(desc: &TextureDesc, sampler: Sampler, uv: [f32; 2], texel: impl Fn(u32, u32) -> [f32; 4]) -> [f32; 4] {
    let scale = |c: f32, n: u32| match sampler.coord {
        SamplerCoord::Normalized => c * n as f32,
        SamplerCoord::Pixel => c,
    };
    let (u, v) = (scale(uv[0], desc.width), scale(uv[1], desc.height));
    let border = desc.format.read_float([0; 4]);
    let fetch = |x: i64, y: i64| match (address(sampler.address, x, desc.width), address(sampler.address, y, desc.height)) {
        (Some(x), Some(y)) => texel(x, y),
        _ => border,
    };
    match sampler.filter {
        SamplerFilter::Nearest => fetch(u.floor() as i64, v.floor() as i64),
        SamplerFilter::Linear => {
            let (x, y) = (u - 0.5, v - 0.5);
            let (x0, y0) = (x.floor(), y.floor());
            let (a, b) = (x - x0, y - y0);
            let (i0, j0) = (x0 as i64, y0 as i64);
            let (t00, t10) = (fetch(i0, j0), fetch(i0.saturating_add(1), j0));
            let (t01, t11) = (fetch(i0, j0.saturating_add(1)), fetch(i0.saturating_add(1), j0.saturating_add(1)));
            std::array::from_fn(|c| {
                (1.0 - a) * (1.0 - b) * t00[c] + a * (1.0 - b) * t10[c] + (1.0 - a) * b * t01[c] + a * b * t11[c]
            })
        }
    }
}

/// The texel a sampler reads for index `i` along an axis of `n` texels:
/// `None` for clamp-to-zero's border outside `0..n`.
pub fn address(mode: SamplerAddress, i: i64, n: u32) -> Option<u32> {
    let n = n as i64;
    let i = match mode {
        SamplerAddress::ClampToEdge => i.clamp(0, n - 1),
        SamplerAddress::ClampToZero if (0..n).contains(&i) => i,
        SamplerAddress::ClampToZero => return None,
        SamplerAddress::Repeat => i.rem_euclid(n),
        SamplerAddress::MirroredRepeat => {
            let t = i.rem_euclid(2 * n);
            if t < n {
                t
            } else {
                2 * n - 1 - t
            }
        }
    };
    Some(i as u32)
}

impl fmt::Display for TextureFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a texture is: its format and size in texels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TextureDesc {
    pub format: TextureFormat,
    pub width: u32,
    pub height: u32,
}

/// The longest side of a 2D texture: 16384 texels on every Apple GPU Metal 3 runs on.
pub const MAX_TEXTURE_SIDE: u32 = 16384;

impl TextureDesc {
    /// Texels in the texture.
    pub fn texels(&self) -> u64 {
        self.width as u64 * self.height as u64
    }

    /// Bytes its storage holds: `width · height · bytes_per_texel`.
    pub fn len_bytes(&self) -> u64 {
        self.texels() * self.format.bytes_per_texel() as u64
    }
}

impl fmt::Display for TextureDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}×{} {}", self.width, self.height, self.format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sizes_are_metals() {
        for f in TextureFormat::ALL {
            assert_eq!(TextureFormat::from_name(f.name()), Some(f));
        }
        let bytes: Vec<usize> = TextureFormat::ALL.iter().map(|f| f.bytes_per_texel()).collect();
        assert_eq!(bytes, [1, 4, 2, 8, 4, 16, 4, 4]);
        assert_eq!(TextureFormat::from_name("bgra8unorm"), None);
    }

    /// unorm8 against the definition: every stored value reads back as
    /// c/255 and writes back to itself; the midpoints between neighbours
    /// round to the even one; out-of-range values and NaN clamp.
    #[test]
    fn unorm8_reads_and_writes_as_metal_specifies() {
        let f = TextureFormat::R8Unorm;
        for c in 0u32..=255 {
            let v = f.read_float([c, 0, 0, 0]);
            assert_eq!(v, [c as f32 / 255.0, 0.0, 0.0, 1.0]);
            assert_eq!(f.write_float(v)[0], c);
        }
        assert_eq!(unorm8(0.5), 128, "127.5 ties to the even 128");
        assert_eq!(unorm8(1.5 / 255.0), 2, "1.5 ties to the even 2");
        assert_eq!(unorm8(2.5 / 255.0), 2, "2.5 ties to the even 2");
        assert_eq!(unorm8(-0.25), 0);
        assert_eq!(unorm8(7.0), 255);
        assert_eq!(unorm8(f32::NAN), 0);
        assert_eq!(unorm8(f32::INFINITY), 255);
    }

    #[test]
    fn float16_rounds_to_nearest_even_and_missing_channels_read_as_0001() {
        let f = TextureFormat::Rgba16Float;
        let stored = f.write_float([1.0 + 2f32.powi(-11), 65504.0, -0.0, 1e-8]);
        assert_eq!(stored, [0x3c00, 0x7bff, 0x8000, 0x0000]);
        assert_eq!(TextureFormat::R16Float.read_float([0x3800, 0, 0, 0]), [0.5, 0.0, 0.0, 1.0]);
        assert_eq!(TextureFormat::R32Uint.read_int([7, 9, 9, 9]), [7, 0, 0, 1]);
        assert_eq!(TextureFormat::R32Sint.read_int([(-3i32) as u32, 0, 0, 0]), [(-3i32) as u32, 0, 0, 1]);
    }

    #[test]
    fn address_modes_fold_indices_as_metal_does() {
        let fold = |mode| (-5..9).map(|i| address(mode, i, 4).map_or(-1, |t| t as i64)).collect::<Vec<_>>();
        assert_eq!(fold(SamplerAddress::ClampToEdge), [0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3]);
        assert_eq!(fold(SamplerAddress::ClampToZero), [-1, -1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, -1]);
        assert_eq!(fold(SamplerAddress::Repeat), [3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0]);
        assert_eq!(fold(SamplerAddress::MirroredRepeat), [3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0, 0]);
    }

    /// Metal's tiers (Metal feature set tables, "read-write texture
    /// formats"): tier 1 is the three 32-bit one-channel formats; tier 2
    /// adds every other format enigma has.
    #[test]
    fn read_write_tiers_allow_metals_formats() {
        use TextureFormat::*;
        assert_eq!(ReadWriteTier::None.formats(), []);
        assert_eq!(ReadWriteTier::Tier1.formats(), [R32Float, R32Uint, R32Sint]);
        assert_eq!(ReadWriteTier::Tier2.formats(), TextureFormat::ALL);
        assert!(ReadWriteTier::Tier1 < ReadWriteTier::Tier2);
        assert_eq!(ReadWriteTier::Tier1.to_string(), "read-write texture tier 1");
    }

    #[test]
    fn formats_accept_the_texel_types_metal_allows() {
        assert!(TextureFormat::Rgba8Unorm.accepts(Scalar::F16));
        assert!(!TextureFormat::Rgba8Unorm.accepts(Scalar::U32));
        assert!(TextureFormat::R32Uint.accepts(Scalar::U32));
        assert!(!TextureFormat::R32Uint.accepts(Scalar::I32));
        assert!(TextureFormat::R32Sint.accepts(Scalar::I32));
    }
}
