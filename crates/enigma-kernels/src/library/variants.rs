//! Every kernel variant of the library ([`all_kernels`]): what `enigma emit
//! --list` names, the validation and text round-trip tests check and the
//! code-generation tests print.

use super::*;
use super::tile::TileShape;
use enigma_ir::Kernel;

/// Every kernel variant of the library (all element types and vector
/// widths, a representative cached size for row kernels), for validation
/// and code-generation tests.
pub fn all_kernels() -> Vec<Kernel> {
    let mut out = vec![];
    // The kernels over an axis of [outer, axis, inner] (with cross-entropy's
    // negative log-likelihood), row log-softmax and the broadcast binary
    // operations.
    for dtype in DType::ALL {
        for r in [reduce::AxisReduction::Value(ReduceOp::Sum), reduce::AxisReduction::Value(ReduceOp::Max), reduce::AxisReduction::ArgMax, reduce::AxisReduction::ArgMin] {
            out.push(reduce::reduce_axis(r, dtype));
            let arg = !matches!(r, reduce::AxisReduction::Value(_));
            let stages: &[(u8, bool, bool)] = if arg { &[(1, false, false), (4, false, true), (4, true, false)] } else { &[(1, false, false), (4, false, false)] };
            for &(vec, of_partials, partial) in stages {
                out.push(reduce::reduce_axis_blocks(&reduce::AxisBlocks { r, dtype, vec, threads: 256, of_partials, partial }));
            }
        }
        out.push(softmax::softmax_axis(dtype, false));
        out.push(softmax::softmax_axis(dtype, true));
        out.push(softmax::log_softmax(dtype, 4, 2));
        out.push(softmax::log_softmax(dtype, 1, 0));
        for op in [elementwise::Elementwise::Add, elementwise::Elementwise::Mul, elementwise::Elementwise::Div] {
            use elementwise::InnerAccess::{Contiguous, Splat};
            for (vec, access, orank) in [(1, [Contiguous, Splat], 1), (4, [Contiguous, Splat], 3), (4, [Splat, Contiguous], 1), (1, [Splat, Splat], 1)] {
                out.push(elementwise::broadcast_binary(op, dtype, vec, access, orank));
            }
        }
        out.push(softmax::nll_axis(dtype));
        out.push(conv::conv2d(dtype));
        out.push(conv::im2col(dtype));
        out.push(conv::im2col_packed(dtype));
        out.push(conv::im2col_rows(&conv::RowWindow { dtype, kernel: [3, 3], pw: 1 }));
        out.push(conv::conv2d_depthwise(&conv::DepthwiseConfig { dtype, kernel: [3, 3], stride: [1, 1], dilation: [1, 1] }));
        out.push(conv::conv2d_depthwise_rows(&conv::RowWindow { dtype, kernel: [3, 3], pw: 1 }));
        if matches!(dtype, DType::F16 | DType::BF16) {
            out.push(conv_implicit::conv_weights_by_tap(dtype));
            out.push(conv_implicit::conv_input_channels_last(dtype));
            out.push(conv_implicit::conv2d_implicit(&conv_implicit::ImplicitConvConfig { dtype, tm: 64, tn: 64, tk: 64, stages: 2, row_bias: true, staged: false }));
        }
        out.push(elementwise::repeat(dtype.scalar()));
        for pool in [reduce::Pool::Max, reduce::Pool::Avg { count_pad: true }, reduce::Pool::Avg { count_pad: false }] {
            out.push(reduce::pool2d(pool, dtype));
        }
    }
    out.push(elementwise::repeat_words());
    for scalar in scan::AXIS_SCAN_SCALARS {
        out.push(scan::scan_axis(scan::AxisScan::Sum, scalar));
        out.push(scan::scan_axis(scan::AxisScan::Product, scalar));
        for op in [scan::AxisScan::Sum, scan::AxisScan::Product] {
            out.push(scan::scan_rows(op, scalar, 1, 64, false));
            out.push(scan::scan_rows(op, scalar, 4, 256, false));
        }
        if scalar.is_float() {
            out.push(scan::scan_rows(scan::AxisScan::Sum, scalar, 4, 256, true));
        }
        for (op, vec) in [(scan::AxisScan::Sum, 4), (scan::AxisScan::Product, 1)] {
            for pass in [scan::ChunkPass::Totals, scan::ChunkPass::Scan] {
                out.push(scan::scan_axis_chunks(op, scalar, vec, pass));
            }
        }
    }
    for dtype in DType::ALL {
        for vec in [1u8, 4] {
            for op in elementwise::Elementwise::ALL {
                out.push(elementwise::elementwise(op, dtype, vec));
                if vec == 4 && dtype != DType::F32 {
                    out.push(elementwise::elementwise_packed(op, dtype));
                }
                if vec == 4 && dtype == DType::F32 {
                    out.push(elementwise::elementwise_pairs(op));
                }
            }
            for op in ReduceOp::ALL {
                out.push(reduce::reduce(op, dtype, vec, 4));
                out.push(reduce::reduce_rows(op, dtype, vec));
            }
            for items in [0, 2] {
                out.push(softmax::softmax(dtype, vec, items));
                out.push(norm::rms_norm(dtype, vec, items));
                out.push(norm::layer_norm(dtype, vec, items));
            }
            // The lanes form: several rows to a SIMD group, and a whole one.
            for (lanes, items) in [(8, 1), (32, 2)] {
                for layer in [false, true] {
                    out.push(norm::norm_lanes(norm::LanesConfig { dtype, vec, lanes, items }, layer));
                }
            }
            out.push(gemv::gemv(dtype, vec, 2, 2, false));
            out.push(attention::scores(dtype, vec, 1));
            let fused = attention::FusedConfig { dtype, vec, chunks: 1, threads: 256, heads: 1, lanes: 32, keys_per_step: 1, prefetch: false, stages: 0, split: false, ragged: false, lse: false, merge: false, matrices: None };
            out.push(attention::fused(&fused));
            out.push(attention::fused(&attention::FusedConfig { split: true, ..fused }));
            // Grouped heads, keys shared by 8 lanes, several keys per step,
            // sequence lengths, log-sum-exp.
            out.push(attention::fused(&attention::FusedConfig { heads: 4, lanes: 8, keys_per_step: 4, ragged: true, lse: true, ..fused }));
            out.push(attention::fused(&attention::FusedConfig { heads: 4, lanes: 8, keys_per_step: 2, prefetch: true, ragged: true, split: true, ..fused }));
            // The split form that merges its own splits.
            out.push(attention::fused(&attention::FusedConfig { heads: 2, lanes: 8, split: true, merge: true, lse: true, ..fused }));
        }
        if dtype != DType::F32 {
            for layer in [false, true] {
                out.push(norm::norm_lanes(norm::LanesConfig { dtype, vec: 8, lanes: 32, items: 4 }, layer));
            }
            out.push(gemv::gemv(dtype, 8, 2, 2, false));
            out.push(gemv::gemv(dtype, 8, 4, 2, true));
            // 16-byte words, D = 128: 8 lanes per key, 2 slots each, 4 stages.
            let wide = attention::FusedConfig { dtype, vec: 8, chunks: 2, threads: 96, heads: 4, lanes: 8, keys_per_step: 1, prefetch: false, stages: 4, split: true, ragged: true, lse: false, merge: false, matrices: None };
            out.push(attention::fused(&wide));
            out.push(attention::fused(&attention::FusedConfig { heads: 2, merge: true, lse: true, ..wide }));
            // On SIMD-group matrices, within 32 KiB: 4 heads, 2 SIMD groups,
            // one stage, merged splits; one head, D = 80 (a 16-wide chunk),
            // blocks of 32 keys, ragged with the log-sum-exp.
            let matrices = attention::FusedConfig { threads: 64, stages: 1, ragged: false, merge: true, matrices: Some(attention::MatrixDecode { d: 128, block: 16 }), ..wide };
            out.push(attention::fused(&matrices));
            out.push(attention::fused(&attention::FusedConfig { heads: 1, threads: 64, stages: 1, split: false, merge: false, ragged: true, lse: true, matrices: Some(attention::MatrixDecode { d: 80, block: 32 }), ..matrices }));
        }
        out.push(attention::weighted_sum(dtype));
        out.push(attention::combine(dtype, false));
        out.push(attention::combine(dtype, true));
    }
    // The prefill configurations the portable threadgroup memory takes.
    for (dtype, d, causal, lse, stages) in [(DType::F16, 64, false, false, 2), (DType::F16, 128, true, true, 1), (DType::BF16, 64, true, false, 2), (DType::BF16, 128, false, true, 1)] {
        let tile = attention_prefill::PrefillTile::PORTABLE;
        out.push(attention_prefill::prefill(&attention_prefill::PrefillConfig { dtype, d, causal, lse, stages, tile }));
    }
    for (input, output) in [(DType::F16, DType::F32), (DType::BF16, DType::BF16), (DType::F32, DType::F32)] {
        out.push(gemm::gemm(&gemm::GemmConfig::new(input, output)));
        out.push(gemm::gemm(&gemm::GemmConfig { trans_a: true, trans_b: true, tile: tile::GemmTile::new(32, 64, 32, 1, 2), ..gemm::GemmConfig::new(input, output) }));
    }
    // The GEMM on cooperative tensors in the tile that fits 32 KiB of
    // threadgroup memory (C stored where it lies: its staging array does
    // not fit beside the stages there), a threadgroup per tile and
    // persistent, and with a row bias.
    for (input, output, persistent, row_bias) in [(DType::F16, DType::F16, false, false), (DType::BF16, DType::F32, false, false), (DType::F16, DType::F16, true, false), (DType::BF16, DType::BF16, false, true)] {
        out.push(gemm::gemm_cooperative(&gemm::CoopGemmConfig { input, output, tm: 64, tn: 64, tk: 64, stages: 2, raster: gemm::cooperative::DEFAULT_RASTER, persistent, row_bias, staged: false, tile_copies: false }));
    }
    // Split K summed by each tile's last threadgroup: the device-fence handoff.
    out.push(gemm::gemm(&gemm::GemmConfig {
        splits: 2,
        split_sum: split::SplitSum::LastThreadgroup,
        ..gemm::GemmConfig::new(DType::F16, DType::F32)
    }));
    for output in DType::ALL {
        out.push(sgemm::sgemm(&sgemm::SgemmConfig::new(output)));
    }
    out.push(sgemm::sgemm(&sgemm::SgemmConfig { trans_a: true, trans_b: true, splits: 2, tile: TileShape::new(64, 128, 16), rm: 4, ..sgemm::SgemmConfig::new(DType::F32) }));
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        for out_dtype in [DType::F32, DType::F16] {
            for cols in [1, 2, 4] {
                out.push(qmatmul::qmatmul(format, out_dtype, 1, cols, qmatmul::DEFAULT_WORDS, qmatmul::DEFAULT_THREADS));
            }
            out.push(qmatmul::qmatmul(format, out_dtype, 8, 1, 4, qmatmul::DEFAULT_THREADS));
        }
        out.push(qmatmul::qmatmul_splitk(format, 1, 2, qmatmul::DEFAULT_WORDS, qmatmul::DEFAULT_THREADS));
        out.push(qmatmul::qmatmul_splitk(format, 8, 1, 4, qmatmul::DEFAULT_THREADS));
        out.push(qgemm_fused::qgemm_fused(&qgemm_fused::FusedQgemmConfig::for_rows(format, DType::F16, 1)));
        out.push(qgemm_fused::qgemm_fused(&qgemm_fused::FusedQgemmConfig { splits: 2, ..qgemm_fused::FusedQgemmConfig::for_rows(format, DType::F32, 300) }));
        // The quantized GEMM on cooperative tensors in the tile and stages
        // that fit 32 KiB of threadgroup memory.
        let coop = qgemm_cooperative::CoopQgemmConfig { format, output: DType::F16, tm: 64, tn: 64, tk: qgemm_cooperative::SLICE_DEPTH, stages: 2, raster: gemm::cooperative::DEFAULT_RASTER, splits: 1, split_sum: split::SplitSum::Reduction, whole: false, tile_copies: false, layout: enigma_ir::QuantLayout::Rows };
        out.push(qgemm_cooperative::qgemm_cooperative(&coop));
    }
    for scalar in scan::SCAN_SCALARS {
        for vec in [1u8, 4] {
            for kind in [scan::ScanKind::Inclusive, scan::ScanKind::Exclusive] {
                for pass in [scan::BlockPass::ScanAndTotal, scan::BlockPass::ScanWithOffset] {
                    for items in [1, 4] {
                        out.push(scan::scan_block(scalar, vec, kind, pass, items));
                    }
                }
            }
            for items in [1, 4] {
                // The totals do not depend on the kind.
                out.push(scan::scan_block(scalar, vec, scan::ScanKind::Inclusive, scan::BlockPass::TotalOnly, items));
                out.push(scan::scan_add(scalar, vec, items));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::{validate, ValidationOptions};

    #[test]
    fn every_library_kernel_validates() {
        let kernels = all_kernels();
        assert!(kernels.len() > 100, "{} kernels", kernels.len());
        let mut names = std::collections::HashSet::new();
        for kernel in &kernels {
            if let Err(e) = validate(kernel, &ValidationOptions::default()) {
                panic!("{}: {e}", kernel.name);
            }
            assert!(names.insert(kernel.name.clone()), "duplicate kernel name {}", kernel.name);
        }
    }

    #[test]
    fn every_parameterisation_validates() {
        // The plans reach every rows/unroll of GEMV (1..=8), unroll of the
        // vector reduction (1..=16), register slots of attention (D ≤ 1024)
        // and cached items of the row kernels (0..=8): the locals each
        // builds must never clash with a parameter or each other.
        let mut kernels = vec![];
        for dtype in DType::ALL {
            for vec in [1u8, 4] {
                for rows in 1..=8 {
                    for unroll in 1..=8 {
                        kernels.push(gemv::gemv(dtype, vec, rows, unroll, false));
                    }
                }
                for unroll in 1..=16 {
                    kernels.extend(ReduceOp::ALL.map(|op| reduce::reduce(op, dtype, vec, unroll)));
                }
                for chunks in 1..=attention::chunks_for(1024, vec) {
                    kernels.push(attention::scores(dtype, vec, chunks));
                    let d = chunks * SIMD_WIDTH * vec as u32;
                    let threads = attention::fused_threads_that_fit(d, vec, 2).min(256);
                    let fused = attention::FusedConfig { dtype, vec, chunks, threads, heads: 2, lanes: 32, keys_per_step: 3, prefetch: false, stages: 0, split: false, ragged: true, lse: true, merge: false, matrices: None };
                    kernels.push(attention::fused(&fused));
                    kernels.push(attention::fused(&attention::FusedConfig { split: true, prefetch: true, ..fused }));
                    kernels.push(attention::fused(&attention::FusedConfig { lanes: 4, ..fused }));
                    // Staged copies move 4 bytes or more.
                    if dtype == DType::F32 || vec == 4 {
                        kernels.push(attention::fused(&attention::FusedConfig { lanes: 8, keys_per_step: 1, stages: 1, threads: 32, ..fused }));
                    } else {
                        kernels.push(attention::fused(&attention::FusedConfig { lanes: 8, ..fused }));
                    }
                }
                for items in 0..=MAX_CACHED_ITEMS {
                    kernels.extend([softmax::softmax(dtype, vec, items), norm::rms_norm(dtype, vec, items), norm::layer_norm(dtype, vec, items)]);
                }
            }
        }
        for dtype in [DType::F16, DType::BF16] {
            for rows in 1..=8 {
                for unroll in 1..=8 {
                    kernels.push(gemv::gemv(dtype, 8, rows, unroll, false));
                }
            }
        }
        assert_eq!(kernels.len(), 3 * (2 * 64 + 2 * 48 + (32 + 8) * 5 + 2 * 27) + 2 * 64);
        for kernel in &kernels {
            if let Err(e) = validate(kernel, &ValidationOptions::default()) {
                panic!("{}: {e}", kernel.name);
            }
        }
    }

    #[test]
    fn threadgroup_sizes_and_widths_are_checked() {
        assert!(check_threads("k", 100).is_err());
        assert!(check_threads("k", 2048).is_err());
        assert!(check_threads("k", 0).is_err());
        assert_eq!(check_threads("k", 96), Ok(96));
        assert_eq!(check_threads("k", 1024), Ok(1024));
        let e = check_vec("softmax_f32", 2).unwrap_err();
        assert_eq!(e.to_string(), "softmax_f32: vector width 2 is not 1 or 4");
        assert!(check_vec("k", 4).is_ok());
    }
}
