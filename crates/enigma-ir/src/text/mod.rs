//! The IR's text form (prints and parses back exactly) and its JSON form.
//!
//! # Text form
//!
//! The text reads like source, in the spirit of Cranelift's `.clif`:
//!
//! ```text
//! kernel reduce(A: device f32 read, Out: device f32 read_write, n: u32) {
//!     spec TILE: u32 = 32u32
//!     threadgroup scratch: f32[32]
//!     var tid: u32
//!     var sum: f32
//!
//!     tid = thread_position_in_grid.x  // reduce.rs:12
//!     if (tid < n) {
//!         sum = simd_sum(A[tid])
//!     } else {
//!         sum = 0.0f32
//!     }
//!     scratch[thread_index_in_threadgroup] = sum
//!     threadgroup_barrier(mem_threadgroup)
//!     Out[tid] = (scratch[0u32] + 1.5f32)
//! }
//! ```
//!
//! Grammar (`*` repeats, `?` optional, `|` alternatives; newlines are
//! whitespace, `;` may separate statements):
//!
//! ```text
//! kernel  := "kernel" name "(" (param ("," param)* ","?)? ")" "{" decl* stmt* "}"
//! param   := name ":" "device" type ("read" | "read_write")   // a buffer
//!          | name ":" type                                     // a by-value constant
//!          | name ":" "texture2d" "<" scalar "," ("read" | "write" | "read_write" | "sample") ">"
//! decl    := "spec" name ":" scalar "=" literal
//!          | "threadgroup" name ":" type "[" len "]"
//!          | "thread" name ":" type "[" len "]"          // a per-thread array
//!          | "var" name ":" type
//!          | "cooperative" name ":" "cooperative_tensor" "<" scalar "," rows "," cols "," scope ">"
//! stmt    := ref "=" expr                      | ref "[" expr "]" "=" expr
//!          | (ref "=")? "atomic_<op>" "(" ref "[" expr "]" "," expr ")"
//!          | (ref "=")? "atomic_compare_exchange" "(" ref "[" expr "]" "," expr "," expr ")"
//!          | "if" "(" expr ")" "{" stmt* "}" ("else" ("{" stmt* "}" | if-stmt))?
//!          | "for" ref "in" "(" expr "," expr "," expr ")" "unroll"? "{" stmt* "}"   // (start, end, step)
//!          | "while" "(" expr ")" "{" stmt* "}"
//!          | "break" | "continue" | "return"
//!          | ("threadgroup_barrier" | "simdgroup_barrier") "(" flag ("|" flag)* ")"
//!          | ("simdgroup_store" | "simdgroup_store_transposed") "(" expr "," ref "," expr "," expr ")"
//!          | "texture_write" "(" ref "," expr "," expr ")"    // (texture, value, coordinate)
//!          | "texture_fence" "(" ref ")"
//!          | "async_copy" "(" ref "[" expr "]" "," ref "[" expr "]" "," n "," expr ")"   // (dst, src, count, valid)
//!          | "async_commit" "(" ")" | "async_wait" "(" n ")"
//!          | "tile_copy" "(" expr "," ref "[" expr "]" "," ref "," expr "," expr "," expr "," expr "," expr "," n "," n ")"
//!                                            // (barrier, dst, src, rows, columns, pitch, row, column, box rows, box columns)
//!          | "tile_wait" "(" expr ")"
//!          | "print" "(" quoted ("," expr)* ")"        // (format, values)
//!          | ("matmul2d" | "matmul2d_overlapped") "(" descriptor "," scope "," (view | ref) "," view "," ref ")"   // (…, left, right, destination); overlapped: operands released at the second barrier
//!          | ("cooperative_load" | "cooperative_store") "(" ref "," view ")"
//!          | ("reduce_rows" | "reduce_columns") "(" ref "," ref "," ("sum" | "max" | "min") ")"
//!          | ("cooperative_dequantize_int4" | "cooperative_dequantize_fp4") ["_fragments"] "(" ref "," ref "," expr "," expr "," ref "," expr "," expr "," expr ")"   // (tensor, words, offset, stride, scales, scale offset, scale stride, group shift); _fragments: the words in fragment order
//!          | "combine" "(" ref "," ref "," ("assign" | "add" | "sub" | "mul" | "max" | "min") ")"   // (destination, source, op)
//!          | ref "[" expr "]" "=" expr                 // a cooperative tensor's slot
//! descriptor := "matmul2d_descriptor" "(" m "," n "," (k | "dynamic_extent") "," bool "," bool "," bool ","
//!               ("multiply" | "multiply_accumulate") ")"   // transpose_left, transpose_right, relaxed_precision
//! scope   := "simdgroup" | "simdgroups" "(" n ")"
//! view    := "tensor" "(" ref "," expr "," expr "," expr "," expr "," expr ")"   // (memory, offset, x extent, y extent, x stride, y stride)
//! expr    := unary (binop unary)?               // one operator per parenthesis level
//! unary   := ("-" | "~" | "!") unary | primary ("." component)*
//! primary := literal | ref | ref "[" expr "]" | builtin | "(" expr ")"
//!          | function "(" args ")"              // MSL names: `min`, `fast::exp`, `simd_sum`, …
//!          | type "(" args ")"                  // vector constructor: `f32x4(a, b, c, d)`
//!          | ("cast" | "bitcast") "<" type ">" "(" expr ")"
//!          | ("simdgroup_fill" | "simdgroup_diagonal") "<" type ">" "(" expr ")"
//!          | ("simdgroup_load" | "simdgroup_load_transposed") "<" type ">" "(" ref "," expr "," expr ")"
//!          | ("simdgroup_load_int4" | "simdgroup_load_fp4") ["_fragments"] "<" type ">" "(" ref "," expr "," expr "," ref "," expr ")"
//!                                               // (words, offset, stride, scales, scale offset)
//!          | ("matrix_row" | "matrix_col") "<" type ">" "(" n ")"
//!          | "simdgroup_multiply" "(" expr "," expr ")" | "simdgroup_multiply_accumulate" "(" expr "," expr "," expr ")"
//!          | "thread_element" "(" expr "," n ")"
//!          | "dim_check" "(" ref "," n "," expr "," expr ")"   // (memory, dimension, index, size)
//!          | "texture_read" "(" ref "," expr ")" | ("get_width" | "get_height") "(" ref ")"
//!          | "texture_sample" "(" ref "," sampler "," expr ")"
//!          | "get_capacity" "(" ref ")" | "is_valid_element" "(" ref "," expr ")"
//!          | "get_multidimensional_index" "(" ref "," expr "," n ")"   // n: 0 the column, 1 the row
//! sampler := "sampler" "(" ("normalized" | "pixel") "," ("nearest" | "linear") ","
//!            ("clamp_to_edge" | "clamp_to_zero" | "repeat" | "mirrored_repeat") ")"
//! ```
//!
//! * Matrix types are `mat<rows>x<cols>_<elem>` (`mat8x8_f16`); loads and
//!   stores take the memory, the offset of element (0, 0) and the stride
//!   (MSL's `elements_per_row`).
//!
//! * Textures are `texture2d<T, access>` parameters (T one of f32, f16, i32,
//!   u32); `texture_read(t, coord)` gives a `T`x4, `texture_write(t, v, coord)`
//!   takes one, coordinates are u32x2. In JSON a texture parameter is
//!   `{"texture":{"texel":"f32","access":"write"}}`, and the operations
//!   `texture_read {tex, coord}`, `texture_size {tex, dim}` (`"width"` or
//!   `"height"`), `texture_sample {tex, sampler: {coord, filter, address},
//!   uv}` (the IR names above) and the statements `texture_write {tex, value,
//!   coord}` and `texture_fence {tex}` (a read_write texture's `fence()`). `texture_sample(t, sampler(…), uv)` samples an f32 or f16
//!   `sample` texture at an f32x2.
//!
//! * Asynchronous copies (device buffer → threadgroup memory):
//!   `async_copy(dst[i], src[j], count, valid)`, `async_commit()`,
//!   `async_wait(pending)`; in JSON `async_copy {dst, dst_index, src,
//!   src_index, count, valid}`, `"async_commit"` and `async_wait {pending}`.
//! * Tile copies (a box of a device matrix → threadgroup memory, by the
//!   whole threadgroup): `tile_copy(barrier, dst[i], src, rows, columns,
//!   pitch, row, column, box_rows, box_columns)`, `tile_wait(barrier)`; in
//!   JSON `tile_copy {barrier, dst, dst_index, src, extents, pitch, origin,
//!   rows, cols}` and `tile_wait {barrier}`.
//! * `print("x = {}", x)`: the format string quoted (Rust's escapes), then
//!   the values; in JSON `print {format, args}`.
//!
//! * Names are identifiers; a name that is not a plain ASCII identifier or
//!   that collides with a keyword, a type or a builtin is written as a quoted
//!   string with Rust escapes (`"my name"`). A reference to an id the kernel
//!   does not declare prints as `$param(3)`, `$spec(0)`, `$tg(1)`,
//!   `$thread(2)`, `$local(7)`.
//! * `dim_check(A, 1, j, m)` is `j`, checked as subscript 1 of a
//!   multi-dimensional access to `A` whose dimension 1 has `m` elements
//!   (`A[(dim_check(A, 0, i, n) * m) + dim_check(A, 1, j, m)]` is `A[i, j]`).
//! * `<op>` is `add sub min max and or xor exchange`; a statement with a result
//!   prints as `old = atomic_fetch_add(A[i], v)`, without as `atomic_add(A[i], v)`.
//! * Barrier flags: `mem_none`, `mem_threadgroup`, `mem_device`,
//!   `mem_device_and_threadgroup` (also written `mem_device | mem_threadgroup`),
//!   `mem_texture` (alone).
//! * Literals carry their type: `true`, `1u32`, `-3i32`, `0.5f32`, `1e-7f16`.
//!   A float prints as the shortest decimal that reads back to the same `f64`
//!   (the IR keeps every float literal as an `f64`), so printing is bit-exact;
//!   `inf_f32`, `-inf_f32`, `nan_f32` and `nan_f32(0x7ff8000000000001)` (the
//!   `f64` bits of any other NaN) cover the rest. A literal whose value kind
//!   does not match its type (which validation rejects) prints as
//!   `lit<u32>(int -3)` (kinds `bool`, `int`, `uint`, `float`).
//! * Binary expressions are fully parenthesised, `(a + b)`; unary ones too,
//!   `(-x)`. The parser also accepts one unparenthesised operator where an
//!   expression stands alone (`if (i < n)`, `x = a + b`, `A[i + 1u32]`).
//! * `for i in (0u32, 8u32, 1u32) unroll { … }` is a loop unrolled at
//!   compile time (JSON: `"unroll": true` in the `for`, left out when false).
//! * Vector components: `.x .y .z .w`, or `.0` … `.3`.
//! * A statement's source location prints as a trailing comment,
//!   `// file.rs:12` (on the opening line of `if`/`for`/`while`), and parses
//!   back; other comments are ignored.
//!
//! [`print`](fn@print) then [`parse`](fn@parse) gives back an equal kernel for every kernel
//! whose declared names are pairwise distinct (which validation requires),
//! up to 128 levels of nesting. [`parse`] never panics: errors are
//! [`ParseError`]s with the line, the column and what was expected.
//!
//! # JSON form
//!
//! The serde derives of [`crate::ir`] define it; the Python front end writes
//! it. [`to_json`] writes one line, [`to_json_pretty`] an indented document,
//! [`from_json`] reads either. The shape, by example:
//!
//! ```text
//! {"schema":3,"name":"k",
//!  "params":[{"name":"A","kind":{"buffer":{"elem":"f32","access":"read"}}},
//!            {"name":"n","kind":{"value":{"ty":"u32"}}}],
//!  "spec_constants":[{"name":"TILE","ty":"u32","default":{"ty":"u32","value":{"u_int":32}}}],
//!  "threadgroup_arrays":[{"name":"s","elem":"f32","len":32}],
//!  "thread_arrays":[{"name":"acc","elem":"f32x4","len":8}],
//!  "locals":[{"name":"x","ty":"f32"}],
//!  "body":[{"kind":{"assign":{"var":0,"value":{"load":{"mem":{"buffer":0},"index":{"builtin":"thread_index_in_threadgroup"}}}}},
//!           "loc":{"file":"k.py","line":3}},
//!          {"kind":{"barrier":{"scope":"threadgroup","flags":"threadgroup"}}},
//!          {"kind":"return"}]}
//! ```
//!
//! * The document starts with `"schema"`, the version of this form
//!   ([`JSON_SCHEMA`]); types are their IR names (`"f32"`, `"u32x4"`), the
//!   spelling the text form prints.
//! * Every enum is externally tagged with snake_case names: a unit variant is
//!   a string (`"break"`, `"return"`, builtin names, `"add"`), a variant with
//!   data is a one-key object (`{"binary":{"op":"add","lhs":…,"rhs":…}}`).
//! * Ids (`ParamId`, `VarId`, `TgArrayId`, `ThreadArrayId`, `SpecId`) are
//!   bare indices into `params`, `locals`, `threadgroup_arrays`,
//!   `thread_arrays` (left out when empty), `spec_constants`.
//! * Expressions: `literal`, `param`, `spec`, `var`, `builtin`, `load {mem,
//!   index}`, `unary {op, arg}`, `binary {op, lhs, rhs}`, `call {func,
//!   precision, args}` (`func` is the intrinsic's variant name: `exp`,
//!   `simd_sum`; `precision` is `"fast"` or `"precise"`, left out for the
//!   default), `cast
//!   {to, arg}`, `bitcast {to, arg}`, `vector {ty, components}`, `extract {arg,
//!   index}`, `dim_check {mem, dim, index, size}`. Memories are `{"buffer":i}`, `{"threadgroup":i}` or `{"thread":i}`.
//! * Literals are `{"ty":"<scalar>","value":{"<kind>":v}}` with kinds `bool`,
//!   `int`, `u_int`, `float`. A float is a JSON number, or one of the strings
//!   `"nan"`, `"inf"`, `"-inf"`, `"nan:0x…"` (JSON has no numbers for them).
//! * A statement is `{"kind":…, "loc":{"file","line"}}`; `loc` is left out
//!   when unknown.
//! * Cooperative tensors ([`crate::cooperative`]): the kernel's
//!   `"cooperative_tensors":[{"name","elem","rows","cols","scope"}]` (left
//!   out when empty; `scope` is `"simdgroup"` or `{"simdgroups":4}`), the
//!   statements `matmul2d {desc: {m, n, k (null: dynamic), transpose_left,
//!   transpose_right, relaxed_precision, mode}, scope, left: {"tensor": view}
//!   or {"cooperative": id}, right: view, dest}`, `cooperative_load {tensor,
//!   src}`, `cooperative_store {tensor, dst}`, `cooperative_set {tensor,
//!   index, value}`, `cooperative_dequantize {tensor, code, words, offset,
//!   stride, scales, scale_offset, scale_stride, group_shift}`,
//!   `cooperative_reduce {src, dest, axis, op}`, views
//!   `{mem, offset, extents: [x, y], strides: [x, y]}`, and the expressions
//!   `cooperative_capacity {tensor}`, `cooperative_valid {tensor, index}`,
//!   `cooperative_element {tensor, index}`, `cooperative_coord {tensor,
//!   index, dim}`.

// Printing (`print`), reading (`lex` then `parse`) and the JSON form
// (`json`). The printer quotes a name whenever the reader would take it for
// something else, asking the reader's own helpers (`lex::is_special_float`,
// `parse::type_from_text`), so the two directions cannot drift apart.
mod json;
mod lex;
mod parse;
mod print;

pub use json::{from_json, to_json, to_json_pretty, JsonError, JSON_SCHEMA, MAX_JSON_DEPTH, READABLE_JSON_SCHEMAS};
pub use parse::{parse, MAX_NESTING};
pub use print::{literal_text, print};

use std::fmt;
use thiserror::Error;

/// A text-form parse error: where, and what.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    /// The kernel's name, once the header has been read.
    pub kernel: Option<String>,
    /// 1-based line and column (in characters) of the offending token.
    pub line: u32,
    pub column: u32,
    pub kind: ParseErrorKind,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(k) = &self.kernel {
            write!(f, "kernel `{k}`, ")?;
        }
        write!(f, "line {}, column {}: {}", self.line, self.column, self.kind)
    }
}

impl std::error::Error for ParseError {}

fn did_you_mean(s: &Option<&'static str>) -> String {
    match s {
        Some(s) => format!("; did you mean `{s}`?"),
        None => String::new(),
    }
}

#[derive(Clone, Debug, Error, PartialEq)]
pub enum ParseErrorKind {
    #[error("expected {expected}, found {found}")]
    Expected { expected: String, found: String },
    #[error("unknown builtin `{name}`{}", did_you_mean(.suggestion))]
    UnknownBuiltin { name: String, suggestion: Option<&'static str> },
    #[error("unknown function `{name}`{}", did_you_mean(.suggestion))]
    UnknownFunction { name: String, suggestion: Option<&'static str> },
    #[error("`{name}` is not declared: no parameter, spec constant, threadgroup array, per-thread array or local has that name, and no builtin")]
    UnknownName { name: String },
    #[error("unknown type `{name}`")]
    UnknownType { name: String },
    #[error("the name `{name}` is declared twice")]
    DuplicateName { name: String },
    #[error("`{name}` is a {what}; {expected}")]
    WrongKind { name: String, what: &'static str, expected: &'static str },
    #[error("invalid literal `{text}`: {reason}")]
    InvalidLiteral { text: String, reason: String },
    #[error("unexpected character {ch:?}")]
    UnexpectedCharacter { ch: char },
    #[error("invalid string: {reason}")]
    InvalidString { reason: &'static str },
    #[error("nesting deeper than {limit} levels")]
    TooDeep { limit: u32 },
}
