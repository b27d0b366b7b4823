//! Textures on the simulator (issue 20, phase 1): reads and writes of every
//! pixel format against plain-Rust references of Metal's conversion rules,
//! the size queries, the sanitizer's out-of-bounds and race findings, the
//! dispatch checks, samples worked by hand (the conformance case checks
//! every sampler against a reference), the read-write texture tiers (the
//! simulator posing as a device of tier 1 and of none), and seed 003's Listing 4 on a
//! 1920×1080 texture.

use enigma_ir::builder::*;
use enigma_ir::{Access, Kernel, Sampler, SamplerAddress, SamplerCoord, SamplerFilter, Scalar, TextureAccess, Type};
use enigma_kernels::texture_fill;
use enigma_runtime::half::{f16_bits_to_f32, f32_to_f16_bits};
use enigma_runtime::{Arg, Device, FindingKind, DispatchMode, Options, ReadWriteTier, Runtime, RuntimeError, Texture, TextureFormat};
use std::sync::Arc;

fn sim() -> Runtime {
    Runtime::new(Device::Sim).unwrap()
}

fn sanitize() -> Options {
    Options { sanitize: true, schedules: 0, ..Default::default() }
}

fn uint2(x: Ex, y: Ex) -> Ex {
    vector(Type::vector(Scalar::U32, 2), &[x, y])
}

/// `out[y·w + x] = src.read((x, y))` for every texel, with `texel` values.
fn read_all(texel: Scalar) -> Kernel {
    let mut k = KernelBuilder::new("read_all");
    let src = k.texture2d("src", texel, TextureAccess::Read);
    let out = k.buffer("out", Type::vector(texel, 4), Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid());
    k.store(out.at(gid.y() * src.get_width() + gid.x()), src.read(uint2(gid.x(), gid.y())));
    k.finish().unwrap()
}

/// `dst.write(values[y·w + x], (x, y))` for every texel.
fn write_all(texel: Scalar) -> Kernel {
    let mut k = KernelBuilder::new("write_all");
    let values = k.buffer("values", Type::vector(texel, 4), Access::Read);
    let dst = k.texture2d("dst", texel, TextureAccess::Write);
    let gid = k.let_("gid", thread_position_in_grid());
    k.texture_write(dst, values.get(gid.y() * dst.get_width() + gid.x()), uint2(gid.x(), gid.y()));
    k.finish().unwrap()
}

/// Reads every texel of `tex` through `texture2d<texel>` into a buffer.
fn read_back(rt: &Runtime, tex: &Texture, texel: Scalar) -> Vec<u8> {
    let out = rt.buffer_of_type(Type::vector(texel, 4), (tex.width() * tex.height()) as usize).unwrap();
    let p = rt.pipeline(&read_all(texel)).unwrap();
    rt.dispatch(&p, &[Arg::from(tex), Arg::from(&out)], DispatchMode::Threads, [tex.width(), tex.height(), 1], [8, 4, 1], &sanitize()).unwrap();
    out.read_bytes().unwrap()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Texel bytes that cover every unorm8 value and many halves.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 3) as u8).collect()
}

/// The reference of a read of a float or unorm format as f32: Metal's
/// conversion rules, written out per format.
fn reference_read(format: TextureFormat, bytes: &[u8]) -> Vec<f32> {
    let texel = |t: &[u8]| -> [f32; 4] {
        match format {
            TextureFormat::R8Unorm => [t[0] as f32 / 255.0, 0.0, 0.0, 1.0],
            TextureFormat::Rgba8Unorm => [0, 1, 2, 3].map(|c| t[c] as f32 / 255.0),
            TextureFormat::R16Float => [f16_bits_to_f32(u16::from_le_bytes([t[0], t[1]])), 0.0, 0.0, 1.0],
            TextureFormat::Rgba16Float => [0, 1, 2, 3].map(|c| f16_bits_to_f32(u16::from_le_bytes([t[2 * c], t[2 * c + 1]]))),
            TextureFormat::R32Float => [f32::from_le_bytes(t[..4].try_into().unwrap()), 0.0, 0.0, 1.0],
            TextureFormat::Rgba32Float => [0, 1, 2, 3].map(|c| f32::from_le_bytes(t[4 * c..4 * c + 4].try_into().unwrap())),
            other => panic!("{other} is not a float format"),
        }
    };
    bytes.chunks_exact(format.bytes_per_texel()).flat_map(texel).collect()
}

/// The reference of the bytes a write of `value` stores.
fn reference_write(format: TextureFormat, value: [f32; 4]) -> Vec<u8> {
    let unorm = |v: f32| -> u8 {
        let c = if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) } as f64 * 255.0;
        // Nearest, ties to even, in f64 on the f32 product as Metal forms it.
        let c = (c as f32) as f64;
        let (lo, frac) = (c.floor(), c - c.floor());
        (if frac > 0.5 || (frac == 0.5 && lo % 2.0 == 1.0) { lo + 1.0 } else { lo }) as u8
    };
    let channels = &value[..format.channels()];
    match format {
        TextureFormat::R8Unorm | TextureFormat::Rgba8Unorm => channels.iter().map(|v| unorm(*v)).collect(),
        TextureFormat::R16Float | TextureFormat::Rgba16Float => channels.iter().flat_map(|v| f32_to_f16_bits(*v).to_le_bytes()).collect(),
        _ => channels.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// The formats read as floats (unorm or float channels): the filterable ones.
fn float_formats() -> impl Iterator<Item = TextureFormat> {
    TextureFormat::ALL.into_iter().filter(|f| f.filterable())
}

#[test]
fn reads_of_every_float_format_convert_as_metal_does() {
    let rt = sim();
    let (w, h) = (13, 7);
    for format in float_formats() {
        let mut bytes = pattern((w * h) as usize * format.bytes_per_texel());
        if matches!(format, TextureFormat::R32Float | TextureFormat::Rgba32Float) {
            // Finite floats only: NaN payloads are compared below by bits anyway.
            for (i, c) in bytes.chunks_exact_mut(4).enumerate() {
                c.copy_from_slice(&(i as f32 * 0.37 - 3.0).to_le_bytes());
            }
        }
        let tex = rt.texture_from_bytes(format, w, h, &bytes).unwrap();
        let got = f32s(&read_back(&rt, &tex, Scalar::F32));
        let want = reference_read(format, &bytes);
        let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        assert!(same && got.len() == want.len(), "{format}: {:?}… vs {:?}…", &got[..8], &want[..8]);
    }
}

#[test]
fn half_texels_read_unorm8_as_the_nearest_half_of_c_over_255() {
    let rt = sim();
    let bytes: Vec<u8> = (0..=255).collect();
    let tex = rt.texture_from_bytes(TextureFormat::Rgba8Unorm, 8, 8, &bytes).unwrap();
    let got = read_back(&rt, &tex, Scalar::F16);
    let halves: Vec<u16> = got.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    let want: Vec<u16> = bytes.iter().map(|c| f32_to_f16_bits(*c as f32 / 255.0)).collect();
    assert_eq!(halves, want);
}

#[test]
fn writes_of_every_float_format_clamp_and_round_as_metal_does() {
    let rt = sim();
    // Ties of unorm8 (0.5 → 127.5; k + 0.5 over 255), out-of-range values,
    // NaN, infinities, half ties and values past half's range.
    let specials = [
        0.5f32,
        0.5 / 255.0,
        1.5 / 255.0,
        2.5 / 255.0,
        254.5 / 255.0,
        -0.25,
        1.75,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        65520.0,
        1e-8,
        0.1,
        -0.0,
    ];
    let values: Vec<[f32; 4]> = (0..64).map(|i| [0, 1, 2, 3].map(|c| specials[(i * 4 + c) % specials.len()] * if i >= 16 { (i % 5) as f32 * 0.25 } else { 1.0 })).collect();
    let flat: Vec<f32> = values.iter().flatten().copied().collect();
    for format in float_formats() {
        let tex = rt.texture(format, 8, 8).unwrap();
        let src = rt.buffer_from(&flat).unwrap();
        let p = rt.pipeline(&write_all(Scalar::F32)).unwrap();
        let src = rt.buffer_from_bytes(Type::vector(Scalar::F32, 4), &src.read_bytes().unwrap()).unwrap();
        rt.dispatch(&p, &[Arg::from(&src), Arg::from(&tex)], DispatchMode::Threads, [8, 8, 1], [4, 4, 1], &sanitize()).unwrap();
        let got = tex.read_bytes().unwrap();
        let want: Vec<u8> = values.iter().flat_map(|v| reference_write(format, *v)).collect();
        if matches!(format, TextureFormat::R32Float | TextureFormat::Rgba32Float) {
            // NaN keeps some NaN; everything else its bits.
            let same = f32s(&got).iter().zip(f32s(&want)).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
            assert!(same, "{format}");
        } else {
            assert_eq!(got, want, "{format}");
        }
    }
}

#[test]
fn integer_formats_hold_their_bits_and_read_missing_channels_as_0_0_1() {
    let rt = sim();
    for (format, texel) in [(TextureFormat::R32Uint, Scalar::U32), (TextureFormat::R32Sint, Scalar::I32)] {
        let data: Vec<u32> = (0..24u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
        let tex = rt.texture_from(format, 6, 4, &data).unwrap();
        let got = u32s(&read_back(&rt, &tex, texel));
        let want: Vec<u32> = data.iter().flat_map(|v| [*v, 0, 0, 1]).collect();
        assert_eq!(got, want, "{format}");
        // Writes store the first channel.
        let values: Vec<u32> = data.iter().flat_map(|v| [v ^ 0xFFFF, 5, 6, 7]).collect();
        let src = rt.buffer_from_bytes(Type::vector(texel, 4), &values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let dst = rt.texture(format, 6, 4).unwrap();
        let p = rt.pipeline(&write_all(texel)).unwrap();
        rt.dispatch(&p, &[Arg::from(&src), Arg::from(&dst)], DispatchMode::Threads, [6, 4, 1], [8, 8, 1], &sanitize()).unwrap();
        let stored: Vec<u32> = dst.to_vec::<u32>().unwrap();
        assert_eq!(stored, data.iter().map(|v| v ^ 0xFFFF).collect::<Vec<u32>>(), "{format}");
    }
}

/// `img = 1 - img` texel by texel (a read_write texture), and its size
/// into `sizes`.
fn invert() -> Kernel {
    let mut k = KernelBuilder::new("invert");
    let img = k.texture2d("img", Scalar::F32, TextureAccess::ReadWrite);
    let sizes = k.buffer("sizes", Type::U32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid());
    let c = k.let_("c", uint2(gid.x(), gid.y()));
    k.if_(c.x().ge(img.get_width()).or(c.y().ge(img.get_height())), |k| k.return_());
    k.texture_write(img, lit(Scalar::F32, 1.0) - img.read(c), c);
    k.if_(gid.x().eq(0u32).and(gid.y().eq(0u32)), |k| {
        k.store(sizes.at(0u32), img.get_width());
        k.store(sizes.at(1u32), img.get_height());
    });
    k.finish().unwrap()
}

#[test]
fn read_write_textures_and_the_size_queries() {
    let rt = sim();
    let p = rt.pipeline(&invert()).unwrap();
    let bytes = pattern(5 * 3 * 4);
    let tex = rt.texture_from_bytes(TextureFormat::Rgba8Unorm, 5, 3, &bytes).unwrap();
    let sizes = rt.buffer_zeroed::<u32>(2).unwrap();
    rt.dispatch(&p, &[Arg::from(&tex), Arg::from(&sizes)], DispatchMode::Threadgroups, [1, 1, 1], [8, 4, 1], &sanitize()).unwrap();
    assert_eq!(sizes.to_vec::<u32>().unwrap(), [5, 3]);
    // 1 - c/255 written back is (255 - c)/255, exactly 255 - c.
    assert_eq!(tex.to_vec::<u8>().unwrap(), bytes.iter().map(|c| 255 - c).collect::<Vec<u8>>());
}

/// A runtime over the simulator posing as a device of read-write tier `tier`.
fn sim_of_tier(tier: ReadWriteTier) -> Runtime {
    Runtime::with_backend(Arc::new(enigma_sim::SimBackend::new().with_read_write_textures(tier)))
}

/// On a device of read-write tier 1 (Metal's r32float, r32uint, r32sint
/// only) a read_write texture of another format is refused at dispatch, by
/// the shared checks, naming the kernel, the parameter, the texture, the
/// device and its tier; an r32float one runs. Tier none refuses every
/// format; read-only and write-only textures take any format on any tier.
#[test]
fn read_write_textures_follow_the_devices_tier() {
    let rt = sim_of_tier(ReadWriteTier::Tier1);
    let p = rt.pipeline(&invert()).unwrap();
    let sizes = rt.buffer_zeroed::<u32>(2).unwrap();
    let tex = rt.texture(TextureFormat::Rgba8Unorm, 4, 2).unwrap();
    let err = rt.dispatch_threads(&p, &[Arg::from(&tex), Arg::from(&sizes)], [4, 2, 1], [4, 2, 1]).unwrap_err();
    assert!(
        matches!(err, RuntimeError::TextureReadWrite { index: 0, found, tier: ReadWriteTier::Tier1, .. } if found.format == TextureFormat::Rgba8Unorm),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.starts_with("kernel `invert`, argument 0 (`img`): device `enigma simulator"), "{message}");
    assert!(
        message.ends_with(
            "posing as a GPU of read-write texture tier 1` cannot bind a 4×2 rgba8unorm texture as access::read_write: it has \
             read-write texture tier 1, which allows read_write textures of r32float, r32uint, r32sint (read one texture and write \
             another instead)"
        ),
        "{message}"
    );
    let data = [0.25f32, 0.5, 1.0, -1.0];
    let tex = rt.texture_from(TextureFormat::R32Float, 2, 2, &data).unwrap();
    rt.dispatch_threads(&p, &[Arg::from(&tex), Arg::from(&sizes)], [2, 2, 1], [2, 2, 1]).unwrap();
    assert_eq!(tex.to_vec::<f32>().unwrap(), [0.75, 0.5, 0.0, 2.0]);

    let rt = sim_of_tier(ReadWriteTier::None);
    let p = rt.pipeline(&invert()).unwrap();
    let sizes = rt.buffer_zeroed::<u32>(2).unwrap();
    let tex = rt.texture(TextureFormat::R32Float, 2, 2).unwrap();
    let err = rt.dispatch_threads(&p, &[Arg::from(&tex), Arg::from(&sizes)], [2, 2, 1], [2, 2, 1]).unwrap_err();
    assert!(err.to_string().ends_with("it has read-write texture tier none, which allows read_write textures of no format (read one texture and write another instead)"), "{err}");
    let rgba = rt.texture(TextureFormat::Rgba8Unorm, 2, 2).unwrap();
    let out = rt.buffer_of_type(Type::vector(Scalar::F32, 4), 4).unwrap();
    let copy = rt.pipeline(&read_all(Scalar::F32)).unwrap();
    rt.dispatch_threads(&copy, &[Arg::from(&rgba), Arg::from(&out)], [2, 2, 1], [2, 2, 1]).unwrap();
    let p = rt.pipeline(&texture_fill::fill_white(true, false)).unwrap();
    rt.dispatch_threads(&p, &[Arg::from(&rgba)], [2, 2, 1], [2, 2, 1]).unwrap();
    assert_eq!(rgba.to_vec::<u8>().unwrap(), [255; 16]);
}

#[test]
fn a_write_outside_the_texture_names_it_with_the_coordinate_and_the_size() {
    let rt = sim();
    let tex = rt.texture(TextureFormat::R32Float, 10, 6).unwrap();
    let p = rt.pipeline(&texture_fill::fill_white(false, false)).unwrap();
    // 16×8 threads over a 10×6 texture, no bounds check.
    let err = rt.dispatch_threadgroups(&p, &[Arg::from(&tex)], [2, 1, 1], [8, 8, 1]).unwrap_err();
    let RuntimeError::Execution { message, .. } = &err else { panic!("{err}") };
    assert!(message.contains("out-of-bounds write of texture `outputTexture` at (0, 6): it is 10×6 texels by thread (0,6,0)"), "{err}");
    let err = rt.dispatch(&p, &[Arg::from(&tex)], DispatchMode::Threadgroups, [2, 1, 1], [8, 8, 1], &sanitize()).unwrap_err();
    let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{err}") };
    let oob = findings.iter().find(|f| f.kind == FindingKind::OutOfBounds).unwrap_or_else(|| panic!("{err}"));
    assert_eq!(oob.variable.as_deref(), Some("outputTexture"));
    assert!(oob.message.contains("at (0, 6), outside its 10×6 texels"), "{}", oob.message);
    assert_eq!(oob.count, 16 * 8 - 10 * 6, "every thread outside the texture, once");
}

#[test]
fn two_threads_writing_one_texel_race() {
    let rt = sim();
    // Thread i writes i to texel (i % 32, 0): threads i and i + 32 of one
    // threadgroup (two SIMD groups) share a texel; with 32-thread
    // threadgroups, two threadgroups do.
    let mut k = KernelBuilder::new("collide");
    let out = k.texture2d("out", Scalar::U32, TextureAccess::Write);
    let i = k.let_("i", thread_position_in_grid().x());
    k.texture_write(out, vector(Type::vector(Scalar::U32, 4), &[i]), uint2(i % 32u32, lit(Scalar::U32, 0.0)));
    let p = rt.pipeline(&k.finish().unwrap()).unwrap();
    let tex = rt.texture(TextureFormat::R32Uint, 32, 1).unwrap();
    for (tg, kind) in [(64, FindingKind::ThreadgroupRace), (32, FindingKind::DeviceRace)] {
        let err = rt.dispatch(&p, &[Arg::from(&tex)], DispatchMode::Threads, [64, 1, 1], [tg, 1, 1], &sanitize()).unwrap_err();
        let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{err}") };
        let race = findings.iter().find(|f| f.kind == kind).unwrap_or_else(|| panic!("{kind:?}: {err}"));
        assert_eq!(race.variable.as_deref(), Some("out"));
        assert!(race.message.contains("texel of texture `out`"), "{}", race.message);
        assert_eq!(race.count, 32, "{err}");
    }
    // Each thread its own texel: clean.
    let wide = rt.texture(TextureFormat::R32Uint, 64, 1).unwrap();
    let mut k = KernelBuilder::new("own");
    let out = k.texture2d("out", Scalar::U32, TextureAccess::Write);
    let i = k.let_("i", thread_position_in_grid().x());
    k.texture_write(out, vector(Type::vector(Scalar::U32, 4), &[i]), uint2(i, lit(Scalar::U32, 0.0)));
    let own = rt.pipeline(&k.finish().unwrap()).unwrap();
    rt.dispatch(&own, &[Arg::from(&wide)], DispatchMode::Threads, [64, 1, 1], [64, 1, 1], &sanitize()).unwrap();
    assert_eq!(wide.to_vec::<u32>().unwrap(), (0..64).collect::<Vec<u32>>());
}

/// Thread i writes texel i, then reads texel 63 - i, which another SIMD
/// group wrote: ordered by `threadgroup_barrier(mem_flags::mem_texture)`,
/// not by `mem_device`.
#[test]
fn only_a_mem_texture_barrier_orders_texture_accesses() {
    let rt = sim();
    for (flags, clean) in [(enigma_ir::MemFlags::Device, false), (enigma_ir::MemFlags::Texture, true)] {
        let mut k = KernelBuilder::new("swap");
        let img = k.texture2d("img", Scalar::U32, TextureAccess::ReadWrite);
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let i = k.let_("i", thread_position_in_grid().x());
        k.texture_write(img, vector(Type::vector(Scalar::U32, 4), &[i * 10u32]), uint2(i, lit(Scalar::U32, 0.0)));
        k.threadgroup_barrier(flags);
        k.store(out.at(i), img.read(uint2(lit(Scalar::U32, 63.0) - i, lit(Scalar::U32, 0.0))).x());
        let p = rt.pipeline(&k.finish().unwrap()).unwrap();
        let tex = rt.texture(TextureFormat::R32Uint, 64, 1).unwrap();
        let out = rt.buffer_zeroed::<u32>(64).unwrap();
        let result = rt.dispatch(&p, &[Arg::from(&tex), Arg::from(&out)], DispatchMode::Threads, [64, 1, 1], [64, 1, 1], &sanitize());
        if clean {
            result.unwrap();
            assert_eq!(out.to_vec::<u32>().unwrap(), (0..64).map(|i| (63 - i) * 10).collect::<Vec<u32>>());
        } else {
            let err = result.unwrap_err();
            let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{err}") };
            let race = findings.iter().find(|f| f.kind == FindingKind::ThreadgroupRace).unwrap_or_else(|| panic!("{err}"));
            assert!(race.hint.contains("threadgroup_barrier(mem_flags::mem_texture)"), "{}", race.hint);
        }
    }
}

/// Each thread writes `x + 1` to its texel (x, 0) of a read_write texture,
/// fences (or not), writes `x + 2` after the fence (or not), and reads the
/// texel into `out[x]`.
fn write_then_read(fence: bool, write_after_fence: bool) -> Kernel {
    let mut k = KernelBuilder::new("write_then_read");
    let img = k.texture2d("img", Scalar::U32, TextureAccess::ReadWrite);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let x = k.let_("x", thread_position_in_grid().x());
    let c = k.let_("c", uint2(x, lit(Scalar::U32, 0.0)));
    k.texture_write(img, vector(Type::vector(Scalar::U32, 4), &[x + 1u32]), c);
    if fence {
        k.texture_fence(img);
    }
    if write_after_fence {
        k.texture_write(img, vector(Type::vector(Scalar::U32, 4), &[x + 2u32]), c);
    }
    k.store(out.at(x), img.read(c).x());
    k.finish().unwrap()
}

/// A thread reading a texel it wrote needs `fence()` between (Metal leaves
/// the value undefined otherwise): the sanitizer names the texel and both
/// places; a fence makes it clean, and a write after the fence needs another.
#[test]
fn a_read_after_a_write_needs_a_fence() {
    let rt = sim();
    let out = rt.buffer_zeroed::<u32>(8).unwrap();
    let fenced = rt.pipeline(&write_then_read(true, false)).unwrap();
    let tex = rt.texture(TextureFormat::R32Uint, 8, 1).unwrap();
    rt.dispatch(&fenced, &[Arg::from(&tex), Arg::from(&out)], DispatchMode::Threads, [8, 1, 1], [8, 1, 1], &sanitize()).unwrap();
    assert_eq!(out.to_vec::<u32>().unwrap(), (1..=8).collect::<Vec<u32>>());
    for (fence, again) in [(false, false), (true, true)] {
        let p = rt.pipeline(&write_then_read(fence, again)).unwrap();
        let err = rt.dispatch(&p, &[Arg::from(&tex), Arg::from(&out)], DispatchMode::Threads, [8, 1, 1], [8, 1, 1], &sanitize()).unwrap_err();
        let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{err}") };
        assert_eq!(findings.len(), 1, "{err}");
        let f = &findings[0];
        assert_eq!((f.kind, f.variable.as_deref(), f.count), (FindingKind::UnfencedTextureRead, Some("img"), 8), "{err}");
        let write_at = if again { "body[4]" } else { "body[2]" };
        let read_at = if again { "body[5]" } else { "body[3]" };
        let (first, second) = (f.first.as_ref().expect("the read"), f.second.as_ref().expect("the write"));
        assert_eq!((first.location.as_str(), second.location.as_str()), (read_at, write_at), "{err}");
        // The message names the accesses by their source lines (the builder's, here).
        let line = |r: &enigma_runtime::ThreadRef| r.source.as_deref().and_then(|s| s.rsplit('/').next()).unwrap_or_default().to_string();
        assert!(
            f.message.contains(&format!("reads texel (0, 0) of read_write texture `img` at {} after writing it at {} with no fence() between", line(first), line(second))),
            "{}",
            f.message
        );
        assert!(line(first).starts_with("textures.rs:"), "{first:?}");
        assert!(f.hint.contains("call `img.fence()`"), "{}", f.hint);
    }
}

/// `out[0] = src.sample(sampler, (u, 0.5))`.
fn sample_at(texel: Scalar, sampler: Sampler, u: f32) -> Kernel {
    let mut k = KernelBuilder::new("sample_at");
    let src = k.texture2d("src", texel, TextureAccess::Sample);
    let out = k.buffer("out", Type::vector(texel, 4), Access::ReadWrite);
    k.store(out.at(0u32), src.sample(sampler, vector(Type::vector(Scalar::F32, 2), &[u.into(), 0.5f32.into()])));
    k.finish().unwrap()
}

/// A 2×1 r32float texture of (2, 4) sampled linearly at its left edge
/// (u = 0: between texel -1 and texel 0, weights 1/2 each), worked by hand
/// for each address mode; at the centre of texel 1 and between the two; and
/// in pixels past the right edge (u = 2.25: 1/4 of texel 1, 3/4 of the zero
/// border).
#[test]
fn linear_samples_at_the_edge_follow_the_address_mode() {
    let rt = sim();
    let tex = rt.texture_from(TextureFormat::R32Float, 2, 1, &[2.0f32, 4.0]).unwrap();
    let normalized = |filter, address| Sampler { coord: SamplerCoord::Normalized, filter, address };
    let cases = [
        (normalized(SamplerFilter::Linear, SamplerAddress::ClampToEdge), 0.0, 2.0),
        (normalized(SamplerFilter::Linear, SamplerAddress::ClampToZero), 0.0, 1.0),
        (normalized(SamplerFilter::Linear, SamplerAddress::Repeat), 0.0, 3.0),
        (normalized(SamplerFilter::Linear, SamplerAddress::MirroredRepeat), 0.0, 2.0),
        (normalized(SamplerFilter::Linear, SamplerAddress::ClampToEdge), 0.75, 4.0),
        (normalized(SamplerFilter::Linear, SamplerAddress::ClampToEdge), 0.375, 2.5),
        (normalized(SamplerFilter::Nearest, SamplerAddress::Repeat), 1.25, 2.0),
        (Sampler { coord: SamplerCoord::Pixel, filter: SamplerFilter::Linear, address: SamplerAddress::ClampToZero }, 2.25, 1.0),
    ];
    for (sampler, u, want) in cases {
        for texel in [Scalar::F32, Scalar::F16] {
            let p = rt.pipeline(&sample_at(texel, sampler, u)).unwrap();
            let out = rt.buffer_of_type(Type::vector(texel, 4), 1).unwrap();
            rt.dispatch_threads(&p, &[Arg::from(&tex), Arg::from(&out)], [1, 1, 1], [1, 1, 1]).unwrap();
            let got = match texel {
                Scalar::F32 => f32s(&out.read_bytes().unwrap()),
                _ => out.to_vec::<u16>().unwrap().into_iter().map(f16_bits_to_f32).collect(),
            };
            assert_eq!(got, [want, 0.0, 0.0, 1.0], "{sampler} at u = {u} with {texel} texels");
        }
    }
}

#[test]
fn integer_formats_cannot_be_sampled_linearly() {
    let rt = sim();
    let tex = rt.texture(TextureFormat::R32Uint, 2, 2).unwrap();
    let out = rt.buffer_of_type(Type::vector(Scalar::F32, 4), 1).unwrap();
    let linear = Sampler { coord: SamplerCoord::Normalized, filter: SamplerFilter::Linear, address: SamplerAddress::Repeat };
    let p = rt.pipeline(&sample_at(Scalar::F32, linear, 0.5)).unwrap();
    let err = rt.dispatch_threads(&p, &[Arg::from(&tex), Arg::from(&out)], [1, 1, 1], [1, 1, 1]).unwrap_err();
    assert!(matches!(err, RuntimeError::TextureNotFilterable { index: 0, .. }), "{err}");
    assert!(err.to_string().contains("kernel `sample_at`, argument 0 (`src`): the kernel samples it with a linear filter, but a 2×2 r32uint texture cannot be filtered"), "{err}");
    let nearest = Sampler { filter: SamplerFilter::Nearest, ..linear };
    let p = rt.pipeline(&sample_at(Scalar::F32, nearest, 0.5)).unwrap();
    let err = rt.dispatch_threads(&p, &[Arg::from(&tex), Arg::from(&out)], [1, 1, 1], [1, 1, 1]).unwrap_err();
    assert!(matches!(err, RuntimeError::TextureFormat { .. }), "{err}");
}

#[test]
fn dispatch_checks_the_texture_against_the_parameter() {
    let rt = sim();
    let p = rt.pipeline(&texture_fill::fill_white(true, false)).unwrap();
    let uint_tex = rt.texture(TextureFormat::R32Uint, 4, 4).unwrap();
    let err = rt.dispatch_threads(&p, &[Arg::from(&uint_tex)], [4, 4, 1], [4, 4, 1]).unwrap_err();
    assert!(matches!(err, RuntimeError::TextureFormat { texel: Scalar::F32, .. }), "{err}");
    assert!(err.to_string().contains("4×4 r32uint texture cannot be viewed as texture2d<f32>"), "{err}");
    let buf = rt.buffer_zeroed::<f32>(16).unwrap();
    let err = rt.dispatch_threads(&p, &[Arg::from(&buf)], [4, 4, 1], [4, 4, 1]).unwrap_err();
    assert!(matches!(err, RuntimeError::ArgumentKind { .. }), "{err}");
    assert!(err.to_string().contains("expected a texture2d<f32, write>, got a buffer of f32"), "{err}");
    let err = rt.texture(TextureFormat::Rgba8Unorm, 0, 4).unwrap_err();
    assert!(matches!(err, RuntimeError::TextureSize { .. }), "{err}");
    let err = rt.texture_from_bytes(TextureFormat::Rgba16Float, 2, 2, &[0; 31]).unwrap_err();
    assert!(err.to_string().contains("31 bytes of texels given, it holds 32"), "{err}");
    let err = rt.texture_from(TextureFormat::Rgba8Unorm, 2, 2, &[0f32; 16]).unwrap_err();
    assert!(err.to_string().contains("channels are 1 byte(s) each"), "{err}");
}

#[test]
fn devices_without_textures_refuse_the_pipeline() {
    let mut info = sim().device().clone();
    info.features.remove(&enigma_ir::Feature::Texture2d);
    info.name = "a GPU without textures".into();
    let kernel = texture_fill::fill_white(true, false);
    let ki = enigma_ir::validate(&kernel, &Default::default()).unwrap();
    let err = enigma_backend::check_features(&kernel, &ki, &info).unwrap_err();
    assert!(matches!(err, RuntimeError::Unsupported { feature: enigma_ir::Feature::Texture2d, .. }), "{err}");
    assert!(err.to_string().contains("uses 2D textures; device `a GPU without textures`"), "{err}");
}

/// Seed 003, Listing 4 on 1920×1080 with 32×16 threadgroups: opaque white
/// written to every texel exactly once, nothing outside, by
/// `dispatch_threadgroups` (rounded up, with the bounds check) and by
/// `dispatch_threads` (exactly the image, without it). The sanitizer's
/// coverage and out-of-bounds checks pass; a twin kernel that also counts
/// each thread's texel with an atomic shows every count is one.
#[test]
fn seed_003_listing_4_covers_1920_by_1080_exactly() {
    let rt = sim();
    let (w, h) = (1920u32, 1080u32);
    let tg = texture_fill::THREADS_PER_THREADGROUP;
    // 1080 / 16 = 67.5: the seed's rounding up gives 60×68 threadgroups.
    let threadgroups = texture_fill::threadgroups(w, h);
    for (mode, size, bounds_check) in [(DispatchMode::Threadgroups, threadgroups, true), (DispatchMode::Threads, [w, h, 1], false)] {
        let tex = rt.texture(TextureFormat::Rgba8Unorm, w, h).unwrap();
        let p = rt.pipeline(&texture_fill::fill_white(bounds_check, false)).unwrap();
        let report = rt.dispatch(&p, &[Arg::from(&tex)], mode, size, tg, &sanitize()).unwrap();
        assert!(report.findings.is_empty(), "{mode:?}: {:?}", report.findings);
        assert!(tex.read_bytes().unwrap() == texture_fill::reference_rgba8(w, h), "{mode:?}: every texel opaque white");
        let tex = rt.texture(TextureFormat::Rgba8Unorm, w, h).unwrap();
        let counts = rt.buffer_zeroed::<u32>((w * h) as usize).unwrap();
        let p = rt.pipeline(&texture_fill::fill_white(bounds_check, true)).unwrap();
        rt.dispatch(&p, &[Arg::from(&tex), Arg::from(&counts)], mode, size, tg, &Options::default()).unwrap();
        let counts = counts.to_vec::<u32>().unwrap();
        assert!(counts.iter().all(|c| *c == 1), "{mode:?}: {} texels not written exactly once", counts.iter().filter(|c| **c != 1).count());
    }
    // The two mistakes Listing 4 guards against: the rounded-up grid
    // without the bounds check writes outside; a grid too small leaves texels.
    let tex = rt.texture(TextureFormat::Rgba8Unorm, w, h).unwrap();
    let p = rt.pipeline(&texture_fill::fill_white(false, false)).unwrap();
    let err = rt.dispatch(&p, &[Arg::from(&tex)], DispatchMode::Threadgroups, threadgroups, tg, &sanitize()).unwrap_err();
    let RuntimeError::Sanitizer { findings, .. } = &err else { panic!("{err}") };
    assert_eq!(findings[0].kind, FindingKind::OutOfBounds, "{err}");
    assert_eq!(findings[0].count, (60 * 32 * 68 * 16 - w * h) as u64, "the rows past 1080, once each");
    assert!(findings[0].message.contains("(0, 1080), outside its 1920×1080 texels"), "{}", findings[0].message);
    let p = rt.pipeline(&texture_fill::fill_white(true, false)).unwrap();
    let report = rt.dispatch(&p, &[Arg::from(&tex)], DispatchMode::Threadgroups, [60, 67, 1], tg, &sanitize()).unwrap();
    let coverage = report.findings.iter().find(|f| f.kind == FindingKind::Coverage).expect("a coverage warning");
    assert!(coverage.message.starts_with("15360 of the 2073600 texels of the 1920×1080 texture were never written"), "{}", coverage.message);
    assert!(coverage.message.contains("(0, 1072) to (1919, 1079)"), "{}", coverage.message);
}
