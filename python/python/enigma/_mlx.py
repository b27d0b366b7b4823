"""MLX arrays at enigma's boundary.

``mx.array`` inputs are read where they lie: MLX exports them through DLPack
(CPU memory, every dtype enigma has, bfloat16 included), which the native
module binds without a copy on the simulator (a CUDA device stages host
memory as it does for any host array). Results come back as ``mx.array``s:
MLX has no way to adopt memory it did not allocate, so each result is copied
once into a new MLX array. On a Mac, MLX's unified memory makes the same
DLPack export a view of the Metal buffer.

This module imports MLX only when it is handed an MLX object, so enigma
works without it.
"""

from __future__ import annotations

import sys
from typing import Any

#: enigma's dtype names for MLX's (``mlx.core.float32`` → ``"f32"``...).
_MLX_NAMES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "bool": "bool",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
}


#: numpy's dtype for each enigma dtype MLX has (bfloat16 travels as uint16 bits).
_NUMPY_HOST = {ours: ("uint16" if ours == "bf16" else mlx_name) for mlx_name, ours in _MLX_NAMES.items()}


def is_mlx_array(value: Any) -> bool:
    """Whether ``value`` is an ``mx.array`` (without importing MLX)."""
    t = type(value)
    return t.__name__ == "array" and t.__module__ == "mlx.core"


def is_mlx_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` is one of MLX's dtypes (``mx.float32``...)."""
    return type(dtype).__module__ == "mlx.core" and type(dtype).__name__ == "Dtype"


def dtype_name(dtype: Any) -> str:
    """enigma's name for an MLX dtype, or MLX's own name where enigma has no
    such type (``complex64``...)."""
    name = str(dtype).rsplit(".", 1)[-1]
    return _MLX_NAMES.get(name, name)


def mlx_dtype(name: str) -> Any:
    """The MLX dtype for enigma's dtype ``name`` (``"f32"`` → ``mx.float32``)."""
    import mlx.core as mx

    for mlx_name, ours in _MLX_NAMES.items():
        if ours == name:
            return getattr(mx, "bool_" if mlx_name == "bool" else mlx_name)
    raise TypeError(f"MLX has no array type for enigma's {name}")


def is_mlx_stream(value: Any) -> bool:
    """Whether ``value`` is an MLX stream or device (``mx.cpu``, ``mx.gpu``,
    ``mx.new_stream(...)``), as MLX's calls take for ``stream=``."""
    t = type(value)
    return t.__module__ == "mlx.core" and t.__name__ in ("Stream", "Device")


def contiguous(value: Any) -> Any:
    """``value`` in row-major order: MLX's own (lazy) copy where a view is
    strided, so enigma reads it through DLPack as any contiguous array."""
    import mlx.core as mx

    return mx.contiguous(value)


def from_host(host: Any, name: str) -> Any:
    """An ``mx.array`` holding ``host`` (a numpy array of enigma's dtype
    ``name``; bfloat16 as its uint16 bits), copied once into MLX memory."""
    import mlx.core as mx

    if name == "bf16":
        return mx.array(host.view("uint16")).view(mx.bfloat16)
    return mx.array(host)


def host_dtype(name: str) -> str:
    """numpy's dtype for host data of enigma's dtype ``name`` (bfloat16 as
    its uint16 bits)."""
    return _NUMPY_HOST[name]


def from_bytes(data: Any, name: str) -> Any:
    """A 1-D ``mx.array`` of enigma's dtype ``name`` holding the bytes ``data``."""
    import numpy as np

    return from_host(np.frombuffer(data, dtype=host_dtype(name)), name)


def any_mlx(values: Any) -> bool:
    """Whether any of ``values`` is an ``mx.array``; False without MLX loaded."""
    if "mlx.core" not in sys.modules:
        return False
    return any(is_mlx_array(v) for v in values)


def evaluate(values: Any) -> None:
    """Evaluates MLX's lazy arrays among ``values`` before enigma reads their
    memory (DLPack export evaluates too; this makes the order explicit)."""
    arrays = [v for v in values if is_mlx_array(v)]
    if arrays:
        import mlx.core as mx

        mx.eval(*arrays)
