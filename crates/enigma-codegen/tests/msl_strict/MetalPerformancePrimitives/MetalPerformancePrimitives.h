// A stricter stand-in for Apple's MetalPerformancePrimitives (MSL 4.0), for
// clang in C++ for OpenCL mode (see metal_stdlib here): the subset enigma's
// MSL 4.0 uses — matmul2d with its descriptor and scope, the destination,
// left-input and reduction-destination cooperative tensors, and reduce_rows/reduce_columns,
// whose source and destination hold the same element type. Operands of run
// are tensor views or cooperative tensors, passed as thread references.
// Written from the documented public signatures; not Apple's header.
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
    constexpr matmul2d_descriptor(int m_, int n_, int k_ = int(metal::dynamic_extent), bool tl = false, bool tr = false, bool relaxed = false,
                                  mode md = mode::multiply)
        : m(m_), n(n_), k(k_), transpose_left(tl), transpose_right(tr), relaxed_precision(relaxed), matmul_mode(md) {}
};

template <typename T> struct reduction_operation_identity {
    static constexpr __constant T sum_identity = T(0);
    static constexpr __constant T max_identity = T(-1);
    static constexpr __constant T min_identity = T(1);
};

template <int Rank> struct enigma_layout {};

template <const __constant matmul2d_descriptor& Descriptor, typename Scope> struct matmul2d {
    template <typename L, typename R, typename D> void run(thread L&, thread R&, thread D&) const thread {
        static_assert(metal::enigma_is_tensor_view<L>::value || metal::enigma_is_cooperative<L>::value, "matmul2d::run: the left operand is a tensor or a cooperative tensor");
        static_assert(metal::enigma_is_tensor_view<R>::value || metal::enigma_is_cooperative<R>::value, "matmul2d::run: the right operand is a tensor or a cooperative tensor");
        static_assert(metal::enigma_is_tensor_view<D>::value || metal::enigma_is_cooperative<D>::value, "matmul2d::run: the destination is a tensor or a cooperative tensor");
    }
    template <typename L, typename R, typename E>
    metal::cooperative_tensor<E, metal::dextents<int32_t, 2>, enigma_layout<2>> get_destination_cooperative_tensor() const thread { return {}; }
    // The left operand's tensor for the threads to fill, named by the
    // product's element types (not its operands' types).
    template <typename LE, typename RE, typename E>
    metal::cooperative_tensor<LE, metal::dextents<int32_t, 2>, enigma_layout<3>> get_left_input_cooperative_tensor() const thread {
        static_assert(!metal::enigma_is_tensor_view<LE>::value && !metal::enigma_is_cooperative<LE>::value, "get_left_input_cooperative_tensor: element types, not operand types");
        static_assert(!metal::enigma_is_tensor_view<RE>::value && !metal::enigma_is_cooperative<RE>::value, "get_left_input_cooperative_tensor: element types, not operand types");
        return {};
    }
    template <typename L, typename R, typename E>
    metal::cooperative_tensor<E, metal::dextents<int32_t, 1>, enigma_layout<1>> get_row_reduction_destination_cooperative_tensor() const thread { return {}; }
    template <typename L, typename R, typename E>
    metal::cooperative_tensor<E, metal::dextents<int32_t, 1>, enigma_layout<0>> get_column_reduction_destination_cooperative_tensor() const thread { return {}; }
};

template <typename E, typename SX, typename DX, typename SL, typename DL>
void reduce_rows(thread metal::cooperative_tensor<E, SX, SL>&, thread metal::cooperative_tensor<E, DX, DL>&, reduction_operation = reduction_operation::sum, E = E(0)) {}
template <typename E, typename SX, typename DX, typename SL, typename DL>
void reduce_columns(thread metal::cooperative_tensor<E, SX, SL>&, thread metal::cooperative_tensor<E, DX, DL>&, reduction_operation = reduction_operation::sum, E = E(0)) {}

} // namespace tensor_ops
} // namespace mpp
