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
``prefix_sum``. Element-wise, softmax, norm, matrix product and attention results have the
input's type; reductions and GEMV give float32. All inputs of one call
share one type (GEMV's vector is float32). Arithmetic is float32 inside.
Arrays must be C-contiguous (numpy arrays are made so); a ``threads=``
argument overrides the threadgroup size (default: seed 004's table for the
kernel type).

Shapes and names follow torch: ``dim=`` (negative allowed) and ``keepdim=``
on the reductions, softmax/log_softmax, argmax/argmin, cumsum/cumprod; the
norms over a trailing ``normalized_shape``; batch dimensions on
:func:`matmul` and :func:`bmm`; NumPy broadcasting on add, mul and div;
``cross_entropy``, pooling and ``conv2d`` with torch's arguments;
``out=`` on every operation (the result written into an array the caller
gives, of its exact shape and type: see :func:`scale`). ``enigma.torch_ops``
registers the operations as torch custom operators for ``torch.compile``.
``docs/library.md`` lists where enigma differs from torch.
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
    "layer_norm", "gemv", "matmul", "attention_decode", "scaled_dot_product_attention", "quantize", "dequantize", "qmatmul",
    "tune", "QMATMUL_DECODE_ROWS",
    # torch's conventions: axes, batch dimensions, the operators torch users reach for
    "mean", "argmax", "argmin", "cumsum", "cumprod", "log_softmax", "bmm", "sigmoid", "exp", "log", "div", "cross_entropy", "max_pool2d", "avg_pool2d", "conv2d",
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
_TYPE_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32", "u32": "uint32"}


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


def _host_out(op: str, template: _Any, result: _np.ndarray, out: _Any) -> _Any:
    """A host function's result (a numpy array) as :func:`_host_like`
    gives it, or copied into ``out``, a writable numpy array of its shape
    and dtype (returned)."""
    if out is None:
        return _host_like(template, result)
    if _mlx.is_mlx_array(template):
        raise TypeError(f"{op}: out= is not supported for mx.array inputs (MLX arrays are immutable); use the returned array")
    if not isinstance(out, _np.ndarray):
        raise TypeError(f"{op}: out must be a numpy array (the result is one), not {type(out).__module__}.{type(out).__name__}")
    if out.shape != result.shape:
        raise ValueError(f"{op}: out has shape {out.shape}, the result has shape {result.shape}")
    if out.dtype != result.dtype:
        raise TypeError(f"{op}: out holds {out.dtype}, the result is {result.dtype}; enigma does not cast into out")
    if not out.flags.writeable:
        raise ValueError(f"{op}: out is read-only")
    _np.copyto(out, result)
    return out


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


def _place(a: _Any) -> str:
    """The kind of array ``a`` is and where it lives, as ``out=`` compares
    them (and says them): ``"an enigma.Array on sim"``, ``"a numpy
    array"``, ``"a torch tensor on cpu"``, ``"an mx.array"``…"""
    if isinstance(a, _enigma.Array):
        return f"an enigma.Array on {a.device}"
    if _mlx.is_mlx_array(a):
        return "an mx.array"
    mod = type(a).__module__.split(".")[0]
    if mod == "numpy" or not hasattr(a, "__dlpack__"):
        return "a numpy array"
    kind, index = a.__dlpack_device__()
    return f"a {mod} tensor on " + ("cpu" if int(kind) == 1 else f"DLPack device {int(kind)}:{int(index)}")


def _write_out(op: str, template: _Any, result: _enigma.Array, out: _Any, t: "_Target") -> _Any:
    """``out=``: ``result`` written into ``out`` (returned), which must be
    the kind of array the call would return (``template``'s kind, on its
    device), C-contiguous and writable, of the result's shape and type."""
    got, want = _place(out), _place(template)
    if want == "an mx.array":
        raise TypeError(f"{op}: out= is not supported for mx.array inputs (MLX arrays are immutable); use the returned array")
    if got != want:
        raise TypeError(f"{op}: out is {got}, but the result is {want}; pass an array of the kind and device the call returns")
    shape, kind = tuple(result.shape), result.dtype
    if tuple(int(d) for d in out.shape) != shape:
        raise ValueError(f"{op}: out has shape {tuple(out.shape)}, the result has shape {shape}")
    have = _kind(out)
    if have != kind and not (kind == "bf16" and have == "u16" and isinstance(out, _np.ndarray)):
        raise TypeError(f"{op}: out holds {out.dtype}, the result is {_TYPE_NAMES.get(kind, kind)} ({kind}); "
                        "enigma does not cast into out")
    if isinstance(out, _np.ndarray) and not out.flags.writeable:
        raise ValueError(f"{op}: out is read-only")
    _enigma.op_write_into(t.native, result, out, op, **t.options())
    return out


def _give(op: str, template: _Any, result: _enigma.Array, out: _Any, t: "_Target", scalar: bool = False) -> _Any:
    """The call's result: ``result`` (an ``enigma.Array`` of the final
    shape; of 1 element when ``scalar``) as ``template``'s kind of array
    (its one element, for ``scalar``), or written into ``out``."""
    if out is None:
        like = _like(template, result)
        return _first(like) if scalar else like
    return _write_out(op, template, result.reshape([]) if scalar else result, out, t)


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
          device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
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
        out: an array to write the result into, returned instead of a new
            one (torch's ``out=``): of the kind and on the device the call
            would return (an ``enigma.Array``, a numpy array, a torch or
            CuPy tensor), C-contiguous and writable, of the result's exact
            shape and type (no casts, no broadcasting). The result is
            computed in enigma's memory, then copied into ``out`` by one
            device copy on the call's stream (through a staging buffer for
            host memory). A mismatch raises ``TypeError`` (kind, device,
            type) or ``ValueError`` (shape), a read-only or strided ``out``
            ``DispatchError``, before anything is written.

    Returns:
        ``x * factor``: an array of ``x``'s kind, shape and type (``out``
        when given).
    """
    a = _array(x)
    t = _Target("scale", [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    f = _number("scale", "factor", factor)
    return _give("scale", a, _enigma.op_scale(t.native, a, _shape(a), f, t.elem, **t.options()), out, t)  # type: ignore[no-any-return]


def _binary(op: str, a: _Any, b: _Any, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
            threads: _Optional[int], stream: _Stream, out: _Any) -> _Any:
    a, b = _array(a), _array(b)
    t = _Target(op, [a, b], typed=2, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    if _shape(a) != _shape(b) or op == "div":
        # NumPy broadcasting (equal shapes run the flat kernels); a shape
        # pair that does not broadcast is refused there.
        return _give(op, a, _enigma.op_binary_broadcast(t.native, a, b, _shape(a), _shape(b), op, t.elem, **t.options()), out, t)
    native_op = _enigma.op_add if op == "add" else _enigma.op_mul
    return _give(op, a, native_op(t.native, a, b, _shape(a), t.elem, **t.options()), out, t)


def add(a: _ArrayT, b: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """``a + b``, element-wise, with NumPy broadcasting (as torch).

    Args:
        a: the first array (float32, float16 or bfloat16; C-contiguous).
        b: the second array, of ``a``'s type; the two shapes broadcast
            (aligned at the end, each dimension equal or 1).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        ``a + b``: an array of ``a``'s kind and type, of the broadcast
        shape.
    """
    return _binary("add", a, b, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def mul(a: _ArrayT, b: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """``a * b``, element-wise, with NumPy broadcasting (as torch).

    Args:
        a: the first array (float32, float16 or bfloat16; C-contiguous).
        b: the second array, of ``a``'s type; the two shapes broadcast
            (aligned at the end, each dimension equal or 1).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        ``a * b``: an array of ``a``'s kind and type, of the broadcast
        shape.
    """
    return _binary("mul", a, b, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def div(a: _ArrayT, b: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """``a / b``, element-wise, with NumPy broadcasting (torch's true division).

    Args:
        a: the dividend (float32, float16 or bfloat16; C-contiguous).
        b: the divisor, of ``a``'s type; the shapes broadcast as for :func:`add`.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        ``a / b``: an array of ``a``'s kind and type, of the broadcast shape.
    """
    return _binary("div", a, b, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def _unary(op: str, x: _Any, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
           threads: _Optional[int], stream: _Stream, out: _Any) -> _Any:
    a = _array(x)
    t = _Target(op, [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    native_op = {"relu": _enigma.op_relu, "silu": _enigma.op_silu, "gelu": _enigma.op_gelu, "gelu_erf": _enigma.op_gelu_erf,
                 "sigmoid": _enigma.op_sigmoid, "exp": _enigma.op_exp, "log": _enigma.op_log}[op]
    return _give(op, a, native_op(t.native, a, _shape(a), t.elem, **t.options()), out, t)


def relu(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
         device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """``max(x, 0)``, element-wise.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    return _unary("relu", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def silu(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
         device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """``x * sigmoid(x)``, element-wise.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    return _unary("silu", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def gelu(x: _ArrayT, approximate: str = "none", *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
         device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """GELU, element-wise, as ``torch.nn.functional.gelu``.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        approximate: ``"none"``: ``0.5·x·(1 + erf(x/√2))`` (erfc by
            Abramowitz and Stegun's rational approximation 7.1.26, absolute
            error at most 1.5e-7, on every backend); ``"tanh"``:
            ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate is 'none' or 'tanh', not {approximate!r}")
    return _unary("gelu" if approximate == "tanh" else "gelu_erf", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def sigmoid(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
            device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """``1 / (1 + exp(-x))``, element-wise.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    return _unary("sigmoid", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def exp(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """``exp(x)``, element-wise.

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    return _unary("exp", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def log(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The natural logarithm, element-wise (``-inf`` at 0, NaN below).

    Args:
        x: the array (any shape; float32, float16 or bfloat16).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        an array of ``x``'s kind, shape and type.
    """
    return _unary("log", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


# ----- Operations over axes (``dim=``, ``keepdim=``) -----------------------

def _dims(op: str, shape: _Sequence[int], dim: _Any) -> _List[int]:
    """``dim`` (None, an int or a sequence of ints, negative counting from
    the end) as the sorted axes of ``shape`` it names, all axes for None; a
    0-d array has the one axis 0 (also -1). Axes must be adjacent."""
    nd = len(shape)
    rank = nd if nd > 0 else 1
    if dim is None:
        return list(range(rank))
    seq = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    if not seq:
        return list(range(rank))
    axes = set()
    for d in seq:
        if isinstance(d, bool) or not isinstance(d, _numbers.Integral):
            raise TypeError(f"{op}: dim must be an int or a tuple of ints, not {type(d).__name__} {d!r}")
        if not -rank <= int(d) < rank:
            raise IndexError(f"{op}: dim {d} is out of range for a {nd}-D array (expected {-rank} to {rank - 1})")
        axes.add(int(d) % rank)
    out = sorted(axes)
    if out != list(range(out[0], out[-1] + 1)):
        raise ValueError(f"{op}: dims {tuple(seq)} of a {nd}-D array are not adjacent; enigma.ops reduces over one run of "
                         "adjacent axes (reduce twice, or make the axes adjacent first)")
    return out


def _split(shape: _Sequence[int], axes: _Sequence[int]) -> _Tuple[int, int, int]:
    """``shape`` seen as ``[outer, axis, inner]`` around the adjacent ``axes``."""
    dims = list(shape) or [1]
    first, last = axes[0], axes[-1]
    return _math.prod(dims[:first]), _math.prod(dims[first:last + 1]), _math.prod(dims[last + 1:])


def _reduce_axes(op: str, x: _Any, dim: _Any, keepdim: bool, dtype: _Optional[str], rt: _Optional[_MetalRuntime],
                 device: _Optional[_DeviceName], threads: _Optional[int], stream: _Stream, out: _Any) -> _Any:
    """``op`` (sum, mean, max, min, argmax, argmin) over ``dim``."""
    a = _array(x)
    shape = _shape(a)
    axes = _dims(op, shape, dim)
    outer, axis, inner = _split(shape, axes)
    t = _Target(op, [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    res = _enigma.op_reduce_axis(t.native, a, outer, axis, inner, op, t.elem, **t.options())
    if dim is None and not keepdim:
        return _give(op, a, res, out, t, scalar=True)
    if keepdim:
        result = [1 if i in axes else d for i, d in enumerate(shape)]
    else:
        result = [d for i, d in enumerate(shape) if i not in axes]
    return _give(op, a, res.reshape(result), out, t)


def sum(x: _ArrayT, dim: _Any = None, keepdim: bool = False, *, dtype: _Optional[str] = None,  # noqa: A001 - the library's name
        rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
        stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The sum over ``dim``, as ``torch.sum``.

    Args:
        x: the array (any shape; float32, float16 or bfloat16; C-contiguous).
        dim: None (every element), an axis (negative counts from the end) or
            a tuple of adjacent axes.
        keepdim: keep the reduced axes, of size 1.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the sums in float32 (torch keeps the input's type): for
        ``dim=None`` a numpy scalar for a numpy ``x``, else a 0-d array of
        ``x``'s kind; with ``dim``, ``x``'s shape without (or, with
        ``keepdim``, with size 1 at) the reduced axes.
    """
    return _reduce_axes("sum", x, dim, keepdim, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def mean(x: _ArrayT, dim: _Any = None, keepdim: bool = False, *, dtype: _Optional[str] = None,
         rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
         stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The mean over ``dim``, as ``torch.mean``: the float32 sum times
    ``1 / n``.

    Args:
        x, dim, keepdim: as for :func:`sum`.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the means in float32, shaped as for :func:`sum`.
    """
    return _reduce_axes("mean", x, dim, keepdim, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def max(x: _ArrayT, dim: _Any = None, keepdim: bool = False, *, dtype: _Optional[str] = None,  # noqa: A001
        rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
        stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The largest element over ``dim``: the values of ``torch.amax``
    (``torch.max(x, dim)`` also gives indices: see :func:`argmax`).

    Args:
        x, dim, keepdim: as for :func:`sum`.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the maxima in float32, shaped as for :func:`sum`.
    """
    return _reduce_axes("max", x, dim, keepdim, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def min(x: _ArrayT, dim: _Any = None, keepdim: bool = False, *, dtype: _Optional[str] = None,  # noqa: A001
        rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
        stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The smallest element over ``dim``: the values of ``torch.amin``.

    Args:
        x, dim, keepdim: as for :func:`sum`.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the minima in float32, shaped as for :func:`sum`.
    """
    return _reduce_axes("min", x, dim, keepdim, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def _arg(op: str, x: _Any, dim: _Optional[int], keepdim: bool, dtype: _Optional[str], rt: _Optional[_MetalRuntime],
         device: _Optional[_DeviceName], threads: _Optional[int], stream: _Stream, out: _Any) -> _Any:
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, _numbers.Integral)):
        raise TypeError(f"{op}: dim must be an int or None, not {type(dim).__name__} {dim!r}")
    return _reduce_axes(op, x, dim, keepdim, dtype, rt, device, threads, stream, out)


def argmax(x: _ArrayT, dim: _Optional[int] = None, keepdim: bool = False, *, dtype: _Optional[str] = None,
           rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
           stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The index of the first largest element along ``dim``, as
    ``torch.argmax`` (a NaN counts as the largest).

    Args:
        x: the array (float32, float16 or bfloat16; C-contiguous).
        dim: the axis (negative counts from the end), or None: the index
            into the flattened array.
        keepdim: keep the axis, of size 1.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        int32 indices (torch gives int64), shaped as for :func:`sum`.
    """
    return _arg("argmax", x, dim, keepdim, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def argmin(x: _ArrayT, dim: _Optional[int] = None, keepdim: bool = False, *, dtype: _Optional[str] = None,
           rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
           stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The index of the first smallest element along ``dim``, as
    ``torch.argmin`` (a NaN counts as the smallest).

    Args:
        x, dim, keepdim: as for :func:`argmax`.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        int32 indices, shaped as for :func:`sum`.
    """
    return _arg("argmin", x, dim, keepdim, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def _one_dim(op: str, dim: _Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, _numbers.Integral):
        raise TypeError(f"{op}: dim must be an int, not {type(dim).__name__} {dim!r}")
    return int(dim)


def _along(op: str, x: _Any, dim: _Any, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
           threads: _Optional[int], stream: _Stream, out: _Any, call: _Any) -> _Any:
    """An operation along one axis whose result has ``x``'s shape:
    ``call(native, a, outer, axis, inner, elem, options)``."""
    a = _array(x)
    shape = _shape(a)
    outer, axis, inner = _split(shape, _dims(op, shape, _one_dim(op, dim)))
    t = _Target(op, [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    return _give(op, a, call(t.native, a, outer, axis, inner, t.elem, t.options()).reshape(shape), out, t)


def cumsum(x: _ArrayT, dim: int, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
           device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """Running sums along ``dim``, as ``torch.cumsum``.

    Args:
        x: the array (float32, float16, bfloat16, int32 or uint32;
            C-contiguous). Floats accumulate in float32, each result rounded
            once to ``x``'s type; integers in their own type (wrapping).
        dim: the axis (negative counts from the end).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the running sums, of ``x``'s kind, shape and type (torch gives
        int64 for integer inputs).
    """
    return _along("cumsum", x, dim, dtype, rt, device, threads, stream, out,  # type: ignore[no-any-return]
                  lambda native, a, o, n, i, elem, opts: _enigma.op_scan_axis(native, a, o, n, i, "sum", elem, **opts))


def cumprod(x: _ArrayT, dim: int, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
            device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """Running products along ``dim``, as ``torch.cumprod``.

    Args:
        x, dim: as for :func:`cumsum`.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the running products, of ``x``'s kind, shape and type.
    """
    return _along("cumprod", x, dim, dtype, rt, device, threads, stream, out,  # type: ignore[no-any-return]
                  lambda native, a, o, n, i, elem, opts: _enigma.op_scan_axis(native, a, o, n, i, "prod", elem, **opts))


def softmax(x: _ArrayT, dim: int = -1, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
            device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """Softmax along ``dim``, as ``torch.softmax`` (numerically stable: the
    maximum is subtracted first; a slice of only ``-inf`` gives NaN).

    Args:
        x: the array (any shape; float32, float16 or bfloat16; C-contiguous).
        dim: the axis (negative counts from the end; default the last, which
            runs the row kernels; other axes run one thread per column).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the softmax, of ``x``'s kind, shape and type.
    """
    return _along("softmax", x, dim, dtype, rt, device, threads, stream, out,  # type: ignore[no-any-return]
                  lambda native, a, o, n, i, elem, opts: _enigma.op_softmax_axis(native, a, o, n, i, False, elem, **opts))


def log_softmax(x: _ArrayT, dim: int = -1, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
                device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """``x - max - log(sum(exp(x - max)))`` along ``dim``, as
    ``torch.log_softmax``.

    Args:
        x, dim: as for :func:`softmax`.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the log-probabilities, of ``x``'s kind, shape and type.
    """
    return _along("log_softmax", x, dim, dtype, rt, device, threads, stream, out,  # type: ignore[no-any-return]
                  lambda native, a, o, n, i, elem, opts: _enigma.op_softmax_axis(native, a, o, n, i, True, elem, **opts))


def _int32_targets(op: str, target: _Any) -> _Any:
    """Class indices as int32: numpy and torch integer arrays converted
    (torch's are int64), int32 arrays of any kind as they are."""
    t = _array(target)
    kind = _kind(t)
    if kind == "i32":
        return t
    if kind not in ("i64", "u32", "i16", "u16", "i8", "u8"):
        raise TypeError(f"{op}: target must hold integer class indices, not {t.dtype}")
    if isinstance(t, _np.ndarray):
        return t.astype(_np.int32)
    if hasattr(t, "to") and type(t).__module__.split(".")[0] == "torch":
        import torch
        return t.to(torch.int32)
    raise TypeError(f"{op}: target of {t.dtype} must be int32 here (convert it first)")


def cross_entropy(input: _ArrayT, target: _Any, *, ignore_index: int = -100, reduction: str = "mean",  # noqa: A002 - torch's name
                  dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None,
                  threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """Cross-entropy of logits against class indices, as
    ``torch.nn.functional.cross_entropy`` (no class weights, no label
    smoothing, no probability targets): log-softmax over the classes, the
    negative log-probability of each target, then the reduction.

    Args:
        input: logits ``[N, C]``, ``[N, C, d1, …]`` (classes on axis 1) or
            ``[C]`` (float32, float16 or bfloat16; C-contiguous).
        target: class indices of ``input``'s shape without axis 1 (integers;
            numpy and torch int64 converted to int32).
        ignore_index: a target that contributes 0 and is not counted in the mean.
        reduction: ``"mean"`` (over the targets not ignored; NaN when all
            are), ``"sum"`` or ``"none"`` (the losses, of the target's shape).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        float32: a 0-d array (a numpy scalar for numpy input) or, with
        ``"none"``, an array of the target's shape. A target outside
        ``[0, C)`` gives ``+inf`` (torch raises).
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction is 'mean', 'sum' or 'none', not {reduction!r}")
    x = _array(input)
    shape = _shape(x)
    if not shape:
        raise ValueError("cross_entropy takes logits of at least 1 dimension, got a 0-d array")
    classes_axis = 0 if len(shape) == 1 else 1
    want = shape[:classes_axis] + shape[classes_axis + 1:]
    t = _int32_targets("cross_entropy", target)
    if _shape(t) != want:
        raise ValueError(f"cross_entropy: target has shape {tuple(_shape(t))}; logits of shape {tuple(shape)} need {tuple(want)}")
    outer, classes, inner = _split(shape, [classes_axis])
    tg = _Target("cross_entropy", [x, t], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    ignore = int(ignore_index)
    if not -2**31 <= ignore < 2**31:
        raise ValueError(f"cross_entropy: ignore_index={ignore} is not an int32")
    res = _enigma.op_cross_entropy(tg.native, x, t, outer, classes, inner, ignore, reduction, tg.elem, **tg.options())
    if reduction == "none":
        return _give("cross_entropy", x, res.reshape(want), out, tg)  # type: ignore[no-any-return]
    return _give("cross_entropy", x, res, out, tg, scalar=True)  # type: ignore[no-any-return]


def _pair(op: str, what: str, v: _Any) -> _List[int]:
    """An int or a pair of ints (height, width), checked non-negative."""
    pair = [v, v] if isinstance(v, _numbers.Integral) and not isinstance(v, bool) else list(v) if isinstance(v, (tuple, list)) else None
    if pair is None or len(pair) != 2 or not all(isinstance(d, _numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in pair):
        raise TypeError(f"{op}: {what} must be an int or a pair of ints (height, width), not {v!r}")
    return [int(d) for d in pair]


def _pool(op: str, kind: str, x: _Any, kernel_size: _Any, stride: _Any, padding: _Any, dtype: _Optional[str],
          rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName], threads: _Optional[int], stream: _Stream, out: _Any) -> _Any:
    a = _array(x)
    shape = _shape(a)
    if len(shape) not in (3, 4):
        raise ValueError(f"{op} takes [N, C, H, W] or [C, H, W], got shape {tuple(shape)}")
    kernel = _pair(op, "kernel_size", kernel_size)
    steps = kernel if stride is None else _pair(op, "stride", stride)
    pad = _pair(op, "padding", padding)
    t = _Target(op, [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    planes = _math.prod(shape[:-2])
    res = _enigma.op_pool2d(t.native, a, planes, shape[-2:], kernel, steps, pad, kind, t.elem, **t.options())
    return _give(op, a, res.reshape(shape[:-2] + list(res.shape[1:])), out, t)


def max_pool2d(x: _ArrayT, kernel_size: _Any, stride: _Any = None, padding: _Any = 0, *, dtype: _Optional[str] = None,
               rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
               stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The maximum of each window of each plane, as
    ``torch.nn.functional.max_pool2d`` (no dilation, no ``ceil_mode``, no
    indices).

    Args:
        x: ``[N, C, H, W]`` or ``[C, H, W]`` (float32, float16 or bfloat16;
            C-contiguous).
        kernel_size: the window, an int or (height, width).
        stride: the step between windows (default the window).
        padding: padding on each side (at most half the window); it never
            wins a maximum.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        ``[..., (H + 2·padding - kernel) // stride + 1, …]`` of ``x``'s kind
        and type.
    """
    return _pool("max_pool2d", "max", x, kernel_size, stride, padding, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def avg_pool2d(x: _ArrayT, kernel_size: _Any, stride: _Any = None, padding: _Any = 0, count_include_pad: bool = True, *,
               dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None,
               threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The mean of each window of each plane, as
    ``torch.nn.functional.avg_pool2d`` (no ``ceil_mode``, no
    ``divisor_override``).

    Args:
        x, kernel_size, stride, padding: as for :func:`max_pool2d`.
        count_include_pad: divide by the whole window (True) or by its
            elements inside the plane.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the means, shaped as for :func:`max_pool2d`.
    """
    kind = "avg" if count_include_pad else "avg_valid"
    return _pool("avg_pool2d", kind, x, kernel_size, stride, padding, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def conv2d(input: _ArrayT, weight: _Any, bias: _Any = None, stride: _Any = 1, padding: _Any = 0,  # noqa: A002 - torch's name
           dilation: _Any = 1, groups: int = 1, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
           device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """2-D convolution (cross-correlation), as ``torch.nn.functional.conv2d``,
    with f32 accumulation. Dense float16/bfloat16 convolutions of input
    channels a multiple of 64 (but a 1×1 window of stride 1 without padding)
    run as an implicit GEMM on cooperative tensors on GPUs with warpgroup
    matrix instructions (Hopper): the weights reordered by tap and the
    input copied channels-last (scratch memory of the input's size), then
    one kernel that stages the windows' rows itself. Other groups of more
    than one input channel (dense, grouped, pointwise) run as the input
    unfolded (im2col, scratch memory of
    ``N·C_in·kH·kW·H_out·W_out`` elements; none for a 1×1 window of stride 1
    without padding) and one batched matmul over images and groups (with a
    bias, a float16/bfloat16 result is rounded before the bias is added);
    depthwise ones (``groups`` = input channels) of stride and dilation 1
    over rows of whole 16-byte words by rows of words (a thread per 16-byte
    word of outputs in 4 rows), other depthwise ones by 32×32 output tiles
    whose input is staged in threadgroup memory; the rest (windows past 49 taps,
    unfoldings past 1 GiB) with the direct kernel, one thread per output
    element. The docs' "Convolution" section says more.

    Args:
        input: ``[N, C_in, H, W]`` or ``[C_in, H, W]`` (float32, float16 or
            bfloat16; C-contiguous).
        weight: ``[C_out, C_in / groups, kH, kW]``, of ``input``'s type.
        bias: ``C_out`` values of ``input``'s type, or None.
        stride, padding, dilation: an int or (height, width) (``padding``
            as zeros on each side; no ``"same"``/``"valid"`` strings).
        groups: channel groups, dividing ``C_in`` and ``C_out``.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        ``[N, C_out, H_out, W_out]`` (``[C_out, …]`` for a 3-D input) of
        ``input``'s kind and type; ``H_out = (H + 2·padding - dilation·(kH - 1) - 1) // stride + 1``.
    """
    x, w = _array(input), _array(weight)
    xs, ws = _shape(x), _shape(w)
    if len(xs) not in (3, 4) or len(ws) != 4:
        raise ValueError(f"conv2d takes input [N, C_in, H, W] (or [C_in, H, W]) and weight [C_out, C_in/groups, kH, kW], "
                         f"got shapes {tuple(xs)} and {tuple(ws)}")
    unbatched = len(xs) == 3
    n, c_in, h, wd = ([1] + xs) if unbatched else xs
    if isinstance(groups, bool) or not isinstance(groups, _numbers.Integral) or groups < 1:
        raise TypeError(f"conv2d: groups must be a positive int, not {groups!r}")
    if c_in % int(groups) != 0 or ws[1] * int(groups) != c_in:
        raise ValueError(f"conv2d: weight {tuple(ws)} does not fit input {tuple(xs)} with groups={groups} "
                         f"(weight's second dimension must be C_in / groups = {c_in} / {groups})")
    given = [x, w] + ([_array(bias)] if bias is not None else [])
    t = _Target("conv2d", given, typed=len(given), dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    res = _enigma.op_conv2d(t.native, x, w, given[2] if bias is not None else None, n, c_in, [h, wd], ws[0], ws[2:],
                            _pair("conv2d", "stride", stride), _pair("conv2d", "padding", padding),
                            _pair("conv2d", "dilation", dilation), int(groups), t.elem, **t.options())
    return _give("conv2d", x, res.reshape(list(res.shape[1:]) if unbatched else list(res.shape)), out, t)  # type: ignore[no-any-return]


# ----- end of the operations over axes --------------------------------------


def _reduce_rows(op: str, x: _Any, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
                 threads: _Optional[int], stream: _Stream, out: _Any) -> _Any:
    a, rows, d = _rows(x, f"{op}_rows")
    t = _Target(f"{op}_rows", [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    return _give(f"{op}_rows", a, _enigma.op_reduce_rows(t.native, a, rows, d, op, t.elem, **t.options()), out, t)


def sum_rows(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
             device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The sum of each row of a 2-D array.

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        a float32 array of ``rows`` sums, of ``x``'s kind.
    """
    return _reduce_rows("sum", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def max_rows(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
             device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The largest element of each row of a 2-D array.

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        a float32 array of ``rows`` maxima, of ``x``'s kind.
    """
    return _reduce_rows("max", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def min_rows(x: _ArrayT, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
             device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """The smallest element of each row of a 2-D array.

    Args:
        x: a [rows, d] array (float32, float16 or bfloat16).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        a float32 array of ``rows`` minima, of ``x``'s kind.
    """
    return _reduce_rows("min", x, dtype, rt, device, threads, stream, out)  # type: ignore[no-any-return]


def prefix_sum(x: _ArrayT, *, exclusive: bool = False, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
               device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """Running sums of a vector.

    Args:
        x: the values (float32, float16, bfloat16, int32 or uint32; any
            shape, read in order).
        exclusive: ``False``: ``y[i] = x[0] + … + x[i]``; ``True``:
            ``y[i] = x[0] + … + x[i-1]`` (``y[0] = 0``).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the running sums, of ``x``'s kind, shape and type.
    """
    a = _array(x)
    t = _Target("prefix_sum", [a], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    n = _math.prod(_shape(a))
    res = _enigma.op_prefix_sum(t.native, a, n, bool(exclusive), t.elem, **t.options())
    return _give("prefix_sum", a, res.reshape(_shape(a)), out, t)  # type: ignore[no-any-return]


def _is_shape(v: _Any) -> bool:
    """Whether ``v`` is a ``normalized_shape`` (an int or a sequence of
    ints) rather than an array."""
    if isinstance(v, bool):
        return False
    if isinstance(v, _numbers.Integral):
        return True
    return isinstance(v, (tuple, list)) and all(isinstance(d, _numbers.Integral) and not isinstance(d, bool) for d in v)


def _norm_rows(op: str, a: _Any, normalized_shape: _Any) -> _Tuple[int, int]:
    """``(rows, d)`` of a norm over the trailing ``normalized_shape`` of
    ``a`` (default: its last axis)."""
    shape = _shape(a)
    if not shape:
        raise ValueError(f"{op} takes an array of at least 1 dimension, got a 0-d array")
    if normalized_shape is None:
        trailing = shape[-1:]
    else:
        trailing = [int(normalized_shape)] if isinstance(normalized_shape, _numbers.Integral) else [int(d) for d in normalized_shape]
        if not trailing or len(trailing) > len(shape) or shape[len(shape) - len(trailing):] != trailing:
            raise ValueError(f"{op}: normalized_shape {tuple(trailing)} is not the trailing shape of x {tuple(shape)}")
    d = _math.prod(trailing)
    return _math.prod(shape) // d if d else 0, d


def _filled(elem: str, d: int, value: float) -> _np.ndarray:
    """``d`` host values of ``value`` in element type ``elem`` (bfloat16 as
    uint16 bits): a weight or bias left out."""
    if elem == "bf16":
        return _np.full(d, _np.float32(value).view(_np.uint32) >> 16, dtype=_np.uint16)
    return _np.full(d, value, dtype=_NUMPY_NAMES[elem])


def _norm_args(op: str, normalized_shape: _Any, weight: _Any, bias: _Any, has_bias: bool) -> _Tuple[_Any, _Any, _Any]:
    """``(normalized_shape, weight, bias)`` from torch's order, or from the
    older ``(x, weight[, bias])`` order, where the second argument is an array."""
    if normalized_shape is None or _is_shape(normalized_shape):
        return normalized_shape, weight, bias
    if (bias if has_bias else weight) is not None:
        raise TypeError(f"{op}: the second argument is an array (the weight), so the norm is over the last axis and "
                        f"takes no further {'bias' if has_bias else 'weight'}; pass normalized_shape, weight= and bias= instead")
    return None, normalized_shape, weight


def rms_norm(x: _ArrayT, normalized_shape: _Any = None, weight: _Any = None, *, eps: float = 1e-5,
             dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None,
             threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """RMSNorm over the trailing ``normalized_shape``, as
    ``torch.nn.functional.rms_norm``: ``x / sqrt(mean(x²) + eps) * weight``.

    Args:
        x: the array (float32, float16 or bfloat16; C-contiguous).
        normalized_shape: the trailing axes normalised together (an int or a
            tuple; default the last axis). An array here is the weight, over
            the last axis (``rms_norm(x, weight)``).
        weight: ``normalized_shape`` values of ``x``'s type (default ones).
        eps: added to the mean square, a finite float32 (torch's default is
            the type's epsilon; enigma's 1e-5).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the normalised array, of ``x``'s kind, shape and type.
    """
    normalized_shape, weight, _ = _norm_args("rms_norm", normalized_shape, weight, None, False)
    a = _array(x)
    rows, d = _norm_rows("rms_norm", a, normalized_shape)
    given = [a] + ([_array(weight)] if weight is not None else [])
    t = _Target("rms_norm", given, typed=len(given), dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    w = given[1] if weight is not None else _filled(t.elem, d, 1.0)
    e = _number("rms_norm", "eps", eps)
    res = _enigma.op_rms_norm(t.native, a, w, rows, d, e, t.elem, **t.options())
    return _give("rms_norm", a, res.reshape(_shape(a)), out, t)  # type: ignore[no-any-return]


def layer_norm(x: _ArrayT, normalized_shape: _Any = None, weight: _Any = None, bias: _Any = None, *, eps: float = 1e-5,
               dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None,
               threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """LayerNorm over the trailing ``normalized_shape``, as
    ``torch.nn.functional.layer_norm``:
    ``(x - mean) / sqrt(var + eps) * weight + bias``.

    Args:
        x: the array (float32, float16 or bfloat16; C-contiguous).
        normalized_shape: the trailing axes normalised together (an int or a
            tuple; default the last axis). An array here is the weight, over
            the last axis (``layer_norm(x, weight, bias)``).
        weight: ``normalized_shape`` values of ``x``'s type (default ones).
        bias: ``normalized_shape`` values of ``x``'s type (default zeros).
        eps: added to the variance, a finite float32.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the normalised array, of ``x``'s kind, shape and type.
    """
    normalized_shape, weight, bias = _norm_args("layer_norm", normalized_shape, weight, bias, True)
    a = _array(x)
    rows, d = _norm_rows("layer_norm", a, normalized_shape)
    w = _array(weight) if weight is not None else None
    b = _array(bias) if bias is not None else None
    given = [a] + [v for v in (w, b) if v is not None]
    t = _Target("layer_norm", given, typed=len(given), dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    e = _number("layer_norm", "eps", eps)
    w = w if w is not None else _filled(t.elem, d, 1.0)
    b = b if b is not None else _filled(t.elem, d, 0.0)
    res = _enigma.op_layer_norm(t.native, a, w, b, rows, d, e, t.elem, **t.options())
    return _give("layer_norm", a, res.reshape(_shape(a)), out, t)  # type: ignore[no-any-return]


def gemv(w: _ArrayT, x: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
         device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """Matrix-vector product ``w @ x``, accumulated in float32.

    Args:
        w: an [m, k] matrix (float32, float16 or bfloat16).
        x: k values, used as float32.
        dtype, rt, device, threads, stream, out: as for :func:`scale` (``dtype``
            is ``w``'s).

    Returns:
        the m float32 results, of ``w``'s kind.
    """
    a, m, k = _rows(w, "gemv")
    v = _np.asarray(x, dtype=_np.float32) if isinstance(x, (list, tuple, _np.ndarray)) else _array(x)
    if tuple(v.shape) != (k,):
        raise ValueError(f"gemv: x must have shape ({k},) for w of shape {tuple(a.shape)}, got {tuple(v.shape)}")
    t = _Target("gemv", [a, v], typed=1, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    return _give("gemv", a, _enigma.op_gemv(t.native, a, v, m, k, t.elem, **t.options()), out, t)  # type: ignore[no-any-return]


def matmul(a: _ArrayT, b: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
           device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """Matrix product ``a @ b`` with torch's shapes and types: the kernel
    library's GEMM (its selection's kernel for the shape and device),
    accumulated in float32 and rounded once to the inputs' type.

    ``a`` is ``[..., m, k]`` and ``b`` ``[..., k, n]`` (row-major,
    C-contiguous). A 1-D ``a`` is one row and a 1-D ``b`` one column (the
    axis is dropped from the result, as in torch). Leading (batch)
    dimensions broadcast as torch's: a ``b`` with no batch dimensions (or
    only 1s) is applied to every matrix of ``a`` (one product of ``a``'s
    rows, all batches together); an ``a`` with none (or only 1s) is read
    in place by every product of ``b``'s batch (``[m, k] @ [4, k, n]``,
    ``[1, m, k] @ [4, k, n]``: not repeated in memory); equal batch
    dimensions (leading 1s aside) run as one batched dispatch. Batch
    dimensions that both broadcast (``[2, 1, m, k] @ [1, 3, k, n]``) are
    refused: expand one operand first.

    Args:
        a: the left operand (float32, float16 or bfloat16).
        b: the right operand, of ``a``'s type.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the product in ``a``'s type (as torch's ``matmul``), of ``a``'s kind;
        an ``out`` of another type is refused.
    """
    return _product("matmul", a, b, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream, out=out)  # type: ignore[no-any-return]


def _product(op: str, a: _Any, b: _Any, *, dtype: _Optional[str], rt: _Optional[_MetalRuntime], device: _Optional[_DeviceName],
             threads: _Optional[int], stream: _Stream, out: _Any) -> _Any:
    """:func:`matmul` and :func:`bmm`, their errors naming ``op``."""
    x, y = _array(a), _array(b)
    xs, ys = _shape(x), _shape(y)
    if not xs or not ys:
        raise ValueError(f"{op}: both operands need at least 1 dimension, got shapes {tuple(xs)} and {tuple(ys)}")
    row, column = len(xs) == 1, len(ys) == 1
    if row:
        xs = [1] + xs
        x = x.reshape(xs)
    if column:
        ys = ys + [1]
        y = y.reshape(ys)
    m, k = xs[-2:]
    k2, n = ys[-2:]
    if k2 != k:
        raise ValueError(f"{op}: a is {tuple(_shape(a))} and b is {tuple(_shape(b))}; the inner sizes must match ({k} and {k2})")
    batch_a, batch_b = xs[:-2], ys[:-2]
    batch = _broadcast_batch(op, batch_a, batch_b)
    t = _Target(op, [x, y], typed=2, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    one = lambda dims: all(d == 1 for d in dims)  # noqa: E731 - a one-line rule
    if one(batch_b):
        y = y.reshape([k, n])
        res = _enigma.op_matmul(t.native, x, y, _math.prod(batch_a) * m, n, k, t.elem, **t.options())
    elif one(batch_a):
        x = x.reshape([m, k])
        res = _enigma.op_matmul_batched(t.native, x, y, _math.prod(batch), m, n, k, t.elem, shared_a=True, **t.options())
    elif _math.prod(batch_a) == _math.prod(batch) == _math.prod(batch_b):
        res = _enigma.op_matmul_batched(t.native, x, y, _math.prod(batch), m, n, k, t.elem, **t.options())
    else:
        raise ValueError(f"{op}: the batch dimensions of a {tuple(batch_a)} and b {tuple(batch_b)} both broadcast (to "
                         f"{tuple(batch)}); enigma.ops.matmul broadcasts one operand's batch over the other's, not both: "
                         "expand one of them first")
    shape = batch + ([] if row else [m]) + ([] if column else [n])
    return _give(op, x, res.reshape(shape), out, t)  # type: ignore[no-any-return]


def _broadcast_batch(op: str, batch_a: _List[int], batch_b: _List[int]) -> _List[int]:
    """The batch dimensions ``batch_a`` and ``batch_b`` broadcast to
    (NumPy's rule, as torch's ``matmul``), or a ValueError naming ``op``."""
    width = len(batch_a) if len(batch_a) >= len(batch_b) else len(batch_b)
    pa = [1] * (width - len(batch_a)) + list(batch_a)
    pb = [1] * (width - len(batch_b)) + list(batch_b)
    out = []
    for da, db in zip(pa, pb):
        if da != db and 1 not in (da, db):
            raise ValueError(f"{op}: the batch dimensions of a {tuple(batch_a)} and b {tuple(batch_b)} do not broadcast")
        out.append(da if db == 1 else db)
    return out


def bmm(a: _ArrayT, b: _Any, *, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
        device: _Optional[_DeviceName] = None, threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _ArrayT:
    """Batched matrix product, as ``torch.bmm``: ``[B, m, k] @ [B, k, n]``
    in one dispatch, accumulated in float32 and rounded once to the
    inputs' type.

    Args:
        a: ``[B, m, k]`` (float32, float16 or bfloat16; C-contiguous).
        b: ``[B, k, n]`` of ``a``'s type.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the ``[B, m, n]`` products in ``a``'s type, of ``a``'s kind.
    """
    x, y = _array(a), _array(b)
    if len(x.shape) != 3 or len(y.shape) != 3 or int(x.shape[0]) != int(y.shape[0]):
        raise ValueError(f"bmm takes a [B, m, k] and b [B, k, n] with the same B, got shapes {tuple(x.shape)} and {tuple(y.shape)}")
    return _product("bmm", x, y, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream, out=out)  # type: ignore[no-any-return]


def attention_decode(q: _ArrayT, k: _Any, v: _Any, *, scale: _Optional[float] = None, fused: _Optional[bool] = None,
                     seq_lens: _Any = None, return_lse: bool = False, dtype: _Optional[str] = None,
                     rt: _Optional[_MetalRuntime] = None, device: _Optional[_DeviceName] = None,
                     threads: _Optional[int] = None, stream: _Stream = None, out: _Any = None) -> _Any:
    """One decode step of attention: ``softmax(q·Kᵀ·scale)·V`` per query head.

    One sequence (``q`` [Hq, D], ``k`` and ``v`` [Hkv, S, D]) or a batch
    (``q`` [B, Hq, D], ``k`` and ``v`` [B, Hkv, S, D]). With fewer K/V heads
    than query heads (grouped-query attention, ``Hq`` a multiple of
    ``Hkv``), query head ``h`` reads K/V head ``h // (Hq // Hkv)``.

    Args:
        q: the queries (float32, float16 or bfloat16).
        k: the keys, of ``q``'s type.
        v: the values, of ``q``'s type.
        scale: the factor on the scores; default 1/√D.
        fused: ``True`` runs one fused kernel (its keys split over
            threadgroups where the sequences are long for the GPU), ``False``
            three dispatches (scores, softmax, weighted sum), which take only
            one sequence with one K/V head per query head, no ``seq_lens``
            and no ``return_lse``. Default: the three dispatches where they
            can run, else the fused kernel.
        seq_lens: per-sequence key counts ([B] integers, or one for a single
            sequence; each clamped to S): sequence ``b`` attends to its first
            ``seq_lens[b]`` keys. An empty sequence gives zeros (and a
            log-sum-exp of ``-inf``).
        return_lse: also return the natural log-sum-exp of each row's scaled
            scores (float32, ``q``'s shape without D).
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the outputs, ``q``'s shape, kind and type; with ``return_lse``, the
        pair ``(out, lse)``.
    """
    qa, ka, va = _array(q), _array(k), _array(v)
    qs, ks, vs = tuple(qa.shape), tuple(ka.shape), tuple(va.shape)
    single = len(qs) == 2
    if not ((len(qs) == 2 and len(ks) == 3) or (len(qs) == 3 and len(ks) == 4)) or ks != vs:
        raise ValueError(f"attention_decode takes q [Hq, D] with k, v [Hkv, S, D], or q [B, Hq, D] with k, v [B, Hkv, S, D]; got {qs}, {ks}, {vs}")
    b, hq, d = (1, *qs) if single else qs
    b_kv, hkv, s, d_kv = (1, *ks) if single else ks
    b, hq, d, hkv, s = int(b), int(hq), int(d), int(hkv), int(s)
    if 0 in (b, hq, d, hkv, s):
        raise ValueError(f"attention_decode: every dimension must be at least 1; got q {qs}, k and v {ks}")
    if b_kv != b or d_kv != d or hq % hkv != 0:
        raise ValueError(f"attention_decode: k and v must have q's batch and D, and a number of heads dividing q's; got q {qs}, k and v {ks}")
    three_ok = hq == hkv and b == 1 and seq_lens is None and not return_lse
    if fused is None:
        fused = not three_ok
    if not fused and not three_ok:
        raise ValueError("attention_decode: the three-dispatch form takes one sequence, one K/V head per query head, "
                         "no seq_lens and no return_lse; pass fused=True")
    lens = None
    if seq_lens is not None:
        lens = seq_lens if hasattr(seq_lens, "__dlpack__") or isinstance(seq_lens, _enigma.Array) else \
            _np.atleast_1d(_np.asarray(seq_lens, dtype=_np.int64))
        if isinstance(lens, _np.ndarray):
            if lens.shape != (b,) or (lens < 0).any():
                raise ValueError(f"attention_decode: seq_lens must be {b} non-negative integers; got {seq_lens!r}")
            lens = _np.minimum(lens, s).astype(_np.uint32)
    factor = 1.0 / _math.sqrt(d) if scale is None else _number("attention_decode", "scale", scale)
    t = _Target("attention_decode", [qa, ka, va], typed=3, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    res, lse = _enigma.op_attention_decode(t.native, qa, ka, va, b, hq, hkv, s, d, factor, bool(fused), t.elem,
                                           seq_lens=lens, return_lse=bool(return_lse), **t.options())
    result = _give("attention_decode", qa, res.reshape(list(qs)), out, t)
    if not return_lse:
        return result
    assert lse is not None
    return result, _like(qa, lse.reshape(list(qs[:-1])))


_CAUSAL = {False: "none", True: "top_left", "top_left": "top_left", "bottom_right": "bottom_right"}


def scaled_dot_product_attention(q: _ArrayT, k: _Any, v: _Any, *, causal: _Union[bool, str] = False, scale: _Optional[float] = None,
                                 return_lse: bool = False, dtype: _Optional[str] = None, rt: _Optional[_MetalRuntime] = None,
                                 device: _Optional[_DeviceName] = None, threads: _Optional[int] = None,
                                 stream: _Stream = None, out: _Any = None) -> _Any:
    """Attention over whole sequences (prefill), torch's layout:
    ``softmax(q·kᵀ·scale + mask)·v`` in one FlashAttention-style kernel.

    Args:
        q: the queries, [B, H, S_q, D] (float16 or bfloat16), D 64 or 128.
        k: the keys, [B, H_kv, S_kv, D], of ``q``'s type; H_kv divides H
            (grouped-query attention: query head h reads key head h // (H / H_kv)).
        v: the values, [B, H_kv, S_kv, D], of ``q``'s type.
        causal: ``False``; ``True`` or ``"top_left"`` for torch's ``is_causal``
            (key j is visible to query i when j <= i); ``"bottom_right"`` for
            torch's ``causal_lower_right`` (j <= i + S_kv - S_q; a query that
            sees no key gets zeros and a log-sum-exp of -inf).
        scale: the factor on the scores; default 1/√D.
        return_lse: also return each row's natural log-sum-exp of its scaled
            visible scores, [B, H, S_q], float32.
        dtype, rt, device, threads, stream, out: as for :func:`scale`.

    Returns:
        the [B, H, S_q, D] output, of ``q``'s kind and type; with
        ``return_lse``, the pair ``(output, lse)``.
    """
    op = "scaled_dot_product_attention"
    qa, ka, va = _array(q), _array(k), _array(v)
    qs, ks, vs = tuple(qa.shape), tuple(ka.shape), tuple(va.shape)
    if len(qs) != 4 or len(ks) != 4 or ks != vs or ks[0] != qs[0] or ks[3] != qs[3]:
        raise ValueError(f"{op} takes q [B, H, S_q, D] and k, v [B, H_kv, S_kv, D]; got {qs}, {ks}, {vs}")
    b, h, sq, d = (int(x) for x in qs)
    hkv, skv = int(ks[1]), int(ks[2])
    if 0 in (b, h, sq, d, hkv, skv):
        raise ValueError(f"{op}: every dimension must be at least 1; got q {qs}, k and v {ks}")
    if not isinstance(causal, (bool, str)) or causal not in _CAUSAL:
        raise ValueError(f"{op}: causal must be False, True, 'top_left' or 'bottom_right', not {causal!r}")
    factor = None if scale is None else _number(op, "scale", scale)
    t = _Target(op, [qa, ka, va], typed=3, dtype=dtype, rt=rt, device=device, threads=threads, stream=stream)
    res, lse = _enigma.op_attention_prefill(t.native, qa, ka, va, (b, h, hkv, sq, skv, d), _CAUSAL[causal], factor,
                                            bool(return_lse), t.elem, **t.options())
    result = _give(op, qa, res, out, t)
    if return_lse:
        return result, _like(qa, lse)
    return result


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
               layout: str = "rows", out: _Any = None) -> _np.ndarray:
    """The float32 [K, N] matrix that the arrays of :func:`quantize` stand for.

    Args:
        packed: the packed uint32 words from :func:`quantize`.
        scales: the float16 scales from :func:`quantize`.
        format: ``"fp4"``, ``"int4"`` or ``"mlx_affine"``, as quantized.
        biases: the float16 biases (``"mlx_affine"`` only, which needs them).
        layout: the packed words' layout, as given to :func:`quantize`.
        out: a float32 [K, N] numpy array to write the weights into
            (returned); not for ``mx.array`` input.

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
    data = _enigma.quant_dequantize(format, k, n, group, _np.ascontiguousarray(packed).tobytes(),
                                    _np.ascontiguousarray(scales).tobytes(), b, layout)
    return _host_out("dequantize", packed, _np.frombuffer(data, dtype=_np.float32).reshape(k, n).copy(), out)  # type: ignore[no-any-return]


def qmatmul(a: _Any, packed: _Any, scales: _Any, format: str = "fp4", *, out_dtype: _DTypeLike = _np.float16,
            biases: _Any = None, variant: str = "auto", layout: str = "rows", rt: _Optional[_MetalRuntime] = None,
            device: _DeviceName = "auto", threads: _Optional[int] = None, out: _Any = None) -> _np.ndarray:
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
            ``"int4"`` and ``"fp4"`` it sums the products of four packed
            words in float16, sixteen per sum, before widening them, finite
            for |a| <= 4094), the
            tensor-core kernel above (on GPUs whose products are ``wgmma``,
            the kernel on cooperative tensors from 17 rows for ``"int4"``
            and 5 for ``"fp4"`` to 128, and from 2 rows for ``"mlx_affine"``
            where N and K are multiples of 128). ``"separate"``: the tensor-core
            kernel, B tiles decoded from packed words staged in threadgroup
            memory, each weight rounded to float16 with its scale.
            ``"fused"``: seed 002's fused kernel, B dequantized per SIMD
            group through one 8×8 fragment. ``"cooperative"``: the kernel on
            cooperative tensors at any M (C computed transposed, the weights
            dequantized into the product's left operand, each rounded to
            float16 with its scale, plus its bias for ``"mlx_affine"``; N a
            multiple of 8, for ``"mlx_affine"`` N a multiple of the tile's
            columns and K of its slices, on a device with cooperative
            tensors). ``"separate"`` and ``"fused"`` read ``"fp4"`` and
            ``"int4"`` only.
        layout: ``"rows"``, or ``"fragments"`` for weights from
            ``quantize(..., layout="fragments")``: the tensor cores at every
            M, with ``"auto"`` a decode kernel up to 16 rows and above them
            the kernel on cooperative tensors where ``"auto"`` picks it, the
            tiled kernel elsewhere; with ``"separate"`` the tiled kernel, with
            ``"cooperative"`` the kernel on cooperative tensors
            (``"fused"`` reads the rows layout only).
        rt: the :class:`enigma.MetalRuntime` to run on.
        device: the device when ``rt`` is not given (default ``"auto"``).
        threads: threads per threadgroup.
        out: a numpy array of the result's shape and ``out_dtype`` to write
            it into (returned); not for ``mx.array`` input.

    Returns:
        the [M, N] product (an N-vector for a vector ``a``) as a numpy array
        of ``out_dtype`` (an ``mx.array`` for an ``mx.array`` ``a``).
    """
    if variant not in ("auto", "separate", "fused", "cooperative"):
        raise ValueError(f"qmatmul's variant is 'auto', 'separate', 'fused' or 'cooperative', not {variant!r}")
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
    out_name = "f16" if out_type == _np.float16 else "f32"
    native = rt.native if rt is not None else _native_runtime(device)
    m = a2.shape[0]
    _begin_library_call(rt)
    data = _enigma.op_qmatmul(native, format, _np.ascontiguousarray(a2, dtype=_np.float16).tobytes(),
                              _np.ascontiguousarray(packed).tobytes(), _np.ascontiguousarray(scales).tobytes(),
                              m, n, k, group, out_name, threads, bias_bytes, variant, layout)
    c = _np.frombuffer(data, dtype=out_type).reshape(m, n).copy()
    return _host_out("qmatmul", a, c[0] if vector else c, out)


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
