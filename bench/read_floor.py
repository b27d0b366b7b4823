"""How long a plain read of B bytes takes on this GPU, held: the floor under
every memory-bound kernel that must read those bytes once.

For each size, f32 arrays of B bytes in copies spanning 200 MB (one per
call in turn, so that each call reads DRAM, not the 50 MB L2) are summed by
``enigma.ops.sum`` (the library's whole-array sum) and by ``torch.sum``,
timed held (``median_seconds(held=True)``: the device's own time, launch on
the GPU included), median of 50 after 10 warm-ups. A sum of 1024 floats in
the same run gives the fixed cost of one small dispatch. The sizes are
those of the decode rows in BENCHMARKS.md: the INT4 weights and scales of
1×11008×4096 at group 128, the K/V cache of GQA 32/8 at 8,192 keys (D 128,
f16), the f16 GEMV's 11008×4096 matrix, and 1 GiB. Usage (the ``enigma``
wheel installed):

    python3 bench/read_floor.py
"""
import torch

import enigma.ops as ops
from cuda_timing import median_seconds

SIZES = [
    ("INT4 weights + scales, 1×11008×4096 g128", 11008 * 4096 // 2 + 11008 * 4096 // 128 * 2),
    ("K/V, GQA 32/8 × 8192 keys × 128, f16", 2 * 8 * 8192 * 128 * 2),
    ("f16 matrix 11008×4096 (GEMV)", 11008 * 4096 * 2),
    ("1 GiB", 1 << 30),
]
ROTATION_BYTES = 200 << 20


def held_us(fn, copies):
    return median_seconds(fn, reps=50, warmup=10, copies=copies, held=True) * 1e6


def main():
    print(f"device: {torch.cuda.get_device_name()}")
    small = torch.rand(1024, device="cuda")
    print(f"sum of 1024 floats: enigma {held_us(lambda: ops.sum(small), None):.2f} µs, "
          f"torch {held_us(lambda: torch.sum(small), None):.2f} µs (held)")
    print("| bytes read | MB | enigma sum µs | TB/s | torch.sum µs | TB/s | 80 % of enigma's bandwidth: µs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, nbytes in SIZES:
        n = nbytes // 4
        count = max(1, min(64, -(-ROTATION_BYTES // nbytes)))
        copies = [torch.rand(n, device="cuda") for _ in range(count)]
        for x in copies[:2]:
            want = x.double().sum().item()
            got = float(ops.sum(x))
            assert abs(got - want) <= 1e-5 * abs(want) + 1e-3, f"{name}: enigma sum {got}, want {want}"
        e = held_us(lambda x: ops.sum(x), copies)
        t = held_us(lambda x: torch.sum(x), copies)
        mb = n * 4 / 1e6
        print(f"| {name} | {mb:.1f} | {e:.2f} | {n * 4 / e / 1e6:.2f} | {t:.2f} | {n * 4 / t / 1e6:.2f} | {e / 0.8:.2f} |")
        del copies
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
