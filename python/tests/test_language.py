"""The kernel language as kernel authors write it: per-thread arrays
(``enigma.thread_array``), loops unrolled at compile time
(``enigma.static_range``), and comparisons of signed with unsigned integers
refused with the fix named.

A register-tiled SGEMM (each thread a 4×4 tile of outputs in a per-thread
array, its loops unrolled) matches numpy and runs clean under the
sanitizer; per-thread arrays of vectors and with a 2-D shape hold each
thread's own values; a read of an element the thread did not write is a
sanitizer finding naming the array; a list literal, a static_range over a
bound known only at run time and ``iy < H`` with ``iy: i32``, ``H: u32`` are
CompileErrors that say what to write instead.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import enigma

TM = 4  # outputs per thread along each side
TILE = 16  # outputs per threadgroup along each side (4×4 threads)


@pytest.fixture
def clean():
    """A sanitizing simulator runtime; after a test, its last report has no findings."""
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    yield rt
    assert rt.last_report is not None and rt.last_report.get("findings") == [], rt.last_report


@enigma.kernel
def sgemm_register_tiled(
    A: enigma.buffer(enigma.f32, shape=("M", "K")),
    B: enigma.buffer(enigma.f32, shape=("K", "N")),
    C: enigma.buffer(enigma.f32, shape=("M", "N")),
    M: enigma.constant(enigma.u32),
    N: enigma.constant(enigma.u32),
    K: enigma.constant(enigma.u32),
):
    acc = enigma.thread_array(enigma.f32, (TM, TM))
    a = enigma.thread_array(enigma.f32, TM)
    b = enigma.thread_array(enigma.f32, TM)
    row0 = (enigma.threadgroup_position_in_grid.y * 4 + enigma.thread_position_in_threadgroup.y) * TM
    col0 = (enigma.threadgroup_position_in_grid.x * 4 + enigma.thread_position_in_threadgroup.x) * TM
    for i in enigma.static_range(TM):
        for j in enigma.static_range(TM):
            acc[i, j] = 0.0
    for k in range(K):
        for i in enigma.static_range(TM):
            a[i] = A[row0 + i, k] if row0 + i < M else 0.0
            b[i] = B[k, col0 + i] if col0 + i < N else 0.0
        for i in enigma.static_range(TM):
            for j in enigma.static_range(TM):
                acc[i, j] = enigma.fma(a[i], b[j], acc[i, j])
    for i in enigma.static_range(TM):
        for j in enigma.static_range(TM):
            if row0 + i < M and col0 + j < N:
                C[row0 + i, col0 + j] = acc[i, j]


def test_a_register_tiled_sgemm_matches_numpy(clean):
    M, N, K = 37, 29, 23
    rng = np.random.default_rng(7)
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = np.zeros((M, N), np.float32)
    c = enigma.compile(sgemm_register_tiled)
    c(A, B, C, M, N, K, threadgroups=(-(-N // TILE), -(-M // TILE)), threads=(4, 4), rt=clean)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
    msl = c.msl
    assert "thread float acc[16];" in msl and "#pragma unroll" in msl, msl


@enigma.kernel
def per_thread_vectors(x: enigma.f32, out: enigma.float4, n: enigma.constant(enigma.u32)):
    g = enigma.thread_position_in_grid.x
    quads = enigma.thread_array(enigma.float4, 2)
    grid = enigma.thread_array(enigma.i32, (3, 4))
    for j in enigma.static_range(2):
        quads[j] = enigma.float4(x[g] * (j + 1))
    for r in enigma.static_range(3):
        for c in enigma.static_range(4):
            grid[r, c] = enigma.i32(g) * r - c
    if g < n:
        out[g] = quads[g % 2] + enigma.f32(grid[g % 3, g % 4])


def test_per_thread_arrays_of_vectors_and_of_two_dimensions(clean):
    n = 70
    x = np.arange(n, dtype=np.float32) * 0.5
    out = np.zeros((n, 4), np.float32)
    enigma.compile(per_thread_vectors)(x, out, n, grid=(n,), threads=(32,), rt=clean)
    g = np.arange(n)
    want = x * (g % 2 + 1) + (g * (g % 3) - g % 4)
    np.testing.assert_array_equal(out, np.repeat(want[:, None], 4, axis=1).astype(np.float32))


@enigma.kernel
def reads_an_unwritten_element(out: enigma.u32):
    g = enigma.thread_position_in_grid.x
    acc = enigma.thread_array(enigma.u32, 4)
    for i in enigma.static_range(3):
        acc[i] = g + i
    out[g] = acc[3]


def test_reading_an_unwritten_element_is_a_finding():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    out = np.zeros(32, np.uint32)
    with pytest.raises(enigma.SanitizerError) as e:
        enigma.compile(reads_an_unwritten_element)(out, grid=(32,), threads=(32,), rt=rt)
    report = e.value.reports[0]
    assert str(report["kind"]) == "uninitialized_read" and report["variable"] == "acc", report
    assert "before this thread wrote the element" in str(e.value)


@enigma.kernel
def a_list(out: enigma.f32):
    acc = [0.0, 0.0]
    out[0] = acc[0]


def test_a_list_names_thread_array():
    with pytest.raises(enigma.CompileError, match=r"a list is not supported in a kernel; .*enigma\.thread_array\(enigma\.f32, 8\)"):
        enigma.compile(a_list)


@enigma.kernel
def unrolled_to_a_runtime_bound(out: enigma.u32, n: enigma.constant(enigma.u32)):
    for i in enigma.static_range(n):
        out[i] = i


def test_static_range_needs_constant_bounds():
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(unrolled_to_a_runtime_bound)
    message = str(e.value)
    assert "unrolled at compile time (static_range)" in message and "its end must be a constant" in message, message
    assert "test_language.py" in message, message


@enigma.kernel
def signed_against_unsigned(out: enigma.u32, H: enigma.constant(enigma.u32)):
    iy = enigma.i32(enigma.thread_position_in_grid.y) - 1
    if iy < H:
        out[0] = 1


def test_a_signed_unsigned_comparison_names_the_fix():
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(signed_against_unsigned)
    message = str(e.value)
    assert "compares i32 with u32, one signed and one unsigned" in message, message
    assert "enigma.i32(n)" in message and "enigma.u32(i)" in message, message


@enigma.kernel
def clamp_to_infinities(x: enigma.f32, out: enigma.f32):
    g = enigma.thread_position_in_grid.x
    v = x[g]
    if v > 100.0:
        v = math.inf
    if v < -100.0:
        v = -enigma.inf
    if v == 0.0:
        v = float("nan")
    if v == 1.0:
        v = float("-inf")
    out[g] = v


def test_infinity_and_nan_literals(clean):
    x = np.array([1e3, -1e3, 0.0, 1.0, 2.5], np.float32)
    out = np.zeros_like(x)
    enigma.compile(clamp_to_infinities)(x, out, grid=(5,), threads=(5,), rt=clean)
    np.testing.assert_array_equal(out, np.array([np.inf, -np.inf, np.nan, -np.inf, 2.5], np.float32))
    assert enigma.inf == float("inf") and enigma.nan != enigma.nan


@enigma.kernel
def float_of_a_word(out: enigma.f32):
    out[0] = float("pi")


def test_float_of_another_string_is_refused():
    with pytest.raises(enigma.CompileError, match=r"only the strings \"inf\", \"-inf\" and \"nan\""):
        enigma.compile(float_of_a_word)


# ---------------------------------------------------------------------------
# SIMD-group matrices in MSL's spelling: seed 002's fragment loop (§3.2, §7.2)
# ---------------------------------------------------------------------------

KT = 32  # the K depth of the tile


@enigma.kernel
def fragments_msl(A: enigma.f16, B: enigma.f16, C: enigma.f32):
    """4 SIMD groups, each a 32×32 quarter of a 64×64 output tile in 8×8
    fragments, A (64×KT) and B (KT×64) read at their fragments' origins
    with out-parameter loads, as a Metal GEMM writes it."""
    sg = enigma.simdgroup_index_in_threadgroup()
    sg_row = sg // 2 * 32
    sg_col = sg % 2 * 32
    for m in enigma.static_range(4):
        for n in enigma.static_range(4):
            acc = enigma.simdgroup_matrix(enigma.f32, 8, 8)
            a = enigma.simdgroup_matrix(enigma.f16, 8, 8)
            b = enigma.simdgroup_matrix(enigma.f16, 8, 8)
            acc = enigma.make_filled_simdgroup_matrix(enigma.simdgroup_float8x8, 0.0)
            for k in range(0, KT, 8):
                enigma.simdgroup_load(a, A, KT, (k, sg_row + m * 8))
                enigma.simdgroup_load(b, B, 64, (sg_col + n * 8, k))
                enigma.simdgroup_multiply_accumulate(acc, a, b, acc)
            enigma.simdgroup_store(acc, C, 64, (sg_col + n * 8, sg_row + m * 8))


@enigma.kernel
def transposed_msl(A: enigma.f32, B: enigma.f32, C: enigma.f32):
    """``simdgroup_multiply(d, a, b)`` with B loaded transposed, stored at an origin."""
    a = enigma.simdgroup_matrix(enigma.f32, 8, 8)
    b = enigma.simdgroup_matrix(enigma.f32, 8, 8)
    d = enigma.simdgroup_matrix(enigma.f32, 8, 8)
    enigma.simdgroup_load(a, A)
    enigma.simdgroup_load(b, B, 8, (0, 0), True)
    enigma.simdgroup_multiply(d, a, b)
    enigma.simdgroup_store(d, C, 16, matrix_origin=(8, 0))


def test_seed_002_fragment_loop_in_msl_spelling_matches_numpy(clean):
    rng = np.random.default_rng(3)
    a = (rng.integers(-8, 9, size=(64, KT)) / 2).astype(np.float16)
    b = (rng.integers(-8, 9, size=(KT, 64)) / 2).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    enigma.compile(fragments_msl)(a, b, c, grid=(128,), threads=(128,), rt=clean)
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))


def test_msl_multiply_transposed_load_and_store_origin():
    rng = np.random.default_rng(4)
    a = (rng.integers(-8, 9, size=(8, 8)) / 2).astype(np.float32)
    b = (rng.integers(-8, 9, size=(8, 8)) / 2).astype(np.float32)
    c = np.full((8, 16), -1.0, np.float32)
    enigma.compile(transposed_msl)(a, b, c, grid=(32,), threads=(32,), rt=enigma.MetalRuntime(device="cpu"))
    np.testing.assert_array_equal(c[:, 8:], a @ b.T)
    np.testing.assert_array_equal(c[:, :8], -1.0)


@enigma.kernel
def int_accumulator(x: enigma.f32, out: enigma.f32):
    acc = 0
    for i in range(4):
        acc = acc + x[i]
    out[0] = acc


def test_an_int_accumulator_given_floats_names_the_float_literal():
    with pytest.raises(enigma.CompileError, match=r"write a float literal \(`acc = 0\.0`\)"):
        enigma.compile(int_accumulator)


@enigma.kernel
def write_only_texture(out: enigma.texture2d(enigma.f32, access="write")):
    gid = enigma.thread_position_in_grid
    if gid.x < out.get_width() and gid.y < out.get_height():
        out.write(enigma.f32(gid.x + 10 * gid.y), (gid.x, gid.y))


def test_a_texture_the_kernel_writes_may_be_given_in_outputs():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    tex = rt.texture((3, 4), format="r32float")
    got = rt.execute(enigma.compile(write_only_texture), outputs=[tex], grid=(4, 3), threads=(4, 3))
    assert got is tex
    want = np.arange(4)[None, :] + 10 * np.arange(3)[:, None]
    np.testing.assert_array_equal(tex.numpy(), want.astype(np.float32))
    assert rt.last_report["findings"] == []


@enigma.kernel
def gelu_erf(x: enigma.f32, out: enigma.f32):
    g = enigma.thread_position_in_grid.x
    v = x[g]
    out[g] = 0.5 * v * (1.0 + enigma.erf(v * 0.7071067811865476))


def test_gelu_in_the_erf_form_matches_an_f64_reference():
    """torch's default GELU, computed in f32 as torch computes it: each result
    within 2 ULP of the same formula evaluated in f32 around an f64 erf
    (the formula itself cancels to 0 below x ≈ -5.5, in torch as here)."""
    x = np.linspace(-6, 6, 1001, dtype=np.float32)
    out = np.zeros_like(x)
    enigma.compile(gelu_erf)(x, out, grid=(x.size,), threads=(64,), rt=enigma.MetalRuntime(device="cpu"))
    erf = np.array([math.erf(float(v)) for v in x * np.float32(0.7071067811865476)], np.float32)
    want = (np.float32(0.5) * x * (np.float32(1.0) + erf)).astype(np.float64)
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(out.astype(np.float64) - want) / ulp
    assert err.max() <= 2.0, (err.max(), x[err.argmax()])
    exact = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.astype(np.float64)])
    np.testing.assert_allclose(out, exact, rtol=0, atol=4e-7 * 6)  # within the formula's cancellation


@enigma.kernel
def more_math(x: enigma.f32, out: enigma.f32):
    g = enigma.thread_position_in_grid.x
    v = x[g]
    out[g * 6] = enigma.atan2(v, 2.0)
    out[g * 6 + 1] = enigma.log1p(v * v)
    out[g * 6 + 2] = enigma.rint(v)
    out[g * 6 + 3] = enigma.smoothstep(-1.0, 1.0, v)
    out[g * 6 + 4] = enigma.copysign(2.0, v)
    out[g * 6 + 5] = enigma.fmod(v, 0.75)


def test_more_math_functions_against_numpy():
    x = np.linspace(-3, 3, 97, dtype=np.float32)
    out = np.zeros(x.size * 6, np.float32)
    enigma.compile(more_math)(x, out, grid=(x.size,), threads=(32,), rt=enigma.MetalRuntime(device="cpu"))
    got = out.reshape(-1, 6)
    x64 = x.astype(np.float64)
    t = np.clip((x64 + 1) / 2, 0, 1)
    want = np.stack([np.arctan2(x64, 2), np.log1p(x64 * x64), np.rint(x64), t * t * (3 - 2 * t), np.copysign(2, x64), np.fmod(x64, 0.75)], 1)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=2.4e-7, atol=1e-7)


@enigma.kernel
def precise_math(x: enigma.f32, out: enigma.f32):
    g = enigma.thread_position_in_grid.x
    v = x[g]
    out[g * 5] = enigma.precise.sin(v)
    out[g * 5 + 1] = enigma.precise.exp(v)
    out[g * 5 + 2] = enigma.precise.log(v * v + 1.0)
    out[g * 5 + 3] = enigma.precise.pow(v * v + 0.5, 1.5)
    out[g * 5 + 4] = enigma.precise.rsqrt(v * v + 0.25)


def _device_missing(device):
    try:
        enigma.MetalRuntime(device)
    except enigma.DeviceError as e:
        return f"enigma has no {device} device here: {e}"
    return None


# ULP bounds of sin, exp, log, pow and rsqrt: the simulator's (1, 2 for
# rsqrt's two roundings); CUDA's library functions' (its programming guide:
# sinf 2, expf 2, logf 1, powf 4, rsqrtf 2).
PRECISE_BOUNDS = {"cpu": [1, 1, 1, 1, 2], "cuda": [2, 2, 1, 4, 2]}


@pytest.mark.parametrize("device", sorted(PRECISE_BOUNDS))
def test_precise_variants_against_an_f64_reference(device):
    """Within each device's bounds of numpy's f64 functions, the operands'
    own f32 rounding aside; MSL spells them ``precise::``."""
    missing = _device_missing(device)
    if missing:
        pytest.skip(missing)
    x = np.linspace(-8, 8, 257, dtype=np.float32)
    out = np.zeros(x.size * 5, np.float32)
    compiled = enigma.compile(precise_math)
    compiled(x, out, grid=(x.size,), threads=(32,), rt=enigma.MetalRuntime(device=device))
    got = out.reshape(-1, 5).astype(np.float64)
    sq = (x * x).astype(np.float64)  # v * v, rounded to f32 as the kernel does
    args = [x.astype(np.float64), x.astype(np.float64), (sq + 1.0).astype(np.float32), (sq + 0.5).astype(np.float32), (sq + 0.25).astype(np.float32)]
    want = [np.sin(args[0]), np.exp(args[1]), np.log(args[2].astype(np.float64)), np.power(args[3].astype(np.float64), 1.5), 1.0 / np.sqrt(args[4].astype(np.float64))]
    for col, (w, bound) in enumerate(zip(want, PRECISE_BOUNDS[device])):
        ulp = np.spacing(np.abs(w).astype(np.float32)).astype(np.float64)
        err = np.abs(got[:, col] - w) / ulp
        assert err.max() <= bound, (col, err.max(), x[err.argmax()])
    assert "precise::sin(v)" in compiled.msl and "precise::pow(" in compiled.msl
    assert "sinf(v)" in compiled.cuda and "__sinf" not in compiled.cuda


@enigma.kernel
def variant_math(x: enigma.f32, out: enigma.f32):
    g = enigma.thread_position_in_grid.x
    v = x[g]
    out[g * 4] = enigma.precise.atan2(v, 1.5)
    out[g * 4 + 1] = enigma.fast.tan(v)
    out[g * 4 + 2] = enigma.precise.sqrt(v * v + 0.25)
    out[g * 4 + 3] = enigma.fast.min(v, 0.5)


def test_every_function_has_its_fast_and_precise_spelling():
    """``enigma.fast.X`` and ``enigma.precise.X`` for functions beyond the
    first ten: MSL's namespaces, CUDA's functions, and on the simulator the
    precise ones within 1 ULP of numpy's f64 result, the fast ones equal to
    the default ones."""
    x = np.linspace(-1.4, 1.4, 129, dtype=np.float32)
    out = np.zeros(x.size * 4, np.float32)
    compiled = enigma.compile(variant_math)
    compiled(x, out, grid=(x.size,), threads=(32,), rt=enigma.MetalRuntime(device="cpu"))
    got = out.reshape(-1, 4).astype(np.float64)
    x64 = x.astype(np.float64)
    sq = (x * x + np.float32(0.25)).astype(np.float64)
    for col, w in [(0, np.arctan2(x64, 1.5)), (1, np.tan(x64)), (2, np.sqrt(sq)), (3, np.minimum(x64, 0.5))]:
        ulp = np.spacing(np.abs(w).astype(np.float32)).astype(np.float64)
        assert (np.abs(got[:, col] - w) / ulp).max() <= 1, col
    for text in ("precise::atan2(v, 1.5f)", "fast::tan(v)", "precise::sqrt(", "fast::min(v, 0.5f)"):
        assert text in compiled.msl, text
    assert "atan2f(v, 1.5f)" in compiled.cuda and "__tanf(v)" in compiled.cuda and "__fsqrt_rn(" in compiled.cuda


def test_fast_and_precise_refuse_what_msl_lacks():
    def fast_min_of_integers(a: enigma.i32):
        a[0] = enigma.fast.min(a[0], a[1])

    with pytest.raises(enigma.CompileError, match=r"`fast::min` takes float scalars and vectors, found i32"):
        enigma.compile(enigma.kernel(fast_min_of_integers))


@enigma.kernel
def classify(x: enigma.f32, h: enigma.f16, flags: enigma.u32, quads: enigma.float4, quad_flags: enigma.u32):
    g = enigma.thread_position_in_grid.x
    v = x[g]
    flags[g * 2] = enigma.u32(enigma.isnan(v)) + 2 * enigma.u32(enigma.isinf(v)) + 4 * enigma.u32(enigma.isfinite(v))
    w = h[g]
    flags[g * 2 + 1] = enigma.u32(enigma.isnan(w)) + 2 * enigma.u32(enigma.isinf(w)) + 4 * enigma.u32(enigma.isfinite(w))
    nan4 = enigma.isnan(quads[g])  # a bool4
    quad_flags[g] = enigma.u32(nan4.x) + 2 * enigma.u32(nan4.y) + 4 * enigma.u32(nan4.z) + 8 * enigma.u32(nan4.w)


def test_isnan_isinf_isfinite_against_numpy(clean):
    x = np.float32([0.0, -0.0, 1.5, -3e38, 1e-40, np.inf, -np.inf, np.nan, -np.nan, 7.0, 65504.0, 7e4])
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)  # 7e4 and -3e38 overflow to ±inf in half, on purpose
    quads = np.stack([x, np.roll(x, 1), np.roll(x, 2), np.roll(x, 3)], axis=1).astype(np.float32)
    flags = np.zeros(x.size * 2, np.uint32)
    quad_flags = np.zeros(x.size, np.uint32)
    c = enigma.compile(classify)
    c(x, h, flags, quads, quad_flags, grid=x.size, threads=32, rt=clean)

    def want(a):
        return np.isnan(a) * 1 + np.isinf(a) * 2 + np.isfinite(a) * 4

    np.testing.assert_array_equal(flags[0::2], want(x))
    np.testing.assert_array_equal(flags[1::2], want(h))
    np.testing.assert_array_equal(quad_flags, (np.isnan(quads) * [1, 2, 4, 8]).sum(axis=1))
    assert "isnan(v)" in c.msl and "enigma::isnan(v)" in c.cuda


def test_isnan_of_an_integer_is_a_compile_error():
    @enigma.kernel
    def not_a_float(out: enigma.u32):
        out[0] = enigma.u32(enigma.isnan(out[1]))

    with pytest.raises(enigma.CompileError, match=r"isnan.*float"):
        enigma.compile(not_a_float)
