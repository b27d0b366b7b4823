//! Validation: type checking, definite assignment, barrier uniformity, memory
//! access rules and resource limits.
//!
//! The promise every backend relies on: a kernel that passed [`validate`]
//! never makes a backend panic. Code generation either succeeds or returns an
//! error; the simulator either runs or reports a runtime error.

use crate::ir::*;
use crate::types::{MatrixType, Scalar, Type};
use crate::dispatch_constant::HostExpr;
use crate::typing;
use crate::validation_error::{Location, ValidationError, ValidationErrorKind};
use serde::Serialize;
use std::collections::BTreeSet;

/// What validation enforces: the target's limits, and which rules apply.
/// The default applies every rule with the portable limits.
#[derive(Clone, Debug)]
pub struct ValidationOptions {
    /// Threadgroup memory available to one threadgroup (32 KiB on Apple GPUs).
    pub max_threadgroup_memory_bytes: u64,
    /// Reject barriers in control flow that is not uniform over their group.
    /// Only the sanitizer's harnesses turn this off, to run a kernel with a
    /// divergent barrier and see the simulator report the divergence; no
    /// device backend may be given a kernel validated without it.
    pub check_barrier_uniformity: bool,
}

impl ValidationOptions {
    /// Every rule but barrier uniformity: for running kernels with divergent
    /// barriers on the simulator, which reports them at run time.
    pub fn allowing_divergent_barriers() -> ValidationOptions {
        ValidationOptions { check_barrier_uniformity: false, ..ValidationOptions::default() }
    }
}

impl Default for ValidationOptions {
    fn default() -> Self {
        ValidationOptions {
            max_threadgroup_memory_bytes: crate::limits::MAX_THREADGROUP_MEMORY_BYTES,
            check_barrier_uniformity: true,
        }
    }
}

/// What validation learned about a kernel; backends take it as input.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelInfo {
    /// Bytes of statically declared threadgroup memory.
    pub threadgroup_memory_bytes: u64,
    /// Memories touched by an atomic operation (MSL declares them `atomic_*`).
    pub atomic_memories: BTreeSet<Memory>,
    /// Buffers the kernel stores to (non-atomically or atomically).
    pub written_buffers: BTreeSet<ParamId>,
    /// Textures the kernel writes.
    pub written_textures: BTreeSet<ParamId>,
    /// The samplers each sampled texture is sampled with, each once, in the
    /// order the kernel first uses them (CUDA makes a texture object for each).
    pub samplers: std::collections::BTreeMap<ParamId, Vec<crate::ir::Sampler>>,
    /// Whether the kernel calls any SIMD-group function.
    pub uses_simd_functions: bool,
    /// Optional features the kernel uses; a device must support each.
    pub features: BTreeSet<crate::Feature>,
    /// The SIMD-group count N of the kernel's `execution_simdgroups(N)`
    /// operations: a dispatch must give each threadgroup exactly N SIMD
    /// groups of 32 threads (`enigma_backend::check_dispatch`).
    pub cooperative_simdgroups: Option<u32>,
    /// Whether the kernel prints ([`crate::StmtKind::Print`]; MSL needs 3.2).
    pub prints: bool,
}


/// Validates `kernel` against `options`.
pub fn validate(kernel: &Kernel, options: &ValidationOptions) -> Result<KernelInfo, ValidationError> {
    let mut v = Validator {
        kernel,
        info: KernelInfo::default(),
        path: StmtPath::default(),
        source: None,
        check_barrier_uniformity: options.check_barrier_uniformity,
        control: Uniformity::Threadgroup,
    };
    v.declarations(options)?;
    let mut state = FlowState::new(kernel);
    v.block(&kernel.body, Branch::Body, &mut state, Ctx { uniformity: Uniformity::Threadgroup, loop_depth: 0 })?;
    Ok(v.info)
}

/// True for `[A-Za-z_][A-Za-z0-9_]*` that is not reserved by MSL or CUDA C++.
pub fn is_valid_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&name)
        && !name.starts_with("__")
}

/// Words a kernel cannot use as names: C++ keywords and names the generated
/// MSL and CUDA code relies on.
const RESERVED: &[&str] = &[
    "auto", "bool", "break", "case", "char", "const", "constant", "continue", "default", "device",
    "do", "double", "else", "enum", "extern", "float", "for", "goto", "half", "if", "inline", "int",
    "kernel", "long", "namespace", "operator", "register", "return", "short", "signed", "sizeof",
    "static", "struct", "switch", "template", "this", "thread", "threadgroup", "typedef", "typename",
    "uint", "union", "unsigned", "using", "void", "volatile", "while", "true", "false", "metal",
    "half2", "half3", "half4", "float2", "float3", "float4", "uint2", "uint3", "uint4", "int2",
    "int3", "int4", "bfloat", "ushort", "uchar", "ulong", "fast", "precise", "class", "new", "delete",
    "private", "public", "protected", "virtual", "friend", "mutable", "explicit", "export", "min",
    "max", "select", "abs", "clamp", "exp", "log", "sqrt", "pow", "sin", "cos", "tanh", "floor",
    "ceil", "fma", "dim3", "blockIdx", "threadIdx", "blockDim", "gridDim", "warpSize",
];

struct Validator<'k> {
    kernel: &'k Kernel,
    info: KernelInfo,
    path: StmtPath,
    source: Option<SourceLoc>,
    check_barrier_uniformity: bool,
    /// How uniform the control flow reaching the statement being checked
    /// is (its `Ctx::uniformity`), for the rules on expressions.
    control: Uniformity,
}

#[derive(Clone, Copy)]
struct Ctx {
    /// How uniform the control flow reaching the current statement is.
    uniformity: Uniformity,
    loop_depth: u32,
}

/// Per-path facts: which locals are definitely assigned, how uniform each
/// local's value is, and whether some threads may already have left through
/// `return`/`break`/`continue` under non-uniform control.
#[derive(Clone)]
struct FlowState {
    assigned: Vec<bool>,
    var_uniformity: Vec<Uniformity>,
    /// Raised when a thread may have returned early under non-uniform control:
    /// everything after runs with fewer threads.
    exited: Uniformity,
    /// Raised by `break`/`continue` under non-uniform control in the current loop.
    loop_exited: Uniformity,
    /// True once every path through the block so far has left it (return/break/continue).
    terminated: bool,
}

impl FlowState {
    fn new(kernel: &Kernel) -> FlowState {
        FlowState {
            assigned: vec![false; kernel.locals.len()],
            var_uniformity: vec![Uniformity::Threadgroup; kernel.locals.len()],
            exited: Uniformity::Threadgroup,
            loop_exited: Uniformity::Threadgroup,
            terminated: false,
        }
    }

    /// Joins the facts of two paths that meet again.
    fn join(&mut self, other: &FlowState) {
        match (self.terminated, other.terminated) {
            (true, false) => self.assigned.clone_from(&other.assigned),
            (false, false) => {
                for (a, b) in self.assigned.iter_mut().zip(&other.assigned) {
                    *a &= *b;
                }
            }
            _ => {}
        }
        for (a, b) in self.var_uniformity.iter_mut().zip(&other.var_uniformity) {
            *a = (*a).max(*b);
        }
        self.exited = self.exited.max(other.exited);
        self.loop_exited = self.loop_exited.max(other.loop_exited);
        self.terminated &= other.terminated;
    }
}

impl<'k> Validator<'k> {
    fn err(&self, kind: ValidationErrorKind) -> ValidationError {
        ValidationError {
            kernel: self.kernel.name.clone(),
            location: Box::new(Location { path: Some(self.path.clone()), source: self.source.clone() }),
            kind,
        }
    }

    fn decl_err(&self, kind: ValidationErrorKind) -> ValidationError {
        ValidationError {
            kernel: self.kernel.name.clone(),
            location: Box::new(Location { path: None, source: None }),
            kind,
        }
    }

    fn declarations(&mut self, options: &ValidationOptions) -> Result<(), ValidationError> {
        let k = self.kernel;
        let limit = crate::limits::MAX_BUFFER_ARGUMENTS;
        let buffers = k.params.iter().filter(|p| p.kind.is_buffer_slot()).count();
        if buffers > limit as usize {
            return Err(self.decl_err(ValidationErrorKind::TooManyParameters { count: buffers, limit }));
        }
        let limit = crate::limits::MAX_TEXTURE_ARGUMENTS;
        let textures = k.params.len() - buffers;
        if textures > limit as usize {
            return Err(self.decl_err(ValidationErrorKind::TooManyTextures { count: textures, limit }));
        }
        for p in &k.params {
            if let ParamKind::Texture { texel, .. } = p.kind {
                typing::texture_texel(&p.name, texel).map_err(|kind| self.decl_err(kind))?;
                self.info.features.insert(crate::Feature::Texture2d);
            }
        }
        let mut names = BTreeSet::new();
        let all_names = std::iter::once(k.name.as_str())
            .chain(k.params.iter().map(|p| p.name.as_str()))
            .chain(k.spec_constants.iter().map(|s| s.name.as_str()))
            .chain(k.threadgroup_arrays.iter().map(|t| t.name.as_str()))
            .chain(k.thread_arrays.iter().map(|t| t.name.as_str()))
            .chain(k.locals.iter().map(|l| l.name.as_str()))
            .chain(k.cooperative_tensors.iter().map(|t| t.name.as_str()));
        for name in all_names {
            if !is_valid_identifier(name) || Builtin::from_name(name).is_some() {
                return Err(self.decl_err(ValidationErrorKind::InvalidName { name: name.into() }));
            }
            if !names.insert(name) {
                return Err(self.decl_err(ValidationErrorKind::DuplicateName { name: name.into() }));
            }
        }
        let types = k
            .params
            .iter()
            .filter_map(|p| match p.kind {
                ParamKind::Buffer { elem, .. } => Some(elem),
                ParamKind::Value { ty } => Some(ty),
                ParamKind::Texture { .. } => None,
            })
            .chain(k.threadgroup_arrays.iter().map(|t| t.elem))
            .chain(k.thread_arrays.iter().map(|t| t.elem))
            .chain(k.locals.iter().map(|l| l.ty));
        let places = k
            .params
            .iter()
            .map(|p| (format!("parameter `{}`", p.name), p.kind))
            .filter_map(|(what, kind)| match kind {
                ParamKind::Buffer { elem, .. } => Some((what, elem)),
                ParamKind::Value { ty } => Some((what, ty)),
                ParamKind::Texture { .. } => None,
            })
            .chain(k.threadgroup_arrays.iter().map(|t| (format!("threadgroup array `{}`", t.name), t.elem)))
            .chain(k.thread_arrays.iter().map(|t| (format!("per-thread array `{}`", t.name), t.elem)));
        for (what, ty) in places {
            if ty.is_matrix() {
                return Err(self.decl_err(ValidationErrorKind::MatrixPlace { what, ty }));
            }
        }
        for ty in types.chain(k.spec_constants.iter().map(|s| Type::scalar(s.ty))) {
            if let Some(m) = ty.as_matrix() {
                typing::matrix_shape(m).map_err(|kind| self.decl_err(kind))?;
            }
            if !(1..=4).contains(&ty.width()) {
                return Err(self.decl_err(ValidationErrorKind::VectorWidth { width: ty.width() }));
            }
            self.note_type(ty);
        }
        for spec in &k.spec_constants {
            check_literal(&spec.default).map_err(|kind| self.decl_err(kind))?;
            if spec.default.ty != spec.ty {
                return Err(self.decl_err(ValidationErrorKind::SpecDefault {
                    name: spec.name.clone(),
                    ty: spec.ty,
                    default: spec.default,
                }));
            }
        }
        if !k.cooperative_tensors.is_empty() {
            self.info.features.insert(crate::Feature::CooperativeTensors);
        }
        for t in &k.cooperative_tensors {
            crate::cooperative::tensor(t).map_err(|problem| self.decl_err(ValidationErrorKind::Cooperative { op: "cooperative_tensor", problem }))?;
            self.note_type(Type::scalar(t.elem));
        }
        for arr in &k.threadgroup_arrays {
            if arr.len == 0 {
                return Err(self.decl_err(ValidationErrorKind::EmptyThreadgroupArray { name: arr.name.clone() }));
            }
        }
        for arr in &k.thread_arrays {
            if arr.len == 0 {
                return Err(self.decl_err(ValidationErrorKind::EmptyThreadArray { name: arr.name.clone() }));
            }
        }
        let thread_bytes: u64 = k.thread_arrays.iter().map(ThreadArray::size_bytes).sum();
        if thread_bytes > crate::limits::MAX_THREAD_ARRAY_BYTES {
            return Err(self.decl_err(ValidationErrorKind::ThreadArrayLimit { bytes: thread_bytes, limit: crate::limits::MAX_THREAD_ARRAY_BYTES }));
        }
        let bytes = k.threadgroup_memory_bytes();
        if bytes > options.max_threadgroup_memory_bytes {
            return Err(self.decl_err(ValidationErrorKind::ThreadgroupMemoryLimit {
                bytes,
                limit: options.max_threadgroup_memory_bytes,
            }));
        }
        self.info.threadgroup_memory_bytes = bytes;
        Ok(())
    }

    fn block(&mut self, block: &Block, branch: Branch, state: &mut FlowState, ctx: Ctx) -> Result<(), ValidationError> {
        let (saved_source, saved_control) = (self.source.clone(), self.control);
        for (i, stmt) in block.iter().enumerate() {
            self.path.0.push((branch, i as u32));
            self.source = stmt.loc.clone().or_else(|| saved_source.clone());
            let ctx = Ctx { uniformity: ctx.uniformity.max(state.exited).max(state.loop_exited), ..ctx };
            self.control = ctx.uniformity;
            self.stmt(stmt, state, ctx)?;
            self.path.0.pop();
        }
        self.source = saved_source;
        self.control = saved_control;
        Ok(())
    }

    fn stmt(&mut self, stmt: &Stmt, state: &mut FlowState, ctx: Ctx) -> Result<(), ValidationError> {
        if let Some(op) = collective_matrix_op(&stmt.kind) {
            if ctx.uniformity > Uniformity::Simdgroup {
                return Err(self.err(ValidationErrorKind::NonUniformMatrix {
                    op,
                    cause: THREAD_DEPENDENT.into(),
                }));
            }
        }
        match &stmt.kind {
            StmtKind::MatrixStore { value, mem, offset, stride, .. } => {
                let (ty, _) = self.expr(value, state)?;
                let m = ty.as_matrix().ok_or_else(|| {
                    self.err(ValidationErrorKind::MatrixOperands { op: "simdgroup_store", problem: format!("the value stored must be a SIMD-group matrix, found {ty}") })
                })?;
                self.matrix_access("simdgroup_store", m, *mem, offset, stride, state)?;
            }
            StmtKind::TextureWrite { tex, value, coord } => {
                let (param, texel, access) = self.texture(*tex)?;
                let (vt, _) = self.expr(value, state)?;
                let (ct, _) = self.expr(coord, state)?;
                typing::texture_write(&param.name, texel, access, vt, ct).map_err(|k| self.err(k))?;
                self.info.written_textures.insert(*tex);
            }
            StmtKind::AsyncCopy { dst, dst_index, src, src_index, count, valid } => {
                typing::async_copy_memories(
                    self.kernel.memory_name(*dst),
                    matches!(dst, Memory::Threadgroup(_)),
                    self.kernel.memory_name(*src),
                    matches!(src, Memory::Buffer(_)),
                )
                .map_err(|k| self.err(k))?;
                let (dst_elem, _) = self.memory_access(*dst, dst_index, state, true)?;
                let (src_elem, _) = self.memory_access(*src, src_index, state, false)?;
                let (valid_ty, _) = self.expr(valid, state)?;
                typing::async_copy(dst_elem, src_elem, *count, valid_ty).map_err(|k| self.err(k))?;
            }
            StmtKind::TileCopy(copy) => self.tile_copy(copy, state, ctx)?,
            StmtKind::TileWait { barrier } => {
                let (ty, uni) = self.expr(barrier, state)?;
                typing::tile_barrier("tile_wait", ty).map_err(|k| self.err(k))?;
                self.threadgroup_uniform("tile_wait", ctx.uniformity, (uni, "its barrier"))?;
            }
            StmtKind::AsyncCommit => {}
            StmtKind::Print { format, args } => {
                let mut types = Vec::with_capacity(args.len());
                for a in args {
                    types.push(self.expr(a, state)?.0);
                }
                typing::print(format, &types).map_err(|k| self.err(k))?;
                self.info.prints = true;
            }
            StmtKind::AsyncWait { pending } => typing::async_wait(*pending).map_err(|k| self.err(k))?,
            StmtKind::DeviceFence => {
                self.info.features.insert(crate::Feature::DeviceFence);
            }
            StmtKind::TextureFence { tex } => {
                let (param, _, access) = self.texture(*tex)?;
                if access != TextureAccess::ReadWrite {
                    return Err(self.err(ValidationErrorKind::TextureAccess { texture: param.name.clone(), access, op: "fence" }));
                }
            }
            StmtKind::Assign { var, value } => {
                let (ty, uni) = self.expr(value, state)?;
                let local = self.var(*var)?;
                if local.ty != ty {
                    return Err(self.err(ValidationErrorKind::AssignType {
                        target: local.name.clone(),
                        expected: local.ty,
                        found: ty,
                    }));
                }
                self.define(*var, uni.max(ctx.uniformity), state);
            }
            StmtKind::Store { mem, index, value } => {
                let (elem, _) = self.memory_access(*mem, index, state, true)?;
                let (ty, _) = self.expr(value, state)?;
                if ty != elem {
                    return Err(self.err(ValidationErrorKind::AssignType {
                        target: format!("{}[…]", self.kernel.memory_name(*mem)),
                        expected: elem,
                        found: ty,
                    }));
                }
            }
            StmtKind::Atomic { op, mem, index, value, result } => {
                let elem = self.atomic_memory(*mem, index, state, *op)?;
                self.expect_expr(value, elem, "atomic value", state)?;
                if let Some(var) = result {
                    self.atomic_result(*var, elem, state)?;
                }
            }
            StmtKind::AtomicCompareExchange { mem, index, expected, desired, result } => {
                let elem = self.atomic_memory(*mem, index, state, AtomicOp::Add)?;
                if elem.elem().is_float() {
                    return Err(self.err(ValidationErrorKind::AtomicType {
                        memory: self.kernel.memory_name(*mem).into(),
                        elem,
                    }));
                }
                self.expect_expr(expected, elem, "expected value", state)?;
                self.expect_expr(desired, elem, "desired value", state)?;
                if let Some(var) = result {
                    self.atomic_result(*var, elem, state)?;
                }
            }
            StmtKind::If { cond, then_body, else_body } => {
                let uni = self.condition(cond, state)?;
                let inner = Ctx { uniformity: ctx.uniformity.max(uni), ..ctx };
                let mut then_state = state.clone();
                self.block(then_body, Branch::Then, &mut then_state, inner)?;
                let mut else_state = state.clone();
                self.block(else_body, Branch::Else, &mut else_state, inner)?;
                then_state.join(&else_state);
                *state = then_state;
            }
            StmtKind::For { var, start, end, step, body, unroll } => {
                let local = self.var(*var)?;
                if local.ty.is_vector() || !local.ty.elem().is_int() {
                    return Err(self.err(ValidationErrorKind::LoopVariable { var: local.name.clone(), ty: local.ty }));
                }
                if *unroll {
                    unrolled_trips(start, end, step)
                        .map_err(|problem| self.err(ValidationErrorKind::UnrollBound { var: local.name.clone(), problem }))?;
                }
                if matches!(step, Expr::Literal(Literal { value: LiteralValue::Int(0) | LiteralValue::UInt(0), .. })) {
                    return Err(self.err(ValidationErrorKind::LoopStep { var: local.name.clone() }));
                }
                let ty = local.ty;
                let (_, u_start) = self.expect_expr(start, ty, "loop start", state)?;
                let (_, u_end) = self.expect_expr(end, ty, "loop end", state)?;
                let (_, u_step) = self.expect_expr(step, ty, "loop step", state)?;
                // The trip count depends on all three; the variable also on the iteration.
                let trip = u_start.max(u_end).max(u_step);
                self.define(*var, trip.max(ctx.uniformity), state);
                self.loop_body(body, state, ctx, trip, None)?;
            }
            StmtKind::While { cond, body } => {
                let uni = self.condition(cond, state)?;
                self.loop_body(body, state, ctx, uni, Some(cond))?;
            }
            StmtKind::Break | StmtKind::Continue => {
                if ctx.loop_depth == 0 {
                    let what = if matches!(stmt.kind, StmtKind::Break) { "break" } else { "continue" };
                    return Err(self.err(ValidationErrorKind::OutsideLoop { what }));
                }
                state.loop_exited = state.loop_exited.max(ctx.uniformity);
                state.terminated = true;
            }
            StmtKind::Return => {
                state.exited = state.exited.max(ctx.uniformity);
                state.terminated = true;
            }
            StmtKind::Matmul2d { .. }
            | StmtKind::CooperativeLoad { .. }
            | StmtKind::CooperativeStore { .. }
            | StmtKind::CooperativeSet { .. }
            | StmtKind::CooperativeDequantize { .. }
            | StmtKind::CooperativeReduce { .. }
            | StmtKind::CooperativeCombine { .. } => self.cooperative_stmt(&stmt.kind, state, ctx)?,
            StmtKind::Barrier { scope, .. } => {
                let (barrier, group, allowed) = match scope {
                    BarrierScope::Threadgroup => ("threadgroup_barrier", "threadgroup", Uniformity::Threadgroup),
                    BarrierScope::Simdgroup => ("simdgroup_barrier", "SIMD group", Uniformity::Simdgroup),
                };
                if ctx.uniformity > allowed && self.check_barrier_uniformity {
                    let cause = match ctx.uniformity {
                        Uniformity::Simdgroup => "a value that differs between SIMD groups (simdgroup index or a SIMD-group function result)",
                        _ => THREAD_DEPENDENT,
                    };
                    return Err(self.err(ValidationErrorKind::NonUniformBarrier { barrier, group, cause: cause.into() }));
                }
            }
        }
        Ok(())
    }

    /// Checks a loop body; the body runs under control at least as divergent as
    /// `trip` (how uniform the trip count is). Iterates twice so values carried
    /// around the loop reach their final uniformity.
    fn loop_body(
        &mut self,
        body: &Block,
        state: &mut FlowState,
        ctx: Ctx,
        trip: Uniformity,
        cond: Option<&Expr>,
    ) -> Result<(), ValidationError> {
        let outer_loop_exited = state.loop_exited;
        let mut trip = trip;
        let mut exit_state = state.clone();
        for _ in 0..2 {
            let inner = Ctx { uniformity: ctx.uniformity.max(trip), loop_depth: ctx.loop_depth + 1 };
            let mut body_state = state.clone();
            body_state.loop_exited = Uniformity::Threadgroup;
            body_state.terminated = false;
            self.block(body, Branch::Loop, &mut body_state, inner)?;
            // Divergent break/continue makes later iterations divergent too.
            trip = trip.max(body_state.loop_exited);
            if let Some(cond) = cond {
                trip = trip.max(self.expr(cond, &body_state)?.1);
            }
            body_state.terminated = false;
            // Variables assigned in the body are not definitely assigned after
            // the loop (it may run zero times), but their uniformity carries.
            let assigned_before = state.assigned.clone();
            state.join(&body_state);
            state.assigned = assigned_before;
            exit_state = state.clone();
        }
        *state = exit_state;
        state.loop_exited = outer_loop_exited;
        // Variables written in a loop with a divergent trip count differ per thread.
        if trip > ctx.uniformity {
            for var in crate::visit::assigned_in(body) {
                let u = &mut state.var_uniformity[var.0 as usize];
                *u = (*u).max(trip);
            }
        }
        Ok(())
    }

    fn define(&mut self, var: VarId, uni: Uniformity, state: &mut FlowState) {
        state.assigned[var.0 as usize] = true;
        state.var_uniformity[var.0 as usize] = uni;
    }

    fn atomic_result(&mut self, var: VarId, elem: Type, state: &mut FlowState) -> Result<(), ValidationError> {
        let local = self.var(var)?;
        if local.ty != elem {
            return Err(self.err(ValidationErrorKind::AssignType {
                target: local.name.clone(),
                expected: local.ty,
                found: elem,
            }));
        }
        self.define(var, Uniformity::Thread, state);
        Ok(())
    }

    fn var(&self, var: VarId) -> Result<&'k Local, ValidationError> {
        self.kernel.locals.get(var.0 as usize).ok_or_else(|| {
            self.err(ValidationErrorKind::DanglingId { what: "local", index: var.0, count: self.kernel.locals.len() })
        })
    }

    fn condition(&mut self, cond: &Expr, state: &FlowState) -> Result<Uniformity, ValidationError> {
        let (ty, uni) = self.expr(cond, state)?;
        if ty != Type::BOOL {
            return Err(self.err(ValidationErrorKind::ConditionType { found: ty }));
        }
        Ok(uni)
    }

    fn expect_expr(
        &mut self,
        e: &Expr,
        expected: Type,
        what: &str,
        state: &FlowState,
    ) -> Result<(Type, Uniformity), ValidationError> {
        let (ty, uni) = self.expr(e, state)?;
        if ty != expected {
            return Err(self.err(ValidationErrorKind::AssignType { target: what.into(), expected, found: ty }));
        }
        Ok((ty, uni))
    }

    /// Checks an access to `mem[index]`; returns the element type and the
    /// uniformity of the index.
    fn memory_access(
        &mut self,
        mem: Memory,
        index: &Expr,
        state: &FlowState,
        write: bool,
    ) -> Result<(Type, Uniformity), ValidationError> {
        let elem = self.memory_elem(mem, write)?;
        let (ity, uni) = self.expr(index, state)?;
        self.index_type(mem, ity)?;
        Ok((elem, uni))
    }

    /// An index into `mem` must be a scalar integer.
    fn index_type(&self, mem: Memory, ity: Type) -> Result<(), ValidationError> {
        if ity.is_vector() || !ity.elem().is_int() {
            return Err(self.err(ValidationErrorKind::IndexType { memory: self.kernel.memory_name(mem).into(), found: ity }));
        }
        Ok(())
    }

    /// The element type of memory `mem` (recording a write).
    fn memory_elem(&mut self, mem: Memory, write: bool) -> Result<Type, ValidationError> {
        Ok(match mem {
            Memory::Buffer(p) => {
                let param = self.kernel.params.get(p.0 as usize).ok_or_else(|| {
                    self.err(ValidationErrorKind::DanglingId { what: "parameter", index: p.0, count: self.kernel.params.len() })
                })?;
                match param.kind {
                    ParamKind::Buffer { elem, access } => {
                        if write {
                            if access == Access::Read {
                                return Err(self.err(ValidationErrorKind::WriteToReadOnly { buffer: param.name.clone() }));
                            }
                            self.info.written_buffers.insert(p);
                        }
                        elem
                    }
                    ParamKind::Value { .. } => {
                        return Err(self.err(ValidationErrorKind::NotAMemory { name: param.name.clone(), what: "a by-value parameter" }))
                    }
                    ParamKind::Texture { .. } => {
                        return Err(self.err(ValidationErrorKind::NotAMemory { name: param.name.clone(), what: "a texture (read it with read(), write it with write())" }))
                    }
                }
            }
            Memory::Threadgroup(t) => {
                self.kernel
                    .threadgroup_arrays
                    .get(t.0 as usize)
                    .ok_or_else(|| {
                        self.err(ValidationErrorKind::DanglingId {
                            what: "threadgroup array",
                            index: t.0,
                            count: self.kernel.threadgroup_arrays.len(),
                        })
                    })?
                    .elem
            }
            Memory::Thread(t) => {
                self.kernel
                    .thread_arrays
                    .get(t.0 as usize)
                    .ok_or_else(|| {
                        self.err(ValidationErrorKind::DanglingId {
                            what: "per-thread array",
                            index: t.0,
                            count: self.kernel.thread_arrays.len(),
                        })
                    })?
                    .elem
            }
        })
    }

    /// Refuses a per-thread array given to `op`, which takes device or
    /// threadgroup memory only.
    fn shared_memory(&self, mem: Memory, op: &'static str) -> Result<(), ValidationError> {
        match mem {
            Memory::Thread(_) => Err(self.err(ValidationErrorKind::ThreadArrayUse { array: self.kernel.memory_name(mem).into(), op })),
            Memory::Buffer(_) | Memory::Threadgroup(_) => Ok(()),
        }
    }

    /// Parameter `tex`, which must be a texture, with its texel type and access.
    fn texture(&self, tex: ParamId) -> Result<(&'k Param, Scalar, TextureAccess), ValidationError> {
        let param = self.kernel.params.get(tex.0 as usize).ok_or_else(|| {
            self.err(ValidationErrorKind::DanglingId { what: "parameter", index: tex.0, count: self.kernel.params.len() })
        })?;
        match param.kind {
            ParamKind::Texture { texel, access } => Ok((param, texel, access)),
            _ => Err(self.err(ValidationErrorKind::NotATexture { name: param.name.clone() })),
        }
    }

    fn atomic_memory(&mut self, mem: Memory, index: &Expr, state: &FlowState, op: AtomicOp) -> Result<Type, ValidationError> {
        let (elem, _) = self.memory_access(mem, index, state, true)?;
        self.shared_memory(mem, "an atomic operation")?;
        let ok = match elem {
            Type::I32 | Type::U32 => true,
            Type::F32 => matches!(op, AtomicOp::Add | AtomicOp::Sub | AtomicOp::Exchange),
            _ => false,
        };
        if !ok {
            return Err(self.err(ValidationErrorKind::AtomicType { memory: self.kernel.memory_name(mem).into(), elem }));
        }
        self.info.atomic_memories.insert(mem);
        Ok(elem)
    }

    /// Type and uniformity of an expression.
    fn expr(&mut self, e: &Expr, state: &FlowState) -> Result<(Type, Uniformity), ValidationError> {
        use ValidationErrorKind as K;
        let typed = match e {
            Expr::Literal(lit) => {
                check_literal(lit).map_err(|k| self.err(k))?;
                (Type::scalar(lit.ty), Uniformity::Threadgroup)
            }
            Expr::Param(p) => {
                let param = self.kernel.params.get(p.0 as usize).ok_or_else(|| {
                    self.err(K::DanglingId { what: "parameter", index: p.0, count: self.kernel.params.len() })
                })?;
                match param.kind {
                    ParamKind::Value { ty } => (ty, Uniformity::Threadgroup),
                    ParamKind::Buffer { elem, .. } => {
                        return Err(self.err(K::InvalidOperand { op: format!("use of buffer `{}` as a value", param.name), ty: elem }))
                    }
                    ParamKind::Texture { texel, .. } => {
                        return Err(self.err(K::InvalidOperand {
                            op: format!("use of texture `{}` as a value (read a texel with read())", param.name),
                            ty: Type::vector(texel, 4),
                        }))
                    }
                }
            }
            Expr::Spec(s) => {
                let spec = self.kernel.spec_constants.get(s.0 as usize).ok_or_else(|| {
                    self.err(K::DanglingId { what: "specialisation constant", index: s.0, count: self.kernel.spec_constants.len() })
                })?;
                (Type::scalar(spec.ty), Uniformity::Threadgroup)
            }
            Expr::Var(v) => {
                let local = self.var(*v)?;
                if !state.assigned[v.0 as usize] {
                    return Err(self.err(K::UseBeforeAssign { var: local.name.clone() }));
                }
                (local.ty, state.var_uniformity[v.0 as usize])
            }
            Expr::Builtin(b) => (b.ty(), b.uniformity()),
            Expr::Load { mem, index } => {
                let (elem, uni) = self.memory_access(*mem, index, state, false)?;
                // Each thread's array holds its own values.
                (elem, if matches!(mem, Memory::Thread(_)) { Uniformity::Thread } else { uni })
            }
            Expr::DimCheck { mem, index, size, .. } => {
                self.memory_elem(*mem, false)?;
                let (it, iu) = self.expr(index, state)?;
                let (st, _) = self.expr(size, state)?;
                // The value is the index: its uniformity is the index's.
                (typing::dim_check(self.kernel.memory_name(*mem), it, st).map_err(|k| self.err(k))?, iu)
            }
            Expr::Unary { op, arg } => {
                let (ty, u) = self.expr(arg, state)?;
                (typing::unary(*op, ty).map_err(|k| self.err(k))?, u)
            }
            Expr::Binary { op, lhs, rhs } => {
                let (lt, lu) = self.expr(lhs, state)?;
                let (rt, ru) = self.expr(rhs, state)?;
                (typing::binary(*op, lt, rt).map_err(|k| self.err(k))?, lu.max(ru))
            }
            Expr::Call { func, precision, args } => self.call(*func, *precision, args, state)?,
            Expr::Cast { to, arg } => {
                let (from, u) = self.expr(arg, state)?;
                (typing::cast(from, *to).map_err(|k| self.err(k))?, u)
            }
            Expr::Bitcast { to, arg } => {
                let (from, u) = self.expr(arg, state)?;
                (typing::bitcast(from, *to).map_err(|k| self.err(k))?, u)
            }
            Expr::Vector { ty, components } => {
                typing::vector_shape(*ty, components.len()).map_err(|k| self.err(k))?;
                let mut uni = Uniformity::Threadgroup;
                let mut types = Vec::with_capacity(components.len());
                for c in components {
                    let (ct, cu) = self.expr(c, state)?;
                    types.push(ct);
                    uni = uni.max(cu);
                }
                (typing::vector(*ty, &types).map_err(|k| self.err(k))?, uni)
            }
            Expr::Extract { arg, index } => {
                let (ty, u) = self.expr(arg, state)?;
                (typing::extract(ty, *index).map_err(|k| self.err(k))?, u)
            }
            Expr::MatrixFill { ty, value, .. } => {
                let (vt, vu) = self.expr(value, state)?;
                if vu > Uniformity::Simdgroup {
                    return Err(self.err(ValidationErrorKind::NonUniformMatrix {
                        op: "make_filled_simdgroup_matrix",
                        cause: "a fill value that differs between lanes (the matrix is one value of the whole SIMD group)".into(),
                    }));
                }
                (typing::matrix_fill(*ty, vt).map_err(|k| self.err(k))?, Uniformity::Simdgroup)
            }
            Expr::MatrixLoad { ty, mem, offset, stride, .. } => {
                self.matrix_access("simdgroup_load", *ty, *mem, offset, stride, state)?;
                (Type::Matrix(*ty), Uniformity::Simdgroup)
            }
            Expr::MatrixLoadQuantized { ty, code, layout, words, offset, stride, scales, scale_offset } => {
                let op = "simdgroup_load_quantized";
                let (words_elem, scales_elem) = (self.memory_elem(*words, false)?, self.memory_elem(*scales, false)?);
                self.shared_memory(*words, op)?;
                self.shared_memory(*scales, op)?;
                let mut uniformity = Uniformity::Threadgroup;
                let mut index_types = [Type::U32; 3];
                for (slot, (e, mem)) in index_types.iter_mut().zip([(offset, *words), (stride, *words), (scale_offset, *scales)]) {
                    let (t, u) = self.expr(e, state)?;
                    self.index_type(mem, t)?;
                    *slot = t;
                    uniformity = uniformity.max(u);
                }
                let memories = [(self.kernel.memory_name(*words), words_elem), (self.kernel.memory_name(*scales), scales_elem)];
                typing::matrix_quantized(*ty, *code, *layout, memories, index_types).map_err(|k| self.err(k))?;
                self.matrix_address_uniform(op, uniformity)?;
                (Type::Matrix(*ty), Uniformity::Simdgroup)
            }
            Expr::MatrixMultiply { a, b, acc } => {
                let (at, _) = self.expr(a, state)?;
                let (bt, _) = self.expr(b, state)?;
                let ct = match acc {
                    Some(c) => Some(self.expr(c, state)?.0),
                    None => None,
                };
                (typing::matrix_multiply(at, bt, ct).map_err(|k| self.err(k))?, Uniformity::Simdgroup)
            }
            Expr::MatrixElement { matrix, index } => {
                let (mt, _) = self.expr(matrix, state)?;
                (typing::matrix_element(mt, *index).map_err(|k| self.err(k))?, Uniformity::Thread)
            }
            Expr::MatrixCoord { ty, index, .. } => (typing::matrix_coord(*ty, *index).map_err(|k| self.err(k))?, Uniformity::Thread),
            Expr::TextureRead { tex, coord } => {
                let (param, texel, access) = self.texture(*tex)?;
                let (ct, _) = self.expr(coord, state)?;
                (typing::texture_read(&param.name, texel, access, ct).map_err(|k| self.err(k))?, Uniformity::Thread)
            }
            Expr::TextureSample { tex, sampler, uv } => {
                let (param, texel, access) = self.texture(*tex)?;
                let (ut, _) = self.expr(uv, state)?;
                let ty = typing::texture_sample(&param.name, texel, access, *sampler, ut).map_err(|k| self.err(k))?;
                let used = self.info.samplers.entry(*tex).or_default();
                if !used.contains(sampler) {
                    used.push(*sampler);
                }
                (ty, Uniformity::Thread)
            }
            Expr::TextureSize { tex, .. } => {
                self.texture(*tex)?;
                (Type::U32, Uniformity::Threadgroup)
            }
            Expr::CooperativeCapacity { tensor } => {
                self.coop(*tensor, "get_capacity")?;
                (Type::U32, Uniformity::Threadgroup)
            }
            Expr::CooperativeValid { tensor, index } => {
                self.coop(*tensor, "is_valid_element")?;
                self.slot_index("is_valid_element", index, state)?;
                (Type::BOOL, Uniformity::Thread)
            }
            Expr::CooperativeElement { tensor, index } => {
                let t = self.coop(*tensor, "cooperative_tensor[]")?;
                self.slot_index("cooperative_tensor[]", index, state)?;
                (Type::scalar(t.elem), Uniformity::Thread)
            }
            Expr::CooperativeCoord { tensor, index, dim } => {
                self.coop(*tensor, "get_multidimensional_index")?;
                self.slot_index("get_multidimensional_index", index, state)?;
                if *dim > 1 {
                    let problem = format!("coordinate {dim} does not exist: a cooperative tensor has 2 (0 the column, 1 the row)");
                    return Err(self.err(K::Cooperative { op: "get_multidimensional_index", problem }));
                }
                (Type::U32, Uniformity::Thread)
            }
        };
        self.note_type(typed.0);
        Ok(typed)
    }

    /// Records the optional features a value of type `ty` needs.
    fn note_type(&mut self, ty: Type) {
        if ty.elem() == Scalar::BF16 {
            self.info.features.insert(crate::Feature::Bfloat16);
        }
        if ty.is_matrix() {
            self.info.features.insert(crate::Feature::SimdgroupMatrix);
        }
    }

    /// The operands of a matrix load or store (`op` names which): memory,
    /// offset and stride (which must be the same in every lane of the SIMD
    /// group).
    fn matrix_access(
        &mut self,
        op: &'static str,
        ty: MatrixType,
        mem: Memory,
        offset: &Expr,
        stride: &Expr,
        state: &FlowState,
    ) -> Result<(), ValidationError> {
        let elem = self.memory_elem(mem, op == "simdgroup_store")?;
        self.shared_memory(mem, op)?;
        let (offset_ty, ou) = self.expr(offset, state)?;
        self.index_type(mem, offset_ty)?;
        let (stride_ty, su) = self.expr(stride, state)?;
        typing::matrix_memory(op, ty, self.kernel.memory_name(mem), elem, offset_ty, stride_ty).map_err(|k| self.err(k))?;
        self.matrix_address_uniform(op, ou.max(su))
    }

    /// A SIMD-group matrix operation's addresses (offsets, strides) must be
    /// the same in every lane: each lane's share is addressed by the
    /// operation itself. `uniformity` is theirs, combined.
    fn matrix_address_uniform(&self, op: &'static str, uniformity: Uniformity) -> Result<(), ValidationError> {
        if uniformity > Uniformity::Simdgroup {
            return Err(self.err(ValidationErrorKind::NonUniformMatrix {
                op,
                cause: "an offset or stride that differs between lanes (each lane's share is addressed by the operation itself)".into(),
            }));
        }
        Ok(())
    }

    fn call(&mut self, func: Intrinsic, precision: Precision, args: &[Expr], state: &FlowState) -> Result<(Type, Uniformity), ValidationError> {
        if args.len() != func.arity() {
            return Err(self.err(ValidationErrorKind::ArgumentCount { func: func.name(), expected: func.arity(), found: args.len() }));
        }
        let mut types = Vec::with_capacity(args.len());
        let mut uni = Uniformity::Threadgroup;
        for (i, a) in args.iter().enumerate() {
            let (t, u) = self.expr(a, state)?;
            // Under control flow that differs between lanes, a local
            // assigned there counts as per-thread although the active lanes
            // may agree on it; the rule holds where the flow is uniform over
            // the SIMD group.
            if let Some((operand, fix)) = typing::simd_uniform_operand(func, i) {
                if u > Uniformity::Simdgroup && self.control <= Uniformity::Simdgroup {
                    return Err(self.err(ValidationErrorKind::NonUniformOperand {
                        func: func.name(),
                        operand,
                        cause: THREAD_DEPENDENT.into(),
                        fix,
                    }));
                }
            }
            types.push(t);
            uni = uni.max(u);
        }
        if func.is_simd() {
            self.info.uses_simd_functions = true;
        }
        let ty = typing::call(func, &types).map_err(|k| self.err(k))?;
        typing::precision(func, precision, &types).map_err(|k| self.err(k))?;
        Ok((ty, typing::call_uniformity(func, uni)))
    }
}

/// What a tensor view's values are, in the message of one that differs
/// between the threads of a scope.
const VIEW_VALUES: &str = "a view's offset, extent or stride";

/// Cooperative operations ([`crate::cooperative`]).
impl<'k> Validator<'k> {
    /// Cooperative tensor `id`, which must exist.
    fn coop(&self, id: crate::cooperative::CoopId, op: &'static str) -> Result<&'k crate::cooperative::CooperativeTensor, ValidationError> {
        self.kernel.cooperative_tensors.get(id.0 as usize).ok_or_else(|| {
            let _ = op;
            self.err(ValidationErrorKind::DanglingId { what: "cooperative tensor", index: id.0, count: self.kernel.cooperative_tensors.len() })
        })
    }

    /// A slot index: a u32.
    fn slot_index(&mut self, op: &'static str, index: &Expr, state: &FlowState) -> Result<Uniformity, ValidationError> {
        let (ty, uni) = self.expr(index, state)?;
        if ty != Type::U32 {
            return Err(self.err(ValidationErrorKind::Cooperative { op, problem: format!("a slot index must be u32, found {ty}") }));
        }
        Ok(uni)
    }

    /// A tensor view's memory and values: the element type (a scalar) and
    /// how uniform its five values are.
    fn view(&mut self, op: &'static str, view: &crate::ir::TensorView, write: bool, state: &FlowState) -> Result<(Scalar, Uniformity), ValidationError> {
        self.shared_memory(view.mem, op)?;
        let elem = self.memory_elem(view.mem, write)?;
        if elem.is_vector() || elem.is_matrix() {
            let problem = format!("`{}` holds {elem}; a tensor view takes memory of scalars", self.kernel.memory_name(view.mem));
            return Err(self.err(ValidationErrorKind::Cooperative { op, problem }));
        }
        let mut uni = Uniformity::Threadgroup;
        for (what, e) in ["offset", "x extent", "y extent", "x stride", "y stride"].into_iter().zip(view.exprs()) {
            let (ty, u) = self.expr(e, state)?;
            if ty != Type::U32 {
                let problem = format!("the {what} of the view of `{}` is {ty}; it must be u32", self.kernel.memory_name(view.mem));
                return Err(self.err(ValidationErrorKind::Cooperative { op, problem }));
            }
            uni = uni.max(u);
        }
        Ok((elem.elem(), uni))
    }

    /// `tile_copy`: a device buffer to threadgroup memory of one scalar
    /// type, the box's shape, the operands' types, uniform operands and
    /// control flow, and extents and pitch that are dispatch constants.
    fn tile_copy(&mut self, copy: &TileCopy, state: &FlowState, ctx: Ctx) -> Result<(), ValidationError> {
        typing::async_copy_memories(
            self.kernel.memory_name(copy.dst),
            matches!(copy.dst, Memory::Threadgroup(_)),
            self.kernel.memory_name(copy.src),
            matches!(copy.src, Memory::Buffer(_)),
        )
        .map_err(|k| {
            self.err(match k {
                ValidationErrorKind::AsyncCopy { problem } => ValidationErrorKind::TileCopy { problem },
                k => k,
            })
        })?;
        let dst_elem = self.memory_elem(copy.dst, true)?;
        let src_elem = self.memory_elem(copy.src, false)?;
        typing::tile_copy(dst_elem, src_elem, copy.rows, copy.cols).map_err(|k| self.err(k))?;
        // Any specialization constant's value stands for all: the rule
        // depends only on the expression's shape.
        let spec_defaults: Vec<Literal> = self.kernel.spec_constants.iter().map(|c| c.default).collect();
        let mut uni = Uniformity::Threadgroup;
        let (ty, u) = self.expr(&copy.barrier, state)?;
        typing::tile_barrier("tile_copy", ty).map_err(|k| self.err(k))?;
        uni = uni.max(u);
        let operands = [
            ("destination index", &copy.dst_index, Type::U32, false),
            ("row count", &copy.extents[0], Type::U32, true),
            ("column count", &copy.extents[1], Type::U32, true),
            ("pitch", &copy.pitch, Type::U32, true),
            ("first row", &copy.origin[0], Type::I32, false),
            ("first column", &copy.origin[1], Type::I32, false),
        ];
        for (what, e, expected, constant) in operands {
            let (ty, u) = self.expr(e, state)?;
            if ty != expected {
                return Err(self.err(ValidationErrorKind::TileCopy { problem: format!("takes its {what} as {expected}, found {ty}") }));
            }
            if constant && HostExpr::of(self.kernel, &spec_defaults, e).is_none() {
                return Err(self.err(ValidationErrorKind::TileCopy {
                    problem: format!(
                        "needs its {what} fixed for the whole dispatch: literals, specialization constants and by-value parameters under + - * / min max (the CUDA backend describes the source matrix to the copy engine before the launch)"
                    ),
                }));
            }
            uni = uni.max(u);
        }
        self.threadgroup_uniform("tile_copy", ctx.uniformity, (uni, "an operand"))
    }

    /// Control flow and operands of a tile copy or wait must be uniform over
    /// the threadgroup.
    fn threadgroup_uniform(&self, op: &'static str, flow: Uniformity, (values, operands): (Uniformity, &str)) -> Result<(), ValidationError> {
        let cause = if flow > Uniformity::Threadgroup {
            "it sits in control flow that depends on a value that differs between threads or SIMD groups".to_string()
        } else if values > Uniformity::Threadgroup {
            format!("{operands} differs between its threads")
        } else {
            return Ok(());
        };
        if !self.check_barrier_uniformity {
            return Ok(());
        }
        Err(self.err(ValidationErrorKind::NonUniformTileCopy { op, cause }))
    }

    /// Control flow and operands of a collective operation must be uniform
    /// over `scope`; `values` is how uniform its operands are, `operands`
    /// what they are (for the message).
    fn scope_uniform(&self, op: &'static str, scope: crate::cooperative::ExecutionScope, flow: Uniformity, (values, operands): (Uniformity, &str)) -> Result<(), ValidationError> {
        let allowed = if scope.is_threadgroup() { Uniformity::Threadgroup } else { Uniformity::Simdgroup };
        let cause = if flow > allowed {
            match flow {
                Uniformity::Simdgroup => "it sits in control flow that depends on a value that differs between SIMD groups",
                _ => "it sits in control flow that depends on a value that differs between threads",
            }
        } else if values > allowed {
            &format!("{operands} differs between its threads")
        } else {
            return Ok(());
        };
        if !self.check_barrier_uniformity {
            return Ok(());
        }
        Err(self.err(ValidationErrorKind::NonUniformCooperative { op, scope, cause: cause.into() }))
    }

    /// Records a threadgroup-wide scope; every one in a kernel must agree.
    fn note_scope(&mut self, op: &'static str, scope: crate::cooperative::ExecutionScope) -> Result<(), ValidationError> {
        crate::cooperative::scope(scope).map_err(|problem| self.err(ValidationErrorKind::Cooperative { op, problem }))?;
        if let crate::cooperative::ExecutionScope::Simdgroups(n) = scope {
            match self.info.cooperative_simdgroups {
                Some(m) if m != n => {
                    let problem = format!("execution_simdgroups({n}) here, execution_simdgroups({m}) elsewhere; a threadgroup has one SIMD-group count");
                    return Err(self.err(ValidationErrorKind::Cooperative { op, problem }));
                }
                _ => self.info.cooperative_simdgroups = Some(n),
            }
        }
        Ok(())
    }

    fn cooperative_stmt(&mut self, stmt: &StmtKind, state: &mut FlowState, ctx: Ctx) -> Result<(), ValidationError> {
        use crate::cooperative::{self as coop, OperandRelease, ReduceAxis};
        use crate::ir::Matmul2dLeft;
        let problem = |op: &'static str, problem: String| ValidationErrorKind::Cooperative { op, problem };
        match stmt {
            StmtKind::Matmul2d { desc, scope, left, right, dest, release } => {
                let op = "matmul2d";
                coop::descriptor(desc).map_err(|p| self.err(problem(op, p)))?;
                self.note_scope(op, *scope)?;
                let d = self.coop(*dest, op)?;
                if d.scope != *scope || (d.rows, d.cols) != (desc.m, desc.n) {
                    let p = format!(
                        "the destination `{}` is {} but the descriptor and scope make a cooperative_tensor<{}, {}, {}, {scope}>",
                        d.name,
                        d.type_text(),
                        d.elem,
                        desc.m,
                        desc.n
                    );
                    return Err(self.err(problem(op, p)));
                }
                let (right_elem, mut uni) = self.view(op, right, false, state)?;
                let left_elem = match left {
                    Matmul2dLeft::Tensor(view) => {
                        let (elem, u) = self.view(op, view, false, state)?;
                        uni = uni.max(u);
                        elem
                    }
                    Matmul2dLeft::Cooperative(id) => {
                        let l = self.coop(*id, op)?;
                        let k_ok = desc.k.is_none_or(|k| k == l.cols);
                        if l.scope != *scope || l.rows != desc.m || !k_ok || desc.transpose_left || l.cols % 8 != 0 {
                            let p = format!(
                                "the left operand `{}` ({}) must be an m×k tensor of the same scope, k a multiple of 8, not transposed (descriptor {}×{}×{}{})",
                                l.name,
                                l.type_text(),
                                desc.m,
                                desc.n,
                                desc.k.map_or("dynamic".to_string(), |k| k.to_string()),
                                if desc.transpose_left { ", transpose_left" } else { "" }
                            );
                            return Err(self.err(problem(op, p)));
                        }
                        if *id == *dest {
                            return Err(self.err(problem(op, format!("`{}` is both the left operand and the destination", l.name))));
                        }
                        l.elem
                    }
                };
                coop::matmul2d_types(left_elem, right_elem, d.elem).map_err(|p| self.err(problem(op, p)))?;
                let device_view = [Some(&**right), match left {
                    Matmul2dLeft::Tensor(view) => Some(&**view),
                    Matmul2dLeft::Cooperative(_) => None,
                }]
                .into_iter()
                .flatten()
                .find(|v| !matches!(v.mem, crate::Memory::Threadgroup(_)));
                if let (OperandRelease::SecondBarrier, Some(v)) = (release, device_view) {
                    let p = format!(
                        "an overlapped product (operands released at the second barrier) reads threadgroup memory only, but `{}` is not a threadgroup array",
                        self.kernel.memory_name(v.mem)
                    );
                    return Err(self.err(problem(op, p)));
                }
                self.scope_uniform(op, *scope, ctx.uniformity, (uni, VIEW_VALUES))?;
            }
            StmtKind::CooperativeLoad { tensor, src: view } | StmtKind::CooperativeStore { tensor, dst: view } => {
                let store = matches!(stmt, StmtKind::CooperativeStore { .. });
                let op = if store { "cooperative_tensor.store" } else { "cooperative_tensor.load" };
                let t = self.coop(*tensor, op)?;
                self.note_scope(op, t.scope)?;
                let (elem, uni) = self.view(op, view, store, state)?;
                if elem != t.elem {
                    let p = format!("`{}` holds {} but `{}` holds {elem}", t.name, t.elem, self.kernel.memory_name(view.mem));
                    return Err(self.err(problem(op, p)));
                }
                self.scope_uniform(op, t.scope, ctx.uniformity, (uni, VIEW_VALUES))?;
            }
            StmtKind::CooperativeSet { tensor, index, value } => {
                let t = self.coop(*tensor, "cooperative_tensor[]")?;
                self.slot_index("cooperative_tensor[]", index, state)?;
                let (ty, _) = self.expr(value, state)?;
                if ty != Type::scalar(t.elem) {
                    return Err(self.err(ValidationErrorKind::AssignType { target: format!("{}[]", t.name), expected: Type::scalar(t.elem), found: ty }));
                }
            }
            StmtKind::CooperativeDequantize { tensor, code: _, layout: _, words, offset, stride, scales, scale_offset, scale_stride, group_shift, biases } => {
                let op = "cooperative_dequantize";
                let t = self.coop(*tensor, op)?;
                self.note_scope(op, t.scope)?;
                if !matches!(t.elem, Scalar::F32 | Scalar::F16) {
                    return Err(self.err(problem(op, format!("`{}` holds {}; dequantized weights fill an f32 or f16 tensor", t.name, t.elem))));
                }
                let biases = biases.map(|b| (b, "biases", Type::F16));
                for (mem, what, expected) in [(*words, "packed words", Type::U32), (*scales, "scales", Type::F16)].into_iter().chain(biases) {
                    self.shared_memory(mem, op)?;
                    let elem = self.memory_elem(mem, false)?;
                    if elem != expected {
                        let p = format!("the {what} `{}` hold {elem}, not {expected}", self.kernel.memory_name(mem));
                        return Err(self.err(problem(op, p)));
                    }
                }
                let mut uni = Uniformity::Threadgroup;
                for (what, e) in [("word offset", offset), ("word stride", stride), ("scale offset", scale_offset), ("scale stride", scale_stride), ("group shift", group_shift)] {
                    let (ty, u) = self.expr(e, state)?;
                    if ty != Type::U32 {
                        return Err(self.err(problem(op, format!("the {what} is {ty}; it must be u32"))));
                    }
                    uni = uni.max(u);
                }
                self.scope_uniform(op, t.scope, ctx.uniformity, (uni, "an offset, stride or group shift"))?;
            }
            StmtKind::CooperativeReduce { src, dest, axis, op: _ } => {
                let op = axis.function();
                let (s, d) = (self.coop(*src, op)?, self.coop(*dest, op)?);
                self.note_scope(op, s.scope)?;
                let shape = match axis {
                    ReduceAxis::Rows => (s.rows, 1),
                    ReduceAxis::Columns => (1, s.cols),
                };
                if d.scope != s.scope || d.elem != s.elem || (d.rows, d.cols) != shape || src == dest {
                    let p = format!(
                        "`{}` ({}) reduces into a cooperative_tensor<{}, {}, {}, {}>, not `{}` ({})",
                        s.name,
                        s.type_text(),
                        s.elem,
                        shape.0,
                        shape.1,
                        s.scope,
                        d.name,
                        d.type_text()
                    );
                    return Err(self.err(problem(op, p)));
                }
                self.scope_uniform(op, s.scope, ctx.uniformity, (Uniformity::Threadgroup, ""))?;
            }
            StmtKind::CooperativeCombine { dest, src, op: _ } => {
                let op = "combine";
                let (d, s) = (self.coop(*dest, op)?, self.coop(*src, op)?);
                self.note_scope(op, d.scope)?;
                let fits = (s.rows, s.cols) == (d.rows, d.cols) || (s.rows, s.cols) == (d.rows, 1) || (s.rows, s.cols) == (1, d.cols);
                if d.scope != s.scope || d.elem != Scalar::F32 || s.elem != Scalar::F32 || !fits {
                    let p = format!(
                        "`{}` ({}) takes an f32 source of its scope shaped {}×{}, {}×1 or 1×{}, not `{}` ({})",
                        d.name,
                        d.type_text(),
                        d.rows,
                        d.cols,
                        d.rows,
                        d.cols,
                        s.name,
                        s.type_text()
                    );
                    return Err(self.err(problem(op, p)));
                }
                self.scope_uniform(op, d.scope, ctx.uniformity, (Uniformity::Threadgroup, ""))?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Why control flow is not uniform when a per-thread value decides it.
const THREAD_DEPENDENT: &str =
    "a value that differs between threads (thread position, lane, a loaded value, or an earlier return/break)";

/// The first operation in a statement that needs every lane of the SIMD
/// group (matrix loads, stores, fills and multiplies), by its MSL name.
/// The trip count of a loop unrolled at compile time, or why it has none:
/// a bound or step that is not a literal, or more trips than
/// [`crate::limits::MAX_UNROLLED_TRIPS`].
pub fn unrolled_trips(start: &Expr, end: &Expr, step: &Expr) -> Result<u64, String> {
    let constant = |e: &Expr, what: &str| match e {
        Expr::Literal(lit) if !matches!(lit.value, LiteralValue::Float(_) | LiteralValue::Bool(_)) => Ok(lit.value.as_i64() as i128),
        _ => Err(format!("its {what} must be a constant integer, and this one is computed at run time")),
    };
    let (start, end, step) = (constant(start, "start")?, constant(end, "end")?, constant(step, "step")?);
    if step <= 0 {
        return Err(format!("its step must be a positive constant, not {step}"));
    }
    let trips = if end > start { (end - start + step - 1) / step } else { 0 };
    let limit = crate::limits::MAX_UNROLLED_TRIPS;
    if trips > limit as i128 {
        return Err(format!("it may run at most {limit} times, and this one runs {trips}"));
    }
    Ok(trips as u64)
}

fn collective_matrix_op(stmt: &StmtKind) -> Option<&'static str> {
    if matches!(stmt, StmtKind::MatrixStore { .. }) {
        return Some("simdgroup_store");
    }
    let mut found = None;
    for e in stmt.exprs() {
        e.walk(&mut |x| {
            let op = match x {
                Expr::MatrixFill { .. } => Some("make_filled_simdgroup_matrix"),
                Expr::MatrixLoad { .. } => Some("simdgroup_load"),
                Expr::MatrixLoadQuantized { .. } => Some("simdgroup_load_quantized"),
                Expr::MatrixMultiply { .. } => Some("simdgroup_multiply_accumulate"),
                _ => None,
            };
            found = found.or(op);
        });
    }
    found
}

/// Checks that a literal's value has the right kind and fits its type.
/// The smallest magnitude that rounds to infinity in float type `t`: the
/// largest finite value plus half a unit in its last place (a tie rounds to
/// the even neighbour, which is infinity).
fn float_overflow_threshold(t: Scalar) -> f64 {
    // (mantissa bits, largest exponent)
    let (mantissa, max_exp) = match t {
        Scalar::F16 => (10, 15),
        Scalar::BF16 => (7, 127),
        Scalar::F32 => (23, 127),
        _ => return f64::INFINITY,
    };
    2f64.powi(max_exp + 1) - 2f64.powi(max_exp - mantissa - 1)
}

pub fn check_literal(lit: &Literal) -> Result<(), ValidationErrorKind> {
    let shown = match lit.value {
        LiteralValue::Bool(b) => b.to_string(),
        LiteralValue::Int(i) => i.to_string(),
        LiteralValue::UInt(u) => u.to_string(),
        LiteralValue::Float(f) if lit.ty.is_float() => format!("{f:e} (it rounds to infinity)"),
        LiteralValue::Float(f) => format!("{f:e} (a float)"),
    };
    let out_of_range = || ValidationErrorKind::LiteralRange { value: shown.clone(), ty: lit.ty };
    let ok = match (lit.ty, lit.value) {
        (Scalar::Bool, LiteralValue::Bool(_)) => true,
        (t, LiteralValue::Int(i)) if t.is_signed_int() => {
            let bits = t.size_bytes() * 8;
            bits == 64 || (i >= -(1i64 << (bits - 1)) && i < (1i64 << (bits - 1)))
        }
        (t, LiteralValue::UInt(u)) if t.is_unsigned_int() => {
            let bits = t.size_bytes() * 8;
            bits == 64 || u < (1u64 << bits)
        }
        // A finite value that rounds to infinity in its type does not fit
        // (infinity itself is a value every type holds).
        (t, LiteralValue::Float(f)) if t.is_float() => !f.is_finite() || f.abs() < float_overflow_threshold(t),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(out_of_range())
    }
}
