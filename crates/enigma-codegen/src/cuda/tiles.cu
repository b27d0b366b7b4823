// SIMD-group matrix tiles: a lane's share of an R×C tile, R·C/32 elements in
// the simulator's lane map (Metal's per 8×8 fragment, fragments row-major):
// element i of lane `lane` sits at enigma_tile_at(C, i, lane, row/column).
// Products gather operands with warp shuffles and accumulate in float with
// one fmaf per step, in k order, as the simulator does (exact where the
// simulator is; tensor-core fragments are not used yet).
template <typename T, int R, int C> struct enigma_tile {
    T v[R * C / 32];
};

__device__ inline unsigned enigma_tile_at(int cols, unsigned i, unsigned lane, bool column) {
    unsigned fragment = i / 2, per_row = unsigned(cols) / 8;
    unsigned row = (fragment / per_row) * 8 + (lane / 16) * 4 + (lane / 2) % 4;
    unsigned col = (fragment % per_row) * 8 + ((lane / 8) % 2) * 4 + (lane % 2) * 2 + i % 2;
    return column ? col : row;
}

// The lane holding element (r, c) of a tile, and its index in that lane's share.
__device__ inline unsigned enigma_tile_owner(unsigned r, unsigned c) {
    unsigned rr = r % 8, cc = c % 8;
    return (rr / 4) * 16 + (cc / 4) * 8 + (rr % 4) * 2 + (cc % 4) / 2;
}
__device__ inline unsigned enigma_tile_slot(int cols, unsigned r, unsigned c) {
    return ((r / 8) * (unsigned(cols) / 8) + c / 8) * 2 + c % 2;
}

template <int R, int C> __device__ inline unsigned enigma_tile_row(unsigned i, unsigned lane) { return enigma_tile_at(C, i, lane, false); }
template <int R, int C> __device__ inline unsigned enigma_tile_col(unsigned i, unsigned lane) { return enigma_tile_at(C, i, lane, true); }

template <typename T, int R, int C> __device__ inline enigma_tile<T, R, C> enigma_tile_fill(T x, bool diagonal, unsigned lane) {
    enigma_tile<T, R, C> t;
    for (int i = 0; i < R * C / 32; ++i) {
        bool on = !diagonal || enigma_tile_at(C, i, lane, false) == enigma_tile_at(C, i, lane, true);
        t.v[i] = on ? x : T(0.0f);
    }
    return t;
}

// Element (r, c) of the tile is p[r * stride + c], or transposed p[c * stride + r].
template <typename T, int R, int C, typename P> __device__ inline enigma_tile<T, R, C> enigma_tile_load(const P* p, unsigned stride, bool transpose, unsigned lane) {
    enigma_tile<T, R, C> t;
    for (int i = 0; i < R * C / 32; ++i) {
        unsigned r = enigma_tile_at(C, i, lane, false), c = enigma_tile_at(C, i, lane, true);
        t.v[i] = transpose ? p[c * stride + r] : p[r * stride + c];
    }
    return t;
}

template <typename T, int R, int C, typename P> __device__ inline void enigma_tile_store(const enigma_tile<T, R, C>& t, P* p, unsigned stride, bool transpose, unsigned lane) {
    for (int i = 0; i < R * C / 32; ++i) {
        unsigned r = enigma_tile_at(C, i, lane, false), c = enigma_tile_at(C, i, lane, true);
        p[transpose ? c * stride + r : r * stride + c] = t.v[i];
    }
}

// Register `slot` of lane `src`: every lane shuffles each register index and
// keeps the one it asked for (the index differs from lane to lane).
template <typename T, int N> __device__ inline float enigma_tile_fetch(const T (&v)[N], unsigned src, unsigned slot) {
    float got = 0.0f;
    for (int j = 0; j < N; ++j) {
        float x = __shfl_sync(0xffffffffu, float(v[j]), src);
        if (unsigned(j) == slot) got = x;
    }
    return got;
}

template <typename TA, int R, int K, int C, typename TC>
__device__ inline enigma_tile<TC, R, C> enigma_tile_mma(const enigma_tile<TA, R, K>& a, const enigma_tile<TA, K, C>& b, const enigma_tile<TC, R, C>& acc, unsigned lane) {
    enigma_tile<TC, R, C> d;
    for (int i = 0; i < R * C / 32; ++i) {
        unsigned r = enigma_tile_at(C, i, lane, false), c = enigma_tile_at(C, i, lane, true);
        float sum = float(acc.v[i]);
        for (unsigned k = 0; k < unsigned(K); ++k) {
            float x = enigma_tile_fetch(a.v, enigma_tile_owner(r, k), enigma_tile_slot(K, r, k));
            float y = enigma_tile_fetch(b.v, enigma_tile_owner(k, c), enigma_tile_slot(C, k, c));
            sum = fmaf(x, y, sum);
        }
        d.v[i] = TC(sum);
    }
    return d;
}

template <typename T, int R, int K, int C>
__device__ inline enigma_tile<T, R, C> enigma_tile_mul(const enigma_tile<T, R, K>& a, const enigma_tile<T, K, C>& b, unsigned lane) {
    return enigma_tile_mma(a, b, enigma_tile_fill<T, R, C>(T(0.0f), false, lane), lane);
}

template <typename T, int R, int C> __device__ inline T enigma_tile_element(const enigma_tile<T, R, C>& t, int i) { return t.v[i]; }

