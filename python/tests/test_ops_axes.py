"""`enigma.ops` with torch's conventions for shapes — `dim=` (negative,
tuples of adjacent axes, `keepdim=`) on the reductions, softmax and
log-softmax, argmax/argmin, cumsum/cumprod; the norms over a trailing
`normalized_shape` with optional weight and bias; `matmul` with batch
dimensions and `bmm` — against float64 numpy references at awkward shapes
(axes of 1, 7 and 1000; first, middle and last), on the simulator (or
ENIGMA_TEST_DEVICE)."""
import os

import numpy as np
import pytest

import enigma
import enigma.ops as ops

DEVICE = os.environ.get("ENIGMA_TEST_DEVICE", "cpu")

# (shape, dim): the axis first, in the middle, last, negative, of size 1,
# a tuple of adjacent axes.
CASES = [
    ((7,), 0),
    ((3, 1000), 0),
    ((3, 1000), -1),
    ((2, 7, 5), 1),
    ((2, 7, 5), 0),
    ((2, 7, 5), -1),
    ((1, 1, 9), 1),
    ((4, 3, 5, 2), (1, 2)),
    ((4, 3, 5, 2), (-2, -1)),
]


@pytest.fixture(scope="module")
def rt():
    return enigma.MetalRuntime(DEVICE)


def data(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-4, 4, shape).astype(dtype)


def axes_of(dim, nd):
    return tuple(d % nd for d in (dim if isinstance(dim, tuple) else (dim,)))


@pytest.mark.parametrize("shape, dim", CASES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_over_dims_match_numpy(rt, shape, dim, keepdim):
    x = data(shape, len(shape))
    axes = axes_of(dim, len(shape))
    ref = x.astype(np.float64)
    n = np.prod([shape[a] for a in axes])
    for name, want, tol in [("sum", ref.sum(axes, keepdims=keepdim), 1e-6 * n), ("mean", ref.mean(axes, keepdims=keepdim), 1e-6),
                            ("max", ref.max(axes, keepdims=keepdim), 0), ("min", ref.min(axes, keepdims=keepdim), 0)]:
        got = getattr(ops, name)(x, dim, keepdim, rt=rt)
        assert got.dtype == np.float32 and got.shape == want.shape, (name, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 4, err_msg=name)


def test_reductions_keep_their_old_forms(rt):
    x = data((3, 5), 3)
    s = ops.sum(x, rt=rt)
    assert np.ndim(s) == 0 and abs(float(s) - x.astype(np.float64).sum()) < 1e-4
    assert ops.max(x, rt=rt) == x.max() and ops.min(x, rt=rt) == x.min()
    assert ops.sum(x, keepdim=True, rt=rt).shape == (1, 1)
    # A 0-d array has the one axis 0 (or -1).
    assert ops.sum(np.float32(2.5).reshape(()), 0, rt=rt).shape == ()


def test_reductions_of_half_types_are_float32(rt):
    x = data((5, 33, 3), 4, np.float16)
    got = ops.sum(x, 1, rt=rt)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    bits = (data((4, 9), 5).view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 bits
    values = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    np.testing.assert_allclose(ops.max(bits, 0, dtype="bf16", rt=rt), values.max(0))


@pytest.mark.parametrize("shape, dim", [c for c in CASES if not isinstance(c[1], tuple)] + [((2, 7, 5), None)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_and_argmin_match_numpy(rt, shape, dim, keepdim):
    # Few distinct values: ties, where the first index wins as in numpy and torch.
    x = np.round(data(shape, 11)).astype(np.float32)
    for name in ("argmax", "argmin"):
        got = getattr(ops, name)(x, dim, keepdim, rt=rt)
        want = getattr(np, name)(x, axis=dim, keepdims=keepdim)
        assert got.dtype == np.int32 and np.shape(got) == np.shape(want), (name, np.shape(got), np.shape(want))
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_argmax_takes_a_nan_as_largest(rt):
    x = np.array([[1, np.nan, 3], [np.nan, 5, np.nan]], np.float32)
    np.testing.assert_array_equal(ops.argmax(x, 1, rt=rt), [1, 0])
    np.testing.assert_array_equal(ops.argmin(x, 0, rt=rt), [1, 0, 1])


def softmax_ref(x, dim):
    v = x.astype(np.float64)
    e = np.exp(v - v.max(dim, keepdims=True))
    return e / e.sum(dim, keepdims=True), v - v.max(dim, keepdims=True) - np.log(e.sum(dim, keepdims=True))


@pytest.mark.parametrize("shape, dim", [c for c in CASES if not isinstance(c[1], tuple)])
def test_softmax_and_log_softmax_over_dims(rt, shape, dim):
    x = data(shape, 21)
    soft, logs = softmax_ref(x, dim)
    np.testing.assert_allclose(ops.softmax(x, dim, rt=rt), soft, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ops.log_softmax(x, dim, rt=rt), logs, rtol=1e-5, atol=1e-5)
    h = x.astype(np.float16)
    soft, logs = softmax_ref(h, dim)
    got = ops.log_softmax(h, dim, rt=rt)
    assert got.dtype == np.float16 and got.shape == shape
    np.testing.assert_allclose(got, logs, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("shape, dim", [c for c in CASES if not isinstance(c[1], tuple)])
def test_cumsum_and_cumprod_over_dims(rt, shape, dim):
    x = data(shape, 31)
    np.testing.assert_allclose(ops.cumsum(x, dim, rt=rt), np.cumsum(x.astype(np.float64), dim), rtol=1e-5, atol=1e-4 * np.sqrt(shape[dim]))
    f = (1 + x / 256).astype(np.float32)
    np.testing.assert_allclose(ops.cumprod(f, dim, rt=rt), np.cumprod(f.astype(np.float64), dim), rtol=1e-5 * np.sqrt(shape[dim]))
    i = np.round(x).astype(np.int32)
    got = ops.cumsum(i, dim, rt=rt)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.cumsum(i, dim))


def test_enigma_arrays_stay_on_their_device(rt):
    x = data((3, 7, 5), 41)
    a = enigma.asarray(x, device=DEVICE)
    got = ops.softmax(a, 1)
    assert isinstance(got, enigma.Array) and got.shape == (3, 7, 5)
    np.testing.assert_allclose(got.numpy(), softmax_ref(x, 1)[0], rtol=1e-5, atol=1e-7)
    s = ops.sum(a, (0, 1), keepdim=True)
    assert isinstance(s, enigma.Array) and s.shape == (1, 1, 5)
    np.testing.assert_allclose(s.numpy(), x.astype(np.float64).sum((0, 1), keepdims=True), rtol=1e-5)


def test_bad_dims_are_refused(rt):
    x = data((2, 3, 4), 1)
    with pytest.raises(IndexError, match="dim 3 is out of range for a 3-D array"):
        ops.sum(x, 3, rt=rt)
    with pytest.raises(ValueError, match="not adjacent"):
        ops.mean(x, (0, 2), rt=rt)
    with pytest.raises(TypeError, match="dim must be an int"):
        ops.softmax(x, 1.0, rt=rt)
    with pytest.raises(TypeError, match="dim must be an int or None"):
        ops.argmax(x, (0, 1), rt=rt)


def norm_ref(x, trailing, weight, bias, layer, eps=1e-5):
    v = x.astype(np.float64)
    axes = tuple(range(x.ndim - trailing, x.ndim))
    if layer:
        v = v - v.mean(axes, keepdims=True)
        y = v / np.sqrt((v**2).mean(axes, keepdims=True) + eps)
    else:
        y = v / np.sqrt((v**2).mean(axes, keepdims=True) + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


@pytest.mark.parametrize("shape, normalized", [((4, 7), (7,)), ((2, 3, 5, 4), (5, 4)), ((6,), 6), ((3, 2, 1000), [1000])])
def test_norms_over_a_trailing_shape(rt, shape, normalized):
    x = data(shape, 51)
    ns = (normalized,) if isinstance(normalized, int) else tuple(normalized)
    w = data(ns, 52)
    b = data(ns, 53)
    for weight, bias in [(None, None), (w, None), (w, b)]:
        got = ops.layer_norm(x, normalized, weight, bias, rt=rt)
        np.testing.assert_allclose(got, norm_ref(x, len(ns), weight, bias, True), rtol=1e-4, atol=1e-4)
    for weight in (None, w):
        got = ops.rms_norm(x, normalized, weight, eps=1e-6, rt=rt)
        assert got.shape == shape
        np.testing.assert_allclose(got, norm_ref(x, len(ns), weight, None, False, 1e-6), rtol=1e-4, atol=1e-4)


def test_norms_keep_the_weight_first_form_and_fill_half_types(rt):
    x = data((3, 8), 61)
    w, b = data(8, 62), data(8, 63)
    np.testing.assert_allclose(ops.layer_norm(x, w, b, rt=rt), norm_ref(x, 1, w, b, True), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ops.rms_norm(x, w, rt=rt), norm_ref(x, 1, w, None, False), rtol=1e-4, atol=1e-4)
    h = x.astype(np.float16)
    np.testing.assert_allclose(ops.rms_norm(h, rt=rt), norm_ref(h, 1, None, None, False), rtol=2e-3, atol=2e-3)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)
    values = (bits.astype(np.uint32) << 16).view(np.float32)
    got = ops.layer_norm(bits, 8, dtype="bf16", rt=rt)
    got = (got.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_allclose(got, norm_ref(values, 1, None, None, True), rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError, match=r"normalized_shape \(3,\) is not the trailing shape"):
        ops.rms_norm(x, 3, rt=rt)
    with pytest.raises(TypeError, match="takes no further bias"):
        ops.layer_norm(x, w, b, b, rt=rt)


def matmul_ref(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


@pytest.mark.parametrize("sa, sb", [((3, 7, 5), (3, 5, 13)), ((2, 2, 67, 45), (2, 2, 45, 101)), ((4, 7, 5), (5, 3)),
                                    ((5,), (5, 3)), ((2, 7, 5), (5,)), ((1, 1, 1), (1, 1, 1)),
                                    # Broadcast batches: one a for every b, b of 1s, leading 1s.
                                    ((7, 5), (4, 5, 13)), ((1, 67, 45), (2, 3, 45, 101)), ((5,), (3, 5, 2)),
                                    ((4, 7, 5), (1, 5, 3)), ((3, 7, 5), (1, 3, 5, 2))])
def test_matmul_with_batch_dimensions(rt, sa, sb):
    a, b = data(sa, 71) / 4, data(sb, 72) / 4
    want = matmul_ref(a, b)
    got = ops.matmul(a, b, rt=rt)
    assert got.dtype == np.float32 and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # Half inputs give a half result, as torch's: f32 accumulation rounded once.
    ha, hb = a.astype(np.float16), b.astype(np.float16)
    h = ops.matmul(ha, hb, rt=rt)
    assert h.dtype == np.float16 and h.shape == want.shape
    np.testing.assert_allclose(h.astype(np.float64), matmul_ref(ha, hb), rtol=1e-3, atol=1e-3)


def test_bmm_and_refused_batches(rt):
    a, b = data((3, 7, 5), 81), data((3, 5, 2), 82)
    np.testing.assert_allclose(ops.bmm(a, b, rt=rt), matmul_ref(a, b), rtol=1e-5, atol=1e-5)
    ha, hb = data((3, 33, 24), 83).astype(np.float16), data((3, 24, 40), 84).astype(np.float16)
    h = ops.bmm(ha, hb, rt=rt)
    assert h.dtype == np.float16 and h.shape == (3, 33, 40)
    np.testing.assert_allclose(h.astype(np.float64), matmul_ref(ha, hb), rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="bmm takes"):
        ops.bmm(a, b[0], rt=rt)
    with pytest.raises(ValueError, match=r"both broadcast \(to \(2, 3\)\)"):
        ops.matmul(data((2, 1, 7, 5), 85), data((1, 3, 5, 2), 86), rt=rt)
    with pytest.raises(ValueError, match="do not broadcast"):
        ops.matmul(data((2, 7, 5), 85), b, rt=rt)
    with pytest.raises(ValueError, match="inner sizes"):
        ops.matmul(a, a, rt=rt)
