"""`enigma.ops`' element-wise operations as torch users call them: sigmoid,
exp, log, GELU in both forms (`approximate="none" | "tanh"`), and add/mul
with NumPy broadcasting, against float64 numpy references on the simulator
(or ENIGMA_TEST_DEVICE)."""
import math
import os

import numpy as np
import pytest

import enigma
import enigma.ops as ops

DEVICE = os.environ.get("ENIGMA_TEST_DEVICE", "cpu")
ERF = np.vectorize(math.erf)


@pytest.fixture(scope="module")
def rt():
    return enigma.MetalRuntime(DEVICE)


@pytest.mark.parametrize("n", [1, 7, 1000, 4097])
def test_unary_operations_match_float64(rt, n):
    x = np.random.default_rng(n).uniform(-6, 6, n).astype(np.float32)
    v = x.astype(np.float64)
    np.testing.assert_allclose(ops.sigmoid(x, rt=rt), 1 / (1 + np.exp(-v)), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(ops.exp(x, rt=rt), np.exp(v), rtol=2e-6)
    pos = np.abs(x) + np.float32(1e-3)
    np.testing.assert_allclose(ops.log(pos, rt=rt), np.log(pos.astype(np.float64)), rtol=2e-6, atol=1e-7)
    # erfc to 1.5e-7 absolute: GELU within |x| · 1e-7 or so.
    np.testing.assert_allclose(ops.gelu(x, rt=rt), 0.5 * v * (1 + ERF(v / math.sqrt(2))), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ops.gelu(x, approximate="none", rt=rt), ops.gelu(x, rt=rt))
    tanh = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    np.testing.assert_allclose(ops.gelu(x, approximate="tanh", rt=rt), tanh, rtol=1e-5, atol=1e-6)


def test_unary_operations_keep_half_types(rt):
    x = np.random.default_rng(3).uniform(-3, 3, (5, 33)).astype(np.float16)
    v = x.astype(np.float64)
    for name, want in [("sigmoid", 1 / (1 + np.exp(-v))), ("exp", np.exp(v)), ("gelu", 0.5 * v * (1 + ERF(v / math.sqrt(2))))]:
        got = getattr(ops, name)(x, rt=rt)
        assert got.dtype == np.float16 and got.shape == x.shape
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=name)
    assert np.isneginf(ops.log(np.zeros(3, np.float32), rt=rt)).all()
    with pytest.raises(ValueError, match="approximate is 'none' or 'tanh'"):
        ops.gelu(x, approximate="erf", rt=rt)


@pytest.mark.parametrize("sa, sb", [((4, 1, 3), (5, 1)), ((7,), (1,)), ((2, 3, 1000), (1000,)), ((1,), (3, 1)),
                                    ((), (2, 2)), ((6, 1), (1, 7)), ((1000, 1), (1000,))])
def test_add_and_mul_broadcast_as_numpy(rt, sa, sb):
    r = np.random.default_rng(len(sa) + len(sb))
    a = r.uniform(-2, 2, sa).astype(np.float32)
    b = r.uniform(-2, 2, sb).astype(np.float32)
    np.testing.assert_array_equal(ops.add(a, b, rt=rt), a + b)
    np.testing.assert_array_equal(ops.mul(a, b, rt=rt), a * b)
    # Either order, and on device arrays.
    got = ops.mul(enigma.asarray(np.ascontiguousarray(b), device=DEVICE), enigma.asarray(np.ascontiguousarray(a), device=DEVICE))
    assert isinstance(got, enigma.Array) and got.shape == np.broadcast_shapes(sa, sb)
    np.testing.assert_array_equal(got.numpy(), b * a)


def test_diagonal_scaling_by_broadcast(rt):
    # diag(d) @ B without a kernel of one's own: d[:, None] * B.
    d = np.arange(1, 6, dtype=np.float16)
    m = np.random.default_rng(9).uniform(-1, 1, (5, 9)).astype(np.float16)
    got = ops.mul(d.reshape(5, 1), m, rt=rt)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, (d[:, None] * m).astype(np.float16))
    with pytest.raises(enigma.DispatchError, match=r"shapes \[5, 9\] and \[5\] do not broadcast"):
        ops.add(m, d, rt=rt)


@pytest.mark.parametrize("sa, sb", [((3, 5), (3, 5)), ((4, 1, 3), (5, 1)), ((1000,), (1,))])
def test_div_is_true_division_with_broadcasting(rt, sa, sb):
    r = np.random.default_rng(17)
    a = r.uniform(-4, 4, sa).astype(np.float32)
    b = r.uniform(0.5, 4, sb).astype(np.float32)
    np.testing.assert_allclose(ops.div(a, b, rt=rt), a.astype(np.float64) / b, rtol=1e-6)


def log_softmax_ref(x, axis):
    v = x.astype(np.float64)
    m = v.max(axis, keepdims=True)
    return v - m - np.log(np.exp(v - m).sum(axis, keepdims=True))


@pytest.mark.parametrize("shape", [(4, 7), (3, 1000), (2, 5, 9), (7,)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_numpy(rt, shape, reduction):
    r = np.random.default_rng(len(shape))
    x = r.uniform(-4, 4, shape).astype(np.float32)
    axis = 0 if len(shape) == 1 else 1
    classes = shape[axis]
    tshape = shape[:axis] + shape[axis + 1:]
    t = r.integers(0, classes, tshape).astype(np.int64)  # torch's index type, converted
    if t.size > 2:
        t.flat[1] = -100  # ignored
    logp = log_softmax_ref(x, axis)
    safe = np.where(t == -100, 0, t)
    picked = np.take_along_axis(logp, np.expand_dims(safe, axis), axis).squeeze(axis)
    losses = np.where(t == -100, 0.0, -picked)
    want = {"none": losses, "sum": losses.sum(), "mean": losses.sum() / max(1, (t != -100).sum())}[reduction]
    got = ops.cross_entropy(x, t, reduction=reduction, rt=rt)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cross_entropy_refuses_bad_targets(rt):
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"target has shape \(4,\)"):
        ops.cross_entropy(x, np.zeros(4, np.int64), rt=rt)
    with pytest.raises(TypeError, match="integer class indices"):
        ops.cross_entropy(x, np.zeros(3, np.float32), rt=rt)
    np.testing.assert_allclose(ops.cross_entropy(x, np.array([4, 0, 1]), reduction="none", rt=rt), [np.inf, np.log(4), np.log(4)], rtol=1e-6)


def pool_ref(x, k, s, p, kind):
    """Pooling by a loop over windows, in float64, NCHW."""
    *lead, h, w = x.shape
    planes = x.reshape(-1, h, w).astype(np.float64)
    oh, ow = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    out = np.empty((planes.shape[0], oh, ow))
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * s[0] - p[0], j * s[1] - p[1]
            win = planes[:, max(y0, 0):min(y0 + k[0], h), max(x0, 0):min(x0 + k[1], w)]
            if kind == "max":
                out[:, i, j] = win.max((1, 2))
            elif kind == "avg":
                out[:, i, j] = win.sum((1, 2)) / (k[0] * k[1])
            else:
                out[:, i, j] = win.mean((1, 2))
    return out.reshape(*lead, oh, ow)


@pytest.mark.parametrize("shape, k, s, p", [((2, 3, 7, 9), 2, None, 0), ((1, 2, 8, 8), 3, 1, 1), ((3, 13, 5), (3, 2), (2, 3), 1),
                                           ((1, 1, 1, 1), 1, 1, 0), ((2, 4, 32, 33), (5, 4), (3, 2), 2)])
def test_pooling_matches_a_loop(rt, shape, k, s, p):
    x = np.random.default_rng(sum(shape)).uniform(-4, 4, shape).astype(np.float32)
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    kk, pp = pair(k), pair(p)
    ss = kk if s is None else pair(s)
    np.testing.assert_allclose(ops.max_pool2d(x, k, s, p, rt=rt), pool_ref(x, kk, ss, pp, "max"), rtol=1e-6)
    np.testing.assert_allclose(ops.avg_pool2d(x, k, s, p, rt=rt), pool_ref(x, kk, ss, pp, "avg"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.avg_pool2d(x, k, s, p, count_include_pad=False, rt=rt), pool_ref(x, kk, ss, pp, "valid"),
                               rtol=1e-5, atol=1e-6)


def test_pooling_refuses_bad_windows(rt):
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match=r"takes \[N, C, H, W\] or \[C, H, W\]"):
        ops.max_pool2d(x[0, 0], 2, rt=rt)
    with pytest.raises(enigma.DispatchError, match="more than half the window"):
        ops.max_pool2d(x, 2, 2, 2, rt=rt)
    with pytest.raises(TypeError, match="kernel_size must be an int or a pair"):
        ops.avg_pool2d(x, (2, 2, 2), rt=rt)


def conv_ref(x, w, b, stride, padding, dilation, groups):
    """conv2d by loops over the window in float64 (NCHW, OIHW)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c_in, h, wd = x.shape
    c_out, per_group, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, c_out, oh, ow))
    for co in range(c_out):
        g = co // (c_out // groups)
        for ky in range(kh):
            for kx in range(kw):
                ys, xs = ky * dilation[0], kx * dilation[1]
                patch = xp[:, g * per_group:(g + 1) * per_group, ys:ys + stride[0] * oh:stride[0], xs:xs + stride[1] * ow:stride[1]]
                out[:, co] += np.einsum("nchw,c->nhw", patch, w[co, :, ky, kx])
    return out + (0 if b is None else b.astype(np.float64)[None, :, None, None])


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", [
    ((2, 3, 7, 9), (5, 3, 3, 3), 1, 1, 1, 1),
    ((1, 3, 8, 8), (4, 3, 3, 2), (2, 3), (0, 2), 1, 1),
    ((2, 4, 9, 7), (8, 1, 3, 3), 1, 1, 1, 4),      # depthwise (channel multiplier 2)
    ((2, 6, 5, 5), (4, 6, 1, 1), 1, 0, 1, 1),      # pointwise
    ((1, 6, 10, 10), (4, 3, 3, 3), 1, 2, 2, 2),    # grouped, dilated
    ((3, 7, 7), (2, 3, 2, 2), 1, 0, 1, 1),         # one unbatched image
])
def test_conv2d_matches_a_loop(rt, xs, ws, stride, padding, dilation, groups):
    r = np.random.default_rng(sum(xs))
    x = r.uniform(-1, 1, xs).astype(np.float32)
    w = r.uniform(-1, 1, ws).astype(np.float32)
    b = r.uniform(-1, 1, ws[0]).astype(np.float32)
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    batched = x if x.ndim == 4 else x[None]
    for bias in (None, b):
        want = conv_ref(batched, w, bias, pair(stride), pair(padding), pair(dilation), groups)
        want = want if x.ndim == 4 else want[0]
        got = ops.conv2d(x, w, bias, stride, padding, dilation, groups, rt=rt)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    h = ops.conv2d(x.astype(np.float16), w.astype(np.float16), b.astype(np.float16), stride, padding, dilation, groups, rt=rt)
    assert h.dtype == np.float16
    np.testing.assert_allclose(h, conv_ref(batched.astype(np.float16), w.astype(np.float16), b.astype(np.float16), pair(stride),
                                           pair(padding), pair(dilation), groups).reshape(h.shape), rtol=2e-3, atol=2e-3)


def test_conv2d_refuses_shapes_that_do_not_fit(rt):
    x = np.zeros((1, 4, 5, 5), np.float32)
    with pytest.raises(ValueError, match="C_in / groups"):
        ops.conv2d(x, np.zeros((2, 3, 3, 3), np.float32), rt=rt)
    with pytest.raises(enigma.DispatchError, match="larger than the padded input"):
        ops.conv2d(x, np.zeros((2, 4, 7, 3), np.float32), rt=rt)
