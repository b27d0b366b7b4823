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
``mx.array``s (MLX) are read in place through DLPack (strided views made
contiguous by MLX first) and give ``mx.array``s, each result copied once
into MLX memory.

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
import json as _json
import math as _math
import numbers as _numbers
import sys as _sys
from typing import Any as _Any
from typing import Dict as _Dict
from typing import List as _List
from typing import Optional as _Optional
from typing import Sequence as _Sequence
from typing import Tuple as _Tuple
from typing import TypeVar as _TypeVar
from typing import Union as _Union

import numpy as _np

from . import _enigma
from . import _mlx
from ._devices import DeviceName as _DeviceName
from ._devices import device_of as _device_of
from ._devices import dispatch_stream as _dispatch_stream
from ._devices import dtype_name as _dtype_name
from ._devices import native_runtime as _native_runtime
from ._runtime import MetalRuntime as _MetalRuntime
from ._runtime import begin_library_call as _begin_library_call

__all__ = [
    "scale", "add", "mul", "relu", "silu", "gelu", "sum", "max", "min",
    "sum_rows", "max_rows", "min_rows", "prefix_sum", "softmax", "rms_norm",
    "layer_norm", "gemv", "matmul", "attention_decode", "quantize", "dequantize", "qmatmul",
    "tune", "QMATMUL_DECODE_ROWS",
]

# An array an operation takes and gives back in kind: an ``enigma.Array``, a
# numpy array, a torch or CuPy tensor (anything with ``__dlpack__``,
# ``__cuda_array_interface__`` or ``__array_interface__``).
_ArrayT = _TypeVar("_ArrayT")
# A numpy dtype, a numpy scalar type or a dtype's name.
_DTypeLike = _Union[str, type, _np.dtype]
# A CUDA stream: an int handle, or a torch or CuPy stream object.
_Stream = _Any

#: The most rows :func:`qmatmul`'s ``"auto"`` variant gives the decode kernel;
#: above them it takes the tensor-core kernel.
QMATMUL_DECODE_ROWS: int = _enigma.QMATMUL_DECODE_ROWS

_DTYPES = ("f32", "f16", "bf16", "i32", "u32")
_NUMPY_NAMES = {"f32": "float32", "f16": "float16", "bf16": "uint16", "i32": "int32", "u32": "uint32"}


def _array(a: _Any) -> _Any:
    """``a`` as an array: arrays of any library as they are (a host DLPack
    object without a shape as a numpy view of it), anything else through numpy."""
    if _mlx.is_mlx_array(a):
        return _mlx.contiguous(a)
    if hasattr(a, "__dlpack__") and not hasattr(a, "shape"):
        return _np.from_dlpack(a)
    if isinstance(a, _enigma.Array) or hasattr(a, "__dlpack__") or hasattr(a, "__cuda_array_interface__"):
        if isinstance(a, _np.ndarray) and not a.flags.c_contiguous:
            return _np.ascontiguousarray(a)
        return a
    return _np.ascontiguousarray(a)


def _kind(a: _Any) -> str:
    """enigma's name for an array's element type (``"f32"``...), or numpy's/torch's name."""
    return _dtype_name(a.dtype)


def _elem(arrays: _Sequence[_Any], dtype: _Optional[str]) -> str:
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


def _like(template: _Any, out: _enigma.Array) -> _Any:
    """``out`` (an ``enigma.Array``) as ``template``'s kind of array."""
    if isinstance(template, _enigma.Array):
        return out
    if _mlx.is_mlx_array(template):
        return _mlx.from_host(out.numpy(), out.dtype)
    mod = type(template).__module__.split(".")[0]
    if mod == "numpy" or not hasattr(template, "__dlpack__"):
        return out.numpy()
    lib = _sys.modules.get(mod)
    if out.device == "cuda" and lib is not None and hasattr(lib, "from_dlpack"):
        return lib.from_dlpack(out)
    host = out.numpy()
    if mod == "torch":
        import torch
        if str(template.dtype) == "torch.bfloat16":
            return torch.from_numpy(host.view(_np.int16)).view(torch.bfloat16)
        return torch.from_numpy(host)
    return host


def _host_like(template: _Any, host: _Any) -> _Any:
    """A host result (a numpy array) as an ``mx.array`` where ``template``
    is one (the quantization functions, which work on host arrays), else as
    it is."""
    if _mlx.is_mlx_array(template):
        return _mlx.from_host(host, _dtype_name(host.dtype))
    return host


def _threads(op: str, threads: _Optional[int]) -> _Optional[int]:
    """``threads=`` checked as the CLI checks ``--threads``."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, _numbers.Integral):
        raise TypeError(f"{op}: threads must be an int (threads per threadgroup), not {type(threads).__name__} {threads!r}")
    t = int(threads)
    if not (32 <= t <= 1024 and t % 32 == 0):
        raise _enigma.DispatchError(
            f"{op}: threads={t}: threadgroup size {t} is not a multiple of 32 between 32 and 1024 "
            "(the library's reductions need whole SIMD groups)"
        )
    return t


def _number(op: str, name: str, value: _Any) -> float:
    """A finite real parameter (a scale factor, eps), named in the error."""
    if isinstance(value, bool) or not isinstance(value, _numbers.Real):
        raise TypeError(f"{op}: {name} must be a number, not {type(value).__name__} {value!r}")
    try:
        v = float(value)
    except OverflowError:
        v = _math.inf
    if not _math.isfinite(v) or abs(v) > 3.4028234663852886e38:
        raise ValueError(f"{op}: {name}={value!r} is not a finite float32")
    return v


class _Target:
    """Where one call runs and how: the native runtime, its element type,
    threadgroup size and CUDA stream (the caller's ``stream=``, else the
    tensors' current one)."""

    __slots__ = ("native", "elem", "threads", "stream", "dlpack_stream")

    def __init__(self, op: str, arrays: _Sequence[_Any], *, typed: int, dtype: _Optional[str], rt: _Optional[_MetalRuntime],
                 device: _Optional[_DeviceName], threads: _Optional[int], stream: _Stream) -> None:
        _begin_library_call(rt)
        self.threads = _threads(op, threads)
        self.elem = _elem(arrays[:typed], dtype)
        if rt is not None:
            self.native = rt.native
        elif device is not None:
            self.native = _native_runtime(device)
        else:
            self.native = _device_of(arrays)
        self.stream, self.dlpack_stream = _dispatch_stream(self.native, arrays, stream)

    def options(self) -> _Dict[str, _Any]:
        """The keyword arguments every native operation takes."""
        return {"threads": self.threads, "stream": self.stream, "dlpack_stream": self.dlpack_stream}


def _first(result: _Any) -> _Any:
    """The one element of a 1-element result, kept as its kind of array (0-d)."""
    if isinstance(result, _enigma.Array):
        return result.reshape([])
    return result[0]


def _rows(x: _Any, what: str) -> _Tuple[_Any, int, int]:
    x = _array(x)
    if len(x.shape) != 2:
        raise ValueError(f"{what} takes a 2-D array [rows, d], got shape {tuple(x.shape)}")
    return x, int(x.shape[0]), int(x.shape[1])


def _shape(x: _Any) -> _List[int]:
    return [int(d) for d in x.shape]


def scale(x: _ArrayT, factor: float, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
          device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """``x * factor``, element-wise.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        factor: the factor, a finite float32.
        dtype: the element type (``"f32"``, ``"f16"``, ``"bf16"``); needed
            only for bfloat16 bits given as uint16 (``"bf16"``).
        rt: the :class:`enigma.MetalRuntime` to run on.
        device: the device to run on when ``rt`` is not given (``"auto"``,
            ``"sim"`` (also ``"cpu"``), ``"cuda"``, ``"metal"``); default:
            the arrays' device.
        threads: threads per threadgroup (a multiple of 32 up to 1024).
        stream: the CUDA stream (an int handle, a torch or CuPy stream).

    Returns:
        ``x * factor``: an array of ``x``'s kind, shape and type.
    """
    a = _array(x)
    t = _Target("scale", [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    f = _number("scale", "factor", factor)
    return _like(a, _enigma.op_scale(t.native, a, _shape(a), f, t.elem, **t.options()))  # type: ignore[no-any-return]


def _binary(op: str, a: _Any, b: _Any, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
            threads: _Optional[int], stream: _Stream) -> _Any:
    a, b = _array(a), _array(b)
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{op}: shapes differ: {tuple(a.shape)} and {tuple(b.shape)}")
    t = _Target(op, [a, b], typed=2, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    native_op = _enigma.op_add if op == "add" else _enigma.op_mul
    return _like(a, native_op(t.native, a, b, _shape(a), t.elem, **t.options()))


def add(a: _ArrayT, b: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """``a + b``, element-wise.

    Args:
        a: the first array (float32, float16 or bfloat16).
        b: the second array, of ``a``'s shape and type.
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        ``a + b``: an array of ``a``'s kind, shape and type.
    """
    return _binary("add", a, b, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def mul(a: _ArrayT, b: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """``a * b``, element-wise.

    Args:
        a: the first array (float32, float16 or bfloat16).
        b: the second array, of ``a``'s shape and type.
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        ``a * b``: an array of ``a``'s kind, shape and type.
    """
    return _binary("mul", a, b, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def _unary(op: str, x: _Any, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
           threads: _Optional[int], stream: _Stream) -> _Any:
    a = _array(x)
    t = _Target(op, [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    native_op = {"relu": _enigma.op_relu, "silu": _enigma.op_silu, "gelu": _enigma.op_gelu}[op]
    return _like(a, native_op(t.native, a, _shape(a), t.elem, **t.options()))


def relu(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
         device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """``max(x, 0)``, element-wise.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    return _unary("relu", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def silu(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
         device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """``x * sigmoid(x)``, element-wise.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    return _unary("silu", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def gelu(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
         device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """GELU in its tanh form, element-wise.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    return _unary("gelu", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def _reduce(op: str, x: _Any, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
            threads: _Optional[int], stream: _Stream) -> _Any:
    a = _array(x)
    t = _Target(op, [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    n = _math.prod(_shape(a))
    return _first(_like(a, _enigma.op_reduce(t.native, a, n, op, t.elem, **t.options())))


def sum(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,  # noqa: A001 - the library's name
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """The sum of all elements.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the sum in float32: a numpy scalar for a numpy ``x``, else a 0-d
        array of ``x``'s kind.
    """
    return _reduce("sum", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def max(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,  # noqa: A001
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """The largest element.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the largest element in float32, as for :func:`sum`.
    """
    return _reduce("max", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def min(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,  # noqa: A001
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """The smallest element.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the smallest element in float32, as for :func:`sum`.
    """
    return _reduce("min", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def _reduce_rows(op: str, x: _Any, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
                 threads: _Optional[int], stream: _Stream) -> _Any:
    a, rows, d = _rows(x, f"{op}_rows")
    t = _Target(f"{op}_rows", [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    return _like(a, _enigma.op_reduce_rows(t.native, a, rows, d, op, t.elem, **t.options()))


def sum_rows(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
             device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """The sum of each row of a 2-D array.

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        a float32 array of ``rows`` sums, of ``x``'s kind.
    """
    return _reduce_rows("sum", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def max_rows(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
             device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """The largest element of each row of a 2-D array.

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        a float32 array of ``rows`` maxima, of ``x``'s kind.
    """
    return _reduce_rows("max", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def min_rows(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
             device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """The smallest element of each row of a 2-D array.

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        a float32 array of ``rows`` minima, of ``x``'s kind.
    """
    return _reduce_rows("min", x, dtype, rt, device, threads, stream)  # type: ignore[no-any-return]


def prefix_sum(x: _ArrayT, *, exclusive: bool = False, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
               device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """Running sums of a vector.

    Args:
        x: the values (float32, float16, bfloat16, int32 or uint32; any
            shape, read in order).
        exclusive: ``False``: ``y[i] = x[0] + … + x[i]``; ``True``:
            ``y[i] = x[0] + … + x[i-1]`` (``y[0] = 0``).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the running sums, of ``x``'s kind, shape and type.
    """
    a = _array(x)
    t = _Target("prefix_sum", [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    n = _math.prod(_shape(a))
    out = _enigma.op_prefix_sum(t.native, a, n, bool(exclusive), t.elem, **t.options())
    return _like(a, out.reshape(_shape(a)))  # type: ignore[no-any-return]


def softmax(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
            device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """Softmax of each row of a 2-D array (numerically stable: the row's
    maximum is subtracted first).

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the [rows, d] softmax, of ``x``'s kind and type.
    """
    a, rows, d = _rows(x, "softmax")
    t = _Target("softmax", [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    return _like(a, _enigma.op_softmax(t.native, a, rows, d, t.elem, **t.options()))  # type: ignore[no-any-return]


def rms_norm(x: _ArrayT, weight: _Any, *, eps: float = 1e-5, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
             device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """RMSNorm of each row: ``x / sqrt(mean(x²) + eps) * weight``.

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        weight: d values of ``x``'s type.
        eps: added to the mean square, a finite float32.
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the normalised [rows, d] array, of ``x``'s kind and type.
    """
    a, rows, d = _rows(x, "rms_norm")
    w = _array(weight)
    t = _Target("rms_norm", [a, w], typed=2, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    e = _number("rms_norm", "eps", eps)
    return _like(a, _enigma.op_rms_norm(t.native, a, w, rows, d, e, t.elem, **t.options()))  # type: ignore[no-any-return]


def layer_norm(x: _ArrayT, weight: _Any, bias: _Any, *, eps: float = 1e-5, dtype: _Optional[str] = None,
               rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
               stream: _Stream = None) -> _ArrayT:
    """LayerNorm of each row: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        weight: d values of ``x``'s type.
        bias: d values of ``x``'s type.
        eps: added to the variance, a finite float32.
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the normalised [rows, d] array, of ``x``'s kind and type.
    """
    a, rows, d = _rows(x, "layer_norm")
    w, b = _array(weight), _array(bias)
    t = _Target("layer_norm", [a, w, b], typed=3, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    e = _number("layer_norm", "eps", eps)
    return _like(a, _enigma.op_layer_norm(t.native, a, w, b, rows, d, e, t.elem, **t.options()))  # type: ignore[no-any-return]


def gemv(w: _ArrayT, x: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
         device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """Matrix-vector product ``w @ x``, accumulated in float32.

    Args:
        w: an [m, k] matrix (float32, float16 or bfloat16).
        x: k values, used as float32.
        dtype, rt, device, threads, stream: as for :func:`scale` (``dtype``
            is ``w``'s).

    Returns:
        the m float32 results, of ``w``'s kind.
    """
    a, m, k = _rows(w, "gemv")
    v = _np.asarray(x, dtype=_np.float32) if isinstance(x, (list, tuple, _np.ndarray)) else _array(x)
    if tuple(v.shape) != (k,):
        raise ValueError(f"gemv: x must have shape ({k},) for w of shape {tuple(a.shape)}, got {tuple(v.shape)}")
    t = _Target("gemv", [a, v], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    return _like(a, _enigma.op_gemv(t.native, a, v, m, k, t.elem, **t.options()))  # type: ignore[no-any-return]


def matmul(a: _ArrayT, b: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
           device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """Matrix product ``a @ b``: the tiled SIMD-group-matrix GEMM of the
    kernel library, accumulated in float32.

    Args:
        a: a row-major [m, k] matrix (float32, float16 or bfloat16).
        b: a row-major [k, n] matrix of ``a``'s type.
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the [m, n] product in float32, of ``a``'s kind.
    """
    x, m, k = _rows(a, "matmul")
    y, k2, n = _rows(b, "matmul")
    if k2 != k:
        raise ValueError(f"matmul: a is {m}x{k} but b is {k2}x{n}; the inner sizes must match")
    t = _Target("matmul", [x, y], typed=2, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    return _like(x, _enigma.op_matmul(t.native, x, y, m, n, k, t.elem, **t.options()))  # type: ignore[no-any-return]


def attention_decode(q: _ArrayT, k: _Any, v: _Any, *, scale: _Optional[float] = None, fused: bool = False,
                     dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None,
                     threads: _Optional[int] = None, stream: _Stream = None) -> _ArrayT:
    """One decode step of attention: ``softmax(q·Kᵀ·scale)·V`` per head.

    Args:
        q: the queries, [H, D] (float32, float16 or bfloat16).
        k: the keys, [H, S, D], of ``q``'s type.
        v: the values, [H, S, D], of ``q``'s type.
        scale: the factor on the scores; default 1/√D.
        fused: ``True`` runs one fused kernel instead of three dispatches
            (scores, softmax, weighted sum).
        dtype, rt, device, threads, stream: as for :func:`scale`.

    Returns:
        the [H, D] outputs, of ``q``'s kind and type.
    """
    qa, ka, va = _array(q), _array(k), _array(v)
    qs, ks, vs = tuple(qa.shape), tuple(ka.shape), tuple(va.shape)
    if len(qs) != 2 or len(ks) != 3 or ks != vs or ks[0] != qs[0] or ks[2] != qs[1]:
        raise ValueError(f"attention_decode takes q [H, D] and k, v [H, S, D]; got {qs}, {ks}, {vs}")
    h, s, d = (int(x) for x in ks)
    if 0 in (h, s, d):
        raise ValueError(f"attention_decode: H, S and D must be at least 1; got q {qs}, k and v {ks}")
    factor = 1.0 / _math.sqrt(d) if scale is None else _number("attention_decode", "scale", scale)
    t = _Target("attention_decode", [qa, ka, va], typed=3, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    out = _enigma.op_attention_decode(t.native, qa, ka, va, h, s, d, factor, bool(fused), t.elem, **t.options())
    return _like(qa, out)  # type: ignore[no-any-return]


_QUANT_FORMATS = ("fp4", "int4", "mlx_affine")


def _format(format: str) -> str:
    if format not in _QUANT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(_QUANT_FORMATS)}, not {format!r}")
    return format


_QUANT_LAYOUTS = ("rows", "fragments")


def _layout(layout: str, format: str) -> str:
    """A checked packed-word layout name for ``format``."""
    if layout not in _QUANT_LAYOUTS:
        raise ValueError(f"layout must be 'rows' or 'fragments', not {layout!r}")
    if layout == "fragments" and format == "mlx_affine":
        raise ValueError("mlx_affine weights have no fragments layout (it holds fp4 or int4 codes)")
    return layout


def quantize(w: _Any, format: str = "fp4", *, group: _Optional[int] = None,
             layout: str = "rows") -> _Tuple[_np.ndarray, ...]:
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

    Args:
        w: the [K, N] weights (anything numpy converts to float32). K must
            be a multiple of 8 and of ``group``.
        format: ``"fp4"``, ``"int4"`` or ``"mlx_affine"``.
        group: K values per scale, 32, 64 or 128 (default 128, or 64 for
            ``"mlx_affine"``).
        layout: ``"rows"`` (the format's own) or ``"fragments"`` (``"fp4"``
            and ``"int4"``): the same codes in the tensor cores' fragment
            order, ``packed`` uint32 [K/64, 8·N] (units of 64 K values × 16
            columns, 128 words each, a lane's four words together), which
            :func:`qmatmul` reads with ``layout="fragments"`` on the tensor
            cores at every M; K must be a multiple of 64 and N of 16.

    Returns:
        ``(packed, scales)``, or ``(packed, scales, biases)`` for
        ``"mlx_affine"``: numpy arrays (``mx.array``s for an ``mx.array``
        ``w``). A bad shape raises ``ValueError``
        naming the numbers.
    """
    format = _format(format)
    layout = _layout(layout, format)
    m = _np.asarray(w, dtype=_np.float32)
    if m.ndim != 2:
        raise ValueError(f"quantize takes a 2-D [K, N] matrix, got shape {m.shape}")
    k, n = m.shape
    g = (64 if format == "mlx_affine" else 128) if group is None else int(group)
    packed, scales, biases = _enigma.quant_quantize(format, _np.ascontiguousarray(m).tobytes(), k, n, g, layout)
    if format == "mlx_affine":
        shape_p, shape_s = (n, k // 8), (n, k // g)
    elif layout == "fragments":
        shape_p, shape_s = (k // 64, 8 * n), (k // g, n)
    else:
        shape_p, shape_s = (k // 8, n), (k // g, n)
    p = _np.frombuffer(packed, dtype=_np.uint32).reshape(shape_p).copy()
    s = _np.frombuffer(scales, dtype=_np.float16).reshape(shape_s).copy()
    if format == "mlx_affine":
        return _host_like(w, p), _host_like(w, s), _host_like(w, _np.frombuffer(biases, dtype=_np.float16).reshape(shape_s).copy())
    return _host_like(w, p), _host_like(w, s)


def _quant_shape(format: str, packed: _Any, scales: _Any, layout: str = "rows") -> _Tuple[int, int, int]:
    """(K, N, group) from the arrays of :func:`quantize`."""
    packed, scales = _np.asarray(packed), _np.asarray(scales)
    if packed.dtype != _np.uint32 or scales.dtype != _np.float16 or packed.ndim != 2 or scales.ndim != 2:
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
    return int(k), int(n), int(k // groups)


def dequantize(packed: _Any, scales: _Any, format: str = "fp4", *, biases: _Any = None,
               layout: str = "rows") -> _np.ndarray:
    """The float32 [K, N] matrix that the arrays of :func:`quantize` stand for.

    Args:
        packed: the packed uint32 words from :func:`quantize`.
        scales: the float16 scales from :func:`quantize`.
        format: ``"fp4"``, ``"int4"`` or ``"mlx_affine"``, as quantized.
        biases: the float16 biases (``"mlx_affine"`` only, which needs them).
        layout: the packed words' layout, as given to :func:`quantize`.

    Returns:
        the [K, N] float32 weights, a numpy array (an ``mx.array`` for an
        ``mx.array`` ``packed``).
    """
    format = _format(format)
    layout = _layout(layout, format)
    k, n, group = _quant_shape(format, packed, scales, layout)
    if (biases is not None) != (format == "mlx_affine"):
        raise ValueError("biases go with format='mlx_affine' only, and it needs them")
    b = b"" if biases is None else _np.ascontiguousarray(_np.asarray(biases, dtype=_np.float16)).tobytes()
    out = _enigma.quant_dequantize(format, k, n, group, _np.ascontiguousarray(packed).tobytes(),
                                   _np.ascontiguousarray(scales).tobytes(), b, layout)
    return _host_like(packed, _np.frombuffer(out, dtype=_np.float32).reshape(k, n).copy())  # type: ignore[no-any-return]


def qmatmul(a: _Any, packed: _Any, scales: _Any, format: str = "fp4", *, out_dtype: _DTypeLike = _np.float16,
            biases: _Any = None, variant: str = "auto", layout: str = "rows", rt: _Optional[_MetalRuntime] = None,
            device: _DeviceName = "auto", threads: _Optional[int] = None) -> _np.ndarray:
    """``a @ dequantize(packed, scales, format, biases=biases)`` with the
    4-bit weights read by the GPU kernel, accumulated in float32.

    Args:
        a: [M, K] activations (or a K-vector), used as float16.
        packed: the packed words from :func:`quantize`.
        scales: the float16 scales from :func:`quantize`.
        format: ``"fp4"``, ``"int4"`` or ``"mlx_affine"`` (weights quantized
            by MLX, ``mx.quantize(w.T, group_size, bits=4)``, work as they
            are, biases in float16).
        out_dtype: float16 or float32.
        biases: the float16 biases of ``"mlx_affine"`` (only).
        variant: the kernel. ``"auto"``: the library's choice for M, the
            decode kernel up to :data:`QMATMUL_DECODE_ROWS` rows (for
            ``"int4"`` it sums each packed word's products in float16 four
            at a time before widening them, finite for |a| <= 16376), the
            tensor-core kernel above. ``"separate"``: the tensor-core kernel,
            B tiles decoded from packed words staged in threadgroup memory,
            each weight rounded to float16 with its scale. ``"fused"``: seed
            002's fused kernel, B dequantized per SIMD group through one 8×8
            fragment. The last two read ``"fp4"`` and ``"int4"`` only.
        layout: ``"rows"``, or ``"fragments"`` for weights from
            ``quantize(..., layout="fragments")``: the tensor cores at every
            M, with ``"auto"`` a decode kernel up to 8 rows and the tiled
            kernel above, with ``"separate"`` the tiled kernel (``"fused"``
            reads the rows layout only).
        rt: the :class:`enigma.MetalRuntime` to run on.
        device: the device when ``rt`` is not given (default ``"auto"``).
        threads: threads per threadgroup.

    Returns:
        the [M, N] product (an N-vector for a vector ``a``) as a numpy array
        of ``out_dtype`` (an ``mx.array`` for an ``mx.array`` ``a``).
    """
    if variant not in ("auto", "separate", "fused"):
        raise ValueError(f"qmatmul's variant is 'auto', 'separate' or 'fused', not {variant!r}")
    format = _format(format)
    layout = _layout(layout, format)
    k, n, group = _quant_shape(format, packed, scales, layout)
    if (biases is not None) != (format == "mlx_affine"):
        raise ValueError("biases go with format='mlx_affine' only, and it needs them")
    bias_bytes = None
    if biases is not None:
        b = _np.asarray(biases)
        if b.dtype != _np.float16 or b.shape != _np.shape(scales):
            raise TypeError(f"biases must be a float16 array of the scales' shape {_np.shape(scales)}; got {b.dtype} {b.shape}")
        bias_bytes = _np.ascontiguousarray(b).tobytes()
    x = _np.asarray(a)
    vector = x.ndim == 1
    a2 = x.reshape(1, -1) if vector else x
    if a2.ndim != 2 or a2.shape[1] != k:
        raise ValueError(f"qmatmul: a must be [M, {k}] (or a {k}-vector) for weights of K = {k}, got shape {x.shape}")
    out_type = _np.dtype(out_dtype)
    if out_type not in (_np.dtype(_np.float16), _np.dtype(_np.float32)):
        raise ValueError(f"qmatmul's out_dtype is float16 or float32, not {out_type}")
    out = "f16" if out_type == _np.float16 else "f32"
    native = rt.native if rt is not None else _native_runtime(device)
    m = a2.shape[0]
    _begin_library_call(rt)
    data = _enigma.op_qmatmul(native, format, _np.ascontiguousarray(a2, dtype=_np.float16).tobytes(),
                              _np.ascontiguousarray(packed).tobytes(), _np.ascontiguousarray(scales).tobytes(),
                              m, n, k, group, out, threads, bias_bytes, variant, layout)
    c = _np.frombuffer(data, dtype=out_type).reshape(m, n).copy()
    return _host_like(a, c[0] if vector else c)


# The most warm-up runs or repeats `tune` takes (the CLI's bound).
_MAX_REPEATS = 10_000


def tune(name: str, shape: _Sequence[int] = (), *, rt: _Optional[_MetalRuntime] = None, device: _DeviceName = "auto",
         warmup: int = 3, repeats: int = 10, record: bool = True) -> _Dict[str, _Any]:
    """Times the candidate threadgroup sizes of a library kernel.

    Args:
        name: the kernel, as ``enigma run list`` names it (``"softmax_f32"``,
            ``"gemv_f16"``, …).
        shape: the problem shape (default: the kernel's small test shape).
        rt: the :class:`enigma.MetalRuntime` to time on.
        device: the device when ``rt`` is not given (default ``"auto"``).
        warmup: untimed runs first (0 to 10000).
        repeats: timed runs (1 to 10000).
        record: record the best in the tuning cache, which the library then
            uses for that device, kernel and shape class.

    Returns:
        the report as a dict: ``best`` (the fastest correct choice, or
        None), ``trials`` (each candidate timed, skipped with the reason, or
        wrong), ``shape_class`` and ``cache`` (the file the best was
        recorded in, or None).
    """
    if not isinstance(name, str):
        raise TypeError(f"tune: name must be a library kernel's name (a str like 'softmax_f32'), not {type(name).__name__}")
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"tune: shape must be a tuple of ints like (64, 1000), not {shape!r}")
    dims = tuple(shape)
    if not all(isinstance(d, _numbers.Integral) and not isinstance(d, bool) and 1 <= d < 2**63 for d in dims):
        raise ValueError(f"tune: shape must hold positive ints (like (64, 1000)), got {dims!r}")
    for what, value, least in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, _numbers.Integral) or not least <= value <= _MAX_REPEATS:
            raise ValueError(f"tune: {what} must be an int between {least} and {_MAX_REPEATS}, not {value!r}")
    native = rt.native if rt is not None else _native_runtime(device)
    text = _enigma.op_tune(native, name, [int(d) for d in dims], int(warmup), int(repeats), bool(record))
    return _json.loads(text)  # type: ignore[no-any-return]
