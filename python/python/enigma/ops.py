"""The kernel library from Python: arrays in, the same kind of arrays out.

Each function runs one operation of enigma's kernel library (the same
kernels as ``enigma run <kernel>`` and the Rust ``enigma_ops`` API) on a
runtime — ``rt=`` a :class:`enigma.MetalRuntime`, or ``device=`` — else on
the inputs' device (an ``enigma.Array``'s; CUDA for torch or CuPy CUDA
tensors), else on ``"auto"`` (a GPU where present, else the simulator).
One runtime per device is opened for the whole process, and its pipelines
are kept between calls::

    import numpy as np, enigma.ops as ops
    x = np.random.rand(4, 1000).astype(np.float32)
    y = ops.softmax(x)                      # rows of x, each summing to 1
    s = ops.sum(np.arange(10, dtype=np.float32))   # array(45.)

Inputs and results: numpy arrays give numpy arrays (copied to the device
and back); ``enigma.Array``s give ``enigma.Array``s on the same device, with
no host copy; torch and CuPy CUDA tensors are read in place (DLPack) and
give a tensor of the same library sharing enigma's output memory, computed
on the library's current stream (or ``stream=``) without waiting.

Data types: float32, float16 and bfloat16 (numpy: pass bfloat16 data as a
uint16 array of its bits with ``dtype="bf16"``; results come back the same
way; torch's bfloat16 is taken as it is), plus int32/uint32 for
``prefix_sum``. Element-wise, softmax, norm and attention results have the
input's type; reductions and GEMV give float32. All inputs of one call
share one type (GEMV's vector is float32). Arithmetic is float32 inside.
Arrays must be C-contiguous (numpy arrays are made so); a ``threads=``
argument overrides the threadgroup size (default: seed 004's table for the
kernel type).
"""
import json
import math
import numbers
import sys

import numpy as np

from . import _enigma
from ._runtime import _dtype_name, device_of, dispatch_stream, native_runtime

__all__ = [
    "scale", "add", "mul", "relu", "silu", "gelu", "sum", "max", "min",
    "sum_rows", "max_rows", "min_rows", "prefix_sum", "softmax", "rms_norm",
    "layer_norm", "gemv", "matmul", "attention_decode", "quantize", "dequantize", "qmatmul",
    "tune", "QMATMUL_DECODE_ROWS",
]

#: The most rows :func:`qmatmul`'s ``"auto"`` variant gives the decode kernel;
#: above them it takes the tensor-core kernel.
QMATMUL_DECODE_ROWS = _enigma.QMATMUL_DECODE_ROWS

_DTYPES = ("f32", "f16", "bf16", "i32", "u32")
_NUMPY_NAMES = {"f32": "float32", "f16": "float16", "bf16": "uint16", "i32": "int32", "u32": "uint32"}


def _array(a):
    """``a`` as an array: arrays of any library as they are (a host DLPack
    object without a shape as a numpy view of it), anything else through numpy."""
    if hasattr(a, "__dlpack__") and not hasattr(a, "shape"):
        return np.from_dlpack(a)
    if isinstance(a, _enigma.Array) or hasattr(a, "__dlpack__") or hasattr(a, "__cuda_array_interface__"):
        if isinstance(a, np.ndarray) and not a.flags.c_contiguous:
            return np.ascontiguousarray(a)
        return a
    return np.ascontiguousarray(a)


def _kind(a):
    """enigma's name for an array's element type (``"f32"``...), or numpy's/torch's name."""
    return _dtype_name(a.dtype)


def _elem(arrays, dtype):
    if dtype is not None:
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, not {dtype!r}")
        for a in arrays:
            k = _kind(a)
            if k != dtype and not (dtype == "bf16" and k == "u16"):
                raise TypeError(f"dtype={dtype!r} needs {_NUMPY_NAMES[dtype]} arrays, got {a.dtype}")
        return dtype
    first = _kind(arrays[0])
    if first == "u16":
        raise TypeError("a uint16 array is ambiguous: pass dtype='bf16' for bfloat16 bits")
    if first not in _DTYPES:
        raise TypeError(f"the kernel library takes float32, float16, bfloat16, int32 or uint32 arrays, not {arrays[0].dtype}")
    for a in arrays[1:]:
        if _kind(a) != first:
            raise TypeError(f"all arrays of one call must share a dtype: got {arrays[0].dtype} and {a.dtype}")
    return first


def _like(template, out):
    """``out`` (an ``enigma.Array``) as ``template``'s kind of array."""
    if isinstance(template, _enigma.Array):
        return out
    mod = type(template).__module__.split(".")[0]
    if mod == "numpy" or not hasattr(template, "__dlpack__"):
        return out.numpy()
    lib = sys.modules.get(mod)
    if out.device == "cuda" and lib is not None and hasattr(lib, "from_dlpack"):
        return lib.from_dlpack(out)
    host = out.numpy()
    if mod == "torch":
        import torch
        if str(template.dtype) == "torch.bfloat16":
            return torch.from_numpy(host.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(host)
    return host


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


def _call(op, arrays, names, dims, params=(), *, out_shape, dtype=None, rt=None, device=None, threads=None,
          typed=None, stream=None):
    threads = _threads(op, threads)
    elem = _elem(arrays[:typed], dtype)
    if rt is not None:
        native = rt._rt
    elif device is not None:
        native = native_runtime(device)
    else:
        native = device_of(arrays)
    types = [elem if i < (typed or len(arrays)) else _kind(a) for i, a in enumerate(arrays)]
    handle, dl_stream = dispatch_stream(native, arrays, stream)
    # A sanitizing runtime checks the library's dispatches too, and its
    # last_report is theirs.
    sanitize = bool(rt is not None and rt.sanitize)
    if rt is not None:
        rt._reports.report = None
    out, report = _enigma.library_call(native, op, elem, arrays, types, names, [int(d) for d in dims],
                                       [float(p) for p in params], [int(d) for d in out_shape], threads, handle, dl_stream,
                                       sanitize)
    if report is not None:
        rt._reports.report = json.loads(report)
    return _like(arrays[0], out)


def _first(result):
    """The one element of a 1-element result, kept as its kind of array (0-d)."""
    if isinstance(result, _enigma.Array):
        return result.reshape([])
    return result[0]


def _flat(x):
    x = _array(x)
    return x, math.prod(x.shape)


def _rows(x, what):
    x = _array(x)
    if len(x.shape) != 2:
        raise ValueError(f"{what} takes a 2-D array [rows, d], got shape {tuple(x.shape)}")
    return x, tuple(x.shape)


def scale(x, factor, **kw):
    """``x * factor``, element-wise."""
    x, n = _flat(x)
    return _call("scale", [x], ["x"], [n], [_number("scale", "factor", factor)], out_shape=x.shape, **kw)


def _binary(op, a, b, kw):
    a, b = _array(a), _array(b)
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{op}: shapes differ: {tuple(a.shape)} and {tuple(b.shape)}")
    return _call(op, [a, b], ["a", "b"], [math.prod(a.shape)], out_shape=a.shape, **kw)


def add(a, b, **kw):
    """``a + b``, element-wise."""
    return _binary("add", a, b, kw)


def mul(a, b, **kw):
    """``a * b``, element-wise."""
    return _binary("mul", a, b, kw)


def _unary(op, x, kw):
    x, n = _flat(x)
    return _call(op, [x], ["x"], [n], out_shape=x.shape, **kw)


def relu(x, **kw):
    """``max(x, 0)``, element-wise."""
    return _unary("relu", x, kw)


def silu(x, **kw):
    """``x * sigmoid(x)``, element-wise."""
    return _unary("silu", x, kw)


def gelu(x, **kw):
    """GELU in its tanh form, element-wise."""
    return _unary("gelu", x, kw)


def _reduce(op, x, kw):
    x, n = _flat(x)
    return _first(_call(op, [x], ["x"], [n], out_shape=[1], **kw))


def sum(x, **kw):  # noqa: A001 - the library's name
    """The sum of all elements (float32)."""
    return _reduce("sum", x, kw)


def max(x, **kw):  # noqa: A001
    """The largest element (float32)."""
    return _reduce("max", x, kw)


def min(x, **kw):  # noqa: A001
    """The smallest element (float32)."""
    return _reduce("min", x, kw)


def _reduce_rows(op, x, kw):
    x, (rows, d) = _rows(x, op)
    return _call(op, [x], ["x"], [rows, d], out_shape=[rows], **kw)


def sum_rows(x, **kw):
    """The sum of each row of a 2-D array (float32)."""
    return _reduce_rows("sum_rows", x, kw)


def max_rows(x, **kw):
    """The largest element of each row (float32)."""
    return _reduce_rows("max_rows", x, kw)


def min_rows(x, **kw):
    """The smallest element of each row (float32)."""
    return _reduce_rows("min_rows", x, kw)


def prefix_sum(x, exclusive=False, **kw):
    """Running sums of a vector: inclusive (``y[i] = x[0] + … + x[i]``) or exclusive."""
    x, n = _flat(x)
    op = "prefix_sum_exclusive" if exclusive else "prefix_sum_inclusive"
    return _call(op, [x], ["x"], [n], out_shape=x.shape, **kw)


def softmax(x, **kw):
    """Softmax of each row of a 2-D array (numerically stable)."""
    x, (rows, d) = _rows(x, "softmax")
    return _call("softmax", [x], ["x"], [rows, d], out_shape=[rows, d], **kw)


def rms_norm(x, weight, eps=1e-5, **kw):
    """RMSNorm of each row: ``x / sqrt(mean(x²) + eps) * weight``."""
    x, (rows, d) = _rows(x, "rms_norm")
    return _call("rms_norm", [x, _array(weight)], ["x", "weight"], [rows, d], [_number("rms_norm", "eps", eps)],
                 out_shape=[rows, d], **kw)


def layer_norm(x, weight, bias, eps=1e-5, **kw):
    """LayerNorm of each row with weight and bias."""
    x, (rows, d) = _rows(x, "layer_norm")
    eps = _number("layer_norm", "eps", eps)
    return _call("layer_norm", [x, _array(weight), _array(bias)], ["x", "weight", "bias"], [rows, d], [eps],
                 out_shape=[rows, d], **kw)


def gemv(w, x, **kw):
    """``w @ x`` for a [m, k] matrix (float32, float16 or bfloat16) and a
    k-vector, which is used as float32; accumulated and returned in float32."""
    w, (m, k) = _rows(w, "gemv")
    x = np.asarray(x, dtype=np.float32) if isinstance(x, (list, tuple, np.ndarray)) else _array(x)
    if tuple(x.shape) != (k,):
        raise ValueError(f"gemv: x must have shape ({k},) for w of shape {tuple(w.shape)}, got {tuple(x.shape)}")
    return _call("gemv", [w, x], ["w", "x"], [m, k], typed=1, out_shape=[m], **kw)


def matmul(a, b, **kw):
    """``a @ b`` for row-major [m, k] and [k, n] matrices of one type
    (float32, float16 or bfloat16), accumulated and returned in float32: the
    tiled SIMD-group-matrix GEMM of the kernel library."""
    a, (m, k) = _rows(a, "matmul")
    b, (k2, n) = _rows(b, "matmul")
    if k2 != k:
        raise ValueError(f"matmul: a is {m}x{k} but b is {k2}x{n}; the inner sizes must match")
    return _call("matmul", [a, b], ["a", "b"], [m, n, k], out_shape=[m, n], **kw)


def attention_decode(q, k, v, scale=None, fused=False, **kw):
    """One decode step of attention: ``softmax(q·Kᵀ·scale)·V`` per head, for
    ``q`` [H, D] and ``k``, ``v`` [H, S, D]; ``scale`` defaults to 1/√D.
    ``fused=True`` runs one fused kernel instead of seed 000's three dispatches."""
    q, k, v = _array(q), _array(k), _array(v)
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if len(qs) != 2 or len(ks) != 3 or ks != vs or ks[0] != qs[0] or ks[2] != qs[1]:
        raise ValueError(f"attention_decode takes q [H, D] and k, v [H, S, D]; got {qs}, {ks}, {vs}")
    h, s, d = ks
    if 0 in (h, s, d):
        raise ValueError(f"attention_decode: H, S and D must be at least 1; got q {qs}, k and v {ks}")
    scale = 1.0 / math.sqrt(d) if scale is None else _number("attention_decode", "scale", scale)
    op = "attention_decode_fused" if fused else "attention_decode"
    return _call(op, [q, k, v], ["q", "k", "v"], [h, s, d], [scale], out_shape=[h, d], **kw)


_QUANT_FORMATS = ("fp4", "int4", "mlx_affine")


def _format(format):
    if format not in _QUANT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(_QUANT_FORMATS)}, not {format!r}")
    return format


_QUANT_LAYOUTS = ("rows", "fragments")


def _layout(layout, format):
    """A checked packed-word layout name for ``format``."""
    if layout not in _QUANT_LAYOUTS:
        raise ValueError(f"layout must be 'rows' or 'fragments', not {layout!r}")
    if layout == "fragments" and format == "mlx_affine":
        raise ValueError("mlx_affine weights have no fragments layout (it holds fp4 or int4 codes)")
    return layout


def quantize(w, format="fp4", group=None, *, layout="rows"):
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

    With ``layout="fragments"`` (``"fp4"``, ``"int4"``) the same codes come
    in the tensor cores' fragment order, ``packed`` uint32 [K/64, 8·N] (units
    of 64 K values × 16 columns, 128 words each, a lane's four words
    together), which :func:`qmatmul` reads with ``layout="fragments"`` on
    the tensor cores at every M (a decode kernel up to 8 rows, the GEMM's
    tiles above); K must be a multiple of 64 and N of 16.

    K must be a multiple of 8 and of ``group`` (32, 64 or 128); a bad shape
    raises ``ValueError`` naming the numbers."""
    format = _format(format)
    layout = _layout(layout, format)
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2:
        raise ValueError(f"quantize takes a 2-D [K, N] matrix, got shape {w.shape}")
    k, n = w.shape
    group = (64 if format == "mlx_affine" else 128) if group is None else int(group)
    packed, scales, biases = _enigma.quant_quantize(format, np.ascontiguousarray(w).tobytes(), k, n, group, layout)
    if format == "mlx_affine":
        shape_p, shape_s = (n, k // 8), (n, k // group)
    elif layout == "fragments":
        shape_p, shape_s = (k // 64, 8 * n), (k // group, n)
    else:
        shape_p, shape_s = (k // 8, n), (k // group, n)
    packed = np.frombuffer(packed, dtype=np.uint32).reshape(shape_p).copy()
    scales = np.frombuffer(scales, dtype=np.float16).reshape(shape_s).copy()
    if format == "mlx_affine":
        return packed, scales, np.frombuffer(biases, dtype=np.float16).reshape(shape_s).copy()
    return packed, scales


def _quant_shape(format, packed, scales, layout="rows"):
    """(K, N, group) from the arrays of :func:`quantize`."""
    packed, scales = np.asarray(packed), np.asarray(scales)
    if packed.dtype != np.uint32 or scales.dtype != np.float16 or packed.ndim != 2 or scales.ndim != 2:
        raise TypeError(f"packed must be a 2-D uint32 array and scales a 2-D float16 array; got {packed.dtype} {packed.shape} and {scales.dtype} {scales.shape}")
    if format == "mlx_affine":
        n, k = packed.shape[0], packed.shape[1] * 8
        groups = scales.shape[1]
    elif layout == "fragments":
        if packed.shape[1] % 8 != 0:
            raise ValueError(f"{format}: packed of shape {packed.shape} is not [K/64, 8·N] (fragments layout)")
        k, n = packed.shape[0] * 64, packed.shape[1] // 8
        groups = scales.shape[0]
    else:
        k, n = packed.shape[0] * 8, packed.shape[1]
        groups = scales.shape[0]
    if groups == 0 or k % groups != 0:
        raise ValueError(f"{format}: scales of shape {scales.shape} do not divide K = {k} into groups")
    return k, n, k // groups


def dequantize(packed, scales, format="fp4", biases=None, *, layout="rows"):
    """The float32 [K, N] matrix that the arrays of :func:`quantize` stand
    for (``biases`` for ``"mlx_affine"`` only; ``layout`` as given to
    :func:`quantize`)."""
    format = _format(format)
    layout = _layout(layout, format)
    k, n, group = _quant_shape(format, packed, scales, layout)
    if (biases is not None) != (format == "mlx_affine"):
        raise ValueError("biases go with format='mlx_affine' only, and it needs them")
    b = b"" if biases is None else np.ascontiguousarray(np.asarray(biases, dtype=np.float16)).tobytes()
    out = _enigma.quant_dequantize(format, k, n, group, np.ascontiguousarray(packed).tobytes(),
                                   np.ascontiguousarray(scales).tobytes(), b, layout)
    return np.frombuffer(out, dtype=np.float32).reshape(k, n).copy()


def qmatmul(a, packed, scales, format="fp4", out_dtype=np.float16, *, biases=None, variant="auto", layout="rows", rt=None, device="auto", threads=None):
    """``a @ dequantize(packed, scales, format, biases)`` with the 4-bit
    weights read by the GPU kernel: ``a`` [M, K] (or a K-vector) used as
    float16, ``packed`` and ``scales`` (and, for ``"mlx_affine"``, ``biases``)
    from :func:`quantize` with ``format`` ``"fp4"``, ``"int4"`` or
    ``"mlx_affine"`` (so weights quantized by MLX, ``mx.quantize(w.T,
    group_size, bits=4)``, work as they are, biases in float16); accumulated
    in float32, returned as ``out_dtype`` (float16 or float32), [M, N] (or
    an N-vector). ``variant`` picks the kernel: ``"auto"`` (the library's
    choice for M: the decode kernel up to :data:`QMATMUL_DECODE_ROWS` rows,
    which for ``"int4"`` sums each packed word's products in float16 four
    at a time before widening them, finite for |a| <= 16376; the
    tensor-core kernel above), ``"separate"`` (the tensor-core kernel,
    B tiles decoded from packed words staged in threadgroup memory, each
    weight rounded to float16 with its scale) or ``"fused"`` (seed 002's
    fused kernel, B
    dequantized per SIMD group through one 8×8 fragment); the last two read
    ``"fp4"`` and ``"int4"`` only. Weights from ``quantize(...,
    layout="fragments")`` take ``layout="fragments"``: the tensor cores at
    every M, with ``"auto"`` a decode kernel up to 8 rows and the tiled
    kernel above, with ``"separate"`` the tiled kernel (``"fused"`` reads
    the rows layout only)."""
    if variant not in ("auto", "separate", "fused"):
        raise ValueError(f"qmatmul's variant is 'auto', 'separate' or 'fused', not {variant!r}")
    format = _format(format)
    layout = _layout(layout, format)
    k, n, group = _quant_shape(format, packed, scales, layout)
    if (biases is not None) != (format == "mlx_affine"):
        raise ValueError("biases go with format='mlx_affine' only, and it needs them")
    if biases is not None:
        biases = np.asarray(biases)
        if biases.dtype != np.float16 or biases.shape != np.shape(scales):
            raise TypeError(f"biases must be a float16 array of the scales' shape {np.shape(scales)}; got {biases.dtype} {biases.shape}")
        biases = np.ascontiguousarray(biases).tobytes()
    a = np.asarray(a)
    vector = a.ndim == 1
    a2 = a.reshape(1, -1) if vector else a
    if a2.ndim != 2 or a2.shape[1] != k:
        raise ValueError(f"qmatmul: a must be [M, {k}] (or a {k}-vector) for weights of K = {k}, got shape {a.shape}")
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (np.dtype(np.float16), np.dtype(np.float32)):
        raise ValueError(f"qmatmul's out_dtype is float16 or float32, not {out_dtype}")
    out = "f16" if out_dtype == np.float16 else "f32"
    native = rt._rt if rt is not None else native_runtime(device)
    m = a2.shape[0]
    data = _enigma.library_qmatmul(native, format, np.ascontiguousarray(a2, dtype=np.float16).tobytes(),
                                   np.ascontiguousarray(packed).tobytes(), np.ascontiguousarray(scales).tobytes(),
                                   m, n, k, group, out, threads, biases, variant, layout)
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
    native = rt._rt if rt is not None else native_runtime(device)
    text = _enigma.library_tune(native, name, [int(d) for d in shape], int(warmup), int(repeats), bool(record))
    return json.loads(text)
