"""Kernels as their authors write them, on the simulator against
independent references:

* the register-tiled SGEMM of ``examples/sgemm_register_tiled.py`` (8×8
  outputs per thread in a per-thread array, unrolled loops, 128×128 tiles
  staged as ``float4``s in two stages of threadgroup memory, shapes from
  the arrays) against numpy's
  float64 product, clean under the sanitizer, on sizes no tile divides;
* GELU in the erf form, written as ``torch.nn.functional.gelu`` computes it
  (``x * 0.5 * (1 + erf(x / √2))`` in f32), against an f64 reference.

``bench/language_acceptance.py`` runs the same kernels on a CUDA GPU beside
the library's SIMT GEMM and torch.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

import enigma

REPO = Path(__file__).resolve().parents[2]


def _example(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("m,n,k", [(150, 130, 37), (128, 128, 16), (9, 200, 5)])
def test_the_8x8_register_tiled_sgemm_matches_numpy(m, n, k):
    ex = _example("sgemm_register_tiled")
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.full((m, n), np.nan, np.float32)  # every element must be written
    rt = enigma.MetalRuntime(device="cpu", sanitize=True)
    groups, threads = ex.launch_shape(m, n)
    compiled = enigma.compile(ex.sgemm_8x8)
    compiled(a, b, c, threadgroups=groups, threads=threads, rt=rt)
    assert rt.last_report["findings"] == [], rt.last_report
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = k * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert (np.abs(c - want) <= bound).all(), np.abs(c - want).max()
    # 8×8 accumulators per thread (16 float4s), their loops unrolled on both backends.
    assert "float4 acc[16];" in compiled.cuda and "thread float4 acc[16];" in compiled.msl
    assert compiled.cuda.count("#pragma unroll") >= 8


def test_the_sgemm_example_runs_as_a_script(capsys):
    assert _example("sgemm_register_tiled").main(["--device", "cpu", "--m", "70", "--n", "33", "--k", "20"]) == 0
    assert "matches numpy" in capsys.readouterr().out


SQRT1_2 = 0.7071067811865476


@enigma.kernel
def gelu_erf(x: enigma.f32, out: enigma.f32):
    i = enigma.thread_position_in_grid.x
    if i < x.shape[0]:
        v = x[i]
        out[i] = v * 0.5 * (1.0 + enigma.erf(v * SQRT1_2))


def _ordered(a):
    """f32 bit patterns as integers in the order of the values (ULP distances)."""
    i = a.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def test_gelu_in_the_erf_form_against_an_f64_reference():
    x = np.concatenate([np.linspace(-10, 10, 40001, dtype=np.float32), np.float32([0.0, -0.0, 1e-30, -1e-30, 3e38, -3e38])])
    out = np.zeros_like(x)
    enigma.compile(gelu_erf)(x, out, grid=x.size, threads=256, device="cpu")
    exact = np.array([0.5 * float(v) * (1.0 + math.erf(float(v) / math.sqrt(2.0))) for v in x])
    # torch's formula in f32 with a correctly rounded erf, step by step: the
    # simulator's erf is f64's rounded once, so the kernel gives exactly this.
    erf32 = np.float32([math.erf(float(np.float32(v * np.float32(SQRT1_2)))) for v in x])
    model = (x * np.float32(0.5)) * (np.float32(1.0) + erf32)
    np.testing.assert_array_equal(out, model)
    ulps = np.abs(_ordered(out) - _ordered(exact))
    near = x >= -1.0
    assert ulps[near].max() <= 2, ulps[near].max()
    # Below -1, 1 + erf cancels (the formula's, as torch's): the error is one
    # rounding of erf's value near -1, scaled by x/2 — at most 2 ULP of x.
    err = np.abs(out.astype(np.float64) - exact)
    assert (err <= 2.0 * np.abs(x.astype(np.float64)) * 2.0**-24).all()
