"""``enigma.device_fence()`` in the Python DSL: the last threadgroup sums
the partial values every threadgroup wrote (every writer fences before the
atomic ticket, every reader after it, as Metal's coherence rules ask),
against numpy on the device under test and clean under the simulator's
sanitizer; with one fencing thread, or none, the same reads are device
races."""

from __future__ import annotations

import numpy as np
import pytest

import enigma

GROUPS = 9
T = 32


def make_kernel(fences):
    """``fences``: "every" thread, thread "zero" alone, or None."""
    every, zero = fences == "every", fences == "zero"

    @enigma.kernel
    def last_sums(values: enigma.u32, partials: enigma.u32, counter: enigma.u32, out: enigma.u32):
        last = enigma.threadgroup_alloc(enigma.u32, 1)
        lid = enigma.thread_index_in_threadgroup()
        group = enigma.threadgroup_position_in_grid("x")
        partials[group * T + lid] = values[group * T + lid] * 2 + group
        if every:
            enigma.device_fence()
        enigma.barrier(mem_flags="mem_device")
        with enigma.if_(lid == 0):
            if zero:
                enigma.device_fence()
            ticket = enigma.atomic_add(counter, 0, 1)
            if zero:
                enigma.device_fence()
            last[0] = enigma.select(enigma.u32(0), enigma.u32(1), ticket == GROUPS - 1)
        enigma.barrier(mem_flags="mem_threadgroup")
        with enigma.if_(last[0] != 0):
            if every:
                enigma.device_fence()
            total = enigma.u32(0)
            for g in enigma.for_range(GROUPS):
                total = total + partials[g * T + lid]
            out[lid] = total

    return last_sums


def _run(runtime, kernel):
    values = np.random.default_rng(5).integers(0, 1000, GROUPS * T).astype(np.uint32)
    _, counter, out = runtime.execute(
        enigma.compile(kernel), inputs=[values], output_size=[GROUPS * T * 4, 4, T * 4], threadgroups=(GROUPS, 1, 1), threads=(T, 1, 1))
    want = (values.reshape(GROUPS, T).astype(np.uint64) * 2 + np.arange(GROUPS)[:, None]).sum(axis=0)
    return np.frombuffer(out, np.uint32), want, np.frombuffer(counter, np.uint32)


def test_the_last_threadgroup_sums_what_all_wrote(rt):
    got, want, counter = _run(rt, make_kernel("every"))
    np.testing.assert_array_equal(got, want)
    assert counter[0] == GROUPS
    assert "device_fence()" in enigma.compile(make_kernel("every")).ir


def test_clean_under_the_sanitizer_with_every_fence_and_a_race_otherwise():
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    got, want, _ = _run(rt, make_kernel("every"))
    np.testing.assert_array_equal(got, want)
    for fences in ("zero", None):
        with pytest.raises(enigma.SanitizerError) as e:
            _run(rt, make_kernel(fences))
        assert "device_race" in str(e.value) or "race" in str(e.value)
