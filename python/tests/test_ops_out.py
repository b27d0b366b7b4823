"""`out=` on every operation of `enigma.ops`: the result written into the
caller's array (numpy arrays, `enigma.Array`s, torch CPU tensors where
torch is installed), the same object returned, values against float64
numpy references computed here; and the refusals — wrong shape, type, kind
or device, read-only or strided `out` — each raised before `out` is
touched. On the simulator (or ENIGMA_TEST_DEVICE)."""
import math
import os

import numpy as np
import pytest

import enigma
import enigma.ops as ops

DEVICE = os.environ.get("ENIGMA_TEST_DEVICE", "cpu")
SENTINEL = -12345.0


@pytest.fixture(scope="module")
def rt():
    return enigma.MetalRuntime(DEVICE)


def data(shape, seed=0, lo=-3.0, hi=3.0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def filled(shape, dtype=np.float32):
    return np.full(shape, SENTINEL if np.dtype(dtype).kind == "f" else -7, dtype=dtype)


def erf(v):
    return np.vectorize(math.erf)(v)


def softmax64(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# (name, call(x, out), reference(x64), input range, tolerance)
UNARY = [
    ("relu", lambda x, **k: ops.relu(x, **k), lambda v: np.maximum(v, 0), (-3, 3), 0),
    ("silu", lambda x, **k: ops.silu(x, **k), lambda v: v / (1 + np.exp(-v)), (-3, 3), 1e-6),
    ("gelu_erf", lambda x, **k: ops.gelu(x, **k), lambda v: 0.5 * v * (1 + erf(v / math.sqrt(2))), (-3, 3), 1e-6),
    ("gelu_tanh", lambda x, **k: ops.gelu(x, "tanh", **k),
     lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))), (-3, 3), 1e-6),
    ("sigmoid", lambda x, **k: ops.sigmoid(x, **k), lambda v: 1 / (1 + np.exp(-v)), (-3, 3), 1e-6),
    ("exp", lambda x, **k: ops.exp(x, **k), np.exp, (-3, 3), 1e-6),
    ("log", lambda x, **k: ops.log(x, **k), np.log, (0.1, 3), 1e-6),
    ("scale", lambda x, **k: ops.scale(x, 2.5, **k), lambda v: v * 2.5, (-3, 3), 1e-7),
]


@pytest.mark.parametrize("name, call, ref, bounds, tol", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_elementwise_write_into_numpy_out(rt, name, call, ref, bounds, tol, dtype):
    x = data((3, 7, 11), 1, *bounds, dtype=dtype)
    out = filled(x.shape, dtype)
    got = call(x, rt=rt, out=out)
    assert got is out
    want = ref(x.astype(np.float64))
    t = tol if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=t, atol=t, err_msg=name)
    # Without out=: the same values.
    np.testing.assert_array_equal(call(x, rt=rt), out)


@pytest.mark.parametrize("name, call, ref, bounds, tol", UNARY, ids=[u[0] for u in UNARY])
def test_elementwise_write_into_enigma_arrays(rt, name, call, ref, bounds, tol):
    x = data((1001,), 2, *bounds)
    out = rt.empty([1001], "f32")
    got = call(rt.asarray(x), out=out)
    assert got is out
    np.testing.assert_allclose(out.numpy(), ref(x.astype(np.float64)), rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("op, ref", [(ops.add, np.add), (ops.mul, np.multiply), (ops.div, np.divide)])
@pytest.mark.parametrize("sa, sb", [((4, 1, 3), (5, 1)), ((6, 7), (6, 7)), ((7,), (1,))])
def test_binary_broadcast_into_out(rt, op, ref, sa, sb):
    a, b = data(sa, 3), data(sb, 4, 0.5, 3)
    want = ref(a.astype(np.float64), b.astype(np.float64))
    out = filled(want.shape)
    assert op(a, b, rt=rt, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name, ref", [("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min)])
def test_reductions_over_dims_into_out(rt, name, ref):
    x = data((4, 7, 5), 5)
    fn = getattr(ops, name)
    for dim, keepdim in [(1, False), (-1, True), ((0, 1), False)]:
        want = ref(x.astype(np.float64), axis=dim, keepdims=keepdim)
        out = filled(want.shape)
        assert fn(x, dim, keepdim, rt=rt, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} dim={dim}")
    # Every element: a 0-d out.
    out0 = filled(())
    assert fn(x, rt=rt, out=out0) is out0
    np.testing.assert_allclose(out0, ref(x.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_argmax_argmin_into_int32_out(rt):
    x = data((5, 9, 3), 6)
    for fn, ref in [(ops.argmax, np.argmax), (ops.argmin, np.argmin)]:
        out = filled((5, 3), np.int32)
        assert fn(x, 1, rt=rt, out=out) is out
        np.testing.assert_array_equal(out, ref(x, axis=1))
        flat = filled((), np.int32)
        fn(x, rt=rt, out=flat)
        assert int(flat) == int(ref(x))


def test_scans_and_softmax_into_out(rt):
    x = data((3, 8, 5), 7, 0.5, 1.5)
    v = x.astype(np.float64)
    for fn, want in [(lambda o: ops.cumsum(x, 1, rt=rt, out=o), np.cumsum(v, 1)),
                     (lambda o: ops.cumprod(x, -1, rt=rt, out=o), np.cumprod(v, -1)),
                     (lambda o: ops.softmax(x, 1, rt=rt, out=o), softmax64(v, 1)),
                     (lambda o: ops.log_softmax(x, -1, rt=rt, out=o), np.log(softmax64(v, -1)))]:
        out = filled(x.shape)
        assert fn(out) is out
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    ints = np.arange(1, 25, dtype=np.int32).reshape(4, 6)
    out = filled(ints.shape, np.int32)
    assert ops.cumsum(ints, 0, rt=rt, out=out) is out
    np.testing.assert_array_equal(out, np.cumsum(ints, 0))
    out = filled((24,), np.int32)
    assert ops.prefix_sum(ints.reshape(-1), exclusive=True, rt=rt, out=out) is out
    np.testing.assert_array_equal(out, np.concatenate([[0], np.cumsum(ints)[:-1]]))


def test_norms_into_out(rt):
    x = data((2, 3, 40), 8)
    w, b = data((3, 40), 9), data((3, 40), 10)
    v = x.astype(np.float64)
    out = filled(x.shape)
    assert ops.rms_norm(x, (3, 40), w, eps=1e-5, rt=rt, out=out) is out
    flat = v.reshape(2, -1)
    want = (flat / np.sqrt((flat ** 2).mean(1, keepdims=True) + 1e-5)).reshape(x.shape) * w
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    out = filled(x.shape)
    assert ops.layer_norm(x, 40, w[0], b[0], rt=rt, out=out) is out
    mu, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
    np.testing.assert_allclose(out, (v - mu) / np.sqrt(var + 1e-5) * w[0] + b[0], rtol=1e-5, atol=1e-5)
    out = filled((6,))
    assert ops.sum_rows(x.reshape(6, 40), rt=rt, out=out) is out
    np.testing.assert_allclose(out, v.reshape(6, 40).sum(1), rtol=1e-5, atol=1e-5)


def test_products_into_out(rt):
    a, b = data((3, 5, 67), 11), data((3, 67, 45), 12)
    want = a.astype(np.float64) @ b.astype(np.float64)
    out = filled(want.shape)
    assert ops.bmm(a, b, rt=rt, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    out = filled((3, 5, 45))
    assert ops.matmul(a, b[0], rt=rt, out=out) is out
    np.testing.assert_allclose(out, a.astype(np.float64) @ b[0].astype(np.float64), rtol=1e-4, atol=1e-4)
    ha, hb = a.astype(np.float16), b[0].astype(np.float16)
    out = filled((3, 5, 45), np.float16)
    assert ops.matmul(ha, hb, rt=rt, out=out) is out
    np.testing.assert_allclose(out.astype(np.float64), ha.astype(np.float64) @ hb.astype(np.float64), rtol=1e-3, atol=1e-2)
    w, x = data((33, 67), 13), data((67,), 14)
    out = filled((33,))
    assert ops.gemv(w, x, rt=rt, out=out) is out
    np.testing.assert_allclose(out, w.astype(np.float64) @ x.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_cross_entropy_pooling_and_conv_into_out(rt):
    logits = data((6, 5), 15)
    target = np.array([0, 4, 2, -100, 1, 3])
    logp = np.log(softmax64(logits.astype(np.float64), 1))
    losses = np.array([0.0 if t == -100 else -logp[i, t] for i, t in enumerate(target)])
    out = filled((6,))
    assert ops.cross_entropy(logits, target, reduction="none", rt=rt, out=out) is out
    np.testing.assert_allclose(out, losses, rtol=1e-5, atol=1e-5)
    out0 = filled(())
    assert ops.cross_entropy(logits, target, rt=rt, out=out0) is out0
    np.testing.assert_allclose(out0, losses.sum() / 5, rtol=1e-5, atol=1e-5)

    x = data((2, 3, 9, 8), 16)
    out = filled((2, 3, 4, 4))
    assert ops.max_pool2d(x, 2, rt=rt, out=out) is out
    np.testing.assert_array_equal(out, x[:, :, :8, :].reshape(2, 3, 4, 2, 4, 2).max((3, 5)))
    out = filled((2, 3, 4, 4))
    assert ops.avg_pool2d(x, 2, rt=rt, out=out) is out
    np.testing.assert_allclose(out, x[:, :, :8, :].astype(np.float64).reshape(2, 3, 4, 2, 4, 2).mean((3, 5)), rtol=1e-6, atol=1e-6)

    w = data((4, 3, 3, 3), 17)
    want = np.zeros((2, 4, 7, 6))
    for i in range(7):
        for j in range(6):
            want[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + 3, j:j + 3].astype(np.float64), w.astype(np.float64))
    out = filled(want.shape)
    assert ops.conv2d(x, w, rt=rt, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_attention_into_out(rt):
    q, k, v = data((4, 64), 18), data((4, 9, 64), 19), data((4, 9, 64), 20)
    s = np.einsum("hd,hsd->hs", q.astype(np.float64), k.astype(np.float64)) / 8
    want = np.einsum("hs,hsd->hd", softmax64(s, -1), v.astype(np.float64))
    out = filled(q.shape)
    assert ops.attention_decode(q, k, v, rt=rt, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    q, k, v = (data((1, 2, 5, 64), 21 + i, dtype=np.float16) for i in range(3))
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / 8
    want = np.einsum("bhqk,bhkd->bhqd", softmax64(s, -1), v.astype(np.float64))
    out = filled(q.shape, np.float16)
    result, lse = ops.scaled_dot_product_attention(q, k, v, return_lse=True, rt=rt, out=out)
    assert result is out and lse.shape == (1, 2, 5)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-2, atol=1e-2)


def test_quantized_host_functions_into_out(rt):
    w = data((128, 16), 24)
    packed, scales = ops.quantize(w, "int4")
    out = filled((128, 16))
    assert ops.dequantize(packed, scales, "int4", out=out) is out
    np.testing.assert_array_equal(out, ops.dequantize(packed, scales, "int4"))
    a = data((3, 128), 25)
    out = np.zeros((3, 16), np.float32)
    assert ops.qmatmul(a, packed, scales, "int4", out_dtype=np.float32, rt=rt, out=out) is out
    want = a.astype(np.float16).astype(np.float64) @ ops.dequantize(packed, scales, "int4").astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=2e-2, atol=2e-2)
    with pytest.raises(TypeError, match="qmatmul: out holds float16, the result is float32"):
        ops.qmatmul(a, packed, scales, "int4", out_dtype=np.float32, rt=rt, out=np.zeros((3, 16), np.float16))


def test_bfloat16_bits_into_uint16_out(rt):
    x = (data((5, 33), 26).view(np.uint32) >> 16).astype(np.uint16)
    out = np.zeros(x.shape, np.uint16)
    assert ops.relu(x, dtype="bf16", rt=rt, out=out) is out
    np.testing.assert_array_equal(out, ops.relu(x, dtype="bf16", rt=rt))


# ----- refusals: nothing is written into `out` -----------------------------

def untouched(out):
    return bool(np.all(np.asarray(out) == SENTINEL))


def test_a_wrong_shape_is_a_value_error(rt):
    x = data((4, 6), 27)
    out = filled((6, 4))
    with pytest.raises(ValueError, match=r"relu: out has shape \(6, 4\), the result has shape \(4, 6\)"):
        ops.relu(x, rt=rt, out=out)
    assert untouched(out)
    # No broadcasting into out: a [6] out for a [4, 6] result is refused.
    with pytest.raises(ValueError, match=r"sum: out has shape \(6,\), the result has shape \(\)"):
        ops.sum(x, rt=rt, out=filled((6,)))


def test_a_wrong_type_is_a_type_error_not_a_cast(rt):
    x = data((4, 6), 28)
    out = filled((4, 6), np.float64)
    with pytest.raises(TypeError, match=r"softmax: out holds float64, the result is float32 \(f32\); enigma does not cast"):
        ops.softmax(x, rt=rt, out=out)
    assert untouched(out)
    with pytest.raises(TypeError, match="argmax: out holds float32, the result is int32"):
        ops.argmax(x, 1, rt=rt, out=filled((4,)))
    with pytest.raises(TypeError, match="matmul: out holds float16, the result is float32"):
        ops.matmul(x, x.T.copy(), rt=rt, out=filled((4, 4), np.float16))
    h = x.astype(np.float16)
    out = filled((4, 4))
    with pytest.raises(TypeError, match=r"bmm: out holds float32, the result is float16 \(f16\)"):
        ops.bmm(h[None], h.T.copy()[None], rt=rt, out=out[None])
    assert untouched(out)


def test_another_kind_of_array_is_refused(rt):
    x = data((4, 6), 29)
    with pytest.raises(TypeError, match=r"exp: out is an enigma.Array on .*, but the result is a numpy array"):
        ops.exp(x, rt=rt, out=rt.empty([4, 6], "f32"))
    out = filled((4, 6))
    with pytest.raises(TypeError, match=r"out is a numpy array, but the result is an enigma.Array on "):
        ops.exp(rt.asarray(x), out=out)
    assert untouched(out)


def test_read_only_and_strided_outs_are_refused(rt):
    x = data((4, 6), 30)
    ro = filled((4, 6))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="relu: out is read-only"):
        ops.relu(x, rt=rt, out=ro)
    assert untouched(ro)
    big = filled((6, 4))
    strided = big.T
    with pytest.raises(enigma.DispatchError, match="not C-contiguous"):
        ops.relu(x, rt=rt, out=strided)
    assert untouched(big)


def test_mlx_inputs_take_no_out():
    mx = pytest.importorskip("mlx.core", reason="MLX is not installed")
    x = mx.array(data((3, 4), 31))
    with pytest.raises(TypeError, match="out= is not supported for mx.array inputs"):
        ops.relu(x, device="cpu", out=mx.zeros((3, 4)))


def test_torch_cpu_tensors_as_out():
    torch = pytest.importorskip("torch", reason="torch is not installed (CI does not install it)")
    x = torch.from_numpy(data((5, 7), 32))
    out = torch.full((5, 7), SENTINEL)
    assert ops.softmax(x, 0, device="cpu", out=out) is out
    np.testing.assert_allclose(out.numpy(), softmax64(x.numpy().astype(np.float64), 0), rtol=1e-6, atol=1e-6)
    out = torch.zeros((5,), dtype=torch.int32)
    assert ops.argmax(x, 1, device="cpu", out=out) is out
    np.testing.assert_array_equal(out.numpy(), x.numpy().argmax(1))
    with pytest.raises(TypeError, match="out holds torch.float64"):
        ops.relu(x, device="cpu", out=torch.zeros((5, 7), dtype=torch.float64))
    with pytest.raises(TypeError, match="out is a numpy array, but the result is a torch tensor on cpu"):
        ops.relu(x, device="cpu", out=np.zeros((5, 7), np.float32))


def test_torch_cuda_tensors_as_out():
    torch = pytest.importorskip("torch", reason="torch is not installed (CI does not install it)")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x = torch.randn(64, 1000, device="cuda")
    out = torch.full_like(x, SENTINEL)
    assert ops.softmax(x, -1, out=out) is out
    torch.testing.assert_close(out, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    xb = x.to(torch.bfloat16)
    outb = torch.empty_like(xb)
    assert ops.relu(xb, out=outb) is outb
    assert torch.equal(outb, torch.relu(xb))
    # On a side stream: the copy into out is ordered after the operation there.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ops.exp(x, out=out)
    side.synchronize()
    torch.testing.assert_close(out, torch.exp(x))
    # A float16 view at an offset that is not 16-byte aligned, odd sizes.
    xh = torch.randn(7, 13, device="cuda", dtype=torch.float16)[1:]
    outh = torch.full((6, 13), 3.0, device="cuda", dtype=torch.float16)
    assert ops.sigmoid(xh, out=outh) is outh
    torch.testing.assert_close(outh, torch.sigmoid(xh), rtol=2e-3, atol=2e-3)
    sums = torch.empty(64, device="cuda")
    assert ops.sum(x, 1, out=sums) is sums
    torch.testing.assert_close(sums, x.sum(1), rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="out is a torch tensor on cpu, but the result is a torch tensor on DLPack device 2:0"):
        ops.relu(x, out=torch.empty(64, 1000))
