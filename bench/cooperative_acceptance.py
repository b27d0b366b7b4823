"""Issue 34's acceptance for cooperative tensors on a CUDA GPU (the H200):

* the issue's kernel, as written there (a 4-SIMD-group ``matmul2d`` of
  64×64 by 64×K f16 tiles with f32 accumulation, operands viewed in device
  memory), run on CUDA for K = 64 and 200 on f16 inputs whose products and
  sums are exact in f32 (multiples of 1/2 in [-4, 4]): equal to numpy's
  product, element for element, and to the simulator's;
* the same product with its operands staged through threadgroup memory in
  64-wide K chunks, the form ``wgmma`` takes (threadgroup arrays of pitch
  64): the CUDA the GPU compiles it to (``Runtime.cuda_source``) contains
  ``wgmma.mma_async`` where the device's cooperative lowering is ``wgmma``
  (sm_90a), and its results equal numpy's for K = 64 and 256.

Prints each check and exits 1 when one fails (2 when no CUDA device is
there). The throughput figure of the issue is ``coop_throughput.py``'s.

Usage (with the enigma package built with CUDA support)::

    python3 bench/cooperative_acceptance.py
"""

import json
import sys

import numpy as np

import enigma

DESC = enigma.matmul2d_descriptor(64, 64, enigma.dynamic_extent)      # m, n, k; transposes, relaxed precision, mode as MSL


@enigma.kernel
def gemm_tile(A: enigma.f16, B: enigma.f16, C: enigma.f32, M: enigma.u32, N: enigma.u32, K: enigma.u32):
    op = enigma.matmul2d(DESC, enigma.execution_simdgroups(4))
    a = enigma.tensor(A, (K, M))                # extents innermost first, as MSL's dextents
    b = enigma.tensor(B, (N, K))
    c = op.get_destination_cooperative_tensor(a, b, enigma.f32)
    op.run(a, b, c)
    c.store(enigma.tensor(C, (N, M)))


CHUNK = enigma.matmul2d_descriptor(64, 64, 64, mode="multiply_accumulate")


@enigma.kernel
def gemm_tile_staged(A: enigma.f16, B: enigma.f16, C: enigma.f32, K: enigma.constant(enigma.u32)):
    """C (64×64) = A (64×K) · B (K×64), K a multiple of 64, through threadgroup tiles."""
    op = enigma.matmul2d(CHUNK, enigma.execution_simdgroups(4))
    a_tile = enigma.threadgroup_alloc(enigma.f16, 64 * 64)
    b_tile = enigma.threadgroup_alloc(enigma.f16, 64 * 64)
    a = enigma.tensor(a_tile, (64, 64))         # K-major rows of A, pitch 64
    b = enigma.tensor(b_tile, (64, 64))         # rows of B (N innermost), pitch 64
    c = op.get_destination_cooperative_tensor(a, b, enigma.f32)
    c.fill(0.0)
    t = enigma.thread_index_in_threadgroup
    for k0 in range(0, K, 64):
        for i in range(t, 64 * 64, 128):
            a_tile[i] = A[(i // 64) * K + k0 + i % 64]
            b_tile[i] = B[(k0 + i // 64) * 64 + i % 64]
        enigma.threadgroup_barrier()
        op.run(a, b, c)
        enigma.threadgroup_barrier()
    c.store(enigma.tensor(C, (64, 64)))


def halves(rng, *shape):
    """Multiples of 1/2 in [-4, 4]: f16 products and their f32 sums are exact."""
    return (rng.integers(-8, 9, size=shape) / 2).astype(np.float32)


def operands(k):
    rng = np.random.default_rng(k)
    a, b = halves(rng, 64, k), halves(rng, k, 64)
    return a.astype(np.float16), b.astype(np.float16), (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def issue_kernel(rt, k):
    a, b, want = operands(k)
    c = np.zeros(64 * 64, np.float32)
    sizes = [np.array([64], np.uint32), np.array([64], np.uint32), np.array([k], np.uint32)]
    rt.execute(enigma.compile(gemm_tile), inputs=[a, b, c] + sizes, grid=128, threads=128)
    return c.reshape(64, 64), want


def staged_kernel(rt, k):
    a, b, want = operands(k)
    c = np.zeros(64 * 64, np.float32)
    rt.execute(enigma.compile(gemm_tile_staged), inputs=[a, b, c, k], grid=128, threads=128)
    return c.reshape(64, 64), want


def check(failures, ok, what):
    print(("ok    " if ok else "FAILED"), what)
    if not ok:
        failures.append(what)


def main():
    try:
        cuda = enigma.MetalRuntime(device="cuda")
    except enigma.DeviceError as e:
        print(f"no CUDA device: {e}")
        return 2
    sim = enigma.MetalRuntime(device="cpu")
    info = json.loads(cuda.native.info_json)
    lowering = info.get("cooperative_lowering")
    print(f"device: {cuda.native.device_name}; cooperative lowering: {lowering}")
    failures = []
    for k in (64, 200):
        got, want = issue_kernel(cuda, k)
        check(failures, np.array_equal(got, want), f"the issue's kernel on CUDA, K = {k}: equal to numpy ({np.count_nonzero(got != want)} elements differ)")
        on_sim, _ = issue_kernel(sim, k)
        check(failures, np.array_equal(got, on_sim), f"the issue's kernel on CUDA, K = {k}: equal to the simulator")
    source = cuda.native.cuda_source(enigma.compile(gemm_tile_staged).native)
    check(failures, lowering == "wgmma", f"the device lowers cooperative products to wgmma (it reports {lowering})")
    check(failures, "wgmma.mma_async" in source,
          "the staged kernel's CUDA contains wgmma.mma_async (its views' pitches are locals the front end assigns once)")
    for k in (64, 256):
        got, want = staged_kernel(cuda, k)
        check(failures, np.array_equal(got, want), f"the staged kernel on CUDA, K = {k}: equal to numpy ({np.count_nonzero(got != want)} elements differ)")
    print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
