"""SIMD-group matrices in the Python DSL: the MSL-named functions, checked
against numpy on the simulator (inputs that are small multiples of 1/2, so
every sum is exact in any order), the per-lane view, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import enigma

H8 = enigma.simdgroup_matrix(enigma.f16, 8, 8)
F8 = enigma.simdgroup_matrix(enigma.f32, 8, 8)
A_T = enigma.simdgroup_matrix(enigma.f16, 32, 8)
B_T = enigma.simdgroup_matrix(enigma.f16, 8, 32)
C_T = enigma.simdgroup_matrix(enigma.f32, 32, 32)
K = 48


@enigma.kernel
def mma_8x8(A: enigma.f16, B: enigma.f16, C: enigma.f32, D: enigma.f32):
    a = enigma.simdgroup_load(H8, A, 0, 8)
    b = enigma.simdgroup_load(H8, B, 0, 8, transpose=True)
    c = enigma.simdgroup_load(F8, C, 0, 8)
    enigma.simdgroup_store(enigma.simdgroup_multiply_accumulate(a, b, c), D, 0, 8)


@enigma.kernel
def tile_64x64(A: enigma.f16, B: enigma.f16, C: enigma.f32):
    """Seed 002 §3.2: 4 SIMD groups, each a 32×32 quarter of a 64×64 tile."""
    sg = enigma.simdgroup_index_in_threadgroup()
    row0 = sg // 2 * 32
    col0 = sg % 2 * 32
    acc = enigma.make_filled_simdgroup_matrix(C_T, 0.0)
    for k in range(0, K, 8):
        a = enigma.simdgroup_load(A_T, A, row0 * K + k, K)
        b = enigma.simdgroup_load(B_T, B, k * 64 + col0, 64)
        acc = enigma.simdgroup_multiply_accumulate(a, b, acc)
    enigma.simdgroup_store(acc, C, row0 * 64 + col0, 64)


@enigma.kernel
def per_lane(Src: enigma.f32, Out: enigma.f32):
    m = enigma.simdgroup_load(F8, Src, 0, 8)
    d = F8(3.0)  # MSL's diagonal constructor
    m = enigma.simdgroup_multiply(m, d)
    Out[enigma.thread_element_row(F8, 0) * 8 + enigma.thread_element_col(F8, 0)] = enigma.thread_element(m, 0)
    Out[enigma.thread_element_row(F8, 1) * 8 + enigma.thread_element_col(F8, 1)] = enigma.thread_element(m, 1)


def halves(rng, *shape):
    return (rng.integers(-8, 9, size=shape) / 2).astype(np.float32)


@pytest.fixture
def rt():
    return enigma.MetalRuntime(device="cpu")


def test_types_and_names():
    assert H8 == enigma.simdgroup_half8x8 and str(H8) == "mat8x8_f16"
    assert enigma.simdgroup_float8x8.per_lane == 2
    for bad in [(enigma.i32, 8, 8), (enigma.f16, 12, 8), (enigma.f16, 8, 72)]:
        with pytest.raises(ValueError):
            enigma.simdgroup_matrix(*bad)


def test_multiply_accumulate_with_a_transposed_load(rt):
    rng = np.random.default_rng(1)
    a, b, c = halves(rng, 8, 8), halves(rng, 8, 8), halves(rng, 8, 8)
    d = np.zeros(64, np.float32)
    rt.execute(enigma.compile(mma_8x8), inputs=[a.astype(np.float16), b.astype(np.float16), c], outputs=[d], grid=32, threads=32)
    want = a.astype(np.float64) @ b.T.astype(np.float64) + c
    np.testing.assert_array_equal(d.reshape(8, 8), want.astype(np.float32))


@enigma.kernel
def from_vectors(A: enigma.half4, Out: enigma.f16):
    """A tile read from vector memory as its scalars: 16 half4 per row-pair
    staged whole into a threadgroup array of half4, rows padded to 12 halves."""
    stage = enigma.threadgroup_alloc(enigma.half4, 24)
    lane = enigma.thread_index_in_simdgroup()
    if lane < 16:
        stage[lane // 2 * 3 + lane % 2] = A[lane]
    enigma.barrier(mem_flags="mem_threadgroup")
    m = enigma.simdgroup_load(H8, stage, 0, 12)
    enigma.simdgroup_store(m, Out, 0, 8)


def test_a_load_reads_vector_memory_as_its_scalars(rt):
    a = halves(np.random.default_rng(4), 8, 8).astype(np.float16)
    out = np.zeros(64, np.float16)
    rt.execute(enigma.compile(from_vectors), inputs=[a.reshape(16, 4)], outputs=[out], grid=32, threads=32, sanitize=True)
    np.testing.assert_array_equal(out.reshape(8, 8), a)


def test_four_simdgroups_compute_a_64x64_tile(rt):
    rng = np.random.default_rng(2)
    a, b = halves(rng, 64, K), halves(rng, K, 64)
    c = np.zeros(64 * 64, np.float32)
    rt.execute(enigma.compile(tile_64x64), inputs=[a.astype(np.float16), b.astype(np.float16)], outputs=[c], grid=128, threads=128)
    np.testing.assert_array_equal(c.reshape(64, 64), (a.astype(np.float64) @ b).astype(np.float32))


def test_per_lane_view_and_diagonal(rt):
    src = halves(np.random.default_rng(3), 64)
    out = np.full(64, -1.0, np.float32)
    rt.execute(enigma.compile(per_lane), inputs=[src], outputs=[out], grid=32, threads=32, sanitize=True)
    np.testing.assert_array_equal(out, src * 3)


def test_generated_code_uses_the_tiles():
    c = enigma.compile(mma_8x8)
    assert "simdgroup_matrix" in c.msl and "enigma_tile_mma" in c.msl
    assert "enigma_tile_mma" in c.cuda


def test_errors_name_the_problem():
    @enigma.kernel
    def mismatched(A: enigma.f16, D: enigma.f16):
        a = enigma.simdgroup_load(A_T, A, 0, 8)
        enigma.simdgroup_store(enigma.simdgroup_multiply(a, a), D, 0, 8)

    with pytest.raises(enigma.CompileError, match="inner sides"):
        enigma.compile(mismatched)

    @enigma.kernel
    def divergent(D: enigma.f32):
        with enigma.if_(enigma.thread_index_in_simdgroup() < 8):
            enigma.simdgroup_store(enigma.make_filled_simdgroup_matrix(F8, 1.0), D, 0, 8)

    with pytest.raises(enigma.CompileError, match="needs every lane of the SIMD group"):
        enigma.compile(divergent)

    @enigma.kernel
    def bad_index(D: enigma.f32):
        m = enigma.make_filled_simdgroup_matrix(F8, 1.0)
        D[0] = enigma.thread_element(m, 2)

    with pytest.raises(enigma.CompileError, match="from 0 to 1"):
        enigma.compile(bad_index)


def test_a_partial_simdgroup_is_refused(rt):
    with pytest.raises(enigma.DispatchError, match="not a multiple of 32"):
        rt.execute(enigma.compile(mma_8x8), inputs=[np.zeros(64, np.float16)] * 2 + [np.zeros(64, np.float32)],
                   output_size=256, grid=48, threads=48)


H16 = enigma.simdgroup_matrix(enigma.f16, 16, 16)


@enigma.kernel
def quantized_tiles(Words: enigma.u32, Scales: enigma.f16, Out: enigma.f16):
    """4-bit weights decoded into f16 tiles: seed 002's [K/8][N] words at a
    word offset and a stride wider than the tile, scales at an offset."""
    enigma.simdgroup_store(enigma.simdgroup_load_quantized(H16, "int4", Words, 3, 21, Scales, 5), Out, 0, 16)
    enigma.simdgroup_store(enigma.simdgroup_load_quantized(H16, "fp4", Words, 3, 21, Scales, 5), Out, 256, 16)


def test_quantized_loads_decode_nibbles_with_their_scales(rt):
    rng = np.random.default_rng(7)
    words = rng.integers(0, 1 << 32, size=3 + 2 * 21, dtype=np.uint64).astype(np.uint32)
    scales = rng.uniform(-2, 2, size=5 + 16).astype(np.float16)
    out = np.zeros(512, np.float16)
    rt.execute(enigma.compile(quantized_tiles), inputs=[words, scales], outputs=[out], grid=32, threads=32)
    # An independent decoding: U4B8 is the nibble minus 8; E2M1 is s e1 e0 m.
    e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    r, c = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    nibbles = (words[3 + (r // 8) * 21 + c] >> (4 * (r % 8)).astype(np.uint32)) & 0xF
    scale = scales[5 + c].astype(np.float32)
    for code, values, at in [("int4", nibbles.astype(np.float32) - 8, 0), ("fp4", e2m1[nibbles], 256)]:
        want = (values * scale).astype(np.float16)  # exact in f32, rounded once
        np.testing.assert_array_equal(out[at:at + 256].reshape(16, 16), want, err_msg=code)


H64x16 = enigma.simdgroup_matrix(enigma.f16, 64, 16)


@enigma.kernel
def fragment_tile(Words: enigma.u32, Scales: enigma.f16, Out: enigma.f16):
    """A 64 x 16 unit of fragment-ordered words at word 4."""
    enigma.simdgroup_store(enigma.simdgroup_load_quantized(H64x16, "int4", Words, 4, 128, Scales, 2, layout="fragments"), Out, 0, 16)


def test_fragment_ordered_loads_follow_the_layout(rt):
    rng = np.random.default_rng(9)
    words = rng.integers(0, 1 << 32, size=4 + 128, dtype=np.uint64).astype(np.uint32)
    scales = rng.uniform(-2, 2, size=2 + 16).astype(np.float16)
    out = np.zeros(64 * 16, np.float16)
    rt.execute(enigma.compile(fragment_tile), inputs=[words, scales], outputs=[out], grid=32, threads=32)
    # The layout's definition: nibble h + 2*half + 4*p of word 4*l + q is
    # element (16q + 8h + 2(l % 4) + p, 8*half + l // 4).
    want = np.zeros((64, 16), np.float32)
    for lane in range(32):
        for q in range(4):
            word = int(words[4 + 4 * lane + q])
            for h in range(2):
                for half in range(2):
                    for p in range(2):
                        r, c = 16 * q + 8 * h + 2 * (lane % 4) + p, 8 * half + lane // 4
                        want[r, c] = ((word >> (4 * (h + 2 * half + 4 * p))) & 0xF) - 8
    want = (want * scales[2:18].astype(np.float32)[None, :]).astype(np.float16)
    np.testing.assert_array_equal(out.reshape(64, 16), want)


def test_quantized_load_errors(rt):
    @enigma.kernel
    def bad_code(Words: enigma.u32, Scales: enigma.f16, Out: enigma.f16):
        enigma.simdgroup_store(enigma.simdgroup_load_quantized(H16, "int8", Words, 0, 16, Scales, 0), Out, 0, 16)

    with pytest.raises(enigma.CompileError, match="'int4' or 'fp4'"):
        enigma.compile(bad_code)

    @enigma.kernel
    def f16_words(Words: enigma.f16, Scales: enigma.f16, Out: enigma.f16):
        enigma.simdgroup_store(enigma.simdgroup_load_quantized(H16, "fp4", Words, 0, 16, Scales, 0), Out, 0, 16)

    with pytest.raises(enigma.CompileError, match="packed u32 words"):
        enigma.compile(f16_words)

    @enigma.kernel
    def small_fragments(Words: enigma.u32, Scales: enigma.f16, Out: enigma.f16):
        enigma.simdgroup_store(enigma.simdgroup_load_quantized(H16, "int4", Words, 0, 16, Scales, 0, layout="fragments"), Out, 0, 16)

    with pytest.raises(enigma.CompileError, match="multiple of 64"):
        enigma.compile(small_fragments)

    @enigma.kernel
    def bad_layout(Words: enigma.u32, Scales: enigma.f16, Out: enigma.f16):
        enigma.simdgroup_store(enigma.simdgroup_load_quantized(H16, "int4", Words, 0, 16, Scales, 0, layout="columns"), Out, 0, 16)

    with pytest.raises(enigma.CompileError, match="'rows' or 'fragments'"):
        enigma.compile(bad_layout)
