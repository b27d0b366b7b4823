"""enigma on CUDA beside PyTorch, measured in the same run on the same GPU.

Runs the `cuda_bench` binary (built on a machine with cargo, carried here),
then times `torch.sum` on the same number of f32 elements and a tiny torch op
for host overhead, and prints a table with ratios. Usage:

    python3 bench/cuda_vs_torch.py path/to/cuda_bench [log2_n]
"""
import json
import subprocess
import sys
import time

import torch


def torch_sum_seconds(n: int) -> float:
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    for _ in range(5):
        x.sum()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(20):
        start.record()
        x.sum()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def torch_small_op_us() -> float:
    x = torch.zeros(32, device="cuda")
    for _ in range(100):
        x.add_(1.0)
    torch.cuda.synchronize()
    walls = []
    for _ in range(2000):
        t = time.perf_counter()
        x.add_(1.0)
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - t)
    walls.sort()
    return walls[len(walls) // 2] * 1e6


def main() -> None:
    binary = sys.argv[1]
    log2_n = int(sys.argv[2]) if len(sys.argv) > 2 else 28
    out = subprocess.run([binary, str(log2_n)], check=True, capture_output=True, text=True).stdout
    enigma = json.loads(out)
    if "skipped" in enigma:
        print("enigma CUDA benchmark skipped:", enigma["skipped"])
        return
    n = 1 << log2_n
    t_torch = torch_sum_seconds(n)
    bw_torch = n * 4 / t_torch / 1e12
    print(f"device: {enigma['device']} (torch {torch.__version__})")
    print(f"{'benchmark':<28}{'time':>12}{'TB/s':>8}{'% of torch':>12}{'rel err':>10}")
    print(f"{'torch.sum':<28}{t_torch * 1e6:>10.1f}us{bw_torch:>8.3f}{100.0:>11.1f}%{'':>10}")
    for row in enigma["rows"]:
        if "tb_per_s" in row:
            print(f"{row['name']:<28}{row['seconds'] * 1e6:>10.1f}us{row['tb_per_s']:>8.3f}"
                  f"{100 * row['tb_per_s'] / bw_torch:>11.1f}%{row['rel_error']:>10.1e}")
    small = next(r for r in enigma["rows"] if r["name"] == "small_dispatch")
    print(f"small dispatch: enigma wall {small['wall_us']:.1f} us (device {small['device_us']:.1f} us, "
          f"host overhead {small['host_overhead_us']:.1f} us); torch tiny op + sync {torch_small_op_us():.1f} us")


if __name__ == "__main__":
    main()
