"""Calls: enigma's builtins (thread positions), types called as
conversions or vector constructors, specialisation constants, and the
intrinsic functions (math, integer, SIMD-group), dispatched by name.
"""

from __future__ import annotations

import ast
import builtins as _py_builtins
import math

from .. import _cooperative, _enigma, _lang
from .._kernel import Kernel
from .cooperative import CoopMethod, is_compile_time
from .._lang import Builtin, Intrinsic
from .._types import DType, MatrixType, f32, i32, u32, bool_
from .expressions import _COMPONENTS
from .irjson import _call, _cast, _extract
from .textures import TexMethod, TexRef
from .values import MemRef, PyObj, Val, untyped


class Intrinsics:
    """Lowers calls of builtins, types and intrinsics."""

    def _call(self, node):
        callee = self.expr(node.func)
        if isinstance(callee, (Val, MemRef, TexRef)):
            raise self.error(node, "this value is not callable")
        obj = callee.obj
        if isinstance(obj, TexMethod):
            return self._texture_call(obj, node)
        if isinstance(obj, CoopMethod):
            return self._coop_method_call(obj, node)
        if is_compile_time(obj):
            return self._compile_time_call(obj, node)
        if obj is _cooperative.TENSOR_INTRINSIC:
            return self._tensor_call(node)
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
            if len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                return self._special_float(node.args[0].value, node)
            return self._cast_call(f32, node)
        if obj is _py_builtins.int:
            return self._cast_call(i32, node)
        if obj is _py_builtins.range:
            raise self.error(node, "range() is only supported as `for i in range(...)`")
        if isinstance(obj, Kernel):
            raise self.error(node, f"calling another kernel (`{obj.name}`) is not supported")
        name = getattr(obj, "__name__", repr(obj))
        raise self.error(node, f"calling the Python function `{name}` is not supported in a kernel (only enigma's functions, types and min/max/abs/pow)")

    def _special_float(self, text, node):
        """``float("inf")``, ``float("-inf")``, ``float("nan")``: the
        constant, as Python reads the string (other strings are refused)."""
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or math.isfinite(value):
            raise self.error(
                node,
                f"float({text!r}) in a kernel: only the strings \"inf\", \"-inf\" and \"nan\" are read at compile time "
                "(also written math.inf, math.nan, enigma.inf, enigma.nan); write other numbers as literals",
            )
        return untyped(value)

    def _builtin(self, b, axis, node):
        if axis is None:
            if b.vector:
                return Val({"builtin": b.name}, DType("u32", 3), decay=True)
            return Val({"builtin": b.name}, u32)
        if not b.vector:
            raise self.error(node, f"enigma.{b.name} is a scalar (uint); it takes no axis")
        return Val(_extract({"builtin": b.name}, axis), u32)

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
                    comps.append(Val(_extract(v.expr, i), self._rule(node, _enigma.extract_result_type, v.ty, i)))
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
            ty = self._rule(node, _enigma.bitcast_result_type, v.ty, ty, hint=" (as_type)")
            return Val({"bitcast": {"to": ty.ir(), "arg": v.expr}}, ty)
        if name in ("if_", "elif_", "else_", "for_range"):
            raise self.error(node, f"enigma.{name}(...) is used as `with enigma.{name}(...):`")
        if name in ("barrier", "threadgroup_barrier", "simdgroup_barrier", "async_copy", "async_commit", "async_wait", "tile_copy", "tile_wait", "device_fence", "print"):
            raise self.error(node, f"enigma.{name}(...) is a statement; it has no value")
        if name == "threadgroup_alloc":
            raise self.error(node, "enigma.threadgroup_alloc(...) must be assigned to a name: `scratch = enigma.threadgroup_alloc(\"float\", 32)`")
        if name == "thread_array":
            raise self.error(node, "enigma.thread_array(...) must be assigned to a name: `acc = enigma.thread_array(enigma.f32, 8)`")
        if name == "static_range":
            raise self.error(node, "enigma.static_range(...) is the iterable of a loop: `for i in enigma.static_range(8):`")
        if node.keywords:
            raise self.error(node, f"enigma.{name}(...) takes positional arguments only")
        tag = _lang.INTRINSIC_TAGS.get(name)
        if tag is None:
            raise self.error(node, f"enigma.{name} cannot be called here")
        args = [self.value(a) for a in node.args]
        base = name.split(".")[-1]
        arity = _enigma.intrinsic_arity(tag)
        if len(args) != arity:
            raise self.error(node, f"enigma.{name} takes {arity} argument(s), {len(args)} given")

        precision = _lang.precision_of(name)

        def call(vals, hint=""):
            """The call on converted arguments; its type is the IR's rule."""
            ty = self._rule(node, _enigma.intrinsic_result_type, tag, [v.ty for v in vals], precision, hint=hint)
            return Val(_call(tag, [v.expr for v in vals], precision), ty)

        if base in _lang.FLOAT_MATH or base in _lang.CLASSIFICATION or precision != "default":
            vals, _ = self._unify_many(args, node, default_float=True)
            return call(vals, hint="; convert with enigma.f32(...)")
        if base in ("abs", "min", "max", "clamp"):
            if base == "max" and len(args) == 2:
                self._reject_unsigned_clamp_at_zero(args, node)
            vals, _ = self._unify_many(args, node)
            return call(vals)
        if base == "select":
            (a, b), _ = self._unify_many(args[:2], node)
            c = self._decay(args[2])
            if c.untyped:
                c = self._materialize(c, bool_, node)
            return call([a, b, c])
        if base in ("popcount", "clz", "ctz"):
            vals, _ = self._unify_many(args, node)
            return call(vals)
        if base == "simd_is_first":
            return call([])
        if base in ("simd_all", "simd_any", "simd_ballot"):
            c = self._decay(args[0])
            if c.untyped:
                c = self._materialize(c, bool_, node)
            return call([c])
        vals, _ = self._unify_many(args[:1], node)
        if arity == 2:
            lane = self._decay(args[1])
            if lane.untyped:
                lane = self._materialize(lane, u32, node)
            elif lane.ty.is_int and not lane.ty.is_vector and lane.ty not in (u32, DType("u16")):
                lane = Val(_cast(lane.expr, u32), u32)  # any integer lane or delta converts to u32
            vals.append(lane)
        return call(vals)

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
