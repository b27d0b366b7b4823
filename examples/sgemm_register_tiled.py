"""A register-tiled f32 GEMM, ``C = A @ B``, in the Python kernel language.

Each threadgroup of 16×16 threads computes a 128×128 tile of C; each thread
owns 8×8 of its outputs in a per-thread array (``enigma.thread_array``),
which the unrolled loops (``enigma.static_range``) keep in registers. Per
step of 8 along K, the threadgroup stages an 8×128 slice of A (stored
transposed, so a thread reads its 8 rows of one k as one run) and an 8×128
slice of B in threadgroup memory; every thread then does 8 × 64 fused
multiply-adds from 16 reads. A thread's rows and columns are 16 apart
(``ty + 16·i``, ``tx + 16·j``), so the 32 threads of a SIMD group read
consecutive words of the B slice and write consecutive words of C. The
shapes come from the arrays passed (``A.shape``, ``B.shape``): any M, N, K
run, each edge guarded.

    python examples/sgemm_register_tiled.py [--device auto|cpu|cuda|metal] [--m M --n N --k K]

It prints the largest difference from numpy's float64 product and exits 1
when it is past the f32 bound.
"""

import argparse
import sys

import numpy as np

import enigma

TM = 8  # outputs per thread along each side
THREADS = 16  # threads per threadgroup along each side
BM = TM * THREADS  # outputs per threadgroup along each side: 128
BK = 8  # the K step staged in threadgroup memory
LOADS = BM * BK // (THREADS * THREADS)  # elements of each slice a thread stages: 4


@enigma.kernel
def sgemm_8x8(A: enigma.f32, B: enigma.f32, C: enigma.f32):
    M, K = A.shape
    N = B.shape[1]
    tx = enigma.thread_position_in_threadgroup.x
    ty = enigma.thread_position_in_threadgroup.y
    t = ty * THREADS + tx
    row0 = enigma.threadgroup_position_in_grid.y * BM
    col0 = enigma.threadgroup_position_in_grid.x * BM
    a_slice = enigma.threadgroup_alloc(enigma.f32, (BK, BM))  # A's slice, transposed: [k][row]
    b_slice = enigma.threadgroup_alloc(enigma.f32, (BK, BM))  # B's slice: [k][column]
    acc = enigma.thread_array(enigma.f32, (TM, TM))
    a = enigma.thread_array(enigma.f32, TM)
    b = enigma.thread_array(enigma.f32, TM)
    for i in enigma.static_range(TM):
        for j in enigma.static_range(TM):
            acc[i, j] = 0.0
    for k0 in range(0, K, BK):
        for s in enigma.static_range(LOADS):
            e = t + s * THREADS * THREADS
            r = e // BK  # A: 8 consecutive k of a row per 8 threads
            kk = e % BK
            a_slice[kk, r] = A[row0 + r, k0 + kk] if row0 + r < M and k0 + kk < K else 0.0
            kb = e // BM  # B: 128 consecutive columns of a row per 128 threads
            c = e % BM
            b_slice[kb, c] = B[k0 + kb, col0 + c] if k0 + kb < K and col0 + c < N else 0.0
        enigma.barrier(mem_flags="mem_threadgroup")
        for kk in enigma.static_range(BK):
            for i in enigma.static_range(TM):
                a[i] = a_slice[kk, ty + i * THREADS]
                b[i] = b_slice[kk, tx + i * THREADS]
            for i in enigma.static_range(TM):
                for j in enigma.static_range(TM):
                    acc[i, j] = enigma.fma(a[i], b[j], acc[i, j])
        enigma.barrier(mem_flags="mem_threadgroup")
    for i in enigma.static_range(TM):
        for j in enigma.static_range(TM):
            row = row0 + ty + i * THREADS
            col = col0 + tx + j * THREADS
            if row < M and col < N:
                C[row, col] = acc[i, j]


def launch_shape(m, n):
    """(threadgroups, threads) for an m×n product."""
    return ((n + BM - 1) // BM, (m + BM - 1) // BM), (THREADS, THREADS)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--m", type=int, default=150)
    parser.add_argument("--n", type=int, default=130)
    parser.add_argument("--k", type=int, default=37)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.m, args.k), dtype=np.float32)
    b = rng.standard_normal((args.k, args.n), dtype=np.float32)
    c = np.zeros((args.m, args.n), np.float32)
    groups, threads = launch_shape(args.m, args.n)
    enigma.compile(sgemm_8x8)(a, b, c, threadgroups=groups, threads=threads, device=args.device)
    want = a.astype(np.float64) @ b.astype(np.float64)
    # Each output sums k products in f32: within k ulps of the largest partial sum.
    bound = args.k * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    diff = np.abs(c - want)
    print(f"sgemm_8x8 {args.m}x{args.n}x{args.k} on {args.device}: max |diff| vs numpy: {diff.max():.3g}")
    if (diff > bound).any():
        print("past the f32 bound")
        return 1
    print("matches numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
