"""``enigma.fast``: the ``fast::`` variants of the math functions (MSL's
``metal::fast``; less precise, faster). Inside a kernel only, as
``enigma.fast.exp(x)``.
"""

from . import _lang
from ._language import Num as _Num
from ._language import Value as _Value
from ._language import _declare


@_declare
def exp(x: _Num) -> _Value:
    """``e`` to the power ``x``, fast (MSL ``fast::exp``)."""
    ...


@_declare
def exp2(x: _Num) -> _Value:
    """``2`` to the power ``x``, fast (MSL ``fast::exp2``)."""
    ...


@_declare
def log(x: _Num) -> _Value:
    """The natural logarithm of ``x``, fast (MSL ``fast::log``)."""
    ...


@_declare
def log2(x: _Num) -> _Value:
    """The base-2 logarithm of ``x``, fast (MSL ``fast::log2``)."""
    ...


@_declare
def sqrt(x: _Num) -> _Value:
    """The square root of ``x``, fast (MSL ``fast::sqrt``)."""
    ...


@_declare
def rsqrt(x: _Num) -> _Value:
    """``1 / sqrt(x)``, fast (MSL ``fast::rsqrt``)."""
    ...


@_declare
def tanh(x: _Num) -> _Value:
    """The hyperbolic tangent of ``x``, fast (MSL ``fast::tanh``)."""
    ...


@_declare
def sin(x: _Num) -> _Value:
    """The sine of ``x`` radians, fast (MSL ``fast::sin``)."""
    ...


@_declare
def cos(x: _Num) -> _Value:
    """The cosine of ``x`` radians, fast (MSL ``fast::cos``)."""
    ...


@_declare
def pow(x: _Num, y: _Num) -> _Value:
    """``x`` to the power ``y``, fast (MSL ``fast::pow``)."""
    ...


__all__ = ['cos', 'exp', 'exp2', 'log', 'log2', 'pow', 'rsqrt', 'sin', 'sqrt', 'tanh']

# A fast:: function the front end registers (enigma._lang.FAST_MATH) without
# a declaration above still works in kernels;
# python/tests/test_kernel_language.py fails until it is declared.
for _name in _lang.FAST_MATH:
    globals().setdefault(_name, getattr(_lang.fast, _name))
