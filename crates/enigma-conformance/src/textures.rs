//! Textures (issue 20, phase 1): every pixel format read into a buffer
//! against a plain-Rust reference of Metal's conversion rules and copied
//! texel by texel unchanged, and seed 003's Listing 4 covering 1920×1080
//! exactly in both dispatch modes. A device without `Feature::Texture2d`
//! passes by refusing the pipeline with `RuntimeError::Unsupported` (the
//! CUDA and Metal runtimes do not create texture objects yet).

use crate::util::*;
use enigma_ir::builder::*;
use enigma_ir::{Access, AtomicOp, Feature, Kernel, Scalar, TextureAccess, Type};
use enigma_runtime::{Arg, Runtime, RuntimeError, TextureFormat};
use rand::Rng;

fn uint2(x: Ex, y: Ex) -> Ex {
    vector(Type::vector(Scalar::U32, 2), &[x, y])
}

/// `Ok(true)` when `rt` runs textures; `Ok(false)` when it lacks them and
/// refuses `kernel` as it must; `Err` otherwise.
fn runs_textures(rt: &Runtime, kernel: &Kernel) -> Result<bool, String> {
    if rt.device().features.contains(&Feature::Texture2d) {
        return Ok(true);
    }
    match rt.pipeline(kernel) {
        Err(RuntimeError::Unsupported { feature: Feature::Texture2d, .. }) => Ok(false),
        Err(e) => Err(format!("a device without textures must refuse `{}` as unsupported, not with: {e}", kernel.name)),
        Ok(_) => Err(format!("a device without textures made a pipeline of `{}`", kernel.name)),
    }
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
        for format in TextureFormat::ALL {
            let texel = match format {
                TextureFormat::R32Uint => Scalar::U32,
                TextureFormat::R32Sint => Scalar::I32,
                _ => Scalar::F32,
            };
            let kernel = copy_kernel(texel)?;
            if !runs_textures(rt, &kernel)? {
                return Ok(());
            }
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
    for (bounds_check, threadgroups) in [(true, true), (false, false)] {
        let mut k = KernelBuilder::new("listing4_counted");
        let out = k.texture2d("outputTexture", Scalar::F32, TextureAccess::Write);
        let counts = k.buffer("counts", Type::U32, Access::ReadWrite);
        let gid = k.let_("gid", thread_position_in_grid());
        let position = k.let_("position", uint2(gid.x(), gid.y()));
        if bounds_check {
            k.if_(position.x().ge(out.get_width()).or(position.y().ge(out.get_height())), |k| k.return_());
        }
        k.texture_write(out, vector(Type::vector(Scalar::F32, 4), &[lit(Scalar::F32, 1.0)]), position);
        k.atomic(AtomicOp::Add, counts.at(gid.y() * out.get_width() + gid.x()), 1u32);
        let kernel = finish(k)?;
        if !runs_textures(rt, &kernel)? {
            return Ok(());
        }
        let p = pipeline(rt, &kernel)?;
        let tex = rt.texture(TextureFormat::Rgba8Unorm, w, h).ctx("creating the texture")?;
        let counts = filled(rt, (w * h) as usize, 0u32)?;
        let args = [Arg::from(&tex), Arg::from(&counts)];
        if threadgroups {
            groups(rt, &p, &args, [w.div_ceil(32), h.div_ceil(16), 1], [32, 16, 1])?;
        } else {
            threads(rt, &p, &args, [w, h, 1], [32, 16, 1])?;
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
