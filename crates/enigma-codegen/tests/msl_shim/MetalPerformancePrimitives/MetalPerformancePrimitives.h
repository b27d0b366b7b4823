// A stand-in for Apple's MetalPerformancePrimitives (MSL 4.0), for g++
// -fsyntax-only (tests/msl_syntax.rs): matmul2d, its descriptor and the
// cooperative-tensor reductions, with plain C++ signatures. Not Apple's
// header: it checks that generated MSL names and types fit together.
#pragma once
#include <metal_tensor>

namespace mpp {
namespace tensor_ops {

enum class reduction_operation { sum, max, min };

struct matmul2d_descriptor {
    enum class mode { multiply, multiply_accumulate };
    int m, n, k;
    bool transpose_left, transpose_right, relaxed_precision;
    mode matmul_mode;
    constexpr matmul2d_descriptor(int m_, int n_, int k_ = -1, bool tl = false, bool tr = false, bool relaxed = false, mode md = mode::multiply)
        : m(m_), n(n_), k(k_), transpose_left(tl), transpose_right(tr), relaxed_precision(relaxed), matmul_mode(md) {}
};

template <typename T> struct reduction_operation_identity {
    static constexpr T sum_identity = T(0);
    static constexpr T max_identity = T(-1e30f);
    static constexpr T min_identity = T(1e30f);
};

struct destination_layout {};
struct row_layout {};
struct column_layout {};
struct left_input_layout {};

template <const matmul2d_descriptor& Descriptor, typename Scope> struct matmul2d {
    template <typename L, typename R, typename D> void run(L&, R&, D&) const {}
    template <typename L, typename R, typename E> metal::cooperative_tensor<E, metal::dextents<int32_t, 2>, destination_layout> get_destination_cooperative_tensor() const { return {}; }
    template <typename LE, typename RE, typename E> metal::cooperative_tensor<LE, metal::dextents<int32_t, 2>, left_input_layout> get_left_input_cooperative_tensor() const { return {}; }
    template <typename L, typename R, typename E> metal::cooperative_tensor<E, metal::dextents<int32_t, 1>, row_layout> get_row_reduction_destination_cooperative_tensor() const { return {}; }
    template <typename L, typename R, typename E> metal::cooperative_tensor<E, metal::dextents<int32_t, 1>, column_layout> get_column_reduction_destination_cooperative_tensor() const { return {}; }
};

template <typename E, typename SE, typename DE, typename SL, typename DL>
void reduce_rows(metal::cooperative_tensor<E, SE, SL>&, metal::cooperative_tensor<E, DE, DL>&, reduction_operation = reduction_operation::sum, E = E(0)) {}
template <typename E, typename SE, typename DE, typename SL, typename DL>
void reduce_columns(metal::cooperative_tensor<E, SE, SL>&, metal::cooperative_tensor<E, DE, DL>&, reduction_operation = reduction_operation::sum, E = E(0)) {}

} // namespace tensor_ops
} // namespace mpp
