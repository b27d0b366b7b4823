"""Multi-dimensional indexing: buffers with a declared shape
(``enigma.buffer(T, shape=("n", "m"))``) and 2-D threadgroup arrays
(``enigma.threadgroup_alloc(T, (R, C))``), indexed ``out[i, j]``.

The 2-D puzzles of GPU-Puzzles (map 2D, broadcast, blocks 2D, a transpose
through a 2-D tile, axis sum, matmul with 2-D shared tiles) against numpy,
run clean under the sanitizer; an index past its dimension is a sanitizer
finding naming the dimension (or, unsanitized, a DispatchError) though the
flat index is inside the buffer; wrong subscripts are CompileErrors naming
the kernel and the line. Also: the partial-threadgroup cause of a device
race (issue 19, point 3).
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import enigma

TPB = 4
M_COLS = 4  # a module constant a shape may name


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


# ---------------------------------------------------------------------------
# Puzzles
# ---------------------------------------------------------------------------

Sq = enigma.buffer(enigma.f32, shape=("size", "size"))


@enigma.kernel
def map_2d(a: Sq, out: Sq, size: enigma.constant(enigma.u32)):
    i = enigma.thread_position_in_grid.y
    j = enigma.thread_position_in_grid.x
    if i < size and j < size:  # the 2-D guard: more threads than elements
        out[i, j] = a[i, j] + 10


def test_map_2d_with_a_guard(clean):
    size = 3
    a = np.arange(size * size, dtype=np.float32).reshape(size, size)
    out = np.zeros_like(a)
    enigma.compile(map_2d)(a, out, size, grid=(TPB, TPB), threads=(TPB, TPB), rt=clean)
    np.testing.assert_array_equal(out, a + 10)


@enigma.kernel
def broadcast(a: enigma.buffer(enigma.f32, shape=("size", 1)), b: enigma.buffer(enigma.f32, shape=(1, "size")),
              out: Sq, size: enigma.constant(enigma.u32)):
    i = enigma.thread_position_in_grid.y
    j = enigma.thread_position_in_grid.x
    if i < size and j < size:
        out[i, j] = a[i, 0] + b[0, j]


def test_broadcast(clean):
    size = 2
    a = np.arange(size, dtype=np.float32).reshape(size, 1)
    b = np.arange(size, dtype=np.float32).reshape(1, size) * 10
    out = np.zeros((size, size), np.float32)
    enigma.compile(broadcast)(a, b, out, size, grid=(3, 3), threads=(3, 3), rt=clean)
    np.testing.assert_array_equal(out, a + b)


@enigma.kernel
def blocks_2d(a: Sq, out: Sq, size: enigma.constant(enigma.u32)):
    i = enigma.threadgroup_position_in_grid.y * enigma.threads_per_threadgroup.y + enigma.thread_position_in_threadgroup.y
    j = enigma.threadgroup_position_in_grid.x * enigma.threads_per_threadgroup.x + enigma.thread_position_in_threadgroup.x
    if i < size and j < size:
        out[i, j] = a[i, j] + 10


def test_blocks_2d_dispatched_in_threadgroups(clean):
    size = 5
    a = np.random.default_rng(1).random((size, size), dtype=np.float32)
    out = np.zeros_like(a)
    enigma.compile(blocks_2d)(a, out, size, threadgroups=(2, 2), threads=(3, 3), rt=clean)
    np.testing.assert_array_equal(out, a + 10)


@enigma.kernel
def transpose(a: enigma.buffer(enigma.f32, shape=("rows", "cols")), out: enigma.buffer(enigma.f32, shape=("cols", "rows")),
              rows: enigma.constant(enigma.u32), cols: enigma.constant(enigma.u32)):
    tile = enigma.threadgroup_alloc(enigma.f32, (TPB, TPB + 1))
    gx = enigma.threadgroup_position_in_grid.x
    gy = enigma.threadgroup_position_in_grid.y
    lx = enigma.thread_position_in_threadgroup.x
    ly = enigma.thread_position_in_threadgroup.y
    r = gy * TPB + ly
    c = gx * TPB + lx
    tile[ly, lx] = a[r, c] if r < rows and c < cols else 0.0
    enigma.barrier(mem_flags="mem_threadgroup")
    orow = gx * TPB + ly
    ocol = gy * TPB + lx
    if orow < cols and ocol < rows:
        out[orow, ocol] = tile[lx, ly]


def test_transpose_through_a_2d_threadgroup_array(clean):
    rows, cols = 7, 10
    a = np.random.default_rng(2).random((rows, cols), dtype=np.float32)
    out = np.zeros((cols, rows), np.float32)
    c = enigma.compile(transpose)
    c(a, out, rows, cols, threadgroups=(-(-cols // TPB), -(-rows // TPB)), threads=(TPB, TPB), rt=clean)
    np.testing.assert_array_equal(out, a.T)
    assert c.threadgroup_memory_bytes == TPB * (TPB + 1) * 4


@enigma.kernel
def axis_sum(a: enigma.buffer(enigma.f32, shape=("batch", "size")), out: enigma.buffer(enigma.f32, shape=("batch", 1)),
             batch: enigma.constant(enigma.u32), size: enigma.constant(enigma.u32)):
    cache = enigma.threadgroup_alloc(enigma.f32, (TPB,))
    row = enigma.threadgroup_position_in_grid.y
    lid = enigma.thread_position_in_threadgroup.x
    acc = 0.0
    for k in range(lid, size, TPB):
        acc = acc + a[row, k]
    cache[lid] = acc
    enigma.barrier(mem_flags="mem_threadgroup")
    if lid == 0:
        total = 0.0
        for k in range(TPB):
            total = total + cache[k]
        out[row, 0] = total


def test_axis_sum(clean):
    batch, size = 4, 6
    a = np.arange(batch * size, dtype=np.float32).reshape(batch, size)
    out = np.zeros((batch, 1), np.float32)
    enigma.compile(axis_sum)(a, out, batch, size, threadgroups=(1, batch), threads=(TPB, 1), rt=clean)
    np.testing.assert_array_equal(out, a.sum(axis=1, keepdims=True))


@enigma.kernel
def matmul(a: Sq, b: Sq, out: Sq, size: enigma.constant(enigma.u32)):
    a_sh = enigma.threadgroup_alloc(enigma.f32, (TPB, TPB))
    b_sh = enigma.threadgroup_alloc(enigma.f32, shape=(TPB, TPB))
    i = enigma.thread_position_in_grid.y
    j = enigma.thread_position_in_grid.x
    li = enigma.thread_position_in_threadgroup.y
    lj = enigma.thread_position_in_threadgroup.x
    acc = 0.0
    for t in range(0, size, TPB):
        a_sh[li, lj] = a[i, t + lj] if i < size and t + lj < size else 0.0
        b_sh[li, lj] = enigma.load_if(b, (t + li, j), t + li < size and j < size, 0.0)
        enigma.barrier(mem_flags="mem_threadgroup")
        for k in range(TPB):
            acc = acc + a_sh[li, k] * b_sh[k, lj]
        enigma.barrier(mem_flags="mem_threadgroup")
    if i < size and j < size:
        out[i, j] = acc


def test_matmul_with_2d_shared_tiles(clean):
    size = 6
    rng = np.random.default_rng(3)
    a = rng.integers(-4, 5, (size, size)).astype(np.float32)
    b = rng.integers(-4, 5, (size, size)).astype(np.float32)
    out = np.zeros((size, size), np.float32)
    # Whole threadgroups (every tile slot has its thread); the guards cut the edges.
    blocks = -(-size // TPB)
    enigma.compile(matmul)(a, b, out, size, threadgroups=(blocks, blocks), threads=(TPB, TPB), rt=clean)
    np.testing.assert_array_equal(out, a @ b)  # small integers: exact in f32


T = 3


@enigma.kernel
def shapes_from_constants(a: enigma.buffer(enigma.u32, shape=(None, "M_COLS")), out: enigma.buffer(enigma.u32, shape=("R", "M_COLS", 2))):
    R = enigma.spec("R", enigma.u32, 2)  # noqa: N806 - a specialisation constant, named in out's shape
    i = enigma.thread_position_in_grid.y
    j = enigma.thread_position_in_grid.x
    out[i, j, 0] = a[i, j]
    out[i, j, 1] = a[i, j] * R


def test_shapes_name_module_constants_specialisation_constants_and_leave_the_first_open(clean):
    a = np.arange(3 * M_COLS, dtype=np.uint32).reshape(3, M_COLS)
    out = np.zeros((3, M_COLS, 2), np.uint32)
    enigma.compile(shapes_from_constants, R=3)(a, out, grid=(M_COLS, 3), threads=(M_COLS, 3), rt=clean)
    np.testing.assert_array_equal(out, np.stack([a, a * 3], axis=-1))


@enigma.kernel
def flat_and_shaped(a: Sq, out: Sq, size: enigma.constant(enigma.u32)):
    i = enigma.thread_position_in_grid.x
    out[i] = a[i // size, i % size] * 2  # the flat form still works on a shaped buffer


def test_the_flat_form_keeps_working(clean):
    a = np.arange(9, dtype=np.float32).reshape(3, 3)
    out = np.zeros_like(a)
    enigma.compile(flat_and_shaped)(a, out, 3, grid=9, threads=9, rt=clean)
    np.testing.assert_array_equal(out, a * 2)


@enigma.kernel
def histogram_2d(counts: enigma.buffer(enigma.u32, shape=(2, 3)), out: enigma.buffer(enigma.u32, shape=(2, "n")),
                 n: enigma.constant(enigma.u32)):
    i = enigma.thread_position_in_grid.y
    j = enigma.thread_position_in_grid.x
    enigma.atomic_add(counts, (i % 2, j % 3), 1)  # a subscript tuple as an atomic's index
    out[i, j] += i * 10 + j  # augmented assignment: one load, one store of out[i, j]


def test_atomics_and_augmented_assignment_take_subscripts(clean):
    counts = np.zeros((2, 3), np.uint32)
    out = np.ones((2, 6), np.uint32)
    enigma.compile(histogram_2d)(counts, out, 6, grid=(6, 2), threads=(6, 2), rt=clean)
    np.testing.assert_array_equal(counts, np.full((2, 3), 2, np.uint32))
    np.testing.assert_array_equal(out, 1 + np.add.outer(np.arange(2) * 10, np.arange(6)).astype(np.uint32))


def test_generated_code_reads_like_the_flat_index():
    c = enigma.compile(map_2d)
    for code in (c.msl, c.cuda):
        assert "out[i * size + j] = a[i * size + j] + 10.0f;" in code, code
    assert "dim_check(a, 1, j, size)" in c.ir
    assert enigma.compile_ir(c.ir).cuda == c.cuda  # the IR's text form keeps the checks


# ---------------------------------------------------------------------------
# Out-of-bounds subscripts
# ---------------------------------------------------------------------------

@enigma.kernel
def store_at(out: enigma.buffer(enigma.f32, shape=("n", "m")), n: enigma.constant(enigma.u32),
             m: enigma.constant(enigma.u32), i: enigma.constant(enigma.u32), j: enigma.constant(enigma.u32)):
    out[i, j] = 1.0  # the store


def test_an_index_past_its_dimension_names_the_dimension(sim):
    out = np.zeros((3, 4), np.float32)
    c = enigma.compile(store_at)
    # out[1, 5] of a 3×4 out: the flat index 9 is inside the buffer, so
    # without the check this would write out[2, 1], silently.
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        c(out, 3, 4, 1, 5, grid=1, threads=1, rt=rt)
    oob = [r for r in e.value.reports if r["kind"] == "out_of_bounds"]
    assert len(oob) == 1, e.value.reports
    assert oob[0]["variable"] == "out" and "index 5 of dimension 1, size 4" in oob[0]["message"], oob
    assert f"test_shapes.py:{_line_of(store_at.fn, '# the store')}" in str(oob[0]["first"]), oob
    assert not out.any()
    # Unsanitized, the simulator refuses it too.
    with pytest.raises(enigma.DispatchError, match=r"out-of-bounds subscript of buffer `out`: index 5 of dimension 1, size 4"):
        c(out, 3, 4, 1, 5, grid=1, threads=1, rt=sim)
    c(out, 3, 4, 2, 3, grid=1, threads=1, rt=sim)
    assert out[2, 3] == 1.0 and out.sum() == 1.0


# ---------------------------------------------------------------------------
# Compile errors: typed, with the kernel and the line
# ---------------------------------------------------------------------------

def k_three_subscripts(out: Sq, size: enigma.constant(enigma.u32)):
    out[0, 1, 2] = 1.0  # offending


def k_tuple_on_a_flat_threadgroup_array(out: enigma.f32):
    s = enigma.threadgroup_alloc(enigma.f32, 16)
    s[0, 1] = 1.0  # offending


def k_tg_three_subscripts(out: enigma.f32):
    s = enigma.threadgroup_alloc(enigma.f32, (4, 4))
    s[0, 1, 2] = 1.0  # offending


def k_constant_out_of_range(out: enigma.buffer(enigma.f32, shape=(3, 4))):
    out[1, 4] = 1.0  # offending


def k_unknown_size(out: enigma.buffer(enigma.f32, shape=("rows", 4))):  # offending
    out[0, 0] = 1.0


def k_float_size(out: enigma.buffer(enigma.f32, shape=("x", 4)), x: enigma.constant(enigma.f32)):  # offending
    out[0, 0] = 1.0


def k_bad_shape(out: enigma.buffer(enigma.f32, shape=(4, None))):  # offending
    out[0, 0] = 1.0


def k_float_subscript(out: Sq, size: enigma.constant(enigma.u32)):
    out[0, 1.5] = 1.0  # offending


def k_tg_shape_not_constant(out: enigma.f32, n: enigma.constant(enigma.u32)):
    s = enigma.threadgroup_alloc(enigma.f32, (n, 4))  # offending
    out[0] = s[0, 0]


def k_slice_in_a_subscript(out: Sq, size: enigma.constant(enigma.u32)):
    out[0, 1:2] = 1.0  # offending


SUBSCRIPT_ERRORS = [
    (k_three_subscripts, r"`out` has 2 dimension\(s\) \(shape \(size, size\)\) but 3 indices were given; index it with 2 \(out\[i, j\]\) or with one flat index"),
    (k_tuple_on_a_flat_threadgroup_array, r"`s` has no shape, so it takes one integer index, not 2; to index it per dimension, allocate it with one: `enigma.threadgroup_alloc\(enigma.f32, \(R, C\)\)`"),
    (k_tg_three_subscripts, r"`s` has 2 dimension\(s\) \(shape \(4, 4\)\) but 3 indices were given"),
    (k_constant_out_of_range, r"index 4 of dimension 1 of `out` is out of bounds \(size 4\)"),
    (k_unknown_size, r"`rows` in the shape of `out` is not defined"),
    (k_float_size, r"`x` in the shape of `out` is f32; the size of a dimension is an integer"),
    (k_bad_shape, r"buffer `out`: shape entry 1 is None"),
    (k_float_subscript, r"index 1 of `out` must be a non-negative integer, not 1.5"),
    (k_tg_shape_not_constant, r"dimension 0 of a threadgroup array's shape must be a positive integer known at compile time"),
    (k_slice_in_a_subscript, r"`out` is indexed one element at a time \(no slices\)"),
]


@pytest.mark.parametrize("fn,message", SUBSCRIPT_ERRORS, ids=[f.__name__ for f, _ in SUBSCRIPT_ERRORS])
def test_wrong_subscripts_are_compile_errors_with_the_kernel_and_line(fn, message):
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(fn)
    text = str(e.value)
    assert f"test_shapes.py:{_line_of(fn, '# offending')}:" in text, text
    assert f"(in kernel `{fn.__name__}`)" in text, text
    assert e.value.line == _line_of(fn, "# offending")
    assert re.search(message, text), text


# ---------------------------------------------------------------------------
# Issue 19, point 3: the cause of a race in a partial last threadgroup
# ---------------------------------------------------------------------------

@enigma.kernel
def uniform_index(out: enigma.u32):
    i = enigma.threadgroup_position_in_grid.x * enigma.threads_per_threadgroup.x + enigma.thread_position_in_threadgroup.x
    out[i] = i


def test_a_partial_last_threadgroup_is_named_as_the_cause():
    out = np.zeros(9, np.uint32)
    with pytest.raises(enigma.SanitizerError) as e:
        enigma.compile(uniform_index)(out, grid=(9,), threads=(4,), device="cpu", sanitize=True)
    cause = ("the last threadgroup is partial: its threads_per_threadgroup is 1 (9 = 2·4 + 1); "
             "index with thread_position_in_grid instead")
    kinds = {r["kind"]: r for r in e.value.reports}
    assert set(kinds) == {"device_race", "coverage"}, e.value.reports
    for report in kinds.values():
        assert report["hint"].startswith(cause), report
