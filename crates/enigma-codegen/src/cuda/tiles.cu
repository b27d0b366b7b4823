// SIMD-group matrix tiles. A lane's share of an R×C tile is R·C/64 pairs of
// elements, one per 8×8 fragment (fragments numbered row-major): lane l holds
// row l / 4, columns 2·(l % 4) and 2·(l % 4) + 1 of each fragment. That is the
// tensor cores' own layout for accumulators and A operands (mma.sync
// m16n8k16), so on sm_80 and later a product of f16 or bf16 tiles is a run of
// mma.sync instructions with f32 accumulation, and 16-bit tiles in shared
// memory load with ldmatrix. A tile that only feeds the B side of products
// is held in mma.sync's B layout from its load on (enigma_btile); other B
// operands are transposed in registers by movmatrix. f32 tiles (and every tile before sm_80) multiply exactly: one
// fmaf per step in k order over operands gathered with warp shuffles.

// A lane's pair of elements. 16-bit pairs live packed in one 32-bit word,
// the operand register of ldmatrix, movmatrix and mma.sync, so the tensor-core
// path never splits and re-packs halves; other types keep two members.
template <typename T> struct alignas(2 * sizeof(T)) enigma_duo {
    T lo, hi;
};
template <> struct enigma_duo<__half> {
    unsigned bits;
};
template <> struct enigma_duo<__nv_bfloat16> {
    unsigned bits;
};

template <typename T> __device__ inline T enigma_duo_get(const enigma_duo<T>& d, int i) {
    return i ? d.hi : d.lo;
}
__device__ inline __half enigma_duo_get(const enigma_duo<__half>& d, int i) {
    return __ushort_as_half((unsigned short)(i ? d.bits >> 16 : d.bits & 0xffffu));
}
__device__ inline __nv_bfloat16 enigma_duo_get(const enigma_duo<__nv_bfloat16>& d, int i) {
    return __ushort_as_bfloat16((unsigned short)(i ? d.bits >> 16 : d.bits & 0xffffu));
}

template <typename T> __device__ inline enigma_duo<T> enigma_duo_make(T lo, T hi) {
    return enigma_duo<T>{lo, hi};
}
template <> __device__ inline enigma_duo<__half> enigma_duo_make(__half lo, __half hi) {
    return enigma_duo<__half>{unsigned(__half_as_ushort(lo)) | (unsigned(__half_as_ushort(hi)) << 16)};
}
template <> __device__ inline enigma_duo<__nv_bfloat16> enigma_duo_make(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return enigma_duo<__nv_bfloat16>{unsigned(__bfloat16_as_ushort(lo)) | (unsigned(__bfloat16_as_ushort(hi)) << 16)};
}

// The 32 bits of a pair of 16-bit elements, and back.
template <typename T> __device__ inline unsigned enigma_bits(const enigma_duo<T>& d) {
    return d.bits;
}
template <typename T> __device__ inline enigma_duo<T> enigma_duo_of(unsigned u) {
    return enigma_duo<T>{u};
}

template <typename T, int R, int C> struct enigma_tile {
    enigma_duo<T> d[R * C / 64];
};

// A 16-bit tile that only ever feeds the B side of products (the code
// generator proves it: every assignment is a load, every read the right
// operand of a multiply), held in the layout mma.sync takes B in: lane l
// holds column l / 4, rows 2·(l % 4) and 2·(l % 4) + 1 of each fragment.
// ldmatrix with the opposite transposition loads it as is, so its products
// need no movmatrix.
template <typename T, int R, int C> struct enigma_btile {
    enigma_duo<T> d[R * C / 64];
};

__device__ inline unsigned enigma_tile_at(int cols, unsigned i, unsigned lane, bool column) {
    unsigned fragment = i / 2, per_row = unsigned(cols) / 8;
    return column ? (fragment % per_row) * 8 + (lane % 4) * 2 + i % 2 : (fragment / per_row) * 8 + lane / 4;
}

// The lane holding element (r, c) of a tile, and its index in that lane's share.
__device__ inline unsigned enigma_tile_owner(unsigned r, unsigned c) {
    return (r % 8) * 4 + (c % 8) / 2;
}
__device__ inline unsigned enigma_tile_slot(int cols, unsigned r, unsigned c) {
    return ((r / 8) * (unsigned(cols) / 8) + c / 8) * 2 + c % 2;
}

template <int R, int C> __device__ inline unsigned enigma_tile_row(unsigned i, unsigned lane) { return enigma_tile_at(C, i, lane, false); }
template <int R, int C> __device__ inline unsigned enigma_tile_col(unsigned i, unsigned lane) { return enigma_tile_at(C, i, lane, true); }

template <typename T, int R, int C> __device__ inline T enigma_tile_element(const enigma_tile<T, R, C>& t, int i) {
    return enigma_duo_get(t.d[i / 2], i % 2);
}

template <typename T, int R, int C> __device__ inline enigma_tile<T, R, C> enigma_tile_fill(T x, bool diagonal, unsigned lane) {
    enigma_tile<T, R, C> t;
#pragma unroll
    for (int f = 0; f < R * C / 64; ++f) {
        unsigned row = enigma_tile_at(C, 2 * f, lane, false), col = enigma_tile_at(C, 2 * f, lane, true);
        t.d[f] = enigma_duo_make<T>(!diagonal || row == col ? x : T(0.0f), !diagonal || row == col + 1 ? x : T(0.0f));
    }
    return t;
}

// ldmatrix for a 16-bit tile in shared memory whose rows start on 16-byte
// boundaries (the address and the stride are the same on every lane, so the
// whole SIMD group takes the same branch); false where it does not apply.
// Fragment f's rows are 8 consecutive rows of memory, or with `transpose` 8
// consecutive rows read transposed (ldmatrix .trans); `b_layout` flips the
// instruction's transposition, which gives enigma_btile's layout.
// ALIGNED: the code generator proved the conditions (shared memory, 16-byte
// rows), so the run-time test and the fallback it guards are not emitted.
template <typename T, int R, int C, bool ALIGNED> __device__ inline bool enigma_tile_ldmatrix(enigma_duo<T> (&d)[R * C / 64], const T* p, unsigned stride, bool transpose, bool b_layout, unsigned lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    if constexpr (sizeof(T) != 2) {
        return false;
    } else {
    if (!ALIGNED && (!__isShared(p) || ((reinterpret_cast<size_t>(p) | (stride * 2u)) & 15u) != 0)) return false;
    constexpr int N = R * C / 64;
    auto row_address = [&](int f) {
        unsigned fr = unsigned(f) / (C / 8), fc = unsigned(f) % (C / 8), r = lane % 8;
        const T* row = transpose ? p + (fc * 8 + r) * stride + fr * 8 : p + (fr * 8 + r) * stride + fc * 8;
        return unsigned(__cvta_generic_to_shared(row));
    };
    // Four fragments per ldmatrix.x4, lane l giving a row of the (l / 8)-th.
    // With whole 2×2 blocks of fragments the four are one block in the
    // order an mma.sync A operand takes them ((r, c), (r + 1, c), (r, c + 1),
    // (r + 1, c + 1)), so the four registers feed it as loaded; otherwise
    // four consecutive fragments.
    constexpr bool blocks = (R / 8) % 2 == 0 && (C / 8) % 2 == 0;
    auto quad = [&](int g, int q) {
        if (!blocks) return 4 * g + q;
        int br = g / (C / 16), bc = g % (C / 16);
        return (2 * br + q % 2) * (C / 8) + 2 * bc + q / 2;
    };
    int f = 0;
#pragma unroll
    for (int g = 0; 4 * g + 4 <= N; ++g, f += 4) {
        unsigned a = row_address(quad(g, int(lane / 8))), x0, x1, x2, x3;
        if (transpose != b_layout) {
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3) : "r"(a));
        } else {
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3) : "r"(a));
        }
        d[quad(g, 0)] = enigma_duo_of<T>(x0), d[quad(g, 1)] = enigma_duo_of<T>(x1), d[quad(g, 2)] = enigma_duo_of<T>(x2), d[quad(g, 3)] = enigma_duo_of<T>(x3);
    }
#pragma unroll
    for (; f < N; ++f) {
        unsigned a = row_address(f), x0;
        if (transpose != b_layout) {
            asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(x0) : "r"(a));
        } else {
            asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(x0) : "r"(a));
        }
        d[f] = enigma_duo_of<T>(x0);
    }
    return true;
    }
#else
    return false;
#endif
}

// Element (r, c) of the tile is p[r * stride + c], or transposed p[c * stride + r].
template <typename T, int R, int C, bool ALIGNED = false, typename P> __device__ inline enigma_tile<T, R, C> enigma_tile_load(const P* p, unsigned stride, bool transpose, unsigned lane) {
    enigma_tile<T, R, C> t;
    if (enigma_tile_ldmatrix<T, R, C, ALIGNED>(t.d, p, stride, transpose, false, lane)) return t;
#pragma unroll
    for (int f = 0; f < R * C / 64; ++f) {
        unsigned r = enigma_tile_at(C, 2 * f, lane, false), c = enigma_tile_at(C, 2 * f, lane, true);
        t.d[f] = enigma_duo_make<T>(transpose ? T(p[c * stride + r]) : T(p[r * stride + c]), transpose ? T(p[(c + 1) * stride + r]) : T(p[r * stride + c + 1]));
    }
    return t;
}

// enigma_tile_load's tile in enigma_btile's layout.
template <typename T, int R, int C, bool ALIGNED = false, typename P> __device__ inline enigma_btile<T, R, C> enigma_tile_load_b(const P* p, unsigned stride, bool transpose, unsigned lane) {
    enigma_btile<T, R, C> t;
    if (enigma_tile_ldmatrix<T, R, C, ALIGNED>(t.d, p, stride, transpose, true, lane)) return t;
#pragma unroll
    for (int f = 0; f < R * C / 64; ++f) {
        unsigned r = (unsigned(f) / (C / 8)) * 8 + (lane % 4) * 2, c = (unsigned(f) % (C / 8)) * 8 + lane / 4;
        t.d[f] = enigma_duo_make<T>(transpose ? T(p[c * stride + r]) : T(p[r * stride + c]), transpose ? T(p[c * stride + r + 1]) : T(p[(r + 1) * stride + c]));
    }
    return t;
}

// 4-bit weights decoded on load (Expr::MatrixLoadQuantized): element (r, c)
// is the value of nibble enigma_q4_nibble of word enigma_q4_word (QuantLayout::
// locate: in seed 002's [K/8][N] layout nibble r % 8 of w[(r / 8) * stride + c];
// in MLX's [N][K/8] columns nibble r % 8 of w[c * stride + r / 8]) times s[c],
// rounded once to f16.
enum enigma_q4 { enigma_int4 = 0, enigma_fp4 = 1, enigma_uint4 = 2 };
enum enigma_q4_layout { enigma_q4_rows = 0, enigma_q4_fragments = 1, enigma_q4_columns = 2 };

template <enigma_q4_layout LAYOUT> __device__ inline unsigned enigma_q4_word(unsigned r, unsigned c, unsigned stride) {
    if (LAYOUT == enigma_q4_rows) return (r / 8) * stride + c;
    if (LAYOUT == enigma_q4_columns) return c * stride + r / 8;
    return (r / 64) * stride + (c / 16) * 128 + 4 * (4 * (c % 8) + (r % 8) / 2) + (r % 64) / 16;
}
template <enigma_q4_layout LAYOUT> __device__ inline unsigned enigma_q4_nibble(unsigned r, unsigned c) {
    if (LAYOUT != enigma_q4_fragments) return r % 8;
    return (r % 16) / 8 + 2 * ((c % 16) / 8) + 4 * (r % 2);
}

__device__ inline __half2 enigma_h2(unsigned u) {
    return *reinterpret_cast<const __half2*>(&u);
}

// The f16 pair (value of the low nibble, value of the high nibble) of byte
// `index` of q, unscaled. The byte goes to bytes 0 and 2 (one PRMT); INT4 and
// UINT4 then OR in the exponent of 1024 (the low nibble as the mantissa's low
// bits, the high one 16 times that) and one HFMA2 gives n - 8 (n) exactly; FP4
// looks the magnitudes' high bytes up in a PRMT table (low bytes are 0) and ORs
// the signs in.
template <enigma_q4 CODE> __device__ inline __half2 enigma_q4_pair(unsigned q, unsigned index) {
    const unsigned y = __byte_perm(q, 0u, 0x4040u | (index << 8) | index);
    if (CODE == enigma_int4) {
        // (1024 + lo, 1024 + 16 hi) · (1, 1/16) + (-1032, -72).
        return __hfma2(enigma_h2(enigma::and_or(y, 0x00F0000Fu, 0x64006400u)), enigma_h2(0x2C003C00u), enigma_h2(0xD480E408u));
    }
    if (CODE == enigma_uint4) {
        // (1024 + lo, 1024 + 16 hi) · (1, 1/16) + (-1024, -64).
        return __hfma2(enigma_h2(enigma::and_or(y, 0x00F0000Fu, 0x64006400u)), enigma_h2(0x2C003C00u), enigma_h2(0xD400E400u));
    }
    // E2M1 magnitudes 0, 0.5, 1, 1.5 | 2, 3, 4, 6: the f16 high bytes.
    const unsigned magnitude = __byte_perm(0x3E3C3800u, 0x46444240u, ((y << 4) | (y >> 8)) & 0x7070u);
    return enigma_h2(magnitude | ((y << 12) & 0x8000u) | ((y << 8) & 0x80000000u));
}

// The four f16 pairs of a fragment-ordered word, unscaled: pair j holds
// nibbles j and j + 4. INT4 and UINT4 mask each pair into the mantissas under
// the exponent of 1024 (pairs 1 and 3 sixteen times over) and one HSUB2 /
// HFMA2 gives n - 8 (n) exactly; FP4 moves each E2M1 code's magnitude bits to the low
// exponent and mantissa bits of an f16 and its sign to the sign bit, which is
// the value times 2^-14 (subnormal where e = 0), and scales by 2^14 exactly.
template <enigma_q4 CODE> __device__ inline void enigma_q4_quad(unsigned q, __half2 (&v)[4]) {
    if (CODE == enigma_int4 || CODE == enigma_uint4) {
        const unsigned hi = q >> 8;
        // 1032 = 0x6408 (1024 = 0x6400); 1/16 = 0x2C00; -72 = 0xD480 (-64 = 0xD400).
        const unsigned low = CODE == enigma_int4 ? 0x64086408u : 0x64006400u, high = CODE == enigma_int4 ? 0xD480D480u : 0xD400D400u;
        v[0] = __hsub2(enigma_h2(enigma::and_or(q, 0x000F000Fu, 0x64006400u)), enigma_h2(low));
        v[1] = __hfma2(enigma_h2(enigma::and_or(q, 0x00F000F0u, 0x64006400u)), enigma_h2(0x2C002C00u), enigma_h2(high));
        v[2] = __hsub2(enigma_h2(enigma::and_or(hi, 0x000F000Fu, 0x64006400u)), enigma_h2(low));
        v[3] = __hfma2(enigma_h2(enigma::and_or(hi, 0x00F000F0u, 0x64006400u)), enigma_h2(0x2C002C00u), enigma_h2(high));
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned y = q >> (4 * j);
            v[j] = __hmul2(enigma_h2(((y << 9) & 0x0E000E00u) | ((y << 12) & 0x80008000u)), enigma_h2(0x74007400u));
        }
    }
}

// B consecutive fragment-ordered words from at (B = 1, or 4: a lane's words
// of a unit, one 16-byte load where at is 16-byte aligned).
template <int B, typename W> __device__ inline void enigma_q4_words(const W* at, unsigned (&w)[B]) {
    if constexpr (B == 4) {
        if ((reinterpret_cast<size_t>(at) & 15u) == 0) {
            const uint4 v = *reinterpret_cast<const uint4*>(at);
            w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
            return;
        }
    }
#pragma unroll
    for (int q = 0; q < B; ++q) w[q] = at[q];
}

// In the reference layout: each element decoded on its own.
template <typename T, int R, int C, enigma_q4 CODE, enigma_q4_layout LAYOUT, typename W, typename S>
__device__ inline enigma_tile<T, R, C> enigma_tile_load_q(const W* w, unsigned stride, const S* s, unsigned lane) {
    enigma_tile<T, R, C> t;
#pragma unroll
    for (int f = 0; f < R * C / 64; ++f) {
        const unsigned r = enigma_tile_at(C, 2 * f, lane, false), c = enigma_tile_at(C, 2 * f, lane, true);
        __half pair[2];
#pragma unroll
        for (unsigned e = 0; e < 2; ++e) {
            const unsigned code = (w[enigma_q4_word<LAYOUT>(r, c + e, stride)] >> (4 * enigma_q4_nibble<LAYOUT>(r, c + e))) & 0xFu;
            pair[e] = __low2half(__hmul2(enigma_q4_pair<CODE>(code, 0), __half2half2(s[c + e])));
        }
        t.d[f] = enigma_duo_make<T>(pair[0], pair[1]);
    }
    return t;
}

// In enigma_btile's layout: a lane holds rows 2·(lane % 4) and 2·(lane % 4) + 1
// of column lane / 4 of each fragment. In seed 002's layout that is byte
// lane % 4 of one packed word per fragment, which the lane loads and decodes
// with a few instructions. In fragment order a lane's words for a unit (64
// rows × 16 columns) are four consecutive words, one 16-byte load where the
// tile's words and stride allow it (the same test on every lane), and each
// word decodes into the lane's pairs of four fragments (enigma_q4_quad).
template <typename T, int R, int C, enigma_q4 CODE, enigma_q4_layout LAYOUT, typename W, typename S>
__device__ inline enigma_btile<T, R, C> enigma_tile_load_qb(const W* w, unsigned stride, const S* s, unsigned lane) {
    enigma_btile<T, R, C> t;
    if constexpr (LAYOUT == enigma_q4_fragments) {
        const bool vectors = ((reinterpret_cast<size_t>(w) | size_t(stride) * 4u) & 15u) == 0;
#pragma unroll
        for (int uc = 0; uc < C / 16; ++uc) {
            const __half2 scale[2] = {__half2half2(s[uc * 16 + lane / 4]), __half2half2(s[uc * 16 + 8 + lane / 4])};
#pragma unroll
            for (int u = 0; u < R / 64; ++u) {
                const W* at = w + u * stride + uc * 128 + 4 * lane;
                unsigned words[4];
                if (vectors) {
                    const uint4 v = *reinterpret_cast<const uint4*>(at);
                    words[0] = v.x, words[1] = v.y, words[2] = v.z, words[3] = v.w;
                } else {
#pragma unroll
                    for (int q = 0; q < 4; ++q) words[q] = at[q];
                }
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    __half2 v[4];
                    enigma_q4_quad<CODE>(words[q], v);
                    // Pair h + 2·half: fragment row 8u + 2q + h, column 2·uc + half.
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const __half2 x = __hmul2(v[j], scale[j / 2]);
                        t.d[(u * 8 + 2 * q + j % 2) * (C / 8) + 2 * uc + j / 2] = enigma_duo_of<T>(*reinterpret_cast<const unsigned*>(&x));
                    }
                }
            }
        }
        return t;
    }
    const unsigned column = lane / 4, index = lane % 4;
    // Signed offsets from the lane's own column: the compiler folds each
    // fragment's constant part into the load's immediate.
    const W* words = w + column;
    const S* scales = s + column;
    const int row = int(stride);
#pragma unroll
    for (int j = 0; j < C / 8; ++j) {
        const __half2 scale = __half2half2(scales[j * 8]);
#pragma unroll
        for (int i = 0; i < R / 8; ++i) {
            const __half2 v = __hmul2(enigma_q4_pair<CODE>(words[i * row + j * 8], index), scale);
            t.d[i * (C / 8) + j] = enigma_duo_of<T>(*reinterpret_cast<const unsigned*>(&v));
        }
    }
    return t;
}

// The tile an enigma_btile holds, in the reference layout (warp shuffles).
template <typename T, int R, int C> __device__ inline enigma_tile<T, R, C> enigma_tile_of(const enigma_btile<T, R, C>& b, unsigned lane) {
    enigma_tile<T, R, C> t;
    const unsigned r = lane / 4, source = (lane % 4) * 8 + r / 2, shift = (r % 2) * 16;
#pragma unroll
    for (int f = 0; f < R * C / 64; ++f) {
        // Element (r, 2·(lane % 4) + h) sits in lane (2·(lane % 4) + h)·4 + r / 2.
        unsigned lo = __shfl_sync(0xffffffffu, enigma_bits(b.d[f]), source), hi = __shfl_sync(0xffffffffu, enigma_bits(b.d[f]), source + 4);
        t.d[f] = enigma_duo_of<T>(((lo >> shift) & 0xffffu) | (((hi >> shift) & 0xffffu) << 16));
    }
    return t;
}

// A lane's two elements of a fragment are neighbours in a row: where the
// memory holds the tile's own type and every row starts on a pair's
// boundary (the same test on every lane), each pair is one store.
template <typename T, int R, int C, typename P> __device__ inline void enigma_tile_store(const enigma_tile<T, R, C>& t, P* p, unsigned stride, bool transpose, unsigned lane) {
    if constexpr (sizeof(P) == sizeof(T)) {
        if (!transpose && ((reinterpret_cast<size_t>(p) | size_t(stride) * sizeof(T)) % sizeof(enigma_duo<T>)) == 0) {
#pragma unroll
            for (int f = 0; f < R * C / 64; ++f) {
                unsigned r = enigma_tile_at(C, 2 * f, lane, false), c = enigma_tile_at(C, 2 * f, lane, true);
                *reinterpret_cast<enigma_duo<T>*>(p + r * stride + c) = t.d[f];
            }
            return;
        }
    }
#pragma unroll
    for (int f = 0; f < R * C / 64; ++f) {
        unsigned r = enigma_tile_at(C, 2 * f, lane, false), c = enigma_tile_at(C, 2 * f, lane, true);
        p[transpose ? c * stride + r : r * stride + c] = enigma_duo_get(t.d[f], 0);
        p[transpose ? (c + 1) * stride + r : r * stride + c + 1] = enigma_duo_get(t.d[f], 1);
    }
}

// Element `slot` of lane `src`'s share: every lane shuffles each element
// index and keeps the one it asked for (the index differs from lane to lane).
template <typename T, int R, int C> __device__ inline float enigma_tile_fetch(const enigma_tile<T, R, C>& t, unsigned src, unsigned slot) {
    float got = 0.0f;
#pragma unroll
    for (int j = 0; j < R * C / 32; ++j) {
        float x = __shfl_sync(0xffffffffu, float(enigma_tile_element(t, j)), src);
        if (unsigned(j) == slot) got = x;
    }
    return got;
}

// The exact product: one fmaf per step in k order, as the simulator computes.
template <typename TA, int R, int K, int C, typename TC>
__device__ inline enigma_tile<TC, R, C> enigma_tile_mma_exact(const enigma_tile<TA, R, K>& a, const enigma_tile<TA, K, C>& b, const enigma_tile<TC, R, C>& acc, unsigned lane) {
    enigma_tile<TC, R, C> d;
#pragma unroll
    for (int f = 0; f < R * C / 64; ++f) {
        float sums[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            unsigned r = enigma_tile_at(C, 2 * f + h, lane, false), c = enigma_tile_at(C, 2 * f + h, lane, true);
            float sum = float(enigma_tile_element(acc, 2 * f + h));
            for (unsigned k = 0; k < unsigned(K); ++k) {
                float x = enigma_tile_fetch(a, enigma_tile_owner(r, k), enigma_tile_slot(K, r, k));
                float y = enigma_tile_fetch(b, enigma_tile_owner(k, c), enigma_tile_slot(C, k, c));
                sum = fmaf(x, y, sum);
            }
            sums[h] = sum;
        }
        d.d[f] = enigma_duo_make<TC>(TC(sums[0]), TC(sums[1]));
    }
    return d;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// One m16n8k16 (or, for an odd last K fragment, m16n8k8) step, f32 accumulators.
__device__ inline void enigma_mma_k16(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2], __half) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ inline void enigma_mma_k16(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2], __nv_bfloat16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ inline void enigma_mma_k8(float (&c)[4], const unsigned (&a)[2], unsigned b, __half) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(b));
}
__device__ inline void enigma_mma_k8(float (&c)[4], const unsigned (&a)[2], unsigned b, __nv_bfloat16) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(b));
}
__device__ inline unsigned enigma_movmatrix_trans(unsigned x) {
    unsigned y;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}

// The tensor-core product. Rows go in pairs of fragments (m16); an odd last
// row fragment runs with zero A rows whose results are dropped, its K steps
// outermost so that each step's A operand (the fragment beside zeros) is
// built once for every column block (column blocks outermost, the compiler
// rebuilt it for each: on an H100 the 8-row quantized decode kernel ran
// 4-6 % slower). `bt(kb, cb)` is B's fragment (kb, cb) in the layout
// mma.sync takes B in (enigma_btile's).
template <typename TA, int R, int K, int C, typename TC, typename BFragment>
__device__ inline enigma_tile<TC, R, C> enigma_tile_mma_frags(const enigma_tile<TA, R, K>& a, BFragment bt, const enigma_tile<TC, R, C>& acc) {
    constexpr int RB = R / 8, KB = K / 8, CB = C / 8;
    enigma_tile<TC, R, C> d;
#pragma unroll
    for (int rb = 0; rb < RB; rb += 2) {
        const bool pair = rb + 1 < RB;
        auto av = [&](int r, int kb) { return r < RB ? enigma_bits(a.d[r * KB + kb]) : 0u; };
        if (!pair) {
            float c[CB][4];
#pragma unroll
            for (int cb = 0; cb < CB; ++cb) {
                const enigma_duo<TC> top = acc.d[rb * CB + cb];
                c[cb][0] = float(enigma_duo_get(top, 0)), c[cb][1] = float(enigma_duo_get(top, 1)), c[cb][2] = 0.0f, c[cb][3] = 0.0f;
            }
#pragma unroll
            for (int kb = 0; kb + 1 < KB; kb += 2) {
                const unsigned av4[4] = {av(rb, kb), 0u, av(rb, kb + 1), 0u};
#pragma unroll
                for (int cb = 0; cb < CB; ++cb) {
                    const unsigned bv2[2] = {bt(kb, cb), bt(kb + 1, cb)};
                    enigma_mma_k16(c[cb], av4, bv2, TA());
                }
            }
            if (KB % 2) {
                const unsigned av2[2] = {av(rb, KB - 1), 0u};
#pragma unroll
                for (int cb = 0; cb < CB; ++cb) enigma_mma_k8(c[cb], av2, bt(KB - 1, cb), TA());
            }
#pragma unroll
            for (int cb = 0; cb < CB; ++cb) d.d[rb * CB + cb] = enigma_duo_make<TC>(TC(c[cb][0]), TC(c[cb][1]));
            continue;
        }
#pragma unroll
        for (int cb = 0; cb < CB; ++cb) {
            const enigma_duo<TC> top = acc.d[rb * CB + cb], bottom = pair ? acc.d[(rb + 1) * CB + cb] : enigma_duo_make<TC>(TC(0.0f), TC(0.0f));
            float c[4] = {float(enigma_duo_get(top, 0)), float(enigma_duo_get(top, 1)), float(enigma_duo_get(bottom, 0)), float(enigma_duo_get(bottom, 1))};
#pragma unroll
            for (int kb = 0; kb + 1 < KB; kb += 2) {
                const unsigned av4[4] = {av(rb, kb), av(rb + 1, kb), av(rb, kb + 1), av(rb + 1, kb + 1)};
                const unsigned bv2[2] = {bt(kb, cb), bt(kb + 1, cb)};
                enigma_mma_k16(c, av4, bv2, TA());
            }
            if (KB % 2) {
                const unsigned av2[2] = {av(rb, KB - 1), av(rb + 1, KB - 1)};
                enigma_mma_k8(c, av2, bt(KB - 1, cb), TA());
            }
            d.d[rb * CB + cb] = enigma_duo_make<TC>(TC(c[0]), TC(c[1]));
            if (pair) d.d[(rb + 1) * CB + cb] = enigma_duo_make<TC>(TC(c[2]), TC(c[3]));
        }
    }
    return d;
}

// A B tile in the reference layout: movmatrix transposes each fragment.
template <typename TA, int R, int K, int C, typename TC>
__device__ inline enigma_tile<TC, R, C> enigma_tile_mma_tc(const enigma_tile<TA, R, K>& a, const enigma_tile<TA, K, C>& b, const enigma_tile<TC, R, C>& acc) {
    constexpr int KB = K / 8, CB = C / 8;
    unsigned bt[KB][CB];
#pragma unroll
    for (int kb = 0; kb < KB; ++kb)
#pragma unroll
        for (int cb = 0; cb < CB; ++cb) bt[kb][cb] = enigma_movmatrix_trans(enigma_bits(b.d[kb * CB + cb]));
    return enigma_tile_mma_frags(a, [&](int kb, int cb) { return bt[kb][cb]; }, acc);
}

template <int R, int K, int C, typename TC>
__device__ inline enigma_tile<TC, R, C> enigma_tile_mma(const enigma_tile<__half, R, K>& a, const enigma_tile<__half, K, C>& b, const enigma_tile<TC, R, C>& acc, unsigned) {
    return enigma_tile_mma_tc(a, b, acc);
}
template <int R, int K, int C, typename TC>
__device__ inline enigma_tile<TC, R, C> enigma_tile_mma(const enigma_tile<__nv_bfloat16, R, K>& a, const enigma_tile<__nv_bfloat16, K, C>& b, const enigma_tile<TC, R, C>& acc, unsigned) {
    return enigma_tile_mma_tc(a, b, acc);
}
#endif

template <typename TA, int R, int K, int C, typename TC>
__device__ inline enigma_tile<TC, R, C> enigma_tile_mma(const enigma_tile<TA, R, K>& a, const enigma_tile<TA, K, C>& b, const enigma_tile<TC, R, C>& acc, unsigned lane) {
    return enigma_tile_mma_exact(a, b, acc, lane);
}

// A B tile in enigma_btile's layout: its fragments go to mma.sync as held.
template <typename TA, int R, int K, int C, typename TC>
__device__ inline enigma_tile<TC, R, C> enigma_tile_mma(const enigma_tile<TA, R, K>& a, const enigma_btile<TA, K, C>& b, const enigma_tile<TC, R, C>& acc, unsigned lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return enigma_tile_mma_frags(a, [&](int kb, int cb) { return enigma_bits(b.d[kb * (C / 8) + cb]); }, acc);
#else
    return enigma_tile_mma_exact(a, enigma_tile_of(b, lane), acc, lane);
#endif
}

template <typename T, int R, int K, int C, template <typename, int, int> class B>
__device__ inline enigma_tile<T, R, C> enigma_tile_mul(const enigma_tile<T, R, K>& a, const B<T, K, C>& b, unsigned lane) {
    return enigma_tile_mma(a, b, enigma_tile_fill<T, R, C>(T(0.0f), false, lane), lane);
}
