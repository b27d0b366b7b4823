"""What the Python benchmark drivers share: the CUDA-event timing every torch
and Triton figure in BENCHMARKS.md is taken with."""

import torch


# GPU clock cycles the device spins in front of a held timing: a few hundred
# microseconds, far more than one call takes to queue.
HOLD_CYCLES = 500_000


def median_seconds(fn, reps=20, warmup=5, copies=None, held=False):
    """Median CUDA-event time of ``fn()`` over ``reps`` runs after
    ``warmup`` untimed ones; with ``copies``, run ``i`` calls
    ``fn(copies[i % len(copies)])`` (to read inputs from DRAM, not L2).

    Plain, the GPU is idle when the start event is recorded, so the time
    includes the host's launch latency (the GPU waits for the launch). With
    ``held``, the GPU first spins (``torch.cuda._sleep``) while the host
    queues the start event, the call and the end event: the time is then
    the device's own, as ``Runtime::begin_held_batch`` takes enigma's."""
    run = (lambda i: fn()) if copies is None else (lambda i: fn(copies[i % len(copies)]))
    for i in range(warmup):
        run(i)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if held:
            torch.cuda._sleep(HOLD_CYCLES)
        start.record()
        run(i)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]
