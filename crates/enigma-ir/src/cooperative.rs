//! Cooperative tensor operations: Metal 4's `matmul2d` model
//! (MetalPerformancePrimitives' `mpp::tensor_ops`) as IR data, with the
//! rules its operands obey.
//!
//! A [`Matmul2dDescriptor`] fixes the product's shape (m, n and a static or
//! dynamic k), both transposes, the precision and the mode; an
//! [`ExecutionScope`] says who issues it: one SIMD group, or all N SIMD
//! groups of the threadgroup together. Operands are [`crate::TensorView`]s of
//! device or threadgroup memory (extents innermost first, as MSL's
//! `dextents`), the destination a [`CooperativeTensor`]: an m×n accumulator
//! held in the registers of the scope's threads in an *unspecified* layout.
//! A kernel reaches its elements only through the slot interface: the
//! capacity (slots per thread), whether a slot holds an element, the
//! element's coordinates, and the slot's value; whole-tensor loads, stores
//! and row/column reductions. A cooperative tensor may be the next
//! product's left operand.
//!
//! Semantics (the simulator is the reference):
//! * `C = A·B` (mode multiply) or `C = C + A·B` (multiply-accumulate), each
//!   element computed in f32: starting from C's element (or 0) it adds
//!   `A[r][k]·B[k][c]` for k = 0, 1, … in order, each a fused multiply-add,
//!   then rounds once to the destination type. With `relaxed_precision` a
//!   device may sum in another order or precision, and may round a
//!   cooperative left operand to the right operand's type.
//! * The scope's SIMD groups may still be reading a product's operands when
//!   one of them has returned from it: no thread may write an operand
//!   before the scope's next barrier (the simulator counts each element as
//!   read by two threads of the scope, so the sanitizer reports such a
//!   write as a race). A product run with [`OperandRelease::SecondBarrier`]
//!   may keep reading its (threadgroup) operands across one threadgroup
//!   barrier: no thread may write them before the second threadgroup
//!   barrier after it (the simulator records the reads again just after
//!   the next barrier). That lets a device keep products in flight across
//!   the barrier of a software pipeline whose stages are reused two
//!   barriers later.
//! * A view's element `(x, y)` (x the innermost coordinate) lies at
//!   `offset + x·strides[0] + y·strides[1]` of its memory. A (m×k, row r,
//!   column k) is view element `(k, r)`, or `(r, k)` with
//!   `transpose_left`; B (k×n) is `(c, k)`, or `(k, c)` with
//!   `transpose_right`; C's element (r, c) is `(c, r)` of a load or store
//!   view. Elements outside the view's extents read as zero and are not
//!   written; inside them each is a memory access like a `Load` or `Store`.
//! * A dynamic k is the left operand's k extent (its x extent, or y
//!   transposed; a cooperative left operand's columns).
//! * `execution_simdgroups(N)` needs exactly N SIMD groups of 32 threads in
//!   the threadgroup (checked at dispatch); the product, loads, stores and
//!   reductions must be reached by every thread of the scope (validation),
//!   with the same views. Slot accesses are per thread.
//! * Which slot of which thread holds which element is unspecified: a
//!   kernel whose output depends on it is wrong on some device. The
//!   sanitizer runs such a dispatch under several layouts and reports any
//!   difference.

use crate::types::Scalar;
use serde::{Deserialize, Serialize};

/// Index of a cooperative tensor in [`crate::Kernel::cooperative_tensors`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CoopId(pub u32);

/// The largest m or n a descriptor may give (and static k).
pub const MAX_MATMUL2D_SIDE: u32 = 256;
/// The largest scope: every SIMD group of a 1024-thread threadgroup.
pub const MAX_SCOPE_SIMDGROUPS: u32 = 32;

/// Who issues a cooperative operation: MPP's `execution_simdgroup` (each
/// SIMD group on its own) or `execution_simdgroups<N>` (the threadgroup's
/// N SIMD groups together).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionScope {
    Simdgroup,
    Simdgroups(u32),
}

impl ExecutionScope {
    /// The SIMD groups that cooperate.
    pub fn simdgroups(self) -> u32 {
        match self {
            ExecutionScope::Simdgroup => 1,
            ExecutionScope::Simdgroups(n) => n,
        }
    }

    /// The threads that hold a tensor of this scope.
    pub fn threads(self) -> u32 {
        self.simdgroups() * crate::limits::SIMD_WIDTH
    }

    /// Whether the scope spans the threadgroup (and so synchronises SIMD groups).
    pub fn is_threadgroup(self) -> bool {
        matches!(self, ExecutionScope::Simdgroups(_))
    }

    /// MSL's spelling: `execution_simdgroup`, `execution_simdgroups<4>`.
    pub fn msl_name(self) -> String {
        match self {
            ExecutionScope::Simdgroup => "metal::execution_simdgroup".into(),
            ExecutionScope::Simdgroups(n) => format!("metal::execution_simdgroups<{n}>"),
        }
    }
}

impl std::fmt::Display for ExecutionScope {
    /// The text form: `simdgroup`, `simdgroups(4)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecutionScope::Simdgroup => f.write_str("simdgroup"),
            ExecutionScope::Simdgroups(n) => write!(f, "simdgroups({n})"),
        }
    }
}

/// MPP's `matmul2d_descriptor::mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matmul2dMode {
    Multiply,
    MultiplyAccumulate,
}

impl Matmul2dMode {
    pub fn name(self) -> &'static str {
        match self {
            Matmul2dMode::Multiply => "multiply",
            Matmul2dMode::MultiplyAccumulate => "multiply_accumulate",
        }
    }
    pub fn from_name(name: &str) -> Option<Matmul2dMode> {
        [Matmul2dMode::Multiply, Matmul2dMode::MultiplyAccumulate].into_iter().find(|m| m.name() == name)
    }
}

/// `matmul2d_descriptor(m, n, k, transpose_left, transpose_right,
/// relaxed_precision, mode)`; `k: None` is `dynamic_extent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Matmul2dDescriptor {
    pub m: u32,
    pub n: u32,
    pub k: Option<u32>,
    #[serde(default)]
    pub transpose_left: bool,
    #[serde(default)]
    pub transpose_right: bool,
    #[serde(default)]
    pub relaxed_precision: bool,
    pub mode: Matmul2dMode,
}

impl Matmul2dDescriptor {
    /// `m×n` by `k` (None: dynamic), no transposes, full precision, multiply.
    pub fn new(m: u32, n: u32, k: Option<u32>) -> Matmul2dDescriptor {
        Matmul2dDescriptor {
            m,
            n,
            k,
            transpose_left: false,
            transpose_right: false,
            relaxed_precision: false,
            mode: Matmul2dMode::Multiply,
        }
    }
}

/// A cooperative tensor: `rows×cols` elements of `elem` spread over the
/// threads of `scope` (MPP's `cooperative_tensor`), declared by the kernel
/// like a threadgroup array and used only through the cooperative
/// operations. Its contents start unspecified (the simulator fills them
/// with NaN, or all ones for integers).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CooperativeTensor {
    pub name: String,
    pub elem: Scalar,
    pub rows: u32,
    pub cols: u32,
    pub scope: ExecutionScope,
}

impl CooperativeTensor {
    /// Slots per thread in the simulator's layouts: enough for every
    /// element (some slots hold none when the threads do not divide them).
    /// Other devices may have more; kernels ask with `get_capacity`.
    pub fn capacity(&self) -> u32 {
        (self.rows * self.cols).div_ceil(self.scope.threads()).max(1)
    }

    /// The text form of its type: `cooperative_tensor<f32, 64, 64, simdgroups(4)>`.
    pub fn type_text(&self) -> String {
        format!("cooperative_tensor<{}, {}, {}, {}>", self.elem, self.rows, self.cols, self.scope)
    }
}

/// Until when a product may read its operands after the threads of its
/// scope return from it (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperandRelease {
    /// Until the scope's next barrier: a thread may write an operand after it.
    #[default]
    NextBarrier,
    /// Until the second threadgroup barrier after the product; its views
    /// must be of threadgroup memory.
    SecondBarrier,
}

impl OperandRelease {
    /// Whether this is the default, [`OperandRelease::NextBarrier`].
    pub fn is_next_barrier(&self) -> bool {
        *self == OperandRelease::NextBarrier
    }
}

/// What a reduction reduces along: `rows` gives one value per row (an m×1
/// tensor), `columns` one per column (1×n).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceAxis {
    Rows,
    Columns,
}

/// The reduction: sum (in f32, in index order), max or min.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }
    pub fn from_name(name: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The identity: 0, `-inf`, `+inf`.
    pub fn identity(self) -> f64 {
        match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::Min => f64::INFINITY,
        }
    }

    /// The f64 reference over `values`.
    pub fn reference(self, values: impl IntoIterator<Item = f64>) -> f64 {
        let it = values.into_iter();
        match self {
            ReduceOp::Sum => it.sum(),
            ReduceOp::Max => it.fold(f64::NEG_INFINITY, f64::max),
            ReduceOp::Min => it.fold(f64::INFINITY, f64::min),
        }
    }
}

impl std::fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`crate::StmtKind::CooperativeCombine`] does with each element of
/// its destination and the matching element of its source: `dest = op(dest,
/// src)` in f32 (`assign` replaces it; `max`/`min` as `fmaxf`/`fminf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CombineOp {
    Assign,
    Add,
    Sub,
    Mul,
    Max,
    Min,
}

impl CombineOp {
    pub const ALL: [CombineOp; 6] = [CombineOp::Assign, CombineOp::Add, CombineOp::Sub, CombineOp::Mul, CombineOp::Max, CombineOp::Min];
    pub fn name(self) -> &'static str {
        match self {
            CombineOp::Assign => "assign",
            CombineOp::Add => "add",
            CombineOp::Sub => "sub",
            CombineOp::Mul => "mul",
            CombineOp::Max => "max",
            CombineOp::Min => "min",
        }
    }
    pub fn from_name(name: &str) -> Option<CombineOp> {
        CombineOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// `op(dest, src)` in f32, as every backend computes it.
    pub fn apply(self, dest: f32, src: f32) -> f32 {
        match self {
            CombineOp::Assign => src,
            CombineOp::Add => dest + src,
            CombineOp::Sub => dest - src,
            CombineOp::Mul => dest * src,
            CombineOp::Max => dest.max(src),
            CombineOp::Min => dest.min(src),
        }
    }
}

impl ReduceAxis {
    /// The MSL function (`reduce_rows`), also the IR name.
    pub fn function(self) -> &'static str {
        match self {
            ReduceAxis::Rows => "reduce_rows",
            ReduceAxis::Columns => "reduce_columns",
        }
    }
}

/// The input element types a product takes and the destinations each may
/// have: each input f16, bf16 or f32 (a cooperative left operand is often
/// an f32 accumulator); the destination f32, or the inputs' 16-bit type
/// when both have it.
pub fn matmul2d_types(left: Scalar, right: Scalar, dest: Scalar) -> Result<(), String> {
    for t in [left, right] {
        if !matches!(t, Scalar::F16 | Scalar::BF16 | Scalar::F32) {
            return Err(format!("an operand holds {t}; matmul2d takes f16, bf16 or f32"));
        }
    }
    if dest == Scalar::F32 || (dest == left && dest == right) {
        return Ok(());
    }
    Err(format!("{left} by {right} operands cannot accumulate into {dest} (into f32, or into the inputs' type when both are f16 or both bf16)"))
}

/// Checks a descriptor's numbers.
pub fn descriptor(d: &Matmul2dDescriptor) -> Result<(), String> {
    let side = |name: &str, v: u32| {
        if v == 0 || !v.is_multiple_of(8) || v > MAX_MATMUL2D_SIDE {
            Err(format!("the descriptor's {name} is {v}; it must be a multiple of 8 from 8 to {MAX_MATMUL2D_SIDE}"))
        } else {
            Ok(())
        }
    };
    side("m", d.m)?;
    side("n", d.n)?;
    if let Some(k) = d.k {
        side("k", k)?;
    }
    Ok(())
}

/// Checks a scope's SIMD-group count.
pub fn scope(s: ExecutionScope) -> Result<(), String> {
    match s {
        ExecutionScope::Simdgroups(n) if n == 0 || n > MAX_SCOPE_SIMDGROUPS => {
            Err(format!("execution_simdgroups({n}): a threadgroup has 1 to {MAX_SCOPE_SIMDGROUPS} SIMD groups"))
        }
        _ => Ok(()),
    }
}

/// Checks a declared cooperative tensor: element type, shape and scope.
pub fn tensor(t: &CooperativeTensor) -> Result<(), String> {
    if !matches!(t.elem, Scalar::F32 | Scalar::F16 | Scalar::BF16 | Scalar::I32 | Scalar::U32) {
        return Err(format!("cooperative tensor `{}` holds {}; it takes f32, f16, bf16, i32 or u32", t.name, t.elem));
    }
    if t.rows == 0 || t.cols == 0 || t.rows > MAX_MATMUL2D_SIDE || t.cols > MAX_MATMUL2D_SIDE {
        return Err(format!("cooperative tensor `{}` is {}×{}; each side must be 1 to {MAX_MATMUL2D_SIDE}", t.name, t.rows, t.cols));
    }
    scope(t.scope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_covers_every_element() {
        let t = CooperativeTensor { name: "c".into(), elem: Scalar::F32, rows: 64, cols: 64, scope: ExecutionScope::Simdgroups(4) };
        assert_eq!(t.capacity(), 32);
        let odd = CooperativeTensor { rows: 64, cols: 1, scope: ExecutionScope::Simdgroups(4), ..t.clone() };
        assert_eq!(odd.capacity(), 1);
        let one = CooperativeTensor { rows: 8, cols: 24, scope: ExecutionScope::Simdgroup, ..t };
        assert_eq!(one.capacity(), 6);
    }

    #[test]
    fn types_follow_the_descriptor_rules() {
        assert!(matmul2d_types(Scalar::F16, Scalar::F16, Scalar::F32).is_ok());
        assert!(matmul2d_types(Scalar::BF16, Scalar::BF16, Scalar::BF16).is_ok());
        assert!(matmul2d_types(Scalar::F32, Scalar::F32, Scalar::F16).is_err());
        assert!(matmul2d_types(Scalar::F32, Scalar::F16, Scalar::F32).is_ok());
        assert!(matmul2d_types(Scalar::F16, Scalar::BF16, Scalar::F16).is_err());
        assert!(matmul2d_types(Scalar::I32, Scalar::I32, Scalar::I32).is_err());
        assert!(descriptor(&Matmul2dDescriptor::new(64, 64, None)).is_ok());
        assert!(descriptor(&Matmul2dDescriptor::new(60, 64, None)).is_err());
        assert!(scope(ExecutionScope::Simdgroups(33)).is_err());
    }
}
