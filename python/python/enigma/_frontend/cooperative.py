"""Cooperative tensor operations (MetalPerformancePrimitives' ``matmul2d``):
the compile-time objects (descriptor, scope, operation), tensor views
(``enigma.tensor``, ``slice``) and cooperative tensors with their methods,
among them a product's left input filled with ``dequantize`` from 4-bit
weights.

A view's five values (offset, extents, strides) are copied into hidden
locals where the view is made, so later assignments to the names they were
made from do not change it. ``fill`` and ``map`` become loops over the
calling thread's slots; everything else is one IR node.
"""

from __future__ import annotations

import ast

from .. import _cooperative
from .._cooperative import ExecutionScope, Matmul2d, Matmul2dDescriptor
from .._types import DType, bool_, f16, u32
from .irjson import _binary, _call, _lit
from .values import MemRef, PyObj, Val


class ViewObj:
    """``enigma.tensor(memory, extents, strides)``: IR expressions (u32) of its values."""

    __slots__ = ("mem", "offset", "extents", "strides")

    def __init__(self, mem, offset, extents, strides):
        self.mem, self.offset, self.extents, self.strides = mem, offset, extents, strides

    def ir(self):
        return {"mem": self.mem.mem, "offset": self.offset, "extents": list(self.extents), "strides": list(self.strides)}


class CoopRef:
    """A cooperative tensor of the kernel."""

    __slots__ = ("index", "elem", "rows", "cols", "scope", "name")

    def __init__(self, index, elem, rows, cols, scope, name):
        self.index, self.elem, self.rows, self.cols, self.scope, self.name = index, elem, rows, cols, scope, name


class CoopMethod:
    """``obj.method`` before it is called (obj a Matmul2d, ViewObj or CoopRef)."""

    __slots__ = ("obj", "method")

    def __init__(self, obj, method):
        self.obj, self.method = obj, method


_METHODS = {
    Matmul2d: ("run", "run_overlapped", "get_destination_cooperative_tensor", "get_left_input_cooperative_tensor"),
    ViewObj: ("slice",),
    CoopRef: ("get_capacity", "is_valid_element", "get_multidimensional_index", "load", "store", "fill", "map", "reduce_rows", "reduce_columns", "combine",
              "dequantize"),
}
# What a message calls each, by its declared type (enigma._cooperative).
_PUBLIC_NAMES = {Matmul2d: "enigma.matmul2d(...)", ViewObj: "enigma.TensorView", CoopRef: "enigma.CooperativeTensor"}
_STATEMENTS = ("run", "run_overlapped", "load", "store", "fill", "map", "combine", "dequantize")
_REDUCTIONS = ("sum", "max", "min")
_COMBINATIONS = ("assign", "add", "sub", "mul", "max", "min")
_QUANT_CODES = ("int4", "fp4", "uint4")
# How `dequantize`'s words lie (enigma_ir::QuantLayout).
_QUANT_LAYOUTS = ("rows", "fragments", "columns")
_LEFT_INPUT_TYPES = ("f16", "bf16", "f32")
COOPERATIVE_OBJECTS = (Matmul2d, ViewObj, CoopRef, Matmul2dDescriptor, ExecutionScope)


class Cooperative:
    """Lowers cooperative tensor operations."""

    # --- helpers -------------------------------------------------------------

    def _u32_expr(self, node):
        """A view value (u32). A buffer of one integer stands for its element
        0, so a size passed as ``M: enigma.u32`` (a one-element buffer)
        reads as MSL's ``constant uint& M``."""
        r = self.expr(node)
        if isinstance(r, MemRef) and r.param is not None and r.elem.is_int and not r.elem.is_vector:
            r = Val({"load": {"mem": r.mem, "index": _lit(0, u32)}}, r.elem)
        return self._convert(self._decay(self._value_of(r, node)), u32, node).expr

    def _hidden_u32(self, expr, node):
        """``expr`` assigned to a new hidden u32 local; the local's value."""
        var = len(self.locals)
        self.locals.append({"name": self._ir_name(f"view{var}"), "ty": u32.ir()})
        self.emit({"assign": {"var": var, "value": expr}}, node)
        return {"var": var}

    def _python_value(self, node):
        """A compile-time argument: a Python object or number."""
        r = self.expr(node)
        if isinstance(r, PyObj):
            return r.obj
        if isinstance(r, Val) and r.untyped:
            return r.lit
        raise self.error(node, "this argument is fixed when the kernel compiles: give a constant or a value made outside the kernel")

    def _coop_arg(self, node, what):
        r = self.expr(node)
        obj = r.obj if isinstance(r, PyObj) else None
        if not isinstance(obj, CoopRef):
            raise self.error(node, f"{what} is a cooperative tensor (from get_destination_cooperative_tensor or get_left_input_cooperative_tensor)")
        return obj

    def _view_arg(self, node, what):
        r = self.expr(node)
        obj = r.obj if isinstance(r, PyObj) else None
        if not isinstance(obj, ViewObj):
            raise self.error(node, f"{what} is an enigma.tensor(...) view")
        return obj

    def _declare_coop(self, elem, rows, cols, scope, node):
        index = len(self.coop_tensors)
        hint = self.coop_name_hint or f"coop{index}"
        ir_name = self._ir_name(hint)
        self.coop_tensors.append({"name": ir_name, "elem": elem.ir(), "rows": rows, "cols": cols, "scope": scope.ir()})
        return CoopRef(index, elem, rows, cols, scope, hint)

    # --- entry points from the other mixins ------------------------------------

    def _compile_time_call(self, fn, node):
        """``enigma.matmul2d_descriptor(...)``, ``execution_simdgroups(n)``,
        ``matmul2d(desc, scope)`` in a kernel: evaluated now."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.error(node, f"enigma.{fn.__name__}: *args and **kwargs are not supported")
        args = [self._python_value(a) for a in node.args]
        kwargs = {k.arg: self._python_value(k.value) for k in node.keywords}
        try:
            return PyObj(fn(*args, **kwargs))
        except (TypeError, ValueError) as e:
            raise self.error(node, str(e)) from None

    def _tensor_call(self, node):
        """``enigma.tensor(memory, (x extent, y extent), strides=(sx, sy))``."""
        args = self._bind(node, "tensor", ["memory", "extents", "strides"], 2)
        mem = self.expr(args["memory"])
        if not isinstance(mem, MemRef):
            raise self.error(node, "enigma.tensor views a buffer parameter or a threadgroup array")
        if mem.elem.is_vector:
            raise self.error(node, f"enigma.tensor views memory of scalars; `{mem.name}` holds {mem.elem}")

        def pair(what):
            n = args.get(what)
            if not isinstance(n, (ast.Tuple, ast.List)) or len(n.elts) != 2:
                raise self.error(node, f"the {what} of enigma.tensor are a pair (x, y), innermost first, as MSL's dextents")
            return [self._hidden_u32(self._u32_expr(e), node) for e in n.elts]

        extents = pair("extents")
        strides = pair("strides") if "strides" in args else [_lit(1, u32), extents[0]]
        return PyObj(ViewObj(mem, _lit(0, u32), extents, strides))

    def _coop_attribute(self, obj, attr, node):
        methods = _METHODS[type(obj)]
        if attr not in methods:
            raise self.error(node, f"{_PUBLIC_NAMES[type(obj)]} has no method `{attr}` in a kernel (it has {', '.join(methods)})")
        return PyObj(CoopMethod(obj, attr))

    def _coop_subscript(self, ref, node):
        i = self._u32_expr(node.slice)
        return Val({"cooperative_element": {"tensor": ref.index, "index": i}}, ref.elem)

    def _coop_set(self, ref, slice_node, value_node, node):
        i = self._u32_expr(slice_node)
        v = self._materialize(self.value(value_node), ref.elem, node, strict=False)
        if v is None:
            raise self.error(node, f"`{ref.name}` holds {ref.elem}; convert the value (enigma.{ref.elem.name}(...))")
        self.emit({"cooperative_set": {"tensor": ref.index, "index": i, "value": v.expr}}, node)

    def _coop_method_call(self, m, node):
        """A method that has a value."""
        obj, name = m.obj, m.method
        if name in _STATEMENTS:
            raise self.error(node, f"`.{name}(...)` is a statement; it has no value")
        if name == "get_destination_cooperative_tensor":
            args = self._bind(node, "get_destination_cooperative_tensor", ["left", "right", "dtype"], 3, prefix="")
            self._left_arg(args["left"])
            self._view_arg(args["right"], "the right operand")
            elem = self._type_arg(args["dtype"])
            return PyObj(self._declare_coop(elem, obj.desc.m, obj.desc.n, obj.scope, node))
        if name == "get_left_input_cooperative_tensor":
            return PyObj(self._left_input(obj, node))
        if name == "slice":
            args = self._bind(node, "slice", ["x", "y"], 2, prefix="")
            x, y = (self._hidden_u32(self._u32_expr(args[a]), node) for a in ("x", "y"))
            offset = _binary("add", obj.offset, _binary("add", _binary("mul", x, obj.strides[0]), _binary("mul", y, obj.strides[1])))

            def remaining(e, o):
                return _call("select", [_binary("sub", e, o), _lit(0, u32), _binary("ge", o, e)])

            extents = [self._hidden_u32(remaining(obj.extents[0], x), node), self._hidden_u32(remaining(obj.extents[1], y), node)]
            return PyObj(ViewObj(obj.mem, self._hidden_u32(offset, node), extents, obj.strides))
        if name == "get_capacity":
            self._bind(node, "get_capacity", [], 0, prefix="")
            return Val({"cooperative_capacity": {"tensor": obj.index}}, u32)
        if name in ("is_valid_element", "get_multidimensional_index"):
            args = self._bind(node, name, ["index"], 1, prefix="")
            i = self._u32_expr(args["index"])
            if name == "is_valid_element":
                return Val({"cooperative_valid": {"tensor": obj.index, "index": i}}, bool_)
            comps = [{"cooperative_coord": {"tensor": obj.index, "index": i, "dim": d}} for d in (0, 1)]
            return Val({"vector": {"ty": DType("u32", 2).ir(), "components": comps}}, DType("u32", 2))
        # reduce_rows / reduce_columns
        args = self._bind(node, name, ["op"], 1, prefix="")
        op = self._python_value(args["op"])
        if op not in _REDUCTIONS:
            raise self.error(node, f"{name} takes \"sum\", \"max\" or \"min\", not {op!r}")
        rows, cols = (obj.rows, 1) if name == "reduce_rows" else (1, obj.cols)
        dest = self._declare_coop(obj.elem, rows, cols, obj.scope, node)
        axis = "rows" if name == "reduce_rows" else "columns"
        self.emit({"cooperative_reduce": {"src": obj.index, "dest": dest.index, "axis": axis, "op": op}}, node)
        return PyObj(dest)

    def _left_input(self, op, node):
        """``op.get_left_input_cooperative_tensor(dtype)``: a new m × k
        tensor of ``op``'s scope that ``op.run`` takes as its left operand."""
        what = "get_left_input_cooperative_tensor"
        args = self._bind(node, what, ["dtype"], 1, prefix="")
        elem = self._type_arg(args["dtype"])
        if elem.name not in _LEFT_INPUT_TYPES:
            raise self.error(node, f"{what} makes a tensor of f16, bf16 or f32 (a product's operand), not {elem}")
        desc = op.desc
        if desc.k is _cooperative.dynamic_extent:
            raise self.error(node, f"{what} needs the descriptor's k: {desc!r} takes k from its left operand (enigma.dynamic_extent)")
        if desc.transpose_left:
            raise self.error(node, f"{what}: the left operand of a product with transpose_left=True is a view, not a cooperative tensor")
        return self._declare_coop(elem, desc.m, desc.k, op.scope, node)

    def _dequantize(self, ref, node):
        """``t.dequantize(code, words, word_offset, word_stride, scales,
        scale_offset, scale_stride, group_shift, layout="rows",
        biases=None)``: element (r, c) of ``t`` becomes the 4-bit weight at
        K row c, N column r of the words (in ``"rows"`` nibble c % 8 of
        ``words[word_offset + (c / 8) * word_stride + r]``; ``"fragments"``
        the tensor cores' fragment order; ``"columns"`` MLX's, nibble c % 8
        of ``words[word_offset + r * word_stride + c / 8]``), times its
        group's scale (plus its bias)."""
        what = f"{ref.name}.dequantize"
        names = ["code", "words", "word_offset", "word_stride", "scales", "scale_offset", "scale_stride", "group_shift", "layout", "biases"]
        args = self._bind(node, "dequantize", names, len(names) - 2, prefix=f"{ref.name}.")
        if ref.elem.name not in ("f32", "f16"):
            raise self.error(node, f"`{ref.name}` holds {ref.elem}; dequantized weights fill an f32 or f16 cooperative tensor")
        given = self.expr(args["code"])
        code = given.obj if isinstance(given, PyObj) else None
        if isinstance(code, DType):
            raise self.error(args["code"], f"the code of {what} is the string 'int4', 'fp4' or 'uint4', not the value type {code!r}")
        if code not in _QUANT_CODES:
            shown = repr(code) if isinstance(given, PyObj) else f"`{ast.unparse(args['code'])}`"
            raise self.error(args["code"], f"the code of {what} is 'int4', 'fp4' or 'uint4' (a constant), not {shown}")

        def memory(key, elem, holds):
            mem = self.expr(args[key])
            if not isinstance(mem, MemRef) or mem.kind == "per-thread array":
                raise self.error(args[key], f"the {key} of {what} are a buffer or threadgroup array of {elem}")
            if mem.elem != elem:
                raise self.error(args[key], f"the {key} of {what} are {holds}, {elem}; `{mem.name}` holds {mem.elem}")
            return mem.mem

        layout = "rows"
        if "layout" in args:
            given = self.expr(args["layout"])
            layout = given.obj if isinstance(given, PyObj) else None
            if layout not in _QUANT_LAYOUTS:
                shown = repr(layout) if isinstance(given, PyObj) else f"`{ast.unparse(args['layout'])}`"
                raise self.error(args["layout"], f"the layout of {what} is 'rows', 'fragments' or 'columns' (a constant), not {shown}")
        words = memory("words", u32, "packed 4-bit weights, eight to a word")
        scales = memory("scales", f16, "the groups' scales")
        given = self.expr(args["biases"]) if "biases" in args else None
        biases = None if given is None or (isinstance(given, PyObj) and given.obj is None) else memory("biases", f16, "the groups' biases")
        values = {key: self._u32_expr(args[key]) for key in ("word_offset", "word_stride", "scale_offset", "scale_stride", "group_shift")}
        stmt = {
            "tensor": ref.index, "code": code, "layout": layout, "words": words, "offset": values["word_offset"], "stride": values["word_stride"],
            "scales": scales, "scale_offset": values["scale_offset"], "scale_stride": values["scale_stride"], "group_shift": values["group_shift"],
        }
        if biases is not None:
            stmt["biases"] = biases
        self.emit({"cooperative_dequantize": stmt}, node)

    def _left_arg(self, node):
        r = self.expr(node)
        obj = r.obj if isinstance(r, PyObj) else None
        if isinstance(obj, ViewObj):
            return {"tensor": obj.ir()}
        if isinstance(obj, CoopRef):
            return {"cooperative": obj.index}
        raise self.error(node, "the left operand is an enigma.tensor(...) view or a cooperative tensor")

    def _coop_method_stmt(self, m, node):
        """A method used as a statement."""
        obj, name = m.obj, m.method
        if name in ("run", "run_overlapped"):
            args = self._bind(node, name, ["left", "right", "destination"], 3, prefix="")
            left = self._left_arg(args["left"])
            right = self._view_arg(args["right"], "the right operand")
            dest = self._coop_arg(args["destination"], "the destination")
            run = {"desc": obj.desc.ir(), "scope": obj.scope.ir(), "left": left, "right": right.ir(), "dest": dest.index}
            if name == "run_overlapped":
                # Operands released at the second threadgroup barrier after it.
                run["release"] = "second_barrier"
            return self.emit({"matmul2d": run}, node)
        if name in ("load", "store"):
            args = self._bind(node, name, ["tensor"], 1, prefix="")
            view = self._view_arg(args["tensor"], f"the argument of `{obj.name}.{name}`")
            if name == "store":
                if view.mem.param is not None:
                    self.written.add(view.mem.param)
                return self.emit({"cooperative_store": {"tensor": obj.index, "dst": view.ir()}}, node)
            return self.emit({"cooperative_load": {"tensor": obj.index, "src": view.ir()}}, node)
        if name == "fill":
            args = self._bind(node, "fill", ["value"], 1, prefix="")
            v = self._materialize(self.value(args["value"]), obj.elem, node, strict=False)
            if v is None:
                raise self.error(node, f"`{obj.name}` holds {obj.elem}; convert the value (enigma.{obj.elem.name}(...))")
            value = self._hidden_value(v, node)
            return self._slot_loop(obj, node, lambda i: value)
        if name == "combine":
            # dest = op(dest, src) by coordinates; src of dest's shape, m×1 or 1×n.
            args = self._bind(node, "combine", ["source", "op"], 2, prefix="")
            src = self._coop_arg(args["source"], f"the source of `{obj.name}.combine`")
            op = self._python_value(args["op"])
            if op not in _COMBINATIONS:
                raise self.error(node, f"combine takes one of {', '.join(repr(o) for o in _COMBINATIONS)}, not {op!r}")
            return self.emit({"cooperative_combine": {"dest": obj.index, "src": src.index, "op": op}}, node)
        if name == "dequantize":
            return self._dequantize(obj, node)
        if name == "map":
            args = self._bind(node, "map", ["function"], 1, prefix="")
            fn = args["function"]
            if not isinstance(fn, ast.Lambda) or len(fn.args.args) != 3 or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.defaults:
                raise self.error(node, f"`{obj.name}.map` takes a lambda of three parameters: the value, its column and its row (lambda v, col, row: ...)")
            names = [a.arg for a in fn.args.args]

            def body(i):
                coords = [Val({"cooperative_coord": {"tensor": obj.index, "index": i, "dim": d}}, u32) for d in (0, 1)]
                bound = [Val({"cooperative_element": {"tensor": obj.index, "index": i}}, obj.elem)] + coords
                saved = {n: self.symbols.get(n) for n in names}
                self.symbols.update(zip(names, bound))
                try:
                    v = self._materialize(self.value(fn.body), obj.elem, node, strict=False)
                finally:
                    for n, s in saved.items():
                        if s is None:
                            self.symbols.pop(n, None)
                        else:
                            self.symbols[n] = s
                if v is None:
                    raise self.error(node, f"the function given to `{obj.name}.map` must give {obj.elem}")
                return v

            return self._slot_loop(obj, node, body)
        raise self.error(node, f"`.{name}(...)` has a value; assign it to a name")

    def _hidden_value(self, v, node):
        var = len(self.locals)
        self.locals.append({"name": self._ir_name(f"fill{var}"), "ty": v.ty.ir()})
        self.emit({"assign": {"var": var, "value": v.expr}}, node)
        return Val({"var": var}, v.ty)

    def _slot_loop(self, ref, node, value_of):
        """``for i in range(capacity): if is_valid_element(i): ref[i] = value_of(i)``."""
        var = len(self.locals)
        self.locals.append({"name": self._ir_name(f"slot{var}"), "ty": u32.ir()})
        i = {"var": var}
        saved = self.block
        self.block = []
        try:
            v = value_of(i)
            self.emit({"cooperative_set": {"tensor": ref.index, "index": i, "value": v.expr}}, node)
            then = self.block
        finally:
            self.block = saved
        loc = {"file": self.file, "line": node.lineno}
        guarded = {"kind": {"if": {"cond": {"cooperative_valid": {"tensor": ref.index, "index": i}}, "then_body": then, "else_body": []}}, "loc": loc}
        end = {"cooperative_capacity": {"tensor": ref.index}}
        self.emit({"for": {"var": var, "start": _lit(0, u32), "end": end, "step": _lit(1, u32), "body": [guarded]}}, node)


def is_compile_time(obj) -> bool:
    return any(obj is f for f in _cooperative.COMPILE_TIME)
