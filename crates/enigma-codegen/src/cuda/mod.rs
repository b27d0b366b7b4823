//! CUDA C++ from the IR, for NVRTC, with Metal's semantics (the simulator
//! is the reference).
//!
//! # How the IR maps to CUDA
//! * **Kernel**: `extern "C" __global__ void name(...)`; the entry point is
//!   the kernel's name (with a `_` suffix in the rare case that it is a
//!   CUDA keyword or library name; [`CudaSource::entry_point`] says).
//!   Parameters keep the IR's order: a buffer is a pointer (`const T*` when
//!   read-only), a by-value constant is passed by value. Three parameters
//!   follow: `uint enigma_grid_x, enigma_grid_y, enigma_grid_z` — see
//!   *Launching* below.
//! * **Threadgroup = block, SIMD group = warp (32).** One block runs per
//!   threadgroup, with `blockDim` = the threadgroup size.
//!   `threadgroup_position_in_grid` is `blockIdx`, `threadgroups_per_grid`
//!   is `gridDim`, `thread_index_in_threadgroup` is the linear thread index
//!   `x + y·bdx + z·bdx·bdy`, `thread_index_in_simdgroup` is that `% 32`
//!   and `simdgroup_index_in_threadgroup` that `/ 32` — warps are formed
//!   from the same linear order, so they are exactly the SIMD groups.
//! * **Edge threadgroups of `dispatch_threads`.** Metal makes the
//!   threadgroups at the grid's far edges *partial*: their
//!   `threads_per_threadgroup` is the part of the threadgroup inside the grid,
//!   and positions and linear indices are computed with that partial size.
//!   CUDA has no partial blocks, so the block is launched full and the first
//!   `threads = w·h·d` threads in linear order play the partial threadgroup's
//!   threads: thread `i` takes the position `(i % w, i / w % h, i / (w·h))`.
//!   The remaining threads are all at the end of the linear order (whole
//!   warps, plus the tail of at most one warp) and return before the body.
//!   Barriers must not wait for them: `threadgroup_barrier` is PTX
//!   `barrier.sync 0, n` with `n` = the number of threads in warps that hold
//!   a live thread. PTX counts barrier arrivals per warp and has a warp wait
//!   only for its non-exited threads, so the returned tail of the last warp
//!   and the returned whole warps are never waited for. (The alternative —
//!   keeping out-of-grid threads alive with their effects masked so that
//!   they reach every `__syncthreads()` — would have them evaluate loop
//!   bounds and conditions from loads they must not make, and join SIMD
//!   functions they must not join; it is harder to get right and slower.)
//!   Validation guarantees that no thread that returned early is needed at
//!   a later barrier (a barrier after a non-uniform `return` is rejected),
//!   so the kernel's own `return` is a plain `return`.
//! * **SIMD-group functions over the active lanes.** Metal's functions act
//!   on the lanes active at the call (`simd_sum` inside `if (lane < 8)` sums
//!   8 lanes). The helpers take the active set from `__activemask()` —
//!   the lanes executing the call together, which for the IR's structured
//!   control flow (if/else, loops, no gotos) are the lanes that reached it,
//!   as nvcc/NVRTC reconverge at the end of every structured branch (the
//!   same assumption as cooperative groups' `coalesced_threads()`).
//!   Reductions over a full warp use a 5-step `__shfl_xor_sync` butterfly;
//!   over a partial warp, a tree over the *ranks* of the active lanes (a
//!   butterfly whose partner may be inactive would drop values), then a
//!   broadcast from the first active lane. Prefix sums are Hillis–Steele
//!   scans over ranks; `simd_broadcast_first` reads lane `__ffs(mask) - 1`;
//!   `simd_ballot` is `__ballot_sync` widened to 64 bits; `simd_is_first`
//!   compares with the first active lane; shuffles compute their source lane
//!   as the simulator does (own value at the edges) and read it with
//!   `__shfl_sync` over the active mask, 32 bits at a time for any type.
//!   `simdgroup_barrier` is `__syncwarp(__activemask())`.
//! * **Tile copies** (`tile_copy`, `tile_wait`): from compute capability
//!   9.0 one thread issues the tensor copy engine's boxes on the
//!   threadgroup's `mbarrier`s, described by a `CUtensorMap` parameter each
//!   (`tensor_map`); before it the threads copy the box and the wait is a
//!   barrier.
//! * **Memory**: threadgroup arrays are static `__shared__` arrays
//!   ([`CudaSource::static_shared_bytes`]) while they total at most 48 KiB
//!   ([`STATIC_SHARED_LIMIT`], CUDA's limit on static shared memory). Above
//!   that they are carved out of one `extern __shared__` byte array at the
//!   offsets of [`shared_layout`] (the same the static arrays take), and the
//!   launch must pass [`CudaSource::dynamic_shared_bytes`] after allowing the
//!   function that much (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`);
//!   up to [`MAX_SHARED_LIMIT`] (227 KiB, the largest opt-in of any GPU), the
//!   device's own limit being the runtime's to check. Atomics are
//!   `atomicAdd/atomicSub/atomicMin/atomicMax/atomicAnd/atomicOr/atomicXor/
//!   atomicExch/atomicCAS` (`atomicAdd` of the negation for `f32` sub);
//!   plain loads and stores of memory that atomics touch are `volatile`
//!   (relaxed) accesses.
//! * **Types**: `half` is `__half` (`cuda_fp16.h`), `bfloat` is
//!   `__nv_bfloat16` (`cuda_bf16.h`), included only when used (NVRTC needs
//!   the toolkit's include directory). Vectors are `enigma::float4` and
//!   friends, a small template with MSL's layout (a 3-vector is padded to the
//!   size and alignment of a 4-vector, unlike CUDA's `float3`), componentwise
//!   operators and converting constructors. Conversions involving `half` or
//!   `bfloat` go through `float`, as in the simulator.
//! * **Integers**: C semantics for `/` and `%`; shift amounts masked to the
//!   bit width (`x << (n & 31u)`) as the IR defines shifts; 8- and 16-bit
//!   arithmetic cut back to its type after every operation.
//! * **Specialisation constants** are fixed when the source is generated:
//!   [`Options::spec_values`] overrides their defaults, and each becomes
//!   a `const` at the top of the kernel body.
//! * **Functions**: `f32` math calls CUDA's functions (`expf`, `rsqrtf`,
//!   `fminf`, …): `fast::` variants the intrinsics CUDA has (`__expf`,
//!   `__sinf`, …), `precise::` ones the full-precision functions and the
//!   correctly rounded `__fsqrt_rn`, `__frsqrt_rn`; math on `half`, `bfloat` and
//!   vectors, `select`, `popcount/clz/ctz` and every SIMD-group function call
//!   a helper in `namespace enigma`, emitted in a prelude only when used.
//!
//! # Launching
//! Launch `threadgroups` blocks of `threads_per_threadgroup` threads, both
//! as `dim3`, with the IR's parameters in order and then
//! [`CudaSource::launch_params`]: the grid size **in threads**, one `uint`
//! per axis —
//! `dispatch_threads(grid, tg)`: the grid as given, with
//! `ceil(grid / tg)` blocks per axis; `dispatch_threadgroups(tgs, tg)`:
//! `tgs · tg` (then no threadgroup is partial). This single parameter
//! carries the dispatch mode, so no separate flag is needed;
//! `threads_per_grid` reads it.
//!
//! # What has been checked
//! Golden files, and `g++ -fsyntax-only` of every golden source against a
//! CUDA shim header (`tests/shim/`) — **not NVRTC**; see the crate
//! documentation. The report of the change that added this module says what
//! has additionally been compiled with NVRTC/nvcc and run on an NVIDIA GPU.

pub(crate) mod cooperative;
mod prelude;
mod tensor_map;
pub use enigma_ir::dispatch_constant::HostExpr;
pub use tensor_map::TensorMap;

use crate::dialect::{literal_default, BOperandTile, BuiltinOrd, DResult, Dialect, KernelCx, TileCopyCode};
use crate::error::{CodegenError, CodegenErrorKind, Target};
use crate::names::Names;
use crate::code::{Code, Prec, TgIndex};
use crate::writer::{push_indented, sorted_builtins, Writer};
use enigma_ir::validate::check_literal;
use enigma_ir::{
    Access, AtomicOp, BarrierScope, Builtin, Intrinsic, Kernel, KernelInfo, Literal, MatrixType, MemFlags, Memory, ParamId,
    ParamKind, Precision, Scalar, SpecId, TgArrayId, Type,
};
use prelude::{Helper, PreludeCx};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The alignment of every `__shared__` array: 16 bytes, so that 16-byte
/// accesses (ldmatrix rows of SIMD-group matrix loads) can start at any
/// 16-byte-aligned element of it.
const SHARED_ALIGN: u64 = 16;

/// CUDA's limit on static `__shared__` memory per block: threadgroup arrays
/// that fit are static arrays; larger ones are carved out of dynamic shared
/// memory ([`CudaSource::dynamic_shared_bytes`]).
pub const STATIC_SHARED_LIMIT: u64 = 48 * 1024;

/// The most shared memory any CUDA GPU lets one block opt in to (227 KiB,
/// sm_90); the runtime checks the device's own limit.
pub const MAX_SHARED_LIMIT: u64 = 227 * 1024;

/// The name of the dynamic shared memory the threadgroup arrays are carved
/// out of, when they need more than [`STATIC_SHARED_LIMIT`].
const DYNAMIC_SHARED: &str = "enigma_shared";

/// Where a kernel's threadgroup arrays lie in shared memory: each at an
/// offset aligned to 16 bytes or to its element's size, whichever is
/// larger, in declaration order. Static arrays take this much space; carved
/// out of dynamic shared memory, they lie at exactly these offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedLayout {
    /// The byte offset of each threadgroup array, in declaration order.
    pub offsets: Vec<u64>,
    /// The largest alignment of any array (at least 16 bytes): the
    /// alignment the memory holding them needs.
    pub align: u64,
    /// The bytes of all arrays, from offset 0 to the end of the last.
    pub bytes: u64,
}

/// The shared-memory layout of `kernel`'s threadgroup arrays.
pub fn shared_layout(kernel: &Kernel) -> SharedLayout {
    let mut layout = SharedLayout { offsets: Vec::with_capacity(kernel.threadgroup_arrays.len()), align: SHARED_ALIGN, bytes: 0 };
    for (arr, align) in kernel.threadgroup_arrays.iter().zip(array_aligns(kernel)) {
        let offset = layout.bytes.div_ceil(align) * align;
        layout.offsets.push(offset);
        layout.align = layout.align.max(align);
        layout.bytes = offset + arr.size_bytes();
    }
    layout
}

/// The alignment of each threadgroup array: 16 bytes or its element's
/// size, whichever is larger, and 1024 bytes for an array that may be a
/// `wgmma` operand (on sm_90a; [`cooperative`]'s swizzle atoms), whatever
/// the target, so that the layout is one.
fn array_aligns(kernel: &Kernel) -> Vec<u64> {
    let wgmma = cooperative::Plan::new(kernel, true, false);
    let mut copied = BTreeSet::new();
    enigma_ir::visit::walk_block(&kernel.body, enigma_ir::Branch::Body, &mut enigma_ir::StmtPath::default(), &mut |_, stmt| {
        if let enigma_ir::StmtKind::TileCopy(copy) = &stmt.kind {
            copied.insert(copy.dst);
        }
    });
    kernel
        .threadgroup_arrays
        .iter()
        .zip(&wgmma.swizzled)
        .enumerate()
        .map(|(i, (arr, s))| {
            let own = SHARED_ALIGN.max(arr.elem.size_bytes() as u64);
            let copied = if copied.contains(&Memory::Threadgroup(TgArrayId(i as u32))) { u64::from(enigma_ir::limits::TILE_DST_ALIGN) } else { 0 };
            if s.is_some() { cooperative::SWIZZLE_ALIGN } else { own.max(copied) }
        })
        .collect()
}

/// Texture objects one `enigma::texture2d` argument holds, one per sampler
/// the kernel samples that texture with (in the order of
/// `KernelInfo::samplers`). The argument is passed by value with this layout
/// (56 bytes, 8-aligned): `u64 surface; u32 width, height, format; u32 pad;
/// u64 samplers[4]`, `format` the index of the format in `TextureFormat::ALL`.
pub const MAX_SAMPLERS_PER_TEXTURE: usize = 4;

/// The names of the three parameters that follow the IR's parameters.
pub const GRID_PARAMS: [&str; 3] = ["enigma_grid_x", "enigma_grid_y", "enigma_grid_z"];

/// Options of the CUDA generator.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// The value of every specialisation constant, in declaration order
    /// (`enigma_backend`'s `SpecValues::resolve` gives them); empty keeps
    /// every default. Each must have its constant's type.
    pub spec_values: Vec<Literal>,
    /// Writes `__launch_bounds__(n)` on the kernel (the largest threadgroup
    /// it will be launched with).
    pub max_threads_per_threadgroup: Option<u32>,
    /// Whether the source is compiled for `sm_90a` (NVRTC's
    /// `--gpu-architecture=sm_90a`), so that cooperative products may run on
    /// `wgmma` (docs/cooperative-tensors.md); otherwise every product takes the scalar path.
    pub wgmma: bool,
    /// Whether the source is compiled for compute capability 8.0 or later,
    /// so that cooperative products `wgmma` does not take may run on
    /// `mma.sync` m16n8k16 (docs/cooperative-tensors.md).
    pub mma: bool,
    /// Whether the source is compiled for compute capability 9.0 or later,
    /// so that tile copies run on the tensor copy engine
    /// (`cp.async.bulk.tensor`) with a shared-memory barrier each.
    pub tensor_copies: bool,
}

impl Options {
    /// The options for source compiled for `arch` (`sm_80`, `sm_90a`, …,
    /// as NVRTC's `--gpu-architecture` names it): `wgmma` on `sm_90a` (the
    /// architecture-specific Hopper target), `mma.sync` m16n8k16 from
    /// compute capability 8.0; None for a name that is not `sm_` and a
    /// compute capability.
    pub fn for_arch(arch: &str) -> Option<Options> {
        let cc: u32 = arch.strip_prefix("sm_")?.trim_end_matches('a').parse().ok()?;
        Some(Options { wgmma: arch == "sm_90a", mma: cc >= 80, tensor_copies: cc >= 90, ..Options::default() })
    }
}

/// A generated CUDA kernel and what the runtime needs to launch it.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaSource {
    /// The CUDA C++ source, for NVRTC (`--std=c++17`, with the toolkit's
    /// include directory when `half` or `bfloat` is used).
    pub source: String,
    /// The `extern "C"` name to look up in the compiled module.
    pub entry_point: String,
    /// Bytes of static `__shared__` memory (the threadgroup arrays, aligned,
    /// when they fit in [`STATIC_SHARED_LIMIT`]; else 0).
    pub static_shared_bytes: u64,
    /// Bytes of dynamic shared memory the launch must pass (the threadgroup
    /// arrays, aligned, when they need more than [`STATIC_SHARED_LIMIT`];
    /// else 0). The function must first be allowed that much
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub dynamic_shared_bytes: u64,
    /// The parameters that follow the IR's own. The IR's come first, in
    /// order: a buffer as a device pointer, a by-value constant as its bytes
    /// (vectors with MSL's layout: a 3-vector takes the space of 4 elements).
    pub launch_params: Vec<LaunchParam>,
}

/// A kernel parameter the runtime adds after the IR's parameters: the
/// grid sizes (32-bit unsigned integers), then one `CUtensorMap` (128
/// bytes, `const __grid_constant__`) per matrix and box shape the tensor
/// copy engine copies (tile copies of both share it), in the order of the
/// kernel's statements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchParam {
    /// The grid size in threads along x: the `dispatch_threads` grid, or
    /// `threadgroups · threads_per_threadgroup` for `dispatch_threadgroups`
    /// (which makes every threadgroup full, so no separate mode flag is needed).
    GridX,
    GridY,
    GridZ,
    TensorMap(TensorMap),
}

/// Bytes of a `CUtensorMap` kernel parameter.
pub const TENSOR_MAP_BYTES: usize = 128;

/// The tile barriers' array in shared memory and each thread's phase bits
/// (one per barrier, flipped at each of its waits).
const TILE_BARRIERS: &str = "enigma_tile_barriers";
const TILE_PHASES: &str = "enigma_tile_phases";

/// Words CUDA reserves beyond the common list: its built-in variables, the
/// functions the generated code calls, and common library names.
const CUDA_RESERVED: &[&str] = &[
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "uint3", "atomicAdd", "atomicSub",
    "atomicMin", "atomicMax", "atomicAnd", "atomicOr", "atomicXor", "atomicExch", "atomicCAS", "expf", "exp2f",
    "logf", "log2f", "sqrtf", "rsqrtf", "tanhf", "sinf", "cosf", "floorf", "ceilf", "powf", "fmaf", "fmodf",
    "fabsf", "fminf", "fmaxf", "llabs", "printf", "malloc", "free", "memcpy", "memset", "assert", "signed",
    "tan", "tanf", "asin", "acos", "atan", "atan2", "sinh", "cosh", "erf", "erfc", "lgamma", "tgamma", "round",
    "trunc", "rint", "hypot", "cbrt", "j0", "j1", "y0", "y1", "frexp", "ldexp", "modf", "norm", "fdim",
    "extern", "__global__",
];

/// The entry point's name in the generated source.
pub fn entry_point(kernel: &Kernel) -> String {
    Names::new(kernel, CUDA_RESERVED).kernel
}

/// Writes `kernel` (validated, with the `info` validation returned) as CUDA.
pub fn write_string(kernel: &Kernel, info: &KernelInfo, options: &Options) -> Result<CudaSource, CodegenError> {
    let err = |kind| CodegenError { kernel: kernel.name.clone(), target: Target::Cuda, location: None, kind };
    let specs = &kernel.spec_constants;
    if !options.spec_values.is_empty() && options.spec_values.len() != specs.len() {
        return Err(err(CodegenErrorKind::SpecializationCount { expected: specs.len(), found: options.spec_values.len() }));
    }
    for (spec, value) in specs.iter().zip(&options.spec_values) {
        let name = spec.name.clone();
        if value.ty != spec.ty {
            return Err(err(CodegenErrorKind::SpecializationType { name, expected: spec.ty, found: value.ty }));
        }
        check_literal(value).map_err(|_| err(CodegenErrorKind::SpecializationRange { name, ty: spec.ty }))?;
    }
    let spec_values = specs.iter().enumerate().map(|(i, s)| options.spec_values.get(i).copied().unwrap_or(s.default)).collect();
    let names = Names::new(kernel, CUDA_RESERVED);
    let entry_point = names.kernel.clone();
    let layout = shared_layout(kernel);
    if layout.bytes > MAX_SHARED_LIMIT {
        return Err(err(CodegenErrorKind::SharedMemoryLimit { bytes: layout.bytes, limit: MAX_SHARED_LIMIT }));
    }
    let dynamic = layout.bytes > STATIC_SHARED_LIMIT;
    let (static_shared_bytes, dynamic_shared_bytes) = if dynamic { (0, layout.bytes) } else { (layout.bytes, 0) };
    for (tex, samplers) in &info.samplers {
        if samplers.len() > MAX_SAMPLERS_PER_TEXTURE {
            let texture = kernel.param(*tex).name.clone();
            return Err(err(CodegenErrorKind::TooManySamplers { texture, count: samplers.len(), limit: MAX_SAMPLERS_PER_TEXTURE }));
        }
    }
    let carved = dynamic.then_some(layout);
    let cooperative = cooperative::Plan::new(kernel, options.wgmma, options.mma);
    let dialect = Cuda { options: options.clone(), spec_values, helpers: BTreeSet::new(), matrices: false, carved, cooperative, tile_copies: false, tensor_maps: vec![] };
    let (source, dialect) = Writer::new(kernel, info, names, dialect).finish()?;
    let mut launch_params = vec![LaunchParam::GridX, LaunchParam::GridY, LaunchParam::GridZ];
    launch_params.extend(dialect.tensor_maps.into_iter().map(LaunchParam::TensorMap));
    Ok(CudaSource { source, entry_point, static_shared_bytes, dynamic_shared_bytes, launch_params })
}

struct Cuda {
    options: Options,
    spec_values: Vec<Literal>,
    helpers: BTreeSet<Helper>,
    /// Whether the body uses SIMD-group matrices (the tile helpers).
    matrices: bool,
    /// The layout the threadgroup arrays are carved out of dynamic shared
    /// memory with, when they do not fit in static shared memory.
    carved: Option<SharedLayout>,
    /// How cooperative tensors and `wgmma` operand arrays are laid out.
    cooperative: cooperative::Plan,
    /// Whether the body has tile copies.
    tile_copies: bool,
    /// The tensor maps of the tile copies the engine runs, in order.
    tensor_maps: Vec<TensorMap>,
}

/// The CUDA tile helpers (`enigma_tile<T, R, C>` in the tensor cores' lane map:
/// mma.sync for 16-bit tiles on sm_80+, exact shuffles and fmaf otherwise).
const TILES: &str = include_str!("tiles.cu");

fn is_half_type(s: Scalar) -> bool {
    matches!(s, Scalar::F16 | Scalar::BF16)
}

fn args_text(args: &[Code]) -> String {
    args.iter().map(|a| a.text.clone()).collect::<Vec<_>>().join(", ")
}

impl Cuda {
    fn need(&mut self, h: Helper) {
        prelude::require(&mut self.helpers, h);
    }

    /// `enigma::name(args)`, needing helper `h`.
    fn helper_call(&mut self, h: Helper, name: &str, args: &[Code]) -> Code {
        self.need(h);
        Code::postfix(format!("enigma::{name}({})", args_text(args)))
    }
}

/// The position of an intrinsic in [`Intrinsic::ALL`] (the prelude's order).
fn intrinsic_index(func: Intrinsic) -> usize {
    Intrinsic::ALL.iter().position(|f| *f == func).unwrap_or(0)
}

impl Dialect for Cuda {
    fn scalar_view(&self, _mem: Memory, s: Scalar, name: &str) -> String {
        format!("reinterpret_cast<const {}*>({name})", self.scalar_name(s))
    }

    fn use_matrices(&mut self) {
        self.matrices = true;
        self.need(Helper::AndOr);
    }

    fn cooperative_tensors(&self) -> DResult<()> {
        Ok(())
    }

    fn cooperative_registers(&self) -> Option<&cooperative::Plan> {
        Some(&self.cooperative)
    }

    fn use_cooperative_registers(&mut self, wgmma: bool) {
        self.need(Helper::CooperativeLayout);
        if wgmma {
            self.need(Helper::Wgmma);
        }
    }

    fn threadgroup_index(&self, array: TgArrayId, index: TgIndex) -> String {
        match self.cooperative.swizzled.get(array.0 as usize).copied().flatten() {
            Some(s) => s.index_code(index),
            None => index.code,
        }
    }

    fn threadgroup_array_align(&self) -> u64 {
        SHARED_ALIGN
    }

    fn and_or(&mut self, a: Code, b: Code, c: Code) -> Option<Code> {
        Some(self.helper_call(Helper::AndOr, "and_or", &[a, b, c]))
    }

    /// `enigma_btile`, loaded by `enigma_tile_load_b` (mma.sync's B layout,
    /// which ldmatrix loads directly: no movmatrix per product) and
    /// `enigma_tile_load_qb` (each lane decodes one byte of a packed word,
    /// two K-consecutive weights of one column, straight into its register).
    fn b_operand_tile(&self, m: MatrixType) -> Option<BOperandTile> {
        let spelling = format!("enigma_btile<{}, {}, {}>", self.scalar_name(m.elem()), m.rows(), m.cols());
        Some(BOperandTile { spelling, load: "enigma_tile_load_b", load_quantized: "enigma_tile_load_qb" })
    }

    const TARGET: Target = Target::Cuda;

    fn scalar_name(&self, s: Scalar) -> &'static str {
        prelude::scalar_for_alias(s)
    }

    fn type_name(&self, ty: Type) -> String {
        if ty.width() == 1 {
            self.scalar_name(ty.elem()).to_string()
        } else {
            format!("enigma::{}", ty.msl_name())
        }
    }

    fn int_suffix(&self, s: Scalar) -> &'static str {
        match s {
            Scalar::U32 => "u",
            Scalar::I64 => "ll",
            Scalar::U64 => "ull",
            _ => "",
        }
    }

    fn half_literal(&self, s: Scalar, text: &str) -> String {
        format!("({}){text}f", self.scalar_name(s))
    }

    fn special_float(&self, s: Scalar, value: f64) -> Code {
        let bits = if value.is_nan() {
            (value as f32).to_bits()
        } else if value > 0.0 {
            f32::INFINITY.to_bits()
        } else {
            f32::NEG_INFINITY.to_bits()
        };
        let f = format!("__uint_as_float({bits:#010x}u)");
        if s == Scalar::F32 {
            Code::postfix(f)
        } else {
            Code::new(format!("({}){f}", self.scalar_name(s)), Prec::Unary)
        }
    }

    fn narrow_literal(&self, s: Scalar, value: &str) -> Code {
        let value = if value.starts_with('-') { format!("({value})") } else { value.to_string() };
        Code::new(format!("({}){value}", self.scalar_name(s)), Prec::Unary)
    }

    fn literal(&self, lit: &Literal) -> Code {
        literal_default(self, lit)
    }

    fn cast(&mut self, to: Type, from: Type, arg: Code) -> Code {
        if to.width() > 1 {
            self.need(Helper::Vec);
            if from.width() == 1 {
                // A splat of the converted scalar.
                let scalar = self.cast(Type::scalar(to.elem()), from, arg);
                return Code::postfix(format!("{}({})", self.type_name(to), scalar.text));
            }
            return Code::postfix(format!("{}({})", self.type_name(to), arg.text));
        }
        let name = self.scalar_name(to.elem());
        let from_float = matches!(from.elem(), Scalar::F32 | Scalar::F16 | Scalar::BF16);
        if from_float && to.elem().is_int() {
            // Saturating with NaN → 0, through `Convert` (a C cast is
            // undefined out of range: in practice it wraps through int for
            // narrow types and gives the minimum for NaN in 64 bits).
            self.need(Helper::Convert);
            return Code::postfix(format!("enigma::convert<{name}>({})", arg.text));
        }
        let through_float = to.elem() != from.elem()
            && ((is_half_type(from.elem()) && to.elem() != Scalar::F32) || (is_half_type(to.elem()) && from.elem() != Scalar::F32));
        if through_float {
            Code::new(format!("({name})(float){}", arg.unary_operand()), Prec::Unary)
        } else {
            Code::new(format!("({name}){}", arg.unary_operand()), Prec::Unary)
        }
    }

    fn bitcast(&mut self, to: Type, from: Type, arg: Code) -> Code {
        let native = match (from, to) {
            (Type::F32, Type::U32) => Some("__float_as_uint"),
            (Type::U32, Type::F32) => Some("__uint_as_float"),
            (Type::F32, Type::I32) => Some("__float_as_int"),
            (Type::I32, Type::F32) => Some("__int_as_float"),
            _ => None,
        };
        match native {
            Some(f) => Code::postfix(format!("{f}({})", arg.text)),
            None => {
                self.need(Helper::Bitcast);
                Code::postfix(format!("enigma::bitcast<{}>({})", self.type_name(to), arg.text))
            }
        }
    }

    fn vector(&mut self, ty: Type, components: Vec<Code>) -> Code {
        self.need(Helper::Vec);
        Code::postfix(format!("{}({})", self.type_name(ty), args_text(&components)))
    }

    fn float_rem(&mut self, ty: Type, a: Code, b: Code) -> Code {
        if ty == Type::F32 {
            Code::postfix(format!("fmodf({}, {})", a.text, b.text))
        } else {
            self.helper_call(Helper::Math("fmod"), "fmod", &[a, b])
        }
    }

    fn call(&mut self, func: Intrinsic, precision: Precision, types: &[Type], result: Type, args: Vec<Code>) -> DResult<Code> {
        use Intrinsic::*;
        let t0 = types.first().copied().unwrap_or(result);
        let native_int = t0.width() == 1 && matches!(t0.elem(), Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64);
        let name = func.name();
        if func.is_simd() {
            let name: &'static str = func.name();
            return Ok(self.helper_call(Helper::Simd(intrinsic_index(func), name), name, &args));
        }
        let code = match func {
            Clamp if t0 == Type::F32 => {
                Code::postfix(format!("fminf(fmaxf({}, {}), {})", args[0].text, args[1].text, args[2].text))
            }
            Clamp if native_int => Code::postfix(format!("min(max({}, {}), {})", args[0].text, args[1].text, args[2].text)),
            Min | Max if native_int => Code::postfix(format!("{name}({})", args_text(&args))),
            Abs if native_int => match t0.elem() {
                Scalar::I32 => Code::postfix(format!("abs({})", args[0].text)),
                Scalar::I64 => Code::postfix(format!("llabs({})", args[0].text)),
                _ => args[0].clone(), // |x| of an unsigned x
            },
            f if t0 == Type::F32 && prelude::f32_function(f, precision).is_some() => {
                Code::postfix(format!("{}({})", prelude::f32_function(f, precision).unwrap_or(name), args_text(&args)))
            }
            // A float vector in a variant with its own CUDA function.
            f if t0.elem() == Scalar::F32 && prelude::f32_function(f, precision) != prelude::f32_function(f, Precision::Default) => {
                let variant = format!("{}_{name}", precision.namespace().unwrap_or("default"));
                self.need(Helper::MathVariant(intrinsic_index(f), precision));
                Code::postfix(format!("enigma::{variant}({})", args_text(&args)))
            }
            Clamp => self.helper_call(Helper::Clamp, "clamp", &args),
            Select => self.helper_call(Helper::Select, "select", &args),
            Popcount | Clz | Ctz => self.helper_call(Helper::Bits, name, &args),
            _ => self.helper_call(Helper::Math(name), name, &args),
        };
        Ok(code)
    }

    fn spec(&self, _id: SpecId, name: &str) -> Code {
        Code::primary(name)
    }

    fn load(&mut self, _mem: Memory, _elem: Type, atomic: bool, place: Code) -> Code {
        if atomic {
            self.need(Helper::AtomicAccess);
            Code::postfix(format!("enigma::atomic_load(&{})", place.text))
        } else {
            place
        }
    }

    fn store(&mut self, _mem: Memory, _elem: Type, atomic: bool, place: Code, value: Code) -> String {
        if atomic {
            self.need(Helper::AtomicAccess);
            format!("enigma::atomic_store(&{}, {})", place.text, value.text)
        } else {
            format!("{} = {}", place.text, value.text)
        }
    }

    fn atomic(&mut self, op: AtomicOp, _mem: Memory, elem: Type, place: Code, value: Code) -> DResult<Code> {
        let (func, value) = match op {
            AtomicOp::Add => ("atomicAdd", value.text),
            AtomicOp::Sub if elem.elem() == Scalar::F32 => ("atomicAdd", format!("-{}", value.unary_operand())),
            AtomicOp::Sub => ("atomicSub", value.text),
            AtomicOp::Min => ("atomicMin", value.text),
            AtomicOp::Max => ("atomicMax", value.text),
            AtomicOp::And => ("atomicAnd", value.text),
            AtomicOp::Or => ("atomicOr", value.text),
            AtomicOp::Xor => ("atomicXor", value.text),
            AtomicOp::Exchange => ("atomicExch", value.text),
        };
        Ok(Code::postfix(format!("{func}(&{}, {value})", place.text)))
    }

    fn compare_exchange(&mut self, _mem: Memory, _elem: Type, place: Code, expected: Code, desired: Code) -> DResult<Code> {
        Ok(Code::postfix(format!("atomicCAS(&{}, {}, {})", place.text, expected.text, desired.text)))
    }

    fn texture_read(&mut self, tex: &str, texel: Scalar, coord: Code) -> Code {
        self.need(Helper::Texture);
        Code::postfix(format!("enigma::texture_read<{}>({tex}, {})", self.scalar_name(texel), coord.text))
    }

    fn async_copy(&mut self, dst: Code, src: Code, src_base: &str, elem: Type, count: u32, valid: Code) -> String {
        self.need(Helper::AsyncCopy);
        let bytes = count * elem.size_bytes();
        format!("enigma::async_copy<{bytes}>(&{}, &{}, {src_base}, {})", dst.text, src.text, valid.text)
    }

    fn async_commit(&mut self) -> Option<String> {
        self.need(Helper::AsyncCopy);
        Some("enigma::async_commit()".into())
    }

    fn async_wait(&mut self, pending: u32) -> Option<String> {
        self.need(Helper::AsyncCopy);
        Some(format!("enigma::async_wait<{pending}>()"))
    }

    /// With the tensor copy engine, one thread adds the box's bytes to the
    /// barrier's phase and issues a box per panel; where the engine cannot
    /// take the copy (or, for a swizzled destination, its index is off a
    /// whole atom at run time) the threads copy it and pass a barrier. At
    /// the wait one thread arrives (the phase's one arrival) and every
    /// thread waits for the phase. Without the engine the threads copy the
    /// box and the wait is a barrier.
    fn tile_copy(&mut self, copy: &TileCopyCode<'_>) -> DResult<String> {
        self.tile_copies = true;
        if !self.options.tensor_copies {
            return Ok(copy.threads_copy.clone());
        }
        self.need(Helper::TileCopy);
        let c = copy.copy;
        let barrier = format!("&{TILE_BARRIERS}[{}]", copy.barrier);
        let enigma_ir::Memory::Threadgroup(array) = c.dst else { unreachable!("validated: a tile copy writes threadgroup memory") };
        let swizzle = self.cooperative.swizzled.get(array.0 as usize).copied().flatten().map(|s| s.pitch);
        let fence = if self.cooperative.has_wgmma() { "enigma::async_proxy_fence();\n" } else { "" };
        let threads = format!("{}\n{fence}enigma::threadgroup_barrier(enigma_tg);", copy.threads_copy);
        let Some(plan) = tensor_map::engine_plan(copy.kernel, &self.spec_values, c, copy.elem.elem(), swizzle) else {
            return Ok(threads);
        };
        // Copies of one matrix in one shape share a map.
        let map = self.tensor_maps.iter().position(|m| *m == plan.map).unwrap_or(self.tensor_maps.len());
        let bytes = c.rows * c.cols * copy.elem.size_bytes();
        let (dst, dst_index) = &copy.dst;
        let [row, col] = &copy.origin;
        let mut engine = format!("if (enigma_tg.index == 0u) {{\n    enigma::tile_expect({barrier}, {bytes}u);\n");
        for p in 0..plan.panels {
            let offset = p * cooperative::PANEL;
            let element = self.threadgroup_index(array, TgIndex { code: format!("({dst_index}) + {offset}u"), split: None });
            let _ = writeln!(
                engine,
                "    enigma::tile_load(&{dst}[{element}], &enigma_tensor_map{map}, ({col}) + {offset}, ({row}), {barrier});"
            );
        }
        engine.push('}');
        if map == self.tensor_maps.len() {
            self.tensor_maps.push(plan.map);
        }
        Ok(match plan.swizzle_pitch {
            Some(pitch) => format!("if ((({dst_index}) % {}u) == 0u) {{\n{}\n}} else {{\n{}\n}}", 8 * pitch, indent(&engine), indent(&threads)),
            None => engine,
        })
    }

    fn tile_wait(&mut self, barrier: Code) -> String {
        if !self.options.tensor_copies {
            return if self.cooperative.has_wgmma() {
                "enigma::async_proxy_fence(); enigma::threadgroup_barrier(enigma_tg)".into()
            } else {
                "enigma::threadgroup_barrier(enigma_tg)".into()
            };
        }
        let b = barrier.text;
        format!(
            "if (enigma_tg.index == 0u) {{ enigma::tile_arrive(&{TILE_BARRIERS}[{b}]); }} enigma::tile_wait(&{TILE_BARRIERS}[{b}], ({TILE_PHASES} >> ({b})) & 1u); {TILE_PHASES} ^= 1u << ({b})"
        )
    }

    fn device_fence(&mut self) -> DResult<String> {
        Ok("__threadfence()".into())
    }

    fn print(&mut self, format: &str, args: &[String]) -> DResult<String> {
        let args: String = args.iter().map(|a| format!(", {a}")).collect();
        Ok(format!("printf(\"{format}\\n\"{args})"))
    }

    fn texture_fence(&mut self, tex: &str) -> String {
        self.need(Helper::Texture);
        format!("enigma::texture_fence({tex})")
    }

    fn texture_sample(&mut self, tex: &str, texel: Scalar, _sampler: usize, slot: usize, uv: Code) -> Code {
        self.need(Helper::Texture);
        Code::postfix(format!("enigma::texture_sample<{}>({tex}, {slot}, {})", self.scalar_name(texel), uv.text))
    }

    fn texture_write(&mut self, tex: &str, _texel: Scalar, value: Code, coord: Code) -> String {
        self.need(Helper::Texture);
        format!("enigma::texture_write({tex}, {}, {})", value.text, coord.text)
    }

    fn barrier(&mut self, scope: BarrierScope, _flags: MemFlags, at: &enigma_ir::StmtPath) -> String {
        match scope {
            // barrier.sync orders shared and global memory within the block,
            // which covers every mem_flags.
            // In a kernel with wgmma products each thread first orders its
            // shared-memory writes before the async proxy's reads, so that
            // a product after the barrier reads what every thread wrote.
            // Products still in flight complete first: after the barrier
            // another thread may write their operands.
            // Overlapped products: the newest group, a product issued since
            // the previous barrier, may stay in flight (`cooperative`'s
            // module doc).
            BarrierScope::Threadgroup if self.cooperative.leaves_one_group(at) => {
                "enigma::wgmma_wait_all_but_last(); enigma::async_proxy_fence(); enigma::threadgroup_barrier(enigma_tg)".into()
            }
            BarrierScope::Threadgroup if self.cooperative.has_wgmma() => {
                "enigma::wgmma_wait(); enigma::async_proxy_fence(); enigma::threadgroup_barrier(enigma_tg)".into()
            }
            BarrierScope::Threadgroup => "enigma::threadgroup_barrier(enigma_tg)".into(),
            BarrierScope::Simdgroup if self.cooperative.has_wgmma() => "enigma::wgmma_wait(); __syncwarp(__activemask())".into(),
            BarrierScope::Simdgroup => "__syncwarp(__activemask())".into(),
        }
    }

    fn head(&mut self, cx: &KernelCx<'_>) -> DResult<String> {
        let k = cx.kernel;
        let types: Vec<Type> = cx.types.iter().map(|t| t.get()).collect();
        let textures = k.params.iter().any(|p| matches!(p.kind, ParamKind::Texture { .. }));
        if textures {
            self.need(Helper::Texture);
        }
        // Textures convert float16 channels whatever their texel type; the
        // tile helpers name both 16-bit types (their tensor-core paths).
        let half = textures || self.matrices || types.iter().any(|t| t.elem() == Scalar::F16);
        let bfloat = self.matrices || types.iter().any(|t| t.elem() == Scalar::BF16);
        let builtins = sorted_builtins(cx.builtins);
        // Builtins read only by component are CUDA's own `uint3`; those read
        // whole are `enigma::uint3` (which `types` then holds).
        let vector_types: Vec<Type> = types.iter().copied().filter(|t| t.width() > 1).collect();
        if !vector_types.is_empty() {
            self.need(Helper::Vec);
        }
        let pcx = PreludeCx {
            half,
            bfloat,
            vectors: !vector_types.is_empty(),
            aliases: vector_types.iter().map(|t| (t.msl_name(), prelude::scalar_for_alias(t.elem()), t.width())).collect(),
        };

        let mut out = format!(
            "// `{}`: generated by enigma from the IR, with Metal's semantics in CUDA C++.\n\
             // Launch one block per threadgroup; after the kernel's own parameters pass the\n\
             // grid size in threads (enigma_grid_x/y/z): the dispatch_threads grid, or\n\
             // threadgroups * threads_per_threadgroup for dispatch_threadgroups.\n",
            k.name
        );
        if half {
            out.push_str("#include <cuda_fp16.h>\n");
        }
        if bfloat {
            out.push_str("#include <cuda_bf16.h>\n");
        }
        if cx.info.prints {
            // NVRTC declares printf itself; nvcc finds it in <cstdio>.
            out.push_str("#if !defined(__CUDACC_RTC__)\n#include <cstdio>\n#endif\n");
        }
        out.push_str("\ntypedef unsigned int uint;\n\n");
        prelude::write(&mut out, &self.helpers, &pcx);
        if self.matrices {
            out.push_str(TILES);
        }
        out.push_str(cx.prologue);

        let launch_bounds = match self.options.max_threads_per_threadgroup {
            Some(n) => format!("__launch_bounds__({n}) "),
            None => String::new(),
        };
        let _ = writeln!(out, "extern \"C\" __global__ void {launch_bounds}{}(", cx.names.kernel);
        let mut params = vec![];
        for (i, p) in k.params.iter().enumerate() {
            let name = cx.names.param(ParamId(i as u32));
            params.push(match p.kind {
                ParamKind::Buffer { elem, access: Access::Read } if !cx.info.atomic_memories.contains(&Memory::Buffer(ParamId(i as u32))) => {
                    format!("const {}* {name}", self.type_name(elem))
                }
                ParamKind::Buffer { elem, .. } => format!("{}* {name}", self.type_name(elem)),
                ParamKind::Value { ty } => format!("{} {name}", self.type_name(ty)),
                ParamKind::Texture { .. } => format!("enigma::texture2d {name}"),
            });
        }
        params.extend(GRID_PARAMS.iter().map(|p| format!("uint {p}")));
        params.extend((0..self.tensor_maps.len()).map(|m| format!("const __grid_constant__ enigma::tensor_map enigma_tensor_map{m}")));
        let _ = write!(out, "    {}\n) {{\n", params.join(",\n    "));

        let mut body = String::new();
        match &self.carved {
            None => {
                for (i, (arr, align)) in k.threadgroup_arrays.iter().zip(array_aligns(k)).enumerate() {
                    // A static array's element type aligns it; only a swizzled one needs more.
                    let align = if align > SHARED_ALIGN.max(arr.elem.size_bytes() as u64) { align } else { SHARED_ALIGN };
                    let _ = writeln!(body, "__shared__ __align__({align}) {} {}[{}];", self.type_name(arr.elem), cx.names.tg_array(TgArrayId(i as u32)), arr.len);
                }
            }
            Some(layout) => {
                let _ = writeln!(body, "extern __shared__ __align__({}) unsigned char {DYNAMIC_SHARED}[]; // {} bytes, passed at launch", layout.align, layout.bytes);
                for (i, (arr, offset)) in k.threadgroup_arrays.iter().zip(&layout.offsets).enumerate() {
                    let ty = self.type_name(arr.elem);
                    let name = cx.names.tg_array(TgArrayId(i as u32));
                    let _ = writeln!(body, "{ty}* const {name} = reinterpret_cast<{ty}*>({DYNAMIC_SHARED} + {offset}); // [{}]", arr.len);
                }
            }
        }
        for (i, arr) in k.thread_arrays.iter().enumerate() {
            let _ = writeln!(body, "{} {}[{}];", self.type_name(arr.elem), cx.names.thread_array(enigma_ir::ThreadArrayId(i as u32)), arr.len);
        }
        body.push_str(
            "enigma::grid_dependency_wait();\n\
             const enigma::Threadgroup enigma_tg(enigma_grid_x, enigma_grid_y, enigma_grid_z);\n\
             if (!enigma_tg.in_grid()) {\n    return; // outside the grid, in a partial threadgroup at its edge\n}\n",
        );
        if self.tile_copies && self.options.tensor_copies {
            let _ = write!(
                body,
                "__shared__ __align__(8) unsigned long long {TILE_BARRIERS}[{n}];\n\
                 unsigned {TILE_PHASES} = 0u;\n\
                 if (enigma_tg.index == 0u) {{\n    enigma::tile_barriers_init({TILE_BARRIERS}, {n}u);\n}}\n\
                 enigma::threadgroup_barrier(enigma_tg);\n",
                n = enigma_ir::limits::TILE_BARRIERS
            );
        }
        for (i, spec) in k.spec_constants.iter().enumerate() {
            let value = self.spec_values.get(i).copied().unwrap_or(spec.default);
            let _ = writeln!(body, "const {} {} = {};", self.scalar_name(spec.ty), cx.names.spec(SpecId(i as u32)), self.literal(&value).text);
        }
        for b in builtins {
            let (ty, value) = builtin_value(b);
            if b.is_vector() && !cx.whole_builtins.contains(&BuiltinOrd::of(b)) {
                let value = value.replacen("enigma::uint3(", "make_uint3(", 1);
                let _ = writeln!(body, "const uint3 {} = {value};", b.name());
            } else {
                let _ = writeln!(body, "const {ty} {} = {value};", b.name());
            }
        }
        push_indented(&mut out, &body, 1);
        Ok(out)
    }
}

/// `text` with each line indented one level.
fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

/// The type and the value of a builtin, from the block's geometry.
fn builtin_value(b: Builtin) -> (&'static str, &'static str) {
    match b {
        Builtin::ThreadPositionInGrid => (
            "enigma::uint3",
            "enigma::uint3(blockIdx.x * blockDim.x + enigma_tg.position_x(), blockIdx.y * blockDim.y + enigma_tg.position_y(), blockIdx.z * blockDim.z + enigma_tg.position_z())",
        ),
        Builtin::ThreadPositionInThreadgroup => {
            ("enigma::uint3", "enigma::uint3(enigma_tg.position_x(), enigma_tg.position_y(), enigma_tg.position_z())")
        }
        Builtin::ThreadgroupPositionInGrid => ("enigma::uint3", "enigma::uint3(blockIdx.x, blockIdx.y, blockIdx.z)"),
        Builtin::ThreadsPerThreadgroup => ("enigma::uint3", "enigma::uint3(enigma_tg.size_x, enigma_tg.size_y, enigma_tg.size_z)"),
        Builtin::ThreadsPerGrid => ("enigma::uint3", "enigma::uint3(enigma_grid_x, enigma_grid_y, enigma_grid_z)"),
        Builtin::ThreadgroupsPerGrid => ("enigma::uint3", "enigma::uint3(gridDim.x, gridDim.y, gridDim.z)"),
        Builtin::ThreadIndexInThreadgroup => ("uint", "enigma_tg.index"),
        Builtin::ThreadIndexInSimdgroup => ("uint", "enigma_tg.index % 32u"),
        Builtin::SimdgroupIndexInThreadgroup => ("uint", "enigma_tg.index / 32u"),
        Builtin::SimdgroupsPerThreadgroup => ("uint", "(enigma_tg.threads + 31u) / 32u"),
        Builtin::ThreadsPerSimdgroup => ("uint", "32u"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::builder::{thread_index_in_threadgroup, KernelBuilder};
    use enigma_ir::{validate, Access, ValidationOptions};

    /// A kernel with arrays of 3 `u8`, 5 `float3`, `n` `u64` and one `u16`,
    /// each written once, validated against the largest opt-in limit.
    fn mixed_arrays(n: u32) -> (Kernel, KernelInfo) {
        let mut k = KernelBuilder::new("mixed_arrays");
        let out = k.buffer("out", Type::U32, Access::ReadWrite);
        let bytes = k.threadgroup_array("bytes", Type::scalar(Scalar::U8), 3);
        let vecs = k.threadgroup_array("vecs", Type::vector(Scalar::F32, 3), 5);
        let wide = k.threadgroup_array("wide", Type::U64, n);
        let last = k.threadgroup_array("last", Type::scalar(Scalar::U16), 1);
        let lid = k.let_("lid", thread_index_in_threadgroup());
        k.store(bytes.at(0u32), lid.cast(Type::scalar(Scalar::U8)));
        k.store(vecs.at(0u32), lid.cast(Type::vector(Scalar::F32, 3)));
        k.store(wide.at(0u32), lid.cast(Type::U64));
        k.store(last.at(0u32), lid.cast(Type::scalar(Scalar::U16)));
        k.store(out.at(lid), lid);
        let kernel = k.finish().expect("a well-formed kernel");
        let options = ValidationOptions { max_threadgroup_memory_bytes: MAX_SHARED_LIMIT, ..ValidationOptions::default() };
        let info = validate(&kernel, &options).unwrap_or_else(|e| panic!("{e}"));
        (kernel, info)
    }

    #[test]
    fn the_layout_aligns_each_array_to_16_bytes_or_its_element() {
        let (kernel, _) = mixed_arrays(7000);
        // 3 bytes, then 5 float3 of 16 bytes at 16, 7000 u64 at 96, a u16 at 56096.
        assert_eq!(shared_layout(&kernel), SharedLayout { offsets: vec![0, 16, 96, 56096], align: 16, bytes: 56098 });
    }

    #[test]
    fn carved_arrays_lie_at_the_offsets_static_arrays_take() {
        // Static: the arrays fit in 48 KiB, and take the layout's bytes.
        let (small, info) = mixed_arrays(100);
        let cuda = write_string(&small, &info, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let layout = shared_layout(&small);
        assert_eq!((cuda.static_shared_bytes, cuda.dynamic_shared_bytes), (layout.bytes, 0));
        assert!(cuda.source.contains("__shared__ __align__(16) unsigned long long wide[100];"), "{}", cuda.source);
        assert!(!cuda.source.contains("extern __shared__"), "{}", cuda.source);
        // Dynamic: the same rule places every array, and the launch passes the total.
        let (large, info) = mixed_arrays(7000);
        let cuda = write_string(&large, &info, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let layout = shared_layout(&large);
        assert_eq!((cuda.static_shared_bytes, cuda.dynamic_shared_bytes), (0, layout.bytes));
        assert!(cuda.source.contains("extern __shared__ __align__(16) unsigned char enigma_shared[];"), "{}", cuda.source);
        for (name, offset) in ["bytes", "vecs", "wide", "last"].iter().zip(&layout.offsets) {
            let carved = format!("const {name} = reinterpret_cast<");
            let line = cuda.source.lines().find(|l| l.contains(&carved)).unwrap_or_else(|| panic!("no `{name}` in\n{}", cuda.source));
            assert!(line.contains(&format!("(enigma_shared + {offset});")), "{line}");
        }
    }

    #[test]
    fn more_than_any_gpu_allows_is_a_typed_error() {
        // 96 bytes before the u64s, then n of them and a u16 16-aligned:
        // 232434 bytes for n = 29042; one u64 more puts the u16 at 232448,
        // its end 2 bytes over 227 KiB.
        let (kernel, info) = mixed_arrays(29042);
        assert_eq!(write_string(&kernel, &info, &Options::default()).map(|c| c.dynamic_shared_bytes), Ok(232434));
        let (kernel, info) = mixed_arrays(29043);
        let e = write_string(&kernel, &info, &Options::default()).unwrap_err();
        assert_eq!(e.kind, CodegenErrorKind::SharedMemoryLimit { bytes: 232450, limit: MAX_SHARED_LIMIT });
    }
}
