//! Golden files of the generated MSL and CUDA for every group of IR
//! constructs and for the seed kernels (`tests/snapshots/`). A change to
//! the output fails here until the new files are reviewed and accepted
//! (`cargo insta review`, or `INSTA_UPDATE=always` to rewrite them).

mod common;

use common::*;
use enigma_codegen::{cuda, msl};
use enigma_ir::Kernel;

fn check(kernel: Kernel) {
    let (kernel, info) = validated(kernel);
    let name = kernel.name.clone();
    let metal = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!(format!("{name}.msl"), metal);
    let cuda = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!(format!("{name}.cu"), cuda.source);
}

macro_rules! golden {
    ($($test:ident => $kernel:expr),* $(,)?) => {$(
        #[test]
        fn $test() {
            check($kernel);
        }
    )*};
}

golden! {
    binary_ops_u32 => common::binary_ops_u32(),
    binary_ops_f32 => common::binary_ops_f32(),
    unary_ops => common::unary_ops(),
    scalar_types => common::scalar_types(),
    vectors => common::vectors(),
    casts => common::casts(),
    builtins => common::builtins(),
    math_f32 => common::math_f32(),
    math_other_types => common::math_other_types(),
    msl_helpers => common::msl_helpers(),
    simd_functions => common::simd_functions(),
    spec_constants => common::spec_constants(),
    atomics_device => common::atomics_device(),
    atomics_threadgroup => common::atomics_threadgroup(),
    control_flow => common::control_flow(),
    barriers => common::barriers(),
    async_copies => common::async_copies(),
    tile_copies => common::tile_copies(),
    colliding_names => common::colliding_names(),
    simdgroup_matrices => common::simdgroup_matrices(),
    quantized_matrices => common::quantized_matrices(),
    multi_dim_indexing => common::multi_dim_indexing(),
    thread_arrays => common::thread_arrays(),
    textures => common::textures(),
    texture_sampling => common::texture_sampling(),
    seed003_listing4 => enigma_kernels::texture_fill::simple_kernel_function(),
    seed_scale => enigma_kernels::dispatch_patterns::scale(),
    seed_scale_vec4 => enigma_kernels::dispatch_patterns::scale_vec4(),
    seed_row_sum => enigma_kernels::dispatch_patterns::row_sum(),
    seed_two_stage_reduction => enigma_kernels::dispatch_patterns::two_stage_reduction(),
    seed_simd_broadcast => enigma_kernels::dispatch_patterns::simd_broadcast_pattern(),
    seed_prefix_sum => enigma_kernels::dispatch_patterns::prefix_sum(),
    seed_shuffle_stencil => enigma_kernels::dispatch_patterns::shuffle_stencil(),
    seed_gemm_tiled => enigma_kernels::dispatch_patterns::gemm_tiled(),
    seed_safe_scale => enigma_kernels::dispatch_patterns::safe_scale(),
    seed001_reduce_threadgroup => enigma_kernels::two_pass_sum::reduce_threadgroup(),
    seed001_reduce_final => enigma_kernels::two_pass_sum::reduce_final(),
    seed001_reduce_final_seed => seed_kernels().pop().expect("the seed's pass 2"),
}

/// Device fences: CUDA's `__threadfence()`; MSL's device-scoped
/// `atomic_thread_fence`, which MSL 3.2 brought, so that the default 3.1
/// refuses the kernel naming both versions.
#[test]
fn device_fences_need_msl_3_2() {
    let (kernel, info) = validated(common::device_fences());
    assert!(info.features.contains(&enigma_ir::Feature::DeviceFence));
    let err = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_err().to_string();
    assert!(err.contains("3.2") && err.contains("3.1") && err.contains("fence"), "{err}");
    let metal = msl::write_string(&kernel, &info, &msl::Options { language_version: (3, 2), ..msl::Options::default() }).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!("device_fences.msl", metal);
    let cuda = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!("device_fences.cu", cuda.source);
    // The Metal backend lists the feature only where its options ask for 3.2.
    assert!(!msl::supported_features(&msl::Options::default()).contains(&enigma_ir::Feature::DeviceFence));
    assert!(msl::supported_features(&msl::Options { language_version: (3, 2), ..msl::Options::default() }).contains(&enigma_ir::Feature::DeviceFence));
}

/// `print`: CUDA's `printf`; MSL's shader logging (`os_log_default.log`),
/// which MSL 3.2 brought, so that 3.1 refuses the kernel naming both
/// versions, and a kernel that prints needs 3.2.
#[test]
fn printing_is_printf_and_shader_logging_from_msl_3_2() {
    let (kernel, info) = validated(common::printing());
    assert!(info.prints);
    assert_eq!(msl::needed_version(&info), (3, 2));
    let err = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_err().to_string();
    assert!(err.contains("3.2") && err.contains("3.1") && err.contains("print (shader logging"), "{err}");
    let metal = msl::write_string(&kernel, &info, &msl::Options::for_kernel(&info, None)).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!("printing.msl", metal);
    let cuda = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    insta::assert_snapshot!("printing.cu", cuda.source);
}

/// Options that change the output: the threadgroup-size attributes and CUDA
/// specialisation values.
#[test]
fn options_change_the_output() {
    let (kernel, info) = validated(common::spec_constants());
    let metal = msl::write_string(
        &kernel,
        &info,
        &msl::Options { max_total_threads_per_threadgroup: Some(256), ..Default::default() },
    )
    .unwrap();
    insta::assert_snapshot!("spec_constants_options.msl", metal);
    let options = cuda::Options {
        spec_values: vec![enigma_ir::Literal::u32(64), enigma_ir::Literal::f32(2.0), enigma_ir::Literal::bool(false)],
        max_threads_per_threadgroup: Some(256),
        wgmma: false,
        mma: false,
        tensor_copies: false,
    };
    let source = cuda::write_string(&kernel, &info, &options).unwrap();
    insta::assert_snapshot!("spec_constants_options.cu", source.source);
}

/// Tile copies on the tensor copy engine (sm_90): the barriers and phases,
/// one thread's expected bytes and box, the arrival at the wait, and a
/// tensor map parameter described by the matrix's extents and pitch.
#[test]
fn tile_copies_on_the_copy_engine() {
    let (kernel, info) = validated(common::tile_copies());
    let options = cuda::Options { tensor_copies: true, ..cuda::Options::for_arch("sm_90a").unwrap() };
    let source = cuda::write_string(&kernel, &info, &options).unwrap_or_else(|e| panic!("{e}"));
    let maps: Vec<_> = source.launch_params.iter().filter_map(|p| match p { cuda::LaunchParam::TensorMap(m) => Some(m), _ => None }).collect();
    assert_eq!(maps.len(), 1);
    let args = |p: u32| [None, Some(40u64), Some(36)][p as usize];
    assert_eq!(maps[0].extents.each_ref().map(|e| e.eval(&args)), [Some(40), Some(36)]);
    assert_eq!((maps[0].pitch.eval(&args), maps[0].box_shape, maps[0].swizzle), (Some(40), [8, 16], false));
    insta::assert_snapshot!("tile_copies_engine.cu", source.source);
}

/// Threadgroup arrays over 48 KiB: CUDA carves them out of dynamic shared
/// memory, and the launch passes their bytes.
#[test]
fn big_threadgroup_memory_is_dynamic_shared_memory() {
    let (kernel, info) = common::big_threadgroup_memory_validated();
    let source = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((source.static_shared_bytes, source.dynamic_shared_bytes), (0, 16384 + 12288 * 4));
    assert_eq!(source.dynamic_shared_bytes, cuda::shared_layout(&kernel).bytes);
    insta::assert_snapshot!("big_threadgroup_memory.cu", source.source);
}

/// `erf`, `erfc`, `log1p` and `expm1`: CUDA's math library has them (f32
/// directly, other types through the prelude); MSL's standard library has
/// not: they are enigma's helpers (`msl_math`, golden file `msl_helpers`),
/// a vector's component by component, half and bfloat through float.
#[test]
fn functions_msl_lacks() {
    use enigma_ir::builder::*;
    use enigma_ir::{Access, Intrinsic, Scalar, Type};
    for (func, cuda_f32) in [(Intrinsic::Erf, "erff"), (Intrinsic::Erfc, "erfcf"), (Intrinsic::Log1p, "log1pf"), (Intrinsic::Expm1, "expm1f")] {
        let mut k = KernelBuilder::new("f");
        let a = k.buffer("a", Type::F32, Access::ReadWrite);
        let h = k.buffer("h", Type::vector(Scalar::F16, 2), Access::ReadWrite);
        k.store(a.at(0u32), call(func, &[a.get(1u32)]));
        k.store(h.at(0u32), call(func, &[h.get(1u32)]));
        let (kernel, info) = validated(k.finish().unwrap());
        let cuda = cuda::write_string(&kernel, &info, &cuda::Options::default()).unwrap().source;
        assert!(cuda.contains(&format!("a[0u] = {cuda_f32}(a[1u]);")), "{cuda}");
        assert!(cuda.contains(&format!("enigma::{}(h[1u])", func.name())), "{cuda}");
        let metal = msl::write_string(&kernel, &info, &msl::Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let name = func.name();
        assert!(metal.contains(&format!("h[0u] = half2(enigma_{name}(float2(h[1u])));")), "{metal}");
        assert!(metal.contains(&format!("static inline float2 enigma_{name}(float2 x)\n{{\n    return float2(enigma_{name}(x.x), enigma_{name}(x.y));\n}}")), "{metal}");
    }
}
