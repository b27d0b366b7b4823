"""Where the tensor-core GEMM's time goes on this GPU: enigma's library
GEMM (the ``gemm_cuda`` binary) beside ``torch.matmul`` (cuBLAS) and the
reference kernels of ``gemm_floor.cu``, all on the same f16 shapes in one
run:

* ``floor_copy_*`` move each threadgroup tile's slices from global to
  threadgroup memory exactly as the GEMM does (16-byte asynchronous copies
  into padded stages, a barrier per slice) and multiply nothing: the time
  the L2-to-SM traffic alone takes, a floor for any kernel with that tile;
* ``floor_hand_*`` are the whole pipeline written by hand on enigma's tile
  helpers: what the tile reaches without the code generator.

The helpers come from the CUDA source ``enigma emit`` prints for a library
GEMM (everything before its kernel), compiled here with CuPy/NVRTC.
Device times from CUDA events, median of 20 after a warm-up; results are
checked against ``torch.matmul`` in f32.

Usage::

    python3 bench/gemm_floor.py path/to/enigma path/to/gemm_cuda [MxNxK ...]
"""

import json
import os
import re
import subprocess
import sys

import cupy as cp
import numpy as np
import torch

from cuda_timing import median_seconds

HERE = os.path.dirname(os.path.abspath(__file__))


def prelude(enigma):
    """enigma's CUDA helpers: the source of a library GEMM up to its kernel."""
    src = subprocess.run([enigma, "emit", "--target", "cuda", "gemm_f16_f32_128x128x32_sg2x2"], check=True, capture_output=True, text=True).stdout
    return src[: src.index('extern "C" __global__')]


def main():
    enigma, gemm_cuda = sys.argv[1], sys.argv[2]
    shapes = [tuple(int(x) for x in s.split("x")) for s in sys.argv[3:]] or [(4096, 4096, 4096)]
    src = prelude(enigma) + open(os.path.join(HERE, "gemm_floor.cu")).read()
    module = cp.RawModule(code=src, options=("--std=c++17", "-arch=sm_90"))
    names = re.findall(r"^FLOOR\((\w+),", src, re.M)
    for m, n, k in shapes:
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        want = a.float() @ b.float()
        c = torch.zeros(m, n, device="cuda", dtype=torch.float32)
        flops = 2 * m * n * k
        cublas = median_seconds(lambda: torch.matmul(a, b))
        rows = [("torch.matmul (cuBLAS)", cublas, "")]
        for name in names:
            tm, tn, tk = (int(x) for x in name.split("_")[2].split("x"))
            stages = int(name.split("_s")[-1])
            if m % tm or n % tn or k % tk:
                continue
            fn = module.get_function(name)
            smem = stages * (tm * (tk + 8) + tk * (tn + 8)) * 2
            fn.max_dynamic_shared_size_bytes = smem
            args = (a.data_ptr(), b.data_ptr(), c.data_ptr(), np.uint32(m), np.uint32(n), np.uint32(k))
            threads = 32 * (tm // 64) * (tn // 64)
            launch = lambda: fn((n // tn, m // tm, 1), (threads, 1, 1), args, shared_mem=smem)
            c.zero_()
            launch()
            torch.cuda.synchronize()
            note = f"{fn.num_regs} registers"
            if "copy" not in name:
                err = (c - want).abs().max().item()
                note += f", max error {err:.2g}" + ("" if err < 1e-2 * want.abs().max().item() else " WRONG")
            else:
                note += f", {(m * k * (n // tn) + k * n * (m // tm)) * 2 / 1e9:.2f} GB from L2"
            rows.append((name, median_seconds(launch), note))
        out = subprocess.run(
            [gemm_cuda, "--dtypes", "f16", "--shapes", f"{m}x{n}x{k}", "--tiles", "128x256x32/2x4", "--stages", "4", "--whole", "1", "--repeats", "20"],
            check=True, capture_output=True, text=True,
        ).stdout
        for row in json.loads(out)["rows"]:
            if "median_us" in row:
                rows.append((row["kernel"], row["median_us"] / 1e6, f"{row['sampled_failures']} of 512 sampled off"))
        print(f"\nf16 {m}x{n}x{k}")
        for name, t, note in rows:
            print(f"  {name:60s} {t * 1e6:9.1f} us {flops / t / 1e12:7.1f} TFLOP/s {cublas / t * 100:6.1f} % of cuBLAS  {note}")


if __name__ == "__main__":
    main()
