"""SIMD-group matrices (``simdgroup_matrix<T, R, C>``): construction,
loads (also of 4-bit weights, decoded on load) and stores, multiplication,
and a lane's elements and their coordinates.
"""

from __future__ import annotations

from .. import _enigma
from .._types import MatrixType, u32
from .irjson import _lit
from .values import MemRef, PyObj, Val


class Matrices:
    """Lowers the SIMD-group matrix functions."""

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
        if name == "simdgroup_load_quantized":
            # Seed 002's [K/8][N] words: element (r, c) is nibble r % 8 of
            # words[offset + (r / 8) * words_per_row + c] decoded, times
            # scales[scale_offset + c], rounded once to the tile's f16; or
            # with layout="fragments" the tensor cores' fragment order
            # (QuantLayout in enigma-ir; 64 x 16 units).
            args = self._bind(node, name, ["type", "code", "words", "offset", "words_per_row", "scales", "scale_offset", "layout"], 7)
            ty = self._matrix_type_arg(args["type"])
            code = self.expr(args["code"])
            if not (isinstance(code, PyObj) and code.obj in ("int4", "fp4")):
                raise self.error(args["code"], f"the code of enigma.{name} must be 'int4' or 'fp4' (a constant)")
            words = self._matrix_memory(args["words"], name)
            scales = self._matrix_memory(args["scales"], name)
            offset = self._u32_arg(args["offset"], "offset", name)
            stride = self._u32_arg(args["words_per_row"], "words_per_row", name)
            scale_offset = self._u32_arg(args["scale_offset"], "scale_offset", name)
            layout = "rows"
            if "layout" in args:
                given = self.expr(args["layout"])
                if not (isinstance(given, PyObj) and given.obj in ("rows", "fragments")):
                    raise self.error(args["layout"], f"the layout of enigma.{name} must be 'rows' or 'fragments' (a constant)")
                layout = given.obj
            load = {"ty": ty.ir(), "code": code.obj, "layout": layout, "words": words.mem, "offset": offset, "stride": stride, "scales": scales.mem, "scale_offset": scale_offset}
            return Val({"matrix_load_quantized": load}, ty)
        if name in ("simdgroup_multiply", "simdgroup_multiply_accumulate"):
            acc = name == "simdgroup_multiply_accumulate"
            args = self._bind(node, name, ["a", "b", "c"] if acc else ["a", "b"], 3 if acc else 2)
            a = self._matrix_value(args["a"], "the first argument", name)
            b = self._matrix_value(args["b"], "the second argument", name)
            if not acc:
                ty = self._rule(node, _enigma.matrix_multiply_result_type, a.ty, b.ty)
                return Val({"matrix_multiply": {"a": a.expr, "b": b.expr, "acc": None}}, ty)
            c = self._matrix_value(args["c"], "the accumulator", name)
            ty = self._rule(node, _enigma.matrix_multiply_result_type, a.ty, b.ty, c.ty)
            return Val({"matrix_multiply": {"a": a.expr, "b": b.expr, "acc": c.expr}}, ty)
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
            return Val({"matrix_element": {"matrix": m.expr, "index": i.lit}}, self._rule(node, _enigma.matrix_element_result_type, ty, i.lit))
        coord = self._rule(node, _enigma.matrix_coord_result_type, ty, i.lit)
        return Val({"matrix_coord": {"ty": ty.ir(), "index": i.lit, "column": name == "thread_element_col"}}, coord)

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
