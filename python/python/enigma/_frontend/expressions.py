"""Expression lowering: constants, names (kernel symbols, then the
closure, globals and builtins at compile time), attributes and swizzles,
unary and binary operators (constant-folding untyped literals as C would),
and conditional expressions.
"""

from __future__ import annotations

import ast
import builtins as _py_builtins
import math
import numbers
import types as _pytypes

from .. import _enigma, _lang
from .._lang import Builtin, Intrinsic
from .._language import marker_of
from .._types import DType, i32
from .conversions import _default_type
from .diagnostics import MAX_NESTING, _short, _TOO_DEEP, _UNSUPPORTED_EXPRS
from .irjson import _binary, _call, _cast, _extract
from .textures import TexRef
from .cooperative import _METHODS as _COOPERATIVE_METHODS
from .values import LocalSym, MemRef, PyObj, ShapeOf, SpecSym, untyped, Val, ValueParamSym


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


_COMPONENTS = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3}


class Expressions:
    """Lowers expressions to IR values."""

    def value(self, node) -> Val:
        return self._value_of(self.expr(node), node)

    def _value_of(self, r, node) -> Val:
        """What ``node`` compiled to (``r``), which must be a value."""
        if isinstance(r, Val):
            return r
        if isinstance(r, MemRef):
            raise self.error(node, f"`{r.name}` is a {r.kind}; index it (`{r.name}[i]`) to read an element")
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
        if isinstance(node, (ast.List, ast.ListComp)):
            raise self.error(
                node,
                f"{_UNSUPPORTED_EXPRS[type(node)]} is not supported in a kernel; for an array of values per thread, declare one "
                "(`acc = enigma.thread_array(enigma.f32, 8)`, then `acc[i] = 0.0`) and fill it in a loop "
                "(`for i in enigma.static_range(8):`, unrolled, keeps it in registers)",
            )
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
        if isinstance(sym, (MemRef, TexRef, PyObj, Val)):
            return sym  # PyObj: a cooperative object bound to a name; Val: a map() parameter
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
        obj = marker_of(obj)
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
        if isinstance(base, PyObj) and type(base.obj) in _COOPERATIVE_METHODS:
            return self._coop_attribute(base.obj, attr, node)
        if isinstance(base, PyObj):
            obj = base.obj
            if isinstance(obj, Builtin) and attr in ("x", "y", "z"):
                return self._builtin(obj, _COMPONENTS[attr], node)
            if isinstance(obj, (Intrinsic, DType)):
                raise self.error(node, f"{obj!r} has no attribute `{attr}` in a kernel")
            if not isinstance(obj, (_pytypes.ModuleType, _lang._PrecisionNamespace, type)) and not hasattr(obj, "__dict__"):
                raise self.error(node, f"attribute `{attr}` of a {type(obj).__name__} cannot be used in a kernel")
            try:
                return self._classify(getattr(obj, attr), node)
            except AttributeError:
                raise self.error(node, f"{getattr(obj, '__name__', type(obj).__name__)} has no attribute `{attr}`") from None
        if isinstance(base, MemRef):
            if attr == "shape":
                return PyObj(ShapeOf(base))
            if attr == "ndim":
                return untyped(len(self._shape_of(base, node)))
            raise self.error(node, f"`{base.name}` has no attribute `{attr}` (a {base.kind} has `.shape` and `.ndim`)")
        if isinstance(base, TexRef):
            return self._texture_method(base, attr, node)
        v = base
        if v.untyped or not v.ty.is_vector:
            raise self.error(node, f"`.{attr}` needs a vector; this value is {v.ty or 'a constant'}")
        idx = [_COMPONENTS.get(c) for c in attr]
        if any(i is None for i in idx) or len(idx) > 4 or (len(set(attr) & set("xyzw")) and len(set(attr) & set("rgba"))):
            raise self.error(node, f"`.{attr}` is not a vector component or swizzle (x, y, z, w / r, g, b, a)")
        if any(i >= v.ty.width for i in idx):
            raise self.error(node, f"`.{attr}`: a {v.ty} has {v.ty.width} components")
        if len(idx) == 1:
            return Val(_extract(v.expr, idx[0]), self._rule(node, _enigma.extract_result_type, v.ty, idx[0]))
        ty = DType(v.ty.scalar, len(idx))
        return Val({"vector": {"ty": ty.ir(), "components": [_extract(v.expr, i) for i in idx]}}, ty)

    def _unary(self, node):
        v = self.value(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Not):
            v = self._decay(v)
            if v.untyped:
                return untyped(not v.lit)
            return Val({"unary": {"op": "not", "arg": v.expr}}, self._rule(node, _enigma.unary_result_type, "not", v.ty))
        if isinstance(node.op, ast.USub):
            if v.untyped:
                if isinstance(v.lit, bool):
                    raise self.error(node, "`-` of a bool")
                return untyped(-v.lit)
            v = self._decay(v)
            ty = self._rule(node, _enigma.unary_result_type, "neg", v.ty, hint=" (unsigned or bool); convert to a signed or float type first")
            return Val({"unary": {"op": "neg", "arg": v.expr}}, ty)
        if isinstance(node.op, ast.Invert):
            if v.untyped:
                if not isinstance(v.lit, int) or isinstance(v.lit, bool):
                    raise self.error(node, "`~` needs an integer")
                return untyped(~v.lit)
            v = self._decay(v)
            return Val({"unary": {"op": "bit_not", "arg": v.expr}}, self._rule(node, _enigma.unary_result_type, "bit_not", v.ty))
        raise self.error(node, "unsupported unary operator")

    def _binop(self, op, a, b, node):
        sym = _OP_SYMBOL[op]
        if op in ("shl", "shr"):
            a, b = self._decay(a), self._decay(b)
            if a.untyped and b.untyped:
                return self._fold(op, a.lit, b.lit, node)
            if a.untyped:
                a = self._materialize(a, b.ty.scalar_type if not b.untyped else i32, node)
            if b.untyped:
                b = self._materialize(b, a.ty.scalar_type, node)
            elif a.ty.is_int and b.ty.is_int and b.ty.scalar != a.ty.scalar:
                # The amount converts to the value's integer type.
                b = Val(_cast(b.expr, b.ty.with_scalar(a.ty.scalar)), b.ty.with_scalar(a.ty.scalar))
            ty = self._rule(node, _enigma.binary_result_type, op, a.ty, b.ty, hint=f" (`{sym}` shifts an integer by an integer amount)")
            return Val(_binary(op, a.expr, b.expr), ty)
        if op in _CMPOPS.values() and not a.untyped and not b.untyped:
            # Before the usual conversions turn a signed side unsigned.
            self._check(node, _enigma.check_comparison_signs, op, self._decay(a).ty, self._decay(b).ty)
        a2, b2, ty = self._unify(a, b, node)
        if ty is None:
            return self._fold(op, a2.lit, b2.lit, node)
        a, b = a2, b2
        if op in _CMPOPS.values() and a.ty.width != b.ty.width:  # splat the scalar for a vector comparison
            if a.ty.width == 1:
                a = Val({"vector": {"ty": ty.ir(), "components": [a.expr]}}, ty)
            else:
                b = Val({"vector": {"ty": ty.ir(), "components": [b.expr]}}, ty)
        if op == "pow":
            ty = self._rule(node, _enigma.intrinsic_result_type, "pow", [a.ty, b.ty], hint=" (`**` is pow, defined for floats)")
            return Val(_call("pow", [a.expr, b.expr]), ty)
        if op == "floordiv":
            ty = self._rule(node, _enigma.binary_result_type, "div", a.ty, b.ty, hint=" (in `//`)")
            if ty.is_float:
                return Val(_call("floor", [_binary("div", a.expr, b.expr)]), self._rule(node, _enigma.intrinsic_result_type, "floor", [ty]))
            return Val(_binary("div", a.expr, b.expr), ty)  # C division: truncates toward zero
        hint = " (write a comparison)" if op in ("and", "or") else ""
        return Val(_binary(op, a.expr, b.expr), self._rule(node, _enigma.binary_result_type, op, a.ty, b.ty, hint=hint))

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
