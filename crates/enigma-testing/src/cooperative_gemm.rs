//! The GEMM on cooperative tensors (`gemm::cooperative`) checked on a
//! runtime against an f64 triple loop written here, for the simulator
//! (`enigma-ops/tests/gemm_cooperative.rs`, under the sanitizer) and a CUDA
//! GPU (`enigma-cuda/tests/gemm_cooperative.rs`, `wgmma` on sm_90a): through
//! `Ops::matmul_batched`, asked for with `GemmOptions::cooperative`, at
//! shapes that leave partial tiles along M, N and K ([`check_matmul`]);
//! and dispatched directly with alpha, beta and 16-bit outputs
//! ([`check_epilogue`]), with one A for every product and a row bias
//! ([`check_shared_a_and_bias`]), at each pipeline depth ([`check_pipeline_depths`])
//! and in each walk over the tiles ([`check_rasterisation`]), the
//! persistent kernel ([`check_persistence`]) and the kernel staged by tile
//! copies ([`check_tile_copies`]).

use enigma_kernels::library::gemm::cooperative::DEFAULT_RASTER;
use enigma_kernels::library::gemm::{gemm_cooperative, CoopGemmConfig};
use enigma_ops::{download, quantize, upload, DType, GemmOptions, Ops, Options};
use enigma_runtime::{Arg, DispatchMode, Runtime};

/// Values in [-0.5, 0.5), rounded to `dtype`.
fn values(n: usize, seed: usize, dtype: DType) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n).map(|i| (((i + seed) * 2654435761) % 1021) as f32 / 1021.0 - 0.5).collect();
    quantize(dtype, &mut x);
    x
}

/// How the products of a batch take A and a bias: `shared_a`, one A for
/// every product (A's batch stride 0); `bias`, a value per row of C added
/// to every product.
#[derive(Clone, Copy, Default)]
struct Extras<'a> {
    shared_a: bool,
    bias: Option<&'a [f32]>,
}

/// `alpha·A·B + beta·C (+ bias[row])` over `batch` matrices, in f64.
#[allow(clippy::too_many_arguments)]
fn product(a: &[f32], b: &[f32], c: &[f32], batch: usize, m: usize, n: usize, k: usize, alpha: f64, beta: f64, extras: Extras) -> Vec<f64> {
    let mut out = vec![0.0f64; batch * m * n];
    for p in 0..batch {
        let a0 = if extras.shared_a { 0 } else { p * m * k };
        for i in 0..m {
            let bias = extras.bias.map_or(0.0, |bias| bias[i] as f64);
            for j in 0..n {
                let dot: f64 = (0..k).map(|l| a[a0 + i * k + l] as f64 * b[(p * k + l) * n + j] as f64).sum();
                let prior = if beta != 0.0 { beta * c[(p * m + i) * n + j] as f64 } else { 0.0 };
                out[(p * m + i) * n + j] = alpha * dot + prior + bias;
            }
        }
    }
    out
}

/// Options that ask for the cooperative GEMM (and the sanitizer where
/// `sanitize`).
pub fn cooperative(sanitize: bool) -> Options {
    Options { sanitize, gemm: GemmOptions { cooperative: Some(true), ..GemmOptions::default() }, ..Options::default() }
}

/// Each element within `tol` (f32 accumulation of K products below 0.5),
/// plus the output type's rounding.
fn assert_close(what: &str, got: &[f64], want: &[f64], k: usize, out: DType) {
    let rounding = match out {
        DType::F32 => 0.0,
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
    };
    let tol = 1e-6 * k as f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol + rounding * w.abs(), "{what}: element {i} is {g}, want {w}");
    }
}

/// `Ops::matmul_batched` with the cooperative GEMM, f16 and bf16, C in
/// f32 and in the inputs' type (the epilogue through threadgroup memory).
pub fn check_matmul(rt: &Runtime, sanitize: bool) {
    for (dtype, out) in [DType::F16, DType::BF16].into_iter().flat_map(|d| [(d, DType::F32), (d, d)]) {
        let ops = Ops::new(rt).with_options(Options { elem: Some(dtype.scalar()), ..cooperative(sanitize) });
        for (batch, m, n, k) in [(1, 1, 8, 8), (1, 7, 72, 40), (1, 100, 136, 200), (1, 130, 64, 64), (3, 65, 24, 136), (1, 300, 520, 1000)] {
            let a = values(batch * m * k, 1, dtype);
            let b = values(batch * k * n, 7, dtype);
            let c = ops.matmul_batched(&upload(rt, dtype.scalar(), &a).unwrap(), &upload(rt, dtype.scalar(), &b).unwrap(), batch, m, n, k, out).unwrap();
            let kernel = ops.take_launches().remove(0).kernel;
            assert!(kernel.starts_with("gemm_coop_"), "{kernel}");
            let got = download(&c, out.scalar(), batch * m * n).unwrap();
            assert_close(&format!("{kernel} batch {batch} {m}x{n}x{k}"), &got, &product(&a, &b, &[], batch, m, n, k, 1.0, 0.0, Extras::default()), k, out);
        }
    }
}

/// The kernel dispatched with alpha 0.75, beta −1.5 and C of f16, bf16 and
/// f32, two matrices of 70 × 80 × 72, in the tile [`CoopGemmConfig::for_memory`]
/// gives the device.
pub fn check_epilogue(rt: &Runtime, sanitize: bool) {
    let max = rt.device().max_threadgroup_memory_bytes;
    let configs = [(DType::F16, DType::F16), (DType::BF16, DType::BF16), (DType::F16, DType::F32)]
        .map(|(input, output)| CoopGemmConfig::for_memory(input, output, None, max).expect("a tile that fits"));
    check_configs(rt, sanitize, &configs, (2, 70, 80, 72));
}

/// Three products sharing one A (batch stride 0) with a bias per row of C
/// added in the epilogue (`CoopGemmConfig::row_bias`), C of f16 (through
/// threadgroup memory where it fits), bf16 and f32 (element by element),
/// and the persistent kernel's walk over them, at 70 × 80 × 72
/// (partial tiles along M and N, so that bias rows past M are never read:
/// the bias buffer holds exactly M values).
pub fn check_shared_a_and_bias(rt: &Runtime, sanitize: bool) {
    let max = rt.device().max_threadgroup_memory_bytes;
    let configs = [(DType::F16, DType::F16, false), (DType::BF16, DType::BF16, false), (DType::F16, DType::F32, false), (DType::F16, DType::F16, true)]
        .map(|(input, output, persistent)| CoopGemmConfig { row_bias: true, persistent, ..CoopGemmConfig::for_memory(input, output, None, max).expect("a tile that fits") });
    for cfg in configs {
        let bias = values(70, 11, cfg.input);
        let bias_buffer = upload(rt, cfg.input.scalar(), &bias).unwrap();
        run_config(rt, sanitize, &cfg, (3, 70, 80, 72), Extras { shared_a: true, bias: Some(&bias) }, Some(&bias_buffer));
    }
}

/// Every tile the kernel takes 64 deep (64 or 128 rows; 64, 128 or 256
/// columns: those `gemm::select` gives among them, with
/// [`enigma_kernels::library::gemm::cooperative::COOP_TILES`])
/// in one to four stages (those that fit the device), f16 in and
/// f32 or f16 out (the epilogue element by element and through
/// threadgroup memory), over 70 × 80 × 456 (eight slices of K, the last partial): the
/// one-stage schedule (each slice's copies after a barrier), the
/// two-stage one and the overlapped one of three or more stages, each
/// stage reused several times.
pub fn check_pipeline_depths(rt: &Runtime, sanitize: bool) {
    let max = rt.device().max_threadgroup_memory_bytes;
    let configs: Vec<CoopGemmConfig> = [64, 128]
        .into_iter()
        .flat_map(|tm| [64, 128, 256].map(move |tn| (tm, tn)))
        .flat_map(|(tm, tn)| (1..=4).flat_map(move |stages| [DType::F32, DType::F16].map(|output| CoopGemmConfig { input: DType::F16, output, tm, tn, tk: 64, stages, raster: DEFAULT_RASTER, persistent: false, row_bias: false, staged: output == DType::F16, tile_copies: false })))
        .filter(|cfg| cfg.check(max).is_ok())
        .collect();
    assert!(configs.iter().any(|c| c.lag() == 2), "no overlapped configuration fits {max} bytes");
    check_configs(rt, sanitize, &configs, (1, 70, 80, 456));
}

/// The 64 × 64 tile walking C's 5 × 3 tiles (the last row partial) row by
/// row and in bands of 2, 4 and 8 rows of tiles (the last band partial, or
/// one band taller than the grid): every tile computed once, against the
/// f64 loop.
pub fn check_rasterisation(rt: &Runtime, sanitize: bool) {
    let configs = [1, 2, 4, 8].map(|raster| CoopGemmConfig { input: DType::F16, output: DType::F32, tm: 64, tn: 64, tk: 64, stages: 2, raster, persistent: false, row_bias: false, staged: false, tile_copies: false });
    check_configs(rt, sanitize, &configs, (2, 64 * 5 - 3, 64 * 3, 64));
}

/// Threadgroups the persistent kernels run on in [`check_persistence`]:
/// fewer than the tiles, so that each walks several.
const PERSISTENT_THREADGROUPS: u32 = 3;

/// The persistent kernel (a few threadgroups walking every tile, the next
/// tile's first slices copied while the epilogue runs) in one, two, three
/// and four stages, C of f16 (staged past those slices) and f32, over two
/// products of 187 × 136 × 200 (partial tiles along M, N and K; the walk
/// crosses from one product to the next), in bands of 2 rows of tiles.
pub fn check_persistence(rt: &Runtime, sanitize: bool) {
    let max = rt.device().max_threadgroup_memory_bytes;
    let base = CoopGemmConfig { input: DType::F16, output: DType::F16, tm: 64, tn: 64, tk: 64, stages: 2, raster: 2, persistent: true, row_bias: false, staged: true, tile_copies: false };
    let configs: Vec<CoopGemmConfig> = [(64, 64, 1, DType::F16), (64, 64, 2, DType::F16), (64, 64, 2, DType::F32), (64, 128, 3, DType::F16), (128, 64, 4, DType::F16), (128, 64, 3, DType::F32)]
        .into_iter()
        .map(|(tm, tn, stages, output)| CoopGemmConfig { tm, tn, stages, output, staged: output == base.input, ..base })
        .filter(|cfg| cfg.check(max).is_ok())
        .collect();
    assert!(configs.iter().any(|c| c.staged && c.stages == 4), "no persistent four-stage configuration fits {max} bytes");
    check_configs(rt, sanitize, &configs, (2, 187, 136, 200));
}

/// The kernel staged by tile copies (A and B copied as whole matrices of
/// the batch: a box past a product's M or K reaches into the next
/// product's rows) in one to four stages, 64 × 64 and 128 × 256 tiles, C of
/// f16 and f32, over two products of 70 × 80 × 456 (partial tiles along
/// M, N and K), with one A for both products and a row bias; and with
/// the second product's B infinite, whose rows past the first product's
/// K a box reads: they are zeroed, so the first product stays finite.
pub fn check_tile_copies(rt: &Runtime, sanitize: bool) {
    let max = rt.device().max_threadgroup_memory_bytes;
    let configs: Vec<CoopGemmConfig> = [(64, 64), (128, 256)]
        .into_iter()
        .flat_map(|(tm, tn)| (1..=4).flat_map(move |stages| [DType::F32, DType::F16].map(|output| CoopGemmConfig { input: DType::F16, output, tm, tn, tk: 64, stages, raster: DEFAULT_RASTER, persistent: false, row_bias: false, staged: output == DType::F16, tile_copies: true })))
        .filter(|cfg| cfg.check(max).is_ok())
        .collect();
    assert!(configs.iter().any(|c| c.lag() == 2), "no overlapped configuration fits {max} bytes");
    check_configs(rt, sanitize, &configs, (2, 70, 80, 456));
    let cfg = CoopGemmConfig { row_bias: true, ..configs[0] };
    let bias = values(70, 11, cfg.input);
    let bias_buffer = upload(rt, cfg.input.scalar(), &bias).unwrap();
    run_config(rt, sanitize, &cfg, (3, 70, 80, 72), Extras { shared_a: true, bias: Some(&bias) }, Some(&bias_buffer));

    let (m, n, k) = (20usize, 64usize, 104usize);
    let a = values(2 * m * k, 3, DType::F16);
    let mut b = values(2 * k * n, 5, DType::F16);
    b[k * n..].fill(f32::INFINITY);
    let pipeline = rt.pipeline(&gemm_cooperative(&configs[0])).unwrap();
    let (ab, bb) = (upload(rt, enigma_ir::Scalar::F16, &a).unwrap(), upload(rt, enigma_ir::Scalar::F16, &b).unwrap());
    let cb = upload(rt, enigma_ir::Scalar::F32, &vec![0.0; 2 * m * n]).unwrap();
    let args = [Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::u32(m as u32), Arg::u32(n as u32), Arg::u32(k as u32), Arg::f32(1.0), Arg::f32(0.0), Arg::u32((m * k) as u32), Arg::u32(2)];
    let dispatch = configs[0].dispatch(m as u32, n as u32, 2, PERSISTENT_THREADGROUPS);
    rt.dispatch(&pipeline, &args, DispatchMode::Threadgroups, dispatch.size, dispatch.threads, &enigma_runtime::Options { sanitize, ..Default::default() }).unwrap();
    let got = download(&cb, enigma_ir::Scalar::F32, 2 * m * n).unwrap();
    let want = product(&a, &b, &vec![0.0; 2 * m * n], 2, m, n, k, 1.0, 0.0, Extras::default());
    assert_close(&format!("{} past K", configs[0].name()), &got[..m * n], &want[..m * n], k, DType::F32);
    assert!(got[m * n..].iter().all(|x| !x.is_finite()), "the second product sums infinite values");
}

/// `configs` dispatched with alpha 0.75 and beta −1.5 over `batch` products
/// of `m × n × k`, against [`product`].
fn check_configs(rt: &Runtime, sanitize: bool, configs: &[CoopGemmConfig], shape: (usize, usize, usize, usize)) {
    for cfg in configs {
        run_config(rt, sanitize, cfg, shape, Extras::default(), None);
    }
}

/// `cfg` dispatched with alpha 0.75 and beta −1.5 over `batch` products of
/// `m × n × k` (A's stride 0 with `extras.shared_a`, `bias` bound as the
/// row bias), against [`product`].
fn run_config(rt: &Runtime, sanitize: bool, cfg: &CoopGemmConfig, (batch, m, n, k): (usize, usize, usize, usize), extras: Extras, bias: Option<&enigma_runtime::Buffer>) {
    let (input, output) = (cfg.input, cfg.output);
    let pipeline = rt.pipeline(&gemm_cooperative(cfg)).unwrap();
    let a_len = if extras.shared_a { m * k } else { batch * m * k };
    let (a, b, c0) = (values(a_len, 3, input), values(batch * k * n, 5, input), values(batch * m * n, 9, output));
    let up = |dtype: DType, v: &[f32]| upload(rt, dtype.scalar(), v).unwrap();
    let (ab, bb, cb) = (up(input, &a), up(input, &b), up(output, &c0));
    let (alpha, beta) = (0.75f32, -1.5f32);
    let a_stride = if extras.shared_a { 0 } else { (m * k) as u32 };
    let mut args = vec![Arg::from(&ab), Arg::from(&bb), Arg::from(&cb), Arg::u32(m as u32), Arg::u32(n as u32), Arg::u32(k as u32), Arg::f32(alpha), Arg::f32(beta), Arg::u32(a_stride)];
    if cfg.persistent || cfg.tile_copies {
        args.push(Arg::u32(batch as u32));
    }
    args.extend(bias.map(Arg::from));
    let dispatch = cfg.dispatch(m as u32, n as u32, batch as u32, PERSISTENT_THREADGROUPS);
    rt.dispatch(&pipeline, &args, DispatchMode::Threadgroups, dispatch.size, dispatch.threads, &enigma_runtime::Options { sanitize, ..Default::default() }).unwrap();
    let got = download(&cb, output.scalar(), batch * m * n).unwrap();
    assert_close(&format!("{} {m}x{n}x{k}", cfg.name()), &got, &product(&a, &b, &c0, batch, m, n, k, alpha as f64, beta as f64, extras), k, output);
}
