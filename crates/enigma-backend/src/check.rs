//! Checks every backend runs before a dispatch: geometry, the pipeline's
//! threadgroup limit, threadgroup memory, and the arguments against the
//! kernel's parameters (a read_write texture's format against the device's
//! [`crate::ReadWriteTier`] and a texture's sides against Metal's limit
//! included); and, when a pipeline is made, the optional features the kernel
//! uses against the device's.

use crate::texture::{TextureDesc, MAX_TEXTURE_SIDE};
use crate::{ArgValue, CompiledKernel, DeviceInfo, RuntimeError, SpecValues};
use enigma_analysis::geometry::{plan_dispatch, DispatchGeometry, DispatchMode};
use enigma_ir::{Expr, Kernel, KernelInfo, ParamId, ParamKind, SamplerFilter, TextureAccess};

/// Whether `kernel` samples texture `tex` with a linear filter.
fn samples_linearly(kernel: &Kernel, tex: ParamId) -> bool {
    let mut linear = false;
    kernel.walk_exprs(|e| {
        linear |= matches!(e, Expr::TextureSample { tex: t, sampler, .. } if *t == tex && sampler.filter == SamplerFilter::Linear)
    });
    linear
}

impl TextureDesc {
    /// Checks that each side is 1 to [`MAX_TEXTURE_SIDE`] texels (when a
    /// texture is made, and again by [`check_dispatch`]).
    pub fn check_sides(&self) -> Result<(), RuntimeError> {
        let (w, h) = (self.width, self.height);
        if w == 0 || h == 0 || w > MAX_TEXTURE_SIDE || h > MAX_TEXTURE_SIDE {
            return Err(RuntimeError::TextureSize {
                desc: *self,
                problem: format!("each side must be 1 to {MAX_TEXTURE_SIDE} texels (Metal's limit for 2D textures)"),
            });
        }
        Ok(())
    }
}

/// Checks a dispatch of `compiled` on `device` and returns its geometry.
pub fn check_dispatch(
    device: &DeviceInfo,
    compiled: &dyn CompiledKernel,
    args: &[ArgValue<'_>],
    mode: DispatchMode,
    size: [u32; 3],
    threads_per_threadgroup: [u32; 3],
) -> Result<DispatchGeometry, RuntimeError> {
    let kernel = compiled.kernel();
    let name = || kernel.name.clone();
    let [x, y, z] = threads_per_threadgroup;
    let threads = x as u64 * y as u64 * z as u64;
    let max = compiled.max_total_threads_per_threadgroup();
    if threads > max as u64 {
        return Err(RuntimeError::ThreadgroupTooLarge { kernel: name(), threads, x, y, z, max });
    }
    let geometry = plan_dispatch(mode, size, threads_per_threadgroup, None)
        .map_err(|error| RuntimeError::Geometry { kernel: name(), error })?;
    let bytes = compiled.static_threadgroup_memory_length();
    if bytes > device.max_threadgroup_memory_bytes {
        return Err(RuntimeError::ThreadgroupMemory { kernel: name(), bytes, limit: device.max_threadgroup_memory_bytes });
    }
    check_args(device, kernel, args)?;
    if let Some(threads) = partial_simdgroup(&geometry, device.simd_width) {
        if uses_matrices(kernel) {
            return Err(RuntimeError::PartialSimdgroup { kernel: name(), threads, simd_width: device.simd_width });
        }
    }
    check_cooperative_scope(kernel, &geometry, device.simd_width)?;
    Ok(geometry)
}

/// A kernel whose cooperative operations run at `execution_simdgroups(N)`
/// needs every threadgroup (the edge ones of `dispatch_threads` too) to be
/// exactly N whole SIMD groups.
fn check_cooperative_scope(kernel: &Kernel, geometry: &DispatchGeometry, simd_width: u32) -> Result<(), RuntimeError> {
    let scope = kernel.cooperative_tensors.iter().find_map(|t| match t.scope {
        enigma_ir::ExecutionScope::Simdgroups(n) => Some(n),
        enigma_ir::ExecutionScope::Simdgroup => None,
    });
    let Some(scope) = scope else { return Ok(()) };
    let needed = scope as u64 * simd_width as u64;
    let full = geometry.threads_per_threadgroup;
    let edge = geometry.edge_threadgroup.unwrap_or(full);
    for size in [full, edge] {
        let threads = size.iter().map(|&v| v as u64).product::<u64>();
        if threads != needed {
            return Err(RuntimeError::CooperativeScope {
                kernel: kernel.name.clone(),
                scope,
                needed,
                threads,
                simdgroups: threads.div_ceil(simd_width.max(1) as u64),
                simd_width,
            });
        }
    }
    Ok(())
}

/// The size of a threadgroup of this dispatch that does not fill its SIMD
/// groups (the full one, or an edge one of `dispatch_threads`), if any.
fn partial_simdgroup(geometry: &DispatchGeometry, simd_width: u32) -> Option<u64> {
    let full = geometry.threads_per_threadgroup;
    let edge = geometry.edge_threadgroup.unwrap_or(full);
    let mut sizes = vec![];
    for x in [full[0], edge[0]] {
        for y in [full[1], edge[1]] {
            for z in [full[2], edge[2]] {
                sizes.push(x as u64 * y as u64 * z as u64);
            }
        }
    }
    sizes.into_iter().find(|t| t % simd_width.max(1) as u64 != 0)
}

/// Whether the kernel uses SIMD-group matrices, whose operations need every
/// lane of the SIMD group.
fn uses_matrices(kernel: &Kernel) -> bool {
    let mut found = kernel.locals.iter().any(|l| l.ty.is_matrix()) || !kernel.cooperative_tensors.is_empty();
    kernel.walk_exprs(|e| found |= matches!(e, enigma_ir::Expr::MatrixLoad { .. } | enigma_ir::Expr::MatrixLoadQuantized { .. } | enigma_ir::Expr::MatrixFill { .. }));
    found
}

fn check_args(device: &DeviceInfo, kernel: &Kernel, args: &[ArgValue<'_>]) -> Result<(), RuntimeError> {
    if args.len() != kernel.params.len() {
        return Err(RuntimeError::ArgumentCount {
            kernel: kernel.name.clone(),
            expected: kernel.params.len(),
            found: args.len(),
        });
    }
    for (index, (param, arg)) in kernel.params.iter().zip(args).enumerate() {
        let kind_err = |expected: String, found: String| RuntimeError::ArgumentKind {
            kernel: kernel.name.clone(),
            index,
            param: param.name.clone(),
            expected,
            found,
        };
        match (param.kind, arg) {
            (ParamKind::Buffer { elem, .. }, ArgValue::Buffer { storage, elem: buf_elem }) => {
                if let Some(buf_elem) = buf_elem {
                    if *buf_elem != elem {
                        return Err(kind_err(format!("a buffer of {elem}"), format!("a buffer of {buf_elem}")));
                    }
                }
                let bytes = storage.len_bytes();
                if bytes % elem.size_bytes() as usize != 0 {
                    return Err(RuntimeError::BufferSize {
                        kernel: kernel.name.clone(),
                        index,
                        param: param.name.clone(),
                        bytes,
                        elem,
                        elem_bytes: elem.size_bytes(),
                    });
                }
            }
            (ParamKind::Texture { texel, access }, ArgValue::Texture { storage, desc }) => {
                if !desc.format.filterable() && samples_linearly(kernel, ParamId(index as u32)) {
                    return Err(RuntimeError::TextureNotFilterable { kernel: kernel.name.clone(), index, param: param.name.clone(), found: *desc });
                }
                if !desc.format.accepts(texel) {
                    return Err(RuntimeError::TextureFormat {
                        kernel: kernel.name.clone(),
                        index,
                        param: param.name.clone(),
                        found: *desc,
                        texel,
                        allowed: desc.format.texel_types(),
                    });
                }
                desc.check_sides()?;
                let tier = device.read_write_textures;
                if access == TextureAccess::ReadWrite && !tier.allows(desc.format) {
                    return Err(RuntimeError::TextureReadWrite {
                        kernel: kernel.name.clone(),
                        index,
                        param: param.name.clone(),
                        found: *desc,
                        tier,
                        device: device.name.clone(),
                    });
                }
                if storage.len_bytes() as u64 != desc.len_bytes() {
                    return Err(RuntimeError::TextureSize {
                        desc: *desc,
                        problem: format!("its storage holds {} bytes, not {}", storage.len_bytes(), desc.len_bytes()),
                    });
                }
            }
            (ParamKind::Texture { texel, access }, other) => {
                return Err(kind_err(format!("a texture2d<{texel}, {access}>"), describe(other)));
            }
            (_, ArgValue::Texture { desc, .. }) => {
                let expected = match param.kind {
                    ParamKind::Buffer { elem, .. } => format!("a buffer of {elem}"),
                    ParamKind::Value { ty } => format!("a {ty} value"),
                    ParamKind::Texture { .. } => unreachable!("matched above"),
                };
                return Err(kind_err(expected, format!("a {desc} texture")));
            }
            (ParamKind::Value { ty }, ArgValue::Value { ty: arg_ty, .. }) => {
                if *arg_ty != ty {
                    return Err(kind_err(format!("a {ty} value"), format!("a {arg_ty} value")));
                }
            }
            (ParamKind::Buffer { elem, .. }, ArgValue::Value { ty, .. }) => {
                return Err(kind_err(format!("a buffer of {elem}"), format!("a {ty} value")))
            }
            (ParamKind::Value { ty }, ArgValue::Buffer { .. }) => {
                return Err(kind_err(format!("a {ty} value"), "a buffer".into()))
            }
        }
    }
    Ok(())
}

/// An argument in the words of an error message.
fn describe(arg: &ArgValue<'_>) -> String {
    match arg {
        ArgValue::Buffer { elem: Some(elem), .. } => format!("a buffer of {elem}"),
        ArgValue::Buffer { elem: None, .. } => "a buffer".into(),
        ArgValue::Value { ty, .. } => format!("a {ty} value"),
        ArgValue::Texture { desc, .. } => format!("a {desc} texture"),
    }
}

/// Checks that `device` supports every optional feature the kernel uses
/// (validation recorded them in `info`); the error names the first missing
/// feature and what the device supports.
pub fn check_features(kernel: &Kernel, info: &KernelInfo, device: &DeviceInfo) -> Result<(), RuntimeError> {
    match enigma_ir::capabilities::missing(&info.features, &device.features).first() {
        None => Ok(()),
        Some(&feature) => {
            let supported = if device.features.is_empty() {
                "supports none of enigma's optional features".to_string()
            } else {
                let list: Vec<&str> = device.features.iter().map(|f| f.describe()).collect();
                format!("supports {} only", list.join(", "))
            };
            Err(RuntimeError::Unsupported { kernel: kernel.name.clone(), feature, device: device.name.clone(), supported })
        }
    }
}

/// Checks that every given specialisation value names a constant of the
/// kernel and has its type.
pub fn check_spec_values(kernel: &Kernel, spec: &SpecValues) -> Result<(), RuntimeError> {
    for (name, value) in &spec.0 {
        let err = |problem: String| RuntimeError::SpecConstant { kernel: kernel.name.clone(), name: name.clone(), problem };
        let Some(constant) = kernel.spec_constants.iter().find(|c| c.name == *name) else {
            let known: Vec<&str> = kernel.spec_constants.iter().map(|c| c.name.as_str()).collect();
            return Err(err(format!("does not exist (the kernel declares: {})", known.join(", "))));
        };
        if constant.ty != value.ty {
            return Err(err(format!("is {} but the value given is {}", constant.ty, value.ty)));
        }
        enigma_ir::validate::check_literal(value).map_err(|e| err(e.to_string()))?;
    }
    Ok(())
}
