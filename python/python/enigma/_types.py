"""Value types: ``enigma.f32``, ``enigma.half4`` and friends.

A :class:`DType` is three things at once, as in the seed-001 API:

* a parameter annotation — ``A: enigma.f32`` declares a device buffer of f32;
* a cast inside a kernel — ``enigma.f32(x)`` converts, ``enigma.f32(0.0)`` is
  a typed literal, ``enigma.float4(a, b, c, d)`` builds a vector;
* a type argument — ``enigma.threadgroup_alloc(enigma.f32, 32)``,
  ``enigma.constant(enigma.u32)``, ``enigma.spec("TILE", enigma.u32, 32)``.
"""

from __future__ import annotations

from . import _enigma

# name: (size in bytes, kind, MSL name) — read from the Rust side, which owns
# the IR's types; kind is "b" (bool), "i" (signed), "u" (unsigned), "f" (float).
_SCALARS = {name: (size, kind, msl) for name, size, kind, msl in _enigma.scalar_types()}


class DType:
    """A scalar or vector value type of the IR (``f32``, ``half4``, ``uint3``…)."""

    __slots__ = ("scalar", "width")

    def __init__(self, scalar: str, width: int = 1):
        if scalar not in _SCALARS:
            raise ValueError(f"unknown scalar type {scalar!r}")
        if width not in (1, 2, 3, 4):
            raise ValueError(f"vector width must be 1 to 4, not {width}")
        object.__setattr__(self, "scalar", scalar)
        object.__setattr__(self, "width", width)

    def __setattr__(self, name, value):
        raise AttributeError("DType is immutable")

    def __eq__(self, other):
        return isinstance(other, DType) and other.scalar == self.scalar and other.width == self.width

    def __hash__(self):
        return hash((self.scalar, self.width))

    @property
    def name(self) -> str:
        """The IR's name: ``f32``, ``f32x4``."""
        return self.scalar if self.width == 1 else f"{self.scalar}x{self.width}"

    @property
    def msl_name(self) -> str:
        """The MSL spelling: ``float``, ``half4``."""
        base = _SCALARS[self.scalar][2]
        return base if self.width == 1 else f"{base}{self.width}"

    def __repr__(self):
        return f"enigma.{_PUBLIC_NAME.get(self, self.name)}"

    def __str__(self):
        return self.name

    # --- classification -------------------------------------------------
    @property
    def is_vector(self) -> bool:
        return self.width > 1

    @property
    def is_float(self) -> bool:
        return _SCALARS[self.scalar][1] == "f"

    @property
    def is_int(self) -> bool:
        return _SCALARS[self.scalar][1] in "iu"

    @property
    def is_signed(self) -> bool:
        return _SCALARS[self.scalar][1] == "i"

    @property
    def is_unsigned(self) -> bool:
        return _SCALARS[self.scalar][1] == "u"

    @property
    def is_bool(self) -> bool:
        return self.scalar == "bool"

    @property
    def scalar_type(self) -> "DType":
        return DType(self.scalar)

    def with_scalar(self, scalar: str) -> "DType":
        return DType(scalar, self.width)

    @property
    def scalar_bytes(self) -> int:
        return _SCALARS[self.scalar][0]

    @property
    def size_bytes(self) -> int:
        """Bytes in device memory; 3-vectors are padded to 4 elements, as in MSL."""
        return self.scalar_bytes * (4 if self.width == 3 else self.width)

    def fits(self, value) -> bool:
        """Whether a Python int fits this (integer) scalar type."""
        bits = 8 * self.scalar_bytes
        if self.is_signed:
            return -(1 << (bits - 1)) <= value < (1 << (bits - 1))
        return 0 <= value < (1 << bits)

    def ir(self) -> str:
        """The IR's JSON form of the type: its IR name (``f32``, ``f32x4``)."""
        return self.name

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"enigma.{_PUBLIC_NAME.get(self, self.name)}(...) is a cast; it only has a meaning inside an "
            "@enigma.kernel function, which enigma compiles from its source"
        )


# Scalars under their IR names.
bool_ = DType("bool")
i8, i16, i32, i64 = DType("i8"), DType("i16"), DType("i32"), DType("i64")
u8, u16, u32, u64 = DType("u8"), DType("u16"), DType("u32"), DType("u64")
f16, bf16, f32 = DType("f16"), DType("bf16"), DType("f32")

# MSL names, scalar and vector: half, float4, uint3, bfloat2, ...
_MSL_BASES = {
    "bool": "bool", "char": "i8", "short": "i16", "int": "i32", "long": "i64",
    "uchar": "u8", "ushort": "u16", "uint": "u32", "ulong": "u64",
    "half": "f16", "bfloat": "bf16", "float": "f32",
}

_PUBLIC_NAME: dict = {}
PUBLIC_TYPES: dict = {}

for _n, _t in [("bool_", bool_), ("i8", i8), ("i16", i16), ("i32", i32), ("i64", i64), ("u8", u8),
               ("u16", u16), ("u32", u32), ("u64", u64), ("f16", f16), ("bf16", bf16), ("f32", f32)]:
    PUBLIC_TYPES[_n] = _t
    _PUBLIC_NAME.setdefault(_t, _n)

for _msl, _scalar in _MSL_BASES.items():
    for _w in (1, 2, 3, 4):
        _name = _msl if _w == 1 else f"{_msl}{_w}"
        # Scalar MSL names that shadow Python builtins (bool, int, float) are
        # not exported; the vector names all are (float4, int2, bool3, ...).
        if _w == 1 and _msl in ("bool", "int", "float", "long", "short", "char"):
            continue
        PUBLIC_TYPES[_name] = DType(_scalar, _w)
        _PUBLIC_NAME.setdefault(DType(_scalar, _w), _name)


class MatrixType:
    """A SIMD-group matrix tile type, ``enigma.simdgroup_matrix(enigma.f16, 8, 8)``.

    ``rows`` × ``cols`` elements of f16, bf16 or f32 held jointly by the 32
    lanes of a SIMD group (rows and columns multiples of 8, up to 64): 8×8 is
    MSL's ``simdgroup_matrix<half, 8, 8>``; a larger tile is one value whose
    fragments each backend chooses. Inside a kernel, calling the type builds
    the diagonal matrix (as MSL's constructor does): ``T(1.0)``.
    """

    __slots__ = ("scalar", "rows", "cols")
    is_vector = False
    is_matrix = True
    width = 1

    def __init__(self, elem, rows: int, cols: int):
        elem = parse_type(elem)
        if elem.is_vector or elem.scalar not in ("f16", "bf16", "f32"):
            raise ValueError(f"a SIMD-group matrix holds f16, bf16 or f32, not {elem}")
        for what, n in (("rows", rows), ("cols", cols)):
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0 or n % 8 or n > 64:
                raise ValueError(f"a SIMD-group matrix's {what} must be a multiple of 8 from 8 to 64, not {n!r}")
        object.__setattr__(self, "scalar", elem.scalar)
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "cols", cols)

    def __setattr__(self, name, value):
        raise AttributeError("MatrixType is immutable")

    def __eq__(self, other):
        return isinstance(other, MatrixType) and (other.scalar, other.rows, other.cols) == (self.scalar, self.rows, self.cols)

    def __hash__(self):
        return hash((self.scalar, self.rows, self.cols))

    @property
    def name(self) -> str:
        """The IR's name: ``mat8x8_f16``."""
        return f"mat{self.rows}x{self.cols}_{self.scalar}"

    @property
    def scalar_type(self) -> "DType":
        return DType(self.scalar)

    @property
    def per_lane(self) -> int:
        """Elements each lane holds."""
        return self.rows * self.cols // 32

    def ir(self) -> str:
        return self.name

    def __repr__(self):
        return f"enigma.simdgroup_matrix(enigma.{self.scalar}, {self.rows}, {self.cols})"

    __str__ = lambda self: self.name  # noqa: E731


def simdgroup_matrix(elem, rows: int = 8, cols: int = 8) -> MatrixType:
    """The SIMD-group matrix type of ``rows`` × ``cols`` ``elem`` values (see :class:`MatrixType`)."""
    return MatrixType(elem, rows, cols)


def parse_type(spec) -> DType:
    """A DType from a DType or a name: ``"float"``, ``"f32"``, ``"half4"``, ``"f32x4"``."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, str):
        s = spec.strip()
        if s in _SCALARS:
            return DType(s)
        if s in _MSL_BASES:
            return DType(_MSL_BASES[s])
        if "x" in s:
            base, _, w = s.rpartition("x")
            if base in _SCALARS and w in ("2", "3", "4"):
                return DType(base, int(w))
        if s and s[-1] in "234":
            base = s[:-1]
            if base in _MSL_BASES:
                return DType(_MSL_BASES[base], int(s[-1]))
            if base in _SCALARS:
                return DType(base, int(s[-1]))
    raise ValueError(f"unknown type {spec!r} (expected e.g. enigma.f32, \"float\", \"half4\", \"u32\")")


# Buffer-protocol formats (struct module codes) of each scalar, for checking
# that a numpy array or other buffer holds the parameter's type.
def scalar_of_format(fmt: str, itemsize: int):
    """The IR scalar a buffer format denotes, or None (e.g. float64)."""
    f = fmt.lstrip("@=<")
    if fmt.startswith((">", "!")) and itemsize > 1:
        return None  # big-endian data
    table = {
        "?": "bool", "b": "i8", "B": "u8", "c": "u8",
        "e": "f16", "f": "f32",
    }
    if f in table and _SCALARS[table[f]][0] == itemsize:
        return table[f]
    signed = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}
    unsigned = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}
    if f in ("h", "i", "l", "q", "n"):
        return signed.get(itemsize)
    if f in ("H", "I", "L", "Q", "N"):
        return unsigned.get(itemsize)
    return None


FORMAT_NAMES = {
    "?": "bool", "b": "int8", "B": "uint8", "h": "int16", "H": "uint16", "i": "int32", "I": "uint32",
    "l": "int64", "L": "uint64", "q": "int64", "Q": "uint64", "e": "float16", "f": "float32",
    "d": "float64", "g": "float128", "Zf": "complex64", "Zd": "complex128",
}

NUMPY_NAMES = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
    "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16", "f32": "float32",
    "bf16": "uint16 (raw bfloat16 bits)",
}


# MSL's names of the 8×8 matrix types.
for _s, _msl in (("f16", "half"), ("bf16", "bfloat"), ("f32", "float")):
    PUBLIC_TYPES[f"simdgroup_{_msl}8x8"] = MatrixType(DType(_s), 8, 8)
