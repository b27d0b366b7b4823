"""The Python API surface: names, compile products, the runtime, inputs and
outputs, and the documented extensions (by-value scalars, several outputs,
in-place numpy outputs, specialisation constants, dispatch by threadgroups)."""

from __future__ import annotations

import array

import numpy as np
import pytest

import enigma
from conftest import as_array


@enigma.kernel
def scale(A: enigma.f32, factor: enigma.constant(enigma.f32), Out: enigma.f32):
    tid = enigma.thread_position_in_grid
    Out[tid] = A[tid] * factor


@enigma.kernel
def add_one_inplace(Data: enigma.i32):
    tid = enigma.thread_position_in_grid("x")
    Data[tid] = Data[tid] + 1


@enigma.kernel
def split(A: enigma.f32, Lo: enigma.f32, Hi: enigma.u32):
    tid = enigma.thread_position_in_grid
    v = A[tid]
    Lo[tid] = enigma.floor(v)
    with enigma.if_(v > 0.0):
        enigma.atomic_add(Hi, 0, 1)


@enigma.kernel
def tiled(Out: enigma.u32):
    TILE = enigma.spec("TILE", enigma.u32, 4)
    tid = enigma.thread_position_in_grid
    Out[tid] = tid.x * TILE


# --- names -------------------------------------------------------------------

def test_exception_hierarchy():
    for e in (enigma.CompileError, enigma.DispatchError, enigma.SanitizerError):
        assert issubclass(e, enigma.EnigmaError)
    assert issubclass(enigma.DeviceError, enigma.DispatchError)
    assert issubclass(enigma.EnigmaError, Exception)


def test_seed_names_exist():
    for name in ["f32", "f16", "bf16", "i32", "u32", "i64", "u64", "u8", "float4", "half4", "uint3", "int2",
                 "thread_position_in_grid", "thread_position_in_threadgroup", "threadgroup_position_in_grid",
                 "threads_per_threadgroup", "threads_per_grid", "threadgroups_per_grid",
                 "thread_index_in_threadgroup", "thread_index_in_simdgroup", "simdgroup_index_in_threadgroup",
                 "simdgroups_per_threadgroup", "threads_per_simdgroup", "threadgroup_alloc", "if_", "else_",
                 "elif_", "for_range", "barrier", "load_if", "compile", "kernel", "MetalRuntime",
                 "cmp_eq", "cmp_ne", "cmp_lt", "cmp_le", "cmp_gt", "cmp_ge",
                 "simd_sum", "simd_product", "simd_max", "simd_min", "simd_and", "simd_or", "simd_xor",
                 "simd_broadcast", "simd_broadcast_first", "simd_shuffle", "simd_shuffle_up", "simd_shuffle_down",
                 "simd_shuffle_xor", "simd_prefix_inclusive_sum", "simd_prefix_exclusive_sum", "simd_all",
                 "simd_any", "simd_ballot", "simd_is_first", "threadgroup_barrier", "simdgroup_barrier",
                 "exp", "sqrt", "rsqrt", "fma", "clamp", "select", "atomic_add", "spec", "constant", "as_type"]:
        assert hasattr(enigma, name), name
    assert enigma.f32 == enigma.DType("f32") and enigma.float4 == enigma.DType("f32", 4)
    assert enigma.half4.msl_name == "half4" and enigma.uint3.width == 3


def test_language_names_only_mean_something_in_kernels():
    with pytest.raises(TypeError, match="only has a meaning inside an @enigma.kernel"):
        enigma.simd_sum(1.0)
    with pytest.raises(TypeError, match="cast"):
        enigma.f32(1.0)
    with pytest.raises(TypeError, match="enigma.compile"):
        scale(1, 2, 3)


# --- compile ----------------------------------------------------------------

def test_compile_products():
    c = enigma.compile(scale)
    assert c.name == "scale"
    assert [(p.name, p.kind, p.type_name, p.access) for p in c.params] == [
        ("A", "buffer", "f32", "read"), ("factor", "value", "f32", None), ("Out", "buffer", "f32", "read_write"),
    ]
    assert c.ir.startswith("kernel scale(")
    assert "Out[tid.x] = (A[tid.x] * factor)" in c.ir
    assert "kernel void scale(" in c.msl and "[[thread_position_in_grid]]" in c.msl
    assert "__global__" in c.cuda
    assert c.threadgroup_memory_bytes == 0
    assert '"name":"scale"' in c.ir_json.replace(" ", "")
    assert "scale" in repr(c)


def test_ir_text_names_python_lines():
    c = enigma.compile(add_one_inplace)
    line = add_one_inplace.fn.__code__.co_firstlineno + 2
    assert f"test_api.py:{line}" in c.ir


def test_compile_accepts_plain_functions_and_recompiles():
    def plain(X: enigma.u32):
        X[enigma.thread_position_in_grid] = 7

    c = enigma.compile(plain)
    assert c.name == "plain"
    assert enigma.compile(c).name == "plain"
    with pytest.raises(TypeError):
        enigma.compile(42)


def test_threadgroup_memory_reported():
    @enigma.kernel
    def k(X: enigma.f32):
        s = enigma.threadgroup_alloc(enigma.f32, 64)
        h = enigma.threadgroup_alloc("half4", 8)
        s[0] = 1.0
        h[0] = enigma.half4(0.0)
        enigma.barrier(mem_flags="mem_threadgroup")
        X[0] = s[0] + enigma.f32(h[0].x)

    assert enigma.compile(k).threadgroup_memory_bytes == 64 * 4 + 8 * 8


# --- runtime ----------------------------------------------------------------

def test_runtime_device_names():
    rt = enigma.MetalRuntime(device="cpu")
    assert rt.device == "sim"
    assert "simulator" in rt.device_name
    assert rt.info["max_threads_per_threadgroup"] == 1024
    assert enigma.MetalRuntime().device in ("sim", "cuda", "metal")
    assert enigma.MetalRuntime(device="sim").device == "sim"


def test_unknown_device():
    with pytest.raises(enigma.DeviceError, match="unknown device"):
        enigma.MetalRuntime(device="tpu")
    with pytest.raises(TypeError):
        enigma.MetalRuntime(device=3)


def test_metal_unavailable_here():
    import platform
    if platform.system() == "Darwin":
        pytest.skip("this machine may have Metal")
    with pytest.raises(enigma.DispatchError) as e:
        enigma.MetalRuntime(device="metal")
    assert isinstance(e.value, enigma.DeviceError)
    assert "metal" in str(e.value) and "not available" in str(e.value)


def test_cuda_request_is_either_a_device_or_a_clear_error():
    try:
        rt = enigma.MetalRuntime(device="cuda")
    except enigma.DeviceError as e:
        assert "cuda" in str(e).lower() and "not available" in str(e)
    else:
        assert rt.device == "cuda"


def test_scalar_param_and_return_bytes(rt):
    a = np.arange(100, dtype=np.float32)
    out = rt.execute(enigma.compile(scale), inputs=[a, 2.5], output_size=400, grid=(100, 1, 1), threads=(32, 1, 1))
    assert isinstance(out, memoryview) and out.readonly and len(out) == 400 and out.format == "B"
    np.testing.assert_array_equal(as_array(out, np.float32), a * np.float32(2.5))
    # numpy scalars work too
    out = rt.execute(enigma.compile(scale), inputs=[a, np.float32(-1)], output_size=400, grid=100, threads=32)
    np.testing.assert_array_equal(as_array(out, np.float32), -a)


def test_inplace_numpy_buffer(rt):
    d = np.arange(-5, 45, dtype=np.int32)
    ref = d + 1
    ret = rt.execute(enigma.compile(add_one_inplace), inputs=[d], grid=(50,), threads=(16,))
    assert ret is None
    np.testing.assert_array_equal(d, ref)


def test_readonly_input_is_not_written_back(rt):
    d = np.arange(8, dtype=np.int32)
    d.setflags(write=False)
    rt.execute(enigma.compile(add_one_inplace), inputs=[d], grid=8, threads=8)
    np.testing.assert_array_equal(d, np.arange(8))


def test_several_outputs_sizes_and_in_place(rt):
    a = np.linspace(-3, 3, 64, dtype=np.float32)
    c = enigma.compile(split)
    lo, hi = rt.execute(c, inputs=[a], output_size=[64 * 4, 4], grid=(64, 1, 1), threads=(64, 1, 1))
    np.testing.assert_array_equal(as_array(lo, np.float32), np.floor(a))
    assert as_array(hi, np.uint32)[0] == int((a > 0).sum())
    lo_arr = np.full(64, 99, np.float32)
    hi_arr = np.array([1000], np.uint32)
    ret = rt.execute(c, inputs=[a], outputs=[lo_arr, hi_arr], grid=64, threads=32)
    np.testing.assert_array_equal(lo_arr, np.floor(a))
    assert hi_arr[0] == 1000 + int((a > 0).sum())  # outputs= start from the arrays' contents
    assert isinstance(ret, list) and ret[1] == hi_arr.tobytes()


def test_spec_constants(rt):
    for kwargs, tile in [({}, 4), ({"TILE": 7}, 7), ({"spec": {"TILE": 9}}, 9)]:
        c = enigma.compile(tiled, **kwargs)
        assert c.spec == {"TILE": tile}
        out = rt.execute(c, inputs=[], output_size=40, grid=10, threads=10)
        np.testing.assert_array_equal(as_array(out, np.uint32), np.arange(10) * tile)
    assert "function_constant" in enigma.compile(tiled).msl
    with pytest.raises(enigma.CompileError, match="no specialisation constant `TILES`"):
        enigma.compile(tiled, TILES=3)
    with pytest.raises(enigma.CompileError, match="does not fit"):
        enigma.compile(tiled, TILE=-1)


def test_dispatch_threadgroups(rt):
    @enigma.kernel
    def count(Out: enigma.u32):
        g = enigma.threadgroup_position_in_grid("x")
        n = enigma.threads_per_threadgroup("x")
        Out[enigma.thread_position_in_grid] = g * 1000 + n

    c = enigma.compile(count)
    out = as_array(rt.execute(c, inputs=[], output_size=4 * 3 * 10, threadgroups=(3, 1, 1), threads=(10, 1, 1)), np.uint32)
    np.testing.assert_array_equal(out, np.repeat(np.arange(3) * 1000, 10) + 10)
    # dispatchThreads with a partial edge threadgroup: the last one has 5 threads
    out = as_array(rt.execute(c, inputs=[], output_size=4 * 25, grid=(25, 1, 1), threads=(10, 1, 1)), np.uint32)
    np.testing.assert_array_equal(out, np.concatenate([np.full(10, 10), np.full(10, 1010), np.full(5, 2005)]))


# --- inputs -----------------------------------------------------------------

def test_buffer_protocol_objects(rt):
    c = enigma.compile(scale)
    for src in (array.array("f", [1, 2, 3, 4]), bytearray(np.arange(1, 5, dtype=np.float32).tobytes()),
                np.arange(1, 5, dtype=np.float32).tobytes(), memoryview(np.arange(1, 5, dtype=np.float32))):
        out = rt.execute(c, inputs=[src, 3], output_size=16, grid=4, threads=4)
        np.testing.assert_array_equal(as_array(out, np.float32), [3, 6, 9, 12])


def test_multidimensional_contiguous_array(rt):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = rt.execute(enigma.compile(scale), inputs=[a, 2], output_size=48, grid=12, threads=12)
    np.testing.assert_array_equal(as_array(out, np.float32, (3, 4)), a * 2)


def test_wrong_dtype_rejected(rt):
    c = enigma.compile(scale)
    with pytest.raises(enigma.DispatchError, match=r"parameter `A` \(f32 buffer\): expected float32 data, got float64"):
        rt.execute(c, inputs=[np.zeros(4), 1.0], output_size=16, grid=4, threads=4)
    with pytest.raises(enigma.DispatchError, match="expected float32 data, got int32"):
        rt.execute(c, inputs=[np.zeros(4, np.int32), 1.0], output_size=16, grid=4, threads=4)
    with pytest.raises(enigma.DispatchError, match="big-endian"):
        rt.execute(c, inputs=[np.zeros(4, ">f4"), 1.0], output_size=16, grid=4, threads=4)


def test_non_contiguous_rejected(rt):
    c = enigma.compile(scale)
    a = np.arange(16, dtype=np.float32)
    with pytest.raises(enigma.DispatchError, match="not C-contiguous.*ascontiguousarray"):
        rt.execute(c, inputs=[a[::2], 1.0], output_size=32, grid=8, threads=8)
    with pytest.raises(enigma.DispatchError, match="not C-contiguous"):
        rt.execute(c, inputs=[a.reshape(4, 4).T, 1.0], output_size=64, grid=16, threads=16)


def test_bad_arguments(rt):
    c = enigma.compile(scale)
    a = np.zeros(4, np.float32)
    cases = [
        (dict(inputs=[a, 1.0, a, a], output_size=16, grid=4, threads=4), "3 parameter"),
        (dict(inputs=[a], output_size=16, grid=4, threads=4), "`factor` is a by-value f32 and needs a value"),
        (dict(inputs=[a, "x"], output_size=16, grid=4, threads=4), "expected a number, got str"),
        (dict(inputs=[a, True], output_size=16, grid=4, threads=4), "got a bool"),
        (dict(inputs=[3.0, 1.0], output_size=16, grid=4, threads=4), "expected an array"),
        (dict(inputs=[[1.0, 2.0], 1.0], output_size=16, grid=4, threads=4), "no buffer protocol"),
        (dict(inputs=[a, 1.0], output_size=6, grid=4, threads=4), "6 bytes is not a whole number of f32"),
        (dict(inputs=[a, 1.0], grid=4, threads=4), "output_size="),
        (dict(inputs=[a, 1.0], output_size=[16, 16], grid=4, threads=4), "1 output"),
        (dict(inputs=[a, 1.0], output_size=-4, grid=4, threads=4), "non-negative"),
        (dict(inputs=[a, 1.0], output_size=16, threads=4), "exactly one of grid="),
        (dict(inputs=[a, 1.0], output_size=16, grid=(1, 2, 3, 4), threads=4), "1 to 3 components"),
        (dict(inputs=[a, 1.0], output_size=16, grid=(-1,), threads=4), "between 0 and 2^32-1"),
        (dict(inputs=[a, 1.0], output_size=16, grid=(4.0,), threads=4), "must hold ints"),
        (dict(inputs=[a, 1.0], outputs=[b"abcd" * 4], grid=4, threads=4), "writable"),
        (dict(inputs=a, output_size=16, grid=4, threads=4), "inputs must be a list"),
    ]
    for kwargs, msg in cases:
        with pytest.raises(enigma.DispatchError) as e:
            rt.execute(c, **kwargs)
        assert msg in str(e.value), (kwargs, str(e.value))


def test_integer_value_range_checked(rt):
    @enigma.kernel
    def fill(n: enigma.constant(enigma.u8), Out: enigma.u8):
        Out[enigma.thread_position_in_grid] = n

    c = enigma.compile(fill)
    out = rt.execute(c, inputs=[200], output_size=4, grid=4, threads=4)
    assert out == bytes([200] * 4)
    for bad in (256, -1):
        with pytest.raises(enigma.DispatchError, match="fit"):
            rt.execute(c, inputs=[bad], output_size=4, grid=4, threads=4)
    with pytest.raises(enigma.DispatchError, match="expected an integer"):
        rt.execute(c, inputs=[1.5], output_size=4, grid=4, threads=4)


def test_bf16_takes_raw_uint16_bits(rt):
    @enigma.kernel
    def double(A: enigma.bf16, Out: enigma.f32):
        tid = enigma.thread_position_in_grid
        Out[tid] = enigma.f32(A[tid]) * 2.0

    vals = np.array([1.0, -2.5, 0.15625, 3e10], np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16)  # exact in bf16: truncation keeps them
    out = rt.execute(enigma.compile(double), inputs=[bits], output_size=16, grid=4, threads=4)
    expect = (bits.astype(np.uint32) << 16).view(np.float32) * 2
    np.testing.assert_array_equal(as_array(out, np.float32), expect)


def test_ir_text_round_trips(rt):
    c = enigma.compile(scale)
    again = enigma.compile_ir(c.ir)
    assert again.ir == c.ir and again.msl == c.msl
    assert enigma.compile(again).ir == c.ir
    a = np.arange(10, dtype=np.float32)
    out = rt.execute(again, inputs=[a, 3.0], output_size=40, grid=10, threads=10)
    np.testing.assert_array_equal(as_array(out, np.float32), a * 3)
    t = enigma.compile_ir(enigma.compile(tiled).ir, TILE=5)
    np.testing.assert_array_equal(as_array(rt.execute(t, inputs=[], output_size=12, grid=3, threads=3), np.uint32),
                                  [0, 5, 10])
    with pytest.raises(enigma.CompileError, match="IR text"):
        enigma.compile_ir("kernel nope(")
    with pytest.raises(TypeError):
        enigma.compile_ir(b"kernel")
