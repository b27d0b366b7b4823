"""Per-call overhead of enigma from Python on a GPU, beside torch, Triton and
CuPy in one run, and enigma.ops.softmax on a torch CUDA tensor beside its
kernel's device time.

1. A tiny kernel (y += a·x over 1,024 floats) called back to back from
   Python: wall time per call over many calls (one synchronisation at the
   end, so launches overlap as they do in model code), for
   * enigma's call form on torch CUDA tensors (torch's current stream),
   * the same on enigma.Array device arrays (legacy default stream),
   * MetalRuntime.execute on torch tensors,
   * torch (``y.add_(x, alpha=a)``), a Triton kernel, a CuPy RawKernel.
2. ``enigma.ops.softmax`` on a 4096×4096 float32 torch CUDA tensor: wall time
   per call (back to back, one synchronisation), the device time of
   enigma's kernels per call from the torch profiler (CUDA kernel events),
   and their ratio; torch.softmax beside it.

Missing Triton or CuPy drops their rows. Needs torch with CUDA, the enigma
wheel installed and libnvrtc on LD_LIBRARY_PATH. Usage:

    python3 bench/interop_overhead.py [--calls N] [--json]
"""
import argparse
import json
import time

import numpy as np
import torch

import enigma
import enigma.ops as ops

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

try:
    import cupy
except ImportError:
    cupy = None

N = 1024


@enigma.kernel
def axpy(X: enigma.f32, Y: enigma.f32, a: enigma.constant(enigma.f32), n: enigma.constant(enigma.u32)):
    i = enigma.thread_position_in_grid.x
    if i < n:
        Y[i] = Y[i] + a * X[i]


if triton is not None:
    @triton.jit
    def _axpy_triton(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, y + a * x, mask=mask)

CUPY_SOURCE = r"""
extern "C" __global__ void axpy(const float* x, float* y, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] + a * x[i];
}
"""


def per_call_us(fn, calls, warmup=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def tiny_kernel_rows(calls):
    rows = []
    x = torch.randn(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    c = enigma.compile(axpy)

    # Check once that every form computes y += 1·x before timing it.
    def check(name, run, read):
        y.zero_()
        run()
        torch.cuda.synchronize()
        got = read()
        if not torch.allclose(got, x):
            raise SystemExit(f"{name}: wrong result (max error {(got - x).abs().max().item()})")

    check("enigma call form", lambda: c(x, y, 1.0, N, grid=N, threads=256), lambda: y)
    rows.append(("enigma compiled(...) on torch tensors", per_call_us(lambda: c(x, y, 1.0, N, grid=N, threads=256), calls)))

    ex, ey = enigma.asarray(x.cpu().numpy(), device="cuda"), enigma.empty(N, "f32", device="cuda")
    ey_t = torch.from_dlpack(ey)
    check("enigma arrays", lambda: c(ex, ey, 1.0, N, grid=N, threads=256), lambda: ey_t)
    rows.append(("enigma compiled(...) on enigma.Array", per_call_us(lambda: c(ex, ey, 1.0, N, grid=N, threads=256), calls)))

    rt = enigma.MetalRuntime("cuda")
    rows.append(("enigma MetalRuntime.execute on torch tensors",
                 per_call_us(lambda: rt.execute(c, inputs=[x, y, 1.0, N], grid=N, threads=256), calls)))

    rows.append(("torch y.add_(x, alpha=a)", per_call_us(lambda: y.add_(x, alpha=1.0), calls)))

    if triton is not None:
        grid = (triton.cdiv(N, 256),)
        check("triton", lambda: _axpy_triton[grid](x, y, 1.0, N, BLOCK=256), lambda: y)
        rows.append(("Triton kernel", per_call_us(lambda: _axpy_triton[grid](x, y, 1.0, N, BLOCK=256), calls)))

    if cupy is not None:
        kernel = cupy.RawKernel(CUPY_SOURCE, "axpy")
        cx, cy = cupy.asarray(x), cupy.zeros(N, dtype=cupy.float32)
        one, n = np.float32(1.0), np.uint32(N)
        kernel(((N + 255) // 256,), (256,), (cx, cy, one, n))
        cupy.cuda.get_current_stream().synchronize()
        if not cupy.allclose(cy, cx):
            raise SystemExit("cupy: wrong result")
        rows.append(("CuPy RawKernel", per_call_us(lambda: kernel(((N + 255) // 256,), (256,), (cx, cy, one, n)), calls)))
    return rows


def softmax_rows(calls):
    x = torch.randn(4096, 4096, device="cuda")
    ref = torch.softmax(x, dim=1)
    got = ops.softmax(x)
    if not torch.allclose(got, ref, rtol=1e-5, atol=1e-6):
        raise SystemExit("enigma.ops.softmax: wrong result")
    wall = per_call_us(lambda: ops.softmax(x), calls, warmup=10)
    torch.cuda.synchronize()
    reps = 20
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            ops.softmax(x)
        torch.cuda.synchronize()
    # Device work per call: enigma's softmax kernels, and anything else (the zeroing of the fresh output).
    device = {k.key: k.self_device_time_total / reps for k in prof.key_averages() if k.self_device_time_total > 0}
    enigma_us = sum(us for name, us in device.items() if "softmax" in name)
    other = {name: us for name, us in device.items() if "softmax" not in name}
    torch_wall = per_call_us(lambda: torch.softmax(x, dim=1), calls, warmup=10)
    return {
        "enigma_ops_softmax_wall_us": wall,
        "enigma_softmax_kernel_device_us": enigma_us,
        "ratio_wall_to_device": wall / enigma_us if enigma_us else None,
        "other_device_work_per_call": other,
        "torch_softmax_wall_us": torch_wall,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if enigma.MetalRuntime("cuda").device != "cuda":
        raise SystemExit("enigma has no CUDA device")
    rows = tiny_kernel_rows(args.calls)
    soft = softmax_rows(max(args.calls // 10, 50))
    if args.json:
        print(json.dumps({"device": torch.cuda.get_device_name(), "tiny_kernel_us_per_call": dict(rows), "softmax_4096x4096": soft}, indent=2))
        return
    print(f"# {torch.cuda.get_device_name()}: tiny kernel (y += a·x, {N} floats), wall µs per call, {args.calls} calls back to back")
    for name, us in rows:
        print(f"{name:48s} {us:8.2f}")
    print("# enigma.ops.softmax on a 4096x4096 float32 torch CUDA tensor")
    for k, v in soft.items():
        print(f"{k:48s} {v if isinstance(v, dict) else f'{v:8.2f}'}")


if __name__ == "__main__":
    main()
