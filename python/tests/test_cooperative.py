"""Cooperative tensor operations (Metal 4's matmul2d) in the Python DSL,
spelt as in the issue and in MSL: the 4-SIMD-group f16 product against
numpy on the simulator and under the sanitizer; the sanitizer's layout
check (a kernel reading the accumulator by slot as if the layout were fixed
is reported, the same kernel through get_multidimensional_index is clean);
slot access, fill, map, reductions, slices and a destination as the next
left operand; the scope checked at dispatch."""

from __future__ import annotations

import json

import numpy as np
import pytest

import enigma

DESC = enigma.matmul2d_descriptor(64, 64, enigma.dynamic_extent)      # m, n, k; transposes, relaxed precision, mode as MSL


@enigma.kernel
def gemm_tile(A: enigma.f16, B: enigma.f16, C: enigma.f32, M: enigma.u32, N: enigma.u32, K: enigma.u32):
    op = enigma.matmul2d(DESC, enigma.execution_simdgroups(4))
    a = enigma.tensor(A, (K, M))                # extents innermost first, as MSL's dextents
    b = enigma.tensor(B, (N, K))
    c = op.get_destination_cooperative_tensor(a, b, enigma.f32)
    op.run(a, b, c)
    c.store(enigma.tensor(C, (N, M)))


def halves(rng, *shape):
    """Multiples of 1/2 in [-4, 4]: f16 products and their f32 sums are exact."""
    return (rng.integers(-8, 9, size=shape) / 2).astype(np.float32)


def run_gemm(sanitize, k):
    rng = np.random.default_rng(k)
    a, b = halves(rng, 64, k), halves(rng, k, 64)
    c = np.zeros(64 * 64, np.float32)
    rt = enigma.MetalRuntime(device="cpu", sanitize=sanitize)
    sizes = [np.array([64], np.uint32), np.array([64], np.uint32), np.array([k], np.uint32)]
    rt.execute(enigma.compile(gemm_tile), inputs=[a.astype(np.float16), b.astype(np.float16), c] + sizes, grid=128, threads=128)
    return c, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("sanitize", [False, True])
@pytest.mark.parametrize("k", [64, 200])
def test_the_issue_kernel_matches_numpy(sanitize, k):
    got, want = run_gemm(sanitize, k)
    np.testing.assert_array_equal(got.reshape(64, 64), want)


ONE = enigma.matmul2d(enigma.matmul2d_descriptor(32, 32, 16), enigma.execution_simdgroup)


@enigma.kernel
def slots_by_index(A: enigma.f16, B: enigma.f16, C: enigma.f32):
    """Writes slot i of lane l to C[l * capacity + i]: assumes a layout."""
    a = enigma.tensor(A, (16, 32))
    b = enigma.tensor(B, (32, 16))
    c = ONE.get_destination_cooperative_tensor(a, b, enigma.f32)
    ONE.run(a, b, c)
    lane = enigma.thread_index_in_simdgroup()
    for i in range(c.get_capacity()):
        if c.is_valid_element(i):
            C[lane * c.get_capacity() + i] = c[i]


@enigma.kernel
def slots_by_coordinates(A: enigma.f16, B: enigma.f16, C: enigma.f32):
    """The same, each slot written where get_multidimensional_index says."""
    a = enigma.tensor(A, (16, 32))
    b = enigma.tensor(B, (32, 16))
    c = ONE.get_destination_cooperative_tensor(a, b, enigma.f32)
    ONE.run(a, b, c)
    for i in range(c.get_capacity()):
        if c.is_valid_element(i):
            idx = c.get_multidimensional_index(i)
            C[idx.y * 32 + idx.x] = c[i]


def slot_inputs():
    rng = np.random.default_rng(5)
    a, b = halves(rng, 32, 16), halves(rng, 16, 32)
    return a, b, (a.astype(np.float64) @ b).astype(np.float32)


def test_reading_slots_by_index_is_reported_by_the_sanitizer():
    a, b, _ = slot_inputs()
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        rt.execute(enigma.compile(slots_by_index), inputs=[a.astype(np.float16), b.astype(np.float16)], output_size=32 * 32 * 4, grid=32, threads=32)
    layout = [r for r in e.value.reports if str(r["kind"]) == "layout_dependence"]
    assert layout, e.value.reports
    assert layout[0]["kernel"] == "slots_by_index" and layout[0]["variable"] == "C"
    assert "this result depends on the cooperative tensor's layout" in layout[0]["message"]
    assert "cooperative tensor `c`" in layout[0]["message"]


def test_reading_slots_by_their_coordinates_is_clean():
    a, b, want = slot_inputs()
    out = np.zeros(32 * 32, np.float32)
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    rt.execute(enigma.compile(slots_by_coordinates), inputs=[a.astype(np.float16), b.astype(np.float16)], outputs=[out], grid=32, threads=32)
    np.testing.assert_array_equal(out.reshape(32, 32), want)


SCOPE = enigma.execution_simdgroups(2)
FIRST = enigma.matmul2d(enigma.matmul2d_descriptor(32, 32, 32, mode="multiply_accumulate"), SCOPE)
SECOND = enigma.matmul2d(enigma.matmul2d_descriptor(32, 16, 32, transpose_right=True), SCOPE)


@enigma.kernel
def chain(A: enigma.f16, B: enigma.f16, F: enigma.f16, D: enigma.f32, E: enigma.f32, R: enigma.f32, S: enigma.f32):
    """D = 1 + A[:, 8:40]·B, scaled by its coordinates; E = D·Fᵀ; R row maxima of E, S column sums of D."""
    a = enigma.tensor(A, (48, 32)).slice(8, 0)
    b = enigma.tensor(B, (32, 32))
    d = FIRST.get_destination_cooperative_tensor(a, b, enigma.f32)
    d.fill(1.0)
    FIRST.run(a, b, d)
    d.map(lambda v, col, row: v + enigma.f32(col) - enigma.f32(row) * 0.5)
    e = SECOND.get_destination_cooperative_tensor(d, enigma.tensor(F, (32, 16)), enigma.f32)
    SECOND.run(d, enigma.tensor(F, (32, 16)), e)
    rows = e.reduce_rows("max")
    cols = d.reduce_columns("sum")
    d.store(enigma.tensor(D, (32, 32)))
    e.store(enigma.tensor(E, (16, 32)))
    rows.store(enigma.tensor(R, (1, 32)))
    cols.store(enigma.tensor(S, (32, 1)))


@pytest.mark.parametrize("sanitize", [False, True])
def test_fill_map_reductions_slices_and_reuse_match_numpy(sanitize):
    rng = np.random.default_rng(7)
    a, b, f = halves(rng, 32, 48), halves(rng, 32, 32), halves(rng, 16, 32)
    rows_i, cols_i = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    d = 1 + a[:, 8:40].astype(np.float64) @ b + cols_i - rows_i * 0.5
    e = d @ f.T.astype(np.float64)
    outs = [np.zeros(32 * 32, np.float32), np.zeros(32 * 16, np.float32), np.zeros(32, np.float32), np.zeros(32, np.float32)]
    rt = enigma.MetalRuntime(device="cpu", sanitize=sanitize)
    rt.execute(enigma.compile(chain), inputs=[a.astype(np.float16), b.astype(np.float16), f.astype(np.float16)], outputs=outs, grid=64, threads=64)
    np.testing.assert_array_equal(outs[0].reshape(32, 32), d.astype(np.float32))
    np.testing.assert_array_equal(outs[1].reshape(32, 16), e.astype(np.float32))
    np.testing.assert_array_equal(outs[2], e.max(axis=1).astype(np.float32))
    np.testing.assert_array_equal(outs[3], d.sum(axis=0).astype(np.float32))


@enigma.kernel
def online_rows(A: enigma.f16, B: enigma.f16, P: enigma.f32, L: enigma.f32):
    """S = A·B; P = 2^(S - rowmax(S)); L = rowmax · 2 + rowsum(P), by combinations."""
    s = FIRST.get_destination_cooperative_tensor(enigma.tensor(A, (32, 32)), enigma.tensor(B, (32, 32)), enigma.f32)
    s.fill(0.0)
    FIRST.run(enigma.tensor(A, (32, 32)), enigma.tensor(B, (32, 32)), s)
    m = s.reduce_rows("max")
    s.combine(m, "sub")
    s.map(lambda v, col, row: enigma.exp2(v))
    total = s.reduce_rows("sum")
    total.combine(m, "add")
    total.combine(m, "add")
    s.store(enigma.tensor(P, (32, 32)))
    total.store(enigma.tensor(L, (1, 32)))


@pytest.mark.parametrize("sanitize", [False, True])
def test_combinations_apply_row_values_by_coordinates(sanitize):
    rng = np.random.default_rng(11)
    a, b = halves(rng, 32, 32), halves(rng, 32, 32)
    s = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float32)
    m = s.max(axis=1, keepdims=True)
    p = np.exp2(s - m)
    outs = [np.zeros(32 * 32, np.float32), np.zeros(32, np.float32)]
    rt = enigma.MetalRuntime(device="cpu", sanitize=sanitize)
    rt.execute(enigma.compile(online_rows), inputs=[a.astype(np.float16), b.astype(np.float16)], outputs=outs, grid=64, threads=64)
    np.testing.assert_allclose(outs[0].reshape(32, 32), p, rtol=1e-6)
    np.testing.assert_allclose(outs[1], p.sum(axis=1) + 2 * m[:, 0], rtol=1e-5)


def test_combine_names_its_operations():
    def bad(A: enigma.f16, B: enigma.f16):
        s = FIRST.get_destination_cooperative_tensor(enigma.tensor(A, (32, 32)), enigma.tensor(B, (32, 32)), enigma.f32)
        m = s.reduce_rows("max")
        s.combine(m, "div")

    with pytest.raises(enigma.CompileError, match="combine takes one of 'assign', 'add', 'sub', 'mul', 'max', 'min', not 'div'"):
        enigma.compile(enigma.kernel(bad))


def test_a_threadgroup_of_another_size_is_refused_with_both_numbers():
    a = np.zeros(64 * 64, np.float16)
    c = np.zeros(64 * 64, np.float32)
    sizes = [np.array([64], np.uint32)] * 3
    rt = enigma.MetalRuntime(device="cpu")
    with pytest.raises(enigma.DispatchError, match=r"execution_simdgroups\(4\).*64 threads \(2 SIMD groups of 32\)"):
        rt.execute(enigma.compile(gemm_tile), inputs=[a, a, c] + sizes, grid=64, threads=64)


def test_the_names_outside_a_kernel():
    d = enigma.matmul2d_descriptor(16, 32, 8, transpose_left=True, relaxed_precision=True, mode="multiply_accumulate")
    assert d.ir() == {"m": 16, "n": 32, "k": 8, "transpose_left": True, "transpose_right": False, "relaxed_precision": True, "mode": "multiply_accumulate"}
    assert repr(enigma.execution_simdgroups(4)) == "enigma.execution_simdgroups(4)"
    with pytest.raises(ValueError):
        enigma.execution_simdgroups(0)
    with pytest.raises(ValueError):
        enigma.matmul2d_descriptor(16, 16, mode="add")


def test_the_msl_lowering_follows_the_version():
    """Cooperative kernels need no particular MSL version: by default the
    source is on SIMD-group matrices (every Apple GPU with them); MSL 4.0
    writes MetalPerformancePrimitives."""
    default = enigma.compile(gemm_tile)
    assert default.msl_version == "3.1"
    assert "enigma_coop_matmul<half, false, false, false>" in default.msl
    assert "simdgroup_matrix" in default.msl and "mpp::" not in default.msl
    metal4 = enigma.compile(gemm_tile, msl_version="4.0")
    assert metal4.msl_version == "4.0"
    assert "#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>" in metal4.msl
    assert "mpp::tensor_ops::matmul2d<" in metal4.msl and "enigma_coop_" not in metal4.msl


def test_the_device_source_and_lowering_are_the_runtimes():
    rt = enigma.MetalRuntime(device="cpu")
    assert json.loads(rt.native.info_json)["cooperative_lowering"] == "reference"
    with pytest.raises(enigma.DispatchError, match="the sim device does not compile CUDA"):
        rt.native.cuda_source(enigma.compile(gemm_tile).native)
    # The portable source takes the scalar path: no wgmma without a device that has it.
    assert "wgmma.mma_async" not in enigma.compile(gemm_tile).cuda


OVERLAPPED = enigma.matmul2d(enigma.matmul2d_descriptor(64, 64, 16), enigma.execution_simdgroups(4))


@enigma.kernel
def rewrite_after_one_barrier(A: enigma.f16, B: enigma.f16, C: enigma.f32):
    """An overlapped product's operand overwritten after one barrier: a race."""
    ta = enigma.threadgroup_alloc(enigma.f16, 1024)
    tb = enigma.threadgroup_alloc(enigma.f16, 1024)
    lid = enigma.thread_index_in_threadgroup()
    for i in range(lid, 1024, 128):
        ta[i] = A[i]
        tb[i] = B[i]
    enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
    a = enigma.tensor(ta, (16, 64))
    b = enigma.tensor(tb, (64, 16))
    c = OVERLAPPED.get_destination_cooperative_tensor(a, b, enigma.f32)
    OVERLAPPED.run_overlapped(a, b, c)
    enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
    ta[lid] = tb[lid]
    c.store(enigma.tensor(C, (64, 64)))


@enigma.kernel
def rewrite_after_two_barriers(A: enigma.f16, B: enigma.f16, C: enigma.f32):
    """The same write after the second barrier: the operands are free."""
    ta = enigma.threadgroup_alloc(enigma.f16, 1024)
    tb = enigma.threadgroup_alloc(enigma.f16, 1024)
    lid = enigma.thread_index_in_threadgroup()
    for i in range(lid, 1024, 128):
        ta[i] = A[i]
        tb[i] = B[i]
    enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
    a = enigma.tensor(ta, (16, 64))
    b = enigma.tensor(tb, (64, 16))
    c = OVERLAPPED.get_destination_cooperative_tensor(a, b, enigma.f32)
    OVERLAPPED.run_overlapped(a, b, c)
    enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
    enigma.threadgroup_barrier(mem_flags="mem_threadgroup")
    ta[lid] = tb[lid]
    c.store(enigma.tensor(C, (64, 64)))


def test_an_overlapped_product_keeps_its_operands_until_the_second_barrier():
    rng = np.random.default_rng(3)
    a, b = halves(rng, 64, 16), halves(rng, 16, 64)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    c = np.zeros(64 * 64, np.float32)
    rt.execute(enigma.compile(rewrite_after_two_barriers), inputs=[a.astype(np.float16), b.astype(np.float16), c], grid=128, threads=128)
    np.testing.assert_array_equal(c.reshape(64, 64), want)
    assert "matmul2d_overlapped(" in enigma.compile(rewrite_after_two_barriers).ir
    with pytest.raises(enigma.SanitizerError) as e:
        rt.execute(enigma.compile(rewrite_after_one_barrier), inputs=[a.astype(np.float16), b.astype(np.float16), np.zeros(64 * 64, np.float32)], grid=128, threads=128)
    assert "the overlapped product (matmul2d_run_overlapped) may still read it" in str(e.value)
