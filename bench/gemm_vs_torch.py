"""enigma's library GEMM on CUDA beside ``torch.matmul`` (cuBLAS) and a plain
Triton ``tl.dot`` kernel, in the same run on the same GPU.

Runs the ``gemm_cuda`` binary (built where cargo is, carried here), which
checks and times enigma's GEMM per input type, shape and tile configuration
(CUDA-event device time, median), then times on the same shapes:

* ``torch.matmul`` of ``A [M, K]`` and ``B [K, N]`` in the input type (f32
  with TF32 off, so both sides do f32 arithmetic);
* a textbook Triton kernel (128×128×32 blocks, ``tl.dot`` with f32
  accumulation, 4 warps, 3 stages) for f16 and bf16.

Torch and Triton are timed with CUDA events, median of 20 after a warm-up.
Prints one table per input type: TFLOP/s and enigma's ratio to cuBLAS.

Usage::

    python3 bench/gemm_vs_torch.py path/to/gemm_cuda [gemm_cuda flags ...]
"""

import json
import subprocess
import sys

import torch

from cuda_timing import median_seconds

REPEATS = 20


DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def triton_matmul():
    """A plain Triton GEMM, or None where Triton is missing."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def kernel(a, b, c, m, n, k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m, pid_n = tl.program_id(1), tl.program_id(0)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, k, BK):
            x = tl.load(a + rm[:, None] * k + (k0 + rk)[None, :], mask=(rm[:, None] < m) & ((k0 + rk)[None, :] < k), other=0.0)
            y = tl.load(b + (k0 + rk)[:, None] * n + rn[None, :], mask=((k0 + rk)[:, None] < k) & (rn[None, :] < n), other=0.0)
            acc += tl.dot(x, y)
        tl.store(c + rm[:, None] * n + rn[None, :], acc, mask=(rm[:, None] < m) & (rn[None, :] < n))

    def run(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        grid = (triton.cdiv(n, 128), triton.cdiv(m, 128))
        kernel[grid](a, b, c, m, n, k, BM=128, BN=128, BK=32, num_warps=4, num_stages=3)

    return run


def main():
    binary, flags = sys.argv[1], sys.argv[2:]
    out = subprocess.run([binary, *flags], capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    out.check_returncode()
    enigma = json.loads(out.stdout)
    if "skipped" in enigma:
        print("GEMM benchmark skipped:", enigma["skipped"])
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    triton_run = triton_matmul()
    print(f"device: {enigma['device']} (torch {torch.__version__})")
    shapes = sorted({(r["dtype"], tuple(r["shape"])) for r in enigma["rows"]}, key=lambda s: (s[0], s[1]))
    for dtype, (m, n, k) in shapes:
        t = DTYPES[dtype]
        a = torch.randn(m, k, device="cuda", dtype=t)
        b = torch.randn(k, n, device="cuda", dtype=t)
        flops = 2.0 * m * n * k
        cublas = median_seconds(lambda: torch.matmul(a, b), reps=REPEATS, warmup=3)
        line = f"\n{dtype} {m}x{n}x{k}: torch.matmul {cublas * 1e6:9.1f} us {flops / cublas / 1e12:7.1f} TFLOP/s"
        if triton_run is not None and dtype != "f32":
            c = torch.empty(m, n, device="cuda", dtype=torch.float32)
            tri = median_seconds(lambda: triton_run(a, b, c), reps=REPEATS, warmup=3)
            line += f"; Triton tl.dot {tri * 1e6:9.1f} us {flops / tri / 1e12:7.1f} TFLOP/s"
        print(line)
        rows = [r for r in enigma["rows"] if r["dtype"] == dtype and tuple(r["shape"]) == (m, n, k)]
        for r in sorted(rows, key=lambda r: r.get("median_us", 1e30)):
            if "error" in r:
                print(f"  {r['kernel']:<40} error: {r['error']}")
                continue
            mark = " (default)" if r["default"] else ""
            ok = "" if r["sampled_failures"] == 0 else f"  {r['sampled_failures']} sampled elements WRONG"
            print(
                f"  {r['kernel'] + mark:<48} {r['median_us']:9.1f} us {r['tflops']:7.1f} TFLOP/s"
                f"  {r['tflops'] / (flops / cublas / 1e12) * 100:5.1f} % of cuBLAS{ok}"
            )


if __name__ == "__main__":
    main()
