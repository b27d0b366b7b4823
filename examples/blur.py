"""A separable Gaussian blur of an RGBA image, on textures (seed 003's image dispatch).

Two passes over 2D textures, one thread per pixel in 16×16 threadgroups
(`dispatch_threadgroups`, rounded up, with Listing 4's bounds check): the rows
of an rgba8unorm image are blurred with the 5-tap binomial kernel
[1, 4, 6, 4, 1] / 16 into an rgba32float texture, whose columns are blurred
into an rgba8unorm result; pixels past an edge repeat the edge (clamp to
edge, done on the coordinates, so that every tap is an exact read; a
sampler does the filtering in examples/resize.py). The result is compared
with the same computation in numpy float32.

Textures run on the simulator (the default device here) and CUDA; the Metal
runtime does not create textures yet and refuses these kernels.

    python examples/blur.py [--device cpu|cuda|metal] [--width W] [--height H]
"""

import argparse
import sys

import numpy as np

import enigma

WEIGHTS = np.array([1, 4, 6, 4, 1], np.float32) / np.float32(16)


@enigma.kernel
def blur_rows(
    src:     enigma.texture2d(enigma.f32, access="read"),
    weights: enigma.f32,
    dst:     enigma.texture2d(enigma.f32, access="write"),
):
    gid = enigma.thread_position_in_grid
    w = src.get_width()
    if gid.x >= w or gid.y >= src.get_height():
        return
    acc = enigma.float4(0.0)
    for k in range(5):
        x = enigma.u32(min(max(enigma.i32(gid.x) + k - 2, 0), enigma.i32(w) - 1))
        acc = acc + weights[k] * src.read((x, gid.y))
    dst.write(acc, (gid.x, gid.y))


@enigma.kernel
def blur_cols(
    src:     enigma.texture2d(enigma.f32, access="read"),
    weights: enigma.f32,
    dst:     enigma.texture2d(enigma.f32, access="write"),
):
    gid = enigma.thread_position_in_grid
    h = src.get_height()
    if gid.x >= src.get_width() or gid.y >= h:
        return
    acc = enigma.float4(0.0)
    for k in range(5):
        y = enigma.u32(min(max(enigma.i32(gid.y) + k - 2, 0), enigma.i32(h) - 1))
        acc = acc + weights[k] * src.read((gid.x, y))
    dst.write(acc, (gid.x, gid.y))


def reference(image):
    """The same blur in numpy float32, tap by tap in the kernels' order, then
    Metal's unorm8 write (clamp to [0, 1], nearest of c·255, ties to even)."""
    f = image.astype(np.float32) / np.float32(255)
    h, w = f.shape[:2]
    rows = np.zeros_like(f)
    for k in range(5):
        xs = np.clip(np.arange(w) + k - 2, 0, w - 1)
        rows = rows + WEIGHTS[k] * f[:, xs]
    cols = np.zeros_like(rows)
    for k in range(5):
        ys = np.clip(np.arange(h) + k - 2, 0, h - 1)
        cols = cols + WEIGHTS[k] * rows[ys, :]
    return np.rint(np.clip(cols, 0, 1) * np.float32(255)).astype(np.uint8)


def test_image(height, width):
    """A gradient with a disc and noise: edges to blur, every channel different."""
    y, x = np.mgrid[0:height, 0:width]
    disc = ((x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 3) ** 2) * 200
    noise = np.random.default_rng(20).integers(0, 40, size=(height, width, 4))
    img = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), disc, np.full_like(x, 255)], axis=-1)
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu (default: textures run on the simulator), cuda or metal")
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    args = ap.parse_args(argv)
    if args.width <= 0 or args.height <= 0:
        ap.error("--width and --height must be positive")

    rt = enigma.MetalRuntime(device=args.device)
    image = test_image(args.height, args.width)
    src = rt.texture(image, format="rgba8unorm")
    middle = rt.texture((args.height, args.width), format="rgba32float")
    out = rt.texture((args.height, args.width), format="rgba8unorm")
    tg = (16, 16, 1)
    groups = ((args.width + 15) // 16, (args.height + 15) // 16, 1)
    rt.execute(enigma.compile(blur_rows), inputs=[src, WEIGHTS, middle], threadgroups=groups, threads=tg)
    rt.execute(enigma.compile(blur_cols), inputs=[middle, WEIGHTS, out], threadgroups=groups, threads=tg)

    got = out.numpy()
    want = reference(image)
    diff = int(np.abs(got.astype(np.int16) - want.astype(np.int16)).max())
    print(f"device: {rt.device} ({rt.device_name})")
    print(f"blurred a {args.width}x{args.height} rgba8unorm image in two passes; max |diff| vs numpy: {diff}")
    # The simulator does numpy's float32 operations in numpy's order: exact.
    # A GPU may fuse multiply-adds: one unorm step.
    tol = 0 if rt.device == "sim" else 1
    if diff <= tol:
        print(f"matches numpy (max |diff| <= {tol})")
        return 0
    print(f"MISMATCH: max |diff| > {tol}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
