//! The pure-Rust half of the Metal backend: how enigma's values become the
//! numbers and bytes Metal is handed. Nothing here touches Metal, so it is
//! compiled and unit-tested on every system (`cargo test -p enigma-metal`),
//! while the library itself uses it only on macOS.

use enigma_backend::args::literal_bits;
use enigma_backend::{CooperativeLowering, ReadWriteTier, TextureDesc, TextureFormat};
use enigma_ir::{Feature, KernelInfo, Literal, Scalar, TextureAccess, Type};
use std::collections::BTreeSet;
use std::time::Duration;

/// The most threads one Metal threadgroup may have (Apple's documented
/// limit, which every current Metal GPU reports).
pub(crate) use enigma_ir::limits::MAX_THREADS_PER_THREADGROUP as METAL_MAX_THREADS_PER_THREADGROUP;

/// `MTLLanguageVersion`'s raw value for MSL `major.minor`: Metal encodes
/// it as `(major << 16) + minor` (`MTLLanguageVersion3_1` is `0x30001`).
pub(crate) fn language_version(version: (u8, u8)) -> usize {
    ((version.0 as usize) << 16) + version.1 as usize
}

/// The bytes of a function-constant value as Metal reads them for the
/// constant's `MTLDataType`: the value in the type's own little-endian
/// layout (1 byte for `bool`, `char`, `uchar`; 2 for `short`, `ushort`,
/// `half`, `bfloat`; 4 for `int`, `uint`, `float`; 8 for `long`, `ulong`).
/// Returns the buffer and how many of its bytes are the value.
pub(crate) fn spec_constant_bytes(value: Literal) -> ([u8; 8], usize) {
    (literal_bits(value).to_le_bytes(), value.ty.size_bytes() as usize)
}

/// How many bytes of an [`enigma_backend::ArgValue::Value`] `setBytes`
/// passes: the type's size in MSL (3-vectors padded to 4 lanes), which is
/// what `constant T& x [[buffer(n)]]` reads.
pub(crate) fn value_arg_len(ty: Type) -> usize {
    ty.size_bytes() as usize
}

/// What a compiled pipeline is cached under: the generated source and the
/// value of every specialisation constant (type and bit pattern, so `0.0`
/// and `-0.0` are different pipelines, as they are different constants).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PipelineKey {
    pub source: String,
    pub spec: Vec<(Scalar, u64)>,
}

impl PipelineKey {
    pub fn new(source: &str, spec: &[Literal]) -> PipelineKey {
        PipelineKey { source: source.to_string(), spec: spec.iter().map(|v| (v.ty, literal_bits(*v))).collect() }
    }
}

/// The time the GPU spent on a command buffer, from its `GPUStartTime` and
/// `GPUEndTime` (seconds on the host's `mach_absolute_time` clock). Metal
/// leaves both at 0 when it did not record them; that, or an end before the
/// start, gives `None` rather than a made-up duration.
pub(crate) fn gpu_time(start: f64, end: f64) -> Option<Duration> {
    if start > 0.0 && end >= start && (end - start).is_finite() {
        Some(Duration::from_secs_f64(end - start))
    } else {
        None
    }
}

/// The device's threadgroup limit from `maxThreadsPerThreadgroup.width`
/// (Metal reports per-axis maxima; the total is at most 1024).
pub(crate) fn device_max_threads(width: usize) -> u32 {
    width.min(METAL_MAX_THREADS_PER_THREADGROUP as usize) as u32
}

/// GPU cores of the device called `name` (Metal reports "Apple M2 Pro"),
/// from enigma's device catalogue, since Metal has no API for it. A chip
/// sold with several core counts gives its smallest, so the figure is a
/// lower bound; a GPU the catalogue does not know gives 0 ("unknown").
pub(crate) fn compute_units(name: &str) -> u32 {
    match enigma_analysis::catalog::find(name) {
        Ok(spec) => spec.gpu_cores_min,
        Err(_) => 0,
    }
}

/// `MTLPixelFormat`'s raw value for a texture format (the constant of the
/// same name: `MTLPixelFormatRGBA8Unorm` is 70).
pub(crate) fn pixel_format(format: TextureFormat) -> usize {
    match format {
        TextureFormat::R8Unorm => 10,
        TextureFormat::R16Float => 25,
        TextureFormat::R32Uint => 53,
        TextureFormat::R32Sint => 54,
        TextureFormat::R32Float => 55,
        TextureFormat::Rgba8Unorm => 70,
        TextureFormat::Rgba16Float => 115,
        TextureFormat::Rgba32Float => 125,
    }
}

/// `MTLTextureUsage`'s raw bits for a texture parameter of `access`:
/// `ShaderRead` (1) to read or sample it, `ShaderWrite` (2) to write it,
/// both for read_write.
pub(crate) fn texture_usage(access: TextureAccess) -> usize {
    let read = if access.can_read() { 1 } else { 0 };
    let write = if access.can_write() { 2 } else { 0 };
    read | write
}

/// `MTLStorageMode`'s raw value for the per-dispatch textures: shared (0)
/// where CPU and GPU share memory (Apple silicon), managed (1) on a GPU
/// with memory of its own, where macOS refuses shared textures (a written
/// managed texture is synchronised back before the CPU reads it).
pub(crate) fn texture_storage_mode(unified_memory: bool) -> usize {
    if unified_memory {
        0
    } else {
        1
    }
}

/// The bytes of one row of texels, as `replaceRegion` and `getBytes` take
/// them: rows are stored without padding ([`enigma_backend::texture`]).
pub(crate) fn texture_bytes_per_row(desc: &TextureDesc) -> usize {
    desc.width as usize * desc.format.bytes_per_texel()
}

/// The read-write tier of `readWriteTextureSupport`'s raw
/// `MTLReadWriteTextureTier` (0 none, 1 tier 1, 2 tier 2). A tier newer
/// than 2 allows at least what tier 2 does, which is every format enigma has.
pub(crate) fn read_write_tier(raw: usize) -> ReadWriteTier {
    match raw {
        0 => ReadWriteTier::None,
        1 => ReadWriteTier::Tier1,
        _ => ReadWriteTier::Tier2,
    }
}

/// The Metal GPU families that decide which optional features a device
/// runs (`supportsFamily:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GpuFamilies {
    /// Apple7 or later: Apple silicon from the A14 and M1.
    pub apple7: bool,
    /// Mac2: the Intel and AMD GPUs of Macs that run Metal 3.
    pub mac2: bool,
    /// Metal4 on macOS 26 or later: MSL 4.0 and MetalPerformancePrimitives.
    pub metal4: bool,
}

/// The optional features a device of `families` runs with source written
/// under `options`: SIMD-group matrices on Apple7 and Mac2 GPUs; cooperative
/// tensor operations there too (on SIMD-group matrices below MSL 4.0, with
/// MetalPerformancePrimitives on Metal 4 devices, and not at all where MSL
/// 4.0 is asked for on a device without Metal 4); device-scope fences from
/// MSL 3.2 on Apple silicon (Apple7); the rest everywhere.
pub(crate) fn device_features(options: &enigma_codegen::msl::Options, families: GpuFamilies) -> BTreeSet<Feature> {
    let mut features = enigma_codegen::msl::supported_features(options);
    if !(families.apple7 || families.mac2) {
        features.remove(&Feature::SimdgroupMatrix);
        features.remove(&Feature::CooperativeTensors);
    }
    if options.language_version >= enigma_codegen::msl::MPP_VERSION && !families.metal4 {
        features.remove(&Feature::CooperativeTensors);
    }
    if !families.apple7 {
        features.remove(&Feature::DeviceFence);
    }
    features
}

/// How a device of `families` running `features` writes cooperative tensor
/// operations: with MetalPerformancePrimitives on Metal 4 devices (where
/// [`kernel_msl_options`] writes such a kernel for MSL 4.0), on
/// `simdgroup_matrix` fragments below; `None` without the feature.
pub(crate) fn cooperative_lowering(features: &BTreeSet<Feature>, families: GpuFamilies) -> Option<CooperativeLowering> {
    features.contains(&Feature::CooperativeTensors).then_some(if families.metal4 {
        CooperativeLowering::MetalPerformancePrimitives
    } else {
        CooperativeLowering::SimdgroupMatrix
    })
}

/// The generator's options for one kernel: the backend's, with MSL 4.0
/// (cooperative tensors written with MetalPerformancePrimitives) where the
/// kernel has cooperative tensor operations and the device has Metal 4.
/// The source is compiled under the version it is written for
/// (`MTLCompileOptions.languageVersion`).
pub(crate) fn kernel_msl_options(backend: &enigma_codegen::msl::Options, info: &KernelInfo, metal4: bool) -> enigma_codegen::msl::Options {
    let mut options = backend.clone();
    if metal4 && info.features.contains(&Feature::CooperativeTensors) && options.language_version < enigma_codegen::msl::MPP_VERSION {
        options.language_version = enigma_codegen::msl::MPP_VERSION;
    }
    options
}

/// The SIMD-group width enigma's execution model has, which every kernel
/// using SIMD-group functions or matrices assumes (threadgroup scratch of one
/// slot per SIMD group, lane arithmetic, 32-bit ballots).
pub(crate) const SIMD_WIDTH: u32 = 32;

/// Refuses a pipeline whose `threadExecutionWidth` is not [`SIMD_WIDTH`]
/// when its kernel uses SIMD groups (Intel and AMD Macs run 8 to 64 lanes),
/// naming both widths.
pub(crate) fn check_simd_width(kernel: &str, info: &KernelInfo, width: u32) -> Result<(), String> {
    let uses_simd_groups = info.uses_simd_functions
        || info.features.contains(&Feature::SimdgroupMatrix)
        || info.features.contains(&Feature::CooperativeTensors);
    if uses_simd_groups && width != SIMD_WIDTH {
        return Err(format!(
            "kernel `{kernel}` uses SIMD-group functions, which enigma defines on SIMD groups of {SIMD_WIDTH} lanes, \
             but this GPU runs it {width} lanes wide (threadExecutionWidth)"
        ));
    }
    Ok(())
}

/// `items` with each distinct address once, in address order: the order
/// in which a dispatch takes its buffers' host-access locks, so that two
/// dispatches sharing buffers cannot deadlock and a buffer passed twice is
/// locked once.
pub(crate) fn distinct_by_address<T>(items: &[&T]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| items[i] as *const T as usize);
    order.dedup_by_key(|i| items[*i] as *const T as usize);
    order
}

/// Bytes a shader's log entry may take in the `MTLLogState`'s buffer
/// (a line of `print`: its format and up to `MAX_PRINT_ARGS` values, with
/// os_log's own framing).
const LOG_BYTES_PER_LINE: usize = 256;

/// The `MTLLogStateDescriptor.bufferSize` for a dispatch: room for the
/// lines a dispatch shows (`MAX_PRINTED_LINES`), at least Metal's 1 KiB.
pub(crate) fn log_buffer_bytes() -> usize {
    (enigma_ir::limits::MAX_PRINTED_LINES * LOG_BYTES_PER_LINE).max(1024)
}

/// The lines a dispatch shows of those Metal's log handler received (its
/// messages split at newlines, one `print` each): the first
/// `MAX_PRINTED_LINES`, and a note of how many more there were.
pub(crate) fn shown_log_lines(messages: Vec<String>) -> (Vec<String>, Option<String>) {
    let limit = enigma_ir::limits::MAX_PRINTED_LINES;
    let mut lines: Vec<String> =
        messages.iter().flat_map(|m| m.strip_suffix('\n').unwrap_or(m).split('\n')).map(str::to_string).collect();
    let more = lines.len().saturating_sub(limit);
    lines.truncate(limit);
    let note = (more > 0).then(|| format!("print: {more} more line(s) not shown (the Metal backend shows the first {limit} of a dispatch)"));
    (lines, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_follow_the_gpu_family() {
        let msl_3_2 = enigma_codegen::msl::Options { language_version: (3, 2), ..Default::default() };
        let m1 = device_features(&msl_3_2, GpuFamilies { apple7: true, mac2: false, metal4: false });
        assert!(m1.contains(&Feature::SimdgroupMatrix) && m1.contains(&Feature::DeviceFence));
        // Cooperative tensors on SIMD-group matrices below MSL 4.0.
        assert!(m1.contains(&Feature::CooperativeTensors));
        // An AMD Mac: matrices and cooperative tensors, no scoped fences.
        let amd = device_features(&msl_3_2, GpuFamilies { apple7: false, mac2: true, metal4: false });
        assert!(amd.contains(&Feature::SimdgroupMatrix) && !amd.contains(&Feature::DeviceFence));
        assert!(amd.contains(&Feature::CooperativeTensors));
        // An A13: none of them.
        let a13 = device_features(&msl_3_2, GpuFamilies { apple7: false, mac2: false, metal4: false });
        assert!(!a13.contains(&Feature::SimdgroupMatrix) && !a13.contains(&Feature::DeviceFence));
        assert!(!a13.contains(&Feature::CooperativeTensors));
        assert!(a13.contains(&Feature::Bfloat16) && a13.contains(&Feature::Texture2d));
        // MSL 3.1 has no scoped fences anywhere.
        let m1_3_1 = device_features(&enigma_codegen::msl::Options::default(), GpuFamilies { apple7: true, mac2: false, metal4: false });
        assert!(!m1_3_1.contains(&Feature::DeviceFence));
        // MSL 4.0 asked for: cooperative tensors only on Metal 4 devices.
        let msl_4 = enigma_codegen::msl::Options { language_version: enigma_codegen::msl::MPP_VERSION, ..Default::default() };
        assert!(!device_features(&msl_4, GpuFamilies { apple7: true, mac2: false, metal4: false }).contains(&Feature::CooperativeTensors));
        assert!(device_features(&msl_4, GpuFamilies { apple7: true, mac2: false, metal4: true }).contains(&Feature::CooperativeTensors));
        // The lowering each reports: MPP on Metal 4, fragments below, none on an A13.
        let lowering = |options: &enigma_codegen::msl::Options, families| cooperative_lowering(&device_features(options, families), families);
        assert_eq!(lowering(&msl_3_2, GpuFamilies { apple7: true, mac2: false, metal4: true }), Some(CooperativeLowering::MetalPerformancePrimitives));
        assert_eq!(lowering(&msl_3_2, GpuFamilies { apple7: true, mac2: false, metal4: false }), Some(CooperativeLowering::SimdgroupMatrix));
        assert_eq!(lowering(&msl_3_2, GpuFamilies { apple7: false, mac2: true, metal4: false }), Some(CooperativeLowering::SimdgroupMatrix));
        assert_eq!(lowering(&msl_3_2, GpuFamilies { apple7: false, mac2: false, metal4: false }), None);
        assert_eq!(lowering(&msl_4, GpuFamilies { apple7: true, mac2: false, metal4: false }), None);
    }

    #[test]
    fn cooperative_kernels_ask_for_msl_4_on_metal_4_devices() {
        let mut cooperative = KernelInfo::default();
        cooperative.features.insert(Feature::CooperativeTensors);
        let backend = enigma_codegen::msl::Options::default();
        assert_eq!(kernel_msl_options(&backend, &cooperative, true).language_version, (4, 0));
        assert_eq!(language_version(kernel_msl_options(&backend, &cooperative, true).language_version), 0x40000);
        // Without Metal 4: the backend's version, so SIMD-group matrices.
        assert_eq!(kernel_msl_options(&backend, &cooperative, false).language_version, (3, 1));
        // Other kernels keep the backend's version on any device.
        assert_eq!(kernel_msl_options(&backend, &KernelInfo::default(), true), backend);
        // A cooperative kernel needs 32 lanes like other SIMD-group code.
        assert!(check_simd_width("tile", &cooperative, 16).is_err());
    }

    #[test]
    fn kernels_with_simd_groups_need_32_lanes() {
        let simd = KernelInfo { uses_simd_functions: true, ..KernelInfo::default() };
        assert_eq!(check_simd_width("reduce", &simd, 32), Ok(()));
        let err = check_simd_width("reduce", &simd, 16).unwrap_err();
        assert!(err.contains("`reduce`") && err.contains("32 lanes") && err.contains("16 lanes"), "{err}");
        let mut matrices = KernelInfo::default();
        matrices.features.insert(Feature::SimdgroupMatrix);
        assert!(check_simd_width("gemm", &matrices, 64).is_err());
        // A kernel without SIMD groups runs at any width.
        assert_eq!(check_simd_width("scale", &KernelInfo::default(), 8), Ok(()));
    }

    #[test]
    fn language_versions_match_metal_encoding() {
        // MTLLanguageVersion3_1 = (3 << 16) + 1, MTLLanguageVersion2_4 = (2 << 16) + 4.
        assert_eq!(language_version((3, 1)), 0x30001);
        assert_eq!(language_version((2, 4)), 0x20004);
        assert_eq!(language_version((3, 0)), 0x30000);
    }

    #[test]
    fn spec_constant_bytes_have_each_types_size_and_layout() {
        let (b, n) = spec_constant_bytes(Literal::u32(0x1234_5678));
        assert_eq!((&b[..n], n), (&[0x78, 0x56, 0x34, 0x12][..], 4));
        let (b, n) = spec_constant_bytes(Literal::f32(1.5));
        assert_eq!(&b[..n], &1.5f32.to_le_bytes());
        let (b, n) = spec_constant_bytes(Literal::i32(-2));
        assert_eq!(&b[..n], &(-2i32).to_le_bytes());
        let (b, n) = spec_constant_bytes(Literal::bool(true));
        assert_eq!(&b[..n], &[1]);
        let half = Literal { ty: Scalar::F16, value: enigma_ir::LiteralValue::Float(1.0) };
        let (b, n) = spec_constant_bytes(half);
        assert_eq!(&b[..n], &0x3c00u16.to_le_bytes());
        let long = Literal { ty: Scalar::I64, value: enigma_ir::LiteralValue::Int(-3) };
        let (b, n) = spec_constant_bytes(long);
        assert_eq!(&b[..n], &(-3i64).to_le_bytes());
    }

    #[test]
    fn value_arguments_use_msl_sizes() {
        assert_eq!(value_arg_len(Type::U32), 4);
        assert_eq!(value_arg_len(Type::vector(Scalar::F32, 3)), 16, "float3 is padded to 16 bytes");
        assert_eq!(value_arg_len(Type::vector(Scalar::U64, 4)), 32);
        assert_eq!(value_arg_len(Type::scalar(Scalar::Bool)), 1);
    }

    #[test]
    fn pipeline_keys_tell_spec_values_apart() {
        let a = PipelineKey::new("src", &[Literal::u32(32)]);
        assert_eq!(a, PipelineKey::new("src", &[Literal::u32(32)]));
        assert_ne!(a, PipelineKey::new("src", &[Literal::u32(64)]));
        assert_ne!(a, PipelineKey::new("src", &[Literal::i32(32)]), "the type is part of the key");
        assert_ne!(a, PipelineKey::new("other", &[Literal::u32(32)]));
        assert_ne!(PipelineKey::new("s", &[Literal::f32(0.0)]), PipelineKey::new("s", &[Literal::f32(-0.0)]));
    }

    #[test]
    fn gpu_time_only_from_recorded_timestamps() {
        assert_eq!(gpu_time(10.0, 10.5), Some(Duration::from_millis(500)));
        assert_eq!(gpu_time(0.0, 0.0), None, "not recorded");
        assert_eq!(gpu_time(10.0, 9.0), None);
        assert_eq!(gpu_time(10.0, f64::INFINITY), None);
    }

    #[test]
    fn device_limits() {
        assert_eq!(device_max_threads(1024), 1024);
        assert_eq!(device_max_threads(4096), 1024);
        assert_eq!(device_max_threads(512), 512);
        assert!(compute_units("Apple M1") > 0, "the catalogue knows the M1");
        assert_eq!(compute_units("AMD Radeon Pro 5500M"), 0);
    }

    /// The raw values of `MTLPixelFormat` as Metal's headers (and
    /// objc2-metal's constants) give them, and rows without padding.
    #[test]
    fn pixel_formats_are_metals() {
        let raw: Vec<usize> = TextureFormat::ALL.iter().map(|f| pixel_format(*f)).collect();
        // r8unorm, rgba8unorm, r16float, rgba16float, r32float, rgba32float, r32uint, r32sint
        assert_eq!(raw, [10, 70, 25, 115, 55, 125, 53, 54]);
        let desc = TextureDesc { format: TextureFormat::Rgba16Float, width: 37, height: 11 };
        assert_eq!(texture_bytes_per_row(&desc), 37 * 8);
        assert_eq!(texture_bytes_per_row(&desc) * desc.height as usize, desc.len_bytes() as usize);
    }

    #[test]
    fn texture_usage_follows_the_access() {
        assert_eq!(texture_usage(TextureAccess::Read), 1, "ShaderRead");
        assert_eq!(texture_usage(TextureAccess::Sample), 1, "ShaderRead");
        assert_eq!(texture_usage(TextureAccess::Write), 2, "ShaderWrite");
        assert_eq!(texture_usage(TextureAccess::ReadWrite), 3, "ShaderRead | ShaderWrite");
        assert_eq!(texture_storage_mode(true), 0, "MTLStorageModeShared");
        assert_eq!(texture_storage_mode(false), 1, "MTLStorageModeManaged");
    }

    /// `MTLReadWriteTextureTierNone` = 0, `Tier1` = 1, `Tier2` = 2; tier 1
    /// binds only the 32-bit one-channel formats read_write.
    #[test]
    fn read_write_tiers_map_from_metals() {
        assert_eq!(read_write_tier(0), ReadWriteTier::None);
        assert_eq!(read_write_tier(1), ReadWriteTier::Tier1);
        assert_eq!(read_write_tier(2), ReadWriteTier::Tier2);
        assert_eq!(read_write_tier(3), ReadWriteTier::Tier2, "a newer tier allows at least tier 2's formats");
        let tier1 = read_write_tier(1);
        assert!(tier1.allows(TextureFormat::R32Float) && tier1.allows(TextureFormat::R32Uint) && tier1.allows(TextureFormat::R32Sint));
        assert!(!tier1.allows(TextureFormat::Rgba8Unorm) && !tier1.allows(TextureFormat::R16Float));
        assert!(TextureFormat::ALL.iter().all(|f| read_write_tier(2).allows(*f)));
    }

    #[test]
    fn distinct_addresses_in_order() {
        let (x, y) = (1u8, 2u8);
        let items = [&y, &x, &y];
        let order = distinct_by_address(&items);
        assert_eq!(order.len(), 2);
        let addrs: Vec<usize> = order.iter().map(|&i| items[i] as *const u8 as usize).collect();
        assert!(addrs[0] < addrs[1]);
    }

    #[test]
    fn shader_log_lines_are_split_and_bounded() {
        let limit = enigma_ir::limits::MAX_PRINTED_LINES;
        let (lines, note) = shown_log_lines(vec!["a = 1\n".into(), "b\nc".into()]);
        assert_eq!(lines, ["a = 1", "b", "c"]);
        assert_eq!(note, None);
        let many: Vec<String> = (0..limit + 3).map(|i| format!("line {i}")).collect();
        let (lines, note) = shown_log_lines(many);
        assert_eq!(lines.len(), limit);
        assert_eq!(lines[limit - 1], format!("line {}", limit - 1));
        assert_eq!(note.as_deref(), Some(format!("print: 3 more line(s) not shown (the Metal backend shows the first {limit} of a dispatch)").as_str()));
        assert_eq!(log_buffer_bytes(), limit * 256);
    }
}
