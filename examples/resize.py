"""A bilinear resize of an RGBA image with a texture sampler (seed 003's image dispatch).

One thread per output pixel in 16×16 threadgroups (`dispatch_threadgroups`,
rounded up, with Listing 4's bounds check) samples the rgba8unorm source at
the output pixel's centre in normalised coordinates, ((x + 0.5)/W, (y + 0.5)/H),
through `enigma.sampler(filter="linear", address="clamp_to_edge")`: the
hardware's (or the simulator's) bilinear filter does the interpolation, with
texel centres at (i + 0.5)/w as Metal specifies. The result is compared with
the same interpolation in numpy float64.

Textures run on the simulator (the default device here) and CUDA; the Metal
runtime does not create textures yet and refuses the kernel.

    python examples/resize.py [--device cpu|cuda|metal] [--width W] [--height H] [--out-width W] [--out-height H]
"""

import argparse
import sys

import numpy as np

import enigma

LINEAR = enigma.sampler(filter="linear", address="clamp_to_edge", coord="normalized")


@enigma.kernel
def resize(
    src: enigma.texture2d(enigma.f32, access="sample"),
    dst: enigma.texture2d(enigma.f32, access="write"),
):
    gid = enigma.thread_position_in_grid
    w = dst.get_width()
    h = dst.get_height()
    if gid.x >= w or gid.y >= h:
        return
    uv = (enigma.float2(float(gid.x), float(gid.y)) + 0.5) / enigma.float2(float(w), float(h))
    dst.write(src.sample(LINEAR, uv), (gid.x, gid.y))


def reference(image, out_h, out_w):
    """Bilinear interpolation at the output pixels' centres in float64, edges
    clamped, then Metal's unorm8 write (clamp, nearest of c·255, ties to even)."""
    f = image.astype(np.float64) / 255.0
    h, w = f.shape[:2]

    def taps(n_out, n_in):
        c = (np.arange(n_out) + 0.5) / n_out * n_in - 0.5
        lo = np.floor(c)
        a = c - lo
        lo = lo.astype(np.int64)
        return np.clip(lo, 0, n_in - 1), np.clip(lo + 1, 0, n_in - 1), a

    x0, x1, a = taps(out_w, w)
    y0, y1, b = taps(out_h, h)
    a, b = a[None, :, None], b[:, None, None]
    top = (1 - a) * f[y0][:, x0] + a * f[y0][:, x1]
    bottom = (1 - a) * f[y1][:, x0] + a * f[y1][:, x1]
    out = (1 - b) * top + b * bottom
    return np.rint(np.clip(out, 0, 1) * 255).astype(np.uint8)


def test_image(height, width):
    """A gradient with a disc and noise: every channel different."""
    y, x = np.mgrid[0:height, 0:width]
    disc = ((x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 3) ** 2) * 200
    noise = np.random.default_rng(3).integers(0, 40, size=(height, width, 4))
    img = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), disc, np.full_like(x, 255)], axis=-1)
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu (default: the simulator), cuda or metal")
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--out-width", type=int, default=1000)
    ap.add_argument("--out-height", type=int, default=333)
    args = ap.parse_args(argv)
    if min(args.width, args.height, args.out_width, args.out_height) <= 0:
        ap.error("every size must be positive")

    rt = enigma.MetalRuntime(device=args.device)
    image = test_image(args.height, args.width)
    src = rt.texture(image, format="rgba8unorm")
    out = rt.texture((args.out_height, args.out_width), format="rgba8unorm")
    groups = ((args.out_width + 15) // 16, (args.out_height + 15) // 16, 1)
    rt.execute(enigma.compile(resize), inputs=[src, out], threadgroups=groups, threads=(16, 16, 1))

    got = out.numpy()
    want = reference(image, args.out_height, args.out_width)
    diff = int(np.abs(got.astype(np.int16) - want.astype(np.int16)).max())
    print(f"device: {rt.device} ({rt.device_name})")
    print(f"resized a {args.width}x{args.height} rgba8unorm image to {args.out_width}x{args.out_height}; max |diff| vs numpy: {diff}")
    # The simulator filters in f32: a value within rounding of a unorm step's
    # midpoint may round to the neighbour (1). NVIDIA's 8-bit filter weights
    # move a value by up to 1/256 of the texels' range: one more step (2).
    tol = 1 if rt.device == "sim" else 2
    if diff <= tol:
        print(f"matches numpy (max |diff| <= {tol})")
        return 0
    print(f"MISMATCH: max |diff| > {tol}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
