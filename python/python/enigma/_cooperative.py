"""Cooperative tensor operations, MetalPerformancePrimitives' names: the
descriptor of a ``matmul2d``, its execution scope and the operation object.

These are ordinary Python values, made outside a kernel or inside one (from
constants): a kernel reads them when it compiles. The tensors a kernel
multiplies (``enigma.tensor``) and the cooperative tensors it accumulates
into exist only inside a kernel; see ``docs/cooperative-tensors.md``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Union

from ._lang import Intrinsic, outside_a_kernel
from ._language import Num, Value


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


def matmul2d_descriptor(m: int, n: int, k: Union[int, _DynamicExtent] = dynamic_extent, transpose_left: bool = False, transpose_right: bool = False,
                        relaxed_precision: bool = False, mode: str = "multiply") -> Matmul2dDescriptor:
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


def execution_simdgroups(n: int) -> ExecutionScope:
    """The scope of ``n`` SIMD groups: the whole threadgroup, which must then
    have exactly ``n`` SIMD groups of 32 threads."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 32:
        raise ValueError(f"execution_simdgroups takes a SIMD-group count from 1 to 32, not {n!r}")
    return ExecutionScope(n)


class Matmul2d:
    """``matmul2d<descriptor, scope>``: inside a kernel, ``op.run(a, b, c)``,
    ``op.run_overlapped(a, b, c)`` (the operands, threadgroup views, stay
    the product's until the second threadgroup barrier after it: for
    pipelines that refill a stage two barriers later),
    ``op.get_destination_cooperative_tensor(a, b, dtype)`` and
    ``op.get_left_input_cooperative_tensor(dtype)``."""

    __slots__ = ("desc", "scope")

    def __init__(self, desc, scope):
        if not isinstance(desc, Matmul2dDescriptor):
            raise TypeError(f"matmul2d takes an enigma.matmul2d_descriptor(...), not {desc!r}")
        if not isinstance(scope, ExecutionScope):
            raise TypeError(f"matmul2d takes enigma.execution_simdgroup or enigma.execution_simdgroups(n), not {scope!r}")
        self.desc, self.scope = desc, scope

    def __repr__(self):
        return f"enigma.matmul2d({self.desc!r}, {self.scope!r})"

    # Inside a kernel the front end lowers these calls; the declarations
    # give editors and type checkers their signatures.

    def run(self, left: Union[TensorView, CooperativeTensor], right: TensorView, destination: CooperativeTensor) -> None:
        """``destination (+)= left · right`` (the descriptor's mode): the
        left operand a view or a cooperative tensor, the right a view."""
        raise outside_a_kernel("matmul2d.run(...)")

    def run_overlapped(self, left: Union[TensorView, CooperativeTensor], right: TensorView, destination: CooperativeTensor) -> None:
        """:meth:`run`, whose threadgroup operands stay the product's until
        the second threadgroup barrier after it (a pipeline that refills
        the stage two barriers later), so that products overlap."""
        raise outside_a_kernel("matmul2d.run_overlapped(...)")

    def get_destination_cooperative_tensor(self, left: Union[TensorView, CooperativeTensor], right: TensorView, dtype: Any) -> CooperativeTensor:
        """A new cooperative tensor of ``dtype`` shaped as this product's
        destination (m × n, spread over the scope's threads)."""
        raise outside_a_kernel("matmul2d.get_destination_cooperative_tensor(...)")

    def get_left_input_cooperative_tensor(self, dtype: Any) -> CooperativeTensor:
        """A new cooperative tensor of ``dtype`` (f16, bf16 or f32) shaped as
        this product's left operand (m × k, spread over the scope's
        threads), which :meth:`run` takes as ``left``; its contents are
        unspecified until written (:meth:`CooperativeTensor.dequantize`,
        ``fill``, ``load``, slots). The descriptor needs a static k and
        ``transpose_left=False``."""
        raise outside_a_kernel("matmul2d.get_left_input_cooperative_tensor(...)")


def matmul2d(desc: Matmul2dDescriptor, scope: ExecutionScope) -> Matmul2d:
    """The operation ``matmul2d<desc, scope>``."""
    return Matmul2d(desc, scope)


class TensorView:
    """What ``enigma.tensor(...)`` gives inside a kernel: a 2-D view of a
    buffer or threadgroup array, extents innermost first. Declared for type
    checkers; views exist only inside a kernel."""

    __slots__ = ()

    def slice(self, x: Num, y: Num) -> TensorView:
        """The view from element (x, y) on, its extents shortened to match."""
        raise outside_a_kernel("tensor.slice(...)")


class CooperativeTensor:
    """A cooperative tensor inside a kernel (from
    ``matmul2d.get_destination_cooperative_tensor``,
    ``matmul2d.get_left_input_cooperative_tensor`` or a row or column
    reduction): its elements spread over the scope's threads, each thread
    holding its slots. ``t[i]`` reads and ``t[i] = v`` writes slot ``i``.
    Declared for type checkers; these exist only inside a kernel."""

    __slots__ = ()

    def __getitem__(self, index: Num) -> Value:
        raise outside_a_kernel("a cooperative tensor's slot")

    def __setitem__(self, index: Num, value: Num) -> None:
        raise outside_a_kernel("a cooperative tensor's slot")

    def get_capacity(self) -> Value:
        """The number of slots each thread holds (u32)."""
        raise outside_a_kernel("get_capacity(...)")

    def is_valid_element(self, index: Num) -> Value:
        """Whether slot ``index`` of this thread holds an element (bool)."""
        raise outside_a_kernel("is_valid_element(...)")

    def get_multidimensional_index(self, index: Num) -> Value:
        """Slot ``index``'s coordinates as a ``uint2`` (column, row)."""
        raise outside_a_kernel("get_multidimensional_index(...)")

    def load(self, tensor: TensorView) -> None:
        """Every element from the view (zeros past its extents)."""
        raise outside_a_kernel("load(...)")

    def store(self, tensor: TensorView) -> None:
        """Every element into the view (none past its extents)."""
        raise outside_a_kernel("store(...)")

    def fill(self, value: Num) -> None:
        """Every element set to ``value``."""
        raise outside_a_kernel("fill(...)")

    def map(self, function: Callable[[Value, Value, Value], Num]) -> None:
        """Each element replaced by ``function(value, column, row)`` (a lambda)."""
        raise outside_a_kernel("map(...)")

    def reduce_rows(self, op: str) -> CooperativeTensor:
        """A new m × 1 tensor: each row reduced by ``"sum"``, ``"max"`` or ``"min"``."""
        raise outside_a_kernel("reduce_rows(...)")

    def reduce_columns(self, op: str) -> CooperativeTensor:
        """A new 1 × n tensor: each column reduced by ``"sum"``, ``"max"`` or ``"min"``."""
        raise outside_a_kernel("reduce_columns(...)")

    def combine(self, source: CooperativeTensor, op: str) -> None:
        """Each element set to ``op(element, source's element at its
        coordinates)``: ``source`` of this shape, m × 1 or 1 × n; ``op`` one
        of ``"assign"``, ``"add"``, ``"sub"``, ``"mul"``, ``"max"``, ``"min"``."""
        raise outside_a_kernel("combine(...)")

    def dequantize(self, code: str, words: Any, word_offset: Num, word_stride: Num, scales: Any, scale_offset: Num, scale_stride: Num,
                   group_shift: Num, layout: str = "rows", biases: Any = None) -> None:
        """Every element (row r, column c) of this f32 or f16 tensor set to a
        4-bit weight times its group's scale, the exact product rounded
        once to the tensor's type: the weight is nibble ``c % 8`` (bits
        ``4·(c % 8)`` up) of ``words[word_offset + (c // 8) * word_stride +
        r]`` decoded as ``code`` (``"int4"``: the nibble minus 8; ``"fp4"``:
        E2M1, ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}), the scale
        ``scales[scale_offset + (c >> group_shift) * scale_stride + r]``.
        ``words`` (u32) and ``scales`` (f16) are buffers or threadgroup
        arrays in seed 002's ``[K/8][N]`` and ``[K/group][N]`` layouts: the
        tensor's rows are the weights' N columns and its columns K, so a
        left input tensor holds the transposed weights of ``Cᵀ = Wᵀ · Aᵀ``.
        The offsets, strides and shift are u32 and the same on every thread
        of the scope, which calls this together. ``layout="fragments"``
        reads the words in the tensor cores' fragment order instead (the
        ``layout="fragments"`` packing of ``enigma.ops.quantize``): units of
        64 K values by 16 columns, 128 words each, a row of units every
        ``word_stride`` words; within a unit, word ``4·l + q`` holds lane
        ``l``'s weights of K rows ``16q …`` (nibble ``h + 2·half + 4·p`` is
        K row ``16q + 8h + 2·(l % 4) + p``, column ``8·half + l // 4``), so
        on CUDA a thread's words of a unit are one 16-byte load.
        ``layout="columns"`` reads MLX's ``[N][K/8]`` words and
        ``[N][K/group]`` scales: the weight is nibble ``c % 8`` of
        ``words[word_offset + r * word_stride + c // 8]``, the scale
        ``scales[scale_offset + r * scale_stride + (c >> group_shift)]``.
        ``code="uint4"`` decodes the nibble as it is (0 … 15), and
        ``biases`` (f16, indexed as the scales) adds each group's bias: the
        weight is then ``code · scale + bias``, the exact value rounded once
        (MLX's affine format is ``"uint4"`` in ``"columns"`` with biases)."""
        raise outside_a_kernel("dequantize(...)")


# The front end's marker for `enigma.tensor`.
TENSOR_INTRINSIC = Intrinsic("tensor", "enigma.tensor(memory, (x extent, y extent), strides=(1, x extent)): a view, extents innermost first")


def tensor(memory: Any, extents: Tuple[Num, Num], strides: Optional[Tuple[Num, Num]] = None) -> TensorView:
    """A 2-D view of a buffer parameter or threadgroup array of scalars,
    extents innermost first (as MSL's ``dextents``), strides ``(1, x
    extent)`` unless given. Only inside a kernel."""
    raise outside_a_kernel("enigma.tensor(...)")


tensor.__enigma_marker__ = TENSOR_INTRINSIC  # type: ignore[attr-defined]

COMPILE_TIME = (matmul2d_descriptor, execution_simdgroups, matmul2d)
PUBLIC = {
    "dynamic_extent": dynamic_extent,
    "matmul2d_descriptor": matmul2d_descriptor,
    "execution_simdgroup": execution_simdgroup,
    "execution_simdgroups": execution_simdgroups,
    "matmul2d": matmul2d,
    "tensor": tensor,
}

