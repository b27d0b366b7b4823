"""4-bit weights through `enigma.ops`: quantize / dequantize / qmatmul
against an independent numpy decoding of the packed words, written here
(E2M1 table, U4B8 = nibble - 8, MLX's affine codes), on the simulator (or
ENIGMA_TEST_DEVICE)."""
import os

import numpy as np
import pytest

import enigma
import enigma.ops as ops

DEVICE = os.environ.get("ENIGMA_TEST_DEVICE", "cpu")

# E2M1 codes 0..15 (sign, 2 exponent bits, 1 mantissa bit).
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


@pytest.fixture(scope="module")
def rt():
    return enigma.MetalRuntime(DEVICE)


def nibbles(words, axis):
    """The 8 nibbles of each uint32 (lowest first), spread along ``axis``."""
    shifts = (4 * np.arange(8, dtype=np.uint32))
    if axis == 0:   # [K/8, N] -> [K, N]
        codes = (words[:, None, :] >> shifts[None, :, None]) & 0xF
        return codes.reshape(-1, words.shape[1])
    codes = (words[:, :, None] >> shifts[None, None, :]) & 0xF   # [N, K/8] -> [N, K]
    return codes.reshape(words.shape[0], -1)


def decode(format, packed, scales, biases=None):
    """The [K, N] float32 matrix, decoded with numpy only."""
    if format == "mlx_affine":
        codes = nibbles(packed, 1).astype(np.float32)                  # [N, K]
        group = codes.shape[1] // scales.shape[1]
        s = np.repeat(scales.astype(np.float32), group, axis=1)
        b = np.repeat(biases.astype(np.float32), group, axis=1)
        return (codes * s + b).T
    codes = nibbles(packed, 0)
    values = E2M1[codes] if format == "fp4" else codes.astype(np.float32) - 8
    group = codes.shape[0] // scales.shape[0]
    return values * np.repeat(scales.astype(np.float32), group, axis=0)


@pytest.mark.parametrize("format", ["fp4", "int4"])
@pytest.mark.parametrize("group", [32, 64, 128])
def test_quantize_matches_the_numpy_decoding(format, group):
    k, n = 256, 7
    w = np.random.default_rng(group).uniform(-2, 2, (k, n)).astype(np.float32)
    packed, scales = ops.quantize(w, format, group=group)
    assert packed.dtype == np.uint32 and packed.shape == (k // 8, n)
    assert scales.dtype == np.float16 and scales.shape == (k // group, n)
    want = decode(format, packed, scales)
    np.testing.assert_array_equal(ops.dequantize(packed, scales, format), want)
    # Nearest representable value: within half the widest step (FP4: 4 -> 6).
    step = np.repeat(scales.astype(np.float32), group, axis=0) * (1.0 if format == "fp4" else 0.5)
    assert np.all(np.abs(want - w) <= step * 1.001 + 1e-3)


def test_representable_values_round_trip_exactly():
    k, n = 64, 4
    w = np.stack([np.tile(E2M1, k // 16) * (2.0 ** -c) for c in range(n)], axis=1).astype(np.float32)
    packed, scales = ops.quantize(w, "fp4", group=32)
    np.testing.assert_array_equal(ops.dequantize(packed, scales, "fp4"), w)
    np.testing.assert_array_equal(scales.astype(np.float32), np.array([[1, 0.5, 0.25, 0.125]] * 2, np.float32))
    wi = (np.arange(k * n).reshape(k, n) // n % 16 - 8).astype(np.float32)   # -8 .. 7 in every group
    packed, scales = ops.quantize(wi * 0.25, "int4", group=64)
    got = ops.dequantize(packed, scales, "int4")
    # Scale = max|w| / 7 = 2/7 rounded to f16: the value -8 · 0.25 = -2 lands
    # on the code -7; everything is within half a step.
    np.testing.assert_allclose(got, decode("int4", packed, scales))
    assert np.all(np.abs(got - wi * 0.25) <= scales.astype(np.float32).max() / 2 + 1e-3)


def test_nibble_order_and_int4_codes():
    w = np.zeros((32, 2), np.float32)
    w[:8, 1] = np.arange(8) - 7                    # codes 1 .. 8 at scale 1
    packed, scales = ops.quantize(w, "int4", group=32)
    assert packed[0, 1] == 0x87654321 and packed[0, 0] == 0x88888888
    assert scales[0, 1] == 1.0


def test_mlx_affine_layout():
    k, n = 128, 3
    w = np.random.default_rng(3).uniform(-1, 3, (k, n)).astype(np.float32)
    packed, scales, biases = ops.quantize(w, "mlx_affine")
    assert packed.shape == (n, k // 8) and scales.shape == (n, k // 64) and biases.shape == (n, k // 64)
    want = decode("mlx_affine", packed, scales, biases)
    np.testing.assert_array_equal(ops.dequantize(packed, scales, "mlx_affine", biases=biases), want)
    step = np.repeat(scales.astype(np.float32), 64, axis=1).T
    assert np.all(np.abs(want - w) <= step * 0.5 + 2e-3)


def decode_product_error(format):
    """The decode kernel's rounding beyond f32 sums, per unit of sum |a·w|:
    INT4 and FP4 sum sixteen products in float16 (gamma_16 = 16u / (1 - 16u),
    u = 2^-11; Rust: qmatmul::f16_product_error)."""
    nu = 16 * 2.0**-11
    return nu / (1 - nu)


@pytest.mark.parametrize("format", ["fp4", "int4"])
@pytest.mark.parametrize("m,n,k,group", [(1, 1, 32, 32), (3, 7, 64, 64), (8, 33, 256, 128), (1, 100, 96, 32), (5, 12, 128, 32)])
def test_qmatmul_matches_numpy(rt, format, m, n, k, group):
    r = np.random.default_rng(m * 1000 + n + k)
    w = r.uniform(-1, 1, (k, n)).astype(np.float32)
    a = r.uniform(-1, 1, (m, k)).astype(np.float16)
    packed, scales = ops.quantize(w, format, group=group)
    want = a.astype(np.float64) @ decode(format, packed, scales).astype(np.float64)
    bound = np.abs(a.astype(np.float64)) @ np.abs(decode(format, packed, scales).astype(np.float64))
    # Above the decode kernel's rows the tensor-core kernel rounds each
    # value · scale to float16 once (half a unit in the last place, 2^-11);
    # the decode kernel sums products in float16 sixteen at a time.
    per_product = 1e-6 + (2.0**-11 if m > ops.QMATMUL_DECODE_ROWS else decode_product_error(format))
    c32 = ops.qmatmul(a, packed, scales, format, out_dtype=np.float32, rt=rt)
    assert c32.dtype == np.float32 and c32.shape == (m, n)
    assert np.all(np.abs(c32 - want) <= bound * per_product + 1e-7)
    c16 = ops.qmatmul(a, packed, scales, format, rt=rt)
    assert c16.dtype == np.float16
    assert np.all(np.abs(c16.astype(np.float64) - want) <= np.abs(want) / 1024 + bound * per_product + 1e-7)


def check_tensor_core_product(rt, format, m, n, k, group, seed, layout="rows", **options):
    """``qmatmul`` with ``options`` against the float64 product: the
    tensor-core kernels round each dequantized weight to float16 before
    the products, one more rounding per weight in the bound."""
    r = np.random.default_rng(seed)
    w = r.uniform(-1, 1, (k, n)).astype(np.float32)
    a = r.uniform(-1, 1, (m, k)).astype(np.float16)
    rows, scales = ops.quantize(w, format, group=group)
    packed = rows if layout == "rows" else ops.quantize(w, format, group=group, layout=layout)[0]
    dq = decode(format, rows, scales).astype(np.float64)
    want = a.astype(np.float64) @ dq
    bound = np.abs(a.astype(np.float64)) @ np.abs(dq)
    c = ops.qmatmul(a, packed, scales, format, out_dtype=np.float32, layout=layout, rt=rt, **options)
    assert c.shape == (m, n)
    assert np.all(np.abs(c - want) <= bound * (1e-6 + 2.0 ** -11) + 1e-7)


@pytest.mark.parametrize("variant", ["separate", "fused"])
@pytest.mark.parametrize("format", ["fp4", "int4"])
@pytest.mark.parametrize("m,n,k,group", [(1, 8, 64, 32), (9, 100, 192, 64), (17, 36, 128, 32)])
def test_qmatmul_variants_match_numpy(rt, variant, format, m, n, k, group):
    check_tensor_core_product(rt, format, m, n, k, group, m * 1000 + n + k + 7, variant=variant)


def test_qmatmul_refuses_an_unknown_variant_affine_weights_and_an_n_the_cooperative_kernel_cannot_copy(rt):
    w = np.ones((64, 4), dtype=np.float32)
    a = np.ones((2, 64), dtype=np.float16)
    packed, scales = ops.quantize(w, "int4", group=64)
    with pytest.raises(ValueError, match="variant is 'auto', 'separate', 'fused' or 'cooperative', not 'tiled'"):
        ops.qmatmul(a, packed, scales, "int4", variant="tiled", rt=rt)
    packed, scales, biases = ops.quantize(w, "mlx_affine", group=64)
    with pytest.raises(Exception, match="mlx_affine"):
        ops.qmatmul(a, packed, scales, "mlx_affine", biases=biases, variant="fused", rt=rt)
    # MLX's affine weights on cooperative tensors: N whole tiles of columns.
    packed, scales, biases = ops.quantize(np.ones((64, 72), dtype=np.float32), "mlx_affine", group=64)
    with pytest.raises(Exception, match="mlx_affine weights of N = 72 and K = 64 need N a multiple of the 64-column tile"):
        ops.qmatmul(a, packed, scales, "mlx_affine", biases=biases, variant="cooperative", rt=rt)
    # The kernel on cooperative tensors copies the scales 16 bytes at a time.
    packed, scales = ops.quantize(np.ones((64, 36), dtype=np.float32), "int4", group=64)
    with pytest.raises(Exception, match="N = 36 must be a multiple of 8"):
        ops.qmatmul(a, packed, scales, "int4", variant="cooperative", rt=rt)


@pytest.mark.parametrize("layout", ["rows", "fragments"])
@pytest.mark.parametrize("format", ["fp4", "int4"])
@pytest.mark.parametrize("m,n,k,group", [(1, 16, 64, 32), (17, 48, 192, 64), (9, 112, 128, 128)])
def test_qmatmul_on_cooperative_tensors_matches_numpy(rt, layout, format, m, n, k, group):
    """The kernel on cooperative tensors, asked for at M where the library
    would not choose it, in both layouts of the words."""
    check_tensor_core_product(rt, format, m, n, k, group, m * 1000 + n + k + 13, layout=layout, variant="cooperative")


@pytest.mark.parametrize("m,n,k,group,variant", [(1, 1, 64, 32, "auto"), (3, 7, 128, 128, "auto"), (8, 33, 192, 64, "auto"), (9, 100, 128, 64, "auto"),
                                                 (1, 128, 128, 64, "cooperative"), (17, 256, 256, 32, "cooperative"), (40, 128, 384, 128, "cooperative")])
def test_qmatmul_mlx_affine_matches_numpy(rt, m, n, k, group, variant):
    """MLX's affine weights against numpy's decoding of them: by the decode
    kernel (``"auto"`` on the simulator) and on cooperative tensors."""
    r = np.random.default_rng(m * 1000 + n + k + 7)
    # Columns of different offsets, so that the biases matter.
    w = (r.uniform(-1, 1, (k, n)) + 0.25 * np.arange(n)).astype(np.float32)
    a = r.uniform(-1, 1, (m, k)).astype(np.float16)
    packed, scales, biases = ops.quantize(w, "mlx_affine", group=group)
    dq = decode("mlx_affine", packed, scales, biases).astype(np.float64)
    want = a.astype(np.float64) @ dq
    # The kernel sums scale · code · a and bias · a apart: bound by both.
    codes = nibbles(packed, 1).astype(np.float64).T                   # [K, N]
    s = np.repeat(scales.astype(np.float64), group, axis=1).T
    b = np.repeat(biases.astype(np.float64), group, axis=1).T
    bound = np.abs(a.astype(np.float64)) @ (np.abs(s * codes) + np.abs(b))
    # On cooperative tensors each weight is rounded to float16 (its
    # code · scale + bias, once), as every tensor-core product rounds it.
    rounding = 2.0 ** -11 if variant == "cooperative" else 3e-6
    c32 = ops.qmatmul(a, packed, scales, "mlx_affine", out_dtype=np.float32, biases=biases, variant=variant, rt=rt)
    assert c32.dtype == np.float32 and c32.shape == (m, n)
    assert np.all(np.abs(c32 - want) <= bound * rounding + 1e-7)
    c16 = ops.qmatmul(a, packed, scales, "mlx_affine", biases=biases, variant=variant, rt=rt)
    assert c16.dtype == np.float16 and c16.shape == (m, n)
    assert np.all(np.abs(c16.astype(np.float64) - want) <= np.abs(want) / 1024 + bound * rounding + 1e-7)
    with pytest.raises(ValueError, match=r"biases go with format='mlx_affine' only"):
        ops.qmatmul(a, packed, scales, "mlx_affine", rt=rt)
    with pytest.raises(TypeError, match=r"biases must be a float16 array"):
        ops.qmatmul(a, packed, scales, "mlx_affine", biases=biases.astype(np.float32), rt=rt)


def test_qmatmul_takes_a_vector(rt):
    w = np.random.default_rng(9).uniform(-1, 1, (64, 10)).astype(np.float32)
    packed, scales = ops.quantize(w, "int4", group=64)
    x = np.linspace(-1, 1, 64).astype(np.float16)
    y = ops.qmatmul(x, packed, scales, "int4", out_dtype=np.float32, rt=rt)
    assert y.shape == (10,)
    w64 = decode("int4", packed, scales).astype(np.float64)
    bound = np.abs(x.astype(np.float64)) @ np.abs(w64) * (decode_product_error("int4") + 1e-6) + 1e-7
    assert np.all(np.abs(y - x.astype(np.float64) @ w64) <= bound)


def test_errors_name_the_numbers(rt):
    with pytest.raises(ValueError, match=r"K = 12 is not a multiple of 8"):
        ops.quantize(np.zeros((12, 3), np.float32), "fp4", group=32)
    with pytest.raises(ValueError, match=r"K = 96 is not a multiple of the group size 64"):
        ops.quantize(np.zeros((96, 3), np.float32), "int4", group=64)
    with pytest.raises(ValueError, match=r"group size 16 is not supported"):
        ops.quantize(np.zeros((64, 3), np.float32), "int4", group=16)
    with pytest.raises(ValueError, match=r"format must be one of"):
        ops.quantize(np.zeros((64, 3), np.float32), "nf4")
    packed, scales = ops.quantize(np.ones((64, 3), np.float32), "fp4", group=32)
    with pytest.raises(ValueError, match=r"a must be \[M, 64\]"):
        ops.qmatmul(np.ones((2, 32), np.float16), packed, scales, rt=rt)


def fragment_codes(packed):
    """The [K, N] codes of fragment-ordered words ([K/64, 8·N]), placed with
    numpy from the layout's definition: in each unit of 64 K values × 16
    columns, nibble h + 2·half + 4·p of word 4·l + q is
    B[16q + 8h + 2(l % 4) + p][8·half + l / 4]."""
    units_k, width = packed.shape
    k, n = 64 * units_k, width // 8
    codes = np.zeros((k, n), dtype=np.uint32)
    for ku in range(units_k):
        for nu in range(n // 16):
            unit = packed[ku, nu * 128:(nu + 1) * 128]
            for lane in range(32):
                for q in range(4):
                    word = unit[4 * lane + q]
                    for h in range(2):
                        for half in range(2):
                            for p in range(2):
                                row = 64 * ku + 16 * q + 8 * h + 2 * (lane % 4) + p
                                col = 16 * nu + 8 * half + lane // 4
                                codes[row, col] = (word >> (4 * (h + 2 * half + 4 * p))) & 0xF
    return codes


@pytest.mark.parametrize("format", ["fp4", "int4"])
def test_fragment_layout_holds_the_same_codes(format):
    k, n = 128, 32
    w = np.random.default_rng(5).uniform(-2, 2, (k, n)).astype(np.float32)
    rows, scales = ops.quantize(w, format, group=64)
    packed, scales_f = ops.quantize(w, format, group=64, layout="fragments")
    assert packed.dtype == np.uint32 and packed.shape == (k // 64, 8 * n)
    np.testing.assert_array_equal(scales_f, scales)
    np.testing.assert_array_equal(fragment_codes(packed), nibbles(rows, 0))
    np.testing.assert_array_equal(ops.dequantize(packed, scales, format, layout="fragments"), decode(format, rows, scales))
    with pytest.raises(ValueError, match="multiple of 64"):
        ops.quantize(w[:96], format, group=32, layout="fragments")
    with pytest.raises(ValueError, match="layout must be"):
        ops.quantize(w, format, layout="columns")


@pytest.mark.parametrize("format", ["fp4", "int4"])
@pytest.mark.parametrize("m,n,k,group", [(1, 16, 64, 64), (5, 48, 192, 64), (17, 128, 128, 128)])
def test_qmatmul_on_fragment_ordered_weights_matches_numpy(rt, format, m, n, k, group):
    check_tensor_core_product(rt, format, m, n, k, group, m * 1000 + n + k + 11, layout="fragments")
