"""The Python front end: a decorated function's AST → enigma IR (JSON form).

The kernel language is a subset of Python, read from the function's source
(``inspect`` + ``ast``) — the function is never called. See the package
docstring (``enigma/__init__.py``) for the language reference; this module
implements it:

* names: kernel locals (one IR local per Python name, with one type), buffer
  and by-value parameters, threadgroup arrays, specialisation constants;
  other names resolve in the function's closure, globals and builtins at
  compile time (ints, floats and bools become literals; enigma's names
  become builtins, intrinsics and types);
* types: every value has an IR type, except untyped Python literals, which
  adapt to the other operand (``x + 1`` keeps x's type, like MSL literals);
  mixed typed operands follow C's usual arithmetic conversions;
* statements carry ``loc`` (file, line) so validation and sanitizer reports
  point at the Python source.
"""

from __future__ import annotations

import ast
import builtins as _py_builtins
import inspect
import math
import numbers
import struct
import textwrap
import types as _pytypes

from . import _enigma
from . import _lang
from ._lang import Builtin, BufferParam, ConstantParam, Intrinsic, TextureParam
from ._types import DType, MatrixType, f32, i32, i64, u32, u64, bool_, parse_type, rank

CompileError = _enigma.CompileError


# ---------------------------------------------------------------------------
# Values during compilation
# ---------------------------------------------------------------------------

class Val:
    """An IR value: ``expr`` (IR JSON) of type ``ty``; or an untyped Python
    literal (``ty is None``, ``lit`` set). ``decay`` marks an axis-less vector
    builtin (uint3) that means ``.x`` where a scalar is needed."""

    __slots__ = ("expr", "ty", "lit", "decay")

    def __init__(self, expr, ty, lit=None, decay=False):
        self.expr = expr
        self.ty = ty
        self.lit = lit
        self.decay = decay

    @property
    def untyped(self) -> bool:
        return self.ty is None


def untyped(value) -> Val:
    return Val(None, None, value)


class PyObj:
    """A compile-time Python object (a module, an enigma marker, a type…)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj


class MemRef:
    """A device buffer or threadgroup array, indexable; with a ``shape``
    (row-major; entries: ints, names of scalars, or None for an open first
    dimension), indexable with one subscript per dimension."""

    __slots__ = ("mem", "elem", "name", "param", "shape", "decl")

    def __init__(self, mem, elem, name, param=None, shape=None, decl=None):
        self.mem = mem  # {"buffer": i} or {"threadgroup": i}
        self.elem = elem
        self.name = name
        self.param = param  # parameter index for buffers
        self.shape = shape
        self.decl = decl  # the AST node that declared it (for messages)


class TexRef:
    """A ``texture2d`` parameter: its methods are read, write, get_width, get_height."""

    __slots__ = ("index", "texel", "access", "name")

    def __init__(self, index, texel, access, name):
        self.index, self.texel, self.access, self.name = index, texel, access, name


class TexMethod:
    """``tex.read`` (…) before it is called."""

    __slots__ = ("tex", "method")

    def __init__(self, tex, method):
        self.tex, self.method = tex, method


class LocalSym:
    __slots__ = ("var", "ty", "decay", "line", "ir_name")

    def __init__(self, var, ty, decay, line, ir_name):
        self.var, self.ty, self.decay, self.line, self.ir_name = var, ty, decay, line, ir_name


class ValueParamSym:
    __slots__ = ("index", "ty")

    def __init__(self, index, ty):
        self.index, self.ty = index, ty


class SpecSym:
    __slots__ = ("index", "ty")

    def __init__(self, index, ty):
        self.index, self.ty = index, ty


class _IfRecord:
    """An ``if_`` that an ``else_``/``elif_`` may still extend."""

    __slots__ = ("stmt", "then_defined", "before_defined", "parent")

    def __init__(self, stmt, then_defined, before_defined, parent):
        self.stmt, self.then_defined, self.before_defined, self.parent = stmt, then_defined, before_defined, parent


def _join(a, b):
    """Names definitely assigned where two paths meet (None: unreachable path)."""
    if a is None:
        return None if b is None else set(b)
    if b is None:
        return set(a)
    return a & b


# ---------------------------------------------------------------------------
# IR JSON helpers
# ---------------------------------------------------------------------------

def _lit_scalar(value, ty: DType) -> dict:
    s = ty.scalar
    if ty.is_bool:
        return {"literal": {"ty": "bool", "value": {"bool": bool(value)}}}
    if ty.is_float:
        v = float(value)
        if math.isfinite(v):
            return {"literal": {"ty": s, "value": {"float": v}}}
        # JSON has no inf/nan: write the bits and reinterpret them.
        if s == "f32":
            bits, ity = struct.unpack("<I", struct.pack("<f", v))[0], "u32"
        elif s == "f16":
            bits, ity = struct.unpack("<H", struct.pack("<e", v))[0], "u16"
        else:  # bf16
            bits, ity = struct.unpack("<I", struct.pack("<f", v))[0] >> 16, "u16"
            if math.isnan(v):
                bits |= 0x40
        return {"bitcast": {"to": ty.ir(), "arg": {"literal": {"ty": ity, "value": {"u_int": bits}}}}}
    if ty.is_signed:
        return {"literal": {"ty": s, "value": {"int": int(value)}}}
    return {"literal": {"ty": s, "value": {"u_int": int(value)}}}


def _lit(value, ty: DType) -> dict:
    e = _lit_scalar(value, ty.scalar_type)
    if ty.is_vector:
        return {"vector": {"ty": ty.ir(), "components": [e]}}
    return e


def _extract(expr, index):
    return {"extract": {"arg": expr, "index": index}}


def _cast(expr, ty: DType):
    return {"cast": {"to": ty.ir(), "arg": expr}}


def _binary(op, lhs, rhs):
    return {"binary": {"op": op, "lhs": lhs, "rhs": rhs}}


def _call(func, args):
    return {"call": {"func": func, "args": args}}


def _usual(a: DType, b: DType) -> DType:
    """C's usual arithmetic conversions between two scalar types (without
    integer promotion: narrow integer arithmetic stays in its type)."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if {a.scalar, b.scalar} == {"f16", "bf16"}:
                return f32
            return a if rank(a.scalar) >= rank(b.scalar) else b
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    ra, rb = rank(a.scalar), rank(b.scalar)
    if ra != rb:
        return a if ra > rb else b
    return a if a.is_unsigned else b


def _default_type(value) -> DType:
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return i32
        if -(1 << 63) <= value < (1 << 63):
            return i64
        return u64
    return f32


def _short(value: int) -> str:
    """An int for a message: its digits, or its size when it has many."""
    if value.bit_length() <= 128:
        return str(value)
    return f"a {value.bit_length()}-bit integer"


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_rem(a: int, b: int) -> int:
    return a - b * _c_div(a, b)


_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "rem", ast.Pow: "pow", ast.BitAnd: "bit_and", ast.BitOr: "bit_or", ast.BitXor: "bit_xor",
    ast.LShift: "shl", ast.RShift: "shr",
}
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_OP_SYMBOL = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "rem": "%", "pow": "**",
    "bit_and": "&", "bit_or": "|", "bit_xor": "^", "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=",
    "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "and", "or": "or",
}

_UNSUPPORTED_STMTS = {
    ast.FunctionDef: "a nested function definition", ast.AsyncFunctionDef: "an async function",
    ast.ClassDef: "a class definition", ast.Delete: "`del`", ast.Import: "`import`",
    ast.ImportFrom: "`import`", ast.Global: "`global`", ast.Nonlocal: "`nonlocal`",
    ast.Raise: "`raise`", ast.Try: "`try`", ast.Assert: "`assert`", ast.AsyncFor: "`async for`",
    ast.AsyncWith: "`async with`",
}
_UNSUPPORTED_EXPRS = {
    ast.Lambda: "a lambda", ast.GeneratorExp: "a generator expression", ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension", ast.Await: "`await`",
    ast.Yield: "`yield`", ast.YieldFrom: "`yield from`", ast.List: "a list", ast.Tuple: "a tuple",
    ast.Dict: "a dict", ast.Set: "a set", ast.JoinedStr: "an f-string", ast.Starred: "a starred expression",
    ast.NamedExpr: "an assignment expression (`:=`)", ast.Slice: "a slice",
}

_COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3}


# ---------------------------------------------------------------------------
# The compiler
# ---------------------------------------------------------------------------

# The deepest nesting of expressions and blocks together a kernel may have:
# the IR's (its text form reads 128 levels; enigma_ir::text::MAX_NESTING).
MAX_NESTING = 128
_TOO_DEEP = (
    f"expressions and blocks are nested more than {MAX_NESTING} levels deep here (the IR's limit); "
    "split the expression with intermediate variables or flatten the branches"
)


class KernelCompiler:
    def __init__(self, fn):
        self.fn = fn
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
        self.locals = []
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

    # --- errors and names -------------------------------------------------
    def error(self, node, message):
        line = getattr(node, "lineno", None) or self.line
        text = ""
        idx = line - self.first_line
        if 0 <= idx < len(self.source_lines):
            text = "\n    " + self.source_lines[idx].strip()
        err = CompileError(f"{self.file}:{line}: {message} (in kernel `{self.kernel_name_py}`){text}")
        err.file = self.file
        err.line = line
        return err

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

    # --- entry point -----------------------------------------------------
    def compile(self) -> dict:
        fn_node = self.tree
        args = fn_node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or getattr(args, "posonlyargs", []):
            raise self.error(fn_node, "kernel parameters must be plain positional parameters (no defaults, *args, **kwargs or keyword-only parameters)")
        annotations = getattr(self.fn, "__annotations__", {})
        for arg in args.args:
            self._param(arg, annotations)
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
        return {
            "schema": _enigma.IR_JSON_SCHEMA,
            "name": self.kernel_ir_name,
            "params": self.params,
            "spec_constants": self.spec_constants,
            "threadgroup_arrays": self.tg_arrays,
            "locals": self.locals,
            "body": self.block,
        }

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
        index = len(self.params)
        ir_name = self._ir_name(name)
        if isinstance(ann, str):
            try:
                ann = parse_type(ann)
            except ValueError as e:
                raise self.error(arg, str(e)) from None
        if isinstance(ann, DType):
            self.params.append({"name": ir_name, "kind": {"buffer": {"elem": ann.ir(), "access": "read"}}})
            self.symbols[name] = MemRef({"buffer": index}, ann, name, index)
        elif isinstance(ann, BufferParam):
            problem = None if ann.shape is None else _lang.shape_problem(ann.shape)
            if problem:
                raise self.error(arg, f"buffer `{name}`: {problem}")
            self.params.append({"name": ir_name, "kind": {"buffer": {"elem": ann.dtype.ir(), "access": "read"}}})
            self.symbols[name] = MemRef({"buffer": index}, ann.dtype, name, index, None if ann.shape is None else tuple(ann.shape), arg)
            if ann.access:
                self.explicit_access[index] = ann.access
        elif isinstance(ann, TextureParam):
            self.params.append({"name": ir_name, "kind": {"texture": {"texel": ann.dtype.ir(), "access": ann.access}}})
            self.symbols[name] = TexRef(index, ann.dtype, ann.access, name)
        elif isinstance(ann, ConstantParam):
            if ann.dtype.is_vector:
                raise self.error(arg, f"by-value parameter `{name}`: vector types are not supported by value; pass a buffer")
            self.params.append({"name": ir_name, "kind": {"value": {"ty": ann.dtype.ir()}}})
            self.symbols[name] = ValueParamSym(index, ann.dtype)
        else:
            raise self.error(arg, f"the annotation of `{name}` must be an enigma type (e.g. enigma.f32, enigma.half4) for a device buffer, or enigma.constant(T) for a by-value scalar; got {ann!r}")

    # --- statements ------------------------------------------------------
    def emit(self, kind, node=None):
        line = getattr(node, "lineno", None) or self.line
        stmt = {"kind": kind, "loc": {"file": self.file, "line": line}}
        self.block.append(stmt)
        return stmt

    def _block(self, body):
        self.depth += 1
        try:
            if self.depth > MAX_NESTING and body:
                raise self.error(body[0], _TOO_DEEP)
            self._block_stmts(body)
        finally:
            self.depth -= 1

    def _block_stmts(self, body):
        for node in body:
            self.line = node.lineno
            is_else = isinstance(node, ast.With) and self._with_kind(node) in ("else_", "elif_")
            if not is_else:
                self.last_if = None
            self._stmt(node)

    def _sub_block(self, body, defined):
        """Compiles ``body`` into a fresh block; returns (block, defined after)."""
        saved = (self.block, self.defined, self.last_if)
        self.block, self.defined, self.last_if = [], (None if defined is None else set(defined)), None
        try:
            self._block(body)
            return self.block, self.defined
        finally:
            self.block, self.defined, self.last_if = saved[0], saved[1], saved[2]

    def _stmt(self, node):
        if isinstance(node, ast.Assign):
            if len(node.targets) > 1 and any(not isinstance(t, ast.Name) for t in node.targets):
                raise self.error(node, "chained assignment is only supported to plain names")
            for target in node.targets:
                self._assign(target, node.value, node)
        elif isinstance(node, ast.AnnAssign):
            if node.value is None:
                raise self.error(node, "a declaration without a value is not supported; assign a value")
            if not isinstance(node.target, ast.Name):
                raise self.error(node, "annotated assignment is only supported to a plain name")
            ty = self._type_arg(node.annotation)
            val = self._convert(self.value(node.value), ty, node.value, explicit=True)
            self._assign_name(node.target.id, val, node)
        elif isinstance(node, ast.AugAssign):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.error(node, f"the operator {type(node.op).__name__} is not supported")
            if isinstance(node.target, ast.Name):
                cur = self.value(ast.Name(id=node.target.id, ctx=ast.Load(), lineno=node.lineno, col_offset=0))
                val = self._binop(op, cur, self.value(node.value), node)
                self._assign_name(node.target.id, val, node)
            elif isinstance(node.target, ast.Subscript):
                mem = self.expr(node.target.value)
                if not isinstance(mem, MemRef):
                    raise self.error(node, "augmented assignment to a component or an unknown target is not supported")
                index = self._index(node.target.slice, mem, node)
                cur = Val({"load": {"mem": mem.mem, "index": index}}, mem.elem)
                val = self._binop(op, cur, self.value(node.value), node)
                self._store(mem, index, val, node)
            else:
                raise self.error(node, "augmented assignment to this target is not supported")
        elif isinstance(node, ast.With):
            self._with(node)
        elif isinstance(node, ast.If):
            self._if(node)
        elif isinstance(node, ast.For):
            self._for(node)
        elif isinstance(node, ast.While):
            self._while(node)
        elif isinstance(node, ast.Break):
            self.emit("break", node)
            self.defined = None
        elif isinstance(node, ast.Continue):
            self.emit("continue", node)
            self.defined = None
        elif isinstance(node, ast.Return):
            if node.value is not None:
                raise self.error(node, "a kernel returns nothing; `return` takes no value (write results to a buffer)")
            self.emit("return", node)
            self.defined = None
        elif isinstance(node, ast.Pass):
            pass
        elif isinstance(node, ast.Expr):
            self._expr_stmt(node)
        elif type(node) in _UNSUPPORTED_STMTS:
            raise self.error(node, f"{_UNSUPPORTED_STMTS[type(node)]} is not supported in a kernel")
        else:
            raise self.error(node, f"the statement `{type(node).__name__}` is not supported in a kernel")

    def _expr_stmt(self, node):
        v = node.value
        if isinstance(v, ast.Constant) and (isinstance(v.value, str) or v.value is Ellipsis):
            return  # docstring or `...`
        if isinstance(v, ast.Call):
            callee = self.expr(v.func)
            if isinstance(callee, PyObj) and isinstance(callee.obj, TexMethod) and callee.obj.method == "write":
                return self._texture_write(callee.obj.tex, v)
            if isinstance(callee, PyObj) and isinstance(callee.obj, TexMethod) and callee.obj.method == "fence":
                self._bind(v, f"{callee.obj.tex.name}.fence", [], 0, prefix="")
                return self.emit({"texture_fence": {"tex": callee.obj.tex.index}}, v)
            if isinstance(callee, PyObj) and isinstance(callee.obj, Intrinsic):
                name = callee.obj.name
                if name in ("barrier", "threadgroup_barrier", "simdgroup_barrier"):
                    return self._barrier(name, v)
                if name.startswith("atomic_"):
                    self._atomic(name, v, want_result=False)
                    return
                if name == "simdgroup_store":
                    return self._matrix_store(v)
                if name in ("if_", "elif_", "else_", "for_range"):
                    raise self.error(v, f"enigma.{name}(...) is used as `with enigma.{name}(...):`")
        raise self.error(node, "this expression statement has no effect (only barriers, atomics and simdgroup_store can stand alone)")

    def _assign(self, target, value_node, node):
        if isinstance(target, ast.Name):
            special = self._special_rhs(target.id, value_node)
            if special:
                return
            val = self.value(value_node)
            self._assign_name(target.id, val, node)
        elif isinstance(target, ast.Subscript):
            mem = self.expr(target.value)
            if isinstance(mem, Val):
                raise self.error(node, "assigning one component of a vector is not supported; build a new vector (e.g. enigma.float4(a, b, c, d))")
            if not isinstance(mem, MemRef):
                raise self.error(node, "only device buffers and threadgroup arrays can be indexed and stored to")
            index = self._index(target.slice, mem, node)
            val = self.value(value_node)
            self._store(mem, index, val, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            raise self.error(node, "tuple unpacking is not supported; assign each name separately")
        elif isinstance(target, ast.Attribute):
            raise self.error(node, f"assigning to an attribute (`.{target.attr}`) is not supported")
        else:
            raise self.error(node, f"assignment to {type(target).__name__} is not supported")

    def _special_rhs(self, name, value_node):
        """``x = enigma.threadgroup_alloc(...)`` and ``x = enigma.spec(...)``."""
        if not isinstance(value_node, ast.Call):
            return False
        try:
            callee = self.expr(value_node.func)
        except CompileError:
            return False
        if not (isinstance(callee, PyObj) and isinstance(callee.obj, Intrinsic)):
            return False
        kind = callee.obj.name
        if kind == "threadgroup_alloc":
            if name in self.symbols:
                raise self.error(value_node, f"`{name}` is already defined; a threadgroup array needs a name of its own")
            args = self._bind(value_node, "threadgroup_alloc", ["type", "length", "shape"], 1)
            if ("length" in args) == ("shape" in args):
                raise self.error(value_node, "enigma.threadgroup_alloc takes the length (an int) or the shape (a tuple of ints, e.g. (16, 16)), one of the two")
            elem = self._type_arg(args["type"])
            dims_node = args.get("length", args.get("shape"))
            shape = None
            if isinstance(dims_node, (ast.Tuple, ast.List)):
                shape = tuple(self._tg_dimension(e, d, value_node) for d, e in enumerate(dims_node.elts))
                if not shape:
                    raise self.error(value_node, "the shape of a threadgroup array needs at least one dimension")
                length = math.prod(shape)
            else:
                length = self._tg_dimension(dims_node, None, value_node)
            if length > 0xFFFF_FFFF:
                raise self.error(
                    value_node,
                    f"threadgroup array `{name}` of {length} elements: a threadgroup array holds at most 2**32 - 1 elements "
                    "(and the device's threadgroup memory, 32 KiB on Apple GPUs, far fewer)",
                )
            index = len(self.tg_arrays)
            self.tg_arrays.append({"name": self._ir_name(name), "elem": elem.ir(), "len": length})
            self.symbols[name] = MemRef({"threadgroup": index}, elem, name, None, shape, value_node)
            return True
        if kind == "spec":
            if name in self.symbols and not isinstance(self.symbols[name], SpecSym):
                raise self.error(value_node, f"`{name}` is already defined")
            val = self._spec(value_node)
            self.symbols[name] = SpecSym(val.expr["spec"], val.ty)
            return True
        return False

    def _tg_dimension(self, node, d, call):
        """A threadgroup array's length (``d`` None) or the size of its
        dimension ``d``: a positive int known at compile time."""
        v = self.value(node)
        if not v.untyped or not isinstance(v.lit, int) or isinstance(v.lit, bool) or v.lit <= 0:
            what = "the length of a threadgroup array" if d is None else f"dimension {d} of a threadgroup array's shape"
            raise self.error(call, f"{what} must be a positive integer known at compile time")
        return v.lit

    def _assign_name(self, name, val, node):
        if name in self.loop_vars:
            raise self.error(node, f"`{name}` is the variable of an enclosing loop; it cannot be assigned in the loop")
        sym = self.symbols.get(name)
        if sym is None:
            if val.untyped:
                ty = _default_type(val.lit)
                val = self._materialize(val, ty, node)
            ty = val.ty
            var = len(self.locals)
            ir_name = self._ir_name(name)
            self.locals.append({"name": ir_name, "ty": ty.ir()})
            sym = LocalSym(var, ty, val.decay, node.lineno, ir_name)
            self.symbols[name] = sym
        elif isinstance(sym, LocalSym):
            conv = self._materialize(val, sym.ty, node, strict=False)
            if conv is None:
                raise self.error(
                    node,
                    f"`{name}` is {sym.ty} (first assigned at line {sym.line}) but this value is {val.ty}; "
                    f"a variable keeps one type — convert with enigma.{sym.ty.msl_name if sym.ty.is_vector else sym.ty.name}(...) "
                    "or use another name",
                )
            val = conv
        elif isinstance(sym, MemRef):
            raise self.error(node, f"`{name}` is a {'buffer parameter' if sym.param is not None else 'threadgroup array'}; store to an element (`{name}[i] = ...`)")
        elif isinstance(sym, ValueParamSym):
            raise self.error(node, f"`{name}` is a by-value parameter; it cannot be assigned")
        elif isinstance(sym, TexRef):
            raise self.error(node, f"`{name}` is a texture; write a texel with `{name}.write(value, coord)`")
        else:
            raise self.error(node, f"`{name}` is a specialisation constant; it cannot be assigned")
        self.emit({"assign": {"var": sym.var, "value": val.expr}}, node)
        if self.defined is not None:
            self.defined.add(name)

    def _store(self, mem, index, val, node):
        conv = self._materialize(val, mem.elem, node, strict=False)
        if conv is None:
            raise self.error(node, f"`{mem.name}` holds {mem.elem} but the value stored is {val.ty}; convert it with enigma.{mem.elem.msl_name if mem.elem.is_vector else mem.elem.name}(...)")
        if mem.param is not None:
            if self.explicit_access.get(mem.param) == "read":
                raise self.error(node, f"buffer `{mem.name}` is declared read-only (enigma.buffer(..., access=\"read\")); it cannot be written")
            self.written.add(mem.param)
        self.emit({"store": {"mem": mem.mem, "index": index, "value": conv.expr}}, node)

    # --- control flow ----------------------------------------------------
    def _with_kind(self, node):
        if len(node.items) != 1:
            return None
        ctx = node.items[0].context_expr
        func = ctx.func if isinstance(ctx, ast.Call) else ctx
        try:
            callee = self.expr(func)
        except CompileError:
            return None
        if isinstance(callee, PyObj) and isinstance(callee.obj, Intrinsic) and callee.obj.name in ("if_", "elif_", "else_", "for_range"):
            return callee.obj.name
        return None

    def _with(self, node):
        kind = self._with_kind(node)
        if kind is None:
            raise self.error(node, "only `with enigma.if_(cond):`, `with enigma.elif_(cond):`, `with enigma.else_():` and `with enigma.for_range(start, end[, step]) as i:` are supported")
        item = node.items[0]
        call = item.context_expr
        if not isinstance(call, ast.Call):
            raise self.error(node, f"write `with enigma.{kind}(...)`")
        if kind != "for_range" and item.optional_vars is not None:
            raise self.error(node, f"`with enigma.{kind}(...)` takes no `as` target")
        if kind == "if_":
            args = self._bind(call, "if_", ["cond"], 1)
            cond = self._cond(args["cond"])
            before = self.defined
            then_body, then_def = self._sub_block(node.body, before)
            stmt = self.emit({"if": {"cond": cond, "then_body": then_body, "else_body": []}}, node)
            self.defined = _join(then_def, before)
            self.last_if = _IfRecord(stmt, then_def, before, None)
        elif kind in ("else_", "elif_"):
            rec = self.last_if
            if rec is None:
                raise self.error(node, f"`with enigma.{kind}(...)` must come right after a `with enigma.if_(...)` or `with enigma.elif_(...)` block")
            target = rec.stmt["kind"]["if"]
            if kind == "else_":
                self._bind(call, "else_", [], 0)
                else_body, else_def = self._sub_block(node.body, rec.before_defined)
                target["else_body"] = else_body
                self.last_if = None
                result = else_def
            else:
                args = self._bind(call, "elif_", ["cond"], 1)
                saved = (self.block, self.defined)
                self.block, self.defined = [], (None if rec.before_defined is None else set(rec.before_defined))
                cond = self._cond(args["cond"])  # hoisted parts go into the else branch
                inner_before = self.defined
                then_body, then_def = self._sub_block(node.body, inner_before)
                stmt = self.emit({"if": {"cond": cond, "then_body": then_body, "else_body": []}}, node)
                else_block = self.block
                self.block, self.defined = saved
                target["else_body"] = else_block
                new_rec = _IfRecord(stmt, then_def, inner_before, rec)
                self.last_if = new_rec
                result = _join(then_def, inner_before)
            # Recompute what is definitely assigned after the whole chain.
            r = rec
            while r is not None:
                result = _join(r.then_defined, result)
                r = r.parent
            self.defined = result
        else:
            if item.optional_vars is None or not isinstance(item.optional_vars, ast.Name):
                raise self.error(node, "write `with enigma.for_range(start, end[, step]) as i:`")
            args = self._range_args(call, "for_range")
            self._for_loop(item.optional_vars.id, args, node.body, node)

    def _if(self, node):
        cond = self._cond(node.test)
        before = self.defined
        then_body, then_def = self._sub_block(node.body, before)
        if node.orelse:
            else_body, else_def = self._sub_block(node.orelse, before)
        else:
            else_body, else_def = [], before
        self.emit({"if": {"cond": cond, "then_body": then_body, "else_body": else_body}}, node)
        self.defined = _join(then_def, else_def)

    def _for(self, node):
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported")
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "the loop variable must be a plain name")
        it = node.iter
        callee = self.expr(it.func) if isinstance(it, ast.Call) else None
        if not (isinstance(callee, PyObj) and (callee.obj is _py_builtins.range or (isinstance(callee.obj, Intrinsic) and callee.obj.name == "for_range"))):
            raise self.error(node, "only `for i in range(start, end[, step])` (or enigma.for_range) loops are supported; iterating over a Python object is not")
        args = self._range_args(it, "range")
        self._for_loop(node.target.id, args, node.body, node)

    def _range_args(self, call, what):
        if call.keywords:
            raise self.error(call, f"{what}() takes positional arguments only")
        n = len(call.args)
        if n == 1:
            start, end, step = untyped(0), self.value(call.args[0]), untyped(1)
        elif n in (2, 3):
            start, end = self.value(call.args[0]), self.value(call.args[1])
            step = self.value(call.args[2]) if n == 3 else untyped(1)
        else:
            raise self.error(call, f"{what}() takes 1 to 3 arguments")
        if step.untyped and (not isinstance(step.lit, int) or step.lit <= 0):
            raise self.error(call, f"the step of {what}() must be a positive integer (loops count up: `i < end`)")
        return start, end, step

    def _for_loop(self, name, args, body, node):
        start, end, step = (self._decay(v) for v in args)
        sym = self.symbols.get(name)
        if sym is not None and not isinstance(sym, LocalSym):
            raise self.error(node, f"`{name}` is already a parameter, array or constant; the loop variable needs its own name")
        if isinstance(sym, LocalSym):
            ty = sym.ty
        else:
            typed = [v.ty for v in (start, end, step) if not v.untyped]
            ty = typed[0] if typed else None
            for t in typed[1:]:
                ty = _usual(ty, t)
            if ty is None:
                ty = _default_type(max(abs(start.lit), abs(end.lit)) if all(isinstance(v.lit, int) for v in (start, end)) else 0)
        if ty.is_vector or not ty.is_int:
            raise self.error(node, f"the loop variable `{name}` must be an integer; its bounds are {ty}")
        start_e, end_e, step_e = (self._convert(v, ty, node).expr for v in (start, end, step))
        if sym is None:
            var = len(self.locals)
            ir_name = self._ir_name(name)
            self.locals.append({"name": ir_name, "ty": ty.ir()})
            sym = LocalSym(var, ty, False, node.lineno, ir_name)
            self.symbols[name] = sym
        before = self.defined
        inner = None if before is None else set(before) | {name}
        self.loop_vars.append(name)
        self.loop_depth += 1
        try:
            body_block, _ = self._sub_block(body, inner)
        finally:
            self.loop_vars.pop()
            self.loop_depth -= 1
        self.emit({"for": {"var": sym.var, "start": start_e, "end": end_e, "step": step_e, "body": body_block}}, node)
        self.defined = None if before is None else set(before) - {name}

    def _while(self, node):
        if node.orelse:
            raise self.error(node, "`while ... else` is not supported")
        saved = self.no_hoist
        self.no_hoist = "a `while` condition (it is evaluated before every iteration)"
        try:
            cond = self._cond(node.test)
        finally:
            self.no_hoist = saved
        before = self.defined
        self.loop_depth += 1
        try:
            body_block, _ = self._sub_block(node.body, before)
        finally:
            self.loop_depth -= 1
        self.emit({"while": {"cond": cond, "body": body_block}}, node)
        self.defined = None if before is None else set(before)

    def _cond(self, node):
        v = self._decay(self.value(node))
        if v.untyped:
            if isinstance(v.lit, bool):
                return _lit(v.lit, bool_)
            raise self.error(node, f"a condition must be a bool; got the constant {v.lit!r}")
        if v.ty != bool_:
            raise self.error(node, f"a condition must be a bool, not {v.ty}; compare explicitly (e.g. enigma.cmp_ne(x, 0))")
        return v.expr

    def _barrier(self, name, call):
        args = self._bind(call, name, ["mem_flags"], 0)
        flags = "mem_threadgroup" if name != "simdgroup_barrier" else "mem_none"
        if "mem_flags" in args:
            f = self.expr(args["mem_flags"])
            if isinstance(f, PyObj) and isinstance(f.obj, str):
                flags = f.obj
            else:
                raise self.error(call, "mem_flags must be a string: \"mem_none\", \"mem_threadgroup\", \"mem_device\", \"mem_device|mem_threadgroup\" or \"mem_texture\"")
        key = flags.replace(" ", "").replace("mem_flags::", "")
        if key not in _lang.MEM_FLAGS:
            raise self.error(call, f"unknown mem_flags {flags!r}; expected \"mem_none\", \"mem_threadgroup\", \"mem_device\", \"mem_device|mem_threadgroup\" or \"mem_texture\"")
        scope = "simdgroup" if name == "simdgroup_barrier" else "threadgroup"
        self.emit({"barrier": {"scope": scope, "flags": _lang.MEM_FLAGS[key]}}, call)

    # --- hoisted statements ---------------------------------------------
    def _temp(self, ty, node, base):
        if self.no_hoist:
            raise self.error(node, f"{base} cannot be used in {self.no_hoist}; compute it into a variable first")
        self.temp_counter += 1
        var = len(self.locals)
        self.locals.append({"name": self._ir_name(f"{base}_{self.temp_counter}"), "ty": ty.ir()})
        return var

    def _atomic(self, name, call, want_result):
        op = name[len("atomic_"):]
        if op == "compare_exchange":
            args = self._bind(call, name, ["buffer", "index", "expected", "desired"], 4)
        else:
            args = self._bind(call, name, ["buffer", "index", "value"], 3)
        mem = self.expr(args["buffer"])
        if not isinstance(mem, MemRef):
            raise self.error(call, f"the first argument of enigma.{name} must be a buffer or threadgroup array")
        index = self._index(args["index"], mem, call)
        result = self._temp(mem.elem, call, "atomic") if want_result else None
        if mem.param is not None:
            self.written.add(mem.param)
        if op == "compare_exchange":
            exp = self._convert(self.value(args["expected"]), mem.elem, call).expr
            des = self._convert(self.value(args["desired"]), mem.elem, call).expr
            self.emit({"atomic_compare_exchange": {"mem": mem.mem, "index": index, "expected": exp, "desired": des, "result": result}}, call)
        else:
            value = self._convert(self.value(args["value"]), mem.elem, call).expr
            self.emit({"atomic": {"op": op, "mem": mem.mem, "index": index, "value": value, "result": result}}, call)
        return Val({"var": result}, mem.elem) if want_result else None

    # ---- SIMD-group matrices -------------------------------------------------

    def _matrix_type_arg(self, node):
        t = self.expr(node)
        if isinstance(t, PyObj) and isinstance(t.obj, MatrixType):
            return t.obj
        raise self.error(node, "expected a SIMD-group matrix type, e.g. enigma.simdgroup_matrix(enigma.f16, 8, 8)")

    def _matrix_value(self, node, what, name):
        v = self.value(node)
        if v.untyped or not isinstance(v.ty, MatrixType):
            raise self.error(node, f"{what} of enigma.{name} must be a SIMD-group matrix, not {v.ty if not v.untyped else repr(v.lit)}")
        return v

    def _u32_arg(self, node, what, name):
        v = self._decay(self.value(node))
        if v.untyped:
            if not isinstance(v.lit, int) or isinstance(v.lit, bool) or not 0 <= v.lit < (1 << 32):
                raise self.error(node, f"the {what} of enigma.{name} must be a u32, not {v.lit!r}")
            return _lit(v.lit, u32)
        if v.ty != u32:
            raise self.error(node, f"the {what} of enigma.{name} must be a u32, not {v.ty}; convert with enigma.u32(...)")
        return v.expr

    def _matrix_memory(self, node, name):
        mem = self.expr(node)
        if not isinstance(mem, MemRef):
            raise self.error(node, f"the memory of enigma.{name} must be a buffer or threadgroup array")
        return mem

    def _transpose_arg(self, node, name):
        t = self.expr(node)
        if isinstance(t, Val) and t.untyped and isinstance(t.lit, bool):
            return t.lit
        raise self.error(node, f"`transpose` of enigma.{name} must be True or False (a constant)")

    def _matrix_fill(self, ty, value_node, diagonal, node):
        v = self._convert(self.value(value_node), ty.scalar_type, node)
        return Val({"matrix_fill": {"ty": ty.ir(), "value": v.expr, "diagonal": diagonal}}, ty)

    def _matrix_call(self, name, node):
        if name == "simdgroup_store":
            raise self.error(node, "enigma.simdgroup_store(...) is a statement; it has no value")
        if name == "make_filled_simdgroup_matrix":
            args = self._bind(node, name, ["type", "value"], 2)
            return self._matrix_fill(self._matrix_type_arg(args["type"]), args["value"], False, node)
        if name == "simdgroup_load":
            args = self._bind(node, name, ["type", "src", "offset", "elements_per_row", "transpose"], 4)
            ty = self._matrix_type_arg(args["type"])
            mem = self._matrix_memory(args["src"], name)
            transpose = self._transpose_arg(args["transpose"], name) if "transpose" in args else False
            offset = self._u32_arg(args["offset"], "offset", name)
            stride = self._u32_arg(args["elements_per_row"], "elements_per_row", name)
            return Val({"matrix_load": {"ty": ty.ir(), "mem": mem.mem, "offset": offset, "stride": stride, "transpose": transpose}}, ty)
        if name in ("simdgroup_multiply", "simdgroup_multiply_accumulate"):
            acc = name == "simdgroup_multiply_accumulate"
            args = self._bind(node, name, ["a", "b", "c"] if acc else ["a", "b"], 3 if acc else 2)
            a = self._matrix_value(args["a"], "the first argument", name)
            b = self._matrix_value(args["b"], "the second argument", name)
            if a.ty.cols != b.ty.rows or a.ty.scalar != b.ty.scalar:
                raise self.error(node, f"enigma.{name}: {a.ty} times {b.ty}: the inner sides and the element types must match")
            if not acc:
                ty = MatrixType(a.ty.scalar_type, a.ty.rows, b.ty.cols)
                return Val({"matrix_multiply": {"a": a.expr, "b": b.expr, "acc": None}}, ty)
            c = self._matrix_value(args["c"], "the accumulator", name)
            if (c.ty.rows, c.ty.cols) != (a.ty.rows, b.ty.cols) or c.ty.scalar not in (a.ty.scalar, "f32"):
                raise self.error(node, f"enigma.{name}: {a.ty} times {b.ty} accumulates into a {a.ty.rows}×{b.ty.cols} matrix of {a.ty.scalar} or f32, not {c.ty}")
            return Val({"matrix_multiply": {"a": a.expr, "b": b.expr, "acc": c.expr}}, c.ty)
        # thread_element(m, i), thread_element_row(T, i), thread_element_col(T, i)
        first = "matrix" if name == "thread_element" else "type"
        args = self._bind(node, name, [first, "index"], 2)
        if name == "thread_element":
            m = self._matrix_value(args["matrix"], "the first argument", name)
            ty = m.ty
        else:
            ty = self._matrix_type_arg(args["type"])
        i = self.value(args["index"])
        if not (i.untyped and isinstance(i.lit, int) and not isinstance(i.lit, bool) and 0 <= i.lit < ty.per_lane):
            raise self.error(node, f"the index of enigma.{name} must be a constant from 0 to {ty.per_lane - 1} (each lane holds {ty.per_lane} elements of a {ty})")
        if name == "thread_element":
            return Val({"matrix_element": {"matrix": m.expr, "index": i.lit}}, ty.scalar_type)
        return Val({"matrix_coord": {"ty": ty.ir(), "index": i.lit, "column": name == "thread_element_col"}}, u32)

    def _matrix_store(self, call):
        name = "simdgroup_store"
        args = self._bind(call, name, ["matrix", "dst", "offset", "elements_per_row", "transpose"], 4)
        m = self._matrix_value(args["matrix"], "the first argument", name)
        mem = self._matrix_memory(args["dst"], name)
        if mem.param is not None:
            self.written.add(mem.param)
        transpose = self._transpose_arg(args["transpose"], name) if "transpose" in args else False
        offset = self._u32_arg(args["offset"], "offset", name)
        stride = self._u32_arg(args["elements_per_row"], "elements_per_row", name)
        self.emit({"matrix_store": {"value": m.expr, "mem": mem.mem, "offset": offset, "stride": stride, "transpose": transpose}}, call)

    def _load_if(self, call):
        args = self._bind(call, "load_if", ["buffer", "index", "cond", "default"], 4)
        mem = self.expr(args["buffer"])
        if not isinstance(mem, MemRef):
            raise self.error(call, "the first argument of enigma.load_if must be a buffer or threadgroup array")
        index = self._index(args["index"], mem, call)
        cond = self._cond(args["cond"])
        default = self._convert(self.value(args["default"]), mem.elem, call)
        var = self._temp(mem.elem, call, "load_if")
        self.emit({"assign": {"var": var, "value": default.expr}}, call)
        load = {"load": {"mem": mem.mem, "index": index}}
        self.emit({"if": {"cond": cond, "then_body": [{"kind": {"assign": {"var": var, "value": load}}, "loc": {"file": self.file, "line": call.lineno}}], "else_body": []}}, call)
        return Val({"var": var}, mem.elem)

    def _ternary(self, node):
        """``a if c else b``: evaluates only the branch taken (like C's ?:)."""
        cond = self._cond(node.test)
        if self.no_hoist:
            raise self.error(node, f"a conditional expression cannot be used in {self.no_hoist}; compute it into a variable first")
        saved = self.block
        self.block = []
        a = self._decay(self.value(node.body))
        then_block = self.block
        self.block = []
        b = self._decay(self.value(node.orelse))
        else_block = self.block
        self.block = saved
        a, b, ty = self._unify(a, b, node)
        if ty is None:
            ty = _default_type(a.lit if not isinstance(b.lit, float) else b.lit)
            a, b = self._materialize(a, ty, node), self._materialize(b, ty, node)
        var = self._temp(ty, node, "select")
        loc = {"file": self.file, "line": node.lineno}
        then_block.append({"kind": {"assign": {"var": var, "value": a.expr}}, "loc": loc})
        else_block.append({"kind": {"assign": {"var": var, "value": b.expr}}, "loc": loc})
        self.emit({"if": {"cond": cond, "then_body": then_block, "else_body": else_block}}, node)
        return Val({"var": var}, ty)

    def _spec(self, call):
        args = self._bind(call, "spec", ["name", "type", "default"], 3)
        name = self.expr(args["name"])
        if not (isinstance(name, PyObj) and isinstance(name.obj, str)):
            raise self.error(call, "the name of a specialisation constant must be a string literal")
        name = name.obj
        ty = self._type_arg(args["type"])
        if ty.is_vector:
            raise self.error(call, "specialisation constants are scalars")
        default = self.value(args["default"])
        if not default.untyped:
            raise self.error(call, "the default of a specialisation constant must be a constant number")
        for i, s in enumerate(self.spec_constants):
            if s["name"] == name:
                if s["ty"] != ty.scalar:
                    raise self.error(call, f"specialisation constant `{name}` is declared twice with different types")
                return Val({"spec": i}, ty)
        if not _enigma.is_valid_identifier(name) or name in self.taken:
            raise self.error(call, f"`{name}` cannot name a specialisation constant (not a valid identifier, reserved, or already used)")
        self.taken.add(name)
        lit = self._materialize(default, ty, call)
        self.spec_constants.append({"name": name, "ty": ty.scalar, "default": lit.expr["literal"]})
        return Val({"spec": len(self.spec_constants) - 1}, ty)

    # --- expressions -----------------------------------------------------
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

    def value(self, node) -> Val:
        r = self.expr(node)
        if isinstance(r, Val):
            return r
        if isinstance(r, MemRef):
            raise self.error(node, f"`{r.name}` is a {'buffer' if r.param is not None else 'threadgroup array'}; index it (`{r.name}[i]`) to read an element")
        if isinstance(r, TexRef):
            raise self.error(node, f"`{r.name}` is a texture; read a texel with `{r.name}.read(coord)`")
        obj = r.obj
        if isinstance(obj, Builtin):
            return self._builtin(obj, None, node)
        if isinstance(obj, DType):
            raise self.error(node, f"the type {obj!r} is not a value; call it to convert (e.g. {obj!r}(x))")
        if isinstance(obj, Intrinsic):
            raise self.error(node, f"enigma.{obj.name} is a function; call it")
        name = getattr(obj, "__name__", type(obj).__name__)
        raise self.error(node, f"`{name}` ({type(obj).__name__}) is a Python object that has no value inside a kernel (only numbers, enigma's names and kernel variables do)")

    def expr(self, node):
        self.line = getattr(node, "lineno", self.line)
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise self.error(node, _TOO_DEEP)
            return self._expr(node)
        finally:
            self.depth -= 1

    def _expr(self, node):
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, (bool, int, float)):
                return untyped(v)
            if isinstance(v, str):
                return PyObj(v)
            raise self.error(node, f"the constant {v!r} is not supported in a kernel")
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.error(node, f"the operator {type(node.op).__name__} is not supported")
            return self._binop(op, self.value(node.left), self.value(node.right), node)
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise self.error(node, "chained comparisons (a < b < c) are not supported; combine two comparisons with `and`")
            op = _CMPOPS.get(type(node.ops[0]))
            if op is None:
                raise self.error(node, f"the comparison `{type(node.ops[0]).__name__}` is not supported (use ==, !=, <, <=, >, >=)")
            return self._binop(op, self.value(node.left), self.value(node.comparators[0]), node)
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            acc = self.value(node.values[0])
            for v in node.values[1:]:
                acc = self._binop(op, acc, self.value(v), node)
            return acc
        if isinstance(node, ast.IfExp):
            return self._ternary(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if type(node) in _UNSUPPORTED_EXPRS:
            raise self.error(node, f"{_UNSUPPORTED_EXPRS[type(node)]} is not supported in a kernel")
        raise self.error(node, f"the expression `{type(node).__name__}` is not supported in a kernel")

    def _name(self, node):
        n = node.id
        sym = self.symbols.get(n)
        if sym is None and n in self.assigned_names:
            raise self.error(node, f"`{n}` is read before it is assigned")
        if isinstance(sym, LocalSym):
            if self.defined is not None and n not in self.defined:
                raise self.error(
                    node,
                    f"`{n}` may be read before it is assigned: it is assigned (first at line {sym.line}) only on some paths "
                    "(inside an if_ or a loop); assign it before that block to use it here",
                )
            return Val({"var": sym.var}, sym.ty, decay=sym.decay)
        if isinstance(sym, (MemRef, TexRef)):
            return sym
        if isinstance(sym, ValueParamSym):
            return Val({"param": sym.index}, sym.ty)
        if isinstance(sym, SpecSym):
            return Val({"spec": sym.index}, sym.ty)
        if n in self.closure:
            obj = self.closure[n]
        elif n in self.fn.__globals__:
            obj = self.fn.__globals__[n]
        elif hasattr(_py_builtins, n):
            obj = getattr(_py_builtins, n)
        else:
            raise self.error(node, f"name `{n}` is not defined")
        return self._classify(obj, node)

    def _classify(self, obj, node):
        if isinstance(obj, bool):
            return untyped(obj)
        if isinstance(obj, numbers.Integral):
            return untyped(int(obj))
        if isinstance(obj, numbers.Real):
            return untyped(float(obj))
        return PyObj(obj)

    def _attribute(self, node):
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, PyObj):
            obj = base.obj
            if isinstance(obj, Builtin) and attr in ("x", "y", "z"):
                return self._builtin(obj, _COMPONENTS[attr], node)
            if isinstance(obj, (Intrinsic, DType)):
                raise self.error(node, f"{obj!r} has no attribute `{attr}` in a kernel")
            if not isinstance(obj, (_pytypes.ModuleType, _lang._FastNamespace, type)) and not hasattr(obj, "__dict__"):
                raise self.error(node, f"attribute `{attr}` of a {type(obj).__name__} cannot be used in a kernel")
            try:
                return self._classify(getattr(obj, attr), node)
            except AttributeError:
                raise self.error(node, f"{getattr(obj, '__name__', type(obj).__name__)} has no attribute `{attr}`") from None
        if isinstance(base, MemRef):
            raise self.error(node, f"`{base.name}` has no attribute `{attr}`")
        if isinstance(base, TexRef):
            if attr not in ("read", "write", "sample", "fence", "get_width", "get_height"):
                raise self.error(node, f"texture `{base.name}` has no method `{attr}` (it has read, write, sample, fence, get_width and get_height)")
            return PyObj(TexMethod(base, attr))
        v = base
        if v.untyped or not v.ty.is_vector:
            raise self.error(node, f"`.{attr}` needs a vector; this value is {v.ty or 'a constant'}")
        idx = [_COMPONENTS.get(c) for c in attr]
        if any(i is None for i in idx) or len(idx) > 4 or (len(set(attr) & set("xyzw")) and len(set(attr) & set("rgba"))):
            raise self.error(node, f"`.{attr}` is not a vector component or swizzle (x, y, z, w / r, g, b, a)")
        if any(i >= v.ty.width for i in idx):
            raise self.error(node, f"`.{attr}`: a {v.ty} has {v.ty.width} components")
        if len(idx) == 1:
            return Val(_extract(v.expr, idx[0]), v.ty.scalar_type)
        ty = DType(v.ty.scalar, len(idx))
        return Val({"vector": {"ty": ty.ir(), "components": [_extract(v.expr, i) for i in idx]}}, ty)

    def _builtin(self, b, axis, node):
        if axis is None:
            if b.vector:
                return Val({"builtin": b.name}, DType("u32", 3), decay=True)
            return Val({"builtin": b.name}, u32)
        if not b.vector:
            raise self.error(node, f"enigma.{b.name} is a scalar (uint); it takes no axis")
        return Val(_extract({"builtin": b.name}, axis), u32)

    def _texture_coord(self, tex, node):
        """A texture coordinate: a ``uint2`` value, or a pair ``(x, y)`` of integers."""
        if isinstance(node, (ast.Tuple, ast.List)):
            if len(node.elts) != 2:
                raise self.error(node, f"a coordinate of texture `{tex.name}` has two components (x, y), not {len(node.elts)}")
            comps = [self._convert(self._decay(self.value(e)), u32, node).expr for e in node.elts]
            return {"vector": {"ty": DType("u32", 2).ir(), "components": comps}}
        c = self._decay(self.value(node))
        if c.untyped or c.ty != DType("u32", 2):
            raise self.error(node, f"a coordinate of texture `{tex.name}` is a uint2 or a pair (x, y), not {c.ty or 'a constant'}")
        return c.expr

    def _texture_call(self, m, node):
        """``tex.read(coord)``, ``tex.get_width()``, ``tex.get_height()``."""
        tex = m.tex
        if m.method in ("write", "fence"):
            raise self.error(node, f"`{tex.name}.{m.method}(...)` is a statement; it has no value")
        if m.method in ("get_width", "get_height"):
            self._bind(node, f"{tex.name}.{m.method}", [], 0, prefix="")
            return Val({"texture_size": {"tex": tex.index, "dim": m.method[4:]}}, u32)
        if m.method == "sample":
            return self._texture_sample(tex, node)
        args = self._bind(node, f"{tex.name}.read", ["coord"], 1, prefix="")
        coord = self._texture_coord(tex, args["coord"])
        return Val({"texture_read": {"tex": tex.index, "coord": coord}}, DType(tex.texel.scalar, 4))

    def _texture_sample(self, tex, node):
        """``tex.sample(sampler, uv)``: ``sampler`` an ``enigma.sampler`` (made
        outside the kernel or in the call, with constant arguments), ``uv`` a
        ``float2`` or a pair ``(u, v)``. Validation checks the texel type and
        the access."""
        args = self._bind(node, f"{tex.name}.sample", ["sampler", "uv"], 2, prefix="")
        s = args["sampler"]
        if isinstance(s, ast.Call) and isinstance(self.expr(s.func), PyObj) and self.expr(s.func).obj is _lang.sampler:
            try:
                consts = [ast.literal_eval(a) for a in s.args], {k.arg: ast.literal_eval(k.value) for k in s.keywords}
            except (ValueError, SyntaxError):
                raise self.error(s, "enigma.sampler(...) in a kernel takes string constants; make a sampler from variables outside the kernel") from None
            try:
                made = _lang.sampler(*consts[0], **consts[1])
            except (ValueError, TypeError) as e:
                raise self.error(s, str(e)) from None
        else:
            made = self.expr(s)
            if isinstance(made, PyObj):
                made = made.obj
            elif isinstance(made, Val):
                made = f"the constant {made.lit!r}" if made.untyped else f"a {made.ty} value"
        if not isinstance(made, _lang.Sampler):
            what = made if isinstance(made, str) else repr(made)
            raise self.error(s, f"the first argument of `{tex.name}.sample` is an enigma.sampler(...), not {what}")
        f2 = DType("f32", 2)
        if isinstance(args["uv"], (ast.Tuple, ast.List)) and len(args["uv"].elts) == 2:
            uv = {"vector": {"ty": f2.ir(), "components": [self._convert(self._decay(self.value(e)), f32, node).expr for e in args["uv"].elts]}}
        else:
            v = self._decay(self.value(args["uv"]))
            if v.untyped or v.ty != f2:
                raise self.error(node, f"the coordinate of `{tex.name}.sample` is a float2 or a pair (u, v), not {v.ty or 'a constant'}")
            uv = v.expr
        return Val({"texture_sample": {"tex": tex.index, "sampler": made.ir(), "uv": uv}}, DType(tex.texel.scalar, 4))

    def _texture_write(self, tex, call):
        """``tex.write(value, coord)``: ``value`` is four texels, or one to splat."""
        args = self._bind(call, f"{tex.name}.write", ["value", "coord"], 2, prefix="")
        ty = DType(tex.texel.scalar, 4)
        v = self._decay(self.value(args["value"]))
        if v.untyped or not v.ty.is_vector:
            value = {"vector": {"ty": ty.ir(), "components": [self._convert(v, tex.texel, call).expr]}}
        elif v.ty == ty:
            value = v.expr
        else:
            raise self.error(call, f"`{tex.name}.write` takes four texels ({ty}, or one {tex.texel} to splat), not {v.ty}")
        coord = self._texture_coord(tex, args["coord"])
        self.emit({"texture_write": {"tex": tex.index, "value": value, "coord": coord}}, call)

    def _subscript(self, node):
        base = self.expr(node.value)
        if isinstance(base, MemRef):
            index = self._index(node.slice, base, node)
            return Val({"load": {"mem": base.mem, "index": index}}, base.elem)
        if isinstance(base, Val) and not base.untyped and base.ty.is_vector:
            i = self.value(_slice_node(node.slice))
            if not i.untyped or not isinstance(i.lit, int) or not 0 <= i.lit < base.ty.width:
                raise self.error(node, f"a vector component index must be a constant 0..{base.ty.width - 1}")
            return Val(_extract(base.expr, i.lit), base.ty.scalar_type)
        if isinstance(base, PyObj) and isinstance(base.obj, Builtin) and base.obj.vector:
            i = self.value(_slice_node(node.slice))
            if i.untyped and isinstance(i.lit, int) and 0 <= i.lit < 3:
                return self._builtin(base.obj, i.lit, node)
        raise self.error(node, "only buffers, threadgroup arrays and vectors can be indexed")

    def _index(self, slice_node, mem, node):
        """The flat index (IR) of ``mem[slice]``: one index, or one per
        dimension of ``mem``'s shape — each checked against its dimension
        (``dim_check``), combined row-major (``(i·m + j)·p + k``)."""
        s = _slice_node(slice_node)
        subs = s.elts if isinstance(s, ast.Tuple) else [s]
        if any(isinstance(e, (ast.Slice, ast.Starred)) for e in subs):
            raise self.error(node, f"`{mem.name}` is indexed one element at a time (no slices)")
        shape = mem.shape
        if len(subs) > 1 and shape is None:
            kind = (
                f"declare one: `{mem.name}: enigma.buffer({mem.elem!r}, shape=(\"n\", \"m\"))` with by-value n, m"
                if mem.param is not None else f"allocate it with one: `enigma.threadgroup_alloc({mem.elem!r}, (R, C))`"
            )
            raise self.error(node, f"`{mem.name}` has no shape, so it takes one integer index, not {len(subs)}; to index it per dimension, {kind}")
        if shape is not None and len(subs) != len(shape) and not (len(subs) == 1 and len(shape) > 1):
            raise self.error(
                node,
                f"`{mem.name}` has {len(shape)} dimension(s) (shape {self._shape_text(shape)}) but {len(subs)} indices were given; "
                f"index it with {len(shape)} ({mem.name}[{', '.join('ijklmn'[:len(shape)])}]) or with one flat index",
            )
        if shape is None or len(subs) != len(shape):
            flat = self._index_value(subs[0], mem, None, node)  # the flat form
        else:
            flat = None
            for d, sub in enumerate(subs):
                checked = self._checked_subscript(sub, mem, d, node)
                if flat is None or (flat.untyped and flat.lit == 0):
                    flat = checked
                else:
                    flat = self._binop("add", self._binop("mul", flat, self._shape_size(mem, d, node), node), checked, node)
        return _index_expr(flat)

    def _index_value(self, sub, mem, d, node):
        """One index (``d``: its dimension, None for a flat index) as a Val:
        a non-negative constant or an integer scalar."""
        what = f"the index into `{mem.name}`" if d is None else f"index {d} of `{mem.name}`"
        v = self._decay(self.value(sub))
        if v.untyped:
            if not isinstance(v.lit, int) or isinstance(v.lit, bool) or v.lit < 0:
                raise self.error(node, f"{what} must be a non-negative integer, not {v.lit!r}")
            return v
        if v.ty.is_vector or not v.ty.is_int:
            raise self.error(node, f"{what} must be an integer scalar, not {v.ty}")
        return v

    def _checked_subscript(self, sub, mem, d, node):
        """Subscript ``d`` of ``mem[...]``, wrapped in a check against the
        size of dimension ``d`` (at compile time when both are constants)."""
        v = self._index_value(sub, mem, d, node)
        size = self._shape_size(mem, d, node)
        if size is None:
            return v  # an open first dimension: the flat bounds check covers it
        if v.untyped and size.untyped:
            if v.lit >= size.lit:
                raise self.error(node, f"index {v.lit} of dimension {d} of `{mem.name}` is out of bounds (size {size.lit})")
            return v
        ty = v.ty if not v.untyped else _index_type(v.lit)
        check = {"dim_check": {"mem": mem.mem, "dim": d, "index": _index_expr(v), "size": _index_expr(size)}}
        return Val(check, ty)

    @staticmethod
    def _shape_text(shape):
        return "(" + ", ".join("None" if e is None else str(e) for e in shape) + ("," if len(shape) == 1 else "") + ")"

    def _shape_size(self, mem, d, node):
        """The size of dimension ``d`` of ``mem`` as a Val (None for an
        open first dimension): a constant, or a by-value parameter or
        specialisation constant that the shape names."""
        entry = mem.shape[d]
        if entry is None or isinstance(entry, int):
            return None if entry is None else untyped(entry)
        node = mem.decl or node  # what is wrong is in the declaration
        where = f"`{entry}` in the shape of `{mem.name}`"
        sym = self.symbols.get(entry)
        if isinstance(sym, (ValueParamSym, SpecSym)):
            if sym.ty.is_vector or not sym.ty.is_int:
                raise self.error(node, f"{where} is {sym.ty}; the size of a dimension is an integer")
            return Val({"param": sym.index} if isinstance(sym, ValueParamSym) else {"spec": sym.index}, sym.ty)
        if sym is not None:
            kind = "a local variable" if isinstance(sym, LocalSym) else "a buffer or threadgroup array"
            raise self.error(
                node,
                f"{where} is {kind}; the size of a dimension is a by-value parameter (enigma.constant(enigma.u32)), "
                "a specialisation constant or a constant int",
            )
        if entry in self.closure:
            obj = self.closure[entry]
        elif entry in self.fn.__globals__:
            obj = self.fn.__globals__[entry]
        else:
            raise self.error(
                node,
                f"{where} is not defined: name a by-value parameter (enigma.constant(enigma.u32)), a specialisation "
                "constant (enigma.spec) assigned before the first access, or a module constant",
            )
        if not isinstance(obj, numbers.Integral) or isinstance(obj, bool) or int(obj) <= 0:
            raise self.error(node, f"{where} is {obj!r}; the size of a dimension is a positive integer")
        return untyped(int(obj))

    def _unary(self, node):
        v = self.value(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Not):
            v = self._decay(v)
            if v.untyped:
                return untyped(not v.lit)
            if v.ty.scalar != "bool":
                raise self.error(node, f"`not` needs a bool, not {v.ty}")
            return Val({"unary": {"op": "not", "arg": v.expr}}, v.ty)
        if isinstance(node.op, ast.USub):
            if v.untyped:
                if isinstance(v.lit, bool):
                    raise self.error(node, "`-` of a bool")
                return untyped(-v.lit)
            v = self._decay(v)
            if not (v.ty.is_float or v.ty.is_signed):
                raise self.error(node, f"`-` is not defined for {v.ty} (unsigned or bool); convert to a signed or float type first")
            return Val({"unary": {"op": "neg", "arg": v.expr}}, v.ty)
        if isinstance(node.op, ast.Invert):
            if v.untyped:
                if not isinstance(v.lit, int) or isinstance(v.lit, bool):
                    raise self.error(node, "`~` needs an integer")
                return untyped(~v.lit)
            v = self._decay(v)
            if not v.ty.is_int:
                raise self.error(node, f"`~` is not defined for {v.ty}")
            return Val({"unary": {"op": "bit_not", "arg": v.expr}}, v.ty)
        raise self.error(node, "unsupported unary operator")

    # --- typing ------------------------------------------------------------
    def _decay(self, v):
        if isinstance(v, Val) and v.decay:
            return Val(_extract(v.expr, 0), u32)
        return v

    def _materialize(self, v, ty, node, strict=True):
        """``v`` as a value of exactly ``ty``, adapting literals; None (or an
        error when ``strict``) if ``v`` is typed differently."""
        if v.untyped:
            lit = v.lit
            if ty.is_bool:
                if not isinstance(lit, bool):
                    raise self.error(node, f"expected a bool, got the constant {lit!r}")
            elif isinstance(lit, bool):
                raise self.error(node, f"expected a {ty}, got the bool {lit!r}")
            elif ty.is_int:
                if isinstance(lit, float):
                    raise self.error(node, f"the float constant {lit!r} cannot become {ty} implicitly; convert it explicitly (enigma.{ty.scalar}({lit!r}))")
                if not ty.scalar_type.fits(lit):
                    raise self.error(node, f"the constant {lit} does not fit in {ty.scalar}")
            return Val(_lit(lit, ty), ty, lit)
        if v.ty == ty:
            return v
        if v.decay and not ty.is_vector:
            d = self._decay(v)
            if d.ty == ty:
                return d
        if strict:
            raise self.error(node, f"expected {ty}, got {v.ty}")
        return None

    def _convert(self, v, ty, node, explicit=False):
        """``v`` converted to ``ty``: literals adapt; typed scalars convert as
        C does (a Cast); vector shapes must agree unless splatting a scalar."""
        if v.untyped:
            if explicit and not ty.is_bool:
                lit = v.lit
                if ty.is_int:
                    lit = int(lit)
                    if not ty.scalar_type.fits(lit):
                        raise self.error(node, f"the constant {v.lit!r} does not fit in {ty.scalar}")
                return Val(_lit(lit, ty), ty, lit)
            if ty.is_float and isinstance(v.lit, int) and not isinstance(v.lit, bool):
                return Val(_lit(float(v.lit), ty), ty, float(v.lit))
            return self._materialize(v, ty, node)
        m = self._materialize(v, ty, node, strict=False)
        if m is not None:
            return m
        v = self._decay(v) if not ty.is_vector else v
        if v.ty.width == ty.width:
            return Val(_cast(v.expr, ty), ty)
        if v.ty.width == 1 and ty.is_vector:
            s = v if v.ty.scalar == ty.scalar else Val(_cast(v.expr, ty.scalar_type), ty.scalar_type)
            return Val({"vector": {"ty": ty.ir(), "components": [s.expr]}}, ty)
        raise self.error(node, f"cannot convert {v.ty} to {ty}")

    def _unify(self, a, b, node):
        """Brings two operands to a common type; returns (a, b, type), type
        None when both are untyped literals."""
        if a.decay and (b.untyped or not b.ty.is_vector):
            a = self._decay(a)
        if b.decay and (a.untyped or not a.ty.is_vector):
            b = self._decay(b)
        if a.untyped and b.untyped:
            return a, b, None
        if a.untyped or b.untyped:
            t, lit = (b, a) if a.untyped else (a, b)
            target = t.ty
            if isinstance(lit.lit, float) and not target.is_float:
                if target.is_bool:
                    raise self.error(node, f"cannot mix the float constant {lit.lit!r} with a bool")
                target = target.with_scalar("f32")
                t = self._convert(t, target, node)
            if isinstance(lit.lit, bool) != target.is_bool:
                raise self.error(node, f"cannot mix the constant {lit.lit!r} with a value of type {target}")
            if target.is_float and isinstance(lit.lit, int):
                lit = untyped(float(lit.lit))
            lit = self._materialize(lit, target.scalar_type, node)
            return (lit, t, target) if a.untyped else (t, lit, target)
        if a.ty == b.ty:
            return a, b, a.ty
        if a.ty.is_vector and b.ty.is_vector:
            raise self.error(node, f"operands have types {a.ty} and {b.ty}; vectors must have the same type (convert one)")
        if a.ty.is_vector or b.ty.is_vector:
            vec, sc = (a, b) if a.ty.is_vector else (b, a)
            if sc.ty.scalar != vec.ty.scalar:
                sc = Val(_cast(sc.expr, vec.ty.scalar_type), vec.ty.scalar_type)
            return ((vec, sc, vec.ty) if a.ty.is_vector else (sc, vec, vec.ty))
        common = _usual(a.ty, b.ty)
        if a.ty != common:
            a = Val(_cast(a.expr, common), common)
        if b.ty != common:
            b = Val(_cast(b.expr, common), common)
        return a, b, common

    def _unify_many(self, vals, node, default_float=False):
        vals = [self._decay(v) if v.decay else v for v in vals]
        typed = [v.ty for v in vals if not v.untyped]
        if typed:
            ty = typed[0]
            for t in typed[1:]:
                if t == ty:
                    continue
                if t.is_vector and ty.is_vector:
                    raise self.error(node, f"arguments have types {ty} and {t}; vectors must have the same type")
                if t.is_vector:
                    ty = t.with_scalar(_usual(t.scalar_type, ty.scalar_type).scalar) if not ty.is_vector else ty
                elif ty.is_vector:
                    pass
                else:
                    ty = _usual(ty, t)
            if any(isinstance(v.lit, float) for v in vals if v.untyped) and not ty.is_float:
                ty = ty.with_scalar("f32")
        else:
            if default_float or any(isinstance(v.lit, float) for v in vals):
                ty = f32
            elif all(isinstance(v.lit, bool) for v in vals):
                ty = bool_
            else:
                ty = _default_type(max((abs(v.lit) for v in vals), default=0))
        out = []
        for v in vals:
            if not v.untyped and v.ty.width == 1 and ty.is_vector:
                c = self._convert(v, ty.scalar_type, node)
                out.append(Val({"vector": {"ty": ty.ir(), "components": [c.expr]}}, ty))
            else:
                out.append(self._convert(v, ty, node))
        return out, ty

    def _binop(self, op, a, b, node):
        sym = _OP_SYMBOL[op]
        if op in ("shl", "shr"):
            a, b = self._decay(a), self._decay(b)
            if a.untyped and b.untyped:
                return self._fold(op, a.lit, b.lit, node)
            if a.untyped:
                a = self._materialize(a, b.ty.scalar_type if not b.untyped else i32, node)
            if not a.ty.is_int:
                raise self.error(node, f"`{sym}` needs integers, not {a.ty}")
            if b.untyped:
                b = self._materialize(b, a.ty.scalar_type, node)
            elif not b.ty.is_int or b.ty.is_vector and b.ty != a.ty:
                raise self.error(node, f"the shift amount must be an integer, not {b.ty}")
            elif b.ty.scalar != a.ty.scalar:
                b = Val(_cast(b.expr, a.ty.with_scalar(a.ty.scalar) if b.ty.is_vector else a.ty.scalar_type), a.ty if b.ty.is_vector else a.ty.scalar_type)
            return Val(_binary(op, a.expr, b.expr), a.ty)
        a2, b2, ty = self._unify(a, b, node)
        if ty is None:
            return self._fold(op, a2.lit, b2.lit, node)
        a, b = a2, b2
        if op in ("and", "or"):
            if ty.scalar != "bool":
                raise self.error(node, f"`{sym}` needs bools, not {ty} (write a comparison)")
            return Val(_binary(op, a.expr, b.expr), ty)
        if op in _CMPOPS.values():
            if a.ty.width != b.ty.width:  # splat the scalar for a vector comparison
                if a.ty.width == 1:
                    a = Val({"vector": {"ty": ty.ir(), "components": [a.expr]}}, ty)
                else:
                    b = Val({"vector": {"ty": ty.ir(), "components": [b.expr]}}, ty)
            if ty.is_bool and op not in ("eq", "ne"):
                raise self.error(node, f"`{sym}` is not defined for bools")
            return Val(_binary(op, a.expr, b.expr), ty.with_scalar("bool"))
        if ty.is_bool and op not in ("bit_and", "bit_or", "bit_xor"):
            raise self.error(node, f"`{sym}` is not defined for bools")
        if op in ("bit_and", "bit_or", "bit_xor") and ty.is_float:
            raise self.error(node, f"`{sym}` is not defined for {ty}")
        if op == "pow":
            if not ty.is_float:
                raise self.error(node, f"`**` is defined for floats (pow); got {ty}")
            return Val(_call("pow", [a.expr, b.expr]), ty)
        if op == "floordiv":
            if ty.is_float:
                return Val(_call("floor", [_binary("div", a.expr, b.expr)]), ty)
            op = "div"  # C division: truncates toward zero
        return Val(_binary(op, a.expr, b.expr), ty)

    def _fold(self, op, x, y, node):
        sym = _OP_SYMBOL[op]
        try:
            if op in ("and", "or"):
                if not (isinstance(x, bool) and isinstance(y, bool)):
                    raise self.error(node, f"`{sym}` needs bools")
                return untyped((x and y) if op == "and" else (x or y))
            if op in _CMPOPS.values():
                return untyped({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[op])
            ints = isinstance(x, int) and isinstance(y, int)
            if op == "add":
                r = x + y
            elif op == "sub":
                r = x - y
            elif op == "mul":
                r = x * y
            elif op in ("div", "floordiv"):
                if y == 0:
                    raise self.error(node, "division by zero in a constant expression")
                r = _c_div(x, y) if ints else (math.floor(x / y) if op == "floordiv" else x / y)
            elif op == "rem":
                if y == 0:
                    raise self.error(node, "division by zero in a constant expression")
                r = _c_rem(x, y) if ints else math.fmod(x, y)
            elif op == "pow":
                if ints and abs(x) > 1 and y > 64:
                    # |x| ** 65 and beyond exceeds every kernel type: say so
                    # before computing a number of millions of digits.
                    raise self.error(node, f"constant expression {x} ** {y} is too large for any kernel type (the largest is u64)")
                r = x ** y
            elif op in ("bit_and", "bit_or", "bit_xor", "shl", "shr"):
                if not ints:
                    raise self.error(node, f"`{sym}` needs integers")
                if op in ("shl", "shr") and not 0 <= y < 64:
                    # At run time a shift takes its amount modulo the bit
                    # width of its type, which a constant does not have yet.
                    raise self.error(
                        node,
                        f"constant shift `{x} {sym} {y}`: a constant shift amount must be between 0 and 63; "
                        f"to shift by the amount modulo the bit width, as at run time, give the value a type (e.g. enigma.i32({x}) {sym} {y})",
                    )
                r = {"bit_and": x & y, "bit_or": x | y, "bit_xor": x ^ y, "shl": x << y, "shr": x >> y}[op]
            else:
                raise self.error(node, f"`{sym}` cannot be folded")
        except (OverflowError, ValueError, ZeroDivisionError) as e:
            raise self.error(node, f"constant expression: {e}") from None
        if isinstance(r, bool):
            r = int(r)
        if isinstance(r, int) and not -(1 << 63) <= r < (1 << 64):
            raise self.error(node, f"constant expression `{x} {sym} {y}` = {_short(r)} does not fit any kernel integer type (i64 or u64)")
        return untyped(r)

    # --- calls -------------------------------------------------------------
    def _call(self, node):
        callee = self.expr(node.func)
        if isinstance(callee, (Val, MemRef, TexRef)):
            raise self.error(node, "this value is not callable")
        obj = callee.obj
        if isinstance(obj, TexMethod):
            return self._texture_call(obj, node)
        if isinstance(obj, DType):
            return self._cast_call(obj, node)
        if isinstance(obj, MatrixType):
            args = self._bind(node, repr(obj), ["value"], 1)
            return self._matrix_fill(obj, args["value"], True, node)
        if isinstance(obj, Builtin):
            args = self._bind(node, obj.name, ["axis"], 0)
            if "axis" not in args:
                return self._builtin(obj, None, node)
            ax = self.expr(args["axis"])
            if isinstance(ax, PyObj) and ax.obj in ("x", "y", "z"):
                return self._builtin(obj, _COMPONENTS[ax.obj], node)
            if isinstance(ax, Val) and ax.untyped and ax.lit in (0, 1, 2) and not isinstance(ax.lit, bool):
                return self._builtin(obj, ax.lit, node)
            raise self.error(node, f"the axis of enigma.{obj.name} must be \"x\", \"y\", \"z\" or 0, 1, 2")
        if isinstance(obj, Intrinsic):
            return self._intrinsic(obj.name, node)
        if obj in (_py_builtins.min, _py_builtins.max, _py_builtins.abs, _py_builtins.pow):
            return self._intrinsic(obj.__name__, node)
        if obj is _py_builtins.float:
            return self._cast_call(f32, node)
        if obj is _py_builtins.int:
            return self._cast_call(i32, node)
        if obj is _py_builtins.range:
            raise self.error(node, "range() is only supported as `for i in range(...)`")
        from ._kernel import Kernel  # local import: _kernel imports this module

        if isinstance(obj, Kernel):
            raise self.error(node, f"calling another kernel (`{obj.name}`) is not supported")
        name = getattr(obj, "__name__", repr(obj))
        raise self.error(node, f"calling the Python function `{name}` is not supported in a kernel (only enigma's functions, types and min/max/abs/pow)")

    def _reject_unsigned_clamp_at_zero(self, args, node):
        """``max(i - 2, 0)`` with an unsigned ``i`` (thread positions are u32):
        the subtraction wraps to a huge number instead of going negative, so
        the ``max`` never clamps — numba's signed indices would. Refused with
        the fix rather than left to give a silent wrong answer."""
        zero = [a for a in args if a.untyped and a.lit == 0 and not isinstance(a.lit, bool)]
        other = [a for a in args if a not in zero]
        if len(zero) != 1 or len(other) != 1:
            return
        v = other[0]
        if v.untyped or not v.ty.is_int or v.ty.scalar[0] != "u" or "binary" not in v.expr or v.expr["binary"]["op"] != "sub":
            return
        raise self.error(
            node,
            f"max(… - …, 0) on {v.ty} never clamps: unsigned subtraction wraps to a large number instead of going "
            "below zero (thread positions are u32). Subtract in a signed type, e.g. max(enigma.i32(i) - 2, 0), "
            "or compare first: `i - 2 if i >= 2 else 0`",
        )

    def _cast_call(self, ty, node):
        if node.keywords:
            raise self.error(node, f"{ty!r}(...) takes positional arguments only")
        args = [self.value(a) for a in node.args]
        if not args:
            raise self.error(node, f"{ty!r}() needs a value")
        if len(args) == 1:
            v = args[0]
            if not ty.is_vector:
                v = self._decay(v)
                if not v.untyped and v.ty.is_vector:
                    raise self.error(node, f"cannot convert {v.ty} to {ty}; take a component first (`.x`)")
                return self._convert(v, ty, node, explicit=True)
            if v.untyped or v.ty.width == 1:
                s = self._convert(v, ty.scalar_type, node, explicit=True)
                return Val({"vector": {"ty": ty.ir(), "components": [s.expr]}}, ty)
            if v.ty.width != ty.width:
                raise self.error(node, f"cannot convert {v.ty} to {ty}")
            return self._convert(v, ty, node, explicit=True)
        if not ty.is_vector:
            raise self.error(node, f"{ty!r}(...) takes one value")
        comps = []
        for v in args:
            if not v.untyped and v.ty.is_vector:
                for i in range(v.ty.width):
                    comps.append(Val(_extract(v.expr, i), v.ty.scalar_type))
            else:
                comps.append(v)
        if len(comps) != ty.width:
            raise self.error(node, f"{ty!r}(...) needs {ty.width} components (or 1 to splat), {len(comps)} given")
        exprs = [self._convert(self._decay(c), ty.scalar_type, node, explicit=True).expr for c in comps]
        return Val({"vector": {"ty": ty.ir(), "components": exprs}}, ty)

    def _intrinsic(self, name, node):
        if name in _lang.MATRIX:
            return self._matrix_call(name, node)
        if name in _lang.COMPARISONS:
            args = self._bind(node, name, ["a", "b"], 2)
            return self._binop(_lang.COMPARISONS[name], self.value(args["a"]), self.value(args["b"]), node)
        if name == "load_if":
            return self._load_if(node)
        if name.startswith("atomic_"):
            return self._atomic(name, node, want_result=True)
        if name == "spec":
            return self._spec(node)
        if name == "as_type":
            args = self._bind(node, name, ["type", "value"], 2)
            ty = self._type_arg(args["type"])
            v = self._decay(self.value(args["value"]))
            if v.untyped:
                raise self.error(node, "as_type needs a typed value (convert the constant first, e.g. enigma.u32(...))")
            if v.ty.size_bytes != ty.size_bytes or v.ty.is_bool or ty.is_bool:
                raise self.error(node, f"as_type from {v.ty} to {ty}: sizes differ")
            return Val({"bitcast": {"to": ty.ir(), "arg": v.expr}}, ty)
        if name in ("if_", "elif_", "else_", "for_range"):
            raise self.error(node, f"enigma.{name}(...) is used as `with enigma.{name}(...):`")
        if name in ("barrier", "threadgroup_barrier", "simdgroup_barrier"):
            raise self.error(node, f"enigma.{name}(...) is a statement; it has no value")
        if name == "threadgroup_alloc":
            raise self.error(node, "enigma.threadgroup_alloc(...) must be assigned to a name: `scratch = enigma.threadgroup_alloc(\"float\", 32)`")
        if node.keywords:
            raise self.error(node, f"enigma.{name}(...) takes positional arguments only")
        tag = _lang.INTRINSIC_TAGS.get(name)
        if tag is None:
            raise self.error(node, f"enigma.{name} cannot be called here")
        args = [self.value(a) for a in node.args]
        base = name.split(".")[-1]
        arity = {"pow": 2, "fma": 3, "min": 2, "max": 2, "clamp": 3, "select": 3, "simd_broadcast": 2, "simd_shuffle": 2,
                 "simd_shuffle_up": 2, "simd_shuffle_down": 2, "simd_shuffle_xor": 2, "simd_is_first": 0}.get(base, 1)
        if len(args) != arity:
            raise self.error(node, f"enigma.{name} takes {arity} argument(s), {len(args)} given")
        if base in _lang.FLOAT_MATH:
            vals, ty = self._unify_many(args, node, default_float=True)
            if not ty.is_float:
                raise self.error(node, f"enigma.{name} needs float arguments, not {ty}; convert with enigma.f32(...)")
            return Val(_call(tag, [v.expr for v in vals]), ty)
        if base in ("abs", "min", "max", "clamp"):
            if base == "max" and len(args) == 2:
                self._reject_unsigned_clamp_at_zero(args, node)
            vals, ty = self._unify_many(args, node)
            if ty.is_bool:
                raise self.error(node, f"enigma.{name} is not defined for bools")
            return Val(_call(tag, [v.expr for v in vals]), ty)
        if base == "select":
            (a, b), ty = self._unify_many(args[:2], node)
            c = self._decay(args[2])
            if c.untyped:
                c = self._materialize(c, bool_, node)
            if c.ty.scalar != "bool" or c.ty.width not in (1, ty.width):
                raise self.error(node, f"the third argument of select must be a bool (or a bool vector of width {ty.width}), not {c.ty}")
            return Val(_call(tag, [a.expr, b.expr, c.expr]), ty)
        if base in ("popcount", "clz", "ctz"):
            (v,), ty = self._unify_many(args, node)
            if not ty.is_int:
                raise self.error(node, f"enigma.{name} needs an integer, not {ty}")
            return Val(_call(tag, [v.expr]), ty)
        if base == "simd_is_first":
            return Val(_call(tag, []), bool_)
        if base in ("simd_all", "simd_any", "simd_ballot"):
            c = self._decay(args[0])
            if c.untyped:
                c = self._materialize(c, bool_, node)
            if c.ty != bool_:
                raise self.error(node, f"enigma.{name} needs a bool, not {c.ty}")
            return Val(_call(tag, [c.expr]), u64 if base == "simd_ballot" else bool_)
        (v,), ty = self._unify_many(args[:1], node)
        if base in ("simd_and", "simd_or", "simd_xor") and not ty.is_int:
            raise self.error(node, f"enigma.{name} needs an integer, not {ty}")
        if base in ("simd_sum", "simd_product", "simd_max", "simd_min", "simd_prefix_inclusive_sum", "simd_prefix_exclusive_sum") and ty.is_bool:
            raise self.error(node, f"enigma.{name} needs a number, not bool")
        out = [v.expr]
        if arity == 2:
            lane = self._decay(args[1])
            if lane.untyped:
                lane = self._materialize(lane, u32, node)
            elif lane.ty not in (u32, DType("u16")):
                if lane.ty.is_vector or not lane.ty.is_int:
                    raise self.error(node, f"the lane/delta of enigma.{name} must be an integer, not {lane.ty}")
                lane = Val(_cast(lane.expr, u32), u32)
            out.append(lane.expr)
        return Val(_call(tag, out), ty)


def _index_type(value: int) -> DType:
    """The type of a constant index or size: u32, or u64 past its range."""
    return u32 if value < (1 << 32) else u64


def _index_expr(v: Val) -> dict:
    """An index or size as IR: a constant as a literal of its index type."""
    return _lit(v.lit, _index_type(v.lit)) if v.untyped else v.expr


def _slice_node(s):
    # Python 3.8 wraps subscripts in ast.Index.
    if hasattr(ast, "Index") and isinstance(s, getattr(ast, "Index")):
        return s.value
    return s


def compile_function(fn) -> dict:
    """The IR (as a JSON-able dict) of a kernel function.

    Only :class:`CompileError` leaves: anything else the front end trips on
    (a constant too large for a float, a construct it did not foresee)
    becomes one, naming the line it was compiling.
    """
    compiler = KernelCompiler(fn)
    try:
        return compiler.compile()
    except CompileError:
        raise
    except (ArithmeticError, ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError) as e:
        raise compiler.error(None, f"cannot compile this line ({type(e).__name__}: {e})") from e
