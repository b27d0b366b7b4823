//! K split over threadgroups, as every matrix kernel of the library does
//! it: the most splits ([`MAX_SPLITS`]), how many a shape takes
//! ([`k_splits_for`]), each split's run of K in kernel code
//! (`split_range`, `split_run`), the checks a split count and its
//! workspace get, who sums the partial products ([`SplitSum`]), the
//! output arguments of a kernel that may be split ([`SplitArgs`]) and the
//! reduction that sums them in a second dispatch ([`splitk_reduce`]).

use super::tile::TileShape;
use super::*;
use enigma_ir::{Access, AtomicOp, Kernel, MemFlags, Type};

/// The most ways K is split over threadgroups.
pub const MAX_SPLITS: u32 = 64;

/// K splits for an `m × n × k` product on `tile` that give
/// at least `threadgroups` threadgroups, each split keeping at least 4
/// slices of K — for M up to `max_rows` only (the kernel's limit:
/// [`super::gemm::SPLIT_K_MAX_ROWS`], [`super::sgemm::SIMT_SPLIT_K_MAX_ROWS`]): with more
/// rows the workspace's traffic costs more than the parallelism gains
/// (`BENCHMARKS.md`, split-K and small-M tiles). The rule of every GEMM ([`super::gemm::GemmConfig::splits_for`],
/// [`super::sgemm::SgemmConfig::splits_for`], the fused variant's).
pub fn k_splits_for(tile: TileShape, m: u32, n: u32, k: u32, threadgroups: u32, max_rows: u32) -> u32 {
    let TileShape { m: tm, n: tn, k: tk } = tile;
    if m > max_rows {
        return 1;
    }
    let tiles = m.div_ceil(tm).max(1) * n.div_ceil(tn).max(1);
    let wanted = threadgroups.div_ceil(tiles);
    wanted.min(k / (4 * tk)).clamp(1, MAX_SPLITS)
}

/// Who sums a K-split product's partial tiles into C.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SplitSum {
    /// A second dispatch, [`splitk_reduce`]: the kernel's `c` is the f32
    /// workspace of partial tiles.
    #[default]
    Reduction,
    /// The kernel: each threadgroup writes its partial tile to the f32
    /// workspace `ws`, and the last of a tile's threadgroups to finish (a
    /// ticket per tile in `tickets`, taken with an atomic after every
    /// thread's `device_fence()`, each reader fencing again after it) sums the tile's partials in split order into `c`,
    /// with [`splitk_reduce`]'s arithmetic, and resets the ticket to 0.
    /// `tickets` holds one u32 per tile and batch, zero before the dispatch
    /// and zero after it. Needs [`enigma_ir::Feature::DeviceFence`].
    LastThreadgroup,
}

crate::kernel_args! {
    /// The output of a matrix kernel whose K may be split, bound beside
    /// the family's other arguments: `c` (C, or the f32 workspace of
    /// partial tiles that [`splitk_reduce`] sums), and with
    /// [`SplitSum::LastThreadgroup`] the workspace `ws` and the `tickets`;
    /// `c_words` is C again, as 16-byte `u32x4` words of eight 16-bit
    /// values, which the cooperative GEMM's epilogue through threadgroup
    /// memory writes (`gemm::cooperative::store_tile_staged`) in place of
    /// `c`.
    pub struct SplitArgs {
        C c: buffer,
        C_WORDS c_words: optional,
        WS ws: optional,
        TICKETS tickets: optional,
    }
}

crate::kernel_args! {
    /// The arguments of [`splitk_reduce`] (`ws4` and `c4` the 4-vector
    /// views of `ws` and `c`).
    pub struct SplitReduceArgs {
        WS ws: buffer,
        WS4 ws4: buffer,
        C c: buffer,
        C4 c4: buffer,
        MN mn: u32,
        TOTAL total: u32,
        SPLITS splits: u32,
        ALPHA alpha: f32,
        BETA beta: f32,
    }
}

/// The stretch `[k_begin, k_end)` of K (`kk`) that split `split` of
/// `splits` takes: whole slices of `tk`, `⌈K / (splits · tk)⌉` of them per
/// split, cut at K (empty for a split past it).
pub(crate) fn split_range(k: &mut KernelBuilder, kk: Ex, split: Ex, splits: u32, tk: u32) -> (Ex, Ex) {
    let k_chunk = k.let_("k_chunk", (kk + (splits * tk - 1)) / (splits * tk) * tk);
    // min(split · k_chunk, K) and min(k_begin + k_chunk, K).
    let k_begin = k.let_("k_begin", enigma_ir::builder::select(kk, split * k_chunk, (split * k_chunk).lt(kk)));
    let k_end = k.let_("k_end", enigma_ir::builder::select(kk, k_begin + k_chunk, (k_begin + k_chunk).lt(kk)));
    (k_begin, k_end)
}

/// The last checks every GEMM configuration makes: 1 to [`MAX_SPLITS`] K
/// splits, and at most `max_threadgroup_memory_bytes` of the `bytes` of
/// threadgroup memory it declares.
pub(crate) fn check_splits_and_memory(name: &str, splits: u32, bytes: u64, max_threadgroup_memory_bytes: u64) -> Result<(), ShapeError> {
    if !(1..=MAX_SPLITS).contains(&splits) {
        return Err(ShapeError::new(name, format!("{splits} K splits; between 1 and {MAX_SPLITS}")));
    }
    if bytes > max_threadgroup_memory_bytes {
        return Err(ShapeError::new(name, format!("needs {bytes} bytes of threadgroup memory (limit {max_threadgroup_memory_bytes})")));
    }
    Ok(())
}

/// The second pass of a split-K GEMM: `c(i) = alpha · Σ_s ws((b·splits + s)·mn
/// + j) + beta · c(i)` for element `j` of batch `b` (`i = b·mn + j`), the
/// splits summed in order, in f32; `c` in `output`'s type (read only where
/// `beta` is not zero). One thread per `width` consecutive elements of C
/// (1, or 4 with `ws` and `c` bound as 4-vectors: 16-byte loads of the
/// workspace), named `gemm_splitk_reduce_{output}` and `…_v4`.
///
/// Parameters: `ws` (f32, or `ws4`), `c` (or `c4`), `mn` (`m · n`),
/// `total` (`batch · m · n`), both counted in `width`s of elements,
/// `splits`, `alpha`, `beta`.
///
/// # Panics
/// When `width` is not 1 or 4.
pub fn splitk_reduce(output: DType, width: u8) -> Kernel {
    assert!(matches!(width, 1 | 4), "splitk_reduce takes 1 or 4 elements per thread, not {width}");
    type P = SplitReduceArgs;
    let (ws_name, c_name, suffix) = if width == 1 { (P::WS, P::C, "") } else { (P::WS4, P::C4, "_v4") };
    let mut k = KernelBuilder::new(format!("gemm_splitk_reduce_{output}{suffix}"));
    let ws = k.buffer(ws_name, Type::vector(Scalar::F32, width), Access::Read);
    let c = k.buffer(c_name, output.ty(width), Access::ReadWrite);
    let mn = k.value(P::MN, Type::U32);
    let total = k.value(P::TOTAL, Type::U32);
    let splits = k.value(P::SPLITS, Type::U32);
    let alpha = k.value(P::ALPHA, Type::F32);
    let beta = k.value(P::BETA, Type::F32);
    let i = k.let_("i", thread_position_in_grid().x());
    k.if_(i.lt(total), |k| {
        let base = k.let_("base", i / mn * splits * mn + i % mn);
        let sum = k.var("sum", ws.get(base));
        k.for_range("s", 1u32, splits, 1u32, |k, s| k.assign(sum, sum.get() + ws.get(base + s * mn)));
        let v = k.var("v", sum.get() * alpha);
        k.if_(beta.ne(0.0f32), |k| k.assign(v, v.get() + load_f32(c, i) * beta));
        store_f32(k, c, i, v.get());
    });
    finish(k)
}

/// Threads per threadgroup of [`splitk_reduce`].
pub const REDUCE_THREADS: u32 = 256;

/// The dispatch of [`splitk_reduce`] over `total` threads (elements of C
/// over the kernel's width).
pub fn splitk_reduce_dispatch(total: u32) -> Dispatch {
    Dispatch::threadgroups([total.div_ceil(REDUCE_THREADS), 1, 1], REDUCE_THREADS)
}

/// With K split over the grid's `threadgroups_per_grid.z` threadgroups,
/// split `z`'s run `[begin, end)` of `total` items along K (quantization
/// groups, fragment units): contiguous, in order, the first `total %
/// splits` splits one item more than the others. Returns `(z, begin, end)`,
/// the bounds named `{item}_begin` and `{item}_end`.
pub(crate) fn split_run(k: &mut KernelBuilder, total: Ex, item: &str) -> (Ex, Ex, Ex) {
    let splits = k.let_("splits", threadgroups_per_grid().z());
    let z = k.let_("split", threadgroup_position_in_grid().z());
    let per_split = k.let_("per_split", total / splits);
    let extra = k.let_("extra", total % splits);
    let begin = k.let_(&format!("{item}_begin"), z * per_split + min(z, extra));
    let end = k.let_(&format!("{item}_end"), begin + per_split + enigma_ir::builder::select(0u32, 1u32, z.lt(extra)));
    (z, begin, end)
}

/// Checks `splits`, a K split asked of a kernel whose K comes in `items`
/// (`what` names them): 1 up to the items, at most [`MAX_SPLITS`], and
/// with more than one the `[splits][M][N]` workspace within u32.
pub(crate) fn check_k_splits(name: &str, splits: u32, items: u32, what: &str, m: usize, n: usize) -> Result<u32, ShapeError> {
    let max_splits = items.min(MAX_SPLITS);
    if !(1..=max_splits).contains(&splits) {
        return Err(ShapeError::new(name, format!("{splits} K splits; between 1 and {max_splits} (the {items} {what}, at most {})", MAX_SPLITS)));
    }
    if splits > 1 {
        to_u32(name, "splits × m × n", (splits as usize).saturating_mul(m).saturating_mul(n))?;
    }
    Ok(splits)
}

/// What the last threadgroup of a K-split tile needs to sum the splits
/// ([`SplitSum::LastThreadgroup`]): the splits, the tile's rows and columns
/// of C, the threadgroup's threads, the output `c`, the workspace `ws`, the
/// `tickets`, a threadgroup array free once the slices are multiplied
/// (`flag`: its first element, or its first vector's, tells the
/// threadgroup whether it is the last), the shape, the tile's corner, the
/// batch, the thread's index, and alpha and beta where the kernel has them.
/// The tile is C's rows `m0 ..` and columns `n0 ..` (those inside M and N);
/// split `s`'s partial tile lies in slice `s` of `ws` as C would
/// (`(batch · splits + s) · m · n + row · n + col`).
pub(crate) struct SplitTile {
    pub(crate) splits: u32,
    pub(crate) tile: (u32, u32),
    pub(crate) threads: u32,
    pub(crate) c: Mem,
    pub(crate) ws: Mem,
    pub(crate) tickets: Mem,
    pub(crate) flag: Mem,
    pub(crate) m: Ex,
    pub(crate) n: Ex,
    pub(crate) m0: Ex,
    pub(crate) n0: Ex,
    pub(crate) batch: Ex,
    pub(crate) lid: Ex,
    pub(crate) scaling: Option<(Ex, Ex)>,
}

impl SplitTile {
    /// After every thread stored its part of the partial tile: thread 0
    /// fences and takes the tile's ticket; the threadgroup that draws the
    /// last one fences again, resets the ticket, and sums the splits' tiles
    /// element by element in split order, as [`splitk_reduce`] does (the
    /// same f32 operations, so the same C).
    pub(crate) fn sum_if_last(&self, k: &mut KernelBuilder) {
        let Self { splits, tile: (tile_m, tile_n), threads, c, ws, tickets, flag, m, n, m0, n0, batch, lid, scaling } = *self;
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
            let lanes: Vec<Ex> = std::iter::once(x).chain(std::iter::repeat_n(zero, usize::from(flag_ty.width()) - 1)).collect();
            let value = if flag_ty.width() > 1 { vector(flag_ty, &lanes) } else { lanes[0] };
            k.store(flag.at(0u32), value);
        };
        k.if_(lid.eq(0u32), |k| {
            let ticket = k.atomic_fetch(AtomicOp::Add, tickets.at(ticket_at), 1u32);
            let last = k.let_("split_last", ticket.eq(splits - 1));
            k.if_(last, |k| k.atomic(AtomicOp::Exchange, tickets.at(ticket_at), 0u32));
            one_hot(k, last);
        });
        k.threadgroup_barrier(MemFlags::Threadgroup);
        let first = if flag_ty.width() > 1 { flag.get(0u32).x() } else { flag.get(0u32) };
        let is_last = first.cast(Type::F32).ne(0.0f32);
        k.if_(is_last, |k| {
            k.device_fence();
            let mn = k.let_("split_mn", m * n);
            // Each thread's elements of the tile, SUM_UNROLL at a time, and
            // every split of each: independent loads, all in flight at once.
            let per_thread = tile_m * tile_n / threads;
            let unroll = per_thread.min(SUM_UNROLL);
            k.for_range("split_it", 0u32, per_thread / unroll, 1u32, |k, it| {
                for u in 0..unroll {
                    let e = k.let_(&format!("split_e{u}"), (it * unroll + u) * threads + lid);
                    let row = k.let_(&format!("split_row{u}"), m0 + e / tile_n);
                    let col = k.let_(&format!("split_col{u}"), n0 + e % tile_n);
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
pub(crate) const SUM_UNROLL: u32 = 8;
