// Reference kernels for bench/qgemm_decode_probe.py: the quantized GEMM on
// cooperative tensors (`qgemm_cooperative`, INT4, computed transposed:
// Cᵀ = dequant(B)ᵀ · Aᵀ, 64 columns of C per warpgroup, 64-deep slices in
// STAGES stages, K split over the grid's z into an f32 workspace) by hand,
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
//          3: no decode: constant pairs (the copies and the product alone).
//   WHOLE  1: no bounds tests on the copies (M, N, K multiples of the tile).
//   PRODUCT 0: no wgmma: the decoded pairs are folded into one register that
//             the epilogue stores (the copies and the decode alone). With
//             DECODE 3 and PRODUCT 0 the loop is the copies and barriers.
//   OVERLAP 1: one product kept in flight across the next slice's decode
//             (two register sets of weights, alternating; the wait before
//             each slice leaves the newest product in flight, so the copies
//             run STAGES - 2 slices ahead into the stage two slices back).
//   CLUSTER_SUM 1: the CLUSTER_SPLITS K splits of a tile are one
//             thread-block cluster (along the grid's z) and sum their partial
//             tiles through distributed shared memory: each writes its
//             partial tile into its own shared memory, the cluster
//             synchronises, and each sums its share of the tile from all of
//             them and writes it to C in f16, in one dispatch (`c` is then C,
//             f16, not the f32 workspace).
//   PRODUCER 1: warp specialisation: one more warp (the last) issues every
//             copy, each stage completing on its own "full" barrier (the
//             copies' arrivals) and released on its own "empty" barrier
//             (one arrival per consumer warp after its product), so the
//             copies run as far ahead as the stages allow and the consumer
//             warpgroups never wait on a threadgroup barrier.
// The accumulator starts from the first product's scale-d = 0, not from
// zeroed registers: ptxas serialises every wgmma of a loop whose accumulator
// registers other instructions define (warning C7515).

// TN: 64 columns (one warpgroup) or, with fragment-ordered words only, 128
// (two warpgroups sharing each stage of A).
#ifndef TN
#define TN 64u
#endif
#define THREADS (2u * TN)
#ifndef PRODUCER
#define PRODUCER 0
#endif
#ifndef OVERLAP
#define OVERLAP 0
#endif
#ifndef CLUSTER_SUM
#define CLUSTER_SUM 0
#endif
#define CLUSTER_SPLITS 3u
#if CLUSTER_SUM
#include <cooperative_groups.h>
#define CLUSTER_DIMS __cluster_dims__(1, 1, CLUSTER_SPLITS)
#else
#define CLUSTER_DIMS
#endif
#define TK 64u

struct Problem {
    const __half* a;
    const uint* b;
    const __half* scales;
    uint m, n, k, m0, n0, first_slice, lid, group_shift, groups, words_k;
};

// Slice t's copies into stage `stage`: A's TM x 64 values, the slice's words
// and two rows of scales.
// COPIERS threads (index `me`) share the copies: the threadgroup's, or the
// producer warp's lanes.
template <uint COPIERS>
__device__ __forceinline__ void issue_copies(const Problem& x, __half* a_s, uint* w_s, __half* s_s, uint t, uint stage, uint me)
{
    const uint slice = x.first_slice + t, k0 = slice * TK;
#pragma unroll
    for (uint i = 0; i < (TM * 8u + COPIERS - 1u) / COPIERS; ++i) {
        const uint chunk = me + COPIERS * i;
        if (TM * 8u % COPIERS == 0u || chunk < TM * 8u) {
            const uint row = chunk / 8u, col = chunk % 8u * 8u;
            const bool ok = WHOLE || (x.m0 + row < x.m && k0 + col < x.k);
            enigma::async_copy<16>(&a_s[enigma::swizzle128<64u, STAGES * TM>(stage * TM * 64u + row * 64u + col)], &x.a[enigma::select(0u, (x.m0 + row) * x.k + k0 + col, ok)], x.a, ok);
        }
    }
#if DECODE == 2
    {
        // The threadgroup's TN / 16 units of 64 x 16 of this slice, in a row.
#pragma unroll
        for (uint i = 0; i < THREADS / COPIERS; ++i) {
            const uint c = me + COPIERS * i;
            const bool ok = WHOLE || (slice < x.words_k / 8u && x.n0 + c / 32u * 16u < x.n);
            enigma::async_copy<16>(&w_s[stage * 8u * TN + 4u * c], &x.b[enigma::select(0u, slice * (x.n * 8u) + x.n0 / 16u * 128u + 4u * c, ok)], x.b, ok);
        }
    }
#else
    {
        const uint row = me / 16u, col = me % 16u * 4u, w0 = slice * 8u;
        const bool ok = WHOLE || (w0 + row < x.words_k && x.n0 + col < x.n);
        enigma::async_copy<16>(&w_s[stage * 512u + row * 64u + col], &x.b[enigma::select(0u, (w0 + row) * x.n + x.n0 + col, ok)], x.b, ok);
    }
#endif
    for (uint c = me; c < TN / 4u; c += COPIERS) {
        const uint row = c / (TN / 8u), col = c % (TN / 8u) * 8u, g0 = k0 >> x.group_shift;
        const bool ok = g0 + row < x.groups && (WHOLE || x.n0 + col < x.n);
        enigma::async_copy<16>(&s_s[stage * 2u * TN + row * TN + col], &x.scales[enigma::select(0u, (g0 + row) * x.n + x.n0 + col, ok)], x.scales, ok);
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
    const uint4 w4 = *reinterpret_cast<const uint4*>(&w_s[stage * 8u * TN + 4u * x.lid]);
    const uint words[4] = {w4.x, w4.y, w4.z, w4.w};
    __half2 scale[2];
#pragma unroll
    for (uint half = 0; half < 2u; ++half) scale[half] = __half2half2(s_s[stage * 2u * TN + 16u * warp + lane / 4u + 8u * half]);
#pragma unroll
    for (uint q = 0; q < 16u; ++q) {
        // Step q / 4; nibbles i and i + 4 of its word are the pair.
        const uint i = (q / 2u) % 2u + 2u * (q % 2u);
        pairs[q] = int4_pair(enigma::and_or(words[q / 4u] >> (4u * i), 0x000F000Fu, 0x64006400u), scale[q % 2u]);
    }
#elif DECODE == 3
#pragma unroll
    for (uint q = 0; q < 16u; ++q) pairs[q] = 0x3C003C00u;
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
#if PRODUCT == 0
    unsigned sink = __float_as_uint(acc[0]);
#pragma unroll
    for (uint q = 0u; q < 16u; ++q) sink ^= pairs[q];
    acc[0] = __uint_as_float(sink);
    return;
#endif
    enigma::async_proxy_fence();
    enigma::wgmma_fence();
#pragma unroll
    for (uint kk = 0u; kk < 64u; kk += 16u) {
        const unsigned long long desc = enigma::wgmma_desc(&a_s[enigma::swizzle128<64u, STAGES * TM>(stage * TM * 64u + kk)], 16u, 1024u);
        ISSUE(acc, &pairs[kk / 4u], desc, first && kk == 0u ? 0u : 1u);
    }
    enigma::wgmma_commit();
}

// The producer's barriers (the prelude of a kernel without tile copies has no
// barrier helpers).
__device__ __forceinline__ unsigned probe_shared(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void probe_wait(unsigned long long* bar, unsigned parity)
{
    unsigned done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(probe_shared(bar)), "r"(parity) : "memory");
    } while (!done);
}

// At most 128 registers a thread: two threadgroups of two warpgroups (or four
// of one) a compute unit, as the library's kernels are sized.
extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(THREADS + 32u * PRODUCER, 512u / THREADS) qgemm_probe(const __half* a, const uint* b, float* c, uint m, uint n, uint k, uint group, const __half* scales, uint splits)
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
#if PRODUCT == 0
    acc[0] = 0.0f;
#endif
    unsigned pairs[16];
#if PRODUCER
    // full[s]: the producer's 32 lanes, each arriving when its copies into
    // stage s have landed; empty[s]: one arrival per consumer warp once its
    // product has read stage s.
    __shared__ __align__(8) unsigned long long full[STAGES], empty[STAGES];
    if (threadIdx.x == 0u) {
        for (uint i = 0; i < STAGES; ++i) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 32;\n" :: "r"(probe_shared(&full[i])) : "memory");
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(probe_shared(&empty[i])), "r"(THREADS / 32u) : "memory");
        }
    }
    __syncthreads();
    if (threadIdx.x >= THREADS) {
        const uint lane = threadIdx.x - THREADS;
        for (uint t = 0; t < slices; ++t) {
            const uint stage = t % STAGES;
            probe_wait(&empty[stage], ((t / STAGES) & 1u) ^ 1u);
            issue_copies<32u>(x, a_s, w_s, s_s, t, stage, lane);
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(probe_shared(&full[stage])) : "memory");
        }
        enigma::async_wait<0>();
        return;
    }
    for (uint slice = 0; slice < slices; ++slice) {
        const uint stage = slice % STAGES;
        probe_wait(&full[stage], (slice / STAGES) & 1u);
        enigma::async_proxy_fence();
        decode(x, w_s, s_s, stage, pairs);
        product(acc, pairs, a_s, stage, slice == 0u);
        enigma::wgmma_wait();
        __syncwarp();
        if (x.lid % 32u == 0u) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(probe_shared(&empty[stage])) : "memory");
    }
#else
    // With a product kept in flight the copies run one slice less ahead,
    // into the stage two slices back.
    constexpr uint ahead = STAGES - 1u - OVERLAP;
    for (uint t = 0; t < ahead; ++t) {
        if (t < slices) issue_copies<THREADS>(x, a_s, w_s, s_s, t, t, x.lid);
        enigma::async_commit();
    }
    // Slice `slice` into `set`: its copies landed, every product done (with
    // OVERLAP every product but the newest), so the stage the copies below
    // fill is free.
    const auto run_slice = [&](uint slice, unsigned* set) {
        enigma::async_wait<ahead - 1u>();
#if OVERLAP
        enigma::wgmma_wait_all_but_last();
#else
        enigma::wgmma_wait();
#endif
        enigma::async_proxy_fence();
        __syncthreads();
        const uint stage = slice % STAGES, next = slice + ahead;
        if (next < slices) issue_copies<THREADS>(x, a_s, w_s, s_s, next, next % STAGES, x.lid);
        enigma::async_commit();
        decode(x, w_s, s_s, stage, set);
        product(acc, set, a_s, stage, slice == 0u);
    };
#if OVERLAP
    // Two register sets of weights, alternating.
    unsigned other[16];
    uint slice = 0;
    for (; slice + 1u < slices; slice += 2u) {
        run_slice(slice, pairs);
        run_slice(slice + 1u, other);
    }
    if (slice < slices) run_slice(slice, pairs);
#else
    for (uint slice = 0; slice < slices; ++slice) run_slice(slice, pairs);
#endif
    enigma::async_wait<0>();
#endif
    enigma::wgmma_wait();
#pragma unroll
    for (int i = 0; i < TM / 2; ++i) asm volatile("" : "+f"(acc[i]) :: "memory");
#if CLUSTER_SUM
    // This split's partial tile, [TM][TN] f32, into its own shared memory
    // (the stages are free: every copy landed, every product waited).
    float* part = reinterpret_cast<float*>(smem);
    __syncthreads();
#pragma unroll
    for (uint s = 0; s < TM / 2; ++s) part[enigma::wgmma_col<TM>(x.lid, s) * TN + enigma::wgmma_row<1u, TM>(x.lid, s)] = slices == 0u ? 0.0f : acc[s];
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    cluster.sync();
    const float4* parts[CLUSTER_SPLITS];
#pragma unroll
    for (uint r = 0; r < CLUSTER_SPLITS; ++r) parts[r] = reinterpret_cast<const float4*>(cluster.map_shared_rank(part, r));
    // Split `rank` sums its share of the tile's quads, in split order.
    constexpr uint QUADS = TM * TN / 4u, PER = (QUADS + CLUSTER_SPLITS - 1u) / CLUSTER_SPLITS;
    const uint rank = cluster.block_rank(), end = min(QUADS, (rank + 1u) * PER);
    __half* out = reinterpret_cast<__half*>(c);
    for (uint q = rank * PER + x.lid; q < end; q += THREADS) {
        float4 sum = parts[0][q];
#pragma unroll
        for (uint r = 1; r < CLUSTER_SPLITS; ++r) {
            const float4 p = parts[r][q];
            sum.x += p.x;
            sum.y += p.y;
            sum.z += p.z;
            sum.w += p.w;
        }
        const uint crow = x.m0 + q * 4u / TN, ccol = x.n0 + q * 4u % TN;
        if (crow < m && ccol < n) {
            const __half2 lo = __floats2half2_rn(sum.x, sum.y), hi = __floats2half2_rn(sum.z, sum.w);
            uint2 both;
            both.x = *reinterpret_cast<const unsigned*>(&lo);
            both.y = *reinterpret_cast<const unsigned*>(&hi);
            *reinterpret_cast<uint2*>(&out[crow * n + ccol]) = both;
        }
    }
    // No split leaves while another still reads its shared memory.
    cluster.sync();
#else
    const uint base = split * m * n;
#pragma unroll
    for (uint s = 0; s < TM / 2; ++s) {
        const uint crow = x.m0 + enigma::wgmma_col<TM>(x.lid, s), ccol = x.n0 + enigma::wgmma_row<1u, TM>(x.lid, s);
        if (crow < m && ccol < n) c[base + crow * n + ccol] = slices == 0u ? 0.0f : acc[s];
    }
#endif
}
