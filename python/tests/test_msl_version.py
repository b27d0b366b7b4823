"""The MSL version ``.msl`` is written for: the one a kernel needs (3.2 for
``device_fence()``, with ``coherent(device)`` on the buffers it writes; 3.1
otherwise), or the one asked for with ``enigma.compile(k, msl_version=...)``;
a version that lacks a feature the kernel uses fails naming both versions."""

from __future__ import annotations

import pytest

import enigma


@enigma.kernel
def handoff(partials: enigma.u32, counter: enigma.u32, out: enigma.u32):
    lid = enigma.thread_index_in_threadgroup()
    partials[lid] = lid
    enigma.device_fence()
    ticket = enigma.atomic_add(counter, 0, 1)
    enigma.device_fence()
    out[lid] = ticket + partials[0]


@enigma.kernel
def scale(x: enigma.f32, y: enigma.f32):
    i = enigma.thread_position_in_grid("x")
    y[i] = x[i] * 2.0


def test_a_kernel_with_device_fences_gets_msl_3_2_by_default():
    compiled = enigma.compile(handoff)
    assert compiled.msl_version == "3.2"
    msl = compiled.msl
    assert "thread_scope_device" in msl
    assert "coherent(device) device uint* partials" in msl
    assert enigma.compile(handoff, msl_version="3.2").msl == msl


def test_asking_for_a_version_without_the_feature_names_both():
    compiled = enigma.compile(handoff, msl_version="3.1")
    assert compiled.msl_version == "3.1"
    with pytest.raises(enigma.CompileError, match=r"needs MSL 3\.2 or later.*MSL 3\.1"):
        compiled.msl


def test_other_kernels_default_to_3_1_and_take_the_version_asked_for():
    assert enigma.compile(scale).msl_version == "3.1"
    assert enigma.compile(scale, msl_version="3.2").msl_version == "3.2"
    assert enigma.compile(scale, msl_version="3.0").msl == enigma.compile(scale).msl
    # compile_ir takes it too.
    assert enigma.compile_ir(enigma.compile(handoff).ir, msl_version="3.1").msl_version == "3.1"


def test_an_unknown_version_is_a_compile_error():
    with pytest.raises(enigma.CompileError, match=r"unknown MSL version `2\.9`.*3\.0, 3\.1, 3\.2 and 4\.0"):
        enigma.compile(scale, msl_version="2.9")
