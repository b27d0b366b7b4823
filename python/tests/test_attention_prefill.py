"""``enigma.ops.scaled_dot_product_attention`` against a numpy f64
reference on the simulator (or ENIGMA_TEST_DEVICE): both causal
alignments, grouped-query heads, unequal lengths, the log-sum-exp, and the
errors for what the kernel is not built for."""
import os

import numpy as np
import pytest

import enigma
import enigma.ops as ops

DEVICE = os.environ.get("ENIGMA_TEST_DEVICE", "cpu")


@pytest.fixture(scope="module")
def rt():
    return enigma.MetalRuntime(DEVICE)


def reference(q, k, v, causal, scale):
    """Output and log-sum-exp in f64; rows that see no key give zeros and -inf."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    sq, skv = q.shape[2], k.shape[2]
    scores = np.einsum("bhid,bhjd->bhij", q, k) * scale
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    keep = {"none": np.ones((sq, skv), bool), "top_left": j <= i, "bottom_right": j + sq <= i + skv}[causal]
    scores = np.where(keep, scores, -np.inf)
    m = scores.max(-1, keepdims=True)
    seen = np.isfinite(m)
    e = np.where(keep, np.exp(scores - np.where(seen, m, 0)), 0.0)
    total = e.sum(-1, keepdims=True)
    out = np.einsum("bhij,bhjd->bhid", e / np.where(seen, total, 1), v)
    lse = np.where(seen, m + np.log(np.where(seen, total, 1)), -np.inf)[..., 0]
    return out, lse


@pytest.mark.parametrize(
    "shape,causal",
    [
        ((1, 2, 2, 1, 1, 64), False),
        ((2, 2, 1, 7, 7, 128), True),
        ((1, 4, 2, 100, 100, 64), "top_left"),
        ((1, 2, 1, 37, 100, 128), "bottom_right"),
        ((1, 2, 2, 100, 37, 64), "bottom_right"),
        ((1, 32, 8, 9, 9, 64), True),
    ],
)
def test_sdpa_f16_matches_numpy(rt, shape, causal):
    b, h, hkv, sq, skv, d = shape
    r = np.random.default_rng(sq * 1000 + skv)
    q = r.uniform(-1, 1, (b, h, sq, d)).astype(np.float16)
    k = r.uniform(-1, 1, (b, hkv, skv, d)).astype(np.float16)
    v = r.uniform(-1, 1, (b, hkv, skv, d)).astype(np.float16)
    out, lse = ops.scaled_dot_product_attention(q, k, v, causal=causal, return_lse=True, rt=rt)
    mask = {False: "none", True: "top_left"}.get(causal, causal)
    want, want_lse = reference(q, k, v, mask, 1 / np.sqrt(d))
    assert out.dtype == np.float16 and out.shape == (b, h, sq, d)
    assert lse.dtype == np.float32 and lse.shape == (b, h, sq)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=2e-3, rtol=2e-3)
    np.testing.assert_allclose(lse, want_lse, atol=1e-4, rtol=1e-5)
    plain = ops.scaled_dot_product_attention(q, k, v, causal=causal, rt=rt)
    np.testing.assert_array_equal(plain, out)


def test_sdpa_bf16_and_scale(rt):
    r = np.random.default_rng(5)
    q, k, v = (r.uniform(-1, 1, (1, 2, 50, 128)).astype(np.float32) for _ in range(3))
    bits = [(x.view(np.uint32) >> 16).astype(np.uint16) for x in (q, k, v)]
    exact = [(x.astype(np.uint32) << 16).view(np.float32) for x in bits]
    out = ops.scaled_dot_product_attention(*bits, causal=True, scale=0.3, dtype="bf16", rt=rt)
    got = (out.astype(np.uint32) << 16).view(np.float32)
    want, _ = reference(*exact, "top_left", 0.3)
    np.testing.assert_allclose(got, want, atol=1.5e-2, rtol=1e-2)


def test_sdpa_errors(rt):
    x = np.zeros((1, 1, 4, 96), np.float16)
    with pytest.raises(enigma.DispatchError, match="head dimension 96 is not supported"):
        ops.scaled_dot_product_attention(x, x, x, rt=rt)
    y = np.zeros((1, 3, 4, 64), np.float16)
    kv = np.zeros((1, 2, 4, 64), np.float16)
    with pytest.raises(enigma.DispatchError, match="3 query heads are not a multiple of 2"):
        ops.scaled_dot_product_attention(y, kv, kv, rt=rt)
    with pytest.raises(ValueError, match="takes q"):
        ops.scaled_dot_product_attention(y, kv[..., :32], kv, rt=rt)
    with pytest.raises(ValueError, match="causal must be"):
        ops.scaled_dot_product_attention(y, y, y, causal="diagonal", rt=rt)
