"""``rt.last_report`` after ``enigma.ops`` calls on a runtime: every call
sets it (one report for the call's dispatches, naming its kernels), under
the sanitizer when the runtime sanitizes; a call that fails leaves None;
each thread sees its own calls' reports, and a kernel dispatch after a
library call reports itself.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import enigma


def test_a_sanitizing_runtime_checks_library_calls_and_reports_them():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 40), dtype=np.float32)
    y = enigma.ops.softmax(x, rt=rt)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    report = rt.last_report
    assert report is not None and report["sanitized"] is True and report["findings"] == [], report
    assert report["kernels"] and all(isinstance(k, str) for k in report["kernels"]), report
    a = rng.standard_normal((33, 17), dtype=np.float32)
    b = rng.standard_normal((17, 9), dtype=np.float32)
    np.testing.assert_allclose(enigma.ops.matmul(a, b, rt=rt), a @ b, rtol=1e-4, atol=1e-4)
    assert rt.last_report["sanitized"] and rt.last_report["findings"] == [] and rt.last_report is not report


def test_a_plain_runtime_reports_unsanitized_calls():
    rt = enigma.MetalRuntime(device="cpu")
    enigma.ops.relu(np.float32([-1.0, 2.0]), rt=rt)
    assert rt.last_report["sanitized"] is False and rt.last_report["kernels"], rt.last_report


def test_a_failed_call_leaves_none_and_a_kernel_dispatch_reports_itself():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    enigma.ops.relu(np.float32([1.0]), rt=rt)
    assert rt.last_report is not None
    with pytest.raises(enigma.DispatchError):
        enigma.ops.relu(np.float32([1.0]), rt=rt, threads=33)  # refused: not a multiple of 32
    assert rt.last_report is None

    @enigma.kernel
    def fill(out: enigma.f32):
        out[enigma.thread_position_in_grid.x] = 1.0

    enigma.ops.relu(np.float32([1.0]), rt=rt)
    rt.execute(enigma.compile(fill), [], output_size=16, grid=4, threads=4)
    assert "kernels" not in rt.last_report and rt.last_report["findings"] == []


def test_each_thread_sees_its_own_library_calls():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    seen = {}

    def other():
        seen["before"] = rt.last_report
        enigma.ops.prefix_sum(np.arange(8, dtype=np.float32), rt=rt)
        seen["after"] = rt.last_report

    enigma.ops.relu(np.float32([1.0]), rt=rt)
    mine = rt.last_report
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["before"] is None and seen["after"]["kernels"] != mine["kernels"]
    assert rt.last_report is mine
