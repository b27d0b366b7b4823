//! The dialect trait: what differs between the C-family targets.
//!
//! Every method has a default that writes the common C++ (which is, where
//! they differ, the MSL spelling — MSL is the IR's native vocabulary); the
//! [`crate::msl`] and [`crate::cuda`] dialects override only what their
//! target spells differently. The shared [`crate::writer::Writer`] walks the
//! IR, decides declarations, precedence and parentheses, and asks the dialect
//! for the target's words.

use crate::error::{CodegenErrorKind, Target};
use crate::names::Names;
use crate::code::{Code, Prec, TgIndex};
use enigma_ir::MatrixType;
use enigma_ir::{
    AtomicOp, BarrierScope, Builtin, Intrinsic, Kernel, KernelInfo, Literal, LiteralValue, MemFlags, Memory, Precision, Scalar,
    SpecId, TextureDim, TgArrayId, Type,
};
use std::collections::BTreeSet;

/// What a dialect may consult while writing the parts around the body.
pub(crate) struct KernelCx<'a> {
    pub kernel: &'a Kernel,
    pub info: &'a KernelInfo,
    pub names: &'a Names,
    /// Builtins the body reads.
    pub builtins: &'a BTreeSet<BuiltinOrd>,
    /// Vector builtins the body reads whole, not only by component.
    pub whole_builtins: &'a BTreeSet<BuiltinOrd>,
    /// Every type that appears in the kernel (parameters, arrays, locals, expressions).
    pub types: &'a BTreeSet<TypeOrd>,
    /// Program-scope declarations the body needs before the kernel
    /// (cooperative operations' descriptors).
    pub prologue: &'a str,
}

/// Every sampler the kernel samples with, each once: by texture, then in
/// the order of first use.
pub(crate) fn kernel_samplers(info: &KernelInfo) -> Vec<enigma_ir::Sampler> {
    let mut all = vec![];
    for s in info.samplers.values().flatten() {
        if !all.contains(s) {
            all.push(*s);
        }
    }
    all
}

/// A [`Builtin`] ordered as in [`Builtin::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct BuiltinOrd(pub usize);

impl BuiltinOrd {
    pub fn of(b: Builtin) -> BuiltinOrd {
        BuiltinOrd(Builtin::ALL.iter().position(|x| *x == b).unwrap_or(0))
    }
    pub fn get(self) -> Builtin {
        Builtin::ALL[self.0]
    }
}

/// A [`Type`] with an order, for sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TypeOrd(pub usize, pub u8);

impl TypeOrd {
    pub fn of(ty: Type) -> TypeOrd {
        TypeOrd(Scalar::ALL.iter().position(|s| *s == ty.elem()).unwrap_or(0), ty.width())
    }
    pub fn get(self) -> Type {
        Type::vector(Scalar::ALL[self.0], self.1)
    }
}

pub(crate) type DResult<T> = Result<T, CodegenErrorKind>;

/// How a dialect holds a tile that only feeds the B side of products: its
/// spelling and the helpers that load it (`Expr::MatrixLoad`,
/// `Expr::MatrixLoadQuantized`).
pub(crate) struct TileCopyCode<'a> {
    pub kernel: &'a enigma_ir::Kernel,
    pub copy: &'a enigma_ir::TileCopy,
    pub barrier: String,
    /// The destination's name, and its index's code (the first element).
    pub dst: (String, String),
    pub elem: Type,
    /// Row and column of the box's first element (i32 code).
    pub origin: [String; 2],
    /// The copy by every thread of the threadgroup, element by element
    /// (zeros outside the matrix), complete when issued.
    pub threads_copy: String,
}

pub(crate) struct BOperandTile {
    pub spelling: String,
    pub load: &'static str,
    pub load_quantized: &'static str,
}

pub(crate) trait Dialect {
    const TARGET: Target;

    // ---- types -------------------------------------------------------------

    /// The spelling of a scalar type.
    fn scalar_name(&self, s: Scalar) -> &'static str {
        s.msl_name()
    }

    /// The spelling of a scalar or vector type.
    fn type_name(&self, ty: Type) -> String {
        ty.msl_name()
    }

    /// The spelling of a SIMD-group matrix tile: the prelude's
    /// `enigma_tile<T, R, C>` in both dialects (on Metal a grid of
    /// `simdgroup_matrix<T, 8, 8>` fragments; on CUDA the lane's share of
    /// elements in the reference lane map).
    fn tile_name(&self, m: MatrixType) -> String {
        format!("enigma_tile<{}, {}, {}>", self.scalar_name(m.elem()), m.rows(), m.cols())
    }

    /// For a tile in `DeclPlan::b_operands` (loaded, then only multiplied
    /// from the right): its spelling and the helpers that load it, where the
    /// dialect holds such tiles in the layout its products take B in; `None`
    /// holds them like every tile.
    fn b_operand_tile(&self, _m: MatrixType) -> Option<BOperandTile> {
        None
    }

    /// Marks the matrix helpers as used (the prelude then defines them).
    fn use_matrices(&mut self);

    /// Whether the dialect writes cooperative tensor operations
    /// (MetalPerformancePrimitives' spelling); the error that says why not.
    fn cooperative_tensors(&self) -> DResult<()> {
        Err(CodegenErrorKind::CooperativeNotGenerated { what: "matmul2d" })
    }

    /// Whether the dialect lowers cooperative tensors onto SIMD-group matrix
    /// fragments (the `enigma_coop_*` helpers its head defines) rather than
    /// spelling them as MetalPerformancePrimitives.
    fn cooperative_fragments(&self) -> bool {
        false
    }

    /// The layouts of cooperative tensors held in per-thread registers (the
    /// CUDA lowering, [`crate::cuda::cooperative`]); None for MSL's
    /// MetalPerformancePrimitives spelling.
    fn cooperative_registers(&self) -> Option<&crate::cuda::cooperative::Plan> {
        None
    }

    /// Marks the register lowering's helpers as used (`wgmma` also the
    /// warpgroup matrix multiply's).
    fn use_cooperative_registers(&mut self, _wgmma: bool) {}

    /// The element of threadgroup array `array` that holds its logical
    /// element `index`: `index` itself unless the dialect gave the array
    /// another physical layout.
    fn threadgroup_index(&self, _array: TgArrayId, index: TgIndex) -> String {
        index.code
    }

    /// The byte alignment every threadgroup array is declared with (the
    /// first element's address is a multiple of it); 1 where the dialect
    /// promises nothing beyond the element type's own.
    fn threadgroup_array_align(&self) -> u64 {
        1
    }

    /// `(a & b) | c` on `u32` scalars as one call, where the target has a
    /// better form than the two operators (CUDA: one `LOP3` with the masks
    /// in registers); `None` keeps the operators.
    fn and_or(&mut self, _a: Code, _b: Code, _c: Code) -> Option<Code> {
        None
    }

    /// A read-only pointer to the scalars of array `name` of vectors of `s`
    /// in `mem`'s address space (a matrix load from vector memory).
    fn scalar_view(&self, mem: Memory, s: Scalar, name: &str) -> String;

    // ---- literals ----------------------------------------------------------

    /// The suffix of an integer literal of a 32- or 64-bit type.
    fn int_suffix(&self, s: Scalar) -> &'static str {
        match s {
            Scalar::U32 => "u",
            Scalar::I64 => "l",
            Scalar::U64 => "ul",
            _ => "",
        }
    }

    /// A finite float literal of an f16 or bf16 value `text` (already rounded
    /// to the type and written as an f32 literal without suffix).
    fn half_literal(&self, s: Scalar, text: &str) -> String {
        match s {
            Scalar::F16 => format!("{text}h"),
            _ => format!("{}({text}f)", self.scalar_name(s)),
        }
    }

    /// A non-finite float: infinity or a NaN with its exact bits.
    fn special_float(&self, s: Scalar, value: f64) -> Code {
        let text = if value.is_nan() {
            format!("as_type<float>({:#010x}u)", (value as f32).to_bits())
        } else if value > 0.0 {
            "INFINITY".to_string()
        } else {
            "-INFINITY".to_string()
        };
        if s == Scalar::F32 {
            Code::new(text, if value < 0.0 { Prec::Unary } else { Prec::Postfix })
        } else {
            Code::postfix(format!("{}({text})", self.scalar_name(s)))
        }
    }

    /// A literal of a 8- or 16-bit integer type: a cast of the int literal.
    fn narrow_literal(&self, s: Scalar, value: &str) -> Code {
        Code::postfix(format!("{}({value})", self.scalar_name(s)))
    }

    fn literal(&self, lit: &Literal) -> Code {
        literal_default(self, lit)
    }

    // ---- expressions -------------------------------------------------------

    /// A value conversion `T(x)`; a scalar of another type is converted
    /// before it is splatted (`float4(float(i))`).
    fn cast(&mut self, to: Type, from: Type, arg: Code) -> Code {
        if to.width() > 1 && from.width() == 1 && from.elem() != to.elem() {
            let scalar = self.cast(Type::scalar(to.elem()), from, arg);
            return Code::postfix(format!("{}({})", self.type_name(to), scalar.text));
        }
        Code::postfix(format!("{}({})", self.type_name(to), arg.text))
    }

    /// A reinterpretation of the bits.
    fn bitcast(&mut self, to: Type, _from: Type, arg: Code) -> Code {
        Code::postfix(format!("as_type<{}>({})", self.type_name(to), arg.text))
    }

    /// `T(a, b, c, d)` or the splat `T(s)`.
    fn vector(&mut self, ty: Type, components: Vec<Code>) -> Code {
        let args: Vec<String> = components.into_iter().map(|c| c.text).collect();
        Code::postfix(format!("{}({})", self.type_name(ty), args.join(", ")))
    }

    /// `%` of floats: C++ has no such operator.
    fn float_rem(&mut self, _ty: Type, a: Code, b: Code) -> Code {
        Code::postfix(format!("fmod({}, {})", a.text, b.text))
    }

    /// A call of `precision`'s variant of an intrinsic; `types` are the
    /// argument types, `result` the result type.
    fn call(&mut self, func: Intrinsic, precision: Precision, types: &[Type], result: Type, args: Vec<Code>) -> DResult<Code>;

    /// A builtin read in the body.
    fn builtin(&self, b: Builtin) -> Code {
        Code::primary(b.name())
    }

    /// A specialisation constant read in the body.
    fn spec(&self, _id: SpecId, name: &str) -> Code {
        Code::primary(name)
    }

    // ---- memory ------------------------------------------------------------

    /// A load of `place` (`name[index]`); `atomic` when the memory is
    /// declared atomic.
    fn load(&mut self, _mem: Memory, _elem: Type, atomic: bool, place: Code) -> Code {
        let _ = atomic;
        place
    }

    /// The statement (without `;`) storing `value` to `place`.
    fn store(&mut self, _mem: Memory, _elem: Type, atomic: bool, place: Code, value: Code) -> String {
        let _ = atomic;
        format!("{} = {}", place.text, value.text)
    }

    /// The expression of an atomic read-modify-write returning the old value.
    fn atomic(&mut self, op: AtomicOp, mem: Memory, elem: Type, place: Code, value: Code) -> DResult<Code>;

    /// The expression of a strong compare-and-exchange returning the value seen.
    fn compare_exchange(&mut self, mem: Memory, elem: Type, place: Code, expected: Code, desired: Code)
        -> DResult<Code>;

    /// `tex.read(coord)`: four texels of type `texel` (MSL's method).
    fn texture_read(&mut self, tex: &str, _texel: Scalar, coord: Code) -> Code {
        Code::postfix(format!("{tex}.read({})", coord.text))
    }

    /// `tex.sample(sampler, uv)`: `sampler` the index of the sampler among
    /// the kernel's ([`kernel_samplers`], MSL's `enigma_sampler{n}`), `slot`
    /// its index among this texture's (CUDA's texture objects).
    fn texture_sample(&mut self, tex: &str, _texel: Scalar, sampler: usize, _slot: usize, uv: Code) -> Code {
        Code::postfix(format!("{tex}.sample(enigma_sampler{sampler}, {})", uv.text))
    }

    /// The statements of a `tile_copy` ([`TileCopyCode`]). The default is
    /// the threads' copy, complete at the threadgroup barrier of
    /// [`Dialect::tile_wait`].
    fn tile_copy(&mut self, copy: &TileCopyCode<'_>) -> DResult<String> {
        Ok(copy.threads_copy.clone())
    }

    /// The statement (without `;`) of `tile_wait(barrier)`.
    fn tile_wait(&mut self, barrier: Code) -> String;

    /// The statement (without `;`) of an `async_copy` of `count` elements
    /// of `elem` from `src` (a place in the buffer whose pointer is
    /// `src_base`) to `dst`, zeros where `valid` is false. The default
    /// copies at once, which every kernel that waits for its copies before
    /// touching them cannot tell from a background copy.
    fn async_copy(&mut self, dst: Code, src: Code, _src_base: &str, elem: Type, count: u32, valid: Code) -> String {
        // The source converted to a value of its type, so both arms of `?:`
        // are values of one type in one (the thread) address space.
        let ty = elem.msl_name();
        if count == 1 {
            return format!("{} = ({}) ? {ty}({}) : {ty}(0)", dst.text, valid.text, src.text);
        }
        format!(
            "for (uint enigma_e = 0; enigma_e < {count}; ++enigma_e) (&{})[enigma_e] = ({}) ? {ty}((&{})[enigma_e]) : {ty}(0)",
            dst.text, valid.text, src.text
        )
    }

    /// The statement (without `;`) of `async_commit()`, if it needs one
    /// (the default's copies are complete when issued).
    fn async_commit(&mut self) -> Option<String> {
        None
    }

    /// The statement (without `;`) of `async_wait(pending)`, if it needs one.
    fn async_wait(&mut self, _pending: u32) -> Option<String> {
        None
    }

    /// The statement (without `;`) of `device_fence()`, or why the target
    /// cannot say it.
    fn device_fence(&mut self) -> DResult<String>;

    /// The statement (without `;`) that prints one line: `format` is the
    /// body of a C string literal in `printf`'s language (escaped, without
    /// its quotes or a newline) and `args` its arguments (`long long` for
    /// `%lld`), or why the target cannot print.
    fn print(&mut self, format: &str, args: &[String]) -> DResult<String>;

    /// An f32 value as `print` passes it to `%g` (C's variadic calls take
    /// a double).
    fn print_float(&self, value: &str) -> String {
        format!("(double)({value})")
    }

    /// The statement (without `;`) of `tex.fence()`.
    fn texture_fence(&mut self, tex: &str) -> String {
        format!("{tex}.fence()")
    }

    /// The statement (without `;`) of `tex.write(value, coord)`.
    fn texture_write(&mut self, tex: &str, _texel: Scalar, value: Code, coord: Code) -> String {
        format!("{tex}.write({}, {})", value.text, coord.text)
    }

    /// `tex.get_width()` / `tex.get_height()`.
    fn texture_size(&mut self, tex: &str, dim: TextureDim) -> Code {
        Code::postfix(format!("{tex}.{}()", dim.method()))
    }

    /// The statement (without `;`) of a barrier; `at` is the path of the
    /// IR statement being written (the barrier's own, or the statement a
    /// writer lowers with barriers of its own).
    fn barrier(&mut self, scope: BarrierScope, flags: MemFlags, at: &enigma_ir::StmtPath) -> String;

    // ---- the parts around the body -----------------------------------------

    /// Everything before the body's statements: includes, helpers, the
    /// signature, `{`, and the body's opening declarations (threadgroup
    /// arrays, builtins). Called after the body was written, so the dialect
    /// knows which helpers the body used.
    fn head(&mut self, cx: &KernelCx<'_>) -> DResult<String>;
}

/// The common spelling of literals (MSL suffixes; CUDA overrides the hooks).
pub(crate) fn literal_default<D: Dialect + ?Sized>(d: &D, lit: &Literal) -> Code {
    let s = lit.ty;
    match (s, lit.value) {
        (Scalar::Bool, LiteralValue::Bool(b)) => Code::primary(if b { "true" } else { "false" }),
        (s, v) if s.is_float() => {
            let x = v.as_f64();
            if !x.is_finite() {
                return d.special_float(s, x);
            }
            let text = float_text(round_to(s, x));
            let code = match s {
                Scalar::F32 => format!("{text}f"),
                _ => d.half_literal(s, &text),
            };
            let prec = if code.starts_with('-') || code.starts_with('(') { Prec::Unary } else { Prec::Primary };
            Code::new(code, prec)
        }
        (s, v) => {
            let text = if s.is_signed_int() {
                let i = v.as_i64();
                let bits = s.size_bytes() * 8;
                if bits >= 32 && i == i64::MIN >> (64 - bits) {
                    // `-2147483648` would be the negation of a too-large literal.
                    let suffix = d.int_suffix(s);
                    return Code::binary(format!("-{}{suffix} - 1{suffix}", -(i + 1)), Prec::Additive, enigma_ir::BinaryOp::Sub);
                }
                i.to_string()
            } else {
                match v {
                    LiteralValue::UInt(u) => u.to_string(),
                    other => (other.as_i64() as u64).to_string(),
                }
            };
            if s.size_bytes() < 4 {
                return d.narrow_literal(s, &text);
            }
            let text = format!("{text}{}", d.int_suffix(s));
            let prec = if text.starts_with('-') { Prec::Unary } else { Prec::Primary };
            Code::new(text, prec)
        }
    }
}

/// Rounds an f64 to the float type `s` (through f32, as the simulator does).
pub(crate) fn round_to(s: Scalar, x: f64) -> f32 {
    let f = x as f32;
    match s {
        Scalar::F16 => round_f32_to_bits(f, 10, 15),
        Scalar::BF16 => round_f32_to_bits(f, 7, 127),
        _ => f,
    }
}

/// Rounds a finite f32 to a float format with `mantissa` bits and exponent
/// bias `bias` (round to nearest even, overflow to infinity, subnormals
/// kept), returning the rounded value as an f32.
fn round_f32_to_bits(f: f32, mantissa: u32, bias: i32) -> f32 {
    if f == 0.0 || !f.is_finite() {
        return f;
    }
    let max_exp = bias; // largest unbiased exponent of a normal number
    let min_exp = 1 - bias; // smallest unbiased exponent of a normal number
    let a = f.abs() as f64;
    let biased = ((f.to_bits() >> 23) & 0xff) as i32;
    let e = if biased == 0 { -127 } else { biased - 127 };
    // Spacing of representable numbers around `a`.
    let quantum_exp = e.max(min_exp) - mantissa as i32;
    let q = 2f64.powi(quantum_exp);
    let n = a / q; // exact: `a` is an f32 and `q` a power of two
    let r = if n.fract() == 0.5 {
        let down = n.floor();
        if down % 2.0 == 0.0 {
            down
        } else {
            down + 1.0
        }
    } else {
        n.round()
    };
    let rounded = r * q;
    let largest = (2.0 - 2f64.powi(-(mantissa as i32))) * 2f64.powi(max_exp);
    let out = if rounded > largest { f64::INFINITY } else { rounded };
    (out as f32).copysign(f)
}

/// The shortest decimal that reads back as `v`, always with a `.` or an
/// exponent so that a suffix makes it a float literal.
pub(crate) fn float_text(v: f32) -> String {
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_round_to_nearest_even() {
        assert_eq!(round_to(Scalar::F16, 0.1), 0.099975586);
        assert_eq!(round_to(Scalar::F16, 65504.0), 65504.0);
        assert_eq!(round_to(Scalar::F16, 65520.0), f32::INFINITY);
        assert_eq!(round_to(Scalar::F16, 1.0 + 1.0 / 2048.0), 1.0, "a tie rounds to even");
        assert_eq!(round_to(Scalar::F16, 1.0 + 3.0 / 2048.0), 1.0 + 2.0 / 1024.0, "a tie rounds to even");
        assert_eq!(round_to(Scalar::F16, 1e-7), 1.1920929e-7, "subnormal halves");
        assert_eq!(round_to(Scalar::BF16, 0.1), 0.100_097_656);
        assert_eq!(round_to(Scalar::BF16, -3.0), -3.0);
    }

    #[test]
    fn float_text_is_a_float_literal() {
        assert_eq!(float_text(1.0), "1.0");
        assert_eq!(float_text(0.5), "0.5");
        assert_eq!(float_text(1e-8), "1e-8");
        assert_eq!(float_text(-0.0), "-0.0");
    }
}
