"""The Python front end: a decorated function's AST → enigma IR (JSON form).

The kernel language is a subset of Python, read from the function's source
(``inspect`` + ``ast``) — the function is never called. docs/language.md
is the language reference, and ``enigma._language`` declares its names;
this package implements it:

* names: kernel locals (one IR local per Python name, with one type), buffer
  and by-value parameters, threadgroup arrays, specialisation constants;
  other names resolve in the function's closure, globals and builtins at
  compile time (ints, floats and bools become literals; enigma's names
  become builtins, intrinsics and types);
* types: every value has an IR type, except untyped Python literals, which
  adapt to the other operand (``x + 1`` keeps x's type, like MSL literals);
  mixed typed operands follow C's usual arithmetic conversions; every
  result type (and the usual conversions) comes from the IR's typing rules,
  ``enigma_ir::typing``, through ``_enigma`` (``Conversions._rule``): the
  front end keeps no copy of them;
* statements carry ``loc`` (file, line) so validation and sanitizer reports
  point at the Python source.

The package splits the compiler by concern; :class:`KernelCompiler`
(``compiler``) is assembled from one mixin per module:

* ``compiler`` — the entry point: source, parameters (buffers that take
  their shapes from the arrays passed: one by-value ``u32`` per dimension
  after the kernel's own parameters, the rank fixed per compilation), the
  kernel's IR;
* ``statements`` — statements and control flow, hoisted temporaries;
* ``expressions`` — names, attributes, operators, constant folding;
* ``conversions`` — literal adaptation, conversions, operand unification;
* ``memory`` — loads, stores, atomics, asynchronous copies, multi-dimensional subscripts;
* ``matrices`` — SIMD-group matrices;
* ``msl_matrices`` — SIMD-group matrices in MSL's out-parameter spelling;
* ``textures`` — texture parameters and their methods;
* ``intrinsics`` — builtins, type calls and the intrinsic functions;
* ``values`` — what an expression denotes while compiling;
* ``irjson`` — IR JSON node constructors;
* ``diagnostics`` — ``CompileError``, the nesting limit, unsupported constructs.
"""

from .compiler import ArrayShape, KernelCompiler, compile_function, compile_kernel
from .diagnostics import MAX_NESTING, CompileError

__all__ = ["ArrayShape", "CompileError", "KernelCompiler", "MAX_NESTING", "compile_function", "compile_kernel"]
