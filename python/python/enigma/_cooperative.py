"""Cooperative tensor operations, MetalPerformancePrimitives' names: the
descriptor of a ``matmul2d``, its execution scope and the operation object.

These are ordinary Python values, made outside a kernel or inside one (from
constants): a kernel reads them when it compiles. The tensors a kernel
multiplies (``enigma.tensor``) and the cooperative tensors it accumulates
into exist only inside a kernel; see ``docs/cooperative-tensors.md``.
"""

from __future__ import annotations

from ._lang import Intrinsic


class _DynamicExtent:
    """``enigma.dynamic_extent``: a descriptor's k taken from the left operand."""

    __slots__ = ()

    def __repr__(self):
        return "enigma.dynamic_extent"


dynamic_extent = _DynamicExtent()

_MODES = ("multiply", "multiply_accumulate")


class Matmul2dDescriptor:
    """``matmul2d_descriptor(m, n, k, transpose_left, transpose_right,
    relaxed_precision, mode)``: the product's shape and options."""

    __slots__ = ("m", "n", "k", "transpose_left", "transpose_right", "relaxed_precision", "mode")

    def __init__(self, m, n, k=dynamic_extent, transpose_left=False, transpose_right=False, relaxed_precision=False, mode="multiply"):
        for name, v in (("m", m), ("n", n)) + ((("k", k),) if k is not dynamic_extent else ()):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"matmul2d_descriptor: {name} must be a positive int (or enigma.dynamic_extent for k), not {v!r}")
        if mode not in _MODES:
            raise ValueError(f"matmul2d_descriptor: mode must be \"multiply\" or \"multiply_accumulate\", not {mode!r}")
        self.m, self.n, self.k, self.mode = m, n, k, mode
        self.transpose_left, self.transpose_right, self.relaxed_precision = bool(transpose_left), bool(transpose_right), bool(relaxed_precision)

    def ir(self) -> dict:
        return {
            "m": self.m,
            "n": self.n,
            "k": None if self.k is dynamic_extent else self.k,
            "transpose_left": self.transpose_left,
            "transpose_right": self.transpose_right,
            "relaxed_precision": self.relaxed_precision,
            "mode": self.mode,
        }

    def __repr__(self):
        return (f"enigma.matmul2d_descriptor({self.m}, {self.n}, {self.k!r}, transpose_left={self.transpose_left}, "
                f"transpose_right={self.transpose_right}, relaxed_precision={self.relaxed_precision}, mode={self.mode!r})")


def matmul2d_descriptor(m, n, k=dynamic_extent, transpose_left=False, transpose_right=False, relaxed_precision=False, mode="multiply") -> Matmul2dDescriptor:
    """The descriptor of an m×n product over k (``enigma.dynamic_extent``:
    the left operand's k extent), as MSL's ``matmul2d_descriptor``."""
    return Matmul2dDescriptor(m, n, k, transpose_left, transpose_right, relaxed_precision, mode)


class ExecutionScope:
    """``execution_simdgroup`` (each SIMD group alone) or
    ``execution_simdgroups(n)`` (the threadgroup's n SIMD groups together)."""

    __slots__ = ("simdgroups",)

    def __init__(self, simdgroups):
        self.simdgroups = simdgroups  # None: execution_simdgroup

    def ir(self):
        return "simdgroup" if self.simdgroups is None else {"simdgroups": self.simdgroups}

    def __repr__(self):
        return "enigma.execution_simdgroup" if self.simdgroups is None else f"enigma.execution_simdgroups({self.simdgroups})"


execution_simdgroup = ExecutionScope(None)


def execution_simdgroups(n) -> ExecutionScope:
    """The scope of ``n`` SIMD groups: the whole threadgroup, which must then
    have exactly ``n`` SIMD groups of 32 threads."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 32:
        raise ValueError(f"execution_simdgroups takes a SIMD-group count from 1 to 32, not {n!r}")
    return ExecutionScope(n)


class Matmul2d:
    """``matmul2d<descriptor, scope>``: inside a kernel, ``op.run(a, b, c)``,
    ``op.run_overlapped(a, b, c)`` (the operands, threadgroup views, stay
    the product's until the second threadgroup barrier after it: for
    pipelines that refill a stage two barriers later) and
    ``op.get_destination_cooperative_tensor(a, b, dtype)``."""

    __slots__ = ("desc", "scope")

    def __init__(self, desc, scope):
        if not isinstance(desc, Matmul2dDescriptor):
            raise TypeError(f"matmul2d takes an enigma.matmul2d_descriptor(...), not {desc!r}")
        if not isinstance(scope, ExecutionScope):
            raise TypeError(f"matmul2d takes enigma.execution_simdgroup or enigma.execution_simdgroups(n), not {scope!r}")
        self.desc, self.scope = desc, scope

    def __repr__(self):
        return f"enigma.matmul2d({self.desc!r}, {self.scope!r})"


def matmul2d(desc, scope) -> Matmul2d:
    """The operation ``matmul2d<desc, scope>``."""
    return Matmul2d(desc, scope)


# Made only inside a kernel: a 2-D view of a buffer or threadgroup array.
tensor = Intrinsic("tensor", "enigma.tensor(memory, (x extent, y extent), strides=(1, x extent)): a view, extents innermost first")

COMPILE_TIME = (matmul2d_descriptor, execution_simdgroups, matmul2d)
PUBLIC = {
    "dynamic_extent": dynamic_extent,
    "matmul2d_descriptor": matmul2d_descriptor,
    "execution_simdgroup": execution_simdgroup,
    "execution_simdgroups": execution_simdgroups,
    "matmul2d": matmul2d,
    "tensor": tensor,
}

