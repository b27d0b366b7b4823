//! `cooperative_dequantize` in generated code. CUDA: a tensor in `wgmma`'s
//! accumulator layout decodes its slot pairs at once (one word and one
//! `enigma_q4_pair` per pair, one scale unless the group shift is 0, an
//! f16 tensor scaled by one `__hmul2`) and,
//! holding the right operand's type, is `wgmma`'s left operand from
//! registers without relaxed precision (golden file
//! `cooperative_dequantize_wgmma.cu`); any other layout goes slot by slot,
//! the exact f32 product rounded once (`cooperative_dequantize_scalar.cu`).
//! MSL below 4.0 calls `enigma_coop_dequantize` slot by slot
//! (`cooperative_dequantize_fragments.msl`); MSL 4.0 declares the weights
//! as the operation's left input tensor and fills its slots at their
//! coordinates (`cooperative_dequantize_mpp.msl`). MLX's affine weights
//! (`uint4` codes in the columns layout with biases) take the same paths,
//! the pair's byte as in seed 002's rows and one fused multiply-add in
//! place of the scaling (`cooperative_dequantize_mlx_affine*.msl`).
//! tests/msl_syntax.rs and tests/msl_strict.rs check the MSL against their
//! shims.

use enigma_codegen::{cuda, msl};
use enigma_ir::text::parse;
use enigma_ir::{validate, Kernel, KernelInfo};

/// Staged words and scales dequantized into an f16 tensor (the weights,
/// 64 rows of N by 64 of K) that multiplies a staged f16 tile of A.
const DEQUANTIZED_PRODUCT: &str = "\
kernel dequantized_product(A: device f16 read, W: device u32 read, S: device f16 read, O: device f32 read_write, G: u32) {
    var i: u32
    threadgroup As: f16[4096]
    threadgroup Ws: u32[512]
    threadgroup Ss: f16[128]
    cooperative w: cooperative_tensor<f16, 64, 64, simdgroups(4)>
    cooperative o: cooperative_tensor<f32, 64, 64, simdgroups(4)>

    for i in (thread_index_in_threadgroup, 4096u32, 128u32) {
        As[i] = A[i]
    }
    for i in (thread_index_in_threadgroup, 512u32, 128u32) {
        Ws[i] = W[i]
    }
    Ss[thread_index_in_threadgroup] = S[thread_index_in_threadgroup]
    threadgroup_barrier(mem_threadgroup)
    cooperative_dequantize_int4(w, Ws, 0u32, 64u32, Ss, 0u32, 64u32, ctz(G))
    matmul2d(matmul2d_descriptor(64, 64, 64, false, true, false, multiply), simdgroups(4), w, tensor(As, 0u32, 64u32, 64u32, 1u32, 64u32), o)
    cooperative_store(o, tensor(O, 0u32, 64u32, 64u32, 1u32, 64u32))
}
";

fn kernel(text: &str) -> (Kernel, KernelInfo) {
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let info = validate(&kernel, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
    (kernel, info)
}

fn cuda_source(text: &str, wgmma: bool) -> String {
    let (kernel, info) = kernel(text);
    cuda::write_string(&kernel, &info, &cuda::Options { wgmma, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{e}")).source
}

#[test]
fn in_the_wgmma_layout_pairs_decode_at_once_into_wgmmas_left_operand() {
    let cu = cuda_source(DEQUANTIZED_PRODUCT, true);
    for needle in [
        "__half w[32]; // cooperative_tensor<f16, 64, 64, simdgroups(4)>, wgmma accumulator",
        "for (uint enigma_p = 0u; enigma_p < 16u; ++enigma_p) {",
        "const __half2 enigma_pair = enigma_q4_pair<enigma_int4>(Ws[",
        "const __half2 enigma_h = __hmul2(enigma_pair, __halves2half2(enigma_s0, enigma_s1));",
        // The pairs' byte once per thread, not per pair.
        "const uint enigma_byte = enigma::wgmma_col<64u>(",
        ">(Ws[enigma_q[0] + (enigma_c) / 8u * enigma_q[1] + enigma_r], enigma_byte);",
        // One scale per row where every column lies in the first group.
        "if ((enigma_q[4] & 31u) >= 6u) {",
        "const __half enigma_s0 = Ss[enigma_q[2] + 0u * enigma_q[3] + enigma_r], enigma_s1 = enigma_s0;",
        // One scale per pair where the shift puts both columns in one group.
        "} else if ((enigma_q[4] & 31u) != 0u) {",
        ", enigma_s1 = enigma_s0;",
        // The f16 pairs are wgmma's A fragment as they are: no rounding.
        "enigma_pairs[enigma_q] = enigma_pair_f16(w[2u * enigma_q], w[2u * enigma_q + 1u]);",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    assert!(!cu.contains("enigma_pack_f16("), "{cu}");
    // A product in flight reads the pairs packed from the weights, not the
    // weights' registers: the decode does not wait for products; the
    // product waits before it packs the pairs.
    let dequantize = cu.find("const uint enigma_q[5]").unwrap();
    let barrier = cu[..dequantize].rfind("enigma::threadgroup_barrier(enigma_tg);").unwrap();
    assert!(!cu[barrier..dequantize].contains("enigma::wgmma_wait();"), "{cu}");
    let pack = cu.find("enigma_pairs[enigma_q] =").unwrap();
    assert!(cu[dequantize..pack].contains("\n    enigma::wgmma_wait();\n"), "{cu}");
    insta::assert_snapshot!("cooperative_dequantize_wgmma.cu", cu);
}

#[test]
fn any_other_layout_decodes_slot_by_slot_rounding_the_exact_product_once() {
    let cu = cuda_source(DEQUANTIZED_PRODUCT, false);
    for needle in [
        "__half w[32]; // cooperative_tensor<f16, 64, 64, simdgroups(4)>, linear layout",
        "const float enigma_v = __low2float(enigma_q4_pair<enigma_int4>(enigma_code & 0xFu, 0u)) * __half2float(Ss[",
        "w[enigma_i] = (__half)enigma_v;",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    assert!(!cu.contains("enigma_pair =") && !cu.contains("wgmma.mma_async"), "{cu}");
    insta::assert_snapshot!("cooperative_dequantize_scalar.cu", cu);
    // An f32 tensor in the wgmma layout decodes pairs too, each product exact in f32.
    let f32_weights = DEQUANTIZED_PRODUCT.replace("cooperative_tensor<f16, 64, 64", "cooperative_tensor<f32, 64, 64").replace("false, true, false, multiply", "false, true, true, multiply");
    let cu = cuda_source(&f32_weights, true);
    let needle = "w[2u * enigma_p] = __low2float(enigma_pair) * __half2float(enigma_s0);";
    assert!(cu.contains(needle) && cu.contains("enigma_pack_f16("), "missing {needle:?} in\n{cu}");
}

#[test]
fn msl_below_4_dequantizes_slot_by_slot_on_fragments() {
    let (kernel, info) = kernel(DEQUANTIZED_PRODUCT);
    let metal = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let needle = "enigma_coop_dequantize<enigma_int4, enigma_q4_rows>(w, &Ws[0u], 64u, &Ss[0u], 64u, ctz(G), ";
    assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    insta::assert_snapshot!("cooperative_dequantize_fragments.msl", metal);
    // Words in fragment order: the same helper, the words' layout its
    // template argument (the word and nibble from `enigma_q4_word` and
    // `enigma_q4_nibble`, `QuantLayout::locate`).
    let (fragments, fragments_info) = self::kernel(&fragment_ordered(DEQUANTIZED_PRODUCT));
    let metal = msl::write_string(&fragments, &fragments_info, &msl::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let needle = "enigma_coop_dequantize<enigma_int4, enigma_q4_fragments>(w, &Ws[0u], 512u, &Ss[0u], 64u, ctz(G), ";
    assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    assert!(metal.contains("enigma_q4_weight<typename TENSOR::elem, LAYOUT>(CODE, w, stride, s, scale_stride, shift, r, c)"), "{metal}");
    insta::assert_snapshot!("cooperative_dequantize_fragment_order.msl", metal);
}

/// The product's words in fragment order: 64 rows of N are four units of
/// 128 words, a row of units 512 words (the kernel's 512 words: one).
fn fragment_ordered(text: &str) -> String {
    let rows = "cooperative_dequantize_int4(w, Ws, 0u32, 64u32,";
    assert!(text.contains(rows));
    text.replace(rows, "cooperative_dequantize_int4_fragments(w, Ws, 0u32, 512u32,")
}

#[test]
fn in_fragment_order_a_unit_of_words_is_one_load_decoded_four_pairs_at_once() {
    let cu = cuda_source(&fragment_ordered(DEQUANTIZED_PRODUCT), true);
    for needle in [
        // A 16-byte load of the thread's four words of each unit (64
        // columns: one per slice here), each word four pairs.
        "for (uint enigma_u = 0u; enigma_u < 1u; ++enigma_u) {",
        "enigma_q4_words<4>(&Ws[enigma_q[0] + enigma_q4_word<enigma_q4_fragments>(enigma_c0, enigma_r0, enigma_q[1])], enigma_w);",
        "enigma_q4_quad<enigma_int4>(enigma_w[enigma_e / 4u], enigma_quad);",
        "const __half2 enigma_pair = enigma_quad[enigma_e % 2u * 2u + enigma_e % 4u / 2u];",
        "const __half2 enigma_h = __hmul2(enigma_pair, __halves2half2(enigma_s0, enigma_s1));",
        "enigma_pairs[enigma_q] = enigma_pair_f16(w[2u * enigma_q], w[2u * enigma_q + 1u]);",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    assert!(!cu.contains("enigma_byte") && !cu.contains("enigma_q4_pair<enigma_int4>"), "{cu}");
    insta::assert_snapshot!("cooperative_dequantize_wgmma_fragments.cu", cu);
    // Any other layout of the tensor: slot by slot, at the layout's word and nibble.
    let cu = cuda_source(&fragment_ordered(DEQUANTIZED_PRODUCT), false);
    let needle = "const uint enigma_code = Ws[enigma_q[0] + enigma_q4_word<enigma_q4_fragments>(enigma_c, enigma_r, enigma_q[1])] >> (4u * enigma_q4_nibble<enigma_q4_fragments>(enigma_c, enigma_r));";
    assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
}

#[test]
fn msl_4_fills_the_left_input_tensor_slot_by_slot_at_its_coordinates() {
    let (kernel, info) = kernel(DEQUANTIZED_PRODUCT);
    let options = msl::Options { language_version: (4, 0), ..msl::Options::default() };
    let metal = msl::write_string(&kernel, &info, &options).unwrap_or_else(|e| panic!("{e}"));
    for needle in [
        // Declared from the operation by the product's element types, before
        // the destination, whose left operand type is the tensor's.
        "auto w = matmul0.get_left_input_cooperative_tensor<half, half, float>();",
        "auto o = matmul0.get_destination_cooperative_tensor<decltype(w), metal::tensor<threadgroup half, metal::dextents<int32_t, 2>, metal::tensor_inline>, float>();",
        // Each valid slot at its coordinates: row r of N, K value c, the
        // element the tile helpers' `enigma_q4_weight` (as below MSL 4.0).
        "auto enigma_at = w.get_multidimensional_index(enigma_i);",
        "w[enigma_i] = enigma_q4_weight<half, enigma_q4_rows>(enigma_int4, &Ws[0u], 64u, &Ss[0u], 64u, ctz(G), uint(enigma_at[1]), uint(enigma_at[0]));",
        "static inline T enigma_q4_weight(enigma_q4 code, W w, uint stride, S s, uint scale_stride, uint shift, uint r, uint c) {",
        "matmul0.run(w, mpp_right, o);",
    ] {
        assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    }
    assert!(metal.find("auto w = ").unwrap() < metal.find("auto o = ").unwrap(), "{metal}");
    insta::assert_snapshot!("cooperative_dequantize_mpp.msl", metal);
}

/// MLX's affine weights: `uint4` codes in the columns layout (`[N][K/8]`
/// words, a column's words `stride` apart) with biases beside the scales.
fn mlx_affine(text: &str) -> String {
    let rows = "cooperative_dequantize_int4(w, Ws, 0u32, 64u32, Ss, 0u32, 64u32, ctz(G))";
    assert!(text.contains(rows));
    text.replace("S: device f16 read,", "S: device f16 read, B: device f16 read,")
        .replace(rows, "cooperative_dequantize_uint4_columns(w, Ws, 0u32, 8u32, Ss, 0u32, 2u32, ctz(G), B)")
}

#[test]
fn mlx_affine_columns_decode_pairs_by_one_fused_multiply_add() {
    // CUDA, wgmma layout: the pair from the same byte as in seed 002's rows,
    // its word a column's, scales and biases [N][K/group], one __hfma2.
    let cu = cuda_source(&mlx_affine(DEQUANTIZED_PRODUCT), true);
    for needle in [
        ">(Ws[enigma_q[0] + enigma_r * enigma_q[1] + (enigma_c) / 8u], enigma_byte);",
        "enigma_q4_pair<enigma_uint4>(",
        "const __half enigma_s0 = Ss[enigma_q[2] + enigma_r * enigma_q[3] + 0u], enigma_s1 = enigma_s0;",
        "const __half enigma_b0 = B[enigma_q[2] + enigma_r * enigma_q[3] + 0u], enigma_b1 = enigma_b0;",
        "const __half2 enigma_h = __hfma2(enigma_pair, __halves2half2(enigma_s0, enigma_s1), __halves2half2(enigma_b0, enigma_b1));",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
    ] {
        assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    }
    assert!(!cu.contains("__hmul2(enigma_pair"), "{cu}");
    // Slot by slot: one f16 fused multiply-add of the exact operands.
    let cu = cuda_source(&mlx_affine(DEQUANTIZED_PRODUCT), false);
    let needle = "w[enigma_i] = __hfma(__low2half(enigma_q4_pair<enigma_uint4>(enigma_code & 0xFu, 0u)), Ss[enigma_q[2] + enigma_r * enigma_q[3] + ((enigma_c) >> (enigma_q[4] & 31u))], B[enigma_q[2] + enigma_r * enigma_q[3] + ((enigma_c) >> (enigma_q[4] & 31u))]);";
    assert!(cu.contains(needle), "missing {needle:?} in\n{cu}");
    // MSL, both lowerings: the helpers' biased form.
    let (kernel, info) = kernel(&mlx_affine(DEQUANTIZED_PRODUCT));
    let metal = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let needle = "enigma_coop_dequantize<enigma_uint4, enigma_q4_columns>(w, &Ws[0u], 8u, &Ss[0u], &B[0u], 2u, ctz(G), ";
    assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    insta::assert_snapshot!("cooperative_dequantize_mlx_affine.msl", metal);
    let options = msl::Options { language_version: (4, 0), ..msl::Options::default() };
    let metal = msl::write_string(&kernel, &info, &options).unwrap_or_else(|e| panic!("{e}"));
    let needle = "w[enigma_i] = enigma_q4_weight<half, enigma_q4_columns>(enigma_uint4, &Ws[0u], 8u, &Ss[0u], &B[0u], 2u, ctz(G), uint(enigma_at[1]), uint(enigma_at[0]));";
    assert!(metal.contains(needle), "missing {needle:?} in\n{metal}");
    insta::assert_snapshot!("cooperative_dequantize_mlx_affine_mpp.msl", metal);
}
