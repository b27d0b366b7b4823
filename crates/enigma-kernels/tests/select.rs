//! The matrix families' selections as tables: a problem on a device (the
//! simulator, an H100-class CUDA GPU with device-scope fences, an Apple GPU
//! with 32 KiB of threadgroup memory) with default overrides gives one
//! kernel and configuration, named by the kernel it builds and its K splits
//! (or the reason it is refused: Metal copies at once, so fragment-ordered
//! weights, which need staged slices, do not run the GEMM there); and
//! where the GEMM on cooperative tensors is chosen; and the fused attention
//! decode's plan (its kernel, its splits and who merges them) (a GPU whose cooperative
//! products are `wgmma`, not one that runs them on its general path).

mod devices;

use devices::device;
use enigma_backend::{CooperativeLowering, DeviceInfo, DeviceKind};
use enigma_ir::{Feature, QuantLayout};
use enigma_kernels::library::attention::{self, DecodeProblem, DecodeShape};
use enigma_kernels::library::conv_implicit::ImplicitConvConfig;
use enigma_kernels::library::gemm::{self, GemmPlan, GemmProblem};
use enigma_kernels::library::qmatmul::{self, QmatmulKernel, QmatmulProblem, QmatmulSelection};
use enigma_kernels::library::quant::Format;
use enigma_kernels::library::select::{AttentionOptions, GemmOptions, Overrides, QmatmulOptions};
use enigma_kernels::library::split::SplitSum;
use enigma_kernels::library::tile::GemmTile;
use enigma_kernels::library::DType;


fn devices() -> [(&'static str, DeviceInfo); 3] {
    [
        ("sim", device(DeviceKind::Simulator, 2, 32 * 1024, true)),
        ("cuda", device(DeviceKind::Cuda, 132, 227 * 1024, true)),
        ("metal", device(DeviceKind::Metal, 40, 32 * 1024, false)),
    ]
}

/// An H100-class CUDA GPU (132 compute units, 227 KiB of threadgroup
/// memory, device-scope fences) whose cooperative products run as
/// `lowering` says.
fn cooperative_cuda(lowering: CooperativeLowering) -> DeviceInfo {
    DeviceInfo {
        cooperative_lowering: Some(lowering),
        features: [Feature::DeviceFence, Feature::CooperativeTensors].into_iter().collect(),
        ..device(DeviceKind::Cuda, 132, 227 * 1024, true)
    }
}

fn gemm_row(plan: &GemmPlan) -> String {
    format!("{} splits={} sum={:?}", plan.kernel().name, plan.splits(), plan.split_sum())
}

fn qmatmul_row(selection: &QmatmulSelection) -> String {
    match selection {
        QmatmulSelection::Decode(p) => format!("{} splits={}", p.kernel().name, p.splits),
        QmatmulSelection::FragmentsDecode(p) => format!("{} splits={}", p.kernel().name, p.splits),
        QmatmulSelection::Affine(p) => p.kernel().name,
        QmatmulSelection::Tiled(c) => format!("{} splits={} sum={:?}", gemm::qgemm(c).name, c.gemm.splits, c.gemm.split_sum),
        QmatmulSelection::Fused(c) => format!("{} splits={}", enigma_kernels::library::qgemm_fused::qgemm_fused(c).name, c.splits),
        QmatmulSelection::Cooperative(c) => enigma_kernels::library::qgemm_cooperative::qgemm_cooperative(c).name,
    }
}

#[test]
fn gemm_selection_by_shape_and_device() {
    let shapes = [(DType::F16, 16, 11008, 4096), (DType::F16, 4096, 4096, 4096), (DType::F32, 4096, 4096, 4096), (DType::F16, 70, 130, 41)];
    let mut rows = vec![];
    for (name, dev) in devices() {
        for &(input, m, n, k) in &shapes {
            let plan = gemm::select(&GemmProblem { input, output: DType::F32, m, n, k, batch: 1 }, &dev, &Overrides::default()).unwrap();
            rows.push(format!("{name} {input} {m}x{n}x{k}: {}", gemm_row(&plan)));
        }
    }
    let expected: Vec<&str> = EXPECTED_GEMM.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    assert_eq!(rows, expected, "\n{}", rows.join("\n"));
}

#[test]
fn qmatmul_selection_by_rows_layout_and_device() {
    let cases = [
        (Format::Int4, QuantLayout::Rows, 1),
        (Format::Int4, QuantLayout::Rows, 16),
        (Format::Fp4, QuantLayout::Fragments, 1),
        (Format::Fp4, QuantLayout::Fragments, 16),
        (Format::Fp4, QuantLayout::Fragments, 64),
        (Format::MlxAffine, QuantLayout::Rows, 32),
    ];
    let mut rows = vec![];
    for (name, dev) in devices() {
        for &(format, layout, m) in &cases {
            let problem = QmatmulProblem { format, layout, out: DType::F16, m, n: 11008, k: 4096, group: 128 };
            let row = match qmatmul::select(&problem, &dev, &Overrides::default()) {
                Ok(selection) => qmatmul_row(&selection),
                Err(e) => format!("refused: {e}"),
            };
            rows.push(format!("{name} {format} {layout} m={m}: {row}"));
        }
    }
    let expected: Vec<&str> = EXPECTED_QMATMUL.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    assert_eq!(rows, expected, "\n{}", rows.join("\n"));
}

#[test]
fn overrides_move_the_kernel_choice() {
    let problem = QmatmulProblem { format: Format::Int4, layout: QuantLayout::Rows, out: DType::F16, m: 2, n: 64, k: 256, group: 64 };
    let cuda = devices()[1].1.clone();
    assert_eq!(qmatmul::kernel_for(&problem, &cuda, &Overrides::default()), QmatmulKernel::Decode);
    let kernel_sum = Overrides { gemm: GemmOptions { split_sum: Some(SplitSum::LastThreadgroup), ..GemmOptions::default() }, ..Overrides::default() };
    // The decode kernel sums its own K splits too, so asking for that keeps it.
    assert_eq!(qmatmul::kernel_for(&problem, &cuda, &kernel_sum), QmatmulKernel::Decode);
    let big = QmatmulProblem { m: 64, ..problem };
    assert_eq!(qmatmul::kernel_for(&big, &cuda, &Overrides::default()), QmatmulKernel::Tiled);
    assert_eq!(qmatmul::kernel_for(&big, &cuda, &Overrides { vectorize: Some(false), ..Overrides::default() }), QmatmulKernel::Decode);
    // Where products are `wgmma`: the cooperative kernel at 17 (INT4) or 5
    // (FP4) to 128 rows, unless declined or an option of the tensor-core
    // kernel is asked for.
    let sm_90a = DeviceInfo { cooperative_lowering: Some(CooperativeLowering::Wgmma), ..cuda };
    assert_eq!(qmatmul::kernel_for(&big, &sm_90a, &Overrides::default()), QmatmulKernel::Cooperative);
    let rows = |format: Format, m: usize| qmatmul::kernel_for(&QmatmulProblem { format, m, ..problem }, &sm_90a, &Overrides::default());
    assert_eq!([16, 17, 128, 129].map(|m| rows(Format::Int4, m)), [QmatmulKernel::Tiled, QmatmulKernel::Cooperative, QmatmulKernel::Cooperative, QmatmulKernel::Tiled]);
    assert_eq!([4, 5, 128, 129].map(|m| rows(Format::Fp4, m)), [QmatmulKernel::Decode, QmatmulKernel::Cooperative, QmatmulKernel::Cooperative, QmatmulKernel::Tiled]);
    // MLX's affine weights: the cooperative kernel where N and K are whole
    // tiles of 128, unless the affine decode kernel's own blocking is asked
    // for (the FP4/INT4 decode kernel's options do not count).
    assert_eq!(rows(Format::MlxAffine, 64), QmatmulKernel::Affine);
    let affine = QmatmulProblem { format: Format::MlxAffine, m: 2, n: 128, ..problem };
    assert_eq!(qmatmul::kernel_for(&affine, &sm_90a, &Overrides::default()), QmatmulKernel::Cooperative);
    let blocking = |qmatmul: QmatmulOptions| qmatmul::kernel_for(&affine, &sm_90a, &Overrides { qmatmul, ..Overrides::default() });
    assert_eq!(blocking(QmatmulOptions { columns_per_simdgroup: Some(2), ..QmatmulOptions::default() }), QmatmulKernel::Affine);
    assert_eq!(blocking(QmatmulOptions { words_per_load: Some(2), ..QmatmulOptions::default() }), QmatmulKernel::Affine);
    assert_eq!(blocking(QmatmulOptions { columns_per_thread: Some(2), ..QmatmulOptions::default() }), QmatmulKernel::Cooperative);
    let declined = Overrides { gemm: GemmOptions { cooperative: Some(false), ..GemmOptions::default() }, ..Overrides::default() };
    assert_eq!(qmatmul::kernel_for(&big, &sm_90a, &declined), QmatmulKernel::Tiled);
    // The cooperative kernel sums its own K splits too, in either layout;
    // the fragment order's decode row does not, so its rows take a GEMM.
    assert_eq!(qmatmul::kernel_for(&big, &sm_90a, &kernel_sum), QmatmulKernel::Cooperative);
    let fragments = |m: usize| QmatmulProblem { layout: QuantLayout::Fragments, m, ..big };
    assert_eq!(qmatmul::kernel_for(&fragments(64), &sm_90a, &kernel_sum), QmatmulKernel::Cooperative);
    assert_eq!(qmatmul::kernel_for(&fragments(16), &sm_90a, &Overrides::default()), QmatmulKernel::FragmentsDecode);
    assert_eq!(qmatmul::kernel_for(&fragments(16), &sm_90a, &kernel_sum), QmatmulKernel::Tiled);
    assert_eq!(qmatmul::kernel_for(&QmatmulProblem { n: 60, ..big }, &sm_90a, &Overrides::default()), QmatmulKernel::Tiled);
    // Device-scope fences asked for on a device without them.
    let metal = devices()[2].1.clone();
    let asked = Overrides { gemm: GemmOptions { k_splits: Some(2), split_sum: Some(SplitSum::LastThreadgroup), ..GemmOptions::default() }, ..Overrides::default() };
    let err = gemm::select(&GemmProblem { input: DType::F16, output: DType::F32, m: 64, n: 64, k: 256, batch: 1 }, &metal, &asked).unwrap_err();
    assert!(err.to_string().starts_with("matmul: the kernel sums its K splits with device-scope fences, which Metal does not have"), "{err}");
}

#[test]
fn gemm_on_cooperative_tensors_where_products_are_wgmma() {
    let devices = [("sm_90a", cooperative_cuda(CooperativeLowering::Wgmma)), ("sm_80", cooperative_cuda(CooperativeLowering::Scalar))];
    let shapes = [
        (DType::F16, DType::F32, 4096, 4096, 4096),
        (DType::BF16, DType::BF16, 8192, 8192, 8192),
        (DType::F16, DType::F16, 16, 11008, 4096),
        (DType::F16, DType::F16, 128, 11008, 4096),
        (DType::F16, DType::F16, 1024, 1024, 1024),
        (DType::F16, DType::F32, 4096, 4096, 4100),
        (DType::F32, DType::F32, 4096, 4096, 4096),
        (DType::F16, DType::F32, 70, 130, 41),
    ];
    let mut rows = vec![];
    for (name, dev) in &devices {
        for &(input, output, m, n, k) in &shapes {
            let plan = gemm::select(&GemmProblem { input, output, m, n, k, batch: 1 }, dev, &Overrides::default()).unwrap();
            rows.push(format!("{name} {input}->{output} {m}x{n}x{k}: {}", gemm_row(&plan)));
        }
    }
    let never = Overrides { gemm: GemmOptions { cooperative: Some(false), ..GemmOptions::default() }, ..Overrides::default() };
    let plan = gemm::select(&GemmProblem { input: DType::F16, output: DType::F32, m: 4096, n: 4096, k: 4096, batch: 1 }, &devices[0].1, &never).unwrap();
    rows.push(format!("sm_90a never: {}", gemm_row(&plan)));
    // Batched and short products (torch's bmm, a 2-D weight under a batched
    // input, the convolutions' products) and products of at most 64 rows:
    // the 64 × 128 tile for those, else 128 × 256, four stages, persistent
    // where K is short and there are two tiles or more per compute unit.
    for (batch, m, n, k) in [(1, 1024, 1024, 1024), (32, 1024, 1024, 1024), (1, 4096, 1024, 1024), (64, 64, 1024, 576), (64, 128, 1024, 64), (1, 64, 11008, 4096), (8, 512, 512, 2048)] {
        let plan = gemm::select(&GemmProblem { input: DType::F16, output: DType::F16, m, n, k, batch }, &devices[0].1, &Overrides::default()).unwrap();
        rows.push(format!("sm_90a batch {batch} f16->f16 {m}x{n}x{k}: {}", gemm_row(&plan)));
    }
    // Stages asked for are kept.
    let asked = Overrides { gemm: GemmOptions { stages: Some(3), ..GemmOptions::default() }, ..Overrides::default() };
    for m in [64, 1024] {
        let plan = gemm::select(&GemmProblem { input: DType::F16, output: DType::F16, m, n: 1024, k: 1024, batch: 32 }, &devices[0].1, &asked).unwrap();
        rows.push(format!("sm_90a stages 3 batch 32 f16->f16 {m}x1024x1024: {}", gemm_row(&plan)));
    }
    // Tile copies asked for take the persistent walk's place; refused, the
    // threads copy.
    for (tile_copies, m, n, k, batch) in [(true, 1024, 1024, 1024, 32), (false, 4096, 1024, 1024, 1), (true, 64, 11008, 4096, 1)] {
        let asked = Overrides { gemm: GemmOptions { tile_copies: Some(tile_copies), ..GemmOptions::default() }, ..Overrides::default() };
        let plan = gemm::select(&GemmProblem { input: DType::F16, output: DType::F16, m, n, k, batch }, &devices[0].1, &asked).unwrap();
        rows.push(format!("sm_90a tile copies {tile_copies} batch {batch} f16->f16 {m}x{n}x{k}: {}", gemm_row(&plan)));
    }
    let expected: Vec<&str> = EXPECTED_COOPERATIVE.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    assert_eq!(rows, expected, "\n{}", rows.join("\n"));
}

/// The quantized GEMM on cooperative tensors where asked for, and by
/// default at 33 to 128 rows on `wgmma` devices (MLX's affine weights from
/// 2 rows, where N and K are whole tiles): its tile for M and K split
/// below three threadgroups per compute unit, its operands staged by tile
/// copies there, a tile and splits asked for, and clear refusals of what it
/// cannot take.
#[test]
fn quantized_gemm_on_cooperative_tensors_where_asked_and_by_default_on_wgmma() {
    let sm_90a = cooperative_cuda(CooperativeLowering::Wgmma);
    let asked = Overrides { gemm: GemmOptions { cooperative: Some(true), ..GemmOptions::default() }, ..Overrides::default() };
    let problem = |format, layout, m, n| QmatmulProblem { format, layout, out: DType::F16, m, n, k: 4096, group: 128 };
    let mut rows = vec![];
    for m in [1, 16, 64, 128, 4096] {
        let p = problem(Format::Int4, QuantLayout::Rows, m, 11008);
        let by_default = qmatmul_row(&qmatmul::select(&p, &sm_90a, &Overrides::default()).unwrap());
        rows.push(format!("m={m}: {} (default {by_default})", qmatmul_row(&qmatmul::select(&p, &sm_90a, &asked).unwrap())));
    }
    let wide = Overrides { gemm: GemmOptions { tile: Some(GemmTile::new(64, 128, 128, 2, 4)), k_splits: Some(3), ..asked.gemm }, ..asked };
    rows.push(format!("m=16 asked 64x128x128/2x4 in 3 splits: {}", qmatmul_row(&qmatmul::select(&problem(Format::Int4, QuantLayout::Rows, 16, 11008), &sm_90a, &wide).unwrap())));
    // Fragment-ordered words above the decode row: the same kernel's
    // `_fragments` variant by default.
    for m in [64, 128] {
        let p = problem(Format::Int4, QuantLayout::Fragments, m, 11008);
        rows.push(format!("m={m} fragments: {}", qmatmul_row(&qmatmul::select(&p, &sm_90a, &Overrides::default()).unwrap())));
    }
    // N a multiple of 16, not of 32: asked for, the threads copy the words
    // (tile copies asked for are refused below).
    let p = problem(Format::Fp4, QuantLayout::Fragments, 64, 11024);
    rows.push(format!("m=64 fragments N=11024 asked: {}", qmatmul_row(&qmatmul::select(&p, &sm_90a, &asked).unwrap())));
    // MLX's affine weights: the cooperative kernel from 2 rows where N and
    // K are whole tiles; the decode kernel at one row and elsewhere.
    for (m, n) in [(1, 11008), (2, 11008), (16, 11008), (128, 11008), (4096, 11008), (16, 11000)] {
        let p = QmatmulProblem { group: 64, ..problem(Format::MlxAffine, QuantLayout::Rows, m, n) };
        rows.push(format!("m={m} mlx_affine N={n}: {}", qmatmul_row(&qmatmul::select(&p, &sm_90a, &Overrides::default()).unwrap())));
    }
    let metal = devices()[2].1.clone();
    let metal4 = DeviceInfo { features: [Feature::CooperativeTensors].into_iter().collect(), ..metal.clone() };
    let refusals = [
        (problem(Format::MlxAffine, QuantLayout::Rows, 16, 11000), asked, &sm_90a),
        (problem(Format::Fp4, QuantLayout::Fragments, 64, 11024), Overrides { gemm: GemmOptions { tile_copies: Some(true), ..asked.gemm }, ..asked }, &sm_90a),
        (problem(Format::Fp4, QuantLayout::Rows, 16, 100), asked, &sm_90a),
        (problem(Format::Fp4, QuantLayout::Rows, 16, 11008), Overrides { threads: Some(256), ..asked }, &sm_90a),
        (problem(Format::Fp4, QuantLayout::Rows, 16, 11008), Overrides { gemm: GemmOptions { tile: Some(GemmTile::new(64, 128, 32, 1, 4)), ..asked.gemm }, ..asked }, &sm_90a),
        (problem(Format::Fp4, QuantLayout::Rows, 16, 11008), asked, &metal),
        (problem(Format::Fp4, QuantLayout::Rows, 16, 11008), Overrides { gemm: GemmOptions { stages: Some(4), tile: Some(GemmTile::new(128, 64, 64, 1, 4)), ..asked.gemm }, ..asked }, &metal4),
        (problem(Format::Fp4, QuantLayout::Rows, 16, 11008), Overrides { gemm: GemmOptions { split_sum: Some(SplitSum::LastThreadgroup), ..asked.gemm }, ..asked }, &metal4),
    ];
    for (p, o, dev) in refusals {
        rows.push(format!("refused: {}", qmatmul::select(&p, dev, &o).unwrap_err()));
    }
    let expected: Vec<&str> = EXPECTED_COOPERATIVE_QUANTIZED.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    assert_eq!(rows, expected, "\n{}", rows.join("\n"));
}

const EXPECTED_COOPERATIVE_QUANTIZED: &str = "
    m=1: qgemm_coop_int4_f16_8x64x128_s4_r8_splitk3_tiles (default qmatmul_int4_f16_r1_c4_u8_t512 splits=1)
    m=16: qgemm_coop_int4_f16_16x64x128_s4_r8_splitk3_tiles (default qgemm_int4_f16_16x128x64_sg1x4_splitk_s4_whole splits=4 sum=Reduction)
    m=64: qgemm_coop_int4_f16_64x128x128_s4_r8_splitk3_tiles (default qgemm_coop_int4_f16_64x128x128_s4_r8_splitk3_tiles)
    m=128: qgemm_coop_int4_f16_128x128x64_s4_r8_splitk3_tiles (default qgemm_coop_int4_f16_128x128x64_s4_r8_splitk3_tiles)
    m=4096: qgemm_coop_int4_f16_256x128x64_s4_r8_tiles (default qgemm_int4_f16_128x128x64_sg2x2_s4_whole splits=1 sum=Reduction)
    m=16 asked 64x128x128/2x4 in 3 splits: qgemm_coop_int4_f16_64x128x128_s4_r8_splitk3_tiles
    m=64 fragments: qgemm_coop_int4_f16_64x128x128_s4_r8_splitk3_tiles_fragments
    m=128 fragments: qgemm_coop_int4_f16_128x128x64_s4_r8_splitk3_tiles_fragments
    m=64 fragments N=11024 asked: qgemm_coop_fp4_f16_64x64x128_s4_r8_splitk3_fragments
    m=1 mlx_affine N=11008: qmatmul_affine_f16_r1_c4_w2_t256
    m=2 mlx_affine N=11008: qgemm_coop_mlx_affine_f16_8x64x128_s4_r8_splitk3_tiles
    m=16 mlx_affine N=11008: qgemm_coop_mlx_affine_f16_16x64x128_s4_r8_splitk3_tiles
    m=128 mlx_affine N=11008: qgemm_coop_mlx_affine_f16_128x128x64_s4_r8_splitk3_tiles
    m=4096 mlx_affine N=11008: qgemm_coop_mlx_affine_f16_256x128x64_s4_r8_tiles
    m=16 mlx_affine N=11000: qmatmul_affine_f16_r8_c1_w1_t256
    refused: qmatmul: the quantized GEMM on cooperative tensors: mlx_affine weights of N = 11000 and K = 4096 need N a multiple of the 64-column tile and K of its 128-deep slices (the threads load each slice's scales and biases from their buffers)
    refused: qmatmul: the quantized GEMM on cooperative tensors: N = 11024 must be a multiple of 32 for tile copies of fragment-ordered words (rows of 256 words)
    refused: qmatmul: the quantized GEMM on cooperative tensors: N = 100 must be a multiple of 8 (16-byte copies of the scales)
    refused: qmatmul: the quantized GEMM on cooperative tensors: a thread count is an option of the SIMD-group kernels
    refused: qmatmul: the quantized GEMM on cooperative tensors: a 64x128x32/1x4 tile; it takes tm one of [8, 16, 32, 64, 128, 256], tn one of [64, 128], tk one of [64, 128], with tn / 16 SIMD groups
    refused: qmatmul: the quantized GEMM on cooperative tensors: Metal has no cooperative tensors
    refused: qmatmul: the quantized GEMM on cooperative tensors: no tile fits 32768 bytes of threadgroup memory in 4 stages
    refused: qmatmul: the kernel sums its K splits with device-scope fences, which Metal does not have (on Metal they need MSL 3.2); use the reduction (split_sum None or Reduction)
";

const EXPECTED_COOPERATIVE: &str = "
    sm_90a f16->f32 4096x4096x4096: gemm_coop_f16_f32_128x256x64_s4_r8_tiles splits=1 sum=Reduction
    sm_90a bf16->bf16 8192x8192x8192: gemm_coop_bf16_bf16_128x256x64_s4_r8_tiles splits=1 sum=Reduction
    sm_90a f16->f16 16x11008x4096: gemm_f16_f16_16x128x32_sg1x4_splitk_s4_whole splits=4 sum=Reduction
    sm_90a f16->f16 128x11008x4096: gemm_coop_f16_f16_128x256x64_s4_r8_tiles splits=1 sum=Reduction
    sm_90a f16->f16 1024x1024x1024: gemm_f16_f16_128x128x32_sg2x2_s4_whole splits=1 sum=Reduction
    sm_90a f16->f32 4096x4096x4100: gemm_f16_f32_128x256x32_sg2x4_s4 splits=1 sum=Reduction
    sm_90a f32->f32 4096x4096x4096: sgemm_f32_128x128x16_r8x8 splits=1 sum=Reduction
    sm_90a f16->f32 70x130x41: gemm_f16_f32_128x128x32_sg2x2_s4 splits=1 sum=Reduction
    sm_80 f16->f32 4096x4096x4096: gemm_f16_f32_128x256x32_sg2x4_s4_whole splits=1 sum=Reduction
    sm_80 bf16->bf16 8192x8192x8192: gemm_bf16_bf16_128x256x32_sg2x4_s4_whole splits=1 sum=Reduction
    sm_80 f16->f16 16x11008x4096: gemm_f16_f16_16x128x32_sg1x4_splitk_s4_whole splits=4 sum=Reduction
    sm_80 f16->f16 128x11008x4096: gemm_f16_f16_128x128x32_sg2x2_s4_whole splits=1 sum=Reduction
    sm_80 f16->f16 1024x1024x1024: gemm_f16_f16_128x128x32_sg2x2_s4_whole splits=1 sum=Reduction
    sm_80 f16->f32 4096x4096x4100: gemm_f16_f32_128x256x32_sg2x4_s4 splits=1 sum=Reduction
    sm_80 f32->f32 4096x4096x4096: sgemm_f32_128x128x16_r8x8 splits=1 sum=Reduction
    sm_80 f16->f32 70x130x41: gemm_f16_f32_128x128x32_sg2x2_s4 splits=1 sum=Reduction
    sm_90a never: gemm_f16_f32_128x256x32_sg2x4_s4_whole splits=1 sum=Reduction
    sm_90a batch 1 f16->f16 1024x1024x1024: gemm_f16_f16_128x128x32_sg2x2_s4_whole splits=1 sum=Reduction
    sm_90a batch 32 f16->f16 1024x1024x1024: gemm_coop_f16_f16_128x256x64_s4_r8_p splits=1 sum=Reduction
    sm_90a batch 1 f16->f16 4096x1024x1024: gemm_coop_f16_f16_128x256x64_s4_r8_tiles splits=1 sum=Reduction
    sm_90a batch 64 f16->f16 64x1024x576: gemm_coop_f16_f16_64x128x64_s4_r8 splits=1 sum=Reduction
    sm_90a batch 64 f16->f16 128x1024x64: gemm_coop_f16_f16_64x128x64_s1_r8_tiles splits=1 sum=Reduction
    sm_90a batch 1 f16->f16 64x11008x4096: gemm_coop_f16_f16_64x128x64_s4_r8 splits=1 sum=Reduction
    sm_90a batch 8 f16->f16 512x512x2048: gemm_coop_f16_f16_128x256x64_s4_r8_tiles splits=1 sum=Reduction
    sm_90a stages 3 batch 32 f16->f16 64x1024x1024: gemm_coop_f16_f16_64x128x64_s3_r8 splits=1 sum=Reduction
    sm_90a stages 3 batch 32 f16->f16 1024x1024x1024: gemm_coop_f16_f16_128x256x64_s3_r8_p splits=1 sum=Reduction
    sm_90a tile copies true batch 32 f16->f16 1024x1024x1024: gemm_coop_f16_f16_128x256x64_s4_r8_tiles splits=1 sum=Reduction
    sm_90a tile copies false batch 1 f16->f16 4096x1024x1024: gemm_coop_f16_f16_128x256x64_s4_r8 splits=1 sum=Reduction
    sm_90a tile copies true batch 1 f16->f16 64x11008x4096: gemm_coop_f16_f16_64x128x64_s4_r8_tiles splits=1 sum=Reduction
";

#[test]
fn attention_decode_selection_by_shape_and_device() {
    // (type, batch, q heads, K/V heads, keys, d, ragged + lse, vector loads)
    let shapes = [
        (DType::F16, 1, 32, 32, 2048, 128, false, 4),
        (DType::F16, 1, 32, 8, 8192, 128, false, 4),
        (DType::F16, 1, 32, 8, 32768, 128, false, 4),
        (DType::F16, 8, 32, 8, 4096, 128, true, 4),
        (DType::F16, 1, 32, 8, 512, 128, false, 4),
        (DType::F32, 3, 6, 2, 77, 40, true, 4),
        (DType::BF16, 2, 4, 4, 33, 7, false, 1),
    ];
    let mut rows = vec![];
    // The devices as they are here, and with SIMD-group matrices (`+mma`:
    // the decode on them where it can run).
    let with_matrices = devices().map(|(name, mut dev)| {
        dev.features.insert(Feature::SimdgroupMatrix);
        (format!("{name}+mma"), dev)
    });
    for (name, dev) in devices().map(|(name, dev)| (name.to_string(), dev)).into_iter().chain(with_matrices) {
        for &(dtype, batch, q_heads, kv_heads, s_len, d, outputs, vec) in &shapes {
            let shape = DecodeShape { batch, q_heads, kv_heads, s_len, d };
            let problem = DecodeProblem { dtype, shape, vec, whole_words: true, ragged: outputs, lse: outputs };
            let plan = attention::select(&problem, &dev, &Overrides::default(), 256).unwrap();
            let merge = if plan.splits > 1 { format!(" {:?}", plan.split_sum) } else { String::new() };
            rows.push(format!("{name} {dtype} {batch}x{q_heads}/{kv_heads}x{s_len}x{d}: {} splits={}{merge}", plan.fused_config().name(), plan.splits));
        }
    }
    let expected: Vec<&str> = EXPECTED_ATTENTION.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    assert_eq!(rows, expected, "\n{}", rows.join("\n"));
    // The caller's choices win, and the merge in the kernel needs fences.
    let problem = DecodeProblem { dtype: DType::F16, shape: DecodeShape { batch: 1, q_heads: 32, kv_heads: 8, s_len: 8192, d: 128 }, vec: 4, whole_words: true, ragged: false, lse: false };
    let [_, (_, cuda), (_, metal)] = devices();
    let asked = |splits, split_sum| Overrides { attention: AttentionOptions { splits: Some(splits), split_sum: Some(split_sum), ..AttentionOptions::default() }, ..Overrides::default() };
    let plan = attention::select(&problem, &cuda, &asked(7, SplitSum::Reduction), 256).unwrap();
    assert_eq!((plan.splits, plan.split_sum, plan.fused_config().merge), (7, SplitSum::Reduction, false));
    let plan = attention::select(&problem, &cuda, &Overrides { threads: Some(64), ..Overrides::default() }, 256).unwrap();
    assert_eq!(plan.fused.threads[0], 64);
    assert_eq!(
        attention::select(&problem, &metal, &asked(2, SplitSum::LastThreadgroup), 256).unwrap_err().to_string(),
        "attention_decode: the fused decode merges its splits with device-scope fences, which Metal does not have (on Metal they need MSL 3.2); use split_sum Reduction"
    );
    // SIMD-group matrices: refused when asked to; an error asked for
    // where they cannot run (f32); the lane form's own options choose it.
    let mut mma = cuda.clone();
    mma.features.insert(Feature::SimdgroupMatrix);
    let matrices = |m| Overrides { attention: AttentionOptions { matrices: Some(m), ..AttentionOptions::default() }, ..Overrides::default() };
    assert!(attention::select(&problem, &mma, &matrices(false), 256).unwrap().matrices.is_none());
    assert!(attention::select(&problem, &mma, &matrices(true), 256).unwrap().matrices.is_some());
    let lanes = Overrides { attention: AttentionOptions { lanes_per_key: Some(8), ..AttentionOptions::default() }, ..Overrides::default() };
    assert!(attention::select(&problem, &mma, &lanes, 256).unwrap().matrices.is_none());
    assert_eq!(
        attention::select(&DecodeProblem { dtype: DType::F32, ..problem }, &mma, &matrices(true), 256).unwrap_err().to_string(),
        "attention_decode: the decode on SIMD-group matrices takes f16 or bf16 with d a multiple of 16 up to 256, vector loads and buffers of whole 16-byte words on a device with SIMD-group matrices; this one is f32 with d = 128 on Cuda"
    );
}

const EXPECTED_GEMM: &str = "
    sim f16 16x11008x4096: gemm_f16_f32_16x128x32_sg1x4_s3_whole splits=1 sum=Reduction
    sim f16 4096x4096x4096: gemm_f16_f32_128x128x32_sg2x2 splits=1 sum=Reduction
    sim f32 4096x4096x4096: sgemm_f32_128x128x8_r8x8 splits=1 sum=Reduction
    sim f16 70x130x41: gemm_f16_f32_128x128x32_sg2x2 splits=1 sum=Reduction
    cuda f16 16x11008x4096: gemm_f16_f32_16x128x32_sg1x4_splitk_s4_whole splits=4 sum=Reduction
    cuda f16 4096x4096x4096: gemm_f16_f32_128x256x32_sg2x4_s4_whole splits=1 sum=Reduction
    cuda f32 4096x4096x4096: sgemm_f32_128x128x16_r8x8 splits=1 sum=Reduction
    cuda f16 70x130x41: gemm_f16_f32_128x128x32_sg2x2_s4 splits=1 sum=Reduction
    metal f16 16x11008x4096: gemm_f16_f32_16x128x32_sg1x4 splits=1 sum=Reduction
    metal f16 4096x4096x4096: gemm_f16_f32_128x128x32_sg2x2 splits=1 sum=Reduction
    metal f32 4096x4096x4096: gemm_f32_f32_128x64x32_sg2x2 splits=1 sum=Reduction
    metal f16 70x130x41: gemm_f16_f32_128x128x32_sg2x2 splits=1 sum=Reduction
";
const EXPECTED_QMATMUL: &str = "
    sim int4 rows m=1: qmatmul_int4_f16_r1_c4_u8_t256 splits=1
    sim int4 rows m=16: qgemm_int4_f16_16x128x64_sg1x4_s4_whole splits=1 sum=Reduction
    sim fp4 fragments m=1: qmatmul_fp4_f16_fragments_u2_t256 splits=1
    sim fp4 fragments m=16: qmatmul_fp4_f16_fragments_u2_t128_r16_s2 splits=1
    sim fp4 fragments m=64: qgemm_fp4_f16_64x128x64_sg2x2_s2_whole_fragments splits=1 sum=Reduction
    sim mlx_affine rows m=32: qmatmul_affine_f16_r8_c1_w1_t256
    cuda int4 rows m=1: qmatmul_int4_f16_r1_c4_u8_t512 splits=1
    cuda int4 rows m=16: qgemm_int4_f16_16x128x64_sg1x4_splitk_s4_whole splits=4 sum=Reduction
    cuda fp4 fragments m=1: qmatmul_fp4_f16_fragments_u2_t256 splits=1
    cuda fp4 fragments m=16: qmatmul_fp4_f16_fragments_u2_t128_r16_s2 splits=1
    cuda fp4 fragments m=64: qgemm_fp4_f16_64x128x64_sg2x2_s4_whole_fragments splits=1 sum=Reduction
    cuda mlx_affine rows m=32: qmatmul_affine_f16_r8_c1_w1_t256
    metal int4 rows m=1: qmatmul_int4_f16_r1_c4_u8_t512 splits=1
    metal int4 rows m=16: qgemm_int4_f16_16x128x64_sg1x4 splits=1 sum=Reduction
    metal fp4 fragments m=1: qmatmul_fp4_f16_fragments_u2_t256 splits=1
    metal fp4 fragments m=16: qmatmul_fp4_f16_fragments_u2_t128_r16_s2 splits=1
    metal fp4 fragments m=64: refused: qgemm_fp4_f16_64x128x64_sg2x2_fragments: fragment-ordered weights take 2 stages or more (not 1), the whole-tile kernel (a shape the tile divides along N and K)
    metal mlx_affine rows m=32: qmatmul_affine_f16_r8_c1_w1_t256
";
const EXPECTED_ATTENTION: &str = "
    sim f16 1x32/32x2048x128: attention_fused_f16_wide_c2_t96_h1_l8_k1_s4 splits=1
    sim f16 1x32/8x8192x128: attention_fused_f16_wide_c2_t96_h2_l8_k1_s4 splits=1
    sim f16 1x32/8x32768x128: attention_fused_f16_wide_c2_t96_h2_l8_k1_s4 splits=1
    sim f16 8x32/8x4096x128: attention_fused_f16_wide_c2_t96_h2_l8_k1_s4_ragged_lse splits=1
    sim f16 1x32/8x512x128: attention_fused_f16_wide_c2_t96_h2_l8_k1_s4 splits=1
    sim f32 3x6/2x77x40: attention_fused_f32_vec4_c2_t96_h1_l8_k1_s4_ragged_lse splits=1
    sim bf16 2x4/4x33x7: attention_fused_bf16_c2_t256_h1_l4_k1_p splits=1
    cuda f16 1x32/32x2048x128: attention_fused_merged_f16_wide_c2_t96_h1_l8_k1_s4 splits=16 LastThreadgroup
    cuda f16 1x32/8x8192x128: attention_fused_merged_f16_wide_c2_t96_h2_l8_k1_s4 splits=33 LastThreadgroup
    cuda f16 1x32/8x32768x128: attention_fused_merged_f16_wide_c2_t96_h2_l8_k1_s4 splits=33 LastThreadgroup
    cuda f16 8x32/8x4096x128: attention_fused_merged_f16_wide_c2_t96_h2_l8_k1_s4_ragged_lse splits=4 LastThreadgroup
    cuda f16 1x32/8x512x128: attention_fused_merged_f16_wide_c2_t96_h2_l8_k1_s4 splits=32 LastThreadgroup
    cuda f32 3x6/2x77x40: attention_fused_merged_f32_vec4_c2_t96_h1_l8_k1_s4_ragged_lse splits=16 LastThreadgroup
    cuda bf16 2x4/4x33x7: attention_fused_merged_bf16_c2_t256_h1_l4_k1_p splits=4 LastThreadgroup
    metal f16 1x32/32x2048x128: attention_fused_split_f16_wide_c2_t96_h1_l8_k1_s4 splits=5 Reduction
    metal f16 1x32/8x8192x128: attention_fused_split_f16_wide_c2_t96_h2_l8_k1_s4 splits=10 Reduction
    metal f16 1x32/8x32768x128: attention_fused_split_f16_wide_c2_t96_h2_l8_k1_s4 splits=10 Reduction
    metal f16 8x32/8x4096x128: attention_fused_f16_wide_c2_t96_h2_l8_k1_s4_ragged_lse splits=1
    metal f16 1x32/8x512x128: attention_fused_split_f16_wide_c2_t96_h2_l8_k1_s4 splits=10 Reduction
    metal f32 3x6/2x77x40: attention_fused_f32_vec4_c2_t96_h1_l8_k1_s4_ragged_lse splits=1
    metal bf16 2x4/4x33x7: attention_fused_bf16_c2_t256_h1_l4_k1_p splits=1
    sim+mma f16 1x32/32x2048x128: attention_fused_mma_f16_d128_t96_h1_b16_s1 splits=1
    sim+mma f16 1x32/8x8192x128: attention_fused_mma_f16_d128_t64_h4_b16_s1 splits=1
    sim+mma f16 1x32/8x32768x128: attention_fused_mma_f16_d128_t64_h4_b16_s1 splits=1
    sim+mma f16 8x32/8x4096x128: attention_fused_mma_f16_d128_t64_h4_b16_s1_ragged_lse splits=1
    sim+mma f16 1x32/8x512x128: attention_fused_mma_f16_d128_t64_h4_b16_s1 splits=1
    sim+mma f32 3x6/2x77x40: attention_fused_f32_vec4_c2_t96_h1_l8_k1_s4_ragged_lse splits=1
    sim+mma bf16 2x4/4x33x7: attention_fused_bf16_c2_t256_h1_l4_k1_p splits=1
    cuda+mma f16 1x32/32x2048x128: attention_fused_merged_mma_f16_d128_t256_h1_b16_s2 splits=4 LastThreadgroup
    cuda+mma f16 1x32/8x8192x128: attention_fused_merged_mma_f16_d128_t256_h4_b16_s2 splits=16 LastThreadgroup
    cuda+mma f16 1x32/8x32768x128: attention_fused_merged_mma_f16_d128_t256_h4_b16_s2 splits=16 LastThreadgroup
    cuda+mma f16 8x32/8x4096x128: attention_fused_merged_mma_f16_d128_t256_h4_b16_s2_ragged_lse splits=2 LastThreadgroup
    cuda+mma f16 1x32/8x512x128: attention_fused_merged_mma_f16_d128_t256_h4_b16_s2 splits=8 LastThreadgroup
    cuda+mma f32 3x6/2x77x40: attention_fused_merged_f32_vec4_c2_t96_h1_l8_k1_s4_ragged_lse splits=16 LastThreadgroup
    cuda+mma bf16 2x4/4x33x7: attention_fused_merged_bf16_c2_t256_h1_l4_k1_p splits=4 LastThreadgroup
    metal+mma f16 1x32/32x2048x128: attention_fused_mma_f16_d128_t96_h1_b16_s1 splits=1
    metal+mma f16 1x32/8x8192x128: attention_fused_split_mma_f16_d128_t64_h4_b16_s1 splits=5 Reduction
    metal+mma f16 1x32/8x32768x128: attention_fused_split_mma_f16_d128_t64_h4_b16_s1 splits=5 Reduction
    metal+mma f16 8x32/8x4096x128: attention_fused_mma_f16_d128_t64_h4_b16_s1_ragged_lse splits=1
    metal+mma f16 1x32/8x512x128: attention_fused_split_mma_f16_d128_t64_h4_b16_s1 splits=4 Reduction
    metal+mma f32 3x6/2x77x40: attention_fused_f32_vec4_c2_t96_h1_l8_k1_s4_ragged_lse splits=1
    metal+mma bf16 2x4/4x33x7: attention_fused_bf16_c2_t256_h1_l4_k1_p splits=1
";

/// Which dense convolutions run as the implicit GEMM, as a table: half
/// types with input channels a multiple of 64 where products are `wgmma`
/// (64 × 128 tiles in four stages, the output staged where the pixels are
/// a multiple of 8), anywhere with cooperative tensors where asked (the
/// simulator's 32 KiB: 64 × 64 in two stages, element by element), never
/// for f32, other channel counts, groups, plain products, a device
/// without `wgmma` by default, or where refused by the options.
#[test]
fn dense_convolutions_take_the_implicit_gemm_where_products_are_wgmma() {
    let wgmma = cooperative_cuda(CooperativeLowering::Wgmma);
    let sim = DeviceInfo {
        cooperative_lowering: Some(CooperativeLowering::Reference),
        features: [Feature::CooperativeTensors].into_iter().collect(),
        ..device(DeviceKind::Simulator, 2, 32 * 1024, true)
    };
    let asked = |cooperative| Overrides { gemm: GemmOptions { cooperative: Some(cooperative), ..GemmOptions::default() }, ..Overrides::default() };
    let none = Overrides::default();
    // (label, type, (c_in, groups, pixels), plain, device, overrides)
    let rows = [
        ("wgmma f16 64 ch 1024 px", DType::F16, (64, 1, 1024), false, &wgmma, &none),
        ("wgmma bf16 128 ch 63 px", DType::BF16, (128, 1, 63), false, &wgmma, &none),
        ("wgmma f32", DType::F32, (64, 1, 1024), false, &wgmma, &none),
        ("wgmma 96 ch", DType::F16, (96, 1, 1024), false, &wgmma, &none),
        ("wgmma groups 2", DType::F16, (64, 2, 1024), false, &wgmma, &none),
        ("wgmma plain product", DType::F16, (64, 1, 1024), true, &wgmma, &none),
        ("wgmma refused", DType::F16, (64, 1, 1024), false, &wgmma, &asked(false)),
        ("sim default", DType::F16, (64, 1, 1024), false, &sim, &none),
        ("sim asked", DType::F16, (64, 1, 1024), false, &sim, &asked(true)),
    ];
    let got: Vec<String> = rows
        .iter()
        .map(|&(label, dtype, shape, plain, device, overrides)| {
            let choice = ImplicitConvConfig::select(dtype, shape, (plain, true), device, overrides);
            format!("{label}: {}", choice.map_or("unfolding and GEMM".to_string(), |c| c.name()))
        })
        .collect();
    let want = [
        "wgmma f16 64 ch 1024 px: conv2d_implicit_f16_64x128x64_s4_bias",
        "wgmma bf16 128 ch 63 px: conv2d_implicit_bf16_64x128x64_s4_bias_direct",
        "wgmma f32: unfolding and GEMM",
        "wgmma 96 ch: unfolding and GEMM",
        "wgmma groups 2: unfolding and GEMM",
        "wgmma plain product: unfolding and GEMM",
        "wgmma refused: unfolding and GEMM",
        "sim default: unfolding and GEMM",
        "sim asked: conv2d_implicit_f16_64x64x64_s2_bias_direct",
    ];
    assert_eq!(got, want);
}
