//! Cooperative tensor operations lowered onto SIMD-group matrix fragments,
//! for dialects without MetalPerformancePrimitives (MSL below 4.0,
//! [`crate::dialect::Dialect::cooperative_fragments`]). The body calls the
//! `enigma_coop_*` helpers the dialect's head defines (for MSL,
//! `cooperative_msl.metal`, which documents the layout): each cooperative
//! tensor is a local of `enigma_coop_frag<T, rows, cols, simdgroups>` (an
//! m×n floating-point tensor as 8×8 fragments, each SIMD group of the
//! scope holding its own row bands) or `enigma_coop_vec<…>` (any other
//! shape or element type, a plain per-thread array); views are
//! `enigma_coop_view_of(pointer, x extent, y extent, x stride, y stride)`;
//! each slot access passes the SIMD group's index in the scope and the
//! lane. A reduction over several SIMD groups meets in a threadgroup
//! scratch array declared at the top of the body. `combine` of two tensors
//! of one shape (hence one layout) goes slot by slot; a per-row or
//! per-column source goes through the same scratch array over several SIMD
//! groups, and through `simd_shuffle` in one.

use super::{Val, Writer};
use crate::code::Code;
use crate::dialect::{BuiltinOrd, Dialect};
use crate::error::CodegenError;
use enigma_ir::{Builtin, CombineOp, CoopId, CooperativeTensor, ExecutionScope, Expr, Matmul2dLeft, Matmul2dMode, Memory, ReduceAxis, ReduceOp, Scalar, StmtKind, TensorView, Type};

/// Whether a tensor is held as fragments (`enigma_coop_frag`): both sides
/// multiples of 8 and a type SIMD-group matrices hold.
fn in_fragments(t: &CooperativeTensor) -> bool {
    t.rows.is_multiple_of(8) && t.cols.is_multiple_of(8) && matches!(t.elem, Scalar::F32 | Scalar::F16 | Scalar::BF16)
}

/// The type a reduction of `elem` computes in: f32 for floating-point
/// tensors, the element type for integer ones.
fn accumulator(elem: Scalar) -> Scalar {
    if elem.is_float() {
        Scalar::F32
    } else {
        elem
    }
}

/// The reduction's identity in `acc`, as MSL text.
fn identity_text(op: ReduceOp, acc: Scalar) -> &'static str {
    match (op, acc) {
        (ReduceOp::Sum, Scalar::F32) => "0.0f",
        (ReduceOp::Sum, Scalar::U32) => "0u",
        (ReduceOp::Sum, _) => "0",
        (ReduceOp::Max, Scalar::F32) => "-INFINITY",
        (ReduceOp::Min, Scalar::F32) => "INFINITY",
        (ReduceOp::Max, Scalar::U32) => "0u",
        (ReduceOp::Min, Scalar::U32) => "0xffffffffu",
        (ReduceOp::Max, _) => "int(-2147483647 - 1)",
        (ReduceOp::Min, _) => "2147483647",
    }
}

/// `OP` of `enigma_coop_combined`.
fn combine_index(op: CombineOp) -> u32 {
    match op {
        CombineOp::Assign => 0,
        CombineOp::Add => 1,
        CombineOp::Sub => 2,
        CombineOp::Mul => 3,
        CombineOp::Max => 4,
        CombineOp::Min => 5,
    }
}

/// Whether `combine(dest, src)` reads its source element by element through
/// the scope's threadgroup scratch: a per-row or per-column source (not
/// `dest`'s shape) over several SIMD groups.
fn combines_through_scratch(dest: &CooperativeTensor, src: &CooperativeTensor) -> bool {
    (src.rows, src.cols) != (dest.rows, dest.cols) && dest.scope.simdgroups() > 1
}

fn op_index(op: ReduceOp) -> u32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Max => 1,
        ReduceOp::Min => 2,
    }
}

impl<'k, D: Dialect> Writer<'k, D> {
    /// The calling SIMD group's index in `scope`: 0 for one SIMD group.
    fn scope_simdgroup(&mut self, scope: ExecutionScope) -> String {
        match scope {
            ExecutionScope::Simdgroup => "0u".into(),
            ExecutionScope::Simdgroups(_) => {
                self.builtins.insert(BuiltinOrd::of(Builtin::SimdgroupIndexInThreadgroup));
                self.dialect.builtin(Builtin::SimdgroupIndexInThreadgroup).text
            }
        }
    }

    /// `sg, lane` for a slot access of tensor `id`.
    fn slot_position(&mut self, id: CoopId) -> String {
        let sg = self.scope_simdgroup(self.kernel.cooperative(id).scope);
        let lane = self.lane();
        format!("{sg}, {lane}")
    }

    /// Declares each tensor and the reductions' scratch arrays.
    pub(super) fn fragment_decls(&mut self) -> Result<(), CodegenError> {
        let k = self.kernel;
        self.lane();
        self.line("// cooperative tensors (SIMD-group matrix fragments)");
        for (i, t) in k.cooperative_tensors.iter().enumerate() {
            let layout = if in_fragments(t) { "enigma_coop_frag" } else { "enigma_coop_vec" };
            let name = self.coop.tensors[i].clone();
            self.line(&format!("{layout}<{}, {}, {}, {}> {name};", t.elem.msl_name(), t.rows, t.cols, t.scope.simdgroups()));
        }
        // One scratch array per accumulator type, as long as the longest
        // reduction or combination over several SIMD groups needs.
        let mut scratch: Vec<(Scalar, u32)> = vec![];
        let mut need = |acc: Scalar, n: u32| match scratch.iter_mut().find(|(t, _)| *t == acc) {
            Some((_, len)) => *len = (*len).max(n),
            None => scratch.push((acc, n)),
        };
        k.walk_stmts(|_, s| match &s.kind {
            StmtKind::CooperativeReduce { dest, .. } => {
                let d = k.cooperative(*dest);
                let n = d.scope.simdgroups();
                if n > 1 {
                    need(accumulator(d.elem), n * d.rows * d.cols);
                }
            }
            StmtKind::CooperativeCombine { dest, src, .. } => {
                let s = k.cooperative(*src);
                if combines_through_scratch(k.cooperative(*dest), s) {
                    need(Scalar::F32, s.rows * s.cols);
                }
            }
            _ => {}
        });
        for (acc, len) in scratch {
            let name = self.names.fresh(&format!("coop_scratch_{acc}"));
            self.line(&format!("threadgroup {} {name}[{len}];", acc.msl_name()));
            self.coop.scratch.push((acc, name));
        }
        Ok(())
    }

    /// `enigma_coop_view_of((device half*)A + offset, x, y, sx, sy)`.
    fn fragment_view(&mut self, v: &TensorView) -> Result<String, CodegenError> {
        let base = match v.mem {
            Memory::Buffer(p) => self.names.param(p).to_string(),
            Memory::Threadgroup(t) => self.names.tg_array(t).to_string(),
            Memory::Thread(_) => return Err(self.malformed("a tensor view of a per-thread array (validation refuses it)")),
        };
        let mut vals = vec![];
        for e in v.exprs() {
            vals.push(self.expr(e)?.code);
        }
        let rest: Vec<&str> = vals[1..].iter().map(|c| c.text.as_str()).collect();
        Ok(format!("enigma_coop_view_of({base} + {}, {})", vals[0].at_least(super::Prec::Additive), rest.join(", ")))
    }

    pub(super) fn fragment_stmt(&mut self, kind: &'k StmtKind) -> Result<(), CodegenError> {
        match kind {
            StmtKind::Matmul2d { desc, left, right, dest, .. } => {
                let [lname, rname] = self.coop.views.clone();
                let right_elem = crate::plan::memory_elem(self.kernel, right.mem).ok_or_else(|| self.malformed("a view of a parameter that is not a buffer"))?.elem();
                self.line("{");
                self.indent += 1;
                let (left_arg, left_elem, k) = match left {
                    Matmul2dLeft::Tensor(v) => {
                        let code = self.fragment_view(v)?;
                        self.line(&format!("auto {lname} = {code};"));
                        let elem = crate::plan::memory_elem(self.kernel, v.mem).ok_or_else(|| self.malformed("a view of a parameter that is not a buffer"))?.elem();
                        // A dynamic k is the left view's k extent.
                        let k = desc.k.map_or_else(|| format!("{lname}.{}", if desc.transpose_left { "y" } else { "x" }), |k| format!("{k}u"));
                        (lname, elem, k)
                    }
                    Matmul2dLeft::Cooperative(id) => {
                        let t = self.kernel.cooperative(*id);
                        (self.coop_name(*id)?, t.elem, format!("{}u", t.cols))
                    }
                };
                let code = self.fragment_view(right)?;
                self.line(&format!("auto {rname} = {code};"));
                // Operands of one type go in as they are; mixed ones as f32.
                let operand = if left_elem == right_elem { left_elem } else { Scalar::F32 };
                let dest_name = self.coop_name(*dest)?;
                let position = self.slot_position(*dest);
                self.line(&format!(
                    "enigma_coop_matmul<{}, {}, {}, {}>({left_arg}, {rname}, {dest_name}, {k}, {position});",
                    operand.msl_name(),
                    desc.transpose_left,
                    desc.transpose_right,
                    desc.mode == Matmul2dMode::MultiplyAccumulate,
                ));
                self.indent -= 1;
                self.line("}");
            }
            StmtKind::CooperativeLoad { tensor, src: view } | StmtKind::CooperativeStore { tensor, dst: view } => {
                let method = if matches!(kind, StmtKind::CooperativeLoad { .. }) { "load" } else { "store" };
                let name = self.coop_name(*tensor)?;
                let code = self.fragment_view(view)?;
                let position = self.slot_position(*tensor);
                self.line(&format!("enigma_coop_{method}({name}, {code}, {position});"));
            }
            StmtKind::CooperativeSet { tensor, index, value } => {
                let name = self.coop_name(*tensor)?;
                let i = self.expr(index)?.code.text;
                let v = self.top_expr(value)?.code.text;
                self.line(&format!("enigma_coop_at({name}, {i}) = {v};"));
            }
            StmtKind::CooperativeDequantize { tensor, code, layout, words, offset, stride, scales, scale_offset, scale_stride, group_shift, biases } => {
                let name = self.coop_name(*tensor)?;
                let (words, scales) = (self.scalar_pointer(*words, offset)?, self.scalar_pointer(*scales, scale_offset)?);
                let biases = match biases {
                    Some(b) => format!("{}, ", self.scalar_pointer(*b, scale_offset)?),
                    None => String::new(),
                };
                let [stride, scale_stride, group_shift] = [stride, scale_stride, group_shift].map(|e| self.expr(e).map(|v| v.code.text));
                let position = self.slot_position(*tensor);
                self.line(&format!("enigma_coop_dequantize<enigma_{code}, enigma_q4_{}>({name}, {words}, {}, {scales}, {biases}{}, {}, {position});", layout.name(), stride?, scale_stride?, group_shift?));
            }
            StmtKind::CooperativeReduce { src, dest, axis, op } => {
                let d = self.kernel.cooperative(*dest);
                let acc = accumulator(d.elem);
                let scratch = if d.scope.simdgroups() > 1 {
                    self.coop.scratch.iter().find(|(t, _)| *t == acc).map(|(_, n)| n.clone()).ok_or_else(|| self.malformed("a reduction without its scratch array"))?
                } else {
                    "nullptr".into()
                };
                let (s, dn) = (self.coop_name(*src)?, self.coop_name(*dest)?);
                let position = self.slot_position(*src);
                self.line(&format!(
                    "enigma_coop_reduce<{}, {}, {}>({s}, {dn}, {}, {scratch}, {position});",
                    acc.msl_name(),
                    op_index(*op),
                    *axis == ReduceAxis::Rows,
                    identity_text(*op, acc),
                ));
            }
            StmtKind::CooperativeCombine { dest, src, op } => {
                let (d, s) = (self.kernel.cooperative(*dest), self.kernel.cooperative(*src));
                let (dn, sn) = (self.coop_name(*dest)?, self.coop_name(*src)?);
                let position = self.slot_position(*dest);
                let op = combine_index(*op);
                if (s.rows, s.cols) == (d.rows, d.cols) {
                    self.line(&format!("enigma_coop_combine_slots<{op}>({dn}, {sn}, {position});"));
                } else {
                    if in_fragments(s) {
                        return Err(self.malformed("a per-row or per-column combine source held as fragments"));
                    }
                    let scratch = if combines_through_scratch(d, s) {
                        self.coop.scratch.iter().find(|(t, _)| *t == Scalar::F32).map(|(_, n)| n.clone()).ok_or_else(|| self.malformed("a combination without its scratch array"))?
                    } else {
                        "nullptr".into()
                    };
                    self.line(&format!("enigma_coop_combine<{op}>({dn}, {sn}, {scratch}, {position});"));
                }
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) fn fragment_expr(&mut self, e: &Expr) -> Result<Val, CodegenError> {
        Ok(match e {
            Expr::CooperativeCapacity { tensor } => {
                Val { code: Code::postfix(format!("enigma_coop_capacity({})", self.coop_name(*tensor)?)), ty: Type::U32 }
            }
            Expr::CooperativeValid { tensor, index } => {
                let i = self.top_expr(index)?.code.text;
                let position = self.slot_position(*tensor);
                Val { code: Code::postfix(format!("enigma_coop_valid({}, {i}, {position})", self.coop_name(*tensor)?)), ty: Type::BOOL }
            }
            Expr::CooperativeElement { tensor, index } => {
                let i = self.top_expr(index)?.code.text;
                let elem = self.kernel.cooperative(*tensor).elem;
                Val { code: Code::postfix(format!("enigma_coop_at({}, {i})", self.coop_name(*tensor)?)), ty: Type::scalar(elem) }
            }
            Expr::CooperativeCoord { tensor, index, dim } => {
                let i = self.top_expr(index)?.code.text;
                let position = self.slot_position(*tensor);
                Val { code: Code::postfix(format!("enigma_coop_coord({}, {i}, {dim}, {position})", self.coop_name(*tensor)?)), ty: Type::U32 }
            }
            _ => return Err(self.malformed("not a cooperative expression")),
        })
    }
}
