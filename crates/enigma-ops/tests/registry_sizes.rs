//! Every registry entry (every operation × element type) on awkward sizes,
//! with the scalar kernels and with the vector kernels, against the f64 CPU
//! reference each entry carries; row kernels also in their streaming form.

use enigma_ops::{registry, Elementwise, Options, RowOptions};
use enigma_testing::library::{check, first_kernel, k_split_options, shapes, vector_shape, ROWS};
use enigma_runtime::{Device, Runtime};

#[test]
fn every_entry_matches_its_reference_on_awkward_sizes() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let mut runs = 0;
    for entry in registry() {
        for shape in shapes(&entry) {
            // `scale_vec4` entries insist on vector loads; the others
            // run once with scalar kernels and once choosing for themselves.
            if !entry.name.starts_with("scale_vec4") {
                let scalar = check(&rt, &entry, &shape, &Options { vectorize: Some(false), ..Options::default() });
                assert!(!first_kernel(&scalar).contains("_vec4"), "{scalar}");
                // No vectors: one column per thread (seed 002's layout) or
                // one packed word per load (MLX's).
                // The fused kernel and the tensor-core kernel on weights in
                // fragment order have no vector variant.
                let narrow = if entry.name == "qmatmul_mlx_affine" { "_w1_" } else { "_c1_" };
                let tensor_cores = ["qmatmul_fused_", "qmatmul_fragments_"].iter().any(|p| entry.name.starts_with(p));
                assert!(!entry.name.starts_with("qmatmul_") || tensor_cores || first_kernel(&scalar).contains(narrow), "{scalar}");
            }
            let auto = check(&rt, &entry, &shape, &Options::default());
            if entry.name == "qmatmul_mlx_affine" {
                // Its own kernel at any M.
                assert!(first_kernel(&auto).starts_with("qmatmul_affine_"), "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if entry.name.starts_with("qmatmul_fused_") {
                // Seed 002's fused kernel at any M.
                assert!(first_kernel(&auto).starts_with("qgemm_fused_"), "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if entry.name.starts_with("qmatmul_fragments_") {
                // Weights in fragment order: the decode row up to its rows,
                // the tensor-core GEMM above.
                let decode = shape[0] <= enigma_kernels::library::qmatmul_fragments::DECODE_ROWS as usize;
                let kernel = first_kernel(&auto);
                assert!(if decode { kernel.starts_with("qmatmul_") && kernel.contains("_fragments_u") } else { kernel.starts_with("qgemm_") && kernel.ends_with("_fragments") }, "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if entry.name.starts_with("attention_prefill_") {
                // One kernel on SIMD-group matrices, no vector variant.
                assert!(matches!(&auto.launches[..], [one] if one.kernel.starts_with("attention_prefill_")), "{auto}");
            } else if entry.name.starts_with("cumsum_axis_") || entry.name.starts_with("cumprod_axis_") {
                // An axis of at least two chunks of 32 rows: by chunks (its
                // totals pass first), 4-wide columns where the row is whole
                // vectors; a shorter one a thread per column.
                let kernel = first_kernel(&auto);
                let chunks = shape[1] >= 64;
                assert_eq!(kernel.contains("_axis_chunks_totals_"), chunks, "{} {shape:?}: {:?}", entry.name, auto.launches);
                assert_eq!(kernel.contains("_vec4"), chunks && shape[2] % 4 == 0, "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if entry.name.starts_with("conv2d_depthwise_") {
                // Rows of whole 16-byte words: by rows of words; else tiles.
                let words = 16 / entry.elem.size_bytes() as usize;
                let rows = shape[3] % words == 0;
                assert_eq!(first_kernel(&auto).starts_with("conv2d_depthwise_rows_"), rows, "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if entry.name.starts_with("conv2d_pointwise_") {
                // The pointwise convolution: a product over the input as it
                // lies (one input channel is a depthwise convolution).
                let kernel = first_kernel(&auto);
                let want = if shape[1] > 1 { ["gemm_", "sgemm_"].iter().any(|p| kernel.starts_with(p)) } else { kernel.starts_with("conv2d_depthwise") };
                assert!(want, "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if entry.name.starts_with("conv2d_") {
                // The dense 3×3 convolution: its unfolding first, by rows of
                // 16-byte words where the rows are whole words (one input
                // channel is a depthwise convolution).
                let words = 16 / entry.elem.size_bytes() as usize;
                let kernel = first_kernel(&auto);
                if shape[1] > 1 {
                    assert!(kernel.starts_with("im2col_"), "{} {shape:?}: {:?}", entry.name, auto.launches);
                    assert_eq!(kernel.contains("_rows_"), shape[4] % words == 0, "{} {shape:?}: {:?}", entry.name, auto.launches);
                } else {
                    assert!(kernel.starts_with("conv2d_depthwise"), "{} {shape:?}: {:?}", entry.name, auto.launches);
                }
            } else if entry.name.starts_with("matmul_") {
                // The tiled kernel has no vector variant.
                assert!(!first_kernel(&auto).contains("_vec4"), "{auto}");
            } else if entry.name.starts_with("qmatmul_") && shape[0] > enigma_kernels::library::qmatmul::DECODE_ROWS as usize {
                // Many rows: the tensor-core kernel.
                assert!(first_kernel(&auto).starts_with("qgemm_"), "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if entry.name.starts_with("qmatmul_") {
                // Vector loads are columns per thread: 2 or 4 where N allows.
                assert_eq!(!first_kernel(&auto).contains("_c1_"), shape[1] % 2 == 0 && shape[0] <= 4, "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if ["attention_decode_fused_", "attention_decode_batch_", "attention_decode_ragged_"].iter().any(|p| entry.name.starts_with(p)) {
                // The fused decode: on SIMD-group matrices for f16/bf16
                // where D is a multiple of 16 up to 256; else 16-byte words
                // of f16/bf16 where D is a multiple of 8, else four-element
                // vectors where it is one of 4.
                let kernel = first_kernel(&auto);
                let d = *shape.last().unwrap();
                let sixteen_bit = entry.elem != enigma_ir::Scalar::F32;
                let matrices = sixteen_bit && d % 16 == 0 && d <= 256;
                assert_eq!(kernel.contains("_mma_"), matrices, "{} {shape:?}: {:?}", entry.name, auto.launches);
                if !matrices {
                    let wide = sixteen_bit && d % 8 == 0;
                    assert_eq!(kernel.contains("_wide"), wide, "{} {shape:?}: {:?}", entry.name, auto.launches);
                    assert_eq!(kernel.contains("_vec4"), !wide && vector_shape(&shape), "{} {shape:?}: {:?}", entry.name, auto.launches);
                }
            } else if entry.name == "gemv_f16" || entry.name == "gemv_bf16" {
                // 16-bit weights: 16-byte words where rows are whole words,
                // else four-element vectors where they are whole vectors.
                let kernel = first_kernel(&auto);
                let form = if shape[1] % 8 == 0 { "_wide" } else if vector_shape(&shape) { "_vec4" } else { "_r" };
                assert!(kernel.starts_with(&format!("{}{form}", entry.name)), "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if entry.name == "gemv_f32" {
                // f32 weights: `float4`s (16 bytes a lane) walk 4 rows per
                // SIMD group, staggered, where rows are whole vectors; else
                // scalars from column 0, 2 rows.
                let kernel = first_kernel(&auto);
                let want = if vector_shape(&shape) { "gemv_f32_vec4_r4_u2_st" } else { "gemv_f32_r2_u2" };
                assert_eq!(kernel, want, "{} {shape:?}", entry.name);
            } else if Elementwise::ALL.iter().any(|op| entry.name == format!("{op}_f16") || entry.name == format!("{op}_bf16")) {
                // 16-bit element-wise: 8 packed elements per 16-byte access
                // where the length is a multiple of 8, else four-element
                // vectors where it is one of 4.
                let kernel = first_kernel(&auto);
                let packed = shape[0] % 8 == 0;
                assert_eq!(kernel.ends_with("_vec8"), packed, "{} {shape:?}: {:?}", entry.name, auto.launches);
                assert_eq!(kernel.contains("_vec4"), !packed && vector_shape(&shape), "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else if ["rms_norm_f16", "rms_norm_bf16", "layer_norm_f16", "layer_norm_bf16"].contains(&entry.name.as_str()) {
                // 16-bit norms: rows short enough for lanes of a SIMD group
                // read 16-byte words where they are whole words.
                let kernel = first_kernel(&auto);
                let d = shape[1];
                let words = d % 8 == 0 && 2 * d <= enigma_kernels::library::norm::LANE_ROW_BYTES;
                assert_eq!(kernel.contains("_vec8"), words, "{} {shape:?}: {:?}", entry.name, auto.launches);
                assert_eq!(kernel.contains("_vec4"), !words && vector_shape(&shape), "{} {shape:?}: {:?}", entry.name, auto.launches);
            } else {
                assert_eq!(first_kernel(&auto).contains("_vec4"), vector_shape(&shape), "{} {shape:?}: {:?}", entry.name, auto.launches);
            }
            runs += 2;
            if let Some(split) = k_split_options(&entry, &shape) {
                // The split kernel, then the GEMM's reduction; or the FP4/INT4
                // decode kernel summing its own splits (its default on a
                // device with device-scope fences, as the simulator has).
                let outcome = check(&rt, &entry, &shape, &split);
                let kernels: Vec<&str> = outcome.launches.iter().map(|l| l.kernel.as_str()).collect();
                let reduced = matches!(kernels[..], [first, reduce] if first.contains("_splitk") && reduce.starts_with("gemm_splitk_reduce_f16"));
                let summed = matches!(kernels[..], [only] if only.starts_with("qmatmul_") && only.contains("_splitk_sum"));
                assert!(reduced || summed, "{outcome}");
                runs += 1;
            }
        }
    }
    assert!(runs > 600, "{runs} runs");
}

#[test]
fn row_kernels_stream_long_rows_the_same() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let streaming = Options { rows: RowOptions { cache: Some(false) }, ..Options::default() };
    let row_kernels = registry().into_iter().filter(|e| ["softmax_", "rms_norm_", "layer_norm_"].iter().any(|p| e.name.starts_with(p)));
    let mut runs = 0;
    for entry in row_kernels {
        for shape in ROWS {
            let outcome = check(&rt, &entry, &shape, &streaming);
            assert!(first_kernel(&outcome).ends_with("_online"), "{outcome}");
            let scalar = check(&rt, &entry, &shape, &Options { vectorize: Some(false), ..streaming.clone() });
            assert!(first_kernel(&scalar).ends_with("_online"), "{scalar}");
            runs += 1;
        }
    }
    assert_eq!(runs, 10 * ROWS.len(), "softmax (3 types + online), RMSNorm and LayerNorm (3 types each)");
}

#[test]
fn threadgroup_overrides_give_the_same_results() {
    // 32 threads: multi-level scans, many reduction passes, one SIMD group
    // per row; 1024: whole threadgroups of 32 SIMD groups.
    // The fused quantized kernel's threads are its tile's (its variants are
    // the tiles the tuner tries), and so are the tensor-core kernel's on
    // weights in fragment order and the attention prefill's (a SIMD group
    // per 16 query rows), and the depthwise convolution's are its tile's,
    // so they are not among them.
    let rt = Runtime::new(Device::Sim).unwrap();
    for threads in [32, 64, 1024] {
        for entry in registry().into_iter().filter(|e| !["qmatmul_fused_", "qmatmul_fragments_", "attention_prefill_", "conv2d_depthwise_"].iter().any(|p| e.name.starts_with(p))) {
            let shape = match entry.shape_names.len() {
                1 => vec![70_001],
                2 => vec![3, 2049],
                // Running sums over an axis by chunks: a row of 1024 vectors,
                // which takes threadgroups of up to 1024.
                3 if entry.name.contains("_axis_") => vec![1, 64, 4096],
                // One query head per K/V head: 32 SIMD groups' states fit
                // 32 KiB of threadgroup memory only for one head each.
                5 => vec![2, 4, 4, 70, 128],
                _ => vec![2, 70, 128],
            };
            let outcome = check(&rt, &entry, &shape, &Options::threads(threads));
            assert_eq!(outcome.launches[0].threads, [threads, 1, 1], "{outcome}");
        }
    }
}
