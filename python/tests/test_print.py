"""``enigma.print`` in a kernel: on the simulator each thread's line,
tagged with its grid position, on standard output after the dispatch, SIMD
group by SIMD group in dispatch order, values as C's ``printf`` shows them;
the first 4096 lines of a dispatch and a note of the rest (also in the
report's notes); a sanitized dispatch prints once. The CUDA source calls
``printf``; MSL needs 3.2 (shader logging) and names the version otherwise.
A format that does not match its values, a vector value, a format that is
not a literal, and Python's own ``print`` are CompileErrors that say what
to write. On a CUDA GPU (skipped without one) each thread's line comes from
``printf``, untagged, in the GPU's order.
"""

from __future__ import annotations

import numpy as np
import pytest

import enigma


@enigma.kernel
def hello(x: enigma.f32, out: enigma.f32):
    i = enigma.thread_position_in_grid.x
    v = x[i]
    enigma.print("x[{}] = {} negative {} {{braces}} {}", i, v, v < 0.0, enigma.i32(i) - 3)
    out[i] = v


def _cuda_missing():
    try:
        enigma.MetalRuntime("cuda")
    except enigma.DeviceError as e:
        return f"enigma has no CUDA device here: {e}"
    return None


CUDA_MISSING = _cuda_missing()


def _run(capfd, n=64, threads=32, device="cpu", **kw):
    x = np.linspace(-2.0, 2.0, n, dtype=np.float32)
    out = np.zeros_like(x)
    rt = enigma.MetalRuntime(device=device, **kw)
    enigma.compile(hello)(x, out, grid=n, threads=threads, rt=rt)
    assert np.array_equal(out, x)
    return x, rt, capfd.readouterr().out.splitlines()


def _g(v):
    return f"{float(v):g}"  # Python's %g is C's


def test_each_thread_prints_a_tagged_line_in_dispatch_order(capfd):
    x, _, lines = _run(capfd, n=100, threads=40)
    want = [f"thread ({i},0,0): x[{i}] = {_g(x[i])} negative {'true' if x[i] < 0 else 'false'} {{braces}} {i - 3}" for i in range(100)]
    assert lines == want


@pytest.mark.skipif(bool(CUDA_MISSING), reason=CUDA_MISSING or "")
def test_on_cuda_each_thread_prints_its_line_with_printf(capfd):
    x, _, lines = _run(capfd, n=100, threads=64, device="cuda")
    want = [f"x[{i}] = {_g(x[i])} negative {'true' if x[i] < 0 else 'false'} {{braces}} {i - 3}" for i in range(100)]
    assert sorted(lines) == sorted(want)


def test_a_sanitized_dispatch_prints_once(capfd):
    _, rt, lines = _run(capfd, sanitize=True)
    assert len(lines) == 64
    assert rt.last_report["findings"] == []


def test_past_4096_lines_a_note_counts_the_rest(capfd):
    x, rt, lines = _run(capfd, n=5000, threads=256)
    note = "print: 904 more line(s) not shown (the simulator shows the first 4096 of a dispatch)"
    assert len(lines) == 4097 and lines[-1] == note
    assert lines[4095].startswith("thread (4095,0,0): x[4095] = ")
    assert note in rt.last_report["notes"]


def test_the_backends_print_with_printf_and_shader_logging():
    compiled = enigma.compile(hello)
    assert 'printf("x[%u] = %g negative %s {braces} %d\\n", ' in compiled.cuda
    assert compiled.msl_version == "3.2"
    assert 'os_log_default.log("x[%u] = %g negative %s {braces} %d", ' in compiled.msl
    with pytest.raises(enigma.CompileError, match=r"print \(shader logging.*needs MSL 3.2 or later, but the options ask for MSL 3.1"):
        enigma.compile(hello, msl_version="3.1").msl


@pytest.mark.parametrize(
    "body, message",
    [
        ('enigma.print("{} and {}", i)', r"the format has 2 placeholder\(s\) `\{\}` but 1 value\(s\) are given"),
        ('enigma.print("at {}", enigma.float2(1.0, 2.0))', r"value 0 is f32x2; print takes scalars"),
        ('enigma.print("{x}", i)', r"`\{` at byte 0 is neither"),
        ("enigma.print(i)", r"first argument is its format, a string literal"),
        ('print("i =", i)', r"Python's print does not run in a kernel; .*enigma.print\(\"x = \{\} at \{\}\", x, i\)"),
        ('j = enigma.print("{}", i)', r"enigma.print\(\.\.\.\) is a statement; it has no value"),
    ],
)
def test_mistakes_are_compile_errors_that_say_what_to_write(tmp_path, body, message):
    path = tmp_path / "bad.py"
    src = f"import enigma\n\n\ndef bad(out: enigma.u32):\n    i = enigma.thread_position_in_grid.x\n    {body}\n    out[i] = i\n"
    path.write_text(src)
    ns = {"__name__": "bad", "__file__": str(path)}
    exec(compile(src, str(path), "exec"), ns)  # noqa: S102 - a kernel in a file of its own
    with pytest.raises(enigma.CompileError, match=message) as e:
        enigma.compile(ns["bad"])
    assert f"{path}:6" in str(e.value), str(e.value)
