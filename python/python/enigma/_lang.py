"""The front end's tables of the kernel language: builtins, intrinsics and
statements, and the annotations of parameters.

Every builtin and intrinsic here is a marker that the front end
(``_frontend/``) recognises when it reads a kernel's source; none of them
computes anything when called from ordinary Python (they raise a
``TypeError`` saying so). ``_language.py`` declares each of them for users,
editors and type checkers (a function with a signature and a docstring
that stands for its marker).
"""

from __future__ import annotations

from . import _enigma
from ._types import DType, parse_type


def outside_a_kernel(what: str) -> TypeError:
    """The error of a kernel-language name (``what``, as the user wrote
    it) used from Python."""
    return TypeError(f"{what} only has a meaning inside an @enigma.kernel function, which enigma compiles from its source")


class _Marker:
    """Base of the language's names: identity matters, calling outside a kernel is an error."""

    __slots__ = ("name", "doc")

    def __init__(self, name: str, doc: str = ""):
        self.name = name
        self.doc = doc

    def __repr__(self):
        return f"<enigma.{self.name}>"

    def __call__(self, *args, **kwargs):
        raise outside_a_kernel(f"enigma.{self.name}(...)")


class Builtin(_Marker):
    """A thread-position attribute, named as in MSL.

    Vector builtins (``thread_position_in_grid`` …) are ``uint3``; read them as
    ``enigma.thread_position_in_grid("x")`` (or ``(0)``, or ``.x``). Without an
    axis they are the ``uint3``, except where a scalar is needed (an index, an
    operand with a scalar, a comparison, a function argument): there they
    mean ``.x``, so ``tid = enigma.thread_position_in_grid`` then ``A[tid]``
    reads ``A[tid.x]`` (seed 001).
    """

    __slots__ = ("vector",)

    def __init__(self, name: str, vector: bool):
        super().__init__(name)
        self.vector = vector


class Intrinsic(_Marker):
    """A function: math, SIMD-group, comparisons, casts and the kernel statements."""

    __slots__ = ()


class ConstantParam:
    """``enigma.constant(T)``: the annotation of a by-value scalar parameter,
    passed in ``inputs`` as a Python number."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = parse_type(dtype)

    def __repr__(self):
        return f"enigma.constant({self.dtype!r})"


class BufferParam:
    """``enigma.buffer(T, access="read"|"read_write", shape=(...))``: a
    device buffer annotation with explicit access (plain ``T`` infers it
    from the body) and/or a row-major shape, which lets the kernel index it
    with one subscript per dimension (``out[i, j]``)."""

    __slots__ = ("dtype", "access", "shape")

    def __init__(self, dtype, access=None, shape=None):
        self.dtype = parse_type(dtype)
        if access not in (None, "read", "read_write"):
            raise ValueError("access must be \"read\" or \"read_write\"")
        self.access = access
        # Checked when the kernel compiles (shape_problem), so a wrong shape
        # is a CompileError naming the kernel and the line.
        self.shape = (shape,) if isinstance(shape, (str, int)) else shape

    def __repr__(self):
        shape = "" if self.shape is None else f", shape={self.shape!r}"
        return f"enigma.buffer({self.dtype!r}, access={self.access!r}{shape})"


def shape_problem(shape):
    """What is wrong with a buffer's shape (None if nothing): a non-empty
    tuple whose entries are positive ints or names (strings) of by-value
    parameters, specialisation constants or module constants; the first
    may be None (as many rows as the buffer holds)."""
    if not isinstance(shape, (tuple, list)) or not shape:
        return f"shape must be a non-empty tuple of sizes, e.g. shape=(\"n\", \"m\"); got {shape!r}"
    for d, size in enumerate(shape):
        ok = (isinstance(size, int) and not isinstance(size, bool) and size > 0) or (isinstance(size, str) and size.isidentifier())
        if not ok and not (size is None and d == 0):
            return (
                f"shape entry {d} is {size!r}; each size is a positive int or the name (a string) of a by-value "
                "parameter, a specialisation constant or a module constant (the first may be None: as many rows "
                "as the buffer holds)"
            )
    return None


class TextureParam:
    """``enigma.texture2d(T, access="read")``: a 2D texture parameter with
    texels of ``T`` (``enigma.f32``, ``f16``, ``i32`` or ``u32``) and MSL's
    access (``"read"``, ``"write"``, ``"read_write"`` or ``"sample"``)."""

    __slots__ = ("dtype", "access")

    ACCESS = ("read", "write", "read_write", "sample")

    def __init__(self, dtype, access="read"):
        self.dtype = parse_type(dtype)
        if self.dtype.is_vector or self.dtype.scalar not in ("f32", "f16", "i32", "u32"):
            raise ValueError(f"texture2d texels are enigma.f32, f16, i32 or u32, not {self.dtype!r}")
        if access not in self.ACCESS:
            raise ValueError(f"texture2d access must be \"read\", \"write\", \"read_write\" or \"sample\", not {access!r}")
        self.access = access

    def __repr__(self):
        return f"enigma.texture2d({self.dtype!r}, access={self.access!r})"


def texture2d(dtype, access="read") -> TextureParam:
    """Annotation of a texture parameter: ``out: enigma.texture2d(enigma.f32, access="write")``.
    In the kernel: ``out.read(coord)`` (four texels), ``out.write(value, coord)``,
    ``out.get_width()``, ``out.get_height()``; ``coord`` is a ``uint2`` or a
    pair ``(x, y)``. A ``"sample"`` texture of f32 or f16 texels also has
    ``out.sample(sampler, uv)``, ``uv`` a ``float2`` or a pair ``(u, v)`` and
    ``sampler`` an :func:`sampler`; a ``"read_write"`` one ``out.fence()``
    (this thread's writes before its later reads)."""
    return TextureParam(dtype, access)


class Sampler:
    """A constant sampler (MSL's ``constexpr sampler``): see :func:`sampler`."""

    __slots__ = ("coord", "filter", "address")

    COORD = ("normalized", "pixel")
    FILTER = ("nearest", "linear")
    ADDRESS = ("clamp_to_edge", "clamp_to_zero", "repeat", "mirrored_repeat")

    def __init__(self, filter="nearest", address="clamp_to_edge", coord="normalized"):
        for name, value, allowed in (("coord", coord, self.COORD), ("filter", filter, self.FILTER), ("address", address, self.ADDRESS)):
            if value not in allowed:
                raise ValueError(f"enigma.sampler {name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")
        if coord == "pixel" and address in ("repeat", "mirrored_repeat"):
            raise ValueError(f"enigma.sampler: address={address!r} repeats the texture, which needs coord=\"normalized\" (pixel coordinates take clamp_to_edge or clamp_to_zero)")
        self.coord, self.filter, self.address = coord, filter, address

    def ir(self):
        return {"coord": self.coord, "filter": self.filter, "address": self.address}

    def __repr__(self):
        return f"enigma.sampler(filter={self.filter!r}, address={self.address!r}, coord={self.coord!r})"


def sampler(filter="nearest", address="clamp_to_edge", coord="normalized") -> Sampler:
    """A sampler for ``tex.sample(s, uv)``, as MSL's ``constexpr sampler``:
    ``filter`` ``"nearest"`` or ``"linear"`` (bilinear, texel centres at
    (i + 0.5)/w); ``address`` ``"clamp_to_edge"``, ``"clamp_to_zero"``,
    ``"repeat"`` or ``"mirrored_repeat"`` (the repeating ones need
    normalised coordinates); ``coord`` ``"normalized"`` (0 to 1 across the
    texture) or ``"pixel"`` (0 to the width). Make it outside the kernel or
    in the call: ``src.sample(enigma.sampler(filter="linear"), uv)``."""
    return Sampler(filter, address, coord)


def constant(dtype) -> ConstantParam:
    """Annotation of a by-value scalar parameter: ``n: enigma.constant(enigma.u32)``."""
    return ConstantParam(dtype)


def buffer(dtype, access=None, shape=None) -> BufferParam:
    """Annotation of a device buffer with explicit access (``"read"`` or
    ``"read_write"``) and/or a row-major shape: ``shape=("n", "m")`` names
    by-value parameters (or specialisation constants, or module constants);
    ints are sizes; the first entry may be None. The kernel then indexes it
    as ``out[i, j]`` (or with one flat index, ``out[i * m + j]``)."""
    return BufferParam(dtype, access, shape)


VECTOR_BUILTINS = [
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "threads_per_grid",
    "threadgroups_per_grid",
]
SCALAR_BUILTINS = [
    "thread_index_in_threadgroup",
    "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup",
    "simdgroups_per_threadgroup",
    "threads_per_simdgroup",
]

BUILTINS = {n: Builtin(n, True) for n in VECTOR_BUILTINS}
BUILTINS.update({n: Builtin(n, False) for n in SCALAR_BUILTINS})

# name -> IR intrinsic tag (serde snake_case of the Rust variant)
FLOAT_MATH = [
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor", "ceil", "pow", "fma",
    "tan", "sinh", "cosh", "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh", "erf", "erfc", "log1p", "expm1",
    "round", "trunc", "rint", "copysign", "fmod", "sign", "saturate", "mix", "step", "smoothstep",
]
# isnan/isinf/isfinite: a float's class, a bool per component.
CLASSIFICATION = ["isnan", "isinf", "isfinite"]
# The functions MSL also offers in its fast:: and precise:: namespaces: the
# IR's list (Intrinsic::WITH_PRECISION_VARIANTS), which enigma.fast and
# enigma.precise (generated by python/tools/precision_stubs.py) declare.
PRECISION_MATH = list(_enigma.precision_functions())
PRECISIONS = ("fast", "precise")
NUMERIC = ["abs", "min", "max", "clamp", "select", "popcount", "clz", "ctz"]
SIMD = [
    "simd_sum", "simd_product", "simd_max", "simd_min", "simd_and", "simd_or", "simd_xor",
    "simd_broadcast", "simd_broadcast_first", "simd_shuffle", "simd_shuffle_up", "simd_shuffle_down",
    "simd_shuffle_xor", "simd_prefix_inclusive_sum", "simd_prefix_exclusive_sum", "simd_all",
    "simd_any", "simd_ballot", "simd_is_first",
]
COMPARISONS = {"cmp_eq": "eq", "cmp_ne": "ne", "cmp_lt": "lt", "cmp_le": "le", "cmp_gt": "gt", "cmp_ge": "ge"}
ATOMICS = ["add", "sub", "min", "max", "and", "or", "xor", "exchange"]
# SIMD-group matrices, by their MSL names (thread_element* for MSL's
# thread_elements() view and the coordinates of each element).
MATRIX = [
    "simdgroup_load", "simdgroup_load_quantized", "simdgroup_store", "make_filled_simdgroup_matrix", "simdgroup_multiply",
    "simdgroup_multiply_accumulate", "thread_element", "thread_element_row", "thread_element_col",
]
STATEMENTS = [
    "if_", "elif_", "else_", "for_range", "barrier", "threadgroup_barrier", "simdgroup_barrier",
    "threadgroup_alloc", "load_if", "spec", "as_type", "atomic_compare_exchange",
    "async_copy", "async_commit", "async_wait", "tile_copy", "tile_wait", "device_fence",
    "thread_array", "static_range", "print",
]

INTRINSICS = {}
for _n in FLOAT_MATH + CLASSIFICATION + NUMERIC + SIMD + list(COMPARISONS) + STATEMENTS + MATRIX:
    INTRINSICS[_n] = Intrinsic(_n)
for _op in ATOMICS:
    INTRINSICS[f"atomic_{_op}"] = Intrinsic(f"atomic_{_op}")


class _PrecisionNamespace:
    """``enigma.fast.exp``, ``enigma.precise.sin`` …: the markers of one of
    MSL's ``fast::`` and ``precise::`` namespaces."""

    def __init__(self, precision: str):
        self._precision = precision
        for n in PRECISION_MATH:
            setattr(self, n, Intrinsic(f"{precision}.{n}"))

    def __repr__(self):
        return f"<enigma.{self._precision}>"


fast = _PrecisionNamespace("fast")
precise = _PrecisionNamespace("precise")

# name -> (IR intrinsic tag, precision): `fast.exp` is the tag `exp` in the
# `fast` precision.
INTRINSIC_TAGS = {n: n for n in FLOAT_MATH + CLASSIFICATION + NUMERIC + SIMD}
INTRINSIC_TAGS.update({f"{p}.{n}": n for p in PRECISIONS for n in PRECISION_MATH})


def precision_of(name: str) -> str:
    """The IR precision of the function the front end knows as ``name``:
    ``fast`` for ``fast.exp``, ``default`` for ``exp``."""
    namespace = name.split(".")[0] if "." in name else None
    return namespace if namespace in PRECISIONS else "default"


MEM_FLAGS = {
    "mem_none": "none",
    "mem_threadgroup": "threadgroup",
    "mem_device": "device",
    "mem_device_and_threadgroup": "device_and_threadgroup",
    "mem_device|mem_threadgroup": "device_and_threadgroup",
    "mem_threadgroup|mem_device": "device_and_threadgroup",
    "mem_texture": "texture",
}


def is_dtype(obj) -> bool:
    return isinstance(obj, DType)
