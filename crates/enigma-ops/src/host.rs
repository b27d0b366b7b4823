//! Host data: uploads of f32 values converted to a device type, downloads
//! converted back, and rounding to a type on the host.

use crate::{arg_err, Error};
use enigma_ir::Scalar;
use enigma_kernels::library::DType;
use enigma_runtime::half::{bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits};
use enigma_runtime::{Buffer, Runtime};

/// The bits of `v` in `elem` (f32, f16, bf16), little-endian.
fn encode(elem: Scalar, values: &[f32]) -> Vec<u8> {
    match elem {
        Scalar::F16 => values.iter().flat_map(|&v| f32_to_f16_bits(v).to_le_bytes()).collect(),
        Scalar::BF16 => values.iter().flat_map(|&v| f32_to_bf16_bits(v).to_le_bytes()).collect(),
        Scalar::I32 => values.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
        Scalar::U32 => values.iter().flat_map(|&v| (v as u32).to_le_bytes()).collect(),
        _ => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
    }
}

/// An untyped buffer holding `values` converted to `elem` (f32, f16, bf16,
/// i32 or u32), zero-padded to a multiple of 16 bytes so that it can be
/// bound as a vector view.
pub fn upload(rt: &Runtime, elem: Scalar, values: &[f32]) -> Result<Buffer, Error> {
    upload_bytes(rt, encode(elem, values))
}

/// An untyped buffer holding `bytes`, zero-padded to a multiple of 16 bytes
/// (so that it can be bound as a vector view).
pub fn upload_bytes(rt: &Runtime, mut bytes: Vec<u8>) -> Result<Buffer, Error> {
    bytes.resize(bytes.len().div_ceil(16) * 16, 0);
    let buf = rt.buffer_bytes(bytes.len())?;
    buf.write_bytes(0, &bytes)?;
    Ok(buf)
}

/// The first `n` elements of `buf` read as `elem`, converted to f64.
pub fn download(buf: &Buffer, elem: Scalar, n: usize) -> Result<Vec<f64>, Error> {
    let bytes = buf.read_bytes()?;
    let size = elem.size_bytes() as usize;
    if bytes.len() < n * size {
        return Err(arg_err("download", format!("buffer of {} bytes holds fewer than {n} {elem} elements", bytes.len())));
    }
    Ok(bytes[..n * size]
        .chunks_exact(size)
        .map(|c| match elem {
            Scalar::F16 => f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64,
            Scalar::BF16 => bf16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64,
            Scalar::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            Scalar::U32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            _ => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
        })
        .collect())
}

/// `values` rounded to `dtype` and back (what the kernel will read).
pub fn quantize(dtype: DType, values: &mut [f32]) {
    match dtype {
        DType::F32 => {}
        DType::F16 => values.iter_mut().for_each(|v| *v = f16_bits_to_f32(f32_to_f16_bits(*v))),
        DType::BF16 => values.iter_mut().for_each(|v| *v = bf16_bits_to_f32(f32_to_bf16_bits(*v))),
    }
}
