"""Errors: unsupported Python and type errors (CompileError with file, line
and construct), IR validation through Python, dispatch errors with the
numbers, run-time errors of the simulator, and sanitizer reports."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import enigma

HERE = __file__


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def _compile_error(fn):
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(fn)
    return str(e.value)


# Each case: a kernel, the text of the offending line, and what the message says.
def k_list(A: enigma.f32):
    x = [1, 2]  # offending


def k_try(A: enigma.f32):
    try:  # offending
        A[0] = 1.0
    except Exception:
        pass


def k_lambda(A: enigma.f32):
    f = lambda v: v  # noqa: E731  # offending


def k_call_python(A: enigma.f32):
    A[0] = print(1)  # offending


def k_return_value(A: enigma.f32):
    return 1  # offending


def k_type_change(A: enigma.f32):
    x = enigma.u32(1)
    x = A[0]  # offending


def k_undefined(A: enigma.f32):
    A[0] = not_a_name  # noqa: F821  # offending


def k_maybe_unassigned(A: enigma.f32):
    with enigma.if_(enigma.thread_index_in_simdgroup() == 0):
        y = 1.0
    A[0] = y  # offending


def k_no_annotation(A):  # offending
    A[0] = 1.0


def k_bad_annotation(A: int):  # offending
    A[0] = 1.0


def k_store_wrong_type(A: enigma.u32, B: enigma.f32):
    A[0] = B[0]  # offending


def k_float_condition(A: enigma.f32):
    with enigma.if_(A[0]):  # offending
        A[1] = 0.0


def k_slice(A: enigma.f32):
    A[0] = A[1:2]  # offending


def k_tuple_unpack(A: enigma.f32):
    a, b = 1, 2  # offending


def k_for_over_list(A: enigma.f32):
    for v in [1, 2]:  # offending
        A[0] = 1.0


def k_bad_mem_flags(A: enigma.f32):
    enigma.barrier(mem_flags="mem_everything")  # offending


def k_bad_axis(A: enigma.f32):
    A[0] = enigma.f32(enigma.thread_position_in_grid("w"))  # offending


def k_simd_and_float(A: enigma.f32):
    A[0] = enigma.simd_and(A[0])  # offending


def k_else_alone(A: enigma.f32):
    A[0] = 1.0
    with enigma.else_():  # offending
        A[1] = 2.0


def k_expression_statement(A: enigma.f32):
    A[0] + 1.0  # offending


def k_assign_param(A: enigma.f32):
    A = 1.0  # offending


def k_tg_alloc_runtime_size(A: enigma.f32):
    n = enigma.thread_index_in_simdgroup()
    s = enigma.threadgroup_alloc("float", n)  # offending


def k_negative_unsigned(A: enigma.u32):
    A[0] = -A[1]  # offending


def k_chained_compare(A: enigma.f32):
    with enigma.if_(0.0 < A[0] < 1.0):  # offending
        A[0] = 0.0


CASES = [
    (k_list, "a list is not supported"),
    (k_try, "`try` is not supported"),
    (k_lambda, "a lambda is not supported"),
    (k_call_python, "calling the Python function `print` is not supported"),
    (k_return_value, "`return` takes no value"),
    (k_type_change, "`x` is u32"),
    (k_undefined, "name `not_a_name` is not defined"),
    (k_maybe_unassigned, "`y` may be read before it is assigned"),
    (k_no_annotation, "parameter `A` needs an annotation"),
    (k_bad_annotation, "parameter `A: int`: Python's int is not a kernel type; write `A: enigma.constant(enigma.i32)`"),
    (k_store_wrong_type, "`A` holds u32 but the value stored is f32"),
    (k_float_condition, "a condition must be a bool, not f32"),
    (k_slice, "no slices"),
    (k_tuple_unpack, "tuple unpacking is not supported"),
    (k_for_over_list, "only `for i in range(start, end[, step])`"),
    (k_bad_mem_flags, "unknown mem_flags 'mem_everything'"),
    (k_bad_axis, "the axis of enigma.thread_position_in_grid must be"),
    (k_simd_and_float, "argument 0 of `simd_and` must be an integer scalar or vector of 8 to 32 bits (MSL's SIMD-group functions exclude long and ulong), found f32"),
    (k_else_alone, "must come right after a `with enigma.if_"),
    (k_expression_statement, "has no effect"),
    (k_assign_param, "`A` is a buffer parameter; store to an element"),
    (k_tg_alloc_runtime_size, "known at compile time"),
    (k_negative_unsigned, "`-` is not defined for u32"),
    (k_chained_compare, "chained comparisons"),
]


@pytest.mark.parametrize("fn,message", CASES, ids=[c[0].__name__ for c in CASES])
def test_unsupported_python_names_file_line_and_construct(fn, message):
    msg = _compile_error(fn)
    line = _line_of(fn, "# offending")
    assert f"{HERE}:{line}:" in msg, msg
    assert message in msg, msg
    assert f"in kernel `{fn.__name__}`" in msg


def test_compile_error_attributes():
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(k_list)
    assert e.value.file == HERE and e.value.line == _line_of(k_list, "# offending")


def test_source_unavailable():
    ns = {"enigma": enigma}
    exec("def dyn(A: enigma.f32):\n    A[0] = 1.0\n", ns)  # noqa: S102 - a function with no source file
    msg = _compile_error(ns["dyn"])
    assert "cannot read the source of `dyn`" in msg


def test_validation_error_names_the_python_line():
    # A barrier in a branch that depends on the thread: caught by the Rust validator.
    def divergent_barrier(A: enigma.f32):
        with enigma.if_(enigma.thread_index_in_simdgroup() < 4):
            enigma.barrier(mem_flags="mem_threadgroup")  # the barrier
        A[0] = 1.0

    msg = _compile_error(divergent_barrier)
    assert f"{HERE}:{_line_of(divergent_barrier, '# the barrier')}" in msg, msg
    assert "barrier" in msg and "divergent_barrier" in msg


def test_threadgroup_memory_over_the_limit():
    def too_much(A: enigma.f32):
        s = enigma.threadgroup_alloc("float", 16384)
        s[0] = 1.0
        A[0] = s[0]

    msg = _compile_error(too_much)
    assert "65536" in msg and "32768" in msg, msg


def test_threadgroup_too_large(rt):
    @enigma.kernel
    def k(A: enigma.f32):
        A[enigma.thread_position_in_grid] = 1.0

    with pytest.raises(enigma.DispatchError) as e:
        rt.execute(enigma.compile(k), inputs=[], output_size=4 * 2048, grid=(2048, 1, 1), threads=(32, 64, 1))
    assert "2048 threads (32×64×1)" in str(e.value) and "1024" in str(e.value)


def test_zero_grid(rt):
    @enigma.kernel
    def k(A: enigma.f32):
        A[enigma.thread_position_in_grid] = 1.0

    with pytest.raises(enigma.DispatchError, match="kernel `k`"):
        rt.execute(enigma.compile(k), inputs=[], output_size=4, grid=(0, 1, 1), threads=(1, 1, 1))


def test_out_of_bounds_is_an_error_with_the_python_line(sim):
    @enigma.kernel
    def oob(A: enigma.f32, Out: enigma.f32):
        tid = enigma.thread_position_in_grid
        Out[tid] = A[tid + 1]  # reads past the end

    with pytest.raises(enigma.DispatchError) as e:
        sim.execute(enigma.compile(oob), inputs=[np.zeros(8, np.float32)], output_size=32, grid=8, threads=8)
    msg = str(e.value)
    assert "out-of-bounds read of buffer `A`[8]" in msg, msg
    assert f"{HERE}:{_line_of(oob.fn, '# reads past the end')}" in msg


def test_division_by_zero_in_the_simulator(sim):
    @enigma.kernel
    def div(A: enigma.i32, Out: enigma.i32):
        tid = enigma.thread_position_in_grid
        Out[tid] = 10 / A[tid]

    with pytest.raises(enigma.DispatchError, match="division by zero|divide"):
        sim.execute(enigma.compile(div), inputs=[np.array([1, 0], np.int32)], output_size=8, grid=2, threads=2)


def test_sanitizer_reports_a_race():
    @enigma.kernel
    def racy(A: enigma.f32, Out: enigma.f32):
        s = enigma.threadgroup_alloc("float", 64)
        lid = enigma.thread_index_in_threadgroup()
        s[lid] = A[lid]
        # missing barrier
        Out[lid] = s[63 - lid]

    c = enigma.compile(racy)
    a = np.arange(64, dtype=np.float32)
    # Without the sanitizer the race goes unnoticed.
    enigma.MetalRuntime(device="cpu").execute(c, inputs=[a], output_size=256, grid=64, threads=64)
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        rt.execute(c, inputs=[a], output_size=256, grid=64, threads=64)
    err = e.value
    assert isinstance(err, enigma.EnigmaError)
    assert isinstance(err.reports, list) and err.reports
    r = err.reports[0]
    assert {"kind", "severity", "kernel", "variable", "message", "hint"} <= set(r)
    assert r["kernel"] == "racy" and r["variable"] == "s"
    assert "race" in str(r["kind"]) and "racy" in str(err)
    # Per call: sanitize=False turns it off for one dispatch.
    rt.execute(c, inputs=[a], output_size=256, grid=64, threads=64, sanitize=False)


def test_sanitizer_passes_a_correct_kernel():
    @enigma.kernel
    def fixed(A: enigma.f32, Out: enigma.f32):
        s = enigma.threadgroup_alloc("float", 64)
        lid = enigma.thread_index_in_threadgroup()
        s[lid] = A[lid]
        enigma.barrier(mem_flags="mem_threadgroup")
        Out[lid] = s[63 - lid]

    a = np.arange(64, dtype=np.float32)
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    out = rt.execute(enigma.compile(fixed), inputs=[a], output_size=256, grid=64, threads=64)
    np.testing.assert_array_equal(np.frombuffer(out, np.float32), a[::-1])
    assert rt.last_report is not None


# Odd Python in a kernel body: each must give a CompileError naming the file
# and the body's line, never another exception.
ODD_BODIES = [
    "x = enigma", "A[0] = enigma.f32", "with open('x') as f:\n        pass", "A[0][1] = 1.0", "del A",
    "global q", "A[0] = f'{1}'", "A[0] = (y := 1)", "yield 1", "print('x')", "A[0] = 'str'", "A[0] = None",
    "A[0] = enigma.simd_sum()", "A[0] = enigma.simd_sum(1, 2)", "A[0] = enigma.exp(A)", "A.x = 1",
    "A[0] = enigma.float4(1, 2)", "A[0] = enigma.thread_position_in_grid.w", "s = enigma.threadgroup_alloc('nope', 4)",
    "A[-1] = 1.0", "A[1.5] = 1.0", "A[0] = 10 ** 400", "A[0] = 1 / 0", "A[0] = enigma.as_type(enigma.u64, A[0])",
    "enigma.atomic_add(A, 0)", "enigma.barrier(mem_flags=3)", "for i in range(0, 10, 0):\n        pass",
    "x = enigma.spec('T', enigma.f32, 'a')", "with enigma.for_range(0, 4):\n        pass", "class C:\n        pass",
    "import os", "A[0] = A[0] @ A[0]", "A[0] = A[0] is A[0]", "A[0] = enigma.fast.nope(A[0])",
    "A[0] = enigma.simd_ballot(A[0])", "A[0] = range(3)", "A[0] = enigma.f32(*A)", "A[0] = enigma.compile",
]


@pytest.mark.parametrize("body", ODD_BODIES)
def test_odd_python_is_a_compile_error(tmp_path, body):
    path = tmp_path / "odd.py"
    src = f"import enigma\n\n\ndef k(A: enigma.f32):\n    {body}\n"
    path.write_text(src)
    ns = {"__name__": "odd", "__file__": str(path)}
    exec(compile(src, str(path), "exec"), ns)  # noqa: S102 - a kernel in a file of its own
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(ns["k"])
    assert f"{path}:5:" in str(e.value), str(e.value)
