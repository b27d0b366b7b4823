"""SIMD-group matrices in MSL's spelling, beside the functional form of
``matrices``: a matrix declared inside the kernel,
``a = enigma.simdgroup_matrix(enigma.f32, 8, 8)``, and filled or used
through out-parameters as in Metal:

* ``simdgroup_load(a, A, elements_per_row, matrix_origin, transpose_matrix)``
* ``simdgroup_store(c, C, elements_per_row, matrix_origin, transpose_matrix)``
* ``simdgroup_multiply(d, a, b)`` and ``simdgroup_multiply_accumulate(d, a, b, c)``

``matrix_origin`` is ``(column, row)`` as MSL orders it (its ``ulong2``):
the tile starts at element ``row · elements_per_row + column``; it defaults
to ``(0, 0)``, ``elements_per_row`` to the tile's columns (rows when
transposed) and ``transpose_matrix`` to False. Each lowers to the functional
form's IR (a load, store or product assigned to the matrix's local).
"""

from __future__ import annotations

import ast

from .._types import MatrixType, simdgroup_matrix, u32
from .irjson import _lit
from .values import LocalSym, PyObj, Val, untyped


class MslMatrices:
    """Lowers MSL's out-parameter spelling of the SIMD-group matrix functions."""

    def _matrix_declaration(self, name, call):
        """``a = enigma.simdgroup_matrix(T, R, C)`` inside a kernel: a local
        of the tile's type, assigned later (by ``simdgroup_load(a, …)``,
        ``simdgroup_multiply(a, …)`` or ``a = …``)."""
        if name in self.symbols:
            raise self.error(call, f"`{name}` is already defined; a matrix declaration needs a name of its own")
        args = self._bind(call, "simdgroup_matrix", ["elem", "rows", "cols"], 1)
        elem = self._type_arg(args["elem"])
        dims = []
        for what in ("rows", "cols"):
            if what not in args:
                dims.append(8)
                continue
            v = self.value(args[what])
            if not v.untyped or not isinstance(v.lit, int) or isinstance(v.lit, bool):
                raise self.error(call, f"the {what} of enigma.simdgroup_matrix must be an int known at compile time")
            dims.append(v.lit)
        try:
            ty = simdgroup_matrix(elem, *dims)
        except (TypeError, ValueError) as e:
            raise self.error(call, str(e)) from None
        var = len(self.locals)
        ir_name = self._ir_name(name)
        self.locals.append({"name": ir_name, "ty": ty.ir()})
        self.symbols[name] = LocalSym(var, ty, False, call.lineno, ir_name)

    def _matrix_target(self, node, name):
        """The declared matrix an out-parameter names."""
        sym = self.symbols.get(node.id) if isinstance(node, ast.Name) else None
        if not (isinstance(sym, LocalSym) and isinstance(sym.ty, MatrixType)):
            raise self.error(
                node,
                f"the first argument of enigma.{name} in MSL's form is a matrix declared in the kernel "
                "(`d = enigma.simdgroup_matrix(enigma.f32, 8, 8)`), which it assigns",
            )
        return node.id, sym.ty

    def _origin_offset(self, args, ty, transpose, name, call):
        """The flat offset and the stride (u32 IR) of ``elements_per_row``
        and ``matrix_origin`` (column, row)."""
        if "elements_per_row" in args:
            stride = self._decay(self.value(args["elements_per_row"]))
        else:
            stride = untyped(ty.rows if transpose else ty.cols)
        col, row = untyped(0), untyped(0)
        if "matrix_origin" in args:
            origin = args["matrix_origin"]
            if isinstance(origin, ast.Call) and len(origin.args) == 2 and not origin.keywords:
                origin = ast.Tuple(elts=origin.args, ctx=ast.Load())  # ulong2(x, y)
            if not isinstance(origin, (ast.Tuple, ast.List)) or len(origin.elts) != 2:
                raise self.error(call, f"`matrix_origin` of enigma.{name} is a pair (column, row), as MSL's ulong2")
            col, row = (self._decay(self.value(e)) for e in origin.elts)
        offset = self._binop("add", self._binop("mul", row, stride, call), col, call)
        return self._u32_of(offset, "matrix origin", name, call), self._u32_of(stride, "elements_per_row", name, call)

    def _u32_of(self, v, what, name, call):
        if v.untyped:
            if not isinstance(v.lit, int) or isinstance(v.lit, bool) or not 0 <= v.lit < (1 << 32):
                raise self.error(call, f"the {what} of enigma.{name} must be a u32, not {v.lit!r}")
            return _lit(v.lit, u32)
        if v.ty != u32:
            raise self.error(call, f"the {what} of enigma.{name} must be a u32, not {v.ty}; convert with enigma.u32(...)")
        return v.expr

    def _msl_transpose(self, args, name):
        return self._transpose_arg(args["transpose_matrix"], name) if "transpose_matrix" in args else False

    @staticmethod
    def msl_store_form(call):
        """Whether ``simdgroup_store(...)`` is in MSL's form: an origin or
        ``transpose_matrix`` by keyword, three arguments, or a pair fourth."""
        keywords = {k.arg for k in call.keywords}
        if keywords & {"matrix_origin", "transpose_matrix"}:
            return True
        if len(call.args) == 3 and not keywords - {"elements_per_row"}:
            return True
        return len(call.args) >= 4 and isinstance(call.args[3], (ast.Tuple, ast.List, ast.Call))

    def _msl_matrix_stmt(self, name, call):
        """A statement in MSL's form; False when ``call`` is the functional form."""
        names = ["matrix", "src", "elements_per_row", "matrix_origin", "transpose_matrix"]
        if name == "simdgroup_load":
            args = self._bind(call, name, names, 2)
            target, ty = self._matrix_target(args["matrix"], name)
            mem = self._matrix_memory(args["src"], name)
            transpose = self._msl_transpose(args, name)
            offset, stride = self._origin_offset(args, ty, transpose, name, call)
            load = {"matrix_load": {"ty": ty.ir(), "mem": mem.mem, "offset": offset, "stride": stride, "transpose": transpose}}
            self._assign_name(target, Val(load, ty), call)
            return True
        if name == "simdgroup_store":
            if not self.msl_store_form(call):
                return False
            args = self._bind(call, name, ["matrix", "dst"] + names[2:], 2)
            m = self._matrix_value(args["matrix"], "the first argument", name)
            mem = self._matrix_memory(args["dst"], name)
            if mem.param is not None:
                self.written.add(mem.param)
            transpose = self._msl_transpose(args, name)
            offset, stride = self._origin_offset(args, m.ty, transpose, name, call)
            self.emit({"matrix_store": {"value": m.expr, "mem": mem.mem, "offset": offset, "stride": stride, "transpose": transpose}}, call)
            return True
        if name in ("simdgroup_multiply", "simdgroup_multiply_accumulate"):
            acc = name == "simdgroup_multiply_accumulate"
            args = self._bind(call, name, ["d", "a", "b", "c"] if acc else ["d", "a", "b"], 4 if acc else 3)
            target, _ = self._matrix_target(args["d"], name)
            functional = ast.copy_location(ast.Call(func=call.func, args=[args["a"], args["b"]] + ([args["c"]] if acc else []), keywords=[]), call)
            product = self._matrix_call(name, functional)
            self._assign_name(target, product, call)
            return True
        return False

    @staticmethod
    def is_matrix_declaration(callee):
        return isinstance(callee, PyObj) and callee.obj is simdgroup_matrix
