"""What a Python expression denotes while a kernel compiles: an IR value
(:class:`Val`, typed or an untyped literal), a compile-time Python object
(:class:`PyObj`), a memory (:class:`MemRef`) and its ``.shape``
(:class:`ShapeOf`), and the symbols kernel names are bound to.
"""

from __future__ import annotations


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
    """A device buffer, threadgroup array or per-thread array, indexable; with a ``shape``
    (row-major; entries: ints, names of scalars, or None for an open first
    dimension), indexable with one subscript per dimension."""

    __slots__ = ("mem", "elem", "name", "param", "shape", "decl")

    def __init__(self, mem, elem, name, param=None, shape=None, decl=None):
        self.mem = mem  # {"buffer": i}, {"threadgroup": i} or {"thread": i}
        self.elem = elem
        self.name = name
        self.param = param  # parameter index for buffers
        self.shape = shape
        self.decl = decl  # the AST node that declared it (for messages)

    @property
    def kind(self) -> str:
        """What the memory is, for messages."""
        if self.param is not None:
            return "buffer"
        return "per-thread array" if "thread" in self.mem else "threadgroup array"


class ShapeOf:
    """``A.shape``: the sizes of ``A``'s dimensions, read with a constant subscript."""

    __slots__ = ("mem",)

    def __init__(self, mem):
        self.mem = mem


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
