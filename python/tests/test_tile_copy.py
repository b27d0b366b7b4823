"""Tile copies in the Python kernel language: ``enigma.tile_copy`` and
``enigma.tile_wait``. Two boxes of a matrix per threadgroup, on two barriers,
against numpy (zeros past the matrix's last rows and columns) on the device
under test; clean under the simulator's sanitizer; reading a box before its
wait is an ``async_copy_in_flight`` finding; extents that are not fixed for
the dispatch, and a box that starts outside its matrix, are refused with the
IR rule's message."""

from __future__ import annotations

import numpy as np
import pytest

import enigma

T = 64
ROWS, COLS, PITCH = 20, 29, 32
GROUPS = 3


@enigma.kernel
def two_boxes(src: enigma.u32, rows: enigma.constant(enigma.u32), cols: enigma.constant(enigma.u32), pitch: enigma.constant(enigma.u32), out: enigma.u32):
    """Threadgroup g copies the 8 × 16 boxes at (8g, 0) and (8g, 16) on
    barriers 0 and 1; thread lid writes elements lid and lid + 64 of each."""
    stage = enigma.threadgroup_alloc(enigma.u32, 256)
    lid = enigma.thread_index_in_threadgroup()
    g = enigma.threadgroup_position_in_grid("x")
    enigma.tile_copy(0, stage[0], src, (rows, cols), pitch, (g * 8, 0), (8, 16))
    enigma.tile_copy(1, stage[128], src, (rows, cols), pitch, (g * 8, 16), (8, 16))
    enigma.tile_wait(0)
    enigma.tile_wait(1)
    at = (g * T + lid) * 4
    out[at] = stage[lid]
    out[at + 1] = stage[lid + 64]
    out[at + 2] = stage[128 + lid]
    out[at + 3] = stage[128 + lid + 64]


def _reference(m):
    want = np.zeros((GROUPS, T, 4), np.uint32)
    for g in range(GROUPS):
        for lid in range(T):
            for j, (col0, e) in enumerate([(0, lid), (0, lid + 64), (16, lid), (16, lid + 64)]):
                r, c = 8 * g + e // 16, col0 + e % 16
                want[g, lid, j] = m[r, c] if r < ROWS and c < COLS else 0
    return want.reshape(-1)


def _run(runtime, kernel=two_boxes):
    m = np.random.default_rng(7).integers(0, 1 << 32, (ROWS, PITCH), dtype=np.uint32)
    out = runtime.execute(
        enigma.compile(kernel), inputs=[m, ROWS, COLS, PITCH], output_size=GROUPS * T * 16,
        threadgroups=(GROUPS, 1, 1), threads=(T, 1, 1),
    )
    return np.frombuffer(out, np.uint32), _reference(m)


def test_boxes_match_numpy_with_zeros_past_the_matrix(rt):
    got, want = _run(rt)
    np.testing.assert_array_equal(got, want)


def test_the_ir_has_the_copies_and_waits():
    ir = enigma.compile(two_boxes).ir
    assert ir.count("tile_copy(") == 2 and ir.count("tile_wait(") == 2


def test_boxes_are_clean_under_the_sanitizer():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    got, want = _run(rt)
    np.testing.assert_array_equal(got, want)


@enigma.kernel
def read_before_wait(src: enigma.u32, rows: enigma.constant(enigma.u32), cols: enigma.constant(enigma.u32), pitch: enigma.constant(enigma.u32), out: enigma.u32):
    """Reads the box before waiting for it."""
    stage = enigma.threadgroup_alloc(enigma.u32, 256)
    lid = enigma.thread_index_in_threadgroup()
    g = enigma.threadgroup_position_in_grid("x")
    enigma.tile_copy(0, stage[0], src, (rows, cols), pitch, (g * 8, 0), (8, 16))
    early = stage[lid]
    enigma.tile_wait(0)
    at = (g * T + lid) * 4
    out[at] = early
    out[at + 1] = stage[lid + 64]
    out[at + 2] = 0
    out[at + 3] = 0


def test_reading_a_box_before_its_wait_is_a_copy_in_flight():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        _run(rt, read_before_wait)
    kinds = {str(r["kind"]) for r in e.value.reports}
    assert "async_copy_in_flight" in kinds, kinds


@enigma.kernel
def extents_from_memory(src: enigma.u32, out: enigma.u32):
    stage = enigma.threadgroup_alloc(enigma.u32, 128)
    enigma.tile_copy(0, stage[0], src, (src[0], 16), 16, (0, 0), (8, 16))
    enigma.tile_wait(0)
    out[enigma.thread_index_in_threadgroup()] = stage[enigma.thread_index_in_threadgroup()]


def test_extents_must_be_fixed_for_the_dispatch():
    with pytest.raises(enigma.CompileError, match="fixed for the whole dispatch"):
        enigma.compile(extents_from_memory)


def test_a_box_starting_outside_the_matrix_fails(sim):
    m = np.zeros((ROWS, PITCH), np.uint32)
    with pytest.raises(enigma.EnigmaError, match="outside the 20 × 29 matrix"):
        sim.execute(
            enigma.compile(two_boxes), inputs=[m, ROWS, COLS, PITCH], output_size=4 * T * 16,
            threadgroups=(4, 1, 1), threads=(T, 1, 1),
        )
