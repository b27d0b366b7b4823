"""Cooperative tensor products on CUDA beside a raw ``wgmma`` loop and
torch's matmul, in the same run.

The ``coop_cuda`` binary (kernels written in enigma's IR) times
``matmul2d(128, 256, 64)`` products on register-resident accumulators
(two warpgroups per threadgroup, operands in threadgroup memory, 264
threadgroups) and GEMMs on them (4096³ in one stage; 4096³ and 8192³ in
three). This script times the same products
issued by a hand-written loop (compiled here with CuPy/NVRTC for sm_90a:
per iteration ``wgmma.fence``, four ``wgmma.mma_async m64n256k16`` per
warpgroup, ``commit_group``, ``wait_group 0``), ``torch.matmul`` (cuBLAS) and the plain Triton ``tl.dot``
kernel of ``gemm_vs_torch.py`` at the GEMMs' sizes. Times are CUDA-event device times, medians of 10 after warm-ups.

Usage::

    python3 bench/coop_throughput.py path/to/coop_cuda [iters]
"""

import json
import subprocess
import sys

import cupy as cp

REGS = 128
LIST = ", ".join(f"%{i}" for i in range(REGS))
OUTS = ", ".join(f'"+f"(d[{i}])' for i in range(REGS))
RAW = r"""
__device__ __forceinline__ unsigned long long desc(const void* p, unsigned lead, unsigned stride) {
    const unsigned a = unsigned(__cvta_generic_to_shared(p));
    return (unsigned long long)((a & 0x3FFFFu) >> 4) | ((unsigned long long)((lead >> 4) & 0x3FFFu) << 16)
        | ((unsigned long long)((stride >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}
extern "C" __global__ void raw_wgmma(float* out, unsigned iters) {
    __shared__ __align__(1024) unsigned short As[8192];
    __shared__ __align__(1024) unsigned short Bs[16384];
    for (unsigned i = threadIdx.x; i < 16384; i += 256) Bs[i] = 0x1400;
    for (unsigned i = threadIdx.x; i < 8192; i += 256) As[i] = 0x1400;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    float d[REGS];
    for (int i = 0; i < REGS; ++i) d[i] = 0.0f;
    const unsigned g = threadIdx.x / 128;
    for (unsigned it = 0; it < iters; ++it) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (unsigned kk = 0; kk < 64; kk += 16) {
            const unsigned long long a = desc(&As[g * 64 * 64 + kk], 16, 1024);
            const unsigned long long b = desc(&Bs[kk * 64], 8192, 1024);
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %SCALE, 0;\n"
                "wgmma.mma_async.sync.aligned.m64n256k16.f32.TYPE.TYPE LIST, %ADESC, %BDESC, p, 1, 1, 0, 1;\n}\n"
                : OUTS : "l"(a), "l"(b), "r"(1) : "memory");
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
    float s = 0.0f;
    for (int i = 0; i < REGS; ++i) s += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
""".replace("REGS", str(REGS)).replace("LIST", "{" + LIST + "}").replace("OUTS", OUTS) \
   .replace("%ADESC", f"%{REGS}").replace("%BDESC", f"%{REGS + 1}").replace("%SCALE", f"%{REGS + 2}")

BLOCKS, THREADS = 132 * 2, 256


def median_seconds(launch, repeats=10, warmup=3):
    for _ in range(warmup):
        launch()
    times = []
    for _ in range(repeats):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        launch()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def raw_tflops(ptx_type, iters):
    kernel = cp.RawKernel(RAW.replace("TYPE", ptx_type), "raw_wgmma", options=("--std=c++17", "--gpu-architecture=sm_90a"))
    out = cp.zeros(BLOCKS * THREADS, dtype=cp.float32)
    t = median_seconds(lambda: kernel((BLOCKS,), (THREADS,), (out, cp.uint32(iters))))
    return 2.0 * 128 * 256 * 64 * iters * BLOCKS / t / 1e12


def triton_tflops(dtype, n):
    """The plain Triton ``tl.dot`` kernel of ``gemm_vs_torch.py``, or None."""
    import torch
    from gemm_vs_torch import triton_matmul
    run = triton_matmul()
    if run is None:
        return None
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    c = torch.empty(n, n, device="cuda", dtype=torch.float32)
    t = median_seconds(lambda: run(a, b, c))
    return 2.0 * n ** 3 / t / 1e12


def torch_tflops(dtype, n):
    import torch
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return 2.0 * n ** 3 / times[len(times) // 2] / 1e12


def main():
    binary = sys.argv[1]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    out = subprocess.run([binary, str(iters)], check=True, capture_output=True, text=True)
    enigma = json.loads(out.stdout)
    if "skipped" in enigma:
        print("cooperative benchmark skipped:", enigma["skipped"])
        return
    print(f"device: {enigma['device']}; {enigma['threadgroups']} threadgroups of 256 threads, {iters} products of 128x256x64 each")
    import torch
    for elem in ("f16", "bf16"):
        raw = raw_tflops(elem, iters)
        rows = [r for r in enigma["rows"] if r["elem"] == elem]
        coop = next(r for r in rows if r["kind"] == "throughput")["tflops"]
        print(f"\n{elem}: raw wgmma loop {raw:7.1f} TFLOP/s; matmul2d {coop:7.1f} TFLOP/s ({coop / raw * 100:5.1f} % of raw)")
        dtype = torch.float16 if elem == "f16" else torch.bfloat16
        for r in rows:
            if r["kind"] == "throughput":
                continue
            ref = torch_tflops(dtype, r["n"])
            tri = triton_tflops(dtype, r["n"])
            us = lambda tf: 2.0 * r["n"] ** 3 / tf / 1e6  # noqa: E731
            stages = "3 stages" if r["kind"] == "gemm3" else "1 stage"
            line = (f"  GEMM {r['n']}^3 on matmul2d ({stages}): {r['seconds'] * 1e6:8.1f} us {r['tflops']:7.1f} TFLOP/s; "
                    f"cuBLAS {us(ref):8.1f} us {ref:7.1f} ({r['tflops'] / ref * 100:5.1f} % of it)")
            if tri:
                line += f"; Triton tl.dot {us(tri):8.1f} us {tri:7.1f}"
            print(line)


if __name__ == "__main__":
    main()
