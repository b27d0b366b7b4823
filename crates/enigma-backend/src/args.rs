//! Kernel arguments as a backend receives them, and specialisation values.

use crate::half::{f32_to_bf16_bits, f32_to_f16_bits};
use crate::texture::TextureDesc;
use crate::BufferStorage;
use enigma_ir::{Literal, Type};

/// One argument of a dispatch, in parameter order.
#[derive(Clone, Copy, Debug)]
pub enum ArgValue<'a> {
    /// A device buffer; `elem` is the element type it was created with, when
    /// it has one (raw byte buffers have none).
    Buffer { storage: &'a dyn BufferStorage, elem: Option<Type> },
    /// A by-value scalar or vector: its type and little-endian bytes.
    Value { ty: Type, bytes: [u8; 32] },
    /// A texture: its texels in `storage` (row-major, in `desc.format`),
    /// `desc.len_bytes()` bytes.
    Texture { storage: &'a dyn BufferStorage, desc: TextureDesc },
}

impl ArgValue<'_> {
    /// A by-value argument from a scalar literal.
    pub fn literal(lit: Literal) -> ArgValue<'static> {
        let ty = Type::scalar(lit.ty);
        let mut bytes = [0u8; 32];
        let size = lit.ty.size_bytes() as usize;
        bytes[..size].copy_from_slice(&literal_bits(lit).to_le_bytes()[..size]);
        ArgValue::Value { ty, bytes }
    }
}

/// The bit pattern of a literal in its type's memory layout (low bytes).
pub fn literal_bits(lit: Literal) -> u64 {
    use enigma_ir::{LiteralValue as V, Scalar as S};
    match (lit.ty, lit.value) {
        (S::F32, v) => (v.as_f64() as f32).to_bits() as u64,
        (S::F16, v) => f32_to_f16_bits(v.as_f64() as f32) as u64,
        (S::BF16, v) => f32_to_bf16_bits(v.as_f64() as f32) as u64,
        (S::Bool, V::Bool(b)) => b as u64,
        (_, V::UInt(u)) => u,
        (_, v) => v.as_i64() as u64,
    }
}

/// Values for a kernel's specialisation constants, by name; constants not
/// given take their default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecValues(pub Vec<(String, Literal)>);

impl SpecValues {
    pub fn new() -> SpecValues {
        SpecValues::default()
    }

    pub fn with(mut self, name: &str, value: Literal) -> SpecValues {
        self.0.push((name.to_string(), value));
        self
    }

    /// The value of each of `kernel`'s constants, in declaration order.
    pub fn resolve(&self, kernel: &enigma_ir::Kernel) -> Vec<Literal> {
        kernel
            .spec_constants
            .iter()
            .map(|c| self.0.iter().find(|(n, _)| *n == c.name).map(|(_, v)| *v).unwrap_or(c.default))
            .collect()
    }
}
