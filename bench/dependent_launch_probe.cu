// Programmatic dependent launch on one GPU, measured apart from enigma: a
// 10 µs kernel (a sum over 24 MB, ten copies rotated so it reads DRAM)
// followed by 0, 1 or 2 short kernels that read its output, each launch
// with or without the programmatic-stream-serialization attribute, on a
// stream of its own or the legacy stream, with or without an event recorded
// between the first two kernels. Every kernel starts with
// `griddepcontrol.wait`, as enigma's generated kernels do. The GPU is held
// by a one-thread kernel spinning on a host flag until the host has queued
// the start event, the kernels and the end event; the figure is the median
// of 50 CUDA-event times after 10 warm-ups. The CUDA backend's
// `queue_launch` quotes it.
//
//   nvcc -O3 -arch=sm_90a -o dependent_launch_probe bench/dependent_launch_probe.cu && ./dependent_launch_probe
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
__global__ void producer(const float4* __restrict__ in, float* __restrict__ ws, size_t n4) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    float s = 0.f;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) { float4 v = in[i]; s += v.x + v.y + v.z + v.w; }
    ws[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
__global__ void consumer(const float* __restrict__ ws, float* __restrict__ out, int n) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = ws[i] * 2.f + ws[(i + 7) % n];
}
__global__ void hold(volatile int* flag) { while (*flag == 0) {} }
int main() {
    const size_t bytes = 24u << 20; const int copies = 10;
    std::vector<float4*> ins(copies);
    for (auto& p : ins) { cudaMalloc(&p, bytes); cudaMemset(p, 0, bytes); }
    float *ws, *out; cudaMalloc(&ws, 132 * 4 * 256 * 4); cudaMalloc(&out, 132 * 4 * 256 * 4);
    int* flag; cudaHostAlloc(&flag, 4, cudaHostAllocMapped); int* dflag; cudaHostGetDevicePointer(&dflag, flag, 0);
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int legacy = 0; legacy < 2; ++legacy) for (int mid = 0; mid < 2; ++mid) for (int pdl = 0; pdl < 2; ++pdl) for (int kernels = 1; kernels <= 3; ++kernels) {
        cudaStream_t st = legacy ? (cudaStream_t)0 : s;
        std::vector<float> t;
        for (int r = 0; r < 60; ++r) {
            *flag = 0;
            hold<<<1, 1, 0, st>>>(dflag);
            cudaEventRecord(a, st);
            cudaLaunchAttribute attr[1]; attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; attr[0].val.programmaticStreamSerializationAllowed = 1;
            cudaLaunchConfig_t cp = {}; cp.gridDim = dim3(132 * 4); cp.blockDim = dim3(256); cp.stream = st; cp.attrs = attr; cp.numAttrs = pdl;
            cudaLaunchKernelEx(&cp, producer, (const float4*)ins[r % copies], ws, bytes / 16);
            if (mid) cudaEventRecord(b, st);
            for (int k = 1; k < kernels; ++k) {
                cudaLaunchConfig_t cc = {}; cc.gridDim = dim3(132 * 4); cc.blockDim = dim3(256); cc.stream = st; cc.attrs = attr; cc.numAttrs = pdl;
                cudaLaunchKernelEx(&cc, consumer, (const float*)ws, out, 132 * 4 * 256);
            }
            cudaEventRecord(b, st);
            *flag = 1;
            cudaEventSynchronize(b);
            float ms; cudaEventElapsedTime(&ms, a, b); if (r >= 10) t.push_back(ms * 1000);
        }
        std::sort(t.begin(), t.end());
        printf("legacy=%d event_between=%d pdl=%d kernels=%d median %.2f us\n", legacy, mid, pdl, kernels, t[t.size() / 2]);
    }
    printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
