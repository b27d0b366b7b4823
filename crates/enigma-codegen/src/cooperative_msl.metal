// Cooperative tensors below MSL 4.0, on SIMD-group matrices. S is the
// number of SIMD groups in the scope, sg the calling SIMD group's index in
// it (0 for execution_simdgroup), lane its index in the SIMD group.
//
// An R×C tensor with R and C multiples of 8 and a floating-point element
// (every matmul2d destination) is a grid of 8×8 fragments: SIMD group sg
// holds the row bands (8 rows each) b = sg, sg + S, sg + 2S, …, each band's
// C/8 fragments left to right. Slot i of a lane is element i % 2 of its
// fragment i / 2: the lane's share of Metal's thread_elements(), at the row
// and column enigma_tile_at gives. A product's left operand from such a
// tensor is already in the SIMD group that needs it.
//
// Any other tensor (the m×1 and 1×n reduction destinations, integer
// tensors) is a plain array: element e (row-major) is slot e / (32·S) of
// thread e % (32·S) of the scope.
template <typename T, int R, int C, int S> struct enigma_coop_frag {
    typedef T elem;
    simdgroup_matrix<T, 8, 8> f[((R / 8 + S - 1) / S) * (C / 8)];
};
template <typename T, int R, int C, int S> struct enigma_coop_vec {
    typedef T elem;
    T v[(R * C + 32 * S - 1) / (32 * S)];
};

template <typename T, int R, int C, int S> static inline uint enigma_coop_capacity(thread const enigma_coop_frag<T, R, C, S>&) {
    return uint(((R / 8 + S - 1) / S) * (C / 8) * 2);
}
template <typename T, int R, int C, int S> static inline uint enigma_coop_capacity(thread const enigma_coop_vec<T, R, C, S>&) {
    return uint((R * C + 32 * S - 1) / (32 * S));
}

// The row (dim 1) or column (dim 0) of slot i; is_valid_element: the slot
// holds an element.
template <typename T, int R, int C, int S> static inline uint enigma_coop_coord(thread const enigma_coop_frag<T, R, C, S>&, uint i, uint dim, uint sg, uint lane) {
    uint fragment = i / 2, band = (fragment / uint(C / 8)) * uint(S) + sg;
    uint in_band = (fragment % uint(C / 8)) * 2 + i % 2;
    return dim == 0 ? enigma_tile_at(C, in_band, lane, true) : band * 8 + enigma_tile_at(C, in_band, lane, false);
}
template <typename T, int R, int C, int S> static inline bool enigma_coop_valid(thread const enigma_coop_frag<T, R, C, S>& t, uint i, uint sg, uint lane) {
    return i < enigma_coop_capacity(t) && ((i / 2) / uint(C / 8)) * uint(S) + sg < uint(R / 8);
}
template <typename T, int R, int C, int S> static inline thread T& enigma_coop_at(thread enigma_coop_frag<T, R, C, S>& t, uint i) {
    return t.f[i / 2].thread_elements()[i % 2];
}

template <typename T, int R, int C, int S> static inline uint enigma_coop_coord(thread const enigma_coop_vec<T, R, C, S>&, uint i, uint dim, uint sg, uint lane) {
    uint e = i * uint(32 * S) + sg * 32 + lane;
    return dim == 0 ? e % uint(C) : e / uint(C);
}
template <typename T, int R, int C, int S> static inline bool enigma_coop_valid(thread const enigma_coop_vec<T, R, C, S>& t, uint i, uint sg, uint lane) {
    return i < enigma_coop_capacity(t) && i * uint(32 * S) + sg * 32 + lane < uint(R * C);
}
template <typename T, int R, int C, int S> static inline thread T& enigma_coop_at(thread enigma_coop_vec<T, R, C, S>& t, uint i) {
    return t.v[i];
}

// A tensor view: element (x, y), x innermost, is p[x * sx + y * sy]; those
// outside the extents read as zero and are not written.
template <typename P> struct enigma_coop_view {
    P p;
    uint x, y, sx, sy;
};
template <typename P> static inline enigma_coop_view<P> enigma_coop_view_of(P p, uint x, uint y, uint sx, uint sy) {
    enigma_coop_view<P> v;
    v.p = p;
    v.x = x;
    v.y = y;
    v.sx = sx;
    v.sy = sy;
    return v;
}
template <typename U, typename P> static inline U enigma_coop_read(enigma_coop_view<P> v, uint x, uint y) {
    return x < v.x && y < v.y ? U(v.p[x * v.sx + y * v.sy]) : U(0);
}

// Element (r, c) of the tensor is view element (c, r).
template <typename TENSOR, typename P> static inline void enigma_coop_load(thread TENSOR& t, enigma_coop_view<P> v, uint sg, uint lane) {
    for (uint i = 0; i < enigma_coop_capacity(t); ++i) {
        if (enigma_coop_valid(t, i, sg, lane)) {
            uint r = enigma_coop_coord(t, i, 1, sg, lane), c = enigma_coop_coord(t, i, 0, sg, lane);
            enigma_coop_at(t, i) = enigma_coop_read<typename TENSOR::elem>(v, c, r);
        }
    }
}
template <typename TENSOR, typename P> static inline void enigma_coop_store(thread TENSOR& t, enigma_coop_view<P> v, uint sg, uint lane) {
    for (uint i = 0; i < enigma_coop_capacity(t); ++i) {
        if (enigma_coop_valid(t, i, sg, lane)) {
            uint r = enigma_coop_coord(t, i, 1, sg, lane), c = enigma_coop_coord(t, i, 0, sg, lane);
            if (c < v.x && r < v.y) {
                v.p[c * v.sx + r * v.sy] = enigma_coop_at(t, i);
            }
        }
    }
}

// cooperative_dequantize: element (r, c) becomes enigma_q4_weight (the tile
// helpers'), the exact value rounded once to the tensor's type; slots holding
// no element are unchanged. The second form adds the biases.
template <enigma_q4 CODE, enigma_q4_layout LAYOUT, typename TENSOR, typename W, typename S>
static inline void enigma_coop_dequantize(thread TENSOR& t, W w, uint stride, S s, uint scale_stride, uint shift, uint sg, uint lane) {
    for (uint i = 0; i < enigma_coop_capacity(t); ++i) {
        if (enigma_coop_valid(t, i, sg, lane)) {
            uint r = enigma_coop_coord(t, i, 1, sg, lane), c = enigma_coop_coord(t, i, 0, sg, lane);
            enigma_coop_at(t, i) = enigma_q4_weight<typename TENSOR::elem, LAYOUT>(CODE, w, stride, s, scale_stride, shift, r, c);
        }
    }
}
template <enigma_q4 CODE, enigma_q4_layout LAYOUT, typename TENSOR, typename W, typename S, typename B>
static inline void enigma_coop_dequantize(thread TENSOR& t, W w, uint stride, S s, B b, uint scale_stride, uint shift, uint sg, uint lane) {
    for (uint i = 0; i < enigma_coop_capacity(t); ++i) {
        if (enigma_coop_valid(t, i, sg, lane)) {
            uint r = enigma_coop_coord(t, i, 1, sg, lane), c = enigma_coop_coord(t, i, 0, sg, lane);
            enigma_coop_at(t, i) = enigma_q4_weight<typename TENSOR::elem, LAYOUT>(CODE, w, stride, s, b, scale_stride, shift, r, c);
        }
    }
}

// A fragment of U converted element by element (the lane's two elements).
template <typename U, typename T> static inline simdgroup_matrix<U, 8, 8> enigma_coop_as(simdgroup_matrix<T, 8, 8> m) {
    simdgroup_matrix<U, 8, 8> out;
    out.thread_elements()[0] = U(m.thread_elements()[0]);
    out.thread_elements()[1] = U(m.thread_elements()[1]);
    return out;
}

// Fragment (band, kt / 8) of the left operand A (m×k): row r, column k is
// view element (k, r), or (r, k) transposed.
template <typename U, bool TRANSPOSE, typename P>
static inline simdgroup_matrix<U, 8, 8> enigma_coop_left(enigma_coop_view<P> v, uint slot, uint band, uint kt, uint lane) {
    simdgroup_matrix<U, 8, 8> a;
    for (uint e = 0; e < 2; ++e) {
        uint r = band * 8 + enigma_tile_at(8, e, lane, false), k = kt + enigma_tile_at(8, e, lane, true);
        a.thread_elements()[e] = TRANSPOSE ? enigma_coop_read<U>(v, r, k) : enigma_coop_read<U>(v, k, r);
    }
    return a;
}
// ... or from a cooperative tensor the same SIMD group holds (band slot
// `slot` of its bands).
template <typename U, bool TRANSPOSE, typename T, int R, int K, int S>
static inline simdgroup_matrix<U, 8, 8> enigma_coop_left(enigma_coop_frag<T, R, K, S> l, uint slot, uint band, uint kt, uint lane) {
    return enigma_coop_as<U>(l.f[slot * uint(K / 8) + kt / 8]);
}

// Fragment (kt / 8, col / 8) of the right operand B (k×n): row k, column c
// is view element (c, k), or (k, c) transposed.
template <typename U, bool TRANSPOSE, typename P>
static inline simdgroup_matrix<U, 8, 8> enigma_coop_right(enigma_coop_view<P> v, uint kt, uint col, uint lane) {
    simdgroup_matrix<U, 8, 8> b;
    for (uint e = 0; e < 2; ++e) {
        uint k = kt + enigma_tile_at(8, e, lane, false), c = col + enigma_tile_at(8, e, lane, true);
        b.thread_elements()[e] = TRANSPOSE ? enigma_coop_read<U>(v, k, c) : enigma_coop_read<U>(v, c, k);
    }
    return b;
}

// matmul2d: D = A·B, or D + A·B (ACCUMULATE), over k in steps of 8, each
// SIMD group its own row bands. U is the type the operands' fragments
// take into simdgroup_multiply_accumulate.
template <typename U, bool TRANSPOSE_LEFT, bool TRANSPOSE_RIGHT, bool ACCUMULATE, typename L, typename P, typename T, int R, int C, int S>
static inline void enigma_coop_matmul(L left, enigma_coop_view<P> right, thread enigma_coop_frag<T, R, C, S>& d, uint k, uint sg, uint lane) {
    for (uint slot = 0; slot * uint(S) + sg < uint(R / 8); ++slot) {
        uint band = slot * uint(S) + sg;
        if (!ACCUMULATE) {
            for (int c = 0; c < C / 8; ++c) {
                d.f[slot * uint(C / 8) + uint(c)] = make_filled_simdgroup_matrix<T, 8, 8>(T(0));
            }
        }
        for (uint kt = 0; kt < k; kt += 8) {
            simdgroup_matrix<U, 8, 8> a = enigma_coop_left<U, TRANSPOSE_LEFT>(left, slot, band, kt, lane);
            for (int c = 0; c < C / 8; ++c) {
                simdgroup_matrix<U, 8, 8> b = enigma_coop_right<U, TRANSPOSE_RIGHT>(right, kt, uint(c) * 8, lane);
                uint f = slot * uint(C / 8) + uint(c);
                simdgroup_multiply_accumulate(d.f[f], a, b, d.f[f]);
            }
        }
    }
}

// reduce_rows (ROWS) or reduce_columns into the m×1 or 1×n tensor d, with
// OP 0 sum, 1 max, 2 min, in A (float for floating-point tensors): each
// thread reduces its slots, each SIMD group its threads; with S > 1 the
// SIMD groups' results meet in `scratch` (S·LEN values), between two
// threadgroup barriers.
template <int OP> struct enigma_coop_reduction {
    template <typename A> static A combine(A a, A b) { return OP == 0 ? a + b : OP == 1 ? max(a, b) : min(a, b); }
    template <typename A> static A simd(A a) { return OP == 0 ? simd_sum(a) : OP == 1 ? simd_max(a) : simd_min(a); }
};
template <typename A, int OP, bool ROWS, typename SRC, typename T, int DR, int DC, int S>
static inline void enigma_coop_reduce(thread SRC& s, thread enigma_coop_vec<T, DR, DC, S>& d, A identity, threadgroup A* scratch, uint sg, uint lane) {
    typedef enigma_coop_reduction<OP> op;
    const int LEN = DR * DC;
    A partial[LEN];
    for (int e = 0; e < LEN; ++e) {
        partial[e] = identity;
    }
    for (uint i = 0; i < enigma_coop_capacity(s); ++i) {
        if (enigma_coop_valid(s, i, sg, lane)) {
            uint e = enigma_coop_coord(s, i, ROWS ? 1 : 0, sg, lane);
            partial[e] = op::combine(partial[e], A(enigma_coop_at(s, i)));
        }
    }
    for (int e = 0; e < LEN; ++e) {
        A total = op::simd(partial[e]);
        if (S > 1) {
            if (lane == 0) {
                scratch[sg * uint(LEN) + uint(e)] = total;
            }
        } else if (lane == uint(e) % 32) {
            d.v[uint(e) / 32] = T(total);
        }
    }
    if (S > 1) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = 0; i < enigma_coop_capacity(d); ++i) {
            if (enigma_coop_valid(d, i, sg, lane)) {
                uint e = i * uint(32 * S) + sg * 32 + lane;
                A total = identity;
                for (int g = 0; g < S; ++g) {
                    total = op::combine(total, scratch[uint(g) * uint(LEN) + e]);
                }
                d.v[i] = T(total);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}


// combine(d, s, OP) in float, OP 0 assign, 1 add, 2 sub, 3 mul, 4 max, 5 min.
template <int OP> static inline float enigma_coop_combined(float d, float s) {
    return OP == 0 ? s : OP == 1 ? d + s : OP == 2 ? d - s : OP == 3 ? d * s : OP == 4 ? max(d, s) : min(d, s);
}
// Two tensors of one shape and scope have one layout: slot i of each holds
// the same element.
template <int OP, typename TENSOR> static inline void enigma_coop_combine_slots(thread TENSOR& d, thread TENSOR& s, uint sg, uint lane) {
    for (uint i = 0; i < enigma_coop_capacity(d); ++i) {
        if (enigma_coop_valid(d, i, sg, lane)) {
            enigma_coop_at(d, i) = enigma_coop_combined<OP>(enigma_coop_at(d, i), enigma_coop_at(s, i));
        }
    }
}
// Any other source is an m×1 value per row or a 1×n value per column, a
// plain SR×SC array: slot i of d, at (r, c), takes source element e = (SR == 1 ? 0 : r)·SC +
// (SC == 1 ? 0 : c). With S > 1 the scope writes the source to `scratch`
// row-major between two threadgroup barriers; one SIMD group reads element
// e from slot e / 32 of lane e % 32 with simd_shuffle, every lane running
// every step.
template <int OP, typename DST, int SR, int SC, int S>
static inline void enigma_coop_combine(thread DST& d, thread enigma_coop_vec<float, SR, SC, S>& s, threadgroup float* scratch, uint sg, uint lane) {
    if (S > 1) {
        for (uint i = 0; i < enigma_coop_capacity(s); ++i) {
            if (enigma_coop_valid(s, i, sg, lane)) {
                scratch[i * uint(32 * S) + sg * 32 + lane] = s.v[i];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint i = 0; i < enigma_coop_capacity(d); ++i) {
        bool valid = enigma_coop_valid(d, i, sg, lane);
        uint r = enigma_coop_coord(d, i, 1, sg, lane), c = enigma_coop_coord(d, i, 0, sg, lane);
        uint e = valid ? (SR == 1 ? 0u : r) * uint(SC) + (SC == 1 ? 0u : c) : 0u;
        float v = 0.0f;
        if (S > 1) {
            v = scratch[e];
        } else {
            for (uint j = 0; j < enigma_coop_capacity(s); ++j) {
                float shuffled = simd_shuffle(s.v[j], ushort(e % 32));
                if (e / 32 == j) {
                    v = shuffled;
                }
            }
        }
        if (valid) {
            enigma_coop_at(d, i) = enigma_coop_combined<OP>(enigma_coop_at(d, i), v);
        }
    }
    if (S > 1) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}
