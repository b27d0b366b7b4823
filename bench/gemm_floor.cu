// Reference kernels for bench/gemm_floor.py: what a tensor-core GEMM tile
// can reach on this GPU, written by hand on enigma's CUDA tile helpers (the
// prelude `enigma emit --target cuda` prints), for interior tiles only (M,
// N, K multiples of the tile). Not enigma's generated code: the yardstick
// it is measured against.
//
// floor_copy_*: the same asynchronous copies into the same padded stages
//   and the same barriers, no ldmatrix and no mma: the time the tile's
//   global-to-threadgroup traffic alone takes (the L2 floor).
// floor_hand_*: the whole pipeline, fragments double buffered, a slice's
//   copies, wait and barrier in one basic block with its last products.
using namespace enigma;

// The asynchronous copies, written out here (the helpers' prelude has them
// only where its kernel copies asynchronously).
__device__ __forceinline__ void floor_copy16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(unsigned(__cvta_generic_to_shared(dst))), "l"(src) : "memory");
}
__device__ __forceinline__ void floor_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void floor_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

template <int TM, int TN, int TK, int STAGES, bool COPY_ONLY>
__device__ __forceinline__ void floor_gemm(const __half* __restrict__ a, const __half* __restrict__ b, float* __restrict__ c, uint m, uint n, uint k) {
    constexpr int WN = TN / 64, THREADS = 32 * (TM / 64) * WN;
    constexpr int LDA = TK + 8, LDB = TN + 8, A_STAGE = TM * LDA, B_STAGE = TK * LDB, A_PER_ROW = TK / 8, B_PER_ROW = TN / 8, KSTEPS = TK / 16;
    constexpr int A_COPIES = TM * TK / 8 / THREADS, B_COPIES = TN * TK / 8 / THREADS;
    constexpr uint A_ROWS = THREADS / A_PER_ROW, B_ROWS = THREADS / B_PER_ROW;
    extern __shared__ __align__(16) unsigned char smem[];
    __half* as = reinterpret_cast<__half*>(smem);
    __half* bs = as + STAGES * A_STAGE;
    const uint lid = threadIdx.x, lane = lid % 32, sg = lid / 32;
    const uint m0 = blockIdx.y * TM, n0 = blockIdx.x * TN, sg_m = sg / WN * 64, sg_n = sg % WN * 64;
    const __half* ga = a + (size_t)(m0 + lid / A_PER_ROW) * k + (lid % A_PER_ROW) * 8;
    const __half* gb = b + (size_t)(lid / B_PER_ROW) * n + n0 + (lid % B_PER_ROW) * 8;
    const uint sa = (lid / A_PER_ROW) * LDA + (lid % A_PER_ROW) * 8, sb = (lid / B_PER_ROW) * LDB + (lid % B_PER_ROW) * 8;
    const size_t a_step = (size_t)A_ROWS * k, b_step = (size_t)B_ROWS * n;
    auto issue = [&](int stage) {
#pragma unroll
        for (int i = 0; i < A_COPIES; ++i) floor_copy16(as + stage * A_STAGE + sa + i * A_ROWS * LDA, ga + i * a_step);
#pragma unroll
        for (int i = 0; i < B_COPIES; ++i) floor_copy16(bs + stage * B_STAGE + sb + i * B_ROWS * LDB, gb + i * b_step);
        ga += TK;
        gb += (size_t)TK * n;
    };
    enigma_tile<float, 64, 64> acc = enigma_tile_fill<float, 64, 64>(0.0f, false, lane);
    const uint slices = k / TK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) issue(s);
        floor_commit();
    }
    int rs = 0, ws = STAGES - 1;
    const __half* a_frag = as + sg_m * LDA;
    const __half* b_frag = bs + sg_n;
    if (COPY_ONLY) {
        float sink = 0.0f;
        for (uint i = 0; i < slices; ++i) {
            floor_wait<STAGES - 2>();
            __syncthreads();
            sink += __half2float(a_frag[rs * A_STAGE + lane]) + __half2float(b_frag[rs * B_STAGE + lane]);
            __syncthreads();
            if (i + STAGES - 1 < slices) issue(ws);
            floor_commit();
            rs = rs == STAGES - 1 ? 0 : rs + 1;
            ws = ws == STAGES - 1 ? 0 : ws + 1;
        }
        acc.d[0].lo = sink;
    } else {
        floor_wait<STAGES - 2>();
        __syncthreads();
        enigma_tile<__half, 64, 16> fa[2];
        enigma_btile<__half, 16, 64> fb[2];
        fa[0] = enigma_tile_load<__half, 64, 16, true>(a_frag, LDA, false, lane);
        fb[0] = enigma_tile_load_b<__half, 16, 64, true>(b_frag, LDB, false, lane);
        for (uint i = 0; i < slices; ++i) {
#pragma unroll
            for (int j = 0; j < KSTEPS; ++j) {
                if (j + 1 < KSTEPS) {
                    fa[(j + 1) % 2] = enigma_tile_load<__half, 64, 16, true>(a_frag + rs * A_STAGE + (j + 1) * 16, LDA, false, lane);
                    fb[(j + 1) % 2] = enigma_tile_load_b<__half, 16, 64, true>(b_frag + rs * B_STAGE + (j + 1) * 16 * LDB, LDB, false, lane);
                } else {
                    if (i + STAGES - 1 < slices) issue(ws);
                    floor_commit();
                    ws = ws == STAGES - 1 ? 0 : ws + 1;
                    floor_wait<STAGES - 2>();
                    __syncthreads();
                    rs = rs == STAGES - 1 ? 0 : rs + 1;
                    fa[(j + 1) % 2] = enigma_tile_load<__half, 64, 16, true>(a_frag + rs * A_STAGE, LDA, false, lane);
                    fb[(j + 1) % 2] = enigma_tile_load_b<__half, 16, 64, true>(b_frag + rs * B_STAGE, LDB, false, lane);
                }
                acc = enigma_tile_mma(fa[j % 2], fb[j % 2], acc, lane);
            }
        }
    }
#pragma unroll
    for (int f = 0; f < 64; ++f) {
        const uint row = m0 + sg_m + enigma_tile_row<64, 64>(2 * f, lane), col = n0 + sg_n + enigma_tile_col<64, 64>(2 * f, lane);
        *reinterpret_cast<float2*>(c + (size_t)row * n + col) = make_float2(enigma_tile_element(acc, 2 * f), enigma_tile_element(acc, 2 * f + 1));
    }
}

// name, threads, TM, TN, TK, stages, copy only
#define FLOOR(name, threads, ...) \
    extern "C" __global__ void __launch_bounds__(threads) name(const __half* a, const __half* b, float* c, uint m, uint n, uint k) { floor_gemm<__VA_ARGS__>(a, b, c, m, n, k); }
FLOOR(floor_copy_128x128x32_s4, 128, 128, 128, 32, 4, true)
FLOOR(floor_copy_128x256x32_s4, 256, 128, 256, 32, 4, true)
FLOOR(floor_copy_128x256x64_s3, 256, 128, 256, 64, 3, true)
FLOOR(floor_hand_128x128x32_s4, 128, 128, 128, 32, 4, false)
FLOOR(floor_hand_128x256x32_s4, 256, 128, 256, 32, 4, false)
FLOOR(floor_hand_128x256x64_s3, 256, 128, 256, 64, 3, false)
