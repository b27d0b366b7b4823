//! Textures (issue 20): every pixel format read into a buffer against a
//! plain-Rust reference of Metal's conversion rules and copied texel by
//! texel unchanged; seed 003's Listing 4 covering 1920×1080 exactly in both
//! dispatch modes; and sampling, every float format with every coordinate
//! space × filter × address mode, against a plain-Rust f64 reference
//! (within 4e-6 of the largest texel blended on the simulator, f32
//! rounding; on hardware within 2/256 of the blended texels' range more,
//! NVIDIA's 8-bit filter weights); and every format bound as read_write,
//! which runs where the device's read-write tier allows the format and is
//! refused with `RuntimeError::TextureReadWrite` where it does not. Every backend (simulator, CUDA, Metal)
//! lists `Feature::Texture2d` and must run them. On Metal they have not run
//! yet: its texture runtime is type-checked, not run on a Mac.

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, Feature, Kernel, Sampler, SamplerAddress, SamplerCoord, SamplerFilter, Scalar, TextureAccess, Type};
use enigma_runtime::{Arg, DeviceKind, Runtime, RuntimeError, TextureFormat};
use rand::Rng;

fn uint2(x: Ex, y: Ex) -> Ex {
    vector(Type::vector(Scalar::U32, 2), &[x, y])
}

/// Fails unless `rt`'s device lists 2D textures: the simulator, CUDA and
/// Metal backends all run them.
fn require_textures(rt: &Runtime) -> Result<(), String> {
    let device = rt.device();
    ensure!(
        device.features.contains(&Feature::Texture2d),
        "the {} device `{}` does not list 2D textures, which its backend runs",
        device.kind.name(),
        device.name
    );
    Ok(())
}

/// `out[y·w + x] = src.read((x, y))` and `dst.write(src.read((x, y)), (x, y))`.
fn copy_kernel(texel: Scalar) -> Result<Kernel, String> {
    let mut k = KernelBuilder::new(format!("texture_copy_{texel}"));
    let src = k.texture2d("src", texel, TextureAccess::Read);
    let dst = k.texture2d("dst", texel, TextureAccess::Write);
    let out = k.buffer("out", Type::vector(texel, 4), Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid());
    let c = k.let_("c", uint2(gid.x(), gid.y()));
    let v = k.let_("v", src.read(c));
    k.store(out.at(gid.y() * src.get_width() + gid.x()), v);
    k.texture_write(dst, v, c);
    finish(k)
}

/// The texel type a kernel views `format` with here.
fn texel_of(format: TextureFormat) -> Scalar {
    match format {
        TextureFormat::R32Uint => Scalar::U32,
        TextureFormat::R32Sint => Scalar::I32,
        _ => Scalar::F32,
    }
}

/// `img.write(img.read((x, y)), (x, y))` on a read_write texture: each
/// thread reads its texel before writing it, so no `fence()` is needed.
fn read_write_kernel(texel: Scalar) -> Result<Kernel, String> {
    let mut k = KernelBuilder::new(format!("texture_read_write_{texel}"));
    let img = k.texture2d("img", texel, TextureAccess::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid());
    let c = k.let_("c", uint2(gid.x(), gid.y()));
    let v = k.let_("v", img.read(c));
    k.texture_write(img, v, c);
    finish(k)
}

/// What a read of the texel `t` (its stored bytes) gives, as four channel
/// bit patterns of the texel type (f32 bits for float formats).
fn reference_read(format: TextureFormat, t: &[u8]) -> [u32; 4] {
    let word = |i: usize| u32::from_le_bytes(t[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    let half = |i: usize| f16_to_f32(u16::from_le_bytes([t[2 * i], t[2 * i + 1]])).to_bits();
    let unorm = |i: usize| (t[i] as f32 / 255.0).to_bits();
    let one = 1f32.to_bits();
    match format {
        TextureFormat::R8Unorm => [unorm(0), 0, 0, one],
        TextureFormat::Rgba8Unorm => [unorm(0), unorm(1), unorm(2), unorm(3)],
        TextureFormat::R16Float => [half(0), 0, 0, one],
        TextureFormat::Rgba16Float => [half(0), half(1), half(2), half(3)],
        TextureFormat::R32Float => [word(0), 0, 0, one],
        TextureFormat::Rgba32Float => [word(0), word(1), word(2), word(3)],
        TextureFormat::R32Uint | TextureFormat::R32Sint => [word(0), 0, 0, 1],
    }
}

/// Random texel bytes of `format`: any bytes for unorm and integer formats,
/// finite values for float ones (so copies keep their bits exactly).
fn texel_bytes(rng: &mut impl Rng, format: TextureFormat, texels: usize) -> Vec<u8> {
    let channels = texels * format.channels();
    match format.channel_bytes() {
        2 => (0..channels).flat_map(|_| f32_to_f16(rng.gen_range(-1000.0f32..1000.0)).to_le_bytes()).collect(),
        4 if matches!(format, TextureFormat::R32Float | TextureFormat::Rgba32Float) => {
            (0..channels).flat_map(|_| rng.gen_range(-1e6f32..1e6).to_le_bytes()).collect()
        }
        _ => (0..channels * format.channel_bytes()).map(|_| rng.gen()).collect(),
    }
}

pub fn texture_formats_round_trip(rt: &Runtime) -> CaseResult {
    seeded("texture_formats_round_trip", |rng| {
        let (w, h) = (37u32, 11u32);
        require_textures(rt)?;
        for format in TextureFormat::ALL {
            let texel = texel_of(format);
            let kernel = copy_kernel(texel)?;
            let p = pipeline(rt, &kernel)?;
            let bytes = texel_bytes(rng, format, (w * h) as usize);
            let src = rt.texture_from_bytes(format, w, h, &bytes).ctx("creating the source texture")?;
            let dst = rt.texture(format, w, h).ctx("creating the destination texture")?;
            let out = rt.buffer_of_type(Type::vector(texel, 4), (w * h) as usize).ctx("allocating the output")?;
            threads(rt, &p, &[Arg::from(&src), Arg::from(&dst), Arg::from(&out)], [w, h, 1], [8, 8, 1])?;
            let got: Vec<u32> = download(&out)?;
            let want: Vec<u32> = bytes.chunks_exact(format.bytes_per_texel()).flat_map(|t| reference_read(format, t)).collect();
            let describe = |i: usize| format!("texel ({}, {}), channel {}", (i / 4) as u32 % w, (i / 4) as u32 / w, i % 4);
            check_eq(&format!("{format} read as {texel}"), &got, &want, describe)?;
            let copied = dst.read_bytes().ctx("reading the destination back")?;
            check_eq(&format!("{format} copied texel by texel"), &copied, &bytes, |i| format!("byte {i}"))?;
        }
        Ok(())
    })
}

pub fn texture_listing4_covers_1920_by_1080(rt: &Runtime) -> CaseResult {
    let (w, h) = (1920u32, 1080u32);
    require_textures(rt)?;
    for (bounds_check, threadgroups) in [(true, true), (false, false)] {
        let kernel = enigma_kernels::texture_fill::fill_white(bounds_check, true);
        let p = pipeline(rt, &kernel)?;
        let tex = rt.texture(TextureFormat::Rgba8Unorm, w, h).ctx("creating the texture")?;
        let counts = filled(rt, (w * h) as usize, 0u32)?;
        let args = [Arg::from(&tex), Arg::from(&counts)];
        let tg = enigma_kernels::texture_fill::THREADS_PER_THREADGROUP;
        if threadgroups {
            groups(rt, &p, &args, enigma_kernels::texture_fill::threadgroups(w, h), tg)?;
        } else {
            threads(rt, &p, &args, [w, h, 1], tg)?;
        }
        let mode = if threadgroups { "dispatch_threadgroups with the bounds check" } else { "dispatch_threads" };
        let counts: Vec<u32> = download(&counts)?;
        let describe = |i: usize| format!("texel ({}, {})", i as u32 % w, i as u32 / w);
        check_eq(&format!("{mode}: writes per texel"), &counts, &vec![1; (w * h) as usize], describe)?;
        let white = tex.read_bytes().ctx("reading the texture back")?;
        check_eq(&format!("{mode}: texel bytes"), &white, &vec![255u8; (w * h * 4) as usize], |i| format!("byte {i}"))?;
    }
    Ok(())
}

/// `out[i] = src.sample(sampler, uv[i])`.
fn sample_kernel(sampler: Sampler) -> Result<Kernel, String> {
    let (c, f, a) = (sampler.coord.name(), sampler.filter.name(), sampler.address.name());
    let mut k = KernelBuilder::new(format!("texture_sample_{c}_{f}_{a}"));
    let src = k.texture2d("src", Scalar::F32, TextureAccess::Sample);
    let uv = k.buffer("uv", Type::vector(Scalar::F32, 2), Access::Read);
    let out = k.buffer("out", Type::vector(Scalar::F32, 4), Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    k.store(out.at(i), src.sample(sampler, uv.get(i)));
    finish(k)
}

/// The texel along an axis of `n` that index `i` reads, `None` for the
/// clamp-to-zero border: written from the address modes' definitions
/// (a mirrored index reflects about the texture's edges).
fn reference_fold(address: SamplerAddress, i: i64, n: i64) -> Option<i64> {
    match address {
        SamplerAddress::ClampToEdge => Some(i.max(0).min(n - 1)),
        SamplerAddress::ClampToZero => (i >= 0 && i < n).then_some(i),
        SamplerAddress::Repeat => Some(((i % n) + n) % n),
        SamplerAddress::MirroredRepeat => {
            let p = ((i % (2 * n)) + 2 * n) % (2 * n);
            Some(p.min(2 * n - 1 - p))
        }
    }
}

/// A sample of `texels` (w × h, each four f64 channels as read) at `uv`:
/// the value, and the spread (largest minus smallest) and the magnitude
/// (largest absolute value) of each channel over the texels it blends.
type Reference = ([f64; 4], [f64; 4], [f64; 4]);
fn reference_sample(texels: &[[f64; 4]], (w, h): (i64, i64), border: [f64; 4], sampler: Sampler, uv: [f32; 2]) -> Reference {
    let (mut u, mut v) = (uv[0] as f64, uv[1] as f64);
    if sampler.coord == SamplerCoord::Normalized {
        u *= w as f64;
        v *= h as f64;
    }
    // (texel index, weight) along each axis.
    let taps = |c: f64| -> Vec<(i64, f64)> {
        match sampler.filter {
            SamplerFilter::Nearest => vec![(c.floor() as i64, 1.0)],
            SamplerFilter::Linear => {
                let lo = (c - 0.5).floor();
                let a = c - 0.5 - lo;
                vec![(lo as i64, 1.0 - a), (lo as i64 + 1, a)]
            }
        }
    };
    let (mut value, mut lo, mut hi) = ([0.0; 4], [f64::INFINITY; 4], [f64::NEG_INFINITY; 4]);
    for (x, wx) in taps(u) {
        for &(y, wy) in &taps(v) {
            let t = match (reference_fold(sampler.address, x, w), reference_fold(sampler.address, y, h)) {
                (Some(x), Some(y)) => texels[(y * w + x) as usize],
                _ => border,
            };
            for c in 0..4 {
                value[c] += wx * wy * t[c];
                lo[c] = lo[c].min(t[c]);
                hi[c] = hi[c].max(t[c]);
            }
        }
    }
    (value, std::array::from_fn(|c| hi[c] - lo[c]), std::array::from_fn(|c| hi[c].abs().max(lo[c].abs())))
}

/// Every valid sampler: pixel coordinates do not repeat.
fn samplers() -> Vec<Sampler> {
    let mut all = vec![];
    for coord in SamplerCoord::ALL {
        for filter in SamplerFilter::ALL {
            for address in SamplerAddress::ALL {
                if !(coord == SamplerCoord::Pixel && address.repeats()) {
                    all.push(Sampler { coord, filter, address });
                }
            }
        }
    }
    all
}

pub fn texture_sampling_every_filter_and_address_mode(rt: &Runtime) -> CaseResult {
    seeded("texture_sampling_every_filter_and_address_mode", |rng| {
        let (w, h) = (5u32, 4u32);
        let points = 96usize;
        let hardware = rt.device().kind != DeviceKind::Simulator;
        require_textures(rt)?;
        for format in TextureFormat::ALL.into_iter().filter(|f| f.filterable()) {
            let bytes = texel_bytes(rng, format, (w * h) as usize);
            let texels: Vec<[f64; 4]> =
                bytes.chunks_exact(format.bytes_per_texel()).map(|t| reference_read(format, t).map(|b| f32::from_bits(b) as f64)).collect();
            let border = if format.channels() == 4 { [0.0; 4] } else { [0.0, 0.0, 0.0, 1.0] };
            let src = rt.texture_from_bytes(format, w, h, &bytes).ctx("creating the sampled texture")?;
            for sampler in samplers() {
                let kernel = sample_kernel(sampler)?;
                // Coordinates reaching past every edge; for nearest, none
                // within 1/50 texel of a texel boundary, where f32 rounding
                // of u·w may pick either neighbour.
                let scale = |n: u32| if sampler.coord == SamplerCoord::Normalized { 1.0 / n as f32 } else { 1.0 };
                let mut uv = Vec::with_capacity(points * 2);
                while uv.len() < points * 2 {
                    let p = [rng.gen_range(-2.5f32..w as f32 + 2.5), rng.gen_range(-2.5f32..h as f32 + 2.5)];
                    let near_edge = p.iter().any(|c| (c - c.round()).abs() < 0.02);
                    if sampler.filter == SamplerFilter::Nearest && near_edge {
                        continue;
                    }
                    uv.extend([p[0] * scale(w), p[1] * scale(h)]);
                }
                let p = pipeline(rt, &kernel)?;
                let uv_bytes: Vec<u8> = uv.iter().flat_map(|c| c.to_le_bytes()).collect();
                let uv_buf = rt.buffer_from_bytes(Type::vector(Scalar::F32, 2), &uv_bytes).ctx("uploading the coordinates")?;
                let out = rt.buffer_of_type(Type::vector(Scalar::F32, 4), points).ctx("allocating the output")?;
                threads(rt, &p, &[Arg::from(&src), Arg::from(&uv_buf), Arg::from(&out)], [points as u32, 1, 1], [32, 1, 1])?;
                let got: Vec<f32> = download(&out)?;
                for i in 0..points {
                    let at = [uv[2 * i], uv[2 * i + 1]];
                    let (want, spread, magnitude) = reference_sample(&texels, (w as i64, h as i64), border, sampler, at);
                    for c in 0..4 {
                        // f32 arithmetic over texels up to `magnitude`: a few ulps
                        // of it; on hardware a float16 format's filtered value
                        // comes back at float16 precision (measured on an H100:
                        // r16float, linear, 789.5 for 789.29), half an f16 ulp more.
                        let half_result = hardware && matches!(format, TextureFormat::R16Float | TextureFormat::Rgba16Float);
                        let rounding = 4e-6 * magnitude[c].max(1.0) + if half_result { magnitude[c] * 2f64.powi(-11) } else { 0.0 };
                        let tol = if hardware && sampler.filter == SamplerFilter::Linear {
                            enigma_runtime::texture::HARDWARE_FILTER_TOLERANCE as f64 * spread[c] + rounding
                        } else {
                            rounding
                        };
                        let g = got[4 * i + c] as f64;
                        ensure!(
                            (g - want[c]).abs() <= tol,
                            "{format} with {sampler} at uv ({}, {}), channel {c}: got {g}, expected {} (tolerance {tol:e})",
                            at[0],
                            at[1],
                            want[c]
                        );
                    }
                }
            }
        }
        Ok(())
    })
}

pub fn texture_read_write_follows_the_tier(rt: &Runtime) -> CaseResult {
    seeded("texture_read_write_follows_the_tier", |rng| {
        let (w, h) = (13u32, 7u32);
        require_textures(rt)?;
        let tier = rt.device().read_write_textures;
        for format in TextureFormat::ALL {
            let p = pipeline(rt, &read_write_kernel(texel_of(format))?)?;
            let bytes = texel_bytes(rng, format, (w * h) as usize);
            let img = rt.texture_from_bytes(format, w, h, &bytes).ctx("creating the texture")?;
            let result = rt.dispatch_threads(&p, &[Arg::from(&img)], [w, h, 1], [8, 8, 1]);
            if tier.allows(format) {
                result.map_err(|e| format!("{format} read_write on a device of {tier}: {e}"))?;
                let after = img.read_bytes().ctx("reading the texture back")?;
                check_eq(&format!("{format} written back as read"), &after, &bytes, |i| format!("byte {i}"))?;
            } else {
                match result {
                    Err(RuntimeError::TextureReadWrite { found, tier: t, .. }) if found.format == format && t == tier => {}
                    Err(e) => return Err(format!("{format} read_write on a device of {tier}: expected TextureReadWrite, got: {e}")),
                    Ok(_) => return Err(format!("{format} read_write ran on a device of {tier}, which does not allow it")),
                }
            }
        }
        Ok(())
    })
}
