"""A register-tiled f32 GEMM, ``C = A @ B``, in the Python kernel language.

Each threadgroup of 16×16 threads computes a 128×128 tile of C; each thread
owns 8×8 of its outputs in a per-thread array (``enigma.thread_array``),
which the unrolled loops (``enigma.static_range``) keep in registers. The
thread's rows are two runs of 4 consecutive rows, 64 apart (``4·ty`` and
``64 + 4·ty``), and so are its columns, so that each of its operands is
one ``float4`` in threadgroup memory: per step along K a thread reads four
``float4``s and makes 64 fused multiply-adds (as ``float4`` FMAs, one row
of 4 outputs each), and the 16 threads of a row of the threadgroup read 16
consecutive ``float4``s of B.

Per slice of ``BK`` along K the threadgroup holds A's ``BK × 128`` slice
transposed (``a_slice[stage, k, row / 4]``) and B's (``b_slice[stage, k,
column / 4]``) as ``float4``s, each row padded by one ``float4`` so the
transposing stores fall in different banks. There are two stages: while
the threads multiply one slice, they already hold the next in registers
(loaded before the multiply) and store it into the other stage after it —
one barrier per slice. A is read as 4 scalars of 4 consecutive rows at one
k (consecutive threads take consecutive k), B as runs of 4 along a row.
The shapes come from the arrays passed (``A.shape``, ``B.shape``): any M,
N, K run, each edge guarded (elements past the matrices are zero).

    python examples/sgemm_register_tiled.py [--device auto|cpu|cuda|metal] [--m M --n N --k K]

It prints the largest difference from numpy's float64 product and exits 1
when it is past the f32 bound.
"""

import argparse
import sys

import numpy as np

import enigma

THREADS = 16  # threads per threadgroup along each side
BM = 128  # outputs per threadgroup along each side: 8 per thread
HALF = BM // 2  # a thread's second run of rows (columns) starts this far after its first
V = BM // 4  # float4s along a side of the tile
PAD = 1  # float4s of padding after each staged row
BK = 8  # the K values of one staged slice (two stages of both slices: 16.5 KiB)
LOADS = BK * V // (THREADS * THREADS)  # float4s of each slice a thread stages: 1


@enigma.kernel
def sgemm_8x8(A: enigma.f32, B: enigma.f32, C: enigma.f32):
    M, K = A.shape
    N = B.shape[1]
    tx = enigma.thread_position_in_threadgroup.x
    ty = enigma.thread_position_in_threadgroup.y
    t = ty * THREADS + tx
    row0 = enigma.threadgroup_position_in_grid.y * BM
    col0 = enigma.threadgroup_position_in_grid.x * BM
    a_slice = enigma.threadgroup_alloc(enigma.float4, (2, BK, V + PAD))  # [stage][k][row / 4]
    b_slice = enigma.threadgroup_alloc(enigma.float4, (2, BK, V + PAD))  # [stage][k][column / 4]
    acc = enigma.thread_array(enigma.float4, (8, 2))  # [row][run of 4 columns]
    a_next = enigma.thread_array(enigma.float4, LOADS)  # the next slice, held in registers
    b_next = enigma.thread_array(enigma.float4, LOADS)
    for i in enigma.static_range(8):
        for j in enigma.static_range(2):
            acc[i, j] = enigma.float4(0.0)
    # The first slice, straight into stage 0.
    for s in enigma.static_range(LOADS):
        e = t + s * THREADS * THREADS
        ka = e % BK  # A: BK consecutive k of 4 rows per BK threads
        ra = row0 + e // BK * 4
        a_slice[0, ka, e // BK] = enigma.float4(
            A[ra, ka] if ra < M and ka < K else 0.0,
            A[ra + 1, ka] if ra + 1 < M and ka < K else 0.0,
            A[ra + 2, ka] if ra + 2 < M and ka < K else 0.0,
            A[ra + 3, ka] if ra + 3 < M and ka < K else 0.0,
        )
        kb = e // V  # B: a row of 128 columns per 32 threads
        cb = col0 + e % V * 4
        b_slice[0, kb, e % V] = enigma.float4(
            B[kb, cb] if kb < K and cb < N else 0.0,
            B[kb, cb + 1] if kb < K and cb + 1 < N else 0.0,
            B[kb, cb + 2] if kb < K and cb + 2 < N else 0.0,
            B[kb, cb + 3] if kb < K and cb + 3 < N else 0.0,
        )
    enigma.barrier(mem_flags="mem_threadgroup")
    stage = 0
    for k0 in range(0, K, BK):
        # The next slice into registers (zeros past K).
        for s in enigma.static_range(LOADS):
            e = t + s * THREADS * THREADS
            ka = k0 + BK + e % BK
            ra = row0 + e // BK * 4
            a_next[s] = enigma.float4(
                A[ra, ka] if ra < M and ka < K else 0.0,
                A[ra + 1, ka] if ra + 1 < M and ka < K else 0.0,
                A[ra + 2, ka] if ra + 2 < M and ka < K else 0.0,
                A[ra + 3, ka] if ra + 3 < M and ka < K else 0.0,
            )
            kb = k0 + BK + e // V
            cb = col0 + e % V * 4
            b_next[s] = enigma.float4(
                B[kb, cb] if kb < K and cb < N else 0.0,
                B[kb, cb + 1] if kb < K and cb + 1 < N else 0.0,
                B[kb, cb + 2] if kb < K and cb + 2 < N else 0.0,
                B[kb, cb + 3] if kb < K and cb + 3 < N else 0.0,
            )
        # This slice: per k, 4 float4 reads and 16 float4 FMAs.
        for kk in enigma.static_range(BK):
            a_lo = a_slice[stage, kk, ty]  # rows 4·ty … 4·ty + 3
            a_hi = a_slice[stage, kk, ty + HALF // 4]  # rows 64 + 4·ty …
            b_lo = b_slice[stage, kk, tx]  # columns 4·tx … 4·tx + 3
            b_hi = b_slice[stage, kk, tx + HALF // 4]  # columns 64 + 4·tx …
            acc[0, 0] = enigma.fma(enigma.float4(a_lo.x), b_lo, acc[0, 0])
            acc[0, 1] = enigma.fma(enigma.float4(a_lo.x), b_hi, acc[0, 1])
            acc[1, 0] = enigma.fma(enigma.float4(a_lo.y), b_lo, acc[1, 0])
            acc[1, 1] = enigma.fma(enigma.float4(a_lo.y), b_hi, acc[1, 1])
            acc[2, 0] = enigma.fma(enigma.float4(a_lo.z), b_lo, acc[2, 0])
            acc[2, 1] = enigma.fma(enigma.float4(a_lo.z), b_hi, acc[2, 1])
            acc[3, 0] = enigma.fma(enigma.float4(a_lo.w), b_lo, acc[3, 0])
            acc[3, 1] = enigma.fma(enigma.float4(a_lo.w), b_hi, acc[3, 1])
            acc[4, 0] = enigma.fma(enigma.float4(a_hi.x), b_lo, acc[4, 0])
            acc[4, 1] = enigma.fma(enigma.float4(a_hi.x), b_hi, acc[4, 1])
            acc[5, 0] = enigma.fma(enigma.float4(a_hi.y), b_lo, acc[5, 0])
            acc[5, 1] = enigma.fma(enigma.float4(a_hi.y), b_hi, acc[5, 1])
            acc[6, 0] = enigma.fma(enigma.float4(a_hi.z), b_lo, acc[6, 0])
            acc[6, 1] = enigma.fma(enigma.float4(a_hi.z), b_hi, acc[6, 1])
            acc[7, 0] = enigma.fma(enigma.float4(a_hi.w), b_lo, acc[7, 0])
            acc[7, 1] = enigma.fma(enigma.float4(a_hi.w), b_hi, acc[7, 1])
        # The next slice into the other stage; its readers of the last
        # slice have all passed the previous barrier.
        stage = 1 - stage
        for s in enigma.static_range(LOADS):
            e = t + s * THREADS * THREADS
            a_slice[stage, e % BK, e // BK] = a_next[s]
            b_slice[stage, e // V, e % V] = b_next[s]
        enigma.barrier(mem_flags="mem_threadgroup")
    for i in enigma.static_range(8):
        row = row0 + i // 4 * HALF + ty * 4 + i % 4
        for j in enigma.static_range(2):
            col = col0 + j * HALF + tx * 4
            v = acc[i, j]
            if row < M:
                if col < N:
                    C[row, col] = v.x
                if col + 1 < N:
                    C[row, col + 1] = v.y
                if col + 2 < N:
                    C[row, col + 2] = v.z
                if col + 3 < N:
                    C[row, col + 3] = v.w


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
