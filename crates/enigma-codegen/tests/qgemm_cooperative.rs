//! The CUDA source of the quantized GEMM on cooperative tensors
//! (`enigma_kernels::library::qgemm_cooperative`) for sm_90a: every
//! product is `wgmma` (not the scalar path beside it only), its left
//! operand the weights in registers (dequantized two at a time into f16
//! pairs), its right one A's staged
//! slices in the 128-byte swizzle, and the staged words and scales, which
//! only the threads read, stay linear. A change to the builder that lost
//! the `wgmma` lowering (a pitch, a view, an access that keeps an operand
//! linear, a weights tensor that is not the accumulator's layout) would
//! fail no result test. With K split too, with stages that the loop
//! indexes by value, and in whole tiles (no bounds tests on the copies).

use enigma_codegen::cuda;
use enigma_ir::{validate, ValidationOptions};
use enigma_kernels::library::qgemm_cooperative::{qgemm_cooperative, CoopQgemmConfig, COOP_QGEMM_COLUMNS, COOP_QGEMM_ROWS, SLICE_DEPTH};
use enigma_kernels::library::quant::Format;
use enigma_kernels::library::split::SplitSum;
use enigma_kernels::library::DType;

#[test]
fn cuda_for_sm_90a_multiplies_on_wgmma_over_swizzled_slices() {
    let options = ValidationOptions { max_threadgroup_memory_bytes: 227 * 1024, ..ValidationOptions::default() };
    for (tm, tn) in COOP_QGEMM_ROWS.into_iter().flat_map(|tm| COOP_QGEMM_COLUMNS.map(|tn| (tm, tn))) {
        for (format, output, stages, splits) in [(Format::Int4, DType::F16, 4, 1), (Format::Fp4, DType::F32, 2, 1), (Format::Int4, DType::F16, 3, 3)] {
            let cfg = CoopQgemmConfig { format, output, tm, tn, tk: SLICE_DEPTH, stages, raster: 8, splits, split_sum: if splits > 1 { SplitSum::LastThreadgroup } else { SplitSum::Reduction }, whole: splits == 1 && stages == 4, tile_copies: false, layout: enigma_ir::QuantLayout::Rows };
            if cfg.check(u64::MAX).is_err() {
                continue;
            }
            let kernel = qgemm_cooperative(&cfg);
            let info = validate(&kernel, &options).unwrap_or_else(|e| panic!("{}: {e}", cfg.name()));
            let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", cfg.name())).source;
            let name = cfg.name();
            // Each warpgroup's 64 columns of C by the tile's rows, 16 deep,
            // the weights from registers, A K-major.
            let instruction = format!("wgmma.mma_async.sync.aligned.m64n{tm}k16.f32.f16.f16");
            assert!(cu.contains(&instruction), "{name}: no {instruction}");
            assert!(cu.contains(&format!("enigma_wgmma_m64n{tm}k16_f16_rk(&acc[0], &enigma_pairs[")), "{name}: the weights are not read from registers");
            // The weights are decoded two at a time (one word, one f16-pair
            // multiply by the scales) into f16 pairs, each row's scale
            // loaded once where the slice lies in one group.
            let code = if format == Format::Fp4 { "enigma_fp4" } else { "enigma_int4" };
            assert!(cu.contains("enigma_pairs[enigma_q] = enigma_pair_f16(weights[2u * enigma_q], weights[2u * enigma_q + 1u]);"), "{name}: not f16 pairs");
            assert!(cu.contains(&format!("const __half2 enigma_pair = enigma_q4_pair<{code}>(word_slices[")), "{name}: no pair decode");
            assert!(cu.contains("const __half2 enigma_h = __hmul2(enigma_pair, __halves2half2(enigma_s0, enigma_s1));"), "{name}: no f16-pair scaling");
            assert!(cu.contains("if ((enigma_q[4] & 31u) >= 6u) {"), "{name}: no scale per row");
            assert!(cu.contains("__half weights[") && !cu.contains("float weights[") && !cu.contains("enigma_pack_f16("), "{name}: f32 weights");
            let swizzled = format!("a_slices[enigma::swizzle128<{SLICE_DEPTH}u, ");
            assert!(cu.contains(&swizzled), "{name}: A is not stored in the swizzle ({swizzled})");
            for linear in ["word_slices[enigma::swizzle128", "scale_slices[enigma::swizzle128"] {
                assert!(!cu.contains(linear), "{name}: {linear}");
            }
            assert!(cu.contains("enigma::wgmma_wait();"), "{name}");
            // Whole tiles test no copy of A's bounds.
            assert_eq!(cu.contains("bool ahead_a_ok0 = true;"), cfg.whole, "{name}");
        }
    }
}
