//! Tensor maps for tile copies: each `LaunchParam::TensorMap` of a kernel
//! becomes, at every dispatch, a `CUtensorMap` of its buffer argument made
//! by `cuTensorMapEncodeTiled` from the arguments' values
//! (`enigma_codegen::cuda::TensorMap`): the matrix's extents and pitch, the
//! box and the swizzle, zeros for the elements outside the matrix.

use crate::backend::CudaBuffer;
use cudarc::driver::sys;
use enigma_backend::{own_buffer, ArgValue, RuntimeError};
use enigma_codegen::cuda::{TensorMap, TENSOR_MAP_BYTES};
use enigma_ir::Scalar;
use std::collections::HashMap;
use std::sync::Mutex;

fn data_type(elem: Scalar) -> sys::CUtensorMapDataType {
    use sys::CUtensorMapDataType::*;
    match elem {
        Scalar::F16 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        Scalar::BF16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        Scalar::F32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        Scalar::I32 => CU_TENSOR_MAP_DATA_TYPE_INT32,
        s => match s.size_bytes() {
            1 => CU_TENSOR_MAP_DATA_TYPE_UINT8,
            2 => CU_TENSOR_MAP_DATA_TYPE_UINT16,
            8 => CU_TENSOR_MAP_DATA_TYPE_UINT64,
            _ => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        },
    }
}

/// A kernel's tensor maps by what they describe (the map, the buffer's
/// address and the matrix's extents and pitch): a dispatch like an earlier
/// one reuses its maps rather than asking the driver again.
#[derive(Default)]
pub(crate) struct Cache(Mutex<HashMap<MapKey, [u8; TENSOR_MAP_BYTES]>>);

/// What a tensor map describes: the map, its buffer's device address, and
/// the matrix's rows, columns and pitch.
type MapKey = (TensorMap, u64, [u32; 3]);

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tensor map cache")
    }
}

/// Maps a kernel keeps at most (a new one past them starts the cache again).
const CACHED_MAPS: usize = 64;

impl Cache {
    /// The `CUtensorMap` of `map` for this dispatch's `args`.
    pub(crate) fn encode(&self, kernel: &str, map: &TensorMap, args: &[ArgValue<'_>]) -> Result<[u8; TENSOR_MAP_BYTES], RuntimeError> {
        let key = (map.clone(), buffer_address(args, map), values(map, args).unwrap_or([0; 3]));
        if let Some(bytes) = self.0.lock().expect("tensor map cache").get(&key) {
            return Ok(*bytes);
        }
        let bytes = encode(kernel, map, args)?;
        let mut cache = self.0.lock().expect("tensor map cache");
        if cache.len() >= CACHED_MAPS {
            cache.clear();
        }
        cache.insert(key, bytes);
        Ok(bytes)
    }
}

/// The device address of `map`'s buffer argument (0 where it is none).
fn buffer_address(args: &[ArgValue<'_>], map: &TensorMap) -> u64 {
    match args.get(map.buffer.0 as usize) {
        Some(ArgValue::Buffer { storage, .. }) => storage.device_address().unwrap_or(0),
        _ => 0,
    }
}

/// The bits of by-value argument `p`.
fn param(args: &[ArgValue<'_>], p: u32) -> Option<u64> {
    match args.get(p as usize) {
        Some(ArgValue::Value { bytes, .. }) => Some(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))),
        _ => None,
    }
}

/// The matrix's rows, columns and pitch for `args`.
fn values(map: &TensorMap, args: &[ArgValue<'_>]) -> Option<[u32; 3]> {
    let param = |p: u32| param(args, p);
    Some([map.extents[0].eval(&param)?, map.extents[1].eval(&param)?, map.pitch.eval(&param)?])
}

/// The `CUtensorMap` of `map` for this dispatch's `args`.
fn encode(kernel: &str, map: &TensorMap, args: &[ArgValue<'_>]) -> Result<[u8; TENSOR_MAP_BYTES], RuntimeError> {
    let fail = |message: String| RuntimeError::Execution { kernel: kernel.to_string(), message: format!("tile_copy from buffer argument {}: {message}", map.buffer.0) };
    let [rows, cols, pitch] = values(map, args).ok_or_else(|| fail("its extents and pitch could not be computed from the arguments".into()))?;
    let Some(ArgValue::Buffer { storage, .. }) = args.get(map.buffer.0 as usize) else {
        return Err(fail("the argument is not a buffer".into()));
    };
    let buffer: &CudaBuffer = own_buffer(*storage, "cuda", kernel)?;
    let size = u64::from(map.elem.size_bytes());
    let pitch_bytes = u64::from(pitch) * size;
    if rows == 0 || cols == 0 {
        return Err(fail(format!("the source matrix is {rows} × {cols}; a tile copy needs at least one element")));
    }
    let end = (u64::from(rows) - 1) * pitch_bytes + u64::from(cols) * size;
    if end > buffer.len as u64 || u64::from(cols) > u64::from(pitch) && rows > 1 {
        return Err(fail(format!("the {rows} × {cols} matrix with a pitch of {pitch} elements does not lie inside the buffer's {} bytes", buffer.len)));
    }
    if !pitch_bytes.is_multiple_of(16) || !buffer.ptr.is_multiple_of(16) {
        return Err(fail(format!("the copy engine needs 16-byte aligned rows: a pitch of {pitch_bytes} bytes from address {:#x}", buffer.ptr)));
    }
    let dims = [u64::from(cols), u64::from(rows)];
    let strides = [pitch_bytes.max(16)];
    let box_dims = [map.box_shape[1], map.box_shape[0]];
    let element_strides = [1u32, 1];
    let swizzle = if map.swizzle { sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B } else { sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE };
    let mut out = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer is to a live local array of the rank's length
    // (strides: rank - 1); the address is the buffer's device pointer.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut out,
            data_type(map.elem),
            2,
            buffer.ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if status != sys::CUresult::CUDA_SUCCESS {
        return Err(fail(format!("cuTensorMapEncodeTiled refused a {rows} × {cols} matrix of {} (pitch {pitch_bytes} bytes, box {} × {}): {status:?}", map.elem, map.box_shape[0], map.box_shape[1])));
    }
    let mut bytes = [0u8; TENSOR_MAP_BYTES];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(out.opaque) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    Ok(bytes)
}
