//! `examples/resize.py`'s bilinear resize (an rgba8unorm texture sampled
//! with a linear, clamp-to-edge sampler at each output pixel's centre, one
//! thread per output pixel in 16×16 threadgroups with Listing 4's bounds
//! check) on a CUDA GPU, for `bench/texture_vs_torch.py`. Prints one JSON
//! object: per size the CUDA-event device time of the kernel's launch
//! (median of the repeats after a warm-up; the runtime's copies of the
//! textures into and out of CUDA arrays, made per dispatch, are outside the
//! timed launch and reported apart as `wall_us`), and the largest difference
//! from the f64 bilinear reference in unorm8 steps.
//!
//! Usage (on a CUDA machine; every flag is optional):
//!
//! ```text
//! texture_cuda [--sizes 1920x1080:3840x2160,3840x2160:1920x1080] [--repeats 50]
//! ```

use enigma_ir::builder::*;
use enigma_ir::{Sampler, SamplerAddress, SamplerCoord, SamplerFilter, Scalar, TextureAccess, Type};
use enigma_runtime::{Arg, DispatchMode, Options, TextureFormat};

/// The resize kernel of `examples/resize.py`.
fn resize() -> enigma_ir::Kernel {
    let mut k = KernelBuilder::new("resize");
    let src = k.texture2d("src", Scalar::F32, TextureAccess::Sample);
    let dst = k.texture2d("dst", Scalar::F32, TextureAccess::Write);
    let gid = k.let_("gid", thread_position_in_grid());
    let (w, h) = (k.let_("w", dst.get_width()), k.let_("h", dst.get_height()));
    k.if_(gid.x().ge(w).or(gid.y().ge(h)), |k| k.return_());
    let f2 = Type::vector(Scalar::F32, 2);
    let pixel = vector(f2, &[gid.x().cast(Type::F32), gid.y().cast(Type::F32)]) + 0.5f32;
    let uv = k.let_("uv", pixel / vector(f2, &[w.cast(Type::F32), h.cast(Type::F32)]));
    let linear = Sampler { coord: SamplerCoord::Normalized, filter: SamplerFilter::Linear, address: SamplerAddress::ClampToEdge };
    k.texture_write(dst, src.sample(linear, uv), vector(Type::vector(Scalar::U32, 2), &[gid.x(), gid.y()]));
    k.finish().expect("the resize kernel builds")
}

/// The f64 bilinear resize with clamped edges, then Metal's unorm8 write.
fn reference(image: &[u8], (w, h): (u32, u32), (ow, oh): (u32, u32)) -> Vec<u8> {
    let taps = |n_out: u32, n_in: u32, i: u32| {
        let c = (f64::from(i) + 0.5) / f64::from(n_out) * f64::from(n_in) - 0.5;
        let lo = c.floor();
        let clamp = |v: f64| v.clamp(0.0, f64::from(n_in - 1)) as usize;
        (clamp(lo), clamp(lo + 1.0), c - lo)
    };
    let mut out = Vec::with_capacity((ow * oh * 4) as usize);
    for y in 0..oh {
        let (y0, y1, b) = taps(oh, h, y);
        for x in 0..ow {
            let (x0, x1, a) = taps(ow, w, x);
            for c in 0..4 {
                let at = |yy: usize, xx: usize| f64::from(image[(yy * w as usize + xx) * 4 + c]) / 255.0;
                let top = (1.0 - a) * at(y0, x0) + a * at(y0, x1);
                let bottom = (1.0 - a) * at(y1, x0) + a * at(y1, x1);
                out.push((((1.0 - b) * top + b * bottom).clamp(0.0, 1.0) * 255.0).round_ties_even() as u8);
            }
        }
    }
    out
}

fn size(text: &str) -> (u32, u32) {
    let (w, h) = text.split_once('x').unwrap_or_else(|| panic!("`{text}` is not WxH"));
    (w.parse().expect("a width"), h.parse().expect("a height"))
}

const USAGE: &str = "texture_cuda [--sizes WxH:WxH,...] [--repeats N]\n  examples/resize.py's bilinear resize on a CUDA GPU, checked and timed; one JSON object (bench/texture_vs_torch.py).";

fn main() {
    enigma_bench::exit_if_help(USAGE);
    let mut sizes = vec![((1920, 1080), (3840, 2160)), ((3840, 2160), (1920, 1080)), ((1024, 768), (1000, 333))];
    let mut repeats = 50;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).unwrap_or_else(|| panic!("{} needs a value", pair[0]));
        match pair[0].as_str() {
            "--sizes" => {
                sizes = value
                    .split(',')
                    .map(|s| {
                        let (from, to) = s.split_once(':').expect("a size pair is WxH:WxH");
                        (size(from), size(to))
                    })
                    .collect()
            }
            "--repeats" => repeats = value.parse::<usize>().expect("a count").max(1),
            other => panic!("unknown flag {other} (see the header of bench/src/bin/texture_cuda.rs)"),
        }
    }
    let Some(rt) = enigma_bench::cuda_runtime_or_skip() else { return };
    let pipeline = rt.pipeline(&resize()).unwrap_or_else(|e| panic!("{e}"));
    let mut rows = vec![];
    for ((w, h), (ow, oh)) in sizes {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let image: Vec<u8> = (0..w * h * 4)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // A gradient with noise: neighbouring texels differ.
                ((i / 4 % w) * 200 / w + (state % 56) as u32) as u8
            })
            .collect();
        let src = rt.texture_from_bytes(TextureFormat::Rgba8Unorm, w, h, &image).unwrap();
        let dst = rt.texture(TextureFormat::Rgba8Unorm, ow, oh).unwrap();
        let groups = [ow.div_ceil(16), oh.div_ceil(16), 1];
        let mut device = vec![];
        let mut wall = vec![];
        for i in 0..repeats + 3 {
            let report = rt
                .dispatch(&pipeline, &[Arg::from(&src), Arg::from(&dst)], DispatchMode::Threadgroups, groups, [16, 16, 1], &Options::default())
                .unwrap_or_else(|e| panic!("{e}"));
            if i >= 3 {
                device.push(report.device_time.expect("CUDA times its launches").as_secs_f64());
                wall.push(report.wall_time.as_secs_f64());
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (t, wall_t) = (median(&mut device), median(&mut wall));
        let got: Vec<u8> = dst.to_vec().unwrap();
        let want = reference(&image, (w, h), (ow, oh));
        let max_diff = got.iter().zip(&want).map(|(g, w)| (i16::from(*g) - i16::from(*w)).unsigned_abs()).max().unwrap_or(0);
        let bytes = f64::from(w * h * 4 + ow * oh * 4);
        eprintln!("resize {w}x{h} -> {ow}x{oh}: {:.1} us, {:.0} GB/s, max |diff| {max_diff}", t * 1e6, bytes / t / 1e9);
        rows.push(serde_json::json!({
            "from": [w, h], "to": [ow, oh], "median_us": t * 1e6, "wall_us": wall_t * 1e6,
            "gbps": bytes / t / 1e9, "max_diff": max_diff,
        }));
    }
    println!("{}", serde_json::json!({ "device": rt.device().name, "rows": rows }));
}
