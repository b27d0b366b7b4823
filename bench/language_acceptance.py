"""The kernel language's acceptance figures on a CUDA GPU, beside the
library and torch in the same run:

* the register-tiled SGEMM of ``examples/sgemm_register_tiled.py`` (8×8
  outputs per thread) at 4096³ beside the library's SIMT f32 GEMM
  (``enigma.ops.matmul`` on f32, which runs it off Metal): both checked
  against ``torch.matmul`` with TF32 off, timed with CUDA events (median of
  20 after a warm-up, the host's launch included as in
  ``cuda_timing.median_seconds``); the check is a time within 1.5× of the
  library's;
* GELU in the erf form (``x * 0.5 * (1 + erf(x / √2))``) against
  ``torch.nn.functional.gelu``: within 2 ULP on 2^22 inputs;
* a numba-style kernel (``C[i, j] = A[i, j] + 2·B[i, j]``, the shape read
  with ``A.shape``) on torch CUDA tensors of two sizes and, compiled again
  for the rank only, a 3-D kernel.

Prints each figure and exits 1 when a check fails.

Usage (with the enigma package and torch installed)::

    python3 bench/language_acceptance.py
"""

import importlib.util
import sys
from pathlib import Path

import torch

import enigma
from cuda_timing import median_seconds

REPO = Path(__file__).resolve().parents[1]
SIZE = 4096
MAX_RATIO = 1.5
MAX_ULPS = 2


def example(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@enigma.kernel
def gelu_erf(x: enigma.f32, out: enigma.f32):
    i = enigma.thread_position_in_grid.x
    if i < x.shape[0]:
        v = x[i]
        out[i] = v * 0.5 * (1.0 + enigma.erf(v * 0.7071067811865476))


@enigma.kernel
def axpy_2d(A: enigma.f32, B: enigma.f32, C: enigma.f32):
    i = enigma.thread_position_in_grid.y
    j = enigma.thread_position_in_grid.x
    if i < A.shape[0] and j < A.shape[1]:
        C[i, j] = A[i, j] + 2.0 * B[i, j]


@enigma.kernel
def scale_3d(A: enigma.f32, out: enigma.f32):
    g = enigma.thread_position_in_grid
    if g.z < A.shape[0] and g.y < A.shape[1] and g.x < A.shape[2]:
        out[g.z, g.y, g.x] = A[g.z, g.y, g.x] * enigma.f32(A.shape[2])


def ordered(t):
    """f32 bit patterns as integers in the order of the values."""
    i = t.contiguous().view(torch.int32).to(torch.int64)
    return torch.where(i < 0, -(i & 0x7FFFFFFF), i)


def check(failures, ok, what):
    print(f"  {'ok' if ok else 'FAILED'}: {what}")
    if not ok:
        failures.append(what)


def sgemm(failures):
    ex = example("sgemm_register_tiled")
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(SIZE, SIZE, device="cuda", generator=gen)
    b = torch.randn(SIZE, SIZE, device="cuda", generator=gen)
    c = torch.zeros(SIZE, SIZE, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    want = torch.matmul(a, b)
    compiled = enigma.compile(ex.sgemm_8x8)
    groups, threads = ex.launch_shape(SIZE, SIZE)
    run = lambda: compiled(a, b, c, threadgroups=groups, threads=threads)  # noqa: E731
    run()
    library = enigma.ops.matmul(a, b)
    torch.cuda.synchronize()
    scale = want.abs().max().item()
    err_dsl = (c - want).abs().max().item() / scale
    err_lib = (library - want).abs().max().item() / scale
    t_dsl = median_seconds(run)
    t_lib = median_seconds(lambda: enigma.ops.matmul(a, b))
    t_torch = median_seconds(lambda: torch.matmul(a, b))
    flops = 2.0 * SIZE**3
    print(f"SGEMM {SIZE}^3 f32 ({torch.cuda.get_device_name()}):")
    for name, t, err in [("DSL 8x8 register tiles", t_dsl, err_dsl), ("library SIMT f32 GEMM", t_lib, err_lib), ("torch.matmul (TF32 off)", t_torch, 0.0)]:
        print(f"  {name:26s} {t * 1e3:8.3f} ms  {flops / t / 1e12:6.2f} TFLOP/s  max |err|/max|C| {err:.2e}")
    ratio = t_dsl / t_lib
    print(f"  DSL / library time: {ratio:.2f}x (DSL / torch: {t_dsl / t_torch:.2f}x)")
    check(failures, err_dsl < 1e-4, f"DSL SGEMM matches torch.matmul (max |err|/max|C| {err_dsl:.2e} < 1e-4)")
    check(failures, ratio <= MAX_RATIO, f"DSL SGEMM within {MAX_RATIO}x of the library's SIMT GEMM ({ratio:.2f}x)")


def gelu(failures):
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.cat([torch.linspace(-10.0, 10.0, 1 << 21, device="cuda"), 4.0 * torch.randn(1 << 21, device="cuda", generator=gen)])
    out = torch.empty_like(x)
    enigma.compile(gelu_erf)(x, out, grid=x.numel(), threads=256)
    want = torch.nn.functional.gelu(x)
    torch.cuda.synchronize()
    ulps = (ordered(out) - ordered(want)).abs()
    worst = int(ulps.max().item())
    print(f"GELU (erf form) on {x.numel()} inputs: max {worst} ULP from torch.nn.functional.gelu, "
          f"{int((ulps > 0).sum().item())} inputs differ")
    check(failures, worst <= MAX_ULPS, f"GELU within {MAX_ULPS} ULP of torch ({worst})")


def shapes(failures):
    print("Shapes from torch CUDA tensors:")
    compiled = enigma.compile(axpy_2d)
    for rows, cols in [(300, 77), (1000, 1031)]:
        a = torch.randn(rows, cols, device="cuda")
        b = torch.randn(rows, cols, device="cuda")
        c = torch.zeros(rows, cols, device="cuda")
        compiled(a, b, c, grid=(cols, rows), threads=(32, 8))
        torch.cuda.synchronize()
        exact = torch.equal(c, a + 2.0 * b)
        check(failures, exact, f"A[i, j] + 2·B[i, j] with A.shape on {rows}x{cols} tensors equals torch's")
    same = compiled.for_arrays([a, b, c])[0] is compiled
    check(failures, same, "one compilation for both sizes")
    a = torch.randn(3, 5, 70, device="cuda")
    out = torch.zeros_like(a)
    enigma.compile(scale_3d)(a, out, grid=(70, 5, 3), threads=(64, 2, 1))
    torch.cuda.synchronize()
    check(failures, torch.equal(out, a * 70.0), "a 3-D kernel reading A.shape on a 3x5x70 tensor equals torch's")


def main():
    if not torch.cuda.is_available():
        print("language_acceptance.py needs a CUDA GPU (torch sees none)")
        return 2
    failures = []
    for part in (shapes, gelu, sgemm):
        try:
            part(failures)
        except Exception as e:  # noqa: BLE001 - report every part, then fail
            check(failures, False, f"{part.__name__}: {type(e).__name__}: {e}")
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
