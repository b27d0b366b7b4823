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
//!   spurious (the value seen still equals the expected one).
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
//!   conversions `float4(v)`; bitcasts `as_type<uint>(x)`; `fmod` for float
//!   `%`; shift amounts masked to the bit width (`x << (n & 31u)`), as the IR
//!   defines shifts; 8- and 16-bit arithmetic cut back to its type
//!   (`uchar(a + b)`), because C++ computes it in `int` and the IR wraps.
//! * **Functions** keep their MSL names (`fast::exp`, `simd_sum`, `select`);
//!   `simd_ballot` is converted to `ulong`. `fast::` variants of `half` and
//!   math on `bfloat` (which MSL lacks) are computed in `float`.
//! * **Barriers**: `threadgroup_barrier(mem_flags::mem_threadgroup)`,
//!   `simdgroup_barrier(...)`.
//!
//! # What has been checked
//! The generated sources are compared with golden files and compiled with
//! `g++ -fsyntax-only` against a shim header that declares the Metal types
//! and functions the generator uses (`tests/shim/`). That is **not Apple's
//! Metal compiler**: it checks syntax and C++ typing, not MSL's own rules,
//! and no generated MSL has yet been compiled by `xcrun metal` or run on
//! Apple hardware.

use crate::dialect::{DResult, Dialect, KernelCx, TypeOrd};
use crate::error::{CodegenError, CodegenErrorKind, Target};
use crate::names::Names;
use crate::writer::{push_indented, sorted_builtins, Code, Writer};
use enigma_ir::{
    Access, AtomicOp, BarrierScope, Builtin, Intrinsic, Kernel, KernelInfo, MemFlags, Memory, ParamKind, Scalar, SpecId,
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
/// `device_fence()` needs.
const DEVICE_FENCE_VERSION: (u8, u8) = (3, 2);

/// The optional features a Metal device runs with source generated under
/// `options`: every one, but device-scope fences only from MSL 3.2.
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
    let dialect = Msl { options: options.clone(), spec_values, cas_helpers: BTreeSet::new(), matrices: false };
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
}

/// The MSL tile helpers (`enigma_tile<T, R, C>` over `simdgroup_matrix`).
const TILES: &str = include_str!("tiles_msl.metal");

fn atomic_type(elem: Type) -> &'static str {
    match elem.elem() {
        Scalar::I32 => "atomic_int",
        Scalar::F32 => "atomic_float",
        _ => "atomic_uint",
    }
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

    fn spec(&self, id: SpecId, _name: &str) -> Code {
        Code::primary(self.spec_values.get(id.0 as usize).map_or("?", String::as_str))
    }

    fn call(&mut self, func: Intrinsic, types: &[Type], result: Type, args: Vec<Code>) -> DResult<Code> {
        use Intrinsic::*;
        let t0 = types.first().copied().unwrap_or(result);
        if matches!(func, Erf | Erfc | Log1p | Expm1) {
            // Not in MSL's standard library, and enigma has no MSL version yet.
            return Err(CodegenErrorKind::Unsupported { what: format!("`{}` (MSL's standard library has none; CUDA and the simulator have it)", func.name()), ty: t0 });
        }
        let args_text = |args: &[Code]| args.iter().map(|a| a.text.clone()).collect::<Vec<_>>().join(", ");
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
            let inner = Code::postfix(format!("{}({})", precise_name(func), args_text(&converted)));
            return Ok(self.cast(result, float_ty, inner));
        }
        let name = if t0.elem() == Scalar::F32 { func.name() } else { precise_name(func) };
        Ok(match func {
            SimdBallot => Code::postfix(format!("ulong(simd_ballot({}))", args_text(&args))),
            _ => Code::postfix(format!("{name}({})", args_text(&args))),
        })
    }

    fn load(&mut self, _mem: Memory, _elem: Type, atomic: bool, place: Code) -> Code {
        if atomic {
            Code::postfix(format!("atomic_load_explicit(&{}, memory_order_relaxed)", place.text))
        } else {
            place
        }
    }

    fn store(&mut self, _mem: Memory, _elem: Type, atomic: bool, place: Code, value: Code) -> String {
        if atomic {
            format!("atomic_store_explicit(&{}, {}, memory_order_relaxed)", place.text, value.text)
        } else {
            format!("{} = {}", place.text, value.text)
        }
    }

    fn atomic(&mut self, op: AtomicOp, _mem: Memory, _elem: Type, place: Code, value: Code) -> DResult<Code> {
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

    fn barrier(&mut self, scope: BarrierScope, flags: MemFlags) -> String {
        let func = match scope {
            BarrierScope::Threadgroup => "threadgroup_barrier",
            BarrierScope::Simdgroup => "simdgroup_barrier",
        };
        format!("{func}({})", flags.msl())
    }

    fn head(&mut self, cx: &KernelCx<'_>) -> DResult<String> {
        let k = cx.kernel;
        if cx.types.iter().any(|t| t.get().elem() == Scalar::BF16) {
            self.check_version("bfloat", (3, 1))?;
        }
        if cx.info.atomic_memories.iter().any(|m| memory_elem(k, *m).is_some_and(|t| t.elem() == Scalar::F32)) {
            self.check_version("atomic_float", (3, 0))?;
        }
        let mut out = String::from("#include <metal_stdlib>\n");
        if self.matrices {
            out.push_str("#include <metal_simdgroup_matrix>\n");
        }
        out.push_str("using namespace metal;\n\n");
        if self.matrices {
            out.push_str(TILES);
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
                atomic = atomic_type(ty),
            );
        }
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
        let mut params = vec![];
        for (i, p) in k.params.iter().enumerate() {
            let id = enigma_ir::ParamId(i as u32);
            let name = cx.names.param(id);
            let i = k.binding(id);
            params.push(match p.kind {
                ParamKind::Buffer { elem, access } => {
                    let atomic = cx.info.atomic_memories.contains(&Memory::Buffer(id));
                    if atomic {
                        format!("device {}* {name} [[buffer({i})]]", atomic_type(elem))
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
                atomic_type(arr.elem).to_string()
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

fn builtin_type(b: Builtin) -> &'static str {
    if b.is_vector() {
        "uint3"
    } else {
        "uint"
    }
}

/// The element type of a memory.
pub(crate) fn memory_elem(kernel: &Kernel, mem: Memory) -> Option<Type> {
    match mem {
        Memory::Buffer(p) => match kernel.params.get(p.0 as usize)?.kind {
            ParamKind::Buffer { elem, .. } => Some(elem),
            ParamKind::Value { .. } | ParamKind::Texture { .. } => None,
        },
        Memory::Threadgroup(t) => Some(kernel.threadgroup_arrays.get(t.0 as usize)?.elem),
        Memory::Thread(t) => Some(kernel.thread_arrays.get(t.0 as usize)?.elem),
    }
}

/// The name of a math function without the `fast::` namespace.
fn precise_name(func: Intrinsic) -> &'static str {
    let name = func.name();
    name.strip_prefix("fast::").unwrap_or(name)
}
