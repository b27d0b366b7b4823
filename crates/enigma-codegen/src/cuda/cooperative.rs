//! How the CUDA generator holds cooperative tensors and which products it
//! gives to Hopper's warpgroup matrix multiply (`wgmma.mma_async`).
//!
//! Every cooperative tensor is a per-thread register array of its capacity
//! (`float c[32]`), in one of the [`Layout`]s: the accumulator fragments of
//! `wgmma` for the destination of a product that qualifies (below), the
//! rows of such an accumulator for an f32 m×1 tensor beside it (its row
//! reductions and `combine`s along its rows then stay in registers), those
//! of `mma.sync` (`super::Options::mma`), or a linear layout (element
//! `slot · threads + thread`, row-major) for every other tensor. The kernel
//! reaches the layout only through the slot interface, so any is Metal's
//! semantics.
//!
//! A product runs on `wgmma` (m64nNk16, f32 accumulation) when the kernel is
//! compiled for `sm_90a` ([`super::Options::wgmma`]) and, at generation time:
//! * its scope is `execution_simdgroups(4·w)` (w warpgroups), m a multiple
//!   of 64·w (warpgroup g takes rows `[g·m/w, (g+1)·m/w)` in 64-row slices),
//!   its destination f32, a static k a multiple of 16;
//! * its right operand, and a left operand that is a view, are views of
//!   threadgroup arrays of scalar f16 (or both bf16) whose strides are the
//!   literals `1` and a pitch P (or locals the kernel assigns once from
//!   such literals, as the Python front end binds them) that is a
//!   multiple of 64, the array's length a multiple of 8·P, every wgmma view
//!   of the array with the same pitch, and the array never read or written
//!   by a SIMD-group matrix load or store;
//! * or its left operand is a cooperative tensor of the scope with the
//!   product's rows, k its columns, in the `wgmma` accumulator layout (a
//!   previous product's destination) or taking it (a tensor no product
//!   writes, which the threads fill through its slots or dequantize into),
//!   holding the right operand's 16-bit type, or f32 where the descriptor
//!   allows relaxed precision: `wgmma` then reads it from registers
//!   ([`WgmmaLeft`]), its slot pairs packed as they are or, from f32,
//!   rounded to the right operand's type;
//!
//! and, when it runs, the views cover the product (no element falls
//! outside their extents), their first element starts an 8-row group and a
//! 16-element (K-major) or 64-element (MN-major) column group, a dynamic k
//! is a multiple of 16 and the k columns stay within a row of the array.
//! When that run-time test fails the same product runs on the scalar path,
//! as do products that do not qualify at generation time: each thread sums
//! its own elements with `fmaf` in k order, exactly as the simulator does.
//!
//! **Threadgroup arrays that are `wgmma` operands change physical layout.**
//! `wgmma` reads shared memory in a 128-byte swizzle: rows of 64 16-bit
//! elements (panels), eight rows forming a 1024-byte atom whose 16-byte
//! chunks are XORed with the row's index modulo 8. Such an array of pitch P
//! and R = len / P rows stores logical element `i` (row `i / P`, column
//! `i % P`) at `(col / 64)·R·64 + row·64 + ((col % 64 / 8) XOR (row % 8))·8 +
//! col % 8` ([`Swizzle::physical`]), a bijection of the array's elements,
//! and every access to the array — loads, stores, atomics, asynchronous
//! copies (4, 8 or 16 bytes, aligned, so within one chunk), cooperative
//! loads and stores — goes through it. Threadgroup memory is not visible
//! outside the threadgroup, so no kernel can tell. The array is aligned to
//! 1024 bytes ([`SWIZZLE_ALIGN`]).
//!
//! **Products stay in flight until they are needed.** A `wgmma` product is
//! issued and committed, not waited for: the generator waits
//! (`wgmma.wait_group 0`) only before the next statement that reads or
//! writes a `wgmma` accumulator's registers other than by another product
//! ([`Plan::settles_before`]), before a product whose left operand is in
//! registers (it packs that operand into pairs, which the product before
//! may still be reading), and before every barrier. That is Metal's
//! semantics for race-free kernels: no thread of the scope may write a
//! product's operands before the scope's next barrier (the other SIMD
//! groups may still be reading them; the simulator counts each operand
//! element as read by two threads of the scope, so the sanitizer reports
//! such a write), and the accumulator is only reached through those
//! statements. A left operand in registers that the threads fill is not an
//! accumulator ([`Plan::is_register_operand`]): the threads write it while
//! products are in flight (those read the packed pairs), so a kernel
//! decodes the next slice's weights while the last slice's product runs.
//! The wait is `.aligned` (the whole warp executes it), so it is
//! placed before a statement in uniform control flow: a block is uniform
//! when it contains, at any depth, a product or a barrier (validation
//! requires both to be reached uniformly, so every condition around them is
//! uniform); within such a block the wait goes before the outermost
//! statement that reaches an accumulator and holds no product or barrier.
//! (No loop header or condition around a product reads an accumulator: its
//! elements differ between threads, and validation refuses a product in
//! control flow that depends on such a value.)
//!
//! **Overlapped products stay in flight across one barrier.** When every
//! `wgmma` product of the kernel releases its operands at the second
//! barrier after it ([`OperandRelease::SecondBarrier`]), a threadgroup
//! barrier reached on no path where products were issued before the
//! previous threadgroup barrier and none since waits only until at most
//! one group is pending (`wgmma.wait_group 1`): the newest group, if any,
//! is a product issued since the previous barrier (each product commits
//! one group, its scalar fallback an empty one), so every product issued
//! before that barrier is complete — exactly the operands the IR lets a
//! thread overwrite after this one ([`Plan::leaves_one_group`]). Other
//! barriers wait for everything. (Committing one group per barrier
//! interval instead does not work: `ptxas` closes a group at the last
//! `wgmma` of a product anyway and gives an empty commit a group of its
//! own, so `wait_group 1` would wait for the product.) A software pipeline
//! then keeps the tensor cores busy through its barriers.

use crate::code::TgIndex;
use enigma_ir::visit::walk_block;
use enigma_ir::{Block, Branch, CoopId, ExecutionScope, Expr, Kernel, LiteralValue, Matmul2dDescriptor, Matmul2dLeft, Memory, OperandRelease, Scalar, Stmt, StmtKind, StmtPath, TensorView, TgArrayId, Type};
use std::collections::HashSet;

/// 16-bit elements in one 128-byte swizzle row (a panel's width).
pub(crate) const PANEL: u32 = 64;
/// The alignment of a swizzled array: one swizzle atom (8 rows of 128 bytes).
pub(crate) const SWIZZLE_ALIGN: u64 = 1024;
/// Rows of a warpgroup's `wgmma` slice.
const SLICE_ROWS: u32 = 64;
/// The k of one `wgmma` instruction for 16-bit inputs.
pub(crate) const WGMMA_K: u32 = 16;

/// The 128-byte swizzle of a threadgroup array of pitch `pitch` and `rows` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Swizzle {
    pub pitch: u32,
    pub rows: u32,
}

impl Swizzle {
    /// The physical element of logical element `i` (the rule
    /// `swizzle128` in the CUDA prelude implements), in u32 arithmetic as
    /// the prelude computes it.
    pub fn physical(self, i: u32) -> u32 {
        let (row, col) = (i / self.pitch, i % self.pitch);
        ((col / PANEL).wrapping_mul(self.rows).wrapping_mul(PANEL))
            .wrapping_add(row.wrapping_mul(PANEL))
            .wrapping_add((((col % PANEL) / 8) ^ (row % 8)) * 8)
            .wrapping_add(col % 8)
    }

    /// The CUDA expression of the physical element of the logical `index`.
    /// An offset of whole swizzle atoms (a multiple of 8 rows) moves only
    /// the row, by the same amount for every base: where the writer has
    /// split it off (the sum does not wrap), the base's swizzle plus the
    /// offset's image, a constant — the base's swizzle is then shared by
    /// every access at a constant distance from it, such as a pipeline's
    /// copies into its stages.
    pub fn index_code(self, index: TgIndex) -> String {
        match index.split {
            Some((base, offset)) if offset % (8 * self.pitch) == 0 => {
                format!("(enigma::swizzle128<{}u, {}u>({base}) + {}u)", self.pitch, self.rows, self.physical(offset))
            }
            _ => format!("enigma::swizzle128<{}u, {}u>({})", self.pitch, self.rows, index.code),
        }
    }
}

/// Which slot of which thread holds which element of a cooperative tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Element `slot · threads + thread`, in row-major order.
    Linear { rows: u32, cols: u32, threads: u32 },
    /// `wgmma`'s m64nN f32 accumulator fragments, `slices` 64-row slices
    /// per warpgroup: slot `i` of thread `t` (warpgroup `g = t / 128`,
    /// `u = t % 128`, slice `i / (N/2)`, `j = i % (N/2)`) is row
    /// `g·64·slices + slice·64 + 16·(u / 32) + (u % 32) / 4 + 8·((j / 2) % 2)`,
    /// column `8·(j / 4) + 2·(u % 4) + j % 2`.
    Wgmma { slices: u32, cols: u32 },
    /// `mma.sync`'s m16n8 f32 accumulator fragments: SIMD group `w` of the
    /// scope owns rows `[w·band, (w+1)·band)` in 16×8 tiles, row-major
    /// over the tiles; slot `i` of lane `l` (tile `i / 4`, `q = i % 4`) is
    /// row `w·band + 16·(tile / (cols/8)) + l / 4 + 8·(q / 2)`, column
    /// `8·(tile % (cols/8)) + 2·(l % 4) + q % 2`.
    Mma { band: u32, cols: u32 },
    /// One value per row of a `wgmma` accumulator of `slices` slices (an
    /// m×1 tensor beside it, such as its row reduction's destination): slot
    /// `h` of thread `t` is row `g·64·slices + (h / 2)·64 + 16·(u / 32) +
    /// (u % 32) / 4 + 8·(h % 2)`, the row of the accumulator slots `4q + 2(h
    /// % 2) + {0, 1}` of slice `h / 2` in the same thread. Each row lies in
    /// the four lanes of a quad; the first holds the element (the slot is
    /// valid there), the others may hold copies.
    WgmmaRows { slices: u32 },
}

impl Layout {
    pub fn capacity(self) -> u32 {
        match self {
            Layout::Linear { rows, cols, threads } => (rows * cols).div_ceil(threads).max(1),
            Layout::Wgmma { slices, cols } => slices * cols / 2,
            Layout::Mma { band, cols } => band * cols / 32,
            Layout::WgmmaRows { slices } => 2 * slices,
        }
    }

    /// The (row, column) expressions of slot `i` of thread `t` (both `uint`).
    pub fn coords(self, t: &str, i: &str) -> (String, String) {
        match self {
            Layout::Linear { cols, threads, .. } => (format!("(({i}) * {threads}u + {t}) / {cols}u"), format!("(({i}) * {threads}u + {t}) % {cols}u")),
            Layout::Wgmma { slices, cols } => (
                format!("enigma::wgmma_row<{slices}u, {cols}u>({t}, {i})"),
                format!("enigma::wgmma_col<{cols}u>({t}, {i})"),
            ),
            Layout::Mma { band, cols } => (format!("enigma::mma_row<{band}u, {cols}u>({t}, {i})"), format!("enigma::mma_col<{cols}u>({t}, {i})")),
            Layout::WgmmaRows { slices } => (
                format!("(({t}) / 128u * {}u + ({i}) / 2u * 64u + ({t}) % 128u / 32u * 16u + ({t}) % 32u / 4u + ({i}) % 2u * 8u)", 64 * slices),
                "0u".into(),
            ),
        }
    }

    /// Whether slot `i` of thread `t` holds an element.
    pub fn valid(self, t: &str, i: &str) -> String {
        match self {
            Layout::Linear { rows, cols, threads } if (rows * cols) % threads != 0 => format!("(({i}) * {threads}u + {t} < {}u)", rows * cols),
            Layout::WgmmaRows { .. } => format!("(({t}) % 4u == 0u)"),
            _ => "true".into(),
        }
    }

    /// The (thread, slot) expressions holding element (`r`, `c`) of a SIMD
    /// group's own tensor (a one-SIMD-group scope), or None for a layout
    /// no such tensor has.
    pub fn owner(self, r: &str, c: &str) -> Option<(String, String)> {
        match self {
            Layout::Linear { cols, threads: 32, .. } => Some((format!("(({r}) * {cols}u + ({c})) % 32u"), format!("(({r}) * {cols}u + ({c})) / 32u"))),
            Layout::Mma { cols, .. } => Some((
                format!("(({r}) % 8u) * 4u + ({c}) % 8u / 2u"),
                format!("((({r}) / 16u) * {}u + ({c}) / 8u) * 4u + ({r}) % 16u / 8u * 2u + ({c}) % 2u", cols / 8),
            )),
            _ => None,
        }
    }
}

/// Where an operand's contiguous dimension lies: along k (K-major, `wgmma`'s
/// default) or along m or n (MN-major, its transpose flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Major {
    K,
    Mn,
}

/// An operand `wgmma` reads: a threadgroup array of the given pitch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WgmmaOperand {
    pub array: TgArrayId,
    pub pitch: u32,
    pub major: Major,
}

/// Where `wgmma` reads a product's left operand: a swizzled threadgroup
/// array, or the registers of a cooperative tensor in the accumulator
/// layout (a previous product's destination).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WgmmaLeft {
    Shared(WgmmaOperand),
    Registers(CoopId),
}

/// A product the generator gives to `wgmma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WgmmaProduct {
    pub warpgroups: u32,
    pub slices: u32,
    pub n: u32,
    pub elem: Scalar,
    pub left: WgmmaLeft,
    pub right: WgmmaOperand,
}

impl WgmmaProduct {
    /// The threadgroup arrays `wgmma` reads.
    fn arrays(&self) -> Vec<WgmmaOperand> {
        match self.left {
            WgmmaLeft::Shared(l) => vec![l, self.right],
            WgmmaLeft::Registers(_) => vec![self.right],
        }
    }
}

/// The function that fills one register with a pair of `elem` (f16 or
/// bf16), low first, and its definition: from two values of `from` =
/// `elem` as they are, `enigma_pair_{ty}(lo, hi)`, or from two f32 values
/// (16-bit values read exactly) rounded, `enigma_pack_{ty}(lo, hi)`. How
/// `mma.sync` fragments and a `wgmma` left operand in registers are
/// packed.
pub(crate) fn pair_register_function(elem: Scalar, from: Scalar) -> (String, String) {
    let bf16 = elem == Scalar::BF16;
    let (ty, pair) = if bf16 { ("bf16", "__nv_bfloat162") } else { ("f16", "__half2") };
    let (name, arg, make) = match (from == Scalar::F32, bf16) {
        (true, true) => (format!("enigma_pack_{ty}"), "float", "__floats2bfloat162_rn"),
        (true, false) => (format!("enigma_pack_{ty}"), "float", "__floats2half2_rn"),
        (false, true) => (format!("enigma_pair_{ty}"), "__nv_bfloat16", "__halves2bfloat162"),
        (false, false) => (format!("enigma_pair_{ty}"), "__half", "__halves2half2"),
    };
    let text = format!(
        "__device__ __forceinline__ unsigned {name}({arg} lo, {arg} hi)\n{{\n    \
         const {pair} h = {make}(lo, hi);\n    \
         return *reinterpret_cast<const unsigned*>(&h);\n}}\n"
    );
    (name, text)
}

/// A product the generator gives to `mma.sync` (m16n8k16, f32
/// accumulation): SIMD group `w` of the scope computes rows
/// `[w·band, (w+1)·band)` of the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MmaProduct {
    pub band: u32,
    pub n: u32,
    pub elem: Scalar,
}

impl MmaProduct {
    /// The function that issues one m16n8k16 instruction into four
    /// accumulator slots from packed fragments, and the one that packs two
    /// f32 values into a fragment register ([`pair_register_function`]).
    pub fn functions(&self) -> [(String, String); 2] {
        let ty = if self.elem == Scalar::BF16 { "bf16" } else { "f16" };
        let issue = format!("enigma_mma_m16n8k16_{ty}");
        [
            (
                issue.clone(),
                format!(
                    "// One mma.sync m16n8k16 ({ty} in, f32 accumulate) into four accumulator slots.\n\
                     __device__ __forceinline__ void {issue}(float* d, const unsigned* a, const unsigned* b)\n{{\n    \
                     asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\"\n        \
                     : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n        \
                     : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n}}\n"
                ),
            ),
            pair_register_function(self.elem, Scalar::F32),
        ]
    }
}

/// The product as `mma.sync` runs it: 16-bit views (both f16 or both
/// bf16) of device or threadgroup memory, a cooperative destination of
/// f32 whose layout is free, m a multiple of 16 per SIMD group.
fn mma_candidate(kernel: &Kernel, desc: &Matmul2dDescriptor, scope: ExecutionScope, left: &Matmul2dLeft, right: &TensorView, dest: CoopId) -> Option<MmaProduct> {
    let warps = match scope {
        ExecutionScope::Simdgroup => 1,
        ExecutionScope::Simdgroups(n) => n,
    };
    let Matmul2dLeft::Tensor(lv) = left else { return None };
    let elem = |v: &TensorView| match crate::plan::memory_elem(kernel, v.mem)? {
        Type::Scalar(s @ (Scalar::F16 | Scalar::BF16)) => Some(s),
        _ => None,
    };
    let (le, re) = (elem(lv)?, elem(right)?);
    (le == re && kernel.cooperative(dest).elem == Scalar::F32 && desc.m.is_multiple_of(16 * warps)).then_some(MmaProduct { band: desc.m / warps, n: desc.n, elem: le })
}

/// The layouts of a kernel's cooperative tensors and threadgroup arrays.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    pub swizzled: Vec<Option<Swizzle>>,
    pub layouts: Vec<Layout>,
    /// The statements before which the generator waits for the products
    /// in flight.
    settle: HashSet<StmtPath>,
    /// The threadgroup barriers that wait for all `wgmma` groups but the
    /// newest ([`Plan::leaves_one_group`]); empty unless every `wgmma`
    /// product releases its operands at the second barrier after it.
    one_group_barriers: HashSet<StmtPath>,
    /// The tensors `wgmma` reads from registers that no product writes
    /// ([`Plan::is_register_operand`]).
    register_operands: HashSet<CoopId>,
}

/// Where a path stands with the `wgmma` groups, as bits (a set of states
/// a point may be reached in): no product issued yet, the newest group
/// issued since the last threadgroup barrier, or products issued but none
/// since that barrier. `wait_group 1` at a barrier completes every product
/// issued before the previous barrier unless the path is stale.
struct GroupState;

impl GroupState {
    const FRESH: u8 = 1;
    const SINCE: u8 = 2;
    const STALE: u8 = 4;
    const ALL: u8 = 7;

    /// The states after a threadgroup barrier reached in `states`.
    fn after_barrier(states: u8) -> u8 {
        (states & GroupState::FRESH) | if states & (GroupState::SINCE | GroupState::STALE) != 0 { GroupState::STALE } else { 0 }
    }
}

/// The value of a u32 that is the same in every thread at generation
/// time: a literal, or a local the kernel assigns once, from such a value
/// (the Python front end binds a view's extents and strides to locals).
fn literal_u32(kernel: &Kernel, e: &Expr) -> Option<u32> {
    match e {
        Expr::Literal(l) if l.ty == Scalar::U32 => match l.value {
            LiteralValue::UInt(u) => u32::try_from(u).ok(),
            _ => None,
        },
        Expr::Var(v) => {
            let mut assignments = vec![];
            kernel.walk_stmts(|_, s| match &s.kind {
                StmtKind::Assign { var, value } if var == v => assignments.push(Some(value)),
                k if k.assigned() == Some(*v) => assignments.push(None),
                _ => {}
            });
            match assignments.as_slice() {
                [Some(value)] if !matches!(value, Expr::Var(_)) => literal_u32(kernel, value),
                _ => None,
            }
        }
        _ => None,
    }
}

fn operand(kernel: &Kernel, view: &TensorView, major: Major) -> Option<(WgmmaOperand, Scalar)> {
    let Memory::Threadgroup(array) = view.mem else { return None };
    let arr = kernel.threadgroup_arrays.get(array.0 as usize)?;
    let elem = match arr.elem {
        Type::F16 => Scalar::F16,
        Type::BF16 => Scalar::BF16,
        _ => return None,
    };
    let pitch = literal_u32(kernel, &view.strides[1])?;
    if literal_u32(kernel, &view.strides[0]) != Some(1) || pitch == 0 || !pitch.is_multiple_of(PANEL) || !arr.len.is_multiple_of(8 * pitch) {
        return None;
    }
    Some((WgmmaOperand { array, pitch, major }, elem))
}

/// The product as `wgmma` would run it, judged on the product and the
/// layouts decided so far: a cooperative left operand must already be in
/// the accumulator layout of the same rows, its columns the product's k,
/// and either hold the right operand's 16-bit type (its pairs are what
/// `wgmma` reads) or be f32 under a descriptor that allows relaxed
/// precision, under which it is rounded to the right operand's type.
fn candidate(kernel: &Kernel, layouts: &[Layout], desc: &Matmul2dDescriptor, scope: ExecutionScope, left: &Matmul2dLeft, right: &TensorView, dest: CoopId) -> Option<WgmmaProduct> {
    let ExecutionScope::Simdgroups(n) = scope else { return None };
    let warpgroups = n / 4;
    if !n.is_multiple_of(4) || kernel.cooperative(dest).elem != Scalar::F32 || !desc.m.is_multiple_of(SLICE_ROWS * warpgroups) || desc.k.is_some_and(|k| !k.is_multiple_of(WGMMA_K)) {
        return None;
    }
    let slices = desc.m / (SLICE_ROWS * warpgroups);
    let (r, re) = operand(kernel, right, if desc.transpose_right { Major::K } else { Major::Mn })?;
    let left = match left {
        Matmul2dLeft::Tensor(lv) => {
            let (l, le) = operand(kernel, lv, if desc.transpose_left { Major::Mn } else { Major::K })?;
            (le == re).then_some(WgmmaLeft::Shared(l))?
        }
        Matmul2dLeft::Cooperative(id) => {
            let t = kernel.cooperative(*id);
            let layout = Layout::Wgmma { slices, cols: t.cols };
            let in_registers = layouts.get(id.0 as usize) == Some(&layout) || (free_left(kernel, layouts, *id) && t.rows == desc.m && t.scope == scope);
            let exact = t.elem == re || (t.elem == Scalar::F32 && desc.relaxed_precision);
            (in_registers && exact && t.cols.is_multiple_of(WGMMA_K)).then_some(WgmmaLeft::Registers(*id))?
        }
    };
    Some(WgmmaProduct { warpgroups, slices, n: desc.n, elem: re, left, right: r })
}

/// Whether cooperative tensor `id` may still take the accumulator layout
/// as a left operand: its layout is undecided (linear) and no product
/// writes it, so the kernel fills it only through its slots (a left
/// operand computed by the threads, such as dequantized weights).
fn free_left(kernel: &Kernel, layouts: &[Layout], id: CoopId) -> bool {
    if !matches!(layouts.get(id.0 as usize), Some(Layout::Linear { .. })) {
        return false;
    }
    let mut written = false;
    kernel.walk_stmts(|_, s| written |= matches!(&s.kind, StmtKind::Matmul2d { dest, .. } if *dest == id));
    !written
}

impl Plan {
    /// The layouts of `kernel`: `wgmma` ones only when `wgmma` is allowed,
    /// `mma.sync` ones (for destinations `wgmma` does not take) only when
    /// `mma` is.
    pub fn new(kernel: &Kernel, wgmma: bool, mma: bool) -> Plan {
        let mut plan = Plan {
            swizzled: vec![None; kernel.threadgroup_arrays.len()],
            layouts: kernel
                .cooperative_tensors
                .iter()
                .map(|t| Layout::Linear { rows: t.rows, cols: t.cols, threads: t.scope.threads() })
                .collect(),
            settle: HashSet::new(),
            one_group_barriers: HashSet::new(),
            register_operands: HashSet::new(),
        };
        if kernel.cooperative_tensors.is_empty() {
            return plan;
        }
        if wgmma {
            plan.plan_wgmma(kernel);
            plan.plan_wgmma_rows(kernel);
        }
        if mma {
            kernel.walk_stmts(|_, s| {
                if let StmtKind::Matmul2d { desc, scope, left, right, dest, .. } = &s.kind {
                    if let Some(p) = mma_candidate(kernel, desc, *scope, left, right, *dest) {
                        if matches!(plan.layouts[dest.0 as usize], Layout::Linear { .. }) {
                            plan.layouts[dest.0 as usize] = Layout::Mma { band: p.band, cols: p.n };
                        }
                    }
                }
            });
        }
        plan
    }

    /// Gives each f32 m×1 tensor the rows of a `wgmma` accumulator of its
    /// scope with m rows, if the kernel has one ([`Layout::WgmmaRows`]): its
    /// row reductions and the combinations along its rows then stay in
    /// registers.
    fn plan_wgmma_rows(&mut self, kernel: &Kernel) {
        let tensors = &kernel.cooperative_tensors;
        for (i, t) in tensors.iter().enumerate() {
            if t.cols != 1 || t.elem != Scalar::F32 {
                continue;
            }
            let beside = tensors.iter().zip(&self.layouts).find_map(|(a, layout)| match layout {
                Layout::Wgmma { slices, .. } if a.rows == t.rows && a.scope == t.scope => Some(*slices),
                _ => None,
            });
            if let Some(slices) = beside {
                self.layouts[i] = Layout::WgmmaRows { slices };
            }
        }
    }

    /// Gives `wgmma` the products it takes (the module doc's rules).
    fn plan_wgmma(&mut self, kernel: &Kernel) {
        let plan = self;
        let mut products = vec![];
        kernel.walk_stmts(|_, s| {
            if let StmtKind::Matmul2d { desc, scope, left, right, dest, release } = &s.kind {
                products.push((desc, *scope, left, right, *dest, *release));
            }
        });
        // Arrays a SIMD-group matrix load or store reads in the linear layout.
        let mut linear = vec![false; kernel.threadgroup_arrays.len()];
        let mut mark = |m: &Memory| {
            if let Memory::Threadgroup(t) = m {
                linear[t.0 as usize] = true;
            }
        };
        kernel.walk_exprs(|e| match e {
            Expr::MatrixLoad { mem, .. } => mark(mem),
            Expr::MatrixLoadQuantized { words, scales, .. } => {
                mark(words);
                mark(scales);
            }
            _ => {}
        });
        kernel.walk_stmts(|_, s| {
            if let StmtKind::MatrixStore { mem, .. } = &s.kind {
                mark(mem);
            }
        });
        // And arrays that products would read with two different pitches.
        let mut pitch: Vec<Option<u32>> = vec![None; kernel.threadgroup_arrays.len()];
        for (desc, _, left, right, _, _) in &products {
            let mut views = vec![(*right, if desc.transpose_right { Major::K } else { Major::Mn })];
            if let Matmul2dLeft::Tensor(lv) = left {
                views.push((lv, if desc.transpose_left { Major::Mn } else { Major::K }));
            }
            for (view, major) in views {
                if let Some((o, _)) = operand(kernel, view, major) {
                    let slot = &mut pitch[o.array.0 as usize];
                    match slot {
                        Some(q) if *q != o.pitch => linear[o.array.0 as usize] = true,
                        _ => *slot = Some(o.pitch),
                    }
                }
            }
        }
        // A product whose left operand is another's destination qualifies
        // once that destination has the accumulator layout: repeat until
        // nothing changes.
        loop {
            let mut changed = false;
            for (desc, scope, left, right, dest, _) in &products {
                let Some(p) = candidate(kernel, &plan.layouts, desc, *scope, left, right, *dest) else { continue };
                let layout = Layout::Wgmma { slices: p.slices, cols: p.n };
                if plan.layouts[dest.0 as usize] == layout || p.arrays().iter().any(|o| linear[o.array.0 as usize]) {
                    continue;
                }
                for o in p.arrays() {
                    let len = kernel.threadgroup_arrays[o.array.0 as usize].len;
                    plan.swizzled[o.array.0 as usize] = Some(Swizzle { pitch: o.pitch, rows: len / o.pitch });
                }
                plan.layouts[dest.0 as usize] = layout;
                // A left operand that only the threads fill takes the
                // layout `wgmma` reads from registers.
                if let WgmmaLeft::Registers(id) = p.left {
                    plan.layouts[id.0 as usize] = Layout::Wgmma { slices: p.slices, cols: kernel.cooperative(id).cols };
                }
                changed = true;
            }
            if !changed {
                break;
            }
        }
        // Left operands in registers that the threads fill (no product
        // writes them).
        for (desc, scope, left, right, dest, _) in &products {
            if let Some(WgmmaProduct { left: WgmmaLeft::Registers(id), .. }) = plan.is_wgmma(*dest).then(|| candidate(kernel, &plan.layouts, desc, *scope, left, right, *dest)).flatten() {
                if !products.iter().any(|p| p.4 == id) {
                    plan.register_operands.insert(id);
                }
            }
        }
        if plan.layouts.iter().any(|l| matches!(l, Layout::Wgmma { .. })) {
            if products.iter().filter(|p| plan.is_wgmma(p.4)).all(|p| p.5 == OperandRelease::SecondBarrier) {
                let mut barriers = HashSet::new();
                plan.group_states(&kernel.body, Branch::Body, &mut StmtPath::default(), GroupState::FRESH, &mut barriers);
                plan.one_group_barriers = barriers;
            }
            let mut settle = Settle { plan, at: HashSet::new() };
            settle.block(&kernel.body, Branch::Body, &mut StmtPath::default());
            plan.settle = settle.at;
        }
    }

    /// The product as `mma.sync` runs it, or None for the scalar path.
    pub fn mma(&self, kernel: &Kernel, desc: &Matmul2dDescriptor, scope: ExecutionScope, left: &Matmul2dLeft, right: &TensorView, dest: CoopId) -> Option<MmaProduct> {
        let p = mma_candidate(kernel, desc, scope, left, right, dest)?;
        (self.layouts[dest.0 as usize] == Layout::Mma { band: p.band, cols: p.n }).then_some(p)
    }

    /// Whether the generator waits for the products in flight before the
    /// statement at `path`.
    pub fn settles_before(&self, path: &StmtPath) -> bool {
        self.settle.contains(path)
    }

    /// Whether the kernel has `wgmma` products (whose threadgroup arrays
    /// are swizzled).
    pub fn has_wgmma(&self) -> bool {
        self.swizzled.iter().any(Option::is_some)
    }

    /// Whether the threadgroup barrier at `path` waits for every `wgmma`
    /// group but the newest (the module doc's overlapped products): every
    /// `wgmma` product of the kernel is overlapped and on every path from
    /// the previous threadgroup barrier to this one where products were
    /// issued before it, a product was issued since.
    pub fn leaves_one_group(&self, path: &StmtPath) -> bool {
        self.one_group_barriers.contains(path)
    }

    /// Walks `block`, entered in the states `entry` ([`GroupState`] bits),
    /// adding to `barriers` the threadgroup barriers no path reaches in
    /// [`GroupState::STALE`]; returns the states at the block's end. A
    /// loop's body is entered in the states before the loop or at the
    /// body's end (iterated to a fixed point), and the loop may run no
    /// iteration; a body that breaks or continues makes every state
    /// possible.
    fn group_states(&self, block: &Block, branch: Branch, path: &mut StmtPath, entry: u8, barriers: &mut HashSet<StmtPath>) -> u8 {
        let mut state = entry;
        for (i, stmt) in block.iter().enumerate() {
            path.0.push((branch, i as u32));
            state = match &stmt.kind {
                StmtKind::Barrier { scope: enigma_ir::BarrierScope::Threadgroup, .. } => {
                    if state & GroupState::STALE == 0 {
                        barriers.insert(path.clone());
                    }
                    GroupState::after_barrier(state)
                }
                StmtKind::Matmul2d { dest, .. } if self.is_wgmma(*dest) => GroupState::SINCE,
                StmtKind::If { then_body, else_body, .. } => {
                    self.group_states(then_body, Branch::Then, path, state, barriers) | self.group_states(else_body, Branch::Else, path, state, barriers)
                }
                StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                    let mut inner = if Settle::deep(stmt, &mut |k| matches!(k, StmtKind::Break | StmtKind::Continue)) { GroupState::ALL } else { state };
                    loop {
                        let next = inner | self.group_states(body, Branch::Loop, path, inner, &mut HashSet::new());
                        if next == inner {
                            break;
                        }
                        inner = next;
                    }
                    inner | self.group_states(body, Branch::Loop, path, inner, barriers)
                }
                _ => state,
            };
            path.0.pop();
        }
        state
    }

    /// Whether tensor `id` is a left operand that `wgmma` reads from
    /// registers and that no product writes: the threads fill it, and a
    /// product reads it through pairs packed after the wait before that
    /// product, so no product in flight reads its registers.
    pub fn is_register_operand(&self, id: CoopId) -> bool {
        self.register_operands.contains(&id)
    }

    /// Whether tensor `id` has the `wgmma` accumulator layout (a product's
    /// accumulator, or a left operand in registers).
    pub fn is_wgmma(&self, id: CoopId) -> bool {
        matches!(self.layouts.get(id.0 as usize), Some(Layout::Wgmma { .. }))
    }

    /// The product as `wgmma` runs it, or None for the scalar path.
    pub fn wgmma(&self, kernel: &Kernel, desc: &Matmul2dDescriptor, scope: ExecutionScope, left: &Matmul2dLeft, right: &TensorView, dest: CoopId) -> Option<WgmmaProduct> {
        let p = candidate(kernel, &self.layouts, desc, scope, left, right, dest)?;
        let swizzled = |o: &WgmmaOperand| self.swizzled[o.array.0 as usize].is_some_and(|s| s.pitch == o.pitch);
        (p.arrays().iter().all(swizzled) && matches!(self.layouts[dest.0 as usize], Layout::Wgmma { .. })).then_some(p)
    }
}

/// The placement of the waits for products in flight (the module doc's
/// rule), computed once over the kernel.
struct Settle<'p> {
    plan: &'p Plan,
    at: HashSet<StmtPath>,
}

impl Settle<'_> {
    /// Whether the statement itself (not its nested blocks) reads or
    /// writes a `wgmma` accumulator's registers other than as a product's
    /// destination, or is a product that packs a left operand in registers
    /// (the pairs a product in flight may still read).
    fn reaches(&self, kind: &StmtKind) -> bool {
        let accumulator = |id: &CoopId| self.plan.is_wgmma(*id) && !self.plan.is_register_operand(*id);
        let own = match kind {
            StmtKind::CooperativeLoad { tensor, .. }
            | StmtKind::CooperativeStore { tensor, .. }
            | StmtKind::CooperativeSet { tensor, .. }
            | StmtKind::CooperativeDequantize { tensor, .. } => accumulator(tensor),
            StmtKind::CooperativeReduce { src, dest, .. } | StmtKind::CooperativeCombine { dest, src, .. } => accumulator(src) || accumulator(dest),
            StmtKind::Matmul2d { left: Matmul2dLeft::Cooperative(id), .. } => self.plan.is_wgmma(*id),
            _ => false,
        };
        own || kind.exprs().iter().any(|e| e.any(&mut |x| matches!(x, Expr::CooperativeElement { tensor, .. } if accumulator(tensor))))
    }

    /// Whether `stmt` or a statement nested in it satisfies `pred`.
    fn deep(stmt: &Stmt, pred: &mut impl FnMut(&StmtKind) -> bool) -> bool {
        let mut found = pred(&stmt.kind);
        for (branch, body) in stmt.kind.blocks() {
            walk_block(body, branch, &mut StmtPath::default(), &mut |_, s| found |= pred(&s.kind));
        }
        found
    }

    /// Places the waits in `block`, a block in uniform control flow.
    fn block(&mut self, block: &Block, branch: Branch, path: &mut StmtPath) {
        for (i, stmt) in block.iter().enumerate() {
            path.0.push((branch, i as u32));
            if Self::deep(stmt, &mut |k| self.reaches(k)) {
                let syncs = Self::deep(stmt, &mut |k| matches!(k, StmtKind::Matmul2d { .. } | StmtKind::Barrier { .. }));
                if !syncs || self.reaches(&stmt.kind) {
                    self.at.insert(path.clone());
                }
                if syncs {
                    for (branch, body) in stmt.kind.blocks() {
                        self.block(body, branch, path);
                    }
                }
            }
            path.0.pop();
        }
    }
}

/// The inline-assembly operands `"+f"(d[0]), …` of `regs` accumulator
/// registers, read and written.
fn accumulator_operands(regs: u32) -> String {
    (0..regs).map(|i| format!("\"+f\"(d[{i}])")).collect::<Vec<_>>().join(", ")
}

/// The function that pins `regs` accumulator registers (so that the
/// compiler moves no access of them across it), and its definition.
pub(crate) fn hold_function(regs: u32) -> (String, String) {
    let name = format!("enigma_wgmma_hold{regs}");
    let outs = accumulator_operands(regs);
    let text = format!("__device__ __forceinline__ void {name}(float* d)\n{{\n    asm volatile(\"\" : {outs} :: \"memory\");\n}}\n");
    (name, text)
}

impl WgmmaProduct {
    /// The name of the function that issues one m64nNk16 instruction of
    /// this product, and its definition. With the left operand in
    /// registers it takes the eight f32 slots of a 16-column block (the
    /// m64k16 fragment `wgmma` reads from registers has the accumulator's
    /// element order) and rounds them to the input type in pairs.
    pub fn issue_function(&self) -> (String, String) {
        let t = |m: Major| if m == Major::K { 'k' } else { 'm' };
        let left = match self.left {
            WgmmaLeft::Shared(l) => t(l.major),
            WgmmaLeft::Registers(_) => 'r',
        };
        let name = format!("enigma_wgmma_m64n{}k16_{}_{}{}", self.n, self.elem, left, t(self.right.major));
        let regs = self.n / 2;
        let list = (0..regs).map(|i| format!("%{i}")).collect::<Vec<_>>().join(", ");
        let outs = accumulator_operands(regs);
        let trans = |m: Major| u32::from(m == Major::Mn);
        let ty = if self.elem == Scalar::BF16 { "bf16" } else { "f16" };
        let tb = trans(self.right.major);
        let n = self.n;
        let text = match self.left {
            WgmmaLeft::Shared(l) => format!(
                "// One wgmma.mma_async m64n{n}k16 ({ty} in, f32 accumulate) into this thread's {regs} registers.\n\
                 __device__ __forceinline__ void {name}(float* d, unsigned long long a, unsigned long long b)\n{{\n    \
                 asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n\"\n        \
                 \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{list}}}, %{a}, %{b}, p, 1, 1, {ta}, {tb};\\n}}\\n\"\n        \
                 : {outs}\n        : \"l\"(a), \"l\"(b), \"r\"(1) : \"memory\");\n}}\n",
                a = regs,
                b = regs + 1,
                s = regs + 2,
                ta = trans(l.major),
            ),
            WgmmaLeft::Registers(_) => format!(
                "// One wgmma.mma_async m64n{n}k16 ({ty} in, f32 accumulate) into this thread's {regs} registers,\n\
                 // the left operand's 16 columns from four registers of {ty} pairs.\n\
                 __device__ __forceinline__ void {name}(float* d, const unsigned* a, unsigned long long b)\n{{\n    \
                 asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n\"\n        \
                 \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{list}}}, {{%{a0}, %{a1}, %{a2}, %{a3}}}, %{b}, p, 1, 1, {tb};\\n}}\\n\"\n        \
                 : {outs}\n        : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(b), \"r\"(1) : \"memory\");\n}}\n",
                a0 = regs,
                a1 = regs + 1,
                a2 = regs + 2,
                a3 = regs + 3,
                b = regs + 4,
                s = regs + 5,
            ),
        };
        (name, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_swizzle_is_a_bijection_that_keeps_16_byte_chunks_whole() {
        for s in [Swizzle { pitch: 64, rows: 8 }, Swizzle { pitch: 128, rows: 16 }, Swizzle { pitch: 192, rows: 24 }] {
            let n = s.pitch * s.rows;
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let p = s.physical(i);
                assert!(p < n && !seen[p as usize], "{s:?}: {i} -> {p}");
                seen[p as usize] = true;
                // 8 consecutive elements starting at a multiple of 8 stay consecutive.
                if i % 8 != 0 {
                    assert_eq!(p, s.physical(i - 1) + 1);
                }
            }
        }
        // Row 1's first chunk is the second chunk of its 128-byte row.
        assert_eq!(Swizzle { pitch: 64, rows: 8 }.physical(64), 64 + 8);
        // A 128-wide array keeps its second panel after all rows of the first.
        assert_eq!(Swizzle { pitch: 128, rows: 16 }.physical(64), 16 * 64);
    }

    #[test]
    fn a_whole_atom_offset_adds_a_constant_to_the_swizzle() {
        for s in [Swizzle { pitch: 64, rows: 32 }, Swizzle { pitch: 256, rows: 256 }, Swizzle { pitch: 192, rows: 24 }] {
            for offset in [8 * s.pitch, 24 * s.pitch, 16 * s.pitch * 7] {
                for base in (0..s.pitch * 9).chain([u32::MAX - offset - 1, u32::MAX - offset]) {
                    assert_eq!(s.physical(base + offset), s.physical(base).wrapping_add(s.physical(offset)), "{s:?} {base} + {offset}");
                }
            }
            let split = |offset: u32| s.index_code(TgIndex { code: format!("x + {offset}u"), split: Some(("x".into(), offset)) });
            let expect = format!("(enigma::swizzle128<{}u, {}u>(x) + {}u)", s.pitch, s.rows, s.physical(8 * s.pitch));
            assert_eq!(split(8 * s.pitch), expect);
            // Not a whole atom: the row's low bits change, so no split.
            assert_eq!(split(4 * s.pitch), format!("enigma::swizzle128<{}u, {}u>(x + {}u)", s.pitch, s.rows, 4 * s.pitch));
        }
    }

    #[test]
    fn wgmma_fragments_cover_the_tile_once() {
        let layout = Layout::Wgmma { slices: 2, cols: 24 };
        let (slices, cols, threads) = (2u32, 24u32, 256u32);
        let mut seen = vec![0u32; (slices * 64 * 2 * cols) as usize];
        for t in 0..threads {
            for i in 0..layout.capacity() {
                let (g, u, j) = (t / 128, t % 128, i % (cols / 2));
                let row = g * 64 * slices + (i / (cols / 2)) * 64 + 16 * (u / 32) + (u % 32) / 4 + 8 * ((j / 2) % 2);
                let col = 8 * (j / 4) + 2 * (u % 4) + j % 2;
                seen[(row * cols + col) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
    }

    /// The rows' layout, written out: slot h of every thread is the row of
    /// the accumulator slots `4q + 2(h % 2)` of slice h / 2 in the same
    /// thread, and the valid slots (the quads' first lanes) hold each row
    /// once.
    #[test]
    fn the_rows_layout_follows_the_accumulator_and_owns_each_row_once() {
        for (slices, warpgroups) in [(1u32, 1u32), (2, 1), (1, 2), (2, 2)] {
            let (rows_layout, cols) = (Layout::WgmmaRows { slices }, 64u32);
            assert_eq!(rows_layout.capacity(), 2 * slices);
            let mut owned = vec![0u32; (warpgroups * slices * 64) as usize];
            for t in 0..warpgroups * 128 {
                let (g, u) = (t / 128, t % 128);
                let acc_row = |i: u32| g * 64 * slices + (i / (cols / 2)) * 64 + 16 * (u / 32) + (u % 32) / 4 + 8 * ((i % (cols / 2) / 2) % 2);
                for h in 0..rows_layout.capacity() {
                    let row = g * 64 * slices + h / 2 * 64 + u / 32 * 16 + u % 32 / 4 + h % 2 * 8;
                    for q in 0..cols / 8 {
                        assert_eq!(row, acc_row(h / 2 * (cols / 2) + 4 * q + 2 * (h % 2)), "thread {t}, slot {h}");
                    }
                    if t % 4 == 0 {
                        owned[row as usize] += 1;
                    }
                }
            }
            assert!(owned.iter().all(|&n| n == 1), "{slices} slice(s), {warpgroups} warpgroup(s)");
        }
        let (row, col) = Layout::WgmmaRows { slices: 2 }.coords("t", "i");
        assert_eq!((row.as_str(), col.as_str()), ("((t) / 128u * 128u + (i) / 2u * 64u + (t) % 128u / 32u * 16u + (t) % 32u / 4u + (i) % 2u * 8u)", "0u"));
        assert_eq!(Layout::WgmmaRows { slices: 1 }.valid("t", "i"), "((t) % 4u == 0u)");
    }

    /// `wgmma_row`/`wgmma_col` of the prelude, written out: slots `2q` and
    /// `2q + 1` of a thread are columns `c` and `c + 1` of one row with `c`
    /// even (nibbles `c % 8`, `c % 8 + 1` of one word, its byte `c % 8 / 2`),
    /// which the dequantization's pair decode takes them to be.
    #[test]
    fn wgmma_slot_pairs_are_k_adjacent_columns_of_one_row() {
        for (slices, cols) in [(1u32, 16u32), (1, 64), (2, 128), (4, 256)] {
            let layout = Layout::Wgmma { slices, cols };
            let coord = |t: u32, i: u32| {
                let (u, j) = (t % 128, i % (cols / 2));
                let row = (t / 128) * 64 * slices + (i / (cols / 2)) * 64 + 16 * (u / 32) + (u % 32) / 4 + 8 * ((j / 2) % 2);
                (row, 8 * (j / 4) + 2 * (t % 4) + j % 2)
            };
            for t in 0..256 {
                for q in 0..layout.capacity() / 2 {
                    let ((r0, c0), (r1, c1)) = (coord(t, 2 * q), coord(t, 2 * q + 1));
                    assert!(r0 == r1 && c0 % 2 == 0 && c1 == c0 + 1 && c0 % 8 / 2 == t % 4, "{slices} slice(s), {cols} columns: thread {t}, pair {q}");
                }
            }
        }
    }

    /// `mma_row`/`mma_col` of the prelude and [`Layout::owner`]'s inverse,
    /// written out: every element of a 64×24 tensor over two SIMD groups
    /// in exactly one slot, and (one SIMD group) each element's owner the
    /// slot that holds it.
    #[test]
    fn mma_fragments_cover_the_tile_once_and_owner_inverts_them() {
        for (warps, rows, cols) in [(2u32, 64u32, 24u32), (1, 32, 16)] {
            let band = rows / warps;
            let layout = Layout::Mma { band, cols };
            let mut seen = vec![0u32; (rows * cols) as usize];
            for t in 0..warps * 32 {
                for i in 0..layout.capacity() {
                    let (l, q) = (t % 32, i % 4);
                    let row = (t / 32) * band + 16 * (i / 4 / (cols / 8)) + l / 4 + 8 * (q / 2);
                    let col = 8 * (i / 4 % (cols / 8)) + 2 * (t % 4) + q % 2;
                    seen[(row * cols + col) as usize] += 1;
                    if warps == 1 {
                        let lane = (row % 8) * 4 + col % 8 / 2;
                        let slot = ((row / 16) * (cols / 8) + col / 8) * 4 + row % 16 / 8 * 2 + col % 2;
                        assert_eq!((lane, slot), (t, i), "element ({row}, {col})");
                    }
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{warps} SIMD groups, {rows}×{cols}");
        }
        assert!(Layout::Mma { band: 32, cols: 16 }.owner("r", "c").is_some());
        assert!(Layout::Wgmma { slices: 1, cols: 16 }.owner("r", "c").is_none());
    }
}
