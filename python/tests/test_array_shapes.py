"""Shapes from the arrays passed in: a buffer parameter annotated without a
shape that the kernel indexes per dimension (``A[i, j]``) or whose
``A.shape`` it reads takes the rank and sizes of the array given at
dispatch, as in numba, CuPy and Triton.

The kernel is compiled once per rank (the sizes are by-value parameters a
dispatch fills from the arrays), each subscript is checked against its
dimension as for declared shapes, and numpy arrays, ``enigma.Array``s and
``MetalRuntime.execute`` all give shapes. Results against numpy.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import enigma


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


@pytest.fixture
def clean():
    """A sanitizing simulator runtime; after a test, its last report has no findings."""
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    yield rt
    assert rt.last_report is not None and rt.last_report.get("findings") == [], rt.last_report


@enigma.kernel
def axpy_2d(A: enigma.f32, B: enigma.f32, C: enigma.f32):
    # numba's habits: no declarations, the shape read from the array.
    i = enigma.thread_position_in_grid.y
    j = enigma.thread_position_in_grid.x
    if i < A.shape[0] and j < A.shape[1]:
        C[i, j] = A[i, j] + 2.0 * B[i, j]


def test_a_numba_style_kernel_indexes_2d_numpy_arrays(clean):
    rng = np.random.default_rng(1)
    c = enigma.compile(axpy_2d)
    for rows, cols in [(5, 7), (33, 3), (1, 64)]:  # sizes that do not divide the threadgroup
        a = rng.standard_normal((rows, cols), dtype=np.float32)
        b = rng.standard_normal((rows, cols), dtype=np.float32)
        out = np.zeros((rows, cols), np.float32)
        c(a, b, out, grid=(cols + 3, rows + 2), threads=(8, 4), rt=clean)
        np.testing.assert_array_equal(out, a + np.float32(2.0) * b)
    # One compilation served every size: the sizes travel as arguments.
    assert c.for_arrays([a, b, out])[0] is c
    assert [p.name for p in c.params] == ["A", "B", "C"]
    assert "A_shape1" in c.msl and "A_shape1" in c.cuda


@enigma.kernel
def row_sums(A: enigma.f32, out: enigma.f32):
    i = enigma.thread_position_in_grid.x
    rows, cols = A.shape
    if i < rows:
        acc = 0.0
        for j in range(cols):
            acc += A[i, j]
        out[i] = acc


def test_shapes_unpack_and_drive_loops(clean):
    a = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
    out = np.zeros(6, np.float32)
    enigma.compile(row_sums)(a, out, grid=8, threads=8, rt=clean)
    np.testing.assert_array_equal(out, a.sum(axis=1))


@enigma.kernel
def last_axis_scale(x: enigma.f32, out: enigma.f32):
    # Reads only the last size and the rank: any rank runs, each compiled once.
    i = enigma.thread_position_in_grid.x
    n = x.shape[-1]
    if i < out.shape[0]:
        out[i] = x[i] * enigma.f32(n) + enigma.f32(x.ndim)


def test_the_kernel_is_specialised_per_rank(clean):
    c = enigma.compile(last_axis_scale)
    assert [a.rank for a in c.array_shapes] == [1, 1]
    seen = []
    for shape in [(12,), (3, 4), (2, 3, 2), (4, 3)]:
        x = np.arange(12, dtype=np.float32).reshape(shape)
        out = np.zeros(12, np.float32)
        c(x, out, grid=16, threads=16, rt=clean)
        np.testing.assert_array_equal(out, x.ravel() * shape[-1] + len(shape))
        seen.append(c.for_arrays([x, out])[0])
    assert seen[0] is c and seen[1] is seen[3] and seen[2] is not seen[1]  # per rank, not per size
    assert [a.rank for a in seen[2].array_shapes] == [3, 1]


def test_enigma_arrays_and_execute_give_shapes(clean):
    a = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
    b = np.ones((4, 3), np.float32)
    c = enigma.compile(axpy_2d)
    da, db, dout = clean.asarray(a), clean.asarray(b), clean.empty((4, 3), "f32")
    c(da, db, dout, grid=(3, 4), threads=(3, 4), rt=clean)
    np.testing.assert_array_equal(dout.numpy(), a + 2.0)
    out = np.zeros((4, 3), np.float32)
    clean.execute(c, [a, b], outputs=[out], grid=(3, 4), threads=(3, 4))
    np.testing.assert_array_equal(out, a + 2.0)


def test_an_output_sized_in_bytes_has_no_shape_to_give():
    rt = enigma.MetalRuntime(device="cpu")
    a = np.zeros((2, 2), np.float32)
    with pytest.raises(enigma.DispatchError, match=r"kernel `axpy_2d`, buffer `C` takes its shape from the array passed.*outputs="):
        rt.execute(enigma.compile(axpy_2d), [a, a], output_size=16, grid=(2, 2), threads=(2, 2))


@enigma.kernel
def store_at(out: enigma.f32, i: enigma.constant(enigma.u32), j: enigma.constant(enigma.u32)):
    out[i, j] = 1.0  # the store


def test_each_subscript_is_checked_against_the_arrays_dimension(sim):
    out = np.zeros((3, 4), np.float32)
    c = enigma.compile(store_at)
    # out[1, 5] of a 3x4 array: the flat index 9 is inside the buffer, so
    # without the check this would write out[2, 1], silently.
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        c(out, 1, 5, grid=1, threads=1, rt=rt)
    oob = [r for r in e.value.reports if r["kind"] == "out_of_bounds"]
    assert len(oob) == 1 and "index 5 of dimension 1, size 4" in oob[0]["message"], e.value.reports
    assert f"test_array_shapes.py:{_line_of(store_at.fn, '# the store')}" in str(oob[0]["first"]), oob
    with pytest.raises(enigma.DispatchError, match=r"out-of-bounds subscript of buffer `out`: index 5 of dimension 1, size 4"):
        c(out, 1, 5, grid=1, threads=1, rt=sim)
    assert not out.any()
    c(out, 2, 3, grid=1, threads=1, rt=sim)
    assert out[2, 3] == 1.0 and out.sum() == 1.0


def test_an_array_of_another_rank_than_the_subscripts_is_a_compile_error(sim):
    c = enigma.compile(store_at)
    with pytest.raises(enigma.CompileError) as e:
        c(np.zeros((2, 3, 4), np.float32), 0, 0, grid=1, threads=1, rt=sim)
    text = str(e.value)
    assert f"test_array_shapes.py:{_line_of(store_at.fn, '# the store')}:" in text, text
    assert "`out` has 3 dimension(s) (shape (out.shape[0], out.shape[1], out.shape[2])) but 2 indices were given" in text, text


def test_an_argument_without_a_shape_is_refused(sim):
    with pytest.raises(enigma.DispatchError, match=r"buffer `out` takes its shape from the array passed .* a bytearray has no shape"):
        enigma.compile(store_at)(bytearray(16), 0, 0, grid=1, threads=1, rt=sim)
    with pytest.raises(enigma.DispatchError, match=r"a 0-d array"):
        enigma.compile(store_at)(np.zeros((), np.float32), 0, 0, grid=1, threads=1, rt=sim)


def k_vector_elements(out: enigma.float4):  # offending
    out[0, 1] = enigma.float4(1.0, 2.0, 3.0, 4.0)


def k_shape_out_of_range(x: enigma.f32, out: enigma.f32):
    out[0] = x[0, 0] + enigma.f32(x.shape[2 - 3 + 3])  # offending


def k_shape_of_a_flat_threadgroup_array(out: enigma.f32):
    s = enigma.threadgroup_alloc(enigma.f32, 16)
    out[0] = enigma.f32(s.shape[0])  # offending


def k_shape_by_a_variable(x: enigma.f32, out: enigma.f32):
    d = enigma.thread_position_in_grid.x
    out[0] = enigma.f32(x.shape[d])  # offending


SHAPE_ERRORS = [
    (k_vector_elements, r"buffer `out` of enigma.float4 takes its shape from the array passed, which is given for scalar element types only"),
    (k_shape_out_of_range, r"`x.shape` is indexed by a constant dimension, 0 to 1 \(or -2 to -1\), not 2"),
    (k_shape_of_a_flat_threadgroup_array, r"`s` has no shape; to read its sizes, allocate it with one"),
    (k_shape_by_a_variable, r"`x.shape` is indexed by a constant dimension, 0 to 0 \(or -1 to -1\), not a u32 value"),
]


@pytest.mark.parametrize("fn,message", SHAPE_ERRORS, ids=[f.__name__ for f, _ in SHAPE_ERRORS])
def test_wrong_uses_of_shapes_are_compile_errors_with_the_line(fn, message):
    import re

    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(fn)
    text = str(e.value)
    assert f"test_array_shapes.py:{_line_of(fn, '# offending')}:" in text, text
    assert re.search(message, text), text


def test_declared_shapes_read_the_same_way(clean):
    @enigma.kernel
    def fill(out: enigma.buffer(enigma.f32, shape=("n", 3)), n: enigma.constant(enigma.u32)):
        i = enigma.thread_position_in_grid.x
        t = enigma.threadgroup_alloc(enigma.f32, (2, 5))
        if i < out.shape[0]:
            for j in range(out.shape[1]):
                out[i, j] = enigma.f32(i * 10 + j + t.shape[1] * out.ndim)

    out = np.zeros((4, 3), np.float32)
    enigma.compile(fill)(out, 4, grid=4, threads=4, rt=clean)
    np.testing.assert_array_equal(out, np.add.outer(np.arange(4) * 10, np.arange(3)) + 10)


def test_mlx_arrays_and_the_outputs_mlx_shapes_give_shapes():
    mx = pytest.importorskip("mlx.core")
    a = np.arange(5 * 7, dtype=np.float32).reshape(5, 7)
    b = np.ones((5, 7), np.float32)
    (out,) = enigma.compile(axpy_2d)(
        inputs=[mx.array(a), mx.array(b)], grid=(7, 5, 1), threadgroup=(8, 8, 1), output_shapes=[(5, 7)],
        output_dtypes=[mx.float32], device="cpu",
    )
    np.testing.assert_array_equal(np.array(out).reshape(5, 7), a + 2.0)
