"""The kernel language's names, declared where editors and type checkers
can see them: every builtin, type and function a kernel may use, each with
its signature and a docstring of its own. ``import enigma`` re-exports them
all (``enigma.simd_sum``, ``enigma.f32``, ``enigma.thread_position_in_grid``);
``enigma.fast`` holds the ``fast::`` math functions, ``enigma.precise`` the
``precise::`` ones. docs/language.md is the
language reference.

None of these computes anything in Python: a kernel's source is compiled
(the function is never called), and the front end recognises each name by
the marker in ``enigma._lang`` that it stands for. Called outside a kernel,
they raise ``TypeError``.

To type-check kernels, a value inside a kernel is a :class:`Value` (what
arithmetic, indexing, swizzles and texture methods give), the types
(``enigma.f32``, ``enigma.float4`` …) are classes of it for checkers, and a
parameter that is not a buffer of a type is annotated with
``typing.Annotated`` (``n: Annotated[enigma.u32, enigma.constant(enigma.u32)]``)
or :data:`Constant` (``n: enigma.Constant[enigma.u32]``): the front end reads the
annotation it carries.

Adding a name: register it in ``enigma._lang`` (the front end's tables),
then declare it here with ``@_declare`` (signature, return type, docstring).
``python/tests/test_kernel_language.py`` fails while a registered name has
no declaration here (and ``_declare`` fails on import for a declared name
that is not registered).
"""

from __future__ import annotations

import functools
import types as _pytypes
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Generic, Optional, TypeVar, Union

from . import _lang
from . import _types

_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")


def _declare(fn: _F) -> _F:
    """The runtime object of the kernel-language function ``fn`` declares:
    a function of the same name, signature and docstring that raises
    ``TypeError`` when called from Python, and that the front end reads as
    the marker registered under that name (``fast.exp`` for ``enigma.fast.exp``,
    ``precise.exp`` for ``enigma.precise.exp``)."""
    namespace = next((ns for ns in ("fast", "precise") if fn.__module__.endswith("." + ns)), None)
    name = f"{namespace}.{fn.__name__}" if namespace else fn.__name__
    marker = getattr(getattr(_lang, namespace), fn.__name__, None) if namespace else _lang.INTRINSICS.get(name)
    if marker is None:
        raise RuntimeError(f"enigma.{name} is declared but the front end has no intrinsic of that name (enigma._lang)")

    @functools.wraps(fn)
    def outside_a_kernel(*args: Any, **kwargs: Any) -> Any:
        return marker(*args, **kwargs)  # raises TypeError: only inside a kernel

    outside_a_kernel.__enigma_marker__ = marker  # type: ignore[attr-defined]
    return outside_a_kernel  # type: ignore[return-value]


def marker_of(obj: Any) -> Any:
    """The front end's marker for a declared function, else ``obj`` itself."""
    if type(obj) is _pytypes.FunctionType:
        return getattr(obj, "__enigma_marker__", obj)
    return obj


class Value:
    """A value inside a kernel, as type checkers see it: a scalar, vector,
    buffer, threadgroup array, texture or matrix of the kernel. Arithmetic,
    comparisons, indexing, swizzles (``v.xy``) and texture methods
    (``tex.read(coord)``) on it give values. It has no instances: kernels
    are compiled from their source, never run in Python."""

    def __init__(self, *args: Any) -> None:
        raise TypeError("a kernel value only exists inside an @enigma.kernel function, which enigma compiles from its source")

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Value: ...
        def __call__(self, *args: Any, **kwargs: Any) -> Value: ...
        def __getitem__(self, index: Any) -> Value: ...
        def __setitem__(self, index: Any, value: Any) -> None: ...
        def __index__(self) -> int: ...
        def __add__(self, other: Any) -> Value: ...
        def __radd__(self, other: Any) -> Value: ...
        def __sub__(self, other: Any) -> Value: ...
        def __rsub__(self, other: Any) -> Value: ...
        def __mul__(self, other: Any) -> Value: ...
        def __rmul__(self, other: Any) -> Value: ...
        def __truediv__(self, other: Any) -> Value: ...
        def __rtruediv__(self, other: Any) -> Value: ...
        def __floordiv__(self, other: Any) -> Value: ...
        def __rfloordiv__(self, other: Any) -> Value: ...
        def __mod__(self, other: Any) -> Value: ...
        def __rmod__(self, other: Any) -> Value: ...
        def __pow__(self, other: Any) -> Value: ...
        def __rpow__(self, other: Any) -> Value: ...
        def __and__(self, other: Any) -> Value: ...
        def __rand__(self, other: Any) -> Value: ...
        def __or__(self, other: Any) -> Value: ...
        def __ror__(self, other: Any) -> Value: ...
        def __xor__(self, other: Any) -> Value: ...
        def __rxor__(self, other: Any) -> Value: ...
        def __lshift__(self, other: Any) -> Value: ...
        def __rlshift__(self, other: Any) -> Value: ...
        def __rshift__(self, other: Any) -> Value: ...
        def __rrshift__(self, other: Any) -> Value: ...
        def __neg__(self) -> Value: ...
        def __pos__(self) -> Value: ...
        def __invert__(self) -> Value: ...
        def __lt__(self, other: Any) -> bool: ...
        def __le__(self, other: Any) -> bool: ...
        def __gt__(self, other: Any) -> bool: ...
        def __ge__(self, other: Any) -> bool: ...


#: What a kernel function's numeric argument may be: a kernel value or a
#: Python number (which takes the other operand's type).
Num = Union[Value, float]

if TYPE_CHECKING:
    class Constant(Value, Generic[_T]):
        """``n: enigma.Constant[enigma.u32]``: a by-value scalar parameter."""
else:
    class Constant:
        """``n: enigma.Constant[enigma.u32]``: a by-value scalar parameter of
        that type, the same as ``n: enigma.constant(enigma.u32)`` in a form
        type checkers accept."""

        def __class_getitem__(cls, dtype: Any) -> Any:
            return _lang.ConstantParam(dtype)

        def __init__(self, *args: Any) -> None:
            raise TypeError("enigma.Constant[T] is an annotation: n: enigma.Constant[enigma.u32]")

# ---- builtins: MSL's attributes ---------------------------------------
thread_position_in_grid: Value = _lang.BUILTINS['thread_position_in_grid']
"""This thread's position in the grid (a ``uint3``; ``.x`` where a scalar is needed; ``("x")`` or ``(0)`` for one axis)."""
thread_position_in_threadgroup: Value = _lang.BUILTINS['thread_position_in_threadgroup']
"""This thread's position in its threadgroup (a ``uint3``)."""
threadgroup_position_in_grid: Value = _lang.BUILTINS['threadgroup_position_in_grid']
"""This threadgroup's position in the grid of threadgroups (a ``uint3``)."""
threads_per_threadgroup: Value = _lang.BUILTINS['threads_per_threadgroup']
"""The threadgroup's size (a ``uint3``; an edge threadgroup of ``dispatch_threads`` is partial)."""
threads_per_grid: Value = _lang.BUILTINS['threads_per_grid']
"""The grid's size in threads (a ``uint3``)."""
threadgroups_per_grid: Value = _lang.BUILTINS['threadgroups_per_grid']
"""The grid's size in threadgroups (a ``uint3``)."""
thread_index_in_threadgroup: Value = _lang.BUILTINS['thread_index_in_threadgroup']
"""This thread's flat index in its threadgroup (a ``uint``)."""
thread_index_in_simdgroup: Value = _lang.BUILTINS['thread_index_in_simdgroup']
"""This thread's lane in its SIMD group, 0 to 31 (a ``uint``)."""
simdgroup_index_in_threadgroup: Value = _lang.BUILTINS['simdgroup_index_in_threadgroup']
"""This thread's SIMD group in its threadgroup (a ``uint``)."""
simdgroups_per_threadgroup: Value = _lang.BUILTINS['simdgroups_per_threadgroup']
"""The number of SIMD groups in the threadgroup (a ``uint``)."""
threads_per_simdgroup: Value = _lang.BUILTINS['threads_per_simdgroup']
"""The SIMD width, 32 (a ``uint``)."""

# ---- types: the IR's scalars and MSL's names of scalars and vectors ----
if TYPE_CHECKING:
    class bool_(Value):
        """The value type ``bool_``: a buffer annotation, a cast (``enigma.bool_(x)``), a type argument."""
    class i8(Value):
        """The value type ``i8``: a buffer annotation, a cast (``enigma.i8(x)``), a type argument."""
    class i16(Value):
        """The value type ``i16``: a buffer annotation, a cast (``enigma.i16(x)``), a type argument."""
    class i32(Value):
        """The value type ``i32``: a buffer annotation, a cast (``enigma.i32(x)``), a type argument."""
    class i64(Value):
        """The value type ``i64``: a buffer annotation, a cast (``enigma.i64(x)``), a type argument."""
    class u8(Value):
        """The value type ``u8``: a buffer annotation, a cast (``enigma.u8(x)``), a type argument."""
    class u16(Value):
        """The value type ``u16``: a buffer annotation, a cast (``enigma.u16(x)``), a type argument."""
    class u32(Value):
        """The value type ``u32``: a buffer annotation, a cast (``enigma.u32(x)``), a type argument."""
    class u64(Value):
        """The value type ``u64``: a buffer annotation, a cast (``enigma.u64(x)``), a type argument."""
    class f16(Value):
        """The value type ``f16``: a buffer annotation, a cast (``enigma.f16(x)``), a type argument."""
    class bf16(Value):
        """The value type ``bf16``: a buffer annotation, a cast (``enigma.bf16(x)``), a type argument."""
    class f32(Value):
        """The value type ``f32``: a buffer annotation, a cast (``enigma.f32(x)``), a type argument."""
    class bool2(Value):
        """The value type ``bool2``: a buffer annotation, a cast (``enigma.bool2(x)``), a type argument."""
    class bool3(Value):
        """The value type ``bool3``: a buffer annotation, a cast (``enigma.bool3(x)``), a type argument."""
    class bool4(Value):
        """The value type ``bool4``: a buffer annotation, a cast (``enigma.bool4(x)``), a type argument."""
    class char2(Value):
        """The value type ``char2``: a buffer annotation, a cast (``enigma.char2(x)``), a type argument."""
    class char3(Value):
        """The value type ``char3``: a buffer annotation, a cast (``enigma.char3(x)``), a type argument."""
    class char4(Value):
        """The value type ``char4``: a buffer annotation, a cast (``enigma.char4(x)``), a type argument."""
    class short2(Value):
        """The value type ``short2``: a buffer annotation, a cast (``enigma.short2(x)``), a type argument."""
    class short3(Value):
        """The value type ``short3``: a buffer annotation, a cast (``enigma.short3(x)``), a type argument."""
    class short4(Value):
        """The value type ``short4``: a buffer annotation, a cast (``enigma.short4(x)``), a type argument."""
    class int2(Value):
        """The value type ``int2``: a buffer annotation, a cast (``enigma.int2(x)``), a type argument."""
    class int3(Value):
        """The value type ``int3``: a buffer annotation, a cast (``enigma.int3(x)``), a type argument."""
    class int4(Value):
        """The value type ``int4``: a buffer annotation, a cast (``enigma.int4(x)``), a type argument."""
    class long2(Value):
        """The value type ``long2``: a buffer annotation, a cast (``enigma.long2(x)``), a type argument."""
    class long3(Value):
        """The value type ``long3``: a buffer annotation, a cast (``enigma.long3(x)``), a type argument."""
    class long4(Value):
        """The value type ``long4``: a buffer annotation, a cast (``enigma.long4(x)``), a type argument."""
    class uchar(Value):
        """The value type ``uchar``: a buffer annotation, a cast (``enigma.uchar(x)``), a type argument."""
    class uchar2(Value):
        """The value type ``uchar2``: a buffer annotation, a cast (``enigma.uchar2(x)``), a type argument."""
    class uchar3(Value):
        """The value type ``uchar3``: a buffer annotation, a cast (``enigma.uchar3(x)``), a type argument."""
    class uchar4(Value):
        """The value type ``uchar4``: a buffer annotation, a cast (``enigma.uchar4(x)``), a type argument."""
    class ushort(Value):
        """The value type ``ushort``: a buffer annotation, a cast (``enigma.ushort(x)``), a type argument."""
    class ushort2(Value):
        """The value type ``ushort2``: a buffer annotation, a cast (``enigma.ushort2(x)``), a type argument."""
    class ushort3(Value):
        """The value type ``ushort3``: a buffer annotation, a cast (``enigma.ushort3(x)``), a type argument."""
    class ushort4(Value):
        """The value type ``ushort4``: a buffer annotation, a cast (``enigma.ushort4(x)``), a type argument."""
    class uint(Value):
        """The value type ``uint``: a buffer annotation, a cast (``enigma.uint(x)``), a type argument."""
    class uint2(Value):
        """The value type ``uint2``: a buffer annotation, a cast (``enigma.uint2(x)``), a type argument."""
    class uint3(Value):
        """The value type ``uint3``: a buffer annotation, a cast (``enigma.uint3(x)``), a type argument."""
    class uint4(Value):
        """The value type ``uint4``: a buffer annotation, a cast (``enigma.uint4(x)``), a type argument."""
    class ulong(Value):
        """The value type ``ulong``: a buffer annotation, a cast (``enigma.ulong(x)``), a type argument."""
    class ulong2(Value):
        """The value type ``ulong2``: a buffer annotation, a cast (``enigma.ulong2(x)``), a type argument."""
    class ulong3(Value):
        """The value type ``ulong3``: a buffer annotation, a cast (``enigma.ulong3(x)``), a type argument."""
    class ulong4(Value):
        """The value type ``ulong4``: a buffer annotation, a cast (``enigma.ulong4(x)``), a type argument."""
    class half(Value):
        """The value type ``half``: a buffer annotation, a cast (``enigma.half(x)``), a type argument."""
    class half2(Value):
        """The value type ``half2``: a buffer annotation, a cast (``enigma.half2(x)``), a type argument."""
    class half3(Value):
        """The value type ``half3``: a buffer annotation, a cast (``enigma.half3(x)``), a type argument."""
    class half4(Value):
        """The value type ``half4``: a buffer annotation, a cast (``enigma.half4(x)``), a type argument."""
    class bfloat(Value):
        """The value type ``bfloat``: a buffer annotation, a cast (``enigma.bfloat(x)``), a type argument."""
    class bfloat2(Value):
        """The value type ``bfloat2``: a buffer annotation, a cast (``enigma.bfloat2(x)``), a type argument."""
    class bfloat3(Value):
        """The value type ``bfloat3``: a buffer annotation, a cast (``enigma.bfloat3(x)``), a type argument."""
    class bfloat4(Value):
        """The value type ``bfloat4``: a buffer annotation, a cast (``enigma.bfloat4(x)``), a type argument."""
    class float2(Value):
        """The value type ``float2``: a buffer annotation, a cast (``enigma.float2(x)``), a type argument."""
    class float3(Value):
        """The value type ``float3``: a buffer annotation, a cast (``enigma.float3(x)``), a type argument."""
    class float4(Value):
        """The value type ``float4``: a buffer annotation, a cast (``enigma.float4(x)``), a type argument."""
    class simdgroup_half8x8(Value):
        """The SIMD-group matrix type ``simdgroup_half8x8``: a buffer annotation, a cast (``enigma.simdgroup_half8x8(x)``), a type argument."""
    class simdgroup_bfloat8x8(Value):
        """The SIMD-group matrix type ``simdgroup_bfloat8x8``: a buffer annotation, a cast (``enigma.simdgroup_bfloat8x8(x)``), a type argument."""
    class simdgroup_float8x8(Value):
        """The SIMD-group matrix type ``simdgroup_float8x8``: a buffer annotation, a cast (``enigma.simdgroup_float8x8(x)``), a type argument."""
else:
    bool_ = _types.PUBLIC_TYPES['bool_']
    i8 = _types.PUBLIC_TYPES['i8']
    i16 = _types.PUBLIC_TYPES['i16']
    i32 = _types.PUBLIC_TYPES['i32']
    i64 = _types.PUBLIC_TYPES['i64']
    u8 = _types.PUBLIC_TYPES['u8']
    u16 = _types.PUBLIC_TYPES['u16']
    u32 = _types.PUBLIC_TYPES['u32']
    u64 = _types.PUBLIC_TYPES['u64']
    f16 = _types.PUBLIC_TYPES['f16']
    bf16 = _types.PUBLIC_TYPES['bf16']
    f32 = _types.PUBLIC_TYPES['f32']
    bool2 = _types.PUBLIC_TYPES['bool2']
    bool3 = _types.PUBLIC_TYPES['bool3']
    bool4 = _types.PUBLIC_TYPES['bool4']
    char2 = _types.PUBLIC_TYPES['char2']
    char3 = _types.PUBLIC_TYPES['char3']
    char4 = _types.PUBLIC_TYPES['char4']
    short2 = _types.PUBLIC_TYPES['short2']
    short3 = _types.PUBLIC_TYPES['short3']
    short4 = _types.PUBLIC_TYPES['short4']
    int2 = _types.PUBLIC_TYPES['int2']
    int3 = _types.PUBLIC_TYPES['int3']
    int4 = _types.PUBLIC_TYPES['int4']
    long2 = _types.PUBLIC_TYPES['long2']
    long3 = _types.PUBLIC_TYPES['long3']
    long4 = _types.PUBLIC_TYPES['long4']
    uchar = _types.PUBLIC_TYPES['uchar']
    uchar2 = _types.PUBLIC_TYPES['uchar2']
    uchar3 = _types.PUBLIC_TYPES['uchar3']
    uchar4 = _types.PUBLIC_TYPES['uchar4']
    ushort = _types.PUBLIC_TYPES['ushort']
    ushort2 = _types.PUBLIC_TYPES['ushort2']
    ushort3 = _types.PUBLIC_TYPES['ushort3']
    ushort4 = _types.PUBLIC_TYPES['ushort4']
    uint = _types.PUBLIC_TYPES['uint']
    uint2 = _types.PUBLIC_TYPES['uint2']
    uint3 = _types.PUBLIC_TYPES['uint3']
    uint4 = _types.PUBLIC_TYPES['uint4']
    ulong = _types.PUBLIC_TYPES['ulong']
    ulong2 = _types.PUBLIC_TYPES['ulong2']
    ulong3 = _types.PUBLIC_TYPES['ulong3']
    ulong4 = _types.PUBLIC_TYPES['ulong4']
    half = _types.PUBLIC_TYPES['half']
    half2 = _types.PUBLIC_TYPES['half2']
    half3 = _types.PUBLIC_TYPES['half3']
    half4 = _types.PUBLIC_TYPES['half4']
    bfloat = _types.PUBLIC_TYPES['bfloat']
    bfloat2 = _types.PUBLIC_TYPES['bfloat2']
    bfloat3 = _types.PUBLIC_TYPES['bfloat3']
    bfloat4 = _types.PUBLIC_TYPES['bfloat4']
    float2 = _types.PUBLIC_TYPES['float2']
    float3 = _types.PUBLIC_TYPES['float3']
    float4 = _types.PUBLIC_TYPES['float4']
    simdgroup_half8x8 = _types.PUBLIC_TYPES['simdgroup_half8x8']
    simdgroup_bfloat8x8 = _types.PUBLIC_TYPES['simdgroup_bfloat8x8']
    simdgroup_float8x8 = _types.PUBLIC_TYPES['simdgroup_float8x8']

#: Every type name above (checked against ``_types.PUBLIC_TYPES``).
TYPE_NAMES = (
    'bool_', 'i8', 'i16', 'i32', 'i64', 'u8', 'u16', 'u32', 'u64', 'f16', 'bf16', 'f32', 'bool2',
    'bool3', 'bool4', 'char2', 'char3', 'char4', 'short2', 'short3', 'short4', 'int2', 'int3',
    'int4', 'long2', 'long3', 'long4', 'uchar', 'uchar2', 'uchar3', 'uchar4', 'ushort', 'ushort2',
    'ushort3', 'ushort4', 'uint', 'uint2', 'uint3', 'uint4', 'ulong', 'ulong2', 'ulong3', 'ulong4',
    'half', 'half2', 'half3', 'half4', 'bfloat', 'bfloat2', 'bfloat3', 'bfloat4', 'float2',
    'float3', 'float4', 'simdgroup_half8x8', 'simdgroup_bfloat8x8', 'simdgroup_float8x8',
)


# ---- functions and statements ------------------------------------------

@_declare
def exp(x: Num) -> Value:
    """``e`` to the power ``x`` (MSL ``exp``), float types."""
    ...


@_declare
def exp2(x: Num) -> Value:
    """``2`` to the power ``x`` (MSL ``exp2``)."""
    ...


@_declare
def log(x: Num) -> Value:
    """The natural logarithm of ``x`` (MSL ``log``)."""
    ...


@_declare
def log2(x: Num) -> Value:
    """The base-2 logarithm of ``x`` (MSL ``log2``)."""
    ...


@_declare
def sqrt(x: Num) -> Value:
    """The square root of ``x`` (MSL ``sqrt``)."""
    ...


@_declare
def rsqrt(x: Num) -> Value:
    """``1 / sqrt(x)`` (MSL ``rsqrt``)."""
    ...


@_declare
def tanh(x: Num) -> Value:
    """The hyperbolic tangent of ``x`` (MSL ``tanh``)."""
    ...


@_declare
def sin(x: Num) -> Value:
    """The sine of ``x`` radians (MSL ``sin``)."""
    ...


@_declare
def cos(x: Num) -> Value:
    """The cosine of ``x`` radians (MSL ``cos``)."""
    ...


@_declare
def floor(x: Num) -> Value:
    """The largest integral value not above ``x`` (MSL ``floor``)."""
    ...


@_declare
def ceil(x: Num) -> Value:
    """The smallest integral value not below ``x`` (MSL ``ceil``)."""
    ...


@_declare
def pow(x: Num, y: Num) -> Value:
    """``x`` to the power ``y`` (MSL ``pow``); Python's ``x ** y`` is the same."""
    ...


@_declare
def fma(a: Num, b: Num, c: Num) -> Value:
    """``a * b + c`` rounded once (MSL ``fma``)."""
    ...


@_declare
def abs(x: Num) -> Value:
    """The absolute value of ``x`` (MSL ``abs``); Python's ``abs`` is the same."""
    ...


@_declare
def min(a: Num, b: Num) -> Value:
    """The smaller of ``a`` and ``b`` (MSL ``min``); Python's ``min`` of two is the
    same."""
    ...


@_declare
def max(a: Num, b: Num) -> Value:
    """The larger of ``a`` and ``b`` (MSL ``max``); ``max(i - 2, 0)`` on unsigned
    ``i`` is refused (it never clamps)."""
    ...


@_declare
def clamp(x: Num, lo: Num, hi: Num) -> Value:
    """``min(max(x, lo), hi)`` (MSL ``clamp``)."""
    ...


@_declare
def select(a: Num, b: Num, cond: Num) -> Value:
    """``b`` where ``cond`` is true, else ``a`` (MSL ``select``, per component for
    vectors)."""
    ...


@_declare
def popcount(x: Num) -> Value:
    """The number of set bits of the integer ``x`` (MSL ``popcount``)."""
    ...


@_declare
def clz(x: Num) -> Value:
    """The number of leading zero bits of the integer ``x`` (MSL ``clz``)."""
    ...


@_declare
def ctz(x: Num) -> Value:
    """The number of trailing zero bits of the integer ``x`` (MSL ``ctz``)."""
    ...


@_declare
def simd_sum(x: Num) -> Value:
    """The sum of ``x`` over the active lanes of the SIMD group (MSL ``simd_sum``)."""
    ...


@_declare
def simd_product(x: Num) -> Value:
    """The product of ``x`` over the active lanes (MSL ``simd_product``)."""
    ...


@_declare
def simd_max(x: Num) -> Value:
    """The largest ``x`` of the active lanes (MSL ``simd_max``)."""
    ...


@_declare
def simd_min(x: Num) -> Value:
    """The smallest ``x`` of the active lanes (MSL ``simd_min``)."""
    ...


@_declare
def simd_and(x: Num) -> Value:
    """The bitwise and of the integer ``x`` over the active lanes (MSL
    ``simd_and``)."""
    ...


@_declare
def simd_or(x: Num) -> Value:
    """The bitwise or of the integer ``x`` over the active lanes (MSL ``simd_or``)."""
    ...


@_declare
def simd_xor(x: Num) -> Value:
    """The bitwise xor of the integer ``x`` over the active lanes (MSL
    ``simd_xor``)."""
    ...


@_declare
def simd_broadcast(x: Num, lane: Num) -> Value:
    """``x`` of lane ``lane`` (a uniform value), to every lane (MSL
    ``simd_broadcast``)."""
    ...


@_declare
def simd_broadcast_first(x: Num) -> Value:
    """``x`` of the first active lane, to every lane (MSL
    ``simd_broadcast_first``)."""
    ...


@_declare
def simd_shuffle(x: Num, lane: Num) -> Value:
    """``x`` of lane ``lane`` (per lane; an inactive source lane is a sanitizer
    finding) (MSL ``simd_shuffle``)."""
    ...


@_declare
def simd_shuffle_up(x: Num, delta: Num) -> Value:
    """``x`` of lane ``i - delta`` (lanes below ``delta`` keep their own) (MSL
    ``simd_shuffle_up``)."""
    ...


@_declare
def simd_shuffle_down(x: Num, delta: Num) -> Value:
    """``x`` of lane ``i + delta`` (lanes past the end keep their own) (MSL
    ``simd_shuffle_down``)."""
    ...


@_declare
def simd_shuffle_xor(x: Num, mask: Num) -> Value:
    """``x`` of lane ``i ^ mask`` (MSL ``simd_shuffle_xor``)."""
    ...


@_declare
def simd_prefix_inclusive_sum(x: Num) -> Value:
    """The sum of ``x`` over the active lanes up to and including this one (MSL
    ``simd_prefix_inclusive_sum``)."""
    ...


@_declare
def simd_prefix_exclusive_sum(x: Num) -> Value:
    """The sum of ``x`` over the active lanes before this one (MSL
    ``simd_prefix_exclusive_sum``)."""
    ...


@_declare
def simd_all(cond: Num) -> Value:
    """Whether ``cond`` holds on every active lane (MSL ``simd_all``)."""
    ...


@_declare
def simd_any(cond: Num) -> Value:
    """Whether ``cond`` holds on some active lane (MSL ``simd_any``)."""
    ...


@_declare
def simd_ballot(cond: Num) -> Value:
    """The active lanes where ``cond`` holds, as a bit mask (u64) (MSL
    ``simd_ballot``)."""
    ...


@_declare
def simd_is_first() -> Value:
    """Whether this lane is the first active lane of the SIMD group (MSL
    ``simd_is_first``)."""
    ...


@_declare
def cmp_eq(a: Num, b: Num) -> Value:
    """``a == b`` (per component for vectors: a bool vector)."""
    ...


@_declare
def cmp_ne(a: Num, b: Num) -> Value:
    """``a != b`` (per component for vectors)."""
    ...


@_declare
def cmp_lt(a: Num, b: Num) -> Value:
    """``a < b`` (per component for vectors)."""
    ...


@_declare
def cmp_le(a: Num, b: Num) -> Value:
    """``a <= b`` (per component for vectors)."""
    ...


@_declare
def cmp_gt(a: Num, b: Num) -> Value:
    """``a > b`` (per component for vectors)."""
    ...


@_declare
def cmp_ge(a: Num, b: Num) -> Value:
    """``a >= b`` (per component for vectors)."""
    ...


@_declare
def if_(cond: Num) -> ContextManager[None]:
    """``with enigma.if_(cond):`` runs its block where ``cond`` holds (a plain
    ``if`` is the same)."""
    ...


@_declare
def elif_(cond: Num) -> ContextManager[None]:
    """``with enigma.elif_(cond):`` right after an ``if_`` or ``elif_`` block."""
    ...


@_declare
def else_() -> ContextManager[None]:
    """``with enigma.else_():`` right after an ``if_`` or ``elif_`` block."""
    ...


@_declare
def for_range(start: Num, end: Optional[Num] = None, step: Num = 1) -> ContextManager[Value]:
    """``with enigma.for_range(start, end[, step]) as i:`` loops as ``for i in
    range(start, end, step)`` (one argument: the end, from 0)."""
    ...


@_declare
def barrier(mem_flags: str = "mem_threadgroup") -> None:
    """``threadgroup_barrier(mem_flags)``: every thread of the threadgroup waits
    here; ``mem_flags`` is ``"mem_none"``, ``"mem_threadgroup"``,
    ``"mem_device"``, ``"mem_device|mem_threadgroup"`` or ``"mem_texture"``."""
    ...


@_declare
def threadgroup_barrier(mem_flags: str = "mem_threadgroup") -> None:
    """MSL's ``threadgroup_barrier(mem_flags)``: every thread of the threadgroup
    waits here (see :func:`barrier`)."""
    ...


@_declare
def simdgroup_barrier(mem_flags: str = "mem_none") -> None:
    """MSL's ``simdgroup_barrier(mem_flags)``: the lanes of the SIMD group wait for
    each other."""
    ...


@_declare
def threadgroup_alloc(type: Any, length: Optional[int] = None, shape: Any = None) -> Value:
    """Threadgroup memory: ``tile = enigma.threadgroup_alloc(enigma.f32, 256)``, or
    with a shape, ``enigma.threadgroup_alloc(enigma.f32, (16, 16))``
    (indexed ``tile[i, j]``); assign it to a name."""
    ...


@_declare
def load_if(buffer: Any, index: Num, cond: Num, default: Num) -> Value:
    """``buffer[index]`` where ``cond`` holds, else ``default`` (the buffer is not
    read: no out-of-bounds access)."""
    ...


@_declare
def spec(name: str, type: Any, default: Num) -> Value:
    """A specialisation constant (an MSL function constant) named ``name`` of
    scalar ``type``, ``default`` unless :func:`enigma.compile` sets it
    (``enigma.compile(k, TILE=64)``)."""
    ...


@_declare
def as_type(type: Any, value: Num) -> Value:
    """The bits of ``value`` read as ``type`` of the same size (MSL ``as_type``)."""
    ...


@_declare
def atomic_compare_exchange(buffer: Any, index: Num, expected: Num, desired: Num) -> Value:
    """Atomically sets ``buffer[index]`` to ``desired`` if it holds ``expected``;
    returns the value it held (MSL
    ``atomic_compare_exchange_weak_explicit``, retried)."""
    ...


@_declare
def async_copy(dst: Any, src: Any, count: int = 1, valid: Num = True) -> None:
    """Starts copying ``count`` elements from device buffer element ``src``
    (``src[j]``) to threadgroup array element ``dst`` (``tile[i]``): 4, 8 or
    16 bytes, zeros where ``valid`` is false (``src`` is not read). CUDA's
    ``cp.async``."""
    ...


@_declare
def async_commit() -> None:
    """Closes this thread's group of :func:`async_copy` calls."""
    ...


@_declare
def async_wait(pending: int) -> None:
    """Waits until at most ``pending`` (a constant, at most 7) of this thread's
    committed copy groups are in flight; a barrier then makes the copies
    visible to every thread."""
    ...


@_declare
def tile_copy(barrier: Num, dst: Any, src: Any, extents: Any, pitch: Num, origin: Any, box: Any) -> None:
    """The threadgroup copies the ``box`` (``(rows, columns)``, constants)
    of the row-major matrix of device buffer ``src`` whose ``extents`` are
    ``(rows, columns)`` (a row every ``pitch`` elements; by-value parameters
    and constants) starting at ``origin`` (``(row, column)``, inside the
    matrix, the column a multiple of 16 bytes into its row) into threadgroup array element ``dst`` (``tile[i]``) on, row
    after row, zeros past the matrix's last row or column; complete at
    :func:`tile_wait` on ``barrier`` (0 to 7). Every thread reaches it with
    the same operands. CUDA sm_90's tensor copy engine; elsewhere the
    threads copy the box."""
    ...


@_declare
def tile_wait(barrier: Num) -> None:
    """Waits for every :func:`tile_copy` issued on ``barrier`` since its
    previous wait; their boxes are then readable by this thread."""
    ...


@_declare
def device_fence() -> None:
    """Orders this thread's device-memory accesses for every thread of the dispatch
    (CUDA ``__threadfence()``, MSL 3.2's device-scoped
    ``atomic_thread_fence``). With an atomic it hands results from one
    threadgroup to another: every thread writes and fences,
    ``threadgroup_barrier``, one thread takes a ticket with
    ``enigma.atomic_add``; in the threadgroup with the last ticket, after a
    barrier, every thread fences and reads what all wrote. (On Metal device
    memory is coherent only within a threadgroup: one fencing thread orders
    only itself, and the sanitizer reports such reads as races.)"""
    ...


@_declare
def print(format: str, *values: Num) -> None:
    """Prints one line from this thread: ``format`` (a string literal) with
    each ``{}`` replaced by the next of ``values`` (scalars; ``{{`` and
    ``}}`` print braces). Integers print in decimal, floats as C's ``%g``,
    bools as ``true``/``false``. On the simulator each line starts with the
    thread's grid position, ``thread (x,y,z): ``, and a dispatch's lines
    are written to standard output after it, SIMD group by SIMD group in
    dispatch order — the first 4096, then a note of how many more. On CUDA
    it is ``printf`` (lines appear when the GPU is synchronised); on Metal,
    shader logging (``os_log_default.log``, MSL 3.2)."""
    ...


@_declare
def simdgroup_load(type: Any, src: Any, offset: Num, elements_per_row: Num, transpose: bool = False) -> Value:
    """A SIMD-group matrix of ``type`` (:func:`enigma.simdgroup_matrix`) loaded
    from ``src`` (a buffer or threadgroup array) at ``offset``, rows
    ``elements_per_row`` apart (MSL ``simdgroup_load``)."""
    ...


@_declare
def simdgroup_load_quantized(type: Any, code: str, words: Any, offset: Num, words_per_row: Num, scales: Any, scale_offset: Num, layout: str = "rows") -> Value:
    """A SIMD-group matrix decoded from 4-bit ``code`` (``"int4"`` or ``"fp4"``)
    words at ``offset`` (rows of ``words_per_row`` words, 8 values each)
    times the f16 ``scales`` from ``scale_offset``; ``layout`` ``"rows"`` or
    ``"fragments"``."""
    ...


@_declare
def simdgroup_store(matrix: Any, dst: Any, offset: Num, elements_per_row: Num, transpose: bool = False) -> None:
    """Stores SIMD-group matrix ``matrix`` into ``dst`` at ``offset``, rows
    ``elements_per_row`` apart (MSL ``simdgroup_store``)."""
    ...


@_declare
def make_filled_simdgroup_matrix(type: Any, value: Num) -> Value:
    """A SIMD-group matrix of ``type`` with every element ``value`` (MSL
    ``make_filled_simdgroup_matrix``)."""
    ...


@_declare
def simdgroup_multiply(a: Any, b: Any) -> Value:
    """The matrix product ``a @ b`` of two SIMD-group matrices (MSL
    ``simdgroup_multiply``)."""
    ...


@_declare
def simdgroup_multiply_accumulate(a: Any, b: Any, c: Any) -> Value:
    """``a @ b + c`` of SIMD-group matrices (MSL
    ``simdgroup_multiply_accumulate``)."""
    ...


@_declare
def thread_element(matrix: Any, index: int) -> Value:
    """Element ``index`` of this lane's share of ``matrix`` (MSL
    ``thread_elements()[index]``); it can be assigned."""
    ...


@_declare
def thread_element_row(type: Any, index: int) -> Value:
    """The row of this lane's element ``index`` in a matrix of ``type``."""
    ...


@_declare
def thread_element_col(type: Any, index: int) -> Value:
    """The column of this lane's element ``index`` in a matrix of ``type``."""
    ...


@_declare
def atomic_add(buffer: Any, index: Num, value: Num) -> Value:
    """Atomically adds ``value`` to ``buffer[index]``; returns the value it held
    (MSL ``atomic_fetch_add_explicit``)."""
    ...


@_declare
def atomic_sub(buffer: Any, index: Num, value: Num) -> Value:
    """Atomically subtracts ``value`` from ``buffer[index]``; returns the value it
    held."""
    ...


@_declare
def atomic_min(buffer: Any, index: Num, value: Num) -> Value:
    """Atomically sets ``buffer[index]`` to the smaller of it and ``value``;
    returns the value it held."""
    ...


@_declare
def atomic_max(buffer: Any, index: Num, value: Num) -> Value:
    """Atomically sets ``buffer[index]`` to the larger of it and ``value``; returns
    the value it held."""
    ...


@_declare
def atomic_and(buffer: Any, index: Num, value: Num) -> Value:
    """Atomically ands ``value`` into ``buffer[index]``; returns the value it held."""
    ...


@_declare
def atomic_or(buffer: Any, index: Num, value: Num) -> Value:
    """Atomically ors ``value`` into ``buffer[index]``; returns the value it held."""
    ...


@_declare
def atomic_xor(buffer: Any, index: Num, value: Num) -> Value:
    """Atomically xors ``value`` into ``buffer[index]``; returns the value it held."""
    ...


@_declare
def atomic_exchange(buffer: Any, index: Num, value: Num) -> Value:
    """Atomically stores ``value`` in ``buffer[index]``; returns the value it held."""
    ...


#: The names ``import enigma`` re-exports.
@_declare
def tan(x: Num) -> Value:
    """The tangent of ``x`` (MSL ``tan``), float types."""
    ...


@_declare
def sinh(x: Num) -> Value:
    """The hyperbolic sine of ``x`` (MSL ``sinh``)."""
    ...


@_declare
def cosh(x: Num) -> Value:
    """The hyperbolic cosine of ``x`` (MSL ``cosh``)."""
    ...


@_declare
def asin(x: Num) -> Value:
    """The arc sine of ``x`` in radians (MSL ``asin``)."""
    ...


@_declare
def acos(x: Num) -> Value:
    """The arc cosine of ``x`` in radians (MSL ``acos``)."""
    ...


@_declare
def atan(x: Num) -> Value:
    """The arc tangent of ``x`` in radians (MSL ``atan``)."""
    ...


@_declare
def atan2(y: Num, x: Num) -> Value:
    """The angle of the point ``(x, y)``, in (-π, π] (MSL ``atan2``)."""
    ...


@_declare
def asinh(x: Num) -> Value:
    """The inverse hyperbolic sine of ``x`` (MSL ``asinh``)."""
    ...


@_declare
def acosh(x: Num) -> Value:
    """The inverse hyperbolic cosine of ``x`` (MSL ``acosh``)."""
    ...


@_declare
def atanh(x: Num) -> Value:
    """The inverse hyperbolic tangent of ``x`` (MSL ``atanh``)."""
    ...


@_declare
def isnan(x: Num) -> Value:
    """Whether ``x`` is a NaN: a bool, or a bool vector of ``x``'s width (MSL ``isnan``)."""
    ...


@_declare
def isinf(x: Num) -> Value:
    """Whether ``x`` is +inf or -inf: a bool, or a bool vector of ``x``'s width (MSL ``isinf``)."""
    ...


@_declare
def isfinite(x: Num) -> Value:
    """Whether ``x`` is neither infinite nor a NaN: a bool, or a bool vector of ``x``'s width (MSL ``isfinite``)."""
    ...


@_declare
def erf(x: Num) -> Value:
    """The error function of ``x`` (CUDA ``erff``; on MSL, which has none, enigma's helper for scalars, within 3 ULP; docs/kernel-functions.md gives the accuracy)."""
    ...


@_declare
def erfc(x: Num) -> Value:
    """The complementary error function ``1 - erf(x)`` without its cancellation (CUDA ``erfcf``; on MSL enigma's helper for scalars, within 6 ULP)."""
    ...


@_declare
def log1p(x: Num) -> Value:
    """``log(1 + x)``, accurate for small ``x`` (CUDA ``log1pf``; on MSL enigma's helper for scalars, within 3 ULP)."""
    ...


@_declare
def expm1(x: Num) -> Value:
    """``exp(x) - 1``, accurate for small ``x`` (CUDA ``expm1f``; on MSL enigma's helper for scalars, within 2 ULP)."""
    ...


@_declare
def round(x: Num) -> Value:
    """``x`` rounded to the nearest integer, halves away from zero (MSL ``round``)."""
    ...


@_declare
def trunc(x: Num) -> Value:
    """``x`` rounded toward zero (MSL ``trunc``)."""
    ...


@_declare
def rint(x: Num) -> Value:
    """``x`` rounded to the nearest integer, halves to even (MSL ``rint``)."""
    ...


@_declare
def copysign(x: Num, y: Num) -> Value:
    """``|x|`` with the sign of ``y`` (MSL ``copysign``)."""
    ...


@_declare
def fmod(x: Num, y: Num) -> Value:
    """The remainder of ``x / y`` with the sign of ``x`` (MSL ``fmod``, as ``%`` on floats)."""
    ...


@_declare
def sign(x: Num) -> Value:
    """-1, 0 or 1 by the sign of ``x`` (MSL ``sign``; NaN gives 0)."""
    ...


@_declare
def saturate(x: Num) -> Value:
    """``x`` clamped to [0, 1] (MSL ``saturate``)."""
    ...


@_declare
def mix(x: Num, y: Num, a: Num) -> Value:
    """``x + (y - x) * a``, linear interpolation (MSL ``mix``)."""
    ...


@_declare
def step(edge: Num, x: Num) -> Value:
    """0 where ``x < edge``, else 1 (MSL ``step``)."""
    ...


@_declare
def smoothstep(edge0: Num, edge1: Num, x: Num) -> Value:
    """The Hermite step from 0 at ``edge0`` to 1 at ``edge1`` (MSL ``smoothstep``)."""
    ...


@_declare
def thread_array(type: Any, shape: Any) -> Value:
    """An array each thread has its own copy of (MSL's ``thread T name[N]``):
    ``acc = enigma.thread_array(enigma.f32, 8)``, or a shape ``(4, 4)``
    indexed ``acc[i, j]``; its elements start unset (reading one before the
    thread writes it is a sanitizer finding)."""
    ...


@_declare
def static_range(start: int, end: Optional[int] = None, step: int = 1) -> "range":
    """``for i in enigma.static_range(8):`` loops as ``range`` does, unrolled at
    compile time (constant bounds; ``#pragma unroll``), so a per-thread array
    indexed by ``i`` stays in registers."""
    ...


__all__ = [
    'Value', 'Constant', 'thread_position_in_grid', 'thread_position_in_threadgroup',
    'threadgroup_position_in_grid', 'threads_per_threadgroup', 'threads_per_grid',
    'threadgroups_per_grid', 'thread_index_in_threadgroup', 'thread_index_in_simdgroup',
    'simdgroup_index_in_threadgroup', 'simdgroups_per_threadgroup', 'threads_per_simdgroup', 'exp',
    'exp2', 'log', 'log2', 'sqrt', 'rsqrt', 'tanh', 'sin', 'cos', 'floor', 'ceil', 'pow', 'fma',
    'abs', 'min', 'max', 'clamp', 'select', 'popcount', 'clz', 'ctz', 'simd_sum', 'simd_product',
    'simd_max', 'simd_min', 'simd_and', 'simd_or', 'simd_xor', 'simd_broadcast',
    'simd_broadcast_first', 'simd_shuffle', 'simd_shuffle_up', 'simd_shuffle_down',
    'simd_shuffle_xor', 'simd_prefix_inclusive_sum', 'simd_prefix_exclusive_sum', 'simd_all',
    'simd_any', 'simd_ballot', 'simd_is_first', 'cmp_eq', 'cmp_ne', 'cmp_lt', 'cmp_le', 'cmp_gt',
    'cmp_ge', 'if_', 'elif_', 'else_', 'for_range', 'barrier', 'threadgroup_barrier',
    'simdgroup_barrier', 'threadgroup_alloc', 'load_if', 'spec', 'as_type',
    'atomic_compare_exchange', 'async_copy', 'async_commit', 'async_wait', 'tile_copy', 'tile_wait', 'device_fence',
    'simdgroup_load', 'simdgroup_load_quantized', 'simdgroup_store', 'make_filled_simdgroup_matrix',
    'simdgroup_multiply', 'simdgroup_multiply_accumulate', 'thread_element', 'thread_element_row',
    'thread_element_col', 'atomic_add', 'atomic_sub', 'atomic_min', 'atomic_max', 'atomic_and',
    'atomic_or', 'atomic_xor', 'atomic_exchange', 'bool_', 'i8', 'i16', 'i32', 'i64', 'u8', 'u16',
    'u32', 'u64', 'f16', 'bf16', 'f32', 'bool2', 'bool3', 'bool4', 'char2', 'char3', 'char4',
    'short2', 'short3', 'short4', 'int2', 'int3', 'int4', 'long2', 'long3', 'long4', 'uchar',
    'uchar2', 'uchar3', 'uchar4', 'ushort', 'ushort2', 'ushort3', 'ushort4', 'uint', 'uint2',
    'uint3', 'uint4', 'ulong', 'ulong2', 'ulong3', 'ulong4', 'half', 'half2', 'half3', 'half4',
    'bfloat', 'bfloat2', 'bfloat3', 'bfloat4', 'float2', 'float3', 'float4', 'simdgroup_half8x8',
    'simdgroup_bfloat8x8', 'simdgroup_float8x8', 'tan', 'sinh', 'cosh', 'asin', 'acos', 'atan', 'atan2', 'asinh', 'acosh', 'atanh', 'erf', 'erfc', 'log1p', 'expm1', 'round', 'trunc', 'rint', 'copysign', 'fmod', 'sign', 'saturate', 'mix', 'step', 'smoothstep',
    'thread_array', 'static_range', 'isnan', 'isinf', 'isfinite', 'print',
]
