//! The GEMM kernels, top to bottom: [`gemm`] and [`qgemm`] build one
//! kernel from a configuration (prologue, main loop over K, epilogue),
//! with the epilogue's parts: the whole-tile store and the in-kernel sum
//! of K splits.

use super::operand::*;
use super::config::*;
use crate::library::quant::Format;
use crate::library::split::*;
use crate::library::*;
use enigma_analysis::tiles::BStaging;
use enigma_ir::{Access, AtomicOp, Kernel, MatrixType, MemFlags, QuantLayout, Type};

/// The GEMM kernel of `cfg` (see the module doc).
///
/// # Panics
/// When the tile's shape fails [`GemmConfig::check`]: plan through it first
/// (the threadgroup memory is the device's to check, there and when the
/// runtime compiles the kernel).
pub fn gemm(cfg: &GemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    build(cfg, cfg.name(), None)
}

/// The kernel of `cfg` named `name`: B of the input type, or with `packed`
/// 4-bit weights in a layout of packed words (see [`QgemmConfig`]).
pub(super) fn build(cfg: &GemmConfig, name: String, packed: Option<(Format, QuantLayout)>) -> Kernel {
    let (sm, sn) = (cfg.tile.tm / cfg.tile.sg_rows, cfg.tile.tn / cfg.tile.sg_cols);
    // Fragment-ordered weights decode a whole slice's B tile at once (its
    // 64-row unit), so A's tile spans the slice too.
    let step = match packed {
        Some((_, QuantLayout::Fragments)) => cfg.tile.tk,
        _ => cfg.k_step(),
    };
    let elem = cfg.input.scalar();
    let a_tile = MatrixType::new(elem, sm as u8, step as u8);
    let b_tile = MatrixType::new(elem, step as u8, sn as u8);
    let acc_tile = MatrixType::new(enigma_ir::Scalar::F32, sm as u8, sn as u8);
    let splits = cfg.splits.max(1);
    let mut k = KernelBuilder::new(name);
    let a = k.buffer("a", cfg.input.ty(1), Access::Read);
    let b = match packed {
        None => k.buffer("b", cfg.input.ty(1), Access::Read),
        Some(_) => k.buffer("b", Type::U32, Access::Read),
    };
    // With K split, `c` is the f32 workspace of partial products, unless
    // the kernel sums them (`ws` then, with the tickets after the other
    // parameters).
    let sums_here = splits > 1 && cfg.split_sum == SplitSum::LastThreadgroup;
    let c = k.buffer("c", if splits > 1 && !sums_here { Type::F32 } else { cfg.output.ty(1) }, Access::ReadWrite);
    let m = k.value("m", Type::U32);
    let n = k.value("n", Type::U32);
    let kk = k.value("k", Type::U32);
    // alpha and beta, or for packed weights the group size and its scales.
    let (scaling, scales) = match packed {
        None => (Some((k.value("alpha", Type::F32), k.value("beta", Type::F32))), None),
        Some(_) => (None, Some((k.value("group", Type::U32), k.buffer("scales", Type::F16, Access::Read)))),
    };
    let a4 = k.buffer("a4", cfg.input.ty(VEC as u8), Access::Read);
    let b_source = match (packed, scales) {
        (Some((format, layout)), Some((group, scales))) => Source::Packed { format, layout, words: b, scales, group },
        _ => Source::Values { scalar: b, vector: k.buffer("b4", cfg.input.ty(VEC as u8), Access::Read) },
    };
    let summed = sums_here.then(|| (k.buffer("ws", Type::F32, Access::ReadWrite), k.buffer("tickets", Type::U32, Access::ReadWrite)));
    // Where the threadgroup's own product goes: C, or its split's slice of
    // the f32 workspace.
    let partial = summed.map_or(c, |(ws, _)| ws);
    let [(a_rows, a_cols), (b_rows, b_cols)] = cfg.slices();
    let (lda, ldb) = (a_cols + PAD, b_cols + PAD);
    // Slices of 4-element vectors, written whole; the matrix loads read
    // their scalars (offsets and strides count elements).
    // With stages, stage s of a slice starts at element s · rows · ld.
    // Packed weights are dequantized into one B slice; with stages their
    // words and scales are staged raw (`GemmConfig::memory_bytes`).
    let b_stages = if packed.is_some() { 1 } else { cfg.stages };
    let a_s = k.threadgroup_array("a_slice", cfg.input.ty(VEC as u8), cfg.stages * a_rows * lda / VEC);
    // Without a dequantized slice (`GemmConfig::packed_staging`) the
    // operand's `staged` is the words, never read as values.
    let b_slice = packed.is_none() || cfg.packed_staging() == BStaging::Packed { dequantized_slice: true };
    let b_values = b_slice.then(|| k.threadgroup_array("b_slice", cfg.input.ty(VEC as u8), b_stages * b_rows * ldb / VEC));
    let b_raw = (packed.is_some() && cfg.stages > 1).then(|| {
        let (words, scales) = cfg.packed_stage_elems();
        (k.threadgroup_array("b_words", Type::U32, cfg.stages * words), k.threadgroup_array("b_scales", Type::F16, cfg.stages * scales))
    });
    let b_s = match (b_values, b_raw) {
        (Some(values), _) => values,
        (None, Some((words, _))) => words,
        (None, None) => unreachable!("a whole-tile kernel of packed weights stages their words"),
    };
    let tg = threadgroup_position_in_grid();
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let m0 = k.let_("m0", tg.y() * cfg.tile.tm);
    let n0 = k.let_("n0", tg.x() * cfg.tile.tn);
    // With K split, z numbers (batch, split) pairs; this threadgroup takes
    // the split's stretch of K, whole slices, and writes its partial
    // product to its own f32 slice of `c` (alpha and beta wait for the
    // reduction).
    let batch = k.let_("batch", tg.z() / splits);
    let split = k.let_("split", tg.z() % splits);
    let c_base = k.let_("c_base", tg.z() * m * n);
    let (k_begin, k_end) = split_range(&mut k, kk, split, splits, cfg.tile.tk);
    let sg_m = k.let_("sg_m", sg / cfg.tile.sg_cols * sm);
    let sg_n = k.let_("sg_n", sg % cfg.tile.sg_cols * sn);
    // The operands as stored: (rows, columns) of the matrix, the origin of
    // this threadgroup's slices along the axis that is not K.
    let a_op = Operand {
        name: "a",
        source: Source::Values { scalar: a, vector: a4 },
        staged: a_s,
        base: k.let_("a_base", batch * m * kk),
        shape: if cfg.trans_a { (kk, m) } else { (m, kk) },
        slice: (a_rows, a_cols),
        origin: m0,
        k_is_row: cfg.trans_a,
        raw: None,
    };
    let b_op = Operand {
        name: "b",
        source: b_source,
        staged: b_s,
        base: k.let_("b_base", batch * kk * n),
        shape: if cfg.trans_b { (n, kk) } else { (kk, n) },
        slice: (b_rows, b_cols),
        origin: n0,
        k_is_row: !cfg.trans_b,
        raw: b_raw,
    };
    let threads = cfg.threads();
    let stages = Stages { cfg, ops: [a_op, b_op], lid, sg_m, sg_n, a_tile, b_tile, step };
    let acc = k.var("acc", matrix_fill(acc_tile, 0.0f32));
    let split_tile = summed.map(|(ws, tickets)| SplitTile { cfg, c, ws, tickets, flag: a_s, m, n, m0, n0, batch, lid, scaling });
    if cfg.edges.whole_tiles() {
        // Only shapes the tile divides; any other would read past the
        // matrices, so it is left alone (the planner never sends one).
        let rows = if cfg.edges == Edges::RaggedRows { Ex::from(true) } else { (m % cfg.tile.tm).eq(0u32) };
        let divides = rows.and((n % cfg.tile.tn).eq(0u32)).and((kk % cfg.tile.tk).eq(0u32));
        k.if_(divides, |k| {
            k.if_(k_end.gt(k_begin), |k| stages.pipeline(k, acc, k_begin, k_end));
            let c_is_f32 = splits > 1 || cfg.output == DType::F32;
            let at = c_base + (m0 + sg_m) * n + n0 + sg_n;
            let own_scaling = scaling.filter(|_| splits == 1);
            let whole = |k: &mut KernelBuilder| store_whole_tile(k, acc, partial, c_is_f32, at, n, own_scaling, None);
            match cfg.edges == Edges::RaggedRows {
                true => k.if_else((m0 + cfg.tile.tm).le(m), whole, |k| store_whole_tile(k, acc, partial, c_is_f32, at, n, own_scaling, Some((m0 + sg_m, m)))),
                false => whole(k),
            }
            if let Some(tile) = &split_tile {
                tile.sum_if_last(k);
            }
        });
        return finish(k);
    }
    let held: Vec<Vec<Var>> = stages.ops.iter().map(|op| op.registers(&mut k, cfg, threads)).collect();
    // A threadgroup whose slices lie inside the matrices along M and N, with
    // vector-aligned rows, runs its whole K slices on vector loads and only
    // a last partial slice (K not a multiple of tk) element by element. Two
    // separate loops, so no register is written by both kinds of load.
    let whole_end = k.let_("whole_end", k_begin + (k_end - k_begin) / cfg.tile.tk * cfg.tile.tk);
    let interior = stages.ops.iter().map(|op| op.inside_across_k()).reduce(|x, y| x.and(y)).expect("two operands");
    let through_registers = |k: &mut KernelBuilder| {
        k.if_(whole_end.gt(k_begin), |k| stages.run(k, "whole_", &held, acc, k_begin, whole_end, true));
        k.if_(whole_end.lt(k_end), |k| stages.run(k, "tail_", &held, acc, whole_end, k_end, false));
    };
    let by_registers = |k: &mut KernelBuilder| {
        k.if_else(interior, through_registers, |k| k.if_(k_end.gt(k_begin), |k| stages.run(k, "edge_", &held, acc, k_begin, k_end, false)))
    };
    if cfg.stages == 1 {
        by_registers(&mut k);
    } else {
        // Rows of whole copies, inside the matrices across K (A's rows past
        // M copy zeros): the pipeline for the whole slices, the registers
        // for a last partial one (after a barrier: stage 0 may still be
        // read).
        let pipelined = stages.ops.iter().map(|op| op.copies_aligned(cfg).and(op.pipelinable())).reduce(|x, y| x.and(y)).expect("two operands");
        k.if_else(
            pipelined,
            |k| {
                k.if_(whole_end.gt(k_begin), |k| stages.pipeline(k, acc, k_begin, whole_end));
                k.if_(whole_end.lt(k_end), |k| {
                    k.threadgroup_barrier(MemFlags::Threadgroup);
                    stages.run(k, "pipe_tail_", &held, acc, whole_end, k_end, false);
                });
            },
            by_registers,
        );
    }
    for i in 0..acc_tile.per_lane() as u8 {
        let row = k.let_(&format!("row{i}"), m0 + sg_m + matrix_coord(acc_tile, i, false));
        let col = k.let_(&format!("col{i}"), n0 + sg_n + matrix_coord(acc_tile, i, true));
        k.if_(row.lt(m).and(col.lt(n)), |k| {
            let at = k.let_(&format!("at{i}"), c_base + row * n + col);
            match scaling.filter(|_| splits == 1) {
                Some((alpha, beta)) => {
                    let v = k.var(&format!("v{i}"), alpha * thread_element(acc, i));
                    k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + beta * load_f32(c, at)));
                    store_f32(k, c, at, v.get());
                }
                None => store_f32(k, partial, at, thread_element(acc, i)),
            }
        });
    }
    if let Some(tile) = &split_tile {
        tile.sum_if_last(&mut k);
    }
    finish(k)
}

/// What the last threadgroup of a K-split tile needs to sum the splits
/// ([`SplitSum::LastThreadgroup`]): the output `c`, the workspace `ws`, the
/// `tickets`, A's staged slices (`flag`: free once the slices are
/// multiplied, its first vector tells the threadgroup whether it is the
/// last), the shape, the tile's corner, the batch, the thread's index, and
/// alpha and beta where the kernel has them.
pub(super) struct SplitTile<'a> {
    pub(super) cfg: &'a GemmConfig,
    pub(super) c: Mem,
    pub(super) ws: Mem,
    pub(super) tickets: Mem,
    pub(super) flag: Mem,
    pub(super) m: Ex,
    pub(super) n: Ex,
    pub(super) m0: Ex,
    pub(super) n0: Ex,
    pub(super) batch: Ex,
    pub(super) lid: Ex,
    pub(super) scaling: Option<(Ex, Ex)>,
}

impl SplitTile<'_> {
    /// After every thread stored its part of the partial tile: thread 0
    /// fences and takes the tile's ticket; the threadgroup that draws the
    /// last one fences again, resets the ticket, and sums the splits' tiles
    /// element by element in split order, as [`splitk_reduce`] does (the
    /// same f32 operations, so the same C).
    pub(super) fn sum_if_last(&self, k: &mut KernelBuilder) {
        let Self { cfg, c, ws, tickets, flag, m, n, m0, n0, batch, lid, scaling } = *self;
        let splits = cfg.splits;
        // Every thread fences its partial tile's stores before the ticket,
        // and every thread of the last threadgroup fences before it reads
        // the others' (on Metal device memory is coherent only within a
        // threadgroup unless fenced; one fencing thread orders only itself).
        k.device_fence();
        k.threadgroup_barrier(MemFlags::Device);
        let grid = threadgroups_per_grid();
        let tg = threadgroup_position_in_grid();
        let ticket_at = k.let_("ticket_at", (batch * grid.y() + tg.y()) * grid.x() + tg.x());
        let flag_ty = flag.elem();
        let one_hot = |k: &mut KernelBuilder, last: Ex| {
            let x = enigma_ir::builder::select(0.0f32, 1.0f32, last).cast(Type::scalar(flag_ty.elem()));
            let zero = Ex::from(0.0f32).cast(Type::scalar(flag_ty.elem()));
            k.store(flag.at(0u32), vector(flag_ty, &[x, zero, zero, zero]));
        };
        k.if_(lid.eq(0u32), |k| {
            let ticket = k.atomic_fetch(AtomicOp::Add, tickets.at(ticket_at), 1u32);
            let last = k.let_("split_last", ticket.eq(splits - 1));
            k.if_(last, |k| k.atomic(AtomicOp::Exchange, tickets.at(ticket_at), 0u32));
            one_hot(k, last);
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let is_last = flag.get(0u32).x().cast(Type::F32).ne(0.0f32);
        k.if_(is_last, |k| {
            k.device_fence();
            let mn = k.let_("split_mn", m * n);
            // Each thread's elements of the tile, SUM_UNROLL at a time, and
            // every split of each: independent loads, all in flight at once.
            let per_thread = cfg.tile.tm * cfg.tile.tn / cfg.threads();
            let unroll = per_thread.min(SUM_UNROLL);
            k.for_range("split_it", 0u32, per_thread / unroll, 1u32, |k, it| {
                for u in 0..unroll {
                    let e = k.let_(&format!("split_e{u}"), (it * unroll + u) * cfg.threads() + lid);
                    let row = k.let_(&format!("split_row{u}"), m0 + e / cfg.tile.tn);
                    let col = k.let_(&format!("split_col{u}"), n0 + e % cfg.tile.tn);
                    k.if_(row.lt(m).and(col.lt(n)), |k| {
                        let i = k.let_(&format!("split_i{u}"), batch * mn + row * n + col);
                        let base = k.let_(&format!("split_base{u}"), batch * splits * mn + row * n + col);
                        let sum = k.var(&format!("split_sum{u}"), ws.get(base));
                        for s in 1..splits {
                            k.assign(sum, sum.get() + ws.get(base + mn * s));
                        }
                        match scaling {
                            Some((alpha, beta)) => {
                                let v = k.var(&format!("split_v{u}"), sum.get() * alpha);
                                k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + load_f32(c, i) * beta));
                                store_f32(k, c, i, v.get());
                            }
                            None => store_f32(k, c, i, sum.get()),
                        }
                    });
                }
            });
        });
    }
}

/// Elements of C each thread of a tile's last threadgroup sums per loop
/// iteration ([`SplitSum::LastThreadgroup`]), their splits' loads all
/// issued together.
pub(super) const SUM_UNROLL: u32 = 8;

/// The whole-tile kernel's epilogue: the SIMD group's accumulator tile to
/// C at `at` (row stride `n`), all of it inside C, or with `rows` = (the
/// tile's first row, M) only its rows before M (the ragged variant's last
/// row of tiles). With `rows`, `scaling` (alpha, beta) other than (1, 0)
/// or C not f32 (`c_is_f32`: the output type, or a split's f32 workspace),
/// element by element through the per-lane view (each `alpha · acc + beta ·
/// C`, rounded to C's type); otherwise one matrix store, which the CUDA
/// back end writes as pairs.
#[allow(clippy::too_many_arguments)]
pub(super) fn store_whole_tile(k: &mut KernelBuilder, acc: Var, c: Mem, c_is_f32: bool, at: Ex, n: Ex, scaling: Option<(Ex, Ex)>, rows: Option<(Ex, Ex)>) {
    let acc_tile = acc.get().ty().as_matrix().expect("the accumulator is a tile");
    let tag = if rows.is_some() { "edge_" } else { "" };
    let by_element = |k: &mut KernelBuilder| {
        for i in 0..acc_tile.per_lane() as u8 {
            let row = matrix_coord(acc_tile, i, false);
            let store = |k: &mut KernelBuilder| {
                let to = k.let_(&format!("{tag}at{i}"), at + row * n + matrix_coord(acc_tile, i, true));
                match scaling {
                    Some((alpha, beta)) => {
                        let v = k.var(&format!("{tag}v{i}"), alpha * thread_element(acc, i));
                        k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + beta * load_f32(c, to)));
                        store_f32(k, c, to, v.get());
                    }
                    None => store_f32(k, c, to, thread_element(acc, i)),
                }
            };
            match rows {
                Some((first, m)) => k.if_((first + row).lt(m), store),
                None => store(k),
            }
        }
    };
    let as_matrix = |k: &mut KernelBuilder| k.matrix_store(acc, c, at, n, false);
    match scaling {
        _ if !c_is_f32 || rows.is_some() => by_element(k),
        None => as_matrix(k),
        Some((alpha, beta)) => k.if_else(alpha.eq(1.0f32).and(beta.eq(0.0f32)), as_matrix, by_element),
    }
}

/// The quantized GEMM kernel of `cfg` (see [`QgemmConfig`]).
///
/// # Panics
/// When `cfg.check(u64::MAX)` fails.
pub fn qgemm(cfg: &QgemmConfig) -> Kernel {
    if let Err(e) = cfg.check(u64::MAX) {
        panic!("{e}");
    }
    build(&cfg.gemm, cfg.name(), Some((cfg.format, cfg.layout)))
}
