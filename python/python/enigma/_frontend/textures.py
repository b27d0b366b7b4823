"""Textures (``texture2d<T, access>`` parameters): their methods
(``read``, ``write``, ``get_width``, ``get_height``) and coordinates.
"""

from __future__ import annotations

import ast

from .. import _enigma
from .._types import DType, u32
from .values import PyObj, Val


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


class Textures:
    """Lowers texture parameters and their methods."""

    def _texture_param(self, name, ir_name, index, ann):
        """A ``texture2d`` parameter (``ann``: its ``TextureParam``)."""
        self.params.append({"name": ir_name, "kind": {"texture": {"texel": ann.dtype.ir(), "access": ann.access}}})
        self.symbols[name] = TexRef(index, ann.dtype, ann.access, name)

    def _texture_method(self, tex, attr, node):
        """``tex.attr``: one of the texture's methods, before it is called."""
        if attr not in ("read", "write", "get_width", "get_height"):
            raise self.error(node, f"texture `{tex.name}` has no method `{attr}` (it has read, write, get_width and get_height; sampling is not there yet)")
        return PyObj(TexMethod(tex, attr))

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
        if m.method == "write":
            raise self.error(node, f"`{tex.name}.write(value, coord)` is a statement; it has no value")
        if m.method in ("get_width", "get_height"):
            self._bind(node, f"{tex.name}.{m.method}", [], 0, prefix="")
            return Val({"texture_size": {"tex": tex.index, "dim": m.method[4:]}}, u32)
        args = self._bind(node, f"{tex.name}.read", ["coord"], 1, prefix="")
        coord = self._texture_coord(tex, args["coord"])
        ty = self._rule(node, _enigma.texture_read_result_type, tex.name, tex.texel.scalar, tex.access, DType("u32", 2))
        return Val({"texture_read": {"tex": tex.index, "coord": coord}}, ty)

    def _texture_write(self, tex, call):
        """``tex.write(value, coord)``: ``value`` is four texels, or one to splat."""
        args = self._bind(call, f"{tex.name}.write", ["value", "coord"], 2, prefix="")
        ty = self._rule(call, _enigma.texture_texel_type, tex.name, tex.texel.scalar)
        v = self._decay(self.value(args["value"]))
        if v.untyped or not v.ty.is_vector:
            value = {"vector": {"ty": ty.ir(), "components": [self._convert(v, tex.texel, call).expr]}}
        elif v.ty == ty:
            value = v.expr
        else:
            raise self.error(call, f"`{tex.name}.write` takes four texels ({ty}, or one {tex.texel} to splat), not {v.ty}")
        coord = self._texture_coord(tex, args["coord"])
        self.emit({"texture_write": {"tex": tex.index, "value": value, "coord": coord}}, call)
