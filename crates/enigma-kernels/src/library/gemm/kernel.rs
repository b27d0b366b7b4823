//! The GEMM kernels, top to bottom: [`gemm`] and [`qgemm`] build one
//! kernel from a configuration. `build` reads as the kernel runs: the
//! prologue (`Parameters`, `StagedSlices`, `Place`, the operands), then by
//! [`Edges`] the general kernel's main loop over K (`checked_main_loop`)
//! and bounds-checked epilogue (`checked_epilogue`), or the whole-tile
//! kernel's (`whole_tiles`), each ending with the in-kernel sum of K
//! splits where the kernel sums them ([`SplitTile`]).

use super::operand::*;
use super::config::*;
use super::args::{MatrixArgs, PackedArgs, PlainArgs};
use crate::library::quant::Format;
use crate::library::split::*;
use crate::library::*;
use enigma_analysis::tiles::BStaging;
use enigma_ir::{Access, Kernel, MatrixType, MemFlags, QuantLayout, Type};

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
/// 4-bit weights in a layout of packed words (see [`QgemmConfig`]). The
/// variant is chosen once, by [`GemmConfig::edges`]: after the prologue
/// (parameters, staged slices, the threadgroup's place, the operands), the
/// general kernel's main loop and bounds-checked epilogue, or the
/// whole-tile kernel's.
pub(super) fn build(cfg: &GemmConfig, name: String, packed: Option<(Format, QuantLayout)>) -> Kernel {
    let mut k = KernelBuilder::new(name);
    let params = Parameters::declare(&mut k, cfg, packed);
    let slices = StagedSlices::declare(&mut k, cfg, packed.is_some());
    let place = Place::locate(&mut k, cfg, &params);
    let stages = operands(&mut k, cfg, packed, &params, &slices, &place);
    let acc = k.var("acc", matrix_fill(accumulator_tile(cfg), 0.0f32));
    let split_tile = params.summed.map(|(ws, tickets)| SplitTile {
        splits: cfg.splits,
        tile: (cfg.tile.shape.m, cfg.tile.shape.n),
        threads: cfg.threads(),
        c: params.c,
        ws,
        tickets,
        flag: slices.a,
        m: params.m,
        n: params.n,
        m0: place.m0,
        n0: place.n0,
        batch: place.batch,
        lid: place.lid,
        scaling: params.scaling,
    });
    if cfg.edges.whole_tiles() {
        whole_tiles(&mut k, cfg, &params, &place, &stages, acc, split_tile.as_ref());
    } else {
        checked_main_loop(&mut k, cfg, &stages, &place, acc);
        checked_epilogue(&mut k, cfg, &params, &place, acc);
        if let Some(tile) = &split_tile {
            tile.sum_if_last(&mut k);
        }
    }
    finish(k)
}

/// The kernel's parameters, declared in their order: `a, b, c, m, n, k`,
/// then `alpha, beta, a_stride` (B of values) or `group, scales` (packed weights),
/// `a4`, `b4` (B of values: the 4-element vector views of `a` and `b`),
/// and with K splits summed in the kernel `ws, tickets`.
struct Parameters {
    a: Source,
    b: Source,
    /// C; with K split and the splits summed by the reduction, the f32
    /// workspace of partial products.
    c: Mem,
    m: Ex,
    n: Ex,
    k: Ex,
    /// alpha and beta, where B holds values.
    scaling: Option<(Ex, Ex)>,
    /// A's elements from one product of the batch to the next, where B
    /// holds values (0: one A for every product); else `m·k`.
    a_stride: Ex,
    /// The bias added to each row of C, with a row bias
    /// ([`GemmConfig::row_bias`]).
    bias: Option<Mem>,
    /// With K splits summed in the kernel: the f32 workspace and the
    /// tiles' tickets.
    summed: Option<(Mem, Mem)>,
}

impl Parameters {
    fn declare(k: &mut KernelBuilder, cfg: &GemmConfig, packed: Option<(Format, QuantLayout)>) -> Parameters {
        let splits = cfg.splits.max(1);
        let a = k.buffer(MatrixArgs::A, cfg.input.ty(1), Access::Read);
        let b = match packed {
            None => k.buffer(MatrixArgs::B, cfg.input.ty(1), Access::Read),
            Some(_) => k.buffer(MatrixArgs::B, Type::U32, Access::Read),
        };
        let sums_here = splits > 1 && cfg.split_sum == SplitSum::LastThreadgroup;
        let c = k.buffer(SplitArgs::C, if splits > 1 && !sums_here { Type::F32 } else { cfg.output.ty(1) }, Access::ReadWrite);
        let m = k.value(MatrixArgs::M, Type::U32);
        let n = k.value(MatrixArgs::N, Type::U32);
        let kk = k.value(MatrixArgs::K, Type::U32);
        let (scaling, a_stride, packed_b) = match packed {
            None => (Some((k.value(PlainArgs::ALPHA, Type::F32), k.value(PlainArgs::BETA, Type::F32))), k.value(PlainArgs::A_STRIDE, Type::U32), None),
            Some((format, layout)) => {
                let group = k.value(PackedArgs::GROUP, Type::U32);
                let scales = k.buffer(PackedArgs::SCALES, Type::F16, Access::Read);
                (None, m * kk, Some(Source::Packed { format, layout, words: b, scales, group }))
            }
        };
        let a4 = k.buffer(MatrixArgs::A4, cfg.input.ty(VEC as u8), Access::Read);
        let b = match packed_b {
            Some(source) => source,
            None => Source::Values { scalar: b, vector: k.buffer(PlainArgs::B4, cfg.input.ty(VEC as u8), Access::Read) },
        };
        let summed = sums_here.then(|| (k.buffer(SplitArgs::WS, Type::F32, Access::ReadWrite), k.buffer(SplitArgs::TICKETS, Type::U32, Access::ReadWrite)));
        let bias = (cfg.row_bias && packed.is_none()).then(|| k.buffer(PlainArgs::BIAS, cfg.input.ty(1), Access::Read));
        Parameters { a: Source::Values { scalar: a, vector: a4 }, b, c, m, n, k: kk, scaling, a_stride, bias, summed }
    }

    /// Where the threadgroup's own product goes: C, or the workspace of its
    /// split's partial products.
    fn partial(&self) -> Mem {
        self.summed.map_or(self.c, |(ws, _)| ws)
    }
}

/// The threadgroup memory the slices are staged in: `stages` slices of A
/// as 4-element vectors (rows padded by [`PAD`]: stage `s` starts at
/// element `s · rows · ld`), B's slices of values (one, dequantized, for
/// packed weights, which only the general kernel keeps:
/// [`GemmConfig::packed_staging`]), and for pipelined packed weights each
/// stage's raw words and scales ([`GemmConfig::memory_bytes`]).
struct StagedSlices {
    a: Mem,
    /// B's values, or without a dequantized slice the raw words (never read
    /// as values).
    b: Mem,
    b_raw: Option<(Mem, Mem)>,
}

impl StagedSlices {
    fn declare(k: &mut KernelBuilder, cfg: &GemmConfig, packed: bool) -> StagedSlices {
        let [(a_rows, a_cols), (b_rows, b_cols)] = cfg.slices();
        let (lda, ldb) = (a_cols + PAD, b_cols + PAD);
        let b_stages = if packed { 1 } else { cfg.stages };
        let a = k.threadgroup_array("a_slice", cfg.input.ty(VEC as u8), cfg.stages * a_rows * lda / VEC);
        let b_slice = !packed || cfg.packed_staging() == BStaging::Packed { dequantized_slice: true };
        let b_values = b_slice.then(|| k.threadgroup_array("b_slice", cfg.input.ty(VEC as u8), b_stages * b_rows * ldb / VEC));
        let b_raw = (packed && cfg.stages > 1).then(|| {
            let (words, scales) = cfg.packed_stage_elems();
            (k.threadgroup_array("b_words", Type::U32, cfg.stages * words), k.threadgroup_array("b_scales", Type::F16, cfg.stages * scales))
        });
        let b = b_values.or(b_raw.map(|(words, _)| words)).expect("a whole-tile kernel of packed weights is pipelined (GemmConfig::check) and stages their words");
        StagedSlices { a, b, b_raw }
    }
}

/// Where this threadgroup and thread work: the thread's index, the tile's
/// corner in C (`m0`, `n0`), the batch, where the batch's C starts, the
/// split's stretch of K (`k_begin .. k_end`, whole slices) and the SIMD
/// group's corner in the tile. With K split, the grid's z numbers
/// (batch, split) pairs, and each threadgroup writes its partial product
/// to its own f32 slice of the workspace (alpha and beta wait for the sum).
struct Place {
    lid: Ex,
    m0: Ex,
    n0: Ex,
    batch: Ex,
    c_base: Ex,
    k_begin: Ex,
    k_end: Ex,
    sg_m: Ex,
    sg_n: Ex,
}

impl Place {
    fn locate(k: &mut KernelBuilder, cfg: &GemmConfig, params: &Parameters) -> Place {
        let splits = cfg.splits.max(1);
        let (sm, sn) = simdgroup_tile(cfg);
        let tg = threadgroup_position_in_grid();
        let lid = k.let_("lid", thread_index_in_threadgroup());
        let sg = k.let_("sg", simdgroup_index_in_threadgroup());
        let m0 = k.let_("m0", tg.y() * cfg.tile.shape.m);
        let n0 = k.let_("n0", tg.x() * cfg.tile.shape.n);
        let batch = k.let_("batch", tg.z() / splits);
        let split = k.let_("split", tg.z() % splits);
        let c_base = k.let_("c_base", tg.z() * params.m * params.n);
        let (k_begin, k_end) = split_range(k, params.k, split, splits, cfg.tile.shape.k);
        let sg_m = k.let_("sg_m", sg / cfg.tile.sg_cols * sm);
        let sg_n = k.let_("sg_n", sg % cfg.tile.sg_cols * sn);
        Place { lid, m0, n0, batch, c_base, k_begin, k_end, sg_m, sg_n }
    }
}

/// Each SIMD group's share of the tile: `(tm / sg_rows, tn / sg_cols)`.
fn simdgroup_tile(cfg: &GemmConfig) -> (u32, u32) {
    (cfg.tile.shape.m / cfg.tile.sg_rows, cfg.tile.shape.n / cfg.tile.sg_cols)
}

/// A SIMD group's f32 accumulator tile.
fn accumulator_tile(cfg: &GemmConfig) -> MatrixType {
    let (sm, sn) = simdgroup_tile(cfg);
    MatrixType::new(enigma_ir::Scalar::F32, sm as u8, sn as u8)
}

/// The operands as stored — (rows, columns) of the matrix, the origin of
/// this threadgroup's slices along the axis that is not K — and the loop's
/// fixed parts. Fragment-ordered weights decode a whole slice's B tile at
/// once (its 64-row unit), so A's tile spans the slice too.
fn operands<'a>(k: &mut KernelBuilder, cfg: &'a GemmConfig, packed: Option<(Format, QuantLayout)>, params: &Parameters, slices: &StagedSlices, place: &Place) -> Stages<'a> {
    let (sm, sn) = simdgroup_tile(cfg);
    let step = match packed {
        Some((_, QuantLayout::Fragments)) => cfg.tile.shape.k,
        _ => cfg.k_step(),
    };
    let elem = cfg.input.scalar();
    let [a_slice, b_slice] = cfg.slices();
    let (m, n, kk) = (params.m, params.n, params.k);
    let a = Operand {
        name: "a",
        source: params.a,
        staged: slices.a,
        base: k.let_("a_base", place.batch * params.a_stride),
        shape: if cfg.trans_a { (kk, m) } else { (m, kk) },
        slice: a_slice,
        origin: place.m0,
        k_is_row: cfg.trans_a,
        raw: None,
    };
    let b = Operand {
        name: "b",
        source: params.b,
        staged: slices.b,
        base: k.let_("b_base", place.batch * kk * n),
        shape: if cfg.trans_b { (n, kk) } else { (kk, n) },
        slice: b_slice,
        origin: place.n0,
        k_is_row: !cfg.trans_b,
        raw: slices.b_raw,
    };
    let a_tile = MatrixType::new(elem, sm as u8, step as u8);
    let b_tile = MatrixType::new(elem, step as u8, sn as u8);
    Stages { cfg, ops: [a, b], lid: place.lid, sg_m: place.sg_m, sg_n: place.sg_n, a_tile, b_tile, step }
}

/// The whole-tile kernel's main loop and epilogue: only for shapes the tile
/// divides (any other would read past the matrices, so it is left alone;
/// the selection never sends one), the pipeline over the split's slices,
/// the tile stored whole (the ragged variant's last row of tiles row by
/// row), and the splits summed where the kernel sums them.
fn whole_tiles(k: &mut KernelBuilder, cfg: &GemmConfig, params: &Parameters, place: &Place, stages: &Stages, acc: Var, split_tile: Option<&SplitTile>) {
    let (m, n, kk) = (params.m, params.n, params.k);
    let splits = cfg.splits.max(1);
    let ragged = cfg.edges == Edges::RaggedRows;
    let rows = if ragged { Ex::from(true) } else { (m % cfg.tile.shape.m).eq(0u32) };
    let divides = rows.and((n % cfg.tile.shape.n).eq(0u32)).and((kk % cfg.tile.shape.k).eq(0u32));
    k.if_(divides, |k| {
        k.if_(place.k_end.gt(place.k_begin), |k| stages.pipeline(k, acc, place.k_begin, place.k_end));
        let c_is_f32 = splits > 1 || cfg.output == DType::F32;
        let at = place.c_base + (place.m0 + place.sg_m) * n + place.n0 + place.sg_n;
        let own_scaling = params.scaling.filter(|_| splits == 1);
        let partial = params.partial();
        let bias = params.bias.map(|b| (b, place.m0 + place.sg_m));
        let whole = |k: &mut KernelBuilder| store_whole_tile(k, acc, partial, c_is_f32, at, n, own_scaling, bias, None);
        if ragged {
            let last_rows = |k: &mut KernelBuilder| store_whole_tile(k, acc, partial, c_is_f32, at, n, own_scaling, bias, Some((place.m0 + place.sg_m, m)));
            k.if_else((place.m0 + cfg.tile.shape.m).le(m), whole, last_rows);
        } else {
            whole(k);
        }
        if let Some(tile) = split_tile {
            tile.sum_if_last(k);
        }
    });
}

/// The general kernel's main loop. A threadgroup whose slices lie inside
/// the matrices along M and N, with vector-aligned rows, runs its whole K
/// slices on vector loads and only a last partial slice (K not a multiple
/// of tk) element by element: two separate loops, so no register is
/// written by both kinds of load. With stages, a threadgroup whose rows
/// are whole copies inside the matrices across K (A's rows past M copy
/// zeros) runs the pipeline for the whole slices and the registers for a
/// last partial one (after a barrier: stage 0 may still be read); any
/// other stages through registers.
fn checked_main_loop(k: &mut KernelBuilder, cfg: &GemmConfig, stages: &Stages, place: &Place, acc: Var) {
    let (k_begin, k_end) = (place.k_begin, place.k_end);
    let threads = cfg.threads();
    let held: Vec<Vec<Var>> = stages.ops.iter().map(|op| op.registers(k, cfg, threads)).collect();
    let whole_end = k.let_("whole_end", k_begin + (k_end - k_begin) / cfg.tile.shape.k * cfg.tile.shape.k);
    let interior = stages.ops.iter().map(|op| op.inside_across_k()).reduce(|x, y| x.and(y)).expect("two operands");
    let through_registers = |k: &mut KernelBuilder| {
        k.if_(whole_end.gt(k_begin), |k| stages.run(k, "whole_", &held, acc, k_begin, whole_end, true));
        k.if_(whole_end.lt(k_end), |k| stages.run(k, "tail_", &held, acc, whole_end, k_end, false));
    };
    let by_registers = |k: &mut KernelBuilder| {
        k.if_else(interior, through_registers, |k| k.if_(k_end.gt(k_begin), |k| stages.run(k, "edge_", &held, acc, k_begin, k_end, false)))
    };
    if cfg.stages == 1 {
        by_registers(k);
        return;
    }
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

/// The general kernel's epilogue: each lane's elements of the accumulator
/// through the per-lane view, those past M or N skipped; `alpha · acc +
/// beta · C` unsplit, the partial product as it is into the workspace.
fn checked_epilogue(k: &mut KernelBuilder, cfg: &GemmConfig, params: &Parameters, place: &Place, acc: Var) {
    let acc_tile = accumulator_tile(cfg);
    let (m, n) = (params.m, params.n);
    let partial = params.partial();
    let scaling = params.scaling.filter(|_| cfg.splits.max(1) == 1);
    for i in 0..acc_tile.per_lane() as u8 {
        let row = k.let_(&format!("row{i}"), place.m0 + place.sg_m + matrix_coord(acc_tile, i, false));
        let col = k.let_(&format!("col{i}"), place.n0 + place.sg_n + matrix_coord(acc_tile, i, true));
        k.if_(row.lt(m).and(col.lt(n)), |k| {
            let at = k.let_(&format!("at{i}"), place.c_base + row * n + col);
            match scaling {
                Some((alpha, beta)) => {
                    let v = k.var(&format!("v{i}"), alpha * thread_element(acc, i));
                    k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + beta * load_f32(params.c, at)));
                    if let Some(bias) = params.bias {
                        k.assign(v, v.get() + load_f32(bias, row));
                    }
                    store_f32(k, params.c, at, v.get());
                }
                None => store_f32(k, partial, at, thread_element(acc, i)),
            }
        });
    }
}

/// The whole-tile kernel's epilogue: the SIMD group's accumulator tile to
/// C at `at` (row stride `n`), all of it inside C, or with `rows` = (the
/// tile's first row, M) only its rows before M (the ragged variant's last
/// row of tiles). With `rows`, a `bias` (the row bias and the tile's first
/// row of C), `scaling` (alpha, beta) other than (1, 0) or C not f32
/// (`c_is_f32`: the output type, or a split's f32 workspace), element by
/// element through the per-lane view (each `alpha · acc + beta · C (+
/// bias)`, rounded to C's type); otherwise one matrix store, which the
/// CUDA back end writes as pairs.
#[allow(clippy::too_many_arguments)]
pub(super) fn store_whole_tile(k: &mut KernelBuilder, acc: Var, c: Mem, c_is_f32: bool, at: Ex, n: Ex, scaling: Option<(Ex, Ex)>, bias: Option<(Mem, Ex)>, rows: Option<(Ex, Ex)>) {
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
                        if let Some((bias, first)) = bias {
                            k.assign(v, v.get() + load_f32(bias, first + row));
                        }
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
        _ if !c_is_f32 || rows.is_some() || bias.is_some() => by_element(k),
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
