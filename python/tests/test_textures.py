"""Textures in the Python DSL (issue 20): ``enigma.texture2d``
parameters, ``read`` / ``write`` / ``get_width`` / ``get_height``,
``sample`` with ``enigma.sampler`` (every filter × address mode against a
numpy reference),
``rt.texture(array, format=...)`` and ``tex.numpy()``, checked against numpy
references of Metal's conversions on the simulator, seed 003's Listing 4,
and the errors. Textures run on the simulator, CUDA and Metal (whose
texture runtime is type-checked, not run on a Mac); the last test checks
that a GPU runtime runs a texture kernel."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import enigma

REPO = Path(__file__).resolve().parents[2]


@enigma.kernel
def listing4(outputTexture: enigma.texture2d(enigma.f32, access="write")):
    """Seed 003, Listing 4: opaque white, returning outside the texture."""
    gid = enigma.thread_position_in_grid
    if gid.x >= outputTexture.get_width() or gid.y >= outputTexture.get_height():
        return
    outputTexture.write(1.0, (gid.x, gid.y))


@enigma.kernel
def invert(src: enigma.texture2d(enigma.f32, access="read"), dst: enigma.texture2d(enigma.f32, access="write")):
    gid = enigma.thread_position_in_grid
    c = enigma.uint2(gid.x, gid.y)
    dst.write(1.0 - src.read(c), c)


@enigma.kernel
def to_buffer(src: enigma.texture2d(enigma.f32, access="sample"), out: enigma.float4):
    gid = enigma.thread_position_in_grid
    out[gid.y * src.get_width() + gid.x] = src.read((gid.x, gid.y))


@enigma.kernel
def label(ids: enigma.texture2d(enigma.u32, access="read_write")):
    gid = enigma.thread_position_in_grid
    c = enigma.uint2(gid.x, gid.y)
    ids.write(ids.read(c).x * 2 + 1, c)


def unorm8(x):
    """Metal's float → unorm8: clamp to [0, 1] (NaN to 0), nearest of c·255, ties to even."""
    x = np.nan_to_num(np.asarray(x, np.float32), nan=0.0)
    return np.rint(np.clip(x, 0.0, 1.0) * np.float32(255.0)).astype(np.uint8)


def test_listing_4_covers_1920_by_1080_both_ways(sim):
    k = enigma.compile(listing4)
    assert "texture2d<float, access::write> outputTexture [[texture(0)]]" in k.msl
    for kwargs in ({"threadgroups": (60, 68, 1)}, {"grid": (1920, 1080, 1)}):
        tex = sim.texture((1080, 1920), format="rgba8unorm")
        assert sim.execute(k, inputs=[tex], threads=(32, 16, 1), sanitize=True, **kwargs) is None
        assert sim.last_report["findings"] == []
        assert tex.shape == (1080, 1920, 4)
        assert (tex.numpy() == 255).all()


def test_unorm8_reads_and_writes_as_metal_specifies(sim):
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, size=(5, 7, 4), dtype=np.uint8)
    src = sim.texture(img, format="rgba8unorm")
    dst = sim.texture((5, 7), format="rgba8unorm")
    enigma.compile(invert)(src, dst, grid=(7, 5), threads=(8, 8))
    np.testing.assert_array_equal(dst.numpy(), 255 - img)
    out = np.zeros((5 * 7, 4), np.float32)
    enigma.compile(to_buffer)(src, out, grid=(7, 5), threads=(4, 4))
    np.testing.assert_array_equal(out.reshape(5, 7, 4), img.astype(np.float32) / np.float32(255.0))


def test_float_formats_round_trip_and_r_formats_read_0_0_1(sim):
    vals = np.array([[0.1, -2.5, 65504.0], [1e-8, 3.0, np.inf]], np.float32)
    for fmt, dtype in (("r32float", np.float32), ("r16float", np.float16)):
        tex = sim.texture(vals.astype(dtype), format=fmt)
        out = np.zeros((6, 4), np.float32)
        enigma.compile(to_buffer)(tex, out, grid=(3, 2), threads=(4, 4))
        want = np.zeros((6, 4), np.float32)
        want[:, 0] = vals.astype(dtype).astype(np.float32).ravel()
        want[:, 3] = 1.0
        np.testing.assert_array_equal(out, want)
    # Writes to r8unorm clamp and round to nearest even.
    src = sim.texture(np.array([[0.5, 1.5 / 255, -1.0, 2.0, 0.25, np.nan]], np.float32), format="r32float")
    dst = sim.texture((1, 6), format="r8unorm")
    enigma.compile(invert)(src, dst, grid=(6, 1), threads=(8, 1))
    np.testing.assert_array_equal(dst.numpy(), unorm8(1.0 - src.numpy()))


def test_read_write_integer_textures(sim):
    ids = np.arange(12, dtype=np.uint32).reshape(3, 4)
    tex = sim.texture(ids, format="r32uint")
    enigma.compile(label)(tex, grid=(4, 3), threads=(4, 4))
    np.testing.assert_array_equal(tex.numpy(), ids * 2 + 1)


def test_only_a_mem_texture_barrier_orders_texels(sim):
    def swap(flags):
        @enigma.kernel
        def k(img: enigma.texture2d(enigma.u32, access="read_write"), out: enigma.u32):
            i = enigma.thread_position_in_grid.x
            img.write(i * 10, (i, 0))
            enigma.barrier(mem_flags=flags)
            out[i] = img.read((63 - i, 0)).x

        return enigma.compile(k)

    want = (63 - np.arange(64, dtype=np.uint32)) * 10
    fixed = swap("mem_texture")
    assert "threadgroup_barrier(mem_flags::mem_texture)" in fixed.msl
    out = sim.execute(fixed, inputs=[sim.texture((1, 64), format="r32uint")], output_size=256, grid=64, threads=64, sanitize=True)
    np.testing.assert_array_equal(np.frombuffer(out, np.uint32), want)
    with pytest.raises(enigma.SanitizerError, match="texel of texture `img`"):
        sim.execute(swap("mem_device"), inputs=[sim.texture((1, 64), format="r32uint")], output_size=256, grid=64, threads=64, sanitize=True)


def test_a_read_after_a_write_needs_a_fence(sim):
    def bump(fence):
        @enigma.kernel
        def k(img: enigma.texture2d(enigma.u32, access="read_write"), out: enigma.u32):
            i = enigma.thread_position_in_grid.x
            img.write(img.read((i, 0)).x + 1, (i, 0))
            if fence:
                img.fence()
            out[i] = img.read((i, 0)).x

        return enigma.compile(k)

    fenced = bump(True)
    assert "img.fence();" in fenced.msl
    start = np.arange(16, dtype=np.uint32).reshape(1, 16)
    tex = sim.texture(start, format="r32uint")
    out = sim.execute(fenced, inputs=[tex], output_size=64, grid=16, threads=16, sanitize=True)
    np.testing.assert_array_equal(np.frombuffer(out, np.uint32), start.ravel() + 1)
    with pytest.raises(enigma.SanitizerError, match=r"reads texel \(0, 0\) of read_write texture `img` .* with no fence\(\) between"):
        sim.execute(bump(False), inputs=[sim.texture(start, format="r32uint")], output_size=64, grid=16, threads=16, sanitize=True)

    @enigma.kernel
    def fence_read(img: enigma.texture2d(enigma.f32, access="read")):
        img.fence()

    with pytest.raises(enigma.CompileError, match=r"declared access::read; it cannot be fenced"):
        enigma.compile(fence_read)


def test_a_write_outside_the_texture_is_reported(sim):
    @enigma.kernel
    def unchecked(out: enigma.texture2d(enigma.f32, access="write")):
        gid = enigma.thread_position_in_grid
        out.write(1.0, (gid.x, gid.y))

    tex = sim.texture((6, 10), format="r32float")
    with pytest.raises(enigma.DispatchError, match=r"out-of-bounds write of texture `out` at \(\d+, \d+\): it is 10×6 texels"):
        sim.execute(enigma.compile(unchecked), inputs=[tex], threadgroups=(2, 1, 1), threads=(8, 8, 1))
    with pytest.raises(enigma.SanitizerError, match=r"outside its 10×6 texels"):
        sim.execute(enigma.compile(unchecked), inputs=[tex], threadgroups=(2, 1, 1), threads=(8, 8, 1), sanitize=True)


def test_texture_errors():
    with pytest.raises(ValueError, match="texels are enigma.f32, f16, i32 or u32"):
        enigma.texture2d(enigma.u8)
    with pytest.raises(ValueError, match="access must be"):
        enigma.texture2d(enigma.f32, access="readonly")

    @enigma.kernel
    def writes_read_only(t: enigma.texture2d(enigma.f32, access="read")):
        t.write(1.0, (0, 0))

    with pytest.raises(enigma.CompileError, match=r"declared access::read; it cannot be written"):
        enigma.compile(writes_read_only)

    @enigma.kernel
    def bad_coord(t: enigma.texture2d(enigma.f32, access="read"), out: enigma.float4):
        out[0] = t.read(enigma.thread_position_in_grid)

    with pytest.raises(enigma.CompileError, match="is a uint2 or a pair"):
        enigma.compile(bad_coord)

    @enigma.kernel
    def assigns(t: enigma.texture2d(enigma.f32, access="write")):
        t = 3

    with pytest.raises(enigma.CompileError, match=r"`t` is a texture; write a texel with `t.write\(value, coord\)`"):
        enigma.compile(assigns)

    @enigma.kernel
    def wrong_texels(t: enigma.texture2d(enigma.f32, access="write")):
        t.write(enigma.int4(1), (0, 0))

    with pytest.raises(enigma.CompileError, match=r"`t.write` takes four texels \(f32x4, or one f32 to splat\), not i32x4"):
        enigma.compile(wrong_texels)

    @enigma.kernel
    def width_of(t: enigma.texture2d(enigma.f32, access="read"), out: enigma.u32):
        out[0] = t.get_width(0)

    with pytest.raises(enigma.CompileError, match=r"t.get_width takes at most 0 argument"):
        enigma.compile(width_of)

    @enigma.kernel
    def sample(t: enigma.texture2d(enigma.f32, access="sample"), out: enigma.float4):
        out[0] = t.sample(0, 0)

    with pytest.raises(enigma.CompileError, match=r"the first argument of `t.sample` is an enigma.sampler\(...\), not the constant 0"):
        enigma.compile(sample)


def test_texture_creation_and_binding_errors(sim):
    with pytest.raises(enigma.DispatchError, match="unknown texture format 'bgra8unorm'"):
        sim.texture((2, 2), format="bgra8unorm")
    with pytest.raises(enigma.DispatchError, match=r"holds uint8 channels; got float32 data"):
        sim.texture(np.zeros((2, 2, 4), np.float32), format="rgba8unorm")
    with pytest.raises(enigma.DispatchError, match=r"shaped \(height, width, 4\)"):
        sim.texture(np.zeros((2, 2), np.uint8), format="rgba8unorm")
    k = enigma.compile(listing4)
    with pytest.raises(enigma.DispatchError, match="needs a texture in inputs= or outputs="):
        sim.execute(k, inputs=[], output_size=16, grid=(2, 2, 1))
    with pytest.raises(enigma.DispatchError, match="expected an enigma texture"):
        sim.execute(k, inputs=[np.zeros(4, np.float32)], grid=(2, 2, 1))
    uint_tex = sim.texture((2, 2), format="r32uint")
    with pytest.raises(enigma.DispatchError, match="cannot be viewed as texture2d<f32>"):
        sim.execute(k, inputs=[uint_tex], grid=(2, 2, 1))


SAMPLERS = [
    (coord, filt, address)
    for coord in ("normalized", "pixel")
    for filt in ("nearest", "linear")
    for address in ("clamp_to_edge", "clamp_to_zero", "repeat", "mirrored_repeat")
    if not (coord == "pixel" and address in ("repeat", "mirrored_repeat"))
]


def sample_reference(img, border, coord, filt, address, uv):
    """Metal's sampling in float64 numpy: ``img`` H×W×4 as read, ``uv`` N×2."""
    h, w = img.shape[:2]
    u, v = uv[:, 0].astype(np.float64), uv[:, 1].astype(np.float64)
    if coord == "normalized":
        u, v = u * w, v * h

    def taps(c):
        if filt == "nearest":
            return [(np.floor(c).astype(np.int64), np.ones_like(c))]
        lo = np.floor(c - 0.5)
        a = c - 0.5 - lo
        return [(lo.astype(np.int64), 1.0 - a), (lo.astype(np.int64) + 1, a)]

    def fold(i, n):
        inside = (i >= 0) & (i < n)
        if address == "repeat":
            return np.mod(i, n), np.ones_like(inside)
        if address == "mirrored_repeat":
            p = np.mod(i, 2 * n)
            return np.minimum(p, 2 * n - 1 - p), np.ones_like(inside)
        return np.clip(i, 0, n - 1), inside if address == "clamp_to_zero" else np.ones_like(inside)

    out = np.zeros((len(uv), 4))
    for xi, wx in taps(u):
        for yi, wy in taps(v):
            (fx, okx), (fy, oky) = fold(xi, w), fold(yi, h)
            t = np.where((okx & oky)[:, None], img[fy, fx], border)
            out += (wx * wy)[:, None] * t
    return out


def sampling_kernel(s):
    @enigma.kernel
    def sample_points(src: enigma.texture2d(enigma.f32, access="sample"), uv: enigma.float2, out: enigma.float4):
        i = enigma.thread_position_in_grid.x
        out[i] = src.sample(s, uv[i])

    return enigma.compile(sample_points)


@pytest.mark.parametrize("coord,filt,address", SAMPLERS)
def test_sampling_matches_numpy(rt, coord, filt, address):
    """On the simulator within f32 rounding; on CUDA linear filtering is
    within 2/256 of the texels' range (NVIDIA's 8-bit weights, up to 1/256 per axis)."""
    rng = np.random.default_rng(20)
    h, w, n = 4, 5, 128
    cases = [
        ("rgba8unorm", rng.integers(0, 256, size=(h, w, 4), dtype=np.uint8), [0.0, 0.0, 0.0, 0.0]),
        ("r32float", rng.uniform(-1, 1, size=(h, w)).astype(np.float32), [0.0, 0.0, 0.0, 1.0]),
    ]
    pts = rng.uniform(-2.5, [w + 2.5, h + 2.5], size=(4 * n, 2)).astype(np.float32)
    if filt == "nearest":  # not within 1/50 texel of a texel edge, where f32 rounding may pick either side
        pts = pts[(np.abs(pts - np.round(pts)) >= 0.02).all(axis=1)]
    pts = pts[:n]
    uv = pts / np.array([w, h], np.float32) if coord == "normalized" else pts
    k = sampling_kernel(enigma.sampler(filter=filt, address=address, coord=coord))
    assert f"constexpr sampler enigma_sampler0(coord::{coord}, filter::{filt}, address::{address});" in k.msl
    for fmt, texels, border in cases:
        read = texels.astype(np.float64) / 255.0 if fmt == "rgba8unorm" else np.stack([texels, 0 * texels, 0 * texels, 1 + 0 * texels], -1)
        out = np.zeros((n, 4), np.float32)
        k(rt.texture(texels, format=fmt), uv, out, grid=(n,), threads=(32,))
        want = sample_reference(read, np.array(border), coord, filt, address, uv)
        atol = 4e-6 + (2.0 / 256 if rt.device != "sim" and filt == "linear" else 0.0)
        np.testing.assert_allclose(out, want, rtol=0, atol=atol, err_msg=f"{fmt} with {coord}, {filt}, {address}")


def test_sampling_in_the_call_and_its_errors(sim):
    @enigma.kernel
    def centre(src: enigma.texture2d(enigma.f16, access="sample"), out: enigma.half4):
        gid = enigma.thread_position_in_grid
        uv = enigma.float2(float(gid.x) + 0.5, float(gid.y) + 0.5) / enigma.float2(float(src.get_width()), float(src.get_height()))
        out[gid.y * src.get_width() + gid.x] = src.sample(enigma.sampler(filter="linear", address="clamp_to_edge", coord="normalized"), uv)

    img = np.arange(12, dtype=np.float16).reshape(3, 4)
    out = np.zeros((12, 4), np.float16)
    enigma.compile(centre)(sim.texture(img, format="r16float"), out, grid=(4, 3), threads=(4, 4))
    np.testing.assert_array_equal(out[:, 0], img.ravel())  # a texel's centre samples the texel itself

    with pytest.raises(ValueError, match="needs coord=\"normalized\""):
        enigma.sampler(address="repeat", coord="pixel")
    with pytest.raises(ValueError, match="filter must be one of 'nearest', 'linear', not 'bilinear'"):
        enigma.sampler(filter="bilinear")

    def compile_error(body):
        with pytest.raises(enigma.CompileError) as e:
            enigma.compile(body)
        return str(e.value)

    @enigma.kernel
    def read_access(src: enigma.texture2d(enigma.f32, access="read"), out: enigma.float4):
        out[0] = src.sample(enigma.sampler(), (0.5, 0.5))

    assert "declared access::read; it cannot be sampled (declare it sample)" in compile_error(read_access)

    @enigma.kernel
    def integer(src: enigma.texture2d(enigma.u32, access="sample"), out: enigma.uint4):
        out[0] = src.sample(enigma.sampler(), (0.5, 0.5))

    assert "only f32 and f16 textures can be sampled" in compile_error(integer)

    @enigma.kernel
    def bad_sampler(src: enigma.texture2d(enigma.f32, access="sample"), out: enigma.float4):
        out[0] = src.sample(enigma.sampler(filter="cubic"), (0.5, 0.5))

    assert "filter must be one of" in compile_error(bad_sampler)

    @enigma.kernel
    def not_a_sampler(src: enigma.texture2d(enigma.f32, access="sample"), out: enigma.float4):
        out[0] = src.sample(3, (0.5, 0.5))

    assert "is an enigma.sampler(...), not the constant 3" in compile_error(not_a_sampler)


def test_blur_example_matches_numpy(capsys):
    """examples/blur.py: a separable Gaussian blur over textures, exact against numpy on the simulator."""
    spec = importlib.util.spec_from_file_location("blur_example", REPO / "examples" / "blur.py")
    blur = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blur)
    assert blur.main(["--width", "67", "--height", "45"]) == 0
    out = capsys.readouterr().out
    assert "max |diff| vs numpy: 0" in out and "matches numpy" in out, out
    image = blur.test_image(45, 67)
    assert (blur.reference(image) != image).mean() > 0.5, "the blur changes most pixels"


def test_resize_example_matches_numpy(capsys):
    """examples/resize.py: a bilinear resize through a linear sampler, within one unorm step of numpy on the simulator."""
    spec = importlib.util.spec_from_file_location("resize_example", REPO / "examples" / "resize.py")
    resize = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(resize)
    for size in (["--width", "37", "--height", "23", "--out-width", "80", "--out-height", "15"], ["--width", "64", "--height", "48", "--out-width", "20", "--out-height", "30"]):
        assert resize.main(size) == 0
        out = capsys.readouterr().out
        assert "matches numpy" in out, out
    assert (resize.reference(resize.test_image(4, 4), 8, 8)[::2, ::2] != resize.test_image(4, 4)).any(), "upsampling blends"


def test_gpu_runtimes_run_texture_kernels(rt, sim):
    """CUDA runs texture kernels (CUDA arrays with surface and texture
    objects) and so does Metal (an MTLTexture per dispatch; type-checked,
    not run on a Mac)."""
    if rt.device == sim.device:
        pytest.skip("the tests run on the simulator, which has textures")
    ids = np.arange(16, dtype=np.uint32).reshape(4, 4)
    tex = rt.texture(ids, format="r32uint")
    enigma.compile(label)(tex, grid=(4, 4), threads=(4, 4))
    np.testing.assert_array_equal(tex.numpy(), ids * 2 + 1)
