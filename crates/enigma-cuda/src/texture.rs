//! Textures on CUDA. A texture lives in a plain device buffer (row-major
//! texels, as on every backend); for a dispatch, each texture argument
//! becomes a `CUarray` of the texture's format holding a copy of its texels
//! (surface load/store enabled), a surface object over it for `read` and
//! `write`, and one texture object per sampler the kernel samples it with
//! (the sampler's coordinates, filter and address mode are the texture
//! object's; unorm8 formats read as normalised floats). The kernel receives
//! them as the `enigma::texture2d` argument of the CUDA prelude (layout in
//! [`enigma_codegen::cuda::MAX_SAMPLERS_PER_TEXTURE`]). After the launch the
//! arrays of textures the kernel may write are copied back into their
//! buffers, and everything is released once the stream has finished with it.
//!
//! Each binding copies its own array, so a texture bound to two parameters
//! of one dispatch is two copies (Metal leaves such aliasing of a written
//! texture undefined too). The NVIDIA filter computes bilinear weights with
//! 8 fractional bits (`enigma_backend::texture::HARDWARE_FILTER_TOLERANCE`).

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;
use enigma_backend::{RuntimeError, TextureDesc, TextureFormat};
use enigma_codegen::cuda::MAX_SAMPLERS_PER_TEXTURE;
use enigma_ir::{Sampler, SamplerAddress, SamplerCoord, SamplerFilter};

/// Bytes of the `enigma::texture2d` kernel argument: `u64 surface; u32
/// width, height, format; u32 pad; u64 samplers[MAX_SAMPLERS_PER_TEXTURE]`.
pub(crate) const ARGUMENT_BYTES: usize = 24 + 8 * MAX_SAMPLERS_PER_TEXTURE;

/// One texture argument of one dispatch: its array and the objects over it.
/// Dropping it destroys them; the stream must be done with them first.
pub(crate) struct TextureBinding {
    array: sys::CUarray,
    surface: sys::CUsurfObject,
    samplers: Vec<sys::CUtexObject>,
    desc: TextureDesc,
    /// The buffer holding the texels.
    buffer: sys::CUdeviceptr,
}

fn texture_err(desc: &TextureDesc, what: &str, e: DriverError) -> RuntimeError {
    RuntimeError::Backend { backend: "cuda", message: format!("{what} for a {desc} texture: {e:?}") }
}

/// The array format and channel count of a pixel format.
fn array_format(format: TextureFormat) -> (sys::CUarray_format, u32) {
    use sys::CUarray_format::*;
    let element = match format {
        TextureFormat::R8Unorm | TextureFormat::Rgba8Unorm => CU_AD_FORMAT_UNSIGNED_INT8,
        TextureFormat::R16Float | TextureFormat::Rgba16Float => CU_AD_FORMAT_HALF,
        TextureFormat::R32Float | TextureFormat::Rgba32Float => CU_AD_FORMAT_FLOAT,
        TextureFormat::R32Uint => CU_AD_FORMAT_UNSIGNED_INT32,
        TextureFormat::R32Sint => CU_AD_FORMAT_SIGNED_INT32,
    };
    (element, format.channels() as u32)
}

/// The texture object description of a sampler: clamp_to_edge is CUDA's
/// clamp, clamp_to_zero its border (colour 0), repeat wrap, mirrored_repeat
/// mirror.
fn texture_desc(sampler: Sampler) -> sys::CUDA_TEXTURE_DESC {
    use sys::CUaddress_mode::*;
    let address = match sampler.address {
        SamplerAddress::ClampToEdge => CU_TR_ADDRESS_MODE_CLAMP,
        SamplerAddress::ClampToZero => CU_TR_ADDRESS_MODE_BORDER,
        SamplerAddress::Repeat => CU_TR_ADDRESS_MODE_WRAP,
        SamplerAddress::MirroredRepeat => CU_TR_ADDRESS_MODE_MIRROR,
    };
    let filter = match sampler.filter {
        SamplerFilter::Nearest => sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT,
        SamplerFilter::Linear => sys::CUfilter_mode::CU_TR_FILTER_MODE_LINEAR,
    };
    let flags = match sampler.coord {
        SamplerCoord::Normalized => sys::CU_TRSF_NORMALIZED_COORDINATES,
        SamplerCoord::Pixel => 0,
    };
    sys::CUDA_TEXTURE_DESC {
        addressMode: [address; 3],
        filterMode: filter,
        flags,
        maxAnisotropy: 0,
        mipmapFilterMode: sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT,
        mipmapLevelBias: 0.0,
        minMipmapLevelClamp: 0.0,
        maxMipmapLevelClamp: 0.0,
        borderColor: [0.0; 4],
        reserved: [0; 12],
    }
}

/// A 2D copy of a texture's texels between its buffer and its array.
fn copy_2d(desc: &TextureDesc, buffer: sys::CUdeviceptr, array: sys::CUarray, to_array: bool) -> sys::CUDA_MEMCPY2D {
    use sys::CUmemorytype::*;
    let row = desc.width as usize * desc.format.bytes_per_texel();
    let (device, arr) = (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_ARRAY);
    let null = std::ptr::null_mut();
    sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: if to_array { device } else { arr },
        srcHost: std::ptr::null(),
        srcDevice: if to_array { buffer } else { 0 },
        srcArray: if to_array { null } else { array },
        srcPitch: if to_array { row } else { 0 },
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: if to_array { arr } else { device },
        dstHost: null.cast(),
        dstDevice: if to_array { 0 } else { buffer },
        dstArray: if to_array { array } else { null },
        dstPitch: if to_array { 0 } else { row },
        WidthInBytes: row,
        Height: desc.height as usize,
    }
}

impl TextureBinding {
    /// Makes the array of a texture whose texels are in `buffer`, queues the
    /// copy of the texels into it on `stream`, and makes the surface object
    /// and a texture object for each of `samplers` (at most
    /// [`MAX_SAMPLERS_PER_TEXTURE`], which code generation checks).
    ///
    /// # Safety
    /// The context is bound; `buffer` holds `desc.len_bytes()` bytes and
    /// outlives the queued copy; `stream` is the legacy stream or one of
    /// this context.
    pub(crate) unsafe fn new(buffer: sys::CUdeviceptr, desc: TextureDesc, samplers: &[Sampler], stream: sys::CUstream) -> Result<TextureBinding, RuntimeError> {
        let (format, channels) = array_format(desc.format);
        let array_desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: desc.width as usize,
            Height: desc.height as usize,
            Depth: 0,
            Format: format,
            NumChannels: channels,
            Flags: sys::CUDA_ARRAY3D_SURFACE_LDST,
        };
        let mut array: sys::CUarray = std::ptr::null_mut();
        // SAFETY: a plain allocation from a complete descriptor.
        unsafe { sys::cuArray3DCreate_v2(&mut array, &array_desc) }.result().map_err(|e| texture_err(&desc, "creating the CUDA array", e))?;
        // From here on, Drop releases what was made if a later step fails.
        let mut binding = TextureBinding { array, surface: 0, samplers: vec![], desc, buffer };
        let copy = copy_2d(&desc, buffer, array, true);
        // SAFETY: the copy's ranges are the buffer's and the array's (same
        // rows and row bytes); the buffer outlives it by this function's contract.
        unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream) }.result().map_err(|e| texture_err(&desc, "copying the texels into the CUDA array", e))?;
        let mut resource = sys::CUDA_RESOURCE_DESC {
            resType: sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY,
            res: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1 { reserved: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_5 { reserved: [0; 32] } },
            flags: 0,
        };
        resource.res.array = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 { hArray: array };
        // SAFETY: the resource describes the live array made above.
        unsafe { sys::cuSurfObjectCreate(&mut binding.surface, &resource) }.result().map_err(|e| texture_err(&desc, "creating the surface object", e))?;
        for sampler in samplers {
            let mut object: sys::CUtexObject = 0;
            let tex_desc = texture_desc(*sampler);
            // SAFETY: the resource describes the live array; no view.
            unsafe { sys::cuTexObjectCreate(&mut object, &resource, &tex_desc, std::ptr::null()) }
                .result()
                .map_err(|e| texture_err(&desc, &format!("creating the texture object of {sampler}"), e))?;
            binding.samplers.push(object);
        }
        Ok(binding)
    }

    /// The `enigma::texture2d` argument's bytes.
    pub(crate) fn argument(&self) -> [u8; ARGUMENT_BYTES] {
        let mut bytes = [0u8; ARGUMENT_BYTES];
        let format = TextureFormat::ALL.iter().position(|f| *f == self.desc.format).unwrap_or(0) as u32;
        bytes[..8].copy_from_slice(&self.surface.to_le_bytes());
        bytes[8..12].copy_from_slice(&self.desc.width.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.desc.height.to_le_bytes());
        bytes[16..20].copy_from_slice(&format.to_le_bytes());
        for (i, object) in self.samplers.iter().enumerate() {
            bytes[24 + 8 * i..32 + 8 * i].copy_from_slice(&object.to_le_bytes());
        }
        bytes
    }

    /// Queues the copy of the array back into the texture's buffer on `stream`.
    ///
    /// # Safety
    /// As for [`TextureBinding::new`].
    pub(crate) unsafe fn copy_back(&self, stream: sys::CUstream) -> Result<(), RuntimeError> {
        let copy = copy_2d(&self.desc, self.buffer, self.array, false);
        // SAFETY: as in `new`, the other way.
        unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream) }.result().map_err(|e| texture_err(&self.desc, "copying the CUDA array back", e))
    }
}

impl Drop for TextureBinding {
    fn drop(&mut self) {
        // SAFETY: each object and the array were made once by `new` and are
        // destroyed once; the dispatch waited for the stream before dropping.
        unsafe {
            for object in &self.samplers {
                let _ = sys::cuTexObjectDestroy(*object);
            }
            if self.surface != 0 {
                let _ = sys::cuSurfObjectDestroy(self.surface);
            }
            let _ = sys::cuArrayDestroy(self.array);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The argument bytes follow the prelude's struct: surface, sizes and
    /// format index, padding, then the texture objects.
    #[test]
    fn the_argument_matches_the_preludes_texture2d() {
        let desc = TextureDesc { format: TextureFormat::Rgba16Float, width: 640, height: 480 };
        let binding = std::mem::ManuallyDrop::new(TextureBinding { array: std::ptr::null_mut(), surface: 7, samplers: vec![9, 11], desc, buffer: 0 });
        let bytes = binding.argument();
        assert_eq!(ARGUMENT_BYTES, 56);
        assert_eq!(u64::from_le_bytes(bytes[..8].try_into().unwrap()), 7);
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 640);
        assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), 480);
        assert_eq!(u32::from_le_bytes(bytes[16..20].try_into().unwrap()), 3, "rgba16float is the prelude's texture_format 3");
        assert_eq!(u64::from_le_bytes(bytes[24..32].try_into().unwrap()), 9);
        assert_eq!(u64::from_le_bytes(bytes[32..40].try_into().unwrap()), 11);
        assert_eq!(&bytes[40..], &[0; 16]);
    }

    #[test]
    fn samplers_map_to_cudas_modes() {
        let s = Sampler { coord: SamplerCoord::Pixel, filter: SamplerFilter::Linear, address: SamplerAddress::ClampToZero };
        let d = texture_desc(s);
        assert_eq!(d.addressMode[0], sys::CUaddress_mode::CU_TR_ADDRESS_MODE_BORDER);
        assert_eq!(d.filterMode, sys::CUfilter_mode::CU_TR_FILTER_MODE_LINEAR);
        assert_eq!(d.flags & sys::CU_TRSF_NORMALIZED_COORDINATES, 0);
        assert_eq!(d.flags & sys::CU_TRSF_READ_AS_INTEGER, 0, "unorm8 reads as normalised floats");
        let d = texture_desc(Sampler { coord: SamplerCoord::Normalized, address: SamplerAddress::MirroredRepeat, ..s });
        assert_eq!(d.addressMode, [sys::CUaddress_mode::CU_TR_ADDRESS_MODE_MIRROR; 3]);
        assert_ne!(d.flags & sys::CU_TRSF_NORMALIZED_COORDINATES, 0);
        assert_eq!(array_format(TextureFormat::Rgba8Unorm), (sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8, 4));
    }
}
