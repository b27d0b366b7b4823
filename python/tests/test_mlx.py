"""MLX arrays through enigma: ``enigma.ops`` on ``mx.array``s, compiled
kernels called in MLX's convention (``kernel(inputs=..., grid=...,
threadgroup=..., output_shapes=..., output_dtypes=...)``), seed 004's
autotuning loop run verbatim on an enigma kernel, and
``MetalRuntime.execute`` on ``mx.array`` inputs — all on the simulator.

Each ``mx.array`` result is held to the result of the same operation on
numpy inputs (the numpy path is checked against numpy references in
test_ops.py and test_quant.py), bit for bit, and to numpy itself where the
arithmetic is exact. Without MLX (``pip install "mlx[cpu]"``) the module is
skipped and says so.
"""

import numpy as np
import pytest

import enigma
import enigma.ops as ops

mx = pytest.importorskip("mlx.core", reason='MLX is not installed (pip install "mlx[cpu]")')

import seed_script  # noqa: E402 - after the skip

SIM = {"device": "sim"}
RNG = np.random.default_rng(40)


def as_mx(host, dtype):
    """An ``mx.array`` of enigma's ``dtype`` from a float64 numpy array."""
    if dtype == "bf16":
        return mx.array(host.astype(np.float32)).astype(mx.bfloat16)
    return mx.array(host.astype({"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32}[dtype]))


def as_numpy(x):
    """The numpy input enigma's numpy path takes for ``mx.array`` x
    (bfloat16 as its uint16 bits, with ``dtype="bf16"``)."""
    if x.dtype == mx.bfloat16:
        return np.array(x.view(mx.uint16)), {"dtype": "bf16"}
    return np.array(x), {}


def same(got, want):
    """``got`` (an mx.array) holds exactly ``want`` (a numpy result)."""
    assert isinstance(got, mx.array), type(got)
    bits = np.array(got.view(mx.uint16)) if got.dtype == mx.bfloat16 else np.array(got)
    np.testing.assert_array_equal(bits, want)


UNARY = ["relu", "silu", "gelu", "softmax", "sum", "max", "min", "sum_rows", "max_rows", "min_rows"]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("op", UNARY)
def test_unary_ops_give_mx_arrays_equal_to_the_numpy_path(op, dtype):
    x = as_mx(RNG.uniform(-3, 3, (5, 37)), dtype)
    if op in ("sum", "max", "min"):
        x = x.reshape(-1)
    host, kw = as_numpy(x)
    fn = getattr(ops, op)
    same(fn(x, **SIM), fn(host, **kw, **SIM))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_binary_norm_scale_and_matmul_ops_give_mx_arrays(dtype):
    a, b = as_mx(RNG.uniform(-2, 2, (6, 40)), dtype), as_mx(RNG.uniform(-2, 2, (6, 40)), dtype)
    w, bias = as_mx(RNG.uniform(0.5, 1.5, 40), dtype), as_mx(RNG.uniform(-1, 1, 40), dtype)
    (ha, kw), (hb, _), (hw, _), (hbias, _) = as_numpy(a), as_numpy(b), as_numpy(w), as_numpy(bias)
    same(ops.add(a, b, **SIM), ops.add(ha, hb, **kw, **SIM))
    same(ops.mul(a, b, **SIM), ops.mul(ha, hb, **kw, **SIM))
    same(ops.scale(a, 0.5, **SIM), ops.scale(ha, 0.5, **kw, **SIM))
    same(ops.rms_norm(a, w, **SIM), ops.rms_norm(ha, hw, **kw, **SIM))
    same(ops.layer_norm(a, w, bias, **SIM), ops.layer_norm(ha, hw, hbias, **kw, **SIM))
    bt = as_mx(RNG.uniform(-2, 2, (40, 9)), dtype)
    same(ops.matmul(a, bt, **SIM), ops.matmul(ha, as_numpy(bt)[0], **kw, **SIM))
    same(ops.gemv(a, mx.ones((40,)), **SIM), ops.gemv(ha, np.ones(40, np.float32), **kw, **SIM))


def test_integer_prefix_sum_and_exact_results_against_numpy():
    for dtype in ("i32", "u32", "f32"):
        x = as_mx(RNG.integers(0, 50, 300).astype(np.float64), dtype)
        got = ops.prefix_sum(x, **SIM)
        assert isinstance(got, mx.array) and got.dtype == x.dtype
        np.testing.assert_array_equal(np.array(got), np.cumsum(np.array(x)))
    # Small integers: the product is exact in f32.
    a, b = RNG.integers(-4, 5, (7, 13)), RNG.integers(-4, 5, (13, 5))
    np.testing.assert_array_equal(np.array(ops.matmul(as_mx(a, "f32"), as_mx(b, "f32"), **SIM)), a @ b)


def test_attention_decode_gives_mx_arrays():
    q, k, v = (as_mx(RNG.uniform(-1, 1, s), "f16") for s in [(2, 64), (2, 33, 64), (2, 33, 64)])
    same(ops.attention_decode(q, k, v, **SIM), ops.attention_decode(np.array(q), np.array(k), np.array(v), **SIM))


def test_strided_mx_views_are_read_in_order():
    x = mx.arange(12, dtype=mx.float32).reshape(3, 4).T  # a transposed view
    same(ops.softmax(x, **SIM), ops.softmax(np.ascontiguousarray(np.array(x)), **SIM))


def test_qmatmul_reads_mlx_quantized_weights():
    # mx.quantize's own output (MLX's affine layout) straight from mx.arrays.
    n, k = 48, 256
    w = mx.array(RNG.uniform(-1, 1, (n, k)).astype(np.float16))
    wq, scales, biases = mx.quantize(w, group_size=64, bits=4)
    a = mx.array(RNG.uniform(-1, 1, (3, k)).astype(np.float16))
    got = ops.qmatmul(a, wq, scales, "mlx_affine", biases=biases, **SIM)
    want = ops.qmatmul(np.array(a), np.array(wq), np.array(scales), "mlx_affine", biases=np.array(biases), **SIM)
    same(got, want)
    # And the weights decode as MLX decodes them (in f32: MLX rounds its
    # decoding to the scales' type, f16, where enigma keeps f32).
    deq = ops.dequantize(wq, scales, "mlx_affine", biases=biases)
    assert isinstance(deq, mx.array)
    mlx_f32 = mx.dequantize(wq, scales.astype(mx.float32), biases.astype(mx.float32), group_size=64, bits=4)
    np.testing.assert_allclose(np.array(deq), np.array(mlx_f32).T, rtol=1e-6, atol=1e-7)


@enigma.kernel
def scaled_copy(src: enigma.f32, out: enigma.f32, half_out: enigma.f16, factor: enigma.constant(enigma.f32),
                n: enigma.constant(enigma.u32)):
    i = enigma.thread_position_in_grid.x
    if i < n:
        out[i] = src[i] * factor
        half_out[i] = enigma.f16(src[i])


def test_compiled_kernel_in_mlx_convention():
    k = enigma.compile(scaled_copy)
    x = mx.array(RNG.uniform(-4, 4, 1000).astype(np.float32))
    out, half = k(inputs=[x, 0.5, mx.array(1000, dtype=mx.uint32)], grid=(1000, 1, 1), threadgroup=(256, 1, 1),
                  output_shapes=[(1000,), (1000,)], output_dtypes=[mx.float32, mx.float16], **SIM)
    assert isinstance(out, mx.array) and out.dtype == mx.float32 and half.dtype == mx.float16
    np.testing.assert_array_equal(np.array(out), np.array(x) * np.float32(0.5))
    np.testing.assert_array_equal(np.array(half), np.array(x).astype(np.float16))
    # init_value fills what the kernel does not write; numpy inputs give numpy outputs.
    out, _ = k(inputs=[np.array(x), 2.0, 10], grid=(10, 1, 1), threadgroup=(32, 1, 1),
               output_shapes=[(16,), (16,)], output_dtypes=[np.float32, np.float16], init_value=-1, **SIM)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.concatenate([np.array(x)[:10] * 2, -np.ones(6, np.float32)]))


@enigma.kernel
def tiled_fill(out: enigma.u32):
    TILE = enigma.spec("TILE", enigma.u32, 1)
    i = enigma.thread_position_in_grid.x
    out[i] = i * TILE


def test_mlx_convention_template_and_errors():
    k = enigma.compile(tiled_fill)
    (out,) = k(inputs=[], grid=(64, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(64,)], output_dtypes=[mx.uint32],
               template=[("TILE", 3)], **SIM)
    np.testing.assert_array_equal(np.array(out), np.arange(64) * 3)
    with pytest.raises(enigma.DispatchError, match="types come from its annotations"):
        k(inputs=[], grid=(64, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(64,)], output_dtypes=[mx.uint32],
          template=[("T", mx.float32)], **SIM)
    with pytest.raises(enigma.DispatchError, match="writes u32 elements, output_dtypes gives f32"):
        k(inputs=[], grid=(64, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(64,)], output_dtypes=[mx.float32], **SIM)
    with pytest.raises(enigma.DispatchError, match="takes 0 input"):
        k(inputs=[mx.zeros(3)], grid=(64, 1, 1), threadgroup=(32, 1, 1), output_shapes=[(64,)],
          output_dtypes=[mx.uint32], **SIM)
    with pytest.raises(enigma.DispatchError, match="needs grid= .* and threadgroup="):
        k(inputs=[], grid=(64, 1, 1), output_shapes=[(64,)], output_dtypes=[mx.uint32], **SIM)


def test_a_grid_that_counts_threadgroups_is_warned_about():
    # MLX's grid counts threads: grid=(4,) × threadgroup (256,) = 1024, the
    # output's size, launches 4 threads — the mistake MLX users make.
    k = enigma.compile(tiled_fill)
    with pytest.warns(UserWarning, match=r"grid counts threads .* pass grid=1024"):
        (out,) = k(inputs=[], grid=(4, 1, 1), threadgroup=(256, 1, 1), output_shapes=[(1024,)],
                   output_dtypes=[mx.uint32], init_value=0, **SIM)
    np.testing.assert_array_equal(np.array(out)[:8], [0, 1, 2, 3, 0, 0, 0, 0])


@enigma.kernel
def add_one(inp: enigma.f32, out: enigma.f32):
    i = enigma.thread_position_in_grid.x
    out[i] = inp[i] + 1.0


def test_seed_004_autotune_loop_runs_verbatim():
    script, origin = seed_script.autotune_script()
    namespace = {}
    exec(compile(script, origin, "exec"), namespace)  # noqa: S102 - the seed's own listing
    k = enigma.compile(add_one)
    x = mx.arange(2048, dtype=mx.float32)
    best = namespace["autotune_threadgroup"](k, [x], (2048, 1, 1), [(2048,)], [mx.float32], warmup=1, iters=2)
    assert best in (32, 64, 128, 256, 512, 1024)
    (out,) = k(inputs=[x], grid=(2048, 1, 1), threadgroup=(best, 1, 1), output_shapes=[(2048,)], output_dtypes=[mx.float32])
    np.testing.assert_array_equal(np.array(out), np.arange(2048, dtype=np.float32) + 1)


def test_autotune_copy_matches_the_seed():
    p = seed_script.seed_path(seed_script.AUTOTUNE_SEED_NAME)
    if p is None:
        pytest.skip("seed 004 is not beside the checkout (shared/seeds); the copy in tests/data stands in")
    assert seed_script.extract_autotune(p.read_text(encoding="utf-8")) == seed_script.AUTOTUNE_COPY.read_text(encoding="utf-8")


def test_execute_returns_mx_arrays_for_mx_inputs():
    rt = enigma.MetalRuntime(device="sim")
    x = mx.arange(64, dtype=mx.float32)
    out = rt.execute(enigma.compile(add_one), [x], output_size=64 * 4, grid=64, threads=32)
    assert isinstance(out, mx.array) and out.dtype == mx.float32
    np.testing.assert_array_equal(np.array(out), np.arange(64, dtype=np.float32) + 1)


# --- export to MLX ---------------------------------------------------------------

import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import enigma.mlx  # noqa: E402

STRICT_SHIM = Path(__file__).resolve().parents[2] / "crates" / "enigma-codegen" / "tests" / "msl_strict"
#: What MLX's own headers give a kernel's source before it (metal_stdlib, and
#: the fixed-width type names its signatures use).
MLX_PRELUDE = """#include <metal_stdlib>
using namespace metal;
typedef half float16_t;
typedef char int8_t; typedef uchar uint8_t; typedef short int16_t; typedef ushort uint16_t;
typedef int int32_t; typedef uint uint32_t; typedef long int64_t; typedef ulong uint64_t;
"""


def strict_check(source, tmp_path, version=300):
    """clang's errors for ``source`` under the strict MSL shim, or None.
    Two spellings clang's OpenCL mode reads differently from Apple's
    compiler: MLX's ``[[kernel]]`` attribute is the shim's ``kernel``
    keyword (clang then treats the function as a kernel, where threadgroup
    memory may be declared), except on a template, which OpenCL does not
    allow as a kernel; and MLX's ``template [[host_name(...)]] [[kernel]]
    decltype(...)`` instantiation is checked without its attributes."""
    if shutil.which("clang++") is None:
        pytest.skip("clang++ is not installed (apt-get install clang), so the strict MSL check did not run")
    if not STRICT_SHIM.is_dir():
        pytest.skip(f"the strict MSL shim is not at {STRICT_SHIM}")
    if "\ntemplate <" not in source:
        source = source.replace("[[kernel]] void", "kernel void")
    source = re.sub(r'^template \[\[host_name\("[^"]*"\)\]\] \[\[kernel\]\] ', "template ", source, flags=re.M)
    f = tmp_path / "mlx_kernel.metal"
    f.write_text(MLX_PRELUDE + source)
    r = subprocess.run(["clang++", "-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc", "-fsyntax-only",
                        "-Wno-unknown-attributes", f"-DENIGMA_MSL_VERSION={version}", "-I", str(STRICT_SHIM), str(f)],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else r.stderr


@enigma.kernel
def partial_sums(A: enigma.f32, PartialOut: enigma.f32):
    scratch = enigma.threadgroup_alloc(enigma.f32, 32)
    total = enigma.simd_sum(A[enigma.thread_position_in_grid.x])
    lane = enigma.thread_index_in_simdgroup()
    group = enigma.simdgroup_index_in_threadgroup()
    with enigma.if_(lane == 0):
        scratch[group] = total
    enigma.barrier(mem_flags="mem_threadgroup")
    with enigma.if_(enigma.thread_index_in_threadgroup() == 0):
        s = scratch[0]
        for i in range(1, enigma.simdgroups_per_threadgroup()):
            s += scratch[i]
        PartialOut[enigma.threadgroup_position_in_grid.x] = s


@enigma.kernel
def specialised(data: enigma.f16, out: enigma.f32, n: enigma.constant(enigma.u32)):
    TILE = enigma.spec("TILE", enigma.u32, 4)
    ALPHA = enigma.spec("ALPHA", enigma.f32, 0.5)
    i = enigma.thread_position_in_grid.x
    if i < n:
        out[i] = enigma.f32(data[i]) * ALPHA + enigma.f32(TILE)


@enigma.kernel
def histogram(A: enigma.u32, Hist: enigma.u32):
    enigma.atomic_add(Hist, A[enigma.thread_position_in_grid.x] % 16, 1)


def test_export_splits_the_msl_as_mlx_assembles_it(tmp_path):
    m = enigma.compile(partial_sums).to_mlx()
    assert (m.input_names, m.output_names, m.template, m.atomic_outputs) == (["A"], ["PartialOut"], [], False)
    source = m.assemble([("f32", (1024,))], ["f32"])
    assert "const device float* A [[buffer(0)]]" in source and "device float* PartialOut [[buffer(1)]]" in source
    assert "uint thread_index_in_simdgroup [[thread_index_in_simdgroup]]" in source
    assert strict_check(source, tmp_path) is None
    # A small input goes to the constant address space in MLX's signature.
    assert strict_check(m.assemble([("f32", (4,))], ["f32"]), tmp_path) is None


def test_export_makes_integer_constants_template_arguments(tmp_path):
    m = enigma.compile(specialised, TILE=3, ALPHA=0.25).to_mlx()
    assert m.template == [("TILE", 3)] and m.input_names == ["data", "n"]
    assert "constant float ALPHA_v = 0.25f;" in m.header
    source = m.assemble([("f16", (100,)), ("u32", ())], ["f32"], template=[("TILE", 7)])
    assert "template <int TILE>" in source and "custom_kernel_specialised<7>" in source
    assert strict_check(source, tmp_path) is None
    with pytest.raises(enigma.mlx.ExportError, match="no integer or bool specialisation constant `ALPHA`"):
        m.assemble([("f16", (100,)), ("u32", ())], ["f32"], template=[("ALPHA", 1)])


def test_export_of_atomic_outputs(tmp_path):
    m = enigma.compile(histogram).to_mlx()
    assert m.atomic_outputs and m.output_names == ["Hist"]
    assert strict_check(m.assemble([("u32", (256,))], ["u32"]), tmp_path) is None


@enigma.kernel
def vector_scale(A: enigma.float4, Out: enigma.float4):
    i = enigma.thread_position_in_grid.x
    Out[i] = A[i] * 2.0


@enigma.kernel
def invert_texture(src: enigma.texture2d(enigma.f32, access="read"), out: enigma.f32):
    p = enigma.thread_position_in_grid
    out[p.x] = 1.0 - src.read(p.xy).x


def test_export_refuses_what_mlx_cannot_declare():
    with pytest.raises(enigma.mlx.ExportError, match="buffer `A` \\(float4\\): MLX types a buffer by its array's scalar dtype"):
        enigma.compile(vector_scale).to_mlx()
    with pytest.raises(enigma.mlx.ExportError, match="take no textures"):
        enigma.compile(invert_texture).to_mlx()


def test_the_mlx_call_checks_dtypes_then_needs_mlx_metal():
    m = enigma.compile(partial_sums).to_mlx()
    with pytest.raises(enigma.mlx.ExportError, match="input `A`: the kernel reads f32, the array holds f16"):
        m(inputs=[mx.ones((1024,), dtype=mx.float16)], grid=(1024, 1, 1), threadgroup=(256, 1, 1),
          output_shapes=[(4,)], output_dtypes=[mx.float32])
    x = mx.arange(1024, dtype=mx.float32)
    try:
        (out,) = m(inputs=[x], grid=(1024, 1, 1), threadgroup=(256, 1, 1), output_shapes=[(4,)], output_dtypes=[mx.float32])
        mx.eval(out)
    except RuntimeError as e:
        if "No Metal back-end" in str(e):
            pytest.skip(f"MLX says: {e}")
        raise
    np.testing.assert_array_equal(np.array(out), np.arange(1024, dtype=np.float64).reshape(4, 256).sum(axis=1))
