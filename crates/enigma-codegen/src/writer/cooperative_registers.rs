//! Cooperative tensors as per-thread register arrays: the CUDA generator's
//! lowering ([`crate::cuda::cooperative`] says which layout each tensor
//! takes and which products run on `wgmma`). Each tensor is an array of its
//! capacity in every thread of its scope; slot accesses index it, loads and
//! stores move each thread's valid slots to and from their coordinates in
//! the view, and a product runs on `wgmma` or on the scalar path (each
//! thread sums its own elements with `fmaf` in k order, as the simulator
//! does). Row reductions of a `wgmma` accumulator combine each row within
//! its quad of lanes by shuffles and pass one value per row through shared
//! memory; other row and column reductions of threadgroup-scope tensors go
//! through a shared-memory scratch array of the source's size (static
//! shared memory beyond the threadgroup arrays), as does a cooperative left
//! operand on the
//! scalar path unless its quads can shuffle it; a SIMD group's own tensor
//! is reduced with shuffles.

use super::{Val, Writer};
use crate::code::Code;
use crate::cuda::cooperative::{hold_function, pair_register_function, Layout, Major, MmaProduct, Plan, Swizzle, WgmmaLeft, WgmmaOperand, WgmmaProduct, WGMMA_K};
use crate::code::TgIndex;
use crate::dialect::{BuiltinOrd, Dialect};
use crate::error::CodegenError;
use enigma_ir::{BarrierScope, Builtin, CombineOp, CoopId, Expr, Matmul2dDescriptor, Matmul2dLeft, Matmul2dMode, MemFlags, Memory, QuantCode, QuantLayout, ReduceAxis, ReduceOp, Scalar, StmtKind, TensorView, Type};
use std::fmt::Write as _;

/// A product's left operand as the generator reads it: a view (its memory
/// and values) or a cooperative tensor.
enum Left {
    View(Memory, ViewConsts),
    Tensor(CoopId),
}

/// The names of a view's five values inside a product's or a load's block.
struct ViewConsts {
    array: &'static str,
}

impl ViewConsts {
    fn off(&self) -> String {
        format!("{}[0]", self.array)
    }
    fn extent(&self, d: usize) -> String {
        format!("{}[{}]", self.array, 1 + d)
    }
    fn stride(&self, d: usize) -> String {
        format!("{}[{}]", self.array, 3 + d)
    }
}

impl<'k, D: Dialect> Writer<'k, D> {
    fn coop_plan(&self) -> Result<&Plan, CodegenError> {
        self.coop.registers.as_ref().ok_or_else(|| self.malformed("cooperative tensors in registers without a plan"))
    }

    fn layout(&self, id: CoopId) -> Result<Layout, CodegenError> {
        self.coop_plan()?.layouts.get(id.0 as usize).copied().ok_or_else(|| self.malformed(format!("cooperative tensor {} does not exist", id.0)))
    }

    /// The thread's index within the scope of tensor `id`.
    fn scope_thread(&mut self, id: CoopId) -> String {
        let b = if self.kernel.cooperative(id).scope.is_threadgroup() { Builtin::ThreadIndexInThreadgroup } else { Builtin::ThreadIndexInSimdgroup };
        self.builtins.insert(BuiltinOrd::of(b));
        self.dialect.builtin(b).text
    }

    /// Declares every tensor as a register array of its capacity.
    pub(super) fn register_decls(&mut self, plan: Plan) -> Result<(), CodegenError> {
        let k = self.kernel;
        self.coop.tensors = k.cooperative_tensors.iter().map(|t| self.names.fresh(&t.name)).collect();
        self.dialect.use_cooperative_registers(plan.has_wgmma());
        self.line("// cooperative tensors, each thread's slots in registers");
        for (i, (t, layout)) in k.cooperative_tensors.iter().zip(&plan.layouts).enumerate() {
            let ty = self.dialect.type_name(Type::scalar(t.elem));
            let name = self.coop.tensors[i].clone();
            let what = match layout {
                Layout::Linear { .. } => "linear layout".to_string(),
                Layout::Wgmma { slices, .. } => format!("wgmma accumulator, {slices} slice(s) of 64 rows per warpgroup"),
                Layout::Mma { band, .. } => format!("mma.sync accumulator, {band} rows per SIMD group"),
                Layout::WgmmaRows { slices } => format!("the rows of a wgmma accumulator of {slices} slice(s)"),
            };
            self.line(&format!("{ty} {name}[{}]; // {}, {what}", layout.capacity(), t.type_text()));
        }
        self.coop.registers = Some(plan);
        Ok(())
    }

    /// `{ off, ext_x, ext_y, stride_x, stride_y }` of a view, as a `uint[5]`.
    fn view_values(&mut self, v: &TensorView, name: &'static str) -> Result<ViewConsts, CodegenError> {
        let mut vals = vec![];
        for e in v.exprs() {
            vals.push(self.top_expr(e)?.code.text);
        }
        self.line(&format!("const uint {name}[5] = {{{}}};", vals.join(", ")));
        Ok(ViewConsts { array: name })
    }

    /// The place of view element (x, y), through the array's physical layout.
    fn view_place(&mut self, mem: Memory, c: &ViewConsts, x: &str, y: &str) -> Result<String, CodegenError> {
        self.memory_place(mem, &format!("{} + ({x}) * {} + ({y}) * {}", c.off(), c.stride(0), c.stride(1)))
    }

    fn inside(c: &ViewConsts, x: &str, y: &str) -> String {
        format!("{x} < {} && {y} < {}", c.extent(0), c.extent(1))
    }

    pub(super) fn register_stmt(&mut self, kind: &'k StmtKind) -> Result<(), CodegenError> {
        match kind {
            StmtKind::Matmul2d { desc, scope, left, right, dest, .. } => {
                let wgmma = self.coop_plan()?.wgmma(self.kernel, desc, *scope, left, right, *dest);
                self.line("{");
                self.indent += 1;
                let a = match left {
                    Matmul2dLeft::Tensor(lv) => Left::View(lv.mem, self.view_values(lv, "enigma_a")?),
                    Matmul2dLeft::Cooperative(id) => Left::Tensor(*id),
                };
                let b = self.view_values(right, "enigma_b")?;
                let k = match (desc.k, &a) {
                    (Some(k), _) => format!("{k}u"),
                    (None, Left::View(_, a)) => a.extent(usize::from(desc.transpose_left)),
                    (None, Left::Tensor(id)) => format!("{}u", self.kernel.cooperative(*id).cols),
                };
                self.line(&format!("const uint enigma_k = {k};"));
                match wgmma {
                    Some(p) => {
                        let test = Self::wgmma_test(&p, &a, &b);
                        self.line(&format!("if ({test}) {{"));
                        self.indent += 1;
                        self.wgmma_product(&p, desc, *dest, &a, (right.mem, &b))?;
                        self.indent -= 1;
                        self.line("} else {");
                        self.indent += 1;
                        self.scalar_product(desc, *dest, &a, (right.mem, &b))?;
                        // One group per product on either path, which the
                        // barriers' `wait_group 1` counts on.
                        self.line("enigma::wgmma_commit();");
                        self.indent -= 1;
                        self.line("}");
                    }
                    None => match (self.coop_plan()?.mma(self.kernel, desc, *scope, left, right, *dest), &a) {
                        (Some(p), Left::View(amem, ac)) => self.mma_product(&p, desc, *dest, (*amem, ac), (right.mem, &b))?,
                        _ => self.scalar_product(desc, *dest, &a, (right.mem, &b))?,
                    },
                }
                self.indent -= 1;
                self.line("}");
            }
            StmtKind::CooperativeLoad { tensor, src: view } | StmtKind::CooperativeStore { tensor, dst: view } => {
                let load = matches!(kind, StmtKind::CooperativeLoad { .. });
                let layout = self.layout(*tensor)?;
                let name = self.coop_name(*tensor)?;
                let t = self.scope_thread(*tensor);
                self.line("{");
                self.indent += 1;
                let c = self.view_values(view, "enigma_v")?;
                let (row, col) = layout.coords(&t, "enigma_i");
                self.line("#pragma unroll");
                self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {{", layout.capacity()));
                self.indent += 1;
                self.line(&format!("if (!({})) continue;", layout.valid(&t, "enigma_i")));
                self.line(&format!("const uint enigma_r = {row}, enigma_c = {col};"));
                let place = self.view_place(view.mem, &c, "enigma_c", "enigma_r")?;
                let inside = Self::inside(&c, "enigma_c", "enigma_r");
                if load {
                    let elem = self.kernel.cooperative(*tensor).elem;
                    let zero = self.dialect.cast(Type::scalar(elem), Type::U32, Code::primary("0u")).text;
                    self.line(&format!("{name}[enigma_i] = ({inside}) ? {place} : {zero};"));
                } else {
                    self.line(&format!("if ({inside}) {place} = {name}[enigma_i];"));
                }
                self.indent -= 1;
                self.line("}");
                self.indent -= 1;
                self.line("}");
            }
            StmtKind::CooperativeSet { tensor, index, value } => {
                let name = self.coop_name(*tensor)?;
                let i = self.top_expr(index)?.code.text;
                let v = self.top_expr(value)?.code.text;
                self.line(&format!("{name}[{i}] = {v};"));
            }
            StmtKind::CooperativeDequantize { tensor, code, layout, words, offset, stride, scales, scale_offset, scale_stride, group_shift, biases } => {
                self.dequantize(*tensor, (*code, *layout), *words, (*scales, *biases), [offset, stride, scale_offset, scale_stride, group_shift])?;
            }
            StmtKind::CooperativeReduce { src, dest, axis, op } => self.reduce(*src, *dest, *axis, *op)?,
            StmtKind::CooperativeCombine { dest, src, op } => self.combine(*dest, *src, *op)?,
            _ => {}
        }
        Ok(())
    }

    /// `cooperative_dequantize` into tensor `id`, each thread its own slots;
    /// `values` are the word offset and stride, the scale offset and
    /// stride and the group shift. The nibbles decode through the tile
    /// helpers' `enigma_q4_pair` (the 4-bit codes' values in f16, exactly).
    /// Generally slot by slot: the exact f32 product of the value and the
    /// scale, rounded once to the tensor's type (with biases one fused
    /// multiply-add in the tensor's type). In the `wgmma` accumulator
    /// layout ([`Layout::Wgmma`]) slots `2q` and `2q + 1` are columns
    /// `c, c + 1` of one row with `c` even, nibbles `c % 8` and `c % 8 + 1`
    /// of one word (its byte `c % 8 / 2`, which is `(t % 4)` for every pair
    /// of thread `t`, so computed once): the pair is decoded at once, its
    /// word loaded once and its scale once where both columns are in one
    /// group, and an f16 tensor takes the pair times its scales with one
    /// `__hmul2` (one rounding of each exact product; with biases one
    /// `__hfma2`). MLX's columns ([`QuantLayout::Columns`]) hold the pair in
    /// the same byte of their word as seed 002's rows. Where the shift puts
    /// every column of the tensor in its first group (`cols ≤ 2^shift`, a
    /// uniform test) each row's scale is one load, whatever the pair. Words
    /// in fragment order ([`QuantLayout::Fragments`]) hold a thread's pairs
    /// of a 16-column block in one word (nibbles `j` and `j + 4`): one load
    /// per block, or one 16-byte load per 64 columns (a unit) where the
    /// tensor's columns are whole units, each word decoded four pairs at
    /// once (`enigma_q4_quad`).
    fn dequantize(&mut self, id: CoopId, (code, quant_layout): (QuantCode, QuantLayout), words: Memory, scales: (Memory, Option<Memory>), values: [&Expr; 5]) -> Result<(), CodegenError> {
        let layout = self.layout(id)?;
        let elem = self.kernel.cooperative(id).elem;
        self.dialect.use_matrices();
        let code = format!("enigma_{code}");
        self.line("{");
        self.indent += 1;
        let mut texts = vec![];
        for e in values {
            texts.push(self.top_expr(e)?.code.text);
        }
        self.line(&format!("const uint enigma_q[5] = {{{}}};", texts.join(", ")));
        if let (Layout::Wgmma { cols, .. }, Scalar::F16 | Scalar::F32) = (layout, elem) {
            let t = self.scope_thread(id);
            if quant_layout != QuantLayout::Fragments {
                let (_, first_col) = layout.coords(&t, "0u");
                self.line(&format!("const uint enigma_byte = {first_col} % 8u / 2u;"));
            }
            // Every column in the first group, both columns of each pair in
            // one group (the shift is not 0), or each column its own group:
            // uniform tests.
            self.line(&format!("if ((enigma_q[4] & 31u) >= {}u) {{", cols.next_power_of_two().trailing_zeros()));
            self.indent += 1;
            self.dequantize_pairs(id, (layout, quant_layout), &code, (words, scales), PairScales::FirstGroup)?;
            self.indent -= 1;
            self.line("} else if ((enigma_q[4] & 31u) != 0u) {");
            self.indent += 1;
            self.dequantize_pairs(id, (layout, quant_layout), &code, (words, scales), PairScales::OneGroup)?;
            self.indent -= 1;
            self.line("} else {");
            self.indent += 1;
            self.dequantize_pairs(id, (layout, quant_layout), &code, (words, scales), PairScales::PerColumn)?;
            self.indent -= 1;
            self.line("}");
        } else {
            let name = self.coop_name(id)?;
            let t = self.scope_thread(id);
            let to_elem = self.dialect.cast(Type::scalar(elem), Type::F32, Code::primary("enigma_v")).text;
            let (row, col) = layout.coords(&t, "enigma_i");
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {{", layout.capacity()));
            self.indent += 1;
            self.line(&format!("if (!({})) continue;", layout.valid(&t, "enigma_i")));
            self.line(&format!("const uint enigma_r = {row}, enigma_c = {col};"));
            let word = self.memory_place(words, &word_index(quant_layout, "enigma_c"))?;
            let scale = self.memory_place(scales.0, &scale_index(quant_layout, "enigma_c"))?;
            self.line(&format!("const uint enigma_code = {word} >> (4u * {});", nibble_of(quant_layout, "enigma_c")));
            let value = format!("enigma_q4_pair<{code}>(enigma_code & 0xFu, 0u)");
            match scales.1 {
                None => {
                    self.line(&format!("const float enigma_v = __low2float({value}) * __half2float({scale});"));
                    self.line(&format!("{name}[enigma_i] = {to_elem};"));
                }
                Some(biases) => {
                    let bias = self.memory_place(biases, &scale_index(quant_layout, "enigma_c"))?;
                    if elem == Scalar::F16 {
                        self.line(&format!("{name}[enigma_i] = __hfma(__low2half({value}), {scale}, {bias});"));
                    } else {
                        // An f32 tensor (validation admits f32 and f16).
                        self.line(&format!("{name}[enigma_i] = fmaf(__low2float({value}), __half2float({scale}), __half2float({bias}));"));
                    }
                }
            }
            self.indent -= 1;
            self.line("}");
        }
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// The pair loop of [`Writer::dequantize`] in the `wgmma` layout over
    /// the `enigma_q` values: in seed 002's rows each pair's word loaded
    /// once and its byte `enigma_byte` decoded by `enigma_q4_pair`; in
    /// fragment order the words of a unit's four blocks of 16 columns (or of
    /// one block, where the columns are not whole units) loaded together
    /// into `enigma_w`, and each pair the element of its word's
    /// `enigma_q4_quad` that holds it; its scale as `scales` says.
    fn dequantize_pairs(&mut self, id: CoopId, (layout, quant_layout): (Layout, QuantLayout), code: &str, (words, (scales, biases)): (Memory, (Memory, Option<Memory>)), pair_scales: PairScales) -> Result<(), CodegenError> {
        let name = self.coop_name(id)?;
        let t = self.scope_thread(id);
        let (row, col) = layout.coords(&t, "2u * enigma_p");
        let pairs = layout.capacity() / 2;
        if quant_layout == QuantLayout::Fragments {
            // Slots 8b … 8b + 7 are one 16-column block of a 64-row slice:
            // pairs (r, c), (r + 8, c), (r, c + 8), (r + 8, c + 8), which
            // are nibbles (j, j + 4) of one word for j = 0, 2, 1, 3.
            let cols = self.kernel.cooperative(id).cols;
            let blocks = if cols.is_multiple_of(QuantLayout::Fragments.unit().0) { 4 } else { 1 };
            let (row0, col0) = layout.coords(&t, &format!("{}u * enigma_u", 8 * blocks));
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_u = 0u; enigma_u < {}u; ++enigma_u) {{", pairs / (4 * blocks)));
            self.indent += 1;
            self.line(&format!("const uint enigma_r0 = {row0}, enigma_c0 = {col0};"));
            let first = self.memory_place(words, "enigma_q[0] + enigma_q4_word<enigma_q4_fragments>(enigma_c0, enigma_r0, enigma_q[1])")?;
            self.line(&format!("unsigned enigma_w[{blocks}];"));
            self.line(&format!("enigma_q4_words<{blocks}>(&{first}, enigma_w);"));
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_e = 0u; enigma_e < {}u; ++enigma_e) {{", 4 * blocks));
            self.indent += 1;
            self.line(&format!("const uint enigma_p = {}u * enigma_u + enigma_e;", 4 * blocks));
            self.line(&format!("const uint enigma_r = {row}, enigma_c = {col};"));
            self.line("__half2 enigma_quad[4];");
            self.line(&format!("enigma_q4_quad<{code}>(enigma_w[enigma_e / 4u], enigma_quad);"));
            self.line("const __half2 enigma_pair = enigma_quad[enigma_e % 2u * 2u + enigma_e % 4u / 2u];");
        } else {
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_p = 0u; enigma_p < {pairs}u; ++enigma_p) {{"));
            self.indent += 1;
            self.line(&format!("const uint enigma_r = {row}, enigma_c = {col};"));
            let word = self.memory_place(words, &word_index(quant_layout, "enigma_c"))?;
            self.line(&format!("const __half2 enigma_pair = enigma_q4_pair<{code}>({word}, enigma_byte);"));
        }
        // The pair's scales (and biases): both columns' where each is its
        // own group, else the one group's twice.
        let indices = match pair_scales {
            PairScales::FirstGroup => [scale_index_of_group(quant_layout, "0u"), String::new()],
            PairScales::OneGroup => [scale_index(quant_layout, "enigma_c"), String::new()],
            PairScales::PerColumn => [scale_index(quant_layout, "enigma_c"), scale_index(quant_layout, "enigma_c + 1u")],
        };
        let mut pair_of = |mem: Memory, prefix: &str| -> Result<(), CodegenError> {
            let first = self.memory_place(mem, &indices[0])?;
            let second = if indices[1].is_empty() { format!("{prefix}0") } else { self.memory_place(mem, &indices[1])? };
            self.line(&format!("const __half {prefix}0 = {first}, {prefix}1 = {second};"));
            Ok(())
        };
        pair_of(scales, "enigma_s")?;
        if let Some(biases) = biases {
            pair_of(biases, "enigma_b")?;
        }
        let biased = biases.is_some();
        if self.kernel.cooperative(id).elem == Scalar::F16 {
            if biased {
                self.line("const __half2 enigma_h = __hfma2(enigma_pair, __halves2half2(enigma_s0, enigma_s1), __halves2half2(enigma_b0, enigma_b1));");
            } else {
                self.line("const __half2 enigma_h = __hmul2(enigma_pair, __halves2half2(enigma_s0, enigma_s1));");
            }
            self.line(&format!("{name}[2u * enigma_p] = __low2half(enigma_h);"));
            self.line(&format!("{name}[2u * enigma_p + 1u] = __high2half(enigma_h);"));
        } else if biased {
            self.line(&format!("{name}[2u * enigma_p] = fmaf(__low2float(enigma_pair), __half2float(enigma_s0), __half2float(enigma_b0));"));
            self.line(&format!("{name}[2u * enigma_p + 1u] = fmaf(__high2float(enigma_pair), __half2float(enigma_s1), __half2float(enigma_b1));"));
        } else {
            self.line(&format!("{name}[2u * enigma_p] = __low2float(enigma_pair) * __half2float(enigma_s0);"));
            self.line(&format!("{name}[2u * enigma_p + 1u] = __high2float(enigma_pair) * __half2float(enigma_s1);"));
        }
        self.indent -= 1;
        self.line("}");
        if quant_layout == QuantLayout::Fragments {
            self.indent -= 1;
            self.line("}");
        }
        Ok(())
    }

    /// `mem[index]`, through a threadgroup array's physical layout.
    fn memory_place(&mut self, mem: Memory, index: &str) -> Result<String, CodegenError> {
        let (name, _) = self.memory(mem)?;
        let index = match mem {
            Memory::Threadgroup(t) => self.dialect.threadgroup_index(t, TgIndex { code: index.to_string(), split: None }),
            _ => index.to_string(),
        };
        Ok(format!("{name}[{index}]"))
    }

    /// A row or column reduction: each thread reduces the row or column of
    /// each of its destination slots in index order, as the simulator does
    /// (floats in f32 from the first element, integers wrapping). A
    /// threadgroup-scope source goes through shared memory (the scope
    /// writes its elements to a scratch array in row-major order; barriers
    /// before and after keep the scratch's uses apart); a SIMD group's own
    /// tensor (the linear layout over 32 lanes) is gathered with shuffles,
    /// every lane running every step so that the warp stays converged.
    fn reduce(&mut self, src: CoopId, dest: CoopId, axis: ReduceAxis, op: ReduceOp) -> Result<(), CodegenError> {
        let s = self.kernel.cooperative(src);
        let (rows, cols, elem) = (s.rows, s.cols, s.elem);
        let (sl, dl) = (self.layout(src)?, self.layout(dest)?);
        if let (Layout::Wgmma { slices, .. }, ReduceAxis::Rows) = (sl, axis) {
            return self.reduce_wgmma_rows(src, dest, slices, op);
        }
        let dname = self.coop_name(dest)?;
        let t = self.scope_thread(src);
        let ty = Type::scalar(elem);
        let barrier = self.dialect.barrier(BarrierScope::Threadgroup, MemFlags::Threadgroup, &self.path);
        self.line("{");
        self.indent += 1;
        let threadgroup = self.readable_elements(src)?;
        let (row, col) = dl.coords(&t, "enigma_i");
        let (outer, inner, at) = match axis {
            ReduceAxis::Rows => (row, cols, format!("enigma_o * {cols}u + enigma_j")),
            ReduceAxis::Columns => (col, rows, format!("enigma_j * {cols}u + enigma_o")),
        };
        let float = elem.is_float();
        let acc_ty = if float { Type::F32 } else { ty };
        let read = self.dialect.cast(acc_ty, ty, Code::postfix(element_read(threadgroup, &at))).text;
        let combine = match (op, float, elem.is_signed_int()) {
            (ReduceOp::Sum, true, _) => "enigma_acc + enigma_v".to_string(),
            (ReduceOp::Sum, false, true) => "(int)((uint)enigma_acc + (uint)enigma_v)".to_string(),
            (ReduceOp::Sum, false, false) => "enigma_acc + enigma_v".to_string(),
            (ReduceOp::Max, true, _) => "fmaxf(enigma_acc, enigma_v)".to_string(),
            (ReduceOp::Min, true, _) => "fminf(enigma_acc, enigma_v)".to_string(),
            (ReduceOp::Max, false, _) => "max(enigma_acc, enigma_v)".to_string(),
            (ReduceOp::Min, false, _) => "min(enigma_acc, enigma_v)".to_string(),
        };
        let acc_name = self.dialect.type_name(acc_ty);
        let result = self.dialect.cast(ty, acc_ty, Code::primary("enigma_acc")).text;
        self.line("#pragma unroll");
        self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {{", dl.capacity()));
        self.indent += 1;
        let valid = dl.valid(&t, "enigma_i");
        if threadgroup {
            self.line(&format!("if (!({valid})) continue;"));
        }
        self.line(&format!("const uint enigma_o = {outer};"));
        self.line("uint enigma_j = 0u;");
        self.line(&format!("{acc_name} enigma_acc = {read};"));
        self.line(&format!("for (enigma_j = 1u; enigma_j < {inner}u; ++enigma_j) {{"));
        self.line(&format!("    const {acc_name} enigma_v = {read};"));
        self.line(&format!("    enigma_acc = {combine};"));
        self.line("}");
        if threadgroup {
            self.line(&format!("{dname}[enigma_i] = {result};"));
        } else {
            self.line(&format!("if ({valid}) {dname}[enigma_i] = {result};"));
        }
        self.indent -= 1;
        self.line("}");
        if threadgroup {
            self.line(&format!("{barrier};"));
        }
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// A row reduction of a `wgmma` accumulator (f32) into a tensor in its
    /// rows' layout ([`Layout::WgmmaRows`], which the plan gives every f32
    /// m×1 tensor beside such an accumulator): each row's elements lie in
    /// one quad of lanes (two rows per 64-row slice and thread), so each
    /// thread combines its slots of each of its rows and the quad combines
    /// its four partial values with `__shfl_xor_sync`, leaving the row's
    /// value in every lane of the quad: registers only, no barrier. A sum is
    /// in that order (each thread's slots from left to right, then a tree
    /// over the quad), not in index order as in the simulator; maxima and
    /// minima are the same in any order.
    fn reduce_wgmma_rows(&mut self, src: CoopId, dest: CoopId, slices: u32, op: ReduceOp) -> Result<(), CodegenError> {
        let cols = self.kernel.cooperative(src).cols;
        if self.layout(dest)? != (Layout::WgmmaRows { slices }) {
            return Err(self.malformed("a row reduction of a wgmma accumulator into a tensor not in its rows' layout"));
        }
        let (sname, dname) = (self.coop_name(src)?, self.coop_name(dest)?);
        let combine = |a: &str, b: &str| match op {
            ReduceOp::Sum => format!("{a} + {b}"),
            ReduceOp::Max => format!("fmaxf({a}, {b})"),
            ReduceOp::Min => format!("fminf({a}, {b})"),
        };
        let per_slice = cols / 2;
        // Row h % 2 of slice h / 2 (slot h of the rows' layout): the slots
        // 4q + 2(h % 2) + {0, 1} of the slice.
        self.line("#pragma unroll");
        self.line(&format!("for (uint enigma_h = 0u; enigma_h < {}u; ++enigma_h) {{", 2 * slices));
        self.indent += 1;
        self.line(&format!("const uint enigma_s = enigma_h / 2u * {per_slice}u + enigma_h % 2u * 2u;"));
        self.line(&format!("float enigma_acc = {sname}[enigma_s];"));
        self.line(&format!("enigma_acc = {};", combine("enigma_acc", &format!("{sname}[enigma_s + 1u]"))));
        self.line("#pragma unroll");
        self.line(&format!("for (uint enigma_q = 1u; enigma_q < {}u; ++enigma_q) {{", cols / 8));
        self.line(&format!("    enigma_acc = {};", combine("enigma_acc", &format!("{sname}[enigma_s + 4u * enigma_q]"))));
        self.line(&format!("    enigma_acc = {};", combine("enigma_acc", &format!("{sname}[enigma_s + 4u * enigma_q + 1u]"))));
        self.line("}");
        for lane in [1, 2] {
            self.line(&format!("enigma_acc = {};", combine("enigma_acc", &format!("__shfl_xor_sync(0xffffffffu, enigma_acc, {lane}u)"))));
        }
        self.line(&format!("{dname}[enigma_h] = enigma_acc;"));
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// `combine(dest, src, op)`. Where slot i of both tensors is the same
    /// element (one layout, one shape) each thread combines its slots; a
    /// `wgmma` accumulator takes a per-row value in its rows' layout from
    /// the first lane of its quad (`__shfl_sync`, every lane running it);
    /// otherwise the scope writes `src` to a shared-memory scratch array
    /// (row-major, its size) between two barriers and each thread reads the
    /// element of each of its destination slots.
    /// Makes every element of `src` readable by every thread of its scope,
    /// by its row-major index `e` ([`element_read`]): for a scope of several
    /// SIMD groups the scope writes its elements to a shared scratch array
    /// `enigma_scratch` and a threadgroup barrier follows (another is owed
    /// after the reads, before the scratch is reused); for a SIMD group's own
    /// tensor (each SIMD group holds its own) `enigma_gather(e)`, where
    /// every lane offers each of its slots in turn and keeps the one that
    /// holds the element it asked for, so all 32 lanes must call it.
    /// Returns whether the scratch array was used.
    fn readable_elements(&mut self, src: CoopId) -> Result<bool, CodegenError> {
        let s = self.kernel.cooperative(src);
        let (cols, ty) = (s.cols, Type::scalar(s.elem));
        let (sl, sname) = (self.layout(src)?, self.coop_name(src)?);
        let name = self.dialect.type_name(ty);
        if s.scope.is_threadgroup() {
            let t = self.scope_thread(src);
            let (row, col) = sl.coords(&t, "enigma_i");
            self.line(&format!("__shared__ {name} enigma_scratch[{}];", s.rows * cols));
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {{", sl.capacity()));
            self.line(&format!("    if ({}) enigma_scratch[({row}) * {cols}u + ({col})] = {sname}[enigma_i];", sl.valid(&t, "enigma_i")));
            self.line("}");
            let barrier = self.dialect.barrier(BarrierScope::Threadgroup, MemFlags::Threadgroup, &self.path);
            self.line(&format!("{barrier};"));
            return Ok(true);
        }
        let Some((lane, slot)) = sl.owner(&format!("enigma_e / {cols}u"), &format!("enigma_e % {cols}u")) else {
            return Err(self.malformed("a SIMD group's cooperative tensor in a layout of several SIMD groups"));
        };
        self.line(&format!("auto enigma_gather = [&](uint enigma_e) -> {name} {{"));
        self.line(&format!("    {name} enigma_w = {sname}[0];"));
        self.line(&format!("    const uint enigma_lane = {lane}, enigma_slot = {slot};"));
        self.line("    #pragma unroll");
        self.line(&format!("    for (uint enigma_q = 0u; enigma_q < {}u; ++enigma_q) {{", sl.capacity()));
        self.line(&format!("        const {name} enigma_x = __shfl_sync(0xffffffffu, {sname}[enigma_q], enigma_lane);"));
        self.line("        if (enigma_q == enigma_slot) enigma_w = enigma_x;");
        self.line("    }");
        self.line("    return enigma_w;");
        self.line("};");
        Ok(false)
    }

    fn combine(&mut self, dest: CoopId, src: CoopId, op: CombineOp) -> Result<(), CodegenError> {
        let (d, s) = (self.kernel.cooperative(dest), self.kernel.cooperative(src));
        let (dl, sl) = (self.layout(dest)?, self.layout(src)?);
        let (dname, sname) = (self.coop_name(dest)?, self.coop_name(src)?);
        let apply = |x: &str| match op {
            CombineOp::Assign => x.to_string(),
            CombineOp::Add => format!("{dname}[enigma_i] + {x}"),
            CombineOp::Sub => format!("{dname}[enigma_i] - {x}"),
            CombineOp::Mul => format!("{dname}[enigma_i] * {x}"),
            CombineOp::Max => format!("fmaxf({dname}[enigma_i], {x})"),
            CombineOp::Min => format!("fminf({dname}[enigma_i], {x})"),
        };
        let t = self.scope_thread(dest);
        self.line("{");
        self.indent += 1;
        if dl == sl && (s.rows, s.cols) == (d.rows, d.cols) {
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {dname}[enigma_i] = {};", dl.capacity(), apply(&format!("{sname}[enigma_i]"))));
        } else if let (Layout::Wgmma { slices, cols }, Layout::WgmmaRows { slices: rs }, 1) = (dl, sl, s.cols) {
            if slices != rs {
                return Err(self.malformed("a per-row value in the rows of another accumulator shape"));
            }
            // The quad's first lane holds each row's element.
            self.line(&format!("float enigma_row_value[{}];", 2 * slices));
            self.line("#pragma unroll");
            self.line(&format!(
                "for (uint enigma_h = 0u; enigma_h < {}u; ++enigma_h) enigma_row_value[enigma_h] = __shfl_sync(0xffffffffu, {sname}[enigma_h], ({t}) % 32u / 4u * 4u);",
                2 * slices
            ));
            let half = cols / 2;
            self.line("#pragma unroll");
            self.line(&format!(
                "for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {dname}[enigma_i] = {};",
                dl.capacity(),
                apply(&format!("enigma_row_value[enigma_i / {half}u * 2u + enigma_i % {half}u / 2u % 2u]"))
            ));
        } else {
            // The source element of each destination slot: through a
            // threadgroup scratch array for a scope of several SIMD groups
            // (barriers of the threadgroup around it), by shuffles for a
            // SIMD group's own tensor (each SIMD group holds its own).
            let barrier = self.dialect.barrier(BarrierScope::Threadgroup, MemFlags::Threadgroup, &self.path);
            let threadgroup = self.readable_elements(src)?;
            let (row, col) = dl.coords(&t, "enigma_i");
            let at = match (s.rows, s.cols) {
                (r, c) if (r, c) == (d.rows, d.cols) => format!("({row}) * {c}u + ({col})"),
                (_, 1) => format!("({row})"),
                _ => format!("({col})"),
            };
            let source = element_read(threadgroup, &at);
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {{", dl.capacity()));
            if threadgroup {
                self.line(&format!("    if ({}) {dname}[enigma_i] = {};", dl.valid(&t, "enigma_i"), apply(&source)));
            } else {
                // Every lane gathers, valid slot or not: the shuffles need all 32.
                self.line(&format!("    const float enigma_s = {source};"));
                self.line(&format!("    if ({}) {dname}[enigma_i] = {};", dl.valid(&t, "enigma_i"), apply("enigma_s")));
            }
            self.line("}");
            if threadgroup {
                self.line(&format!("{barrier};"));
            }
        }
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// Each thread computes its own valid slots: `fmaf` over k in order,
    /// from the slot's value (multiply-accumulate) or zero, in f32. A
    /// cooperative left operand's elements are other threads' registers:
    /// in the accumulator layout with the destination's rows, a thread's
    /// rows are held by its own quad of lanes, which shuffles them
    /// ([`Self::left_registers`]); otherwise the scope writes the tensor
    /// to a shared-memory scratch array between two barriers.
    fn scalar_product(&mut self, desc: &Matmul2dDescriptor, dest: CoopId, a: &Left, (bmem, b): (Memory, &ViewConsts)) -> Result<(), CodegenError> {
        let layout = self.layout(dest)?;
        let name = self.coop_name(dest)?;
        let t = self.scope_thread(dest);
        let elem = Type::scalar(self.kernel.cooperative(dest).elem);
        if matches!(layout, Layout::Wgmma { .. }) {
            // An earlier product into this accumulator may still be in flight.
            self.settle_products()?;
        }
        let shuffled = match a {
            Left::Tensor(id) => Some(self.left_registers(*id, layout)?),
            Left::View(..) => None,
        };
        let barrier = self.dialect.barrier(BarrierScope::Threadgroup, MemFlags::Threadgroup, &self.path);
        if let (Left::Tensor(id), Some(false)) = (a, shuffled) {
            self.left_to_scratch(*id)?;
        }
        let (row, col) = layout.coords(&t, "enigma_i");
        // Unrolled, so that the tensor's slots stay registers.
        self.line("#pragma unroll");
        self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {{", layout.capacity()));
        self.indent += 1;
        self.line(&format!("if (!({})) continue;", layout.valid(&t, "enigma_i")));
        self.line(&format!("const uint enigma_r = {row}, enigma_c = {col};"));
        let start = match desc.mode {
            Matmul2dMode::Multiply => "0.0f".to_string(),
            Matmul2dMode::MultiplyAccumulate => self.dialect.cast(Type::F32, elem, Code::postfix(format!("{name}[enigma_i]"))).text,
        };
        self.line(&format!("float enigma_acc = {start};"));
        self.line("for (uint enigma_kk = 0u; enigma_kk < enigma_k; ++enigma_kk) {");
        self.indent += 1;
        match (a, shuffled) {
            (Left::View(amem, ac), _) => {
                let (ax, ay) = if desc.transpose_left { ("enigma_r", "enigma_kk") } else { ("enigma_kk", "enigma_r") };
                self.view_operand("enigma_x", *amem, ac, ax, ay)?;
            }
            (Left::Tensor(id), Some(true)) => {
                let Layout::Wgmma { cols, .. } = layout else { return Err(self.malformed("a shuffled left operand needs the accumulator layout")) };
                let k = self.kernel.cooperative(*id).cols;
                // Slot of the left operand's row-half and slice at column kk, in
                // the lane of this thread's quad that holds column kk.
                self.line(&format!(
                    "const float enigma_x = __shfl_sync(0xffffffffu, enigma_left[enigma_i / {half}u * {kh}u + 4u * (enigma_kk / 8u) + 2u * ((enigma_i % {half}u) / 2u % 2u) + enigma_kk % 2u], ({t}) % 32u / 4u * 4u + enigma_kk % 8u / 2u);",
                    half = cols / 2,
                    kh = k / 2,
                ));
            }
            (Left::Tensor(id), _) => {
                let k = self.kernel.cooperative(*id).cols;
                self.line(&format!("const float enigma_x = (float)enigma_left[enigma_r * {k}u + enigma_kk];"));
            }
        }
        let (bx, by) = if desc.transpose_right { ("enigma_kk", "enigma_c") } else { ("enigma_c", "enigma_kk") };
        self.view_operand("enigma_y", bmem, b, bx, by)?;
        self.line("enigma_acc = fmaf(enigma_x, enigma_y, enigma_acc);");
        self.indent -= 1;
        self.line("}");
        let result = self.dialect.cast(elem, Type::F32, Code::primary("enigma_acc")).text;
        self.line(&format!("{name}[enigma_i] = {result};"));
        self.indent -= 1;
        self.line("}");
        if shuffled == Some(false) {
            // Before the scratch array is written again.
            self.line(&format!("{barrier};"));
        }
        Ok(())
    }

    /// The product on `mma.sync`: per 16-deep step each SIMD group packs
    /// the B fragments of its `n/8` column tiles, then for each of its
    /// 16-row tiles the A fragment, and issues one m16n8k16 per tile pair.
    /// Operand elements are read through their views (zero outside the
    /// extents and at k past the product's), exactly as 16-bit values.
    fn mma_product(&mut self, p: &MmaProduct, desc: &Matmul2dDescriptor, dest: CoopId, (amem, a): (Memory, &ViewConsts), (bmem, b): (Memory, &ViewConsts)) -> Result<(), CodegenError> {
        let name = self.coop_name(dest)?;
        let t = self.scope_thread(dest);
        let [(issue, issue_text), (pack, pack_text)] = p.functions();
        self.coop_function((issue.clone(), issue_text));
        self.coop_function((pack.clone(), pack_text));
        let (row_tiles, col_tiles) = (p.band / 16, p.n / 8);
        if desc.mode == Matmul2dMode::Multiply {
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {name}[enigma_i] = 0.0f;", row_tiles * col_tiles * 4));
        }
        self.line(&format!("const uint enigma_l = ({t}) % 32u, enigma_r0 = ({t}) / 32u * {}u;", p.band));
        // Element (r, k) of A and (k, c) of B as f32, zero outside.
        let (ax, ay) = if desc.transpose_left { ("enigma_r", "enigma_k2") } else { ("enigma_k2", "enigma_r") };
        let (bx, by) = if desc.transpose_right { ("enigma_k2", "enigma_c") } else { ("enigma_c", "enigma_k2") };
        for (fname, mem, c, x, y, args) in [("enigma_av", amem, a, ax, ay, "uint enigma_r, uint enigma_k2"), ("enigma_bv", bmem, b, bx, by, "uint enigma_k2, uint enigma_c")] {
            let place = self.view_place(mem, c, x, y)?;
            let (_, ty) = self.memory(mem)?;
            let value = self.dialect.cast(Type::F32, ty, Code::postfix(place)).text;
            self.line(&format!("auto {fname} = [&]({args}) -> float {{ return (enigma_k2 < enigma_k && {}) ? {value} : 0.0f; }};", Self::inside(c, x, y)));
        }
        self.line("for (uint enigma_kk = 0u; enigma_kk < enigma_k; enigma_kk += 16u) {");
        self.indent += 1;
        self.line("const uint enigma_kq = enigma_kk + 2u * (enigma_l % 4u);");
        self.line(&format!("unsigned enigma_fb[{col_tiles}][2];"));
        self.line("#pragma unroll");
        self.line(&format!("for (uint enigma_ct = 0u; enigma_ct < {col_tiles}u; ++enigma_ct) {{"));
        self.line("    const uint enigma_n = 8u * enigma_ct + enigma_l / 4u;");
        self.line(&format!("    enigma_fb[enigma_ct][0] = {pack}(enigma_bv(enigma_kq, enigma_n), enigma_bv(enigma_kq + 1u, enigma_n));"));
        self.line(&format!("    enigma_fb[enigma_ct][1] = {pack}(enigma_bv(enigma_kq + 8u, enigma_n), enigma_bv(enigma_kq + 9u, enigma_n));"));
        self.line("}");
        self.line("#pragma unroll");
        self.line(&format!("for (uint enigma_rt = 0u; enigma_rt < {row_tiles}u; ++enigma_rt) {{"));
        self.indent += 1;
        self.line("const uint enigma_m = enigma_r0 + 16u * enigma_rt + enigma_l / 4u;");
        self.line(&format!("const unsigned enigma_fa[4] = {{{pack}(enigma_av(enigma_m, enigma_kq), enigma_av(enigma_m, enigma_kq + 1u)), {pack}(enigma_av(enigma_m + 8u, enigma_kq), enigma_av(enigma_m + 8u, enigma_kq + 1u)), {pack}(enigma_av(enigma_m, enigma_kq + 8u), enigma_av(enigma_m, enigma_kq + 9u)), {pack}(enigma_av(enigma_m + 8u, enigma_kq + 8u), enigma_av(enigma_m + 8u, enigma_kq + 9u))}};"));
        self.line("#pragma unroll");
        self.line(&format!("for (uint enigma_ct = 0u; enigma_ct < {col_tiles}u; ++enigma_ct) {issue}(&{name}[(enigma_rt * {col_tiles}u + enigma_ct) * 4u], enigma_fa, enigma_fb[enigma_ct]);"));
        self.indent -= 1;
        self.line("}");
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// `const float {var} = view element (x, y) as f32, zero outside it`.
    fn view_operand(&mut self, var: &str, mem: Memory, c: &ViewConsts, x: &str, y: &str) -> Result<(), CodegenError> {
        let place = self.view_place(mem, c, x, y)?;
        let (_, ty) = self.memory(mem)?;
        let value = self.dialect.cast(Type::F32, ty, Code::postfix(place)).text;
        self.line(&format!("const float {var} = ({}) ? {value} : 0.0f;", Self::inside(c, x, y)));
        Ok(())
    }

    /// Prepares cooperative left operand `id` for the scalar path of a
    /// product into a tensor of layout `dest`: true when the quads can
    /// shuffle it (both in the accumulator layout of the same rows; the
    /// slots are copied to `enigma_left`, a per-thread array indexed at run
    /// time), false when it goes through shared memory.
    fn left_registers(&mut self, id: CoopId, dest: Layout) -> Result<bool, CodegenError> {
        let left = self.layout(id)?;
        let shuffle = matches!((left, dest), (Layout::Wgmma { slices: ls, .. }, Layout::Wgmma { slices: ds, .. }) if ls == ds);
        if shuffle {
            let name = self.coop_name(id)?;
            let ty = self.dialect.type_name(Type::scalar(self.kernel.cooperative(id).elem));
            self.line(&format!("{ty} enigma_left[{}];", left.capacity()));
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_q = 0u; enigma_q < {}u; ++enigma_q) enigma_left[enigma_q] = {name}[enigma_q];", left.capacity()));
        }
        Ok(shuffle)
    }

    /// Writes cooperative tensor `id` to `enigma_left`, a shared-memory
    /// array in row-major order, and waits for the whole scope.
    fn left_to_scratch(&mut self, id: CoopId) -> Result<(), CodegenError> {
        let t = self.kernel.cooperative(id);
        let (layout, name) = (self.layout(id)?, self.coop_name(id)?);
        let ty = self.dialect.type_name(Type::scalar(t.elem));
        let th = self.scope_thread(id);
        let (row, col) = layout.coords(&th, "enigma_q");
        self.line(&format!("__shared__ {ty} enigma_left[{}];", t.rows * t.cols));
        self.line("#pragma unroll");
        self.line(&format!("for (uint enigma_q = 0u; enigma_q < {}u; ++enigma_q) {{", layout.capacity()));
        self.line(&format!("    if ({}) enigma_left[({row}) * {}u + ({col})] = {name}[enigma_q];", layout.valid(&th, "enigma_q"), t.cols));
        self.line("}");
        let barrier = self.dialect.barrier(BarrierScope::Threadgroup, MemFlags::Threadgroup, &self.path);
        self.line(&format!("{barrier};"));
        Ok(())
    }

    /// The run-time test that the views suit `wgmma`: they have the pitch
    /// their arrays are swizzled for, cover the product, start on a swizzle
    /// row group and column group, and k is a multiple of 16 whose columns
    /// stay within a row.
    fn wgmma_test(p: &WgmmaProduct, a: &Left, b: &ViewConsts) -> String {
        let m = p.warpgroups * p.slices * 64;
        let mut terms = vec![format!("enigma_k % {WGMMA_K}u == 0u")];
        let mut views = vec![];
        if let (WgmmaLeft::Shared(l), Left::View(_, a)) = (p.left, a) {
            views.push((l, a, m));
        }
        views.push((p.right, b, p.n));
        for (o, c, mn) in views {
            let pitch = o.pitch;
            let (x, y, col_group) = match o.major {
                Major::K => ("enigma_k".to_string(), format!("{mn}u"), WGMMA_K),
                Major::Mn => (format!("{mn}u"), "enigma_k".to_string(), crate::cuda::cooperative::PANEL),
            };
            // The pitch the array is swizzled for (a literal, or a local
            // assigned once: checked again here).
            terms.push(format!("{} == 1u && {} == {pitch}u", c.stride(0), c.stride(1)));
            terms.push(format!("{} >= {x} && {} >= {y}", c.extent(0), c.extent(1)));
            terms.push(format!("{} / {pitch}u % 8u == 0u && {} % {pitch}u % {col_group}u == 0u", c.off(), c.off()));
            terms.push(format!("{} % {pitch}u + {x} <= {pitch}u", c.off()));
        }
        terms.join(" && ")
    }

    /// The descriptor of the 16-deep slice of operand `o` at k `kk` and
    /// m or n offset `mn` (`wgmma_desc(&array[physical], lead, stride)`).
    fn wgmma_descriptor(&mut self, o: &WgmmaOperand, mem: Memory, c: &ViewConsts, mn: &str) -> Result<String, CodegenError> {
        let (x, y) = match o.major {
            Major::K => ("enigma_kk", mn),
            Major::Mn => (mn, "enigma_kk"),
        };
        let place = self.view_place(mem, c, x, y)?;
        let swizzle = self.coop_plan()?.swizzled[o.array.0 as usize].unwrap_or(Swizzle { pitch: o.pitch, rows: 8 });
        // K-major: 8-row groups 1024 bytes apart (the leading offset is
        // unused); MN-major: panels `rows` 128-byte rows apart.
        let lead = match o.major {
            Major::K => 16,
            Major::Mn => swizzle.rows * 128,
        };
        Ok(format!("enigma::wgmma_desc(&{place}, {lead}u, 1024u)"))
    }

    /// Registers a program-scope function with the prologue once.
    fn coop_function(&mut self, (name, text): (String, String)) {
        if self.coop.functions.insert(name) {
            let _ = writeln!(self.coop.prologue, "{text}");
        }
    }

    /// Pins the registers of `wgmma` accumulator `id` (each 64-row slice);
    /// a 16-bit tensor in that layout is only ever a left operand, which
    /// `wgmma` does not write.
    fn hold(&mut self, id: CoopId) -> Result<(), CodegenError> {
        let Layout::Wgmma { slices, cols } = self.layout(id)? else { return Ok(()) };
        if self.kernel.cooperative(id).elem != Scalar::F32 {
            return Ok(());
        }
        let (hold, text) = hold_function(cols / 2);
        self.coop_function((hold.clone(), text));
        let name = self.coop_name(id)?;
        for s in 0..slices {
            self.line(&format!("{hold}(&{name}[{}]);", s * cols / 2));
        }
        Ok(())
    }

    /// Waits for the products in flight and pins every `wgmma`
    /// accumulator's registers after the wait.
    pub(super) fn settle_products(&mut self) -> Result<(), CodegenError> {
        self.line("enigma::wgmma_wait();");
        for id in 0..self.kernel.cooperative_tensors.len() {
            self.hold(CoopId(id as u32))?;
        }
        Ok(())
    }

    /// Whether the statement at the writer's path waits for the products
    /// in flight first ([`Plan::settles_before`]).
    pub(super) fn settles_here(&self) -> bool {
        self.coop.registers.as_ref().is_some_and(|p| p.settles_before(&self.path))
    }

    fn wgmma_product(&mut self, p: &WgmmaProduct, desc: &Matmul2dDescriptor, dest: CoopId, a: &Left, (bmem, b): (Memory, &ViewConsts)) -> Result<(), CodegenError> {
        let name = self.coop_name(dest)?;
        let t = self.scope_thread(dest);
        let (issue, text) = p.issue_function();
        self.coop_function((issue.clone(), text));
        let regs = p.n / 2;
        // Other threads' writes reach this product through the kernel's
        // barrier, before which each fenced them for the async proxy (the
        // dialect's barrier); this thread's own writes are fenced here,
        // unless that barrier directly precedes the product, so that the
        // thread wrote nothing since its fence. The fence waits for the
        // thread's memory operations in flight (`MEMBAR.ALL.CTA` in SASS):
        // a second one per slice cost the cooperative GEMM 3 % on an H200.
        if !self.follows_threadgroup_barrier() {
            self.line("enigma::async_proxy_fence();");
        }
        if desc.mode == Matmul2dMode::Multiply {
            // A product into this accumulator may still be writing it.
            self.settle_products()?;
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_i = 0u; enigma_i < {}u; ++enigma_i) {name}[enigma_i] = 0.0f;", p.slices * regs));
        }
        self.hold(dest)?;
        self.line(&format!("const uint enigma_g = ({t}) / 128u * {}u;", p.slices * 64));
        // A left operand in registers is packed to pairs of the input type
        // (rounded from f32) before the fence: PTX requires the registers
        // of `wgmma`'s A fragment written before `wgmma.fence`.
        if let WgmmaLeft::Registers(id) = p.left {
            let (left, pairs) = (self.coop_name(id)?, self.layout(id)?.capacity() / 2);
            let (pack, text) = pair_register_function(p.elem, self.kernel.cooperative(id).elem);
            self.coop_function((pack.clone(), text));
            self.line(&format!("unsigned enigma_pairs[{pairs}];"));
            self.line("#pragma unroll");
            self.line(&format!("for (uint enigma_q = 0u; enigma_q < {pairs}u; ++enigma_q) enigma_pairs[enigma_q] = {pack}({left}[2u * enigma_q], {left}[2u * enigma_q + 1u]);"));
        }
        self.line("enigma::wgmma_fence();");
        // Unrolled where k is static (a left operand in registers is
        // indexed by it).
        if desc.k.is_some() || matches!(p.left, WgmmaLeft::Registers(_)) {
            self.line("#pragma unroll");
        }
        self.line(&format!("for (uint enigma_kk = 0u; enigma_kk < enigma_k; enigma_kk += {WGMMA_K}u) {{"));
        self.indent += 1;
        let db = self.wgmma_descriptor(&p.right, bmem, b, "0u")?;
        self.line(&format!("const unsigned long long enigma_db = {db};"));
        for s in 0..p.slices {
            let da = match (p.left, a) {
                (WgmmaLeft::Shared(l), Left::View(amem, ac)) => self.wgmma_descriptor(&l, *amem, ac, &format!("enigma_g + {}u", s * 64))?,
                (WgmmaLeft::Registers(id), Left::Tensor(_)) => {
                    // Slice s's slots of the 16 columns at kk: 8 per column
                    // block, 4 pairs.
                    let k = self.kernel.cooperative(id).cols;
                    format!("&enigma_pairs[{}u + enigma_kk / 4u]", s * k / 4)
                }
                _ => return Err(self.malformed("a wgmma left operand that does not match the product")),
            };
            self.line(&format!("{issue}(&{name}[{}], {da}, enigma_db);", s * regs));
        }
        self.indent -= 1;
        self.line("}");
        // In flight until a barrier or an access of the accumulator waits
        // for it (`crate::cuda::cooperative`'s module doc).
        self.line("enigma::wgmma_commit();");
        Ok(())
    }

    pub(super) fn register_expr(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        Ok(match e {
            Expr::CooperativeCapacity { tensor } => Val { code: Code::primary(format!("{}u", self.layout(*tensor)?.capacity())), ty: Type::U32 },
            Expr::CooperativeValid { tensor, index } => {
                let i = self.expr(index)?.code.text;
                let t = self.scope_thread(*tensor);
                Val { code: Code::primary(format!("({})", self.layout(*tensor)?.valid(&t, &i))), ty: Type::BOOL }
            }
            Expr::CooperativeElement { tensor, index } => {
                let i = self.top_expr(index)?.code.text;
                let elem = self.kernel.cooperative(*tensor).elem;
                Val { code: Code::postfix(format!("{}[{i}]", self.coop_name(*tensor)?)), ty: Type::scalar(elem) }
            }
            Expr::CooperativeCoord { tensor, index, dim } => {
                let i = self.expr(index)?.code.text;
                let t = self.scope_thread(*tensor);
                let (row, col) = self.layout(*tensor)?.coords(&t, &i);
                Val { code: Code::primary(format!("({})", if *dim == 0 { col } else { row })), ty: Type::U32 }
            }
            _ => return Err(self.malformed("not a cooperative expression")),
        })
    }
}

/// The index of the packed word of column `c` of row `enigma_r` in a
/// dequantization (`enigma_q`: the word offset and stride, the scale
/// offset and stride, the group shift): K row `c`, N column `enigma_r` of
/// the words in `layout` (the prelude's `enigma_q4_word`, `QuantLayout::locate`).
fn word_index(layout: QuantLayout, c: &str) -> String {
    match layout {
        QuantLayout::Rows => format!("enigma_q[0] + ({c}) / 8u * enigma_q[1] + enigma_r"),
        QuantLayout::Columns => format!("enigma_q[0] + enigma_r * enigma_q[1] + ({c}) / 8u"),
        QuantLayout::Fragments => format!("enigma_q[0] + enigma_q4_word<enigma_q4_fragments>({c}, enigma_r, enigma_q[1])"),
    }
}

/// The nibble of that word holding the weight.
fn nibble_of(layout: QuantLayout, c: &str) -> String {
    match layout {
        QuantLayout::Rows | QuantLayout::Columns => format!("(({c}) % 8u)"),
        QuantLayout::Fragments => format!("enigma_q4_nibble<enigma_q4_fragments>({c}, enigma_r)"),
    }
}

/// The index of the scale (and bias) of column `c` of row `enigma_r` in a
/// dequantization (its group: `c >> shift`, the shift mod 32 as the IR's).
fn scale_index(layout: QuantLayout, c: &str) -> String {
    scale_index_of_group(layout, &format!("(({c}) >> (enigma_q[4] & 31u))"))
}

/// The index of the scale (and bias) of group `g` (relative to the scales'
/// offset) of row `enigma_r` in a dequantization
/// ([`QuantLayout::scale_index`]).
fn scale_index_of_group(layout: QuantLayout, g: &str) -> String {
    match layout {
        QuantLayout::Columns => format!("enigma_q[2] + enigma_r * enigma_q[3] + {g}"),
        QuantLayout::Rows | QuantLayout::Fragments => format!("enigma_q[2] + {g} * enigma_q[3] + enigma_r"),
    }
}

/// Where the pair loop of a dequantization in the `wgmma` layout takes its
/// scales ([`Writer::dequantize`]).
#[derive(Clone, Copy)]
enum PairScales {
    /// Every column of the tensor lies in the first group: one scale per
    /// row.
    FirstGroup,
    /// Both columns of a pair lie in one group: one scale per pair.
    OneGroup,
    /// Each column is its own group (a shift of 0).
    PerColumn,
}

/// Element `at` (row-major) of a source [`Writer::readable_elements`] made
/// readable: from the scratch array when it used one, else by the gather.
fn element_read(scratch: bool, at: &str) -> String {
    if scratch {
        format!("enigma_scratch[{at}]")
    } else {
        format!("enigma_gather({at})")
    }
}
