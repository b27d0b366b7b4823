// Reference kernels for bench/qgemm_decode_probe.py: the quantized GEMM on
// cooperative tensors (`qgemm_cooperative`, INT4, computed transposed:
// Cᵀ = dequant(B)ᵀ · Aᵀ, 64 columns of C per warpgroup, 64-deep slices, four
// stages, K split over the grid's z into an f32 workspace) written by hand,
// so that changes the code generator cannot make yet can be timed on the
// same loop. Not enigma's generated code: the yardstick it is measured
// against. The helpers (`enigma::async_copy`, `swizzle128`, `wgmma_desc`,
// `wgmma_row`/`wgmma_col`, ...) are the prelude of the CUDA source that
// `enigma emit --target cuda --cuda-arch sm_90a` prints; `ISSUE(acc, pairs,
// desc, scale_d)` (one wgmma m64nTMk16 with its left operand from four
// registers) and the sizes come from the script.
//
// Compile-time choices:
//   DECODE 0: each slot decoded alone in f32 from the [K/8][N] words (as the
//             library's kernel does), packed to f16 pairs before the product;
//          1: two K-adjacent weights per f16-pair operation from one byte of
//             a [K/8][N] word (byte_perm, a multiply, one LOP3, hsub2, hmul2);
//          2: the same from fragment-ordered words (QuantLayout::Fragments:
//             a thread's 8 weights of each 16-deep step in one word, its four
//             words one 16-byte load).
//   WHOLE  1: no bounds tests on the copies (M, N, K multiples of the tile).
// The accumulator starts from the first product's scale-d = 0, not from
// zeroed registers: ptxas serialises every wgmma of a loop whose accumulator
// registers other instructions define (warning C7515).

#define TN 64u
#define TK 64u

struct Problem {
    const __half* a;
    const uint* b;
    const __half* scales;
    uint m, n, k, m0, n0, first_slice, lid, group_shift, groups, words_k;
};

// Slice t's copies into stage `stage`: A's TM x 64 values, the slice's words
// and two rows of scales.
__device__ __forceinline__ void issue_copies(const Problem& x, __half* a_s, uint* w_s, __half* s_s, uint t, uint stage)
{
    const uint slice = x.first_slice + t, k0 = slice * TK;
#pragma unroll
    for (uint i = 0; i < (TM * 8u + 127u) / 128u; ++i) {
        const uint chunk = x.lid + 128u * i;
        if (TM * 8u >= 128u || chunk < TM * 8u) {
            const uint row = chunk / 8u, col = chunk % 8u * 8u;
            const bool ok = WHOLE || (x.m0 + row < x.m && k0 + col < x.k);
            enigma::async_copy<16>(&a_s[enigma::swizzle128<64u, STAGES * TM>(stage * TM * 64u + row * 64u + col)], &x.a[enigma::select(0u, (x.m0 + row) * x.k + k0 + col, ok)], x.a, ok);
        }
    }
#if DECODE == 2
    {
        // The threadgroup's four 64 x 16 units of this slice: 2 KB in a row.
        const bool ok = WHOLE || (slice < x.words_k / 8u && x.n0 + x.lid / 32u * 16u < x.n);
        enigma::async_copy<16>(&w_s[stage * 512u + 4u * x.lid], &x.b[enigma::select(0u, slice * (x.n * 8u) + x.n0 / 16u * 128u + 4u * x.lid, ok)], x.b, ok);
    }
#else
    {
        const uint row = x.lid / 16u, col = x.lid % 16u * 4u, w0 = slice * 8u;
        const bool ok = WHOLE || (w0 + row < x.words_k && x.n0 + col < x.n);
        enigma::async_copy<16>(&w_s[stage * 512u + row * 64u + col], &x.b[enigma::select(0u, (w0 + row) * x.n + x.n0 + col, ok)], x.b, ok);
    }
#endif
    if (x.lid < 16u) {
        const uint row = x.lid / 8u, col = x.lid % 8u * 8u, g0 = k0 >> x.group_shift;
        const bool ok = g0 + row < x.groups && (WHOLE || x.n0 + col < x.n);
        enigma::async_copy<16>(&s_s[stage * 128u + row * 64u + col], &x.scales[enigma::select(0u, (g0 + row) * x.n + x.n0 + col, ok)], x.scales, ok);
    }
}

// (1024 + nibble) - 1032 = nibble - 8 in each half, exactly; times the
// scale pair, rounded once.
__device__ __forceinline__ unsigned int4_pair(uint bits, __half2 scale)
{
    const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&bits), __half2half2(__ushort_as_half(0x6408)));
    const __half2 r = __hmul2(v, scale);
    return *reinterpret_cast<const unsigned*>(&r);
}

// This thread's 16 f16 pairs of the slice's 64 x 64 weights (rows N, columns
// K) in the wgmma accumulator layout, pair q = slots 2q and 2q + 1.
__device__ __forceinline__ void decode(const Problem& x, const uint* w_s, const __half* s_s, uint stage, unsigned* pairs)
{
    const uint lane = x.lid % 32u, warp = x.lid / 32u, finer = x.group_shift - 5u;
#if DECODE == 2
    const uint4 w4 = *reinterpret_cast<const uint4*>(&w_s[stage * 512u + 4u * x.lid]);
    const uint words[4] = {w4.x, w4.y, w4.z, w4.w};
    __half2 scale[2];
#pragma unroll
    for (uint half = 0; half < 2u; ++half) scale[half] = __half2half2(s_s[stage * 128u + 16u * warp + lane / 4u + 8u * half]);
#pragma unroll
    for (uint q = 0; q < 16u; ++q) {
        // Step q / 4; nibbles i and i + 4 of its word are the pair.
        const uint i = (q / 2u) % 2u + 2u * (q % 2u);
        pairs[q] = int4_pair(enigma::and_or(words[q / 4u] >> (4u * i), 0x000F000Fu, 0x64006400u), scale[q % 2u]);
    }
#elif DECODE == 1
    const uint select_byte = (lane % 4u) | 0x4440u;
#pragma unroll
    for (uint q = 0; q < 16u; ++q) {
        const uint word_row = q / 2u, row = 16u * warp + lane / 4u + 8u * (q % 2u);
        const uint w = w_s[stage * 512u + word_row * 64u + row];
        const __half s = s_s[stage * 128u + (((word_row * 8u) >> 5u) >> finer) * 64u + row];
        // Byte lane % 4 holds the pair: low nibble to bits 0..3, high to 16..19.
        const uint p = __byte_perm(w, 0u, select_byte) * 0x1001u;
        pairs[q] = int4_pair(enigma::and_or(p, 0x000F000Fu, 0x64006400u), __half2half2(s));
    }
#else
    float weights[32];
#pragma unroll
    for (uint j = 0u; j < 32u; j++) {
        const uint col = enigma::wgmma_col<64u>(x.lid, j), row = enigma::wgmma_row<1u, 64u>(x.lid, j);
        const uint word = w_s[stage * 512u + (col >> 3u) * 64u + row];
        const float scale = __half2float(s_s[stage * 128u + ((col >> 5u) >> finer) * 64u + row]);
        weights[j] = (__uint_as_float(enigma::and_or(word >> ((col & 7u) * 4u), 15u, 0x4B000000u)) - 8388616.0f) * scale;
    }
#pragma unroll
    for (uint q = 0u; q < 16u; ++q) {
        const __half2 h = __floats2half2_rn(weights[2u * q], weights[2u * q + 1u]);
        pairs[q] = *reinterpret_cast<const unsigned*>(&h);
    }
#endif
}

__device__ __forceinline__ void product(float* acc, const unsigned* pairs, const __half* a_s, uint stage, bool first)
{
    enigma::async_proxy_fence();
    enigma::wgmma_fence();
#pragma unroll
    for (uint kk = 0u; kk < 64u; kk += 16u) {
        const unsigned long long desc = enigma::wgmma_desc(&a_s[enigma::swizzle128<64u, STAGES * TM>(stage * TM * 64u + kk)], 16u, 1024u);
        ISSUE(acc, &pairs[kk / 4u], desc, first && kk == 0u ? 0u : 1u);
    }
    enigma::wgmma_commit();
}

extern "C" __global__ void __launch_bounds__(128) qgemm_probe(const __half* a, const uint* b, float* c, uint m, uint n, uint k, uint group, const __half* scales, uint splits)
{
    extern __shared__ __align__(1024) unsigned char smem[];
    __half* a_s = reinterpret_cast<__half*>(smem);
    uint* w_s = reinterpret_cast<uint*>(smem + STAGES * TM * TK * 2u);
    __half* s_s = reinterpret_cast<__half*>(smem + STAGES * TM * TK * 2u + STAGES * 8u * TN * 4u);
    Problem x;
    x.a = a;
    x.b = b;
    x.scales = scales;
    x.m = m;
    x.n = n;
    x.k = k;
    x.lid = threadIdx.x;
    x.n0 = blockIdx.x * TN;
    x.m0 = blockIdx.y * TM;
    const uint split = blockIdx.z;
    const uint chunk = (k + TK * splits - 1u) / (TK * splits) * TK;
    const uint k_begin = min(split * chunk, k), k_end = min(k_begin + chunk, k);
    x.first_slice = k_begin / TK;
    const uint slices = (k_end - k_begin + TK - 1u) / TK;
    x.group_shift = __ffs(group) - 1;
    x.groups = k >> x.group_shift;
    x.words_k = k / 8u;
    float acc[TM / 2];
#pragma unroll
    for (int i = 0; i < TM / 2; ++i) asm volatile("" : "=f"(acc[i]));
    unsigned pairs[16];
    const uint ahead = STAGES - 1u;
    for (uint t = 0; t < ahead; ++t) {
        if (t < slices) issue_copies(x, a_s, w_s, s_s, t, t);
        enigma::async_commit();
    }
    for (uint slice = 0; slice < slices; ++slice) {
        enigma::async_wait<STAGES - 2>();
        enigma::wgmma_wait();
        enigma::async_proxy_fence();
        __syncthreads();
        const uint stage = slice % STAGES, next = slice + ahead;
        if (next < slices) issue_copies(x, a_s, w_s, s_s, next, next % STAGES);
        enigma::async_commit();
        decode(x, w_s, s_s, stage, pairs);
        product(acc, pairs, a_s, stage, slice == 0u);
    }
    enigma::async_wait<0>();
    enigma::wgmma_wait();
#pragma unroll
    for (int i = 0; i < TM / 2; ++i) asm volatile("" : "+f"(acc[i]) :: "memory");
    const uint base = split * m * n;
#pragma unroll
    for (uint s = 0; s < TM / 2; ++s) {
        const uint crow = x.m0 + enigma::wgmma_col<TM>(x.lid, s), ccol = x.n0 + enigma::wgmma_row<1u, TM>(x.lid, s);
        if (crow < m && ccol < n) c[base + crow * n + ccol] = slices == 0u ? 0.0f : acc[s];
    }
}
