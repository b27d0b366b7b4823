"""``enigma.MetalRuntime``: a device, and ``execute`` as in seed 001.

``execute`` matches ``inputs`` and outputs to the kernel's parameters and
binds them as ``_launch`` does for a compiled kernel's call (arrays as
they are, other buffer-protocol objects as ``bytes``, numbers checked); the
native runtime (one per device for the process, ``_devices``) binds them in
Rust and dispatches, on the CUDA stream ``_devices.dispatch_stream`` picks
(``stream=``, else the caller's current torch or CuPy stream).

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
* Returns the output's bytes as a read-only ``memoryview`` (a list of them
  for several outputs, ``None`` for none): on the simulator a view of the
  simulator's own buffer, so a large output is in memory once; from a GPU
  one host copy. ``np.frombuffer(out, np.float32)`` and ``np.asarray(out)``
  view it without copying; ``bytes(out)`` copies it. An output given in
  ``outputs=`` as device memory comes back as that same object. A writable input buffer that the kernel writes is
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
from typing import Any, Dict, Optional

from . import _enigma
from . import _mlx
from ._compile import CompiledKernel, compile as _compile
from ._devices import DEVICES, DeviceName, Texture, asarray_on, dispatch_stream, empty_on, native_runtime, texture_format
from ._kernel import Kernel
from ._launch import buffer_arg, geometry, loop_budget, output_args, param_names, scalar_arg, texture_arg, timeout_seconds

DispatchError = _enigma.DispatchError


# The runtime (or None) whose last_report awaits the report of the calling
# thread's last enigma.ops call.
_library_call = threading.local()


def begin_library_call(rt: Optional[MetalRuntime]) -> None:
    """Before an ``enigma.ops`` call on the calling thread: it runs under the
    sanitizer where ``rt`` sanitizes, and its report becomes ``rt``'s
    :attr:`MetalRuntime.last_report` (None if it fails)."""
    settle_library_call()
    if rt is not None:
        rt.begin_dispatch()
    _library_call.rt = rt
    _enigma.ops_begin(bool(rt is not None and rt.sanitize))


def settle_library_call() -> None:
    """Gives the runtime of the calling thread's last ``enigma.ops`` call its report."""
    rt = getattr(_library_call, "rt", None)
    if rt is None:
        return
    _library_call.rt = None
    report = _enigma.ops_report()
    if report is not None:
        rt.end_dispatch(json.loads(report))


class MetalRuntime:
    """A device to run compiled kernels on.

    ``device``: ``"auto"`` (Metal where present, else CUDA, else the
    simulator), ``"sim"`` (the simulator; ``"cpu"`` and ``"simulator"`` are
    other names for it, and :attr:`device` reports ``"sim"``), ``"metal"``
    or ``"cuda"``. A device this build or machine does not have raises
    :class:`enigma.DeviceError` (a :class:`enigma.DispatchError`) with the
    runtime's reason. ``sanitize=True`` runs the simulator's sanitizer on
    every dispatch: problems raise :class:`enigma.SanitizerError`.
    """

    def __init__(self, device: DeviceName = "auto", sanitize: bool = False, *, max_loop_iterations: Optional[int] = None,
                 timeout: Optional[float] = None) -> None:
        if not isinstance(device, str):
            raise TypeError(f"device must be a string ({', '.join(repr(d) for d in DEVICES)}), not {type(device).__name__}")
        self._rt = native_runtime(device)
        self.sanitize = bool(sanitize)
        self.max_loop_iterations = loop_budget(max_loop_iterations)
        self.timeout = timeout_seconds(timeout)
        self._reports = threading.local()

    @property
    def native(self) -> Any:
        """The native runtime (``enigma._enigma.Runtime``) this device runs on."""
        return self._rt

    def begin_dispatch(self) -> None:
        """Clears the calling thread's :attr:`last_report` before a dispatch."""
        settle_library_call()
        self._reports.report = None

    def end_dispatch(self, report: Dict[str, Any]) -> None:
        """Records ``report`` as the calling thread's :attr:`last_report`."""
        self._reports.report = report

    @property
    def last_report(self) -> Optional[Dict[str, Any]]:
        """The report (a dict: times, notes, sanitizer findings) of the last
        ``execute`` that *the calling thread* ran on this runtime, ``None``
        before one or after one that failed. Per thread, so threads sharing
        a runtime each see their own dispatch's report. Calls of
        ``enigma.ops`` with ``rt=`` set it too (run under the sanitizer when
        :attr:`sanitize` is set): one report for the call's dispatches, with
        ``kernels``, the kernels it dispatched."""
        settle_library_call()
        return getattr(self._reports, "report", None)

    @property
    def device(self) -> str:
        """What runs the kernels: ``"sim"`` (the simulator, whichever name
        opened it), ``"metal"`` or ``"cuda"``."""
        return self._rt.device

    @property
    def device_name(self) -> str:
        """The device's own name."""
        return self._rt.device_name

    @property
    def info(self) -> Dict[str, Any]:
        """The device's description and limits."""
        return json.loads(self._rt.info_json)

    def __repr__(self) -> str:
        return f"<enigma.MetalRuntime device={self.device!r} ({self.device_name})>"

    def empty(self, shape: Any, dtype: Any = "f32") -> _enigma.Array:
        """A zeroed :class:`enigma.Array` of ``shape`` and element type
        ``dtype`` (``"f32"``, ``"f16"``, ``"bf16"``, ``"i32"``... or numpy's
        names) in this device's memory."""
        return empty_on(self._rt, shape, dtype)

    def asarray(self, data: Any, dtype: Any = None) -> _enigma.Array:
        """An :class:`enigma.Array` holding a copy of host array ``data``
        (numpy or anything numpy takes; an ``enigma.Array`` is returned as it is)."""
        return asarray_on(self._rt, data, dtype)

    def texture(self, data: Any, format: str) -> Texture:
        """A :class:`Texture` of pixel format ``format`` (``"r8unorm"``,
        ``"rgba8unorm"``, ``"r16float"``, ``"rgba16float"``, ``"r32float"``,
        ``"rgba32float"``, ``"r32uint"``, ``"r32sint"``) holding ``data``: a
        numpy array of its stored channels shaped ``(height, width)`` (or
        ``(height, width, 1)``) for one-channel formats, ``(height, width,
        4)`` for RGBA ones, of the channel's dtype (uint8 for unorm8, whose
        kernels see c/255; float16; float32; uint32; int32). ``data`` may also
        be a shape ``(height, width)``: a zeroed texture."""
        import numpy as np

        channels, dtype = texture_format(format)
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

    def synchronize(self) -> None:
        """Waits for every dispatch queued on this device (CUDA streams)."""
        self._rt.synchronize()

    def execute(self, compiled: Any, inputs: Any = (), output_size: Any = None, grid: Any = None, threads: Any = (1, 1, 1), *,
                outputs: Any = None, threadgroups: Any = None, sanitize: Optional[bool] = None, stream: Any = None,
                max_loop_iterations: Optional[int] = None, timeout: Optional[float] = None) -> Any:
        """Runs ``compiled`` once and returns a view of its output bytes (see the module doc).

        On the simulator a dispatch that does not end is stopped by
        ``max_loop_iterations`` (loop iterations per SIMD group) or
        ``timeout`` (seconds), given here or to the runtime, with a
        :class:`DispatchError` naming the loop; Ctrl-C interrupts it
        (``KeyboardInterrupt``).

        Args:
            compiled: what :func:`enigma.compile` returns (or a kernel, compiled here).
            inputs: one entry per input parameter, in order.
            output_size: bytes of each output (an int, or a list for several).
            grid: threads in the grid (``dispatchThreads``), 1 to 3 ints.
            threads: threads per threadgroup, 1 to 3 ints.
            outputs: writable buffers for the outputs, filled in place.
            threadgroups: threadgroups in the grid (``dispatchThreadgroups``).
            sanitize: run the sanitizer (default: the runtime's setting).
            stream: a CUDA stream (an int handle, a torch or CuPy stream).
            max_loop_iterations: the simulator's loop budget per SIMD group.
            timeout: the simulator's time limit in seconds.

        Returns:
            a read-only ``memoryview`` of the output's bytes (a list for
            several outputs, None for none), viewed by numpy without a copy;
            an output given as device memory comes back as that object. When an
            input is an ``mx.array``, each output made here comes back as a
            1-D ``mx.array`` of the output's element type instead of bytes.
        """
        self.begin_dispatch()
        if isinstance(compiled, Kernel):
            compiled = _compile(compiled)
        if not isinstance(compiled, CompiledKernel):
            raise TypeError(f"execute runs what enigma.compile returns, not {type(compiled).__name__}")
        name = compiled.name
        if (isinstance(inputs, (bytes, bytearray, memoryview)) or not hasattr(inputs, "__iter__")
                or hasattr(inputs, "__array_interface__")):
            raise DispatchError(f"kernel `{name}`: inputs must be a list (one entry per input parameter)")
        inputs = list(inputs)
        if outputs is not None and hasattr(outputs, "__iter__") and not hasattr(outputs, "__array_interface__"):
            outputs = list(outputs)
        # Buffers that take their shapes from the arrays passed: the inputs, then outputs=.
        compiled, sizes = compiled.for_arrays(inputs + (outputs if isinstance(outputs, list) else []))
        params = compiled.params
        if len(inputs) > len(params):
            raise DispatchError(f"kernel `{name}` has {len(params)} parameter(s) ({param_names(params)}); {len(inputs)} inputs given")
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
                    f"covers {len(inputs)} of the {len(params)} parameters ({param_names(params)}): add `{p.name}` "
                    f"(and any input after it) to inputs=; outputs are the parameters after the inputs"
                )
            if not p.is_buffer:
                raise DispatchError(
                    f"kernel `{name}`: parameter `{p.name}` is a by-value {p.type_name} and needs a value in inputs "
                    f"(inputs cover {len(inputs)} of the {len(params)} parameters: {param_names(params)})"
                )

        if (grid is None) == (threadgroups is None):
            raise DispatchError(f"kernel `{name}`: give exactly one of grid= (threads, dispatchThreads) and threadgroups= (dispatchThreadgroups)")
        mode, size = ("threads", grid) if grid is not None else ("threadgroups", threadgroups)
        size = geometry(size, "grid" if mode == "threads" else "threadgroups")
        tg = geometry(threads, "threads")

        args = []
        writeback = []  # (param, memoryview) pairs filled in place after the dispatch
        for p, value in zip(params, inputs):
            if p.kind == "texture":
                args.append(texture_arg(value, p, name))
            elif p.is_buffer:
                data, mv = buffer_arg(value, p, name)
                args.append(data)
                if mv is not None and p.writable:
                    writeback.append((p, mv))
            else:
                args.append(scalar_arg(value, p, name))

        outs = output_args(name, out_params, output_size, outputs)
        for p, (init, mv) in zip(out_params, outs):
            args.append(init)
            if mv is not None:
                writeback.append((p, mv))
        args.extend(sizes)

        sanitize = self.sanitize if sanitize is None else bool(sanitize)
        budget = self.max_loop_iterations if max_loop_iterations is None else loop_budget(max_loop_iterations)
        limit = self.timeout if timeout is None else timeout_seconds(timeout)
        handle, dl_stream = dispatch_stream(self._rt, args, stream)
        results, report = self._rt.dispatch(compiled.native, args, mode, size, tg, sanitize, handle, dl_stream, budget, limit)
        self.end_dispatch(json.loads(report))
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
                    r = memoryview(bytes(init))
                elif hasattr(init, "__array_interface__") and not isinstance(init, _enigma.Array):
                    r = memoryview(memoryview(init).tobytes())
                else:
                    r = init
            ret.append(r)
        if _mlx.any_mlx(inputs):
            ret = [_mlx.from_bytes(r, p.scalar) if isinstance(r, (bytes, bytearray, memoryview)) else r
                   for p, r in zip(out_params, ret)]
        if not ret:
            return None
        return ret[0] if len(ret) == 1 else ret
