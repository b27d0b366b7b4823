"""Issue 19, point 4: the small things a CUDA or numba user trips on in the
first hour — numpy's type names, `size: int`, a grid written as a string, a
forgotten input — each an error that says what to write, and `//` and `%`
doing what the docs say (C's integer division and remainder, fmod for
floats)."""

from __future__ import annotations

import numpy as np
import pytest

import enigma


def test_numpy_type_names_suggest_enigmas():
    with pytest.raises(AttributeError, match=r"no attribute 'float32'; the type is enigma\.f32$"):
        enigma.float32  # noqa: B018
    with pytest.raises(AttributeError, match=r"'uint32'; the type is enigma\.u32$"):
        enigma.uint32  # noqa: B018
    # A misspelling gets the close names; `hasattr` still works.
    with pytest.raises(AttributeError, match=r"did you mean enigma\.simd_sum"):
        enigma.simd_summ  # noqa: B018
    assert not hasattr(enigma, "float32")
    assert enigma.f32 is not None


def test_an_int_annotation_says_what_to_write():
    @enigma.kernel
    def fill(Out: enigma.i32, size: int):
        tid = enigma.thread_position_in_grid
        Out[tid] = size

    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(fill)
    msg = str(e.value)
    assert "parameter `size: int`" in msg and "write `size: enigma.constant(enigma.i32)`" in msg, msg
    # It points at the parameter's line.
    assert e.value.line == fill.fn.__code__.co_firstlineno + 1, msg
    assert msg.startswith(f"{__file__}:{e.value.line}:"), msg


def test_the_by_value_spelling_it_suggests_works():
    @enigma.kernel
    def fill(size: enigma.constant(enigma.i32), Out: enigma.i32):
        tid = enigma.thread_position_in_grid
        Out[tid] = size

    out = enigma.MetalRuntime(device="cpu").execute(enigma.compile(fill), inputs=[7], output_size=4 * 4, grid=(4,), threads=(4,))
    assert np.frombuffer(out, np.int32).tolist() == [7, 7, 7, 7]


@enigma.kernel
def add(A: enigma.f32, B: enigma.f32, Out: enigma.f32):
    tid = enigma.thread_position_in_grid
    Out[tid] = A[tid] + B[tid]


def test_a_grid_given_as_a_string_is_named_as_such():
    rt = enigma.MetalRuntime(device="cpu")
    a = np.ones(64, np.float32)
    with pytest.raises(enigma.DispatchError, match=r"grid must be an int or a tuple of 1 to 3 ints, not the string '64x1x1' \(write grid=\(64, 1, 1\)\)"):
        rt.execute(enigma.compile(add), inputs=[a, a], output_size=64 * 4, grid="64x1x1", threads=(32, 1, 1))
    with pytest.raises(enigma.DispatchError, match=r"threads must be an int or a tuple of 1 to 3 ints, not the string '32' \(write threads=\(32,\)\)"):
        rt.execute(enigma.compile(add), inputs=[a, a], output_size=64 * 4, grid=64, threads="32")


def test_a_forgotten_input_is_named_not_the_output_sizes():
    rt = enigma.MetalRuntime(device="cpu")
    a = np.ones(64, np.float32)
    with pytest.raises(enigma.DispatchError) as e:
        rt.execute(enigma.compile(add), inputs=[a], output_size=64 * 4, grid=(64,), threads=(32,))
    msg = str(e.value)
    assert "buffer `B` is only read by the kernel, so it is an input" in msg, msg
    assert "covers 1 of the 3 parameters" in msg and "add `B`" in msg, msg
    assert "output_size" not in msg, msg
    # With both inputs the same call runs.
    out = rt.execute(enigma.compile(add), inputs=[a, a], output_size=64 * 4, grid=(64,), threads=(32,))
    assert np.frombuffer(out, np.float32).tolist() == [2.0] * 64


@enigma.kernel
def int_ops(A: enigma.i32, B: enigma.i32, Quot: enigma.i32, Rem: enigma.i32):
    tid = enigma.thread_position_in_grid
    Quot[tid] = A[tid] // B[tid]
    Rem[tid] = A[tid] % B[tid]


@enigma.kernel
def float_ops(A: enigma.f32, B: enigma.f32, Quot: enigma.f32, Rem: enigma.f32):
    tid = enigma.thread_position_in_grid
    Quot[tid] = A[tid] // B[tid]
    Rem[tid] = A[tid] % B[tid]


def test_integer_floor_division_truncates_like_c_and_float_rem_is_fmod():
    rt = enigma.MetalRuntime(device="cpu")
    a = np.array([-7, 7, -7, 7], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    outs = rt.execute(enigma.compile(int_ops), inputs=[a, b], output_size=[16, 16], grid=(4,), threads=(4,))
    quot, rem = (np.frombuffer(o, np.int32).tolist() for o in outs)
    assert quot == [-3, 3, 3, -3]  # C truncates toward zero; Python's // would give [-4, 3, 3, -4]
    assert rem == [-1, 1, -1, 1]  # the dividend's sign; Python's % would give [1, 1, -1, -1]

    x = np.array([-7.5, 7.5, -7.5, 7.5], np.float32)
    y = np.array([2.0, 2.0, -2.0, -2.0], np.float32)
    outs = rt.execute(enigma.compile(float_ops), inputs=[x, y], output_size=[16, 16], grid=(4,), threads=(4,))
    fquot, frem = (np.frombuffer(o, np.float32).tolist() for o in outs)
    assert fquot == [-4.0, 3.0, 3.0, -4.0]  # floor of the quotient, as in Python
    assert frem == [-1.5, 1.5, -1.5, 1.5]  # C's fmod; Python's % would give [0.5, 1.5, -0.5, -1.5]


def test_the_unsigned_clamp_at_zero_is_refused_with_the_fix():
    """GPU-Puzzles' pooling: ``max(i - 2, 0)`` with a u32 thread position
    wraps instead of clamping; the front end refuses it and says what to write."""

    @enigma.kernel
    def pool(A: enigma.f32, Out: enigma.f32):
        i = enigma.thread_position_in_grid("x")
        acc = 0.0
        for k in range(max(i - 2, 0), i + 1):
            acc = acc + A[k]
        Out[i] = acc

    with pytest.raises(enigma.CompileError, match=r"never clamps.*max\(enigma.i32\(i\) - 2, 0\)"):
        enigma.compile(pool)

    @enigma.kernel
    def pool_signed(A: enigma.f32, Out: enigma.f32):
        i = enigma.thread_position_in_grid("x")
        acc = 0.0
        for k in range(max(enigma.i32(i) - 2, 0), enigma.i32(i) + 1):
            acc = acc + A[k]
        Out[i] = acc

    a = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    enigma.MetalRuntime(device="cpu").execute(enigma.compile(pool_signed), inputs=[a], outputs=[out], grid=8, threads=8)
    want = [a[max(i - 2, 0): i + 1].sum() for i in range(8)]
    np.testing.assert_array_equal(out, want)


def test_sanitizer_advice_is_spelled_in_python():
    @enigma.kernel
    def shift_left(A: enigma.f32, Out: enigma.f32):
        tid = enigma.thread_position_in_grid("x")
        lid = enigma.thread_position_in_threadgroup("x")
        buf = enigma.threadgroup_alloc(enigma.f32, 64)
        buf[lid] = A[tid]
        Out[tid] = buf[(lid + 1) % 64]

    rt = enigma.MetalRuntime(device="cpu")
    with pytest.raises(enigma.SanitizerError) as e:
        rt.execute(enigma.compile(shift_left), inputs=[np.ones(64, np.float32)], output_size=256, grid=64, threads=64, sanitize=True)
    message = str(e.value)
    assert 'enigma.barrier(mem_flags="mem_threadgroup")' in message, message
    assert "mem_flags::" not in message, message
