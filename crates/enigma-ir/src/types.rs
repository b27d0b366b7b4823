//! Value types of the IR: scalars and short vectors, with their sizes and
//! MSL spellings.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A 4-bit weight code that [`crate::Expr::MatrixLoadQuantized`] decodes:
/// the one definition of each code's values, which the simulator, the
/// kernels' host references and the packing tools all use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantCode {
    /// U4B8: the unsigned nibble minus 8 (−8 … 7).
    Int4,
    /// FP4 E2M1: `s e1 e0 m`, exponent bias 1, `e = 0` the subnormals 0 and
    /// ±0.5; the values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
    Fp4,
    /// The unsigned nibble (0 … 15): MLX's affine code, whose weight is
    /// `scale · code + bias` (only `cooperative_dequantize` has biases).
    Uint4,
}

impl QuantCode {
    pub const ALL: [QuantCode; 3] = [QuantCode::Int4, QuantCode::Fp4, QuantCode::Uint4];
    /// The codes a SIMD-group tile load decodes
    /// ([`crate::Expr::MatrixLoadQuantized`]); every code is
    /// `cooperative_dequantize`'s.
    pub const TILE: [QuantCode; 2] = [QuantCode::Int4, QuantCode::Fp4];

    /// The lower-case name (`int4`, `fp4`, `uint4`).
    pub fn name(self) -> &'static str {
        match self {
            QuantCode::Int4 => "int4",
            QuantCode::Fp4 => "fp4",
            QuantCode::Uint4 => "uint4",
        }
    }

    /// The value of the low four bits of `code`.
    pub fn value(self, code: u32) -> f32 {
        let code = code & 0xF;
        match self {
            QuantCode::Int4 => code as f32 - 8.0,
            QuantCode::Uint4 => code as f32,
            QuantCode::Fp4 => {
                let e = (code >> 1) & 3;
                let m = (code & 1) as f32;
                let magnitude = if e == 0 { 0.5 * m } else { (1u32 << (e - 1)) as f32 * (1.0 + 0.5 * m) };
                if code & 8 != 0 {
                    -magnitude
                } else {
                    magnitude
                }
            }
        }
    }
}

impl fmt::Display for QuantCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the 4-bit weights of a tile lie in their packed `u32` words
/// ([`crate::Expr::MatrixLoadQuantized`]); [`QuantLayout::locate`] is the
/// one definition of each, which the simulator, the code generators' helpers
/// and the packing tools follow. Rows of a tile run along K (a weight
/// matrix is `K × N`), columns along N.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantLayout {
    /// Seed 002's `[K/8][N]`: a word holds 8 consecutive rows of one column,
    /// row `8·i + j` at nibble `j`; a row of words is one word per column.
    #[default]
    Rows,
    /// The tensor cores' fragment order, cut in units of 64 rows × 16
    /// columns (128 words; a row of units lies unit after unit along the
    /// columns, `stride` words from one row of units to the next). Within a
    /// unit, word `4·l + q` is what lane `l` of an `mma.sync` m16n8k16 needs
    /// as B for K step `q` (rows `16q … 16q + 15`) of both 8-column halves:
    /// with `t = l % 4` and `c8 = l / 4`, nibble `h + 2·half + 4·p` is row
    /// `16q + 8h + 2t + p`, column `8·half + c8`. So a lane's four words are
    /// one 16-byte load, and each nibble pair `(j, j + 4)` is the lane's two
    /// K-consecutive weights of one fragment (the f16 pair it needs), taken
    /// from the word by one mask (Marlin's reshuffle, in enigma's order).
    Fragments,
    /// MLX's `[N][K/8]`: a row of words per column, row `8·i + j` at nibble
    /// `j` of the column's word `i`; `stride` is the words of one column
    /// (`K/8`), and the scales (and biases) are `[N][K/group]` too, a
    /// column's groups consecutive. Only `cooperative_dequantize` reads it.
    Columns,
}

impl QuantLayout {
    pub const ALL: [QuantLayout; 3] = [QuantLayout::Rows, QuantLayout::Fragments, QuantLayout::Columns];
    /// The layouts a SIMD-group tile load reads
    /// ([`crate::Expr::MatrixLoadQuantized`]); every layout is
    /// `cooperative_dequantize`'s.
    pub const TILE: [QuantLayout; 2] = [QuantLayout::Rows, QuantLayout::Fragments];

    /// Whether this is seed 002's row layout (the default).
    pub fn is_rows(&self) -> bool {
        *self == QuantLayout::Rows
    }

    /// The lower-case name (`rows`, `fragments`).
    pub fn name(self) -> &'static str {
        match self {
            QuantLayout::Rows => "rows",
            QuantLayout::Fragments => "fragments",
            QuantLayout::Columns => "columns",
        }
    }

    /// The layout named `rows`, `fragments` or `columns`.
    pub fn from_name(name: &str) -> Option<QuantLayout> {
        QuantLayout::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The rows and columns a tile (and a packed matrix) in this layout is a
    /// multiple of: 8 × 1 for rows and columns, 64 × 16 for fragments.
    pub const fn unit(self) -> (u32, u32) {
        match self {
            QuantLayout::Rows | QuantLayout::Columns => (8, 1),
            QuantLayout::Fragments => (64, 16),
        }
    }

    /// Where element `(r, c)` of a tile (or of a whole packed matrix) lies:
    /// `(unit_row, word, nibble)`, the element being nibble `nibble` (bits
    /// `4·nibble …`) of word `unit_row · stride + word` from the tile's
    /// first word, `stride` the words from one row of units to the next
    /// (`N` for rows, `8·N` for fragments); in columns the "row of units"
    /// is the column, `stride` the words of a column (`K/8`).
    pub fn locate(self, r: u32, c: u32) -> (u32, u32, u32) {
        match self {
            QuantLayout::Rows => (r / 8, c, r % 8),
            QuantLayout::Columns => (c, r / 8, r % 8),
            QuantLayout::Fragments => {
                let lane = 4 * (c % 8) + (r % 8) / 2;
                let word = (c / 16) * 128 + 4 * lane + (r % 64) / 16;
                (r / 64, word, (r % 16) / 8 + 2 * ((c % 16) / 8) + 4 * (r % 2))
            }
        }
    }

    /// The rows of units a `k × n` tile (or packed matrix) spans, a partial
    /// last one counted: `k / 8` in rows, `k / 64` in fragments, its `n`
    /// columns in columns ([`QuantLayout::locate`]'s first coordinate).
    pub fn rows_of_units(self, k: u32, n: u32) -> u32 {
        match self {
            QuantLayout::Columns => n,
            QuantLayout::Rows | QuantLayout::Fragments => k.div_ceil(self.unit().0),
        }
    }

    /// Words from one row of units to the next in a packed `k × n` matrix
    /// (from one column to the next in columns).
    pub fn stride(self, k: u32, n: u32) -> u32 {
        match self {
            QuantLayout::Rows => n,
            QuantLayout::Fragments => 8 * n,
            QuantLayout::Columns => k / 8,
        }
    }

    /// The index of the scale (and bias) of group `g` of column `c`, from
    /// the scales' first, `stride` apart: `[K/group][N]` (`g · stride + c`)
    /// in rows and fragments, `[N][K/group]` (`c · stride + g`) in columns.
    pub fn scale_index(self, g: u32, c: u32, stride: u32) -> u32 {
        match self {
            QuantLayout::Rows | QuantLayout::Fragments => g * stride + c,
            QuantLayout::Columns => c * stride + g,
        }
    }
}

impl fmt::Display for QuantLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

    /// Parses the IR's own name only (`f32`, `u8`, `bf16`).
    pub fn from_ir_name(name: &str) -> Option<Scalar> {
        Scalar::ALL.into_iter().find(|s| s.name() == name)
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

/// The type of an IR value: a scalar or a short vector. A closed enum read
/// through accessors ([`Type::elem`], [`Type::width`], …), so that new kinds
/// of values (SIMD-group matrices) are a new variant every `match` must
/// handle rather than a new field every reader may forget.
///
/// Vectors are canonical: [`Type::vector`] with width 1 is the scalar, so
/// two equal types are always the same variant. A width outside 2–4 is
/// representable (the text and JSON forms read it back) and rejected by
/// validation with the width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// One scalar (`float`, `uint`).
    Scalar(Scalar),
    /// A vector of `width` scalars (`float4`, `uint3`); valid widths are 2–4.
    Vector { elem: Scalar, width: u8 },
    /// A SIMD-group matrix tile, held jointly by the 32 lanes of a SIMD group.
    Matrix(MatrixType),
}

/// The shape of a SIMD-group matrix tile: `rows`×`cols` elements of `elem`
/// (f16, bf16 or f32), rows and columns multiples of 8 up to 64. An 8×8
/// tile is Metal's `simdgroup_matrix<T, 8, 8>`; a larger tile is a grid of
/// 8×8 fragments on Metal and of tensor-core fragments on CUDA, one value in
/// the IR so each backend uses its own unit.
///
/// Each lane holds `rows·cols/32` elements. Which lane holds which element is
/// the backend's business, except through the per-lane view
/// (`Expr::MatrixElement`, `Expr::MatrixCoord`), which says for each of a
/// lane's elements its row and column. The simulator, the reference, uses
/// Metal's map for each 8×8 fragment: lane `l` holds row
/// `(l / 16)·4 + (l / 2) % 4`, columns `((l / 8) % 2)·4 + (l % 2)·2 + {0, 1}`;
/// fragments are numbered row-major across the tile, two elements each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixType {
    elem: Scalar,
    rows: u8,
    cols: u8,
}

impl MatrixType {
    /// The side of Metal's fragment and the granularity of tile shapes.
    pub const FRAGMENT: u8 = 8;
    /// The largest tile side.
    pub const MAX_SIDE: u8 = 64;

    /// A tile shape; validation checks the element type and the sides.
    pub const fn new(elem: Scalar, rows: u8, cols: u8) -> MatrixType {
        MatrixType { elem, rows, cols }
    }
    pub const fn elem(self) -> Scalar {
        self.elem
    }
    pub const fn rows(self) -> u8 {
        self.rows
    }
    pub const fn cols(self) -> u8 {
        self.cols
    }
    /// Elements each lane holds.
    pub const fn per_lane(self) -> u32 {
        self.rows as u32 * self.cols as u32 / crate::limits::SIMD_WIDTH
    }
    /// Whether the shape is one the IR accepts (sides multiples of 8, at
    /// most 64; element f16, bf16 or f32).
    pub fn is_valid(self) -> bool {
        let side = |s: u8| s > 0 && s.is_multiple_of(Self::FRAGMENT) && s <= Self::MAX_SIDE;
        side(self.rows) && side(self.cols) && self.elem.is_float()
    }

    /// The (row, column) of element `index` of lane `lane` in the
    /// simulator's (Metal's) map; `None` past the lane's elements.
    pub fn reference_coord(self, lane: u32, index: u32) -> Option<(u32, u32)> {
        if index >= self.per_lane() || lane >= crate::limits::SIMD_WIDTH {
            return None;
        }
        let fragments_per_row = self.cols as u32 / 8;
        let (fragment, half) = (index / 2, index % 2);
        let (fr, fc) = (fragment / fragments_per_row, fragment % fragments_per_row);
        let row = (lane / 16) * 4 + (lane / 2) % 4;
        let col = ((lane / 8) % 2) * 4 + (lane % 2) * 2 + half;
        Some((fr * 8 + row, fc * 8 + col))
    }
}

impl Serialize for MatrixType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MatrixType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MatrixType, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(d)?;
        Type::from_ir_name(&name)
            .and_then(Type::as_matrix)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown matrix type `{name}` (expected e.g. `mat8x8_f16`)")))
    }
}

impl fmt::Display for MatrixType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mat{}x{}_{}", self.rows, self.cols, self.elem)
    }
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
        Type::Scalar(scalar)
    }

    /// A vector of `width` scalars; width 1 is the scalar itself.
    pub const fn vector(elem: Scalar, width: u8) -> Type {
        if width == 1 {
            Type::Scalar(elem)
        } else {
            Type::Vector { elem, width }
        }
    }

    /// The scalar type of the value or of each of its components.
    pub const fn elem(self) -> Scalar {
        match self {
            Type::Scalar(s) | Type::Vector { elem: s, .. } => s,
            Type::Matrix(m) => m.elem,
        }
    }

    /// Number of components: 1 for a scalar (and a matrix, one opaque
    /// value), 2–4 for a vector.
    pub const fn width(self) -> u8 {
        match self {
            Type::Scalar(_) | Type::Matrix(_) => 1,
            Type::Vector { width, .. } => width,
        }
    }

    /// The tile shape of a matrix type.
    pub const fn as_matrix(self) -> Option<MatrixType> {
        match self {
            Type::Matrix(m) => Some(m),
            _ => None,
        }
    }

    pub const fn is_matrix(self) -> bool {
        matches!(self, Type::Matrix(_))
    }

    pub const fn is_vector(self) -> bool {
        matches!(self, Type::Vector { .. })
    }

    /// How many per-lane registers (one per component) the simulator gives a
    /// value of this type.
    pub const fn registers(self) -> u32 {
        match self {
            Type::Matrix(m) => m.per_lane(),
            _ => self.width() as u32,
        }
    }

    /// Size in bytes in device memory; 3-vectors are padded to 4 as in MSL.
    /// (A matrix lives in registers; this is its whole tile's size.)
    pub fn size_bytes(self) -> u32 {
        if let Type::Matrix(m) = self {
            return m.rows as u32 * m.cols as u32 * m.elem.size_bytes();
        }
        let lanes = if self.width() == 3 { 4 } else { self.width() as u32 };
        self.elem().size_bytes() * lanes
    }

    /// Same shape with another scalar.
    pub fn with_elem(self, elem: Scalar) -> Type {
        Type::vector(elem, self.width())
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

    /// Parses the IR's own spelling (`f32`, `u32x4`) where any width still
    /// reads back (`f32x0`, `f32x9`), so that validation, not the reader,
    /// reports it; MSL names as [`Type::from_name`].
    pub fn from_ir_name(name: &str) -> Option<Type> {
        if let Some((shape, elem)) = name.strip_prefix("mat").and_then(|r| r.split_once('_')) {
            let (rows, cols) = shape.split_once('x')?;
            return Some(Type::Matrix(MatrixType::new(Scalar::from_ir_name(elem)?, rows.parse().ok()?, cols.parse().ok()?)));
        }
        if let Some((scalar, width)) = name.rsplit_once('x') {
            if let Some(scalar) = Scalar::from_ir_name(scalar) {
                if !width.is_empty() && width.bytes().all(|b| b.is_ascii_digit()) {
                    return width.parse::<u8>().ok().map(|width| Type::vector(scalar, width));
                }
            }
        }
        Type::from_name(name)
    }

    /// The MSL spelling (`float4`, `half`, `uint3`).
    pub fn msl_name(self) -> String {
        match self {
            Type::Scalar(s) => s.msl_name().to_string(),
            Type::Vector { elem, width } => format!("{}{}", elem.msl_name(), width),
            Type::Matrix(m) => format!("simdgroup_matrix<{}, {}, {}>", m.elem.msl_name(), m.rows, m.cols),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(s) => write!(f, "{s}"),
            Type::Vector { elem, width } => write!(f, "{elem}x{width}"),
            Type::Matrix(m) => write!(f, "{m}"),
        }
    }
}

/// In the JSON form a type is its IR name (`"f32"`, `"u32x4"`), the same
/// string the text form prints, so front ends never spell its structure.
impl Serialize for Type {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Type {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Type, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(d)?;
        Type::from_ir_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown type `{name}` (expected an IR type name such as `f32` or `u32x4`)")))
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
    fn each_quant_layout_places_scales_and_counts_rows_of_units() {
        // Group 3 of column 5, scales 40 apart: [K/group][N] rows and
        // fragments, [N][K/group] columns.
        assert_eq!([QuantLayout::Rows, QuantLayout::Fragments, QuantLayout::Columns].map(|l| l.scale_index(3, 5, 40)), [125, 125, 203]);
        // A 200 × 48 tile: 25 rows of 8, 4 of 64 (the last partial), 48 columns.
        assert_eq!([QuantLayout::Rows, QuantLayout::Fragments, QuantLayout::Columns].map(|l| l.rows_of_units(200, 48)), [25, 4, 48]);
        assert_eq!([QuantLayout::Rows, QuantLayout::Fragments, QuantLayout::Columns].map(|l| l.stride(200, 48)), [48, 384, 25]);
        assert_eq!(QuantLayout::ALL.map(|l| QuantLayout::from_name(l.name())), QuantLayout::ALL.map(Some));
        assert_eq!(QuantCode::ALL.map(|c| c.name()), ["int4", "fp4", "uint4"]);
        assert_eq!((0..16).map(|n| QuantCode::Uint4.value(n)).collect::<Vec<_>>(), (0..16).map(|n| n as f32).collect::<Vec<_>>());
    }

    #[test]
    fn each_quant_layout_places_every_weight_of_a_matrix_once() {
        let (k, n) = (128u32, 64u32);
        for layout in QuantLayout::ALL {
            let mut seen = vec![false; (k * n) as usize];
            for r in 0..k {
                for c in 0..n {
                    let (unit_row, word, nibble) = layout.locate(r, c);
                    assert!(nibble < 8 && word < layout.stride(k, n), "{layout} ({r}, {c})");
                    let slot = ((unit_row * layout.stride(k, n) + word) * 8 + nibble) as usize;
                    assert!(!seen[slot], "{layout}: ({r}, {c}) shares a nibble");
                    seen[slot] = true;
                }
            }
            assert!(seen.iter().all(|&s| s), "{layout} leaves nibbles unused");
        }
        // Fragments: a lane's nibble pair (j, j + 4) is its two K-consecutive
        // B weights of one mma fragment (rows 2t, 2t + 1 of column l / 4).
        for lane in 0..32u32 {
            for (r, c) in [(2 * (lane % 4), lane / 4), (16 + 8 + 2 * (lane % 4), 8 + lane / 4)] {
                let (_, word, nibble) = QuantLayout::Fragments.locate(r, c);
                assert_eq!(word / 4 % 32, lane);
                assert_eq!(QuantLayout::Fragments.locate(r + 1, c), (0, word, nibble + 4));
            }
        }
    }

    #[test]
    fn names_round_trip_for_every_type() {
        for scalar in Scalar::ALL {
            for width in 1..=4u8 {
                let ty = Type::vector(scalar, width);
                assert_eq!(Type::from_name(&ty.to_string()), Some(ty));
                assert_eq!(Type::from_name(&ty.msl_name()), Some(ty));
                let json = serde_json::to_string(&ty).unwrap();
                assert_eq!(json, format!("\"{ty}\""));
                assert_eq!(serde_json::from_str::<Type>(&json).unwrap(), ty);
            }
        }
    }

    #[test]
    fn width_one_is_the_scalar_and_bad_widths_read_back() {
        assert_eq!(Type::vector(Scalar::F32, 1), Type::F32);
        assert_eq!(Type::from_ir_name("f32x1"), Some(Type::F32));
        assert_eq!(Type::from_ir_name("f32x9").map(Type::width), Some(9));
        assert_eq!(Type::from_ir_name("float4"), Some(Type::vector(Scalar::F32, 4)));
        assert!(serde_json::from_str::<Type>("\"f33\"").is_err());
    }

    #[test]
    fn matrix_names_round_trip_and_the_reference_map_covers_each_tile_once() {
        let m = MatrixType::new(Scalar::F16, 16, 24);
        let ty = Type::Matrix(m);
        assert_eq!(ty.to_string(), "mat16x24_f16");
        assert_eq!(Type::from_ir_name("mat16x24_f16"), Some(ty));
        assert_eq!(serde_json::from_str::<Type>(&serde_json::to_string(&ty).unwrap()).unwrap(), ty);
        assert_eq!(ty.registers(), 12);
        let mut seen = vec![0u32; 16 * 24];
        for lane in 0..32 {
            for i in 0..m.per_lane() {
                let (r, c) = m.reference_coord(lane, i).unwrap();
                seen[(r * 24 + c) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "every element held by exactly one lane");
        // Metal's map: lane 0 holds (0, 0) and (0, 1); lane 17 holds (4, 2), (4, 3).
        assert_eq!(MatrixType::new(Scalar::F32, 8, 8).reference_coord(17, 1), Some((4, 3)));
        assert!(!MatrixType::new(Scalar::F16, 12, 8).is_valid());
        assert!(!MatrixType::new(Scalar::I32, 8, 8).is_valid());
    }

    #[test]
    fn three_vectors_are_padded_like_msl() {
        assert_eq!(Type::vector(Scalar::F32, 3).size_bytes(), 16);
        assert_eq!(Type::vector(Scalar::F16, 4).size_bytes(), 8);
    }
}
