"""torch and CuPy CUDA tensors through enigma on a GPU: kernels and
``enigma.ops`` read and write them in place (``data_ptr`` unchanged, no
host copies in the torch profiler's trace), results come back as the
caller's kind of array, dispatches go on the caller's stream.

Every test skips, saying why, without torch/CuPy with CUDA or without
enigma's CUDA device (driver, NVRTC, a GPU). Results are compared with
torch's or CuPy's own computation."""
import math

import numpy as np
import pytest

import enigma
import enigma.ops as ops


def _cuda_reason():
    try:
        enigma.MetalRuntime("cuda")
    except enigma.DeviceError as e:
        return f"enigma has no CUDA device here: {e}"
    return None


CUDA_MISSING = _cuda_reason()

try:
    import torch
    TORCH_MISSING = None if torch.cuda.is_available() else "torch has no CUDA device"
except ImportError:
    torch = None
    TORCH_MISSING = "torch is not installed"

try:
    import cupy
    CUPY_MISSING = None if cupy.cuda.runtime.getDeviceCount() > 0 else "CuPy sees no CUDA device"
except Exception as e:  # noqa: BLE001 - ImportError, or CuPy without a driver
    cupy = None
    CUPY_MISSING = f"CuPy is not usable: {e}"

needs_torch = pytest.mark.skipif(bool(CUDA_MISSING or TORCH_MISSING), reason=CUDA_MISSING or TORCH_MISSING or "")
needs_cupy = pytest.mark.skipif(bool(CUDA_MISSING or CUPY_MISSING), reason=CUDA_MISSING or CUPY_MISSING or "")


@enigma.kernel
def axpy(X: enigma.f32, Y: enigma.f32, a: enigma.constant(enigma.f32), n: enigma.constant(enigma.u32)):
    i = enigma.thread_position_in_grid.x
    if i < n:
        Y[i] = Y[i] + a * X[i]


def _no_copies(prof):
    return [e.name for e in prof.events() if "Memcpy" in e.name or "memcpy" in e.name.lower()]


@needs_torch
def test_torch_kernel_in_place_on_the_current_stream():
    n = 100_003
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    want = y + 2.5 * x
    ptr = y.data_ptr()
    c = enigma.compile(axpy)
    c(x, y, 2.5, n, grid=n, threads=256)
    torch.cuda.synchronize()
    assert y.data_ptr() == ptr
    torch.testing.assert_close(y, want)
    # On a side stream: queued there, visible after that stream finishes.
    s = torch.cuda.Stream()
    want = y + 1.0 * x
    with torch.cuda.stream(s):
        c(x, y, 1.0, n, grid=n, threads=256)
    s.synchronize()
    torch.testing.assert_close(y, want)
    # An explicit stream= and enigma.synchronize().
    want = y - x
    c(x, y, -1.0, n, grid=n, threads=256, stream=s)
    enigma.synchronize()
    torch.testing.assert_close(y, want)


@needs_torch
def test_torch_execute_and_no_host_copies():
    n = 4096
    x = torch.randn(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    rt = enigma.MetalRuntime("cuda")
    c = enigma.compile(axpy)
    c(x, y, 1.0, n, grid=n, threads=256)  # warm: pipeline made
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
        got = rt.execute(c, inputs=[x, y, 2.0, n], grid=n, threads=256)
        torch.cuda.synchronize()
    assert got is None
    assert _no_copies(prof) == []
    torch.testing.assert_close(y, 3.0 * x)


@needs_torch
def test_torch_ops_give_torch_tensors_without_host_copies():
    x = torch.randn(64, 4097, device="cuda")
    ref = torch.softmax(x, dim=1)
    y = ops.softmax(x)
    assert isinstance(y, torch.Tensor) and y.is_cuda and y.shape == x.shape and y.dtype == x.dtype
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
        y = ops.softmax(x)
        torch.cuda.synchronize()
    assert _no_copies(prof) == []
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)

    w = torch.rand(4097, device="cuda") + 0.5
    rms = ops.rms_norm(x, w, eps=1e-6)
    torch.testing.assert_close(rms, x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6) * w, rtol=1e-4, atol=1e-5)
    s = ops.sum(x)
    torch.testing.assert_close(s, x.double().sum().float(), rtol=1e-4, atol=1e-2)


@needs_torch
def test_torch_half_types_and_attention():
    h = torch.randn(3, 1000, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(ops.relu(h), torch.relu(h))
    b = torch.randn(1000, device="cuda", dtype=torch.bfloat16)
    got = ops.scale(b, 0.5)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, b * 0.5)
    q = torch.randn(8, 128, device="cuda")
    k = torch.randn(8, 1000, 128, device="cuda")
    v = torch.randn(8, 1000, 128, device="cuda")
    scores = torch.einsum("hd,hsd->hs", q, k) / math.sqrt(128)
    ref = torch.einsum("hs,hsd->hd", torch.softmax(scores, dim=1), v)
    torch.testing.assert_close(ops.attention_decode(q, k, v, fused=True), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ops.attention_decode(q, k, v), ref, rtol=1e-4, atol=1e-4)


@needs_torch
def test_torch_mismatches_name_the_parameter():
    c = enigma.compile(axpy)
    x = torch.randn(8, device="cuda")
    with pytest.raises(enigma.DispatchError, match=r"parameter `X` \(f32 buffer\): expected f32 data, got float64"):
        c(x.double(), x, 1.0, 8, grid=8, threads=8)
    with pytest.raises(enigma.DispatchError, match=r"parameter `Y` \(f32 buffer\).*not C-contiguous"):
        c(x, torch.randn(16, device="cuda")[::2], 1.0, 8, grid=8, threads=8)
    sim = enigma.MetalRuntime("cpu")
    with pytest.raises(enigma.DispatchError, match=r"parameter `X` \(f32 buffer\): the array is in CUDA memory, but this runtime runs on the sim device"):
        c(x, x, 1.0, 8, grid=8, threads=8, rt=sim)


@needs_torch
def test_enigma_arrays_are_shared_with_torch():
    a = enigma.asarray(np.arange(10, dtype=np.float32), device="cuda")
    t = torch.from_dlpack(a)
    assert t.is_cuda and t.shape == (10,)
    torch.testing.assert_close(t, torch.arange(10, dtype=torch.float32, device="cuda"))
    t.mul_(2)  # torch writes enigma's memory
    torch.cuda.synchronize()
    np.testing.assert_array_equal(a.numpy(), np.arange(10, dtype=np.float32) * 2)
    y = ops.softmax(a.reshape([2, 5]))
    assert isinstance(y, enigma.Array) and y.device == "cuda"
    ref = torch.softmax(t.reshape(2, 5), dim=1)
    torch.testing.assert_close(torch.from_dlpack(y), ref)


@needs_cupy
def test_cupy_kernel_in_place_and_ops():
    n = 5000
    x = cupy.random.standard_normal(n, dtype=cupy.float32)
    y = cupy.random.standard_normal(n, dtype=cupy.float32)
    want = y + 0.5 * x
    ptr = y.data.ptr
    enigma.compile(axpy)(x, y, 0.5, n, grid=n, threads=128)
    cupy.cuda.get_current_stream().synchronize()
    assert y.data.ptr == ptr
    cupy.testing.assert_allclose(y, want, rtol=1e-6)
    m = cupy.random.standard_normal((16, 300), dtype=cupy.float32)
    e = cupy.exp(m - m.max(axis=1, keepdims=True))
    got = ops.softmax(m)
    assert isinstance(got, cupy.ndarray)
    cupy.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
