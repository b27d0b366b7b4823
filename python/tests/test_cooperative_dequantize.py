"""4-bit weights dequantized into a product's left input in the Python DSL:
``op.get_left_input_cooperative_tensor(dtype)`` and ``w.dequantize(code,
words, word_offset, word_stride, scales, scale_offset, scale_stride,
group_shift)``, then ``op.run(w, b, c)``. A 64 × 64 INT4 and FP4 weight
tile (groups of 32 and 64, f16 and f32 tensors, words and scales in device
and threadgroup memory) times a staged right operand, on the simulator,
against numpy's own decoding of the nibbles (bit for bit: times the
identity, the dequantized weights themselves; times random halves, an exact
product), also with the words in fragment order (``layout="fragments"``,
numpy packing them) and MLX's affine weights (``"uint4"`` in
``layout="columns"`` with ``biases``, packed by MLX's own ``mx.quantize``
where MLX is installed); clean under the sanitizer, which reports a read of
unstaged weights; the front end's errors for bad input, with the kernel and
line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import enigma
from enigma import _cooperative
from enigma._frontend.cooperative import _METHODS, CoopRef, ViewObj
from conftest import DEVICE

N = K = 64  # the weights: K values for each of N output columns
OP = enigma.matmul2d(enigma.matmul2d_descriptor(N, 64, K), enigma.execution_simdgroups(4))
# Where the weights lie: a row of words (8 K values of every column) every
# WORD_STRIDE words from WORD_OFFSET on; a row of scales (one group) every
# SCALE_STRIDE halves from SCALE_OFFSET on.
WORD_OFFSET, WORD_STRIDE, SCALE_OFFSET, SCALE_STRIDE = 3, N + 5, 7, N + 2
WORDS_LEN = WORD_OFFSET + K // 8 * WORD_STRIDE
# Fragment order: N = 64 columns are four units of 128 words, K = 64 one
# row of units, the next row (none here) FRAGMENT_STRIDE words on.
FRAGMENT_OFFSET, FRAGMENT_STRIDE = 4, N // 16 * 128
FP4_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def from_device(code, dtype, layout="rows"):
    """A kernel whose left input (of ``dtype``) is dequantized from the
    words (in ``layout``: at WORD_OFFSET and WORD_STRIDE in rows, at
    FRAGMENT_OFFSET and FRAGMENT_STRIDE in fragment order) and scales in
    device memory; the right operand is staged in threadgroup memory;
    ``G[0]`` is the group shift."""
    word_offset, word_stride = (WORD_OFFSET, WORD_STRIDE) if layout == "rows" else (FRAGMENT_OFFSET, FRAGMENT_STRIDE)

    def dequantize_device(words: enigma.u32, scales: enigma.f16, B: enigma.f16, C: enigma.f32, G: enigma.u32):
        tb = enigma.threadgroup_alloc(enigma.f16, K * 64)
        for i in range(enigma.thread_index_in_threadgroup(), K * 64, 128):
            tb[i] = B[i]
        enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
        b = enigma.tensor(tb, (64, K))
        w = OP.get_left_input_cooperative_tensor(dtype)
        w.dequantize(code, words, word_offset, word_stride, scales, SCALE_OFFSET, SCALE_STRIDE, G, layout=layout)
        c = OP.get_destination_cooperative_tensor(w, b, enigma.f32)
        OP.run(w, b, c)
        c.store(enigma.tensor(C, (64, N)))

    return enigma.kernel(dequantize_device)


def from_threadgroup(code, dtype, barrier=True):
    """The same with the words and scales staged in threadgroup memory
    first (``barrier=False``: without the barrier that orders the copies
    before the dequantization, a race)."""

    def dequantize_staged(words: enigma.u32, scales: enigma.f16, B: enigma.f16, C: enigma.f32, G: enigma.u32):
        lid = enigma.thread_index_in_threadgroup()
        tw = enigma.threadgroup_alloc(enigma.u32, WORDS_LEN)
        ts = enigma.threadgroup_alloc(enigma.f16, SCALE_OFFSET + K // 32 * SCALE_STRIDE)
        tb = enigma.threadgroup_alloc(enigma.f16, K * 64)
        for i in range(lid, WORDS_LEN, 128):
            tw[i] = words[i]
        for i in range(lid, SCALE_OFFSET + (((K - 1) >> G[0]) + 1) * SCALE_STRIDE, 128):
            ts[i] = scales[i]
        for i in range(lid, K * 64, 128):
            tb[i] = B[i]
        if barrier:
            enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
        b = enigma.tensor(tb, (64, K))
        w = OP.get_left_input_cooperative_tensor(dtype)
        w.dequantize(code, tw, WORD_OFFSET, WORD_STRIDE, ts, SCALE_OFFSET, SCALE_STRIDE, G)
        c = OP.get_destination_cooperative_tensor(w, b, enigma.f32)
        OP.run(w, b, c)
        c.store(enigma.tensor(C, (64, N)))

    return enigma.kernel(dequantize_staged)


def pack(nibbles):
    """``nibbles[k][n]`` (K × N codes 0..15) in seed 002's layout: value k of
    column n is bits 4·(k % 8) of word ``WORD_OFFSET + (k // 8)·WORD_STRIDE + n``."""
    words = np.zeros(WORDS_LEN, np.uint32)
    for k in range(K):
        at = WORD_OFFSET + (k // 8) * WORD_STRIDE + np.arange(N)
        words[at] |= nibbles[k].astype(np.uint32) << np.uint32(4 * (k % 8))
    return words


def decode(code, nibbles):
    """Each 4-bit code's value: INT4 the nibble minus 8; FP4 E2M1, bit 3 the sign."""
    if code == "int4":
        return nibbles.astype(np.float64) - 8.0
    magnitude = FP4_MAGNITUDES[nibbles & 7]
    return np.where(nibbles & 8, -magnitude, magnitude)


def scales_for(groups, rng, exact):
    """``[K/group][N]`` f16 scales at SCALE_OFFSET, rows SCALE_STRIDE apart
    (the gaps NaN, never read): powers of two (``exact``) or any f16 of
    either sign with a full mantissa, some so small that products are
    subnormal."""
    buf = np.full(SCALE_OFFSET + groups * SCALE_STRIDE, np.nan, np.float16)
    if exact:
        values = rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], size=(groups, N)).astype(np.float16)
    else:
        bits = rng.integers(0, 1 << 10, size=(groups, N)) | (rng.choice([1, 3, 13, 15, 17], size=(groups, N)) << 10)
        values = (bits | (rng.integers(0, 2, size=(groups, N)) << 15)).astype(np.uint16).view(np.float16)
    for g in range(groups):
        buf[SCALE_OFFSET + g * SCALE_STRIDE:][:N] = values[g]
    return buf, values


def reference_weights(code, nibbles, scale_values, group, dtype):
    """The left input as numpy sees it: element (n, k) is the decoded code
    times the scale of group k // group, exact in f64, rounded once to the
    tensor's type."""
    exact = decode(code, nibbles) * scale_values.astype(np.float64)[np.arange(K) // group]   # K × N
    return exact.T.astype(np.float16 if dtype == enigma.f16 else np.float32).astype(np.float64)


def run(kernel, code, dtype, group, right, exact_scales, sanitize, seed):
    rng = np.random.default_rng(seed)
    nibbles = rng.integers(0, 16, size=(K, N))
    scales, scale_values = scales_for(K // group, rng, exact_scales)
    c = np.full(N * 64, -7.0, np.float32)
    # The sanitizer is the simulator's; otherwise the suite's device
    # (ENIGMA_TEST_DEVICE: on sm_90a CUDA the pairs decode into wgmma's
    # register operand).
    rt = enigma.MetalRuntime(device="cpu", sanitize=True) if sanitize else enigma.MetalRuntime(device=DEVICE)
    shift = np.array([group.bit_length() - 1], np.uint32)
    rt.execute(enigma.compile(kernel), inputs=[pack(nibbles), scales, right.astype(np.float16), c, shift], grid=128, threads=128)
    return c.reshape(N, 64), reference_weights(code, nibbles, scale_values, group, dtype)


CASES = [
    # code, tensor type, group, staged in threadgroup memory
    ("int4", enigma.f16, 32, False),
    ("int4", enigma.f32, 64, True),
    ("fp4", enigma.f16, 64, True),
    ("fp4", enigma.f32, 32, False),
    ("int4", enigma.f16, 64, True),
    ("fp4", enigma.f16, 32, False),
]


def kernel_for(code, dtype, staged):
    return from_threadgroup(code, dtype) if staged else from_device(code, dtype)


@pytest.mark.parametrize("code, dtype, group, staged", CASES)
def test_times_the_identity_the_product_is_each_weight_times_its_scale_rounded_once(code, dtype, group, staged):
    """Scales with full mantissas (so f16 weights round); times the
    identity, every element of the product is one dequantized weight."""
    got, weights = run(kernel_for(code, dtype, staged), code, dtype, group, np.eye(K), False, False, seed=group + len(code))
    np.testing.assert_array_equal(got, weights.astype(np.float32))


@pytest.mark.parametrize("code, dtype, group, staged", CASES)
@pytest.mark.parametrize("sanitize", [False, True])
def test_the_product_with_a_staged_right_operand_matches_numpy(code, dtype, group, staged, sanitize):
    """Power-of-two scales and halves on the right: every partial sum is
    exact in f32, so the product equals numpy's in f64 exactly; under the
    sanitizer (three layouts of each tensor) nothing is reported."""
    rng = np.random.default_rng(100 + group)
    right = (rng.integers(-8, 9, size=(K, 64)) / 2).astype(np.float64)
    got, weights = run(kernel_for(code, dtype, staged), code, dtype, group, right, True, sanitize, seed=group * 3 + staged)
    np.testing.assert_array_equal(got, (weights @ right).astype(np.float32))


def pack_fragments(nibbles):
    """``nibbles[k][n]`` in the tensor cores' fragment order (the IR's
    ``QuantLayout::Fragments``, written out here): lane l = 4·(n % 8) +
    (k % 8) // 2 of unit n // 16 holds K row k in word 4·l + (k % 64) // 16,
    nibble (k % 16) // 8 + 2·((n % 16) // 8) + 4·(k % 2)."""
    words = np.zeros(FRAGMENT_OFFSET + (K // 64) * FRAGMENT_STRIDE, np.uint32)
    for k in range(K):
        for n in range(N):
            lane = 4 * (n % 8) + (k % 8) // 2
            at = FRAGMENT_OFFSET + (k // 64) * FRAGMENT_STRIDE + (n // 16) * 128 + 4 * lane + (k % 64) // 16
            nibble = (k % 16) // 8 + 2 * ((n % 16) // 8) + 4 * (k % 2)
            words[at] |= np.uint32(nibbles[k][n]) << np.uint32(4 * nibble)
    return words


@pytest.mark.parametrize("code, dtype, group", [("int4", enigma.f16, 32), ("fp4", enigma.f32, 64), ("fp4", enigma.f16, 64)])
def test_fragment_ordered_words_decode_where_the_layout_puts_them(code, dtype, group):
    """``layout="fragments"``: times the identity, each element of the
    product is the weight numpy packed at that K row and column, times its
    scale, rounded once; clean under the sanitizer."""
    rng = np.random.default_rng(7 + group)
    nibbles = rng.integers(0, 16, size=(K, N))
    scales, scale_values = scales_for(K // group, rng, False)
    c = np.full(N * 64, -7.0, np.float32)
    kernel = enigma.compile(from_device(code, dtype, layout="fragments"))
    assert f"cooperative_dequantize_{code}_fragments(w, words, {FRAGMENT_OFFSET}u32, {FRAGMENT_STRIDE}u32, " in kernel.ir
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    shift = np.array([group.bit_length() - 1], np.uint32)
    rt.execute(kernel, inputs=[pack_fragments(nibbles), scales, np.eye(K, dtype=np.float16), c, shift], grid=128, threads=128)
    np.testing.assert_array_equal(c.reshape(N, 64), reference_weights(code, nibbles, scale_values, group, dtype).astype(np.float32))


def mlx_affine_kernel(dtype):
    """MLX's affine weights into the left input: ``[N][K/8]`` words (a
    column's K/8 words together), ``[N][K/group]`` scales and biases."""

    def dequantize_mlx(words: enigma.u32, scales: enigma.f16, biases: enigma.f16, B: enigma.f16, C: enigma.f32, G: enigma.u32):
        tb = enigma.threadgroup_alloc(enigma.f16, K * 64)
        for i in range(enigma.thread_index_in_threadgroup(), K * 64, 128):
            tb[i] = B[i]
        enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
        b = enigma.tensor(tb, (64, K))
        w = OP.get_left_input_cooperative_tensor(dtype)
        w.dequantize("uint4", words, 0, K // 8, scales, 0, K >> G[0], G, layout="columns", biases=biases)
        c = OP.get_destination_cooperative_tensor(w, b, enigma.f32)
        OP.run(w, b, c)
        c.store(enigma.tensor(C, (64, N)))

    return enigma.kernel(dequantize_mlx)


@pytest.mark.parametrize("dtype, group", [(enigma.f16, 32), (enigma.f32, 64), (enigma.f16, 64)])
def test_mlx_affine_weights_decode_to_code_times_scale_plus_bias(dtype, group):
    """``"uint4"`` words in ``layout="columns"`` with ``biases``: times the
    identity, each element is numpy's ``nibble · scale + bias`` in f64
    rounded once; with MLX installed the weights are ``mx.quantize``'s and
    the reference also ``mx.dequantize``'s. Clean under the sanitizer."""
    rng = np.random.default_rng(11 + group)
    weights = rng.standard_normal((N, K)).astype(np.float16)   # MLX's [N][K]: rows are output columns
    try:
        import mlx.core as mx
    except ImportError:
        mx = None
    if mx is not None:
        q, s, bi = mx.quantize(mx.array(weights), group_size=group, bits=4)
        words, scales, biases = np.array(q).reshape(-1), np.array(s), np.array(bi)
        mlx_reference = np.array(mx.dequantize(q, s, bi, group_size=group, bits=4)).astype(np.float64)
    else:
        codes = rng.integers(0, 16, size=(N, K)).astype(np.uint32)
        words = np.zeros((N, K // 8), np.uint32)
        for j in range(8):
            words |= codes[:, j::8] << np.uint32(4 * j)
        words = words.reshape(-1)
        scales = rng.choice([0.25, -0.5, 0.75], size=(N, K // group)).astype(np.float16)
        biases = rng.standard_normal((N, K // group)).astype(np.float16)
        mlx_reference = None
    nibbles = (words.reshape(N, K // 8)[:, np.arange(K) // 8] >> (4 * (np.arange(K) % 8)).astype(np.uint32)) & 15
    exact = nibbles * scales.astype(np.float64)[:, np.arange(K) // group] + biases.astype(np.float64)[:, np.arange(K) // group]
    want = exact.astype(np.float16 if dtype == enigma.f16 else np.float32).astype(np.float32)
    if mlx_reference is not None:
        np.testing.assert_allclose(exact, mlx_reference, rtol=2e-3, atol=2e-3)
    c = np.full(N * 64, -7.0, np.float32)
    kernel = enigma.compile(mlx_affine_kernel(dtype))
    assert "cooperative_dequantize_uint4_columns(w, words, 0u32, 8u32, scales, 0u32, " in kernel.ir and ", biases)" in kernel.ir
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    shift = np.array([group.bit_length() - 1], np.uint32)
    rt.execute(kernel, inputs=[words.astype(np.uint32), scales.astype(np.float16), biases.astype(np.float16), np.eye(K, dtype=np.float16), c, shift], grid=128, threads=128)
    np.testing.assert_array_equal(c.reshape(N, 64), want)


def test_weights_read_before_the_staging_barrier_are_a_race():
    rng = np.random.default_rng(1)
    scales, _ = scales_for(2, rng, True)
    inputs = [pack(rng.integers(0, 16, size=(K, N))), scales, np.eye(K, dtype=np.float16), np.zeros(N * 64, np.float32), np.array([5], np.uint32)]
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        rt.execute(enigma.compile(from_threadgroup("int4", enigma.f16, barrier=False)), inputs=inputs, grid=128, threads=128)
    races = [r for r in e.value.reports if "race" in str(r["kind"])]
    assert races and {r["variable"] for r in races} & {"tw", "ts"}, e.value.reports


def test_the_text_form_and_both_sources_name_the_dequantization():
    compiled = enigma.compile(from_device("fp4", enigma.f16))
    assert "cooperative w: cooperative_tensor<f16, 64, 64, simdgroups(4)>" in compiled.ir
    assert "cooperative_dequantize_fp4(w, words, 3u32, 69u32, scales, 7u32, 66u32, " in compiled.ir
    assert "enigma_coop_dequantize" in compiled.msl
    assert "enigma_q4_pair" in compiled.cuda
    # MetalPerformancePrimitives: the weights are the operation's left input
    # tensor, filled slot by slot at each slot's coordinates.
    mpp = enigma.compile(from_device("int4", enigma.f16), msl_version="4.0").msl
    assert "auto w = " in mpp and ".get_left_input_cooperative_tensor<half, half, float>();" in mpp
    assert "w.get_multidimensional_index(enigma_i)" in mpp and "enigma_q4_weight<half, enigma_q4_rows>(enigma_int4, " in mpp


def test_every_method_the_front_end_takes_is_declared_with_a_docstring():
    for front, stub in [(_cooperative.Matmul2d, _cooperative.Matmul2d), (ViewObj, _cooperative.TensorView), (CoopRef, _cooperative.CooperativeTensor)]:
        for name in _METHODS[front]:
            method = getattr(stub, name, None)
            assert callable(method) and inspect.getdoc(method), f"{stub.__name__}.{name}"


# --- errors: CompileError naming the file, the line and the kernel ----------


def k_dynamic_k(words: enigma.u32, scales: enigma.f16):
    op = enigma.matmul2d(enigma.matmul2d_descriptor(64, 64), enigma.execution_simdgroups(4))
    w = op.get_left_input_cooperative_tensor(enigma.f16)  # offending


def k_transposed(words: enigma.u32, scales: enigma.f16):
    op = enigma.matmul2d(enigma.matmul2d_descriptor(64, 64, 64, transpose_left=True), enigma.execution_simdgroups(4))
    w = op.get_left_input_cooperative_tensor(enigma.f16)  # offending


def k_integer_tensor(words: enigma.u32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.i32)  # offending


def k_bf16_weights(words: enigma.u32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.bf16)
    w.dequantize("int4", words, 0, 64, scales, 0, 64, 5)  # offending


def k_int8_code(words: enigma.u32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    w.dequantize("int8", words, 0, 64, scales, 0, 64, 5)  # offending


def k_vector_type_code(words: enigma.u32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    w.dequantize(enigma.int4, words, 0, 64, scales, 0, 64, 5)  # offending


def k_float_words(words: enigma.f32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    w.dequantize("fp4", words, 0, 64, scales, 0, 64, 5)  # offending


def k_f32_scales(words: enigma.u32, scales: enigma.f32):
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    w.dequantize("fp4", words, 0, 64, scales, 0, 64, 5)  # offending


def k_thread_words(words: enigma.u32, scales: enigma.f16):
    mine = enigma.thread_array(enigma.u32, 8)
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    w.dequantize("fp4", mine, 0, 64, scales, 0, 64, 5)  # offending


def k_missing_shift(words: enigma.u32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    w.dequantize("fp4", words, 0, 64, scales, 0, 64)  # offending


def k_as_a_value(words: enigma.u32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    x = w.dequantize("fp4", words, 0, 64, scales, 0, 64, 5)  # offending


def k_unknown_layout(words: enigma.u32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    w.dequantize("int4", words, 0, 64, scales, 0, 64, 5, layout="blocks")  # offending


def k_view(words: enigma.u32, scales: enigma.f16, B: enigma.f16):
    b = enigma.tensor(B, (64, 64))
    b.dequantize("fp4", words, 0, 64, scales, 0, 64, 5)  # offending


def k_per_thread_offset(words: enigma.u32, scales: enigma.f16):
    w = OP.get_left_input_cooperative_tensor(enigma.f16)
    w.dequantize("int4", words, enigma.thread_index_in_threadgroup(), 64, scales, 0, 64, 5)  # offending


ERRORS = [
    (k_dynamic_k, "get_left_input_cooperative_tensor needs the descriptor's k"),
    (k_transposed, "the left operand of a product with transpose_left=True is a view, not a cooperative tensor"),
    (k_integer_tensor, "get_left_input_cooperative_tensor makes a tensor of f16, bf16 or f32 (a product's operand), not i32"),
    (k_bf16_weights, "`w` holds bf16; dequantized weights fill an f32 or f16 cooperative tensor"),
    (k_int8_code, "the code of w.dequantize is 'int4', 'fp4' or 'uint4' (a constant), not 'int8'"),
    (k_vector_type_code, "the code of w.dequantize is the string 'int4', 'fp4' or 'uint4', not the value type enigma.int4"),
    (k_float_words, "the words of w.dequantize are packed 4-bit weights, eight to a word, u32; `words` holds f32"),
    (k_f32_scales, "the scales of w.dequantize are the groups' scales, f16; `scales` holds f32"),
    (k_thread_words, "the words of w.dequantize are a buffer or threadgroup array of u32"),
    (k_missing_shift, "w.dequantize needs the argument(s) group_shift"),
    (k_as_a_value, "`.dequantize(...)` is a statement; it has no value"),
    (k_unknown_layout, "the layout of w.dequantize is 'rows', 'fragments' or 'columns' (a constant), not 'blocks'"),
    (k_view, "enigma.TensorView has no method `dequantize` in a kernel (it has slice)"),
    (k_per_thread_offset, "`cooperative_dequantize` is issued by every thread of its scope (simdgroups(4)) together, but an offset, stride or group shift differs"),
]


@pytest.mark.parametrize("fn, message", ERRORS, ids=[fn.__name__ for fn, _ in ERRORS])
def test_bad_input_is_a_compile_error_at_its_line(fn, message):
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(enigma.kernel(fn))
    lines, first = inspect.getsourcelines(fn)
    line = first + next(i for i, text in enumerate(lines) if "# offending" in text)
    text = str(e.value)
    assert message in text, text
    assert f"{__file__}:{line}:" in text and fn.__name__ in text, text
