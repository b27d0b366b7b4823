"""Types of values: untyped literals adapting to a type, conversions
(explicit and implicit), and bringing operands to a common type before an
operator or intrinsic.
"""

from __future__ import annotations

import functools

from .. import _enigma
from .._types import DType, MatrixType, f32, i32, i64, u32, u64, bool_, parse_type
from .irjson import _cast, _extract, _lit
from .values import untyped, Val


def _usual(a: DType, b: DType) -> DType:
    """The type two differently typed operands meet in: C's usual arithmetic
    conversions, the IR's rule (``enigma_ir::typing::usual_arithmetic``);
    ``a`` or ``b`` itself when their scalar wins."""
    if a == b:
        return a
    s = _enigma.common_scalar_type(a.scalar, b.scalar)
    return a if s == a.scalar else b if s == b.scalar else DType(s)


@functools.lru_cache(maxsize=None)
def _ir_type(name: str):
    """The DType or MatrixType of an IR type name (``f32x4``, ``mat8x8_f16``)."""
    if name.startswith("mat"):
        shape, elem = name[3:].split("_")
        rows, cols = shape.split("x")
        return MatrixType(elem, int(rows), int(cols))
    return parse_type(name)


def _ir_name(t):
    if isinstance(t, (DType, MatrixType)):
        return t.ir()
    if isinstance(t, (list, tuple)):
        return [_ir_name(x) for x in t]
    return t


# Operators as Python spells them, for the IR rules' messages.
_PY_SPELLING = {"`&&`": "`and`", "`||`": "`or`", "`!`": "`not`", "(`i32(n)`)": "(`enigma.i32(n)`)", "(`u32(i)`)": "(`enigma.u32(i)`)"}


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


class Conversions:
    """Literal adaptation, conversions and operand unification; result types
    from the IR's typing rules."""

    def _rule(self, node, rule, *args, hint=""):
        """The result type of one of the IR's typing rules (``rule``: an
        ``_enigma`` function over IR type names, e.g.
        ``_enigma.binary_result_type``; ``args``: operators, names and types)
        as a DType or MatrixType. The rule's refusal becomes a CompileError
        at ``node``: the rule's own message, then ``hint`` (the front end's
        advice)."""
        return _ir_type(self._check(node, rule, *args, hint=hint))

    def _check(self, node, rule, *args, hint=""):
        """What one of the IR's typing rules returns (``_rule`` without
        reading it as a type: ``_enigma.async_copy_bytes`` gives a size), its
        refusal a CompileError at ``node`` as in ``_rule``."""
        try:
            return rule(*(_ir_name(a) for a in args))
        except _enigma.TypingError as e:
            message = str(e)
            for rust, python in _PY_SPELLING.items():
                message = message.replace(rust, python)
            raise self.error(node, message + hint) from None

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
