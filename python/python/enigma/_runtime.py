"""``enigma.MetalRuntime``: a device, and ``execute`` as in seed 001.

This module owns the Python side of a dispatch: it matches ``inputs`` and
outputs to the kernel's parameters, checks every by-value argument, and
hands buffers to the native runtime, which binds them in Rust: arrays
(numpy, ``enigma.Array``, torch/CuPy/JAX through DLPack or
``__cuda_array_interface__``) as they are, other buffer-protocol objects
(``bytes``, ``array.array``...) as ``bytes``. It keeps one native runtime
per device for the whole process, and picks the CUDA stream a dispatch
goes on (``stream=``, else the caller's current torch or CuPy stream).

``execute(compiled, inputs=[...], output_size=..., grid=..., threads=...)``:

* ``inputs`` fill the kernel's parameters in order; every parameter after
  them is an output, created zero-filled with ``output_size`` bytes (one
  int for one output, a list for several) or given as writable buffers in
  ``outputs=[...]`` (filled in place).
* A buffer input is an ``enigma.Array``, an array with ``__dlpack__``,
  ``__cuda_array_interface__`` or ``__array_interface__`` (numpy, torch,
  CuPy...), or any C-contiguous object with the buffer protocol
  (``array.array``, ``bytes``...), whose element type is the parameter's
  annotation; ``bytes``/``bytearray`` are raw bytes and fit any type. A
  by-value parameter takes a Python (or numpy) number. Device memory (an
  ``enigma.Array``, a CUDA tensor on the CUDA device) is bound without a
  copy; host memory is copied to the device and, where the kernel writes
  it, back.
* ``grid`` counts threads (Metal's ``dispatchThreads``: edge threadgroups
  are partial); give ``threadgroups=`` instead of ``grid=`` for
  ``dispatchThreadgroups``. Sizes are 1 to 3 positive ints.
* Returns the output's bytes (a list of them for several outputs, ``None``
  for none); an output given in ``outputs=`` as device memory comes back
  as that same object. A writable input buffer that the kernel writes is
  updated in place, as it would be in GPU memory shared with the host.
* A ``texture2d`` parameter takes a :class:`Texture` (``rt.texture(array,
  format="rgba8unorm")``) in ``inputs``; the kernel reads and writes it in
  place, and ``tex.numpy()`` reads it back. Textures run on the simulator
  and CUDA; Metal binds them as ``MTLTexture``s (type-checked, not run on a
  Mac). A ``read_write`` texture needs a format the device's read-write
  tier allows (Metal tier 1: r32float, r32uint, r32sint only).
* On CUDA, ``stream=`` (an int handle, a torch or CuPy stream) queues the
  dispatch there and returns at once; with torch or CuPy CUDA tensors and
  no ``stream=``, it goes on their library's current stream, also without
  waiting; with ``enigma.Array``s on the legacy default stream, without
  waiting. ``synchronize()`` (and reading an array) waits; an error of a
  queued kernel surfaces there. Host data makes a dispatch wait, as do the
  simulator and the sanitizer always.
"""

from __future__ import annotations

import json
import numbers
import threading

from . import _enigma
from ._kernel import CompiledKernel, Kernel, compile as _compile
from ._types import FORMAT_NAMES, NUMPY_NAMES, scalar_of_format

DispatchError = _enigma.DispatchError

_DEVICES = ("auto", "cpu", "sim", "simulator", "metal", "cuda")
_ALIASES = {"cpu": "sim", "simulator": "sim"}
_NATIVE = {}  # device name -> the process's one native runtime on it


def native_runtime(device):
    """The process's native runtime for ``device`` (opened on first use)."""
    key = _ALIASES.get(device, device)
    rt = _NATIVE.get(key)
    if rt is None:
        rt = _NATIVE[key] = _enigma.Runtime(key)
    return rt


def _is_array(value):
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


def device_of(values, default="auto"):
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


def dispatch_stream(native, values, stream=None):
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


def _empty(native, shape, dtype):
    return native.empty(_shape(shape), _dtype_name(dtype))


def _asarray(native, data, dtype):
    if isinstance(data, _enigma.Array):
        return data
    if not hasattr(data, "__array_interface__") and not hasattr(data, "__dlpack__"):
        import numpy as np
        data = np.ascontiguousarray(data)
    return native.asarray(data, None if dtype is None else _dtype_name(dtype))


def empty(shape, dtype="f32", device="auto"):
    """A zeroed :class:`enigma.Array` on ``device`` (see :meth:`MetalRuntime.empty`)."""
    return _empty(native_runtime(device), shape, dtype)


def asarray(data, dtype=None, device="auto"):
    """A copy of host array ``data`` on ``device`` (see :meth:`MetalRuntime.asarray`)."""
    return _asarray(native_runtime(device), data, dtype)


def synchronize(device="cuda"):
    """Waits for every dispatch queued on ``device`` (a no-op where nothing
    is queued: the simulator, or a device never opened)."""
    key = _ALIASES.get(device, device)
    if key in _NATIVE:
        _NATIVE[key].synchronize()


_U32 = 1 << 32


def _geometry(value, what):
    # The common forms first: a plain int, a tuple of plain ints.
    if type(value) is int and 0 <= value < _U32:
        return (value,)
    if type(value) is tuple and 1 <= len(value) <= 3 and all(type(v) is int and 0 <= v < _U32 for v in value):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    if isinstance(value, (str, bytes)):
        # A string is iterable, but its characters are not components.
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        parts = text.lower().replace("×", "x").split("x")
        hint = ""
        if 1 <= len(parts) <= 3 and all(p.strip().isdigit() for p in parts):
            hint = f" (write {what}=({', '.join(str(int(p)) for p in parts)}{',' if len(parts) == 1 else ''}))"
        raise DispatchError(f"{what} must be an int or a tuple of 1 to 3 ints, not the string {text!r}{hint}")
    try:
        items = tuple(value)
    except TypeError:
        raise DispatchError(f"{what} must be an int or a tuple of 1 to 3 ints, not {type(value).__name__}") from None
    if not 1 <= len(items) <= 3:
        raise DispatchError(f"{what} must have 1 to 3 components, got {len(items)}")
    out = []
    for v in items:
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise DispatchError(f"{what} must hold ints, got {v!r}")
        v = int(v)
        if not 0 <= v < (1 << 32):
            raise DispatchError(f"{what} components must be between 0 and 2^32-1, got {v}")
        out.append(v)
    return out


# Texture formats: name -> (channels, bytes per channel, kind), and the
# numpy dtype of a channel of each kind and size.
_FORMATS = {name: (channels, size, kind) for name, channels, size, kind in _enigma.texture_formats()}
_CHANNEL_DTYPES = {("unorm", 1): "uint8", ("float", 2): "float16", ("float", 4): "float32", ("uint", 4): "uint32", ("sint", 4): "int32"}


def _format(format):
    if format not in _FORMATS:
        raise DispatchError(f"unknown texture format {format!r}; enigma has {', '.join(_FORMATS)}")
    channels, size, kind = _FORMATS[format]
    return channels, _CHANNEL_DTYPES[(kind, size)]


class Texture:
    """A 2D texture on a device: texels of one pixel format, made by
    :meth:`MetalRuntime.texture` and passed to a ``texture2d`` parameter in
    ``inputs``. Kernels write it in place; :meth:`numpy` reads it back."""

    __slots__ = ("_native",)

    def __init__(self, native):
        self._native = native

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
    def shape(self) -> tuple:
        """``(height, width)`` for one-channel formats, ``(height, width, 4)`` for RGBA ones."""
        c = self._native.channels
        return (self.height, self.width) if c == 1 else (self.height, self.width, c)

    @property
    def device(self) -> str:
        return self._native.device

    def numpy(self):
        """The texels as a numpy array of :attr:`shape`: the stored channels
        (uint8 for unorm8 formats, float16, float32, uint32 or int32)."""
        import numpy as np

        _, dtype = _format(self.format)
        return np.frombuffer(self._native.read(), dtype=np.dtype(dtype).newbyteorder("<")).reshape(self.shape).astype(dtype)

    def __repr__(self):
        return f"<enigma.Texture {self.width}x{self.height} {self.format} on {self.device}>"


def _texture_arg(value, p, kernel_name):
    if isinstance(value, Texture):
        return value._native
    raise DispatchError(
        f"kernel `{kernel_name}`, parameter `{p.name}` ({p.type_name}): expected an enigma texture "
        f"(rt.texture(array, format=...)), got {type(value).__name__}"
    )


class MetalRuntime:
    """A device to run compiled kernels on.

    ``device``: ``"auto"`` (Metal where present, else CUDA, else the
    simulator), ``"cpu"`` (the simulator, also ``"sim"``), ``"metal"`` or
    ``"cuda"``. A device this build or machine does not have raises
    :class:`enigma.DeviceError` (a :class:`enigma.DispatchError`) with the
    runtime's reason. ``sanitize=True`` runs the simulator's sanitizer on
    every dispatch: problems raise :class:`enigma.SanitizerError`.
    """

    def __init__(self, device: str = "auto", sanitize: bool = False, *, max_loop_iterations=None, timeout=None):
        if not isinstance(device, str):
            raise TypeError(f"device must be a string ({', '.join(repr(d) for d in _DEVICES)}), not {type(device).__name__}")
        self._rt = native_runtime(device)
        self.sanitize = bool(sanitize)
        self.max_loop_iterations = _loop_budget(max_loop_iterations)
        self.timeout = _timeout(timeout)
        self._reports = threading.local()

    @property
    def last_report(self):
        """The report (a dict: times, notes, sanitizer findings) of the last
        ``execute`` that *the calling thread* ran on this runtime, ``None``
        before one or after one that failed. Per thread, so threads sharing
        a runtime each see their own dispatch's report."""
        return getattr(self._reports, "report", None)

    @property
    def device(self) -> str:
        """What runs the kernels: ``"sim"``, ``"metal"`` or ``"cuda"``."""
        return self._rt.device

    @property
    def device_name(self) -> str:
        """The device's own name."""
        return self._rt.device_name

    @property
    def info(self) -> dict:
        """The device's description and limits."""
        return json.loads(self._rt.info_json)

    def __repr__(self):
        return f"<enigma.MetalRuntime device={self.device!r} ({self.device_name})>"

    def empty(self, shape, dtype="f32"):
        """A zeroed :class:`enigma.Array` of ``shape`` and element type
        ``dtype`` (``"f32"``, ``"f16"``, ``"bf16"``, ``"i32"``... or numpy's
        names) in this device's memory."""
        return _empty(self._rt, shape, dtype)

    def asarray(self, data, dtype=None):
        """An :class:`enigma.Array` holding a copy of host array ``data``
        (numpy or anything numpy takes; an ``enigma.Array`` is returned as it is)."""
        return _asarray(self._rt, data, dtype)

    def texture(self, data, format):
        """A :class:`Texture` of pixel format ``format`` (``"r8unorm"``,
        ``"rgba8unorm"``, ``"r16float"``, ``"rgba16float"``, ``"r32float"``,
        ``"rgba32float"``, ``"r32uint"``, ``"r32sint"``) holding ``data``: a
        numpy array of its stored channels shaped ``(height, width)`` (or
        ``(height, width, 1)``) for one-channel formats, ``(height, width,
        4)`` for RGBA ones, of the channel's dtype (uint8 for unorm8, whose
        kernels see c/255; float16; float32; uint32; int32). ``data`` may also
        be a shape ``(height, width)``: a zeroed texture."""
        import numpy as np

        channels, dtype = _format(format)
        if isinstance(data, tuple) and len(data) == 2 and all(isinstance(d, numbers.Integral) for d in data):
            data = np.zeros(tuple(data) + ((channels,) if channels > 1 else ()), dtype=dtype)
        a = np.asarray(data)
        if a.dtype != np.dtype(dtype):
            raise DispatchError(f"a {format} texture holds {dtype} channels; got {a.dtype} data (convert with x.astype(np.{dtype}))")
        shapes = "(height, width) or (height, width, 1)" if channels == 1 else f"(height, width, {channels})"
        if not (a.ndim == 2 and channels == 1 or a.ndim == 3 and a.shape[2] == channels) or 0 in a.shape:
            raise DispatchError(f"a {format} texture takes an array shaped {shapes}, not {a.shape}")
        height, width = a.shape[:2]
        raw = np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
        return Texture(self._rt.texture(raw, format, width, height))

    def synchronize(self):
        """Waits for every dispatch queued on this device (CUDA streams)."""
        self._rt.synchronize()

    def execute(self, compiled, inputs=(), output_size=None, grid=None, threads=(1, 1, 1), *,
                outputs=None, threadgroups=None, sanitize=None, stream=None, max_loop_iterations=None, timeout=None):
        """Runs ``compiled`` once and returns its output bytes (see the module doc).

        On the simulator a dispatch that does not end is stopped by
        ``max_loop_iterations`` (loop iterations per SIMD group) or
        ``timeout`` (seconds), given here or to the runtime, with a
        :class:`DispatchError` naming the loop; Ctrl-C interrupts it
        (``KeyboardInterrupt``).
        """
        self._reports.report = None
        if isinstance(compiled, Kernel):
            compiled = _compile(compiled)
        if not isinstance(compiled, CompiledKernel):
            raise TypeError(f"execute runs what enigma.compile returns, not {type(compiled).__name__}")
        name = compiled.name
        params = compiled.params
        if (isinstance(inputs, (bytes, bytearray, memoryview)) or not hasattr(inputs, "__iter__")
                or hasattr(inputs, "__array_interface__")):
            raise DispatchError(f"kernel `{name}`: inputs must be a list (one entry per input parameter)")
        inputs = list(inputs)
        if len(inputs) > len(params):
            raise DispatchError(f"kernel `{name}` has {len(params)} parameter(s) ({_names(params)}); {len(inputs)} inputs given")
        out_params = params[len(inputs):]
        for p in out_params:
            if p.kind == "texture" and outputs is None:
                raise DispatchError(
                    f"kernel `{name}`: texture `{p.name}` needs a texture in inputs= or outputs= (rt.texture(array, format=...)); "
                    f"textures are written in place, read them back with .numpy()"
                )
            if p.kind == "texture":
                continue  # given in outputs=, written in place
            if p.is_buffer and not p.writable:
                # The kernel never writes it, so it cannot be an output: an input is missing.
                raise DispatchError(
                    f"kernel `{name}`: buffer `{p.name}` is only read by the kernel, so it is an input, but inputs= "
                    f"covers {len(inputs)} of the {len(params)} parameters ({_names(params)}): add `{p.name}` "
                    f"(and any input after it) to inputs=; outputs are the parameters after the inputs"
                )
            if not p.is_buffer:
                raise DispatchError(
                    f"kernel `{name}`: parameter `{p.name}` is a by-value {p.type_name} and needs a value in inputs "
                    f"(inputs cover {len(inputs)} of the {len(params)} parameters: {_names(params)})"
                )

        if (grid is None) == (threadgroups is None):
            raise DispatchError(f"kernel `{name}`: give exactly one of grid= (threads, dispatchThreads) and threadgroups= (dispatchThreadgroups)")
        mode, size = ("threads", grid) if grid is not None else ("threadgroups", threadgroups)
        size = _geometry(size, "grid" if mode == "threads" else "threadgroups")
        tg = _geometry(threads, "threads")

        args = []
        writeback = []  # (param, memoryview) pairs filled in place after the dispatch
        for p, value in zip(params, inputs):
            if p.kind == "texture":
                args.append(_texture_arg(value, p, name))
            elif p.is_buffer:
                data, mv = _buffer_arg(value, p, name)
                args.append(data)
                if mv is not None and p.writable:
                    writeback.append((p, mv))
            else:
                args.append(_scalar(value, p, name))

        if outputs is not None and hasattr(outputs, "__iter__") and not hasattr(outputs, "__array_interface__"):
            outputs = list(outputs)
        outs = self._outputs(name, out_params, output_size, outputs)
        for p, (init, mv) in zip(out_params, outs):
            args.append(init)
            if mv is not None:
                writeback.append((p, mv))

        sanitize = self.sanitize if sanitize is None else bool(sanitize)
        budget = self.max_loop_iterations if max_loop_iterations is None else _loop_budget(max_loop_iterations)
        limit = self.timeout if timeout is None else _timeout(timeout)
        handle, dl_stream = dispatch_stream(self._rt, args, stream)
        results, report = self._rt.dispatch(compiled._native, args, mode, size, tg, sanitize, handle, dl_stream, budget, limit)
        self._reports.report = json.loads(report)
        for p, mv in writeback:
            mv[:] = results[p.index]
        # An output the kernel never writes is read-only in the IR and comes
        # back as None: its contents are what it started with. Device memory
        # also comes back as None: the output is the object itself.
        ret = []
        for i, p in enumerate(out_params):
            if p.kind == "texture":
                ret.append(outputs[i])  # written in place: the texture given
                continue
            r = results[p.index]
            if r is None:
                init = args[p.index]
                if isinstance(init, int):
                    r = bytes(init)
                elif hasattr(init, "__array_interface__") and not isinstance(init, _enigma.Array):
                    r = memoryview(init).tobytes()
                else:
                    r = init
            ret.append(r)
        if not ret:
            return None
        return ret[0] if len(ret) == 1 else ret

    def _outputs(self, name, out_params, output_size, outputs):
        """(initial contents, in-place target or None) for each output parameter."""
        if outputs is not None and output_size is not None:
            raise DispatchError(f"kernel `{name}`: give output_size= or outputs=, not both")
        if not out_params:
            if output_size not in (None, 0) or outputs not in (None, [], ()):
                raise DispatchError(f"kernel `{name}`: every parameter is covered by inputs, so there is no output to size")
            return []
        if outputs is not None:
            outputs = list(outputs)
            if len(outputs) != len(out_params):
                raise DispatchError(f"kernel `{name}`: {len(out_params)} output(s) ({_names(out_params)}), {len(outputs)} given in outputs=")
            result = []
            for p, o in zip(out_params, outputs):
                if p.kind == "texture":
                    result.append((_texture_arg(o, p, name), None))  # written in place
                    continue
                if _is_array(o) and not hasattr(o, "__array_interface__"):
                    result.append((o, None))  # device memory or DLPack: bound in place
                    continue
                data, mv = _buffer_arg(o, p, name)
                if data is o:
                    if memoryview(o).readonly:
                        raise DispatchError(f"kernel `{name}`, output `{p.name}`: outputs= needs writable buffers (a numpy array, a bytearray), not a read-only array")
                    result.append((o, None))  # a numpy array: written back in place by the runtime
                    continue
                if mv is None:
                    raise DispatchError(f"kernel `{name}`, output `{p.name}`: outputs= needs writable buffers (a numpy array, a bytearray), not {type(o).__name__}")
                result.append((data, mv))
            return result
        if output_size is None:
            raise DispatchError(f"kernel `{name}`: output_size= (bytes) is needed for the output(s) {_names(out_params)}")
        sizes = [output_size] if isinstance(output_size, numbers.Integral) else output_size
        try:
            sizes = list(sizes)
        except TypeError:
            raise DispatchError(f"kernel `{name}`: output_size must be an int (bytes) or a list of them, not {type(output_size).__name__}") from None
        if len(sizes) != len(out_params):
            raise DispatchError(
                f"kernel `{name}` has {len(out_params)} output(s) ({_names(out_params)}) but output_size gives {len(sizes)} size(s)"
            )
        result = []
        for p, s in zip(out_params, sizes):
            if not isinstance(s, numbers.Integral) or isinstance(s, bool) or s < 0:
                raise DispatchError(f"kernel `{name}`, output `{p.name}`: output_size must be a non-negative int (bytes), not {s!r}")
            s = int(s)
            if s % p.elem_bytes:
                raise DispatchError(
                    f"kernel `{name}`, output `{p.name}`: output_size of {s} bytes is not a whole number of "
                    f"{p.type_name} elements ({p.elem_bytes} bytes each)"
                )
            result.append((s, None))
        return result


def _loop_budget(value):
    if value is None:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 <= value < 2**64:
        raise DispatchError(f"max_loop_iterations must be an int between 0 and 2**64 - 1, not {value!r}")
    return int(value)


def _timeout(value):
    if value is None:
        return None
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not 0 < value < 1e9:
        raise DispatchError(f"timeout must be a positive number of seconds, not {value!r}")
    return float(value)


def _names(params):
    return ", ".join(f"`{p.name}`" for p in params) or "none"


def _shape(shape):
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    return [int(d) for d in shape]


def _dtype_name(dtype):
    """enigma's name for a dtype given as enigma's, numpy's or torch's."""
    if isinstance(dtype, str):
        name = dtype
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


def _buffer_arg(value, p, kernel_name):
    """(what the native runtime binds, writable memoryview to fill after the
    dispatch or None) for a buffer argument. numpy arrays are checked here
    (with numpy's names in the messages) and bound in Rust; other arrays
    (``enigma.Array``, DLPack, CUDA array interface) are checked and bound
    in Rust; other buffer-protocol objects go as bytes."""
    if type(value) is _enigma.Array or (_is_array(value) and not hasattr(value, "__array_interface__")):
        return value, None
    data, mv = _buffer_bytes(value, p, kernel_name, copy=not hasattr(value, "__array_interface__"))
    if data is None:
        return value, None
    return data, mv


def _buffer_bytes(value, p, kernel_name, copy=True):
    """(bytes, writable memoryview or None) of a buffer argument, after
    checks; ``copy=False`` checks only and gives ``(None, None)``."""
    what = f"kernel `{kernel_name}`, parameter `{p.name}` ({p.type_name} buffer)"
    if isinstance(value, (str, numbers.Number)) or value is None:
        raise DispatchError(f"{what}: expected an array or other buffer, got {type(value).__name__}")
    try:
        mv = memoryview(value)
    except TypeError:
        raise DispatchError(
            f"{what}: a {type(value).__name__} has no buffer protocol; pass a numpy array (e.g. np.asarray(x, dtype=np.{_np_name(p)}))"
        ) from None
    if not mv.c_contiguous:
        raise DispatchError(f"{what}: the array is not C-contiguous (a slice with a step, a transpose...); pass np.ascontiguousarray(x)")
    raw = isinstance(value, (bytes, bytearray))
    if not raw:
        scalar = scalar_of_format(mv.format, mv.itemsize)
        ok = scalar == p.scalar or (p.scalar == "bf16" and scalar == "u16")
        if not ok:
            got = FORMAT_NAMES.get(mv.format.lstrip("@=<>!"), f"format {mv.format!r}")
            if scalar is None and mv.format.startswith((">", "!")):
                got = f"big-endian {got}"
            raise DispatchError(f"{what}: expected {_np_name(p)} data, got {got} (convert with x.astype(np.{_np_name(p).split(' ')[0]}))")
    if not copy:
        if mv.nbytes % p.elem_bytes:
            raise DispatchError(
                f"{what}: {mv.nbytes} bytes is not a whole number of {p.type_name} elements ({p.elem_bytes} bytes each)"
            )
        return None, None
    data = mv.tobytes()
    if len(data) % p.elem_bytes:
        raise DispatchError(
            f"{what}: {len(data)} bytes is not a whole number of {p.type_name} elements ({p.elem_bytes} bytes each)"
        )
    writable = None
    if not mv.readonly:
        writable = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
    return data, writable


def _np_name(p):
    return NUMPY_NAMES.get(p.scalar, p.scalar)


_FLOATS = ("f16", "bf16", "f32")


def _is_bool(value):
    """A Python bool or a numpy bool (``numpy.bool_``, called ``numpy.bool`` in numpy 2)."""
    t = type(value)
    return isinstance(value, bool) or (t.__module__ == "numpy" and t.__name__ in ("bool_", "bool"))


def _scalar(value, p, kernel_name):
    t = type(value)  # plain ints and floats first: the Rust side range-checks them
    if t is int and p.scalar != "bool":
        return value
    if t is float and p.scalar in _FLOATS:
        return value
    what = f"kernel `{kernel_name}`, parameter `{p.name}` ({p.type_name}, by value)"
    if p.scalar == "bool":
        if _is_bool(value):
            return bool(value)
        raise DispatchError(f"{what}: expected a bool, got {type(value).__module__}.{type(value).__name__}")
    if _is_bool(value):
        raise DispatchError(f"{what}: expected a number, got a bool")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        if p.scalar in ("f16", "bf16", "f32"):
            return float(value)
        raise DispatchError(f"{what}: expected an integer, got {value!r}")
    raise DispatchError(f"{what}: expected a number, got {type(value).__name__}")
