"""Devices: the process's native runtime per device, the arrays' device, the
CUDA stream a dispatch goes on, device arrays and textures.

The simulator is ``"sim"`` everywhere (what :attr:`MetalRuntime.device`
reports, the CLI's ``--device sim``); ``"cpu"`` and ``"simulator"`` are
other names for it, accepted wherever a device is named.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict, Iterable, List, Literal, Optional, Tuple

from . import _enigma
from ._mlx import dtype_name as mlx_dtype_name
from ._mlx import is_mlx_dtype

DispatchError = _enigma.DispatchError

#: A device's name: ``"auto"`` (Metal where present, else CUDA, else the
#: simulator), ``"sim"`` (the simulator; also ``"cpu"`` or ``"simulator"``),
#: ``"metal"`` or ``"cuda"``.
DeviceName = Literal["auto", "sim", "cpu", "simulator", "metal", "cuda"]

DEVICES = ("auto", "sim", "cpu", "simulator", "metal", "cuda")
# Other names of the simulator: one device, one native runtime.
ALIASES = {"cpu": "sim", "simulator": "sim"}
_NATIVE: Dict[str, Any] = {}  # device name -> the process's one native runtime on it


def native_runtime(device: str) -> Any:
    """The process's native runtime for ``device`` (opened on first use)."""
    key = ALIASES.get(device, device)
    rt = _NATIVE.get(key)
    if rt is None:
        rt = _NATIVE[key] = _enigma.Runtime(key)
    return rt


def is_array(value: Any) -> bool:
    """Whether ``value`` is an array enigma binds as it is (an
    ``enigma.Array``, numpy, DLPack or CUDA array interface)."""
    return (isinstance(value, _enigma.Array) or hasattr(value, "__array_interface__")
            or hasattr(value, "__dlpack__") or hasattr(value, "__cuda_array_interface__"))


def _on_cuda(value):
    """True for an array in CUDA memory (torch, CuPy, enigma, DLPack, CAI)."""
    if isinstance(value, _enigma.Array):
        return value.device == "cuda"
    if getattr(value, "is_cuda", False) is True:  # torch
        return True
    if hasattr(value, "__cuda_array_interface__"):
        return True
    dev = getattr(value, "__dlpack_device__", None)
    if dev is not None and not hasattr(value, "__array_interface__"):
        try:
            return dev()[0] in (2, 13)
        except Exception:  # noqa: BLE001 - a producer that cannot say is not CUDA
            return False
    return False


def device_of(values: Iterable[Any], default: str = "auto") -> Any:
    """The native runtime for arrays ``values``: their enigma device, CUDA
    for CUDA tensors, else ``default``."""
    for v in values:
        if isinstance(v, (_enigma.Array, Texture)):
            return native_runtime(v.device)
    for v in values:
        if _on_cuda(v):
            return native_runtime("cuda")
    return native_runtime(default)


def _stream_handle(stream):
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, CuPy, others
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    raise DispatchError(f"stream= takes an int handle or a torch/CuPy stream, not {type(stream).__name__}")


def _torch_stream(index):
    """torch's current stream on GPU ``index``, as a raw handle (the
    accessor Triton's launcher uses, else the public API)."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


def dispatch_stream(native: Any, values: Iterable[Any], stream: Any = None) -> Tuple[Optional[int], Optional[int]]:
    """(stream for the dispatch or None, stream told to DLPack producers):
    ``stream=`` if given, else the legacy default stream for ``enigma.Array``
    arguments, else the current stream of the first torch or CuPy CUDA
    array; ``(None, None)`` otherwise and off CUDA (the dispatch waits)."""
    if native.device != "cuda":
        return None, None
    if stream is not None:
        h = _stream_handle(stream)
        return h, (1 if h == 0 else h)
    for v in values:
        if isinstance(v, _enigma.Array):
            return 0, 1  # enigma's own device memory: queued on the legacy stream
    for v in values:
        mod = type(v).__module__
        if mod.startswith("torch") and getattr(v, "is_cuda", False):
            return _torch_stream(v.get_device()), -1
        if mod.startswith("cupy") and hasattr(v, "__cuda_array_interface__"):
            import cupy
            h = cupy.cuda.get_current_stream().ptr
            return h, (1 if h == 0 else h)  # DLPack names the legacy stream 1
    return None, None



def empty_on(native: Any, shape: Any, dtype: Any) -> _enigma.Array:
    return native.empty(shape_list(shape), dtype_name(dtype))


def asarray_on(native: Any, data: Any, dtype: Any) -> _enigma.Array:
    if isinstance(data, _enigma.Array):
        return data
    if not hasattr(data, "__array_interface__") and not hasattr(data, "__dlpack__"):
        import numpy as np
        data = np.ascontiguousarray(data)
    return native.asarray(data, None if dtype is None else dtype_name(dtype))


def empty(shape: Any, dtype: Any = "f32", device: DeviceName = "auto") -> _enigma.Array:
    """A zeroed :class:`enigma.Array` on ``device`` (see :meth:`MetalRuntime.empty`)."""
    return empty_on(native_runtime(device), shape, dtype)


def asarray(data: Any, dtype: Any = None, device: DeviceName = "auto") -> _enigma.Array:
    """A copy of host array ``data`` on ``device`` (see :meth:`MetalRuntime.asarray`)."""
    return asarray_on(native_runtime(device), data, dtype)


def synchronize(device: DeviceName = "cuda") -> None:
    """Waits for every dispatch queued on ``device`` (a no-op where nothing
    is queued: the simulator, or a device never opened)."""
    key = ALIASES.get(device, device)
    if key in _NATIVE:
        _NATIVE[key].synchronize()


_U32 = 1 << 32



_FORMATS = {name: (channels, size, kind) for name, channels, size, kind in _enigma.texture_formats()}
_CHANNEL_DTYPES = {("unorm", 1): "uint8", ("float", 2): "float16", ("float", 4): "float32", ("uint", 4): "uint32", ("sint", 4): "int32"}


def texture_format(format: str) -> Tuple[int, str]:
    if format not in _FORMATS:
        raise DispatchError(f"unknown texture format {format!r}; enigma has {', '.join(_FORMATS)}")
    channels, size, kind = _FORMATS[format]
    return channels, _CHANNEL_DTYPES[(kind, size)]


class Texture:
    """A 2D texture on a device: texels of one pixel format, made by
    :meth:`MetalRuntime.texture` and passed to a ``texture2d`` parameter in
    ``inputs``. Kernels write it in place; :meth:`numpy` reads it back."""

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def native(self) -> Any:
        """The native texture (``enigma._enigma.Texture``) a dispatch binds."""
        return self._native

    @property
    def format(self) -> str:
        return self._native.format

    @property
    def width(self) -> int:
        return self._native.width

    @property
    def height(self) -> int:
        return self._native.height

    @property
    def shape(self) -> Tuple[int, ...]:
        """``(height, width)`` for one-channel formats, ``(height, width, 4)`` for RGBA ones."""
        c = self._native.channels
        return (self.height, self.width) if c == 1 else (self.height, self.width, c)

    @property
    def device(self) -> str:
        return self._native.device

    def numpy(self) -> Any:
        """The texels as a numpy array of :attr:`shape`: the stored channels
        (uint8 for unorm8 formats, float16, float32, uint32 or int32)."""
        import numpy as np

        _, dtype = texture_format(self.format)
        return np.frombuffer(self._native.read(), dtype=np.dtype(dtype).newbyteorder("<")).reshape(self.shape).astype(dtype)

    def __repr__(self) -> str:
        return f"<enigma.Texture {self.width}x{self.height} {self.format} on {self.device}>"



def shape_list(shape: Any) -> List[int]:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    return [int(d) for d in shape]


def dtype_name(dtype: Any) -> str:
    """enigma's name for a dtype given as enigma's, numpy's, torch's or MLX's."""
    if isinstance(dtype, str):
        name = dtype
    elif is_mlx_dtype(dtype):
        return mlx_dtype_name(dtype)
    elif type(dtype).__module__.startswith("torch"):
        name = str(dtype).replace("torch.", "")
    else:
        import numpy as np
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    return {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "uint32": "u32",
            "int64": "i64", "uint64": "u64", "int16": "i16", "uint16": "u16", "int8": "i8", "uint8": "u8",
            "float": "f32", "half": "f16"}.get(name, name)

