//! Cooperative tensor operations in the shared writer, spelt as Metal 4's
//! MetalPerformancePrimitives: one `mpp::tensor_ops::matmul2d<descriptor,
//! scope>` object per distinct descriptor and scope (the descriptors are
//! program-scope constants the dialect's head writes), each cooperative
//! tensor declared at the top of the body from the operation that first
//! writes it (`get_destination_cooperative_tensor`, or the row/column
//! reduction destination of its source's operation; a left operand that no
//! product writes, which the threads fill, as the left input tensor of the
//! operation that reads it, `get_left_input_cooperative_tensor`), and views as
//! `metal::tensor<…, dextents<int32_t, 2>, tensor_inline>` made where they
//! are used. `combine` of two tensors of one C++ type (one layout) goes
//! slot by slot; any other source reaches each destination slot by its
//! coordinates: over several SIMD groups the source is stored row-major to
//! a threadgroup scratch array (a `metal::tensor` view of it) between two
//! threadgroup barriers, and in one SIMD group each lane gathers the source
//! into a private array with `simd_shuffle`. `cooperative_dequantize`
//! fills each valid slot at its coordinates. A dialect that has no such
//! spelling refuses the kernel
//! ([`crate::dialect::Dialect::cooperative_tensors`]); one that lowers them
//! onto SIMD-group matrix fragments instead is written by
//! `cooperative_fragments`, one that holds the tensors in registers (CUDA)
//! by `cooperative_registers`.

use super::{Val, Writer};
use crate::code::Code;
use crate::dialect::Dialect;
use crate::error::{CodegenError, CodegenErrorKind};
use std::fmt::Write as _;
use enigma_ir::{
    CombineOp, CoopId, CooperativeTensor, ExecutionScope, Expr, Matmul2dDescriptor, Matmul2dLeft, Matmul2dMode, Memory, ReduceAxis, ReduceOp, StmtKind, TensorView, Type,
};

/// The MSL spelling of a descriptor.
pub(crate) fn descriptor_text(d: &Matmul2dDescriptor) -> String {
    let k = d.k.map_or("static_cast<int>(metal::dynamic_extent)".to_string(), |k| k.to_string());
    let mode = match d.mode {
        Matmul2dMode::Multiply => "multiply",
        Matmul2dMode::MultiplyAccumulate => "multiply_accumulate",
    };
    format!(
        "mpp::tensor_ops::matmul2d_descriptor({}, {}, {k}, {}, {}, {}, mpp::tensor_ops::matmul2d_descriptor::mode::{mode})",
        d.m, d.n, d.transpose_left, d.transpose_right, d.relaxed_precision
    )
}

/// The most elements a one-SIMD-group `combine` gathers into each lane's
/// private array (a reduction destination has at most 256).
const MAX_GATHERED: u32 = 256;

/// `op(dest, src)` in MSL, on f32 operands.
fn combined_text(op: CombineOp, dest: &str, src: &str) -> String {
    match op {
        CombineOp::Assign => src.to_string(),
        CombineOp::Add => format!("{dest} + {src}"),
        CombineOp::Sub => format!("{dest} - {src}"),
        CombineOp::Mul => format!("{dest} * {src}"),
        CombineOp::Max => format!("max({dest}, {src})"),
        CombineOp::Min => format!("min({dest}, {src})"),
    }
}

/// The row-major index, in a `combine` source shaped like `src`, of the
/// element a destination element at (`row`, `col`) takes: its row for an
/// m×1 source, its column for a 1×n one.
fn source_index(src: &CooperativeTensor, row: &str, col: &str) -> String {
    match (src.rows, src.cols) {
        (1, 1) => "0".into(),
        (1, _) => col.into(),
        (_, 1) => row.into(),
        (_, cols) => format!("{row} * {cols} + {col}"),
    }
}

impl<'k, D: Dialect> Writer<'k, D> {
    pub(super) fn coop_name(&self, id: CoopId) -> Result<String, CodegenError> {
        self.coop.tensors.get(id.0 as usize).cloned().ok_or_else(|| self.malformed(format!("cooperative tensor {} does not exist", id.0)))
    }

    fn op_name(&self, desc: &Matmul2dDescriptor, scope: ExecutionScope) -> String {
        self.coop.ops.iter().find(|(d, s, _)| d == desc && *s == scope).map_or_else(String::new, |(_, _, n)| n.clone())
    }

    /// `metal::tensor<device half, metal::dextents<int32_t, 2>, metal::tensor_inline>`.
    fn view_type(&self, mem: Memory) -> Result<String, CodegenError> {
        let elem = crate::plan::memory_elem(self.kernel, mem).ok_or_else(|| self.malformed("a view of a parameter that is not a buffer"))?;
        let space = if matches!(mem, Memory::Threadgroup(_)) { "threadgroup" } else { "device" };
        Ok(format!("metal::tensor<{space} {}, metal::dextents<int32_t, 2>, metal::tensor_inline>", elem.msl_name()))
    }

    /// The type a left operand has in the template arguments.
    fn left_type(&self, left: &Matmul2dLeft) -> Result<String, CodegenError> {
        match left {
            Matmul2dLeft::Tensor(v) => self.view_type(v.mem),
            Matmul2dLeft::Cooperative(id) => Ok(format!("decltype({})", self.coop_name(*id)?)),
        }
    }

    /// Names the operations and tensors and writes the tensors'
    /// declarations, in the order the body first writes them.
    pub(super) fn cooperative_decls(&mut self) -> Result<(), CodegenError> {
        let k = self.kernel;
        if k.cooperative_tensors.is_empty() {
            return Ok(());
        }
        self.lift(self.dialect.cooperative_tensors())?;
        if let Some(plan) = self.dialect.cooperative_registers().cloned() {
            return self.register_decls(plan);
        }
        self.coop.tensors = k.cooperative_tensors.iter().map(|t| self.names.fresh(&t.name)).collect();
        self.coop.views = [self.names.fresh("mpp_left"), self.names.fresh("mpp_right")];
        if self.dialect.cooperative_fragments() {
            return self.fragment_decls();
        }
        let mut stmts = vec![];
        k.walk_stmts(|_, s| stmts.push(&s.kind));
        for s in &stmts {
            if let StmtKind::Matmul2d { desc, scope, .. } = s {
                if !self.coop.ops.iter().any(|(d, sc, _)| d == desc && sc == scope) {
                    let name = self.names.fresh(&format!("matmul{}", self.coop.ops.len()));
                    self.coop.ops.push((*desc, *scope, name));
                }
            }
        }
        let ops = self.coop.ops.clone();
        for (desc, scope, name) in &ops {
            let _ = writeln!(self.coop.prologue, "constexpr constant mpp::tensor_ops::matmul2d_descriptor {name}_desc = {};", descriptor_text(desc));
            self.line(&format!("mpp::tensor_ops::matmul2d<{name}_desc, {}> {name};", scope.msl_name()));
        }
        // (operation, left type, right type) of each tensor once known, and
        // its declaring expression.
        let mut origin: Vec<Option<(String, String, String)>> = vec![None; k.cooperative_tensors.len()];
        let mut decls: Vec<String> = vec![String::new(); k.cooperative_tensors.len()];
        self.line("// cooperative tensors (MetalPerformancePrimitives)");
        for s in &stmts {
            // A left operand that no product wrote first (the threads fill
            // it through its slots or dequantize into it): the operation's
            // left input tensor, of the element types of the product.
            if let StmtKind::Matmul2d { desc, scope, left: Matmul2dLeft::Cooperative(id), right, dest, .. } = s {
                if origin[id.0 as usize].is_none() {
                    let op = self.op_name(desc, *scope);
                    let right_elem = crate::plan::memory_elem(k, right.mem).ok_or_else(|| self.malformed("a view of a parameter that is not a buffer"))?;
                    let (left_elem, dest_elem) = (k.cooperative(*id).elem.msl_name(), k.cooperative(*dest).elem.msl_name());
                    let decl = format!("{op}.get_left_input_cooperative_tensor<{left_elem}, {}, {dest_elem}>()", right_elem.msl_name());
                    origin[id.0 as usize] = Some((op, self.left_type(&Matmul2dLeft::Cooperative(*id))?, self.view_type(right.mem)?));
                    decls[id.0 as usize].clone_from(&decl);
                    let name = self.coop_name(*id)?;
                    self.line(&format!("auto {name} = {decl};"));
                }
            }
            let (dest, decl) = match s {
                StmtKind::Matmul2d { desc, scope, left, right, dest, .. } if origin[dest.0 as usize].is_none() => {
                    let o = (self.op_name(desc, *scope), self.left_type(left)?, self.view_type(right.mem)?);
                    let elem = k.cooperative(*dest).elem.msl_name();
                    let decl = format!("{}.get_destination_cooperative_tensor<{}, {}, {elem}>()", o.0, o.1, o.2);
                    origin[dest.0 as usize] = Some(o);
                    (*dest, decl)
                }
                StmtKind::CooperativeReduce { src, dest, axis, .. } if origin[dest.0 as usize].is_none() => {
                    let Some(o) = origin[src.0 as usize].clone() else { continue };
                    let which = match axis {
                        ReduceAxis::Rows => "row",
                        ReduceAxis::Columns => "column",
                    };
                    let elem = k.cooperative(*dest).elem.msl_name();
                    let decl = format!("{}.get_{which}_reduction_destination_cooperative_tensor<{}, {}, {elem}>()", o.0, o.1, o.2);
                    origin[dest.0 as usize] = Some(o);
                    (*dest, decl)
                }
                // A combination into a tensor not yet written: the type of
                // its source of the same shape.
                StmtKind::CooperativeCombine { dest, src, .. } if origin[dest.0 as usize].is_none() => {
                    let (d, t) = (k.cooperative(*dest), k.cooperative(*src));
                    let Some(o) = origin[src.0 as usize].clone().filter(|_| (d.rows, d.cols) == (t.rows, t.cols)) else { continue };
                    origin[dest.0 as usize] = Some(o);
                    (*dest, decls[src.0 as usize].clone())
                }
                _ => continue,
            };
            decls[dest.0 as usize].clone_from(&decl);
            let name = self.coop_name(dest)?;
            self.line(&format!("auto {name} = {decl};"));
        }
        if let Some(i) = origin.iter().position(Option::is_none) {
            let t = &k.cooperative_tensors[i];
            return Err(self.error(CodegenErrorKind::Unsupported {
                what: format!("cooperative tensor `{}`, which no matmul2d, reduction or combination with a source of its shape writes first and no matmul2d reads as its left operand (MSL takes its type from one)", t.name),
                ty: Type::scalar(t.elem),
            }));
        }
        self.coop.decls = decls;
        // The scratch array of the combinations over several SIMD groups
        // that do not go slot by slot, as long as the largest source.
        let mut len = 0;
        k.walk_stmts(|_, s| {
            if let StmtKind::CooperativeCombine { dest, src, .. } = &s.kind {
                let t = k.cooperative(*src);
                if t.scope.simdgroups() > 1 && !self.combines_slot_by_slot(*dest, *src) {
                    len = len.max(t.rows * t.cols);
                }
            }
        });
        if len > 0 {
            let name = self.names.fresh("coop_scratch_f32");
            self.line(&format!("threadgroup float {name}[{len}];"));
            self.coop.scratch.push((enigma_ir::Scalar::F32, name));
        }
        Ok(())
    }

    /// Whether `combine(dest, src)` may go slot by slot: the same shape
    /// and the same declaring expression, so the same C++ type and layout.
    fn combines_slot_by_slot(&self, dest: CoopId, src: CoopId) -> bool {
        let (d, s) = (self.kernel.cooperative(dest), self.kernel.cooperative(src));
        (d.rows, d.cols) == (s.rows, s.cols) && self.coop.decls.get(dest.0 as usize) == self.coop.decls.get(src.0 as usize)
    }

    /// `combine(dest, src, op)` with MetalPerformancePrimitives' tensors
    /// (see the module documentation).
    fn mpp_combine(&mut self, dest: CoopId, src: CoopId, op: CombineOp) -> Result<(), CodegenError> {
        let (d, s) = (self.kernel.cooperative(dest), self.kernel.cooperative(src));
        let (dn, sn) = (self.coop_name(dest)?, self.coop_name(src)?);
        let slot = format!("{dn}[enigma_i]");
        if self.combines_slot_by_slot(dest, src) {
            self.line(&format!("for (uint enigma_i = 0u; enigma_i < uint({dn}.get_capacity()); ++enigma_i) {{"));
            self.line(&format!("    if ({dn}.is_valid_element(enigma_i)) {{"));
            self.line(&format!("        {slot} = {};", combined_text(op, &slot, &format!("{sn}[enigma_i]"))));
            self.line("    }");
            self.line("}");
            return Ok(());
        }
        let several = s.scope.simdgroups() > 1;
        self.line("{");
        self.indent += 1;
        let source = if several {
            let scratch = self.coop.scratch.iter().find(|(t, _)| *t == enigma_ir::Scalar::F32).map(|(_, n)| n.clone()).ok_or_else(|| self.malformed("a combination without its scratch array"))?;
            let view = self.coop.views[0].clone();
            self.line(&format!(
                "auto {view} = metal::tensor<threadgroup float, metal::dextents<int32_t, 2>, metal::tensor_inline>({scratch}, metal::dextents<int32_t, 2>({c}, {r}), metal::array<int32_t, 2>{{1, {c}}});",
                r = s.rows,
                c = s.cols
            ));
            self.line(&format!("{sn}.store({view});"));
            self.line("threadgroup_barrier(mem_flags::mem_threadgroup);");
            scratch
        } else {
            let len = s.rows * s.cols;
            if len > MAX_GATHERED {
                return Err(self.error(CodegenErrorKind::Unsupported {
                    what: format!(
                        "`combine` of `{}` into `{}` in one SIMD group: the source's {len} elements are more than the {MAX_GATHERED} each lane gathers, and the two tensors have different MSL types",
                        s.name, d.name
                    ),
                    ty: Type::scalar(s.elem),
                }));
            }
            self.line(&format!("float enigma_source[{len}];"));
            self.line(&format!("for (uint enigma_j = 0u; enigma_j < uint({sn}.get_capacity()); ++enigma_j) {{"));
            self.line(&format!("    auto enigma_at = {sn}.get_multidimensional_index(enigma_j);"));
            self.line(&format!("    int enigma_key = {sn}.is_valid_element(enigma_j) ? int({}) : -1;", source_index(s, "enigma_at[1]", "enigma_at[0]")));
            self.line(&format!("    float enigma_value = {sn}[enigma_j];"));
            self.line("    for (ushort enigma_lane = 0; enigma_lane < 32; ++enigma_lane) {");
            self.line("        int enigma_k = simd_shuffle(enigma_key, enigma_lane);");
            self.line("        float enigma_v = simd_shuffle(enigma_value, enigma_lane);");
            self.line("        if (enigma_k >= 0) {");
            self.line("            enigma_source[enigma_k] = enigma_v;");
            self.line("        }");
            self.line("    }");
            self.line("}");
            "enigma_source".into()
        };
        self.line(&format!("for (uint enigma_i = 0u; enigma_i < uint({dn}.get_capacity()); ++enigma_i) {{"));
        self.line(&format!("    if ({dn}.is_valid_element(enigma_i)) {{"));
        self.line(&format!("        auto enigma_at = {dn}.get_multidimensional_index(enigma_i);"));
        let element = format!("{source}[{}]", source_index(s, "enigma_at[1]", "enigma_at[0]"));
        self.line(&format!("        {slot} = {};", combined_text(op, &slot, &element)));
        self.line("    }");
        self.line("}");
        if several {
            self.line("threadgroup_barrier(mem_flags::mem_threadgroup);");
        }
        self.indent -= 1;
        self.line("}");
        Ok(())
    }

    /// `metal::tensor<…>((device half*)A + offset, extents, strides)`.
    fn view_code(&mut self, v: &TensorView) -> Result<String, CodegenError> {
        let ty = self.view_type(v.mem)?;
        let elem = crate::plan::memory_elem(self.kernel, v.mem).ok_or_else(|| self.malformed("a view of a parameter that is not a buffer"))?;
        let space = if matches!(v.mem, Memory::Threadgroup(_)) { "threadgroup" } else { "device" };
        let base = match v.mem {
            Memory::Buffer(p) => self.names.param(p).to_string(),
            Memory::Threadgroup(t) => self.names.tg_array(t).to_string(),
            Memory::Thread(_) => return Err(self.malformed("a tensor view of a per-thread array (validation refuses it)")),
        };
        let mut vals = vec![];
        for e in v.exprs() {
            vals.push(self.expr(e)?.code);
        }
        let int = |c: &Code| format!("int32_t({})", c.text);
        Ok(format!(
            "{ty}(({space} {}*){base} + {}, metal::dextents<int32_t, 2>({}, {}), metal::array<int32_t, 2>{{{}, {}}})",
            elem.msl_name(),
            vals[0].at_least(super::Prec::Additive),
            int(&vals[1]),
            int(&vals[2]),
            int(&vals[3]),
            int(&vals[4])
        ))
    }

    pub(super) fn cooperative_stmt(&mut self, kind: &'k StmtKind) -> Result<(), CodegenError> {
        if self.dialect.cooperative_fragments() {
            return self.fragment_stmt(kind);
        }
        if self.coop.registers.is_some() {
            return self.register_stmt(kind);
        }
        match kind {
            StmtKind::Matmul2d { desc, scope, left, right, dest, .. } => {
                let op = self.op_name(desc, *scope);
                let [lname, rname] = self.coop.views.clone();
                self.line("{");
                self.indent += 1;
                let left_arg = match left {
                    Matmul2dLeft::Tensor(v) => {
                        let code = self.view_code(v)?;
                        self.line(&format!("auto {lname} = {code};"));
                        lname
                    }
                    Matmul2dLeft::Cooperative(id) => self.coop_name(*id)?,
                };
                let code = self.view_code(right)?;
                self.line(&format!("auto {rname} = {code};"));
                let dest = self.coop_name(*dest)?;
                self.line(&format!("{op}.run({left_arg}, {rname}, {dest});"));
                self.indent -= 1;
                self.line("}");
            }
            StmtKind::CooperativeLoad { tensor, src: view } | StmtKind::CooperativeStore { tensor, dst: view } => {
                let method = if matches!(kind, StmtKind::CooperativeLoad { .. }) { "load" } else { "store" };
                let name = self.coop_name(*tensor)?;
                let vname = self.coop.views[0].clone();
                let code = self.view_code(view)?;
                self.line("{");
                self.indent += 1;
                self.line(&format!("auto {vname} = {code};"));
                self.line(&format!("{name}.{method}({vname});"));
                self.indent -= 1;
                self.line("}");
            }
            StmtKind::CooperativeSet { tensor, index, value } => {
                let name = self.coop_name(*tensor)?;
                let i = self.expr(index)?.code.text;
                let v = self.top_expr(value)?.code.text;
                self.line(&format!("{name}[{i}] = {v};"));
            }
            StmtKind::CooperativeReduce { src, dest, axis, op } => {
                let elem = self.kernel.cooperative(*src).elem.msl_name();
                let (s, d) = (self.coop_name(*src)?, self.coop_name(*dest)?);
                let op = match op {
                    ReduceOp::Sum => "sum",
                    ReduceOp::Max => "max",
                    ReduceOp::Min => "min",
                };
                self.line(&format!(
                    "mpp::tensor_ops::{}({s}, {d}, mpp::tensor_ops::reduction_operation::{op}, mpp::tensor_ops::reduction_operation_identity<{elem}>::{op}_identity);",
                    axis.function()
                ));
            }
            StmtKind::CooperativeCombine { dest, src, op } => self.mpp_combine(*dest, *src, *op)?,
            StmtKind::CooperativeDequantize { tensor, code, layout, words, offset, stride, scales, scale_offset, scale_stride, group_shift, biases } => {
                // Slot by slot at each slot's coordinates, as the simulator
                // does, each element the tile helpers' `enigma_q4_weight`.
                self.dialect.use_matrices();
                let name = self.coop_name(*tensor)?;
                let elem = self.kernel.cooperative(*tensor).elem.msl_name();
                let (words, scales) = (self.scalar_pointer(*words, offset)?, self.scalar_pointer(*scales, scale_offset)?);
                let biases = match biases {
                    Some(b) => format!("{}, ", self.scalar_pointer(*b, scale_offset)?),
                    None => String::new(),
                };
                let [stride, scale_stride, group_shift] = [stride, scale_stride, group_shift].map(|e| self.expr(e).map(|v| v.code.text));
                let (stride, scale_stride, group_shift) = (stride?, scale_stride?, group_shift?);
                self.line(&format!("for (uint enigma_i = 0u; enigma_i < uint({name}.get_capacity()); ++enigma_i) {{"));
                self.line(&format!("    if ({name}.is_valid_element(enigma_i)) {{"));
                self.line(&format!("        auto enigma_at = {name}.get_multidimensional_index(enigma_i);"));
                self.line(&format!(
                    "        {name}[enigma_i] = enigma_q4_weight<{elem}, enigma_q4_{}>(enigma_{code}, {words}, {stride}, {scales}, {biases}{scale_stride}, {group_shift}, uint(enigma_at[1]), uint(enigma_at[0]));",
                    layout.name()
                ));
                self.line("    }");
                self.line("}");
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) fn cooperative_expr(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        if self.dialect.cooperative_fragments() {
            return self.fragment_expr(e);
        }
        if self.coop.registers.is_some() {
            return self.register_expr(e);
        }
        Ok(match e {
            Expr::CooperativeCapacity { tensor } => Val { code: Code::postfix(format!("uint({}.get_capacity())", self.coop_name(*tensor)?)), ty: Type::U32 },
            Expr::CooperativeValid { tensor, index } => {
                let i = self.expr(index)?.code.text;
                Val { code: Code::postfix(format!("{}.is_valid_element({i})", self.coop_name(*tensor)?)), ty: Type::BOOL }
            }
            Expr::CooperativeElement { tensor, index } => {
                let i = self.expr(index)?.code.text;
                let elem = self.kernel.cooperative(*tensor).elem;
                Val { code: Code::postfix(format!("{}[{i}]", self.coop_name(*tensor)?)), ty: Type::scalar(elem) }
            }
            Expr::CooperativeCoord { tensor, index, dim } => {
                let i = self.expr(index)?.code.text;
                Val { code: Code::postfix(format!("uint({}.get_multidimensional_index({i})[{dim}])", self.coop_name(*tensor)?)), ty: Type::U32 }
            }
            _ => return Err(self.malformed("not a cooperative expression")),
        })
    }
}
