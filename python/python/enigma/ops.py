"""The kernel library from Python: numpy arrays in, numpy arrays out.

Each function runs one operation of enigma's kernel library (the same
kernels as ``enigma run <kernel>`` and the Rust ``enigma_ops`` API) on a
runtime — ``rt=`` a :class:`enigma.MetalRuntime`, or ``device=`` to open one
(``"auto"`` by default: a GPU where present, else the simulator)::

    import numpy as np, enigma.ops as ops
    x = np.random.rand(4, 1000).astype(np.float32)
    y = ops.softmax(x)                      # rows of x, each summing to 1
    s = ops.sum(np.arange(10, dtype=np.float32))   # array(45.)

Data types: float32, float16 and bfloat16 (pass bfloat16 data as a uint16
array of its bits with ``dtype="bf16"``; results come back the same way),
plus int32/uint32 for ``prefix_sum``. Element-wise, softmax, norm and
attention results have the input's type; reductions and GEMV give float32.
All inputs of one call share one type (GEMV's vector is float32). Arithmetic is float32 inside.
Arrays are copied as C-contiguous data; a ``threads=`` argument overrides
the threadgroup size (default: seed 004's table for the kernel type).
"""
import json
import math
import numbers

import numpy as np

from . import _enigma
from ._runtime import MetalRuntime

__all__ = [
    "scale", "add", "mul", "relu", "silu", "gelu", "sum", "max", "min",
    "sum_rows", "max_rows", "min_rows", "prefix_sum", "softmax", "rms_norm",
    "layer_norm", "gemv", "attention_decode", "quantize", "dequantize", "qmatmul",
    "tune",
]

_NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i32": np.int32, "u32": np.uint32}
_FROM_NUMPY = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.int32): "i32",
               np.dtype(np.uint32): "u32"}


def _elem(arrays, dtype):
    if dtype is not None:
        if dtype not in _NUMPY:
            raise ValueError(f"dtype must be one of {', '.join(_NUMPY)}, not {dtype!r}")
        want = np.dtype(_NUMPY[dtype])
        for a in arrays:
            if a.dtype != want:
                raise TypeError(f"dtype={dtype!r} needs {want} arrays, got {a.dtype}")
        return dtype
    first = arrays[0].dtype
    if first == np.uint16:
        raise TypeError("a uint16 array is ambiguous: pass dtype='bf16' for bfloat16 bits")
    if first not in _FROM_NUMPY:
        raise TypeError(f"the kernel library takes float32, float16, bfloat16 (as uint16 bits), int32 or uint32 arrays, not {first}")
    for a in arrays[1:]:
        if a.dtype != first:
            raise TypeError(f"all arrays of one call must share a dtype: got {first} and {a.dtype}")
    return _FROM_NUMPY[first]


def _threads(op, threads):
    """``threads=`` checked as the CLI checks ``--threads``."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise TypeError(f"{op}: threads must be an int (threads per threadgroup), not {type(threads).__name__} {threads!r}")
    t = int(threads)
    if not (32 <= t <= 1024 and t % 32 == 0):
        raise _enigma.DispatchError(
            f"{op}: threads={t}: threadgroup size {t} is not a multiple of 32 between 32 and 1024 "
            "(the library's reductions need whole SIMD groups)"
        )
    return t


def _number(op, name, value):
    """A finite real parameter (a scale factor, eps), named in the error."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a number, not {type(value).__name__} {value!r}")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v) or abs(v) > 3.4028234663852886e38:
        raise ValueError(f"{op}: {name}={value!r} is not a finite float32")
    return v


def _call(op, arrays, dims, params=(), *, dtype=None, rt=None, device="auto", threads=None, typed=None):
    threads = _threads(op, threads)
    arrays = [np.asarray(a) for a in arrays]
    elem = _elem(arrays[:typed], dtype)
    runtime = rt if rt is not None else MetalRuntime(device)
    data = [np.ascontiguousarray(a).tobytes() for a in arrays]
    out, out_elem = _enigma.library_call(runtime._rt, op, elem, data, [int(d) for d in dims],
                                         [float(p) for p in params], threads)
    return np.frombuffer(out, dtype=_NUMPY[out_elem]).copy()


def _flat(x):
    x = np.asarray(x)
    return x, x.size


def _rows(x, what):
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{what} takes a 2-D array [rows, d], got shape {x.shape}")
    return x, x.shape


def scale(x, factor, **kw):
    """``x * factor``, element-wise."""
    x, n = _flat(x)
    return _call("scale", [x], [n], [_number("scale", "factor", factor)], **kw).reshape(x.shape)


def _binary(op, a, b, kw):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"{op}: shapes differ: {a.shape} and {b.shape}")
    return _call(op, [a, b], [a.size], **kw).reshape(a.shape)


def add(a, b, **kw):
    """``a + b``, element-wise."""
    return _binary("add", a, b, kw)


def mul(a, b, **kw):
    """``a * b``, element-wise."""
    return _binary("mul", a, b, kw)


def relu(x, **kw):
    """``max(x, 0)``, element-wise."""
    x, n = _flat(x)
    return _call("relu", [x], [n], **kw).reshape(x.shape)


def silu(x, **kw):
    """``x * sigmoid(x)``, element-wise."""
    x, n = _flat(x)
    return _call("silu", [x], [n], **kw).reshape(x.shape)


def gelu(x, **kw):
    """GELU in its tanh form, element-wise."""
    x, n = _flat(x)
    return _call("gelu", [x], [n], **kw).reshape(x.shape)


def sum(x, **kw):  # noqa: A001 - the library's name
    """The sum of all elements (float32)."""
    x, n = _flat(x)
    return _call("sum", [x], [n], **kw)[0]


def max(x, **kw):  # noqa: A001
    """The largest element (float32)."""
    x, n = _flat(x)
    return _call("max", [x], [n], **kw)[0]


def min(x, **kw):  # noqa: A001
    """The smallest element (float32)."""
    x, n = _flat(x)
    return _call("min", [x], [n], **kw)[0]


def sum_rows(x, **kw):
    """The sum of each row of a 2-D array (float32)."""
    x, (rows, d) = _rows(x, "sum_rows")
    return _call("sum_rows", [x], [rows, d], **kw)


def max_rows(x, **kw):
    """The largest element of each row (float32)."""
    x, (rows, d) = _rows(x, "max_rows")
    return _call("max_rows", [x], [rows, d], **kw)


def min_rows(x, **kw):
    """The smallest element of each row (float32)."""
    x, (rows, d) = _rows(x, "min_rows")
    return _call("min_rows", [x], [rows, d], **kw)


def prefix_sum(x, exclusive=False, **kw):
    """Running sums of a vector: inclusive (``y[i] = x[0] + … + x[i]``) or exclusive."""
    x, n = _flat(x)
    op = "prefix_sum_exclusive" if exclusive else "prefix_sum_inclusive"
    return _call(op, [x], [n], **kw).reshape(x.shape)


def softmax(x, **kw):
    """Softmax of each row of a 2-D array (numerically stable)."""
    x, (rows, d) = _rows(x, "softmax")
    return _call("softmax", [x], [rows, d], **kw).reshape(rows, d)


def rms_norm(x, weight, eps=1e-5, **kw):
    """RMSNorm of each row: ``x / sqrt(mean(x²) + eps) * weight``."""
    x, (rows, d) = _rows(x, "rms_norm")
    return _call("rms_norm", [x, np.asarray(weight)], [rows, d], [_number("rms_norm", "eps", eps)], **kw).reshape(rows, d)


def layer_norm(x, weight, bias, eps=1e-5, **kw):
    """LayerNorm of each row with weight and bias."""
    x, (rows, d) = _rows(x, "layer_norm")
    eps = _number("layer_norm", "eps", eps)
    return _call("layer_norm", [x, np.asarray(weight), np.asarray(bias)], [rows, d], [eps], **kw).reshape(rows, d)


def gemv(w, x, **kw):
    """``w @ x`` for a [m, k] matrix (float32, float16 or bfloat16) and a
    k-vector, which is used as float32; accumulated and returned in float32."""
    w, (m, k) = _rows(w, "gemv")
    x = np.asarray(x, dtype=np.float32)
    if x.shape != (k,):
        raise ValueError(f"gemv: x must have shape ({k},) for w of shape {w.shape}, got {x.shape}")
    return _call("gemv", [w, x], [m, k], typed=1, **kw)


def attention_decode(q, k, v, scale=None, fused=False, **kw):
    """One decode step of attention: ``softmax(q·Kᵀ·scale)·V`` per head, for
    ``q`` [H, D] and ``k``, ``v`` [H, S, D]; ``scale`` defaults to 1/√D.
    ``fused=True`` runs one fused kernel instead of seed 000's three dispatches."""
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.ndim != 2 or k.ndim != 3 or k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[2] != q.shape[1]:
        raise ValueError(f"attention_decode takes q [H, D] and k, v [H, S, D]; got {q.shape}, {k.shape}, {v.shape}")
    h, s, d = k.shape
    if 0 in (h, s, d):
        raise ValueError(f"attention_decode: H, S and D must be at least 1; got q {q.shape}, k and v {k.shape}")
    scale = 1.0 / math.sqrt(d) if scale is None else _number("attention_decode", "scale", scale)
    op = "attention_decode_fused" if fused else "attention_decode"
    return _call(op, [q, k, v], [h, s, d], [scale], **kw).reshape(h, d)


_QUANT_FORMATS = ("fp4", "int4", "mlx_affine")


def _format(format):
    if format not in _QUANT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(_QUANT_FORMATS)}, not {format!r}")
    return format


def quantize(w, format="fp4", group=None):
    """Quantizes a [K, N] weight matrix (``C = A @ W``, K the reduction
    dimension) to 4 bits, per group of ``group`` K values of a column.

    * ``"fp4"`` (E2M1: 0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6) and ``"int4"``
      (U4B8: nibble − 8), seed 002's layout, default group 128: returns
      ``(packed, scales)``, ``packed`` uint32 [K/8, N] (word ``[kw, n]``
      holds K values ``8·kw + j`` of column n, value j in bits 4j…4j+3),
      ``scales`` float16 [K/group, N].
    * ``"mlx_affine"`` (MLX's ``quantize(w.T, group_size, bits=4)`` layout,
      default group 64): returns ``(packed, scales, biases)``, ``packed``
      uint32 [N, K/8], ``scales`` and ``biases`` float16 [N, K/group];
      ``W[k, n] = scales[n, k/group] · code + biases[n, k/group]``.

    K must be a multiple of 8 and of ``group`` (32, 64 or 128); a bad shape
    raises ``ValueError`` naming the numbers."""
    format = _format(format)
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2:
        raise ValueError(f"quantize takes a 2-D [K, N] matrix, got shape {w.shape}")
    k, n = w.shape
    group = (64 if format == "mlx_affine" else 128) if group is None else int(group)
    packed, scales, biases = _enigma.quant_quantize(format, np.ascontiguousarray(w).tobytes(), k, n, group)
    if format == "mlx_affine":
        shape_p, shape_s = (n, k // 8), (n, k // group)
    else:
        shape_p, shape_s = (k // 8, n), (k // group, n)
    packed = np.frombuffer(packed, dtype=np.uint32).reshape(shape_p).copy()
    scales = np.frombuffer(scales, dtype=np.float16).reshape(shape_s).copy()
    if format == "mlx_affine":
        return packed, scales, np.frombuffer(biases, dtype=np.float16).reshape(shape_s).copy()
    return packed, scales


def _quant_shape(format, packed, scales):
    """(K, N, group) from the arrays of :func:`quantize`."""
    packed, scales = np.asarray(packed), np.asarray(scales)
    if packed.dtype != np.uint32 or scales.dtype != np.float16 or packed.ndim != 2 or scales.ndim != 2:
        raise TypeError(f"packed must be a 2-D uint32 array and scales a 2-D float16 array; got {packed.dtype} {packed.shape} and {scales.dtype} {scales.shape}")
    if format == "mlx_affine":
        n, k = packed.shape[0], packed.shape[1] * 8
        groups = scales.shape[1]
    else:
        k, n = packed.shape[0] * 8, packed.shape[1]
        groups = scales.shape[0]
    if groups == 0 or k % groups != 0:
        raise ValueError(f"{format}: scales of shape {scales.shape} do not divide K = {k} into groups")
    return k, n, k // groups


def dequantize(packed, scales, format="fp4", biases=None):
    """The float32 [K, N] matrix that the arrays of :func:`quantize` stand
    for (``biases`` for ``"mlx_affine"`` only)."""
    format = _format(format)
    k, n, group = _quant_shape(format, packed, scales)
    if (biases is not None) != (format == "mlx_affine"):
        raise ValueError("biases go with format='mlx_affine' only, and it needs them")
    b = b"" if biases is None else np.ascontiguousarray(np.asarray(biases, dtype=np.float16)).tobytes()
    out = _enigma.quant_dequantize(format, k, n, group, np.ascontiguousarray(packed).tobytes(),
                                   np.ascontiguousarray(scales).tobytes(), b)
    return np.frombuffer(out, dtype=np.float32).reshape(k, n).copy()


def qmatmul(a, packed, scales, format="fp4", out_dtype=np.float16, *, rt=None, device="auto", threads=None):
    """``a @ dequantize(packed, scales)`` with the 4-bit weights read by the
    GPU kernel: ``a`` [M, K] (or a K-vector) used as float16, ``packed`` and
    ``scales`` from :func:`quantize` with ``format`` ``"fp4"`` or ``"int4"``;
    accumulated in float32, returned as ``out_dtype`` (float16 or float32),
    [M, N] (or an N-vector)."""
    if format not in ("fp4", "int4"):
        raise ValueError(f"qmatmul reads format 'fp4' or 'int4', not {format!r}")
    k, n, group = _quant_shape(format, packed, scales)
    a = np.asarray(a)
    vector = a.ndim == 1
    a2 = a.reshape(1, -1) if vector else a
    if a2.ndim != 2 or a2.shape[1] != k:
        raise ValueError(f"qmatmul: a must be [M, {k}] (or a {k}-vector) for weights of K = {k}, got shape {a.shape}")
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (np.dtype(np.float16), np.dtype(np.float32)):
        raise ValueError(f"qmatmul's out_dtype is float16 or float32, not {out_dtype}")
    out = "f16" if out_dtype == np.float16 else "f32"
    runtime = rt if rt is not None else MetalRuntime(device)
    m = a2.shape[0]
    data = _enigma.library_qmatmul(runtime._rt, format, np.ascontiguousarray(a2, dtype=np.float16).tobytes(),
                                   np.ascontiguousarray(packed).tobytes(), np.ascontiguousarray(scales).tobytes(),
                                   m, n, k, group, out, threads)
    c = np.frombuffer(data, dtype=out_dtype).reshape(m, n).copy()
    return c[0] if vector else c


# The most warm-up runs or repeats `tune` takes (the CLI's bound).
_MAX_REPEATS = 10_000


def tune(name, shape=(), *, rt=None, device="auto", warmup=3, repeats=10, record=True):
    """Times the candidate threadgroup sizes of library kernel ``name``
    (``"softmax_f32"``, ``"gemv_f16"``, … — ``enigma run list`` lists them) at
    ``shape`` (default: its small test shape) and returns the report as a
    dict: ``best`` (the fastest correct choice, or None), ``trials`` (each
    candidate timed, skipped with the reason, or wrong), ``shape_class`` and
    ``cache`` (the file the best was recorded in, which the library then
    uses for that device, kernel and shape class; ``record=False`` keeps it
    out)."""
    if not isinstance(name, str):
        raise TypeError(f"tune: name must be a library kernel's name (a str like 'softmax_f32'), not {type(name).__name__}")
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"tune: shape must be a tuple of ints like (64, 1000), not {shape!r}")
    shape = tuple(shape)
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and 1 <= d < 2**63 for d in shape):
        raise ValueError(f"tune: shape must hold positive ints (like (64, 1000)), got {shape!r}")
    for what, value, least in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not least <= value <= _MAX_REPEATS:
            raise ValueError(f"tune: {what} must be an int between {least} and {_MAX_REPEATS}, not {value!r}")
    runtime = rt if rt is not None else MetalRuntime(device)
    text = _enigma.library_tune(runtime._rt, name, [int(d) for d in shape], int(warmup), int(repeats), bool(record))
    return json.loads(text)
