//! The tiled GEMM on the simulator against the f64 reference: awkward
//! shapes (1, 7, 33, 100 and mixes), both transposes, f16/bf16/f32 inputs,
//! f16/f32 outputs, alpha and beta, batches, and a sanitizer-clean run.

use enigma_kernels::library::gemm::{gemm, reference, splitk_reduce, splitk_reduce_dispatch, GemmConfig};
use enigma_kernels::library::DType;
use enigma_ops::{download, quantize, upload};
use enigma_runtime::{Arg, Device, Runtime};

#[allow(clippy::too_many_arguments)]
fn check(rt: &Runtime, cfg: &GemmConfig, m: usize, n: usize, k: usize, batch: usize, alpha: f32, beta: f32, sanitize: bool) {
    let kernel = gemm(cfg);
    let p = rt.pipeline(&kernel).unwrap();
    // Inputs rounded to their types, as the kernel sees them.
    let data = |dtype: DType, len: usize, seed: u64| {
        let mut v = enigma_kernels::test_data(len, seed);
        quantize(dtype, &mut v);
        v
    };
    let (a, b, c0) = (data(cfg.input, batch * m * k, 1), data(cfg.input, batch * k * n, 2), data(cfg.output, batch * m * n, 3));
    let bufs = [(&a, cfg.input), (&b, cfg.input), (&c0, cfg.output)].map(|(v, t)| upload(rt, t.scalar(), v).unwrap());
    // With K split, the first pass writes partial products to a workspace.
    let workspace = (cfg.splits > 1).then(|| upload(rt, enigma_ir::Scalar::F32, &vec![f32::NAN; cfg.splits as usize * batch * m * n]).unwrap());
    let mut args: Vec<Arg<'_>> = [&bufs[0], &bufs[1], workspace.as_ref().unwrap_or(&bufs[2])].into_iter().map(Arg::from).collect();
    let u = |v: usize| Arg::Value(enigma_ir::Literal::u32(v as u32));
    args.extend([u(m), u(n), u(k), Arg::Value(enigma_ir::Literal::f32(alpha)), Arg::Value(enigma_ir::Literal::f32(beta))]);
    // The vector views `a4` and `b4` of the same buffers.
    args.extend([Arg::from(&bufs[0]), Arg::from(&bufs[1])]);
    let d = cfg.dispatch(m as u32, n as u32, batch as u32);
    let options = enigma_runtime::Options { sanitize, ..Default::default() };
    rt.dispatch(&p, &args, enigma_runtime::Mode::Threadgroups, d.size, d.threads, &options)
        .unwrap_or_else(|e| panic!("{} at {m}x{n}x{k}: {e}", kernel.name));
    if let Some(ws) = &workspace {
        let reduce = rt.pipeline(&splitk_reduce(cfg.output)).unwrap();
        let total = (batch * m * n) as u32;
        let u32v = |v: u32| Arg::Value(enigma_ir::Literal::u32(v));
        let f32v = |v: f32| Arg::Value(enigma_ir::Literal::f32(v));
        let args = [Arg::from(ws), Arg::from(&bufs[2]), u32v((m * n) as u32), u32v(total), u32v(cfg.splits), f32v(alpha), f32v(beta)];
        let d = splitk_reduce_dispatch(total);
        rt.dispatch(&reduce, &args, enigma_runtime::Mode::Threadgroups, d.size, d.threads, &options).unwrap_or_else(|e| panic!("split-K reduction: {e}"));
    }
    let f = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
    let want = reference(cfg, &f(&a), &f(&b), &f(&c0), m, n, k, batch, alpha as f64, beta as f64);
    let got = download(&bufs[2], cfg.output.scalar(), batch * m * n).unwrap();
    // f32 accumulation of k products of values in [-1, 1), then one rounding
    // to the output type.
    let tol = |w: f64| 4.0 * k as f64 * f32::EPSILON as f64 + w.abs() * cfg.output.unit_roundoff() * 2.0 + 1e-30;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= tol(*w), "{} at {m}x{n}x{k} batch {batch}: element {i} is {g}, want {w}", kernel.name);
    }
}

/// The simulator, or the device `ENIGMA_TEST_DEVICE` names (`cuda`), so
/// the same checks run on a GPU machine.
fn runtime() -> Runtime {
    match std::env::var("ENIGMA_TEST_DEVICE").as_deref() {
        Ok("cuda") => Runtime::new(Device::Cuda).expect("ENIGMA_TEST_DEVICE=cuda needs a CUDA device"),
        _ => Runtime::new(Device::Sim).unwrap(),
    }
}

#[test]
fn awkward_shapes_match_the_reference() {
    let rt = runtime();
    let cfg = GemmConfig::new(DType::F16, DType::F32);
    for (m, n, k) in [(1, 1, 1), (7, 7, 7), (33, 33, 33), (100, 7, 33), (1, 100, 65), (70, 65, 100), (130, 200, 257), (1000, 33, 40), (3, 4097, 24)] {
        check(&rt, &cfg, m, n, k, 1, 1.0, 0.0, false);
    }
}

/// The untuned tile for `m` rows at the portable limits.
fn small(input: DType, output: DType, m: u32) -> GemmConfig {
    let tile = enigma_analysis::tiles::select_gemm_tile(m, 4096, 4096, input.size_bytes(), &enigma_analysis::tiles::ThreadgroupLimits::PORTABLE);
    GemmConfig::from_tile(tile, input, output)
}

/// K split over threadgroups: every split's stretch of whole slices (the
/// last one shorter or empty), partial products summed by the reduction
/// with alpha and beta, batches, small-M tiles, clean under the sanitizer.
#[test]
fn split_k_matches_the_reference() {
    let rt = runtime();
    for input in [DType::F16, DType::F32] {
        // 100 = 64 + 36 over 3 splits of 64: the third split has no K.
        check(&rt, &GemmConfig { splits: 3, ..small(input, DType::F32, 7) }, 7, 33, 100, 1, 1.0, 0.0, false);
        check(&rt, &GemmConfig { splits: 4, ..GemmConfig::new(input, DType::F32) }, 130, 70, 257, 1, 1.0, 0.0, false);
        check(&rt, &GemmConfig { splits: 2, ..small(input, input, 16) }, 16, 40, 128, 2, 0.5, -2.0, true);
    }
    assert_eq!(small(DType::F16, DType::F32, 16).tm, 16);
    // 86 tiles of 128 columns at M = 16 want 4 splits for 264 threadgroups.
    assert_eq!(small(DType::F16, DType::F32, 16).splits_for(16, 11008, 4096, 264), 4);
}

/// Shapes whose interior slices take the vector path (rows 4-aligned, the
/// slice inside the matrix) next to edge tiles that do not.
#[test]
fn aligned_shapes_stage_whole_vectors() {
    let rt = runtime();
    for input in [DType::F16, DType::F32] {
        let cfg = GemmConfig::new(input, DType::F32);
        for (m, n, k) in [(128, 128, 64), (256, 136, 96), (136, 260, 100)] {
            check(&rt, &cfg, m, n, k, 1, 1.0, 0.0, false);
        }
        for (trans_a, trans_b) in [(true, false), (false, true), (true, true)] {
            check(&rt, &GemmConfig { trans_a, trans_b, ..cfg }, 128, 192, 64, 2, 1.0, 0.0, false);
        }
    }
}

/// Pipelined staging (asynchronous copies into 2 or 3 stages) where the
/// rows hold whole 16-byte copies: slice counts of 1, 2, 3 and more, a
/// partial last slice after the pipeline (K = 104), rows that are not
/// whole copies (K = 36 for 16-bit inputs: the register path), edge tiles,
/// transposes, batches and split-K — clean under the sanitizer, which
/// checks that no stage is read or refilled while its copies are in flight.
#[test]
fn pipelined_stages_match_the_reference() {
    let rt = runtime();
    for input in [DType::F16, DType::F32] {
        // Three stages within the simulator's 32 KiB.
        let (tm, tn, sg_cols) = if input == DType::F32 { (32, 32, 1) } else { (64, 64, 2) };
        for stages in [2, 3] {
            let cfg = GemmConfig { tm, tn, sg_rows: 1, sg_cols, stages, ..GemmConfig::new(input, DType::F32) };
            for (m, n, k) in [(64, 64, 32), (64, 128, 64), (128, 136, 96), (70, 130, 104), (64, 64, 36), (33, 72, 200)] {
                check(&rt, &cfg, m, n, k, 1, 1.0, 0.0, true);
            }
            for (trans_a, trans_b) in [(true, false), (false, true), (true, true)] {
                check(&rt, &GemmConfig { trans_a, trans_b, ..cfg }, 64, 128, 96, 2, 0.5, -2.0, true);
            }
            check(&rt, &GemmConfig { splits: 2, ..cfg }, 64, 64, 256, 1, 1.0, 0.0, true);
        }
    }
    // Two stages where they fit the device's threadgroup memory.
    let base = GemmConfig::new(DType::F16, DType::F32);
    assert_eq!((base.pipelined_for(48 * 1024).stages, base.pipelined_for(32 * 1024).stages), (2, 1));
    assert_eq!(base.pipelined_for(48 * 1024).threadgroup_memory_bytes(), 2 * base.threadgroup_memory_bytes());
}

#[test]
fn transposes_types_alpha_beta_and_batches() {
    let rt = runtime();
    for (input, output) in [(DType::F32, DType::F32), (DType::BF16, DType::BF16), (DType::F16, DType::F16)] {
        for (trans_a, trans_b) in [(true, false), (false, true), (true, true)] {
            let cfg = GemmConfig { trans_a, trans_b, tm: 32, tn: 64, sg_rows: 1, ..GemmConfig::new(input, output) };
            check(&rt, &cfg, 37, 70, 41, 2, 0.5, -2.0, false);
        }
    }
}

#[test]
fn runs_clean_under_the_sanitizer() {
    let rt = Runtime::new(Device::Sim).unwrap();
    check(&rt, &GemmConfig::new(DType::F16, DType::F32), 65, 70, 40, 1, 1.0, 1.0, true);
}

/// One source of truth: what `enigma tiles --variant staged` plans for the
/// default 16-bit configuration (threadgroup memory, SIMD-group partition,
/// accumulator fragments, threads) is what the compiled kernel declares.
#[test]
fn the_planner_reports_what_the_kernel_uses() {
    use enigma_analysis::tiles::{plan_tile, TileConfig, TileShape, TileVariant, WeightFormat};
    let device = enigma_analysis::catalog::find("m4-max").unwrap();
    let pipelined = GemmConfig { tm: 64, tn: 64, stages: 2, ..GemmConfig::new(DType::F16, DType::F32) };
    for cfg in [GemmConfig::new(DType::F16, DType::F32), GemmConfig::new(DType::BF16, DType::F32), pipelined] {
        let planned = TileConfig {
            simdgroups: cfg.sg_rows * cfg.sg_cols,
            sg_grid: Some([cfg.sg_rows, cfg.sg_cols]),
            stages: cfg.stages,
            ..TileConfig::new(TileShape::new(cfg.tm, cfg.tn, cfg.tk), TileVariant::Staged, WeightFormat::Fp16)
        };
        let report = plan_tile(&planned, &device, None).unwrap();
        let kernel = gemm(&cfg);
        let declared: u64 = kernel.threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
        assert_eq!((report.tg_memory_bytes, cfg.threadgroup_memory_bytes()), (declared, declared), "{}", kernel.name);
        assert_eq!(report.partition.grid, [cfg.sg_rows, cfg.sg_cols]);
        assert_eq!(report.threads_per_threadgroup, cfg.threads());
        // Accumulator 8×8 fragments per SIMD group: the kernel's f32 tile holds
        // 2 elements per lane per fragment.
        assert_eq!(report.accumulators_per_simdgroup * 2, cfg.accumulators_per_lane(), "{}", kernel.name);
        assert!(report.fits);
    }
}
