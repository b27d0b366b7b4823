//! Lowering of a validated kernel to the simulator's program: a flat list of
//! instructions over registers of 32 lanes.
//!
//! Vectors are scalarised: a value of width `w` occupies `w` consecutive
//! registers. Registers are laid out as builtins and by-value parameters
//! (filled when a SIMD group starts), then locals, then temporaries reused
//! statement by statement. Structured control flow becomes mask operations
//! (`If`/`Else`/`EndIf`, `LoopBegin`/`LoopTest`/`LoopContinue`/`LoopBack`/
//! `LoopEnd`) whose jump targets are resolved here.

use crate::layout::{unset_bits, Layout};
use enigma_ir::*;
use std::sync::Arc;

pub type Reg = u32;

/// A memory as the program sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemRef {
    /// Device buffer bound to parameter `n`.
    Buffer(u32),
    /// Threadgroup array `n`.
    Threadgroup(u32),
    /// Texture bound to parameter `n`.
    Texture(u32),
    /// Per-thread array `n` (in registers: [`ThreadSlot`]).
    Thread(u32),
}

/// Where a per-thread array lives: each element's components in
/// consecutive registers from `reg`, element `i` at `reg + i·width`; its
/// elements' written flags from cell `first_cell` of the SIMD group's
/// written masks.
#[derive(Clone, Copy, Debug)]
pub struct ThreadSlot {
    pub reg: Reg,
    pub len: u32,
    pub width: u32,
    pub first_cell: u32,
}

#[derive(Clone, Debug)]
pub enum Inst {
    Const { dst: Reg, bits: u64 },
    /// `dst = src` on active lanes.
    Copy { dst: Reg, src: Reg },
    Unary { op: UnaryOp, ty: Scalar, dst: Reg, a: Reg },
    Binary { op: BinaryOp, ty: Scalar, dst: Reg, a: Reg, b: Reg },
    Convert { from: Scalar, to: Scalar, dst: Reg, a: Reg },
    /// Reinterprets `from` (in registers `src..`) as `to` (in `dst..`).
    Bitcast { from: Type, to: Type, dst: Reg, src: Reg },
    /// `dst` (`elem`, a float type) = `code`'s value of the nibble at bit
    /// `shift` of `word` times the f16 `scale` plus the f16 `bias` where
    /// there is one, the exact value rounded once to `elem` (a quantized
    /// tile load's element, a dequantized cooperative tensor's slot); on
    /// every lane.
    Dequant { code: QuantCode, elem: Scalar, dst: Reg, word: Reg, shift: Reg, scale: Reg, bias: Option<Reg> },
    /// A per-component intrinsic (math, min/max, select, bit counts).
    Call { func: Intrinsic, precision: Precision, ty: Scalar, dst: Reg, args: [Reg; 3] },
    /// A SIMD-group function on one component.
    Simd { func: Intrinsic, ty: Scalar, dst: Reg, a: Reg, b: Reg },
    Load { mem: MemRef, elem: Type, dst: Reg, index: Reg, index_ty: Scalar },
    /// Fails (or, under the sanitizer, reports) each active lane whose
    /// `index` lies outside `0..size`: subscript `dim` of an access to `mem`.
    DimCheck { mem: MemRef, dim: u8, index: Reg, index_ty: Scalar, size: Reg, size_ty: Scalar },
    Store { mem: MemRef, elem: Type, src: Reg, index: Reg, index_ty: Scalar },
    /// `dst.. = array[index]` of a per-thread array, on active lanes.
    ThreadLoad { array: u32, dst: Reg, index: Reg, index_ty: Scalar },
    /// `array[index] = src..` of a per-thread array, on active lanes.
    ThreadStore { array: u32, src: Reg, index: Reg, index_ty: Scalar },
    Atomic { op: AtomicOp, mem: MemRef, ty: Scalar, index: Reg, index_ty: Scalar, value: Reg, dst: Option<Reg> },
    CompareExchange { mem: MemRef, ty: Scalar, index: Reg, index_ty: Scalar, expected: Reg, desired: Reg, dst: Option<Reg> },
    If { cond: Reg, else_pc: u32 },
    Else { end_pc: u32 },
    EndIf,
    LoopBegin { cont_pc: u32, exit_pc: u32 },
    LoopTest { cond: Reg },
    LoopContinue,
    LoopBack { head_pc: u32 },
    LoopEnd,
    Break,
    Continue,
    Return,
    /// `device`: the barrier's flags order device memory (`mem_device`);
    /// `texture`: they order textures (`mem_texture`).
    Barrier { scope: BarrierScope, device: bool, texture: bool },
    /// Each lane's own constant (a matrix element's row, column or
    /// diagonal flag in the reference lane map).
    LaneTable { dst: Reg, values: Box<[u64; 32]> },
    /// Fails the dispatch unless every lane of the SIMD group is active:
    /// `op` (a matrix operation) needs the whole SIMD group.
    WholeSimdgroup { op: &'static str },
    /// `dst = a·b (+ acc)` over the SIMD group's matrix registers (see
    /// `exec::matrix_multiply` for the order and precision).
    MatrixMultiply { a: Reg, b: Reg, acc: Option<Reg>, dst: Reg, a_ty: MatrixType, b_ty: MatrixType, out: MatrixType },
    /// `dst..dst+4 = tex.read(coord)` (the coordinate's x and y in `coord`,
    /// `coord + 1`), converted from the texture's format to `texel`.
    TexRead { tex: u32, texel: Scalar, dst: Reg, coord: Reg },
    /// `dst..dst+4 = tex.sample(sampler, uv)` (u and v in `uv`, `uv + 1`),
    /// filtered in f32 and converted to `texel`.
    TexSample { tex: u32, texel: Scalar, sampler: Sampler, dst: Reg, uv: Reg },
    /// `tex.write(src..src+4, coord)`, converted from `texel` to the format.
    TexWrite { tex: u32, texel: Scalar, src: Reg, coord: Reg },
    /// `async_copy`: on each active lane, `count` elements of `elem` from
    /// `src` to `dst` (zeros where `valid` is false, the source unread),
    /// at once; under the sanitizer the destination stays in flight until
    /// the lane's `AsyncWait` retires the copy's group.
    AsyncCopy { dst: MemRef, dst_index: Reg, dst_index_ty: Scalar, src: MemRef, src_index: Reg, src_index_ty: Scalar, elem: Type, count: u32, valid: Reg },
    /// `async_commit()`: closes each active lane's group of copies.
    AsyncCommit,
    /// `async_wait(pending)`: retires each active lane's older groups.
    AsyncWait { pending: u32 },
    /// `tex.fence()`: orders this thread's writes to the texture before its reads.
    TexFence { tex: u32 },
    /// `print(format, args)`: each active lane renders a line from the
    /// format's pieces and the values in `args` (see [`crate::print`]).
    Print { pieces: Arc<[enigma_ir::print_format::Piece]>, args: Vec<(Reg, Scalar)> },
    /// `device_fence()`: a sequentially consistent fence between the
    /// simulator's memory accesses (relaxed atomics), so that with an atomic
    /// it orders one threadgroup's writes before another's reads.
    DeviceFence,
    /// `dst = tex.get_width()` or `get_height()`.
    TexSize { tex: u32, dim: TextureDim, dst: Reg },
    /// `dst = table[t·capacity + index]` on each active lane, `t` the
    /// lane's thread in the scope of cooperative tensor `tensor` (its SIMD
    /// group's first thread plus the lane with a threadgroup scope, the lane
    /// alone with a SIMD-group one); `index` past the capacity is an error.
    CoopTable { dst: Reg, table: Arc<[u64]>, capacity: u32, threadgroup: bool, index: Reg, tensor: u32 },
    /// `dst = slot index` of cooperative tensor `tensor` (registers `base..`).
    CoopGet { dst: Reg, base: Reg, capacity: u32, index: Reg, tensor: u32 },
    /// `slot index = src` of cooperative tensor `tensor`.
    CoopSet { base: Reg, capacity: u32, index: Reg, src: Reg, tensor: u32 },
    /// An operation over a whole scope: with `threadgroup`, every SIMD group
    /// stops here as at a barrier and the scheduler runs it once they all
    /// have; otherwise the SIMD group runs it alone.
    Collective { op: Arc<Collective>, threadgroup: bool },
}

/// A builtin component the program reads, and the register it lives in.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinSlot {
    pub builtin: Builtin,
    pub reg: Reg,
}

/// Where each instruction came from, for error messages.
#[derive(Clone, Debug)]
pub struct Site {
    pub path: StmtPath,
    pub source: Option<SourceLoc>,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(src) = &self.source {
            write!(f, " ({src})")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct Program {
    pub code: Vec<Inst>,
    /// `sites[site_of[pc]]` is the statement instruction `pc` belongs to.
    pub site_of: Vec<u32>,
    pub sites: Vec<Site>,
    pub num_regs: u32,
    pub builtins: Vec<BuiltinSlot>,
    /// By-value parameter `param` occupies registers `reg..reg+width`.
    pub value_params: Vec<(ParamId, Reg)>,
    /// Word offset of each threadgroup array in the threadgroup's memory.
    pub tg_offsets_words: Vec<usize>,
    /// Size in bytes of each threadgroup array.
    pub tg_lens_bytes: Vec<usize>,
    pub tg_words: usize,
    /// Per-thread arrays, by index.
    pub thread_arrays: Vec<ThreadSlot>,
    /// Elements of all per-thread arrays together.
    pub thread_cells: u32,
    /// Names of buffers, textures, threadgroup and per-thread arrays, for messages.
    pub memory_names: std::collections::HashMap<MemRef, String>,
    /// Names of the cooperative tensors, for messages.
    pub coop_names: Vec<String>,
    /// Registers a SIMD group sets when it starts: `count` registers from
    /// `reg` to `bits` (cooperative tensors start unset).
    pub initial: Vec<(Reg, u32, u64)>,
}

impl Program {
    /// Whether instruction `pc` is an overlapped product (its operand reads
    /// are recorded again after the next barrier).
    pub fn is_tile_copy(&self, pc: u32) -> bool {
        matches!(self.code.get(pc as usize), Some(Inst::Collective { op, .. }) if matches!(**op, Collective::TileCopy(_)))
    }

    pub fn is_overlapped_product(&self, pc: u32) -> bool {
        match self.code.get(pc as usize) {
            Some(Inst::Collective { op, .. }) => matches!(**op, Collective::Matmul { overlapped: true, .. }),
            _ => false,
        }
    }
}

struct Lowering<'k> {
    kernel: &'k Kernel,
    spec: &'k [Literal],
    code: Vec<Inst>,
    site_of: Vec<u32>,
    sites: Vec<Site>,
    current_site: u32,
    builtins: Vec<BuiltinSlot>,
    value_params: Vec<(ParamId, Reg)>,
    local_regs: Vec<Reg>,
    /// First register of each cooperative tensor, and its layout.
    coop_regs: Vec<Reg>,
    layouts: &'k [Arc<Layout>],
    thread_arrays: Vec<ThreadSlot>,
    next_fixed: Reg,
    temp_base: Reg,
    temp_top: Reg,
    max_reg: Reg,
}

#[derive(Clone, Copy)]
struct Operand {
    reg: Reg,
    ty: Type,
}

impl Operand {
    /// Register of component `i`, splatting scalars.
    fn comp(self, i: u8) -> Reg {
        if self.ty.registers() == 1 {
            self.reg
        } else {
            self.reg + i as Reg
        }
    }
}

/// Lowers a kernel that passed validation, with its specialisation values
/// and the layout of each of its cooperative tensors.
pub fn lower(kernel: &Kernel, spec: &[Literal], layouts: &[Arc<Layout>]) -> Program {
    let mut l = Lowering {
        kernel,
        spec,
        code: vec![],
        site_of: vec![],
        sites: vec![],
        current_site: 0,
        builtins: vec![],
        value_params: vec![],
        local_regs: vec![],
        coop_regs: vec![],
        layouts,
        thread_arrays: vec![],
        next_fixed: 0,
        temp_base: 0,
        temp_top: 0,
        max_reg: 0,
    };
    // Fixed registers: the builtins the kernel reads, value parameters,
    // locals, per-thread arrays.
    for b in used_builtins(kernel) {
        let reg = l.next_fixed;
        l.next_fixed += b.ty().width() as Reg;
        l.builtins.push(BuiltinSlot { builtin: b, reg });
    }
    for (i, p) in kernel.params.iter().enumerate() {
        if let ParamKind::Value { ty } = p.kind {
            l.value_params.push((ParamId(i as u32), l.next_fixed));
            l.next_fixed += ty.width() as Reg;
        }
    }
    for local in &kernel.locals {
        l.local_regs.push(l.next_fixed);
        l.next_fixed += local.ty.registers();
    }
    let mut initial = vec![];
    for (t, layout) in kernel.cooperative_tensors.iter().zip(layouts) {
        l.coop_regs.push(l.next_fixed);
        initial.push((l.next_fixed, layout.capacity, unset_bits(t.elem)));
        l.next_fixed += layout.capacity;
    }
    let mut thread_cells = 0;
    for arr in &kernel.thread_arrays {
        let width = arr.elem.registers();
        l.thread_arrays.push(ThreadSlot { reg: l.next_fixed, len: arr.len, width, first_cell: thread_cells });
        l.next_fixed += arr.len * width;
        thread_cells += arr.len;
    }
    l.temp_base = l.next_fixed;
    l.temp_top = l.temp_base;
    l.max_reg = l.temp_base;
    let mut path = StmtPath::default();
    l.block(&kernel.body, Branch::Body, &mut path);
    let mut offsets = vec![];
    let mut words = 0usize;
    for arr in &kernel.threadgroup_arrays {
        offsets.push(words);
        words += (arr.size_bytes() as usize).div_ceil(4);
    }
    let memory_names = kernel
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mem = if p.kind.is_buffer_slot() { MemRef::Buffer(i as u32) } else { MemRef::Texture(i as u32) };
            (mem, p.name.clone())
        })
        .chain(kernel.threadgroup_arrays.iter().enumerate().map(|(i, t)| (MemRef::Threadgroup(i as u32), t.name.clone())))
        .chain(kernel.thread_arrays.iter().enumerate().map(|(i, t)| (MemRef::Thread(i as u32), t.name.clone())))
        .collect();
    Program {
        tg_lens_bytes: kernel.threadgroup_arrays.iter().map(|t| t.size_bytes() as usize).collect(),
        memory_names,
        code: l.code,
        site_of: l.site_of,
        sites: l.sites,
        num_regs: l.max_reg,
        builtins: l.builtins,
        value_params: l.value_params,
        tg_offsets_words: offsets,
        tg_words: words,
        coop_names: kernel.cooperative_tensors.iter().map(|t| t.name.clone()).collect(),
        initial,
        thread_arrays: l.thread_arrays,
        thread_cells,
    }
}

impl Lowering<'_> {
    fn emit(&mut self, inst: Inst) -> u32 {
        self.code.push(inst);
        self.site_of.push(self.current_site);
        self.code.len() as u32 - 1
    }

    fn pc(&self) -> u32 {
        self.code.len() as u32
    }

    fn temp(&mut self, regs: u32) -> Reg {
        let r = self.temp_top;
        self.temp_top += regs;
        self.max_reg = self.max_reg.max(self.temp_top);
        r
    }

    fn block(&mut self, block: &Block, branch: Branch, path: &mut StmtPath) {
        for (i, stmt) in block.iter().enumerate() {
            path.0.push((branch, i as u32));
            self.sites.push(Site { path: path.clone(), source: stmt.loc.clone() });
            self.current_site = self.sites.len() as u32 - 1;
            let saved_top = self.temp_top;
            self.stmt(stmt, path);
            self.temp_top = saved_top;
            path.0.pop();
        }
    }

    fn mem(mem: Memory) -> MemRef {
        match mem {
            Memory::Buffer(p) => MemRef::Buffer(p.0),
            Memory::Threadgroup(t) => MemRef::Threadgroup(t.0),
            Memory::Thread(t) => MemRef::Thread(t.0),
        }
    }

    fn elem_of(&self, mem: Memory) -> Type {
        match mem {
            Memory::Buffer(p) => match self.kernel.param(p).kind {
                ParamKind::Buffer { elem, .. } => elem,
                ParamKind::Value { ty } => ty,
                ParamKind::Texture { texel, .. } => Type::vector(texel, 4),
            },
            Memory::Threadgroup(t) => self.kernel.tg_array(t).elem,
            Memory::Thread(t) => self.kernel.thread_array(t).elem,
        }
    }

    fn copy_into(&mut self, dst: Reg, src: Operand) {
        for i in 0..src.ty.registers() {
            self.emit(Inst::Copy { dst: dst + i, src: src.comp(i as u8) });
        }
    }

    fn stmt(&mut self, stmt: &Stmt, path: &mut StmtPath) {
        match &stmt.kind {
            StmtKind::Matmul2d { .. }
            | StmtKind::CooperativeLoad { .. }
            | StmtKind::CooperativeStore { .. }
            | StmtKind::CooperativeSet { .. }
            | StmtKind::CooperativeDequantize { .. }
            | StmtKind::CooperativeReduce { .. }
            | StmtKind::CooperativeCombine { .. } => self.cooperative_stmt(&stmt.kind),
            StmtKind::TextureFence { tex } => {
                self.emit(Inst::TexFence { tex: tex.0 });
            }
            StmtKind::DeviceFence => {
                self.emit(Inst::DeviceFence);
            }
            StmtKind::Print { format, args } => {
                // Validation parsed the format and matched the values to it.
                let pieces: Arc<[_]> = enigma_ir::print_format::pieces(format).unwrap_or_default().into();
                let args = args
                    .iter()
                    .map(|a| {
                        let v = self.expr(a);
                        (v.reg, v.ty.elem())
                    })
                    .collect();
                self.emit(Inst::Print { pieces, args });
            }
            StmtKind::AsyncCopy { dst, dst_index, src, src_index, count, valid } => {
                let di = self.expr(dst_index);
                let si = self.expr(src_index);
                let v = self.expr(valid);
                let elem = self.elem_of(*dst);
                self.emit(Inst::AsyncCopy {
                    dst: Self::mem(*dst),
                    dst_index: di.reg,
                    dst_index_ty: di.ty.elem(),
                    src: Self::mem(*src),
                    src_index: si.reg,
                    src_index_ty: si.ty.elem(),
                    elem,
                    count: *count,
                    valid: v.reg,
                });
            }
            StmtKind::TileCopy(copy) => {
                let [barrier, dst_index, rows, cols, pitch, row, col] = copy.exprs().map(|e| self.snapshot(e).reg);
                let op = Collective::TileCopy(TileCopyRegs {
                    barrier,
                    dst: Self::mem(copy.dst),
                    dst_index,
                    src: Self::mem(copy.src),
                    elem: self.elem_of(copy.dst).elem(),
                    extents: [rows, cols],
                    pitch,
                    origin: [row, col],
                    rows: copy.rows,
                    cols: copy.cols,
                });
                self.emit(Inst::Collective { op: Arc::new(op), threadgroup: true });
            }
            StmtKind::TileWait { barrier } => {
                let barrier = self.snapshot(barrier).reg;
                self.emit(Inst::Collective { op: Arc::new(Collective::TileWait { barrier }), threadgroup: true });
            }
            StmtKind::AsyncCommit => {
                self.emit(Inst::AsyncCommit);
            }
            StmtKind::AsyncWait { pending } => {
                self.emit(Inst::AsyncWait { pending: *pending });
            }
            StmtKind::TextureWrite { tex, value, coord } => {
                let v = self.expr(value);
                let c = self.expr(coord);
                let texel = v.ty.elem();
                self.emit(Inst::TexWrite { tex: tex.0, texel, src: v.reg, coord: c.reg });
            }
            StmtKind::Assign { var, value } => {
                let v = self.expr(value);
                let dst = self.local_regs[var.0 as usize];
                self.copy_into(dst, v);
            }
            StmtKind::Store { mem, index, value } => {
                let i = self.expr(index);
                let v = self.expr(value);
                let elem = self.elem_of(*mem);
                match *mem {
                    Memory::Thread(t) => self.emit(Inst::ThreadStore { array: t.0, src: v.reg, index: i.reg, index_ty: i.ty.elem() }),
                    _ => self.emit(Inst::Store { mem: Self::mem(*mem), elem, src: v.reg, index: i.reg, index_ty: i.ty.elem() }),
                };
            }
            StmtKind::Atomic { op, mem, index, value, result } => {
                let i = self.expr(index);
                let v = self.expr(value);
                let dst = result.map(|r| self.local_regs[r.0 as usize]);
                let ty = self.elem_of(*mem).elem();
                self.emit(Inst::Atomic { op: *op, mem: Self::mem(*mem), ty, index: i.reg, index_ty: i.ty.elem(), value: v.reg, dst });
            }
            StmtKind::AtomicCompareExchange { mem, index, expected, desired, result } => {
                let i = self.expr(index);
                let e = self.expr(expected);
                let d = self.expr(desired);
                let dst = result.map(|r| self.local_regs[r.0 as usize]);
                let ty = self.elem_of(*mem).elem();
                self.emit(Inst::CompareExchange {
                    mem: Self::mem(*mem),
                    ty,
                    index: i.reg,
                    index_ty: i.ty.elem(),
                    expected: e.reg,
                    desired: d.reg,
                    dst,
                });
            }
            StmtKind::If { cond, then_body, else_body } => {
                // The mask instructions after a nested block belong to the `if`
                // itself (a lane waiting at them is reported at the `if`).
                let site = self.current_site;
                let c = self.expr(cond);
                let if_pc = self.emit(Inst::If { cond: c.reg, else_pc: 0 });
                self.block(then_body, Branch::Then, path);
                self.current_site = site;
                let else_pc = self.emit(Inst::Else { end_pc: 0 });
                self.block(else_body, Branch::Else, path);
                self.current_site = site;
                let end_pc = self.emit(Inst::EndIf);
                self.code[if_pc as usize] = Inst::If { cond: c.reg, else_pc };
                self.code[else_pc as usize] = Inst::Else { end_pc };
            }
            StmtKind::For { var, start, end, step, body, .. } => {
                let ty = self.kernel.local(*var).ty;
                let var_reg = self.local_regs[var.0 as usize];
                let s = self.expr(start);
                self.emit(Inst::Copy { dst: var_reg, src: s.reg });
                // `end` and `step` are evaluated once, into registers that
                // stay reserved for the whole loop.
                let e = self.snapshot(end);
                let st = self.snapshot(step);
                let begin = self.emit(Inst::LoopBegin { cont_pc: 0, exit_pc: 0 });
                let head = self.pc();
                let saved_top = self.temp_top;
                let c = self.temp(1);
                self.emit(Inst::Binary { op: BinaryOp::Lt, ty: ty.elem(), dst: c, a: var_reg, b: e.reg });
                self.emit(Inst::LoopTest { cond: c });
                self.temp_top = saved_top;
                let site = self.current_site;
                self.block(body, Branch::Loop, path);
                self.current_site = site;
                let cont = self.emit(Inst::LoopContinue);
                let t = self.temp(1);
                self.emit(Inst::Binary { op: BinaryOp::Add, ty: ty.elem(), dst: t, a: var_reg, b: st.reg });
                self.emit(Inst::Copy { dst: var_reg, src: t });
                self.temp_top = saved_top;
                self.emit(Inst::LoopBack { head_pc: head });
                let exit = self.emit(Inst::LoopEnd);
                self.code[begin as usize] = Inst::LoopBegin { cont_pc: cont, exit_pc: exit };
            }
            StmtKind::While { cond, body } => {
                let begin = self.emit(Inst::LoopBegin { cont_pc: 0, exit_pc: 0 });
                let head = self.pc();
                let saved_top = self.temp_top;
                let c = self.expr(cond);
                self.emit(Inst::LoopTest { cond: c.reg });
                self.temp_top = saved_top;
                let site = self.current_site;
                self.block(body, Branch::Loop, path);
                self.current_site = site;
                let cont = self.emit(Inst::LoopContinue);
                self.emit(Inst::LoopBack { head_pc: head });
                let exit = self.emit(Inst::LoopEnd);
                self.code[begin as usize] = Inst::LoopBegin { cont_pc: cont, exit_pc: exit };
            }
            StmtKind::Break => {
                self.emit(Inst::Break);
            }
            StmtKind::Continue => {
                self.emit(Inst::Continue);
            }
            StmtKind::Return => {
                self.emit(Inst::Return);
            }
            StmtKind::Barrier { scope, flags } => {
                let device = matches!(flags, MemFlags::Device | MemFlags::DeviceAndThreadgroup);
                let texture = *flags == MemFlags::Texture;
                self.emit(Inst::Barrier { scope: *scope, device, texture });
            }
            StmtKind::MatrixStore { value, mem, offset, stride, transpose } => {
                let v = self.expr(value);
                let Some(ty) = v.ty.as_matrix() else { return };
                self.emit(Inst::WholeSimdgroup { op: "simdgroup_store" });
                let elem = Type::scalar(ty.elem());
                for (i, index) in self.matrix_indices(ty, offset, stride, *transpose).into_iter().enumerate() {
                    self.emit(Inst::Store { mem: Self::mem(*mem), elem, src: v.reg + i as Reg, index, index_ty: Scalar::U32 });
                }
            }
        }
    }

    /// `table`'s entry for each lane's slot `index` of cooperative tensor `tensor`.
    fn coop_table(&mut self, tensor: u32, table: Arc<[u64]>, index: Reg) -> Reg {
        let dst = self.temp(1);
        let capacity = self.layouts[tensor as usize].capacity;
        let threadgroup = self.kernel.cooperative_tensors[tensor as usize].scope.is_threadgroup();
        self.emit(Inst::CoopTable { dst, table, capacity, threadgroup, index, tensor });
        dst
    }

    /// A view's five values, each in a register of its own.
    fn view_regs(&mut self, view: &TensorView) -> ViewRegs {
        let [offset, ex, ey, sx, sy] = view.exprs().map(|e| self.snapshot(e).reg);
        ViewRegs { mem: Self::mem(view.mem), elem: self.elem_of(view.mem).elem(), offset, extents: [ex, ey], strides: [sx, sy] }
    }

    fn held(&self, tensor: CoopId) -> Held {
        let t = self.kernel.cooperative(tensor);
        Held { base: self.coop_regs[tensor.0 as usize], elem: t.elem, layout: self.layouts[tensor.0 as usize].clone() }
    }

    /// `if (cond) { body }` as mask instructions.
    fn guarded(&mut self, cond: Reg, body: impl FnOnce(&mut Self)) {
        let if_pc = self.emit(Inst::If { cond, else_pc: 0 });
        body(self);
        let else_pc = self.emit(Inst::Else { end_pc: 0 });
        let end_pc = self.emit(Inst::EndIf);
        self.code[if_pc as usize] = Inst::If { cond, else_pc };
        self.code[else_pc as usize] = Inst::Else { end_pc };
    }

    fn cooperative_stmt(&mut self, kind: &StmtKind) {
        match kind {
            StmtKind::Matmul2d { desc, scope, left, right, dest, release } => {
                let left = match left {
                    Matmul2dLeft::Tensor(view) => LeftOperand::View(self.view_regs(view)),
                    Matmul2dLeft::Cooperative(id) => LeftOperand::Held(self.held(*id)),
                };
                let right = self.view_regs(right);
                let overlapped = *release == OperandRelease::SecondBarrier;
                let op = Collective::Matmul { desc: *desc, left, right, dest: self.held(*dest), overlapped };
                self.collective(op, *scope);
            }
            StmtKind::CooperativeReduce { src, dest, axis, op } => {
                let scope = self.kernel.cooperative(*src).scope;
                let op = Collective::Reduce { src: self.held(*src), dest: self.held(*dest), axis: *axis, op: *op };
                self.collective(op, scope);
            }
            StmtKind::CooperativeCombine { dest, src, op } => {
                let scope = self.kernel.cooperative(*dest).scope;
                let op = Collective::Combine { dest: self.held(*dest), src: self.held(*src), op: *op };
                self.collective(op, scope);
            }
            StmtKind::CooperativeSet { tensor, index, value } => {
                let i = self.expr(index);
                let v = self.expr(value);
                let (base, capacity) = (self.coop_regs[tensor.0 as usize], self.layouts[tensor.0 as usize].capacity);
                self.emit(Inst::CoopSet { base, capacity, index: i.reg, src: v.reg, tensor: tensor.0 });
            }
            StmtKind::CooperativeDequantize { tensor, code, layout, words, offset, stride, scales, scale_offset, scale_stride, group_shift, biases } => {
                self.cooperative_dequantize(*tensor, (*code, *layout), (*words, offset, stride), (*scales, scale_offset, scale_stride, *biases), group_shift);
            }
            StmtKind::CooperativeLoad { tensor, src: view } | StmtKind::CooperativeStore { tensor, dst: view } => {
                let store = matches!(kind, StmtKind::CooperativeStore { .. });
                let scope = self.kernel.cooperative(*tensor).scope;
                let v = self.view_regs(view);
                let held = self.held(*tensor);
                let layout = held.layout.clone();
                if !scope.is_threadgroup() {
                    self.emit(Inst::WholeSimdgroup { op: if store { "cooperative_tensor.store" } else { "cooperative_tensor.load" } });
                }
                let elem = Type::scalar(held.elem);
                let (slot, zero, index, inside) = (self.temp(1), self.temp(1), self.temp(1), self.temp(1));
                self.emit(Inst::Const { dst: zero, bits: 0 });
                for i in 0..layout.capacity {
                    self.emit(Inst::Const { dst: slot, bits: i as u64 });
                    let valid = self.coop_table(tensor.0, layout.table(|at| at.is_some() as u64), slot);
                    let row = self.coop_table(tensor.0, layout.table(|at| at.map_or(0, |(r, _)| r) as u64), slot);
                    let col = self.coop_table(tensor.0, layout.table(|at| at.map_or(0, |(_, c)| c) as u64), slot);
                    // Inside the view: valid, column < x extent, row < y extent.
                    self.emit(Inst::Binary { op: BinaryOp::Lt, ty: Scalar::U32, dst: inside, a: col, b: v.extents[0] });
                    self.emit(Inst::Binary { op: BinaryOp::And, ty: Scalar::Bool, dst: inside, a: inside, b: valid });
                    let below = self.temp(1);
                    self.emit(Inst::Binary { op: BinaryOp::Lt, ty: Scalar::U32, dst: below, a: row, b: v.extents[1] });
                    self.emit(Inst::Binary { op: BinaryOp::And, ty: Scalar::Bool, dst: inside, a: inside, b: below });
                    let reg = held.base + i;
                    if !store {
                        self.emit(Inst::Copy { dst: reg, src: zero });
                    }
                    self.guarded(inside, |l| {
                        l.emit(Inst::Binary { op: BinaryOp::Mul, ty: Scalar::U32, dst: index, a: col, b: v.strides[0] });
                        let t = l.temp(1);
                        l.emit(Inst::Binary { op: BinaryOp::Mul, ty: Scalar::U32, dst: t, a: row, b: v.strides[1] });
                        l.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: index, b: t });
                        l.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: index, b: v.offset });
                        if store {
                            l.emit(Inst::Store { mem: v.mem, elem, src: reg, index, index_ty: Scalar::U32 });
                        } else {
                            l.emit(Inst::Load { mem: v.mem, elem, dst: reg, index, index_ty: Scalar::U32 });
                        }
                    });
                }
            }
            _ => {}
        }
    }

    /// `StmtKind::CooperativeDequantize`, slot by slot: each thread's valid
    /// slot (r, c) loads its word, scale and bias (each a `Load` the
    /// sanitizer records) and decodes the nibble into the slot, the word and
    /// nibble where `quant_layout` puts K row c, N column r
    /// ([`QuantLayout::locate`]), the scale and bias where it puts group
    /// `c >> group_shift` of column r ([`QuantLayout::scale_index`]);
    /// invalid slots are left as they are.
    fn cooperative_dequantize(&mut self, tensor: CoopId, (code, quant_layout): (QuantCode, QuantLayout), words: (Memory, &Expr, &Expr), scales: (Memory, &Expr, &Expr, Option<Memory>), group_shift: &Expr) {
        let scope = self.kernel.cooperative(tensor).scope;
        let [offset, stride, scale_offset, scale_stride, shift] = [words.1, words.2, scales.1, scales.2, group_shift].map(|e| self.snapshot(e).reg);
        let held = self.held(tensor);
        let layout = held.layout.clone();
        if !scope.is_threadgroup() {
            self.emit(Inst::WholeSimdgroup { op: "cooperative_dequantize" });
        }
        let (word_ty, scale_ty) = (self.elem_of(words.0), self.elem_of(scales.0));
        let (slot, index, word, scale, value) = (self.temp(1), self.temp(1), self.temp(1), self.temp(1), self.temp(1));
        let bias = scales.3.map(|b| (b, self.elem_of(b), self.temp(1)));
        // Where slot (r, c)'s weight lies: K row c, N column r of the words.
        let located = |at: Option<(u32, u32)>| at.map_or((0, 0, 0), |(r, c)| quant_layout.locate(c, r));
        for i in 0..layout.capacity {
            self.emit(Inst::Const { dst: slot, bits: i as u64 });
            let valid = self.coop_table(tensor.0, layout.table(|at| at.is_some() as u64), slot);
            let row = self.coop_table(tensor.0, layout.table(|at| at.map_or(0, |(r, _)| r) as u64), slot);
            let col = self.coop_table(tensor.0, layout.table(|at| at.map_or(0, |(_, c)| c) as u64), slot);
            let unit_row = self.coop_table(tensor.0, layout.table(|at| located(at).0 as u64), slot);
            let word_in_row = self.coop_table(tensor.0, layout.table(|at| located(at).1 as u64), slot);
            let nibble_shift = self.coop_table(tensor.0, layout.table(|at| 4 * located(at).2 as u64), slot);
            self.guarded(valid, |l| {
                // The word: offset + unit_row·stride + word_in_row.
                l.emit(Inst::Binary { op: BinaryOp::Mul, ty: Scalar::U32, dst: index, a: unit_row, b: stride });
                l.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: index, b: word_in_row });
                l.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: index, b: offset });
                l.scalar_of_memory(words.0, word_ty, index, word);
                // The scale (and bias): scale_offset + (c >> group_shift)·scale_stride + r,
                // in columns scale_offset + r·scale_stride + (c >> group_shift).
                l.emit(Inst::Binary { op: BinaryOp::Shr, ty: Scalar::U32, dst: index, a: col, b: shift });
                let (major, minor) = if quant_layout == QuantLayout::Columns { (row, index) } else { (index, row) };
                // `scale` holds the product until the scale is loaded into it.
                l.emit(Inst::Binary { op: BinaryOp::Mul, ty: Scalar::U32, dst: scale, a: major, b: scale_stride });
                l.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: scale, b: minor });
                l.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: index, b: scale_offset });
                l.scalar_of_memory(scales.0, scale_ty, index, scale);
                if let Some((mem, elem, reg)) = bias {
                    l.scalar_of_memory(mem, elem, index, reg);
                }
                l.emit(Inst::Dequant { code, elem: held.elem, dst: value, word, shift: nibble_shift, scale, bias: bias.map(|b| b.2) });
                l.emit(Inst::Copy { dst: held.base + i, src: value });
            });
        }
    }

    /// A collective over `scope`.
    fn collective(&mut self, op: Collective, scope: ExecutionScope) {
        let threadgroup = scope.is_threadgroup();
        if !threadgroup {
            self.emit(Inst::WholeSimdgroup { op: op.name() });
        }
        self.emit(Inst::Collective { op: Arc::new(op), threadgroup });
    }

    /// A register holding each lane's own value of `f(lane)`.
    fn lane_table(&mut self, f: impl Fn(u32) -> u64) -> Reg {
        let dst = self.temp(1);
        let values: Box<[u64; 32]> = Box::new(std::array::from_fn(|lane| f(lane as u32)));
        self.emit(Inst::LaneTable { dst, values });
        dst
    }

    /// For each element of a lane's share of a `ty` tile, a register with its
    /// memory index: `offset + row·stride + col` (transposed: `offset +
    /// col·stride + row`), in the reference lane map.
    fn matrix_indices(&mut self, ty: MatrixType, offset: &Expr, stride: &Expr, transpose: bool) -> Vec<Reg> {
        let o = self.snapshot(offset);
        let s = self.snapshot(stride);
        (0..ty.per_lane())
            .map(|i| {
                let coord = move |lane: u32, column: bool| {
                    let (r, c) = ty.reference_coord(lane, i).unwrap_or((0, 0));
                    (if column != transpose { c } else { r }) as u64
                };
                let major = self.lane_table(move |lane| coord(lane, false));
                let minor = self.lane_table(move |lane| coord(lane, true));
                let t = self.temp(1);
                self.emit(Inst::Binary { op: BinaryOp::Mul, ty: Scalar::U32, dst: t, a: major, b: s.reg });
                self.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: t, a: t, b: minor });
                self.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: t, a: t, b: o.reg });
                t
            })
            .collect()
    }

    /// Loads scalar `index` of `mem` into `dst`: one element, or — for a
    /// memory of `stored` vectors — the whole vector `index / width` (the
    /// sanitizer sees an access to that element) and its component
    /// `index % width`.
    fn scalar_of_memory(&mut self, mem: Memory, stored: Type, index: Reg, dst: Reg) {
        let width = stored.width() as u32;
        if width == 1 {
            self.emit(Inst::Load { mem: Self::mem(mem), elem: stored, dst, index, index_ty: Scalar::U32 });
            return;
        }
        let w = self.temp(1);
        self.emit(Inst::Const { dst: w, bits: width as u64 });
        let (element, component) = (self.temp(1), self.temp(1));
        self.emit(Inst::Binary { op: BinaryOp::Div, ty: Scalar::U32, dst: element, a: index, b: w });
        self.emit(Inst::Binary { op: BinaryOp::Rem, ty: Scalar::U32, dst: component, a: index, b: w });
        let vector = self.temp(stored.registers());
        self.emit(Inst::Load { mem: Self::mem(mem), elem: stored, dst: vector, index: element, index_ty: Scalar::U32 });
        self.emit(Inst::Copy { dst, src: vector });
        let (c, is_c) = (self.temp(1), self.temp(1));
        for k in 1..width {
            self.emit(Inst::Const { dst: c, bits: k as u64 });
            self.emit(Inst::Binary { op: BinaryOp::Eq, ty: Scalar::U32, dst: is_c, a: component, b: c });
            self.emit(Inst::Call { func: Intrinsic::Select, precision: Precision::Default, ty: stored.elem(), dst, args: [dst, vector + k as Reg, is_c] });
        }
    }

    /// Evaluates `e` into a register of its own, so later assignments to a
    /// variable it reads do not change it (loop bounds are evaluated once).
    fn snapshot(&mut self, e: &Expr) -> Operand {
        let v = self.expr(e);
        let dst = self.temp(v.ty.registers());
        self.copy_into(dst, v);
        Operand { reg: dst, ty: v.ty }
    }

    fn literal_bits(lit: Literal) -> u64 {
        let bits = enigma_backend::args::literal_bits(lit);
        crate::ops::norm(lit.ty, if lit.ty.is_signed_int() { lit.value.as_i64() as u64 } else { bits })
    }

    fn expr(&mut self, e: &Expr) -> Operand {
        match e {
            Expr::CooperativeCapacity { tensor } => {
                let dst = self.temp(1);
                let capacity = self.layouts[tensor.0 as usize].capacity;
                self.emit(Inst::Const { dst, bits: capacity as u64 });
                Operand { reg: dst, ty: Type::U32 }
            }
            Expr::CooperativeValid { tensor, index } => {
                let i = self.expr(index);
                let table = self.layouts[tensor.0 as usize].table(|at| at.is_some() as u64);
                Operand { reg: self.coop_table(tensor.0, table, i.reg), ty: Type::BOOL }
            }
            Expr::CooperativeCoord { tensor, index, dim } => {
                let i = self.expr(index);
                let dim = *dim;
                let table = self.layouts[tensor.0 as usize].table(|at| at.map_or(0, |(r, c)| if dim == 0 { c } else { r }) as u64);
                Operand { reg: self.coop_table(tensor.0, table, i.reg), ty: Type::U32 }
            }
            Expr::CooperativeElement { tensor, index } => {
                let i = self.expr(index);
                let dst = self.temp(1);
                let (base, capacity) = (self.coop_regs[tensor.0 as usize], self.layouts[tensor.0 as usize].capacity);
                self.emit(Inst::CoopGet { dst, base, capacity, index: i.reg, tensor: tensor.0 });
                Operand { reg: dst, ty: Type::scalar(self.kernel.cooperative(*tensor).elem) }
            }
            Expr::Literal(lit) => {
                let dst = self.temp(1);
                self.emit(Inst::Const { dst, bits: Self::literal_bits(*lit) });
                Operand { reg: dst, ty: Type::scalar(lit.ty) }
            }
            Expr::Spec(s) => {
                let lit = self.spec[s.0 as usize];
                let dst = self.temp(1);
                self.emit(Inst::Const { dst, bits: Self::literal_bits(lit) });
                Operand { reg: dst, ty: Type::scalar(lit.ty) }
            }
            Expr::Param(p) => {
                let ty = match self.kernel.param(*p).kind {
                    ParamKind::Value { ty } => ty,
                    ParamKind::Buffer { elem, .. } => elem,
                    ParamKind::Texture { texel, .. } => Type::vector(texel, 4),
                };
                let reg = self.value_params.iter().find(|(id, _)| id == p).map(|(_, r)| *r).unwrap_or(0);
                Operand { reg, ty }
            }
            Expr::Var(v) => Operand { reg: self.local_regs[v.0 as usize], ty: self.kernel.local(*v).ty },
            Expr::Builtin(b) => {
                let slot = self.builtins.iter().find(|s| s.builtin == *b).copied();
                Operand { reg: slot.map(|s| s.reg).unwrap_or(0), ty: b.ty() }
            }
            Expr::Load { mem, index } => {
                let i = self.expr(index);
                let elem = self.elem_of(*mem);
                let dst = self.temp(elem.registers());
                match *mem {
                    Memory::Thread(t) => self.emit(Inst::ThreadLoad { array: t.0, dst, index: i.reg, index_ty: i.ty.elem() }),
                    _ => self.emit(Inst::Load { mem: Self::mem(*mem), elem, dst, index: i.reg, index_ty: i.ty.elem() }),
                };
                Operand { reg: dst, ty: elem }
            }
            Expr::DimCheck { mem, dim, index, size } => {
                let i = self.expr(index);
                let n = self.expr(size);
                let (index_ty, size_ty) = (i.ty.elem(), n.ty.elem());
                self.emit(Inst::DimCheck { mem: Self::mem(*mem), dim: *dim, index: i.reg, index_ty, size: n.reg, size_ty });
                i
            }
            Expr::Unary { op, arg } => {
                let a = self.expr(arg);
                let dst = self.temp(a.ty.registers());
                for i in 0..a.ty.width() {
                    self.emit(Inst::Unary { op: *op, ty: a.ty.elem(), dst: dst + i as Reg, a: a.comp(i) });
                }
                Operand { reg: dst, ty: a.ty }
            }
            Expr::Binary { op, lhs, rhs } => {
                let a = self.expr(lhs);
                let b = self.expr(rhs);
                // Validated IR: the rule holds; the fallback is never taken.
                let ty = enigma_ir::typing::binary(*op, a.ty, b.ty).unwrap_or(a.ty);
                let dst = self.temp(ty.registers());
                for i in 0..ty.width() {
                    self.emit(Inst::Binary { op: *op, ty: a.ty.elem(), dst: dst + i as Reg, a: a.comp(i), b: b.comp(i) });
                }
                Operand { reg: dst, ty }
            }
            Expr::Call { func, precision, args } => self.call(*func, *precision, args),
            Expr::Cast { to, arg } => {
                let a = self.expr(arg);
                let dst = self.temp(to.registers());
                for i in 0..to.width() {
                    self.emit(Inst::Convert { from: a.ty.elem(), to: to.elem(), dst: dst + i as Reg, a: a.comp(i) });
                }
                Operand { reg: dst, ty: *to }
            }
            Expr::Bitcast { to, arg } => {
                let a = self.expr(arg);
                let dst = self.temp(to.registers());
                self.emit(Inst::Bitcast { from: a.ty, to: *to, dst, src: a.reg });
                Operand { reg: dst, ty: *to }
            }
            Expr::Vector { ty, components } => {
                let comps: Vec<Operand> = components.iter().map(|c| self.expr(c)).collect();
                let dst = self.temp(ty.registers());
                for i in 0..ty.width() {
                    let src = if comps.len() == 1 { comps[0].reg } else { comps[i as usize].reg };
                    self.emit(Inst::Copy { dst: dst + i as Reg, src });
                }
                Operand { reg: dst, ty: *ty }
            }
            Expr::Extract { arg, index } => {
                let a = self.expr(arg);
                Operand { reg: a.reg + *index as Reg, ty: Type::scalar(a.ty.elem()) }
            }
            Expr::MatrixFill { ty, value, diagonal } => {
                let v = self.expr(value);
                self.emit(Inst::WholeSimdgroup { op: "make_filled_simdgroup_matrix" });
                let dst = self.temp(ty.per_lane());
                let zero = self.temp(1);
                self.emit(Inst::Const { dst: zero, bits: 0 });
                for i in 0..ty.per_lane() {
                    if *diagonal {
                        let ty = *ty;
                        let on_diagonal = self.lane_table(move |lane| ty.reference_coord(lane, i).is_some_and(|(r, c)| r == c) as u64);
                        let args = [zero, v.reg, on_diagonal];
                        self.emit(Inst::Call { func: Intrinsic::Select, precision: Precision::Default, ty: ty.elem(), dst: dst + i, args });
                    } else {
                        self.emit(Inst::Copy { dst: dst + i, src: v.reg });
                    }
                }
                Operand { reg: dst, ty: Type::Matrix(*ty) }
            }
            Expr::MatrixLoad { ty, mem, offset, stride, transpose } => {
                self.emit(Inst::WholeSimdgroup { op: "simdgroup_load" });
                let indices = self.matrix_indices(*ty, offset, stride, *transpose);
                let dst = self.temp(ty.per_lane());
                let stored = self.elem_of(*mem);
                for (i, index) in indices.into_iter().enumerate() {
                    self.scalar_of_memory(*mem, stored, index, dst + i as Reg);
                }
                Operand { reg: dst, ty: Type::Matrix(*ty) }
            }
            Expr::MatrixLoadQuantized { ty, code, layout, words, offset, stride, scales, scale_offset } => {
                self.emit(Inst::WholeSimdgroup { op: "simdgroup_load_quantized" });
                let (o, s, so) = (self.snapshot(offset), self.snapshot(stride), self.snapshot(scale_offset));
                let dst = self.temp(ty.per_lane());
                let (word_ty, scale_ty) = (self.elem_of(*words), self.elem_of(*scales));
                let (index, word, scale) = (self.temp(1), self.temp(1), self.temp(1));
                for i in 0..ty.per_lane() {
                    let (ty, layout) = (*ty, *layout);
                    let coord = move |lane| ty.reference_coord(lane, i).unwrap_or((0, 0));
                    // Element (r, c): nibble j of word offset + u·stride + w.
                    let place = move |lane| {
                        let (r, c) = coord(lane);
                        layout.locate(r, c)
                    };
                    let unit_row = self.lane_table(move |lane| place(lane).0 as u64);
                    let word_in_row = self.lane_table(move |lane| place(lane).1 as u64);
                    let column = self.lane_table(move |lane| coord(lane).1 as u64);
                    self.emit(Inst::Binary { op: BinaryOp::Mul, ty: Scalar::U32, dst: index, a: unit_row, b: s.reg });
                    self.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: index, b: word_in_row });
                    self.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: index, b: o.reg });
                    self.scalar_of_memory(*words, word_ty, index, word);
                    self.emit(Inst::Binary { op: BinaryOp::Add, ty: Scalar::U32, dst: index, a: so.reg, b: column });
                    self.scalar_of_memory(*scales, scale_ty, index, scale);
                    let shift = self.lane_table(move |lane| (4 * place(lane).2) as u64);
                    self.emit(Inst::Dequant { code: *code, elem: Scalar::F16, dst: dst + i, word, shift, scale, bias: None });
                }
                Operand { reg: dst, ty: Type::Matrix(*ty) }
            }
            Expr::MatrixMultiply { a, b, acc } => {
                let a = self.snapshot(a);
                let b = self.snapshot(b);
                let acc = acc.as_ref().map(|c| self.snapshot(c));
                self.emit(Inst::WholeSimdgroup { op: "simdgroup_multiply_accumulate" });
                let (Some(a_ty), Some(b_ty)) = (a.ty.as_matrix(), b.ty.as_matrix()) else { return a };
                let out = match acc.and_then(|c| c.ty.as_matrix()) {
                    Some(c) => c,
                    None => MatrixType::new(a_ty.elem(), a_ty.rows(), b_ty.cols()),
                };
                let dst = self.temp(out.per_lane());
                self.emit(Inst::MatrixMultiply { a: a.reg, b: b.reg, acc: acc.map(|c| c.reg), dst, a_ty, b_ty, out });
                Operand { reg: dst, ty: Type::Matrix(out) }
            }
            Expr::MatrixElement { matrix, index } => {
                let m = self.expr(matrix);
                Operand { reg: m.reg + *index as Reg, ty: Type::scalar(m.ty.elem()) }
            }
            Expr::TextureRead { tex, coord } => {
                let c = self.expr(coord);
                let texel = match self.kernel.param(*tex).kind {
                    ParamKind::Texture { texel, .. } => texel,
                    // Validated IR: `tex` is a texture; the fallback is never taken.
                    _ => Scalar::F32,
                };
                let dst = self.temp(4);
                self.emit(Inst::TexRead { tex: tex.0, texel, dst, coord: c.reg });
                Operand { reg: dst, ty: Type::vector(texel, 4) }
            }
            Expr::TextureSample { tex, sampler, uv } => {
                let c = self.expr(uv);
                let texel = match self.kernel.param(*tex).kind {
                    ParamKind::Texture { texel, .. } => texel,
                    // Validated IR: `tex` is a texture; the fallback is never taken.
                    _ => Scalar::F32,
                };
                let dst = self.temp(4);
                self.emit(Inst::TexSample { tex: tex.0, texel, sampler: *sampler, dst, uv: c.reg });
                Operand { reg: dst, ty: Type::vector(texel, 4) }
            }
            Expr::TextureSize { tex, dim } => {
                let dst = self.temp(1);
                self.emit(Inst::TexSize { tex: tex.0, dim: *dim, dst });
                Operand { reg: dst, ty: Type::U32 }
            }
            Expr::MatrixCoord { ty, index, column } => {
                let (ty, index, column) = (*ty, *index as u32, *column);
                let reg = self.lane_table(move |lane| {
                    let (r, c) = ty.reference_coord(lane, index).unwrap_or((0, 0));
                    (if column { c } else { r }) as u64
                });
                Operand { reg, ty: Type::U32 }
            }
        }
    }

    fn call(&mut self, func: Intrinsic, precision: Precision, args: &[Expr]) -> Operand {
        let ops: Vec<Operand> = args.iter().map(|a| self.expr(a)).collect();
        let types: Vec<Type> = ops.iter().map(|o| o.ty).collect();
        // Validated IR: the rule holds; the fallback is never taken.
        let ty = enigma_ir::typing::call(func, &types).unwrap_or(types.first().copied().unwrap_or(Type::BOOL));
        if func.is_simd() {
            let (a, b) = match ops.len() {
                0 => (Operand { reg: 0, ty: Type::BOOL }, None),
                1 => (ops[0], None),
                _ => (ops[0], Some(ops[1])),
            };
            let dst = self.temp(ty.registers());
            for i in 0..ty.width() {
                let b_reg = b.map(|b| b.reg).unwrap_or(0);
                self.emit(Inst::Simd { func, ty: a.ty.elem(), dst: dst + i as Reg, a: a.comp(i), b: b_reg });
            }
            return Operand { reg: dst, ty };
        }
        let dst = self.temp(ty.registers());
        // A classification's result is bool: the instruction takes its argument's type.
        let elem = if func.is_classification() { types[0].elem() } else { ty.elem() };
        for i in 0..ty.width() {
            let mut regs = [0; 3];
            for (slot, o) in regs.iter_mut().zip(&ops) {
                *slot = o.comp(i);
            }
            self.emit(Inst::Call { func, precision, ty: elem, dst: dst + i as Reg, args: regs });
        }
        Operand { reg: dst, ty }
    }
}

/// The builtins a kernel reads, in [`Builtin::ALL`] order.
fn used_builtins(kernel: &Kernel) -> Vec<Builtin> {
    let mut used = Vec::new();
    kernel.walk_exprs(|e| {
        if let Expr::Builtin(b) = e {
            used.push(*b)
        }
    });
    Builtin::ALL.into_iter().filter(|b| used.contains(b)).collect()
}

/// A tensor view's registers (each a u32, the same on every thread).
#[derive(Clone, Copy, Debug)]
pub struct ViewRegs {
    pub mem: MemRef,
    pub elem: Scalar,
    pub offset: Reg,
    pub extents: [Reg; 2],
    pub strides: [Reg; 2],
}

/// A cooperative tensor as an operand: its registers and layout.
#[derive(Clone, Debug)]
pub struct Held {
    pub base: Reg,
    pub elem: Scalar,
    pub layout: Arc<Layout>,
}

/// A product's left operand.
#[derive(Clone, Debug)]
pub enum LeftOperand {
    View(ViewRegs),
    Held(Held),
}

/// An operation over every thread of a scope at once.
#[derive(Clone, Debug)]
pub enum Collective {
    /// `overlapped`: the product's operands are released at the second
    /// threadgroup barrier after it (their reads recorded again at the next).
    Matmul { desc: Matmul2dDescriptor, left: LeftOperand, right: ViewRegs, dest: Held, overlapped: bool },
    Reduce { src: Held, dest: Held, axis: ReduceAxis, op: ReduceOp },
    /// `dest = op(dest, src)` per element, `src` of `dest`'s shape or m×1
    /// or 1×n (applied along rows or columns).
    Combine { dest: Held, src: Held, op: CombineOp },
    /// `tile_copy` (`tile_copy.rs`).
    TileCopy(TileCopyRegs),
    /// `tile_wait(barrier)`.
    TileWait { barrier: Reg },
}

/// A `tile_copy`'s operands: registers of its uniform values, and its box.
#[derive(Clone, Debug)]
pub struct TileCopyRegs {
    pub barrier: Reg,
    pub dst: MemRef,
    pub dst_index: Reg,
    pub src: MemRef,
    pub elem: Scalar,
    /// Rows and columns of the source matrix.
    pub extents: [Reg; 2],
    pub pitch: Reg,
    /// The box's first row and column (i32).
    pub origin: [Reg; 2],
    pub rows: u32,
    pub cols: u32,
}
