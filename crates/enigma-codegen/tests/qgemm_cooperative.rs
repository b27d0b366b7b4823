//! The CUDA source of the quantized GEMM on cooperative tensors
//! (`enigma_kernels::library::qgemm_cooperative`) for sm_90a: every
//! product is `wgmma` (not the scalar path beside it only), over A's
//! staged slices and the decoded B slices in the 128-byte swizzle, and the
//! staged words and scales, which only the threads read, stay linear. A
//! change to the builder that lost the `wgmma` lowering (a pitch, a view,
//! an access that keeps an operand linear) would fail no result test. With
//! K split too, and with stages that the loop indexes by value.

use enigma_codegen::cuda;
use enigma_ir::{validate, ValidationOptions};
use enigma_kernels::library::qgemm_cooperative::{qgemm_cooperative, CoopQgemmConfig, COOP_QGEMM_TILES, SLICE_DEPTH};
use enigma_kernels::library::quant::Format;
use enigma_kernels::library::DType;

#[test]
fn cuda_for_sm_90a_multiplies_on_wgmma_over_swizzled_slices() {
    let options = ValidationOptions { max_threadgroup_memory_bytes: 227 * 1024, ..ValidationOptions::default() };
    for &(tm, tn) in &COOP_QGEMM_TILES {
        for (format, output, stages, splits) in [(Format::Int4, DType::F16, 4, 1), (Format::Fp4, DType::F32, 2, 1), (Format::Int4, DType::F16, 3, 3)] {
            let cfg = CoopQgemmConfig { format, output, tm, tn, tk: SLICE_DEPTH, stages, raster: 8, splits };
            if cfg.check(u64::MAX).is_err() {
                continue;
            }
            let kernel = qgemm_cooperative(&cfg);
            let info = validate(&kernel, &options).unwrap_or_else(|e| panic!("{}: {e}", cfg.name()));
            let cu = cuda::write_string(&kernel, &info, &cuda::Options { wgmma: true, ..cuda::Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", cfg.name())).source;
            let name = cfg.name();
            // Each warpgroup's 64 rows by the tile's columns, 16 deep.
            let instruction = format!("wgmma.mma_async.sync.aligned.m64n{tn}k16.f32.f16.f16");
            assert!(cu.contains(&instruction), "{name}: no {instruction}");
            for (array, pitch) in [("a_slices", SLICE_DEPTH), ("b_slices", tn)] {
                let swizzled = format!("{array}[enigma::swizzle128<{pitch}u, ");
                assert!(cu.contains(&swizzled), "{name}: {array} is not stored in the swizzle ({swizzled})");
            }
            for linear in ["word_slices[enigma::swizzle128", "scale_slices[enigma::swizzle128"] {
                assert!(!cu.contains(linear), "{name}: {linear}");
            }
            assert!(cu.contains("enigma::wgmma_wait();"), "{name}");
        }
    }
}
