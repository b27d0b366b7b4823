// SIMD-group matrix tiles: an R×C tile is a grid of Metal's 8×8 fragments.
// Element i of a lane's share is element i % 2 of fragment i / 2 (fragments
// numbered row-major), at the row and column enigma_tile_at gives: Metal's
// thread_elements() map.
template <typename T, int R, int C> struct enigma_tile {
    simdgroup_matrix<T, 8, 8> f[R / 8][C / 8];
};

static inline uint enigma_tile_at(int cols, uint i, uint lane, bool column) {
    uint fragment = i / 2, per_row = uint(cols) / 8;
    uint row = (fragment / per_row) * 8 + (lane / 16) * 4 + (lane / 2) % 4;
    uint col = (fragment % per_row) * 8 + ((lane / 8) % 2) * 4 + (lane % 2) * 2 + i % 2;
    return column ? col : row;
}

template <int R, int C> static inline uint enigma_tile_row(uint i, uint lane) { return enigma_tile_at(C, i, lane, false); }
template <int R, int C> static inline uint enigma_tile_col(uint i, uint lane) { return enigma_tile_at(C, i, lane, true); }

template <typename T, int R, int C> static inline enigma_tile<T, R, C> enigma_tile_fill(T x, bool diagonal, uint lane) {
    enigma_tile<T, R, C> t;
    for (int i = 0; i < R / 8; ++i) {
        for (int j = 0; j < C / 8; ++j) {
            if (!diagonal) {
                t.f[i][j] = make_filled_simdgroup_matrix<T, 8, 8>(x);
            } else if (i == j) {
                t.f[i][j] = simdgroup_matrix<T, 8, 8>(x);
            } else {
                t.f[i][j] = make_filled_simdgroup_matrix<T, 8, 8>(T(0));
            }
        }
    }
    return t;
}

// Element (r, c) of the tile is p[r * stride + c], or transposed p[c * stride + r].
// ALIGNED (rows proven 16-byte aligned) matters to the CUDA helpers only.
template <typename T, int R, int C, bool ALIGNED = false, typename P> static inline enigma_tile<T, R, C> enigma_tile_load(P p, uint stride, bool transpose, uint lane) {
    enigma_tile<T, R, C> t;
    for (int i = 0; i < R / 8; ++i) {
        for (int j = 0; j < C / 8; ++j) {
            if (transpose) {
                simdgroup_load(t.f[i][j], p + (j * 8) * stride + i * 8, stride, ulong2(0, 0), true);
            } else {
                simdgroup_load(t.f[i][j], p + (i * 8) * stride + j * 8, stride);
            }
        }
    }
    return t;
}

// 4-bit weights decoded on load (Expr::MatrixLoadQuantized): element (r, c)
// is the value of nibble enigma_q4_nibble of word enigma_q4_word (QuantLayout::
// locate: in seed 002's [K/8][N] layout nibble r % 8 of w[(r / 8) * stride + c];
// in MLX's [N][K/8] columns nibble r % 8 of w[c * stride + r / 8]) times s[c],
// rounded once to the tile's type.
enum enigma_q4 { enigma_int4 = 0, enigma_fp4 = 1, enigma_uint4 = 2 };
enum enigma_q4_layout { enigma_q4_rows = 0, enigma_q4_fragments = 1, enigma_q4_columns = 2 };

template <enigma_q4_layout LAYOUT> static inline uint enigma_q4_word(uint r, uint c, uint stride) {
    if (LAYOUT == enigma_q4_rows) return (r / 8) * stride + c;
    if (LAYOUT == enigma_q4_columns) return c * stride + r / 8;
    return (r / 64) * stride + (c / 16) * 128 + 4 * (4 * (c % 8) + (r % 8) / 2) + (r % 64) / 16;
}
template <enigma_q4_layout LAYOUT> static inline uint enigma_q4_nibble(uint r, uint c) {
    if (LAYOUT != enigma_q4_fragments) return r % 8;
    return (r % 16) / 8 + 2 * ((c % 16) / 8) + 4 * (r % 2);
}

static inline float enigma_q4_value(enigma_q4 code, uint n) {
    if (code == enigma_int4) {
        return float(n) - 8.0f;
    }
    if (code == enigma_uint4) {
        return float(n);
    }
    uint e = (n >> 1) & 3;
    float m = float(n & 1);
    float magnitude = e == 0 ? 0.5f * m : float(1u << (e - 1)) * (1.0f + 0.5f * m);
    return (n & 8) ? -magnitude : magnitude;
}

// Element (r, c) of cooperative_dequantize as T (float or half): the CODE
// value of the nibble LAYOUT puts at K row c, N column r (in seed 002's
// [K/8][N] rows nibble c % 8 of w[(c / 8) * stride + r]) times its scale
// (s[(c >> shift) * scale_stride + r] of the [K/group][N] scales, in MLX's
// columns s[r * scale_stride + (c >> shift)]), in the second form plus the
// bias at the same index (one fused multiply-add in T of exact operands): the
// exact value rounded once.
template <enigma_q4_layout LAYOUT> static inline uint enigma_q4_scale_index(uint scale_stride, uint shift, uint r, uint c) {
    const uint g = c >> (shift & 31u);
    return LAYOUT == enigma_q4_columns ? r * scale_stride + g : g * scale_stride + r;
}
template <enigma_q4_layout LAYOUT, typename W> static inline float enigma_q4_code_value(enigma_q4 code, W w, uint stride, uint r, uint c) {
    return enigma_q4_value(code, (w[enigma_q4_word<LAYOUT>(c, r, stride)] >> (4 * enigma_q4_nibble<LAYOUT>(c, r))) & 0xFu);
}
template <typename T, enigma_q4_layout LAYOUT, typename W, typename S>
static inline T enigma_q4_weight(enigma_q4 code, W w, uint stride, S s, uint scale_stride, uint shift, uint r, uint c) {
    return T(enigma_q4_code_value<LAYOUT>(code, w, stride, r, c) * float(s[enigma_q4_scale_index<LAYOUT>(scale_stride, shift, r, c)]));
}
template <typename T, enigma_q4_layout LAYOUT, typename W, typename S, typename B>
static inline T enigma_q4_weight(enigma_q4 code, W w, uint stride, S s, B b, uint scale_stride, uint shift, uint r, uint c) {
    const uint at = enigma_q4_scale_index<LAYOUT>(scale_stride, shift, r, c);
    return fma(T(enigma_q4_code_value<LAYOUT>(code, w, stride, r, c)), T(s[at]), T(b[at]));
}

template <typename T, int R, int C, enigma_q4 CODE, enigma_q4_layout LAYOUT, typename W, typename S> static inline enigma_tile<T, R, C> enigma_tile_load_q(W w, uint stride, S s, uint lane) {
    enigma_tile<T, R, C> t;
    for (int i = 0; i < R / 8; ++i) {
        for (int j = 0; j < C / 8; ++j) {
            for (int e = 0; e < 2; ++e) {
                uint index = uint(i * (C / 8) + j) * 2 + uint(e);
                uint r = enigma_tile_at(C, index, lane, false), c = enigma_tile_at(C, index, lane, true);
                float v = enigma_q4_value(CODE, (w[enigma_q4_word<LAYOUT>(r, c, stride)] >> (4 * enigma_q4_nibble<LAYOUT>(r, c))) & 0xFu) * float(s[c]);
                t.f[i][j].thread_elements()[e] = T(v);
            }
        }
    }
    return t;
}

template <typename T, int R, int C, typename P> static inline void enigma_tile_store(enigma_tile<T, R, C> t, P p, uint stride, bool transpose, uint lane) {
    for (int i = 0; i < R / 8; ++i) {
        for (int j = 0; j < C / 8; ++j) {
            if (transpose) {
                simdgroup_store(t.f[i][j], p + (j * 8) * stride + i * 8, stride, ulong2(0, 0), true);
            } else {
                simdgroup_store(t.f[i][j], p + (i * 8) * stride + j * 8, stride);
            }
        }
    }
}

// simdgroup_multiply_accumulate takes f16 or bf16 fragments with f32
// accumulators as they are: no widening of the inputs.
template <typename TA, int R, int K, int C, typename TC>
static inline enigma_tile<TC, R, C> enigma_tile_mma(enigma_tile<TA, R, K> a, enigma_tile<TA, K, C> b, enigma_tile<TC, R, C> acc, uint lane) {
    enigma_tile<TC, R, C> d;
    for (int i = 0; i < R / 8; ++i) {
        for (int j = 0; j < C / 8; ++j) {
            simdgroup_matrix<TC, 8, 8> sum = acc.f[i][j];
            for (int k = 0; k < K / 8; ++k) {
                simdgroup_multiply_accumulate(sum, a.f[i][k], b.f[k][j], sum);
            }
            d.f[i][j] = sum;
        }
    }
    return d;
}

template <typename T, int R, int K, int C>
static inline enigma_tile<T, R, C> enigma_tile_mul(enigma_tile<T, R, K> a, enigma_tile<T, K, C> b, uint lane) {
    return enigma_tile_mma(a, b, enigma_tile_fill<T, R, C>(T(0), false, lane), lane);
}

template <typename T, int R, int C> static inline T enigma_tile_element(enigma_tile<T, R, C> t, int i) {
    return t.f[(i / 2) / (C / 8)][(i / 2) % (C / 8)].thread_elements()[i % 2];
}

