"""The cost of enigma's SIMD-group matrix abstraction on CUDA: multiply-
accumulate throughput of register-resident tiles (the ``matrix_cuda``
binary, kernels written in enigma's IR) beside the raw ``mma.sync``
m16n8k16 ceiling measured in the same run by a hand-written PTX loop
(compiled here with CuPy/NVRTC: 4 warps per block, 1056 blocks, 32
independent f32 accumulator fragments per warp, f16 and bf16 inputs).

Times are CUDA-event device times, median of 10 after a warm-up.

Usage::

    python3 bench/matrix_throughput.py path/to/matrix_cuda [iters]
"""

import json
import subprocess
import sys

import cupy as cp

RAW = r"""
extern "C" __global__ void raw_mma(float* out, unsigned iters, unsigned seed) {
    unsigned a[4], b[2];
    for (int i = 0; i < 4; ++i) a[i] = seed * (i + 1);
    for (int i = 0; i < 2; ++i) b[i] = seed * (i + 7);
    float c[32][4] = {};
    for (unsigned it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.TYPE.TYPE.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        }
    }
    float s = 0.0f;
    for (int j = 0; j < 32; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""

BLOCKS, THREADS = 132 * 8, 128


def raw_tflops(ptx_type, iters):
    kernel = cp.RawKernel(RAW.replace("TYPE", ptx_type), "raw_mma", options=("--std=c++17",))
    out = cp.zeros(BLOCKS * THREADS, dtype=cp.float32)
    args = (out, cp.uint32(iters), cp.uint32(0x3C003C00))
    for _ in range(3):
        kernel((BLOCKS,), (THREADS,), args)
    times = []
    for _ in range(10):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        kernel((BLOCKS,), (THREADS,), args)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)
    times.sort()
    flops = 2.0 * 16 * 8 * 16 * 32 * iters * BLOCKS * THREADS / 32
    return flops / times[len(times) // 2] / 1e12


def main():
    binary = sys.argv[1]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    out = subprocess.run([binary, str(iters)], check=True, capture_output=True, text=True)
    enigma = json.loads(out.stdout)
    if "skipped" in enigma:
        print("matrix benchmark skipped:", enigma["skipped"])
        return
    print(f"device: {enigma['device']}; {enigma['threadgroups']} threadgroups of {enigma['threads']} threads, {iters} products each")
    for elem, ptx in (("f16", "f16"), ("bf16", "bf16")):
        ceiling = raw_tflops(ptx, iters // 4)
        print(f"\n{elem}: raw mma.sync m16n8k16 loop {ceiling:7.1f} TFLOP/s")
        for r in enigma["rows"]:
            if r["elem"] == elem:
                print(f"  enigma {r['rows']:>2}x{r['cols']:<2} tile (f32 accumulator) {r['tflops']:7.1f} TFLOP/s  {r['tflops'] / ceiling * 100:5.1f} % of raw")


if __name__ == "__main__":
    main()
