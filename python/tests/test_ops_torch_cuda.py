"""`enigma.ops` with torch's conventions on torch CUDA tensors, against torch.

Each call takes CUDA tensors and is compared with the same torch call on the
same tensors (float64 where torch's own result in the input type would add
its rounding). Every test skips, saying why, without torch with CUDA or
without enigma's CUDA backend.
"""
import pytest

import enigma
import enigma.ops as ops


def _missing():
    try:
        enigma.MetalRuntime("cuda")
    except Exception as e:  # noqa: BLE001 - any reason the backend is missing
        return f"enigma's CUDA backend is unavailable: {e}"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "torch has no CUDA device"


MISSING = _missing()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING or "")


def _close(got, want, rtol=1e-4, atol=1e-5):
    import torch
    assert isinstance(got, torch.Tensor) and got.is_cuda, type(got)
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol)


def _randn(*shape, dtype=None):
    import torch
    g = torch.Generator(device="cuda").manual_seed(sum(shape))
    return torch.randn(*shape, device="cuda", generator=g, dtype=dtype or torch.float32)


def test_reductions_over_a_dim():
    x = _randn(7, 100, 33)
    _close(ops.sum(x, dim=1, keepdim=True), x.double().sum(dim=1, keepdim=True))
    _close(ops.mean(x, dim=-1), x.double().mean(dim=-1))
    _close(ops.max(x, dim=0), x.amax(dim=0))
    _close(ops.min(x, dim=(1, 2)), x.amin(dim=(1, 2)))
    import torch
    assert torch.equal(ops.argmax(x, dim=1).long(), x.argmax(dim=1))
    assert torch.equal(ops.argmin(x, dim=-1).long(), x.argmin(dim=-1))


def test_softmax_log_softmax_and_running_sums_over_a_dim():
    x = _randn(5, 70, 9)
    _close(ops.softmax(x, dim=1), x.double().softmax(dim=1))
    _close(ops.log_softmax(x, dim=-1), x.double().log_softmax(dim=-1))
    _close(ops.cumsum(x, dim=1), x.double().cumsum(dim=1), atol=1e-4)
    y = _randn(4, 30).abs() + 0.5
    _close(ops.cumprod(y, dim=1), y.double().cumprod(dim=1), rtol=1e-4, atol=1e-4)


def test_norms_over_the_trailing_shape():
    import torch
    x = _randn(6, 4, 33)
    w = _randn(33)
    b = _randn(33)
    want = torch.nn.functional.layer_norm(x.double(), (33,), w.double(), b.double(), eps=1e-5)
    _close(ops.layer_norm(x, (33,), w, b), want)
    rms = x.double() / torch.sqrt(x.double().pow(2).mean(dim=-1, keepdim=True) + 1e-5) * w.double()
    _close(ops.rms_norm(x, (33,), w), rms)


def test_elementwise_broadcasting_and_activations():
    import torch
    a = _randn(7, 1, 33)
    b = _randn(100, 1)
    _close(ops.add(a, b), a.double() + b.double())
    _close(ops.mul(a, b), a.double() * b.double())
    x = _randn(1000, 7)
    _close(ops.gelu(x), torch.nn.functional.gelu(x.double()), atol=2e-6)
    _close(ops.gelu(x, approximate="tanh"), torch.nn.functional.gelu(x.double(), approximate="tanh"), atol=2e-6)
    _close(ops.sigmoid(x), torch.sigmoid(x.double()), atol=2e-6)
    _close(ops.exp(x), torch.exp(x.double()))
    _close(ops.log(x.abs() + 0.1), torch.log(x.double().abs() + 0.1))


def test_batched_matmul():
    a = _randn(3, 65, 70)
    b = _randn(3, 70, 129)
    _close(ops.matmul(a, b), a.double() @ b.double(), rtol=1e-4, atol=1e-4)
    _close(ops.bmm(a, b), a.double() @ b.double(), rtol=1e-4, atol=1e-4)
    import torch
    # Half inputs give a half result (f32 accumulation, one rounding), as
    # torch's; on the H200 at these shapes the GEMM on cooperative tensors.
    for dtype, tol in ((torch.float16, 2e-3), (torch.bfloat16, 1e-2)):
        ha, hb = _randn(3, 65, 72, dtype=dtype), _randn(3, 72, 136, dtype=dtype)
        want = ha.double() @ hb.double()
        for got in (ops.bmm(ha, hb), ops.matmul(ha, hb[0]), ops.matmul(ha[0], hb[0])):
            assert got.dtype == dtype, got.dtype
        _close(ops.bmm(ha, hb), want, rtol=tol, atol=tol * 4)
        _close(ops.matmul(ha, hb[1]), ha.double() @ hb[1].double(), rtol=tol, atol=tol * 4)


def test_half_convolutions_through_the_unfolding():
    import torch
    F = torch.nn.functional
    # Output rows of 16 (the unfolding by 16-byte stores), weights of whole
    # 16-byte words (repeated a word at a time), a pointwise convolution
    # (no unfolding): f32 accumulation, one rounding (two with the bias).
    for dtype, tol in ((torch.float16, 4e-3), (torch.bfloat16, 3e-2)):
        x, w, bias = _randn(3, 8, 12, 16, dtype=dtype), _randn(16, 8, 3, 3, dtype=dtype), _randn(16, dtype=dtype)
        got = ops.conv2d(x, w, bias, padding=1)
        assert got.dtype == dtype
        _close(got, F.conv2d(x.double(), w.double(), bias.double(), padding=1), rtol=tol, atol=tol * 8)
        pw = _randn(24, 8, 1, 1, dtype=dtype)
        _close(ops.conv2d(x, pw), F.conv2d(x.double(), pw.double()), rtol=tol, atol=tol * 4)


def test_convolution_pooling_and_cross_entropy():
    import torch
    F = torch.nn.functional
    x = _randn(2, 3, 17, 19)
    w = _randn(8, 3, 3, 3)
    bias = _randn(8)
    _close(ops.conv2d(x, w, bias, stride=2, padding=1), F.conv2d(x.double(), w.double(), bias.double(), stride=2, padding=1), atol=1e-4)
    dw = _randn(3, 1, 3, 3)
    _close(ops.conv2d(x, dw, groups=3, padding=1), F.conv2d(x.double(), dw.double(), groups=3, padding=1), atol=1e-4)
    _close(ops.max_pool2d(x, 3, 2), F.max_pool2d(x, 3, 2))
    _close(ops.avg_pool2d(x, 2), F.avg_pool2d(x.double(), 2))
    logits = _randn(13, 10)
    target = torch.randint(0, 10, (13,), device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
    _close(ops.cross_entropy(logits, target), F.cross_entropy(logits.double(), target), atol=1e-5)


def test_attention_prefill_and_grouped_decode():
    import torch
    F = torch.nn.functional
    q = _randn(1, 4, 70, 64, dtype=torch.float16)
    k = _randn(1, 2, 70, 64, dtype=torch.float16)
    v = _randn(1, 2, 70, 64, dtype=torch.float16)
    kr, vr = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    for causal in (False, True):
        want = F.scaled_dot_product_attention(q.float(), kr.float(), vr.float(), is_causal=causal)
        _close(ops.scaled_dot_product_attention(q, k, v, causal=causal), want, rtol=2e-2, atol=2e-3)
    qd = _randn(8, 64, dtype=torch.float16)
    kd = _randn(2, 300, 64, dtype=torch.float16)
    vd = _randn(2, 300, 64, dtype=torch.float16)
    scores = torch.einsum("hd,hsd->hs", qd.float(), kd.float().repeat_interleave(4, dim=0)) / 8.0
    want = torch.einsum("hs,hsd->hd", scores.softmax(dim=-1), vd.float().repeat_interleave(4, dim=0))
    _close(ops.attention_decode(qd, kd, vd), want, rtol=2e-2, atol=2e-3)


def test_half_precision_convolutions_and_activations():
    """The 16-bit paths: dense and pointwise convolutions through the
    unfolding and the GEMM on cooperative tensors (enough output tiles for
    it), depthwise ones by tiles (a multiplier of 2, a stride), and the
    activations' relaxed f32 math, each against float64 on the same
    rounded inputs."""
    import torch
    F = torch.nn.functional
    for dt, tol in ((torch.float16, 1e-2), (torch.bfloat16, 5e-2)):
        x = _randn(64, 16, 32, 32, dtype=dt)
        w = (_randn(32, 16, 3, 3, dtype=dt) * 0.2).to(dt)
        bias = _randn(32, dtype=dt)
        _close(ops.conv2d(x, w, bias, padding=1), F.conv2d(x.double(), w.double(), bias.double(), padding=1), rtol=tol, atol=tol)
        pw = (_randn(24, 16, 1, 1, dtype=dt) * 0.3).to(dt)
        _close(ops.conv2d(x, pw), F.conv2d(x.double(), pw.double()), rtol=tol, atol=tol)
        dw = _randn(32, 1, 5, 5, dtype=dt)
        _close(ops.conv2d(x, dw, None, 2, 2, 1, 16), F.conv2d(x.double(), dw.double(), None, 2, 2, 1, 16), rtol=tol, atol=tol)
        a = _randn(4096, 40, dtype=dt) * 8
        for mine, theirs in ((ops.gelu, F.gelu), (ops.sigmoid, torch.sigmoid), (lambda v: ops.gelu(v, "tanh"), lambda v: F.gelu(v, approximate="tanh"))):
            _close(mine(a), theirs(a.double()), rtol=tol / 4, atol=tol / 100)
