"""Device arrays, DLPack and the short call form on the simulator (or
ENIGMA_TEST_DEVICE): results against numpy references, in-place outputs
seeing the kernel's writes, and errors naming the parameter.

On the simulator, host memory (numpy, DLPack from numpy) is copied into
simulated memory and the kernel's writes are copied back into the caller's
array; the CUDA tests (test_gpu_interop.py) check the zero-copy path."""
import os

import numpy as np
import pytest

import enigma
import enigma.ops as ops

DEVICE = os.environ.get("ENIGMA_TEST_DEVICE", "cpu")


@enigma.kernel
def axpy(X: enigma.f32, Y: enigma.f32, a: enigma.constant(enigma.f32), n: enigma.constant(enigma.u32)):
    i = enigma.thread_position_in_grid.x
    if i < n:
        Y[i] = Y[i] + a * X[i]


class DLPackOnly:
    """An array that offers nothing but DLPack, as another framework's would."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.fixture(scope="module")
def rt():
    return enigma.MetalRuntime(DEVICE)


def data(n, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32)


def test_one_runtime_per_device_and_one_compiled_kernel_per_specialisation():
    assert enigma.MetalRuntime("cpu")._rt is enigma.MetalRuntime("sim")._rt
    assert enigma.compile(axpy) is enigma.compile(axpy)

    @enigma.kernel
    def tiled(Out: enigma.u32):
        T = enigma.spec("T", enigma.u32, 32)
        Out[enigma.thread_position_in_grid] = T

    assert enigma.compile(tiled, T=64) is enigma.compile(tiled, T=64)
    assert enigma.compile(tiled, T=64) is not enigma.compile(tiled, T=16)
    assert enigma.compile(tiled, T=16).spec == {"T": 16}


def test_device_arrays_round_trip(rt):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = rt.asarray(x)
    assert isinstance(a, enigma.Array)
    assert a.shape == (3, 4) and a.dtype == "f32" and a.nbytes == 48 and a.size == 12 and len(a) == 3
    assert a.device == rt.device and "shape=[3, 4]" in repr(a)
    np.testing.assert_array_equal(a.numpy(), x)
    np.testing.assert_array_equal(np.asarray(a), x)
    np.testing.assert_array_equal(a.reshape([12]).numpy(), x.ravel())
    z = rt.empty((2, 5), "f16")
    assert z.shape == (2, 5) and z.dtype == "f16"
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 5), np.float16))
    assert enigma.empty(3, np.int32, device=DEVICE).numpy().dtype == np.int32
    with pytest.raises(ValueError, match="cannot reshape"):
        a.reshape([5])
    with pytest.raises(ValueError, match="copy"):
        a.__array__(copy=False)


def test_execute_on_device_arrays_returns_them_without_host_copies(rt):
    n = 1000
    x, y = data(n, 1), data(n, 2)
    X, Y = rt.asarray(x), rt.asarray(y)
    c = enigma.compile(axpy)
    # The seed's form with device arrays: inputs cover X, Y (written in place), a, n.
    assert rt.execute(c, inputs=[X, Y, 2.0, n], grid=n, threads=256) is None
    np.testing.assert_allclose(Y.numpy(), y + 2.0 * x, rtol=1e-6)
    np.testing.assert_array_equal(X.numpy(), x)


def test_execute_outputs_as_device_arrays(rt):
    @enigma.kernel
    def square(A: enigma.f32, Out: enigma.f32):
        i = enigma.thread_position_in_grid
        Out[i] = A[i] * A[i]

    x = data(64, 3)
    out = rt.empty(64)
    got = rt.execute(enigma.compile(square), inputs=[rt.asarray(x)], outputs=[out], grid=64, threads=32)
    assert got is out
    np.testing.assert_allclose(out.numpy(), x * x, rtol=1e-6)
    # The seed's output_size form still returns bytes, with device-array inputs too.
    raw = rt.execute(enigma.compile(square), inputs=[rt.asarray(x)], output_size=256, grid=64, threads=32)
    np.testing.assert_allclose(np.frombuffer(raw, np.float32), x * x, rtol=1e-6)


def test_call_form_writes_numpy_in_place(rt):
    n = 333
    x, y = data(n, 4), data(n, 5)
    want = y + 0.5 * x
    enigma.compile(axpy)(x, y, 0.5, n, grid=n, threads=64, rt=rt)
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_call_form_on_device_arrays_picks_their_device(rt):
    n = 100
    x, y = data(n, 6), data(n, 7)
    X, Y = rt.asarray(x), rt.asarray(y)
    enigma.compile(axpy)(X, Y, np.float32(-1.0), np.uint32(n), grid=n, threads=32)
    np.testing.assert_allclose(Y.numpy(), y - x, rtol=1e-6)
    enigma.compile(axpy)(X, Y, 1.0, n, threadgroups=4, threads=32)
    np.testing.assert_allclose(Y.numpy(), y, rtol=1e-6, atol=1e-7)


def test_dlpack_from_numpy_inputs_and_in_place_outputs(rt):
    n = 257
    x, y = data(n, 8), data(n, 9)
    want = y + 3.0 * x
    enigma.compile(axpy)(DLPackOnly(x), DLPackOnly(y), 3.0, n, grid=n, threads=128, rt=rt)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    np.testing.assert_array_equal(x, data(n, 8))
    # execute with a DLPack input the kernel writes: written in place.
    y2 = data(n, 9)
    wrapped = DLPackOnly(y2)
    got = rt.execute(enigma.compile(axpy), inputs=[DLPackOnly(x), wrapped, 3.0, n], grid=n, threads=128)
    assert got is None
    np.testing.assert_allclose(y2, want, rtol=1e-6)


def test_ops_return_the_callers_kind_of_array(rt):
    x = np.random.default_rng(10).standard_normal((5, 77)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    y = ops.softmax(x, rt=rt)
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-7)
    X = rt.asarray(x)
    Y = ops.softmax(X)
    assert isinstance(Y, enigma.Array) and Y.shape == (5, 77) and Y.device == rt.device
    np.testing.assert_allclose(Y.numpy(), ref, rtol=1e-5, atol=1e-7)
    # Chained on the device: RMSNorm of the softmax, then a sum, no host copies between.
    w = rt.asarray(np.linspace(0.5, 1.5, 77).astype(np.float32))
    Z = ops.rms_norm(Y, w, eps=1e-6)
    rms = np.sqrt((ref.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(Z.numpy(), ref / rms * np.linspace(0.5, 1.5, 77), rtol=1e-4)
    s = ops.sum(Z)
    assert isinstance(s, enigma.Array) and s.shape == ()
    np.testing.assert_allclose(float(s.numpy()), (ref / rms * np.linspace(0.5, 1.5, 77)).sum(), rtol=1e-4)
    d = ops.sum(DLPackOnly(x.ravel()), rt=rt)
    np.testing.assert_allclose(float(d), x.astype(np.float64).sum(), rtol=1e-4, atol=1e-4)


def test_ops_on_device_arrays_of_every_library_type(rt):
    h = np.random.default_rng(11).uniform(-2, 2, (3, 31)).astype(np.float16)
    y = ops.relu(rt.asarray(h))
    assert y.dtype == "f16"
    np.testing.assert_array_equal(y.numpy(), np.maximum(h, 0))
    bits = (np.random.default_rng(12).uniform(-2, 2, 40).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    y = ops.scale(rt.asarray(bits, dtype="bf16"), 2.0)
    assert y.dtype == "bf16"
    back = (y.numpy().astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(back, (bits.astype(np.uint32) << 16).view(np.float32) * 2)


def test_mismatches_name_the_parameter(rt):
    c = enigma.compile(axpy)
    x = data(8)
    with pytest.raises(enigma.DispatchError, match=r"parameter `X` \(f32 buffer\): expected f32 data, got float64"):
        c(DLPackOnly(np.zeros(8)), x, 1.0, 8, grid=8, threads=8, rt=rt)
    with pytest.raises(enigma.DispatchError, match=r"parameter `Y` \(f32 buffer\): the array \(shape \[8\]\) is not C-contiguous"):
        c(x, DLPackOnly(np.zeros(16, np.float32)[::2]), 1.0, 8, grid=8, threads=8, rt=rt)
    with pytest.raises(enigma.DispatchError, match=r"parameter `X` \(f32 buffer\): expected f32 data, got an enigma.Array of i32"):
        c(rt.empty(8, "i32"), x, 1.0, 8, grid=8, threads=8, rt=rt)
    with pytest.raises(enigma.DispatchError, match=r"parameter `Y` \(f32 buffer\): a object has no buffer protocol"):
        c(x, object(), 1.0, 8, grid=8, threads=8, rt=rt)
    with pytest.raises(enigma.DispatchError, match="takes 4 argument"):
        c(x, x, grid=8, threads=8, rt=rt)
    with pytest.raises(TypeError, match="float64"):
        ops.softmax(np.zeros((2, 2)), rt=rt)


@pytest.mark.skipif(DEVICE not in ("cpu", "sim"), reason="checks what the simulator refuses")
def test_the_simulator_refuses_cuda_memory_and_dlpack_export(sim):
    class FakeCuda:
        __cuda_array_interface__ = {"data": (0x1000, False), "shape": (8,), "typestr": "<f4", "version": 3}

    x = data(8)
    with pytest.raises(enigma.DispatchError, match=r"parameter `Y` \(f32 buffer\): the array is in CUDA memory, but this runtime runs on the sim device"):
        enigma.compile(axpy)(x, FakeCuda(), 1.0, 8, grid=8, threads=8, rt=sim)
    a = sim.asarray(x)
    assert a.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="simulated memory"):
        a.__dlpack__()
    with pytest.raises(BufferError, match="simulated memory"):
        np.from_dlpack(a)
