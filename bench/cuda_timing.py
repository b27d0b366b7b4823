"""What the Python benchmark drivers share: the CUDA-event timing every torch
and Triton figure in BENCHMARKS.md is taken with."""

import torch


def median_seconds(fn, reps=20, warmup=5, copies=None):
    """Median CUDA-event time of ``fn()`` over ``reps`` runs after
    ``warmup`` untimed ones; with ``copies``, run ``i`` calls
    ``fn(copies[i % len(copies)])`` (to read inputs from DRAM, not L2)."""
    run = (lambda i: fn()) if copies is None else (lambda i: fn(copies[i % len(copies)]))
    for i in range(warmup):
        run(i)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(i)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]
