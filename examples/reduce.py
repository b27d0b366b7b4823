"""Seed 001's two-pass reduction of 2^20 floats, with a second pass that works.

Pass 1 is the seed's `reduce_threadgroup`, unchanged: 4096 threadgroups of
256 threads each write one partial sum. The seed's pass 2 dispatches the 4096
partial sums as one threadgroup of 4096 threads, which no device allows (the
maximum is 1024: enigma refuses it with a DispatchError naming both numbers),
and its serial loop adds exactly 8 SIMD-group totals whatever the
threadgroup's size. Here pass 2 is one threadgroup of 1024 threads; each
thread first adds a strided slice of the partial sums (so any number of them
works), and thread 0 adds as many SIMD-group totals as there are SIMD groups.

    python examples/reduce.py [--device auto|cpu|cuda|metal] [--n N]
"""

import argparse
import sys

import numpy as np

import enigma


@enigma.kernel
def reduce_threadgroup(
    A:          enigma.f32,
    PartialOut: enigma.f32,
):
    tid       = enigma.thread_position_in_grid
    local_id  = enigma.thread_position_in_threadgroup("x")
    simd_idx  = enigma.thread_index_in_simdgroup()
    simd_gid  = enigma.simdgroup_index_in_threadgroup()
    tg_size   = enigma.threads_per_threadgroup()

    scratch = enigma.threadgroup_alloc("float", 32)

    val = A[tid]
    simd_total = enigma.simd_sum(val)

    with enigma.if_(enigma.cmp_eq(simd_idx, 0)):
        scratch[simd_gid] = simd_total

    enigma.barrier(mem_flags="mem_threadgroup")

    n_simd_groups = tg_size / 32
    with enigma.if_(enigma.cmp_lt(local_id, n_simd_groups)):
        sub = scratch[local_id]
        tg_sum = enigma.simd_sum(sub)
        with enigma.if_(enigma.cmp_eq(local_id, 0)):
            group_id = enigma.threadgroup_position_in_grid("x")
            PartialOut[group_id] = tg_sum


@enigma.kernel
def reduce_final(
    Partial: enigma.f32,
    n:       enigma.constant(enigma.u32),
    Result:  enigma.f32,
):
    local_id = enigma.thread_position_in_threadgroup("x")
    tg_size  = enigma.threads_per_threadgroup("x")
    simd_idx = enigma.thread_index_in_simdgroup()
    simd_gid = enigma.simdgroup_index_in_threadgroup()
    n_simd   = enigma.simdgroups_per_threadgroup()

    scratch = enigma.threadgroup_alloc("float", 32)

    # Each thread adds Partial[local_id], Partial[local_id + tg_size], ...
    val = enigma.f32(0.0)
    with enigma.for_range(local_id, n, tg_size) as i:
        val = val + Partial[i]
    simd_total = enigma.simd_sum(val)

    with enigma.if_(enigma.cmp_eq(simd_idx, 0)):
        scratch[simd_gid] = simd_total

    enigma.barrier(mem_flags="mem_threadgroup")

    with enigma.if_(enigma.cmp_eq(local_id, 0)):
        final = enigma.f32(0.0)
        with enigma.for_range(0, n_simd) as i:
            final = final + scratch[i]
        Result[0] = final


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or metal (default: auto)")
    ap.add_argument("--n", type=int, default=1 << 20, help="elements, a multiple of 256 (default: 2^20)")
    args = ap.parse_args(argv)

    threads_per_tg = 256
    n = args.n
    if n <= 0 or n % threads_per_tg:
        ap.error(f"--n must be a positive multiple of {threads_per_tg}")
    n_threadgroups = n // threads_per_tg

    compiled_pass1 = enigma.compile(reduce_threadgroup)
    compiled_pass2 = enigma.compile(reduce_final)
    rt = enigma.MetalRuntime(device=args.device)

    a = np.random.default_rng(1).standard_normal(n).astype(np.float32)

    # Pass 1: one partial sum per threadgroup of 256 threads.
    partial_raw = rt.execute(
        compiled_pass1,
        inputs=[a],
        output_size=n_threadgroups * 4,
        grid=(n, 1, 1),
        threads=(threads_per_tg, 1, 1),
    )
    partial = np.frombuffer(partial_raw, dtype=np.float32).copy()

    # Pass 2: one threadgroup of 1024 threads (the maximum) adds them all.
    result_raw = rt.execute(
        compiled_pass2,
        inputs=[partial, n_threadgroups],
        output_size=4,
        grid=(1024, 1, 1),
        threads=(1024, 1, 1),
    )
    result = float(np.frombuffer(result_raw, dtype=np.float32)[0])

    expected = float(a.astype(np.float64).sum())
    err = abs(result - expected)
    # float32 tree sums: at most about log2(n) roundings of eps each, relative to sum |a|.
    tol = 2.0**-24 * max(np.log2(n), 1) * float(np.abs(a).astype(np.float64).sum())
    print(f"device: {rt.device} ({rt.device_name})")
    print(f"{rt.device}: {result:.4f}  numpy (float64): {expected:.4f}  err: {err:.4f}")
    if err <= tol:
        print(f"matches numpy (|err| <= {tol:.4f})")
        return 0
    print(f"MISMATCH: |err| > {tol:.4f}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
