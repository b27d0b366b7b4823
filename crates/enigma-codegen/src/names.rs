//! Names in the generated source: every kernel entity gets a unique
//! identifier that is no keyword, type, function or helper of the target.
//!
//! Names that validation accepts are kept as they are unless they collide
//! with a word of [`COMMON_RESERVED`] or the dialect's own list, or start with
//! `enigma` (the prefix of every name the generators invent) or `__`; those
//! get a `_` suffix (then `_2`, `_3`, … until unique), and the reserved
//! prefixes a `v_` in front. Kernel names rarely need
//! it; when they do, the entry point differs from the IR name, which is why
//! both modules say what the entry point is.

use enigma_ir::{Builtin, Kernel, ParamId, SpecId, TgArrayId, ThreadArrayId, VarId};
use std::collections::BTreeSet;

/// Words of C++ and of the Metal/CUDA libraries that both generators avoid.
pub(crate) const COMMON_RESERVED: &[&str] = &[
    // C++17 keywords and alternative tokens.
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case",
    "catch", "char", "char16_t", "char32_t", "class", "compl", "const", "constexpr", "const_cast",
    "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum",
    "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int",
    "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "return", "short",
    "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template",
    "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union",
    "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    "main", "NULL", "INFINITY", "NAN",
    // Scalar and vector type names of MSL (the CUDA prelude defines the same).
    "half", "bfloat", "uint", "uchar", "ushort", "ulong", "vec",
    "bool2", "bool3", "bool4", "char2", "char3", "char4", "uchar2", "uchar3", "uchar4",
    "short2", "short3", "short4", "ushort2", "ushort3", "ushort4", "int2", "int3", "int4",
    "uint2", "uint3", "uint4", "long2", "long3", "long4", "ulong2", "ulong3", "ulong4",
    "half2", "half3", "half4", "bfloat2", "bfloat3", "bfloat4", "float2", "float3", "float4",
    // Functions the generated code calls, by their MSL names.
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor", "ceil", "pow",
    "fma", "fmod", "abs", "min", "max", "clamp", "select", "popcount", "clz", "ctz", "fast",
    "precise", "simd_sum", "simd_product", "simd_max", "simd_min", "simd_and", "simd_or",
    "simd_xor", "simd_broadcast", "simd_broadcast_first", "simd_shuffle", "simd_shuffle_up",
    "simd_shuffle_down", "simd_shuffle_xor", "simd_prefix_inclusive_sum",
    "simd_prefix_exclusive_sum", "simd_all", "simd_any", "simd_ballot", "simd_is_first",
    "threadgroup_barrier", "simdgroup_barrier", "mem_flags",
];

/// Unique identifiers for one kernel in one dialect.
#[derive(Debug)]
pub(crate) struct Names {
    pub kernel: String,
    pub params: Vec<String>,
    pub specs: Vec<String>,
    pub tg_arrays: Vec<String>,
    pub thread_arrays: Vec<String>,
    pub locals: Vec<String>,
    used: BTreeSet<String>,
    reserved: &'static [&'static str],
}

impl Names {
    pub fn new(kernel: &Kernel, reserved: &'static [&'static str]) -> Names {
        let mut names = Names {
            kernel: String::new(),
            params: vec![],
            specs: vec![],
            tg_arrays: vec![],
            thread_arrays: vec![],
            locals: vec![],
            used: BTreeSet::new(),
            reserved,
        };
        // Builtins are declared under their MSL attribute names.
        for b in Builtin::ALL {
            names.used.insert(b.name().to_string());
        }
        names.kernel = names.fresh(&kernel.name);
        names.params = kernel.params.iter().map(|p| names.fresh(&p.name)).collect();
        names.specs = kernel.spec_constants.iter().map(|s| names.fresh(&s.name)).collect();
        names.tg_arrays = kernel.threadgroup_arrays.iter().map(|t| names.fresh(&t.name)).collect();
        names.thread_arrays = kernel.thread_arrays.iter().map(|t| names.fresh(&t.name)).collect();
        names.locals = kernel.locals.iter().map(|l| names.fresh(&l.name)).collect();
        names
    }

    fn is_free(&self, name: &str) -> bool {
        !self.used.contains(name)
            && !COMMON_RESERVED.contains(&name)
            && !self.reserved.contains(&name)
            && !name.starts_with("enigma")
            && !name.starts_with("__")
    }

    /// A new unique identifier based on `base`.
    pub fn fresh(&mut self, base: &str) -> String {
        // A prefix that is the generators' own (or the compiler's) cannot be
        // fixed by a suffix, so such names get a `v_` in front instead.
        let base = if base.is_empty() {
            "v".to_string()
        } else if base.starts_with("enigma") || base.starts_with("__") {
            format!("v_{base}")
        } else {
            base.to_string()
        };
        let base = base.as_str();
        let mut name = base.to_string();
        if !self.is_free(&name) {
            name = format!("{base}_");
            let mut n = 2;
            while !self.is_free(&name) {
                name = format!("{base}_{n}");
                n += 1;
            }
        }
        self.used.insert(name.clone());
        name
    }

    pub fn param(&self, id: ParamId) -> &str {
        self.params.get(id.0 as usize).map_or("?", String::as_str)
    }
    pub fn spec(&self, id: SpecId) -> &str {
        self.specs.get(id.0 as usize).map_or("?", String::as_str)
    }
    pub fn tg_array(&self, id: TgArrayId) -> &str {
        self.tg_arrays.get(id.0 as usize).map_or("?", String::as_str)
    }
    pub fn thread_array(&self, id: ThreadArrayId) -> &str {
        self.thread_arrays.get(id.0 as usize).map_or("?", String::as_str)
    }
    pub fn local(&self, id: VarId) -> &str {
        self.locals.get(id.0 as usize).map_or("?", String::as_str)
    }
}
