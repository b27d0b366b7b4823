//! Metal Shading Language from the IR.
//!
//! # How the IR maps to MSL
//! The IR's vocabulary *is* MSL's, so most of the mapping is spelling:
//!
//! * **Kernel**: `kernel void name(...)` after `#include <metal_stdlib>` and
//!   `using namespace metal;`. Parameters are bound in declaration order:
//!   a buffer is `device const T* name [[buffer(n)]]` (read-only) or
//!   `device T* name [[buffer(n)]]`; a by-value constant is
//!   `constant T& name [[buffer(n)]]`. Then come the builtins the body reads,
//!   under their attribute names (`uint3 thread_position_in_grid
//!   [[thread_position_in_grid]]`): `uint3` for the positions and sizes,
//!   `uint` for the indices and counts.
//! * **Atomics**: a memory that any atomic operation touches is declared
//!   atomic (`device atomic_uint*`, `atomic_int`, `atomic_float`;
//!   `threadgroup atomic_uint name[n];`) and *every* access to it goes through
//!   `atomic_load_explicit` / `atomic_store_explicit` /
//!   `atomic_fetch_<op>_explicit` / `atomic_exchange_explicit` with
//!   `memory_order_relaxed`. MSL has only a weak compare-and-exchange; the
//!   IR's strong one is a small helper that retries while the failure was
//!   spurious (the value seen still equals the expected one). MSL has
//!   `atomic_float` in device memory only, so f32 threadgroup atomics hold
//!   their bits in an `atomic_uint`: add and sub are a compare-and-swap loop.
//! * **Device fences**: MSL 3.2's `atomic_thread_fence(mem_flags::mem_device,
//!   memory_order_seq_cst, thread_scope_device)`, and every buffer such a
//!   kernel writes plainly is `coherent(device)`, without which device memory
//!   is coherent only within a threadgroup.
//! * **Threadgroup arrays**: `threadgroup T name[len];` at the top of the body.
//! * **Specialisation constants** are function constants with a default:
//!   `constant uint TILE [[function_constant(0)]];` and
//!   `constant uint TILE_v = is_function_constant_defined(TILE) ? TILE : 32u;`;
//!   the body reads `TILE_v`. The runtime sets `TILE` by index or name.
//! * **Locals** are declared where a person would declare them (see
//!   `plan`): at their first assignment when that reaches every use,
//!   otherwise just before the first statement that needs them.
//! * **Loops**: `for (uint i = start; i < end; i += step)`; the IR evaluates
//!   `end` and `step` once, so a bound that could change inside the loop (it
//!   reads memory, a SIMD-group function, or a local the loop assigns) is
//!   hoisted into a `const` local first.
//! * **Expressions**: C++ precedence with minimal parentheses; typed
//!   literals (`1u`, `0.5f`, `0.5h`, `2l`, `bfloat(0.5f)`, `uchar(3)`);
//!   conversions `float4(v)`, and from float to integer
//!   `enigma_convert_<T>(x)` (NaN gives 0, out of range saturates, as in the
//!   simulator; MSL leaves it undefined); bitcasts `as_type<uint>(x)`; `fmod`
//!   for float `%`; shift amounts masked to the bit width (`x << (n & 31u)`),
//!   as the IR defines shifts; 8- and 16-bit arithmetic cut back to its type
//!   (`uchar(a + b)`), because C++ computes it in `int` and the IR wraps,
//!   with products and left shifts computed in `uint` (where `int` could
//!   overflow); 32- and 64-bit signed `+ - * <<` and negation through the
//!   unsigned type.
//! * **Functions** keep their MSL names (`exp`, `fast::exp`, `precise::sin`,
//!   `simd_sum`, `select`); `simd_ballot` is converted to `ulong` with its
//!   undefined top 32 bits cleared. `fast::` and `precise::` variants of
//!   `half` are the one `half` function MSL has; math on `bfloat` (which MSL
//!   lacks) is computed in `float`.
//! * **Barriers**: `threadgroup_barrier(mem_flags::mem_threadgroup)`,
//!   `simdgroup_barrier(...)`.
//! * **Cooperative tensors**: from MSL 4.0, MetalPerformancePrimitives'
//!   `mpp::tensor_ops::matmul2d` (`writer/cooperative.rs`); below it, on
//!   `simdgroup_matrix<T, 8, 8>` fragments, each SIMD group of the scope
//!   holding its own row bands, through the helpers of
//!   `cooperative_msl.metal` (`writer/cooperative_fragments.rs`), so the
//!   same kernel compiles for every Apple GPU with SIMD-group matrices.
//!
//! # Versions
//! `Options::language_version` is the MSL version the source is written for;
//! [`needed_version`] is the one a kernel needs (3.2 with device fences,
//! else 3.1) and [`Options::for_kernel`] picks it unless one is asked for.
//! Asking for 4.0 writes cooperative tensors with MetalPerformancePrimitives.
//!
//! # What has been checked
//! The generated sources are compared with golden files, compiled with
//! `g++ -fsyntax-only` against a shim header that declares the Metal types
//! and functions the generator uses (`tests/msl_shim/`), and compiled by clang
//! in C++ for OpenCL mode against a stricter shim (`tests/msl_strict/`:
//! distinct address spaces, `atomic_float` in device memory only, the SIMD
//! functions' types, version-gated features), with the MSL of every library
//! kernel and conformance case. That is **not Apple's Metal compiler**, and
//! no generated MSL has yet been compiled by `xcrun metal` or run on Apple
//! hardware; `docs/metal.md` lists what only those can check.

use crate::dialect::{DResult, Dialect, KernelCx, TypeOrd};
use crate::error::{CodegenError, CodegenErrorKind, Target};
use crate::names::Names;
use crate::code::{Code, Prec};
use crate::plan::memory_elem;
use crate::writer::{push_indented, sorted_builtins, Writer};
use enigma_ir::{
    Access, AtomicOp, BarrierScope, Builtin, Intrinsic, Kernel, KernelInfo, MemFlags, Memory, ParamKind, Precision, Scalar, SpecId,
    Type,
};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Options of the MSL generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The MSL version the source must compile under (`(3, 1)` by default:
    /// macOS 14 / iOS 17). `bfloat` needs 3.1, `atomic_float` 3.0.
    pub language_version: (u8, u8),
    /// Writes `[[max_total_threads_per_threadgroup(n)]]` on the kernel.
    pub max_total_threads_per_threadgroup: Option<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options { language_version: (3, 1), max_total_threads_per_threadgroup: None }
    }
}

/// The MSL version whose `atomic_thread_fence` takes a thread scope, which
/// `device_fence()` needs (and whose `coherent(device)` qualifier its
/// buffers take).
const DEVICE_FENCE_VERSION: (u8, u8) = (3, 2);

/// The MSL version of shader logging (`os_log_default.log`, macOS 15 and
/// iOS 18), which `print` is written with.
const LOGGING_VERSION: (u8, u8) = (3, 2);

/// The MSL version of MetalPerformancePrimitives (`mpp::tensor_ops`),
/// which cooperative tensor operations are written with from this version
/// on (below it, on SIMD-group matrices).
pub const MPP_VERSION: (u8, u8) = (4, 0);

/// The MSL versions the generator writes: 3.0 (`atomic_float`), 3.1
/// (`bfloat`, the default), 3.2 (device-scope fences, `coherent(device)`)
/// and 4.0 (MetalPerformancePrimitives' cooperative tensor operations).
pub const VERSIONS: [(u8, u8); 4] = [(3, 0), (3, 1), (3, 2), MPP_VERSION];

/// An MSL version asked for by name that the generator does not write.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown MSL version `{text}`: the generator writes MSL 3.0, 3.1, 3.2 and 4.0")]
pub struct UnknownVersion {
    pub text: String,
}

/// The version named `"3.2"` (one of [`VERSIONS`]).
pub fn parse_version(text: &str) -> Result<(u8, u8), UnknownVersion> {
    let unknown = || UnknownVersion { text: text.to_string() };
    let (major, minor) = text.trim().split_once('.').ok_or_else(unknown)?;
    let version = (major.parse().map_err(|_| unknown())?, minor.parse().map_err(|_| unknown())?);
    VERSIONS.contains(&version).then_some(version).ok_or_else(unknown)
}

/// The MSL version a kernel needs: 3.2 where it uses device fences or
/// prints, else
/// the default, 3.1 (which every other construct compiles under).
/// Cooperative tensor operations compile under any version: from
/// [`MPP_VERSION`] they are written with MetalPerformancePrimitives, below
/// it on SIMD-group matrices, so the version asked for chooses the lowering.
pub fn needed_version(info: &KernelInfo) -> (u8, u8) {
    if info.features.contains(&enigma_ir::Feature::DeviceFence) {
        DEVICE_FENCE_VERSION
    } else if info.prints {
        LOGGING_VERSION
    } else {
        Options::default().language_version
    }
}

impl Options {
    /// The options for `info`'s kernel: the version asked for, or else the
    /// one the kernel needs ([`needed_version`]). A version asked for that
    /// lacks a feature the kernel uses makes [`write_string`] fail, naming
    /// both versions.
    pub fn for_kernel(info: &KernelInfo, asked: Option<(u8, u8)>) -> Options {
        Options { language_version: asked.unwrap_or_else(|| needed_version(info)), ..Options::default() }
    }
}

/// The optional features a Metal device runs with source generated under
/// `options`: every one, but device-scope fences only from MSL 3.2
/// (cooperative tensor operations at every version: MetalPerformancePrimitives
/// from 4.0, SIMD-group matrices below).
pub fn supported_features(options: &Options) -> std::collections::BTreeSet<enigma_ir::Feature> {
    let mut features = enigma_ir::capabilities::all_features();
    if options.language_version < DEVICE_FENCE_VERSION {
        features.remove(&enigma_ir::Feature::DeviceFence);
    }
    features
}

/// Words MSL reserves beyond the common list.
const MSL_RESERVED: &[&str] = &[
    "kernel", "device", "constant", "threadgroup", "threadgroup_imageblock", "thread", "vertex", "fragment",
    "visible", "object", "mesh", "metal", "as_type", "atomic", "atomic_int", "atomic_uint", "atomic_float",
    "atomic_bool", "memory_order", "memory_order_relaxed", "is_function_constant_defined", "simd_vote",
    "atomic_load_explicit", "atomic_store_explicit", "atomic_exchange_explicit",
    "atomic_compare_exchange_weak_explicit", "atomic_fetch_add_explicit", "atomic_fetch_sub_explicit",
    "atomic_fetch_min_explicit", "atomic_fetch_max_explicit", "atomic_fetch_and_explicit",
    "atomic_fetch_or_explicit", "atomic_fetch_xor_explicit", "texture2d", "sampler", "access",
];

/// The entry point's name in the generated source: the kernel's name,
/// unless that is an MSL keyword or library name (then with a `_` suffix).
pub fn entry_point(kernel: &Kernel) -> String {
    Names::new(kernel, MSL_RESERVED).kernel
}

/// Writes `kernel` (validated, with the `info` validation returned) as MSL.
pub fn write_string(kernel: &Kernel, info: &KernelInfo, options: &Options) -> Result<String, CodegenError> {
    let mut names = Names::new(kernel, MSL_RESERVED);
    let spec_values = kernel.spec_constants.iter().map(|s| names.fresh(&format!("{}_v", s.name))).collect();
    let dialect = Msl {
        options: options.clone(),
        spec_values,
        cas_helpers: BTreeSet::new(),
        matrices: false,
        float_atomic_helpers: BTreeSet::new(),
        conversions: BTreeSet::new(),
        math_helpers: BTreeSet::new(),
        logging: false,
    };
    let writer = Writer::new(kernel, info, names, dialect);
    Ok(writer.finish()?.0)
}

struct Msl {
    options: Options,
    /// The defaulted value of each specialisation constant, read by the body.
    spec_values: Vec<String>,
    /// Strong compare-and-exchange helpers needed: (threadgroup memory?, element type).
    cas_helpers: BTreeSet<(bool, TypeOrd)>,
    /// Whether the body uses SIMD-group matrices (the tile helpers).
    matrices: bool,
    /// Compare-and-swap helpers for threadgroup f32 atomics: `add` or `sub`.
    float_atomic_helpers: BTreeSet<&'static str>,
    /// Saturating float-to-integer conversions needed: (integer scalar, width).
    conversions: BTreeSet<TypeOrd>,
    /// The functions MSL lacks that the body calls (`erf`, …: the helpers of `msl_math`).
    math_helpers: BTreeSet<&'static str>,
    /// Whether the body prints (`os_log_default`, `<metal_logging>`).
    logging: bool,
}

/// The MSL tile helpers (`enigma_tile<T, R, C>` over `simdgroup_matrix`).
const TILES: &str = include_str!("tiles_msl.metal");

/// The cooperative tensors below MSL 4.0 (`enigma_coop_*` over
/// `simdgroup_matrix`; they use the tile helpers' lane map).
const COOPERATIVE_FRAGMENTS: &str = include_str!("cooperative_msl.metal");

/// The atomic type a memory of `elem` is declared with. MSL has
/// `atomic_float` in device memory only (spec §6.15.4: "Metal 3 supports the
/// `atomic_float` for device memory only"), so threadgroup f32 atomics hold
/// their bits in an `atomic_uint` ([`float_bits_atomic`]).
fn atomic_type(threadgroup: bool, elem: Type) -> &'static str {
    match elem.elem() {
        Scalar::I32 => "atomic_int",
        Scalar::F32 if !threadgroup => "atomic_float",
        _ => "atomic_uint",
    }
}

/// Whether an atomic memory of `elem` holds f32 values as their bits in an
/// `atomic_uint`: f32 in threadgroup memory. Loads and stores convert with
/// `as_type`, exchange swaps the bits, and add/sub are a compare-and-swap
/// loop on the bits (`enigma_atomic_fetch_add_float`).
fn float_bits_atomic(mem: Memory, elem: Type) -> bool {
    elem.elem() == Scalar::F32 && matches!(mem, Memory::Threadgroup(_))
}

impl Msl {
    fn check_version(&self, feature: &str, needed: (u8, u8)) -> DResult<()> {
        if self.options.language_version < needed {
            return Err(CodegenErrorKind::LanguageVersion {
                feature: feature.into(),
                needed,
                requested: self.options.language_version,
            });
        }
        Ok(())
    }
}

impl Dialect for Msl {
    const TARGET: Target = Target::Msl;

    fn print(&mut self, format: &str, args: &[String]) -> DResult<String> {
        self.check_version("print (shader logging: os_log_default.log, macOS 15 and iOS 18)", LOGGING_VERSION)?;
        self.logging = true;
        // Each call is one log message: no newline.
        let args: String = args.iter().map(|a| format!(", {a}")).collect();
        Ok(format!("os_log_default.log(\"{format}\"{args})"))
    }

    /// MSL has no double; its logging takes a float for `%g`.
    fn print_float(&self, value: &str) -> String {
        value.to_string()
    }

    fn device_fence(&mut self) -> DResult<String> {
        self.check_version("device-scope fences (atomic_thread_fence with thread_scope_device)", DEVICE_FENCE_VERSION)?;
        Ok("atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device)".into())
    }

    fn scalar_view(&self, mem: Memory, s: Scalar, name: &str) -> String {
        let space = match mem {
            Memory::Buffer(_) => "device",
            Memory::Threadgroup(_) => "threadgroup",
            Memory::Thread(_) => "thread",
        };
        format!("(({space} const {}*){name})", self.scalar_name(s))
    }

    fn use_matrices(&mut self) {
        self.matrices = true;
    }

    /// `T(x)`, except float to integer, which MSL leaves undefined out of
    /// range: `enigma_convert_<T>(x)` does what the simulator does.
    fn cast(&mut self, to: Type, from: Type, arg: Code) -> Code {
        if to.width() > 1 && from.width() == 1 && from.elem() != to.elem() {
            let scalar = self.cast(Type::scalar(to.elem()), from, arg);
            return Code::postfix(format!("{}({})", to.msl_name(), scalar.text));
        }
        if from.elem().is_float() && to.elem().is_int() {
            self.conversions.insert(TypeOrd::of(Type::scalar(to.elem())));
            self.conversions.insert(TypeOrd::of(to));
            let arg = if from.elem() == Scalar::F32 {
                arg
            } else {
                Code::postfix(format!("{}({})", from.with_elem(Scalar::F32).msl_name(), arg.text))
            };
            return Code::postfix(format!("enigma_convert_{}({})", to.msl_name(), arg.text));
        }
        Code::postfix(format!("{}({})", to.msl_name(), arg.text))
    }

    fn cooperative_tensors(&self) -> DResult<()> {
        Ok(())
    }

    fn cooperative_fragments(&self) -> bool {
        self.options.language_version < MPP_VERSION
    }

    fn spec(&self, id: SpecId, _name: &str) -> Code {
        Code::primary(self.spec_values.get(id.0 as usize).map_or("?", String::as_str))
    }

    fn call(&mut self, func: Intrinsic, precision: Precision, types: &[Type], result: Type, args: Vec<Code>) -> DResult<Code> {
        use Intrinsic::*;
        let t0 = types.first().copied().unwrap_or(result);
        if matches!(func, Erf | Erfc | Log1p | Expm1) {
            // Not in MSL's standard library: enigma's helpers (msl_math), on
            // float scalars and vectors (half and bfloat through float).
            self.math_helpers.insert(func.name());
            let arg = args.into_iter().next().unwrap_or_else(|| Code::primary("?"));
            let float_ty = t0.with_elem(Scalar::F32);
            let arg = if t0 == float_ty { arg } else { self.cast(float_ty, t0, arg) };
            let inner = Code::postfix(format!("enigma_{}({})", func.name(), arg.text));
            return Ok(if t0 == float_ty { inner } else { self.cast(t0, float_ty, inner) });
        }
        let args_text = |args: &[Code]| args.iter().map(|a| a.text.clone()).collect::<Vec<_>>().join(", ");
        if func.is_classification() {
            // MSL classifies half and float (scalars and vectors); bfloat goes through float, which keeps its class.
            let arg = args.into_iter().next().unwrap_or_else(|| Code::primary("?"));
            let arg = if t0.elem() == Scalar::BF16 { self.cast(t0.with_elem(Scalar::F32), t0, arg) } else { arg };
            return Ok(Code::postfix(format!("{}({})", func.name(), arg.text)));
        }
        // MSL has no bfloat math: compute in float and round back.
        let via_float = t0.elem() == Scalar::BF16
            && (func.is_float_math() || matches!(func, Abs | Min | Max | Clamp | SimdSum | SimdProduct | SimdMax | SimdMin | SimdPrefixInclusiveSum | SimdPrefixExclusiveSum));
        if via_float {
            let float_ty = t0.with_elem(Scalar::F32);
            let converted: Vec<Code> = args
                .into_iter()
                .zip(types)
                .map(|(a, ty)| if ty.elem() == Scalar::BF16 { self.cast(ty.with_elem(Scalar::F32), *ty, a) } else { a })
                .collect();
            let inner = Code::postfix(format!("{}({})", func.name(), args_text(&converted)));
            return Ok(self.cast(result, float_ty, inner));
        }
        // `metal::fast::f` and `metal::precise::f` exist for float alone
        // (half has one variant of each function).
        let name = if t0.elem() == Scalar::F32 { func.qualified_name(precision) } else { func.name().to_string() };
        Ok(match func {
            // The top 32 bits of the vote are undefined on 32-wide SIMD
            // groups (spec §6.9.2: "do not assume that the top bits are set
            // to 0"); the IR's ballot has them zero.
            SimdBallot => Code::binary(
                format!("ulong(simd_ballot({})) & 0xfffffffful", args_text(&args)),
                Prec::BitAnd,
                enigma_ir::BinaryOp::BitAnd,
            ),
            _ => Code::postfix(format!("{name}({})", args_text(&args))),
        })
    }

    fn load(&mut self, mem: Memory, elem: Type, atomic: bool, place: Code) -> Code {
        if !atomic {
            return place;
        }
        let load = format!("atomic_load_explicit(&{}, memory_order_relaxed)", place.text);
        if float_bits_atomic(mem, elem) {
            Code::postfix(format!("as_type<float>({load})"))
        } else {
            Code::postfix(load)
        }
    }

    fn store(&mut self, mem: Memory, elem: Type, atomic: bool, place: Code, value: Code) -> String {
        if !atomic {
            return format!("{} = {}", place.text, value.text);
        }
        let value = if float_bits_atomic(mem, elem) { format!("as_type<uint>({})", value.text) } else { value.text };
        format!("atomic_store_explicit(&{}, {value}, memory_order_relaxed)", place.text)
    }

    fn atomic(&mut self, op: AtomicOp, mem: Memory, elem: Type, place: Code, value: Code) -> DResult<Code> {
        if float_bits_atomic(mem, elem) {
            return Ok(match op {
                AtomicOp::Add | AtomicOp::Sub => {
                    let name = if op == AtomicOp::Add { "add" } else { "sub" };
                    self.float_atomic_helpers.insert(name);
                    Code::postfix(format!("enigma_atomic_fetch_{name}_float(&{}, {})", place.text, value.text))
                }
                AtomicOp::Exchange => Code::postfix(format!(
                    "as_type<float>(atomic_exchange_explicit(&{}, as_type<uint>({}), memory_order_relaxed))",
                    place.text, value.text
                )),
                // Validation allows only add, sub and exchange on f32.
                op => {
                    return Err(CodegenErrorKind::Malformed { detail: format!("atomic {} on f32 threadgroup memory", op.name()) })
                }
            });
        }
        let func = match op {
            AtomicOp::Exchange => "atomic_exchange_explicit".to_string(),
            op => format!("atomic_fetch_{}_explicit", op.name()),
        };
        Ok(Code::postfix(format!("{func}(&{}, {}, memory_order_relaxed)", place.text, value.text)))
    }

    fn compare_exchange(&mut self, mem: Memory, elem: Type, place: Code, expected: Code, desired: Code) -> DResult<Code> {
        self.cas_helpers.insert((matches!(mem, Memory::Threadgroup(_)), TypeOrd::of(elem)));
        Ok(Code::postfix(format!("enigma_compare_exchange(&{}, {}, {})", place.text, expected.text, desired.text)))
    }

    /// The threads copied the box when it was issued: a barrier makes it
    /// visible to all.
    fn tile_wait(&mut self, _barrier: Code) -> String {
        "threadgroup_barrier(mem_flags::mem_threadgroup)".into()
    }

    fn barrier(&mut self, scope: BarrierScope, flags: MemFlags, _at: &enigma_ir::StmtPath) -> String {
        let func = match scope {
            BarrierScope::Threadgroup => "threadgroup_barrier",
            BarrierScope::Simdgroup => "simdgroup_barrier",
        };
        format!("{func}({})", flags.msl())
    }

    fn head(&mut self, cx: &KernelCx<'_>) -> DResult<String> {
        let k = cx.kernel;
        if cx.types.iter().any(|t| t.get().elem() == Scalar::BF16) || k.cooperative_tensors.iter().any(|t| t.elem == Scalar::BF16) {
            self.check_version("bfloat", (3, 1))?;
        }
        if cx.info.atomic_memories.iter().any(|m| memory_elem(k, *m).is_some_and(|t| t.elem() == Scalar::F32 && !float_bits_atomic(*m, t))) {
            self.check_version("atomic_float", (3, 0))?;
        }
        let mut out = String::from("#include <metal_stdlib>\n");
        if self.matrices {
            out.push_str("#include <metal_simdgroup_matrix>\n");
        }
        let cooperative = !k.cooperative_tensors.is_empty();
        let mpp = cooperative && !self.cooperative_fragments();
        if mpp {
            out.push_str("#include <metal_tensor>\n#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>\n");
        }
        if self.logging {
            out.push_str("#include <metal_logging>\n");
        }
        out.push_str("using namespace metal;\n\n");
        if mpp {
            out.push_str(cx.prologue);
            out.push('\n');
        }
        if self.matrices {
            out.push_str(TILES);
        }
        if cooperative && !mpp {
            out.push('\n');
            out.push_str(COOPERATIVE_FRAGMENTS);
        }
        for (threadgroup, ty) in &self.cas_helpers {
            let ty = ty.get();
            let space = if *threadgroup { "threadgroup" } else { "device" };
            let t = ty.msl_name();
            let _ = write!(
                out,
                "// A strong compare-and-exchange from MSL's weak one: retry while the\n\
                 // failure was spurious (the value seen still equals the expected one).\n\
                 static inline {t} enigma_compare_exchange({space} {atomic}* object, {t} expected, {t} desired)\n\
                 {{\n    {t} seen = expected;\n    \
                 while (!atomic_compare_exchange_weak_explicit(object, &seen, desired, memory_order_relaxed, memory_order_relaxed) && seen == expected) {{\n    }}\n    \
                 return seen;\n}}\n\n",
                atomic = atomic_type(*threadgroup, ty),
            );
        }
        for name in &self.float_atomic_helpers {
            let op = if *name == "add" { '+' } else { '-' };
            let _ = write!(
                out,
                "// f32 {name} on threadgroup memory, which has no atomic_float: a\n\
                 // compare-and-swap loop on the value's bits.\n\
                 static inline float enigma_atomic_fetch_{name}_float(threadgroup atomic_uint* object, float operand)\n\
                 {{\n    uint seen = atomic_load_explicit(object, memory_order_relaxed);\n    \
                 while (!atomic_compare_exchange_weak_explicit(object, &seen, as_type<uint>(as_type<float>(seen) {op} operand), memory_order_relaxed, memory_order_relaxed)) {{\n    }}\n    \
                 return as_type<float>(seen);\n}}\n\n",
            );
        }
        for ty in &self.conversions {
            write_conversion(&mut out, ty.get());
        }
        out.push_str(&crate::msl_math::helpers(&self.math_helpers));
        for (i, spec) in k.spec_constants.iter().enumerate() {
            let ty = spec.ty.msl_name();
            let name = cx.names.spec(SpecId(i as u32));
            let default = self.literal(&spec.default).text;
            let _ = writeln!(out, "constant {ty} {name} [[function_constant({i})]];");
            let _ = writeln!(
                out,
                "constant {ty} {} = is_function_constant_defined({name}) ? {name} : {default};",
                self.spec_values.get(i).map_or("?", String::as_str)
            );
        }
        if !k.spec_constants.is_empty() {
            out.push('\n');
        }
        if let Some(n) = self.options.max_total_threads_per_threadgroup {
            let _ = writeln!(out, "[[max_total_threads_per_threadgroup({n})]]");
        }
        let _ = writeln!(out, "kernel void {}(", cx.names.kernel);
        // A kernel that hands device memory between threadgroups through
        // device fences declares the buffers it writes `coherent(device)`:
        // device memory is coherent only within a threadgroup otherwise
        // (spec §4.8; the qualifier is MSL 3.2's, as is the fence).
        let coherent = cx.info.features.contains(&enigma_ir::Feature::DeviceFence);
        let mut params = vec![];
        for (i, p) in k.params.iter().enumerate() {
            let id = enigma_ir::ParamId(i as u32);
            let name = cx.names.param(id);
            let i = k.binding(id);
            params.push(match p.kind {
                ParamKind::Buffer { elem, access } => {
                    let atomic = cx.info.atomic_memories.contains(&Memory::Buffer(id));
                    if atomic {
                        format!("device {}* {name} [[buffer({i})]]", atomic_type(false, elem))
                    } else if access != Access::Read && coherent {
                        format!("coherent(device) device {}* {name} [[buffer({i})]]", elem.msl_name())
                    } else if access == Access::Read {
                        format!("device const {}* {name} [[buffer({i})]]", elem.msl_name())
                    } else {
                        format!("device {}* {name} [[buffer({i})]]", elem.msl_name())
                    }
                }
                ParamKind::Value { ty } => format!("constant {}& {name} [[buffer({i})]]", ty.msl_name()),
                ParamKind::Texture { texel, access } => {
                    format!("texture2d<{}, access::{access}> {name} [[texture({i})]]", texel.msl_name())
                }
            });
        }
        for b in sorted_builtins(cx.builtins) {
            params.push(format!("{} {name} [[{name}]]", builtin_type(b), name = b.name()));
        }
        let _ = write!(out, "    {}\n) {{\n", params.join(",\n    "));
        let mut decls = String::new();
        for (i, arr) in k.threadgroup_arrays.iter().enumerate() {
            let id = enigma_ir::TgArrayId(i as u32);
            let elem = if cx.info.atomic_memories.contains(&Memory::Threadgroup(id)) {
                atomic_type(true, arr.elem).to_string()
            } else {
                arr.elem.msl_name()
            };
            let _ = writeln!(decls, "threadgroup {elem} {}[{}];", cx.names.tg_array(id), arr.len);
        }
        for (i, arr) in k.thread_arrays.iter().enumerate() {
            let _ = writeln!(decls, "thread {} {}[{}];", arr.elem.msl_name(), cx.names.thread_array(enigma_ir::ThreadArrayId(i as u32)), arr.len);
        }
        for (i, s) in crate::dialect::kernel_samplers(cx.info).iter().enumerate() {
            let (c, f, a) = (s.coord.name(), s.filter.name(), s.address.name());
            let _ = writeln!(decls, "constexpr sampler enigma_sampler{i}(coord::{c}, filter::{f}, address::{a});");
        }
        push_indented(&mut out, &decls, 1);
        Ok(out)
    }
}

/// The saturating conversion from f32 (or a vector of f32) to `to`, as the
/// simulator converts (`enigma_sim`'s `ops::convert`): NaN gives 0, values
/// beyond the type's range its minimum or maximum, others truncate toward
/// zero. MSL defines the plain conversion only in range.
fn write_conversion(out: &mut String, to: Type) {
    let s = to.elem();
    let t = to.msl_name();
    if to.width() > 1 {
        let scalar = s.msl_name();
        let parts: Vec<String> =
            ["x", "y", "z", "w"][..to.width() as usize].iter().map(|c| format!("enigma_convert_{scalar}(x.{c})")).collect();
        let _ = write!(
            out,
            "static inline {t} enigma_convert_{t}(float{w} x)\n{{\n    return {t}({});\n}}\n\n",
            parts.join(", "),
            w = to.width(),
        );
        return;
    }
    let bits = s.size_bytes() * 8;
    let suffix = match bits {
        64 => "l",
        _ => "",
    };
    let (lo, lo_f, hi, hi_f) = if s.is_signed_int() {
        let max = (1u128 << (bits - 1)) - 1;
        // The minimum as `-max - 1`: the literal of its magnitude is out of range.
        (format!("{t}(-{max}{suffix} - 1{suffix})"), format!("-{}.0f", max + 1), format!("{t}({max}{suffix})"), format!("{}.0f", max + 1))
    } else {
        let max = (1u128 << bits) - 1;
        let suffix = if bits >= 32 { format!("u{suffix}") } else { String::new() };
        (format!("{t}(0)"), "0.0f".to_string(), format!("{t}({max}{suffix})"), format!("{}.0f", max + 1))
    };
    let _ = write!(
        out,
        "// f32 to {t} as the simulator converts: NaN is 0, values beyond the\n\
         // range saturate, others truncate toward zero.\n\
         static inline {t} enigma_convert_{t}(float x)\n{{\n    \
         return isnan(x) ? {t}(0) : x >= {hi_f} ? {hi} : x <= {lo_f} ? {lo} : {t}(x);\n}}\n\n",
    );
}

fn builtin_type(b: Builtin) -> &'static str {
    if b.is_vector() {
        "uint3"
    } else {
        "uint"
    }
}
