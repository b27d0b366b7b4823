//! The tiled GEMMs on the simulator against the f64 reference: awkward
//! shapes (1, 7, 33, 100 and mixes), both transposes, f16/bf16/f32 inputs,
//! f16/f32 outputs, alpha and beta, batches, and sanitizer-clean runs — the
//! SIMD-group kernel (`GemmConfig`) and the SIMT f32 kernel (`SgemmConfig`).

use enigma_kernels::library::gemm::{gemm, reference, Edges, GemmConfig};
use enigma_kernels::library::tile::{GemmTile, TileShape};
use enigma_kernels::library::split::{splitk_reduce, splitk_reduce_dispatch, SplitSum};
use enigma_kernels::library::sgemm::{sgemm, SgemmConfig};
use enigma_kernels::library::{DType, Dispatch};
use enigma_ops::{download, quantize, upload};
use enigma_runtime::{Arg, Device, Runtime};

/// What [`run`] needs of a GEMM kernel: its kernel, its dispatch, its
/// types, its transposes and its K splits; `sequential` where every output
/// is a sequence of f32 `fma`s (the SIMT kernel), which [`run`] holds to
/// that sequence's error bound rather than the looser one of any f32 sum.
struct Plan {
    kernel: enigma_ir::Kernel,
    dispatch: Dispatch,
    input: DType,
    output: DType,
    trans: (bool, bool),
    splits: u32,
    /// The kernel sums the splits itself ([`SplitSum::LastThreadgroup`]).
    summed: bool,
    sequential: bool,
}

#[allow(clippy::too_many_arguments)]
fn check(rt: &Runtime, cfg: &GemmConfig, m: usize, n: usize, k: usize, batch: usize, alpha: f32, beta: f32, sanitize: bool) -> Vec<f64> {
    let plan = Plan {
        kernel: gemm(cfg),
        dispatch: cfg.dispatch(m as u32, n as u32, batch as u32),
        input: cfg.input,
        output: cfg.output,
        trans: (cfg.trans_a, cfg.trans_b),
        splits: cfg.splits,
        summed: cfg.splits > 1 && cfg.split_sum == SplitSum::LastThreadgroup,
        sequential: false,
    };
    run(rt, &plan, m, n, k, batch, alpha, beta, sanitize)
}

/// [`check`] for the SIMT f32 kernel.
#[allow(clippy::too_many_arguments)]
fn check_simt(rt: &Runtime, cfg: &SgemmConfig, m: usize, n: usize, k: usize, batch: usize, alpha: f32, beta: f32, sanitize: bool) -> Vec<f64> {
    let plan = Plan {
        kernel: sgemm(cfg),
        dispatch: cfg.dispatch(m as u32, n as u32, batch as u32),
        input: DType::F32,
        output: cfg.output,
        trans: (cfg.trans_a, cfg.trans_b),
        splits: cfg.splits,
        summed: false,
        sequential: true,
    };
    run(rt, &plan, m, n, k, batch, alpha, beta, sanitize)
}

/// Runs `plan` (and with K split the reduction) on random data, checks
/// every element of C against the f64 reference and returns C.
#[allow(clippy::too_many_arguments)]
fn run(rt: &Runtime, plan: &Plan, m: usize, n: usize, k: usize, batch: usize, alpha: f32, beta: f32, sanitize: bool) -> Vec<f64> {
    let (kernel, d) = (&plan.kernel, plan.dispatch);
    let p = rt.pipeline(kernel).unwrap();
    // Inputs rounded to their types, as the kernel sees them.
    let data = |dtype: DType, len: usize, seed: u64| {
        let mut v = enigma_kernels::test_data(len, seed);
        quantize(dtype, &mut v);
        v
    };
    let (a, b, c0) = (data(plan.input, batch * m * k, 1), data(plan.input, batch * k * n, 2), data(plan.output, batch * m * n, 3));
    let bufs = [(&a, plan.input), (&b, plan.input), (&c0, plan.output)].map(|(v, t)| upload(rt, t.scalar(), v).unwrap());
    // With K split, the first pass writes partial products to a workspace.
    let workspace = (plan.splits > 1).then(|| upload(rt, enigma_ir::Scalar::F32, &vec![f32::NAN; plan.splits as usize * batch * m * n]).unwrap());
    // Summed in the kernel: C, then the workspace and a zeroed ticket per tile.
    let c_arg = if plan.summed { &bufs[2] } else { workspace.as_ref().unwrap_or(&bufs[2]) };
    let mut args: Vec<Arg<'_>> = [&bufs[0], &bufs[1], c_arg].into_iter().map(Arg::from).collect();
    let u = |v: usize| Arg::Value(enigma_ir::Literal::u32(v as u32));
    args.extend([u(m), u(n), u(k), Arg::Value(enigma_ir::Literal::f32(alpha)), Arg::Value(enigma_ir::Literal::f32(beta)), u(m * k)]);
    // The vector views `a4` and `b4` of the same buffers.
    args.extend([Arg::from(&bufs[0]), Arg::from(&bufs[1])]);
    let tickets = plan.summed.then(|| rt.buffer_zeroed::<u32>((d.size[0] * d.size[1]) as usize * batch).unwrap());
    if let (Some(ws), Some(t)) = (&workspace, &tickets) {
        args.extend([Arg::from(ws), Arg::from(t)]);
    }
    let options = enigma_runtime::Options { sanitize, ..Default::default() };
    rt.dispatch(&p, &args, enigma_runtime::DispatchMode::Threadgroups, d.size, d.threads, &options)
        .unwrap_or_else(|e| panic!("{} at {m}x{n}x{k}: {e}", kernel.name));
    if let Some(t) = &tickets {
        assert!(t.to_vec::<u32>().unwrap().iter().all(|&x| x == 0), "{}: the last threadgroups leave every ticket at 0", kernel.name);
    }
    if let Some(ws) = workspace.as_ref().filter(|_| !plan.summed) {
        let reduce = rt.pipeline(&splitk_reduce(plan.output, 1)).unwrap();
        let total = (batch * m * n) as u32;
        let u32v = |v: u32| Arg::Value(enigma_ir::Literal::u32(v));
        let f32v = |v: f32| Arg::Value(enigma_ir::Literal::f32(v));
        let args = [Arg::from(ws), Arg::from(&bufs[2]), u32v((m * n) as u32), u32v(total), u32v(plan.splits), f32v(alpha), f32v(beta)];
        let d = splitk_reduce_dispatch(total);
        rt.dispatch(&reduce, &args, enigma_runtime::DispatchMode::Threadgroups, d.size, d.threads, &options).unwrap_or_else(|e| panic!("split-K reduction: {e}"));
    }
    let f = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
    let (trans_a, trans_b) = plan.trans;
    let transposes = GemmConfig { trans_a, trans_b, ..GemmConfig::new(plan.input, plan.output) };
    let want = reference(&transposes, &f(&a), &f(&b), &f(&c0), m, n, k, batch, alpha as f64, beta as f64);
    let got = download(&bufs[2], plan.output.scalar(), batch * m * n).unwrap();
    // f32 accumulation of k products of values in [-1, 1), then one rounding
    // to the output type; a sequence of fmas (one per K value, one per split
    // in the reduction, two for alpha and beta) errs by at most (k + splits
    // + 2)·u times the sum of the magnitudes of its terms.
    let abs = |v: &[f32]| v.iter().map(|x| x.abs() as f64).collect::<Vec<_>>();
    let magnitudes = plan.sequential.then(|| reference(&transposes, &abs(&a), &abs(&b), &abs(&c0), m, n, k, batch, alpha.abs() as f64, beta.abs() as f64));
    let tol = |i: usize, w: f64| {
        let rounding = w.abs() * plan.output.unit_roundoff() * 2.0 + 1e-30;
        match &magnitudes {
            Some(mag) => (k as f64 + plan.splits as f64 + 2.0) * DType::F32.unit_roundoff() * mag[i] + rounding + plan.output.underflow_error(),
            None => 4.0 * k as f64 * f32::EPSILON as f64 + rounding,
        }
    };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= tol(i, *w), "{} at {m}x{n}x{k} batch {batch}: element {i} is {g}, want {w}", kernel.name);
    }
    got
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
    let tile = enigma_ops::library::gemm::select_tile(m, 4096, 4096, input.size_bytes(), &enigma_ops::ThreadgroupLimits::PORTABLE);
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
    assert_eq!(small(DType::F16, DType::F32, 16).tile.shape.m, 16);
    // 86 tiles of 128 columns at M = 16 want 4 splits for 264 threadgroups.
    assert_eq!(small(DType::F16, DType::F32, 16).splits_for(16, 11008, 4096, 264), 4);
}

/// K split summed by each tile's last threadgroup (`SplitSum::LastThreadgroup`)
/// gives C bit for bit as the reduction's second dispatch does: the general
/// kernel at edge tiles, a split with no K, alpha and beta, batches, f16
/// output, and the pipelined whole-tile kernel with rows past M; clean under
/// the sanitizer, which follows the fences and tickets, and every ticket
/// back at 0.
#[test]
fn split_k_summed_by_the_last_threadgroup_matches_the_reduction() {
    let rt = runtime();
    let pipelined = GemmConfig { tile: GemmTile::new(64, 64, 32, 1, 2), stages: 2, ..GemmConfig::new(DType::F16, DType::F16) };
    let cases = [
        (GemmConfig { splits: 3, ..small(DType::F16, DType::F32, 7) }, (7, 33, 100, 1), (1.0, 0.0)),
        (GemmConfig { splits: 2, ..small(DType::F16, DType::F16, 16) }, (16, 40, 128, 2), (0.5, -2.0)),
        (GemmConfig { splits: 4, ..GemmConfig::new(DType::F32, DType::F32) }, (70, 65, 257, 1), (1.0, 0.0)),
        (GemmConfig { splits: 2, ..pipelined }.whole_tiles_for(64, 128, 256), (64, 128, 256, 1), (1.0, 0.0)),
        (GemmConfig { splits: 3, ..pipelined }.whole_tiles_for(50, 64, 192), (50, 64, 192, 2), (1.0, 0.0)),
    ];
    for (cfg, (m, n, k, batch), (alpha, beta)) in cases {
        let reduced = check(&rt, &cfg, m, n, k, batch, alpha, beta, true);
        let summed = GemmConfig { split_sum: SplitSum::LastThreadgroup, ..cfg };
        assert!(gemm(&summed).name.contains("_splitk_sum"), "{}", gemm(&summed).name);
        assert_eq!(check(&rt, &summed, m, n, k, batch, alpha, beta, true), reduced, "{} at {m}x{n}x{k}", summed.name());
    }
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
            let cfg = GemmConfig { tile: GemmTile::new(tm, tn, 32, 1, sg_cols), stages, ..GemmConfig::new(input, DType::F32) };
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

/// The whole-tile kernel (shapes the tile divides, and its variant for rows
/// past M): one to several slices
/// per split, f32 output through the matrix store and — alpha, beta or
/// 16-bit output — element by element, both transposes, batches and
/// split-K, clean under the sanitizer (the copies of slices past the last,
/// still in flight after the loop, are waited for before anything else
/// touches their stages). A shape the tile does not divide takes the
/// general kernel, and the whole-tile kernel given one writes nothing.
#[test]
fn whole_tiles_match_the_reference() {
    let rt = runtime();
    for input in [DType::F16, DType::F32] {
        let (tm, tn, sg_cols) = if input == DType::F32 { (32, 32, 1) } else { (64, 64, 2) };
        for (stages, tk) in [(2, 32), (3, 16), (3, 32)] {
            let base = GemmConfig { tile: GemmTile::new(tm, tn, tk, 1, sg_cols), stages, ..GemmConfig::new(input, DType::F32) };
            let whole = base.whole_tiles_for(128, 64, 96);
            assert!(whole.edges == Edges::WholeTiles && whole.name().ends_with("_whole"), "{}", whole.name());
            for (m, n, k) in [(tm as usize, tn as usize, tk as usize), (128, 64, 96), (64, 128, 32 * 7)] {
                check(&rt, &whole, m, n, k, 1, 1.0, 0.0, true);
            }
            check(&rt, &GemmConfig { output: input, ..whole }, 64, 64, 64, 2, 0.5, -2.0, true);
            check(&rt, &GemmConfig { trans_a: true, trans_b: true, ..whole }, 64, 128, 64, 1, 1.0, 0.0, true);
            check(&rt, &GemmConfig { splits: 3, ..whole }, 64, 64, 4 * tk as usize, 1, 0.5, 1.0, true);
        }
        // Rows past M (A untransposed): the ragged variant, its A rows
        // zero-filled and its last row of tiles stored row by row.
        let base = GemmConfig { tile: GemmTile::new(tm, tn, 32, 1, sg_cols), stages: 2, ..GemmConfig::new(input, DType::F32) };
        let ragged = base.whole_tiles_for(tm + 8, tn, 64);
        assert!(ragged.edges == Edges::RaggedRows && ragged.name().ends_with("_whole_ragged"), "{}", ragged.name());
        assert_eq!(base.whole_tiles_for(tm, tn, 64).edges, Edges::WholeTiles);
        for (m, n, k) in [(tm as usize + 8, tn as usize, 64), (1, 2 * tn as usize, 96), (3 * tm as usize - 5, tn as usize, 32)] {
            check(&rt, &ragged, m, n, k, 1, 1.0, 0.0, true);
        }
        check(&rt, &GemmConfig { output: input, ..ragged }, 7, tn as usize, 64, 2, 0.5, -2.0, true);
        check(&rt, &GemmConfig { splits: 2, ..ragged }, 9, tn as usize, 128, 1, 1.0, 0.0, true);
        // Not divided along N or K, or rows past M with A transposed: the
        // plan keeps the general kernel.
        for (m, n, k) in [(tm, tn + 8, 64), (tm, tn, 40)] {
            assert_eq!(base.whole_tiles_for(m, n, k).edges, Edges::Checked, "{m}x{n}x{k}");
        }
        assert_eq!(GemmConfig { trans_a: true, ..base }.whole_tiles_for(tm + 8, tn, 64).edges, Edges::Checked);
        assert!(GemmConfig { trans_a: true, ..ragged }.check(u64::MAX).is_err());
        // Not pipelined: no whole-tile kernel, and asking for one is an error.
        let registers = GemmConfig { stages: 1, ..base };
        assert_eq!(registers.whole_tiles_for(128, 128, 64).edges, Edges::Checked);
        let err = GemmConfig { edges: Edges::WholeTiles, ..registers }.check(u64::MAX).unwrap_err().to_string();
        assert!(err.contains("2 stages or more"), "{err}");
    }
    // Given a shape it does not divide, the kernel leaves C as it was.
    let whole = GemmConfig { tile: GemmTile::new(64, 64, 32, 1, 2), stages: 2, edges: Edges::WholeTiles, ..GemmConfig::new(DType::F16, DType::F32) };
    let p = rt.pipeline(&gemm(&whole)).unwrap();
    let (m, n, k) = (64usize, 64usize, 40usize);
    let a = upload(&rt, enigma_ir::Scalar::F16, &vec![1.0; m * k]).unwrap();
    let b = upload(&rt, enigma_ir::Scalar::F16, &vec![1.0; k * n]).unwrap();
    let c = upload(&rt, enigma_ir::Scalar::F32, &vec![7.0; m * n]).unwrap();
    let u = |v: usize| Arg::Value(enigma_ir::Literal::u32(v as u32));
    let f = |v: f32| Arg::Value(enigma_ir::Literal::f32(v));
    let args = [Arg::from(&a), Arg::from(&b), Arg::from(&c), u(m), u(n), u(k), f(1.0), f(0.0), u(m * k), Arg::from(&a), Arg::from(&b)];
    let d = whole.dispatch(m as u32, n as u32, 1);
    rt.dispatch(&p, &args, enigma_runtime::DispatchMode::Threadgroups, d.size, d.threads, &Default::default()).unwrap();
    assert!(download(&c, enigma_ir::Scalar::F32, m * n).unwrap().iter().all(|&v| v == 7.0));
}

#[test]
fn transposes_types_alpha_beta_and_batches() {
    let rt = runtime();
    for (input, output) in [(DType::F32, DType::F32), (DType::BF16, DType::BF16), (DType::F16, DType::F16)] {
        for (trans_a, trans_b) in [(true, false), (false, true), (true, true)] {
            let cfg = GemmConfig { trans_a, trans_b, tile: GemmTile::new(32, 64, 32, 1, 2), ..GemmConfig::new(input, output) };
            check(&rt, &cfg, 37, 70, 41, 2, 0.5, -2.0, false);
        }
    }
}

#[test]
fn runs_clean_under_the_sanitizer() {
    let rt = Runtime::new(Device::Sim).unwrap();
    check(&rt, &GemmConfig::new(DType::F16, DType::F32), 65, 70, 40, 1, 1.0, 1.0, true);
}

/// A smaller SIMT tile (64×64 over 64 threads, 16 deep) that keeps the
/// simulator quick and puts several tiles on the awkward shapes.
fn small_simt(output: DType) -> SgemmConfig {
    SgemmConfig::new(output).with_threads(64).map(|c| SgemmConfig { tile: TileShape { k: 16, ..c.tile }, ..c }).unwrap()
}

/// The SIMT f32 GEMM: awkward shapes (one element, partial tiles along
/// every side, a partial last slice of K), rows that are and are not whole
/// `float4`s, both transposes, batches, alpha and beta, f16/bf16 outputs.
#[test]
fn simt_awkward_shapes_match_the_reference() {
    let rt = runtime();
    let cfg = SgemmConfig::new(DType::F32);
    for (m, n, k) in [(1, 1, 1), (7, 33, 100), (100, 7, 33), (129, 130, 17), (128, 128, 24)] {
        check_simt(&rt, &cfg, m, n, k, 1, 1.0, 0.0, false);
    }
    let small = small_simt(DType::F32);
    for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
        let cfg = SgemmConfig { trans_a, trans_b, ..small };
        // 68 and 36: whole float4 rows either way; 37 and 70: not along K.
        check_simt(&rt, &cfg, 68, 132, 36, 2, 0.5, -2.0, false);
        check_simt(&rt, &cfg, 37, 70, 41, 2, 0.5, -2.0, false);
    }
    for output in [DType::F16, DType::BF16] {
        check_simt(&rt, &SgemmConfig { trans_b: true, ..small_simt(output) }, 33, 65, 20, 2, 1.0, 1.0, false);
    }
    // The small-M tiles: threads that have no vector of A's slice to load
    // (16 rows: 32 vectors for 64 threads).
    for m in [1, 16, 17, 40] {
        let cfg = SgemmConfig::for_rows(DType::F32, m);
        check_simt(&rt, &cfg, m as usize, 130, 33, 1, 1.0, 0.0, false);
        check_simt(&rt, &SgemmConfig { trans_a: true, trans_b: true, ..cfg }, m as usize, 70, 20, 2, 0.5, -2.0, false);
    }
}

/// Unusual but valid SIMT shapes: one SIMD group (64×32), 1024 threads of
/// 4×4, slices of 4 K values (fewer vectors than threads) and of 12 (not a
/// power of two), 4×4 blocks in a 128×64 tile.
#[test]
fn simt_configurations_off_the_default_match_the_reference() {
    let rt = runtime();
    let base = SgemmConfig::new(DType::F32);
    let configs = [
        base.with_threads(32).unwrap(),
        base.with_threads(1024).unwrap(),
        SgemmConfig { tile: TileShape { k: 4, ..base.tile }, ..base },
        SgemmConfig { tile: TileShape { n: 64, k: 12, ..base.tile }, rm: 4, rn: 4, ..base },
    ];
    for cfg in configs {
        for (trans_a, trans_b) in [(false, false), (true, true)] {
            check_simt(&rt, &SgemmConfig { trans_a, trans_b, ..cfg }, 70, 65, 30, 1, 1.0, 0.0, false);
        }
    }
}

/// Each output of the SIMT kernel is the SIMD-group kernel's on the same
/// device bit for bit: both accumulate `fma`s in increasing K from 0 (on
/// the simulator, and on CUDA, whose f32 SIMD-group tiles are `fmaf`s).
#[test]
fn simt_matches_the_simd_group_kernel_bit_for_bit() {
    let rt = runtime();
    for (trans_a, trans_b) in [(false, false), (true, true)] {
        let simt = SgemmConfig { trans_a, trans_b, ..small_simt(DType::F32) };
        let matrices = GemmConfig { trans_a, trans_b, ..GemmConfig::new(DType::F32, DType::F32) };
        for (m, n, k) in [(65, 70, 40), (7, 130, 33)] {
            let (got, want) = (check_simt(&rt, &simt, m, n, k, 1, 1.0, 0.0, false), check(&rt, &matrices, m, n, k, 1, 1.0, 0.0, false));
            assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "{} and {} differ at {m}x{n}x{k}", simt.name(), matrices.name());
        }
    }
}

/// K split over threadgroups (the last split short or empty) with the
/// GEMM's reduction, and a run clean under the sanitizer: every staged
/// value written before it is read, no race between the two stages.
#[test]
fn simt_split_k_and_the_sanitizer() {
    let rt = runtime();
    // 100 = 48 + 48 + 4 over 3 splits of 3 slices of 16.
    check_simt(&rt, &SgemmConfig { splits: 3, ..small_simt(DType::F32) }, 7, 33, 100, 1, 1.0, 0.0, false);
    check_simt(&rt, &SgemmConfig { splits: 2, trans_a: true, ..small_simt(DType::F16) }, 16, 40, 128, 2, 0.5, -2.0, true);
    let sim = Runtime::new(Device::Sim).unwrap();
    check_simt(&sim, &SgemmConfig::new(DType::F32), 130, 70, 41, 1, 1.0, 1.0, true);
}

/// One source of truth: what `enigma tiles --variant staged` plans for the
/// default 16-bit configuration (threadgroup memory, SIMD-group partition,
/// accumulator fragments, threads) is what the compiled kernel declares.
#[test]
fn the_planner_reports_what_the_kernel_uses() {
    use enigma_analysis::tiles::{plan_tile, TileConfig, TileVariant, WeightFormat};
    let device = enigma_analysis::catalog::find("m4-max").unwrap();
    let pipelined = GemmConfig { tile: GemmTile::new(64, 64, 32, 2, 2), stages: 2, ..GemmConfig::new(DType::F16, DType::F32) };
    let whole = GemmConfig { edges: Edges::WholeTiles, ..pipelined };
    for cfg in [GemmConfig::new(DType::F16, DType::F32), GemmConfig::new(DType::BF16, DType::F32), pipelined, whole] {
        let planned = TileConfig {
            simdgroups: cfg.tile.sg_rows * cfg.tile.sg_cols,
            sg_grid: Some([cfg.tile.sg_rows, cfg.tile.sg_cols]),
            stages: cfg.stages,
            ..TileConfig::new(cfg.tile.shape, TileVariant::Staged, WeightFormat::Fp16)
        };
        let report = plan_tile(&planned, &device, None).unwrap();
        let kernel = gemm(&cfg);
        let declared: u64 = kernel.threadgroup_arrays.iter().map(|a| a.size_bytes()).sum();
        assert_eq!((report.tg_memory_bytes, cfg.threadgroup_memory_bytes()), (declared, declared), "{}", kernel.name);
        assert_eq!(report.partition.grid, [cfg.tile.sg_rows, cfg.tile.sg_cols]);
        assert_eq!(report.threads_per_threadgroup, cfg.threads());
        // Accumulator 8×8 fragments per SIMD group: the kernel's f32 tile holds
        // 2 elements per lane per fragment.
        assert_eq!(report.accumulators_per_simdgroup * 2, cfg.accumulators_per_lane(), "{}", kernel.name);
        assert!(report.fits);
    }
}
