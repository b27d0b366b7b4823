//! The sanitizer corpus: small kernels with one classic GPU bug each, the
//! fixed version of each, the dispatch that exposes the bug, and what the
//! simulator's sanitizer must report — plus [`refusals`], bugs the runtime
//! refuses at dispatch before anything runs (a cooperative scope that is not
//! the threadgroup's SIMD groups), and [`library`], every seed kernel with a
//! sensible dispatch, which must run clean.
//!
//! Everything here is plain data over `enigma-ir` and the backend's
//! vocabulary ([`FindingKind`], [`DispatchMode`]): a consumer turns an [`ArgSpec`]
//! into a buffer or a value and a [`Launch`] into a dispatch
//! ([`crate::harness`] does both). The consumers:
//! `enigma-runtime/tests/sanitizer_corpus.rs`, `enigma check
//! corpus/<name>` and the `corpus_cuda` benchmark binary.
//!
//! Expected locations are IR paths (`body[5].loop[0].then[0]`) and Rust
//! source lines: the statement a report must name carries a `// @name`
//! marker comment, and [`Site::source`] finds its line in this file, so the
//! expectation follows the code when lines move.

use enigma_backend::half::f32_to_f16_bits as f32_to_f16;
pub use enigma_backend::{DispatchMode, FindingKind};
use enigma_ir::builder::*;
use enigma_ir::{Access, AtomicOp, ExecutionScope, Kernel, Literal, Matmul2dDescriptor, MemFlags, Scalar, Type};
use enigma_kernels::{two_pass_sum, dispatch_patterns, test_data};

/// One argument of a dispatch, in parameter order.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgSpec {
    /// A device buffer of elements of `elem`, initialised with `bytes`
    /// (little-endian).
    Buffer { elem: Type, bytes: Vec<u8> },
    /// A by-value parameter.
    Value(Literal),
}

impl ArgSpec {
    /// `n` zeroed elements of `elem`.
    pub fn zeros(elem: Type, n: usize) -> ArgSpec {
        ArgSpec::Buffer { elem, bytes: vec![0; n * elem.size_bytes() as usize] }
    }

    /// An f32 buffer holding `values`.
    pub fn f32s(values: &[f32]) -> ArgSpec {
        ArgSpec::Buffer { elem: Type::F32, bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }

    /// A u32 buffer holding `values`.
    pub fn u32s(values: &[u32]) -> ArgSpec {
        ArgSpec::Buffer { elem: Type::U32, bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }

    /// An f16 buffer holding `values` rounded to half.
    pub fn f16s(values: &[f32]) -> ArgSpec {
        ArgSpec::Buffer { elem: Type::F16, bytes: values.iter().flat_map(|v| f32_to_f16(*v).to_le_bytes()).collect() }
    }

    pub fn u32(v: u32) -> ArgSpec {
        ArgSpec::Value(Literal::u32(v))
    }

    pub fn f32(v: f32) -> ArgSpec {
        ArgSpec::Value(Literal::f32(v))
    }
}

/// A dispatch: mode, grid (threads or threadgroups), threadgroup size and
/// arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub mode: DispatchMode,
    pub size: [u32; 3],
    pub threads_per_threadgroup: [u32; 3],
    pub args: Vec<ArgSpec>,
}

impl Launch {
    /// A 1-D `dispatchThreads`.
    pub fn threads(grid: u32, tg: u32, args: Vec<ArgSpec>) -> Launch {
        Launch { mode: DispatchMode::Threads, size: [grid, 1, 1], threads_per_threadgroup: [tg, 1, 1], args }
    }

    /// A 1-D `dispatchThreadgroups`.
    pub fn threadgroups(groups: u32, tg: u32, args: Vec<ArgSpec>) -> Launch {
        Launch { mode: DispatchMode::Threadgroups, size: [groups, 1, 1], threads_per_threadgroup: [tg, 1, 1], args }
    }
}

/// A statement of a corpus kernel: its IR path and the marker on its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// The IR path (`body[5].loop[0].then[0]`).
    pub path: &'static str,
    /// The `// @marker` comment at the end of the statement's line in this file.
    pub marker: &'static str,
}

impl Site {
    /// The Rust source location the builder records for the statement
    /// (`crates/enigma-testing/src/corpus.rs:123`), or `None` when
    /// no line of this file carries the marker.
    pub fn source(&self) -> Option<String> {
        let tag = format!("// @{}", self.marker);
        SOURCE
            .lines()
            .position(|line| line.trim_end().ends_with(&tag))
            .map(|i| format!("{}:{}", file!(), i + 1))
    }
}

const SOURCE: &str = include_str!("corpus.rs");

/// What the sanitizer must report for the buggy variant.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    pub kind: FindingKind,
    /// The buffer or threadgroup array named (none for barriers and shuffles).
    pub variable: Option<&'static str>,
    /// The element index named (the first occurrence), where it is fixed.
    pub index: Option<u64>,
    /// The statement of one thread of the report (`None` for coverage).
    pub at: Option<Site>,
    /// The statement of the other thread, for kinds that name two. A report
    /// matches when `{first, second}` is `{at, other}` in either order:
    /// which access comes first depends on the SIMD-group schedule.
    pub other: Option<Site>,
    /// Kinds that must be reported as well (e.g. order dependence).
    pub with: &'static [FindingKind],
    /// Kinds that may be reported as well: consequences of the same bug
    /// (a race that also reads poison, a divergent barrier that leaves an
    /// output unwritten).
    pub may: &'static [FindingKind],
}

/// What validation says about the buggy kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validation {
    /// The kernel validates; it is dispatched through the runtime.
    Passes,
    /// Validation rejects it with `NonUniformBarrier` at `path`; to see the
    /// run-time behaviour, a consumer compiles it for the simulator with
    /// barrier uniformity unchecked.
    RejectsNonUniformBarrier { path: &'static str },
}

/// A kernel and the dispatch it runs with.
#[derive(Clone, Copy, Debug)]
pub struct Variant {
    pub kernel: fn() -> Kernel,
    pub launch: fn() -> Launch,
}

/// One corpus entry.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The name `enigma check corpus/<name>` takes.
    pub name: &'static str,
    /// The bug class: (a) … (i).
    pub class: &'static str,
    pub description: &'static str,
    pub buggy: Variant,
    pub fixed: Variant,
    pub validation: Validation,
    pub expected: fn() -> Expected,
}

impl Entry {
    /// The entry called `name`.
    pub fn find(name: &str) -> Option<Entry> {
        entries().into_iter().find(|e| e.name == name)
    }
}

/// A library kernel with a dispatch it must run clean under.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// The name `enigma check <name>` takes (the Rust function's name).
    pub name: &'static str,
    pub variant: Variant,
}

const N: u32 = 1024;
const TG: u32 = 256;


fn finish(k: KernelBuilder) -> Kernel {
    k.finish().expect("corpus kernels use only expressions of their own builder")
}

fn site(path: &'static str, marker: &'static str) -> Option<Site> {
    Some(Site { path, marker })
}

// ------------------------------------------------- (a) threadgroup races ---

/// A tree reduction in threadgroup memory: `s` halves each step and threads
/// `lid < s` add `sh[lid + s]` into `sh[lid]`.
fn tree_reduction(with_barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("tree_reduction");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let sh = k.threadgroup_array("sh", Type::F32, TG);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.store(sh.at(lid), input.get(gid));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let s = k.var("s", threads_per_threadgroup().x() / 2u32);
    k.while_(s.get().gt(0u32), |k| {
        k.if_(lid.lt(s), |k| k.store(sh.at(lid), sh.get(lid) + sh.get(lid + s))); // @tree_add
        if with_barrier {
            k.threadgroup_barrier(MemFlags::Threadgroup);
        }
        k.assign(s, s / 2u32);
    });
    k.if_(lid.eq(0u32), |k| k.store(out.at(threadgroup_position_in_grid().x()), sh.get(0u32)));
    finish(k)
}

fn tree_reduction_launch() -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 1)), ArgSpec::zeros(Type::F32, (N / TG) as usize)])
}

/// A 2-tap blur through threadgroup memory: each thread reads its right
/// neighbour's slot.
fn neighbour_blur(with_barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("neighbour_blur");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let tile = k.threadgroup_array("tile", Type::F32, TG);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.store(tile.at(lid), input.get(gid)); // @neighbour_store
    if with_barrier {
        k.threadgroup_barrier(MemFlags::Threadgroup);
    }
    let right = k.let_("right", tile.get((lid + 1u32) % threads_per_threadgroup().x())); // @neighbour_read
    k.store(out.at(gid), 0.5f32 * (tile.get(lid) + right));
    finish(k)
}

fn blur_launch() -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 2)), ArgSpec::zeros(Type::F32, N as usize)])
}

const DB_T: u32 = 64;
const DB_STEPS: u32 = 4;

/// A double-buffered tile loop: while computing on buffer `cur`, the threads
/// prefetch the next tile into `1 - cur`, then swap. One barrier per
/// iteration, before the swap, is what makes it correct.
fn double_buffer(with_barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("double_buffer");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let tiles = k.threadgroup_array("tiles", Type::F32, 2 * DB_T);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let base = k.let_("base", group * (DB_T * DB_STEPS));
    k.store(tiles.at(lid), input.get(base + lid));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let acc = k.var("acc", 0.0f32);
    let cur = k.var("cur", 0u32);
    k.for_range("t", 0u32, DB_STEPS, 1u32, |k, t| {
        k.if_((t + 1u32).lt(DB_STEPS), |k| {
            k.store(tiles.at((1u32 - cur.get()) * DB_T + lid), input.get(base + (t + 1u32) * DB_T + lid)); // @db_prefetch
        });
        k.assign(acc, acc + tiles.get(cur * DB_T + (lid + 1u32) % DB_T)); // @db_read
        if with_barrier {
            k.threadgroup_barrier(MemFlags::Threadgroup);
        }
        k.assign(cur, 1u32 - cur.get());
    });
    k.store(out.at(group * DB_T + lid), acc.get());
    finish(k)
}

fn double_buffer_launch() -> Launch {
    let groups = 2;
    Launch::threadgroups(
        groups,
        DB_T,
        vec![ArgSpec::f32s(&test_data((groups * DB_T * DB_STEPS) as usize, 3)), ArgSpec::zeros(Type::F32, (groups * DB_T) as usize)],
    )
}

/// The double-buffered loop with asynchronous copies: the copies of tile
/// `t + 1` are in flight while the threads read tile `t`. `async_wait(1)`
/// retires every group but the newest, so tile `t` has landed; the bug
/// waits with `pending` 2, which leaves tile `t` itself in flight.
fn async_double_buffer(pending: u32) -> Kernel {
    let mut k = KernelBuilder::new("async_double_buffer");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let tiles = k.threadgroup_array("tiles", Type::F32, 2 * DB_T);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let group = k.let_("group", threadgroup_position_in_grid().x());
    let base = k.let_("base", group * (DB_T * DB_STEPS));
    k.async_copy(tiles.at(lid), input.at(base + lid), 1, true); // @async_first
    k.async_commit();
    let acc = k.var("acc", 0.0f32);
    k.for_range("t", 0u32, DB_STEPS, 1u32, |k, t| {
        k.if_((t + 1u32).lt(DB_STEPS), |k| {
            k.async_copy(tiles.at((t + 1u32) % 2u32 * DB_T + lid), input.at(base + (t + 1u32) * DB_T + lid), 1, true);
        });
        k.async_commit();
        k.async_wait(pending);
        k.threadgroup_barrier(MemFlags::Threadgroup);
        k.assign(acc, acc + tiles.get(t % 2u32 * DB_T + (lid + 1u32) % DB_T)); // @async_read
        k.threadgroup_barrier(MemFlags::Threadgroup);
    });
    k.store(out.at(group * DB_T + lid), acc.get());
    finish(k)
}

/// Each SIMD group's total goes to threadgroup memory; thread 0 sums them.
/// The bug: every SIMD group writes the same slot.
fn simd_totals(one_slot: bool) -> Kernel {
    let mut k = KernelBuilder::new("simd_totals");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let totals = k.threadgroup_array("totals", Type::F32, 32);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let total = k.let_("total", simd_sum(input.get(thread_position_in_grid().x())));
    let slot = if one_slot { Ex::from(0u32) } else { sg };
    k.if_(lane.eq(0u32), |k| k.store(totals.at(slot), total)); // @one_slot
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(lid.eq(0u32), |k| {
        let sum = k.var("sum", 0.0f32);
        let count = if one_slot { Ex::from(1u32) } else { simdgroups_per_threadgroup() };
        k.for_range("i", 0u32, count, 1u32, |k, i| k.assign(sum, sum + totals.get(i)));
        k.store(out.at(threadgroup_position_in_grid().x()), sum.get());
    });
    finish(k)
}

fn simd_totals_launch() -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 4)), ArgSpec::zeros(Type::F32, (N / TG) as usize)])
}

const BINS: u32 = 16;

/// A 16-bin histogram in threadgroup memory, merged atomically into device
/// memory. The bug: `bins[b] = bins[b] + 1` instead of an atomic add.
fn histogram(atomic: bool) -> Kernel {
    let mut k = KernelBuilder::new("histogram");
    let keys = k.buffer("keys", Type::U32, Access::Read);
    let hist = k.buffer("hist", Type::U32, Access::ReadWrite);
    let bins = k.threadgroup_array("bins", Type::U32, BINS);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.if_(lid.lt(BINS), |k| k.store(bins.at(lid), 0u32));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let b = k.let_("b", keys.get(thread_position_in_grid().x()) % BINS);
    if atomic {
        k.atomic(AtomicOp::Add, bins.at(b), 1u32);
    } else {
        k.store(bins.at(b), bins.get(b) + 1u32); // @histogram_update
    }
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(lid.lt(BINS), |k| k.atomic(AtomicOp::Add, hist.at(lid), bins.get(lid)));
    finish(k)
}

fn histogram_launch() -> Launch {
    let keys: Vec<u32> = (0..N).map(|i| i.wrapping_mul(2_654_435_761) >> 7).collect();
    Launch::threads(N, TG, vec![ArgSpec::u32s(&keys), ArgSpec::zeros(Type::U32, BINS as usize)])
}

// ------------------------------------------------- (b) SIMD-group races ---

/// Lane 0 of each SIMD group computes a value into threadgroup memory; the
/// other lanes of the group read it.
fn lane0_publish(with_barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("lane0_publish");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let slot = k.threadgroup_array("slot", Type::F32, 32);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    k.if_(lane.eq(0u32), |k| k.store(slot.at(sg), input.get(gid) * 2.0f32)); // @lane0_write
    if with_barrier {
        k.simdgroup_barrier(MemFlags::Threadgroup);
    }
    k.store(out.at(gid), input.get(gid) + slot.get(sg)); // @lanes_read
    finish(k)
}

/// Seed 002 §7.4's fused dequantisation: lanes 0–7 of each SIMD group
/// dequantise one packed INT4 word each (eight K values of one row of an 8×8
/// B fragment) into the SIMD group's own staging area in threadgroup memory;
/// the whole SIMD group then loads the fragment with `simdgroup_load` and
/// multiplies it by its 8×8 tile of A. Without the `simdgroup_barrier`
/// between the two, the matrix load reads elements lanes 0–7 may not have
/// written yet.
fn fused_dequant_staging(with_barrier: bool) -> Kernel {
    let half8 = enigma_ir::MatrixType::new(Scalar::F16, 8, 8);
    let float8 = enigma_ir::MatrixType::new(Scalar::F32, 8, 8);
    let mut k = KernelBuilder::new("fused_dequant_staging");
    let packed = k.buffer("packed", Type::U32, Access::Read);
    let a = k.buffer("a", Type::F16, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let stage = k.threadgroup_array("stage", Type::F16, DQ_TG / 32 * 64);
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let fragment = k.let_("fragment", threadgroup_position_in_grid().x() * (DQ_TG / 32) + sg);
    k.if_(lane.lt(8u32), |k| {
        let word = k.let_("word", packed.get(fragment * 8u32 + lane));
        k.for_range("j", 0u32, 8u32, 1u32, |k, j| {
            let nibble = ((word >> (j * 4u32)) & 15u32).cast(Type::I32) - 8i32;
            k.store(stage.at(sg * 64u32 + lane * 8u32 + j), nibble.cast(Type::F16)); // @stage_write
        });
    });
    if with_barrier {
        k.simdgroup_barrier(MemFlags::Threadgroup);
    }
    let b = k.let_("b", matrix_load(half8, stage, sg * 64u32, 8u32, false)); // @stage_load
    let ma = k.let_("ma", matrix_load(half8, a, fragment * 64u32, 8u32, false));
    k.matrix_store(matrix_multiply_accumulate(ma, b, matrix_fill(float8, 0.0f32)), out, fragment * 64u32, 8u32, false);
    finish(k)
}

/// Threads of the first SIMD group stage one 8×8 f16 tile for the whole
/// threadgroup; every SIMD group then loads it with `simdgroup_load`. The
/// load needs a `threadgroup_barrier`: a `simdgroup_barrier` orders only the
/// staging SIMD group.
fn shared_tile_load(with_barrier: bool) -> Kernel {
    let half8 = enigma_ir::MatrixType::new(Scalar::F16, 8, 8);
    let mut k = KernelBuilder::new("shared_tile_load");
    let b = k.buffer("b", Type::F16, Access::Read);
    let out = k.buffer("out", Type::F16, Access::ReadWrite);
    let tile = k.threadgroup_array("tile", Type::F16, 64);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let fragment = k.let_("fragment", threadgroup_position_in_grid().x() * (DQ_TG / 32) + sg);
    k.if_(lid.lt(32u32), |k| {
        k.store(tile.at(lid * 2u32), b.get(lid * 2u32)); // @tile_write
        k.store(tile.at(lid * 2u32 + 1u32), b.get(lid * 2u32 + 1u32));
    });
    if with_barrier {
        k.threadgroup_barrier(MemFlags::Threadgroup);
    } else {
        k.simdgroup_barrier(MemFlags::Threadgroup);
    }
    let m = k.let_("m", matrix_load(half8, tile, 0u32, 8u32, true)); // @tile_load
    k.matrix_store(m, out, fragment * 64u32, 8u32, false);
    finish(k)
}

/// Threads of a matrix corpus kernel's threadgroup: four SIMD groups.
const DQ_TG: u32 = 128;

fn dequant_launch() -> Launch {
    let groups = 2u32;
    let fragments = (groups * DQ_TG / 32) as usize;
    let words: Vec<u32> = (0..fragments * 8).map(|i| (i as u32).wrapping_mul(0x9E37_79B9)).collect();
    Launch::threadgroups(
        groups,
        DQ_TG,
        vec![ArgSpec::u32s(&words), ArgSpec::f16s(&test_data(fragments * 64, 13)), ArgSpec::zeros(Type::F32, fragments * 64)],
    )
}

fn shared_tile_launch() -> Launch {
    let groups = 2u32;
    let fragments = (groups * DQ_TG / 32) as usize;
    Launch::threadgroups(groups, DQ_TG, vec![ArgSpec::f16s(&test_data(64, 14)), ArgSpec::zeros(Type::F16, fragments * 64)])
}

fn lane0_launch() -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 5)), ArgSpec::zeros(Type::F32, N as usize)])
}

/// Shifts a threadgroup array left by one within each SIMD group, in place:
/// every lane reads its right neighbour's slot, then overwrites its own.
fn simd_shift(with_barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("simd_shift");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let buf = k.threadgroup_array("buf", Type::F32, TG);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let gid = k.let_("gid", thread_position_in_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    k.store(buf.at(lid), input.get(gid));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let right = k.var("right", 0.0f32);
    k.if_(lane.lt(31u32), |k| k.assign(right, buf.get(lid + 1u32))); // @shift_read
    if with_barrier {
        k.simdgroup_barrier(MemFlags::Threadgroup);
    }
    k.store(buf.at(lid), right.get()); // @shift_write
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.store(out.at(gid), buf.get(lid));
    finish(k)
}

fn simd_shift_launch() -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 6)), ArgSpec::zeros(Type::F32, N as usize)])
}

// ----------------------------------------------------- (c) device races ---

/// Scales `input` into `out`; the bug indexes `out` by the thread's index in
/// its threadgroup, so every threadgroup writes the same 256 elements.
fn scale_out(by_lid: bool) -> Kernel {
    let mut k = KernelBuilder::new("scale_out");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let index = if by_lid { lid } else { gid };
    k.store(out.at(index), input.get(gid) * 2.0f32); // @missing_offset
    finish(k)
}

fn scale_out_launch(out_len: u32) -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 7)), ArgSpec::zeros(Type::F32, out_len as usize)])
}

/// `data[i] += data[i - 1]` in place: the thread at a threadgroup's first
/// element reads what the previous threadgroup's last thread writes.
fn prefix_step_in_place() -> Kernel {
    let mut k = KernelBuilder::new("prefix_step");
    let data = k.buffer("data", Type::F32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let left = k.var("left", 0.0f32);
    k.if_(gid.gt(0u32), |k| k.assign(left, data.get(gid - 1u32))); // @inplace_read
    k.store(data.at(gid), data.get(gid) + left); // @inplace_write
    finish(k)
}

/// The same step out of place.
fn prefix_step_out_of_place() -> Kernel {
    let mut k = KernelBuilder::new("prefix_step");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let left = k.var("left", 0.0f32);
    k.if_(gid.gt(0u32), |k| k.assign(left, input.get(gid - 1u32)));
    k.store(out.at(gid), input.get(gid) + left);
    finish(k)
}

/// Each threadgroup adds its sum into `total[0]`; the bug is a plain
/// read-modify-write instead of an atomic add.
fn global_sum(atomic: bool) -> Kernel {
    let mut k = KernelBuilder::new("global_sum");
    let input = k.buffer("input", Type::U32, Access::Read);
    let total = k.buffer("total", Type::U32, Access::ReadWrite);
    let partials = k.threadgroup_array("partials", Type::U32, 32);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let mine = k.let_("mine", simd_sum(input.get(thread_position_in_grid().x())));
    k.if_(lane.eq(0u32), |k| k.store(partials.at(sg), mine));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(lid.eq(0u32), |k| {
        let sum = k.var("sum", 0u32);
        k.for_range("i", 0u32, simdgroups_per_threadgroup(), 1u32, |k, i| k.assign(sum, sum + partials.get(i)));
        if atomic {
            k.atomic(AtomicOp::Add, total.at(0u32), sum.get());
        } else {
            k.store(total.at(0u32), total.get(0u32) + sum); // @global_accumulate
        }
    });
    finish(k)
}

fn global_sum_launch() -> Launch {
    let values: Vec<u32> = (0..N).map(|i| i % 7).collect();
    Launch::threads(N, TG, vec![ArgSpec::u32s(&values), ArgSpec::zeros(Type::U32, 1)])
}

// ----------------------------------------------- (d) uninitialised reads ---

/// A 3-point stencil through a tile with a one-element halo on each side.
/// The bug: the halo is never loaded.
fn halo_stencil(load_halo: bool) -> Kernel {
    let mut k = KernelBuilder::new("halo_stencil");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let tile = k.threadgroup_array("tile", Type::F32, TG + 2);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.store(tile.at(lid + 1u32), input.get(gid));
    if load_halo {
        k.if_(lid.eq(0u32), |k| {
            let left = k.var("left", 0.0f32);
            k.if_(gid.gt(0u32), |k| k.assign(left, input.get(gid - 1u32)));
            k.store(tile.at(0u32), left.get());
        });
        k.if_(lid.eq(threads_per_threadgroup().x() - 1u32), |k| {
            let right = k.var("right", 0.0f32);
            k.if_((gid + 1u32).lt(n), |k| k.assign(right, input.get(gid + 1u32)));
            k.store(tile.at(lid + 2u32), right.get());
        });
    }
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.store(out.at(gid), (tile.get(lid) + tile.get(lid + 1u32) + tile.get(lid + 2u32)) / 3.0f32); // @halo_read
    finish(k)
}

fn halo_launch() -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 8)), ArgSpec::zeros(Type::F32, N as usize), ArgSpec::u32(N)])
}

/// The second stage of a two-stage threadgroup sum: SIMD group 0 reduces
/// the per-SIMD-group partials. The bug: all 32 lanes read a partial,
/// though only 8 SIMD groups wrote one.
fn partials_sum(guarded: bool) -> Kernel {
    let mut k = KernelBuilder::new("partials_sum");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let partials = k.threadgroup_array("partials", Type::F32, 32);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let sg = k.let_("sg", simdgroup_index_in_threadgroup());
    let mine = k.let_("mine", simd_sum(input.get(thread_position_in_grid().x())));
    k.if_(lane.eq(0u32), |k| k.store(partials.at(sg), mine));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    k.if_(sg.eq(0u32), |k| {
        let v = k.var("v", 0.0f32);
        if guarded {
            k.if_(lane.lt(simdgroups_per_threadgroup()), |k| k.assign(v, partials.get(lane)));
        } else {
            k.assign(v, partials.get(lane)); // @partials_read
        }
        let total = k.let_("total", simd_sum(v.get()));
        k.if_(lid.eq(0u32), |k| k.store(out.at(threadgroup_position_in_grid().x()), total));
    });
    finish(k)
}

fn partials_launch() -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 9)), ArgSpec::zeros(Type::F32, (N / TG) as usize)])
}

// ------------------------------------------------ (e) inactive-lane reads ---

/// Lanes 0–15 add the value of lane `l + 16`. The bug: the shuffle sits
/// inside `if (lane < 16)`, where lanes 16–31 are inactive.
fn fold_halves(shuffle_in_branch: bool) -> Kernel {
    let mut k = KernelBuilder::new("fold_halves");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let x = k.let_("x", input.get(gid));
    let r = k.var("r", x);
    if shuffle_in_branch {
        k.if_(lane.lt(16u32), |k| k.assign(r, x + simd_shuffle_down(x, 16u32))); // @shuffle_in_branch
    } else {
        let upper = k.let_("upper", simd_shuffle_down(x, 16u32));
        k.if_(lane.lt(16u32), |k| k.assign(r, x + upper));
    }
    k.store(out.at(gid), r.get());
    finish(k)
}

/// Lanes other than 0 scale by lane 0's value. The bug: the broadcast sits
/// inside `if (lane != 0)`, so lane 0 is inactive when it is read.
fn scale_by_lane0(broadcast_in_branch: bool) -> Kernel {
    let mut k = KernelBuilder::new("scale_by_lane0");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let lane = k.let_("lane", thread_index_in_simdgroup());
    let x = k.let_("x", input.get(gid));
    let r = k.var("r", x);
    if broadcast_in_branch {
        k.if_(lane.ne(0u32), |k| k.assign(r, x * simd_broadcast(x, 0u32))); // @broadcast_in_branch
    } else {
        let head = k.let_("head", simd_broadcast(x, 0u32));
        k.if_(lane.ne(0u32), |k| k.assign(r, x * head));
    }
    k.store(out.at(gid), r.get());
    finish(k)
}

/// A SIMD-group sum. The bug: a butterfly of `simd_shuffle_xor`, which reads
/// lanes that do not exist in the partial last SIMD group of a grid that is
/// not a multiple of 32; `simd_sum` sums the active lanes.
fn butterfly_sum(butterfly: bool) -> Kernel {
    let mut k = KernelBuilder::new("butterfly_sum");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let gid = k.let_("gid", thread_position_in_grid().x());
    let v = k.var("v", input.get(gid));
    if butterfly {
        k.assign(v, v + simd_shuffle_xor(v.get(), 16u32)); // @butterfly_16
        for mask in [8u32, 4, 2, 1] {
            k.assign(v, v + simd_shuffle_xor(v.get(), mask));
        }
    } else {
        k.assign(v, simd_sum(v.get()));
    }
    k.store(out.at(gid), v.get());
    finish(k)
}

fn butterfly_launch() -> Launch {
    let n = 100;
    Launch::threads(n, 128, vec![ArgSpec::f32s(&test_data(n as usize, 10)), ArgSpec::zeros(Type::F32, n as usize)])
}

// --------------------------------------------- (f) divergent barriers ---
//
// Validation rejects every one of these (a barrier in thread-dependent
// control flow); the corpus keeps them to show what happens at run time.

/// The first 16 threads load a coefficient table; the bug puts the barrier
/// inside their `if`.
fn coefficient_table(barrier_in_branch: bool) -> Kernel {
    let mut k = KernelBuilder::new("coefficient_table");
    let input = k.buffer("input", Type::F32, Access::Read);
    let coeffs = k.buffer("coeffs", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let table = k.threadgroup_array("table", Type::F32, 16);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.if_(lid.lt(16u32), |k| { // @table_branch
        k.store(table.at(lid), coeffs.get(lid));
        if barrier_in_branch {
            k.threadgroup_barrier(MemFlags::Threadgroup); // @barrier_in_branch
        }
    });
    if !barrier_in_branch {
        k.threadgroup_barrier(MemFlags::Threadgroup);
    }
    k.store(out.at(gid), input.get(gid) * table.get(lid % 16u32));
    finish(k)
}

fn coefficient_launch() -> Launch {
    Launch::threads(
        N,
        TG,
        vec![ArgSpec::f32s(&test_data(N as usize, 11)), ArgSpec::f32s(&test_data(16, 12)), ArgSpec::zeros(Type::F32, N as usize)],
    )
}

/// A neighbour blur with the bounds check of seed 000's pitfall 3. The bug:
/// `if (gid >= n) return;` before a barrier.
fn guarded_blur(early_return: bool) -> Kernel {
    let mut k = KernelBuilder::new("guarded_blur");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let tile = k.threadgroup_array("tile", Type::F32, TG);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let gid = k.let_("gid", thread_position_in_grid().x());
    if early_return {
        k.if_(gid.ge(n), |k| k.return_()); // @early_return
        k.store(tile.at(lid), input.get(gid));
    } else {
        let v = k.var("v", 0.0f32);
        k.if_(gid.lt(n), |k| k.assign(v, input.get(gid)));
        k.store(tile.at(lid), v.get());
    }
    k.threadgroup_barrier(MemFlags::Threadgroup); // @barrier_after_return
    let right = tile.get((lid + 1u32) % threads_per_threadgroup().x());
    if early_return {
        k.store(out.at(gid), 0.5f32 * (tile.get(lid) + right));
    } else {
        k.if_(gid.lt(n), |k| k.store(out.at(gid), 0.5f32 * (tile.get(lid) + right)));
    }
    finish(k)
}

fn guarded_blur_launch() -> Launch {
    // 1000 elements, four whole threadgroups: the last 24 threads are past the end.
    let n = 1000;
    Launch::threadgroups(
        N / TG,
        TG,
        vec![ArgSpec::f32s(&test_data(n as usize, 13)), ArgSpec::zeros(Type::F32, n as usize), ArgSpec::u32(n)],
    )
}

/// A threadgroup strides over `n` inputs through a tile, one barrier per
/// pass. The bug: the loop runs `for (i = lid; i < n; i += 256)`, so when
/// `n` is not a multiple of 256 the last pass is made by some threads only.
fn strided_tiles(per_thread_trip: bool) -> Kernel {
    let mut k = KernelBuilder::new("strided_tiles");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let n = k.value("n", Type::U32);
    let tile = k.threadgroup_array("tile", Type::F32, TG);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let size = k.let_("size", threads_per_threadgroup().x());
    let acc = k.var("acc", 0.0f32);
    if per_thread_trip {
        k.for_range("i", lid, n, size, |k, i| { // @strided_loop
            k.store(tile.at(lid), input.get(i));
            k.threadgroup_barrier(MemFlags::Threadgroup); // @loop_barrier
            k.assign(acc, acc + tile.get((lid + 1u32) % size));
            k.threadgroup_barrier(MemFlags::Threadgroup);
        });
    } else {
        k.for_range("base", 0u32, n, size, |k, base| {
            let v = k.var("v", 0.0f32);
            k.if_((base + lid).lt(n), |k| k.assign(v, input.get(base + lid)));
            k.store(tile.at(lid), v.get());
            k.threadgroup_barrier(MemFlags::Threadgroup);
            k.assign(acc, acc + tile.get((lid + 1u32) % size));
            k.threadgroup_barrier(MemFlags::Threadgroup);
        });
    }
    k.store(out.at(lid), acc.get());
    finish(k)
}

fn strided_launch() -> Launch {
    let n = 1000;
    Launch::threadgroups(1, TG, vec![ArgSpec::f32s(&test_data(n as usize, 14)), ArgSpec::zeros(Type::F32, TG as usize), ArgSpec::u32(n)])
}

// --------------------------------------------------- (g) out of bounds ---

/// `data[tid] *= factor` with no bounds check, dispatched in whole
/// threadgroups over 1000 elements; the fix is seed 000's pitfall 3.
fn scale_in_place(checked: bool) -> Kernel {
    let mut k = KernelBuilder::new("scale_in_place");
    let data = k.buffer("data", Type::F32, Access::ReadWrite);
    let count = k.value("count", Type::U32);
    let factor = k.value("factor", Type::F32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    if checked {
        k.if_(tid.ge(count), |k| k.return_());
    }
    k.store(data.at(tid), data.get(tid) * factor); // @unchecked_access
    finish(k)
}

fn scale_in_place_launch() -> Launch {
    let n = 1000;
    Launch::threadgroups(N / TG, TG, vec![ArgSpec::f32s(&test_data(n as usize, 15)), ArgSpec::u32(n), ArgSpec::f32(0.5)])
}

/// A forward difference through threadgroup memory. The bug: the last
/// thread reads `tile[lid + 1]` past the end of the tile.
fn forward_difference(checked: bool) -> Kernel {
    let mut k = KernelBuilder::new("forward_difference");
    let input = k.buffer("input", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let tile = k.threadgroup_array("tile", Type::F32, TG);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    let gid = k.let_("gid", thread_position_in_grid().x());
    k.store(tile.at(lid), input.get(gid));
    k.threadgroup_barrier(MemFlags::Threadgroup);
    let next = k.var("next", 0.0f32);
    if checked {
        k.if_((lid + 1u32).lt(threads_per_threadgroup().x()), |k| k.assign(next, tile.get(lid + 1u32)));
    } else {
        k.assign(next, tile.get(lid + 1u32)); // @tile_overrun
    }
    k.store(out.at(gid), next - tile.get(lid));
    finish(k)
}

fn forward_difference_launch() -> Launch {
    Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 16)), ArgSpec::zeros(Type::F32, N as usize)])
}

// ---------------------------------------------------------- (h) coverage ---

/// `data[tid] *= factor` over 4096 elements.
fn scale_all() -> Kernel {
    let mut k = KernelBuilder::new("scale_all");
    let data = k.buffer("data", Type::F32, Access::ReadWrite);
    let factor = k.value("factor", Type::F32);
    let tid = k.let_("tid", thread_position_in_grid().x());
    k.store(data.at(tid), data.get(tid) * factor);
    finish(k)
}

fn scale_all_launch(grid: u32) -> Launch {
    Launch::threads(grid, TG, vec![ArgSpec::f32s(&test_data(4096, 17)), ArgSpec::f32(2.0)])
}

const ROWS: u32 = 64;
const COLS: u32 = 100;

fn row_sum_launch(mode: DispatchMode) -> Launch {
    let args = vec![ArgSpec::f32s(&test_data((ROWS * COLS) as usize, 18)), ArgSpec::zeros(Type::F32, ROWS as usize), ArgSpec::u32(COLS)];
    Launch { mode, size: [ROWS, 1, 1], threads_per_threadgroup: [TG, 1, 1], args }
}

// ------------------------------- (i) device races inside a threadgroup ---

/// Publishes a SIMD group's largest input in `out[0]`. The bug: every lane
/// stores its own input there; the fix stores `simd_max` from every lane
/// (one value, which is not a race).
fn simd_max_publish(each_lane_own_value: bool) -> Kernel {
    let mut k = KernelBuilder::new("simd_max_publish");
    let a = k.buffer("a", Type::F32, Access::Read);
    let out = k.buffer("out", Type::F32, Access::ReadWrite);
    let t = k.let_("t", thread_position_in_grid().x());
    let value = if each_lane_own_value { a.get(t) } else { simd_max(a.get(t)) };
    k.store(out.at(0u32), value); // @lanes_store
    finish(k)
}

fn simd_max_publish_launch() -> Launch {
    Launch::threads(32, 32, vec![ArgSpec::f32s(&test_data(32, 30)), ArgSpec::zeros(Type::F32, 1)])
}

/// A dot product of 64 elements by one threadgroup of two SIMD groups. The
/// bug: `out[0] = out[0] + a[i] * b[i]` by every thread; the fix adds
/// atomically.
fn dot_product(atomic: bool) -> Kernel {
    let mut k = KernelBuilder::new("dot_product");
    let a = k.buffer("a", Type::U32, Access::Read);
    let b = k.buffer("b", Type::U32, Access::Read);
    let out = k.buffer("out", Type::U32, Access::ReadWrite);
    let i = k.let_("i", thread_position_in_grid().x());
    if atomic {
        k.atomic(AtomicOp::Add, out.at(0u32), a.get(i) * b.get(i));
    } else {
        k.store(out.at(0u32), out.get(0u32) + a.get(i) * b.get(i)); // @dot_accumulate
    }
    finish(k)
}

fn dot_product_launch() -> Launch {
    let v: Vec<u32> = (0..64).collect();
    Launch::threads(64, 64, vec![ArgSpec::u32s(&v), ArgSpec::u32s(&v), ArgSpec::zeros(Type::U32, 1)])
}

/// Every thread counts itself in `count[0]` atomically; thread 0 of each
/// threadgroup then records the count it sees in `seen[group]`. The bug:
/// that read is a plain load; the fix reads atomically (an add of 0).
fn counter_snapshot(atomic_read: bool) -> Kernel {
    let mut k = KernelBuilder::new("counter_snapshot");
    let count = k.buffer("count", Type::U32, Access::ReadWrite);
    let seen = k.buffer("seen", Type::U32, Access::ReadWrite);
    let lid = k.let_("lid", thread_index_in_threadgroup());
    k.atomic(AtomicOp::Add, count.at(0u32), 1u32); // @counter_add
    k.if_(lid.eq(0u32), |k| {
        let now = if atomic_read { k.atomic_fetch(AtomicOp::Add, count.at(0u32), 0u32) } else { k.let_("now", count.get(0u32)) }; // @counter_read
        k.store(seen.at(threadgroup_position_in_grid().x()), now);
    });
    finish(k)
}

fn counter_snapshot_launch() -> Launch {
    Launch::threads(128, 64, vec![ArgSpec::zeros(Type::U32, 1), ArgSpec::zeros(Type::U32, 2)])
}

// ------------------------------------- (i) cooperative tensor layout ---

/// One SIMD group's 32×32 product into a cooperative tensor, written out
/// slot by slot: at each slot's coordinates (fixed), or at
/// `lane·capacity + slot`, as if slot `i` of lane `l` were a fixed element.
fn cooperative_slots(by_index: bool) -> Kernel {
    let mut k = KernelBuilder::new("cooperative_slots");
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let c = k.buffer("C", Type::F32, Access::ReadWrite);
    let op = Matmul2d::new(Matmul2dDescriptor::new(32, 32, Some(16)), ExecutionScope::Simdgroup);
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    k.matmul2d_run(&op, &Tensor::new(a, [16u32, 32u32]), &Tensor::new(b, [32u32, 16u32]), acc);
    let lane = k.let_("lane", thread_index_in_simdgroup());
    k.for_range("i", 0u32, acc.get_capacity(), 1u32, |k, i| {
        k.if_(acc.is_valid_element(i), |k| {
            let [col, row] = acc.get_multidimensional_index(i);
            let at = if by_index { lane * acc.get_capacity() + i } else { row * 32u32 + col };
            k.store(c.at(at), acc.get(i));
        });
    });
    finish(k)
}

fn cooperative_slots_launch() -> Launch {
    let values = |n: usize, seed: usize| -> Vec<f32> { (0..n).map(|i| ((i * 7 + seed) % 9) as f32 * 0.5 - 2.0).collect() };
    Launch::threadgroups(1, 32, vec![ArgSpec::f16s(&values(32 * 16, 1)), ArgSpec::f16s(&values(16 * 32, 2)), ArgSpec::zeros(Type::F32, 32 * 32)])
}

/// Four SIMD groups' 64×64 product (k = 16) of f16 tiles, stored: a
/// `matmul2d` at `execution_simdgroups(4)`.
fn cooperative_four_simdgroups() -> Kernel {
    let mut k = KernelBuilder::new("cooperative_four_simdgroups");
    let a = k.buffer("A", Type::F16, Access::Read);
    let b = k.buffer("B", Type::F16, Access::Read);
    let c = k.buffer("C", Type::F32, Access::ReadWrite);
    let op = Matmul2d::new(Matmul2dDescriptor::new(64, 64, Some(16)), ExecutionScope::Simdgroups(4));
    let acc = k.destination_cooperative_tensor(&op, "acc", Scalar::F32);
    k.matmul2d_run(&op, &Tensor::new(a, [16u32, 64u32]), &Tensor::new(b, [64u32, 16u32]), acc);
    k.cooperative_store(acc, &Tensor::new(c, [64u32, 64u32]));
    finish(k)
}

/// One threadgroup of `threads` threads for [`cooperative_four_simdgroups`].
fn cooperative_four_launch(threads: u32) -> Launch {
    let values = |n: usize, seed: usize| -> Vec<f32> { (0..n).map(|i| ((i * 5 + seed) % 9) as f32 * 0.5 - 2.0).collect() };
    Launch::threadgroups(1, threads, vec![ArgSpec::f16s(&values(64 * 16, 1)), ArgSpec::f16s(&values(16 * 64, 2)), ArgSpec::zeros(Type::F32, 64 * 64)])
}

// ------------------------------------------------------------ the corpus ---

/// Every corpus entry, at least one per bug class (a)–(i).
pub fn entries() -> Vec<Entry> {
    use FindingKind::*;
    vec![
        Entry {
            name: "tree_reduction_missing_barrier",
            class: "(a) threadgroup race, read–write",
            description: "tree reduction in threadgroup memory with no threadgroup_barrier between its steps",
            buggy: Variant { kernel: || tree_reduction(false), launch: tree_reduction_launch },
            fixed: Variant { kernel: || tree_reduction(true), launch: tree_reduction_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: ThreadgroupRace,
                variable: Some("sh"),
                index: None,
                at: site("body[5].loop[0].then[0]", "tree_add"),
                other: site("body[5].loop[0].then[0]", "tree_add"),
                with: &[],
                may: &[SimdgroupRace, OrderDependence],
            },
        },
        Entry {
            name: "neighbour_read_before_barrier",
            class: "(a) threadgroup race, read–write",
            description: "each thread reads its neighbour's threadgroup slot before the threadgroup_barrier that publishes it",
            buggy: Variant { kernel: || neighbour_blur(false), launch: blur_launch },
            fixed: Variant { kernel: || neighbour_blur(true), launch: blur_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: ThreadgroupRace,
                variable: Some("tile"),
                index: None,
                at: site("body[3]", "neighbour_read"),
                other: site("body[2]", "neighbour_store"),
                with: &[],
                may: &[SimdgroupRace, UninitializedRead, OrderDependence],
            },
        },
        Entry {
            name: "double_buffer_swap_without_barrier",
            class: "(a) threadgroup race, read–write",
            description: "double-buffered tile loop that prefetches into one buffer, computes on the other and swaps with no barrier",
            buggy: Variant { kernel: || double_buffer(false), launch: double_buffer_launch },
            fixed: Variant { kernel: || double_buffer(true), launch: double_buffer_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: ThreadgroupRace,
                variable: Some("tiles"),
                index: None,
                at: site("body[7].loop[1]", "db_read"),
                other: site("body[7].loop[0].then[0]", "db_prefetch"),
                with: &[],
                may: &[SimdgroupRace, UninitializedRead, OrderDependence],
            },
        },
        Entry {
            name: "async_copy_read_in_flight",
            class: "(a) threadgroup race, asynchronous copy",
            description: "two-stage pipeline of asynchronous copies whose async_wait leaves the tile being read in flight (pending 2 instead of 1)",
            buggy: Variant { kernel: || async_double_buffer(2), launch: double_buffer_launch },
            fixed: Variant { kernel: || async_double_buffer(1), launch: double_buffer_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: AsyncCopyInFlight,
                variable: Some("tiles"),
                index: None,
                at: site("body[6].loop[4]", "async_read"),
                other: site("body[3]", "async_first"),
                with: &[],
                may: &[ThreadgroupRace, SimdgroupRace, UninitializedRead, OrderDependence],
            },
        },
        Entry {
            name: "simd_totals_one_slot",
            class: "(a) threadgroup race, write–write",
            description: "every SIMD group stores its total to the same threadgroup slot; the last writer wins",
            buggy: Variant { kernel: || simd_totals(true), launch: simd_totals_launch },
            fixed: Variant { kernel: || simd_totals(false), launch: simd_totals_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: ThreadgroupRace,
                variable: Some("totals"),
                index: Some(0),
                at: site("body[4].then[0]", "one_slot"),
                other: site("body[4].then[0]", "one_slot"),
                with: &[OrderDependence],
                may: &[],
            },
        },
        Entry {
            name: "histogram_without_atomics",
            class: "(a) threadgroup race, read–write and write–write",
            description: "threadgroup histogram updated with bins[b] = bins[b] + 1 instead of an atomic add",
            buggy: Variant { kernel: || histogram(false), launch: histogram_launch },
            fixed: Variant { kernel: || histogram(true), launch: histogram_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: ThreadgroupRace,
                variable: Some("bins"),
                index: None,
                at: site("body[4]", "histogram_update"),
                other: site("body[4]", "histogram_update"),
                with: &[SimdgroupRace],
                may: &[OrderDependence],
            },
        },
        Entry {
            name: "lane0_write_without_simdgroup_barrier",
            class: "(b) SIMD-group race",
            description: "lane 0 writes threadgroup memory and the other lanes of its SIMD group read it with no simdgroup_barrier",
            buggy: Variant { kernel: || lane0_publish(false), launch: lane0_launch },
            fixed: Variant { kernel: || lane0_publish(true), launch: lane0_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: SimdgroupRace,
                variable: Some("slot"),
                index: None,
                at: site("body[4]", "lanes_read"),
                other: site("body[3].then[0]", "lane0_write"),
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "fused_dequant_staging_without_simdgroup_barrier",
            class: "(b) SIMD-group race, matrix load",
            description: "lanes 0–7 dequantise packed INT4 words into a per-SIMD-group 8×8 staging area (seed 002 §7.4) and the SIMD group reads it with simdgroup_load before a simdgroup_barrier",
            buggy: Variant { kernel: || fused_dequant_staging(false), launch: dequant_launch },
            fixed: Variant { kernel: || fused_dequant_staging(true), launch: dequant_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: SimdgroupRace,
                variable: Some("stage"),
                index: None,
                at: site("body[4]", "stage_load"),
                other: site("body[3].then[1].loop[0]", "stage_write"),
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "matrix_load_of_a_tile_staged_by_another_simdgroup",
            class: "(a) threadgroup race, matrix load",
            description: "the first SIMD group stages an 8×8 tile in threadgroup memory and every SIMD group loads it with simdgroup_load after only a simdgroup_barrier",
            buggy: Variant { kernel: || shared_tile_load(false), launch: shared_tile_launch },
            fixed: Variant { kernel: || shared_tile_load(true), launch: shared_tile_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: ThreadgroupRace,
                variable: Some("tile"),
                index: None,
                at: site("body[5]", "tile_load"),
                other: site("body[3].then[0]", "tile_write"),
                with: &[],
                may: &[UninitializedRead, OrderDependence],
            },
        },
        Entry {
            name: "simd_shift_in_place",
            class: "(b) SIMD-group race, write after read",
            description: "each lane reads its right neighbour's slot and overwrites its own with no simdgroup_barrier between",
            buggy: Variant { kernel: || simd_shift(false), launch: simd_shift_launch },
            fixed: Variant { kernel: || simd_shift(true), launch: simd_shift_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: SimdgroupRace,
                variable: Some("buf"),
                index: None,
                at: site("body[7]", "shift_write"),
                other: site("body[6].then[0]", "shift_read"),
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "output_indexed_by_thread_in_threadgroup",
            class: "(c) device race, write–write",
            description: "out[lid] instead of out[gid]: every threadgroup writes the same elements",
            buggy: Variant { kernel: || scale_out(true), launch: || scale_out_launch(TG) },
            fixed: Variant { kernel: || scale_out(false), launch: || scale_out_launch(N) },
            validation: Validation::Passes,
            expected: || Expected {
                kind: DeviceRace,
                variable: Some("out"),
                index: None,
                at: site("body[2]", "missing_offset"),
                other: site("body[2]", "missing_offset"),
                with: &[],
                may: &[OrderDependence],
            },
        },
        Entry {
            name: "in_place_neighbour_update",
            class: "(c) device race, read after write across threadgroups",
            description: "data[i] += data[i - 1] in place: a threadgroup reads an element another threadgroup writes",
            buggy: Variant { kernel: prefix_step_in_place, launch: || Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 19))]) },
            fixed: Variant {
                kernel: prefix_step_out_of_place,
                launch: || Launch::threads(N, TG, vec![ArgSpec::f32s(&test_data(N as usize, 19)), ArgSpec::zeros(Type::F32, N as usize)]),
            },
            validation: Validation::Passes,
            expected: || Expected {
                kind: DeviceRace,
                variable: Some("data"),
                index: None,
                at: site("body[2].then[0]", "inplace_read"),
                other: site("body[3]", "inplace_write"),
                with: &[],
                // The same read of a neighbour's element races inside a
                // threadgroup too: across SIMD groups and across lanes.
                may: &[ThreadgroupRace, SimdgroupRace, OrderDependence],
            },
        },
        Entry {
            name: "global_sum_without_atomics",
            class: "(c) device race, read–write and write–write",
            description: "each threadgroup adds its sum to total[0] with a plain read-modify-write",
            buggy: Variant { kernel: || global_sum(false), launch: global_sum_launch },
            fixed: Variant { kernel: || global_sum(true), launch: global_sum_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: DeviceRace,
                variable: Some("total"),
                index: Some(0),
                at: site("body[6].then[2]", "global_accumulate"),
                other: site("body[6].then[2]", "global_accumulate"),
                with: &[],
                may: &[OrderDependence],
            },
        },
        Entry {
            name: "simd_lanes_store_one_element",
            class: "(i) device race inside a threadgroup, between lanes",
            description: "out[0] = a[t] by the 32 lanes of one SIMD group: each lane stores a different value to one element",
            buggy: Variant { kernel: || simd_max_publish(true), launch: simd_max_publish_launch },
            fixed: Variant { kernel: || simd_max_publish(false), launch: simd_max_publish_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: SimdgroupRace,
                variable: Some("out"),
                index: Some(0),
                at: site("body[1]", "lanes_store"),
                other: site("body[1]", "lanes_store"),
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "dot_product_without_atomics",
            class: "(i) device race inside a threadgroup, non-atomic read-modify-write",
            description: "out[0] = out[0] + a[i] * b[i] by the 64 threads (two SIMD groups) of one threadgroup",
            buggy: Variant { kernel: || dot_product(false), launch: dot_product_launch },
            fixed: Variant { kernel: || dot_product(true), launch: dot_product_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: SimdgroupRace,
                variable: Some("out"),
                index: Some(0),
                at: site("body[1]", "dot_accumulate"),
                other: site("body[1]", "dot_accumulate"),
                with: &[ThreadgroupRace],
                may: &[OrderDependence],
            },
        },
        Entry {
            name: "atomic_counter_read_plainly",
            class: "(i) mixed atomic and plain access",
            description: "count[0] is incremented with atomic_add by every thread while thread 0 of each threadgroup reads it with a plain load",
            buggy: Variant { kernel: || counter_snapshot(false), launch: counter_snapshot_launch },
            fixed: Variant { kernel: || counter_snapshot(true), launch: counter_snapshot_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: MixedAtomic,
                variable: Some("count"),
                index: Some(0),
                at: site("body[2].then[0]", "counter_read"),
                other: site("body[1]", "counter_add"),
                with: &[],
                may: &[OrderDependence],
            },
        },
        Entry {
            name: "stencil_halo_never_loaded",
            class: "(d) uninitialised threadgroup read",
            description: "a 3-point stencil reads the tile's halo elements, which no thread loads",
            buggy: Variant { kernel: || halo_stencil(false), launch: halo_launch },
            fixed: Variant { kernel: || halo_stencil(true), launch: halo_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: UninitializedRead,
                variable: Some("tile"),
                index: Some(0),
                at: site("body[4]", "halo_read"),
                other: None,
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "partials_read_by_every_lane",
            class: "(d) uninitialised threadgroup read",
            description: "SIMD group 0 reads 32 partial sums where only simdgroups_per_threadgroup were written",
            buggy: Variant { kernel: || partials_sum(false), launch: partials_launch },
            fixed: Variant { kernel: || partials_sum(true), launch: partials_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: UninitializedRead,
                variable: Some("partials"),
                index: Some(8),
                at: site("body[6].then[1]", "partials_read"),
                other: None,
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "shuffle_inside_branch",
            class: "(e) inactive-lane read",
            description: "simd_shuffle_down(x, 16) inside if (lane < 16) reads lanes 16–31, which are inactive there",
            buggy: Variant { kernel: || fold_halves(true), launch: lane0_launch },
            fixed: Variant { kernel: || fold_halves(false), launch: lane0_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: InactiveLaneRead,
                variable: None,
                index: None,
                at: site("body[4].then[0]", "shuffle_in_branch"),
                other: site("body[4].then[0]", "shuffle_in_branch"),
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "broadcast_from_inactive_lane",
            class: "(e) inactive-lane read",
            description: "simd_broadcast(x, 0) inside if (lane != 0): lane 0 is not active there",
            buggy: Variant { kernel: || scale_by_lane0(true), launch: lane0_launch },
            fixed: Variant { kernel: || scale_by_lane0(false), launch: lane0_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: InactiveLaneRead,
                variable: None,
                index: None,
                at: site("body[4].then[0]", "broadcast_in_branch"),
                other: site("body[4].then[0]", "broadcast_in_branch"),
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "butterfly_in_partial_simdgroup",
            class: "(e) inactive-lane read",
            description: "a simd_shuffle_xor butterfly over 100 threads: the last SIMD group has 4 lanes, and xor 16 reads lanes that do not exist",
            buggy: Variant { kernel: || butterfly_sum(true), launch: butterfly_launch },
            fixed: Variant { kernel: || butterfly_sum(false), launch: butterfly_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: InactiveLaneRead,
                variable: None,
                index: None,
                at: site("body[2]", "butterfly_16"),
                other: site("body[2]", "butterfly_16"),
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "barrier_inside_lid_lt_16",
            class: "(f) divergent barrier",
            description: "threadgroup_barrier inside if (lid < 16): the other threads never reach it",
            buggy: Variant { kernel: || coefficient_table(true), launch: coefficient_launch },
            fixed: Variant { kernel: || coefficient_table(false), launch: coefficient_launch },
            validation: Validation::RejectsNonUniformBarrier { path: "body[2].then[1]" },
            expected: || Expected {
                kind: DivergentBarrier,
                variable: None,
                index: None,
                at: site("body[2].then[1]", "barrier_in_branch"),
                other: site("body[2]", "table_branch"),
                with: &[],
                may: &[ThreadgroupRace, UninitializedRead, Coverage, OrderDependence],
            },
        },
        Entry {
            name: "early_return_before_barrier",
            class: "(f) divergent barrier after an early return",
            description: "if (gid >= n) return; before a threadgroup_barrier: the returned threads never reach it",
            buggy: Variant { kernel: || guarded_blur(true), launch: guarded_blur_launch },
            fixed: Variant { kernel: || guarded_blur(false), launch: guarded_blur_launch },
            validation: Validation::RejectsNonUniformBarrier { path: "body[4]" },
            expected: || Expected {
                kind: DivergentBarrier,
                variable: None,
                index: None,
                at: site("body[4]", "barrier_after_return"),
                other: site("body[2].then[0]", "early_return"),
                with: &[],
                may: &[Coverage],
            },
        },
        Entry {
            name: "barrier_in_per_thread_loop",
            class: "(f) divergent barrier",
            description: "for (i = lid; i < n; i += 256) with a barrier inside: the threads past n skip the last pass",
            buggy: Variant { kernel: || strided_tiles(true), launch: strided_launch },
            fixed: Variant { kernel: || strided_tiles(false), launch: strided_launch },
            validation: Validation::RejectsNonUniformBarrier { path: "body[3].loop[1]" },
            expected: || Expected {
                kind: DivergentBarrier,
                variable: None,
                index: None,
                at: site("body[3].loop[1]", "loop_barrier"),
                other: site("body[3]", "strided_loop"),
                with: &[],
                may: &[Coverage],
            },
        },
        Entry {
            name: "missing_bounds_check",
            class: "(g) out of bounds, device buffer",
            description: "data[tid] with no `if (tid >= count) return;`, dispatched in whole threadgroups over 1000 elements",
            buggy: Variant { kernel: || scale_in_place(false), launch: scale_in_place_launch },
            fixed: Variant { kernel: || scale_in_place(true), launch: scale_in_place_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: OutOfBounds,
                variable: Some("data"),
                index: Some(1000),
                at: site("body[1]", "unchecked_access"),
                other: None,
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "tile_overrun",
            class: "(g) out of bounds, threadgroup array",
            description: "tile[lid + 1] read by the last thread of a 256-element tile",
            buggy: Variant { kernel: || forward_difference(false), launch: forward_difference_launch },
            fixed: Variant { kernel: || forward_difference(true), launch: forward_difference_launch },
            validation: Validation::Passes,
            expected: || Expected {
                kind: OutOfBounds,
                variable: Some("tile"),
                index: Some(256),
                at: site("body[5]", "tile_overrun"),
                other: None,
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "threadgroup_count_as_grid",
            class: "(h) coverage",
            description: "dispatch_threads given the threadgroup count (16) where the thread count (4096) was meant",
            buggy: Variant { kernel: scale_all, launch: || scale_all_launch(4096 / TG) },
            fixed: Variant { kernel: scale_all, launch: || scale_all_launch(4096) },
            validation: Validation::Passes,
            expected: || Expected {
                kind: Coverage,
                variable: Some("data"),
                index: Some(16),
                at: None,
                other: None,
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "rows_dispatched_as_threads",
            class: "(h) coverage",
            description: "seed 000's row_sum (one threadgroup per row) dispatched with dispatch_threads(rows): one partial threadgroup runs",
            buggy: Variant { kernel: dispatch_patterns::row_sum, launch: || row_sum_launch(DispatchMode::Threads) },
            fixed: Variant { kernel: dispatch_patterns::row_sum, launch: || row_sum_launch(DispatchMode::Threadgroups) },
            validation: Validation::Passes,
            expected: || Expected {
                kind: Coverage,
                variable: Some("sums"),
                index: Some(1),
                at: None,
                other: None,
                with: &[],
                may: &[],
            },
        },
        Entry {
            name: "cooperative_slots_by_index",
            class: "(i) cooperative tensor layout assumed",
            description: "a cooperative tensor written out as if slot i of lane l held element l·capacity + i, instead of at get_multidimensional_index(i)",
            buggy: Variant { kernel: || cooperative_slots(true), launch: cooperative_slots_launch },
            fixed: Variant { kernel: || cooperative_slots(false), launch: cooperative_slots_launch },
            validation: Validation::Passes,
            expected: || Expected { kind: LayoutDependence, variable: Some("C"), index: None, at: None, other: None, with: &[], may: &[] },
        },
    ]
}

// ------------------------------------------------------ the clean library ---

fn f16_launch(n: u32, mode: DispatchMode, tg: u32, extra: Vec<ArgSpec>) -> Launch {
    let mut args = vec![ArgSpec::f16s(&test_data(n as usize, 20))];
    args.extend(extra);
    let size = match mode {
        DispatchMode::Threads => n,
        DispatchMode::Threadgroups => n.div_ceil(tg),
    };
    Launch { mode, size: [size, 1, 1], threads_per_threadgroup: [tg, 1, 1], args }
}

/// A bug the runtime refuses before the kernel runs, on every backend (in
/// `check_dispatch`), so that no sanitizer run ever sees it: the buggy
/// launch must fail with an error containing [`Refusal::message`], the fixed
/// one run clean.
#[derive(Clone, Copy, Debug)]
pub struct Refusal {
    pub name: &'static str,
    pub description: &'static str,
    pub buggy: Variant,
    pub fixed: Variant,
    /// What the runtime's error must say (both numbers).
    pub message: &'static str,
}

/// Every refusal of the corpus.
pub fn refusals() -> Vec<Refusal> {
    vec![Refusal {
        name: "cooperative_scope_mismatch",
        description: "a matmul2d at execution_simdgroups(4) dispatched with threadgroups of two SIMD groups",
        buggy: Variant { kernel: cooperative_four_simdgroups, launch: || cooperative_four_launch(64) },
        fixed: Variant { kernel: cooperative_four_simdgroups, launch: || cooperative_four_launch(128) },
        message: "runs cooperative operations at execution_simdgroups(4), which needs threadgroups of exactly 4 SIMD groups (128 threads), \
                  but this dispatch has a threadgroup of 64 threads (2 SIMD groups of 32)",
    }]
}

/// Every kernel of [`dispatch_patterns`] and [`two_pass_sum`] with a dispatch it is meant
/// for; each must run with no sanitizer finding at all.
pub fn library() -> Vec<Case> {
    vec![
        case("scale", dispatch_patterns::scale, || f16_launch(1000, DispatchMode::Threads, 256, vec![ArgSpec::f32(0.5)])),
        case("scale_vec4", dispatch_patterns::scale_vec4, || {
            // Seed 000: N = 4096 halves as half4 → 1024 threads, 4 threadgroups of 256.
            let half4 = Type::vector(Scalar::F16, 4);
            let ArgSpec::Buffer { bytes, .. } = ArgSpec::f16s(&test_data(4096, 21)) else { unreachable!("f16s makes a buffer") };
            Launch::threads(1024, 256, vec![ArgSpec::Buffer { elem: half4, bytes }, ArgSpec::f32(0.5)])
        }),
        case("row_sum", dispatch_patterns::row_sum, || row_sum_launch(DispatchMode::Threadgroups)),
        case("two_stage_reduction", dispatch_patterns::two_stage_reduction, || {
            let n = 1000;
            Launch::threads(n, 256, vec![ArgSpec::f32s(&test_data(n as usize, 22)), ArgSpec::zeros(Type::F32, n as usize)])
        }),
        case("simd_broadcast_pattern", dispatch_patterns::simd_broadcast_pattern, || {
            let n = 256;
            Launch::threads(
                n,
                256,
                vec![
                    ArgSpec::f32s(&test_data(n as usize, 23)),
                    ArgSpec::zeros(Type::F32, n as usize),
                    ArgSpec::zeros(Type::F32, n as usize),
                    ArgSpec::u32(3),
                ],
            )
        }),
        case("prefix_sum", dispatch_patterns::prefix_sum, || {
            let n = 1000;
            Launch::threads(n, 256, vec![ArgSpec::f32s(&test_data(n as usize, 24)), ArgSpec::zeros(Type::F32, n as usize)])
        }),
        case("shuffle_stencil", dispatch_patterns::shuffle_stencil, || {
            // Not a multiple of 32: the last SIMD group is partial.
            let n = 1000;
            Launch::threads(n, 256, vec![ArgSpec::f32s(&test_data(n as usize, 25)), ArgSpec::zeros(Type::F32, n as usize)])
        }),
        case("gemm_tiled", dispatch_patterns::gemm_tiled, || {
            let (m, n, k) = (96u32, 130u32, 40u32);
            let grid = [n.div_ceil(dispatch_patterns::GEMM_TN), m.div_ceil(dispatch_patterns::GEMM_TM), 1];
            let half = |len: u32, seed| ArgSpec::f16s(&test_data(len as usize, seed));
            Launch {
                mode: DispatchMode::Threadgroups,
                size: grid,
                threads_per_threadgroup: [dispatch_patterns::GEMM_THREADS, 1, 1],
                args: vec![
                    half(m * k, 26),
                    half(k * n, 27),
                    ArgSpec::zeros(Type::F16, (m * n) as usize),
                    ArgSpec::u32(m),
                    ArgSpec::u32(n),
                    ArgSpec::u32(k),
                ],
            }
        }),
        case("safe_scale", dispatch_patterns::safe_scale, || {
            f16_launch(1000, DispatchMode::Threadgroups, 256, vec![ArgSpec::u32(1000), ArgSpec::f32(0.5)])
        }),
        case("reduce_threadgroup", two_pass_sum::reduce_threadgroup, || {
            let n = 1000;
            Launch::threads(
                n,
                two_pass_sum::PASS1_THREADS,
                vec![ArgSpec::f32s(&test_data(n as usize, 28)), ArgSpec::zeros(Type::F32, two_pass_sum::pass1_threadgroups(n) as usize)],
            )
        }),
        case("reduce_final", two_pass_sum::reduce_final, || {
            let partials = 1000;
            Launch::threads(
                two_pass_sum::PASS2_THREADS,
                two_pass_sum::PASS2_THREADS,
                vec![ArgSpec::f32s(&test_data(partials, 29)), ArgSpec::zeros(Type::F32, 1), ArgSpec::u32(partials as u32)],
            )
        }),
        case("reduce_final_seed", two_pass_sum::reduce_final_seed, || {
            // The seed's pass 2 with a threadgroup it can have (256 threads, 8 SIMD groups).
            Launch::threads(256, 256, vec![ArgSpec::f32s(&test_data(256, 30)), ArgSpec::zeros(Type::F32, 1)])
        }),
    ]
}

fn case(name: &'static str, kernel: fn() -> Kernel, launch: fn() -> Launch) -> Case {
    Case { name, variant: Variant { kernel, launch } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_marker_names_one_line() {
        for e in entries() {
            let x = (e.expected)();
            for s in [x.at, x.other].into_iter().flatten() {
                let tag = format!("// @{}", s.marker);
                let n = SOURCE.lines().filter(|l| l.trim_end().ends_with(&tag)).count();
                assert_eq!(n, 1, "{}: marker `{}` is on {n} lines", e.name, s.marker);
            }
        }
    }

    #[test]
    fn names_are_unique_and_every_class_is_covered() {
        let e = entries();
        let mut names: Vec<&str> = e.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), e.len());
        assert!(e.len() >= 15);
        for class in ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)", "(g)", "(h)"] {
            assert!(e.iter().any(|e| e.class.starts_with(class)), "no entry for {class}");
        }
    }

    #[test]
    fn half_rounding() {
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(-2.0), 0xc000);
        assert_eq!(f32_to_f16(0.5), 0x3800);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(1e9), 0x7c00);
        assert_eq!(f32_to_f16(5.960_464_5e-8), 0x0001);
    }
}
