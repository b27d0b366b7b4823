"""Textures (``texture2d<T, access>`` parameters): their methods
(``read``, ``write``, ``sample``, ``fence``, ``get_width``, ``get_height``)
and coordinates.
"""

from __future__ import annotations

import ast
import json

from .. import _enigma, _lang
from .._types import DType, f32, u32
from .values import PyObj, Val


class TexRef:
    """A ``texture2d`` parameter: its methods are read, write, sample, fence, get_width, get_height."""

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
        if attr not in ("read", "write", "sample", "fence", "get_width", "get_height"):
            raise self.error(node, f"texture `{tex.name}` has no method `{attr}` (it has read, write, sample, fence, get_width and get_height)")
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
        """``tex.read(coord)``, ``tex.sample(sampler, uv)``, ``tex.get_width()``,
        ``tex.get_height()``."""
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
        ty = self._rule(node, _enigma.texture_read_result_type, tex.name, tex.texel.scalar, tex.access, DType("u32", 2))
        return Val({"texture_read": {"tex": tex.index, "coord": coord}}, ty)

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
        ty = self._rule(node, _enigma.texture_sample_result_type, tex.name, tex.texel.scalar, tex.access, json.dumps(made.ir()), f2)
        return Val({"texture_sample": {"tex": tex.index, "sampler": made.ir(), "uv": uv}}, ty)

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
