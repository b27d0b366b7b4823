"""One typing rule: the Python front end takes result types from the IR's
typing rules (``enigma_ir::typing``, exposed as ``_enigma.*_result_type``)
instead of keeping its own copy. Every operator and intrinsic the Rust side
lists, over every operand type, goes through both paths: where the front end
accepts, its IR validates in Rust and the type it gives is the rule's; where
the rule refuses, the front end refuses with the rule's message, the kernel
and the Python line.

(No ``from __future__ import annotations`` here: the kernels below take
their parameter types from the factories' arguments.)
"""

import inspect
import json

import numpy as np
import pytest

import enigma
from enigma import _enigma
from enigma._frontend import compile_function

HERE = __file__
SCALARS = [name for name, *_ in _enigma.scalar_types()]
TYPES = SCALARS + [f"{s}x{w}" for s in SCALARS for w in (2, 3, 4)]


def _t(name):
    from enigma._types import parse_type

    return parse_type(name)


# One kernel factory per Python operator; `x` is the value under test.
def _add(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] + B[0]  # the line
    return k


def _sub(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] - B[0]  # the line
    return k


def _mul(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] * B[0]  # the line
    return k


def _div(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] / B[0]  # the line
    return k


def _rem(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] % B[0]  # the line
    return k


def _bit_and(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] & B[0]  # the line
    return k


def _bit_or(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] | B[0]  # the line
    return k


def _bit_xor(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] ^ B[0]  # the line
    return k


def _shl(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] << B[0]  # the line
    return k


def _shr(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] >> B[0]  # the line
    return k


def _eq(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] == B[0]  # the line
    return k


def _ne(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] != B[0]  # the line
    return k


def _lt(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] < B[0]  # the line
    return k


def _le(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] <= B[0]  # the line
    return k


def _gt(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] > B[0]  # the line
    return k


def _ge(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] >= B[0]  # the line
    return k


def _and(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] and B[0]  # the line
    return k


def _or(ta, tb):
    def k(A: ta, B: tb):
        x = A[0] or B[0]  # the line
    return k


BINARY = {
    "add": _add, "sub": _sub, "mul": _mul, "div": _div, "rem": _rem, "bit_and": _bit_and, "bit_or": _bit_or,
    "bit_xor": _bit_xor, "shl": _shl, "shr": _shr, "eq": _eq, "ne": _ne, "lt": _lt, "le": _le, "gt": _gt,
    "ge": _ge, "and": _and, "or": _or,
}


def _neg(ta):
    def k(A: ta):
        x = -A[0]  # the line
    return k


def _not(ta):
    def k(A: ta):
        x = not A[0]  # the line
    return k


def _bit_not(ta):
    def k(A: ta):
        x = ~A[0]  # the line
    return k


UNARY = {"neg": _neg, "not": _not, "bit_not": _bit_not}


def _call0(f, ta, tb, tc):
    def k(A: ta):
        x = f()  # the line
    return k


def _call1(f, ta, tb, tc):
    def k(A: ta):
        x = f(A[0])  # the line
    return k


def _call2(f, ta, tb, tc):
    def k(A: ta, B: tb):
        x = f(A[0], B[0])  # the line
    return k


def _call3(f, ta, tb, tc):
    def k(A: ta, B: tb, C: tc):
        x = f(A[0], B[0], C[0])  # the line
    return k


CALLS = [_call0, _call1, _call2, _call3]


def _line(factory):
    lines, first = inspect.getsourcelines(factory)
    return first + next(i for i, text in enumerate(lines) if "# the line" in text)


def _x_type(ir):
    return next(l["ty"] for l in ir["locals"] if l["name"] == "x")


def _rule(rule, *args):
    """The Rust rule's type name, or its message when it refuses."""
    try:
        return rule(*args), None
    except _enigma.TypingError as e:
        return None, str(e)


def _python_spelling(message):
    for rust, python in {"`&&`": "`and`", "`||`": "`or`", "`!`": "`not`"}.items():
        message = message.replace(rust, python)
    return message


def _front_end(kernel):
    """(the IR, None) or (None, the CompileError's message)."""
    try:
        return compile_function(kernel), None
    except enigma.CompileError as e:
        return None, str(e)


def _validates(ir):
    _enigma.compile(json.dumps(ir))


def _check(kernel, factory, want, refusal):
    """The front end on ``kernel`` against the Rust rule's answer on the
    same operand types: ``want`` (a type name) or ``refusal`` (its message)."""
    ir, err = _front_end(kernel)
    if want is not None:
        assert err is None, f"Rust gives {want}, the front end refuses: {err}"
        _validates(ir)
        assert _x_type(ir) == want
    else:
        assert ir is None, f"Rust refuses ({refusal}), the front end gives {_x_type(ir)}"
        assert _python_spelling(refusal) in err, err
        assert f"{HERE}:{_line(factory)}:" in err and "(in kernel `k`)" in err, err


def test_the_tables_cover_the_rust_side():
    assert set(BINARY) == set(_enigma.binary_ops())
    assert set(UNARY) == set(_enigma.unary_ops())
    tags = set(enigma._lang.INTRINSIC_TAGS.values())
    assert tags == set(_enigma.intrinsics()), tags ^ set(_enigma.intrinsics())


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_operators_agree_with_the_ir_rule(op):
    factory = BINARY[op]
    # Operands of one type: nothing to convert, so the front end's answer is
    # the rule's.
    for t in TYPES:
        want, refusal = _rule(_enigma.binary_result_type, op, t, t)
        _check(factory(_t(t), _t(t)), factory, want, refusal)
    # Two scalar types: the front end converts both to their common type
    # (the IR's usual arithmetic conversions), then the rule applies.
    for a in SCALARS:
        for b in SCALARS:
            if a == b:
                continue
            ir, err = _front_end(factory(_t(a), _t(b)))
            if ir is None:
                continue  # the front end may refuse a mixture (e.g. a shift of a float)
            _validates(ir)
            if op not in ("shl", "shr"):  # a shift converts the amount to the value's type
                c = _enigma.common_scalar_type(a, b)
                assert _x_type(ir) == _enigma.binary_result_type(op, c, c), (a, b)
    # A vector and a scalar: whatever the front end accepts validates.
    for s in SCALARS:
        for v in SCALARS:
            for a, b in ((f"{v}x4", s), (s, f"{v}x4")):
                ir, err = _front_end(factory(_t(a), _t(b)))
                if ir is not None:
                    _validates(ir)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_operators_agree_with_the_ir_rule(op):
    factory = UNARY[op]
    for t in TYPES:
        want, refusal = _rule(_enigma.unary_result_type, op, t)
        _check(factory(_t(t)), factory, want, refusal)


def _intrinsic(name):
    namespace, _, function = name.rpartition(".")
    return getattr(getattr(enigma, namespace), function) if namespace else getattr(enigma, name)


@pytest.mark.parametrize("name", sorted(enigma._lang.INTRINSIC_TAGS))
def test_intrinsics_agree_with_the_ir_rule(name):
    tag = enigma._lang.INTRINSIC_TAGS[name]
    arity = _enigma.intrinsic_arity(tag)
    factory = CALLS[arity]
    f = _intrinsic(name)
    for t in TYPES:
        # Every argument of type t, except a lane/delta (u32) and select's
        # condition (bool): the front end converts none of them.
        types = [t] * arity
        if name == "select":
            types[2] = "bool"
        elif arity == 2 and name.startswith("simd_"):
            types[1] = "u32"
        types += ["u32"] * (3 - arity)
        want, refusal = _rule(_enigma.intrinsic_result_type, tag, types[:arity], enigma._lang.precision_of(name))
        _check(factory(f, *(_t(x) for x in types)), factory, want, refusal)


def test_rule_refusals_name_the_kernel_and_the_python_line():
    msg = _front_end(_shl(_t("f32"), _t("f32")))[1]
    assert "`<<` is not defined for f32" in msg and f"{HERE}:{_line(_shl)}:" in msg and "`k`" in msg, msg
    msg = _front_end(_and(_t("i32"), _t("i32")))[1]
    assert "`and` is not defined for i32 (write a comparison)" in msg, msg


def test_usual_arithmetic_conversions_come_from_the_ir():
    cases = [("u8", "i32", "i32"), ("i32", "u32", "u32"), ("i64", "u32", "i64"), ("bool", "u8", "u8"),
             ("f16", "i64", "f16"), ("f16", "bf16", "f32"), ("bf16", "f32", "f32")]
    for a, b, want in cases:
        assert _enigma.common_scalar_type(a, b) == want
        assert _enigma.common_scalar_type(b, a) == want
        ir = compile_function(_add(_t(a), _t(b)))
        assert _x_type(ir) == want, (a, b)


def test_unknown_names_are_value_errors_not_typing_errors():
    with pytest.raises(ValueError):
        _enigma.binary_result_type("plus", "f32", "f32")
    with pytest.raises(ValueError):
        _enigma.binary_result_type("add", "f33", "f32")
    with pytest.raises(_enigma.TypingError, match="`\\+` is not defined for bool"):
        _enigma.binary_result_type("add", "bool", "bool")


def test_a_scalar_shifted_by_a_vector_is_a_vector(rt):
    # The IR's rule broadcasts the scalar (MSL's `int << int4`); the front
    # end, which refused it while it kept its own rule, now follows it.
    @enigma.kernel
    def shift(A: enigma.i32, B: enigma.ushort4, Out: enigma.int4):
        Out[0] = A[0] << B[0]

    out = rt.execute(enigma.compile(shift), inputs=[np.array([3], np.int32), np.array([0, 1, 2, 3], np.uint16)],
                     output_size=16, grid=1, threads=1)
    assert np.frombuffer(out, np.int32).tolist() == [3, 6, 12, 24]
