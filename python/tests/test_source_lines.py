"""Messages point at the kernel's Python source: a sanitizer finding's
message and hint name the lines of both accesses (with the IR position only
to tell two accesses on one line apart), and a validation error names the
line, never an IR position.
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


@enigma.kernel
def shifts_without_a_barrier(out: enigma.f32):
    t = enigma.threadgroup_alloc(enigma.f32, 64)
    i = enigma.thread_position_in_threadgroup.x
    t[i] = 1.0  # the write
    if i > 0:
        out[i] = t[i - 1]  # the read


def test_a_race_names_the_lines_of_both_accesses():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        enigma.compile(shifts_without_a_barrier)(np.zeros(64, np.float32), grid=64, threads=64, rt=rt)
    write = f"test_source_lines.py:{_line_of(shifts_without_a_barrier.fn, '# the write')}"
    read = f"test_source_lines.py:{_line_of(shifts_without_a_barrier.fn, '# the read')}"
    race = next(r for r in e.value.reports if r["kind"] == "threadgroup_race")
    for text in (race["message"], race["hint"]):
        assert write in text and read in text and "body[" not in text, text
    assert race["hint"].startswith(f"add threadgroup_barrier(mem_flags::mem_threadgroup) between the access at {write} and the access at {read}"), race["hint"]
    assert f'add enigma.barrier(mem_flags="mem_threadgroup") between the access at {write}' in str(e.value)  # Python's spelling
    assert race["first"]["location"].startswith("body[")  # the IR position stays in the report's fields


@enigma.kernel
def swaps_on_one_line(out: enigma.f32):
    t = enigma.threadgroup_alloc(enigma.f32, 64)
    i = enigma.thread_position_in_threadgroup.x
    t[i] = 1.0
    enigma.barrier(mem_flags="mem_threadgroup")
    v = t[i]; t[63 - i] = v + 1.0  # noqa: E702 - both accesses
    out[i] = v


def test_two_accesses_on_one_line_are_told_apart():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    with pytest.raises(enigma.SanitizerError) as e:
        enigma.compile(swaps_on_one_line)(np.zeros(64, np.float32), grid=64, threads=64, rt=rt)
    line = f"test_source_lines.py:{_line_of(swaps_on_one_line.fn, '- both accesses')}"
    race = next(r for r in e.value.reports if r["kind"] in ("threadgroup_race", "simdgroup_race"))
    assert f"{line} (body[" in race["hint"], race["hint"]


@enigma.kernel
def divergent_barrier(out: enigma.f32):
    i = enigma.thread_position_in_grid.x
    if i < 4:
        enigma.barrier()  # offending
    out[i] = 1.0


def test_a_validation_error_names_the_line_and_no_ir_position():
    with pytest.raises(enigma.CompileError) as e:
        enigma.compile(divergent_barrier)
    text = str(e.value)
    assert f"test_source_lines.py:{_line_of(divergent_barrier.fn, '# offending')}: kernel `divergent_barrier`:" in text, text
    assert "body[" not in text and "IR location" not in text, text
