"""The kernel compiler: reads a function's source, binds its parameters,
compiles its body (through the mixins of the sibling modules) and returns
the kernel's IR as a JSON-able dict.
"""

from __future__ import annotations

import ast
import builtins as _py_builtins
import inspect
import textwrap
from typing import NamedTuple

from .. import _enigma, _lang
from .._lang import BufferParam, ConstantParam, TextureParam
from .._types import DType, f32, i32, bool_, parse_type, u32
from .conversions import Conversions
from .cooperative import Cooperative
from .diagnostics import CompileError, Diagnostics
from .expressions import Expressions
from .intrinsics import Intrinsics
from .matrices import Matrices
from .memory import Memory, _slice_node
from .msl_matrices import MslMatrices
from .statements import Statements
from .textures import Textures
from .values import MemRef, PyObj, ValueParamSym


class KernelCompiler(Diagnostics, Statements, Expressions, Conversions, Memory, Matrices, MslMatrices, Textures, Cooperative, Intrinsics):
    """Compiles one kernel function; each concern's methods come from its mixin."""

    def __init__(self, fn, ranks=None):
        self.fn = fn
        self.ranks = dict(ranks or {})  # {parameter name: rank of the array passed}, for shapes from arrays
        self.array_shapes = []  # ArrayShape per buffer parameter that takes its shape from the array passed
        self.depth = 0  # expressions and blocks being compiled, nested
        self.file = fn.__code__.co_filename
        self.kernel_name_py = fn.__name__
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise CompileError(
                f"{self.file}:{fn.__code__.co_firstlineno}: cannot read the source of `{fn.__name__}` ({e}); "
                "enigma compiles kernels from their source, so define them in a file (not in an "
                "interactive session or through exec of a string)"
            ) from None
        self.source_lines = lines
        self.first_line = first
        tree = ast.parse(textwrap.dedent("".join(lines)))
        ast.increment_lineno(tree, first - 1)
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not defs or isinstance(defs[0], ast.AsyncFunctionDef):
            raise CompileError(f"{self.file}:{first}: `{fn.__name__}` is not a plain function definition")
        self.tree = defs[0]

        self.params = []
        self.spec_constants = []
        self.tg_arrays = []
        self.thread_arrays = []
        self.locals = []
        self.coop_tensors = []
        self.coop_name_hint = None  # the name a cooperative tensor being made is assigned to
        self.symbols = {}
        self.taken = set()
        self.written = set()
        self.explicit_access = {}
        self.block = []
        self.defined = set()
        self.last_if = None
        self.loop_vars = []
        self.loop_depth = 0
        self.no_hoist = None  # a reason string while hoisting statements is not allowed
        self.temp_counter = 0
        self.line = self.tree.lineno
        self.closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass
        self.assigned_names = self._scan_assigned(self.tree)
        self.kernel_ir_name = self._ir_name(self.kernel_name_py)

    def _ir_name(self, name):
        # IR (and MSL/CUDA) names are ASCII: other characters of a Python
        # identifier are spelled by their code point (`Ω` -> `u03a9`).
        if not name.isascii():
            name = "".join(c if c.isascii() else f"u{ord(c):04x}" for c in name)
        candidate = name
        n = 0
        while not _enigma.is_valid_identifier(candidate) or candidate in self.taken:
            n += 1
            base = name.strip("_") or "v"
            if not (base[0].isalpha() or base[0] == "_"):
                base = "v" + base
            candidate = f"{base}_{n}" if n > 1 or not _enigma.is_valid_identifier(base + "_") or (base + "_") in self.taken else base + "_"
            if n > 1000:
                raise self.error(None, f"cannot find a valid IR name for `{name}`")
        self.taken.add(candidate)
        return candidate

    @staticmethod
    def _scan_assigned(fn_node):
        names = set()
        for node in ast.walk(fn_node):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                names.add(node.optional_vars.id)
        return names

    def compile(self) -> dict:
        fn_node = self.tree
        args = fn_node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or getattr(args, "posonlyargs", []):
            raise self.error(fn_node, "kernel parameters must be plain positional parameters (no defaults, *args, **kwargs or keyword-only parameters)")
        annotations = getattr(self.fn, "__annotations__", {})
        for arg in args.args:
            self._param(arg, annotations)
        self._array_shape_params(fn_node)
        self._block(fn_node.body)
        for sym in list(self.symbols.values()):
            if isinstance(sym, MemRef) and sym.shape is not None:
                for d in range(len(sym.shape)):
                    self._shape_size(sym, d, sym.decl)  # every name in a shape resolves
        for i, p in enumerate(self.params):
            if "buffer" in p["kind"]:
                access = self.explicit_access.get(i) or ("read_write" if i in self.written else "read")
                if access == "read" and i in self.written:
                    raise self.error(fn_node, f"buffer `{p['name']}` is declared read-only but the kernel writes it")
                p["kind"]["buffer"]["access"] = access
        ir = {
            "schema": _enigma.IR_JSON_SCHEMA,
            "name": self.kernel_ir_name,
            "params": self.params,
            "spec_constants": self.spec_constants,
            "threadgroup_arrays": self.tg_arrays,
            "locals": self.locals,
            "body": self.block,
        }
        if self.coop_tensors:
            ir["cooperative_tensors"] = self.coop_tensors
        if self.thread_arrays:
            ir["thread_arrays"] = self.thread_arrays
        return ir

    def _param(self, arg, annotations):
        name = arg.arg
        if arg.annotation is None:
            raise self.error(arg, f"parameter `{name}` needs an annotation: a type such as enigma.f32 (a device buffer) or enigma.constant(enigma.u32) (a by-value scalar)")
        ann = annotations.get(name, None)
        if isinstance(ann, str) or ann is None:
            try:
                ann = eval(compile(ast.Expression(arg.annotation), self.file, "eval"), self.fn.__globals__, dict(self.closure))
            except Exception as e:  # noqa: BLE001 - report any evaluation failure
                raise self.error(arg, f"cannot evaluate the annotation of `{name}`: {e}") from None
        ann = _kernel_annotation(ann)
        index = len(self.params)
        ir_name = self._ir_name(name)
        if isinstance(ann, str):
            try:
                ann = parse_type(ann)
            except ValueError as e:
                raise self.error(arg, str(e)) from None
        if isinstance(ann, DType):
            self.params.append({"name": ir_name, "kind": {"buffer": {"elem": ann.ir(), "access": "read"}}})
            self.symbols[name] = MemRef({"buffer": index}, ann, name, index, None, arg)
        elif isinstance(ann, BufferParam):
            problem = None if ann.shape is None else _lang.shape_problem(ann.shape)
            if problem:
                raise self.error(arg, f"buffer `{name}`: {problem}")
            self.params.append({"name": ir_name, "kind": {"buffer": {"elem": ann.dtype.ir(), "access": "read"}}})
            self.symbols[name] = MemRef({"buffer": index}, ann.dtype, name, index, None if ann.shape is None else tuple(ann.shape), arg)
            if ann.access:
                self.explicit_access[index] = ann.access
        elif isinstance(ann, TextureParam):
            self._texture_param(name, ir_name, index, ann)
        elif isinstance(ann, ConstantParam):
            if ann.dtype.is_vector:
                raise self.error(arg, f"by-value parameter `{name}`: vector types are not supported by value; pass a buffer")
            self.params.append({"name": ir_name, "kind": {"value": {"ty": ann.dtype.ir()}}})
            self.symbols[name] = ValueParamSym(index, ann.dtype)
        else:
            raise self.error(arg, f"the annotation of `{name}` must be an enigma type (e.g. enigma.f32, enigma.half4) for a device buffer, or enigma.constant(T) for a by-value scalar; got {ann!r}")

    def _array_shape_params(self, fn_node):
        """Gives each buffer parameter declared without a shape that the body
        indexes per dimension (``A[i, j]``) or whose ``A.shape`` it reads the
        shape of the array passed: the rank in ``self.ranks`` (the array's),
        else the one the body implies; each size a by-value ``u32``
        parameter appended after the kernel's own, so one compilation serves
        every size of that rank."""
        implied = _implied_ranks(fn_node)
        for arg in fn_node.args.args:
            name = arg.arg
            mem = self.symbols.get(name)
            if name not in implied or not isinstance(mem, MemRef) or mem.param is None or mem.shape is not None:
                continue
            rank = implied[name]
            rank = self.ranks.get(name, rank)
            if mem.elem.is_vector:
                raise self.error(
                    mem.decl,
                    f"buffer `{name}` of {mem.elem!r} takes its shape from the array passed, which is given for scalar "
                    f"element types only; declare its shape (`enigma.buffer({mem.elem!r}, shape=(\"n\", \"m\"))`) or "
                    f"pass a buffer of {mem.elem.scalar} elements",
                )
            if rank < 1:
                raise self.error(mem.decl, f"buffer `{name}`: the array passed has no dimensions; pass an array of rank 1 or more")
            sizes = []
            for d in range(rank):
                key = f"{name}.shape[{d}]"
                self.symbols[key] = ValueParamSym(len(self.params), u32)
                self.params.append({"name": self._ir_name(f"{name}_shape{d}"), "kind": {"value": {"ty": u32.ir()}}})
                sizes.append(key)
            mem.shape = tuple(sizes)
            self.array_shapes.append(ArrayShape(mem.param, name, rank))

    def _bind(self, call, what, names, required, prefix="enigma."):
        """Binds a call's positional and keyword arguments to ``names``;
        messages name the function ``prefix + what``."""
        what = prefix + what
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise self.error(call, f"{what}: *args and **kwargs are not supported")
        if len(call.args) > len(names):
            raise self.error(call, f"{what} takes at most {len(names)} argument(s) ({', '.join(names) or 'none'}), {len(call.args)} given")
        bound = dict(zip(names, call.args))
        for k in call.keywords:
            if k.arg not in names:
                raise self.error(call, f"{what} has no argument `{k.arg}` (it takes: {', '.join(names) or 'none'})")
            if k.arg in bound:
                raise self.error(call, f"{what}: `{k.arg}` given twice")
            bound[k.arg] = k.value
        missing = [n for n in names[:required] if n not in bound]
        if missing:
            raise self.error(call, f"{what} needs the argument(s) {', '.join(missing)}")
        return bound

    def _type_arg(self, node):
        t = self.expr(node)
        obj = t.obj if isinstance(t, PyObj) else None
        if isinstance(obj, (DType, str)):
            try:
                return parse_type(obj)
            except ValueError as e:
                raise self.error(node, str(e)) from None
        if obj is _py_builtins.float:
            return f32
        if obj is _py_builtins.int:
            return i32
        if obj is _py_builtins.bool:
            return bool_
        raise self.error(node, "expected a type: an enigma type (enigma.f32, enigma.half4) or its name (\"float\", \"half4\", \"u32\")")


def _kernel_annotation(ann):
    """What a parameter's annotation says to the front end: for
    ``typing.Annotated[T, m...]`` (the spelling type checkers accept, e.g.
    ``Annotated[enigma.u32, enigma.constant(enigma.u32)]``) the first
    metadata ``m`` that is a kernel annotation, else ``T``; any other
    annotation as it is."""
    metadata = getattr(ann, "__metadata__", None)
    if metadata is None:
        return ann
    for m in metadata:
        if isinstance(m, (DType, BufferParam, ConstantParam, TextureParam)):
            return m
    return ann.__origin__


class ArrayShape(NamedTuple):
    """A buffer parameter that takes its shape from the array passed: its
    index, its Python name and the rank the kernel was compiled for. Its
    sizes are by-value ``u32`` parameters after the kernel's own, in the
    order of these records, dimension by dimension."""

    param: int
    name: str
    rank: int


def _implied_ranks(fn_node):
    """{name: the least rank the body implies} for each name the body
    indexes per dimension (``A[i, j]``: 2) or reads the shape of
    (``A.shape[1]``: 2, ``A.shape[-1]`` or ``A.ndim``: 1)."""
    ranks = {}

    def need(name, rank):
        ranks[name] = max(ranks.get(name, 1), rank)

    for node in ast.walk(fn_node):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            s = node.slice.value if type(node.slice).__name__ == "Index" else node.slice
            need(node.value.id, len(s.elts) if isinstance(s, ast.Tuple) else 1) if isinstance(s, ast.Tuple) else None
        elif isinstance(node, ast.Attribute) and node.attr in ("shape", "ndim") and isinstance(node.value, ast.Name):
            need(node.value.id, 1)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and isinstance(node.value.value, ast.Name):
            s = _slice_node(node.slice)
            if isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool) and s.value >= 0:
                need(node.value.value.id, s.value + 1)
    return ranks


def compile_function(fn, ranks=None) -> dict:
    """The IR (as a JSON-able dict) of a kernel function.

    Only :class:`CompileError` leaves: anything else the front end trips on
    (a constant too large for a float, a construct it did not foresee)
    becomes one, naming the line it was compiling.
    """
    return compile_kernel(fn, ranks)[0]


def compile_kernel(fn, ranks=None):
    """(the IR as a JSON-able dict, the :class:`ArrayShape` of each buffer
    parameter that takes its shape from the array passed) of a kernel
    function; ``ranks`` ({parameter name: rank}) gives those arrays' ranks,
    else they are the ones the body implies. Raises as
    :func:`compile_function`."""
    compiler = KernelCompiler(fn, ranks)
    try:
        return compiler.compile(), compiler.array_shapes
    except CompileError:
        raise
    except (ArithmeticError, ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError) as e:
        raise compiler.error(None, f"cannot compile this line ({type(e).__name__}: {e})") from e
