//! The quantized matmul on the simulator at awkward shapes, against the
//! f64 product of `A` and the host-dequantised weights (the host decodes
//! nibbles with `quant::fp4_value` / `int4_value`, checked against
//! hand-written tables; the kernel decodes them with bit tricks of its own).

use enigma_kernels::library::{qmatmul, qmatmul_fragments, quant};
use enigma_ops::{download, upload, DType, Error, GemmOptions, Options, QmatmulOptions, PipelineCache, QuantLayout, QuantizedWeights, SplitSum};
use enigma_runtime::half::f16_bits_to_f32;
use enigma_runtime::{Device, Runtime};


/// Runs `C = A · dequant(B)` and checks every element; returns the kernel name.
#[allow(clippy::too_many_arguments)]
fn check(rt: &Runtime, format: quant::Format, out: DType, m: usize, n: usize, k: usize, group: usize, options: &Options) -> String {
    run_check(rt, format, out, [m, n, k], group, options, false).remove(0)
}

/// Which entry point a check calls.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    /// `Ops::qmatmul` (its own choice of kernel).
    Auto,
    /// `Ops::qmatmul_tiled` (the tensor-core kernel, separate dequant).
    Tiled,
    /// `Ops::qmatmul_fused` (seed 002's fused dequant).
    Fused,
    /// `Ops::qmatmul` on weights uploaded in fragment order.
    Fragments,
}

/// [`check`] through `Ops::qmatmul_tiled` (the tensor-core kernel) when
/// `tiled`; returns the name of every kernel dispatched, in order.
fn run_check(rt: &Runtime, format: quant::Format, out: DType, shape: [usize; 3], group: usize, options: &Options, tiled: bool) -> Vec<String> {
    let path = if tiled { Path::Tiled } else { Path::Auto };
    run_check_cached(rt, &PipelineCache::default(), format, out, shape, group, options, path)
}

/// [`run_check`] through the pipeline cache `cache`, calling `path`.
#[allow(clippy::too_many_arguments)]
fn run_check_cached(rt: &Runtime, cache: &PipelineCache, format: quant::Format, out: DType, [m, n, k]: [usize; 3], group: usize, options: &Options, path: Path) -> Vec<String> {
    let mut a = enigma_kernels::test_data(m * k, (m * 7 + n * 13 + k) as u64);
    enigma_ops::quantize(DType::F16, &mut a);
    let q = enigma_ops::quantize_weights(format, &enigma_kernels::test_data(k * n, (k * 3 + n) as u64), k, n, group).unwrap();
    let w = enigma_ops::dequantize_weights(&q).unwrap();
    let weights = match path {
        Path::Fragments => QuantizedWeights::upload_in(rt, &q, QuantLayout::Fragments).unwrap(),
        _ => QuantizedWeights::upload(rt, &q).unwrap(),
    };
    let ab = upload(rt, enigma_ir::Scalar::F16, &a).unwrap();
    let ops = enigma_ops::Ops::new(rt).with_cache(cache.clone()).with_options(options.clone());
    let c = match path {
        Path::Auto | Path::Fragments => ops.qmatmul(&ab, &weights, m, out),
        Path::Tiled => ops.qmatmul_tiled(&ab, &weights, m, out),
        Path::Fused => ops.qmatmul_fused(&ab, &weights, m, out),
    };
    let c = c.unwrap_or_else(|e| panic!("{format} {m}x{n}x{k} g{group} {options:?}: {e}"));
    let launches = ops.take_launches();
    for l in &launches {
        assert!(l.report.findings.is_empty(), "{}: {:?}", l.kernel, l.report.findings);
    }
    let got = download(&c, out.scalar(), m * n).unwrap();
    let want = qmatmul::reference(&a, &w, m, n, k);
    for i in 0..m * n {
        let (r, col) = (i / n, i % n);
        let abs: f64 = (0..k).map(|kk| (a[r * k + kk] as f64 * w[kk * n + col] as f64).abs()).sum();
        // The tensor-core kernels (above the decode kernel's rows by
        // default; the fused one always) take value · scale rounded to f16:
        // one more rounding per weight. The decode kernel sums INT4 products
        // in f16, a few at a time.
        let staged = qmatmul::kernel_product_error(&launches[0].kernel, format);
        let bound = abs * (1e-6 + staged) + want[i].abs() * out.unit_roundoff() * 1.01 + 1e-7;
        assert!((got[i] - want[i]).abs() <= bound, "{format} {out} {m}x{n}x{k} g{group} {options:?}: C[{r}][{col}] = {} want {} (bound {bound})", got[i], want[i]);
    }
    launches.into_iter().map(|l| l.kernel).collect()
}

#[test]
fn awkward_shapes_match_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let mut runs = 0;
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        for (m, n, k, group) in [(1, 1, 32, 32), (3, 7, 64, 64), (8, 33, 128, 128), (1, 100, 256, 64), (3, 100, 96, 32), (8, 7, 256, 128), (2, 12, 384, 128)] {
            for out in [DType::F32, DType::F16] {
                check(&rt, format, out, m, n, k, group, &Options::default());
                runs += 1;
            }
        }
    }
    assert_eq!(runs, 28);
}

/// The tensor-core kernel (the GEMM's tiles on SIMD-group matrices with B
/// decoded from threadgroup memory) at awkward M and N (N past the
/// 128-column tile; K is a multiple of the group, so of the 32-value slice),
/// every tile height, clean under the sanitizer; `qmatmul` takes it above
/// `DECODE_ROWS` rows.
#[test]
fn the_tensor_core_kernel_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let sanitize = Options { sanitize: true, ..Options::default() };
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        for (m, n, k, group, tile) in [(1, 7, 64, 32, "16x128"), (16, 130, 256, 128, "16x128"), (33, 36, 96, 32, "64x128"), (70, 20, 128, 64, "128x128")] {
            let name = run_check(&rt, format, DType::F16, [m, n, k], group, &sanitize, true).remove(0);
            assert!(name.starts_with(&format!("qgemm_{format}_f16_{tile}")), "{name}");
        }
        let name = run_check(&rt, format, DType::F32, [24, 40, 160], 32, &Options::default(), true).remove(0);
        assert!(name.starts_with(&format!("qgemm_{format}_f32_32x128")), "{name}");
        // K split three ways (160 = 64 + 64 + 32), summed by a second kernel.
        let split = Options { gemm: GemmOptions { k_splits: Some(3), ..GemmOptions::default() }, sanitize: true, ..Options::default() };
        let name = run_check(&rt, format, DType::F16, [5, 40, 160], 32, &split, true).remove(0);
        assert!(name.contains("_splitk"), "{name}");
        // Tiles inside the matrix along N (N a multiple of 8) pipeline, at
        // any M (A's rows past M copy zeros): A's slices, the packed words
        // and their scales by asynchronous copies into stages (as many up
        // to four as fit the simulator's 32 KiB), each B tile decoded
        // from the staged words; next to an edge tile (N = 136), at M = 3
        // and with K split.
        let pipelined = |name: &str| ["_s2", "_s3", "_s4"].iter().any(|s| ["", "_whole", "_whole_ragged"].iter().any(|w| name.ends_with(&format!("{s}{w}"))));
        for (m, n, k, group) in [(16, 256, 256, 128), (33, 136, 160, 32), (64, 128, 192, 64), (3, 128, 128, 32)] {
            let name = run_check(&rt, format, DType::F16, [m, n, k], group, &sanitize, true).remove(0);
            assert!(pipelined(&name), "{name}");
        }
        let name = run_check(&rt, format, DType::F32, [16, 256, 512], 64, &split, true).remove(0);
        assert!(name.contains("_splitk_s") && pipelined(&name), "{name}");
        // Shapes the tile divides take the whole-tile kernel (the pipeline
        // alone), f16 C element by element, f32 C (here a split's
        // workspace) by the matrix store; rows past M its ragged variant;
        // N not divided the general kernel.
        for (m, n, k, group, options, suffix) in
            [(16, 256, 256, 128, &sanitize, "_whole"), (16, 256, 512, 64, &split, "_whole"), (7, 256, 256, 128, &sanitize, "_whole_ragged"), (33, 136, 160, 32, &sanitize, "")]
        {
            let name = run_check(&rt, format, DType::F16, [m, n, k], group, options, true).remove(0);
            let whole = name.find("_whole").map_or("", |at| &name[at..]);
            assert_eq!(whole, suffix, "{name}");
        }
        // Deeper slices (64 K values) where they divide the group: on
        // the pipeline (N = 256) and at an edge tile (N = 136), and split.
        let deep = |tile: &str, splits| Options { gemm: GemmOptions { tile: Some(tile.parse().unwrap()), k_splits: splits, ..GemmOptions::default() }, sanitize: true, ..Options::default() };
        for (tile, group, depth) in [("16x128x64/1x4", 64, "x64"), ("32x128x64/2x2", 128, "x64")] {
            for (m, n) in [(3, 256), (20, 136)] {
                let name = run_check(&rt, format, DType::F16, [m, n, 512], group, &deep(tile, None), true).remove(0);
                assert!(name.contains(depth), "{name}");
            }
            let name = run_check(&rt, format, DType::F32, [5, 256, 512], group, &deep(tile, Some(2)), true).remove(0);
            assert!(name.contains(depth) && name.contains("_splitk"), "{name}");
        }
        let rows = qmatmul::DECODE_ROWS as usize;
        assert!(check(&rt, format, DType::F16, rows + 1, 12, 64, 32, &Options::default()).starts_with("qgemm_"));
        assert!(check(&rt, format, DType::F16, rows, 12, 64, 32, &Options::default()).starts_with("qmatmul_"));
    }
}

/// One source of truth: what `enigma tiles --variant staged --weights int4`
/// plans for the quantized GEMM's tiles (threadgroup memory with B
/// dequantized as `[N][K]`, and with two stages the raw words and scales)
/// is what the compiled kernel declares.
/// Two K split counts of the tensor-core kernel through one pipeline cache:
/// each runs its own kernel (the count is built into the kernel, not into
/// its name).
/// Weights in fragment order go to `qmatmul_fragments` up to its rows
/// (one or two 16-column units per tile, the last tile of an odd count
/// overlapping its neighbour, rows past M, K split over threadgroups and
/// summed by the reduction) and to the tensor-core kernel's fragment-order
/// form above them (N that the default 128 columns do not divide: the tile
/// narrows, down to one unit per SIMD group; K split and summed in the
/// kernel); both outputs, under the sanitizer (every launch's findings are
/// empty).
#[test]
fn fragment_ordered_weights_match_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let cache = PipelineCache::default();
    for format in [quant::Format::Int4, quant::Format::Fp4] {
        for (m, n, k, group, splits) in [(1, 128, 128, 128, None), (3, 16, 128, 64, None), (5, 48, 192, 64, None), (8, 48, 192, 64, Some(3)), (16, 128, 128, 64, None), (33, 64, 128, 128, None), (16, 256, 256, 128, Some(2))] {
            for out in [DType::F32, DType::F16] {
                // The tensor-core kernel sums its splits (asked for: the
                // reduction is the default); the decode row reduces, so
                // asking for the kernel's own sum there takes the GEMM
                // (checked below).
                let split_sum = splits.filter(|_| m > qmatmul_fragments::DECODE_ROWS as usize).map(|_| SplitSum::LastThreadgroup);
                let options = Options { gemm: GemmOptions { k_splits: splits, split_sum, ..GemmOptions::default() }, sanitize: true, ..Options::default() };
                let kernels = run_check_cached(&rt, &cache, format, out, [m, n, k], group, &options, Path::Fragments);
                if m <= qmatmul_fragments::DECODE_ROWS as usize {
                    let units = if n >= 32 { 2 } else { 1 };
                    let out_name = if splits.is_some() { DType::F32 } else { out };
                    assert!(kernels[0].starts_with(&format!("qmatmul_{format}_{out_name}_fragments_u{units}_")), "{m}x{n}x{k}: {kernels:?}");
                    assert_eq!(kernels[0].contains("_r16"), m > 8, "{m}x{n}x{k}: {kernels:?}");
                    assert_eq!(kernels.len(), if splits.is_some() { 2 } else { 1 }, "{m}x{n}x{k}: {kernels:?}");
                    continue;
                }
                assert!(kernels[0].starts_with("qgemm") && kernels[0].ends_with("_fragments"), "{m}x{n}x{k}: {kernels:?}");
                // One dispatch, its tickets reused from the cache by the next call.
                assert_eq!(splits.is_some(), kernels.len() == 1 && kernels[0].contains("_splitk_sum"), "{m}x{n}x{k}: {kernels:?}");
            }
        }
    }
    // The decode row on 8- and 16-row tiles at row counts that leave a
    // tile's rows past M, its loop taking 1, 2 or 4 K steps per iteration
    // (the remainder one at a time: 7 and 13 steps over the SIMD groups),
    // SIMD groups with one K step, several or none.
    for (m, n, k, rows, steps, threads) in [(3, 48, 448, 8, 2, 128), (13, 64, 448, 16, 4, 64), (9, 32, 832, 16, 2, 128), (16, 64, 192, 16, 1, 256), (2, 16, 128, 16, 2, 128)] {
        let options = Options { qmatmul: QmatmulOptions { rows_per_threadgroup: Some(rows), k_steps_per_iteration: Some(steps), ..QmatmulOptions::default() }, threads: Some(threads), sanitize: true, ..Options::default() };
        for format in [quant::Format::Int4, quant::Format::Fp4] {
            let kernels = run_check_cached(&rt, &cache, format, DType::F16, [m, n, k], 64, &options, Path::Fragments);
            let tail = format!("_t{threads}{}{}", if rows == 16 { "_r16" } else { "" }, if steps > 1 { format!("_s{steps}") } else { String::new() });
            assert!(kernels.len() == 1 && kernels[0].starts_with(&format!("qmatmul_{format}_f16_fragments_u")) && kernels[0].ends_with(&tail), "{m}x{n}x{k}: {kernels:?}");
        }
    }
    // Asking for splits summed in the kernel at a decode row's M takes the
    // GEMM, which has them.
    let asked = Options { gemm: GemmOptions { k_splits: Some(2), split_sum: Some(SplitSum::LastThreadgroup), ..GemmOptions::default() }, sanitize: true, ..Options::default() };
    let kernels = run_check_cached(&rt, &cache, quant::Format::Int4, DType::F16, [2, 128, 256], 128, &asked, Path::Fragments);
    assert!(kernels.len() == 1 && kernels[0].starts_with("qgemm") && kernels[0].contains("_splitk_sum"), "{kernels:?}");
    // Group 32 is shallower than the layout's 64-deep units; the MLX format
    // and shapes off the units have no fragment order.
    let q = enigma_ops::quantize_weights(quant::Format::Int4, &enigma_kernels::test_data(64 * 16, 3), 64, 16, 32).unwrap();
    let w = QuantizedWeights::upload_in(&rt, &q, QuantLayout::Fragments).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &[0.0; 64]).unwrap();
    let err = enigma_ops::Ops::new(&rt).qmatmul(&a, &w, 1, DType::F32).unwrap_err().to_string();
    assert!(err.contains("group = 32"), "{err}");
    let a16 = upload(&rt, enigma_ir::Scalar::F16, &[0.0; 16 * 64]).unwrap();
    let err = enigma_ops::Ops::new(&rt).qmatmul(&a16, &w, 16, DType::F32).unwrap_err().to_string();
    assert!(err.contains("group = 32"), "{err}");
    let a17 = upload(&rt, enigma_ir::Scalar::F16, &[0.0; 17 * 64]).unwrap();
    let err = enigma_ops::Ops::new(&rt).qmatmul(&a17, &w, 17, DType::F32).unwrap_err().to_string();
    assert!(err.contains("divide the group of 32"), "{err}");
    let odd = enigma_ops::quantize_weights(quant::Format::Int4, &enigma_kernels::test_data(96 * 16, 3), 96, 16, 32).unwrap();
    let err = QuantizedWeights::upload_in(&rt, &odd, QuantLayout::Fragments).unwrap_err().to_string();
    assert!(err.contains("multiple of 64") && err.contains("K = 96"), "{err}");
    // Words already in fragment order go up as they are: the same product
    // as uploading the matrix; a part of the wrong length, or a shape off
    // the layout's units, is refused naming it.
    let q = enigma_ops::quantize_weights(quant::Format::Fp4, &enigma_kernels::test_data(128 * 32, 5), 128, 32, 64).unwrap();
    let words = q.packed_in(QuantLayout::Fragments).unwrap();
    let direct = QuantizedWeights::upload_words(&rt, q.format, QuantLayout::Fragments, [q.k, q.n, q.group], &words, &q.scales, &q.biases).unwrap();
    let via_matrix = QuantizedWeights::upload_in(&rt, &q, QuantLayout::Fragments).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &enigma_kernels::test_data(3 * 128, 6)).unwrap();
    let product = |w: &QuantizedWeights| download(&enigma_ops::Ops::new(&rt).qmatmul(&a, w, 3, DType::F32).unwrap(), enigma_ir::Scalar::F32, 3 * 32).unwrap();
    assert_eq!(product(&direct), product(&via_matrix));
    let short = QuantizedWeights::upload_words(&rt, q.format, QuantLayout::Fragments, [q.k, q.n, q.group], &words[1..], &q.scales, &q.biases).unwrap_err().to_string();
    assert!(short.contains("packed") && short.contains(&(words.len() - 1).to_string()), "{short}");
    let off_units = QuantizedWeights::upload_words(&rt, q.format, QuantLayout::Fragments, [q.k, 24, q.group], &words[..128 / 8 * 24], &q.scales[..2 * 24], &[]).unwrap_err().to_string();
    assert!(off_units.contains("N = 24"), "{off_units}");
}

/// Summing the splits in the kernel needs device-scope fences: a device
/// without them refuses it, naming the device, and still runs the
/// reduction.
#[test]
fn summing_splits_in_the_kernel_needs_device_fences() {
    let backend = enigma_sim::SimBackend::new().without_feature(enigma_ir::Feature::DeviceFence);
    let rt = Runtime::with_backend(std::sync::Arc::new(backend));
    let q = enigma_ops::quantize_weights(quant::Format::Int4, &enigma_kernels::test_data(256 * 128, 3), 256, 128, 128).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &enigma_kernels::test_data(16 * 256, 4)).unwrap();
    let asked = Options { gemm: GemmOptions { k_splits: Some(2), split_sum: Some(SplitSum::LastThreadgroup), ..GemmOptions::default() }, ..Options::default() };
    let err = enigma_ops::Ops::new(&rt).with_options(asked.clone()).qmatmul(&a, &w, 16, DType::F32).unwrap_err().to_string();
    assert!(err.contains("device-scope fences") && err.contains("without device-scope fences"), "{err}");
    let ops = enigma_ops::Ops::new(&rt).with_options(Options { gemm: GemmOptions { k_splits: Some(2), ..GemmOptions::default() }, ..Options::default() });
    ops.qmatmul(&a, &w, 16, DType::F32).unwrap();
    let names: Vec<String> = ops.take_launches().into_iter().map(|l| l.kernel).collect();
    assert!(names.len() == 2 && names[1].starts_with("gemm_splitk_reduce"), "{names:?}");
    // At a decode kernel's M, asking for the kernel's own sum takes the
    // tensor-core kernel, which has it (and so, here, the same refusal).
    let err = enigma_ops::Ops::new(&rt).with_options(asked.clone()).qmatmul(&a, &w, 1, DType::F32).unwrap_err().to_string();
    assert!(err.contains("without device-scope fences"), "{err}");
    // With the fences, the tensor-core kernel's default sums in the kernel
    // at one row only.
    let rt = Runtime::new(Device::Sim).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &enigma_kernels::test_data(16 * 256, 4)).unwrap();
    for (m, summed) in [(1, true), (16, false)] {
        let ops = enigma_ops::Ops::new(&rt).with_options(Options { gemm: GemmOptions { k_splits: Some(2), ..GemmOptions::default() }, ..Options::default() });
        let c = ops.qmatmul_tiled(&a, &w, m, DType::F32).unwrap();
        let names: Vec<String> = ops.take_launches().into_iter().map(|l| l.kernel).collect();
        assert_eq!(names.len() == 1 && names[0].contains("_splitk_sum"), summed, "m = {m}: {names:?}");
        // The same C as the reduction gives, bit for bit.
        let reduced = Options { gemm: GemmOptions { k_splits: Some(2), split_sum: Some(SplitSum::Reduction), ..GemmOptions::default() }, ..Options::default() };
        let want = enigma_ops::Ops::new(&rt).with_options(reduced).qmatmul_tiled(&a, &w, m, DType::F32).unwrap();
        assert_eq!(download(&c, enigma_ir::Scalar::F32, m * 128).unwrap(), download(&want, enigma_ir::Scalar::F32, m * 128).unwrap(), "m = {m}");
    }
}

#[test]
fn tensor_core_split_counts_sharing_a_cache_each_run_their_own_kernel() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let cache = PipelineCache::default();
    for splits in [2, 3] {
        let options = Options { gemm: GemmOptions { k_splits: Some(splits), ..GemmOptions::default() }, ..Options::default() };
        let kernels = run_check_cached(&rt, &cache, quant::Format::Int4, DType::F32, [9, 24, 384], 64, &options, Path::Tiled);
        assert!(kernels[0].starts_with("qgemm") && kernels[0].contains("splitk"), "{kernels:?}");
    }
}

#[test]
fn the_planner_reports_what_the_quantized_kernel_uses() {
    use enigma_analysis::tiles::{plan_tile, TileConfig, TileVariant, WeightFormat};
    use enigma_kernels::library::gemm::{qgemm, QgemmConfig};
    let device = enigma_analysis::catalog::find("m4-max").unwrap();
    for (rows, stages) in [(16, 1), (16, 2), (64, 2), (128, 1)] {
        let cfg = QgemmConfig::for_rows(enigma_kernels::library::quant::Format::Int4, enigma_kernels::library::DType::F16, rows).with_stages(stages);
        let t = cfg.tile();
        let planned = TileConfig {
            simdgroups: t.sg_rows * t.sg_cols,
            sg_grid: Some([t.sg_rows, t.sg_cols]),
            stages,
            ..TileConfig::new(t.shape, TileVariant::Staged, WeightFormat::Int4U4B8)
        };
        let report = plan_tile(&planned, &device, None).unwrap();
        let declared: u64 = qgemm(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
        assert_eq!((report.tg_memory_bytes, cfg.threadgroup_memory_bytes()), (declared, declared), "{}", cfg.name());
    }
}

/// Seed 002's fused kernel (`Ops::qmatmul_fused`) at awkward M (1, 9, 33:
/// partial row tiles), N (8, 100, 136: past the tile, not a multiple of 8)
/// and K (64, 192, groups of 32 and 64), both formats and outputs; the
/// seed's four tiles (§9.1's for M, and the other two through
/// `GemmOptions::tile`); under the sanitizer (its `simdgroup_barrier`s
/// between the staging fragment's writes and loads) and with K split over
/// threadgroups.
#[test]
fn the_fused_kernel_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let fused = |format, out, shape, group, options: &Options| run_check_cached(&rt, &PipelineCache::default(), format, out, shape, group, options, Path::Fused);
    let sanitize = Options { sanitize: true, ..Options::default() };
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        for (m, n, k, group, out, tile) in [
            (1, 8, 64, 32, DType::F32, "32x128x32_sg1x4"),
            (9, 100, 192, 64, DType::F16, "32x128x32_sg1x4"),
            (33, 136, 64, 64, DType::F32, "64x64x32_sg2x2"),
            (1, 136, 192, 32, DType::F16, "32x128x32_sg1x4"),
            (33, 8, 192, 32, DType::F16, "64x64x32_sg2x2"),
        ] {
            let names = fused(format, out, [m, n, k], group, &Options::default());
            assert_eq!(names, [format!("qgemm_fused_{format}_{out}_{tile}")]);
        }
        for (tile, name) in [("128x64x16/4x1", "128x64x16_sg4x1"), ("128x128x16/2x2", "128x128x16_sg2x2")] {
            let options = Options { gemm: GemmOptions { tile: Some(tile.parse().unwrap()), ..GemmOptions::default() }, ..Options::default() };
            let names = fused(format, DType::F32, [9, 100, 64], 32, &options);
            assert_eq!(names, [format!("qgemm_fused_{format}_f32_{name}")]);
        }
        let names = fused(format, DType::F16, [9, 100, 192], 64, &sanitize);
        assert_eq!(names, [format!("qgemm_fused_{format}_f16_32x128x32_sg1x4")]);
        // K split three ways (6 slices of 32: two each), summed by a second kernel.
        let split = Options { gemm: GemmOptions { k_splits: Some(3), ..GemmOptions::default() }, sanitize: true, ..Options::default() };
        let names = fused(format, DType::F16, [33, 100, 192], 32, &split);
        // 33 × 100 outputs: the reduction takes four at a time.
        assert_eq!(names, [format!("qgemm_fused_{format}_f16_64x64x32_sg2x2_splitk"), "gemm_splitk_reduce_f16_v4".to_string()]);
    }
    // MLX's affine weights are not in seed 002's layout.
    let q = enigma_ops::quantize_weights(quant::Format::MlxAffine, &[0.5; 64 * 8], 64, 8, 32).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &[1.0; 64]).unwrap();
    let e = enigma_ops::Ops::new(&rt).qmatmul_fused(&a, &w, 1, DType::F32).unwrap_err();
    assert!(matches!(e, Error::Argument { .. }) && e.to_string().contains("not mlx_affine"), "{e}");
}

/// One source of truth: what the planner (`enigma tiles --variant fused`)
/// reports for seed 002's four fused configurations — A's slice and one
/// 8×8 half staging fragment per SIMD group, §2.3's table — is what the
/// compiled kernel declares.
#[test]
fn the_planner_reports_what_the_fused_kernel_uses() {
    use enigma_analysis::tiles::{plan_tile, TileConfig, TileVariant, WeightFormat};
    use enigma_ops::GemmTile;
    use enigma_kernels::library::qgemm_fused::{qgemm_fused, FusedQgemmConfig};
    let device = enigma_analysis::catalog::find("m4-max").unwrap();
    for (tile, seed_bytes) in [("64x64x32/2x2", 4608), ("128x64x16/4x1", 4608), ("32x128x32/1x4", 2560), ("128x128x16/2x2", 4608)] {
        let tile: GemmTile = tile.parse().unwrap();
        for (format, weights) in [(quant::Format::Fp4, WeightFormat::Fp4E2M1), (quant::Format::Int4, WeightFormat::Int4U4B8)] {
            let cfg = FusedQgemmConfig::from_tile(format, DType::F16, tile);
            let planned = TileConfig {
                simdgroups: cfg.simdgroups(),
                sg_grid: Some([tile.sg_rows, tile.sg_cols]),
                ..TileConfig::new(tile.shape, TileVariant::Fused, weights)
            };
            let report = plan_tile(&planned, &device, None).unwrap();
            let declared: u64 = qgemm_fused(&cfg).threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
            assert_eq!((report.tg_memory_bytes, cfg.threadgroup_memory_bytes(), declared), (seed_bytes, seed_bytes, seed_bytes), "{}", cfg.name());
        }
    }
}

#[test]
fn every_column_width_thread_count_and_row_block_agrees() {
    let rt = Runtime::new(Device::Sim).unwrap();
    // N = 100 takes 1, 2 and 4 columns per thread (25 uint4 per row: one
    // partial tile); 32 threads leave one SIMD group to walk all of K; M = 11
    // in blocks of 4 rows ends in a partial block of 3.
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        for cols in [1, 2, 4] {
            for threads in [32, 96, 256] {
                let options = Options { qmatmul: QmatmulOptions { columns_per_thread: Some(cols), ..QmatmulOptions::default() }, threads: Some(threads), ..Options::default() };
                let name = check(&rt, format, DType::F32, 2, 100, 256, 32, &options);
                assert!(name.ends_with(&format!("_c{cols}_u4_t{threads}")), "{name}");
            }
        }
        let options = Options { qmatmul: QmatmulOptions { rows_per_threadgroup: Some(4), ..QmatmulOptions::default() }, ..Options::default() };
        let name = check(&rt, format, DType::F16, 11, 36, 128, 64, &options);
        assert!(name.contains("_r4_c2_"), "{name}");
        // M = 16 asked for in blocks of 8 rows, one column per thread.
        let name = check(&rt, format, DType::F16, 16, 20, 64, 32, &Options { qmatmul: QmatmulOptions { rows_per_threadgroup: Some(8), ..QmatmulOptions::default() }, ..Options::default() });
        assert!(name.contains("_r8_c1_"), "{name}");
        // No vectors: one column per thread.
        let name = check(&rt, format, DType::F32, 1, 64, 64, 32, &Options { vectorize: Some(false), ..Options::default() });
        assert!(name.contains("_c1_"), "{name}");
        // Packed words per loop iteration: 4, 8 and 16 over groups of 128.
        for words in [4, 8, 16] {
            let name = check(&rt, format, DType::F32, 3, 20, 256, 128, &Options { qmatmul: QmatmulOptions { words_per_iteration: Some(words), ..QmatmulOptions::default() }, ..Options::default() });
            assert!(name.contains(&format!("_u{words}_")), "{name}");
        }
    }
}

/// The decode kernel with K split over threadgroups (`Options::k_splits`),
/// clean under the sanitizer: 1 is today's single dispatch; more write an
/// f32 workspace that the GEMM's split-K reduction sums into C, or that
/// the last threadgroup of each column tile sums in the kernel
/// (`Options::split_sum`, the same C: compared exactly below). Split
/// counts that divide the quantization groups and counts that do not (5
/// groups in 2, 3 or 4 splits: the first splits take one group more), at N
/// past the column tile, M = 1, 3 and 8, one to four columns per thread,
/// two SIMD groups per threadgroup (a split of one group leaves one idle).
#[test]
fn k_split_over_threadgroups_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        for (m, n, k, group, cols, splits) in [(1, 33, 160, 32, 1, &[1, 2, 3, 4, 5][..]), (3, 100, 256, 64, 4, &[2, 3]), (8, 7, 384, 128, 1, &[1, 2, 3]), (3, 36, 192, 64, 2, &[2])] {
            for &s in splits {
                for out in [DType::F32, DType::F16] {
                    for sum in [SplitSum::Reduction, SplitSum::LastThreadgroup] {
                        let gemm = GemmOptions { k_splits: Some(s), split_sum: Some(sum), ..GemmOptions::default() };
                        let options = Options { gemm, threads: Some(64), qmatmul: QmatmulOptions { columns_per_thread: Some(cols), words_per_iteration: Some(4), ..QmatmulOptions::default() }, sanitize: true, ..Options::default() };
                        let names = run_check(&rt, format, out, [m, n, k], group, &options, false);
                        let first = format!("qmatmul_{format}_{}_r{m}_c{cols}_u4_t64", if s > 1 && sum == SplitSum::Reduction { DType::F32 } else { out });
                        if s == 1 {
                            assert_eq!(names, [first]);
                        } else if sum == SplitSum::Reduction {
                            // Four outputs per thread where they come in fours.
                            let width = if (m * n) % 4 == 0 { "_v4" } else { "" };
                            assert_eq!(names, [format!("{first}_splitk"), format!("gemm_splitk_reduce_{out}{width}")]);
                        } else {
                            // One dispatch: the last threadgroup of each tile sums.
                            assert_eq!(names, [format!("{first}_splitk_sum")]);
                        }
                    }
                }
            }
        }
    }
    // Row blocks (y) and splits (z) together: M = 11 in blocks of 4 rows,
    // 3 groups of 64 in 3 splits, summed by default in the kernel (the
    // simulator has device-scope fences; tickets per tile and row block).
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        let options = Options { gemm: GemmOptions { k_splits: Some(3), ..GemmOptions::default() }, qmatmul: QmatmulOptions { rows_per_threadgroup: Some(4), ..QmatmulOptions::default() }, threads: Some(64), sanitize: true, ..Options::default() };
        let names = run_check(&rt, format, DType::F16, [11, 36, 192], 64, &options, false);
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].starts_with(&format!("qmatmul_{format}_f16_r4_")) && names[0].ends_with("_splitk_sum"), "{names:?}");
    }
    // More splits than quantization groups: an error with the numbers.
    let q = enigma_ops::quantize_weights(quant::Format::Int4, &[0.5; 96 * 8], 96, 8, 32).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &[1.0; 96]).unwrap();
    let e = enigma_ops::qmatmul_with(&rt, &a, &w, 1, DType::F32, &Options { gemm: GemmOptions { k_splits: Some(4), ..GemmOptions::default() }, ..Options::default() }).unwrap_err();
    assert!(matches!(e, Error::Shape(_)), "{e:?}");
    assert_eq!(e.to_string(), "qmatmul_int4_f32: 4 K splits; between 1 and 3 (the 3 quantization groups of k = 96, at most 64)");
}

/// The decode kernel with chunks staged ahead by asynchronous copies
/// (`QmatmulOptions::stages`), clean under the sanitizer: one to four
/// stages, more stages than a SIMD group has chunks (K = 64 in groups of
/// 32 over four SIMD groups: two of them have none), 1, 2 and 4 columns
/// per thread, 4, 8 and 16 words per chunk over groups of 32, 64 and 128
/// (each within the simulator's 32 KiB of threadgroup memory),
/// M = 1, 3 and 8 (one row block of 8, a partial one), N past the column
/// tile, f32 and f16 out, K split over threadgroups or not.
#[test]
fn staged_chunks_match_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        for (m, n, k, group, cols, words, threads, splits) in [
            (1, 33, 64, 32, 1, 4, 128, 1),
            (3, 100, 256, 64, 2, 8, 64, 1),
            (8, 36, 384, 128, 1, 8, 64, 1),
            (1, 70, 640, 128, 1, 16, 64, 2),
            (3, 40, 192, 64, 4, 4, 64, 3),
        ] {
            for stages in 1..=4 {
                let (out, sum) = if stages % 2 == 0 { (DType::F16, SplitSum::LastThreadgroup) } else { (DType::F32, SplitSum::Reduction) };
                let q = QmatmulOptions { columns_per_thread: Some(cols), words_per_iteration: Some(words), stages: Some(stages), ..QmatmulOptions::default() };
                let gemm = GemmOptions { k_splits: Some(splits), split_sum: Some(sum), ..GemmOptions::default() };
                let options = Options { gemm, threads: Some(threads), qmatmul: q, sanitize: true, ..Options::default() };
                let names = run_check(&rt, format, out, [m, n, k], group, &options, false);
                let split = match (splits > 1, sum) {
                    (false, _) => "",
                    (true, SplitSum::Reduction) => "_splitk",
                    (true, SplitSum::LastThreadgroup) => "_splitk_sum",
                };
                assert!(names[0].ends_with(&format!("_u{words}_t{threads}{split}_s{stages}")), "{names:?}");
            }
        }
    }
    // Stages the threadgroup memory cannot hold: an error with the numbers.
    let q = enigma_ops::quantize_weights(quant::Format::Int4, &[0.5; 128 * 64], 128, 64, 128).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &[1.0; 128]).unwrap();
    let big = QmatmulOptions { columns_per_thread: Some(4), words_per_iteration: Some(16), stages: Some(8), ..QmatmulOptions::default() };
    let e = enigma_ops::qmatmul_with(&rt, &a, &w, 1, DType::F32, &Options { threads: Some(1024), qmatmul: big, ..Options::default() }).unwrap_err();
    assert_eq!(e.to_string(), "qmatmul_int4_f32: 1024 threads × 1 rows × 4 columns × 16 words × 8 stages need 2252800 bytes of threadgroup memory (partial sums, staged A, stages), over 32768");
}

/// The decode kernel's K splits summed in the kernel by each tile's last
/// threadgroup give exactly the C of the reduction's second dispatch (the
/// same f32 sums in split order), and the tickets are left at zero for the
/// next call: three calls on one `Ops`, M = 3, 5 groups in 3 splits.
#[test]
fn splits_summed_in_the_kernel_equal_the_reduction() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let (m, n, k, group) = (3, 70, 320, 64);
    let values: Vec<f32> = (0..k * n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0).collect();
    let q = enigma_ops::quantize_weights(quant::Format::Int4, &values, k, n, group).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a_values: Vec<f32> = (0..m * k).map(|i| ((i * 13 % 29) as f32 - 14.0) / 8.0).collect();
    let a = upload(&rt, enigma_ir::Scalar::F16, &a_values).unwrap();
    let run = |ops: &enigma_ops::Ops, sum: SplitSum| {
        let c = ops.qmatmul(&a, &w, m, DType::F32).unwrap();
        let names: Vec<String> = ops.take_launches().into_iter().map(|l| l.kernel).collect();
        assert_eq!(names.len(), if sum == SplitSum::Reduction { 2 } else { 1 }, "{names:?}");
        download(&c, enigma_ir::Scalar::F32, m * n).unwrap()
    };
    let options = |sum| Options { gemm: GemmOptions { k_splits: Some(3), split_sum: Some(sum), ..GemmOptions::default() }, threads: Some(64), sanitize: true, ..Options::default() };
    let reduced = run(&enigma_ops::Ops::new(&rt).with_options(options(SplitSum::Reduction)), SplitSum::Reduction);
    let ops = enigma_ops::Ops::new(&rt).with_options(options(SplitSum::LastThreadgroup));
    for _ in 0..3 {
        let summed = run(&ops, SplitSum::LastThreadgroup);
        assert!(summed.iter().zip(&reduced).all(|(x, y)| x.to_bits() == y.to_bits()), "{summed:?} {reduced:?}");
    }
}

/// The decode kernel's f16 partial sums stay finite at the bound its docs
/// give (`qmatmul::MAX_ABS_A`): |a| = 4094 times the most negative code in
/// every position, sixteen products per f16 sum. INT4 (−8, −1 in eighths)
/// sums to −65504, f16's largest finite magnitude, and the result is
/// exact; FP4 (−6, −0.75 in eighths) stays within the kernel's bound.
#[test]
fn decode_sums_stay_finite_at_the_documented_bound() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let (m, n, k, group) = (1, 32, 256, 128);
    let a_max = qmatmul::MAX_ABS_A;
    assert_eq!(a_max, 4094.0);
    let one = 0x3C00u16; // f16 1.0
    for (format, word, code_value) in [(quant::Format::Int4, 0u32, -8.0), (quant::Format::Fp4, 0xFFFF_FFFF, -6.0)] {
        let q = quant::QuantizedMatrix::new(format, k, n, group, vec![word; k / 8 * n], vec![one; k / group * n], vec![]).unwrap();
        let weights = QuantizedWeights::upload(&rt, &q).unwrap();
        let a = upload(&rt, enigma_ir::Scalar::F16, &vec![a_max as f32; m * k]).unwrap();
        let ops = enigma_ops::Ops::new(&rt);
        let c = ops.qmatmul(&a, &weights, m, DType::F32).unwrap();
        assert!(ops.take_launches()[0].kernel.starts_with(&format!("qmatmul_{format}")));
        let got = download(&c, enigma_ir::Scalar::F32, m * n).unwrap();
        let want = code_value * a_max * k as f64;
        let bound = want.abs() * qmatmul::f16_product_error(format);
        assert!(got.iter().all(|&x| x.is_finite() && (x - want).abs() <= bound), "{format}: {got:?}, want {want} ± {bound}");
        if format == quant::Format::Int4 {
            assert!(got.iter().all(|&x| x == want), "{got:?}");
        }
    }
}

/// The decode kernel's bit decoding is exact for every code at every
/// nibble of a word: word 0 of column `c` holds code `(c + j) % 16` at
/// nibble `j`, so the 16 columns hold each code at each nibble; A's rows
/// are one-hot at K = 0 … 3, then 4 … 7, so C is the decoded codes times
/// the scale (1.5), exactly, against the host's decoding of each code.
#[test]
fn the_decode_kernel_decodes_every_code_at_every_nibble_exactly() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let (m, n, k, group) = (4, 16, 32, 32);
    let scale = 0x3E00u16; // f16 1.5
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        let code = |col: usize, j: usize| ((col + j) % 16) as u32;
        let mut packed = vec![0u32; k / 8 * n];
        for (col, word) in packed.iter_mut().take(n).enumerate() {
            *word = (0..8).map(|j| code(col, j) << (4 * j)).fold(0, |w, c| w | c);
        }
        let q = quant::QuantizedMatrix::new(format, k, n, group, packed, vec![scale; k / group * n], vec![]).unwrap();
        let weights = QuantizedWeights::upload(&rt, &q).unwrap();
        for first in [0, 4] {
            let mut a = vec![0.0f32; m * k];
            for r in 0..m {
                a[r * k + first + r] = 1.0;
            }
            let ab = upload(&rt, enigma_ir::Scalar::F16, &a).unwrap();
            let ops = enigma_ops::Ops::new(&rt).with_options(Options { sanitize: true, ..Options::default() });
            let c = ops.qmatmul(&ab, &weights, m, DType::F32).unwrap();
            assert!(ops.take_launches()[0].kernel.starts_with(&format!("qmatmul_{format}_f32")));
            let got = download(&c, enigma_ir::Scalar::F32, m * n).unwrap();
            for r in 0..m {
                for col in 0..n {
                    let c_code = code(col, first + r);
                    let value = if format == quant::Format::Fp4 { quant::fp4_value(c_code) } else { quant::int4_value(c_code) };
                    assert_eq!(got[r * n + col], value as f64 * 1.5, "{format}: code {c_code} at nibble {}", first + r);
                }
            }
        }
    }
}

#[test]
fn runs_clean_under_the_sanitizer() {
    // Races between the SIMD groups' partial sums, uninitialised reads of
    // threadgroup memory, out-of-bounds loads at the edge tile, unwritten
    // outputs: none, under three SIMD-group schedules.
    let rt = Runtime::new(Device::Sim).unwrap();
    for format in [quant::Format::Fp4, quant::Format::Int4] {
        for (m, n, k, cols, words) in [(3, 33, 128, 1, 4), (1, 68, 64, 4, 4), (8, 10, 96, 2, 4), (2, 36, 256, 2, 16)] {
            let group = if words == 16 { 128 } else { 32 };
            let options = Options { sanitize: true, threads: Some(64), qmatmul: QmatmulOptions { columns_per_thread: Some(cols), words_per_iteration: Some(words), ..QmatmulOptions::default() }, ..Options::default() };
            check(&rt, format, DType::F32, m, n, k, group, &options);
        }
    }
}

#[test]
fn errors_name_the_numbers() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let q = enigma_ops::quantize_weights(quant::Format::Int4, &[0.5; 64 * 10], 64, 10, 32).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &[1.0; 64]).unwrap();
    let e = enigma_ops::qmatmul(&rt, &a, &w, 2, DType::F32).unwrap_err();
    assert_eq!(e.to_string(), "qmatmul: `a` has 128 bytes, needs 256 (128 f16 elements)");
    let typed = rt.buffer_from(&[0.0f32; 64]).unwrap();
    let e = enigma_ops::qmatmul(&rt, &typed, &w, 1, DType::F32).unwrap_err();
    assert!(e.to_string().contains("typed buffer of f32"), "{e}");
    let e = enigma_ops::qmatmul_with(&rt, &a, &w, 1, DType::F32, &Options { qmatmul: QmatmulOptions { columns_per_thread: Some(4), ..QmatmulOptions::default() }, ..Options::default() }).unwrap_err();
    assert_eq!(e.to_string(), "qmatmul_int4_f32: 4 columns per thread need n % 4 == 0, n = 10");
    let e = enigma_ops::quantize_weights(quant::Format::Fp4, &[0.0; 40], 40, 1, 32).unwrap_err();
    assert!(matches!(e, Error::Quant(quant::QuantError::KNotMultipleOfGroup { k: 40, group: 32, .. })), "{e}");
    // The tensor-core kernel's slice must lie inside one group.
    let deep = Options { gemm: GemmOptions { tile: Some("16x128x64/1x4".parse().unwrap()), ..GemmOptions::default() }, ..Options::default() };
    let e = enigma_ops::Ops::new(&rt).with_options(deep).qmatmul_tiled(&a, &w, 1, DType::F32).unwrap_err();
    assert_eq!(e.to_string(), "qgemm_int4_f32_16x128x64_sg1x4_s2: slices of 64 K values must divide the group of 32");
}

/// Runs `C = A · dequant(B)` for weights in MLX's affine format and checks
/// every element against an f64 product whose weights this test decodes
/// itself from the packed words, scales and biases (MLX's layout:
/// `packed[n][k/8]`, K value `k` at bits `4·(k % 8)`; `scale · code +
/// bias`); returns the name of every kernel dispatched.
fn check_affine(rt: &Runtime, out: DType, [m, n, k]: [usize; 3], group: usize, options: &Options) -> Vec<String> {
    let mut a = enigma_kernels::test_data(m * k, (m * 5 + n * 11 + k) as u64);
    enigma_ops::quantize(DType::F16, &mut a);
    // Columns of different offsets, so that the biases matter.
    let raw: Vec<f32> = enigma_kernels::test_data(k * n, (k * 7 + n) as u64).iter().enumerate().map(|(i, &v)| v + (i % n) as f32 * 0.25).collect();
    let q = enigma_ops::quantize_weights(quant::Format::MlxAffine, &raw, k, n, group).unwrap();
    let weights = QuantizedWeights::upload(rt, &q).unwrap();
    let ab = upload(rt, enigma_ir::Scalar::F16, &a).unwrap();
    let ops = enigma_ops::Ops::new(rt).with_options(options.clone());
    let c = ops.qmatmul(&ab, &weights, m, out).unwrap_or_else(|e| panic!("mlx_affine {m}x{n}x{k} g{group} {options:?}: {e}"));
    let launches = ops.take_launches();
    for l in &launches {
        assert!(l.report.findings.is_empty(), "{}: {:?}", l.kernel, l.report.findings);
    }
    let got = download(&c, out.scalar(), m * n).unwrap();
    // B[k][col] as (scale · code, bias), decoded here.
    let half = |bits: u16| f16_bits_to_f32(bits) as f64;
    let groups = k / group;
    let decoded = |kk: usize, col: usize| {
        let code = (q.packed[col * k / 8 + kk / 8] >> (4 * (kk % 8))) & 0xF;
        (half(q.scales[col * groups + kk / group]) * code as f64, half(q.biases[col * groups + kk / group]))
    };
    for r in 0..m {
        for col in 0..n {
            let (mut want, mut abs) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let (sc, bias) = decoded(kk, col);
                let av = a[r * k + kk] as f64;
                want += av * (sc + bias);
                // The kernel sums scale · Σ code · a and bias · Σ a apart.
                abs += av.abs() * (sc.abs() + bias.abs());
            }
            let bound = enigma_kernels::sum_bound(abs, k) + want.abs() * out.unit_roundoff() * 1.01 + 1e-7;
            let g = got[r * n + col];
            assert!((g - want).abs() <= bound, "mlx_affine {out} {m}x{n}x{k} g{group} {options:?}: C[{r}][{col}] = {g} want {want} (bound {bound})");
        }
    }
    launches.into_iter().map(|l| l.kernel).collect()
}

/// MLX's affine format on its own kernel at awkward shapes: M = 1, 3, 8
/// and 9 (two row blocks), N = 1, 7, 33, 100 (SIMD groups past N, a last
/// partial group of columns), K = 64, 128, 192 with groups of 32, 64 and
/// 128; one dispatch, also above `DECODE_ROWS` rows.
#[test]
fn mlx_affine_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let cases = [(1, 1, 64, 32), (3, 7, 128, 128), (8, 33, 192, 64), (9, 100, 128, 64), (1, 100, 192, 32), (3, 33, 64, 64), (9, 7, 192, 64), (8, 1, 128, 32)];
    for (m, n, k, group) in cases {
        for out in [DType::F32, DType::F16] {
            let names = check_affine(&rt, out, [m, n, k], group, &Options::default());
            assert_eq!(names.len(), 1, "{names:?}");
            assert!(names[0].starts_with(&format!("qmatmul_affine_{out}_r{}_", m.min(8))), "{names:?}");
        }
    }
    let names = check_affine(&rt, DType::F16, [20, 12, 64], 32, &Options::default());
    assert_eq!(names, ["qmatmul_affine_f16_r8_c1_w1_t256"]);
}

/// Every columns-per-SIMD-group and load width, small threadgroups (one
/// SIMD group; three), row blocks asked for, clean under the sanitizer.
#[test]
fn mlx_affine_variants_run_clean_under_the_sanitizer() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for cols in [1, 2, 4] {
        for words in [1, 2, 4] {
            for threads in [32, 96] {
                let options = Options { qmatmul: QmatmulOptions { columns_per_simdgroup: Some(cols), words_per_load: Some(words), ..QmatmulOptions::default() }, threads: Some(threads), sanitize: true, ..Options::default() };
                let names = check_affine(&rt, DType::F32, [2, 13, 128], 32, &options);
                assert_eq!(names, [format!("qmatmul_affine_f32_r2_c{cols}_w{words}_t{threads}")]);
            }
        }
    }
    let options = Options { qmatmul: QmatmulOptions { rows_per_threadgroup: Some(3), ..QmatmulOptions::default() }, vectorize: Some(false), sanitize: true, ..Options::default() };
    let names = check_affine(&rt, DType::F16, [7, 33, 192], 64, &options);
    assert_eq!(names, ["qmatmul_affine_f16_r3_c2_w1_t256"]);
}

#[test]
fn mlx_affine_errors_name_the_numbers() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let q = enigma_ops::quantize_weights(quant::Format::MlxAffine, &[0.5; 64 * 10], 64, 10, 32).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &[1.0; 64]).unwrap();
    let e = enigma_ops::Ops::new(&rt).qmatmul_tiled(&a, &w, 1, DType::F32).unwrap_err();
    assert!(matches!(e, Error::Argument { .. }), "{e:?}");
    assert_eq!(e.to_string(), "qmatmul_tiled: the tensor-core kernel reads fp4 or int4 in seed 002's [K/8][N] layout, not mlx_affine ([N][K/8] with biases; K = 64, N = 10): use qmatmul");
    let e = enigma_ops::qmatmul_with(&rt, &a, &w, 1, DType::F32, &Options { gemm: GemmOptions { k_splits: Some(2), ..GemmOptions::default() }, ..Options::default() }).unwrap_err();
    assert_eq!(e.to_string(), "qmatmul: 2 K splits asked for, but the kernel for mlx_affine splits K over the lanes of a SIMD group only (k_splits 1 or none)");
    let e = enigma_ops::qmatmul_with(&rt, &a, &w, 1, DType::F32, &Options { qmatmul: QmatmulOptions { words_per_load: Some(8), ..QmatmulOptions::default() }, ..Options::default() }).unwrap_err();
    assert!(matches!(e, Error::Shape(_)), "{e:?}");
    assert_eq!(e.to_string(), "qmatmul_mlx_affine_f32: 8 packed words per lane and load must be 1, 2 or 4");
    let e = enigma_ops::qmatmul(&rt, &a, &w, 2, DType::F32).unwrap_err();
    assert_eq!(e.to_string(), "qmatmul: `a` has 128 bytes, needs 256 (128 f16 elements)");
    // Biases short, missing, or given to a format without them.
    let short = upload(&rt, enigma_ir::Scalar::F16, &[0.0; 8]).unwrap();
    let w = QuantizedWeights { biases: Some(short), ..w };
    let e = enigma_ops::qmatmul(&rt, &a, &w, 1, DType::F32).unwrap_err();
    assert_eq!(e.to_string(), "qmatmul: `biases` has 16 bytes, needs 40 (20 f16 elements)");
    let w = QuantizedWeights { biases: None, ..w };
    let e = enigma_ops::qmatmul(&rt, &a, &w, 1, DType::F32).unwrap_err();
    assert_eq!(e.to_string(), "qmatmul: mlx_affine weights need `biases` (20 f16 values: K = 64, N = 10, group 32)");
    let int4 = enigma_ops::quantize_weights(quant::Format::Int4, &[0.5; 64 * 10], 64, 10, 32).unwrap();
    let extra = upload(&rt, enigma_ir::Scalar::F16, &[0.0; 20]).unwrap();
    let w = QuantizedWeights { biases: Some(extra), ..QuantizedWeights::upload(&rt, &int4).unwrap() };
    let e = enigma_ops::qmatmul(&rt, &a, &w, 1, DType::F32).unwrap_err();
    assert_eq!(e.to_string(), "qmatmul: int4 weights have no biases, but `biases` is given");
}

/// The fused kernel's threads are its tile's: a threadgroup size that
/// differs is refused with both numbers, the tile's own runs.
#[test]
fn the_fused_kernel_refuses_threads_its_tile_does_not_take() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let q = enigma_ops::quantize_weights(quant::Format::Int4, &[0.5; 64 * 8], 64, 8, 32).unwrap();
    let w = QuantizedWeights::upload(&rt, &q).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F16, &[1.0; 64]).unwrap();
    let ops = |threads| enigma_ops::Ops::new(&rt).with_options(Options { threads: Some(threads), ..Options::default() });
    let e = ops(256).qmatmul_fused(&a, &w, 1, DType::F32).unwrap_err();
    assert!(matches!(e, Error::Argument { .. }), "{e:?}");
    assert_eq!(e.to_string(), "qmatmul_fused: the tile 32x128x32/1x4 takes 128 threads, but the options ask for 256");
    let c = ops(128).qmatmul_fused(&a, &w, 1, DType::F32).unwrap();
    let got = download(&c, enigma_ir::Scalar::F32, 8).unwrap();
    let dq = enigma_ops::dequantize_weights(&q).unwrap();
    for (col, g) in got.iter().enumerate() {
        let want: f64 = (0..64).map(|k| dq[k * 8 + col] as f64).sum();
        assert!((g - want).abs() <= want.abs() * 1e-3, "column {col}: {g} want {want}");
    }
}
