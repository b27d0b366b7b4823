"""The kernel library through Python (`enigma.ops`) against numpy references,
at awkward sizes, on the simulator (or ENIGMA_TEST_DEVICE)."""
import math
import os

import numpy as np
import pytest

import enigma
import enigma.ops as ops

DEVICE = os.environ.get("ENIGMA_TEST_DEVICE", "cpu")


@pytest.fixture(scope="module")
def rt():
    return enigma.MetalRuntime(DEVICE)


def rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("n", [1, 31, 33, 1000, 4097])
def test_elementwise_f32(rt, n):
    r = rng(n)
    a = r.uniform(-4, 4, n).astype(np.float32)
    b = r.uniform(-4, 4, n).astype(np.float32)
    np.testing.assert_allclose(ops.scale(a, 0.75, rt=rt), a * np.float32(0.75), rtol=1e-6)
    np.testing.assert_array_equal(ops.add(a, b, rt=rt), a + b)
    np.testing.assert_array_equal(ops.mul(a, b, rt=rt), a * b)
    np.testing.assert_array_equal(ops.relu(a, rt=rt), np.maximum(a, 0))
    x = a.astype(np.float64)
    np.testing.assert_allclose(ops.silu(a, rt=rt), x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(ops.gelu(a, "tanh", rt=rt), gelu, rtol=1e-5, atol=1e-6)


def test_elementwise_f16_keeps_its_type_and_shape(rt):
    a = rng(1).uniform(-2, 2, (3, 11)).astype(np.float16)
    y = ops.scale(a, 0.5, rt=rt)
    assert y.dtype == np.float16 and y.shape == (3, 11)
    np.testing.assert_array_equal(y, (a.astype(np.float32) * 0.5).astype(np.float16))


def test_bf16_goes_as_uint16_bits(rt):
    x = rng(2).uniform(-2, 2, 100).astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncation: exact bf16 values
    y = ops.relu(bits, dtype="bf16", rt=rt)
    assert y.dtype == np.uint16
    back = (y.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(back, np.maximum((bits.astype(np.uint32) << 16).view(np.float32), 0))
    with pytest.raises(TypeError, match="bf16"):
        ops.relu(bits, rt=rt)


@pytest.mark.parametrize("n", [1, 33, 1000, 4097])
def test_reductions(rt, n):
    x = rng(n).uniform(-1, 1, n).astype(np.float32)
    assert abs(ops.sum(x, rt=rt) - x.astype(np.float64).sum()) <= 1e-5 * np.abs(x).sum() + 1e-6
    assert ops.max(x, rt=rt) == x.max()
    assert ops.min(x, rt=rt) == x.min()


@pytest.mark.parametrize("shape", [(3, 1), (5, 33), (2, 1000)])
def test_row_ops(rt, shape):
    r = rng(shape[1])
    x = r.uniform(-3, 3, shape).astype(np.float32)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(ops.sum_rows(x, rt=rt), x64.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ops.max_rows(x, rt=rt), x.max(1))
    np.testing.assert_array_equal(ops.min_rows(x, rt=rt), x.min(1))
    e = np.exp(x64 - x64.max(1, keepdims=True))
    np.testing.assert_allclose(ops.softmax(x, rt=rt), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    w = r.uniform(0.5, 1.5, shape[1]).astype(np.float32)
    b = r.uniform(-0.5, 0.5, shape[1]).astype(np.float32)
    rms = x64 / np.sqrt((x64**2).mean(1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(ops.rms_norm(x, w, rt=rt), rms, rtol=1e-5, atol=1e-5)
    mu = x64.mean(1, keepdims=True)
    ln = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(ops.layer_norm(x, w, b, rt=rt), ln, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [1, 33, 4097])
def test_prefix_sum(rt, n):
    x = rng(n).integers(-100, 100, n).astype(np.int32)
    np.testing.assert_array_equal(ops.prefix_sum(x, rt=rt), np.cumsum(x).astype(np.int32))
    excl = np.concatenate([[0], np.cumsum(x)[:-1]]).astype(np.int32)
    np.testing.assert_array_equal(ops.prefix_sum(x, exclusive=True, rt=rt), excl)


def test_gemv_f16_weights(rt):
    r = rng(7)
    w = r.uniform(-1, 1, (37, 300)).astype(np.float16)
    x = r.uniform(-1, 1, 300).astype(np.float16)
    y = ops.gemv(w, x, rt=rt)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, w.astype(np.float64) @ x.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fused", [False, True])
def test_attention_decode(rt, fused):
    r = rng(11)
    h, s, d = 2, 37, 128
    q = r.uniform(-1, 1, (h, d)).astype(np.float32)
    k = r.uniform(-1, 1, (h, s, d)).astype(np.float32)
    v = r.uniform(-1, 1, (h, s, d)).astype(np.float32)
    scores = np.einsum("hd,hsd->hs", q.astype(np.float64), k) / math.sqrt(d)
    p = np.exp(scores - scores.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = np.einsum("hs,hsd->hd", p, v)
    np.testing.assert_allclose(ops.attention_decode(q, k, v, fused=fused, rt=rt), want, rtol=1e-4, atol=1e-5)


def _decode_reference(q, k, v, lens):
    """float64 outputs and log-sum-exps of a batch [B, Hq, D] over [B, Hkv, S, D]."""
    b, hq, d = q.shape
    group = hq // k.shape[1]
    out = np.zeros((b, hq, d))
    lse = np.full((b, hq), -np.inf)
    for i in range(b):
        for h in range(hq):
            kk, vv = k[i, h // group, :lens[i]].astype(np.float64), v[i, h // group, :lens[i]].astype(np.float64)
            if lens[i] == 0:
                continue
            scores = kk @ q[i, h].astype(np.float64) / math.sqrt(d)
            m = scores.max()
            e = np.exp(scores - m)
            out[i, h] = e @ vv / e.sum()
            lse[i, h] = m + math.log(e.sum())
    return out, lse


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_attention_decode_grouped_batch_with_lengths(rt, dtype):
    r = rng(12)
    b, hq, hkv, s, d = 3, 6, 2, 41, 64
    q = r.uniform(-1, 1, (b, hq, d)).astype(dtype)
    k = r.uniform(-2, 2, (b, hkv, s, d)).astype(dtype)
    v = r.uniform(-1, 1, (b, hkv, s, d)).astype(dtype)
    lens = [41, 0, 17]
    want, want_lse = _decode_reference(q, k, v, lens)
    out, lse = ops.attention_decode(q, k, v, seq_lens=lens, return_lse=True, rt=rt)
    assert out.shape == (b, hq, d) and out.dtype == dtype and lse.shape == (b, hq) and lse.dtype == np.float32
    tol = 1e-4 if dtype == np.float32 else 3e-3
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    assert np.all(np.isneginf(lse[1]))
    np.testing.assert_allclose(lse[[0, 2]], want_lse[[0, 2]], rtol=1e-5, atol=1e-5)
    # One sequence with grouped heads: q [Hq, D], k and v [Hkv, S, D].
    single = ops.attention_decode(q[0], k[0], v[0], rt=rt)
    np.testing.assert_allclose(single, want[0], rtol=tol, atol=tol)
    with pytest.raises(ValueError, match="fused=True"):
        ops.attention_decode(q[0], k[0], v[0], fused=False, rt=rt)
    with pytest.raises(ValueError, match="seq_lens must be 3"):
        ops.attention_decode(q, k, v, seq_lens=[1, 2], rt=rt)
    with pytest.raises(ValueError, match="dividing"):
        ops.attention_decode(q[:, :5], k, v, rt=rt)


def test_bad_inputs_are_clear_errors(rt):
    x = np.zeros(8, np.float32)
    with pytest.raises(IndexError, match="dim 1 is out of range for a 1-D array"):
        ops.softmax(x, 1, rt=rt)
    with pytest.raises(enigma.DispatchError, match=r"shapes \[8\] and \[9\] do not broadcast"):
        ops.add(x, np.zeros(9, np.float32), rt=rt)
    with pytest.raises(TypeError, match="share a dtype"):
        ops.add(x, np.zeros(8, np.float16), rt=rt)
    with pytest.raises(TypeError, match="float64"):
        ops.relu(np.zeros(4), rt=rt)
    with pytest.raises(enigma.DispatchError):
        ops.softmax(np.zeros((2, 4), np.float32), rt=rt, threads=4096)


def test_tune_times_candidates_and_records_the_best(rt, tmp_path, monkeypatch):
    monkeypatch.setenv("ENIGMA_CACHE_DIR", str(tmp_path))
    report = enigma.tune("relu_f32", (100,), rt=rt, warmup=0, repeats=1)
    assert report["kernel"] == "relu_f32" and report["shape_class"] == "128"
    statuses = sorted(t["status"] for t in report["trials"])
    assert statuses.count("timed") == 3 and statuses.count("skipped") == 3
    timed = [t for t in report["trials"] if t["status"] == "timed"]
    fastest = min(timed, key=lambda t: t["median_us"])
    assert report["best"]["threads"] == fastest["choice"]["threads"]
    assert report["cache"] == str(tmp_path / "tune.json")
    assert (tmp_path / "tune.json").exists()
    with pytest.raises(ValueError, match="no library kernel"):
        enigma.tune("nope", rt=rt)


def test_matmul_matches_numpy_at_awkward_shapes():
    rng = np.random.default_rng(7)
    for (m, n, k), dtype in [((1, 1, 1), np.float32), ((33, 7, 100), np.float16), ((70, 65, 40), np.float32)]:
        a = rng.uniform(-1, 1, (m, k)).astype(dtype)
        b = rng.uniform(-1, 1, (k, n)).astype(dtype)
        c = enigma.ops.matmul(a, b, device="cpu")
        assert c.shape == (m, n) and c.dtype == dtype
        # f32 accumulation, then (f16) one rounding to the result's type.
        rounding = 0.0 if dtype == np.float32 else 2.0 ** -11
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(c.astype(np.float64), want, rtol=rounding, atol=k * 1e-6 + 1e-6)
    with pytest.raises(ValueError, match="inner sizes must match"):
        enigma.ops.matmul(np.zeros((2, 3), np.float32), np.zeros((4, 2), np.float32), device="cpu")


def test_matmul_takes_device_arrays_of_any_shape():
    # Device arrays hold exactly their matrices' bytes: 67×45 f32 is 12060
    # bytes, not a whole number of 16-byte vectors; 32×16 is.
    rng = np.random.default_rng(8)
    for (m, n, k), dtype in [((67, 101, 45), np.float32), ((32, 24, 16), np.float32), ((9, 20, 13), np.float16)]:
        a = rng.integers(-6, 7, (m, k)).astype(dtype)
        b = rng.integers(-5, 6, (k, n)).astype(dtype)
        c = enigma.ops.matmul(enigma.asarray(a, device="cpu"), enigma.asarray(b, device="cpu"))
        # Small integers: every product and sum is exact in f32.
        np.testing.assert_array_equal(np.asarray(c), a.astype(np.float64) @ b.astype(np.float64))
