//! The CUDA source of the library's tensor-core GEMMs holds each B operand
//! tile in `mma.sync`'s B layout (`enigma_btile`, filled by
//! `enigma_tile_load_b`, or decoded from packed words by
//! `enigma_tile_load_qb`) and each A operand in the reference layout: what
//! the code generator's plan finds of tiles that are only loaded and then
//! multiplied from the right. On an H100 it saves a `movmatrix` per B
//! fragment (`BENCHMARKS.md`); a change to a GEMM builder that read a B
//! tile anywhere else would lose it without failing any result test.

use enigma_codegen::cuda;
use enigma_ir::{validate, Kernel, ValidationOptions};
use enigma_kernels::library::gemm::{gemm, qgemm, Edges, GemmConfig, QgemmConfig};
use enigma_kernels::library::qgemm_fused::{qgemm_fused, FusedQgemmConfig};
use enigma_kernels::library::quant::Format;
use enigma_kernels::library::DType;

/// The kernel's CUDA source, validated against a CUDA GPU's 48 KiB of
/// threadgroup memory (the pipelined stages need more than Apple's 32 KiB).
fn source(kernel: Kernel) -> String {
    let options = ValidationOptions { max_threadgroup_memory_bytes: 48 * 1024, ..ValidationOptions::default() };
    let info = validate(&kernel, &options).unwrap_or_else(|e| panic!("{e}"));
    cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}")).source
}

#[test]
fn sixteen_bit_gemms_load_b_operands_in_the_mma_layout() {
    for input in [DType::F16, DType::BF16] {
        for (stages, edges) in [(1, Edges::Checked), (2, Edges::Checked), (2, Edges::WholeTiles)] {
            let cfg = GemmConfig { stages, edges, ..GemmConfig::new(input, DType::F32) };
            let cu = source(gemm(&cfg));
            // One A and one B tile per K step of every multiply loop.
            let (a_loads, b_loads) = (cu.matches("enigma_tile_load<").count(), cu.matches("enigma_tile_load_b<").count());
            assert!(b_loads > 0 && a_loads == b_loads, "{}: {a_loads} A loads, {b_loads} B-layout loads", cfg.name());
        }
    }
    // The quantized GEMM's pipelined loop decodes its B tiles from the
    // staged words (`enigma_tile_load_qb`), its other loops load them from
    // the dequantized slice.
    for cfg in [QgemmConfig::for_rows(Format::Int4, DType::F16, 16), QgemmConfig::for_rows(Format::Fp4, DType::F32, 64).with_stages(2)] {
        let cu = source(qgemm(&cfg));
        let b_loads = cu.matches("enigma_tile_load_b<").count() + cu.matches("enigma_tile_load_qb<").count();
        assert_eq!(cu.matches("enigma_tile_load<").count(), b_loads, "{}", cfg.name());
        assert_eq!(cu.contains("enigma_tile_load_qb<"), cfg.gemm.stages > 1, "{}", cfg.name());
    }
    let fused = FusedQgemmConfig::for_rows(Format::Int4, DType::F16, 16);
    assert!(source(qgemm_fused(&fused)).contains("enigma_tile_load_b<"), "{}", fused.name());
}

/// Every 16-bit tile load of the library GEMMs reads threadgroup slices
/// whose offsets and strides the code generator proves 16-byte aligned, so
/// the helpers skip their run-time test (`, true>`): the slices' padded
/// rows are what guarantees it.
#[test]
fn gemm_tile_loads_are_proven_aligned() {
    for (stages, edges) in [(1, Edges::Checked), (2, Edges::Checked), (2, Edges::WholeTiles)] {
        let cfg = GemmConfig { stages, edges, ..GemmConfig::new(DType::F16, DType::F32) };
        let cu = source(gemm(&cfg));
        let proven = cu.matches(", true>(").count();
        let loads = cu.matches("enigma_tile_load<__half").count() + cu.matches("enigma_tile_load_b<__half").count();
        assert!(proven > 0 && proven == loads, "{}: {proven} of {loads} loads proven aligned", cfg.name());
    }
}

#[test]
fn f32_tiles_keep_the_reference_layout() {
    let cu = source(gemm(&GemmConfig::new(DType::F32, DType::F32)));
    assert!(!cu.contains("enigma_tile_load_b<") && cu.contains("enigma_tile_load<"));
}

/// The INT4 decode kernel's nibble decoding `(q & mask) | exponent` is one
/// `LOP3` on CUDA (`enigma::and_or`, the masks in registers: with two
/// immediates the compiler spends two instructions) and its f16 pairs are
/// `__half2` arithmetic (`HFMA2`); MSL keeps the operators.
#[test]
fn int4_decode_uses_one_lop3_per_pair_and_half2_arithmetic() {
    use enigma_kernels::library::qmatmul::qmatmul;
    let kernel = qmatmul(Format::Int4, DType::F16, 1, 1, 8, 256);
    let cu = source(kernel.clone());
    // Four pairs per word, eight words per iteration.
    assert_eq!(cu.matches("enigma::and_or(").count(), 32, "{cu}");
    assert!(cu.contains("__hfma2(as_half2(a), as_half2(b), as_half2(c))"), "{cu}");
    let info = validate(&kernel, &ValidationOptions::default()).unwrap();
    let msl = enigma_codegen::msl::write_string(&kernel, &info, &enigma_codegen::msl::Options::default()).unwrap();
    assert!(!msl.contains("and_or"), "{msl}");
}

/// The whole-tile GEMM is the pipeline alone: one loop of asynchronous
/// copies, no register-staged edge path, its tile stored whole (one matrix
/// store where alpha and beta leave C alone) — the edge paths' code in the
/// same kernel had cost the pipeline a fifth of its speed on an H100.
#[test]
fn the_whole_tile_gemm_has_no_edge_paths() {
    let general = GemmConfig { stages: 2, ..GemmConfig::new(DType::F16, DType::F32) };
    let whole = source(gemm(&GemmConfig { edges: Edges::WholeTiles, ..general }));
    let loops = |cu: &str| cu.matches("for (uint ").count();
    assert_eq!(loops(&whole), 1, "{whole}");
    assert!(loops(&source(gemm(&general))) > 1);
    assert!(!whole.contains("_held"), "no registers staging slices");
    assert_eq!(whole.matches("enigma_tile_store(acc").count(), 1);
}
