"""``enigma.precise``: the ``precise::`` variants of the math functions
(MSL's ``metal::precise``: the precise bounds whatever the Metal compiler's
fast-math setting; on CUDA and the simulator the plain functions). Inside a
kernel only, as ``enigma.precise.sin(x)``.
"""

from . import _lang
from ._language import Num as _Num
from ._language import Value as _Value
from ._language import _declare


@_declare
def exp(x: _Num) -> _Value:
    """``e`` to the power ``x``, precise (MSL ``precise::exp``)."""
    ...


@_declare
def exp2(x: _Num) -> _Value:
    """``2`` to the power ``x``, precise (MSL ``precise::exp2``)."""
    ...


@_declare
def log(x: _Num) -> _Value:
    """The natural logarithm of ``x``, precise (MSL ``precise::log``)."""
    ...


@_declare
def log2(x: _Num) -> _Value:
    """The base-2 logarithm of ``x``, precise (MSL ``precise::log2``)."""
    ...


@_declare
def sqrt(x: _Num) -> _Value:
    """The square root of ``x``, precise (MSL ``precise::sqrt``)."""
    ...


@_declare
def rsqrt(x: _Num) -> _Value:
    """``1 / sqrt(x)``, precise (MSL ``precise::rsqrt``)."""
    ...


@_declare
def tanh(x: _Num) -> _Value:
    """The hyperbolic tangent of ``x``, precise (MSL ``precise::tanh``)."""
    ...


@_declare
def sin(x: _Num) -> _Value:
    """The sine of ``x`` radians, precise (MSL ``precise::sin``)."""
    ...


@_declare
def cos(x: _Num) -> _Value:
    """The cosine of ``x`` radians, precise (MSL ``precise::cos``)."""
    ...


@_declare
def pow(x: _Num, y: _Num) -> _Value:
    """``x`` to the power ``y``, precise (MSL ``precise::pow``)."""
    ...


__all__ = ['cos', 'exp', 'exp2', 'log', 'log2', 'pow', 'rsqrt', 'sin', 'sqrt', 'tanh']

# A precise:: function the front end registers (enigma._lang.FAST_MATH) without
# a declaration above still works in kernels;
# python/tests/test_kernel_language.py fails until it is declared.
for _name in _lang.FAST_MATH:
    globals().setdefault(_name, getattr(_lang.precise, _name))
