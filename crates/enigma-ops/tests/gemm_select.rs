//! `Ops::matmul`'s tile: `select_tile`'s default is a configuration the
//! GEMM's own check accepts on every device's limits at awkward shapes, a
//! chosen tile (`GemmOptions::tile`) runs and matches the f64 reference on
//! the simulator, options that disagree are refused, f32 inputs run the
//! SIMT kernel unless a tile is asked for, and split counts sharing a
//! pipeline cache each run their own kernel.

use enigma_kernels::library::gemm::{reference, GemmConfig};
use enigma_kernels::library::DType;
use enigma_ops::library::gemm::select_tile;
use enigma_ops::{download, quantize, threadgroup_limits, upload, Error, GemmOptions, GemmTile, Ops, Options, ThreadgroupLimits};
use enigma_runtime::{Device, Runtime};

const AWKWARD: [u32; 6] = [1, 7, 33, 100, 1000, 4097];

fn config(tile: GemmTile, input: DType) -> GemmConfig {
    GemmConfig::from_tile(tile, input, DType::F32)
}

/// The kernel `Ops::matmul` runs for `tile` on the simulator: two
/// pipelined stages where they fit its threadgroup memory.
fn on_sim(rt: &Runtime, tile: GemmTile, input: DType) -> String {
    config(tile, input).pipelined_for(rt.device().max_threadgroup_memory_bytes).name()
}

#[test]
fn the_default_tile_passes_the_gemm_check_at_awkward_shapes() {
    let sim = threadgroup_limits(Runtime::new(Device::Sim).unwrap().device());
    let cuda = ThreadgroupLimits { max_threads: 1024, max_memory_bytes: 48 * 1024 };
    for limits in [sim, ThreadgroupLimits::PORTABLE, cuda] {
        for input in [DType::F16, DType::BF16, DType::F32] {
            for m in AWKWARD {
                for n in AWKWARD {
                    for k in AWKWARD {
                        let tile = select_tile(m, n, k, input.size_bytes(), &limits);
                        let cfg = config(tile, input).pipelined_for(limits.max_memory_bytes);
                        cfg.check(limits.max_memory_bytes).unwrap_or_else(|e| panic!("{m}x{n}x{k} {input}: {tile}: {e}"));
                        assert!(cfg.threads() <= limits.max_threads);
                    }
                }
            }
        }
    }
}

/// `ops.matmul` with `options` at `m × n × k` against the f64 reference;
/// returns the kernel it ran.
fn matmul(rt: &Runtime, options: Options, input: DType, m: usize, n: usize, k: usize) -> String {
    let data = |len: usize, seed: u64| {
        let mut v = enigma_kernels::test_data(len, seed);
        quantize(input, &mut v);
        v
    };
    let (a, b) = (data(m * k, 11), data(k * n, 12));
    let ops = Ops::new(rt).with_options(Options { elem: Some(input.scalar()), ..options });
    let c = ops.matmul(&upload(rt, input.scalar(), &a).unwrap(), &upload(rt, input.scalar(), &b).unwrap(), m, n, k, DType::F32).unwrap();
    let got = download(&c, enigma_ir::Scalar::F32, m * n).unwrap();
    let f = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
    let want = reference(&GemmConfig::new(input, DType::F32), &f(&a), &f(&b), &[], m, n, k, 1, 1.0, 0.0);
    // f32 sums of k products of values in [-1, 1).
    let tol = 4.0 * k as f64 * f32::EPSILON as f64;
    let kernel = ops.take_launches().remove(0).kernel;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= tol, "{kernel} at {m}x{n}x{k}: element {i} is {g}, want {w}");
    }
    kernel
}

#[test]
fn a_chosen_tile_runs_and_matches_the_reference() {
    let rt = Runtime::new(Device::Sim).unwrap();
    for (tile, input) in [("64x128x16/2x2", DType::F16), ("128x64x64/4x2", DType::BF16), ("64x64x32/1x2", DType::F32), ("32x128x32/1x4", DType::F16)] {
        let tile: GemmTile = tile.parse().unwrap();
        let kernel = matmul(&rt, Options { gemm: GemmOptions { tile: Some(tile), ..GemmOptions::default() }, ..Options::default() }, input, 70, 130, 41);
        assert_eq!(kernel, on_sim(&rt, tile, input));
    }
    // A tile and the same threads is fine; the default at M = 7 is the 16-row tile.
    let tile = GemmTile::new(64, 64, 32, 2, 1);
    assert_eq!(matmul(&rt, Options { gemm: GemmOptions { tile: Some(tile), ..GemmOptions::default() }, threads: Some(64), ..Options::default() }, DType::F16, 33, 7, 33), on_sim(&rt, tile, DType::F16));
    assert_eq!(matmul(&rt, Options::default(), DType::F16, 7, 100, 33), "gemm_f16_f32_16x128x32_sg1x4_s3");
}

/// Where the tile divides the shape, `Ops::matmul` runs the whole-tile
/// kernel (the pipeline alone), with K split too, and its ragged variant
/// where only M is not divided; elsewhere, or with the slices staged
/// through registers, the general kernel — each against the reference.
#[test]
fn divided_shapes_run_the_whole_tile_kernel() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let tile = GemmTile::new(64, 64, 32, 2, 2);
    let chosen = Options { gemm: GemmOptions { tile: Some(tile), ..GemmOptions::default() }, ..Options::default() };
    let general = on_sim(&rt, tile, DType::F16);
    for (m, n, k, suffix) in [(128, 64, 96, "_whole"), (64, 128, 32, "_whole"), (130, 64, 96, "_whole_ragged"), (128, 72, 96, ""), (128, 64, 100, "")] {
        let kernel = matmul(&rt, chosen.clone(), DType::F16, m, n, k);
        assert_eq!(kernel, format!("{general}{suffix}"), "{m}x{n}x{k}");
    }
    let split = matmul(&rt, Options { gemm: GemmOptions { k_splits: Some(2), ..chosen.gemm }, ..chosen.clone() }, DType::F16, 64, 64, 256);
    assert!(split.contains("_splitk") && split.ends_with("_whole"), "{split}");
    let registers = matmul(&rt, Options { gemm: GemmOptions { stages: Some(1), ..chosen.gemm }, ..chosen }, DType::F16, 128, 64, 96);
    assert_eq!(registers, config(tile, DType::F16).name());
}

#[test]
fn options_that_disagree_or_do_not_fit_are_refused() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let a = upload(&rt, enigma_ir::Scalar::F32, &[0.5; 64]).unwrap();
    let run = |options: Options| Ops::new(&rt).with_options(options).matmul(&a, &a, 8, 8, 8, DType::F32);
    let tile = GemmTile::new(64, 64, 32, 2, 2);
    let err = run(Options { gemm: GemmOptions { tile: Some(tile), ..GemmOptions::default() }, threads: Some(256), ..Options::default() }).unwrap_err();
    assert!(matches!(&err, Error::Argument { message, .. } if message.contains("takes 128 threads, but the options ask for 256")), "{err}");
    // 128×128×64 f32 needs 71680 bytes, over the simulator's 32 KiB.
    let err = run(Options { gemm: GemmOptions { tile: Some(GemmTile::new(128, 128, 64, 2, 2)), ..GemmOptions::default() }, ..Options::default() }).unwrap_err();
    assert!(matches!(&err, Error::Shape(_)) && err.to_string().contains("needs 71680 bytes of threadgroup memory (limit 32768)"), "{err}");
    let err = run(Options { gemm: GemmOptions { tile: Some(GemmTile::new(64, 64, 32, 3, 2)), ..GemmOptions::default() }, ..Options::default() }).unwrap_err();
    assert!(err.to_string().contains("SIMD groups do not divide"), "{err}");
}

/// f32 inputs run the SIMT kernel unless a tile is asked for (the
/// simulator is not Metal): its tile for the rows, 16 deep where that fits
/// the simulator's 32 KiB (128×128 does not), its blocks over the threads
/// asked for, K split as asked, against the reference like any other.
#[test]
fn f32_runs_the_simt_kernel_unless_a_tile_is_asked_for() {
    let rt = Runtime::new(Device::Sim).unwrap();
    // Above 64 rows the tile depends on the simulator's compute units (its
    // host's cores; the rule has its own test below).
    let wide = enigma_kernels::library::sgemm::SgemmConfig::for_shape(DType::F32, 70, 130, rt.device().compute_units);
    assert_eq!(matmul(&rt, Options::default(), DType::F32, 70, 130, 41), wide.deepened_for(rt.device().max_threadgroup_memory_bytes).name());
    assert_eq!(matmul(&rt, Options::threads(64), DType::F32, 33, 7, 100), "sgemm_f32_64x64x8_r8x8");
    // Few rows: a tile of 16, 32 or 64 rows.
    assert_eq!(matmul(&rt, Options { gemm: GemmOptions { k_splits: Some(3), ..GemmOptions::default() }, ..Options::default() }, DType::F32, 7, 33, 100), "sgemm_f32_16x128x16_r4x8_splitk");
    assert_eq!(matmul(&rt, Options::default(), DType::F32, 40, 130, 33), "sgemm_f32_64x128x16_r4x8");
    let tile = GemmTile::new(64, 64, 32, 2, 2);
    assert_eq!(matmul(&rt, Options { gemm: GemmOptions { tile: Some(tile), ..GemmOptions::default() }, ..Options::default() }, DType::F32, 33, 7, 100), on_sim(&rt, tile, DType::F32));
}

/// Two split counts through one pipeline cache, for the SIMT and the
/// SIMD-group kernel: each count runs its own kernel (the count is built
/// into the kernel, not into its name).
#[test]
fn split_counts_sharing_a_cache_each_run_their_own_kernel() {
    let rt = Runtime::new(Device::Sim).unwrap();
    let cache = enigma_ops::PipelineCache::default();
    let (m, n, k) = (7, 33, 100);
    for input in [DType::F32, DType::F16] {
        let data = |len: usize, seed: u64| {
            let mut v = enigma_kernels::test_data(len, seed);
            quantize(input, &mut v);
            v
        };
        let (a, b) = (data(m * k, 11), data(k * n, 12));
        let (ab, bb) = (upload(&rt, input.scalar(), &a).unwrap(), upload(&rt, input.scalar(), &b).unwrap());
        let f = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
        let want = reference(&GemmConfig::new(input, DType::F32), &f(&a), &f(&b), &[], m, n, k, 1, 1.0, 0.0);
        for splits in [2, 3] {
            let options = Options { gemm: GemmOptions { k_splits: Some(splits), ..GemmOptions::default() }, elem: Some(input.scalar()), ..Options::default() };
            let ops = Ops::new(&rt).with_cache(cache.clone()).with_options(options);
            let got = download(&ops.matmul(&ab, &bb, m, n, k, DType::F32).unwrap(), enigma_ir::Scalar::F32, m * n).unwrap();
            let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
            assert!(worst <= 4.0 * k as f64 * f32::EPSILON as f64, "{input} with {splits} splits: off by {worst}");
        }
    }
}

/// The SIMT kernel's tile for a shape: 128×64 where 128×128 tiles leave
/// compute units without one, and 16 deep only where two stages fit.
#[test]
fn the_simt_tile_fits_the_grid_and_the_memory() {
    use enigma_kernels::library::sgemm::SgemmConfig;
    use enigma_kernels::library::tile::TileShape;
    let tile = |m, n| {
        let c = SgemmConfig::for_shape(DType::F32, m, n, 132);
        (c.tile.m, c.tile.n)
    };
    assert_eq!(tile(4096, 4096), (128, 128));
    assert_eq!(tile(1024, 1024), (128, 64), "64 tiles of 128×128 for 132 units");
    assert_eq!(tile(16, 1024), (16, 128), "few rows keep their own tile");
    let base = SgemmConfig::new(DType::F32);
    assert_eq!(base.deepened_for(48 * 1024).tile.k, 16);
    assert_eq!(base.deepened_for(32 * 1024).tile.k, 8, "{} bytes at 16 deep", SgemmConfig { tile: TileShape { k: 16, ..base.tile }, ..base }.threadgroup_memory_bytes());
}
