//! Random well-formed kernels for property and differential tests (feature
//! `testgen`).
//!
//! # API
//!
//! * [`case`]`(seed)` → [`KernelCase`], deterministic, no proptest needed: the
//!   entry point for a differential test (simulator vs CUDA or Metal) that
//!   loops over seeds. [`case_with`]`(&config, seed)` does the same under a
//!   [`GenConfig`]; `GenConfig { floats: false, ..Default::default() }` gives
//!   integer-only kernels, whose outputs must match bit for bit, and
//!   `divergent_simd: false` keeps SIMD-group functions out of divergent code
//!   (for a backend whose active-lane set is not yet trusted there).
//! * [`arb_case`]`(config)` / [`arb_kernel`]`(config)`: proptest strategies of
//!   the same cases (shrinking gives smaller kernels).
//! * A [`KernelCase`] holds the kernel, one [`CaseArg`] per parameter in
//!   parameter order (input buffers with one element per `u32` — 16-bit
//!   ones in its low half, uploaded with [`pack`] — output buffers
//!   to zero-fill with their lengths, by-value literals), and the geometry of
//!   a `dispatch_threads(grid, threads)` (1-D, whole threadgroups of whole
//!   SIMD groups). Spec constants take their defaults. Run it on two backends
//!   and compare the outputs' words with [`KernelCase::compare_outputs`].
//!
//! Every generated kernel passes [`crate::validate`], and by construction:
//!
//! * **In bounds.** Input loads index `in[(e % len)]` (or `in[gid]` when the
//!   input has one element per thread); threadgroup loads index
//!   `tg[(e % threads_per_threadgroup.x)]`; each thread stores only to its own
//!   output elements, `out[gid]` or `out[((gid * 2u32) + c)]`. An input load
//!   may split its index `f` into two subscripts of an `[r, c]` view of the
//!   input, `in[dim_check(in, 0, f / c, r) * c + dim_check(in, 1, f % c, c)]`:
//!   the same element, through the dimension checks.
//! * **Race-free.** Threadgroup arrays are written at
//!   `thread_index_in_threadgroup` at uniform control flow, then a
//!   `threadgroup_barrier(mem_threadgroup)` separates the writes from the
//!   reads (in a uniform loop: write, barrier, read, barrier).
//! * **No undefined values.** Integer `/` and `%` divide by `(x | 1u32)` or
//!   `((x & 15i32) | 1i32)`, so never by zero and never `i32::MIN / -1`.
//!   Shifts mask their amount (`& 31`). Shuffles (`simd_shuffle_xor` with a
//!   constant mask, `simd_broadcast`, `simd_shuffle` of a lane `& 31u32`) are
//!   only generated where every lane of the SIMD group is active: the dispatch
//!   covers whole threadgroups of whole SIMD groups, and shuffles stay out of
//!   branches, loops that may `break`/`continue`, and code after an early
//!   `return`. The other SIMD-group functions (`simd_sum`, `simd_max`,
//!   `simd_prefix_exclusive_sum`, `simd_broadcast_first`, `simd_ballot`, …)
//!   also appear inside divergent branches, where they act on the active lanes.
//! * **Barriers** sit where validation can prove them uniform: threadgroup
//!   barriers at the top level before any `return`; `simdgroup_barrier` at the
//!   top level or inside `if (simdgroup_index_in_threadgroup == K)`.
//! * **SIMD-group matrices** (with `matrices`): a phase at the top level, before
//!   any `return`, loads two f32 8×8 tiles from the extra input `mat_in`,
//!   multiplies them (maybe accumulating into a filled or diagonal tile) and
//!   stores the result to the SIMD group's own 64 elements of `mat_out`. Or,
//!   quantized, one operand (left or right, K = 8 or 16) is an f16 tile of
//!   `int4` or `fp4` weights decoded by `simdgroup_load_int4`/`_fp4` from the
//!   extra inputs `mat_words` (u32) and `mat_scales` (f16), the other an f16
//!   tile of `mat_in` (then f16), and they accumulate into an f32 tile. All
//!   offsets and strides are constants that keep every read in bounds.
//! * **Asynchronous copies** (with `async_copies`): a phase at the top level,
//!   before any `return`, copies the extra input `async_in` into the
//!   threadgroup array `async_tg` with `async_copy` (4 elements per thread
//!   and stage, in copies of 4, 8 or 16 bytes at aligned indices, zeros
//!   where a random condition is false or the copy would run past the end),
//!   `async_commit`, then `async_wait(0)` — or for two stages
//!   `async_wait(1)`, a barrier and the first stage's reads, then
//!   `async_wait(0)` — a barrier, and reads of other threads' elements into
//!   locals; `async_tg` then joins the readable threadgroup arrays.
//! * **Tile copies** (with `tile_copies`): a phase at the top level, before
//!   any `return`, copies one or two boxes (1 to 8 rows of 4 or 8 elements)
//!   of a matrix of the extra input `tile_in` (1–12 rows of 1–24 columns, a
//!   pitch of a multiple of 4 elements at least the columns; extents and
//!   pitch literals) into the threadgroup array `tile_tg`, each box at a
//!   128-byte boundary, with `tile_copy` on one or two of the eight
//!   barriers, from an origin inside the matrix at a column a multiple of
//!   16 bytes into its row (a constant, or taken from the threadgroup's
//!   position), so that boxes past the matrix's last row
//!   or column read zeros; then `tile_wait` on each barrier and reads of
//!   other threads' elements of the boxes into locals.
//! * **Textures** (with `textures`): a phase at the top level reads one texel
//!   of the extra input `tex_in` (a small one-channel texture of 32-bit
//!   texels) at `(e % get_width, e' % get_height)` — or, for an f32
//!   `sample` texture, samples it with a random constant sampler at a uv
//!   that crosses its edges — into a local, and every
//!   thread writes its own texel `(gid % threads, gid / threads)` of the extra
//!   output `tex_out` at the end. Off by default: only the simulator runs
//!   textures yet.
//! * **Cooperative tensors** (with `cooperative` and `floats`): a phase at
//!   the top level multiplies two views of the extra input `coop_in` (f32
//!   integers in [-16, 16]; extents that may stop short of the tile, so
//!   zero fill is exercised) into an m×n f32 cooperative tensor of each
//!   SIMD group (`execution_simdgroup`), maybe after loading it from
//!   `coop_in` and accumulating, maybe then adding each slot's row through
//!   `get_multidimensional_index`, and stores it to the SIMD group's region
//!   of the extra output `coop_out`. About a third of the products read a
//!   threadgroup copy of `coop_in` (`coop_tg`) as overlapped products
//!   (operands released at the second barrier after them), half of those
//!   followed by two barriers and a write to the copy; about three in ten
//!   untransposed left operands are instead an m×k f32 or f16 cooperative
//!   tensor filled by `cooperative_dequantize` (`int4`, `fp4` or `uint4`,
//!   words in rows, in fragment order or in MLX's columns, three in ten
//!   with biases) from the
//!   extra inputs `coop_words`, `coop_scales` (scales ±{0.5, 1, 2}) and
//!   `coop_biases` (±{0.25, 0.5, 1}),
//!   each maybe through a threadgroup copy (`coop_tgw`, `coop_tgs`); two in
//!   five reduce the product along its rows or columns (sum, max or min)
//!   and `combine` the result back into it (assign, add, sub, max or min).
//!   On by default: the simulator, CUDA (the scalar path; `wgmma` takes
//!   larger scopes) and the SIMD-group-matrix MSL lowering run all of it,
//!   MSL 4.0 (MetalPerformancePrimitives) all but the dequantization.
//! * **Per-thread arrays** (with `thread_arrays`): a phase at the top level
//!   declares one (`ta`, 2 to 8 elements), fills every element in a loop
//!   unrolled at compile time, and from then on expressions may read it at
//!   `(e % len)`, so no read is out of bounds or of an unwritten element.
//! * **Printing** (with `prints`): a phase at the top level, before any
//!   `return`, computes 1 to 3 values into locals, then threads with `gid % 61 == k` print
//!   `p gid=<gid> <values…>` — a bounded number of lines (one per 61
//!   threads) that two backends must agree on as a multiset.
//! * **Loops terminate**: `for` loops have constant bounds (at most 4
//!   iterations; some are unrolled at compile time) and `while` loops count
//!   a local they never otherwise assign.
//!
//! # Floats, and what two backends must agree on
//!
//! Float work is limited to `+ - *`, `min`, `max`, `clamp`, `abs`, negation,
//! `floor`, `select`, comparisons, conversions, and the SIMD sums, extrema,
//! broadcasts and shuffles. Float inputs are integers in `[-16, 16]`, float
//! literals integers in `[-8, 8]`, and the generator bounds the magnitude of
//! every float sub-expression by [`FLOAT_EXACT_LIMIT`] (2^24; an operation
//! that could exceed it becomes a `min`), so every intermediate float is an
//! exactly representable integer (the quantized matrix product's tiles and
//! the dequantized cooperative tensors hold multiples of 0.25, whose
//! products, sums, reductions and combinations stay within ±2^19: exact
//! too). Fusing
//! `a * b + c` into an FMA, reordering a sum (fast math, SIMD reductions in
//! any order) or flushing subnormals therefore cannot change a result: **outputs must match exactly** — integers
//! bit for bit, floats by value (`-0.0 == 0.0`, since fast math may drop the
//! sign of a zero). [`KernelCase::compare_outputs`] compares that way. Integer
//! arithmetic wraps, as the IR specifies (including `i32` `+ - *`, negation and
//! the SIMD sums and products).

use crate::ir::*;
use crate::types::{MatrixType, QuantCode, Scalar, Type};
use proptest::prelude::*;

/// Every float sub-expression of a generated kernel stays within ±2^24, where
/// all integers are exact `f32`s.
pub const FLOAT_EXACT_LIMIT: f64 = 16_777_216.0;

/// Float locals and threadgroup elements are clamped to ±4096 when assigned.
const FLOAT_LOCAL_BOUND: f64 = 4096.0;

/// What [`arb_case`] generates.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// The kernel has 1 to `max_inputs` read-only buffers (`in0`, …).
    pub max_inputs: usize,
    /// … and 1 to `max_outputs` read-write buffers (`out0`, …).
    pub max_outputs: usize,
    /// Elements in an input buffer (inclusive), unless it gets one per thread.
    pub input_len: (u32, u32),
    /// Threadgroup sizes to pick from; each is rounded up to a multiple of 32
    /// (and at most 1024), so SIMD groups are whole.
    pub threads_per_threadgroup: Vec<u32>,
    /// The grid is 1 to `max_threadgroups` whole threadgroups (1-D).
    pub max_threadgroups: u32,
    /// Statements per block, at most.
    pub max_block_stmts: u32,
    /// Operators nested in one expression, at most.
    pub max_expr_depth: u32,
    /// Control flow nested, at most.
    pub max_nesting: u32,
    /// Length of the choice sequence driving the generator (longer: bigger kernels).
    pub max_choices: usize,
    pub floats: bool,
    pub simd: bool,
    pub threadgroup_memory: bool,
    pub loops: bool,
    pub early_return: bool,
    /// SIMD-group functions that act on the active lanes (`simd_sum`,
    /// `simd_ballot`, …) may appear in divergent code (branches, loops that
    /// exit early, after an early return). When false they appear only where
    /// every lane of the SIMD group is active.
    pub divergent_simd: bool,
    /// A SIMD-group matrix phase may appear (f32 8×8 tiles loaded from an
    /// extra input `mat_in`, multiplied, stored to an extra output `mat_out`, one
    /// 64-element region per SIMD group; or an f16 tile of `mat_in` times a
    /// quantized tile of the extra inputs `mat_words` and `mat_scales`,
    /// accumulated in f32); needs `floats`.
    pub matrices: bool,
    /// An asynchronous-copy phase may appear (the extra input `async_in`
    /// copied into the threadgroup array `async_tg` in one or two stages of
    /// `async_copy`, `async_commit`, `async_wait` and a barrier, then read);
    /// copies are exact, so every backend must agree.
    pub async_copies: bool,
    /// A tile-copy phase may appear (boxes of a matrix of the extra input
    /// `tile_in` copied into the threadgroup array `tile_tg` with
    /// `tile_copy` and `tile_wait`, then read); copies are exact, so every
    /// backend must agree.
    pub tile_copies: bool,
    /// A texture phase may appear (a texel of the extra input texture
    /// `tex_in` read into a local; each thread's texel of the extra output
    /// texture `tex_out` written at the end). Off by default, since only the
    /// simulator runs textures yet.
    pub textures: bool,
    /// A cooperative-tensor phase may appear (see the module doc); needs
    /// `floats`.
    pub cooperative: bool,
    /// A per-thread-array phase may appear (`ta`, filled in an unrolled
    /// loop, then read by expressions).
    pub thread_arrays: bool,
    /// A print phase may end the kernel (see the module doc). Off by
    /// default (a dispatch's lines go to standard output unless collected);
    /// the differential tests turn it on and compare the lines.
    pub prints: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            max_inputs: 3,
            max_outputs: 2,
            input_len: (1, 64),
            threads_per_threadgroup: vec![32, 64, 128],
            max_threadgroups: 4,
            max_block_stmts: 4,
            max_expr_depth: 3,
            max_nesting: 3,
            max_choices: 384,
            floats: true,
            simd: true,
            threadgroup_memory: true,
            loops: true,
            early_return: true,
            divergent_simd: true,
            matrices: true,
            async_copies: true,
            tile_copies: true,
            thread_arrays: true,
            textures: false,
            cooperative: true,
            prints: false,
        }
    }
}

/// One kernel parameter's contents in a [`KernelCase`].
#[derive(Clone, Debug, PartialEq)]
pub enum CaseArg {
    /// A read-only buffer; `data` holds one element per `u32`: a 32-bit
    /// element's bits (`f32::to_bits` for floats), or a 16-bit element's
    /// (`f16`, the quantized matrix loads' scales and their other operand)
    /// in the low half, the high half zero. Upload it with [`pack`], which
    /// gives each element its own size (2 or 4 bytes).
    Input { elem: Scalar, data: Vec<u32> },
    /// A read-write buffer of `len` elements, zeroed before the dispatch.
    Output { elem: Scalar, len: u32 },
    /// A by-value parameter.
    Value(Literal),
    /// A one-channel texture of 32-bit texels (r32float for `f32`, r32uint
    /// for `u32`, r32sint for `i32`), `width`×`height`, holding `data` (row
    /// by row), or, when `data` is `None`, zeroed and written by the kernel
    /// (an output).
    Texture { texel: Scalar, width: u32, height: u32, data: Option<Vec<u32>> },
}

/// The little-endian bytes of a buffer of `elem`s holding `data` (one
/// element per `u32`, as [`CaseArg::Input`] holds them): the low
/// `elem.size_bytes()` bytes of each (2 for `f16`, 4 for 32-bit types).
pub fn pack(elem: Scalar, data: &[u32]) -> Vec<u8> {
    let size = (elem.size_bytes() as usize).min(4);
    data.iter().flat_map(|w| w.to_le_bytes().into_iter().take(size)).collect()
}

/// A kernel with everything needed to run it: one [`CaseArg`] per parameter,
/// in parameter order, and a `dispatch_threads(grid, threads)` geometry
/// (whole threadgroups). Spec constants take their defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelCase {
    pub kernel: Kernel,
    pub args: Vec<CaseArg>,
    pub grid: [u32; 3],
    pub threads: [u32; 3],
}

impl KernelCase {
    /// The input buffers' contents (one element per `u32`, see
    /// [`CaseArg::Input`]), in parameter order.
    pub fn inputs(&self) -> Vec<&[u32]> {
        self.args
            .iter()
            .filter_map(|a| match a {
                CaseArg::Input { data, .. } => Some(data.as_slice()),
                _ => None,
            })
            .collect()
    }

    /// The outputs' element types and lengths, in parameter order: output
    /// buffers and output textures (texels row by row).
    pub fn outputs(&self) -> Vec<(Scalar, u32)> {
        self.args
            .iter()
            .filter_map(|a| match a {
                CaseArg::Output { elem, len } => Some((*elem, *len)),
                CaseArg::Texture { texel, width, height, data: None } => Some((*texel, width * height)),
                _ => None,
            })
            .collect()
    }

    /// Compares two runs' outputs (each element's 32 bits, in output order):
    /// integers bit for bit, floats by value. The error names the first
    /// difference.
    pub fn compare_outputs(&self, a: &[Vec<u32>], b: &[Vec<u32>]) -> Result<(), String> {
        let outputs = self.outputs();
        if a.len() != outputs.len() || b.len() != outputs.len() {
            return Err(format!("expected {} outputs, got {} and {}", outputs.len(), a.len(), b.len()));
        }
        for (k, ((elem, len), (xa, xb))) in outputs.iter().zip(a.iter().zip(b)).enumerate() {
            if xa.len() != *len as usize || xb.len() != *len as usize {
                return Err(format!("out{k}: expected {len} elements, got {} and {}", xa.len(), xb.len()));
            }
            for (i, (&va, &vb)) in xa.iter().zip(xb).enumerate() {
                let same = match elem {
                    Scalar::F32 => f32::from_bits(va) == f32::from_bits(vb),
                    _ => va == vb,
                };
                if !same {
                    let show = |v: u32| match elem {
                        Scalar::F32 => format!("{}", f32::from_bits(v)),
                        Scalar::I32 => format!("{}", v as i32),
                        _ => format!("{v}"),
                    };
                    return Err(format!("out{k}[{i}] ({elem}): {} vs {}", show(va), show(vb)));
                }
            }
        }
        Ok(())
    }
}

/// Random [`KernelCase`]s. Shrinking shortens the choice sequence, which
/// gives smaller kernels.
pub fn arb_case(config: GenConfig) -> impl Strategy<Value = KernelCase> {
    (proptest::collection::vec(any::<u32>(), 0..=config.max_choices), any::<u64>())
        .prop_map(move |(choices, seed)| generate_case(&config, &choices, seed))
}

/// Random well-formed kernels.
pub fn arb_kernel(config: GenConfig) -> impl Strategy<Value = Kernel> {
    arb_case(config).prop_map(|case| case.kernel)
}

/// The case for `seed` under the default [`GenConfig`]: deterministic.
pub fn case(seed: u64) -> KernelCase {
    case_with(&GenConfig::default(), seed)
}

/// The case for `seed` under `config`: the choice sequence (of a length
/// drawn from `max_choices / 4..=max_choices`) and the buffer contents both come from the
/// seed, so one `u64` reproduces a failure.
pub fn case_with(config: &GenConfig, seed: u64) -> KernelCase {
    let mut rng = Rng(seed ^ 0x5eed_c401_ce5e_0000);
    let min = config.max_choices / 4;
    let len = min + (rng.next() % (config.max_choices - min + 1) as u64) as usize;
    let choices: Vec<u32> = (0..len).map(|_| rng.next() as u32).collect();
    generate_case(config, &choices, seed)
}

/// The case for one choice sequence (a choice past its end reads as 0, the
/// simplest option) and one seed for the buffer contents: deterministic.
pub fn generate_case(config: &GenConfig, choices: &[u32], seed: u64) -> KernelCase {
    Gen::new(config, choices, seed).case()
}

// ---------------------------------------------------------------------------

struct Choices<'a> {
    data: &'a [u32],
    pos: usize,
}

impl Choices<'_> {
    fn next(&mut self) -> u32 {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v
    }

    /// In `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u32) -> u32 {
        let v = self.next();
        if n == 0 {
            0
        } else {
            v % n
        }
    }

    /// In `lo..=hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True `percent`% of the time; false for the choice 0.
    fn chance(&mut self, percent: u32) -> bool {
        self.next() % 100 >= 100 - percent.min(100)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u32) as usize]
    }
}

/// SplitMix64, for buffer contents.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An integer in `[-m, m]`.
    fn small(&mut self, m: i64) -> i64 {
        (self.next() % (2 * m as u64 + 1)) as i64 - m
    }
}

#[derive(Clone, Copy)]
struct Input {
    param: ParamId,
    elem: Scalar,
    len: u32,
}

#[derive(Clone, Copy)]
struct Output {
    param: ParamId,
    elem: Scalar,
    per_thread: u32,
}

#[derive(Clone, Copy)]
struct Avail {
    var: VarId,
    ty: Scalar,
    /// Loop variables and loop counters are never reassigned.
    mutable: bool,
}

#[derive(Clone, Copy)]
struct Ctx {
    /// Control-flow nesting.
    depth: u32,
    /// Every lane of every SIMD group is active here (shuffles are defined).
    full: bool,
    /// `break`/`continue` may be generated (the innermost loop allows them).
    loop_exits: bool,
    /// `return` may be generated.
    return_ok: bool,
    /// A statement of the kernel body's top level (or of a SIMD-group-uniform
    /// block directly in it): barriers may go here.
    top: bool,
}

const INT_TYPES: [Scalar; 2] = [Scalar::U32, Scalar::I32];
const CMP_OPS: [BinaryOp; 6] = [BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge];

fn lit_u32(v: u32) -> Expr {
    Expr::Literal(Literal::u32(v))
}

fn lit_i32(v: i32) -> Expr {
    Expr::Literal(Literal::i32(v))
}

fn lit_f32(v: f64) -> Expr {
    Expr::Literal(Literal { ty: Scalar::F32, value: LiteralValue::Float(v) })
}

fn bin(op: BinaryOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }
}

fn call(func: Intrinsic, args: Vec<Expr>) -> Expr {
    Expr::Call { func, precision: Precision::Default, args }
}

fn cast(to: Scalar, arg: Expr) -> Expr {
    Expr::Cast { to: Type::scalar(to), arg: Box::new(arg) }
}

fn component(b: Builtin, index: u8) -> Expr {
    Expr::Extract { arg: Box::new(Expr::Builtin(b)), index }
}

/// The print phase's threads: one in this many prints.
pub const PRINT_EVERY: u32 = 61;

fn stmt(kind: StmtKind) -> Stmt {
    Stmt::new(kind)
}

/// The f16 bits of `v` (in the low half), for the values the generator
/// gives f16 elements: 0 and small integers or powers of two, normal f16s
/// with at most 11 significant bits, which this conversion keeps exactly.
fn f16_bits(v: f32) -> u32 {
    if v == 0.0 {
        return 0;
    }
    let bits = v.to_bits();
    let sign = (bits >> 16) & 0x8000;
    let exponent = ((bits >> 23) & 0xff) + 15 - 127;
    sign | (exponent << 10) | ((bits >> 13) & 0x3ff)
}

/// `clamp(e, -4096.0f32, 4096.0f32)` when `bound` is larger.
fn clamp_float(e: Expr, bound: f64) -> Expr {
    if bound <= FLOAT_LOCAL_BOUND {
        e
    } else {
        call(Intrinsic::Clamp, vec![e, lit_f32(-FLOAT_LOCAL_BOUND), lit_f32(FLOAT_LOCAL_BOUND)])
    }
}

struct Gen<'c> {
    cfg: &'c GenConfig,
    ch: Choices<'c>,
    rng: Rng,
    k: Kernel,
    inputs: Vec<Input>,
    outputs: Vec<Output>,
    values: Vec<(ParamId, Scalar)>,
    specs: Vec<(SpecId, Scalar)>,
    tg: Vec<(TgArrayId, Scalar)>,
    tg_readable: bool,
    /// Per-thread arrays every element of which is written: (array, element type, length).
    thread_arrays: Vec<(ThreadArrayId, Scalar, u32)>,
    scope: Vec<Avail>,
    gid: VarId,
    tg_size: u32,
    total: u32,
    /// Some thread may have returned: lanes may be missing from now on.
    returned: bool,
    args: Vec<CaseArg>,
    /// The output texture and its texel type, once the texture phase made it.
    tex_out: Option<(ParamId, Scalar)>,
}

impl<'c> Gen<'c> {
    fn new(cfg: &'c GenConfig, choices: &'c [u32], seed: u64) -> Gen<'c> {
        Gen {
            cfg,
            ch: Choices { data: choices, pos: 0 },
            rng: Rng(seed),
            k: Kernel::empty("generated"),
            inputs: vec![],
            outputs: vec![],
            values: vec![],
            specs: vec![],
            tg: vec![],
            tg_readable: false,
            thread_arrays: vec![],
            scope: vec![],
            gid: VarId(0),
            tg_size: 32,
            total: 32,
            returned: false,
            args: vec![],
            tex_out: None,
        }
    }

    fn case(mut self) -> KernelCase {
        let sizes: Vec<u32> =
            self.cfg.threads_per_threadgroup.iter().map(|&t| t.clamp(1, 1024).div_ceil(32) * 32).collect();
        self.tg_size = if sizes.is_empty() { 32 } else { self.ch.pick(&sizes) };
        let groups = self.ch.range(1, self.cfg.max_threadgroups.max(1));
        self.total = self.tg_size * groups;
        self.declare_params();

        self.gid = self.local("gid", Scalar::U32, false);
        let mut body = vec![stmt(StmtKind::Assign { var: self.gid, value: component(Builtin::ThreadPositionInGrid, 0) })];
        let top = Ctx { depth: 0, full: true, loop_exits: false, return_ok: false, top: true };
        // Prelude, then the threadgroup-memory phase, then anything (returns included).
        self.stmts(&mut body, top, 0);
        if self.cfg.threadgroup_memory && self.ch.chance(60) {
            self.tg_phase(&mut body);
        }
        if self.cfg.matrices && self.cfg.floats && self.ch.chance(40) {
            self.matrix_phase(&mut body);
        }
        if self.cfg.textures && self.ch.chance(60) {
            self.texture_phase(&mut body, top);
        }
        if self.cfg.cooperative && self.cfg.floats && self.ch.chance(50) {
            self.cooperative_phase(&mut body);
        }
        if self.cfg.async_copies && self.ch.chance(40) {
            self.async_phase(&mut body);
        }
        if self.cfg.tile_copies && self.ch.chance(40) {
            self.tile_phase(&mut body);
        }
        if self.cfg.thread_arrays && self.ch.chance(40) {
            self.thread_array_phase(&mut body);
        }
        if self.cfg.prints && self.ch.chance(50) {
            self.print_phase(&mut body, top);
        }
        self.stmts(&mut body, Ctx { return_ok: self.cfg.early_return, ..top }, 1);
        for o in self.outputs.clone() {
            for c in 0..o.per_thread {
                let (value, bound) = self.expr(o.elem, self.cfg.max_expr_depth, top);
                let value = if c == 0 { self.fold_locals(o.elem, value, bound) } else { value };
                body.push(stmt(StmtKind::Store { mem: Memory::Buffer(o.param), index: self.out_index(o, c), value }));
            }
        }
        if let Some((tex, texel)) = self.tex_out {
            let components = (0..4).map(|_| self.expr(texel, self.cfg.max_expr_depth, top).0).collect();
            let value = Expr::Vector { ty: Type::vector(texel, 4), components };
            let (x, y) = (bin(BinaryOp::Rem, Expr::Var(self.gid), lit_u32(self.tg_size)), bin(BinaryOp::Div, Expr::Var(self.gid), lit_u32(self.tg_size)));
            let coord = Expr::Vector { ty: Type::vector(Scalar::U32, 2), components: vec![x, y] };
            body.push(stmt(StmtKind::TextureWrite { tex, value, coord }));
        }
        self.k.body = body;
        KernelCase { kernel: self.k, args: self.args, grid: [self.total, 1, 1], threads: [self.tg_size, 1, 1] }
    }

    /// The print phase, at the top level before any `return` (with prints
    /// off it takes no choice, so every seed's kernel stays as it was): 1 to 3
    /// values of random types computed into locals, then
    /// `if (gid % 61 == k) print("p gid={} {} …", gid, values…)`, at most one
    /// line per 61 threads. A float value is printed plus `0.0`, which turns
    /// a `-0.0` (fast math may give one for a zero) into `0`.
    fn print_phase(&mut self, body: &mut Block, top: Ctx) {
        let k = self.ch.below(PRINT_EVERY);
        let mut format = String::from("p gid={}");
        let mut args = vec![Expr::Var(self.gid)];
        for _ in 0..self.ch.range(1, 3) {
            let ty = self.local_type();
            let (value, _) = self.expr(ty, self.cfg.max_expr_depth, top);
            let value = if ty == Scalar::F32 { bin(BinaryOp::Add, value, lit_f32(0.0)) } else { value };
            let var = self.local("pv", ty, false);
            body.push(stmt(StmtKind::Assign { var, value }));
            format.push_str(" {}");
            args.push(Expr::Var(var));
        }
        let cond = bin(BinaryOp::Eq, bin(BinaryOp::Rem, Expr::Var(self.gid), lit_u32(PRINT_EVERY)), lit_u32(k));
        body.push(stmt(StmtKind::If { cond, then_body: vec![stmt(StmtKind::Print { format, args })], else_body: vec![] }));
    }

    /// `value` plus every top-level local (booleans as 0 or 1), so that each
    /// thread's first output element depends on all it computed; for `f32`
    /// only while the sum stays within [`FLOAT_EXACT_LIMIT`]. Uses no choices.
    fn fold_locals(&self, ty: Scalar, value: Expr, bound: f64) -> Expr {
        let mut acc = value;
        let mut acc_bound = bound;
        for a in &self.scope {
            let (term, b) = match a.ty {
                Scalar::Bool => (cast(ty, Expr::Var(a.var)), 1.0),
                t if t == ty => (Expr::Var(a.var), FLOAT_LOCAL_BOUND),
                _ => continue,
            };
            if ty == Scalar::F32 && acc_bound + b > FLOAT_EXACT_LIMIT {
                break;
            }
            acc = bin(BinaryOp::Add, acc, term);
            acc_bound += b;
        }
        acc
    }

    fn elem_type(&mut self) -> Scalar {
        if self.cfg.floats {
            self.ch.pick(&[Scalar::U32, Scalar::F32, Scalar::I32])
        } else {
            self.ch.pick(&INT_TYPES)
        }
    }

    /// A read-only buffer parameter of `len` random `elem`s (integers in
    /// [-16, 16] as f32 or f16), with its argument.
    fn input_buffer(&mut self, name: String, elem: Scalar, len: u32) -> ParamId {
        let data = (0..len)
            .map(|_| match elem {
                Scalar::F32 => (self.rng.small(16) as f32).to_bits(),
                Scalar::F16 => f16_bits(self.rng.small(16) as f32),
                _ => self.rng.next() as u32,
            })
            .collect();
        self.input_param(name, elem, data)
    }

    /// A read-only buffer parameter of `elem`s holding `data` (one element
    /// per `u32`, see [`CaseArg::Input`]), with its argument.
    fn input_param(&mut self, name: String, elem: Scalar, data: Vec<u32>) -> ParamId {
        let param = ParamId(self.k.params.len() as u32);
        self.k.params.push(Param { name, kind: ParamKind::Buffer { elem: elem.into(), access: Access::Read } });
        self.args.push(CaseArg::Input { elem, data });
        param
    }

    fn declare_params(&mut self) {
        let n_in = self.ch.range(1, self.cfg.max_inputs.max(1) as u32);
        for k in 0..n_in {
            let elem = self.elem_type();
            let (lo, hi) = self.cfg.input_len;
            let len = if self.ch.chance(30) { self.total } else { self.ch.range(lo.max(1), hi.max(lo).max(1)) };
            let param = self.input_buffer(format!("in{k}"), elem, len);
            self.inputs.push(Input { param, elem, len });
        }
        let n_out = self.ch.range(1, self.cfg.max_outputs.max(1) as u32);
        for k in 0..n_out {
            let elem = self.elem_type();
            let per_thread = self.ch.range(1, 2);
            let param = ParamId(self.k.params.len() as u32);
            self.k.params.push(Param {
                name: format!("out{k}"),
                kind: ParamKind::Buffer { elem: elem.into(), access: Access::ReadWrite },
            });
            self.args.push(CaseArg::Output { elem, len: self.total * per_thread });
            self.outputs.push(Output { param, elem, per_thread });
        }
        for k in 0..self.ch.below(3) {
            let ty = self.elem_type();
            let value = match ty {
                Scalar::U32 => Literal::u32(self.rng.next() as u32),
                Scalar::I32 => Literal::i32(self.rng.next() as i32),
                _ => Literal::f32(self.rng.small(8) as f32),
            };
            let param = ParamId(self.k.params.len() as u32);
            self.k.params.push(Param { name: format!("p{k}"), kind: ParamKind::Value { ty: ty.into() } });
            self.args.push(CaseArg::Value(value));
            self.values.push((param, ty));
        }
        for k in 0..self.ch.below(3) {
            let ty = self.elem_type();
            let default = match ty {
                Scalar::U32 => Literal::u32(self.ch.below(64)),
                Scalar::I32 => Literal::i32(self.ch.below(64) as i32 - 32),
                _ => Literal::f32(self.ch.below(17) as f32 - 8.0),
            };
            let id = SpecId(self.k.spec_constants.len() as u32);
            self.k.spec_constants.push(SpecConstant { name: format!("S{k}"), ty, default });
            self.specs.push((id, ty));
        }
    }

    fn local(&mut self, prefix: &str, ty: Scalar, mutable: bool) -> VarId {
        let var = VarId(self.k.locals.len() as u32);
        let name = if prefix == "gid" { prefix.to_string() } else { format!("{prefix}{}", var.0) };
        self.k.locals.push(Local { name, ty: ty.into() });
        self.scope.push(Avail { var, ty, mutable });
        var
    }

    fn out_index(&self, o: Output, c: u32) -> Expr {
        if o.per_thread == 1 {
            Expr::Var(self.gid)
        } else {
            bin(BinaryOp::Add, bin(BinaryOp::Mul, Expr::Var(self.gid), lit_u32(o.per_thread)), lit_u32(c))
        }
    }

    fn full(&self, ctx: Ctx) -> bool {
        ctx.full && !self.returned
    }

    /// SIMD-group functions over the active lanes may be generated here.
    fn simd_here(&self, ctx: Ctx) -> bool {
        self.cfg.simd && (self.cfg.divergent_simd || self.full(ctx))
    }

    // --- statements ----------------------------------------------------------

    /// Appends `min..=max_block_stmts` statements to `out`.
    fn stmts(&mut self, out: &mut Block, ctx: Ctx, min: u32) {
        let n = self.ch.range(min, self.cfg.max_block_stmts.max(min));
        for _ in 0..n {
            self.stmt(out, ctx);
        }
    }

    /// A nested block: its new locals go out of scope at its end.
    fn block(&mut self, ctx: Ctx) -> Block {
        let saved = self.scope.len();
        let mut b = vec![];
        self.stmts(&mut b, Ctx { depth: ctx.depth + 1, top: false, ..ctx }, 0);
        self.scope.truncate(saved);
        b
    }

    fn stmt(&mut self, out: &mut Block, ctx: Ctx) {
        let nest = ctx.depth < self.cfg.max_nesting;
        let exits = (ctx.loop_exits || ctx.return_ok) && nest;
        let simd_block = ctx.top && ctx.depth == 0 && self.full(ctx) && self.cfg.simd && nest;
        let simd_barrier = ctx.top && !self.returned;
        let d = self.cfg.max_expr_depth;
        match self.ch.below(9) {
            1 => {
                let mutable: Vec<Avail> = self.scope.iter().copied().filter(|a| a.mutable).collect();
                if mutable.is_empty() {
                    return self.new_local(out, ctx);
                }
                let a = self.ch.pick(&mutable);
                let value = self.value_for_local(a.ty, ctx);
                out.push(stmt(StmtKind::Assign { var: a.var, value }));
            }
            2 => {
                let o = self.ch.pick(&self.outputs.clone());
                let c = self.ch.below(o.per_thread);
                let (value, _) = self.expr(o.elem, d, ctx);
                out.push(stmt(StmtKind::Store { mem: Memory::Buffer(o.param), index: self.out_index(o, c), value }));
            }
            3 if nest => {
                let cond = self.bool_expr(d, ctx);
                let inner = Ctx { full: false, ..ctx };
                let then_body = self.block(inner);
                let else_body = if self.ch.chance(50) { self.block(inner) } else { vec![] };
                out.push(stmt(StmtKind::If { cond, then_body, else_body }));
            }
            4 if nest && self.cfg.loops => self.for_loop(out, ctx),
            5 if nest && self.cfg.loops => self.while_loop(out, ctx),
            6 if exits => self.exit_if(out, ctx),
            7 if simd_block => self.simd_block(out, ctx),
            8 if simd_barrier && self.cfg.simd => {
                let flags = self.ch.pick(&[MemFlags::None, MemFlags::Threadgroup, MemFlags::Device]);
                out.push(stmt(StmtKind::Barrier { scope: BarrierScope::Simdgroup, flags }));
            }
            _ => self.new_local(out, ctx),
        }
    }

    fn local_type(&mut self) -> Scalar {
        if self.cfg.floats {
            self.ch.pick(&[Scalar::U32, Scalar::I32, Scalar::F32, Scalar::Bool])
        } else {
            self.ch.pick(&[Scalar::U32, Scalar::I32, Scalar::Bool])
        }
    }

    fn value_for_local(&mut self, ty: Scalar, ctx: Ctx) -> Expr {
        let (e, bound) = self.expr(ty, self.cfg.max_expr_depth, ctx);
        if ty == Scalar::F32 {
            clamp_float(e, bound)
        } else {
            e
        }
    }

    fn new_local(&mut self, out: &mut Block, ctx: Ctx) {
        let ty = self.local_type();
        // The value is generated before the local enters the scope.
        let value = self.value_for_local(ty, ctx);
        let var = self.local("v", ty, true);
        out.push(stmt(StmtKind::Assign { var, value }));
    }

    fn for_loop(&mut self, out: &mut Block, ctx: Ctx) {
        let ty = self.ch.pick(&INT_TYPES);
        let start = self.ch.below(3);
        let step = self.ch.range(1, 2);
        let end = start + step * self.ch.below(5);
        let lit = |v: u32| if ty == Scalar::U32 { lit_u32(v) } else { lit_i32(v as i32) };
        let (start_e, end_e, step_e) = (lit(start), lit(end), lit(step));
        let exits = self.ch.chance(30);
        // Loops that never exit early and step by one are unrolled at
        // compile time (no choice of its own: the sequence of choices, and
        // so every kernel a seed gives, stays as it was).
        let unroll = !exits && step == 1;
        let saved = self.scope.len();
        let var = self.local("i", ty, false);
        let body = self.block(Ctx {
            full: ctx.full && !exits,
            loop_exits: exits,
            return_ok: ctx.return_ok && exits,
            ..ctx
        });
        self.scope.truncate(saved);
        out.push(stmt(StmtKind::For { var, start: start_e, end: end_e, step: step_e, body, unroll }));
    }

    fn while_loop(&mut self, out: &mut Block, ctx: Ctx) {
        let count = self.ch.below(5);
        let exits = self.ch.chance(30);
        let w = self.local("w", Scalar::U32, false);
        out.push(stmt(StmtKind::Assign { var: w, value: lit_u32(0) }));
        let mut body = vec![stmt(StmtKind::Assign { var: w, value: bin(BinaryOp::Add, Expr::Var(w), lit_u32(1)) })];
        body.extend(self.block(Ctx {
            full: ctx.full && !exits,
            loop_exits: exits,
            return_ok: ctx.return_ok && exits,
            ..ctx
        }));
        let cond = bin(BinaryOp::Lt, Expr::Var(w), lit_u32(count));
        out.push(stmt(StmtKind::While { cond, body }));
    }

    /// `if (cond) { …; break | continue | return }`.
    fn exit_if(&mut self, out: &mut Block, ctx: Ctx) {
        let mut kinds = vec![];
        if ctx.loop_exits {
            kinds.extend([StmtKind::Break, StmtKind::Continue]);
        }
        if ctx.return_ok {
            kinds.push(StmtKind::Return);
        }
        let cond = self.bool_expr(self.cfg.max_expr_depth, ctx);
        let exit = kinds[self.ch.below(kinds.len() as u32) as usize].clone();
        let mut then_body = self.block(Ctx { full: false, ..ctx });
        if exit == StmtKind::Return {
            self.returned = true;
        }
        then_body.push(stmt(exit));
        out.push(stmt(StmtKind::If { cond, then_body, else_body: vec![] }));
    }

    /// `if (simdgroup_index_in_threadgroup == K) { …; simdgroup_barrier(…); … }`:
    /// whole SIMD groups, so shuffles and SIMD-group barriers are fine inside.
    fn simd_block(&mut self, out: &mut Block, ctx: Ctx) {
        let k = self.ch.below(self.tg_size / 32);
        let cond = bin(BinaryOp::Eq, Expr::Builtin(Builtin::SimdgroupIndexInThreadgroup), lit_u32(k));
        let inner = Ctx { depth: ctx.depth + 1, full: true, loop_exits: false, return_ok: false, top: true };
        let saved = self.scope.len();
        let mut body = vec![];
        self.stmts(&mut body, Ctx { top: false, ..inner }, 0);
        let flags = self.ch.pick(&[MemFlags::None, MemFlags::Threadgroup, MemFlags::Device]);
        body.push(stmt(StmtKind::Barrier { scope: BarrierScope::Simdgroup, flags }));
        self.stmts(&mut body, Ctx { top: false, ..inner }, 0);
        self.scope.truncate(saved);
        out.push(stmt(StmtKind::If { cond, then_body: body, else_body: vec![] }));
    }

    /// A per-thread array `ta` of 2 to 8 elements, each written in an
    /// unrolled loop (with a value that may depend on the loop variable),
    /// then readable.
    fn thread_array_phase(&mut self, body: &mut Block) {
        let top = Ctx { depth: 0, full: true, loop_exits: false, return_ok: false, top: true };
        let elem = self.elem_type();
        let len = self.ch.range(2, 8);
        let id = ThreadArrayId(self.k.thread_arrays.len() as u32);
        self.k.thread_arrays.push(ThreadArray { name: "ta".into(), elem: elem.into(), len });
        let saved = self.scope.len();
        let i = self.local("i", Scalar::U32, false);
        let (e, bound) = self.expr(elem, self.cfg.max_expr_depth, top);
        let value = if elem == Scalar::F32 { clamp_float(e, bound) } else { e };
        self.scope.truncate(saved);
        let store = stmt(StmtKind::Store { mem: Memory::Thread(id), index: Expr::Var(i), value });
        body.push(stmt(StmtKind::For { var: i, start: lit_u32(0), end: lit_u32(len), step: lit_u32(1), body: vec![store], unroll: true }));
        self.thread_arrays.push((id, elem, len));
    }

    /// Threadgroup arrays of one element per thread: written at
    /// `thread_index_in_threadgroup`, a barrier, then readable; or the same in
    /// a uniform loop that also reads between two barriers.
    fn tg_phase(&mut self, body: &mut Block) {
        let top = Ctx { depth: 0, full: true, loop_exits: false, return_ok: false, top: true };
        let lid = Expr::Builtin(Builtin::ThreadIndexInThreadgroup);
        for k in 0..self.ch.range(1, 2) {
            let elem = self.elem_type();
            let id = TgArrayId(self.k.threadgroup_arrays.len() as u32);
            self.k.threadgroup_arrays.push(ThreadgroupArray { name: format!("tg{k}"), elem: elem.into(), len: self.tg_size });
            self.tg.push((id, elem));
        }
        let barrier = || stmt(StmtKind::Barrier { scope: BarrierScope::Threadgroup, flags: MemFlags::Threadgroup });
        let writes = |g: &mut Gen<'_>| -> Vec<Stmt> {
            g.tg
                .clone()
                .into_iter()
                .map(|(id, elem)| {
                    let (e, bound) = g.expr(elem, g.cfg.max_expr_depth, top);
                    let value = if elem == Scalar::F32 { clamp_float(e, bound) } else { e };
                    stmt(StmtKind::Store { mem: Memory::Threadgroup(id), index: lid.clone(), value })
                })
                .collect()
        };
        if !(self.cfg.loops && self.ch.chance(40)) {
            body.extend(writes(self));
            body.push(barrier());
            self.tg_readable = true;
            return;
        }
        let (tg0, elem) = self.tg[0];
        let init = self.value_for_local(elem, top);
        let acc = self.local("acc", elem, true);
        body.push(stmt(StmtKind::Assign { var: acc, value: init }));
        let rounds = self.ch.range(1, 3);
        let saved = self.scope.len();
        let r = self.local("r", Scalar::U32, false);
        let mut loop_body = writes(self);
        loop_body.push(barrier());
        let neighbour = bin(
            BinaryOp::Rem,
            bin(BinaryOp::Add, bin(BinaryOp::Add, lid.clone(), lit_u32(1)), Expr::Var(r)),
            component(Builtin::ThreadsPerThreadgroup, 0),
        );
        let sum = bin(BinaryOp::Add, Expr::Var(acc), Expr::Load { mem: Memory::Threadgroup(tg0), index: Box::new(neighbour) });
        let sum = if elem == Scalar::F32 { clamp_float(sum, 2.0 * FLOAT_LOCAL_BOUND) } else { sum };
        loop_body.push(stmt(StmtKind::Assign { var: acc, value: sum }));
        loop_body.push(barrier());
        self.scope.truncate(saved);
        body.push(stmt(StmtKind::For { var: r, start: lit_u32(0), end: lit_u32(rounds), step: lit_u32(1), body: loop_body, unroll: false }));
        self.tg_readable = true;
    }

    /// An asynchronous-copy phase at the top level, before any `return`: the
    /// extra input `async_in` (4–64 elements, a multiple of 4, of the
    /// generator's element types) is copied into the threadgroup array
    /// `async_tg`, 4 elements per thread and stage at `(stage·T + lid)·4`, in
    /// copies of 1, 2 or 4 elements (4, 8 or 16 bytes) at offsets aligned to
    /// their size. A copy of `c` elements reads `async_in[j·c ..]` for a
    /// random `j` below `len / c` (valid under a random condition or always),
    /// or below `len / c + 2`, valid only while `j·c` is inside the input (the
    /// source of an invalid copy is not read). Each stage is committed; one
    /// stage is waited for with `async_wait(0)`, two with `async_wait(1)`, a
    /// barrier and the first stage's reads, then `async_wait(0)`; a barrier
    /// precedes each stage's reads of other threads' elements, converted to
    /// the first output's element type (an `f32` at least 0 for `u32`, an
    /// integer masked to 0..=255 for `f32`) into new locals, which that
    /// output's first element adds up.
    fn async_phase(&mut self, body: &mut Block) {
        let top = Ctx { depth: 0, full: true, loop_exits: false, return_ok: false, top: true };
        let elem = self.elem_type();
        let len = 4 * self.ch.range(1, 16);
        let input = self.input_buffer("async_in".into(), elem, len);
        let stages = self.ch.range(1, 2);
        let id = TgArrayId(self.k.threadgroup_arrays.len() as u32);
        let tg = Memory::Threadgroup(id);
        self.k.threadgroup_arrays.push(ThreadgroupArray { name: "async_tg".into(), elem: elem.into(), len: stages * self.tg_size * 4 });
        let lid = || Expr::Builtin(Builtin::ThreadIndexInThreadgroup);
        let threads = self.tg_size;
        // Element `at` of thread `thread`'s slot in `stage`.
        let slot = |stage: u32, thread: Expr, at: u32| {
            let thread = if stage == 0 { thread } else { bin(BinaryOp::Add, lit_u32(stage * threads), thread) };
            let first = bin(BinaryOp::Mul, thread, lit_u32(4));
            if at == 0 {
                first
            } else {
                bin(BinaryOp::Add, first, lit_u32(at))
            }
        };
        for stage in 0..stages {
            let mut at = 0;
            while at < 4 {
                let count = self.ch.pick(&[1u32, 2, 4].into_iter().filter(|c| at % c == 0 && at + c <= 4).collect::<Vec<_>>());
                let blocks = len / count;
                let past_end = self.ch.chance(30);
                let j = self.index(if past_end { blocks + 2 } else { blocks }, 1, top);
                let from = self.local("a", Scalar::U32, false);
                body.push(stmt(StmtKind::Assign { var: from, value: bin(BinaryOp::Mul, j, lit_u32(count)) }));
                let valid = match (past_end, self.ch.below(3)) {
                    (true, 0) => bin(BinaryOp::Lt, Expr::Var(from), lit_u32(len)),
                    (true, _) => bin(BinaryOp::And, bin(BinaryOp::Lt, Expr::Var(from), lit_u32(len)), self.bool_expr(1, top)),
                    (false, 0) => Expr::Literal(Literal::bool(true)),
                    (false, _) => self.bool_expr(1, top),
                };
                body.push(stmt(StmtKind::AsyncCopy {
                    dst: tg,
                    dst_index: slot(stage, lid(), at),
                    src: Memory::Buffer(input),
                    src_index: Expr::Var(from),
                    count,
                    valid,
                }));
                at += count;
            }
            body.push(stmt(StmtKind::AsyncCommit));
        }
        let barrier = || stmt(StmtKind::Barrier { scope: BarrierScope::Threadgroup, flags: MemFlags::Threadgroup });
        for stage in 0..stages {
            body.push(stmt(StmtKind::AsyncWait { pending: stages - 1 - stage }));
            body.push(barrier());
            for _ in 0..self.ch.range(1, 2) {
                // Another thread's element: `(lid + r) % T`.
                let thread = bin(BinaryOp::Rem, bin(BinaryOp::Add, lid(), lit_u32(self.ch.below(threads))), lit_u32(threads));
                let load = Expr::Load { mem: tg, index: Box::new(slot(stage, thread, self.ch.below(4))) };
                self.read_into_local(body, "ar", load, elem);
            }
        }
        self.tg.push((id, elem));
        self.tg_readable = true;
    }

    /// `load` (an `elem`) converted to the first output's element type (an
    /// `f32` at least 0 for `u32`, an integer masked to 0..=255 for `f32`)
    /// into a new local, which that output's first element adds up.
    fn read_into_local(&mut self, body: &mut Block, prefix: &str, load: Expr, elem: Scalar) {
        let to = self.outputs[0].elem;
        let value = match (elem, to) {
            _ if elem == to => load,
            (Scalar::F32, Scalar::U32) => cast(to, call(Intrinsic::Max, vec![load, lit_f32(0.0)])),
            (Scalar::I32, Scalar::F32) => cast(to, bin(BinaryOp::BitAnd, load, lit_i32(255))),
            (_, Scalar::F32) => cast(to, bin(BinaryOp::BitAnd, load, lit_u32(255))),
            _ => cast(to, load),
        };
        let var = self.local(prefix, to, false);
        body.push(stmt(StmtKind::Assign { var, value }));
    }

    /// An i32 coordinate inside `0..extent` and a multiple of `step`, the
    /// same in the whole threadgroup: a constant, or one taken from the
    /// threadgroup's position.
    fn uniform_coordinate(&mut self, extent: u32, step: u32) -> Expr {
        let steps = extent.div_ceil(step);
        let value = if self.ch.chance(50) {
            lit_u32(self.ch.below(steps))
        } else {
            bin(BinaryOp::Rem, bin(BinaryOp::Add, component(Builtin::ThreadgroupPositionInGrid, 0), lit_u32(self.ch.below(steps))), lit_u32(steps))
        };
        let value = if step == 1 { value } else { bin(BinaryOp::Mul, value, lit_u32(step)) };
        cast(Scalar::I32, value)
    }

    /// A tile-copy phase at the top level, before any `return` (see the
    /// module doc): one or two boxes of a `rows × cols` matrix of the extra
    /// input `tile_in` (a row every `pitch` elements) copied into
    /// `tile_tg` at elements 0 and 32 (128-byte boundaries), each box at
    /// most 32 elements, on one barrier or two; a wait on each barrier,
    /// then reads of other threads' elements of a box (`(lid + r) % box`)
    /// into locals ([`Gen::read_into_local`]). The array is not one the
    /// generator's expressions read (they index threadgroup arrays by the
    /// thread, past the boxes).
    fn tile_phase(&mut self, body: &mut Block) {
        const BOX_ELEMENTS: u32 = 32;
        let barriers = crate::limits::TILE_BARRIERS;
        let elem = self.elem_type();
        // A box starts at a multiple of 16 bytes into its row.
        let column_step = crate::limits::TILE_ROW_ALIGN / elem.size_bytes();
        let (rows, cols) = (self.ch.range(1, 12), self.ch.range(1, 24));
        let pitch = cols.next_multiple_of(4) + 4 * self.ch.below(2);
        let input = self.input_buffer("tile_in".into(), elem, rows * pitch);
        let id = TgArrayId(self.k.threadgroup_arrays.len() as u32);
        let tg = Memory::Threadgroup(id);
        let copies = self.ch.range(1, 2);
        self.k.threadgroup_arrays.push(ThreadgroupArray { name: "tile_tg".into(), elem: elem.into(), len: copies * BOX_ELEMENTS });
        let first = self.ch.below(barriers);
        let second = if self.ch.chance(30) { first } else { (first + 1 + self.ch.below(barriers - 1)) % barriers };
        let mut boxes = vec![];
        for c in 0..copies {
            let box_cols = self.ch.pick(&[4u32, 8]);
            let box_rows = self.ch.range(1, BOX_ELEMENTS / box_cols);
            let barrier = if c == 0 { first } else { second };
            let copy = TileCopy {
                barrier: lit_u32(barrier),
                dst: tg,
                dst_index: lit_u32(c * BOX_ELEMENTS),
                src: Memory::Buffer(input),
                extents: [lit_u32(rows), lit_u32(cols)],
                pitch: lit_u32(pitch),
                origin: [self.uniform_coordinate(rows, 1), self.uniform_coordinate(cols, column_step)],
                rows: box_rows,
                cols: box_cols,
            };
            body.push(stmt(StmtKind::TileCopy(Box::new(copy))));
            boxes.push(box_rows * box_cols);
        }
        body.push(stmt(StmtKind::TileWait { barrier: lit_u32(first) }));
        if copies == 2 && second != first {
            body.push(stmt(StmtKind::TileWait { barrier: lit_u32(second) }));
        }
        let lid = Expr::Builtin(Builtin::ThreadIndexInThreadgroup);
        for _ in 0..self.ch.range(1, 2) {
            let c = self.ch.below(copies);
            let at = bin(BinaryOp::Rem, bin(BinaryOp::Add, lid.clone(), lit_u32(self.ch.below(boxes[c as usize]))), lit_u32(boxes[c as usize]));
            let at = if c == 0 { at } else { bin(BinaryOp::Add, at, lit_u32(c * BOX_ELEMENTS)) };
            self.read_into_local(body, "tr", Expr::Load { mem: tg, index: Box::new(at) }, elem);
        }
    }

    /// A SIMD-group matrix phase at uniform control flow: a product of two
    /// 8×K, K×8 tiles loaded from the extra inputs (see [`Gen::f32_product`]
    /// and, 40% of the time, [`Gen::quantized_product`]) stored, maybe
    /// transposed, to the SIMD group's own 64 elements of the extra f32
    /// output `mat_out`. Every sum is exact, so every backend must agree
    /// exactly.
    fn matrix_phase(&mut self, body: &mut Block) {
        let product = if self.ch.chance(40) { self.quantized_product(body) } else { self.f32_product(body) };
        let output = ParamId(self.k.params.len() as u32);
        self.k.params.push(Param { name: "mat_out".into(), kind: ParamKind::Buffer { elem: Type::F32, access: Access::ReadWrite } });
        self.args.push(CaseArg::Output { elem: Scalar::F32, len: self.total * 2 });
        let simdgroup = bin(
            BinaryOp::Add,
            bin(BinaryOp::Mul, component(Builtin::ThreadgroupPositionInGrid, 0), Expr::Builtin(Builtin::SimdgroupsPerThreadgroup)),
            Expr::Builtin(Builtin::SimdgroupIndexInThreadgroup),
        );
        body.push(stmt(StmtKind::MatrixStore {
            value: product,
            mem: Memory::Buffer(output),
            offset: bin(BinaryOp::Mul, simdgroup, lit_u32(64)),
            stride: lit_u32(8),
            transpose: self.ch.chance(50),
        }));
    }

    /// A new matrix local `{name}{id}` of type `ty` (not in the scope of
    /// scalar expressions).
    fn matrix_local(&mut self, name: &str, ty: MatrixType) -> VarId {
        let var = VarId(self.k.locals.len() as u32);
        self.k.locals.push(Local { name: format!("{name}{}", var.0), ty: Type::Matrix(ty) });
        var
    }

    /// An offset and a stride for `rows` rows of `span` elements inside
    /// `len`: the stride from `span` to `span + extra`, no wider than lets
    /// the rows fit (MLX's columns put 32 rows of words or scales in one
    /// buffer), the offset anywhere they do.
    fn rows_within(&mut self, len: u32, rows: u32, span: u32, extra: u32) -> (u32, u32) {
        let widest = match rows {
            0 | 1 => span + extra,
            _ => (len - span) / (rows - 1),
        };
        let stride = self.ch.range(span, (span + extra).min(widest));
        let offset = self.ch.below(len - ((rows.max(1) - 1) * stride + span) + 1);
        (offset, stride)
    }

    /// The cooperative phase (see the module doc).
    fn cooperative_phase(&mut self, body: &mut Block) {
        use crate::cooperative::*;
        // Room for the largest view: 32 rows of up to 35 elements.
        const LEN: u32 = 1280;
        let (m, n, k) = (self.ch.pick(&[8u32, 16, 32]), self.ch.pick(&[8u32, 16, 32]), self.ch.pick(&[8u32, 16]));
        let input = self.input_buffer("coop_in".into(), Scalar::F32, LEN);
        // A view of `x`×`y` (each maybe short of the tile) at a random
        // offset, rows `x + pad` apart, inside `coop_in`.
        let view = |g: &mut Gen<'_>, x: u32, y: u32| {
            let (ex, ey) = (g.ch.range(x.saturating_sub(3).max(1), x), g.ch.range(y.saturating_sub(3).max(1), y));
            let stride = ex + g.ch.below(4);
            let extent = (ey - 1) * stride + ex;
            let offset = g.ch.below((LEN - extent).min(128) + 1);
            TensorView {
                mem: Memory::Buffer(input),
                offset: lit_u32(offset),
                extents: [lit_u32(ex), lit_u32(ey)],
                strides: [lit_u32(1), lit_u32(stride)],
            }
        };
        let mut desc = Matmul2dDescriptor::new(m, n, Some(k));
        // One choice for the left operand: transposed (30 %), else in about
        // three cases in ten a cooperative tensor of dequantized weights
        // (filled below) instead of the view.
        let left_form = self.ch.below(100);
        desc.transpose_left = left_form >= 70;
        let dequantized = left_form < 21;
        desc.transpose_right = self.ch.chance(30);
        let mut left = if desc.transpose_left { view(self, m, k) } else { view(self, k, m) };
        let mut right = if desc.transpose_right { view(self, k, n) } else { view(self, n, k) };
        let overlapped = self.ch.chance(35);
        if overlapped {
            // The operands from a threadgroup copy of `coop_in`, as an
            // overlapped product must read them.
            let staged = self.stage_in_threadgroup(body, input, Scalar::F32, LEN, "coop_tg");
            left.mem = staged;
            right.mem = staged;
        }
        let tensor = CoopId(self.k.cooperative_tensors.len() as u32);
        let name = format!("coop{}", tensor.0);
        self.k.cooperative_tensors.push(CooperativeTensor { name, elem: Scalar::F32, rows: m, cols: n, scope: ExecutionScope::Simdgroup });
        if self.ch.chance(40) {
            desc.mode = Matmul2dMode::MultiplyAccumulate;
            let src = view(self, n, m);
            body.push(stmt(StmtKind::CooperativeLoad { tensor, src: Box::new(src) }));
        }
        let operands = left.mem;
        let left = if dequantized {
            Matmul2dLeft::Cooperative(self.dequantized_left(body, m, k))
        } else {
            Matmul2dLeft::Tensor(Box::new(left))
        };
        body.push(stmt(StmtKind::Matmul2d {
            desc,
            scope: ExecutionScope::Simdgroup,
            left,
            right: Box::new(right),
            dest: tensor,
            release: if overlapped { OperandRelease::SecondBarrier } else { OperandRelease::NextBarrier },
        }));
        if self.ch.chance(40) {
            // A row or column reduction of the product, combined back into
            // it by coordinates (every value an integer well below 2^24, so
            // every backend agrees exactly).
            let axis = self.ch.pick(&[ReduceAxis::Rows, ReduceAxis::Columns]);
            let (rows, cols) = if axis == ReduceAxis::Rows { (m, 1) } else { (1, n) };
            let reduced = CoopId(self.k.cooperative_tensors.len() as u32);
            let name = format!("coop{}", reduced.0);
            self.k.cooperative_tensors.push(CooperativeTensor { name, elem: Scalar::F32, rows, cols, scope: ExecutionScope::Simdgroup });
            let op = self.ch.pick(&ReduceOp::ALL);
            body.push(stmt(StmtKind::CooperativeReduce { src: tensor, dest: reduced, axis, op }));
            let op = self.ch.pick(&[CombineOp::Assign, CombineOp::Add, CombineOp::Sub, CombineOp::Max, CombineOp::Min]);
            body.push(stmt(StmtKind::CooperativeCombine { dest: tensor, src: reduced, op }));
        }
        if overlapped && self.ch.chance(50) {
            // The copy is free again at the second barrier after the product.
            let barrier = || stmt(StmtKind::Barrier { scope: BarrierScope::Threadgroup, flags: MemFlags::Threadgroup });
            body.extend([barrier(), barrier()]);
            let lid = Expr::Builtin(Builtin::ThreadIndexInThreadgroup);
            body.push(stmt(StmtKind::Store { mem: operands, index: lid, value: lit_f32(0.0) }));
        }
        if self.ch.chance(50) {
            // Not in the scope of scalar expressions: only the loop reads it.
            let slot = VarId(self.k.locals.len() as u32);
            self.k.locals.push(Local { name: format!("slot{}", slot.0), ty: Type::U32 });
            let index = || Box::new(Expr::Var(slot));
            let row = Expr::Cast { to: Type::F32, arg: Box::new(Expr::CooperativeCoord { tensor, index: index(), dim: 1 }) };
            let set = stmt(StmtKind::CooperativeSet {
                tensor,
                index: Expr::Var(slot),
                value: bin(BinaryOp::Add, Expr::CooperativeElement { tensor, index: index() }, row),
            });
            let guarded = stmt(StmtKind::If { cond: Expr::CooperativeValid { tensor, index: index() }, then_body: vec![set], else_body: vec![] });
            body.push(stmt(StmtKind::For {
                var: slot,
                start: lit_u32(0),
                end: Expr::CooperativeCapacity { tensor },
                step: lit_u32(1),
                body: vec![guarded],
                unroll: false,
            }));
        }
        let output = ParamId(self.k.params.len() as u32);
        self.k.params.push(Param { name: "coop_out".into(), kind: ParamKind::Buffer { elem: Type::F32, access: Access::ReadWrite } });
        self.args.push(CaseArg::Output { elem: Scalar::F32, len: self.total / 32 * m * n });
        let simdgroup = bin(
            BinaryOp::Add,
            bin(BinaryOp::Mul, component(Builtin::ThreadgroupPositionInGrid, 0), Expr::Builtin(Builtin::SimdgroupsPerThreadgroup)),
            Expr::Builtin(Builtin::SimdgroupIndexInThreadgroup),
        );
        let dst = TensorView {
            mem: Memory::Buffer(output),
            offset: bin(BinaryOp::Mul, simdgroup, lit_u32(m * n)),
            extents: [lit_u32(n), lit_u32(m)],
            strides: [lit_u32(1), lit_u32(n)],
        };
        body.push(stmt(StmtKind::CooperativeStore { tensor, dst: Box::new(dst) }));
    }

    /// The left operand of the cooperative phase's product as an m×k
    /// cooperative tensor (f32 or f16) of 4-bit weights: `cooperative_dequantize`
    /// (`int4`, `fp4` or `uint4`, words in rows, three in ten in fragment
    /// order, two in ten in MLX's columns, a group shift from 1 to 4) from
    /// the extra inputs `coop_words` (random u32) and `coop_scales` (f16
    /// from ±{0.5, 1, 2}), three in ten with `coop_biases` (f16 from
    /// ±{0.25, 0.5, 1}, indexed as the scales), each maybe through a
    /// threadgroup copy (`coop_tgw`, `coop_tgs`), at random in-bounds
    /// offsets and strides. Each weight (times its scale, plus its bias) is
    /// a multiple of 0.25 within ±32, exact in f16, so with `coop_in`'s
    /// integers every product and sum of the phase stays exact.
    fn dequantized_left(&mut self, body: &mut Block, m: u32, k: u32) -> crate::cooperative::CoopId {
        use crate::cooperative::*;
        const SCALES: u32 = 288;
        let code = self.ch.pick(&QuantCode::ALL);
        let elem = self.ch.pick(&[Scalar::F32, Scalar::F16]);
        let group_shift = self.ch.range(1, 4);
        // Weight row `r`, K value `c` is nibble `nibble` of
        // `words[offset + unit_row·stride + word]` (`layout.locate(c, r)`):
        // in rows, word row `c / 8` of column `r`; in fragment order, `c`
        // and `r` within the first row of units (k is at most 16). The
        // words one row of units spans, and at least that many from one
        // row to the next; scale row `c >> group_shift` of column `r`.
        let layout = match self.ch.below(10) {
            0..=2 => crate::QuantLayout::Fragments,
            3..=4 => crate::QuantLayout::Columns,
            _ => crate::QuantLayout::Rows,
        };
        // The words one row of units spans (a column's, in columns), and
        // the rows of units; the scales' likewise.
        let columns = layout == crate::QuantLayout::Columns;
        let span = if columns {
            k.div_ceil(8)
        } else {
            (0..m).flat_map(|r| (0..k).map(move |c| (r, c))).filter(|&(_, c)| c < layout.unit().0).map(|(r, c)| layout.locate(c, r).1 + 1).max().unwrap_or(1)
        };
        let words_len = if layout.is_rows() { 96 } else { 288 };
        let (offset, stride) = self.rows_within(words_len, layout.rows_of_units(k, m), span, 8);
        let groups = ((k - 1) >> group_shift) + 1;
        let (scale_span, scale_rows) = if columns { (groups, m) } else { (m, groups) };
        let (scale_offset, scale_stride) = self.rows_within(SCALES, scale_rows, scale_span, 4);
        let words = self.input_buffer("coop_words".into(), Scalar::U32, words_len);
        let scale_values = [-2.0f32, -1.0, -0.5, 0.5, 1.0, 2.0];
        let data = (0..SCALES).map(|_| f16_bits(scale_values[(self.rng.next() % scale_values.len() as u64) as usize])).collect();
        let scales = self.input_param("coop_scales".into(), Scalar::F16, data);
        let words = if self.ch.chance(40) {
            self.stage_in_threadgroup(body, words, Scalar::U32, words_len, "coop_tgw")
        } else {
            Memory::Buffer(words)
        };
        let scales = if self.ch.chance(40) {
            self.stage_in_threadgroup(body, scales, Scalar::F16, SCALES, "coop_tgs")
        } else {
            Memory::Buffer(scales)
        };
        let biases = self.ch.chance(30).then(|| {
            let bias_values = [-1.0f32, -0.5, -0.25, 0.25, 0.5, 1.0];
            let data = (0..SCALES).map(|_| f16_bits(bias_values[(self.rng.next() % bias_values.len() as u64) as usize])).collect();
            Memory::Buffer(self.input_param("coop_biases".into(), Scalar::F16, data))
        });
        let tensor = CoopId(self.k.cooperative_tensors.len() as u32);
        let name = format!("coop{}", tensor.0);
        self.k.cooperative_tensors.push(CooperativeTensor { name, elem, rows: m, cols: k, scope: ExecutionScope::Simdgroup });
        body.push(stmt(StmtKind::CooperativeDequantize {
            tensor,
            code,
            layout,
            words,
            offset: lit_u32(offset),
            stride: lit_u32(stride),
            scales,
            scale_offset: lit_u32(scale_offset),
            scale_stride: lit_u32(scale_stride),
            group_shift: lit_u32(group_shift),
            biases,
        }));
        tensor
    }

    /// A threadgroup array `name` of `len` `elem`s holding `input`'s first
    /// `len` elements: each thread copies every threads-per-threadgroup-th
    /// element from its own index on, then a barrier.
    fn stage_in_threadgroup(&mut self, body: &mut Block, input: ParamId, elem: Scalar, len: u32, name: &str) -> Memory {
        let id = TgArrayId(self.k.threadgroup_arrays.len() as u32);
        self.k.threadgroup_arrays.push(ThreadgroupArray { name: name.into(), elem: elem.into(), len });
        let saved = self.scope.len();
        let i = self.local("ci", Scalar::U32, false);
        self.scope.truncate(saved);
        let copy = stmt(StmtKind::Store {
            mem: Memory::Threadgroup(id),
            index: Expr::Var(i),
            value: Expr::Load { mem: Memory::Buffer(input), index: Box::new(Expr::Var(i)) },
        });
        body.push(stmt(StmtKind::For {
            var: i,
            start: Expr::Builtin(Builtin::ThreadIndexInThreadgroup),
            end: lit_u32(len),
            step: lit_u32(self.tg_size),
            body: vec![copy],
            unroll: false,
        }));
        body.push(stmt(StmtKind::Barrier { scope: BarrierScope::Threadgroup, flags: MemFlags::Threadgroup }));
        Memory::Threadgroup(id)
    }

    /// The f32 product: two f32 8×8 tiles loaded into locals from the extra
    /// input `mat_in` (256 integers in [-16, 16], at offsets up to 64 and
    /// strides 8, 11 or 16, maybe transposed), multiplied, maybe
    /// accumulating into a filled or diagonal tile of an integer in [-8, 8].
    fn f32_product(&mut self, body: &mut Block) -> Expr {
        let t = MatrixType::new(Scalar::F32, 8, 8);
        let input = self.input_buffer("mat_in".into(), Scalar::F32, 256);
        let load = |g: &mut Gen<'_>| Expr::MatrixLoad {
            ty: t,
            mem: Memory::Buffer(input),
            offset: Box::new(lit_u32(g.ch.below(65))),
            stride: Box::new(lit_u32(g.ch.pick(&[8, 11, 16]))),
            transpose: g.ch.chance(50),
        };
        let (a, b) = (self.matrix_local("ma", t), self.matrix_local("mb", t));
        body.push(stmt(StmtKind::Assign { var: a, value: load(self) }));
        body.push(stmt(StmtKind::Assign { var: b, value: load(self) }));
        let acc = self.ch.chance(60).then(|| {
            let value = Box::new(Expr::Literal(Literal::f32(self.rng.small(8) as f32)));
            Box::new(Expr::MatrixFill { ty: t, value, diagonal: self.ch.chance(50) })
        });
        Expr::MatrixMultiply { a: Box::new(Expr::Var(a)), b: Box::new(Expr::Var(b)), acc }
    }

    /// The quantized product: one operand, the left (8×K) or the right
    /// (K×8, K 8 or 16), is an f16 tile of 4-bit weights (`int4` or `fp4`)
    /// loaded with `MatrixLoadQuantized` from the extra inputs `mat_words`
    /// (32 random u32) and `mat_scales` (24 f16 scales from ±{0.5, 1, 2}) at
    /// random in-bounds offsets and stride; the other an f16 tile loaded
    /// from the extra input `mat_in` (512 f16 integers in [-16, 16], maybe
    /// transposed). The IR multiplies tiles of one element type, so both are
    /// f16; they accumulate into an f32 tile (filled or diagonal, an integer
    /// in [-8, 8]), so that the sums are f32. Decoded weights times scales
    /// are exact f16 multiples of 0.25 within ±16, each product an exact
    /// multiple of 0.25 within ±256, and every partial sum one within ±2^13:
    /// exact in f32 in any order.
    fn quantized_product(&mut self, body: &mut Block) -> Expr {
        const MAT_IN: u32 = 512;
        const WORDS: u32 = 32;
        const SCALES: u32 = 24;
        let half = |rows: u8, cols: u8| MatrixType::new(Scalar::F16, rows, cols);
        let code = self.ch.pick(&QuantCode::TILE);
        let k = self.ch.pick(&[8u8, 16]);
        let quantized_left = self.ch.chance(40);
        let (q, other) = if quantized_left { (half(8, k), half(k, 8)) } else { (half(k, 8), half(8, k)) };

        let input = self.input_buffer("mat_in".into(), Scalar::F16, MAT_IN);
        let transpose = self.ch.chance(50);
        // `lines` runs of `line` elements, `stride` apart.
        let (rows, cols) = (other.rows() as u32, other.cols() as u32);
        let (lines, line) = if transpose { (cols, rows) } else { (rows, cols) };
        let stride = self.ch.pick(&[line, line + 3, 2 * line]);
        let extent = (lines - 1) * stride + line;
        let offset = self.ch.below((MAT_IN - extent).min(64) + 1);
        let (offset, stride) = (Box::new(lit_u32(offset)), Box::new(lit_u32(stride)));
        let other_load = Expr::MatrixLoad { ty: other, mem: Memory::Buffer(input), offset, stride, transpose };

        let words = self.input_buffer("mat_words".into(), Scalar::U32, WORDS);
        let scale_values = [-2.0f32, -1.0, -0.5, 0.5, 1.0, 2.0];
        let data = (0..SCALES).map(|_| f16_bits(scale_values[(self.rng.next() % scale_values.len() as u64) as usize])).collect();
        let scales = self.input_param("mat_scales".into(), Scalar::F16, data);
        // Row block `r / 8` of column `c` reads `words[offset + (r / 8)·stride + c]`.
        let (q_rows, q_cols) = (q.rows() as u32, q.cols() as u32);
        let word_stride = self.ch.range(q_cols, q_cols + 8);
        let word_extent = (q_rows / 8 - 1) * word_stride + q_cols;
        let q_load = Expr::MatrixLoadQuantized {
            ty: q,
            code,
            layout: crate::QuantLayout::Rows,
            words: Memory::Buffer(words),
            offset: Box::new(lit_u32(self.ch.below(WORDS - word_extent + 1))),
            stride: Box::new(lit_u32(word_stride)),
            scales: Memory::Buffer(scales),
            scale_offset: Box::new(lit_u32(self.ch.below(SCALES - q_cols + 1))),
        };

        let (qv, ov) = (self.matrix_local("mq", q), self.matrix_local("mh", other));
        body.push(stmt(StmtKind::Assign { var: qv, value: q_load }));
        body.push(stmt(StmtKind::Assign { var: ov, value: other_load }));
        let value = Box::new(Expr::Literal(Literal::f32(self.rng.small(8) as f32)));
        let acc = Box::new(Expr::MatrixFill { ty: MatrixType::new(Scalar::F32, 8, 8), value, diagonal: self.ch.chance(50) });
        let (a, b) = if quantized_left { (qv, ov) } else { (ov, qv) };
        Expr::MatrixMultiply { a: Box::new(Expr::Var(a)), b: Box::new(Expr::Var(b)), acc: Some(acc) }
    }

    /// A texture phase at the top level: the extra input `tex_in` (1–8 by
    /// 1–8 texels of `u32`, `i32` or, with `floats`, `f32` in [-16, 16]) has
    /// one texel read at `(e % get_width, e' % get_height)`, one channel of
    /// it (0, 0, 1 past the first) kept in a new local; the extra output
    /// `tex_out` (a texel per thread) is written at the end of the kernel.
    fn texture_phase(&mut self, body: &mut Block, ctx: Ctx) {
        let texel = if self.cfg.floats { self.ch.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]) } else { self.ch.pick(&INT_TYPES) };
        let (width, height) = (self.ch.range(1, 8), self.ch.range(1, 8));
        let input = ParamId(self.k.params.len() as u32);
        let access = self.ch.pick(&[TextureAccess::Read, TextureAccess::Sample, TextureAccess::ReadWrite]);
        self.k.params.push(Param { name: "tex_in".into(), kind: ParamKind::Texture { texel, access } });
        let data = (0..width * height)
            .map(|_| match texel {
                Scalar::F32 => (self.rng.small(16) as f32).to_bits(),
                _ => self.rng.next() as u32,
            })
            .collect();
        self.args.push(CaseArg::Texture { texel, width, height, data: Some(data) });
        let output = ParamId(self.k.params.len() as u32);
        self.k.params.push(Param { name: "tex_out".into(), kind: ParamKind::Texture { texel, access: TextureAccess::Write } });
        self.args.push(CaseArg::Texture { texel, width: self.tg_size, height: self.total / self.tg_size, data: None });
        self.tex_out = Some((output, texel));
        let x = bin(BinaryOp::Rem, self.int_expr(Scalar::U32, 1, ctx), Expr::TextureSize { tex: input, dim: TextureDim::Width });
        let y = bin(BinaryOp::Rem, self.int_expr(Scalar::U32, 1, ctx), Expr::TextureSize { tex: input, dim: TextureDim::Height });
        let coord = Expr::Vector { ty: Type::vector(Scalar::U32, 2), components: vec![x, y] };
        let read = if texel == Scalar::F32 && access == TextureAccess::Sample && self.ch.chance(70) {
            self.texture_sample(input, ctx)
        } else {
            Expr::TextureRead { tex: input, coord: Box::new(coord) }
        };
        let value = Expr::Extract { arg: Box::new(read), index: self.ch.below(4) as u8 };
        let var = self.local("t", texel, true);
        body.push(stmt(StmtKind::Assign { var, value }));
    }

    /// `tex.sample(sampler, uv)` with a random constant sampler (coordinates,
    /// filter, address mode; pixel coordinates never repeat) at a uv from
    /// integer expressions: normalised `(e % 16) / 8 − 0.5` in [−0.5, 1.375],
    /// or pixels `(e % 12) − 1.5` in [−1.5, 10.5], so that edges and the
    /// address modes are crossed. A blend of texels stays within their range.
    fn texture_sample(&mut self, tex: ParamId, ctx: Ctx) -> Expr {
        let coord = self.ch.pick(&[SamplerCoord::Normalized, SamplerCoord::Pixel]);
        let filter = self.ch.pick(&[SamplerFilter::Nearest, SamplerFilter::Linear]);
        let address = match coord {
            SamplerCoord::Normalized => self.ch.pick(&[SamplerAddress::ClampToEdge, SamplerAddress::ClampToZero, SamplerAddress::Repeat, SamplerAddress::MirroredRepeat]),
            SamplerCoord::Pixel => self.ch.pick(&[SamplerAddress::ClampToEdge, SamplerAddress::ClampToZero]),
        };
        let (modulus, scale, offset) = match coord {
            SamplerCoord::Normalized => (16, 0.125, -0.5),
            SamplerCoord::Pixel => (12, 1.0, -1.5),
        };
        let components = (0..2)
            .map(|_| {
                let e = Expr::Cast { to: Type::F32, arg: Box::new(bin(BinaryOp::Rem, self.int_expr(Scalar::U32, 1, ctx), lit_u32(modulus))) };
                bin(BinaryOp::Add, bin(BinaryOp::Mul, e, lit_f32(scale)), lit_f32(offset))
            })
            .collect();
        let uv = Expr::Vector { ty: Type::vector(Scalar::F32, 2), components };
        Expr::TextureSample { tex, sampler: Sampler { coord, filter, address }, uv: Box::new(uv) }
    }

    // --- expressions ---------------------------------------------------------

    /// An expression of `ty` and, for `f32`, a bound on its magnitude.
    fn expr(&mut self, ty: Scalar, d: u32, ctx: Ctx) -> (Expr, f64) {
        match ty {
            Scalar::F32 => self.float_expr(d, ctx),
            Scalar::Bool => (self.bool_expr(d, ctx), 0.0),
            _ => (self.int_expr(ty, d, ctx), 0.0),
        }
    }

    fn locals_of(&self, ty: Scalar) -> Vec<VarId> {
        self.scope.iter().filter(|a| a.ty == ty).map(|a| a.var).collect()
    }

    /// An index in `0..len`.
    fn index(&mut self, len: u32, d: u32, ctx: Ctx) -> Expr {
        if len == self.total && self.ch.chance(50) {
            return Expr::Var(self.gid);
        }
        let e = if d == 0 {
            match self.ch.below(3) {
                0 => Expr::Var(self.gid),
                1 => self.builtin_u32(),
                _ => lit_u32(self.ch.below(len.max(1) * 2)),
            }
        } else {
            self.int_expr(Scalar::U32, d - 1, ctx)
        };
        bin(BinaryOp::Rem, e, lit_u32(len))
    }

    /// Sometimes `flat` (an index below `len`) as the same element of an
    /// `[len / c, c]` view: two checked subscripts, `f / c` and `f % c`.
    fn maybe_two_dims(&mut self, mem: Memory, flat: Expr, len: u32) -> Expr {
        let Some(cols) = [4u32, 3, 2].into_iter().find(|c| len > *c && len.is_multiple_of(*c)) else { return flat };
        if !self.ch.chance(20) {
            return flat;
        }
        let check = |dim, index, size| Expr::DimCheck { mem, dim, index: Box::new(index), size: Box::new(lit_u32(size)) };
        let row = check(0, bin(BinaryOp::Div, flat.clone(), lit_u32(cols)), len / cols);
        let col = check(1, bin(BinaryOp::Rem, flat, lit_u32(cols)), cols);
        bin(BinaryOp::Add, bin(BinaryOp::Mul, row, lit_u32(cols)), col)
    }

    fn tg_index(&mut self, d: u32, ctx: Ctx) -> Expr {
        let e = if d == 0 { Expr::Builtin(Builtin::ThreadIndexInThreadgroup) } else { self.int_expr(Scalar::U32, d - 1, ctx) };
        bin(BinaryOp::Rem, e, component(Builtin::ThreadsPerThreadgroup, 0))
    }

    fn builtin_u32(&mut self) -> Expr {
        const VECTORS: [Builtin; 6] = [
            Builtin::ThreadPositionInGrid,
            Builtin::ThreadPositionInThreadgroup,
            Builtin::ThreadgroupPositionInGrid,
            Builtin::ThreadsPerThreadgroup,
            Builtin::ThreadsPerGrid,
            Builtin::ThreadgroupsPerGrid,
        ];
        const SCALARS: [Builtin; 5] = [
            Builtin::ThreadIndexInThreadgroup,
            Builtin::ThreadIndexInSimdgroup,
            Builtin::SimdgroupIndexInThreadgroup,
            Builtin::SimdgroupsPerThreadgroup,
            Builtin::ThreadsPerSimdgroup,
        ];
        if self.ch.chance(50) {
            let b = self.ch.pick(&VECTORS);
            let c = if self.ch.chance(20) { self.ch.range(1, 2) as u8 } else { 0 };
            component(b, c)
        } else {
            Expr::Builtin(self.ch.pick(&SCALARS))
        }
    }

    /// A leaf of `ty` (a load's index may itself be an expression of depth `d - 1`).
    fn leaf(&mut self, ty: Scalar, d: u32, ctx: Ctx) -> (Expr, f64) {
        #[derive(Clone, Copy)]
        enum Leaf {
            Lit,
            Builtin,
            Local(VarId),
            Param(ParamId),
            Spec(SpecId),
            Input(usize),
            Tg(TgArrayId),
            Thread(ThreadArrayId, u32),
        }
        let mut leaves = vec![Leaf::Lit];
        if ty != Scalar::Bool && ty != Scalar::F32 {
            leaves.push(Leaf::Builtin);
        }
        leaves.extend(self.locals_of(ty).into_iter().map(Leaf::Local));
        leaves.extend(self.values.iter().filter(|v| v.1 == ty).map(|v| Leaf::Param(v.0)));
        leaves.extend(self.specs.iter().filter(|s| s.1 == ty).map(|s| Leaf::Spec(s.0)));
        leaves.extend(self.inputs.iter().enumerate().filter(|(_, i)| i.elem == ty).map(|(k, _)| Leaf::Input(k)));
        if self.tg_readable {
            leaves.extend(self.tg.iter().filter(|t| t.1 == ty).map(|t| Leaf::Tg(t.0)));
        }
        leaves.extend(self.thread_arrays.iter().filter(|t| t.1 == ty).map(|t| Leaf::Thread(t.0, t.2)));
        let float_bound = |b: f64| if ty == Scalar::F32 { b } else { 0.0 };
        match self.ch.pick(&leaves) {
            Leaf::Lit => self.literal(ty),
            Leaf::Builtin => {
                let b = self.builtin_u32();
                (if ty == Scalar::I32 { cast(Scalar::I32, b) } else { b }, 0.0)
            }
            Leaf::Local(v) => (Expr::Var(v), float_bound(FLOAT_LOCAL_BOUND)),
            Leaf::Param(p) => (Expr::Param(p), float_bound(8.0)),
            Leaf::Spec(s) => (Expr::Spec(s), float_bound(8.0)),
            Leaf::Input(k) => {
                let input = self.inputs[k];
                let index = self.index(input.len, d.saturating_sub(1), ctx);
                let index = self.maybe_two_dims(Memory::Buffer(input.param), index, input.len);
                (Expr::Load { mem: Memory::Buffer(input.param), index: Box::new(index) }, float_bound(16.0))
            }
            Leaf::Tg(id) => {
                let index = self.tg_index(d.saturating_sub(1), ctx);
                (Expr::Load { mem: Memory::Threadgroup(id), index: Box::new(index) }, float_bound(FLOAT_LOCAL_BOUND))
            }
            Leaf::Thread(id, len) => {
                let index = self.index(len, d.saturating_sub(1), ctx);
                (Expr::Load { mem: Memory::Thread(id), index: Box::new(index) }, float_bound(FLOAT_LOCAL_BOUND))
            }
        }
    }

    fn literal(&mut self, ty: Scalar) -> (Expr, f64) {
        match ty {
            Scalar::Bool => (Expr::Literal(Literal::bool(self.ch.chance(50))), 0.0),
            Scalar::F32 => {
                let v = self.ch.below(17) as f64 - 8.0;
                (lit_f32(v), v.abs().max(1.0))
            }
            Scalar::I32 => {
                let v = match self.ch.below(4) {
                    0 | 1 => self.ch.below(17) as i32 - 8,
                    2 => self.ch.pick(&[i32::MIN, i32::MAX, -1, 0x4000_0000]),
                    _ => self.ch.next() as i32,
                };
                (lit_i32(v), 0.0)
            }
            _ => {
                let v = match self.ch.below(4) {
                    0 | 1 => self.ch.below(17),
                    2 => self.ch.pick(&[u32::MAX, 0x8000_0000, 31, 32]),
                    _ => self.ch.next(),
                };
                (lit_u32(v), 0.0)
            }
        }
    }

    fn int_expr(&mut self, t: Scalar, d: u32, ctx: Ctx) -> Expr {
        if d == 0 {
            return self.leaf(t, 0, ctx).0;
        }
        let sub = d - 1;
        let lit = |v: u32| if t == Scalar::U32 { lit_u32(v) } else { lit_i32(v as i32) };
        match self.ch.below(12) {
            1 => {
                let op = self.ch.pick(&[BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul]);
                bin(op, self.int_expr(t, sub, ctx), self.int_expr(t, sub, ctx))
            }
            2 => {
                let op = self.ch.pick(&[BinaryOp::BitAnd, BinaryOp::BitOr, BinaryOp::BitXor]);
                bin(op, self.int_expr(t, sub, ctx), self.int_expr(t, sub, ctx))
            }
            3 => {
                // i32 shifts right only: `<<` of a negative value is undefined in C++17.
                let op = if t == Scalar::U32 { self.ch.pick(&[BinaryOp::Shl, BinaryOp::Shr]) } else { BinaryOp::Shr };
                let amount = bin(BinaryOp::BitAnd, self.int_expr(t, sub, ctx), lit(31));
                bin(op, self.int_expr(t, sub, ctx), amount)
            }
            4 => {
                let op = self.ch.pick(&[BinaryOp::Div, BinaryOp::Rem]);
                let lhs = self.int_expr(t, sub, ctx);
                let divisor = self.int_expr(t, sub, ctx);
                let divisor = if t == Scalar::U32 {
                    bin(BinaryOp::BitOr, divisor, lit_u32(1))
                } else {
                    bin(BinaryOp::BitOr, bin(BinaryOp::BitAnd, divisor, lit_i32(15)), lit_i32(1))
                };
                bin(op, lhs, divisor)
            }
            5 => {
                let f = self.ch.pick(&[Intrinsic::Min, Intrinsic::Max]);
                call(f, vec![self.int_expr(t, sub, ctx), self.int_expr(t, sub, ctx)])
            }
            6 => {
                let (a, b) = (self.int_expr(t, sub, ctx), self.int_expr(t, sub, ctx));
                call(Intrinsic::Select, vec![a, b, self.bool_expr(sub, ctx)])
            }
            7 => self.int_conversion(t, sub, ctx),
            8 if self.simd_here(ctx) => self.int_simd(t, sub, ctx),
            9 => {
                if t == Scalar::U32 {
                    let f = self.ch.pick(&[Intrinsic::Popcount, Intrinsic::Clz, Intrinsic::Ctz]);
                    call(f, vec![self.int_expr(t, sub, ctx)])
                } else {
                    Expr::Unary { op: UnaryOp::Neg, arg: Box::new(self.int_expr(t, sub, ctx)) }
                }
            }
            10 => Expr::Unary { op: UnaryOp::BitNot, arg: Box::new(self.int_expr(t, sub, ctx)) },
            11 => self.vector_detour(t, sub, ctx).0,
            _ => self.leaf(t, d, ctx).0,
        }
    }

    fn int_conversion(&mut self, t: Scalar, sub: u32, ctx: Ctx) -> Expr {
        let other = if t == Scalar::U32 { Scalar::I32 } else { Scalar::U32 };
        match self.ch.below(5) {
            1 => Expr::Bitcast { to: t.into(), arg: Box::new(self.int_expr(other, sub, ctx)) },
            2 => cast(t, self.bool_expr(sub, ctx)),
            3 if self.cfg.floats => {
                // Floats here are integers within ±2^24; negative ones do not convert to u32.
                let (f, _) = self.float_expr(sub, ctx);
                let f = if t == Scalar::U32 { call(Intrinsic::Max, vec![f, lit_f32(0.0)]) } else { f };
                cast(t, f)
            }
            4 if self.simd_here(ctx) && t == Scalar::U32 => {
                cast(Scalar::U32, call(Intrinsic::SimdBallot, vec![self.bool_expr(sub, ctx)]))
            }
            _ => cast(t, self.int_expr(other, sub, ctx)),
        }
    }

    /// A shuffle of `x` where every lane is active; elsewhere `x` comes back as the error.
    fn shuffle(&mut self, x: Expr, sub: u32, ctx: Ctx) -> Result<Expr, Expr> {
        if !self.full(ctx) {
            return Err(x);
        }
        Ok(match self.ch.below(3) {
            0 => call(Intrinsic::SimdShuffleXor, vec![x, lit_u32(self.ch.range(1, 31))]),
            1 => call(Intrinsic::SimdBroadcast, vec![x, lit_u32(self.ch.below(32))]),
            _ => {
                let lane = bin(BinaryOp::BitAnd, self.int_expr(Scalar::U32, sub, ctx), lit_u32(31));
                call(Intrinsic::SimdShuffle, vec![x, lane])
            }
        })
    }

    fn int_simd(&mut self, t: Scalar, sub: u32, ctx: Ctx) -> Expr {
        use Intrinsic::*;
        let x = self.int_expr(t, sub, ctx);
        let f = self.ch.pick(&[
            SimdSum,
            SimdMax,
            SimdMin,
            SimdPrefixExclusiveSum,
            SimdPrefixInclusiveSum,
            SimdBroadcastFirst,
            SimdProduct,
            SimdAnd,
            SimdOr,
            SimdXor,
            SimdShuffleXor,
        ]);
        if f == SimdShuffleXor {
            return match self.shuffle(x, sub, ctx) {
                Ok(e) => e,
                Err(x) => call(SimdSum, vec![x]),
            };
        }
        call(f, vec![x])
    }

    fn float_expr(&mut self, d: u32, ctx: Ctx) -> (Expr, f64) {
        if d == 0 {
            return self.leaf(Scalar::F32, 0, ctx);
        }
        let sub = d - 1;
        match self.ch.below(9) {
            1 => {
                let (a, ba) = self.float_expr(sub, ctx);
                let (b, bb) = self.float_expr(sub, ctx);
                let op = self.ch.pick(&[BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul]);
                let bound = if op == BinaryOp::Mul { ba * bb } else { ba + bb };
                if bound <= FLOAT_EXACT_LIMIT {
                    (bin(op, a, b), bound)
                } else {
                    (call(Intrinsic::Min, vec![a, b]), ba.max(bb))
                }
            }
            2 => {
                let (a, ba) = self.float_expr(sub, ctx);
                let (b, bb) = self.float_expr(sub, ctx);
                let f = self.ch.pick(&[Intrinsic::Min, Intrinsic::Max]);
                (call(f, vec![a, b]), ba.max(bb))
            }
            3 => {
                let (a, ba) = self.float_expr(sub, ctx);
                let e = match self.ch.below(3) {
                    0 => call(Intrinsic::Abs, vec![a]),
                    1 => Expr::Unary { op: UnaryOp::Neg, arg: Box::new(a) },
                    _ => call(Intrinsic::Floor, vec![a]),
                };
                (e, ba)
            }
            4 => {
                let (a, ba) = self.float_expr(sub, ctx);
                let (b, bb) = self.float_expr(sub, ctx);
                (call(Intrinsic::Select, vec![a, b, self.bool_expr(sub, ctx)]), ba.max(bb))
            }
            5 => {
                let (x, bx) = self.float_expr(sub, ctx);
                let lo = self.ch.below(9) as f64 - 8.0;
                let hi = lo + self.ch.below(9) as f64;
                (call(Intrinsic::Clamp, vec![x, lit_f32(lo), lit_f32(hi)]), bx.min(lo.abs().max(hi.abs())))
            }
            6 => {
                if self.ch.chance(50) {
                    let u = bin(BinaryOp::BitAnd, self.int_expr(Scalar::U32, sub, ctx), lit_u32(255));
                    (cast(Scalar::F32, u), 255.0)
                } else {
                    let i = bin(BinaryOp::Rem, self.int_expr(Scalar::I32, sub, ctx), lit_i32(64));
                    (cast(Scalar::F32, i), 63.0)
                }
            }
            7 if self.simd_here(ctx) => {
                use Intrinsic::*;
                let (x, b) = self.float_expr(sub, ctx);
                let f = self.ch.pick(&[SimdSum, SimdMax, SimdMin, SimdPrefixExclusiveSum, SimdPrefixInclusiveSum, SimdBroadcastFirst, SimdShuffleXor]);
                match f {
                    SimdSum | SimdPrefixExclusiveSum | SimdPrefixInclusiveSum if 32.0 * b <= FLOAT_EXACT_LIMIT => {
                        (call(f, vec![x]), 32.0 * b)
                    }
                    SimdShuffleXor => match self.shuffle(x, sub, ctx) {
                        Ok(e) => (e, b),
                        Err(x) => (call(SimdMax, vec![x]), b),
                    },
                    SimdSum | SimdPrefixExclusiveSum | SimdPrefixInclusiveSum => (call(SimdMin, vec![x]), b),
                    f => (call(f, vec![x]), b),
                }
            }
            8 => self.vector_detour(Scalar::F32, sub, ctx),
            _ => self.leaf(Scalar::F32, d, ctx),
        }
    }

    fn bool_expr(&mut self, d: u32, ctx: Ctx) -> Expr {
        if d == 0 {
            return self.leaf(Scalar::Bool, 0, ctx).0;
        }
        let sub = d - 1;
        match self.ch.below(8) {
            1 | 2 => {
                let t = if self.cfg.floats && self.ch.chance(30) { Scalar::F32 } else { self.ch.pick(&INT_TYPES) };
                let op = self.ch.pick(&CMP_OPS);
                let (a, _) = self.expr(t, sub, ctx);
                let (b, _) = self.expr(t, sub, ctx);
                bin(op, a, b)
            }
            3 => {
                let op = self.ch.pick(&[BinaryOp::And, BinaryOp::Or]);
                bin(op, self.bool_expr(sub, ctx), self.bool_expr(sub, ctx))
            }
            4 => Expr::Unary { op: UnaryOp::Not, arg: Box::new(self.bool_expr(sub, ctx)) },
            5 if self.simd_here(ctx) => {
                let f = self.ch.pick(&[Intrinsic::SimdAny, Intrinsic::SimdAll]);
                call(f, vec![self.bool_expr(sub, ctx)])
            }
            6 if self.simd_here(ctx) => call(Intrinsic::SimdIsFirst, vec![]),
            7 if self.cfg.floats => {
                // isnan / isinf / isfinite of a float that a condition may
                // replace with an infinity (a bounded value is finite), times
                // 0 at times: NaN where it was infinite. (No NaN literal: a
                // kernel holding one is not equal to itself.)
                let f = self.ch.pick(&[Intrinsic::IsNan, Intrinsic::IsInf, Intrinsic::IsFinite]);
                let (x, _) = self.float_expr(sub, ctx);
                let infinity = lit_f32(self.ch.pick(&[f64::INFINITY, f64::NEG_INFINITY]));
                let x = if self.ch.chance(50) { call(Intrinsic::Select, vec![x, infinity, self.bool_expr(sub, ctx)]) } else { x };
                let x = if self.ch.chance(50) { bin(BinaryOp::Mul, x, lit_f32(0.0)) } else { x };
                call(f, vec![x])
            }
            _ => self.leaf(Scalar::Bool, d, ctx).0,
        }
    }

    /// `(vector op vector).c` or `T(…).c` of a 2-, 3- or 4-vector of `t`.
    fn vector_detour(&mut self, t: Scalar, sub: u32, ctx: Ctx) -> (Expr, f64) {
        let width = self.ch.range(2, 4) as u8;
        let ty = Type::vector(t, width);
        let (a, ba) = self.vector_value(ty, sub, ctx);
        let (v, bound) = match self.ch.below(3) {
            0 => (a, ba),
            1 => {
                let (b, bb) = self.vector_value(ty, sub, ctx);
                self.vector_op(t, a, ba, b, bb)
            }
            _ => {
                let (s, bs) = self.expr(t, sub, ctx);
                self.vector_op(t, a, ba, s, bs)
            }
        };
        let index = self.ch.below(width as u32) as u8;
        (Expr::Extract { arg: Box::new(v), index }, bound)
    }

    fn vector_value(&mut self, ty: Type, sub: u32, ctx: Ctx) -> (Expr, f64) {
        let n = if self.ch.chance(30) { 1 } else { ty.width() as usize };
        let mut bound: f64 = 0.0;
        let mut components = Vec::with_capacity(n);
        for _ in 0..n {
            let (c, b) = self.expr(ty.elem(), sub, ctx);
            bound = bound.max(b);
            components.push(c);
        }
        (Expr::Vector { ty, components }, bound)
    }

    /// `a op b` (`b` a vector of the same type or a scalar), bounded for floats.
    fn vector_op(&mut self, t: Scalar, a: Expr, ba: f64, b: Expr, bb: f64) -> (Expr, f64) {
        let ops: &[BinaryOp] = if t == Scalar::F32 {
            &[BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul]
        } else {
            &[BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::BitAnd, BinaryOp::BitOr, BinaryOp::BitXor]
        };
        let op = self.ch.pick(ops);
        let bound = if op == BinaryOp::Mul { ba * bb } else { ba + bb };
        if t == Scalar::F32 && bound > FLOAT_EXACT_LIMIT {
            return (a, ba);
        }
        (bin(op, a, b), bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every offset and stride `rows_within` picks keeps the rows inside
    /// the buffer and the stride within `span..=span + extra`, whatever the
    /// choices: among them MLX's columns, 32 rows of scales of up to 8
    /// groups in 288 halves, where a stride of `span + 4` would not fit.
    #[test]
    fn rows_within_keeps_every_row_inside_the_buffer() {
        let config = GenConfig::default();
        for choice in [0u32, 1, 2, 3, 4, 5, 7, 8, 11, 12, u32::MAX] {
            let choices = [choice; 2];
            for (len, rows, span, extra) in [(288, 32, 8, 4), (288, 32, 2, 8), (288, 32, 1, 4), (96, 2, 32, 8), (288, 1, 17, 8)] {
                let (offset, stride) = Gen::new(&config, &choices, 0).rows_within(len, rows, span, extra);
                assert!((span..=span + extra).contains(&stride), "stride {stride} for span {span} + {extra}");
                assert!(offset + (rows - 1) * stride + span <= len, "{rows} rows of {span} at {offset}, {stride} apart, past {len}");
            }
        }
    }
}
