//! Value types of the IR: scalars and short vectors, with their sizes and
//! MSL spellings.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A scalar type. Every IR value is a scalar or a vector of 2–4 scalars.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scalar {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
}

impl Scalar {
    pub const ALL: [Scalar; 12] = [
        Scalar::Bool,
        Scalar::I8,
        Scalar::I16,
        Scalar::I32,
        Scalar::I64,
        Scalar::U8,
        Scalar::U16,
        Scalar::U32,
        Scalar::U64,
        Scalar::F16,
        Scalar::BF16,
        Scalar::F32,
    ];

    /// Size in bytes in device memory.
    pub fn size_bytes(self) -> u32 {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 | Scalar::F16 | Scalar::BF16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F16 | Scalar::BF16 | Scalar::F32)
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, Scalar::I8 | Scalar::I16 | Scalar::I32 | Scalar::I64)
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(self, Scalar::U8 | Scalar::U16 | Scalar::U32 | Scalar::U64)
    }

    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// The name used by the IR's text form (`f32`, `u8`, `bf16`, …).
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::F16 => "f16",
            Scalar::BF16 => "bf16",
            Scalar::F32 => "f32",
        }
    }

    /// Parses a text-form name (`f32`) or an MSL name (`float`, `half`, `uint`).
    pub fn from_name(name: &str) -> Option<Scalar> {
        Some(match name {
            "bool" => Scalar::Bool,
            "i8" | "char" => Scalar::I8,
            "i16" | "short" => Scalar::I16,
            "i32" | "int" => Scalar::I32,
            "i64" | "long" => Scalar::I64,
            "u8" | "uchar" => Scalar::U8,
            "u16" | "ushort" => Scalar::U16,
            "u32" | "uint" => Scalar::U32,
            "u64" | "ulong" => Scalar::U64,
            "f16" | "half" => Scalar::F16,
            "bf16" | "bfloat" => Scalar::BF16,
            "f32" | "float" => Scalar::F32,
            _ => return None,
        })
    }

    /// The MSL spelling of the scalar (`float`, `half`, `bfloat`, `uint`, …).
    pub fn msl_name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::I8 => "char",
            Scalar::I16 => "short",
            Scalar::I32 => "int",
            Scalar::I64 => "long",
            Scalar::U8 => "uchar",
            Scalar::U16 => "ushort",
            Scalar::U32 => "uint",
            Scalar::U64 => "ulong",
            Scalar::F16 => "half",
            Scalar::BF16 => "bfloat",
            Scalar::F32 => "float",
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scalar (`width == 1`) or a vector of 2, 3 or 4 scalars (`float4`, `uint3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Type {
    pub scalar: Scalar,
    pub width: u8,
}

impl Type {
    pub const BOOL: Type = Type::scalar(Scalar::Bool);
    pub const I32: Type = Type::scalar(Scalar::I32);
    pub const U32: Type = Type::scalar(Scalar::U32);
    pub const I64: Type = Type::scalar(Scalar::I64);
    pub const U64: Type = Type::scalar(Scalar::U64);
    pub const F16: Type = Type::scalar(Scalar::F16);
    pub const BF16: Type = Type::scalar(Scalar::BF16);
    pub const F32: Type = Type::scalar(Scalar::F32);
    pub const UINT3: Type = Type::vector(Scalar::U32, 3);

    pub const fn scalar(scalar: Scalar) -> Type {
        Type { scalar, width: 1 }
    }

    pub const fn vector(scalar: Scalar, width: u8) -> Type {
        Type { scalar, width }
    }

    pub fn is_vector(self) -> bool {
        self.width > 1
    }

    /// Size in bytes in device memory; 3-vectors are padded to 4 as in MSL.
    pub fn size_bytes(self) -> u32 {
        let lanes = if self.width == 3 { 4 } else { self.width as u32 };
        self.scalar.size_bytes() * lanes
    }

    /// Same vector width with another scalar.
    pub fn with_scalar(self, scalar: Scalar) -> Type {
        Type { scalar, width: self.width }
    }

    /// Parses `f32`, `f32x4`, or the MSL names `float4`, `half`, `uint3`.
    pub fn from_name(name: &str) -> Option<Type> {
        if let Some((s, w)) = name.rsplit_once('x') {
            if let (Some(scalar), Ok(width @ 2..=4)) = (Scalar::from_name(s), w.parse::<u8>()) {
                return Some(Type::vector(scalar, width));
            }
        }
        if let Some(scalar) = Scalar::from_name(name) {
            return Some(Type::scalar(scalar));
        }
        let digit = name.chars().last().filter(|c| ('2'..='4').contains(c))?;
        let scalar = Scalar::from_name(&name[..name.len() - 1])?;
        Some(Type::vector(scalar, digit as u8 - b'0'))
    }

    /// The MSL spelling (`float4`, `half`, `uint3`).
    pub fn msl_name(self) -> String {
        if self.width == 1 {
            self.scalar.msl_name().to_string()
        } else {
            format!("{}{}", self.scalar.msl_name(), self.width)
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.width == 1 {
            write!(f, "{}", self.scalar)
        } else {
            write!(f, "{}x{}", self.scalar, self.width)
        }
    }
}

impl From<Scalar> for Type {
    fn from(scalar: Scalar) -> Type {
        Type::scalar(scalar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_for_every_type() {
        for scalar in Scalar::ALL {
            for width in 1..=4u8 {
                let ty = Type::vector(scalar, width);
                assert_eq!(Type::from_name(&ty.to_string()), Some(ty));
                assert_eq!(Type::from_name(&ty.msl_name()), Some(ty));
            }
        }
    }

    #[test]
    fn three_vectors_are_padded_like_msl() {
        assert_eq!(Type::vector(Scalar::F32, 3).size_bytes(), 16);
        assert_eq!(Type::vector(Scalar::F16, 4).size_bytes(), 8);
    }
}
