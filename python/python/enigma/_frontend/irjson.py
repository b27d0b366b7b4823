"""Constructors of IR JSON nodes (the serde form ``enigma_ir`` reads):
literals (non-finite floats as bitcasts), extracts, casts, binary operators
and intrinsic calls.
"""

from __future__ import annotations

import math
import struct

from .._types import DType


def _lit_scalar(value, ty: DType) -> dict:
    s = ty.scalar
    if ty.is_bool:
        return {"literal": {"ty": "bool", "value": {"bool": bool(value)}}}
    if ty.is_float:
        v = float(value)
        if math.isfinite(v):
            return {"literal": {"ty": s, "value": {"float": v}}}
        # JSON has no inf/nan: write the bits and reinterpret them.
        if s == "f32":
            bits, ity = struct.unpack("<I", struct.pack("<f", v))[0], "u32"
        elif s == "f16":
            bits, ity = struct.unpack("<H", struct.pack("<e", v))[0], "u16"
        else:  # bf16
            bits, ity = struct.unpack("<I", struct.pack("<f", v))[0] >> 16, "u16"
            if math.isnan(v):
                bits |= 0x40
        return {"bitcast": {"to": ty.ir(), "arg": {"literal": {"ty": ity, "value": {"u_int": bits}}}}}
    if ty.is_signed:
        return {"literal": {"ty": s, "value": {"int": int(value)}}}
    return {"literal": {"ty": s, "value": {"u_int": int(value)}}}


def _lit(value, ty: DType) -> dict:
    e = _lit_scalar(value, ty.scalar_type)
    if ty.is_vector:
        return {"vector": {"ty": ty.ir(), "components": [e]}}
    return e


def _extract(expr, index):
    return {"extract": {"arg": expr, "index": index}}


def _cast(expr, ty: DType):
    return {"cast": {"to": ty.ir(), "arg": expr}}


def _binary(op, lhs, rhs):
    return {"binary": {"op": op, "lhs": lhs, "rhs": rhs}}


def _call(func, args, precision="default"):
    call = {"func": func, "args": args}
    if precision != "default":
        call["precision"] = precision
    return {"call": call}
