//! How a slice of A or B reaches the SIMD groups: asynchronous copies into
//! a ring of stages ([`Stages`]), or loads staged through registers, each
//! operand read as its layout and format say ([`Operand`]).

use super::config::*;
use crate::library::quant::{dequantized_halves, Format, VALUES_PER_WORD};
use crate::library::*;
use enigma_ir::{MatrixType, MemFlags, QuantLayout, Type};

/// The multiply loop's fixed parts: the configuration, the two operands, the
/// thread's index and its SIMD group's corner, the operand tile types.
pub(super) struct Stages<'a> {
    pub(super) cfg: &'a GemmConfig,
    pub(super) ops: [Operand; 2],
    pub(super) lid: Ex,
    pub(super) sg_m: Ex,
    pub(super) sg_n: Ex,
    pub(super) a_tile: MatrixType,
    pub(super) b_tile: MatrixType,
    /// K values per matrix multiply (the tiles' inner side).
    pub(super) step: u32,
}

impl Stages<'_> {
    /// Accumulates the slices `from, from + tk, … < to` along K into `acc`:
    /// the first staged before the loop; in the loop each thread loads its
    /// share of the next slice into `held` before the SIMD groups multiply
    /// the current one, and writes it to threadgroup memory between two
    /// barriers. `vector_loads` as in [`Operand::fetch`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run(&self, k: &mut KernelBuilder, tag: &str, held: &[Vec<Var>], acc: Var, from: Ex, to: Ex, vector_loads: bool) {
        let (cfg, threads, lid) = (self.cfg, self.cfg.threads(), self.lid);
        for (op, regs) in self.ops.iter().zip(held) {
            op.fetch(k, &format!("{tag}first_"), cfg, regs, from, lid, threads, vector_loads);
            op.commit(k, &format!("{tag}first_"), regs, from, lid, threads);
        }
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.for_range(&format!("{tag}k0"), from, to, cfg.tile.shape.k, |k, k0| {
            let next = k.let_(&format!("{tag}next"), k0 + cfg.tile.shape.k);
            k.if_(next.lt(to), |k| {
                for (op, regs) in self.ops.iter().zip(held) {
                    op.fetch(k, &format!("{tag}next_"), cfg, regs, next, lid, threads, vector_loads);
                }
            });
            self.multiply(k, tag, acc, None, None);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            k.if_(next.lt(to), |k| {
                for (op, regs) in self.ops.iter().zip(held) {
                    op.commit(k, &format!("{tag}next_"), regs, next, lid, threads);
                }
            });
            k.threadgroup_barrier(MemFlags::Threadgroup);
        });
    }
}

impl Stages<'_> {
    /// Multiplies the staged slices (A's in `stage_a`, B's in `stage_b`, or
    /// stage 0) into `acc`, one K step (16 or 8) at a time.
    pub(super) fn multiply(&self, k: &mut KernelBuilder, tag: &str, acc: Var, stage_a: Option<Ex>, stage_b: Option<Ex>) {
        for s in 0..self.cfg.tile.shape.k / self.step {
            let (a_load, b_load) = self.step_tiles(s, stage_a, stage_b);
            let ma = k.let_(&format!("{tag}ma{s}"), a_load);
            let mb = k.let_(&format!("{tag}mb{s}"), b_load);
            k.assign(acc, matrix_multiply_accumulate(ma, mb, acc));
        }
    }

    /// The loads of K step `s`'s A and B tiles from the staged slices (A's
    /// in `stage_a`, B's in `stage_b`, or stage 0). Packed weights staged
    /// raw (`stage_b` given) are decoded by the B tile's load
    /// ([`matrix_load_quantized`]) from the stage's words and scales.
    pub(super) fn step_tiles(&self, s: u32, stage_a: Option<Ex>, stage_b: Option<Ex>) -> (Ex, Ex) {
        let cfg = self.cfg;
        let [(a_rows, a_cols), (b_rows, b_cols)] = cfg.slices();
        let (lda, ldb) = (a_cols + PAD, b_cols + PAD);
        let ks = s * self.step;
        // Element (r, c) of the A tile is op(A)[sg_m + r][ks + c]; of
        // the B tile op(B)[ks + r][sg_n + c].
        let (sg_m, sg_n) = (self.sg_m, self.sg_n);
        let mut a_at = if cfg.trans_a { sg_m + ks * lda } else { sg_m * lda + ks };
        let mut b_at = if cfg.trans_b { sg_n * ldb + ks } else { sg_n + ks * ldb };
        if let Some(stage) = stage_a {
            a_at = stage * (a_rows * lda) + a_at;
        }
        let b_op = &self.ops[1];
        let b_load = match (b_op.source, b_op.raw, stage_b) {
            (Source::Packed { format, layout, .. }, Some((raw, raw_scales)), Some(stage)) => {
                // The stage's words are its rows of units as in memory
                // (`[tk / 8][tn]` words in seed 002's layout), its scales [tn].
                let (stage_words, cols) = cfg.packed_stage_elems();
                let code = format.quant_code().expect("the tensor-core kernel takes fp4 or int4");
                let (unit_row, word, _) = layout.locate(ks, 0);
                let stride = layout.stride(cfg.tile.shape.k, cols);
                let words_at = stage * stage_words + unit_row * stride + word + sg_n * layout.stride(cfg.tile.shape.k, 1);
                matrix_load_quantized(self.b_tile, code, layout, raw, words_at, stride, raw_scales, stage * cols + sg_n)
            }
            (_, _, stage) => {
                if let Some(stage) = stage {
                    b_at = stage * (b_rows * ldb) + b_at;
                }
                matrix_load(self.b_tile, b_op.staged, b_at, ldb, cfg.trans_b)
            }
        };
        (matrix_load(self.a_tile, self.ops[0].staged, a_at, lda, cfg.trans_a), b_load)
    }

    /// Accumulates the whole slices `from, from + tk, … < to` into `acc`
    /// through `cfg.stages` stages filled by asynchronous copies, one
    /// barrier per slice. The copies' addresses are worked out once
    /// ([`Operand::plan_copies`]); packed weights arrive as raw words and
    /// scales, which the B tiles' loads decode. The caller knows the slices
    /// lie inside the matrices, with rows of whole copies.
    ///
    /// With an even number of K steps per slice the tiles are double
    /// buffered: each step loads the next step's tiles before it
    /// multiplies its own, and the last step of slice `i` first issues the
    /// copies of slice `i + stages − 1` into the stage slice `i − 1` used,
    /// waits for slice `i + 1`'s own copies (`async_wait(stages − 2)`),
    /// passes the barrier that makes them visible and loads slice `i + 1`'s
    /// first tiles before it multiplies its own. With an odd number the
    /// same holds where two sets of tiles and the accumulator fit
    /// [`DOUBLE_BUFFER_REGISTERS`]; the tiles loaded last in a slice then
    /// move to the first buffer after its last multiply. Otherwise each
    /// slice starts with the wait and the barrier, and the copies follow
    /// its multiplies.
    ///
    /// The loop body has no branch: the copies of slices past the last copy
    /// the last slice again (into stages no one reads any more), and after
    /// the last slice the next-slice load reads the last stage again (faster
    /// than the copies behind an `if` for the default 32-deep slices:
    /// `BENCHMARKS.md`, the pipelined GEMM).
    pub(super) fn pipeline(&self, k: &mut KernelBuilder, acc: Var, from: Ex, to: Ex) {
        let (cfg, threads, lid) = (self.cfg, self.cfg.threads(), self.lid);
        let stages = cfg.stages;
        let slices = k.let_("pipe_slices", (to - from) / cfg.tile.shape.k);
        let copies: Vec<SliceCopies> = self.ops.iter().map(|op| op.plan_copies(k, cfg, from, lid, threads)).collect();
        // Slices past the last copy the last one again, into stages no
        // one reads any more: the copies stay branch-free.
        let last = k.let_("pipe_last", slices - 1u32);
        for p in 0..stages - 1 {
            let slice = k.let_(&format!("pipe_first{p}"), min(last, p));
            for c in &copies {
                c.issue(k, &format!("pipe_first{p}_"), slice, p.into(), from, cfg.tile.shape.k);
            }
            k.async_commit();
        }
        let issue_ahead = |k: &mut KernelBuilder, i: Ex| {
            let ahead = k.let_("pipe_ahead", i + (stages - 1));
            let slice = k.let_("pipe_copied", min(ahead, last));
            let fill = k.let_("pipe_fill", ahead % stages);
            for c in &copies {
                c.issue(k, "pipe_next_", slice, fill, from, cfg.tile.shape.k);
            }
            k.async_commit();
        };
        let steps = cfg.tile.shape.k / self.step;
        let acc_tile = acc.get().ty().as_matrix().expect("the accumulator is a tile");
        let registers_of = |t: MatrixType| t.per_lane() * t.elem().size_bytes() / 4;
        let registers = 2 * (registers_of(self.a_tile) + registers_of(self.b_tile)) + registers_of(acc_tile);
        if steps % 2 == 1 && registers > DOUBLE_BUFFER_REGISTERS {
            k.for_range("pipe_i", 0u32, slices, 1u32, |k, i| {
                k.async_wait(stages - 2);
                k.threadgroup_barrier(MemFlags::Threadgroup);
                let stage = k.let_("pipe_stage", i % stages);
                self.multiply(k, "pipe_", acc, Some(stage), Some(stage));
                issue_ahead(k, i);
            });
        } else {
            k.async_wait(stages - 2);
            k.threadgroup_barrier(MemFlags::Threadgroup);
            let first = Some(Ex::from(0u32));
            // Two buffers of tiles; both start as slice 0's first (a B
            // tile assigned only by loads keeps the layout the tensor
            // cores read it in).
            let buffers: Vec<(Var, Var)> = (0..2)
                .map(|b| {
                    let (a_load, b_load) = self.step_tiles(0, first, first);
                    (k.var(&format!("pipe_ta{b}"), a_load), k.var(&format!("pipe_tb{b}"), b_load))
                })
                .collect();
            k.for_range("pipe_i", 0u32, slices, 1u32, |k, i| {
                let stage = Some(k.let_("pipe_stage", i % stages));
                for s in 0..steps {
                    let (next_a, next_b) = buffers[(s as usize + 1) % 2];
                    if s + 1 < steps {
                        let (a_load, b_load) = self.step_tiles(s + 1, stage, stage);
                        k.assign(next_a, a_load);
                        k.assign(next_b, b_load);
                    } else {
                        issue_ahead(k, i);
                        k.async_wait(stages - 2);
                        k.threadgroup_barrier(MemFlags::Threadgroup);
                        // After the last slice its own stage again (still
                        // complete, never refilled), not a stage that may
                        // never have been written.
                        let next_stage = Some(k.let_("pipe_next_stage", min(i + 1u32, last) % stages));
                        let (a_load, b_load) = self.step_tiles(0, next_stage, next_stage);
                        k.assign(next_a, a_load);
                        k.assign(next_b, b_load);
                    }
                    let (ta, tb) = buffers[s as usize % 2];
                    k.assign(acc, matrix_multiply_accumulate(ta.get(), tb.get(), acc));
                }
                if steps % 2 == 1 {
                    // The next slice's first tiles went to the second buffer.
                    let ((ta, tb), (next_a, next_b)) = (buffers[0], buffers[1]);
                    k.assign(ta, next_a.get());
                    k.assign(tb, next_b.get());
                }
            });
        }
        // The copies of the slices past the last may still be in flight:
        // complete them before the stages are used again.
        k.async_wait(0);
        k.threadgroup_barrier(MemFlags::Threadgroup);
    }
}

/// Runs `body` with item `j = lid + u · threads` of `count` items dealt
/// round-robin over `threads` threads (`j` bound to a local named `name`),
/// on the threads that have an item `u`: a guard only where `threads` does
/// not divide `count`.
pub(super) fn share(k: &mut KernelBuilder, name: &str, u: u32, count: u32, lid: Ex, threads: u32, body: impl FnOnce(&mut KernelBuilder, Ex)) {
    let j = k.let_(name, lid + u * threads);
    if (u + 1) * threads <= count {
        body(k, j);
    } else {
        k.if_(j.lt(count), |k| body(k, j));
    }
}

/// Where an operand's values come from.
#[derive(Clone, Copy)]
pub(super) enum Source {
    /// Values of the input type, through a scalar and a 4-wide view.
    Values { scalar: Mem, vector: Mem },
    /// 4-bit codes: u32 `words` in `layout` (seed 002's: 8 consecutive K
    /// values of one column per word), f16 `scales` per `group` K values and
    /// column (`[K / group][N]` in either layout).
    Packed { format: Format, layout: QuantLayout, words: Mem, scales: Mem, group: Ex },
}

/// One input matrix as the kernel stages it: its source, its threadgroup
/// slice, where this batch's matrix starts (`base`), its stored shape
/// (rows, columns), the slice's shape, the slice's origin along the axis
/// that is not K, and whether K runs along the rows.
pub(super) struct Operand {
    pub(super) name: &'static str,
    pub(super) source: Source,
    pub(super) staged: Mem,
    pub(super) base: Ex,
    pub(super) shape: (Ex, Ex),
    pub(super) slice: (u32, u32),
    pub(super) origin: Ex,
    pub(super) k_is_row: bool,
    /// Pipelined packed weights: the stages of raw words (`[tk / 8][tn]`
    /// each, as in memory) and of the slice's scales (`tn` each).
    pub(super) raw: Option<(Mem, Mem)>,
}

/// One of a thread's asynchronous copies of an operand's slices
/// ([`Operand::plan_copies`]).
pub(super) struct StagedCopy {
    /// Its source index at the first slice (a let, computed once).
    pub(super) src: Ex,
    /// Its destination index within a stage.
    pub(super) dst: Ex,
    /// False where the copy zero-fills (A's rows past M).
    pub(super) valid: Ex,
    /// Whether this thread has the copy, where the threads do not divide
    /// the slice's copies.
    pub(super) guard: Option<Ex>,
}

/// A thread's asynchronous copies of an operand's slices, addressed once
/// before the pipeline's loop ([`Operand::plan_copies`]).
pub(super) struct SliceCopies {
    pub(super) src: Mem,
    pub(super) dst: Mem,
    /// Elements of `src` and `dst` per copy.
    pub(super) count: u32,
    /// Elements of `dst` per stage.
    pub(super) stage_size: u32,
    /// How far every source index moves from one slice to the next.
    pub(super) advance: Ex,
    pub(super) copies: Vec<StagedCopy>,
    /// Packed weights' scales, one row per slice.
    pub(super) scales: Option<ScaleCopies>,
    pub(super) lid: Ex,
    pub(super) threads: u32,
}

/// The scales of a packed slice: the `cols` scales of its group, 8 per
/// copy, from `[K / group][n]`; the group a power of two, its scale row
/// `k0 >> group_shift` (a division by the run-time group in every slice's
/// copies makes the SIMD group that copies arrive late at each barrier).
pub(super) struct ScaleCopies {
    pub(super) scales: Mem,
    pub(super) raw_scales: Mem,
    pub(super) group_shift: Ex,
    pub(super) n: Ex,
    pub(super) origin: Ex,
    pub(super) cols: u32,
}

impl SliceCopies {
    /// Starts the copies of slice number `slice` (counted from the first,
    /// whose K is `from`) into `stage`; `tag` keeps the names of each call
    /// apart.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn issue(&self, k: &mut KernelBuilder, tag: &str, slice: Ex, stage: Ex, from: Ex, tk: u32) {
        let shift = slice * self.advance;
        let stage_at = stage * self.stage_size;
        for copy in &self.copies {
            let start = |k: &mut KernelBuilder| k.async_copy(self.dst.at(stage_at + copy.dst), self.src.at(copy.src + shift), self.count, copy.valid);
            match copy.guard {
                None => start(k),
                Some(guard) => k.if_(guard, start),
            }
        }
        if let Some(sc) = &self.scales {
            let k0 = from + slice * tk;
            let scale_copies = sc.cols / 8;
            for u in 0..scale_copies.div_ceil(self.threads) {
                share(k, &format!("{tag}scale_j{u}"), u, scale_copies, self.lid, self.threads, |k, j| {
                    k.async_copy(sc.raw_scales.at(stage * sc.cols + j * 8u32), sc.scales.at((k0 >> sc.group_shift) * sc.n + sc.origin + j * 8u32), 8, true);
                });
            }
        }
    }
}

impl Operand {
    /// Values one thread moves per load: a vector, or a packed word.
    pub(super) fn unit(&self) -> u32 {
        match self.source {
            Source::Values { .. } => VEC,
            Source::Packed { .. } => VALUES_PER_WORD as u32,
        }
    }

    /// Loads (vectors or words) in a slice.
    pub(super) fn loads(&self) -> u32 {
        self.slice.0 * self.slice.1 / self.unit()
    }

    /// Loads each thread makes (the last one only on the first threads when
    /// the threads do not divide the slice).
    pub(super) fn per_thread(&self, threads: u32) -> u32 {
        self.loads().div_ceil(threads)
    }

    /// The registers holding this thread's share of the next slice (zero
    /// where a thread has no last load).
    pub(super) fn registers(&self, k: &mut KernelBuilder, cfg: &GemmConfig, threads: u32) -> Vec<Var> {
        let zero = match self.source {
            Source::Values { .. } => vector(cfg.input.ty(VEC as u8), &[lit(cfg.input.scalar(), 0.0)]),
            Source::Packed { .. } => 0u32.into(),
        };
        (0..self.per_thread(threads)).map(|u| k.var(&format!("{}_held{u}", self.name), zero)).collect()
    }

    /// Runs `body` with the (row, column) within the slice of load `u` of
    /// thread `lid`, skipping a thread that has no load `u`. Vectors run
    /// row-major; a packed slice is `[N][K]` and consecutive threads take
    /// consecutive columns of B (consecutive words in memory).
    pub(super) fn slot(&self, k: &mut KernelBuilder, tag: &str, u: u32, lid: Ex, threads: u32, body: impl FnOnce(&mut KernelBuilder, Ex, Ex)) {
        share(k, &format!("{tag}{}j{u}", self.name), u, self.loads(), lid, threads, |k, j| {
            let (r, c) = match self.source {
                Source::Values { .. } => {
                    let per_row = self.slice.1 / VEC;
                    (j / per_row, j % per_row * VEC)
                }
                Source::Packed { .. } => (j % self.slice.0, j / self.slice.0 * VALUES_PER_WORD as u32),
            };
            body(k, r, c)
        });
    }

    /// Works out, once before the pipeline's loop, this thread's
    /// asynchronous copies of every slice (`from` the first slice's K):
    /// whole copies of [`COPY_BYTES`], consecutive threads taking
    /// consecutive copies along a row; packed weights copy 4 words and, per
    /// slice, 8 scales. The slice lies inside the matrix with rows of whole
    /// copies (the caller checks), so every copy reads; rows across K past
    /// the matrix (A's past M; B's past N when B is transposed) copy zeros,
    /// from the last row's address. Only the source moves from slice to
    /// slice, by a fixed stride ([`SliceCopies::issue`]), so the loop's
    /// copies cost an add each instead of the row arithmetic.
    pub(super) fn plan_copies(&self, k: &mut KernelBuilder, cfg: &GemmConfig, from: Ex, lid: Ex, threads: u32) -> SliceCopies {
        let name = format!("pipe_{}", self.name);
        let (src, dst, elems, advance, scales) = match (self.source, self.raw) {
            (Source::Values { vector, .. }, _) => {
                let advance = if self.k_is_row { self.shape.1 * (cfg.tile.shape.k / VEC) } else { Ex::from(cfg.tile.shape.k / VEC) };
                (vector, self.staged, cfg.copy_elems(), advance, None)
            }
            (Source::Packed { words, layout, scales, group, .. }, Some((raw, raw_scales))) => {
                let n = self.shape.0;
                let group_shift = k.let_(&format!("{name}_group_shift"), ctz(group));
                (words, raw, 4, n * layout.stride(cfg.tile.shape.k, 1) * (cfg.tile.shape.k / layout.unit().0), Some(ScaleCopies { scales, raw_scales, group_shift, n, origin: self.origin, cols: cfg.tile.shape.n }))
            }
            (Source::Packed { .. }, None) => unreachable!("a pipelined kernel declares the raw stages of packed weights"),
        };
        // Packed weights: the stage holds the slice's rows of units, as in
        // memory ([tk / 8][tn] words in seed 002's layout, one row of
        // 8 · tn words in fragment order).
        let (rows, cols, ld, vec) = match self.source {
            Source::Values { .. } => (self.slice.0, self.slice.1, self.slice.1 + PAD, VEC),
            Source::Packed { layout, .. } => (cfg.tile.shape.k / layout.unit().0, layout.stride(cfg.tile.shape.k, cfg.tile.shape.n), layout.stride(cfg.tile.shape.k, cfg.tile.shape.n), 1),
        };
        let per_row = cols / elems;
        let count = rows * per_row;
        let copies = (0..count.div_ceil(threads))
            .map(|u| {
                // Item j = lid + u·threads at (r, c) of the slice; with
                // whole rows per round, r and c as lid's plus constants.
                let (r, column) = if threads.is_multiple_of(per_row) {
                    (lid / per_row + u * (threads / per_row), lid % per_row)
                } else {
                    let j = lid + u * threads;
                    (j / per_row, j % per_row)
                };
                let c = column * elems;
                let guard = ((u + 1) * threads > count).then(|| (lid + u * threads).lt(count));
                let (at, valid) = match self.source {
                    Source::Packed { layout, .. } => ((from / layout.unit().0 + r) * (self.shape.0 * layout.stride(cfg.tile.shape.k, 1)) + self.origin * layout.stride(cfg.tile.shape.k, 1) + c, Ex::from(true)),
                    Source::Values { .. } if self.k_is_row => ((self.base + (from + r) * self.shape.1 + self.origin + c) / VEC, Ex::from(true)),
                    // The whole-tile kernel's rows are all inside, unless ragged.
                    Source::Values { .. } if cfg.edges == Edges::WholeTiles => ((self.base + (self.origin + r) * self.shape.1 + from + c) / VEC, Ex::from(true)),
                    Source::Values { .. } => {
                        let row = self.origin + r;
                        let valid = k.let_(&format!("{name}_valid{u}"), row.lt(self.shape.0));
                        ((self.base + min(row, self.shape.0 - 1u32) * self.shape.1 + from + c) / VEC, valid)
                    }
                };
                StagedCopy { src: k.let_(&format!("{name}_src{u}"), at), dst: r * (ld / vec) + column * (elems / vec), valid, guard }
            })
            .collect();
        let advance = k.let_(&format!("{name}_advance"), advance);
        SliceCopies { src, dst, count: elems / vec, stage_size: rows * ld / vec, advance, copies, scales, lid, threads }
    }

    /// Whether every copy of this operand's slices is whole and aligned:
    /// rows of whole 16-byte copies (values), or N a multiple of 8 (packed:
    /// 4 words or 8 scales per copy).
    pub(super) fn copies_aligned(&self, cfg: &GemmConfig) -> Ex {
        match self.source {
            Source::Values { .. } => (self.shape.1 % cfg.copy_elems()).eq(0u32),
            Source::Packed { .. } => (self.shape.0 % 8u32).eq(0u32),
        }
    }

    /// Whether this threadgroup's slices lie inside the matrix across K
    /// (along M for A, N for B) and its stored rows are vector-aligned, so
    /// that every whole slice along K loads as vectors.
    pub(super) fn inside_across_k(&self) -> Ex {
        let (rows, cols) = self.shape;
        let across = if self.k_is_row { (self.origin + self.slice.1).le(cols) } else { (self.origin + self.slice.0).le(rows) };
        across.and(self.rows_vector_aligned())
    }

    /// Whether the stored rows are vector-aligned (whole vectors along them).
    pub(super) fn rows_vector_aligned(&self) -> Ex {
        (self.shape.1 % VEC).eq(0u32)
    }

    /// Whether the pipeline may stage this operand's slices: inside the
    /// matrix across K, or — for values stored with K along their rows (A,
    /// or B transposed) — with vector-aligned rows, the rows past the
    /// matrix zero-filled by their copies.
    pub(super) fn pipelinable(&self) -> Ex {
        match self.source {
            Source::Values { .. } if !self.k_is_row => self.rows_vector_aligned(),
            _ => self.inside_across_k(),
        }
    }

    /// Loads this thread's share of the slice starting at `k0` along K into
    /// `regs`: as whole vectors or words (`vector_loads`: the caller knows
    /// the slice lies inside the matrix with vector-aligned rows), or
    /// element by element with zeros past the edges (packed: a whole word,
    /// zero past N). `tag` keeps the names of each use apart.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn fetch(&self, k: &mut KernelBuilder, tag: &str, cfg: &GemmConfig, regs: &[Var], k0: Ex, lid: Ex, threads: u32, vector_loads: bool) {
        let (rows, cols) = self.shape;
        let (row0, col0) = if self.k_is_row { (k0, self.origin) } else { (self.origin, k0) };
        let name = &format!("{tag}{}", self.name);
        let zero = lit(cfg.input.scalar(), 0.0);
        for (u, reg) in regs.iter().enumerate() {
            self.slot(k, &format!("{tag}load_"), u as u32, lid, threads, |k, r, c| {
                let (row, col) = (k.let_(&format!("{name}r{u}"), row0 + r), k.let_(&format!("{name}c{u}"), col0 + c));
                match self.source {
                    Source::Packed { words, .. } => {
                        // Word (col / 8, row) of the [K/8][N] layout.
                        let at = k.let_(&format!("{name}at{u}"), col / VALUES_PER_WORD as u32 * rows + row);
                        if vector_loads {
                            k.assign(*reg, words.get(at));
                        } else {
                            k.if_else(row.lt(rows).and(col.lt(cols)), |k| k.assign(*reg, words.get(at)), |k| k.assign(*reg, 0u32));
                        }
                    }
                    Source::Values { scalar, vector: view } => {
                        let at = k.let_(&format!("{name}at{u}"), self.base + row * cols + col);
                        if vector_loads {
                            k.assign(*reg, view.get(at / VEC));
                            return;
                        }
                        let parts: Vec<Var> = (0..VEC).map(|e| k.var(&format!("{name}e{u}_{e}"), zero)).collect();
                        for (e, part) in parts.iter().enumerate() {
                            let e = e as u32;
                            k.if_(row.lt(rows).and((col + e).lt(cols)), |k| k.assign(*part, scalar.get(at + e)));
                        }
                        let parts: Vec<Ex> = parts.iter().map(|p| p.get()).collect();
                        k.assign(*reg, vector(cfg.input.ty(VEC as u8), &parts));
                    }
                }
            });
        }
    }

    /// Writes the registers (the slice starting at `k0` along K) to the
    /// threadgroup slice, rows padded by [`PAD`], in whole vectors; packed
    /// words are dequantized on the way (value · the group's scale, zero
    /// past N), each into two vectors of its 8 consecutive K values.
    pub(super) fn commit(&self, k: &mut KernelBuilder, tag: &str, regs: &[Var], k0: Ex, lid: Ex, threads: u32) {
        let ld = self.slice.1 + PAD;
        let name = &format!("{tag}{}", self.name);
        for (u, reg) in regs.iter().enumerate() {
            self.slot(k, &format!("{tag}store_"), u as u32, lid, threads, |k, r, c| {
                let at = (r * ld + c) / VEC;
                let Source::Packed { format, scales, group, .. } = self.source else {
                    k.store(self.staged.at(at), reg.get());
                    return;
                };
                let n = self.shape.0;
                let col = k.let_(&format!("{name}col{u}"), self.origin + r);
                let scale = k.var(&format!("{name}scale{u}"), 0.0f32);
                let inside = col.lt(n).and((k0 + c).lt(self.shape.1));
                k.if_(inside, |k| k.assign(scale, scales.get((k0 + c) / group * n + col).cast(Type::F32)));
                self.store_dequantized(k, &format!("{name}{u}"), format, r, c, reg.get(), scale.get());
            });
        }
    }

    /// Writes the 8 values of packed `word` (column `r`, K values `c …
    /// c + 7` of the slice), each times `scale` and rounded to f16, to the
    /// B slice as two vectors.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn store_dequantized(&self, k: &mut KernelBuilder, name: &str, format: Format, r: Ex, c: Ex, word: Ex, scale: Ex) {
        let at = (r * (self.slice.1 + PAD) + c) / VEC;
        let values = dequantized_halves(k, name, format, word, scale);
        let half4 = Type::vector(enigma_ir::Scalar::F16, VEC as u8);
        k.store(self.staged.at(at), vector(half4, &values[..4]));
        k.store(self.staged.at(at + 1u32), vector(half4, &values[4..]));
    }
}
